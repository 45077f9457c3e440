// A trace: the record of one operation, built from the events it reports.
//
// Usage (the whole API; renderers live in render.hpp):
//
//   #include <bitexact/trace/render.hpp>   // includes trace.hpp
//   using namespace bitexact;
//
//   // Run any operation with a recorder attached and get {rounded result, trace}:
//   auto [sum, record] = traced([&](auto& recorder) { return add(a, b, env, recorder); });
//   // sum is rounded<F> (sum.result, sum.raised); record is a bitexact::trace.
//
//   // A tensor-core step the same way (record.fused holds the terms and the window):
//   auto [d, step] = traced([&](auto& recorder) {
//     return fused_multiply_add_step<fp32, bf16>(sm90_tensor_core, a, b, c, recorder); });
//
//   // Or attach a recorder yourself:
//   trace_recorder recorder;
//   auto r = convert<bf16>(x, env, recorder);
//   trace record = recorder.take();
//
//   std::string text = render(record, output_style::text);   // also markdown, latex, json
//   fmt::print("{}", record);                                 // text, via fmt.hpp
//
// A trace is plain data: the events as the operation reported them, plus
// what a reader needs and the events do not say directly (binary strings
// with the point placed as a human writes it, the rounding decision in
// words, why each flag was raised, and the exact real value and rounding
// error computed with Boost.Multiprecision). Renderers read only this record.
//
// Attaching a recorder is the slow path (it allocates and does exact
// rational arithmetic); operations called without an observer never see it.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/multiprecision/cpp_bin_float.hpp>
#include <boost/multiprecision/cpp_int.hpp>

#include "../core/bits.hpp"
#include "../core/environment.hpp"
#include "../core/format.hpp"
#include "../core/names.hpp"
#include "../core/observer.hpp"
#include "../core/operations.hpp"
#include "../core/unpack.hpp"
#include "names.hpp"

namespace bitexact {

using exact_rational = boost::multiprecision::cpp_rational;

// ---------------------------------------------------------------------------
// Exact values and the text a human reads for them.

// The exact value of a decoded finite operand; nullopt for Inf and NaN.
inline std::optional<exact_rational> exact_value_of(const unpacked& u) {
  if (u.kind == value_class::zero) return exact_rational{0};
  if (!is_finite_nonzero(u.kind)) return std::nullopt;
  boost::multiprecision::cpp_int magnitude = u.significand;
  exact_rational x;
  if (u.exponent >= 0) x = exact_rational{magnitude << u.exponent};
  else x = exact_rational{magnitude, boost::multiprecision::cpp_int{1} << -u.exponent};
  return u.sign ? exact_rational{-x} : x;
}

inline std::optional<exact_rational> exact_value_of(format f, std::uint32_t bits) {
  return exact_value_of(decode(f, bits));
}

// The decimal expansion of x. Every value with a power-of-two denominator
// (every sum, product and conversion here) has a finite one, written in full
// when it has at most max_fraction_digits digits; otherwise the expansion is
// cut there and "..." follows, so a reader never mistakes it for exact.
inline std::string to_decimal(const exact_rational& x, int max_fraction_digits = 400) {
  using boost::multiprecision::cpp_int;
  cpp_int numerator = boost::multiprecision::numerator(x);
  const cpp_int denominator = boost::multiprecision::denominator(x);
  std::string out;
  if (numerator < 0) {
    out += '-';
    numerator = -numerator;
  }
  const cpp_int whole = numerator / denominator;
  cpp_int remainder = numerator % denominator;
  out += whole.str();
  if (remainder == 0) return out;
  out += '.';
  for (int digit = 0; digit < max_fraction_digits && remainder != 0; ++digit) {
    remainder *= 10;
    out += static_cast<char>('0' + static_cast<int>(remainder / denominator));
    remainder %= denominator;
  }
  if (remainder != 0) out += "...";
  return out;
}

inline std::string to_fraction(const exact_rational& x) {
  const auto numerator = boost::multiprecision::numerator(x);
  const auto denominator = boost::multiprecision::denominator(x);
  if (denominator == 1) return numerator.str();
  return numerator.str() + "/" + denominator.str();
}

// significand * 2^exponent written in binary as a human writes it against
// the power 2^reference: "10.0101101" for 2.3515625 against 2^0. At least
// min_fraction_digits digits follow the point; more when the value needs them.
inline std::string binary_with_point(uint128 significand, int exponent, int reference, int min_fraction_digits) {
  if (significand == 0) return "0";
  const int lowest_set = exponent + std::countr_zero(static_cast<std::uint64_t>(significand)) +
                         (static_cast<std::uint64_t>(significand) == 0
                              ? std::countr_zero(static_cast<std::uint64_t>(significand >> 64))
                              : 0);
  const int fraction_digits = std::max(min_fraction_digits, reference - lowest_set);
  const int top = exponent + msb_index(significand);  // exponent of the leading 1
  std::string out;
  // Digits from max(top, reference) down to reference - fraction_digits.
  for (int place = std::max(top, reference); place >= reference - fraction_digits; --place) {
    const int position = place - exponent;
    out += position >= 0 && position < 128 && ((significand >> position) & 1) ? '1' : '0';
    if (place == reference && fraction_digits > 0) out += '.';
  }
  return out;
}

// ---------------------------------------------------------------------------
// The record.

struct operand_record {
  int index = 0;
  format fmt{};
  std::uint32_t bits = 0;
  unpacked decoded{};  // as the operation read it (denormals-are-zero applied)

