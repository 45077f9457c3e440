// The cumulative rounding error of one unnormalised output element
// Ō[row][col] = sum over keys of P̄ V, along the keys in the order a semantics
// adds them: the paper's eq. (5) (Qiu & Yao, section 3.3.2, Fig. 6), measured
// on the GPU kernel's arithmetic (flash_forward.hpp) and on the paper's own
// PyTorch flash attention (paper_reference.hpp).
//
// The error after each event is the semantics' running value of Ō minus the
// exact sum (rationals) of the same semantics' own P̄ times V over the keys
// added so far, each earlier block's part multiplied by the semantics' own
// alpha. P̄, V and alpha are taken as that semantics computed them, so that
// only the rounding of the P̄ V accumulation is measured (its additions, and
// the rescales and bf16 stores of the running O between blocks), not the
// rounding of P̄ itself.
//
// Neither semantics is computed a second time here: the kernel's values are
// the traced steps of trace_output_element (explain.hpp), which are checked
// against the emulator; the paper's are replayed from detail::paper_row's
// P̄ and checked against its P V sums and its O after every block.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "../core/format.hpp"
#include "../core/operations.hpp"
#include "../trace/trace.hpp"
#include "explain.hpp"
#include "paper_reference.hpp"

namespace bitexact::attention {

// One event of the accumulation of Ō[row][col].
struct accumulation_event {
  enum class kind {
    key,            // one key's P̄ V added (paper: one fp32 addition; kernel: one key of a fused step)
    padding_step,   // kernel: a fused step over keys past the last, which the kernel runs with P̄ = V = 0
    rescale,        // the O kept from earlier blocks multiplied by alpha
    pv_to_bf16,     // paper: the block's fp32 P V sum stored as bf16 (the einsum's result)
    output_update,  // paper: O = bf16(fp32(O alpha + P V)), the block's sum added to the kept O
  };
  kind what = kind::key;
  int block = 0;       // the K/V block
  int key = -1;        // kind::key: the key added
  int keys_added = 0;  // keys added so far, this one included
  bfloat16 p_bar{}, v{};  // kind::key: P̄ as P̄ V reads it (bf16), and V[key][col]
  // Whether the semantics holds a value of Ō after this event: a key inside a
  // fused step does not (the unit rounds once, after its 16 products).
  bool value_held = false;
  exact_rational value = 0;  // the running Ō, when value_held
  exact_rational exact = 0;  // the exact sum of the semantics' own P̄ V so far (times its alphas)
  // The traced operation that completes here: the addition (paper key), the
  // fused step (kernel, on its last key), the rescale; none otherwise.
  std::optional<trace> operation = std::nullopt;

  bool p_bar_is_one() const { return what == kind::key && p_bar.bits == 0x3F80; }
  exact_rational error() const { return value - exact; }
};

struct cumulative_error_curve {
  int row = 0, col = 0;
  std::vector<accumulation_event> events;  // in the order they happened

