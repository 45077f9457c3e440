// The one place that rounds: an exact significand and exponent go in, a
// packed value of the target format and its flags come out.
#pragma once

#include <cstdint>

#include "bits.hpp"
#include "environment.hpp"
#include "format.hpp"
#include "observer.hpp"
#include "specialize.hpp"

namespace bitexact {

// What lies below the last kept bit, as the rounding decision needs it: the
// discarded bits left-aligned in a word (the first one at bit 63) and whether
// anything nonzero lies below that word. Each rounding mode reads only the
// parts it needs, so nothing else is computed on the way.
struct discarded_bits {
  std::uint64_t field = 0;
  bool below_field = false;

  constexpr bool guard() const { return (field >> 63) != 0; }         // first bit below the last kept bit
  constexpr bool round() const { return ((field >> 62) & 1) != 0; }  // second
  constexpr bool sticky() const { return ((field << 2) != 0) | below_field; }  // OR of everything further down
  constexpr bool after_guard() const { return ((field << 1) != 0) | below_field; }  // round or sticky
  constexpr bool any() const { return (field != 0) | below_field; }
  // The 32 bits below the last kept bit, and whether anything lies beyond
  // them: stochastic rounding compares this fraction of an ulp with random bits.
  constexpr std::uint32_t top32() const { return static_cast<std::uint32_t>(field >> 32); }
  constexpr bool beyond_top32() const { return (static_cast<std::uint32_t>(field) != 0) | below_field; }
};

struct split_significand {
  std::uint64_t kept;
  discarded_bits dropped;
};

// Keep significand >> shift; describe the shift-out. inexact_below says the
// exact value has more nonzero bits below significand's bit 0.
BITEXACT_INLINE constexpr split_significand split_at(std::uint64_t significand, int shift, bool inexact_below) {
  if (shift <= 0) return {significand << -shift, {0, inexact_below}};
  // Every operation keeps some bits of its significand: one 64-bit shift each way.
  if (shift < 64) [[likely]]
    return {significand >> shift, {significand << (64 - shift), inexact_below}};
  // Nothing is kept: the 64 bits below the last kept bit are significand >> field_shift.
  const int field_shift = shift - 64;
  if (field_shift >= 64) return {0, {0, significand != 0 || inexact_below}};
  const bool below_field = (significand & ((std::uint64_t{1} << field_shift) - 1)) != 0;
  return {0, {significand >> field_shift, below_field || inexact_below}};
}

struct rounding_decision {
  bool increment;  // add one ulp to the magnitude (round-to-odd: set an even last bit)
  rounding_reason reason;
};

// The rounding mode is the same from one operation to the next, the discarded
// bits are not: branch on the mode only, and compute the increment from the
// bits with bitwise logic (a mispredicted branch on the guard bit costs more
// than the whole operation). The reason is only read by observers.
BITEXACT_INLINE constexpr rounding_decision decide_rounding(rounding_mode mode, bool sign, bool kept_odd,
                                                            const discarded_bits& d, std::uint32_t random_bits) {
  const bool inexact = d.any();
  const bool guard = d.guard();
  rounding_decision decision{false, rounding_reason::exact};
  switch (mode) {
    case rounding_mode::nearest_even:
      decision.increment = guard & (d.after_guard() | kept_odd);
      decision.reason = !guard           ? rounding_reason::below_half
                        : d.after_guard() ? rounding_reason::above_half
                        : kept_odd        ? rounding_reason::tie_to_even
                                          : rounding_reason::tie_stays_even;
      break;
    case rounding_mode::nearest_away:
      decision.increment = guard;
      decision.reason = !guard           ? rounding_reason::below_half
                        : d.after_guard() ? rounding_reason::above_half
                                          : rounding_reason::tie_away;
      break;
    case rounding_mode::toward_zero: decision.reason = rounding_reason::toward_zero; break;
    case rounding_mode::upward:
      decision.increment = !sign;
      decision.reason = sign ? rounding_reason::directed_truncate : rounding_reason::directed_up;
      break;
    case rounding_mode::downward:
      decision.increment = sign;
      decision.reason = sign ? rounding_reason::directed_up : rounding_reason::directed_truncate;
      break;
    case rounding_mode::to_odd:
      decision.increment = !kept_odd;
      decision.reason = kept_odd ? rounding_reason::odd_already : rounding_reason::odd_bit_set;
      break;
    case rounding_mode::stochastic:
      decision.increment = (d.top32() > random_bits) | ((d.top32() == random_bits) & d.beyond_top32());
      decision.reason = decision.increment ? rounding_reason::stochastic_up : rounding_reason::stochastic_down;
      break;
  }
  decision.increment &= inexact;
  if (!inexact) decision.reason = rounding_reason::exact;
  return decision;
}

// The largest finite value or infinity, as the rounding mode sends an overflow.
template <format F>
constexpr value<F> overflow_result(bool sign, const environment& env) {
  bool to_infinity = false;
  switch (env.rounding) {
    case rounding_mode::nearest_even:
    case rounding_mode::nearest_away:
    case rounding_mode::stochastic: to_infinity = true; break;
    case rounding_mode::toward_zero:
    case rounding_mode::to_odd: to_infinity = false; break;
    case rounding_mode::upward: to_infinity = !sign; break;
    case rounding_mode::downward: to_infinity = sign; break;
  }
  return to_infinity ? infinity_result<F>(sign, env) : value<F>::max_finite(sign);
}

// Round (-1)^sign * significand * 2^exponent (+ a little more when
// inexact_below) into format F. significand must be nonzero.
template <format F, class O = no_observer>
BITEXACT_INLINE constexpr value<F> round_pack(bool sign, int exponent, std::uint64_t significand, bool inexact_below,
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
    obs.on(rounding_event{F, env.rounding, sign, lsb_exponent, unrounded_kept, dropped.guard(), dropped.round(),
                          dropped.sticky(), decision.increment, decision.reason,
                          carry_out || (subnormal && (kept >> F.fraction_bits) != 0), subnormal, tiny});
  }

  const bool nan_pattern_reached =
      !F.has_infinity() && result_exponent == F.max_exponent() && (kept & value<F>::fraction_mask()) == value<F>::fraction_mask();
  if (result_exponent > F.max_exponent() || nan_pattern_reached) {
    raised.bits |= flags::overflow | flags::inexact;
    report(obs, special_event{special_reason::overflow});
    return overflow_result<F>(sign, env);
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
