// The synthetic heads of `bitexact bias statistics` (testing/synthetic_heads.hpp)
// as the kernel sees them: each query row's maximum is reached by exactly its
// t tied keys, at lambda, where the placement puts them; and the statistics'
// arithmetic (src/bias_statistics.hpp) on samples worked out by hand.
#include <doctest/doctest.h>

#include <bitexact/attention/flash_forward.hpp>
#include <bitexact/attention/kernels.hpp>
#include <bitexact/testing/synthetic_heads.hpp>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "bias_statistics.hpp"

using namespace bitexact;
using namespace bitexact::testing;

namespace {

// Every raw score the kernel computes, by row and key.
struct score_recorder {
  int block_n;
  std::map<std::pair<int, int>, float> scores;
  void on(const attention::softmax_block_event& e) {
    for (std::size_t j = 0; j < e.scores.size(); ++j)
      scores[{e.row, e.block * block_n + static_cast<int>(j)}] = to_host(e.scores[j]);
  }
};

struct tie_check {
  int rows_checked = 0, keys_at_max = 0;
};

// Runs the kernel's standard preset on a head and checks every row's scores against the construction.
tie_check check_ties(const head_spec& spec, std::uint64_t head_index) {
  const synthetic_head head = make_synthetic_head(spec, 11, head_index);
  const attention::attention_shape shape{1, 1, spec.rows, spec.keys, spec.head_dim, false};
  attention::attention_shape launch = shape;
  launch.heads = 256;
  const attention::flash_kernel kernel = attention::pytorch_sdpa_flash_sm90(launch);
  REQUIRE(kernel.block_n == spec.tile);
  std::vector<bfloat16> o(static_cast<std::size_t>(spec.rows * spec.head_dim));
  std::vector<float32> lse(static_cast<std::size_t>(spec.rows));
  score_recorder recorder{kernel.block_n, {}};
  attention::flash_forward_head(kernel, shape, head.q, head.k, head.v, o, lse, recorder);
  REQUIRE(recorder.scores.size() == static_cast<std::size_t>(spec.rows) * static_cast<std::size_t>(spec.keys));
  tie_check done;
  for (int i = 0; i < spec.rows; ++i) {
    const double lambda = head.row_max[static_cast<std::size_t>(i)];
    const int group = head.group_of_row[static_cast<std::size_t>(i)];
    std::set<int> at_max, blocks;
    for (int j = 0; j < spec.keys; ++j) {
      const double s = recorder.scores.at({i, j});
      if (s == lambda) at_max.insert(j), blocks.insert(j / spec.tile);
      else CHECK(s <= lambda - 6);  // every other score at least 6 below (unscaled)
    }
    std::set<int> expected;
    for (int k = 0; k < spec.ties; ++k) expected.insert(tied_key(spec, group, k));
    CHECK(at_max == expected);
    const int blocks_expected = spec.placement == tie_placement::one_block ? 1
                                : spec.placement == tie_placement::sink ? 1
                                                                        : std::min(spec.ties, spec.keys / spec.tile);
    CHECK(static_cast<int>(blocks.size()) == blocks_expected);
    if (spec.placement == tie_placement::sink) CHECK(*at_max.rbegin() == spec.ties - 1);
    ++done.rows_checked;
    done.keys_at_max += static_cast<int>(at_max.size());
  }
  return done;
}

}  // namespace

TEST_CASE("splitmix64 gives the reference implementation's first output for state 0") {
  // Vigna's splitmix64.c, seeded 0: the first next() is 0xE220A8397B1DCDAF.
  CHECK(splitmix64(0) == 0xE220A8397B1DCDAFull);
  CHECK(draw(1, 2, stream::v, 3) == splitmix64(splitmix64(1) ^ (std::uint64_t{2} << 40 | std::uint64_t{3} << 32 | 3)));
}

TEST_CASE("synthetic heads: each row's maximum is exactly its t tied keys, placed as asked, on the kernel's scores") {
  tie_check total;
  int heads = 0;
  for (const int d : {64, 128}) {
    const int tile = d == 64 ? 128 : 64;
    for (const tie_placement placement : every_tie_placement)
      for (const max_kind maximum : every_max_kind)
        for (const int ties : {1, 2, 7, 64}) {
          const head_spec spec{d, 4 * tile, 20, tile, maximum, placement, ties, -1};
          const tie_check c = check_ties(spec, static_cast<std::uint64_t>(heads++));
          total.rows_checked += c.rows_checked;
          total.keys_at_max += c.keys_at_max;
        }
  }
  CHECK(heads == 2 * 3 * 4 * 4);
  CHECK(total.rows_checked == heads * 20);
  CHECK(total.keys_at_max == 2 * 3 * 4 * 20 * (1 + 2 + 7 + 64));
}

