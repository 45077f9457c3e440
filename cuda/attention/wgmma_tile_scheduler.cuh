// Which row block of which head each of the wgmma kernel's thread blocks
// computes. No bit depends on the order.
#pragma once

#include "flash_tiles.cuh"
#include "wgmma_operands.cuh"

#include <algorithm>

namespace flash::wgmma {

template <class Op, int D>
__host__ __device__ __forceinline__ int row_blocks(int query_rows) {
  return (query_rows + block_rows<Op, D> - 1) / block_rows<Op, D>;
}

// Without the mask the thread blocks are persistent (one an SM), so that the
// producer loads the next row block's Q, K and V while the consumers finish
// one; the row blocks of all heads are dealt to them round by round: tile t
// is row block t % m_blocks of head t / m_blocks (a round's tiles share few
// heads, so their K and V stay in L2), and in odd rounds the thread blocks
// take the round's tiles in the opposite order, so that each gets long and
// short ones alike. Under the causal mask, whose row blocks differ in
// length, a thread block a tile, the row blocks of a head from the one with
// the most keys, which the hardware hands to SMs as they free up: a fixed
// deal measured no faster there (docs/performance.md).
struct tile_schedule {
  int m_blocks, tiles;

  struct tile {
    int m_block, head;
  };

  template <bool Causal>
  static int grid(long tiles, int sms) {
    return int(Causal ? tiles : std::min<long>(tiles, sms));
  }

  __device__ __forceinline__ int count() const { return (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x; }

  // The thread block's k-th tile.
  template <bool Causal>
  __device__ __forceinline__ tile at(int k) const {
    int t = k * gridDim.x + ((k & 1) ? gridDim.x - 1 - blockIdx.x : blockIdx.x);
    if (t >= tiles) t = k * gridDim.x + blockIdx.x;  // the last, partial round: in order
    const int m = t % m_blocks;
    return {Causal ? m_blocks - 1 - m : m, t / m_blocks};
  }
};

}  // namespace flash::wgmma
