// `bitexact bias statistics`: the mean signed error of O and of delta =
// rowsum(dO O) over many synthetic query rows (testing/synthetic_heads.hpp),
// per scenario cell, for the standard kernel and the stabilized ones
// (Qiu & Yao, Algorithm 3), with 95% confidence intervals; CSV and an SVG plot.
// --inputs e4m3 runs the same analysis on bitexact's FP8 kernel, its heads
// quantised per tensor and the exact output computed from the dequantised ones.
#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <bitexact/attention/flash_backward.hpp>
#include <bitexact/attention/flash_forward.hpp>
#include <bitexact/attention/kernels.hpp>
#include <bitexact/hardware/mufu_tables.hpp>
#include <bitexact/testing/synthetic_heads.hpp>

#include "bias_rows.hpp"
#include "bias_statistics.hpp"
#include "cli.hpp"
#include <bitexact/testing/npy.hpp>
#include "svg_plot.hpp"

namespace bitexact::cli {
namespace {

using attention::attention_shape;
using attention::flash_kernel;
using testing::head_spec;
using testing::max_kind;
using testing::tie_placement;

constexpr std::string_view statistics_help =
    "usage: bitexact bias statistics [--head-dims LIST] [--keys LIST] [--rows R] [--heads H]\n"
    "           [--ties LIST] [--placements LIST] [--maxima LIST] [--v-means LIST]\n"
    "           [--betas LIST] [--eps X] [--across-blocks] [--seed N] [--threads T]\n"
    "           [--csv FILE] [--svg FILE] [--save-heads DIR] [--backward] [--inputs bf16|e4m3]\n"
    "\n"
    "Does the paper's stabilized softmax (Qiu & Yao, Algorithm 3) remove the rounding bias\n"
    "of attention's output? Over synthetic heads (include/bitexact/testing/synthetic_heads.hpp,\n"
    "docs/bias.md) whose query rows each have t scores tied at the row maximum, it runs the\n"
    "GPU kernel bit for bit (pytorch_sdpa_flash_sm90, single-split path) and its stabilized\n"
    "variants (pytorch_sdpa_flash_sm90_stabilized, per K/V block; with --across-blocks also\n"
    "..._stabilized_across_blocks) and compares each query row with the exact output\n"
    "O_exact = softmax(scale Q K^T) V in double (scale the kernel's fp32 1/sqrt(d)):\n"
    "  o       mean over the row's columns of O - O_exact, O the kernel's bf16 output\n"
    "  o_away  the same with each column's error signed by O_exact (> 0: away from zero)\n"
    "  delta   sum over the columns of dO (O - O_exact): the part of the error of\n"
    "          delta = rowsum(dO O) that O makes (not the backward kernel's own rounding)\n"
    "  o_fp32  as o, for O in fp32 before the kernel converts it to bf16\n"
    "  p_one   keys whose bf16 P-bar is exactly 1 when P-bar V takes them\n"
    "Per scenario cell (head dim, keys, maximum, placement, ties, V mean) and kernel it\n"
    "prints the mean of each over the cell's rows with the half width of its 95% confidence\n"
    "interval. The independent unit (units) is a tie group of a head, not a row: the rows of\n"
    "a group share their tied keys and V rows (a sink head is one group), so the interval is\n"
    "t(0.975, units - 1) s / sqrt(units), s the standard deviation of the units' means.\n"
    "\n"
    "--inputs e4m3 runs the same analysis on bitexact's FP8 kernel: bitexact_flash_fp8_sm90, its\n"
    "pv_fp32_add variant (each K/V block's P V from +0, then one FADD into O), that variant's\n"
    "p_bar_sum (l summed from the e4m3 P-bar that P V takes) and\n"
    "bitexact_flash_fp8_sm90_stabilized (with --across-blocks also ..._stabilized_across_blocks),\n"
    "the given betas and eps, e4m3 Q, K, V with per-tensor descales, scale_s 256, descale_s 1/256,\n"
    "scale_o 1 (our PyTorch operator's defaults), bf16 O. The same generator and cells; the\n"
    "placements refer to that kernel's K/V block (128 keys at head dim 64 and 128). Each head's\n"
    "Q, K and V are quantised as Transformer Engine's per-tensor recipe, each tensor with\n"
    "  descale = RN(amax / 448) in fp32 (amax its largest |x|; 1 if amax is 0)\n"
    "  x8      = cvt.rn.satfinite.e4m3(RN(x / descale)): div.rn.f32, then e4m3 round to\n"
    "            nearest even, saturating at +-448\n"
    "and O_exact is computed in double from the dequantised inputs x8 * descale, so that the\n"
    "errors measure the kernel's rounding, not the quantisation's. Then p_one counts keys whose\n"
    "e4m3 P-bar is the row max's, e4m3(scale_s) = 256, and the table adds\n"
    "  tied    per cell, rows whose exact scores on the dequantised inputs still have exactly\n"
    "          t maxima (tied keys are identical K rows; quantisation keeps them tied)\n"
    "  lost    per kernel, rows whose O lost more than half its magnitude, sum |O| <\n"
    "          sum |O_exact| / 2: the stabilized rule can push every P-bar of a block below\n"
    "          e4m3's smallest subnormal (RN(P * 256) < 2^-10) when the repeated max is large;\n"
    "          such rows stay in every mean\n"
    "(CSV: tied_rows, o_lost_rows). --backward and --save-heads take bf16 inputs only.\n"
    "\n"
    "options (LIST: comma-separated values):\n"
    "{options}\n"
    "\n"
    "Head h of cell c (cells in the order head dim, keys, maximum, placement, ties, V mean,\n"
    "each as listed) is generator head r * cells + c for replicate r, so that a run with more\n"
    "heads (cuda/attention/bias_statistics.py on the GPU) repeats this run's heads first.\n"
    "The kernel's exponentials are MUFU table lookups: the command needs the data folder's\n"
    "mufu_*.bxt (as bitexact attention does). Exit status: 0 done; 2 bad arguments or output\n"
    "that could not be written, with one line on stderr. docs/bias.md shows the default run.\n";

struct statistics_options {
  std::vector<int> head_dims{64}, key_counts{512};
  int rows = 32, heads = 16;
  std::vector<int> ties{1, 2, 4, 8, 16, 32, 64};
  std::vector<tie_placement> placements{testing::every_tie_placement.begin(), testing::every_tie_placement.end()};
  std::vector<max_kind> maxima{testing::every_max_kind.begin(), testing::every_max_kind.end()};
  std::vector<double> v_means{-1, 1};
  std::vector<double> betas{2, 7};
  double eps = 1e-3;
  bool across_blocks = false;
  bool backward = false;
  format inputs = bf16;  // or e4m3: bitexact's FP8 kernel on the heads quantised per tensor
  std::uint64_t seed = 1;
  int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::string csv, svg, save_heads;
};

// A list whose items are parsed one by one; a repeated item is refused (it would count its rows twice).
template <class T, class Parse>
std::vector<T> list_of(std::string_view text, Parse parse) {
  std::vector<T> items;
  for (const std::string_view item : split_list(text)) {
    const T parsed = parse(item);
    if (std::find(items.begin(), items.end(), parsed) != items.end()) throw bad_value{"names " + quoted_input(item) + " twice"};
    items.push_back(parsed);
  }
  return items;
}

template <class Enum, std::size_t N>
std::vector<Enum> enums_named(std::string_view list, const std::array<Enum, N>& every) {
  return list_of<Enum>(list, [&](std::string_view text) {
    std::string names;
    for (const Enum e : every) {
      if (testing::name_of(e) == text) return e;
      names += (names.empty() ? "" : ", ") + std::string(testing::name_of(e));
    }
    refuse_value(names, text);
  });
}

std::vector<option> option_table(statistics_options& o) {
  return {
      {"--head-dims", "LIST", "64 and/or 128 (default 64)",
       [&](std::string_view list) {
         o.head_dims = list_of<int>(list, [](std::string_view x) {
           const int d = parse_integer(x, 64, 128, "64 and/or 128");
           if (d != 64 && d != 128) refuse_value("64 and/or 128", x);
           return d;
         });
       }},
      {"--keys", "LIST", "keys N per head, multiples of 128 from 128 to 4096 (default 512)",
       [&](std::string_view list) {
         o.key_counts = list_of<int>(list, [](std::string_view x) {
           const int n = parse_integer(x, 128, 4096, "multiples of 128 from 128 to 4096");
           if (n % 128 != 0) refuse_value("multiples of 128 from 128 to 4096", x);
           return n;
         });
       }},
      {"--rows", "R", "query rows per head, 1 to 4096 (default 32)",
       [&](std::string_view r) { o.rows = parse_integer(r, 1, 4096, "an integer from 1 to 4096"); }},
      {"--heads", "H", "heads per cell, 1 to 10000 (default 16)",
       [&](std::string_view h) { o.heads = parse_integer(h, 1, 10000, "an integer from 1 to 10000"); }},
      {"--ties", "LIST", "keys tied at each row's max, 1 to 64 (default 1,2,4,8,16,32,64)",
       [&](std::string_view list) {
         o.ties = list_of<int>(list, [](std::string_view x) { return parse_integer(x, 1, 64, "integers from 1 to 64"); });
       }},
      {"--placements", "LIST",
       "one_block (the ties in one K/V block), across_blocks (tie k of group\n"
       "g in block (g + k) mod blocks), sink (keys 0..t-1 for every row)\n"
       "(default all three)",
       [&](std::string_view list) { o.placements = enums_named(list, testing::every_tie_placement); }},
      {"--maxima", "LIST",
       "the row max lambda (unscaled): positive [4, 32), small_positive\n"
       "[2^-11, 2^-7), negative -[4, 32), negative_near_zero -[2^-11, 2^-7)\n"
       "(default all four)",
       [&](std::string_view list) { o.maxima = enums_named(list, testing::every_max_kind); }},
      {"--v-means", "LIST", "V's (and dO's) mean: -1, -0.5, 0, 0.5, 1 (default -1,1)",
       [&](std::string_view list) {
         o.v_means = list_of<double>(list, [](std::string_view x) {
           const double m = parse_decimal(x, "values among -1, -0.5, 0, 0.5, 1");
           if (m != -1 && m != -0.5 && m != 0 && m != 0.5 && m != 1) refuse_value("values among -1, -0.5, 0, 0.5, 1", x);
           return m;
         });
       }},
      {"--betas", "LIST", "the stabilized kernels' beta, each > 1 (default 2,7)",
       [&](std::string_view list) {
         o.betas = list_of<double>(list, [](std::string_view x) {
           const double beta = parse_decimal(x, "decimals above 1 such as 2");
           if (!(beta > 1) || static_cast<double>(static_cast<float>(beta)) != beta)
             refuse_value("decimals above 1 that are fp32 values, such as 2 or 7", x);
           return beta;
         });
       }},
      {"--eps", "X", "their epsilon, >= 0 (default 0.001, the presets')",
       [&](std::string_view x) { o.eps = parse_decimal(x, "a decimal of at least 0 such as 0.001", 0); }},
      {"--across-blocks", "", "also the rule applied across K/V blocks, for each beta",
       [&](std::string_view) { o.across_blocks = true; }},
      {"--backward", "",
       "also the backward pass: each kernel's O and L through PyTorch's flash\n"
       "backward (attention/flash_backward.hpp, bit for bit), dO the head's,\n"
       "against the exact gradients in double; a second table of\n"
       "  delta_bwd  the backward kernel's delta minus the exact rowsum(dO O):\n"
       "             the paper's delta_lp - delta_hp, per query row\n"
       "  dq         mean over the row's columns of dQ - dQ_exact\n"
       "  dk, dv     the same for the tied keys' rows of dK and dV (a sink\n"
       "             head's first t keys), in the tie group's unit\n"
       "(and their columns in the CSV)",
       [&](std::string_view) { o.backward = true; }},
      {"--inputs", "FORMAT",
       "bf16 (default: PyTorch's flash kernel on the heads as generated) or\n"
       "e4m3 (bitexact's FP8 kernel on them quantised per tensor; above)",
       [&](std::string_view f) {
         if (f == "bf16") o.inputs = bf16;
         else if (f == "e4m3") o.inputs = e4m3;
         else refuse_value("bf16 or e4m3 (the FP8 kernel's presets take e4m3 Q, K and V)", f);
       }},
      {"--seed", "N", "the generator's seed (0 to 2^64 - 1; default 1)", [&](std::string_view n) { o.seed = parse_seed(n); }},
      {"--threads", "T",
       "heads run on T threads (default: the host's cores); the results do\nnot depend on it",
       [&](std::string_view t) { o.threads = parse_integer(t, 1, 1024, "an integer from 1 to 1024"); }},
      {"--csv", "FILE",
       "one line per cell and kernel: kernel, beta, eps, head_dim, keys,\n"
       "max_kind, placement, ties, v_mean, rows, clusters (units), then mean\n"
       "and ci95 (half width) of o, o_away, delta, o_fp32, and p_one_mean",
       [&](std::string_view file) { o.csv = file; }},
      {"--svg", "FILE",
       "plot o and delta against the ties, standard vs stabilized, one panel\n"
       "per maximum, for the first --v-means value and the first head dim and\n"
       "keys; 95% intervals as whiskers",
       [&](std::string_view file) { o.svg = file; }},
      {"--save-heads", "DIR",
       "write every head's q, k, v, d_o and each kernel's o as .npy (uint16\n"
       "bf16 patterns [heads, rows or keys, d]) and heads.csv (head, cell);\n"
       "needs one head dim and one keys value",
       [&](std::string_view dir) { o.save_heads = dir; }},
  };
}

// One kernel the statistics compare: its name as the CSV writes it, beta (0 for the standard one), and
// its preset for a shape.
struct variant {
  std::string name;
  double beta = 0;
  bool across_blocks = false;
  // --inputs e4m3: the FP8 preset's description (the name is its name), resolved per head with its scales.
  std::optional<attention::kernel_description> fp8;

