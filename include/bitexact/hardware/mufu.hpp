// The special-function unit (MUFU) as PTX reaches it: ex2.approx.ftz.f32,
// ex2.approx.f32, rcp.approx.ftz.f32, rcp.approx.f32, lg2.approx.ftz.f32 and
// lg2.approx.f32.
//
// MUFU is a table lookup, not a correctly rounded function. Captured on an
// NVIDIA H200 (sm_90, driver 580.159.04, CUDA 13.0) and proven over every
// input bit pattern on the GPU (cuda/probe_mufu.cu, docs/mufu.md):
//   ex2.ftz, x <= -0: q = trunc(|x| * 2^23), n = q >> 23, k = q mod 2^23,
//            result G(k) * 2^-n, flushed to +0 below 2^-126; |x| >= 256 -> +0.
//   ex2.ftz, x >= +0: result P(k) * 2^n with a second table (P is not G
//            mirrored); x >= 128 -> +inf. Subnormal or zero x -> 1 exactly.
//   rcp.ftz, x = +-(1 + k/2^23) * 2^e: result +-R(k) * 2^-e, flushed to a
//            signed zero below 2^-126; +-0 and subnormals -> +-inf, +-inf -> +-0.
//   NaN in -> 0x7FFFFFFF out, for all four.
// The non-FTZ forms are the wrappers the compiler emits around the same MUFU
// instruction (SASS in .captures/info.txt): ex2 squares M(x/2) for x < -126,
// rcp rescales by 0.25 or 2^24; their FMULs are IEEE round-to-nearest.
//
// lg2, captured on an NVIDIA H100 (cuda/capture/capture_lg2.cu) and proven
// over every input on the GPU (docs/mufu.md):
//   lg2.ftz, x = 2^e * (1 + k/2^23): RZ(e + T(k)) for e >= 0 and
//            RZ((e + 1) + U(k)) below 1, T over [1, 2) and U over [0.5, 1);
//            +-0 and subnormals -> -inf, x < 0 -> NaN, +inf -> +inf.
//   lg2 (non-FTZ): subnormal x scaled by 2^24 first, 24 subtracted after.
//
// The tables G, P, R, T and U and their files in data/: mufu_tables.hpp.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "alu.hpp"
#include "mufu_tables.hpp"
#include "../core/format.hpp"
#include "../core/observer.hpp"
#include "../core/operations.hpp"

