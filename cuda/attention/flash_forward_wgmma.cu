// Our flash-attention forward kernel in Hopper's own structure (sm_90a),
// with the bits of the FA2-structure kernel (flash_forward.cu), i.e. of
// PyTorch 2.11's flash backend on its single-split path, and of the
// stabilized presets: the arithmetic is flash_softmax.cuh's, the same
// instructions on each row; what differs is how data reach it.
//
// - A producer warpgroup copies each row block's Q (into one of two
//   buffers) and its K and V blocks through a ring of shared-memory stages
//   with the tensor copy engine (TMA), each copy completing on an mbarrier;
//   consumers hand a buffer or stage back through another. Without the
//   mask the thread blocks are persistent, so these copies run ahead into
//   the next row block.
// - Three consumer warpgroups own 64 query rows each of a 192-row block and
//   compute S = Q K^T with wgmma from shared memory (both operands K-major)
//   and O += P V with P from registers and V from shared memory (MN-major),
//   taking turns at the tensor cores (ping-pong) and overlapping each
//   block's softmax with the previous block's P V (FlashAttention-3).
//
// Why the bits are FA2's: every S element is one chain of k16 tensor-core
// steps over d from zero, in FA2's order, and every O element one chain
// over the keys of each block after the block's rescale; wgmma's k16 step is
// mma.sync's fused step (cuda/probe_mma.cu, for each shape and operand
// source used here), and its accumulator layout gives each thread the very
// rows and columns FA2's gives it, so the thread-local row sums add in FA2's
// order. The K/V blocks are FA2's (kBlockN 128 at d 64, 64 at d 128, from the
// last to the first), and each consumer visits those of FA2's 128-row block
// that holds its rows, with FA2's masking steps. Checked on the device machine
// by cuda/attention/check_flash_forward.py.
#include "../hopper.cuh"
#include "flash_softmax.cuh"

#include <cudaTypedefs.h>

#include <algorithm>

