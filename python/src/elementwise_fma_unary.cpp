// fma, sqrt and convert over arrays.
#include <span>

#include "elementwise.hpp"

namespace bitexact::python {

py::tuple run_fma(const operand_arrays& operands, const operand_formats& formats, format result,
                  const elementwise_call& call) {
  if (formats[0] != formats[1])
    throw std::invalid_argument("fma: the factors a and b must share a format (got " +
                                std::string(name_of(formats[0])) + " and " + std::string(name_of(formats[1])) +
                                "); the addend c may differ");
  // The factors share a format; the addend pairs with it as a binary operand does.
  return with_operation_formats(formats[0], formats[2], result, [&](auto ab_tag, auto c_tag, auto r_tag) {
    constexpr format AB = decltype(ab_tag)::fmt, C = decltype(c_tag)::fmt, R = decltype(r_tag)::fmt;
    const value<AB>* a = values_of<AB>(operands[0], "a", call.count);
    const value<AB>* b = values_of<AB>(operands[1], "b", call.count);
    const value<C>* c = values_of<C>(operands[2], "c", call.count);
    auto out = new_values<R>(call.count);
    const flags raised = each_element<R>(call, writable_values_of<R>(out), [&](std::size_t i, const environment& env) {
      return fma<R>(a[i], b[i], c[i], env);
    });
    return elementwise_result(out, raised, call);
  });
}

py::tuple run_sqrt_convert(operation op, const operand_arrays& operands, const operand_formats& formats,
                           format result, const elementwise_call& call) {
  return visit_format(formats[0], [&](auto a_tag) {
    return visit_format(result, [&](auto r_tag) {
      constexpr format A = decltype(a_tag)::fmt, R = decltype(r_tag)::fmt;
      const value<A>* a = values_of<A>(operands[0], "a", call.count);
      auto out = new_values<R>(call.count);
      const bool root = op == operation::sqrt;
      const flags raised = each_element<R>(call, writable_values_of<R>(out), [&](std::size_t i, const environment& env) {
        return root ? sqrt<R>(a[i], env) : convert<R>(a[i], env);
      });
      return elementwise_result(out, raised, call);
    });
  });
}

}  // namespace bitexact::python
