// The flash-attention forward pass (FlashAttention-2 and the kernels its
// description fields express: bf16 in, or fp8 (e4m3/e5m2) on the fp8 tensor
// core as cuDNN's fp8 kernel or as FA2's arithmetic with fp8 P-bar (bitexact's
// FP8 kernel); fp32 accumulate) emulated from the hardware
// models: tensor-core steps for Q K^T
// and P V, MUFU.EX2 for the exponentials, fp32 ALU operations for everything
// between, in the order and with the roundings of the kernel it reproduces.
// Nothing here rounds by itself: every rounding is one of the hardware models'.
//
// Per query row, over K/V blocks from the last to the first (each block of
// block_n keys):
//   S     = Q K^T, a chain of fused tensor-core steps over the head dim, from +0
//   m     = max(m, rowmax(S))                    masked scores are -inf
//   P     = ex2(RN(RN(S * scale_log2) - RN(m * scale_log2)))     (UNFUSE_FMA)
//   alpha = ex2(RN(RN(m_old - m) * scale_log2)); row sums and O times alpha
//   l_t  += P, four partial sums per row (one per thread of a quad)
//   O     = O + bf16(P) V, a chain of fused tensor-core steps over the keys
// then l = (l_0 + l_2) + (l_1 + l_3), O = RN(O * RN(1 / l)), L = m * scale + log(l).
// FA2's fp8 recipe (p_scaling multiply) takes P V's P as e4m3(RN(P * scale_s)),
// on the fp8 unit, and O = RN(O * RN(RN(1 / l) * o_scale)); l sums the fp32 P.
// With split-KV, each split runs this over its own blocks and writes O and L
// in fp32; the combine kernel merges them (combine_splits below).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/dispatch.hpp"
#include "../core/format.hpp"
#include "../core/operations.hpp"
#include "../hardware/alu.hpp"
#include "../hardware/libdevice.hpp"
#include "../hardware/mma.hpp"
#include "../hardware/mufu.hpp"
#include "../host/parallel.hpp"
#include "../core/observer.hpp"
#include "kernel.hpp"
#include "shape.hpp"

namespace bitexact::attention {

// What one row's softmax did in one K/V block, for an observer of
// flash_forward_head (the kernel's own values, before any bf16 rounding of P).
struct softmax_block_event {
  int row = 0;    // query row
  int split = 0;  // split-KV split (0 without)
  int block = 0;  // K/V block: keys [block * block_n, (block + 1) * block_n)
  float32 block_max{};    // rowmax of the block's scores, after stabilization (across_blocks: of the row's so far)
  float32 running_max{};  // the max the block's P were computed with
  std::optional<float32> alpha;  // what O and the row sums were multiplied by first (none in a split's first block)
  int ties = 0;           // stabilization: the block's scores within epsilon of the max tested (the block's,
                          // or across_blocks the row's so far); 0 when off
  std::span<const float32> scores;  // the raw scores of the block, masked ones -inf
  std::span<const float32> p;       // P in fp32
  std::span<const bfloat16> p_bf16;  // P as P V's tensor-core steps take it (bf16 kernels)
  std::span<const float8_e4m3> p_e4m3;  // the same for an fp8 kernel (p_bf16 empty)
};

// One row after one K/V block's P V: the unnormalised O and the row sums.
struct output_block_event {
  int row = 0, split = 0, block = 0;
  std::array<float32, 4> sums{};  // the partial row sums of the quad's four threads
  std::span<const float32> o;     // [head_dim], unnormalised
};

// One row at the end of a split (of the one pass without split-KV): the
// kernel's epilogue, before O is converted to bf16 or merged by the combine.
struct row_end_event {
  int row = 0, split = 0;
  float32 sum{};      // the row sum, the four partial sums reduced
  // What O is multiplied by: RN(1 / sum), or 1 when the sum is 0 or NaN; an
  // fp8 kernel's is that times o_scale (RN(RN(1 / sum) * o_scale), or cuDNN's
  // rcp(sum) times it), the divisor under div.full.f32
  float32 inverse{};
  float32 lse{};      // L of the split
  std::span<const float32> o;  // [head_dim], O times inverse
};

// Which keys and K/V blocks a query row meets, public because a kernel
// author's explanation of a mismatch needs them (`bitexact attention --explain`).

// How far the causal diagonal is shifted right: N_k - N_q bottom-right
// aligned (mask.h), 0 top-left aligned.
inline int causal_diagonal(const flash_kernel& kernel, const attention_shape& shape) {
  return kernel.causal == causal_alignment::bottom_right ? shape.key_rows - shape.query_rows : 0;
}

// The keys a query row sees are [0, visible_keys): every key, or (causal)
// those up to its diagonal.
inline int visible_keys(const flash_kernel& kernel, const attention_shape& shape, int row) {
  return shape.causal ? std::min(shape.key_rows, row + 1 + causal_diagonal(kernel, shape)) : shape.key_rows;
}

// The K/V block range a thread block of rows (m_block) covers in one split
// (flash_fwd_kernel.h: n_blocks_per_split, the causal cap).
struct block_range {
  int first = 0, end = 0;
};
inline block_range blocks_of(const flash_kernel& kernel, const attention_shape& shape, int m_block, int split) {
  const auto ceil_div = [](int a, int b) { return (a + b - 1) / b; };
  const int key_blocks = ceil_div(shape.key_rows, kernel.block_n);
  const int per_split = ceil_div(key_blocks, kernel.splits);
  block_range range{split * per_split, std::min(key_blocks, (split + 1) * per_split)};
  if (shape.causal)
    range.end = std::min(range.end, ceil_div((m_block + 1) * kernel.block_m + causal_diagonal(kernel, shape), kernel.block_n));
  return range;
}


// The K/V blocks the thread block holding row0 visits in one split, in the
// kernel's order (the block order's comment in kernel.hpp says whose).
inline std::vector<int> visit_order(const flash_kernel& kernel, const attention_shape& shape, int row0, int split) {
  const auto ceil_div = [](int a, int b) { return (a + b - 1) / b; };
  std::vector<int> blocks;
  if (kernel.order == block_order::last_to_first) {
    const block_range range = blocks_of(kernel, shape, row0 / kernel.block_m, split);
    for (int block = range.end - 1; block >= range.first; --block) blocks.push_back(block);
    return blocks;
  }
  if (kernel.order == block_order::first_to_last) {
    const block_range range = blocks_of(kernel, shape, row0 / kernel.block_m, 0);
    for (int block = 0; block < range.end; ++block) blocks.push_back(block);
    return blocks;
  }
  // mask_partial_then_full. Without the causal mask FlexAttention's empty
  // block mask is one partial block over every key.
  const int key_blocks = std::max(ceil_div(shape.key_rows, kernel.block_n), 1);
  if (!shape.causal) {
    for (int block = 0; block < key_blocks; ++block) blocks.push_back(block);
    return blocks;
  }
  // create_block_mask pads the mask to whole blocks with False: a block is
  // full only when every row and key of its padded square is visible.
  const int size = kernel.mask_block, per_mask_block = kernel.mask_block / kernel.block_n;
  const int first_row = row0 / size * size, last_row = std::min(first_row + size, shape.query_rows) - 1;
  std::vector<int> partial, full;
  for (int mask_block = 0; mask_block < ceil_div(shape.key_rows, size); ++mask_block) {
    const int first_key = mask_block * size;
    if (visible_keys(kernel, shape, last_row) <= first_key) continue;  // no row sees a key of it
    const bool whole = first_row + size <= shape.query_rows && first_key + size <= shape.key_rows &&
                       visible_keys(kernel, shape, first_row) >= first_key + size;
    (whole ? full : partial).push_back(mask_block);
  }
  for (const std::vector<int>* list : {&partial, &full}) {
    // block_n_end: the list's blocks of block_n keys, at most the keys' blocks.
    const int iterations = std::min(static_cast<int>(list->size()) * per_mask_block, key_blocks);
    for (int i = 0; i < iterations; ++i) blocks.push_back((*list)[static_cast<std::size_t>(i / per_mask_block)] * per_mask_block + i % per_mask_block);
  }
  return blocks;
}

namespace detail {

// FMNMX as CUDA's fmaxf: a NaN operand loses to a number. The order of -0
// and +0 (taken here as -0 < +0) is not pinned by a capture, and no result
// here depends on it: a zero maximum of either sign gives the same P and L.
inline float32 fmnmx_max(float32 a, float32 b) {
  if (a.is_nan()) return b;
  if (b.is_nan()) return a;
  const float x = to_host(a), y = to_host(b);
  if (x == y) return a.sign() ? b : a;
  return x > y ? a : b;
}

inline constexpr float32 negative_infinity = float32::infinity(true);

// The head's operands, K and V laid out once as the B tiles of mma_m16n8k16
// (element (k, n) at [n * 16 + k]), keys past the end zero (the kernel clears
// V there; K's scores there are masked), so that no slab gathers them again.
struct head_operands {
  const attention_shape& shape;
  std::span<const bfloat16> q;    // [rows][head_dim]
  std::vector<bfloat16> k_tiles;  // [key / 8][head_dim / 16][128]: 8 keys by 16 dims
  std::vector<bfloat16> v_tiles;  // [key / 16][head_dim / 8][128]: 16 keys by 8 dims

