// Renderers: a trace (trace.hpp) as plain text, Markdown, LaTeX or JSON.
//
//   std::string s = render(record, output_style::latex);
//
// Text, Markdown and LaTeX share one layout: a `document` of sections of
// labelled lines whose bits carry a role (kept, guard, round, sticky, shifted
// out), so that every style shows the same worked example and LaTeX can colour
// the roles. `layout_of(trace)` builds it; a caller that explains something
// other than one operation (the command's ex2 and mma traces) builds its own
// document and hands it to `render_document`. JSON is written straight from
// the record; bit patterns and exact values are strings, so nothing loses
// precision.
//
// LaTeX output is a fragment (a tabular) that needs only \usepackage{xcolor}.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "trace.hpp"

namespace bitexact {

enum class output_style { text, markdown, latex, json };

// "text", "md"/"markdown", "latex"/"tex", "json"; nullopt for anything else.
constexpr std::optional<output_style> output_style_from_name(std::string_view name) {
  if (name == "text" || name == "txt") return output_style::text;
  if (name == "md" || name == "markdown") return output_style::markdown;
  if (name == "latex" || name == "tex") return output_style::latex;
  if (name == "json") return output_style::json;
  return std::nullopt;
}


// A worked example, as every text style lays it out.
enum class bit_role { plain, kept, guard, round, sticky, shifted_out };

struct document_piece {
  std::string text;
  bit_role role = bit_role::plain;
};
struct document_line {
  std::string label;
  std::vector<document_piece> pieces;
};
struct document_section {
  std::string title;
  std::vector<document_line> lines;
};
using document = std::vector<document_section>;

// A line of prose: one plain piece.
inline document_line text_line(std::string label, std::string text) { return {std::move(label), {{std::move(text)}}}; }

constexpr std::string_view name_of(bit_role role) {
  switch (role) {
    case bit_role::plain: return "plain";
    case bit_role::kept: return "kept";
    case bit_role::guard: return "guard";
    case bit_role::round: return "round";
    case bit_role::sticky: return "sticky";
    case bit_role::shifted_out: return "shifted_out";
  }
  return "plain";
}

// text as a JSON string literal: quotes, backslashes and control characters escaped.
inline std::string json_quoted(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", static_cast<int>(c));
        else out += c;
    }
  }
  return out + "\"";
}

