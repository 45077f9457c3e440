// A gemm_description as JSON: the file of `bitexact matmul --kernel FILE.json`,
// the dict of bitexact.matmul(kernel={...}), the form --print-kernel writes.
// Every field must be there and understood, or the description is refused
// with one line naming the field; the spellings are here and nowhere else
// (docs/matmul.md lists them).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "../hardware/json_fields.hpp"
#include "description.hpp"

namespace bitexact::matmul {

namespace gemm_json_names {

inline const description_json::table<block_scaling> block_scalings{
    {"fma_with_scale_product", block_scaling::fma_with_scale_product},
    {"scale_a_then_fma_with_b", block_scaling::scale_a_then_fma_with_b}};
inline const description_json::table<alpha_beta_rule> alpha_beta_rules{{"fma_alpha", alpha_beta_rule::fma_alpha},
                                                                       {"fma_beta", alpha_beta_rule::fma_beta}};
inline const description_json::table<operand_rule> operand_rules{{"as_given", operand_rule::as_given},
                                                                 {"widened_to_fp16", operand_rule::widened_to_fp16},
                                                                 {"rounded_to_tf32", operand_rule::rounded_to_tf32},
                                                                 {"truncated_to_tf32", operand_rule::truncated_to_tf32}};
inline const description_json::table<k_order> k_orders{{"ascending", k_order::ascending},
                                                       {"pairs_mod_4_in_32", k_order::pairs_mod_4_in_32}};
inline const description_json::table<k_residue> k_residues{{"last_tile", k_residue::last_tile},
                                                           {"first_tile", k_residue::first_tile}};
// The reduce kernel's order and format: the one the captures show.
inline const description_json::table<bool> split_reductions{{"fp32_in_split_order", true}};

}  // namespace gemm_json_names

inline gemm_description gemm_from_json(std::string_view text) {
  namespace names = gemm_json_names;
  const nlohmann::json document = description_json::parse(text);
  description_json::json_fields fields(document, "");
  gemm_description d;
  d.name = fields.text("name");
  if (d.name.empty()) description_json::description_error("name", "empty");
  if (fields.has("summary")) d.summary = fields.text("summary");
  d.tensor_core = &fields.tensor_core("tensor_core");
  d.k_tile = static_cast<std::size_t>(fields.integer("k_tile", 1, 4096));
  d.splits = fields.integer("splits", 1, 256);
  d.ragged_split_alignment = static_cast<std::size_t>(fields.integer("ragged_split_alignment", 1, 4096));
  d.residue = fields.named("k_residue", names::k_residues);
  fields.named("split_reduction", names::split_reductions);
  d.promotion_k = static_cast<std::size_t>(fields.integer("promotion_k", 0, 1 << 20));
  d.operands = fields.named("operands", names::operand_rules);
  d.order = fields.named("k_order", names::k_orders);
  d.epilogue.blocks_128x128 = fields.named("block_scaling_128x128", names::block_scalings);
  d.epilogue.blocks_1x128 = fields.named("block_scaling_1x128", names::block_scalings);
  d.epilogue.alpha_beta = fields.named("alpha_beta", names::alpha_beta_rules);
  d.epilogue.alpha_beta_split_k = fields.named("alpha_beta_split_k", names::alpha_beta_rules);
  fields.finish();
  check_description(d, "kernel description: ");
  return d;
}

inline nlohmann::ordered_json gemm_to_json(const gemm_description& d) {
  namespace names = gemm_json_names;
  nlohmann::ordered_json j;
  j["name"] = d.name;
  if (!d.summary.empty()) j["summary"] = d.summary;
  j["tensor_core"] = d.tensor_core->unit_name;
  j["k_tile"] = d.k_tile;
  j["splits"] = d.splits;
  j["ragged_split_alignment"] = d.ragged_split_alignment;
  j["k_residue"] = description_json::name_of(names::k_residues, d.residue);
  j["split_reduction"] = "fp32_in_split_order";
  j["promotion_k"] = d.promotion_k;
  j["operands"] = description_json::name_of(names::operand_rules, d.operands);
  j["k_order"] = description_json::name_of(names::k_orders, d.order);
  j["block_scaling_128x128"] = description_json::name_of(names::block_scalings, d.epilogue.blocks_128x128);
  j["block_scaling_1x128"] = description_json::name_of(names::block_scalings, d.epilogue.blocks_1x128);
  j["alpha_beta"] = description_json::name_of(names::alpha_beta_rules, d.epilogue.alpha_beta);
  j["alpha_beta_split_k"] = description_json::name_of(names::alpha_beta_rules, d.epilogue.alpha_beta_split_k);
  return j;
}

}  // namespace bitexact::matmul
