// The exact oracle: every operation computed as a rational number and rounded
// by plain search and comparison. It shares no code with round.hpp or
// operations.hpp on purpose: it reads only the public bit layout (value<F>'s
// accessors), so a bug in the core cannot hide in code the oracle also runs.
// It is slow (Boost rationals) and meant to be obviously right, not fast.
#pragma once

#include <boost/multiprecision/cpp_int.hpp>

#include <bitexact/core/environment.hpp>
#include <bitexact/core/format.hpp>

#include <cstdint>
#include <optional>

namespace oracle {

using bitexact::environment;
using bitexact::format;
using bitexact::rounding_mode;
using bitexact::tininess;
using bitexact::nan_policy;
using bitexact::value;
using big = boost::multiprecision::cpp_int;
using rational = boost::multiprecision::cpp_rational;

// Flag bits, spelled out again rather than taken from the core.
enum : std::uint8_t { inexact = 1, underflow = 2, overflow = 4, divide_by_zero = 8, invalid = 16 };

struct result {
  std::uint32_t bits = 0;
  std::uint8_t flags = 0;
  friend bool operator==(const result&, const result&) = default;
};

// ---------------------------------------------------------------- decoding

enum class kind { number, infinity, nan };

struct decoded {
  kind what = kind::number;
  bool sign = false;
  bool signaling = false;
  rational magnitude;        // zero for zeros; unused for Inf/NaN
  std::uint32_t payload = 0; // NaN fraction field
  int payload_bits = 0;      // width of the fraction field it came from
  bool e4m3_nan = false;     // the source format had no quiet bit (E4M3FN)
};

inline rational power_of_two(int exponent) {
  big one = 1;
  if (exponent >= 0) return rational(big(one << exponent));
  return rational(big(1), big(one << -exponent));
}

template <format F>
decoded decode(value<F> x, const environment& env) {
  decoded d;
  d.sign = x.sign();
  if (x.is_nan()) {
    d.what = kind::nan;
    d.signaling = x.is_signaling_nan();
    d.payload = x.fraction();
    d.payload_bits = F.fraction_bits;
    d.e4m3_nan = !F.has_infinity();
    return d;
  }
  if (x.is_inf()) {
    d.what = kind::infinity;
    return d;
  }
  const int bias = (1 << (F.exponent_bits - 1)) - 1;
  const int biased = static_cast<int>(x.biased_exponent());
  if (biased == 0) {
    if (env.denormals_are_zero) return d;  // read as a signed zero, no flag
    d.magnitude = rational(big(x.fraction())) * power_of_two(1 - bias - F.fraction_bits);
  } else {
    const std::uint32_t significand = x.fraction() + (1u << F.fraction_bits);
    d.magnitude = rational(big(significand)) * power_of_two(biased - bias - F.fraction_bits);
  }
  return d;
}

// ---------------------------------------------------------------- encoding

template <format R>
struct layout {
  static constexpr int width = 1 + R.exponent_bits + R.fraction_bits;
  static constexpr int bias = (1 << (R.exponent_bits - 1)) - 1;
  static constexpr int all_ones = (1 << R.exponent_bits) - 1;
  static constexpr bool ieee = R.has_infinity();
  static constexpr int emin = 1 - bias;
  static constexpr int emax = ieee ? all_ones - 1 - bias : all_ones - bias;
  static constexpr std::uint32_t sign_bit(bool s) { return std::uint32_t{s} << (width - 1); }
  static constexpr std::uint32_t infinity(bool s) { return sign_bit(s) | (std::uint32_t(all_ones) << R.fraction_bits); }
  // Largest finite magnitude, as significand * 2^(emax - fraction_bits).
  static constexpr std::uint32_t max_significand() {
    return ieee ? (2u << R.fraction_bits) - 1 : (2u << R.fraction_bits) - 2;
  }
  static constexpr std::uint32_t max_finite(bool s) {
    return sign_bit(s) | (std::uint32_t(emax + bias) << R.fraction_bits) |
           (max_significand() - (1u << R.fraction_bits));
  }
  static constexpr std::uint32_t nan(bool s) {  // quiet bit only (E4M3FN: its NaN)
    return ieee ? infinity(s) | (1u << (R.fraction_bits - 1)) : sign_bit(s) | ((1u << (width - 1)) - 1);
  }
  static constexpr std::uint32_t canonical() {
    return (std::uint32_t(all_ones) << R.fraction_bits) | ((1u << R.fraction_bits) - 1);
  }
};

// A NaN produced fresh: x86's default NaN, or the canonical one.
template <format R>
result fresh_nan(const environment& env, std::uint8_t flags, bool sign = true) {
  return {env.nans == nan_policy::canonical ? layout<R>::canonical() : layout<R>::nan(sign), flags};
}

// Where an infinity would be the result. E4M3FN has none and gives NaN of that sign.
template <format R>
result infinity_or_nan(bool sign, const environment& env, std::uint8_t flags) {
  if constexpr (layout<R>::ieee) return {layout<R>::infinity(sign), flags};
  else return fresh_nan<R>(env, flags, sign);
}

// The first NaN among the operands, quieted, its payload's top bits kept.
template <format R>
result propagate(const environment& env, std::initializer_list<const decoded*> operands) {
  std::uint8_t flags = 0;
  for (const decoded* d : operands)
    if (d->what == kind::nan && d->signaling) flags |= invalid;
  if (env.nans == nan_policy::canonical) return {layout<R>::canonical(), flags};
  for (const decoded* d : operands) {
    if (d->what != kind::nan) continue;
    if constexpr (!layout<R>::ieee) {
      return {layout<R>::nan(d->sign), flags};
    } else {
      std::uint32_t payload = d->payload;
      if (d->payload_bits > R.fraction_bits) payload >>= d->payload_bits - R.fraction_bits;
      else payload <<= R.fraction_bits - d->payload_bits;
      return {layout<R>::nan(d->sign) | payload, flags};
    }
  }
  return {0, 0xFF};  // unreachable: no NaN operand
}

// ---------------------------------------------------------------- rounding

// floor(log2(x)) for x > 0.
inline int floor_log2(const rational& x) {
  const big num = numerator(x), den = denominator(x);
  int e = static_cast<int>(msb(num)) - static_cast<int>(msb(den));
  const bool below = e >= 0 ? num < big(den << e) : big(num << -e) < den;
  return below ? e - 1 : e;
}

// x / 2^quantum split into its integer part and the discarded fraction,
// which is kept as the exact ratio remainder / denominator.
struct cut {
  big integer, remainder, denominator;
};
inline cut cut_at(const rational& x, int quantum) {
  big num = numerator(x), den = denominator(x);
  if (quantum <= 0) num <<= -quantum;
  else den <<= quantum;
  cut c;
  c.denominator = den;
  divide_qr(num, den, c.integer, c.remainder);
  return c;
}

// Whether the magnitude steps up to the next multiple of the quantum.
inline bool rounds_up(const cut& c, rounding_mode mode, bool sign, std::uint32_t random_bits) {
  if (c.remainder == 0) return false;
  const big twice = c.remainder * 2;
  switch (mode) {
    case rounding_mode::nearest_even:
      return twice > c.denominator || (twice == c.denominator && bit_test(c.integer, 0));
    case rounding_mode::nearest_away: return twice >= c.denominator;
    case rounding_mode::toward_zero: return false;
    case rounding_mode::upward: return !sign;
    case rounding_mode::downward: return sign;
    case rounding_mode::to_odd: return !bit_test(c.integer, 0);
    case rounding_mode::stochastic:
      // Up iff remainder/denominator > random_bits / 2^32.
      return big(c.remainder << 32) > big(c.denominator * random_bits);
  }
  return false;
}

template <format R>
bool overflow_goes_to_infinity(rounding_mode mode, bool sign) {
  switch (mode) {
    case rounding_mode::nearest_even:
    case rounding_mode::nearest_away:
    case rounding_mode::stochastic: return true;
    case rounding_mode::upward: return !sign;
    case rounding_mode::downward: return sign;
    default: return false;
  }
}

// Round (-1)^sign * magnitude (> 0) into R.
template <format R>
result round_to(bool sign, const rational& magnitude, const environment& env) {
  using L = layout<R>;
  const int p = R.fraction_bits + 1;
  const int e = floor_log2(magnitude);
  const bool below_normal = e < L::emin;

  // The two neighbours are integer * 2^quantum and (integer + 1) * 2^quantum.
  const int quantum = (below_normal ? L::emin : e) - R.fraction_bits;
  const cut c = cut_at(magnitude, quantum);
  const bool exact = c.remainder == 0;
  big n = c.integer + (rounds_up(c, env.rounding, sign, env.random_bits) ? 1 : 0);

  // Tininess: before rounding, |x| < 2^emin; after, x rounded with p bits and
  // no lower exponent limit is still below 2^emin.
  bool tiny = below_normal;
  if (below_normal && env.tiny == tininess::after_rounding) {
    const int wide_quantum = e - R.fraction_bits;
    const cut w = cut_at(magnitude, wide_quantum);
    const big wide_n = w.integer + (rounds_up(w, env.rounding, sign, env.random_bits) ? 1 : 0);
    tiny = wide_n < big(big(1) << (L::emin - wide_quantum));
  }

  // Overflow: the rounded value exceeds the largest finite one.
  const rational rounded_value = rational(n) * power_of_two(quantum);
  const rational largest = rational(big(L::max_significand())) * power_of_two(L::emax - R.fraction_bits);
  if (rounded_value > largest) {
    if (overflow_goes_to_infinity<R>(env.rounding, sign))
      return infinity_or_nan<R>(sign, env, overflow | inexact);
    return {L::max_finite(sign), overflow | inexact};
  }
  if (tiny && env.flush_to_zero) return {L::sign_bit(sign), underflow | inexact};

  std::uint8_t flags = exact ? 0 : inexact;
  if (tiny && !exact) flags |= underflow;
  if (n == 0) return {L::sign_bit(sign), flags};

  // Encode n * 2^quantum, normalising n to p bits where the value is normal.
  int q = quantum;
  const int top = static_cast<int>(msb(n));
  if (top + 1 > p) {  // rounding carried into a new binade: n is a power of two
    n >>= (top + 1 - p);
    q += top + 1 - p;
  }
  const int lead = q + static_cast<int>(msb(n));
  std::uint32_t magnitude_bits;
  if (lead < L::emin) {
    magnitude_bits = static_cast<std::uint32_t>(n);  // q is emin - fraction_bits here
  } else {
    const auto significand = static_cast<std::uint32_t>(n);
    magnitude_bits = (std::uint32_t(lead + L::bias) << R.fraction_bits) | (significand - (1u << R.fraction_bits));
  }
  return {L::sign_bit(sign) | magnitude_bits, flags};
}

// An exact zero from terms of signs x and y: their sign if equal, else +0,
// or -0 when rounding downward.
template <format R>
result exact_zero(bool x_sign, bool y_sign, const environment& env) {
  const bool sign = x_sign == y_sign ? x_sign : env.rounding == rounding_mode::downward;
  return {layout<R>::sign_bit(sign), 0};
}

// Round a signed exact value; an exact zero takes its sign from the rule above.
template <format R>
result round_signed(const rational& x, bool zero_sign_x, bool zero_sign_y, const environment& env) {
  if (x == 0) return exact_zero<R>(zero_sign_x, zero_sign_y, env);
  return round_to<R>(x < 0, x < 0 ? rational(-x) : x, env);
}

inline rational signed_value(const decoded& d) { return d.sign ? rational(-d.magnitude) : d.magnitude; }

// ---------------------------------------------------------------- operations

template <format R, format A, format B>
result add(value<A> a, value<B> b, const environment& env, bool subtract = false) {
  const decoded x = decode(a, env);
  decoded y = decode(b, env);
  if (x.what == kind::nan || y.what == kind::nan) return propagate<R>(env, {&x, &y});
  if (subtract) y.sign = !y.sign;
  if (x.what == kind::infinity && y.what == kind::infinity && x.sign != y.sign) return fresh_nan<R>(env, invalid);
  if (x.what == kind::infinity || y.what == kind::infinity) {
    const bool sign = x.what == kind::infinity ? x.sign : y.sign;
    if constexpr (layout<R>::ieee) return {layout<R>::infinity(sign), 0};
    else return fresh_nan<R>(env, invalid, sign);
  }
  return round_signed<R>(signed_value(x) + signed_value(y), x.sign, y.sign, env);
}

template <format R, format A, format B>
result sub(value<A> a, value<B> b, const environment& env) {
  return add<R>(a, b, env, true);
}

template <format R, format A, format B>
result mul(value<A> a, value<B> b, const environment& env) {
  const decoded x = decode(a, env), y = decode(b, env);
  if (x.what == kind::nan || y.what == kind::nan) return propagate<R>(env, {&x, &y});
  const bool sign = x.sign != y.sign;
  const bool x_zero = x.what == kind::number && x.magnitude == 0, y_zero = y.what == kind::number && y.magnitude == 0;
  if (x.what == kind::infinity || y.what == kind::infinity) {
    if (x_zero || y_zero) return fresh_nan<R>(env, invalid);
    if constexpr (layout<R>::ieee) return {layout<R>::infinity(sign), 0};
    else return fresh_nan<R>(env, invalid, sign);
  }
  if (x_zero || y_zero) return {layout<R>::sign_bit(sign), 0};
  return round_to<R>(sign, x.magnitude * y.magnitude, env);
}

template <format R, format A, format B, format C>
result fma(value<A> a, value<B> b, value<C> c, const environment& env) {
  const decoded x = decode(a, env), y = decode(b, env), z = decode(c, env);
  const bool x_zero = x.what == kind::number && x.magnitude == 0, y_zero = y.what == kind::number && y.magnitude == 0;
  const bool zero_times_infinity =
      (x_zero && y.what == kind::infinity) || (y_zero && x.what == kind::infinity);
  if (x.what == kind::nan || y.what == kind::nan || z.what == kind::nan) {
    // With a quiet NaN addend, 0 * inf raises nothing: x86's vfmadd does not.
    return propagate<R>(env, {&x, &y, &z});
  }
  if (zero_times_infinity) return fresh_nan<R>(env, invalid);
  const bool product_sign = x.sign != y.sign;
  const bool product_infinite = x.what == kind::infinity || y.what == kind::infinity;
  if (product_infinite && z.what == kind::infinity && z.sign != product_sign) return fresh_nan<R>(env, invalid);
  if (product_infinite || z.what == kind::infinity) {
    const bool sign = product_infinite ? product_sign : z.sign;
    if constexpr (layout<R>::ieee) return {layout<R>::infinity(sign), 0};
    else return fresh_nan<R>(env, invalid, sign);
  }
  const rational product = x.magnitude * y.magnitude;
  return round_signed<R>((product_sign ? rational(-product) : product) + signed_value(z), product_sign, z.sign, env);
}

template <format R, format A, format B>
result div(value<A> a, value<B> b, const environment& env) {
  const decoded x = decode(a, env), y = decode(b, env);
  if (x.what == kind::nan || y.what == kind::nan) return propagate<R>(env, {&x, &y});
  const bool sign = x.sign != y.sign;
  const bool x_zero = x.what == kind::number && x.magnitude == 0, y_zero = y.what == kind::number && y.magnitude == 0;
  const bool x_inf = x.what == kind::infinity, y_inf = y.what == kind::infinity;
  if ((x_inf && y_inf) || (x_zero && y_zero)) return fresh_nan<R>(env, invalid);
  if (x_inf) {  // an exact infinity, even over zero: no divide-by-zero flag
    if constexpr (layout<R>::ieee) return {layout<R>::infinity(sign), 0};
    else return fresh_nan<R>(env, invalid, sign);
  }
  if (y_zero) return infinity_or_nan<R>(sign, env, divide_by_zero);
  if (x_zero || y_inf) return {layout<R>::sign_bit(sign), 0};
  return round_to<R>(sign, x.magnitude / y.magnitude, env);
}

// The square root of a rational m is either dyadic (found exactly) or
// irrational. Scaling by 4^k with k = 200 makes the integer root r satisfy
// r*2^-k <= sqrt(m) < (r+1)*2^-k; an irrational root lies strictly inside
// that interval, and no rounding boundary (a multiple of 2^(quantum-32) for
// any format here) does, so the midpoint (r + 1/2)*2^-k rounds identically.
inline rational sqrt_for_rounding(const rational& m) {
  constexpr int k = 200;
  const big scaled = big(numerator(m) << (2 * k)) / denominator(m);
  big remainder;
  const big root = boost::multiprecision::sqrt(scaled, remainder);
  const bool exact = remainder == 0 && big(root * root * denominator(m)) == big(numerator(m) << (2 * k));
  if (exact) return rational(root) * power_of_two(-k);
  return rational(big(2 * root + 1)) * power_of_two(-k - 1);
}

template <format R, format A>
result sqrt(value<A> a, const environment& env) {
  const decoded x = decode(a, env);
  if (x.what == kind::nan) return propagate<R>(env, {&x});
  if (x.what == kind::number && x.magnitude == 0) return {layout<R>::sign_bit(x.sign), 0};
  if (x.sign) return fresh_nan<R>(env, invalid);
  if (x.what == kind::infinity) {
    if constexpr (layout<R>::ieee) return {layout<R>::infinity(false), 0};
    else return fresh_nan<R>(env, invalid, false);
  }
  return round_to<R>(false, sqrt_for_rounding(x.magnitude), env);
}

template <format R, format A>
result convert(value<A> a, const environment& env) {
  const decoded x = decode(a, env);
  if (x.what == kind::nan) return propagate<R>(env, {&x});
  if (x.what == kind::infinity) {
    if constexpr (layout<R>::ieee) return {layout<R>::infinity(x.sign), 0};
    else return fresh_nan<R>(env, invalid, x.sign);  // OCP E4M3FN, non-saturating: Inf becomes NaN
  }
  if (x.magnitude == 0) return {layout<R>::sign_bit(x.sign), 0};
  return round_to<R>(x.sign, x.magnitude, env);
}

}  // namespace oracle