namespace render_detail {

using piece = document_piece;
using line = document_line;
using section = document_section;

inline std::string operation_symbol(operation op) {
  switch (op) {
    case operation::add: return "+";
    case operation::sub: return "-";
    case operation::mul: return "×";
    case operation::div: return "/";
    default: return "";
  }
}

// One row of bits: significand * 2^exponent written against 2^reference with
// `integer_digits` places before the point and `fraction_digits` after, each
// bit tagged by role_of(place).
template <class RoleOf>
std::vector<piece> bit_row(bool negative, uint128 significand, int exponent, int reference, int integer_digits,
                           int fraction_digits, RoleOf role_of) {
  std::vector<piece> pieces;
  const auto add = [&](char c, bit_role role) {
    if (pieces.empty() || pieces.back().role != role) pieces.push_back({"", role});
    pieces.back().text += c;
  };
  // Leading zeros before the units place become spaces, and the sign sits
  // just before the first digit, as a human writes numbers in a column.
  bool started = false;
  for (int place = reference + integer_digits - 1; place >= reference - fraction_digits; --place) {
    const int position = place - exponent;
    const bool bit = position >= 0 && position < 128 && ((significand >> position) & 1);
    if (!started && !bit && place > reference) {
      add(' ', bit_role::plain);
      continue;
    }
    if (!started) add(negative ? '-' : ' ', bit_role::plain);
    started = true;
    add(bit ? '1' : '0', role_of(place));
    if (place == reference && fraction_digits > 0) add('.', role_of(place));
  }
  return pieces;
}

inline int fraction_digits_of(const std::string& binary) {
  const auto point = binary.find('.');
  if (point == std::string::npos) return 0;
  const auto end = binary.find("...");
  return static_cast<int>((end == std::string::npos ? binary.size() : end) - point - 1);
}

// A fused step's terms against 2^e_max: integer digits, the point, the
// kept_fraction_bits fraction digits the window keeps, a bar, then the bits
// cut away (up to the lowest one any term holds, at most 40 places).
inline std::vector<piece> fused_row(bool negative, uint128 significand, int exponent, const fused_step_record& f,
                                    int top, int lowest) {
  std::vector<piece> pieces = bit_row(negative, significand, exponent, f.max_exponent, top - f.max_exponent + 1,
                                      f.kept_fraction_bits, [](int) { return bit_role::kept; });
  if (lowest < f.lsb_exponent) {
    std::string cut = "|";
    for (int place = f.lsb_exponent - 1; place >= lowest; --place) {
      const int position = place - exponent;
      cut += position >= 0 && position < 128 && ((significand >> position) & 1) ? '1' : '0';
    }
    pieces.push_back({cut, bit_role::shifted_out});
  }
  return pieces;
}

// Special cases decide some results without arithmetic.
inline section special_case_section(const trace& t) {
  section s{"special case", {}};
  for (const auto& note : t.special_notes) s.lines.push_back(text_line("", note));
  return s;
}

inline section fused_heading_section(const trace& t) {
  const fused_step_record& f = *t.fused;
  const int products = static_cast<int>(f.terms.size()) - 1;
  section s{products >= 0
                ? fmt::format("fused multiply-add step: {} products + C -> {}", products, name_of(t.result_format))
                : fmt::format("fused multiply-add step -> {}", name_of(t.result_format)),
            {}};
  s.lines.push_back(text_line("rounding", fmt::format("{} ({}), once, after the exact sum of the kept terms",
                                                      describe(t.env.rounding), name_of(t.env.rounding))));
  if (!f.terms.empty())
    s.lines.push_back(text_line("window", fmt::format("e_max = {}: every term is cut toward zero to a multiple of "
                                                      "2^{} ({} fraction bits below 2^e_max)",
                                                      f.max_exponent, f.lsb_exponent, f.kept_fraction_bits)));
  return s;
}

// The terms in the window, each cut at its last kept bit, and their sum.
inline section fused_terms_section(const fused_step_record& f) {
  int top = f.max_exponent + 1;  // a product of significands in [1, 4) has two integer digits
  int lowest = f.lsb_exponent;
  for (const auto& term : f.terms) {
    const fused_term_event& e = term.event;
    if (e.significand == 0) continue;
    top = std::max(top, e.exponent + msb_index(e.significand));
    lowest = std::min(lowest, e.exponent + std::countr_zero(e.significand));
  }
  const bool sum_negative = f.sum < 0;
  const auto sum_magnitude = static_cast<std::uint64_t>(sum_negative ? -f.sum : f.sum);
  if (sum_magnitude) top = std::max(top, f.lsb_exponent + msb_index(sum_magnitude));
  lowest = std::max(lowest, f.lsb_exponent - 40);

  section s{fmt::format("terms (× 2^{}; kept bits | bits truncated away)", f.max_exponent), {}};
  for (const auto& term : f.terms) {
    const fused_term_event& e = term.event;
    std::vector<piece> pieces = fused_row(e.sign, e.significand, e.exponent, f, top, lowest);
    std::string note = fmt::format("  nominal 2^{}", e.significand == 0 ? 0 : e.nominal_exponent);
    if (e.significand == 0) note = "  zero";
    else if (e.truncated)
      note += fmt::format(", truncated {} (lost {})", term.truncated_bits, to_decimal(term.truncated_value));
    else note += ", exact in the window";
    pieces.push_back({note});
    s.lines.push_back({e.index < 0 ? std::string("C") : fmt::format("p{}", e.index), pieces});
  }
  s.lines.push_back({"=", fused_row(sum_negative, sum_magnitude, f.lsb_exponent, f, top, lowest)});
  s.lines.push_back(text_line("", fmt::format("fused sum of the kept terms: {} × 2^{} = {}", f.sum, f.lsb_exponent,
                                              to_decimal(f.kept_sum))));
  s.lines.push_back(text_line("", fmt::format("exact sum before truncation: {} (truncation lost {})",
                                              to_decimal(f.exact_sum), to_decimal(f.exact_sum - f.kept_sum))));
  return s;
}

// What ran, in which environment.
inline section heading_section(const trace& t) {
  std::string operand_formats;
  for (const auto& operand : t.operands)
    operand_formats += (operand_formats.empty() ? "" : ", ") + std::string(name_of(operand.fmt));
  section s{fmt::format("{} {} -> {}", name_of(t.op), operand_formats, name_of(t.result_format)), {}};
  s.lines.push_back(text_line("rounding", fmt::format("{} ({})", describe(t.env.rounding), name_of(t.env.rounding))));
  std::string environment_text = fmt::format("tininess {}", name_of(t.env.tiny));
  if (t.env.flush_to_zero) environment_text += ", flush-to-zero";
  if (t.env.denormals_are_zero) environment_text += ", denormals-are-zero";
  if (t.env.nans == nan_policy::canonical) environment_text += ", canonical NaN";
  if (t.env.rounding == rounding_mode::stochastic)
    environment_text += fmt::format(", random bits 0x{:08X}", t.env.random_bits);
  s.lines.push_back(text_line("environment", environment_text));
  return s;
}

// The operands, decoded field by field.
inline section operands_section(const trace& t) {
  section s{"operands", {}};
  for (const auto& operand : t.operands) {
    const char name = static_cast<char>('a' + operand.index);
    s.lines.push_back(text_line(std::string(1, name), describe_value(operand.fmt, operand.bits)));
    const unpacked& u = operand.decoded;
    std::string fields = fmt::format("sign {}, exponent {} = {}", u.sign ? 1 : 0,
                                     binary_digits(static_cast<std::uint32_t>(operand.biased_exponent()),
                                                   operand.fmt.exponent_bits),
                                     operand.biased_exponent());
    if (is_finite_nonzero(u.kind))
      fields += fmt::format(" ({} - bias {}), significand {} × 2^{}",
                            operand.biased_exponent() == 0 ? 1 : operand.biased_exponent(), operand.fmt.bias(),
                            operand.significand_binary(), operand.unbiased_exponent());
    fields += fmt::format(", {}", name_of(u.kind));
    if (u.flushed) fields += " (subnormal read as zero: denormals-are-zero)";
    s.lines.push_back(text_line("", fields));
  }
  return s;
}

// An addition or subtraction of two finite nonzero operands: the case whose
// operands are lined up above the sum.
inline bool is_aligned_sum(const trace& t) {
  return (t.op == operation::add || t.op == operation::sub) && t.operands.size() == 2 &&
         is_finite_nonzero(t.operands[0].decoded.kind) && is_finite_nonzero(t.operands[1].decoded.kind);
}

// How the smaller operand of a sum moved to the larger's exponent, and what it lost.
inline section alignment_section(const trace& t) {
  const alignment_event& a = *t.alignment;
  const int larger = a.smaller_is_first ? 1 : 0;
  const int smaller = 1 - larger;
  section s{"alignment", {}};
  if (a.exponent_difference == 0) {
    s.lines.push_back(text_line("", "exponents are equal: no shift, no bits shifted out, sticky 0"));
    return s;
  }
  const unpacked& big = t.operands[static_cast<std::size_t>(larger)].decoded;
  const unpacked& small = t.operands[static_cast<std::size_t>(smaller)].decoded;
  const int past = big.exponent - small.exponent;  // places of the smaller below the larger's last bit
  std::string past_bits = "none";
  if (past > 0) {
    const int count = std::min(past, msb_index(std::uint64_t{small.significand}) + 1);
    past_bits = binary_digits(small.significand, count);
    if (past > count) past_bits = std::string(static_cast<std::size_t>(past - count), '0') + past_bits;
  }
  s.lines.push_back(text_line("", fmt::format("exponent difference {}: {}'s significand moves {} place{} right",
                                              a.exponent_difference, static_cast<char>('a' + smaller),
                                              a.exponent_difference, a.exponent_difference == 1 ? "" : "s")));
  s.lines.push_back(text_line("", fmt::format("bits past {}'s last place: {} (kept exactly in the wide sum; they "
                                              "become guard, round and sticky bits)",
                                              static_cast<char>('a' + larger), past_bits)));
  s.lines.push_back(text_line("", fmt::format("register alignment shift {}, shifted out {}, sticky {}", a.align_shift,
                                              a.shifted_out ? binary_digits(a.shifted_out, a.align_shift)
                                                            : std::string("none"),
                                              a.sticky ? 1 : 0)));
  return s;
}

// The exact result, lined up with the operands of a sum, each bit coloured by
// its fate in rounding (kept, guard, round, sticky).
inline section exact_section(const trace& t) {
  const bool is_sum = is_aligned_sum(t);
  const int reference = t.exact_reference_exponent;
  const int fraction_digits = fraction_digits_of(t.exact_binary);
  int top = std::max(reference, t.exact->exponent + msb_index(t.exact->significand));
  if (is_sum)
    for (const auto& operand : t.operands) top = std::max(top, detail::leading_exponent(operand.decoded));
  const int integer_digits = top - reference + 1;
  const auto rounding_role = [&](int place) {
    if (!t.rounding) return bit_role::plain;
    const int lsb = t.rounding->lsb_exponent;
    if (place >= lsb) return bit_role::kept;
    if (place == lsb - 1) return bit_role::guard;
    if (place == lsb - 2) return bit_role::round;
    return bit_role::sticky;
  };
  section s{fmt::format("exact {} (× 2^{})",
                        t.op == operation::mul   ? "product"
                        : t.op == operation::div ? "quotient"
                        : t.op == operation::sqrt ? "root"
                        : is_sum || t.op == operation::fma ? "sum"
                                                           : "value",
                        reference),
            {}};
  if (is_sum) {
    const unpacked& big_lsb_source = t.operands[t.alignment && t.alignment->smaller_is_first ? 1 : 0].decoded;
    const auto shifted_role = [&](int place) {
      return place < big_lsb_source.exponent ? bit_role::shifted_out : bit_role::plain;
    };
    for (const auto& operand : t.operands) {
      const unpacked& u = operand.decoded;
      s.lines.push_back({operand.index == 0 ? "" : operation_symbol(t.op),
                         bit_row(u.sign, u.significand, u.exponent, reference, integer_digits, fraction_digits,
                                 shifted_role)});
    }
  }
  auto pieces = bit_row(t.exact->sign, t.exact->significand, t.exact->exponent, reference, integer_digits,
                        fraction_digits, rounding_role);
  if (t.exact->inexact_below) pieces.push_back({"...", bit_role::sticky});
  s.lines.push_back({is_sum ? "=" : "", pieces});
  if (t.exact->effective_subtraction) s.lines.push_back(text_line("", "(the signs differ: magnitudes subtract)"));
  return s;
}

inline section normalisation_section(const trace& t) {
  const int reference = t.exact_reference_exponent;
  section s{"normalisation", {}};
  if (t.normalization_shift > 0)
    s.lines.push_back(text_line("", fmt::format("carry-out: the significand shifts right by {}, exponent {} -> {}",
                                                t.normalization_shift, reference, reference + t.normalization_shift)));
  else if (t.normalization_shift < 0)
    s.lines.push_back(text_line("", fmt::format("cancellation: the significand shifts left by {}, exponent {} -> {}",
                                                -t.normalization_shift, reference, reference + t.normalization_shift)));
  else
    s.lines.push_back(text_line("", "the leading bit is already in place: no shift"));
  return s;
}

// The kept bits, guard, round and sticky, the decision and why.
inline section rounding_section(const trace& t) {
  const rounding_event& r = *t.rounding;
  section s{fmt::format("rounding to {} ({} significand bits)", format_name(r.target), r.target.precision()), {}};
  s.lines.push_back({"bits",
                     {{t.kept_binary, bit_role::kept},
                      {" | guard ", bit_role::plain},
                      {r.guard ? "1" : "0", bit_role::guard},
                      {" | round ", bit_role::plain},
                      {r.round ? "1" : "0", bit_role::round},
                      {" | sticky bits ", bit_role::plain},
                      {t.sticky_bits.empty() ? "none" : t.sticky_bits, bit_role::sticky},
                      {fmt::format(" -> sticky {}", r.sticky ? 1 : 0), bit_role::plain}}});
  s.lines.push_back(text_line("decision", t.decision));
  s.lines.push_back(text_line("because", t.decision_reason));
  const int result_exponent = r.lsb_exponent + r.target.fraction_bits + (r.carry_out && !r.subnormal ? 1 : 0);
  s.lines.push_back(text_line("rounded", fmt::format("{}{} × 2^{}{}", r.sign ? "-" : "", t.rounded_binary,
                                                     result_exponent, r.carry_out ? " (the increment carried)" : "")));
  if (r.subnormal) s.lines.push_back(text_line("", "the result is subnormal"));
  if (r.tiny) s.lines.push_back(text_line("", fmt::format("tiny ({})", name_of(t.env.tiny))));
  return s;
}

inline section result_section(const trace& t) {
  section s{"result", {}};
  s.lines.push_back(text_line("", describe_value(t.result_format, t.result_bits)));
  const format f = t.result_format;
  s.lines.push_back(text_line(
      "", fmt::format("sign {}, exponent {}, fraction {}", (t.result_bits >> (f.width() - 1)) & 1,
                      binary_digits((t.result_bits >> f.fraction_bits) & bit_mask(f.exponent_bits), f.exponent_bits),
                      binary_digits(t.result_bits & bit_mask(f.fraction_bits), f.fraction_bits))));
  s.lines.push_back(text_line("flags", describe_flags(t.raised)));
  for (const auto& reason : t.flag_reasons)
    s.lines.push_back(text_line("", fmt::format("{}: {}", flag_name(reason.flag), reason.why)));
  return s;
}

// The exact value, the result's value and the error, in decimal.
inline section exact_arithmetic_section(const trace& t) {
  section s{"exact arithmetic", {}};
  s.lines.push_back(text_line(t.exact_value_is_rounded ? "true value" : "exact value",
                              to_decimal(*t.exact_value, t.exact_value_is_rounded ? 40 : 400) +
                                  (t.exact_value_is_rounded ? " (rounded: a root has no finite expansion; "
                                                              "computed to 256 bits)"
                                                            : "")));
  if (t.result_value) s.lines.push_back(text_line("result value", to_decimal(*t.result_value)));
  if (t.error) {
    std::string error_text = to_decimal(*t.error, t.exact_value_is_rounded ? 40 : 400);
    if (*t.error == 0) error_text += " (exact)";
    else if (!t.exact_value_is_rounded) error_text += fmt::format(" = {}", to_fraction(*t.error));
    s.lines.push_back(text_line("error", error_text + "  (result - exact)"));
  } else if (t.result_value == std::nullopt) {
    s.lines.push_back(text_line("error", "not finite: the result is not a finite number"));
  }
  return s;
}

// --- text ------------------------------------------------------------------

inline std::string pieces_text(const std::vector<piece>& pieces) {
  std::string out;
  for (const auto& p : pieces) out += p.text;
  return out;
}

inline std::string render_text(const std::vector<section>& doc) {
  std::string out;
  for (std::size_t i = 0; i < doc.size(); ++i) {
    out += (i == 0 ? "" : "\n") + doc[i].title + "\n";
    for (const auto& l : doc[i].lines) out += fmt::format("  {:<12} {}\n", l.label, pieces_text(l.pieces));
  }
  return out;
}

// --- Markdown --------------------------------------------------------------

inline std::string render_markdown(const std::vector<section>& doc) {
  std::string out;
  for (std::size_t i = 0; i < doc.size(); ++i) {
    out += fmt::format("{} {}\n\n", i == 0 ? "###" : "####", doc[i].title);
    // Rows of bits line up only in a fixed-width block; prose reads better as a list.
    const bool has_bits = std::any_of(doc[i].lines.begin(), doc[i].lines.end(), [](const line& l) {
      return std::any_of(l.pieces.begin(), l.pieces.end(), [](const piece& p) { return p.role != bit_role::plain; });
    });
    if (has_bits) {
      out += "```\n";
      for (const auto& l : doc[i].lines) out += fmt::format("{:<10} {}\n", l.label, pieces_text(l.pieces));
      out += "```\n\n";
    } else {
      for (const auto& l : doc[i].lines)
        out += fmt::format("- {}{}\n", l.label.empty() ? "" : "**" + l.label + "**: ", pieces_text(l.pieces));
      out += "\n";
    }
  }
  return out;
}

// --- LaTeX -----------------------------------------------------------------

inline std::string latex_escape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    switch (c) {
      case '\\': out += "\\textbackslash{}"; break;
      case '{': out += "\\{"; break;
      case '}': out += "\\}"; break;
      case '_': out += "\\_"; break;
      case '%': out += "\\%"; break;
      case '&': out += "\\&"; break;
      case '#': out += "\\#"; break;
      case '$': out += "\\$"; break;
      case '~': out += "\\textasciitilde{}"; break;
      case '^': out += "\\textasciicircum{}"; break;
      case '|': out += "\\textbar{}"; break;
      case '<': out += "\\textless{}"; break;
      case '>': out += "\\textgreater{}"; break;
      default:
        if (s.substr(i, 2) == "×") {  // UTF-8 multiplication sign: two bytes
          out += "$\\times$";
          ++i;
        } else {
          out += c;
        }
    }
  }
  return out;
}

