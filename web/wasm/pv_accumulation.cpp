// The page's P̄V view: the row of `bitexact bias mechanism` (ties at the
// maximum, V of negative mean; attention/tie_row.hpp), its running Ō and
// error after each key (attention/mechanism.hpp) under the paper's
// arithmetic and the H100 kernel's, standard and stabilized: the same
// functions the command calls, so that the page's report is the command's
// text and its per-key numbers are the command's CSV.
//
// The kernel's exponentials, reciprocals and logarithms are MUFU table
// lookups: the page fetches data/'s three table files into the module's
// file system (/bitexact-data, BITEXACT_DATA_DIR of this build) before the
// first call; the addition and table views need none.
#include <emscripten/emscripten.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include <bitexact/attention/mechanism.hpp>
#include <bitexact/hardware/mufu_tables.hpp>
#include <bitexact/trace/render.hpp>

#include "json_text.hpp"

namespace bitexact::web {
namespace {

using attention::accumulation_event;

using attention::mechanism_curve;

// The last row's curves, kept for the traces the page asks for one event at a time.
std::vector<mechanism_curve>& held_curves() {
  static std::vector<mechanism_curve> curves;
  return curves;
}

double as_double(const exact_rational& x) { return x.convert_to<double>(); }

struct row_options {
  attention::tie_row row;
  int col = 0;
};

// One curve's events as the command's CSV has them (decimals the exact
// rationals rounded to double, written shortest), plus whether each has a trace.
std::string events_json(const mechanism_curve& c) {
  const std::vector<exact_rational> jumps = attention::jumps_of(c.curve);
  std::string out;
  for (std::size_t i = 0; i < c.curve.events.size(); ++i) {
    const accumulation_event& e = c.curve.events[i];
    out += fmt::format("{}{{\"event\": \"{}\", \"block\": {}, \"keys_added\": {}", i ? ",\n" : "",
                       attention::event_name(e, c.kernel), e.block, e.keys_added);
    if (e.what == accumulation_event::kind::key)
      out += fmt::format(", \"key\": {}, \"p_bar_bits\": \"0x{:04X}\", \"p_bar\": \"{}\", \"p_bar_is_one\": {}, \"v\": \"{}\"",
                         e.key, e.p_bar.bits, to_double(e.p_bar), e.p_bar_is_one() ? 1 : 0, to_double(e.v));
    if (e.value_held)
      out += fmt::format(", \"value\": \"{}\", \"exact\": \"{}\", \"error\": \"{}\", \"jump\": \"{}\"", as_double(e.value),
                         as_double(e.exact), as_double(e.error()), as_double(jumps[i]));
    out += fmt::format(", \"traced\": {}}}", e.operation ? "true" : "false");
  }
  return out;
}

std::string accumulation_json(const row_options& o) {
  const attention::row_operands row = attention::build_tie_row(o.row);
  std::vector<mechanism_curve> curves = attention::mechanism_curves(row, o.col);
  std::string curves_json;
  for (const mechanism_curve& c : curves)
    curves_json += fmt::format("{}{{\"semantics\": \"{}\", \"pass\": \"{}\", \"events\": [{}]}}",
                               curves_json.empty() ? "" : ",\n", c.semantics, c.pass, events_json(c));
  std::string ties;
  for (const int key : o.row.tie_positions) ties += (ties.empty() ? "" : ", ") + std::to_string(key);
  std::string out = fmt::format("{{\"report\": {}, \"keys\": {}, \"tie_positions\": [{}], \"curves\": [{}]}}",
                                json_quoted(attention::mechanism_report(o.row, row, o.col, curves)), o.row.keys, ties, curves_json);
  held_curves() = std::move(curves);
  return out;
}

// The options as `bitexact bias mechanism` checks them; "" when they are valid.
std::string check_options(row_options& o, int ties, std::string_view tie_positions, double max, std::string_view seed) {
  if (o.row.keys < 16 || o.row.keys > 65536) return "keys: an integer from 16 to 65536";
  o.row.max_score = from_double<bf16>(max).result;
  if (!std::isfinite(max) || to_double(o.row.max_score) != max)
    return fmt::format("max: a bf16 value such as 8 or -1.5 (the nearest bf16 is {})", to_double(o.row.max_score));
  if (!(o.row.gap_min > 0) || !std::isfinite(o.row.gap_min)) return "gap min: a positive decimal such as 8";
  if (!(o.row.gap_max >= o.row.gap_min) || !std::isfinite(o.row.gap_max)) return "gap max: at least gap min";
  if (!std::isfinite(o.row.v_mean)) return "V mean: a finite decimal";
  if (!(o.row.v_sd >= 0) || !std::isfinite(o.row.v_sd)) return "V sd: a decimal of at least 0";
  if (o.col < 0 || o.col > 63) return "column: 0 to 63";
  const auto [end, error] = std::from_chars(seed.data(), seed.data() + seed.size(), o.row.seed);
  if (seed.empty() || error != std::errc{} || end != seed.data() + seed.size()) return "seed: an integer from 0 to 2^64 - 1";
  if (!tie_positions.empty()) {
    for (std::string_view rest = tie_positions;;) {
      const std::size_t comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      int key = -1;
      const auto [item_end, item_error] = std::from_chars(item.data(), item.data() + item.size(), key);
      if (item.empty() || item_error != std::errc{} || item_end != item.data() + item.size() || key < 0 || key >= o.row.keys)
        return "tie positions: distinct keys from 0 to keys - 1, comma-separated";
      for (const int earlier : o.row.tie_positions)
        if (earlier == key) return "tie positions: key " + std::to_string(key) + " is named twice";
      o.row.tie_positions.push_back(key);
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
  } else {
    if (ties < 1 || ties > o.row.keys) return "ties: an integer from 1 to keys";
    o.row.tie_positions = attention::evenly_spaced(o.row.keys, ties);
  }
  return "";
}

}  // namespace
}  // namespace bitexact::web

extern "C" {

// Reads the MUFU tables from /bitexact-data (the page has written them
// there): {} or {"error"}, so that the page can say what is missing.
EMSCRIPTEN_KEEPALIVE const char* bitexact_load_mufu_tables() {
  try {
    bitexact::ptx::mufu_tables::shared();
    return bitexact::web::handed_to_javascript("{}");
  } catch (const std::exception& error) {
    return bitexact::web::handed_to_javascript(bitexact::web::error_json(error.what()));
  }
}

// `bitexact bias mechanism --keys K (--ties T | --tie-positions L) --max M
// --gap-min G --gap-max H --v-mean A --v-sd S --seed N --col C`:
// {"report", "keys", "tie_positions", "curves": [{"semantics", "pass", "events"}]} or {"error"}.
EMSCRIPTEN_KEEPALIVE const char* bitexact_pv_accumulation(int keys, int ties, const char* tie_positions, double max,
                                                          double gap_min, double gap_max, double v_mean, double v_sd,
                                                          const char* seed, int col) {
  using namespace bitexact::web;
  row_options o;
  o.row.keys = keys, o.row.head_dim = 64, o.row.gap_min = gap_min, o.row.gap_max = gap_max;
  o.row.v_mean = v_mean, o.row.v_sd = v_sd, o.col = col;
  if (const std::string problem = check_options(o, ties, tie_positions, max, seed); !problem.empty())
    return handed_to_javascript(error_json(problem));
  try {
    return handed_to_javascript(accumulation_json(o));
  } catch (const std::exception& error) {
    return handed_to_javascript(error_json(error.what()));
  }
}

// The traced operation of one event of the last row's curve (0 paper standard,
// 1 paper stabilized, 2 kernel standard, 3 kernel stabilized): {"text", "sections"} or {"error"}.
EMSCRIPTEN_KEEPALIVE const char* bitexact_pv_event_trace(int curve, int event) {
  using namespace bitexact::web;
  const auto& curves = held_curves();
  if (curve < 0 || static_cast<std::size_t>(curve) >= curves.size() || event < 0 ||
      static_cast<std::size_t>(event) >= curves[static_cast<std::size_t>(curve)].curve.events.size())
    return handed_to_javascript(error_json("no such event"));
  const auto& e = curves[static_cast<std::size_t>(curve)].curve.events[static_cast<std::size_t>(event)];
  if (!e.operation) return handed_to_javascript(error_json("this event rounds nothing by itself"));
  return handed_to_javascript(trace_json(*e.operation));
}

}
