// PyTorch's flash-attention backward pass on sm_90, bit for bit:
// aten._scaled_dot_product_flash_attention_backward as torch 2.11 runs it,
// FlashAttention-2's three kernels (flash_bwd_preprocess_kernel.h,
// flash_bwd_kernel.h with run_flash_bwd_seqk_parallel, the dQ conversion),
// read in their source and in the SASS of torch 2.11's libtorch_cuda.so, and
// decided by captures (cuda/capture/flash_backward.py; docs/attention.md,
// "The backward pass").
//
// Per head, from the forward's O and L and the incoming dO:
//   delta_i = rowsum(dO_i * O_i): each of 8 threads a row chains its columns
//             8t..8t+7 (and 64+8t.. at d 128) from one FMUL through FFMAs,
//             the 8 partials joined by a butterfly over lanes 4, 2, 1;
//   for each K/V block n (block_n keys), query blocks m from the last down:
//     S = Q K^T (the tensor core's chain over d, as in the forward),
//     P = exp2f(RN(RN(S c) - RN(L log2 e))) in fp32 (the masked S -inf),
//     dP = dO V^T, dS = RN(P RN(dP - delta)), P and dS rounded to bf16,
//     dV += bf16(P)^T dO and dK += bf16(dS)^T Q (16 query rows a step,
//     ascending in the block), and dQ's tile bf16(dS) K added to an fp32
//     buffer with the flush-to-zero atomic add;
//   dK = bf16(RN(dK * scale)), dV = bf16(dV), dQ = bf16(RN(sum * scale)).
// dQ's additions are ordered only under torch.use_deterministic_algorithms:
// then ceil(SMs / (B H)) buffers, buffer x taking the key blocks x, x + that
// count, ... in ascending order, summed buffer by buffer at the end; that is
// the order modelled. Without it each key block adds its tile when it ends,
// in an order that varies from run to run (the captures count how often).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "../core/format.hpp"
#include "../core/observer.hpp"
#include "../core/operations.hpp"
#include "../hardware/alu.hpp"
#include "../hardware/mma.hpp"
#include "../hardware/mufu.hpp"
#include "../host/parallel.hpp"
#include "kernel.hpp"
#include "shape.hpp"