constexpr std::string_view latex_colour(bit_role role) {
  switch (role) {
    case bit_role::guard: return "red";
    case bit_role::round: return "orange";
    case bit_role::sticky: return "blue";
    case bit_role::shifted_out: return "teal";
    default: return "";
  }
}

inline std::string render_latex(const std::vector<section>& doc) {
  std::string out =
      "% bitexact trace. Needs \\usepackage{xcolor}. Colours: guard red, round orange, sticky blue,\n"
      "% bits shifted past the larger operand's last place teal.\n"
      "\\begin{tabular}{@{}ll@{}}\n";
  for (const auto& s : doc) {
    out += fmt::format("\\multicolumn{{2}}{{@{{}}l}}{{\\textbf{{{}}}}} \\\\\n", latex_escape(s.title));
    for (const auto& l : s.lines) {
      std::string cell;
      for (const auto& p : l.pieces) {
        const std::string text = latex_escape(p.text);
        const auto colour = latex_colour(p.role);
        cell += colour.empty() ? text : fmt::format("\\textcolor{{{}}}{{{}}}", colour, text);
      }
      out += fmt::format("{} & \\texttt{{{}}} \\\\\n", latex_escape(l.label), cell);
    }
  }
  out += "\\end{tabular}\n";
  return out;
}

