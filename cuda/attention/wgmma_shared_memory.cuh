// The wgmma kernel's shared memory, from a 1024-byte aligned base: two Q
// buffers, the K stages, the V stages, O's buffer, then the mbarriers. Every
// tile is in swizzled pages, a row's bytes the swizzle's width (128, or 64),
// as hopper.cuh lays them out; Q and O have a row for each of the thread
// block's query rows.
#pragma once

#include "../hopper.cuh"
#include "flash_tiles.cuh"
#include "wgmma_operands.cuh"

#include <cstdint>

namespace flash::wgmma {

template <class Op, int D>
struct smem_layout {
  static constexpr int BN = Op::template key_block<D>, rows = block_rows<Op, D>, stages = Op::stages;
  // Q and K: rows of D elements in pages as wide as the swizzle (at most 128
  // bytes; 64 for e4m3 at d 64), page_columns elements each.
  static constexpr uint32_t row_bytes = D * Op::bytes < 128 ? D * Op::bytes : 128;
  static constexpr int pages = D * Op::bytes / row_bytes, page_columns = row_bytes / Op::bytes;
  static constexpr uint32_t q_page = rows * row_bytes, kv_page = BN * row_bytes;  // bytes of one page
  static constexpr uint32_t q_bytes = pages * q_page, kv_bytes = pages * kv_page;
  // V^T's tile (e4m3): D rows of BN keys, one page.
  static constexpr uint32_t vt_row_bytes = BN * Op::bytes;
  // O, bf16 whatever the inputs: pages of 64 columns.
  static constexpr uint32_t o_page = rows * 128, o_bytes = D / 64 * o_page;
  static constexpr uint32_t q = 0, k = 2 * q_bytes, v = k + stages * kv_bytes, o = v + stages * kv_bytes,
                            barriers = o + o_bytes;
  // Q full and Q empty per Q buffer; K full, K empty, V full, V empty per stage.
  static constexpr int barrier_count = 4 + 4 * stages;
  static constexpr uint32_t bytes = barriers + 8 * barrier_count + 1024;  // + the base's alignment
};

// Where the thread block's load-th Q lives: the buffer the row block before
// last used, its barriers, and the parity of the buffer's current round.
template <class Op, int D>
struct q_slot {
  uint32_t tile, full, empty, parity;
  __device__ __forceinline__ q_slot(uint32_t base, int load) {
    using L = smem_layout<Op, D>;
    const int buffer = load % 2;
    tile = base + L::q + buffer * L::q_bytes;
    full = base + L::barriers + 16 * buffer, empty = full + 8;
    parity = (load / 2) & 1;
  }
};

struct stage_barriers {
  uint32_t k_full, k_empty, v_full, v_empty;
};

// Where the i-th K/V block the thread block visits lives: its stage's tiles
// and barriers, and the parity of the stage's current round.
template <class Op, int D>
struct kv_slot {
  uint32_t k_tile, v_tile, parity;
  stage_barriers barrier;
  __device__ __forceinline__ kv_slot(uint32_t base, int i) {
    using L = smem_layout<Op, D>;
    const int stage = i % L::stages;
    k_tile = base + L::k + stage * L::kv_bytes, v_tile = base + L::v + stage * L::kv_bytes;
    parity = (i / L::stages) & 1;
    const uint32_t b = base + L::barriers + 32 + 32 * stage;  // after Q's four
    barrier = {b, b + 8, b + 16, b + 24};
  }
};

// Each copy completes on a full barrier; an empty one hears from every consumer warp.
template <class Op, int D>
__device__ __forceinline__ void init_barriers(uint32_t base) {
  for (int load = 0; load < 2; ++load) {
    const q_slot<Op, D> q(base, load);
    hopper::barrier_init(q.full, 1);
    hopper::barrier_init(q.empty, Op::consumers(D) * 4);
  }
  for (int i = 0; i < smem_layout<Op, D>::stages; ++i) {
    const stage_barriers b = kv_slot<Op, D>(base, i).barrier;
    hopper::barrier_init(b.k_full, 1);
    hopper::barrier_init(b.v_full, 1);
    hopper::barrier_init(b.k_empty, Op::consumers(D) * 4);
    hopper::barrier_init(b.v_empty, Op::consumers(D) * 4);
  }
  hopper::barrier_init_fence();
}

// A buffer or stage handed back to the producer, one arrival per warp, once
// nothing of the warpgroup reads it any more.
__device__ __forceinline__ void release(uint32_t empty_barrier) {
  __syncwarp();
  if (threadIdx.x % 32 == 0) hopper::barrier_arrive(empty_barrier);
}

}  // namespace flash::wgmma
