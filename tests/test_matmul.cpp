// The GEMM emulator's chain (matmul/chain.hpp) against the tensor-core model
// it is built from: every output of A B equals fused_dot's chain of fused
// steps over K (zero-padded to whole steps), for shapes that are not whole
// tiles, on any number of threads.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include <bitexact/matmul/gemm.hpp>
#include <bitexact/matmul/kernels.hpp>
#include <bitexact/matmul/description_json.hpp>

using namespace bitexact;

namespace {

std::vector<bfloat16> random_matrix(std::size_t size, unsigned seed, int exponent_spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<bfloat16> x(size);
  for (bfloat16& v : x)
    v = convert<bf16>(from_host(std::ldexp(normal(rng), static_cast<int>(rng() % (2 * exponent_spread + 1)) - exponent_spread)))
            .result;
  return x;
}

// D[i][j] by fused_dot on row i of A and column j of B, both zero-padded to whole k steps.
float32 reference(const std::vector<bfloat16>& a, const std::vector<bfloat16>& b, std::size_t n, std::size_t k,
                  std::size_t i, std::size_t j) {
  const std::size_t padded = (k + 15) / 16 * 16;
  std::vector<bfloat16> row(padded), column(padded);
  for (std::size_t x = 0; x < k; ++x) row[x] = a[i * k + x], column[x] = b[x * n + j];
  return fused_dot<fp32>(sm90_tensor_core, std::span<const bfloat16>(row), std::span<const bfloat16>(column), float32{})
      .result;
}

}  // namespace

TEST_CASE("matmul chain: every output is fused_dot's chain over K, on shapes that are not whole tiles") {
  std::size_t compared = 0;
  for (const auto& [m, n, k] : {std::array<std::size_t, 3>{37, 23, 100}, {16, 8, 16}, {1, 1, 1}, {5, 70, 333}}) {
    const std::vector<bfloat16> a = random_matrix(m * k, 1, 12), b = random_matrix(k * n, 2, 12);
    const matmul::packed_operands<bf16> p = matmul::pack<bf16>(a, b, m, n, k);
    std::vector<float32> d(m * n);
    matmul::chain_products<fp32, bf16>(sm90_tensor_core, p, 0, p.k_steps, d);
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j, ++compared) CHECK(d[i * n + j].bits == reference(a, b, n, k, i, j).bits);
  }
  MESSAGE(compared << " outputs compared with fused_dot");
  CHECK(compared == 37 * 23 + 16 * 8 + 1 + 5 * 70);
}

TEST_CASE("matmul chain: one thread and every core give the same bits") {
  const std::size_t m = 100, n = 90, k = 260;
  const std::vector<bfloat16> a = random_matrix(m * k, 3, 30), b = random_matrix(k * n, 4, 30);
  const matmul::packed_operands<bf16> p = matmul::pack<bf16>(a, b, m, n, k);
  std::vector<float32> one(m * n), all(m * n), three(m * n);
  matmul::chain_products<fp32, bf16>(sm90_tensor_core, p, 0, p.k_steps, one, 1);
  matmul::chain_products<fp32, bf16>(sm90_tensor_core, p, 0, p.k_steps, all, 0);
  matmul::chain_products<fp32, bf16>(sm90_tensor_core, p, 0, p.k_steps, three, 3);
  int differ = 0;
  for (std::size_t i = 0; i < m * n; ++i) differ += one[i].bits != all[i].bits || one[i].bits != three[i].bits;
  CHECK(differ == 0);
}

TEST_CASE("matmul split_range: the splits take every K position once, in order, each a whole number of K tiles") {
  int checked = 0;
  for (const int splits : {1, 2, 3, 5, 12, 25})
    for (const std::size_t k_tile : {std::size_t{16}, std::size_t{64}, std::size_t{128}})
      for (const std::size_t k : {std::size_t{1}, std::size_t{100}, std::size_t{3000}, std::size_t{32768}}) {
        matmul::gemm_description d = matmul::find_gemm_preset("cublas_sm90");
        d.splits = splits, d.k_tile = d.ragged_split_alignment = k_tile;
        std::size_t next = 0;
        for (int s = 0; s < splits; ++s) {
          const auto [first, end] = matmul::split_range(d, k, s);
          CHECK(first <= end);
          if (first == end) continue;
          CHECK(first == next);
          if (s + 1 < splits && end < k) CHECK(end % k_tile == 0);
          next = end;
        }
        CHECK(next == k);
        ++checked;
      }
  CHECK(checked == 6 * 3 * 4);
  // 96 x 200 x 3000 in 2 splits: ceil(3000 / 2) = 1500, rounded up to 1536 (24 K tiles of 64).
  matmul::gemm_description d = matmul::find_gemm_preset("cublas_sm90");
  d.splits = 2;
  CHECK(matmul::split_range(d, 3000, 0) == std::pair<std::size_t, std::size_t>{0, 1536});
  CHECK(matmul::split_range(d, 3000, 1) == std::pair<std::size_t, std::size_t>{1536, 3000});
}

