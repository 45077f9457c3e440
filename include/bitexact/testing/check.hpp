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

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>

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
  std::uint32_t got = 0;       // the buffer's bits
  std::uint32_t expected = 0;  // the model's bits
  std::string side_by_side;    // both patterns decoded, field by field
  std::string model_trace;     // the model's trace of this element, as text (empty without an explainer)
};

struct check_report {
  std::size_t compared = 0;
  std::size_t mismatches = 0;
  std::optional<mismatch> first_mismatch;

  bool ok() const { return mismatches == 0; }
  std::string message() const {
    if (ok()) return fmt::format("{} elements compared, all bit-identical to the model", compared);
    const mismatch& m = *first_mismatch;
    std::string out = fmt::format("{} of {} elements differ from the model; first at index {}\n{}", mismatches,
                                  compared, m.index, m.side_by_side);
    if (!m.model_trace.empty()) out += "\nmodel trace of element " + std::to_string(m.index) + ":\n" + m.model_trace;
    return out;
  }
};

// Two bit patterns of one format, decoded in two columns.
inline std::string side_by_side(format f, std::uint32_t got, std::uint32_t expected) {
  const auto row = [](std::string_view label, const std::string& left, const std::string& right) {
    return fmt::format("  {:<10} {:<34} {}{}\n", label, left, right, left == right ? "" : "   <- differs");
  };
  const auto sign = [&](std::uint32_t bits) { return std::to_string((bits >> (f.width() - 1)) & 1); };
  const auto exponent = [&](std::uint32_t bits) {
    const std::uint32_t field = (bits >> f.fraction_bits) & bit_mask(f.exponent_bits);
    return fmt::format("{} ({})", binary_digits(field, f.exponent_bits), static_cast<int>(field) - f.bias());
  };
  const auto fraction = [&](std::uint32_t bits) { return binary_digits(bits & bit_mask(f.fraction_bits), f.fraction_bits); };
  const auto hex = [&](std::uint32_t bits) { return fmt::format("0x{:0{}X}", bits, (f.width() + 3) / 4); };
  const auto decimal = [&](std::uint32_t bits) { return fmt::format("{}", to_double(f, bits)); };
  const auto kind = [&](std::uint32_t bits) { return std::string(name_of(decode(f, bits).kind)); };
  std::string out = fmt::format("  {:<10} {:<34} {}\n", "", "got", "model");
  out += row("bits", hex(got), hex(expected));
  out += row("sign", sign(got), sign(expected));
  out += row("exponent", exponent(got), exponent(expected));
  out += row("fraction", fraction(got), fraction(expected));
  out += row("class", kind(got), kind(expected));
  out += row("value", decimal(got), decimal(expected));
  // Distance in ulps along the ordered bit patterns, for finite values of one sign.
  const unpacked g = decode(f, got), e = decode(f, expected);
  if (!is_nan(g.kind) && !is_nan(e.kind) && g.sign == e.sign) {
    const auto magnitude = [&](std::uint32_t bits) { return static_cast<long long>(bits & (bit_mask(f.width()) >> 1)); };
    out += fmt::format("  {:<10} {} ulp\n", "distance", magnitude(got) - magnitude(expected));
  }
  return out;
}

namespace check_detail {

template <format F, class Element>
std::uint32_t bits_of(const Element& x) {
  if constexpr (std::is_same_v<Element, value<F>>) return x.bits;
  else {
    static_assert(std::is_unsigned_v<Element>, "pass a span of value<F> or of unsigned raw bit patterns");
    return static_cast<std::uint32_t>(x) & value<F>::mask();
  }
}

struct no_explainer {};

}  // namespace check_detail

// Compare results[i] with model(i) for every i. model returns value<F> (or
// rounded<F>); explain(i), if given, returns the model's trace of element i
// and is called once, for the first mismatch.
template <format F, class Element, class Model, class Explain = check_detail::no_explainer>
check_report check_against_model(std::span<const Element> results, Model&& model, Explain&& explain = {},
                                 check_options options = {}) {
  check_report report;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const std::uint32_t got = check_detail::bits_of<F>(results[i]);
    const value<F> expected_value = model(i);
    const std::uint32_t expected = expected_value.bits;
    ++report.compared;
    if (got == expected) continue;
    if (options.any_nan_matches_any_nan && value<F>::from_bits(got).is_nan() && expected_value.is_nan()) continue;
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
