// `bitexact attention Q.npy K.npy V.npy`: PyTorch's flash-attention forward
// pass, computed by the emulator (attention/flash_forward.hpp) on every head
// of NumPy files, written out or compared bit for bit with what a GPU wrote.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <bitexact/attention/explain.hpp>
#include <bitexact/attention/flash_backward.hpp>
#include <bitexact/attention/flash_forward.hpp>
#include <bitexact/attention/kernel_json.hpp>
#include <bitexact/attention/kernels.hpp>
#include <bitexact/attention/paper_reference.hpp>
#include <bitexact/hardware/mufu_tables.hpp>
#include <bitexact/trace/render.hpp>

#include "cli.hpp"
#include <bitexact/testing/npy.hpp>

namespace bitexact::cli {
namespace {

using attention::attention_shape;
using attention::flash_kernel;

constexpr std::string_view attention_help =
    "usage: bitexact attention Q.npy K.npy V.npy [--preset NAME | --kernel FILE.json] [--causal]\n"
    "           [--scale X] [--splits N] [--batch-heads B,H] [--beta B] [--eps E] [--out-o FILE]\n"
    "           [--out-lse FILE] [--expect-o FILE] [--expect-lse FILE] [--explain INDEX]\n"
    "\n"
    "PyTorch's flash-attention forward pass (scaled_dot_product_attention, flash backend),\n"
    "computed bit for bit from the hardware models: O = softmax(Q K^T * scale) V in bf16,\n"
    "and L, the logsumexp of each row of scores, in float32. Every head is computed, each\n"
    "on its own. With --expect-o and --expect-lse, every element is compared bit for bit\n"
    "with what the GPU wrote.\n"
    "\n"
    "Q, K, V: NumPy .npy files (numpy.save), shape [B, H, N, d] or [N, d] (one head). K and\n"
    "V have one shape; Q's N may differ from K's (with --causal, row i sees keys up to\n"
    "i + N_k - N_q for the kernels whose description says causal_alignment bottom_right,\n"
    "up to i for top_left); d is 64 or 128 for the GPU kernel presets.\n"
    "Elements are bf16 bit patterns\n"
    "as uint16 or int16 (x.view(torch.int16).cpu().numpy()), or float32 only if every\n"
    "value is exactly a bf16 value (its low 16 bits are zero, as x.float() of a bf16\n"
    "tensor gives); any other float32 is refused, naming the file and the first index\n"
    "that is not.\n"
    "\n"
    "options:\n"
    "{options}\n"
    "  (--explain and the explanation of a first mismatch trace FA2's arithmetic: the\n"
    "  pytorch_sdpa_flash_sm90 presets and descriptions with the same arithmetic)\n"
    "\n"
    "Prints the shapes, the preset, the split count and the tiles; with --expect-o or\n"
    "--expect-lse, the elements compared and the mismatches, and for the first mismatch of\n"
    "each its index, both values (bits and decimal) and the K/V blocks and splits of its row;\n"
    "for a mismatch in O also the element's computation as --explain shows it, and which\n"
    "float32 values before the final conversion would have given the expected bf16 value.\n"
    "\n"
    "The exponentials and logarithms are MUFU table lookups: the command needs the tables\n"
    "mufu_ex2.bxt, mufu_rcp.bxt and mufu_lg2.bxt from the data folder (the source tree's\n"
    "data/, an install's share/bitexact, or $BITEXACT_DATA_DIR).\n"
    "\n"
    "Exit status: 0 computed, and every compared element agrees; 1 a mismatch; 2 bad\n"
    "arguments or input files, or output that could not be written, with one line on stderr.\n"
    "docs/attention.md has a worked example, from PyTorch to this command.\n";

// The kernel a run models: a registry preset by name, or a description from
// a JSON file (--kernel), which is a GPU kernel.
struct kernel_choice {
  const attention::preset* named = &attention::presets().front();
  std::optional<attention::kernel_description> described;  // --kernel FILE.json

  std::string name() const { return described ? described->name : std::string(named->name); }
  bool gpu_kernel() const { return described || named->kind == attention::preset_kind::gpu_kernel; }
  attention::kernel_description description() const { return described ? *described : named->description(); }
  bool is(attention::preset_kind kind) const { return !described && named->kind == kind; }
  bool stabilized() const {
    return gpu_kernel() ? description().arithmetic.stabilize.has_value()
                        : is(attention::preset_kind::paper_reference_stabilized);
  }
};

// A file name in a message, with control characters escaped so that the message stays one line.
std::string printable(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F) out += fmt::format("\\x{:02X}", byte);
    else out += c;
  }
  return out;
}

std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

struct attention_options {
  std::string q_path, k_path, v_path;
  kernel_choice kernel;
  bool causal = false;
  bool no_autocast = false;
  std::optional<double> scale;  // as Python's float; the GPU kernel takes it rounded to float
  std::optional<float32> beta, epsilon;
  std::string explain;  // the index of --explain, checked against the shape once the files are read
  std::optional<int> splits;
  std::optional<std::pair<int, int>> batch_heads;
  std::string out_o, out_lse, expect_o, expect_lse;
  std::vector<kernel_choice> compare;  // --compare A B: none, or the two kernels
  bool preset_given = false;
  // --backward dO: the flash backward pass, from the forward's O and L
  // (--forward-o, --forward-lse; computed by the forward preset when not given).
  std::string backward_do, forward_o, forward_lse;
  std::string expect_dq, expect_dk, expect_dv, expect_delta, out_dq, out_dk, out_dv, out_delta;
  bool backward() const { return !backward_do.empty(); }
};

// B,H: two positive integers, their product at most 2^30.
std::pair<int, int> parse_batch_heads(std::string_view text) {
  const std::vector<std::string_view> items = split_list(text);
  const auto batch = integer_in(items[0], 1, 1 << 30), heads = integer_in(items.back(), 1, 1 << 30);
  if (items.size() != 2 || !batch || !heads || static_cast<long long>(*batch) * *heads > (1LL << 30))
    refuse_value("B,H, two positive integers (e.g. 1,32)", text);
  return {*batch, *heads};
}

// A decimal read as a double (a Python float) that a float can hold too, as PyTorch passes scale= to the
// kernel rounded to float (and as a kernel would take beta and epsilon).
double parse_float_decimal(std::string_view text, std::string_view expected, double least = -HUGE_VAL) {
  const double parsed = parse_decimal(text, expected, least);
  if (!std::isfinite(static_cast<float>(parsed))) refuse_value(expected, text);
  return parsed;
}

float32 as_float(double x) { return from_host(static_cast<float>(x)); }

// A kernel description from a JSON file; exit 2 with the file and the field named.
attention::kernel_description read_description(std::string_view path) {
  std::ifstream file{std::string(path)};
  std::stringstream text;
  if (!file || !(text << file.rdbuf())) fail(printable(path) + ": cannot read the kernel description");
  try {
    return attention::kernel_from_json(text.str());
  } catch (const std::invalid_argument& error) {
    fail(printable(path) + ": " + error.what());
  }
}

// A GPU kernel named on the command line: a preset's name, or a description
// file (a name ending in .json).
kernel_choice gpu_kernel_named(std::string_view text) {
  kernel_choice choice;
  if (text.size() > 5 && text.substr(text.size() - 5) == ".json") {
    choice.described = read_description(text);
    return choice;
  }
  try {
    choice.named = &attention::find_preset(text);
  } catch (const std::invalid_argument& error) {
    fail("attention: " + std::string(error.what()));
  }
  if (!choice.gpu_kernel())
    fail("attention: --compare takes GPU kernels (presets or .json descriptions), not " + std::string(text));
  return choice;
}

// Whether a GPU kernel choice computes with FA2's arithmetic (what --explain traces).
bool flash2_arithmetic(const kernel_choice& kernel) {
  attention::flash_kernel arithmetic = kernel.description().arithmetic;
  return attention::has_flash2_arithmetic(arithmetic);
}

