// The attention row built to show the paper's P̄V rounding bias (Qiu & Yao,
// section 3.3.2): several scores tied at the row maximum, so that
// P̄ = exp(S - max) = 1 exactly there, and a V of negative mean. `bitexact bias
// mechanism`, `bias attribution` and the teaching page build the same row from
// the same seed, so their numbers agree.
#pragma once

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "shape.hpp"
#include "../core/operations.hpp"

namespace bitexact::attention {

// One head of one query row: Q, K and V.
struct row_operands {
  attention_shape shape;
  std::vector<bfloat16> q, k, v;
};

// Q = (1, 0, ..., 0), so the score of key j is K[j][0]; the tied keys get
// max_score, every other key max - U(gap_min, gap_max) (rounded to bf16,
// redrawn until below the max); V = v_mean + v_sd (Irwin-Hall(12) - 6),
// rounded to bf16. Uniform draws are the top 53 bits of std::mt19937_64
// seeded with seed: scores first, then V row by row.
struct tie_row {
  int keys = 1024, head_dim = 64;
  std::vector<int> tie_positions;
  bfloat16 max_score = from_double<bf16>(8.0).result;
  double gap_min = 8, gap_max = 64, v_mean = -2, v_sd = 0.5;
  std::uint64_t seed = 1;
};

// Keys floor((i + 1/2) keys / ties), i = 0..ties-1: ties spread evenly along the row.
inline std::vector<int> evenly_spaced(int keys, int ties) {
  std::vector<int> positions;
  for (int i = 0; i < ties; ++i) positions.push_back(static_cast<int>((2LL * i + 1) * keys / (2LL * ties)));
  return positions;
}

// Throws std::invalid_argument for a tie position outside the row, or when 100
// draws give no score below the maximum (gaps that round to nothing at that max).
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
  for (const int key : o.tie_positions) {
    if (key < 0 || key >= o.keys)
      throw std::invalid_argument("tie position " + std::to_string(key) + " is outside the row's keys 0 to " +
                                  std::to_string(o.keys - 1));
    tied[static_cast<std::size_t>(key)] = true;
  }
  const double max = to_double(o.max_score);
  for (std::size_t j = 0; j < tied.size(); ++j) {
    bfloat16 score = o.max_score;
    for (int tries = 0; !tied[j] && !(to_double(score) < max); ++tries) {
      if (tries == 100) throw std::invalid_argument("no score below the maximum from the gaps given; widen them");
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

}  // namespace bitexact::attention
