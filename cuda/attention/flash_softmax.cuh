// The arithmetic our flash-attention kernels share, whatever moves their
// data or drives their tensor cores: the mask, the online softmax of one K/V
// block, P's bf16 A fragments and the epilogue, in PyTorch 2.11's FA2 order
// (include/bitexact/attention/flash_forward.hpp says it step by step), with
// explicit roundings (__fmul_rn, __fsub_rn, __fmaf_rn, exp2f without fast
// math) so that nvcc cannot contract or reorder them.
//
// A thread holds S and O in the m16n8 accumulator layout, which mma.sync and
// wgmma share: in each 16-row slab, rows g and g + 8 (half h) of its warp's
// slab, columns 8j + 2t and 8j + 2t + 1 (g = lane / 4, t = lane % 4). The FA2
// kernel (flash_forward.cu) gives each warp two slabs, the wgmma kernel
// (flash_forward_wgmma.cu) one; every function here takes the slabs a thread
// holds, so both run the same instructions on each row.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cmath>
#include <cstdint>

namespace flash {

constexpr int block_rows = 128;  // query rows per thread block (FA2's kBlockM: it sets the causal blocks' visits)

// The softmax's reference max: PyTorch's (none), the paper's Algorithm 3 in
// each K/V block, or the same rule on the row's largest score so far (a max
// repeated in two blocks is caught when the second is reached).
enum class stabilization { none, per_block, across_blocks };

struct forward_params {
  const uint16_t* q;
  const uint16_t* k;
  const uint16_t* v;
  uint16_t* o;
  float* lse;
  int query_rows, key_rows;
  float scale, scale_log2, beta, eps;
  // The leading indicator (bitexact_flash_forward_indicator), [heads][query_rows]:
  // keys whose bf16 P-bar is exactly 1, and whether the row's maximum repeats.
  int32_t* p_bar_ones = nullptr;
  int32_t* max_repeated = nullptr;
};

// K/V block length: FA2's kBlockN for bf16 on sm_90 (d 64: 128 keys, d 128: 64).
// It sets where the online softmax rescales, so it is part of the bits.
template <int D>
constexpr int key_block = D == 64 ? 128 : 64;

// The K/V blocks a row block visits, from the last to the first, and how
// many of them (from the last) need the mask: FA2's n_block_max and
// n_masking_steps.
struct key_block_range {
  int count, masking_steps;
  template <int BN, bool Causal>
  __device__ __forceinline__ static key_block_range of(int m_block, int nq, int nk) {
    int n_block_max = (nk + BN - 1) / BN;
    if (Causal) n_block_max = min(n_block_max, ((m_block + 1) * block_rows + nk - nq + BN - 1) / BN);
    // FA2's masking steps: the last block (keys past N), and under a causal
    // mask every block the diagonal can cross.
    const bool even = nk % BN == 0 && nq % block_rows == 0;
    return {n_block_max, !Causal ? 1 : (block_rows + BN - 1) / BN + (even ? 0 : 1)};
  }
};

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

// The online softmax of one K/V block: the block's row maxima (and, for the
// stabilized rules and the indicator, second largest scores), the rule's
// reference max, S overwritten by its exponentials, the row sums updated,
// and alpha, the factor O must be rescaled by (rescale_o) before this
// block's P V is added. Masking: the step is one of FA2's masking steps.
template <int D, int BN, int Slabs, bool Causal, stabilization Rule, bool Count, bool Masking>
__device__ __forceinline__ void softmax_block(row_state<D, Slabs>& rs, float (&s)[Slabs][BN / 8][4],
                                              float (&alpha)[Slabs][2], const forward_params& p, bool first) {
  constexpr bool Stabilize = Rule != stabilization::none;
  // The indicator keeps the row's two largest scores as the across-blocks
  // rule does, without changing the max the softmax uses.
  constexpr bool Second = Stabilize || Count;
  // Only the plain standard kernel tries MUFU.EX2 alone (below): in the
  // stabilized variants, whose second-largest tree already delays the
  // exponentials, it measured -3% to +2%, and it made the causal d 64
  // across-blocks kernel spill (docs/performance.md).
  constexpr bool TryBare = !Second;
  // The block's row maxima, the rows side by side so that their shuffles
  // overlap. The stabilized variant also keeps each row's second largest
  // score: the paper's Algorithm 3 replaces a block maximum reached more
  // than once, i.e. by two or more scores s with RN(RN(max - s) * scale) <=
  // eps. For scale > 0 and eps finite that test holds for the scores from
  // some threshold up (RN is monotone; a score of +inf, or any score when the
  // max is +inf, fails it; NaN never passes), so two pass exactly when the
  // second largest does. NaN stands for "none": min.NaN keeps a NaN score out
  // of the second place, fmaxf skips it.
  float block_max[Slabs][2], second[Slabs][2], lowest[Slabs][2];
#pragma unroll
  for (int slab = 0; slab < Slabs; ++slab)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // A pairwise tree, not a chain: its depth, not its length, is what the
      // warp waits for. The order cannot change the maximum (fmaxf ignores
      // NaN, and a zero's sign changes no later result).
      constexpr int n = BN / 4;  // this thread's scores of the row
      float top[n], next[n], low[n];
#pragma unroll
      for (int i = 0; i < n; i += 2) {
        const float x = s[slab][i / 2][2 * h], y = s[slab][i / 2][2 * h + 1];
        top[i] = fmaxf(x, y);
        if constexpr (TryBare) low[i] = fminf(x, y);
        if constexpr (Second) next[i] = min_nan(x, y);
      }
#pragma unroll
      for (int width = 2; width < n; width *= 2)
#pragma unroll
        for (int i = 0; i < n; i += 2 * width) {
          if constexpr (Second) next[i] = fmaxf(fmaxf(next[i], next[i + width]), min_nan(top[i], top[i + width]));
          top[i] = fmaxf(top[i], top[i + width]);
          if constexpr (TryBare) low[i] = fminf(low[i], low[i + width]);
        }
      block_max[slab][h] = top[0];
      if constexpr (TryBare) lowest[slab][h] = low[0];
      if constexpr (Second) second[slab][h] = next[0];
    }
#pragma unroll
  for (int lanes = 2; lanes >= 1; lanes /= 2)
#pragma unroll
    for (int slab = 0; slab < Slabs; ++slab)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float other = __shfl_xor_sync(0xffffffff, block_max[slab][h], lanes);
        if constexpr (Second)
          second[slab][h] = fmaxf(fmaxf(second[slab][h], __shfl_xor_sync(0xffffffff, second[slab][h], lanes)),
                                  min_nan(block_max[slab][h], other));
        block_max[slab][h] = fmaxf(block_max[slab][h], other);
      }
  if constexpr (Rule == stabilization::across_blocks || Count) {
    // The row so far: its two largest scores, this block's merged in (the
    // across-blocks rule then tests them; the indicator only keeps them).
#pragma unroll
    for (int slab = 0; slab < Slabs; ++slab)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float &top = rs.top[slab][h], &next = rs.second[slab][h];
        next = fmaxf(fmaxf(next, second[slab][h]), min_nan(top, block_max[slab][h]));
        top = fmaxf(top, block_max[slab][h]);
        if constexpr (Rule == stabilization::across_blocks) block_max[slab][h] = top, second[slab][h] = next;
      }
  }
  if constexpr (Stabilize) {
#pragma unroll
    for (int slab = 0; slab < Slabs; ++slab)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float& m = block_max[slab][h];
        const bool repeated = __fmul_rn(__fsub_rn(m, second[slab][h]), p.scale) <= p.eps;
        if (repeated && m > 0.f) m = __fmul_rn(p.beta, m);
        else if (repeated && m < 0.f) m = 0.f;
      }
  }

  // The reference max of each row, alpha, and whether FA2's exp2f may run
  // as MUFU.EX2 alone for the warp's whole block. exp2f (without fast math)
  // is MUFU.EX2 behind a test: an exponent below -126, whose power of two
  // MUFU would flush to zero, is halved and the result squared. For scale_log2
  // > 0 the exponent RN(RN(s * scale_log2) - max_scaled) rises with s, so the
  // row's lowest score has its lowest exponent (a NaN exponent goes straight
  // to MUFU either way): when no row of the warp has one below -126, the
  // test and its two predicated FMULs (three instructions a score) can go.
  // The lowest score comes from a tree beside the max's (one instruction a
  // score), so the vote is ready when the exponents are.
  float max_scaled[Slabs][2];
  bool bare = TryBare && p.scale_log2 > 0.f;
