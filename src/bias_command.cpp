// `bitexact bias mechanism`: the paper's P̄ V rounding-bias mechanism
// (Qiu & Yao, section 3.3.2, eq. 5, Fig. 6) on one constructed attention
// row, under the paper's own arithmetic and the GPU kernel's
// (attention/cumulative_error.hpp), as CSV, a summary, the traced operation
// of the largest jump, and an SVG plot.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <bitexact/attention/cumulative_error.hpp>
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
using attention::cumulative_error_curve;

constexpr std::string_view bias_help =
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
    "  --keys N            keys in the row (16 to 65536; default 1024)\n"
    "  --ties N            keys tied at the max, evenly spaced: key floor((i + 1/2) N_keys / N)\n"
    "                      for i = 0..N-1 (1 to N_keys; default 16)\n"
    "  --tie-positions L   the tied keys instead, a comma-separated list of distinct keys\n"
    "  --max X             the tied maximum score, unscaled (a bf16 value, positive or\n"
    "                      negative; default 8, scaled 1)\n"
    "  --gap-min G         the smallest gap below the max, unscaled (> 0; default 8)\n"
    "  --gap-max G         the largest (>= gap-min; default 64)\n"
    "  --v-mean M          the mean of V's elements (default -2)\n"
    "  --v-sd S            their standard deviation (>= 0; default 0.5)\n"
    "  --seed N            the generator's seed (0 to 2^64 - 1; default 1)\n"
    "  --col C             the column of O-bar followed (0 to 63; default 0)\n"
    "  --csv FILE          write the curves as CSV: one line per key added and per rounding\n"
    "                      between keys, columns semantics, pass, event, block, key,\n"
    "                      keys_added, p_bar_bits, p_bar, p_bar_is_one, v, value, exact,\n"
    "                      error, jump (value, exact, error and jump empty where the\n"
    "                      semantics holds no value: inside a fused step; decimals are\n"
    "                      the exact rationals rounded to double)\n"
    "  --svg FILE          plot the error curves, one panel per semantics, P-bar = 1 marked\n"
    "  --output STYLE      the traces: text (default), md, latex, json\n"
    "Options take `--name VALUE` or `--name=VALUE`, each once.\n"
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
  int ties = 16;
  std::vector<int> tie_positions;  // empty: --ties evenly spaced
  bfloat16 max_score = from_double<bf16>(8.0).result;
  double gap_min = 8, gap_max = 64, v_mean = -2, v_sd = 0.5;
  std::uint64_t seed = 1;
  int col = 0;
  std::string csv, svg;
  output_style style = output_style::text;
};

