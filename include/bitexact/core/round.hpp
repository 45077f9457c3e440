// The one place that rounds: an exact significand and exponent go in, a
// packed value of the target format and its flags come out.
#pragma once

#include <cstdint>
#include <type_traits>

#include "bits.hpp"
#include "environment.hpp"
#include "format.hpp"
#include "observer.hpp"
#include "platform.hpp"

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
// exact value has more nonzero bits below significand's bit 0. Any shift of
// 64 or more keeps nothing and describes every bit as discarded. Precondition:
// a negative shift (a left shift: the last kept bit lies below bit 0) moves
// no set bit past bit 63.
BITEXACT_INLINE constexpr split_significand split_at(std::uint64_t significand, int shift, bool inexact_below) {
  // Every operation keeps some bits of its significand: one 64-bit shift each
  // way, for 0 < shift < 64 (one unsigned compare).
  if (static_cast<unsigned>(shift) - 1 < 63) [[likely]]
    return {significand >> shift, {significand << (64 - shift), inexact_below}};
  if (shift <= 0) {
    BITEXACT_EXPECTS(-shift < 64 && (significand >> (63 + shift)) >> 1 == 0, "split_at: a left shift loses set bits");
    return {significand << -shift, {0, inexact_below}};
  }
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
                                                            const discarded_bits& discarded,
                                                            std::uint32_t random_bits) {
  const bool inexact = discarded.any();
  const bool guard = discarded.guard();
  rounding_decision decision{false, rounding_reason::exact};
  switch (mode) {
    case rounding_mode::nearest_even:
      // guard & (after_guard | kept_odd) in one compare: above exactly half an
      // ulp once the odd bit and below_field are folded into bit 0.
      decision.increment =
          (discarded.field | std::uint64_t{kept_odd} | std::uint64_t{discarded.below_field}) > (std::uint64_t{1} << 63);
      decision.reason = !guard           ? rounding_reason::below_half
                        : discarded.after_guard() ? rounding_reason::above_half
                        : kept_odd        ? rounding_reason::tie_to_even
                                          : rounding_reason::tie_stays_even;
      break;
    case rounding_mode::nearest_away:
      decision.increment = guard;
      decision.reason = !guard           ? rounding_reason::below_half
                        : discarded.after_guard() ? rounding_reason::above_half
                                          : rounding_reason::tie_away;
      break;
    case rounding_mode::toward_zero: decision.reason = rounding_reason::toward_zero; break;
    case rounding_mode::upward:
      decision.increment = !sign & inexact;
      decision.reason = sign ? rounding_reason::directed_truncate : rounding_reason::directed_up;
      break;
    case rounding_mode::downward:
      decision.increment = sign & inexact;
      decision.reason = sign ? rounding_reason::directed_up : rounding_reason::directed_truncate;
      break;
    case rounding_mode::to_odd:
      decision.increment = !kept_odd & inexact;
      decision.reason = kept_odd ? rounding_reason::odd_already : rounding_reason::odd_bit_set;
      break;
    case rounding_mode::stochastic:
      decision.increment = (discarded.top32() > random_bits) |
                           ((discarded.top32() == random_bits) & unsigned{discarded.beyond_top32()});
      decision.reason = decision.increment ? rounding_reason::stochastic_up : rounding_reason::stochastic_down;
      break;
  }
  // The nearest modes and stochastic rounding never increment an exact value
  // (a set guard bit, or a nonzero fraction above the random bits, is itself
  // inexactness); the other modes test it above.
  if (!inexact) decision.reason = rounding_reason::exact;
  return decision;
}

// A rounding mode known at compile time, or (run_time_rounding) read from the
// environment at each decision.
inline constexpr int run_time_rounding = -1;
template <int Mode>
using fixed_rounding = std::integral_constant<int, Mode>;