std::vector<option> option_table(attention_options& o) {
  const auto file = [](std::string& path) { return [&path](std::string_view name) { path = name; }; };
  return {
      {"--preset", "NAME",
       "the kernel modelled, by name (default pytorch_sdpa_flash_sm90; the\n"
       "list is below, and --list-kernels prints it)",
       [&](std::string_view name) {
         if (o.kernel.described) fail("attention: --preset and --kernel both name the kernel; give one");
         try {
           o.kernel.named = &attention::find_preset(name);
         } catch (const std::invalid_argument& error) {
           fail("attention: " + std::string(error.what()));
         }
         o.preset_given = true;
       }},
      {"--kernel", "FILE.json",
       "the kernel modelled, from its description (a JSON object, the\n"
       "fields in docs/attention.md; --print-kernel NAME writes a preset's)",
       [&](std::string_view path) {
         if (o.preset_given) fail("attention: --preset and --kernel both name the kernel; give one");
         o.kernel.described = read_description(path);
       }},
      {"--list-kernels", "", "print every preset's name and summary, and exit",
       [](std::string_view) { fail("attention: --list-kernels takes no other arguments; write it alone"); }},
      {"--print-kernel", "NAME", "print a GPU kernel preset's description as JSON, and exit",
       [](std::string_view) { fail("attention: --print-kernel NAME takes no other arguments; write it alone"); }},
      {"--compare", "A B",
       "compute two GPU kernels (preset names or .json files) on the files\n"
       "and say how their O and L differ: how many elements, by how many\n"
       "ulps and in which direction, and for the first differing element\n"
       "of O, which of its row's values part first and, side by side, the\n"
       "first key whose bf16 P differs (exit 1 if any differ)",
       [&](std::string_view kernel) { o.compare.push_back(gpu_kernel_named(kernel)); }},
      {"--causal", "", "the causal mask (is_causal=True)", [&](std::string_view) { o.causal = true; }},
      {"--scale", "X",
       "the softmax scale as PyTorch's scale= takes it: a decimal, read as\n"
       "a double (a Python float), rounded to float for the GPU kernel\n"
       "(default 1/sqrt(d); d ** -0.5 for the paper_reference presets)",
       [&](std::string_view x) { o.scale = parse_float_decimal(x, "a finite decimal such as 0.125"); }},
      {"--splits", "N",
       "(kernels with FA2's split-KV path) N split-KV splits (1 to 128) instead of the\n"
       "heuristic's; N > 1 takes the split kernel's tiles, 64 rows by 256\n"
       "keys (d 64) or by 128 keys (d 128); N = 1 the single kernel's",
       [&](std::string_view n) { o.splits = parse_integer(n, 1, 128, "an integer from 1 to 128"); }},
      {"--batch-heads", "B,H",
       "(GPU kernel presets) the B and H of the original call when the\n"
       "files hold only some of its heads: they decide the split count\n"
       "(default: the files' shape)",
       [&](std::string_view bh) { o.batch_heads = parse_batch_heads(bh); }},
      {"--no-autocast", "", "paper_reference presets: every tensor bf16, outside autocast",
       [&](std::string_view) { o.no_autocast = true; }},
      {"--beta", "B",
       "stabilized presets: a block's repeated positive max m becomes\n"
       "RN(B * m) (a decimal, at least 1; default 2)",
       [&](std::string_view b) {
         o.beta = as_float(parse_float_decimal(b, "a finite decimal of at least 1, such as 2", 1.0));
       }},
      {"--eps", "E",
       "stabilized presets: scores within E of the block's max, in scaled\n"
       "units, count as repeats (a decimal, at least 0; default 0.001)",
       [&](std::string_view e) {
         o.epsilon = as_float(parse_float_decimal(e, "a finite decimal of at least 0, such as 0.001", 0.0));
       }},
      {"--out-o", "FILE", "write O as uint16 bf16 bit patterns, shaped like Q", file(o.out_o)},
      {"--out-lse", "FILE", "write L as float32, shape [B, H, N] ([N] for [N, d] inputs)", file(o.out_lse)},
      {"--expect-o", "FILE",
       "compare O with FILE bit for bit: uint16 or int16 bf16 patterns, or\n"
       "float32 holding bf16 values exactly, shaped like Q",
       file(o.expect_o)},
      {"--expect-lse", "FILE",
       "compare L with FILE bit for bit: float32, [B, H, N] ([N] for\n"
       "[N, d] inputs; a trailing 1, as cuDNN's backend returns it, is\n"
       "accepted)",
       file(o.expect_lse)},
      {"--explain", "INDEX",
       "(GPU kernel presets) show how one element of O was computed,\n"
       "INDEX b,h,row,col ([B, H, N, d] files) or row,col ([N, d]): its\n"
       "row block by block (maxima, rescale factors, P = 1 counts, row\n"
       "sums, the element after each block) and every rounding of the\n"
       "element in order, the largest and the last in full",
       file(o.explain)},
      {"--backward", "DO",
       "the backward pass instead (PyTorch's flash backward on sm_90, under\n"
       "torch.use_deterministic_algorithms(True)): DO is dL/dO, shaped\n"
       "like Q; computes dQ, dK, dV and delta = rowsum(dO * O), from",
       file(o.backward_do)},
      {"--forward-o", "FILE", "the forward's O (bf16, like Q) and", file(o.forward_o)},
      {"--forward-lse", "FILE",
       "L (float32, as --expect-lse); either, when not given, computed by\n"
       "pytorch_sdpa_flash_sm90. --batch-heads sets the call's B and H,\n"
       "which decide how dQ's additions are ordered",
       file(o.forward_lse)},
      {"--expect-dq", "FILE", "compare dQ with FILE bit for bit (bf16, as for O)", file(o.expect_dq)},
      {"--expect-dk", "FILE", "the same for dK", file(o.expect_dk)},
      {"--expect-dv", "FILE", "the same for dV", file(o.expect_dv)},
      {"--expect-delta", "FILE", "the same for delta (float32, as for L)", file(o.expect_delta)},
      {"--out-dq", "FILE", "write dQ (uint16 bf16 patterns)", file(o.out_dq)},
      {"--out-dk", "FILE", "write dK (the same)", file(o.out_dk)},
      {"--out-dv", "FILE", "write dV (the same)", file(o.out_dv)},
      {"--out-delta", "FILE", "write delta (float32)", file(o.out_delta)},
  };
}

// What no single option can check: the three files, and the options that exclude or need each other.
void check_options(attention_options& options, const arguments& files) {
  if (files.size() > 3)
    fail("attention: unexpected argument " + quoted_input(files[3]) + "; expected three files, Q K V");
  if (files.size() != 3)
    fail("attention: expected three .npy files, Q K V, but got " + std::to_string(files.size()) +
         "; see bitexact attention --help");
  options.q_path = files[0], options.k_path = files[1], options.v_path = files[2];
  if (!options.compare.empty() &&
      (options.preset_given || options.kernel.described || !options.explain.empty() || !options.expect_o.empty() ||
       !options.expect_lse.empty() || !options.out_o.empty() || !options.out_lse.empty() || options.beta ||
       options.epsilon))
    fail("attention: --compare A B computes two kernels and compares them; it takes no --preset, --kernel, "
         "--explain, --expect-*, --out-*, --beta or --eps");
  const bool backward_files = !options.forward_o.empty() || !options.forward_lse.empty() ||
                              !options.expect_dq.empty() || !options.expect_dk.empty() || !options.expect_dv.empty() ||
                              !options.expect_delta.empty() || !options.out_dq.empty() || !options.out_dk.empty() ||
                              !options.out_dv.empty() || !options.out_delta.empty();
  if (backward_files && !options.backward())
    fail("attention: --forward-*, --expect-d* and --out-d* belong to the backward pass; give --backward DO.npy");
  if (options.backward() &&
      (!options.compare.empty() || options.kernel.described ||
       options.kernel.named != &attention::presets().front() ||
       !options.explain.empty() || !options.expect_o.empty() || !options.expect_lse.empty() ||
       !options.out_o.empty() || !options.out_lse.empty()))
    fail("attention: --backward models PyTorch's flash backward on the pytorch_sdpa_flash_sm90 forward; it takes no "
         "--preset, --kernel, --compare, --explain, --expect-o, --expect-lse, --out-o or --out-lse");
  if ((options.beta || options.epsilon) && !options.kernel.stabilized())
    fail(std::string("attention: ") + (options.beta ? "--beta" : "--eps") +
         " sets the stabilized softmax; it needs --preset pytorch_sdpa_flash_sm90_stabilized, "
         "pytorch_sdpa_flash_sm90_stabilized_across_blocks or paper_reference_stabilized");
  // Options that only the GPU kernel's presets have, refused rather than ignored.
  const std::string preset_text = options.kernel.name();
  if (!options.kernel.gpu_kernel()) {
    if (options.splits || options.batch_heads)
      fail(std::string("attention: ") + (options.splits ? "--splits" : "--batch-heads") +
           " sets the GPU kernel's split-KV path, which preset " + std::string(preset_text) + " does not have");
  }
  if (!options.explain.empty() && !(options.kernel.gpu_kernel() && flash2_arithmetic(options.kernel)))
    fail("attention: --explain traces FA2's arithmetic (the pytorch_sdpa_flash_sm90 presets), not " + preset_text + "'s");
  if (options.no_autocast && !options.kernel.is(attention::preset_kind::paper_reference) &&
      !options.kernel.is(attention::preset_kind::paper_reference_stabilized))
    fail("attention: --no-autocast changes the paper_reference and paper_reference_stabilized presets only");
  if (options.kernel.is(attention::preset_kind::paper_reference_fp64) && (!options.expect_o.empty() || !options.expect_lse.empty()))
    fail("attention: paper_reference_fp64 computes in double, a reference to measure errors against, not bits a GPU "
         "writes; --expect-o and --expect-lse need another preset");
}

// A float64 file (paper_reference_fp64's --out-o, or numbers saved from NumPy) is refused with the way out:
// round it to the format the file holds (bf16 for Q, K, V and O; float32 for L and delta).
npy::array read_npy(const std::string& path, std::string_view rounded_to = "bf16") {
  try {
    return npy::read(path);
  } catch (const npy::npy_error& error) {
    const std::string_view message = error.what();
    const bool float64 = message.find("element type '<f8'") != std::string_view::npos ||
                         message.find("element type '>f8'") != std::string_view::npos;
    fail(printable(message) + (float64 ? "; round it to " + std::string(rounded_to) + " first" : ""));
  } catch (const std::logic_error&) {  // std::stoull on a shape that is not a list of integers
    fail(printable(path) + ": not a .npy file: its header's shape is not a tuple of integers");
  }
}