// --- JSON ------------------------------------------------------------------


inline std::string json_bits(format f, std::uint32_t bits) {
  return json_quoted(fmt::format("0x{:0{}X}", bits, (f.width() + 3) / 4));
}

// One member per part of the record, each a line of the object ending in ",\n"
// (or "" when the record has no such part).
constexpr std::string_view json_bool(bool x) { return x ? "true" : "false"; }

inline std::string json_environment(const environment& env) {
  return fmt::format(
      "  \"environment\": {{\"rounding\": {}, \"tininess\": {}, \"flush_to_zero\": {}, \"denormals_are_zero\": {}, "
      "\"nans\": {}, \"random_bits\": {}}},\n",
      json_quoted(name_of(env.rounding)), json_quoted(name_of(env.tiny)), json_bool(env.flush_to_zero),
      json_bool(env.denormals_are_zero), json_quoted(name_of(env.nans)),
      json_quoted(fmt::format("0x{:08X}", env.random_bits)));
}

inline std::string json_operands(const trace& t) {
  std::string out = "  \"operands\": [";
  for (std::size_t i = 0; i < t.operands.size(); ++i) {
    const auto& o = t.operands[i];
    out += fmt::format(
        "{}\n    {{\"index\": {}, \"format\": {}, \"bits\": {}, \"sign\": {}, \"class\": {}, \"biased_exponent\": {}, "
        "\"unbiased_exponent\": {}, \"significand\": {}, \"flushed\": {}}}",
        i ? "," : "", o.index, json_quoted(name_of(o.fmt)), json_bits(o.fmt, o.bits), o.decoded.sign ? 1 : 0,
        json_quoted(name_of(o.decoded.kind)), o.biased_exponent(), o.unbiased_exponent(),
        json_quoted(o.significand_binary()), json_bool(o.decoded.flushed));
  }
  return out + (t.operands.empty() ? "],\n" : "\n  ],\n");
}

