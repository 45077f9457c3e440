// Reference rounding for the analysis programs: an exact value is computed in
// double with round-to-odd (round toward zero, then OR the inexact flag into
// the last bit), which rounds correctly to any format of at most 51 bits in
// every rounding mode; round_to_format then rounds it to the target format.
// Independent of include/bitexact on purpose: the analyses test hypotheses
// about the GPU against plain IEEE arithmetic, not against the models.
#pragma once

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace reference {

// A binary floating-point layout: sign, exponent_bits, fraction_bits.
struct float_format {
  int exponent_bits, fraction_bits, bias;
  int min_exponent() const { return 1 - bias; }
  std::uint32_t max_exponent_field() const { return (1u << exponent_bits) - 1; }
  std::uint32_t infinity_bits() const { return max_exponent_field() << fraction_bits; }
  std::uint32_t sign_bit() const { return 1u << (exponent_bits + fraction_bits); }
};
inline constexpr float_format bf16_format{8, 7, 127}, fp16_format{5, 10, 15}, fp32_format{8, 23, 127};

// In the order of PTX's .rn, .rz, .rm, .rp (the capture's arrays are in this order).
enum class rounding { nearest_even, toward_zero, downward, upward };

inline std::uint64_t bits_of(double x) {
  std::uint64_t bits;
  std::memcpy(&bits, &x, 8);
  return bits;
}
inline double double_of(std::uint64_t bits) {
  double x;
  std::memcpy(&x, &bits, 8);
  return x;
}
inline float float_of(std::uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}
inline std::uint32_t bits_of(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return bits;
}

// Rounds a finite, nonzero double (already round-to-odd) to format f.
// overflow_to_max: satfinite behaviour.
inline std::uint32_t round_to_format(double exact, const float_format& f, rounding mode, bool overflow_to_max = false) {
  const std::uint64_t bits = bits_of(exact);
  const bool negative = bits >> 63;
  const std::uint32_t sign = negative ? f.sign_bit() : 0;
  const int field = static_cast<int>((bits >> 52) & 0x7FF);
  const std::uint64_t significand = (bits & ((1ull << 52) - 1)) | (field ? 1ull << 52 : 0);
  const int lsb_exponent = (field ? field : 1) - 1075;
  if (significand == 0) return sign;
  const int leading_exponent = 63 - __builtin_clzll(significand) + lsb_exponent;
  const int quantum = (leading_exponent < f.min_exponent() ? f.min_exponent() : leading_exponent) - f.fraction_bits;
  const int shift = quantum - lsb_exponent;
  std::uint64_t kept = 0, discarded = 0, half = 0;
  if (shift <= 0) {
    kept = significand << -shift;
  } else if (shift >= 64) {
    discarded = significand;
    half = ~0ull;  // the discarded bits are below half
    kept = 0;
  } else {
    kept = significand >> shift;
    discarded = significand & ((1ull << shift) - 1);
    half = 1ull << (shift - 1);
  }
  bool round_up = false;
  if (discarded) {
    switch (mode) {
      case rounding::nearest_even:
        round_up = discarded > half || (discarded == half && (kept & 1));
        break;
      case rounding::toward_zero:
        round_up = false;
        break;
      case rounding::downward:
        round_up = negative;
        break;
      case rounding::upward:
        round_up = !negative;
        break;
    }
  }
  if (round_up) ++kept;
  std::uint64_t magnitude = leading_exponent < f.min_exponent()
                                ? kept
                                : (static_cast<std::uint64_t>(leading_exponent + f.bias - 1) << f.fraction_bits) + kept;
  if (magnitude >= f.infinity_bits()) {
    const bool to_infinity = mode == rounding::nearest_even || (mode == rounding::downward && negative) ||
                             (mode == rounding::upward && !negative);
    magnitude = (to_infinity && !overflow_to_max) ? f.infinity_bits() : f.infinity_bits() - 1;
  }
  return sign | static_cast<std::uint32_t>(magnitude);
}

inline int fenv_rounding(rounding mode) {
  switch (mode) {
    case rounding::nearest_even:
      return FE_TONEAREST;
    case rounding::toward_zero:
      return FE_TOWARDZERO;
    case rounding::downward:
      return FE_DOWNWARD;
    default:
      return FE_UPWARD;
  }
}

enum class operation { add, mul, fma };

// The exact result of an operation, rounded to odd in double, and the same
// operation rounded in mode (whose sign is the IEEE sign of an exact zero).
struct exact_result {
  double round_to_odd;
  double in_mode;
};

inline exact_result exact_in_double(operation op, double a, double b, double c, rounding mode) {
  // volatile: the host must compute under the rounding mode set here, not fold at compile time.
  volatile double va = a, vb = b, vc = c;
  const auto compute = [&] {
    return op == operation::add ? va + vb : op == operation::mul ? va * vb : std::fma(va, vb, vc);
  };
  exact_result result;
  std::fesetround(FE_TOWARDZERO);
  std::feclearexcept(FE_INEXACT);
  double truncated = compute();
  if (std::fetestexcept(FE_INEXACT)) truncated = double_of(bits_of(truncated) | 1);
  result.round_to_odd = truncated;
  std::fesetround(fenv_rounding(mode));
  result.in_mode = compute();
  std::fesetround(FE_TONEAREST);
  return result;
}

}  // namespace reference
