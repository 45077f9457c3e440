// Our flash-attention forward kernel in Hopper's own structure (sm_90a).
// With bf16 operands (wgmma_operands.cuh) it has the bits of the
// FA2-structure kernel (flash_forward.cu), i.e. of PyTorch 2.11's flash
// backend on its single-split path, and of the stabilized presets: the
// arithmetic is flash_softmax.cuh's, the same instructions on each row; what
// differs is how data reach it. With e4m3 operands it is our FP8 kernel, the
// same arithmetic on the fp8 tensor core with its own blocks, exponent and
// P-bar (the presets bitexact_flash_fp8_sm90*, docs/attention.md). The parts:
// the shared memory and its barriers (wgmma_shared_memory.cuh), the tile
// scheduler (wgmma_tile_scheduler.cuh), the producer's copies and the
// consumers' products (wgmma_mainloop.cuh), O's way out
// (wgmma_epilogue.cuh); the tile choices are flash_tiles.cuh's, the launch
// flash_forward_wgmma.cu's.
//
// - A producer warpgroup copies each row block's Q (into one of two
//   buffers) and its K and V blocks through a ring of shared-memory stages
//   with the tensor copy engine (TMA), each copy completing on an mbarrier;
//   consumers hand a buffer or stage back through another. Without the
//   mask the thread blocks are persistent, so these copies run ahead into
//   the next row block.
// - Consumer warpgroups own 64 query rows each of a row block and compute
//   S = Q K^T with wgmma from shared memory (both operands K-major) and
//   O += P V with P from registers and V from shared memory (MN-major),
//   taking turns at the tensor cores (ping-pong) and overlapping each
//   block's softmax with the previous block's P V (FlashAttention-3).
//
// Why the bf16 kernel's bits are FA2's: every S element is one chain of k16 tensor-core
// steps over d from zero, in FA2's order, and every O element one chain
// over the keys of each block after the block's rescale; wgmma's k16 step is
// mma.sync's fused step (cuda/probe_mma.cu, for each shape and operand
// source used here), and its accumulator layout gives each thread the very
// rows and columns FA2's gives it, so the thread-local row sums add in FA2's
// order. The K/V blocks are FA2's (kBlockN 128 at d 64, 64 at d 128, from the
// last to the first), and each consumer visits those of FA2's 128-row block
// that holds its rows, with FA2's masking steps. Checked on the device machine
// by cuda/attention/check_flash_forward.py.
#pragma once

#include "../hopper.cuh"
#include "flash_params.cuh"
#include "flash_softmax.cuh"
#include "flash_tiles.cuh"
#include "wgmma_epilogue.cuh"
#include "wgmma_mainloop.cuh"
#include "wgmma_shared_memory.cuh"
#include "wgmma_tile_scheduler.cuh"

#include <cudaTypedefs.h>

namespace flash::wgmma {

struct tensor_maps {
  CUtensorMap q, k, v, o;
};

// The producer: one thread issues every copy, counting the K/V blocks (the
// ring's position) and the Q copies so far, as the consumers do.
template <class Op, int D, bool Causal>
__device__ __forceinline__ void produce(const forward_params& p, const tensor_maps& maps, uint32_t base,
                                        const tile_schedule& schedule) {
  int loaded = 0, q_loads = 0;
  for (int k = 0; k < schedule.count(); ++k) {
    const tile_schedule::tile tile = schedule.at<Causal>(k);
    const int visits = thread_block_visits<Op, D, Causal>(p, tile.m_block);
    if (visits == 0) continue;
    const int batch = p.batch_of(tile.head);
    load_q<Op, D>(q_slot<Op, D>(base, q_loads++), &maps.q, tile.m_block, p.query_head_of(tile.head), batch);
    load_key_blocks<Op, D>(base, loaded, visits, &maps.k, &maps.v, p.kv_head_of(tile.head), batch);
    loaded += visits;
  }
}

// A consumer warpgroup: each of its tiles' rows through the mainloop, then out.
template <class Op, int D, bool Causal, stabilization Rule, bool Count>
__device__ __forceinline__ void consume(const forward_params& p, const tensor_maps& maps, uint32_t base,
                                        const tile_schedule& schedule, int consumer) {
  const int warp = threadIdx.x / 32 % 4;
  const o_epilogue<Op, D> epilogue(base, consumer);
  int loaded = 0, q_loads = 0;
  row_state<D, 1> rs;
  for (int k = 0; k < schedule.count(); ++k) {
    const tile_schedule::tile tile = schedule.at<Causal>(k);
    const int visits = thread_block_visits<Op, D, Causal>(p, tile.m_block);
    const int consumer_row = tile.m_block * block_rows<Op, D> + consumer * consumer_rows;
    const int first_row[1] = {consumer_row + warp * 16};
    const key_block_range blocks = consumer_visits<Op, D, Causal>(p, tile.m_block, consumer);
    rs.clear();
    if (visits > 0) {  // else every row is masked: O = 0, L = +inf, as FA2
      const q_slot<Op, D> q(base, q_loads++);
      hopper::barrier_wait(q.full, q.parity);
      const row_block_pass<Op, D, Causal, Rule, Count> pass{
          rs, p, base, q.tile + consumer * consumer_rows * smem_layout<Op, D>::row_bytes, first_row, turns<Op::consumers(D)>{consumer}};
      pass.run(blocks, visits, loaded, q.empty);
      loaded += visits;
    }
    epilogue.template store<Count>(rs, p, &maps.o, first_row, consumer_row, tile.head, k);
  }
  epilogue.drain();
}

template <class Op, int D, bool Causal, stabilization Rule, bool Count>
__global__ void __launch_bounds__(warpgroup_threads * (1 + Op::consumers(D)), 1)
    flash_forward_wgmma_kernel(const __grid_constant__ forward_params p, const __grid_constant__ tensor_maps maps,
                               int heads) {
  extern __shared__ uint8_t shared_raw[];
  const uint32_t base = (static_cast<uint32_t>(__cvta_generic_to_shared(shared_raw)) + 1023) & ~1023u;
  const int m_blocks = row_blocks<Op, D>(p.query_rows);
  const tile_schedule schedule{m_blocks, m_blocks * heads};
  // Broadcast from lane 0, so that the compiler knows it is the same in the
  // whole warp and keeps what derives from it (each consumer's K/V blocks, the
  // loop's control) on the uniform datapath.
  const int warpgroup = __shfl_sync(0xffffffff, threadIdx.x / warpgroup_threads, 0);
  if (threadIdx.x == 0) init_barriers<Op, D>(base);
  __syncthreads();
  // The roles as the two branches of one if, so that setmaxnreg takes effect.
  if (warpgroup == 0) {
    hopper::registers_shrink<producer_registers>();
    if (threadIdx.x == 0) produce<Op, D, Causal>(p, maps, base, schedule);
  } else {
    hopper::registers_grow<Op::consumer_registers(D)>();
    consume<Op, D, Causal, Rule, Count>(p, maps, base, schedule, warpgroup - 1);
  }
}

}  // namespace flash::wgmma
