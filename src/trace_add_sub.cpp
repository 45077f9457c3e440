#include <bitexact/core/operations.hpp>

#include "trace_operations.hpp"

namespace bitexact::cli {

trace trace_add_sub(std::string_view op, format result, const environment& env, const std::vector<parsed_operand>& x) {
  return with_formats([&](auto r) {
    return with_operand_pair(x[0].fmt, x[1].fmt, [&](auto a, auto b) {
      trace_recorder recorder;
      constexpr format R = decltype(r)::fmt;
      if (op == "add") add<R>(operand_as(a, x, 0), operand_as(b, x, 1), env, recorder);
      else sub<R>(operand_as(a, x, 0), operand_as(b, x, 1), env, recorder);
      return recorder.take();
    });
  }, result);
}

}  // namespace bitexact::cli
