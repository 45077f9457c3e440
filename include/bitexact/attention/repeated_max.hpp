// A leading indicator for training loops. The paper (Qiu & Yao)
// reports that rows whose maximum score repeats become frequent before the
// loss explodes: in such a row the flash kernel's bf16 P, P-bar, is exactly 1
// at two or more keys, and O-bar's rounding error is biased. Per head, over
// the scores S = Q K^T as the kernel computes them, this counts
//   (a) the rows whose maximum repeats: two or more visible keys pass the
//       stabilized rule's tie test against the row max (within_epsilon), and
//   (b) the rows where P-bar = 1 at two or more keys of one split, in the
//       kernel's own tiles: its K/V blocks from the last to the first, its
//       running max (stabilized when the kernel is), its exponent and mask.
// (a) is a property of S alone; (b) is what the P V step actually reads, and
// it also counts a row whose maximum was first met in a later-processed block
// than a score that held the running max before (P = 1 twice, max alone).
//
// P-bar = cvt.rn.bf16(ex2(x)) is 1 exactly for x in one interval (found once,
// p_bar_one_arguments), and every step from a score to its x is monotone in
// the score, so a row needs its max, one bisection per change of its running
// max, and a compare per score; the few scores past the bisection's bound are
// then tested with the kernel's own operations. The result is the count of
// the emulator's own P-bar values (tests/test_attention_repeated_max.cpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "../core/format.hpp"
#include "../hardware/alu.hpp"
#include "../hardware/mufu.hpp"
#include "flash_forward.hpp"
#include "shape.hpp"

