// The hardware models' defining behaviours on hand-built cases. The
// replays of real GPU captures are in test_hardware_replay.cpp.
#include <doctest/doctest.h>

#include <array>
#include <memory>
#include <bitexact/hardware/alu.hpp>
#include <bitexact/hardware/mma.hpp>

using namespace bitexact;

namespace {
bfloat16 bf(float x) { return convert<bf16>(from_host(x)).result; }

template <std::size_t N>
float32 dot(const fused_sum_unit& unit, const std::array<bfloat16, N>& a, const std::array<bfloat16, N>& b,
            float32 c = {}) {
  return fused_dot<fp32>(unit, std::span<const bfloat16>(a), std::span<const bfloat16>(b), c).result;
}
}  // namespace

TEST_CASE("tensor core rounds toward zero where IEEE rounds to nearest: [1, 3*2^-25].[1, 1] is exactly 1") {
  CHECK(dot(sm90_tensor_core, std::array{bf(1.0f), bf(0x1.8p-24f)}, std::array{bf(1.0f), bf(1.0f)}).bits ==
        0x3F800000u);
  CHECK(add(from_host(1.0f), from_host(0x1.8p-24f)).result.bits == 0x3F800001u);
}

TEST_CASE("tensor core cuts each term below the 25-bit window before summing: 1 + 8 * 2^-26 is 1") {
  std::array<bfloat16, 9> a{}, b{};
  a[0] = bf(1.0f);
  for (int k = 1; k < 9; ++k) a[k] = bf(0x1p-26f);
  for (auto& x : b) x = bf(1.0f);
  CHECK(dot(sm90_tensor_core, a, b).bits == 0x3F800000u);
  // The same eight terms alone are exact: nothing larger sets the window.
  a[0] = bf(0.0f);
  CHECK(dot(sm90_tensor_core, a, b).bits == 0x34000000u);  // 2^-23
}

TEST_CASE("tensor core rounds the fused sum toward zero") {
  // 1 + 2^-24 + 2^-25 survives the 25-bit window, then rounds toward zero to 1.
  const auto sum = dot(sm90_tensor_core, std::array{bf(1.0f), bf(0x1p-24f), bf(0x1p-25f)},
                       std::array{bf(1.0f), bf(1.0f), bf(1.0f)});
  CHECK(sum.bits == 0x3F800000u);
  const auto negative = dot(sm90_tensor_core, std::array{bf(-1.0f), bf(-0x1p-24f), bf(-0x1p-25f)},
                            std::array{bf(1.0f), bf(1.0f), bf(1.0f)});
  CHECK(negative.bits == 0xBF800000u);
}

TEST_CASE("Ampere chains two 8-product steps; Hopper sums 16 products at once") {
  std::array<bfloat16, 16> a{}, b{};
  for (auto& x : b) x = bf(1.0f);
  a[0] = bf(1.0f);
  for (int k = 8; k < 16; ++k) a[k] = bf(0x1p-24f);  // eight terms of 2^-24 after the first step
  // Hopper: one window, 8 * 2^-24 = 2^-21 kept exactly.
  CHECK(dot(sm90_tensor_core, a, b).bits == 0x3F800004u);
  // Ampere: first step gives exactly 1; second step adds 8 * 2^-24 in a 24-bit window: also kept.
  CHECK(dot(sm80_tensor_core, a, b).bits == 0x3F800004u);
  // Four terms of 2^-25 add to one fp32 ulp of 1 when kept (Hopper's 25-bit
  // window) and vanish when cut (Ampere's 24-bit window).
  const std::array<bfloat16, 5> quarter_ulps{bf(1.0f), bf(0x1p-25f), bf(0x1p-25f), bf(0x1p-25f), bf(0x1p-25f)};
  const std::array<bfloat16, 5> ones{bf(1.0f), bf(1.0f), bf(1.0f), bf(1.0f), bf(1.0f)};
  CHECK(dot(sm90_tensor_core, quarter_ulps, ones).bits == 0x3F800001u);
  CHECK(dot(sm80_tensor_core, quarter_ulps, ones).bits == 0x3F800000u);
}

TEST_CASE("tensor core special values: NaN, inf - inf and 0 * inf give the canonical NaN") {
  const float32 nan = dot(sm90_tensor_core, std::array{bf(1.0f), bfloat16{0x7FC0}}, std::array{bf(1.0f), bf(1.0f)});
  CHECK(nan.bits == 0x7FFFFFFFu);
  const float32 zero_times_inf =
      dot(sm90_tensor_core, std::array{bfloat16{0x0000}}, std::array{bfloat16{0x7F80}});
  CHECK(zero_times_inf.bits == 0x7FFFFFFFu);
  const float32 inf = dot(sm90_tensor_core, std::array{bfloat16{0x7F80}}, std::array{bf(-2.0f)});
  CHECK(inf.bits == 0xFF800000u);
}

