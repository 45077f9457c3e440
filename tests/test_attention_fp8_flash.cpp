// FA2's fp8 recipe (bitexact_flash_fp8_sm90 and its stabilized presets, bitexact's FP8 kernel in
// cuda/attention; its captures are replayed in test_attention_fp8.cpp): its contract through what it
// must equal. With every scale 1 and operands whose S and P-bar are exact in
// both, it is the bf16 FA2 preset's bits; a power-of-two scale_s is no change while no P leaves e4m3's
// normal range; the descales act where the contract puts them; one row computed by hand shows P-bar's
// e4m3 rounding in O; the descriptions are the FA2 ones with the fp8 fields (and the kernel's two choices
// of its own) changed; and every other combination is refused in one line naming the field.
#include <doctest/doctest.h>

#include <bitexact/attention/call.hpp>
#include <bitexact/attention/kernel_json.hpp>
#include <bitexact/attention/kernels.hpp>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "attention_captures.hpp"
#include <bitexact/testing/npy.hpp>

using namespace bitexact;
using namespace bitexact::attention;

namespace {

std::uint8_t e4m3_bits(float x) { return ptx::cvt_rn_satfinite_e4m3_f32(from_host(x)).bits; }

// An e4m3 pattern's value as bf16 (every e4m3 value is one).
bfloat16 bf16_of_e4m3(std::uint8_t bits) {
  return ptx::cvt_rn_bf16_f32(from_host(static_cast<float>(to_double(float8_e4m3::from_bits(bits)))));
}

// One head's operands as e4m3 patterns: [rows][d] and [keys][d].
struct fp8_head {
  attention_shape shape;
  std::vector<std::uint8_t> q, k, v;
};

// Random normal operands times `size`, as e4m3.
fp8_head normal_head(int rows, int keys, int d, bool causal, float size, unsigned seed) {
  fp8_head h{{1, 1, rows, keys, d, causal}, {}, {}, {}};
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal;
  for (int i = 0; i < rows * d; ++i) h.q.push_back(e4m3_bits(normal(generator) * size));
  for (int i = 0; i < keys * d; ++i) h.k.push_back(e4m3_bits(normal(generator) * size));
  for (int i = 0; i < keys * d; ++i) h.v.push_back(e4m3_bits(normal(generator)));
  return h;
}

// Operands whose S is exact on either tensor core and whose P are powers of two down to 2^-3 (with a scale
// of float(ln 2), c = 1): each query row one +-1 among the first four dims, keys -1, 0 or 1 there, so that
// S is -1, 0 or 1 (a stabilized max of 2 at most), and V of -1 to 1 in halves, so that every P V sum is
// exact on either unit.
fp8_head exact_head(int rows, int keys, int d, bool causal, unsigned seed) {
  fp8_head h{{1, 1, rows, keys, d, causal},
             std::vector<std::uint8_t>(static_cast<std::size_t>(rows * d), 0),
             std::vector<std::uint8_t>(static_cast<std::size_t>(keys * d), 0),
             {}};
  std::mt19937 generator(seed);
  std::uniform_int_distribution<int> dim(0, 3), sign(0, 1), trit(-1, 1), half_steps(-2, 2);
  for (int r = 0; r < rows; ++r) h.q[static_cast<std::size_t>(r * d + dim(generator))] = e4m3_bits(sign(generator) ? 1.0f : -1.0f);
  for (int key = 0; key < keys; ++key)
    for (int c = 0; c < 4; ++c) h.k[static_cast<std::size_t>(key * d + c)] = e4m3_bits(static_cast<float>(trit(generator)));
  for (int i = 0; i < keys * d; ++i) h.v.push_back(e4m3_bits(0.5f * static_cast<float>(half_steps(generator))));
  return h;
}

// O (bf16) and L of one head, as bits.
struct head_bits {
  std::vector<bfloat16> o;
  std::vector<float32> lse;
  bool operator==(const head_bits& other) const {
    if (o.size() != other.o.size() || lse.size() != other.lse.size()) return false;
    for (std::size_t i = 0; i < o.size(); ++i)
      if (o[i].bits != other.o[i].bits) return false;
    for (std::size_t i = 0; i < lse.size(); ++i)
      if (lse[i].bits != other.lse[i].bits) return false;
    return true;
  }
};

// Each softmax event's P: how many P-bar of an fp8 run are not bf16(P) (as values), the smallest
// nonzero fp32 P, and how many P were seen.
struct p_watch {
  std::size_t p_bar_not_bf16 = 0, seen = 0;
  float smallest = INFINITY;
  void on(const softmax_block_event& e) {
    for (std::size_t j = 0; j < e.p.size(); ++j) {
      ++seen;
      if (to_host(e.p[j]) != 0.0f) smallest = std::min(smallest, to_host(e.p[j]));
      if (!e.p_e4m3.empty() &&
          to_double(e.p_e4m3[j]) != to_double(ptx::cvt_rn_bf16_f32(e.p[j])))
        ++p_bar_not_bf16;
    }
  }
};

flash_kernel fp8_kernel(const kernel_description& d, const attention_shape& shape, double scale, const fp8_scales& s) {
  return resolve(d, shape, {scale, default_gpu(), {}, s});
}

template <class Observer = no_observer>
head_bits run_fp8(const flash_kernel& kernel, const fp8_head& h, Observer&& obs = {}) {
  head_bits out{std::vector<bfloat16>(h.q.size()), std::vector<float32>(static_cast<std::size_t>(h.shape.query_rows))};
  flash_forward_head(kernel, h.shape, std::span<const std::uint8_t>(h.q), std::span<const std::uint8_t>(h.k),
                     std::span<const std::uint8_t>(h.v), std::span<bfloat16>(out.o), std::span<float32>(out.lse), obs);
  return out;
}

head_bits run_bf16(const flash_kernel& kernel, const fp8_head& h) {
  const auto copy = [](const std::vector<std::uint8_t>& x) {
    std::vector<bfloat16> out;
    for (const std::uint8_t b : x) out.push_back(bf16_of_e4m3(b));
    return out;
  };
  head_bits out{std::vector<bfloat16>(h.q.size()), std::vector<float32>(static_cast<std::size_t>(h.shape.query_rows))};
  flash_forward_head(kernel, h.shape, copy(h.q), copy(h.k), copy(h.v), out.o, out.lse);
  return out;
}

fp8_scales unit_scales() { return {}; }

// The kernel's default scales: scale_s 256, descale_s 1/256.
fp8_scales scales_256() {
  fp8_scales s;
  s.scale_s = from_host(256.0f);
  s.descale_s = from_host(1.0f / 256);
  return s;
}

// d 64, one query row q = e_0, keys S = 0 and -1, V rows all 1 and all 0.5.
fp8_head hand_row() {
  fp8_head h{{1, 1, 1, 2, 64, false}, std::vector<std::uint8_t>(64, 0), std::vector<std::uint8_t>(128, 0), {}};
  h.q[0] = e4m3_bits(1.0f);
  h.k[64] = e4m3_bits(-1.0f);
  for (int c = 0; c < 64; ++c) h.v.push_back(e4m3_bits(1.0f));
  for (int c = 0; c < 64; ++c) h.v.push_back(e4m3_bits(0.5f));
  return h;
}

std::string refusal_of_json(const nlohmann::json& j) {
  try {
    kernel_from_json(j.dump());
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_SUITE("attention") {
  TEST_CASE("fp8 flash: with every scale 1, e4m3 operands whose S and P-bar are exact give the bf16 FA2 preset's "
            "O and L bits on their bf16 copies (each preset and its bf16 twin, d 64 and 128, causal and not)") {
    const std::pair<const char*, const char*> twins[] = {
        {"bitexact_flash_fp8_sm90", "pytorch_sdpa_flash_sm90"},
        {"bitexact_flash_fp8_sm90_stabilized", "pytorch_sdpa_flash_sm90_stabilized"},
        {"bitexact_flash_fp8_sm90_stabilized_across_blocks", "pytorch_sdpa_flash_sm90_stabilized_across_blocks"}};
    const double ln2 = static_cast<double>(static_cast<float>(0.6931471805599453));
    std::size_t compared = 0, p_seen = 0;
    for (const auto& [fp8, bf16_twin] : twins)
      for (const int d : {64, 128})
        for (const bool causal : {false, true}) {
          CAPTURE(fp8);
          CAPTURE(d);
          CAPTURE(causal);
          const fp8_head h = exact_head(130, 150, d, causal, static_cast<unsigned>(d + causal));
          const flash_kernel kernel = fp8_kernel(find_kernel(fp8), h.shape, ln2, unit_scales());
          REQUIRE(kernel.scale_log2 == from_host(1.0f));  // the exponent is S - m: P is a power of two
          // The bf16 twin on one call's shape takes its single kernel (one head: no split). Its 64-key blocks
          // at d 128 and its mul_then_sub exponent are no change here: every sum and exponent is exact.
          const flash_kernel twin = resolve(find_kernel(bf16_twin), h.shape, {ln2, default_gpu(), 1, {}});
          p_watch watch;
          const head_bits fp8_bits = run_fp8(kernel, h, watch);
          CHECK(watch.p_bar_not_bf16 == 0);  // the premise: P-bar's e4m3 and bf16 roundings agree
          CHECK(watch.smallest >= 0.125f);
          CHECK(fp8_bits == run_bf16(twin, h));
          compared += fp8_bits.o.size() + fp8_bits.lse.size();
          p_seen += watch.seen;
        }
    MESSAGE(compared << " O and L compared; " << p_seen << " P-bar checked");
    CHECK(compared == 3 * 2 * 2 * 130 + 3 * 2 * 130 * (64 + 128));
  }

  TEST_CASE("fp8 flash: scale_s 256 with descale_s 1/256 gives the bits of scale_s 1 while no P leaves e4m3's "
            "normal range, and other bits once some does") {
    fp8_scales plain;
    plain.descale_q = from_host(0.75f);
    plain.descale_k = from_host(1.25f);
    plain.descale_v = from_host(0.37f);
    plain.scale_o = from_host(3.1f);
    fp8_scales scaled = plain;
    scaled.scale_s = from_host(256.0f);
    scaled.descale_s = from_host(1.0f / 256);
    std::size_t compared = 0;
    for (const int d : {64, 128})
      for (const bool causal : {false, true}) {
        CAPTURE(d);
        CAPTURE(causal);
        const fp8_head h = normal_head(130, 300, d, causal, 1.0f, static_cast<unsigned>(7 * d + causal));
        // A small scale: every P is 2^-6 or more (or 0, masked).
        const kernel_description preset = find_kernel("bitexact_flash_fp8_sm90");
        p_watch watch;
        const head_bits one = run_fp8(fp8_kernel(preset, h.shape, 0.02, plain), h, watch);
        CHECK(watch.smallest >= 0.015625f);
        CHECK(run_fp8(fp8_kernel(preset, h.shape, 0.02, scaled), h) == one);
        compared += one.o.size() + one.lse.size();
        // A large one: P far below 2^-6 are 0 or subnormal in e4m3 at scale_s 1, normal at 256.
        p_watch wide;
        const head_bits wide_one = run_fp8(fp8_kernel(preset, h.shape, 1.5, plain), h, wide);
        CHECK(wide.smallest < 1e-4f);
        CHECK_FALSE(run_fp8(fp8_kernel(preset, h.shape, 1.5, scaled), h) == wide_one);
      }
    CHECK(compared == 2 * 130 * (64 + 1) + 2 * 130 * (128 + 1));
  }

  TEST_CASE("fp8 flash: descale_v 2 doubles every O exactly and leaves L; descale_q or descale_k 2 with the scale "
            "halved changes no bit, without halving it does") {
    const fp8_head h = normal_head(130, 200, 64, true, 1.0f, 3);
    const kernel_description preset = find_kernel("bitexact_flash_fp8_sm90");
    fp8_scales s;
    s.scale_s = from_host(256.0f);
    s.descale_s = from_host(1.0f / 256);
    const head_bits base = run_fp8(fp8_kernel(preset, h.shape, 0.125, s), h);
    fp8_scales v2 = s;
    v2.descale_v = from_host(2.0f);
    const head_bits doubled = run_fp8(fp8_kernel(preset, h.shape, 0.125, v2), h);
    std::size_t nonzero = 0;
    for (std::size_t i = 0; i < base.o.size(); ++i) {
      CHECK(to_double(doubled.o[i]) == 2 * to_double(base.o[i]));
      nonzero += to_double(base.o[i]) != 0;
    }
    CHECK(nonzero > base.o.size() / 2);
    for (std::size_t i = 0; i < base.lse.size(); ++i) CHECK(doubled.lse[i].bits == base.lse[i].bits);
    for (float32 fp8_scales::*descale : {&fp8_scales::descale_q, &fp8_scales::descale_k}) {
      fp8_scales two = s;
      two.*descale = from_host(2.0f);
      CHECK(run_fp8(fp8_kernel(preset, h.shape, 0.0625, two), h) == base);
      CHECK_FALSE(run_fp8(fp8_kernel(preset, h.shape, 0.125, two), h) == base);
      // scale' = RN(RN(scale descale_q) descale_k) is the kernel's scale: L's and the tie test's too.
      CHECK(fp8_kernel(preset, h.shape, 0.0625, two).scale == from_host(0.125f));
    }
  }

  TEST_CASE("fp8 flash: one row by hand, P = 0.97 stored as e4m3(0.97 * 256) = 256 changes O as predicted") {
    const fp8_head h = hand_row();
    const fp8_scales s = scales_256();
    const flash_kernel kernel = fp8_kernel(find_kernel("bitexact_flash_fp8_sm90"), h.shape, 0.0305, s);
    // P_1 = exp2f(RN(-1 * c)) (the max is 0: RN(0 * c) = 0).
    const float p1 = to_host(ptx::ex2_approx(ptx::mul_f32(from_host(-1.0f), kernel.scale_log2)));
    REQUIRE(p1 * 256 > 248.0f);  // nearer 256 than e4m3's 240 below it
    REQUIRE(p1 * 256 < 256.0f);
    REQUIRE(p1 > 0.96f);
    REQUIRE(p1 < 0.98f);
    struct p_bar_record {
      std::vector<std::uint8_t> bits;
      void on(const softmax_block_event& e) {
        for (const float8_e4m3 x : e.p_e4m3) bits.push_back(x.bits);
      }
    } seen;
    const head_bits out = run_fp8(kernel, h, seen);
    REQUIRE(seen.bits.size() == 128);  // one block of 128 keys, 126 of them masked
    CHECK(seen.bits[0] == 0x78);       // 256
    CHECK(seen.bits[1] == 0x78);       // e4m3(248.3...) = 256
    for (std::size_t j = 2; j < seen.bits.size(); ++j) CHECK(seen.bits[j] == 0);
    // By hand: l = RN(1 + P_1) (thread 0 holds keys 0 and 1), P V = 256 + 128 = 384 exactly, and
    // O = RN(384 RN(RN(1 / l) / 256)), all in fp32.
    const float l = 1.0f + p1;
    const float factor = (1.0f / l) * (1.0f / 256);
    const bfloat16 by_hand = ptx::cvt_rn_bf16_f32(from_host(384.0f * factor));
    for (const bfloat16 o : out.o) CHECK(o.bits == by_hand.bits);
    // Unrounded, 256 + 0.5 * 248.3... would have given another bf16.
    const bfloat16 unrounded = ptx::cvt_rn_bf16_f32(from_host((256.0f + 128.0f * p1) * factor));
    CHECK(unrounded.bits != by_hand.bits);
    // L = FFMA(0, scale', RN(lg2(l) ln 2)).
    CHECK(out.lse[0] == ptx::mul_f32(ptx::lg2_approx(from_host(l)), from_host(0.693147182f)));
    MESSAGE(fmt::format("P_1 {}, O {} (bf16 0x{:04X}); P-bar unrounded would give 0x{:04X}", p1, to_double(by_hand),
                        by_hand.bits, unrounded.bits));
  }

  TEST_CASE("fp8 flash: l of P-bar (p_bar_sum) on the same row: O's weights are P-bar over their own sum") {
    const fp8_head h = hand_row();
    const flash_kernel kernel =
        fp8_kernel(find_kernel("bitexact_flash_fp8_sm90_pv_fp32_add_p_bar_sum"), h.shape, 0.0305, scales_256());
    CHECK(kernel.row_sum == row_sum_rule::thread_partials_of_p_bar);
    // P-bar 256 and 256 (thread 0's keys): l = RN(RN(256 + 256) / 256) = 2, P V = 384 from +0 then added to
    // O = 0, and O = RN(384 RN(RN(1 / 2) / 256)) = 0.75 exactly: the two keys weigh the same, as their
    // P-bar do. L = RN(lg2(2) ln 2).
    const head_bits out = run_fp8(kernel, h);
    for (const bfloat16 o : out.o) CHECK(o.bits == 0x3F40);
    CHECK(out.lse[0] == ptx::mul_f32(ptx::lg2_approx(from_host(2.0f)), from_host(0.693147182f)));
    // Promoted alone, l sums the fp32 P: on this one-block row the standard preset's bits, not 0.75.
    const head_bits promoted =
        run_fp8(fp8_kernel(find_kernel("bitexact_flash_fp8_sm90_pv_fp32_add"), h.shape, 0.0305, scales_256()), h);
    CHECK(promoted == run_fp8(fp8_kernel(find_kernel("bitexact_flash_fp8_sm90"), h.shape, 0.0305, scales_256()), h));
    CHECK(promoted.o[0].bits != 0x3F40);
  }

  TEST_CASE("fp8 flash: under p_bar_sum a power-of-two descale_s cancels in O and moves L; with l of P it scales O") {
    const fp8_head h = normal_head(130, 300, 64, true, 1.0f, 5);
    fp8_scales quarter = scales_256();
    quarter.descale_s = from_host(1.0f / 64);
    std::size_t compared = 0;
    for (const char* name : {"bitexact_flash_fp8_sm90_pv_fp32_add_p_bar_sum", "bitexact_flash_fp8_sm90_pv_fp32_add"}) {
      CAPTURE(name);
      const bool p_bar_sum = std::string(name).ends_with("p_bar_sum");
      const head_bits base = run_fp8(fp8_kernel(find_kernel(name), h.shape, 0.125, scales_256()), h);
      const head_bits moved = run_fp8(fp8_kernel(find_kernel(name), h.shape, 0.125, quarter), h);
      std::size_t nonzero = 0;
      for (std::size_t i = 0; i < base.o.size(); ++i, ++compared) {
        CHECK(to_double(moved.o[i]) == (p_bar_sum ? 1 : 4) * to_double(base.o[i]));
        nonzero += to_double(base.o[i]) != 0;
      }
      CHECK(nonzero > base.o.size() / 2);
      std::size_t l_moved = 0;
      for (std::size_t i = 0; i < base.lse.size(); ++i) l_moved += moved.lse[i].bits != base.lse[i].bits;
      CHECK(l_moved == (p_bar_sum ? base.lse.size() : 0));
    }
    CHECK(compared == 2 * 130 * 64);
  }

  TEST_CASE("fp8 flash: the presets are the FA2 descriptions with the fp8 fields changed, and survive JSON") {
    const std::pair<const char*, const char*> twins[] = {
        {"bitexact_flash_fp8_sm90", "pytorch_sdpa_flash_sm90"},
        {"bitexact_flash_fp8_sm90_stabilized", "pytorch_sdpa_flash_sm90_stabilized"},
        {"bitexact_flash_fp8_sm90_stabilized_across_blocks", "pytorch_sdpa_flash_sm90_stabilized_across_blocks"}};
    for (const auto& [fp8, bf16_twin] : twins) {
      CAPTURE(fp8);
      const kernel_description d = find_kernel(fp8);
      nlohmann::ordered_json expected = kernel_to_json(find_kernel(bf16_twin));
      expected["name"] = fp8;
      expected["summary"] = d.summary;
      expected["split_kv"] = "none";
      expected.erase("split_tiles");
      expected["tensor_core"] = "sm90_fp8";
      // The kernel's own choices: 128-key blocks at d 128 and the exponent one FFMA (its captures show
      // them), and under the standard max P from MUFU.EX2 alone (no bit shows it).
      expected["tiles"]["128"]["block_n"] = 128;
      expected["exponent"] = "fma";
      if (!d.arithmetic.stabilize) expected["exponential"] = "ex2.approx.ftz.f32 for P";
      CHECK(kernel_to_json(d).dump().find("\"inputs\":\"e4m3\"") != std::string::npos);
      nlohmann::ordered_json actual = kernel_to_json(d);
      // The fields fp8 adds, in the order kernel_to_json writes them.
      CHECK(actual["inputs"] == "e4m3");
      CHECK(actual["p_rounding"] == "cvt.rn.satfinite.e4m3x2.f32");
      CHECK(actual["p_scale"] == "multiply");
      CHECK_FALSE(actual.contains("o_rounding"));  // bf16 O
      for (const char* field : {"inputs", "p_scale"}) actual.erase(field);
      actual["p_rounding"] = "cvt.rn.bf16.f32";
      CHECK(actual == expected);
      CHECK(kernel_to_json(kernel_from_json(kernel_to_json(d).dump())) == kernel_to_json(d));
      CHECK(d.tiles.size() == 2);
      CHECK(tiles_for(d, 64, 1).block_m == 128);
      CHECK(tiles_for(d, 64, 1).block_n == 128);
      CHECK(tiles_for(d, 128, 1).block_m == 128);
      CHECK(tiles_for(d, 128, 1).block_n == 128);
    }
    CHECK(find_kernel("bitexact_flash_fp8_sm90").summary ==
          "bitexact's FP8 flash-attention forward for Hopper (cuda/attention, e4m3 Q K V, bf16 O), sm_90");
    // cuDNN's fp8 description is byte for byte what it was before FA2's fp8 recipe came.
    CHECK(kernel_to_json(find_kernel("cudnn_sdpa_fp8_sm90")).dump() ==
          R"({"name":"cudnn_sdpa_fp8_sm90","summary":"cuDNN 9.19's fp8 SDPA forward (sdpa_fp8, Transformer Engine's )"
          R"(path) on sm_90: e4m3 Q, K, V with descales, e4m3 O, fp32 Stats","tiles":{"64":{"block_m":64,"block_n":)"
          R"(256},"128":{"block_m":64,"block_n":256}},"split_kv":"none","tensor_core":"sm90_fp8","block_order":)"
          R"("first_to_last","scale_placement":"exponent","exponent":"mul_then_sub","scale_log2_from":)"
          R"("float_product","causal_alignment":"top_left","max_units":"exponent","exponential":)"
          R"("ex2.approx.ftz.f32","masked_max":"zero_shift","row_sum":"thread_block_sums_descaled_fma","rescale":)"
          R"("every_block","inputs":"e4m3","p_rounding":"cvt.rn.satfinite.e4m3x2.f32","p_scale":"lg2_offset",)"
          R"("o_rounding":"cvt.rn.satfinite.e4m3x2.f32","normalization":"rcp.approx.ftz.f32","lse_formula":)"
          R"("max_ln2_plus_lg2_ln2","lse_units":"natural","alu_ftz":true})");
  }

  TEST_CASE("fp8 flash: every other field value of FA2's fp8 recipe, p_scale multiply elsewhere, and bad scales "
            "are refused in one line naming the field") {
    const nlohmann::json ours = kernel_to_json(find_kernel("bitexact_flash_fp8_sm90"));
    struct edit {
      const char* field;
      nlohmann::json value;
      const char* message;
    };
    const edit edits[] = {
        {"p_rounding", "cvt.rn.bf16.f32", "p_rounding must be cvt.rn.satfinite.e4m3x2.f32 with e4m3 inputs and max_units scores"},
        {"p_scale", "none", "p_scale must be multiply with e4m3 inputs and max_units scores"},
        {"p_scale", "lg2_offset", "p_scale must be multiply with e4m3 inputs and max_units scores"},
        {"o_rounding", "cvt.rn.satfinite.e4m3x2.f32", "o_rounding must be cvt.rn.bf16.f32 with e4m3 inputs and max_units scores"},
        {"normalization", "div.full.f32", "normalization must be reciprocal_then_multiply with e4m3 inputs"},
        {"exponential", "ex2.approx.ftz.f32", "exponential ex2.approx.ftz.f32 would flush alpha too with e4m3 inputs"},
        {"exponential", "ex2.approx.f32",
         "exponential ex2.approx.f32 gives the bits of ex2.approx.ftz.f32 for P with e4m3 inputs and max_units scores "
         "and no stabilize rule"},
        {"scale_log2_from", "float_product", "field 'scale_log2_from': fp8 inputs with max_units scores (FA2's recipe)"},
        {"scale_log2_from", "double_scale", "field 'scale_log2_from': fp8 inputs with max_units scores (FA2's recipe)"},
        {"tensor_core", "sm90", "tensor_core sm90 does not take e4m3 inputs"},
        {"row_sum", "thread_block_sums_descaled_fma", "row_sum block_sum_then_fma, warp_slices_then_add"},
        {"row_sum", "block_sum_then_fma", "thread_partials_across_blocks or thread_partials_of_p_bar with scores"},
        {"max_units", "exponent", "goes with max_units exponent, flash2 with max_units scores"},
    };
    for (const edit& e : edits) {
      nlohmann::json j = ours;
      j[e.field] = e.value;
      const std::string refusal = refusal_of_json(j);
      CAPTURE(e.field);
      CHECK(refusal.find(e.message) != std::string::npos);
      CHECK(refusal.find(e.field) != std::string::npos);
      CHECK(refusal.find('\n') == std::string::npos);
    }
    // P from MUFU.EX2 alone only under the standard max: beta m can leave a row's every P subnormal.
    nlohmann::json stabilized = kernel_to_json(find_kernel("bitexact_flash_fp8_sm90_stabilized"));
    stabilized["exponential"] = "ex2.approx.ftz.f32 for P";
    CHECK(refusal_of_json(stabilized).find("exponential ex2.approx.ftz.f32 for P needs no stabilize rule") !=
          std::string::npos);
    // A preset's description with one field set, as refused.
    const auto refusal_of_edit = [](const char* preset, const char* field, const char* value) {
      nlohmann::json j = kernel_to_json(find_kernel(preset));
      j[field] = value;
      return refusal_of_json(j);
    };
    // l of P-bar sums an e4m3 P-bar: refused on bf16 inputs and in cuDNN's recipe (max_units exponent).
    CHECK(refusal_of_edit("pytorch_sdpa_flash_sm90", "row_sum", "thread_partials_of_p_bar") ==
          "kernel description: row_sum thread_partials_of_p_bar sums an e4m3 P-bar (fp8 inputs, max_units scores)");
    CHECK(refusal_of_edit("cudnn_sdpa_fp8_sm90", "row_sum", "thread_partials_of_p_bar")
              .find("goes with max_units exponent, thread_partials_across_blocks or thread_partials_of_p_bar with "
                    "scores") != std::string::npos);
    // Split-KV: no split path for fp8 (the combine writes bf16 from a bf16 P V).
    nlohmann::json split = ours;
    split["split_kv"] = "flash2_heuristic";
    split["split_tiles"] = {{"64", {{"block_m", 64}, {"block_n", 256}}}};
    CHECK(refusal_of_json(split) ==
          "kernel description: field 'split_tiles.64': split-KV (splits > 1) is modelled for bf16 inputs only (its "
          "combine kernel writes bf16 O from bf16 P V)");
    // p_scale multiply is FA2's fp8 recipe: refused with bf16 inputs, and in cuDNN's recipe.
    CHECK(refusal_of_edit("pytorch_sdpa_flash_sm90", "p_scale", "multiply") ==
          "kernel description: p_scale multiply is modelled with fp8 inputs only");
    CHECK(refusal_of_edit("cudnn_sdpa_fp8_sm90", "p_scale", "multiply") ==
          "kernel description: p_scale must be lg2_offset with e4m3 inputs and max_units exponent (cuDNN's fp8 recipe)");
    CHECK(refusal_of_edit("cudnn_sdpa_fp8_sm90", "scale_log2_from", "float_scale")
              .starts_with("kernel description: field 'scale_log2_from': fp8 inputs with max_units exponent (cuDNN's "
                           "recipe)"));
    // The same description built in C++, not read from JSON: resolve() refuses it.
    kernel_description product = find_kernel("bitexact_flash_fp8_sm90");
    product.scale_log2_from = scale_log2_source::float_product;
    CHECK_THROWS_WITH_AS(resolve(product, {1, 1, 64, 64, 64, false}),
                         doctest::Contains("kernel bitexact_flash_fp8_sm90: fp8 inputs with max_units scores"),
                         std::invalid_argument);
    // A call's scales: each positive and finite; split-KV, bf16 operands and an e4m3 O refused.
    attention_call call;
    call.model = model_choice(find_preset("bitexact_flash_fp8_sm90"));
    call.shape = {1, 1, 64, 256, 128, false};
    const auto refusal = [](const attention_call& c) { return test::refusal_of(c); };
    CHECK(refusal(call).empty());
    for (std::size_t i = 0; i < std::size(fp8_scale_names); ++i)
      for (const double bad : {0.0, -1.0, 1e300, std::nan("")}) {
        attention_call c = call;
        c.fp8_scales[i] = bad;
        const std::string why = refusal(c);
        CHECK(why.starts_with(std::string(fp8_scale_names[i]) + " "));
        CHECK(why.find("is not a positive finite number") != std::string::npos);
        CHECK(why.find('\n') == std::string::npos);
        fp8_scales direct;
        direct.*fp8_scale_fields[i] = from_host(static_cast<float>(bad));
        const std::string named = "kernel bitexact_flash_fp8_sm90: " + std::string(fp8_scale_names[i]) + " ";
        CHECK_THROWS_WITH_AS(resolve(find_kernel("bitexact_flash_fp8_sm90"), call.shape, {{}, default_gpu(), {}, direct}),
                             doctest::Contains(named.c_str()), std::invalid_argument);
      }
    // scale_s above 448 would store the row max's P-bar saturated: refused (448 itself is taken).
    attention_call saturating = call;
    saturating.fp8_scales[4] = 449.0;
    CHECK(refusal(saturating) == "scale_s 449 saturates the row max's P-bar (e4m3's largest finite value is 448)");
    fp8_scales direct_449;
    direct_449.scale_s = from_host(449.0f);
    CHECK_THROWS_WITH_AS(resolve(find_kernel("bitexact_flash_fp8_sm90"), call.shape, {{}, default_gpu(), {}, direct_449}),
                         "kernel bitexact_flash_fp8_sm90: scale_s 449.000000 saturates the row max's P-bar (e4m3's "
                         "largest finite value is 448)",
                         std::invalid_argument);
    saturating.fp8_scales[4] = 448.0;
    CHECK(refusal(saturating).empty());
    // cuDNN's recipe puts scale_s into the exponent (p_scale lg2_offset): its own arithmetic, not refused here.
    saturating.model = model_choice(find_preset("cudnn_sdpa_fp8_sm90"));
    saturating.fp8_scales[4] = 449.0;
    CHECK(refusal(saturating).empty());
    attention_call split_call = call;
    split_call.splits = 2;
    CHECK(refusal(split_call) == "kernel bitexact_flash_fp8_sm90 has no split-KV path (split is none)");
    const resolved_call r = resolve_call(call);
    CHECK(r.o_format() == bf16);
    std::vector<std::uint8_t> q8(64 * 128), kv8(256 * 128);
    std::vector<float8_e4m3> o8(64 * 128);
    std::vector<bfloat16> q(64 * 128), kv(256 * 128), o(64 * 128);
    std::vector<float32> lse(64);
    CHECK_THROWS_WITH_AS(forward(r, q8, kv8, kv8, o8, lse), "kernel bitexact_flash_fp8_sm90 writes O as bf16, not e4m3",
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(forward(r, q, kv, kv, o, lse),
                         "kernel bitexact_flash_fp8_sm90 takes e4m3 Q, K and V (fp8 bit patterns), not bf16",
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(flash_forward_head(*r.kernel, r.head, std::span<const std::uint8_t>(q8),
                                            std::span<const std::uint8_t>(kv8), std::span<const std::uint8_t>(kv8),
                                            std::span<float8_e4m3>(o8), std::span<float32>(lse)),
                         "flash_forward_head: the kernel writes O as bf16 (its o_rounding), not e4m3",
                         std::invalid_argument);
    forward(r, q8, kv8, kv8, o, lse);  // the bf16 O it writes: zeros in, zeros out
    for (const bfloat16 x : o) CHECK(x.bits == 0);
    // cuDNN's writes e4m3, and refuses a bf16 O.
    attention_call cudnn = call;
    cudnn.model = model_choice(find_preset("cudnn_sdpa_fp8_sm90"));
    CHECK_THROWS_WITH_AS(forward(resolve_call(cudnn), q8, kv8, kv8, o, lse),
                         "kernel cudnn_sdpa_fp8_sm90 writes O as e4m3, not bf16", std::invalid_argument);
  }

  TEST_CASE("fp8 flash: P from MUFU.EX2 alone gives exp2f's bits under the standard max, where exp2f's P is "
            "subnormal") {
    // Each row's scores: 1.25 * 448 for keys 0..3 (the max, tied), 0 for keys 4..63 and 1.25 * -448 for the
    // rest, whose exponent -(1120 c) is about -142.8: exp2f gives a subnormal P there, MUFU.EX2 alone 0.
    const int rows = 16, keys = 256, d = 128;
    const double c = static_cast<float>(std::log2(std::exp(1.0)) * static_cast<float>(1 / std::sqrt(128.0)));
    CHECK(1120 * c > 126);
    CHECK(1120 * c < 149);
    fp8_head h{{1, 1, rows, keys, d, false}, std::vector<std::uint8_t>(rows * d), std::vector<std::uint8_t>(keys * d),
               std::vector<std::uint8_t>(keys * d)};
    for (int r = 0; r < rows; ++r) h.q[r * d] = 0x3A;  // 1.25
    for (int j = 0; j < keys; ++j) {
      h.k[j * d] = j < 4 ? 0x7E : j < 64 ? 0x00 : 0xFE;  // 448, 0, -448
      for (int e = 0; e < d; ++e)  // e4m3 of either sign below 2, never NaN
        h.v[j * d + e] = static_cast<std::uint8_t>((j * 37 + e * 11) % 0x40 | (j + e) % 2 << 7);
    }
    // exp2f for P is refused under the standard max (one name for the same bits): it runs here under a
    // stabilize rule that never fires (epsilon -inf).
    const auto bits_of = [&](bool exp2f_for_p) {
      attention_call call;
      call.model = model_choice(find_preset("bitexact_flash_fp8_sm90"));
      call.shape = h.shape;
      resolved_call r = resolve_call(call);
      if (exp2f_for_p) {
        r.kernel->exponential = exponential_unit::ex2_approx_f32;
        r.kernel->stabilize = stabilized_max{from_host(2.0f), float32::infinity(true), false};
      }
      head_bits out{std::vector<bfloat16>(h.q.size()), std::vector<float32>(rows)};
      forward(r, h.q, h.k, h.v, out.o, out.lse);
      return out;
    };
    CHECK(bits_of(false) == bits_of(true));
  }

  TEST_CASE("fp8 flash: P-bar from P's bits plus k << 23 is e4m3(RN(P * 2^k)) for P in [0, 2^(128 - k)), no NaN") {
    // The kernel's p_exponent (cuda/attention/flash_api.cuh, p_exponent_of): for scale_s = 2^k it adds k << 23
    // to P's bits on the ALU in place of the FMUL, under the standard rule while P stays below 2^32. Here
    // every exponent field with mantissas on each side of every rounding point e4m3 has there (bit b of
    // the mantissa at 1, alone and with its neighbours) and a stride through the rest.
    std::vector<std::uint32_t> mantissas;
    for (std::uint32_t m = 0; m < (1u << 23); m += 4099) mantissas.push_back(m);
    for (int b = 0; b < 23; ++b)
      for (std::uint32_t j = 1; j < 8; ++j)
        for (const std::uint32_t near : {(j << b) - 1, j << b, (j << b) + 1, (1u << 23) - (j << b)})
          mantissas.push_back(near & ((1u << 23) - 1));
    long compared = 0, differ = 0;
    for (int k = 1; k <= 8; ++k) {
      const float32 scale_s = from_host(static_cast<float>(1 << k));
      for (std::uint32_t exponent = 0; exponent < 255u - k; ++exponent)
        for (const std::uint32_t m : mantissas) {
          const std::uint32_t p = exponent << 23 | m;
          const float8_e4m3 by_fmul = ptx::cvt_rn_satfinite_e4m3_f32(ptx::mul_f32(float32::from_bits(p), scale_s));
          const float8_e4m3 by_add = ptx::cvt_rn_satfinite_e4m3_f32(float32::from_bits(p + (std::uint32_t(k) << 23)));
          ++compared;
          differ += by_fmul.bits != by_add.bits;
        }
      // Past the range they part: just above 2^(128 - k) the product overflows to inf, 448 after
      // satfinite, where the add reaches a NaN's bits; a NaN P's P-bar is a NaN against the add's -0 (why
      // finish_rows makes such a row NaN).
      const std::uint32_t past = (255u - k) << 23 | 1, nan = 0x7FFFFFFFu;
      CHECK(ptx::cvt_rn_satfinite_e4m3_f32(ptx::mul_f32(float32::from_bits(past), scale_s)).bits == 0x7E);
      CHECK(ptx::cvt_rn_satfinite_e4m3_f32(float32::from_bits(past + (std::uint32_t(k) << 23))).bits == 0x7F);
      CHECK(ptx::cvt_rn_satfinite_e4m3_f32(ptx::mul_f32(float32::from_bits(nan), scale_s)).bits == 0x7F);
      CHECK(ptx::cvt_rn_satfinite_e4m3_f32(float32::from_bits(nan + (std::uint32_t(k) << 23))).bits == 0x80);
    }
    MESSAGE(compared << " P compared, " << differ << " P-bar differ");
    CHECK(compared > 4000000);
    CHECK(differ == 0);
  }

  TEST_CASE("fp8 flash: a stabilized fp8 preset takes the call's beta, and on tied maxima it changes the bits") {
    const fp8_head h = exact_head(130, 150, 64, false, 5);
    attention_call call;
    call.shape = h.shape;
    call.scale = static_cast<double>(static_cast<float>(0.6931471805599453));
    const auto bits_of = [&](const char* preset, std::optional<float32> beta) {
      attention_call c = call;
      c.model = model_choice(find_preset(preset));
      c.beta = beta;
      const resolved_call r = resolve_call(c);
      head_bits out{std::vector<bfloat16>(h.q.size()), std::vector<float32>(130)};
      forward(r, h.q, h.k, h.v, out.o, out.lse);
      return out;
    };
    const head_bits plain = bits_of("bitexact_flash_fp8_sm90", {});
    const head_bits stabilized = bits_of("bitexact_flash_fp8_sm90_stabilized", {});
    // The maxima repeat (S is -1, 0 or 1): the rule moves m, and L with it (O's P are powers of two, scaled alike).
    CHECK_FALSE(stabilized == plain);
    CHECK_FALSE(bits_of("bitexact_flash_fp8_sm90_stabilized", from_host(1.5f)) == stabilized);
  }
}
