// torch._scaled_mm's fp8 products as cuBLAS's sm_90 kernels compute them:
// D = (A B) * scale_a * scale_b for A [M, K] and B [K, N] in e4m3 or e5m2,
// each output the fp8 tensor core's chain of 32-product steps
// (sm90_tensor_core_fp8), either over all of K (use_fast_accum=True) or over
// each 128 of K, each chunk's result added into an fp32 accumulator
// ("promotion", the default); then the product of the two scales, rounded to
// fp32, multiplies the sum in fp32, and one rounding gives the output.
//
// Evidence: tests/data/matmul (cuBLAS 13.1 on an H200, torch 2.11; 14 cases,
// tensor-wise and row-wise scales, e4m3 x e4m3 and e5m2 x e4m3, bf16 and fp32
// out), replayed by tests/test_matmul_replay.cpp; tools/analysis/matmul_rules.py
// lists the rules ruled out (promoting every 32, 64 or 256 of K; (acc * sa) * sb).
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <vector>

#include "../core/format.hpp"
#include "../core/operations.hpp"
#include "../hardware/alu.hpp"
#include "../hardware/mma.hpp"
#include "../host/parallel.hpp"
#include "gemm.hpp"

namespace bitexact::matmul {

struct scaled_gemm_kernel {
  fused_sum_unit unit = sm90_tensor_core_fp8;
  // K per chain before its result is added into the fp32 accumulator: 0 for
  // one chain over K (use_fast_accum=True), 128 for cuBLAS's default (_algo2_).
  std::size_t promotion_k = 128;
};

// D = (A B) * sa * sb, rounded to Out: a [M][K] (InA), b [K][N] (InB)
// row-major; scale_a one value (per tensor) or M (row-wise), scale_b one or N.
template <format Out, format InA, format InB>
std::vector<value<Out>> scaled_gemm(const scaled_gemm_kernel& kernel, const gemm_shape& shape,
                                    std::span<const value<InA>> a, std::span<const value<InB>> b,
                                    std::span<const float32> scale_a, std::span<const float32> scale_b,
                                    unsigned threads = 0) {
  if (a.size() != shape.m * shape.k || b.size() != shape.k * shape.n)
    throw std::invalid_argument("scaled_gemm: a needs M x K values and b K x N");
  if ((scale_a.size() != 1 && scale_a.size() != shape.m) || (scale_b.size() != 1 && scale_b.size() != shape.n))
    throw std::invalid_argument("scaled_gemm: scale_a needs 1 or M values, scale_b 1 or N");
  const std::size_t k_pieces = kernel.promotion_k == 0 ? 1 : (shape.k + kernel.promotion_k - 1) / kernel.promotion_k;
  const std::size_t piece = kernel.promotion_k == 0 ? shape.k : kernel.promotion_k;
  std::vector<value<Out>> d(shape.m * shape.n);
  for_each_index(shape.m, threads, [&](std::size_t row) {
    std::vector<value<InB>> column(shape.k);
    const auto a_row = a.subspan(row * shape.k, shape.k);
    for (std::size_t col = 0; col < shape.n; ++col) {
      for (std::size_t x = 0; x < shape.k; ++x) column[x] = b[x * shape.n + col];
      float32 sum = float32::zero();
      for (std::size_t p = 0; p < k_pieces; ++p) {
        const std::size_t first = p * piece, count = std::min(piece, shape.k - first);
        const float32 chain = fused_dot<fp32, InA, InB>(kernel.unit, a_row.subspan(first, count),
                                                        std::span<const value<InB>>(column).subspan(first, count),
                                                        float32::zero())
                                  .result;
        sum = kernel.promotion_k == 0 ? chain : ptx::add_f32(sum, chain);
      }
      const float32 scale = ptx::mul_f32(scale_a[scale_a.size() == 1 ? 0 : row], scale_b[scale_b.size() == 1 ? 0 : col]);
      d[row * shape.n + col] = convert<Out>(ptx::mul_f32(sum, scale), ptx::gpu_environment()).result;
    }
  });
  return d;
}

}  // namespace bitexact::matmul
