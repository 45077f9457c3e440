// Every fp8 pair (E4M3FN and E5M2) for add, sub, mul and div in every
// rounding mode, and every fp8 value through sqrt and into every format,
// against the rational oracle.
#include <doctest/doctest.h>

#include "oracle/ops.hpp"

using namespace proof;

namespace {
template <int I>
using format_index = std::integral_constant<int, I>;
template <class Index>
constexpr format fp8_format = Index::value == 0 ? e4m3 : e5m2;
}  // namespace

TEST_SUITE("proof_fp8") {
  TEST_CASE_TEMPLATE("every fp8 pair in every rounding mode matches the oracle for add, sub, mul, div", I,
                     format_index<0>, format_index<1>) {
    constexpr format F = fp8_format<I>;
    const std::vector<environment> envs = every_mode();
    for (op o : {op::add, op::sub, op::mul, op::div}) {
      const tally t = every_pair<F>(o, envs);
      PROOF_REPORT(t, envs.size() * value_count<F> * value_count<F>);
    }
  }

  TEST_CASE_TEMPLATE("every fp8 pair under tininess, FTZ, DAZ and NaN-policy variants matches the oracle", I,
                     format_index<0>, format_index<1>) {
    constexpr format F = fp8_format<I>;
    const std::vector<environment> envs = policy_variants();
    for (op o : {op::add, op::mul, op::div}) {
      const tally t = every_pair<F>(o, envs);
      PROOF_REPORT(t, envs.size() * value_count<F> * value_count<F>);
    }
  }

  TEST_CASE_TEMPLATE("every fp8 value: sqrt and conversion to every format match the oracle", I, format_index<0>,
                     format_index<1>) {
    constexpr format F = fp8_format<I>;
    const std::vector<environment> envs = every_mode_and_policy();
    const tally s = sqrt_every_value<F>(envs);
    PROOF_REPORT(s, envs.size() * value_count<F>);
    const tally c = convert_every_value_to_every_format<F>(envs);
    PROOF_REPORT(c, 6 * envs.size() * value_count<F>);  // six target formats
  }

  TEST_CASE_TEMPLATE("fp8 fma on a structured sample of triples matches the oracle", I, format_index<0>,
                     format_index<1>) {
    constexpr std::uint64_t triples = 40000;
    const std::vector<environment> envs = every_mode();
    const tally t = fma_sample<fp8_format<I>>(triples, envs, 0xF8A + I::value);
    PROOF_REPORT(t, triples * envs.size());
  }
}
