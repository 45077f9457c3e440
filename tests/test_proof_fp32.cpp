// fp32 add, sub, mul, fma, div, sqrt and fp32 -> narrower conversions on
// about 10^6 structured and random cases against the rational oracle.
#include <doctest/doctest.h>

#include "oracle/ops.hpp"

using namespace proof;

namespace {

// A partner for x that makes the interesting things happen: its negation
// nudged by a few ulps (cancellation), x itself or x scaled by a power of two
// (carry-out, exact halves), a value whose leading bit lands at x's guard bit
// (ties), or an unrelated structured operand.
std::uint32_t partner_of(std::uint32_t x, generator& g) {
  switch (g.below(6)) {
    case 0: return (x ^ 0x80000000u) + g.below(5) - 2;
    case 1: return x;
    case 2: return x + ((g.below(7) - 3u) << 23);
    case 3: return (x & 0x80000000u) | ((((x >> 23) & 0xFF) - 24 - g.below(3)) << 23) | (g.next() & 1 ? 0 : 0x7FFFFF);
    default: return structured_operand<fp32>(g);
  }
}

}  // namespace

TEST_SUITE("proof_fp32") {
  TEST_CASE("fp32 add, sub, mul, fma, div, sqrt on 10^6 structured and random cases match the oracle") {
    tally t("fp32 arithmetic, structured + random");
    generator g(0xF32);
    const std::vector<environment> envs = every_mode_and_policy();
    constexpr int sets = 140000, checks_per_set = 7;
    for (int i = 0; i < sets; ++i) {
      const std::uint32_t a = structured_operand<fp32>(g);
      const std::uint32_t b = partner_of(a, g);
      const std::uint32_t c = g.next() & 1 ? partner_of(a, g) : structured_operand<fp32>(g);
      const auto x = float32::from_bits(a), y = float32::from_bits(b), z = float32::from_bits(c);
      const environment& env = envs[g.below(static_cast<std::uint32_t>(envs.size()))];
      t.check("add", {a, b}, env, oracle::add<fp32>(x, y, env), as_result(bitexact::add(x, y, env)));
      t.check("sub", {a, b}, env, oracle::sub<fp32>(x, y, env), as_result(bitexact::sub(x, y, env)));
      t.check("mul", {a, b}, env, oracle::mul<fp32>(x, y, env), as_result(bitexact::mul(x, y, env)));
      t.check("div", {a, b}, env, oracle::div<fp32>(x, y, env), as_result(bitexact::div(x, y, env)));
      t.check("sqrt", {a}, env, oracle::sqrt<fp32>(x, env), as_result(bitexact::sqrt(x, env)));
      // fma: c near -a*b as well, for cancellation of the product.
      const std::uint32_t product_bits = oracle::mul<fp32>(x, y, environment{.rounding = env.rounding}).bits;
      const auto w = float32::from_bits(g.next() & 1 ? (product_bits ^ 0x80000000u) + g.below(3) - 1 : c);
      t.check("fma", {a, b, w.bits}, env, oracle::fma<fp32>(x, y, w, env), as_result(bitexact::fma(x, y, w, env)));
      t.check("fma", {a, b, c}, env, oracle::fma<fp32>(x, y, z, env), as_result(bitexact::fma(x, y, z, env)));
    }
    PROOF_REPORT(t, std::uint64_t{sets} * checks_per_set);
  }

  TEST_CASE("fp32 to bf16, fp16, tf32, e5m2, e4m3 on structured and random values matches the oracle") {
    tally t("fp32 conversions, structured + random");
    generator g(0xC0);
    const std::vector<environment> envs = every_mode_and_policy();
    constexpr int values = 60000, targets = 5;
    for (int i = 0; i < values; ++i) {
      const std::uint32_t a = g.next() & 1 ? structured_operand<fp32>(g) : static_cast<std::uint32_t>(g.next());
      const auto x = float32::from_bits(a);
      const environment& env = envs[g.below(static_cast<std::uint32_t>(envs.size()))];
      t.check("to bf16", {a}, env, oracle::convert<bf16>(x, env), as_result(bitexact::convert<bf16>(x, env)));
      t.check("to fp16", {a}, env, oracle::convert<fp16>(x, env), as_result(bitexact::convert<fp16>(x, env)));
      t.check("to tf32", {a}, env, oracle::convert<tf32>(x, env), as_result(bitexact::convert<tf32>(x, env)));
      t.check("to e5m2", {a}, env, oracle::convert<e5m2>(x, env), as_result(bitexact::convert<e5m2>(x, env)));
      t.check("to e4m3", {a}, env, oracle::convert<e4m3>(x, env), as_result(bitexact::convert<e4m3>(x, env)));
    }
    PROOF_REPORT(t, std::uint64_t{values} * targets);
  }

  TEST_CASE("mixed formats: an fp32 accumulator plus a bf16 operand, and fp32 fma of bf16 products") {
    tally t("mixed fp32 + bf16");
    generator g(0x3F);
    const std::vector<environment> envs = every_mode();
    constexpr int draws = 40000, checks_per_draw = 3;
    for (int i = 0; i < draws; ++i) {
      const auto acc = float32::from_bits(structured_operand<fp32>(g));
      const auto x = bfloat16::from_bits(structured_operand<bf16>(g)), y = bfloat16::from_bits(structured_operand<bf16>(g));
      const environment& env = envs[g.below(static_cast<std::uint32_t>(envs.size()))];
      t.check("add<fp32>(fp32, bf16)", {acc.bits, x.bits}, env, oracle::add<fp32>(acc, x, env),
              as_result(bitexact::add<fp32>(acc, x, env)));
      t.check("fma<fp32>(bf16, bf16, fp32)", {x.bits, y.bits, acc.bits}, env, oracle::fma<fp32>(x, y, acc, env),
              as_result(bitexact::fma<fp32>(x, y, acc, env)));
      t.check("add<bf16>(fp32, fp32)", {acc.bits, acc.bits}, env, oracle::add<bf16>(acc, acc, env),
              as_result(bitexact::add<bf16>(acc, acc, env)));
    }
    PROOF_REPORT(t, std::uint64_t{draws} * checks_per_draw);
  }
}
