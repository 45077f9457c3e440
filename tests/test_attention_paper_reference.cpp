// The paper_reference presets (the bf16 flash attention of Qiu & Yao's code)
// and their fp64 counterpart: bits derived by hand on tiny heads; every bit of
// O and L against a second implementation in host float arithmetic on random
// heads; the bf16 result's distance from the fp64 one, and the fp64 one's from
// the softmax formula; the stabilized rule's effect on P; the inputs refused.
#include <doctest/doctest.h>

#include <bitexact/attention/paper_reference.hpp>
#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

using namespace bitexact;
using namespace bitexact::attention;

namespace {

// bf16 without the library: host float arithmetic, which rounds to nearest
// even on x86-64 (SSE, no excess precision), and bit manipulation.
float bf16_from_float(float x) {
  if (std::isnan(x)) return x;
  std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  bits += 0x7FFFu + ((bits >> 16) & 1u);  // carries into the kept bits past the halfway point, and at it when odd
  return std::bit_cast<float>(bits & 0xFFFF0000u);
}

// A double rounded once to bf16 (8 significant bits, the lowest at 2^-133).
float bf16_from_double(double x) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return static_cast<float>(x);
  int exponent = 0;
  std::frexp(x, &exponent);  // |x| in [2^(exponent-1), 2^exponent)
  const int quantum = std::max(exponent - 8, -133);
  const double rounded = std::ldexp(std::nearbyint(std::ldexp(x, -quantum)), quantum);  // nearbyint: ties to even
  if (std::fabs(rounded) > static_cast<double>(FLT_MAX)) return std::copysign(INFINITY, static_cast<float>(x));
  return static_cast<float>(rounded);
}

float as_float(bfloat16 x) { return std::bit_cast<float>(std::uint32_t{x.bits} << 16); }
bfloat16 as_bf16(float x) { return bfloat16::from_bits(std::bit_cast<std::uint32_t>(x) >> 16); }

std::vector<bfloat16> bf16_values(std::initializer_list<float> values) {
  std::vector<bfloat16> result;
  for (const float x : values) result.push_back(as_bf16(bf16_from_float(x)));
  return result;
}

// Q, K or V from a std::mt19937 seeded by the caller: normal(0, 1) rounded to
// bf16, or (coarse) one of -1, -0.5, 0, 0.5, 1, so that scores tie often.
std::vector<bfloat16> random_bf16(std::mt19937& generator, std::size_t count, bool coarse) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> step(-2, 2);
  std::vector<bfloat16> values(count);
  for (bfloat16& x : values)
    x = as_bf16(coarse ? 0.5f * static_cast<float>(step(generator)) : bf16_from_float(normal(generator)));
  return values;
}

struct lp_head {
  std::vector<bfloat16> o;
  std::vector<float32> lse;
};

lp_head run_lp(const paper_flash& flash, const attention_shape& shape, const std::vector<bfloat16>& q,
               const std::vector<bfloat16>& k, const std::vector<bfloat16>& v) {
  lp_head out{std::vector<bfloat16>(q.size()), std::vector<float32>(static_cast<std::size_t>(shape.query_rows))};
  paper_forward_head(flash, shape, q, k, v, out.o, out.lse);
  return out;
}

// The preset as the code runs eagerly on bf16 tensors, every result stored as bf16.
paper_flash without_autocast(paper_flash flash) {
  flash.autocast = false;
  return flash;
}

// The paper's forward pass restated in host float, written from the paper's
// code rather than from paper_reference.hpp: each bf16 tensor operation a
// float operation, then bf16_from_float; exp and log in double, rounded once
// (to float under autocast, where they return float tensors, to bf16 without).
struct host_flash {
  std::vector<float> o, lse;
  int raised_maxima = 0, zeroed_maxima = 0;  // blocks where the stabilized rule changed the max
};

