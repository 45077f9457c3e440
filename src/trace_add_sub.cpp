#include <bitexact/core/operations.hpp>

#include "trace_operations.hpp"

namespace bitexact::cli {

trace trace_add_sub(std::string_view op, format result, const environment& env, const std::vector<parsed_operand>& x) {
  return trace_two_operands(result, x, [&](auto r, auto a, auto b, trace_recorder& recorder) {
    if (op == "add") add<decltype(r)::fmt>(a, b, env, recorder);
    else sub<decltype(r)::fmt>(a, b, env, recorder);
  });
}

}  // namespace bitexact::cli
