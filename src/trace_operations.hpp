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
// sqrt convert (1). Operand formats were checked with supported_operand_pair.
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

}  // namespace bitexact::cli
