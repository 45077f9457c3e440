// MUFU analysis: decodes the captured ex2/rcp tables, checks their checksums,
// measures how compactly they encode (first differences, distance from the
// correctly rounded value), and replays the MUFU samples in ops.bin against
// the table models, including the non-ftz wrappers seen in the SASS.
// Build: g++ -O2 -std=c++20 -o analyze_sfu analyze_sfu.cpp
// Run:   ./analyze_sfu .captures
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "capture_files.hpp"
#include "reference_round.hpp"

using reference::bits_of;
using reference::float_of;

namespace {

bool is_nan(std::uint32_t bits) { return (bits & 0x7FFFFFFFu) > 0x7F800000u; }

// The models, as verified on the GPU over all 2^32 inputs (capture_common.cuh).
// half_g[k] = ex2.approx.ftz(-1 - k*2^-23) = G(k)/2; positive[k] = ex2.approx.ftz(k*2^-23) = P(k).
std::uint32_t ex2_ftz_model(std::uint32_t x, const std::vector<std::uint32_t>& half_g,
                            const std::vector<std::uint32_t>& positive) {
  const std::uint32_t magnitude = x & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return 0x7FFFFFFFu;
  if (x >> 31) {
    if (magnitude >= 0x43800000u) return 0;
    const auto grid_steps = static_cast<std::uint32_t>(float_of(magnitude) * 8388608.0f);  // |x| * 2^23
    const std::uint32_t g = half_g[grid_steps & 0x7FFFFF] + (1u << 23);
    const int exponent = static_cast<int>(g >> 23) - static_cast<int>(grid_steps >> 23);
    return exponent <= 0 ? 0 : (g & 0x807FFFFFu) | (static_cast<std::uint32_t>(exponent) << 23);
  }
  if (x >= 0x43000000u) return 0x7F800000u;
  const auto grid_steps = static_cast<std::uint32_t>(float_of(x) * 8388608.0f);
  const std::uint32_t entry = positive[grid_steps & 0x7FFFFF];
  const int exponent = static_cast<int>(entry >> 23) + static_cast<int>(grid_steps >> 23);
  return exponent >= 255 ? 0x7F800000u : (entry & 0x807FFFFFu) | (static_cast<std::uint32_t>(exponent) << 23);
}
// reciprocal[k] = rcp.approx.ftz(1 + k*2^-23) = R(k).
std::uint32_t rcp_ftz_model(std::uint32_t x, const std::vector<std::uint32_t>& reciprocal) {
  const std::uint32_t sign = x & 0x80000000u, magnitude = x & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return 0x7FFFFFFFu;
  if (magnitude == 0x7F800000u) return sign;
  if (magnitude < 0x00800000u) return sign | 0x7F800000u;
  const std::uint32_t entry = reciprocal[magnitude & 0x7FFFFF];
  const int exponent = static_cast<int>(entry >> 23) - (static_cast<int>(magnitude >> 23) - 127);
  if (exponent <= 0) return sign;
  if (exponent >= 255) return sign | 0x7F800000u;
  return sign | (entry & 0x7FFFFFu) | (static_cast<std::uint32_t>(exponent) << 23);
}
// SASS of ex2.approx.f32: FSETP.GEU P, x, -126; FSEL x' = P ? x : x*0.5; MUFU.EX2; @!P FMUL r, r, r.
std::uint32_t ex2_model(std::uint32_t x, const std::vector<std::uint32_t>& half_g,
                        const std::vector<std::uint32_t>& positive) {
  const float x_float = float_of(x);
  if (x_float < -126.0f) {
    const float half_power = float_of(ex2_ftz_model(bits_of(x_float * 0.5f), half_g, positive));
    return bits_of(half_power * half_power);
  }
  return ex2_ftz_model(x, half_g, positive);
}
// SASS of rcp.approx.f32: s = |x| > 2^126 ? 0.25 : (|x| < 2^-126 ? 2^24 : 1); r = s * MUFU.RCP(x * s).
std::uint32_t rcp_model(std::uint32_t x, const std::vector<std::uint32_t>& reciprocal) {
  const float x_float = float_of(x);
  const float scale = std::fabs(x_float) > 0x1p126f ? 0.25f : (std::fabs(x_float) < 0x1p-126f ? 0x1p24f : 1.0f);
  const float scaled_reciprocal = float_of(rcp_ftz_model(bits_of(x_float * scale), reciprocal));
  return bits_of(scale * scaled_reciprocal);
}

// How compactly a table encodes: its first differences, and its distance from the correctly rounded values.
void table_statistics(const char* name, const std::vector<std::uint32_t>& values, double (*exact)(double),
                      double (*input)(std::uint32_t)) {
  std::map<long long, long> steps, errors;
  for (std::size_t i = 1; i < values.size(); ++i)
    steps[static_cast<long long>(values[i]) - static_cast<long long>(values[i - 1])]++;
  long long first_step_of_three = -1;
  for (std::size_t i = 1; i < values.size(); ++i) {
    const long long step = static_cast<long long>(values[i]) - static_cast<long long>(values[i - 1]);
    if ((step == 3 || step == -3) && first_step_of_three < 0) first_step_of_three = static_cast<long long>(i);
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    // The correctly rounded float of the exact value (long double evaluation, then nearest-even to float).
    const auto correctly_rounded = static_cast<float>(exact(input(static_cast<std::uint32_t>(i))));
    errors[static_cast<long long>(values[i]) - static_cast<long long>(bits_of(correctly_rounded))]++;
  }
  double step_entropy = 0, error_entropy = 0;
  const auto entries = static_cast<double>(values.size());
  for (const auto& [step, count] : steps) step_entropy -= count / entries * std::log2(count / entries);
  for (const auto& [error, count] : errors) error_entropy -= count / entries * std::log2(count / entries);
  std::printf("  %s\n    first differences:", name);
  for (const auto& [step, count] : steps) std::printf(" %lld:%ld", step, count);
  std::printf("  (entropy %.3f bits/entry; |delta|=3 first at k=%lld)\n    value - RN(exact) in ulps:", step_entropy,
              first_step_of_three);
  for (const auto& [error, count] : errors) std::printf(" %lld:%ld", error, count);
  std::printf("  (entropy %.3f bits/entry)\n", error_entropy);
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string dir = argc > 1 ? argv[1] : ".captures";
  const std::vector<capture::table> a = capture::read_tables(dir + "/sfu_tables_a.bin");
  const std::vector<capture::table> b = capture::read_tables(dir + "/sfu_tables_b.bin");
  std::printf("== tables\n");
  for (const auto* tables : {&a, &b})
    for (const capture::table& table : *tables)
      std::printf("  %-50s %zu entries, checksum %s, first %08x last %08x\n", table.name.c_str(), table.values.size(),
                  table.checksum_ok ? "ok" : "BAD", table.values.front(), table.values.back());
  for (const auto* tables : {&a, &b})
    if (tables->size() != 2 || (*tables)[0].values.size() != (1u << 23) || (*tables)[1].values.size() != (1u << 23))
      throw std::runtime_error("each of sfu_tables_a.bin and sfu_tables_b.bin must hold two tables of 2^23 entries");
  const std::vector<std::uint32_t>&half_g = a[0].values, &positive = a[1].values, &one_plus = b[0].values,
        &reciprocal = b[1].values;
  // G(k) = 2 * half_g[k], the table of 2^(-k/2^23).
  std::vector<std::uint32_t> g(half_g.size());
  for (std::size_t k = 0; k < g.size(); ++k) g[k] = half_g[k] + (1u << 23);
  long one_plus_is_double = 0, positive_is_double_g = 0;
  for (std::size_t k = 0; k < positive.size(); ++k) {
    one_plus_is_double += one_plus[k] == positive[k] + (1u << 23);
    if (k) positive_is_double_g += positive[k] == g[(1u << 23) - k] + (1u << 23);
  }
  std::printf("  ex2(1+k/2^23) == 2*ex2(k/2^23): %ld of %zu\n", one_plus_is_double, positive.size());
  std::printf("  ex2(k/2^23) == 2*G(2^23-k) (k>0): %ld of %zu\n", positive_is_double_g, positive.size() - 1);
  long g_not_decreasing = 0, reciprocal_not_decreasing = 0;
  for (std::size_t k = 1; k < g.size(); ++k) {
    g_not_decreasing += g[k] <= g[k - 1];
    reciprocal_not_decreasing += reciprocal[k] <= reciprocal[k - 1];
  }
  std::printf("  G non-increasing steps: %ld of %zu; R non-increasing steps: %ld\n", g_not_decreasing, g.size() - 1,
              reciprocal_not_decreasing);
  std::printf("== encodings\n");
  table_statistics(
      "G(k) = 2^(-k/2^23) table", g, [](double t) { return (double)exp2l(-(long double)t); },
      [](uint32_t k) { return (double)k * 0x1p-23; });
  table_statistics(
      "P(k) = ex2(k/2^23) table", positive, [](double t) { return (double)exp2l((long double)t); },
      [](uint32_t k) { return (double)k * 0x1p-23; });
  table_statistics(
      "R(k) = rcp(1+k/2^23) table", reciprocal, [](double t) { return (double)(1.0L / (long double)t); },
      [](uint32_t k) { return 1.0 + (double)k * 0x1p-23; });

  const capture::ops_capture ops = capture::read_ops(dir + "/ops.bin");
  const capture::scalar_section& s = ops.section("mufu");
  const std::vector<std::uint32_t>& x = s.find("x").values;
  const char* names[4] = {"ex2.approx.ftz.f32", "ex2.approx.f32", "rcp.approx.ftz.f32", "rcp.approx.f32"};
  std::printf("== MUFU samples (%u inputs: off-grid positives, the -126 switch, subnormals, specials)\n", s.count);
  for (int which = 0; which < 4; ++which) {
    const std::vector<std::uint32_t>& gpu = s.find(names[which]).values;
    long wrong = 0;
    int shown = 0;
    for (std::uint32_t i = 0; i < s.count; ++i) {
      std::uint32_t model;
      switch (which) {
        case 0:
          model = ex2_ftz_model(x[i], half_g, positive);
          break;
        case 1:
          model = ex2_model(x[i], half_g, positive);
          break;
        case 2:
          model = rcp_ftz_model(x[i], reciprocal);
          break;
        default:
          model = rcp_model(x[i], reciprocal);
          break;
      }
      const bool matches = is_nan(model) ? gpu[i] == 0x7FFFFFFFu : gpu[i] == model;
      if (!matches) {
        ++wrong;
        if (shown++ < 5) std::printf("    %s x=%08x got=%08x model=%08x\n", names[which], x[i], gpu[i], model);
      }
    }
    std::printf("  %-20s model mismatches %ld / %u (NaN results compared as 0x7FFFFFFF)\n", names[which], wrong,
                s.count);
  }
  // A few named values.
  std::printf("  ex2.approx.f32(-127) = %08x, ex2.approx.f32(-149) = %08x, ex2.approx.f32(-126.5) = %08x\n",
              ex2_model(bits_of(-127.0f), half_g, positive), ex2_model(bits_of(-149.0f), half_g, positive),
              ex2_model(bits_of(-126.5f), half_g, positive));
  return 0;
} catch (const std::exception& error) {
  std::fprintf(stderr, "analyze_sfu: %s\n", error.what());
  return 1;
}