// The elements of a file as bf16: uint16 or int16 patterns, or float32 values that are bf16 values.
std::vector<bfloat16> bf16_elements(const npy::array& array, const std::string& path) {
  std::vector<bfloat16> values(array.element_count());
  if (array.descr == "<u2" || array.descr == "<i2") {
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = bfloat16::from_bits(array.word(i));
  } else if (array.descr == "<f4") {
    for (std::size_t i = 0; i < values.size(); ++i) {
      const std::uint32_t bits = array.word(i);
      if (bits & 0xFFFFu) {
        std::string index;
        std::size_t rest = i;
        for (std::size_t axis = array.shape.size(); axis-- > 0;) {
          index = std::to_string(rest % array.shape[axis]) + (index.empty() ? "" : ", ") + index;
          rest /= array.shape[axis];
        }
        fail(printable(path) + ": float32 element [" + index + "] = " + fmt::format("{}", to_double(float32::from_bits(bits))) +
             fmt::format(" (0x{:08X})", bits) + " is not a bf16 value; save the bf16 bit patterns (x.view(torch.int16))");
      }
      values[i] = bfloat16::from_bits(bits >> 16);
    }
  } else {
    fail(printable(path) + ": element type '" + array.descr +
         "' is not bf16; expected uint16 or int16 bf16 bit patterns, or float32 holding bf16 values");
  }
  return values;
}

// A Q, K or V file: its shape as [B, H, N, d] whatever it was written as.
struct operand_tensor {
  std::vector<std::size_t> file_shape;
  std::size_t batch = 1, heads = 1, rows = 0, head_dim = 0;
  std::vector<bfloat16> values;
};

operand_tensor read_operand(const std::string& path, std::string_view name) {
  const npy::array array = read_npy(path);
  operand_tensor t;
  t.file_shape = array.shape;
  if (array.shape.size() == 4) t.batch = array.shape[0], t.heads = array.shape[1];
  else if (array.shape.size() != 2)
    fail(printable(path) + ": " + std::string(name) + " has shape " + shape_text(array.shape) +
         "; expected [B, H, N, d] or [N, d]");
  t.rows = array.shape[array.shape.size() - 2];
  t.head_dim = array.shape.back();
  constexpr std::size_t most = 1u << 30;
  if (t.batch == 0 || t.heads == 0 || t.rows == 0 || t.head_dim == 0 || t.batch * t.heads > most || t.rows > most)
    fail(printable(path) + ": " + std::string(name) + " has shape " + shape_text(array.shape) +
         "; every extent must be at least 1 (and N at most 2^30)");
  t.values = bf16_elements(array, path);
  return t;
}

// One element of O: its head (b * H + h), row and column.
struct element_index {
  std::size_t head = 0, row = 0, col = 0;
};

// --explain's b,h,row,col (or row,col for [N, d] files), each within the shape.
element_index parse_element_index(std::string_view text, const operand_tensor& q, bool four_d) {
  const std::vector<std::size_t> extents =
      four_d ? std::vector<std::size_t>{q.batch, q.heads, q.rows, q.head_dim} : std::vector<std::size_t>{q.rows, q.head_dim};
  const std::string_view form = four_d ? "b,h,row,col" : "row,col";
  const std::vector<std::string_view> fields = split_list(text);
  std::vector<std::size_t> index;
  for (std::size_t i = 0; i < fields.size() && fields.size() == extents.size(); ++i)
    if (const auto parsed = integer_in<std::size_t>(fields[i], 0, extents[i] - 1); parsed && extents[i] > 0)
      index.push_back(*parsed);
  if (index.size() != extents.size())
    fail(fmt::format("attention: --explain expects {} within Q's shape {}, not {}", form, shape_text(q.file_shape),
                     quoted_input(text)));
  if (!four_d) return {0, index[0], index[1]};
  return {index[0] * q.heads + index[1], index[2], index[3]};
}

// What one run computes: the files' heads and the kernel that computes each.
struct attention_problem {
  attention_options options;
  operand_tensor q, k, v;
  attention_shape head_shape;       // one head: batch = heads = 1
  attention_shape heuristic_shape;  // the call whose split count the preset chose
  flash_kernel kernel;           // a GPU kernel, resolved for the call
  attention::paper_flash paper;  // the paper_reference presets
  bool four_d = true;
  std::optional<element_index> explain;
  std::size_t head_count() const { return q.batch * q.heads; }
};

attention_problem read_problem(const attention_options& options) {
  attention_problem p{options, read_operand(options.q_path, "Q"), read_operand(options.k_path, "K"),
                      read_operand(options.v_path, "V"), {}, {}, {}, {}, true, {}};
  // The file named is the one the other two disagree with: Q when K and V agree, else K or V.
  const auto like_q = [&p](const operand_tensor& t) {
    return t.file_shape.size() == p.q.file_shape.size() && t.batch == p.q.batch && t.heads == p.q.heads &&
           t.head_dim == p.q.head_dim;
  };
  const std::string expected_kv = p.q.file_shape.size() == 4
                                      ? fmt::format("[{}, {}, N, {}]", p.q.batch, p.q.heads, p.q.head_dim)
                                      : fmt::format("[N, {}]", p.q.head_dim);
  if (p.v.file_shape == p.k.file_shape && !like_q(p.k))
    fail(printable(options.q_path) + ": Q has shape " + shape_text(p.q.file_shape) + ", but K and V have " +
         shape_text(p.k.file_shape) + "; Q needs their " +
         (p.k.file_shape.size() == 4 ? "B, H and d" : "d") + (p.k.file_shape.size() != p.q.file_shape.size()
                                                                 ? " and as many dimensions" : ""));
  if (p.v.file_shape != p.k.file_shape && like_q(p.v) && !like_q(p.k))
    fail(printable(options.k_path) + ": K has shape " + shape_text(p.k.file_shape) + "; expected " + expected_kv +
         " to match Q's " + shape_text(p.q.file_shape) + " and V's " + shape_text(p.v.file_shape));
  if (p.v.file_shape != p.k.file_shape && like_q(p.k) && !like_q(p.v))
    fail(printable(options.v_path) + ": V has shape " + shape_text(p.v.file_shape) + "; expected K's shape " +
         shape_text(p.k.file_shape));
  // Both agree with Q (they differ in N, which Q does not decide), or neither does: both are named.
  if (p.v.file_shape != p.k.file_shape)
    fail(printable(options.k_path) + " " + shape_text(p.k.file_shape) + " and " + printable(options.v_path) + " " +
         shape_text(p.v.file_shape) + ": K and V need the same shape");
  // A GPU kernel's description says which causal calls it models (resolve refuses the others).
  if (options.causal && p.q.rows != p.k.rows && !options.kernel.gpu_kernel() && options.compare.empty())
    fail(fmt::format("attention: --causal needs as many query rows as key rows for the paper_reference presets, "
                     "but Q has {} and K has {}",
                     p.q.rows, p.k.rows));
  p.four_d = p.q.file_shape.size() == 4;
  p.head_shape = {1, 1, static_cast<int>(p.q.rows), static_cast<int>(p.k.rows), static_cast<int>(p.q.head_dim),
                  options.causal};
  p.heuristic_shape = p.head_shape;
  p.heuristic_shape.batch = static_cast<int>(p.q.batch);
  p.heuristic_shape.heads = static_cast<int>(p.q.heads);
  if (options.batch_heads) {
    const auto [batch, heads] = *options.batch_heads;
    if (static_cast<std::size_t>(batch) * static_cast<std::size_t>(heads) < p.head_count())
      fail(fmt::format("attention: --batch-heads {},{} is {} heads, but the files hold {}; give the B and H of the "
                       "call the heads came from",
                       batch, heads, batch * heads, p.head_count()));
    p.heuristic_shape.batch = batch;
    p.heuristic_shape.heads = heads;
  }
  // The heuristic counts blocks of 64 rows over the whole call in an int, as flash-attention does.
  const auto call_heads = static_cast<long long>(p.heuristic_shape.batch) * p.heuristic_shape.heads;
  if (call_heads * ((static_cast<long long>(p.q.rows) + 63) / 64) > INT32_MAX)
    fail(fmt::format("attention: {} heads of {} rows are more blocks of rows than the split heuristic counts (2^31)",
                     call_heads, p.q.rows));
  if (!options.kernel.gpu_kernel()) {
    p.paper = attention::paper_reference(p.head_shape, options.scale);
    p.paper.autocast = !options.no_autocast;
    if (options.kernel.stabilized()) {
      attention::stabilized_max rule;
      if (options.beta) rule.beta = *options.beta;
      if (options.epsilon) rule.epsilon = *options.epsilon;
      p.paper.stabilize = rule;
    }
    return p;
  }
  attention::kernel_description description = options.kernel.description();
  if (auto& rule = description.arithmetic.stabilize) {
    if (options.beta) rule->beta = *options.beta;
    if (options.epsilon) rule->epsilon = *options.epsilon;
  }
  try {
    p.kernel = attention::resolve(description, p.heuristic_shape, {options.scale, 132, options.splits});
  } catch (const std::invalid_argument& error) {
    fail(printable(options.q_path) + ": " + error.what());
  }
  if (p.kernel.stabilize && p.kernel.stabilize->across_blocks &&
      !(to_host(p.kernel.scale) > 0.0f && std::isfinite(to_host(p.kernel.scale))))
    fail(fmt::format("attention: kernel {} needs a positive finite scale, not --scale {}", options.kernel.name(),
                     fmt::format("{}", *options.scale)));
  if (!options.explain.empty()) p.explain = parse_element_index(options.explain, p.q, p.four_d);
  return p;
}

