// The flash-attention emulator over arrays, with a preset of the registry
// (attention/kernels.hpp) or a kernel description in JSON; one query row's
// intermediates, and one output element's every rounding as traces.
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <bitexact/attention/call.hpp>
#include <bitexact/attention/explain.hpp>
#include <bitexact/attention/flash_backward.hpp>
#include <bitexact/attention/flash_forward.hpp>
#include <bitexact/attention/kernel_json.hpp>
#include <bitexact/attention/kernels.hpp>
#include <bitexact/attention/paper_reference.hpp>
#include <bitexact/attention/repeated_max.hpp>
#include <bitexact/trace/render.hpp>

#include "binding.hpp"

namespace bitexact::python {
namespace {

using attention::attention_shape;
using attention::flash_kernel;

// What computes: a preset of the registry by name (the first when none is
// named), or a GPU kernel's description given as JSON (kernel=).
attention::model_choice model_of(std::optional<std::string_view> preset_name, const std::optional<std::string>& kernel_json) {
  if (preset_name && kernel_json)
    throw std::invalid_argument("preset and kernel both name what computes; give one");
  if (kernel_json) return attention::model_choice(attention::kernel_from_json(*kernel_json));
  return preset_name ? attention::model_choice(attention::find_preset(*preset_name)) : attention::model_choice();
}

// The keyword arguments of bitexact.attention as the library's call (attention/call.hpp), resolved.
attention::resolved_call call_of(std::optional<std::string_view> preset_name, const std::optional<std::string>& kernel_json,
                                 int batch, int heads, int query_rows, int key_rows, int head_dim, bool causal,
                                 std::optional<double> scale, std::optional<int> splits,
                                 std::optional<std::string_view> gpu_name,
                                 std::optional<std::pair<int, int>> batch_heads, std::optional<double> beta,
                                 std::optional<double> epsilon, bool autocast, int threads = 0,
                                 const std::array<std::optional<double>, 6>& fp8_scales = {}) {
  attention::attention_call call;
  call.model = model_of(preset_name, kernel_json);
  call.fp8_scales = fp8_scales;
  call.shape = {batch, heads, query_rows, key_rows, head_dim, causal};
  call.batch_heads = batch_heads;
  call.scale = scale;
  call.splits = splits;
  if (gpu_name) call.device = find_gpu(*gpu_name);
  if (beta) call.beta = from_double<fp32>(*beta).result;
  if (epsilon) call.epsilon = from_double<fp32>(*epsilon).result;
  call.autocast = autocast;
  call.threads = threads;
  return attention::resolve_call(call);
}

// q [heads][query_rows][head_dim], k and v [heads][key_rows][head_dim], flat:
// (o, lse) as bf16 and fp32 bit patterns, or as doubles for the fp64 paper preset.
py::tuple attention_call(const py::array& q, const py::array& k, const py::array& v, int batch, int heads,
                         int query_rows, int key_rows, int head_dim, bool causal, std::optional<double> scale,
                         std::optional<int> splits, std::optional<std::string_view> gpu_name,
                         std::optional<std::pair<int, int>> batch_heads, std::optional<std::string_view> preset_name,
                         const std::optional<std::string>& kernel_json, std::optional<double> beta,
                         std::optional<double> epsilon, bool autocast, int threads) {
  const attention::resolved_call call = call_of(preset_name, kernel_json, batch, heads, query_rows, key_rows, head_dim,
                                                causal, scale, splits, gpu_name, batch_heads, beta, epsilon, autocast,
                                                threads);
  const std::size_t head_count = call.head_count();
  const std::size_t q_size = head_count * static_cast<std::size_t>(query_rows) * static_cast<std::size_t>(head_dim);
  const std::size_t kv_size = head_count * static_cast<std::size_t>(key_rows) * static_cast<std::size_t>(head_dim);
  const std::size_t rows = head_count * static_cast<std::size_t>(query_rows);
  const std::span<const bfloat16> qs(values_of<bf16>(q, "q", q_size), q_size);
  const std::span<const bfloat16> ks(values_of<bf16>(k, "k", kv_size), kv_size);
  const std::span<const bfloat16> vs(values_of<bf16>(v, "v", kv_size), kv_size);
  if (call.fp64()) {
    py::array_t<double> o(static_cast<py::ssize_t>(q_size)), lse(static_cast<py::ssize_t>(rows));
    {
      py::gil_scoped_release unlocked;
      attention::forward_fp64(call, qs, ks, vs, {o.mutable_data(), q_size}, {lse.mutable_data(), rows});
    }
    return py::make_tuple(o, lse);
  }
  auto o = new_values<bf16>(q_size);
  auto lse = new_values<fp32>(rows);
  if (call.kernel) ptx::mufu_tables::shared();  // loads the tables (or throws) while the GIL is held
  {
    py::gil_scoped_release unlocked;
    attention::forward(call, qs, ks, vs, {writable_values_of<bf16>(o), q_size}, {writable_values_of<fp32>(lse), rows});
  }
  return py::make_tuple(o, lse);
}

// The bytes of a flat, C-contiguous array of count fp8 bit patterns (uint8).
std::span<const std::uint8_t> fp8_bits_of(const py::array& array, const char* what, std::size_t count,
                                          format inputs) {
  if (array.ndim() != 1 || !(array.flags() & py::array::c_style) || array.itemsize() != 1 ||
      static_cast<std::size_t>(array.size()) != count)
    throw std::invalid_argument(std::string(what) + ": expected a flat contiguous array of " + std::to_string(count) +
                                " 8-bit patterns of " + std::string(name_of(inputs)) + " (x.view(torch.uint8))");
  return {static_cast<const std::uint8_t*>(array.data()), count};
}

// An fp8 kernel's call (attention/call.hpp's forward on fp8 bit patterns): q
// [heads][query_rows][head_dim], k and v [heads][key_rows][head_dim], flat
// uint8 patterns of the kernel's input format; scales the six of
// fp8_scale_names (None: 1); beta and epsilon the stabilized rule's (None: the
// kernel's). Returns (o, lse): O's bit patterns in the kernel's o_format (e4m3
// uint8 or bf16 uint16) and L's fp32 ones.
py::tuple attention_fp8_call(const py::array& q, const py::array& k, const py::array& v, int batch, int heads,
                             int query_rows, int key_rows, int head_dim, bool causal, std::optional<double> scale,
                             const std::array<std::optional<double>, 6>& scales,
                             std::optional<std::string_view> gpu_name, std::optional<std::string_view> preset_name,
                             const std::optional<std::string>& kernel_json, int threads, std::optional<double> beta,
                             std::optional<double> epsilon) {
  attention::attention_call call;
  call.model = model_of(preset_name, kernel_json);
  call.shape = {batch, heads, query_rows, key_rows, head_dim, causal};
  call.scale = scale;
  if (gpu_name) call.device = find_gpu(*gpu_name);
  if (beta) call.beta = from_double<fp32>(*beta).result;
  if (epsilon) call.epsilon = from_double<fp32>(*epsilon).result;
  call.threads = threads;
  call.fp8_scales = scales;
  const attention::resolved_call r = attention::resolve_call(call);
  if (!r.fp8())
    throw std::invalid_argument(call.model.name() + " takes bf16 Q, K and V (uint16 bit patterns), without fp8 scales; one-byte Q, K and V and the "
                                "scales are for fp8 kernels (" +
                                attention::preset_names_where([](const attention::preset& p) {
                                  return p.description && attention::is_fp8(p.description().arithmetic.inputs);
                                }) + ")");
  const std::size_t head_count = r.head_count();
  const std::size_t q_size = head_count * static_cast<std::size_t>(query_rows) * static_cast<std::size_t>(head_dim);
  const std::size_t kv_size = head_count * static_cast<std::size_t>(key_rows) * static_cast<std::size_t>(head_dim);
  const std::size_t rows = head_count * static_cast<std::size_t>(query_rows);
  const format inputs = r.kernel->inputs;
  const auto qs = fp8_bits_of(q, "q", q_size, inputs), ks = fp8_bits_of(k, "k", kv_size, inputs),
             vs = fp8_bits_of(v, "v", kv_size, inputs);
  ptx::mufu_tables::shared();  // loads the tables (or throws) while the GIL is held
  // O in the kernel's format: e4m3 (cuDNN's recipe) or bf16 (FA2's).
  const auto computed = [&](auto o_tag) {
    constexpr format out = decltype(o_tag)::fmt;
    auto o = new_values<out>(q_size);
    auto lse = new_values<fp32>(rows);
    {
      py::gil_scoped_release unlocked;
      attention::forward(r, qs, ks, vs, std::span<value<out>>(writable_values_of<out>(o), q_size),
                         std::span<float32>(writable_values_of<fp32>(lse), rows));
    }
    return py::make_tuple(o, lse);
  };
  if (r.o_format() == e4m3) return computed(format_tag<e4m3>{});
  return computed(format_tag<bf16>{});
}

template <format F>
py::array bits_array(const std::vector<value<F>>& values) {
  auto out = new_values<F>(values.size());
  std::copy(values.begin(), values.end(), writable_values_of<F>(out));
  return py::array(out);
}

template <std::size_t N>
py::array bits_array(const std::array<float32, N>& values) {
  return bits_array(std::vector<float32>(values.begin(), values.end()));
}

py::dict row_dict(const attention::row_record& record) {
  py::list blocks;
  for (const attention::row_block& b : record.blocks) {
    py::dict block;
    block["split"] = b.split;
    block["block"] = b.block;
    block["first_key"] = b.first_key;
    block["block_max"] = b.block_max.bits;
    block["running_max"] = b.running_max.bits;
    block["alpha"] = b.alpha ? py::object(py::int_(b.alpha->bits)) : py::none();
    block["ties"] = b.ties;
    block["scores"] = bits_array(b.scores);
    block["p"] = bits_array(b.p);
    block["p_bf16"] = bits_array(b.p_bf16);
    if (!b.p_e4m3.empty()) block["p_e4m3"] = bits_array(b.p_e4m3);
    block["sums"] = bits_array(b.sums);
    block["o"] = bits_array(b.o);
    blocks.append(block);
  }
  py::list splits;
  for (const attention::row_split_end& s : record.splits) {
    py::dict end;
    end["ran"] = s.ran;
    end["sum"] = s.sum.bits;
    end["inverse"] = s.inverse.bits;
    end["lse"] = s.lse.bits;
    end["o"] = bits_array(s.o);
    splits.append(end);
  }
  py::dict row;
  row["row"] = record.row;
  row["block_n"] = record.block_n;
  row["blocks"] = blocks;
  row["splits"] = splits;
  row["o"] = bits_array(record.o);
  row["lse"] = record.lse.bits;
  return row;
}

constexpr std::string_view step_kind_name(attention::traced_step::kind kind) {
  switch (kind) {
    case attention::traced_step::kind::rescale: return "rescale";
    case attention::traced_step::kind::tensor_core: return "tensor_core";
    case attention::traced_step::kind::block_add: return "block_add";
    case attention::traced_step::kind::normalize: return "normalize";
    case attention::traced_step::kind::combine: return "combine";
    case attention::traced_step::kind::to_bf16: return "to_bf16";
  }
  return "?";
}

// One head's query row through a GPU kernel: its intermediates as a dict, and
// with col >= 0 the traced steps of O[row][col] rendered in style.
py::dict attention_row(const py::array& q, const py::array& k, const py::array& v, int query_rows, int key_rows,
                       int head_dim, int row, int col, bool causal, std::optional<double> scale,
                       std::optional<int> splits, std::optional<std::string_view> gpu_name,
                       std::optional<std::pair<int, int>> batch_heads,
                       std::optional<std::string_view> preset_name, const std::optional<std::string>& kernel_json,
                       std::optional<double> beta, std::optional<double> epsilon, std::string_view style_name,
                       const std::array<std::optional<double>, 6>& scales) {
  const attention::resolved_call call = call_of(preset_name, kernel_json, 1, 1, query_rows, key_rows, head_dim, causal,
                                                scale, splits, gpu_name, batch_heads, beta, epsilon, true, 0, scales);
  if (!call.kernel)
    throw std::invalid_argument("attention_row records a GPU kernel's blocks and splits; " + call.call.model.name() +
                                " is the paper's PyTorch arithmetic, not a GPU kernel");
  const auto style = output_style_from_name(style_name);
  if (!style) throw std::invalid_argument("unknown style " + quoted_input(style_name) + "; expected text, markdown, latex or json");
  const std::size_t q_size = static_cast<std::size_t>(query_rows) * static_cast<std::size_t>(head_dim);
  const std::size_t kv_size = static_cast<std::size_t>(key_rows) * static_cast<std::size_t>(head_dim);
  const flash_kernel& kernel = *call.kernel;
  // The element's trace follows FA2's steps (explain.hpp); another kernel's row is recorded, not traced.
  if (col >= 0 && !attention::explainable(kernel))
    throw std::invalid_argument("attention_row traces O[row][col] through FA2's arithmetic, bf16 or its fp8 recipe (" +
                                attention::explainable_preset_names() + "), which " + call.call.model.name() +
                                " does not compute with; leave col out");
  ptx::mufu_tables::shared();
  attention::row_record record;
  attention::element_trace element;
  std::vector<std::string> rendered;
  // The head as the kernel takes it: bf16, or an fp8 kernel's bit patterns.
  const auto trace = [&](auto qs, auto ks, auto vs) {
    py::gil_scoped_release unlocked;
    record = attention::record_row(kernel, call.head, qs, ks, vs, row);
    if (col >= 0) element = attention::trace_output_element(kernel, call.head, record, vs, col);
    for (const attention::traced_step& step : element.steps) rendered.push_back(render(step.record, *style));
  };
  if (call.fp8())
    trace(fp8_bits_of(q, "q", q_size, kernel.inputs), fp8_bits_of(k, "k", kv_size, kernel.inputs),
          fp8_bits_of(v, "v", kv_size, kernel.inputs));
  else
    trace(std::span<const bfloat16>(values_of<bf16>(q, "q", q_size), q_size),
          std::span<const bfloat16>(values_of<bf16>(k, "k", kv_size), kv_size),
          std::span<const bfloat16>(values_of<bf16>(v, "v", kv_size), kv_size));
  py::dict out = row_dict(record);
  if (col >= 0) {
    py::list steps;
    for (std::size_t i = 0; i < element.steps.size(); ++i) {
      const attention::traced_step& step = element.steps[i];
      py::dict s;
      s["kind"] = std::string(step_kind_name(step.what));
      s["split"] = step.split;
      s["block"] = step.block;
      s["first_key"] = step.first_key;
      s["trace"] = rendered[i];
      steps.append(s);
    }
    out["col"] = col;
    out["steps"] = steps;
  }
  return out;
}

// The leading indicator's kernel: a GPU kernel with FA2's arithmetic, whose
// P the indicator replays (repeated_max.hpp), resolved for the call (the
// scores' head dim chooses its tiles); the rule's epsilon stays the kernel's
// (the tie test's is the call's eps).
flash_kernel indicator_kernel(std::optional<std::string_view> preset_name, const std::optional<std::string>& kernel_json,
                              int batch, int heads, int query_rows, int key_rows, int head_dim, bool causal,
                              std::optional<double> scale, std::optional<int> splits,
                              std::optional<std::string_view> gpu_name, std::optional<std::pair<int, int>> batch_heads,
                              std::optional<double> beta) {
  const attention::resolved_call call = call_of(preset_name, kernel_json, batch, heads, query_rows, key_rows, head_dim,
                                                causal, scale, splits, gpu_name, batch_heads, beta, std::nullopt, true);
  if (!call.kernel || !attention::has_flash2_arithmetic(*call.kernel))
    throw std::invalid_argument("repeated_max counts the GPU kernel's P as FA2's arithmetic computes it (" +
                                attention::flash2_preset_names() + "), not " + call.call.model.name() + "'s");
  return *call.kernel;
}

// Per head and per row, as arrays: [heads] counts and [heads][query_rows] rows.
py::dict indicator_dict(const std::vector<std::vector<attention::row_repeated_max>>& heads_rows) {
  const std::size_t heads = heads_rows.size(), rows = heads ? heads_rows[0].size() : 0;
  py::array_t<std::int64_t> head_rows(static_cast<py::ssize_t>(heads)), repeated(static_cast<py::ssize_t>(heads)),
      twice(static_cast<py::ssize_t>(heads)), twice_final(static_cast<py::ssize_t>(heads)), most(static_cast<py::ssize_t>(heads));
  py::array_t<bool> row_repeated(static_cast<py::ssize_t>(heads * rows));
  py::array_t<std::int32_t> row_ones(static_cast<py::ssize_t>(heads * rows)), row_ones_final(static_cast<py::ssize_t>(heads * rows));
  for (std::size_t h = 0; h < heads; ++h) {
    attention::repeated_max_counts counts;
    counts.rows = static_cast<int>(rows);
    for (std::size_t r = 0; r < rows; ++r) {
      const attention::row_repeated_max& row = heads_rows[h][r];
      counts.rows_with_max_repeated += row.max_repeated;
      counts.rows_with_p_bar_one_twice += row.p_bar_ones >= 2;
      counts.rows_with_p_bar_one_twice_at_final_max += row.p_bar_ones_at_final_max >= 2;
      counts.most_p_bar_ones_in_a_row = std::max(counts.most_p_bar_ones_in_a_row, row.p_bar_ones);
      row_repeated.mutable_data()[h * rows + r] = row.max_repeated;
      row_ones.mutable_data()[h * rows + r] = row.p_bar_ones;
      row_ones_final.mutable_data()[h * rows + r] = row.p_bar_ones_at_final_max;
    }
    head_rows.mutable_data()[h] = counts.rows;
    repeated.mutable_data()[h] = counts.rows_with_max_repeated;
    twice.mutable_data()[h] = counts.rows_with_p_bar_one_twice;
    twice_final.mutable_data()[h] = counts.rows_with_p_bar_one_twice_at_final_max;
    most.mutable_data()[h] = counts.most_p_bar_ones_in_a_row;
  }
  py::dict out;
  out["rows"] = head_rows;
  out["rows_with_max_repeated"] = repeated;
  out["rows_with_p_bar_one_twice"] = twice;
  out["rows_with_p_bar_one_twice_at_final_max"] = twice_final;
  out["most_p_bar_ones_in_a_row"] = most;
  out["row_max_repeated"] = row_repeated;
  out["row_p_bar_ones"] = row_ones;
  out["row_p_bar_ones_at_final_max"] = row_ones_final;
  return out;
}

// scores [heads][query_rows][key_rows] (fp32 bits), or q and k (bf16 bits) when scores is None.
py::dict repeated_max_call(const std::optional<py::array>& scores, const std::optional<py::array>& q,
                           const std::optional<py::array>& k, int batch, int heads, int query_rows, int key_rows,
                           int head_dim, bool causal, std::optional<double> scale, std::optional<int> splits,
                           std::optional<std::string_view> gpu_name, std::optional<std::pair<int, int>> batch_heads,
                           std::optional<std::string_view> preset_name, const std::optional<std::string>& kernel_json,
                           std::optional<double> beta, std::optional<double> epsilon) {
  const flash_kernel kernel = indicator_kernel(preset_name, kernel_json, batch, heads, query_rows, key_rows, head_dim,
                                               causal, scale, splits, gpu_name, batch_heads, beta);
  const attention_shape shape{1, 1, query_rows, key_rows, head_dim, causal};
  const std::optional<float32> tie_epsilon =
      epsilon ? std::optional<float32>(from_double<fp32>(*epsilon).result) : std::nullopt;
  const std::size_t head_count = static_cast<std::size_t>(batch) * static_cast<std::size_t>(heads);
  const std::size_t s_head = static_cast<std::size_t>(query_rows) * static_cast<std::size_t>(key_rows);
  const std::size_t q_head = static_cast<std::size_t>(query_rows) * static_cast<std::size_t>(head_dim);
  const std::size_t k_head = static_cast<std::size_t>(key_rows) * static_cast<std::size_t>(head_dim);
  std::span<const float32> ss;
  std::span<const bfloat16> qs, ks;
  if (scores) ss = {values_of<fp32>(*scores, "scores", head_count * s_head), head_count * s_head};
  else {
    qs = {values_of<bf16>(*q, "q", head_count * q_head), head_count * q_head};
    ks = {values_of<bf16>(*k, "k", head_count * k_head), head_count * k_head};
  }
  attention::p_bar_one_arguments();  // loads the tables (or throws) while the GIL is held
  std::vector<std::vector<attention::row_repeated_max>> rows(head_count);
  {
    py::gil_scoped_release unlocked;
    for (std::size_t h = 0; h < head_count; ++h) {
      const std::vector<float32> computed =
          scores ? std::vector<float32>() : attention::head_scores(kernel, shape, qs.subspan(h * q_head, q_head), ks.subspan(h * k_head, k_head));
      rows[h] = attention::repeated_max_rows(kernel, shape, scores ? ss.subspan(h * s_head, s_head) : std::span<const float32>(computed),
                                             tie_epsilon);
    }
  }
  return indicator_dict(rows);
}

// What the indicator's kernel chose for a call, for the PyTorch form of the indicator.
py::dict kernel_parameters(std::optional<std::string_view> preset_name, const std::optional<std::string>& kernel_json,
                           int batch, int heads, int query_rows, int key_rows, int head_dim, bool causal,
                           std::optional<double> scale, std::optional<int> splits,
                           std::optional<std::string_view> gpu_name, std::optional<std::pair<int, int>> batch_heads,
                           std::optional<double> beta) {
  const flash_kernel kernel = indicator_kernel(preset_name, kernel_json, batch, heads, query_rows, key_rows, head_dim,
                                               causal, scale, splits, gpu_name, batch_heads, beta);
  py::dict out;
  out["block_m"] = kernel.block_m;
  out["block_n"] = kernel.block_n;
  out["splits"] = kernel.splits;
  out["unfused_scale"] = kernel.unfused_scale;
  out["scale"] = kernel.scale.bits;
  out["scale_log2"] = kernel.scale_log2.bits;
  if (kernel.stabilize) {
    out["beta"] = kernel.stabilize->beta.bits;
    out["epsilon"] = kernel.stabilize->epsilon.bits;
    out["across_blocks"] = kernel.stabilize->across_blocks;
  }
  return out;
}

// The registry, in its order: (name, one-line summary) of every preset.
py::list preset_list() {
  py::list out;
  for (const attention::preset& p : attention::presets())
    out.append(py::make_tuple(std::string(p.name), attention::preset_summary(p)));
  return out;
}

// A GPU kernel preset's description as JSON text (kernel_json.hpp's fields).
std::string kernel_description_json(std::string_view name) {
  return attention::kernel_to_json(attention::find_kernel(name)).dump();
}

// The GPU records (hardware/gpu.hpp), the default first: (name, summary, SM count, architecture).
py::list gpu_list() {
  py::list out;
  for (const gpu& g : gpus) out.append(py::make_tuple(std::string(g.name), std::string(g.summary), g.sm_count, std::string(g.arch->name)));
  return out;
}

py::tuple p_bar_one_range_bits() {
  const attention::p_bar_one_range& range = attention::p_bar_one_arguments();
  return py::make_tuple(range.lowest.bits, range.highest.bits);
}

}  // namespace

// PyTorch's flash backward (attention/flash_backward.hpp) over every head:
// (dq, dk, dv, delta), dQ in the deterministic order of a call of
// batch_heads' B and H on the GPU.
py::tuple attention_backward_call(const py::array& q, const py::array& k, const py::array& v, const py::array& o,
                                  const py::array& lse, const py::array& d_o, int batch, int heads, int query_rows,
                                  int key_rows, int head_dim, bool causal, std::optional<double> scale,
                                  std::optional<std::string_view> gpu_name,
                                  std::optional<std::pair<int, int>> batch_heads, int threads) {
  const attention::resolved_call call = call_of(std::nullopt, std::nullopt, batch, heads, query_rows, key_rows, head_dim,
                                                causal, scale, std::nullopt, gpu_name, batch_heads, std::nullopt,
                                                std::nullopt, true, threads);
  const attention::flash_backward_kernel kernel = attention::backward_kernel(call);
  const std::size_t head_count = call.head_count();
  const std::size_t rows = static_cast<std::size_t>(query_rows), d = static_cast<std::size_t>(head_dim);
  const std::size_t q_head = rows * d, kv_head = static_cast<std::size_t>(key_rows) * d;
  const std::span<const bfloat16> qs(values_of<bf16>(q, "q", head_count * q_head), head_count * q_head);
  const std::span<const bfloat16> ks(values_of<bf16>(k, "k", head_count * kv_head), head_count * kv_head);
  const std::span<const bfloat16> vs(values_of<bf16>(v, "v", head_count * kv_head), head_count * kv_head);
  const std::span<const bfloat16> os(values_of<bf16>(o, "o", head_count * q_head), head_count * q_head);
  const std::span<const bfloat16> dos(values_of<bf16>(d_o, "d_o", head_count * q_head), head_count * q_head);
  const std::span<const float32> ls(values_of<fp32>(lse, "lse", head_count * rows), head_count * rows);
  auto dq = new_values<bf16>(head_count * q_head), dk = new_values<bf16>(head_count * kv_head),
       dv = new_values<bf16>(head_count * kv_head);
  auto delta = new_values<fp32>(head_count * rows);
  const attention::call_gradients out{{writable_values_of<bf16>(dq), head_count * q_head},
                                      {writable_values_of<bf16>(dk), head_count * kv_head},
                                      {writable_values_of<bf16>(dv), head_count * kv_head},
                                      {writable_values_of<fp32>(delta), head_count * rows}};
  ptx::mufu_tables::shared();  // loads the tables (or throws) while the GIL is held
  {
    py::gil_scoped_release unlocked;  // taken back before the tuple is made
    attention::backward(call, kernel, qs, ks, vs, os, ls, dos, out);
  }
  return py::make_tuple(dq, dk, dv, delta);
}

void register_attention(py::module_& m) {
  m.def("_attention", &attention_call, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("batch"), py::arg("heads"),
        py::arg("query_rows"), py::arg("key_rows"), py::arg("head_dim"), py::arg("causal"), py::arg("scale"),
        py::arg("splits"), py::arg("gpu"), py::arg("batch_heads"), py::arg("preset"), py::arg("kernel"),
        py::arg("beta"), py::arg("epsilon"), py::arg("autocast"), py::arg("threads"));
  m.def("_attention_fp8", &attention_fp8_call, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("batch"),
        py::arg("heads"), py::arg("query_rows"), py::arg("key_rows"), py::arg("head_dim"), py::arg("causal"),
        py::arg("scale"), py::arg("scales"), py::arg("gpu"), py::arg("preset"), py::arg("kernel"), py::arg("threads"),
        py::arg("beta") = py::none(), py::arg("epsilon") = py::none());
  m.def("_attention_row", &attention_row, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("query_rows"),
        py::arg("key_rows"), py::arg("head_dim"), py::arg("row"), py::arg("col"), py::arg("causal"),
        py::arg("scale"), py::arg("splits"), py::arg("gpu"), py::arg("batch_heads"), py::arg("preset"),
        py::arg("kernel"), py::arg("beta"), py::arg("epsilon"), py::arg("style"), py::arg("scales"));
  m.def("_repeated_max", &repeated_max_call, py::arg("scores"), py::arg("q"), py::arg("k"), py::arg("batch"),
        py::arg("heads"), py::arg("query_rows"), py::arg("key_rows"), py::arg("head_dim"), py::arg("causal"),
        py::arg("scale"), py::arg("splits"), py::arg("gpu"), py::arg("batch_heads"), py::arg("preset"),
        py::arg("kernel"), py::arg("beta"), py::arg("epsilon"));
  m.def("_flash_kernel_parameters", &kernel_parameters, py::arg("preset"), py::arg("kernel"), py::arg("batch"),
        py::arg("heads"), py::arg("query_rows"), py::arg("key_rows"), py::arg("head_dim"), py::arg("causal"),
        py::arg("scale"), py::arg("splits"), py::arg("gpu"), py::arg("batch_heads"), py::arg("beta"));
  m.def("_attention_backward", &attention_backward_call, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("o"),
        py::arg("lse"), py::arg("d_o"), py::arg("batch"), py::arg("heads"), py::arg("query_rows"),
        py::arg("key_rows"), py::arg("head_dim"), py::arg("causal"), py::arg("scale"), py::arg("gpu"),
        py::arg("batch_heads"), py::arg("threads"));
  m.def("_attention_presets", &preset_list);
  m.def("_kernel_description", &kernel_description_json, py::arg("name"));
  m.def("_p_bar_one_range", &p_bar_one_range_bits);
  m.def("_gpus", &gpu_list);
}

}  // namespace bitexact::python
