// The named GEMM descriptions: one registry, the only place a preset's name is
// spelled. `bitexact matmul --preset NAME | --list-kernels | --print-kernel`
// and bitexact.matmul(preset=...) look names up here.
#pragma once

#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "description.hpp"

namespace bitexact::matmul {

// torch.matmul, F.linear and torch.addmm on bf16 or fp16 (torch 2.11, cuBLAS
// 13.1, sm_90): the nvjet_sm90 kernels, 64 of K a tile (the first number of
// the name's second group), split-K with the cublasLt::splitKreduce_kernel.
inline gemm_description cublas_sm90_description() {
  gemm_description d;
  d.name = "cublas_sm90";
  d.summary = "cuBLAS's nvjet_sm90 kernels for bf16 and fp16 (torch.matmul, F.linear, torch.addmm)";
  d.tensor_core = &find_tensor_core_unit("sm90");
  d.k_tile = 64;
  d.ragged_split_alignment = 64;
  return d;
}

// torch._scaled_mm on e4m3/e5m2 (the nvjet_sm90_qq... kernels): promotion
// into fp32 every 128 of K (the default, ..._algo2_...).
inline gemm_description cublas_sm90_fp8_description() {
  gemm_description d;
  d.name = "cublas_sm90_fp8";
  d.summary = "cuBLAS's fp8 kernels under torch._scaled_mm (promotion into fp32 every 128 of K; tensor, row and "
              "block scales)";
  d.tensor_core = &find_tensor_core_unit("sm90_fp8");
  d.k_tile = 128;
  d.ragged_split_alignment = 128;
  d.promotion_k = 128;
  return d;
}

// The same with use_fast_accum=True: one chain over K in the tensor core.
inline gemm_description cublas_sm90_fp8_fast_accum_description() {
  gemm_description d = cublas_sm90_fp8_description();
  d.name = "cublas_sm90_fp8_fast_accum";
  d.summary = "cuBLAS's fp8 kernels under torch._scaled_mm(use_fast_accum=True): one chain over K";
  d.promotion_k = 0;
  return d;
}

// torch.matmul, F.linear and torch.addmm on fp32 with allow_tf32 (cuBLAS
// 13.1, sm_90), for small and split-K products:
// cutlass_80_tensorop_s1688gemm_64x64_32x6 (mma.sync m16n8k8 tf32, 32 of K
// a tile; _16x6, 16, for some shapes), split-K with the
// cublasLt::splitKreduce_kernel. Each operand rounded to tf32 to nearest
// even, 8-product steps, the partial tile of a split first.
inline gemm_description cublas_sm90_tf32_description() {
  gemm_description d;
  d.name = "cublas_sm90_tf32";
  d.summary = "cuBLAS's cutlass_80 kernels for fp32 under allow_tf32 (torch.matmul, F.linear, torch.addmm; split-K): "
              "operands rounded to tf32";
  d.tensor_core = &find_tensor_core_unit("sm90_k8");
  d.k_tile = 32;
  d.ragged_split_alignment = 4;
  d.residue = k_residue::first_tile;
  d.operands = operand_rule::rounded_to_tf32;
  return d;
}

// The same family's _64x64_16x6 configuration (16 of K a tile), which cuBLAS
// picks for some split-K shapes (K of 4100, 6001 and 7002 captured): a
// split's partial tile is its length mod 16.
inline gemm_description cublas_sm90_tf32_k16_description() {
  gemm_description d = cublas_sm90_tf32_description();
  d.name = "cublas_sm90_tf32_k16";
  d.summary = "cuBLAS's cutlass_80 ..._16x6 kernels for fp32 under allow_tf32 (some split-K shapes): 16 of K a tile";
  d.k_tile = 16;
  return d;
}

// The same calls where cuBLAS runs its xmma kernels (sm90_xmma_gemm_f32f32_tf32f32,
// wgmma k8, for larger products; sm80_xmma_gemm_f32f32_tf32f32 for some odd
// shapes): the same operands and steps, the partial K tile last.
inline gemm_description cublas_sm90_tf32_xmma_description() {
  gemm_description d = cublas_sm90_tf32_description();
  d.name = "cublas_sm90_tf32_xmma";
  d.summary = "cuBLAS's xmma kernels for fp32 under allow_tf32 (larger products): operands rounded to tf32";
  d.ragged_split_alignment = d.k_tile;
  d.residue = k_residue::last_tile;
  return d;
}

// torchao 0.18's blockwise fp8 training GEMMs, Triton kernels on the fp8
// wgmma: triton_fp8_gemm_1x128_128x128 and _128x1 (torchao.prototype.
// blockwise_fp8_training.kernels) compute acc += tl.dot(a, b) * a_s * b_s
// over each 128 of K: a chain from +0 a block, then fma(fl(c * sa), sb, acc)
// (Triton contracts the multiply and the add: the PTX's mul.f32 and fma.rn.f32)
// for 128 x 128 blocks of B as for 1 x 128 (tests/data/matmul's torchao_*
// cases, an H100).
inline gemm_description torchao_blockwise_fp8_description() {
  gemm_description d = cublas_sm90_fp8_description();
  d.name = "torchao_blockwise_fp8";
  d.summary = "torchao's blockwise fp8 training GEMMs (Triton): a chain over each 128 of K, acc = fma(fl(c sa), sb, acc)";
  d.epilogue.blocks_128x128 = block_scaling::scale_a_then_fma_with_b;
  return d;
}

// Triton 3.6's tutorial matmul (03-matrix-multiplication: acc = tl.dot(a, b,
// acc) over BLOCK_K blocks, one fp32 accumulator from +0, cast to the output
// at the end) on sm_90 under torch 2.11, for bf16 and fp16: wgmma k16 (4 or 8
// warps) or mma.sync m16n8k16 (2 warps), one chain over K either way; the
// block sizes, GROUP_SIZE_M and num_stages change no bit (tests/data/matmul_triton).
inline gemm_description triton_matmul_sm90_description() {
  gemm_description d = cublas_sm90_description();
  d.name = "triton_matmul_sm90";
  d.summary = "Triton's tutorial matmul (tl.dot) on bf16 and fp16: one chain over K (any configuration)";
  return d;
}

// The same on e4m3 or e5m2 with 4 or 8 warps: the fp8 wgmma k32, never
// promoted (Triton's max_num_imprecise_acc default on sm_90 is 2^30).
inline gemm_description triton_matmul_sm90_fp8_description() {
  gemm_description d = cublas_sm90_fp8_fast_accum_description();
  d.name = "triton_matmul_sm90_fp8";
  d.summary = "Triton's tutorial matmul on e4m3/e5m2 with 4 or 8 warps: the fp8 wgmma's chain over K, no promotion";
  return d;
}

// The same with 2 warps: the operands widened to fp16 (cvt.rn.f16x2.e4m3x2)
// for mma.sync m16n8k16 .f16, K taken in pairs (kWidth 4) within each 32.
// The same on fp32, tl.dot's default tf32 precision: wgmma k8 (4 or 8 warps)
// or mma.sync m16n8k8 (2 warps), each operand read as tf32 from its register
// (the upper 19 bits: Triton converts nothing), one chain over K.
inline gemm_description triton_matmul_sm90_tf32_description() {
  gemm_description d = cublas_sm90_tf32_xmma_description();
  d.name = "triton_matmul_sm90_tf32";
  d.summary = "Triton's tutorial matmul on fp32 (tl.dot's tf32): operands truncated to tf32, one chain over K";
  d.operands = operand_rule::truncated_to_tf32;
  return d;
}

inline gemm_description triton_matmul_sm90_fp8_two_warps_description() {
  gemm_description d = cublas_sm90_description();
  d.name = "triton_matmul_sm90_fp8_two_warps";
  d.summary = "Triton's tutorial matmul on e4m3/e5m2 with 2 warps: widened to fp16, 16-product steps of k mod 4 in "
              "{0,1} then {2,3} in each 32";
  d.operands = operand_rule::widened_to_fp16;
  d.order = k_order::pairs_mod_4_in_32;
  return d;
}

inline const std::vector<gemm_description>& gemm_presets() {
  static const std::vector<gemm_description> presets{
      cublas_sm90_description(),          cublas_sm90_fp8_description(),
      cublas_sm90_fp8_fast_accum_description(), cublas_sm90_tf32_description(),
      cublas_sm90_tf32_k16_description(),       cublas_sm90_tf32_xmma_description(),      triton_matmul_sm90_description(),
      triton_matmul_sm90_fp8_description(),     triton_matmul_sm90_fp8_two_warps_description(),
      triton_matmul_sm90_tf32_description(),      torchao_blockwise_fp8_description()};
  return presets;
}

inline std::string gemm_preset_names() {
  std::string names;
  for (const gemm_description& d : gemm_presets()) names += (names.empty() ? "" : ", ") + d.name;
  return names;
}

inline const gemm_description& find_gemm_preset(std::string_view name) {
  for (const gemm_description& d : gemm_presets())
    if (d.name == name) return d;
  throw std::invalid_argument("unknown matmul preset '" + std::string(name) + "'; the presets are: " + gemm_preset_names());
}

// The preset for inputs of this format when the user names none: cuBLAS's.
inline const gemm_description& default_gemm_preset(format input) {
  return find_gemm_preset(input == e4m3 || input == e5m2 ? "cublas_sm90_fp8"
                          : input == fp32                ? "cublas_sm90_tf32"
                                                         : "cublas_sm90");
}

}  // namespace bitexact::matmul