#pragma unroll
  for (int slab = 0; slab < Slabs; ++slab)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float previous = rs.max[slab][h];
      const float m = first ? block_max[slab][h] : fmaxf(previous, block_max[slab][h]);
      rs.max[slab][h] = m;
      alpha[slab][h] = 1.f;
      if (!first) {
        // FA2's Check_inf guard: in the masking steps of a causal call only.
        const float current = (Masking && Causal && m == -INFINITY) ? 0.f : m;
        alpha[slab][h] = exp2f(__fmul_rn(__fsub_rn(previous, current), p.scale_log2));
      }
      max_scaled[slab][h] = m == -INFINITY ? 0.f : __fmul_rn(m, p.scale_log2);
      if constexpr (TryBare)
        bare &= !(__fsub_rn(__fmul_rn(lowest[slab][h], p.scale_log2), max_scaled[slab][h]) < -126.f);
    }
  // S overwritten by its exponentials, and this thread's columns 8j + 2t,
  // 8j + 2t + 1 added to the row sums in order; later blocks fuse the rescale
  // with the first addition (nvcc contracts it in PyTorch's build).
  const auto exponentiate = [&](auto exp2) {
#pragma unroll
    for (int slab = 0; slab < Slabs; ++slab)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
          for (int r = 2 * h; r < 2 * h + 2; ++r)
            s[slab][j][r] = exp2(__fsub_rn(__fmul_rn(s[slab][j][r], p.scale_log2), max_scaled[slab][h]));
        float sum = first ? s[slab][0][2 * h] : __fmaf_rn(alpha[slab][h], rs.sum[slab][h], s[slab][0][2 * h]);
        sum = __fadd_rn(sum, s[slab][0][2 * h + 1]);
#pragma unroll
        for (int j = 1; j < BN / 8; ++j) {
          sum = __fadd_rn(sum, s[slab][j][2 * h]);
          sum = __fadd_rn(sum, s[slab][j][2 * h + 1]);
        }
        rs.sum[slab][h] = sum;
      }
  };
  if (TryBare && __all_sync(0xffffffff, bare))
    exponentiate([](float x) {
      asm("ex2.approx.ftz.f32 %0, %0;" : "+f"(x));  // MUFU.EX2, what exp2f runs for x >= -126
      return x;
    });
  else
    exponentiate([](float x) { return exp2f(x); });
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

