// A fingerprint of the core's behaviour: hashes of result bits and flags over
// fixed pseudo-random cases, for checking that a change meant to be
// behaviour-neutral (a speed-up, a refactor) is. Build it against the old and
// the new headers and compare the printed lines:
//
//   git worktree add /tmp/old <commit>
//   g++ -O2 -std=c++20 -pthread -I/tmp/old/include -o /tmp/hash_old tools/behaviour_hash.cpp
//   g++ -O2 -std=c++20 -pthread -Iinclude -o /tmp/hash_new tools/behaviour_hash.cpp
//   diff <(/tmp/hash_old) <(/tmp/hash_new)          # add --conversions: every fp32 value too (minutes)
//
// The sets: add, sub, mul, fma, convert and mixed fp32 + x add in all 56
// environments (7 modes x tininess x FTZ x DAZ x NaN policy) on random,
// near-cancelling, tiny, huge and near-tie operands of six formats; 200,000
// random bit-pattern add/mul pairs per format in random environments;
// from_double on 3 million doubles per format; and, with --conversions,
// every fp32 value converted to bf16, fp16 and e4m3 in five environments.
#include <bitexact/bitexact.hpp>  // the one include that builds against old trees too

#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

using namespace bitexact;

namespace {

struct fnv1a {
  std::uint64_t state = 1469598103934665603u;
  void mix(std::uint64_t v) {
    state ^= v;
    state *= 1099511628211u;
  }
  template <format F>
  void mix(const rounded<F>& r) {
    mix(r.result.bits);
    mix(r.raised.bits);
  }
};

template <format F>
value<F> structured(std::mt19937_64& rng) {
  const auto b = rng();
  const unsigned kind = b % 8;
  if (kind < 3) return value<F>::from_bits(static_cast<std::uint32_t>(b >> 32) & ((1ull << F.width()) - 1));
  const std::uint32_t sign = (b >> 3) & 1;
  int biased = F.bias() + static_cast<int>((b >> 4) % 7) - 3;
  if (kind == 3) biased = static_cast<int>((b >> 4) % 4);                                // tiny
  if (kind == 4) biased = F.max_biased_exponent() - 1 - static_cast<int>((b >> 4) % 2);  // huge
  std::uint32_t fraction = static_cast<std::uint32_t>(b >> 8) & value<F>::fraction_mask();
  if (kind == 5) fraction &= 0xF;
  if (kind == 6) fraction |= value<F>::fraction_mask() & ~7u;
  return value<F>::from_bits((sign << (F.width() - 1)) | (static_cast<std::uint32_t>(biased) << F.fraction_bits) |
                             fraction);
}

template <format F>
std::uint64_t every_environment(long cases) {
  fnv1a h;
  std::mt19937_64 rng(42);
  for (int mode = 0; mode < 7; ++mode)
    for (int tiny = 0; tiny < 2; ++tiny)
      for (int zeroing = 0; zeroing < 4; ++zeroing)
        for (int nans = 0; nans < 2; ++nans) {
          environment env;
          env.rounding = static_cast<rounding_mode>(mode);
          env.tiny = static_cast<tininess>(tiny);
          env.flush_to_zero = zeroing & 1;
          env.denormals_are_zero = zeroing >> 1;
          env.nans = static_cast<nan_policy>(nans);
          for (long i = 0; i < cases; ++i) {
            env.random_bits = static_cast<std::uint32_t>(rng());
            const auto a = structured<F>(rng);
            auto b = structured<F>(rng);
            if (i % 4 == 0)  // near -a: cancellation
              b = value<F>::from_bits((a.bits ^ (1u << (F.width() - 1)) ^ (rng() & 0xFF)) & ((1ull << F.width()) - 1));
            h.mix(add(a, b, env));
            h.mix(sub(a, b, env));
            h.mix(mul(a, b, env));
            if (i % 8 == 0) {
              h.mix(fma(a, b, structured<F>(rng), env));
              h.mix(convert<bf16>(a, env));
              h.mix(add<fp32>(float32{static_cast<std::uint32_t>(rng())}, b, env));
            }
          }
        }
  return h.state;
}

environment random_environment(std::mt19937_64& rng) {
  environment env;
  env.rounding = static_cast<rounding_mode>(rng() % 7);
  env.tiny = static_cast<tininess>(rng() % 2);
  env.flush_to_zero = rng() & 1;
  env.denormals_are_zero = rng() & 1;
  env.random_bits = static_cast<std::uint32_t>(rng());
  return env;
}

template <format F>
std::uint64_t random_patterns(std::mt19937_64& rng) {
  fnv1a h;
  for (int i = 0; i < 200000; ++i) {
    const environment env = random_environment(rng);
    const auto a = value<F>::from_bits(static_cast<std::uint32_t>(rng() & ((1ull << F.width()) - 1)));
    const auto b = value<F>::from_bits(static_cast<std::uint32_t>(rng() & ((1ull << F.width()) - 1)));
    h.mix(add(a, b, env));
    h.mix(mul(a, b, env));
  }
  return h.state;
}

template <format R>
std::uint64_t from_doubles(std::mt19937_64& rng) {
  fnv1a h;
  for (int i = 0; i < 3000000; ++i) {
    std::uint64_t bits = rng();
    if (i % 3 == 0)  // near R's range
      bits = (bits & 0x800FFFFFFFFFFFFFu) | (static_cast<std::uint64_t>(1023 + static_cast<int>(rng() % 300) - 150) << 52);
    const environment env = random_environment(rng);
    h.mix(from_double<R>(std::bit_cast<double>(bits), env));
  }
  return h.state;
}

// Every fp32 value into R, on two threads.
template <format R>
std::uint64_t every_fp32(rounding_mode mode, bool flush) {
  std::uint64_t halves[2] = {0, 0};
  const auto work = [&](unsigned half) {
    environment env;
    env.rounding = mode;
    env.flush_to_zero = flush;
    env.tiny = flush ? tininess::before_rounding : tininess::after_rounding;
    std::uint64_t sum = 0;
    for (std::uint64_t i = half; i < (std::uint64_t{1} << 32); i += 2) {
      env.random_bits = static_cast<std::uint32_t>((i * 0x9E3779B97F4A7C15u) >> 32);
      const auto r = convert<R>(float32{static_cast<std::uint32_t>(i)}, env);
      sum += ((std::uint64_t{r.result.bits} << 8) | r.raised.bits) * (i | 1);
    }
    halves[half] = sum;
  };
  std::thread first(work, 0u), second(work, 1u);
  first.join();
  second.join();
  return halves[0] ^ halves[1];
}

}  // namespace

