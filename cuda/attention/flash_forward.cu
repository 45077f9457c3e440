// Our flash-attention forward kernel for sm_90, standard and stabilized from
// one source: the arithmetic of PyTorch 2.11's single-split FlashAttention-2
// kernel (include/bitexact/attention/flash_forward.hpp says it step by step),
// written with explicit roundings (__fmul_rn, __fsub_rn, __fmaf_rn, exp2f
// without fast math, mma.sync m16n8k16) so that nvcc cannot contract or
// reorder them. Tiles as PyTorch's: 128 query rows per block, warp w owning
// rows 16w.. and 16w + 64.., K/V blocks of 128 keys (d = 64) or 64 (d = 128)
// from the last to the first.
//
// The data movement is FA2's too, since its speed is the bar: Q, K and V
// tiles go to shared memory by cp.async, in 64-column pages whose 16-byte
// chunks are XOR-swizzled by row so that neither the copies nor ldmatrix
// meet bank conflicts; V's copy overlaps Q K^T and the next K's copy overlaps
// the softmax and P V. None of this changes a bit: every S element is one
// tensor-core chain over d from zero, every O element one chain over the
// keys of each block, wherever the operands come from.
//
// cuda/attention/check_flash_forward.py compares it with PyTorch and captures
// it for the emulator on the device machine.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cmath>
#include <cstdint>

namespace {

constexpr int block_rows = 128;  // query rows per thread block (kBlockM)

// The softmax's reference max: PyTorch's (none), the paper's Algorithm 3 in
// each K/V block, or the same rule on the row's largest score so far (a max
// repeated in two blocks is caught when the second is reached).
enum class stabilization { none, per_block, across_blocks };
constexpr int threads = 128;     // four warps, each 2 x 16 rows

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

// Byte offset of element (row, col) of a [Rows][D] bf16 tile in shared
// memory, col a multiple of 8: pages of 64 columns (128 bytes a row), the
// 16-byte chunk index XORed with row % 8.
template <int Rows>
__device__ __forceinline__ uint32_t tile_offset(int row, int col) {
  return (col / 64) * (Rows * 128) + row * 128 + ((((col % 64) / 8) ^ (row % 8)) << 4);
}

// A lane's share of an ldmatrix address into a tile: the tile row it points
// at (lane_row) and its 16-byte chunk bit (lane_chunk), so that the operand's
// row and chunk, known at compile time, add to it without recomputing the swizzle.
template <int Rows>
struct tile_lane {
  uint32_t row_address, key;
  __device__ __forceinline__ tile_lane(uint32_t tile, int lane_row, int lane_chunk)
      : row_address(tile + lane_row * 128), key((lane_row % 8) ^ lane_chunk) {}
  // row: a multiple of 8; chunk: even (16 columns a step).
  __device__ __forceinline__ uint32_t at(int row, int chunk) const {
    return row_address + (chunk / 8) * (Rows * 128) + row * 128 + ((key ^ (chunk % 8)) << 4);
  }
};

// A thread's share of copying a [Rows][D] tile from global memory: one
// 16-byte chunk in each of Rows / (threads / (D / 8)) passes, rows a pass
// apart being 8 or 16 apart, so that the swizzle (row % 8) and the chunk
// stay the thread's own and only the row's offset moves.
template <int Rows, int D>
struct tile_copy {
  static constexpr int chunks_per_row = D / 8, rows_per_pass = threads / chunks_per_row;
  static_assert(rows_per_pass % 8 == 0 && Rows % rows_per_pass == 0);
  int row, column;
  uint32_t offset;  // in the tile, of the first pass
  __device__ __forceinline__ tile_copy()
      : row(threadIdx.x / chunks_per_row), column(threadIdx.x % chunks_per_row * 8), offset(tile_offset<Rows>(row, column)) {}

