// What every subcommand of `bitexact` shares: the one-line error that exits
// with status 2, the reading of options, and the options that set the
// rounding environment.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <bitexact/core/environment.hpp>
#include <bitexact/trace/parse.hpp>

namespace bitexact::cli {

using arguments = std::vector<std::string_view>;

// Bad arguments of any kind end here: one line on stderr, status 2.
[[noreturn]] inline void fail(const std::string& message) {
  std::fprintf(stderr, "bitexact: error: %s\n", message.c_str());
  std::exit(2);
}

inline void note(const std::string& message) { std::fprintf(stderr, "bitexact: note: %s\n", message.c_str()); }

// --help (or -h) anywhere among a command's arguments asks for its help, whatever else is there.
inline bool asks_for_help(const arguments& args) {
  for (const std::string_view arg : args)
    if (arg == "--help" || arg == "-h") return true;
  return false;
}

// Reads one command's arguments left to right under one rule for every option: an option with a value is
// written `--name VALUE` or `--name=VALUE`, a flag takes no value, and each option may be given once.
class argument_reader {
 public:
  argument_reader(const arguments& args, std::string_view command) : args_(args), command_(command) {}

  bool at_end() const { return index_ >= args_.size(); }
  std::string_view current() const { return args_[index_]; }
  void next() { ++index_; }

  // If the current argument is option `name`, store its value, move past it and return true. `key` names the
  // option for the once-only rule where several spellings set one thing (-rminMag and --round).
  bool take_value(std::string_view name, std::string_view& value, std::string_view key = {});
  // The same for an option without a value.
  bool take_flag(std::string_view name, std::string_view key = {});

  [[noreturn]] void unknown_option() const;

 private:
  void once(std::string_view key);

  const arguments& args_;
  std::string_view command_;
  std::size_t index_ = 0;
  std::vector<std::string_view> given_;
};

// The environment options, each a bit of environment_options::given.
enum environment_option : std::uint8_t {
  option_round = 1,
  option_random_bits = 2,
  option_tininess = 4,
  option_ftz = 8,
  option_daz = 16,
  option_nan = 32,
};
inline constexpr std::uint8_t every_environment_option = 63;

struct environment_options {
  environment env;
  std::uint8_t given = 0;
};

// If the current argument is an environment option, consume it and return true; errors exit. With
// testfloat_spellings, TestFloat's -rnear_even ... and -tininessbefore/-tininessafter are accepted too.
bool take_environment_option(argument_reader& reader, environment_options& options, bool testfloat_spellings);

// Refuse the environment options that cannot change what the operation computes (those outside `effective`),
// saying why, and --random-bits without --round stochastic (or the reverse).
void check_environment_options(const environment_options& options, std::uint8_t effective, std::string_view context,
                               std::string_view why);

inline constexpr std::string_view environment_help =
    "  --round MODE          nearest_even (default), nearest_away, toward_zero, upward, downward,\n"
    "                        to_odd, stochastic (also: rne rna rtz rup rdn odd sr)\n"
    "  --random-bits N       the 32 random bits stochastic rounding compares against (decimal or 0x);\n"
    "                        required with --round stochastic, refused without it\n"
    "  --tininess before|after   when an underflow is detected (default after, as on x86)\n"
    "  --ftz                 flush tiny results to zero\n"
    "  --daz                 read subnormal operands as zero\n"
    "  --nan ieee|canonical  NaN results: first NaN operand quieted (x86, default) or CUDA's canonical NaN\n";

// The rule every command follows, for its --help.
inline constexpr std::string_view option_rule_help =
    "Options take `--name VALUE` or `--name=VALUE`; each may be given once, and an option\n"
    "that cannot change the result of the chosen operation is refused.\n";

}  // namespace bitexact::cli
