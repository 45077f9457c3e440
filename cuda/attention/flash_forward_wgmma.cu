// Our flash-attention forward kernel in Hopper's own structure (sm_90a),
// with the bits of the FA2-structure kernel (flash_forward.cu), i.e. of
// PyTorch 2.11's flash backend on its single-split path, and of the
// stabilized presets: the arithmetic is flash_softmax.cuh's, the same
// instructions on each row; what differs is how data reach it.
//
// - A producer warpgroup copies Q once and K and V blocks through a ring of
//   shared-memory stages with the tensor copy engine (TMA), each copy
//   completing on an mbarrier; consumers hand a stage back through another.
// - Two consumer warpgroups own 64 query rows each of FA2's 128-row block and
//   compute S = Q K^T with wgmma from shared memory (both operands K-major)
//   and O += P V with P from registers and V from shared memory (MN-major).
//
// Why the bits are FA2's: every S element is one chain of k16 tensor-core
// steps over d from zero, in FA2's order, and every O element one chain
// over the keys of each block after the block's rescale; wgmma's k16 step is
// mma.sync's fused step (cuda/probe_mma.cu, for each shape and operand
// source used here), and its accumulator layout gives each thread the very
// rows and columns FA2's gives it, so the thread-local row sums add in FA2's
// order. The K/V blocks are FA2's (kBlockN 128 at d 64, 64 at d 128, from the
// last to the first), and so are the 128-row blocks that set the causal
// visits. Checked on the device machine by cuda/attention/check_flash_forward.py.
#include "../hopper.cuh"
#include "flash_softmax.cuh"

#include <cudaTypedefs.h>