  // Rows [first_row, first_row + Rows) of a [row_count][D] matrix; rows past
  // row_count are zero (cp.async reads nothing for them).
  __device__ __forceinline__ void operator()(uint32_t tile, const uint16_t* matrix, int first_row, int row_count) const {
    const uint16_t* source = matrix + size_t(first_row + row) * D + column;
#pragma unroll
    for (int pass = 0; pass < Rows / rows_per_pass; ++pass) {
      const bool inside = first_row + row + pass * rows_per_pass < row_count;
      asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(tile + offset + pass * rows_per_pass * 128),
                   "l"(inside ? source + pass * rows_per_pass * D : matrix), "r"(inside ? 16 : 0));
    }
    asm volatile("cp.async.commit_group;\n" ::);
  }
};

__device__ __forceinline__ void wait_copies_and_sync() {
  asm volatile("cp.async.wait_group 0;\n" ::);
  __syncthreads();
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// Not volatile: it reads and writes registers only, so ptxas may interleave
// it with the softmax's instructions (measured: 2-3% at d = 128, same bits).
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

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

// One thread's share of its warp's 2 x 16 rows (slab 0: rows 16w.., slab 1:
// rows 16w + 64..); each thread holds rows g and g + 8 of a slab (half h).
template <int D>
struct row_state {
  float o[2][D / 8][4];    // unnormalised O, mma accumulator layout
  float max[2][2], sum[2][2];  // [slab][half]; sum: this thread's columns only
  float top[2][2], second[2][2];  // across_blocks and the indicator: the row's two largest raw scores so far
  int p_bar_ones[2][2];           // the indicator: this thread's keys with bf16 P-bar exactly 1
};

// One K/V block: S = Q K^T, the mask, the online softmax, O += P V.
template <int D, int BN, bool Causal, stabilization Rule, bool Count, bool Masking>
__device__ __forceinline__ void process_key_block(row_state<D>& rs, const forward_params& p, uint32_t q_tile,
                                                  uint32_t k_tile, uint32_t v_tile, const uint16_t* k_head,
                                                  const uint16_t* v_head, int m_block, int n_block, bool first) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  // ldmatrix lanes: x4 of Q gives A (rows 0-7/8-15 x columns 0-7/8-15), of K two
  // key tiles' B, and .trans of V two column tiles' B (PTX's m16n8k16 fragments).
  const tile_lane<block_rows> q_lane(q_tile, warp * 16 + lane % 8 + 8 * (lane / 8 % 2), lane / 16);
  const tile_lane<BN> k_lane(k_tile, lane % 8 + 8 * (lane / 16), lane / 8 % 2);
  const tile_lane<BN> v_lane(v_tile, lane % 8 + 8 * (lane / 8 % 2), lane / 16);
  const tile_copy<BN, D> copy;
  wait_copies_and_sync();  // K(n_block) has landed; nobody reads V(n_block + 1) any more
  copy(v_tile, v_head, n_block * BN, p.key_rows);

  float s[2][BN / 8][4];
#pragma unroll
  for (int slab = 0; slab < 2; ++slab)
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) s[slab][j][r] = 0.f;
#pragma unroll
  for (int c = 0; c < D / 16; ++c) {
    uint32_t qa[2][4];
#pragma unroll
    for (int slab = 0; slab < 2; ++slab)
      ldmatrix_x4(qa[slab], q_lane.at(slab * 64, 2 * c));
#pragma unroll
    for (int jj = 0; jj < BN / 16; ++jj) {
      uint32_t kb[4];  // B fragments of key tiles 2jj and 2jj + 1
      ldmatrix_x4(kb, k_lane.at(16 * jj, 2 * c));
#pragma unroll
      for (int slab = 0; slab < 2; ++slab) {
        mma_bf16(s[slab][2 * jj], qa[slab], kb[0], kb[1]);
        mma_bf16(s[slab][2 * jj + 1], qa[slab], kb[2], kb[3]);
      }
    }
  }
  if constexpr (Masking) {
    // Keys at or past a row's limit (N, or under the causal mask the
    // diagonal, aligned to the bottom right as FA2) are -inf; the limit is
    // taken relative to this thread's first column of the block.
#pragma unroll
    for (int slab = 0; slab < 2; ++slab)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = m_block * block_rows + warp * 16 + slab * 64 + g + 8 * h;
        const int limit = (Causal ? min(p.key_rows, row + 1 + p.key_rows - p.query_rows) : p.key_rows) -
                          (n_block * BN + 2 * t);
#pragma unroll
        for (int j = 0; j < BN / 8; ++j)
#pragma unroll
          for (int r = 2 * h; r < 2 * h + 2; ++r)
            if (8 * j + (r & 1) >= limit) s[slab][j][r] = -INFINITY;
      }
  }
  wait_copies_and_sync();  // V(n_block) has landed; nobody reads K(n_block) any more
  if (n_block > 0) copy(k_tile, k_head, (n_block - 1) * BN, p.key_rows);

  constexpr bool Stabilize = Rule != stabilization::none;
  // The indicator keeps the row's two largest scores as the across-blocks
  // rule does, without changing the max the softmax uses.
  constexpr bool Second = Stabilize || Count;
  // The block's row maxima, the four rows side by side so that their
  // shuffles overlap. The stabilized variant also keeps each row's second
  // largest score: the paper's Algorithm 3 replaces a block maximum reached
  // more than once, i.e. by two or more scores s with
  // RN(RN(max - s) * scale) <= eps. For scale > 0 and eps finite that test
  // holds for the scores from some threshold up (RN is monotone; a score of
  // +inf, or any score when the max is +inf, fails it; NaN never passes), so
  // two pass exactly when the second largest does. NaN stands for "none":
  // min.NaN keeps a NaN score out of the second place, fmaxf skips it.
  float block_max[2][2], second[2][2];
