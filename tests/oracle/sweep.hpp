// What every proof sweep shares: the environments it runs under, a tally of
// cases and mismatches, a readable mismatch report, a parallel loop, and a
// reproducible generator of structured random operands.
#pragma once

#include <bitexact/bitexact.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rational_oracle.hpp"

namespace proof {

using namespace bitexact;

inline constexpr rounding_mode deterministic_modes[] = {
    rounding_mode::nearest_even, rounding_mode::nearest_away, rounding_mode::toward_zero,
    rounding_mode::upward,       rounding_mode::downward,     rounding_mode::to_odd};

// Random bits that probe stochastic rounding's edges: never up (all ones),
// up on anything (zero), a half-ulp threshold and its neighbours, and an odd one.
inline constexpr std::uint32_t stochastic_bits[] = {0u, 1u, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFFu, 0x2545F491u};

// Every rounding mode, stochastic with each probe above: 12 environments.
inline std::vector<environment> every_mode() {
  std::vector<environment> envs;
  for (rounding_mode m : deterministic_modes) envs.push_back(environment{.rounding = m});
  for (std::uint32_t bits : stochastic_bits)
    envs.push_back(environment{.rounding = rounding_mode::stochastic, .random_bits = bits});
  return envs;
}

// Every mode crossed with tininess, FTZ, DAZ and NaN policy variants (the
// first 12 are every_mode()).
inline std::vector<environment> every_mode_and_policy() {
  std::vector<environment> envs = every_mode();
  for (rounding_mode m : deterministic_modes) {
    envs.push_back(environment{.rounding = m, .tiny = tininess::before_rounding});
    envs.push_back(environment{.rounding = m, .flush_to_zero = true});
    envs.push_back(environment{.rounding = m, .tiny = tininess::before_rounding, .flush_to_zero = true});
    envs.push_back(environment{.rounding = m, .denormals_are_zero = true});
    envs.push_back(environment{.rounding = m, .flush_to_zero = true, .denormals_are_zero = true,
                               .nans = nan_policy::canonical});
  }
  envs.push_back(environment{.rounding = rounding_mode::stochastic, .tiny = tininess::before_rounding,
                             .flush_to_zero = true, .random_bits = 0x80000000u});
  return envs;
}

inline std::string describe(const environment& env) {
  std::string s{name_of(env.rounding)};
  if (env.rounding == rounding_mode::stochastic) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "(0x%08X)", env.random_bits);
    s += buf;
  }
  s += env.tiny == tininess::before_rounding ? " tiny-before" : " tiny-after";
  if (env.flush_to_zero) s += " ftz";
  if (env.denormals_are_zero) s += " daz";
  if (env.nans == nan_policy::canonical) s += " canonical-nan";
  return s;
}

template <format F>
oracle::result as_result(const rounded<F>& r) {
  return {r.result.bits, r.raised.bits};
}

// Counts cases and mismatches; prints the first few mismatches in full.
class tally {
 public:
  // BITEXACT_PROOF_REPORTS sets how many mismatches are printed (default 8).
  explicit tally(std::string name) : name_(std::move(name)), max_reports_(reports_wanted()) {}

  static int reports_wanted() {
    const char* s = std::getenv("BITEXACT_PROOF_REPORTS");
    return s ? std::atoi(s) : 8;
  }

  void add_cases(std::uint64_t n) { cases_ += n; }

  // Compares and counts one case; returns whether it matched.
  bool check(const char* op, std::initializer_list<std::uint32_t> operands, const environment& env,
             const oracle::result& expected, const oracle::result& got) {
    ++cases_;
    if (expected == got) return true;
    const std::uint64_t index = mismatches_++;
    if (index < static_cast<std::uint64_t>(max_reports_)) {
      std::string line = name_ + ": " + op;
      char buf[64];
      for (std::uint32_t x : operands) {
        std::snprintf(buf, sizeof buf, " 0x%X", x);
        line += buf;
      }
      std::snprintf(buf, sizeof buf, " [%s]", describe(env).c_str());
      line += buf;
      std::snprintf(buf, sizeof buf, " oracle 0x%X flags %02X, core 0x%X flags %02X", expected.bits, expected.flags,
                    got.bits, got.flags);
      line += buf;
      std::lock_guard lock(print_mutex());
      std::fprintf(stderr, "MISMATCH %s\n", line.c_str());
    }
    return false;
  }

