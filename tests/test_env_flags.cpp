// Targeted, named cases for the environment: flags, tininess before and
// after rounding, FTZ/DAZ, NaN policies, E4M3 saturation edges. Each asserts
// literal bits for the core AND for the oracle, so both are pinned to the spec.
#include <doctest/doctest.h>

#include "oracle/ops.hpp"

using namespace proof;

namespace {
void expect(const oracle::result& core, const oracle::result& from_oracle, std::uint32_t bits, std::uint8_t raised) {
  const oracle::result wanted{bits, raised};
  const bool core_ok = core == wanted, oracle_ok = from_oracle == wanted;
  CHECK_MESSAGE(core_ok, "want " << bits << " flags " << int(raised) << ", core gave " << core.bits
                                   << " flags " << int(core.flags));
  CHECK_MESSAGE(oracle_ok, "want " << bits << " flags " << int(raised) << ", oracle gave "
                                     << from_oracle.bits << " flags " << int(from_oracle.flags));
}
template <format R, format A>
void expect_convert(std::uint32_t a, const environment& env, std::uint32_t bits, std::uint8_t raised) {
  const auto x = value<A>::from_bits(a);
  expect(as_result(bitexact::convert<R>(x, env)), oracle::convert<R>(x, env), bits, raised);
}
constexpr std::uint8_t NX = flags::inexact, UF = flags::underflow, OF = flags::overflow, DZ = flags::divide_by_zero,
                       NV = flags::invalid;
const float32 one{0x3F800000}, minus_one{0xBF800000}, fp32_max{0x7F7FFFFF}, plus_inf{0x7F800000}, zero{0};
}  // namespace

