// Comparing a buffer of results produced elsewhere (a GPU kernel, a SIMD
// routine) with the model, element by element. No test framework needed:
// the report says what a failing test should print. doctest.hpp wraps it.
//
//   auto report = check_against_model<bf16>(
//       std::span<const std::uint16_t>(gpu_out),                       // or span<const bfloat16>
//       [&](std::size_t i) { return add<bf16>(x[i], y[i]).result; },  // the model's value
//       [&](std::size_t i) {                                          // its trace, only for the first mismatch
//         return traced([&](auto& r) { return add<bf16>(x[i], y[i], {}, r); }).record;
//       });
//   if (!report.ok()) std::puts(report.message().c_str());
#pragma once

#include <algorithm>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "../core/format.hpp"
#include "../trace/render.hpp"
#include "../trace/trace.hpp"

namespace bitexact {

struct check_options {
  // A kernel may return any NaN where the model returns another (payloads
  // differ between hardware); set this to count NaN against NaN as a match.
  bool any_nan_matches_any_nan = false;
};

struct mismatch {
  std::size_t index = 0;
  format fmt{};
  std::uint32_t got = 0;       // the buffer's element, all its bits (tf32: set bits above bit 18 included)
  std::uint32_t expected = 0;  // the model's bits
  std::string side_by_side;    // both patterns decoded, field by field
  std::string model_trace;     // the model's trace of this element, as text (empty without an explainer)
};

// A count and its noun, singular for 1: "1 element", "3 mismatches".
inline std::string counted(std::uint64_t count, std::string_view singular, std::string_view plural) {
  return fmt::format("{} {}", count, count == 1 ? singular : plural);
}

struct check_report {
  std::size_t compared = 0;
  std::size_t mismatches = 0;
  std::vector<std::size_t> mismatch_indices;  // every mismatching index, ascending (mismatches of them)
  std::optional<mismatch> first_mismatch;