  std::string label() const {
    return beta == 0 ? name : fmt::format("{} beta {}", name, beta);
  }
  std::string file_tag() const { return beta == 0 ? name : fmt::format("{}_beta{}", name, beta); }

  flash_kernel kernel(const attention_shape& shape, double eps, const attention::fp8_scales& scales = {}) const {
    // The single-split kernel, as PyTorch launches it when the call's row blocks fill 80% of the GPU
    // (256 heads), which is the path our GPU kernels implement.
    attention_shape launch = shape;
    launch.heads = 256;
    if (fp8) return fp8_kernel(launch, eps, scales);
    if (beta == 0) return attention::pytorch_sdpa_flash_sm90(launch);
    const attention::stabilized_max rule{from_host(static_cast<float>(beta)), from_host(static_cast<float>(eps)), false};
    return across_blocks ? attention::pytorch_sdpa_flash_sm90_stabilized_across_blocks(launch, {}, rule)
                         : attention::pytorch_sdpa_flash_sm90_stabilized(launch, {}, rule);
  }

 private:
  // The FP8 preset with the run's beta and eps in place of its rule's, and the head's scales.
  flash_kernel fp8_kernel(const attention_shape& launch, double eps, const attention::fp8_scales& scales) const {
    attention::kernel_description description = *fp8;
    if (beta != 0)
      description.arithmetic.stabilize =
          attention::stabilized_max{from_host(static_cast<float>(beta)), from_host(static_cast<float>(eps)), across_blocks};
    attention::call_options call;
    call.fp8 = scales;
    return attention::resolve(description, launch, call);
  }
};

std::vector<variant> variants_of(const statistics_options& o) {
  if (o.inputs == e4m3) {
    const auto named = [](attention::kernel_description d, double beta, bool across) {
      return variant{d.name, beta, across, std::move(d)};
    };
    std::vector<variant> out{named(attention::bitexact_flash_fp8_sm90_description(), 0, false),
                             named(attention::bitexact_flash_fp8_sm90_pv_fp32_add_description(), 0, false),
                             named(attention::bitexact_flash_fp8_sm90_pv_fp32_add_p_bar_sum_description(), 0, false)};
    for (const double beta : o.betas) out.push_back(named(attention::bitexact_flash_fp8_sm90_stabilized_description(), beta, false));
    if (o.across_blocks)
      for (const double beta : o.betas)
        out.push_back(named(attention::bitexact_flash_fp8_sm90_stabilized_across_blocks_description(), beta, true));
    return out;
  }
  std::vector<variant> out{{"standard", 0, false, std::nullopt}};
  for (const double beta : o.betas) out.push_back({"stabilized", beta, false, std::nullopt});
  if (o.across_blocks)
    for (const double beta : o.betas) out.push_back({"across_blocks", beta, true, std::nullopt});
  return out;
}

// The kernel's K/V block for a head dim, which the placements refer to: PyTorch's flash kernel's, or
// (e4m3) the FP8 kernel's, 128 keys at both head dims.
int tile_of(int head_dim, format inputs) {
  const attention_shape shape{1, 256, 128, 4096, head_dim, false};
  if (inputs == e4m3) return attention::resolve(attention::bitexact_flash_fp8_sm90_description(), shape).block_n;
  return attention::pytorch_sdpa_flash_sm90(shape).block_n;
}

std::vector<head_spec> cells_of(const statistics_options& o) {
  std::vector<head_spec> cells;
  for (const int d : o.head_dims)
    for (const int keys : o.key_counts)
      for (const max_kind maximum : o.maxima)
        for (const tie_placement placement : o.placements)
          for (const int ties : o.ties)
            for (const double v_mean : o.v_means) {
              const head_spec spec{d, keys, o.rows, tile_of(d, o.inputs), maximum, placement, ties, v_mean};
              if (ties > spec.tile)
                fail(fmt::format("bias statistics: --ties {} exceeds head dim {}'s K/V block of {} keys", ties, d, spec.tile));
              cells.push_back(spec);
            }
  return cells;
}

// What one kernel's run of one head leaves per row.
struct row_results {
  std::vector<statistics::row_errors> errors;
  // --backward: per row, the kernel's delta and dQ against the exact ones; per tied key, its group
  // and the mean errors of its dK and dV rows.
  std::vector<double> delta_bwd, dq;
  std::vector<int> key_group;
  std::vector<double> dk, dv;
  std::vector<double> o_fp32;  // the mean error of O before its bf16 conversion
  std::vector<int> p_one;
  std::vector<int> group;  // the row's tie group
  int o_lost_rows = 0;     // rows whose O lost more than half its magnitude (reported for e4m3)
};

// Per row, the keys whose P-bar is the row max's (bf16 1; an fp8 kernel's e4m3(scale_s)), and O in fp32 at
// the end of the row.
struct row_recorder {
  std::size_t head_dim;
  std::vector<int> p_one;
  std::vector<float32> o_fp32;
  float8_e4m3 p_bar_of_max{};  // fp8 kernels: e4m3(scale_s)
  void on(const attention::softmax_block_event& e) {
    for (const bfloat16 p : e.p_bf16) p_one[static_cast<std::size_t>(e.row)] += p.bits == 0x3F80 ? 1 : 0;
    for (const float8_e4m3 p : e.p_e4m3) p_one[static_cast<std::size_t>(e.row)] += p.bits == p_bar_of_max.bits ? 1 : 0;
  }
  void on(const attention::row_end_event& e) {
    std::copy(e.o.begin(), e.o.end(), o_fp32.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(e.row) * head_dim));
  }
};

struct head_run {
  std::vector<row_results> by_variant;
  std::vector<std::vector<bfloat16>> o;  // by variant, kept for --save-heads
  std::size_t rows_with_t_maxima = 0;    // e4m3: rows whose exact scores have exactly t maxima
};

// The backward pass's errors of one kernel's O and L (--backward): PyTorch's flash backward on them,
// as the single-split call of 256 heads runs it (one deterministic dQ buffer), against the exact gradients.
void backward_errors(const testing::synthetic_head& head, const attention_shape& shape, double scale,
                     std::span<const bfloat16> o, std::span<const float32> lse, const statistics::exact_gradients& exact,
                     row_results& results) {
  const std::size_t d = static_cast<std::size_t>(shape.head_dim), rows = static_cast<std::size_t>(shape.query_rows);
  attention_shape launch = shape;
  launch.heads = 256;
  // On the thread that took the head: --threads shares out the heads.
  const attention::backward_gradients g =
      attention::flash_backward_head(attention::pytorch_sdpa_flash_sm90_backward(launch, scale), shape, head.q, head.k,
                                     head.v, o, lse, head.d_o, no_observer{}, 1);
  const auto mean_error = [d](std::span<const bfloat16> got, std::span<const double> want) {
    double sum = 0;
    for (std::size_t c = 0; c < d; ++c) sum += to_double(got[c]) - want[c];
    return sum / static_cast<double>(d);
  };
  for (std::size_t i = 0; i < rows; ++i) {
    results.delta_bwd.push_back(to_double(g.delta[i]) - exact.delta[i]);
    results.dq.push_back(mean_error(std::span(g.dq).subspan(i * d, d), std::span(exact.dq).subspan(i * d, d)));
  }
  for (std::size_t j = 0; j < head.group_of_key.size(); ++j) {
    if (head.group_of_key[j] < 0) continue;  // background keys: no tie
    results.key_group.push_back(head.group_of_key[j]);
    results.dk.push_back(mean_error(std::span(g.dk).subspan(j * d, d), std::span(exact.dk).subspan(j * d, d)));
    results.dv.push_back(mean_error(std::span(g.dv).subspan(j * d, d), std::span(exact.dv).subspan(j * d, d)));
  }
}

// What a head's kernels are compared with: each row's exact O, and (e4m3) how many rows have exactly t
// maxima.
struct head_reference {
  std::vector<std::vector<double>> o;
  std::size_t rows_with_t_maxima = 0;
};

head_reference bf16_reference(const testing::synthetic_head& head, double scale) {
  const std::size_t d = static_cast<std::size_t>(head.spec.head_dim), rows = static_cast<std::size_t>(head.spec.rows);
  head_reference out{std::vector<std::vector<double>>(rows), 0};
  for (std::size_t i = 0; i < rows; ++i)
    out.o[i] = statistics::exact_attention_row(std::span(head.q).subspan(i * d, d), head.k, head.v, scale);
  return out;
}

// --inputs e4m3: a head's Q, K and V quantised per tensor, and the scales the FP8 kernel takes with them.
struct e4m3_operands {
  statistics::e4m3_tensor q, k, v;
  attention::fp8_scales scales;
};

e4m3_operands quantised(const testing::synthetic_head& head) {
  e4m3_operands out{statistics::quantise_e4m3(head.q), statistics::quantise_e4m3(head.k), statistics::quantise_e4m3(head.v), {}};
  out.scales.descale_q = out.q.descale;
  out.scales.descale_k = out.k.descale;
  out.scales.descale_v = out.v.descale;
  // Our PyTorch operator's defaults (python/bitexact/torch.py): P-bar = e4m3(RN(P * 256)), undone in O's
  // factor; scale_o 1.
  out.scales.scale_s = from_host(256.0f);
  out.scales.descale_s = from_host(1.0f / 256.0f);
  return out;
}

// The exact output from the dequantised inputs x8 * descale: the raw e4m3 scores (exact) times
// descale_q * descale_k (exact in double, two 24-bit significands), so that the maxima are counted on
// exact values; V dequantised exactly.
head_reference e4m3_reference(const e4m3_operands& x, const head_spec& spec, double scale) {
  const std::size_t d = static_cast<std::size_t>(spec.head_dim), rows = static_cast<std::size_t>(spec.rows);
  const double descale_qk = to_double(x.q.descale) * to_double(x.k.descale);
  std::vector<double> v(x.v.bits.size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = statistics::e4m3_values()[x.v.bits[i]] * to_double(x.v.descale);
  head_reference out;
  for (std::size_t i = 0; i < rows; ++i) {
    std::vector<double> scores = statistics::e4m3_raw_scores(std::span(x.q.bits).subspan(i * d, d), x.k.bits);
    const double max = *std::max_element(scores.begin(), scores.end());
    out.rows_with_t_maxima += std::count(scores.begin(), scores.end(), max) == spec.ties ? 1 : 0;
    for (double& score : scores) score *= descale_qk;
    out.o.push_back(statistics::softmax_times_v(std::span<const double>(scores), std::span<const double>(v), d, scale));
  }
  return out;
}

// sum |O| below half of sum |O_exact|: the row lost most of its output (fp8 P-bar flushed to 0).
bool lost_half(std::span<const double> o, std::span<const double> o_exact) {
  double got = 0, want = 0;
  for (std::size_t c = 0; c < o.size(); ++c) got += std::abs(o[c]), want += std::abs(o_exact[c]);
  return got < 0.5 * want;
}

// One kernel on one head: bf16 as generated, or (x8) its e4m3 operands; O, L and what the recorder saw.
struct kernel_output {
  std::vector<bfloat16> o;
  std::vector<float32> lse;
  row_recorder recorder;
};

kernel_output run_kernel(const flash_kernel& kernel, const testing::synthetic_head& head,
                         const std::optional<e4m3_operands>& x8) {
  const head_spec& spec = head.spec;
  const std::size_t d = static_cast<std::size_t>(spec.head_dim), rows = static_cast<std::size_t>(spec.rows);
  const attention_shape shape{1, 1, spec.rows, spec.keys, spec.head_dim, false};
  kernel_output out{std::vector<bfloat16>(rows * d), std::vector<float32>(rows),
                    row_recorder{d, std::vector<int>(rows, 0), std::vector<float32>(rows * d), {}}};
  if (!x8) {
    attention::flash_forward_head(kernel, shape, head.q, head.k, head.v, out.o, out.lse, out.recorder);
    return out;
  }
  out.recorder.p_bar_of_max = ptx::cvt_rn_satfinite_e4m3_f32(kernel.p_scale);
  attention::flash_forward_head(kernel, shape, std::span<const std::uint8_t>(x8->q.bits),
                                std::span<const std::uint8_t>(x8->k.bits), std::span<const std::uint8_t>(x8->v.bits),
                                std::span<bfloat16>(out.o), std::span<float32>(out.lse), out.recorder);
  return out;
}

head_run run_head(const testing::synthetic_head& head, const std::vector<variant>& variants, double eps, bool keep_o,
                  bool backward) {
  const head_spec& spec = head.spec;
  const std::size_t d = static_cast<std::size_t>(spec.head_dim), rows = static_cast<std::size_t>(spec.rows);
  const attention_shape shape{1, 1, spec.rows, spec.keys, spec.head_dim, false};
  const bool fp8 = variants.front().fp8.has_value();
  // The call's scale, fp32 1/sqrt(d) (an fp8 kernel folds its descales into its own copy).
  const double scale = to_double(from_host(static_cast<float>(1.0 / std::sqrt(static_cast<double>(spec.head_dim)))));
  std::optional<e4m3_operands> x8;
  if (fp8) x8 = quantised(head);
  const head_reference exact = fp8 ? e4m3_reference(*x8, spec, scale) : bf16_reference(head, scale);
  statistics::exact_gradients exact_grads;
  if (backward) exact_grads = statistics::exact_backward(head.q, head.k, head.v, head.d_o, d, scale);
  head_run out;
  out.rows_with_t_maxima = exact.rows_with_t_maxima;
  for (const variant& v : variants) {
    const flash_kernel kernel = fp8 ? v.kernel(shape, eps, x8->scales) : v.kernel(shape, eps);
    if (kernel.splits != 1) fail("bias statistics: internal: the preset chose split-KV");
    kernel_output run = run_kernel(kernel, head, x8);
    const std::vector<bfloat16>& o = run.o;
    const row_recorder& recorder = run.recorder;
    row_results results;
    std::vector<double> o_row(d);
    for (std::size_t i = 0; i < rows; ++i) {
      for (std::size_t c = 0; c < d; ++c) o_row[c] = to_double(o[i * d + c]);
      results.errors.push_back(statistics::errors_of(o_row, exact.o[i], std::span(head.d_o).subspan(i * d, d)));
      double fp32_error = 0;
      for (std::size_t c = 0; c < d; ++c) fp32_error += to_double(recorder.o_fp32[i * d + c]) - exact.o[i][c];
      results.o_fp32.push_back(fp32_error / static_cast<double>(d));
      results.o_lost_rows += lost_half(o_row, exact.o[i]) ? 1 : 0;
    }
    results.p_one = std::move(run.recorder.p_one);
    results.group = head.group_of_row;
    if (backward) backward_errors(head, shape, scale, o, run.lse, exact_grads, results);
    out.by_variant.push_back(std::move(results));
    if (keep_o) out.o.push_back(std::move(run.o));
  }
  return out;
}

// One cell's statistics for one kernel.
struct cell_statistics {
  statistics::clustered_sample o, o_away, delta, o_fp32;
  statistics::clustered_sample delta_bwd, dq, dk, dv;  // --backward
  double p_one_sum = 0;
  std::size_t o_lost_rows = 0;
};

// e4m3 adds the cell's rows with exactly t maxima and each kernel's rows that lost half of O; bf16 has neither.
std::string csv_header(bool backward, bool fp8) {
  return std::string("kernel,beta,eps,head_dim,keys,max_kind,placement,ties,v_mean,rows,clusters,o_mean,o_ci95,o_away_mean,"
                     "o_away_ci95,delta_mean,delta_ci95,o_fp32_mean,o_fp32_ci95,p_one_mean") +
         (backward ? ",delta_bwd_mean,delta_bwd_ci95,dq_mean,dq_ci95,dk_mean,dk_ci95,dv_mean,dv_ci95" : "") +
         (fp8 ? ",tied_rows,o_lost_rows\n" : "\n");
}

std::string csv_line(const variant& v, double eps, const head_spec& cell, const cell_statistics& s, bool backward,
                     std::optional<std::size_t> tied_rows) {
  const auto pair = [](const statistics::clustered_sample& x) { return fmt::format("{:.6e},{:.3e}", x.mean(), x.half_width()); };
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.4f}{}{}\n", v.name, v.beta == 0 ? "" : fmt::format("{}", v.beta),
                     v.beta == 0 ? "" : fmt::format("{}", eps), cell.head_dim, cell.keys, testing::name_of(cell.maximum),
                     testing::name_of(cell.placement), cell.ties, cell.v_mean, s.o.count(), s.o.clusters(), pair(s.o), pair(s.o_away),
                     pair(s.delta), pair(s.o_fp32), s.p_one_sum / static_cast<double>(s.o.count()),
                     backward ? fmt::format(",{},{},{},{}", pair(s.delta_bwd), pair(s.dq), pair(s.dk), pair(s.dv)) : "",
                     tied_rows ? fmt::format(",{},{}", *tied_rows, s.o_lost_rows) : "");
}

