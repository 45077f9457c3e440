// The rounding-site row model (attention/rounding_sites.hpp): with every site
// `kernel` it is the emulator, bit for bit; with every site `exact` it is
// softmax(S * scale) V computed another way; single sites give the errors
// derived by hand; its tensor-core rule on exact terms is the hardware
// model's on the model's own formats; unmodelled kernels are refused.
#include <doctest/doctest.h>

#include <bitexact/attention/rounding_sites.hpp>
#include <bitexact/attention/kernels.hpp>
#include <cstdint>
#include <random>
#include <vector>

using namespace bitexact;
using namespace bitexact::attention;

namespace {

struct head {
  attention_shape shape;
  std::vector<bfloat16> q, k, v;
};

// Irwin-Hall(4) draws (about normal, sd 0.58) times spread, rounded to bf16.
bfloat16 draw(std::mt19937_64& generator, double mean, double spread) {
  double sum = 0;
  for (int i = 0; i < 4; ++i) sum += static_cast<double>(generator() >> 11) * 0x1p-53;
  return from_double<bf16>(mean + spread * (sum - 2)).result;
}

head random_head(int query_rows, int key_rows, int head_dim, bool causal, std::uint64_t seed) {
  head h{{1, 1, query_rows, key_rows, head_dim, causal}, {}, {}, {}};
  std::mt19937_64 generator(seed);
  for (int i = 0; i < query_rows * head_dim; ++i) h.q.push_back(draw(generator, 0, 2));
  for (int i = 0; i < key_rows * head_dim; ++i) h.k.push_back(draw(generator, 0, 2));
  for (int i = 0; i < key_rows * head_dim; ++i) h.v.push_back(draw(generator, -0.5, 2));
  return h;
}

// Every query (1, 0, ..., 0): the score of key j is K[j][0]; every fifth key ties at the max 8.
head tie_head(int query_rows, int key_rows, int head_dim, std::uint64_t seed) {
  head h{{1, 1, query_rows, key_rows, head_dim, false}, {}, {}, {}};
  std::mt19937_64 generator(seed);
  h.q.assign(static_cast<std::size_t>(query_rows * head_dim), bfloat16::zero());
  for (int r = 0; r < query_rows; ++r) h.q[static_cast<std::size_t>(r * head_dim)] = from_double<bf16>(1.0).result;
  h.k.assign(static_cast<std::size_t>(key_rows * head_dim), bfloat16::zero());
  for (int j = 0; j < key_rows; ++j)
    h.k[static_cast<std::size_t>(j * head_dim)] = j % 5 == 0 ? from_double<bf16>(8.0).result : draw(generator, -12, 16);
  for (int i = 0; i < key_rows * head_dim; ++i) h.v.push_back(draw(generator, -2, 1));
  return h;
}

// The single kernel, as PyTorch launches it for 256 heads.
flash_kernel single_kernel(const attention_shape& shape, bool stabilized = false) {
  attention_shape launch = shape;
  launch.heads = 256;
  return stabilized ? pytorch_sdpa_flash_sm90_stabilized(launch) : pytorch_sdpa_flash_sm90(launch);
}

struct comparison {
  int rows = 0, elements = 0, mismatches = 0;
};

// The emulator's row sums l, from its row_end_events.
struct row_sums {
  std::vector<float32> sum;
  void on(const row_end_event& e) { sum[static_cast<std::size_t>(e.row)] = e.sum; }
};

// Rows of the head (all when none are named) through the model with every
// site kernel, against the emulator's O, l and L bits.
void compare_with_emulator(const flash_kernel& kernel, const head& h, comparison& count, std::vector<int> rows = {}) {
  const std::size_t d = static_cast<std::size_t>(h.shape.head_dim);
  std::vector<bfloat16> o(h.q.size());
  std::vector<float32> lse(static_cast<std::size_t>(h.shape.query_rows));
  row_sums sums{std::vector<float32>(lse.size())};
  flash_forward_head(kernel, h.shape, h.q, h.k, h.v, o, lse, sums);
  if (rows.empty())
    for (int r = 0; r < h.shape.query_rows; ++r) rows.push_back(r);
  for (const int r : rows) {
    const rounding_site_result result = rounding_site_row(kernel, h.shape, h.q, h.k, h.v, r).run(exact_sites{});
    for (std::size_t c = 0; c < d; ++c) {
      const auto held = attention::detail::held_by<bf16>(result.o[c]);
      count.mismatches += !held || held->bits != o[static_cast<std::size_t>(r) * d + c].bits;
      ++count.elements;
    }
    const auto sum_held = attention::detail::held_by<fp32>(result.sum);
    count.mismatches += !sum_held || sum_held->bits != sums.sum[static_cast<std::size_t>(r)].bits;
    const auto lse_held = attention::detail::held_by<fp32>(result.lse);
    count.mismatches += !lse_held || lse_held->bits != lse[static_cast<std::size_t>(r)].bits;
    ++count.rows;
  }
}

}  // namespace

