// The arithmetic our flash-attention kernels share, whatever moves their
// data or drives their tensor cores: the mask, the online softmax of one K/V
// block, P's bf16 A fragments and the rows' normalisation, in PyTorch 2.11's
// FA2 order (include/bitexact/attention/flash_forward.hpp says it step by
// step), with explicit roundings (__fmul_rn, __fsub_rn, __fmaf_rn, exp2f
// without fast math) so that nvcc cannot contract or reorder them.
//
// A thread holds S and O in the m16n8 accumulator layout, which mma.sync and
// wgmma share: in each 16-row slab, rows g and g + 8 (half h) of its warp's
// slab, columns 8j + 2t and 8j + 2t + 1 (g = lane / 4, t = lane % 4). The FA2
// kernel (flash_forward.cu) gives each warp two slabs, the wgmma kernel
// (wgmma_kernel.cuh) one; every function here takes the slabs a thread
// holds, so both run the same instructions on each row.
#pragma once

#include "flash_params.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cmath>
#include <cstdint>

namespace flash {

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);  // one cvt.rn.bf16x2.f32, lo in the low half
  return *reinterpret_cast<const uint32_t*>(&pair);
}

// The smaller of a and b, NaN when either is (fminf would return the other).
__device__ __forceinline__ float min_nan(float a, float b) {
  float y;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(y) : "f"(a), "f"(b));
  return y;
}

__device__ __forceinline__ float lg2_approx(float x) {
  float y;
  asm("lg2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// FA2's exp2f (no fast math): MUFU.EX2 behind a test that halves an
// exponent below -126, whose power of two MUFU would flush to zero, and
// squares the result.
struct exp2f_full {
  __device__ __forceinline__ float operator()(float x) const { return exp2f(x); }
};

// MUFU.EX2 alone: what exp2f runs for x >= -126.
struct ex2_approx_ftz {
  __device__ __forceinline__ float operator()(float x) const {
    asm("ex2.approx.ftz.f32 %0, %0;" : "+f"(x));
    return x;
  }
};

// One thread's rows: Slabs slabs of 16 rows, halves h = 0, 1 (rows g, g + 8).
template <int D, int Slabs>
struct row_state {
  float o[Slabs][D / 8][4];          // unnormalised O, accumulator layout
  float max[Slabs][2], sum[Slabs][2];  // sum: this thread's columns only
  float top[Slabs][2], second[Slabs][2];  // across_blocks and the indicator: the row's two largest raw scores so far
  int p_bar_ones[Slabs][2];               // the indicator: this thread's keys with bf16 P-bar exactly 1

  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int slab = 0; slab < Slabs; ++slab) {
#pragma unroll
      for (int j = 0; j < D / 8; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) o[slab][j][r] = 0.f;
#pragma unroll
      for (int h = 0; h < 2; ++h)
        max[slab][h] = top[slab][h] = second[slab][h] = -INFINITY, sum[slab][h] = 0.f, p_bar_ones[slab][h] = 0;
    }
  }
};

// Keys at or past a row's limit (N, or under the causal mask the diagonal,
// aligned to the bottom right as FA2) become -inf. first_row[slab]: the
// query row of the slab's g = 0, h = 0 (each thread adds g + 8h).
template <int BN, int Slabs, bool Causal>
__device__ __forceinline__ void mask_scores(float (&s)[Slabs][BN / 8][4], const forward_params& p,
                                            const int (&first_row)[Slabs], int n_block) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int slab = 0; slab < Slabs; ++slab)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = first_row[slab] + g + 8 * h;
      // The limit relative to this thread's first column of the block.
      const int limit = (Causal ? min(p.key_rows, row + 1 + p.key_rows - p.query_rows) : p.key_rows) -
                        (n_block * BN + 2 * t);
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int r = 2 * h; r < 2 * h + 2; ++r)
          if (8 * j + (r & 1) >= limit) s[slab][j][r] = -INFINITY;
    }
}

// A K/V block's extremes in each of a thread's rows: the max and, where a
// rule needs them, the second largest and the lowest score. The paper's
// Algorithm 3 replaces a block maximum reached more than once, i.e. by two
// or more scores s with RN(RN(max - s) * scale) <= eps. For scale > 0 and
// eps finite that test holds for the scores from some threshold up (RN is
// monotone; a score of +inf, or any score when the max is +inf, fails it;
// NaN never passes), so two pass exactly when the second largest does. NaN
// stands for "none": min.NaN keeps a NaN score out of the second place,
// fmaxf skips it.
template <int Slabs>
struct block_extremes {
  float max[Slabs][2], second[Slabs][2], lowest[Slabs][2];
};

