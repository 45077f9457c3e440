// One attention call as a user makes it: what computes (a preset of the
// registry or a GPU kernel's description), on which GPU, with which options;
// checked, resolved and run on every head here, so that the command
// (`bitexact attention`) and the binding (`bitexact.attention`) only parse
// their arguments into an attention_call and print what comes back.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "../hardware/gpu.hpp"
#include "../host/parallel.hpp"
#include "flash_backward.hpp"
#include "flash_forward.hpp"
#include "kernel.hpp"
#include "kernels.hpp"
#include "paper_reference.hpp"
#include "shape.hpp"

namespace bitexact::attention {

// What computes a call: a preset by name (the registry's first by default), or
// a GPU kernel's description.
class model_choice {
 public:
  model_choice() = default;
  explicit model_choice(const preset& named) : named_(&named) {}
  explicit model_choice(kernel_description described) : described_(std::move(described)) {}

  std::string name() const { return described_ ? described_->name : std::string(named_->name); }
  bool gpu_kernel() const { return described_ || named_->kind == preset_kind::gpu_kernel; }
  bool is(preset_kind kind) const { return !described_ && named_->kind == kind; }
  // A GPU kernel's description; std::invalid_argument for the paper's presets.
  kernel_description description() const { return described_ ? *described_ : find_kernel(named_->name); }
  bool stabilized() const {
    return gpu_kernel() ? description().arithmetic.stabilize.has_value() : is(preset_kind::paper_reference_stabilized);
  }
  // A kernel whose O the explanations trace (explainable: FA2's arithmetic, bf16 or its fp8 recipe).
  bool explainable_kernel() const { return gpu_kernel() && explainable(description().arithmetic); }

 private:
  const preset* named_ = &presets().front();
  std::optional<kernel_description> described_;
};

// The options a call can be refused for. A front end spells each its own way
// (the command `--batch-heads`, the binding `batch_heads=`); call_error's
// message names it by the spelling the front end passes.
// The last six are an fp8 kernel's scales, in the order of fp8_scale_names.
enum class call_option {
  scale, splits, batch_heads, gpu, beta, eps, autocast, causal, threads,
  descale_q, descale_k, descale_v, descale_s, scale_s, scale_o
};
inline constexpr std::string_view call_option_names[] = {
    "scale",  "splits",    "batch_heads", "gpu",       "beta",      "eps",     "autocast", "causal",
    "threads", "descale_q", "descale_k",  "descale_v", "descale_s", "scale_s", "scale_o"};
static_assert(std::size(call_option_names) == static_cast<std::size_t>(call_option::scale_o) + 1,
              "a name for every call_option, in its order");

// The call option of fp8 scale i (an index of fp8_scale_names).
constexpr call_option fp8_scale_option(std::size_t i) {
  return static_cast<call_option>(static_cast<std::size_t>(call_option::descale_q) + i);
}

constexpr std::string_view name_of(call_option option) { return call_option_names[static_cast<std::size_t>(option)]; }

// A call refused because of one option. The reason is a sentence in which
// "{option}" stands for the option as the user wrote it.
class call_error : public std::invalid_argument {
 public:
  call_error(call_option option, std::string reason)
      : std::invalid_argument(spelled(reason, name_of(option))), option_(option), reason_(std::move(reason)) {}
  call_option option() const { return option_; }
  // The message with the option spelled as the front end takes it.
  std::string message(std::string_view spelling) const { return spelled(reason_, spelling); }

