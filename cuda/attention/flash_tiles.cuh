// Every tile choice of our two kernels. The FA2 choices set which K/V blocks
// each row meets and where the online softmax rescales, so they are part of
// the bits; the wgmma kernel's shape is free, since each of its consumers
// keeps the visits of the FA2 row block its rows lie in.
#pragma once

namespace flash {

constexpr int block_rows = 128;  // query rows per thread block (FA2's kBlockM: it sets the causal blocks' visits)

// K/V block length: FA2's kBlockN for bf16 on sm_90 (d 64: 128 keys, d 128: 64).
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
    // mask every block the diagonal can cross: one more than FA2's
    // ceil(block_rows / BN) unless the blocks align with the row blocks.
    const bool aligned = nk % BN == 0 && nq % block_rows == 0 && (block_rows % BN == 0 || BN % block_rows == 0);
    return {n_block_max, !Causal ? 1 : (block_rows + BN - 1) / BN + (aligned ? 0 : 1)};
  }
};

// The wgmma kernel: a producer warpgroup and consumer warpgroups of 64 query
// rows each, as many as its operands say (wgmma_operands.cuh).
namespace wgmma {
constexpr int warpgroup_threads = 128;
constexpr int consumer_rows = 64;
// setmaxnreg moves registers from the producer, which needs few, to the consumers.
constexpr int producer_registers = 24;
}  // namespace wgmma

}  // namespace flash
