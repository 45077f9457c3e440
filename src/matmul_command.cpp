// `bitexact matmul A.npy B.npy`: a matrix product as a GEMM description says a
// kernel computes it (matmul/gemm.hpp; the presets of matmul/kernels.hpp or a
// JSON file), written out or compared bit for bit with what a GPU wrote;
// --identify finds the split count that gives every bit. This file parses and
// prints: the emulator checks the call.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include <bitexact/core/dispatch.hpp>
#include <bitexact/matmul/description_json.hpp>
#include <bitexact/matmul/gemm.hpp>
#include <bitexact/matmul/identify.hpp>
#include <bitexact/matmul/kernels.hpp>

#include "differences.hpp"
#include "npy_files.hpp"

namespace bitexact::cli {
namespace {

constexpr std::string_view matmul_help =
    "usage: bitexact matmul A.npy B.npy [--preset NAME | --kernel FILE.json] [--in-format F]\n"
    "           [--b-format F] [--out-format F] [--splits N] [--bias FILE] [--c FILE --beta X]\n"
    "           [--alpha X] [--scale-a X|FILE --scale-b X|FILE] [--out FILE] [--expect FILE]\n"
    "           [--identify | --explain ROW,COL | --compare A,B] [--threads N]\n"
    "       bitexact matmul --list-kernels | --print-kernel NAME\n"
    "\n"
    "D = A B as a GPU kernel computes it, bit for bit: each output the tensor core's chain of\n"
    "fused steps over K (a piece of K at a time when the kernel promotes into fp32), the pieces\n"
    "and the split-K partials added in fp32 in order, then the scales, alpha, beta x C and the\n"
    "bias in fp32, and one rounding to the output format (docs/matmul.md). The presets are\n"
    "cuBLAS's sm_90 kernels under PyTorch 2.11 (cuBLAS 13.1): torch.matmul, F.linear and\n"
    "torch.addmm on bf16 and fp16 (cublas_sm90, the default), on fp32 with allow_tf32\n"
    "(cublas_sm90_tf32, the default for fp32 inputs), torch._scaled_mm on fp8\n"
    "(cublas_sm90_fp8, the default for fp8 inputs, and cublas_sm90_fp8_fast_accum).\n"
    "\n"
    "A: [M, K], B: [K, N] (F.linear's weight transposed; _scaled_mm's B as b.t()), as bit\n"
    "patterns: uint16 or int16 for bf16 and fp16 (x.view(torch.int16)), uint8 for e4m3 and\n"
    "e5m2 (x.view(torch.uint8)); fp32 as float32. bias: [N]; C: [M, N]; both in the output\n"
    "format.\n"
    "Scales (fp8 products): a number (per tensor), or a float32 .npy: scale_a [M] or [M, 1]\n"
    "(per row) or [M, ceil(K/128)] (1 x 128 blocks); scale_b [N] or [1, N] (per column),\n"
    "[ceil(K/128), ceil(N/128)] (128 x 128 blocks) or [ceil(K/128), N] (1 x 128 blocks).\n"
    "\n"
    "options:\n"
    "{options}\n"
    "\n"
    "cuBLAS picks the split count by a heuristic this command does not model: give it\n"
    "(numSplitsK in CUBLASLT_LOG_LEVEL=5's log; the kernel's name says _splitK_ when it is\n"
    "above 1), or let --identify find it. The kernels cuBLAS runs for tiny or odd shapes\n"
    "(cutlass_75_*) are not modelled yet.\n"
    "\n"
    "Exit status: 0 computed, and every compared element agrees (with --identify: a split\n"
    "count gives every bit); 1 a mismatch; 2 bad arguments or input files, with one line\n"
    "on stderr.\n";

struct matmul_options {
  std::string a_path, b_path, bias_path, c_path, out_path, expect_path;
  std::optional<matmul::gemm_description> kernel;  // --preset or --kernel
  format input = bf16;
  std::optional<format> b_format, out_format;
  std::string scale_a, scale_b;  // a number or a .npy file
  std::optional<double> alpha, beta;
  std::optional<int> splits;
  bool identify = false;
  std::optional<std::pair<std::size_t, std::size_t>> explain;  // --explain ROW,COL
  std::vector<matmul::gemm_description> compare;               // --compare A B
  unsigned threads = 0;
};

format format_option(std::string_view name, std::initializer_list<format> allowed, std::string_view listed) {
  for (const format f : allowed)
    if (name_of(f) == name) return f;
  refuse_value(listed, name);
}

matmul::gemm_description read_description(std::string_view path) {
  std::ifstream file{std::string(path)};
  std::stringstream text;
  if (!file || !(text << file.rdbuf())) fail(printable(path) + ": cannot read the kernel description");
  try {
    return matmul::gemm_from_json(text.str());
  } catch (const std::invalid_argument& error) {
    fail(printable(path) + ": " + error.what());
  }
}

std::vector<option> option_table(matmul_options& o) {
  const auto file = [](std::string& path) { return [&path](std::string_view name) { path = name; }; };
  const auto kernel = [&o](matmul::gemm_description d) {
    if (o.kernel) fail("matmul: --preset and --kernel both name the kernel; give one");
    o.kernel = std::move(d);
  };
  return {
      {"--preset", "NAME", "the kernel, by name (--list-kernels); default cublas_sm90,\n"
                           "cublas_sm90_fp8 for fp8 inputs, cublas_sm90_tf32 for fp32",
       [&o, kernel](std::string_view name) {
         try {
           kernel(matmul::find_gemm_preset(name));
         } catch (const std::invalid_argument& e) {
           fail(std::string("matmul: ") + e.what());
         }
       }},
      {"--kernel", "FILE.json", "the kernel as a description (--print-kernel NAME shows one)",
       [kernel](std::string_view path) { kernel(read_description(path)); }},
      {"--in-format", "FORMAT", "A's format: bf16 (default), fp16, fp32 (products on the tf32\n"
                                "tensor core), e4m3 or e5m2; B's too unless --b-format",
       [&](std::string_view name) {
         o.input = format_option(name, {bf16, fp16, fp32, e4m3, e5m2}, "bf16, fp16, fp32, e4m3 or e5m2");
       }},
      {"--b-format", "FORMAT", "fp8 products: B's format, e4m3 or e5m2 (default A's)",
       [&](std::string_view name) { o.b_format = format_option(name, {e4m3, e5m2}, "e4m3 or e5m2"); }},
      {"--out-format", "FORMAT", "the output's format: bf16 (default), fp16 or fp32 for fp8 products;\n"
                                 "the inputs' (default) or fp32 (torch.mm's out_dtype) for bf16 and fp16;\n"
                                 "fp32 for fp32",
       [&](std::string_view name) { o.out_format = format_option(name, {bf16, fp16, fp32}, "bf16, fp16 or fp32"); }},
      {"--scale-a", "X|FILE", "fp8 products: A's scales, a decimal or a float32 .npy",
       [&](std::string_view x) { o.scale_a = x; }},
      {"--scale-b", "X|FILE", "fp8 products: B's scales, a decimal or a float32 .npy",
       [&](std::string_view x) { o.scale_b = x; }},
      {"--splits", "N", "the split-K count, cuBLAS's numSplitsK (1 to 256; default the\n"
                        "description's)",
       [&](std::string_view n) { o.splits = parse_integer(n, 1, 256, "an integer from 1 to 256"); }},
      {"--bias", "FILE", "F.linear's bias, [N], in the output format, added to every row", file(o.bias_path)},
      {"--c", "FILE", "torch.addmm's input C, [M, N], in the output format (with --beta)", file(o.c_path)},
      {"--alpha", "X", "torch.addmm's alpha (default 1)",
       [&](std::string_view x) { o.alpha = parse_decimal(x, "a decimal"); }},
      {"--beta", "X", "torch.addmm's beta, times C (default 1 with --c)",
       [&](std::string_view x) { o.beta = parse_decimal(x, "a decimal"); }},
      {"--out", "FILE", "write D as bit patterns, [M, N]", file(o.out_path)},
      {"--expect", "FILE", "compare D with FILE bit for bit ([M, N] bit patterns)", file(o.expect_path)},
      {"--identify", "",
       "with --expect: try every preset that takes the inputs (or the --kernel\n"
       "description) with every split count from 1 to 64; name those that give\n"
       "every bit, or the nearest three",
       [&](std::string_view) { o.identify = true; }},
      {"--explain", "ROW,COL", "account for one element of D: every fused step of its chains (the\n"
                               "window, the terms cut), the pieces, the splits, the epilogue",
       [&](std::string_view text) {
         const std::vector<std::string_view> parts = split_list(text);
         if (parts.size() != 2) fail("matmul: --explain takes ROW,COL (two integers), not '" + printable(text) + "'");
         o.explain = std::pair{parse_integer(parts[0], std::size_t{0}, std::size_t{1} << 24, "a row from 0"),
                               parse_integer(parts[1], std::size_t{0}, std::size_t{1} << 24, "a column from 0")};
       }},
      {"--compare", "A,B", "two kernels, each a preset's name or a .json description: how many\n"
                           "elements differ, and where the first one's chains part",
       [&](std::string_view text) {
         const std::vector<std::string_view> names = split_list(text);
         if (names.size() != 2) fail("matmul: --compare takes two kernels, A,B, not '" + printable(text) + "'");
         for (const std::string_view name : names) {
           if (name.size() > 5 && name.substr(name.size() - 5) == ".json") {
             o.compare.push_back(read_description(name));
             continue;
           }
           try {
             o.compare.push_back(matmul::find_gemm_preset(name));
           } catch (const std::invalid_argument& e) {
             fail(std::string("matmul: ") + e.what());
           }
         }
       }},
      {"--threads", "N", "threads to compute on (default 0: one per core; the bits are the same)",
       [&](std::string_view n) { o.threads = parse_integer(n, 0u, 1024u, "an integer from 0 to 1024"); }},
  };
}

// A file of F's bit patterns (uint8 for fp8, uint16 or int16 for bf16 and fp16, float32 for fp32): its shape and values.
template <format F>
std::pair<std::vector<std::size_t>, std::vector<value<F>>> read_values(const std::string& path, std::string_view name,
                                                                      std::size_t dimensions) {
  const npy::array array = read_npy(path, F.width() == 32 ? "float32" : name_of(F));
  if (array.shape.size() != dimensions)
    fail(fmt::format("{}: {} has shape {}; expected {}", printable(path), name, shape_text(array.shape),
                     dimensions == 2 ? "[rows, columns]" : "[N]"));
  const bool fits = F.width() == 8    ? array.descr == "<u1" || array.descr == "<i1"
                    : F.width() == 16 ? array.descr == "<u2" || array.descr == "<i2"
                                      : array.descr == "<f4" || array.descr == "<u4" || array.descr == "<i4";
  if (!fits)
    fail(fmt::format("{}: element type '{}' does not hold {} bit patterns; save {}", printable(path), array.descr,
                     name_of(F),
                     F.width() == 8    ? "x.view(torch.uint8)"
                     : F.width() == 16 ? "x.view(torch.int16)"
                                       : "float32 values"));
  for (const std::size_t extent : array.shape)
    if (extent == 0 || extent > (std::size_t{1} << 24))
      fail(fmt::format("{}: {} has shape {}; every extent must be from 1 to 2^24", printable(path), name,
                       shape_text(array.shape)));
  std::vector<value<F>> values(array.element_count());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = value<F>::from_bits(array.word(i));
  return {array.shape, std::move(values)};
}

// Scales: a decimal (per tensor) or a float32 .npy whose shape says the layout.
std::pair<matmul::scale_layout, std::vector<float32>> read_scales(const std::string& text, std::string_view option,
                                                                 bool of_a, const matmul::gemm_shape& s) {
  using matmul::scale_layout;
  if (text.size() <= 4 || text.substr(text.size() - 4) != ".npy") {
    const float scale = static_cast<float>(parse_decimal(text, "a decimal, or a .npy file of float32 scales"));
    if (!std::isfinite(scale)) fail(fmt::format("matmul: {} {} is not a finite float", option, text));
    return {scale_layout::tensor, {from_host(scale)}};
  }
  const npy::array array = read_npy(text, "float32");
  if (array.descr != "<f4") fail(fmt::format("{}: element type '{}' is not float32", printable(text), array.descr));
  const matmul::scale_layout layout = matmul::scale_layout_of(array.shape, of_a, s);
  if (layout == matmul::scale_layout::none)
    fail(fmt::format("{}: {} has shape {}; expected {}", printable(text), option, shape_text(array.shape),
                     matmul::scale_shapes(of_a, s)));
  std::vector<float32> scales(array.element_count());
  for (std::size_t i = 0; i < scales.size(); ++i) {
    scales[i] = float32::from_bits(array.word(i));
    if (!std::isfinite(to_host(scales[i])))
      fail(fmt::format("{}: scale [{}] is {}; scales must be finite", printable(text), i, to_host(scales[i])));
  }
  return {layout, std::move(scales)};
}

template <format Out>
std::uint64_t mismatches(const std::vector<value<Out>>& d, const std::vector<value<Out>>& expected, std::size_t& first) {
  std::uint64_t count = 0;
  for (std::size_t i = 0; i < d.size(); ++i)
    if (d[i].bits != expected[i].bits && count++ == 0) first = i;
  return count;
}

std::string_view layout_name(matmul::scale_layout layout, bool of_a) {
  switch (layout) {
    case matmul::scale_layout::none: return "none";
    case matmul::scale_layout::tensor: return "per tensor";
    case matmul::scale_layout::rows: return of_a ? "per row" : "per column";
    case matmul::scale_layout::block_1x128: return "1 x 128 blocks";
    case matmul::scale_layout::block_128x128: return "128 x 128 blocks";
  }
  return "?";
}

// What the kernel did to the operands before the tensor core, as a phrase.
std::string_view operands_phrase(matmul::operand_rule rule) {
  switch (rule) {
    case matmul::operand_rule::as_given: return "";
    case matmul::operand_rule::widened_to_fp16: return ", operands widened to fp16";
    case matmul::operand_rule::rounded_to_tf32: return ", operands rounded to tf32 (to nearest even)";
    case matmul::operand_rule::truncated_to_tf32: return ", operands read as tf32 (each register's upper 19 bits)";
  }
  return "";
}

// The account of one output (matmul::explain_output), as text.
template <format Out>
void print_explanation(const matmul::gemm_description& d, const matmul::output_explanation<Out>& e) {
  std::printf("D[%zu, %zu] (row, col) by %s: %zu split%s of K%s%s\n", e.row, e.col, d.name.c_str(), e.splits.size(),
              e.splits.size() == 1 ? "" : "s", std::string(operands_phrase(e.operands)).c_str(),
              e.reordered ? ", K in pairs mod 4 within each 32 (positions below are in that order)" : "");
  for (std::size_t s = 0; s < e.splits.size(); ++s) {
    const matmul::split_record& split = e.splits[s];
    std::printf("split %zu: K %zu to %zu\n", s, split.first, split.end);
    for (const matmul::piece_record& piece : split.pieces) {
      std::printf("  chain over K %zu to %zu from +0, %zu step%s of %d products (e_max, the lowest bit kept, terms cut):\n",
                  piece.first, piece.end, piece.steps.size(), piece.steps.size() == 1 ? "" : "s",
                  d.tensor_core->unit.products_per_step);
      for (const matmul::step_record& step : piece.steps)
        std::printf("    K %5zu to %5zu  e_max %4d  lsb 2^%-4d  %2d cut  -> %s\n", step.k_first, step.k_end - 1, step.e_max,
                    step.lsb_exponent, step.terms_cut, value_text(step.after).c_str());
      if (split.pieces.size() > 1 || e.blocks)
        std::printf("  %s: the split's fp32 accumulator %s\n",
                    e.blocks ? fmt::format("with block scales {} and {}", to_double(piece.sa), to_double(piece.sb)).c_str()
                             : "promoted",
                    value_text(piece.accumulator).c_str());
    }
    if (e.splits.size() > 1)
      std::printf("  %s %s\n", s == 0 ? "partial 0:" : fmt::format("partials 0 to {} added:", s).c_str(),
                  value_text(split.total).c_str());
  }
  std::printf("sum %s\n", value_text(e.epilogue.sum).c_str());
  if (e.epilogue.has_scale) std::printf("times fl32(scale_a * scale_b): %s\n", value_text(e.epilogue.scaled).c_str());
  if (e.epilogue.has_alpha_beta) std::printf("alpha and beta x C: %s\n", value_text(e.epilogue.combined).c_str());
  if (e.epilogue.has_bias) std::printf("plus the bias: %s\n", value_text(e.epilogue.biased).c_str());
  std::printf("rounded to %s: %s\n", std::string(name_of(Out)).c_str(), value_text(e.out).c_str());
}

// --compare: both kernels' D, their differences, and where the first
// differing element's accounts part (a split's range, a step, a piece's
// addition, the reduction, the epilogue).
template <format InA, format InB, format Out>
int compare(const matmul_options& o, const matmul::gemm_call<InA, InB, Out>& call) {
  const matmul::gemm_description &a = o.compare[0], &b = o.compare[1];
  for (const matmul::gemm_description* d : {&a, &b}) {
    try {
      matmul::check_call(*d, call);
    } catch (const std::invalid_argument& e) {
      fail(std::string(e.what()) + " (" + d->name + ")");
    }
  }
  const std::vector<value<Out>> da = matmul::gemm(a, call), db = matmul::gemm(b, call);
  print_differences(fmt::format("B ({}) against A ({})", b.name, a.name), name_of(Out), da, db);
  std::size_t first = 0;
  while (first < da.size() && da[first].bits == db[first].bits) ++first;
  if (first == da.size()) return 0;
  const std::size_t row = first / call.shape.n, col = first % call.shape.n;
  const auto ea = matmul::explain_output(a, call, row, col), eb = matmul::explain_output(b, call, row, col);
  std::printf("first difference at [%zu, %zu] (row, col): A %s, B %s\n", row, col, value_text(ea.out).c_str(),
              value_text(eb.out).c_str());
  for (std::size_t s = 0; s < std::min(ea.splits.size(), eb.splits.size()); ++s) {
    const matmul::split_record &sa = ea.splits[s], &sb = eb.splits[s];
    if (sa.first != sb.first || sa.end != sb.end) {
      std::printf("the splits part at split %zu: A takes K %zu to %zu, B %zu to %zu\n", s, sa.first, sa.end, sb.first,
                  sb.end);
      return 1;
    }
    for (std::size_t p = 0; p < std::min(sa.pieces.size(), sb.pieces.size()); ++p) {
      const matmul::piece_record &pa = sa.pieces[p], &pb = sb.pieces[p];
      if (pa.first != pb.first || pa.end != pb.end) {
        std::printf("the chains part in split %zu: A's piece %zu takes K %zu to %zu, B's %zu to %zu\n", s, p, pa.first,
                    pa.end, pb.first, pb.end);
        return 1;
      }
      for (std::size_t i = 0; i < std::min(pa.steps.size(), pb.steps.size()); ++i) {
        const matmul::step_record &x = pa.steps[i], &y = pb.steps[i];
        if (x.k_end != y.k_end || x.after.bits != y.after.bits) {
          std::printf("the chains part in split %zu at step %zu (K %zu to %zu):\n", s, i, x.k_first, x.k_end - 1);
          for (const auto& [label, step] : {std::pair{"A", x}, std::pair{"B", y}})
            std::printf("  %s: K %zu to %zu, e_max %d, lsb 2^%d, %d cut -> %s\n", label, step.k_first, step.k_end - 1,
                        step.e_max, step.lsb_exponent, step.terms_cut, value_text(step.after).c_str());
          return 1;
        }
      }
      if (pa.accumulator.bits != pb.accumulator.bits) {
        std::printf("the chains agree, the additions into split %zu's accumulator part after piece %zu: A %s, B %s\n",
                    s, p, value_text(pa.accumulator).c_str(), value_text(pb.accumulator).c_str());
        return 1;
      }
    }
    if (sa.total.bits != sb.total.bits) {
      std::printf("the reductions part at split %zu: A %s, B %s\n", s, value_text(sa.total).c_str(),
                  value_text(sb.total).c_str());
      return 1;
    }
  }
  if (ea.splits.size() != eb.splits.size()) {
    std::printf("A has %zu splits, B %zu\n", ea.splits.size(), eb.splits.size());
    return 1;
  }
  std::printf("the sums agree (%s); the epilogues part: A %s, B %s before the rounding\n",
              value_text(ea.epilogue.sum).c_str(), value_text(ea.epilogue.biased).c_str(),
              value_text(eb.epilogue.biased).c_str());
  return 1;
}

// --identify: every preset that takes these formats (or the --kernel
// description), each with every split count from 1 to 64: those that give
// every bit, else the nearest.
template <format InA, format InB, format Out>
int identify(const matmul_options& o, const matmul::gemm_call<InA, InB, Out>& call,
             const std::vector<value<Out>>& expected) {
  const std::vector<matmul::gemm_description> candidates =
      o.kernel ? std::vector<matmul::gemm_description>{*o.kernel} : matmul::presets_taking<InA, InB>();
  const std::vector<matmul::identified> results = matmul::identify(candidates, call, expected);
  const bool found = !results.empty() && results.front().mismatches == 0;
  std::printf("%s of %s (%zu elements), of %zu candidates (%zu description%s x split counts 1 to 64):\n",
              found ? "every bit" : "no candidate gives every bit", printable(o.expect_path).c_str(), expected.size(),
              results.size(), candidates.size(), candidates.size() == 1 ? "" : "s");
  if (!found) {
    for (std::size_t i = 0; i < std::min<std::size_t>(3, results.size()); ++i)
      std::printf("  %s --splits %d: %llu mismatch%s\n", results[i].name.c_str(), results[i].splits,
                  static_cast<unsigned long long>(results[i].mismatches), results[i].mismatches == 1 ? "" : "es");
    return 1;
  }
  // Each description's split counts that give every bit, as ranges: "2, 5 to 7".
  for (const matmul::gemm_description& d : candidates) {
    std::string ranges;
    int from = 0, to = -1;
    const auto close = [&] {
      if (to < from) return;
      ranges += (ranges.empty() ? "" : ", ") + std::to_string(from) + (to > from ? " to " + std::to_string(to) : "");
    };
    for (int splits = 1; splits <= 64; ++splits) {
      const bool exact = std::any_of(results.begin(), results.end(), [&](const matmul::identified& r) {
        return r.name == d.name && r.splits == splits && r.mismatches == 0;
      });
      if (exact && to == splits - 1) to = splits;
      else if (exact) close(), from = to = splits;
    }
    close();
    if (!ranges.empty()) std::printf("  %s, --splits %s\n", d.name.c_str(), ranges.c_str());
  }
  return 0;
}

template <format InA, format InB, format Out>
int run(const matmul_options& o, matmul::gemm_description d) {
  auto [a_shape, a] = read_values<InA>(o.a_path, "A", 2);
  auto [b_shape, b] = read_values<InB>(o.b_path, "B", 2);
  if (a_shape[1] != b_shape[0])
    fail(fmt::format("{}: B has shape {}, but A {} has K = {}; B needs K rows", printable(o.b_path), shape_text(b_shape),
                     shape_text(a_shape), a_shape[1]));
  matmul::gemm_call<InA, InB, Out> call;
  call.shape = {a_shape[0], b_shape[1], a_shape[1]};
  const matmul::gemm_shape& s = call.shape;
  call.a = a, call.b = b, call.threads = o.threads;
  std::vector<value<Out>> bias, c;
  if (!o.bias_path.empty()) {
    auto [shape, values] = read_values<Out>(o.bias_path, "the bias", 1);
    if (shape[0] != s.n) fail(fmt::format("{}: the bias has {} values; expected N = {}", printable(o.bias_path), shape[0], s.n));
    bias = std::move(values), call.bias = bias;
  }
  if (!o.c_path.empty()) {
    auto [shape, values] = read_values<Out>(o.c_path, "C", 2);
    if (shape != std::vector<std::size_t>{s.m, s.n})
      fail(fmt::format("{}: C has shape {}; expected [M, N] = [{}, {}]", printable(o.c_path), shape_text(shape), s.m, s.n));
    c = std::move(values), call.c = c;
    call.beta = from_host(static_cast<float>(o.beta.value_or(1.0)));
  }
  if (o.alpha) call.alpha = from_host(static_cast<float>(*o.alpha));
  std::vector<float32> scale_a, scale_b;
  if (!o.scale_a.empty()) std::tie(call.a_scales, scale_a) = read_scales(o.scale_a, "--scale-a", true, s);
  if (!o.scale_b.empty()) std::tie(call.b_scales, scale_b) = read_scales(o.scale_b, "--scale-b", false, s);
  call.scale_a = scale_a, call.scale_b = scale_b;
  std::optional<std::vector<value<Out>>> expected;
  if (!o.expect_path.empty()) {
    auto [shape, values] = read_values<Out>(o.expect_path, "D", 2);
    if (shape != std::vector<std::size_t>{s.m, s.n})
      fail(fmt::format("{}: D has shape {}; expected [M, N] = [{}, {}]", printable(o.expect_path), shape_text(shape), s.m, s.n));
    expected = std::move(values);
  }
  if (o.splits) d.splits = *o.splits;
  if (o.explain && (o.explain->first >= s.m || o.explain->second >= s.n))
    fail(fmt::format("matmul: --explain {},{} is outside D, [{}, {}]", o.explain->first, o.explain->second, s.m, s.n));
  try {
    matmul::check_call(d, call);
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
  const auto product = [&](const matmul::gemm_description& kernel) { return matmul::gemm(kernel, call); };
  std::printf("matmul: A [%zu, %zu] %s, B [%zu, %zu] %s%s%s%s -> %s, %s\n", s.m, s.k,
              std::string(name_of(InA)).c_str(), s.k, s.n, std::string(name_of(InB)).c_str(),
              scale_a.empty() ? "" : fmt::format(", scales {} x {}", layout_name(call.a_scales, true),
                                                 layout_name(call.b_scales, false)).c_str(),
              c.empty() ? "" : ", C", bias.empty() ? "" : ", bias", std::string(name_of(Out)).c_str(),
              o.compare.empty() ? ("kernel " + d.name).c_str()
                                : fmt::format("kernels {} (A) and {} (B)", o.compare[0].name, o.compare[1].name).c_str());
  std::fflush(stdout);
  if (o.identify) return identify(o, call, *expected);
  if (!o.compare.empty()) return compare(o, call);
  if (o.explain) {
    const auto [row, col] = *o.explain;
    print_explanation(d, matmul::explain_output(d, call, row, col));
    return 0;
  }
  std::printf("%d split%s of K, %s\n", d.splits, d.splits == 1 ? "" : "s",
              d.promotion_k == 0 ? "one chain over each split"
                                 : fmt::format("chains over each {} of K added into fp32", d.promotion_k).c_str());
  const std::vector<value<Out>> out = product(d);
  if (!o.out_path.empty()) {
    std::vector<typename value<Out>::storage> bits(out.size());
    for (std::size_t i = 0; i < out.size(); ++i) bits[i] = out[i].bits;
    try {
      npy::write(o.out_path, Out.width() == 32 ? "<f4" : "<u2", {s.m, s.n}, bits.data());
    } catch (const npy::npy_error& error) {
      fail(printable(error.what()));
    }
  }
  if (!expected) return 0;
  std::size_t first = 0;
  const std::uint64_t count = mismatches(out, *expected, first);
  std::printf("D: %zu element%s compared, %llu mismatch%s\n", out.size(), out.size() == 1 ? "" : "s",
              static_cast<unsigned long long>(count), count == 1 ? "" : "es");
  if (count == 0) return 0;
  const difference_summary differences = differences_of(*expected, out);
  std::printf("  distance in %s ulps %s%s; the model above the file: %llu, below: %llu\n",
              std::string(name_of(Out)).c_str(), differences.distances().c_str(),
              differences.nan ? fmt::format("; NaN on one side: {}", differences.nan).c_str() : "",
              static_cast<unsigned long long>(differences.above),
              static_cast<unsigned long long>(differences.differ - differences.above - differences.nan));
  std::printf("first mismatch at [%zu, %zu] (row, col)\n  file  %s\n  model %s\n", first / s.n, first % s.n,
              value_text((*expected)[first]).c_str(), value_text(out[first]).c_str());
  print_explanation(d, matmul::explain_output(d, call, first / s.n, first % s.n));
  return 1;
}

int dispatch(const matmul_options& o) {
  const bool fp8 = o.input == e4m3 || o.input == e5m2;
  const format b = o.b_format.value_or(o.input);
  const format out = o.out_format.value_or(fp8 ? bf16 : o.input);
  const matmul::gemm_description d = o.kernel.value_or(matmul::default_gemm_preset(o.input));
  // The option checks leave only formats the emulator takes.
  return matmul::visit_gemm_formats(o.input, b, out, [&](auto ta, auto tb, auto to) {
    return run<decltype(ta)::fmt, decltype(tb)::fmt, decltype(to)::fmt>(o, d);
  });
}

void print_kernel_list() {
  std::size_t width = 0;
  for (const matmul::gemm_description& d : matmul::gemm_presets()) width = std::max(width, d.name.size());
  for (const matmul::gemm_description& d : matmul::gemm_presets())
    std::printf("  %-*s %s\n", static_cast<int>(width), d.name.c_str(), d.summary.c_str());
}

}  // namespace

int matmul_command(const arguments& args) {
  matmul_options o;
  const std::vector<option> table = option_table(o);
  if (asks_for_help(args)) {
    print_help(matmul_help, table);
    std::puts("\npresets (bitexact matmul --list-kernels):");
    print_kernel_list();
    return 0;
  }
  if (args.size() == 1 && args[0] == "--list-kernels") {
    print_kernel_list();
    return 0;
  }
  if (!args.empty() && args[0] == "--print-kernel") {
    if (args.size() != 2) fail("matmul: --print-kernel takes one preset name; see bitexact matmul --list-kernels");
    try {
      std::puts(matmul::gemm_to_json(matmul::find_gemm_preset(args[1])).dump(2).c_str());
    } catch (const std::invalid_argument& e) {
      fail(std::string("matmul: ") + e.what());
    }
    return 0;
  }
  const arguments files = read_options(args, "matmul", table);
  if (files.size() != 2)
    fail("matmul: expected two .npy files, A and B, but got " + std::to_string(files.size()) +
         "; see bitexact matmul --help");
  o.a_path = files[0], o.b_path = files[1];
  if (o.identify && o.expect_path.empty()) fail("matmul: --identify needs --expect FILE, the bits to identify");
  if (!o.compare.empty() &&
      (o.kernel || o.splits || o.identify || o.explain || !o.expect_path.empty() || !o.out_path.empty()))
    fail("matmul: --compare computes two kernels and compares them; it takes no --preset, --kernel, --splits (a "
         "description's \"splits\" says it), --identify, --explain, --expect or --out");
  if (o.explain && (o.identify || !o.expect_path.empty() || !o.out_path.empty()))
    fail("matmul: --explain accounts for one element; it takes no --identify, --expect or --out");
  if (o.identify && (o.splits || !o.out_path.empty()))
    fail("matmul: --identify tries every split count; it takes no --splits or --out");
  const bool fp8 = o.input == e4m3 || o.input == e5m2;
  if (!fp8 && o.b_format) fail("matmul: --b-format belongs to fp8 products (--in-format e4m3 or e5m2)");
  if (!fp8 && o.out_format && *o.out_format != o.input && *o.out_format != fp32)
    fail(fmt::format("matmul: a {} product writes {}, not {}", name_of(o.input),
                     o.input == fp32 ? "fp32" : std::string(name_of(o.input)) + " or fp32", name_of(*o.out_format)));
  if (fp8 != (!o.scale_a.empty() || !o.scale_b.empty()) || o.scale_a.empty() != o.scale_b.empty())
    fail(fp8 ? "matmul: an fp8 product needs --scale-a and --scale-b (decimals, or .npy files of scales)"
             : "matmul: --scale-a and --scale-b belong to fp8 products (--in-format e4m3 or e5m2)");
  if (o.beta && o.c_path.empty()) fail("matmul: --beta multiplies C; give --c FILE");
  return dispatch(o);
}

}  // namespace bitexact::cli
