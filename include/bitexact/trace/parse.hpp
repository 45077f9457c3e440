// Reading operands from text, as the `bitexact` command does, for library
// users too (the names of formats and rounding modes: core/names.hpp).
//
//   auto parsed = bitexact::parse_operand("bf16:-2.40625", bitexact::fp32);
//   if (!parsed.ok()) { std::cerr << parsed.error << '\n'; return 2; }
//   bitexact::visit_format(parsed.operand.fmt, [&](auto tag) {
//     auto x = bitexact::value<decltype(tag)::fmt>::from_bits(parsed.operand.bits);
//     ...
//   });
//
// Operand syntax (an optional `FORMAT:` prefix names the operand's format,
// else the caller's default applies):
//   decimal      -2.296875   1e-3   bf16:-2.40625
//   bit pattern  bf16:0xC013  fp32:0xC01A0E2E   (the prefix is required: an
//                unprefixed 0xC013 could be a pattern or the integer 49171);
//                tf32 patterns are 19 bits (1.0 is tf32:0x1FC00), or fp32's
//                bits with the low 13 zero, as a GPU holds them: tf32:fp32:0x3F800000
//   C hex float  0x1.8p-3   -0x1p+127           (the `p` exponent is required)
//   specials     inf  +inf  -inf  infinity  nan  -nan  (a quiet NaN)
// A decimal or hex float is rounded to nearest (ties to even) in its format;
// the result says whether that was exact, so a caller can warn or refuse.
// A value that rounds beyond the largest finite number is an error: write inf.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <boost/multiprecision/cpp_int.hpp>

#include "../core/dispatch.hpp"
#include "../core/environment.hpp"
#include "../core/format.hpp"
#include "../core/names.hpp"
#include "../core/operations.hpp"
#include "../core/round.hpp"

namespace bitexact {

enum class operand_syntax : std::uint8_t { bit_pattern, decimal, hex_float, infinity, nan };

struct parsed_operand {
  format fmt;
  std::uint32_t bits = 0;
  operand_syntax syntax = operand_syntax::bit_pattern;
  bool exact = true;         // the written value is this format's value; false: rounded to nearest even
  bool rounded_to_zero = false;  // a nonzero value too small for the format
};

struct operand_parse {
  parsed_operand operand;
  std::string error;  // one line saying what was expected; empty on success
  bool ok() const { return error.empty(); }
};

// Input echoed in a message: in single quotes, every byte outside printable ASCII written as \xNN (so a
// terminal escape cannot reach the terminal and a NUL cannot cut the message short), and text longer than
// 48 characters cut there, with its length.
inline std::string quoted_input(std::string_view text) {
  constexpr std::size_t shown = 48;
  std::string out = "'";
  for (const char c : text.substr(0, shown)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7F) {
      out += c;
    } else {
      out += "\\x";
      out += "0123456789ABCDEF"[byte >> 4];
      out += "0123456789ABCDEF"[byte & 15];
    }
  }
  if (text.size() > shown) return out + "...' (" + std::to_string(text.size()) + " characters)";
  return out + "'";
}

// The value of one hex digit of either case, or -1 for any other character.
constexpr int hex_digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