// One row's extremes over this thread's scores, by a pairwise tree, not a
// chain: its depth, not its length, is what the warp waits for. The order
// cannot change the maximum (fmaxf ignores NaN, and a zero's sign changes no
// later result).
template <int BN, bool Second, bool Lowest>
__device__ __forceinline__ void thread_extremes(const float (&s)[BN / 8][4], int h, float& max, float& second,
                                                float& lowest) {
  constexpr int n = BN / 4;  // this thread's scores of the row
  float top[n], next[n], low[n];
#pragma unroll
  for (int i = 0; i < n; i += 2) {
    const float x = s[i / 2][2 * h], y = s[i / 2][2 * h + 1];
    top[i] = fmaxf(x, y);
    if constexpr (Lowest) low[i] = fminf(x, y);
    if constexpr (Second) next[i] = min_nan(x, y);
  }
#pragma unroll
  for (int width = 2; width < n; width *= 2)
#pragma unroll
    for (int i = 0; i < n; i += 2 * width) {
      if constexpr (Second) next[i] = fmaxf(fmaxf(next[i], next[i + width]), min_nan(top[i], top[i + width]));
      top[i] = fmaxf(top[i], top[i + width]);
      if constexpr (Lowest) low[i] = fminf(low[i], low[i + width]);
    }
  max = top[0];
  if constexpr (Lowest) lowest = low[0];
  if constexpr (Second) second = next[0];
}

// The max and second largest merged over the quad of threads that shares
// each row, the rows side by side so that their shuffles overlap.
template <int Slabs, bool Second>
__device__ __forceinline__ void quad_extremes(block_extremes<Slabs>& block) {
#pragma unroll
  for (int lanes = 2; lanes >= 1; lanes /= 2)
#pragma unroll
    for (int slab = 0; slab < Slabs; ++slab)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float other = __shfl_xor_sync(0xffffffff, block.max[slab][h], lanes);
        if constexpr (Second)
          block.second[slab][h] =
              fmaxf(fmaxf(block.second[slab][h], __shfl_xor_sync(0xffffffff, block.second[slab][h], lanes)),
                    min_nan(block.max[slab][h], other));
        block.max[slab][h] = fmaxf(block.max[slab][h], other);
      }
}

// The row's two largest scores so far, this block's merged in: the
// across-blocks rule then tests them in place of the block's; the indicator
// only keeps them.
template <int D, int Slabs, stabilization Rule>
__device__ __forceinline__ void merge_row_top_two(row_state<D, Slabs>& rs, block_extremes<Slabs>& block) {
#pragma unroll
  for (int slab = 0; slab < Slabs; ++slab)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float &top = rs.top[slab][h], &next = rs.second[slab][h];
      next = fmaxf(fmaxf(next, block.second[slab][h]), min_nan(top, block.max[slab][h]));
      top = fmaxf(top, block.max[slab][h]);
      if constexpr (Rule == stabilization::across_blocks) block.max[slab][h] = top, block.second[slab][h] = next;
    }
}

// The paper's Algorithm 3: a repeated maximum m is replaced by beta * m when
// positive, by 0 when negative.
template <int Slabs>
__device__ __forceinline__ void apply_tie_rule(block_extremes<Slabs>& block, const forward_params& p) {
#pragma unroll
  for (int slab = 0; slab < Slabs; ++slab)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float& m = block.max[slab][h];
      const bool repeated = __fmul_rn(__fsub_rn(m, block.second[slab][h]), p.scale) <= p.eps;
      if (repeated && m > 0.f) m = __fmul_rn(p.beta, m);
      else if (repeated && m < 0.f) m = 0.f;
    }
}

// A score's exponent: RN(RN(s * scale_log2) - max_scaled) as PyTorch's FA2
// (built with UNFUSE_FMA), or one FFMA (Fused: our FP8 kernel).
template <bool Fused>
__device__ __forceinline__ float exponent(float s, float scale_log2, float max_scaled) {
  return Fused ? __fmaf_rn(s, scale_log2, -max_scaled) : __fsub_rn(__fmul_rn(s, scale_log2), max_scaled);
}