namespace {

using namespace flash;

constexpr int warpgroup_threads = 128;
constexpr int stages = 2;  // K/V blocks in flight (3 and 4 measured no faster)

// Consumer warpgroups a thread block, 64 query rows each. Causal calls keep
// FA2's 128-row blocks: the row block sets which K/V blocks are visited and
// which are masking steps, and so the bits of rows whose visited keys are
// all masked. Without the mask every row visits every block and only the
// first is a masking step, so any row block gives FA2's bits, and three
// consumers (FlashAttention-3's choice at d 64) have more warps to hide the
// softmax's latency (measured: d 64 1.29x -> 1.46x PyTorch flash, d 128 1.56x -> 1.63x).
constexpr int consumers_for(bool Causal) { return Causal ? 2 : 3; }

// Shared memory, from a 1024-byte aligned base: Q's pages, the K stages, the
// V stages (pages of 64 columns, 128 bytes a row, as hopper.cuh lays them
// out), then the mbarriers.
template <int D, int Consumers>
struct smem_layout {
  static constexpr int BN = key_block<D>, pages = D / 64, rows = 64 * Consumers;
  static constexpr uint32_t q_page = rows * 128, kv_page = BN * 128;  // bytes of one 64-column page
  static constexpr uint32_t q_bytes = pages * q_page, kv_bytes = pages * kv_page;
  static constexpr uint32_t q = 0, k = q_bytes, v = k + stages * kv_bytes, barriers = v + stages * kv_bytes;
  static constexpr int barrier_count = 1 + 4 * stages;  // Q full; K full, K empty, V full, V empty per stage
  static constexpr uint32_t bytes = barriers + 8 * barrier_count + 1024;  // + the base's alignment
};

struct tensor_maps {
  CUtensorMap q, k, v;
};

struct stage_barriers {
  uint32_t k_full, k_empty, v_full, v_empty;
};

// Where the i-th K/V block a row block visits lives: its stage's tiles and
// barriers, and the parity of the stage's current round.
template <int D, int Consumers>
struct pipeline_slot {
  uint32_t k_tile, v_tile, parity;
  stage_barriers barrier;
  __device__ __forceinline__ pipeline_slot(uint32_t base, int i) {
    using L = smem_layout<D, Consumers>;
    const int stage = i % stages;
    k_tile = base + L::k + stage * L::kv_bytes, v_tile = base + L::v + stage * L::kv_bytes;
    parity = (i / stages) & 1;
    const uint32_t b = base + L::barriers + 8 + 32 * stage;  // after Q's
    barrier = {b, b + 8, b + 16, b + 24};
  }
};

// S = Q K^T of one K/V block for the warpgroup's 64 rows, issued once K has
// landed: a chain of k16 steps over d from zero (page c / 4, 32 bytes a step within it).
template <int D, int Consumers>
__device__ __forceinline__ void issue_scores(float (&s)[1][key_block<D> / 8][4], uint32_t q_rows,
                                             const pipeline_slot<D, Consumers>& slot) {
  using L = smem_layout<D, Consumers>;
#pragma unroll
  for (int j = 0; j < L::BN / 8; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r) s[0][j][r] = 0.f;
  hopper::barrier_wait(slot.barrier.k_full, slot.parity);
  hopper::warpgroup_arrive();
#pragma unroll
  for (int c = 0; c < D / 16; ++c) {
    const uint32_t page = (c / 4), offset = (c % 4) * 32;
    hopper::wgmma_ss<L::BN>(s[0], hopper::swizzled_descriptor(q_rows + page * L::q_page + offset, 16, 1024),
                            hopper::swizzled_descriptor(slot.k_tile + page * L::kv_page + offset, 16, 1024));
  }
  hopper::warpgroup_commit();
}

// O += P V of one K/V block, issued once V has landed: keys 16kk.., 16
// rows of 128 bytes a step.
template <int D, int Consumers>
__device__ __forceinline__ void issue_pv(row_state<D, 1>& rs, const uint32_t (&pa)[key_block<D> / 16][4],
                                         const pipeline_slot<D, Consumers>& slot) {
  using L = smem_layout<D, Consumers>;
  hopper::barrier_wait(slot.barrier.v_full, slot.parity);
  hopper::warpgroup_arrive();
#pragma unroll
  for (int kk = 0; kk < L::BN / 16; ++kk)
    hopper::wgmma_rs_b_mn_major<D>(rs.o[0], pa[kk],
                                   hopper::swizzled_descriptor(slot.v_tile + kk * 16 * 128, L::kv_page, 1024));
  hopper::warpgroup_commit();
}

// A stage's tiles handed back to the producer, one arrival per warp, once
// the wgmma reading them has completed.
__device__ __forceinline__ void release(uint32_t empty_barrier) {
  __syncwarp();
  if (threadIdx.x % 32 == 0) hopper::barrier_arrive(empty_barrier);
}

// The softmax of a block whose S has landed, its K handed back: the mask in
// FA2's masking steps, the exponentials, the row sums and alpha.
template <int D, bool Causal, stabilization Rule, bool Count>
__device__ __forceinline__ void softmax_step(row_state<D, 1>& rs, float (&s)[1][key_block<D> / 8][4],
                                             float (&alpha)[1][2], const forward_params& p,
                                             const int (&first_row)[1], int n_block, bool masking, bool first) {
  constexpr int BN = key_block<D>;
  if (masking) {
    mask_scores<BN, 1, Causal>(s, p, first_row, n_block);
    softmax_block<D, BN, 1, Causal, Rule, Count, true>(rs, s, alpha, p, first);
  } else {
    softmax_block<D, BN, 1, Causal, Rule, Count, false>(rs, s, alpha, p, first);
  }
}

// Ping-pong between the consumer warpgroups (FlashAttention-3): each issues
// its tensor-core work only after the one before it has issued its own, in
// turn, so that one's softmax runs while the others' products do. Named
// barrier 1 + c is consumer c's turn; the last consumer hands consumer 0 the
// first turn, and keeps back its last pass so that every barrier's arrivals
// pair up.
template <int Consumers>
struct turns {
  int consumer;
  __device__ __forceinline__ bool last() const { return consumer == Consumers - 1; }
  __device__ __forceinline__ void wait() const { hopper::named_barrier_sync(1 + consumer, 2 * warpgroup_threads); }
  __device__ __forceinline__ void pass() const {
    hopper::named_barrier_arrive(1 + (consumer + 1) % Consumers, 2 * warpgroup_threads);
  }
};

// One consumer warpgroup's pass over its row block, in FlashAttention-3's
// intra-warpgroup pipeline: S(i) and P V(i - 1) are issued together, the
// softmax of block i runs once S(i) has landed while P V(i - 1) still runs,
// and O is rescaled by block i's alpha once P V(i - 1) has landed. So O
// still sees FA2's operations in FA2's order:
// ... O += P(i-1) V(i-1); O *= alpha(i); O += P(i) V(i) ...
template <int D, int Consumers, bool Causal, stabilization Rule, bool Count>
__device__ __forceinline__ void consume_row_block(row_state<D, 1>& rs, const forward_params& p, uint32_t base,
                                                  uint32_t q_rows, const key_block_range& blocks,
                                                  const int (&first_row)[1], const turns<Consumers>& turn) {
  constexpr int BN = key_block<D>;
  float s[1][BN / 8][4];
  uint32_t pa[BN / 16][4];
  float alpha[1][2];
  const auto pack_p = [&] {
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) p_fragment<D, BN, 1, Count>(pa[kk], rs, s, 0, kk);
  };
  if (turn.last()) turn.pass();
  pipeline_slot<D, Consumers> previous(base, 0);
  turn.wait();
  issue_scores<D>(s, q_rows, previous);
  turn.pass();
  hopper::warpgroup_wait<0>();
  hopper::fence_accumulators<BN>(s[0]);
  release(previous.barrier.k_empty);
  softmax_step<D, Causal, Rule, Count>(rs, s, alpha, p, first_row, blocks.count - 1, blocks.masking_steps > 0, true);
  pack_p();
  for (int i = 1; i < blocks.count; ++i) {
    const pipeline_slot<D, Consumers> slot(base, i);
    turn.wait();
    issue_scores<D>(s, q_rows, slot);
    issue_pv<D>(rs, pa, previous);
    turn.pass();
    hopper::warpgroup_wait<1>();  // S(i) has landed
    hopper::fence_accumulators<BN>(s[0]);
    release(slot.barrier.k_empty);
    softmax_step<D, Causal, Rule, Count>(rs, s, alpha, p, first_row, blocks.count - 1 - i, i < blocks.masking_steps,
                                         false);
    hopper::warpgroup_wait<0>();  // P V(i - 1) has landed
    hopper::fence_accumulators<D>(rs.o[0]);
    release(previous.barrier.v_empty);
    rescale_o(rs, alpha);
    pack_p();
    previous = slot;
  }
  turn.wait();
  issue_pv<D>(rs, pa, previous);
  if (!turn.last()) turn.pass();
  hopper::warpgroup_wait<0>();
  hopper::fence_accumulators<D>(rs.o[0]);
  release(previous.barrier.v_empty);
}

