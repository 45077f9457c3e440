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
  // Both are fp32 values within a factor of two of each other, so the double subtraction is exact.
  CHECK(to_double(narrowed.result) - to_double(sum.result) == -30953.0 / 2097152.0);
}

namespace {
// round_nearest_even against decide_rounding's nearest-even increment for one extra-bit count, on
// words of the type its caller rounds in (std::uint32_t for elementwise.hpp's 32-bit lanes).
template <int ExtraBits, class Word = std::uint64_t>
int nearest_even_disagreements(std::uint64_t seed) {
  static_assert(ExtraBits >= 1 && ExtraBits < 8 * sizeof(Word) - 1);
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
    // Below 2^(bits - 1), as every extended pattern is (a magnitude, with room for the increment).
    std::uint64_t extended = next() >> (65 - 8 * sizeof(Word));
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
      const auto decision =
          decide_rounding(rounding_mode::nearest_even, false, (extended >> ExtraBits) & 1, dropped, 0);
      const Word rounded = round_nearest_even<ExtraBits>(static_cast<Word>(extended), Word{below});
      disagreements += rounded != (extended >> ExtraBits) + decision.increment;
    }
  }
  return disagreements;
}

// Every extra-bit count that rounds results of F: round_pack's (64 - width, a
// constant local to it), double_as_extended's (the fast paths and
// elementwise.hpp's 64-bit lanes), and elementwise.hpp's 32-bit lanes, where
// a double's upper half holds 20 - fraction_bits bits below F's last bit.
template <format F>
void check_every_extra_bit_count_of(std::uint64_t seed) {
  CAPTURE(name_of(F));
  constexpr int round_pack_extra_bits = 64 - F.width();
  CHECK(nearest_even_disagreements<round_pack_extra_bits>(seed) == 0);
  CHECK(nearest_even_disagreements<detail::double_as_extended<F>::extra_bits>(seed + 1) == 0);
#if BITEXACT_HOST_LANES
  if constexpr (detail::lanes_take<F, F, F> && detail::rounds_in_upper_halves<F>) {
    constexpr int upper_half_extra_bits = detail::double_fraction_bits - 32 - F.fraction_bits;
    CHECK(nearest_even_disagreements<upper_half_extra_bits, std::uint32_t>(seed + 2) == 0);
  }
#endif
}
}  // namespace

TEST_CASE("round_nearest_even increments exactly where decide_rounding does, for every extra-bit count in use") {
  // fp32 32, 30; tf32 45, 43, 10; bf16 48, 46, 13; fp16 48, 43; e5m2 56, 51; e4m3 56, 50.
  check_every_extra_bit_count_of<fp32>(1);
  check_every_extra_bit_count_of<tf32>(4);
  check_every_extra_bit_count_of<bf16>(7);
  check_every_extra_bit_count_of<fp16>(10);
  check_every_extra_bit_count_of<e5m2>(13);
  check_every_extra_bit_count_of<e4m3>(16);
}
