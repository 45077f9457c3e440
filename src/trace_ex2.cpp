// `bitexact trace ex2 X`: MUFU.EX2 (hardware/mufu.hpp's ex2_approx_ftz) on one
// input, its lookup as the model reports it, against 2^x correctly rounded.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <boost/multiprecision/cpp_bin_float.hpp>
#include <fmt/format.h>

#include <bitexact/hardware/mufu.hpp>
#include <bitexact/trace/parse.hpp>
#include <bitexact/trace/render.hpp>

#include "cli.hpp"

namespace bitexact::cli {
namespace {

constexpr std::string_view trace_ex2_help =
    "usage: bitexact trace ex2 X [options]\n"
    "\n"
    "ex2.approx.ftz.f32 (SASS MUFU.EX2) on one fp32 input, as include/bitexact/hardware/mufu.hpp\n"
    "models it (docs/mufu.md): x is cut toward zero to the 2^-23 grid, q = trunc(|x| * 2^23) =\n"
    "n * 2^23 + k; the unit reads entry k of its table for 2^(-k/2^23) (x < 0) or 2^(k/2^23)\n"
    "(x >= 0), tables captured from an H200, and scales it by 2^-n or 2^n; results below 2^-126\n"
    "are flushed to +0, x >= 128 gives +inf. Shows q, n, k, the table entry, the result, and\n"
    "2^x correctly rounded to fp32 (from 2^x to 256 bits) with the result's error in ulps.\n"
    "ex2.approx.f32 (exp2f, what PyTorch's flash attention reaches) is the same lookup for\n"
    "x >= -126.\n"
    "\n"
    "X: an fp32 operand as for bitexact trace (fp32:0xC0300000, -2.75, 0x1.6p+1)\n"
    "\n"
    "options:\n"
    "{options}\n"
    "The tables are read from $BITEXACT_DATA_DIR, else the data/ folder the build names.\n"
    "Exit status 0, or 2 with a one-line message on stderr.\n"
    "\n"
    "example: bitexact trace ex2 fp32:0xC0300000\n";

// What ex2_approx_ftz reports: its lookup (none for NaN and the far ranges) and its special cases.
struct ex2_steps {
  std::optional<mufu_lookup_event> lookup;
  std::vector<special_reason> specials;
  void on(const mufu_lookup_event& e) { lookup = e; }
  void on(const special_event& e) { specials.push_back(e.reason); }
};

// 2^x to 256 bits, for comparison; the error this precision leaves is far below
// any fp32 rounding boundary that 2^x of a 24-bit x could come near.
using wide_float = boost::multiprecision::number<
    boost::multiprecision::cpp_bin_float<256, boost::multiprecision::digit_base_2>>;

struct exact_power {
  wide_float value;  // 2^x
  int binade;        // floor(log2(2^x)) = floor(x)
  std::uint32_t nearest_bits;  // 2^x rounded to nearest even fp32, by the library's round_pack
};

// For finite x with -200 < x < 128; other inputs have no finite 2^x worth comparing.
exact_power two_to_the(double x) {
  const double floor_x = std::floor(x);
  const wide_float fraction = wide_float(x) - floor_x;  // exact: x has 24 significant bits
  const wide_float power_of_fraction = boost::multiprecision::exp(fraction * boost::multiprecision::log(wide_float(2)));
  const int binade = static_cast<int>(floor_x);
  // 2^fraction in [1, 2) as a 64-bit significand and a sticky bit, rounded once into fp32.
  const wide_float scaled = boost::multiprecision::ldexp(power_of_fraction, 63);
  const wide_float truncated = boost::multiprecision::trunc(scaled);
  const auto significand = truncated.convert_to<std::uint64_t>();
  flags raised;
  const float32 nearest = round_pack<fp32>(false, binade - 63, significand, scaled != truncated, environment{}, raised);
  return {boost::multiprecision::ldexp(power_of_fraction, binade), binade, nearest.bits};
}

std::string_view special_words(special_reason reason) {
  switch (reason) {
    case special_reason::nan_operand: return "a NaN input: the unit returns its canonical NaN";
    case special_reason::overflow: return "x >= 128: 2^x is beyond fp32 and the unit returns +inf";
    case special_reason::flushed_to_zero: return "the result is below 2^-126: the unit flushes it to +0 (.ftz)";
    default: return "a special input decides the result";
  }
}

struct ex2_report {
  std::uint32_t x_bits = 0;
  std::uint32_t result_bits = 0;
  ex2_steps steps;
  std::optional<exact_power> exact;
};

std::string table_name(mufu_table table) {
  return table == mufu_table::ex2_negative ? "G" : "P";
}

std::vector<document_section> ex2_layout(const ex2_report& r) {
  std::vector<document_section> doc;
  doc.push_back({"ex2.approx.ftz.f32 (MUFU.EX2): fp32 -> fp32, a table lookup, not a rounding", {}});
  doc.back().lines.push_back(text_line("x", describe_value(fp32, r.x_bits)));
  if (const auto& e = r.steps.lookup) {
    const bool negative = e->table == mufu_table::ex2_negative;
    const int n = negative ? -e->scale : e->scale;
    const std::uint64_t q = (std::uint64_t(n) << 23) + e->index;
    document_section grid{"on the unit's grid", {}};
    grid.lines.push_back(text_line("q", fmt::format("trunc(|x| × 2^23) = {} = n × 2^23 + k", q)));
    grid.lines.push_back(text_line("n, k", fmt::format("n = {}, k = {} (0x{:06X})", n, e->index, e->index)));
    const exact_rational on_grid = exact_rational(q) / exact_rational(std::uint64_t{1} << 23);
    const exact_rational magnitude = *exact_value_of(fp32, r.x_bits & 0x7FFFFFFFu);
    grid.lines.push_back(text_line("cut", magnitude == on_grid
                                              ? std::string("none: x lies on the 2^-23 grid")
                                              : fmt::format("x has bits below 2^-23: |x| - q × 2^-23 = {} is dropped",
                                                            to_decimal(magnitude - on_grid))));
    doc.push_back(std::move(grid));

    document_section lookup{"lookup", {}};
    const std::string table = table_name(e->table);
    lookup.lines.push_back(text_line(
        "table", fmt::format("{} ({}), the unit's 2^({}k/2^23), captured from an H200", table, name_of(e->table),
                             negative ? "-" : "")));
    lookup.lines.push_back(text_line("entry", fmt::format("{}({}) = {}", table, e->index, describe_value(fp32, e->entry))));
    lookup.lines.push_back(text_line("scale", fmt::format("{}(k) × 2^{}: the exponent field changes by {}, the "
                                                          "fraction is the entry's",
                                                          table, e->scale, e->scale)));
    doc.push_back(std::move(lookup));
  }
  document_section result{"result", {}};
  result.lines.push_back(text_line("", describe_value(fp32, r.result_bits)));
  for (const special_reason reason : r.steps.specials) result.lines.push_back(text_line("", std::string(special_words(reason))));
  doc.push_back(std::move(result));

  document_section compared{"compared with 2^x", {}};
  if (r.exact) {
    const exact_power& p = *r.exact;
    compared.lines.push_back(text_line("2^x", p.value.str(30) + " (to 30 digits)"));
    compared.lines.push_back(text_line("nearest", describe_value(fp32, p.nearest_bits) + ", 2^x rounded to nearest even"));
    const std::optional<exact_rational> result_value = exact_value_of(fp32, r.result_bits);
    if (result_value && (r.result_bits & 0x7F800000u) != 0) {
      const int ulp_exponent = std::max(p.binade, -126) - 23;
      const wide_float error = wide_float(to_double(fp32, r.result_bits)) - p.value;
      const double error_ulps = boost::multiprecision::ldexp(error, -ulp_exponent).convert_to<double>();
      compared.lines.push_back(text_line("error", fmt::format("result - 2^x = {} = {:+.3f} ulp (ulp 2^{})",
                                                              error.str(6), error_ulps, ulp_exponent)));
      const auto steps = static_cast<std::int64_t>(r.result_bits) - static_cast<std::int64_t>(p.nearest_bits);
      compared.lines.push_back(text_line(
          "", steps == 0 ? std::string("the unit's result is the correctly rounded one")
                         : fmt::format("the unit's result is {} fp32 step{} {} the correctly rounded one",
                                       steps < 0 ? -steps : steps, steps == 1 || steps == -1 ? "" : "s",
                                       steps < 0 ? "below" : "above")));
    } else if (r.result_bits != p.nearest_bits) {
      compared.lines.push_back(text_line("", "the unit's result differs from the correctly rounded one"));
    }
  } else {
    compared.lines.push_back(text_line("", "no finite comparison: x is NaN, infinite, >= 128 or <= -200"));
  }
  doc.push_back(std::move(compared));
  return doc;
}

std::string ex2_json(const ex2_report& r) {
  const auto bits = [](std::uint32_t b) { return fmt::format("\"0x{:08X}\"", b); };
  std::string out = fmt::format("{{\n  \"instruction\": \"ex2.approx.ftz.f32\",\n  \"x\": {}", bits(r.x_bits));
  if (const auto& e = r.steps.lookup)
    out += fmt::format(",\n  \"lookup\": {{\"table\": \"{}\", \"index\": {}, \"entry\": {}, \"scale\": {}}}",
                       name_of(e->table), e->index, bits(e->entry), e->scale);
  out += fmt::format(",\n  \"result\": {}", bits(r.result_bits));
  std::string specials;
  for (const special_reason reason : r.steps.specials)
    specials += (specials.empty() ? "\"" : ", \"") + std::string(name_of(reason)) + "\"";
  out += fmt::format(",\n  \"specials\": [{}]", specials);
  if (r.exact) {
    out += fmt::format(",\n  \"two_to_x\": \"{}\",\n  \"correctly_rounded\": {}", r.exact->value.str(30),
                       bits(r.exact->nearest_bits));
  }
  return out + "\n}\n";
}

}  // namespace

int trace_ex2_command(const arguments& args) {
  output_style style = output_style::text;
  bool exact_operands = false;
  const std::vector<option> table{
      output_option(style),
      {"--exact-operands", "", "refuse an X that fp32 cannot hold exactly",
       [&](std::string_view) { exact_operands = true; }},
  };
  if (asks_for_help(args)) return print_help(trace_ex2_help, table);
  const arguments positional = read_options(args, "trace ex2", table, "--");
  if (positional.size() != 1)
    fail(fmt::format("trace ex2: expected one fp32 operand X, got {}", positional.size()));
  const operand_parse parsed = parse_operand(positional[0], fp32);
  if (!parsed.ok()) fail(parsed.error);
  const parsed_operand& x = parsed.operand;
  if (x.fmt != fp32)
    fail(fmt::format("trace ex2: X is {}; ex2.approx.f32 takes fp32 (write fp32:... or a number)", name_of(x.fmt)));
  if (!x.exact) {
    const std::string what = quoted_input(positional[0]) + " is not exactly representable in fp32";
    if (exact_operands) fail("trace ex2: " + what + "; the nearest is " + describe_value(fp32, x.bits));
    note(what + "; using the nearest (ties to even), " + describe_value(fp32, x.bits));
  }

  ex2_report report;
  report.x_bits = x.bits;
  try {
    report.result_bits = ptx::ex2_approx_ftz(float32::from_bits(x.bits), ptx::mufu_tables::shared(), report.steps).bits;
  } catch (const mufu_data_error& error) {
    fail(std::string("trace ex2: ") + error.what());
  }
  const double x_value = to_double(fp32, x.bits);
  if (x_value > -200 && x_value < 128) report.exact = two_to_the(x_value);

  const std::string text =
      style == output_style::json ? ex2_json(report) : render_document(ex2_layout(report), style);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace bitexact::cli
