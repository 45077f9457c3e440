// `bitexact attention Q.npy K.npy V.npy`: PyTorch's flash-attention forward
// pass, computed by the emulator (attention/flash_forward.hpp) on every head
// of NumPy files, written out or compared bit for bit with what a GPU wrote.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <bitexact/attention/flash_forward.hpp>
#include <bitexact/hardware/mufu_tables.hpp>

#include "cli.hpp"
#include "npy.hpp"

namespace bitexact::cli {
namespace {

using attention::attention_shape;
using attention::flash_kernel;

constexpr std::string_view attention_help =
    "usage: bitexact attention Q.npy K.npy V.npy [--preset NAME] [--causal] [--scale X]\n"
    "           [--splits N] [--batch-heads B,H] [--out-o FILE] [--out-lse FILE]\n"
    "           [--expect-o FILE] [--expect-lse FILE]\n"
    "\n"
    "PyTorch's flash-attention forward pass (scaled_dot_product_attention, flash backend),\n"
    "computed bit for bit from the hardware models: O = softmax(Q K^T * scale) V in bf16,\n"
    "and L, the logsumexp of each row of scores, in float32. Every head is computed, each\n"
    "on its own. With --expect-o and --expect-lse, every element is compared bit for bit\n"
    "with what the GPU wrote.\n"
    "\n"
    "Q, K, V: NumPy .npy files (numpy.save), shape [B, H, N, d] or [N, d] (one head). K and\n"
    "V have one shape; Q's N may differ from K's, but not with --causal (PyTorch refuses\n"
    "that too); d is 64 or 128. Elements are bf16 bit patterns as uint16 or int16\n"
    "(x.view(torch.int16).cpu().numpy()), or float32 only if every value is exactly a bf16\n"
    "value (its low 16 bits are zero, as x.float() of a bf16 tensor gives); any other\n"
    "float32 is refused, naming the file and the first index that is not.\n"
    "\n"
    "options:\n"
    "  --preset NAME       the kernel modelled; only pytorch_sdpa_flash_sm90 (the default):\n"
    "                      torch 2.11's flash kernels on sm_90 (H100, H200: 132 SMs)\n"
    "  --causal            the causal mask (is_causal=True)\n"
    "  --scale X           the softmax scale as PyTorch's scale= takes it: a decimal, read as\n"
    "                      a double (a Python float) and rounded to float (default 1/sqrt(d))\n"
    "  --splits N          N split-KV splits (1 to 128) instead of the preset's heuristic;\n"
    "                      N > 1 takes the split kernel's tiles, 64 rows by 256 keys (d 64)\n"
    "                      or by 128 keys (d 128); N = 1 the single kernel's\n"
    "  --batch-heads B,H   the B and H of the original call when the files hold only some of\n"
    "                      its heads: they decide the split count (default: the files' shape)\n"
    "  --out-o FILE        write O as uint16 bf16 bit patterns, shaped like Q\n"
    "  --out-lse FILE      write L as float32, shape [B, H, N] ([N] for [N, d] inputs)\n"
    "  --expect-o FILE     compare O with FILE bit for bit: uint16 or int16 bf16 patterns, or\n"
    "                      float32 holding bf16 values exactly, shaped like Q\n"
    "  --expect-lse FILE   compare L with FILE bit for bit: float32, [B, H, N] ([N] for\n"
    "                      [N, d] inputs)\n"
    "Options take `--name VALUE` or `--name=VALUE`, each once.\n"
    "\n"
    "Prints the shapes, the preset, the split count and the tiles; with --expect-o or\n"
    "--expect-lse, the elements compared and the mismatches, and for the first mismatch of\n"
    "each its index, both values (bits and decimal) and the K/V blocks and splits of its row.\n"
    "\n"
    "The exponentials and logarithms are MUFU table lookups: the command needs the tables\n"
    "mufu_ex2.bxt, mufu_rcp.bxt and mufu_lg2.bxt from the data folder (the source tree's\n"
    "data/, an install's share/bitexact, or $BITEXACT_DATA_DIR).\n"
    "\n"
    "Exit status: 0 computed, and every compared element agrees; 1 a mismatch; 2 bad\n"
    "arguments or input files, or output that could not be written, with one line on stderr.\n"
    "docs/attention.md has a worked example, from PyTorch to this command.\n";

constexpr std::string_view preset_names = "pytorch_sdpa_flash_sm90";

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
  bool causal = false;
  std::optional<float32> scale;
  std::optional<int> splits;
  std::optional<std::pair<int, int>> batch_heads;
  std::string out_o, out_lse, expect_o, expect_lse;
};

int parse_count(std::string_view text, int low, int high, std::string_view option, std::string_view example) {
  int parsed = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), parsed);
  if (text.empty() || error != std::errc{} || end != text.data() + text.size() || parsed < low || parsed > high)
    fail("attention: " + std::string(option) + " expects " + std::string(example) + ", not " + quoted_input(text));
  return parsed;
}

