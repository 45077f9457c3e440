// One operation with a trace recorder attached, rendered in one of the
// renderers' styles (the JSON one is the record the Python dict is read from).
#include <string>
#include <vector>

#include <bitexact/core/operations.hpp>
#include <bitexact/trace/render.hpp>
#include <bitexact/trace/trace.hpp>

#include "binding.hpp"

namespace bitexact::python {
namespace {

template <class Tag>
typename Tag::value_type operand_as(Tag, const std::vector<std::uint32_t>& bits, std::size_t index) {
  return Tag::value_type::from_bits(bits[index]);
}

trace record_binary(std::string_view op, const std::vector<std::uint32_t>& x, format a, format b, format result,
                    const environment& env) {
  return with_operation_formats(a, b, result, [&](auto a_tag, auto b_tag, auto r_tag) {
    constexpr format R = decltype(r_tag)::fmt;
    trace_recorder recorder;
    const auto first = operand_as(a_tag, x, 0);
    const auto second = operand_as(b_tag, x, 1);
    if (op == "add") add<R>(first, second, env, recorder);
    else if (op == "sub") sub<R>(first, second, env, recorder);
    else if (op == "mul") mul<R>(first, second, env, recorder);
    else div<R>(first, second, env, recorder);
    return recorder.take();
  });
}

trace record_fma(const std::vector<std::uint32_t>& x, const std::vector<format>& formats, format result,
                 const environment& env) {
  if (formats[0] != formats[1])
    throw std::invalid_argument("fma: the factors a and b must share a format; the addend c may differ");
  return with_operation_formats(formats[0], formats[2], result, [&](auto ab_tag, auto c_tag, auto r_tag) {
    trace_recorder recorder;
    fma<decltype(r_tag)::fmt>(operand_as(ab_tag, x, 0), operand_as(ab_tag, x, 1), operand_as(c_tag, x, 2), env,
                              recorder);
    return recorder.take();
  });
}

trace record_unary(std::string_view op, const std::vector<std::uint32_t>& x, format a, format result,
                   const environment& env) {
  return visit_format(a, [&](auto a_tag) {
    return visit_format(result, [&](auto r_tag) {
      trace_recorder recorder;
      if (op == "sqrt") sqrt<decltype(r_tag)::fmt>(operand_as(a_tag, x, 0), env, recorder);
      else convert<decltype(r_tag)::fmt>(operand_as(a_tag, x, 0), env, recorder);
      return recorder.take();
    });
  });
}

std::string render_trace(std::string_view op, const std::vector<std::uint32_t>& bits,
                         const std::vector<std::string>& format_names, std::string_view result_format,
                         std::string_view rounding, std::string_view tiny, bool ftz, bool daz, std::string_view nans,
                         std::uint32_t random_bits, std::string_view style_name) {
  const std::size_t arity = op == "fma" ? 3 : op == "sqrt" || op == "convert" ? 1 : 2;
  if (op != "add" && op != "sub" && op != "mul" && op != "div" && op != "fma" && op != "sqrt" && op != "convert")
    throw std::invalid_argument("trace: unknown operation " + quoted_input(op) +
                                "; expected add, sub, mul, div, fma, sqrt or convert");
  if (bits.size() != arity || format_names.size() != arity)
    throw std::invalid_argument("trace " + std::string(op) + ": expected " + std::to_string(arity) + " operand" +
                                (arity > 1 ? "s" : ""));
  const auto style = output_style_from_name(style_name);
  if (!style) throw std::invalid_argument("unknown style " + quoted_input(style_name) + "; expected text, markdown, latex or json");
  std::vector<format> formats;
  for (const std::string& name : format_names) formats.push_back(format_named(name));
  environment env = environment_of(rounding, tiny, ftz, daz, nans);
  env.random_bits = random_bits;
  const format result = format_named(result_format);
  py::gil_scoped_release unlocked;
  const trace record = arity == 2   ? record_binary(op, bits, formats[0], formats[1], result, env)
                       : arity == 3 ? record_fma(bits, formats, result, env)
                                    : record_unary(op, bits, formats[0], result, env);
  return render(record, *style);
}

}  // namespace

void register_traces(py::module_& m) {
  m.def("_trace", &render_trace, py::arg("op"), py::arg("bits"), py::arg("formats"), py::arg("result_format"),
        py::arg("rounding"), py::arg("tininess"), py::arg("ftz"), py::arg("daz"), py::arg("nans"),
        py::arg("random_bits"), py::arg("style"));
}

}  // namespace bitexact::python