  int biased_exponent() const { return static_cast<int>((bits >> fmt.fraction_bits) & bit_mask(fmt.exponent_bits)); }
  // The exponent of the leading significand bit as written 1.xxx * 2^e
  // (subnormals: 0.xxx * 2^emin).
  int unbiased_exponent() const { return biased_exponent() == 0 ? fmt.min_exponent() : biased_exponent() - fmt.bias(); }
  std::uint32_t fraction() const { return bits & bit_mask(fmt.fraction_bits); }
  // "1.00110100000111000101110": hidden bit, point, fraction field.
  std::string significand_binary() const {
    const bool hidden = decoded.kind == value_class::normal;
    return std::string(hidden ? "1." : "0.") + binary_digits(fraction(), fmt.fraction_bits);
  }
};

// A flag the operation raised, and why, in a sentence.
struct flag_record {
  std::uint8_t flag = 0;
  std::string why;
};

// One term of a fused multi-term step (a tensor-core product, or the addend
// C), as the unit aligned it: the exact value, the part kept in the window
// (a multiple of 2^lsb_exponent) and the part cut away toward zero.
struct fused_term_record {
  fused_term_event event;
  exact_rational value;         // (-1)^sign * significand * 2^exponent
  exact_rational kept_value;    // event.kept * 2^lsb_exponent
  exact_rational truncated_value;  // value - kept_value, the amount the truncation lost
  std::string truncated_bits;   // the cut bits below 2^lsb_exponent, "" when none ("..." when cut short)
};

// A fused step: the window, every term, the exact sum of the kept terms.
struct fused_step_record {
  int max_exponent = 0;        // e_max
  int lsb_exponent = 0;        // e_max - kept_fraction_bits
  int kept_fraction_bits = 0;
  std::int64_t sum = 0;        // in units of 2^lsb_exponent
  std::vector<fused_term_record> terms;  // products in k order, then C (index -1)
  exact_rational exact_sum;    // of the terms before truncation
  exact_rational kept_sum;     // sum * 2^lsb_exponent, what the unit rounds
};

struct trace {
  operation op = operation::add;
  format result_format{};
  environment env{};
  std::vector<operand_record> operands;

  // The events, as reported; absent when the operation had no such step
  // (a NaN operand, an exact zero, a multiplication needs no alignment).
  std::optional<alignment_event> alignment;
  std::optional<exact_event> exact;
  std::optional<normalization_event> normalization;
  std::optional<rounding_event> rounding;
  std::vector<special_reason> specials;

  std::uint32_t result_bits = 0;
  flags raised{};

