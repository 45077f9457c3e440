// Throughput of the GEMM emulator (matmul/chain.hpp) against the tensor-core
// model it is built from, in the same run; items = fused products (M N K).
//
//   mma_m16n8k16_tiles   the existing model on 16x8x16 tiles (fast path, one
//                        thread): the baseline.
//   chain_products/T/S   a bf16 S x S x S product's chain over K into fp32, the
//                        operands packed once, on T threads (0: every core).
//   gemm_bf16/S          a bf16 S x S x S product through the whole emulator
//                        (preset cublas_sm90: packing, chains, epilogue) on
//                        every core: what `bitexact matmul` costs. S = 4096
//                        (6.9e10 products) runs once: issue 30 asks for it
//                        in under 60 s on a 2-core machine.
//   gemm_e4m3/S          an e4m3 S x S x S torch._scaled_mm product (preset
//                        cublas_sm90_fp8) on one thread (the generic fused
//                        step: no fast path for fp8 yet).
//
// docs/performance.md has the ratios.
#include <benchmark/benchmark.h>

#include <bitexact/matmul/chain.hpp>
#include <bitexact/matmul/gemm.hpp>
#include <bitexact/matmul/kernels.hpp>

#include <array>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using namespace bitexact;

bfloat16 random_bf16(std::mt19937_64& rng) {
  const auto bits = rng();
  const auto biased = static_cast<std::uint32_t>(127 - 8 + (bits >> 8) % 17);
  return bfloat16::from_bits(static_cast<std::uint32_t>(((bits & 1) << 15) | (biased << 7) | ((bits >> 1) & 0x7F)));
}

std::vector<bfloat16> random_matrix(std::size_t size, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<bfloat16> x(size);
  for (bfloat16& v : x) v = random_bf16(rng);
  return x;
}

void mma_m16n8k16_tiles(benchmark::State& state) {
  constexpr std::size_t tiles = 32;
  const std::vector<bfloat16> a = random_matrix(tiles * 256, 1), b = random_matrix(tiles * 128, 2);
  std::array<float32, 128> d{};
  for (auto _ : state) {
    for (std::size_t t = 0; t < tiles; ++t) {
      mma_m16n8k16<fp32, bf16>(sm90_tensor_core, std::span<const bfloat16, 256>(a.data() + t * 256, 256),
                               std::span<const bfloat16, 128>(b.data() + t * 128, 128), d, d);
      benchmark::DoNotOptimize(d);
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(tiles * 16 * 8 * 16));
}

void chain_products(benchmark::State& state) {
  const auto threads = static_cast<unsigned>(state.range(0));
  const auto size = static_cast<std::size_t>(state.range(1));
  const std::vector<bfloat16> a = random_matrix(size * size, 3), b = random_matrix(size * size, 4);
  const matmul::packed_operands<bf16> p = matmul::pack<bf16>(a, b, size, size, size);
  std::vector<float32> d(size * size);
  for (auto _ : state) {
    matmul::chain_products<fp32, bf16>(sm90_tensor_core, p, 0, p.k_steps, d, threads);
    benchmark::DoNotOptimize(d.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(size * size * size));
}

// torch._scaled_mm's e4m3 product (the generic fused step, 32 products a step), one thread.
void gemm_e4m3(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  std::mt19937_64 rng(7);
  std::vector<value<e4m3>> a(size * size), b(size * size);
  for (auto& x : a) x = value<e4m3>::from_bits(static_cast<std::uint32_t>(rng() % 0x7F));
  for (auto& x : b) x = value<e4m3>::from_bits(static_cast<std::uint32_t>(rng() % 0x7F) | 0x80u * (rng() & 1));
  const float32 one = from_host(1.0f);
  matmul::gemm_call<e4m3, e4m3, bf16> call;
  call.shape = {size, size, size};
  call.a = a, call.b = b, call.threads = 1;
  call.a_scales = call.b_scales = matmul::scale_layout::tensor;
  call.scale_a = call.scale_b = std::span<const float32>(&one, 1);
  const matmul::gemm_description& d8 = matmul::find_gemm_preset("cublas_sm90_fp8");
  for (auto _ : state) {
    const auto d = matmul::gemm(d8, call);
    benchmark::DoNotOptimize(d.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(size * size * size));
}

void gemm_bf16(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  const std::vector<bfloat16> a = random_matrix(size * size, 5), b = random_matrix(size * size, 6);
  matmul::gemm_call<bf16, bf16, bf16> call;
  call.shape = {size, size, size};
  call.a = a, call.b = b;
  const matmul::gemm_description& d = matmul::find_gemm_preset("cublas_sm90");
  for (auto _ : state) {
    const auto out = matmul::gemm(d, call);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(size * size * size));
}

}  // namespace

BENCHMARK(mma_m16n8k16_tiles);
BENCHMARK(gemm_bf16)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(gemm_bf16)->Arg(4096)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();
BENCHMARK(gemm_e4m3)->Arg(128)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(chain_products)->ArgNames({"threads", "size"})->Args({1, 512})->Args({0, 512})->Args({0, 1024})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