// The row sums reduced over the quad, O normalised to bf16 pairs and handed
// to store_pair(slab, row, column, pair) (columns 8j + 2t and 8j + 2t + 1 of
// row 0 to 15 of the slab), L (and the indicator) written; rows past N are skipped.
template <int D, int Slabs, bool Count, class StorePair>
__device__ __forceinline__ void finish_rows(const row_state<D, Slabs>& rs, const forward_params& p, int head,
                                            const int (&first_row)[Slabs], StorePair store_pair) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int nq = p.query_rows;
#pragma unroll
  for (int slab = 0; slab < Slabs; ++slab)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = rs.sum[slab][h];
      sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffff, sum, 2));
      sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffff, sum, 1));
      const bool degenerate = sum == 0.f || sum != sum;
      const float inverse = degenerate ? 1.f : __frcp_rn(sum);
      const int row = first_row[slab] + g + 8 * h;
      int ones = 0;
      if constexpr (Count) {
        ones = rs.p_bar_ones[slab][h];
        ones += __shfl_xor_sync(0xffffffff, ones, 2);
        ones += __shfl_xor_sync(0xffffffff, ones, 1);
      }
      if (row >= nq) continue;
      if (Count && t == 0) {
        // The paper's tie test on the row's two largest scores (as the across-blocks rule's).
        p.p_bar_ones[size_t(head) * nq + row] = ones;
        p.max_repeated[size_t(head) * nq + row] =
            __fmul_rn(__fsub_rn(rs.top[slab][h], rs.second[slab][h]), p.scale) <= p.eps;
      }
      if (t == 0)
        p.lse[size_t(head) * nq + row] =
            degenerate ? INFINITY : __fmaf_rn(rs.max[slab][h], p.scale, __fmul_rn(lg2_approx(sum), 0.693147182f));
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
  finish_rows<D, Slabs, Count>(rs, p, head, first_row, [&](int slab, int row, int column, uint32_t pair) {
    *reinterpret_cast<uint32_t*>(p.o + (size_t(head) * p.query_rows + first_row[slab] + row) * D + column) = pair;
  });
}

// The host API, over device pointers, for a kernel family Kernel<D, Causal,
// Rule, Count>::launch(params, heads, stream) (flash_forward.cu: the FA2
// structure; flash_forward_wgmma.cu: warp-specialised wgmma): q
// [heads][query_rows][head_dim], k and v [heads][key_rows][head_dim] (bf16
// bit patterns, contiguous), o like q, lse [heads][query_rows] (fp32,
// natural-log units). scale: the softmax scale as the kernel takes it
// (PyTorch: float(1/sqrt(d))). stabilize: 0 PyTorch's arithmetic
// (pytorch_sdpa_flash_sm90), 1 the paper's Algorithm 3 in each K/V block with
// beta and eps (pytorch_sdpa_flash_sm90_stabilized), 2 the same rule across
// blocks (pytorch_sdpa_flash_sm90_stabilized_across_blocks). Returns 0, 1 for
// arguments it does not take (head_dim other than 64 or 128, a count below 1,
// more than 65535 heads (the grid's y; the wgmma kernel also counts its
// 192-row blocks of all heads in an int), a null pointer, stabilize other than
// 0, 1, 2, or 1 and 2 with a scale that is not positive and finite or an eps
// that is not finite: the tie test looks at each row's second largest score
// only, exact for those), 2 when the launch failed.
inline bool shapes_taken(const void* q, const void* k, const void* v, const void* o, const void* lse, int heads,
                         int query_rows, int key_rows, int head_dim) {
  return q && k && v && o && lse && heads >= 1 && heads <= 65535 && query_rows >= 1 && key_rows >= 1 &&
         (head_dim == 64 || head_dim == 128);
}