namespace bitexact::attention {

// Per head: what the indicator counts, for logging.
struct repeated_max_counts {
  int rows = 0;                       // query rows of the head
  int rows_with_max_repeated = 0;     // (a): two or more keys within epsilon of the row max
  int rows_with_p_bar_one_twice = 0;  // (b): bf16 P exactly 1 at two or more keys of one split
  // (b) counting only the P computed with the split's final running max (not
  // rescaled by a later block's alpha): a maximum met twice, not a stale 1.
  int rows_with_p_bar_one_twice_at_final_max = 0;
  int most_p_bar_ones_in_a_row = 0;   // the most keys with bf16 P = 1 in one row of one split
};

// One query row's share of it.
struct row_repeated_max {
  bool max_repeated = false;  // (a)
  int p_bar_ones = 0;         // the most keys with bf16 P = 1 in one split of the row
  int p_bar_ones_at_final_max = 0;  // the same, of the P computed with the split's final running max
};

// The exponent arguments x whose P-bar, cvt.rn.bf16.f32(ex2.approx.f32(x)), is
// exactly 1: every fp32 x from lowest to highest, and no other (the
// exhaustive test in tests/test_attention_repeated_max.cpp checks all 2^32).
struct p_bar_one_range {
  float32 lowest{}, highest{};
  bool contains(float32 x) const { return to_host(x) >= to_host(lowest) && to_host(x) <= to_host(highest); }
};

namespace detail {

// fp32 numbers in numeric order as unsigned integers: -inf lowest, +inf
// highest, -0 just below +0. Not for NaN.
constexpr std::uint32_t order_key(float32 x) { return x.sign() ? ~x.bits : x.bits | 0x80000000u; }
constexpr float32 from_order_key(std::uint32_t key) {
  return float32::from_bits((key & 0x80000000u) != 0 ? key & 0x7FFFFFFFu : ~key);
}

// The lowest number with key in [low, high] at which `holds` holds, or none
// where it holds at none. Precondition: holds is non-decreasing in the number
// (false, then true) over that range; bisection reads ~32 points of it.
template <class Predicate>
std::optional<float32> lowest_holding(std::uint32_t low, std::uint32_t high, Predicate holds) {
  if (!holds(from_order_key(high))) return std::nullopt;
  while (low < high) {
    const std::uint32_t middle = low + (high - low) / 2;
    if (holds(from_order_key(middle))) high = middle;
    else low = middle + 1;
  }
  return from_order_key(low);
}

inline constexpr float32 positive_infinity = float32::infinity();
inline constexpr float nothing_passes = std::numeric_limits<float>::quiet_NaN();  // no score compares >= NaN

// The scores that can pass a test non-decreasing in the score are those >= the
// returned bound (NaN: none can); the caller still applies the test to them.
// monotone: whether the test is known to be so (else every number can pass).
template <class Test>
float candidate_bound(bool monotone, Test passes) {
  if (!monotone) return -std::numeric_limits<float>::infinity();
  const std::optional<float32> lowest = lowest_holding(order_key(negative_infinity), order_key(positive_infinity), passes);
  return lowest ? to_host(*lowest) : nothing_passes;
}

// A scale the tests may treat as order-preserving: RN(v * scale) is then
// non-decreasing in v (IEEE rounding is monotone).
inline bool positive_finite(float32 scale) { return to_host(scale) > 0.0f && to_host(scale) < std::numeric_limits<float>::infinity(); }

// (a) for one row: two or more visible keys within epsilon of the row max.
inline bool max_repeated(const flash_kernel& kernel, float32 epsilon, std::span<const float32> visible) {
  if (visible.empty()) return false;
  float32 row_max = visible[0];
  for (const float32 s : visible) row_max = fmnmx_max(row_max, s);
  const auto tied = [&](float32 s) { return within_epsilon(kernel.scale, epsilon, row_max, s); };
  const float bound = candidate_bound(positive_finite(kernel.scale), tied);
  int ties = 0;
  for (const float32 s : visible)
    if (to_host(s) >= bound && tied(s) && ++ties == 2) return true;
  return false;
}

// (b) for one row: the most keys with P-bar = 1 in one split of the row, the
// kernel's blocks, masking steps and running max replayed on its scores.
inline void count_p_bar_ones(const flash_kernel& kernel, const attention_shape& shape, const p_bar_one_range& ones,
                             int row, std::span<const float32> row_scores, std::vector<float32>& block_scores,
                             row_repeated_max& counts) {
  const std::size_t bn = static_cast<std::size_t>(kernel.block_n), keys = static_cast<std::size_t>(shape.key_rows);
  const masking_plan masking = masking_of(kernel, shape);
  const bool monotone = positive_finite(kernel.scale_log2);
  for (int split = 0; split < kernel.splits; ++split) {
    const block_range range = blocks_of(kernel, shape, row / kernel.block_m, split);
    running_row_max row_max(kernel);
    float32 bound_for{};  // the max_scaled the bound was found for
    float bound = nothing_passes;
    int in_split = 0, at_current_max = 0;
    for (int block = range.end - 1, iteration = 0; block >= range.first; --block, ++iteration) {
      const std::size_t first_key = static_cast<std::size_t>(block) * bn;
      const std::size_t present = std::min(bn, keys - first_key);
      std::span<const float32> scores = row_scores.subspan(first_key, present);
      if (present < bn || iteration < masking.steps) {
        std::copy_n(scores.begin(), present, block_scores.begin());
        // Keys past the end meet the kernel's zero rows of K; the first masking step masks them.
        std::fill(block_scores.begin() + static_cast<std::ptrdiff_t>(present), block_scores.end(), float32::zero());
        if (iteration < masking.steps) mask_block(kernel, shape, row, block, block_scores);
        scores = block_scores;
      }
      const float32 previous = row_max.value();
      row_max.merge(scores, iteration == 0);
      if (!(to_host(row_max.value()) == to_host(previous))) at_current_max = 0;  // a new max (-0 and +0 are one)
      const float32 max_scaled = scaled_max(kernel, row_max.value());
      if (iteration == 0 || max_scaled.bits != bound_for.bits) {
        bound = candidate_bound(monotone, [&](float32 s) {
          return to_host(exponent_argument(kernel, s, max_scaled)) >= to_host(ones.lowest);
        });
        bound_for = max_scaled;
      }
      int in_block = 0;
      for (const float32 s : scores)
        in_block += to_host(s) >= bound && ones.contains(exponent_argument(kernel, s, max_scaled));
      in_split += in_block;
      at_current_max += in_block;
    }
    counts.p_bar_ones = std::max(counts.p_bar_ones, in_split);
    counts.p_bar_ones_at_final_max = std::max(counts.p_bar_ones_at_final_max, at_current_max);
  }
}

inline void check_scores(const flash_kernel& kernel, const attention_shape& shape, std::size_t scores,
                         std::size_t heads, const char* who) {
  const auto fail = [&](const std::string& what) { throw std::invalid_argument(std::string(who) + ": " + what); };
  if (shape.query_rows < 1 || shape.key_rows < 1) fail("a head needs at least one query row and one key");
  if (kernel.block_m < 1 || kernel.block_n < 1 || kernel.splits < 1)
    fail("the kernel needs block_m, block_n and splits of at least 1");
  if (scores != heads * static_cast<std::size_t>(shape.query_rows) * static_cast<std::size_t>(shape.key_rows))
    fail("scores needs query_rows x key_rows elements per head (" + std::to_string(heads) + " heads)");
}

}  // namespace detail

// Found once, by bisection over [-1, 1] (ex2 and the conversion are monotone:
// the exhaustive test says so for every fp32 input). Throws mufu_data_error
// when the MUFU tables cannot be read.
inline const p_bar_one_range& p_bar_one_arguments() {
  static const p_bar_one_range range = [] {
    const ptx::mufu_tables& tables = ptx::mufu_tables::shared();
    // Non-negative bf16 values are ordered as their bit patterns; 0x3F80 is 1.0.
    const auto p_bar_bits = [&](float32 x) { return ptx::cvt_rn_bf16_f32(ptx::ex2_approx(x, tables)).bits; };
    const std::uint32_t minus_one = detail::order_key(from_host(-1.0f)), plus_one = detail::order_key(from_host(1.0f));
    const std::uint32_t zero = detail::order_key(float32::zero());
    const auto lowest = detail::lowest_holding(minus_one, zero, [&](float32 x) { return p_bar_bits(x) >= 0x3F80u; });
    const auto above = detail::lowest_holding(zero, plus_one, [&](float32 x) { return p_bar_bits(x) > 0x3F80u; });
    if (!lowest || !above || p_bar_bits(*lowest) != 0x3F80u)
      throw std::logic_error("p_bar_one_arguments: ex2 does not reach bf16 1.0 around 0 as the tables should");
    return p_bar_one_range{*lowest, detail::from_order_key(detail::order_key(*above) - 1)};
  }();
  return range;
}

// One head's indicator, row by row, from its scores S [query_rows][key_rows],
// fp32, as the kernel computes them (raw Q K^T: before any scale or mask;
// head_scores). epsilon: the tie test's, by default the kernel's stabilized
// rule's or the paper's 1e-3. Keys the row does not see (causal) take no part
// in (a) or (b). A NaN score is never a maximum nor within epsilon, and
// P-bar is never 1 at it; an infinite max repeats by no test (inf - inf is NaN).
inline std::vector<row_repeated_max> repeated_max_rows(const flash_kernel& kernel, const attention_shape& shape,
                                                       std::span<const float32> scores,
                                                       std::optional<float32> epsilon = std::nullopt) {
  detail::check_scores(kernel, shape, scores.size(), 1, "repeated_max_rows");
  const float32 tie_epsilon = epsilon ? *epsilon : kernel.stabilize ? kernel.stabilize->epsilon : stabilized_max{}.epsilon;
  const p_bar_one_range& ones = p_bar_one_arguments();
  const std::size_t keys = static_cast<std::size_t>(shape.key_rows);
  std::vector<float32> block_scores(static_cast<std::size_t>(kernel.block_n));
  std::vector<row_repeated_max> rows(static_cast<std::size_t>(shape.query_rows));
  for (int row = 0; row < shape.query_rows; ++row) {
    const std::span<const float32> row_scores = scores.subspan(static_cast<std::size_t>(row) * keys, keys);
    const std::size_t visible = static_cast<std::size_t>(std::max(0, visible_keys(kernel, shape, row)));
    row_repeated_max& counts = rows[static_cast<std::size_t>(row)];
    counts.max_repeated = detail::max_repeated(kernel, tie_epsilon, row_scores.first(visible));
    detail::count_p_bar_ones(kernel, shape, ones, row, row_scores, block_scores, counts);
  }
  return rows;
}

// The head's counts, for logging (repeated_max_rows summed).
inline repeated_max_counts count_repeated_maxima(const flash_kernel& kernel, const attention_shape& shape,
                                                 std::span<const float32> scores,
                                                 std::optional<float32> epsilon = std::nullopt) {
  repeated_max_counts counts;
  counts.rows = shape.query_rows;
  for (const row_repeated_max& row : repeated_max_rows(kernel, shape, scores, epsilon)) {
    counts.rows_with_max_repeated += row.max_repeated;
    counts.rows_with_p_bar_one_twice += row.p_bar_ones >= 2;
    counts.rows_with_p_bar_one_twice_at_final_max += row.p_bar_ones_at_final_max >= 2;
    counts.most_p_bar_ones_in_a_row = std::max(counts.most_p_bar_ones_in_a_row, row.p_bar_ones);
  }
  return counts;
}

// The same from one head's q [query_rows][head_dim] and k [key_rows][head_dim]
// (bf16), S computed first with the kernel's tensor-core model: slow, for
// tests and small heads.
inline repeated_max_counts count_repeated_maxima(const flash_kernel& kernel, const attention_shape& shape,
                                                 std::span<const bfloat16> q, std::span<const bfloat16> k,
                                                 std::optional<float32> epsilon = std::nullopt) {
  return count_repeated_maxima(kernel, shape, head_scores(kernel, shape, q, k), epsilon);
}

// Every head of a call, [batch * heads] counts in order: scores
// [batch, heads, query_rows, key_rows].
inline std::vector<repeated_max_counts> count_repeated_maxima_per_head(const flash_kernel& kernel,
                                                                       const attention_shape& shape,
                                                                       std::span<const float32> scores,
                                                                       std::optional<float32> epsilon = std::nullopt) {
  if (shape.batch < 1 || shape.heads < 1)
    throw std::invalid_argument("count_repeated_maxima_per_head: batch and heads must be at least 1");
  const std::size_t heads = static_cast<std::size_t>(shape.batch) * static_cast<std::size_t>(shape.heads);
  detail::check_scores(kernel, shape, scores.size(), heads, "count_repeated_maxima_per_head");
  const std::size_t per_head = scores.size() / heads;
  std::vector<repeated_max_counts> counts;
  for (std::size_t h = 0; h < heads; ++h)
    counts.push_back(count_repeated_maxima(kernel, shape, scores.subspan(h * per_head, per_head), epsilon));
  return counts;
}

// From q [batch, heads, query_rows, head_dim] and k [batch, heads, key_rows, head_dim] (bf16).
inline std::vector<repeated_max_counts> count_repeated_maxima_per_head(const flash_kernel& kernel,
                                                                       const attention_shape& shape,
                                                                       std::span<const bfloat16> q,
                                                                       std::span<const bfloat16> k,
                                                                       std::optional<float32> epsilon = std::nullopt) {
  if (shape.batch < 1 || shape.heads < 1 || shape.query_rows < 1 || shape.key_rows < 1 || shape.head_dim < 1)
    throw std::invalid_argument("count_repeated_maxima_per_head: batch, heads, rows, keys and head dim must be at least 1");
  const std::size_t heads = static_cast<std::size_t>(shape.batch) * static_cast<std::size_t>(shape.heads);
  const std::size_t d = static_cast<std::size_t>(shape.head_dim);
  const std::size_t q_head = static_cast<std::size_t>(shape.query_rows) * d, k_head = static_cast<std::size_t>(shape.key_rows) * d;
  if (q.size() != heads * q_head || k.size() != heads * k_head)
    throw std::invalid_argument("count_repeated_maxima_per_head: q needs batch x heads x query_rows x head_dim "
                                "elements, k batch x heads x key_rows x head_dim");
  std::vector<repeated_max_counts> counts;
  for (std::size_t h = 0; h < heads; ++h)
    counts.push_back(count_repeated_maxima(kernel, shape, q.subspan(h * q_head, q_head), k.subspan(h * k_head, k_head), epsilon));
  return counts;
}

// The FP8 kernel's indicator (FA2's fp8 recipe; flash_forward_fp8 with
// indicator=True), row by row, from the emulator's own values of one head
// (q, k, v its inputs' bit patterns): (a) as above on the row's raw scores,
// the tie test taking the kernel's scale (the descaled one), and (b) the keys
// whose e4m3 P-bar equals the row max's, e4m3(RN(1 * scale_s)), over the row's
// blocks (one split; at_final_max: those computed with the final running max).
// The emulator runs the whole head on one thread (an observer of every block).
inline std::vector<row_repeated_max> fp8_repeated_max_rows(const flash_kernel& kernel, const attention_shape& shape,
                                                           std::span<const std::uint8_t> q,
                                                           std::span<const std::uint8_t> k,
                                                           std::span<const std::uint8_t> v,
                                                           std::optional<float32> epsilon = std::nullopt) {
  if (!has_flash2_fp8_recipe(kernel))
    throw std::invalid_argument("fp8_repeated_max_rows: the indicator of FA2's fp8 recipe (bitexact_flash_fp8_sm90 "
                                "presets), which this kernel does not compute with");
  const float32 tie_epsilon = epsilon ? *epsilon : kernel.stabilize ? kernel.stabilize->epsilon : stabilized_max{}.epsilon;
  const float8_e4m3 max_p_bar = ptx::cvt_rn_satfinite_e4m3_f32(kernel.p_scale);
  const std::size_t rows = static_cast<std::size_t>(shape.query_rows), keys = static_cast<std::size_t>(shape.key_rows);
  std::vector<row_repeated_max> counts(rows);
  std::vector<float32> scores(rows * keys, detail::negative_infinity), running_max(rows, detail::negative_infinity);
  std::vector<bool> seen(rows, false);
  struct observer {
    const flash_kernel& kernel;
    float8_e4m3 max_p_bar;
    std::size_t keys;
    std::vector<row_repeated_max>& counts;
    std::vector<float32>& scores;
    std::vector<float32>& running_max;
    std::vector<bool>& seen;
    void on(const softmax_block_event& e) {
      const std::size_t row = static_cast<std::size_t>(e.row);
      int ones = 0;
      for (const float8_e4m3 p : e.p_e4m3) ones += p.bits == max_p_bar.bits;
      row_repeated_max& c = counts[row];
      c.p_bar_ones += ones;
      // A new running max rescales the earlier P-bar by alpha: they are no longer the max's.
      if (!seen[row] || !(to_host(e.running_max) == to_host(running_max[row]))) c.p_bar_ones_at_final_max = 0;
      c.p_bar_ones_at_final_max += ones;
      seen[row] = true, running_max[row] = e.running_max;
      const std::size_t first = static_cast<std::size_t>(e.block) * static_cast<std::size_t>(kernel.block_n);
      for (std::size_t j = 0; j < e.scores.size() && first + j < keys; ++j) scores[row * keys + first + j] = e.scores[j];
    }
  } watch{kernel, max_p_bar, keys, counts, scores, running_max, seen};
  std::vector<bfloat16> o(rows * static_cast<std::size_t>(shape.head_dim));
  std::vector<float32> lse(rows);
  flash_forward_head(kernel, shape, q, k, v, std::span<bfloat16>(o), std::span<float32>(lse), watch);
  for (std::size_t row = 0; row < rows; ++row) {
    const std::size_t visible = static_cast<std::size_t>(std::max(0, visible_keys(kernel, shape, static_cast<int>(row))));
    counts[row].max_repeated =
        detail::max_repeated(kernel, tie_epsilon, std::span<const float32>(scores).subspan(row * keys, visible));
  }
  return counts;
}

}  // namespace bitexact::attention