// Each row's reference max (rs.max), alpha, the factor O must be rescaled by
// before this block's P V is added, and the max in exp2's units. Returns
// whether no row of this thread has an exponent below -126, when TryBare:
// for scale_log2 > 0 the exponent rises with s, so the row's lowest score
// has its lowest exponent (a NaN exponent goes straight to MUFU either way).
template <int D, int Slabs, bool Causal, bool Masking, bool TryBare, bool Fused>
__device__ __forceinline__ bool next_reference_max(row_state<D, Slabs>& rs, const block_extremes<Slabs>& block,
                                                   float (&alpha)[Slabs][2], float (&max_scaled)[Slabs][2],
                                                   const forward_params& p, bool first) {
  bool bare = TryBare && p.scale_log2 > 0.f;
#pragma unroll
  for (int slab = 0; slab < Slabs; ++slab)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float previous = rs.max[slab][h];
      const float m = first ? block.max[slab][h] : fmaxf(previous, block.max[slab][h]);
      rs.max[slab][h] = m;
      alpha[slab][h] = 1.f;
      if (!first) {
        // FA2's Check_inf guard: in the masking steps of a causal call only.
        const float current = (Masking && Causal && m == -INFINITY) ? 0.f : m;
        alpha[slab][h] = exp2f(__fmul_rn(__fsub_rn(previous, current), p.scale_log2));
      }
      max_scaled[slab][h] = m == -INFINITY ? 0.f : __fmul_rn(m, p.scale_log2);
      if constexpr (TryBare)
        bare &= !(exponent<Fused>(block.lowest[slab][h], p.scale_log2, max_scaled[slab][h]) < -126.f);
    }
  return bare;
}

// A row's sum after this block: the rescaled sum so far fused with the
// first addition (nvcc contracts it in PyTorch's build), then this thread's
// columns 8j + 2t, 8j + 2t + 1 in order.
template <int BN>
__device__ __forceinline__ float rescaled_row_sum(const float (&s)[BN / 8][4], int h, bool first, float alpha,
                                                  float sum_so_far) {
  float sum = first ? s[0][2 * h] : __fmaf_rn(alpha, sum_so_far, s[0][2 * h]);
  sum = __fadd_rn(sum, s[0][2 * h + 1]);
#pragma unroll
  for (int j = 1; j < BN / 8; ++j) {
    sum = __fadd_rn(sum, s[j][2 * h]);
    sum = __fadd_rn(sum, s[j][2 * h + 1]);
  }
  return sum;
}

// S overwritten by its exponentials, and (SumP) the row sums updated, row by row.
template <int D, int BN, bool Fused, bool SumP, int Slabs, class Exp2>
__device__ __forceinline__ void exponentiate(row_state<D, Slabs>& rs, float (&s)[Slabs][BN / 8][4],
                                             const float (&alpha)[Slabs][2], const float (&max_scaled)[Slabs][2],
                                             const forward_params& p, bool first, Exp2 exp2) {
#pragma unroll
  for (int slab = 0; slab < Slabs; ++slab)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int r = 2 * h; r < 2 * h + 2; ++r)
          s[slab][j][r] = exp2(exponent<Fused>(s[slab][j][r], p.scale_log2, max_scaled[slab][h]));
      if constexpr (SumP) rs.sum[slab][h] = rescaled_row_sum<BN>(s[slab], h, first, alpha[slab][h], rs.sum[slab][h]);
    }
}

// The online softmax of one K/V block: the reference max of each row under
// the rule, S overwritten by its exponentials, the row sums updated, and
// alpha, the factor O must be rescaled by (rescale_o) before this block's
// P V is added. Masking: the step is one of FA2's masking steps; Fused: the
// exponent is one FFMA (exponent); SumP: the row sums take P here (not
// P-bar, p_bar_row_sums).
template <int D, int BN, int Slabs, bool Causal, stabilization Rule, bool Count, bool Masking, bool Fused = false,
          bool SumP = true>
