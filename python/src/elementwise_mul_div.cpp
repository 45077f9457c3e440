// mul and div over arrays.
#include <span>

#include <bitexact/host/elementwise.hpp>

#include "elementwise.hpp"

namespace bitexact::python {

py::tuple run_mul_div(operation op, const operand_arrays& operands, const operand_formats& formats, format result,
                      const elementwise_call& call) {
  return two_operand_arrays(operands, formats, result, call, [&](auto r_tag, auto a, auto b, auto z) {
    constexpr format R = decltype(r_tag)::fmt;
    if (op == operation::mul)
      return each_element<R>(
          call, z.data(), [&](std::size_t i, const environment& env) { return mul<R>(a[i], b[i], env); },
          [&](const environment& env) { return mul_each<R>(a, b, z, env); });
    return each_element<R>(call, z.data(),
                           [&](std::size_t i, const environment& env) { return div<R>(a[i], b[i], env); });
  });
}

}  // namespace bitexact::python
