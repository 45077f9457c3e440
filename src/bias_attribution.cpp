// `bitexact bias attribution`: the error of the single flash-attention kernel
// (pytorch_sdpa_flash_sm90, standard and stabilized) split by rounding site
// (attention/rounding_sites.hpp) over the mechanism command's row and a
// batch of random rows, as a summary, CSV and an SVG bar chart.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <boost/math/distributions/students_t.hpp>
#include <fmt/format.h>

#include <bitexact/attention/rounding_sites.hpp>
#include <bitexact/attention/kernels.hpp>
#include <bitexact/hardware/mufu_tables.hpp>

#include "bias_rows.hpp"
#include "cli.hpp"
#include "svg_plot.hpp"

namespace bitexact::cli {
namespace {

using namespace bias;
using attention::attention_shape;
using attention::every_rounding_site;
using attention::rounding_site;
using attention::row_attribution;
using attention::working_real;

constexpr std::string_view attribution_help =
    "usage: bitexact bias attribution [--keys N] [--head-dim 64|128] [--ties N] [--v-mean M] [--v-sd S]\n"
    "           [--rows N] [--seed N] [--beta B] [--eps E] [--csv FILE] [--svg FILE]\n"
    "\n"
    "The error of the GPU kernel's O (pytorch_sdpa_flash_sm90, the single kernel PyTorch\n"
    "launches for training-size calls, bit for bit) split by rounding site. One query row is\n"
    "recomputed in a 128-bit binary type with each of the kernel's rounding sites rounding\n"
    "as the kernel does or not at all:\n"
    "  scores             S = Q K^T, chained tensor-core steps (terms truncated, RZ into fp32)\n"
    "  exponent_argument  RN(RN(S scale_log2) - RN(m scale_log2)), alpha's argument, the\n"
    "                     constant scale_log2 itself, the stabilized max RN(beta m)\n"
    "  ex2_unit           MUFU.EX2 for P and alpha\n"
    "  p_to_bf16          P to bf16 for P V\n"
    "  pv_tensor_core     O + bf16(P) V, tensor-core steps with O as their C\n"
    "  o_rescale          O = RN(O alpha)\n"
    "  row_sum            the fp32 row sums (additions, the FFMA rescale, the reduction)\n"
    "  normalization      RN(1 / l) and RN(O RN(1 / l))\n"
    "  output_bf16        O to bf16\n"
    "With every site rounding the row is the emulator's, bit for bit; with none it is\n"
    "softmax(S scale) V. For each row, pass (standard; stabilized, the paper's Algorithm 3\n"
    "per K/V block) and output (fp32: O before its bf16 conversion, that site held exact;\n"
    "bf16: the kernel's O), with errors summed over the row's elements and divided by\n"
    "head_dim (a mean per element, in O's units):\n"
    "  total         kernel O - exact O\n"
    "  contribution  kernel O - O with that one site exact (leave one out)\n"
    "  alone         O with only that site rounding - exact O\n"
    "  residual      total - the sum of the contributions (the sites' errors do not add)\n"
    "  away          the same errors times the sign of the exact O element (> 0: away from 0)\n"
    "\n"
    "The rows: first the mechanism row of `bitexact bias mechanism` (Q = (1, 0, ...), --ties\n"
    "keys at the max 8, the others 8 to 64 below, V = --v-mean + --v-sd N, seed --seed);\n"
    "then --rows random rows from one std::mt19937_64 seeded with --seed + 1, row after row\n"
    "Q, K, V, each element Irwin-Hall(12) - 6 (about N(0, 1); V's times --v-sd plus --v-mean)\n"
    "rounded to bf16; the key of the largest score (computed exactly) lends its K row to\n"
    "--ties - 1 others (keys floor((i + 1/2) keys / ties), the next key when one is it), so\n"
    "that --ties scores tie at the max. Means over the random rows come with a 95% Student t\n"
    "confidence interval.\n"
    "\n"
    "options:\n"
    "{options}\n"
    "\n"
    "Needs mufu_ex2.bxt, mufu_rcp.bxt and mufu_lg2.bxt from the data folder. Exit status: 0\n"
    "done; 2 bad arguments or output that could not be written, with one line on stderr.\n"
    "docs/bias.md shows the default run.\n";

struct attribution_options {
  int keys = 1024, head_dim = 64, ties = 16, rows = 40;
  double v_mean = -2, v_sd = 0.5;
  std::uint64_t seed = 1;
  attention::stabilized_max rule;
  std::string csv, svg;
};

std::vector<option> option_table(attribution_options& o) {
  return {
      {"--keys", "N", "keys per row (16 to 65536; default 1024)",
       [&](std::string_view n) { o.keys = parse_integer(n, 16, 65536, "an integer from 16 to 65536"); }},
      {"--head-dim", "D", "64 or 128 (default 64)",
       [&](std::string_view d) {
         o.head_dim = parse_integer(d, 64, 128, "64 or 128");
         if (o.head_dim != 64 && o.head_dim != 128) refuse_value("64 or 128", d);
       }},
      {"--ties", "N", "scores tied at each row's max (1 to --keys; default 16)",
       [&](std::string_view n) { o.ties = parse_integer(n, 1, 65536, "an integer from 1 to --keys"); }},
      {"--v-mean", "M", "the mean of V's elements (default -2)",
       [&](std::string_view m) { o.v_mean = parse_decimal(m, "a finite decimal such as -2"); }},
      {"--v-sd", "S", "their standard deviation (>= 0; default 0.5)",
       [&](std::string_view sd) { o.v_sd = parse_decimal(sd, "a decimal of at least 0 such as 0.5", 0); }},
      {"--rows", "N", "random rows (0 to 100000; default 40)",
       [&](std::string_view n) { o.rows = parse_integer(n, 0, 100000, "an integer from 0 to 100000"); }},
      {"--seed", "N", "the seed (0 to 2^64 - 1; default 1)", [&](std::string_view n) { o.seed = parse_seed(n); }},
      {"--beta", "B", "the stabilized pass's beta (a positive fp32 value; default 2)",
       [&](std::string_view b) {
         const double beta = parse_decimal(b, "a positive fp32 value such as 2", 0);
         if (!(beta > 0)) refuse_value("a positive fp32 value such as 2", b);
         o.rule.beta = from_double<fp32>(beta).result;
         if (to_double(o.rule.beta) != beta)
           throw bad_value{fmt::format("expects a positive fp32 value such as 2, not {} (the nearest fp32 is {})",
                                       quoted_input(b), to_double(o.rule.beta))};
       }},
      {"--eps", "E", "its epsilon (an fp32 value >= 0; default 0.001)",
       [&](std::string_view e) {
         o.rule.epsilon = from_double<fp32>(parse_decimal(e, "a decimal of at least 0 such as 0.001", 0)).result;
       }},
      {"--csv", "FILE",
       "one line per row, pass, output and site: row_kind (mechanism or\n"
       "random), row (0 the mechanism row, then 1..--rows), pass, output (fp32\n"
       "or bf16), site (the nine sites, then total and residual), contribution,\n"
       "contribution_away, alone, alone_away (empty for total and residual),\n"
       "mean_abs_o (the mean |exact O| of the row); errors as above",
       [&](std::string_view file) { o.csv = file; }},
      {"--svg", "FILE",
       "a bar chart: per site the mean contribution over the random rows with\n"
       "its 95% interval, standard and stabilized side by side: fp32 O, fp32 O\n"
       "without the two bf16 roundings and the total (finer scale), bf16 O",
       [&](std::string_view file) { o.svg = file; }},
  };
}

// One random row, as --help describes it.
row_operands random_row(const attribution_options& o, std::mt19937_64& generator) {
  const std::size_t d = static_cast<std::size_t>(o.head_dim), keys = static_cast<std::size_t>(o.keys);
  const auto normal = [&] {
    double sum = 0;
    for (int i = 0; i < 12; ++i) sum += static_cast<double>(generator() >> 11) * 0x1p-53;
    return sum - 6;
  };
  row_operands row{{1, 1, 1, o.keys, o.head_dim, false}, {}, {}, {}};
  for (std::size_t i = 0; i < d; ++i) row.q.push_back(from_double<bf16>(normal()).result);
  for (std::size_t i = 0; i < keys * d; ++i) row.k.push_back(from_double<bf16>(normal()).result);
  for (std::size_t i = 0; i < keys * d; ++i) row.v.push_back(from_double<bf16>(o.v_mean + o.v_sd * normal()).result);
  std::size_t top = 0;
  working_real top_score = 0;
  for (std::size_t j = 0; j < keys; ++j) {
    working_real score = 0;
    for (std::size_t c = 0; c < d; ++c) score += working_real(to_double(row.q[c])) * working_real(to_double(row.k[j * d + c]));
    if (j == 0 || score > top_score) top = j, top_score = score;
  }
  int lent = 0;
  for (const int position : evenly_spaced(o.keys, o.ties)) {
    std::size_t key = static_cast<std::size_t>(position);
    if (key == top) key = (key + 1) % keys;
    if (lent == o.ties - 1) break;
    std::copy_n(row.k.begin() + static_cast<std::ptrdiff_t>(top * d), d, row.k.begin() + static_cast<std::ptrdiff_t>(key * d));
    ++lent;
  }
  return row;
}

// One value per (site, then total and residual) of one row, pass and output.
struct site_values {
  std::array<double, attention::rounding_site_count + 2> contribution{}, away{}, alone{}, alone_away{};
};
constexpr std::size_t total_slot = attention::rounding_site_count, residual_slot = total_slot + 1;

site_values values_of(const row_attribution& a, int head_dim) {
  const auto per_element = [&](const working_real& x) { return x.convert_to<double>() / head_dim; };
  site_values v;
  for (const rounding_site site : every_rounding_site) {
    const std::size_t i = static_cast<std::size_t>(site);
    v.contribution[i] = per_element(a.contribution(site).signed_sum);
    v.away[i] = per_element(a.contribution(site).away_from_zero);
    v.alone[i] = per_element(a.alone_error(site).signed_sum);
    v.alone_away[i] = per_element(a.alone_error(site).away_from_zero);
  }
  v.contribution[total_slot] = per_element(a.total().signed_sum);
  v.away[total_slot] = per_element(a.total().away_from_zero);
  v.contribution[residual_slot] = per_element(a.residual().signed_sum);
  v.away[residual_slot] = per_element(a.residual().away_from_zero);
  return v;
}

std::string slot_name(std::size_t slot) {
  if (slot == total_slot) return "total";
  if (slot == residual_slot) return "residual";
  return std::string(attention::site_name(every_rounding_site[slot]));
}

// One row's attribution in both passes and both outputs: [pass][output].
struct row_result {
  std::string kind;
  double mean_abs_o = 0;
  std::array<std::array<site_values, 2>, 2> values;
};

row_result attribute(const row_operands& row, const attention_shape& launch, const attribution_options& o,
                     const std::string& kind) {
  row_result result{kind, 0, {}};
  const attention::flash_kernel kernels[] = {attention::pytorch_sdpa_flash_sm90(launch),
                                             attention::pytorch_sdpa_flash_sm90_stabilized(launch, {}, o.rule)};
  for (std::size_t pass = 0; pass < 2; ++pass) {
    const attention::row_attributions both =
        attention::attribute_row(attention::rounding_site_row(kernels[pass], row.shape, row.q, row.k, row.v, 0));
    result.values[pass][0] = values_of(both.fp32_output, o.head_dim);
    result.values[pass][1] = values_of(both.bf16_output, o.head_dim);
    if (pass == 0)
      for (const working_real& x : both.fp32_output.exact) result.mean_abs_o += std::abs(x.convert_to<double>()) / o.head_dim;
  }
  return result;
}

constexpr const char* pass_names[] = {"standard", "stabilized"};
constexpr const char* output_names[] = {"fp32", "bf16"};

std::string csv_text(const std::vector<row_result>& rows) {
  std::string out = "row_kind,row,pass,output,site,contribution,contribution_away,alone,alone_away,mean_abs_o\n";
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (std::size_t pass = 0; pass < 2; ++pass)
      for (std::size_t output = 0; output < 2; ++output) {
        const site_values& v = rows[r].values[pass][output];
        for (std::size_t slot = 0; slot < v.contribution.size(); ++slot) {
          out += fmt::format("{},{},{},{},{},{},{},", rows[r].kind, r, pass_names[pass], output_names[output], slot_name(slot),
                             v.contribution[slot], v.away[slot]);
          out += slot < total_slot ? fmt::format("{},{},", v.alone[slot], v.alone_away[slot]) : std::string(",,");
          out += fmt::format("{}\n", rows[r].mean_abs_o);
        }
      }
  return out;
}

// Mean and 95% Student t interval of values; the interval is the mean alone for fewer than two.
struct interval {
  double mean = 0, low = 0, high = 0;
};
interval mean_interval(const std::vector<double>& xs) {
  interval out;
  if (xs.empty()) return out;
  for (const double x : xs) out.mean += x / static_cast<double>(xs.size());
  out.low = out.high = out.mean;
  if (xs.size() < 2) return out;
  double squares = 0;
  for (const double x : xs) squares += (x - out.mean) * (x - out.mean);
  const double n = static_cast<double>(xs.size());
  const double t = boost::math::quantile(boost::math::students_t(n - 1), 0.975);
  const double half = t * std::sqrt(squares / (n - 1) / n);
  return {out.mean, out.mean - half, out.mean + half};
}

// Over the random rows (those after the mechanism row): one slot's values.
template <class Field>
std::vector<double> random_rows(const std::vector<row_result>& rows, std::size_t pass, std::size_t output, std::size_t slot,
                                Field field) {
  std::vector<double> xs;
  for (std::size_t r = 1; r < rows.size(); ++r) xs.push_back(field(rows[r].values[pass][output])[slot]);
  return xs;
}

std::string with_interval(const interval& i) { return fmt::format("{:+.3g} [{:+.3g}, {:+.3g}]", i.mean, i.low, i.high); }

void print_table(const std::vector<row_result>& rows, std::size_t pass, std::size_t output) {
  std::printf("\n%s pass, %s O:\n", pass_names[pass], output == 0 ? "fp32 (before the bf16 conversion)" : "bf16 (the kernel's)");
  std::printf("  %-18s %11s %11s   %-36s %-36s %s\n", "site", "mech. row", "mech. away", "random rows: contribution [95% CI]",
              "away from zero [95% CI]", "alone");
  const auto contribution = [](const site_values& v) { return v.contribution; };
  const auto away = [](const site_values& v) { return v.away; };
  const auto alone = [](const site_values& v) { return v.alone; };
  for (std::size_t slot = 0; slot <= residual_slot; ++slot) {
    const site_values& mechanism = rows[0].values[pass][output];
    std::printf("  %-18s %+11.3g %+11.3g   %-36s %-36s %s\n", slot_name(slot).c_str(), mechanism.contribution[slot],
                mechanism.away[slot], with_interval(mean_interval(random_rows(rows, pass, output, slot, contribution))).c_str(),
                with_interval(mean_interval(random_rows(rows, pass, output, slot, away))).c_str(),
                slot < total_slot ? fmt::format("{:+.3g}", mean_interval(random_rows(rows, pass, output, slot, alone)).mean).c_str()
                                  : "");
  }
}

// A panel of the chart: the slots' mean contributions over the random rows, both passes.
svg::bar_panel contribution_panel(const std::vector<row_result>& rows, std::size_t output, const std::vector<std::size_t>& slots,
                                  const std::string& title) {
  const char* colors[] = {"#c0392b", "#2471a3"};
  svg::bar_panel panel{title, "mean error per element of O (O units)", {}, {}};
  for (const std::size_t slot : slots) panel.groups.push_back(slot_name(slot));
  for (std::size_t pass = 0; pass < 2; ++pass) {
    svg::bar_series series{std::string(pass_names[pass]) + " (95% CI)", colors[pass], {}, {}, {}};
    for (const std::size_t slot : slots) {
      const interval i = mean_interval(random_rows(rows, pass, output, slot, [](const site_values& v) { return v.contribution; }));
      series.value.push_back(i.mean), series.low.push_back(i.low), series.high.push_back(i.high);
    }
    panel.bars.push_back(std::move(series));
  }
  return panel;
}

std::string bar_chart(const std::vector<row_result>& rows, const attribution_options& o) {
  std::vector<std::size_t> every, small;
  for (std::size_t slot = 0; slot <= residual_slot; ++slot) {
    every.push_back(slot);
    if (slot != static_cast<std::size_t>(rounding_site::p_to_bf16) && slot != static_cast<std::size_t>(rounding_site::output_bf16) &&
        slot != total_slot)
      small.push_back(slot);
  }
  const std::string rows_text = fmt::format("{} random rows, {} keys, d {}", rows.size() - 1, o.keys, o.head_dim);
  return svg::bar_chart({contribution_panel(rows, 0, every, "fp32 O: kernel O − O with the site exact, mean of " + rows_text),
                         contribution_panel(rows, 0, small, "fp32 O, the same without p_to_bf16 and total (a finer scale)"),
                         contribution_panel(rows, 1, every, "bf16 O (the kernel's output): the same contributions")},
                        1000);
}

}  // namespace

int attribution_command(const arguments& args) {
  attribution_options options;
  const std::vector<option> table = option_table(options);
  if (asks_for_help(args)) return print_help(attribution_help, table);
  read_only_options(args, "bias attribution", table);
  if (options.ties > options.keys)
    fail(fmt::format("bias attribution: --ties {} exceeds --keys {}", options.ties, options.keys));
  try {
    ptx::mufu_tables::shared();
  } catch (const mufu_data_error& error) {
    fail(std::string("bias: ") + error.what());
  }
  // The single kernel, as PyTorch launches it when the call's row blocks fill 80% of the GPU (a B x H of 256).
  attention_shape launch{1, 256, 1, options.keys, options.head_dim, false};
  std::vector<row_result> rows;
  tie_row mechanism;
  mechanism.keys = options.keys, mechanism.head_dim = options.head_dim, mechanism.v_mean = options.v_mean;
  mechanism.v_sd = options.v_sd, mechanism.seed = options.seed;
  mechanism.tie_positions = evenly_spaced(options.keys, options.ties);
  rows.push_back(attribute(build_tie_row(mechanism), launch, options, "mechanism"));
  std::mt19937_64 generator(options.seed + 1);
  for (int r = 0; r < options.rows; ++r) rows.push_back(attribute(random_row(options, generator), launch, options, "random"));

  std::printf("rows: the mechanism row (%d keys, %d tied at the max 8, V mean %s sd %s, seed %llu) and %d random rows "
              "(Q, K about N(0, 1), %d scores tied at the max, V the same; generator seed %llu); d = %d\n",
              options.keys, options.ties, fmt::format("{}", options.v_mean).c_str(), fmt::format("{}", options.v_sd).c_str(),
              static_cast<unsigned long long>(options.seed), options.rows, options.ties,
              static_cast<unsigned long long>(options.seed + 1), options.head_dim);
  double mean_abs = 0;
  for (std::size_t r = 1; r < rows.size(); ++r) mean_abs += rows[r].mean_abs_o / static_cast<double>(rows.size() - 1);
  std::printf("mean |O| per element: mechanism row %s, random rows %s; stabilized: beta %s, eps %s\n",
              fmt::format("{:.4g}", rows[0].mean_abs_o).c_str(), fmt::format("{:.4g}", mean_abs).c_str(),
              fmt::format("{:g}", to_double(options.rule.beta)).c_str(), fmt::format("{:g}", to_double(options.rule.epsilon)).c_str());
  std::printf("errors per element of O (summed over the row, / d): contribution = kernel O - O with that site exact;\n"
              "away = the error times sign(exact O), > 0 away from zero; alone = O with only that site rounding - exact O\n");
  for (std::size_t pass = 0; pass < 2; ++pass)
    for (std::size_t output = 0; output < 2; ++output) print_table(rows, pass, output);
  if (!options.csv.empty()) write_file(options.csv, csv_text(rows));
  if (!options.svg.empty()) write_file(options.svg, bar_chart(rows, options));
  return 0;
}

}  // namespace bitexact::cli
