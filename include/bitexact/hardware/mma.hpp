// Tensor-core matrix multiply-accumulate: D = A * B + C as NVIDIA's tensor
// cores compute it, one fused multi-term adder per output element.
//
// Behaviour (Fasi et al. 2021, MMA-Sim 2025, and our probes in cuda/, see
// docs/hardware.md): every product is exact; the largest term's exponent
// e_max sets a window, and every term (the products and C) is truncated
// toward zero to kept_fraction_bits below 2^e_max; the truncated terms are
// summed exactly and the sum is rounded once, in round_pack, with the unit's
// output rounding. A step takes products_per_step products; longer dot
// products chain steps, the rounded result of one being C of the next.
#pragma once

#include <bit>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <stdexcept>
#include <type_traits>

#include "../core/environment.hpp"
#include "../core/format.hpp"
#include "../core/observer.hpp"
#include "../core/operations.hpp"
#include "../core/round.hpp"
#include "../core/platform.hpp"
#include "../core/unpack.hpp"

namespace bitexact {

// The parameters that tell one tensor-core generation from another, and the
// rules by which its results depart from an IEEE fused sum.
struct fused_sum_unit {
  int products_per_step;
  int kept_fraction_bits;  // bits kept below 2^e_max after alignment
  int zero_term_exponent;  // the exponent a zero term takes part in e_max with
  rounding_mode fp32_rounding;  // of the fused sum into an fp32 accumulator
  rounding_mode fp16_rounding;  // into an fp16 accumulator
  // Any NaN result (a NaN operand, 0 * inf, inf - inf) is the one canonical
  // NaN, and raises invalid; otherwise the x86 default NaN.
  bool canonical_nan = true;
  // A zero result is +0: an exact-zero sum, even of negative zeros, and a
  // negative sum that rounds to zero. Otherwise the rounded zero keeps its
  // sign and an exact-zero sum is IEEE's cancellation zero (-0 only when
  // rounding downward).
  bool never_negative_zero = true;
  // A sum beyond the largest finite value gives infinity whatever the output
  // rounding (IEEE's round-toward-zero would give the largest finite value).
  bool overflow_to_infinity = true;
  // Each step's sum into an fp32 accumulator is rounded first to E8M13
  // (fp32's range, 13 fraction bits) with the output rounding, the adder's
  // own accumulator, and only then stored: Hopper's fp8 steps into fp32. An
  // fp16 accumulator takes the sum rounded once, to fp16: the fp8 steps into
  // fp16 measured so (cuda/capture/capture_lowp.cu, docs/hardware.md).
  bool rounds_to_e8m13 = false;