TEST_CASE("synthetic heads: the maxima, groups and V lie in their documented ranges") {
  const head_spec spec{64, 1024, 48, 128, max_kind::negative_near_zero, tie_placement::one_block, 4, 0.5};
  const synthetic_head head = make_synthetic_head(spec, 1, 0);
  CHECK(head.groups == 16);
  for (const double lambda : head.row_max) CHECK((lambda <= -0x1p-11 && lambda > -0x1p-7));
  for (std::size_t i = 0; i < head.group_of_row.size(); ++i) CHECK(head.group_of_row[i] == static_cast<int>(i % 16));
  double v_sum = 0;
  for (const bfloat16 x : head.v) {
    CHECK((to_double(x) >= -0.5 && to_double(x) < 1.5));
    v_sum += to_double(x);
  }
  CHECK(std::abs(v_sum / static_cast<double>(head.v.size()) - 0.5) < 0.01);
  // across_blocks with more ties than blocks: ceil(t / blocks) keys of a group in each block, 128 / 8 groups.
  CHECK(group_count({64, 512, 8, 128, max_kind::positive, tie_placement::across_blocks, 32, 0}) == 16);
  CHECK(group_count({64, 512, 8, 128, max_kind::positive, tie_placement::across_blocks, 64, 0}) == 8);
  CHECK(group_count({64, 256, 8, 128, max_kind::positive, tie_placement::one_block, 64, 0}) == 4);
  CHECK_THROWS_AS(make_synthetic_head({64, 500, 8, 128, max_kind::positive, tie_placement::sink, 1, 0}, 1, 0),
                  std::invalid_argument);
  CHECK_THROWS_AS(make_synthetic_head({64, 512, 8, 128, max_kind::positive, tie_placement::sink, 1, 0.25}, 1, 0),
                  std::invalid_argument);
}

TEST_CASE("statistics: mean and clustered 95% interval of hand-made samples") {
  using bitexact::cli::statistics::clustered_sample;
  clustered_sample each_its_own;  // 1..5, five clusters: s = sqrt(2.5), t(0.975, 4) = 2.776
  for (int i = 1; i <= 5; ++i) each_its_own.add(i, static_cast<std::size_t>(i - 1));
  CHECK(each_its_own.mean() == 3);
  CHECK(each_its_own.clusters() == 5);
  CHECK(each_its_own.half_width() == doctest::Approx(2.776 * std::sqrt(2.5) / std::sqrt(5.0)).epsilon(1e-12));
  clustered_sample pairs;  // {1, 2} and {3, 4}: cluster means 1.5 and 3.5, s = sqrt(2), t(0.975, 1) = 12.706
  pairs.add(1, 0), pairs.add(3, 1), pairs.add(2, 0), pairs.add(4, 1);
  CHECK(pairs.mean() == 2.5);
  CHECK(pairs.count() == 4);
  CHECK(pairs.half_width() == doctest::Approx(12.706).epsilon(1e-12));
  clustered_sample one;
  one.add(7, 0), one.add(8, 0);
  CHECK(std::isnan(one.half_width()));
  // Student's t beyond the table: 2.040 at 31 and 1.980 at 120 degrees of freedom (printed tables).
  CHECK(bitexact::cli::statistics::student_t_975(31) == doctest::Approx(2.0395).epsilon(1e-4));
  CHECK(bitexact::cli::statistics::student_t_975(120) == doctest::Approx(1.9799).epsilon(1e-4));
}

TEST_CASE("statistics: exact attention output and the row errors, by hand") {
  // Scores 2 and 1 (q = e0, K[0][0] = 2, K[1][0] = 1) with scale ln 2: weights 1 and 1/2.
  const auto b = [](double x) { return from_double<bf16>(x).result; };
  const std::vector<bfloat16> q{b(1), b(0)}, k{b(2), b(0), b(1), b(0)}, v{b(3), b(-1), b(6), b(1)};
  const std::vector<double> o = bitexact::cli::statistics::exact_attention_row(q, k, v, std::log(2.0));
  CHECK(o[0] == doctest::Approx((3 + 6 * 0.5) / 1.5).epsilon(1e-15));
  CHECK(o[1] == doctest::Approx((-1 + 1 * 0.5) / 1.5).epsilon(1e-15));
  const std::vector<double> kernel{4.25, -0.5}, exact{4, -0.25};
  const std::vector<bfloat16> d_o{b(2), b(-4)};
  const auto e = bitexact::cli::statistics::errors_of(kernel, exact, d_o);
  CHECK(e.o == (0.25 - 0.25) / 2);
  CHECK(e.o_away == (0.25 + 0.25) / 2);  // +0.25 away from zero on 4, -0.25 on -0.25 is away too
  CHECK(e.delta == 2 * 0.25 + -4 * -0.25);
}