TEST_CASE("matmul split_range: cuBLAS's tf32 kernels cut a ragged K at multiples of 4, a K of whole tiles at tiles") {
  matmul::gemm_description d = matmul::find_gemm_preset("cublas_sm90_tf32");
  d.splits = 8;  // 96 x 200 x 2000 on the H100: ceil(2000 / 8) = 250, rounded up to 252
  CHECK(matmul::split_range(d, 2000, 0) == std::pair<std::size_t, std::size_t>{0, 252});
  CHECK(matmul::split_range(d, 2000, 7) == std::pair<std::size_t, std::size_t>{1764, 2000});
  d.splits = 24;  // 128 x 128 x 4096: ceil(4096 / 24) = 171, rounded up to 192 (six tiles of 32), 22 splits launched
  CHECK(matmul::split_range(d, 4096, 21) == std::pair<std::size_t, std::size_t>{4032, 4096});
  CHECK(matmul::split_range(d, 4096, 22).first == 4096);
}

namespace {

std::vector<value<e4m3>> random_e4m3(std::size_t size, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<value<e4m3>> x(size);
  for (auto& v : x) v = value<e4m3>::from_bits(static_cast<std::uint32_t>(rng() % 0x7F) | 0x80u * (rng() & 1));
  return x;
}

// size fp32 values of either sign with random significands, in [2^(first - 127), 2^(first - 125)):
// every bit below tf32's set somewhere.
std::vector<float32> random_fp32(std::size_t size, unsigned seed, std::uint32_t first_exponent) {
  std::mt19937 rng(seed);
  std::vector<float32> x(size);
  for (float32& v : x) v = float32::from_bits((rng() % 0x01000000u + (first_exponent << 23)) | (rng() & 1) << 31);
  return x;
}

// D of the description read back from `json` (changed by `change`), for
// inputs on which every field has work to do: K = 1000 in two splits, C with
// alpha and beta, into fp32; or fp8 with block scales of both kinds.
// The inputs are chosen by the unchanged description, `base`.
std::vector<std::uint32_t> bits_of(const nlohmann::json& json, const matmul::gemm_description& base) {
  const matmul::gemm_description d = matmul::gemm_from_json(json.dump());
  std::vector<std::uint32_t> out;
  const std::size_t m = 24, n = 136, k = 1000;
  if (matmul::takes(base, fp32, fp32)) {
    const std::vector<float32> a = random_fp32(m * k, 16, 125), b = random_fp32(k * n, 17, 125),
                               c = random_fp32(m * n, 18, 125);
    matmul::gemm_call<fp32, fp32, fp32> call;
    call.shape = {m, n, k}, call.a = a, call.b = b, call.c = c;
    call.alpha = from_host(0.7f), call.beta = from_host(1.3f);
    for (const float32 x : matmul::gemm(d, call)) out.push_back(x.bits);
    return out;
  }
  if (matmul::takes(base, bf16, bf16)) {
    const std::vector<bfloat16> a = random_matrix(m * k, 11, 20), b = random_matrix(k * n, 12, 20);
    std::vector<float32> c(m * n);
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = convert<fp32>(a[i]).result;
    matmul::gemm_call<bf16, bf16, fp32> call;
    call.shape = {m, n, k}, call.a = a, call.b = b, call.c = c;
    call.alpha = from_host(0.7f), call.beta = from_host(1.3f);
    for (const float32 x : matmul::gemm(d, call)) out.push_back(x.bits);
    return out;
  }
  const std::vector<value<e4m3>> a = random_e4m3(m * k, 13), b = random_e4m3(k * n, 14);
  std::mt19937 rng(15);
  const auto scales = [&](std::size_t count) {
    std::vector<float32> s(count);
    for (float32& x : s) x = from_host(0.5f + static_cast<float>(rng() % 1000) / 997.0f);
    return s;
  };
  const std::vector<float32> sa = scales(m * 8), sb_blocks = scales(8 * 2), sb_columns = scales(8 * n);
  if (base.promotion_k != 128) {  // no block scales: tensor scales
    matmul::gemm_call<e4m3, e4m3, fp32> call;
    call.shape = {m, n, k}, call.a = a, call.b = b;
    call.a_scales = call.b_scales = matmul::scale_layout::tensor;
    call.scale_a = std::span<const float32>(sa).first(1), call.scale_b = std::span<const float32>(sb_blocks).first(1);
    for (const float32 x : matmul::gemm(d, call)) out.push_back(x.bits);
    return out;
  }
  for (const bool square : {true, false}) {
    matmul::gemm_call<e4m3, e4m3, fp32> call;
    call.shape = {m, n, k}, call.a = a, call.b = b;
    call.a_scales = matmul::scale_layout::block_1x128, call.scale_a = sa;
    call.b_scales = square ? matmul::scale_layout::block_128x128 : matmul::scale_layout::block_1x128;
    call.scale_b = square ? sb_blocks : sb_columns;
    for (const float32 x : matmul::gemm(d, call)) out.push_back(x.bits);
  }
  return out;
}

}  // namespace

