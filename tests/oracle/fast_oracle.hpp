// The fast oracle, for the exhaustive sweeps: still independent of the core,
// but in host double arithmetic instead of rationals.
//
// Why double is exact here: a bf16, fp16 or fp8 value has at most 11
// significant bits and exponents within [-133, 127], so the product of two is
// exact in double, and the sum of two is exactly s + t where s = fl(x + y) and
// t is TwoSum's error term (no overflow or underflow is possible at these
// magnitudes). An fp32 value is exact in double (t = 0), which covers the
// fp32 -> bf16/fp16/fp8 conversions.
//
// Rounding s + t to a format with p <= 11 bits compares the discarded part
// against 1/2 and against random_bits / 2^32. Both thresholds are multiples
// of 2^-32 of the target's quantum, while s's own last bit is at most 2^-42 of
// it, and |t| is at most half of s's last bit: so the discarded part of s
// alone decides every comparison unless it lands exactly on the threshold, and
// then t's sign does.
#pragma once

#include <cmath>
#include <cstdint>

#include "rational_oracle.hpp"  // result, flag bits, layout<R>, the NaN rules

namespace oracle::fast {

template <format F>
double exact_double(value<F> x) {
  const int bias = (1 << (F.exponent_bits - 1)) - 1;
  const int biased = static_cast<int>(x.biased_exponent());
  const double magnitude = biased == 0 ? std::ldexp(double(x.fraction()), 1 - bias - F.fraction_bits)
                                       : std::ldexp(double(x.fraction() + (1u << F.fraction_bits)),
                                                    biased - bias - F.fraction_bits);
  return x.sign() ? -magnitude : magnitude;
}

struct two_sum_result {
  double sum, error;
};
inline two_sum_result two_sum(double a, double b) {
  const double s = a + b;
  const double b_virtual = s - a;
  const double a_virtual = s - b_virtual;
  return {s, (a - a_virtual) + (b - b_virtual)};
}

// -1, 0 or +1 as (r + t) compares with threshold, where r and threshold are
// on a grid coarser than twice |t| (see the header comment).
inline int compare_with(double r, double t, double threshold) {
  if (r != threshold) return r < threshold ? -1 : 1;
  return t < 0 ? -1 : (t > 0 ? 1 : 0);
}

struct rounded_magnitude {
  double n;  // the chosen multiple of the quantum, as an integer-valued double
  bool inexact;
};

// Round the positive value s + t to a multiple of 2^quantum.
inline rounded_magnitude round_at(double s, double t, int quantum, rounding_mode mode, bool sign,
                                  std::uint32_t random_bits) {
  const double scaled_s = std::ldexp(s, -quantum);
  const double scaled_t = std::ldexp(t, -quantum);
  double n = std::floor(scaled_s);
  double r = scaled_s - n;  // exact: the low bits of scaled_s
  if (r == 0 && scaled_t < 0) {  // s is a multiple of the quantum and t pulls below it
    n -= 1;
    r = 1;
  }
  const bool inexact = r != 0 || scaled_t != 0;
  if (!inexact) return {n, false};
  bool up = false;
  const int vs_half = compare_with(r, scaled_t, 0.5);
  switch (mode) {
    case rounding_mode::nearest_even: up = vs_half > 0 || (vs_half == 0 && std::fmod(n, 2) != 0); break;
    case rounding_mode::nearest_away: up = vs_half >= 0; break;
    case rounding_mode::toward_zero: up = false; break;
    case rounding_mode::upward: up = !sign; break;
    case rounding_mode::downward: up = sign; break;
    case rounding_mode::to_odd: up = std::fmod(n, 2) == 0; break;
    case rounding_mode::stochastic: up = compare_with(r, scaled_t, std::ldexp(double(random_bits), -32)) > 0; break;
  }
  return {up ? n + 1 : n, true};
}

// Round s + t (exact, t as TwoSum leaves it) into R.
template <format R>
result round_sum(double s, double t, const environment& env, bool zero_sign_x, bool zero_sign_y) {
  using L = layout<R>;
  if (s == 0 && t == 0) {
    const bool sign = zero_sign_x == zero_sign_y ? zero_sign_x : env.rounding == rounding_mode::downward;
    return {L::sign_bit(sign), 0};
  }
  const bool sign = s < 0;
  if (sign) {
    s = -s;
    t = -t;
  }
  int e;
  const double mantissa = std::frexp(s, &e);  // s = mantissa * 2^e, mantissa in [1/2, 1)
  int lead = e - 1;
  if (mantissa == 0.5 && t < 0) --lead;  // s is a power of two and s + t lies just below it
  const bool below_normal = lead < L::emin;
  const int quantum = (below_normal ? L::emin : lead) - R.fraction_bits;
  const rounded_magnitude chosen = round_at(s, t, quantum, env.rounding, sign, env.random_bits);

  bool tiny = below_normal;
  if (below_normal && env.tiny == tininess::after_rounding) {
    const int wide_quantum = lead - R.fraction_bits;
    const rounded_magnitude wide = round_at(s, t, wide_quantum, env.rounding, sign, env.random_bits);
    tiny = std::ldexp(wide.n, wide_quantum) < std::ldexp(1.0, L::emin);
  }

  const double rounded_value = std::ldexp(chosen.n, quantum);
  const double largest = std::ldexp(double(L::max_significand()), L::emax - R.fraction_bits);
  if (rounded_value > largest) {
    if (overflow_goes_to_infinity<R>(env.rounding, sign)) return infinity_or_nan<R>(sign, env, overflow | inexact);
    return {L::max_finite(sign), overflow | inexact};
  }
  if (tiny && env.flush_to_zero) return {L::sign_bit(sign), underflow | inexact};
  std::uint8_t flags = chosen.inexact ? inexact : 0;
  if (tiny && chosen.inexact) flags |= underflow;

  std::uint32_t magnitude_bits;
  if (rounded_value < std::ldexp(1.0, L::emin)) {
    magnitude_bits = static_cast<std::uint32_t>(std::ldexp(rounded_value, R.fraction_bits - L::emin));
  } else {
    int re;
    const double m = std::frexp(rounded_value, &re);  // value = m * 2^re
    const auto fraction = static_cast<std::uint32_t>(std::ldexp(m * 2 - 1, R.fraction_bits));
    magnitude_bits = (std::uint32_t(re - 1 + L::bias) << R.fraction_bits) | fraction;
  }
  return {L::sign_bit(sign) | magnitude_bits, flags};
}

// Specials (NaN, infinity) are decided by the rational oracle's decode and
// rules; only finite arithmetic is done here in double.
template <format R, format A, format B>
result add(value<A> a, value<B> b, const environment& env, bool subtract = false) {
  static_assert(A.fraction_bits <= 10 && B.fraction_bits <= 10, "the fast oracle is exact for <= 11-bit operands");
  if (a.is_nan() || b.is_nan() || a.is_inf() || b.is_inf()) return oracle::add<R>(a, b, env, subtract);
  const bool daz = env.denormals_are_zero;
  const double x = daz && a.biased_exponent() == 0 ? (a.sign() ? -0.0 : 0.0) : exact_double(a);
  double y = daz && b.biased_exponent() == 0 ? (b.sign() ? -0.0 : 0.0) : exact_double(b);
  if (subtract) y = -y;
  const two_sum_result st = two_sum(x, y);
  return round_sum<R>(st.sum, st.error, env, std::signbit(x), std::signbit(y));
}

template <format R, format A, format B>
result mul(value<A> a, value<B> b, const environment& env) {
  static_assert(A.fraction_bits <= 10 && B.fraction_bits <= 10, "the fast oracle is exact for <= 11-bit operands");
  if (a.is_nan() || b.is_nan() || a.is_inf() || b.is_inf()) return oracle::mul<R>(a, b, env);
  const bool daz = env.denormals_are_zero;
  const double x = daz && a.biased_exponent() == 0 ? (a.sign() ? -0.0 : 0.0) : exact_double(a);
  const double y = daz && b.biased_exponent() == 0 ? (b.sign() ? -0.0 : 0.0) : exact_double(b);
  const double product = x * y;
  if (product == 0) return {layout<R>::sign_bit(std::signbit(x) != std::signbit(y)), 0};
  return round_sum<R>(product, 0.0, env, false, false);
}

// Any format with <= 24-bit significands into R (<= 11 bits): the value is exact in double.
template <format R, format A>
result convert(value<A> a, const environment& env) {
  static_assert(R.fraction_bits <= 10, "the fast oracle's comparisons need a target of <= 11 bits");
  if (a.is_nan() || a.is_inf()) return oracle::convert<R>(a, env);
  const double x = env.denormals_are_zero && a.biased_exponent() == 0 ? (a.sign() ? -0.0 : 0.0) : exact_double(a);
  if (x == 0) return {layout<R>::sign_bit(std::signbit(x)), 0};
  return round_sum<R>(x, 0.0, env, false, false);
}

}  // namespace oracle::fast