TEST_CASE("rounding sites: every site kernel gives the emulator's O, l and L bits (random and tie rows, d 64 and 128)") {
  comparison count;
  std::uint64_t seed = 11;
  for (const int d : {64, 128})
    for (const bool causal : {false, true}) {
      // 300 keys: a ragged last block; causal with more keys than rows, and with fewer (fully masked blocks).
      const head h = random_head(causal ? 6 : 4, causal && d == 128 ? 5 : 300, d, causal, seed++);
      compare_with_emulator(single_kernel(h.shape), h, count);
    }
  // Rows of the second thread block of rows (block_m 128) see more key blocks and other masking steps;
  // 1500 keys give rows whose max rises in many blocks (alpha != 1).
  const head causal_long = random_head(140, 260, 64, true, seed++);
  compare_with_emulator(single_kernel(causal_long.shape), causal_long, count, {0, 127, 128, 139});
  const head long_rows = random_head(4, 1500, 128, false, seed++);
  compare_with_emulator(single_kernel(long_rows.shape), long_rows, count);
  for (const int d : {64, 128}) {
    const head ties = tie_head(3, 384, d, seed++);
    compare_with_emulator(single_kernel(ties.shape), ties, count);
    compare_with_emulator(single_kernel(ties.shape, true), ties, count);
  }
  CHECK(count.rows == 4 + 6 + 4 + 6 + 4 + 4 + 4 * 3);
  CHECK(count.elements == 64 * (4 + 6 + 4) + 128 * (4 + 6 + 4) + 2 * 3 * (64 + 128));
  CHECK(count.mismatches == 0);
}

TEST_CASE("rounding sites: every site exact gives softmax(S * scale) V, computed directly, to 2^-110") {
  int rows = 0, elements = 0;
  std::uint64_t seed = 31;
  for (const int d : {64, 128})
    for (const bool causal : {false, true}) {
      const head h = random_head(3, 200, d, causal, seed++);
      const flash_kernel kernel = single_kernel(h.shape);
      const std::size_t ud = static_cast<std::size_t>(d);
      const working_real scale(to_double(kernel.scale));
      for (int r = 0; r < h.shape.query_rows; ++r) {
        const rounding_site_result result = rounding_site_row(kernel, h.shape, h.q, h.k, h.v, r).run(exact_sites{}.set());
        // The keys the row sees, their exact scores, and one weighted sum over them, no blocks and no rescaling.
        const int seen = causal ? r + 1 + h.shape.key_rows - h.shape.query_rows : h.shape.key_rows;
        std::vector<working_real> scores(static_cast<std::size_t>(seen));
        working_real max = -1e30;
        for (std::size_t j = 0; j < scores.size(); ++j) {
          for (std::size_t c = 0; c < ud; ++c)
            scores[j] += working_real(to_double(h.q[static_cast<std::size_t>(r) * ud + c])) * working_real(to_double(h.k[j * ud + c]));
          max = std::max(max, scores[j]);
        }
        working_real sum = 0, magnitude = 0;
        std::vector<working_real> o(ud), weights(scores.size());
        for (std::size_t j = 0; j < scores.size(); ++j) {
          weights[j] = boost::multiprecision::exp((scores[j] - max) * scale);
          sum += weights[j];
        }
        for (std::size_t c = 0; c < ud; ++c) {
          for (std::size_t j = 0; j < scores.size(); ++j) {
            o[c] += weights[j] * working_real(to_double(h.v[j * ud + c]));
            magnitude += boost::multiprecision::abs(weights[j] * working_real(to_double(h.v[j * ud + c])));
          }
          o[c] /= sum;
        }
        magnitude /= sum * static_cast<double>(ud);
        for (std::size_t c = 0; c < ud; ++c, ++elements)
          REQUIRE(boost::multiprecision::abs(result.o[c] - o[c]) <= boost::multiprecision::ldexp(magnitude, -110));
        CHECK(boost::multiprecision::abs(result.lse - (max * scale + boost::multiprecision::log(sum))) <=
              boost::multiprecision::ldexp(working_real(1), -110));
        ++rows;
      }
    }
  CHECK(rows == 12);
  CHECK(elements == 3 * 2 * (64 + 128));
}