// Every head of the files.
// What a preset computed: bit patterns (O bf16, L float32), or doubles for paper_reference_fp64.
struct attention_result {
  attention::attention_output bits;
  std::vector<double> o, lse;
};

// The paper_reference presets, head after head.
attention_result compute_paper(const attention_problem& p) {
  const std::size_t heads = p.head_count(), rows = p.q.rows, keys = p.k.rows, d = p.q.head_dim;
  attention_result result;
  const bool fp64 = p.options.kernel.is(attention::preset_kind::paper_reference_fp64);
  if (fp64) result.o.resize(heads * rows * d), result.lse.resize(heads * rows);
  else result.bits.o.resize(heads * rows * d), result.bits.lse.resize(heads * rows);
  try {
    for (std::size_t h = 0; h < heads; ++h) {
      const auto q = std::span<const bfloat16>(p.q.values).subspan(h * rows * d, rows * d);
      const auto k = std::span<const bfloat16>(p.k.values).subspan(h * keys * d, keys * d);
      const auto v = std::span<const bfloat16>(p.v.values).subspan(h * keys * d, keys * d);
      if (fp64)
        attention::paper_reference_fp64_head(p.head_shape, p.paper.scale, q, k, v,
                                             std::span<double>(result.o).subspan(h * rows * d, rows * d),
                                             std::span<double>(result.lse).subspan(h * rows, rows));
      else
        attention::paper_forward_head(p.paper, p.head_shape, q, k, v,
                                      std::span<bfloat16>(result.bits.o).subspan(h * rows * d, rows * d),
                                      std::span<float32>(result.bits.lse).subspan(h * rows, rows));
    }
  } catch (const std::exception& e) {
    fail("attention: " + printable(e.what()));
  }
  return result;
}

attention_result compute(const attention_problem& p) {
  if (!p.options.kernel.gpu_kernel()) return compute_paper(p);
  try {
    ptx::mufu_tables::shared();  // loaded once, here, so that a missing table is one error, not one per thread
  } catch (const mufu_data_error& error) {
    std::string message = error.what();
    if (message.rfind("bitexact: ", 0) == 0) message.erase(0, 10);
    fail(printable(message));
  }
  attention_shape files_shape = p.head_shape;
  files_shape.batch = static_cast<int>(p.q.batch);
  files_shape.heads = static_cast<int>(p.q.heads);
  try {
    return {attention::flash_forward(p.kernel, files_shape, p.q.values, p.k.values, p.v.values), {}, {}};
  } catch (const std::exception& e) {
    fail("attention: " + printable(e.what()));
  }
}

std::vector<std::size_t> lse_shape(const attention_problem& p) {
  if (!p.four_d) return {p.q.rows};
  return {p.q.batch, p.q.heads, p.q.rows};
}

// The expected values, read and checked before the (long) computation.
struct expectations {
  std::optional<std::vector<bfloat16>> o;
  std::optional<std::vector<float32>> lse;
};

expectations read_expectations(const attention_problem& p) {
  expectations expected;
  if (!p.options.expect_o.empty()) {
    const std::string& path = p.options.expect_o;
    const npy::array array = read_npy(path);
    if (array.shape != p.q.file_shape)
      fail(printable(path) + ": O has shape " + shape_text(array.shape) + "; expected Q's shape " +
           shape_text(p.q.file_shape));
    expected.o = bf16_elements(array, path);
  }
  if (!p.options.expect_lse.empty()) {
    const std::string& path = p.options.expect_lse;
    const npy::array array = read_npy(path, "float32");
    // cuDNN's backend returns L as [B, H, N, 1]: a trailing 1 is the same elements.
    std::vector<std::size_t> shape = array.shape;
    if (shape.size() == lse_shape(p).size() + 1 && shape.back() == 1) shape.pop_back();
    if (shape != lse_shape(p))
      fail(printable(path) + ": L has shape " + shape_text(array.shape) + "; expected " + shape_text(lse_shape(p)) +
           (p.four_d ? " ([B, H, N], or [B, H, N, 1])" : " ([N], or [N, 1])"));
    if (array.descr != "<f4")
      fail(printable(path) + ": element type '" + array.descr + "' is not float32; L is the float32 logsumexp");
    std::vector<float32> values(array.element_count());
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = float32::from_bits(array.word(i));
    expected.lse = std::move(values);
  }
  return expected;
}

void write_outputs(const attention_problem& p, const attention_result& computed) {
  const attention::attention_output& result = computed.bits;
  try {
    if (p.options.kernel.is(attention::preset_kind::paper_reference_fp64)) {
      if (!p.options.out_o.empty()) npy::write(p.options.out_o, "<f8", p.q.file_shape, computed.o.data());
      if (!p.options.out_lse.empty()) npy::write(p.options.out_lse, "<f8", lse_shape(p), computed.lse.data());
      return;
    }
    if (!p.options.out_o.empty()) {
      std::vector<std::uint16_t> bits(result.o.size());
      for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<std::uint16_t>(result.o[i].bits);
      npy::write(p.options.out_o, "<u2", p.q.file_shape, bits.data());
    }
    if (!p.options.out_lse.empty()) {
      std::vector<std::uint32_t> bits(result.lse.size());
      for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = result.lse[i].bits;
      npy::write(p.options.out_lse, "<f4", lse_shape(p), bits.data());
    }
  } catch (const npy::npy_error& error) {
    fail(printable(error.what()));
  }
}

std::string kernel_text(const flash_kernel& kernel, int key_rows, const std::string& split_source) {
  const int key_blocks = (key_rows + kernel.block_n - 1) / kernel.block_n;
  return fmt::format("{} {} ({}), tiles {} rows x {} keys, {} K/V block{}", kernel.splits,
                     kernel.splits > 1 ? "splits" : "split", split_source, kernel.block_m, kernel.block_n, key_blocks,
                     key_blocks == 1 ? "" : "s");
}

void print_summary(const attention_problem& p) {
  const attention_shape& s = p.heuristic_shape;
  if (!p.options.kernel.gpu_kernel()) {
    std::printf("attention: Q %s, K and V %s, %s, scale %s\n", shape_text(p.q.file_shape).c_str(),
                shape_text(p.k.file_shape).c_str(), p.options.causal ? "causal" : "not causal",
                fmt::format("{}{}", p.paper.scale, p.options.scale ? "" : ", the default d ** -0.5").c_str());
    const int key_blocks = (s.key_rows + p.paper.block_n - 1) / p.paper.block_n;
    if (p.options.kernel.is(attention::preset_kind::paper_reference_fp64))
      std::printf("preset paper_reference_fp64: softmax attention in double, no tiles (O and L written as float64)\n");
    else
      std::printf("preset %s: the paper's flash attention in PyTorch (attention.py, %s), tiles %d rows x %d keys, "
                  "%d K/V block%s\n",
                  p.options.kernel.name().c_str(),
                  p.paper.autocast ? "under bf16 autocast" : "bf16 tensors, no autocast", p.paper.block_m,
                  p.paper.block_n, key_blocks, key_blocks == 1 ? "" : "s");
    if (p.paper.stabilize)
      std::printf("stabilized softmax: beta %s, eps %s\n", fmt::format("{}", to_host(p.paper.stabilize->beta)).c_str(),
                  fmt::format("{}", to_host(p.paper.stabilize->epsilon)).c_str());
    return;
  }
  std::printf("attention: Q %s, K and V %s, %s, scale %s\n", shape_text(p.q.file_shape).c_str(),
              shape_text(p.k.file_shape).c_str(), p.options.causal ? "causal" : "not causal",
              fmt::format("{} (0x{:08X}){}", to_host(p.kernel.scale), p.kernel.scale.bits,
                          p.options.scale ? "" : ", the default 1/sqrt(d)")
                  .c_str());
  const std::string split_source =
      p.options.kernel.description().split == attention::split_policy::none ? std::string("no split-KV path")
      : p.options.splits ? std::string("from --splits")
                       : fmt::format("the heuristic's for B {}, H {}{}", s.batch, s.heads,
                                     p.options.batch_heads ? ", from --batch-heads" : "");
  std::printf("preset %s: %s\n", p.options.kernel.name().c_str(),
              kernel_text(p.kernel, s.key_rows, split_source).c_str());
  if (p.kernel.stabilize)
    std::printf("stabilized softmax%s: beta %s, eps %s\n", p.kernel.stabilize->across_blocks ? " across blocks" : "",
                fmt::format("{}", to_host(p.kernel.stabilize->beta)).c_str(),
                fmt::format("{}", to_host(p.kernel.stabilize->epsilon)).c_str());
}

