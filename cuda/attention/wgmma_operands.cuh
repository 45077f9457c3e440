// What the wgmma kernel's operands are, and so how its tiles lie in shared
// memory and which tensor-core steps it issues: bf16 Q, K and V as
// PyTorch's flash takes them, or e4m3 ones with V transposed (our FP8
// kernel), since fp8 wgmma reads both operands K-major only.
#pragma once

#include "../hopper.cuh"
#include "flash_tiles.cuh"

#include <cstdint>

namespace flash::wgmma {

// bf16: k16 steps; V's tile [keys][D] in pages as K's, read MN-major.
// Three consumers give more warps to hide the softmax's latency than FA2's
// 128-row blocks would (docs/performance.md).
struct bf16_operands {
  __host__ __device__ static constexpr int consumers(int) { return 3; }
  __host__ __device__ static constexpr int consumer_registers(int) { return 160; }
  static constexpr int bytes = 2;
  static constexpr bool fp8 = false;
  static constexpr bool pv_fp32_add = false;  // P V's chain takes O as C
  static constexpr bool p_bar_sum = false;    // l sums the fp32 P
  static constexpr int pv_keys = 16;  // keys of one P V step
  // FA2's K/V blocks, part of PyTorch's bits; K/V blocks in flight (more measured no faster).
  template <int D>
  static constexpr int key_block = flash::key_block<D>;
  static constexpr int stages = 2;
  template <int N>
  __device__ __forceinline__ static void scores_step(float (&d)[N / 8][4], uint64_t a, uint64_t b, bool accumulate) {
    hopper::wgmma_ss<N>(d, a, b, accumulate);
  }
};

// e4m3: k32 steps (the unit sm90_tensor_core_fp8); V^T's tile [D][keys],
// read K-major, its keys permuted within each 32 as P's A fragments hold
// them (p_fragment_e4m3). A k32 step sums its 32 products at once
// (include/bitexact/hardware/mma.hpp), so the permutation changes no bit.
// At d 128, two consumers of 240 registers each hold S and O of 128 keys
// (three of 160 spilled); at d 64 three fit, and measured faster than two.
struct e4m3_operands {
  __host__ __device__ static constexpr int consumers(int d) { return d == 128 ? 2 : 3; }
  __host__ __device__ static constexpr int consumer_registers(int d) { return d == 128 ? 240 : 160; }
  static constexpr int bytes = 1;
  static constexpr bool fp8 = true;
  static constexpr bool pv_fp32_add = false;
  static constexpr bool p_bar_sum = false;
  static constexpr int pv_keys = 32;
  // Our own choice (the preset bitexact_flash_fp8_sm90 says it): 128 keys,
  // V^T's rows one 128-byte swizzle wide; the k32 steps are twice as fast as
  // bf16's, so more blocks are kept in flight.
  template <int D>
  static constexpr int key_block = 128;
  static constexpr int stages = 3;
  template <int N>
  __device__ __forceinline__ static void scores_step(float (&d)[N / 8][4], uint64_t a, uint64_t b, bool accumulate) {
    hopper::wgmma_ss_e4m3<N>(d, a, b, accumulate);
  }
};

// The same with each block's P V from +0 (the first k32 step scale-d 0) into
// registers of its own, then one FADD into O (the preset
// bitexact_flash_fp8_sm90_pv_fp32_add): O stays out of the fp8 unit's 13-bit
// window, the promotion of FP8 GEMMs (docs/rounding-bias.md, section 7).
// The block's sums take D / 8 * 4 more registers a thread: at d 64 three
// consumers of 160 spilled, so two of 240 there too.
struct e4m3_pv_fp32_add_operands : e4m3_operands {
  __host__ __device__ static constexpr int consumers(int) { return 2; }
  __host__ __device__ static constexpr int consumer_registers(int) { return 240; }
  static constexpr bool pv_fp32_add = true;
};

// The same with l summed from the e4m3 P-bar that P V takes (p_fragment_e4m3,
// the preset bitexact_flash_fp8_sm90_pv_fp32_add_p_bar_sum): O's weights
// are P-bar over their own sum (docs/rounding-bias.md, section 7).
struct e4m3_pv_fp32_add_p_bar_sum_operands : e4m3_pv_fp32_add_operands {
  static constexpr bool p_bar_sum = true;
};

// The query rows of one thread block.
template <class Op, int D>
constexpr int block_rows = consumer_rows * Op::consumers(D);

// setmaxnreg moves registers within what the launch gave the thread block:
// 65536 over its threads, in multiples of 8 a thread (ptxas's cap under
// __launch_bounds__). A consumer's increase past that waits forever (a
// producer of 32 registers with two d 128 consumers of 240 hung).
template <class Op, int D>
constexpr bool registers_fit = producer_registers + Op::consumers(D) * Op::consumer_registers(D) <=
                               (1 + Op::consumers(D)) * (65536 / (warpgroup_threads * (1 + Op::consumers(D))) / 8 * 8);
static_assert(registers_fit<bf16_operands, 64> && registers_fit<bf16_operands, 128> &&
              registers_fit<e4m3_operands, 64> && registers_fit<e4m3_operands, 128> &&
              registers_fit<e4m3_pv_fp32_add_operands, 64> && registers_fit<e4m3_pv_fp32_add_operands, 128>);

}  // namespace flash::wgmma