  std::uint64_t cases() const { return cases_; }
  std::uint64_t mismatches() const { return mismatches_; }
  const std::string& name() const { return name_; }

  void merge(const tally& other) {
    cases_ += other.cases_;
    mismatches_ += other.mismatches_;
  }

  static std::mutex& print_mutex() {
    static std::mutex m;
    return m;
  }

 private:
  std::string name_;
  int max_reports_;
  std::uint64_t cases_ = 0;
  std::uint64_t mismatches_ = 0;
};

// Worker threads for the long sweeps: BITEXACT_PROOF_THREADS, default 2 (the
// development machine has two cores).
inline unsigned worker_count() {
  if (const char* s = std::getenv("BITEXACT_PROOF_THREADS")) {
    const int n = std::atoi(s);
    if (n > 0) return static_cast<unsigned>(n);
  }
  return 2;
}

// Runs body(begin, end, tally&) over [0, count) in chunks on worker_count()
// threads and returns the merged tally; prints count, mismatches and time.
template <class Body>
tally parallel_sweep(const std::string& name, std::uint64_t count, Body body, unsigned workers = worker_count()) {
  const auto start = std::chrono::steady_clock::now();
  constexpr std::uint64_t chunk = 1u << 16;
  std::atomic<std::uint64_t> next{0};
  std::vector<tally> partial(workers, tally(name));
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      for (;;) {
        const std::uint64_t begin = next.fetch_add(chunk);
        if (begin >= count) break;
        body(begin, std::min(begin + chunk, count), partial[w]);
      }
    });
  }
  for (auto& t : threads) t.join();
  tally total(name);
  for (const auto& p : partial) total.merge(p);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %llu cases, %llu mismatches, %.1f s on %u threads\n", name.c_str(),
              static_cast<unsigned long long>(total.cases()), static_cast<unsigned long long>(total.mismatches()),
              seconds, workers);
  std::fflush(stdout);
  return total;
}

// A small reproducible generator (SplitMix64): the same seed gives the same cases.
class generator {
 public:
  explicit generator(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::uint32_t below(std::uint32_t n) { return static_cast<std::uint32_t>(next() % n); }

 private:
  std::uint64_t state_;
};

// An operand of format F drawn to hit the interesting regions often: zeros,
// subnormals, the smallest normals, the largest finite values, Inf/NaN
// (quiet and signaling), values near 1, fractions with few or all bits set,
// and plain random patterns.
template <format F>
std::uint32_t structured_operand(generator& g) {
  using V = value<F>;
  const std::uint32_t sign = static_cast<std::uint32_t>(g.next() & 1) << (F.width() - 1);
  const std::uint32_t fraction_mask = V::fraction_mask();
  const std::uint32_t top_exponent = static_cast<std::uint32_t>(F.max_biased_exponent());
  const std::uint64_t r = g.next();
  std::uint32_t fraction;
  switch ((r >> 8) % 6) {  // fraction shape
    case 0: fraction = 0; break;
    case 1: fraction = fraction_mask; break;
    case 2: fraction = (1u << g.below(F.fraction_bits)); break;
    case 3: fraction = fraction_mask ^ (1u << g.below(F.fraction_bits)); break;
    default: fraction = static_cast<std::uint32_t>(g.next()) & fraction_mask; break;
  }
  std::uint32_t exponent;
  switch (r % 10) {  // exponent region
    case 0: exponent = 0; break;                                         // zero / subnormal
    case 1: exponent = 1 + g.below(3); break;                            // smallest normals
    case 2: exponent = top_exponent - 1 - g.below(3); break;             // largest finite
    case 3: exponent = top_exponent; break;                              // Inf / NaN (E4M3FN: finite too)
    case 4: exponent = static_cast<std::uint32_t>(F.bias()) - 2 + g.below(5); break;  // near 1
    default: exponent = g.below(top_exponent + 1); break;
  }
  return sign | (exponent << F.fraction_bits) | fraction;
}

}  // namespace proof