// Where a row's result comes from: its block of rows, and the K/V blocks each split ran for it.
std::string describe_row(const attention_problem& p, std::size_t row) {
  const flash_kernel& kernel = p.kernel;
  const attention_shape& shape = p.head_shape;
  const int m_block = static_cast<int>(row) / kernel.block_m;
  const int key_blocks = (shape.key_rows + kernel.block_n - 1) / kernel.block_n;
  std::string text = fmt::format("  row {}: row block {} (rows {}..{}); {} K/V block{} of {} keys", row, m_block,
                                 m_block * kernel.block_m, std::min((m_block + 1) * kernel.block_m, shape.query_rows) - 1,
                                 key_blocks, key_blocks == 1 ? "" : "s", kernel.block_n);
  if (shape.causal) {
    const long last_key = static_cast<long>(attention::visible_keys(kernel, shape, static_cast<int>(row))) - 1;
    text += last_key < 0 ? "; causal: the row sees no key"
                         : fmt::format("; causal: the row sees keys 0..{}, its diagonal in block {}", last_key,
                                       last_key / kernel.block_n);
  }
  text += "\n";
  // Each split runs its blocks from the last down (flash_forward.hpp).
  constexpr int shown_splits = 8;
  for (int s = 0; s < kernel.splits && s < shown_splits; ++s) {
    const attention::block_range range = attention::blocks_of(kernel, shape, m_block, s);
    text += kernel.splits > 1 ? fmt::format("    split {} of {}: ", s, kernel.splits) : std::string("    one pass: ");
    if (range.first >= range.end) {
      text += "no blocks (an empty split)\n";
      continue;
    }
    const int last_key = std::min(range.end * kernel.block_n, shape.key_rows) - 1;
    text += range.end - range.first == 1
                ? fmt::format("block {} (keys {}..{})\n", range.first, range.first * kernel.block_n, last_key)
                : fmt::format("blocks {} down to {} (keys {}..{})\n", range.end - 1, range.first,
                              range.first * kernel.block_n, last_key);
  }
  if (kernel.splits > shown_splits) text += fmt::format("    ... and {} more splits\n", kernel.splits - shown_splits);
  if (kernel.splits > 1) text += fmt::format("    then the combine kernel merged the {} splits' O and L\n", kernel.splits);
  return text;
}

// An element's index as NumPy writes it, with the axes named.
std::string index_text(const attention_problem& p, std::size_t head, std::size_t row, std::optional<std::size_t> col) {
  const std::size_t b = head / p.q.heads, h = head % p.q.heads;
  if (p.four_d)
    return col ? fmt::format("[{}, {}, {}, {}] (b, h, row, col)", b, h, row, *col)
               : fmt::format("[{}, {}, {}] (b, h, row)", b, h, row);
  return col ? fmt::format("[{}, {}] (row, col)", row, *col) : fmt::format("[{}] (row)", row);
}

template <format F>
std::string value_text(value<F> x) {
  return fmt::format("0x{:0{}X} ({})", x.bits, F.width() / 4, to_double(x));
}

// A float32 as bits and its shortest decimal.
std::string short_text(float32 x) { return fmt::format("0x{:08X} ({})", x.bits, to_host(x)); }

// A step's rounding error in units of its result's last place (of the result's format).
std::string error_text(const trace& t) {
  if (!t.error || !t.result_value) return "-";
  const double error = t.error->convert_to<double>();
  if (error == 0.0) return "0 (exact)";
  const double result = std::fabs(t.result_value->convert_to<double>());
  const format f = t.result_format;
  const int least_exponent = 1 - f.bias() - f.fraction_bits;  // the smallest subnormal's
  const int exponent = result == 0.0 ? least_exponent : std::max(std::ilogb(result) - f.fraction_bits, least_exponent);
  return fmt::format("{:.3g} ({:+.3f} ulp)", error, std::ldexp(error, -exponent));
}

std::string_view step_name(attention::traced_step::kind what) {
  using kind = attention::traced_step::kind;
  switch (what) {
    case kind::rescale: return "O * alpha";
    case kind::tensor_core: return "tensor-core step";
    case kind::normalize: return "O * (1/l)";
    case kind::combine: return "combine fma";
    case kind::to_bf16: return "cvt to bf16";
  }
  return "";
}

// The float32 values before the final conversion that give `expected`, and
// where the model's value lies against them.
std::string conversion_window(float32 model, bfloat16 expected) {
  const float target = to_host(float32::from_bits(std::uint32_t{expected.bits} << 16));
  if (std::isnan(target) || std::isnan(to_host(model))) return "";
  float low = target, high = target;
  constexpr int most_steps = 1 << 17;  // a bf16 ulp is 2^16 float32 ulps
  for (int i = 0; i < most_steps && ptx::cvt_rn_bf16_f32(from_host(std::nextafter(low, -INFINITY))).bits == expected.bits; ++i)
    low = std::nextafter(low, -INFINITY);
  for (int i = 0; i < most_steps && ptx::cvt_rn_bf16_f32(from_host(std::nextafter(high, INFINITY))).bits == expected.bits; ++i)
    high = std::nextafter(high, INFINITY);
  const float x = to_host(model);
  const std::string range = fmt::format("  the expected bf16 value is what float32 values from {} to {} convert to; the "
                                        "model's value before the conversion, {}, ", low, high, x);
  if (x >= low && x <= high) return range + "lies among them\n";
  const float nearest = x < low ? low : high;
  long steps = 0;
  for (float y = x; y != nearest && steps < (1L << 24); ++steps) y = std::nextafter(y, nearest);
  // In bf16 ulps too, the unit of the comparison, at the boundary the value missed.
  const double bf16_ulps = std::fabs(double{nearest} - double{x}) / std::ldexp(1.0, std::ilogb(nearest) - 7);
  return range + fmt::format("lies {}{} float32 ulp{} ({:.3g} bf16 ulp) {} them\n", steps >= (1L << 24) ? "more than " : "",
                             steps, steps == 1 ? "" : "s", bf16_ulps, x < low ? "below" : "above");
}

// How the model computed O[row][col] of one head: the row block by block, then
// every rounding of the element (attention/explain.hpp), the largest and the last in full.
void print_explanation(const attention_problem& p, const element_index& at, std::optional<bfloat16> expected) {
  const std::size_t rows = p.q.rows, keys = p.k.rows, d = p.q.head_dim;
  const auto q = std::span<const bfloat16>(p.q.values).subspan(at.head * rows * d, rows * d);
  const auto k = std::span<const bfloat16>(p.k.values).subspan(at.head * keys * d, keys * d);
  const auto v = std::span<const bfloat16>(p.v.values).subspan(at.head * keys * d, keys * d);
  attention::row_record record;
  attention::element_trace element;
  try {
    record = attention::record_row(p.kernel, p.head_shape, q, k, v, static_cast<int>(at.row));
    element = attention::trace_output_element(p.kernel, p.head_shape, record, v, static_cast<int>(at.col));
  } catch (const std::exception& e) {
    fail("attention: " + printable(e.what()));
  }
  std::printf("\nO%s = %s, as the model computed it\n", index_text(p, at.head, at.row, at.col).c_str(),
              value_text(record.o[at.col]).c_str());
  const int splits = static_cast<int>(record.splits.size());
  for (int s = 0; s < splits; ++s) {
    std::printf(splits > 1 ? "  split %d of %d:\n" : "  the one pass:\n", s, splits);
    for (const attention::row_block& b : record.blocks) {
      if (b.split != s) continue;
      int ones = 0;
      for (const float32 x : b.p) ones += x.bits == 0x3F800000u;
      const int last_key = std::min(b.first_key + static_cast<int>(b.scores.size()), p.head_shape.key_rows) - 1;
      std::printf("    block %d, keys %d..%d: max %s, running max %s, alpha %s, P = 1 at %d key%s%s\n", b.block,
                  b.first_key, last_key, fmt::format("{}", to_host(b.block_max)).c_str(),
                  fmt::format("{}", to_host(b.running_max)).c_str(),
                  b.alpha ? fmt::format("{}", to_host(*b.alpha)).c_str() : "(first block)", ones, ones == 1 ? "" : "s",
                  !p.kernel.stabilize ? ""
                  : fmt::format(", {} within eps of the {}", b.ties,
                                p.kernel.stabilize->across_blocks ? "row's max so far" : "block max").c_str());
      std::printf("      row sums %s %s %s %s; O[%zu] = %s\n", fmt::format("{}", to_host(b.sums[0])).c_str(),
                  fmt::format("{}", to_host(b.sums[1])).c_str(), fmt::format("{}", to_host(b.sums[2])).c_str(),
                  fmt::format("{}", to_host(b.sums[3])).c_str(), at.col, short_text(b.o[at.col]).c_str());
    }
    const attention::row_split_end& end = record.splits[static_cast<std::size_t>(s)];
    if (!end.ran) std::printf("    no K/V block: O = 0, L = -inf\n");
    else
      std::printf("    end: row sum %s, 1/sum %s, O[%zu] = %s, L = %s\n", short_text(end.sum).c_str(),
                  short_text(end.inverse).c_str(), at.col, short_text(end.o[at.col]).c_str(), short_text(end.lse).c_str());
  }
  if (splits > 1) std::printf("  combine: L = %s\n", short_text(record.lse).c_str());
  std::printf("  the %zu roundings of O[%zu], in order (error: the rounded result minus the step's exact result):\n",
              element.steps.size(), at.col);
  std::printf("    %5s %5s %5s %-13s %-16s %-34s %s\n", "step", "split", "block", "keys", "operation", "result", "error");
  std::size_t largest = 0;
  double largest_ulps = -1;
  for (std::size_t i = 0; i < element.steps.size(); ++i) {
    const attention::traced_step& step = element.steps[i];
    const bool tensor_core = step.what == attention::traced_step::kind::tensor_core;
    const std::string keys_text =
        tensor_core ? fmt::format("{}..{}", step.first_key, step.first_key + p.kernel.tensor_core.products_per_step - 1) : "";
    const std::string error = error_text(step.record);
    std::printf("    %5zu %5s %5s %-13s %-16s %-34s %s\n", i + 1,
                step.what == attention::traced_step::kind::to_bf16 ? "" : std::to_string(step.split).c_str(),
                step.block >= 0 ? std::to_string(step.block).c_str() : "", keys_text.c_str(),
                std::string(step_name(step.what)).c_str(),
                describe_value(step.record.result_format, step.record.result_bits).c_str(), error.c_str());
    if (step.record.error && step.record.result_value && step.what != attention::traced_step::kind::to_bf16) {
      const double ulps = std::fabs(step.record.error->convert_to<double>()) /
                          std::max(std::fabs(step.record.result_value->convert_to<double>()), 1e-300);
      if (ulps > largest_ulps) largest_ulps = ulps, largest = i;
    }
  }
  if (largest_ulps > 0)
    std::printf("\n  step %zu, the largest error relative to its result, in full:\n%s", largest + 1,
                render(element.steps[largest].record, output_style::text).c_str());
  std::printf("\n  step %zu, the conversion to bf16, in full:\n%s", element.steps.size(),
              render(element.steps.back().record, output_style::text).c_str());
  if (expected) {
    const float32 before = element.steps.size() >= 2 ? float32::from_bits(element.steps.back().record.operand_bits(0))
                                                     : float32::zero();
    std::printf("%s", conversion_window(before, *expected).c_str());
  }
}