#pragma unroll
  for (int slab = 0; slab < 2; ++slab)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // A pairwise tree, not a chain: its depth, not its length, is what the
      // warp waits for. The order cannot change the maximum (fmaxf ignores
      // NaN, and a zero's sign changes no later result).
      constexpr int n = BN / 4;  // this thread's scores of the row
      float top[n], next[n];
#pragma unroll
      for (int i = 0; i < n; i += 2) {
        const float x = s[slab][i / 2][2 * h], y = s[slab][i / 2][2 * h + 1];
        top[i] = fmaxf(x, y);
        if constexpr (Second) next[i] = min_nan(x, y);
      }
#pragma unroll
      for (int width = 2; width < n; width *= 2)
#pragma unroll
        for (int i = 0; i < n; i += 2 * width) {
          if constexpr (Second) next[i] = fmaxf(fmaxf(next[i], next[i + width]), min_nan(top[i], top[i + width]));
          top[i] = fmaxf(top[i], top[i + width]);
        }
      block_max[slab][h] = top[0];
      if constexpr (Second) second[slab][h] = next[0];
    }
#pragma unroll
  for (int lanes = 2; lanes >= 1; lanes /= 2)
#pragma unroll
    for (int slab = 0; slab < 2; ++slab)
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
    for (int slab = 0; slab < 2; ++slab)
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
    for (int slab = 0; slab < 2; ++slab)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float& m = block_max[slab][h];
        const bool repeated = __fmul_rn(__fsub_rn(m, second[slab][h]), p.scale) <= p.eps;
        if (repeated && m > 0.f) m = __fmul_rn(p.beta, m);
        else if (repeated && m < 0.f) m = 0.f;
      }
  }

#pragma unroll
  for (int slab = 0; slab < 2; ++slab)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float previous = rs.max[slab][h];
      const float m = first ? block_max[slab][h] : fmaxf(previous, block_max[slab][h]);
      rs.max[slab][h] = m;
      float alpha = 1.f;
      if (!first) {
        // FA2's Check_inf guard: in the masking steps of a causal call only.
        const float current = (Masking && Causal && m == -INFINITY) ? 0.f : m;
        alpha = exp2f(__fmul_rn(__fsub_rn(previous, current), p.scale_log2));
        // O * 1 is O (a NaN's payload aside, which the normalisation's
        // multiplication makes canonical anyway): skip it when the whole warp may.
        if (__any_sync(0xffffffff, alpha != 1.f))
#pragma unroll
          for (int j = 0; j < D / 8; ++j)
#pragma unroll
            for (int r = 2 * h; r < 2 * h + 2; ++r) rs.o[slab][j][r] = __fmul_rn(rs.o[slab][j][r], alpha);
      }
      const float max_scaled = m == -INFINITY ? 0.f : __fmul_rn(m, p.scale_log2);
