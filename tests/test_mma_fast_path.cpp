// The fast, untraced mma_m16n8k16 against the generic fused_dot it replaces:
// both must give the same bits for every output of every tile.
//
// Tiles come from classes that each aim at one part of the model: plain
// normals, the full exponent range (overflow, underflow, spreads wider than
// the 25 kept bits), subnormals, zeros of both signs (the sign of an exact-zero
// sum), exact cancellation, one dominant product, a dominant or tiny C, and
// Inf/NaN sprinkled in. BITEXACT_MMA_TILES sets the tiles per format pair and
// unit (default 20000; the "sweep" test runs 10^6).
#include <bitexact/hardware/mma.hpp>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

#include <doctest/doctest.h>

namespace {

using namespace bitexact;

long tiles_per_case() {
  if (const char* text = std::getenv("BITEXACT_MMA_TILES")) return std::atol(text);
  return 20000;
}

template <format F>
value<F> with_fields(bool sign, std::uint32_t biased, std::uint32_t fraction) {
  return value<F>::from_bits((std::uint32_t{sign} << (F.width() - 1)) | (biased << F.fraction_bits) |
                             (fraction & value<F>::fraction_mask()));
}

enum class tile_class { normal, full_range, subnormal_mix, zeros, cancellation, dominant_product, addend_extremes,
                        overflow, specials, count };

// One element of a tile of class kind; `bias_shift` moves exponents so that
// some tiles sit far up or down the range.
template <format F>
value<F> element(std::mt19937_64& rng, tile_class kind, int bias_shift) {
  const auto bits = rng();
  const bool sign = bits & 1;
  const auto fraction = static_cast<std::uint32_t>(bits >> 1);
  const int top = F.max_biased_exponent() - 1;
  const auto clamp = [&](int biased) { return static_cast<std::uint32_t>(biased < 1 ? 1 : biased > top ? top : biased); };
  const int choice = static_cast<int>((bits >> 40) % 100);
  switch (kind) {
    case tile_class::normal:
      return with_fields<F>(sign, clamp(F.bias() + bias_shift + static_cast<int>((bits >> 32) % 17) - 8), fraction);
    case tile_class::full_range:
      return with_fields<F>(sign, static_cast<std::uint32_t>((bits >> 32) % F.max_biased_exponent()), fraction);
    case tile_class::subnormal_mix:
      if (choice < 30) return with_fields<F>(sign, 0, fraction);                   // subnormal (or zero)
      if (choice < 40) return value<F>::zero(sign);
      if (choice < 50) return with_fields<F>(sign, 1, fraction);                   // smallest binade
      return with_fields<F>(sign, clamp(1 + static_cast<int>((bits >> 32) % 24)), fraction);
    case tile_class::zeros:
      if (choice < 80) return value<F>::zero(sign);
      return with_fields<F>(sign, 0, fraction);
    case tile_class::overflow:
      return with_fields<F>(choice < 90 ? false : sign, clamp(top - static_cast<int>((bits >> 32) % 4)), fraction);
    case tile_class::specials:
      if (choice < 3) return value<F>::infinity(sign);
      if (choice < 5) return value<F>::from_bits(value<F>::infinity(sign).bits | (fraction | 1));  // NaN
      return with_fields<F>(sign, static_cast<std::uint32_t>((bits >> 32) % F.max_biased_exponent()), fraction);
    default:  // the structured classes start from normals near the middle
      return with_fields<F>(sign, clamp(F.bias() + bias_shift + static_cast<int>((bits >> 32) % 9) - 4), fraction);
  }
}

template <format Acc, format In>
struct tile {
  std::array<value<In>, 256> a;
  std::array<value<In>, 128> b;  // b[n * 16 + k]
  std::array<value<Acc>, 128> c;
};

template <format Acc, format In>
tile<Acc, In> make_tile(std::mt19937_64& rng, tile_class kind) {
  tile<Acc, In> t;
  const int bias_shift = static_cast<int>(rng() % 41) - 20;
  for (auto& x : t.a) x = element<In>(rng, kind, bias_shift);
  for (auto& x : t.b) x = element<In>(rng, kind, bias_shift);
  for (auto& x : t.c) x = element<Acc>(rng, kind, 2 * bias_shift);
  switch (kind) {
    case tile_class::cancellation:
      // Products k and k+1 cancel exactly (a equal, b negated); C is a zero,
      // or on some rows a value the products almost cancel against.
      for (int m = 0; m < 16; ++m)
        for (int k = 0; k < 16; k += 2) t.a[m * 16 + k + 1] = t.a[m * 16 + k];
      for (int n = 0; n < 8; ++n)
        for (int k = 0; k < 16; k += 2)
          if (rng() % 8 != 0) t.b[n * 16 + k + 1] = -t.b[n * 16 + k];
      for (auto& x : t.c)
        if (rng() % 2) x = value<Acc>::zero(rng() % 2);
      break;
    case tile_class::dominant_product:
      // One position per row holds a large product, the others lie up to 40 binades lower.
      for (int m = 0; m < 16; ++m) {
        const int lead = static_cast<int>(rng() % 16);
        for (int k = 0; k < 16; ++k) {
          auto& x = t.a[m * 16 + k];
          const int drop = k == lead ? -6 : static_cast<int>(rng() % 40);
          const int biased = static_cast<int>(x.biased_exponent()) - drop;
          x = with_fields<In>(x.sign(), static_cast<std::uint32_t>(biased < 0 ? 0 : biased > In.max_biased_exponent() - 1 ? In.max_biased_exponent() - 1 : biased), x.fraction());
        }
      }
      break;
    case tile_class::zeros:
      // Rows where every term is a negative zero (IEEE would give -0; the unit's rule decides): +0 times a negative B, and C = -0.
      if (rng() % 2) {
        for (auto& x : t.b) x = x.sign() ? x : -x;
        for (int m = 0; m < 16; ++m)
          if (rng() % 2) {
            for (int k = 0; k < 16; ++k) t.a[m * 16 + k] = value<In>::zero(false);
            for (int n = 0; n < 8; ++n) t.c[m * 8 + n] = value<Acc>::zero(true);
          }
      }
      break;
    case tile_class::addend_extremes:
      // C far above the products (they truncate to little or nothing) or far below (C is cut).
      for (auto& x : t.c) {
        const bool above = rng() % 2;
        const int biased = Acc.bias() + (above ? 1 : -1) * static_cast<int>(10 + rng() % 30);
        x = with_fields<Acc>(rng() % 2, static_cast<std::uint32_t>(biased < 0 ? 0 : biased > Acc.max_biased_exponent() - 1 ? Acc.max_biased_exponent() - 1 : biased), static_cast<std::uint32_t>(rng()));
      }
      break;
    default: break;
  }
  return t;
}

struct comparison {
  long tiles = 0, fast_tiles = 0, outputs = 0, mismatches = 0;
  std::string first_mismatch;
};

template <format Acc, format In>
comparison compare_fast_with_reference(const fused_sum_unit& unit, long tile_count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  comparison result;
  for (long i = 0; i < tile_count; ++i) {
    const auto kind = static_cast<tile_class>(i % static_cast<long>(tile_class::count));
    const auto t = make_tile<Acc, In>(rng, kind);
    std::array<value<Acc>, 128> fast{}, reference{};
    const bool took_fast_path = detail::mma_m16n8k16_fast<Acc, In>(unit, t.a, t.b, t.c, fast);
    mma_m16n8k16_reference<Acc, In>(unit, t.a, t.b, t.c, reference);
    ++result.tiles;
    if (!took_fast_path) continue;  // Inf or NaN in the tile: mma_m16n8k16 runs the reference itself
    ++result.fast_tiles;
    for (int j = 0; j < 128; ++j) {
      ++result.outputs;
      if (fast[j] != reference[j]) {
        if (result.mismatches++ == 0)
          result.first_mismatch = "tile " + std::to_string(i) + " class " + std::to_string(static_cast<int>(kind)) +
                                  " output " + std::to_string(j) + ": fast " + std::to_string(fast[j].bits) +
                                  " reference " + std::to_string(reference[j].bits);
      }
    }
  }
  return result;
}

template <format Acc, format In>
void check_pair(const char* name) {
  const long count = tiles_per_case();
  for (const auto& [unit_name, unit] : {std::pair{"sm90", sm90_tensor_core}, std::pair{"sm80", sm80_tensor_core}}) {
    const comparison r = compare_fast_with_reference<Acc, In>(unit, count, 0xB17E + count);
    const std::string summary = std::string(name) + " " + unit_name + ": " + std::to_string(r.tiles) + " tiles, " +
                                std::to_string(r.fast_tiles) + " on the fast path, " + std::to_string(r.outputs) +
                                " outputs compared, " + std::to_string(r.mismatches) + " mismatches";
    MESSAGE(summary);
    INFO(r.first_mismatch);
    CHECK(r.mismatches == 0);
    CHECK(r.fast_tiles > r.tiles / 2);  // the comparison must actually exercise the fast path
  }
}

}  // namespace

