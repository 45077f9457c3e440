// The host API's checks (flash_call.h), shared by both kernel structures.
#include "flash_call.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>

namespace flash {

bool layout_taken(const void* data, const call_strides& strides, int batch, int heads, int rows, int element_bytes) {
  const auto taken = [&](int64_t stride, int extent) {
    return extent == 1 || (stride > 0 && stride * element_bytes % 16 == 0);
  };
  return data && reinterpret_cast<uintptr_t>(data) % 16 == 0 && taken(strides.batch, batch) &&
         taken(strides.head, heads) && taken(strides.row, rows);
}

const char* call_refusal(const call& c) {
  if (c.head_dim != 64 && c.head_dim != 128) return "head_dim must be 64 or 128";
  if (c.batch < 1 || c.heads < 1 || c.kv_heads < 1 || c.query_rows < 1 || c.key_rows < 1)
    return "batch, heads, kv_heads, query_rows and key_rows must be at least 1";
  if (c.heads % c.kv_heads != 0) return "heads must be a multiple of kv_heads";
  // The FA2 structure's grid has a y of batch * heads; the wgmma kernel counts its row blocks of all heads in an int.
  if (int64_t(c.batch) * c.heads > 65535) return "batch * heads must be at most 65535";
  if (!c.lse) return "lse is a null pointer";
  const int input_bytes = c.fp8 ? 1 : 2;
  const bool v_taken = c.fp8 ? layout_taken(c.v, c.v_strides, c.batch, c.kv_heads, c.head_dim, 1) &&
                                   c.v_strides.row >= fp8_key_columns(c.key_rows)
                             : layout_taken(c.v, c.v_strides, c.batch, c.kv_heads, c.key_rows);
  if (!layout_taken(c.q, c.q_strides, c.batch, c.heads, c.query_rows, input_bytes) ||
      !layout_taken(c.o, c.o_strides, c.batch, c.heads, c.query_rows) ||
      !layout_taken(c.k, c.k_strides, c.batch, c.kv_heads, c.key_rows, input_bytes) || !v_taken)
    return c.fp8 ? "q, k, v and o must be 16-byte aligned with strides that are positive multiples of 16 bytes "
                   "(v as V^T, its rows at least fp8_key_columns(key_rows) apart)"
                 : "q, k, v and o must be 16-byte aligned with strides that are positive multiples of 8 elements";
  if (c.pv_fp32_add && !c.fp8) return "pv_fp32_add is a choice of the fp8 kernel (fp8 set)";
  if (c.p_bar_sum && !c.pv_fp32_add)
    return "p_bar_sum is a choice of the fp8 kernel's pv_fp32_add variant (fp8 and pv_fp32_add set)";
  if (c.fp8) {
    const fp8_scales& s = *c.fp8;
    for (const float x : {s.descale_q, s.descale_k, s.descale_v, s.descale_s, s.scale_s, s.scale_o})
      if (!(x > 0.f && std::isfinite(x))) return "every fp8 scale must be positive and finite";
    if (s.scale_s > e4m3_largest) return "scale_s above 448 saturates the row max's P-bar (e4m3's largest finite value)";
  }
  if (c.stabilize < 0 || c.stabilize > 2) return "stabilize must be 0, 1 or 2";
  // The tie test looks at each row's second largest score only, exact for a positive finite scale.
  const bool tie_test = c.stabilize != 0 || c.p_bar_ones;
  if (tie_test && !(c.scale > 0.f && std::isfinite(c.scale) && std::isfinite(c.eps)))
    return "the stabilized rules and the indicator need a positive finite scale and a finite eps";
  if ((c.p_bar_ones == nullptr) != (c.max_repeated == nullptr))
    return "the indicator needs both p_bar_ones and max_repeated";
  if (c.p_bar_ones && c.stabilize != 0) return "the indicator runs on the standard kernel (stabilize 0)";
  return nullptr;
}

}  // namespace flash
