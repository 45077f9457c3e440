// `bitexact eval FUNCTION`: Berkeley TestFloat's line format on stdin and
// stdout, so TestFloat-style suites can drive the model. Each input line holds
// the operands in hex; each output line repeats them, then the result and the
// flags as two hex digits (1 inexact, 2 underflow, 4 overflow, 8 infinite,
// 10 invalid), as testfloat_gen writes them.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <bitexact/core/operations.hpp>
#include <bitexact/trace/parse.hpp>

#include "cli.hpp"

namespace bitexact::cli {
namespace {

struct eval_settings {
  environment env;
  bool exact = false;  // conversions to integers raise inexact only under TestFloat's -exact
};

using compute_fn = void (*)(const std::uint64_t* operands, const eval_settings&, std::uint64_t& result,
                            std::uint8_t& raised);

struct eval_function {
  std::string name;
  int arity;
  int operand_digits[3];
  int result_digits;
  compute_fn compute;
};

constexpr int hex_digits_of(format f) { return (f.width() + 3) / 4; }

// TestFloat's name for each format ("f32"), extended to the narrow ones.
template <format F>
constexpr const char* testfloat_name() {
  if constexpr (F == fp32) return "f32";
  else if constexpr (F == fp16) return "f16";
  else if constexpr (F == bf16) return "bf16";
  else if constexpr (F == tf32) return "tf32";
  else if constexpr (F == e5m2) return "e5m2";
  else return "e4m3";
}

template <format F>
value<F> operand(std::uint64_t bits) {
  return value<F>::from_bits(static_cast<std::uint32_t>(bits));
}

template <format F>
struct arithmetic {
  static void add(const std::uint64_t* in, const eval_settings& s, std::uint64_t& out, std::uint8_t& raised) {
    const auto r = bitexact::add(operand<F>(in[0]), operand<F>(in[1]), s.env);
    out = r.result.bits, raised = r.raised.bits;
  }
  static void sub(const std::uint64_t* in, const eval_settings& s, std::uint64_t& out, std::uint8_t& raised) {
    const auto r = bitexact::sub(operand<F>(in[0]), operand<F>(in[1]), s.env);
    out = r.result.bits, raised = r.raised.bits;
  }
  static void mul(const std::uint64_t* in, const eval_settings& s, std::uint64_t& out, std::uint8_t& raised) {
    const auto r = bitexact::mul(operand<F>(in[0]), operand<F>(in[1]), s.env);
    out = r.result.bits, raised = r.raised.bits;
  }
  static void mul_add(const std::uint64_t* in, const eval_settings& s, std::uint64_t& out, std::uint8_t& raised) {
    const auto r = bitexact::fma(operand<F>(in[0]), operand<F>(in[1]), operand<F>(in[2]), s.env);
    out = r.result.bits, raised = r.raised.bits;
  }
  static void div(const std::uint64_t* in, const eval_settings& s, std::uint64_t& out, std::uint8_t& raised) {
    const auto r = bitexact::div(operand<F>(in[0]), operand<F>(in[1]), s.env);
    out = r.result.bits, raised = r.raised.bits;
  }
  static void sqrt(const std::uint64_t* in, const eval_settings& s, std::uint64_t& out, std::uint8_t& raised) {
    const auto r = bitexact::sqrt(operand<F>(in[0]), s.env);
    out = r.result.bits, raised = r.raised.bits;
  }
  // TestFloat: eq is quiet, le and lt signal on any NaN; the suffixed forms swap that.
  template <int Predicate, bool Signaling>
  static void compare(const std::uint64_t* in, const eval_settings& s, std::uint64_t& out, std::uint8_t& raised) {
    flags f;
    const auto a = operand<F>(in[0]), b = operand<F>(in[1]);
    bool holds;
    if constexpr (Predicate == 0) holds = equal(a, b, f, s.env, Signaling);
    else if constexpr (Predicate == 1) holds = less_equal(a, b, f, s.env, Signaling);
    else holds = less(a, b, f, s.env, Signaling);
    out = holds, raised = f.bits;
  }
  template <format R>
  static void to_format(const std::uint64_t* in, const eval_settings& s, std::uint64_t& out, std::uint8_t& raised) {
    const auto r = convert<R>(operand<F>(in[0]), s.env);
    out = r.result.bits, raised = r.raised.bits;
  }
  // Out-of-range and NaN give x86's integer indefinite (signed) or all ones
  // (unsigned), as SoftFloat's 8086-SSE specialization does, raising only invalid.
  template <int Bits, bool Signed>
  static void to_int(const std::uint64_t* in, const eval_settings& s, std::uint64_t& out, std::uint8_t& raised) {
    auto [integer, f] = to_integer(operand<F>(in[0]), s.env);
    constexpr std::uint64_t mask = Bits == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << Bits) - 1;
    constexpr std::int64_t low = Signed ? (Bits == 64 ? INT64_MIN : -(std::int64_t{1} << (Bits - 1))) : 0;
    constexpr std::int64_t high = Signed ? (Bits == 64 ? INT64_MAX : (std::int64_t{1} << (Bits - 1)) - 1)
                                         : (std::int64_t{1} << Bits) - 1;
    if (f.any(flags::invalid) || integer < low || integer > high) {
      out = Signed ? (std::uint64_t{1} << (Bits - 1)) : mask;
      raised = flags::invalid;
      return;
    }
    out = static_cast<std::uint64_t>(integer) & mask;
    raised = s.exact ? f.bits : 0;
  }
  template <int Bits, bool Signed>
  static void from_int(const std::uint64_t* in, const eval_settings& s, std::uint64_t& out, std::uint8_t& raised) {
    std::int64_t integer;
    if constexpr (Signed && Bits == 32) integer = static_cast<std::int32_t>(static_cast<std::uint32_t>(in[0]));
    else integer = static_cast<std::int64_t>(in[0]);
    const auto r = from_integer<F>(integer, s.env);
    out = r.result.bits, raised = r.raised.bits;
  }
};

template <format F>
void register_format(std::vector<eval_function>& table);

template <format F, format R>
void register_conversion(std::vector<eval_function>& table) {
  if constexpr (F != R) {
    table.push_back({std::string(testfloat_name<F>()) + "_to_" + testfloat_name<R>(), 1, {hex_digits_of(F)},
                     hex_digits_of(R), &arithmetic<F>::template to_format<R>});
  }
}

template <format F>
void register_format(std::vector<eval_function>& table) {
  using A = arithmetic<F>;
  const std::string p = testfloat_name<F>();
  const int d = hex_digits_of(F);
  table.push_back({p + "_add", 2, {d, d}, d, &A::add});
  table.push_back({p + "_sub", 2, {d, d}, d, &A::sub});
  table.push_back({p + "_mul", 2, {d, d}, d, &A::mul});
  table.push_back({p + "_mulAdd", 3, {d, d, d}, d, &A::mul_add});
  table.push_back({p + "_div", 2, {d, d}, d, &A::div});
  table.push_back({p + "_sqrt", 1, {d}, d, &A::sqrt});
  table.push_back({p + "_eq", 2, {d, d}, 1, &A::template compare<0, false>});
  table.push_back({p + "_le", 2, {d, d}, 1, &A::template compare<1, true>});
  table.push_back({p + "_lt", 2, {d, d}, 1, &A::template compare<2, true>});
  table.push_back({p + "_eq_signaling", 2, {d, d}, 1, &A::template compare<0, true>});
  table.push_back({p + "_le_quiet", 2, {d, d}, 1, &A::template compare<1, false>});
  table.push_back({p + "_lt_quiet", 2, {d, d}, 1, &A::template compare<2, false>});
  table.push_back({p + "_to_i32", 1, {d}, 8, &A::template to_int<32, true>});
  table.push_back({p + "_to_i64", 1, {d}, 16, &A::template to_int<64, true>});
  table.push_back({p + "_to_ui32", 1, {d}, 8, &A::template to_int<32, false>});
  table.push_back({"i32_to_" + p, 1, {8}, d, &A::template from_int<32, true>});
  table.push_back({"i64_to_" + p, 1, {16}, d, &A::template from_int<64, true>});
  table.push_back({"ui32_to_" + p, 1, {8}, d, &A::template from_int<32, false>});
  register_conversion<F, fp32>(table);
  register_conversion<F, fp16>(table);
  register_conversion<F, bf16>(table);
  register_conversion<F, tf32>(table);
  register_conversion<F, e5m2>(table);
  register_conversion<F, e4m3>(table);
}

std::vector<eval_function> function_table() {
  std::vector<eval_function> table;
  register_format<fp32>(table);
  register_format<fp16>(table);
  register_format<bf16>(table);
  register_format<tf32>(table);
  register_format<e5m2>(table);
  register_format<e4m3>(table);
  return table;
}

constexpr char upper_hex[] = "0123456789ABCDEF";

// Buffered stdout: one fwrite per few megabytes.
class output_buffer {
 public:
  output_buffer() : buffer_(std::size_t{1} << 22) {}
  ~output_buffer() { flush(); }
  char* reserve(std::size_t n) {
    if (used_ + n > buffer_.size()) flush();
    return buffer_.data() + used_;
  }
  void commit(char* end) { used_ = static_cast<std::size_t>(end - buffer_.data()); }
  void flush() {
    if (used_ && std::fwrite(buffer_.data(), 1, used_, stdout) != used_) fail("cannot write to stdout");
    used_ = 0;
  }