  // An fp8 head (fp8 e4m3 or e5m2; bf16 for a bf16 head, whose tiles above
  // hold it): bit patterns, the keys padded to whole blocks with zeros, V
  // transposed so that a P V chain reads its keys in a row.
  format fp8 = bf16;
  std::span<const std::uint8_t> q8;  // [rows][head_dim]
  std::vector<std::uint8_t> k8;      // [padded keys][head_dim]
  std::vector<std::uint8_t> v8t;     // [head_dim][padded keys]
  std::size_t padded_keys = 0;

  head_operands(const attention_shape& s, int block_n, format inputs, std::span<const std::uint8_t> q_rows,
                std::span<const std::uint8_t> k, std::span<const std::uint8_t> v)
      : shape(s), fp8(inputs), q8(q_rows) {
    const std::size_t d = static_cast<std::size_t>(s.head_dim), keys = static_cast<std::size_t>(s.key_rows);
    const std::size_t n = static_cast<std::size_t>(block_n);
    padded_keys = (keys + n - 1) / n * n;
    k8.assign(padded_keys * d, 0);
    v8t.assign(padded_keys * d, 0);
    std::copy(k.begin(), k.end(), k8.begin());
    for (std::size_t key = 0; key < keys; ++key)
      for (std::size_t c = 0; c < d; ++c) v8t[c * padded_keys + key] = v[key * d + c];
  }

  // An empty v (head_scores: no P V) leaves v_tiles zero.
  head_operands(const attention_shape& s, int block_n, std::span<const bfloat16> q_rows, std::span<const bfloat16> k,
                std::span<const bfloat16> v)
      : shape(s), q(q_rows) {
    const std::size_t d = static_cast<std::size_t>(s.head_dim), keys = static_cast<std::size_t>(s.key_rows);
    const std::size_t n = static_cast<std::size_t>(block_n), padded = (keys + n - 1) / n * n;
    k_tiles.assign(padded * d, bfloat16::zero());
    v_tiles.assign(padded * d, bfloat16::zero());
    for (std::size_t key = 0; key < keys; ++key)
      for (std::size_t c = 0; c < d; ++c) {
        k_tiles[((key / 8) * (d / 16) + c / 16) * 128 + (key % 8) * 16 + c % 16] = k[key * d + c];
        if (!v.empty()) v_tiles[((key / 16) * (d / 8) + c / 8) * 128 + (c % 8) * 16 + key % 16] = v[key * d + c];
      }
  }
};

// An fp8 operand element: a bit pattern of format F, or a value of it.
template <format F>
value<F> fp8_element(std::uint8_t bits) {
  return value<F>::from_bits(bits);
}
template <format F>
value<F> fp8_element(value<F> x) {
  return x;
}

// c + the dot product of a[0, n) and b[0, n) (fp8 elements of formats A and
// B) as an fp8 tensor core chains it: steps of products_per_step in ascending
// order, each step's result the next one's C (fused_dot's order).
template <format A, format B, class ElementA, class ElementB>
float32 fp8_chain(const fused_sum_unit& unit, const ElementA* a, const ElementB* b, std::size_t n, float32 c) {
  std::array<value<A>, max_products_per_step> step_a;
  std::array<value<B>, max_products_per_step> step_b;
  const std::size_t step = static_cast<std::size_t>(unit.products_per_step);
  for (std::size_t k = 0; k < n; k += step) {
    const std::size_t count = std::min(step, n - k);
    for (std::size_t i = 0; i < count; ++i) step_a[i] = fp8_element<A>(a[k + i]), step_b[i] = fp8_element<B>(b[k + i]);
    c = fused_multiply_add_step<fp32, A, B>(unit, std::span<const value<A>>(step_a.data(), count),
                                            std::span<const value<B>>(step_b.data(), count), c)
            .result;
  }
  return c;
}

// fn(format_tag<F>{}) for an fp8 kernel's input format F (e4m3 or e5m2).
template <class Fn>
decltype(auto) with_fp8_inputs(format inputs, Fn&& fn) {
  if (inputs == e5m2) return fn(format_tag<e5m2>{});
  return fn(format_tag<e4m3>{});
}

// Rows [row0, row0 + 16) of the head's Q as head_dim/16 A tiles of
// mma_m16n8k16 (16 x 16, row-major); rows past the end are zero.
inline std::vector<bfloat16> query_tiles(const head_operands& head, int row0) {
  const int d = head.shape.head_dim;
  std::vector<bfloat16> tiles(static_cast<std::size_t>(d / 16) * 256, bfloat16::zero());
  for (int r = 0; r < 16 && row0 + r < head.shape.query_rows; ++r)
    for (int c = 0; c < d; ++c)
      tiles[static_cast<std::size_t>(c / 16) * 256 + static_cast<std::size_t>(r) * 16 + static_cast<std::size_t>(c % 16)] =
          head.q[static_cast<std::size_t>(row0 + r) * static_cast<std::size_t>(d) + static_cast<std::size_t>(c)];
  return tiles;
}

// S of 16 query rows (their query_tiles) against the keys of `groups` groups
// of 8 from first_group on: per group a chain of tensor-core steps over the
// head dim from +0. Writes scores[r * stride + key - 8 * first_group].
inline void score_groups(const flash_kernel& kernel, const head_operands& head, const std::vector<bfloat16>& q_tiles,
                         std::size_t first_group, std::size_t groups, float32* scores, std::size_t stride) {
  const std::size_t d = static_cast<std::size_t>(head.shape.head_dim);
  std::array<float32, 128> acc;
  for (std::size_t group = 0; group < groups; ++group) {
    acc.fill(float32::zero());
    for (std::size_t chunk = 0; chunk < d / 16; ++chunk) {
      // B: the group's 8 keys by the chunk's 16 dims.
      const bfloat16* b = head.k_tiles.data() + ((first_group + group) * (d / 16) + chunk) * 128;
      mma_m16n8k16<fp32, bf16>(kernel.tensor_core, std::span<const bfloat16, 256>(q_tiles.data() + chunk * 256, 256),
                               std::span<const bfloat16, 128>(b, 128), acc, acc);
    }
    for (std::size_t r = 0; r < 16; ++r)
      for (std::size_t n = 0; n < 8; ++n) scores[r * stride + group * 8 + n] = acc[r * 8 + n];
  }
}

// How many of a split's K/V blocks, from the last one processed first, the
// kernel masks, and whether those guard the rescale against a max of -inf.
struct masking_plan {
  int steps = 1;
  bool check_inf = false;
};
inline masking_plan masking_of(const flash_kernel& kernel, const attention_shape& shape) {
  const bool even_mn = shape.key_rows % kernel.block_n == 0 && shape.query_rows % kernel.block_m == 0;
  // n_masking_steps: one for the non-causal mask of the last block; causal
  // needs ceil(block_m / block_n) blocks, one more when the shape is ragged
  // or (blocks of our own) when neither block length divides the other.
  const bool aligned = even_mn && (kernel.block_m % kernel.block_n == 0 || kernel.block_n % kernel.block_m == 0);
  const int causal_steps = (kernel.block_m + kernel.block_n - 1) / kernel.block_n + (aligned ? 0 : 1);
  // Check_inf: the single-split kernel guards the rescale in causal masking
  // steps; the split kernel also when the shape is ragged.
  return {shape.causal ? causal_steps : 1, kernel.splits > 1 ? (shape.causal || !even_mn) : shape.causal};
}

// A masking step: the block's scores of keys the row does not see become -inf.
inline void mask_block(const flash_kernel& kernel, const attention_shape& shape, int row, int block,
                       std::span<float32> scores) {
  const int limit = visible_keys(kernel, shape, row);
  for (std::size_t j = 0; j < scores.size(); ++j)
    if (block * kernel.block_n + static_cast<int>(j) >= limit) scores[j] = negative_infinity;
}

// The stabilized rule's tie test (stabilized_max): a score lies within
// epsilon of max when RN(RN(max - score) * scale) <= epsilon. NaN never does.
inline bool within_epsilon(float32 scale, float32 epsilon, float32 max, float32 score) {
  return to_host(ptx::mul_f32(ptx::sub_f32(max, score), scale)) <= to_host(epsilon);
}

// What merging one K/V block into a row's running max found.
struct block_max_merge {
  float32 block_max{};  // the block's max after the stabilized rule (across_blocks: the row's so far)
  int ties = 0;         // the scores within epsilon of the max tested; 0 without the rule
};

// One row's running max m through one split's K/V blocks: each block's
// rowmax, adjusted by the stabilized rule when the kernel has it, merged in.
class running_row_max {
 public:
  explicit running_row_max(const flash_kernel& kernel) : kernel_(&kernel) {}