// A table on stdout: one line per cell, its columns (with the rows and units when `counts`, and the rows
// with exactly t maxima when `tied_rows` has them), then each kernel's `columns` side by side under
// `label`, centred in `width`.
template <class Columns>
void print_cells(const std::vector<head_spec>& cells, const std::vector<variant>& variants,
                 const std::vector<std::vector<cell_statistics>>& stats, bool counts, std::span<const std::size_t> tied_rows,
                 std::string_view label, int width, Columns&& columns) {
  std::string header = fmt::format("{:>3} {:>5} {:<18} {:<13} {:>4} {:>4}", "d", "keys", "maximum", "placement", "ties", "V");
  if (counts) header += fmt::format(" {:>6} {:>5}", "rows", "units");
  if (!tied_rows.empty()) header += fmt::format(" {:>6}", "tied");
  for (const variant& v : variants) header += fmt::format(" | {:^{}}", v.label() + std::string(label), width);
  std::printf("%s\n", header.c_str());
  for (std::size_t c = 0; c < cells.size(); ++c) {
    const head_spec& cell = cells[c];
    std::string line = fmt::format("{:>3} {:>5} {:<18} {:<13} {:>4} {:>4}", cell.head_dim, cell.keys,
                                   testing::name_of(cell.maximum), testing::name_of(cell.placement), cell.ties, cell.v_mean);
    if (counts) line += fmt::format(" {:>6} {:>5}", stats[c][0].o.count(), stats[c][0].o.clusters());
    if (!tied_rows.empty()) line += fmt::format(" {:>6}", tied_rows[c]);
    for (const cell_statistics& s : stats[c]) line += " | " + columns(s);
    std::printf("%s\n", line.c_str());
  }
}

