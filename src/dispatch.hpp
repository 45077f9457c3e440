// From runtime format names to the compile-time formats the operations need.
#pragma once

#include <bitexact/trace/parse.hpp>

namespace bitexact::cli {

// fn(format_tag<A>{}, format_tag<B>{}, ...) for the named formats equal to
// the runtime ones, given in order. Only the named formats exist at run time.
template <class Fn>
decltype(auto) with_formats(Fn&& fn) {
  return fn();
}
template <class Fn, class... Rest>
decltype(auto) with_formats(Fn&& fn, format first, Rest... rest) {
  return visit_format(first, [&](auto first_tag) -> decltype(auto) {
    return with_formats([&](auto... rest_tags) -> decltype(auto) { return fn(first_tag, rest_tags...); }, rest...);
  });
}

}  // namespace bitexact::cli

namespace bitexact::cli {

// Operands of one format, or of two where one is fp32 (an fp32 accumulator
// and a narrow operand, as kernels mix them). Other mixes are refused before
// dispatch: allowing every pair would compile every operation 6^3 times.
inline bool supported_operand_pair(format a, format b) { return a == b || a == fp32 || b == fp32; }

template <class Fn>
decltype(auto) with_operand_pair(format a, format b, Fn&& fn) {
  if (a == b) return visit_format(a, [&](auto tag) -> decltype(auto) { return fn(tag, tag); });
  if (a == fp32) return visit_format(b, [&](auto tag) -> decltype(auto) { return fn(format_tag<fp32>{}, tag); });
  return visit_format(a, [&](auto tag) -> decltype(auto) { return fn(tag, format_tag<fp32>{}); });
}

}  // namespace bitexact::cli
