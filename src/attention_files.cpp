// `bitexact attention`'s files: Q, K, V and the files it writes or compares
// with, as NumPy .npy, checked and named in every message.
#include "attention.hpp"

namespace bitexact::cli::attention_parts {

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
  if (t.batch == 0 || t.heads == 0 || t.rows == 0 || t.head_dim == 0 || t.batch > most || t.heads > most ||
      t.batch * t.heads > most || t.rows > most)
    fail(printable(path) + ": " + std::string(name) + " has shape " + shape_text(array.shape) +
         "; every extent must be at least 1 (and N at most 2^30)");
  if (array.descr == "<u1") {  // fp8 bit patterns (x.view(torch.uint8)); read_problem checks the kernel takes them
    t.fp8_bits.resize(array.element_count());
    for (std::size_t i = 0; i < t.fp8_bits.size(); ++i) t.fp8_bits[i] = static_cast<std::uint8_t>(array.word(i));
    return t;
  }
  t.values = bf16_elements(array, path);
  return t;
}

std::vector<std::size_t> lse_shape(const attention_problem& p) {
  if (!p.four_d) return {p.q.rows};
  return {p.q.batch, p.q.heads, p.q.rows};
}

expectations read_expectations(const attention_problem& p) {
  expectations expected;
  if (!p.options.expect_o.empty()) {
    const std::string& path = p.options.expect_o;
    const npy::array array = read_npy(path);
    if (array.shape != p.q.file_shape)
      fail(printable(path) + ": O has shape " + shape_text(array.shape) + "; expected Q's shape " +
           shape_text(p.q.file_shape));
    if (p.call.o_format() == e4m3) {
      if (array.descr != "<u1")
        fail(printable(path) + ": element type '" + array.descr + "' is not uint8; " + p.call.call.model.name() +
             "'s O is e4m3, compared as uint8 bit patterns (o.view(torch.uint8))");
      expected.o8.emplace(array.element_count());
      for (std::size_t i = 0; i < expected.o8->size(); ++i) (*expected.o8)[i] = float8_e4m3::from_bits(array.word(i));
    } else {
      if (p.call.fp8() && array.element_size() == 1)
        fail(printable(path) + ": element type '" + array.descr + "' is one byte, but " + p.call.call.model.name() +
             "'s O is bf16: compare uint16 or int16 bf16 bit patterns (o.view(torch.int16))");
      expected.o = bf16_elements(array, path);
    }
  }
  if (!p.options.expect_lse.empty()) {
    const std::string& path = p.options.expect_lse;
    const npy::array array = read_npy(path, "float32");
    // cuDNN's backend returns L as [B, H, N, 1]: a trailing 1 is the same elements. The memory-efficient
    // backend pads N to a multiple of 32 rows, which hold +inf.
    std::vector<std::size_t> shape = array.shape, want = lse_shape(p);
    if (shape.size() == want.size() + 1 && shape.back() == 1) shape.pop_back();
    const std::size_t rows = p.q.rows, padded = (rows + 31) / 32 * 32;
    const bool padded_file = padded != rows && shape.size() == want.size() && shape.back() == padded &&
                             std::equal(want.begin(), want.end() - 1, shape.begin());
    if (shape != want && !padded_file)
      fail(printable(path) + ": L has shape " + shape_text(array.shape) + "; expected " + shape_text(want) +
           (p.four_d ? " ([B, H, N], or [B, H, N, 1]" : " ([N], or [N, 1]") + ", or N padded to " +
           std::to_string(padded) + " rows as the memory-efficient backend pads it)");
    if (array.descr != "<f4")
      fail(printable(path) + ": element type '" + array.descr + "' is not float32; L is the float32 logsumexp");
    const std::size_t file_rows = padded_file ? padded : rows, heads = array.element_count() / file_rows;
    std::vector<float32> values;
    for (std::size_t head = 0; head < heads; ++head)
      for (std::size_t row = 0; row < file_rows; ++row) {
        const float32 x = float32::from_bits(array.word(head * file_rows + row));
        if (row < rows) values.push_back(x);
        else if (x.bits != float32::infinity().bits)  // padding that holds a value is not padding
          fail(printable(path) + ": L's padding row " + std::to_string(row) + (p.four_d ? " of head " + std::to_string(head) : "") +
               " holds " + fmt::format("{} (0x{:08X})", to_double(x), x.bits) + ", not +inf; rows " +
               std::to_string(rows) + " to " + std::to_string(padded - 1) + " must be the backend's padding");
      }
    expected.lse = std::move(values);
    if (padded_file) expected.lse_padded_rows = padded;
  }
  return expected;
}

void write_outputs(const attention_problem& p, const attention_result& computed) {
  const attention::attention_output& result = computed.bits;
  try {
    if (p.options.call.model.is(attention::preset_kind::paper_reference_fp64)) {
      if (!p.options.out_o.empty()) npy::write(p.options.out_o, "<f8", p.q.file_shape, computed.o.data());
      if (!p.options.out_lse.empty()) npy::write(p.options.out_lse, "<f8", lse_shape(p), computed.lse.data());
      return;
    }
    if (!p.options.out_o.empty() && p.call.o_format() == e4m3) {
      std::vector<std::uint8_t> bits(computed.o8.size());
      for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = computed.o8[i].bits;
      npy::write(p.options.out_o, "|u1", p.q.file_shape, bits.data());
    } else if (!p.options.out_o.empty()) {
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

}  // namespace bitexact::cli::attention_parts