inline std::string json_alignment(const trace& t) {
  if (!t.alignment) return {};
  const alignment_event& a = *t.alignment;
  return fmt::format(
      "  \"alignment\": {{\"exponent_difference\": {}, \"align_shift\": {}, \"shifted_out\": {}, \"sticky\": {}, "
      "\"smaller_operand\": {}}},\n",
      a.exponent_difference, a.align_shift, json_quoted(binary_digits(a.shifted_out, a.align_shift)),
      json_bool(a.sticky), a.smaller_is_first ? 0 : 1);
}

// The exact result and its normalisation.
inline std::string json_exact(const trace& t) {
  if (!t.exact || !t.exact->significand) return {};
  return fmt::format(
      "  \"exact\": {{\"binary\": {}, \"times_power_of_two\": {}, \"inexact_below\": {}, "
      "\"effective_subtraction\": {}}},\n"
      "  \"normalization\": {{\"leading_bit_shift\": {}, \"kind\": {}}},\n",
      json_quoted(t.exact_binary), t.exact_reference_exponent, json_bool(t.exact->inexact_below),
      json_bool(t.exact->effective_subtraction), t.normalization_shift,
      json_quoted(t.normalization_shift > 0   ? "carry_out"
                  : t.normalization_shift < 0 ? "cancellation"
                                              : "none"));
}

