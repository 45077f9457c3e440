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

inline constexpr int double_fraction_bits = 52, double_bias = 1023;

// A normal value of F as a double, exactly, by way of its fp32 bit pattern
// (every format here has at most fp32's exponent range and precision).
template <format F>
BITEXACT_INLINE constexpr double exact_double(std::uint32_t bits) {
  static_assert(F.exponent_bits <= 8 && F.fraction_bits <= 23);
  std::uint32_t fp32_bits;
  if constexpr (F.exponent_bits == 8) {
    fp32_bits = bits << (23 - F.fraction_bits);  // fp32's layout with fewer fraction bits
  } else {
    constexpr int sign_shift = F.width() - 1;
    const std::uint32_t magnitude = bits & ((1u << sign_shift) - 1);
    fp32_bits = ((bits >> sign_shift) << 31) |
                ((magnitude << (23 - F.fraction_bits)) + (static_cast<std::uint32_t>(127 - F.bias()) << 23));
  }
  return static_cast<double>(std::bit_cast<float>(fp32_bits));
}

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
  const auto bits = std::bit_cast<std::uint64_t>(exact);
  if (pattern::fits(bits << 1)) [[likely]]
    return pattern::template round<run_time_rounding>(bits >> 63, bits << 1, env, raised);
  const int biased = static_cast<int>((bits >> double_fraction_bits) & 0x7FF);
  constexpr std::uint64_t hidden = std::uint64_t{1} << double_fraction_bits;
  const std::uint64_t fraction = bits & (hidden - 1);
  return round_pack<R>(bits >> 63, (biased ? biased : 1) - double_bias - double_fraction_bits,
                       biased ? fraction | hidden : fraction, false, env, raised);
}

}  // namespace bitexact::detail