template <int D, int Consumers, bool Causal, stabilization Rule, bool Count>
__global__ void __launch_bounds__(warpgroup_threads * (1 + Consumers), 1)
    flash_forward_wgmma_kernel(const __grid_constant__ forward_params p, const __grid_constant__ tensor_maps maps) {
  using L = smem_layout<D, Consumers>;
  static_assert(!Causal || L::rows == block_rows, "a causal call keeps FA2's row blocks");
  constexpr int BN = L::BN;
  extern __shared__ uint8_t shared_raw[];
  const uint32_t base = (static_cast<uint32_t>(__cvta_generic_to_shared(shared_raw)) + 1023) & ~1023u;
  const uint32_t q_full = base + L::barriers;
  // Under the causal mask the last row blocks have the most keys: they start
  // first, so that the short ones fill the end (no bit depends on the order).
  const int m_block = Causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x, head = blockIdx.y;
  const int warpgroup = threadIdx.x / warpgroup_threads;
  // m_block counts FA2's row blocks whenever it matters (causal calls).
  const key_block_range blocks = key_block_range::of<BN, Causal>(m_block, p.query_rows, p.key_rows);
  if (threadIdx.x == 0) {
    hopper::barrier_init(q_full, 1);
    for (int i = 0; i < stages; ++i) {
      const stage_barriers b = pipeline_slot<D, Consumers>(base, i).barrier;
      hopper::barrier_init(b.k_full, 1);
      hopper::barrier_init(b.v_full, 1);
      hopper::barrier_init(b.k_empty, Consumers * 4);  // one arrival per consumer warp
      hopper::barrier_init(b.v_empty, Consumers * 4);
    }
    hopper::barrier_init_fence();
  }
  __syncthreads();

  // The roles as the two branches of one if, so that setmaxnreg moves
  // registers from the producer (which needs few) to the consumers.
  if (warpgroup == 0) {  // the producer: one thread issues every copy
    hopper::registers_shrink<24>();
    if (threadIdx.x == 0 && blocks.count > 0) {
      hopper::barrier_arrive_expect_bytes(q_full, L::q_bytes);
#pragma unroll
      for (int page = 0; page < L::pages; ++page)
        hopper::copy_box(base + L::q + page * L::q_page, &maps.q, q_full, 64 * page, m_block * L::rows, head);
      for (int i = 0; i < blocks.count; ++i) {
        const int n_block = blocks.count - 1 - i;
        const pipeline_slot<D, Consumers> slot(base, i);
        hopper::barrier_wait(slot.barrier.k_empty, slot.parity ^ 1);
        hopper::barrier_arrive_expect_bytes(slot.barrier.k_full, L::kv_bytes);
#pragma unroll
        for (int page = 0; page < L::pages; ++page)
          hopper::copy_box(slot.k_tile + page * L::kv_page, &maps.k, slot.barrier.k_full, 64 * page, n_block * BN,
                           head);
        hopper::barrier_wait(slot.barrier.v_empty, slot.parity ^ 1);
        hopper::barrier_arrive_expect_bytes(slot.barrier.v_full, L::kv_bytes);
#pragma unroll
        for (int page = 0; page < L::pages; ++page)
          hopper::copy_box(slot.v_tile + page * L::kv_page, &maps.v, slot.barrier.v_full, 64 * page, n_block * BN,
                           head);
      }
    }
  } else {
    hopper::registers_grow<Consumers == 2 ? 240 : 160>();  // (24 + 2 * 240) or (24 + 3 * 160) times 128 <= 64K
    const int consumer = warpgroup - 1, warp = threadIdx.x / 32 % 4;
    const int first_row[1] = {m_block * L::rows + consumer * 64 + warp * 16};
    row_state<D, 1> rs;
    rs.clear();
    if (blocks.count > 0) {  // else every row is masked: O = 0, L = +inf, as FA2
      hopper::barrier_wait(q_full, 0);
      consume_row_block<D, Consumers, Causal, Rule, Count>(rs, p, base, base + L::q + consumer * 64 * 128, blocks,
                                                           first_row, turns<Consumers>{consumer});
    }
    write_rows<D, 1, Count>(rs, p, head, first_row);
  }
}