  float32 value() const { return max_; }

  // scores: the block's block_n raw scores, masked ones -inf; the split's
  // first block (first) sets the max instead of merging into it.
  block_max_merge merge(std::span<const float32> scores, bool first) {
    float32 block_max = scores[0];
    for (std::size_t j = 1; j < scores.size(); ++j) block_max = fmnmx_max(block_max, scores[j]);
    const int ties = !kernel_->stabilize ? 0
                     : kernel_->stabilize->across_blocks ? stabilize_across_blocks(block_max, scores)
                                                         : stabilize(block_max, scores);
    max_ = first ? block_max : fmnmx_max(max_, block_max);
    return {block_max, ties};
  }

 private:
  // Algorithm 3's adjustment of a block's max (stabilized_max); returns rs.
  int stabilize(float32& block_max, std::span<const float32> scores) const {
    const int ties = ties_with(block_max, scores);
    if (ties > 1) block_max = stabilized(block_max);
    return ties;
  }

  // across_blocks: the rule on the row's largest score so far, repeated when
  // its second largest passes the test (stabilized_max says why that is
  // "two or more do"); block_max becomes the (adjusted) row max so far.
  // Returns the block's scores within epsilon of it.
  int stabilize_across_blocks(float32& block_max, std::span<const float32> scores) {
    for (const float32 s : scores) {
      if (s.is_nan()) continue;  // never within epsilon of anything
      if (to_host(s) >= to_host(top_)) second_ = top_, top_ = s;
      else if (to_host(s) > to_host(second_)) second_ = s;
    }
    const bool repeated = within_epsilon(kernel_->scale, kernel_->stabilize->epsilon, top_, second_);
    block_max = repeated ? stabilized(top_) : top_;
    return ties_with(top_, scores);
  }

  int ties_with(float32 max, std::span<const float32> scores) const {
    int ties = 0;
    for (const float32 s : scores) ties += within_epsilon(kernel_->scale, kernel_->stabilize->epsilon, max, s);
    return ties;
  }

  // A repeated max m: RN(beta * m) above 0, 0 below.
  float32 stabilized(float32 m) const {
    if (to_host(m) > 0.0f) return ptx::mul_f32(kernel_->stabilize->beta, m);
    return to_host(m) < 0.0f ? float32::zero() : m;
  }

  const flash_kernel* kernel_;
  float32 max_ = negative_infinity;
  float32 top_ = negative_infinity, second_ = negative_infinity;  // across_blocks: the two largest raw scores so far
};

// softmax.h's max_scaled: RN(m * scale_log2), 0 while every score is masked (m = -inf).
inline float32 scaled_max(const flash_kernel& kernel, float32 m) {
  return m == negative_infinity ? float32::zero() : ptx::mul_f32(m, kernel.scale_log2);
}

// The argument of the exponential P = ex2(x) of one score:
// RN(RN(s * scale_log2) - max_scaled) under UNFUSE_FMA, else FFMA(s, scale_log2, -max_scaled).
inline float32 exponent_argument(const flash_kernel& kernel, float32 score, float32 max_scaled) {
  return kernel.unfused_scale ? ptx::sub_f32(ptx::mul_f32(score, kernel.scale_log2), max_scaled)
                              : ptx::fma_f32(score, kernel.scale_log2, float32::from_bits(max_scaled.bits ^ 0x80000000u));
}

// Where a slab's events go: to the observer of flash_forward_head, for the
// event kinds it listens to (empty functions for the others).
struct event_sinks {
  std::function<void(const softmax_block_event&)> softmax;
  std::function<void(const output_block_event&)> output;
  std::function<void(const row_end_event&)> row_end;
  bool any() const { return softmax || output || row_end; }
};

// Rows [row0, row0 + 16) of one thread block (m_block) through one split's K/V blocks.
class row_slab {
 public:
  row_slab(const flash_kernel& kernel, const head_operands& head, int row0, int split = 0,
           const event_sinks* sinks = nullptr)
      : kernel_(kernel), head_(head), d_(head.shape.head_dim), row0_(row0), split_(split), sinks_(sinks),
        q_tiles_(head.fp8 == bf16 ? query_tiles(head, row0) : std::vector<bfloat16>()) {}

  // Runs the K/V blocks in the order given, as the kernel visits them;
  // masking_steps: how many of the first iterations mask (FA2's plan; every
  // one under masked_max_rule::zero_shift), and check_inf_when_masking:
  // whether those guard FA2's rescale against -inf.
  void run(std::span<const int> blocks, int masking_steps, bool check_inf_when_masking) {
    const std::size_t bn = static_cast<std::size_t>(kernel_.block_n), d = static_cast<std::size_t>(d_);
    o_.assign(16 * d, float32::zero());
    maxima_.assign(16, running_row_max(kernel_));
    exponent_max_.assign(16, negative_infinity);
    sums_.assign(16 * 4, float32::zero());
    row_p_.resize(bn);
    row_p_bf16_.resize(bn);
    if (head_.fp8 != bf16) p8_.assign(16 * bn, float8_e4m3::zero());
    // p_scaling lg2_offset: MUFU of scale_s, once (the kernel reads both from its constant bank).
    p_scale_lg2_ = ptx::lg2_approx_ftz(kernel_.p_scale, tables_);
    p_scale_rcp_ = ptx::rcp_approx_ftz(kernel_.p_scale, tables_);
    std::vector<float32> scores(16 * bn);
    std::vector<bfloat16> p(16 * bn);
    for (std::size_t iteration = 0; iteration < blocks.size(); ++iteration) {
      const int block = blocks[iteration];
      const bool masking = static_cast<int>(iteration) < masking_steps;
      const bool first = iteration == 0;
      compute_scores(block, scores);
      for (int r = 0; r < 16; ++r) {
        if (kernel_.max_in == max_units::scores)
          softmax_row(r, block, first, masking, masking && check_inf_when_masking, scores, p);
        else
          softmax_row_exponent_max(r, block, scores, p);
      }
      if (head_.fp8 != bf16) accumulate_pv_fp8(block);
      else accumulate_pv(block, p);
      if (sinks_ != nullptr && sinks_->output)
        for (int r = 0; r < rows(); ++r) {
          const std::size_t ur = static_cast<std::size_t>(r);
          output_block_event e{row0_ + r, split_, block, {}, std::span<const float32>(o_.data() + ur * d, d)};
          std::copy_n(sums_.begin() + static_cast<std::ptrdiff_t>(ur * 4), 4, e.sums.begin());
          sinks_->output(e);
        }
    }
  }

