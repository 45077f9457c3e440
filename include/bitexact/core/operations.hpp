// The exact operations: each computes its exact result and rounds it once,
// in round_pack. Operand formats may differ; the result format is the
// operands' own unless named first, as in add<fp32>(accumulator, bf16_value).
#pragma once

#include <compare>
#include <cstdint>
#include <limits>
#include <utility>

#include "bits.hpp"
#include "environment.hpp"
#include "exact_double.hpp"
#include "format.hpp"
#include "observer.hpp"
#include "round.hpp"
#include "platform.hpp"
#include "unpack.hpp"

namespace bitexact {

template <format F>
struct rounded {
  value<F> result;
  flags raised;
  constexpr operator value<F>() const { return result; }  // NOLINT: a rounded value is used as a value
  friend constexpr bool operator==(const rounded&, const rounded&) = default;
};

// Names "the format of the operands" where a result format may be given.
inline constexpr format same_format{};

namespace detail {

template <format R, format A, format... Rest>
constexpr format pick_result_format() {
  static_assert(R != same_format || ((A == Rest) && ...),
                "operands have different formats: name the result format, e.g. add<fp32>(accumulator, x)");
  return R == same_format ? A : R;
}

template <format R, class O>
constexpr rounded<R> finish(value<R> result, flags raised, O& obs) {
  report(obs, result_event{R, result.bits, raised});
  return {result, raised};
}

template <format F, class O>
constexpr unpacked read_operand(int index, value<F> x, const environment& env, O& obs) {
  const unpacked u = unpack(x, env);
  report(obs, operand_event{index, F, x.bits, u});
  return u;
}

// The exact sum of two nonzero signed terms x*2^ex and y*2^ey, in Wide bits:
// the term with the higher leading bit is shifted so that leading bit sits at
// bit width-3; the other joins it exactly, or, if it reaches below bit 0,
// with its lost bits jammed into bit 0 (it is then so far below that no
// cancellation can bring the jam near the rounding position).
template <class Wide>
struct exact_sum {
  bool sign;
  Wide significand;  // zero when the terms cancel exactly
  int exponent;
  alignment_event alignment;
  int leading_bit_shift;
};

template <class Wide>
constexpr exact_sum<Wide> sum_exactly(bool first_sign, Wide first, int first_exponent, bool second_sign, Wide second,
                                      int second_exponent) {
  constexpr int width = sizeof(Wide) * 8;
  constexpr int top = width - 3;
  const int first_lead = first_exponent + msb_index(first);
  const int second_lead = second_exponent + msb_index(second);
  // Swap and add-or-subtract with masks rather than branches: on random signs
  // and magnitudes each branch would mispredict half the time. After the
  // swap, upper is the term with the higher leading bit, lower the other.
  const bool swapped = first_lead < second_lead;
  const Wide swap_terms = (first ^ second) & -static_cast<Wide>(swapped);
  const Wide upper = first ^ swap_terms, lower = second ^ swap_terms;
  const int swap_exponents = (first_exponent ^ second_exponent) & -static_cast<int>(swapped);
  const int upper_exponent = first_exponent ^ swap_exponents, lower_exponent = second_exponent ^ swap_exponents;
  const bool swap_signs = (first_sign != second_sign) & swapped;
  const bool upper_sign = first_sign != swap_signs, lower_sign = second_sign != swap_signs;
  const int upper_shift = top - msb_index(upper);
  const Wide upper_aligned = upper << upper_shift;
  const int exponent = upper_exponent - upper_shift;
  const int lower_shift = lower_exponent - exponent;
  Wide lower_aligned;
  Wide shifted_out = 0;
  if (lower_shift >= 0) {
    lower_aligned = lower << lower_shift;
  } else {
    const int align_shift = -lower_shift;
    shifted_out = align_shift >= width ? lower : (lower & ((Wide{1} << align_shift) - 1));
    lower_aligned = shift_right_jam(lower, align_shift);
  }
  exact_sum<Wide> sum{};
  sum.exponent = exponent;
  // Both terms lie below bit width-2, so a difference that goes negative
  // (the lower term came first: equal leading bits) shows in the top bit;
  // it is negated, and the sign becomes the lower term's.
  const Wide subtract = -static_cast<Wide>(upper_sign != lower_sign);
  const Wide total = upper_aligned + ((lower_aligned ^ subtract) - subtract);
  const Wide negative = -(total >> (width - 1));
  sum.sign = upper_sign != static_cast<bool>(negative & 1);
  sum.significand = (total ^ negative) - negative;
  sum.alignment = alignment_event{(swapped ? second_lead - first_lead : first_lead - second_lead),
                                  lower_shift < 0 ? -lower_shift : 0, static_cast<uint128>(shifted_out),
                                  shifted_out != 0, swapped};
  sum.leading_bit_shift = sum.significand ? msb_index(sum.significand) - top : 0;
  return sum;
}

// Hand an exact result of any width to round_pack, keeping 64 bits (far more
// than any format's precision) and jamming the rest.
template <format R, class Wide, class O>
constexpr value<R> round_wide(bool sign, int exponent, Wide significand, bool inexact_below, const environment& env,
                              flags& raised, O& obs) {
  if constexpr (sizeof(Wide) > 8) {
    const int excess = msb_index(significand) - 63;
    if (excess > 0) {
      significand = shift_right_jam(significand, excess);
      exponent += excess;
    }
  }
  return round_pack<R>(sign, exponent, static_cast<std::uint64_t>(significand), inexact_below, env, raised, obs);
}

// Round an exact finite nonzero operand into R (x + 0, x * 1 and conversions).
template <format R, class O>
constexpr value<R> round_unpacked(const unpacked& u, const environment& env, flags& raised, O& obs) {
  report(obs, exact_event{u.sign, u.significand, u.exponent, false, false});
  return round_pack<R>(u.sign, u.exponent, u.significand, false, env, raised, obs);
}

// An exactly zero sum: +0, except -0 when both addends are -0, or when they
// cancel under downward rounding.
constexpr bool zero_sum_sign(bool a_sign, bool b_sign, const environment& env) {
  return a_sign == b_sign ? a_sign : env.rounding == rounding_mode::downward;
}

// The result of a fast path: an exact double rounded into R with env's mode,
// when it is normal in R (or overflows); otherwise (zero, subnormal)
// Fallback's general code.
template <format R, class Fallback>
BITEXACT_INLINE constexpr rounded<R> round_exact_double(double exact, const environment& env, Fallback&& fallback) {
  using pattern = double_as_extended<R>;
  const auto bits = bit_cast<std::uint64_t>(exact);
  if (!pattern::fits(bits << 1)) [[unlikely]] return fallback();
  return with_fixed_rounding(env, [&](auto mode) {
    flags raised;
    const value<R> result = pattern::template round<mode()>(bits >> 63, bits << 1, env, raised);
    return rounded<R>{result, raised};
  });
}

template <format R, format A, format B>
constexpr rounded<R> add_or_sub_untraced(operation op, value<A> a, value<B> b, const environment& env);

// a + b (b already negated for a subtraction) for two normal operands of one
// format F that add_fast's test did not take: too far apart for their sum to
// be exact in a double, or outside its window. A smaller operand more than
// far_apart binades below the larger is replaced by a stand-in with the same
// sign, 2^(larger's exponent - far_apart): both lie below the guard bit of
// every result (at the larger's exponent - R.fraction_bits - 2 or higher;
// after-rounding tininess looks one bit further), so the exact sum moves only
// between two multiples of 2^guard, and every mode but stochastic (which
// reads 32 bits below the last kept one) rounds it the same way. Out of line.
template <format R, format F>
[[gnu::noinline]] constexpr rounded<R> add_far_apart(operation op, value<F> a, value<F> b, std::uint32_t b_bits,
                                                     const environment& env) {
  constexpr int far_apart = exact_sum_window<F>::far_apart;
  static_assert(far_apart >= R.fraction_bits + 4, "the stand-in must stay below every guard bit");
  constexpr std::uint32_t sign_bit = 1u << (F.width() - 1);
  constexpr std::uint32_t exponent_mask = static_cast<std::uint32_t>(F.max_biased_exponent()) << F.fraction_bits;
  const auto general = [&] { return add_or_sub_untraced<R>(op, a, b, env); };
  if (!is_normal_pattern<F>(a.bits) || !is_normal_pattern<F>(b_bits)) return general();
  const bool swapped = (a.bits & ~sign_bit) < (b_bits & ~sign_bit);
  const std::uint32_t larger = swapped ? b_bits : a.bits;
  std::uint32_t smaller = swapped ? a.bits : b_bits;
  // The stand-in's magnitude as a bit pattern of F; not positive when no
  // normal operand lies that far down.
  const auto stand_in = static_cast<std::int32_t>((larger & exponent_mask) - (far_apart << F.fraction_bits));
  if (static_cast<std::int32_t>(smaller & ~sign_bit) < stand_in) {
    if (env.rounding == rounding_mode::stochastic) return general();
    smaller = (smaller & sign_bit) | static_cast<std::uint32_t>(stand_in);
  }
  return round_exact_double<R>(exact_double<F>(larger) + exact_double<F>(smaller), env, general);
}

// a + b (b already negated for a subtraction) for operands of one format F,
// untraced, when it is exact in a double: both operands normal and their
// exponents at most 52 - F.fraction_bits apart. Other normal operands go to
// add_far_apart, anything else to the general code, both out of line.
template <format R, format F>
BITEXACT_INLINE constexpr rounded<R> add_fast(operation op, value<F> a, value<F> b, std::uint32_t b_bits,
                                              const environment& env) {
  using window = exact_sum_window<F>;
  constexpr int far_apart = window::far_apart;
  constexpr int max_biased = F.max_biased_exponent();
  const auto general = [&] { return add_or_sub_untraced<R>(op, a, b, env); };
  if constexpr (max_biased - 2 <= far_apart) {
    // Any two normals are close enough.
    if (!is_normal_pattern<F>(a.bits) || !is_normal_pattern<F>(b_bits)) [[unlikely]] return general();
  } else {
    static_assert(F.has_infinity());
    constexpr int lowest = window::lowest_exponent, highest = window::highest_exponent;
    static_assert(highest - lowest >= 64, "the window must hold the common magnitudes");
    constexpr std::uint32_t unit = 1u << F.fraction_bits;
    constexpr std::uint32_t exponent_mask = static_cast<std::uint32_t>(max_biased) * unit;
    const std::uint32_t a_field = a.bits & exponent_mask, b_field = b_bits & exponent_mask;
    const bool in_window = a_field - static_cast<std::uint32_t>(lowest + F.bias()) * unit <=
                        static_cast<std::uint32_t>(highest - lowest) * unit;
    const bool close = a_field - b_field + far_apart * unit <= 2 * far_apart * unit;
    if (!(in_window && close)) [[unlikely]] return add_far_apart<R>(op, a, b, b_bits, env);
  }
  // An exactly zero sum (b is -a) goes to the general code too.
  return round_exact_double<R>(exact_double<F>(a.bits) + exact_double<F>(b_bits), env, general);
}

template <format R, format A, format B, class O>
constexpr rounded<R> add_or_sub_general(operation op, value<A> a, value<B> b, const environment& env, O& obs) {
  flags raised;
  report(obs, operation_event{op, R, env});
  const unpacked ua = read_operand(0, a, env, obs);
  unpacked ub = read_operand(1, b, env, obs);
  if (op == operation::sub) ub.sign = !ub.sign;

  // One test keeps the common case (two finite nonzero operands) clear of the
  // special cases below, each of which returns.
  if (!is_finite_nonzero(ua.kind) || !is_finite_nonzero(ub.kind)) [[unlikely]] {
    if (is_nan(ua.kind) || is_nan(ub.kind)) {
      report(obs, special_event{special_reason::nan_operand});
      return finish(propagate_nan<R>(env, raised, a, b), raised, obs);
    }
    if (ua.kind == value_class::infinity || ub.kind == value_class::infinity) {
      if (ua.kind == ub.kind && ua.sign != ub.sign) {
        report(obs, special_event{special_reason::invalid_operation});
        return finish(invalid_result<R>(env, raised), raised, obs);
      }
      report(obs, special_event{special_reason::infinity_operand});
      const bool sign = ua.kind == value_class::infinity ? ua.sign : ub.sign;
      return finish(infinite_operand_result<R>(sign, env, raised), raised, obs);
    }
    if (ua.kind == value_class::zero && ub.kind == value_class::zero) {
      report(obs, special_event{special_reason::zero_result});
      return finish(value<R>::zero(zero_sum_sign(ua.sign, ub.sign, env)), raised, obs);
    }
    if (ua.kind == value_class::zero) return finish(round_unpacked<R>(ub, env, raised, obs), raised, obs);
    return finish(round_unpacked<R>(ua, env, raised, obs), raised, obs);  // ub is zero
  }

  const auto sum = sum_exactly<std::uint64_t>(ua.sign, ua.significand, ua.exponent, ub.sign, ub.significand,
                                              ub.exponent);
  report(obs, sum.alignment);
  report(obs, exact_event{sum.sign, sum.significand, sum.exponent, false, ua.sign != ub.sign});
  if (sum.significand) report(obs, normalization_event{sum.leading_bit_shift});
  if (sum.significand == 0) {
    report(obs, special_event{special_reason::zero_result});
    return finish(value<R>::zero(zero_sum_sign(ua.sign, ub.sign, env)), raised, obs);
  }
  return finish(round_pack<R>(sum.sign, sum.exponent, sum.significand, false, env, raised, obs), raised, obs);
}

// Out of line, so that the fast path inlined into a caller's loop does not
// carry the registers and code of every special case.
template <format R, format A, format B>
[[gnu::noinline]] constexpr rounded<R> add_or_sub_untraced(operation op, value<A> a, value<B> b,
                                                          const environment& env) {
  no_observer none;
  return add_or_sub_general<R>(op, a, b, env, none);
}

template <format R, format A, format B, class O>
BITEXACT_INLINE constexpr rounded<R> add_or_sub(operation op, value<A> a, value<B> b, const environment& env, O& obs) {
  if constexpr (A == B)
    if (!is_listening(obs)) return add_fast<R>(op, a, b, op == operation::sub ? (-b).bits : b.bits, env);
  return add_or_sub_general<R>(op, a, b, env, obs);
}

// x * y exactly, for finite nonzero x and y.
struct exact_product {
  bool sign;
  std::uint64_t significand;
  int exponent;
};
constexpr exact_product multiply_exactly(const unpacked& x, const unpacked& y) {
  return {x.sign != y.sign, std::uint64_t{x.significand} * y.significand, x.exponent + y.exponent};
}

constexpr uint128 integer_sqrt(uint128 n) {
  uint128 root = 0;
  for (uint128 bit = uint128{1} << 126; bit != 0; bit >>= 2) {
    if (n >= root + bit) {
      n -= root + bit;
      root = (root >> 1) + bit;
    } else {
      root >>= 1;
    }
  }
  return root;
}

}  // namespace detail

template <format R = same_format, format A, format B, class O = no_observer>
constexpr auto add(value<A> a, value<B> b, const environment& env = {}, O&& obs = {}) {
  return detail::add_or_sub<detail::pick_result_format<R, A, B>()>(operation::add, a, b, env, obs);
}

template <format R = same_format, format A, format B, class O = no_observer>
constexpr auto sub(value<A> a, value<B> b, const environment& env = {}, O&& obs = {}) {
  return detail::add_or_sub<detail::pick_result_format<R, A, B>()>(operation::sub, a, b, env, obs);
}

namespace detail {

// a * b for any operands, untraced: the general code, out of line, for what
// mul_fast does not take.
template <format R, format A, format B>
constexpr rounded<R> mul_untraced(value<A> a, value<B> b, const environment& env);

// a * b for two normal operands, untraced: the product of two significands
// of at most 24 bits each is exact in a double.
template <format R, format A, format B>
BITEXACT_INLINE constexpr rounded<R> mul_fast(value<A> a, value<B> b, const environment& env) {
  static_assert(A.precision() + B.precision() <= 53);
  const auto general = [&] { return mul_untraced<R>(a, b, env); };
  if (!is_normal_pattern<A>(a.bits) || !is_normal_pattern<B>(b.bits)) [[unlikely]] return general();
  // A product that is subnormal in R goes to the general code.
  return round_exact_double<R>(exact_double<A>(a.bits) * exact_double<B>(b.bits), env, general);
}

template <format R, format A, format B, class O>
constexpr rounded<R> mul_general(value<A> a, value<B> b, const environment& env, O& obs);

template <format R, format A, format B>
[[gnu::noinline]] constexpr rounded<R> mul_untraced(value<A> a, value<B> b, const environment& env) {
  no_observer none;
  return mul_general<R>(a, b, env, none);
}

}  // namespace detail

template <format R = same_format, format A, format B, class O = no_observer>
constexpr auto mul(value<A> a, value<B> b, const environment& env = {}, O&& obs = {}) {
  constexpr format Rf = detail::pick_result_format<R, A, B>();
  if (!is_listening(obs)) return detail::mul_fast<Rf>(a, b, env);
  return detail::mul_general<Rf>(a, b, env, obs);
}

namespace detail {
template <format Rf, format A, format B, class O>
constexpr rounded<Rf> mul_general(value<A> a, value<B> b, const environment& env, O& obs) {
  flags raised;
  report(obs, operation_event{operation::mul, Rf, env});
  const unpacked ua = detail::read_operand(0, a, env, obs);
  const unpacked ub = detail::read_operand(1, b, env, obs);
  const bool sign = ua.sign != ub.sign;
  // One test keeps the common case (two finite nonzero operands) clear of the special cases.
  if (!is_finite_nonzero(ua.kind) || !is_finite_nonzero(ub.kind)) [[unlikely]] {
    if (is_nan(ua.kind) || is_nan(ub.kind)) {
      report(obs, special_event{special_reason::nan_operand});
      return detail::finish(propagate_nan<Rf>(env, raised, a, b), raised, obs);
    }
    if (ua.kind == value_class::infinity || ub.kind == value_class::infinity) {
      if (ua.kind == value_class::zero || ub.kind == value_class::zero) {
        report(obs, special_event{special_reason::invalid_operation});
        return detail::finish(invalid_result<Rf>(env, raised), raised, obs);
      }
      report(obs, special_event{special_reason::infinity_operand});
      return detail::finish(infinite_operand_result<Rf>(sign, env, raised), raised, obs);
    }
    report(obs, special_event{special_reason::zero_result});  // an operand is zero
    return detail::finish(value<Rf>::zero(sign), raised, obs);
  }
  const auto product = detail::multiply_exactly(ua, ub);
  report(obs, exact_event{product.sign, product.significand, product.exponent, false, false});
  return detail::finish(
      round_pack<Rf>(product.sign, product.exponent, product.significand, false, env, raised, obs), raised, obs);
}
}  // namespace detail

// a * b + c with a single rounding.
template <format R = same_format, format A, format B, format C, class O = no_observer>
constexpr auto fma(value<A> a, value<B> b, value<C> c, const environment& env = {}, O&& obs = {}) {
  constexpr format Rf = detail::pick_result_format<R, A, B, C>();
  flags raised;
  report(obs, operation_event{operation::fma, Rf, env});
  const unpacked ua = detail::read_operand(0, a, env, obs);
  const unpacked ub = detail::read_operand(1, b, env, obs);
  const unpacked uc = detail::read_operand(2, c, env, obs);
  const bool product_sign = ua.sign != ub.sign;
  const bool product_invalid = (ua.kind == value_class::infinity && ub.kind == value_class::zero) ||
                               (ua.kind == value_class::zero && ub.kind == value_class::infinity);
  const bool nan_operand = is_nan(ua.kind) || is_nan(ub.kind) || is_nan(uc.kind);
  if (nan_operand && (fma_nan_operand_before_invalid_product || !product_invalid)) {
    report(obs, special_event{special_reason::nan_operand});
    return detail::finish(propagate_nan<Rf>(env, raised, a, b, c), raised, obs);
  }
  const bool product_infinite = ua.kind == value_class::infinity || ub.kind == value_class::infinity;
  if (product_invalid || (product_infinite && uc.kind == value_class::infinity && uc.sign != product_sign)) {
    report(obs, special_event{special_reason::invalid_operation});
    return detail::finish(invalid_result<Rf>(env, raised), raised, obs);
  }
  if (product_infinite || uc.kind == value_class::infinity) {
    report(obs, special_event{special_reason::infinity_operand});
    const bool sign = product_infinite ? product_sign : uc.sign;
    return detail::finish(infinite_operand_result<Rf>(sign, env, raised), raised, obs);
  }
  const bool product_zero = ua.kind == value_class::zero || ub.kind == value_class::zero;
  if (product_zero && uc.kind == value_class::zero) {
    report(obs, special_event{special_reason::zero_result});
    return detail::finish(value<Rf>::zero(detail::zero_sum_sign(product_sign, uc.sign, env)), raised, obs);
  }
  if (product_zero) return detail::finish(detail::round_unpacked<Rf>(uc, env, raised, obs), raised, obs);
  const auto product = detail::multiply_exactly(ua, ub);
  if (uc.kind == value_class::zero) {
    report(obs, exact_event{product.sign, product.significand, product.exponent, false, false});
    return detail::finish(
        round_pack<Rf>(product.sign, product.exponent, product.significand, false, env, raised, obs), raised, obs);
  }
  const auto sum = detail::sum_exactly<uint128>(product.sign, product.significand, product.exponent, uc.sign,
                                                uc.significand, uc.exponent);
  report(obs, sum.alignment);
  report(obs, exact_event{sum.sign, sum.significand, sum.exponent, false, product.sign != uc.sign});
  if (sum.significand) report(obs, normalization_event{sum.leading_bit_shift});
  if (sum.significand == 0) {
    report(obs, special_event{special_reason::zero_result});
    return detail::finish(value<Rf>::zero(detail::zero_sum_sign(product_sign, uc.sign, env)), raised, obs);
  }
  return detail::finish(detail::round_wide<Rf>(sum.sign, sum.exponent, sum.significand, false, env, raised, obs),
                        raised, obs);
}

template <format R = same_format, format A, format B, class O = no_observer>
constexpr auto div(value<A> a, value<B> b, const environment& env = {}, O&& obs = {}) {
  constexpr format Rf = detail::pick_result_format<R, A, B>();
  flags raised;
  report(obs, operation_event{operation::div, Rf, env});
  const unpacked ua = detail::read_operand(0, a, env, obs);
  const unpacked ub = detail::read_operand(1, b, env, obs);
  const bool sign = ua.sign != ub.sign;
  if (is_nan(ua.kind) || is_nan(ub.kind)) {
    report(obs, special_event{special_reason::nan_operand});
    return detail::finish(propagate_nan<Rf>(env, raised, a, b), raised, obs);
  }
  const bool a_inf = ua.kind == value_class::infinity, b_inf = ub.kind == value_class::infinity;
  const bool a_zero = ua.kind == value_class::zero, b_zero = ub.kind == value_class::zero;
  if ((a_inf && b_inf) || (a_zero && b_zero)) {
    report(obs, special_event{special_reason::invalid_operation});
    return detail::finish(invalid_result<Rf>(env, raised), raised, obs);
  }
  if (a_inf) {  // an exact infinity, even over zero: no divide-by-zero flag
    report(obs, special_event{special_reason::infinity_operand});
    return detail::finish(infinite_operand_result<Rf>(sign, env, raised), raised, obs);
  }
  if (b_zero) {
    raised.bits |= flags::divide_by_zero;
    report(obs, special_event{special_reason::division_by_zero});
    return detail::finish(infinity_result<Rf>(sign, env), raised, obs);
  }
  if (a_zero || b_inf) {
    report(obs, special_event{special_reason::zero_result});
    return detail::finish(value<Rf>::zero(sign), raised, obs);
  }
  // At least 104 quotient bits: stochastic rounding reads 32 bits below the
  // last kept one exactly, and the remainder only decides what lies beyond.
  const int dividend_shift = 127 - msb_index(std::uint64_t{ua.significand});
  const uint128 dividend = uint128{ua.significand} << dividend_shift;
  const uint128 quotient = dividend / ub.significand;
  const bool remainder = dividend % ub.significand != 0;
  const int exponent = ua.exponent - dividend_shift - ub.exponent;
  report(obs, exact_event{sign, quotient, exponent, remainder, false});
  return detail::finish(detail::round_wide<Rf>(sign, exponent, quotient, remainder, env, raised, obs), raised, obs);
}

template <format R = same_format, format A, class O = no_observer>
constexpr auto sqrt(value<A> a, const environment& env = {}, O&& obs = {}) {
  constexpr format Rf = detail::pick_result_format<R, A>();
  flags raised;
  report(obs, operation_event{operation::sqrt, Rf, env});
  const unpacked ua = detail::read_operand(0, a, env, obs);
  if (is_nan(ua.kind)) {
    report(obs, special_event{special_reason::nan_operand});
    return detail::finish(propagate_nan<Rf>(env, raised, a), raised, obs);
  }
  if (ua.kind == value_class::zero) {
    report(obs, special_event{special_reason::zero_result});
    return detail::finish(value<Rf>::zero(ua.sign), raised, obs);
  }
  if (ua.sign) {
    report(obs, special_event{special_reason::invalid_operation});
    return detail::finish(invalid_result<Rf>(env, raised), raised, obs);
  }
  if (ua.kind == value_class::infinity) {
    report(obs, special_event{special_reason::infinity_operand});
    return detail::finish(infinite_operand_result<Rf>(false, env, raised), raised, obs);
  }
  // Make the exponent even and the radicand about 126 bits, so the integer
  // root has at least 62 bits (stochastic rounding reads 32 below the last
  // kept one) and the remainder only decides the sticky bit.
  uint128 radicand = ua.significand;
  int exponent = ua.exponent;
  if (exponent & 1) {
    radicand <<= 1;
    --exponent;
  }
  const int pair_shift = (126 - msb_index(radicand)) & ~1;
  radicand <<= pair_shift;
  exponent -= pair_shift;
  const uint128 root = detail::integer_sqrt(radicand);
  const bool remainder = root * root != radicand;
  report(obs, exact_event{false, root, exponent / 2, remainder, false});
  return detail::finish(detail::round_wide<Rf>(false, exponent / 2, root, remainder, env, raised, obs), raised, obs);
}

namespace detail {

template <format R, format A, class O>
constexpr rounded<R> convert_general(value<A> a, const environment& env, O& obs) {
  flags raised;
  report(obs, operation_event{operation::convert, R, env});
  const unpacked ua = detail::read_operand(0, a, env, obs);
  if (is_nan(ua.kind)) {
    report(obs, special_event{special_reason::nan_operand});
    return detail::finish(propagate_nan<R>(env, raised, a), raised, obs);
  }
  if (ua.kind == value_class::infinity) {
    report(obs, special_event{special_reason::infinity_operand});
    return detail::finish(infinite_operand_result<R>(ua.sign, env, raised), raised, obs);
  }
  if (ua.kind == value_class::zero) {
    report(obs, special_event{special_reason::zero_result});
    return detail::finish(value<R>::zero(ua.sign), raised, obs);
  }
  return detail::finish(detail::round_unpacked<R>(ua, env, raised, obs), raised, obs);
}

template <format R, format A>
[[gnu::noinline]] constexpr rounded<R> convert_untraced(value<A> a, const environment& env) {
  no_observer none;
  return convert_general<R>(a, env, none);
}

}  // namespace detail

// Conversion between any two formats: exact when R holds A's values, else one
// rounding. Untraced, a normal operand is read as the exact double it is.
template <format R, format A, class O = no_observer>
constexpr rounded<R> convert(value<A> a, const environment& env = {}, O&& obs = {}) {
  if (!is_listening(obs) && is_normal_pattern<A>(a.bits)) [[likely]]
    return detail::round_exact_double<R>(detail::exact_double<A>(a.bits), env,
                                         [&] { return detail::convert_untraced<R>(a, env); });
  return detail::convert_general<R>(a, env, obs);
}

template <format R, class O = no_observer>
constexpr rounded<R> from_integer(std::int64_t x, const environment& env = {}, O&& obs = {}) {
  flags raised;
  report(obs, operation_event{operation::from_integer, R, env});
  if (x == 0) return detail::finish(value<R>::zero(false), raised, obs);
  const bool sign = x < 0;
  const std::uint64_t magnitude = sign ? ~static_cast<std::uint64_t>(x) + 1 : static_cast<std::uint64_t>(x);
  report(obs, exact_event{sign, magnitude, 0, false, false});
  return detail::finish(round_pack<R>(sign, 0, magnitude, false, env, raised, obs), raised, obs);
}

// The integer that a rounds to under env's mode; NaN and out-of-range values
// raise invalid and give invalid_integer_result (platform.hpp).
template <format A>
constexpr std::pair<std::int64_t, flags> to_integer(value<A> a, const environment& env = {}) {
  flags raised;
  const unpacked ua = unpack(a, env);
  constexpr std::int64_t indefinite = invalid_integer_result;
  if (is_nan(ua.kind) || ua.kind == value_class::infinity) return {indefinite, flags{flags::invalid}};
  if (ua.kind == value_class::zero) return {0, raised};
  std::uint64_t magnitude;
  if (ua.exponent >= 0) {
    if (ua.exponent + msb_index(std::uint64_t{ua.significand}) > 62) {
      const bool exactly_min = ua.sign && ua.exponent + msb_index(std::uint64_t{ua.significand}) == 63 &&
                               (ua.significand & (ua.significand - 1)) == 0;
      return {indefinite, exactly_min ? raised : flags{flags::invalid}};
    }
    magnitude = std::uint64_t{ua.significand} << ua.exponent;
  } else {
    const auto [kept, dropped] = split_at(ua.significand, -ua.exponent, false);
    const auto decision = decide_rounding(env.rounding, ua.sign, kept & 1, dropped, env.random_bits);
    magnitude = kept + decision.increment;
    if (dropped.any()) raised.bits |= flags::inexact;
  }
  return {ua.sign ? -static_cast<std::int64_t>(magnitude) : static_cast<std::int64_t>(magnitude), raised};
}

// Host doubles (and so floats) in and out. Doubles are decoded by bits, so
// this is exact and needs no host floating-point arithmetic.
template <format R>
constexpr rounded<R> from_double(double x, const environment& env = {}) {
  using namespace detail;
  const auto bits = bit_cast<std::uint64_t>(x);
  const bool sign = bits >> 63;
  const auto biased = static_cast<int>((bits >> double_fraction_bits) & double_max_biased_exponent);
  const std::uint64_t fraction = bits & (double_hidden_bit - 1);
  flags raised;
  if (biased == double_max_biased_exponent) {
    if (fraction == 0) return {infinite_operand_result<R>(sign, env, raised), raised};
    const common_nan nan{sign, fraction << (64 - double_fraction_bits)};
    if (!(nan.payload >> 63)) raised.bits |= flags::invalid;  // signaling NaN
    return {nan_operand_result<R>(env, nan), raised};
  }
  if (biased == 0 && (fraction == 0 || env.denormals_are_zero)) return {value<R>::zero(sign), raised};
  const value<R> result = detail::round_double<R>(x, env, raised);
  return {result, raised};
}

template <format A>
constexpr double to_double(value<A> a) {
  using namespace detail;
  const unpacked u = unpack(a);
  const std::uint64_t sign = std::uint64_t{u.sign} << 63;
  constexpr std::uint64_t infinity_bits = std::uint64_t{double_max_biased_exponent} << double_fraction_bits;
  switch (u.kind) {
    case value_class::zero: return bit_cast<double>(sign);
    case value_class::infinity: return bit_cast<double>(sign | infinity_bits);
    case value_class::quiet_nan:
    case value_class::signaling_nan: {
      // The payload as it stands, signaling or not: this shows a value, it
      // does not compute with it. E4M3FN's one NaN reads as quiet.
      const std::uint64_t payload = to_common_nan(a).payload >> (64 - double_fraction_bits);
      constexpr std::uint64_t quiet_bit = double_hidden_bit >> 1;
      return bit_cast<double>(sign | infinity_bits | payload | (A.has_infinity() ? 0 : quiet_bit));
    }
    default: break;
  }
  // Every format here has fewer exponent bits than double: the value is normal there.
  const int lead = msb_index(std::uint64_t{u.significand});
  const std::uint64_t fraction =
      (std::uint64_t{u.significand} << (double_fraction_bits - lead)) & (double_hidden_bit - 1);
  const auto biased = static_cast<std::uint64_t>(u.exponent + lead + double_bias);
  return bit_cast<double>(sign | (biased << double_fraction_bits) | fraction);
}

// Comparison of values of any formats. Unordered when either is NaN.
template <format A, format B>
constexpr std::partial_ordering compare(value<A> a, value<B> b, const environment& env = {}) {
  const unpacked ua = unpack(a, env), ub = unpack(b, env);
  if (is_nan(ua.kind) || is_nan(ub.kind)) return std::partial_ordering::unordered;
  const auto magnitude_rank = [](const unpacked& u) -> std::pair<int, std::uint64_t> {
    if (u.kind == value_class::zero) return {std::numeric_limits<int>::min(), 0};
    if (u.kind == value_class::infinity) return {std::numeric_limits<int>::max(), 0};
    const int lead = msb_index(std::uint64_t{u.significand});
    return {u.exponent + lead, std::uint64_t{u.significand} << (40 - lead)};
  };
  const auto ra = magnitude_rank(ua), rb = magnitude_rank(ub);
  if (ua.kind == value_class::zero && ub.kind == value_class::zero) return std::partial_ordering::equivalent;
  if (ua.sign != ub.sign) return ua.sign ? std::partial_ordering::less : std::partial_ordering::greater;
  // Field by field: the libc++ of Debian 12's emscripten (web/) has no <=> for std::pair.
  const auto by_magnitude = ra.first != rb.first ? ra.first <=> rb.first : ra.second <=> rb.second;
  return ua.sign ? (0 <=> by_magnitude) : std::partial_ordering(by_magnitude);
}

// IEEE comparison predicates. The quiet ones raise invalid only for a
// signaling NaN operand, the signaling ones for any NaN.
template <format A, format B>
constexpr bool equal(value<A> a, value<B> b, flags& raised, const environment& env = {}, bool signaling = false) {
  if ((signaling && (a.is_nan() || b.is_nan())) || a.is_signaling_nan() || b.is_signaling_nan())
    raised.bits |= flags::invalid;
  return compare(a, b, env) == std::partial_ordering::equivalent;
}
template <format A, format B>
constexpr bool less(value<A> a, value<B> b, flags& raised, const environment& env = {}, bool signaling = true) {
  if ((signaling && (a.is_nan() || b.is_nan())) || a.is_signaling_nan() || b.is_signaling_nan())
    raised.bits |= flags::invalid;
  return compare(a, b, env) == std::partial_ordering::less;
}
template <format A, format B>
constexpr bool less_equal(value<A> a, value<B> b, flags& raised, const environment& env = {}, bool signaling = true) {
  if ((signaling && (a.is_nan() || b.is_nan())) || a.is_signaling_nan() || b.is_signaling_nan())
    raised.bits |= flags::invalid;
  const auto order = compare(a, b, env);
  return order == std::partial_ordering::less || order == std::partial_ordering::equivalent;
}

}  // namespace bitexact