host_flash host_paper_flash(const attention_shape& shape, int block_n, double scale, bool stabilized, bool autocast,
                            const std::vector<bfloat16>& q, const std::vector<bfloat16>& k,
                            const std::vector<bfloat16>& v) {
  // torch.exp: a float tensor under autocast, bf16 without (torch.log too, at the end).
  const auto torch_exp = [autocast](float x) {
    const double e = std::exp(static_cast<double>(x));
    return autocast ? static_cast<float>(e) : bf16_from_double(e);
  };
  const int d = shape.head_dim, rows = shape.query_rows, keys = shape.key_rows;
  const float lowest = -std::bit_cast<float>(0x7F7F0000u);  // -bf16_max
  const float scale_float = static_cast<float>(scale);
  const auto at = [d](const std::vector<bfloat16>& x, int row, int c) {
    return as_float(x[static_cast<std::size_t>(row * d + c)]);
  };
  host_flash out;
  out.o.resize(static_cast<std::size_t>(rows * d));
  out.lse.resize(static_cast<std::size_t>(rows));
  for (int row = 0; row < rows; ++row) {
    const int visible = shape.causal ? std::clamp(row + 1 + keys - rows, 0, keys) : keys;
    float m = lowest, l = 0;
    std::vector<float> o(static_cast<std::size_t>(d), 0.0f);
    for (int first = 0; first < keys; first += block_n) {
      const int count = std::min(block_n, keys - first);
      std::vector<float> a(static_cast<std::size_t>(count)), p(a.size());
      for (int j = 0; j < count; ++j) {
        if (first + j >= visible) {
          a[static_cast<std::size_t>(j)] = lowest;
          continue;
        }
        float dot = 0;
        for (int c = 0; c < d; ++c) dot += at(q, row, c) * at(k, first + j, c);
        a[static_cast<std::size_t>(j)] = bf16_from_float(bf16_from_float(dot) * scale_float);
      }
      float block_max = a[0];
      for (const float x : a) block_max = std::max(block_max, x);
      if (stabilized) {
        const float threshold = bf16_from_float(block_max - 1e-3f);
        const auto close = std::count_if(a.begin(), a.end(), [&](float x) { return x >= threshold; });
        if (close > 1 && block_max > 0) {
          block_max = bf16_from_float(2.0f * block_max);
          ++out.raised_maxima;
        }
        if (close > 1 && block_max < 0) {
          block_max = 0;
          ++out.zeroed_maxima;
        }
      }
      const float m_new = std::max(block_max, m);
      float sum = 0;
      for (std::size_t j = 0; j < a.size(); ++j) {
        p[j] = torch_exp(bf16_from_float(a[j] - m_new));
        sum += p[j];
      }
      const float clamped = std::max(sum, 1e-10f);
      const float block_sum = autocast ? clamped : bf16_from_float(clamped);
      const float alpha = torch_exp(bf16_from_float(m - m_new));
      const float rescaled = alpha * l;
      const float new_l = (autocast ? rescaled : bf16_from_float(rescaled)) + block_sum;
      l = bf16_from_float(new_l);
      for (int c = 0; c < d; ++c) {
        float pv = 0;
        for (int j = 0; j < count; ++j) {
          const float product = bf16_from_float(p[static_cast<std::size_t>(j)]) * at(v, first + j, c);
          pv += product;
        }
        float& out_c = o[static_cast<std::size_t>(c)];
        const float rescaled_o = bf16_from_float(out_c * alpha);
        out_c = bf16_from_float(rescaled_o + bf16_from_float(pv));
      }
      m = m_new;
    }
    for (int c = 0; c < d; ++c)
      out.o[static_cast<std::size_t>(row * d + c)] = bf16_from_float(o[static_cast<std::size_t>(c)] / l);
    const double log_l = std::log(static_cast<double>(l));
    out.lse[static_cast<std::size_t>(row)] =
        autocast ? static_cast<float>(log_l) + m : bf16_from_float(bf16_from_double(log_l) + m);
  }
  return out;
}

// One row's P, block by block, and the running max and sum after each block.
struct row_blocks {
  std::vector<std::vector<bfloat16>> p;
  std::vector<std::vector<float32>> p_fp32;
  std::vector<bfloat16> running_max, running_sum;
  std::vector<int> ties;
};

row_blocks trace_row(const paper_flash& flash, const attention_shape& shape, int row, const std::vector<bfloat16>& q,
                     const std::vector<bfloat16>& k, const std::vector<bfloat16>& v) {
  const std::size_t d = static_cast<std::size_t>(shape.head_dim);
  const auto q_row = std::span(q).subspan(static_cast<std::size_t>(row) * d, d);
  attention::detail::paper_row state(flash, shape, row, q_row, k, v);
  row_blocks result;
  while (state.run_next_block()) {
    result.p.emplace_back(state.p().begin(), state.p().end());
    result.p_fp32.emplace_back(state.p_fp32().begin(), state.p_fp32().end());
    result.running_max.push_back(state.running_max());
    result.running_sum.push_back(state.running_sum());
    result.ties.push_back(state.ties());
  }
  return result;
}

}  // namespace

