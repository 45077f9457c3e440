// The events an operation reports while it computes. An observer receives
// them; with no observer, every report compiles away.
#pragma once

#include <cstdint>
#include <type_traits>

#include "bits.hpp"
#include "environment.hpp"
#include "format.hpp"
#include "unpack.hpp"

namespace bitexact {

enum class operation : std::uint8_t { add, sub, mul, fma, div, sqrt, convert, from_integer, to_integer };

struct operation_event {
  operation op;
  format result_format;
  environment env;
};

struct operand_event {
  int index;  // 0-based position in the operation's argument list
  format fmt;
  std::uint32_t bits;
  unpacked decoded;
};

// Bringing two terms to one scale before an exact sum.
struct alignment_event {
  int exponent_difference;      // of the leading bits: larger minus smaller
  int align_shift;              // right shift applied to the smaller term (0 when it fitted exactly)
  uint128 shifted_out;          // bits that fell off the right, before being jammed
  bool sticky;                  // shifted_out != 0, folded into the sum's last bit
  bool smaller_is_first;        // which operand was the smaller term
};

// The exact result before rounding: (-1)^sign * significand * 2^exponent,
// plus "a little more" when inexact_below is set (a jammed sticky bit).
struct exact_event {
  bool sign;
  uint128 significand;
  int exponent;
  bool inexact_below;
  bool effective_subtraction;
};

// How far the leading bit of the exact result moved against the largest
// operand's: +1 is a carry-out (right shift, exponent increment), negative is
// cancellation (left shift by that count).
struct normalization_event {
  int leading_bit_shift;
};

enum class rounding_reason : std::uint8_t {
  exact,              // nothing was discarded
  below_half,         // nearest: guard bit 0
  above_half,         // nearest: guard bit 1 and something after it
  tie_to_even,        // exactly half, last kept bit odd: round up to make it even
  tie_stays_even,     // exactly half, last kept bit even: keep
  tie_away,           // nearest_away: exactly half goes away from zero
  toward_zero,        // truncate
  directed_up,        // toward +inf on a positive value, or -inf on a negative one
  directed_truncate,  // directed rounding away from the discarded bits' direction
  odd_bit_set,        // round-to-odd: inexact, last bit forced to 1
  odd_already,        // round-to-odd: inexact, last bit already 1
  stochastic_up,      // discarded fraction above the random threshold
  stochastic_down,
};

struct rounding_event {
  format target;
  rounding_mode mode;
  bool sign;
  int lsb_exponent;         // exponent of the last kept bit
  std::uint64_t kept;       // significand kept before the increment (hidden bit included)
  bool guard;               // first discarded bit (the paper's "rounding bit")
  bool round;               // second discarded bit
  bool sticky;              // OR of every bit after those
  bool increment;           // whether the magnitude was rounded up by one ulp
  rounding_reason reason;
  bool carry_out;           // the increment carried into a new binade
  bool subnormal;           // the result's exponent is below the format's normals
  bool tiny;                // by the environment's tininess rule
};

enum class special_reason : std::uint8_t {
  nan_operand,          // a NaN input propagates
  invalid_operation,    // inf - inf, 0 * inf, 0 / 0, inf / inf, sqrt of a negative
  infinity_operand,     // an infinite input decides the result exactly
  division_by_zero,     // finite / 0
  zero_result,          // exact zero (operands cancel, or a zero operand)
  overflow,             // rounded result beyond the largest finite value
  flushed_to_zero,      // tiny result flushed (flush-to-zero)
  out_of_range_integer, // to_integer: NaN or beyond the integer type
};

struct special_event {
  special_reason reason;
};

struct result_event {
  format fmt;
  std::uint32_t bits;
  flags raised;
};

// Events of a tensor core's fused multi-term step (mma.hpp).
// One term after alignment to the largest term's exponent.
struct fused_term_event {
  int index;                 // product k of the step, or -1 for the addend C
  bool sign;
  std::uint64_t significand;  // exact: product of significands, or C's
  int exponent;              // of the significand's last bit
  int nominal_exponent;      // the exponent that competes for e_max
  std::int64_t kept;         // signed multiple of 2^(e_max - kept_fraction_bits) that survives
  bool truncated;            // whether bits were cut away
};

struct fused_sum_event {
  int max_exponent;   // e_max
  int lsb_exponent;   // e_max - kept_fraction_bits
  std::int64_t sum;   // exact sum of the kept terms, in units of 2^lsb_exponent
};

struct no_observer {};

// The one rule for every event: an observer receives an event exactly when it
// has an on() member for that event's type. An observer may listen to a few
// kinds of event (the rounding decisions only, say) and no others; one with
// no on() member at all, such as no_observer, makes every report vanish at
// compile time. Hardware models add event kinds of their own by the same rule.
template <class O, class Event>
concept listens_to = requires(std::remove_reference_t<O>& obs, const Event& event) { obs.on(event); };

template <class O>
inline constexpr bool listens_to_core_events =
    listens_to<O, operation_event> || listens_to<O, operand_event> || listens_to<O, alignment_event> ||
    listens_to<O, exact_event> || listens_to<O, normalization_event> || listens_to<O, rounding_event> ||
    listens_to<O, special_event> || listens_to<O, result_event>;

// An observer of every event the core operations report (a trace recorder).
template <class O>
concept observer = listens_to<O, operation_event> && listens_to<O, operand_event> &&
                   listens_to<O, alignment_event> && listens_to<O, exact_event> &&
                   listens_to<O, normalization_event> && listens_to<O, rounding_event> &&
                   listens_to<O, special_event> && listens_to<O, result_event>;

// Hand an event to the observer if it listens for that kind of event. Events
// that cost something to build are built under `if constexpr (listens_to<O, E>)`.
template <class O, class Event>
BITEXACT_INLINE constexpr void report(O& obs, const Event& event) {
  if constexpr (listens_to<O, Event>) obs.on(event);
}

// An observer that is attached at run time (a sink behind a pointer that may
// be null) says with listening() whether anybody listens now. add, sub, mul
// and convert take their untraced fast path when nobody does, so tracing
// compiled in but not attached costs one test; any other observer listens
// when it has an on() member for some core event.
template <class O>
constexpr bool is_listening(const O& obs) {
  if constexpr (requires { static_cast<bool>(obs.listening()); }) return obs.listening();
  else return listens_to_core_events<O>;
}

}  // namespace bitexact
