// An attention kernel's arithmetic as data: every choice that decides the bits
// of a flash-attention forward pass, named after what the kernel does. A
// kernel_description is what a user writes (attention/kernel_json.hpp reads
// and writes it as JSON, attention/kernels.hpp names the known ones);
// resolve() turns it and one call's shape into the flash_kernel that the one
// emulator, flash_forward.hpp, reads.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "../core/format.hpp"
#include "../hardware/alu.hpp"
#include "../hardware/gpu.hpp"
#include "../hardware/mma.hpp"
#include "shape.hpp"

namespace bitexact::attention {

// The order in which one row block visits its K/V blocks.
enum class block_order {
  last_to_first,  // FlashAttention-2 (flash_fwd_kernel.h): from the last block down
  first_to_last,  // Triton's tutorial kernel: from block 0 up to the causal limit
  // FlexAttention's template: the block mask's partially masked blocks first,
  // then its full ones, each list ascending, mask_block keys a mask block.
  mask_partial_then_full,
};

// Where the softmax scale enters the scores.
enum class scale_placement {
  exponent,  // c = RN(scale * log2(e)) multiplies S inside the exponent (FA2, Triton's tutorial)
  scores,    // S * scale, then * log2(e), two FMULs on every score before the max (FlexAttention)
};

// The units of the running row max m, and so of alpha = ex2(m_old - m).
enum class max_units {
  scores,    // raw S (FA2): alpha = ex2(RN(RN(m_old - m) * c))
  exponent,  // the exponent's units (Triton): m = RN(rowmax(S) * c), alpha = ex2(RN(m_old - m))
};

// The exponential unit: nvcc's exp2f (MUFU.EX2 in its non-FTZ wrapper) or
// Triton's tl.math.exp2 (ex2.approx.ftz.f32, MUFU.EX2 alone); or, our FP8
// kernel's standard rule, MUFU.EX2 alone for P and exp2f for alpha: its P
// below 2^-126 would be 0 in e4m3 anyway (scale_s is at most 448), and l,
// which holds the row max's P near 1, loses it either way, so only the alpha
// of a max grown past 126 / scale_log2 (O's C in the fp8 unit) needs the subnormal.
enum class exponential_unit { ex2_approx_f32, ex2_approx_ftz_f32, ex2_approx_ftz_f32_for_p };

// How the row sum l is kept.
enum class row_sum_rule {
  // FA2: each of the quad's four threads keeps its own partial sum over every
  // block (its columns 8j + 2t + {0,1} in order; on later blocks the rescale
  // is fused into the first addition, FFMA(alpha, l_t, p)), joined once at
  // the end as (l_0 + l_2) + (l_1 + l_3).
  thread_partials_across_blocks,
  // Triton's tl.sum: each block's P summed per thread in the same column
  // order from its first element, joined by butterfly shuffles xor 2 then
  // xor 1, then l = FFMA(l, alpha, block_sum) (LLVM contracts l * alpha + s).
  block_sum_then_fma,
  // CUTLASS's memory-efficient kernel (iterative_softmax): each warp's 32
  // columns of the block summed per thread from +0 over its columns
  // 8j + 2t + {0,1}, joined as (t0 + t1) + (t2 + t3); l times alpha (one FMUL,
  // only when the max grew), then each warp's sum added in column order.
  warp_slices_then_add,
  // cuDNN's generated Hopper kernel: each thread's block sum from +0 over its
  // columns 8j + 2t + {0,1}, kept per thread as l_t = FFMA(alpha, l_t, sum),
  // the four joined once at the end as (l_0 + l_1) + (l_2 + l_3).
  thread_block_sums_fma,
  // cuDNN's generated fp8 kernel: the same per-thread block sums of the fp32 P
  // (before their fp8 conversion), each folded in as l_t = FFMA(sum,
  // MUFU.RCP(scale_s), RN(l_t * alpha)), which undoes p_scaling's scale_s;
  // joined (l_0 + l_1) + (l_2 + l_3) (SASS: FMUL, then FFMA with the
  // constant bank's rcp; SHFL.BFLY 1 then 2; cuda/capture/README.md).
  thread_block_sums_descaled_fma,
  // FA2's thread partials across blocks (the order, fusion and join above)
  // of the P-bar P V takes rather than the fp32 P: each e4m3 P-bar decoded
  // (exactly), so l is in scale_s's units, and the joined sum times the
  // call's descale_s (one FMUL), so that O's factor RN(RN(1 / l) * o_scale)
  // and L keep FA2's fp8 formulas. O's weights are then P-bar over their own
  // sum. bitexact's FP8 kernel's p_bar_sum variant (docs/rounding-bias.md, section 7).
  thread_partials_of_p_bar,
};

// O and the row sums are multiplied by alpha = ex2(m_old - m) after every
// block, however the kernel writes it: CUTLASS's memory-efficient kernel
// multiplies only when the max grew, but alpha is then exactly 1, and x * 1 = x,
// FFMA(l, 1, s) = l + s (a max of +-inf has made the row NaN already). So no
// field says when.

// A row with every score so far masked (m = -inf).
enum class masked_max_rule {
  flash2,      // FA2's masking steps and Check_inf (mask.h, softmax.h): scaled max 0 while m = -inf
  zero_shift,  // Triton: every block masked, and the max subtracted is 0 while m = -inf
  unshifted,   // every block masked, and the max subtracted as it is, -inf too (CUTLASS's kernel)
};

// How O is divided by l at the end.
enum class normalization {
  reciprocal_then_multiply,  // FA2: O * RN(1 / l), the inverse 1 when l is 0 or NaN
  div_full_f32,              // Triton's O / l (div.full.f32), l replaced by 1 when it is 0
  // cuDNN's O * MUFU.RCP(l), 0 when l is 0; with an fp8 O, O * RN(MUFU.RCP(l) * o_scale)
  rcp_approx_then_multiply,
};

// What P is before its conversion for P V. P is never normalized inside a
// flash kernel (that is the epilogue's division by l): a P divided by l before
// its conversion (the composite graph cudnn-frontend documents for fp8) is no
// kernel we capture, and misses most fp8 O bits (docs/attention.md).
enum class p_scaling {
  none,  // ex2(x - m): the row max's P is 1 (every bf16 kernel)
  // ex2(RN(x - RN(m - MUFU.LG2(scale_s)))): the row max's P is scale_s, so that
  // P fills fp8's range (448 in Transformer Engine's recipe); l takes it back
  // out (row_sum thread_block_sums_descaled_fma), O's descale_s undoes it in
  // P V. cuDNN's fp8 kernel (SASS: FADD of the constant bank's lg2).
  lg2_offset,
  // P-bar = cvt(RN(P * scale_s)): FA2's P (max_units scores) times the call's
  // scale_s in one FMUL before its fp8 conversion, so that the row max's P of 1
  // is stored as scale_s (256 by default: P down to 2^-18 survives e4m3, and a
  // power of two changes no bit otherwise); l sums the unscaled P, and
  // descale_s undoes scale_s in O's factor (o_scale). bitexact's FP8 flash
  // kernel (cuda/attention).
  multiply,
};

// How the rescaled O meets a block's P V.
enum class pv_accumulation {
  // RN(O * alpha) is C of the first tensor-core step of P V's chain: every
  // captured kernel (FA2's gemm into acc_o, cuDNN's wgmma with its
  // accumulator; fp8 captures: adding after misses, docs/attention.md).
  c_operand,
  // P V's chain from +0, then added to RN(O * alpha) by one fp32 FADD: a
  // kernel that keeps the block's product apart (none captured).
  fp32_add,
};

// How L, the row's logsumexp, is formed.
enum class lse_formula {
  flash2,          // FFMA(m, scale, RN(lg2.approx(l) * ln 2)), natural-log units; +inf for l 0 or NaN
  max_plus_log2f,  // RN(m + __nv_log2f(l)) in the exponent's units (base 2), l 0 taken as 1
  // RN(RN(m / log2_e) + __nv_logf(l)), natural-log units, m -inf taken as 0 and
  // l 0 as 1 (CUTLASS's memory-efficient kernel)
  max_over_log2e_plus_logf,
  // FFMA(m, RN(ln 2), RN(lg2.approx(l) * RN(ln 2))), natural-log units, -inf for l 0 (cuDNN)
  max_ln2_plus_lg2_ln2,
};

// The split-KV path.
enum class split_policy {
  none,              // one pass over every block
  flash2_heuristic,  // flash-attention's num_splits_heuristic, the split kernel's tiles, the combine kernel
};

// A causal call with fewer query rows than keys (or more): which keys a row
// sees. The two agree when N_q = N_k.
enum class causal_alignment {
  bottom_right,  // row i sees keys j <= i + N_k - N_q (flash-attention 2; a row may see none)
  top_left,      // row i sees keys j <= i (scaled_dot_product_attention's is_causal)
};

// One call's kernel, resolved from a description and the call's shape: what
// the emulator reads.
struct flash_kernel {
  int block_m = 128;  // query rows of one thread block (the causal block range depends on it)
  int block_n = 64;   // keys of one K/V block
  int splits = 1;     // 1: one pass; more: split-KV, then the combine kernel
  fused_sum_unit tensor_core = sm90_tensor_core;
  block_order order = block_order::last_to_first;
  int mask_block = 128;  // mask_partial_then_full: the block mask's block, in rows and keys
  scale_placement placement = scale_placement::exponent;
  max_units max_in = max_units::scores;
  // The exponent of a score: a rounded multiply and then the max subtracted
  // (PyTorch compiles FA2 with UNFUSE_FMA), or one FFMA. scale_placement::scores
  // subtracts after its two multiplies, whatever this says.
  bool unfused_scale = true;
  exponential_unit exponential = exponential_unit::ex2_approx_f32;
  row_sum_rule row_sum = row_sum_rule::thread_partials_across_blocks;
  masked_max_rule masked_max = masked_max_rule::flash2;
  normalization normalize = normalization::reciprocal_then_multiply;
  lse_formula lse = lse_formula::flash2;
  bool lse_natural_units = true;  // max_plus_log2f: multiplied by RN(ln 2) after (FlexAttention's wrapper)
  // The exponent-units path's fp32 operations flush subnormals (.ftz, cuDNN's generated kernels).
  bool alu_ftz = false;
  float32 scale{};       // natural-log units; FA2's fp8 recipe: with descale_q and descale_k in it (resolve)
  float32 scale_log2{};  // scale_placement::exponent: RN(scale * log2(e)), the exponent's scale
  float32 log2_e = from_host(1.44269504f);  // scale_placement::scores: the second multiply's constant
  std::optional<stabilized_max> stabilize;  // the paper's Algorithm 3; FA2 arithmetic only
  causal_alignment causal = causal_alignment::bottom_right;
  // Q, K and V: bf16, or e4m3 or e5m2 (all three one format) on an fp8 tensor
  // core, their descales folded into the scores' scale (resolve) and o_scale.
  format inputs = bf16;
  // What P V takes P as: bf16 (cvt.rn.bf16.f32) or e4m3
  // (cvt.rn.satfinite.e4m3x2.f32, ptx::cvt_rn_satfinite_e4m3_f32).
  format p_format = bf16;
  p_scaling p_scale_rule = p_scaling::none;
  pv_accumulation pv = pv_accumulation::c_operand;
  // O as written: bf16 (cvt.rn), or e4m3 (cvt.rn.satfinite); an fp8 kernel's
  // O is multiplied by o_scale first, inside its factor RN(1 / l) or rcp(l).
  format o_format = bf16;
  // The call's, set by resolve() (fp8 kernels; 1 otherwise): scale_s, the
  // scale P is stored with, and o_scale = RN(RN(descale_s * descale_v) * scale_o).
  float32 p_scale = from_host(1.0f);
  float32 o_scale = from_host(1.0f);
  float32 p_descale = from_host(1.0f);  // the call's descale_s (row_sum thread_partials_of_p_bar)
};

// The format an fp8 call's tensors take: e4m3 or e5m2.
inline bool is_fp8(format f) { return f == e4m3 || f == e5m2; }

namespace detail {

// FA2's thread partials across blocks, of P or (fp8) of P-bar.
inline bool sums_thread_partials(row_sum_rule rule) {
  return rule == row_sum_rule::thread_partials_across_blocks || rule == row_sum_rule::thread_partials_of_p_bar;
}

// FA2's softmax, row sums, normalisation and L, whatever the inputs.
inline bool has_flash2_fields(const flash_kernel& kernel) {
  return kernel.order == block_order::last_to_first && kernel.placement == scale_placement::exponent &&
         kernel.max_in == max_units::scores && sums_thread_partials(kernel.row_sum) &&
         kernel.masked_max == masked_max_rule::flash2 && kernel.normalize == normalization::reciprocal_then_multiply &&
         kernel.lse == lse_formula::flash2;
}

}  // namespace detail

// FlashAttention-2's arithmetic throughout, in bf16: the models built on its
// structure (rounding_sites.hpp, repeated_max.hpp) take only these.
inline bool has_flash2_arithmetic(const flash_kernel& kernel) {
  return detail::has_flash2_fields(kernel) && kernel.row_sum == row_sum_rule::thread_partials_across_blocks &&
         kernel.exponential == exponential_unit::ex2_approx_f32 && kernel.inputs == bf16;
}

// FA2's arithmetic on fp8 inputs with bf16 O: bitexact's FP8 kernel
// (check_flash2_fp8_recipe), P-bar e4m3 on the fp8 tensor core, P from
// exp2f or MUFU.EX2 alone.
inline bool has_flash2_fp8_recipe(const flash_kernel& kernel) {
  return detail::has_flash2_fields(kernel) && kernel.exponential != exponential_unit::ex2_approx_ftz_f32 &&
         is_fp8(kernel.inputs) && kernel.o_format == bf16;
}

// The kernels whose elements of O an explanation traces (attention/explain.hpp):
// FA2's arithmetic, in bf16 or as its fp8 recipe.
inline bool explainable(const flash_kernel& kernel) {
  return has_flash2_arithmetic(kernel) || has_flash2_fp8_recipe(kernel);
}

namespace detail {

// cuDNN's fp8 recipe (max_units exponent), field by field (cuda/capture/README.md); no capture shows another.
inline void check_cudnn_fp8_recipe(const flash_kernel& kernel) {
  const auto refuse = [](const std::string& what) { throw std::invalid_argument("kernel: " + what); };
  const std::string fp8 = "with " + std::string(name_of(kernel.inputs)) + " inputs and max_units exponent ";
  if (kernel.p_format != e4m3) refuse("p_rounding must be cvt.rn.satfinite.e4m3x2.f32 " + fp8 + "(cuDNN's fp8 recipe)");
  if (kernel.o_format != e4m3) refuse("o_rounding must be cvt.rn.satfinite.e4m3x2.f32 " + fp8 + "(cuDNN's fp8 O on sm_90)");
  if (kernel.p_scale_rule != p_scaling::lg2_offset) refuse("p_scale must be lg2_offset " + fp8 + "(cuDNN's fp8 recipe)");
  if (kernel.row_sum != row_sum_rule::thread_block_sums_descaled_fma)
    refuse("row_sum must be thread_block_sums_descaled_fma " + fp8 + "(it undoes p_scale)");
  if (kernel.placement != scale_placement::exponent)
    refuse("scale_placement must be exponent " + fp8 + "(the descales fold into the exponent's scale)");
  if (kernel.normalize != normalization::rcp_approx_then_multiply)
    refuse("normalization must be rcp.approx.ftz.f32 " + fp8 + "(o_scale enters with the reciprocal)");
  if (kernel.lse != lse_formula::max_ln2_plus_lg2_ln2)
    refuse("lse_formula must be max_ln2_plus_lg2_ln2 " + fp8 + "(cuDNN's fp8 recipe)");
  // A subnormal P is 0 in e4m3, and the .ftz sums and products flush it: FTZ on the exponential shows nowhere.
  if (kernel.exponential != exponential_unit::ex2_approx_ftz_f32)
    refuse("exponential ex2.approx.f32 gives the bits of ex2.approx.ftz.f32 " + fp8 +
           "(a subnormal P is 0 in e4m3 and flushed by the .ftz sums): write ex2.approx.ftz.f32");
}

// bitexact's FP8 flash kernel (max_units scores): FA2's arithmetic throughout,
// P-bar = e4m3(RN(P * scale_s)), P V on the fp8 unit with RN(O alpha) as C,
// O = bf16(RN(O * RN(RN(1 / l) * o_scale))) (cuda/attention, docs/attention.md).
inline void check_flash2_fp8_recipe(const flash_kernel& kernel) {
  const auto refuse = [](const std::string& what) { throw std::invalid_argument("kernel: " + what); };
  const std::string fp8 = "with " + std::string(name_of(kernel.inputs)) + " inputs and max_units scores ";
  if (kernel.p_format != e4m3)
    refuse("p_rounding must be cvt.rn.satfinite.e4m3x2.f32 " + fp8 + "(P V's A on the fp8 tensor core)");
  if (kernel.p_scale_rule != p_scaling::multiply)
    refuse("p_scale must be multiply " + fp8 + "(FA2's fp8 recipe: P-bar = cvt(RN(P * scale_s)))");
  if (kernel.o_format != bf16) refuse("o_rounding must be cvt.rn.bf16.f32 " + fp8 + "(FA2's fp8 recipe writes bf16 O)");
  // pv_accumulation: c_operand (our kernel, RN(O alpha) is C of P V's first step) or fp32_add (each
  // block's P V from +0, then one FADD: the promotion that keeps O's running sum out of the fp8 unit's
  // 13-bit window, docs/rounding-bias.md), both computed.
  if (!sums_thread_partials(kernel.row_sum))
    refuse("row_sum must be thread_partials_across_blocks or thread_partials_of_p_bar " + fp8 +
           "(FA2's sums, of the unscaled P or of P-bar)");
  if (kernel.normalize != normalization::reciprocal_then_multiply)
    refuse("normalization must be reciprocal_then_multiply " + fp8 + "(o_scale joins RN(1 / l))");
  if (kernel.lse != lse_formula::flash2) refuse("lse_formula must be flash2 " + fp8 + "(FA2's fp8 recipe)");
  // P from MUFU.EX2 alone or from exp2f: the same bits under the standard max,
  // so one name for it (as cuDNN's recipe); not under a stabilized one.
  if (kernel.exponential == exponential_unit::ex2_approx_ftz_f32)
    refuse("exponential ex2.approx.ftz.f32 would flush alpha too " + fp8 +
           "(alpha is FA2's exp2f): write ex2.approx.ftz.f32 for P, or with a stabilize rule ex2.approx.f32");
  if (kernel.exponential == exponential_unit::ex2_approx_ftz_f32_for_p && kernel.stabilize)
    refuse("exponential ex2.approx.ftz.f32 for P needs no stabilize rule " + fp8 +
           "(a stabilized max can leave every P of a row subnormal, and L then shows it)");
  if (kernel.exponential == exponential_unit::ex2_approx_f32 && !kernel.stabilize)
    refuse("exponential ex2.approx.f32 gives the bits of ex2.approx.ftz.f32 for P " + fp8 +
           "and no stabilize rule (a P below 2^-126 is 0 in e4m3 and lost in l): write "
           "ex2.approx.ftz.f32 for P");
}

}  // namespace detail

// The formats and the two fp8 recipes: bf16 kernels as before; fp8 ones as
// cuDNN's fp8 kernel computes (max_units exponent, the one captured) or as
// bitexact's FP8 flash kernel does (max_units scores: FA2's arithmetic);
// std::invalid_argument naming the first field that is neither.
inline void check_precision_fields(const flash_kernel& kernel) {
  const auto refuse = [](const std::string& what) { throw std::invalid_argument("kernel: " + what); };
  const tensor_core_instruction* unit = tensor_core_instruction_of(kernel.tensor_core);
  const std::string unit_name = unit ? std::string(unit->unit_name) : std::string("this tensor core");
  if (kernel.inputs != bf16 && !is_fp8(kernel.inputs))
    refuse("inputs must be bf16, e4m3 or e5m2, not " + std::string(name_of(kernel.inputs)));
  if (unit && !unit->takes(kernel.inputs))
    refuse("tensor_core " + unit_name + " does not take " + std::string(name_of(kernel.inputs)) +
           " inputs (sm90 and sm90_k8 take bf16, sm90_fp8 e4m3 and e5m2)");
  if (kernel.exponential == exponential_unit::ex2_approx_ftz_f32_for_p && !(is_fp8(kernel.inputs) &&
                                                                             kernel.max_in == max_units::scores))
    refuse("exponential ex2.approx.ftz.f32 for P is FA2's fp8 recipe's (fp8 inputs, max_units scores)");
  if (kernel.inputs == bf16) {
    if (kernel.p_format != bf16) refuse("p_rounding to e4m3 needs fp8 inputs (bf16 inputs take P as bf16)");
    if (kernel.o_format != bf16) refuse("o_rounding to e4m3 needs fp8 inputs");
    if (kernel.p_scale_rule != p_scaling::none)
      refuse(std::string("p_scale ") + (kernel.p_scale_rule == p_scaling::lg2_offset ? "lg2_offset" : "multiply") +
             " is modelled with fp8 inputs only");
    if (kernel.row_sum == row_sum_rule::thread_block_sums_descaled_fma)
      refuse("row_sum thread_block_sums_descaled_fma goes with p_scale lg2_offset (fp8 inputs)");
    if (kernel.row_sum == row_sum_rule::thread_partials_of_p_bar)
      refuse("row_sum thread_partials_of_p_bar sums an e4m3 P-bar (fp8 inputs, max_units scores)");
    return;
  }
  if (kernel.max_in == max_units::exponent) detail::check_cudnn_fp8_recipe(kernel);
  else detail::check_flash2_fp8_recipe(kernel);
}

// The combinations of a flash_kernel's arithmetic fields the emulator
// computes, whatever its tiles; std::invalid_argument naming the first field
// that is not, and why.
inline void check_arithmetic_fields(const flash_kernel& kernel) {
  const auto refuse = [](const std::string& what) { throw std::invalid_argument("kernel: " + what); };
  const bool exponent_max = kernel.max_in == max_units::exponent;
  if (kernel.placement == scale_placement::scores && !exponent_max)
    refuse("max_units must be exponent when scale_placement is scores (the max is taken of the scaled scores)");
  if (exponent_max != (kernel.masked_max != masked_max_rule::flash2))
    refuse("masked_max zero_shift or unshifted goes with max_units exponent, flash2 with max_units scores");
  if (exponent_max == detail::sums_thread_partials(kernel.row_sum))
    refuse("row_sum block_sum_then_fma, warp_slices_then_add or thread_block_sums_fma goes with max_units exponent, "
           "thread_partials_across_blocks or thread_partials_of_p_bar with scores");
  if (exponent_max != (kernel.lse != lse_formula::flash2))
    refuse("lse_formula max_plus_log2f, max_over_log2e_plus_logf or max_ln2_plus_lg2_ln2 goes with max_units exponent, "
           "flash2 with scores");
  if ((kernel.lse == lse_formula::max_over_log2e_plus_logf || kernel.lse == lse_formula::max_ln2_plus_lg2_ln2) &&
      !kernel.lse_natural_units)
    refuse("lse_units must be natural with lse_formula max_over_log2e_plus_logf or max_ln2_plus_lg2_ln2");
  if (kernel.alu_ftz && !exponent_max) refuse("alu_ftz is modelled with max_units exponent only");
  // div.full.f32 is O * MUFU.RCP(l) too, l scaled first only where l >= 2^126
  // or l < 2^-126, which a row sum never is (its max's P is 1), and a row
  // sum of 0 gives O = 0 or NaN either way: only FTZ on O's multiply differs.
  if (kernel.normalize == normalization::rcp_approx_then_multiply && !kernel.alu_ftz)
    refuse("normalization rcp.approx.ftz.f32 without alu_ftz gives the bits of div.full.f32 (both O * MUFU.RCP(l)): "
           "write div.full.f32");
  if (kernel.masked_max == masked_max_rule::flash2 && kernel.order != block_order::last_to_first)
    refuse("masked_max flash2 (FA2's masking steps) needs block_order last_to_first");
  if (kernel.stabilize && exponent_max) refuse("stabilize is modelled on FA2's arithmetic (max_units scores) only");
  check_precision_fields(kernel);
}

// A call's tiles and split count against the arithmetic; std::invalid_argument saying why not.
inline void check_tiles(const flash_kernel& kernel) {
  const auto refuse = [](const std::string& what) { throw std::invalid_argument("kernel: " + what); };
  if (kernel.row_sum == row_sum_rule::warp_slices_then_add && kernel.block_n % 32 != 0)
    refuse("row_sum warp_slices_then_add needs block_n a multiple of 32");
  if (kernel.splits > 1 && (kernel.order != block_order::last_to_first || kernel.max_in == max_units::exponent))
    refuse("split-KV (splits > 1) is FA2's path: block_order last_to_first, max_units scores");
  if (kernel.splits > 1 && is_fp8(kernel.inputs))
    refuse("split-KV (splits > 1) is modelled for bf16 inputs only (its combine kernel writes bf16 O from bf16 P V)");
  // The block mask's lists decide which K/V blocks a row visits: a thread
  // block of fewer rows than the mask's block would change no bit.
  if (kernel.order == block_order::mask_partial_then_full &&
      (kernel.mask_block != kernel.block_m || kernel.mask_block % kernel.block_n != 0))
    refuse("block_order mask_partial_then_full needs block_m equal to mask_block (" + std::to_string(kernel.mask_block) +
           ") and block_n dividing it");
}

// Every combination check of a resolved kernel: its fields, then its tiles.
inline void check_arithmetic(const flash_kernel& kernel) {
  check_arithmetic_fields(kernel);
  check_tiles(kernel);
}

// The exponent's scale: the float scale times log2(e) in double, rounded once
// to float (set_params_fprop: scale_softmax * M_LOG2E).
inline float32 softmax_scale_log2(float32 scale) {
  constexpr double log2_e = 1.44269504088896340736;
  return from_host(static_cast<float>(static_cast<double>(to_host(scale)) * log2_e));
}

// The split heuristic of flash-attention's mha_fwd (num_splits_heuristic):
// split only while the blocks of rows do not fill 80% of the GPU's
// 2 * SM slots, and then take the fewest splits whose wave efficiency is
// within 85% of the best. Float arithmetic as written there.
inline int split_count_heuristic(int row_blocks, int slots, int key_blocks, int max_splits = 128) {
  if (static_cast<float>(row_blocks) >= 0.8f * static_cast<float>(slots)) return 1;
  max_splits = std::min({max_splits, slots, key_blocks});
  const auto ceil_div = [](int a, int b) { return (a + b - 1) / b; };
  // A split count that leaves the blocks per split unchanged is no better than one fewer.
  const auto eligible = [&](int s) { return s == 1 || ceil_div(key_blocks, s) != ceil_div(key_blocks, s - 1); };
  std::vector<float> efficiency(static_cast<std::size_t>(max_splits) + 1, 0.0f);
  float best = 0.0f;
  for (int s = 1; s <= max_splits; ++s) {
    if (!eligible(s)) continue;
    const float waves = static_cast<float>(row_blocks * s) / static_cast<float>(slots);
    efficiency[static_cast<std::size_t>(s)] = waves / std::ceil(waves);
    best = std::max(best, efficiency[static_cast<std::size_t>(s)]);
  }
  for (int s = 1; s <= max_splits; ++s)
    if (eligible(s) && static_cast<double>(efficiency[static_cast<std::size_t>(s)]) >= 0.85 * static_cast<double>(best))
      return s;
  return 1;
}

// How the exponent's scale c = scale * log2(e) is rounded to float.
enum class scale_log2_source {
  // RN(float scale * log2(e) in double) (FA2's set_params_fprop); fp8 inputs (FA2's recipe,
  // max_units scores): the float scale is first scale' = RN(RN(scale * descale_q) * descale_k),
  // which is then the kernel's scale throughout (L, the stabilized rule's tie test)
  float_scale,
  double_scale,   // RN(double scale * log2(e)) (a Triton launcher: scale * 1.4426950408889634 as a float argument)
  // RN(float scale * RN(log2 e)), one FMUL on the GPU (cuDNN's generated kernels); fp8 inputs:
  // RN(RN(RN(descale_q * scale) * descale_k) * RN(log2 e)) (cuDNN's fp8 kernel, the order of the
  // first two not pinned by its SASS: the captures agree with this one)
  float_product,
};

// A kernel's tiles for one head dim: rows of a thread block, keys of a K/V block.
struct tile_shape {
  int block_m = 0, block_n = 0;
};

// A kernel as a user describes it: its tiles per head dim and the arithmetic
// of flash_kernel, independent of any call. `arithmetic` carries every
// arithmetic field; its block_m, block_n, splits, scale and scale_log2 are
// set by resolve() for each call.
struct kernel_description {
  std::string name;
  std::string summary;  // one line: what kernel, which software, which GPU
  std::map<int, tile_shape> tiles;  // by head dim; a head dim not listed is refused
  split_policy split = split_policy::none;
  std::map<int, tile_shape> split_tiles;
  scale_log2_source scale_log2_from = scale_log2_source::float_scale;
  // Calls with fewer query rows run another kernel (FlexAttention's decoding
  // kernel below 128 rows) and are refused.
  int min_query_rows = 1;  // flash2_heuristic: the split kernel's tiles, by head dim
  flash_kernel arithmetic;
};

// fp8 inputs fold their descales into the scores' scale, each recipe its own
// way: cuDNN's (max_units exponent) into c on the GPU (float_product), FA2's
// (max_units scores) into the float scale, c then from it (float_scale). Why a
// description's scale_log2_from is not its recipe's, or none; a bf16
// description takes any.
inline std::optional<std::string> fp8_scale_source_refusal(const flash_kernel& arithmetic, scale_log2_source from) {
  if (!is_fp8(arithmetic.inputs) || arithmetic.placement != scale_placement::exponent) return std::nullopt;
  if (arithmetic.max_in == max_units::exponent && from != scale_log2_source::float_product)
    return "fp8 inputs with max_units exponent (cuDNN's recipe) fold their descales into the exponent's scale as "
           "float_product does; write float_product";
  if (arithmetic.max_in == max_units::scores && from != scale_log2_source::float_scale)
    return "fp8 inputs with max_units scores (FA2's recipe) fold their descales into the float scale, and c comes "
           "from it as FA2's float_scale; write float_scale";
  return std::nullopt;
}

// The per-tensor scale factors of an fp8 call, as cuDNN's sdpa_fp8 takes them
// (Transformer Engine's recipe): Q, K and V hold x / descale_x; P is stored
// times scale_s and O times scale_o; descale_s undoes scale_s in P V. Each
// positive and finite (check_fp8_scales).
struct fp8_scales {
  float32 descale_q = from_host(1.0f), descale_k = from_host(1.0f), descale_v = from_host(1.0f);
  float32 descale_s = from_host(1.0f), scale_s = from_host(1.0f), scale_o = from_host(1.0f);
};

// The names of fp8_scales' fields, in its order, as messages and the front ends spell them.
inline constexpr std::string_view fp8_scale_names[] = {"descale_q", "descale_k", "descale_v",
                                                       "descale_s", "scale_s",   "scale_o"};
inline constexpr std::array<float32 fp8_scales::*, 6> fp8_scale_fields = {
    &fp8_scales::descale_q, &fp8_scales::descale_k, &fp8_scales::descale_v,
    &fp8_scales::descale_s, &fp8_scales::scale_s,   &fp8_scales::scale_o};
static_assert(std::size(fp8_scale_names) == fp8_scale_fields.size(), "a name for every fp8 scale, in its order");

// The first of the scales that is not positive and finite (its index in
// fp8_scale_names), or none.
inline std::optional<std::size_t> bad_fp8_scale(const fp8_scales& scales) {
  for (std::size_t i = 0; i < fp8_scale_fields.size(); ++i) {
    const float x = to_host(scales.*fp8_scale_fields[i]);
    if (!(x > 0.0f) || !std::isfinite(x)) return i;
  }
  return std::nullopt;
}

// Why an fp8 kernel's arithmetic cannot take this scale_s, or none: FA2's
// recipe (p_scaling multiply) stores the row max's P of 1 as e4m3(scale_s),
// which saturates above e4m3's largest finite value.
inline std::optional<std::string> scale_s_refusal(const flash_kernel& arithmetic, float32 scale_s) {
  const double largest = to_double(float8_e4m3::max_finite(false));
  if (arithmetic.p_scale_rule != p_scaling::multiply || to_double(scale_s) <= largest) return std::nullopt;
  return "saturates the row max's P-bar (e4m3's largest finite value is " + std::to_string(static_cast<int>(largest)) +
         ")";
}

// What a call adds to a description: its shape (the split heuristic sees the
// whole call's B and H), its scale, and overrides.
struct call_options {
  std::optional<double> scale;  // as Python's float; default 1/sqrt(head_dim) in double
  gpu device = default_gpu();    // its multiprocessors, for the split heuristic
  std::optional<int> splits;     // a split count instead of the heuristic's (flash2_heuristic only)
  fp8_scales fp8;                // an fp8 kernel's scales (all 1 by default); refused as other than 1 for bf16
};

// The tiles a description gives a head dim and a split count.
inline tile_shape tiles_for(const kernel_description& description, int head_dim, int splits) {
  const auto& table = splits > 1 ? description.split_tiles : description.tiles;
  const auto found = table.find(head_dim);
  if (found == table.end()) {
    std::string dims;
    for (const auto& [dim, tile] : table) dims += (dims.empty() ? "" : ", ") + std::to_string(dim);
    throw std::invalid_argument("kernel " + description.name + ": head_dim " + std::to_string(head_dim) +
                                " is not described (" + (splits > 1 ? "split_tiles" : "tiles") + " has " +
                                (dims.empty() ? std::string("none") : dims) + ")");
  }
  return found->second;
}

// One call's flash_kernel: the description's arithmetic with the tiles and
// split count for this shape and the call's scale.
inline flash_kernel resolve(const kernel_description& description, const attention_shape& shape,
                            const call_options& call = {}) {
  if (shape.query_rows < description.min_query_rows)
    throw std::invalid_argument("kernel " + description.name + " is described for " +
                                std::to_string(description.min_query_rows) + " query rows or more, not " +
                                std::to_string(shape.query_rows) + " (min_query_rows)");
  flash_kernel kernel = description.arithmetic;
  const bool fp8 = is_fp8(kernel.inputs);
  if (fp8) {
    if (const auto bad = bad_fp8_scale(call.fp8))
      throw std::invalid_argument("kernel " + description.name + ": " + std::string(fp8_scale_names[*bad]) + " " +
                                  std::to_string(to_host(call.fp8.*fp8_scale_fields[*bad])) +
                                  " is not a positive finite number");
    if (const auto refusal = fp8_scale_source_refusal(kernel, description.scale_log2_from))
      throw std::invalid_argument("kernel " + description.name + ": " + *refusal);
    if (const auto refusal = scale_s_refusal(kernel, call.fp8.scale_s))
      throw std::invalid_argument("kernel " + description.name + ": scale_s " +
                                  std::to_string(to_host(call.fp8.scale_s)) + " " + *refusal);
  }
  const double scale = call.scale ? *call.scale : 1.0 / std::sqrt(static_cast<double>(shape.head_dim));
  kernel.scale = from_host(static_cast<float>(scale));
  switch (description.scale_log2_from) {
    case scale_log2_source::float_scale:
      // FA2's fp8 recipe: scale' = RN(RN(scale * descale_q) * descale_k) is the scale from here on.
      if (fp8) kernel.scale = ptx::mul_f32(ptx::mul_f32(kernel.scale, call.fp8.descale_q), call.fp8.descale_k);
      kernel.scale_log2 = softmax_scale_log2(kernel.scale);
      break;
    case scale_log2_source::double_scale: kernel.scale_log2 = from_host(static_cast<float>(scale * 1.4426950408889634)); break;
    case scale_log2_source::float_product: {
      float32 folded = kernel.scale;
      if (fp8) folded = ptx::mul_f32(ptx::mul_f32(call.fp8.descale_q, folded), call.fp8.descale_k);
      kernel.scale_log2 = ptx::mul_f32(folded, float32::from_bits(0x3FB8AA3Bu));
      break;
    }
  }
  if (fp8) {
    kernel.p_scale = call.fp8.scale_s;
    kernel.o_scale = ptx::mul_f32(ptx::mul_f32(call.fp8.descale_s, call.fp8.descale_v), call.fp8.scale_o);
    kernel.p_descale = call.fp8.descale_s;
  } else {
    for (std::size_t i = 0; i < fp8_scale_fields.size(); ++i)
      if (call.fp8.*fp8_scale_fields[i] != from_host(1.0f))
        throw std::invalid_argument("kernel " + description.name + " takes bf16 inputs; " +
                                    std::string(fp8_scale_names[i]) + " is an fp8 kernel's scale");
  }
  if (call.splits && description.split != split_policy::flash2_heuristic && *call.splits != 1)
    throw std::invalid_argument("kernel " + description.name + " has no split-KV path (split is none)");
  kernel.splits = 1;
  tiles_for(description, shape.head_dim, 1);  // a head dim the kernel has no tiles for is refused first
  if (description.split == split_policy::flash2_heuristic) {
    // set_params_splitkv: the heuristic counts the split kernel's blocks.
    const tile_shape split_tile = tiles_for(description, shape.head_dim, 2);
    const int key_blocks = (shape.key_rows + split_tile.block_n - 1) / split_tile.block_n;
    const int row_blocks = shape.batch * shape.heads * ((shape.query_rows + split_tile.block_m - 1) / split_tile.block_m);
    kernel.splits = call.splits ? *call.splits : split_count_heuristic(row_blocks, 2 * call.device.sm_count, key_blocks);
  }
  const tile_shape tile = tiles_for(description, shape.head_dim, kernel.splits);
  kernel.block_m = tile.block_m;
  kernel.block_n = tile.block_n;
  return kernel;
}

}  // namespace bitexact::attention