// B's bits against A's as a signed count of representable steps (values of
// either sign; NaN apart).
template <format F>
long long ulp_steps(value<F> a, value<F> b) {
  constexpr std::uint32_t magnitude = (std::uint32_t{1} << (F.width() - 1)) - 1;
  const auto ordered = [](std::uint32_t bits) {
    return (bits & ~magnitude) ? -static_cast<long long>(bits & magnitude) : static_cast<long long>(bits);
  };
  return ordered(b.bits) - ordered(a.bits);
}

// How B's differing elements lie against A's: how many, their distances in
// ulps of the format (1, 2, 3-4, 5-8, ...) and how many B has above A.
struct difference_summary {
  std::uint64_t differ = 0, above = 0, nan = 0;
  std::map<long long, std::uint64_t> by_distance;  // bucket: its largest distance
  std::uint64_t within(long long ulps) const {
    std::uint64_t n = 0;
    for (const auto& [bucket, count] : by_distance) n += bucket <= ulps ? count : 0;
    return n;
  }
  std::string distances() const {
    std::string text;
    for (const auto& [bucket, count] : by_distance)
      text += fmt::format("{}{}: {}", text.empty() ? "" : ", ",
                          bucket <= 2 ? std::to_string(bucket) : fmt::format("{}-{}", bucket / 2 + 1, bucket), count);
    return text;
  }
};

template <format F>
difference_summary differences_of(const std::vector<value<F>>& a, const std::vector<value<F>>& b) {
  difference_summary s;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].bits == b[i].bits) continue;
    ++s.differ;
    if (a[i].is_nan() || b[i].is_nan()) {
      ++s.nan;
      continue;
    }
    const long long steps = ulp_steps(a[i], b[i]);
    s.above += steps > 0;
    long long bucket = 1;
    while (bucket < std::llabs(steps)) bucket *= 2;
    ++s.by_distance[bucket];
  }
  return s;
}

// How B's elements differ from A's: the count, the distances in ulps of the
// format and their direction.
template <format F>
void print_differences(std::string_view name, std::string_view unit, const std::vector<value<F>>& a,
                       const std::vector<value<F>>& b) {
  const difference_summary s = differences_of(a, b);
  std::printf("%s: %zu elements, %llu differ (%.4f%%)\n", std::string(name).c_str(), a.size(),
              static_cast<unsigned long long>(s.differ),
              a.empty() ? 0.0 : 100.0 * static_cast<double>(s.differ) / static_cast<double>(a.size()));
  if (s.differ == 0) return;
  std::printf("  distance in %s ulps %s%s\n  B above A: %llu, below: %llu\n", std::string(unit).c_str(),
              s.distances().c_str(), s.nan ? fmt::format("; NaN in one of them: {}", s.nan).c_str() : "",
              static_cast<unsigned long long>(s.above), static_cast<unsigned long long>(s.differ - s.above - s.nan));
}

// Counts and reports the mismatches of one output; returns how many and the first.
template <format F>
std::pair<std::uint64_t, std::size_t> compare(const attention_problem& p, std::string_view name,
                                              const std::vector<value<F>>& model, const std::vector<value<F>>& expected,
                                              std::size_t row_length) {
  std::uint64_t mismatches = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < model.size(); ++i)
    if (model[i].bits != expected[i].bits && mismatches++ == 0) first = i;
  std::printf("%s: %zu elements compared, %llu mismatches\n", std::string(name).c_str(), model.size(),
              static_cast<unsigned long long>(mismatches));
  if (mismatches == 0) return {0, 0};
  const difference_summary s = differences_of(expected, model);
  std::printf("  distance in %s ulps %s%s; the model above the file: %llu, below: %llu\n", F.width() == 16 ? "bf16" : "fp32",
              s.distances().c_str(), s.nan ? fmt::format("; NaN on one side: {}", s.nan).c_str() : "",
              static_cast<unsigned long long>(s.above), static_cast<unsigned long long>(s.differ - s.above - s.nan));
  // A kernel's output matches its model bit for bit or misses in a few places; a file off by an ulp or two
  // in many elements, in both directions, is a differently rounded result.
  if (s.differ * 100 >= model.size() && s.within(4) * 100 >= s.differ * 85 && s.above * 5 >= s.differ &&
      (s.differ - s.above - s.nan) * 5 >= s.differ)
    std::printf("  (%.1f%% of the elements differ, nearly all by 1 to 4 ulps either way: the file looks like another "
                "rounding of the same result, a higher-precision reference or another kernel, rather than this "
                "kernel's output)\n", 100.0 * static_cast<double>(s.differ) / static_cast<double>(model.size()));
  const std::size_t rows = p.q.rows;
  const std::size_t row_index = first / row_length, head = row_index / rows, row = row_index % rows;
  const std::optional<std::size_t> col = row_length > 1 ? std::optional<std::size_t>(first % row_length) : std::nullopt;
  std::printf("first mismatch in %s at %s\n  expected %s\n  model    %s\n%s", std::string(name).c_str(),
              index_text(p, head, row, col).c_str(), value_text(expected[first]).c_str(),
              value_text(model[first]).c_str(),
              has_flash2_arithmetic(p.kernel) && p.options.kernel.gpu_kernel() ? describe_row(p, row).c_str() : "");
  return {mismatches, first};
}

// How a kernel took one key's P into P V: in which block, against which
// maximum, and the roundings to fp32 (the exponential) and to bf16.
struct key_outcome {
  int block = -1, visit = 0;  // visit: the block's place in the kernel's order, from 1
  int max_key = -1;           // the key whose score was the running max the P was taken against
  float32 max{}, p{};         // that max in the kernel's units; P in fp32
  bfloat16 p_bf16{};
};

// One row of one head through a kernel, for --compare: its row sum, its
// element's unnormalised O after the last block, O in fp32 and L, and each
// key's P.
struct row_outcome {
  float32 sum{}, unnormalised{}, normalised{}, lse{};
  std::string blocks;  // the K/V blocks in the order the kernel visited them
  std::vector<key_outcome> keys;
};

struct row_recorder {
  int row = 0;
  std::size_t col = 0;
  row_outcome* out = nullptr;
  int visits = 0, max_key = -1;
  float max_score = -INFINITY;  // the largest score seen so far, in the kernel's units (a monotone map of the raw)
  void on(const attention::softmax_block_event& e) {
    if (e.row != row) return;
    ++visits;
    const std::size_t first = static_cast<std::size_t>(e.block) * e.scores.size();
    for (std::size_t j = 0; j < e.scores.size(); ++j)
      if (to_host(e.scores[j]) > max_score) max_score = to_host(e.scores[j]), max_key = static_cast<int>(first + j);
    for (std::size_t j = 0; j < e.scores.size() && first + j < out->keys.size(); ++j)
      out->keys[first + j] = {e.block, visits, max_key, e.running_max, e.p[j], e.p_bf16[j]};
  }
  void on(const attention::output_block_event& e) {
    if (e.row != row) return;
    out->unnormalised = e.o[col];
    out->blocks += (out->blocks.empty() ? "" : " ") + std::to_string(e.block);
  }
  void on(const attention::row_end_event& e) {
    if (e.row != row) return;
    out->sum = e.sum;
    out->normalised = e.o[col];
    out->lse = e.lse;
  }
};

