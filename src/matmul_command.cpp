// `bitexact matmul A.npy B.npy`: a matrix product as cuBLAS's sm_90 kernels
// compute it (matmul/gemm.hpp), written out or compared bit for bit with what
// a GPU wrote; --identify finds the split-K count that gives every bit.
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <bitexact/matmul/gemm.hpp>

#include "npy_files.hpp"

namespace bitexact::cli {
namespace {

constexpr std::string_view matmul_help =
    "usage: bitexact matmul A.npy B.npy [--in-format bf16|fp16] [--bias FILE] [--splits N]\n"
    "           [--out FILE] [--expect FILE] [--identify] [--threads N]\n"
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
    "options:\n"
    "{options}\n"
    "\n"
    "cuBLAS picks the split count by a heuristic this command does not model: give it\n"
    "(numSplitsK in CUBLASLT_LOG_LEVEL=5's log; the kernel's name ends ..._splitK_... when it is\n"
    "above 1), or let --identify find it. Products with fp8 inputs (torch._scaled_mm), fp16\n"
    "with K not a multiple of 64 and tiny bf16 shapes run other kernels, not modelled yet.\n"
    "\n"
    "Exit status: 0 computed, and every compared element agrees (with --identify: a split\n"
    "count gives every bit); 1 a mismatch; 2 bad arguments or input files, with one line\n"
    "on stderr.\n";

struct matmul_options {
  std::string a_path, b_path, bias_path, out_path, expect_path;
  format input = bf16;
  std::optional<int> splits;  // default 1
  bool identify = false;
  unsigned threads = 0;
};

std::vector<option> option_table(matmul_options& o) {
  const auto file = [](std::string& path) { return [&path](std::string_view name) { path = name; }; };
  return {
      {"--in-format", "FORMAT", "the inputs' and the output's format: bf16 (default) or fp16",
       [&](std::string_view name) {
         if (name == "bf16") o.input = bf16;
         else if (name == "fp16") o.input = fp16;
         else refuse_value("bf16 or fp16", name);
       }},
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

// A matrix of 16-bit patterns, [rows, columns] or [N] for the bias.
struct matrix {
  std::vector<std::size_t> shape;
  std::vector<std::uint16_t> bits;
};

matrix read_matrix(const std::string& path, std::string_view name, std::size_t dimensions) {
  const npy::array array = read_npy(path);
  if (array.shape.size() != dimensions)
    fail(fmt::format("{}: {} has shape {}; expected {}", printable(path), name, shape_text(array.shape),
                     dimensions == 2 ? "[rows, columns]" : "[N]"));
  if (array.descr != "<u2" && array.descr != "<i2")
    fail(fmt::format("{}: element type '{}' is not 16-bit patterns; save x.view(torch.int16) of a bf16 or fp16 tensor",
                     printable(path), array.descr));
  for (const std::size_t extent : array.shape)
    if (extent == 0 || extent > (std::size_t{1} << 24))
      fail(fmt::format("{}: {} has shape {}; every extent must be from 1 to 2^24", printable(path), name,
                       shape_text(array.shape)));
  matrix m{array.shape, std::vector<std::uint16_t>(array.element_count())};
  for (std::size_t i = 0; i < m.bits.size(); ++i) m.bits[i] = static_cast<std::uint16_t>(array.word(i));
  return m;
}

template <format F>
std::vector<value<F>> values_of(const matrix& m) {
  std::vector<value<F>> values(m.bits.size());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = value<F>::from_bits(m.bits[i]);
  return values;
}

template <format F>
int run(const matmul_options& o) {
  const matrix a = read_matrix(o.a_path, "A", 2), b = read_matrix(o.b_path, "B", 2);
  if (a.shape[1] != b.shape[0])
    fail(fmt::format("{}: B has shape {}, but A {} has K = {}; B needs K rows", printable(o.b_path), shape_text(b.shape),
                     shape_text(a.shape), a.shape[1]));
  const matmul::gemm_shape shape{a.shape[0], b.shape[1], a.shape[1]};
  std::vector<value<F>> bias;
  if (!o.bias_path.empty()) {
    const matrix m = read_matrix(o.bias_path, "the bias", 1);
    if (m.shape[0] != shape.n)
      fail(fmt::format("{}: the bias has {} values; expected N = {}", printable(o.bias_path), m.shape[0], shape.n));
    bias = values_of<F>(m);
  }
  std::optional<matrix> expected;
  if (!o.expect_path.empty()) {
    expected = read_matrix(o.expect_path, "D", 2);
    if (expected->shape != std::vector<std::size_t>{shape.m, shape.n})
      fail(fmt::format("{}: D has shape {}; expected [M, N] = [{}, {}]", printable(o.expect_path),
                       shape_text(expected->shape), shape.m, shape.n));
  }
  const std::vector<value<F>> av = values_of<F>(a), bv = values_of<F>(b);
  const auto product = [&](int splits) {
    return matmul::gemm<F, F>({sm90_tensor_core, splits, 64}, shape, av, bv, bias, o.threads);
  };
  const auto mismatches = [&](const std::vector<value<F>>& d, std::size_t& first) {
    std::uint64_t count = 0;
    for (std::size_t i = 0; i < d.size(); ++i)
      if (d[i].bits != expected->bits[i] && count++ == 0) first = i;
    return count;
  };
  std::printf("matmul: A [%zu, %zu], B [%zu, %zu]%s, %s\n", shape.m, shape.k, shape.k, shape.n,
              bias.empty() ? "" : ", bias", std::string(name_of(F)).c_str());
  if (o.identify) {
    std::vector<int> found;
    for (int splits = 1; splits <= 64; ++splits) {
      std::size_t first = 0;
      if (mismatches(product(splits), first) == 0) found.push_back(splits);
    }
    if (found.empty()) {
      std::printf("no split count from 1 to 64 gives every bit of %s\n", printable(o.expect_path).c_str());
      return 1;
    }
    std::string list;
    for (const int s : found) list += (list.empty() ? "" : ", ") + std::to_string(s);
    std::printf("every bit of %s: %zu elements, with %s split%s (--splits)\n", printable(o.expect_path).c_str(),
                expected->bits.size(), list.c_str(), found.size() == 1 && found[0] == 1 ? "" : "s");
    return 0;
  }
  const int splits = o.splits.value_or(1);
  const std::vector<value<F>> d = product(splits);
  std::printf("%d split%s of K (%s), chains of 16-product fused steps into fp32\n", splits, splits == 1 ? "" : "s",
              splits == 1 ? "one chain over K" : "fp32 partials added in split order");
  if (!o.out_path.empty()) {
    std::vector<std::uint16_t> bits(d.size());
    for (std::size_t i = 0; i < d.size(); ++i) bits[i] = static_cast<std::uint16_t>(d[i].bits);
    try {
      npy::write(o.out_path, "<u2", {shape.m, shape.n}, bits.data());
    } catch (const npy::npy_error& error) {
      fail(printable(error.what()));
    }
  }
  if (!expected) return 0;
  std::size_t first = 0;
  const std::uint64_t count = mismatches(d, first);
  std::printf("D: %zu elements compared, %llu mismatch%s\n", d.size(), static_cast<unsigned long long>(count),
              count == 1 ? "" : "es");
  if (count == 0) return 0;
  const auto text = [](value<F> x) { return fmt::format("0x{:04X} ({})", x.bits, to_double(x)); };
  std::printf("first mismatch at [%zu, %zu] (row, col)\n  expected %s\n  model    %s\n", first / shape.n, first % shape.n,
              text(value<F>::from_bits(expected->bits[first])).c_str(), text(d[first]).c_str());
  return 1;
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
  return o.input == fp16 ? run<fp16>(o) : run<bf16>(o);
}

}  // namespace bitexact::cli
