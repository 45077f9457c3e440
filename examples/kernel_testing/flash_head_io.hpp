// Reading and writing one attention head as .npy files, for the two example
// programs: bf16 bit patterns [rows, head_dim] (int16 or uint16, as
// `x.view(torch.int16).cpu().numpy()` saves them), through the library's
// .npy reader.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <bitexact/bitexact.hpp>
#include <bitexact/testing/npy.hpp>

namespace kernel_testing {

struct head_matrix {
  std::size_t rows = 0, head_dim = 0;
  std::vector<bitexact::bfloat16> values;
};

inline head_matrix read_head(const std::string& path) {
  const bitexact::npy::array array = bitexact::npy::read(path);
  if (array.shape.size() != 2 || (array.descr != "<i2" && array.descr != "<u2"))
    throw std::invalid_argument(path + ": expected bf16 bit patterns (int16 or uint16) of shape [rows, head_dim]");
  head_matrix head{array.shape[0], array.shape[1], {}};
  for (std::size_t i = 0; i < array.element_count(); ++i)
    head.values.push_back(bitexact::bfloat16::from_bits(static_cast<std::uint16_t>(array.word(i))));
  return head;
}

// "B,H": the batch and heads of the call the head came from (they decide the split count).
inline std::pair<int, int> parse_batch_heads(const std::string& text) {
  const std::size_t comma = text.find(',');
  if (comma == std::string::npos) throw std::invalid_argument("expected B,H (the call's batch and heads), not " + text);
  return {std::stoi(text.substr(0, comma)), std::stoi(text.substr(comma + 1))};
}

// PyTorch's flash kernel for this head of a B x H call.
inline bitexact::attention::flash_kernel pytorch_kernel_for(const head_matrix& q, const head_matrix& k,
                                                            std::pair<int, int> batch_heads, bool causal) {
  const bitexact::attention::attention_shape call{batch_heads.first, batch_heads.second, static_cast<int>(q.rows),
                                                  static_cast<int>(k.rows), static_cast<int>(q.head_dim), causal};
  return bitexact::attention::pytorch_sdpa_flash_sm90(call);
}

inline bitexact::attention::attention_shape one_head(const head_matrix& q, const head_matrix& k, bool causal) {
  return {1, 1, static_cast<int>(q.rows), static_cast<int>(k.rows), static_cast<int>(q.head_dim), causal};
}

}  // namespace kernel_testing
