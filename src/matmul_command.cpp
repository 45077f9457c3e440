// `bitexact matmul A.npy B.npy`: a matrix product as cuBLAS's sm_90 kernels
// compute it (matmul/gemm.hpp), written out or compared bit for bit with what
// a GPU wrote; --identify finds the split-K count that gives every bit.
#include <cmath>
#include <cstdint>
#include <tuple>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <bitexact/matmul/gemm.hpp>
#include <bitexact/matmul/scaled.hpp>

#include "npy_files.hpp"

namespace bitexact::cli {
namespace {

constexpr std::string_view matmul_help =
    "usage: bitexact matmul A.npy B.npy [--in-format bf16|fp16] [--bias FILE] [--splits N]\n"
    "           [--out FILE] [--expect FILE] [--identify] [--threads N]\n"
    "       bitexact matmul A.npy B.npy --in-format e4m3|e5m2 [--b-format e4m3|e5m2]\n"
    "           --scale-a X|FILE --scale-b X|FILE [--fast-accum] [--out-format bf16|fp32] ...\n"
    "\n"
    "D = A B (+ bias) as cuBLAS's sm_90 kernels compute it under torch.matmul and F.linear\n"
    "(PyTorch 2.11, cuBLAS 13.1), bit for bit: each output the tensor core's chain of fused\n"
    "16-product steps over K into fp32; with split-K, K cut into N splits of ceil(K / N)\n"
    "rounded up to the kernel's 64-wide K tile, their fp32 partial sums added in split order;\n"
    "then the bias added in fp32, and one rounding to the inputs' format.\n"
    "\n"
    "A: [M, K], B: [K, N], bias: [N] (F.linear's, whose B is its weight transposed), as\n"
    "uint16 or int16 bit patterns (x.view(torch.int16).cpu().numpy()).\n"
    "\n"
    "With fp8 inputs, torch._scaled_mm: each output the fp8 tensor core's chain of 32-product\n"
    "steps (a 13-bit window, each step's sum rounded toward zero to 13 fraction bits), over all\n"
    "of K with --fast-accum (use_fast_accum=True), else over each 128 of K, added into fp32;\n"
    "then times fl32(scale_a * scale_b) in fp32 and one rounding to --out-format. A and B as\n"
    "uint8 patterns (x.view(torch.uint8)), B [K, N] (b.t() of the column-major operand); the\n"
    "scales a number (per tensor) or a float32 .npy of M (row-wise: [M] or [M, 1]) or N values.\n"
    "\n"
    "options:\n"
    "{options}\n"
    "\n"
    "cuBLAS picks the split count of bf16 and fp16 products by a heuristic this command does\n"
    "not model: give it\n"
    "(numSplitsK in CUBLASLT_LOG_LEVEL=5's log; the kernel's name ends ..._splitK_... when it is\n"
    "above 1), or let --identify find it. fp16 with K not a multiple of 64 and tiny bf16\n"
    "shapes run other kernels (cutlass_75_*), not modelled yet.\n"
    "\n"
    "Exit status: 0 computed, and every compared element agrees (with --identify: a split\n"
    "count gives every bit); 1 a mismatch; 2 bad arguments or input files, with one line\n"
    "on stderr.\n";

struct matmul_options {
  std::string a_path, b_path, bias_path, out_path, expect_path;
  format input = bf16;
  std::optional<format> b_format, out_format;  // fp8 products: B's format, the output's
  std::string scale_a, scale_b;                // fp8 products: a number or a .npy file
  bool fast_accum = false;
  std::optional<int> splits;  // default 1
  bool identify = false;
  unsigned threads = 0;
};

std::vector<option> option_table(matmul_options& o) {
  const auto file = [](std::string& path) { return [&path](std::string_view name) { path = name; }; };
  return {
      {"--in-format", "FORMAT",
       "A's format: bf16 (default) or fp16, B's and the output's too; or\n"
       "e4m3 or e5m2, an fp8 product (torch._scaled_mm)",
       [&](std::string_view name) {
         if (name == "bf16") o.input = bf16;
         else if (name == "fp16") o.input = fp16;
         else if (name == "e4m3") o.input = e4m3;
         else if (name == "e5m2") o.input = e5m2;
         else refuse_value("bf16, fp16, e4m3 or e5m2", name);
       }},
      {"--b-format", "FORMAT", "fp8 products: B's format, e4m3 or e5m2 (default A's)",
       [&](std::string_view name) {
         if (name == "e4m3") o.b_format = e4m3;
         else if (name == "e5m2") o.b_format = e5m2;
         else refuse_value("e4m3 or e5m2", name);
       }},
      {"--out-format", "FORMAT", "fp8 products: the output's format, bf16 (default) or fp32",
       [&](std::string_view name) {
         if (name == "bf16") o.out_format = bf16;
         else if (name == "fp32") o.out_format = fp32;
         else refuse_value("bf16 or fp32", name);
       }},
      {"--scale-a", "X|FILE", "fp8 products: A's scale, a decimal or a float32 .npy of M values",
       [&](std::string_view x) { o.scale_a = x; }},
      {"--scale-b", "X|FILE", "fp8 products: B's scale, a decimal or a float32 .npy of N values",
       [&](std::string_view x) { o.scale_b = x; }},
      {"--fast-accum", "", "fp8 products: one chain over K (use_fast_accum=True)",
       [&](std::string_view) { o.fast_accum = true; }},
      {"--bias", "FILE", "F.linear's bias, [N], in the same format, added to every row", file(o.bias_path)},
      {"--splits", "N", "cuBLAS's split-K count, numSplitsK (1 to 256; default 1)",
       [&](std::string_view n) { o.splits = parse_integer(n, 1, 256, "an integer from 1 to 256"); }},
      {"--out", "FILE", "write D as uint16 bit patterns, [M, N]", file(o.out_path)},
      {"--expect", "FILE", "compare D with FILE bit for bit (uint16 or int16 patterns, [M, N])", file(o.expect_path)},
      {"--identify", "",
       "with --expect: try every split count from 1 to 64 and name those that\n"
       "give every bit (--splits is then left out)",
       [&](std::string_view) { o.identify = true; }},
      {"--threads", "N", "threads to compute on (default 0: one per core; the bits are the same)",
       [&](std::string_view n) { o.threads = parse_integer(n, 0u, 1024u, "an integer from 0 to 1024"); }},
  };
}

// A file of F's bit patterns (uint8 for fp8, uint16 or int16 for bf16 and fp16, float32 for fp32) with
// `dimensions` extents: its shape and values.
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

// A and B, K checked.
template <format InA, format InB>
std::tuple<matmul::gemm_shape, std::vector<value<InA>>, std::vector<value<InB>>> read_operands(const matmul_options& o) {
  auto [a_shape, a] = read_values<InA>(o.a_path, "A", 2);
  auto [b_shape, b] = read_values<InB>(o.b_path, "B", 2);
  if (a_shape[1] != b_shape[0])
    fail(fmt::format("{}: B has shape {}, but A {} has K = {}; B needs K rows", printable(o.b_path), shape_text(b_shape),
                     shape_text(a_shape), a_shape[1]));
  return {matmul::gemm_shape{a_shape[0], b_shape[1], a_shape[1]}, std::move(a), std::move(b)};
}

// The expected D, [M, N].
template <format Out>
std::optional<std::vector<value<Out>>> read_expected(const matmul_options& o, const matmul::gemm_shape& shape) {
  if (o.expect_path.empty()) return std::nullopt;
  auto [d_shape, d] = read_values<Out>(o.expect_path, "D", 2);
  if (d_shape != std::vector<std::size_t>{shape.m, shape.n})
    fail(fmt::format("{}: D has shape {}; expected [M, N] = [{}, {}]", printable(o.expect_path), shape_text(d_shape),
                     shape.m, shape.n));
  return std::move(d);
}

template <format Out>
std::uint64_t mismatches(const std::vector<value<Out>>& d, const std::vector<value<Out>>& expected, std::size_t& first) {
  std::uint64_t count = 0;
  for (std::size_t i = 0; i < d.size(); ++i)
    if (d[i].bits != expected[i].bits && count++ == 0) first = i;
  return count;
}

// D written (--out) and compared (--expect); the exit status.
template <format Out>
int finish(const matmul_options& o, const matmul::gemm_shape& shape, const std::vector<value<Out>>& d,
           const std::optional<std::vector<value<Out>>>& expected) {
  if (!o.out_path.empty()) {
    std::vector<typename value<Out>::storage> bits(d.size());
    for (std::size_t i = 0; i < d.size(); ++i) bits[i] = d[i].bits;
    try {
      npy::write(o.out_path, Out.width() == 32 ? "<f4" : "<u2", {shape.m, shape.n}, bits.data());
    } catch (const npy::npy_error& error) {
      fail(printable(error.what()));
    }
  }
  if (!expected) return 0;
  std::size_t first = 0;
  const std::uint64_t count = mismatches(d, *expected, first);
  std::printf("D: %zu elements compared, %llu mismatch%s\n", d.size(), static_cast<unsigned long long>(count),
              count == 1 ? "" : "es");
  if (count == 0) return 0;
  const auto text = [](value<Out> x) { return fmt::format("0x{:0{}X} ({})", x.bits, Out.width() / 4, to_double(x)); };
  std::printf("first mismatch at [%zu, %zu] (row, col)\n  expected %s\n  model    %s\n", first / shape.n, first % shape.n,
              text((*expected)[first]).c_str(), text(d[first]).c_str());
  return 1;
}

// cuBLAS's bf16 or fp16 product (torch.matmul, F.linear).
template <format F>
int run_half(const matmul_options& o) {
  const auto [shape, a, b] = read_operands<F, F>(o);
  std::vector<value<F>> bias;
  if (!o.bias_path.empty()) {
    auto [bias_shape, values] = read_values<F>(o.bias_path, "the bias", 1);
    if (bias_shape[0] != shape.n)
      fail(fmt::format("{}: the bias has {} values; expected N = {}", printable(o.bias_path), bias_shape[0], shape.n));
    bias = std::move(values);
  }
  const auto expected = read_expected<F>(o, shape);
  const auto product = [&](int splits) {
    return matmul::gemm<F, F>({sm90_tensor_core, splits, 64}, shape, a, b, bias, o.threads);
  };
  std::printf("matmul: A [%zu, %zu], B [%zu, %zu]%s, %s\n", shape.m, shape.k, shape.k, shape.n,
              bias.empty() ? "" : ", bias", std::string(name_of(F)).c_str());
  if (o.identify) {
    std::vector<int> found;
    for (int splits = 1; splits <= 64; ++splits) {
      std::size_t first = 0;
      if (mismatches(product(splits), *expected, first) == 0) found.push_back(splits);
    }
    if (found.empty()) {
      std::printf("no split count from 1 to 64 gives every bit of %s\n", printable(o.expect_path).c_str());
      return 1;
    }
    std::string list;
    for (const int s : found) list += (list.empty() ? "" : ", ") + std::to_string(s);
    std::printf("every bit of %s: %zu elements, with %s split%s (--splits)\n", printable(o.expect_path).c_str(),
                expected->size(), list.c_str(), found.size() == 1 && found[0] == 1 ? "" : "s");
    return 0;
  }
  const int splits = o.splits.value_or(1);
  std::printf("%d split%s of K (%s), chains of 16-product fused steps into fp32\n", splits, splits == 1 ? "" : "s",
              splits == 1 ? "one chain over K" : "fp32 partials added in split order");
  return finish(o, shape, product(splits), expected);
}

// A scale: a decimal (one value) or a float32 .npy of `count` values ([count] or [count, 1] or [1, count]).
std::vector<float32> read_scale(const std::string& text, std::string_view option, std::size_t count) {
  if (text.empty()) fail(fmt::format("matmul: an fp8 product needs {} (a decimal, or a .npy of scales)", option));
  if (text.size() <= 4 || text.substr(text.size() - 4) != ".npy") {
    const double x = parse_decimal(text, "a decimal, or a .npy file of float32 scales");
    const float scale = static_cast<float>(x);
    if (!std::isfinite(scale)) fail(fmt::format("matmul: {} {} is not a finite float", option, text));
    return {from_host(scale)};
  }
  const npy::array array = read_npy(text, "float32");
  if (array.descr != "<f4") fail(fmt::format("{}: element type '{}' is not float32", printable(text), array.descr));
  if (array.element_count() != count && array.element_count() != 1)
    fail(fmt::format("{}: {} has {} values (shape {}); expected 1 or {}", printable(text), option,
                     array.element_count(), shape_text(array.shape), count));
  std::vector<float32> scales(array.element_count());
  for (std::size_t i = 0; i < scales.size(); ++i) {
    scales[i] = float32::from_bits(array.word(i));
    if (!std::isfinite(to_host(scales[i])))
      fail(fmt::format("{}: scale [{}] is {}; scales must be finite", printable(text), i, to_host(scales[i])));
  }
  return scales;
}

// torch._scaled_mm's fp8 product.
template <format Out, format InA, format InB>
int run_fp8(const matmul_options& o) {
  const auto [shape, a, b] = read_operands<InA, InB>(o);
  const std::vector<float32> scale_a = read_scale(o.scale_a, "--scale-a", shape.m),
                             scale_b = read_scale(o.scale_b, "--scale-b", shape.n);
  const auto expected = read_expected<Out>(o, shape);
  std::printf("matmul: A [%zu, %zu] %s, B [%zu, %zu] %s, scales %s x %s, %s out\n", shape.m, shape.k,
              std::string(name_of(InA)).c_str(), shape.k, shape.n, std::string(name_of(InB)).c_str(),
              scale_a.size() == 1 ? "per tensor" : "per row", scale_b.size() == 1 ? "per tensor" : "per column",
              std::string(name_of(Out)).c_str());
  matmul::scaled_gemm_kernel kernel;
  kernel.promotion_k = o.fast_accum ? 0 : 128;
  std::printf("%s\n", o.fast_accum ? "one chain of 32-product fp8 steps over K (fast accumulation)"
                                   : "chains of 32-product fp8 steps over each 128 of K, added into fp32");
  return finish(o, shape, matmul::scaled_gemm<Out, InA, InB>(kernel, shape, a, b, scale_a, scale_b, o.threads),
                expected);
}

template <format Out>
int run_fp8_out(const matmul_options& o) {
  const format b = o.b_format.value_or(o.input);
  if (o.input == e4m3) return b == e4m3 ? run_fp8<Out, e4m3, e4m3>(o) : run_fp8<Out, e4m3, e5m2>(o);
  return b == e4m3 ? run_fp8<Out, e5m2, e4m3>(o) : run_fp8<Out, e5m2, e5m2>(o);
}

}  // namespace

int matmul_command(const arguments& args) {
  matmul_options o;
  const std::vector<option> table = option_table(o);
  if (asks_for_help(args)) return print_help(matmul_help, table);
  const arguments files = read_options(args, "matmul", table);
  if (files.size() != 2)
    fail("matmul: expected two .npy files, A and B, but got " + std::to_string(files.size()) +
         "; see bitexact matmul --help");
  o.a_path = files[0], o.b_path = files[1];
  if (o.identify && o.expect_path.empty()) fail("matmul: --identify needs --expect FILE, the bits to identify");
  if (o.identify && (o.splits || !o.out_path.empty()))
    fail("matmul: --identify tries every split count; it takes no --splits or --out");
  const bool fp8 = o.input == e4m3 || o.input == e5m2;
  if (fp8 && (o.splits || o.identify || !o.bias_path.empty()))
    fail("matmul: --splits, --identify and --bias model cuBLAS's bf16 and fp16 kernels; an fp8 product takes none");
  if (!fp8 && (o.b_format || o.out_format || !o.scale_a.empty() || !o.scale_b.empty() || o.fast_accum))
    fail("matmul: --b-format, --out-format, --scale-a, --scale-b and --fast-accum belong to fp8 products "
         "(--in-format e4m3 or e5m2)");
  if (fp8) return o.out_format == fp32 ? run_fp8_out<fp32>(o) : run_fp8_out<bf16>(o);
  return o.input == fp16 ? run_half<fp16>(o) : run_half<bf16>(o);
}

}  // namespace bitexact::cli