TEST_SUITE("attention") {
  // Q = [(0.25, 2), (1, 1)], K = [(1, 0), (0.5, 0)], V = [(1, -2), (0.5, 3)],
  // causal, scale 1, so A = S: row 0 sees (0.25, masked), row 1 (1, 0.5).
  // Row 0: P = (exp(0), exp(-bf16_max)) = (1, 0), l = 1, O = V[0], L = 0.25.
  // Row 1, one block of 512 (the preset): m = 1, P = (1, bf16(exp(-0.5) =
  // 0.60653)) = (1, 155/256); l = bf16(1 + 155/256 = 205.5/128) = 206/128
  // (the tie goes to even); PV = (bf16(1 + 155/512 = 166.75/128) = 167/128,
  // -2 + 465/256 = -47/256, exact); O = (bf16(167/206 = 0.81068) = 208/256,
  // bf16(-47/412 = -0.114078) = -234/2048 = 0xBDEA); L = bf16(bf16(log(206/128)
  // = 0.475846) = 0.4765625 + 1) = 1.4765625 = 0x3FBD.
  // Row 1 in blocks of one key: after key 0, l = 1 and O = V[0]; key 1 adds
  // P V = (155/512, bf16(465/256) = 464/256, the tie to even again), so
  // O = (167/128, bf16(-2 + 1.8125) = -0.1875) and O / l = (208/256,
  // bf16(-0.1875 / 1.609375 = -0.116505) = -239/2048 = 0xBDEF): the rounding of
  // P V per block shows in the result. Row 0's masked block adds
  // bf16(1e-10) to l, which l = 1 absorbs. All of this without autocast.
  // Under autocast (the preset) P = fp32(exp(-0.5)) enters the sum unrounded:
  // l = bf16(1.6065307) = 206/128 again, and P V reads bf16(P) = 155/256 as
  // before, so O keeps its bits in both tilings; L = fp32(fp32(log(206/128)) + 1)
  // = fp32(15966739 * 2^-25 + 1) = 12380293 * 2^-23 (the 0.75 rounds up) = 0x3FBCE885.
  TEST_CASE("paper_reference: a causal two-token head by hand, its roundings visible, in one block and in blocks of one key") {
    const attention_shape shape{1, 1, 2, 2, 2, true};
    const auto q = bf16_values({0.25f, 2, 1, 1}), k = bf16_values({1, 0, 0.5f, 0}), v = bf16_values({1, -2, 0.5f, 3});
    const lp_head preset = run_lp(without_autocast(paper_reference(shape, 1.0)), shape, q, k, v);
    const auto expected_o = bf16_values({1, -2, 0.8125f, -234.0f / 2048});
    CHECK(preset.o == expected_o);
    CHECK(preset.o[3].bits == 0xBDEAu);
    CHECK(preset.lse[0].bits == 0x3E800000u);  // 0.25
    CHECK(preset.lse[1].bits == 0x3FBD0000u);  // 1.4765625

    paper_flash one_key = without_autocast(paper_reference(shape, 1.0));
    one_key.block_n = 1;
    const lp_head blocked = run_lp(one_key, shape, q, k, v);
    CHECK(blocked.o == bf16_values({1, -2, 0.8125f, -239.0f / 2048}));
    CHECK(blocked.o[3].bits == 0xBDEFu);
    CHECK(blocked.lse == preset.lse);

    // block_m changes no bit: every row's arithmetic is its own.
    paper_flash one_row = without_autocast(paper_reference(shape, 1.0));
    one_row.block_m = 1;
    const lp_head by_rows = run_lp(one_row, shape, q, k, v);
    CHECK(by_rows.o == preset.o);
    CHECK(by_rows.lse == preset.lse);

    REQUIRE(paper_reference(shape, 1.0).autocast);
    const lp_head autocast = run_lp(paper_reference(shape, 1.0), shape, q, k, v);
    CHECK(autocast.o == preset.o);
    CHECK(autocast.lse[0].bits == 0x3E800000u);  // fp32(log 1 + 0.25)
    CHECK(autocast.lse[1].bits == 0x3FBCE885u);
    paper_flash autocast_one_key = paper_reference(shape, 1.0);
    autocast_one_key.block_n = 1;
    const lp_head autocast_blocked = run_lp(autocast_one_key, shape, q, k, v);
    CHECK(autocast_blocked.o == blocked.o);
    CHECK(autocast_blocked.lse == autocast.lse);
  }

  // Scale 1, q = (1, 0), keys (0, 0) and (-0.625, 0): A = (0, -0.625), m = 0,
  // and with V = [(1, 0), (0, 1)] P V = P. The second P is exp(-0.625) =
  // 0.5352614, which the sum adds as it is under autocast and as bf16 without.
  // Without autocast: P = bf16 137/256 (0x3F09); l = bf16(1 + 137/256 = 196.5/128),
  // a tie, to even, 196/128 (0x3FC4); O = (bf16(128/196 = 167.18/256) = 167/256
  // (0x3F27), bf16(137/256 / 1.53125 = 178.94/512) = 179/512 (0x3EB3)); L =
  // bf16(log(196/128) = 218.16/512) = 218/512 (0x3EDA).
  // Under autocast: P = fp32(exp(-0.625)) = 8980197 * 2^-24 (0x3F0906E5), P V
  // still reads bf16(P) = 137/256; the fp32 sum 1 + P = 12878706.5 * 2^-23 is a
  // tie, to even: 1.5352614 (0x3FC48372), not a bf16 tie: l = bf16(196.51/128)
  // = 197/128 (0x3FC5); O = (bf16(166.34/256) = 166/256 (0x3F26),
  // bf16(178.03/512) = 178/512 (0x3EB2)); L = fp32(log(197/128)) + 0 =
  // 14467781 * 2^-25 (0x3EDCC2C5).
  TEST_CASE("paper_reference: under autocast the fp32 P enters the row sum unrounded, and l, O and L change by a bit") {
    const attention_shape shape{1, 1, 1, 2, 2, false};
    const auto q = bf16_values({1, 0}), k = bf16_values({0, 0, -0.625f, 0}), v = bf16_values({1, 0, 0, 1});
    const paper_flash autocast = paper_reference(shape, 1.0), eager = without_autocast(autocast);
    const row_blocks with = trace_row(autocast, shape, 0, q, k, v);
    const row_blocks without = trace_row(eager, shape, 0, q, k, v);
    REQUIRE(with.p.size() == 1);
    REQUIRE(without.p.size() == 1);
    CHECK(with.p_fp32[0][0].bits == 0x3F800000u);
    CHECK(with.p_fp32[0][1].bits == 0x3F0906E5u);
    CHECK(without.p_fp32[0][1].bits == 0x3F090000u);  // the bf16 P, widened
    CHECK(with.p[0][1].bits == 0x3F09u);
    CHECK(without.p[0][1].bits == 0x3F09u);
    CHECK(with.running_sum[0].bits == 0x3FC5u);
    CHECK(without.running_sum[0].bits == 0x3FC4u);

    const lp_head lp_with = run_lp(autocast, shape, q, k, v), lp_without = run_lp(eager, shape, q, k, v);
    CHECK(lp_with.o[0].bits == 0x3F26u);
    CHECK(lp_with.o[1].bits == 0x3EB2u);
    CHECK(lp_with.lse[0].bits == 0x3EDCC2C5u);
    CHECK(lp_without.o[0].bits == 0x3F27u);
    CHECK(lp_without.o[1].bits == 0x3EB3u);
    CHECK(lp_without.lse[0].bits == 0x3EDA0000u);
  }

  // The caller's scale 0x3EAB5556 (0.33463544) times S = 3 is 1 + 2^-8 + 2^-24
  // exactly. PyTorch rounds it to float first: a tie, to 1 + 2^-8 (even),
  // which is the bf16 midpoint of 1 and 1 + 2^-7, a tie again, to 1. Rounded
  // once it would be 1 + 2^-7. With one key, L = bf16(log 1 + A) = A.
  // The default scale for d = 2: 2 ** -0.5 as a float is 0x3F3504F3
  // (0.70710677), and A = bf16(0.70710677) = 181/256 = 0x3F35. Under autocast
  // and without, as L = log(1) + A adds nothing to A.
  TEST_CASE("paper_reference: the scale product is rounded to float, then to bf16, as PyTorch's opmath does") {
    const attention_shape shape{1, 1, 1, 1, 2, false};
    const auto q = bf16_values({1, 1}), k = bf16_values({1, 2}), v = bf16_values({3, -1});
    const double scale = static_cast<double>(std::bit_cast<float>(0x3EAB5556u));
    CHECK(paper_reference(shape).scale == 0.7071067811865476);  // Python: 2 ** -0.5
    const auto unit = bf16_values({1, 0});
    for (const bool autocast : {true, false}) {
        CAPTURE(autocast);
        paper_flash flash = paper_reference(shape, scale);
        flash.autocast = autocast;
        const lp_head twice = run_lp(flash, shape, q, k, v);
        CHECK(twice.lse[0].bits == 0x3F800000u);
        CHECK(twice.o == v);

        paper_flash preset = paper_reference(shape);
        preset.autocast = autocast;
        CHECK(run_lp(preset, shape, unit, unit, v).lse[0].bits == 0x3F350000u);
    }
  }

  // Causal, 3 query rows and 2 keys, bottom-right aligned: row 0 sees no key,
  // row 1 key 0, row 2 both. Row 0's scores are all -bf16_max, so is its max:
  // P = (1, 1), l = 2, O = bf16((V0 + V1) / 2), L = bf16(log 2 - bf16_max) =
  // -bf16_max (0xFF7F0000), and the fp64 counterpart agrees (the same -bf16_max
  // for a masked score). Stabilized, the two masked scores tie at a negative
  // max, which becomes 0: P = exp(-bf16_max) = 0, the clamped block sum
  // bf16(1e-10) = 1.71875 * 2^-34, O = 0 and L = bf16(log(1.71875 * 2^-34) =
  // -23.0254) = -23, without autocast. Under autocast the clamped block sum is
  // fp32(1e-10), stored in l as the same bf16, and L = fp32(-23.0254068) =
  // -12071945 * 2^-19 (0xC1B83409); the standard row's L is -bf16_max again
  // (fp32's ulp there is 2^104).
  TEST_CASE("paper_reference: a row that sees no key averages V with -bf16_max as its max; stabilized, it gives O = 0 and L = -23") {
    const attention_shape shape{1, 1, 3, 2, 2, true};
    const auto q = bf16_values({1, 0, 1, 0, 1, 0}), k = bf16_values({1, 0, -1, 0}), v = bf16_values({1, 3, 2, -0.5f});
    const lp_head standard = run_lp(without_autocast(paper_reference(shape)), shape, q, k, v);
    CHECK(standard.o[0] == as_bf16(1.5f));
    CHECK(standard.o[1] == as_bf16(1.25f));
    CHECK(standard.lse[0].bits == 0xFF7F0000u);
    std::vector<double> o_hp(6), lse_hp(3);
    paper_reference_fp64_head(shape, {}, q, k, v, o_hp, lse_hp);
    CHECK(o_hp[0] == 1.5);
    CHECK(o_hp[1] == 1.25);
    CHECK(lse_hp[0] == static_cast<double>(std::bit_cast<float>(0xFF7F0000u)));
    CHECK(o_hp[2] == 1.0);  // row 1: key 0 alone
    CHECK(o_hp[3] == 3.0);

    const lp_head stabilized = run_lp(without_autocast(paper_reference_stabilized(shape)), shape, q, k, v);
    CHECK(stabilized.o[0].bits == 0x0000u);
    CHECK(stabilized.o[1].bits == 0x0000u);
    CHECK(stabilized.lse[0].bits == 0xC1B80000u);  // -23
    // Rows 1 and 2 each have a visible score above the masked one: no tie, no change.
    CHECK(std::equal(stabilized.o.begin() + 2, stabilized.o.end(), standard.o.begin() + 2));

    const lp_head autocast = run_lp(paper_reference(shape), shape, q, k, v);
    CHECK(std::equal(autocast.o.begin(), autocast.o.begin() + 2, standard.o.begin()));
    CHECK(autocast.lse[0].bits == 0xFF7F0000u);
    const lp_head autocast_stabilized = run_lp(paper_reference_stabilized(shape), shape, q, k, v);
    CHECK(autocast_stabilized.o[0].bits == 0x0000u);
    CHECK(autocast_stabilized.o[1].bits == 0x0000u);
    CHECK(autocast_stabilized.lse[0].bits == 0xC1B83409u);
  }

  // d = 4, scale 0.5, q = (1, 0, 0, 0): A = bf16(x / 2) for keys (x, 0, 0, 0).
  // Keys x = (0.5, 2, -1, 2, 1): A = (0.25, 1, -0.5, 1, 0.5), the max 1 twice.
  // Standard: P = 1 at keys 1 and 3. Stabilized: bf16(1 - 1e-3) = 1, two scores
  // at or above it, m = bf16(2 * 1) = 2, and those P = bf16(exp(-1) = 0.36788)
  // = 188/512 = 0x3EBC, P V's operand (the row sum adds fp32(exp(-1)) =
  // 0x3EBC5AB2 under autocast, the preset). A max alone in its block is left alone (P = 1 stays),
  // and tied negative maxima, x = (-2, -4, -2), become 0: P = exp(-1) again.
  TEST_CASE("paper_reference_stabilized: tied maxima in one block give no P = 1; the standard preset gives P = 1 at each") {
    const attention_shape shape{1, 1, 1, 5, 4, false};
    const auto q = bf16_values({1, 0, 0, 0});
    const auto keys = [](std::initializer_list<float> xs) {
      std::vector<bfloat16> k;
      for (const float x : xs)
        for (const float c : {x, 0.0f, 0.0f, 0.0f}) k.push_back(as_bf16(bf16_from_float(c)));
      return k;
    };
    const auto k = keys({0.5f, 2, -1, 2, 1});
    std::mt19937 generator(7);  // V plays no part in P
    const auto v = random_bf16(generator, 20, false);
    const row_blocks standard = trace_row(paper_reference(shape), shape, 0, q, k, v);
    const row_blocks stabilized = trace_row(paper_reference_stabilized(shape), shape, 0, q, k, v);
    REQUIRE(standard.p.size() == 1);
    REQUIRE(stabilized.p.size() == 1);
    CHECK(standard.p[0][1].bits == 0x3F80u);
    CHECK(standard.p[0][3].bits == 0x3F80u);
    CHECK(std::count_if(standard.p[0].begin(), standard.p[0].end(), [](bfloat16 p) { return p.bits == 0x3F80u; }) == 2);
    CHECK(stabilized.ties[0] == 2);
    CHECK(stabilized.running_max[0].bits == 0x4000u);  // 2
    CHECK(stabilized.p[0][1].bits == 0x3EBCu);
    CHECK(stabilized.p[0][3].bits == 0x3EBCu);
    CHECK(stabilized.p_fp32[0][1].bits == 0x3EBC5AB2u);  // under autocast, the preset: fp32(exp(-1))
    CHECK(std::none_of(stabilized.p[0].begin(), stabilized.p[0].end(), [](bfloat16 p) { return p.bits == 0x3F80u; }));

    const auto alone = keys({0.5f, 2, -1, 1.5f, 1});
    const row_blocks single = trace_row(paper_reference_stabilized(shape), shape, 0, q, alone, v);
    CHECK(single.ties[0] == 1);
    CHECK(single.p[0][1].bits == 0x3F80u);

    const attention_shape three{1, 1, 1, 3, 4, false};
    const std::vector<bfloat16> v3(v.begin(), v.begin() + 12);
    const row_blocks negative = trace_row(paper_reference_stabilized(three), three, 0, q, keys({-2, -4, -2}), v3);
    CHECK(negative.ties[0] == 2);
    CHECK(negative.running_max[0].bits == 0x0000u);
    CHECK(negative.p[0][0].bits == 0x3EBCu);
    CHECK(negative.p[0][2].bits == 0x3EBCu);
  }

  // Causal, blocks of 2 keys, 4 rows, d = 4 (scale 0.5): row 0 sees key 0
  // alone, A = -0.5, and block 1 (keys 2, 3) holds masked scores only, a
  // repeated max of -bf16_max that the rule makes 0, so the running max
  // becomes max(0, -0.5) = 0 there. Then alpha = bf16(exp(-0.5)) = 155/256
  // rescales l and O: l = 155/256, O = bf16(V[0] * 155/256) = (155/256,
  // 155/128, 1.8125 (3 * 155/256 = 1.8164, a tie to even), 155/64), and O / l
  // rounds back to V[0] = (1, 2, 3, 4) (1.8125 / (155/256) = 2.9935 rounds to 3);
  // L = bf16(bf16(log(155/256)) + 0) = bf16(-0.50177) = -0.5; all without
  // autocast. Under autocast alpha = fp32(exp(-0.5)) = 0.60653067 and l =
  // bf16(fp32(alpha + fp32(1e-10))) = 155/256 again; O = bf16(V[0] alpha) =
  // (155/256, 155/128, 233/128 (3 alpha = 1.81959), 155/64), and O / l rounds
  // back to V[0] (466/155 = 3.0065); L = fp32(log(155/256)) = -0.50175232 (0xBF0072D7).
  TEST_CASE("paper_reference_stabilized: a block of masked keys lifts a negative running max to 0, as the paper's code does") {
    const attention_shape shape{1, 1, 4, 4, 4, true};
    const auto q = bf16_values({1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0});
    const auto k = bf16_values({-1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0});
    const auto v = bf16_values({1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4});
    paper_flash standard = without_autocast(paper_reference(shape));
    paper_flash stabilized = without_autocast(paper_reference_stabilized(shape));
    standard.block_n = stabilized.block_n = 2;
    const row_blocks plain = trace_row(standard, shape, 0, q, k, v);
    const row_blocks rule = trace_row(stabilized, shape, 0, q, k, v);
    REQUIRE(rule.running_max.size() == 2);
    CHECK(plain.running_max[0] == as_bf16(-0.5f));
    CHECK(plain.running_max[1] == as_bf16(-0.5f));
    CHECK(rule.running_max[0] == as_bf16(-0.5f));  // key 0 alone with the masked key 1: no tie
    CHECK(rule.ties[1] == 2);
    CHECK(rule.running_max[1].bits == 0x0000u);
    const lp_head lifted = run_lp(stabilized, shape, q, k, v);
    CHECK(std::equal(lifted.o.begin(), lifted.o.begin() + 4, v.begin()));
    CHECK(lifted.lse[0] == from_host(-0.5f));

    paper_flash autocast = paper_reference_stabilized(shape);
    autocast.block_n = 2;
    const row_blocks autocast_rule = trace_row(autocast, shape, 0, q, k, v);
    CHECK(autocast_rule.running_max[1].bits == 0x0000u);
    CHECK(autocast_rule.running_sum[1].bits == 0x3F1Bu);  // 155/256
    const lp_head autocast_lifted = run_lp(autocast, shape, q, k, v);
    CHECK(std::equal(autocast_lifted.o.begin(), autocast_lifted.o.begin() + 4, v.begin()));
    CHECK(autocast_lifted.lse[0].bits == 0xBF0072D7u);
  }

  TEST_CASE("paper_forward_head: every bit of O and L as a host-float implementation of the paper's code computes them, under autocast and without") {
    struct head {
      int query_rows, key_rows, head_dim;
      bool causal;
      int block_n = 512;
    };
    std::vector<head> heads;
    // d = 5: a scale (5 ** -0.5) whose products round, unlike 64's 1/8.
    for (const int n : {1, 17, 600})
      for (const int d : {5, 64})
        for (const bool causal : {false, true}) heads.push_back({n, n, d, causal});
    heads.push_back({5, 600, 5, false});
    heads.push_back({17, 600, 5, true});  // bottom-right: row i sees keys up to i + 583
    heads.push_back({600, 17, 5, true});  // the first 583 rows see no key
    heads.push_back({40, 40, 5, true, 7});
    for (const bool autocast : {true, false}) {
    std::mt19937 generator(20240611);  // fixed seed, the same heads for both paths
    std::size_t o_compared = 0, lse_compared = 0, o_mismatches = 0, lse_mismatches = 0, runs = 0;
    std::size_t o_expected = 0;
    int raised = 0, zeroed = 0;
    for (const head& h : heads)
      for (const bool coarse : {false, true})
        for (const bool stabilized : {false, true}) {
          const attention_shape shape{1, 1, h.query_rows, h.key_rows, h.head_dim, h.causal};
          const std::size_t d = static_cast<std::size_t>(h.head_dim);
          const auto q = random_bf16(generator, static_cast<std::size_t>(h.query_rows) * d, coarse);
          const auto k = random_bf16(generator, static_cast<std::size_t>(h.key_rows) * d, coarse);
          const auto v = random_bf16(generator, static_cast<std::size_t>(h.key_rows) * d, coarse);
          // Coarse scores are multiples of 0.25, often 3 * 2^e: with the hand case's
          // scale 0x3EAB5556 their products round twice to a result once-rounding misses.
          const std::optional<double> scale =
              coarse ? std::optional<double>(std::bit_cast<float>(0x3EAB5556u)) : std::nullopt;
          paper_flash flash = stabilized ? paper_reference_stabilized(shape, scale) : paper_reference(shape, scale);
          flash.block_n = h.block_n;
          flash.autocast = autocast;
          const lp_head lp = run_lp(flash, shape, q, k, v);
          const host_flash host = host_paper_flash(shape, h.block_n, flash.scale, stabilized, autocast, q, k, v);
          raised += host.raised_maxima;
          zeroed += host.zeroed_maxima;
          std::size_t o_here = 0, lse_here = 0;
          for (std::size_t i = 0; i < lp.o.size(); ++i, ++o_compared)
            o_here += std::bit_cast<std::uint32_t>(as_float(lp.o[i])) != std::bit_cast<std::uint32_t>(host.o[i]);
          for (std::size_t i = 0; i < lp.lse.size(); ++i, ++lse_compared)
            lse_here += lp.lse[i].bits != std::bit_cast<std::uint32_t>(host.lse[i]);
          if (o_here + lse_here > 0) {
            const std::string head_name = std::to_string(h.query_rows) + " x " + std::to_string(h.key_rows) + ", d " +
                                          std::to_string(d) + (h.causal ? ", causal" : "") +
                                          (coarse ? ", coarse" : ", normal") + (stabilized ? ", stabilized" : "") +
                                          (autocast ? ", autocast" : ", without autocast");
            MESSAGE(head_name << ": " << o_here << " O and " << lse_here << " L mismatches");
          }
          o_mismatches += o_here;
          lse_mismatches += lse_here;
          o_expected += q.size();
          ++runs;
        }
    MESSAGE(std::string(autocast ? "autocast, " : "without autocast, ")
            << runs << " heads: " << o_compared << " O and " << lse_compared << " L elements compared, " << o_mismatches
            << " and " << lse_mismatches << " mismatches; the stabilized rule raised " << raised
            << " block maxima and set " << zeroed << " to 0");
    CHECK(runs == heads.size() * 4);
    CHECK(o_compared == o_expected);
    CHECK(o_mismatches == 0);
    CHECK(lse_mismatches == 0);
    CHECK(raised > 0);  // both branches of the rule ran
    CHECK(zeroed > 0);
    }
  }

  // The error budget of the bf16 result, per element: each P carries the
  // roundings of S and A (relative errors up to 2^-9 |A| in P), of A - m (up to
  // 2^-9 |A - m|) and of exp (2^-9); P V, the rescaled O and O / l one more
  // each, l two. With |A| of a few units that is a few 2^-8 of the terms'
  // scale, which is |O| or, where V's terms cancel, the P-weighted mean of |V|
  // (the fp64 head run on |V|). Bound: 8 * 2^-8 of the larger; L within
  // 4 * 2^-8 of (1 + |L|). Autocast removes the roundings of P, l_b and alpha
  // before the row sum and of L; the same bounds hold for both paths. The
  // largest ratios seen are printed for each.
  TEST_CASE("paper_forward_head: on random normal heads O and L lie within a few bf16 ulps of the fp64 result, under autocast and without") {
    std::mt19937 generator(97);  // fixed seed
    const attention_shape shapes[] = {{1, 1, 600, 600, 64, false}, {1, 1, 600, 600, 64, true}};
    std::size_t compared = 0;
    double worst_o[2] = {0, 0}, worst_lse[2] = {0, 0};  // [autocast]
    for (const attention_shape& shape : shapes)
      for (const bool stabilized : {false, true}) {
        const std::size_t elements = static_cast<std::size_t>(shape.query_rows * shape.head_dim);
        const auto q = random_bf16(generator, elements, false), k = random_bf16(generator, elements, false),
                   v = random_bf16(generator, elements, false);
        std::vector<bfloat16> v_magnitude(v.size());
        std::transform(v.begin(), v.end(), v_magnitude.begin(), [](bfloat16 x) { return x.abs(); });
        std::vector<double> o_hp(elements), lse_hp(static_cast<std::size_t>(shape.query_rows));
        std::vector<double> mean_magnitude(elements), unused(lse_hp.size());
        paper_reference_fp64_head(shape, {}, q, k, v, o_hp, lse_hp);
        paper_reference_fp64_head(shape, {}, q, k, v_magnitude, mean_magnitude, unused);
        for (const bool autocast : {false, true}) {
          paper_flash flash = stabilized ? paper_reference_stabilized(shape) : paper_reference(shape);
          flash.autocast = autocast;
          const lp_head lp = run_lp(flash, shape, q, k, v);
          std::size_t o_outside = 0, lse_outside = 0;
          for (std::size_t i = 0; i < elements; ++i, ++compared) {
            const double unit = std::ldexp(std::max(std::fabs(o_hp[i]), mean_magnitude[i]), -8);
            const double ratio = std::fabs(static_cast<double>(as_float(lp.o[i])) - o_hp[i]) / unit;
            worst_o[autocast] = std::max(worst_o[autocast], ratio);
            o_outside += !(ratio <= 8);
          }
          for (std::size_t row = 0; row < lse_hp.size(); ++row) {
            const double ratio = std::fabs(static_cast<double>(to_host(lp.lse[row])) - lse_hp[row]) /
                                 std::ldexp(1 + std::fabs(lse_hp[row]), -8);
            worst_lse[autocast] = std::max(worst_lse[autocast], ratio);
            lse_outside += !(ratio <= 4);
          }
          CHECK(o_outside == 0);
          CHECK(lse_outside == 0);
        }
      }
    CHECK(compared == 8 * 600 * 64);
    for (const bool autocast : {false, true})
      MESSAGE(std::string(autocast ? "autocast: " : "without autocast: ")
              << compared / 2 << " O elements: the largest |O_lp - O_hp| is " << worst_o[autocast]
              << " * 2^-8 of max(|O_hp|, weighted mean |V|); the largest |L_lp - L_hp| " << worst_lse[autocast]
              << " * 2^-8 of (1 + |L_hp|)");
  }

  // exp(score) without the max subtracted (scores of normal inputs stay far
  // from overflow): the softmax as written, which fp64's max shift must not change.
  TEST_CASE("paper_reference_fp64_head: O and L as the softmax formula gives them, to 1e-12") {
    std::mt19937 generator(5);  // fixed seed
    std::size_t compared = 0, o_outside = 0, lse_outside = 0;
    for (const bool causal : {false, true}) {
      const attention_shape shape{1, 1, 50, 70, 16, causal};
      const std::size_t d = 16, rows = 50, keys = 70;
      const auto q = random_bf16(generator, rows * d, false), k = random_bf16(generator, keys * d, false),
                 v = random_bf16(generator, keys * d, false);
      std::vector<double> o(rows * d), lse(rows);
      paper_reference_fp64_head(shape, 0.3, q, k, v, o, lse);
      for (std::size_t row = 0; row < rows; ++row) {
        const std::size_t visible = causal ? row + 1 + keys - rows : keys;
        double total = 0;
        std::vector<double> weighted(d, 0.0), magnitude(d, 0.0);
        for (std::size_t key = 0; key < visible; ++key) {
          double score = 0;
          for (std::size_t c = 0; c < d; ++c)
            score += static_cast<double>(as_float(q[row * d + c])) * static_cast<double>(as_float(k[key * d + c]));
          const double w = std::exp(0.3 * score);
          total += w;
          for (std::size_t c = 0; c < d; ++c) {
            weighted[c] += w * static_cast<double>(as_float(v[key * d + c]));
            magnitude[c] += w * std::fabs(static_cast<double>(as_float(v[key * d + c])));
          }
        }
        for (std::size_t c = 0; c < d; ++c, ++compared)
          o_outside += !(std::fabs(o[row * d + c] - weighted[c] / total) <= 1e-12 * magnitude[c] / total);
        lse_outside += !(std::fabs(lse[row] - std::log(total)) <= 1e-12 * (1 + std::fabs(lse[row])));
      }
    }
    CHECK(compared == 2 * 50 * 16);
    CHECK(o_outside == 0);
    CHECK(lse_outside == 0);
  }

  TEST_CASE("paper_forward_head and paper_reference_fp64_head refuse a head_dim below 1, a block below 1 key and spans of other lengths") {
    const attention_shape shape{1, 1, 2, 3, 4, false};
    const std::vector<bfloat16> q(8), k(12), v(12), short_k(11);
    std::vector<bfloat16> o(8), long_o(9);
    std::vector<float32> lse(2), short_lse(1);
    std::vector<double> o_hp(8), lse_hp(2), short_lse_hp(1);
    const paper_flash flash = paper_reference(shape);
    CHECK_NOTHROW(paper_forward_head(flash, shape, q, k, v, o, lse));
    CHECK_NOTHROW(paper_reference_fp64_head(shape, {}, q, k, v, o_hp, lse_hp));

    attention_shape no_dim = shape;
    no_dim.head_dim = 0;
    CHECK_THROWS_WITH_AS(paper_reference(no_dim), "paper_reference: head_dim 0 is not positive", std::invalid_argument);
    CHECK_THROWS_WITH_AS(paper_forward_head(flash, no_dim, q, k, v, o, lse),
                         "paper_forward_head: head_dim 0 is not positive", std::invalid_argument);
    no_dim.head_dim = -4;
    CHECK_THROWS_AS(paper_reference_fp64_head(no_dim, {}, q, k, v, o_hp, lse_hp), std::invalid_argument);

    CHECK_THROWS_WITH_AS(paper_forward_head(flash, shape, q, short_k, v, o, lse),
                         "paper_forward_head: k has length 11, expected key_rows * head_dim = 12",
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(paper_forward_head(flash, shape, q, k, short_k, o, lse),
                         "paper_forward_head: v has length 11, expected key_rows * head_dim = 12",
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(paper_forward_head(flash, shape, k, k, v, o, lse),
                         "paper_forward_head: q has length 12, expected query_rows * head_dim = 8",
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(paper_forward_head(flash, shape, q, k, v, long_o, lse),
                         "paper_forward_head: o has length 9, expected query_rows * head_dim = 8",
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(paper_forward_head(flash, shape, q, k, v, o, short_lse),
                         "paper_forward_head: lse has length 1, expected query_rows = 2",
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(paper_reference_fp64_head(shape, {}, q, k, v, o_hp, short_lse_hp),
                         "paper_reference_fp64_head: lse has length 1, expected query_rows = 2", std::invalid_argument);

    paper_flash no_block = flash;
    no_block.block_n = 0;
    CHECK_THROWS_WITH_AS(paper_forward_head(no_block, shape, q, k, v, o, lse),
                         "paper_forward_head: block_m 512 and block_n 0 must be at least 1", std::invalid_argument);
  }
}