  friend constexpr bool operator==(const fused_sum_unit&, const fused_sum_unit&) = default;
};

// Hopper mma.sync m16n8k16 and wgmma k=16: all 16 products in one step,
// rounded toward zero into fp32 but to nearest-even into fp16 (probes: 2.36M
// outputs of four variants, 0 mismatches, docs/hardware.md). The zero-term
// exponent -133 is pinned by probe_mma's tiny-products tiles (-132 and -134
// fail); the canonical NaN, the +0 and the overflow to infinity by its zeros,
// tiny-products and class 10 tiles on the H200.
inline constexpr fused_sum_unit sm90_tensor_core{16, 25, -133, rounding_mode::toward_zero,
                                                 rounding_mode::nearest_even};
// Ampere, from Fasi et al. and MMA-Sim, not probed here (no sm_80 GPU):
// two chained steps of 8 products, a 24-bit window; the special rules are
// assumed to be Hopper's.
inline constexpr fused_sum_unit sm80_tensor_core{8, 24, -132, rounding_mode::toward_zero,
                                                 rounding_mode::nearest_even};
// Hopper's adder fusing 8 products a step: mma.sync m16n8k8 (HMMA.1688, which
// sm80 CUTLASS kernels issue on sm_90) with bf16 and fp16, evidenced by the
// memory-efficient attention captures (docs/attention.md), and wgmma m64nNk8
// with tf32 into fp32 (HGMMA.64x8x8.F32.TF32), probed: capture_lowp's 524,288
// outputs, 0 mismatches; 24 or 26 bits, 4 products a step or rounding to
// nearest miss 51,000 to 118,000 of them, a zero-term exponent of -132 or
// -134 18 and 13 (tiny products). A tf32 operand is the upper 19 bits of its
// register (tf32_operand).
inline constexpr fused_sum_unit sm90_tensor_core_k8{8, 25, -133, rounding_mode::toward_zero,
                                                    rounding_mode::nearest_even};
// Hopper's fp8 step (wgmma m64nNk32, QGMMA; e4m3 and e5m2 in all four
// pairings): 32 products, a 13-bit window, each step's sum rounded toward zero
// to E8M13 into fp32, to nearest even straight into fp16. Probed:
// capture_lowp's 524,288 outputs for each of the eight variants, 0
// mismatches (docs/hardware.md has the alternatives ruled out); cuBLAS's fp8
// products under torch._scaled_mm agree (tests/data/matmul). The canonical
// NaN and +0 hold on the capture; no fp8 input shows the zero-term exponent
// (every value at or below -126 gives the same bits), nor an fp32 overflow.
inline constexpr fused_sum_unit sm90_tensor_core_fp8{32,   13,   -133, rounding_mode::toward_zero, rounding_mode::nearest_even,
                                                     true, true, true, true};

// A tf32 operand as wgmma reads it from its 32-bit register: the upper 19
// bits, the low 13 ignored rather than rounded (capture_lowp's tiles with
// those bits set: rounding the register to nearest misses 31,806 outputs).
constexpr value<tf32> tf32_operand(std::uint32_t register_bits) { return value<tf32>::from_bits(register_bits >> 13); }

namespace detail {

// A term's exponent as the hardware compares it: that of the leading bit
// position of a normal significand, even when the value is subnormal.
template <format F>
constexpr int nominal_exponent(const unpacked& u) {
  return u.exponent + F.fraction_bits;
}

// |significand| * 2^exponent cut toward zero to a multiple of 2^lsb_exponent,
// as a count of that unit; truncated says whether set bits were cut. Any term
// far below the unit gives 0. Precondition: a term above the unit (exponent >
// lsb_exponent) stays below 2^63 units, so that the count fits an int64.
constexpr std::int64_t truncate_to(std::uint64_t significand, int exponent, int lsb_exponent, bool& truncated) {
  truncated = false;
  // A zero term's exponent means nothing, and may lie far above the window.
  if (significand == 0) return 0;
  const int shift = lsb_exponent - exponent;
  if (shift <= 0) {
    BITEXACT_EXPECTS(-shift < 63 && (significand >> (62 + shift)) >> 1 == 0, "truncate_to: the term leaves an int64");
    return static_cast<std::int64_t>(significand << -shift);
  }
  if (shift >= 64) {
    truncated = true;
    return 0;
  }
  truncated = (significand & ((std::uint64_t{1} << shift) - 1)) != 0;
  return static_cast<std::int64_t>(significand >> shift);
}

// The unit's environment for an Acc accumulator: its own rounding and NaNs.
template <format Acc>
constexpr environment fused_sum_environment(const fused_sum_unit& unit) {
  environment env;
  env.rounding = Acc == fp16 ? unit.fp16_rounding : unit.fp32_rounding;
  env.nans = unit.canonical_nan ? nan_policy::canonical : nan_policy::ieee_propagate;
  return env;
}

// The fp8 adder's accumulator format (fused_sum_unit::rounds_to_e8m13).
inline constexpr format e8m13{8, 13};

// The end of every fused step, traced or fast: the exact sum of the kept
// terms (in units of 2^lsb_exponent) rounded once, in round_pack, then the
// unit's rules for zeros and overflow. A unit that rounds to E8M13 rounds
// there, for an fp32 accumulator, and the E8M13 value goes into fp32 exactly.
template <format Acc, class O>
BITEXACT_INLINE constexpr rounded<Acc> round_fused_sum(const fused_sum_unit& unit, const environment& env,
                                                       std::int64_t sum, int lsb_exponent, O&& obs) {
  flags raised;
  const bool sign = sum < 0;
  if (sum == 0) {
    report(obs, special_event{special_reason::zero_result});
    return {value<Acc>::zero(!unit.never_negative_zero && env.rounding == rounding_mode::downward), raised};
  }
  const auto magnitude = static_cast<std::uint64_t>(sign ? -sum : sum);
  report(obs, exact_event{sign, magnitude, lsb_exponent, false, false});
  const value<Acc> result =
      unit.rounds_to_e8m13 && Acc == fp32
          ? convert<Acc>(round_pack<e8m13>(sign, lsb_exponent, magnitude, false, env, raised, obs), env).result
          : round_pack<Acc>(sign, lsb_exponent, magnitude, false, env, raised, obs);
  if (unit.overflow_to_infinity && raised.any(flags::overflow)) return {value<Acc>::infinity(sign), raised};
  if (unit.never_negative_zero && result.is_zero()) return {value<Acc>::zero(false), raised};
  return {result, raised};
}

}  // namespace detail

// The most products one fused step takes (the terms live on the stack).
inline constexpr std::size_t max_products_per_step = 64;

// One fused step: sum over k of a[k] * b[k], plus c, rounded once to Acc.
// a and b have one length, at most max_products_per_step; else std::invalid_argument.
// B's format is A's unless given (fp8 steps pair e5m2 with e4m3).
template <format Acc, format In, format InB = In, class O = no_observer>
constexpr rounded<Acc> fused_multiply_add_step(const fused_sum_unit& unit, std::span<const value<In>> a,
                                               std::type_identity_t<std::span<const value<InB>>> b, value<Acc> c,
                                               O&& obs = {}) {
  // Before any element is read: a shorter b would be read past its end.
  if (a.size() != b.size() || a.size() > max_products_per_step)
    throw std::invalid_argument("fused_multiply_add_step: a and b must have the same length, at most 64 products");
  flags raised;

  // Special values decide the result before any alignment.
  bool any_nan = c.is_nan(), positive_infinity = false, negative_infinity = false;
  if (c.is_inf()) (c.sign() ? negative_infinity : positive_infinity) = true;
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (a[k].is_nan() || b[k].is_nan() || (a[k].is_inf() && b[k].is_zero()) || (a[k].is_zero() && b[k].is_inf()))
      any_nan = true;
    else if (a[k].is_inf() || b[k].is_inf())
      (a[k].sign() != b[k].sign() ? negative_infinity : positive_infinity) = true;
  }
  if (any_nan || (positive_infinity && negative_infinity)) {
    report(obs, special_event{special_reason::invalid_operation});
    return {unit.canonical_nan ? value<Acc>::canonical_nan() : value<Acc>::default_nan(true), flags{flags::invalid}};
  }
  if (positive_infinity || negative_infinity) {
    report(obs, special_event{special_reason::infinity_operand});
    return {value<Acc>::infinity(negative_infinity), raised};
  }