namespace detail {

inline std::string hex_string(std::uint64_t value) {
  std::string hex;
  do hex.insert(hex.begin(), "0123456789ABCDEF"[value & 15]);
  while (value >>= 4);
  return "0x" + hex;
}

constexpr bool starts_with_hex_prefix(std::string_view s) {
  return s.size() >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
}

// Round (-1)^sign * significand * 2^exponent (+ a little when inexact_below)
// to nearest even in the runtime format f.
inline std::pair<std::uint32_t, flags> round_to_format(format f, bool sign, int exponent, std::uint64_t significand,
                                                       bool inexact_below) {
  flags raised;
  const environment nearest{};
  const std::uint32_t bits = visit_format(f, [&](auto tag) -> std::uint32_t {
    return round_pack<decltype(tag)::fmt>(sign, exponent, significand, inexact_below, nearest, raised).bits;
  });
  return {bits, raised};
}


// A finite nonzero magnitude rounded into f: fills `out`, or returns an error.
inline std::string finish_rounded(std::string_view text, format f, bool sign, int exponent, std::uint64_t significand,
                                  bool inexact_below, parsed_operand& out) {
  const auto [bits, raised] = round_to_format(f, sign, exponent, significand, inexact_below);
  if (raised.any(flags::overflow))
    return quoted_input(text) + " is beyond the largest finite " + std::string(name_of(f)) + " value; " +
           (f.has_infinity() ? "write inf or -inf for an infinity, or a bit pattern"
                             : std::string(name_of(f)) + " has no infinity: write nan, the largest finite value or a "
                                                         "bit pattern");
  out.bits = bits;
  out.exact = !raised.any(flags::inexact);
  out.rounded_to_zero = (bits & ((f.width() == 32 ? 0xFFFFFFFFu : (1u << f.width()) - 1) >> 1)) == 0;
  return {};
}

// digits[.digits][e[+-]digits], sign already removed.
inline std::string parse_decimal(std::string_view whole, std::string_view text, format f, bool sign,
                                 parsed_operand& out) {
  using boost::multiprecision::cpp_int;
  constexpr std::size_t max_digits = 800;  // far more than any format needs; bounds the work
  cpp_int mantissa = 0;
  std::size_t i = 0, digits = 0, fraction_digits = 0;
  bool seen_point = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.' && !seen_point) {
      seen_point = true;
    } else if (c >= '0' && c <= '9') {
      if (++digits > max_digits) return quoted_input(whole) + " has too many digits (at most 800)";
      mantissa = mantissa * 10 + (c - '0');
      if (seen_point) ++fraction_digits;
    } else {
      break;
    }
  }
  if (digits == 0) return {};  // not a decimal; the caller reports
  long long exponent10 = 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool negative_exponent = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative_exponent = text[i++] == '-';
    std::size_t exponent_digits = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++exponent_digits)
      if (exponent10 < 100000) exponent10 = exponent10 * 10 + (text[i] - '0');
    if (exponent_digits == 0)
      return quoted_input(whole) + " has an exponent marker without digits; expected a decimal like 1e-3";
    if (negative_exponent) exponent10 = -exponent10;
  }
  if (i != text.size())
    return quoted_input(whole) + " is not a number; expected a decimal (-2.296875, 1e-3), a hex float (0x1.8p-3), "
                           "a bit pattern with a format prefix (bf16:0xC013), inf or nan";
  out.syntax = operand_syntax::decimal;
  if (mantissa == 0) {
    out.bits = sign ? 1u << (f.width() - 1) : 0;
    return {};
  }
  exponent10 -= static_cast<long long>(fraction_digits);
  // Every format here lies within [2^-150, 2^129): decide the far ends without big powers.
  const long long magnitude10 = exponent10 + static_cast<long long>(digits);  // value < 10^magnitude10
  if (magnitude10 - static_cast<long long>(digits) > 40)
    return finish_rounded(whole, f, sign, 200, 1, false, out);  // certainly overflows: the same message
  if (magnitude10 < -50) return finish_rounded(whole, f, sign, -400, 1, true, out);  // rounds to zero
  // value = numerator / denominator exactly; take a 66-bit quotient and a sticky remainder.
  cpp_int numerator = mantissa, denominator = 1;
  if (exponent10 >= 0) numerator *= boost::multiprecision::pow(cpp_int(10), static_cast<unsigned>(exponent10));
  else denominator = boost::multiprecision::pow(cpp_int(10), static_cast<unsigned>(-exponent10));
  const long long scale = 66 - (static_cast<long long>(msb(numerator)) - static_cast<long long>(msb(denominator)));
  if (scale >= 0) numerator <<= static_cast<unsigned>(scale);
  else denominator <<= static_cast<unsigned>(-scale);
  cpp_int quotient, remainder;
  divide_qr(numerator, denominator, quotient, remainder);
  const unsigned excess = msb(quotient) > 63 ? static_cast<unsigned>(msb(quotient) - 63) : 0;
  const bool lost = excess && (quotient & ((cpp_int(1) << excess) - 1)) != 0;
  const auto significand = static_cast<std::uint64_t>(quotient >> excess);
  return finish_rounded(whole, f, sign, static_cast<int>(-scale + excess), significand, remainder != 0 || lost, out);
}

