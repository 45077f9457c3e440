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
#include "flash_api.cuh"
#include "flash_softmax.cuh"
#include "flash_tiles.cuh"

namespace {

using namespace flash;
constexpr int threads = 128;  // four warps, each 2 x 16 rows

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

  // Rows [first_row, first_row + Rows) of a [row_count][D] matrix whose rows
  // lie row_stride elements apart; rows past row_count are zero (cp.async
  // reads nothing for them).
  __device__ __forceinline__ void operator()(uint32_t tile, const uint16_t* matrix, int first_row, int row_count,
                                             int64_t row_stride) const {
    const uint16_t* source = matrix + (first_row + row) * row_stride + column;
#pragma unroll
    for (int pass = 0; pass < Rows / rows_per_pass; ++pass) {
      const bool inside = first_row + row + pass * rows_per_pass < row_count;
      asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n" ::"r"(tile + offset + pass * rows_per_pass * 128),
                   "l"(inside ? source + pass * rows_per_pass * row_stride : matrix), "r"(inside ? 16 : 0));
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
// it with the softmax's instructions (faster at d = 128, same bits).
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// One K/V block: S = Q K^T, the mask, the online softmax, O += P V.
template <int D, int BN, bool Causal, stabilization Rule, bool Count, bool Masking>
__device__ __forceinline__ void process_key_block(row_state<D, 2>& rs, const forward_params& p, uint32_t q_tile,
                                                  uint32_t k_tile, uint32_t v_tile, const uint16_t* k_head,
                                                  const uint16_t* v_head, const int (&first_row)[2], int n_block,
                                                  bool first) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  // ldmatrix lanes: x4 of Q gives A (rows 0-7/8-15 x columns 0-7/8-15), of K two
  // key tiles' B, and .trans of V two column tiles' B (PTX's m16n8k16 fragments).
  const tile_lane<block_rows> q_lane(q_tile, warp * 16 + lane % 8 + 8 * (lane / 8 % 2), lane / 16);
  const tile_lane<BN> k_lane(k_tile, lane % 8 + 8 * (lane / 16), lane / 8 % 2);
  const tile_lane<BN> v_lane(v_tile, lane % 8 + 8 * (lane / 8 % 2), lane / 16);
  const tile_copy<BN, D> copy;
  wait_copies_and_sync();  // K(n_block) has landed; nobody reads V(n_block + 1) any more
  copy(v_tile, v_head, n_block * BN, p.key_rows, p.v_strides.row);

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
  if constexpr (Masking) mask_scores<BN, 2, Causal>(s, p, first_row, n_block);
  wait_copies_and_sync();  // V(n_block) has landed; nobody reads K(n_block) any more
  if (n_block > 0) copy(k_tile, k_head, (n_block - 1) * BN, p.key_rows, p.k_strides.row);

  float alpha[2][2];
  softmax_block<D, BN, 2, Causal, Rule, Count, Masking>(rs, s, alpha, p, first);
  rescale_o(rs, alpha);

  // O += P V, 16 keys at a time: P's accumulator registers are already the A fragment.
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) {
    uint32_t pa[2][4];
#pragma unroll
    for (int slab = 0; slab < 2; ++slab) p_fragment<D, BN, 2, Count>(pa[slab], rs, s, slab, kk);
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
  const int warp = threadIdx.x / 32;
  const int nq = p.query_rows, nk = p.key_rows;
  const uint16_t* k_head = p.k + p.kv_offset(p.k_strides, head);
  const uint16_t* v_head = p.v + p.kv_offset(p.v_strides, head);
  // Warp w owns rows 16w.. (slab 0) and 16w + 64.. (slab 1) of the row block.
  const int first_row[2] = {m_block * block_rows + warp * 16, m_block * block_rows + warp * 16 + 64};
  const key_block_range blocks = key_block_range::of<BN, Causal>(m_block, nq, nk);

  row_state<D, 2> rs;
  rs.clear();
  if (blocks.count > 0) {  // else every row is masked: O = 0, L = +inf, as FA2
    tile_copy<block_rows, D>()(q_tile, p.q + p.query_offset(p.q_strides, head), m_block * block_rows, nq,
                               p.q_strides.row);
    tile_copy<BN, D>()(k_tile, k_head, (blocks.count - 1) * BN, nk, p.k_strides.row);
  }
  int n_block = blocks.count - 1;
  for (int step = 0; step < blocks.masking_steps && n_block >= 0; ++step, --n_block)
    process_key_block<D, BN, Causal, Rule, Count, true>(rs, p, q_tile, k_tile, v_tile, k_head, v_head, first_row,
                                                        n_block, step == 0);
  for (; n_block >= 0; --n_block)
    process_key_block<D, BN, Causal, Rule, Count, false>(rs, p, q_tile, k_tile, v_tile, k_head, v_head, first_row,
                                                         n_block, false);
  write_rows<D, 2, Count>(rs, p, head, first_row);
}

// The FA2-structure kernel of one head dim, mask and rule (flash::forward dispatches to it).
template <int D, bool Causal, stabilization Rule, bool Count>
struct fa2_structure {
  static int launch(const forward_params& p, int heads, cudaStream_t stream) {
    constexpr int BN = key_block<D>;
    constexpr int shared_bytes = (block_rows + 2 * BN) * D * 2;  // Q, K and V tiles: 64 KiB (d = 128), 48 KiB (d = 64)
    const auto kernel = flash_forward_kernel<D, BN, Causal, Rule, Count>;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes) != cudaSuccess)
      return 2;
    kernel<<<dim3((p.query_rows + block_rows - 1) / block_rows, heads), threads, shared_bytes, stream>>>(p);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
  }
};

}  // namespace

// The host API (its contract: flash_call.h).
int flash::forward_fa2(const call& c, cudaStream_t stream) {
  return c.fp8 ? 1 : flash::forward<fa2_structure>(c, stream);  // bf16 only
}