  // The event whose error moves furthest from the previous held error (0
  // before the first), among the events of the given kinds that hold a value;
  // nullopt if none. Its jump is its own rounding error, exactly.
  std::optional<std::size_t> largest_jump(std::initializer_list<accumulation_event::kind> kinds) const {
    std::optional<std::size_t> best;
    exact_rational best_size = -1, previous = 0;
    for (std::size_t i = 0; i < events.size(); ++i) {
      const accumulation_event& e = events[i];
      if (!e.value_held) continue;
      const exact_rational error = e.error();
      const exact_rational jump = abs(exact_rational(error - previous));
      previous = error;
      bool counted = false;
      for (const auto k : kinds) counted = counted || e.what == k;
      if (counted && jump > best_size) best = i, best_size = jump;
    }
    return best;
  }
  // The error after the last held event: the whole accumulation's.
  exact_rational final_error() const {
    for (std::size_t i = events.size(); i-- > 0;)
      if (events[i].value_held) return events[i].error();
    return 0;
  }
};

namespace detail {

inline exact_rational exact_of(bfloat16 x) { return *exact_value_of(bf16, x.bits); }
inline exact_rational exact_of(float32 x) { return *exact_value_of(fp32, x.bits); }

}  // namespace detail

// The GPU kernel's accumulation of Ō[row][col], from the row's record and the
// traced steps of trace_output_element, up to the end of P̄ V (the rescales by
// alpha and the fused tensor-core steps, in the order the kernel ran them:
// blocks last to first). One split only: with split-KV each split holds its
// own O, which the combine kernel merges after normalising, so that no single
// running Ō exists (std::invalid_argument).
inline cumulative_error_curve kernel_cumulative_error(const flash_kernel& kernel, const attention_shape& shape,
                                                      std::span<const bfloat16> q, std::span<const bfloat16> k,
                                                      std::span<const bfloat16> v, int row, int col) {
  if (kernel.pv != pv_accumulation::c_operand)
    throw std::invalid_argument("kernel_cumulative_error: P V with the running O as C only (pv_accumulation c_operand; "
                                "fp32_add holds O outside the tensor core's chain)");
  if (kernel.splits != 1)
    throw std::invalid_argument("kernel_cumulative_error: one split only (" + std::to_string(kernel.splits) +
                                " give no single running O)");
  const row_record record = record_row(kernel, shape, q, k, v, row);
  element_trace steps = trace_output_element(kernel, shape, record, v, col);
  const std::size_t d = static_cast<std::size_t>(shape.head_dim);
  const int per_step = kernel.tensor_core.products_per_step;
  cumulative_error_curve curve{row, col, {}};
  exact_rational exact = 0;
  int keys_added = 0;
  for (traced_step& step : steps.steps) {
    if (step.what == traced_step::kind::rescale) {
      const row_block* block = nullptr;
      for (const row_block& b : record.blocks)
        if (b.block == step.block) block = &b;
      exact *= detail::exact_of(*block->alpha);
      accumulation_event e{accumulation_event::kind::rescale, step.block};
      e.keys_added = keys_added, e.value_held = true;
      e.value = *step.record.result_value, e.exact = exact;
      e.operation = std::move(step.record);
      curve.events.push_back(std::move(e));
      continue;
    }
    if (step.what != traced_step::kind::tensor_core) break;  // the normalisation: P̄ V is done
    const row_block* block = nullptr;
    for (const row_block& b : record.blocks)
      if (b.block == step.block) block = &b;
    const int last_key = std::min(step.first_key + per_step, shape.key_rows);
    for (int key = step.first_key; key < last_key; ++key) {
      const bfloat16 p_bar = block->p_bf16[static_cast<std::size_t>(key - block->first_key)];
      const bfloat16 value = v[static_cast<std::size_t>(key) * d + static_cast<std::size_t>(col)];
      exact += detail::exact_of(p_bar) * detail::exact_of(value);
      accumulation_event e{accumulation_event::kind::key, step.block, key, ++keys_added, p_bar, value};
      curve.events.push_back(std::move(e));
    }
    if (last_key <= step.first_key)
      curve.events.push_back({accumulation_event::kind::padding_step, step.block, -1, keys_added});
    accumulation_event& done = curve.events.back();
    done.value_held = true;
    done.value = *step.record.result_value, done.exact = exact;
    done.operation = std::move(step.record);
  }
  return curve;
}

// The paper's accumulation of Ō[row][col] (paper_reference.hpp, under
// autocast or not as `flash` says): per block of 512 keys, first to last, an
// fp32 sum of bf16(P̄) V in key order from +0, stored as bf16, then
// O = bf16(fp32(bf16(O alpha) + P V)). Inside a block the running Ō is
// alpha times the O kept from earlier blocks plus the block's fp32 sum so far
// (exactly: the code adds them only after the block). No rescale event for
// the first block, whose kept O is 0.
inline cumulative_error_curve paper_cumulative_error(const paper_flash& flash, const attention_shape& shape,
                                                     std::span<const bfloat16> q, std::span<const bfloat16> k,
                                                     std::span<const bfloat16> v, int row, int col) {
  const std::size_t d = static_cast<std::size_t>(shape.head_dim), c = static_cast<std::size_t>(col);
  if (row < 0 || row >= shape.query_rows || col < 0 || col >= shape.head_dim)
    throw std::invalid_argument("paper_cumulative_error: row " + std::to_string(row) + ", col " +
                                std::to_string(col) + " is not an element of the head's O");
  detail::paper_row state(flash, shape, row, q.subspan(static_cast<std::size_t>(row) * d, d), k, v);
  cumulative_error_curve curve{row, col, {}};
  const auto mismatch = [](const char* what) {
    throw std::logic_error(std::string("paper_cumulative_error: the replayed ") + what +
                           " disagrees with paper_row's");
  };
  bfloat16 kept_o = bfloat16::zero();  // O after the previous block
  exact_rational exact = 0;
  int keys_added = 0;
  for (int block = 0; state.run_next_block(); ++block) {
    const exact_rational alpha = block == 0 ? exact_rational(0) : detail::exact_of(state.alpha());
    const exact_rational kept_scaled = alpha * detail::exact_of(kept_o);  // not yet rounded: the code does it later
    exact *= alpha;
    float32 sum = float32::zero();
    const std::span<const bfloat16> p_bar = state.p();
    for (std::size_t j = 0; j < p_bar.size(); ++j) {
      const int key = state.first_key() + static_cast<int>(j);
      const bfloat16 value = v[static_cast<std::size_t>(key) * d + c];
      const float32 product = mul<fp32>(p_bar[j], value).result;  // exact unless below fp32's normal range
      auto [added, step] = traced([&](auto& recorder) { return add(sum, product, environment{}, recorder); });
      sum = added.result;
      exact += detail::exact_of(p_bar[j]) * detail::exact_of(value);
      accumulation_event e{accumulation_event::kind::key, block, key, ++keys_added, p_bar[j], value, true};
      e.value = kept_scaled + detail::exact_of(sum), e.exact = exact;
      e.operation = std::move(step);
      curve.events.push_back(std::move(e));
    }
    if (sum.bits != state.pv_fp32()[c].bits) mismatch("P V sum");
    const bfloat16 pv = convert<bf16>(sum).result;
    if (pv.bits != state.pv()[c].bits) mismatch("bf16 P V");
    accumulation_event stored{accumulation_event::kind::pv_to_bf16, block, -1, keys_added};
    stored.value_held = true, stored.value = kept_scaled + detail::exact_of(pv), stored.exact = exact;
    curve.events.push_back(std::move(stored));
    bfloat16 scaled = kept_o;
    if (block > 0) {
      auto [product, step] = traced([&](auto& recorder) { return mul<fp32>(kept_o, state.alpha(), environment{}, recorder); });
      scaled = convert<bf16>(product.result).result;
      accumulation_event e{accumulation_event::kind::rescale, block, -1, keys_added};
      e.value_held = true, e.value = detail::exact_of(scaled) + detail::exact_of(pv), e.exact = exact;
      e.operation = std::move(step);
      curve.events.push_back(std::move(e));
    }
    kept_o = convert<bf16>(add<fp32>(scaled, pv).result).result;
    if (kept_o.bits != state.o()[c].bits) mismatch("O after the block");
    accumulation_event updated{accumulation_event::kind::output_update, block, -1, keys_added};
    updated.value_held = true, updated.value = detail::exact_of(kept_o), updated.exact = exact;
    curve.events.push_back(std::move(updated));
  }
  return curve;
}

}  // namespace bitexact::attention
