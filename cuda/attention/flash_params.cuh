// What a forward call hands its kernel, on host and device alike.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flash {

// The softmax's reference max: PyTorch's (none), the paper's Algorithm 3 in
// each K/V block, or the same rule on the row's largest score so far (a max
// repeated in two blocks is caught when the second is reached).
enum class stabilization { none, per_block, across_blocks };

// Where the rows of a [batch][heads][rows][head_dim] tensor lie, in elements;
// head_dim's stride is 1. PyTorch's views are taken as they are: a model's
// [B, N, H, d] transposed to [B, H, N, d] has head stride d and row stride H d.
struct tensor_strides {
  int64_t batch, head, row;
};

struct forward_params {
  const uint16_t* q;
  const uint16_t* k;
  const uint16_t* v;
  uint16_t* o;
  float* lse;  // [batch][heads][query_rows], contiguous
  int query_rows, key_rows;
  // The kernels count a call's heads as one index, batch * heads + head; K
  // and V have heads / kv_group heads, query head h reading K/V head
  // h / kv_group (grouped-query attention, as flash-attention's).
  int heads, kv_group;
  tensor_strides q_strides, k_strides, v_strides, o_strides;
  float scale, scale_log2, beta, eps;
  // The leading indicator (forward_indicator), [batch][heads][query_rows]:
  // keys whose bf16 P-bar is exactly 1, and whether the row's maximum repeats.
  int32_t* p_bar_ones = nullptr;
  int32_t* max_repeated = nullptr;
  // Our FP8 kernel's (flash_call.h): P-bar is e4m3(RN(P * p_scale)), and O's
  // factor RN(RN(1 / l) * o_scale); scale has the descales of Q and K in it.
  // p_bar_sum: l is P-bar's sum times p_descale (descale_s).
  float p_scale = 1.f, o_scale = 1.f, p_descale = 1.f;
  // Nonzero: k << 23 for p_scale = 2^k, which P-bar's packing adds to P's
  // bits in place of the FMUL, where that gives the same P-bar (flash_api.cuh,
  // p_exponent_of).
  int p_exponent = 0;

  __host__ __device__ int batch_of(int head) const { return head / heads; }
  __host__ __device__ int query_head_of(int head) const { return head % heads; }
  __host__ __device__ int kv_head_of(int head) const { return head % heads / kv_group; }
  // Element offsets of a head's first row in Q and O, and in K and V.
  __host__ __device__ size_t query_offset(const tensor_strides& s, int head) const {
    return size_t(batch_of(head)) * s.batch + size_t(query_head_of(head)) * s.head;
  }
  __host__ __device__ size_t kv_offset(const tensor_strides& s, int head) const {
    return size_t(batch_of(head)) * s.batch + size_t(kv_head_of(head)) * s.head;
  }
};

}  // namespace flash