TEST_CASE("matmul descriptions: every field changes the bits on some input, or the change is refused") {
  // For each field: another value that must change the bits (or be refused), from a preset that reads it.
  struct change {
    std::string preset, field;
    nlohmann::json other;
    bool refused = false;
  };
  const std::vector<change> changes{
      {"cublas_sm90", "tensor_core", "sm90_k8"},
      {"cublas_sm90", "operands", "rounded_to_tf32", true},  // bf16 operands: refused
      {"cublas_sm90", "ragged_split_alignment", 4},         // K = 1000 is no multiple of 64
      {"cublas_sm90_tf32", "k_tile", 16},                   // a split's partial tile first: 500 mod 16, not mod 32
      {"cublas_sm90_tf32", "k_residue", "last_tile"},
      {"cublas_sm90_tf32", "ragged_split_alignment", 32},
      {"cublas_sm90_tf32", "operands", "truncated_to_tf32"},
      {"triton_matmul_sm90_tf32", "operands", "as_given", true},  // fp32 operands need a rule into tf32
      {"cublas_sm90", "splits", 3},
      {"cublas_sm90", "split_reduction", "pairwise", true},
      {"cublas_sm90", "promotion_k", 64},
      {"cublas_sm90", "alpha_beta", "fma_beta"},
      {"cublas_sm90", "alpha_beta_split_k", "fma_alpha"},
      {"cublas_sm90_fp8", "promotion_k", 0, true},  // block scales need promotion: the call is refused
      {"cublas_sm90_fp8", "block_scaling_128x128", "scale_a_then_fma_with_b"},
      {"cublas_sm90_fp8", "block_scaling_1x128", "fma_with_scale_product"},
      {"cublas_sm90_fp8", "k_tile", 100, true},
      {"cublas_sm90_fp8", "splits", 0, true},
      {"cublas_sm90_fp8", "unknown", 1, true},
      {"triton_matmul_sm90_fp8_two_warps", "k_order", "ascending"},
      {"triton_matmul_sm90_fp8_two_warps", "operands", "as_given", true},  // the 16-bit unit takes no e4m3
  };
  std::set<std::string> fields_changed;
  for (const change& c : changes) {
    nlohmann::json base = matmul::gemm_to_json(matmul::find_gemm_preset(c.preset));
    // Two splits in the bf16 base, so that the split-K fields have work to do.
    if ((c.preset == "cublas_sm90" || c.preset == "cublas_sm90_tf32") && c.field != "splits") base["splits"] = 2;
    if (c.preset == "cublas_sm90" && c.field == "alpha_beta") base["splits"] = 1;
    nlohmann::json changed = base;
    changed[c.field] = c.other;
    CAPTURE(c.field);
    if (c.refused) {
      CHECK_THROWS_AS(bits_of(changed, matmul::gemm_from_json(base.dump())), std::invalid_argument);
    } else {
      const matmul::gemm_description unchanged = matmul::gemm_from_json(base.dump());
      CHECK(bits_of(base, unchanged) != bits_of(changed, unchanged));
    }
    fields_changed.insert(c.field);
  }
  // Every field of a description but its name and summary is among them.
  const nlohmann::ordered_json every = matmul::gemm_to_json(matmul::find_gemm_preset("cublas_sm90"));
  for (const auto& [field, value] : every.items())
    if (field != "name" && field != "summary") CHECK_MESSAGE(fields_changed.count(field) == 1, field);
}