 private:
  static std::string spelled(std::string text, std::string_view spelling) {
    constexpr std::string_view slot = "{option}";
    for (std::size_t at = text.find(slot); at != std::string::npos; at = text.find(slot, at + spelling.size()))
      text.replace(at, slot.size(), spelling);
    return text;
  }
  call_option option_;
  std::string reason_;
};

// The most threads a call may ask for (attention_call::threads).
inline constexpr int max_threads = 1024;

// Everything a call chooses besides its tensors.
struct attention_call {
  model_choice model;
  attention_shape shape;  // the tensors': batch, heads, query rows, keys, head dim, causal
  // The B and H of the call the heads came from, when the tensors hold some
  // of its heads: PyTorch's split heuristic counts the whole call.
  std::optional<std::pair<int, int>> batch_heads;
  std::optional<double> scale;  // as Python's float; each model says how it rounds it
  std::optional<int> splits;    // the split-KV count instead of the heuristic's
  gpu device = default_gpu();
  std::optional<float32> beta, epsilon;  // the stabilized rule's, else the model's own
  bool autocast = true;                  // the paper presets: under torch.autocast
  int threads = 0;  // threads to compute on, 0 for one per core (up to max_threads); the bits are the same
  // An fp8 kernel's scales, in the order of fp8_scale_names (descale_q ...
  // scale_o), as Python's floats; each not given is 1. Refused for bf16 kernels.
  std::array<std::optional<double>, 6> fp8_scales;
};

// A call checked and resolved: a GPU kernel for its shape on its GPU, or the
// paper's arithmetic.
struct resolved_call {
  attention_call call;
  attention_shape head;    // one head: batch = heads = 1
  attention_shape launch;  // the call PyTorch's heuristics saw (batch_heads, else the tensors')
  std::optional<flash_kernel> kernel;  // a GPU kernel
  paper_flash paper;                   // the paper presets
  bool fp64() const { return call.model.is(preset_kind::paper_reference_fp64); }
  std::size_t head_count() const {
    return static_cast<std::size_t>(call.shape.batch) * static_cast<std::size_t>(call.shape.heads);
  }
  // A GPU kernel on fp8 inputs: its Q, K and V are e4m3 or e5m2 bit patterns,
  // its O as o_format() says (e4m3 for cuDNN's recipe, bf16 for FA2's).
  bool fp8() const { return kernel && is_fp8(kernel->inputs); }
  // The format O is written in: the GPU kernel's o_rounding; bf16 for the paper's presets.
  format o_format() const { return kernel ? kernel->o_format : bf16; }
};

namespace detail {

// The numbers a call takes, each within what its model reads: a float scale
// (as PyTorch passes it), beta at least 1, eps at least 0, a thread count.
inline void check_numbers(const attention_call& call) {
  if (call.threads < 0 || call.threads > max_threads)
    throw call_error(call_option::threads, "{option} must be from 0 (one thread per core) to " +
                                               std::to_string(max_threads) + ", not " + std::to_string(call.threads));
  if (call.scale && !std::isfinite(static_cast<float>(*call.scale)))
    throw call_error(call_option::scale, "{option} " + fmt::format("{}", *call.scale) +
                                             " is not a finite number that a float can hold");
  if (call.beta && !(to_host(*call.beta) >= 1.0f && std::isfinite(to_host(*call.beta))))
    throw call_error(call_option::beta, "{option} " + fmt::format("{}", to_host(*call.beta)) +
                                            " is not a finite number of at least 1");
  if (call.epsilon && !(to_host(*call.epsilon) >= 0.0f && std::isfinite(to_host(*call.epsilon))))
    throw call_error(call_option::eps, "{option} " + fmt::format("{}", to_host(*call.epsilon)) +
                                           " is not a finite number of at least 0");
}

// Each fp8 scale given: a positive finite number as a float, and an fp8 kernel to take it.
inline void check_fp8_scales(const attention_call& call) {
  for (std::size_t i = 0; i < call.fp8_scales.size(); ++i) {
    const std::optional<double>& given = call.fp8_scales[i];
    if (!given) continue;
    const float x = static_cast<float>(*given);
    if (!(x > 0.0f) || !std::isfinite(x))
      throw call_error(fp8_scale_option(i), "{option} " + fmt::format("{}", *given) +
                                                " is not a positive finite number that a float can hold");
    if (!call.model.gpu_kernel() || !is_fp8(call.model.description().arithmetic.inputs))
      throw call_error(fp8_scale_option(i), "{option} is a scale of fp8 kernels; " + call.model.name() +
                                                " takes bf16 Q, K and V");
    if (fp8_scale_fields[i] == &fp8_scales::scale_s)
      if (const auto refusal = scale_s_refusal(call.model.description().arithmetic, from_host(x)))
        throw call_error(fp8_scale_option(i), "{option} " + fmt::format("{}", *given) + " " + *refusal);
  }
}

inline void check_rule_options(const attention_call& call) {
  if ((call.beta || call.epsilon) && !call.model.stabilized())
    throw call_error(call.beta ? call_option::beta : call_option::eps,
                     "{option} sets the stabilized softmax; it needs a stabilized preset (" + stabilized_preset_names() +
                         ")");
  if (!call.autocast && !call.model.is(preset_kind::paper_reference) &&
      !call.model.is(preset_kind::paper_reference_stabilized))
    throw call_error(call_option::autocast, "{option} changes the " + autocast_preset_names() + " presets only");
}

inline void check_launch_options(const attention_call& call) {
  if (!call.model.gpu_kernel() && (call.splits || call.batch_heads))
    throw call_error(call.splits ? call_option::splits : call_option::batch_heads,
                     "{option} sets the GPU kernel's split-KV path, which preset " + call.model.name() +
                         " does not have");
  if (call.splits && (*call.splits < 1 || *call.splits > 128))
    throw call_error(call_option::splits, "{option} must be from 1 to 128, not " + std::to_string(*call.splits));
  if (call.batch_heads) {
    const auto [batch, heads] = *call.batch_heads;
    const long long given = static_cast<long long>(batch) * heads;
    if (batch < 1 || heads < 1 || given < static_cast<long long>(call.shape.batch) * call.shape.heads)
      throw call_error(call_option::batch_heads,
                       "{option} " + std::to_string(batch) + "," + std::to_string(heads) + " is " +
                           std::to_string(given) + " heads, but Q holds " +
                           std::to_string(static_cast<long long>(call.shape.batch) * call.shape.heads) +
                           "; give the B and H of the call the heads came from");
  }
}

// The GPU runs the kernel's tensor-core instruction and has the MUFU tables its exponentials read.
inline void check_device(const attention_call& call, const flash_kernel& arithmetic) {
  const architecture& arch = *call.device.arch;
  if (arch.mufu_tables.empty())
    throw call_error(call_option::gpu, "{option} " + std::string(call.device.name) + ": no MUFU tables were measured on " +
                                           std::string(arch.name) + ", which the kernel's exponentials read");
  const tensor_core_instruction* used = tensor_core_instruction_of(arithmetic.tensor_core);
  if (used && !used->takes(arithmetic.inputs)) {
    std::string takes;
    for (const format f : used->inputs) takes += (takes.empty() ? "" : ", ") + std::string(name_of(f));
    throw std::invalid_argument("kernel " + call.model.name() + "'s tensor core " + std::string(used->unit_name) +
                                " takes " + takes + " factors; its Q K^T and P V take " +
                                std::string(name_of(arithmetic.inputs)));
  }
  if (!arch.instruction_of(arithmetic.tensor_core)) {
    const tensor_core_instruction* unit = tensor_core_instruction_of(arithmetic.tensor_core);
    throw call_error(call_option::gpu, "{option} " + std::string(call.device.name) + " (" + std::string(arch.name) +
                                           ") has no " + std::string(unit ? unit->unit_name : "such") +
                                           " tensor core, which kernel " + call.model.name() + " computes with");
  }
}

}  // namespace detail

// The call checked and resolved; call_error naming the option at fault, or
// std::invalid_argument when the model cannot compute the shape.
inline resolved_call resolve_call(const attention_call& call) {
  detail::check_numbers(call);
  detail::check_fp8_scales(call);
  detail::check_rule_options(call);
  detail::check_launch_options(call);
  resolved_call r{call, call.shape, call.shape, {}, {}};
  r.head.batch = r.head.heads = 1;
  if (call.batch_heads) std::tie(r.launch.batch, r.launch.heads) = *call.batch_heads;
  if (!call.model.gpu_kernel()) {
    if (call.shape.causal && call.shape.query_rows != call.shape.key_rows)
      throw call_error(call_option::causal, "{option} needs as many query rows as key rows for preset " +
                                                call.model.name() + ", but Q has " +
                                                std::to_string(call.shape.query_rows) + " and K has " +
                                                std::to_string(call.shape.key_rows));
    r.paper = paper_reference(r.head, call.scale);
    r.paper.autocast = call.autocast;
    if (call.model.stabilized()) {
      stabilized_max rule;
      if (call.beta) rule.beta = *call.beta;
      if (call.epsilon) rule.epsilon = *call.epsilon;
      r.paper.stabilize = rule;
    }
    return r;
  }
  // The heuristic counts blocks of 64 rows over the whole call in an int, as flash-attention does.
  const auto call_heads = static_cast<long long>(r.launch.batch) * r.launch.heads;
  if (call_heads * ((static_cast<long long>(call.shape.query_rows) + 63) / 64) > INT32_MAX)
    throw std::invalid_argument(std::to_string(call_heads) + " heads of " + std::to_string(call.shape.query_rows) +
                                " rows are more blocks of rows than the split heuristic counts (2^31)");
  kernel_description description = call.model.description();
  if (auto& rule = description.arithmetic.stabilize) {
    if (call.beta) rule->beta = *call.beta;
    if (call.epsilon) rule->epsilon = *call.epsilon;
  }
  detail::check_device(call, description.arithmetic);
  call_options options{call.scale, call.device, call.splits, {}};
  for (std::size_t i = 0; i < call.fp8_scales.size(); ++i)
    if (call.fp8_scales[i]) options.fp8.*fp8_scale_fields[i] = from_host(static_cast<float>(*call.fp8_scales[i]));
  r.kernel = resolve(description, r.launch, options);
  const float scale = to_host(r.kernel->scale);
  if (r.kernel->stabilize && r.kernel->stabilize->across_blocks && !(scale > 0.0f && std::isfinite(scale)))
    throw call_error(call_option::scale, "kernel " + call.model.name() + " needs a positive finite scale, not {option} " +
                                             fmt::format("{}", call.scale ? *call.scale : static_cast<double>(scale)));
  return r;
}

// Told, from whichever thread finished them, that `rows` more rows of the
// call are computed (query rows forward, key rows backward): a front end's
// progress. It must take calls from several threads at once.
using rows_done = std::function<void(int rows)>;

namespace detail {

// An observer of the models' rows_done_event that hands each count to the front end's function.
struct rows_done_observer {
  const rows_done* told;
  void on(const rows_done_event& e) const {
    if (*told) (*told)(e.count);
  }
};

// head(h, threads, observer) for every head of the call, on the call's threads
// shared between the heads and each head's rows (split_threads).
template <class Head>
void for_each_head(const resolved_call& r, const rows_done& progress, Head&& head) {
  const thread_split split = split_threads(r.head_count(), static_cast<unsigned>(r.call.threads));
  for_each_index(r.head_count(), split.items, [&](std::size_t h) { head(h, split.pieces, rows_done_observer{&progress}); });
}

}  // namespace detail

// Every head of a resolved call: q [heads][query_rows][head_dim], k and v
// [heads][key_rows][head_dim] (bf16) into o (bf16) and lse (fp32, natural
// log) of the same layout; fp64 calls (paper_reference_fp64) take forward_fp64.
inline void forward(const resolved_call& r, std::span<const bfloat16> q, std::span<const bfloat16> k,
                    std::span<const bfloat16> v, std::span<bfloat16> o, std::span<float32> lse,
                    const rows_done& progress = {}) {
  if (r.fp64()) throw std::invalid_argument("preset paper_reference_fp64 computes in double: call forward_fp64");
  if (r.fp8())
    throw std::invalid_argument("kernel " + r.call.model.name() + " takes " + std::string(name_of(r.kernel->inputs)) +
                                " Q, K and V (fp8 bit patterns), not bf16");
  const std::size_t rows = static_cast<std::size_t>(r.head.query_rows);
  const std::size_t q_head = rows * static_cast<std::size_t>(r.head.head_dim);
  const std::size_t kv_head = static_cast<std::size_t>(r.head.key_rows) * static_cast<std::size_t>(r.head.head_dim);
  detail::for_each_head(r, progress, [&](std::size_t h, unsigned threads, detail::rows_done_observer told) {
    const auto qh = q.subspan(h * q_head, q_head), kh = k.subspan(h * kv_head, kv_head), vh = v.subspan(h * kv_head, kv_head);
    const auto oh = o.subspan(h * q_head, q_head);
    const auto lh = lse.subspan(h * rows, rows);
    if (r.kernel) flash_forward_head(*r.kernel, r.head, qh, kh, vh, oh, lh, told, threads);
    else paper_forward_head(r.paper, r.head, qh, kh, vh, oh, lh, told, threads);
  });
}

namespace detail {

// Every head of an fp8 call, O written as Out.
template <class Out>
void forward_fp8(const resolved_call& r, std::span<const std::uint8_t> q, std::span<const std::uint8_t> k,
                 std::span<const std::uint8_t> v, std::span<Out> o, std::span<float32> lse, const rows_done& progress) {
  if (!r.fp8())
    throw std::invalid_argument(r.call.model.name() + " takes bf16 Q, K and V, not fp8 bit patterns");
  if (r.o_format() != Out::fmt)
    throw std::invalid_argument("kernel " + r.call.model.name() + " writes O as " +
                                std::string(name_of(r.o_format())) + ", not " + std::string(name_of(Out::fmt)));
  const std::size_t rows = static_cast<std::size_t>(r.head.query_rows);
  const std::size_t q_head = rows * static_cast<std::size_t>(r.head.head_dim);
  const std::size_t kv_head = static_cast<std::size_t>(r.head.key_rows) * static_cast<std::size_t>(r.head.head_dim);
  for_each_head(r, progress, [&](std::size_t h, unsigned threads, rows_done_observer told) {
    flash_forward_head(*r.kernel, r.head, q.subspan(h * q_head, q_head), k.subspan(h * kv_head, kv_head),
                       v.subspan(h * kv_head, kv_head), o.subspan(h * q_head, q_head), lse.subspan(h * rows, rows),
                       told, threads);
  });
}

}  // namespace detail

// Every head of a call on an fp8 kernel (resolved_call::fp8): q, k, v bit
// patterns of the kernel's input format, laid out as forward's; o in the
// kernel's o_format (e4m3 here, bf16 below: resolved_call::o_format), lse fp32.
inline void forward(const resolved_call& r, std::span<const std::uint8_t> q, std::span<const std::uint8_t> k,
                    std::span<const std::uint8_t> v, std::span<float8_e4m3> o, std::span<float32> lse,
                    const rows_done& progress = {}) {
  detail::forward_fp8(r, q, k, v, o, lse, progress);
}

inline void forward(const resolved_call& r, std::span<const std::uint8_t> q, std::span<const std::uint8_t> k,
                    std::span<const std::uint8_t> v, std::span<bfloat16> o, std::span<float32> lse,
                    const rows_done& progress = {}) {
  detail::forward_fp8(r, q, k, v, o, lse, progress);
}

inline void forward_fp64(const resolved_call& r, std::span<const bfloat16> q, std::span<const bfloat16> k,
                         std::span<const bfloat16> v, std::span<double> o, std::span<double> lse,
                         const rows_done& progress = {}) {
  if (!r.fp64()) throw std::invalid_argument("forward_fp64 computes paper_reference_fp64 only");
  const std::size_t rows = static_cast<std::size_t>(r.head.query_rows);
  const std::size_t q_head = rows * static_cast<std::size_t>(r.head.head_dim);
  const std::size_t kv_head = static_cast<std::size_t>(r.head.key_rows) * static_cast<std::size_t>(r.head.head_dim);
  detail::for_each_head(r, progress, [&](std::size_t h, unsigned threads, detail::rows_done_observer told) {
    paper_reference_fp64_head(r.head, r.call.scale, q.subspan(h * q_head, q_head), k.subspan(h * kv_head, kv_head),
                              v.subspan(h * kv_head, kv_head), o.subspan(h * q_head, q_head),
                              lse.subspan(h * rows, rows), told, threads);
  });
}

// PyTorch's flash backward for the call's launch on its GPU.
inline flash_backward_kernel backward_kernel(const resolved_call& r) {
  return pytorch_sdpa_flash_sm90_backward(
      r.launch, r.call.scale ? *r.call.scale : 1.0 / std::sqrt(static_cast<double>(r.head.head_dim)), r.call.device);
}

// The call's gradients, every head: q, o, d_o [heads][query_rows][head_dim],
// k, v [heads][key_rows][head_dim], lse [heads][query_rows] (the forward's);
// dq, dk, dv and delta of the same layouts.
struct call_gradients {
  std::span<bfloat16> dq, dk, dv;
  std::span<float32> delta;
};

inline void backward(const resolved_call& r, const flash_backward_kernel& kernel, std::span<const bfloat16> q,
                     std::span<const bfloat16> k, std::span<const bfloat16> v, std::span<const bfloat16> o,
                     std::span<const float32> lse, std::span<const bfloat16> d_o, const call_gradients& out,
                     const rows_done& progress = {}) {
  const std::size_t rows = static_cast<std::size_t>(r.head.query_rows);
  const std::size_t q_head = rows * static_cast<std::size_t>(r.head.head_dim);
  const std::size_t kv_head = static_cast<std::size_t>(r.head.key_rows) * static_cast<std::size_t>(r.head.head_dim);
  detail::for_each_head(r, progress, [&](std::size_t h, unsigned threads, detail::rows_done_observer told) {
    const backward_gradients g =
        flash_backward_head(kernel, r.head, q.subspan(h * q_head, q_head), k.subspan(h * kv_head, kv_head),
                            v.subspan(h * kv_head, kv_head), o.subspan(h * q_head, q_head),
                            lse.subspan(h * rows, rows), d_o.subspan(h * q_head, q_head), told, threads);
    std::copy(g.dq.begin(), g.dq.end(), out.dq.begin() + static_cast<std::ptrdiff_t>(h * q_head));
    std::copy(g.dk.begin(), g.dk.end(), out.dk.begin() + static_cast<std::ptrdiff_t>(h * kv_head));
    std::copy(g.dv.begin(), g.dv.end(), out.dv.begin() + static_cast<std::ptrdiff_t>(h * kv_head));
    std::copy(g.delta.begin(), g.delta.end(), out.delta.begin() + static_cast<std::ptrdiff_t>(h * rows));
  });
}

}  // namespace bitexact::attention
