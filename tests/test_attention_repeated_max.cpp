// The leading indicator (attention/repeated_max.hpp): the interval of
// exponent arguments whose bf16 P is 1 against every fp32 input around it
// (all 2^32 under the exhaustive label), hand-built scores whose counts follow
// from the kernel's block order, and row by row against the bf16 P of the
// emulator's own softmax_block_event on random and tie-heavy heads.
#include <doctest/doctest.h>

#include <bitexact/attention/repeated_max.hpp>
#include <bitexact/attention/kernels.hpp>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace bitexact;
using namespace bitexact::attention;

namespace {

constexpr std::uint16_t bf16_one = 0x3F80;

bool p_bar_is_one(float32 x) { return ptx::cvt_rn_bf16_f32(ptx::ex2_approx(x)).bits == bf16_one; }

// Inputs [first, last] in numeric order whose P-bar = 1 disagrees with the interval.
std::uint64_t disagreements(std::uint32_t first_key, std::uint32_t last_key) {
  const p_bar_one_range& ones = p_bar_one_arguments();
  std::uint64_t wrong = 0;
  for (std::uint64_t key = first_key; key <= last_key; ++key) {
    const float32 x = attention::detail::from_order_key(static_cast<std::uint32_t>(key));
    wrong += p_bar_is_one(x) != ones.contains(x);
  }
  return wrong;
}

// A tiny kernel for hand-built scores: blocks of 4 keys, one split, scale 1/8.
flash_kernel small_kernel(int block_m = 4) {
  flash_kernel kernel;
  kernel.block_m = block_m;
  kernel.block_n = 4;
  kernel.scale = from_host(0.125f);
  kernel.scale_log2 = softmax_scale_log2(kernel.scale);
  return kernel;
}

std::vector<float32> as_scores(const std::vector<std::vector<float>>& rows) {
  std::vector<float32> s;
  for (const auto& row : rows)
    for (const float x : row) s.push_back(from_host(x));
  return s;
}

// Per (row, split): how many bf16 P the emulator made exactly 1, and how many
// of them with the split's final running max.
struct p_bar_ones_recorder {
  struct split_ones {
    int all = 0, at_final_max = 0;
    std::optional<float> max;  // the running max of the split's last block so far
  };
  std::map<std::pair<int, int>, split_ones> ones;
  void on(const softmax_block_event& e) {
    split_ones& at = ones[{e.row, e.split}];
    int here = 0;
    for (const bfloat16 p : e.p_bf16) here += p.bits == bf16_one;
    if (!at.max || !(*at.max == to_host(e.running_max))) at.at_final_max = 0;
    at.max = to_host(e.running_max);
    at.all += here;
    at.at_final_max += here;
  }
};

enum class head_kind { random, ties };

// Q and K of one head: normal values, or small integers that tie often (every score an exact integer).
std::pair<std::vector<bfloat16>, std::vector<bfloat16>> head_operands_of(head_kind kind, int rows, int keys, int d,
                                                                         unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_int_distribution<int> small(-1, 1);
  const auto draw = [&](int n) {
    std::vector<bfloat16> x(static_cast<std::size_t>(n) * static_cast<std::size_t>(d));
    for (bfloat16& v : x)
      v = ptx::cvt_rn_bf16_f32(from_host(kind == head_kind::random ? normal(rng) : static_cast<float>(small(rng))));
    return x;
  };
  auto q = draw(rows);
  return {q, draw(keys)};
}

}  // namespace

