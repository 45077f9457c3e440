// Exact results from the host's double arithmetic, and their rounding. The
// fast paths of add and mul let the host add or multiply two normal operands
// only where the result is exact in a double: an exact result does not
// depend on the host's rounding mode, flush-to-zero or any other setting, and
// an exact operation raises no host flag. The host never rounds here; the bit
// pattern of its exact result is handed to round_extended, the one rounding
// step, like any other exact value.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

#include "bits.hpp"
#include "environment.hpp"
#include "format.hpp"
#include "round.hpp"

namespace bitexact::detail {

static_assert(std::numeric_limits<double>::is_iec559, "the fast paths need IEEE binary64 doubles");

// binary64's layout, for reading and writing a double's bits.
inline constexpr int double_fraction_bits = 52, double_bias = 1023, double_max_biased_exponent = 0x7FF;
inline constexpr std::uint64_t double_hidden_bit = std::uint64_t{1} << double_fraction_bits;

// A normal pattern of F rewritten as the fp32 pattern of the same value
// (every format here has at most fp32's exponent range and precision); with
// fp32's 8-bit exponent field it is a shift. Word is std::uint32_t, or a
// vector of them (the lanes of host/elementwise.hpp).
template <format F, class Word>
BITEXACT_INLINE constexpr Word fp32_pattern(Word bits) {
  static_assert(F.exponent_bits <= 8 && F.fraction_bits <= 23);
  constexpr int fraction_shift = 23 - F.fraction_bits;
  if constexpr (F.exponent_bits == 8) {
    return bits << fraction_shift;
  } else {
    constexpr int sign_shift = F.width() - 1;
    const Word magnitude = bits & ((1u << sign_shift) - 1);
    return ((bits >> sign_shift) << 31) |
           ((magnitude << fraction_shift) + (static_cast<std::uint32_t>(127 - F.bias()) << 23));
  }
}

// A normal value of F as a double, exactly, by way of its fp32 pattern.
template <format F>
BITEXACT_INLINE constexpr double exact_double(std::uint32_t bits) {
  return static_cast<double>(bit_cast<float>(fp32_pattern<F>(bits)));
}

// Two normal values of F add exactly in a double when their exponents are at
// most far_apart binades apart: the exact sum then spans at most 53 bits.
// The fast paths test this on the exponent fields alone: a's exponent inside
// [lowest_exponent, highest_exponent], far_apart binades within F's normal
// range, and b's within far_apart of a's, which makes b normal too.
template <format F>
struct exact_sum_window {
  static constexpr int far_apart = double_fraction_bits - F.fraction_bits;
  static constexpr int lowest_exponent = F.min_exponent() + far_apart;
  static constexpr int highest_exponent = F.max_exponent() - far_apart;
};

// A double's bit pattern shifted left by one (the sign drops out) is an
// extended pattern of R (see round_extended) with 53 - R.fraction_bits extra
// bits once R's exponent bias replaces binary64's, whenever the value is at
// least R's smallest normal. A value too large for R makes a pattern whose
// exponent field is past R's largest (it still fits the word: 11 + 53 bits),
// and round_extended sends that to overflow.
template <format R>
struct double_as_extended {
  static constexpr int extra_bits = double_fraction_bits + 1 - R.fraction_bits;
  static constexpr std::uint64_t unit = std::uint64_t{1} << (double_fraction_bits + 1);  // one in the exponent field
  static constexpr std::uint64_t rebias = static_cast<std::uint64_t>(double_bias - R.bias()) * unit;

  // Whether a double's bits shifted left by one are a normal of R, or too large for it.
  BITEXACT_INLINE static constexpr bool fits(std::uint64_t doubled) { return doubled >= rebias + unit; }
  // Untraced: the fast paths and from_double have no observer.
  template <int FixedMode>
  BITEXACT_INLINE static constexpr value<R> round(bool sign, std::uint64_t doubled, const environment& env,
                                                  flags& raised) {
    return round_extended<R, extra_bits, FixedMode>(sign, doubled - rebias, false, {}, env, raised);
  }
};

// Round a finite nonzero double into R (from_double).
template <format R>
constexpr value<R> round_double(double exact, const environment& env, flags& raised) {
  using pattern = double_as_extended<R>;
  const auto bits = bit_cast<std::uint64_t>(exact);
  if (pattern::fits(bits << 1)) [[likely]]
    return pattern::template round<run_time_rounding>(bits >> 63, bits << 1, env, raised);
  const auto biased = static_cast<int>((bits >> double_fraction_bits) & double_max_biased_exponent);
  const std::uint64_t fraction = bits & (double_hidden_bit - 1);
  return round_pack<R>(bits >> 63, (biased ? biased : 1) - double_bias - double_fraction_bits,
                       biased ? fraction | double_hidden_bit : fraction, false, env, raised);
}

}  // namespace bitexact::detail