namespace {

// One query (1, 0, ..., 0) and every key's score 3 (so every P is exactly 1
// in every configuration), V's rows given by a function of (key, column).
template <class V>
head equal_scores(int key_rows, V v_of) {
  head h{{1, 1, 1, key_rows, 64, false}, {}, {}, {}};
  h.q.assign(64, bfloat16::zero());
  h.q[0] = from_double<bf16>(1.0).result;
  h.k.assign(static_cast<std::size_t>(key_rows) * 64, bfloat16::zero());
  for (int j = 0; j < key_rows; ++j) {
    h.k[static_cast<std::size_t>(j) * 64] = from_double<bf16>(3.0).result;
    for (int c = 0; c < 64; ++c) h.v.push_back(from_double<bf16>(v_of(j, c)).result);
  }
  return h;
}

// Every site's contribution and lone error zero, except `site`'s.
void check_only_site_errs(const row_attribution& a, rounding_site site) {
  for (const rounding_site other : every_rounding_site) {
    if (other == site) continue;
    CAPTURE(site_name(other));
    CHECK(a.contribution(other).signed_sum == 0);
    CHECK(a.alone_error(other).signed_sum == 0);
    CHECK(a.alone_error(other).away_from_zero == 0);
  }
}

}  // namespace

TEST_CASE("rounding sites: only the output's bf16 rounding errs when O = 257/256 and everything before is exact") {
  // 256 keys, P = 1, V alternately 1 and 1 + 2^-7: the unnormalised O is 257 (exact in every tensor-core
  // window), l = 256, O = 1 + 2^-8 exactly in fp32; bf16 holds 8 bits, so the tie goes to even, 1.
  const head h = equal_scores(256, [](int j, int) { return j % 2 == 0 ? 1.0 : 1.0 + 0x1p-7; });
  const rounding_site_row row(single_kernel(h.shape), h.shape, h.q, h.k, h.v, 0);
  const row_attributions both = attribute_row(row);
  const row_attribution& a = both.bf16_output;
  CHECK(a.kernel == row.run(exact_sites{}).o);  // the converted fp32 O is the model's bf16 O
  CHECK(both.fp32_output.total().signed_sum == 0);
  CHECK(a.exact[5] == 1 + working_real(0x1p-8));
  CHECK(a.kernel[5] == 1);
  CHECK(a.total().signed_sum == -64 * working_real(0x1p-8));
  CHECK(a.total().away_from_zero == -64 * working_real(0x1p-8));  // toward zero
  CHECK(a.contribution(rounding_site::output_bf16).signed_sum == a.total().signed_sum);
  CHECK(a.alone_error(rounding_site::output_bf16).signed_sum == a.total().signed_sum);
  CHECK(a.residual().signed_sum == 0);
  check_only_site_errs(a, rounding_site::output_bf16);
}

TEST_CASE("rounding sites: the normalization alone errs by 4 (RN(1/3) - 1/3) when O = (1 + 1 + 2) / 3") {
  // Three keys, P = 1, V rows 1, 1, 2: l = 3, O = 4/3. RN(1/3) = 11184811 * 2^-25, so
  // 4 RN(1/3) - 4/3 = 4 (3 * 11184811 - 2^25) / (3 * 2^25) = 2^-23 / 3, and 4 RN(1/3) is an fp32 value.
  const head h = equal_scores(3, [](int j, int) { return j == 2 ? 2.0 : 1.0; });
  const row_attribution a = attribute_row(rounding_site_row(single_kernel(h.shape), h.shape, h.q, h.k, h.v, 0)).bf16_output;
  const working_real expected = 64 * working_real(0x1p-23) / 3;
  CHECK(boost::multiprecision::abs(a.alone_error(rounding_site::normalization).signed_sum - expected) <
        boost::multiprecision::ldexp(expected, -100));
  // With the output rounded to bf16 that error is gone: 4/3 and 4 RN(1/3) round to the same bf16.
  CHECK(a.contribution(rounding_site::normalization).signed_sum == 0);
  for (const rounding_site other : every_rounding_site)
    if (other != rounding_site::normalization && other != rounding_site::output_bf16)
      CHECK(a.alone_error(other).signed_sum == 0);
}

