// The cumulative error of one O-bar element along the keys
// (attention/cumulative_error.hpp): exactly 0 where nothing rounds, the
// P-bar = 1 keys where the scores put them, and the paper semantics' values
// recomputed with host float and double arithmetic.
#include <doctest/doctest.h>

#include <bitexact/attention/cumulative_error.hpp>
#include <bitexact/attention/kernels.hpp>
#include <cmath>
#include <set>
#include <vector>

using namespace bitexact;
using namespace bitexact::attention;

namespace {

constexpr int head_dim = 64;

// One query (1, 0, ..., 0): the score of key j is K[j][0] exactly, in both semantics.
struct one_row {
  attention_shape shape;
  std::vector<bfloat16> q, k, v;
};

one_row make_row(const std::vector<double>& scores, const std::vector<double>& v_column) {
  one_row r{{1, 1, 1, static_cast<int>(scores.size()), head_dim, false}, {}, {}, {}};
  r.q.assign(head_dim, bfloat16::zero());
  r.q[0] = from_double<bf16>(1.0).result;
  r.k.assign(scores.size() * head_dim, bfloat16::zero());
  r.v.assign(scores.size() * head_dim, bfloat16::zero());
  for (std::size_t j = 0; j < scores.size(); ++j) {
    r.k[j * head_dim] = from_double<bf16>(scores[j]).result;
    r.v[j * head_dim] = from_double<bf16>(v_column[j]).result;
  }
  return r;
}

flash_kernel single_kernel(const attention_shape& shape, bool stabilized) {
  attention_shape launch = shape;
  launch.heads = 256;  // enough row blocks for PyTorch's heuristic to take the single kernel
  return stabilized ? pytorch_sdpa_flash_sm90_stabilized(launch) : pytorch_sdpa_flash_sm90(launch);
}

std::set<int> keys_with_p_bar_one(const cumulative_error_curve& curve) {
  std::set<int> keys;
  for (const accumulation_event& e : curve.events)
    if (e.p_bar_is_one()) keys.insert(e.key);
  return keys;
}

int held_events(const cumulative_error_curve& curve) {
  int n = 0;
  for (const accumulation_event& e : curve.events) n += e.value_held;
  return n;
}

}  // namespace

TEST_CASE("cumulative error: every score tied and V = -1 round nowhere, so the error is exactly 0 at every event") {
  // 256 keys, P-bar = exp(0) = 1 everywhere: every partial sum is an integer from -1 to -256, exact in
  // fp32, in the tensor core's window and in bf16 (8 significand bits hold 256).
  const one_row r = make_row(std::vector<double>(256, 3.0), std::vector<double>(256, -1.0));
  const cumulative_error_curve paper = paper_cumulative_error(paper_reference(r.shape), r.shape, r.q, r.k, r.v, 0, 0);
  const cumulative_error_curve kernel = kernel_cumulative_error(single_kernel(r.shape, false), r.shape, r.q, r.k, r.v, 0, 0);
  for (const cumulative_error_curve* curve : {&paper, &kernel}) {
    CHECK(keys_with_p_bar_one(*curve).size() == 256);
    for (const accumulation_event& e : curve->events)
      if (e.value_held) REQUIRE(e.error() == 0);
    CHECK(curve->final_error() == 0);
    CHECK(curve->events.back().exact == -256);
  }
  // The paper: 256 additions and, in its one 512-key block, the bf16 store and the O update;
  // the kernel: two 128-key blocks, 16 fused steps and one rescale.
  CHECK(held_events(paper) == 258);
  CHECK(held_events(kernel) == 17);
}

TEST_CASE("cumulative error: P-bar = 1 at the tied keys only, and the stabilized passes remove them") {
  std::vector<double> scores(300), v(300);
  for (int j = 0; j < 300; ++j) scores[static_cast<std::size_t>(j)] = 2.0 - 0.25 * (1 + j % 13), v[static_cast<std::size_t>(j)] = -1.5 - 0.0078125 * (j % 11);
  const std::set<int> tied{3, 17, 40, 200, 290};
  for (const int key : tied) scores[static_cast<std::size_t>(key)] = 2.0;
  const one_row r = make_row(scores, v);
  CHECK(keys_with_p_bar_one(paper_cumulative_error(paper_reference(r.shape), r.shape, r.q, r.k, r.v, 0, 0)) == tied);
  CHECK(keys_with_p_bar_one(kernel_cumulative_error(single_kernel(r.shape, false), r.shape, r.q, r.k, r.v, 0, 0)) == tied);
  // The paper's one block holds all five ties: its max becomes 2 * 2 (scaled: 0.5), so no P-bar is 1.
  CHECK(keys_with_p_bar_one(paper_cumulative_error(paper_reference_stabilized(r.shape), r.shape, r.q, r.k, r.v, 0, 0)).empty());
  // The kernel's 128-key blocks, last (keys 256..299, tie 290 alone) first: the rule needs two ties in a
  // block, so key 290 keeps P-bar = 1; block 1 (key 200 alone) as well; block 0 holds 3, 17 and 40 and
  // raises the max to 4, after which no key is 1 -- but 290 and 200 were already added.
  CHECK(keys_with_p_bar_one(kernel_cumulative_error(single_kernel(r.shape, true), r.shape, r.q, r.k, r.v, 0, 0)) ==
        std::set<int>{200, 290});
}