mechanism_options parse_options(const arguments& args) {
  argument_reader reader(args, "bias mechanism");
  mechanism_options options;
  std::string_view ties_text, positions_text;
  for (; !reader.at_end(); reader.next()) {
    std::string_view value;
    if (reader.take_value("--keys", value)) {
      options.keys = parse_int(value, 16, 65536, "--keys", "an integer from 16 to 65536");
    } else if (reader.take_value("--ties", value)) {
      ties_text = value;
    } else if (reader.take_value("--tie-positions", value)) {
      positions_text = value;
    } else if (reader.take_value("--max", value)) {
      const double parsed = parse_double(value, "--max", -HUGE_VAL, "a bf16 value such as 8 or -1.5");
      options.max_score = from_double<bf16>(parsed).result;
      if (to_double(options.max_score) != parsed)
        fail("bias: --max expects a bf16 value such as 8 or -1.5, not " + quoted_input(value) +
             fmt::format(" (the nearest bf16 is {})", to_double(options.max_score)));
    } else if (reader.take_value("--gap-min", value)) {
      options.gap_min = parse_double(value, "--gap-min", 0, "a positive decimal such as 8");
      if (!(options.gap_min > 0)) fail("bias: --gap-min expects a positive decimal such as 8, not " + quoted_input(value));
    } else if (reader.take_value("--gap-max", value)) {
      options.gap_max = parse_double(value, "--gap-max", 0, "a positive decimal such as 64");
    } else if (reader.take_value("--v-mean", value)) {
      options.v_mean = parse_double(value, "--v-mean", -HUGE_VAL, "a finite decimal such as -2");
    } else if (reader.take_value("--v-sd", value)) {
      options.v_sd = parse_double(value, "--v-sd", 0, "a decimal of at least 0 such as 0.5");
    } else if (reader.take_value("--seed", value)) {
      options.seed = parse_seed(value);
    } else if (reader.take_value("--col", value)) {
      options.col = parse_int(value, 0, 63, "--col", "a column from 0 to 63");
    } else if (reader.take_value("--csv", value)) {
      options.csv = value;
    } else if (reader.take_value("--svg", value)) {
      options.svg = value;
    } else if (reader.take_value("--output", value)) {
      if (const auto named = output_style_from_name(value)) options.style = *named;
      else fail("bias: --output expects text, md, latex or json, not " + quoted_input(value));
    } else if (reader.current().size() > 1 && reader.current().front() == '-') {
      reader.unknown_option();
    } else {
      fail("bias mechanism: unexpected argument " + quoted_input(reader.current()) + "; it takes options only");
    }
  }
  if (options.gap_max < options.gap_min)
    fail(fmt::format("bias: --gap-max {} is below --gap-min {}", options.gap_max, options.gap_min));
  if (!ties_text.empty() && !positions_text.empty())
    fail("bias: --ties and --tie-positions both place the ties; give one");
  if (!positions_text.empty()) {
    std::string_view rest = positions_text;
    while (true) {
      const std::size_t comma = rest.find(',');
      options.tie_positions.push_back(parse_int(rest.substr(0, comma), 0, options.keys - 1, "--tie-positions",
                                                "distinct keys from 0 to --keys - 1, comma-separated"));
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
    std::vector<int> sorted = options.tie_positions;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      fail("bias: --tie-positions names a key twice, in " + quoted_input(positions_text));
  } else {
    if (!ties_text.empty()) options.ties = parse_int(ties_text, 1, options.keys, "--ties", "an integer from 1 to --keys");
    if (options.ties > options.keys) fail(fmt::format("bias: --ties {} exceeds --keys {}", options.ties, options.keys));
    options.tie_positions = evenly_spaced(options.keys, options.ties);
  }
  return options;
}

// The row of one head (d = 64, one query), as --help describes it.
row_operands build_row(const mechanism_options& o) {
  return build_tie_row({o.keys, 64, o.tie_positions, o.max_score, o.gap_min, o.gap_max, o.v_mean, o.v_sd, o.seed});
}

struct curve_of {
  std::string semantics, pass;
  cumulative_error_curve curve;
};

double as_double(const exact_rational& x) { return x.convert_to<double>(); }

// The jumps of a curve's held events: each one's error minus the previous held error.
std::vector<exact_rational> jumps_of(const cumulative_error_curve& curve) {
  std::vector<exact_rational> jumps(curve.events.size());
  exact_rational previous = 0;
  for (std::size_t i = 0; i < curve.events.size(); ++i) {
    if (!curve.events[i].value_held) continue;
    const exact_rational error = curve.events[i].error();
    jumps[i] = error - previous;
    previous = error;
  }
  return jumps;
}

std::string_view event_name(const accumulation_event& e, bool kernel) {
  switch (e.what) {
    case accumulation_event::kind::key: return kernel ? "tensor_core" : "add";
    case accumulation_event::kind::padding_step: return "padding_step";
    case accumulation_event::kind::rescale: return "rescale";
    case accumulation_event::kind::pv_to_bf16: return "pv_to_bf16";
    case accumulation_event::kind::output_update: return "o_update";
  }
  return "";
}

bool is_kernel(const curve_of& c) { return c.semantics == "pytorch_sdpa_flash_sm90"; }

std::string csv_text(const std::vector<curve_of>& curves) {
  std::string out = "semantics,pass,event,block,key,keys_added,p_bar_bits,p_bar,p_bar_is_one,v,value,exact,error,jump\n";
  for (const curve_of& c : curves) {
    const std::vector<exact_rational> jumps = jumps_of(c.curve);
    for (std::size_t i = 0; i < c.curve.events.size(); ++i) {
      const accumulation_event& e = c.curve.events[i];
      out += fmt::format("{},{},{},{},", c.semantics, c.pass, event_name(e, is_kernel(c)), e.block);
      if (e.what == accumulation_event::kind::key)
        out += fmt::format("{},{},0x{:04X},{},{},{}", e.key, e.keys_added, e.p_bar.bits, to_double(e.p_bar),
                           e.p_bar_is_one() ? 1 : 0, to_double(e.v));
      else
        out += fmt::format(",{},,,,", e.keys_added);
      if (e.value_held)
        out += fmt::format(",{},{},{},{}\n", as_double(e.value), as_double(e.exact), as_double(e.error()), as_double(jumps[i]));
      else
        out += ",,,,\n";
    }
  }
  return out;
}

// The summary of one curve: P̄ = 1 keys, final error, rounding directions, the part made where P̄ = 1 enters.
void print_summary(const curve_of& c) {
  const bool kernel = is_kernel(c);
  const std::vector<exact_rational> jumps = jumps_of(c.curve);
  int ones = 0, down = 0, up = 0, exact = 0, steps_with_one = 0;
  exact_rational at_ones = 0, elsewhere = 0;
  bool step_has_one = false;
  for (std::size_t i = 0; i < c.curve.events.size(); ++i) {
    const accumulation_event& e = c.curve.events[i];
    if (e.p_bar_is_one()) ++ones, step_has_one = true;
    if (!e.value_held) continue;
    if (e.what == accumulation_event::kind::key || e.what == accumulation_event::kind::padding_step) {
      (jumps[i] < 0 ? down : jumps[i] > 0 ? up : exact) += 1;
      if (step_has_one) at_ones += jumps[i], ++steps_with_one;
      else elsewhere += jumps[i];
    } else {
      elsewhere += jumps[i];
    }
    step_has_one = false;
  }
  const char* unit = kernel ? "fused steps" : "additions";
  std::printf("  %-10s P-bar = 1 at %d keys; final error of O-bar %s (value %s, exact %s)\n", c.pass.c_str(), ones,
              fmt::format("{:.6g}", as_double(c.curve.final_error())).c_str(),
              fmt::format("{:.9g}", as_double(c.curve.events.back().value)).c_str(),
              fmt::format("{:.9g}", as_double(c.curve.events.back().exact)).c_str());
  std::printf("             %s: %d rounded down (error < 0), %d up, %d exact; the %d %s adding a P-bar = 1 key "
              "made %s, the rest %s\n",
              unit, down, up, exact, steps_with_one, kernel ? "steps" : "additions",
              fmt::format("{:.6g}", as_double(at_ones)).c_str(), fmt::format("{:.6g}", as_double(elsewhere)).c_str());
  using kind = accumulation_event::kind;
  if (const auto largest = c.curve.largest_jump({kind::key, kind::padding_step})) {
    const accumulation_event& e = c.curve.events[*largest];
    std::printf("             largest jump of one %s: %s at key %d (keys added %d, block %d, P-bar %s)\n",
                kernel ? "fused step" : "addition", fmt::format("{:.6g}", as_double(jumps[*largest])).c_str(), e.key,
                e.keys_added, e.block, fmt::format("{}", to_double(e.p_bar)).c_str());
  }
  if (const auto other = c.curve.largest_jump({kind::rescale, kind::pv_to_bf16, kind::output_update})) {
    const accumulation_event& e = c.curve.events[*other];
    std::printf("             largest jump between blocks: %s, %s after block %d\n",
                fmt::format("{:.6g}", as_double(jumps[*other])).c_str(), std::string(event_name(e, kernel)).c_str(), e.block);
  }
}

svg::panel panel_of(const std::vector<curve_of>& curves, const std::string& semantics, const std::string& title) {
  svg::panel p{title, "keys added, in the order this semantics adds them", "error of Ō (value − exact), Ō units", {}, {}};
  const char* colors[] = {"#c0392b", "#2471a3"};
  int n = 0;
  for (const curve_of& c : curves) {
    if (c.semantics != semantics) continue;
    svg::series line{c.pass, colors[n], n == 1, {{0.0, 0.0}}};
    svg::marks ones{"P\u0304 = 1 (" + c.pass + ")", colors[n], {}};
    for (const accumulation_event& e : c.curve.events) {
      if (e.value_held) line.points.emplace_back(e.keys_added, as_double(e.error()));
      if (e.p_bar_is_one()) ones.x.push_back(e.keys_added);
    }
    p.lines.push_back(std::move(line));
    if (!ones.x.empty()) p.marked.push_back(std::move(ones));
    ++n;
  }
  return p;
}

int mechanism_command(const arguments& args) {
  if (asks_for_help(args)) {
    std::fputs(bias_help.data(), stdout);
    return 0;
  }
  const mechanism_options options = parse_options(args);
  const row_operands row = build_row(options);
  try {
    ptx::mufu_tables::shared();
  } catch (const mufu_data_error& error) {
    fail(std::string("bias: ") + error.what());
  }
  // The single kernel, as PyTorch launches it when the call's row blocks fill 80% of the GPU (a B x H of 256).
  attention_shape launch = row.shape;
  launch.heads = 256;
  const auto kernel = attention::pytorch_sdpa_flash_sm90(launch);
  const auto kernel_stabilized = attention::pytorch_sdpa_flash_sm90_stabilized(launch);
  const auto paper = attention::paper_reference(row.shape);
  const auto paper_stabilized = attention::paper_reference_stabilized(row.shape);
  std::vector<curve_of> curves;
  curves.push_back({"paper_reference", "standard", attention::paper_cumulative_error(paper, row.shape, row.q, row.k, row.v, 0, options.col)});
  curves.push_back({"paper_reference", "stabilized",
                    attention::paper_cumulative_error(paper_stabilized, row.shape, row.q, row.k, row.v, 0, options.col)});
  curves.push_back({"pytorch_sdpa_flash_sm90", "standard",
                    attention::kernel_cumulative_error(kernel, row.shape, row.q, row.k, row.v, 0, options.col)});
  curves.push_back({"pytorch_sdpa_flash_sm90", "stabilized",
                    attention::kernel_cumulative_error(kernel_stabilized, row.shape, row.q, row.k, row.v, 0, options.col)});

  double v_sum = 0;
  for (int j = 0; j < options.keys; ++j) v_sum += to_double(row.v[static_cast<std::size_t>(j) * 64 + static_cast<std::size_t>(options.col)]);
  std::string positions;
  for (std::size_t i = 0; i < options.tie_positions.size(); ++i)
    positions += (i ? ", " : "") + std::to_string(options.tie_positions[i]);
  std::printf("row: %d keys, %zu tied at the max %s (scaled %s) at keys %s\n", options.keys, options.tie_positions.size(),
              fmt::format("{}", to_double(options.max_score)).c_str(),
              fmt::format("{}", to_double(options.max_score) / 8).c_str(), positions.c_str());
  std::printf("     other scores max - U(%s, %s); V = %s + %s (Irwin-Hall 12 - 6), seed %llu; column %d, mean of V %s\n",
              fmt::format("{}", options.gap_min).c_str(), fmt::format("{}", options.gap_max).c_str(),
              fmt::format("{}", options.v_mean).c_str(), fmt::format("{}", options.v_sd).c_str(),
              static_cast<unsigned long long>(options.seed), options.col,
              fmt::format("{:.6g}", v_sum / options.keys).c_str());
  std::printf("error: the running O-bar[0, %d] minus the exact sum of the same semantics' P-bar V so far\n", options.col);
  for (const char* semantics : {"paper_reference", "pytorch_sdpa_flash_sm90"}) {
    std::printf("\n%s\n", std::string(semantics) == "paper_reference"
                              ? "paper_reference (bf16 autocast, 512-key blocks first to last, O bf16 between blocks):"
                              : "pytorch_sdpa_flash_sm90 (single kernel, 128-key blocks last to first, fp32 O, "
                                "16-key fused steps):");
    for (const curve_of& c : curves)
      if (c.semantics == semantics) print_summary(c);
  }
  for (const curve_of& c : curves) {
    if (c.pass != "standard") continue;
    using kind = accumulation_event::kind;
    const auto largest = c.curve.largest_jump({kind::key, kind::padding_step});
    if (!largest) continue;
    const accumulation_event& e = c.curve.events[*largest];
    std::printf("\n%s, standard: the %s with the largest jump (key %d, keys added %d), in full:\n",
                c.semantics.c_str(), is_kernel(c) ? "fused step" : "addition", e.key, e.keys_added);
    std::fputs(render(*e.operation, options.style).c_str(), stdout);
  }
  if (!options.csv.empty()) write_file(options.csv, csv_text(curves));
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

constexpr std::string_view bias_analyses =
    "usage: bitexact bias mechanism [options]    the paper's P-bar V rounding bias on one row, the paper's\n"
    "                                            arithmetic against the GPU kernel's\n"
    "       bitexact bias attribution [options]  the kernel's error of O split by rounding site\n"
    "       bitexact bias statistics [options]   standard against stabilized softmax over many rows:\n"
    "                                            mean signed error of O and delta, 95% intervals\n"
    "\n"
    "bitexact bias ANALYSIS --help has each one's options; docs/bias.md and docs/rounding-bias.md\n"
    "show their output.\n";

int bias_command(const arguments& args) {
  if (args.empty())
    fail("bias: expected an analysis, mechanism, attribution or statistics (bitexact bias --help)");
  if (args.front() == "--help" || args.front() == "-h") {
    std::fputs(bias_analyses.data(), stdout);
    return 0;
  }
  const arguments rest(args.begin() + 1, args.end());
  if (args.front() == "mechanism") return mechanism_command(rest);
  if (args.front() == "attribution") return attribution_command(rest);
  if (args.front() == "statistics") return bias_statistics_command(rest);
  fail("bias: unknown analysis " + quoted_input(args.front()) +
       "; expected mechanism, attribution or statistics (bitexact bias --help)");
}

}  // namespace bitexact::cli