  bool ok() const { return mismatches == 0; }
  std::string message() const {
    if (ok()) return counted(compared, "element", "elements") + " compared, all bit-identical to the model";
    const mismatch& m = *first_mismatch;
    const std::string which =
        compared == 1 ? std::string("the one element differs") : fmt::format("{} of {} elements differ", mismatches, compared);
    std::string out = fmt::format("{} from the model; first at index {}\nindices:", which, m.index);
    constexpr std::size_t indices_shown = 20;
    for (std::size_t k = 0; k < std::min(mismatch_indices.size(), indices_shown); ++k)
      out += fmt::format(" {}", mismatch_indices[k]);
    if (mismatches > indices_shown)
      out += fmt::format(" ... ({} more in mismatch_indices)", mismatches - indices_shown);
    out += "\n" + m.side_by_side;
    if (!m.model_trace.empty()) out += "\nmodel trace of element " + std::to_string(m.index) + ":\n" + m.model_trace;
    return out;
  }
};

// How far the buffer's value lies from the model's: the number of steps
// between them along f's ordered values (finite values, then infinity), +0
// and -0 counting as one point; positive when got is the larger value. None
// for a NaN or for bits set above f's width.
inline std::optional<long long> ulp_distance(format f, std::uint32_t got, std::uint32_t expected) {
  const std::uint32_t magnitude_mask = bit_mask(f.width() - 1);
  const auto ordinal = [&](std::uint32_t bits) -> std::optional<long long> {
    if ((bits & ~bit_mask(f.width())) != 0 || is_nan(decode(f, bits).kind)) return std::nullopt;
    const auto magnitude = static_cast<long long>(bits & magnitude_mask);
    return bits > magnitude_mask ? -magnitude : magnitude;
  };
  const auto g = ordinal(got), e = ordinal(expected);
  if (!g || !e) return std::nullopt;
  return *g - *e;
}

// Two bit patterns of one format, decoded in two columns: got, and what it
// is checked against (`reference`: "model", or "expected" for bits given by
// hand). Bits set above the format's width (a tf32 in 32-bit storage) are
// shown apart; the fields decode the format's own bits.
inline std::string side_by_side(format f, std::uint32_t got, std::uint32_t expected,
                                std::string_view reference = "model") {
  const auto row = [](std::string_view label, const std::string& left, const std::string& right) {
    return fmt::format("  {:<10} {:<34} {}{}\n", label, left, right, left == right ? "" : "   <- differs");
  };
  const std::uint32_t own_bits = bit_mask(f.width());
  const auto sign = [&](std::uint32_t bits) { return std::to_string((bits >> (f.width() - 1)) & 1); };
  // The exponent a field stands for: 0 is zero or a subnormal (whose exponent is the smallest normal's), and
  // an IEEE format's all-ones field is infinity or NaN.
  const auto exponent = [&](std::uint32_t bits) {
    const std::uint32_t field = (bits >> f.fraction_bits) & bit_mask(f.exponent_bits);
    const bool zero_fraction = (bits & bit_mask(f.fraction_bits)) == 0;
    const std::string meaning =
        field == 0 ? (zero_fraction ? std::string("zero") : fmt::format("{}, subnormal", f.min_exponent()))
        : f.has_infinity() && static_cast<int>(field) == f.max_biased_exponent()
            ? std::string(zero_fraction ? "infinity" : "NaN")
            : std::to_string(static_cast<int>(field) - f.bias());
    return fmt::format("{} ({})", binary_digits(field, f.exponent_bits), meaning);
  };
  const auto fraction = [&](std::uint32_t bits) {
    return binary_digits(bits & bit_mask(f.fraction_bits), f.fraction_bits);
  };
  const auto hex = [&](std::uint32_t bits) { return fmt::format("0x{:0{}X}", bits, (f.width() + 3) / 4); };
  const auto decimal = [&](std::uint32_t bits) { return fmt::format("{}", to_double(f, bits & own_bits)); };
  const auto kind = [&](std::uint32_t bits) { return std::string(name_of(decode(f, bits & own_bits).kind)); };
  const auto stray = [&](std::uint32_t bits) {
    return (bits & ~own_bits) == 0 ? std::string("none") : fmt::format("0x{:X}", bits & ~own_bits);
  };
  std::string out = fmt::format("  {:<10} {:<34} {}\n", "", "got", reference);
  out += row("bits", hex(got), hex(expected));
  if (((got | expected) & ~own_bits) != 0)
    out += row(fmt::format("above {}", f.width() - 1), stray(got), stray(expected));  // not part of the value
  out += row("sign", sign(got), sign(expected));
  out += row("exponent", exponent(got), exponent(expected));
  out += row("fraction", fraction(got), fraction(expected));
  out += row("class", kind(got), kind(expected));
  out += row("value", decimal(got), decimal(expected));
  if (const auto distance = ulp_distance(f, got, expected))
    out += fmt::format("  {:<10} {:+} ulp (got {} the {} value)\n", "distance", *distance,
                       *distance > 0 ? "above" : *distance < 0 ? "below" : "equals",
                       reference == "model" ? std::string("model's") : std::string(reference));
  return out;
}

// The element types a buffer of format F may hold: value<F>, an unsigned
// integer exactly as wide as F's storage, or the host's own type for F (float
// for fp32, compared by its bits). A wider integer would carry bits that no
// element of F has; comparing them (or masking them off) would make a
// checking helper pass a wrong buffer or fail a right one.
template <format F, class Element>
concept model_buffer_element =
    std::is_same_v<Element, value<F>> || (F == fp32 && std::is_same_v<Element, float>) ||
    (std::is_unsigned_v<Element> && !std::is_same_v<Element, bool> &&
     sizeof(Element) == sizeof(typename value<F>::storage));

namespace check_detail {

// All the element's bits: a tf32 in uint32_t storage with a bit set above
// bit 18 differs from every tf32 the model returns.
template <format F, class Element>
std::uint32_t bits_of(const Element& x) {
  if constexpr (std::is_same_v<Element, value<F>>) return x.bits;
  else if constexpr (std::is_same_v<Element, float>) return std::bit_cast<std::uint32_t>(x);
  else return static_cast<std::uint32_t>(x);
}

struct no_explainer {};

}  // namespace check_detail

// Compare results[i] with model(i) for every i. model returns value<F> (or
// rounded<F>); explain(i), if given, returns the model's trace of element i
// and is called once, for the first mismatch.
template <format F, class Element, class Model, class Explain = check_detail::no_explainer>
check_report check_against_model(std::span<const Element> results, Model&& model, Explain&& explain = {},
                                 check_options options = {}) {
  // One message for each way a buffer can be wrong: a signed integer of F's width, then any other element.
  constexpr bool signed_of_width = std::is_integral_v<Element> && std::is_signed_v<Element> &&
                                   sizeof(Element) == sizeof(typename value<F>::storage);
  static_assert(!signed_of_width,
                "check_against_model<F>: the buffer holds signed integers, but bit patterns are unsigned (a signed "
                "element would compare its sign-extended value). Pass the same memory as the unsigned integer of "
                "that width: std::uint32_t for fp32/tf32 (int32_t's bits), std::uint16_t for bf16/fp16, "
                "std::uint8_t for e4m3/e5m2, e.g. std::span<const std::uint32_t>(reinterpret_cast<const "
                "std::uint32_t*>(buffer.data()), buffer.size()).");
  static_assert(model_buffer_element<F, Element> || signed_of_width,
                "check_against_model<F>: the buffer must hold value<F>, an unsigned integer of F's storage width "
                "(uint8_t for e4m3/e5m2, uint16_t for bf16/fp16, uint32_t for fp32/tf32) or float for fp32; a "
                "wider element would hide bits that are not F's. Pass bit patterns of F's width (for bf16 from a "
                "float buffer: round it to bf16 as the kernel does, then its 16 bits), or the format whose width "
                "the buffer has.");
  check_report report;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const std::uint32_t got = check_detail::bits_of<F>(results[i]);
    const value<F> expected_value = model(i);
    const std::uint32_t expected = expected_value.bits;
    ++report.compared;
    if (got == expected) continue;
    if (options.any_nan_matches_any_nan && got <= value<F>::mask() && value<F>::from_bits(got).is_nan() &&
        expected_value.is_nan())
      continue;
    report.mismatch_indices.push_back(i);
    if (report.mismatches++ == 0) {
      mismatch m{i, F, got, expected, side_by_side(F, got, expected), {}};
      if constexpr (!std::is_same_v<std::decay_t<Explain>, check_detail::no_explainer>)
        m.model_trace = render(explain(i), output_style::text);
      report.first_mismatch = std::move(m);
    }
  }
  return report;
}

// The same for a std::vector, array or any contiguous range.
template <format F, class Range, class Model, class Explain = check_detail::no_explainer>
  requires requires(const Range& r) { std::span(r); }
check_report check_against_model(const Range& results, Model&& model, Explain&& explain = {},
                                 check_options options = {}) {
  using element = std::remove_cv_t<typename decltype(std::span(results))::element_type>;
  return check_against_model<F>(std::span<const element>(std::data(results), std::size(results)),
                                std::forward<Model>(model), std::forward<Explain>(explain), options);
}

}  // namespace bitexact
