// {fmt} formatters for bitexact's types, so values print as what they are:
//
//   fmt::format("{}", bfloat16{0xC097})          -> "bf16:0xC097 (-4.71875)"
//   fmt::format("{}", convert<bf16>(x))          -> "bf16:0xC097 (-4.71875) [inexact]"
//   fmt::format("{}", flags{flags::inexact | flags::underflow}) -> "underflow|inexact"
//   fmt::format("{}", rounding_mode::to_odd)     -> "to_odd"
//   fmt::format("{}", bf16)                      -> "bf16" (custom formats: "e5m3", "e4m3fn")
//
// Light: values and names only (names.hpp, no Boost). A trace record prints
// with the same "{}" once render.hpp, which formats it, is included.
// Every formatter accepts the string format specification (width, fill,
// alignment): fmt::format("{:>30}", x).
#pragma once

#include <string>
#include <string_view>

#include <fmt/format.h>

#include "../core/environment.hpp"
#include "../core/format.hpp"
#include "../core/operations.hpp"
#include "names.hpp"


template <bitexact::format F>
struct fmt::formatter<bitexact::value<F>> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(bitexact::value<F> x, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(bitexact::describe_value(F, x.bits), ctx);
  }
};

template <bitexact::format F>
struct fmt::formatter<bitexact::rounded<F>> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(const bitexact::rounded<F>& r, FormatContext& ctx) const {
    std::string text = bitexact::describe_value(F, r.result.bits);
    if (r.raised.bits) text += " [" + bitexact::describe_flags(r.raised) + "]";
    return fmt::formatter<std::string_view>::format(text, ctx);
  }
};

template <>
struct fmt::formatter<bitexact::flags> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(bitexact::flags raised, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(bitexact::describe_flags(raised), ctx);
  }
};

template <>
struct fmt::formatter<bitexact::rounding_mode> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(bitexact::rounding_mode mode, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(bitexact::name_of(mode), ctx);
  }
};

template <>
struct fmt::formatter<bitexact::format> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(bitexact::format f, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(bitexact::format_name(f), ctx);
  }
};

template <>
struct fmt::formatter<bitexact::value_class> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(bitexact::value_class c, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(bitexact::name_of(c), ctx);
  }
};

template <>
struct fmt::formatter<bitexact::operation> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(bitexact::operation op, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(bitexact::name_of(op), ctx);
  }
};