inline std::string json_rounding(const trace& t) {
  if (!t.rounding) return {};
  const rounding_event& r = *t.rounding;
  return fmt::format(
      "  \"rounding\": {{\"target\": {}, \"mode\": {}, \"kept\": {}, \"guard\": {}, \"round\": {}, \"sticky\": {}, "
      "\"sticky_bits\": {}, \"increment\": {}, \"reason\": {}, \"decision\": {}, \"explanation\": {}, "
      "\"rounded\": {}, \"lsb_exponent\": {}, \"carry_out\": {}, \"subnormal\": {}, \"tiny\": {}}},\n",
      json_quoted(format_name(r.target)), json_quoted(name_of(r.mode)), json_quoted(t.kept_binary), r.guard ? 1 : 0,
      r.round ? 1 : 0, r.sticky ? 1 : 0, json_quoted(t.sticky_bits), json_bool(r.increment),
      json_quoted(name_of(r.reason)), json_quoted(t.decision), json_quoted(t.decision_reason),
      json_quoted(t.rounded_binary), r.lsb_exponent, json_bool(r.carry_out), json_bool(r.subnormal),
      json_bool(r.tiny));
}

inline std::string json_fused(const trace& t) {
  if (!t.fused) return {};
  const fused_step_record& f = *t.fused;
  std::string out = fmt::format("  \"fused\": {{\"max_exponent\": {}, \"lsb_exponent\": {}, \"kept_fraction_bits\": {}, "
                                "\"sum\": {}, \"kept_sum\": {}, \"exact_sum\": {}, \"terms\": [",
                                f.max_exponent, f.lsb_exponent, f.kept_fraction_bits, json_quoted(std::to_string(f.sum)),
                                json_quoted(to_decimal(f.kept_sum)), json_quoted(to_decimal(f.exact_sum)));
  for (std::size_t i = 0; i < f.terms.size(); ++i) {
    const auto& term = f.terms[i];
    const fused_term_event& e = term.event;
    out += fmt::format(
        "{}\n    {{\"index\": {}, \"sign\": {}, \"significand\": {}, \"exponent\": {}, \"nominal_exponent\": {}, "
        "\"truncated\": {}, \"truncated_bits\": {}, \"kept\": {}, \"value\": {}, \"kept_value\": {}, \"lost\": {}}}",
        i ? "," : "", e.index, e.sign ? 1 : 0,
        json_quoted(e.significand ? binary_digits(e.significand, msb_index(e.significand) + 1) : std::string("0")),
        e.exponent, e.nominal_exponent, json_bool(e.truncated), json_quoted(term.truncated_bits),
        json_quoted(std::to_string(e.kept)), json_quoted(to_decimal(term.value)), json_quoted(to_decimal(term.kept_value)),
        json_quoted(to_decimal(term.truncated_value)));
  }
  return out + "\n  ]},\n";
}

