// The GPU's scalar floating-point instructions as PTX names them: IEEE
// operations with CUDA's conventions on top (one canonical NaN; .ftz flushes
// subnormal inputs and results). Evidence: cuda/probe_alu.cu, docs/hardware.md.
#pragma once

#include "../core/environment.hpp"
#include "../core/format.hpp"
#include "../core/operations.hpp"

namespace bitexact::ptx {

// The environment one PTX rounding modifier (.rn .rz .rm .rp) and .ftz select.
constexpr environment gpu_environment(rounding_mode rounding = rounding_mode::nearest_even, bool ftz = false) {
  environment env;
  env.rounding = rounding;
  env.flush_to_zero = ftz;
  env.denormals_are_zero = ftz;
  env.nans = nan_policy::canonical;
  // .ftz flushes a result that is tiny after rounding to 24 bits with an
  // unbounded exponent: one that rounds up to 2^-126 is kept (probe: alu).
  env.tiny = tininess::after_rounding;
  return env;
}

// add.{rn,rz,rm,rp}{.ftz}.f32 (FADD), mul (FMUL), fma (FFMA).
constexpr float32 add_f32(float32 a, float32 b, rounding_mode r = rounding_mode::nearest_even, bool ftz = false) {
  return add(a, b, gpu_environment(r, ftz)).result;
}
constexpr float32 sub_f32(float32 a, float32 b, rounding_mode r = rounding_mode::nearest_even, bool ftz = false) {
  return sub(a, b, gpu_environment(r, ftz)).result;
}
constexpr float32 mul_f32(float32 a, float32 b, rounding_mode r = rounding_mode::nearest_even, bool ftz = false) {
  return mul(a, b, gpu_environment(r, ftz)).result;
}
constexpr float32 fma_f32(float32 a, float32 b, float32 c, rounding_mode r = rounding_mode::nearest_even,
                          bool ftz = false) {
  return fma(a, b, c, gpu_environment(r, ftz)).result;
}

// add.rn.bf16, mul.rn.bf16, fma.rn.bf16 as sm_90 executes them: one
// correct rounding of the exact result, subnormals kept, NaN -> 0x7FFF.
constexpr bfloat16 add_rn_bf16(bfloat16 a, bfloat16 b) { return add(a, b, gpu_environment()).result; }
constexpr bfloat16 mul_rn_bf16(bfloat16 a, bfloat16 b) { return mul(a, b, gpu_environment()).result; }
constexpr bfloat16 fma_rn_bf16(bfloat16 a, bfloat16 b, bfloat16 c) { return fma(a, b, c, gpu_environment()).result; }

// cvt.rn.bf16.f32 and cvt.rz.bf16.f32 (F2FP): any NaN becomes 0x7FFF.
constexpr bfloat16 cvt_rn_bf16_f32(float32 x) { return convert<bf16>(x, gpu_environment()).result; }
constexpr bfloat16 cvt_rz_bf16_f32(float32 x) {
  return convert<bf16>(x, gpu_environment(rounding_mode::toward_zero)).result;
}

// cvt.rn.bf16x2.f32 d, hi, lo (F2FP.BF16.F32.PACK_AB): the first source
// operand lands in the upper half of the packed register.
constexpr std::uint32_t cvt_rn_bf16x2_f32(float32 hi, float32 lo) {
  return (std::uint32_t{cvt_rn_bf16_f32(hi).bits} << 16) | cvt_rn_bf16_f32(lo).bits;
}

// cvt.rn.satfinite.bf16.f32: a result that would be infinite (an overflow or
// an infinite input) becomes the largest finite bf16 of its sign; NaN -> 0x7FFF
// (capture: ops.bin cvt section).
constexpr bfloat16 cvt_rn_satfinite_bf16_f32(float32 x) {
  const bfloat16 r = cvt_rn_bf16_f32(x);
  return r.is_inf() ? bfloat16::max_finite(r.sign()) : r;
}

// cvt.rn.relu.bf16.f32: a negative result, -0 included, becomes +0; NaN -> 0x7FFF
// (capture: ops.bin cvt section).
constexpr bfloat16 cvt_rn_relu_bf16_f32(float32 x) {
  const bfloat16 r = cvt_rn_bf16_f32(x);
  return !r.is_nan() && r.sign() ? bfloat16::zero() : r;
}

// cvt.rn.satfinite.e4m3x2.f32 (F2FP.SATFINITE.E4M3.F32), one of the pair: to
// nearest even, e4m3's subnormals kept, a result beyond 448 (an overflow or an
// infinite input) the largest finite e4m3 of its sign, NaN -> 0x7F. Evidence:
// cuDNN's fp8 attention captures (tests/data/attention_fp8), whose P and O
// pass through it; no capture probes it alone.
constexpr float8_e4m3 cvt_rn_satfinite_e4m3_f32(float32 x) {
  if (x.is_nan()) return float8_e4m3::canonical_nan();
  // e4m3 has no infinity: an overflow converts to its NaN pattern.
  const float8_e4m3 r = convert<e4m3>(x, gpu_environment()).result;
  return r.is_nan() ? float8_e4m3::max_finite(x.sign()) : r;
}

// An e4m3 back in fp32 as a kernel decodes it: cvt.rn.f16x2.e4m3x2
// (F2FP.F16.E4M3.UNPACK_B), then cvt.f32.f16; both exact, NaN stays NaN.
constexpr float32 cvt_f32_e4m3(float8_e4m3 x) { return convert<fp32>(x, gpu_environment()).result; }

// cvt.rn.f16.f32 and cvt.rn.f16x2.f32 d, hi, lo (F2FP.F16.F32.PACK_AB): RN-even
// with fp16 subnormals kept, overflow to infinity, any NaN -> 0x7FFF; the
// first source operand lands in the upper half (capture: ops.bin cvt section).
constexpr float16 cvt_rn_f16_f32(float32 x) { return convert<fp16>(x, gpu_environment()).result; }
constexpr std::uint32_t cvt_rn_f16x2_f32(float32 hi, float32 lo) {
  return (std::uint32_t{cvt_rn_f16_f32(hi).bits} << 16) | cvt_rn_f16_f32(lo).bits;
}

}  // namespace bitexact::ptx
