// `bitexact trace OP OPERANDS...`: run one operation with a trace recorder
// attached and render its record.
#include <cstdio>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <bitexact/core/operations.hpp>
#include <bitexact/trace/parse.hpp>
#include <bitexact/trace/render.hpp>

#include "cli.hpp"
#include "svg_bits.hpp"
#include "trace_operations.hpp"

namespace bitexact::cli {
namespace {

constexpr std::string_view trace_help =
    "usage: bitexact trace OP OPERAND... [options]\n"
    "\n"
    "Runs one operation and shows every step: the operands decoded, the alignment and\n"
    "the bits shifted out, the exact significand sum or product, normalisation, the\n"
    "guard/round/sticky bits and the rounding decision, the result, the flags and why,\n"
    "and the exact rounding error.\n"
    "\n"
    "OP: add sub mul div (2 operands), fma (3: a*b+c), sqrt (1), convert (1, needs --to),\n"
    "    cmp (2: the IEEE relation, no rounding)\n"
    "    mma (a tensor core's fused step of 16 products and C: bitexact trace mma --help),\n"
    "    ex2 (MUFU.EX2, the GPU's 2^x by table lookup: bitexact trace ex2 --help)\n"
    "\n"
    "OPERAND:\n"
    "  -2.296875  1e-3        decimal\n"
    "  0x1.8p-3               C hex float (the p exponent is required)\n"
    "  bf16:0xC013            bit pattern: needs a format prefix\n"
    "  tf32:0x1FC00           tf32 patterns are its 19 bits: this is 1.0\n"
    "  tf32:fp32:0x3F800000   tf32 as a GPU holds it, in fp32's bits (the low 13 must be 0)\n"
    "  bf16:-2.40625          a prefix also sets the format of a decimal or hex float\n"
    "  inf -inf nan           specials (nan is the format's default quiet NaN)\n"
    "  Unprefixed operands have the --from format. A decimal or hex float that the\n"
    "  format cannot hold exactly is rounded to nearest (ties to even) and a note on\n"
    "  stderr says so; --exact-operands refuses it instead (exit status 2).\n"
    "\n"
    "options:\n"
    "{options}\n"
    "--from needs an unprefixed operand; cmp takes only --from, --daz and --output. An option\n"
    "that cannot change the result of the chosen operation is refused.\n"
    "Exit status 0, or 2 with a one-line message on stderr.\n"
    "\n"
    "example: bitexact trace add fp32:0xC01A0E2E fp32:0xC0130000 --to bf16\n";

int arity_of(std::string_view op) {
  if (op == "add" || op == "sub" || op == "mul" || op == "div" || op == "cmp") return 2;
  if (op == "fma") return 3;
  if (op == "sqrt" || op == "convert") return 1;
  return 0;
}

std::string hex_of(format f, std::uint32_t bits) {
  return fmt::format("0x{:0{}X}", bits, (f.width() + 3) / 4);
}

format format_named(std::string_view name) {
  const auto named = format_from_name(name);
  if (!named) fail("unknown format " + quoted_input(name) + "; expected one of " + format_names_hint());
  return *named;
}

std::string describe_operand(const parsed_operand& x) {
  return fmt::format("{} {} = {}", name_of(x.fmt), hex_of(x.fmt, x.bits), to_double(x.fmt, x.bits));
}

// A comparison rounds nothing, so it has no trace record: say the relation.
int print_comparison(const parsed_operand& a, const parsed_operand& b, const environment& env, output_style style) {
  return with_formats(
      [&](auto a_tag, auto b_tag) {
        using A = typename decltype(a_tag)::value_type;
        using B = typename decltype(b_tag)::value_type;
        const A x = A::from_bits(a.bits);
        const B y = B::from_bits(b.bits);
        const auto order = compare(x, y, env);
        const char* relation = order == std::partial_ordering::less      ? "<"
                               : order == std::partial_ordering::greater ? ">"
                               : order == std::partial_ordering::equivalent ? "=="
                                                                            : "unordered";
        flags quiet, signaling;
        equal(x, y, quiet, env, false);
        less(x, y, signaling, env, true);
        if (style == output_style::json) {
          std::printf("{\"op\": \"cmp\", \"a\": {\"format\": \"%s\", \"bits\": \"%s\"}, \"b\": {\"format\": \"%s\", "
                      "\"bits\": \"%s\"}, \"relation\": \"%s\", \"quiet_flags\": %d, \"signaling_flags\": %d}\n",
                      std::string(name_of(a.fmt)).c_str(), hex_of(a.fmt, a.bits).c_str(),
                      std::string(name_of(b.fmt)).c_str(), hex_of(b.fmt, b.bits).c_str(), relation, quiet.bits,
                      signaling.bits);
        } else {
          std::printf("%s  %s  %s\n", describe_operand(a).c_str(), relation, describe_operand(b).c_str());
          std::printf("quiet predicates (==, !=): %s; signaling predicates (<, <=): %s\n",
                      quiet.bits ? "invalid (a signaling NaN operand)" : "no flags",
                      signaling.bits ? "invalid (a NaN operand)" : "no flags");
        }
        return 0;
      },
      a.fmt, b.fmt);
}

}  // namespace

int trace_mma_command(const arguments& args);
int trace_ex2_command(const arguments& args);

int trace_command(const arguments& args) {
  // The hardware units' steps are not IEEE operations: they have their own options and help.
  static const command hardware_steps[] = {
      {"mma", "A B C", "a tensor core's fused step", trace_mma_command},
      {"ex2", "X", "MUFU.EX2", trace_ex2_command},
  };
  if (const command* step = args.empty() ? nullptr : find_command(hardware_steps, args.front()))
    return step->run(arguments(args.begin() + 1, args.end()));
  environment_options options;
  std::optional<format> from, to;
  output_style style = output_style::text;
  bool exact_operands = false;
  std::optional<std::string> svg_path;
  std::vector<option> table = environment_option_table(options, false);
  table.insert(table.begin(), {
      {"--from", "FORMAT", "format of unprefixed operands (default fp32)",
       [&](std::string_view name) { from = format_named(name); }},
      {"--to", "FORMAT",
       "result format (default: the operands' format, which must agree)\nFORMAT: fp32 bf16 fp16 tf32 e5m2 e4m3",
       [&](std::string_view name) { to = format_named(name); }},
  });
  table.insert(table.end(), {
      output_option(style),
      {"--exact-operands", "", "refuse operands that are not exactly representable",
       [&](std::string_view) { exact_operands = true; }},
      {"--svg", "FILE",
       "add and sub: also draw the addition's bits as an SVG diagram (the\n"
       "aligned significands, the exact sum with guard, round and sticky\n"
       "coloured, the rounded result, the decision and the exact error)",
       [&](std::string_view file) { svg_path = std::string(file); }},
  });
  if (asks_for_help(args)) return print_help(trace_help, table);
  // Operands such as -2.5 start with one dash: only -- starts an option.
  const arguments positional = read_options(args, "trace", table, "--");
  if (positional.empty())
    fail("trace: expected an operation (add sub mul fma div sqrt convert cmp); see bitexact trace --help");
  const std::string_view op = positional.front();
  const int arity = arity_of(op);
  if (find_command(hardware_steps, op))
    fail(fmt::format("trace: write {} first, before any option: bitexact trace {} ... (see bitexact trace {} --help)",
                     op, op, op));
  if (arity == 0)
    fail("trace: unknown operation " + quoted_input(op) + "; expected add, sub, mul, fma, div, sqrt, convert or cmp");
  const std::string context = "trace " + std::string(op);
  if (svg_path && op != "add" && op != "sub")
    fail(context + ": --svg draws an addition's bits; it applies to add and sub only");
  if (static_cast<int>(positional.size()) - 1 != arity)
    fail(fmt::format("{}: expected {} operand{}, got {}", context, arity, arity > 1 ? "s" : "", positional.size() - 1));
  if (op == "cmp") {
    if (to)
      fail("trace cmp: --to cannot change the result: a comparison rounds nothing and has no result format; drop it");
    check_environment_options(options, option_daz, context, "a comparison rounds nothing (only --daz applies)");
  } else {
    check_environment_options(options, every_environment_option, context, "");
  }

  std::vector<parsed_operand> operands;
  bool every_operand_prefixed = true;
  for (int k = 0; k < arity; ++k) {
    const std::string_view text = positional[static_cast<std::size_t>(k) + 1];
    every_operand_prefixed &= text.find(':') != std::string_view::npos;
    const operand_parse parsed = parse_operand(text, from.value_or(fp32));
    if (!parsed.ok()) fail(parsed.error);
    const parsed_operand& x = parsed.operand;
    if (!x.exact) {
      const std::string what =
          fmt::format("operand {} {} is not exactly representable in {}", k + 1, quoted_input(text), name_of(x.fmt));
      if (exact_operands) fail(what + "; the nearest is " + describe_operand(x) + " (drop --exact-operands to use it)");
      note(what + (x.rounded_to_zero ? "; it rounds to zero: using " + describe_operand(x)
                                     : "; using the nearest (ties to even), " + describe_operand(x) +
                                           " (--exact-operands refuses instead)"));
    }
    operands.push_back(x);
  }
  if (from && every_operand_prefixed)
    fail(context + ": --from cannot change the result: it sets the format of unprefixed operands, and every "
                   "operand here has a FORMAT: prefix; drop it");
  if (op == "cmp") return print_comparison(operands[0], operands[1], options.env, style);

  if (op == "fma" && operands[0].fmt != operands[1].fmt)
    fail(fmt::format("trace fma: the factors a and b must share a format (got {} and {}); the addend may differ",
                     name_of(operands[0].fmt), name_of(operands[1].fmt)));
  const parsed_operand& first = operands[0];
  const parsed_operand& last = operands[static_cast<std::size_t>(arity) - 1];
  // Checked before the advice to add --to, which cannot help here.
  if (!supported_operand_pair(first.fmt, last.fmt))
    fail(fmt::format("{}: operands of {} and {} cannot be mixed (a mix needs one of them in fp32, as an fp32 "
                     "accumulator with a narrow value); write both in one format, e.g. {}:{}",
                     context, name_of(first.fmt), name_of(last.fmt), name_of(first.fmt),
                     to_double(last.fmt, last.bits)));
  if (op == "convert" && !to) fail("trace convert: name the result format with --to FORMAT");
  const std::optional<format> result_format = result_format_of({first.fmt, last.fmt}, to);
  if (!result_format)
    fail(fmt::format("{}: operands are {} and {}; name the result format with --to FORMAT", context,
                     name_of(first.fmt), name_of(last.fmt)));

  const trace record = trace_operation(op, *result_format, options.env, operands);
  if (svg_path) {
    std::string diagram;
    try {
      diagram = svg::addition_bits(record);
    } catch (const std::invalid_argument& error) {
      fail(context + ": --svg: " + error.what());
    }
    std::ofstream out(*svg_path, std::ios::binary);
    out << diagram;
    out.close();
    if (!out) fail(context + ": cannot write " + quoted_input(*svg_path));
  }
  const std::string text = render(record, style);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (!text.empty() && text.back() != '\n') std::fputc('\n', stdout);
  return 0;
}

}  // namespace bitexact::cli
