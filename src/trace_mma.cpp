// `bitexact trace mma A B C`: one step of a tensor core's fused multiply-add
// (hardware/mma.hpp's fused_multiply_add_step) with its trace rendered; with
// --compare, the same products added one fused multiply-add at a time.
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <bitexact/core/operations.hpp>
#include <bitexact/hardware/alu.hpp>
#include <bitexact/hardware/gpu.hpp>
#include <bitexact/hardware/mma.hpp>
#include <bitexact/trace/parse.hpp>
#include <bitexact/trace/render.hpp>

#include "cli.hpp"

namespace bitexact::cli {
namespace {

constexpr std::string_view trace_mma_help =
    "usage: bitexact trace mma A B C [options]\n"
    "\n"
    "One step of a tensor core's fused multiply-add, as mma.m16n8k16 computes one element of\n"
    "D = A B + C: every product A[k] * B[k] is exact; the largest term's exponent e_max sets a\n"
    "window, each product and C is cut toward zero to the unit's bits below 2^e_max, the kept\n"
    "parts are summed exactly and the sum is rounded once. Shows every term with the bits the\n"
    "window cut away, the sum, the rounding and the exact error (include/bitexact/hardware/mma.hpp).\n"
    "\n"
    "A, B  comma-separated lists of the factors: exactly as many values as the unit sums in one\n"
    "      step (16 on sm90, 8 on sm80; nothing is padded: write the zeros), bf16 or fp16,\n"
    "      tf32 with --unit sm90_k8, e4m3 or e5m2 with --unit sm90_fp8; one format for both\n"
    "C     the accumulator, fp32 (or fp16 with fp16, e4m3 or e5m2 factors); the result has\n"
    "      its format\n"
    "Values are written as operands of bitexact trace (see its --help; a bit pattern needs a\n"
    "format prefix); unprefixed values of A and B take --from, an unprefixed C takes --to.\n"
    "\n"
    "options:\n"
    "{options}\n"
    "The unit's rounding is fixed (toward zero into fp32, to nearest even into fp16): the\n"
    "rounding options of bitexact trace do not apply.\n"
    "Exit status 0, or 2 with a one-line message on stderr.\n"
    "\n"
    "example: bitexact trace mma 1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1 1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0 fp32:0x33800000\n";

struct mma_options {
  fused_sum_unit unit = sm90_tensor_core;
  std::string_view unit_name = "sm90";
  std::optional<format> from, to;
  bool compare = false;
  bool exact_operands = false;
  output_style style = output_style::text;
};

parsed_operand parse_value(std::string_view text, format default_format, std::string_view what, bool exact_operands) {
  const operand_parse parsed = parse_operand(text, default_format);
  if (!parsed.ok()) fail(fmt::format("trace mma: {}: {}", what, parsed.error));
  const parsed_operand& x = parsed.operand;
  if (!x.exact) {
    const std::string message = fmt::format("{} {} is not exactly representable in {}", what, quoted_input(text),
                                            name_of(x.fmt));
    const std::string nearest = describe_value(x.fmt, x.bits);
    if (exact_operands) fail("trace mma: " + message + "; the nearest is " + nearest);
    note(message + "; using the nearest (ties to even), " + nearest);
  }
  return x;
}

// A or B: "v0,v1,...", each value parsed as an operand.
struct value_list {
  std::vector<parsed_operand> values;
  bool every_value_prefixed = true;  // each has a FORMAT: prefix, so --from reads none of them
};

value_list parse_list(std::string_view list, char name, format default_format, bool exact_operands) {
  value_list parsed;
  for (const std::string_view text : split_list(list)) {
    const std::string what = fmt::format("{}[{}]", name, parsed.values.size());
    if (text.empty())
      fail(fmt::format("trace mma: {} is empty in {}; write a value between the commas", what, quoted_input(list)));
    parsed.values.push_back(parse_value(text, default_format, what, exact_operands));
    parsed.every_value_prefixed &= text.find(':') != std::string_view::npos;
  }
  return parsed;
}

template <class Tag>
std::vector<typename Tag::value_type> values_of(Tag, const std::vector<parsed_operand>& xs) {
  std::vector<typename Tag::value_type> values;
  for (const auto& x : xs) values.push_back(Tag::value_type::from_bits(x.bits));
  return values;
}

// The comparison: the same products added in k order, one rounding each.
template <format Acc, format In>
document_section one_rounding_per_product(const std::vector<value<In>>& a, const std::vector<value<In>>& b,
                                                value<Acc> c, const trace& step) {
  const environment nearest = ptx::gpu_environment();
  value<Acc> accumulator = c;
  for (std::size_t k = 0; k < a.size(); ++k) accumulator = fma<Acc>(a[k], b[k], accumulator, nearest).result;

  document_section s{"compared with one rounding per product", {}};
  s.lines.push_back(text_line("order", fmt::format("C, then acc = fma(A[k], B[k], acc) for k = 0..{}, each rounded "
                                                   "to nearest even in {}",
                                                   a.size() - 1, name_of(Acc))));
  s.lines.push_back(text_line("result", describe_value(Acc, accumulator.bits)));
  const auto chain_value = exact_value_of(Acc, accumulator.bits);
  if (chain_value && step.exact_value) {
    const exact_rational error = *chain_value - *step.exact_value;
    s.lines.push_back(text_line("error", error == 0 ? "0 (exact)"
                                                    : fmt::format("{} = {}  (result - exact)", to_decimal(error),
                                                                  to_fraction(error))));
  }
  s.lines.push_back(text_line("fused step", describe_value(Acc, step.result_bits) + ", the result above"));
  return s;
}

template <format Acc, format In>
int run_step(const mma_options& options, const std::vector<parsed_operand>& a_operands,
             const std::vector<parsed_operand>& b_operands, const parsed_operand& c_operand) {
  const auto a = values_of(format_tag<In>{}, a_operands), b = values_of(format_tag<In>{}, b_operands);
  const auto c = value<Acc>::from_bits(c_operand.bits);
  const auto [result, record] = traced([&](auto& recorder) {
    return fused_multiply_add_step<Acc, In>(options.unit, std::span<const value<In>>(a), std::span<const value<In>>(b),
                                            c, recorder);
  });
  std::string text;
  if (options.style == output_style::json) {
    text = render(record, options.style);
  } else {
    auto doc = layout_of(record);
    if (options.compare) doc.push_back(one_rounding_per_product<Acc, In>(a, b, c, record));
    text = render_document(doc, options.style);
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

// --unit's help: every unit of the GPU records (hardware/gpu.hpp) and the instruction it models.
const std::string& unit_help() {
  static const std::string help = [] {
    std::string text = "the tensor core (default sm90):";
    for (const architecture& a : architectures)
      for (const tensor_core_instruction& i : a.tensor_cores)
        text += fmt::format("\n  {}: {} on {}: {} products a step, {} bits kept\n    below 2^e_max; {}",
                            i.unit_name, i.instruction, a.name, i.unit.products_per_step, i.unit.kept_fraction_bits,
                            i.evidence);
    return text;
  }();
  return help;
}

}  // namespace

int trace_mma_command(const arguments& args) {
  mma_options options;
  environment_options rounding;
  // The environment options are read only to be refused with the reason, and not listed.
  std::vector<option> table = environment_option_table(rounding, false);
  for (option& o : table) o.help = {};
  table.insert(table.end(), {
      {"--unit", "UNIT", unit_help(),
       [&](std::string_view unit) {
         try {
           options.unit = find_tensor_core_unit(unit).unit;
         } catch (const std::invalid_argument&) {
           refuse_value("a tensor-core unit: " + tensor_core_unit_names(), unit);
         }
         options.unit_name = unit;
       }},
      {"--from", "FORMAT",
       "format of unprefixed values of A and B: bf16 (default) or fp16;\n"
       "tf32 with --unit sm90_k8; e4m3 or e5m2 with --unit sm90_fp8",
       [&](std::string_view name) {
         options.from = format_from_name(name);
         if (options.from != bf16 && options.from != fp16 && options.from != tf32 && options.from != e4m3 &&
             options.from != e5m2)
           refuse_value("bf16, fp16, tf32, e4m3 or e5m2 (the tensor core's factors here)", name);
       }},
      {"--to", "FORMAT",
       "the accumulator's format, of an unprefixed C and of the result:\nfp32 (default) or fp16 (with fp16, e4m3 or "
       "e5m2 factors)",
       [&](std::string_view name) {
         options.to = format_from_name(name);
         if (options.to != fp32 && options.to != fp16) refuse_value("fp32 or fp16 (the accumulator's formats)", name);
       }},
      {"--compare", "",
       "add the same sum done one product at a time: C, then for k = 0, 1, ...\n"
       "one fused multiply-add in the accumulator's format, each rounded to\n"
       "nearest even (as the CUDA cores' FFMA would), with its exact error\n"
       "(text, md and latex output)",
       [&](std::string_view) { options.compare = true; }},
      output_option(options.style),
      {"--exact-operands", "", "refuse values that are not exactly representable",
       [&](std::string_view) { options.exact_operands = true; }},
  });
  if (asks_for_help(args)) return print_help(trace_mma_help, table);
  const arguments positional = read_options(args, "trace mma", table, "--");
  check_environment_options(rounding, 0, "trace mma",
                            "the tensor core's rounding is fixed (toward zero into fp32, to nearest even into fp16)");
  if (positional.size() != 3)
    fail(fmt::format("trace mma: expected A, B and C (two comma-separated lists and the accumulator), got {} "
                     "argument{}; see bitexact trace mma --help",
                     positional.size(), positional.size() == 1 ? "" : "s"));
  if (options.compare && options.style == output_style::json)
    fail("trace mma: --compare adds a section to the text, md or latex output; json holds the step's record only");

  const format in_default = options.from.value_or(bf16);
  const value_list a_list = parse_list(positional[0], 'A', in_default, options.exact_operands);
  const value_list b_list = parse_list(positional[1], 'B', in_default, options.exact_operands);
  const parsed_operand c = parse_value(positional[2], options.to.value_or(fp32), "C", options.exact_operands);
  const std::vector<parsed_operand>& a = a_list.values;
  const std::vector<parsed_operand>& b = b_list.values;
  if (options.from && a_list.every_value_prefixed && b_list.every_value_prefixed)
    fail("trace mma: --from cannot change the result: it sets the format of unprefixed values of A and B, and "
         "every one has a FORMAT: prefix; drop it");
  if (options.to && positional[2].find(':') != std::string_view::npos)
    fail(c.fmt == *options.to
             ? "trace mma: --to cannot change the result: it sets the format of an unprefixed C, and C has a "
               "FORMAT: prefix; drop it"
             : fmt::format("trace mma: C is {} but --to says {}: the accumulator and the result share one format",
                           name_of(c.fmt), name_of(*options.to)));

  // The unit's inputs first: the wrong unit for the factors would also report the wrong count.
  const format a_format = a.front().fmt;
  const tensor_core_instruction& instruction = find_tensor_core_unit(options.unit_name);
  if (!instruction.takes(a_format)) {
    std::string takes;
    for (const format f : instruction.inputs) takes += (takes.empty() ? "" : ", ") + std::string(name_of(f));
    const tensor_core_instruction* other = nullptr;
    for (const architecture& arch : architectures)
      for (const tensor_core_instruction& i : arch.tensor_cores)
        if (!other && i.takes(a_format)) other = &i;
    fail(fmt::format("trace mma: the {} unit takes {} factors, not {}{}", options.unit_name, takes, name_of(a_format),
                     other ? fmt::format("; --unit {} takes them", other->unit_name) : std::string()));
  }
  const auto products = static_cast<std::size_t>(options.unit.products_per_step);
  if (a.size() != products || b.size() != products)
    fail(fmt::format("trace mma: the {} unit sums {} products a step; A has {} value{} and B {} (write zeros for "
                     "unused products)",
                     options.unit_name, products, a.size(), a.size() == 1 ? "" : "s", b.size()));
  const format in = a.front().fmt, acc = c.fmt;
  for (const auto* list : {&a, &b})
    for (std::size_t k = 0; k < products; ++k)
      if ((*list)[k].fmt != in)
        fail(fmt::format("trace mma: {}[{}] is {} but A[0] is {}: A and B share one format", list == &a ? 'A' : 'B',
                         k, name_of((*list)[k].fmt), name_of(in)));
  if (acc == fp16 && in != fp16 && in != e4m3 && in != e5m2)
    fail(fmt::format("trace mma: an fp16 accumulator takes fp16, e4m3 or e5m2 factors here (the .f16 accumulation "
                     "measured); A and B are {}",
                     name_of(in)));
  if (acc != fp32 && acc != fp16)
    fail(fmt::format("trace mma: C is {}; the accumulator is fp32 or fp16", name_of(acc)));

  if (acc == fp16) {
    if (in == e4m3) return run_step<fp16, e4m3>(options, a, b, c);
    if (in == e5m2) return run_step<fp16, e5m2>(options, a, b, c);
    return run_step<fp16, fp16>(options, a, b, c);
  }
  if (in == fp16) return run_step<fp32, fp16>(options, a, b, c);
  if (in == tf32) return run_step<fp32, tf32>(options, a, b, c);
  if (in == e4m3) return run_step<fp32, e4m3>(options, a, b, c);
  if (in == e5m2) return run_step<fp32, e5m2>(options, a, b, c);
  return run_step<fp32, bf16>(options, a, b, c);
}

}  // namespace bitexact::cli
