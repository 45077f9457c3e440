// One traced operation on runtime formats. Split by operation into several
// translation units: each instantiates the operation for every supported
// combination of formats, which is slow to compile.
#pragma once

#include <string_view>
#include <vector>

#include <bitexact/trace/parse.hpp>
#include <bitexact/trace/trace.hpp>

namespace bitexact::cli {

// op: add sub mul div (2 operands), fma (3: the factors share a format),
// sqrt convert (1). Operand formats were checked with supported_operand_pair, the result
// format chosen by result_format_of (core/dispatch.hpp).
trace trace_operation(std::string_view op, format result, const environment& env,
                      const std::vector<parsed_operand>& operands);

trace trace_add_sub(std::string_view op, format result, const environment& env, const std::vector<parsed_operand>& x);
trace trace_mul_div(std::string_view op, format result, const environment& env, const std::vector<parsed_operand>& x);
trace trace_fma(format result, const environment& env, const std::vector<parsed_operand>& x);
trace trace_unary(std::string_view op, format result, const environment& env, const std::vector<parsed_operand>& x);

// The operand at index, as a value of the format tag names.
template <class Tag>
typename Tag::value_type operand_as(Tag, const std::vector<parsed_operand>& x, std::size_t index) {
  return Tag::value_type::from_bits(x[index].bits);
}

// A two-operand operation traced: operation(result_tag, a, b, recorder) runs it on x[0] and x[1].
template <class Operation>
trace trace_two_operands(format result, const std::vector<parsed_operand>& x, Operation&& operation) {
  return with_operation_formats(x[0].fmt, x[1].fmt, result, [&](auto a, auto b, auto r) {
    trace_recorder recorder;
    operation(r, operand_as(a, x, 0), operand_as(b, x, 1), recorder);
    return recorder.take();
  });
}

}  // namespace bitexact::cli
