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
// An fp8 call (fp8 set; the wgmma structure only) is our FP8 kernel: q and
// k e4m3 [batch][heads or kv_heads][rows][head_dim], and v as V^T: e4m3
// [batch][kv_heads][head_dim][fp8_key_columns(key_rows)], v_strides' row the
// stride between two head_dim rows, the keys zero past key_rows and
// permuted within each 32 as P's A fragments hold them: column 32G + 16h +
// 4t + 2a + b holds key 32G + 16h + 8a + 2t + b (t < 4; a, b, h < 2). Every
// stride of q, k and v a multiple of 16 elements (bytes); o bf16 as above.
// Its arithmetic is the bf16 kernel's with the scales (fp8_scales) and the
// fp8 tensor core, the preset bitexact_flash_fp8_sm90 of the emulator.
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

// Our FP8 kernel's per-tensor scales (Transformer Engine's names): the
// scores' scale is RN(RN(scale * descale_q) * descale_k); P V takes
// e4m3(RN(P * scale_s)); O's factor is RN(RN(1 / l) * RN(RN(descale_s *
// descale_v) * scale_o)). scale_s 256 with descale_s 1/256 keeps every P
// above 2^-18 from rounding to 0 in e4m3; each scale positive and finite.
struct fp8_scales {
  float descale_q = 1.f, descale_k = 1.f, descale_v = 1.f, descale_s = 1.f, scale_s = 1.f, scale_o = 1.f;
};

// e4m3's largest finite value: the row max's P-bar saturates above it, and
// it bounds the scores of e4m3 operands.
constexpr float e4m3_largest = 448.f;

// V^T's keys a head: key_rows rounded up to the permutation's 32.
constexpr int fp8_key_columns(int key_rows) { return (key_rows + 31) / 32 * 32; }

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
  const fp8_scales* fp8 = nullptr;  // set: e4m3 inputs, our FP8 kernel
  // fp8: each K/V block's P V from +0, then one FADD into O (the preset
  // bitexact_flash_fp8_sm90_pv_fp32_add), instead of O as the chain's C.
  bool pv_fp32_add = false;
  // fp8 with pv_fp32_add: l sums the e4m3 P-bar P V takes, decoded, times
  // descale_s once joined, instead of the fp32 P (the preset
  // bitexact_flash_fp8_sm90_pv_fp32_add_p_bar_sum).
  bool p_bar_sum = false;
};

// Whether the copies read a [batch][heads][rows][head_dim] tensor at data
// with these strides: the pointer 16-byte aligned, every stride of a
// dimension longer than 1 a positive multiple of 16 bytes (8 bf16, 16 e4m3
// elements). PyTorch's operators copy a tensor that is not (python/src/torch_ops.cpp).
bool layout_taken(const void* data, const call_strides& strides, int batch, int heads, int rows,
                  int element_bytes = 2);

// V [batch][kv_heads][key_rows][head_dim] e4m3 at its strides (elements,
// head_dim's 1) into vt as our FP8 kernel reads it: [batch][kv_heads][head_dim]
// [fp8_key_columns(key_rows)], contiguous, 16-byte aligned, the keys
// permuted as above and zero past key_rows. 0, 1 for arguments refused, 2
// when the launch failed.
int fp8_value_layout(const void* v, const call_strides& strides, int batch, int kv_heads, int key_rows, int head_dim,
                     void* vt, cudaStream_t stream);

// Why the kernels do not take a call, or nullptr when they do.
const char* call_refusal(const call& c);

// The two structures of one arithmetic (the same bits, checked by
// cuda/attention/check_flash_forward.py): FlashAttention-2's
// (flash_forward.cu) and Hopper's warp-specialised wgmma (flash_forward_wgmma.cu),
// the faster, and the only one with an fp8 kernel (forward_fa2 refuses an fp8 call).
int forward_fa2(const call& c, cudaStream_t stream);
int forward_wgmma(const call& c, cudaStream_t stream);

}  // namespace flash
