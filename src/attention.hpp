// The parts of `bitexact attention` (src/attention_*.cpp), one file a job:
// the command's options (attention_command.cpp), the .npy files
// (attention_files.cpp), the forward pass (attention_forward.cpp), the
// explanation of one element (attention_explain.cpp), two kernels compared
// (attention_compare.cpp) and the backward pass (attention_backward.cpp).
// What a call computes is the library's (attention/call.hpp); these parse,
// read and write files, and print.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include <bitexact/attention/call.hpp>
#include <bitexact/attention/explain.hpp>
#include <bitexact/hardware/gpu.hpp>
#include <bitexact/testing/check.hpp>
#include <bitexact/testing/npy.hpp>

#include "cli.hpp"
#include "differences.hpp"
#include "npy_files.hpp"

namespace bitexact::cli::attention_parts {

using attention::attention_shape;
using attention::flash_kernel;

// The command line: the call it asks for (the library's attention_call,
// less the shape, which the files give) and the files.
struct attention_options {
  std::string q_path, k_path, v_path;
  attention::attention_call call;
  std::string explain;  // the index of --explain, checked against the shape once the files are read
  std::string out_o, out_lse, expect_o, expect_lse;
  std::vector<attention::model_choice> compare;  // --compare A B: none, or the two kernels
  bool kernel_given = false;  // --preset or --kernel
  // --backward dO: the flash backward pass, from the forward's O and L
  // (--forward-o, --forward-lse; computed by the forward preset when not given).
  std::string backward_do, forward_o, forward_lse;
  std::string expect_dq, expect_dk, expect_dv, expect_delta, out_dq, out_dk, out_dv, out_delta;
  bool backward() const { return !backward_do.empty(); }
};

// A Q, K or V file: its shape as [B, H, N, d] whatever it was written as.
struct operand_tensor {
  std::vector<std::size_t> file_shape;
  std::size_t batch = 1, heads = 1, rows = 0, head_dim = 0;
  std::vector<bfloat16> values;         // bf16 files
  std::vector<std::uint8_t> fp8_bits;   // uint8 files: fp8 bit patterns (e4m3 or e5m2, as the kernel says)
  bool fp8() const { return values.empty(); }
};

// One element of O: its head (b * H + h), row and column.
struct element_index {
  std::size_t head = 0, row = 0, col = 0;
};

// What one run computes: the files' heads and the call, resolved, that computes each.
struct attention_problem {
  attention_options options;
  operand_tensor q, k, v;
  attention::resolved_call call;
  bool four_d = true;
  std::optional<element_index> explain;
  std::size_t head_count() const { return q.batch * q.heads; }
  // The GPU kernel (the command checks that the call has one before it asks).
  const flash_kernel& kernel() const { return *call.kernel; }
};

// fn(q, k, v) on one head of a problem's files, as spans of what the kernel
// takes: bf16 values, or an fp8 kernel's bit patterns.
template <class Fn>
decltype(auto) with_head(const attention_problem& p, std::size_t head, Fn&& fn) {
  const std::size_t q_size = p.q.rows * p.q.head_dim, kv_size = p.k.rows * p.k.head_dim;
  const auto spans = [&](const auto& q, const auto& k, const auto& v) -> decltype(auto) {
    using element = typename std::decay_t<decltype(q)>::value_type;
    return fn(std::span<const element>(q).subspan(head * q_size, q_size),
              std::span<const element>(k).subspan(head * kv_size, kv_size),
              std::span<const element>(v).subspan(head * kv_size, kv_size));
  };
  if (p.q.fp8()) return spans(p.q.fp8_bits, p.k.fp8_bits, p.v.fp8_bits);
  return spans(p.q.values, p.k.values, p.v.values);
}

// What a preset computed: bit patterns (O bf16, L float32), or doubles for paper_reference_fp64.
struct attention_result {
  attention::attention_output bits;
  std::vector<float8_e4m3> o8;  // an e4m3 O (cuDNN's fp8 recipe; bits.o empty)
  std::vector<double> o, lse;
};

// The expected values, read and checked before the (long) computation.
struct expectations {
  std::optional<std::vector<bfloat16>> o;
  std::optional<std::vector<float8_e4m3>> o8;  // an e4m3 O: uint8 bit patterns
  std::optional<std::vector<float32>> lse;  // N rows a head; a padded file's padding checked and dropped
  std::size_t lse_padded_rows = 0;          // the file's rows a head when padded (the memory-efficient backend's)
};

// attention_files.cpp
std::vector<bfloat16> bf16_elements(const npy::array& array, const std::string& path);
operand_tensor read_operand(const std::string& path, std::string_view name);
std::vector<std::size_t> lse_shape(const attention_problem& p);
expectations read_expectations(const attention_problem& p);
void write_outputs(const attention_problem& p, const attention_result& computed);

// attention_forward.cpp
[[noreturn]] void fail_call(const attention::call_error& error);
void check_operand_formats(const attention_problem& p);
attention_problem read_problem(const attention_options& options);
attention_result compute(const attention_problem& p);
int forward_pass(const attention_options& options);

// attention_explain.cpp
element_index parse_element_index(std::string_view text, const operand_tensor& q, bool four_d);
std::string describe_row(const attention_problem& p, std::size_t row);
std::string index_text(const attention_problem& p, std::size_t head, std::size_t row, std::optional<std::size_t> col);
void print_explanation(const attention_problem& p, const element_index& at, std::optional<bfloat16> expected);

// attention_compare.cpp
int compare_kernels(const attention_options& options);

// attention_backward.cpp
int backward_pass(const attention_options& options);

}  // namespace bitexact::cli::attention_parts
