// The named attention models: one registry, the only place a preset's name
// is spelled. The command (`bitexact attention --preset NAME`,
// `--list-kernels`) and the Python binding look names up here.
//
// GPU kernels are kernel_descriptions (attention/kernel.hpp), each field's
// value traced to the source, PTX or SASS that shows it and proven on
// captures (docs/attention.md has the counts). The paper_reference presets
// are the paper's own PyTorch arithmetic (paper_reference.hpp), not a kernel.
#pragma once

#include <algorithm>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "kernel.hpp"

namespace bitexact::attention {

// PyTorch 2.11's scaled_dot_product_attention flash backend on sm_90
// (flash-attention 2 kernels): tiles of flash_fwd_launch_template.h for d 64
// and 128, the split kernel's 64 x 256 / 64 x 128 (set_params_splitkv), FA2's
// arithmetic throughout (flash_kernel's defaults; cuda/capture/flash_sass.sh).
inline kernel_description pytorch_sdpa_flash_sm90_description() {
  kernel_description d;
  d.name = "pytorch_sdpa_flash_sm90";
  d.summary = "torch 2.11's flash kernels (FlashAttention-2) on sm_90 (H100, H200)";
  d.tiles = {{64, {128, 128}}, {128, {128, 64}}};
  d.split = split_policy::flash2_heuristic;
  d.split_tiles = {{64, {64, 256}}, {128, {64, 128}}};
  return d;
}

// The paper's stabilized softmax (Algorithm 3) on the same kernel: ours
// (cuda/attention/flash_forward.cu), no one else ships it.
inline kernel_description pytorch_sdpa_flash_sm90_stabilized_description() {
  kernel_description d = pytorch_sdpa_flash_sm90_description();
  d.name = "pytorch_sdpa_flash_sm90_stabilized";
  d.summary = "the same kernels with the paper's stabilized softmax (Algorithm 3) in each K/V block (ours)";
  d.arithmetic.stabilize = stabilized_max{};
  return d;
}

// The rule on the row's largest score so far (stabilized_max::across_blocks).
inline kernel_description pytorch_sdpa_flash_sm90_stabilized_across_blocks_description() {
  kernel_description d = pytorch_sdpa_flash_sm90_stabilized_description();
  d.name = "pytorch_sdpa_flash_sm90_stabilized_across_blocks";
  d.summary = "the rule on the row's largest score so far, so that a max repeated in two K/V blocks is caught "
              "too (ours; needs a positive scale)";
  d.arithmetic.stabilize->across_blocks = true;
  return d;
}

// torch.compile(flex_attention) in torch 2.11 with Triton 3.6 on sm_90, its
// default configuration (flex_attention.py's template, as the generated
// kernel shows it; cuda/capture/triton_attention.py keeps the code):
// BLOCK_M 128 and BLOCK_N 128 (d 64) or 64 (d 128); Q K^T and P V by wgmma
// (the same fused k16 step as mma.sync); qk *= SM_SCALE, then *= RCP_LN2
// (1.44269504) as two FMULs; the max over those; p = ex2.approx.ftz(x - m);
// l = FFMA(l, alpha, tl.sum(p)); O / l by div.full.f32; LSE = m + log2(l)
// (__nv_log2f), times ln 2 in fp32 by the wrapper's compiled multiply.
// Below 128 query rows torch.compile picks the flex_decoding template (a
// split-KV kernel, _use_flex_decoding): not modelled, so refused.
inline kernel_description flex_attention_sm90_description() {
  kernel_description d;
  d.name = "flex_attention_sm90";
  d.summary = "torch 2.11's torch.compile(flex_attention), Triton 3.6, default configuration, on sm_90";
  d.tiles = {{64, {128, 128}}, {128, {128, 64}}};
  d.min_query_rows = 128;
  flash_kernel& a = d.arithmetic;
  a.order = block_order::mask_partial_then_full;
  a.mask_block = 128;
  a.placement = scale_placement::scores;
  a.max_in = max_units::exponent;
  a.exponential = exponential_unit::ex2_approx_ftz_f32;
  a.row_sum = row_sum_rule::block_sum_then_fma;
  a.masked_max = masked_max_rule::zero_shift;
  a.normalize = normalization::div_full_f32;
  a.lse = lse_formula::max_plus_log2f;
  a.lse_natural_units = true;
  return d;
}

// PyTorch 2.11's scaled_dot_product_attention memory-efficient backend on
// sm_90: the sm80 CUTLASS kernels (mem_eff_attention/kernel_forward.h, read
// with the SASS of torch 2.11's libtorch_cuda.so): 64 x 64 (d 64) and 64 x 128
// (d 128) tiles, mma.sync m16n8k8 for Q K^T and P V; S * scale, then *
// log2(e) (0x3FB8AA3B) as two FMULs; the max in those units (exact,
// shared-memory atomics); P = exp2f(t - m) (nvcc's non-FTZ wrapper); alpha only
// when the max grew, l times alpha then each warp's 32 columns added; O *
// RN(1 / l); L = RN(RN(m / log2 e) + logf(l)). Its causal mask is top-left
// aligned (captured with 300 x 1000 and 1000 x 300).
inline kernel_description pytorch_sdpa_efficient_sm90_description() {
  kernel_description d;
  d.name = "pytorch_sdpa_efficient_sm90";
  d.summary = "torch 2.11's memory-efficient kernels (CUTLASS sm80, mma.sync m16n8k8) on sm_90";
  d.tiles = {{64, {64, 64}}, {128, {64, 128}}};
  flash_kernel& a = d.arithmetic;
  a.causal = causal_alignment::top_left;  // CausalFromTopLeft, as SDPA's is_causal
  a.tensor_core = sm90_tensor_core_k8;
  a.order = block_order::first_to_last;
  a.placement = scale_placement::scores;
  a.log2_e = float32::from_bits(0x3FB8AA3Bu);
  a.max_in = max_units::exponent;
  a.exponential = exponential_unit::ex2_approx_f32;
  a.row_sum = row_sum_rule::warp_slices_then_add;
  // CUTLASS rescales l and O only when the max grew: the bits of every block (kernel.hpp).
  a.masked_max = masked_max_rule::unshifted;
  a.normalize = normalization::reciprocal_then_multiply;
  a.lse = lse_formula::max_over_log2e_plus_logf;
  a.lse_natural_units = true;
  return d;
}

// PyTorch 2.11's scaled_dot_product_attention cuDNN backend on sm_90 (cuDNN
// 9.19): the kernel cuDNN generates at run time,
// cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128xd,
// read in its SASS (Nsight Compute prints it: cuda/capture/cudnn_sass.sh):
// 64 x 128 tiles, wgmma (HGMMA 64x128x16 for S, 64xdx16 for P V); c =
// FMUL(scale, 0x3FB8AA3B) on the GPU; the max in the exponent's units;
// P = MUFU.EX2(FMUL(S, c) - m), every fp32 operation .ftz; each thread's
// block sum from +0 folded into its own l_t by one FFMA, the four joined
// (l_0 + l_1) + (l_2 + l_3) at the end; O * MUFU.RCP(l); L = FFMA(m, ln 2,
// MUFU.LG2(l) * ln 2). A call of one query row runs another kernel,
// cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_2_64x32xd
// (its SASS: S * scale, the max in those units, then * 0x3FB8AA3B; L =
// FFMA(MUFU.LG2(l), ln 2, RN(m * ln 2))), not described here; from two query
// rows on this kernel runs (cuda/capture/cudnn_query_rows.py: N_q 1 to 17).
inline kernel_description pytorch_sdpa_cudnn_sm90_description() {
  kernel_description d;
  d.name = "pytorch_sdpa_cudnn_sm90";
  d.summary = "torch 2.11's cuDNN backend (cuDNN 9.19's generated sm90 flash kernel) on sm_90; one query row runs "
              "cuDNN's sm80 kernel, not described";
  d.tiles = {{64, {64, 128}}, {128, {64, 128}}};
  d.min_query_rows = 2;
  d.scale_log2_from = scale_log2_source::float_product;
  flash_kernel& a = d.arithmetic;
  a.causal = causal_alignment::top_left;  // as SDPA's is_causal
  a.order = block_order::first_to_last;
  a.placement = scale_placement::exponent;
  a.unfused_scale = true;
  a.max_in = max_units::exponent;
  a.exponential = exponential_unit::ex2_approx_ftz_f32;
  a.masked_max = masked_max_rule::zero_shift;
  a.row_sum = row_sum_rule::thread_block_sums_fma;
  a.normalize = normalization::rcp_approx_then_multiply;
  a.lse = lse_formula::max_ln2_plus_lg2_ln2;
  a.lse_natural_units = true;
  a.alu_ftz = true;
  return d;
}

// cuDNN 9.19's fp8 scaled-dot-product attention forward on sm_90
// (cudnn-frontend's sdpa_fp8, the path Transformer Engine takes on Hopper):
// the generated kernel
// cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f8_knob_32_64x256x128,
// read in its SASS (cuda/capture/README.md, cuDNN's FP8 attention): Q, K, V
// e4m3 with per-tensor descales; 64-row tiles, 256-key blocks ascending;
// S on the fp8 unit (QGMMA, sm90_tensor_core_fp8), s = RN(S c) with c =
// RN(RN(RN(descale_q scale) descale_k) log2 e); P = e4m3 satfinite of
// ex2(s - RN(m - lg2 scale_s)), unnormalized; l_t = FFMA(sum_t, rcp scale_s,
// RN(l_t alpha)); P V on the fp8 unit with RN(O alpha) as its C; O = e4m3
// satfinite of O * RN(rcp(l) RN(RN(descale_s descale_v) scale_o)); Stats
// as the bf16 kernel's L. Every fp32 operation .ftz, MUFU .ftz. Captured
// with N_q = N_k from 256 to 1024, d 64 and 128, causal (top-left) and not
// (tests/data/attention_fp8).
inline kernel_description cudnn_sdpa_fp8_sm90_description() {
  // The softmax of cuDNN's generated bf16 kernel (its SASS: the exponent's units, .ftz, MUFU, the
  // per-thread sums, O * MUFU.RCP(l), the same L), with fp8 operands and the fp8 unit.
  kernel_description d = pytorch_sdpa_cudnn_sm90_description();
  d.name = "cudnn_sdpa_fp8_sm90";
  d.summary = "cuDNN 9.19's fp8 SDPA forward (sdpa_fp8, Transformer Engine's path) on sm_90: e4m3 Q, K, V with "
              "descales, e4m3 O, fp32 Stats";
  d.tiles = {{64, {64, 256}}, {128, {64, 256}}};
  d.min_query_rows = 1;  // the bf16 kernel's one-row refusal is of another kernel; fp8 one-row calls are not captured
  flash_kernel& a = d.arithmetic;
  a.tensor_core = sm90_tensor_core_fp8;
  a.inputs = e4m3;
  a.p_scale_rule = p_scaling::lg2_offset;
  a.p_format = e4m3;
  a.row_sum = row_sum_rule::thread_block_sums_descaled_fma;
  a.o_format = e4m3;
  return d;
}

// bitexact's FP8 flash-attention forward for Hopper (cuda/attention, its
// wgmma structure with e4m3_operands): FA2's arithmetic (pytorch_sdpa_flash_sm90's
// block order, 128-row blocks, max in raw score units, exp2f, thread partial row
// sums, masking steps) on e4m3 Q, K and V, with the call's fp8 scales: scale' =
// RN(RN(scale descale_q) descale_k) is the scale (c = RN(scale' log2 e) as FA2's
// host code, L = FFMA(m, scale', ...)); S a chain of k32 steps of the fp8 unit
// over d from +0; l sums the fp32 P; P-bar = e4m3 satfinite of RN(P scale_s)
// (p_scaling multiply); P V a chain of k32 steps over the block's keys with
// RN(O alpha) as C (the kernel permutes the keys within each group of 32 for its
// registers: a k32 step's sum does not depend on its products' order, so no
// field says so); O = bf16 of RN(O RN(RN(1 / l) o_scale)), o_scale =
// RN(RN(descale_s descale_v) scale_o). Two choices of its own, which its
// captures show (tests/data/flash_fp8, 0 mismatches; with PyTorch's they miss):
// K/V blocks of 128 keys at d 128 too (e4m3_operands::key_block), and the
// exponent as one FFMA(S, c, -RN(m c)) (softmax_block's Fused). And one no
// bit can show: P from MUFU.EX2 alone (exponential ex2.approx.ftz.f32 for P,
// the stabilized presets excepted), alpha from exp2f. No split-KV path: the
// single kernel's tiles at any shape.
inline kernel_description bitexact_flash_fp8_sm90_description() {
  kernel_description d = pytorch_sdpa_flash_sm90_description();
  d.name = "bitexact_flash_fp8_sm90";
  d.summary = "bitexact's FP8 flash-attention forward for Hopper (cuda/attention, e4m3 Q K V, bf16 O), sm_90";
  d.tiles.at(128).block_n = 128;
  d.split = split_policy::none;
  d.split_tiles.clear();
  flash_kernel& a = d.arithmetic;
  a.unfused_scale = false;
  a.tensor_core = sm90_tensor_core_fp8;
  a.inputs = e4m3;
  a.p_format = e4m3;
  a.p_scale_rule = p_scaling::multiply;
  a.exponential = exponential_unit::ex2_approx_ftz_f32_for_p;
  return d;
}

// The same with the paper's stabilized softmax (Algorithm 3) in each K/V block.
inline kernel_description bitexact_flash_fp8_sm90_stabilized_description() {
  kernel_description d = bitexact_flash_fp8_sm90_description();
  d.name = "bitexact_flash_fp8_sm90_stabilized";
  d.summary = "the same FP8 kernel with the paper's stabilized softmax (Algorithm 3) in each K/V block";
  d.arithmetic.stabilize = pytorch_sdpa_flash_sm90_stabilized_description().arithmetic.stabilize;
  d.arithmetic.exponential = exponential_unit::ex2_approx_f32;  // beta m can leave a row's every P subnormal
  return d;
}

// The rule on the row's largest score so far (stabilized_max::across_blocks).
inline kernel_description bitexact_flash_fp8_sm90_stabilized_across_blocks_description() {
  kernel_description d = bitexact_flash_fp8_sm90_description();
  d.name = "bitexact_flash_fp8_sm90_stabilized_across_blocks";
  d.summary = "the same FP8 kernel with the rule on the row's largest score so far (needs a positive scale)";
  d.arithmetic.stabilize = pytorch_sdpa_flash_sm90_stabilized_across_blocks_description().arithmetic.stabilize;
  d.arithmetic.exponential = exponential_unit::ex2_approx_f32;
  return d;
}

// The same FP8 kernel with each K/V block's P V from +0 and one FADD into O
// (its pv_fp32_add variant): O's running sum leaves the fp8 unit's window.
inline kernel_description bitexact_flash_fp8_sm90_pv_fp32_add_description() {
  kernel_description d = bitexact_flash_fp8_sm90_description();
  d.name = "bitexact_flash_fp8_sm90_pv_fp32_add";
  d.summary = "the same FP8 kernel with each K/V block's P V from +0, then one FADD into O (pv_fp32_add)";
  d.arithmetic.pv = pv_accumulation::fp32_add;
  return d;
}

// The pv_fp32_add variant with l summed from the P-bar P V takes (its
// p_bar_sum variant): O's weights are P-bar over their own sum, so neither the
// fp8 unit's window nor P-bar's e4m3 rounding against an l of the fp32 P biases O.
inline kernel_description bitexact_flash_fp8_sm90_pv_fp32_add_p_bar_sum_description() {
  kernel_description d = bitexact_flash_fp8_sm90_pv_fp32_add_description();
  d.name = "bitexact_flash_fp8_sm90_pv_fp32_add_p_bar_sum";
  d.summary = "the pv_fp32_add FP8 kernel with l summed from the e4m3 P-bar P V takes (p_bar_sum)";
  d.arithmetic.row_sum = row_sum_rule::thread_partials_of_p_bar;
  return d;
}

// PyTorch's scaled_dot_product_attention flash backend on sm_90 for one call:
// its description above resolved for the shape, with the
// split count of its heuristic on the GPU. scale: the caller's, or PyTorch's default.
inline flash_kernel pytorch_sdpa_flash_sm90(const attention_shape& shape, std::optional<float32> scale = {},
                                            const gpu& device = default_gpu()) {
  return resolve(pytorch_sdpa_flash_sm90_description(), shape,
                 {scale ? std::optional<double>(to_host(*scale)) : std::nullopt, device, {}, {}});
}

// The paper's stabilized softmax on the same kernel arithmetic and the same
// path choice as pytorch_sdpa_flash_sm90, with the given rule.
inline flash_kernel pytorch_sdpa_flash_sm90_stabilized(const attention_shape& shape, std::optional<float32> scale = {},
                                                       stabilized_max rule = {}, const gpu& device = default_gpu()) {
  flash_kernel kernel = pytorch_sdpa_flash_sm90(shape, scale, device);
  kernel.stabilize = rule;
  return kernel;
}

// The same with the rule applied across K/V blocks (stabilized_max::across_blocks).
inline flash_kernel pytorch_sdpa_flash_sm90_stabilized_across_blocks(const attention_shape& shape,
                                                                     std::optional<float32> scale = {},
                                                                     stabilized_max rule = {}, const gpu& device = default_gpu()) {
  rule.across_blocks = true;
  return pytorch_sdpa_flash_sm90_stabilized(shape, scale, rule, device);
}

// What a preset name stands for.
enum class preset_kind {
  gpu_kernel,                  // a kernel_description, run by flash_forward
  paper_reference,             // the paper's flash attention in PyTorch (paper_reference.hpp)
  paper_reference_stabilized,  // the same with its stabilized path
  paper_reference_fp64,        // softmax attention in double
};

struct preset {
  std::string_view name;
  preset_kind kind;
  std::string_view summary;
  kernel_description (*description)() = nullptr;  // gpu_kernel only
};

// Every preset; the first is the default.
inline std::span<const preset> presets() {
  static const preset table[] = {
      {"pytorch_sdpa_flash_sm90", preset_kind::gpu_kernel, "", pytorch_sdpa_flash_sm90_description},
      {"pytorch_sdpa_flash_sm90_stabilized", preset_kind::gpu_kernel, "",
       pytorch_sdpa_flash_sm90_stabilized_description},
      {"pytorch_sdpa_flash_sm90_stabilized_across_blocks", preset_kind::gpu_kernel, "",
       pytorch_sdpa_flash_sm90_stabilized_across_blocks_description},
      {"flex_attention_sm90", preset_kind::gpu_kernel, "", flex_attention_sm90_description},
      {"pytorch_sdpa_efficient_sm90", preset_kind::gpu_kernel, "", pytorch_sdpa_efficient_sm90_description},
      {"pytorch_sdpa_cudnn_sm90", preset_kind::gpu_kernel, "", pytorch_sdpa_cudnn_sm90_description},
      {"cudnn_sdpa_fp8_sm90", preset_kind::gpu_kernel, "", cudnn_sdpa_fp8_sm90_description},
      {"bitexact_flash_fp8_sm90", preset_kind::gpu_kernel, "", bitexact_flash_fp8_sm90_description},
      {"bitexact_flash_fp8_sm90_stabilized", preset_kind::gpu_kernel, "",
       bitexact_flash_fp8_sm90_stabilized_description},
      {"bitexact_flash_fp8_sm90_stabilized_across_blocks", preset_kind::gpu_kernel, "",
       bitexact_flash_fp8_sm90_stabilized_across_blocks_description},
      {"bitexact_flash_fp8_sm90_pv_fp32_add", preset_kind::gpu_kernel, "",
       bitexact_flash_fp8_sm90_pv_fp32_add_description},
      {"bitexact_flash_fp8_sm90_pv_fp32_add_p_bar_sum", preset_kind::gpu_kernel, "",
       bitexact_flash_fp8_sm90_pv_fp32_add_p_bar_sum_description},
      {"paper_reference", preset_kind::paper_reference,
       "the paper's own flash attention in PyTorch (attention.py, 512 x 512 tiles, under bf16 autocast as its "
       "train.py runs it; not a GPU kernel's bits)"},
      {"paper_reference_stabilized", preset_kind::paper_reference_stabilized,
       "the same with its stabilized path"},
      {"paper_reference_fp64", preset_kind::paper_reference_fp64,
       "softmax attention in double, the value errors are measured against"},
  };
  return table;
}

// A preset's one-line summary (a GPU kernel's is its description's).
inline std::string preset_summary(const preset& p) {
  return p.description != nullptr ? p.description().summary : std::string(p.summary);
}

// The names of the presets that pass, comma-separated, for messages.
template <class Predicate>
std::string preset_names_where(Predicate&& passes) {
  std::string names;
  for (const preset& p : presets())
    if (passes(p)) names += (names.empty() ? "" : ", ") + std::string(p.name);
  return names;
}

// The names, comma-separated, for messages.
inline std::string preset_names() {
  return preset_names_where([](const preset&) { return true; });
}

// The presets with the paper's stabilized rule.
inline std::string stabilized_preset_names() {
  return preset_names_where([](const preset& p) {
    return p.description ? p.description().arithmetic.stabilize.has_value()
                         : p.kind == preset_kind::paper_reference_stabilized;
  });
}

// The paper's presets that run under torch.autocast or not.
inline std::string autocast_preset_names() {
  return preset_names_where([](const preset& p) {
    return p.kind == preset_kind::paper_reference || p.kind == preset_kind::paper_reference_stabilized;
  });
}

// The GPU kernels with FA2's arithmetic in bf16: those the leading indicator follows.
inline std::string flash2_preset_names() {
  return preset_names_where([](const preset& p) {
    return p.description && has_flash2_arithmetic(p.description().arithmetic);
  });
}

// The GPU kernels whose O the explanations trace (explainable).
inline std::string explainable_preset_names() {
  return preset_names_where([](const preset& p) { return p.description && explainable(p.description().arithmetic); });
}

// The preset called name; std::invalid_argument listing the names otherwise.
inline const preset& find_preset(std::string_view name) {
  const auto all = presets();
  const auto found = std::find_if(all.begin(), all.end(), [&](const preset& p) { return p.name == name; });
  if (found == all.end())
    throw std::invalid_argument("unknown preset '" + std::string(name) + "'; the presets are: " + preset_names());
  return *found;
}

// The first preset of a kind (the registry's order).
inline const preset& first_preset(preset_kind kind) {
  const auto all = presets();
  return *std::find_if(all.begin(), all.end(), [&](const preset& p) { return p.kind == kind; });
}

// The description of a GPU kernel preset; std::invalid_argument for a paper preset.
inline kernel_description find_kernel(std::string_view name) {
  const preset& p = find_preset(name);
  if (p.description == nullptr)
    throw std::invalid_argument("preset " + std::string(name) + " is the paper's PyTorch arithmetic, not a GPU kernel");
  return p.description();
}

}  // namespace bitexact::attention
