// Every bf16 and every fp16 value into every format, and every fp16 value
// through sqrt, against the rational oracle; bf16 and fp16 add and mul on
// structured and random pairs against the fast oracle, which is itself
// cross-checked against the rational one.
#include <doctest/doctest.h>

#include "oracle/fast_oracle.hpp"
#include "oracle/ops.hpp"

using namespace proof;

namespace {

// Plain modes everywhere, and the policy variants in nearest-even and toward-zero only.
std::vector<environment> conversion_environments() {
  std::vector<environment> envs = every_mode();
  for (const environment& env : every_mode_and_policy())
    if (env.tiny == tininess::before_rounding || env.flush_to_zero || env.denormals_are_zero)
      if (env.rounding == rounding_mode::nearest_even || env.rounding == rounding_mode::toward_zero)
        envs.push_back(env);
  return envs;
}

template <format R, format A>
void convert_fast(tally& t, const std::vector<environment>& envs) {
  constexpr std::uint64_t count = std::uint64_t{1} << A.width();
  for (const environment& env : envs)
    for (std::uint64_t a = 0; a < count; ++a) {
      const auto x = value<A>::from_bits(static_cast<std::uint32_t>(a));
      t.check("convert", {x.bits}, env, oracle::fast::convert<R>(x, env), as_result(bitexact::convert<R>(x, env)));
    }
}

// The environments of the exact widening into fp32.
const std::vector<environment> widening_environments = {
    environment{}, environment{.denormals_are_zero = true}, environment{.nans = nan_policy::canonical}};

// Every value of A into every format: the widening ones by the rational
// oracle, the narrowing ones (<= 11-bit targets) by the fast one.
template <format A>
tally convert_all(const std::vector<environment>& envs) {
  tally t(std::string(name_of(A)) + " every value to every format");
  convert_every_value<fp32, A>(t, widening_environments);
  convert_every_value<tf32, A>(t, envs);
  convert_every_value<bf16, A>(t, envs);
  convert_fast<fp16, A>(t, envs);
  convert_fast<e5m2, A>(t, envs);
  convert_fast<e4m3, A>(t, envs);
  return t;
}

// The cases convert_all runs: fp32 under its own environments, five formats under envs.
template <format A>
std::uint64_t convert_all_cases(const std::vector<environment>& envs) {
  return (widening_environments.size() + 5 * envs.size()) * value_count<A>;
}

// Pairs for bf16/fp16 add and mul: every value against 8 of a structured set
// of 64 partners, plus random pairs; each pair through add, sub and mul.
constexpr std::size_t partners_per_value = 8;

template <format F>
std::uint64_t add_mul_sample_cases(const std::vector<environment>& envs, std::uint64_t random_pairs) {
  return 3 * envs.size() * (value_count<F> * partners_per_value + random_pairs);
}

template <format F>
tally add_mul_sample(const std::vector<environment>& envs, std::uint64_t random_pairs, std::uint64_t seed) {
  tally t(std::string(name_of(F)) + " add/sub/mul structured + random pairs");
  generator g(seed);
  std::vector<std::uint32_t> partners;
  for (int i = 0; i < 64; ++i) partners.push_back(structured_operand<F>(g));
  const auto run = [&](std::uint32_t a, std::uint32_t b) {
    const auto x = value<F>::from_bits(a), y = value<F>::from_bits(b);
    for (const environment& env : envs) {
      t.check("add", {a, b}, env, oracle::fast::add<F>(x, y, env), as_result(bitexact::add(x, y, env)));
      t.check("sub", {a, b}, env, oracle::fast::add<F>(x, y, env, true), as_result(bitexact::sub(x, y, env)));
      t.check("mul", {a, b}, env, oracle::fast::mul<F>(x, y, env), as_result(bitexact::mul(x, y, env)));
    }
  };
  for (std::uint32_t a = 0; a < (1u << 16); a += 1)
    for (std::size_t i = 0; i < partners.size(); i += partners.size() / partners_per_value)
      run(a, partners[(i + a) % partners.size()]);
  for (std::uint64_t i = 0; i < random_pairs; ++i) {
    const std::uint32_t a = (g.next() & 1) ? structured_operand<F>(g) : g.below(1u << 16);
    const std::uint32_t b = (g.next() & 1) ? structured_operand<F>(g) : g.below(1u << 16);
    run(a, b);
  }
  return t;
}

}  // namespace