__device__ __forceinline__ void softmax_block(row_state<D, Slabs>& rs, float (&s)[Slabs][BN / 8][4],
                                              float (&alpha)[Slabs][2], const forward_params& p, bool first) {
  constexpr bool Stabilize = Rule != stabilization::none;
  // The indicator keeps the row's two largest scores as the across-blocks
  // rule does, without changing the max the softmax uses.
  constexpr bool Second = Stabilize || Count;
  // Our FP8 kernel's standard rule (Fused) takes P from MUFU.EX2 alone, no
  // test needed: a P below 2^-126 is 0 in e4m3 (scale_s is at most 448) and
  // lost in l beside the row max's P near 1 (the description's exponential,
  // ex2.approx.ftz.f32 for P).
  // Of the others only the plain standard kernel tries MUFU.EX2 alone: in the
  // rest the second-largest tree already delays the exponentials, and it
  // measured no faster there (docs/performance.md).
  constexpr bool FtzP = Fused && !Stabilize;
  constexpr bool TryBare = !Second && !FtzP;
  block_extremes<Slabs> block;
#pragma unroll
  for (int slab = 0; slab < Slabs; ++slab)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      thread_extremes<BN, Second, TryBare>(s[slab], h, block.max[slab][h], block.second[slab][h],
                                           block.lowest[slab][h]);
  quad_extremes<Slabs, Second>(block);
  if constexpr (Rule == stabilization::across_blocks || Count) merge_row_top_two<D, Slabs, Rule>(rs, block);
  if constexpr (Stabilize) apply_tie_rule(block, p);
  float max_scaled[Slabs][2];
  const bool bare =
      next_reference_max<D, Slabs, Causal, Masking, TryBare, Fused>(rs, block, alpha, max_scaled, p, first);
  // The lowest score's tree runs beside the max's, so the warp's vote is
  // ready when the exponents are; it drops exp2f's test (three instructions
  // a score) for the whole block.
  if (FtzP || (TryBare && __all_sync(0xffffffff, bare)))
    exponentiate<D, BN, Fused, SumP>(rs, s, alpha, max_scaled, p, first, ex2_approx_ftz{});
  else
    exponentiate<D, BN, Fused, SumP>(rs, s, alpha, max_scaled, p, first, exp2f_full{});
}

// O rescaled by the block's alpha (softmax_block), before its P V is added.
template <int D, int Slabs>
__device__ __forceinline__ void rescale_o(row_state<D, Slabs>& rs, const float (&alpha)[Slabs][2]) {
#pragma unroll
  for (int slab = 0; slab < Slabs; ++slab)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      // O * 1 is O (a NaN's payload aside, which the normalisation's
      // multiplication makes canonical anyway): skip it when the whole warp may.
      if (__any_sync(0xffffffff, alpha[slab][h] != 1.f))
#pragma unroll
        for (int j = 0; j < D / 8; ++j)
#pragma unroll
          for (int r = 2 * h; r < 2 * h + 2; ++r) rs.o[slab][j][r] = __fmul_rn(rs.o[slab][j][r], alpha[slab][h]);
}

// P's bf16 A fragment for keys 16kk.. of the block, from the exponentials in
// the accumulator registers: words 0 and 2 hold row g's P-bar, 1 and 3 row g + 8's.
template <int D, int BN, int Slabs, bool Count>
__device__ __forceinline__ void p_fragment(uint32_t (&pa)[4], row_state<D, Slabs>& rs,
                                           const float (&s)[Slabs][BN / 8][4], int slab, int kk) {
  pa[0] = pack_bf16(s[slab][2 * kk][0], s[slab][2 * kk][1]);
  pa[1] = pack_bf16(s[slab][2 * kk][2], s[slab][2 * kk][3]);
  pa[2] = pack_bf16(s[slab][2 * kk + 1][0], s[slab][2 * kk + 1][1]);
  pa[3] = pack_bf16(s[slab][2 * kk + 1][2], s[slab][2 * kk + 1][3]);
  if constexpr (Count)  // vcmpeq2 sets 16 bits a match
#pragma unroll
    for (int w = 0; w < 4; ++w) rs.p_bar_ones[slab][w % 2] += __popc(__vcmpeq2(pa[w], 0x3F803F80u)) / 16;
}

// Four e4m3 of cvt.rn.satfinite.e4m3x2.f32, a in the lowest byte.
__device__ __forceinline__ uint32_t pack_e4m3(float a, float b, float c, float d) {
  const uint32_t low = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
  const uint32_t high = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
  return low | high << 16;
}