namespace bitexact {

// One MUFU table lookup. ex2, rcp: the result is entry * 2^scale before the
// flush to zero (or the overflow to infinity) that the unit applies. lg2: the
// result is scale + entry, rounded (the add's own events follow).
struct mufu_lookup_event {
  mufu_table table;
  std::uint32_t index;  // k, the 23 bits after the grid point's leading part
  std::uint32_t entry;  // the table's fp32 bit pattern at k
  int scale;            // n (ex2), -e (rcp), the integer added (lg2: e, or e + 1 below 1)
};

namespace ptx {

namespace detail {

inline constexpr std::uint32_t magnitude_mask = 0x7FFFFFFFu, infinity_bits = 0x7F800000u;
inline constexpr std::uint32_t fraction_mask = 0x007FFFFFu, smallest_normal_bits = 0x00800000u;

// trunc(m * 2^23) for a magnitude m < 256: the input on the tables' 2^-23
// grid, truncated toward zero (off-grid inputs lose their low bits).
constexpr std::uint32_t grid_point(std::uint32_t magnitude) {
  const int biased_exponent = static_cast<int>(magnitude >> 23);
  if (biased_exponent == 0) return 0;  // zero and subnormals lie far below 2^-23
  const std::uint32_t significand = (magnitude & fraction_mask) | smallest_normal_bits;
  const int shift = biased_exponent - 127;  // m * 2^23 = significand * 2^(biased_exponent - 127)
  if (shift >= 0) return significand << shift;
  return -shift >= 24 ? 0 : significand >> -shift;
}

// An fp32 table entry times 2^scale, as the unit forms it: a biased exponent
// that drops to 0 or below flushes to zero, one that reaches 255 gives infinity.
constexpr std::uint32_t scale_entry(std::uint32_t entry, int scale, std::uint32_t sign) {
  const int biased_exponent = static_cast<int>(entry >> 23) + scale;
  if (biased_exponent <= 0) return sign;
  if (biased_exponent >= 255) return sign | infinity_bits;
  return sign | (entry & fraction_mask) | static_cast<std::uint32_t>(biased_exponent) << 23;
}

}  // namespace detail

// ex2.approx.ftz.f32 (MUFU.EX2).
template <class O = no_observer>
inline float32 ex2_approx_ftz(float32 x, const mufu_tables& tables = mufu_tables::shared(), O&& obs = {}) {
  const std::uint32_t magnitude = x.bits & detail::magnitude_mask;
  if (magnitude > detail::infinity_bits) [[unlikely]] {
    report(obs, special_event{special_reason::nan_operand});
    return float32::canonical_nan();
  }
  if (x.sign()) {
    // 2^-256 is far below the flush threshold; -inf lands here too.
    if (magnitude >= 0x43800000u) [[unlikely]] {
      report(obs, special_event{special_reason::flushed_to_zero});
      return float32::zero();
    }
    const std::uint32_t q = detail::grid_point(magnitude), k = q & detail::fraction_mask;
    const std::uint32_t entry = tables.data(mufu_table::ex2_negative)[k];
    const int scale = -static_cast<int>(q >> 23);
    report(obs, mufu_lookup_event{mufu_table::ex2_negative, k, entry, scale});
    const std::uint32_t result = detail::scale_entry(entry, scale, 0);
    if (result == 0) report(obs, special_event{special_reason::flushed_to_zero});
    return float32::from_bits(result);
  }
  // 2^128 overflows; +inf lands here too.
  if (magnitude >= 0x43000000u) [[unlikely]] {
    report(obs, special_event{special_reason::overflow});
    return float32::infinity();
  }
  const std::uint32_t q = detail::grid_point(magnitude), k = q & detail::fraction_mask;
  const std::uint32_t entry = tables.data(mufu_table::ex2_positive)[k];
  const int scale = static_cast<int>(q >> 23);
  report(obs, mufu_lookup_event{mufu_table::ex2_positive, k, entry, scale});
  return float32::from_bits(detail::scale_entry(entry, scale, 0));
}

// ex2.approx.f32: what nvcc emits (FSETP.GEU x, -126; FMUL x*0.5; MUFU.EX2;
// FMUL r*r): below -126 the unit's result would be flushed, so it evaluates
// 2^(x/2) and squares it with an IEEE round-to-nearest multiply, which is how
// subnormal results (down to 2^-149) come out. Exact halving: x/2 is normal.
template <class O = no_observer>
inline float32 ex2_approx(float32 x, const mufu_tables& tables = mufu_tables::shared(), O&& obs = {}) {
  constexpr std::uint32_t minus_126_magnitude = 0x42FC0000u;
  const std::uint32_t magnitude = x.bits & detail::magnitude_mask;
  const bool below_minus_126 = x.sign() && magnitude > minus_126_magnitude && magnitude <= detail::infinity_bits;
  if (!below_minus_126) return ex2_approx_ftz(x, tables, obs);
  const environment fmul = gpu_environment();
  const float32 half = mul(x, from_host(0.5f), fmul, obs).result;
  const float32 root = ex2_approx_ftz(half, tables, obs);
  return mul(root, root, fmul, obs).result;
}

// Not an instruction: a hint that brings the table entry ex2_approx(x) will
// read into the cache. The tables are 32 MB, so nearly every lookup misses;
// a caller with many independent exponentials prefetches them all first and
// overlaps the misses (three times faster for a row of P). Inputs the tables
// do not decide (NaN, overflow, below -126) need nothing.
inline void prefetch_ex2(float32 x, const mufu_tables& tables = mufu_tables::shared()) {
  const std::uint32_t magnitude = x.bits & detail::magnitude_mask;
  if (magnitude >= 0x43000000u) return;
  const std::uint32_t k = detail::grid_point(magnitude) & detail::fraction_mask;
  __builtin_prefetch(tables.data(x.sign() ? mufu_table::ex2_negative : mufu_table::ex2_positive) + k);
}

// rcp.approx.ftz.f32 (MUFU.RCP).
template <class O = no_observer>
inline float32 rcp_approx_ftz(float32 x, const mufu_tables& tables = mufu_tables::shared(), O&& obs = {}) {
  const std::uint32_t sign = x.bits & ~detail::magnitude_mask, magnitude = x.bits & detail::magnitude_mask;
  if (magnitude > detail::infinity_bits) [[unlikely]] {
    report(obs, special_event{special_reason::nan_operand});
    return float32::canonical_nan();
  }
  if (magnitude == detail::infinity_bits) [[unlikely]] {
    report(obs, special_event{special_reason::infinity_operand});
    return float32::from_bits(sign);
  }
  // Subnormal inputs read as zero (.ftz): 1/0 is infinity.
  if (magnitude < detail::smallest_normal_bits) [[unlikely]] {
    report(obs, special_event{special_reason::division_by_zero});
    return float32::from_bits(sign | detail::infinity_bits);
  }
  const std::uint32_t k = magnitude & detail::fraction_mask;
  const std::uint32_t entry = tables.data(mufu_table::rcp)[k];
  const int scale = 127 - static_cast<int>(magnitude >> 23);
  report(obs, mufu_lookup_event{mufu_table::rcp, k, entry, scale});
  const std::uint32_t result = detail::scale_entry(entry, scale, sign);
  if ((result & detail::magnitude_mask) == 0) report(obs, special_event{special_reason::flushed_to_zero});
  return float32::from_bits(result);
}

// rcp.approx.f32: what nvcc emits, s * MUFU.RCP(x * s) with IEEE
// round-to-nearest multiplies: s = 0.25 for |x| > 2^126 (whose reciprocal the
// unit would flush) and s = 2^24 for |x| < 2^-126 (which the unit reads as
// zero); subnormal results come out of the final multiply. For s = 1 both
// multiplies are identities (the unit's result is never subnormal, and any
// NaN is the canonical one), so that path is the bare lookup.
template <class O = no_observer>
inline float32 rcp_approx(float32 x, const mufu_tables& tables = mufu_tables::shared(), O&& obs = {}) {
  constexpr std::uint32_t two_to_126_magnitude = 0x7E800000u;
  const std::uint32_t magnitude = x.bits & detail::magnitude_mask;
  float32 scale;
  if (magnitude > two_to_126_magnitude && magnitude <= detail::infinity_bits) scale = from_host(0.25f);
  else if (magnitude < detail::smallest_normal_bits) scale = from_host(0x1p24f);
  else return rcp_approx_ftz(x, tables, obs);
  const environment fmul = gpu_environment();
  const float32 scaled = mul(x, scale, fmul, obs).result;
  const float32 reciprocal = rcp_approx_ftz(scaled, tables, obs);
  return mul(scale, reciprocal, fmul, obs).result;
}

// lg2.approx.ftz.f32 (MUFU.LG2). For x = 2^e * (1 + k/2^23) the unit adds
// an integer to one of two tables and rounds toward zero: for x >= 1,
// RZ(e + T(k)), T(k) = lg2.approx.ftz(1 + k/2^23); below 1, RZ((e + 1) +
// U(k)), U(k) = lg2.approx.ftz((1 + k/2^23) / 2), the binade [0.5, 1). The
// H100's results for all 2^32 inputs match (capture_lg2 sweep H3, 0
// mismatches); one table with any IEEE rounding does not (docs/mufu.md).
template <class O = no_observer>
inline float32 lg2_approx_ftz(float32 x, const mufu_tables& tables = mufu_tables::shared(), O&& obs = {}) {
  const std::uint32_t magnitude = x.bits & detail::magnitude_mask;
  if (magnitude > detail::infinity_bits) [[unlikely]] {
    report(obs, special_event{special_reason::nan_operand});
    return float32::canonical_nan();
  }
  // Subnormal inputs read as zero (.ftz), of either sign: log2(+-0) = -inf.
  if (magnitude < detail::smallest_normal_bits) [[unlikely]] {
    report(obs, special_event{special_reason::division_by_zero});
    return float32::infinity(true);
  }
  if (x.sign()) [[unlikely]] {
    report(obs, special_event{special_reason::invalid_operation});
    return float32::canonical_nan();
  }
  if (magnitude == detail::infinity_bits) [[unlikely]] {
    report(obs, special_event{special_reason::infinity_operand});
    return float32::infinity();
  }
  const int exponent = static_cast<int>(magnitude >> 23) - 127;
  const std::uint32_t k = magnitude & detail::fraction_mask;
  const mufu_table table = exponent >= 0 ? mufu_table::lg2 : mufu_table::lg2_below;
  const int added = exponent >= 0 ? exponent : exponent + 1;
  const std::uint32_t entry = tables.data(table)[k];
  report(obs, mufu_lookup_event{table, k, entry, added});
  return add(from_host(static_cast<float>(added)), float32::from_bits(entry),
             gpu_environment(rounding_mode::toward_zero), obs)
      .result;
}

// lg2.approx.f32: the unit reads subnormals as zero, so the wrapper scales an
// input below 2^-126 in magnitude by 2^lg2_subnormal_scale first and
// subtracts lg2_subnormal_scale after, with IEEE round-to-nearest FMUL and
// FADD, as ptxas expands lg2.approx.f32 (FMUL by 2^24, FADD -24); the H100 sweeps
// found this wrapper, and the same with 2^23, identical to lg2.approx.f32 on all 2^32 inputs (W24, W23).
inline constexpr int lg2_subnormal_scale = 24;

template <class O = no_observer>
inline float32 lg2_approx(float32 x, const mufu_tables& tables = mufu_tables::shared(), O&& obs = {}) {
  if ((x.bits & detail::magnitude_mask) >= detail::smallest_normal_bits) return lg2_approx_ftz(x, tables, obs);
  const environment fpu = gpu_environment();
  const float32 scaled = mul(x, from_host(static_cast<float>(1u << lg2_subnormal_scale)), fpu, obs).result;
  const float32 logarithm = lg2_approx_ftz(scaled, tables, obs);
  return add(logarithm, from_host(-static_cast<float>(lg2_subnormal_scale)), fpu, obs).result;
}

}  // namespace ptx
}  // namespace bitexact
