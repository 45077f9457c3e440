// What a forward call hands its kernel, on host and device alike.
#pragma once

#include <cstdint>

namespace flash {

// The softmax's reference max: PyTorch's (none), the paper's Algorithm 3 in
// each K/V block, or the same rule on the row's largest score so far (a max
// repeated in two blocks is caught when the second is reached).
enum class stabilization { none, per_block, across_blocks };

struct forward_params {
  const uint16_t* q;
  const uint16_t* k;
  const uint16_t* v;
  uint16_t* o;
  float* lse;
  int query_rows, key_rows;
  float scale, scale_log2, beta, eps;
  // The leading indicator (bitexact_flash_forward_indicator), [heads][query_rows]:
  // keys whose bf16 P-bar is exactly 1, and whether the row's maximum repeats.
  int32_t* p_bar_ones = nullptr;
  int32_t* max_repeated = nullptr;
};

}  // namespace flash
