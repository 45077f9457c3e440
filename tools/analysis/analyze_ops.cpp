// Compares the scalar captures in ops.bin (fp32 add/mul/fma in four rounding
// modes with and without .ftz, bf16 add/mul/fma, f32->bf16/f16 conversions)
// with IEEE reference results, and reports NaN encodings and ftz behaviour.
// Build: g++ -O1 -frounding-math -std=c++20 -o analyze_ops analyze_ops.cpp
// Run:   ./analyze_ops .captures/ops.bin
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <string>

#include "capture_files.hpp"
#include "reference_round.hpp"

using namespace reference;

namespace {

bool is_nan(std::uint32_t bits, const float_format& f) { return (bits & (f.sign_bit() - 1)) > f.infinity_bits(); }
bool is_subnormal(std::uint32_t bits, const float_format& f) {
  return (bits & f.infinity_bits()) == 0 && (bits & ((1u << f.fraction_bits) - 1)) != 0;
}
double to_double(std::uint32_t bits, const float_format& f) {
  if (&f == &bf16_format) return static_cast<double>(float_of(bits << 16));
  if (&f == &fp32_format) return static_cast<double>(float_of(bits));
  return 0;
}
// The NaN the references return: every NaN output counts as one (its encoding is tallied apart).
std::uint32_t some_nan(const float_format& f) { return f.infinity_bits() | (f.sign_bit() - 1); }

// When ftz flushes a tiny result: the hypotheses tried for .ftz, in the order the report lists them.
enum class tininess_rule { after_bounded_rounding, before_rounding, after_unbounded_rounding };
constexpr const char* tininess_labels[3] = {" [tiny = subnormal after rounding]", " [tiny = |exact| < 2^-126]",
                                            " [tiny = after rounding to 24 bits, unbounded exponent]"};

// Reference for one arithmetic result. ftz: flush subnormal inputs to signed
// zero, and flush a tiny result, tininess judged by `tiny`.
std::uint32_t reference_result(operation op, std::uint32_t a, std::uint32_t b, std::uint32_t c, const float_format& f,
                               rounding mode, bool ftz, tininess_rule tiny) {
  const auto flush = [&](std::uint32_t x) { return ftz && is_subnormal(x, f) ? x & f.sign_bit() : x; };
  a = flush(a);
  b = flush(b);
  c = flush(c);
  if (is_nan(a, f) || is_nan(b, f) || (op == operation::fma && is_nan(c, f))) return some_nan(f);
  const exact_result exact = exact_in_double(op, to_double(a, f), to_double(b, f), to_double(c, f), mode);
  if (std::isnan(exact.in_mode)) return some_nan(f);
  if (std::isinf(exact.in_mode) && std::isinf(exact.round_to_odd))
    return exact.in_mode > 0 ? f.infinity_bits() : f.infinity_bits() | f.sign_bit();
  if (exact.round_to_odd == 0) return std::signbit(exact.in_mode) ? f.sign_bit() : 0;
  const std::uint32_t rounded = round_to_format(exact.round_to_odd, f, mode);
  if (ftz) {
    bool is_tiny;
    if (tiny == tininess_rule::before_rounding) {
      is_tiny = std::fabs(exact.round_to_odd) < std::ldexp(1.0, f.min_exponent());
    } else if (tiny == tininess_rule::after_unbounded_rounding) {
      // Scaling by 2^64 is exact and keeps round-to-odd valid; the value is then normal.
      const std::uint32_t wide = round_to_format(std::ldexp(exact.round_to_odd, 64), f, mode);
      is_tiny = ((wide >> f.fraction_bits) & f.max_exponent_field()) <
                static_cast<std::uint32_t>(f.min_exponent() + 64 + f.bias);
    } else {
      is_tiny = is_subnormal(rounded, f);
    }
    if (is_tiny) return rounded & f.sign_bit();
  }
  return rounded;
}

struct mismatch_tally {
  long compared = 0, wrong = 0, nan_cases = 0;
  std::map<std::uint32_t, long> nan_outputs;
  int shown = 0;
};

// Counts a GPU output against the reference; a NaN matches any NaN, whose encoding is tallied.
void compare(mismatch_tally& tally, std::uint32_t gpu, std::uint32_t expected, const float_format& f, const char* what,
             std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  ++tally.compared;
  if (is_nan(expected, f)) {
    ++tally.nan_cases;
    if (is_nan(gpu, f)) {
      tally.nan_outputs[gpu]++;
      return;
    }
  } else if (gpu == expected) {
    return;
  }
  ++tally.wrong;
  if (tally.shown++ < 4) std::printf("      %s a=%08x b=%08x c=%08x got=%08x ref=%08x\n", what, a, b, c, gpu, expected);
}
void compare_exact(mismatch_tally& tally, std::uint32_t gpu, std::uint32_t expected, const char* what, std::uint32_t a,
                   std::uint32_t b) {
  ++tally.compared;
  if (gpu == expected) return;
  ++tally.wrong;
  if (tally.shown++ < 4) std::printf("      %s a=%08x b=%08x got=%08x ref=%08x\n", what, a, b, gpu, expected);
}
void report(const char* name, const mismatch_tally& tally) {
  std::printf("  %-34s mismatches %ld / %ld; NaN results %ld, encodings:", name, tally.wrong, tally.compared,
              tally.nan_cases);
  for (const auto& [bits, count] : tally.nan_outputs) std::printf(" %08x x%ld", bits, count);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) try {
  const capture::ops_capture ops = capture::read_ops(argc > 1 ? argv[1] : ".captures/ops.bin");
  {
    const capture::scalar_section& s = ops.section("fp32");
    const auto &a = s.find("a").values, &b = s.find("b").values, &c = s.find("c").values;
    const char* operation_names[3] = {"add", "mul", "fma"};
    const char* mode_names[4] = {"rn", "rz", "rm", "rp"};
    std::printf("== fp32 arithmetic, %u cases each\n", s.count);
    for (int op = 0; op < 3; ++op)
      for (int ftz = 0; ftz < 2; ++ftz)
        for (int mode = 0; mode < 4; ++mode) {
          const std::string name =
              std::string(operation_names[op]) + "." + mode_names[mode] + (ftz ? ".ftz" : "") + ".f32";
          const auto& gpu = s.find(name).values;
          for (int rule = 0; rule < (ftz ? 3 : 1); ++rule) {
            mismatch_tally tally;
            for (std::uint32_t i = 0; i < s.count; ++i)
              compare(tally, gpu[i],
                      reference_result(static_cast<operation>(op), a[i], b[i], c[i], fp32_format,
                                       static_cast<rounding>(mode), ftz, static_cast<tininess_rule>(rule)),
                      fp32_format, name.c_str(), a[i], b[i], c[i]);
            const std::string label = name + (ftz ? tininess_labels[rule] : "");
            report(label.c_str(), tally);
          }
        }
  }
  {
    const capture::scalar_section& s = ops.section("bf16");
    const auto &a = s.find("a").values, &b = s.find("b").values, &c = s.find("c").values;
    std::printf("== bf16 arithmetic, %u cases each (reference: IEEE RN, subnormals kept)\n", s.count);
    const char* names[3] = {"add.rn.bf16", "mul.rn.bf16", "fma.rn.bf16"};
    for (int op = 0; op < 3; ++op) {
      const auto& gpu = s.find(names[op]).values;
      for (const bool flushed : {false, true}) {  // with ftz too: are subnormal results kept?
        mismatch_tally tally;
        for (std::uint32_t i = 0; i < s.count; ++i)
          compare(tally, gpu[i],
                  reference_result(static_cast<operation>(op), a[i], b[i], c[i], bf16_format, rounding::nearest_even,
                                   flushed, tininess_rule::after_bounded_rounding),
                  bf16_format, names[op], a[i], b[i], c[i]);
        report(flushed ? (std::string(names[op]) + " [if it flushed]").c_str() : names[op], tally);
      }
    }
  }
  {
    const capture::scalar_section& s = ops.section("cvt");
    const auto &a = s.find("a").values, &b = s.find("b").values;
    std::printf("== conversions, %u cases\n", s.count);
    const auto convert = [](std::uint32_t x, const float_format& f, rounding mode, bool saturate) {
      if (is_nan(x, fp32_format)) return some_nan(f);
      const double value = static_cast<double>(float_of(x));
      if (std::isinf(value))
        return (saturate ? f.infinity_bits() - 1 : f.infinity_bits()) | (value < 0 ? f.sign_bit() : 0);
      if (value == 0) return x >> 31 ? f.sign_bit() : 0u;
      return round_to_format(value, f, mode, saturate);
    };
    mismatch_tally a_high, b_high, fp16_a_high;
    const auto& packed_bf16 = s.find("cvt.rn.bf16x2.f32 d,a,b").values;
    const auto& packed_fp16 = s.find("cvt.rn.f16x2.f32 d,a,b").values;
    for (std::uint32_t i = 0; i < s.count; ++i) {
      const std::uint32_t a_bf16 = convert(a[i], bf16_format, rounding::nearest_even, false),
                          b_bf16 = convert(b[i], bf16_format, rounding::nearest_even, false);
      compare_exact(a_high, packed_bf16[i], (a_bf16 << 16) | b_bf16, "bf16x2 a-high", a[i], b[i]);
      compare_exact(b_high, packed_bf16[i], (b_bf16 << 16) | a_bf16, "bf16x2 b-high", a[i], b[i]);
      const std::uint32_t a_fp16 = convert(a[i], fp16_format, rounding::nearest_even, false),
                          b_fp16 = convert(b[i], fp16_format, rounding::nearest_even, false);
      compare_exact(fp16_a_high, packed_fp16[i], (a_fp16 << 16) | b_fp16, "f16x2 a-high", a[i], b[i]);
    }
    // The packed comparison treats the pair as one 32-bit value: NaN halves are counted apart.
    std::map<std::uint32_t, long> nan_halves;
    for (std::uint32_t i = 0; i < s.count; ++i)
      for (int h = 0; h < 2; ++h) {
        const std::uint32_t half = (packed_bf16[i] >> (16 * h)) & 0xFFFF;
        if (is_nan(half, bf16_format)) nan_halves[half]++;
      }
    report("cvt.rn.bf16x2.f32 (a->high half)", a_high);
    report("cvt.rn.bf16x2.f32 (b->high half)", b_high);
    report("cvt.rn.f16x2.f32 (a->high half)", fp16_a_high);
    std::printf("    bf16x2 NaN halves:");
    for (const auto& [bits, count] : nan_halves) std::printf(" %04x x%ld", bits, count);
    std::printf("\n");
    struct single_conversion {
      const char* name;
      rounding mode;
      bool saturate, relu;
    };
    const single_conversion singles[] = {{"cvt.rn.bf16.f32 d,a", rounding::nearest_even, false, false},
                                         {"cvt.rz.bf16.f32 d,a", rounding::toward_zero, false, false},
                                         {"cvt.rn.satfinite.bf16.f32 d,a", rounding::nearest_even, true, false},
                                         {"cvt.rn.relu.bf16.f32 d,a", rounding::nearest_even, false, true}};
    for (const single_conversion& conversion : singles) {
      mismatch_tally tally;
      const auto& gpu = s.find(conversion.name).values;
      for (std::uint32_t i = 0; i < s.count; ++i) {
        std::uint32_t expected = convert(a[i], bf16_format, conversion.mode, conversion.saturate);
        if (conversion.relu && !is_nan(expected, bf16_format) && (expected & 0x8000)) expected = 0;
        compare(tally, gpu[i], expected, bf16_format, conversion.name, a[i], 0, 0);
      }
      report(conversion.name, tally);
    }
  }
  return 0;
} catch (const std::exception& error) {
  std::fprintf(stderr, "analyze_ops: %s\n", error.what());
  return 1;
}