// Call fn(fixed_rounding<mode>{}) for env's rounding mode, chosen by one test
// or switch here, so that a fast path can instantiate round_pack per mode
// (round_pack<F, no_observer, mode>) and its switch on the mode folds away.
template <class Fn>
BITEXACT_INLINE constexpr decltype(auto) with_fixed_rounding(const environment& env, Fn&& fn) {
  constexpr auto mode = [](rounding_mode m) { return static_cast<int>(m); };
  // The default mode first: one compare instead of a jump table.
  if (env.rounding == rounding_mode::nearest_even) [[likely]]
    return fn(fixed_rounding<mode(rounding_mode::nearest_even)>{});
  switch (env.rounding) {
    case rounding_mode::nearest_even: break;
    case rounding_mode::nearest_away: return fn(fixed_rounding<mode(rounding_mode::nearest_away)>{});
    case rounding_mode::toward_zero: return fn(fixed_rounding<mode(rounding_mode::toward_zero)>{});
    case rounding_mode::upward: return fn(fixed_rounding<mode(rounding_mode::upward)>{});
    case rounding_mode::downward: return fn(fixed_rounding<mode(rounding_mode::downward)>{});
    case rounding_mode::to_odd: return fn(fixed_rounding<mode(rounding_mode::to_odd)>{});
    case rounding_mode::stochastic: return fn(fixed_rounding<mode(rounding_mode::stochastic)>{});
  }
  return fn(fixed_rounding<run_time_rounding>{});  // not a rounding mode: whatever the run-time code does
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

// Where a rounding happens: the exponent of the last kept bit and whether the
// result is subnormal (both for the trace), and whether it is tiny by the
// environment's tininess rule, which decides flush-to-zero and the underflow flag.
struct rounding_place {
  int lsb_exponent = 0;
  bool subnormal = false;
  bool tiny = false;
};

// Nearest-even rounding of an extended pattern (below) in a few additions:
// adding just under half an ulp, and one more when the last kept bit is odd or
// something lies below the extra bits, carries into the kept bits exactly when
// decide_rounding increments: the guard bit is set and it is not a tie that
// stays even.
// Word is std::uint64_t, or a vector of them (the lanes of elementwise.hpp);
// inexact_below is 0 or 1 in each.
template <int ExtraBits, class Word>
BITEXACT_INLINE constexpr Word round_nearest_even(Word extended, Word inexact_below) {
  constexpr std::uint64_t half_ulp = std::uint64_t{1} << (ExtraBits - 1);
  return (extended + (half_ulp - 1) + (((extended >> ExtraBits) & 1) | inexact_below)) >> ExtraBits;
}

// The rounding step itself. extended is the exact magnitude truncated
// ExtraBits bits below F's last bit, written as F's magnitude bit pattern
// with those ExtraBits bits appended (a subnormal has exponent field 0);
// inexact_below says whether anything nonzero lies further down. The pattern
// is rounded where it stands: an increment that carries out of the fraction
// increments the exponent field, and the magnitude reaches the infinity
// pattern (E4M3FN: the NaN pattern) exactly when the result overflows.
// FixedMode, when not run_time_rounding, is env.rounding known at compile time.
template <format F, int ExtraBits, int FixedMode = run_time_rounding, class O = no_observer>
BITEXACT_INLINE constexpr value<F> round_extended(bool sign, std::uint64_t extended, bool inexact_below,
                                                  const rounding_place& place, const environment& env,
                                                  flags& raised, O&& obs = {}) {
  static_assert(ExtraBits >= 1 && ExtraBits <= 63);
  const rounding_mode mode = FixedMode == run_time_rounding ? env.rounding : rounding_mode{std::uint8_t(FixedMode)};
  const std::uint64_t kept = extended >> ExtraBits;
  const discarded_bits dropped{extended << (64 - ExtraBits), inexact_below};
  const rounding_decision decision = decide_rounding(mode, sign, kept & 1, dropped, env.random_bits);
  std::uint64_t magnitude = kept + decision.increment;
  if constexpr (FixedMode == static_cast<int>(rounding_mode::nearest_even) && !listens_to<O, rounding_event>)
    magnitude = round_nearest_even<ExtraBits>(extended, std::uint64_t{inexact_below});

  if constexpr (listens_to<O, rounding_event>) {
    constexpr std::uint64_t fraction_mask = value<F>::fraction_mask();
    const std::uint64_t significand = place.subnormal ? kept : (kept & fraction_mask) | (fraction_mask + 1);
    const bool carry_out = ((kept ^ magnitude) >> F.fraction_bits) != 0;
    obs.on(rounding_event{F, env.rounding, sign, place.lsb_exponent, significand, dropped.guard(), dropped.round(),
                          dropped.sticky(), decision.increment, decision.reason, carry_out, place.subnormal,
                          place.tiny});
  }

  constexpr std::uint64_t overflow_threshold =
      (static_cast<std::uint64_t>(F.max_biased_exponent()) << F.fraction_bits) |
      (F.has_infinity() ? 0 : value<F>::fraction_mask());
  if (magnitude >= overflow_threshold) [[unlikely]] {
    raised.bits |= flags::overflow | flags::inexact;
    report(obs, special_event{special_reason::overflow});
    return overflow_result<F>(sign, env);
  }
  if (place.tiny && env.flush_to_zero) [[unlikely]] {
    raised.bits |= flags::underflow | flags::inexact;
    report(obs, special_event{special_reason::flushed_to_zero});
    return value<F>::zero(sign);
  }
  // dropped.any(), as one test of extended's low bits.
  const bool inexact = (extended & ((std::uint64_t{1} << ExtraBits) - 1)) != 0 || inexact_below;
  raised.bits |= inexact ? flags::inexact | (place.tiny ? flags::underflow : 0) : 0;
  return value<F>::from_bits((std::uint32_t{sign} << (F.width() - 1)) | static_cast<std::uint32_t>(magnitude));
}

// Round (-1)^sign * significand * 2^exponent (+ a little more when
// inexact_below) into format F: lay it out as an extended pattern and round
// that. Precondition: significand != 0 (a zero has no leading bit to align;
// every caller settles zero results before rounding). Checked in constant
// evaluation and in builds with assertions.
template <format F, class O = no_observer, int FixedMode = run_time_rounding>
BITEXACT_INLINE constexpr value<F> round_pack(bool sign, int exponent, std::uint64_t significand, bool inexact_below,
                                              const environment& env, flags& raised, O&& obs = {}) {
  BITEXACT_EXPECTS(significand != 0, "round_pack: a zero significand has no leading bit to round at");
  // The discarded bits kept in the pattern: F's magnitude pattern fits in the
  // rest of the word even with its exponent field one past all-ones, and
  // fp32 keeps the 32 that stochastic rounding reads.
  constexpr int extra = 64 - F.width();
  constexpr int lost = 64 - F.precision() - extra;  // = F.exponent_bits: the aligned bits below the pattern
  const int leading_zeros = leading_zeros_nonzero(significand);
  const int leading_exponent = exponent + 63 - leading_zeros;
  if (leading_exponent >= F.min_exponent()) [[likely]] {
    // A normal result keeps the top precision bits of the significand with its
    // leading bit at bit 63. Past the largest exponent, the exponent field is
    // held at its all-ones value plus one, which still fits and still
    // overflows. The field is written one less than the biased exponent
    // because the leading bit, added in with the fraction, carries one into it.
    const std::uint64_t aligned = significand << leading_zeros;
    const int field_exponent = leading_exponent < F.max_exponent() + 1 ? leading_exponent : F.max_exponent() + 1;
    const std::uint64_t extended =
        (static_cast<std::uint64_t>(field_exponent + F.bias() - 1) << (F.fraction_bits + extra)) + (aligned >> lost);
    return round_extended<F, extra, FixedMode>(sign, extended, inexact_below || (aligned << (64 - lost)) != 0,
                                               {leading_exponent - F.fraction_bits, false, false}, env, raised, obs);
  }
  // A subnormal result keeps the bits at and above the smallest normal's last bit.
  const rounding_mode mode = FixedMode == run_time_rounding ? env.rounding : rounding_mode{std::uint8_t(FixedMode)};
  const int lsb_exponent = F.min_exponent() - F.fraction_bits;
  const auto [kept, dropped] = split_at(significand, lsb_exponent - exponent, inexact_below);
  bool tiny = true;
  if (env.tiny == tininess::after_rounding && leading_exponent == F.min_exponent() - 1) {
    // After-rounding tininess asks whether rounding at full precision, with an
    // unbounded exponent range, would have reached the smallest normal.
    const auto [wide_kept, wide_dropped] = split_at(significand, lsb_exponent - 1 - exponent, inexact_below);
    const rounding_decision wide = decide_rounding(mode, sign, wide_kept & 1, wide_dropped, env.random_bits);
    tiny = ((wide_kept + wide.increment) >> F.precision()) == 0;
  }
  const std::uint64_t extended = (kept << extra) | (dropped.field >> (64 - extra));
  const bool below = dropped.below_field || (dropped.field << extra) != 0;
  return round_extended<F, extra, FixedMode>(sign, extended, below, {lsb_exponent, true, tiny}, env, raised, obs);
}

}  // namespace bitexact