TEST_CASE("mma fast path equals fused_dot: bf16 -> f32") { check_pair<fp32, bf16>("bf16->f32"); }
TEST_CASE("mma fast path equals fused_dot: f16 -> f32") { check_pair<fp32, fp16>("f16->f32"); }
TEST_CASE("mma fast path equals fused_dot: f16 -> f16") { check_pair<fp16, fp16>("f16->f16"); }

TEST_CASE("mma_m16n8k16 with Inf and NaN inputs falls back to the reference") {
  std::array<bfloat16, 256> a{};
  std::array<bfloat16, 128> b{};
  std::array<float32, 128> c{}, d{};
  for (auto& x : a) x = bfloat16::from_bits(0x3F80);  // 1
  for (auto& x : b) x = bfloat16::from_bits(0x3F80);
  a[0] = bfloat16::infinity();  // row 0, column 0: inf * 1 + 15 = inf
  b[16] = bfloat16::zero();     // row 0, column 1: a[0] * b[16] = inf * 0 -> NaN
  CHECK_FALSE(detail::mma_m16n8k16_fast<fp32, bf16>(sm90_tensor_core, a, b, c, d));
  mma_m16n8k16<fp32, bf16>(sm90_tensor_core, a, b, c, d);
  CHECK(d[0].bits == 0x7F800000u);  // +inf
  CHECK(d[1].bits == 0x7FFFFFFFu);  // canonical NaN
  CHECK(d[8].bits == 0x41800000u);  // row 1: sixteen products of 1 = 16
}

