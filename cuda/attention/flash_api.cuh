// The host API of our kernels, over device pointers, for a kernel family
// Kernel<D, Causal, Rule, Count>::launch(params, heads, stream)
// (flash_forward.cu: the FA2 structure; flash_forward_wgmma.cu:
// warp-specialised wgmma): q [heads][query_rows][head_dim], k and v
// [heads][key_rows][head_dim] (bf16 bit patterns, contiguous), o like q, lse
// [heads][query_rows] (fp32, natural-log units). scale: the softmax scale as
// the kernel takes it (PyTorch: float(1/sqrt(d))). stabilize: 0 PyTorch's
// arithmetic (pytorch_sdpa_flash_sm90), 1 the paper's Algorithm 3 in each K/V
// block with beta and eps (pytorch_sdpa_flash_sm90_stabilized), 2 the same
// rule across blocks (pytorch_sdpa_flash_sm90_stabilized_across_blocks).
// Returns 0, 1 for arguments it does not take (head_dim other than 64 or
// 128, a count below 1, more than 65535 heads (the grid's y; the wgmma
// kernel also counts its row blocks of all heads in an int), a null pointer,
// stabilize other than 0, 1, 2, or 1 and 2 with a scale that is not positive
// and finite or an eps that is not finite: the tie test looks at each row's
// second largest score only, exact for those), 2 when the launch failed.
#pragma once

#include "flash_params.cuh"

#include <cuda_runtime.h>
#include <cmath>
#include <cstdint>

namespace flash {

inline bool shapes_taken(const void* q, const void* k, const void* v, const void* o, const void* lse, int heads,
                         int query_rows, int key_rows, int head_dim) {
  return q && k && v && o && lse && heads >= 1 && heads <= 65535 && query_rows >= 1 && key_rows >= 1 &&
         (head_dim == 64 || head_dim == 128);
}

inline bool tie_test_taken(float scale, float eps) { return scale > 0.f && std::isfinite(scale) && std::isfinite(eps); }

inline forward_params make_params(const void* q, const void* k, const void* v, void* o, float* lse, int query_rows,
                                  int key_rows, float scale, float beta, float eps) {
  // As PyTorch's set_params_fprop: float(double(scale) * log2(e)).
  const float scale_log2 = static_cast<float>(static_cast<double>(scale) * 1.44269504088896340736);
  return {static_cast<const uint16_t*>(q), static_cast<const uint16_t*>(k), static_cast<const uint16_t*>(v),
          static_cast<uint16_t*>(o), lse, query_rows, key_rows, scale, scale_log2, beta, eps};
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

template <template <int, bool, stabilization, bool> class Kernel>
int launch_kernel(const forward_params& p, int heads, int head_dim, bool causal, stabilization rule, bool count,
                  cudaStream_t stream) {
  if (head_dim == 64)
    return causal ? launch_rule<Kernel, 64, true>(p, heads, rule, count, stream)
                  : launch_rule<Kernel, 64, false>(p, heads, rule, count, stream);
  return causal ? launch_rule<Kernel, 128, true>(p, heads, rule, count, stream)
                : launch_rule<Kernel, 128, false>(p, heads, rule, count, stream);
}

template <template <int, bool, stabilization, bool> class Kernel>
int forward(const void* q, const void* k, const void* v, void* o, float* lse, int heads, int query_rows,
            int key_rows, int head_dim, int causal, float scale, int stabilize, float beta, float eps,
            cudaStream_t stream) {
  if (!shapes_taken(q, k, v, o, lse, heads, query_rows, key_rows, head_dim) || stabilize < 0 || stabilize > 2 ||
      (stabilize && !tie_test_taken(scale, eps)))
    return 1;
  const forward_params p = make_params(q, k, v, o, lse, query_rows, key_rows, scale, beta, eps);
  return launch_kernel<Kernel>(p, heads, head_dim, causal != 0, static_cast<stabilization>(stabilize), false, stream);
}

// The standard kernel (PyTorch's bits in o and lse) that also writes the
// leading indicator of docs/bias.md per row, [heads][query_rows]: p_bar_ones,
// the keys whose bf16 P-bar is exactly 1 as P V takes them (the count
// attention/repeated_max.hpp gives for the single-split kernel), and
// max_repeated, 1 when the row's two largest scores pass the paper's tie test
// RN(RN(max - s) * scale) <= eps. Returns as forward, and 1 for a null count
// pointer or a scale or eps that the tie test cannot take.
template <template <int, bool, stabilization, bool> class Kernel>
int forward_indicator(const void* q, const void* k, const void* v, void* o, float* lse, int heads, int query_rows,
                      int key_rows, int head_dim, int causal, float scale, float eps, int32_t* p_bar_ones,
                      int32_t* max_repeated, cudaStream_t stream) {
  if (!p_bar_ones || !max_repeated || !shapes_taken(q, k, v, o, lse, heads, query_rows, key_rows, head_dim) ||
      !tie_test_taken(scale, eps))
    return 1;
  forward_params p = make_params(q, k, v, o, lse, query_rows, key_rows, scale, 2.f, eps);
  p.p_bar_ones = p_bar_ones, p.max_repeated = max_repeated;
  return launch_kernel<Kernel>(p, heads, head_dim, causal != 0, stabilization::none, true, stream);
}

}  // namespace flash