  // --- Derived for readers ------------------------------------------------
  // The exact significand sum/product/quotient before rounding, in binary,
  // with the point placed against 2^exact_reference_exponent the way a human
  // lines it up with the operands: "-10.01011010000111000101110" (x 2^1).
  // "..." follows when more nonzero bits lie below (a quotient, a root).
  std::string exact_binary;
  int exact_reference_exponent = 0;
  // Leading-bit movement against that reference: +1 carry-out (shift right,
  // exponent + 1), negative cancellation (shift left by that count).
  int normalization_shift = 0;

  // The rounding step (present when rounding is): the kept significand as
  // "1.0010110" and the discarded bits split into guard, round and the rest.
  std::string kept_binary;
  std::string rounded_binary;    // after the increment, renormalised
  std::string sticky_bits;       // the bits after guard and round ("..." when beyond what is shown)
  std::string decision;          // "round up" / "keep (truncate)"
  std::string decision_reason;   // in words, under the active mode

  std::vector<std::string> special_notes;  // why a special case decided the result
  std::vector<flag_record> flag_reasons;

  // Exact arithmetic. exact_value is the real result of the operation on the
  // operands as read; for sqrt it is a 256-bit approximation
  // (exact_value_is_rounded), since a root has no finite binary expansion.
  std::optional<exact_rational> exact_value;
  bool exact_value_is_rounded = false;
  std::optional<exact_rational> result_value;  // the packed result, when finite
  std::optional<exact_rational> error;         // result_value - exact_value

  // A tensor-core step (fused_multiply_add_step): present instead of operands.
  std::optional<fused_step_record> fused;

