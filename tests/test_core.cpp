#include <doctest/doctest.h>

#include <bitexact/bitexact.hpp>

using namespace bitexact;

// The paper's Section 3.3.2 addition, checkable at compile time.
static_assert(add(float32{0xC01A0E2E}, float32{0xC0130000}).result == float32{0xC0968717});
static_assert(convert<bf16>(float32{0xC0968717}).result == bfloat16{0xC097});

TEST_CASE("paper 3.3.2: fp32 sum of two same-sign values rounds up to bf16 0xC097") {
  const auto sum = add(float32{0xC01A0E2E}, float32{0xC0130000});
  CHECK(sum.result.bits == 0xC0968717u);
  CHECK(sum.raised.bits == 0);
  const auto narrowed = convert<bf16>(sum.result);
  CHECK(narrowed.result.bits == 0xC097);
  CHECK(narrowed.raised.bits == flags::inexact);
  CHECK(to_double(narrowed.result) - to_double(sum.result) == doctest::Approx(-0.014759540557861328).epsilon(1e-15));
}

namespace {
// round_nearest_even against decide_rounding's nearest-even increment for one extra-bit count.
template <int ExtraBits>
int nearest_even_disagreements(std::uint64_t seed) {
  int disagreements = 0;
  std::uint64_t state = seed;
  const auto next = [&state] {  // splitmix64
    std::uint64_t z = (state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
  };
  constexpr std::uint64_t low_mask = (std::uint64_t{1} << ExtraBits) - 1, guard = std::uint64_t{1} << (ExtraBits - 1);
  for (int i = 0; i < 200000; ++i) {
    std::uint64_t extended = next() >> 1;  // below 2^63, as every extended pattern is
    // Half the cases sit on the edges: a tie, just below and just above half, all ones below the guard.
    switch (i % 8) {
      case 0: extended = (extended & ~low_mask) | guard; break;
      case 1: extended = (extended & ~low_mask) | (guard - 1); break;
      case 2: extended = (extended & ~low_mask) | (guard + 1); break;
      case 3: extended = extended & ~low_mask; break;
      default: break;
    }
    for (const bool below : {false, true}) {
      const discarded_bits dropped{extended << (64 - ExtraBits), below};
      const auto decision = decide_rounding(rounding_mode::nearest_even, false, (extended >> ExtraBits) & 1, dropped, 0);
      disagreements += round_nearest_even<ExtraBits>(extended, std::uint64_t{below}) != (extended >> ExtraBits) + decision.increment;
    }
  }
  return disagreements;
}
}  // namespace

TEST_CASE("round_nearest_even increments exactly where decide_rounding does, for every extra-bit count in use") {
  // round_pack keeps 64 - width: 32 (fp32), 45 (tf32), 48 (bf16, fp16), 56 (e5m2, e4m3); a double's
  // doubled pattern has 53 - fraction bits: 30 (fp32), 43 (tf32, fp16), 46 (bf16), 50 (e4m3), 51 (e5m2).
  CHECK(nearest_even_disagreements<30>(1) == 0);
  CHECK(nearest_even_disagreements<32>(2) == 0);
  CHECK(nearest_even_disagreements<43>(3) == 0);
  CHECK(nearest_even_disagreements<45>(4) == 0);
  CHECK(nearest_even_disagreements<46>(5) == 0);
  CHECK(nearest_even_disagreements<48>(6) == 0);
  CHECK(nearest_even_disagreements<50>(7) == 0);
  CHECK(nearest_even_disagreements<51>(8) == 0);
  CHECK(nearest_even_disagreements<56>(9) == 0);
}
