// `bitexact attention Q.npy K.npy V.npy`: PyTorch's flash-attention forward
// pass, computed by the emulator (attention/flash_forward.hpp) on every head
// of NumPy files, written out or compared bit for bit with what a GPU wrote.
// This file holds the options; the jobs are the other attention_*.cpp.
#include <fstream>
#include <sstream>

#include <bitexact/attention/kernel_json.hpp>

#include "attention.hpp"

namespace bitexact::cli::attention_parts {

namespace {

constexpr std::string_view attention_help =
    "usage: bitexact attention Q.npy K.npy V.npy [--preset NAME | --kernel FILE.json] [--causal]\n"
    "           [--gpu NAME] [--scale X] [--splits N] [--batch-heads B,H] [--beta B] [--eps E]\n"
    "           [--out-o FILE] [--out-lse FILE] [--expect-o FILE] [--expect-lse FILE] [--explain INDEX]\n"
    "           [--threads N]\n"
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
    "that is not. An fp8 kernel (a preset or description whose inputs are e4m3 or e5m2)\n"
    "takes Q, K and V as uint8 fp8 bit patterns (x.view(torch.uint8)) with their scales\n"
    "(--descale-q ... --scale-o), and writes O in its o_rounding's format: uint8 e4m3\n"
    "patterns (cuDNN's fp8 recipe) or uint16 bf16 patterns (FA2's fp8 recipe).\n"
    "\n"
    "options:\n"
    "{options}\n"
    "  (--explain and the explanation of a first mismatch trace FA2's arithmetic: the\n"
    "  pytorch_sdpa_flash_sm90 presets, bitexact's FP8 kernel (bitexact_flash_fp8_sm90\n"
    "  presets) and descriptions with the same arithmetic)\n"
    "\n"
    "Prints the shapes, the preset, the split count and the tiles first, before computing;\n"
    "then with --expect-o or --expect-lse the elements compared and the mismatches, and for\n"
    "the first mismatch of each its index, both values (bits and decimal) and the K/V blocks\n"
    "and splits of its row; for a mismatch in O also the element's computation as --explain\n"
    "shows it, and which float32 values before the final conversion would have given the\n"
    "file's bf16 value. While it computes, stderr shows the rows done, the rate and the time\n"
    "left when it is a terminal (nothing when it is piped or redirected).\n"
    "\n"
    "The exponentials and logarithms are MUFU table lookups: the command needs the tables\n"
    "mufu_ex2.bxt, mufu_rcp.bxt and mufu_lg2.bxt from the data folder (the source tree's\n"
    "data/, an install's share/bitexact, or $BITEXACT_DATA_DIR).\n"
    "\n"
    "Exit status: 0 computed, and every compared element agrees; 1 a mismatch; 2 bad\n"
    "arguments or input files, or output that could not be written, with one line on stderr.\n"
    "docs/attention.md has a worked example, from PyTorch to this command.\n";

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
attention::model_choice gpu_kernel_named(std::string_view text) {
  if (text.size() > 5 && text.substr(text.size() - 5) == ".json") return attention::model_choice(read_description(text));
  attention::model_choice choice;
  try {
    choice = attention::model_choice(attention::find_preset(text));
  } catch (const std::invalid_argument& error) {
    fail("attention: " + std::string(error.what()));
  }
  if (!choice.gpu_kernel())
    fail("attention: --compare takes GPU kernels (presets or .json descriptions), not " + std::string(text));
  return choice;
}

// --gpu's help: the GPU records (hardware/gpu.hpp), the default first.
const std::string& gpu_help() {
  static const std::string help = [] {
    std::string text = "the GPU the kernel runs on, whose SM count PyTorch's split-KV\n"
                       "and dQ heuristics read (default " + std::string(default_gpu().name) + "):";
    for (const gpu& g : gpus) text += fmt::format("\n  {}: {}", g.name, g.summary);
    return text;
  }();
  return help;
}

// --descale-q ... --scale-o: fp8 scale i of the call (attention::fp8_scale_names' order).
std::function<void(std::string_view)> fp8_scale(attention_options& o, std::size_t i) {
  return [&o, i](std::string_view x) {
    o.call.fp8_scales[i] = parse_float_decimal(x, "a positive finite decimal such as 0.0125", 0.0);
  };
}

std::vector<option> option_table(attention_options& o) {
  const auto file = [](std::string& path) { return [&path](std::string_view name) { path = name; }; };
  return {
      {"--preset", "NAME",
       "the kernel modelled, by name (default pytorch_sdpa_flash_sm90; the\n"
       "list is below, and --list-kernels prints it)",
       [&](std::string_view name) {
         if (o.kernel_given) fail("attention: --preset and --kernel both name the kernel; give one");
         try {
           o.call.model = attention::model_choice(attention::find_preset(name));
         } catch (const std::invalid_argument& error) {
           fail("attention: " + std::string(error.what()));
         }
         o.kernel_given = true;
       }},
      {"--kernel", "FILE.json",
       "the kernel modelled, from its description (a JSON object, the\n"
       "fields in docs/attention.md; --print-kernel NAME writes a preset's)",
       [&](std::string_view path) {
         if (o.kernel_given) fail("attention: --preset and --kernel both name the kernel; give one");
         o.call.model = attention::model_choice(read_description(path));
         o.kernel_given = true;
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
       "first key whose P-bar (bf16, or e4m3 for fp8 kernels that write bf16\n"
       "O) differs (exit 1 if any differ)",
       [&](std::string_view kernel) { o.compare.push_back(gpu_kernel_named(kernel)); }},
      {"--causal", "", "the causal mask (is_causal=True)", [&](std::string_view) { o.call.shape.causal = true; }},
      {"--gpu", "NAME", gpu_help(),
       [&](std::string_view name) {
         try {
           o.call.device = find_gpu(name);
         } catch (const std::invalid_argument& error) {
           fail("attention: --gpu: " + std::string(error.what()));
         }
       }},
      {"--scale", "X",
       "the softmax scale as PyTorch's scale= takes it: a decimal, read as\n"
       "a double (a Python float), rounded to float for the GPU kernel\n"
       "(default 1/sqrt(d); d ** -0.5 for the paper_reference presets)",
       [&](std::string_view x) { o.call.scale = parse_float_decimal(x, "a finite decimal such as 0.125"); }},
      {"--splits", "N",
       "(kernels with FA2's split-KV path) N split-KV splits (1 to 128) instead of the\n"
       "heuristic's; N > 1 takes the split kernel's tiles, 64 rows by 256\n"
       "keys (d 64) or by 128 keys (d 128); N = 1 the single kernel's",
       [&](std::string_view n) { o.call.splits = parse_integer(n, 1, 128, "an integer from 1 to 128"); }},
      {"--batch-heads", "B,H",
       "(GPU kernel presets) the B and H of the original call when the\n"
       "files hold only some of its heads: they decide the split count\n"
       "(default: the files' shape)",
       [&](std::string_view bh) { o.call.batch_heads = parse_batch_heads(bh); }},
      {"--no-autocast", "", "paper_reference presets: every tensor bf16, outside autocast",
       [&](std::string_view) { o.call.autocast = false; }},
      {"--beta", "B",
       "stabilized presets: a block's repeated positive max m becomes\n"
       "RN(B * m) (a decimal, at least 1; default 2)",
       [&](std::string_view b) {
         o.call.beta = as_float(parse_float_decimal(b, "a finite decimal of at least 1, such as 2", 1.0));
       }},
      {"--eps", "E",
       "stabilized presets: scores within E of the block's max, in scaled\n"
       "units, count as repeats (a decimal, at least 0; default 0.001)",
       [&](std::string_view e) {
         o.call.epsilon = as_float(parse_float_decimal(e, "a finite decimal of at least 0, such as 0.001", 0.0));
       }},
      {"--descale-q", "X",
       "(fp8 kernels) the per-tensor scale factors, as cuDNN's sdpa_fp8\n"
       "takes them, each a positive decimal read as a float (default 1):\n"
       "Q, K and V hold x / descale, P is stored times --scale-s and\n"
       "undone by --descale-s, O is written times --scale-o",
       fp8_scale(o, 0)},
      {"--descale-k", "X", "the same for K", fp8_scale(o, 1)},
      {"--descale-v", "X", "the same for V", fp8_scale(o, 2)},
      {"--descale-s", "X", "P's descale (1/448 in Transformer Engine's recipe)", fp8_scale(o, 3)},
      {"--scale-s", "X", "P's scale (448 in Transformer Engine's recipe)", fp8_scale(o, 4)},
      {"--scale-o", "X", "O's scale", fp8_scale(o, 5)},
      {"--out-o", "FILE", "write O as uint16 bf16 bit patterns (an e4m3 O: uint8), shaped like Q", file(o.out_o)},
      {"--out-lse", "FILE", "write L as float32, shape [B, H, N] ([N] for [N, d] inputs)", file(o.out_lse)},
      {"--expect-o", "FILE",
       "compare O with FILE bit for bit: uint16 or int16 bf16 patterns, or\n"
       "float32 holding bf16 values exactly, shaped like Q (an e4m3 O:\n"
       "uint8 patterns)",
       file(o.expect_o)},
      {"--expect-lse", "FILE",
       "compare L with FILE bit for bit: float32, [B, H, N] ([N] for\n"
       "[N, d] inputs; a trailing 1, as cuDNN's backend returns it, and\n"
       "N padded to a multiple of 32 with +inf, as the memory-efficient\n"
       "backend's, are accepted)",
       file(o.expect_lse)},
      {"--explain", "INDEX",
       "(GPU kernel presets) show how one element of O was computed,\n"
       "INDEX b,h,row,col ([B, H, N, d] files) or row,col ([N, d]): its\n"
       "row block by block (maxima, rescale factors, P = 1 counts, row\n"
       "sums, the element after each block) and every rounding of the\n"
       "element in order, the largest and the last in full",
       file(o.explain)},
      {"--threads", "N",
       "threads to compute on, the forward's and the backward's (default 0:\n"
       "one per core; the bits are the same for any count)",
       [&](std::string_view n) {
         o.call.threads = parse_integer(n, 0, attention::max_threads,
                                        fmt::format("an integer from 0 to {}", attention::max_threads));
       }},
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
      (options.kernel_given || !options.explain.empty() || !options.expect_o.empty() ||
       !options.expect_lse.empty() || !options.out_o.empty() || !options.out_lse.empty() || options.call.beta ||
       options.call.epsilon))
    fail("attention: --compare A B computes two kernels and compares them; it takes no --preset, --kernel, "
         "--explain, --expect-*, --out-*, --beta or --eps");
  const bool backward_files = !options.forward_o.empty() || !options.forward_lse.empty() ||
                              !options.expect_dq.empty() || !options.expect_dk.empty() || !options.expect_dv.empty() ||
                              !options.expect_delta.empty() || !options.out_dq.empty() || !options.out_dk.empty() ||
                              !options.out_dv.empty() || !options.out_delta.empty();
  if (backward_files && !options.backward())
    fail("attention: --forward-*, --expect-d* and --out-d* belong to the backward pass; give --backward DO.npy");
  if (options.backward() &&
      (!options.compare.empty() || options.kernel_given || !options.explain.empty() || !options.expect_o.empty() || !options.expect_lse.empty() ||
       !options.out_o.empty() || !options.out_lse.empty()))
    fail("attention: --backward models PyTorch's flash backward on the pytorch_sdpa_flash_sm90 forward; it takes no "
         "--preset, --kernel, --compare, --explain, --expect-o, --expect-lse, --out-o or --out-lse");
  if (!options.explain.empty() && !options.call.model.explainable_kernel())
    fail("attention: --explain traces FA2's arithmetic, bf16 or its fp8 recipe (" +
         attention::explainable_preset_names() + "), not " +
         options.call.model.name() + "'s");
  if (options.call.model.is(attention::preset_kind::paper_reference_fp64) && (!options.expect_o.empty() || !options.expect_lse.empty()))
    fail("attention: paper_reference_fp64 computes in double, a reference to measure errors against, not bits a GPU "
         "writes; --expect-o and --expect-lse need another preset");
}

void print_kernel_list() {
  for (const attention::preset& p : attention::presets())
    std::printf("  %-48s %s\n", std::string(p.name).c_str(), attention::preset_summary(p).c_str());
}

}  // namespace

}  // namespace bitexact::cli::attention_parts

namespace bitexact::cli {

int attention_command(const arguments& args) {
  using namespace attention_parts;
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
  return forward_pass(options);
}

}  // namespace bitexact::cli