TEST_CASE("cvt.rn.bf16x2.f32 packs the first source high, ties to even, NaN to 0x7FFF") {
  CHECK(ptx::cvt_rn_bf16_f32(float32{0x3F808000}).bits == 0x3F80);
  CHECK(ptx::cvt_rn_bf16_f32(float32{0x3F818000}).bits == 0x3F82);
  CHECK(ptx::cvt_rn_bf16_f32(from_host(3.4e38f)).bits == 0x7F80);
  CHECK(ptx::cvt_rn_bf16_f32(float32{0xFFC12345}).bits == 0x7FFF);
  CHECK(ptx::cvt_rn_bf16x2_f32(from_host(1.0f), from_host(-2.0f)) == 0x3F80C000u);
  CHECK(ptx::cvt_rz_bf16_f32(float32{0x3F81FFFF}).bits == 0x3F81);
}

TEST_CASE("FP32 ALU: canonical NaN and .ftz on inputs and outputs") {
  CHECK(ptx::add_f32(float32{0x7F800000}, float32{0xFF800000}).bits == 0x7FFFFFFFu);
  CHECK(ptx::mul_f32(float32{0xFFC00001}, from_host(1.0f)).bits == 0x7FFFFFFFu);
  const float32 smallest_subnormal{0x00000001};
  CHECK(ptx::add_f32(smallest_subnormal, smallest_subnormal).bits == 0x00000002u);
  CHECK(ptx::add_f32(smallest_subnormal, smallest_subnormal, rounding_mode::nearest_even, true).bits == 0u);
  CHECK(ptx::mul_f32(from_host(0x1p-100f), from_host(0x1p-30f), rounding_mode::nearest_even, true).bits == 0u);
  CHECK(ptx::mul_f32(from_host(0x1p-100f), from_host(0x1p-30f)).bits == 0x00080000u);
}

TEST_CASE("wgmma m64n16k16 equals a fused step per output over 1024 outputs") {
  constexpr std::size_t N = 16;
  std::array<bfloat16, 64 * 16> a{};
  std::array<bfloat16, N * 16> b{};
  std::array<float32, 64 * N> c{}, d{};
  std::uint32_t state = 12345;
  const auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (auto& x : a) x = bfloat16::from_bits(next() >> 16);
  for (auto& x : b) x = bfloat16::from_bits(next() >> 16);
  for (auto& x : c) x = float32{next()};
  wgmma_m64nNk16<fp32, bf16, N>(sm90_tensor_core, a, b, c, d);
  int mismatches = 0;
  for (std::size_t m = 0; m < 64; ++m)
    for (std::size_t n = 0; n < N; ++n) {
      const auto expected = fused_multiply_add_step<fp32, bf16>(
          sm90_tensor_core, std::span<const bfloat16>(&a[m * 16], 16), std::span<const bfloat16>(&b[n * 16], 16),
          c[m * N + n]);
      mismatches += expected.result != d[m * N + n];
    }
  CHECK(mismatches == 0);
}

TEST_CASE("a fused step refuses operand spans of different lengths or more than 64 products") {
  std::array<bfloat16, 65> many{};
  std::array<bfloat16, 3> three{};
  const auto step = [](std::span<const bfloat16> a, std::span<const bfloat16> b) {
    return fused_multiply_add_step<fp32, bf16>(sm90_tensor_core, a, b, float32{});
  };
  CHECK_THROWS_AS(step(many, many), std::invalid_argument);
  CHECK_NOTHROW(step(three, three));
  // A b whose memory ends after two elements (a heap block of exactly that
  // size), so that AddressSanitizer reports any read of b[2] before the check.
  const auto two = std::make_unique<bfloat16[]>(2);
  const std::span<const bfloat16> short_b(two.get(), 2);
  CHECK_THROWS_AS(step(three, short_b), std::invalid_argument);
  CHECK_THROWS_AS(fused_dot<fp32>(sm90_tensor_core, std::span<const bfloat16>(three), short_b, float32{}),
                  std::invalid_argument);
  // A shorter a is refused too, though it would only read less.
  CHECK_THROWS_AS(step(short_b, three), std::invalid_argument);
}
