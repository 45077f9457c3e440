// Instructions per operation, counted by callgrind rather than timed: the
// figure that holds still on a shared machine. Runs one operation over 4096
// random normal operands (exponents within +-12 of the bias, as the
// benchmark's normal mix) for a given number of passes, with the rounding
// mode a run-time value and each result kept live. count_instructions.sh
// runs it under callgrind at 5 and 25 passes and divides the difference.
//
//   instructions_per_operation fp32_add|fp32_mul|bf16_add|fp32_add_observed|fp32_mul_observed|bf16_add_observed|
//                              fp32_add_each|fp32_mul_each|bf16_add_each|loop PASSES
// The _each forms make one add_each or mul_each call over the 4096 pairs per
// pass (elementwise.hpp); their per-operation count includes their own loop.
#include <bitexact/host/elementwise.hpp>
#include <bitexact/core/operations.hpp>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string_view>
#include <vector>

using namespace bitexact;

namespace {

template <format F>
value<F> random_normal(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> exponent(F.bias() - 12, F.bias() + 12);
  const auto bits = rng();
  const std::uint32_t sign = bits & 1, fraction = static_cast<std::uint32_t>(bits >> 1) & value<F>::fraction_mask();
  return value<F>::from_bits((sign << (F.width() - 1)) | (static_cast<std::uint32_t>(exponent(rng)) << F.fraction_bits) |
                             fraction);
}

// An attached observer that listens to everything and keeps nothing.
struct discarding_observer {
  template <class Event>
  constexpr void on(const Event&) {}
};

template <format F, class Op>
void run(Op op, int passes) {
  std::mt19937_64 rng(1);
  std::vector<value<F>> xs(4096), ys(4096);
  for (auto& x : xs) x = random_normal<F>(rng);
  for (auto& y : ys) y = random_normal<F>(rng);
  environment env;
  asm volatile("" : : "r"(&env) : "memory");  // the mode stays a run-time value
  for (int pass = 0; pass < passes; ++pass)
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const auto r = op(xs[i], ys[i], env);
      asm volatile("" : : "r"(r.result.bits), "r"(r.raised.bits));
    }
}

template <format F, class Batch>
void run_each(Batch batch, int passes) {
  std::mt19937_64 rng(1);
  std::vector<value<F>> xs(4096), ys(4096), out(4096);
  for (auto& x : xs) x = random_normal<F>(rng);
  for (auto& y : ys) y = random_normal<F>(rng);
  environment env;
  asm volatile("" : : "r"(&env) : "memory");
  for (int pass = 0; pass < passes; ++pass) {
    const flags raised = batch(xs, ys, out, env);
    asm volatile("" : : "r"(raised.bits), "r"(out.data()) : "memory");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fputs("usage: instructions_per_operation OPERATION PASSES (see the source)\n", stderr);
    return 2;
  }
  const std::string_view what = argv[1];
  const int passes = std::atoi(argv[2]);
  const auto sum = [](auto a, auto b, const environment& env) { return add(a, b, env); };
  const auto product = [](auto a, auto b, const environment& env) { return mul(a, b, env); };
  const auto observed_sum = [](auto a, auto b, const environment& env) { return add(a, b, env, discarding_observer{}); };
  const auto observed_product = [](auto a, auto b, const environment& env) {
    return mul(a, b, env, discarding_observer{});
  };
  const auto sum_each = [](const auto& a, const auto& b, auto& out, const environment& env) {
    return add_each(a, b, out, env);
  };
  const auto product_each = [](const auto& a, const auto& b, auto& out, const environment& env) {
    return mul_each(a, b, out, env);
  };
  const auto loop = [](auto a, auto, const environment&) { return rounded<fp32>{a, {}}; };
  if (what == "fp32_add") run<fp32>(sum, passes);
  else if (what == "fp32_mul") run<fp32>(product, passes);
  else if (what == "bf16_add") run<bf16>(sum, passes);
  else if (what == "fp32_add_observed") run<fp32>(observed_sum, passes);
  else if (what == "fp32_mul_observed") run<fp32>(observed_product, passes);
  else if (what == "bf16_add_observed") run<bf16>(observed_sum, passes);
  else if (what == "loop") run<fp32>(loop, passes);
  else if (what == "fp32_add_each") run_each<fp32>(sum_each, passes);
  else if (what == "fp32_mul_each") run_each<fp32>(product_each, passes);
  else if (what == "bf16_add_each") run_each<bf16>(sum_each, passes);
  else {
    std::fprintf(stderr, "unknown operation '%s' (see the source)\n", argv[1]);
    return 2;
  }
  return 0;
}