// P's e4m3 A fragment for keys 32kk.. of the block (our FP8 kernel): P-bar =
// cvt.rn.satfinite.e4m3(RN(P * p_scale)), the row max's P-bar p_scale (256:
// every P above 2^-18 stays above e4m3's zero; the row sums keep the fp32 P). The
// accumulator gives a thread columns 2t and 2t + 1 of every 8 keys; an e4m3
// A word holds columns 4t..4t + 3 of 16, so word position 4t + i holds key
// 8 (i / 2) + 2t + i % 2, and V^T's keys are permuted alike (flash_call.h).
// Words 0 and 2 hold row g, 1 and 3 row g + 8.
template <int D, int BN, bool Count>
__device__ __forceinline__ void p_fragment_e4m3(uint32_t (&pa)[4], row_state<D, 1>& rs, const float (&s)[BN / 8][4],
                                                int kk, float p_scale, int p_exponent) {
  // RN(P * p_scale), or P's bits plus p_exponent where that is the same P-bar
  // (flash_api.cuh, p_exponent_of): an ALU add, which measured 1-4% faster
  // on the call than the FMUL (docs/performance.md). One branch around the packing: a
  // choice per P compiled to both instructions, predicated.
  const auto pack = [&](auto scaled) {
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const int j = 4 * kk + 2 * (w / 2), r = 2 * (w % 2);
      pa[w] = pack_e4m3(scaled(s[j][r]), scaled(s[j][r + 1]), scaled(s[j + 1][r]), scaled(s[j + 1][r + 1]));
    }
  };
  if (p_exponent) pack([p_exponent](float x) { return __int_as_float(__float_as_int(x) + p_exponent); });
  else pack([p_scale](float x) { return __fmul_rn(x, p_scale); });
  if constexpr (Count) {  // the indicator: P-bar equal to the row max's, e4m3(p_scale); vcmpeq4 sets 8 bits a match
    const uint32_t max_p_bar = pack_e4m3(p_scale, p_scale, p_scale, p_scale);
#pragma unroll
    for (int w = 0; w < 4; ++w) rs.p_bar_ones[0][w % 2] += __popc(__vcmpeq4(pa[w], max_p_bar)) / 8;
  }
}

// The p_bar_sum variant's row sums (the preset's row_sum
// thread_partials_of_p_bar): FA2's sums of this block's e4m3 P-bar, as the A
// fragments of p_fragment_e4m3 hold it, decoded (cvt.rn.f16x2.e4m3x2, then
// to fp32: both exact). Words h and h + 2 of keys 32kk.. hold row h's
// columns 8j + 2t, 8j + 2t + 1 for j = 4kk .. 4kk + 3, in byte order: FA2's
// order (rescaled_row_sum), the rescale fused into the first addition.
template <int D, int BN>
__device__ __forceinline__ void p_bar_row_sums(row_state<D, 1>& rs, const uint32_t (&pa)[BN / 32][4],
                                               const float (&alpha)[1][2], bool first) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = rs.sum[0][h];
#pragma unroll
    for (int kk = 0; kk < BN / 32; ++kk)
#pragma unroll
      for (int w = h; w < 4; w += 2) {  // the row's two words, two e4m3 pairs each
        uint32_t halves[2];
        // One asm from the 32-bit word: fed the 16-bit halves of P-bar's
        // conversion instead (what nvcc forwards to cuda_fp8.h's intrinsic),
        // ptxas 13.0 read some as garbage in the indicator's instantiation.
        asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %2;\n cvt.rn.f16x2.e4m3x2 %0, lo;\n"
            " cvt.rn.f16x2.e4m3x2 %1, hi;\n}"
            : "=r"(halves[0]), "=r"(halves[1])
            : "r"(pa[kk][w]));
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const float2 pair = __half22float2(*reinterpret_cast<const __half2*>(&halves[i]));
          if (kk == 0 && w == h && i == 0) sum = first ? pair.x : __fmaf_rn(alpha[0][h], sum, pair.x);
          else sum = __fadd_rn(sum, pair.x);
          sum = __fadd_rn(sum, pair.y);
        }
      }
    rs.sum[0][h] = sum;
  }
}

