// A GEMM kernel as data, and the one emulator that reads it: D = A B (+ bias)
// for A [M, K] and B [K, N], each output the tensor core's chain over K
// (chain.hpp). cuBLAS's split-K kernels cut K into splits whose fp32 partial
// sums its reduce kernel adds in split order; the epilogue adds the bias in
// fp32 and rounds once to the output format.
//
// Evidence: tests/data/matmul (cuda/capture/matmul_capture.py, cuBLAS 13.1 on
// an H200 under torch 2.11; tools/analysis/matmul_rules.py states the rules
// and the alternatives they rule out), replayed by tests/test_matmul.cpp.
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "../core/format.hpp"
#include "../core/operations.hpp"
#include "../hardware/alu.hpp"
#include "../hardware/mma.hpp"
#include "chain.hpp"

namespace bitexact::matmul {

// What a GEMM kernel computes with, for one call.
struct gemm_kernel {
  fused_sum_unit unit = sm90_tensor_core;
  // cuBLAS's numSplitsK (its heuristic's choice for the shape, in the
  // cuBLASLt log; the kernel name does not carry it): split j takes K's
  // [j * chunk, (j + 1) * chunk), chunk = ceil(K / splits) rounded up to the
  // kernel's K tile (64 for the nvjet_sm90 kernels: the first number of the
  // name's second group), the last what is left.
  int splits = 1;
  std::size_t k_tile = 64;
};

struct gemm_shape {
  std::size_t m = 0, n = 0, k = 0;
};

// The k steps [first, end) of split s (see gemm_kernel::splits).
inline std::pair<std::size_t, std::size_t> split_steps(const gemm_kernel& kernel, std::size_t k, int s) {
  const auto splits = static_cast<std::size_t>(kernel.splits);
  const std::size_t chunk = ((k + splits - 1) / splits + kernel.k_tile - 1) / kernel.k_tile * kernel.k_tile;
  const std::size_t steps = (k + k_step - 1) / k_step;
  const std::size_t first = std::min(steps, static_cast<std::size_t>(s) * chunk / k_step);
  return {first, s + 1 == kernel.splits ? steps : std::min(steps, first + chunk / k_step)};
}

inline void check_kernel(const gemm_kernel& kernel) {
  if (kernel.splits < 1) throw std::invalid_argument("gemm: splits must be at least 1");
  if (kernel.k_tile < k_step || kernel.k_tile % k_step != 0)
    throw std::invalid_argument("gemm: k_tile must be a positive multiple of 16");
}

// D = A B (+ bias[n] on every row), rounded to Out: a [M][K] and b [K][N]
// row-major, bias empty or [N]; on every core unless threads says otherwise.
template <format Out, format In>
std::vector<value<Out>> gemm(const gemm_kernel& kernel, const gemm_shape& shape, std::span<const value<In>> a,
                             std::span<const value<In>> b, std::span<const value<Out>> bias = {},
                             unsigned threads = 0) {
  check_kernel(kernel);
  if (a.size() != shape.m * shape.k || b.size() != shape.k * shape.n)
    throw std::invalid_argument("gemm: a needs M x K values and b K x N");
  if (!bias.empty() && bias.size() != shape.n) throw std::invalid_argument("gemm: bias needs N values");
  const packed_operands<In> p = pack(a, b, shape.m, shape.n, shape.k);
  std::vector<float32> sum(shape.m * shape.n), partial(kernel.splits > 1 ? shape.m * shape.n : 0);
  for (int s = 0; s < kernel.splits; ++s) {
    const auto [first, end] = split_steps(kernel, shape.k, s);
    chain_products<fp32, In>(kernel.unit, p, first, end, s == 0 ? std::span<float32>(sum) : std::span<float32>(partial),
                             threads);
    // The reduce kernel: ((p0 + p1) + p2) + ..., fp32 round to nearest.
    if (s > 0)
      for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = ptx::add_f32(sum[i], partial[i]);
  }
  std::vector<value<Out>> d(sum.size());
  for (std::size_t i = 0; i < d.size(); ++i) {
    const float32 out = bias.empty() ? sum[i] : ptx::add_f32(sum[i], convert<fp32>(bias[i % shape.n]).result);
    d[i] = convert<Out>(out, ptx::gpu_environment()).result;
  }
  return d;
}

}  // namespace bitexact::matmul