// 0x hexdigits[.hexdigits]p[+-]digits, sign already removed.
inline std::string parse_hex_float(std::string_view whole, std::string_view text, format f, bool sign,
                                   parsed_operand& out) {
  std::uint64_t significand = 0;
  bool lost = false;
  long long exponent = 0;  // of significand's last bit, before the p exponent
  std::size_t i = 2, digits = 0;
  bool seen_point = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.' && !seen_point) {
      seen_point = true;
      continue;
    }
    const int digit = hex_digit_value(c);
    if (digit < 0) break;
    ++digits;
    if (significand >> 56) {  // keep 60 bits; later digits only matter as sticky (or scale)
      lost |= digit != 0;
      if (!seen_point) exponent += 4;
    } else {
      significand = significand << 4 | static_cast<unsigned>(digit);
      if (seen_point) exponent -= 4;
    }
  }
  if (digits == 0) return quoted_input(whole) + " has no hex digits after 0x";
  if (i == text.size() || (text[i] != 'p' && text[i] != 'P')) {
    if (i == text.size() && !seen_point)
      return quoted_input(whole) + " is ambiguous: write " +
             quoted_input(std::string(name_of(f)) + ":" + std::string(text)) + " for a bit pattern, or " +
             quoted_input(std::string(text) + "p0") + " for a hex float";
    return quoted_input(whole) + " is a hex float without its binary exponent; expected e.g. 0x1.8p-3";
  }
  ++i;
  bool negative_exponent = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative_exponent = text[i++] == '-';
  long long p = 0;
  std::size_t p_digits = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++p_digits)
    if (p < 100000) p = p * 10 + (text[i] - '0');
  if (p_digits == 0 || i != text.size())
    return quoted_input(whole) + " has a malformed binary exponent; expected e.g. 0x1.8p-3";
  exponent += negative_exponent ? -p : p;
  out.syntax = operand_syntax::hex_float;
  if (significand == 0 && !lost) {
    out.bits = sign ? 1u << (f.width() - 1) : 0;
    return {};
  }
  if (exponent > 1000) exponent = 1000;  // overflows every format
  if (exponent < -1000) exponent = -1000;  // underflows every format to zero
  return finish_rounded(whole, f, sign, static_cast<int>(exponent), significand, lost, out);
}

}  // namespace detail

