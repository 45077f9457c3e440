#include <bitexact/core/operations.hpp>

#include "trace_operations.hpp"

namespace bitexact::cli {

trace trace_fma(format result, const environment& env, const std::vector<parsed_operand>& x) {
  // The factors share a format; the addend pairs with it like a binary operand.
  return with_operation_formats(x[0].fmt, x[2].fmt, result, [&](auto ab, auto c, auto r) {
    trace_recorder recorder;
    fma<decltype(r)::fmt>(operand_as(ab, x, 0), operand_as(ab, x, 1), operand_as(c, x, 2), env, recorder);
    return recorder.take();
  });
}

trace trace_unary(std::string_view op, format result, const environment& env, const std::vector<parsed_operand>& x) {
  return with_formats([&](auto r, auto a) {
    trace_recorder recorder;
    if (op == "sqrt") sqrt<decltype(r)::fmt>(operand_as(a, x, 0), env, recorder);
    else convert<decltype(r)::fmt>(operand_as(a, x, 0), env, recorder);
    return recorder.take();
  }, result, x[0].fmt);
}

trace trace_operation(std::string_view op, format result, const environment& env,
                      const std::vector<parsed_operand>& operands) {
  if (op == "add" || op == "sub") return trace_add_sub(op, result, env, operands);
  if (op == "mul" || op == "div") return trace_mul_div(op, result, env, operands);
  if (op == "fma") return trace_fma(result, env, operands);
  return trace_unary(op, result, env, operands);
}

}  // namespace bitexact::cli
