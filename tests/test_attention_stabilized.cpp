// The paper's stabilized softmax (pytorch_sdpa_flash_sm90_stabilized) on the
// captured tie heads, against a straightforward implementation of Algorithm 3
// in double on the same blocks: which P are exactly 1, block by block, with and
// without the rule. The tie heads hold integer-valued Q and K, so every score
// is exact in both.
#include <doctest/doctest.h>

#include <bitexact/attention/flash_forward.hpp>
#include <bitexact/attention/kernels.hpp>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <bitexact/testing/npy.hpp>

using namespace bitexact;
using namespace bitexact::attention;

namespace {

using entry = std::tuple<int, int, int>;  // row, split, key

std::vector<bfloat16> read_bf16(const std::string& path) {
  const npy::array a = npy::read(path);
  std::vector<bfloat16> values(a.element_count());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = bfloat16::from_bits(a.word(i));
  return values;
}

double as_double(bfloat16 x) { return static_cast<double>(std::bit_cast<float>(std::uint32_t{x.bits} << 16)); }

// Every P of the kernel that is exactly 1, and every score it computed.
struct ones_recorder {
  std::set<entry> ones;
  std::vector<std::tuple<int, int, float>> scores;  // row, key, S
  int block_n;
  void on(const softmax_block_event& e) {
    for (std::size_t j = 0; j < e.p.size(); ++j) {
      const int key = e.block * block_n + static_cast<int>(j);
      if (e.p[j].bits == 0x3F800000u) ones.insert({e.row, e.split, key});
      scores.emplace_back(e.row, key, to_host(e.scores[j]));
    }
  }
};

// Algorithm 3 in double over the kernel's own blocks, splits and masks: the
// entries whose P = exp(S - m) is exactly 1, with or without the rule.
struct reference_result {
  std::set<entry> ones;
  int blocks_with_repeated_max = 0, repeated_across_blocks = 0, zero_max = 0;
};

// across_blocks: the rule on the row's largest score so far (every score of
// the split's blocks processed up to this one counted, no shortcut).
reference_result algorithm3(const flash_kernel& kernel, const attention_shape& shape, const std::vector<bfloat16>& q,
                            const std::vector<bfloat16>& k, bool stabilize,
                            std::vector<std::tuple<int, int, double>>* scores = nullptr, bool across_blocks = false) {
  const int d = shape.head_dim, bn = kernel.block_n;
  const double scale = static_cast<double>(to_host(kernel.scale)), beta = 2.0, epsilon = static_cast<double>(1e-3f);
  reference_result result;
  for (int row = 0; row < shape.query_rows; ++row) {
    const int m_block = row / kernel.block_m;
    int limit = shape.key_rows;
    if (shape.causal) limit = std::min(limit, row + 1 + shape.key_rows - shape.query_rows);
    for (int split = 0; split < kernel.splits; ++split) {
      const auto range = attention::blocks_of(kernel, shape, m_block, split);
      double m = -std::numeric_limits<double>::infinity();
      int global_ties = 0;
      std::vector<double> so_far;
      for (int block = range.end - 1; block >= range.first; --block) {
        std::vector<double> s(static_cast<std::size_t>(bn));
        for (int j = 0; j < bn; ++j) {
          const int key = block * bn + j;
          if (key >= limit) {
            s[static_cast<std::size_t>(j)] = -std::numeric_limits<double>::infinity();
            continue;
          }
          double dot = 0;
          for (int c = 0; c < d; ++c)
            dot += as_double(q[static_cast<std::size_t>(row * d + c)]) * as_double(k[static_cast<std::size_t>(key * d + c)]);
          s[static_cast<std::size_t>(j)] = dot;
          if (scores) scores->emplace_back(row, key, dot);
        }
        so_far.insert(so_far.end(), s.begin(), s.end());
        const std::vector<double>& tested = across_blocks ? so_far : s;
        double rm = *std::max_element(tested.begin(), tested.end());
        int rs = 0;
        for (double x : tested) rs += (rm - x) * scale <= epsilon;
        if (rs > 1) ++result.blocks_with_repeated_max;
        if (stabilize && rs > 1 && rm > 0) rm = beta * rm;
        else if (stabilize && rs > 1 && rm < 0) rm = 0;
        if (stabilize && rs > 1 && rm == 0) ++result.zero_max;
        m = std::max(m, rm);
        int ones_here = 0;
        for (int j = 0; j < bn; ++j)
          if (s[static_cast<std::size_t>(j)] == m) {
            result.ones.insert({row, split, block * bn + j});
            ++ones_here;
          }
        global_ties += ones_here;
      }
      if (global_ties > 1) ++result.repeated_across_blocks;
    }
  }
  return result;
}

}  // namespace