TEST_SUITE("proof_convert") {
  TEST_CASE("every bf16 value converts to every format as the oracle says") {
    const std::vector<environment> envs = conversion_environments();
    const tally t = convert_all<bf16>(envs);
    PROOF_REPORT(t, convert_all_cases<bf16>(envs));
  }
  TEST_CASE("every fp16 value converts to every format as the oracle says") {
    const std::vector<environment> envs = conversion_environments();
    const tally t = convert_all<fp16>(envs);
    PROOF_REPORT(t, convert_all_cases<fp16>(envs));
  }
  TEST_CASE("every fp16 value: sqrt matches the oracle in every mode") {
    const std::vector<environment> envs = every_mode();
    const tally t = sqrt_every_value<fp16>(envs);
    PROOF_REPORT(t, envs.size() * value_count<fp16>);
  }
}

TEST_SUITE("proof_bf16_fp16") {
  TEST_CASE("the fast oracle agrees with the rational oracle on random bf16/fp16 cases") {
    tally t("fast oracle vs rational oracle");
    generator g(0xFA57);
    const auto envs = every_mode_and_policy();
    constexpr int draws = 60000, checks_per_draw = 9;
    for (int i = 0; i < draws; ++i) {
      const environment& env = envs[g.below(static_cast<std::uint32_t>(envs.size()))];
      const auto a = bfloat16::from_bits(structured_operand<bf16>(g)), b = bfloat16::from_bits(structured_operand<bf16>(g));
      t.check("bf16 add", {a.bits, b.bits}, env, oracle::add<bf16>(a, b, env), oracle::fast::add<bf16>(a, b, env));
      t.check("bf16 mul", {a.bits, b.bits}, env, oracle::mul<bf16>(a, b, env), oracle::fast::mul<bf16>(a, b, env));
      t.check("bf16 mul to e4m3", {a.bits, b.bits}, env, oracle::mul<e4m3>(a, b, env),
              oracle::fast::mul<e4m3>(a, b, env));
      const auto h = float16::from_bits(structured_operand<fp16>(g)), k = float16::from_bits(structured_operand<fp16>(g));
      t.check("fp16 add", {h.bits, k.bits}, env, oracle::add<fp16>(h, k, env), oracle::fast::add<fp16>(h, k, env));
      t.check("fp16 sub to bf16", {h.bits, k.bits}, env, oracle::sub<bf16>(h, k, env),
              oracle::fast::add<bf16>(h, k, env, true));
      t.check("fp16 mul", {h.bits, k.bits}, env, oracle::mul<fp16>(h, k, env), oracle::fast::mul<fp16>(h, k, env));
      const auto f = float32::from_bits(structured_operand<fp32>(g));
      t.check("fp32 to bf16", {f.bits}, env, oracle::convert<bf16>(f, env), oracle::fast::convert<bf16>(f, env));
      t.check("fp32 to fp16", {f.bits}, env, oracle::convert<fp16>(f, env), oracle::fast::convert<fp16>(f, env));
      t.check("fp32 to e5m2", {f.bits}, env, oracle::convert<e5m2>(f, env), oracle::fast::convert<e5m2>(f, env));
    }
    PROOF_REPORT(t, std::uint64_t{draws} * checks_per_draw);
  }
  TEST_CASE("bf16 add, sub and mul on structured and random pairs match the oracle in every mode") {
    const std::vector<environment> envs = every_mode();
    const tally t = add_mul_sample<bf16>(envs, 150000, 0xBF16);
    PROOF_REPORT(t, add_mul_sample_cases<bf16>(envs, 150000));
  }
  TEST_CASE("bf16 add, sub and mul under tininess, FTZ, DAZ and NaN-policy variants match the oracle") {
    const std::vector<environment> envs = policy_variants();
    const tally t = add_mul_sample<bf16>(envs, 20000, 0xBF17);
    PROOF_REPORT(t, add_mul_sample_cases<bf16>(envs, 20000));
  }
  TEST_CASE("fp16 add, sub and mul on structured and random pairs match the oracle in every mode") {
    const std::vector<environment> envs = every_mode();
    const tally t = add_mul_sample<fp16>(envs, 150000, 0xF16);
    PROOF_REPORT(t, add_mul_sample_cases<fp16>(envs, 150000));
  }
}