// The table of O: each kernel's o and delta (mean +- ci95) and p_one; e4m3 adds the rows with exactly t
// maxima and each kernel's rows that lost half of O, each kernel's columns under its (long) preset name.
void print_table(const std::vector<head_spec>& cells, const std::vector<variant>& variants,
                 const std::vector<std::vector<cell_statistics>>& stats, std::span<const std::size_t> tied_rows) {
  const auto pair = [](const statistics::clustered_sample& x) { return fmt::format("{:+.2e}±{:.1e}", x.mean(), x.half_width()); };
  if (tied_rows.empty()) {
    print_cells(cells, variants, stats, true, {}, ": o, delta, p_one", 46, [&](const cell_statistics& s) {
      return fmt::format("{} {} {:5.2f}", pair(s.o), pair(s.delta), s.p_one_sum / static_cast<double>(s.o.count()));
    });
    return;
  }
  constexpr std::string_view label = ": o, delta, p_one, lost";
  int width = 0;
  for (const variant& v : variants) width = std::max(width, static_cast<int>(v.label().size() + label.size()));
  print_cells(cells, variants, stats, true, tied_rows, label, width, [&](const cell_statistics& s) {
    return fmt::format("{:^{}}", fmt::format("{} {} {:6.2f} {:4}", pair(s.o), pair(s.delta),
                                             s.p_one_sum / static_cast<double>(s.o.count()), s.o_lost_rows), width);
  });
}

