// The flash-attention emulator on one head of N = 4096 keys and queries,
// d = 128, against a plain fp32 attention loop on the same inputs in the
// same run (the ratio is the figure: docs/attention.md), and every GPU kernel
// description of the registry plus the Triton example's file on the same head
// (their ratios to pytorch_sdpa_flash_sm90's single split are the cost of
// describing a kernel as data). All use every core the host gives (the
// emulator's slabs of 16 rows, the baseline's rows); threads_speedup runs the
// head on one thread and on every core in the same iterations, and reports
// the ratio.
#include <benchmark/benchmark.h>

#include <bitexact/attention/flash_forward.hpp>
#include <bitexact/attention/kernel_json.hpp>
#include <bitexact/attention/kernels.hpp>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <cmath>
#include <random>
#include <thread>
#include <vector>

using namespace bitexact;
using namespace bitexact::attention;

namespace {

constexpr int rows = 4096, head_dim = 128;

struct head_inputs {
  std::vector<bfloat16> q, k, v;
  head_inputs() {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal;
    for (auto* x : {&q, &k, &v}) {
      x->resize(static_cast<std::size_t>(rows) * head_dim);
      for (bfloat16& value : *x) value = ptx::cvt_rn_bf16_f32(from_host(normal(rng)));
    }
  }
};

const head_inputs& inputs() {
  static const head_inputs h;
  return h;
}

void bm_emulator(benchmark::State& state, bool single_split) {
  const attention_shape shape{1, 1, rows, rows, head_dim, false};
  flash_kernel kernel = pytorch_sdpa_flash_sm90(shape);  // B*H = 1: the split-KV path, 4 splits
  if (single_split) kernel = pytorch_sdpa_flash_sm90(attention_shape{1, 4, rows, rows, head_dim, false});
  std::vector<bfloat16> o(static_cast<std::size_t>(rows) * head_dim);
  std::vector<float32> lse(rows);
  ptx::mufu_tables::shared();  // the tables' one-time load (about a second) is not part of a run
  for (auto _ : state) {
    flash_forward_head(kernel, shape, inputs().q, inputs().k, inputs().v, o, lse);
    benchmark::DoNotOptimize(o.data());
  }
  state.counters["splits"] = kernel.splits;
}

// One description on the same head; a call of 4 heads, so that FA2's
// heuristic takes its single-split kernel.
void bm_description(benchmark::State& state, const kernel_description& description) {
  const attention_shape shape{1, 1, rows, rows, head_dim, false};
  const flash_kernel kernel = resolve(description, attention_shape{1, 4, rows, rows, head_dim, false});
  std::vector<bfloat16> o(static_cast<std::size_t>(rows) * head_dim);
  std::vector<float32> lse(rows);
  ptx::mufu_tables::shared();
  for (auto _ : state) {
    flash_forward_head(kernel, shape, inputs().q, inputs().k, inputs().v, o, lse);
    benchmark::DoNotOptimize(o.data());
  }
}

// The single kernel's head on one thread, then on every core, in each
// iteration: the time is every core's, the counters both times and their
// ratio (speedup); a result that differs in any bit between the two is an error.
void bm_threads_speedup(benchmark::State& state) {
  const attention_shape shape{1, 1, rows, rows, head_dim, false};
  const flash_kernel kernel = pytorch_sdpa_flash_sm90(attention_shape{1, 4, rows, rows, head_dim, false});
  std::vector<bfloat16> o_one(static_cast<std::size_t>(rows) * head_dim), o_all(o_one.size());
  std::vector<float32> lse_one(rows), lse_all(rows);
  ptx::mufu_tables::shared();
  using clock = std::chrono::steady_clock;
  double one_thread = 0, every_core = 0;
  for (auto _ : state) {
    const auto start = clock::now();
    flash_forward_head(kernel, shape, inputs().q, inputs().k, inputs().v, o_one, lse_one, no_observer{}, 1);
    const auto middle = clock::now();
    flash_forward_head(kernel, shape, inputs().q, inputs().k, inputs().v, o_all, lse_all, no_observer{}, 0);
    const auto end = clock::now();
    one_thread += std::chrono::duration<double>(middle - start).count();
    every_core += std::chrono::duration<double>(end - middle).count();
    state.SetIterationTime(std::chrono::duration<double>(end - middle).count());
    if (o_one != o_all || lse_one != lse_all) state.SkipWithError("one thread and every core gave other bits");
  }
  const auto iterations = static_cast<double>(state.iterations());
  state.counters["cores"] = threads_or_cores(0);
  state.counters["one_thread_ms"] = one_thread / iterations * 1e3;
  state.counters["every_core_ms"] = every_core / iterations * 1e3;
  state.counters["speedup"] = one_thread / every_core;
}

// softmax(Q K^T / sqrt(d)) V in host floats, row by row, rows across threads.
void bm_fp32_loop(benchmark::State& state) {
  const auto& h = inputs();
  std::vector<float> q(h.q.size()), k(h.k.size()), v(h.v.size()), o(h.q.size());
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = std::bit_cast<float>(std::uint32_t{h.q[i].bits} << 16);
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = std::bit_cast<float>(std::uint32_t{h.k[i].bits} << 16);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::bit_cast<float>(std::uint32_t{h.v[i].bits} << 16);
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const auto run_rows = [&](int first, int step) {
    std::vector<float> p(rows);
    for (int r = first; r < rows; r += step) {
      float m = -INFINITY;
      for (int j = 0; j < rows; ++j) {
        float s = 0;
        for (int c = 0; c < head_dim; ++c) s += q[r * head_dim + c] * k[j * head_dim + c];
        p[j] = s * scale;
        m = std::max(m, p[j]);
      }
      float sum = 0;
      for (int j = 0; j < rows; ++j) sum += (p[j] = std::exp(p[j] - m));
      for (int c = 0; c < head_dim; ++c) o[r * head_dim + c] = 0;
      for (int j = 0; j < rows; ++j)
        for (int c = 0; c < head_dim; ++c) o[r * head_dim + c] += p[j] * v[j * head_dim + c];
      for (int c = 0; c < head_dim; ++c) o[r * head_dim + c] /= sum;
    }
  };
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (auto _ : state) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(run_rows, t, threads);
    for (std::thread& thread : pool) thread.join();
    benchmark::DoNotOptimize(o.data());
  }
}

}  // namespace

BENCHMARK(bm_fp32_loop)->Name("fp32_attention_loop/n4096_d128")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(bm_emulator, split_kv, false)->Name("pytorch_sdpa_flash_sm90/n4096_d128/split_kv")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(bm_emulator, single_split, true)->Name("pytorch_sdpa_flash_sm90/n4096_d128/single_split")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(bm_threads_speedup)->Name("pytorch_sdpa_flash_sm90/n4096_d128/threads_speedup")->Unit(benchmark::kMillisecond)->UseManualTime();

int main(int argc, char** argv) {
  std::vector<kernel_description> descriptions;
  // The bf16 descriptions: bm_description's operands are bf16 (an fp8 kernel refuses them).
  for (const preset& p : presets())
    if (p.description != nullptr && !is_fp8(p.description().arithmetic.inputs)) descriptions.push_back(p.description());
  std::ifstream file(BITEXACT_TRITON_EXAMPLE);
  std::stringstream text;
  text << file.rdbuf();
  descriptions.push_back(kernel_from_json(text.str()));
  for (const kernel_description& d : descriptions)
    benchmark::RegisterBenchmark((d.name + "/n4096_d128/description").c_str(), bm_description, d)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