// B,H: two positive integers, their product at most 2^30.
std::pair<int, int> parse_batch_heads(std::string_view text) {
  const auto positive = [](std::string_view digits, int& parsed) {
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), parsed);
    return !digits.empty() && error == std::errc{} && end == digits.data() + digits.size() && parsed >= 1;
  };
  const std::size_t comma = text.find(',');
  int batch = 0, heads = 0;
  if (comma == std::string_view::npos || !positive(text.substr(0, comma), batch) ||
      !positive(text.substr(comma + 1), heads) || static_cast<long long>(batch) * heads > (1LL << 30))
    fail("attention: --batch-heads expects B,H, two positive integers (e.g. 1,32), not " + quoted_input(text));
  return {batch, heads};
}

// PyTorch takes scale= as a Python float and passes it to the kernel as a float: two roundings, as here.
float32 parse_scale(std::string_view text) {
  const std::string copy(text);
  char* end = nullptr;
  const double parsed = std::strtod(copy.c_str(), &end);
  if (copy.empty() || *end != '\0' || !std::isfinite(parsed) || !std::isfinite(static_cast<float>(parsed)))
    fail("attention: --scale expects a finite decimal such as 0.125, not " + quoted_input(text));
  return from_host(static_cast<float>(parsed));
}

attention_options parse_options(const arguments& args) {
  argument_reader reader(args, "attention");
  attention_options options;
  std::vector<std::string> files;
  for (; !reader.at_end(); reader.next()) {
    std::string_view value;
    if (reader.take_value("--preset", value)) {
      if (value != preset_names)
        fail("attention: unknown preset " + quoted_input(value) + "; the presets are: " + std::string(preset_names));
    } else if (reader.take_flag("--causal")) {
      options.causal = true;
    } else if (reader.take_value("--scale", value)) {
      options.scale = parse_scale(value);
    } else if (reader.take_value("--splits", value)) {
      options.splits = parse_count(value, 1, 128, "--splits", "an integer from 1 to 128");
    } else if (reader.take_value("--batch-heads", value)) {
      options.batch_heads = parse_batch_heads(value);
    } else if (reader.take_value("--out-o", value)) {
      options.out_o = value;
    } else if (reader.take_value("--out-lse", value)) {
      options.out_lse = value;
    } else if (reader.take_value("--expect-o", value)) {
      options.expect_o = value;
    } else if (reader.take_value("--expect-lse", value)) {
      options.expect_lse = value;
    } else if (reader.current().size() > 1 && reader.current().front() == '-') {
      reader.unknown_option();
    } else {
      if (files.size() == 3)
        fail("attention: unexpected argument " + quoted_input(reader.current()) + "; expected three files, Q K V");
      files.emplace_back(reader.current());
    }
  }
  if (files.size() != 3)
    fail("attention: expected three .npy files, Q K V, but got " + std::to_string(files.size()) +
         "; see bitexact attention --help");
  options.q_path = files[0], options.k_path = files[1], options.v_path = files[2];
  return options;
}