// --backward: each kernel's delta_bwd, dq, dk and dv (mean +- ci95).
void print_backward_table(const std::vector<head_spec>& cells, const std::vector<variant>& variants,
                          const std::vector<std::vector<cell_statistics>>& stats) {
  std::printf("\nbackward (PyTorch's flash backward on each kernel's O and L, against the exact gradients)\n");
  const auto pair = [](const statistics::clustered_sample& x) { return fmt::format("{:+.1e}±{:.0e}", x.mean(), x.half_width()); };
  print_cells(cells, variants, stats, false, {}, ": delta_bwd, dq, dk, dv", 55, [&](const cell_statistics& s) {
    return fmt::format("{} {} {} {}", pair(s.delta_bwd), pair(s.dq), pair(s.dk), pair(s.dv));
  });
}

using bias::write_file;

// The plot: per maximum kind one panel of o and one of delta against log2(ties), one line per kernel and
// placement, whiskers the 95% intervals; the first v_mean, head dim and keys of the run.
std::string plot_of(const statistics_options& o, const std::vector<head_spec>& cells, const std::vector<variant>& variants,
                    const std::vector<std::vector<cell_statistics>>& stats) {
  const char* colors[] = {"#222222", "#c0392b", "#2471a3", "#27ae60", "#8e44ad", "#d35400", "#16a085"};
  std::vector<svg::panel> panels;
  const std::size_t lines_per_panel = variants.size() * o.placements.size();
  for (const bool delta : {false, true})
    for (const max_kind maximum : o.maxima) {
      svg::panel p{fmt::format("{}: {} maxima, head dim {}, {} keys, V mean {}", delta ? "delta" : "O", testing::name_of(maximum),
                               o.head_dims.front(), o.key_counts.front(), o.v_means.front()),
                   "keys tied at the row maximum",
                   delta ? "mean error of rowsum(dO·O)" : "mean error of O (bf16)", {}, {}, {}};
      for (const int ties : o.ties) p.x_ticks.emplace_back(std::log2(ties), std::to_string(ties));
      for (std::size_t v = 0; v < variants.size(); ++v)
        for (const tie_placement placement : o.placements) {
          svg::series line{fmt::format("{}, {}", variants[v].label(), testing::name_of(placement)),
                           colors[v % 7], placement != tie_placement::one_block, {}, {}, "6,3"};
          line.dash = placement == tie_placement::sink ? "2,3" : "6,3";
          for (std::size_t c = 0; c < cells.size(); ++c) {
            const head_spec& cell = cells[c];
            if (cell.maximum != maximum || cell.placement != placement || cell.v_mean != o.v_means.front() ||
                cell.head_dim != o.head_dims.front() || cell.keys != o.key_counts.front())
              continue;
            const statistics::clustered_sample& s = delta ? stats[c][v].delta : stats[c][v].o;
            // Each line a little to the side, so that the whiskers at one number of ties do not overlap.
            const double offset = 0.035 * (static_cast<double>(p.lines.size()) - 0.5 * static_cast<double>(lines_per_panel - 1));
            line.points.emplace_back(std::log2(cell.ties) + offset, s.mean());
            line.whiskers.push_back(s.half_width());
          }
          p.lines.push_back(std::move(line));
        }
      panels.push_back(std::move(p));
    }
  return svg::line_plot(panels, 1000, 420);
}