// Parse one operand; default_format applies when the text has no FORMAT: prefix.
inline operand_parse parse_operand(std::string_view text, format default_format) {
  operand_parse result;
  parsed_operand& out = result.operand;
  out.fmt = default_format;
  const std::string_view whole = text;
  bool prefixed = false;
  if (const auto colon = text.find(':'); colon != std::string_view::npos) {
    const std::string_view prefix = text.substr(0, colon);
    const auto named = format_from_name(prefix);
    if (!named) {
      result.error = "unknown format " + quoted_input(prefix) + " in " + quoted_input(whole) + "; expected one of " +
                     format_names_hint();
      return result;
    }
    out.fmt = *named;
    prefixed = true;
    text.remove_prefix(colon + 1);
  }
  // tf32 as a GPU register holds it, in fp32's bits: tf32:fp32:0x3F800000 is tf32:0x1FC00. A pattern that
  // sets any of the low 13 bits is not a tf32 value, so it is refused rather than truncated.
  if (out.fmt == tf32 && text.substr(0, 5) == "fp32:") {
    const std::string_view pattern = text.substr(5);
    if (!detail::starts_with_hex_prefix(pattern) || pattern.find_first_of(".pP") != std::string_view::npos) {
      result.error = quoted_input(whole) + ": after tf32:fp32: write a 32-bit pattern, e.g. tf32:fp32:0x3F800000";
      return result;
    }
    result = parse_operand(text, fp32);
    if (!result.ok()) return result;
    if (const std::uint32_t low_bits = result.operand.bits & 0x1FFFu) {
      result.error = quoted_input(whole) + " sets bits below tf32's 19 (low 13 bits " + detail::hex_string(low_bits) +
                     "); in fp32 bits a tf32 value has them zero: round it with bitexact trace convert " +
                     quoted_input(text) + " --to tf32";
      return result;
    }
    result.operand.fmt = tf32;
    result.operand.bits >>= 13;
    return result;
  }
  const format f = out.fmt;
  if (text.empty()) {
    result.error = "empty operand" + (prefixed ? " after " + quoted_input(whole) : std::string()) +
                   "; expected a number, a bit pattern (bf16:0xC013), inf or nan";
    return result;
  }
  // A prefixed 0x without a binary exponent or point is the bit pattern itself.
  if (prefixed && detail::starts_with_hex_prefix(text) &&
      text.find_first_of(".pP") == std::string_view::npos) {
    std::uint64_t pattern = 0;
    std::size_t digits = 0;
    for (std::size_t i = 2; i < text.size(); ++i) {
      const int digit = hex_digit_value(text[i]);
      if (digit < 0) {
        result.error = quoted_input(whole) + " has a non-hex character " + quoted_input(text.substr(i, 1)) +
                       "; expected a bit pattern like " + std::string(name_of(f)) + ":0xC013";
        return result;
      }
      if (pattern >> 40) {
        pattern = ~std::uint64_t{0};  // surely too wide; keep scanning for bad characters
      } else {
        pattern = pattern << 4 | static_cast<unsigned>(digit);
      }
      ++digits;
    }
    const std::uint64_t mask = (std::uint64_t{1} << f.width()) - 1;
    if (digits == 0) {
      result.error = quoted_input(whole) + " has no hex digits after 0x";
    } else if (pattern > mask) {
      result.error = quoted_input(whole) + " does not fit in " + std::string(name_of(f)) + "'s " +
                     std::to_string(f.width()) + " bits (largest pattern " + detail::hex_string(mask) + ")";
    } else {
      out.bits = static_cast<std::uint32_t>(pattern);
      out.syntax = operand_syntax::bit_pattern;
    }
    return result;
  }
  bool sign = false;
  std::string_view body = text;
  if (body[0] == '+' || body[0] == '-') {
    sign = body[0] == '-';
    body.remove_prefix(1);
  }
  const std::uint32_t sign_bit = std::uint32_t{sign} << (f.width() - 1);
  if (body == "inf" || body == "infinity" || body == "Inf" || body == "INF" || body == "Infinity") {
    if (!f.has_infinity()) {
      result.error = quoted_input(whole) + ": " + std::string(name_of(f)) +
                     " has no infinity; use nan or the largest finite value";
      return result;
    }
    out.bits = sign_bit | (static_cast<std::uint32_t>(f.max_biased_exponent()) << f.fraction_bits);
    out.syntax = operand_syntax::infinity;
    return result;
  }
  if (body == "nan" || body == "NaN" || body == "NAN") {
    out.bits = visit_format(f, [&](auto tag) -> std::uint32_t { return decltype(tag)::value_type::default_nan(sign).bits; });
    out.bits = (out.bits & ~(std::uint32_t{1} << (f.width() - 1))) | sign_bit;
    out.syntax = operand_syntax::nan;
    return result;
  }
  if (detail::starts_with_hex_prefix(body)) {
    result.error = detail::parse_hex_float(whole, body, f, sign, out);
    return result;
  }
  result.error = detail::parse_decimal(whole, body, f, sign, out);
  if (result.ok() && out.syntax != operand_syntax::decimal)
    result.error = quoted_input(whole) + " is not a number; expected a decimal (-2.296875, 1e-3), a hex float "
                   "(0x1.8p-3), a bit pattern with a format prefix (bf16:0xC013), inf or nan";
  return result;
}

}  // namespace bitexact
