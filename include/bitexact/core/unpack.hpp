// Decoding a packed value into sign, class, exponent and integer significand.
#pragma once

#include <cstdint>

#include "bits.hpp"
#include "environment.hpp"
#include "format.hpp"

namespace bitexact {

enum class value_class : std::uint8_t { zero, subnormal, normal, infinity, quiet_nan, signaling_nan };

constexpr bool is_nan(value_class c) { return c == value_class::quiet_nan || c == value_class::signaling_nan; }
constexpr bool is_finite_nonzero(value_class c) { return c == value_class::subnormal || c == value_class::normal; }

// A finite value is (-1)^sign * significand * 2^exponent: the exponent is that
// of the significand's last bit, so subnormals need no normalisation here.
struct unpacked {
  value_class kind = value_class::zero;
  bool sign = false;
  int exponent = 0;
  std::uint32_t significand = 0;  // hidden bit included for normals
  bool flushed = false;           // a subnormal read as zero (denormals-are-zero)
};

constexpr std::uint32_t bit_mask(int count) { return count >= 32 ? 0xFFFFFFFFu : (1u << count) - 1; }

// The two rules by which every decoder here reads a finite pattern (decode,
// and the tensor-core fast path's vectorised one): the hidden bit is set
// exactly when the exponent field is nonzero, and a subnormal (field 0) has
// the smallest normal's exponent. The exponent is that of the leading bit
// position of a normal significand.
BITEXACT_INLINE constexpr std::uint32_t significand_of_field(format f, std::uint32_t biased, std::uint32_t fraction) {
  return fraction | (std::uint32_t{biased != 0} << f.fraction_bits);
}
BITEXACT_INLINE constexpr int leading_exponent_of_field(format f, std::uint32_t biased) {
  return static_cast<int>(biased | std::uint32_t{biased == 0}) - f.bias();
}

// Decode a bit pattern of a format known only at run time (traces, the
// command line); with a constant format it folds into unpack<F>.
BITEXACT_INLINE constexpr unpacked decode(format f, std::uint32_t bits, bool denormals_are_zero = false) {
  unpacked u;
  u.sign = (bits >> (f.width() - 1)) & 1;
  const std::uint32_t biased = (bits >> f.fraction_bits) & bit_mask(f.exponent_bits);
  const std::uint32_t fraction = bits & bit_mask(f.fraction_bits);
  const bool top_exponent = biased == static_cast<std::uint32_t>(f.max_biased_exponent());
  const bool nan = top_exponent && (f.has_infinity() ? fraction != 0 : fraction == bit_mask(f.fraction_bits));
  // Normal values first: the common case is settled by one test of the exponent field.
  if (biased != 0 && !nan && !(top_exponent && f.has_infinity())) [[likely]] {
    u.kind = value_class::normal;
    u.significand = significand_of_field(f, biased, fraction);
    u.exponent = leading_exponent_of_field(f, biased) - f.fraction_bits;
  } else if (nan) {
    // A quiet NaN has the top fraction bit set; E4M3FN's one NaN counts as quiet.
    const bool quiet = !f.has_infinity() || ((fraction >> (f.fraction_bits - 1)) & 1);
    u.kind = quiet ? value_class::quiet_nan : value_class::signaling_nan;
    u.significand = fraction;
  } else if (top_exponent) {
    u.kind = value_class::infinity;
  } else {  // biased == 0
    u.kind = fraction == 0 ? value_class::zero : value_class::subnormal;
    if (u.kind == value_class::subnormal && denormals_are_zero) {
      u.kind = value_class::zero;
      u.flushed = true;
    } else {
      u.significand = significand_of_field(f, biased, fraction);
      u.exponent = leading_exponent_of_field(f, biased) - f.fraction_bits;
    }
  }
  return u;
}

// Whether a bit pattern of F is a normal number, in one or two integer tests:
// the fast paths of add and mul take only these, so unpack's cases are skipped.
template <format F>
BITEXACT_INLINE constexpr bool is_normal_pattern(std::uint32_t bits) {
  if constexpr (F.has_infinity()) {
    // 1 .. max_biased - 1: with the exponent field moved to the top of the
    // word (the sign shifted out), adding one to it wraps the all-ones field
    // to zero, and both ends then read below two (GCC: one lea, one compare).
    constexpr int field_shift = 32 - F.exponent_bits;
    const std::uint32_t field_plus_one = (bits << (33 - F.width())) + (1u << field_shift);
    return field_plus_one >= (2u << field_shift);
  } else {
    constexpr std::uint32_t max_biased = static_cast<std::uint32_t>(F.max_biased_exponent());
    const std::uint32_t biased = (bits >> F.fraction_bits) & max_biased;
    constexpr std::uint32_t magnitude_mask = (1u << (F.width() - 1)) - 1;
    return (biased != 0) & ((bits & magnitude_mask) != magnitude_mask);  // E4M3FN: all ones is NaN
  }
}

template <format F>
BITEXACT_INLINE constexpr unpacked unpack(value<F> x, const environment& env = {}) {
  return decode(F, x.bits, env.denormals_are_zero);
}

}  // namespace bitexact
