// A GEMM kernel as data: what a matrix product D = A B computes with and in
// which order, the fields of `bitexact matmul --kernel FILE.json`, of
// bitexact.matmul(kernel={...}) and of the presets (matmul/kernels.hpp). The
// one emulator, matmul/gemm.hpp, reads every field; check_description refuses
// the combinations it does not compute, naming the field.
//
// Every value below is one a GPU capture showed (tests/data/matmul, the
// counts in docs/matmul.md); a value no capture tells apart from another is
// said so where it is defined.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include "../hardware/gpu.hpp"
#include "../hardware/mma.hpp"

namespace bitexact::matmul {

// How the fp32 sums of a split's K pieces (promotion) meet a block scale
// (DeepSeek-V3's 1 x 128 scales of A with 128 x 128 or 1 x 128 scales of B):
// each piece's chain c, with the scales sa of its row and sb of its column
// over that piece's 128 of K, goes into the fp32 accumulator acc as
enum class block_scaling {
  // acc = fma(c, fl(sa * sb), acc): cuBLAS's kernels for 128 x 128 blocks of
  // B (..._Ablk128_Bvec128_...).
  fma_with_scale_product,
  // acc = fma(fl(c * sa), sb, acc): cuBLAS's kernels for 1 x 128 blocks of
  // both (..._Avec128_Bvec128_...).
  scale_a_then_fma_with_b,
};

// Where alpha and beta x C meet the fp32 sum (torch.addmm), in fp32.
enum class alpha_beta_rule {
  // fma(alpha, sum, fl(beta * C)): the nvjet_sm90 kernels' own epilogue
  // (the fp32-output captures rule out the other two orders).
  fma_alpha,
  // fma(beta, C, fl(alpha * sum)): cublasLt::splitKreduce_kernel, after it
  // has added the split partials.
  fma_beta,
};

// What happens to the fp32 sum before the one rounding to the output format.
// Fixed, because every capture shows the same: tensor and row/column scales
// multiply it by fl(sa * sb) ((sum * sa) * sb misses captured outputs), after
// the split partials are added; the bias is added last, in fp32 (F.linear's
// _bias kernels; before or after the partials gives the same captured bits).
struct gemm_epilogue {
  block_scaling blocks_128x128 = block_scaling::fma_with_scale_product;
  block_scaling blocks_1x128 = block_scaling::scale_a_then_fma_with_b;
  alpha_beta_rule alpha_beta = alpha_beta_rule::fma_alpha;
  alpha_beta_rule alpha_beta_split_k = alpha_beta_rule::fma_beta;  // in the reduce kernel
};

// What the kernel does to its operands before its tensor core sees them.
enum class operand_rule {
  // The tensor core takes them as they are.
  as_given,
  // cvt.rn.f16x2.e4m3x2 / .e5m2x2 (exact) and a 16-bit tensor core: Triton's
  // tl.dot on fp8 with 2 warps (mma.sync m16n8k16 .f16, not the fp8 wgmma).
  widened_to_fp16,
  // fp32 rounded to tf32, to nearest with ties to even, before a tf32 unit:
  // cuBLAS's kernels for fp32 products under allow_tf32 (tests/data/matmul's
  // fp32_tf32_* cases, whose dropped bits hold ties: truncating them, or
  // rounding ties away, misses most outputs).
  rounded_to_tf32,
  // fp32 as a tf32 unit reads it when the kernel converts nothing: each
  // register's upper 19 bits, the low 13 ignored (tf32_operand): Triton's
  // tl.dot on fp32 (tests/data/matmul_triton's fp32 cases).
  truncated_to_tf32,
};

// The order in which the tensor core's steps take K.
enum class k_order {
  ascending,  // 0, 1, 2, ...: each step the next products_per_step of K
  // Within each 32 of K, first the k with k mod 4 in {0, 1}, then those with
  // k mod 4 in {2, 3}: Triton's fp8 operands widened to fp16 (their kWidth
  // of 4 packs four k a thread, two of them a step).
  pairs_mod_4_in_32,
};

// Where a split's part of K that fills no whole K tile goes.
enum class k_residue {
  // In the last tile, padded with zeros (the nvjet kernels' TMA loads): the
  // steps start at whole K tiles from the split's start.
  last_tile,
  // In the first tile (CUTLASS 2's mainloop loads the partial tile first):
  // the chain takes (split length mod k_tile) of K, in steps, before whole
  // tiles; cuBLAS's cutlass_80_tensorop_s1688gemm kernels.
  first_tile,
};

struct gemm_description {
  std::string name;
  std::string summary;  // who runs it, when
  // The tensor core's instruction (gpu.hpp): its fused steps make each chain.
  const tensor_core_instruction* tensor_core = &find_tensor_core_unit("sm90");
  // The kernel's K tile: a split's share of K is a whole number of them.
  std::size_t k_tile = 64;
  // Split-K: K cut into `splits` parts of ceil(K / splits) rounded up to
  // k_tile (the last takes the rest; a part past K is not launched), each
  // part's fp32 sum written out and added by a reduce kernel in split order,
  // ((p0 + p1) + p2) + ..., fp32 round to nearest. cuBLAS picks the count per
  // shape (numSplitsK in its log): the call may give it instead.
  int splits = 1;
  // When K is no multiple of k_tile, a split's share is rounded up to this
  // instead: k_tile for the nvjet kernels, 4 (16 bytes of fp32) for the
  // cutlass_80 tf32 kernels (tests/data/matmul's fp32_tf32 cases with K of
  // 2000, 3000, 3004, 4100, 5000, 6001, 7002).
  std::size_t ragged_split_alignment = 64;
  k_residue residue = k_residue::last_tile;
  // 0: one chain over the split's K, the tensor core's own accumulator the
  // whole way (fp8's use_fast_accum). Otherwise a chain over each
  // `promotion_k` of the split, from zero, added into an fp32 accumulator
  // ("promotion": cuBLAS's fp8 default every 128).
  std::size_t promotion_k = 0;
  operand_rule operands = operand_rule::as_given;
  k_order order = k_order::ascending;
  gemm_epilogue epilogue;
};

inline std::size_t k_per_step(const gemm_description& d) {
  return static_cast<std::size_t>(d.tensor_core->unit.products_per_step);
}

// Whether the description computes products of A in format a and B in b.
inline bool takes(const gemm_description& d, format a, format b) {
  const bool to_tf32 = d.operands == operand_rule::rounded_to_tf32 || d.operands == operand_rule::truncated_to_tf32;
  if (a == fp32 || b == fp32 || to_tf32) return a == fp32 && b == fp32 && to_tf32 && d.tensor_core->takes(tf32);
  if (d.operands == operand_rule::widened_to_fp16)
    return (a == e4m3 || a == e5m2) && (b == e4m3 || b == e5m2) && d.tensor_core->takes(fp16);
  return d.tensor_core->takes(a) && d.tensor_core->takes(b);
}

// The combination the emulator computes, or std::invalid_argument naming the
// field, after `who` ("gemm description 'NAME': " unless given).
inline void check_description(const gemm_description& d, std::string_view who = {}) {
  const auto refuse = [&](const std::string& field, const std::string& what) {
    throw std::invalid_argument((who.empty() ? "gemm description '" + d.name + "': " : std::string(who)) + "field '" +
                                field + "': " + what);
  };
  if (d.tensor_core == nullptr) refuse("tensor_core", "missing");
  const std::size_t step = k_per_step(d);
  if (d.k_tile < step || d.k_tile % step != 0 || d.k_tile > 4096)
    refuse("k_tile", "a multiple of the tensor core's " + std::to_string(step) + " products a step, up to 4096");
  if (d.splits < 1 || d.splits > 256) refuse("splits", "from 1 to 256");
  if (d.ragged_split_alignment < 1 || d.k_tile % d.ragged_split_alignment != 0)
    refuse("ragged_split_alignment", "a divisor of k_tile (" + std::to_string(d.k_tile) + ")");
  if (d.residue == k_residue::first_tile && (d.promotion_k != 0 || d.order != k_order::ascending))
    refuse("k_residue", "first_tile is modelled for one chain a split in ascending K (promotion_k 0, k_order "
                        "ascending): no capture shows it with the others");
  if (d.promotion_k != 0 && (d.promotion_k % step != 0 || d.promotion_k > 1 << 20))
    refuse("promotion_k", "0, or a multiple of the tensor core's " + std::to_string(step) + " products a step");
  if (d.promotion_k != 0 && (d.k_tile % d.promotion_k != 0 || d.ragged_split_alignment % d.promotion_k != 0))
    refuse("promotion_k", "a split's share of K is whole K tiles (or of ragged_split_alignment), so both must be "
                          "multiples of promotion_k");
  if (d.operands == operand_rule::widened_to_fp16 && !d.tensor_core->takes(fp16))
    refuse("operands", "widened_to_fp16 needs a tensor core that takes fp16");
  if ((d.operands == operand_rule::rounded_to_tf32 || d.operands == operand_rule::truncated_to_tf32) &&
      !d.tensor_core->takes(tf32))
    refuse("operands", "rounded_to_tf32 and truncated_to_tf32 need a tensor core that takes tf32");
  if (d.order == k_order::pairs_mod_4_in_32 &&
      (step != 16 || d.k_tile % 32 != 0 || d.ragged_split_alignment % 32 != 0 ||
       (d.promotion_k != 0 && d.promotion_k % 32 != 0)))
    refuse("k_order", "pairs_mod_4_in_32 needs 16 products a step and K tiles, ragged splits and promotion in whole "
                      "32s of K");
}

}  // namespace bitexact::matmul