 private:
  std::vector<char> buffer_;
  std::size_t used_ = 0;
};

char* write_hex(char* out, std::uint64_t value, int digits) {
  for (int i = digits - 1; i >= 0; --i) {
    out[i] = upper_hex[value & 15];
    value >>= 4;
  }
  return out + digits;
}

struct line_error {
  const char* what = nullptr;
};

class evaluator {
 public:
  evaluator(const eval_function& function, const eval_settings& settings, bool stop_on_error)
      : function_(function), settings_(settings), stop_on_error_(stop_on_error) {}

  // Returns the exit status.
  int run() {
    std::vector<char> input(std::size_t{1} << 22);
    std::size_t held = 0;
    bool end_of_input = false;
    while (!end_of_input) {
      const std::size_t got = std::fread(input.data() + held, 1, input.size() - held, stdin);
      if (got == 0) end_of_input = true;
      held += got;
      const char* cursor = input.data();
      const char* const end = input.data() + held;
      for (;;) {
        const char* newline = static_cast<const char*>(std::memchr(cursor, '\n', static_cast<std::size_t>(end - cursor)));
        if (!newline) {
          if (end_of_input && cursor != end) {
            if (!skipping_long_line_) process_line(cursor, end);
            cursor = end;
          } else if (cursor == input.data() && held == input.size()) {
            // A line longer than the whole buffer cannot be a TestFloat line.
            if (!skipping_long_line_) {
              ++line_number_;
              report(std::string_view(cursor, 40), "line too long");
              skipping_long_line_ = true;
            }
            cursor = end;
          }
          break;
        }
        if (skipping_long_line_) {
          skipping_long_line_ = false;
        } else {
          process_line(cursor, newline);
        }
        cursor = newline + 1;
      }
      held = static_cast<std::size_t>(end - cursor);
      std::memmove(input.data(), cursor, held);
    }
    output_.flush();
    if (std::ferror(stdin)) fail("cannot read stdin");
    return bad_lines_ ? 1 : 0;
  }

