// A kernel_description as JSON: the file a kernel author writes
// (`bitexact attention --kernel FILE.json`, `bitexact.attention(...,
// kernel={...})`) and the form `--list-kernels --json` prints. Every field a
// description needs must be there and understood: an unknown field, a value of
// the wrong type, a name not in the tables below, a combination the emulator
// does not compute, or a field that the description's other fields leave
// unread is refused with one line naming the field. The
// field names and values are spelled here and nowhere else (docs/attention.md
// lists them).
#pragma once

#include <cmath>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "../hardware/gpu.hpp"
#include "../hardware/json_fields.hpp"
#include "kernel.hpp"

namespace bitexact::attention {

namespace json_names {

using description_json::table;

inline const table<block_order> block_orders{{"last_to_first", block_order::last_to_first},
                                             {"first_to_last", block_order::first_to_last},
                                             {"mask_partial_then_full", block_order::mask_partial_then_full}};
inline const table<scale_placement> placements{{"exponent", scale_placement::exponent},
                                               {"scores", scale_placement::scores}};
inline const table<bool> exponent_forms{{"mul_then_sub", true}, {"fma", false}};  // unfused_scale
inline const table<scale_log2_source> scale_log2_sources{{"float_scale", scale_log2_source::float_scale},
                                                         {"double_scale", scale_log2_source::double_scale},
                                                         {"float_product", scale_log2_source::float_product}};
inline const table<max_units> units{{"scores", max_units::scores}, {"exponent", max_units::exponent}};
inline const table<exponential_unit> exponentials{
    {"ex2.approx.f32", exponential_unit::ex2_approx_f32},
    {"ex2.approx.ftz.f32", exponential_unit::ex2_approx_ftz_f32},
    {"ex2.approx.ftz.f32 for P", exponential_unit::ex2_approx_ftz_f32_for_p}};
inline const table<row_sum_rule> row_sums{{"thread_partials_across_blocks", row_sum_rule::thread_partials_across_blocks},
                                          {"block_sum_then_fma", row_sum_rule::block_sum_then_fma},
                                          {"warp_slices_then_add", row_sum_rule::warp_slices_then_add},
                                          {"thread_block_sums_fma", row_sum_rule::thread_block_sums_fma},
                                          {"thread_block_sums_descaled_fma", row_sum_rule::thread_block_sums_descaled_fma},
                                          {"thread_partials_of_p_bar", row_sum_rule::thread_partials_of_p_bar}};
// O and l are rescaled after every block (kernel.hpp says why no other rule
// changes a bit); a field so that a description says it.
inline const table<bool> rescales{{"every_block", true}};
inline const table<masked_max_rule> masked_maxima{{"flash2", masked_max_rule::flash2},
                                                  {"zero_shift", masked_max_rule::zero_shift},
                                                  {"unshifted", masked_max_rule::unshifted}};
inline const table<normalization> normalizations{{"reciprocal_then_multiply", normalization::reciprocal_then_multiply},
                                                 {"div.full.f32", normalization::div_full_f32},
                                                 {"rcp.approx.ftz.f32", normalization::rcp_approx_then_multiply}};
inline const table<lse_formula> lse_formulas{{"flash2", lse_formula::flash2},
                                             {"max_plus_log2f", lse_formula::max_plus_log2f},
                                             {"max_over_log2e_plus_logf", lse_formula::max_over_log2e_plus_logf},
                                             {"max_ln2_plus_lg2_ln2", lse_formula::max_ln2_plus_lg2_ln2}};
inline const table<bool> lse_units{{"natural", true}, {"log2", false}};
inline const table<causal_alignment> causal_alignments{{"bottom_right", causal_alignment::bottom_right},
                                                       {"top_left", causal_alignment::top_left}};
inline const table<split_policy> split_policies{{"none", split_policy::none},
                                                {"flash2_heuristic", split_policy::flash2_heuristic}};
// The conversions of P for P V and of O as written, by their PTX.
inline const table<format> conversions{{"cvt.rn.bf16.f32", bf16}, {"cvt.rn.satfinite.e4m3x2.f32", e4m3}};
inline const table<format> input_formats{{"bf16", bf16}, {"e4m3", e4m3}, {"e5m2", e5m2}};
inline const table<p_scaling> p_scalings{{"none", p_scaling::none},
                                         {"lg2_offset", p_scaling::lg2_offset},
                                         {"multiply", p_scaling::multiply}};
inline const table<pv_accumulation> pv_accumulations{{"c_operand", pv_accumulation::c_operand},
                                                      {"fp32_add", pv_accumulation::fp32_add}};

using description_json::name_of;

}  // namespace json_names

namespace detail {

using description_json::description_error;
using description_json::json_fields;

// A head dim's tiles: {"64": {"block_m": 128, "block_n": 128}, ...}.
inline std::map<int, tile_shape> tiles(json_fields& fields, std::string_view key) {
  const nlohmann::json& value = fields.take(key);
  if (!value.is_object() || value.empty()) description_error(fields.field(key), "expected an object of head dims");
  std::map<int, tile_shape> out;
  for (const auto& [dim, tile] : value.items()) {
    const std::string where = fields.field(key) + "." + dim;
    int head_dim = 0;
    try {
      std::size_t used = 0;
      head_dim = std::stoi(dim, &used);
      if (used != dim.size()) throw std::invalid_argument(dim);
    } catch (const std::exception&) {
      description_error(where, "a head dim is a decimal integer");
    }
    if (head_dim < 16 || head_dim % 16 != 0 || head_dim > 512) description_error(where, "a head dim is a multiple of 16 up to 512");
    json_fields shape(tile, where);
    const int block_m = shape.integer("block_m", 16, 1024), block_n = shape.integer("block_n", 16, 1024);
    if (block_m % 16 != 0 || block_n % 16 != 0) description_error(where, "block_m and block_n are multiples of 16");
    shape.finish();
    out[head_dim] = {block_m, block_n};
  }
  return out;
}

}  // namespace detail

// A description from its JSON text; std::invalid_argument with one line
// naming the field that is missing, unknown, of the wrong type or value, or
// not computable in that combination.
inline kernel_description kernel_from_json(std::string_view text) {
  const nlohmann::json document = description_json::parse(text);
  namespace names = json_names;
  detail::json_fields fields(document, "");
  kernel_description d;
  flash_kernel& a = d.arithmetic;
  d.name = fields.text("name");
  if (d.name.empty()) detail::description_error("name", "empty");
  if (fields.has("summary")) d.summary = fields.text("summary");
  // "field is value": the field whose value decides whether another is read.
  const auto deciding = [](std::string_view field, const auto& table, auto value) {
    return std::string(field) + " is " + std::string(names::name_of(table, value));
  };
  d.tiles = detail::tiles(fields, "tiles");
  d.split = fields.named("split_kv", names::split_policies);
  if (fields.read_when(d.split == split_policy::flash2_heuristic, "split_tiles",
                       deciding("split_kv", names::split_policies, d.split)))
    d.split_tiles = detail::tiles(fields, "split_tiles");
  if (fields.has("min_query_rows")) d.min_query_rows = fields.integer("min_query_rows", 1, 1 << 30);
  a.tensor_core = fields.tensor_core("tensor_core").unit;
  a.order = fields.named("block_order", names::block_orders);
  if (fields.read_when(a.order == block_order::mask_partial_then_full, "mask_block",
                       deciding("block_order", names::block_orders, a.order)))
    a.mask_block = fields.integer("mask_block", 16, 1 << 20);
  a.placement = fields.named("scale_placement", names::placements);
  // Scores scaled before the max (scale, then log2_e) leave the exponent
  // ex2(S' - m) without a multiply, and c = RN(scale log2 e) unused.
  const std::string placement = deciding("scale_placement", names::placements, a.placement);
  const bool scores_scaled = a.placement == scale_placement::scores;
  if (fields.read_when(scores_scaled, "log2_e", placement)) a.log2_e = fields.number("log2_e");
  if (fields.read_when(!scores_scaled, "exponent", placement))
    a.unfused_scale = fields.named("exponent", names::exponent_forms);
  if (fields.read_when(!scores_scaled, "scale_log2_from", placement))
    d.scale_log2_from = fields.named("scale_log2_from", names::scale_log2_sources);
  a.causal = fields.named("causal_alignment", names::causal_alignments);
  a.max_in = fields.named("max_units", names::units);
  a.exponential = fields.named("exponential", names::exponentials);
  a.masked_max = fields.named("masked_max", names::masked_maxima);
  a.row_sum = fields.named("row_sum", names::row_sums);
  if (fields.has("rescale") && fields.take("rescale") == "when_max_changes")
    detail::description_error("rescale", "when_max_changes gives the bits of every_block (alpha is exactly 1 while "
                                         "the max stays, and x * 1 = x): write every_block");
  fields.named("rescale", names::rescales);
  a.p_format = fields.named("p_rounding", names::conversions);
  // Optional, so that bf16 descriptions written before fp8 stay as they were: bf16, none, c_operand, bf16.
  if (fields.has("inputs")) a.inputs = fields.named("inputs", names::input_formats);
  if (fields.has("p_scale")) a.p_scale_rule = fields.named("p_scale", names::p_scalings);
  if (fields.has("pv_accumulation")) a.pv = fields.named("pv_accumulation", names::pv_accumulations);
  if (fields.has("o_rounding")) a.o_format = fields.named("o_rounding", names::conversions);
  a.normalize = fields.named("normalization", names::normalizations);
  a.lse = fields.named("lse_formula", names::lse_formulas);
  a.lse_natural_units = fields.named("lse_units", names::lse_units);
  if (fields.has("alu_ftz")) a.alu_ftz = fields.boolean("alu_ftz");
  if (fields.has("stabilize")) {
    detail::json_fields rule(fields.take("stabilize"), "stabilize");
    stabilized_max stabilize;
    stabilize.beta = rule.number("beta");
    stabilize.epsilon = rule.number("epsilon");
    stabilize.across_blocks = rule.boolean("across_blocks");
    if (!(to_host(stabilize.beta) >= 1.0f) || !(to_host(stabilize.epsilon) >= 0.0f))
      detail::description_error("stabilize", "beta is at least 1 and epsilon at least 0");
    rule.finish();
    a.stabilize = stabilize;
  }
  fields.finish();
  if (!a.lse_natural_units && a.lse == lse_formula::flash2)
    detail::description_error("lse_units", "lse_formula flash2 is in natural units");
  if (a.placement != scale_placement::scores && a.lse == lse_formula::max_over_log2e_plus_logf)
    detail::description_error("lse_formula", "max_over_log2e_plus_logf divides by log2_e: scale_placement scores");
  try {
    check_arithmetic_fields(a);
  } catch (const std::invalid_argument& e) {
    detail::description_error("", std::string(e.what()).substr(8));
  }
  // After the fields' combinations: the recipe (max_units) decides which source is right.
  if (const auto refusal = fp8_scale_source_refusal(a, d.scale_log2_from))
    detail::description_error("scale_log2_from", *refusal);
  // Every tile against the arithmetic, as resolve() would give it.
  for (const auto* table : {&d.tiles, &d.split_tiles})
    for (const auto& [dim, tile] : *table) {
      flash_kernel resolved = a;
      resolved.block_m = tile.block_m;
      resolved.block_n = tile.block_n;
      resolved.splits = table == &d.split_tiles ? 2 : 1;
      try {
        check_tiles(resolved);
      } catch (const std::invalid_argument& e) {
        detail::description_error((table == &d.split_tiles ? "split_tiles." : "tiles.") + std::to_string(dim),
                                  std::string(e.what()).substr(8));
      }
    }
  return d;
}

// The JSON of a description: every field, the form kernel_from_json reads.
inline nlohmann::ordered_json kernel_to_json(const kernel_description& d) {
  namespace names = json_names;
  const flash_kernel& a = d.arithmetic;
  const auto tiles = [](const std::map<int, tile_shape>& table) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (const auto& [dim, tile] : table) out[std::to_string(dim)] = {{"block_m", tile.block_m}, {"block_n", tile.block_n}};
    return out;
  };
  nlohmann::ordered_json j;
  j["name"] = d.name;
  if (!d.summary.empty()) j["summary"] = d.summary;
  j["tiles"] = tiles(d.tiles);
  j["split_kv"] = names::name_of(names::split_policies, d.split);
  if (d.split == split_policy::flash2_heuristic) j["split_tiles"] = tiles(d.split_tiles);
  if (d.min_query_rows != 1) j["min_query_rows"] = d.min_query_rows;
  const tensor_core_instruction* unit = tensor_core_instruction_of(a.tensor_core);
  j["tensor_core"] = unit ? unit->unit_name : std::string_view("?");
  j["block_order"] = names::name_of(names::block_orders, a.order);
  if (a.order == block_order::mask_partial_then_full) j["mask_block"] = a.mask_block;
  j["scale_placement"] = names::name_of(names::placements, a.placement);
  if (a.placement == scale_placement::scores) {
    j["log2_e"] = static_cast<double>(to_host(a.log2_e));
  } else {
    j["exponent"] = names::name_of(names::exponent_forms, a.unfused_scale);
    j["scale_log2_from"] = names::name_of(names::scale_log2_sources, d.scale_log2_from);
  }
  j["causal_alignment"] = names::name_of(names::causal_alignments, a.causal);
  j["max_units"] = names::name_of(names::units, a.max_in);
  j["exponential"] = names::name_of(names::exponentials, a.exponential);
  j["masked_max"] = names::name_of(names::masked_maxima, a.masked_max);
  j["row_sum"] = names::name_of(names::row_sums, a.row_sum);
  j["rescale"] = "every_block";
  if (a.inputs != bf16) j["inputs"] = names::name_of(names::input_formats, a.inputs);
  j["p_rounding"] = names::name_of(names::conversions, a.p_format);
  if (a.p_scale_rule != p_scaling::none) j["p_scale"] = names::name_of(names::p_scalings, a.p_scale_rule);
  if (a.pv != pv_accumulation::c_operand) j["pv_accumulation"] = names::name_of(names::pv_accumulations, a.pv);
  if (a.o_format != bf16) j["o_rounding"] = names::name_of(names::conversions, a.o_format);
  j["normalization"] = names::name_of(names::normalizations, a.normalize);
  j["lse_formula"] = names::name_of(names::lse_formulas, a.lse);
  j["lse_units"] = names::name_of(names::lse_units, a.lse_natural_units);
  if (a.alu_ftz) j["alu_ftz"] = true;
  if (a.stabilize)
    j["stabilize"] = {{"beta", static_cast<double>(to_host(a.stabilize->beta))},
                      {"epsilon", static_cast<double>(to_host(a.stabilize->epsilon))},
                      {"across_blocks", a.stabilize->across_blocks}};
  return j;
}

}  // namespace bitexact::attention
