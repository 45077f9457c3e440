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

template <format F>
BITEXACT_INLINE constexpr unpacked unpack(value<F> x, const environment& env = {}) {
  unpacked u;
  u.sign = x.sign();
  const auto biased = static_cast<int>(x.biased_exponent());
  const std::uint32_t fraction = x.fraction();
  // Normal values first: the common case is settled by one test of the exponent field.
  const bool normal =
      F.has_infinity() ? biased != 0 && biased != F.max_biased_exponent() : biased != 0 && !x.is_nan();
  if (normal) [[likely]] {
    u.kind = value_class::normal;
    u.significand = fraction | (1u << F.fraction_bits);
    u.exponent = biased - F.bias() - F.fraction_bits;
  } else if (x.is_nan()) {
    u.kind = x.is_signaling_nan() ? value_class::signaling_nan : value_class::quiet_nan;
    u.significand = fraction;
  } else if (x.is_inf()) {
    u.kind = value_class::infinity;
  } else {  // biased == 0
    u.kind = fraction == 0 ? value_class::zero : value_class::subnormal;
    if (u.kind == value_class::subnormal && env.denormals_are_zero) {
      u.kind = value_class::zero;
      u.flushed = true;
    } else {
      u.significand = fraction;
      u.exponent = F.min_exponent() - F.fraction_bits;
    }
  }
  return u;
}

}  // namespace bitexact