inline bool tie_test_taken(float scale, float eps) { return scale > 0.f && std::isfinite(scale) && std::isfinite(eps); }

inline forward_params make_params(const void* q, const void* k, const void* v, void* o, float* lse, int query_rows,
                                  int key_rows, float scale, float beta, float eps) {
  // As PyTorch's set_params_fprop: float(double(scale) * log2(e)).
  const float scale_log2 = static_cast<float>(static_cast<double>(scale) * 1.44269504088896340736);
  return {static_cast<const uint16_t*>(q), static_cast<const uint16_t*>(k), static_cast<const uint16_t*>(v),
          static_cast<uint16_t*>(o), lse, query_rows, key_rows, scale, scale_log2, beta, eps};
}

template <template <int, bool, stabilization, bool> class Kernel, int D, bool Causal>
int launch_rule(const forward_params& p, int heads, stabilization rule, bool count, cudaStream_t stream) {
  if (count) return Kernel<D, Causal, stabilization::none, true>::launch(p, heads, stream);  // the indicator
  switch (rule) {
    case stabilization::none: return Kernel<D, Causal, stabilization::none, false>::launch(p, heads, stream);
    case stabilization::per_block: return Kernel<D, Causal, stabilization::per_block, false>::launch(p, heads, stream);
    case stabilization::across_blocks:
      return Kernel<D, Causal, stabilization::across_blocks, false>::launch(p, heads, stream);
  }
  return 1;
}

template <template <int, bool, stabilization, bool> class Kernel>
int launch_kernel(const forward_params& p, int heads, int head_dim, bool causal, stabilization rule, bool count,
                  cudaStream_t stream) {
  if (head_dim == 64)
    return causal ? launch_rule<Kernel, 64, true>(p, heads, rule, count, stream)
                  : launch_rule<Kernel, 64, false>(p, heads, rule, count, stream);
  return causal ? launch_rule<Kernel, 128, true>(p, heads, rule, count, stream)
                : launch_rule<Kernel, 128, false>(p, heads, rule, count, stream);
}

template <template <int, bool, stabilization, bool> class Kernel>
int forward(const void* q, const void* k, const void* v, void* o, float* lse, int heads, int query_rows,
            int key_rows, int head_dim, int causal, float scale, int stabilize, float beta, float eps,
            cudaStream_t stream) {
  if (!shapes_taken(q, k, v, o, lse, heads, query_rows, key_rows, head_dim) || stabilize < 0 || stabilize > 2 ||
      (stabilize && !tie_test_taken(scale, eps)))
    return 1;
  const forward_params p = make_params(q, k, v, o, lse, query_rows, key_rows, scale, beta, eps);
  return launch_kernel<Kernel>(p, heads, head_dim, causal != 0, static_cast<stabilization>(stabilize), false, stream);
}

// The standard kernel (PyTorch's bits in o and lse) that also writes the
// leading indicator of docs/bias.md per row, [heads][query_rows]: p_bar_ones,
// the keys whose bf16 P-bar is exactly 1 as P V takes them (the count
// attention/repeated_max.hpp gives for the single-split kernel), and
// max_repeated, 1 when the row's two largest scores pass the paper's tie test
// RN(RN(max - s) * scale) <= eps. Returns as forward, and 1 for a null count
// pointer or a scale or eps that the tie test cannot take.
template <template <int, bool, stabilization, bool> class Kernel>
int forward_indicator(const void* q, const void* k, const void* v, void* o, float* lse, int heads, int query_rows,
                      int key_rows, int head_dim, int causal, float scale, float eps, int32_t* p_bar_ones,
                      int32_t* max_repeated, cudaStream_t stream) {
  if (!p_bar_ones || !max_repeated || !shapes_taken(q, k, v, o, lse, heads, query_rows, key_rows, head_dim) ||
      !tie_test_taken(scale, eps))
    return 1;
  forward_params p = make_params(q, k, v, o, lse, query_rows, key_rows, scale, 2.f, eps);
  p.p_bar_ones = p_bar_ones, p.max_repeated = max_repeated;
  return launch_kernel<Kernel>(p, heads, head_dim, causal != 0, stabilization::none, true, stream);
}

}  // namespace flash