#pragma unroll
      for (int j = 0; j < BN / 8; ++j)
#pragma unroll
        for (int r = 2 * h; r < 2 * h + 2; ++r)
          s[slab][j][r] = exp2f(__fsub_rn(__fmul_rn(s[slab][j][r], p.scale_log2), max_scaled));
      // This thread's columns 8j + 2t, 8j + 2t + 1, in order; later blocks
      // fuse the rescale with the first addition (nvcc contracts it in PyTorch's build).
      float sum = first ? s[slab][0][2 * h] : __fmaf_rn(alpha, rs.sum[slab][h], s[slab][0][2 * h]);
      sum = __fadd_rn(sum, s[slab][0][2 * h + 1]);
#pragma unroll
      for (int j = 1; j < BN / 8; ++j) {
        sum = __fadd_rn(sum, s[slab][j][2 * h]);
        sum = __fadd_rn(sum, s[slab][j][2 * h + 1]);
      }
      rs.sum[slab][h] = sum;
    }

  // O += P V, 16 keys at a time: P's accumulator registers are already the A fragment.
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    uint32_t pa[2][4];
#pragma unroll
    for (int slab = 0; slab < 2; ++slab) {
      pa[slab][0] = pack_bf16(s[slab][2 * kk][0], s[slab][2 * kk][1]);
      pa[slab][1] = pack_bf16(s[slab][2 * kk][2], s[slab][2 * kk][3]);
      pa[slab][2] = pack_bf16(s[slab][2 * kk + 1][0], s[slab][2 * kk + 1][1]);
      pa[slab][3] = pack_bf16(s[slab][2 * kk + 1][2], s[slab][2 * kk + 1][3]);
      if constexpr (Count)  // words 0 and 2 hold row g's P-bar, 1 and 3 row g + 8's; vcmpeq2 sets 16 bits a match
#pragma unroll
        for (int w = 0; w < 4; ++w) rs.p_bar_ones[slab][w % 2] += __popc(__vcmpeq2(pa[slab][w], 0x3F803F80u)) / 16;
    }
#pragma unroll
    for (int jj = 0; jj < D / 16; ++jj) {
      uint32_t vb[4];  // B fragments of output column tiles 2jj and 2jj + 1
      ldmatrix_x4_trans(vb, v_lane.at(16 * kk, 2 * jj));
#pragma unroll
      for (int slab = 0; slab < 2; ++slab) {
        mma_bf16(rs.o[slab][2 * jj], pa[slab], vb[0], vb[1]);
        mma_bf16(rs.o[slab][2 * jj + 1], pa[slab], vb[2], vb[3]);
      }
    }
  }
}

