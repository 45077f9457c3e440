// The one place that rounds: an exact significand and exponent go in, a
// packed value of the target format and its flags come out.
#pragma once

#include <cstdint>

#include "bits.hpp"
#include "environment.hpp"
#include "format.hpp"
#include "observer.hpp"

namespace bitexact {

// What lies below the last kept bit, as the rounding decision needs it.
struct discarded_bits {
  bool guard = false;   // first bit below the last kept bit
  bool round = false;   // second
  bool sticky = false;  // OR of everything further down
  // The 32 bits below the last kept bit, and whether anything lies beyond
  // them: stochastic rounding compares this fraction of an ulp with random bits.
  std::uint32_t top32 = 0;
  bool beyond_top32 = false;

  constexpr bool any() const { return guard || round || sticky; }
};

struct split_significand {
  std::uint64_t kept;
  discarded_bits dropped;
};

// Keep significand >> shift; describe the shift-out. inexact_below says the
// exact value has more nonzero bits below significand's bit 0.
constexpr split_significand split_at(std::uint64_t significand, int shift, bool inexact_below) {
  if (shift <= 0) {
    discarded_bits none;
    none.sticky = none.beyond_top32 = inexact_below;
    return {significand << -shift, none};
  }
  if (shift > 100) shift = 100;  // a 64-bit significand is wholly sticky by then
  const uint128 sig = significand;
  const auto bit = [&](int position) { return position >= 0 && ((sig >> position) & 1) != 0; };
  const auto low_nonzero = [&](int count) {  // any of bits [0, count)
    if (count <= 0) return false;
    if (count >= 128) return sig != 0;
    return (sig & ((uint128{1} << count) - 1)) != 0;
  };
  discarded_bits d;
  d.guard = bit(shift - 1);
  d.round = bit(shift - 2);
  d.sticky = low_nonzero(shift - 2) || inexact_below;
  if (shift >= 32) {
    d.top32 = static_cast<std::uint32_t>(sig >> (shift - 32));
    d.beyond_top32 = low_nonzero(shift - 32) || inexact_below;
  } else {
    d.top32 = static_cast<std::uint32_t>((sig & ((uint128{1} << shift) - 1)) << (32 - shift));
    d.beyond_top32 = inexact_below;
  }
  return {static_cast<std::uint64_t>(sig >> shift), d};
}

struct rounding_decision {
  bool increment;  // add one ulp to the magnitude (round-to-odd: set an even last bit)
  rounding_reason reason;
};

constexpr rounding_decision decide_rounding(rounding_mode mode, bool sign, bool kept_odd, const discarded_bits& d,
                                            std::uint32_t random_bits) {
  if (!d.any()) return {false, rounding_reason::exact};
  const bool after_guard = d.round || d.sticky;
  switch (mode) {
    case rounding_mode::nearest_even:
      if (!d.guard) return {false, rounding_reason::below_half};
      if (after_guard) return {true, rounding_reason::above_half};
      return kept_odd ? rounding_decision{true, rounding_reason::tie_to_even}
                      : rounding_decision{false, rounding_reason::tie_stays_even};
    case rounding_mode::nearest_away:
      if (!d.guard) return {false, rounding_reason::below_half};
      return {true, after_guard ? rounding_reason::above_half : rounding_reason::tie_away};
    case rounding_mode::toward_zero: return {false, rounding_reason::toward_zero};
    case rounding_mode::upward:
      return sign ? rounding_decision{false, rounding_reason::directed_truncate}
                  : rounding_decision{true, rounding_reason::directed_up};
    case rounding_mode::downward:
      return sign ? rounding_decision{true, rounding_reason::directed_up}
                  : rounding_decision{false, rounding_reason::directed_truncate};
    case rounding_mode::to_odd:
      return {!kept_odd, kept_odd ? rounding_reason::odd_already : rounding_reason::odd_bit_set};
    case rounding_mode::stochastic: {
      const bool up = d.top32 > random_bits || (d.top32 == random_bits && d.beyond_top32);
      return {up, up ? rounding_reason::stochastic_up : rounding_reason::stochastic_down};
    }
  }
  return {false, rounding_reason::exact};
}

// The largest finite value or infinity, as the rounding mode sends an overflow.
template <format F>
constexpr value<F> overflow_result(bool sign, rounding_mode mode) {
  bool to_infinity = false;
  switch (mode) {
    case rounding_mode::nearest_even:
    case rounding_mode::nearest_away:
    case rounding_mode::stochastic: to_infinity = true; break;
    case rounding_mode::toward_zero:
    case rounding_mode::to_odd: to_infinity = false; break;
    case rounding_mode::upward: to_infinity = !sign; break;
    case rounding_mode::downward: to_infinity = sign; break;
  }
  if (!to_infinity) return value<F>::max_finite(sign);
  // E4M3FN has no infinity: an overflow that would reach it is NaN (OCP's non-saturating mode).
  if constexpr (F.has_infinity()) return value<F>::infinity(sign);
  else return value<F>::default_nan(sign);
}

// Round (-1)^sign * significand * 2^exponent (+ a little more when
// inexact_below) into format F. significand must be nonzero.
template <format F, class O = no_observer>
constexpr value<F> round_pack(bool sign, int exponent, std::uint64_t significand, bool inexact_below,
                              const environment& env, flags& raised, O&& obs = {}) {
  const int leading_exponent = exponent + msb_index(significand);
  const bool subnormal = leading_exponent < F.min_exponent();
  const int lsb_exponent = (subnormal ? F.min_exponent() : leading_exponent) - F.fraction_bits;
  auto [kept, dropped] = split_at(significand, lsb_exponent - exponent, inexact_below);
  const rounding_decision decision = decide_rounding(env.rounding, sign, kept & 1, dropped, env.random_bits);
  const bool inexact = dropped.any();
  const std::uint64_t unrounded_kept = kept;
  kept += decision.increment;

  int result_exponent = leading_exponent;
  const bool carry_out = !subnormal && (kept >> F.precision()) != 0;
  if (carry_out) {
    kept >>= 1;
    ++result_exponent;
  }

  bool tiny = subnormal;
  if (subnormal && env.tiny == tininess::after_rounding && leading_exponent == F.min_exponent() - 1) {
    // After-rounding tininess asks whether rounding at full precision, with an
    // unbounded exponent range, would have reached the smallest normal.
    auto [wide_kept, wide_dropped] = split_at(significand, lsb_exponent - 1 - exponent, inexact_below);
    const rounding_decision wide =
        decide_rounding(env.rounding, sign, wide_kept & 1, wide_dropped, env.random_bits);
    tiny = ((wide_kept + wide.increment) >> F.precision()) == 0;
  }

  if constexpr (is_observing<O>) {
    obs.on(rounding_event{F, env.rounding, sign, lsb_exponent, unrounded_kept, dropped.guard, dropped.round,
                          dropped.sticky, decision.increment, decision.reason,
                          carry_out || (subnormal && (kept >> F.fraction_bits) != 0), subnormal, tiny});
  }

  const bool nan_pattern_reached =
      !F.has_infinity() && result_exponent == F.max_exponent() && (kept & value<F>::fraction_mask()) == value<F>::fraction_mask();
  if (result_exponent > F.max_exponent() || nan_pattern_reached) {
    raised.bits |= flags::overflow | flags::inexact;
    report(obs, special_event{special_reason::overflow});
    return overflow_result<F>(sign, env.rounding);
  }
  if (tiny && env.flush_to_zero) {
    raised.bits |= flags::underflow | flags::inexact;
    report(obs, special_event{special_reason::flushed_to_zero});
    return value<F>::zero(sign);
  }
  if (inexact) raised.bits |= flags::inexact | (tiny ? flags::underflow : 0);

  // The hidden bit of a normal significand adds one to the exponent field, and
  // a subnormal that rounded up to 2^min_exponent carries into it likewise.
  const auto magnitude = static_cast<std::uint32_t>(
      subnormal ? kept : (static_cast<std::uint64_t>(result_exponent + F.bias() - 1) << F.fraction_bits) + kept);
  return value<F>::from_bits((std::uint32_t{sign} << (F.width() - 1)) | magnitude);
}

}  // namespace bitexact