TEST_CASE("mma_m16n8k16 dispatches: the fast path where its floats are exact, the reference elsewhere") {
  // A window of 30 kept bits: a product term (up to 2^16 for bf16) scaled by
  // its 16 bits of headroom would leave the fast kernel's int32 lanes (signed
  // overflow, so the kernel is not even run here), and mma_m16n8k16 must take
  // the reference step instead.
  fused_sum_unit wide_window = sm90_tensor_core;
  wide_window.kept_fraction_bits = 30;
  CHECK_FALSE(detail::fast_path_applies<fp32, bf16>(wide_window));
  CHECK(detail::fast_path_applies<fp32, bf16>(sm90_tensor_core));
  CHECK(detail::fast_path_applies<fp32, bf16>(sm80_tensor_core));
  std::mt19937_64 rng(0xD15A7C);
  long outputs = 0, dispatch_mismatches = 0;
  for (int i = 0; i < 200; ++i) {
    const auto t = make_tile<fp32, bf16>(rng, tile_class::normal);
    for (const fused_sum_unit& unit : {sm90_tensor_core, sm80_tensor_core, wide_window}) {
      std::array<float32, 128> dispatched{}, reference{};
      mma_m16n8k16<fp32, bf16>(unit, t.a, t.b, t.c, dispatched);
      mma_m16n8k16_reference<fp32, bf16>(unit, t.a, t.b, t.c, reference);
      for (int j = 0; j < 128; ++j) dispatch_mismatches += dispatched[j] != reference[j];
      outputs += 128;
    }
  }
  MESSAGE(outputs << " outputs through mma_m16n8k16 (sm90, sm80, a 30-bit window), " << dispatch_mismatches
                  << " differ from the reference");
  CHECK(outputs == 200 * 3 * 128);
  CHECK(dispatch_mismatches == 0);
}
