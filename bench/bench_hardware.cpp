// Throughput of the hardware models against naive host loops in the same run.
//
//   mma_m16n8k16 bf16 -> f32   the tensor-core model on whole 16x8x16 tiles
//                              (fast path, no observer); items = products.
//   fused_dot reference        the same tiles through fused_dot, one output at
//                              a time (the generic, traceable path).
//   host float tile            the same 16x8x16 dot products with float
//                              (acc = c; acc += a*b), a naive FP32 loop.
//   ex2_approx_ftz             MUFU ex2 model lookups, x <= 0 (the attention case);
//   host exp2f                 the C library's exp2f on the same inputs.
//
// Ratios (model / host) are worked out from the items/s in docs/performance.md.
// Inputs are random normal bf16 with exponents within +-8 of the bias and
// random fp32 C, so steps see alignment losses, cancellation and carries;
// special values (which take the generic path) are left out on purpose:
// they are rare in real tiles, and tests/test_mma_fast_path.cpp proves them.
#include <benchmark/benchmark.h>

#include <bitexact/hardware/mma.hpp>
#include <bitexact/hardware/mufu.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using namespace bitexact;

constexpr std::size_t tile_count = 32;  // 32 tiles of A, B, C: about 48 KiB, stays in L2
constexpr std::int64_t products_per_tile = 16 * 8 * 16;

struct tile {
  std::array<bfloat16, 256> a;
  std::array<bfloat16, 128> b;
  std::array<float32, 128> c;
};

bfloat16 random_bf16(std::mt19937_64& rng) {
  const auto bits = rng();
  const auto biased = static_cast<std::uint32_t>(127 - 8 + (bits >> 8) % 17);
  return bfloat16::from_bits(static_cast<std::uint32_t>(((bits & 1) << 15) | (biased << 7) | ((bits >> 1) & 0x7F)));
}

float32 random_fp32(std::mt19937_64& rng) {
  const auto bits = rng();
  const auto biased = static_cast<std::uint32_t>(127 - 8 + (bits >> 40) % 17);
  return float32::from_bits(static_cast<std::uint32_t>(((bits & 1) << 31) | (biased << 23) | ((bits >> 1) & 0x7FFFFF)));
}

std::vector<tile> make_tiles() {
  std::mt19937_64 rng(2024);
  std::vector<tile> tiles(tile_count);
  for (auto& t : tiles) {
    for (auto& x : t.a) x = random_bf16(rng);
    for (auto& x : t.b) x = random_bf16(rng);
    for (auto& x : t.c) x = random_fp32(rng);
  }
  return tiles;
}

void mma_bf16_f32(benchmark::State& state) {
  const auto tiles = make_tiles();
  std::array<float32, 128> d{};
  for (auto _ : state) {
    for (const auto& t : tiles) {
      mma_m16n8k16<fp32, bf16>(sm90_tensor_core, t.a, t.b, t.c, d);
      benchmark::DoNotOptimize(d);
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(tile_count) * products_per_tile);
}

void mma_bf16_f32_fused_dot_reference(benchmark::State& state) {
  const auto tiles = make_tiles();
  std::array<float32, 128> d{};
  for (auto _ : state) {
    for (const auto& t : tiles) {
      const std::span<const bfloat16> a(t.a), b(t.b);
      for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 8; ++n)
          d[m * 8 + n] = fused_dot<fp32>(sm90_tensor_core, a.subspan(m * 16, 16), b.subspan(n * 16, 16), t.c[m * 8 + n]).result;
      benchmark::DoNotOptimize(d);
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(tile_count) * products_per_tile);
}

// The same tiles as host floats: A row-major, B column-major, as the model reads them.
void host_float_tile(benchmark::State& state) {
  const auto tiles = make_tiles();
  struct host_tile {
    std::array<float, 256> a;
    std::array<float, 128> b, c;
  };
  std::vector<host_tile> host(tile_count);
  for (std::size_t i = 0; i < tile_count; ++i) {
    for (int j = 0; j < 256; ++j) host[i].a[j] = to_host(convert<fp32>(tiles[i].a[j]).result);
    for (int j = 0; j < 128; ++j) host[i].b[j] = to_host(convert<fp32>(tiles[i].b[j]).result);
    for (int j = 0; j < 128; ++j) host[i].c[j] = to_host(tiles[i].c[j]);
  }
  std::array<float, 128> d{};
  for (auto _ : state) {
    for (const auto& t : host) {
      for (int m = 0; m < 16; ++m)
        for (int n = 0; n < 8; ++n) {
          float acc = t.c[m * 8 + n];
          for (int k = 0; k < 16; ++k) acc += t.a[m * 16 + k] * t.b[n * 16 + k];
          d[m * 8 + n] = acc;
        }
      benchmark::DoNotOptimize(d);
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(tile_count) * products_per_tile);
}

BENCHMARK(mma_bf16_f32);
BENCHMARK(mma_bf16_f32_fused_dot_reference);
BENCHMARK(host_float_tile);

constexpr std::size_t ex2_input_count = 4096;

// x <= 0 as softmax feeds ex2: random fp32 in (-64, 0].
std::vector<float> ex2_inputs() {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> uniform(-64.0f, 0.0f);
  std::vector<float> xs(ex2_input_count);
  for (auto& x : xs) x = uniform(rng);
  return xs;
}

void mufu_ex2_approx_ftz(benchmark::State& state) {
  const auto xs = ex2_inputs();
  const ptx::mufu_tables& tables = ptx::mufu_tables::shared();  // loaded once, outside the timing
  for (auto _ : state) {
    for (const float x : xs) {
      float32 r = ptx::ex2_approx_ftz(from_host(x), tables);
      benchmark::DoNotOptimize(r);
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(ex2_input_count));
}

void host_exp2f(benchmark::State& state) {
  const auto xs = ex2_inputs();
  for (auto _ : state) {
    for (const float x : xs) {
      float r = std::exp2f(x);
      benchmark::DoNotOptimize(r);
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(ex2_input_count));
}

BENCHMARK(mufu_ex2_approx_ftz);
BENCHMARK(host_exp2f);

}  // namespace

BENCHMARK_MAIN();
