// The leading indicator (attention/repeated_max.hpp) on S of one call
// [1, 16, 4096, 4096], d = 128 (PyTorch's single-pass kernel, blocks of 64
// keys), against a plain row-max pass over the same S in host floats in the
// same run: the ratio is the figure (docs/bias.md). All on one thread.
#include <benchmark/benchmark.h>

#include <bitexact/attention/repeated_max.hpp>
#include <bitexact/attention/kernels.hpp>
#include <algorithm>
#include <random>
#include <vector>

using namespace bitexact;
using namespace bitexact::attention;

namespace {

constexpr int heads = 16, rows = 4096, head_dim = 128;
const attention_shape shape{1, heads, rows, rows, head_dim, false};

// Raw scores of unit-normal q and k at d = 128: normal with deviation sqrt(128).
const std::vector<float32>& scores() {
  static const std::vector<float32> s = [] {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 11.3f);
    std::vector<float32> values(static_cast<std::size_t>(heads) * rows * rows);
    for (float32& x : values) x = from_host(normal(rng));
    return values;
  }();
  return s;
}

void bm_row_max(benchmark::State& state) {
  const std::vector<float32>& s = scores();
  std::vector<float> row_max(static_cast<std::size_t>(heads) * rows);
  for (auto _ : state) {
    for (std::size_t row = 0; row < row_max.size(); ++row) {
      const float32* x = s.data() + row * rows;
      float m = to_host(x[0]);
      for (int j = 1; j < rows; ++j) m = std::max(m, to_host(x[j]));
      row_max[row] = m;
    }
    benchmark::DoNotOptimize(row_max.data());
  }
  state.counters["scores"] = static_cast<double>(s.size());
}

void bm_indicator(benchmark::State& state, bool stabilized) {
  const std::vector<float32>& s = scores();
  const flash_kernel kernel = stabilized ? pytorch_sdpa_flash_sm90_stabilized(shape) : pytorch_sdpa_flash_sm90(shape);
  p_bar_one_arguments();  // the tables' load and the interval's bisection, once, are not part of a run
  int repeated = 0, twice = 0;
  for (auto _ : state) {
    repeated = twice = 0;
    for (const repeated_max_counts& head : count_repeated_maxima_per_head(kernel, shape, s)) {
      repeated += head.rows_with_max_repeated;
      twice += head.rows_with_p_bar_one_twice;
    }
    benchmark::DoNotOptimize(repeated);
  }
  state.counters["splits"] = kernel.splits;
  state.counters["block_n"] = kernel.block_n;
  state.counters["rows_max_repeated"] = repeated;
  state.counters["rows_p_bar_one_twice"] = twice;
}

}  // namespace

BENCHMARK(bm_row_max)->Name("row_max_pass/b1_h16_n4096")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(bm_indicator, standard, false)->Name("repeated_max/pytorch_sdpa_flash_sm90/b1_h16_n4096_d128")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(bm_indicator, stabilized, true)->Name("repeated_max/pytorch_sdpa_flash_sm90_stabilized/b1_h16_n4096_d128")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