// Every head of the run and each kernel's O, as .npy, and the cells in heads.csv (row h: generator head h).
void save_heads(const std::string& dir, const std::vector<variant>& variants,
                const std::vector<testing::synthetic_head>& heads, const std::vector<head_run>& runs) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) fail("bias statistics: cannot create " + quoted_input(dir));
  const std::size_t count = heads.size(), d = static_cast<std::size_t>(heads.front().spec.head_dim);
  const std::size_t rows = static_cast<std::size_t>(heads.front().spec.rows), keys = static_cast<std::size_t>(heads.front().spec.keys);
  const auto write = [&](const std::string& name, std::size_t extent, auto&& element_of) {
    std::vector<std::uint16_t> bits;
    bits.reserve(count * extent * d);
    for (std::size_t h = 0; h < count; ++h)
      for (const bfloat16 x : element_of(h)) bits.push_back(static_cast<std::uint16_t>(x.bits));
    try {
      npy::write(dir + "/" + name + ".npy", "<u2", {count, extent, d}, bits.data());
    } catch (const npy::npy_error& e) {
      fail(std::string("bias statistics: ") + e.what());
    }
  };
  write("q", rows, [&](std::size_t h) -> const auto& { return heads[h].q; });
  write("k", keys, [&](std::size_t h) -> const auto& { return heads[h].k; });
  write("v", keys, [&](std::size_t h) -> const auto& { return heads[h].v; });
  write("d_o", rows, [&](std::size_t h) -> const auto& { return heads[h].d_o; });
  for (std::size_t v = 0; v < variants.size(); ++v)
    write("o_" + variants[v].file_tag(), rows, [&](std::size_t h) -> const auto& { return runs[h].o[v]; });
  std::string table = "head,head_dim,keys,rows,max_kind,placement,ties,v_mean\n";
  for (std::size_t h = 0; h < count; ++h) {
    const head_spec& s = heads[h].spec;
    table += fmt::format("{},{},{},{},{},{},{},{}\n", h, s.head_dim, s.keys, s.rows, testing::name_of(s.maximum),
                         testing::name_of(s.placement), s.ties, s.v_mean);
  }
  write_file(dir + "/heads.csv", table);
}

