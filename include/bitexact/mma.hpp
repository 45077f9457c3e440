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

#include <cstdint>
#include <cstdlib>
#include <span>

#include "environment.hpp"
#include "format.hpp"
#include "observer.hpp"
#include "operations.hpp"
#include "round.hpp"
#include "specialize.hpp"
#include "unpack.hpp"

namespace bitexact {

// The parameters that tell one tensor-core generation from another.
struct fused_sum_unit {
  int products_per_step;
  int kept_fraction_bits;  // bits kept below 2^e_max after alignment
  int zero_term_exponent;  // the exponent a zero term takes part in e_max with
  rounding_mode fp32_rounding;  // of the fused sum into an fp32 accumulator
  rounding_mode fp16_rounding;  // into an fp16 accumulator
};

// Hopper mma.sync m16n8k16 and wgmma k=16: all 16 products in one step,
// rounded toward zero into fp32 but to nearest-even into fp16 (probes: 2.36M
// outputs of four variants, 0 mismatches, docs/hardware.md). The zero-term
// exponent is the lead's -133: the captures only bound it to <= -128.
inline constexpr fused_sum_unit sm90_tensor_core{16, 25, -133, rounding_mode::toward_zero,
                                                 rounding_mode::nearest_even};
// Ampere, from Fasi et al. and MMA-Sim, not probed here (no sm_80 GPU):
// two chained steps of 8 products, a 24-bit window.
inline constexpr fused_sum_unit sm80_tensor_core{8, 24, -132, rounding_mode::toward_zero,
                                                 rounding_mode::nearest_even};

// One term of a fused step after alignment, for traces.
struct fused_term_event {
  int index;                 // product k of the step, or -1 for the addend C
  bool sign;
  std::uint64_t significand;  // exact: product of significands, or C's
  int exponent;              // of the significand's last bit
  int nominal_exponent;      // the exponent that competes for e_max
  std::int64_t kept;         // signed multiple of 2^(e_max - kept_fraction_bits) that survives
  bool truncated;            // whether bits were cut away
};

struct fused_sum_event {
  int max_exponent;   // e_max
  int lsb_exponent;   // e_max - kept_fraction_bits
  std::int64_t sum;   // exact sum of the kept terms, in units of 2^lsb_exponent
};

namespace detail {

// A term's exponent as the hardware compares it: that of the leading bit
// position of a normal significand, even when the value is subnormal.
template <format F>
constexpr int nominal_exponent(const unpacked& u) {
  return u.exponent + F.fraction_bits;
}

// |significand| * 2^exponent cut toward zero to a multiple of 2^lsb_exponent.
constexpr std::int64_t truncate_to(std::uint64_t significand, int exponent, int lsb_exponent, bool& truncated) {
  const int shift = lsb_exponent - exponent;
  if (shift <= 0) {
    truncated = false;
    return static_cast<std::int64_t>(significand << -shift);
  }
  if (shift >= 64) {
    truncated = significand != 0;
    return 0;
  }
  truncated = (significand & ((std::uint64_t{1} << shift) - 1)) != 0;
  return static_cast<std::int64_t>(significand >> shift);
}

}  // namespace detail

// One fused step: sum over k of a[k] * b[k], plus c, rounded once to Acc.
template <format Acc, format In, class O = no_observer>
constexpr rounded<Acc> fused_multiply_add_step(const fused_sum_unit& unit, std::span<const value<In>> a,
                                               std::span<const value<In>> b, value<Acc> c, O&& obs = {}) {
  flags raised;
  environment env;
  env.rounding = Acc == fp16 ? unit.fp16_rounding : unit.fp32_rounding;
  env.nans = nan_policy::canonical;

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
    return {value<Acc>::canonical_nan(), flags{flags::invalid}};
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
  term terms[64 + 1];
  const std::size_t count = a.size();
  int max_exponent = unit.zero_term_exponent;
  bool every_term_negative_zero = c.is_zero() && c.sign();
  for (std::size_t k = 0; k < count; ++k) {
    const unpacked ua = unpack(a[k]), ub = unpack(b[k]);
    const bool zero = ua.kind == value_class::zero || ub.kind == value_class::zero;
    every_term_negative_zero = every_term_negative_zero && zero && ua.sign != ub.sign;
    terms[k] = {ua.sign != ub.sign, zero ? 0 : std::uint64_t{ua.significand} * ub.significand,
                ua.exponent + ub.exponent,
                zero ? unit.zero_term_exponent : detail::nominal_exponent<In>(ua) + detail::nominal_exponent<In>(ub)};
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
    if constexpr (is_observing<O>) {
      obs.on(fused_term_event{k == count ? -1 : static_cast<int>(k), terms[k].sign, terms[k].significand,
                              terms[k].exponent, terms[k].nominal, terms[k].sign ? -kept : kept, truncated});
    }
  }
  report(obs, fused_sum_event{max_exponent, lsb_exponent, sum});
  if (sum == 0) {
    report(obs, special_event{special_reason::zero_result});
    return {value<Acc>::zero(every_term_negative_zero), raised};
  }
  const bool sign = sum < 0;
  const auto magnitude = static_cast<std::uint64_t>(sign ? -sum : sum);
  report(obs, exact_event{sign, magnitude, lsb_exponent, false, false});
  const value<Acc> result = round_pack<Acc>(sign, lsb_exponent, magnitude, false, env, raised, obs);
  // The unit overflows to infinity even when it rounds toward zero (probe: class 10 tiles).
  if (raised.any(flags::overflow)) return {value<Acc>::infinity(sign), raised};
  return {result, raised};
}

// A dot product of any length as the unit runs it: steps of
// products_per_step in ascending k, each step's rounded result the next one's C.
template <format Acc, format In, class O = no_observer>
constexpr rounded<Acc> fused_dot(const fused_sum_unit& unit, std::span<const value<In>> a,
                                 std::span<const value<In>> b, value<Acc> c, O&& obs = {}) {
  rounded<Acc> accumulator{c, {}};
  const auto step = static_cast<std::size_t>(unit.products_per_step);
  for (std::size_t k = 0; k < a.size(); k += step) {
    const std::size_t n = a.size() - k < step ? a.size() - k : step;
    const auto next = fused_multiply_add_step(unit, a.subspan(k, n), b.subspan(k, n), accumulator.result, obs);
    accumulator = {next.result, accumulator.raised |= next.raised};
  }
  return accumulator;
}

// mma.sync.aligned.m16n8k16.row.col: A is 16x16 row-major, B is 16x8 with
// element (k, n) at b[n * 16 + k] (column-major, as ".col" names it), C and D
// are 16x8 row-major. Logical layout only: fragments are the caller's concern.
template <format Acc, format In>
constexpr void mma_m16n8k16(const fused_sum_unit& unit, std::span<const value<In>, 256> a,
                            std::span<const value<In>, 128> b, std::span<const value<Acc>, 128> c,
                            std::span<value<Acc>, 128> d) {
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n)
      d[m * 8 + n] = fused_dot(unit, a.subspan(m * 16, 16), b.subspan(n * 16, 16), c[m * 8 + n]).result;
}

}  // namespace bitexact