int main(int argc, char** argv) {
  std::printf("environments fp32 %016llx\n", static_cast<unsigned long long>(every_environment<fp32>(20000)));
  std::printf("environments bf16 %016llx\n", static_cast<unsigned long long>(every_environment<bf16>(20000)));
  std::printf("environments fp16 %016llx\n", static_cast<unsigned long long>(every_environment<fp16>(20000)));
  std::printf("environments e4m3 %016llx\n", static_cast<unsigned long long>(every_environment<e4m3>(20000)));
  std::printf("environments e5m2 %016llx\n", static_cast<unsigned long long>(every_environment<e5m2>(20000)));
  std::printf("environments tf32 %016llx\n", static_cast<unsigned long long>(every_environment<tf32>(20000)));
  std::mt19937_64 rng(5);
  std::printf("patterns fp16 %016llx\n", static_cast<unsigned long long>(random_patterns<fp16>(rng)));
  std::printf("patterns e5m2 %016llx\n", static_cast<unsigned long long>(random_patterns<e5m2>(rng)));
  std::printf("patterns e4m3 %016llx\n", static_cast<unsigned long long>(random_patterns<e4m3>(rng)));
  std::printf("patterns tf32 %016llx\n", static_cast<unsigned long long>(random_patterns<tf32>(rng)));
  std::printf("patterns bf16 %016llx\n", static_cast<unsigned long long>(random_patterns<bf16>(rng)));
  std::printf("patterns fp32 %016llx\n", static_cast<unsigned long long>(random_patterns<fp32>(rng)));
  std::printf("from_double fp32 %016llx\n", static_cast<unsigned long long>(from_doubles<fp32>(rng)));
  std::printf("from_double bf16 %016llx\n", static_cast<unsigned long long>(from_doubles<bf16>(rng)));
  std::printf("from_double fp16 %016llx\n", static_cast<unsigned long long>(from_doubles<fp16>(rng)));
  std::printf("from_double e4m3 %016llx\n", static_cast<unsigned long long>(from_doubles<e4m3>(rng)));
  if (argc > 1 && std::strcmp(argv[1], "--conversions") == 0) {
    std::printf("every fp32 to bf16, nearest_even %016llx\n",
                static_cast<unsigned long long>(every_fp32<bf16>(rounding_mode::nearest_even, false)));
    std::printf("every fp32 to bf16, toward_zero, FTZ %016llx\n",
                static_cast<unsigned long long>(every_fp32<bf16>(rounding_mode::toward_zero, true)));
    std::printf("every fp32 to bf16, stochastic %016llx\n",
                static_cast<unsigned long long>(every_fp32<bf16>(rounding_mode::stochastic, false)));
    std::printf("every fp32 to fp16, nearest_even, FTZ %016llx\n",
                static_cast<unsigned long long>(every_fp32<fp16>(rounding_mode::nearest_even, true)));
    std::printf("every fp32 to e4m3, to_odd %016llx\n",
                static_cast<unsigned long long>(every_fp32<e4m3>(rounding_mode::to_odd, false)));
  }
  return 0;
}