template <int D, int BN, bool Causal, stabilization Rule, bool Count>
__global__ void __launch_bounds__(threads, 2) flash_forward_kernel(const forward_params p) {
  extern __shared__ __align__(128) uint8_t shared[];
  const uint32_t q_tile = static_cast<uint32_t>(__cvta_generic_to_shared(shared));
  const uint32_t k_tile = q_tile + block_rows * D * 2, v_tile = k_tile + BN * D * 2;
  // Under the causal mask the last row blocks have the most keys: they start
  // first, so that the short ones fill the end (no bit depends on the order).
  const int m_block = Causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x, head = blockIdx.y;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const int nq = p.query_rows, nk = p.key_rows;
  const uint16_t* k_head = p.k + size_t(head) * nk * D;
  const uint16_t* v_head = p.v + size_t(head) * nk * D;

  int n_block_max = (nk + BN - 1) / BN;
  if (Causal) n_block_max = min(n_block_max, ((m_block + 1) * block_rows + nk - nq + BN - 1) / BN);
  // FA2's masking steps: the last block (keys past N), and under a causal mask
  // every block the diagonal can cross.
  const bool even = nk % BN == 0 && nq % block_rows == 0;
  const int masking_steps = !Causal ? 1 : (block_rows + BN - 1) / BN + (even ? 0 : 1);

  row_state<D> rs;
#pragma unroll
  for (int slab = 0; slab < 2; ++slab) {
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) rs.o[slab][j][r] = 0.f;
#pragma unroll
    for (int h = 0; h < 2; ++h)
      rs.max[slab][h] = rs.top[slab][h] = rs.second[slab][h] = -INFINITY, rs.sum[slab][h] = 0.f, rs.p_bar_ones[slab][h] = 0;
  }
  if (n_block_max > 0) {  // else every row is masked: O = 0, L = +inf, as FA2
    tile_copy<block_rows, D>()(q_tile, p.q + size_t(head) * nq * D, m_block * block_rows, nq);
    tile_copy<BN, D>()(k_tile, k_head, (n_block_max - 1) * BN, nk);
  }
  int n_block = n_block_max - 1;
  for (int step = 0; step < masking_steps && n_block >= 0; ++step, --n_block)
    process_key_block<D, BN, Causal, Rule, Count, true>(rs, p, q_tile, k_tile, v_tile, k_head, v_head, m_block, n_block,
                                                 step == 0);
  for (; n_block >= 0; --n_block)
    process_key_block<D, BN, Causal, Rule, Count, false>(rs, p, q_tile, k_tile, v_tile, k_head, v_head, m_block, n_block,
                                                  false);

#pragma unroll
  for (int slab = 0; slab < 2; ++slab)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = rs.sum[slab][h];
      sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffff, sum, 2));
      sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffff, sum, 1));
      const bool degenerate = sum == 0.f || sum != sum;
      const float inverse = degenerate ? 1.f : __frcp_rn(sum);
      const int row = m_block * block_rows + warp * 16 + slab * 64 + g + 8 * h;
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
      uint16_t* o_row = p.o + (size_t(head) * nq + row) * D;
#pragma unroll
      for (int j = 0; j < D / 8; ++j)
        *reinterpret_cast<uint32_t*>(o_row + 8 * j + 2 * t) =
            pack_bf16(__fmul_rn(rs.o[slab][j][2 * h], inverse), __fmul_rn(rs.o[slab][j][2 * h + 1], inverse));
    }
}

template <int D, int BN, bool Causal, stabilization Rule, bool Count = false>
int launch(const forward_params& p, int heads, cudaStream_t stream) {
  constexpr int shared_bytes = (block_rows + 2 * BN) * D * 2;  // Q, K and V tiles: 64 KiB (d = 128), 48 KiB (d = 64)
  const auto kernel = flash_forward_kernel<D, BN, Causal, Rule, Count>;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes) != cudaSuccess) return 2;
  kernel<<<dim3((p.query_rows + block_rows - 1) / block_rows, heads), threads, shared_bytes, stream>>>(p);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}

template <int D, int BN, bool Causal>
int launch(const forward_params& p, int heads, stabilization rule, cudaStream_t stream) {
  if (p.p_bar_ones) return launch<D, BN, Causal, stabilization::none, true>(p, heads, stream);  // the indicator
  switch (rule) {
    case stabilization::none: return launch<D, BN, Causal, stabilization::none>(p, heads, stream);
    case stabilization::per_block: return launch<D, BN, Causal, stabilization::per_block>(p, heads, stream);
    case stabilization::across_blocks: return launch<D, BN, Causal, stabilization::across_blocks>(p, heads, stream);
  }
  return 1;
}

template <int D, int BN>
int launch(const forward_params& p, int heads, bool causal, stabilization rule, cudaStream_t stream) {
  return causal ? launch<D, BN, true>(p, heads, rule, stream) : launch<D, BN, false>(p, heads, rule, stream);
}

}  // namespace

