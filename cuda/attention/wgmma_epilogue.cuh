// The wgmma kernel's epilogue: a consumer's O leaves through its own
// [64][D] tile of O's buffer, laid out as the copy engine reads it, by one
// tensor copy a page (rows past N are clipped by the tensor map); L and the
// indicator go straight to global memory (flash_softmax.cuh, finish_rows).
#pragma once

#include "../hopper.cuh"
#include "flash_params.cuh"
#include "flash_softmax.cuh"
#include "flash_tiles.cuh"
#include "wgmma_shared_memory.cuh"

#include <cudaTypedefs.h>

namespace flash::wgmma {

template <class Op, int D>
struct o_epilogue {
  using L = smem_layout<Op, D>;
  uint32_t tile;
  int barrier;  // the warpgroup's own, after the turns' barriers

  __device__ __forceinline__ o_epilogue(uint32_t base, int consumer)
      : tile(base + L::o + consumer * consumer_rows * 128), barrier(1 + Op::consumers(D) + consumer) {}

  __device__ __forceinline__ static bool leader() { return threadIdx.x % warpgroup_threads == 0; }

  // Row block k's O, once the copy of the row block before has read the tile
  // (long since, as a rule).
  template <bool Count>
  __device__ __forceinline__ void store(const row_state<D, 1>& rs, const forward_params& p, const CUtensorMap* map,
                                        const int (&first_row)[1], int consumer_row, int head, int k) const {
    if (k > 0) {
      if (leader()) hopper::store_wait_reads();
      hopper::named_barrier_sync(barrier, warpgroup_threads);
    }
    write_tile<Count>(rs, p, first_row, head);
    hopper::fence_shared_for_copies();
    hopper::named_barrier_sync(barrier, warpgroup_threads);
    if (leader()) {
#pragma unroll
      for (int page = 0; page < D / 64; ++page)
        hopper::store_box(map, tile + page * L::o_page, 64 * page, consumer_row, p.query_head_of(head),
                          p.batch_of(head));
      hopper::store_commit();
    }
  }

  // O normalised into the tile, 128-byte swizzled; L and the indicator written.
  template <bool Count>
  __device__ __forceinline__ void write_tile(const row_state<D, 1>& rs, const forward_params& p,
                                             const int (&first_row)[1], int head) const {
    const int warp = threadIdx.x / 32 % 4;
    finish_rows<D, 1, Count, Op::fp8, Op::p_bar_sum>(rs, p, head, first_row, [&](int, int row, int column, uint32_t pair) {
      const int r = warp * 16 + row;
      const uint32_t address =
          tile + (column / 64) * L::o_page + r * 128 + ((((column % 64) / 8) ^ (r % 8)) << 4) + (column % 8) * 2;
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(address), "r"(pair) : "memory");
    });
  }

  // The last copy has read the tile: shared memory may go.
  __device__ __forceinline__ void drain() const {
    if (leader()) hopper::store_wait_reads();
  }
};

}  // namespace flash::wgmma