 private:
  void process_line(const char* p, const char* end) {
    ++line_number_;
    if (end > p && end[-1] == '\r') --end;
    std::uint64_t operands[3] = {};
    const char* start = p;
    const auto skip_blanks = [&] {
      while (p < end && (*p == ' ' || *p == '\t')) ++p;
    };
    skip_blanks();
    if (p == end) return;  // blank lines carry no case
    for (int k = 0; k < function_.arity; ++k) {
      skip_blanks();
      std::uint64_t bits = 0;
      int digits = 0;
      for (; p < end; ++p, ++digits) {
        const int digit = detail::hex_digit_value(*p);
        if (digit < 0) break;
        bits = bits << 4 | static_cast<unsigned>(digit);
      }
      if (digits == 0 || digits > function_.operand_digits[k] || (p < end && *p != ' ' && *p != '\t'))
        return bad(start, end);
      if (function_.operand_digits[k] * 4 < 64 && (bits >> (function_.operand_digits[k] * 4)) != 0)
        return bad(start, end);
      operands[k] = bits;
    }
    skip_blanks();
    if (p != end) return bad(start, end);

    std::uint64_t result = 0;
    std::uint8_t raised = 0;
    function_.compute(operands, settings_, result, raised);
    char* out = output_.reserve(80);
    for (int k = 0; k < function_.arity; ++k) {
      out = write_hex(out, operands[k], function_.operand_digits[k]);
      *out++ = ' ';
    }
    out = write_hex(out, result, function_.result_digits);
    *out++ = ' ';
    out = write_hex(out, raised, 2);
    *out++ = '\n';
    output_.commit(out);
  }

  void bad(const char* start, const char* end) {
    report(std::string_view(start, static_cast<std::size_t>(end - start)), nullptr);
  }

