// Names, environments, values described and parsed, and the one entry of the
// elementwise operations.
#include <array>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <bitexact/testing/check.hpp>
#include <bitexact/trace/names.hpp>
#include <bitexact/trace/parse.hpp>

#include "elementwise.hpp"

namespace bitexact::python {

format format_named(std::string_view name) {
  if (const auto named = format_from_name(name)) return *named;
  throw std::invalid_argument("unknown format " + quoted_input(name) + "; expected one of " +
                              format_names_hint());
}

// One setting by any of its spellings (core/names.hpp), or an error listing them all.
template <class Setting, std::size_t N>
Setting setting_named(const std::array<setting_spelling<Setting>, N>& spellings, std::string_view name,
                      std::string_view what) {
  if (const auto named = setting_from_name(spellings, name)) return *named;
  throw std::invalid_argument("unknown " + std::string(what) + " " + quoted_input(name) + "; expected one of " +
                              setting_names_hint(spellings));
}

rounding_mode rounding_named(std::string_view name) { return setting_named(rounding_spellings, name, "rounding"); }

environment environment_of(std::string_view rounding, std::string_view tiny, bool flush_to_zero,
                           bool denormals_are_zero, std::string_view nans) {
  environment env;
  env.rounding = rounding_named(rounding);
  env.tiny = setting_named(tininess_spellings, tiny, "tininess");
  env.flush_to_zero = flush_to_zero;
  env.denormals_are_zero = denormals_are_zero;
  env.nans = setting_named(nan_policy_spellings, nans, "NaN policy");
  return env;
}

elementwise_call::elementwise_call(std::size_t count_, std::string_view rounding, std::string_view tiny,
                                   bool flush_to_zero, bool denormals_are_zero, std::string_view nans,
                                   const py::object& random_bits_, bool want_flags)
    : count(count_), env(environment_of(rounding, tiny, flush_to_zero, denormals_are_zero, nans)) {
  const bool stochastic = env.rounding == rounding_mode::stochastic;
  if (stochastic && random_bits_.is_none())
    throw std::invalid_argument("rounding='stochastic' needs random_bits: a uint32 array, one per element");
  if (!stochastic && !random_bits_.is_none())
    throw std::invalid_argument("random_bits is read by rounding='stochastic' only, not by " +
                                std::string(name_of(env.rounding)));
  if (stochastic) {
    // Only an array object the caller holds: a converted temporary would die before the loop reads it.
    if (!py::isinstance<py::array>(random_bits_))
      throw std::invalid_argument("random_bits: expected a uint32 NumPy array, one per element");
    const auto bits = py::reinterpret_borrow<py::array>(random_bits_);
    if (bits.ndim() != 1 || !(bits.flags() & py::array::c_style) || bits.itemsize() != 4 ||
        static_cast<std::size_t>(bits.size()) != count)
      throw std::invalid_argument("random_bits: expected a flat contiguous uint32 array of " + std::to_string(count) +
                                  " elements");
    random_bits = static_cast<const std::uint32_t*>(bits.data());
  }
  if (want_flags) {
    element_flags = py::array_t<std::uint8_t>(static_cast<py::ssize_t>(count));
    element_flag_bits = element_flags->mutable_data();
  }
}

py::tuple elementwise_result(py::array out, flags raised, const elementwise_call& call) {
  return py::make_tuple(out, int{raised.bits}, call.element_flags ? py::object(*call.element_flags) : py::none());
}

namespace {

// _elementwise(op, operands, formats, result_format, rounding, tininess, ftz, daz, nans, random_bits, element_flags)
py::tuple elementwise(std::string_view op, const operand_arrays& operands, const std::vector<std::string>& format_names,
                      std::string_view result_format, std::string_view rounding, std::string_view tiny, bool ftz,
                      bool daz, std::string_view nans, const py::object& random_bits, bool element_flags) {
  const std::size_t arity = op == "fma" ? 3 : op == "sqrt" || op == "convert" ? 1 : 2;
  if (operands.size() != arity || format_names.size() != arity)
    throw std::invalid_argument(std::string(op) + " takes " + std::to_string(arity) + " operands");
  operand_formats formats;
  for (const std::string& name : format_names) formats.push_back(format_named(name));
  const std::size_t count = static_cast<std::size_t>(operands[0].size());
  const elementwise_call call(count, rounding, tiny, ftz, daz, nans, random_bits, element_flags);
  // The predicates' own defaults: equal is quiet, less and less_equal signal on any NaN.
  if (op == "equal") return run_compare("equal", false, operands, formats, call);
  if (op == "less" || op == "less_equal") return run_compare(op, true, operands, formats, call);
  if (op == "equal_signaling") return run_compare("equal", true, operands, formats, call);
  if (op == "less_quiet") return run_compare("less", false, operands, formats, call);
  if (op == "less_equal_quiet") return run_compare("less_equal", false, operands, formats, call);
  const format result = format_named(result_format);
  if (op == "add") return run_add_sub(operation::add, operands, formats, result, call);
  if (op == "sub") return run_add_sub(operation::sub, operands, formats, result, call);
  if (op == "mul") return run_mul_div(operation::mul, operands, formats, result, call);
  if (op == "div") return run_mul_div(operation::div, operands, formats, result, call);
  if (op == "fma") return run_fma(operands, formats, result, call);
  if (op == "sqrt") return run_sqrt_convert(operation::sqrt, operands, formats, result, call);
  if (op == "convert") return run_sqrt_convert(operation::convert, operands, formats, result, call);
  throw std::invalid_argument("unknown operation " + quoted_input(op));
}

// Each element described as "bf16:0xC097 (-4.71875)".
std::vector<std::string> describe_values(std::string_view format_name, const std::vector<std::uint32_t>& bits) {
  const format f = format_named(format_name);
  std::vector<std::string> out;
  out.reserve(bits.size());
  for (const std::uint32_t b : bits) out.push_back(describe_value(f, b));
  return out;
}

// parse_operand's result: (bits, format name, exact); a ValueError for text it cannot read.
py::tuple parse(std::string_view text, std::string_view default_format) {
  const operand_parse parsed = parse_operand(text, format_named(default_format));
  if (!parsed.ok()) throw std::invalid_argument(parsed.error);
  return py::make_tuple(parsed.operand.bits, std::string(name_of(parsed.operand.fmt)), parsed.operand.exact);
}

// result_format_of's choice for operands of these formats, by canonical name; None when a mix names no result;
// ValueError for a pair that cannot be mixed (the first and last operand, as the command checks them).
std::optional<std::string> result_format(const std::vector<std::string>& operand_formats,
                                         std::optional<std::string> named) {
  if (operand_formats.empty()) throw std::invalid_argument("result format: no operand formats");
  std::vector<format> formats;
  for (const std::string& name : operand_formats) formats.push_back(format_named(name));
  require_operand_pair(formats.front(), formats.back());  // before asking for a result format, which cannot help
  const std::optional<format> result =
      result_format_of(formats, named ? std::optional<format>(format_named(*named)) : std::nullopt);
  if (!result) return std::nullopt;
  return std::string(name_of(*result));
}

// Each table's rows, every spelling of a value in a list with its enumerator's name first.
template <class Setting, std::size_t N, std::size_t Spellings>
std::vector<std::vector<std::string>> rows_of(const std::array<setting_spelling<Setting, Spellings>, N>& table) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& row : table) {
    rows.emplace_back();
    for (const std::string_view spelling : row.names)
      if (!spelling.empty()) rows.back().emplace_back(spelling);
  }
  return rows;
}

}  // namespace

