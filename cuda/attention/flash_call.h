// The host API of our flash-attention forward kernels (cuda/attention), in
// plain C++ so that PyTorch's operators (python/src/torch_ops.cpp) and any
// other host code can call them over device pointers.
//
// q [batch][heads][query_rows][head_dim] and k, v [batch][kv_heads][key_rows]
// [head_dim], bf16 bit patterns, each at its own strides (head_dim's 1; the
// others multiples of 8 elements, the pointers 16-byte aligned, as the copy
// engine and cp.async read them); o like q at o_strides; lse [batch][heads]
// [query_rows], contiguous fp32, natural-log units. Query head h reads K/V
// head h / (heads / kv_heads). scale: the softmax scale as the kernel takes it
// (PyTorch: float(1/sqrt(d))). A causal mask with query_rows != key_rows is
// aligned to the bottom right (row i sees keys j <= i + key_rows - query_rows),
// as flash-attention's. stabilize: 0 PyTorch's arithmetic
// (pytorch_sdpa_flash_sm90), 1 the paper's Algorithm 3 in each K/V block with
// beta and eps (pytorch_sdpa_flash_sm90_stabilized), 2 the same rule across
// blocks (pytorch_sdpa_flash_sm90_stabilized_across_blocks). With p_bar_ones
// and max_repeated ([batch][heads][query_rows] int32) the standard kernel also
// writes the leading indicator of docs/bias.md per row: the keys whose bf16
// P-bar is exactly 1 as P V takes them, and 1 where the row's two largest
// scores pass the paper's tie test RN(RN(max - s) * scale) <= eps (stabilize
// must then be 0).
//
// Each entry returns 0, 1 for a call it does not take (call_refusal says
// why), 2 when the launch failed.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace flash {

struct call_strides {
  int64_t batch, head, row;  // elements
};

struct call {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  int batch, heads, kv_heads, query_rows, key_rows, head_dim;
  call_strides q_strides, k_strides, v_strides, o_strides;
  bool causal;
  float scale;
  int stabilize;
  float beta, eps;
  int32_t* p_bar_ones = nullptr;
  int32_t* max_repeated = nullptr;
};

// Whether the copies read a [batch][heads][rows][head_dim] tensor at data
// with these strides: the pointer 16-byte aligned, every stride of a
// dimension longer than 1 a positive multiple of 8 elements (16 bytes).
// PyTorch's operators copy a tensor that is not (python/src/torch_ops.cpp).
bool layout_taken(const void* data, const call_strides& strides, int batch, int heads, int rows);

// Why the kernels do not take a call, or nullptr when they do.
const char* call_refusal(const call& c);

// The two structures of one arithmetic (the same bits, checked by
// cuda/attention/check_flash_forward.py): FlashAttention-2's
// (flash_forward.cu) and Hopper's warp-specialised wgmma (flash_forward_wgmma.cu),
// the faster.
int forward_fa2(const call& c, cudaStream_t stream);
int forward_wgmma(const call& c, cudaStream_t stream);

}  // namespace flash