TEST_SUITE("attention") {
  TEST_CASE("P-bar is 1 exactly on the interval p_bar_one_arguments finds, over every fp32 input near its ends") {
    const p_bar_one_range& ones = p_bar_one_arguments();
    // ex2(x) rounds to bf16 1 from 1 - 2^-9 (a tie, to even) to 1 + 2^-8: x from
    // log2(1 - 2^-9) = -0.002820 to log2(1 + 2^-8) = 0.005625, to MUFU's accuracy.
    CHECK(std::abs(static_cast<double>(to_host(ones.lowest)) - std::log2(1.0 - std::ldexp(1.0, -9))) < 1e-6);
    CHECK(std::abs(static_cast<double>(to_host(ones.highest)) - std::log2(1.0 + std::ldexp(1.0, -8))) < 1e-6);
    CHECK(p_bar_is_one(ones.lowest));
    CHECK(p_bar_is_one(ones.highest));
    // BITEXACT_P_BAR_SWEEP=all: every fp32 bit pattern but NaN (the exhaustive label); by default
    // 2^20 inputs on each side of both ends.
    const bool all = std::getenv("BITEXACT_P_BAR_SWEEP") != nullptr && std::string(std::getenv("BITEXACT_P_BAR_SWEEP")) == "all";
    std::uint64_t inputs = 0, wrong = 0;
    if (all) {
      const std::uint32_t first = attention::detail::order_key(float32::infinity(true)), last = attention::detail::order_key(float32::infinity());
      const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
      std::atomic<std::uint64_t> total_wrong{0};
      std::vector<std::thread> pool;
      const std::uint64_t span = (std::uint64_t{last} - first + 1 + threads - 1) / threads;
      for (unsigned t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          const std::uint64_t from = first + t * span, to = std::min<std::uint64_t>(last, from + span - 1);
          if (from <= to) total_wrong += disagreements(static_cast<std::uint32_t>(from), static_cast<std::uint32_t>(to));
        });
      for (std::thread& thread : pool) thread.join();
      inputs = std::uint64_t{last} - first + 1;
      wrong = total_wrong;
      CHECK(inputs == (std::uint64_t{1} << 32) - ((1u << 24) - 2));  // every bit pattern but the 2^24 - 2 NaNs
    } else {
      constexpr std::uint32_t half_window = 1u << 20;
      for (const float32 end : {ones.lowest, ones.highest}) {
        const std::uint32_t key = attention::detail::order_key(end);
        wrong += disagreements(key - half_window, key + half_window);
        inputs += 2 * std::uint64_t{half_window} + 1;
      }
      CHECK(inputs == 2 * ((1u << 21) + 1));
    }
    CHECK(wrong == 0);
    MESSAGE("P-bar = 1 against the interval [" << to_host(ones.lowest) << ", " << to_host(ones.highest) << "]: "
                                               << inputs << " fp32 inputs, " << wrong << " disagree");
  }

  TEST_CASE("hand-built scores: ties in one block, across blocks, negative maxima, NaN, infinities, a near tie") {
    // Blocks of 4 keys: block 1 (keys 4-7) runs first, then block 0 with the running max.
    // With scale 1/8 (scale_log2 = 0.18034), P-bar = 1 needs the score within ~0.0156 of the max,
    // the tie test within 0.008.
    const flash_kernel kernel = small_kernel();
    const std::vector<float32> s = as_scores({
        {1, 2, 3, 3, -1, -2, -3, -4},           // a tie in block 0; block 1's max -1 had P = 1 first
        {5, 0, 0, 0, 0, 5, 1, 1},               // the max in both blocks
        {-7, -7, -9, -10, -20, -30, -40, -50},  // a negative max repeated
        {0, 1, 2, 3, 9, 4, 4, 4},               // a single max in the first block run: one P = 1
        {3.0f, 2.988f, 0, 0, 0, 1, 2, 0.5f},    // 0.012 apart: no tie (0.0015 > 1e-3), but P-bar = 1 at both
        {NAN, NAN, 2, 2, NAN, NAN, NAN, NAN},   // an all-NaN block first (its max is NaN), then a tie
        {INFINITY, INFINITY, 0, 0, 0, 0, 0, 0}, // inf - inf is NaN: no tie; block 1's four zeros had P = 1
        {0, 6, 1, 2, 3, 4, 5, 6.0f},            // a max repeated across blocks, met first in block 1
    });
    const attention_shape shape{1, 1, 8, 8, 64, false};
    const std::vector<row_repeated_max> rows = repeated_max_rows(kernel, shape, s);
    REQUIRE(rows.size() == 8);
    const bool expected_tie[] = {true, true, true, false, false, true, false, true};
    const int expected_ones[] = {3, 2, 3, 1, 3, 2, 4, 2};
    const int expected_at_final_max[] = {2, 2, 2, 1, 2, 2, 0, 2};
    for (std::size_t r = 0; r < rows.size(); ++r) {
      CAPTURE(r);
      CHECK(rows[r].max_repeated == expected_tie[r]);
      CHECK(rows[r].p_bar_ones == expected_ones[r]);
      CHECK(rows[r].p_bar_ones_at_final_max == expected_at_final_max[r]);
    }
    const repeated_max_counts counts = count_repeated_maxima(kernel, shape, s);
    CHECK(counts.rows == 8);
    CHECK(counts.rows_with_max_repeated == 5);
    CHECK(counts.rows_with_p_bar_one_twice == 7);
    CHECK(counts.rows_with_p_bar_one_twice_at_final_max == 6);
    CHECK(counts.most_p_bar_ones_in_a_row == 4);
    // A wider epsilon makes row 4 a tie (0.012 / 8 = 0.0015 <= 0.01).
    CHECK(repeated_max_rows(kernel, shape, s, from_host(0.01f))[4].max_repeated);
  }

  TEST_CASE("hand-built causal scores: masked keys take no part, a row that sees no key counts nowhere") {
    const flash_kernel kernel = small_kernel();
    // 6 rows, 8 keys, causal: row r sees keys 0 .. r + 2. The 9s lie past every row's diagonal but the last's.
    const std::vector<float32> s = as_scores({
        {1, 1, 0, 9, 9, 9, 9, 9},  // sees 1 1 0: a tie
        {0, 1, 2, 5, 5, 9, 9, 9},  // sees 0 1 2 5: no tie (the second 5 is masked)
        {0, 0, 7, 1, 7, 9, 9, 9},  // sees ... 7 1 7: a tie across blocks
        {3, 0, 0, 0, 0, 0, 9, 9},  // sees 3 0 0 0 0 0: block 1 first, its two 0s had P = 1 before the 3
        {0, 0, 0, 0, 0, 0, 0, 9},  // seven 0s visible, all P = 1
        {0, 0, 0, 0, 0, 0, 0, 9},  // all visible: the 9 alone, P = 1 once
    });
    const attention_shape causal{1, 1, 6, 8, 64, true};
    const std::vector<row_repeated_max> rows = repeated_max_rows(kernel, causal, s);
    const bool expected_tie[] = {true, false, true, false, true, false};
    const int expected_ones[] = {2, 1, 2, 3, 7, 1};
    const int expected_at_final_max[] = {2, 1, 2, 1, 7, 1};
    for (std::size_t r = 0; r < rows.size(); ++r) {
      CAPTURE(r);
      CHECK(rows[r].max_repeated == expected_tie[r]);
      CHECK(rows[r].p_bar_ones == expected_ones[r]);
      CHECK(rows[r].p_bar_ones_at_final_max == expected_at_final_max[r]);
    }
    // 6 rows, 4 keys: rows 0 and 1 see none (row r sees keys 0 .. r - 2).
    const std::vector<float32> few = as_scores({{2, 2, 2, 2}, {2, 2, 2, 2}, {2, 2, 2, 2}, {2, 1, 1, 1}, {2, 2, 0, 0}, {2, 2, 2, 2}});
    const repeated_max_counts counts = count_repeated_maxima(kernel, attention_shape{1, 1, 6, 4, 64, true}, few);
    const std::vector<row_repeated_max> few_rows = repeated_max_rows(kernel, attention_shape{1, 1, 6, 4, 64, true}, few);
    CHECK(few_rows[0].p_bar_ones == 0);
    CHECK(few_rows[1].p_bar_ones == 0);
    CHECK(!few_rows[0].max_repeated);
    CHECK(counts.rows == 6);
    CHECK(counts.rows_with_max_repeated == 2);  // rows 4 (sees 2 2 0) and 5 (2 2 2 2)
    CHECK(counts.rows_with_p_bar_one_twice == 2);
  }

  TEST_CASE("bad input is refused") {
    const flash_kernel kernel = small_kernel();
    const std::vector<float32> s(7, float32::zero());
    CHECK_THROWS_AS(count_repeated_maxima(kernel, attention_shape{1, 1, 2, 4, 64, false}, s), std::invalid_argument);
    CHECK_THROWS_AS(count_repeated_maxima_per_head(kernel, attention_shape{1, 0, 2, 4, 64, false}, s), std::invalid_argument);
    flash_kernel no_blocks = kernel;
    no_blocks.block_n = 0;
    CHECK_THROWS_AS(count_repeated_maxima(no_blocks, attention_shape{1, 1, 1, 7, 64, false}, s), std::invalid_argument);
  }

  TEST_CASE("row by row, the indicator's P-bar = 1 counts are those of the emulator's own bf16 P") {
    struct head_case {
      head_kind kind;
      int head_dim;
      bool causal;
      bool split;  // the split-KV kernel (one head alone) or the single-pass one (many heads)
      int rows, keys;
    };
    const head_case cases[] = {
        {head_kind::random, 64, false, false, 144, 300},  {head_kind::ties, 64, true, false, 144, 300},
        {head_kind::random, 128, true, false, 144, 200},  {head_kind::ties, 128, false, false, 144, 200},
        {head_kind::random, 64, true, true, 100, 600},    {head_kind::ties, 64, false, true, 100, 600},
        {head_kind::ties, 128, true, true, 100, 400},     {head_kind::random, 128, false, true, 100, 400},
    };
    int rows_compared = 0, rows_with_twice = 0, rows_with_twice_at_final = 0, rows_tied = 0, splits_seen = 0;
    unsigned seed = 11;
    for (const head_case& c : cases) {
      CAPTURE(c.head_dim);
      CAPTURE(c.causal);
      CAPTURE(c.split);
      const attention_shape shape{1, 1, c.rows, c.keys, c.head_dim, c.causal};
      // The heuristic splits one head of these lengths; 128 heads fill the GPU and run in one pass.
      const attention_shape call{1, c.split ? 1 : 128, c.rows, c.keys, c.head_dim, c.causal};
      flash_kernel kernel = pytorch_sdpa_flash_sm90(call);
      REQUIRE((kernel.splits > 1) == c.split);
      splits_seen = std::max(splits_seen, kernel.splits);
      for (const bool stabilized : {false, true}) {
        if (stabilized) kernel.stabilize = stabilized_max{};
        const auto [q, k] = head_operands_of(c.kind, c.rows, c.keys, c.head_dim, seed++);
        const std::vector<bfloat16> v(k.size(), bfloat16::zero());
        std::vector<bfloat16> o(q.size());
        std::vector<float32> lse(static_cast<std::size_t>(c.rows));
        p_bar_ones_recorder emulator;
        flash_forward_head(kernel, shape, q, k, v, o, lse, emulator);
        const std::vector<float32> scores = head_scores(kernel, shape, q, k);
        const std::vector<row_repeated_max> rows = repeated_max_rows(kernel, shape, scores);
        for (int row = 0; row < c.rows; ++row) {
          int most = 0, most_at_final = 0;
          for (int split = 0; split < kernel.splits; ++split) {
            const auto found = emulator.ones.find({row, split});
            if (found == emulator.ones.end()) continue;
            most = std::max(most, found->second.all);
            most_at_final = std::max(most_at_final, found->second.at_final_max);
          }
          const row_repeated_max& r = rows[static_cast<std::size_t>(row)];
          CHECK_MESSAGE(r.p_bar_ones == most, "row " << row);
          CHECK_MESSAGE(r.p_bar_ones_at_final_max == most_at_final, "row " << row);
          ++rows_compared;
          rows_with_twice += most >= 2;
          rows_with_twice_at_final += most_at_final >= 2;
          rows_tied += r.max_repeated;
          if (c.kind == head_kind::ties) {
            // Integer scores: a tie is an equal max (a difference of 1 is 1/8 or more after the scale).
            const int visible = attention::visible_keys(kernel, shape, row);
            const auto row_scores = std::span<const float32>(scores).subspan(static_cast<std::size_t>(row * c.keys),
                                                                             static_cast<std::size_t>(std::max(0, visible)));
            float largest = -INFINITY;
            int at_largest = 0;
            for (const float32 x : row_scores) largest = std::max(largest, to_host(x));
            for (const float32 x : row_scores) at_largest += to_host(x) == largest;
            CHECK_MESSAGE(r.max_repeated == (at_largest >= 2), "row " << row);
          }
        }
      }
    }
    CHECK(rows_compared == 2 * (4 * 144 + 4 * 100));
    CHECK(splits_seen > 1);
    CHECK(rows_with_twice_at_final > 0);
    CHECK(rows_with_twice > rows_with_twice_at_final);
    MESSAGE(rows_compared << " rows compared with the emulator's bf16 P: P = 1 twice in " << rows_with_twice
                          << " (at the final max: " << rows_with_twice_at_final << "), max repeated in " << rows_tied);
  }
}