namespace {

using namespace flash;

constexpr int warpgroup_threads = 128;
constexpr int stages = 2;  // K/V blocks in flight (3 and 4 measured no faster)

// Three consumer warpgroups of 64 query rows each: more warps to hide the
// softmax's latency than FA2's 128-row blocks would give (measured against
// two: d 64 1.29x -> 1.48x PyTorch flash without the mask, 1.28x -> 1.40x
// with it; d 128 1.56x -> 1.70x, and the same with the mask).
constexpr int consumers = 3;
constexpr int block_rows_wgmma = 64 * consumers;

// But a row's bits depend on which K/V blocks its FA2 row block (128 rows)
// visits and which of them are masking steps: a row whose visited keys are
// all masked keeps FA2's O and L only so. Each consumer keeps the visits of
// the FA2 row block its rows lie in; the thread block visits those of its
// last consumer's, the most, and a consumer whose own row block visits fewer
// skips the first (the highest) ones.
__device__ __forceinline__ int fa2_row_block(int row) { return row / block_rows; }

// Shared memory, from a 1024-byte aligned base: two Q buffers, the K
// stages, the V stages, O's pages (pages of 64 columns, 128 bytes a row, as
// hopper.cuh lays them out), then the mbarriers.
template <int D>
struct smem_layout {
  static constexpr int BN = key_block<D>, pages = D / 64, rows = block_rows_wgmma;
  static constexpr uint32_t q_page = rows * 128, kv_page = BN * 128;  // bytes of one 64-column page
  static constexpr uint32_t q_bytes = pages * q_page, kv_bytes = pages * kv_page;
  static constexpr uint32_t q = 0, k = 2 * q_bytes, v = k + stages * kv_bytes, o = v + stages * kv_bytes,
                            barriers = o + q_bytes;
  // Q full and Q empty per Q buffer; K full, K empty, V full, V empty per stage.
  static constexpr int barrier_count = 4 + 4 * stages;
  static constexpr uint32_t bytes = barriers + 8 * barrier_count + 1024;  // + the base's alignment
};

struct tensor_maps {
  CUtensorMap q, k, v, o;
};

struct stage_barriers {
  uint32_t k_full, k_empty, v_full, v_empty;
};

// Where the i-th K/V block a row block visits lives: its stage's tiles and
// barriers, and the parity of the stage's current round.
template <int D>
struct pipeline_slot {
  uint32_t k_tile, v_tile, parity;
  stage_barriers barrier;
  __device__ __forceinline__ pipeline_slot(uint32_t base, int i) {
    using L = smem_layout<D>;
    const int stage = i % stages;
    k_tile = base + L::k + stage * L::kv_bytes, v_tile = base + L::v + stage * L::kv_bytes;
    parity = (i / stages) & 1;
    const uint32_t b = base + L::barriers + 32 + 32 * stage;  // after Q's four
    barrier = {b, b + 8, b + 16, b + 24};
  }
};

// S = Q K^T of one K/V block for the warpgroup's 64 rows, issued once K has
// landed: a chain of k16 steps over d from zero (page c / 4, 32 bytes a step within it).
template <int D>
__device__ __forceinline__ void issue_scores(float (&s)[1][key_block<D> / 8][4], uint32_t q_rows,
                                             const pipeline_slot<D>& slot) {
  using L = smem_layout<D>;
  hopper::barrier_wait(slot.barrier.k_full, slot.parity);
  hopper::warpgroup_arrive();
#pragma unroll
  for (int c = 0; c < D / 16; ++c) {
    const uint32_t page = (c / 4), offset = (c % 4) * 32;
    hopper::wgmma_ss<L::BN>(s[0], hopper::swizzled_descriptor(q_rows + page * L::q_page + offset, 16, 1024),
                            hopper::swizzled_descriptor(slot.k_tile + page * L::kv_page + offset, 16, 1024),
                            c > 0);  // the first step starts the chain (scale-d 0)
  }
  hopper::warpgroup_commit();
}

// O += P V of one K/V block, issued once V has landed: keys 16kk.., 16
// rows of 128 bytes a step.
template <int D>
__device__ __forceinline__ void issue_pv(row_state<D, 1>& rs, const uint32_t (&pa)[key_block<D> / 16][4],
                                         const pipeline_slot<D>& slot) {
  using L = smem_layout<D>;
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
struct turns {
  int consumer;
  __device__ __forceinline__ bool last() const { return consumer == consumers - 1; }
  __device__ __forceinline__ void wait() const { hopper::named_barrier_sync(1 + consumer, 2 * warpgroup_threads); }
  __device__ __forceinline__ void pass() const {
    hopper::named_barrier_arrive(1 + (consumer + 1) % consumers, 2 * warpgroup_threads);
  }
};

// One consumer warpgroup's pass over its row block, in FlashAttention-3's
// intra-warpgroup pipeline: S(i) and P V(i - 1) are issued together, the
// softmax of block i runs once S(i) has landed while P V(i - 1) still runs,
// and O is rescaled by block i's alpha once P V(i - 1) has landed. So O
// still sees FA2's operations in FA2's order:
// ... O += P(i-1) V(i-1); O *= alpha(i); O += P(i) V(i) ...
//
// The thread block's K/V blocks before this row block's are the ring's first
// `loaded`; q_empty hears from each warp once its Q rows are no longer read.
template <int D, bool Causal, stabilization Rule, bool Count>
__device__ __forceinline__ void consume_row_block(row_state<D, 1>& rs, const forward_params& p, uint32_t base,
                                                  uint32_t q_rows, const key_block_range& blocks, int visits,
                                                  const int (&first_row)[1], const turns& turn, int loaded,
                                                  uint32_t q_empty) {
  constexpr int BN = key_block<D>;
  float s[1][BN / 8][4];
  uint32_t pa[BN / 16][4];
  float alpha[1][2];
  const auto pack_p = [&] {
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) p_fragment<D, BN, 1, Count>(pa[kk], rs, s, 0, kk);
  };
  // Every consumer takes visits + 1 turns: one for each block's S (with the
  // P V before it) and one for the last P V; a block its own FA2 row block
  // does not visit is handed back at once, its turn issuing nothing.
  if (turn.last()) turn.pass();
  const int skipped = visits - blocks.count;
  for (int i = 0; i < skipped; ++i) {
    const pipeline_slot<D> slot(base, loaded + i);
    turn.wait();
    turn.pass();
    release(slot.barrier.k_empty);
    release(slot.barrier.v_empty);
  }
  if (blocks.count == 0) {  // every row masked: O = 0, L = +inf, as FA2
    release(q_empty);
    turn.wait();
    if (!turn.last()) turn.pass();
    return;
  }
  pipeline_slot<D> previous(base, loaded + skipped);
  turn.wait();
  issue_scores<D>(s, q_rows, previous);
  turn.pass();
  hopper::warpgroup_wait<0>();
  hopper::fence_accumulators<BN>(s[0]);
  release(previous.barrier.k_empty);
  softmax_step<D, Causal, Rule, Count>(rs, s, alpha, p, first_row, blocks.count - 1, blocks.masking_steps > 0, true);
  pack_p();
  for (int i = 1; i < blocks.count; ++i) {
    const pipeline_slot<D> slot(base, loaded + skipped + i);
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
  release(q_empty);  // every S has landed
  turn.wait();
  issue_pv<D>(rs, pa, previous);
  if (!turn.last()) turn.pass();
  hopper::warpgroup_wait<0>();
  hopper::fence_accumulators<D>(rs.o[0]);
  release(previous.barrier.v_empty);
}

// The row blocks of all heads, dealt to the persistent thread blocks (one
// an SM) round by round: tile t is row block t % m_blocks of head
// t / m_blocks (a round's tiles share few heads, so their K and V stay in
// L2), the row blocks of a head from the one with the most keys under the
// causal mask, and in odd rounds the thread blocks take the round's tiles
// in the opposite order, so that each gets long and short ones alike. (Under
// the causal mask the launch gives a thread block each tile.) No bit
// depends on the order.
struct tile_schedule {
  int m_blocks, tiles;
  __device__ __forceinline__ int count() const { return (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x; }
  template <bool Causal>
  __device__ __forceinline__ void tile(int k, int& m_block, int& head) const {
    int t = k * gridDim.x + ((k & 1) ? gridDim.x - 1 - blockIdx.x : blockIdx.x);
    if (t >= tiles) t = k * gridDim.x + blockIdx.x;  // the last, partial round: in order
    const int m = t % m_blocks;
    m_block = Causal ? m_blocks - 1 - m : m, head = t / m_blocks;
  }
};

template <int D, bool Causal, stabilization Rule, bool Count>
__global__ void __launch_bounds__(warpgroup_threads * (1 + consumers), 1)
    flash_forward_wgmma_kernel(const __grid_constant__ forward_params p, const __grid_constant__ tensor_maps maps,
                               int heads) {
  using L = smem_layout<D>;
  constexpr int BN = L::BN;
  extern __shared__ uint8_t shared_raw[];
  const uint32_t base = (static_cast<uint32_t>(__cvta_generic_to_shared(shared_raw)) + 1023) & ~1023u;
  // Q buffer b: its full barrier at + 16 b, its empty one 8 after.
  const auto q_full = [&](int b) { return base + L::barriers + 16 * b; };
  const int m_blocks = (p.query_rows + L::rows - 1) / L::rows;
  const tile_schedule schedule{m_blocks, m_blocks * heads};
  // Broadcast from lane 0, so that the compiler knows it is the same in the
  // whole warp and keeps what derives from it (each consumer's K/V blocks, the
  // loop's control) on the uniform datapath.
  const int warpgroup = __shfl_sync(0xffffffff, threadIdx.x / warpgroup_threads, 0);
  // The K/V blocks a row block's thread block visits: its last consumer's
  // FA2 row block's, the most.
  const auto visits_of = [&](int m_block) {
    return key_block_range::of<BN, Causal>(fa2_row_block(m_block * L::rows + L::rows - 1), p.query_rows, p.key_rows)
        .count;
  };
  if (threadIdx.x == 0) {
    for (int b = 0; b < 2; ++b) {
      hopper::barrier_init(q_full(b), 1);
      hopper::barrier_init(q_full(b) + 8, consumers * 4);  // one arrival per consumer warp
    }
    for (int i = 0; i < stages; ++i) {
      const stage_barriers b = pipeline_slot<D>(base, i).barrier;
      hopper::barrier_init(b.k_full, 1);
      hopper::barrier_init(b.v_full, 1);
      hopper::barrier_init(b.k_empty, consumers * 4);
      hopper::barrier_init(b.v_empty, consumers * 4);
    }
    hopper::barrier_init_fence();
  }
  __syncthreads();

  // The roles as the two branches of one if, so that setmaxnreg moves
  // registers from the producer (which needs few) to the consumers. Both
  // count the K/V blocks (the ring's position) and the Q copies so far.
  if (warpgroup == 0) {  // the producer: one thread issues every copy
    hopper::registers_shrink<24>();
    if (threadIdx.x == 0) {
      int loaded = 0, q_loads = 0;
      for (int k = 0; k < schedule.count(); ++k) {
        int m_block, head;
        schedule.tile<Causal>(k, m_block, head);
        const int visits = visits_of(m_block);
        if (visits == 0) continue;
        // Q into the buffer the row block before last used, once its consumers are done with it.
        const int b = q_loads % 2;
        hopper::barrier_wait(q_full(b) + 8, ((q_loads++ / 2) & 1) ^ 1);
        hopper::barrier_arrive_expect_bytes(q_full(b), L::q_bytes);
#pragma unroll
        for (int page = 0; page < L::pages; ++page)
          hopper::copy_box(base + L::q + b * L::q_bytes + page * L::q_page, &maps.q, q_full(b), 64 * page,
                           m_block * L::rows, head);
        for (int i = 0; i < visits; ++i) {
          const int n_block = visits - 1 - i;
          const pipeline_slot<D> slot(base, loaded + i);
          // K, then V, of block n_block into the slot, once its consumers have handed it back.
          const auto copy_block = [&](uint32_t empty, uint32_t full, uint32_t tile, const CUtensorMap* map) {
            hopper::barrier_wait(empty, slot.parity ^ 1);
            hopper::barrier_arrive_expect_bytes(full, L::kv_bytes);
#pragma unroll
            for (int page = 0; page < L::pages; ++page)
              hopper::copy_box(tile + page * L::kv_page, map, full, 64 * page, n_block * BN, head);
          };
          copy_block(slot.barrier.k_empty, slot.barrier.k_full, slot.k_tile, &maps.k);
          copy_block(slot.barrier.v_empty, slot.barrier.v_full, slot.v_tile, &maps.v);
        }
        loaded += visits;
      }
    }
  } else {
    hopper::registers_grow<160>();  // (24 + 3 * 160) * 128 registers <= 64K
    const int consumer = warpgroup - 1, warp = threadIdx.x / 32 % 4;
    const int epilogue_barrier = 1 + consumers + consumer;  // after the turns' barriers
    const uint32_t o_tile = base + L::o + consumer * 64 * 128;
    int loaded = 0, q_loads = 0;
    row_state<D, 1> rs;
    for (int k = 0; k < schedule.count(); ++k) {
      int m_block, head;
      schedule.tile<Causal>(k, m_block, head);
      const int visits = visits_of(m_block);
      const int first_row[1] = {m_block * L::rows + consumer * 64 + warp * 16};
      key_block_range blocks = key_block_range::of<BN, Causal>(fa2_row_block(m_block * L::rows + consumer * 64),
                                                               p.query_rows, p.key_rows);
      // A consumer whose rows all lie past N (in the last row block) computes
      // nothing: its turns pass at once, as for K/V blocks it does not visit.
      if (m_block * L::rows + consumer * 64 >= p.query_rows) blocks.count = 0;
      rs.clear();
      if (visits > 0) {  // else every row is masked: O = 0, L = +inf, as FA2
        const int b = q_loads % 2;
        hopper::barrier_wait(q_full(b), (q_loads++ / 2) & 1);
        consume_row_block<D, Causal, Rule, Count>(rs, p, base, base + L::q + b * L::q_bytes + consumer * 64 * 128,
                                                  blocks, visits, first_row, turns{consumer}, loaded,
                                                  q_full(b) + 8);
        loaded += visits;
      }
      // O leaves through its own buffer, a [64][D] tile a consumer lays out
      // as the copy engine reads it, by one tensor copy a page (rows past N
      // are clipped by the tensor map), once the copy of the row block before
      // has read the tile (long since, as a rule).
      if (k > 0) {
        if (threadIdx.x % warpgroup_threads == 0) hopper::store_wait_reads();
        hopper::named_barrier_sync(epilogue_barrier, warpgroup_threads);
      }
      finish_rows<D, 1, Count>(rs, p, head, first_row, [&](int, int row, int column, uint32_t pair) {
        const int r = warp * 16 + row;
        const uint32_t address =
            o_tile + (column / 64) * L::q_page + r * 128 + ((((column % 64) / 8) ^ (r % 8)) << 4) + (column % 8) * 2;
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(address), "r"(pair) : "memory");
      });
      hopper::fence_shared_for_copies();
      hopper::named_barrier_sync(epilogue_barrier, warpgroup_threads);
      if (threadIdx.x % warpgroup_threads == 0) {
#pragma unroll
        for (int page = 0; page < L::pages; ++page)
          hopper::store_box(&maps.o, o_tile + page * L::q_page, 64 * page, m_block * L::rows + consumer * 64, head);
        hopper::store_commit();
      }
    }
    if (threadIdx.x % warpgroup_threads == 0) hopper::store_wait_reads();  // before shared memory goes
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
    using L = smem_layout<D>;
    tensor_maps maps;
    if (!head_map(&maps.q, p.q, heads, p.query_rows, D, L::rows) ||
        !head_map(&maps.k, p.k, heads, p.key_rows, D, L::BN) || !head_map(&maps.v, p.v, heads, p.key_rows, D, L::BN) ||
        !head_map(&maps.o, p.o, heads, p.query_rows, D, 64))
      return 2;
    const auto kernel = flash_forward_wgmma_kernel<D, Causal, Rule, Count>;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L::bytes) != cudaSuccess) return 2;
    // Without the mask, persistent: a thread block an SM, each dealt its row
    // blocks (tile_schedule), so that the producer loads the next one's Q, K
    // and V while the consumers finish one. Under the causal mask, whose row
    // blocks differ in length, a thread block a row block, the longest first,
    // which the hardware hands to SMs as they free up: a fixed deal measured
    // no faster there (docs/performance.md).
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
      return 2;
    const long tiles = long((p.query_rows + L::rows - 1) / L::rows) * heads;
    if (tiles > 0x7FFFFFFF) return 1;  // the kernel counts them in an int
    kernel<<<int(Causal ? tiles : std::min<long>(tiles, sms)), warpgroup_threads * (1 + consumers), L::bytes,
             stream>>>(p, maps, heads);
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