// A row's value summed over the quad of threads that shares it, in FA2's order.
__device__ __forceinline__ float quad_sum(float x) {
  x = __fadd_rn(x, __shfl_xor_sync(0xffffffff, x, 2));
  return __fadd_rn(x, __shfl_xor_sync(0xffffffff, x, 1));
}

__device__ __forceinline__ int quad_count(int x) {
  x += __shfl_xor_sync(0xffffffff, x, 2);
  return x + __shfl_xor_sync(0xffffffff, x, 1);
}

// L of a row (natural-log units), and the indicator's two values, at index
// row of [heads][query_rows]; a row with no weight (sum 0 or NaN) gets +inf.
template <int D, int Slabs, bool Count>
__device__ __forceinline__ void write_row_statistics(const row_state<D, Slabs>& rs, const forward_params& p,
                                                     size_t row, int slab, int h, float sum, bool degenerate,
                                                     int ones) {
  if constexpr (Count) {
    p.p_bar_ones[row] = ones;
    // The paper's tie test on the row's two largest scores (as the across-blocks rule's).
    p.max_repeated[row] = __fmul_rn(__fsub_rn(rs.top[slab][h], rs.second[slab][h]), p.scale) <= p.eps;
  }
  p.lse[row] = degenerate ? INFINITY : __fmaf_rn(rs.max[slab][h], p.scale, __fmul_rn(lg2_approx(sum), 0.693147182f));
}

// The row sums reduced over the quad, O normalised to bf16 pairs and handed
// to store_pair(slab, row, column, pair) (columns 8j + 2t and 8j + 2t + 1 of
// row 0 to 15 of the slab), L (and the indicator) written; rows past N are
// skipped. ScaledO (our FP8 kernel): O's factor is RN(inverse * o_scale);
// DescaledSum (its p_bar_sum variant): the joined sum is RN(sum * p_descale) first.
template <int D, int Slabs, bool Count, bool ScaledO = false, bool DescaledSum = false, class StorePair>
__device__ __forceinline__ void finish_rows(const row_state<D, Slabs>& rs, const forward_params& p, int head,
                                            const int (&first_row)[Slabs], StorePair store_pair) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int slab = 0; slab < Slabs; ++slab)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = quad_sum(rs.sum[slab][h]);
      if constexpr (DescaledSum) sum = __fmul_rn(sum, p.p_descale);
      const bool degenerate = sum == 0.f || sum != sum;
      float inverse = degenerate ? 1.f : __frcp_rn(sum);
      // Where P-bar is P's bits plus p_exponent, P stays below 2^32 and a NaN
      // sum (FA2's inverse 1) comes from a NaN P, whose P-bar made O's row
      // NaN through P V; the row is made NaN here directly, as the add gives
      // such a P another P-bar (p_exponent_of).
      if constexpr (ScaledO)
        inverse = p.p_exponent && sum != sum ? __int_as_float(0x7fffffff) : __fmul_rn(inverse, p.o_scale);
      const int row = first_row[slab] + g + 8 * h;
      int ones = 0;
      if constexpr (Count) ones = quad_count(rs.p_bar_ones[slab][h]);
      if (row >= p.query_rows) continue;
      if (t == 0)
        write_row_statistics<D, Slabs, Count>(rs, p, size_t(head) * p.query_rows + row, slab, h, sum, degenerate,
                                              ones);
#pragma unroll
      for (int j = 0; j < D / 8; ++j)
        store_pair(slab, g + 8 * h, 8 * j + 2 * t,
                   pack_bf16(__fmul_rn(rs.o[slab][j][2 * h], inverse), __fmul_rn(rs.o[slab][j][2 * h + 1], inverse)));
    }
}

// finish_rows with O stored straight to global memory.
template <int D, int Slabs, bool Count>
__device__ __forceinline__ void write_rows(const row_state<D, Slabs>& rs, const forward_params& p, int head,
                                           const int (&first_row)[Slabs]) {
  uint16_t* const o_head = p.o + p.query_offset(p.o_strides, head);  // once: the offset divides
  finish_rows<D, Slabs, Count>(rs, p, head, first_row, [&](int slab, int row, int column, uint32_t pair) {
    *reinterpret_cast<uint32_t*>(o_head + (first_row[slab] + row) * p.o_strides.row + column) = pair;
  });
}

}  // namespace flash