  struct term {
    bool sign;
    std::uint64_t significand;
    int exponent;
    int nominal;
  };
  term terms[max_products_per_step + 1];
  const std::size_t count = a.size();
  int max_exponent = unit.zero_term_exponent;
  for (std::size_t k = 0; k < count; ++k) {
    const unpacked ua = unpack(a[k]), ub = unpack(b[k]);
    const bool zero = ua.kind == value_class::zero || ub.kind == value_class::zero;
    terms[k] = {ua.sign != ub.sign, zero ? 0 : std::uint64_t{ua.significand} * ub.significand,
                ua.exponent + ub.exponent,
                zero ? unit.zero_term_exponent : detail::nominal_exponent<In>(ua) + detail::nominal_exponent<InB>(ub)};
    if (terms[k].nominal > max_exponent) max_exponent = terms[k].nominal;
  }
  const unpacked uc = unpack(c);
  terms[count] = {uc.sign, uc.significand, uc.exponent,
                  uc.kind == value_class::zero ? unit.zero_term_exponent : detail::nominal_exponent<Acc>(uc)};
  if (terms[count].nominal > max_exponent) max_exponent = terms[count].nominal;

  const int lsb_exponent = max_exponent - unit.kept_fraction_bits;
  std::int64_t sum = 0;
  for (std::size_t k = 0; k <= count; ++k) {
    bool truncated = false;
    const std::int64_t kept = detail::truncate_to(terms[k].significand, terms[k].exponent, lsb_exponent, truncated);
    sum += terms[k].sign ? -kept : kept;
    report(obs, fused_term_event{k == count ? -1 : static_cast<int>(k), terms[k].sign, terms[k].significand,
                                 terms[k].exponent, terms[k].nominal, terms[k].sign ? -kept : kept, truncated});
  }
  report(obs, fused_sum_event{max_exponent, lsb_exponent, sum});
  return detail::round_fused_sum<Acc>(unit, detail::fused_sum_environment<Acc>(unit), sum, lsb_exponent, obs);
}