  std::uint32_t operand_bits(int index) const { return operands.at(static_cast<std::size_t>(index)).bits; }
};

// ---------------------------------------------------------------------------
// Words for the decisions.

inline std::string_view describe(rounding_mode mode) { return description_of(mode); }

inline std::string describe(const rounding_event& r, std::uint32_t random_bits) {
  const std::string_view toward_magnitude = r.sign ? "more negative" : "more positive";
  switch (r.reason) {
    case rounding_reason::exact: return "nothing was discarded: the result is exact";
    case rounding_reason::below_half:
      return "the guard bit is 0, so less than half an ulp was discarded: keep the truncated significand";
    case rounding_reason::above_half:
      return std::string("the guard bit is 1 and a round or sticky bit after it is set, so more than half an ulp "
                         "was discarded: add one ulp to the magnitude (the result gets ") +
             std::string(toward_magnitude) + ")";
    case rounding_reason::tie_to_even:
      return "exactly half an ulp was discarded (guard 1, round 0, sticky 0) and the last kept bit is odd: "
             "round up to make it even";
    case rounding_reason::tie_stays_even:
      return "exactly half an ulp was discarded (guard 1, round 0, sticky 0) and the last kept bit is already "
             "even: keep it";
    case rounding_reason::tie_away:
      return "exactly half an ulp was discarded: ties go away from zero, so add one ulp to the magnitude";
    case rounding_reason::toward_zero: return "toward zero: the discarded bits are dropped";
    case rounding_reason::directed_up:
      return std::string("the discarded bits are nonzero and the mode rounds away from zero for a ") +
             (r.sign ? "negative" : "positive") + " value: add one ulp to the magnitude";
    case rounding_reason::directed_truncate:
      return std::string("the mode rounds toward zero for a ") + (r.sign ? "negative" : "positive") +
             " value: the discarded bits are dropped";
    case rounding_reason::odd_bit_set:
      return "something was discarded and the last kept bit is 0: set it to 1 (round to odd)";
    case rounding_reason::odd_already:
      return "something was discarded and the last kept bit is already 1: keep it (round to odd)";
    case rounding_reason::stochastic_up:
    case rounding_reason::stochastic_down: {
      // The threshold U = random_bits / 2^32, compared with D, the discarded part in ulps.
      std::string threshold = to_decimal(exact_rational{boost::multiprecision::cpp_int{random_bits},
                                                        boost::multiprecision::cpp_int{1} << 32});
      return r.reason == rounding_reason::stochastic_up
                 ? "the discarded fraction of an ulp exceeds the random threshold " + threshold +
                       ": add one ulp to the magnitude"
                 : "the discarded fraction of an ulp does not exceed the random threshold " + threshold +
                       ": keep the truncated significand";
    }
  }
  return "?";
}

inline std::string describe(special_reason reason, operation op) {
  switch (reason) {
    case special_reason::nan_operand: return "a NaN operand: the result is a NaN, chosen by the NaN policy";
    case special_reason::invalid_operation:
      switch (op) {
        case operation::add:
        case operation::sub: return "infinities of opposite sign cancel: the result is undefined (NaN)";
        case operation::mul: return "zero times infinity is undefined (NaN)";
        case operation::fma: return "zero times infinity, or infinities cancelling, is undefined (NaN)";
        case operation::div: return "0/0 and inf/inf are undefined (NaN)";
        case operation::sqrt: return "the square root of a negative number is undefined (NaN)";
        default: return "the format cannot hold the result (NaN)";
      }
    case special_reason::infinity_operand: return "an infinite operand decides the result exactly";
    case special_reason::division_by_zero: return "a finite nonzero number divided by zero is an exact infinity";
    case special_reason::zero_result: return "the exact result is zero; its sign follows IEEE 754's rules";
    case special_reason::overflow: return "the rounded magnitude lies beyond the largest finite value";
    case special_reason::flushed_to_zero: return "flush-to-zero replaced the tiny result by a signed zero";
    case special_reason::out_of_range_integer: return "the value is NaN or out of the integer range";
  }
  return "?";
}

namespace detail {

inline bool has_special(const trace& t, special_reason r) {
  for (const auto s : t.specials)
    if (s == r) return true;
  return false;
}

inline int leading_exponent(const unpacked& u) { return u.exponent + msb_index(std::uint64_t{u.significand}); }

// The power of two the exact result is written against, and the fraction
// digits a human would write: the operands' own layout carried through.
inline std::pair<int, int> exact_layout(const trace& t) {
  const auto& ops = t.operands;
  const auto finite = [&](std::size_t i) { return i < ops.size() && is_finite_nonzero(ops[i].decoded.kind); };
  const auto lead = [&](std::size_t i) { return leading_exponent(ops[i].decoded); };
  const auto fraction_bits = [&](std::size_t i) { return ops[i].fmt.fraction_bits; };
  switch (t.op) {
    case operation::add:
    case operation::sub:
      if (finite(0) && finite(1)) return {std::max(lead(0), lead(1)), std::max(fraction_bits(0), fraction_bits(1))};
      break;
    case operation::mul:
      if (finite(0) && finite(1)) return {lead(0) + lead(1), fraction_bits(0) + fraction_bits(1)};
      break;
    case operation::fma:
      if (finite(0) && finite(1)) {
        const int product_lead = lead(0) + lead(1);
        const int product_fraction = fraction_bits(0) + fraction_bits(1);
        if (finite(2)) return {std::max(product_lead, lead(2)), std::max(product_fraction, fraction_bits(2))};
        return {product_lead, product_fraction};
      }
      break;
    case operation::div:
      if (finite(0) && finite(1)) return {lead(0) - lead(1), 0};
      break;
    case operation::convert:
      if (finite(0)) return {lead(0), fraction_bits(0)};
      break;
    default: break;
  }
  // Otherwise: against the result's own leading bit.
  const int top = t.exact->exponent + msb_index(t.exact->significand);
  return {top, 0};
}

inline std::optional<exact_rational> exact_operation_value(const trace& t, bool& rounded) {
  using boost::multiprecision::cpp_int;
  std::vector<exact_rational> x;
  for (const auto& operand : t.operands) {
    auto v = exact_value_of(operand.decoded);
    if (!v) return std::nullopt;
    x.push_back(*v);
  }
  const auto need = [&](std::size_t n) { return x.size() >= n; };
  switch (t.op) {
    case operation::add: if (need(2)) return x[0] + x[1]; break;
    case operation::sub: if (need(2)) return x[0] - x[1]; break;
    case operation::mul: if (need(2)) return x[0] * x[1]; break;
    case operation::fma: if (need(3)) return x[0] * x[1] + x[2]; break;
    case operation::div:
      if (need(2) && x[1] != 0) return exact_rational{x[0] / x[1]};
      break;
    case operation::convert: if (need(1)) return x[0]; break;
    case operation::from_integer: {
      if (!t.exact) return exact_rational{0};
      cpp_int magnitude = static_cast<std::uint64_t>(t.exact->significand);
      return exact_rational{t.exact->sign ? cpp_int{-magnitude} : magnitude};
    }
    case operation::sqrt: {
      if (!need(1) || x[0] < 0) break;
      // A root is irrational in general: a 256-bit value, said to be rounded.
      using wide_float = boost::multiprecision::number<
          boost::multiprecision::cpp_bin_float<256, boost::multiprecision::digit_base_2>>;
      const unpacked& u = t.operands[0].decoded;
      if (u.kind == value_class::zero) return exact_rational{0};
      const wide_float root = boost::multiprecision::sqrt(
          boost::multiprecision::ldexp(wide_float{u.significand}, u.exponent));
      int root_exponent = 0;
      const wide_float mantissa = boost::multiprecision::frexp(root, &root_exponent);
      const cpp_int digits = static_cast<cpp_int>(boost::multiprecision::ldexp(mantissa, 256));
      const int scale = root_exponent - 256;
      const exact_rational value = scale >= 0 ? exact_rational{cpp_int{digits << scale}}
                                              : exact_rational{digits, cpp_int{1} << -scale};
      rounded = value * value != x[0];
      return value;
    }
    default: break;
  }
  return std::nullopt;
}

inline std::string flag_reason(const trace& t, std::uint8_t flag) {
  const std::string_view target = name_of(t.result_format);
  switch (flag) {
    case flags::inexact:
      if (has_special(t, special_reason::overflow)) return "an overflow always loses the exact value";
      if (has_special(t, special_reason::flushed_to_zero)) return "the tiny result was flushed to zero";
      return std::string("the exact result does not fit in ") + std::string(target) +
             ": the discarded bits (guard, round, sticky) are not all zero";
    case flags::underflow:
      if (has_special(t, special_reason::flushed_to_zero))
        return "the result is tiny and flush-to-zero replaced it by zero";
      return std::string("the result is tiny (below the smallest normal ") +
             (t.env.tiny == tininess::before_rounding ? "before rounding" : "after rounding to unbounded exponent range") +
             ") and inexact";
    case flags::overflow:
      return std::string("the rounded magnitude exceeds the largest finite ") + std::string(target) + " value";
    case flags::divide_by_zero: return "a finite nonzero dividend was divided by zero";
    case flags::invalid:
      for (const auto& operand : t.operands)
        if (operand.decoded.kind == value_class::signaling_nan) return "an operand is a signaling NaN";
      if (has_special(t, special_reason::invalid_operation)) return describe(special_reason::invalid_operation, t.op);
      if (has_special(t, special_reason::infinity_operand))
        return std::string(target) + " has no infinity: an infinite result becomes NaN";
      if (t.op == operation::fma) return "zero times infinity (raised even though an operand is a quiet NaN)";
      return "an invalid operation";
  }
  return "?";
}

inline void complete(trace& t) {
  if (t.exact && t.exact->significand != 0) {
    const auto [reference, fraction_digits] = exact_layout(t);
    t.exact_reference_exponent = reference;
    t.exact_binary = std::string(t.exact->sign ? "-" : "") +
                     binary_with_point(t.exact->significand, t.exact->exponent, reference, fraction_digits) +
                     (t.exact->inexact_below ? "..." : "");
    t.normalization_shift =
        t.normalization ? t.normalization->leading_bit_shift
                        : t.exact->exponent + msb_index(t.exact->significand) - reference;
  }
  if (t.rounding) {
    const rounding_event& r = *t.rounding;
    const int precision = r.target.precision();
    const auto point_after_first = [&](std::uint64_t kept) {
      std::string digits = binary_digits(kept, precision);
      return digits.substr(0, 1) + "." + digits.substr(1);
    };
    t.kept_binary = point_after_first(r.kept);
    std::uint64_t rounded = r.kept + r.increment;
    if ((rounded >> precision) != 0) rounded >>= 1;  // carried into a new binade: 10.000 is 1.000 one place up
    t.rounded_binary = point_after_first(rounded);
    if (t.exact) {
      // The bits below guard and round, read from the exact significand.
      const int below_round = r.lsb_exponent - 2 - t.exact->exponent;
      constexpr int shown = 160;  // a subnormal result can discard hundreds of bits; show the top ones
      // Trailing zeros of a wide exact register say nothing: stop at the lowest set bit.
      const uint128 sig = t.exact->significand;
      const int lowest_set = static_cast<std::uint64_t>(sig) != 0
                                 ? std::countr_zero(static_cast<std::uint64_t>(sig))
                                 : 64 + std::countr_zero(static_cast<std::uint64_t>(sig >> 64));
      if (below_round > lowest_set) {
        const int count = std::min(below_round - lowest_set, shown);
        const uint128 bits = below_round - count >= 128 ? 0 : sig >> (below_round - count);
        t.sticky_bits = binary_digits(bits, count);
        if (below_round - lowest_set > shown) t.sticky_bits += "...";
      } else if (below_round > 0) {
        t.sticky_bits.push_back('0');
      }
      if (t.exact->inexact_below) t.sticky_bits += "...1";
    }
    t.decision = r.increment ? (r.mode == rounding_mode::to_odd ? "set the last bit" : "round up (magnitude + 1 ulp)")
                             : (r.reason == rounding_reason::exact ? "exact" : "keep (truncate)");
    t.decision_reason = describe(r, t.env.random_bits);
  }
  for (const auto s : t.specials) t.special_notes.push_back(describe(s, t.op));
  for (const auto flag : all_flags)
    if (t.raised.any(flag)) t.flag_reasons.push_back({flag, flag_reason(t, flag)});

  t.exact_value = exact_operation_value(t, t.exact_value_is_rounded);
  t.result_value = exact_value_of(t.result_format, t.result_bits);
  if (t.exact_value && t.result_value) t.error = *t.result_value - *t.exact_value;
}

}  // namespace detail

namespace detail {

inline exact_rational power_of_two(int exponent) {
  using boost::multiprecision::cpp_int;
  return exponent >= 0 ? exact_rational{cpp_int{1} << exponent} : exact_rational{cpp_int{1}, cpp_int{1} << -exponent};
}

inline exact_rational fused_term_value(bool sign, std::uint64_t significand, int exponent) {
  const exact_rational magnitude = exact_rational{boost::multiprecision::cpp_int{significand}} * power_of_two(exponent);
  return sign ? exact_rational{-magnitude} : magnitude;
}

// A fused step reports no operation or result events of its own: its trace is
// finished from the term and sum events and the step's rounded result.
inline void complete_fused(trace& t) {
  fused_step_record& f = *t.fused;
  f.exact_sum = 0;
  for (auto& term : f.terms) {
    const fused_term_event& e = term.event;
    term.value = fused_term_value(e.sign, e.significand, e.exponent);
    term.kept_value = exact_rational{boost::multiprecision::cpp_int{e.kept}} * power_of_two(f.lsb_exponent);
    term.truncated_value = term.value - term.kept_value;
    term.truncated_bits.clear();
    const int below = f.lsb_exponent - e.exponent;  // significand bits that lie below the window
    if (e.truncated && below > 0) {
      constexpr int shown = 64;
      const int count = std::min(below, shown);
      const std::uint64_t cut = below >= 64 ? 0 : e.significand & ((std::uint64_t{1} << below) - 1);
      term.truncated_bits = below > shown ? binary_digits(e.significand >> std::min(below - shown, 63), shown) + "..."
                                          : binary_digits(cut, count);
    }
    f.exact_sum += term.value;
  }
  f.kept_sum = exact_rational{boost::multiprecision::cpp_int{f.sum}} * power_of_two(f.lsb_exponent);
  // The rounding's target is the step's own (E8M13 for an fp8 unit, which
  // then stores it in the accumulator's format exactly); the result keeps
  // the accumulator's format.
  if (t.rounding) t.env.rounding = t.rounding->mode;
  t.env.nans = nan_policy::canonical;
}

}  // namespace detail

// ---------------------------------------------------------------------------
// The observer that builds a trace.

class trace_recorder {
 public:
  void on(const operation_event& e) {
    record_ = trace{};
    completed_ = false;
    record_.op = e.op;
    record_.result_format = e.result_format;
    record_.env = e.env;
  }
  void on(const operand_event& e) { record_.operands.push_back({e.index, e.fmt, e.bits, e.decoded}); }
  void on(const alignment_event& e) { record_.alignment = e; }
  void on(const exact_event& e) { record_.exact = e; }
  void on(const normalization_event& e) { record_.normalization = e; }
  void on(const rounding_event& e) { record_.rounding = e; }
  void on(const special_event& e) { record_.specials.push_back(e.reason); }
  void on(const result_event& e) {
    record_.result_format = e.fmt;
    record_.result_bits = e.bits;
    record_.raised = e.raised;
    detail::complete(record_);
    completed_ = true;
  }
  // A fused step (mma.hpp): terms in order, then the window and the sum.
  void on(const fused_term_event& e) {
    if (!record_.fused) record_.fused.emplace();
    record_.fused->terms.push_back({e, {}, {}, {}, {}});
  }
  void on(const fused_sum_event& e) {
    if (!record_.fused) record_.fused.emplace();
    record_.fused->max_exponent = e.max_exponent;
    record_.fused->lsb_exponent = e.lsb_exponent;
    record_.fused->kept_fraction_bits = e.max_exponent - e.lsb_exponent;
    record_.fused->sum = e.sum;
  }
  // Operations without a result event (a fused step) are finished with the
  // value they returned; traced() does this.
  template <format F>
  void finish(const rounded<F>& result) {
    if (completed_) return;
    // No result event and no terms: a fused step that a special value decided.
    if (!record_.fused) record_.fused.emplace();
    record_.result_format = F;
    record_.result_bits = result.result.bits;
    record_.raised = result.raised;
    detail::complete_fused(record_);
    detail::complete(record_);
    // The scalar operations' words for special cases do not fit a fused step.
    for (std::size_t i = 0; i < record_.specials.size(); ++i)
      if (record_.specials[i] == special_reason::invalid_operation)
        record_.special_notes[i] =
            "a NaN input, zero times infinity, or infinities of opposite sign: the unit returns its canonical NaN";
      else if (record_.specials[i] == special_reason::infinity_operand)
        record_.special_notes[i] = "an infinite product or C decides the result: an infinity of its sign";
    for (auto& reason : record_.flag_reasons)
      if (reason.flag == flags::invalid)
        reason.why = "a NaN input, zero times infinity, or infinities of opposite sign in the fused step";
    record_.exact_value = record_.fused->exact_sum;
    if (record_.result_value) record_.error = *record_.result_value - record_.fused->exact_sum;
  }

  const trace& record() const { return record_; }
  trace take() { return std::move(record_); }

 private:
  trace record_;
  bool completed_ = false;  // a result event finished the record
};

static_assert(observer<trace_recorder>);

template <class Result>
struct traced_result {
  Result result;  // what the operation returned (rounded<F>)
  trace record;
};

// Runs operation(recorder) and returns what it returned together with its trace:
//   auto [sum, record] = traced([&](auto& recorder) { return add(a, b, env, recorder); });
template <class Operation>
auto traced(Operation&& operation) {
  trace_recorder recorder;
  auto result = std::forward<Operation>(operation)(recorder);
  if constexpr (requires { recorder.finish(result); }) recorder.finish(result);
  return traced_result<decltype(result)>{result, recorder.take()};
}

}  // namespace bitexact