namespace bitexact::attention {

// The backward kernels of one call, resolved: what the emulator reads.
struct flash_backward_kernel {
  int block_m = 128;  // query rows of a tile (the inner, sequential loop)
  int block_n = 128;  // keys of a thread block (the outer, parallel one)
  fused_sum_unit tensor_core = sm90_tensor_core;
  float32 scale{};       // natural-log units; dK and dQ are multiplied by it last
  float32 scale_log2{};  // RN(scale * log2 e), computed in double (set_params_fprop)
  // The exponent as a rounded multiply and then a subtraction (PyTorch
  // compiles FA2 with UNFUSE_FMA: FMUL, then FADD in the SASS), or one FFMA.
  bool unfused_exponent = true;
  int dq_splits = 1;     // deterministic dQ: the buffers its key blocks are dealt to
};

// torch 2.11's flash backward on sm_90 (flash_bwd_launch_template.h with at
// least 144 KB of shared memory): 128 x 128 tiles at d 64, 64 x 128 at d 128;
// scale as the forward takes it; the deterministic dQ's buffer count for the
// GPU's multiprocessors.
inline flash_backward_kernel pytorch_sdpa_flash_sm90_backward(const attention_shape& shape, double scale,
                                                              const gpu& device = default_gpu()) {
  if (shape.head_dim != 64 && shape.head_dim != 128)
    throw std::invalid_argument("flash backward: head_dim " + std::to_string(shape.head_dim) +
                                " is not described (64 and 128 are)");
  if (shape.batch < 1 || shape.heads < 1)
    throw std::invalid_argument("flash backward: batch and heads must be at least 1");
  flash_backward_kernel kernel;
  kernel.block_m = shape.head_dim == 64 ? 128 : 64;
  kernel.scale = from_host(static_cast<float>(scale));
  kernel.scale_log2 = softmax_scale_log2(kernel.scale);
  const int heads = shape.batch * shape.heads;
  kernel.dq_splits = (device.sm_count + heads - 1) / heads;
  return kernel;
}

// One head's gradients, and the delta the preprocessing kernel computed.
struct backward_gradients {
  std::vector<bfloat16> dq, dk, dv;
  std::vector<float32> delta;  // [query_rows]
};

namespace detail {

// A row-major matrix of rows x cols values, zero beyond the rows and columns
// it was filled with (the kernels zero-fill what lies past N and N_k).
template <class T>
struct matrix {
  std::size_t rows = 0, cols = 0;
  std::vector<T> values;
  matrix(std::size_t r, std::size_t c) : rows(r), cols(c), values(r * c) {}
  T& at(std::size_t r, std::size_t c) { return values[r * cols + c]; }
  const T& at(std::size_t r, std::size_t c) const { return values[r * cols + c]; }
};

// C[i][j] = the tensor core's chain over k of A[i][k] B[j][k], 16 products a
// step in ascending k, from C's own values (mma.sync m16n8k16 tiles). A's rows
// and B's rows hold k; rows a multiple of 16 (A) and 8 (B), k of 16.
inline void chained_products(const fused_sum_unit& unit, const matrix<bfloat16>& a, const matrix<bfloat16>& b,
                             matrix<float32>& c) {
  std::array<bfloat16, 256> a_tile{};
  std::array<bfloat16, 128> b_tile{};
  std::array<float32, 128> c_tile{}, d_tile{};
  for (std::size_t i0 = 0; i0 < a.rows; i0 += 16)
    for (std::size_t j0 = 0; j0 < b.rows; j0 += 8) {
      for (std::size_t r = 0; r < 16; ++r)
        for (std::size_t n = 0; n < 8; ++n) c_tile[r * 8 + n] = c.at(i0 + r, j0 + n);
      for (std::size_t k0 = 0; k0 < a.cols; k0 += 16) {
        for (std::size_t r = 0; r < 16; ++r)
          for (std::size_t k = 0; k < 16; ++k) a_tile[r * 16 + k] = a.at(i0 + r, k0 + k);
        for (std::size_t n = 0; n < 8; ++n)
          for (std::size_t k = 0; k < 16; ++k) b_tile[n * 16 + k] = b.at(j0 + n, k0 + k);
        mma_m16n8k16<fp32, bf16>(unit, a_tile, b_tile, c_tile, d_tile);
        c_tile = d_tile;
      }
      for (std::size_t r = 0; r < 16; ++r)
        for (std::size_t n = 0; n < 8; ++n) c.at(i0 + r, j0 + n) = c_tile[r * 8 + n];
    }
}

// flash_bwd_preprocess_kernel.h's dot_do_o for one row of d values.
inline float32 row_delta(std::span<const bfloat16> d_o, std::span<const bfloat16> o) {
  const std::size_t d = d_o.size();
  std::array<float32, 8> partial{};
  for (std::size_t t = 0; t < 8; ++t) {
    bool first = true;
    for (std::size_t base = 0; base < d; base += 64)
      for (std::size_t c = base + 8 * t; c < base + 8 * t + 8; ++c) {
        const float32 x = convert<fp32>(d_o[c], ptx::gpu_environment()).result;
        const float32 y = convert<fp32>(o[c], ptx::gpu_environment()).result;
        partial[t] = first ? ptx::mul_f32(x, y) : ptx::fma_f32(x, y, partial[t]);
        first = false;
      }
  }
  // Allreduce<8>: x += shfl_xor(x, 4), then 2, then 1; every lane ends equal.
  for (std::size_t offset = 4; offset >= 1; offset /= 2) {
    std::array<float32, 8> next{};
    for (std::size_t t = 0; t < 8; ++t) next[t] = ptx::add_f32(partial[t], partial[t ^ offset]);
    partial = next;
  }
  return partial[0];
}

}  // namespace detail

// The first query block the K/V block key_block visits (m_block_min): 0, or
// under the causal mask the first that sees one of its keys. It walks from the
// last query block down to this one.
inline long first_query_block(const flash_backward_kernel& kernel, const attention_shape& shape, long key_block) {
  if (!shape.causal) return 0;
  const long diagonal = static_cast<long>(shape.key_rows) - shape.query_rows;  // bottom-right
  return std::max(0L, (key_block * kernel.block_n - diagonal) / kernel.block_m);  // C's division, as the kernel's
}

// One head: q, o, d_o [query_rows][head_dim], k, v [key_rows][head_dim],
// lse [query_rows] (the forward's L, natural log, +inf for a row that saw no
// key). The causal mask is flash-attention's, bottom-right aligned. Up to
// `threads` threads (0: one per core) take dQ's buffers, each with its key
// blocks in ascending order as the deterministic kernel adds them, so the
// bits do not depend on the count; an observer of rows_done_event hears of
// each key block (its rows of dK and dV) as it ends.
template <class O = no_observer>
backward_gradients flash_backward_head(const flash_backward_kernel& kernel, const attention_shape& shape,
                                       std::span<const bfloat16> q, std::span<const bfloat16> k,
                                       std::span<const bfloat16> v, std::span<const bfloat16> o,
                                       std::span<const float32> lse, std::span<const bfloat16> d_o, O&& obs = {},
                                       unsigned threads = 0) {
  using detail::matrix;
  const std::size_t n_q = static_cast<std::size_t>(shape.query_rows), n_k = static_cast<std::size_t>(shape.key_rows);
  const std::size_t d = static_cast<std::size_t>(shape.head_dim);
  const std::size_t bm = static_cast<std::size_t>(kernel.block_m), bn = static_cast<std::size_t>(kernel.block_n);
  if (q.size() != n_q * d || o.size() != n_q * d || d_o.size() != n_q * d || lse.size() != n_q ||
      k.size() != n_k * d || v.size() != n_k * d)
    throw std::invalid_argument("flash_backward_head: q, o, d_o need query_rows x head_dim values, lse query_rows, "
                                "k and v key_rows x head_dim");
  if (d != 64 && d != 128)  // the preprocessing kernel's 8 threads a row cover 64 columns at a time
    throw std::invalid_argument("flash_backward_head: head_dim " + std::to_string(d) + " is not described (64 and 128 are)");
  backward_gradients out{std::vector<bfloat16>(n_q * d), std::vector<bfloat16>(n_k * d),
                         std::vector<bfloat16>(n_k * d), std::vector<float32>(n_q)};
  for (std::size_t i = 0; i < n_q; ++i) out.delta[i] = detail::row_delta(d_o.subspan(i * d, d), o.subspan(i * d, d));

  const std::size_t m_blocks = (n_q + bm - 1) / bm, n_blocks = (n_k + bn - 1) / bn;
  const float32 log2_e = float32::from_bits(0x3FB8AA3Bu);
  const float32 negative_infinity = float32::infinity(true);
  // The deterministic dQ buffers, +0 to start; the atomics flush subnormals.
  const std::size_t splits = static_cast<std::size_t>(kernel.dq_splits);
  std::vector<matrix<float32>> dq_accum(splits, matrix<float32>(m_blocks * bm, d));
  const long diagonal = static_cast<long>(n_k) - static_cast<long>(n_q);  // bottom-right

  // Key block n: its rows of dK and dV, and its dQ tiles added to buffer n % splits.
  const auto run_key_block = [&](std::size_t n) {
    matrix<bfloat16> q_m(bm, d), do_m(bm, d), q_t(d, bm), do_t(d, bm);
    matrix<bfloat16> k_n(bn, d), v_n(bn, d), k_t(d, bn), p_t(bn, bm), ds_t(bn, bm), ds(bm, bn);
    for (std::size_t j = 0; j < bn; ++j)
      for (std::size_t c = 0; c < d; ++c) {
        const bool inside = n * bn + j < n_k;  // keys past N_k: zero-filled
        k_n.at(j, c) = inside ? k[(n * bn + j) * d + c] : bfloat16{};
        v_n.at(j, c) = inside ? v[(n * bn + j) * d + c] : bfloat16{};
        k_t.at(c, j) = k_n.at(j, c);
      }
    matrix<float32> dk_acc(bn, d), dv_acc(bn, d);
    for (long m = static_cast<long>(m_blocks) - 1; m >= first_query_block(kernel, shape, static_cast<long>(n)); --m) {
      const std::size_t row0 = static_cast<std::size_t>(m) * bm;
      for (std::size_t i = 0; i < bm; ++i)
        for (std::size_t c = 0; c < d; ++c) {
          const bool inside = row0 + i < n_q;
          q_m.at(i, c) = inside ? q[(row0 + i) * d + c] : bfloat16{};
          do_m.at(i, c) = inside ? d_o[(row0 + i) * d + c] : bfloat16{};
          q_t.at(c, i) = q_m.at(i, c);
          do_t.at(c, i) = do_m.at(i, c);
        }
      matrix<float32> s(bm, bn), dp(bm, bn);
      detail::chained_products(kernel.tensor_core, q_m, k_n, s);
      detail::chained_products(kernel.tensor_core, do_m, v_n, dp);
      for (std::size_t i = 0; i < bm; ++i) {
        const std::size_t row = row0 + i;
        // Rows past N: L +inf and delta 0 (the kernel's fill), so P = 0.
        const float32 l = row < n_q ? lse[row] : float32::infinity(false);
        const float32 delta = row < n_q ? out.delta[row] : float32::zero();
        const float32 l_scaled = l == negative_infinity ? float32::zero() : ptx::mul_f32(l, log2_e);
        const long visible = shape.causal ? std::min<long>(static_cast<long>(n_k), static_cast<long>(row) + 1 + diagonal)
                                          : static_cast<long>(n_k);
        for (std::size_t j = 0; j < bn; ++j) {
          const float32 score = static_cast<long>(n * bn + j) >= visible ? negative_infinity : s.at(i, j);
          const float32 exponent = kernel.unfused_exponent
                                       ? ptx::sub_f32(ptx::mul_f32(score, kernel.scale_log2), l_scaled)
                                       : ptx::fma_f32(score, kernel.scale_log2, float32::from_bits(l_scaled.bits ^ 0x80000000u));
          const float32 p = ptx::ex2_approx(exponent);  // exp2f as nvcc compiles it: MUFU.EX2, halved below -126
          const float32 grad = ptx::mul_f32(p, ptx::sub_f32(dp.at(i, j), delta));
          p_t.at(j, i) = ptx::cvt_rn_bf16_f32(p);
          ds.at(i, j) = ptx::cvt_rn_bf16_f32(grad);
          ds_t.at(j, i) = ds.at(i, j);
        }
      }
      detail::chained_products(kernel.tensor_core, p_t, do_t, dv_acc);
      matrix<float32> dq_tile(bm, d);
      detail::chained_products(kernel.tensor_core, ds, k_t, dq_tile);
      matrix<float32>& accum = dq_accum[n % splits];
      for (std::size_t i = 0; i < bm; ++i)
        for (std::size_t c = 0; c < d; ++c)
          accum.at(row0 + i, c) = ptx::add_f32(accum.at(row0 + i, c), dq_tile.at(i, c), rounding_mode::nearest_even, true);
      detail::chained_products(kernel.tensor_core, ds_t, q_t, dk_acc);
    }
    for (std::size_t j = 0; j < bn && n * bn + j < n_k; ++j)
      for (std::size_t c = 0; c < d; ++c) {
        out.dk[(n * bn + j) * d + c] = ptx::cvt_rn_bf16_f32(ptx::mul_f32(dk_acc.at(j, c), kernel.scale));
        out.dv[(n * bn + j) * d + c] = ptx::cvt_rn_bf16_f32(dv_acc.at(j, c));
      }
  };
  // A buffer's key blocks stay on one thread, in ascending order: the order of its additions.
  for_each_index(std::min(splits, n_blocks), threads, [&](std::size_t buffer) {
    for (std::size_t n = buffer; n < n_blocks; n += splits) {
      run_key_block(n);
      report(obs, rows_done_event{static_cast<int>(n * bn), static_cast<int>(std::min(bn, n_k - n * bn))});
    }
  });
  for_each_index(n_q, threads, [&](std::size_t i) {
    for (std::size_t c = 0; c < d; ++c) {
      float32 sum = float32::zero();
      for (const matrix<float32>& accum : dq_accum) sum = ptx::add_f32(sum, accum.at(i, c));
      out.dq[i * d + c] = ptx::cvt_rn_bf16_f32(ptx::mul_f32(sum, kernel.scale));
    }
  });
  return out;
}

}  // namespace bitexact::attention
