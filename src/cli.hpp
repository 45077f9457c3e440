// What every subcommand of `bitexact` shares: the one-line error that exits
// with status 2, and the options that set the rounding environment.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <bitexact/core/environment.hpp>

namespace bitexact::cli {

using arguments = std::vector<std::string_view>;

// Bad input of any kind ends here: one line on stderr, status 2.
[[noreturn]] inline void fail(const std::string& message) {
  std::fprintf(stderr, "bitexact: error: %s\n", message.c_str());
  std::exit(2);
}

inline void note(const std::string& message) { std::fprintf(stderr, "bitexact: note: %s\n", message.c_str()); }

// The environment options, spelled as --round MODE (or --round=MODE); eval
// also accepts TestFloat's spellings (-rnear_even, -tininessafter, ...).
struct environment_options {
  environment env;
  bool random_bits_given = false;
};

// If args[i] is an environment option, consume it (and its value) and return
// true; errors exit.
bool take_environment_option(const arguments& args, std::size_t& i, environment_options& options,
                             bool testfloat_spellings);

// The value of an option written `--name VALUE` or `--name=VALUE`, if args[i] is that option.
bool take_value(const arguments& args, std::size_t& i, std::string_view name, std::string_view& value);

inline constexpr std::string_view environment_help =
    "  --round MODE          nearest_even (default), nearest_away, toward_zero, upward, downward,\n"
    "                        to_odd, stochastic (also: rne rna rtz rup rdn odd sr)\n"
    "  --random-bits N       the 32 random bits stochastic rounding compares against (decimal or 0x)\n"
    "  --tininess before|after   when an underflow is detected (default after, as on x86)\n"
    "  --ftz                 flush tiny results to zero\n"
    "  --daz                 read subnormal operands as zero\n"
    "  --nan ieee|canonical  NaN results: first NaN operand quieted (x86, default) or CUDA's canonical NaN\n";

}  // namespace bitexact::cli
