// The operations a sweep can name, each run through the core and through
// the rational oracle, so one loop serves every operation.
#pragma once

#include "rational_oracle.hpp"
#include "sweep.hpp"

namespace proof {

enum class op { add, sub, mul, div, sqrt, fma, convert };

inline const char* name_of(op o) {
  switch (o) {
    case op::add: return "add";
    case op::sub: return "sub";
    case op::mul: return "mul";
    case op::div: return "div";
    case op::sqrt: return "sqrt";
    case op::fma: return "fma";
    case op::convert: return "convert";
  }
  return "?";
}

template <format R, format A, format B>
oracle::result core_binary(op o, value<A> a, value<B> b, const environment& env) {
  switch (o) {
    case op::add: return as_result(bitexact::add<R>(a, b, env));
    case op::sub: return as_result(bitexact::sub<R>(a, b, env));
    case op::mul: return as_result(bitexact::mul<R>(a, b, env));
    case op::div: return as_result(bitexact::div<R>(a, b, env));
    default: return {0, 0xFF};
  }
}

template <format R, format A, format B>
oracle::result oracle_binary(op o, value<A> a, value<B> b, const environment& env) {
  switch (o) {
    case op::add: return oracle::add<R>(a, b, env);
    case op::sub: return oracle::sub<R>(a, b, env);
    case op::mul: return oracle::mul<R>(a, b, env);
    case op::div: return oracle::div<R>(a, b, env);
    default: return {0, 0xFF};
  }
}

// How many values format F has: 2^width bit patterns.
template <format F>
inline constexpr std::uint64_t value_count = std::uint64_t{1} << F.width();

// Every pair of F values (2^(2*width)) under every environment given, against the rational oracle.
template <format F>
tally every_pair(op o, const std::vector<environment>& envs) {
  tally t(std::string(name_of(F)) + " " + name_of(o) + " every pair");
  constexpr std::uint32_t count = 1u << F.width();
  for (const environment& env : envs)
    for (std::uint32_t a = 0; a < count; ++a)
      for (std::uint32_t b = 0; b < count; ++b) {
        const auto x = value<F>::from_bits(a), y = value<F>::from_bits(b);
        t.check(name_of(o), {a, b}, env, oracle_binary<F>(o, x, y, env), core_binary<F>(o, x, y, env));
      }
  return t;
}

}  // namespace proof

namespace proof {

// Each of the 43 environments of every_mode_and_policy() minus the plain
// modes, thinned to three modes: the tininess, FTZ, DAZ and NaN-policy variants.
inline std::vector<environment> policy_variants() {
  std::vector<environment> envs;
  for (const environment& env : every_mode_and_policy()) {
    if (env == environment{.rounding = env.rounding, .random_bits = env.random_bits}) continue;  // plain mode
    if (env.rounding == rounding_mode::nearest_even || env.rounding == rounding_mode::toward_zero ||
        env.rounding == rounding_mode::upward || env.rounding == rounding_mode::stochastic)
      envs.push_back(env);
  }
  return envs;
}

template <format R, format A>
void convert_every_value(tally& t, const std::vector<environment>& envs) {
  constexpr std::uint64_t count = std::uint64_t{1} << A.width();
  for (const environment& env : envs)
    for (std::uint64_t a = 0; a < count; ++a) {
      const auto x = value<A>::from_bits(static_cast<std::uint32_t>(a));
      t.check("convert", {x.bits}, env, oracle::convert<R>(x, env), as_result(bitexact::convert<R>(x, env)));
    }
}

// Every value of A into each named format.
template <format A>
tally convert_every_value_to_every_format(const std::vector<environment>& envs) {
  tally t(std::string(name_of(A)) + " to fp32/bf16/fp16/tf32/e5m2/e4m3, every value");
  convert_every_value<fp32, A>(t, envs);
  convert_every_value<bf16, A>(t, envs);
  convert_every_value<fp16, A>(t, envs);
  convert_every_value<tf32, A>(t, envs);
  convert_every_value<e5m2, A>(t, envs);
  convert_every_value<e4m3, A>(t, envs);
  return t;
}

template <format A>
tally sqrt_every_value(const std::vector<environment>& envs) {
  tally t(std::string(name_of(A)) + " sqrt every value");
  constexpr std::uint64_t count = std::uint64_t{1} << A.width();
  for (const environment& env : envs)
    for (std::uint64_t a = 0; a < count; ++a) {
      const auto x = value<A>::from_bits(static_cast<std::uint32_t>(a));
      t.check("sqrt", {x.bits}, env, oracle::sqrt<A>(x, env), as_result(bitexact::sqrt(x, env)));
    }
  return t;
}

template <format F>
tally fma_sample(std::uint64_t triples, const std::vector<environment>& envs, std::uint64_t seed) {
  tally t(std::string(name_of(F)) + " fma structured sample");
  generator g(seed);
  for (std::uint64_t i = 0; i < triples; ++i) {
    const auto a = value<F>::from_bits(structured_operand<F>(g));
    const auto b = value<F>::from_bits(structured_operand<F>(g));
    const auto c = value<F>::from_bits(structured_operand<F>(g));
    for (const environment& env : envs)
      t.check("fma", {a.bits, b.bits, c.bits}, env, oracle::fma<F>(a, b, c, env),
              as_result(bitexact::fma(a, b, c, env)));
  }
  return t;
}

// Prints a sweep's counts and asserts them: exactly the cases its parameters
// call for, so that a sweep which ran none (or skipped some) fails, and no mismatch.
#define PROOF_REPORT(t, expected_cases)                                                                          \
  do {                                                                                                            \
    const std::uint64_t proof_expected_cases = (expected_cases);                                                  \
    MESSAGE((t).name() << ": " << (t).cases() << " cases (expected " << proof_expected_cases << "), "             \
                       << (t).mismatches() << " mismatches");                                                     \
    CHECK_MESSAGE(proof_expected_cases > 0, (t).name() << ": a sweep of no cases proves nothing");                \
    CHECK((t).cases() == proof_expected_cases);                                                                   \
    CHECK((t).mismatches() == 0);                                                                                 \
  } while (0)

}  // namespace proof