// A dot product of any length as the unit runs it: steps of
// products_per_step in ascending k, each step's rounded result the next one's C.
template <format Acc, format In, format InB = In, class O = no_observer>
constexpr rounded<Acc> fused_dot(const fused_sum_unit& unit, std::span<const value<In>> a,
                                 std::type_identity_t<std::span<const value<InB>>> b, value<Acc> c, O&& obs = {}) {
  // Before any subspan of b is taken: one past its end is undefined.
  if (a.size() != b.size()) throw std::invalid_argument("fused_dot: a and b must have the same length");
  rounded<Acc> accumulator{c, {}};
  const auto step = static_cast<std::size_t>(unit.products_per_step);
  for (std::size_t k = 0; k < a.size(); k += step) {
    const std::size_t n = a.size() - k < step ? a.size() - k : step;
    const auto next = fused_multiply_add_step<Acc, In, InB>(unit, a.subspan(k, n), b.subspan(k, n), accumulator.result, obs);
    accumulator = {next.result, accumulator.raised |= next.raised};
  }
  return accumulator;
}

// mma_m16n8k16 through fused_dot, one output at a time: the reference the
// fast path is tested against.
template <format Acc, format In>
constexpr void mma_m16n8k16_reference(const fused_sum_unit& unit, std::span<const value<In>, 256> a,
                                      std::span<const value<In>, 128> b, std::span<const value<Acc>, 128> c,
                                      std::span<value<Acc>, 128> d) {
  for (std::size_t m = 0; m < 16; ++m)
    for (std::size_t n = 0; n < 8; ++n)
      d[m * 8 + n] = fused_dot(unit, a.subspan(m * 16, 16), b.subspan(n * 16, 16), c[m * 8 + n]).result;
}

