// A GEMM kernel as data, and the one emulator that reads it: D = A B for A
// [M, K] and B [K, N], each output the tensor core's chain over K
// (chain.hpp), K cut into splits whose fp32 partial sums a reduction adds in
// a fixed order, then the output rounding. What tells one kernel from another
// (the unit, the splits, the reduction, the output) is a gemm_kernel; the
// registry (kernels.hpp) names the ones captured from real GPUs.
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "../core/format.hpp"
#include "../core/operations.hpp"
#include "../hardware/alu.hpp"
#include "../hardware/mma.hpp"
#include "chain.hpp"

namespace bitexact::matmul {

// How the k steps are dealt to the splits: split s of S takes the steps
// [s * per_split, (s + 1) * per_split), per_split = ceil(steps / S) rounded up
// to a multiple of steps_multiple; the last takes what is left (a split left
// with none adds +0).
struct split_k {
  int splits = 1;
  int steps_multiple = 1;  // in k steps of 16
};

// What a GEMM kernel computes with, resolved for one shape.
struct gemm_kernel {
  fused_sum_unit unit = sm90_tensor_core;
  split_k split;
};

struct gemm_shape {
  std::size_t m = 0, n = 0, k = 0;
};

// The k steps [first, end) of split s.
inline std::pair<std::size_t, std::size_t> split_steps(const split_k& split, std::size_t steps, int s) {
  const auto splits = static_cast<std::size_t>(split.splits);
  const auto multiple = static_cast<std::size_t>(split.steps_multiple);
  std::size_t per_split = (steps + splits - 1) / splits;
  per_split = (per_split + multiple - 1) / multiple * multiple;
  const std::size_t first = std::min(steps, static_cast<std::size_t>(s) * per_split);
  return {first, s + 1 == split.splits ? steps : std::min(steps, first + per_split)};
}

// D = A B, rounded to Out: a [M][K], b [K][N] row-major; every core unless threads says otherwise.
template <format Out, format In>
std::vector<value<Out>> gemm(const gemm_kernel& kernel, const gemm_shape& shape, std::span<const value<In>> a,
                             std::span<const value<In>> b, unsigned threads = 0) {
  if (a.size() != shape.m * shape.k || b.size() != shape.k * shape.n)
    throw std::invalid_argument("gemm: a needs M x K values and b K x N");
  if (kernel.split.splits < 1 || kernel.split.steps_multiple < 1)
    throw std::invalid_argument("gemm: splits and steps_multiple must be at least 1");
  const packed_operands<In> p = pack(a, b, shape.m, shape.n, shape.k);
  std::vector<float32> sum(shape.m * shape.n), partial(shape.m * shape.n);
  for (int s = 0; s < kernel.split.splits; ++s) {
    const auto [first, end] = split_steps(kernel.split, p.k_steps, s);
    chain_products<fp32, In>(kernel.unit, p, first, end, s == 0 ? std::span<float32>(sum) : std::span<float32>(partial),
                             threads);
    if (s > 0)
      for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = ptx::add_f32(sum[i], partial[i]);
  }
  std::vector<value<Out>> d(sum.size());
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = convert<Out>(sum[i], ptx::gpu_environment()).result;
  return d;
}

}  // namespace bitexact::matmul