  void report(std::string_view text, const char* why) {
    ++bad_lines_;
    if (text.size() > 60) text = text.substr(0, 60);
    std::string expected = std::to_string(function_.arity) + " hex operand" + (function_.arity > 1 ? "s" : "") + " of at most ";
    expected += std::to_string(function_.operand_digits[0]) + " digits";
    for (int k = 1; k < function_.arity; ++k)
      if (function_.operand_digits[k] != function_.operand_digits[0]) expected += " (then " + std::to_string(function_.operand_digits[k]) + ")";
    const std::string message = "line " + std::to_string(line_number_) + ": " + (why ? std::string(why) + "; " : "") +
                                "expected " + expected + " for " + function_.name + ", got '" + std::string(text) + "'";
    if (stop_on_error_) {
      output_.flush();
      fail(message);
    }
    std::fprintf(stderr, "bitexact: error: %s\n", message.c_str());
  }

  const eval_function& function_;
  eval_settings settings_;
  bool stop_on_error_;
  output_buffer output_;
  std::uint64_t line_number_ = 0;
  std::uint64_t bad_lines_ = 0;
  bool skipping_long_line_ = false;
};

constexpr std::string_view eval_help =
    "usage: bitexact eval FUNCTION [options] < cases\n"
    "\n"
    "Berkeley TestFloat's line format: each stdin line holds FUNCTION's operands in hex;\n"
    "each stdout line repeats them (upper-case, fixed width) and adds the result and the\n"
    "flags as two hex digits: 01 inexact, 02 underflow, 04 overflow, 08 infinite\n"
    "(divide by zero), 10 invalid. Comparisons give 1 or 0; conversions to integers write\n"
    "8 (i32, ui32) or 16 (i64) hex digits. tf32 values are 19 bits, written as 5 digits.\n"
    "\n"
    "FUNCTION, as TestFloat spells it, for F in f32 f16 bf16 tf32 e5m2 e4m3:\n"
    "  F_add F_sub F_mul F_mulAdd F_div F_sqrt\n"
    "  F_eq F_le F_lt F_eq_signaling F_le_quiet F_lt_quiet\n"
    "  F_to_G (G another of the formats), F_to_i32 F_to_i64 F_to_ui32, i32_to_F i64_to_F ui32_to_F\n"
    "  e.g. f32_add, f16_mulAdd, f32_to_bf16, bf16_to_f32, e4m3_mul, i32_to_f32\n"
    "\n"
    "options:\n"
    "%s"
    "  -rnear_even -rnear_maxMag -rminMag -rmin -rmax -rodd   TestFloat's rounding spellings\n"
    "  -tininessbefore -tininessafter                         TestFloat's tininess spellings\n"
    "  --exact, -exact        conversions to integers raise inexact (TestFloat's -exact)\n"
    "  --stop-on-error        stop with status 2 at the first bad line (default: report it\n"
    "                         on stderr with its line number, go on, and exit with status 1)\n"
    "  --list                 print every FUNCTION name and exit\n";

}  // namespace

int eval_command(const arguments& args) {
  environment_options options;
  eval_settings settings;
  bool stop_on_error = false;
  std::string_view function_name;
  const auto table = function_table();
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      std::printf(eval_help.data(), environment_help.data());
      return 0;
    }
    if (arg == "--list") {
      for (const auto& f : table) std::printf("%s\n", f.name.c_str());
      return 0;
    }
    if (take_environment_option(args, i, options, true)) continue;
    if (arg == "--stop-on-error") stop_on_error = true;
    else if (arg == "--exact" || arg == "-exact") settings.exact = true;
    else if (arg == "--notexact" || arg == "-notexact") settings.exact = false;
    else if (!arg.empty() && arg[0] == '-') fail("eval: unknown option '" + std::string(arg) + "'; see bitexact eval --help");
    else if (!function_name.empty()) fail("eval: one FUNCTION expected, got '" + std::string(function_name) + "' and '" + std::string(arg) + "'");
    else function_name = arg;
  }
  if (function_name.empty()) fail("eval: expected a FUNCTION such as f32_add; see bitexact eval --help");
  if (options.env.rounding == rounding_mode::stochastic && !options.random_bits_given)
    fail("eval: --round stochastic needs --random-bits N (the same bits serve every line)");
  settings.env = options.env;
  for (const auto& function : table)
    if (function.name == function_name) return evaluator(function, settings, stop_on_error).run();
  fail("eval: unknown function '" + std::string(function_name) + "'; expected e.g. f32_add, f16_mulAdd, f32_to_bf16 (bitexact eval --list)");
}

}  // namespace bitexact::cli