row_outcome trace_row(const attention_problem& p, std::size_t head, std::size_t row, std::size_t col) {
  const std::size_t rows = p.q.rows, keys = p.k.rows, d = p.q.head_dim;
  std::vector<bfloat16> o(rows * d);
  std::vector<float32> lse(rows);
  row_outcome out;
  out.keys.resize(keys);
  attention::flash_forward_head(p.kernel, p.head_shape, std::span<const bfloat16>(p.q.values).subspan(head * rows * d, rows * d),
                                std::span<const bfloat16>(p.k.values).subspan(head * keys * d, keys * d),
                                std::span<const bfloat16>(p.v.values).subspan(head * keys * d, keys * d), o, lse,
                                row_recorder{static_cast<int>(row), col, &out});
  return out;
}

// The first key, in key order, whose P enters P V as another bf16 number in
// the two kernels, side by side: the block that held it and when the kernel
// visited it, the running max it was taken against (the key whose score that
// is, and the max in each kernel's own units), P in fp32 and its rounding.
void print_first_key_apart(const row_outcome& a, const row_outcome& b) {
  std::size_t key = 0;
  while (key < a.keys.size() && (a.keys[key].block < 0 || a.keys[key].p_bf16.bits == b.keys[key].p_bf16.bits)) ++key;
  if (key == a.keys.size()) {
    std::printf("  every key's P enters P V as the same bf16 number in both kernels\n");
    return;
  }
  const key_outcome &x = a.keys[key], &y = b.keys[key];
  std::printf("  first key whose bf16 P differs: key %zu\n", key);
  const auto side = [](const char* name, const key_outcome& k) {
    const bfloat16 rounded = k.p_bf16;
    const double error = to_double(rounded) - to_double(k.p);
    std::printf("    %s block %d, visited %d%s; max of the keys seen so far: key %d's score, %s in its units\n"
                "      P %s -> bf16 %s (%s)\n",
                name, k.block, k.visit, k.visit == 1 ? "st" : k.visit == 2 ? "nd" : k.visit == 3 ? "rd" : "th", k.max_key,
                value_text(k.max).c_str(), value_text(k.p).c_str(), value_text(rounded).c_str(),
                std::isnan(error) ? "NaN" : error == 0 ? "exact" : error > 0 ? "rounded up" : "rounded down");
  };
  side("A", x);
  side("B", y);
  std::printf("    %s\n", x.max_key != y.max_key
                               ? "the kernels had seen different keys: each rounds this P against another maximum, "
                                 "and the later rescaling by alpha does not undo the rounding"
                               : "the same maximum: the exponent's arithmetic (its units, a fused or rounded multiply, "
                                 "the exponential) gives another fp32 P");
}

// Which of a row's values part first between two kernels, for one element.
void print_where_rows_part(const std::array<attention_problem, 2>& problems, const std::array<bfloat16, 2>& results,
                           std::size_t head, std::size_t row, std::size_t col) {
  const row_outcome a = trace_row(problems[0], head, row, col), b = trace_row(problems[1], head, row, col);
  std::printf("  A visited K/V blocks %s\n  B visited K/V blocks %s\n", a.blocks.c_str(), b.blocks.c_str());
  const auto stage = [](std::string_view what, float32 x, float32 y) {
    std::printf("  %-31s A %s  B %s%s\n", std::string(what).c_str(), value_text(x).c_str(), value_text(y).c_str(),
                x.bits == y.bits ? "  same" : fmt::format("  B {:+} fp32 ulps", ulp_steps(x, y)).c_str());
  };
  stage("row sum l", a.sum, b.sum);
  stage("O before normalisation", a.unnormalised, b.unnormalised);
  stage("O normalised (fp32)", a.normalised, b.normalised);
  std::printf("  %-31s A %s  B %s\n", "O (bf16)", value_text(results[0]).c_str(), value_text(results[1]).c_str());
  std::printf("  where they part: %s\n",
              a.sum.bits != b.sum.bits ? "already in the row sum (the exponentials, their units or their order)"
              : a.unnormalised.bits != b.unnormalised.bits
                  ? "in the unnormalised O (P, its rescaling or the P V steps); the row sums agree"
                  : a.normalised.bits != b.normalised.bits ? "in the normalisation; the row sum and unnormalised O agree"
                                                           : "in the bf16 conversion; every fp32 value agrees");
  print_first_key_apart(a, b);
}

// --compare A B: both kernels on the files, how their O and L differ, and for
// the first differing element of O where the two rows part.
int compare_kernels(const attention_options& options) {
  std::array<attention_problem, 2> problems{read_problem(options), read_problem(options)};
  std::array<attention::attention_output, 2> out;
  for (std::size_t side = 0; side < 2; ++side) {
    attention_problem& p = problems[side];
    p.options.kernel = options.compare[side];
    try {
      p.kernel = attention::resolve(p.options.kernel.description(), p.heuristic_shape, {options.scale, 132, options.splits});
    } catch (const std::invalid_argument& error) {
      fail(printable(options.q_path) + ": " + error.what());
    }
    out[side] = compute(p).bits;
  }
  const attention_problem& p = problems[0];
  std::printf("attention: Q %s, K and V %s, %s\n", shape_text(p.q.file_shape).c_str(), shape_text(p.k.file_shape).c_str(),
              options.causal ? "causal" : "not causal");
  for (std::size_t side = 0; side < 2; ++side)
    std::printf("%s %s: tiles %d rows x %d keys, %d split%s\n", side == 0 ? "A" : "B",
                problems[side].options.kernel.name().c_str(), problems[side].kernel.block_m, problems[side].kernel.block_n,
                problems[side].kernel.splits, problems[side].kernel.splits == 1 ? "" : "s");
  print_differences("O", "bf16", out[0].o, out[1].o);
  const bool same_lse_units = problems[0].kernel.lse_natural_units == problems[1].kernel.lse_natural_units;
  if (same_lse_units) print_differences("L", "fp32", out[0].lse, out[1].lse);
  else std::printf("L: not compared, one kernel writes it in natural-log units and the other in base 2\n");
  std::size_t first = 0;
  while (first < out[0].o.size() && out[0].o[first].bits == out[1].o[first].bits) ++first;
  if (first == out[0].o.size()) return !same_lse_units || out[0].lse == out[1].lse ? 0 : 1;
  const std::size_t d = p.q.head_dim, rows = p.q.rows;
  std::printf("first differing element of O: %s\n", index_text(p, first / d / rows, first / d % rows, first % d).c_str());
  if (problems[0].kernel.splits > 1 || problems[1].kernel.splits > 1)
    std::printf("  (a split-KV kernel's row values are per split, merged by its combine kernel: give --splits 1, or\n"
                "  --batch-heads with the call's B and H, to follow the row through one pass)\n");
  else
    print_where_rows_part(problems, {out[0].o[first], out[1].o[first]}, first / d / rows, first / d % rows, first % d);
  return 1;
}

// A file of bf16 values with the shape of Q or of K (--forward-o, --expect-dq, ...).
std::vector<bfloat16> read_like(const std::string& path, std::string_view what, const operand_tensor& like,
                                std::string_view like_name) {
  const npy::array array = read_npy(path);
  if (array.shape != like.file_shape)
    fail(printable(path) + ": " + std::string(what) + " has shape " + shape_text(array.shape) + "; expected " +
         std::string(like_name) + "'s shape " + shape_text(like.file_shape));
  return bf16_elements(array, path);
}

// A float32 file of one value per query row ([B, H, N] or [N]): L, delta.
std::vector<float32> read_rows(const attention_problem& p, const std::string& path, std::string_view what) {
  const npy::array array = read_npy(path, "float32");
  if (array.shape != lse_shape(p))
    fail(printable(path) + ": " + std::string(what) + " has shape " + shape_text(array.shape) + "; expected " +
         shape_text(lse_shape(p)));
  if (array.descr != "<f4")
    fail(printable(path) + ": element type '" + array.descr + "' is not float32");
  std::vector<float32> values(array.element_count());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = float32::from_bits(array.word(i));
  return values;
}

template <format F>
void write_values(const std::string& path, const std::vector<std::size_t>& shape, const std::vector<value<F>>& values) {
  if (path.empty()) return;
  std::vector<std::conditional_t<F.width() == 16, std::uint16_t, std::uint32_t>> bits(values.size());
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<decltype(bits[i] + 0)>(values[i].bits);
  try {
    npy::write(path, F.width() == 16 ? "<u2" : "<f4", shape, bits.data());
  } catch (const npy::npy_error& error) {
    fail(printable(error.what()));
  }
}