TEST_SUITE("proof_env") {
  TEST_CASE("e4m3: 448 is exact, 464 ties to 448 (even) or away to the NaN pattern, 480 overflows") {
    expect_convert<e4m3, fp32>(0x43E00000, {}, 0x7E, 0);                                  // 448
    expect_convert<e4m3, fp32>(0x43E80000, {}, 0x7E, NX);                                 // 464, tie to even
    expect_convert<e4m3, fp32>(0x43E80000, {.rounding = rounding_mode::nearest_away}, 0x7F, OF | NX);
    expect_convert<e4m3, fp32>(0x43F00000, {}, 0x7F, OF | NX);                            // 480: the NaN pattern
    expect_convert<e4m3, fp32>(0xC3F00000, {}, 0xFF, OF | NX);                            // -480
    expect_convert<e4m3, fp32>(0x43F00000, {.rounding = rounding_mode::toward_zero}, 0x7E, OF | NX);
    expect_convert<e4m3, fp32>(0x43E00001, {.rounding = rounding_mode::to_odd}, 0x7E, OF | NX);  // odd would be 480
    expect_convert<e4m3, fp32>(0x43E00001, {.rounding = rounding_mode::upward}, 0x7F, OF | NX);
    expect_convert<e4m3, fp32>(0xC3E00001, {.rounding = rounding_mode::upward}, 0xFE, NX);  // -448 is in range
    expect_convert<e4m3, fp32>(0x43E7FFFF, {}, 0x7E, NX);                                 // just below the tie
  }

  TEST_CASE("tininess: fp16 (1 - 2^-12) * 2^-14 is tiny before rounding, not after; FTZ follows the rule") {
    const std::uint32_t x = 0x387FF000;  // rounds up to the smallest fp16 normal, 0x0400
    expect_convert<fp16, fp32>(x, {.tiny = tininess::after_rounding}, 0x0400, NX);
    expect_convert<fp16, fp32>(x, {.tiny = tininess::before_rounding}, 0x0400, UF | NX);
    expect_convert<fp16, fp32>(x, {.tiny = tininess::before_rounding, .flush_to_zero = true}, 0x0000, UF | NX);
    expect_convert<fp16, fp32>(x, {.tiny = tininess::after_rounding, .flush_to_zero = true}, 0x0400, NX);
    expect_convert<fp16, fp32>(x | 0x80000000u, {.tiny = tininess::before_rounding, .flush_to_zero = true}, 0x8000,
                               UF | NX);
    // Toward zero it stays below 2^-14 either way: tiny, and the largest subnormal.
    expect_convert<fp16, fp32>(x, {.rounding = rounding_mode::toward_zero}, 0x03FF, UF | NX);
  }

  TEST_CASE("an exact subnormal result raises no underflow, but FTZ flushes it with underflow and inexact") {
    const float32 tiny_normal{0x00800000}, half{0x3F000000};
    expect(as_result(bitexact::mul(tiny_normal, half)), oracle::mul<fp32>(tiny_normal, half, {}), 0x00400000, 0);
    const environment ftz{.flush_to_zero = true};
    expect(as_result(bitexact::mul(tiny_normal, half, ftz)), oracle::mul<fp32>(tiny_normal, half, ftz), 0, UF | NX);
  }

  TEST_CASE("DAZ reads subnormal operands as signed zeros without a flag; FTZ alone does not") {
    const float32 denormal{0x00000001}, minus_denormal{0x80000001};
    const environment daz{.denormals_are_zero = true};
    expect(as_result(bitexact::add(denormal, zero, daz)), oracle::add<fp32>(denormal, zero, daz), 0, 0);
    expect(as_result(bitexact::add(minus_denormal, float32{0x80000000}, daz)),
           oracle::add<fp32>(minus_denormal, float32{0x80000000}, daz), 0x80000000, 0);
    expect(as_result(bitexact::mul(minus_denormal, one, daz)), oracle::mul<fp32>(minus_denormal, one, daz), 0x80000000,
           0);
    expect(as_result(bitexact::div(one, denormal, daz)), oracle::div<fp32>(one, denormal, daz), 0x7F800000, DZ);
    const environment ftz{.flush_to_zero = true};
    expect(as_result(bitexact::mul(denormal, float32{0x4B000000}, ftz)),
           oracle::mul<fp32>(denormal, float32{0x4B000000}, ftz), 0x00800000, 0);  // 2^-149 * 2^23 is normal
  }

  TEST_CASE("overflow: nearest and stochastic give infinity, toward zero and to-odd the largest finite") {
    const auto run = [&](rounding_mode m, float32 a, std::uint32_t bits) {
      const environment env{.rounding = m};
      expect(as_result(bitexact::add(a, a, env)), oracle::add<fp32>(a, a, env), bits, OF | NX);
    };
    run(rounding_mode::nearest_even, fp32_max, 0x7F800000);
    run(rounding_mode::stochastic, fp32_max, 0x7F800000);
    run(rounding_mode::toward_zero, fp32_max, 0x7F7FFFFF);
    run(rounding_mode::to_odd, fp32_max, 0x7F7FFFFF);
    run(rounding_mode::upward, -fp32_max, 0xFF7FFFFF);
    run(rounding_mode::downward, -fp32_max, 0xFF800000);
  }

  TEST_CASE("exact zero sums are +0, -0 only for -0 + -0 and for cancellation rounding downward") {
    expect(as_result(bitexact::add(one, minus_one)), oracle::add<fp32>(one, minus_one, {}), 0, 0);
    const environment down{.rounding = rounding_mode::downward};
    expect(as_result(bitexact::add(one, minus_one, down)), oracle::add<fp32>(one, minus_one, down), 0x80000000, 0);
    expect(as_result(bitexact::add(-zero, -zero)), oracle::add<fp32>(-zero, -zero, {}), 0x80000000, 0);
    expect(as_result(bitexact::sub(zero, zero, down)), oracle::sub<fp32>(zero, zero, down), 0x80000000, 0);
  }

  TEST_CASE("NaN policy: first NaN operand quieted with payload and sign; fresh NaN 0xFFC00000; canonical 0x7FFFFFFF") {
    const float32 snan{0x7F800001}, qnan_a{0x7FC00002}, qnan_b{0xFFC00003};
    expect(as_result(bitexact::add(snan, one)), oracle::add<fp32>(snan, one, {}), 0x7FC00001, NV);
    expect(as_result(bitexact::add(one, qnan_b)), oracle::add<fp32>(one, qnan_b, {}), 0xFFC00003, 0);
    expect(as_result(bitexact::mul(qnan_a, qnan_b)), oracle::mul<fp32>(qnan_a, qnan_b, {}), 0x7FC00002, 0);
    expect(as_result(bitexact::mul(qnan_a, snan)), oracle::mul<fp32>(qnan_a, snan, {}), 0x7FC00002, NV);
    expect(as_result(bitexact::sub(plus_inf, plus_inf)), oracle::sub<fp32>(plus_inf, plus_inf, {}), 0xFFC00000, NV);
    // 0 * inf with a quiet NaN addend raises nothing, as x86's vfmadd213ss does.
    expect(as_result(bitexact::fma(zero, plus_inf, qnan_a)), oracle::fma<fp32>(zero, plus_inf, qnan_a, {}),
           0x7FC00002, 0);
    expect(as_result(bitexact::sqrt(minus_one)), oracle::sqrt<fp32>(minus_one, {}), 0xFFC00000, NV);
    const environment canonical{.nans = nan_policy::canonical};
    expect(as_result(bitexact::add(snan, one, canonical)), oracle::add<fp32>(snan, one, canonical), 0x7FFFFFFF, NV);
    expect(as_result(bitexact::div(zero, zero, canonical)), oracle::div<fp32>(zero, zero, canonical), 0x7FFFFFFF, NV);
    expect_convert<bf16, fp32>(0xFFC12345, {}, 0xFFC1, 0);      // the payload's top bits survive narrowing
    expect_convert<bf16, fp32>(0x7F812345, {}, 0x7FC1, NV);     // a signaling NaN is quieted
    expect_convert<bf16, fp32>(0x7F812345, canonical, 0x7FFF, NV);
    expect_convert<fp32, bf16>(0xFFC1, {}, 0xFFC10000, 0);
  }

  TEST_CASE("e4m3 NaN results follow the NaN policy and keep the sign of the infinity they replace") {
    // Spec: under nan_policy::canonical every NaN result is canonical_nan() (0x7F for e4m3),
    // and where an infinity would result e4m3 gives the NaN of that sign.
    const environment canonical{.nans = nan_policy::canonical};
    expect_convert<e4m3, fp32>(0xC3F00000, canonical, 0x7F, OF | NX);   // -480 overflows
    expect_convert<e4m3, fp32>(0x7F800000, {}, 0x7F, NV);               // +inf
    expect_convert<e4m3, fp32>(0xFF800000, {}, 0xFF, NV);               // -inf
    const float8_e4m3 minus_one_e4m3{0xB8}, zero_e4m3{0};
    expect(as_result(bitexact::div(minus_one_e4m3, zero_e4m3, canonical)),
           oracle::div<e4m3>(minus_one_e4m3, zero_e4m3, canonical), 0x7F, DZ);
  }

  TEST_CASE("an infinite operand that decides an e4m3 result is invalid, in every operation (platform.hpp's rule)") {
    // e4m3 has no infinity: the result is its NaN of that sign, and the
    // operation is invalid; division is no exception (inf / 1 and -inf / 2).
    const float32 two{0x40000000}, minus_inf{0xFF800000};
    expect(as_result(bitexact::add<e4m3>(plus_inf, one)), oracle::add<e4m3>(plus_inf, one, {}), 0x7F, NV);
    expect(as_result(bitexact::mul<e4m3>(minus_inf, two)), oracle::mul<e4m3>(minus_inf, two, {}), 0xFF, NV);
    expect(as_result(bitexact::fma<e4m3>(one, one, minus_inf)), oracle::fma<e4m3>(one, one, minus_inf, {}), 0xFF, NV);
    expect(as_result(bitexact::sqrt<e4m3>(plus_inf)), oracle::sqrt<e4m3>(plus_inf, {}), 0x7F, NV);
    expect(as_result(bitexact::div<e4m3>(plus_inf, one)), oracle::div<e4m3>(plus_inf, one, {}), 0x7F, NV);
    expect(as_result(bitexact::div<e4m3>(minus_inf, two)), oracle::div<e4m3>(minus_inf, two, {}), 0xFF, NV);
    // An infinity that comes from a finite division by zero is a division by zero, not invalid.
    expect(as_result(bitexact::div<e4m3>(one, zero)), oracle::div<e4m3>(one, zero, {}), 0x7F, DZ);
  }

  TEST_CASE("stochastic rounding: exact results stay exact; up iff the discarded fraction exceeds bits / 2^32") {
    const float32 x{0x3F808000};  // 1 + 2^-8: exactly half a bf16 ulp above 1
    expect_convert<bf16, fp32>(x.bits, {.rounding = rounding_mode::stochastic, .random_bits = 0x7FFFFFFF}, 0x3F81, NX);
    expect_convert<bf16, fp32>(x.bits, {.rounding = rounding_mode::stochastic, .random_bits = 0x80000000}, 0x3F80, NX);
    expect_convert<bf16, fp32>(0x3F800000, {.rounding = rounding_mode::stochastic, .random_bits = 0}, 0x3F80, 0);
    // fp32 div and sqrt need 32 bits below the ulp: -2^127 / (2^127 - 2^104) = -(1 + 2^-23 + 2^-46 + ...),
    // whose discarded part, about 2^-23 ulp, exceeds 1/2^32.
    const environment u1{.rounding = rounding_mode::stochastic, .random_bits = 1};
    expect(as_result(bitexact::div(float32{0xFF000000}, float32{0x7EFFFFFE}, u1)),
           oracle::div<fp32>(float32{0xFF000000}, float32{0x7EFFFFFE}, u1), 0xBF800002, NX);
    expect(as_result(bitexact::sqrt(float32{0x6B89F8AC}, u1)), oracle::sqrt<fp32>(float32{0x6B89F8AC}, u1),
           0x5584E468, NX);
  }
}
