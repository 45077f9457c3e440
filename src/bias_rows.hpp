// What the `bitexact bias` analyses share: the parsing of their numeric
// options, the writing of their output files, and the constructed attention
// row of `bias mechanism` (ties at the max, V of negative mean).
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include <bitexact/attention/shape.hpp>
#include <bitexact/core/operations.hpp>

#include "cli.hpp"

namespace bitexact::cli::bias {

inline int parse_int(std::string_view text, int low, int high, std::string_view option, std::string_view expected) {
  int parsed = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), parsed);
  if (text.empty() || error != std::errc{} || end != text.data() + text.size() || parsed < low || parsed > high)
    fail("bias: " + std::string(option) + " expects " + std::string(expected) + ", not " + quoted_input(text));
  return parsed;
}

inline double parse_double(std::string_view text, std::string_view option, double least, std::string_view expected) {
  const std::string copy(text);
  char* end = nullptr;
  const double parsed = std::strtod(copy.c_str(), &end);
  if (copy.empty() || *end != '\0' || !std::isfinite(parsed) || parsed < least)
    fail("bias: " + std::string(option) + " expects " + std::string(expected) + ", not " + quoted_input(text));
  return parsed;
}

inline std::uint64_t parse_seed(std::string_view text) {
  std::uint64_t seed = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seed);
  if (text.empty() || error != std::errc{} || end != text.data() + text.size())
    fail("bias: --seed expects an integer from 0 to 2^64 - 1, not " + quoted_input(text));
  return seed;
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) fail("bias: cannot write " + quoted_input(path));
}

// One head of one query row: Q, K and V.
struct row_operands {
  attention::attention_shape shape;
  std::vector<bfloat16> q, k, v;
};

// The mechanism's row: Q = (1, 0, ..., 0), so the score of key j is K[j][0];
// the tied keys get max_score, every other key max - U(gap_min, gap_max)
// (rounded to bf16, redrawn until below the max); V = v_mean + v_sd
// (Irwin-Hall(12) - 6), rounded to bf16. Uniform draws are the top 53 bits of
// std::mt19937_64 seeded with seed: scores first, then V row by row.
struct tie_row {
  int keys = 1024, head_dim = 64;
  std::vector<int> tie_positions;
  bfloat16 max_score = from_double<bf16>(8.0).result;
  double gap_min = 8, gap_max = 64, v_mean = -2, v_sd = 0.5;
  std::uint64_t seed = 1;
};

// Keys floor((i + 1/2) keys / ties), i = 0..ties-1.
inline std::vector<int> evenly_spaced(int keys, int ties) {
  std::vector<int> positions;
  for (int i = 0; i < ties; ++i) positions.push_back(static_cast<int>((2LL * i + 1) * keys / (2LL * ties)));
  return positions;
}

inline row_operands build_tie_row(const tie_row& o) {
  const std::size_t d = static_cast<std::size_t>(o.head_dim);
  row_operands row{{1, 1, 1, o.keys, o.head_dim, false}, {}, {}, {}};
  row.q.assign(d, bfloat16::zero());
  row.q[0] = from_double<bf16>(1.0).result;
  row.k.assign(static_cast<std::size_t>(o.keys) * d, bfloat16::zero());
  row.v.assign(static_cast<std::size_t>(o.keys) * d, bfloat16::zero());
  std::mt19937_64 generator(o.seed);
  const auto uniform = [&] { return static_cast<double>(generator() >> 11) * 0x1p-53; };
  std::vector<bool> tied(static_cast<std::size_t>(o.keys), false);
  for (const int key : o.tie_positions) tied[static_cast<std::size_t>(key)] = true;
  const double max = to_double(o.max_score);
  for (std::size_t j = 0; j < tied.size(); ++j) {
    bfloat16 score = o.max_score;
    for (int tries = 0; !tied[j] && !(to_double(score) < max); ++tries) {
      if (tries == 100) fail("bias: no score below --max " + fmt::format("{}", max) + " from the gaps given; widen them");
      score = from_double<bf16>(max - (o.gap_min + uniform() * (o.gap_max - o.gap_min))).result;
    }
    row.k[j * d] = score;
  }
  for (bfloat16& x : row.v) {
    double sum = 0;
    for (int i = 0; i < 12; ++i) sum += uniform();
    x = from_double<bf16>(o.v_mean + o.v_sd * (sum - 6)).result;
  }
  return row;
}

}  // namespace bitexact::cli::bias