TEST_SUITE("attention") {
  TEST_CASE("the stabilized preset removes every P = 1 of a repeated block maximum, as Algorithm 3 in double says") {
    const std::string data = std::string(BITEXACT_TEST_DATA_DIR) + "/attention/";
    struct tie_head {
      std::string name;
      attention_shape shape;
    };
    const tie_head heads[] = {{"split_d64_n1000_causal_ties_positive_h3", {1, 4, 1000, 1000, 64, true}},
                              {"split_d128_n1000_causal_ties_negative_h1", {1, 4, 1000, 1000, 128, true}}};
    for (const tie_head& head : heads) {
      const auto q = read_bf16(data + head.name + "/q.npy"), k = read_bf16(data + head.name + "/k.npy"),
                 v = read_bf16(data + head.name + "/v.npy");
      const std::size_t rows = static_cast<std::size_t>(head.shape.query_rows), d = static_cast<std::size_t>(head.shape.head_dim);
      std::vector<bfloat16> o(rows * d), o_stabilized(rows * d);
      std::vector<float32> lse(rows), lse_stabilized(rows);

      const flash_kernel standard = pytorch_sdpa_flash_sm90(head.shape);
      const flash_kernel stabilized = pytorch_sdpa_flash_sm90_stabilized(head.shape);
      ones_recorder standard_ones{{}, {}, standard.block_n}, stabilized_ones{{}, {}, stabilized.block_n};
      flash_forward_head(standard, head.shape, q, k, v, o, lse, standard_ones);
      flash_forward_head(stabilized, head.shape, q, k, v, o_stabilized, lse_stabilized, stabilized_ones);

      // The reference's scores are the kernel's (integer-valued inputs: both exact).
      std::vector<std::tuple<int, int, double>> reference_scores;
      const reference_result plain = algorithm3(standard, head.shape, q, k, false, &reference_scores);
      const reference_result rule = algorithm3(stabilized, head.shape, q, k, true);
      std::map<std::pair<int, int>, double> reference;
      for (const auto& [row, key, s] : reference_scores) reference[{row, key}] = s;
      std::size_t unmasked = 0, score_mismatches = 0;
      for (const auto& [row, key, s] : standard_ones.scores) {
        if (std::isinf(s) && s < 0) continue;
        ++unmasked;
        const auto found = reference.find({row, key});
        score_mismatches += found == reference.end() || found->second != static_cast<double>(s);
      }
      CHECK(unmasked == reference_scores.size());
      CHECK(score_mismatches == 0);

      CHECK(standard_ones.ones == plain.ones);
      CHECK(stabilized_ones.ones == rule.ones);
      CHECK(stabilized_ones.ones.size() < standard_ones.ones.size());
      MESSAGE(head.name << ": " << unmasked << " scores; P = 1 in the standard kernel " << standard_ones.ones.size()
                        << " times (" << plain.blocks_with_repeated_max << " blocks with a repeated max), "
                        << "with the rule " << stabilized_ones.ones.size()
                        << " times (maxima alone in their block, which the rule leaves), the same entries as "
                           "Algorithm 3 in double; row splits whose P = 1 lie in different blocks: "
                        << rule.repeated_across_blocks);
      // Softmax is shift-invariant: the two kernels' results are close, not equal.
      std::size_t differ = 0;
      for (std::size_t i = 0; i < o.size(); ++i) differ += o[i] != o_stabilized[i];
      MESSAGE("O elements that differ between the standard and the stabilized kernel: " << differ << " of " << o.size());
    }
  }

  TEST_CASE("the across-blocks preset also catches maxima repeated in different blocks, as its rule in double says") {
    const std::string data = std::string(BITEXACT_TEST_DATA_DIR) + "/attention/";
    const std::pair<std::string, attention_shape> heads[] = {
        {"split_d64_n1000_causal_ties_positive_h3", {1, 4, 1000, 1000, 64, true}},
        {"split_d128_n1000_causal_ties_negative_h1", {1, 4, 1000, 1000, 128, true}}};
    int repeats_left_by_per_block = 0;
    for (const auto& [name, shape] : heads) {
      const auto q = read_bf16(data + name + "/q.npy"), k = read_bf16(data + name + "/k.npy"),
                 v = read_bf16(data + name + "/v.npy");
      const std::size_t rows = static_cast<std::size_t>(shape.query_rows), d = static_cast<std::size_t>(shape.head_dim);
      std::vector<bfloat16> o(rows * d);
      std::vector<float32> lse(rows);
      const flash_kernel per_block = pytorch_sdpa_flash_sm90_stabilized(shape);
      const flash_kernel across = pytorch_sdpa_flash_sm90_stabilized_across_blocks(shape);
      ones_recorder per_block_ones{{}, {}, per_block.block_n}, across_ones{{}, {}, across.block_n};
      flash_forward_head(per_block, shape, q, k, v, o, lse, per_block_ones);
      flash_forward_head(across, shape, q, k, v, o, lse, across_ones);
      const reference_result rule = algorithm3(across, shape, q, k, true, nullptr, true);
      CHECK(across_ones.ones == rule.ones);
      // A max met again in a later block keeps P = 1 only where it was first met: no row has P = 1 twice
      // at the same score (P = 1 at a larger max found later, once, stays).
      const auto same_score_twice = [](const ones_recorder& rec) {
        std::map<std::pair<int, int>, float> score;  // (row, key) -> S
        for (const auto& [row, key, x] : rec.scores) score[{row, key}] = x;
        std::map<std::tuple<int, int, float>, int> count;  // (row, split, S) -> P = 1 entries
        for (const auto& [row, split, key] : rec.ones) ++count[{row, split, score[{row, key}]}];
        int rows_with_repeat = 0;
        for (const auto& [at, n] : count) rows_with_repeat += n > 1;
        return rows_with_repeat;
      };
      const int per_block_repeats = same_score_twice(per_block_ones), across_repeats = same_score_twice(across_ones);
      CHECK(across_repeats == 0);
      CHECK(across_ones.ones.size() <= per_block_ones.ones.size());
      repeats_left_by_per_block += per_block_repeats;
      MESSAGE(name << ": P = 1 entries " << per_block_ones.ones.size() << " with the per-block rule, "
                   << across_ones.ones.size() << " across blocks (the rule in double: " << rule.ones.size()
                   << "); row splits with P = 1 twice at the same score: " << per_block_repeats << " and " << across_repeats);
    }
    CHECK(repeats_left_by_per_block > 0);  // the tie heads do have maxima repeated across blocks
    // It needs what makes "the second largest passes" the same as "two pass".
    attention_shape one{1, 1, 16, 16, 64, false};
    std::vector<bfloat16> zeros(16 * 64, bfloat16::zero()), o(16 * 64);
    std::vector<float32> lse(16);
    CHECK_THROWS_AS(flash_forward_head(pytorch_sdpa_flash_sm90_stabilized_across_blocks(one, from_host(-0.125f)), one, zeros,
                                       zeros, zeros, o, lse),
                    std::invalid_argument);
  }
}