// cuTensorMapEncodeTiled from the driver, found through the runtime (no -lcuda).
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const auto encoder = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      function = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
  }();
  return encoder;
}

// [heads][rows][D] bf16 as a 3-D tensor, boxes of 64 columns x box_rows rows
// of one head, 128-byte swizzled; rows past a head's end read as zeros (as
// FA2's copies give them).
bool head_map(CUtensorMap* map, const void* data, int heads, int rows, int D, int box_rows) {
  const auto encode = tensor_map_encoder();
  if (!encode) return false;
  const cuuint64_t dims[3] = {cuuint64_t(D), cuuint64_t(rows), cuuint64_t(heads)};
  const cuuint64_t strides[2] = {cuuint64_t(D) * 2, cuuint64_t(rows) * D * 2};  // bytes, of dims 1 and 2
  const cuuint32_t box[3] = {64, cuuint32_t(box_rows), 1}, element_strides[3] = {1, 1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(data), dims, strides, box,
                element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// The wgmma kernel of one head dim, mask and rule (flash::forward dispatches to it).
template <int D, bool Causal, stabilization Rule, bool Count>
struct wgmma_structure {
  static int launch(const forward_params& p, int heads, cudaStream_t stream) {
    constexpr int Consumers = consumers_for(Causal);
    using L = smem_layout<D, Consumers>;
    tensor_maps maps;
    if (!head_map(&maps.q, p.q, heads, p.query_rows, D, L::rows) ||
        !head_map(&maps.k, p.k, heads, p.key_rows, D, L::BN) || !head_map(&maps.v, p.v, heads, p.key_rows, D, L::BN))
      return 2;
    const auto kernel = flash_forward_wgmma_kernel<D, Consumers, Causal, Rule, Count>;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L::bytes) != cudaSuccess) return 2;
    kernel<<<dim3((p.query_rows + L::rows - 1) / L::rows, heads), warpgroup_threads * (1 + Consumers), L::bytes,
             stream>>>(p, maps);
    return cudaGetLastError() == cudaSuccess ? 0 : 2;
  }
};

}  // namespace

// The host API of flash_forward.cu's kernels (flash_softmax.cuh, flash::forward), on the wgmma kernel.
extern "C" int bitexact_flash_forward_wgmma(const void* q, const void* k, const void* v, void* o, float* lse,
                                            int heads, int query_rows, int key_rows, int head_dim, int causal,
                                            float scale, int stabilize, float beta, float eps, cudaStream_t stream) {
  return flash::forward<wgmma_structure>(q, k, v, o, lse, heads, query_rows, key_rows, head_dim, causal, scale,
                                         stabilize, beta, eps, stream);
}

extern "C" int bitexact_flash_forward_wgmma_indicator(const void* q, const void* k, const void* v, void* o,
                                                      float* lse, int heads, int query_rows, int key_rows,
                                                      int head_dim, int causal, float scale, float eps,
                                                      int32_t* p_bar_ones, int32_t* max_repeated,
                                                      cudaStream_t stream) {
  return flash::forward_indicator<wgmma_structure>(q, k, v, o, lse, heads, query_rows, key_rows, head_dim, causal,
                                                   scale, eps, p_bar_ones, max_repeated, stream);
}
