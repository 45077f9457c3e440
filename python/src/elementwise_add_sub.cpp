// add and sub over arrays.
#include <span>

#include <bitexact/host/elementwise.hpp>

#include "elementwise.hpp"

namespace bitexact::python {

py::tuple run_add_sub(operation op, const operand_arrays& operands, const operand_formats& formats, format result,
                      const elementwise_call& call) {
  const bool adding = op == operation::add;
  return two_operand_arrays(operands, formats, result, call, [&](auto r_tag, auto a, auto b, auto z) {
    constexpr format R = decltype(r_tag)::fmt;
    return each_element<R>(
        call, z.data(),
        [&](std::size_t i, const environment& env) {
          return adding ? add<R>(a[i], b[i], env) : sub<R>(a[i], b[i], env);
        },
        [&](const environment& env) { return adding ? add_each<R>(a, b, z, env) : sub_each<R>(a, b, z, env); });
  });
}

}  // namespace bitexact::python
