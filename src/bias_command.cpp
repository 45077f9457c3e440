// `bitexact bias mechanism`: the paper's P̄ V rounding-bias mechanism
// (Qiu & Yao, section 3.3.2, eq. 5, Fig. 6) on one constructed attention
// row, under the paper's own arithmetic and the GPU kernel's
// (attention/mechanism.hpp, which the teaching page shares), as CSV, a summary, the traced operation
// of the largest jump, and an SVG plot.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <bitexact/attention/mechanism.hpp>
#include <bitexact/hardware/mufu_tables.hpp>
#include <bitexact/trace/render.hpp>

#include "cli.hpp"
#include "bias_rows.hpp"
#include "svg_plot.hpp"

namespace bitexact::cli {
namespace {

using namespace bias;
using attention::accumulation_event;
using attention::attention_shape;
using attention::mechanism_curve;

constexpr std::string_view mechanism_help =
    "usage: bitexact bias mechanism [--keys N] [--ties N | --tie-positions LIST] [--max X]\n"
    "           [--gap-min G] [--gap-max G] [--v-mean M] [--v-sd S] [--seed N] [--col C]\n"
    "           [--csv FILE] [--svg FILE] [--output STYLE]\n"
    "\n"
    "The paper's P-bar V rounding-bias mechanism (Qiu & Yao, section 3.3.2, eq. 5, Fig. 6)\n"
    "on one attention row built to show it: several scores tied at the row maximum (so\n"
    "P-bar = exp(S - max) = 1 there) and a V column of negative mean. For the standard and\n"
    "the stabilized forward pass, under two semantics,\n"
    "  paper_reference:         the paper's PyTorch flash attention under bf16 autocast\n"
    "                           (512-key blocks first to last, fp32 sums of bf16(P-bar) V\n"
    "                           in key order, O stored as bf16 between blocks)\n"
    "  pytorch_sdpa_flash_sm90: the GPU kernel, bit for bit (the single kernel PyTorch\n"
    "                           launches for training-size calls: 128-key blocks last to\n"
    "                           first, fp32 O across blocks, 16-key fused tensor-core steps\n"
    "                           truncating toward zero),\n"
    "it follows the running value of the unnormalised output element O-bar[0, col] along\n"
    "the keys in the order that semantics adds them, and its error:\n"
    "  error = running O-bar - the exact sum (rationals) of the same semantics' own\n"
    "          bf16 P-bar times V over the keys added so far (earlier blocks times the\n"
    "          semantics' own alpha),\n"
    "so that only the rounding of the P-bar V accumulation is measured, as eq. (5) does.\n"
    "\n"
    "The row (d = 64, scale 1/8, one query): Q = (1, 0, ..., 0), so the score of key j is\n"
    "K[j][0]; the tied keys get the maximum, every other key max - g with g uniform in\n"
    "[gap-min, gap-max] (rounded to bf16, redrawn until below the max); V[j][c] = mean +\n"
    "sd (u1 + ... + u12 - 6), u uniform in [0, 1) (rounded to bf16). Uniform draws are\n"
    "the top 53 bits of std::mt19937_64 seeded with --seed: scores first, then V row by row.\n"
    "\n"
    "options:\n"
    "{options}\n"
    "\n"
    "Prints the row, then per semantics and pass the keys with P-bar = 1, the final error,\n"
    "how many additions (fused steps) rounded down, up or not at all, the part of the error\n"
    "made where P-bar = 1 enters, and the largest jump; then, for each semantics' standard\n"
    "pass, the full trace of the addition (fused step) that makes the largest jump.\n"
    "\n"
    "The kernel's exponentials are MUFU table lookups: the command needs mufu_ex2.bxt,\n"
    "mufu_rcp.bxt and mufu_lg2.bxt from the data folder (as bitexact attention does).\n"
    "Exit status: 0 done; 2 bad arguments or output that could not be written, with one\n"
    "line on stderr. docs/bias.md shows the default run.\n";

struct mechanism_options {
  int keys = 1024;
  std::optional<int> ties;         // 16 evenly spaced when neither this nor tie_positions is given
  std::vector<int> tie_positions;
  bfloat16 max_score = from_double<bf16>(8.0).result;
  double gap_min = 8, gap_max = 64, v_mean = -2, v_sd = 0.5;
  std::uint64_t seed = 1;
  int col = 0;
  std::string csv, svg;
  output_style style = output_style::text;
};

std::vector<option> option_table(mechanism_options& o) {
  return {
      {"--keys", "N", "keys in the row (16 to 65536; default 1024)",
       [&](std::string_view n) { o.keys = parse_integer(n, 16, 65536, "an integer from 16 to 65536"); }},
      {"--ties", "N",
       "keys tied at the max, evenly spaced: key floor((i + 1/2) N_keys / N)\nfor i = 0..N-1 (1 to N_keys; default 16)",
       [&](std::string_view n) { o.ties = parse_integer(n, 1, 65536, "an integer from 1 to --keys"); }},
      {"--tie-positions", "L", "the tied keys instead, a comma-separated list of distinct keys",
       [&](std::string_view list) {
         for (const std::string_view key : split_list(list)) {
           const int position = parse_integer(key, 0, 65535, "distinct keys from 0 to --keys - 1, comma-separated");
           if (std::find(o.tie_positions.begin(), o.tie_positions.end(), position) != o.tie_positions.end())
             throw bad_value{"names a key twice, in " + quoted_input(list)};
           o.tie_positions.push_back(position);
         }
       }},
      {"--max", "X", "the tied maximum score, unscaled (a bf16 value, positive or\nnegative; default 8, scaled 1)",
       [&](std::string_view x) {
         const double parsed = parse_decimal(x, "a bf16 value such as 8 or -1.5");
         o.max_score = from_double<bf16>(parsed).result;
         if (to_double(o.max_score) != parsed)
           throw bad_value{fmt::format("expects a bf16 value such as 8 or -1.5, not {} (the nearest bf16 is {})",
                                       quoted_input(x), to_double(o.max_score))};
       }},
      {"--gap-min", "G", "the smallest gap below the max, unscaled (> 0; default 8)",
       [&](std::string_view g) {
         o.gap_min = parse_decimal(g, "a positive decimal such as 8", 0);
         if (!(o.gap_min > 0)) refuse_value("a positive decimal such as 8", g);
       }},
      {"--gap-max", "G", "the largest (>= gap-min; default 64)",
       [&](std::string_view g) { o.gap_max = parse_decimal(g, "a positive decimal such as 64", 0); }},
      {"--v-mean", "M", "the mean of V's elements (default -2)",
       [&](std::string_view m) { o.v_mean = parse_decimal(m, "a finite decimal such as -2"); }},
      {"--v-sd", "S", "their standard deviation (>= 0; default 0.5)",
       [&](std::string_view sd) { o.v_sd = parse_decimal(sd, "a decimal of at least 0 such as 0.5", 0); }},
      {"--seed", "N", "the generator's seed (0 to 2^64 - 1; default 1)",
       [&](std::string_view n) { o.seed = parse_seed(n); }},
      {"--col", "C", "the column of O-bar followed (0 to 63; default 0)",
       [&](std::string_view c) { o.col = parse_integer(c, 0, 63, "a column from 0 to 63"); }},
      {"--csv", "FILE",
       "write the curves as CSV: one line per key added and per rounding\n"
       "between keys, columns semantics, pass, event, block, key,\n"
       "keys_added, p_bar_bits, p_bar, p_bar_is_one, v, value, exact,\n"
       "error, jump (value, exact, error and jump empty where the\n"
       "semantics holds no value: inside a fused step; decimals are\n"
       "the exact rationals rounded to double)",
       [&](std::string_view file) { o.csv = file; }},
      {"--svg", "FILE", "plot the error curves, one panel per semantics, P-bar = 1 marked",
       [&](std::string_view file) { o.svg = file; }},
      output_option(o.style),
  };
}

// What no single option can check: the gaps' order, and the ties against the keys.
void check_options(mechanism_options& o) {
  if (o.gap_max < o.gap_min)
    fail(fmt::format("bias mechanism: --gap-max {} is below --gap-min {}", o.gap_max, o.gap_min));
  if (o.ties && !o.tie_positions.empty())
    fail("bias mechanism: --ties and --tie-positions both place the ties; give one");
  for (const int position : o.tie_positions)
    if (position >= o.keys)
      fail(fmt::format("bias mechanism: --tie-positions expects distinct keys from 0 to --keys - 1, not {} (--keys {})",
                       position, o.keys));
  if (o.ties && *o.ties > o.keys) fail(fmt::format("bias mechanism: --ties {} exceeds --keys {}", *o.ties, o.keys));
  if (o.tie_positions.empty()) o.tie_positions = evenly_spaced(o.keys, o.ties.value_or(16));
}

// The row of one head (d = 64, one query), as --help describes it.
attention::tie_row row_of(const mechanism_options& o) {
  return {o.keys, 64, o.tie_positions, o.max_score, o.gap_min, o.gap_max, o.v_mean, o.v_sd, o.seed};
}

svg::panel panel_of(const std::vector<mechanism_curve>& curves, const std::string& semantics, const std::string& title) {
  svg::panel p{title, "keys added, in the order this semantics adds them", "error of Ō (value − exact), Ō units", {}, {}};
  const char* colors[] = {"#c0392b", "#2471a3"};
  int n = 0;
  for (const mechanism_curve& c : curves) {
    if (c.semantics != semantics) continue;
    svg::series line{c.pass, colors[n], n == 1, {{0.0, 0.0}}};
    svg::marks ones{"P\u0304 = 1 (" + c.pass + ")", colors[n], {}};
    for (const accumulation_event& e : c.curve.events) {
      if (e.value_held) line.points.emplace_back(e.keys_added, e.error().convert_to<double>());
      if (e.p_bar_is_one()) ones.x.push_back(e.keys_added);
    }
    p.lines.push_back(std::move(line));
    if (!ones.x.empty()) p.marked.push_back(std::move(ones));
    ++n;
  }
  return p;
}

int mechanism_command(const arguments& args) {
  mechanism_options options;
  const std::vector<option> table = option_table(options);
  if (asks_for_help(args)) return print_help(mechanism_help, table);
  read_only_options(args, "bias mechanism", table);
  check_options(options);
  const attention::tie_row row_spec = row_of(options);
  row_operands row;
  try {
    row = build_tie_row(row_spec);
  } catch (const std::invalid_argument& error) {
    fail(fmt::format("bias mechanism: {} (--max {}, --gap-min {}, --gap-max {})", error.what(),
                     to_double(options.max_score), options.gap_min, options.gap_max));
  }
  try {
    ptx::mufu_tables::shared();
  } catch (const mufu_data_error& error) {
    fail(std::string("bias: ") + error.what());
  }
  const std::vector<mechanism_curve> curves = attention::mechanism_curves(row, options.col);
  std::fputs(attention::mechanism_report(row_spec, row, options.col, curves, options.style).c_str(), stdout);
  if (!options.csv.empty()) write_file(options.csv, attention::mechanism_csv(curves));
  if (!options.svg.empty()) {
    const std::string row_text = fmt::format("{} keys, {} tied at max {}, V mean {}, seed {}", options.keys,
                                             options.tie_positions.size(), to_double(options.max_score), options.v_mean,
                                             options.seed);
    write_file(options.svg,
               svg::line_plot({panel_of(curves, "paper_reference", "paper_reference (the paper's PyTorch code): Ō[0, " +
                                                                      std::to_string(options.col) + "], " + row_text),
                               panel_of(curves, "pytorch_sdpa_flash_sm90", "pytorch_sdpa_flash_sm90 (the GPU kernel)")}));
  }
  return 0;
}

}  // namespace

int attribution_command(const arguments& args);  // src/bias_attribution.cpp
int bias_statistics_command(const arguments& args);  // src/bias_statistics.cpp

std::span<const command> bias_analyses() {
  static const command table[] = {
      {"mechanism", "",
       "the paper's P-bar V rounding bias on one row: cumulative error along the\n"
       "keys, the paper's arithmetic against the GPU kernel's (CSV, SVG)",
       mechanism_command},
      {"attribution", "", "the GPU kernel's error of O split by rounding site (CSV, SVG)", attribution_command},
      {"statistics", "",
       "mean signed error of O and delta over synthetic tie rows, standard\n"
       "against stabilized softmax, 95% intervals (CSV, SVG)",
       bias_statistics_command},
  };
  return table;
}

int bias_command(const arguments& args) {
  const std::span<const command> analyses = bias_analyses();
  if (args.empty())
    fail("bias: expected an analysis, " + names_of(analyses) + " (bitexact bias --help)");
  if (args.front() == "--help" || args.front() == "-h") {
    for (const command& analysis : analyses)
      std::printf("%s bitexact bias %s [options]\n", &analysis == analyses.data() ? "usage:" : "      ",
                  std::string(analysis.name).c_str());
    std::printf("\n%s\nbitexact bias ANALYSIS --help has each one's options; docs/bias.md and\n"
                "docs/rounding-bias.md show their output.\n",
                command_list(analyses).c_str());
    return 0;
  }
  if (const command* analysis = find_command(analyses, args.front()))
    return analysis->run(arguments(args.begin() + 1, args.end()));
  fail("bias: unknown analysis " + quoted_input(args.front()) + "; expected " + names_of(analyses) +
       " (bitexact bias --help)");
}

}  // namespace bitexact::cli