inline std::string json_specials(const trace& t) {
  std::string out = "  \"specials\": [";
  for (std::size_t i = 0; i < t.specials.size(); ++i)
    out += fmt::format("{}{{\"reason\": {}, \"explanation\": {}}}", i ? ", " : "", json_quoted(name_of(t.specials[i])),
                       json_quoted(t.special_notes[i]));
  return out + "],\n";
}

inline std::string json_result(const trace& t) {
  return fmt::format("  \"result\": {{\"format\": {}, \"bits\": {}, \"value\": {}}},\n",
                     json_quoted(name_of(t.result_format)), json_bits(t.result_format, t.result_bits),
                     json_quoted(t.result_value ? to_decimal(*t.result_value)
                                                : fmt::format("{}", to_double(t.result_format, t.result_bits))));
}

// The flags, the object's last member unless the exact value follows.
inline std::string json_flags(const trace& t) {
  std::string out = fmt::format("  \"flags\": {{\"bits\": {}, \"raised\": [", json_quoted(fmt::format("0x{:02X}", t.raised.bits)));
  for (std::size_t i = 0; i < t.flag_reasons.size(); ++i)
    out += fmt::format("{}{{\"flag\": {}, \"why\": {}}}", i ? ", " : "", json_quoted(flag_name(t.flag_reasons[i].flag)),
                       json_quoted(t.flag_reasons[i].why));
  return out + "]}";
}