int statistics_command(const arguments& args) {
  statistics_options o;
  const std::vector<option> table = option_table(o);
  if (asks_for_help(args)) return print_help(statistics_help, table);
  read_only_options(args, "bias statistics", table);
  if (!o.save_heads.empty() && (o.head_dims.size() != 1 || o.key_counts.size() != 1))
    fail("bias statistics: --save-heads needs one --head-dims and one --keys value (the .npy files hold one shape)");
  if (o.inputs == e4m3 && o.backward)
    fail("bias statistics: --backward runs PyTorch's bf16 flash backward; it takes --inputs bf16, not e4m3");
  if (o.inputs == e4m3 && !o.save_heads.empty())
    fail("bias statistics: --save-heads writes bf16 heads; it takes --inputs bf16, not e4m3");
  const std::vector<head_spec> cells = cells_of(o);
  const std::vector<variant> variants = variants_of(o);
  try {
    ptx::mufu_tables::shared();
  } catch (const mufu_data_error& error) {
    fail(std::string("bias statistics: ") + error.what());
  }
  const std::size_t head_count = cells.size() * static_cast<std::size_t>(o.heads);
  std::vector<head_run> runs(head_count);
  std::vector<testing::synthetic_head> kept;  // --save-heads only
  const bool keep = !o.save_heads.empty();
  if (keep) kept.resize(head_count);
  std::atomic<std::size_t> next{0};
  const auto worker = [&] {
    for (std::size_t h = next++; h < head_count; h = next++) {
      // Replicate-major numbering: generator head r * cells + c.
      const std::size_t cell = h % cells.size();
      testing::synthetic_head head = testing::make_synthetic_head(cells[cell], o.seed, h);
      runs[h] = run_head(head, variants, o.eps, keep, o.backward);
      if (keep) kept[h] = std::move(head);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < o.threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& thread : pool) thread.join();

  std::vector<std::vector<cell_statistics>> stats(cells.size(), std::vector<cell_statistics>(variants.size()));
  const bool fp8 = o.inputs == e4m3;
  std::vector<std::size_t> tied_rows(fp8 ? cells.size() : 0, 0);  // e4m3: per cell
  for (std::size_t h = 0; h < head_count; ++h) {
    const std::size_t cell = h % cells.size(), replicate = h / cells.size();
    if (fp8) tied_rows[cell] += runs[h].rows_with_t_maxima;
    for (std::size_t v = 0; v < variants.size(); ++v) {
      cell_statistics& s = stats[cell][v];
      const row_results& r = runs[h].by_variant[v];
      s.o_lost_rows += static_cast<std::size_t>(r.o_lost_rows);
      for (std::size_t i = 0; i < r.errors.size(); ++i) {
        // A cluster per tie group of each head: groups are numbered below 16 in every head.
        const std::size_t cluster = replicate * testing::max_groups + static_cast<std::size_t>(r.group[i]);
        s.o.add(r.errors[i].o, cluster), s.o_away.add(r.errors[i].o_away, cluster);
        s.delta.add(r.errors[i].delta, cluster), s.o_fp32.add(r.o_fp32[i], cluster);
        s.p_one_sum += r.p_one[i];
        if (o.backward) s.delta_bwd.add(r.delta_bwd[i], cluster), s.dq.add(r.dq[i], cluster);
      }
      for (std::size_t j = 0; j < r.key_group.size(); ++j) {
        const std::size_t cluster = replicate * testing::max_groups + static_cast<std::size_t>(r.key_group[j]);
        s.dk.add(r.dk[j], cluster), s.dv.add(r.dv[j], cluster);
      }
    }
  }
  std::string csv = csv_header(o.backward, fp8);
  for (std::size_t c = 0; c < cells.size(); ++c)
    for (std::size_t v = 0; v < variants.size(); ++v)
      csv += csv_line(variants[v], o.eps, cells[c], stats[c][v], o.backward,
                      fp8 ? std::optional<std::size_t>(tied_rows[c]) : std::nullopt);
  print_table(cells, variants, stats, tied_rows);
  if (o.backward) print_backward_table(cells, variants, stats);
  if (!o.csv.empty()) write_file(o.csv, csv);
  if (!o.svg.empty()) write_file(o.svg, plot_of(o, cells, variants, stats));
  if (keep) save_heads(o.save_heads, variants, kept, runs);
  return 0;
}

}  // namespace

int bias_statistics_command(const arguments& args) { return statistics_command(args); }

}  // namespace bitexact::cli
