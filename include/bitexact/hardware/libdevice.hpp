// CUDA's libdevice expf and logf (full precision, no fast math) as nvcc
// compiles them for sm_90: the instruction sequences read from the SASS of
// PyTorch 2.11's flash_fwd_splitkv_combine_kernel (libtorch_cuda.so, cubin
// for sm_90; cuda/capture/flash_sass.sh), each instruction one model call.
#pragma once

#include <cmath>
#include <cstdint>

#include "../core/format.hpp"
#include "alu.hpp"
#include "mufu.hpp"

namespace bitexact::ptx {

namespace detail {

// FFMA.SAT: the fused result clamped to [+0, 1]; NaN gives +0.
inline float32 fma_saturated(float32 a, float32 b, float32 c) {
  const float32 r = fma_f32(a, b, c);
  if (r.is_nan() || r.sign()) return float32::zero();
  return to_host(r) > 1.0f ? from_host(1.0f) : r;
}

}  // namespace detail

// __nv_expf: 2^j * 2^f with j from a round-down FFMA on the 2^23 grid and
// f = x log2(e) - j in two FFMAs (the hi and lo parts of log2(e)), MUFU.EX2
// on f, then one FMUL by 2^j built from j's bits.
//   t = FFMA.SAT(x, 0x3BBB989D, 0.5)        j = FFMA.RM(t, 252, 12582913)
//   f = FFMA(x, 1.44269502, -(j - 12583039)); f = FFMA(x, 1.925963e-08, f)
//   r = FMUL(bits(j) << 23, MUFU.EX2(f))
inline float32 expf_libdevice(float32 x) {
  const float32 t = detail::fma_saturated(x, float32::from_bits(0x3BBB989Du), from_host(0.5f));
  const float32 j = fma_f32(t, from_host(252.0f), from_host(12582913.0f), rounding_mode::downward);
  const float32 shifted = add_f32(j, from_host(-12583039.0f));
  float32 f = fma_f32(x, from_host(1.44269502162933349609f), float32::from_bits(shifted.bits ^ 0x80000000u));
  f = fma_f32(x, from_host(1.925963033500011079e-08f), f);
  const float32 power_of_two = float32::from_bits(j.bits << 23);
  return mul_f32(power_of_two, ex2_approx_ftz(f));
}

// __nv_logf: subnormals scaled by 2^23 first; the input split as 2^e * m with
// m in [2/3, 4/3) by integer arithmetic on its bits; log(m) by an
// 8-coefficient polynomial in m - 1 (Horner FFMAs); e ln 2 added by one FFMA.
// Inf, NaN and negative inputs give FFMA(x, inf, inf); zero gives -inf.
inline float32 logf_libdevice(float32 x) {
  const bool normal_range = !(to_host(x) < 1.175494350822287508e-38f);  // FSETP.GEU: NaN counts as normal
  const float32 bias = normal_range ? float32::zero() : from_host(-23.0f);
  const float32 a = normal_range ? x : mul_f32(x, from_host(8388608.0f));
  const std::uint32_t exponent_bits = (a.bits - 0x3F2AAAABu) & 0xFF800000u;
  const float32 m = float32::from_bits(a.bits - exponent_bits);
  const float32 e = fma_f32(from_host(static_cast<float>(static_cast<std::int32_t>(exponent_bits))),
                            from_host(1.1920928955078125e-07f), bias);
  const float32 u = add_f32(m, from_host(-1.0f));
  float32 p = fma_f32(u, float32::from_bits(0x3E055027u ^ 0x80000000u), from_host(0.14084610342979431152f));
  for (const float c : {-0.12148627638816833496f, 0.13980610668659210205f, -0.16684235632419586182f,
                        0.20012299716472625732f, -0.24999669194221496582f, 0.33333182334899902344f, -0.5f})
    p = fma_f32(u, p, from_host(c));
  p = mul_f32(u, p);
  float32 r = fma_f32(u, p, u);
  r = fma_f32(e, from_host(0.69314718246459960938f), r);
  if (a.bits >= 0x7F800000u) r = fma_f32(a, float32::infinity(), float32::infinity());
  return to_host(a) != 0.0f || a.is_nan() ? r : float32::infinity(true);
}

// __nv_log2f as Triton 3.6 inlines it for tl.math.log2 (PTX of the
// FlexAttention template and examples/triton/flash_forward.py on sm_90,
// cuda/capture/triton_attention.py): subnormals scaled by 2^23 first; the
// input split as 2^e * m with m in [sqrt(1/2), sqrt(2)) by integer arithmetic
// on its bits; log2(m) as f * log2(e) + f^2 * P(f), f = m - 1, P a
// 10-coefficient Horner chain; every FMA of it .ftz. Inf, NaN and negative
// inputs (bits at or above 0x7F800000) give FMA(x, inf, inf).
inline float32 log2f_libdevice(float32 x) {
  constexpr bool ftz = true;
  constexpr rounding_mode rn = rounding_mode::nearest_even;
  const bool subnormal = to_host(x) < 1.175494350822287508e-38f;  // setp.lt: NaN is not
  const float32 a = subnormal ? mul_f32(x, from_host(8388608.0f)) : x;
  const float32 bias = subnormal ? from_host(-23.0f) : float32::zero();
  const std::uint32_t exponent_bits = (a.bits - 0x3F3504F3u) & 0xFF800000u;
  const float32 m = float32::from_bits(a.bits - exponent_bits);
  const float32 e = fma_f32(from_host(static_cast<float>(static_cast<std::int32_t>(exponent_bits))),
                            from_host(1.1920928955078125e-07f), bias, rn, ftz);
  const float32 f = add_f32(m, from_host(-1.0f));
  float32 p = fma_f32(float32::from_bits(0x3DC6B27Fu), f, float32::from_bits(0xBE2C7F30u), rn, ftz);
  for (const std::uint32_t c : {0x3E2FCF2Au, 0xBE374E43u, 0x3E520BF4u, 0xBE763C8Bu, 0x3E93BF99u, 0xBEB8AA49u,
                                0x3EF6384Au, 0xBF38AA3Bu})
    p = fma_f32(p, f, float32::from_bits(c), rn, ftz);
  const float32 t = mul_f32(f, mul_f32(f, p));
  const float32 r = add_f32(e, fma_f32(f, float32::from_bits(0x3FB8AA3Bu), t, rn, ftz));
  return a.bits < 0x7F800000u ? r : fma_f32(a, float32::infinity(), float32::infinity(), rn, ftz);
}

// div.full.f32 (Triton's fp32 division, x / y) as ptxas expands it on sm_90
// (SASS of cuda/capture/triton_attention.py's division probe): a divisor
// above 2^126 in magnitude scales both operands by 1/4, a subnormal one by
// 2^24, then one MUFU.RCP and one FMUL. Not IEEE division: up to 2 ulp off.
inline float32 div_full_f32(float32 x, float32 y) {
  const float magnitude = std::fabs(to_host(y));
  if (magnitude > 8.50705917302346158658e+37f) {
    x = mul_f32(x, from_host(0.25f));
    y = mul_f32(y, from_host(0.25f));
  } else if (magnitude < 1.175494350822287508e-38f) {  // FSETP.GEU fails: NaN never scales
    x = mul_f32(x, from_host(16777216.0f));
    y = mul_f32(y, from_host(16777216.0f));
  }
  return mul_f32(x, rcp_approx_ftz(y));
}

}  // namespace bitexact::ptx