TEST_CASE("rounding sites: the P V tensor core alone truncates 2^-30 beside 1 toward zero, on either sign") {
  // Keys 0 and 1 with P = 1, V[0][c] = +-1, V[1][c] = +-2^-30 (the sign alternating with the column): the
  // step's window ends at 2^-25, so the second term is cut to 0 and O = +-1/2 instead of +-(1 + 2^-30)/2.
  const head h = equal_scores(2, [](int j, int c) { return (c % 2 == 0 ? 1.0 : -1.0) * (j == 0 ? 1.0 : 0x1p-30); });
  const row_attribution a = attribute_row(rounding_site_row(single_kernel(h.shape), h.shape, h.q, h.k, h.v, 0)).bf16_output;
  const error_sums pv = a.alone_error(rounding_site::pv_tensor_core);
  CHECK(pv.signed_sum == 0);                                  // 32 columns +2^-31, 32 columns -2^-31
  CHECK(pv.away_from_zero == -64 * working_real(0x1p-31));   // every one toward zero
  for (const rounding_site other : every_rounding_site)
    if (other != rounding_site::pv_tensor_core) CHECK(a.alone_error(other).signed_sum == 0);
}

TEST_CASE("rounding sites: the tensor-core rule on exact terms is fused_multiply_add_step on bf16 and fp32 operands") {
  std::mt19937_64 generator(7);
  const auto finite_bf16 = [&](int exponent_spread) {
    while (true) {
      // Every eighth term zero; otherwise random bits, or exponents within a narrow band around 1.
      const std::uint64_t r = generator();
      if (r % 8 == 0) return bfloat16::zero(r & 8);
      const std::uint16_t bits = exponent_spread == 0 ? static_cast<std::uint16_t>(r >> 16)
                                                      : static_cast<std::uint16_t>(((r >> 16) & 0x807F) |
                                                                                   ((127 + (r >> 40) % exponent_spread - exponent_spread / 2) << 7));
      const bfloat16 x = bfloat16::from_bits(bits);
      if (!x.is_nan() && !x.is_inf()) return x;
    }
  };
  int cases = 0, mismatches = 0;
  for (int n = 0; n < 6000; ++n) {
    const int spread = n % 3 == 0 ? 0 : n % 3 == 1 ? 8 : 40;
    std::array<bfloat16, 16> a{}, b{};
    std::array<working_real, 16> a_wide;
    for (std::size_t k = 0; k < 16; ++k) a[k] = finite_bf16(spread), b[k] = finite_bf16(spread), a_wide[k] = working_real(to_double(a[k]));
    float32 c = from_double<fp32>(to_double(finite_bf16(spread)) * (1 + static_cast<double>(generator() % 1000) / 997)).result;
    if (n % 5 == 0 || c.is_inf()) c = float32::zero();
    const float32 expected = fused_multiply_add_step<fp32, bf16>(sm90_tensor_core, std::span<const bfloat16>(a), std::span<const bfloat16>(b), c).result;
    const working_real ours = attention::detail::fused_step_on_exact_terms(sm90_tensor_core, a_wide, b, working_real(to_host(c)));
    const auto held = attention::detail::held_by<fp32>(ours);
    mismatches += !held || held->bits != expected.bits;
    ++cases;
  }
  CHECK(cases == 6000);
  CHECK(mismatches == 0);
}

TEST_CASE("rounding sites: split-KV, the across-blocks rule, rows outside the head and wrong sizes are refused") {
  const head h = random_head(2, 1024, 64, false, 3);
  const flash_kernel split = pytorch_sdpa_flash_sm90(h.shape);
  REQUIRE(split.splits > 1);  // one head of 1024 keys: PyTorch splits the keys
  CHECK_THROWS_WITH_AS(rounding_site_row(split, h.shape, h.q, h.k, h.v, 0),
                       doctest::Contains("only the single-kernel path"), std::invalid_argument);
  attention_shape launch = h.shape;
  launch.heads = 256;
  CHECK_THROWS_WITH_AS(rounding_site_row(pytorch_sdpa_flash_sm90_stabilized_across_blocks(launch), h.shape, h.q, h.k, h.v, 0),
                       doctest::Contains("across blocks"), std::invalid_argument);
  const flash_kernel single = single_kernel(h.shape);
  CHECK_THROWS_WITH_AS(rounding_site_row(single, h.shape, h.q, h.k, h.v, 2), doctest::Contains("row 2"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(rounding_site_row(single, h.shape, h.q, h.k, std::span<const bfloat16>(h.v).first(64), 0),
                       doctest::Contains("key_rows x head_dim"), std::invalid_argument);
}
