// What every probe needs: checked CUDA calls, a parallel host loop for the
// model side, and one line of counts per comparison.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#define PROBE_CHECK(call)                                                                        \
  do {                                                                                           \
    const cudaError_t status_ = (call);                                                          \
    if (status_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(status_), __FILE__, __LINE__); \
      std::exit(2);                                                                              \
    }                                                                                            \
  } while (0)

namespace probe {

// Runs body(begin, end) over [0, count) on every host core.
inline void parallel_for(std::uint64_t count, const std::function<void(std::uint64_t, std::uint64_t)>& body) {
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  const std::uint64_t chunk = (count + workers - 1) / workers;
  std::vector<std::thread> threads;
  for (unsigned w = 0; w < workers; ++w) {
    const std::uint64_t begin = std::min(count, w * chunk), end = std::min(count, begin + chunk);
    threads.emplace_back([&, begin, end] { body(begin, end); });
  }
  for (auto& t : threads) t.join();
}

// Counts cases and mismatches of one comparison, keeping the first few for the report.
struct tally {
  std::string name;
  std::atomic<std::uint64_t> compared{0}, mismatches{0};
  std::mutex lock;
  std::vector<std::string> first;

  explicit tally(std::string n) : name(std::move(n)) {}
  void mismatch(const std::string& what) {
    if (mismatches.fetch_add(1) < 5) {
      std::lock_guard<std::mutex> guard(lock);
      first.push_back(what);
    }
  }
  // Prints "probe <name>: compared N, mismatches M" and returns whether M == 0.
  bool report() {
    std::printf("probe %-40s compared %14llu  mismatches %llu\n", name.c_str(),
                static_cast<unsigned long long>(compared.load()), static_cast<unsigned long long>(mismatches.load()));
    for (const auto& line : first) std::printf("    %s\n", line.c_str());
    std::fflush(stdout);
    return mismatches.load() == 0;
  }
};

inline void print_device() {
  cudaDeviceProp prop{};
  PROBE_CHECK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0, runtime = 0;
  PROBE_CHECK(cudaDriverGetVersion(&driver));
  PROBE_CHECK(cudaRuntimeGetVersion(&runtime));
  std::printf("device %s (sm_%d%d), driver API %d, runtime %d\n", prop.name, prop.major, prop.minor, driver, runtime);
}

}  // namespace probe