void register_values(py::module_& m) {
  m.def(
      "_format_info",
      [](std::string_view name) {
        const format f = format_named(name);
        return py::make_tuple(std::string(name_of(f)), f.width(), f.exponent_bits, f.fraction_bits, storage_bytes(f));
      },
      py::arg("name"));
  m.def("_rounding_name", [](std::string_view name) { return std::string(name_of(rounding_named(name))); },
        py::arg("name"));
  m.def("_result_format", &result_format, py::arg("operand_formats"), py::arg("named"));
  m.def("_spellings", [] {
    py::dict tables;
    tables["rounding"] = rows_of(rounding_spellings);
    tables["tininess"] = rows_of(tininess_spellings);
    tables["nans"] = rows_of(nan_policy_spellings);
    tables["format"] = rows_of(format_spellings);
    return tables;
  });
  m.def("_describe", &describe_values, py::arg("format"), py::arg("bits"));
  m.def(
      "_side_by_side",
      [](std::string_view name, std::uint32_t got, std::uint32_t expected, std::string_view reference) {
        return side_by_side(format_named(name), got, expected, reference);
      },
      py::arg("format"), py::arg("got"), py::arg("expected"), py::arg("reference"));
  m.def("_flags_text", [](int bits) { return describe_flags(flags{static_cast<std::uint8_t>(bits)}); },
        py::arg("bits"));
  m.def("_parse_operand", &parse, py::arg("text"), py::arg("default_format"));
}

void register_elementwise(py::module_& m) {
  m.def("_elementwise", &elementwise, py::arg("op"), py::arg("operands"), py::arg("formats"),
        py::arg("result_format"), py::arg("rounding"), py::arg("tininess"), py::arg("ftz"), py::arg("daz"),
        py::arg("nans"), py::arg("random_bits"), py::arg("element_flags"));
}

}  // namespace bitexact::python