// --backward: PyTorch's flash backward (attention/flash_backward.hpp) on the
// files' heads, dQ in the deterministic order.
int backward_pass(const attention_options& options) {
  const attention_problem p = read_problem(options);
  const operand_tensor d_o = read_operand(options.backward_do, "dO");
  if (d_o.file_shape != p.q.file_shape)
    fail(printable(options.backward_do) + ": dO has shape " + shape_text(d_o.file_shape) + "; expected Q's shape " +
         shape_text(p.q.file_shape));
  std::vector<bfloat16> o;
  std::vector<float32> lse;
  if (!options.forward_o.empty()) o = read_like(options.forward_o, "O", p.q, "Q");
  if (!options.forward_lse.empty()) lse = read_rows(p, options.forward_lse, "L");
  std::optional<std::vector<bfloat16>> expected_dq, expected_dk, expected_dv;
  std::optional<std::vector<float32>> expected_delta;
  if (!options.expect_dq.empty()) expected_dq = read_like(options.expect_dq, "dQ", p.q, "Q");
  if (!options.expect_dk.empty()) expected_dk = read_like(options.expect_dk, "dK", p.k, "K");
  if (!options.expect_dv.empty()) expected_dv = read_like(options.expect_dv, "dV", p.k, "K");
  if (!options.expect_delta.empty()) expected_delta = read_rows(p, options.expect_delta, "delta");
  if (o.empty() || lse.empty()) {  // the forward pass the backward follows, as the preset computes it
    const attention_result forward = compute(p);
    if (o.empty()) o = forward.bits.o;
    if (lse.empty()) lse = forward.bits.lse;
  }
  attention::flash_backward_kernel kernel;
  try {
    kernel = attention::pytorch_sdpa_flash_sm90_backward(
        p.heuristic_shape, options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(p.q.head_dim)));
  } catch (const std::invalid_argument& error) {
    fail(printable(options.q_path) + ": " + error.what());
  }
  const std::size_t heads = p.head_count(), rows = p.q.rows, keys = p.k.rows, d = p.q.head_dim;
  std::vector<bfloat16> dq(heads * rows * d), dk(heads * keys * d), dv(heads * keys * d);
  std::vector<float32> delta(heads * rows);
  for (std::size_t h = 0; h < heads; ++h) {
    const auto head = [h](const std::vector<bfloat16>& x, std::size_t n) {
      return std::span<const bfloat16>(x).subspan(h * n, n);
    };
    const attention::backward_gradients g = attention::flash_backward_head(
        kernel, p.head_shape, head(p.q.values, rows * d), head(p.k.values, keys * d), head(p.v.values, keys * d),
        head(o, rows * d), std::span<const float32>(lse).subspan(h * rows, rows), head(d_o.values, rows * d));
    std::copy(g.dq.begin(), g.dq.end(), dq.begin() + static_cast<std::ptrdiff_t>(h * rows * d));
    std::copy(g.dk.begin(), g.dk.end(), dk.begin() + static_cast<std::ptrdiff_t>(h * keys * d));
    std::copy(g.dv.begin(), g.dv.end(), dv.begin() + static_cast<std::ptrdiff_t>(h * keys * d));
    std::copy(g.delta.begin(), g.delta.end(), delta.begin() + static_cast<std::ptrdiff_t>(h * rows));
  }
  write_values(options.out_dq, p.q.file_shape, dq);
  write_values(options.out_dk, p.k.file_shape, dk);
  write_values(options.out_dv, p.k.file_shape, dv);
  write_values(options.out_delta, lse_shape(p), delta);
  const attention_shape& call = p.heuristic_shape;
  std::printf("attention backward: Q and dO %s, K and V %s, %s, scale %s\n", shape_text(p.q.file_shape).c_str(),
              shape_text(p.k.file_shape).c_str(), options.causal ? "causal" : "not causal",
              fmt::format("{} (0x{:08X})", to_host(kernel.scale), kernel.scale.bits).c_str());
  std::printf("PyTorch's flash backward (FA2, sm_90): tiles %d query rows x %d keys; O and L %s; dQ in the "
              "deterministic order, %d buffer%s (B %d, H %d%s, 132 SMs)\n",
              kernel.block_m, kernel.block_n,
              options.forward_o.empty() || options.forward_lse.empty() ? "partly computed by pytorch_sdpa_flash_sm90"
                                                                         : "from the files",
              kernel.dq_splits, kernel.dq_splits == 1 ? "" : "s", call.batch, call.heads,
              options.batch_heads ? ", from --batch-heads" : "");
  std::uint64_t mismatches = 0;
  const auto check = [&](std::string_view name, const auto& model, const auto& expected, std::size_t n_rows,
                         std::size_t row_length, bool key_rows) {
    if (!expected) return;
    std::uint64_t bad = 0;
    std::size_t first = 0;
    for (std::size_t i = 0; i < model.size(); ++i)
      if (model[i].bits != (*expected)[i].bits && bad++ == 0) first = i;
    std::printf("%s: %zu elements compared, %llu mismatches\n", std::string(name).c_str(), model.size(),
                static_cast<unsigned long long>(bad));
    mismatches += bad;
    if (bad == 0) return;
    const std::size_t row_index = first / row_length, row = row_index % n_rows;
    const std::optional<std::size_t> col = row_length > 1 ? std::optional<std::size_t>(first % row_length) : std::nullopt;
    std::printf("first mismatch in %s at %s\n  expected %s\n  model    %s\n", std::string(name).c_str(),
                index_text(p, row_index / n_rows, row, col).c_str(), value_text((*expected)[first]).c_str(),
                value_text(model[first]).c_str());
    const long bm = kernel.block_m, bn = kernel.block_n, n_q = static_cast<long>(rows), n_k = static_cast<long>(keys);
    if (key_rows) {
      const long block = static_cast<long>(row) / bn;
      const long m_min = attention::first_query_block(kernel, p.head_shape, block);
      std::printf("  key %zu: key block %ld (keys %ld..%ld); its sum runs over query blocks %ld down to %ld, 16 rows "
                  "a tensor-core step\n",
                  row, block, block * bn, std::min((block + 1) * bn, n_k) - 1, (n_q + bm - 1) / bm - 1, m_min);
    } else if (name == "dQ") {
      std::printf("  row %zu: query block %ld; its dQ adds one tile per key block that reaches it, dealt to %d "
                  "buffer%s and summed buffer by buffer (torch.use_deterministic_algorithms(True); the count is "
                  "ceil(132 / (B H)) for the call's B and H: --batch-heads); without it the GPU adds the tiles in an "
                  "order that varies from run to run, and dQ alone differs by an ulp or two in a few elements\n",
                  row, static_cast<long>(row) / bm, kernel.dq_splits, kernel.dq_splits == 1 ? "" : "s");
    }
  };
  check("dQ", dq, expected_dq, rows, d, false);
  check("dK", dk, expected_dk, keys, d, true);
  check("dV", dv, expected_dv, keys, d, true);
  check("delta", delta, expected_delta, rows, 1, false);
  return mismatches ? 1 : 0;
}

void print_kernel_list() {
  for (const attention::preset& p : attention::presets())
    std::printf("  %-48s %s\n", std::string(p.name).c_str(), attention::preset_summary(p).c_str());
}

}  // namespace

int attention_command(const arguments& args) {
  attention_options options;
  const std::vector<option> table = option_table(options);
  if (asks_for_help(args)) {
    print_help(attention_help, table);
    std::puts("\npresets (bitexact attention --list-kernels):");
    print_kernel_list();
    return 0;
  }
  if (args.size() == 1 && args[0] == "--list-kernels") {
    print_kernel_list();
    return 0;
  }
  if (args.size() == 2 && args[0] == "--print-kernel") {
    try {
      std::puts(attention::kernel_to_json(attention::find_kernel(args[1])).dump(2).c_str());
    } catch (const std::invalid_argument& error) {
      fail("attention: " + std::string(error.what()));
    }
    return 0;
  }
  check_options(options, read_options(args, "attention", table));
  if (!options.compare.empty()) return compare_kernels(options);
  if (options.backward()) return backward_pass(options);
  const attention_problem problem = read_problem(options);
  const expectations expected = read_expectations(problem);
  const attention_result computed = compute(problem);
  const attention::attention_output& result = computed.bits;
  write_outputs(problem, computed);
  print_summary(problem);
  std::uint64_t mismatches = 0;
  std::optional<element_index> first_o_mismatch;
  if (expected.o) {
    const auto [count, first] = compare(problem, "O", result.o, *expected.o, problem.q.head_dim);
    const std::size_t rows = problem.q.rows, d = problem.q.head_dim;
    if (count > 0) first_o_mismatch = element_index{first / d / rows, first / d % rows, first % d};
    mismatches += count;
  }
  if (expected.lse) mismatches += compare(problem, "L", result.lse, *expected.lse, 1).first;
  if (problem.explain) {
    const element_index& at = *problem.explain;
    const std::size_t flat = (at.head * problem.q.rows + at.row) * problem.q.head_dim + at.col;
    print_explanation(problem, at, expected.o ? std::optional<bfloat16>((*expected.o)[flat]) : std::nullopt);
  }
  if (first_o_mismatch && problem.options.kernel.gpu_kernel() && has_flash2_arithmetic(problem.kernel)) {
    const element_index& at = *first_o_mismatch;
    const std::size_t flat = (at.head * problem.q.rows + at.row) * problem.q.head_dim + at.col;
    if (!problem.explain || problem.explain->head != at.head || problem.explain->row != at.row ||
        problem.explain->col != at.col)
      print_explanation(problem, at, (*expected.o)[flat]);
  }
  return mismatches ? 1 : 0;
}

}  // namespace bitexact::cli
