// add and sub over arrays.
#include <span>

#include <bitexact/host/elementwise.hpp>

#include "elementwise.hpp"

namespace bitexact::python {

py::tuple run_add_sub(operation op, const operand_arrays& operands, const operand_formats& formats, format result,
                      const elementwise_call& call) {
  return with_operation_formats(formats[0], formats[1], result, [&](auto a_tag, auto b_tag, auto r_tag) {
    constexpr format A = decltype(a_tag)::fmt, B = decltype(b_tag)::fmt, R = decltype(r_tag)::fmt;
    const std::span<const value<A>> a(values_of<A>(operands[0], "a", call.count), call.count);
    const std::span<const value<B>> b(values_of<B>(operands[1], "b", call.count), call.count);
    auto out = new_values<R>(call.count);
    const std::span<value<R>> z(writable_values_of<R>(out), call.count);
    const bool adding = op == operation::add;
    const flags raised = each_element<R>(
        call, z.data(),
        [&](std::size_t i, const environment& env) {
          return adding ? add<R>(a[i], b[i], env) : sub<R>(a[i], b[i], env);
        },
        [&](const environment& env) { return adding ? add_each<R>(a, b, z, env) : sub_each<R>(a, b, z, env); });
    return elementwise_result(out, raised, call);
  });
}

}  // namespace bitexact::python
