// One query row of a flash-attention forward pass, as the emulator computed
// it (flash_forward.hpp), and the computation of one of its output elements
// as a list of traced roundings: the rescales by alpha, the tensor-core steps
// of P V, the normalisation, the combine's multiply-adds and the conversion
// to bf16, each a trace (trace/trace.hpp) that the renderers show. FA2's
// arithmetic in bf16, or FA2's fp8 recipe (bitexact's FP8 kernel: e4m3 P-bar
// and V on the fp8 tensor core, 32 products a step).
//
// The row is recorded from the events of flash_forward_head; the element's
// chain is then replayed from those values with a trace_recorder attached,
// and every intermediate is checked against what the emulator computed, so
// that the explanation can never describe a computation other than the one
// that produced the result.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "../core/format.hpp"
#include "../core/operations.hpp"
#include "../hardware/alu.hpp"
#include "../hardware/libdevice.hpp"
#include "../hardware/mma.hpp"
#include "../trace/trace.hpp"
#include "flash_forward.hpp"

namespace bitexact::attention {

// One K/V block of one row: the softmax_block_event and output_block_event values, kept.
struct row_block {
  int split = 0, block = 0;
  int first_key = 0;  // the block's keys: [first_key, first_key + scores.size())
  float32 block_max{}, running_max{};
  std::optional<float32> alpha;
  int ties = 0;
  std::vector<float32> scores, p;
  std::vector<bfloat16> p_bf16;
  std::vector<float8_e4m3> p_e4m3;  // an fp8 kernel's P-bar, as P V takes it (p_bf16 empty)
  std::array<float32, 4> sums{};
  std::vector<float32> o;  // unnormalised, after the block
};

// One split's end of the row (the one pass without split-KV).
struct row_split_end {
  bool ran = false;  // false: an empty split (no K/V block), O = 0 and L = -inf
  float32 sum{}, inverse{}, lse{};
  std::vector<float32> o;  // normalised fp32
};

// Everything the emulator computed for one query row of one head.
struct row_record {
  int row = 0;
  int block_n = 0;
  std::vector<row_block> blocks;     // in the order they ran: split by split, last block first
  std::vector<row_split_end> splits;  // [splits]
  std::vector<bfloat16> o;           // the row's O
  float32 lse{};                     // and L
};

namespace detail {

struct row_recorder {
  row_record& record;
  void on(const softmax_block_event& e) {
    if (e.row != record.row) return;
    row_block b;
    b.split = e.split, b.block = e.block, b.first_key = e.block * record.block_n;
    b.block_max = e.block_max, b.running_max = e.running_max, b.alpha = e.alpha, b.ties = e.ties;
    b.scores.assign(e.scores.begin(), e.scores.end());
    b.p.assign(e.p.begin(), e.p.end());
    b.p_bf16.assign(e.p_bf16.begin(), e.p_bf16.end());
    b.p_e4m3.assign(e.p_e4m3.begin(), e.p_e4m3.end());
    record.blocks.push_back(std::move(b));
  }
  void on(const output_block_event& e) {
    if (e.row != record.row) return;
    row_block& b = record.blocks.back();  // its softmax event came first
    b.sums = e.sums;
    b.o.assign(e.o.begin(), e.o.end());
  }
  void on(const row_end_event& e) {
    if (e.row != record.row) return;
    row_split_end& end = record.splits[static_cast<std::size_t>(e.split)];
    end.ran = true, end.sum = e.sum, end.inverse = e.inverse, end.lse = e.lse;
    end.o.assign(e.o.begin(), e.o.end());
  }
};

}  // namespace detail

namespace detail {

inline row_record record_row_of(const flash_kernel& kernel, const head_operands& head, int row) {
  const attention_shape& shape = head.shape;
  if (row < 0 || row >= shape.query_rows)
    throw std::invalid_argument("record_row: row " + std::to_string(row) + " is not one of the head's " +
                                std::to_string(shape.query_rows) + " query rows");
  row_record record;
  record.row = row;
  record.block_n = kernel.block_n;
  record.splits.resize(static_cast<std::size_t>(kernel.splits));
  for (row_split_end& end : record.splits) end.o.assign(static_cast<std::size_t>(shape.head_dim), float32::zero());
  row_recorder recorder{record};
  const event_sinks sinks = sinks_for(recorder);
  const std::size_t d = static_cast<std::size_t>(shape.head_dim), rows = static_cast<std::size_t>(shape.query_rows);
  std::vector<bfloat16> o(rows * d);
  std::vector<float32> lse(rows);
  run_slab<bfloat16>(kernel, head, row / 16 * 16, o, lse, &sinks);
  const std::size_t at = static_cast<std::size_t>(row);
  record.o.assign(o.begin() + static_cast<std::ptrdiff_t>(at * d), o.begin() + static_cast<std::ptrdiff_t>((at + 1) * d));
  record.lse = lse[at];
  return record;
}

}  // namespace detail

// Runs the 16-row slab that holds `row` (through every split and the combine)
// and keeps that row's values. q, k, v: one head, as for flash_forward_head.
inline row_record record_row(const flash_kernel& kernel, const attention_shape& shape, std::span<const bfloat16> q,
                             std::span<const bfloat16> k, std::span<const bfloat16> v, int row) {
  detail::check_head(kernel, shape, q.size(), k.size(), v.size(), q.size(), static_cast<std::size_t>(shape.query_rows));
  return detail::record_row_of(kernel, detail::head_operands(shape, kernel.block_n, q, k, v), row);
}

// The same for an fp8 kernel that writes bf16 O (FA2's fp8 recipe): q, k, v
// its inputs' bit patterns.
inline row_record record_row(const flash_kernel& kernel, const attention_shape& shape, std::span<const std::uint8_t> q,
                             std::span<const std::uint8_t> k, std::span<const std::uint8_t> v, int row) {
  detail::check_head(kernel, shape, q.size(), k.size(), v.size(), q.size(), static_cast<std::size_t>(shape.query_rows),
                     true);
  return detail::record_row_of(kernel, detail::head_operands(shape, kernel.block_n, kernel.inputs, q, k, v), row);
}

// One rounding in the computation of an output element.
struct traced_step {
  enum class kind {
    rescale,      // O times alpha before a block's P V
    tensor_core,  // one fused step of P V: keys [first_key, first_key + products)
    block_add,    // pv_accumulation fp32_add: O plus the block's P V, which ran from +0
    normalize,    // O times RN(1 / row sum), at the end of a split
    combine,      // the combine kernel's multiply-add of one split's O
    to_bf16,      // the conversion of the result
  };
  kind what = kind::tensor_core;
  int split = 0;
  int block = -1;      // the K/V block (rescale, tensor_core)
  int first_key = 0;   // tensor_core: the first key of the step
  trace record;
};

struct element_trace {
  int row = 0, col = 0;
  std::vector<traced_step> steps;  // in the order they ran
};

namespace detail {

// The result of a traced step, checked against the value the emulator kept.
template <format F>
value<F> checked(const trace& record, value<F> expected, const char* what) {
  const value<F> result = value<F>::from_bits(static_cast<decltype(expected.bits)>(record.result_bits));
  if (result.bits != expected.bits)
    throw std::logic_error(std::string("trace_output_element: the traced ") + what +
                           " disagrees with the emulator's value");
  return result;
}

// V's column c of one block, keys [first_key, first_key + n), as P V's B
// takes it: elements of format F (bf16, or an fp8 kernel's input format from
// its bit patterns); keys past the end are zero, as the kernel clears them.
template <format F, class Element>
std::vector<value<F>> block_column(std::span<const Element> v, const attention_shape& shape, int first_key,
                                   std::size_t n, std::size_t c) {
  const std::size_t d = static_cast<std::size_t>(shape.head_dim);
  std::vector<value<F>> column(n, value<F>::zero());
  for (std::size_t j = 0; j < n; ++j) {
    const std::size_t key = static_cast<std::size_t>(first_key) + j;
    if (key >= static_cast<std::size_t>(shape.key_rows)) continue;
    if constexpr (std::is_same_v<Element, bfloat16>) column[j] = v[key * d + c];
    else column[j] = value<F>::from_bits(v[key * d + c]);
  }
  return column;
}

// trace_output_element for V of format F (bf16, or an fp8 kernel's input
// format), its elements given as Element (bfloat16, or fp8 bit patterns).
template <format F, class Element>
element_trace trace_output_element_of(const flash_kernel& kernel, const attention_shape& shape, const row_record& record,
                                      std::span<const Element> v, int col) {
  if (col < 0 || col >= shape.head_dim)
    throw std::invalid_argument("trace_output_element: column " + std::to_string(col) + " is not one of the " +
                                std::to_string(shape.head_dim) + " columns");
  const std::size_t c = static_cast<std::size_t>(col);
  const auto gpu = ptx::gpu_environment();
  element_trace result{record.row, col, {}};
  const auto add_step = [&](traced_step::kind what, int split, int block, int first_key, trace record_of_step) {
    result.steps.push_back({what, split, block, first_key, std::move(record_of_step)});
    return &result.steps.back().record;
  };
  const std::size_t per_step = static_cast<std::size_t>(kernel.tensor_core.products_per_step);
  const bool as_c = kernel.pv == pv_accumulation::c_operand;
  for (std::size_t s = 0; s < record.splits.size(); ++s) {
    const int split = static_cast<int>(s);
    float32 acc = float32::zero();
    for (const row_block& b : record.blocks) {
      if (b.split != split) continue;
      if (b.alpha) {  // the emulator skips a rescale by exactly 1, which changes no bit; it is shown all the same
        auto [rescaled, step] = traced([&](auto& recorder) { return mul(acc, *b.alpha, gpu, recorder); });
        acc = rescaled.result;
        add_step(traced_step::kind::rescale, split, b.block, 0, std::move(step));
      }
      // P-bar as P V takes it: bf16, or an fp8 kernel's e4m3.
      const auto pv_steps = [&](auto p_bar) {
        constexpr format P = decltype(p_bar)::value_type::fmt;
        const std::vector<value<F>> column = block_column<F>(v, shape, b.first_key, p_bar.size(), c);
        float32 chain = as_c ? acc : float32::zero();
        for (std::size_t j = 0; j < column.size(); j += per_step) {
          const std::size_t n = std::min(per_step, column.size() - j);
          auto [sum, step] = traced([&](auto& recorder) {
            return fused_multiply_add_step<fp32, P, F>(kernel.tensor_core, p_bar.subspan(j, n),
                                                       std::span<const value<F>>(column).subspan(j, n), chain, recorder);
          });
          chain = sum.result;
          add_step(traced_step::kind::tensor_core, split, b.block, b.first_key + static_cast<int>(j), std::move(step));
        }
        return chain;
      };
      const float32 chain = b.p_e4m3.empty() ? pv_steps(std::span<const bfloat16>(b.p_bf16))
                                             : pv_steps(std::span<const float8_e4m3>(b.p_e4m3));
      if (as_c) {
        acc = chain;
      } else {
        auto [sum, step] = traced([&](auto& recorder) { return add(acc, chain, gpu, recorder); });
        acc = sum.result;
        add_step(traced_step::kind::block_add, split, b.block, 0, std::move(step));
      }
      if (acc.bits != b.o[c].bits)
        throw std::logic_error("trace_output_element: the traced P V steps disagree with the emulator's O");
    }
    const row_split_end& end = record.splits[s];
    if (!end.ran) continue;
    auto [normalized, step] = traced([&](auto& recorder) { return mul(acc, end.inverse, gpu, recorder); });
    checked(*add_step(traced_step::kind::normalize, split, -1, 0, std::move(step)), end.o[c], "normalisation");
    (void)normalized;
  }
  float32 final_value{};
  if (record.splits.size() == 1) {
    final_value = record.splits[0].o[c];
  } else {
    // The combine kernel: its scales are libdevice expf of L_split - L (flash_forward.hpp, combine_splits).
    float32 acc = float32::zero();
    for (std::size_t s = 0; s < record.splits.size(); ++s) {
      const row_split_end& end = record.splits[s];
      const float32 split_lse = end.ran ? end.lse : negative_infinity;
      const float32 scale = ptx::expf_libdevice(ptx::sub_f32(split_lse, record.lse));
      auto [sum, step] = traced([&](auto& recorder) { return fma(scale, end.o[c], acc, gpu, recorder); });
      acc = sum.result;
      add_step(traced_step::kind::combine, static_cast<int>(s), -1, 0, std::move(step));
    }
    final_value = acc;
  }
  auto [converted, step] = traced([&](auto& recorder) { return convert<bf16>(final_value, gpu, recorder); });
  checked(*add_step(traced_step::kind::to_bf16, 0, -1, 0, std::move(step)), record.o[c], "conversion to bf16");
  (void)converted;
  return result;
}

}  // namespace detail

// The computation of O[row][col] from the row's record and the head's V,
// every rounding traced. V past the last key is zero, as in the kernel.
inline element_trace trace_output_element(const flash_kernel& kernel, const attention_shape& shape,
                                          const row_record& record, std::span<const bfloat16> v, int col) {
  if (is_fp8(kernel.inputs))
    throw std::invalid_argument("trace_output_element: the kernel takes " + std::string(name_of(kernel.inputs)) +
                                " V, not bf16");
  return detail::trace_output_element_of<bf16>(kernel, shape, record, v, col);
}

// The same for an fp8 kernel of FA2's recipe: v its input format's bit patterns.
inline element_trace trace_output_element(const flash_kernel& kernel, const attention_shape& shape,
                                          const row_record& record, std::span<const std::uint8_t> v, int col) {
  if (!is_fp8(kernel.inputs)) throw std::invalid_argument("trace_output_element: the kernel takes bf16 V, not fp8 bits");
  return detail::with_fp8_inputs(kernel.inputs, [&](auto tag) {
    return detail::trace_output_element_of<decltype(tag)::fmt>(kernel, shape, record, v, col);
  });
}

namespace detail {

// trace_score_element for Q and K of format F, their elements given as
// Element (bfloat16, or fp8 bit patterns).
template <format F, class Element>
std::vector<trace> trace_score_element_of(const flash_kernel& kernel, const attention_shape& shape,
                                          const row_record& record, std::span<const Element> q,
                                          std::span<const Element> k, int key) {
  const row_block* block = nullptr;
  for (const row_block& b : record.blocks)
    if (key >= b.first_key && key < b.first_key + static_cast<int>(b.scores.size())) block = &b;
  const std::size_t j = block ? static_cast<std::size_t>(key - block->first_key) : 0;
  if (key < 0 || key >= shape.key_rows || block == nullptr || block->scores[j] == negative_infinity)
    throw std::invalid_argument("trace_score_element: row " + std::to_string(record.row) + " has no score for key " +
                                std::to_string(key) + " (masked, or not a key of the head)");
  const std::size_t d = static_cast<std::size_t>(shape.head_dim);
  const std::size_t per_step = static_cast<std::size_t>(kernel.tensor_core.products_per_step);
  const auto row_of = [d](std::span<const Element> x, std::size_t row) {
    std::vector<value<F>> values(d);
    for (std::size_t c = 0; c < d; ++c) values[c] = fp8_element<F>(x[row * d + c]);
    return values;
  };
  const std::vector<value<F>> q_row = row_of(q, static_cast<std::size_t>(record.row));
  const std::vector<value<F>> k_row = row_of(k, static_cast<std::size_t>(key));
  std::vector<trace> steps;
  float32 acc = float32::zero();
  for (std::size_t c = 0; c < d; c += per_step) {
    const std::size_t n = std::min(per_step, d - c);
    auto [sum, step] = traced([&](auto& recorder) {
      return fused_multiply_add_step<fp32, F, F>(kernel.tensor_core, std::span<const value<F>>(q_row).subspan(c, n),
                                                 std::span<const value<F>>(k_row).subspan(c, n), acc, recorder);
    });
    acc = sum.result;
    steps.push_back(std::move(step));
  }
  if (acc.bits != block->scores[j].bits)
    throw std::logic_error("trace_score_element: the traced Q K steps disagree with the emulator's score");
  return steps;
}

}  // namespace detail

// The computation of the score S[row][key] (before any scale), every
// tensor-core step traced: Q's row times K's row over the head dim, in steps
// of the unit's products from +0. A key the row does not see (masked, or in
// no block the row ran) has no score to explain: std::invalid_argument.
inline std::vector<trace> trace_score_element(const flash_kernel& kernel, const attention_shape& shape,
                                              const row_record& record, std::span<const bfloat16> q,
                                              std::span<const bfloat16> k, int key) {
  if (is_fp8(kernel.inputs))
    throw std::invalid_argument("trace_score_element: traces bf16 kernels' scores with bf16 Q and K, not " +
                                std::string(name_of(kernel.inputs)) + " ones (give their bit patterns)");
  return detail::trace_score_element_of<bf16>(kernel, shape, record, q, k, key);
}

// The same for an fp8 kernel of FA2's recipe: q and k its input format's bit
// patterns; the score is the raw sum of products, before the descales.
inline std::vector<trace> trace_score_element(const flash_kernel& kernel, const attention_shape& shape,
                                              const row_record& record, std::span<const std::uint8_t> q,
                                              std::span<const std::uint8_t> k, int key) {
  if (!is_fp8(kernel.inputs)) throw std::invalid_argument("trace_score_element: the kernel takes bf16 Q and K, not fp8 bits");
  return detail::with_fp8_inputs(kernel.inputs, [&](auto tag) {
    return detail::trace_score_element_of<decltype(tag)::fmt>(kernel, shape, record, q, k, key);
  });
}

}  // namespace bitexact::attention