namespace detail {

// The fast path of mma_m16n8k16, for callers without an observer: the same
// terms, e_max, truncation and exact sum as fused_multiply_add_step (which
// stays the reference and the traced path), for a row of eight outputs at a
// time, from operands decoded once per tile.
//
// It works in floats because that is exact here and vectorises on any x86-64:
// a product of two significands of at most 12 bits is exact in a float's 24;
// scaling it by a power of two is exact while it stays normal; and converting
// a float to an integer truncates toward zero, which is what the unit does to
// every term. A term is product * 2^(headroom - distance), distance = e_max -
// its nominal exponent, headroom = how far its last bit sits above 2^(e_max -
// kept_fraction_bits) when it holds e_max. Inf and NaN operands, and sums that
// come out exactly zero (the zero rule then reads the terms), take the generic path.
inline constexpr int fast_zero_nominal = -8192;  // far below any zero_term_exponent: zeros never set e_max
inline constexpr int fast_max_distance = 100;  // a 24-bit term 100 places down truncates to 0, and 2^-100 is normal

// GCC/Clang vector types of 16 bytes (SSE2 on any x86-64, NEON on ARM). A row
// of D is eight outputs: exponents in eight 16-bit lanes (one register, and
// SSE2 has 16-bit max and min), terms in two halves of four float lanes.
// Written lane by lane instead, GCC vectorises the wrong loop (strided over k).
using lane_floats = float __attribute__((vector_size(16)));
using lane_ints = std::int32_t __attribute__((vector_size(16)));
using lane_exponents = std::int16_t __attribute__((vector_size(16)));

// 2^(headroom - distance) for eight lanes, as the bit patterns of two float
// vectors: the exponent field sits in the upper 16 bits of each float, so
// interleaving zeros below (headroom + 127 - distance) << 7 builds it.
BITEXACT_INLINE void fast_scales(lane_exponents distance, int headroom, lane_floats& low, lane_floats& high) {
  const lane_exponents clamped = distance < fast_max_distance ? distance : lane_exponents{} + fast_max_distance;
  const lane_exponents upper = (static_cast<std::int16_t>(127 + headroom) - clamped) << 7;
  const lane_exponents zero{};
  low = bit_cast<lane_floats>(__builtin_shufflevector(zero, upper, 0, 8, 1, 9, 2, 10, 3, 11));
  high = bit_cast<lane_floats>(__builtin_shufflevector(zero, upper, 4, 12, 5, 13, 6, 14, 7, 15));
}

// trunc(x * scale) lane by lane: x is an exact small integer in a float, scale a power of two.
BITEXACT_INLINE lane_ints fast_term(lane_floats signed_significand, lane_floats scale) {
  return __builtin_convertvector(signed_significand * scale, lane_ints);
}

// Decodes xs into signed significands (exact small integers in floats) and
// nominal exponents, branch-free so that it vectorises; returns whether any
// element is Inf or NaN.
template <format F, std::size_t N>
BITEXACT_INLINE bool decode_fast(const value<F>* xs, float* signed_significand, std::int16_t* nominal_exponent) {
  constexpr auto top_exponent = static_cast<std::uint32_t>(F.max_biased_exponent());
  std::uint32_t special = 0;
  for (std::size_t i = 0; i < N; ++i) {
    const std::uint32_t bits = xs[i].bits;
    const std::uint32_t biased = (bits >> F.fraction_bits) & top_exponent;
    const std::uint32_t significand = significand_of_field(F, biased, bits & value<F>::fraction_mask());
    const std::uint32_t sign = (bits >> (F.width() - 1)) & 1;
    signed_significand[i] =
        bit_cast<float>(bit_cast<std::uint32_t>(static_cast<float>(static_cast<int>(significand))) | (sign << 31));
    // A zero does not compete for e_max at all.
    nominal_exponent[i] = static_cast<std::int16_t>(
        significand == 0 ? fast_zero_nominal : leading_exponent_of_field(F, biased));
    special |= std::uint32_t{biased == top_exponent};
  }
  return special != 0;
}

// Whether the float arithmetic above is exact for this unit and these formats,
// and no partial sum of 8 products and C leaves an int32 (each product term is
// below 2^(kept_fraction_bits + 2), C's below 2^(kept_fraction_bits + 1)).
template <format Acc, format In>
inline constexpr bool fast_path_formats =
#if !defined(__GNUC__)
    false &&  // the fast path is written with GCC/Clang vector types
#endif
    In.has_infinity() && Acc.has_infinity() && In.precision() <= 12 && Acc.precision() <= 24;

// The unit's parameters the float arithmetic holds for: a window of at most
// 25 bits holds every truncated term exactly in a float, and no term gains
// bits below its last one (headrooms of zero or more). A product with a zero
// factor has a nominal exponent at most fast_zero_nominal + 2 * 127, so a
// zero_term_exponent above fast_zero_nominal / 2 keeps such products out of
// e_max, as the generic step keeps them out with the zero-term exponent.
template <format Acc, format In>
constexpr bool fast_path_applies(const fused_sum_unit& unit) {
  return fast_path_formats<Acc, In> && unit.kept_fraction_bits <= 25 && unit.kept_fraction_bits >= 2 * In.fraction_bits &&
         unit.kept_fraction_bits >= Acc.fraction_bits && unit.products_per_step >= 1 &&
         unit.zero_term_exponent > fast_zero_nominal / 2 && !unit.rounds_to_e8m13;
}

// The fast path's rare cases (an infinite addend, an exact-zero sum) call the
// generic step out of line, so that it does not crowd the loops around it.
template <format Acc, format In>
[[gnu::noinline, gnu::cold]] value<Acc> fused_step_out_of_line(const fused_sum_unit& unit,
                                                               std::span<const value<In>> a,
                                                               std::span<const value<In>> b, value<Acc> c) {
  return fused_multiply_add_step<Acc, In>(unit, a, b, c).result;
}

// What one step of one row of D reads: A's row from the step's first product,
// B's rows (k, all eight n) from the same k, and the row's addends.
struct fast_step_operands {
  const float* a_significand;
  const std::int16_t* a_nominal;
  const lane_floats (*b_significand)[2];  // [k][half]
  const lane_exponents* b_nominal;        // [k]
  lane_floats c_significand[2];
  lane_exponents c_nominal;
};

// e_max and the exact sum of the kept terms for eight outputs of one step of
// `count` products (Count when nonzero, known at compile time so that the loops unroll).
template <int Count>
BITEXACT_INLINE void fast_step_sums(int count, const fast_step_operands& x, const fused_sum_unit& unit,
                                    int product_headroom, int addend_headroom, int* max_exponent, std::int64_t* sum) {
  const int products = Count != 0 ? Count : count;
  const lane_exponents zero_term = lane_exponents{} + static_cast<std::int16_t>(unit.zero_term_exponent);
  lane_exponents top = x.c_nominal > zero_term ? x.c_nominal : zero_term;
  lane_exponents nominal[16];  // a tile step has at most 16 products
  for (int k = 0; k < products; ++k) {
    nominal[k] = x.b_nominal[k] + x.a_nominal[k];
    top = nominal[k] > top ? nominal[k] : top;
  }
  std::int64_t lane_sum[8] = {};
  // Eight products at a time in int32 lanes (the bound in fast_path_applies), C with the first eight.
  for (int block = 0; block < products; block += 8) {
    const int block_end = block + 8 < products ? block + 8 : products;
    lane_ints partial_low{}, partial_high{};
    if (block == 0) {
      lane_floats low, high;
      fast_scales(top - x.c_nominal, addend_headroom, low, high);
      partial_low = fast_term(x.c_significand[0], low);
      partial_high = fast_term(x.c_significand[1], high);
    }
    for (int k = block; k < block_end; ++k) {
      lane_floats low, high;
      fast_scales(top - nominal[k], product_headroom, low, high);
      partial_low += fast_term(x.b_significand[k][0] * x.a_significand[k], low);
      partial_high += fast_term(x.b_significand[k][1] * x.a_significand[k], high);
    }
    for (int lane = 0; lane < 4; ++lane) {
      lane_sum[lane] += partial_low[lane];
      lane_sum[lane + 4] += partial_high[lane];
    }
  }
  for (int n = 0; n < 8; ++n) {
    max_exponent[n] = top[n];
    sum[n] = lane_sum[n];
  }
}

// mma_m16n8k16 without an observer, with the unit's rounding mode fixed at
// compile time (FixedMode, see with_fixed_rounding) so that round_pack's mode switch folds away.
template <format Acc, format In, int FixedMode>
bool mma_m16n8k16_fast_kernel(const fused_sum_unit& unit, std::span<const value<In>, 256> a,
                              std::span<const value<In>, 128> b, std::span<const value<Acc>, 128> c,
                              std::span<value<Acc>, 128> d) {
  environment env = fused_sum_environment<Acc>(unit);
  if constexpr (FixedMode != run_time_rounding) env.rounding = static_cast<rounding_mode>(FixedMode);
  // A row-major as given; B transposed to [k][n], so that a row of D reads eight neighbours.
  float a_significand[16][16], b_by_column[128];
  std::int16_t a_nominal[16][16], b_nominal_by_column[128];
  lane_floats b_significand[16][2];
  lane_exponents b_nominal[16];
  const bool special = decode_fast<In, 256>(a.data(), &a_significand[0][0], &a_nominal[0][0]) |
                       unsigned{decode_fast<In, 128>(b.data(), b_by_column, b_nominal_by_column)};
  if (special) return false;
  for (int k = 0; k < 16; ++k)
    for (int n = 0; n < 8; ++n) {
      b_significand[k][n / 4][n % 4] = b_by_column[n * 16 + k];
      b_nominal[k][n] = b_nominal_by_column[n * 16 + k];
    }

  const int product_headroom = unit.kept_fraction_bits - 2 * In.fraction_bits;
  const int addend_headroom = unit.kept_fraction_bits - Acc.fraction_bits;
  const int step = unit.products_per_step;
  for (int m = 0; m < 16; ++m) {
    value<Acc> accumulator[8];
    for (int n = 0; n < 8; ++n) accumulator[n] = c[unsigned(m * 8 + n)];
    for (int k0 = 0; k0 < 16; k0 += step) {
      const int k_end = k0 + step < 16 ? k0 + step : 16;
      float c_significand[8];
      std::int16_t c_nominal[8];
      const bool special_addend = decode_fast<Acc, 8>(accumulator, c_significand, c_nominal);
      // An earlier step overflowed to infinity: this step is the generic one's special case.
      const auto generic_step = [&](int n) {
        return fused_step_out_of_line<Acc, In>(unit, a.subspan(unsigned(m * 16 + k0), unsigned(k_end - k0)),
                                               b.subspan(unsigned(n * 16 + k0), unsigned(k_end - k0)), accumulator[n]);
      };
      if (special_addend) {
        for (int n = 0; n < 8; ++n) accumulator[n] = generic_step(n);
        continue;
      }

      int max_exponent[8];
      std::int64_t sum[8];
      fast_step_operands operands{&a_significand[m][k0], &a_nominal[m][k0], &b_significand[k0], &b_nominal[k0], {}, {}};
      std::memcpy(operands.c_significand, c_significand, sizeof c_significand);
      std::memcpy(&operands.c_nominal, c_nominal, sizeof c_nominal);
      // The usual steps get loops of known length, which unroll with the eight lanes in registers.
      if (k_end - k0 == 16) fast_step_sums<16>(16, operands, unit, product_headroom, addend_headroom, max_exponent, sum);
      else if (k_end - k0 == 8) fast_step_sums<8>(8, operands, unit, product_headroom, addend_headroom, max_exponent, sum);
      else fast_step_sums<0>(k_end - k0, operands, unit, product_headroom, addend_headroom, max_exponent, sum);

      for (int n = 0; n < 8; ++n)
        accumulator[n] = sum[n] == 0 ? generic_step(n)
                                     : round_fused_sum<Acc>(unit, env, sum[n], max_exponent[n] - unit.kept_fraction_bits,
                                                            no_observer{})
                                           .result;
    }
    for (int n = 0; n < 8; ++n) d[unsigned(m * 8 + n)] = accumulator[n];
  }
  return true;
}

// mma_m16n8k16 without an observer. Returns false, having written nothing,
// when the tile holds Inf or NaN inputs (the generic path decides those).
template <format Acc, format In>
bool mma_m16n8k16_fast(const fused_sum_unit& unit, std::span<const value<In>, 256> a,
                       std::span<const value<In>, 128> b, std::span<const value<Acc>, 128> c,
                       std::span<value<Acc>, 128> d) {
  return with_fixed_rounding(fused_sum_environment<Acc>(unit), [&](auto mode) {
    return mma_m16n8k16_fast_kernel<Acc, In, mode()>(unit, a, b, c, d);
  });
}

}  // namespace detail