  // The epilogue for row r: O normalised in fp32 (before any bf16
  // conversion), and L; sum_zero_lse is L for a row whose sum is 0 or NaN.
  void finish_row(int r, std::span<float32> o_row, float32& lse, float32 sum_zero_lse) const {
    const std::size_t base = static_cast<std::size_t>(r) * 4;
    const float32* acc = o_.data() + static_cast<std::size_t>(r) * static_cast<std::size_t>(d_);
    // FA2's Allreduce<4>: xor 2, then xor 1; cuDNN's shuffles xor 1, then xor 2;
    // the per-block rules keep the joined sum in the first slot.
    float32 sum =
        sums_thread_partials(kernel_.row_sum)
            ? ptx::add_f32(ptx::add_f32(sums_[base], sums_[base + 2]), ptx::add_f32(sums_[base + 1], sums_[base + 3]))
        : kernel_.row_sum == row_sum_rule::thread_block_sums_fma ||
                kernel_.row_sum == row_sum_rule::thread_block_sums_descaled_fma
            ? add(add(sums_[base], sums_[base + 1]), add(sums_[base + 2], sums_[base + 3]))
            : sums_[base];
    // P-bar's sum is in scale_s's units: descale_s takes it back, so O's factor and L are FA2's fp8 ones.
    if (kernel_.row_sum == row_sum_rule::thread_partials_of_p_bar) sum = ptx::mul_f32(sum, kernel_.p_descale);
    float32 inverse = from_host(1.0f);
    if (kernel_.normalize == normalization::reciprocal_then_multiply) {
      const bool degenerate = to_host(sum) == 0.0f || sum.is_nan();
      if (!degenerate) inverse = div(from_host(1.0f), sum, ptx::gpu_environment()).result;
      // FA2's fp8 recipe: O's scale joins the reciprocal, RN(RN(1 / l) * o_scale) (times 1 changes no bit).
      if (is_fp8(kernel_.inputs)) inverse = ptx::mul_f32(inverse, kernel_.o_scale);
      for (int c = 0; c < d_; ++c) o_row[static_cast<std::size_t>(c)] = ptx::mul_f32(acc[c], inverse);
    } else if (kernel_.normalize == normalization::rcp_approx_then_multiply) {
      inverse = to_host(sum) == 0.0f ? float32::zero() : ptx::rcp_approx_ftz(sum, tables_);
      if (kernel_.o_format != bf16) inverse = mul(inverse, kernel_.o_scale);  // O's scale joins the reciprocal
      for (int c = 0; c < d_; ++c) o_row[static_cast<std::size_t>(c)] = mul(acc[c], inverse);
    } else {
      const float32 divisor = to_host(sum) == 0.0f ? from_host(1.0f) : sum;  // tl.where(l == 0, 1, l)
      inverse = divisor;
      for (int c = 0; c < d_; ++c) o_row[static_cast<std::size_t>(c)] = ptx::div_full_f32(acc[c], divisor);
    }
    if (kernel_.lse == lse_formula::flash2) {
      const bool degenerate = to_host(sum) == 0.0f || sum.is_nan();
      lse = degenerate ? sum_zero_lse : log_sum_exp(maxima_[static_cast<std::size_t>(r)].value(), sum);
    } else if (kernel_.lse == lse_formula::max_ln2_plus_lg2_ln2) {
      const float32 ln2 = float32::from_bits(0x3F317218u);
      lse = to_host(sum) == 0.0f ? negative_infinity
                                 : fma(exponent_max_[static_cast<std::size_t>(r)], ln2, mul(ptx::lg2_approx_ftz(sum, tables_), ln2));
    } else if (kernel_.lse == lse_formula::max_over_log2e_plus_logf) {
      // CUTLASS's epilogue: mi -inf taken as 0, s 0 as 1, mi / log2(e) an IEEE division.
      const float32 m = exponent_max_[static_cast<std::size_t>(r)];
      const float32 max = m == negative_infinity ? float32::zero() : m;
      const float32 divisor = to_host(sum) == 0.0f ? from_host(1.0f) : sum;
      lse = ptx::add_f32(div(max, kernel_.log2_e, ptx::gpu_environment()).result, ptx::logf_libdevice(divisor));
    } else {
      const float32 divisor = to_host(sum) == 0.0f ? from_host(1.0f) : sum;
      lse = ptx::add_f32(exponent_max_[static_cast<std::size_t>(r)], ptx::log2f_libdevice(divisor));
      // FlexAttention's wrapper: lse * math.log(2.0), compiled to one fp32 multiply.
      if (kernel_.lse_natural_units) lse = ptx::mul_f32(lse, from_host(static_cast<float>(0.6931471805599453)));
    }
    if (sinks_ != nullptr && sinks_->row_end) sinks_->row_end(row_end_event{row0_ + r, split_, sum, inverse, lse, o_row});
  }

 private:
  // The slab's rows that exist (the last slab of a head may be short).
  int rows() const { return std::min(16, head_.shape.query_rows - row0_); }

  // L = FFMA(m, scale, RN(__logf(l))), __logf = lg2.approx.f32 times ln 2 in
  // one FMUL; the row max's product is the fused one (SASS of both kernels).
  float32 log_sum_exp(float32 row_max, float32 sum) const {
    const float32 log_sum = ptx::mul_f32(ptx::lg2_approx(sum), from_host(0.693147182f));
    return ptx::fma_f32(row_max, kernel_.scale, log_sum);
  }

  void compute_scores(int block, std::vector<float32>& scores) const {
    const std::size_t bn = static_cast<std::size_t>(kernel_.block_n);
    if (head_.fp8 != bf16) return compute_scores_fp8(block, scores);
    score_groups(kernel_, head_, q_tiles_, static_cast<std::size_t>(block) * bn / 8, bn / 8, scores.data(), bn);
  }

  // S of the slab's rows against the block's keys on the fp8 tensor core,
  // each a chain over the head dim from +0; rows past the end stay 0.
  void compute_scores_fp8(int block, std::vector<float32>& scores) const {
    const std::size_t bn = static_cast<std::size_t>(kernel_.block_n), d = static_cast<std::size_t>(d_);
    const std::size_t first_key = static_cast<std::size_t>(block) * bn;
    std::fill(scores.begin(), scores.end(), float32::zero());
    with_fp8_inputs(head_.fp8, [&](auto tag) {
      constexpr format In = decltype(tag)::fmt;
      for (std::size_t r = 0; r < static_cast<std::size_t>(rows()); ++r) {
        const std::uint8_t* q = head_.q8.data() + (static_cast<std::size_t>(row0_) + r) * d;
        for (std::size_t j = 0; j < bn; ++j)
          scores[r * bn + j] = fp8_chain<In, In>(kernel_.tensor_core, q, head_.k8.data() + (first_key + j) * d, d,
                                                 float32::zero());
      }
    });
  }