TEST_CASE("cumulative error: the paper semantics' values recomputed in host float and double") {
  // 96 keys, scores within 31 of the max (scaled: within 4, so P-bar >= 2^-6) and V of 8-bit significands:
  // products reach down to 2^-19 and sums up to 2^9, so the partial sums need more than fp32's 24 bits
  // (the additions round) but fit a double's 53 (the exact sum is a double); fp32 addition is float +.
  std::vector<double> scores(96), v(96);
  for (int j = 0; j < 96; ++j) {
    scores[static_cast<std::size_t>(j)] = 5.0 - 0.5 * ((j * 37) % 61);
    v[static_cast<std::size_t>(j)] = -2.0 - 0.0078125 * ((j * 53) % 127) + (j % 7 == 0 ? 1.5 : 0.0);
  }
  scores[10] = scores[60] = 5.0 + 0.5;
  const one_row r = make_row(scores, v);
  const cumulative_error_curve curve = paper_cumulative_error(paper_reference(r.shape), r.shape, r.q, r.k, r.v, 0, 0);
  float running = 0.0f;
  double exact = 0.0;
  int keys = 0, rounded = 0;
  for (const accumulation_event& e : curve.events) {
    if (e.what != accumulation_event::kind::key) continue;
    const double p_bar = to_double(e.p_bar), value = to_double(r.v[static_cast<std::size_t>(e.key) * head_dim]);
    CHECK(to_double(e.v) == value);
    running += static_cast<float>(p_bar * value);  // the product of two bf16 values is exact in float
    exact += p_bar * value;
    REQUIRE(e.value.convert_to<double>() == static_cast<double>(running));
    REQUIRE(e.exact.convert_to<double>() == exact);
    REQUIRE(e.error().convert_to<double>() == static_cast<double>(running) - exact);
    rounded += static_cast<double>(running) != exact;
    ++keys;
  }
  CHECK(keys == 96);
  CHECK(rounded > 0);  // the case does round: a test that could not fail would prove nothing
  CHECK(keys_with_p_bar_one(curve) == std::set<int>{10, 60});
  // After the block: the bf16 store of the sum and the O update (O was 0: the update adds it exactly).
  const accumulation_event& last = curve.events.back();
  CHECK(last.what == accumulation_event::kind::output_update);
  CHECK(last.value.convert_to<double>() == to_double(convert<bf16>(from_host(running)).result));
}

TEST_CASE("cumulative error: each fused step's jump is that step's own rounding error, and the kernel's value is its O") {
  std::vector<double> scores(256), v(256);
  for (int j = 0; j < 256; ++j) {
    scores[static_cast<std::size_t>(j)] = 1.0 - 0.5 * ((j * 29) % 41);
    v[static_cast<std::size_t>(j)] = -2.25 + 0.015625 * ((j * 11) % 37);
  }
  scores[5] = scores[133] = scores[250] = 1.0;
  const one_row r = make_row(scores, v);
  const flash_kernel kernel = single_kernel(r.shape, false);
  const cumulative_error_curve curve = kernel_cumulative_error(kernel, r.shape, r.q, r.k, r.v, 0, 0);
  const row_record record = record_row(kernel, r.shape, r.q, r.k, r.v, 0);
  exact_rational previous = 0, exact = 0;
  int steps = 0, nonzero = 0;
  for (const accumulation_event& e : curve.events) {
    if (e.what == accumulation_event::kind::key)
      exact += *exact_value_of(bf16, e.p_bar.bits) * *exact_value_of(bf16, e.v.bits);
    if (!e.value_held) continue;
    if (e.what == accumulation_event::kind::key) {
      REQUIRE(e.key % 16 == 15);  // a fused step of 16 keys, its value on its last key
      REQUIRE(e.exact == exact);
      REQUIRE(e.error() - previous == *e.operation->error);
      nonzero += *e.operation->error != 0;
      ++steps;
    }
    previous = e.error();
  }
  CHECK(steps == 16);
  CHECK(nonzero > 0);
  // The last value held is the unnormalised O the emulator kept after its last block (block 0).
  CHECK(curve.events.back().value == *exact_value_of(fp32, record.blocks.back().o[0].bits));
}

TEST_CASE("cumulative error: bad requests are refused") {
  const one_row r = make_row(std::vector<double>(32, 0.0), std::vector<double>(32, 1.0));
  flash_kernel split = single_kernel(r.shape, false);
  split.splits = 2;
  CHECK_THROWS_AS(kernel_cumulative_error(split, r.shape, r.q, r.k, r.v, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(paper_cumulative_error(paper_reference(r.shape), r.shape, r.q, r.k, r.v, 0, head_dim), std::invalid_argument);
  CHECK_THROWS_AS(paper_cumulative_error(paper_reference(r.shape), r.shape, r.q, r.k, r.v, 1, 0), std::invalid_argument);
}
