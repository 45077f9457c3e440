// From runtime formats to compile-time ones: the one place where a format
// named at run time (by the command, the Python binding, a kernel description)
// picks the instantiation of an operation, and the one rule for the formats a
// call may mix and round into.
//
//   bitexact::visit_format(f, [&](auto tag) {
//     auto x = bitexact::value<decltype(tag)::fmt>::from_bits(bits);
//     ...
//   });
#pragma once

#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>

#include "bits.hpp"
#include "format.hpp"
#include "names.hpp"

namespace bitexact {

// The compile-time format behind a runtime one, for visit_format's callback.
template <format F>
struct format_tag {
  static constexpr format fmt = F;
  using value_type = value<F>;
};

namespace detail {

// Row `Row` of format_spellings as a template argument (a namespace-scope
// constant: clang refuses a function's local one inside fn's lambdas).
template <std::size_t Row>
inline constexpr format named_format = format_spellings[Row].value;

template <std::size_t Row, class Fn>
constexpr decltype(auto) visit_format_from(format f, Fn&& fn, bool* known) {
  if constexpr (Row == format_spellings.size()) {
    // Not a named format: the first row's (fp32), and `known` says so.
    if (known) *known = f == named_format<0>;
    return fn(format_tag<named_format<0>>{});
  } else {
    if (f == named_format<Row>) return fn(format_tag<named_format<Row>>{});
    return visit_format_from<Row + 1>(f, fn, known);
  }
}

}  // namespace detail

// Call fn(format_tag<F>{}) for the named format F (a row of format_spellings)
// equal to f. Every branch must return the same type. For a format that is not
// a named one, fn gets fp32's tag and `known`, when given, is set false.
template <class Fn>
constexpr decltype(auto) visit_format(format f, Fn&& fn, bool* known = nullptr) {
  if (known) *known = true;
  return detail::visit_format_from<1>(f, fn, known);
}

// fn(format_tag<A>{}, format_tag<B>{}, ...) for the named formats equal to
// the runtime ones, given in order.
template <class Fn>
constexpr decltype(auto) with_formats(Fn&& fn) {
  return fn();
}
template <class Fn, class... Rest>
constexpr decltype(auto) with_formats(Fn&& fn, format first, Rest... rest) {
  return visit_format(first, [&](auto first_tag) -> decltype(auto) {
    return with_formats([&](auto... rest_tags) -> decltype(auto) { return fn(first_tag, rest_tags...); }, rest...);
  });
}

// The operand formats the command and the Python binding dispatch: one
// format, or two where one is fp32 (an fp32 accumulator and a narrow operand,
// as kernels mix them). Every pair would compile every operation 6^3 times.
constexpr bool supported_operand_pair(format a, format b) { return a == b || a == fp32 || b == fp32; }

// The format a call rounds into: the one the caller names, any named format,
// whether the operands share a format or mix fp32 with a narrow one; else the
// operands' own when they share one. A mix has no format of its own: unnamed,
// it has none, and the caller asks for one (--to, result_format=). `operands`
// holds at least one format: a braced list, or any range of formats.
template <class Formats = std::initializer_list<format>>
constexpr std::optional<format> result_format_of(const Formats& operands, std::optional<format> named) {
  BITEXACT_EXPECTS(std::begin(operands) != std::end(operands), "result_format_of: no operand formats");
  if (named) return named;
  const format first = *std::begin(operands);
  for (const format f : operands)
    if (f != first) return std::nullopt;
  return first;
}

// fn(format_tag<A>{}, format_tag<B>{}) for a supported pair; throws
// std::invalid_argument, saying what to do, for any other.
// Throws std::invalid_argument, saying what to do, unless a and b are a
// supported pair; a front end checks this before it asks for a result format,
// which cannot help.
inline void require_operand_pair(format a, format b) {
  if (!supported_operand_pair(a, b))
    throw std::invalid_argument("operands of " + std::string(name_of(a)) + " and " + std::string(name_of(b)) +
                                " cannot be mixed: a mix needs one of them in fp32 (an fp32 accumulator and a "
                                "narrow value); convert one operand first");
}

template <class Fn>
decltype(auto) with_operand_pair(format a, format b, Fn&& fn) {
  require_operand_pair(a, b);
  if (a == b) return visit_format(a, [&](auto tag) -> decltype(auto) { return fn(tag, tag); });
  if (a == fp32) return visit_format(b, [&](auto tag) -> decltype(auto) { return fn(format_tag<fp32>{}, tag); });
  return visit_format(a, [&](auto tag) -> decltype(auto) { return fn(tag, format_tag<fp32>{}); });
}

// fn(a_tag, b_tag, result_tag) for a supported operand pair and any result
// format (result_format_of's rule); throws as with_operand_pair does.
template <class Fn>
decltype(auto) with_operation_formats(format a, format b, format result, Fn&& fn) {
  return visit_format(result, [&](auto result_tag) -> decltype(auto) {
    return with_operand_pair(a, b, [&](auto a_tag, auto b_tag) -> decltype(auto) { return fn(a_tag, b_tag, result_tag); });
  });
}

}  // namespace bitexact