  void softmax_row(int r, int block, bool first, bool masking, bool check_inf, std::vector<float32>& scores,
                   std::vector<bfloat16>& p) {
    const std::size_t bn = static_cast<std::size_t>(kernel_.block_n), ur = static_cast<std::size_t>(r);
    float32* s = scores.data() + ur * bn;
    const attention_shape& shape = head_.shape;
    const int row = row0_ + r;
    if (masking) mask_block(kernel_, shape, row, block, std::span<float32>(s, bn));
    const float32 previous = maxima_[ur].value();
    const block_max_merge merged = maxima_[ur].merge(std::span<const float32>(s, bn), first);
    const float32 m = maxima_[ur].value();
    float32* sums = sums_.data() + ur * 4;
    float32 alpha{};
    if (!first) {
      const float32 current = check_inf && m == negative_infinity ? float32::zero() : m;
      alpha = ex2(ptx::mul_f32(ptx::sub_f32(previous, current), kernel_.scale_log2));
      // Times exactly 1 (the max did not change, most blocks) leaves every O
      // as it is: the tensor core's NaN is already the FMUL's canonical one.
      float32* o = o_.data() + ur * static_cast<std::size_t>(d_);
      if (alpha.bits != 0x3F800000u)
        for (int c = 0; c < d_; ++c) o[c] = ptx::mul_f32(o[c], alpha);
    }
    const float32 max_scaled = scaled_max(kernel_, m);
    std::vector<float32>& row_p = row_p_;
    // The exponents first, their table entries fetched, then the lookups.
    for (std::size_t j = 0; j < bn; ++j) {
      row_p[j] = exponent_argument(kernel_, s[j], max_scaled);
      ptx::prefetch_ex2(row_p[j], tables_);
    }
    const bool fp8 = head_.fp8 != bf16;
    float8_e4m3* p8 = fp8 ? p8_.data() + ur * bn : nullptr;
    for (std::size_t j = 0; j < bn; ++j) {
      row_p[j] = ex2_p(row_p[j]);
      if (fp8) {
        p8[j] = fp8_p(row_p[j]);  // P V's A, row-major; the sums below take the fp32 P
        continue;
      }
      row_p_bf16_[j] = ptx::cvt_rn_bf16_f32(row_p[j]);
      p[(j / 16) * 256 + ur * 16 + j % 16] = row_p_bf16_[j];  // A tiles of P V
    }
    if (sinks_ != nullptr && sinks_->softmax && row < shape.query_rows)  // not the slab's padding rows
      sinks_->softmax(softmax_block_event{row, split_, block, merged.block_max, m,
                                          first ? std::nullopt : std::optional<float32>(alpha), merged.ties,
                                          std::span<const float32>(s, bn), row_p,
                                          fp8 ? std::span<const bfloat16>() : std::span<const bfloat16>(row_p_bf16_),
                                          fp8 ? std::span<const float8_e4m3>(p8, bn) : std::span<const float8_e4m3>()});
    // row_sum thread_partials_of_p_bar: the sums take P-bar as P V does,
    // decoded, in place of the fp32 P (no later step reads row_p).
    if (kernel_.row_sum == row_sum_rule::thread_partials_of_p_bar)
      for (std::size_t j = 0; j < bn; ++j) row_p[j] = ptx::cvt_f32_e4m3(p8[j]);
    // Thread t of the quad holds columns 8 nj + 2 t + {0, 1}, added in that
    // order. On later blocks nvcc contracts the rescale of the running sum
    // with the first addition: FFMA(alpha, sum, p_first) (SASS of both kernels).
    for (std::size_t t = 0; t < 4; ++t) {
      for (std::size_t nj = 0; nj < bn / 8; ++nj)
        for (std::size_t jj = 0; jj < 2; ++jj) {
          const float32 x = row_p[nj * 8 + 2 * t + jj];
          if (nj + jj > 0) sums[t] = ptx::add_f32(sums[t], x);
          else sums[t] = first ? x : ptx::fma_f32(alpha, sums[t], x);
        }
    }
  }

  // One row's softmax in one block with the max kept in the exponent's units
  // (Triton): x = the score in those units, m = max(m, rowmax(x)), the shift
  // 0 while m is -inf, P = ex2(x - shift), alpha = ex2(RN(m_old - shift)).
  void softmax_row_exponent_max(int r, int block, std::vector<float32>& scores, std::vector<bfloat16>& p) {
    const std::size_t bn = static_cast<std::size_t>(kernel_.block_n), ur = static_cast<std::size_t>(r);
    float32* s = scores.data() + ur * bn;
    const attention_shape& shape = head_.shape;
    const int row = row0_ + r;
    const bool scaled_scores = kernel_.placement == scale_placement::scores;
    // FlexAttention: qk *= SM_SCALE; mask; *= RCP_LN2. The raw scores otherwise.
    if (scaled_scores)
      for (std::size_t j = 0; j < bn; ++j) s[j] = mul(s[j], kernel_.scale);
    mask_block(kernel_, shape, row, block, std::span<float32>(s, bn));
    if (scaled_scores)
      for (std::size_t j = 0; j < bn; ++j) s[j] = mul(s[j], kernel_.log2_e);
    float32 block_max = s[0];
    for (std::size_t j = 1; j < bn; ++j) block_max = fmnmx_max(block_max, s[j]);
    if (!scaled_scores) block_max = mul(block_max, kernel_.scale_log2);  // tl.max(qk, 1) * qk_scale
    const float32 previous = exponent_max_[ur];
    const float32 m = fmnmx_max(previous, block_max);
    exponent_max_[ur] = m;
    const float32 shift =
        kernel_.masked_max == masked_max_rule::zero_shift && m == negative_infinity ? float32::zero() : m;
    const float32 alpha = ex2(sub(previous, shift));
    if (alpha.bits != 0x3F800000u) {  // times exactly 1 leaves every O as it is
      float32* o = o_.data() + ur * static_cast<std::size_t>(d_);
      for (int c = 0; c < d_; ++c) o[c] = mul(o[c], alpha);
    }
    // p_scaling lg2_offset: P = ex2(x - RN(shift - lg2(scale_s))), the max's P scale_s.
    const float32 p_shift = kernel_.p_scale_rule == p_scaling::lg2_offset ? sub(shift, p_scale_lg2_) : shift;
    const float32 negative_shift = float32::from_bits(p_shift.bits ^ 0x80000000u);
    std::vector<float32>& row_p = row_p_;
    for (std::size_t j = 0; j < bn; ++j) {
      row_p[j] = scaled_scores          ? sub(s[j], p_shift)
                 : kernel_.unfused_scale ? sub(mul(s[j], kernel_.scale_log2), p_shift)
                                         : fma(s[j], kernel_.scale_log2, negative_shift);
      ptx::prefetch_ex2(row_p[j], tables_);
    }
    const bool fp8 = head_.fp8 != bf16;
    float8_e4m3* p8 = fp8 ? p8_.data() + ur * bn : nullptr;
    for (std::size_t j = 0; j < bn; ++j) {
      row_p[j] = ex2_p(row_p[j]);
      if (fp8) {
        p8[j] = fp8_p(row_p[j]);  // P V's A, row-major
        continue;
      }
      row_p_bf16_[j] = ptx::cvt_rn_bf16_f32(row_p[j]);
      p[(j / 16) * 256 + ur * 16 + j % 16] = row_p_bf16_[j];
    }
    if (sinks_ != nullptr && sinks_->softmax && row < shape.query_rows)
      sinks_->softmax(softmax_block_event{row, split_, block, block_max, m, alpha, 0, std::span<const float32>(s, bn),
                                          row_p, fp8 ? std::span<const bfloat16>() : std::span<const bfloat16>(row_p_bf16_),
                                          fp8 ? std::span<const float8_e4m3>(p8, bn) : std::span<const float8_e4m3>()});
    float32* sums = sums_.data() + ur * 4;
    switch (kernel_.row_sum) {
      case row_sum_rule::warp_slices_then_add:
        add_warp_slices(sums[0], alpha);
        return;
      case row_sum_rule::thread_block_sums_fma:
      case row_sum_rule::thread_block_sums_descaled_fma:
        // Each thread's block sum from +0, folded into its own l_t.
        for (std::size_t t = 0; t < 4; ++t) {
          float32 partial = float32::zero();
          for (std::size_t nj = 0; nj < bn / 8; ++nj)
            for (std::size_t jj = 0; jj < 2; ++jj) partial = add(partial, row_p[nj * 8 + 2 * t + jj]);
          sums[t] = kernel_.row_sum == row_sum_rule::thread_block_sums_fma
                        ? fma(alpha, sums[t], partial)
                        : fma(partial, p_scale_rcp_, mul(sums[t], alpha));
        }
        return;
      default: {
        // tl.sum: thread t adds its columns 8 nj + 2 t + {0, 1} in order from the
        // first, then the butterfly joins (t0 + t2) + (t1 + t3).
        std::array<float32, 4> partial{};
        for (std::size_t t = 0; t < 4; ++t)
          for (std::size_t nj = 0; nj < bn / 8; ++nj)
            for (std::size_t jj = 0; jj < 2; ++jj) {
              const float32 x = row_p[nj * 8 + 2 * t + jj];
              partial[t] = nj + jj == 0 ? x : add(partial[t], x);
            }
        const float32 block_sum = add(add(partial[0], partial[2]), add(partial[1], partial[3]));
        sums[0] = fma(sums[0], alpha, block_sum);
      }
    }
  }