// The exact value and the error, each after a comma that closes the member before it.
inline std::string json_exact_value_and_error(const trace& t) {
  const int digits = t.exact_value_is_rounded ? 80 : 400;
  std::string out;
  if (t.exact_value)
    out += fmt::format(",\n  \"exact_value\": {{\"decimal\": {}, \"fraction\": {}, \"rounded\": {}}}",
                       json_quoted(to_decimal(*t.exact_value, digits)), json_quoted(to_fraction(*t.exact_value)),
                       json_bool(t.exact_value_is_rounded));
  if (t.error)
    out += fmt::format(",\n  \"error\": {{\"decimal\": {}, \"fraction\": {}}}", json_quoted(to_decimal(*t.error, digits)),
                       json_quoted(to_fraction(*t.error)));
  return out;
}

}  // namespace render_detail

// The document of a trace: the sections its operation reached, in order.
inline document layout_of(const trace& t) {
  using namespace render_detail;
  document doc;
  if (t.fused) {
    doc.push_back(fused_heading_section(t));
    if (!t.fused->terms.empty()) doc.push_back(fused_terms_section(*t.fused));
    if (!t.special_notes.empty()) doc.push_back(special_case_section(t));
  } else {
    doc.push_back(heading_section(t));
  }
  if (!t.operands.empty()) doc.push_back(operands_section(t));
  if (!t.fused) {
    if (!t.special_notes.empty()) doc.push_back(special_case_section(t));
    if (t.exact && t.exact->significand != 0) {
      if (is_aligned_sum(t) && t.alignment) doc.push_back(alignment_section(t));
      doc.push_back(exact_section(t));
      doc.push_back(normalisation_section(t));
    }
  }
  if (t.rounding) doc.push_back(rounding_section(t));
  doc.push_back(result_section(t));
  if (t.exact_value) doc.push_back(exact_arithmetic_section(t));
  return doc;
}

// A document in the text, Markdown or LaTeX style. JSON is a trace's own
// structure (render_json), so json gives "" here.
inline std::string render_document(const document& doc, output_style style) {
  switch (style) {
    case output_style::text: return render_detail::render_text(doc);
    case output_style::markdown: return render_detail::render_markdown(doc);
    case output_style::latex: return render_detail::render_latex(doc);
    case output_style::json: return {};
  }
  return {};
}

// A document as JSON, its bits' roles kept: [{"title", "lines": [{"label",
// "pieces": [[text, role], ...]}]}], for a page that colours the bits itself.
inline std::string render_document_json(const document& doc) {
  std::string sections;
  for (const document_section& s : doc) {
    std::string lines;
    for (const document_line& l : s.lines) {
      std::string pieces;
      for (const document_piece& p : l.pieces)
        pieces += fmt::format("{}[{}, \"{}\"]", pieces.empty() ? "" : ", ", json_quoted(p.text), name_of(p.role));
      lines += fmt::format("{}{{\"label\": {}, \"pieces\": [{}]}}", lines.empty() ? "" : ", ", json_quoted(l.label),
                           pieces);
    }
    sections += fmt::format("{}{{\"title\": {}, \"lines\": [{}]}}", sections.empty() ? "" : ", ", json_quoted(s.title),
                            lines);
  }
  return "[" + sections + "]";
}

// The record as one JSON object.
inline std::string render_json(const trace& t) {
  using namespace render_detail;
  return "{\n" +
         fmt::format("  \"operation\": {},\n",
                     json_quoted(t.fused ? std::string_view("fused_multiply_add_step") : name_of(t.op))) +
         fmt::format("  \"result_format\": {},\n", json_quoted(name_of(t.result_format))) + json_environment(t.env) +
         json_operands(t) + json_alignment(t) + json_exact(t) + json_rounding(t) + json_fused(t) + json_specials(t) +
         json_result(t) + json_flags(t) + json_exact_value_and_error(t) + "\n}\n";
}

inline std::string render(const trace& t, output_style style = output_style::text) {
  return style == output_style::json ? render_json(t) : render_document(layout_of(t), style);
}

}  // namespace bitexact

// fmt::format("{}", record): the trace as text.
template <>
struct fmt::formatter<bitexact::trace> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(const bitexact::trace& t, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(bitexact::render(t, bitexact::output_style::text), ctx);
  }
};
