// `bitexact eval FUNCTION`: Berkeley TestFloat's line format on stdin and
// stdout, so TestFloat-style suites can drive the model. Each input line holds
// the operands in hex; each output line repeats them, then the result and the
// flags as two hex digits (1 inexact, 2 underflow, 4 overflow, 8 infinite,
// 10 invalid), as testfloat_gen writes them. With --check, each line already
// carries a result and flags (from a GPU, say), and eval compares them with
// the model's, as testfloat_ver does.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <bitexact/core/operations.hpp>
#include <bitexact/testing/check.hpp>
#include <bitexact/trace/parse.hpp>
#include <bitexact/trace/render.hpp>

#include "cli.hpp"
#include "trace_operations.hpp"

namespace bitexact::cli {
namespace {

struct eval_settings {
  environment env;
  bool exact = false;  // conversions to integers raise inexact only under TestFloat's -exact
};

using compute_fn = void (*)(const std::uint64_t* operands, const eval_settings&, std::uint64_t& result,
                            std::uint8_t& raised);

// What a function reads from the environment follows from its kind.
enum class function_kind : std::uint8_t { arithmetic, comparison, to_integer, from_integer };

struct eval_function {
  std::string name;
  int arity;
  int operand_bits[3];  // tf32 operands are 19 bits, though written as 5 hex digits
  int result_bits;
  compute_fn compute;
  function_kind kind;
  format operand_format;  // for the arithmetic kind: the formats `trace` explains it with
  format result_format;
  std::string_view traced_op;  // the `trace` operation that explains a result of the arithmetic kind
};

constexpr int hex_digits_of(int bits) { return (bits + 3) / 4; }

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

template <format F, format R>
void register_conversion(std::vector<eval_function>& table) {
  if constexpr (F != R) {
    table.push_back({std::string(testfloat_name<F>()) + "_to_" + testfloat_name<R>(), 1, {F.width()}, R.width(),
                     &arithmetic<F>::template to_format<R>, function_kind::arithmetic, F, R, "convert"});
  }
}

template <format F>
void register_format(std::vector<eval_function>& table) {
  using A = arithmetic<F>;
  const std::string p = testfloat_name<F>();
  const int w = F.width();
  const auto rounds = [&](std::string suffix, int arity, compute_fn compute, std::string_view op) {
    table.push_back({p + suffix, arity, {w, w, w}, w, compute, function_kind::arithmetic, F, F, op});
  };
  rounds("_add", 2, &A::add, "add");
  rounds("_sub", 2, &A::sub, "sub");
  rounds("_mul", 2, &A::mul, "mul");
  rounds("_mulAdd", 3, &A::mul_add, "fma");
  rounds("_div", 2, &A::div, "div");
  rounds("_sqrt", 1, &A::sqrt, "sqrt");
  const auto compares = [&](std::string suffix, compute_fn compute) {
    table.push_back({p + suffix, 2, {w, w}, 1, compute, function_kind::comparison, F, F, {}});
  };
  compares("_eq", &A::template compare<0, false>);
  compares("_le", &A::template compare<1, true>);
  compares("_lt", &A::template compare<2, true>);
  compares("_eq_signaling", &A::template compare<0, true>);
  compares("_le_quiet", &A::template compare<1, false>);
  compares("_lt_quiet", &A::template compare<2, false>);
  const auto to_integer = [&](std::string suffix, int bits, compute_fn compute) {
    table.push_back({p + suffix, 1, {w}, bits, compute, function_kind::to_integer, F, F, {}});
  };
  to_integer("_to_i32", 32, &A::template to_int<32, true>);
  to_integer("_to_i64", 64, &A::template to_int<64, true>);
  to_integer("_to_ui32", 32, &A::template to_int<32, false>);
  const auto from_integer = [&](std::string prefix, int bits, compute_fn compute) {
    table.push_back({prefix + p, 1, {bits}, w, compute, function_kind::from_integer, F, F, {}});
  };
  from_integer("i32_to_", 32, &A::template from_int<32, true>);
  from_integer("i64_to_", 64, &A::template from_int<64, true>);
  from_integer("ui32_to_", 32, &A::template from_int<32, false>);
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

// Buffered stdout: one fwrite per few megabytes. The buffer is not zero-filled: that alone cost a few
// milliseconds per launch, and only what was written is ever read.
class output_buffer {
 public:
  ~output_buffer() { flush(); }
  char* reserve(std::size_t n) {
    if (used_ + n > size) flush();
    return buffer_.get() + used_;
  }
  void commit(char* end) { used_ = static_cast<std::size_t>(end - buffer_.get()); }
  void flush() {
    if (used_ && std::fwrite(buffer_.get(), 1, used_, stdout) != used_) fail("cannot write to stdout");
    used_ = 0;
  }

 private:
  static constexpr std::size_t size = std::size_t{1} << 22;
  std::unique_ptr<char[]> buffer_ = std::make_unique_for_overwrite<char[]>(size);
  std::size_t used_ = 0;
};

char* write_hex(char* out, std::uint64_t value, int digits) {
  for (int i = digits - 1; i >= 0; --i) {
    out[i] = upper_hex[value & 15];
    value >>= 4;
  }
  return out + digits;
}

std::string hex_field(std::uint64_t value, int bits) { return fmt::format("{:0{}X}", value, hex_digits_of(bits)); }

std::string flag_names(std::uint8_t raised) {
  if (!raised) return "none";
  std::string names;
  const char* const name[] = {"inexact", "underflow", "overflow", "infinite", "invalid"};
  for (int bit = 0; bit < 5; ++bit)
    if (raised >> bit & 1) names.append(names.empty() ? "" : " ").append(name[bit]);
  return names;
}

// One line's fields: the operands, then (with --check) the expected result and flags.
struct line_fields {
  std::uint64_t values[5] = {};
  int count = 0;
};

class evaluator {
 public:
  evaluator(const eval_function& function, const eval_settings& settings, bool stop_on_error, bool check)
      : function_(function), settings_(settings), stop_on_error_(stop_on_error), check_(check) {}

  // Returns the exit status.
  int run() {
    constexpr std::size_t input_size = std::size_t{1} << 22;
    const auto input = std::make_unique_for_overwrite<char[]>(input_size);
    std::size_t held = 0;
    bool end_of_input = false;
    while (!end_of_input) {
      const std::size_t got = std::fread(input.get() + held, 1, input_size - held, stdin);
      if (got == 0) end_of_input = true;
      held += got;
      const char* cursor = input.get();
      const char* const end = input.get() + held;
      for (;;) {
        const auto* newline =
            static_cast<const char*>(std::memchr(cursor, '\n', static_cast<std::size_t>(end - cursor)));
        if (!newline) {
          if (end_of_input && cursor != end) {
            if (!skipping_long_line_) process_line(cursor, end);
            cursor = end;
          } else if (cursor == input.get() && held == input_size) {
            // A line longer than the whole buffer cannot be a TestFloat line.
            if (!skipping_long_line_) {
              ++line_number_;
              report(std::string_view(cursor, held), "line too long; ");
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
      std::memmove(input.get(), cursor, held);
    }
    output_.flush();
    if (std::ferror(stdin)) fail("cannot read stdin");
    if (!check_) return bad_lines_ ? 1 : 0;
    if (cases_ == 0 && bad_lines_ == 0)
      fail("eval " + function_.name + " --check: the input holds no cases; nothing was checked");
    std::printf("%s --check: %s compared, %s%s\n", function_.name.c_str(), counted(cases_, "case", "cases").c_str(),
                counted(mismatches_, "mismatch", "mismatches").c_str(),
                bad_lines_ ? (", " + counted(bad_lines_, "bad line", "bad lines") + " (not compared)").c_str() : "");
    std::fputs(first_mismatch_.c_str(), stdout);
    return bad_lines_ ? 2 : mismatches_ ? 1 : 0;
  }

 private:
  int field_bits(int index) const {
    if (index < function_.arity) return function_.operand_bits[index];
    return index == function_.arity ? function_.result_bits : 5;  // the flags: five of TestFloat's bits
  }

  // Fills `fields`, or returns why the line is malformed: a reason ending in "; ", or empty where the expected
  // layout says enough.
  std::optional<std::string> parse_fields(const char* p, const char* end, line_fields& fields) const {
    const int wanted = function_.arity + (check_ ? 2 : 0);
    const auto skip_blanks = [&] {
      while (p < end && (*p == ' ' || *p == '\t')) ++p;
    };
    for (int k = 0; k < wanted; ++k) {
      skip_blanks();
      std::uint64_t bits = 0;
      int digits = 0;
      for (; p < end; ++p, ++digits) {
        const int digit = hex_digit_value(*p);
        if (digit < 0) break;
        bits = bits << 4 | static_cast<unsigned>(digit);
      }
      const int width = field_bits(k);
      const bool well_formed = digits > 0 && digits <= hex_digits_of(width) && (p == end || *p == ' ' || *p == '\t');
      if (!well_formed || (width < 64 && bits >> width)) {
        // A capture may hold tf32 as a GPU register does, in fp32's 32 bits: say what eval reads instead.
        if (!well_formed) return width == tf32.width() ? "tf32 values are 19 bits, 5 hex digits (1.0 is 1FC00); " : "";
        return fmt::format("{} {:X} does not fit in {} bits (at most {:X}); ", field_name(k), bits, width,
                           (std::uint64_t{1} << width) - 1);
      }
      fields.values[fields.count++] = bits;
    }
    skip_blanks();
    if (p != end) return std::string();
    return std::nullopt;
  }

  std::string field_name(int index) const {
    if (index < function_.arity) return "operand " + std::to_string(index + 1);
    return index == function_.arity ? "the expected result" : "the expected flags";
  }

  void process_line(const char* p, const char* end) {
    ++line_number_;
    if (end > p && end[-1] == '\r') --end;
    const char* first = p;
    while (first < end && (*first == ' ' || *first == '\t')) ++first;
    if (first == end || *first == '#') return;  // blank and comment lines carry no case
    line_fields fields;
    if (const auto why = parse_fields(p, end, fields))
      return report(std::string_view(p, static_cast<std::size_t>(end - p)), *why);

    std::uint64_t result = 0;
    std::uint8_t raised = 0;
    function_.compute(fields.values, settings_, result, raised);
    if (check_) return compare(fields, result, raised);
    char* out = output_.reserve(80);
    for (int k = 0; k < function_.arity; ++k) {
      out = write_hex(out, fields.values[k], hex_digits_of(function_.operand_bits[k]));
      *out++ = ' ';
    }
    out = write_hex(out, result, hex_digits_of(function_.result_bits));
    *out++ = ' ';
    out = write_hex(out, raised, 2);
    *out++ = '\n';
    output_.commit(out);
  }

  void compare(const line_fields& fields, std::uint64_t result, std::uint8_t raised) {
    ++cases_;
    const std::uint64_t expected = fields.values[function_.arity];
    const auto expected_flags = static_cast<std::uint8_t>(fields.values[function_.arity + 1]);
    if (result == expected && raised == expected_flags) return;
    if (mismatches_++ == 0) first_mismatch_ = describe_mismatch(fields, result, raised);
  }

  // The first mismatch in full: operands, the capture's result against the model's, and the model's trace.
  std::string describe_mismatch(const line_fields& fields, std::uint64_t result, std::uint8_t raised) const {
    const std::uint64_t expected = fields.values[function_.arity];
    const auto expected_flags = static_cast<std::uint8_t>(fields.values[function_.arity + 1]);
    std::string out = fmt::format("first mismatch, line {}: {}", line_number_, function_.name);
    for (int k = 0; k < function_.arity; ++k) out.append(" ").append(hex_field(fields.values[k], function_.operand_bits[k]));
    out += fmt::format("\n  capture {} {:02X} ({})\n  model   {} {:02X} ({})\n",
                       hex_field(expected, function_.result_bits), expected_flags, flag_names(expected_flags),
                       hex_field(result, function_.result_bits), raised, flag_names(raised));
    const bool float_result =
        function_.kind == function_kind::arithmetic || function_.kind == function_kind::from_integer;
    if (float_result) {
      out += "the capture's result (got) against the model's:\n";
      out += side_by_side(function_.result_format, static_cast<std::uint32_t>(expected),
                          static_cast<std::uint32_t>(result));
    }
    if (function_.traced_op.empty()) {
      out += "(no trace: `bitexact trace` explains add, sub, mul, fma, div, sqrt and conversions between formats)\n";
      return out;
    }
    std::vector<parsed_operand> operands;
    for (int k = 0; k < function_.arity; ++k)
      operands.push_back({function_.operand_format, static_cast<std::uint32_t>(fields.values[k])});
    out += "the model's trace:\n";
    out += render(trace_operation(function_.traced_op, function_.result_format, settings_.env, operands),
                  output_style::text);
    return out;
  }

  // why: empty, or a reason ending in "; ".
  void report(std::string_view text, const std::string& why) {
    ++bad_lines_;
    std::string expected = fmt::format("{} hex operand{} of at most {} digits", function_.arity,
                                       function_.arity > 1 ? "s" : "", hex_digits_of(function_.operand_bits[0]));
    if (function_.arity > 1 && function_.operand_bits[1] != function_.operand_bits[0])
      expected += fmt::format(" (then {})", hex_digits_of(function_.operand_bits[1]));
    if (check_)
      expected += fmt::format(", the expected result ({} digits) and flags (2 digits)",
                              hex_digits_of(function_.result_bits));
    const std::string message =
        fmt::format("line {}: {}expected {} for {}, got {}", line_number_, why, expected, function_.name,
                    quoted_input(text));
    if (stop_on_error_) {
      output_.flush();
      fail(message);
    }
    std::fprintf(stderr, "bitexact: error: %s\n", message.c_str());
  }

  const eval_function& function_;
  eval_settings settings_;
  bool stop_on_error_;
  bool check_;
  output_buffer output_;
  std::uint64_t line_number_ = 0;
  std::uint64_t bad_lines_ = 0;
  std::uint64_t cases_ = 0;
  std::uint64_t mismatches_ = 0;
  std::string first_mismatch_;
  bool skipping_long_line_ = false;
};

constexpr std::string_view eval_help =
    "usage: bitexact eval FUNCTION [options] < cases\n"
    "\n"
    "Berkeley TestFloat's line format: each stdin line holds FUNCTION's operands in hex;\n"
    "each stdout line repeats them (upper-case, fixed width) and adds the result and the\n"
    "flags as two hex digits: 01 inexact, 02 underflow, 04 overflow, 08 infinite\n"
    "(divide by zero), 10 invalid. Comparisons give 1 or 0; conversions to integers write\n"
    "8 (i32, ui32) or 16 (i64) hex digits. tf32 values are 19 bits, written as 5 digits\n"
    "(1.0 is 1FC00); an operand that does not fit its bits is a bad line. Blank lines and\n"
    "lines starting with # are skipped.\n"
    "\n"
    "FUNCTION, as TestFloat spells it, for F in f32 f16 bf16 tf32 e5m2 e4m3:\n"
    "  F_add F_sub F_mul F_mulAdd F_div F_sqrt\n"
    "  F_eq F_le F_lt F_eq_signaling F_le_quiet F_lt_quiet\n"
    "  F_to_G (G another of the formats), F_to_i32 F_to_i64 F_to_ui32, i32_to_F i64_to_F ui32_to_F\n"
    "  e.g. f32_add, f16_mulAdd, f32_to_bf16, bf16_to_f32, e4m3_mul, i32_to_f32\n"
    "\n"
    "--check: each line also carries the expected result and flags (as testfloat_ver reads\n"
    "them, e.g. from a GPU); every bit is compared, NaN payloads included. Prints the cases\n"
    "compared and the mismatches, and for the first mismatch its operands, both results\n"
    "decoded side by side and the model's trace.\n"
    "\n"
    "options:\n"
    "{options}\n"
    "Comparisons take only --daz; conversions to integers only --round, --random-bits,\n"
    "--daz and --exact; conversions from integers only --round, --random-bits and --nan:\n"
    "an option that cannot change the result of the chosen FUNCTION is refused.\n"
    "Exit status: 0; 1 if a line was bad (each is reported on stderr, the rest evaluated);\n"
    "2 for bad arguments or output that could not be written, with one line on stderr.\n"
    "With --check: 0 all agree, 1 a mismatch, 2 a bad line, no cases or bad arguments.\n";

// The environment options each kind of function reads, and why the others cannot matter.
std::uint8_t effective_options(function_kind kind) {
  switch (kind) {
    case function_kind::comparison: return option_daz;
    case function_kind::to_integer: return option_round | option_random_bits | option_daz;
    case function_kind::from_integer: return option_round | option_random_bits | option_nan;
    default: return every_environment_option;
  }
}

constexpr std::string_view why_not_effective(function_kind kind) {
  switch (kind) {
    case function_kind::comparison: return "a comparison rounds nothing (only --daz applies)";
    case function_kind::to_integer:
      return "a conversion to an integer reads only --round, --random-bits, --daz and --exact";
    default: return "a conversion from an integer reads only --round, --random-bits and --nan";
  }
}

}  // namespace

int eval_command(const arguments& args) {
  const auto functions = function_table();
  environment_options options;
  eval_settings settings;
  bool stop_on_error = false, check = false;
  std::string_view exact_option;  // the spelling given: --exact, -exact, --notexact or -notexact
  std::vector<option> table = environment_option_table(options, true);
  table.insert(table.end(), {
      {"--exact -exact", "", "conversions to integers raise inexact (TestFloat's -exact)",
       [&](std::string_view spelling) { settings.exact = true; exact_option = spelling; }},
      {"--notexact -notexact", "", "they do not (the default)", [&](std::string_view spelling) { exact_option = spelling; },
       "--exact"},
      {"--check", "", "compare each line's result and flags with the model's", [&](std::string_view) { check = true; }},
      {"--stop-on-error", "",
       "stop with status 2 at the first bad line (default: report it\n"
       "on stderr with its line number, go on, and exit with status 1)",
       [&](std::string_view) { stop_on_error = true; }},
      {"--list", "", "print every FUNCTION name and exit (alone)",
       [&](std::string_view) { fail("eval: --list takes no other arguments; write bitexact eval --list"); }},
  });
  if (asks_for_help(args)) return print_help(eval_help, table);
  if (!args.empty() && args.front() == "--list") {
    if (args.size() > 1) fail("eval: --list takes no other arguments, not " + quoted_input(args[1]));
    for (const auto& f : functions) std::printf("%s\n", f.name.c_str());
    return 0;
  }
  const arguments positional = read_options(args, "eval", table);
  if (positional.size() > 1)
    fail("eval: one FUNCTION expected, got " + quoted_input(positional[0]) + " and " + quoted_input(positional[1]));
  const std::string_view function_name = positional.empty() ? std::string_view() : positional[0];
  if (function_name.empty()) fail("eval: expected a FUNCTION such as f32_add; see bitexact eval --help");
  for (const auto& function : functions) {
    if (function.name != function_name) continue;
    const std::string context = "eval " + function.name;
    if (function.kind != function_kind::arithmetic)
      check_environment_options(options, effective_options(function.kind), context, why_not_effective(function.kind));
    else check_environment_options(options, every_environment_option, context, "");
    if (!exact_option.empty() && function.kind != function_kind::to_integer)
      fail(context + ": " + std::string(exact_option) +
           " cannot change the result: it applies only to conversions to integers; drop it");
    settings.env = options.env;
    return evaluator(function, settings, stop_on_error, check).run();
  }
  fail("eval: unknown function " + quoted_input(function_name) +
       "; expected e.g. f32_add, f16_mulAdd, f32_to_bf16 (bitexact eval --list)");
}

}  // namespace bitexact::cli