TEST_CASE("matmul explain_output gives gemm's bits, through splits, promotion, block scales and widened operands") {
  std::size_t compared = 0;
  // bf16, 3 splits, C with alpha and beta, into fp32.
  {
    const std::size_t m = 5, n = 9, k = 700;
    const std::vector<bfloat16> a = random_matrix(m * k, 21, 20), b = random_matrix(k * n, 22, 20);
    std::vector<float32> c(m * n, from_host(0.25f));
    matmul::gemm_call<bf16, bf16, fp32> call;
    call.shape = {m, n, k}, call.a = a, call.b = b, call.c = c, call.alpha = from_host(0.7f), call.beta = from_host(1.3f);
    matmul::gemm_description d = matmul::find_gemm_preset("cublas_sm90");
    d.splits = 3;
    const auto all = matmul::gemm(d, call);
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j, ++compared) {
        const auto e = matmul::explain_output(d, call, i, j);
        CHECK(e.out.bits == all[i * n + j].bits);
        CHECK(e.splits.size() == 3);
        CHECK(e.splits[0].pieces[0].steps.size() == 256 / 16);  // ceil(700 / 3) = 234, rounded up to 256
      }
  }
  // e4m3 with block scales (promotion every 128), and e5m2 widened to fp16 with K in pairs.
  {
    const std::size_t m = 3, n = 130, k = 333;
    const std::vector<value<e4m3>> a = random_e4m3(m * k, 23), b = random_e4m3(k * n, 24);
    std::vector<float32> sa(m * 3), sb(3 * 2);
    for (std::size_t i = 0; i < sa.size(); ++i) sa[i] = from_host(0.5f + 0.1f * static_cast<float>(i));
    for (std::size_t i = 0; i < sb.size(); ++i) sb[i] = from_host(1.5f - 0.07f * static_cast<float>(i));
    matmul::gemm_call<e4m3, e4m3, bf16> call;
    call.shape = {m, n, k}, call.a = a, call.b = b;
    call.a_scales = matmul::scale_layout::block_1x128, call.b_scales = matmul::scale_layout::block_128x128;
    call.scale_a = sa, call.scale_b = sb;
    const matmul::gemm_description& d = matmul::find_gemm_preset("cublas_sm90_fp8");
    const auto all = matmul::gemm(d, call);
    matmul::gemm_call<e4m3, e4m3, fp16> plain;
    plain.shape = call.shape, plain.a = a, plain.b = b;
    const matmul::gemm_description& two_warps = matmul::find_gemm_preset("triton_matmul_sm90_fp8_two_warps");
    const auto widened = matmul::gemm(two_warps, plain);
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j, compared += 2) {
        const auto e = matmul::explain_output(d, call, i, j);
        CHECK(e.out.bits == all[i * n + j].bits);
        CHECK(e.splits[0].pieces.size() == 3);
        CHECK(matmul::explain_output(two_warps, plain, i, j).out.bits == widened[i * n + j].bits);
      }
  }
  // fp32 on the tf32 unit, 3 splits of a ragged K, each split's partial tile first.
  {
    const std::size_t m = 4, n = 6, k = 700;
    const std::vector<float32> a = random_fp32(m * k, 25, 126), b = random_fp32(k * n, 26, 126);
    matmul::gemm_call<fp32, fp32, fp32> call;
    call.shape = {m, n, k}, call.a = a, call.b = b;
    matmul::gemm_description d = matmul::find_gemm_preset("cublas_sm90_tf32");
    d.splits = 3;
    const auto all = matmul::gemm(d, call);
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j, ++compared) {
        const auto e = matmul::explain_output(d, call, i, j);
        CHECK(e.out.bits == all[i * n + j].bits);
        // ceil(700 / 3) = 234, rounded up to 236: its partial tile, 236 mod 32 = 12, in steps of 8 and 4 first.
        REQUIRE(e.splits.size() == 3);
        CHECK(e.splits[0].end == 236);
        CHECK(e.splits[0].pieces[0].steps[1].k_end == 12);
        CHECK(e.splits[0].pieces[0].steps[2].k_first == 12);
      }
  }
  CHECK(compared == 45 + 2 * 390 + 24);
}