  // P as an fp8 kernel's P V takes it: cvt.rn.satfinite.e4m3x2.f32 of P, times
  // scale_s first (RN(P * scale_s)) under p_scaling multiply; lg2_offset has put
  // scale_s into the exponent already.
  float8_e4m3 fp8_p(float32 p) const {
    return ptx::cvt_rn_satfinite_e4m3_f32(kernel_.p_scale_rule == p_scaling::multiply ? ptx::mul_f32(p, kernel_.p_scale)
                                                                                      : p);
  }

  // The fp32 operations of the exponent-units path, .ftz when the kernel's are.
  float32 mul(float32 a, float32 b) const { return ptx::mul_f32(a, b, rounding_mode::nearest_even, kernel_.alu_ftz); }
  float32 add(float32 a, float32 b) const { return ptx::add_f32(a, b, rounding_mode::nearest_even, kernel_.alu_ftz); }
  float32 sub(float32 a, float32 b) const { return ptx::sub_f32(a, b, rounding_mode::nearest_even, kernel_.alu_ftz); }
  float32 fma(float32 a, float32 b, float32 c) const {
    return ptx::fma_f32(a, b, c, rounding_mode::nearest_even, kernel_.alu_ftz);
  }

  // row_sum_rule::warp_slices_then_add on the row's P in row_p_: l times
  // alpha (CUTLASS multiplies only when the max grew, when alpha is not
  // exactly 1: the same bits), then each 32-column slice's sum added in order;
  // a slice is summed per thread from +0 over its columns 8j + 2t + {0, 1},
  // and the threads joined (t0 + t1) + (t2 + t3) (shuffles xor 1, then xor 2).
  void add_warp_slices(float32& sum, float32 alpha) const {
    sum = ptx::mul_f32(sum, alpha);
    for (std::size_t slice = 0; slice < static_cast<std::size_t>(kernel_.block_n) / 32; ++slice) {
      std::array<float32, 4> partial{};
      for (std::size_t t = 0; t < 4; ++t) {
        partial[t] = float32::zero();
        for (std::size_t j = 0; j < 4; ++j)
          for (std::size_t c = 0; c < 2; ++c) partial[t] = ptx::add_f32(partial[t], row_p_[slice * 32 + j * 8 + 2 * t + c]);
      }
      sum = ptx::add_f32(sum, ptx::add_f32(ptx::add_f32(partial[0], partial[1]), ptx::add_f32(partial[2], partial[3])));
    }
  }

  // p: the block's P in bf16 as block_n / 16 A tiles (16 rows by 16 keys).
  void accumulate_pv(int block, const std::vector<bfloat16>& p) {
    const std::size_t bn = static_cast<std::size_t>(kernel_.block_n), d = static_cast<std::size_t>(d_);
    const std::size_t first_chunk = static_cast<std::size_t>(block) * bn / 16;
    std::array<float32, 128> acc;
    const bool as_c = kernel_.pv == pv_accumulation::c_operand;
    for (std::size_t group = 0; group < d / 8; ++group) {
      for (std::size_t r = 0; r < 16; ++r)
        for (std::size_t n = 0; n < 8; ++n) acc[r * 8 + n] = as_c ? o_[r * d + group * 8 + n] : float32::zero();
      for (std::size_t chunk = 0; chunk < bn / 16; ++chunk) {
        // B: the chunk's 16 keys by the group's 8 dims.
        const bfloat16* b = head_.v_tiles.data() + ((first_chunk + chunk) * (d / 8) + group) * 128;
        mma_m16n8k16<fp32, bf16>(kernel_.tensor_core, std::span<const bfloat16, 256>(p.data() + chunk * 256, 256),
                                 std::span<const bfloat16, 128>(b, 128), acc, acc);
      }
      for (std::size_t r = 0; r < 16; ++r)
        for (std::size_t n = 0; n < 8; ++n) {
          float32& o = o_[r * d + group * 8 + n];
          o = as_c ? acc[r * 8 + n] : add(o, acc[r * 8 + n]);
        }
    }
  }

  // P V on the fp8 tensor core: per output a chain over the block's keys of
  // the row's e4m3 P (p8_) and V's column, from RN(O * alpha) as C
  // (pv_accumulation c_operand) or from +0 and then added. The keys go in
  // their order, 32 a step; a kernel that permutes them within each group of
  // 32 (bitexact's FP8 kernel, for its register layout) has the same bits: a
  // step sums its products exactly before its one truncation and rounding,
  // whatever their order (fused_multiply_add_step).
  void accumulate_pv_fp8(int block) {
    const std::size_t bn = static_cast<std::size_t>(kernel_.block_n), d = static_cast<std::size_t>(d_);
    const std::size_t first_key = static_cast<std::size_t>(block) * bn;
    const bool as_c = kernel_.pv == pv_accumulation::c_operand;
    with_fp8_inputs(head_.fp8, [&](auto tag) {
      constexpr format In = decltype(tag)::fmt;
      for (std::size_t r = 0; r < static_cast<std::size_t>(rows()); ++r)
        for (std::size_t c = 0; c < d; ++c) {
          float32& o = o_[r * d + c];
          const float32 chain = fp8_chain<e4m3, In>(kernel_.tensor_core, p8_.data() + r * bn,
                                                    head_.v8t.data() + c * head_.padded_keys + first_key, bn,
                                                    as_c ? o : float32::zero());
          o = as_c ? chain : add(o, chain);
        }
    });
  }

  // exp2f as nvcc compiles it without fast math (MUFU.EX2 in its non-FTZ
  // wrapper), or Triton's ex2.approx.ftz.f32 (MUFU.EX2 alone).
  float32 ex2(float32 x) const {
    return kernel_.exponential == exponential_unit::ex2_approx_ftz_f32 ? ptx::ex2_approx_ftz(x, tables_)
                                                                       : ptx::ex2_approx(x, tables_);
  }
  // P's exponential (alpha's is ex2 above).
  float32 ex2_p(float32 x) const {
    return kernel_.exponential == exponential_unit::ex2_approx_ftz_f32_for_p ? ptx::ex2_approx_ftz(x, tables_) : ex2(x);
  }