// mma.sync.aligned.m16n8k16.row.col: A is 16x16 row-major, B is 16x8 with
// element (k, n) at b[n * 16 + k] (column-major, as ".col" names it), C and D
// are 16x8 row-major. Logical layout only: fragments are the caller's concern.
// Runs the fast path when it applies; its results equal the generic
// fused_dot's bit for bit (tests/test_mma_fast_path.cpp compares them).
template <format Acc, format In>
constexpr void mma_m16n8k16(const fused_sum_unit& unit, std::span<const value<In>, 256> a,
                            std::span<const value<In>, 128> b, std::span<const value<Acc>, 128> c,
                            std::span<value<Acc>, 128> d) {
  if constexpr (detail::fast_path_formats<Acc, In>) {
    if (!std::is_constant_evaluated() && detail::fast_path_applies<Acc, In>(unit) &&
        detail::mma_m16n8k16_fast<Acc, In>(unit, a, b, c, d))
      return;
  }
  mma_m16n8k16_reference(unit, a, b, c, d);
}

// wgmma.mma_async.sync.aligned.m64nNk16 (sm_90a): per output the same fused
// step as mma.sync (probe_mma: 3.4e7 wgmma m64n8k16 outputs, 0 mismatches),
// so the 64xN product is run as 16x8 blocks. A is 64x16 row-major, B is 16xN
// with element (k, n) at b[n * 16 + k], C and D are 64xN row-major.
template <format Acc, format In, std::size_t N>
constexpr void wgmma_m64nNk16(const fused_sum_unit& unit, std::span<const value<In>, 64 * 16> a,
                              std::span<const value<In>, N * 16> b, std::span<const value<Acc>, 64 * N> c,
                              std::span<value<Acc>, 64 * N> d) {
  static_assert(N >= 8 && N <= 256 && N % 8 == 0, "wgmma's N is a multiple of 8 from 8 to 256");
  for (std::size_t slab = 0; slab < 4; ++slab) {
    for (std::size_t group = 0; group < N / 8; ++group) {
      std::array<value<Acc>, 128> c_block{}, d_block{};
      for (std::size_t i = 0; i < 16; ++i)
        for (std::size_t n = 0; n < 8; ++n) c_block[i * 8 + n] = c[(slab * 16 + i) * N + group * 8 + n];
      mma_m16n8k16<Acc, In>(unit, a.subspan(slab * 256).template first<256>(),
                            b.subspan(group * 128).template first<128>(), c_block, d_block);
      for (std::size_t i = 0; i < 16; ++i)
        for (std::size_t n = 0; n < 8; ++n) d[(slab * 16 + i) * N + group * 8 + n] = d_block[i * 8 + n];
    }
  }
}

}  // namespace bitexact
