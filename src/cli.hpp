// What every subcommand of `bitexact` shares: the one-line error that exits
// with status 2, the command table, options declared in tables and read by
// one parser, the parsers of their values, the options that set the
// rounding environment, and the progress line of a long computation.
#pragma once

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include <bitexact/core/environment.hpp>
#include <bitexact/core/names.hpp>
#include <bitexact/trace/parse.hpp>
#include <bitexact/trace/render.hpp>

namespace bitexact::cli {

using arguments = std::vector<std::string_view>;

// Bad arguments of any kind end here: one line on stderr, status 2.
[[noreturn]] inline void fail(const std::string& message) {
  // A progress line (progress_line) may be on the terminal: the message takes its place.
  if (isatty(fileno(stderr)) == 1) std::fputs("\r\033[K", stderr);
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

// A subcommand, declared once: the list of commands in --help, `bitexact help NAME`, the dispatch and the
// error for an unknown name all read its row.
struct command {
  std::string_view name;              // "trace"; "mechanism" in bias's table
  std::string_view operands;          // what follows the name in the list of commands ("OP OPERANDS...")
  std::string_view summary;           // its text in that list, lines separated by '\n'
  int (*run)(const arguments&);       // given the arguments after the name
  std::span<const command> subcommands = {};  // listed in --help in place of the row (bias's analyses)
};

const command* find_command(std::span<const command> table, std::string_view name);
// "trace, eval, demo, attention or bias".
std::string names_of(std::span<const command> table);
// The list of commands in --help: a row for each, or for each of its subcommands.
std::string command_list(std::span<const command> table);

// Thrown by a value's parser; read_options turns it into "COMMAND: OPTION " + message, one line, status 2.
struct bad_value {
  std::string message;  // "expects an integer from 1 to 128, not '129'"
};

[[noreturn]] inline void refuse_value(std::string_view expected, std::string_view text) {
  throw bad_value{"expects " + std::string(expected) + ", not " + quoted_input(text)};
}

// One option of a command, declared once: read_options reads it and print_help lists it. Its setter writes
// the command's settings, which it holds by reference.
struct option {
  std::string_view spellings;    // "--keys"; the spellings of one option, space-separated ("--exact -exact")
  std::string_view placeholder;  // its value in --help ("N"; "A B" takes two); empty for a flag, which takes none
  std::string_view help;         // its text in --help, lines separated by '\n'; empty: read but not listed
  std::function<void(std::string_view)> set;  // called with each value, or for a flag with the spelling given
  std::string_view once = {};    // options sharing this key are given once between them (default: the first spelling)
};

// Reads a command's arguments against its options under one rule for every option: `--name VALUE` or
// `--name=VALUE`, a flag without a value, each option once; a bad_value from a setter, an unknown option (an
// argument longer than `option_start` that starts with it), a missing value or a repeat exits with one line.
// Returns the other arguments, in order.
arguments read_options(const arguments& args, std::string_view command, const std::vector<option>& options,
                       std::string_view option_start = "-");

// The same for a command that takes options only: any other argument is refused.
void read_only_options(const arguments& args, std::string_view command, const std::vector<option>& options);

// Prints `help` with its line "{options}" replaced by the listed options and the rule they follow; returns 0.
int print_help(std::string_view help, const std::vector<option>& options);

// The parsers of option values, one for each kind of value, shared by every command; each throws bad_value
// with `expected` in it. integer_in is the test alone: an integer in [low, high], written in `base`.
template <class Int>
std::optional<Int> integer_in(std::string_view text, Int low, Int high, int base = 10) {
  Int parsed{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), parsed, base);
  if (error != std::errc{} || end != text.data() + text.size() || parsed < low || parsed > high) return std::nullopt;
  return parsed;
}

template <class Int>
Int parse_integer(std::string_view text, Int low, Int high, std::string_view expected) {
  if (const auto parsed = integer_in(text, low, high)) return *parsed;
  refuse_value(expected, text);
}

inline std::uint64_t parse_seed(std::string_view text) {
  return parse_integer<std::uint64_t>(text, 0, UINT64_MAX, "an integer from 0 to 2^64 - 1");
}

// 32 bits, in decimal or in hex after 0x.
std::uint32_t parse_bits32(std::string_view text, std::string_view expected);

// A finite decimal (as strtod reads it, into a double) of at least `least`.
double parse_decimal(std::string_view text, std::string_view expected, double least = -HUGE_VAL);

// "a,b,c" as its items (an empty text is one empty item).
std::vector<std::string_view> split_list(std::string_view text, char separator = ',');

// How far a long computation has come, on stderr, and only when stderr is a terminal: piped output gets
// nothing extra. "bitexact: NAME: 1024 of 65536 rows (1.6%), 85 rows/s, about 12m 40s left", written once
// a second has passed, rewritten in place at most twice a second, and erased when the object goes.
// add() takes calls from several threads at once.
class progress_line {
 public:
  progress_line(std::string name, std::string unit, std::uint64_t total);
  ~progress_line();
  progress_line(const progress_line&) = delete;
  progress_line& operator=(const progress_line&) = delete;
  void add(std::uint64_t done);

 private:
  std::string name_, unit_;
  std::uint64_t total_, done_ = 0;
  bool terminal_;
  std::size_t shown_ = 0;  // the width of the line on the terminal, 0 when none is
  std::chrono::steady_clock::time_point start_, next_;
  std::mutex lock_;
};

// --output STYLE, as every command that renders a trace takes it.
option output_option(output_style& style);

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

// The environment options, setting `options`; with testfloat_spellings also TestFloat's -rnear_even ... and
// -tininessbefore/-tininessafter.
std::vector<option> environment_option_table(environment_options& options, bool testfloat_spellings);

// Refuse the environment options that cannot change what the operation computes (those outside `effective`),
// saying why, and --random-bits without --round stochastic (or the reverse).
void check_environment_options(const environment_options& options, std::uint8_t effective, std::string_view context,
                               std::string_view why);

}  // namespace bitexact::cli