  const flash_kernel& kernel_;
  const head_operands& head_;
  int d_;
  int row0_;
  int split_;
  const event_sinks* sinks_;
  const ptx::mufu_tables& tables_ = ptx::mufu_tables::shared();
  std::vector<bfloat16> q_tiles_;
  std::vector<float32> o_;     // [16][head_dim], the unnormalised accumulator
  std::vector<running_row_max> maxima_;  // [16], max_units::scores
  std::vector<float32> exponent_max_;    // [16], max_units::exponent
  std::vector<float32> sums_;  // [16][4], each thread's partial row sum
  std::vector<float32> row_p_;  // one row's P of the current block, in fp32
  std::vector<bfloat16> row_p_bf16_;  // and in bf16
  std::vector<float8_e4m3> p8_;       // fp8 kernels: [16][block_n], the block's P as P V takes it
  float32 p_scale_lg2_{}, p_scale_rcp_{};  // MUFU.LG2 and MUFU.RCP of kernel.p_scale
};

}  // namespace detail


// The combine kernel (flash_fwd_splitkv_combine_kernel) for one query row:
// split_o [splits][head_dim] and split_lse [splits] as the split kernel wrote
// them; writes the row's O (bf16) and returns its L. Its exponentials and
// logarithm are libdevice's expf and logf, not MUFU alone. Each thread of the
// kernel holds the L of splits l * lanes + lane (l < per_lane) of one row,
// `lanes` threads share a row, and their sums meet in a butterfly.
inline float32 combine_splits(int head_dim, std::span<const float32> split_o, std::span<const float32> split_lse,
                              std::span<bfloat16> o) {
  const int splits = static_cast<int>(split_lse.size());
  int max_splits = 2;  // kMaxSplits: the next power of two, at least 2 (Log_max_splits >= 1)
  while (max_splits < splits) max_splits *= 2;
  const int rows_per_block = head_dim % 128 == 0 ? 4 : 8;  // the combine kernel's kBlockM
  const int lanes = std::min(128 / rows_per_block, max_splits);
  const int per_lane = (max_splits * rows_per_block + 127) / 128;
  const auto lse_of = [&](int s) { return s < splits ? split_lse[static_cast<std::size_t>(s)] : detail::negative_infinity; };
  float32 lse_max = lse_of(0);
  for (int s = 1; s < max_splits; ++s) lse_max = detail::fmnmx_max(lse_max, lse_of(s));
  if (lse_max == detail::negative_infinity) lse_max = float32::zero();
  std::vector<float32> lane_sum(static_cast<std::size_t>(lanes));
  for (int lane = 0; lane < lanes; ++lane) {
    float32 sum{};
    for (int l = 0; l < per_lane; ++l) {
      const float32 term = ptx::expf_libdevice(ptx::sub_f32(lse_of(l * lanes + lane), lse_max));
      sum = l == 0 ? term : ptx::add_f32(sum, term);
    }
    lane_sum[static_cast<std::size_t>(lane)] = sum;
  }
  for (int offset = lanes / 2; offset >= 1; offset /= 2) {
    std::vector<float32> next(lane_sum.size());
    for (std::size_t lane = 0; lane < lane_sum.size(); ++lane)
      next[lane] = ptx::add_f32(lane_sum[lane], lane_sum[lane ^ static_cast<std::size_t>(offset)]);
    lane_sum = next;
  }
  const float32 sum = lane_sum[0];
  const float32 lse = to_host(sum) == 0.0f || sum.is_nan() ? float32::infinity()
                                                           : ptx::add_f32(lse_max, ptx::logf_libdevice(sum));
  const std::size_t d = static_cast<std::size_t>(head_dim);
  std::vector<float32> acc(d, float32::zero());
  for (int s = 0; s < splits; ++s) {
    const float32 scale = ptx::expf_libdevice(ptx::sub_f32(split_lse[static_cast<std::size_t>(s)], lse));
    for (std::size_t c = 0; c < d; ++c) acc[c] = ptx::fma_f32(scale, split_o[static_cast<std::size_t>(s) * d + c], acc[c]);
  }
  for (std::size_t c = 0; c < d; ++c) o[c] = ptx::cvt_rn_bf16_f32(acc[c]);
  return lse;
}

namespace detail {

// O's conversion as the kernel writes it: bf16 (cvt.rn.bf16.f32) or e4m3
// (cvt.rn.satfinite.e4m3x2.f32).
template <class Out>
Out output_element(float32 x) {
  if constexpr (std::is_same_v<Out, float8_e4m3>) return ptx::cvt_rn_satfinite_e4m3_f32(x);
  else return ptx::cvt_rn_bf16_f32(x);
}

// One slab of 16 query rows of a head (rows [row0, row0 + 16)), through every
// split and then the combine; writes those rows of o and lse.
template <class Out>
void run_slab(const flash_kernel& kernel, const head_operands& head, int row0, std::span<Out> o,
              std::span<float32> lse, const event_sinks* sinks) {
  const attention_shape& shape = head.shape;
  const std::size_t d = static_cast<std::size_t>(shape.head_dim);
  const bool split = kernel.splits > 1;
  const masking_plan masking = masking_of(kernel, shape);
  const int rows = std::min(16, shape.query_rows - row0);
  std::vector<float32> split_o(static_cast<std::size_t>(kernel.splits) * 16 * d, float32::zero());
  std::vector<float32> split_lse(static_cast<std::size_t>(kernel.splits) * 16,
                                 split ? negative_infinity : float32::infinity());
  for (int s = 0; s < kernel.splits; ++s) {
    const std::vector<int> blocks = visit_order(kernel, shape, row0, s);
    if (blocks.empty() && kernel.order == block_order::last_to_first)
      continue;  // an empty split: O = 0, L = -inf (+inf unsplit)
    row_slab slab(kernel, head, row0, s, sinks);
    slab.run(blocks, kernel.masked_max == masked_max_rule::zero_shift ? static_cast<int>(blocks.size()) : masking.steps,
             masking.check_inf);
    for (int r = 0; r < rows; ++r) {
      const std::size_t at = static_cast<std::size_t>(s) * 16 + static_cast<std::size_t>(r);
      slab.finish_row(r, std::span<float32>(split_o.data() + at * d, d), split_lse[at],
                      split ? negative_infinity : float32::infinity());
    }
  }
  std::vector<float32> row_o(static_cast<std::size_t>(kernel.splits) * d), row_lse(static_cast<std::size_t>(kernel.splits));
  for (int r = 0; r < rows; ++r) {
    const std::size_t row = static_cast<std::size_t>(row0 + r);
    if (!split) {
      for (std::size_t c = 0; c < d; ++c) o[row * d + c] = output_element<Out>(split_o[static_cast<std::size_t>(r) * d + c]);
      lse[row] = split_lse[static_cast<std::size_t>(r)];
      continue;
    }
    for (std::size_t s = 0; s < static_cast<std::size_t>(kernel.splits); ++s) {
      const std::size_t at = s * 16 + static_cast<std::size_t>(r);
      std::copy_n(split_o.begin() + static_cast<std::ptrdiff_t>(at * d), d, row_o.begin() + static_cast<std::ptrdiff_t>(s * d));
      row_lse[s] = split_lse[at];
    }
    if constexpr (std::is_same_v<Out, bfloat16>)  // split-KV is FA2's path, bf16 throughout (check_tiles)
      lse[row] = combine_splits(shape.head_dim, row_o, row_lse, o.subspan(row * d, d));
  }
}

// One head's spans against its shape, and the tiles against the tensor-core
// steps they are cut into: std::invalid_argument naming what was expected.
// fp8_operands: whether the caller passed fp8 bit patterns (else bf16);
// o_written: the format of the caller's O.
inline void check_head(const flash_kernel& kernel, const attention_shape& shape, std::size_t q, std::size_t k,
                       std::size_t v, std::size_t o, std::size_t lse, bool fp8_operands = false,
                       format o_written = bf16) {
  const auto fail = [](const std::string& what) { throw std::invalid_argument("flash_forward_head: " + what); };
  check_arithmetic(kernel);
  if (fp8_operands != is_fp8(kernel.inputs))
    fail("the kernel takes " + std::string(name_of(kernel.inputs)) + " Q, K and V, not " +
         (fp8_operands ? "fp8 bit patterns" : "bf16"));
  if (o_written != kernel.o_format)
    fail("the kernel writes O as " + std::string(name_of(kernel.o_format)) + " (its o_rounding), not " +
         std::string(name_of(o_written)));
  if (shape.query_rows < 1 || shape.key_rows < 1 || shape.head_dim < 16 || shape.head_dim % 16 != 0)
    fail("a head needs at least one query row and one key, and a head dim that is a multiple of 16");
  if (kernel.block_n < 16 || kernel.block_n % 16 != 0 || kernel.block_m < 16 || kernel.block_m % 16 != 0 ||
      kernel.splits < 1)
    fail("block_m and block_n must be multiples of 16, splits at least 1");
  const std::size_t rows = static_cast<std::size_t>(shape.query_rows), keys = static_cast<std::size_t>(shape.key_rows);
  const std::size_t d = static_cast<std::size_t>(shape.head_dim);
  if (q != rows * d || k != keys * d || v != keys * d || o != rows * d || lse != rows)
    fail("q and o need query_rows x head_dim elements, k and v key_rows x head_dim, lse query_rows");
  if (kernel.stabilize && kernel.stabilize->across_blocks &&
      !(to_host(kernel.scale) > 0.0f && std::isfinite(to_host(kernel.scale)) &&
        std::isfinite(to_host(kernel.stabilize->epsilon))))
    fail("the stabilized softmax across blocks needs a positive finite scale and a finite epsilon");
}

// The sinks for the event kinds an observer listens to.
template <class O>
event_sinks sinks_for(O& obs) {
  event_sinks sinks;
  if constexpr (listens_to<O, softmax_block_event>) sinks.softmax = [&obs](const softmax_block_event& e) { report(obs, e); };
  if constexpr (listens_to<O, output_block_event>) sinks.output = [&obs](const output_block_event& e) { report(obs, e); };
  if constexpr (listens_to<O, row_end_event>) sinks.row_end = [&obs](const row_end_event& e) { report(obs, e); };
  return sinks;
}

}  // namespace detail

// One head: q [query_rows][head_dim], k and v [key_rows][head_dim] (bf16);
// writes o [query_rows][head_dim] and lse [query_rows]. Its slabs of 16 rows
// are independent: up to `threads` threads (0: one per core) take them in
// turn, and the bits do not depend on how many. An observer that listens to
// softmax_block_event, output_block_event or row_end_event sees every row's
// every block and split end (the head then runs on one thread, so that the
// events come in order); one that listens to rows_done_event hears of each
// slab as it ends.
template <class O = no_observer>
void flash_forward_head(const flash_kernel& kernel, const attention_shape& shape, std::span<const bfloat16> q,
                        std::span<const bfloat16> k, std::span<const bfloat16> v, std::span<bfloat16> o,
                        std::span<float32> lse, O&& obs = {}, unsigned threads = 0) {
  detail::check_head(kernel, shape, q.size(), k.size(), v.size(), o.size(), lse.size());
  const detail::event_sinks sinks = detail::sinks_for(obs);
  const detail::head_operands head(shape, kernel.block_n, q, k, v);
  const auto slabs = static_cast<std::size_t>((shape.query_rows + 15) / 16);
  for_each_index(slabs, sinks.any() ? 1 : threads, [&](std::size_t slab) {
    const int row0 = static_cast<int>(slab) * 16;
    detail::run_slab(kernel, head, row0, o, lse, sinks.any() ? &sinks : nullptr);
    report(obs, rows_done_event{row0, std::min(16, shape.query_rows - row0)});
  });
}

namespace detail {

// One head of an fp8 kernel, O written as Out (the kernel's o_format).
template <class Out, class O>
void fp8_forward_head(const flash_kernel& kernel, const attention_shape& shape, std::span<const std::uint8_t> q,
                      std::span<const std::uint8_t> k, std::span<const std::uint8_t> v, std::span<Out> o,
                      std::span<float32> lse, O& obs, unsigned threads) {
  check_head(kernel, shape, q.size(), k.size(), v.size(), o.size(), lse.size(), true, Out::fmt);
  const event_sinks sinks = sinks_for(obs);
  const head_operands head(shape, kernel.block_n, kernel.inputs, q, k, v);
  const auto slabs = static_cast<std::size_t>((shape.query_rows + 15) / 16);
  for_each_index(slabs, sinks.any() ? 1 : threads, [&](std::size_t slab) {
    const int row0 = static_cast<int>(slab) * 16;
    run_slab(kernel, head, row0, o, lse, sinks.any() ? &sinks : nullptr);
    report(obs, rows_done_event{row0, std::min(16, shape.query_rows - row0)});
  });
}

}  // namespace detail

// One head of an fp8 kernel (kernel.inputs e4m3 or e5m2): q, k and v bit
// patterns of that format, laid out as the bf16 overload's; writes o in the
// kernel's o_format (e4m3 here: cuDNN's recipe; the bf16 overload below: FA2's
// fp8 recipe; another is refused) and lse. The same slabs, threads and
// observers as above.
template <class O = no_observer>
void flash_forward_head(const flash_kernel& kernel, const attention_shape& shape, std::span<const std::uint8_t> q,
                        std::span<const std::uint8_t> k, std::span<const std::uint8_t> v, std::span<float8_e4m3> o,
                        std::span<float32> lse, O&& obs = {}, unsigned threads = 0) {
  detail::fp8_forward_head(kernel, shape, q, k, v, o, lse, obs, threads);
}

template <class O = no_observer>
void flash_forward_head(const flash_kernel& kernel, const attention_shape& shape, std::span<const std::uint8_t> q,
                        std::span<const std::uint8_t> k, std::span<const std::uint8_t> v, std::span<bfloat16> o,
                        std::span<float32> lse, O&& obs = {}, unsigned threads = 0) {
  detail::fp8_forward_head(kernel, shape, q, k, v, o, lse, obs, threads);
}

// S = Q K^T of one head as the kernel's tensor-core steps compute it, before
// any scaling or mask: [query_rows][key_rows], from q [query_rows][head_dim]
// and k [key_rows][head_dim] (bf16). A score does not depend on the block or
// split it falls in (each group of 8 keys starts its chain from +0).
inline std::vector<float32> head_scores(const flash_kernel& kernel, const attention_shape& shape,
                                        std::span<const bfloat16> q, std::span<const bfloat16> k) {
  if (shape.query_rows < 1 || shape.key_rows < 1 || shape.head_dim < 16 || shape.head_dim % 16 != 0)
    throw std::invalid_argument("head_scores: a head needs at least one query row and one key, and a head dim that "
                                "is a multiple of 16");
  const std::size_t rows = static_cast<std::size_t>(shape.query_rows), keys = static_cast<std::size_t>(shape.key_rows);
  const std::size_t d = static_cast<std::size_t>(shape.head_dim);
  if (q.size() != rows * d || k.size() != keys * d)
    throw std::invalid_argument("head_scores: q needs query_rows x head_dim elements, k key_rows x head_dim");
  const detail::head_operands head(shape, 16, q, k, {});
  const std::size_t padded = (keys + 15) / 16 * 16;
  std::vector<float32> slab(16 * padded), scores(rows * keys);
  for (std::size_t row0 = 0; row0 < rows; row0 += 16) {
    detail::score_groups(kernel, head, detail::query_tiles(head, static_cast<int>(row0)), 0, padded / 8, slab.data(), padded);
    for (std::size_t r = 0; r < 16 && row0 + r < rows; ++r)
      std::copy_n(slab.begin() + static_cast<std::ptrdiff_t>(r * padded), keys,
                  scores.begin() + static_cast<std::ptrdiff_t>((row0 + r) * keys));
  }
  return scores;
}

// The results of one call: O [batch, heads, query_rows, head_dim] in bf16 and
// L [batch, heads, query_rows] in fp32 (natural-log units).
struct attention_output {
  std::vector<bfloat16> o;
  std::vector<float32> lse;
};

// A whole call, as scaled_dot_product_attention takes it: q [batch, heads,
// query_rows, head_dim], k and v [batch, heads, key_rows, head_dim]; up to
// `threads` threads (0: one per core) shared between the heads and each
// head's slabs (split_threads), the bits the same for any count.
inline attention_output flash_forward(const flash_kernel& kernel, const attention_shape& shape,
                                      std::span<const bfloat16> q, std::span<const bfloat16> k,
                                      std::span<const bfloat16> v, unsigned threads = 0) {
  if (shape.batch < 1 || shape.heads < 1)
    throw std::invalid_argument("flash_forward: batch and heads must be at least 1");
  const std::size_t heads = static_cast<std::size_t>(shape.batch) * static_cast<std::size_t>(shape.heads);
  const std::size_t rows = static_cast<std::size_t>(shape.query_rows);
  const std::size_t q_head = rows * static_cast<std::size_t>(shape.head_dim);
  const std::size_t kv_head = static_cast<std::size_t>(shape.key_rows) * static_cast<std::size_t>(shape.head_dim);
  if (q.size() != heads * q_head || k.size() != heads * kv_head || v.size() != heads * kv_head)
    throw std::invalid_argument("flash_forward: q needs batch x heads x query_rows x head_dim elements, k and v "
                                "batch x heads x key_rows x head_dim");
  attention_output out{std::vector<bfloat16>(heads * q_head), std::vector<float32>(heads * rows)};
  const thread_split split = split_threads(heads, threads);
  for_each_index(heads, split.items, [&](std::size_t h) {
    flash_forward_head(kernel, shape, q.subspan(h * q_head, q_head), k.subspan(h * kv_head, kv_head),
                       v.subspan(h * kv_head, kv_head), std::span<bfloat16>(out.o).subspan(h * q_head, q_head),
                       std::span<float32>(out.lse).subspan(h * rows, rows), no_observer{}, split.pieces);
  });
  return out;
}

}  // namespace bitexact::attention
