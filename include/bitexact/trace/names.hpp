// The names and one-line descriptions of bitexact's values and flags, for
// people: "bf16:0xC097 (-4.71875)", "underflow|inexact" (the vocabulary's
// names, "tie_to_even", are core/names.hpp's).
// Light on purpose (fmt, no Boost): fmt.hpp, the command line and check.hpp
// print values through it without the trace machinery.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "../core/bits.hpp"
#include "../core/environment.hpp"
#include "../core/format.hpp"
#include "../core/names.hpp"
#include "../core/observer.hpp"
#include "../core/unpack.hpp"

namespace bitexact {

constexpr std::string_view name_of(value_class c) {
  switch (c) {
    case value_class::zero: return "zero";
    case value_class::subnormal: return "subnormal";
    case value_class::normal: return "normal";
    case value_class::infinity: return "infinity";
    case value_class::quiet_nan: return "quiet NaN";
    case value_class::signaling_nan: return "signaling NaN";
  }
  return "?";
}

// One flag bit's name, for the five IEEE flags.
constexpr std::string_view flag_name(std::uint8_t flag) {
  switch (flag) {
    case flags::inexact: return "inexact";
    case flags::underflow: return "underflow";
    case flags::overflow: return "overflow";
    case flags::divide_by_zero: return "divide_by_zero";
    case flags::invalid: return "invalid";
  }
  return "?";
}
inline constexpr std::uint8_t all_flags[] = {flags::invalid, flags::divide_by_zero, flags::overflow, flags::underflow,
                                             flags::inexact};

// A host double for display; exact for every format here (all fit in a double).
inline double to_double(format f, std::uint32_t bits) {
  const unpacked u = decode(f, bits);
  switch (u.kind) {
    case value_class::zero: return u.sign ? -0.0 : 0.0;
    case value_class::infinity: return u.sign ? -HUGE_VAL : HUGE_VAL;
    case value_class::quiet_nan:
    case value_class::signaling_nan: return u.sign ? -std::nan("") : std::nan("");
    default: break;
  }
  const double magnitude = std::ldexp(static_cast<double>(u.significand), u.exponent);
  return u.sign ? -magnitude : magnitude;
}

// The low `count` bits of x, most significant first (zeros beyond bit 127).
inline std::string binary_digits(uint128 x, int count) {
  std::string out;
  for (int position = count - 1; position >= 0; --position)
    out += position < 128 && ((x >> position) & 1) ? '1' : '0';
  return out;
}

inline std::string format_name(format f) {
  const std::string_view known = name_of(f);
  if (known != "custom") return std::string(known);
  return fmt::format("e{}m{}{}", f.exponent_bits, f.fraction_bits, f.has_infinity() ? "" : "fn");
}

// "bf16:0xC097 (-4.71875)": the bits are the identity, the decimal is a reading aid
// (the shortest decimal that a double holding the value prints as; exact for these formats).
inline std::string describe_value(format f, std::uint32_t bits) {
  return fmt::format("{}:0x{:0{}X} ({})", format_name(f), bits, (f.width() + 3) / 4, to_double(f, bits));
}

inline std::string describe_flags(flags raised) {
  std::string out;
  for (const auto flag : all_flags)
    if (raised.any(flag)) {
      if (!out.empty()) out += '|';
      out += flag_name(flag);
    }
  return out.empty() ? std::string("none") : out;
}

}  // namespace bitexact