npy::array read_npy(const std::string& path) {
  try {
    return npy::read(path);
  } catch (const npy::npy_error& error) {
    fail(printable(error.what()));
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

// What one run computes: the files' heads and the kernel that computes each.
struct attention_problem {
  attention_options options;
  operand_tensor q, k, v;
  attention_shape head_shape;       // one head: batch = heads = 1
  attention_shape heuristic_shape;  // the call whose split count the preset chose
  flash_kernel kernel;
  bool four_d = true;
  std::size_t head_count() const { return q.batch * q.heads; }
};

// The tiles pytorch_sdpa_flash_sm90 uses for a split count: the split kernel's when it splits.
void set_split_count(flash_kernel& kernel, int head_dim, int splits) {
  kernel.splits = splits;
  if (splits > 1) {
    kernel.block_m = 64;
    kernel.block_n = head_dim == 64 ? 256 : 128;
  } else {
    kernel.block_m = 128;
    kernel.block_n = head_dim == 64 ? 128 : 64;
  }
}

attention_problem read_problem(const attention_options& options) {
  attention_problem p{options, read_operand(options.q_path, "Q"), read_operand(options.k_path, "K"),
                      read_operand(options.v_path, "V"), {}, {}, {}, true};
  if (p.v.file_shape != p.k.file_shape)
    fail(printable(options.v_path) + ": V has shape " + shape_text(p.v.file_shape) + "; expected K's shape " +
         shape_text(p.k.file_shape));
  const bool same_heads = p.q.batch == p.k.batch && p.q.heads == p.k.heads && p.q.head_dim == p.k.head_dim;
  if (p.q.file_shape.size() != p.k.file_shape.size() || !same_heads)
    fail(printable(options.k_path) + ": K has shape " + shape_text(p.k.file_shape) + "; expected " +
         (p.q.file_shape.size() == 4 ? fmt::format("[{}, {}, N, {}]", p.q.batch, p.q.heads, p.q.head_dim)
                                     : fmt::format("[N, {}]", p.q.head_dim)) +
         " to match Q's " + shape_text(p.q.file_shape));
  if (options.causal && p.q.rows != p.k.rows)
    fail(fmt::format("attention: --causal needs as many query rows as key rows (PyTorch refuses causal attention "
                     "otherwise), but Q has {} and K has {}",
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
  try {
    p.kernel = attention::pytorch_sdpa_flash_sm90(p.heuristic_shape, options.scale);
  } catch (const std::invalid_argument& error) {
    fail(printable(options.q_path) + ": " + error.what());
  }
  if (options.splits) set_split_count(p.kernel, p.head_shape.head_dim, *options.splits);
  return p;
}

struct attention_result {
  std::vector<bfloat16> o;    // [heads][query_rows][head_dim]
  std::vector<float32> lse;   // [heads][query_rows]
};

// Every head of the files.
attention_result compute(const attention_problem& p) {
  try {
    ptx::mufu_tables::shared();  // loaded once, here, so that a missing table is one error, not one per thread
  } catch (const mufu_data_error& error) {
    std::string message = error.what();
    if (message.rfind("bitexact: ", 0) == 0) message.erase(0, 10);
    fail(printable(message));
  }
  const std::size_t heads = p.head_count(), rows = p.q.rows, keys = p.k.rows, d = p.q.head_dim;
  attention_result result{std::vector<bfloat16>(heads * rows * d), std::vector<float32>(heads * rows)};
  // Heads one after another: flash_forward_head spreads each head's rows over the machine's threads.
  try {
    for (std::size_t h = 0; h < heads; ++h) {
      const auto q = std::span<const bfloat16>(p.q.values).subspan(h * rows * d, rows * d);
      const auto k = std::span<const bfloat16>(p.k.values).subspan(h * keys * d, keys * d);
      const auto v = std::span<const bfloat16>(p.v.values).subspan(h * keys * d, keys * d);
      attention::flash_forward_head(p.kernel, p.head_shape, q, k, v,
                                    std::span<bfloat16>(result.o).subspan(h * rows * d, rows * d),
                                    std::span<float32>(result.lse).subspan(h * rows, rows));
    }
  } catch (const std::exception& e) {
    fail("attention: " + printable(e.what()));
  }
  return result;
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
    const npy::array array = read_npy(path);
    if (array.shape != lse_shape(p))
      fail(printable(path) + ": L has shape " + shape_text(array.shape) + "; expected " + shape_text(lse_shape(p)) +
           (p.four_d ? " ([B, H, N])" : " ([N])"));
    if (array.descr != "<f4")
      fail(printable(path) + ": element type '" + array.descr + "' is not float32; L is the float32 logsumexp");
    std::vector<float32> values(array.element_count());
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = float32::from_bits(array.word(i));
    expected.lse = std::move(values);
  }
  return expected;
}

void write_outputs(const attention_problem& p, const attention_result& result) {
  try {
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
  std::printf("attention: Q %s, K and V %s, %s, scale %s\n", shape_text(p.q.file_shape).c_str(),
              shape_text(p.k.file_shape).c_str(), p.options.causal ? "causal" : "not causal",
              fmt::format("{} (0x{:08X}){}", to_host(p.kernel.scale), p.kernel.scale.bits,
                          p.options.scale ? "" : ", the default 1/sqrt(d)")
                  .c_str());
  const std::string split_source =
      p.options.splits ? std::string("from --splits")
                       : fmt::format("the heuristic's for B {}, H {}{}", s.batch, s.heads,
                                     p.options.batch_heads ? ", from --batch-heads" : "");
  std::printf("preset %s: %s\n", std::string(preset_names).c_str(), kernel_text(p.kernel, s.key_rows, split_source).c_str());
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
    const long last_key = static_cast<long>(row) + shape.key_rows - shape.query_rows;
    text += last_key < 0 ? "; causal: the row sees no key"
                         : fmt::format("; causal: the row sees keys 0..{}, its diagonal in block {}", last_key,
                                       last_key / kernel.block_n);
  }
  text += "\n";
  // Each split runs its blocks from the last down (flash_forward.hpp).
  constexpr int shown_splits = 8;
  for (int s = 0; s < kernel.splits && s < shown_splits; ++s) {
    const attention::detail::block_range range = attention::detail::blocks_of(kernel, shape, m_block, s);
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

// Counts and reports the mismatches of one output; returns how many.
template <format F>
std::uint64_t compare(const attention_problem& p, std::string_view name, const std::vector<value<F>>& model,
                      const std::vector<value<F>>& expected, std::size_t row_length) {
  std::uint64_t mismatches = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < model.size(); ++i)
    if (model[i].bits != expected[i].bits && mismatches++ == 0) first = i;
  std::printf("%s: %zu elements compared, %llu mismatches\n", std::string(name).c_str(), model.size(),
              static_cast<unsigned long long>(mismatches));
  if (mismatches == 0) return 0;
  const std::size_t rows = p.q.rows;
  const std::size_t row_index = first / row_length, head = row_index / rows, row = row_index % rows;
  const std::optional<std::size_t> col = row_length > 1 ? std::optional<std::size_t>(first % row_length) : std::nullopt;
  std::printf("first mismatch in %s at %s\n  expected %s\n  model    %s\n%s", std::string(name).c_str(),
              index_text(p, head, row, col).c_str(), value_text(expected[first]).c_str(),
              value_text(model[first]).c_str(), describe_row(p, row).c_str());
  return mismatches;
}

}  // namespace

int attention_command(const arguments& args) {
  if (asks_for_help(args)) {
    std::fputs(attention_help.data(), stdout);
    return 0;
  }
  const attention_options options = parse_options(args);
  const attention_problem problem = read_problem(options);
  const expectations expected = read_expectations(problem);
  const attention_result result = compute(problem);
  write_outputs(problem, result);
  print_summary(problem);
  std::uint64_t mismatches = 0;
  if (expected.o) mismatches += compare(problem, "O", result.o, *expected.o, problem.q.head_dim);
  if (expected.lse) mismatches += compare(problem, "L", result.lse, *expected.lse, 1);
  return mismatches ? 1 : 0;
}

}  // namespace bitexact::cli
