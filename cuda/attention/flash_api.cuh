// From the host API (flash_call.h) to a kernel family
// Kernel<D, Causal, Rule, Count>::launch(params, heads, stream)
// (flash_forward.cu: the FA2 structure; flash_forward_wgmma.cu:
// warp-specialised wgmma): the checks, the parameters the kernels read, and
// the dispatch to the template for the head dim, mask and rule.
#pragma once

#include "flash_call.h"
#include "flash_params.cuh"

#include <cuda_runtime.h>

namespace flash {

// The strides as the kernels read them; a dimension of extent 1 has none
// that matters (PyTorch may give it any), and gets the dense one, a multiple
// of 8 elements as the copy engine's tensor maps want every stride to be.
inline tensor_strides device_strides(const call_strides& s, int batch, int heads, int rows, int head_dim) {
  tensor_strides t{s.batch, s.head, s.row};
  if (rows == 1) t.row = head_dim;
  if (heads == 1) t.head = t.row * rows;
  if (batch == 1) t.batch = t.head * heads;
  return t;
}

// Our FP8 kernel's P-bar = e4m3(RN(P * scale_s)) on the ALU instead of the
// FMA pipe: for scale_s = 2^k, 1 <= k <= 8, the integer k << 23, which the
// kernel adds to P's bits (0: the FMUL). The same P-bar for every P in [0,
// 2^(128 - k)): a normal P times 2^k is exact either way, and +0 lands below
// 2^-118, e4m3's +0 after the conversion as 0 * 2^k is. Taken under the
// standard rule only, where P = ex2(x), x = RN(s c - RN(m c)) with s <= m (c
// the scores' scale in log2 units), has x at most half an ulp of m c: x <= 32
// while |m c| <= 2^29, which e4m3 operands' largest scores (448^2 d) keep
// while |c| 448^2 d <= 2^29. A NaN P's P-bar is -0 instead of NaN; its row
// is NaN all the same (finish_rows). The stabilized rules (P above 1 under a
// negative max) and the p_bar_sum variant (l of P-bar) keep the FMUL.
inline int p_exponent_of(const call& c, float scale_log2) {
  if (!c.fp8 || c.stabilize != 0 || c.p_bar_sum ||
      std::fabs(static_cast<double>(scale_log2)) * e4m3_largest * e4m3_largest * c.head_dim > 0x1p29)
    return 0;
  for (int k = 1; k <= 8; ++k)
    if (c.fp8->scale_s == static_cast<float>(1 << k)) return k << 23;
  return 0;
}

inline forward_params make_params(const call& c) {
  // fp8: the descales of Q and K in the scores' scale, as fp32 products.
  const float scale = c.fp8 ? (c.scale * c.fp8->descale_q) * c.fp8->descale_k : c.scale;
  // As PyTorch's set_params_fprop: float(double(scale) * log2(e)).
  const float scale_log2 = static_cast<float>(static_cast<double>(scale) * 1.44269504088896340736);
  forward_params p{static_cast<const uint16_t*>(c.q), static_cast<const uint16_t*>(c.k),
                   static_cast<const uint16_t*>(c.v), static_cast<uint16_t*>(c.o), c.lse, c.query_rows,
                   c.key_rows, c.heads, c.heads / c.kv_heads,
                   device_strides(c.q_strides, c.batch, c.heads, c.query_rows, c.head_dim),
                   device_strides(c.k_strides, c.batch, c.kv_heads, c.key_rows, c.head_dim),
                   device_strides(c.v_strides, c.batch, c.kv_heads, c.key_rows, c.head_dim),
                   device_strides(c.o_strides, c.batch, c.heads, c.query_rows, c.head_dim), scale, scale_log2,
                   c.beta, c.eps};
  p.p_bar_ones = c.p_bar_ones, p.max_repeated = c.max_repeated;
  if (c.fp8) {
    p.v_strides = device_strides(c.v_strides, c.batch, c.kv_heads, c.head_dim, fp8_key_columns(c.key_rows));  // V^T
    p.p_scale = c.fp8->scale_s;
    p.o_scale = (c.fp8->descale_s * c.fp8->descale_v) * c.fp8->scale_o;
    p.p_descale = c.fp8->descale_s;
    p.p_exponent = p_exponent_of(c, scale_log2);
  }
  return p;
}

template <template <int, bool, stabilization, bool> class Kernel, int D, bool Causal>
int launch_rule(const forward_params& p, int heads, stabilization rule, bool count, cudaStream_t stream) {
  if (count) return Kernel<D, Causal, stabilization::none, true>::launch(p, heads, stream);  // the indicator
  switch (rule) {
    case stabilization::none: return Kernel<D, Causal, stabilization::none, false>::launch(p, heads, stream);
    case stabilization::per_block: return Kernel<D, Causal, stabilization::per_block, false>::launch(p, heads, stream);
    case stabilization::across_blocks:
      return Kernel<D, Causal, stabilization::across_blocks, false>::launch(p, heads, stream);
  }
  return 1;
}

// One call on a kernel family: 1 when call_refusal has a reason, else the launch's result.
template <template <int, bool, stabilization, bool> class Kernel>
int forward(const call& c, cudaStream_t stream) {
  if (call_refusal(c)) return 1;
  const forward_params p = make_params(c);
  const int heads = c.batch * c.heads;
  const auto rule = static_cast<stabilization>(c.stabilize);
  const bool count = c.p_bar_ones != nullptr;
  if (c.head_dim == 64)
    return c.causal ? launch_rule<Kernel, 64, true>(p, heads, rule, count, stream)
                    : launch_rule<Kernel, 64, false>(p, heads, rule, count, stream);
  return c.causal ? launch_rule<Kernel, 128, true>(p, heads, rule, count, stream)
                  : launch_rule<Kernel, 128, false>(p, heads, rule, count, stream);
}

}  // namespace flash