// The host API, over device pointers: q [heads][query_rows][head_dim], k and
// v [heads][key_rows][head_dim] (bf16 bit patterns, contiguous), o like q,
// lse [heads][query_rows] (fp32, natural-log units). scale: the softmax scale
// as the kernel takes it (PyTorch: float(1/sqrt(d))). stabilize: 0 PyTorch's
// arithmetic (pytorch_sdpa_flash_sm90), 1 the paper's Algorithm 3 in each K/V
// block with beta and eps (pytorch_sdpa_flash_sm90_stabilized), 2 the same
// rule across blocks (pytorch_sdpa_flash_sm90_stabilized_across_blocks).
// Returns 0, 1 for arguments it does not take (head_dim other than 64 or 128,
// a count below 1, more than 65535 heads, a null pointer, stabilize other
// than 0, 1, 2, or 1 and 2 with a scale that is not positive and finite or an
// eps that is not finite), 2 when the launch failed.
extern "C" int bitexact_flash_forward(const void* q, const void* k, const void* v, void* o, float* lse, int heads,
                                      int query_rows, int key_rows, int head_dim, int causal, float scale,
                                      int stabilize, float beta, float eps, cudaStream_t stream) {
  // heads go in the grid's y (at most 65535).
  if (!q || !k || !v || !o || !lse || heads < 1 || heads > 65535 || query_rows < 1 || key_rows < 1 ||
      (head_dim != 64 && head_dim != 128))
    return 1;
  // The stabilized tie test looks at each row's second largest score only:
  // exact for a positive finite scale and a finite eps (see the kernel).
  if (stabilize < 0 || stabilize > 2 || (stabilize && !(scale > 0.f && std::isfinite(scale) && std::isfinite(eps))))
    return 1;
  // As PyTorch's set_params_fprop: float(double(scale) * log2(e)).
  const float scale_log2 = static_cast<float>(static_cast<double>(scale) * 1.44269504088896340736);
  const forward_params p{static_cast<const uint16_t*>(q), static_cast<const uint16_t*>(k),
                         static_cast<const uint16_t*>(v), static_cast<uint16_t*>(o), lse, query_rows, key_rows,
                         scale, scale_log2, beta, eps};
  const auto rule = static_cast<stabilization>(stabilize);
  return head_dim == 64 ? launch<64, 128>(p, heads, causal != 0, rule, stream)
                        : launch<128, 64>(p, heads, causal != 0, rule, stream);
}

// The standard kernel (stabilize 0: PyTorch's bits in o and lse) that also
// writes the leading indicator of docs/bias.md per row, [heads][query_rows]:
// p_bar_ones, the keys whose bf16 P-bar is exactly 1 as P V takes them (the
// count attention/repeated_max.hpp gives for the single-split kernel), and
// max_repeated, 1 when the row's two largest scores pass the paper's tie test
// RN(RN(max - s) * scale) <= eps. Returns as bitexact_flash_forward, and 1 for
// a null count pointer or a scale or eps that the tie test cannot take.
extern "C" int bitexact_flash_forward_indicator(const void* q, const void* k, const void* v, void* o, float* lse,
                                                int heads, int query_rows, int key_rows, int head_dim, int causal,
                                                float scale, float eps, int32_t* p_bar_ones, int32_t* max_repeated,
                                                cudaStream_t stream) {
  if (!p_bar_ones || !max_repeated || !q || !k || !v || !o || !lse || heads < 1 || heads > 65535 ||
      query_rows < 1 || key_rows < 1 || (head_dim != 64 && head_dim != 128) ||
      !(scale > 0.f && std::isfinite(scale) && std::isfinite(eps)))
    return 1;
  const float scale_log2 = static_cast<float>(static_cast<double>(scale) * 1.44269504088896340736);
  const forward_params p{static_cast<const uint16_t*>(q), static_cast<const uint16_t*>(k),
                         static_cast<const uint16_t*>(v), static_cast<uint16_t*>(o), lse, query_rows, key_rows,
                         scale, scale_log2, 2.f, eps, p_bar_ones, max_repeated};
  return head_dim == 64 ? launch<64, 128>(p, heads, causal != 0, stabilization::none, stream)
                        : launch<128, 64>(p, heads, causal != 0, stabilization::none, stream);
}
