// The paper's P̄V rounding-bias mechanism (Qiu & Yao, section 3.3.2, eq. 5,
// Fig. 6) on one tie row (tie_row.hpp), as `bitexact bias mechanism` reports
// it and the teaching page shows it: the running Ō[0][col] and its error
// after each key (cumulative_error.hpp) under the paper's arithmetic and the
// H100 kernel's, standard softmax and stabilized; a summary per curve, the
// report the command prints, and its CSV. One place, so that the page's
// numbers are the command's.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "../trace/render.hpp"
#include "cumulative_error.hpp"
#include "flash_forward.hpp"
#include "kernels.hpp"
#include "paper_reference.hpp"
#include "tie_row.hpp"

namespace bitexact::attention {

struct mechanism_curve {
  std::string semantics;  // the preset whose arithmetic it follows: paper_reference or pytorch_sdpa_flash_sm90
  std::string pass;       // "standard" or "stabilized"
  cumulative_error_curve curve;
  bool kernel = false;    // the GPU kernel's fused steps, else the paper's additions
};

// The four curves of Ō[0][col]: paper standard, paper stabilized, kernel
// standard, kernel stabilized. The kernel is the single kernel as PyTorch
// launches it when the call's row blocks fill 80% of the GPU (a B x H of 256).
inline std::vector<mechanism_curve> mechanism_curves(const row_operands& row, int col) {
  attention_shape launch = row.shape;
  launch.heads = 256;
  const std::string paper(first_preset(preset_kind::paper_reference).name);
  const std::string kernel = pytorch_sdpa_flash_sm90_description().name;
  std::vector<mechanism_curve> curves;
  curves.push_back({paper, "standard",
                    paper_cumulative_error(paper_reference(row.shape), row.shape, row.q, row.k, row.v, 0, col)});
  curves.push_back({paper, "stabilized",
                    paper_cumulative_error(paper_reference_stabilized(row.shape), row.shape, row.q, row.k, row.v, 0, col)});
  curves.push_back({kernel, "standard",
                    kernel_cumulative_error(pytorch_sdpa_flash_sm90(launch), row.shape, row.q, row.k, row.v, 0, col),
                    true});
  curves.push_back({kernel, "stabilized",
                    kernel_cumulative_error(pytorch_sdpa_flash_sm90_stabilized(launch), row.shape, row.q, row.k, row.v, 0,
                                            col),
                    true});
  return curves;
}

// Each held event's error minus the previous held error (0 before the first).
inline std::vector<exact_rational> jumps_of(const cumulative_error_curve& curve) {
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

// The event's name in the CSV: a key is one fp32 addition in the paper's
// arithmetic, one fused tensor-core step in the kernel's.
inline std::string_view event_name(const accumulation_event& e, bool kernel) {
  switch (e.what) {
    case accumulation_event::kind::key: return kernel ? "tensor_core" : "add";
    case accumulation_event::kind::padding_step: return "padding_step";
    case accumulation_event::kind::rescale: return "rescale";
    case accumulation_event::kind::pv_to_bf16: return "pv_to_bf16";
    case accumulation_event::kind::output_update: return "o_update";
  }
  return "";
}

namespace detail {
inline double as_double(const exact_rational& x) { return x.convert_to<double>(); }
}  // namespace detail

// Every event of the curves, one CSV line each (exact rationals rounded to double).
inline std::string mechanism_csv(const std::vector<mechanism_curve>& curves) {
  using detail::as_double;
  std::string out = "semantics,pass,event,block,key,keys_added,p_bar_bits,p_bar,p_bar_is_one,v,value,exact,error,jump\n";
  for (const mechanism_curve& c : curves) {
    const std::vector<exact_rational> jumps = jumps_of(c.curve);
    for (std::size_t i = 0; i < c.curve.events.size(); ++i) {
      const accumulation_event& e = c.curve.events[i];
      out += fmt::format("{},{},{},{},", c.semantics, c.pass, event_name(e, c.kernel), e.block);
      if (e.what == accumulation_event::kind::key)
        out += fmt::format("{},{},0x{:04X},{},{},{}", e.key, e.keys_added, e.p_bar.bits, to_double(e.p_bar),
                           e.p_bar_is_one() ? 1 : 0, to_double(e.v));
      else
        out += fmt::format(",{},,,,", e.keys_added);
      if (e.value_held)
        out += fmt::format(",{},{},{},{}\n", as_double(e.value), as_double(e.exact), as_double(e.error()),
                           as_double(jumps[i]));
      else
        out += ",,,,\n";
    }
  }
  return out;
}

// One curve in three or four lines: the P̄ = 1 keys, the final error, how the
// steps rounded, the part made where a P̄ = 1 key enters, the largest jumps.
inline std::string mechanism_summary(const mechanism_curve& c) {
  using detail::as_double;
  using kind = accumulation_event::kind;
  const bool kernel = c.kernel;
  const std::vector<exact_rational> jumps = jumps_of(c.curve);
  int ones = 0, down = 0, up = 0, exact = 0, steps_with_one = 0;
  exact_rational at_ones = 0, elsewhere = 0;
  bool step_has_one = false;
  for (std::size_t i = 0; i < c.curve.events.size(); ++i) {
    const accumulation_event& e = c.curve.events[i];
    if (e.p_bar_is_one()) ++ones, step_has_one = true;
    if (!e.value_held) continue;
    if (e.what == kind::key || e.what == kind::padding_step) {
      (jumps[i] < 0 ? down : jumps[i] > 0 ? up : exact) += 1;
      if (step_has_one) at_ones += jumps[i], ++steps_with_one;
      else elsewhere += jumps[i];
    } else {
      elsewhere += jumps[i];
    }
    step_has_one = false;
  }
  std::string out = fmt::format(
      "  {:<10} P-bar = 1 at {} keys; final error of O-bar {:.6g} (value {:.9g}, exact {:.9g})\n", c.pass, ones,
      as_double(c.curve.final_error()), as_double(c.curve.events.back().value), as_double(c.curve.events.back().exact));
  out += fmt::format("             {}: {} rounded down (error < 0), {} up, {} exact; the {} {} adding a P-bar = 1 key "
                     "made {:.6g}, the rest {:.6g}\n",
                     kernel ? "fused steps" : "additions", down, up, exact, steps_with_one,
                     kernel ? "steps" : "additions", as_double(at_ones), as_double(elsewhere));
  if (const auto largest = c.curve.largest_jump({kind::key, kind::padding_step})) {
    const accumulation_event& e = c.curve.events[*largest];
    out += fmt::format("             largest jump of one {}: {:.6g} at key {} (keys added {}, block {}, P-bar {})\n",
                       kernel ? "fused step" : "addition", as_double(jumps[*largest]), e.key, e.keys_added, e.block,
                       to_double(e.p_bar));
  }
  if (const auto other = c.curve.largest_jump({kind::rescale, kind::pv_to_bf16, kind::output_update})) {
    const accumulation_event& e = c.curve.events[*other];
    out += fmt::format("             largest jump between blocks: {:.6g}, {} after block {}\n",
                       as_double(jumps[*other]), event_name(e, kernel), e.block);
  }
  return out;
}

// The report of `bitexact bias mechanism`: the row, each semantics' summaries,
// and each standard pass's largest jump traced in full (in `style`).
inline std::string mechanism_report(const tie_row& o, const row_operands& row, int col,
                                    const std::vector<mechanism_curve>& curves,
                                    output_style style = output_style::text) {
  const std::size_t d = static_cast<std::size_t>(row.shape.head_dim);
  double v_sum = 0;
  for (int j = 0; j < o.keys; ++j) v_sum += to_double(row.v[static_cast<std::size_t>(j) * d + static_cast<std::size_t>(col)]);
  std::string positions;
  for (std::size_t i = 0; i < o.tie_positions.size(); ++i) positions += (i ? ", " : "") + std::to_string(o.tie_positions[i]);
  std::string out = fmt::format("row: {} keys, {} tied at the max {} (scaled {}) at keys {}\n", o.keys,
                                o.tie_positions.size(), to_double(o.max_score), to_double(o.max_score) / 8, positions);
  out += fmt::format(
      "     other scores max - U({}, {}); V = {} + {} (Irwin-Hall 12 - 6), seed {}; column {}, mean of V {:.6g}\n",
      o.gap_min, o.gap_max, o.v_mean, o.v_sd, o.seed, col, v_sum / o.keys);
  out += fmt::format("error: the running O-bar[0, {}] minus the exact sum of the same semantics' P-bar V so far\n", col);
  for (const bool kernel : {false, true}) {
    for (const mechanism_curve& c : curves) {
      if (c.kernel != kernel) continue;
      if (c.pass == "standard")
        out += fmt::format("\n{} ({}):\n", c.semantics,
                           kernel ? "single kernel, 128-key blocks last to first, fp32 O, 16-key fused steps"
                                  : "bf16 autocast, 512-key blocks first to last, O bf16 between blocks");
      out += mechanism_summary(c);
    }
  }
  for (const mechanism_curve& c : curves) {
    if (c.pass != "standard") continue;
    using kind = accumulation_event::kind;
    const auto largest = c.curve.largest_jump({kind::key, kind::padding_step});
    if (!largest) continue;
    const accumulation_event& e = c.curve.events[*largest];
    out += fmt::format("\n{}, standard: the {} with the largest jump (key {}, keys added {}), in full:\n", c.semantics,
                       c.kernel ? "fused step" : "addition", e.key, e.keys_added);
    out += render(*e.operation, style);
  }
  return out;
}

}  // namespace bitexact::attention
