#include <bitexact/core/operations.hpp>

#include "trace_operations.hpp"

namespace bitexact::cli {

trace trace_mul_div(std::string_view op, format result, const environment& env, const std::vector<parsed_operand>& x) {
  return trace_two_operands(result, x, [&](auto r, auto a, auto b, trace_recorder& recorder) {
    if (op == "mul") mul<decltype(r)::fmt>(a, b, env, recorder);
    else div<decltype(r)::fmt>(a, b, env, recorder);
  });
}

}  // namespace bitexact::cli
