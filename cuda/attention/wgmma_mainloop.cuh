// The wgmma kernel's mainloop: the producer's copies of Q, K and V, and a
// consumer's pass over its row block (S = Q K^T and O += P V on the tensor
// cores, the softmax of flash_softmax.cuh between them).
//
// A row's bits depend on which K/V blocks its FA2 row block (128 rows)
// visits and which of them are masking steps: a row whose visited keys are
// all masked keeps FA2's O and L only so. Each consumer keeps the visits of
// the FA2 row block its rows lie in; the thread block visits those of its
// last consumer's, the most, and a consumer whose own row block visits
// fewer skips the first (the highest) ones.
#pragma once

#include "../hopper.cuh"
#include "flash_params.cuh"
#include "flash_softmax.cuh"
#include "flash_tiles.cuh"
#include "wgmma_shared_memory.cuh"

#include <cudaTypedefs.h>

namespace flash::wgmma {

__device__ __forceinline__ int fa2_row_block(int row) { return row / flash::block_rows; }

// The K/V blocks a row block's thread block visits.
template <class Op, int D, bool Causal>
__device__ __forceinline__ int thread_block_visits(const forward_params& p, int m_block) {
  return key_block_range::of<Op::template key_block<D>, Causal>(fa2_row_block(m_block * block_rows<Op, D> + block_rows<Op, D> - 1),
                                                   p.query_rows, p.key_rows)
      .count;
}

// The K/V blocks a consumer's rows visit: none when they all lie past N (in
// the last row block), so that its turns pass at once.
template <class Op, int D, bool Causal>
__device__ __forceinline__ key_block_range consumer_visits(const forward_params& p, int m_block, int consumer) {
  const int first_row = m_block * block_rows<Op, D> + consumer * consumer_rows;
  key_block_range blocks = key_block_range::of<Op::template key_block<D>, Causal>(fa2_row_block(first_row), p.query_rows,
                                                                      p.key_rows);
  if (first_row >= p.query_rows) blocks.count = 0;
  return blocks;
}

// Q of a row block into its buffer, once the consumers of the row block
// before last are done with it.
template <class Op, int D>
__device__ __forceinline__ void load_q(const q_slot<Op, D>& q, const CUtensorMap* map, int m_block, int head,
                                       int batch) {
  using L = smem_layout<Op, D>;
  hopper::barrier_wait(q.empty, q.parity ^ 1);
  hopper::barrier_arrive_expect_bytes(q.full, L::q_bytes);
#pragma unroll
  for (int page = 0; page < L::pages; ++page)
    hopper::copy_box(q.tile + page * L::q_page, map, q.full, L::page_columns * page, m_block * L::rows, head, batch);
}

// K or V block n_block into a stage's tile, once its consumers have handed
// it back; V^T's block (Transposed, e4m3) is one box of D rows of BN keys.
template <class Op, int D, bool Transposed = false>
__device__ __forceinline__ void load_key_block(uint32_t tile, uint32_t full, uint32_t empty, uint32_t parity,
                                               const CUtensorMap* map, int n_block, int head, int batch) {
  using L = smem_layout<Op, D>;
  hopper::barrier_wait(empty, parity ^ 1);
  hopper::barrier_arrive_expect_bytes(full, L::kv_bytes);
  if constexpr (Transposed) {
    hopper::copy_box(tile, map, full, n_block * L::BN, 0, head, batch);
  } else {
#pragma unroll
    for (int page = 0; page < L::pages; ++page)
      hopper::copy_box(tile + page * L::kv_page, map, full, L::page_columns * page, n_block * L::BN, head, batch);
  }
}

// A row block's K and V blocks, from the last to the first, into the ring's
// slots from position `loaded`.
template <class Op, int D>
__device__ __forceinline__ void load_key_blocks(uint32_t base, int loaded, int visits, const CUtensorMap* k,
                                                const CUtensorMap* v, int head, int batch) {
  for (int i = 0; i < visits; ++i) {
    const int n_block = visits - 1 - i;
    const kv_slot<Op, D> slot(base, loaded + i);
    load_key_block<Op, D>(slot.k_tile, slot.barrier.k_full, slot.barrier.k_empty, slot.parity, k, n_block, head,
                          batch);
    load_key_block<Op, D, Op::fp8>(slot.v_tile, slot.barrier.v_full, slot.barrier.v_empty, slot.parity, v, n_block,
                                   head, batch);
  }
}

// S = Q K^T of one K/V block for the warpgroup's 64 rows, issued once K has
// landed: a chain of k16 (bf16) or k32 (e4m3) steps over d from zero, 32
// bytes of each row a step.
template <class Op, int D>
__device__ __forceinline__ void issue_scores(float (&s)[1][Op::template key_block<D> / 8][4], uint32_t q_rows,
                                             const kv_slot<Op, D>& slot) {
  using L = smem_layout<Op, D>;
  hopper::barrier_wait(slot.barrier.k_full, slot.parity);
  hopper::warpgroup_arrive();
#pragma unroll
  for (int c = 0; c < D * Op::bytes / 32; ++c) {
    const uint32_t page = c * 32 / L::row_bytes, offset = c * 32 % L::row_bytes;
    Op::template scores_step<L::BN>(
        s[0], hopper::swizzled_descriptor(q_rows + page * L::q_page + offset, 16, 8 * L::row_bytes, L::row_bytes),
        hopper::swizzled_descriptor(slot.k_tile + page * L::kv_page + offset, 16, 8 * L::row_bytes, L::row_bytes),
        c > 0);  // the first step starts the chain (scale-d 0)
  }
  hopper::warpgroup_commit();
}

// o += P V of one K/V block, issued once V has landed: bf16, keys 16kk..,
// 16 rows of 128 bytes a step; e4m3, keys 32kk.., 32 bytes of each of V^T's
// rows a step. o is O, or with pv_fp32_add the block's own sums, from +0.
template <class Op, int D>
__device__ __forceinline__ void issue_pv(float (&o)[D / 8][4],
                                         const uint32_t (&pa)[Op::template key_block<D> / Op::pv_keys][4],
                                         const kv_slot<Op, D>& slot) {
  using L = smem_layout<Op, D>;
  hopper::barrier_wait(slot.barrier.v_full, slot.parity);
  hopper::warpgroup_arrive();
#pragma unroll
  for (int kk = 0; kk < L::BN / Op::pv_keys; ++kk)
    if constexpr (Op::fp8)
      hopper::wgmma_rs_e4m3<D>(o, pa[kk],
                               hopper::swizzled_descriptor(slot.v_tile + kk * 32, 16, 8 * L::vt_row_bytes,
                                                           L::vt_row_bytes),
                               !Op::pv_fp32_add || kk > 0);
    else
      hopper::wgmma_rs_b_mn_major<D>(o, pa[kk],
                                     hopper::swizzled_descriptor(slot.v_tile + kk * 16 * 128, L::kv_page, 1024));
  hopper::warpgroup_commit();
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
// Every consumer takes visits + 1 turns: one for each block's S (with the
// P V before it) and one for the last P V. S, P and alpha stay local to
// run() and are passed by reference: as members they moved ptxas's
// register allocation.
template <class Op, int D, bool Causal, stabilization Rule, bool Count>
struct row_block_pass {
  static constexpr int BN = Op::template key_block<D>;
  using scores = float[1][BN / 8][4];
  using p_fragments = uint32_t[BN / Op::pv_keys][4];
  using factors = float[1][2];
  using block_sums = float[Op::pv_fp32_add ? D / 8 : 1][4];  // pv_fp32_add: one block's P V
  row_state<D, 1>& rs;
  const forward_params& p;
  const uint32_t base, q_rows;  // q_rows: the warpgroup's rows of Q's buffer
  const int (&first_row)[1];
  const turns<Op::consumers(D)> turn;

  // The thread block's K/V blocks before this row block's are the ring's
  // first `loaded`; q_empty hears from each warp once its Q rows are no
  // longer read.
  __device__ __forceinline__ void run(const key_block_range& blocks, int visits, int loaded, uint32_t q_empty) const {
    scores s;
    p_fragments pa;
    factors alpha;
    block_sums pv;
    if (turn.last()) turn.pass();
    const int skipped = visits - blocks.count;
    skip(loaded, skipped);
    if (blocks.count == 0) {  // every row masked: O = 0, L = +inf, as FA2
      release(q_empty);
      turn.wait();
      if (!turn.last()) turn.pass();
      return;
    }
    kv_slot<Op, D> previous(base, loaded + skipped);
    first_block(s, pa, alpha, blocks, previous);
    for (int i = 1; i < blocks.count; ++i) {
      const kv_slot<Op, D> slot(base, loaded + skipped + i);
      next_block(s, pa, alpha, pv, blocks, i, slot, previous);
      previous = slot;
    }
    last_pv(pa, pv, previous, q_empty);
  }

  // Blocks that the thread block visits and this consumer's FA2 row block
  // does not: handed back at once, their turns issuing nothing.
  __device__ __forceinline__ void skip(int loaded, int skipped) const {
    for (int i = 0; i < skipped; ++i) {
      const kv_slot<Op, D> slot(base, loaded + i);
      turn.wait();
      turn.pass();
      release(slot.barrier.k_empty);
      release(slot.barrier.v_empty);
    }
  }

  __device__ __forceinline__ void first_block(scores& s, p_fragments& pa, factors& alpha,
                                              const key_block_range& blocks, const kv_slot<Op, D>& slot) const {
    turn.wait();
    issue_scores<Op, D>(s, q_rows, slot);
    turn.pass();
    hopper::warpgroup_wait<0>();
    hopper::fence_accumulators<BN>(s[0]);
    release(slot.barrier.k_empty);
    softmax(s, alpha, blocks.count - 1, blocks.masking_steps > 0, true);
    pack_p(pa, s, alpha, true);
  }

  // Block i's S with P V of the block before it.
  __device__ __forceinline__ void next_block(scores& s, p_fragments& pa, factors& alpha, block_sums& pv,
                                             const key_block_range& blocks, int i, const kv_slot<Op, D>& slot,
                                             const kv_slot<Op, D>& previous) const {
    turn.wait();
    issue_scores<Op, D>(s, q_rows, slot);
    issue_block_pv(pa, pv, previous);
    turn.pass();
    hopper::warpgroup_wait<1>();  // S(i) has landed
    hopper::fence_accumulators<BN>(s[0]);
    release(slot.barrier.k_empty);
    softmax(s, alpha, blocks.count - 1 - i, i < blocks.masking_steps, false);
    hopper::warpgroup_wait<0>();  // P V(i - 1) has landed
    land_block_pv(pv, previous);
    rescale_o(rs, alpha);
    pack_p(pa, s, alpha, false);
  }

  __device__ __forceinline__ void last_pv(const p_fragments& pa, block_sums& pv, const kv_slot<Op, D>& previous,
                                          uint32_t q_empty) const {
    release(q_empty);  // every S has landed
    turn.wait();
    issue_block_pv(pa, pv, previous);
    if (!turn.last()) turn.pass();
    hopper::warpgroup_wait<0>();
    land_block_pv(pv, previous);
  }

  // P V into O, or (pv_fp32_add) into the block's sums from +0.
  __device__ __forceinline__ void issue_block_pv(const p_fragments& pa, block_sums& pv,
                                                 const kv_slot<Op, D>& previous) const {
    if constexpr (Op::pv_fp32_add) issue_pv<Op, D>(pv, pa, previous);
    else issue_pv<Op, D>(rs.o[0], pa, previous);
  }

  // Once P V has landed: V's slot handed back, and (pv_fp32_add) O = RN(O + the block's sums).
  __device__ __forceinline__ void land_block_pv(block_sums& pv, const kv_slot<Op, D>& previous) const {
    hopper::fence_accumulators<D>(rs.o[0]);
    if constexpr (Op::pv_fp32_add) {
      hopper::fence_accumulators<D>(pv);
#pragma unroll
      for (int i = 0; i < D / 8; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) rs.o[0][i][j] = __fadd_rn(rs.o[0][i][j], pv[i][j]);
    }
    release(previous.barrier.v_empty);
  }

  // The softmax of a block whose S has landed: the mask in FA2's masking
  // steps, the exponentials, the row sums and alpha.
  __device__ __forceinline__ void softmax(scores& s, factors& alpha, int n_block, bool masking, bool first) const {
    if (masking) {
      mask_scores<BN, 1, Causal>(s, p, first_row, n_block);
      softmax_block<D, BN, 1, Causal, Rule, Count, true, Op::fp8, !Op::p_bar_sum>(rs, s, alpha, p, first);
    } else {
      softmax_block<D, BN, 1, Causal, Rule, Count, false, Op::fp8, !Op::p_bar_sum>(rs, s, alpha, p, first);
    }
  }

  // P's A fragments; p_bar_sum: the row sums from them (alpha: the block's, first: block 0).
  __device__ __forceinline__ void pack_p(p_fragments& pa, const scores& s, const factors& alpha, bool first) const {
#pragma unroll
    for (int kk = 0; kk < BN / Op::pv_keys; ++kk)
      if constexpr (Op::fp8)
        p_fragment_e4m3<D, BN, Count>(pa[kk], rs, s[0], kk, p.p_scale, p.p_exponent);
      else
        p_fragment<D, BN, 1, Count>(pa[kk], rs, s, 0, kk);
    if constexpr (Op::p_bar_sum) p_bar_row_sums<D, BN>(rs, pa, alpha, first);
  }
};

}  // namespace flash::wgmma
