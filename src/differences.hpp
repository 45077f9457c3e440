// How two arrays of one format differ, in words: a value's text, signed ulp
// steps, the differing elements by distance and direction. The attention and
// matmul commands print their comparisons with these.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include <bitexact/core/format.hpp>

namespace bitexact::cli {

template <format F>
std::string value_text(value<F> x) {
  return fmt::format("0x{:0{}X} ({})", x.bits, F.width() / 4, to_double(x));
}

// B's bits against A's as a signed count of representable steps (values of
// either sign; NaN apart).
template <format F>
long long ulp_steps(value<F> a, value<F> b) {
  constexpr std::uint32_t magnitude = (std::uint32_t{1} << (F.width() - 1)) - 1;
  const auto ordered = [](std::uint32_t bits) {
    return (bits & ~magnitude) ? -static_cast<long long>(bits & magnitude) : static_cast<long long>(bits);
  };
  return ordered(b.bits) - ordered(a.bits);
}

// How B's differing elements lie against A's: how many, their distances in
// ulps of the format (1, 2, 3-4, 5-8, ...) and how many B has above A.
struct difference_summary {
  std::uint64_t differ = 0, above = 0, nan = 0;
  std::map<long long, std::uint64_t> by_distance;  // bucket: its largest distance
  std::uint64_t within(long long ulps) const {
    std::uint64_t n = 0;
    for (const auto& [bucket, count] : by_distance) n += bucket <= ulps ? count : 0;
    return n;
  }
  std::string distances() const {
    std::string text;
    for (const auto& [bucket, count] : by_distance)
      text += fmt::format("{}{}: {}", text.empty() ? "" : ", ",
                          bucket <= 2 ? std::to_string(bucket) : fmt::format("{}-{}", bucket / 2 + 1, bucket), count);
    return text;
  }
};

template <format F>
difference_summary differences_of(const std::vector<value<F>>& a, const std::vector<value<F>>& b) {
  difference_summary s;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].bits == b[i].bits) continue;
    ++s.differ;
    if (a[i].is_nan() || b[i].is_nan()) {
      ++s.nan;
      continue;
    }
    const long long steps = ulp_steps(a[i], b[i]);
    s.above += steps > 0;
    long long bucket = 1;
    while (bucket < std::llabs(steps)) bucket *= 2;
    ++s.by_distance[bucket];
  }
  return s;
}

// How B's elements differ from A's: the count, the distances in ulps of the
// format and their direction.
template <format F>
void print_differences(std::string_view name, std::string_view unit, const std::vector<value<F>>& a,
                       const std::vector<value<F>>& b) {
  const difference_summary s = differences_of(a, b);
  std::printf("%s: %zu elements, %llu differ (%.4f%%)\n", std::string(name).c_str(), a.size(),
              static_cast<unsigned long long>(s.differ),
              a.empty() ? 0.0 : 100.0 * static_cast<double>(s.differ) / static_cast<double>(a.size()));
  if (s.differ == 0) return;
  std::printf("  distance in %s ulps %s%s\n  B above A: %llu, below: %llu\n", std::string(unit).c_str(),
              s.distances().c_str(), s.nan ? fmt::format("; NaN in one of them: {}", s.nan).c_str() : "",
              static_cast<unsigned long long>(s.above), static_cast<unsigned long long>(s.differ - s.above - s.nan));
}

}  // namespace bitexact::cli
