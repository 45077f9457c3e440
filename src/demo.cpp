// `bitexact demo`: the paper's Section 3.3.2 worked example, its table of
// 2-bit significand additions, and how same-sign bf16 additions with a
// sticky residue round one way. Everything printed is computed here.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include <bitexact/core/operations.hpp>
#include <bitexact/trace/render.hpp>

#include "cli.hpp"

namespace bitexact::cli {
namespace {

constexpr std::string_view demo_help =
    "usage: bitexact demo [--output text|md|latex] [--additions N]\n"
    "\n"
    "1. The worked example of Section 3.3.2 of \"Why low-precision transformer training\n"
    "   fails\": the fp32 sum of 0xC01A0E2E and 0xC0130000, traced, then rounded to bf16.\n"
    "2. The paper's table of all 2-bit significand additions, replayed on bf16 values.\n"
    "3. N (default 10000) additions of two negative bf16 values of one binade in fp32,\n"
    "   the first carrying a small fp32 residue as an accumulator does, each sum rounded\n"
    "   to bf16: the rounding errors all lean one way. Without the residue they cancel.\n"
    "\n"
    "options:\n"
    "{options}\n"
    "Exit status 0, or 2 with a one-line message on stderr.\n";

std::string hex(format f, std::uint32_t bits) { return fmt::format("0x{:0{}X}", bits, (f.width() + 3) / 4); }

template <format F>
std::string shown(value<F> x) {
  return fmt::format("{} {} ({})", name_of(F), hex(F, x.bits), to_double(x));
}

void worked_example(output_style style) {
  std::printf("== 1. The paper's Section 3.3.2 example ==\n\n");
  const float32 accumulated{0xC01A0E2E};  // bf16 -2.40625 plus residue from earlier small terms
  const float32 next{0xC0130000};         // another bf16 value, -2.296875
  std::printf("The fp32 accumulator holds %s, which is %s plus a small residue.\n", shown(accumulated).c_str(),
              shown(convert<bf16>(accumulated, environment{rounding_mode::toward_zero}).result).c_str());
  std::printf("The next term is %s. Add them in fp32:\n\n", shown(next).c_str());
  auto [sum, sum_record] = traced([&](auto& recorder) { return add(accumulated, next, {}, recorder); });
  std::fputs(render(sum_record, style).c_str(), stdout);
  std::printf("\nThen store the sum as bf16:\n\n");
  auto [narrowed, narrow_record] = traced([&](auto& recorder) { return convert<bf16>(sum.result, {}, recorder); });
  std::fputs(render(narrow_record, style).c_str(), stdout);
  const double error = to_double(narrowed.result) - to_double(sum.result);  // exact: both fit in a double's 53 bits
  std::printf("\nResult: fp32 sum %s -> bf16 %s, rounding bit %d, sticky %d, error %s (%.17g)\n\n",
              hex(fp32, sum.result.bits).c_str(), hex(bf16, narrowed.result.bits).c_str(),
              narrow_record.rounding ? int{narrow_record.rounding->guard} : -1,
              narrow_record.rounding ? int{narrow_record.rounding->round || narrow_record.rounding->sticky} : -1,
              narrow_record.error ? to_decimal(*narrow_record.error).c_str() : "n/a", error);
}

std::string two_bits(unsigned x, int width) {
  std::string s;
  for (int i = width - 1; i >= 0; --i) s += ((x >> i) & 1) ? '1' : '0';
  return s;
}

// The paper's table: the last two significand bits of two same-sign values.
// A carry out of the top shifts the sum right; its last bit becomes the
// rounding bit. Each row is replayed on bf16 values -1.00000aa and
// -1.00000bb, the first carrying a residue of -2^-12 in fp32.
void significand_table() {
  std::printf("== 2. All 2-bit significand additions (the paper's table) ==\n\n");
  std::printf("The sum of two same-sign significands in [1,2) carries out and is shifted right by one;\n"
              "its last bit (in [brackets]) is shifted out and becomes the rounding bit. Replayed as\n"
              "fp32 (-1.00000aa - 2^-12) + (-1.00000bb), rounded to bf16 (nearest even):\n\n");
  std::printf("  aa + bb = sum    rounding bit   fp32 sum     bf16      rounded\n");
  int ones = 0, rows = 0, up = 0, ones_rounded_up = 0;
  const float32 residue = from_host(-0x1p-12f);
  for (unsigned a = 0; a < 4; ++a) {
    for (unsigned b = a; b < 4; ++b) {
      const unsigned s = a + b;
      const bfloat16 x = bfloat16::from_bits(0xBF80u | a), y = bfloat16::from_bits(0xBF80u | b);
      const float32 accumulated = add<fp32>(x, residue).result;
      const float32 sum = add<fp32>(accumulated, y).result;
      const auto narrowed = convert<bf16>(sum);
      const bool rounded_up = std::fabs(to_double(narrowed.result)) > std::fabs(to_double(sum));
      const std::string sum_bits = two_bits(s, s >= 4 ? 3 : 2);
      const std::string marked = sum_bits.substr(0, sum_bits.size() - 1) + "[" + sum_bits.back() + "]";
      std::printf("  %s + %s = %-6s        %u        %s  %s  %s\n", two_bits(a, 2).c_str(), two_bits(b, 2).c_str(),
                  marked.c_str(), s & 1, hex(fp32, sum.bits).c_str(), hex(bf16, narrowed.result.bits).c_str(),
                  rounded_up ? "up (more negative)" : "down (toward zero)");
      ones += s & 1;
      up += rounded_up;
      ones_rounded_up += (s & 1) && rounded_up;
      ++rows;
    }
  }
  std::printf("\n%d of %d rows shift out a 1, and %d of those round up (%d round-ups in all): with the\n"
              "residue's sticky bit set, a shifted-out 1 is more than half an ulp, never a tie that\n"
              "nearest-even could send down; a shifted-out 0 truncates only the residue.\n\n",
              ones, rows, ones_rounded_up, up);
}

// splitmix64: a fixed, portable sequence so the demo prints the same numbers everywhere.
struct random_sequence {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
  }
};

struct bias_tally {
  long ups = 0, downs = 0, exact = 0;
  double error_ulps = 0;  // signed sum of (bf16 result - exact sum) in ulps of the result
  double error = 0;       // the same, in absolute terms
};

bias_tally same_sign_additions(long count, bool with_residue, std::vector<double>* drift) {
  random_sequence random{2024};  // the same pairs in both runs
  bias_tally tally;
  for (long i = 0; i < count; ++i) {
    const std::uint64_t r = random.next();
    const int binade = static_cast<int>(r & 3) - 1;  // values in [-2^(b+1), -2^b), b in -1..2
    const auto bf16_value = [&](unsigned fraction) {
      return bfloat16::from_bits(0x8000u | static_cast<unsigned>(127 + binade) << 7 | (fraction & 0x7F));
    };
    const bfloat16 first = bf16_value(static_cast<unsigned>(r >> 8)), second = bf16_value(static_cast<unsigned>(r >> 16));
    // The residue: what earlier small products left below bf16's last bit, 1 to 255 units of 2^(b-20).
    const unsigned residue_units = with_residue ? 1 + static_cast<unsigned>((r >> 24) % 255) : 0;
    const float32 residue = from_host(-std::ldexp(static_cast<float>(residue_units), binade - 20));
    const float32 accumulated = add<fp32>(first, residue).result;
    const auto sum = add<fp32>(accumulated, second);  // exact here: the fp32 sum keeps every bit
    const bfloat16 stored = convert<bf16>(sum.result).result;
    // Both values have at most 24 significant bits and close exponents: the difference is exact in a double.
    const double error = to_double(stored) - to_double(sum.result);
    const double ulp = std::ldexp(1.0, binade + 1 - 7);
    if (error < 0) ++tally.ups;
    else if (error > 0) ++tally.downs;
    else ++tally.exact;
    tally.error += error;
    tally.error_ulps += error / ulp;
    if (drift && (i + 1) % (count / 10 > 0 ? count / 10 : 1) == 0) drift->push_back(tally.error_ulps);
  }
  return tally;
}

void accumulation_bias(long count) {
  std::printf("== 3. Same-sign bf16 additions round one way ==\n\n");
  std::printf("%ld times: two negative bf16 values of one binade are added in fp32, the first\n"
              "carrying a residue of 1..255 units of 2^(b-20) for values in [2^b, 2^(b+1)) (as an\n"
              "fp32 accumulator holding earlier small products does), and the sum is stored as bf16 (nearest even).\n"
              "Error = bf16 result - exact sum; 'up' means rounded away from zero (more negative).\n\n",
              count);
  std::vector<double> drift_residue, drift_clean;
  const bias_tally residue = same_sign_additions(count, true, &drift_residue);
  const bias_tally clean = same_sign_additions(count, false, &drift_clean);
  std::printf("                      rounded up   rounded down   exact   mean error (ulp)   total error\n");
  const auto row = [&](const char* name, const bias_tally& t) {
    std::printf("  %-18s  %10ld   %12ld   %5ld   %16.4f   %.9g\n", name, t.ups, t.downs, t.exact,
                t.error_ulps / static_cast<double>(count), t.error);
  };
  row("with residue", residue);
  row("without residue", clean);
  std::printf("\nCumulative signed error in ulps after each tenth of the additions:\n");
  std::printf("  with residue:   ");
  for (double d : drift_residue) std::printf(" %8.1f", d);
  std::printf("\n  without residue:");
  for (double d : drift_clean) std::printf(" %8.1f", d);
  std::printf("\n\nWith the residue, every shifted-out 1 rounds away from zero and every shifted-out 0\n"
              "truncates only the small residue, so the errors add up in one direction; without it,\n"
              "a shifted-out 1 is an exact tie and ties-to-even sends half of them each way.\n");
}

}  // namespace

int demo_command(const arguments& args) {
  output_style style = output_style::text;
  long additions = 10000;
  const std::vector<option> options{
      {"--output", "STYLE",
       "how the two traces of part 1 are rendered: text (default), md, latex (json\n"
       "is refused: the demo is prose, and could not be one JSON document)",
       [&](std::string_view name) {
         const auto named = output_style_from_name(name);
         if (named == output_style::json)
           fail("demo: --output json would give text with JSON inside, not one JSON document; for a JSON trace use "
                "bitexact trace add fp32:0xC01A0E2E fp32:0xC0130000 --to bf16 --output json");
         if (!named) refuse_value("text, md or latex", name);
         style = *named;
       }},
      {"--additions", "N", "the additions of part 3 (10 to 100000000; default 10000)",
       [&](std::string_view n) { additions = parse_integer(n, 10L, 100000000L, "an integer from 10 to 100000000"); }},
  };
  if (asks_for_help(args)) return print_help(demo_help, options);
  read_only_options(args, "demo", options);
  worked_example(style);
  significand_table();
  accumulation_bias(additions);
  return 0;
}

}  // namespace bitexact::cli
