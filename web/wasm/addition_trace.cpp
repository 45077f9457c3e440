// The page's addition view: two operands as the command reads them, added
// with the rounding mode chosen, the trace laid out as `bitexact trace add A
// B --to FORMAT --round MODE` prints it.
#include <emscripten/emscripten.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include <bitexact/core/operations.hpp>
#include <bitexact/trace/parse.hpp>
#include <bitexact/trace/render.hpp>

#include "json_text.hpp"

namespace bitexact::web {
namespace {

std::string pattern_hex(format f, std::uint32_t bits) { return fmt::format("0x{:0{}X}", bits, (f.width() + 3) / 4); }

std::string operand_json(const parsed_operand& x) {
  return fmt::format(
      "{{\"format\": \"{}\", \"bits\": \"{}\", \"width\": {}, \"exponent_bits\": {}, \"fraction_bits\": {}, "
      "\"value\": {}, \"decimal\": \"{}\", \"exact\": {}}}",
      name_of(x.fmt), pattern_hex(x.fmt, x.bits), x.fmt.width(), x.fmt.exponent_bits, x.fmt.fraction_bits,
      json_quoted(describe_value(x.fmt, x.bits)), to_double(x.fmt, x.bits), x.exact ? "true" : "false");
}

// The command's note for an operand it had to round (it prints it on stderr).
std::string rounding_note(int index, std::string_view text, const parsed_operand& x) {
  const std::string nearest = fmt::format("{} {} = {}", name_of(x.fmt), pattern_hex(x.fmt, x.bits), to_double(x.fmt, x.bits));
  return fmt::format("operand {} {} is not exactly representable in {}; {}", index, quoted_input(text), name_of(x.fmt),
                     x.rounded_to_zero ? "it rounds to zero: using " + nearest
                                       : "using the nearest (ties to even), " + nearest);
}

trace traced_addition(const parsed_operand& a, const parsed_operand& b, format result, const environment& env) {
  return with_operation_formats(a.fmt, b.fmt, result, [&](auto a_tag, auto b_tag, auto result_tag) {
    constexpr format R = decltype(result_tag)::fmt;
    trace_recorder recorder;
    add<R>(decltype(a_tag)::value_type::from_bits(a.bits), decltype(b_tag)::value_type::from_bits(b.bits), env,
           recorder);
    return recorder.take();
  });
}

std::string addition_json(std::string_view a_text, std::string_view b_text, std::string_view result_name,
                          std::string_view rounding_name) {
  std::vector<parsed_operand> operands;
  std::string notes;
  for (const std::string_view text : {a_text, b_text}) {
    const operand_parse parsed = parse_operand(text, fp32);
    if (!parsed.ok()) return error_json(parsed.error);
    operands.push_back(parsed.operand);
    if (!parsed.operand.exact)
      notes += (notes.empty() ? "" : ", ") + json_quoted(rounding_note(static_cast<int>(operands.size()), text, parsed.operand));
  }
  const parsed_operand &a = operands[0], &b = operands[1];
  const std::string operands_json = "[" + operand_json(a) + ", " + operand_json(b) + "]";
  const auto with_operands = [&](std::string_view message) {
    return fmt::format("{{\"error\": {}, \"operands\": {}}}", json_quoted(message), operands_json);
  };
  const auto mode = rounding_mode_from_name(rounding_name);
  if (!mode || *mode == rounding_mode::stochastic)
    return with_operands("unknown rounding mode " + quoted_input(rounding_name) + " (the page offers the six deterministic modes)");
  if (!supported_operand_pair(a.fmt, b.fmt))
    return with_operands(fmt::format("operands of {} and {} cannot be mixed (a mix needs one of them in fp32, as an fp32 "
                                     "accumulator with a narrow value)",
                                     name_of(a.fmt), name_of(b.fmt)));
  std::optional<format> named;
  if (!result_name.empty()) {
    named = format_from_name(result_name);
    if (!named) return with_operands("unknown format " + quoted_input(result_name));
  }
  const std::optional<format> result = result_format_of({a.fmt, b.fmt}, named);
  if (!result)
    return with_operands(fmt::format("operands are {} and {}; choose the result format", name_of(a.fmt), name_of(b.fmt)));
  environment env;
  env.rounding = *mode;
  const trace record = traced_addition(a, b, *result, env);
  return fmt::format("{{\"operands\": {}, \"notes\": [{}], \"trace\": {}}}", operands_json, notes, trace_json(record));
}

}  // namespace
}  // namespace bitexact::web

extern "C" {

// An operand as the command reads it (FORMAT:0xBITS, FORMAT:decimal, inf, nan):
// {"format", "bits", "width", "exponent_bits", "fraction_bits", "value", "decimal", "exact"} or {"error"}.
EMSCRIPTEN_KEEPALIVE const char* bitexact_parse_operand(const char* text) {
  using namespace bitexact;
  const operand_parse parsed = parse_operand(text, fp32);
  return web::handed_to_javascript(parsed.ok() ? web::operand_json(parsed.operand) : web::error_json(parsed.error));
}

// a + b rounded to result_format ("" for the operands' own) in the rounding
// mode named: {"operands", "notes", "trace": {"text", "sections"}} or {"error", ...}.
EMSCRIPTEN_KEEPALIVE const char* bitexact_trace_add(const char* a, const char* b, const char* result_format,
                                                    const char* rounding) {
  return bitexact::web::handed_to_javascript(bitexact::web::addition_json(a, b, result_format, rounding));
}

}
