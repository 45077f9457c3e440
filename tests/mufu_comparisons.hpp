// Counting a MUFU model's outputs against the GPU's, for the replay tests of
// one test program (test_mufu): test_mufu_replay.cpp and test_mufu_lg2.cpp.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace bitexact::testing {

inline std::string hex(std::uint32_t x) {
  char buffer[12];
  std::snprintf(buffer, sizeof buffer, "%08X", x);
  return buffer;
}

// Counts the outputs compared and the mismatches, keeping the first few for the message.
struct comparisons {
  std::uint64_t compared = 0, mismatched = 0;
  std::string first;
  void compare(std::string_view what, std::uint32_t x, std::uint32_t gpu, std::uint32_t model) {
    ++compared;
    if (gpu == model) return;
    if (mismatched++ < 5)
      first += std::string(what) + " x=" + hex(x) + " gpu " + hex(gpu) + " model " + hex(model) + "\n";
  }
};

}  // namespace bitexact::testing
