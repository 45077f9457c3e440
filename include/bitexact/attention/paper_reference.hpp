// The attention of Qiu & Yao's analysis ("Why Low-Precision Transformer
// Training Fails", section 3.3.2): the pure-PyTorch flash attention
// (FlashAttention-2, Algorithm 1) their experiments ran (attention.py of
// github.com/ucker/why-low-precision-training-fails, called with 512 x 512
// tiles, on the bf16 Linear outputs of a model that train.py runs under
// torch.autocast(dtype=torch.bfloat16)), and the same attention in double that
// its result is measured against. Neither models a GPU kernel: each PyTorch
// operation is taken to compute in fp32, its opmath type, round there, and
// round again to bf16 when it stores a bf16 result; where PyTorch's order or
// library is undocumented, the choice made here is said where it is made.
//
// Per query row, over K/V blocks of block_n keys from the first to the last,
// under autocast (the default; o, the row sums and the row maxes are bf16 buffers):
//   S     = bf16(q . k)        products exact in fp32, summed left to right from +0
//   A     = bf16(fp32(S * scale))                  masked scores are -bf16_max
//   rm    = rowmax(A)           stabilized: beta rm or 0, as stabilized_max says
//   m     = max(rm, m_old)                         m starts at -bf16_max, not -inf
//   P     = fp32(exp(bf16(A - m)))                 exp runs in fp32 under autocast
//   l_b   = max(fp32(sum of P), fp32(1e-10))       sum runs in fp32: no bf16 rounding
//   PV    = bf16(bf16(P) . V[:, c])                the einsum casts P to bf16, then as S
//   alpha = fp32(exp(bf16(m_old - m)))
//   l     = bf16(fp32(alpha l) + l_b),  O = bf16(bf16(O alpha) + PV)
// then O = bf16(fp32(O / l)), L = fp32(fp32(log l) + m) in the scaled scores' units.
// Without autocast (autocast = false) every tensor is bf16: P, l_b and alpha
// are rounded to bf16, l = bf16(bf16(alpha l) + l_b) and L = bf16(bf16(log l) + m).
// torch.compile, which train.py also applies, may fuse the elementwise steps
// and skip the bf16 stores between them; that is not modelled: every step
// stores its result.
#pragma once

#include <algorithm>
#include <cmath>
#include <compare>
#include <cstddef>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "../core/format.hpp"
#include "../core/observer.hpp"
#include "../core/operations.hpp"
#include "../host/parallel.hpp"
#include "shape.hpp"

namespace bitexact::attention {

// What decides the bits of the paper's flash attention.
struct paper_flash {
  int block_m = 512;  // q_bucket_size; no bit depends on it (each row's arithmetic is its own)
  int block_n = 512;  // k_bucket_size: keys of one K/V block; the last block holds the keys left over
  double scale = 0;   // the Python float the scores are multiplied by
  std::optional<stabilized_max> stabilize;  // their STABLE=1 path (Algorithm 3); off by default
  // train.py's torch.autocast(dtype=torch.bfloat16): exp, log and sum run in
  // fp32 and return fp32. false: the code run eagerly on bf16 tensors
  // outside autocast, "without autocast", every result stored as bf16.
  bool autocast = true;
};

namespace detail {

// d ** -0.5 as Python computes it: C's pow in double.
inline double paper_default_scale(const attention_shape& shape, const char* caller) {
  if (shape.head_dim <= 0)
    throw std::invalid_argument(std::string(caller) + ": head_dim " + std::to_string(shape.head_dim) +
                                " is not positive");
  return std::pow(static_cast<double>(shape.head_dim), -0.5);
}

}  // namespace detail

// The paper's call: tiles of 512 query rows and 512 keys; scale: the caller's,
// or d ** -0.5 as the paper's code computes it.
inline paper_flash paper_reference(const attention_shape& shape, std::optional<double> scale = {}) {
  paper_flash flash;
  flash.scale = scale ? *scale : detail::paper_default_scale(shape, "paper_reference");
  return flash;
}

// The same call on their stabilized path (environment variable STABLE=1).
inline paper_flash paper_reference_stabilized(const attention_shape& shape, std::optional<double> scale = {},
                                              stabilized_max rule = {}) {
  paper_flash flash = paper_reference(shape, scale);
  flash.stabilize = rule;
  return flash;
}

namespace detail {

// max_neg_value in the paper's code: masked scores, and the running max before
// the first block, are the most negative finite bf16, not -inf.
inline constexpr bfloat16 paper_masked_score = bfloat16::max_finite(true);

// How many keys a query row sees: all of them, or with causal masking those up
// to its diagonal, bottom-right aligned as attention_shape says. The paper's
// code shifts its diagonal the other way when key_rows > query_rows, and
// aligns it top-left when query_rows > key_rows; all agree on the paper's
// self-attention, query_rows == key_rows.
inline int paper_visible_keys(const attention_shape& shape, int row) {
  if (!shape.causal) return shape.key_rows;
  return std::clamp(row + 1 + shape.key_rows - shape.query_rows, 0, shape.key_rows);
}

// A PyTorch operation on bf16 tensors: computed in fp32, rounded there, and
// rounded to bf16 when stored.
inline bfloat16 stored_bf16(rounded<fp32> x) { return convert<bf16>(x.result).result; }

// torch.exp and torch.log on bf16 tensors. PyTorch computes them in float
// (expf, logf) and returns that float under autocast, or rounds it to bf16
// without autocast; we choose to compute them in double and round once, to
// fp32 or to bf16, so a result may rarely lie one ulp from PyTorch's.
inline bfloat16 exp_bf16(bfloat16 x) { return from_double<bf16>(std::exp(to_double(x))).result; }
inline bfloat16 log_bf16(bfloat16 x) { return from_double<bf16>(std::log(to_double(x))).result; }
inline float32 exp_fp32(bfloat16 x) { return from_double<fp32>(std::exp(to_double(x))).result; }
inline float32 log_fp32(bfloat16 x) { return from_double<fp32>(std::log(to_double(x))).result; }

// A bf16 value held as float32, exactly: where a result is fp32 under
// autocast and bf16 without, the arithmetic after it reads one type.
inline float32 widen(bfloat16 x) { return convert<fp32>(x).result; }

// torch.maximum and amax: a NaN wins; of two equal values the first (no result
// here depends on the sign of a zero maximum: exp(+-0) is 1 and log(l) + -0 = log(l)).
inline bfloat16 nan_maximum(bfloat16 a, bfloat16 b) {
  if (a.is_nan()) return a;
  if (b.is_nan()) return b;
  return std::is_gt(compare(b, a)) ? b : a;
}

// One step of an einsum's dot product: cuBLAS accumulates in fp32, and a
// product of two bf16 values is exact there (8-bit significands) unless it
// falls below fp32's normal range, where mul rounds it. cuBLAS does not
// document its order of summation: we choose index order, from +0.
inline float32 accumulate_product(float32 sum, bfloat16 x, bfloat16 y) {
  return add(sum, mul<fp32>(x, y).result).result;
}

// The lengths paper_forward_head and paper_reference_fp64_head expect.
inline void check_paper_head(const char* caller, const attention_shape& shape, std::size_t q, std::size_t k,
                             std::size_t v, std::size_t o, std::size_t lse) {
  const std::string who(caller);
  if (shape.head_dim <= 0)
    throw std::invalid_argument(who + ": head_dim " + std::to_string(shape.head_dim) + " is not positive");
  if (shape.query_rows < 0 || shape.key_rows < 0)
    throw std::invalid_argument(who + ": query_rows " + std::to_string(shape.query_rows) + " and key_rows " +
                                std::to_string(shape.key_rows) + " must not be negative");
  const std::size_t d = static_cast<std::size_t>(shape.head_dim);
  const std::size_t rows = static_cast<std::size_t>(shape.query_rows), keys = static_cast<std::size_t>(shape.key_rows);
  const auto expect = [&](const char* name, std::size_t size, std::size_t expected, const char* as) {
    if (size != expected)
      throw std::invalid_argument(who + ": " + name + " has length " + std::to_string(size) + ", expected " + as +
                                  " = " + std::to_string(expected));
  };
  expect("q", q, rows * d, "query_rows * head_dim");
  expect("k", k, keys * d, "key_rows * head_dim");
  expect("v", v, keys * d, "key_rows * head_dim");
  expect("o", o, rows * d, "query_rows * head_dim");
  expect("lse", lse, rows, "query_rows");
}

// One query row through the K/V blocks, first to last, holding the running
// max, sum and O between blocks. What the last block computed (its scores, P,
// P V and the state after it) stays readable until the next block runs.
class paper_row {
 public:
  // q_row: the row's head_dim values; k and v: [key_rows][head_dim], lengths
  // the caller has checked (paper_forward_head does).
  paper_row(const paper_flash& flash, const attention_shape& shape, int row, std::span<const bfloat16> q_row,
            std::span<const bfloat16> k, std::span<const bfloat16> v)
      : flash_(flash),
        shape_(shape),
        q_row_(q_row),
        k_(k),
        v_(v),
        d_(static_cast<std::size_t>(shape.head_dim)),
        visible_keys_(paper_visible_keys(shape, row)),
        scale_(from_double<fp32>(flash.scale).result),  // the Python float as PyTorch's opmath float
        o_(d_, bfloat16::zero()),
        pv_(d_),
        pv_sums_(d_) {}

  // Runs the next K/V block, block 0 first; false, and nothing run, once every block has run.
  bool run_next_block() {
    if (next_key_ >= shape_.key_rows) return false;
    first_key_ = next_key_;
    next_key_ = first_key_ + std::min(flash_.block_n, shape_.key_rows - first_key_);
    compute_scores(next_key_ - first_key_);
    block_max_ = scores_[0];
    for (const bfloat16 a : scores_) block_max_ = nan_maximum(block_max_, a);
    ties_ = flash_.stabilize ? stabilize(block_max_) : 0;
    const bfloat16 previous_max = max_;
    max_ = nan_maximum(block_max_, previous_max);
    compute_p();
    compute_pv();
    alpha_ = exp_of(stored_bf16(sub<fp32>(previous_max, max_)));
    rescale_and_add(alpha_);
    return true;
  }

  // After the last block: O / l into o (head_dim values), and L.
  void finish(std::span<bfloat16> o, float32& lse) const {
    for (std::size_t c = 0; c < d_; ++c) o[c] = stored_bf16(div<fp32>(o_[c], sum_));
    // Under autocast log returns fp32 and adding the bf16 max promotes to fp32:
    // L is an fp32 value. Without autocast it is a bf16 value, held as float32.
    lse = flash_.autocast ? add<fp32>(log_fp32(sum_), max_).result
                          : widen(stored_bf16(add<fp32>(log_bf16(sum_), max_)));
  }

  // The last block run: its first key, its scaled scores A (masked ones
  // -bf16_max), its max after stabilization, how many scores were close to
  // that max (0 when the rule is off), its P as the row sum reads it (fp32:
  // exp's result under autocast, the bf16 P exactly without), its P as P V
  // reads it (bf16: the einsum's cast of the fp32 P under autocast), and P V.
  int first_key() const { return first_key_; }
  std::span<const bfloat16> scores() const { return scores_; }
  bfloat16 block_max() const { return block_max_; }
  int ties() const { return ties_; }
  std::span<const float32> p_fp32() const { return p_fp32_; }
  std::span<const bfloat16> p() const { return p_; }
  std::span<const bfloat16> pv() const { return pv_; }
  // P V's fp32 sums before their rounding to bf16, and the factor the O kept
  // from earlier blocks was multiplied by before P V was added to it (exp of
  // -bf16_max minus the max, 0 or tiny, for the first block): what a replay of
  // one element's accumulation needs to check itself against.
  std::span<const float32> pv_fp32() const { return pv_sums_; }
  float32 alpha() const { return alpha_; }
  // The running state after it.
  bfloat16 running_max() const { return max_; }
  bfloat16 running_sum() const { return sum_; }
  std::span<const bfloat16> o() const { return o_; }

 private:
  // A = bf16(bf16(q . k) * scale): the einsum's bf16 result, then multiplied by
  // the float scale. A masked score is never computed: masked_fill replaces it.
  void compute_scores(int keys) {
    scores_.resize(static_cast<std::size_t>(keys));
    for (int j = 0; j < keys; ++j) {
      const int key = first_key_ + j;
      if (key >= visible_keys_) {
        scores_[static_cast<std::size_t>(j)] = paper_masked_score;
        continue;
      }
      const std::size_t base = static_cast<std::size_t>(key) * d_;
      float32 dot = float32::zero();
      for (std::size_t c = 0; c < d_; ++c) dot = accumulate_product(dot, q_row_[c], k_[base + c]);
      scores_[static_cast<std::size_t>(j)] = stored_bf16(mul<fp32>(convert<bf16>(dot).result, scale_));
    }
  }

  // Their STABLE=1 path: scores at or above bf16(rm - epsilon) are close to
  // the max; with more than one, rm becomes bf16(beta rm) if positive, and
  // then 0 if negative, the second test reading the new value as their chain
  // of torch.where does. Masked scores count too: a block of masked keys alone
  // has a repeated max of -bf16_max, which becomes 0. Returns the count, rs.
  int stabilize(bfloat16& block_max) const {
    const stabilized_max& rule = *flash_.stabilize;
    const bfloat16 threshold = stored_bf16(sub<fp32>(block_max, rule.epsilon));
    int close = 0;
    for (const bfloat16 a : scores_) close += std::is_gteq(compare(a, threshold));
    if (close > 1 && std::is_gt(compare(block_max, bfloat16::zero())))
      block_max = stored_bf16(mul<fp32>(rule.beta, block_max));
    if (close > 1 && std::is_lt(compare(block_max, bfloat16::zero()))) block_max = bfloat16::zero();
    return close;
  }

  // torch.exp of a bf16 tensor: fp32 under autocast, bf16 without.
  float32 exp_of(bfloat16 x) const { return flash_.autocast ? exp_fp32(x) : widen(exp_bf16(x)); }

  // P = exp(bf16(A - m)); masked keys give exp(-bf16_max - m) = 0 unless every
  // key so far was masked (m = -bf16_max), as in the paper's code. The einsum
  // P V reads bf16(P): under autocast it casts the fp32 P, round to nearest
  // even; without autocast P is bf16 already.
  void compute_p() {
    p_fp32_.resize(scores_.size());
    p_.resize(scores_.size());
    for (std::size_t j = 0; j < scores_.size(); ++j) {
      p_fp32_[j] = exp_of(stored_bf16(sub<fp32>(scores_[j], max_)));
      p_[j] = convert<bf16>(p_fp32_[j]).result;
    }
  }

  // The block's row sum, clamped below at 1e-10: P added in fp32, the clamp
  // compared in fp32 (a NaN sum stays NaN). Under autocast sum returns fp32,
  // and so does the clamp; without autocast the result is stored as bf16.
  float32 block_sum() const {
    float32 sum = float32::zero();
    for (const float32 x : p_fp32_) sum = add(sum, x).result;
    const float32 floor = from_double<fp32>(1e-10).result;
    const float32 clamped = std::is_lt(compare(sum, floor)) ? floor : sum;
    return flash_.autocast ? clamped : widen(convert<bf16>(clamped).result);
  }

  // l = alpha l + l_b, stored as bf16 in the row sums: alpha l is fp32 under
  // autocast (an fp32 tensor times a bf16 one promotes to fp32) and stored as
  // bf16 without. O.mul_(alpha).add_(PV) works in place on the bf16 O: each
  // step computes in fp32 and stores bf16, with either alpha.
  void rescale_and_add(float32 alpha) {
    const float32 rescaled_sum = mul<fp32>(alpha, sum_).result;
    const float32 kept = flash_.autocast ? rescaled_sum : widen(convert<bf16>(rescaled_sum).result);
    sum_ = stored_bf16(add<fp32>(kept, block_sum()));
    for (std::size_t c = 0; c < d_; ++c) o_[c] = stored_bf16(add<fp32>(stored_bf16(mul<fp32>(o_[c], alpha)), pv_[c]));
  }

  // PV[c] = bf16(P . V[:, c]): every column's sum in key order, as the scores'.
  void compute_pv() {
    std::fill(pv_sums_.begin(), pv_sums_.end(), float32::zero());
    for (std::size_t j = 0; j < p_.size(); ++j) {
      const std::size_t base = static_cast<std::size_t>(first_key_ + static_cast<int>(j)) * d_;
      for (std::size_t c = 0; c < d_; ++c) pv_sums_[c] = accumulate_product(pv_sums_[c], p_[j], v_[base + c]);
    }
    for (std::size_t c = 0; c < d_; ++c) pv_[c] = convert<bf16>(pv_sums_[c]).result;
  }

  const paper_flash& flash_;
  const attention_shape& shape_;
  std::span<const bfloat16> q_row_, k_, v_;
  std::size_t d_;
  int visible_keys_;
  float32 scale_;
  bfloat16 max_ = paper_masked_score;
  bfloat16 sum_ = bfloat16::zero();
  std::vector<bfloat16> o_;  // the unnormalised output, bf16 between blocks
  int first_key_ = 0, next_key_ = 0;  // the last block run: keys [first_key_, next_key_)
  bfloat16 block_max_{};
  float32 alpha_{};
  int ties_ = 0;
  std::vector<bfloat16> scores_, p_, pv_;
  std::vector<float32> p_fp32_;
  std::vector<float32> pv_sums_;  // P V's fp32 accumulators
};

}  // namespace detail

// One head: q [query_rows][head_dim], k and v [key_rows][head_dim] (bf16);
// writes o [query_rows][head_dim] (bf16) and lse [query_rows], L in the
// natural-log units of the scaled scores: fp32 under autocast, without
// autocast a bf16 value held as float32. Rows are independent: up to
// `threads` threads (0: one per core) take them in turn, and an observer of
// rows_done_event hears of each as it ends.
// Throws std::invalid_argument for a head_dim below 1, a block size below 1, a
// rule with across_blocks or a span of another length.
template <class O = no_observer>
void paper_forward_head(const paper_flash& flash, const attention_shape& shape, std::span<const bfloat16> q,
                        std::span<const bfloat16> k, std::span<const bfloat16> v, std::span<bfloat16> o,
                        std::span<float32> lse, O&& obs = {}, unsigned threads = 0) {
  detail::check_paper_head("paper_forward_head", shape, q.size(), k.size(), v.size(), o.size(), lse.size());
  if (flash.block_m < 1 || flash.block_n < 1)
    throw std::invalid_argument("paper_forward_head: block_m " + std::to_string(flash.block_m) + " and block_n " +
                                std::to_string(flash.block_n) + " must be at least 1");
  if (flash.stabilize && flash.stabilize->across_blocks)
    throw std::invalid_argument("paper_forward_head: the paper's code applies its rule block by block "
                                "(stabilized_max::across_blocks is the GPU-kernel model's)");
  const std::size_t d = static_cast<std::size_t>(shape.head_dim);
  for_each_index(static_cast<std::size_t>(shape.query_rows), threads, [&](std::size_t at) {
    const int row = static_cast<int>(at);
    detail::paper_row state(flash, shape, row, q.subspan(at * d, d), k, v);
    while (state.run_next_block()) {}
    state.finish(o.subspan(at * d, d), lse[at]);
    report(obs, rows_done_event{row, 1});
  });
}

// The same attention in double ("hp"), the value the bf16 result is compared
// against: no tiles, no bf16 and no stabilization (the softmax does not depend
// on the max it subtracts, in exact arithmetic). Scores are dot products in
// double times scale (the caller's, or d ** -0.5) with the paper's masking
// (-bf16_max); P = exp(score - row max); o = sum(P V) / sum(P) and
// lse = row max + log(sum(P)), both double.
template <class O = no_observer>
void paper_reference_fp64_head(const attention_shape& shape, std::optional<double> scale, std::span<const bfloat16> q,
                               std::span<const bfloat16> k, std::span<const bfloat16> v, std::span<double> o,
                               std::span<double> lse, O&& obs = {}, unsigned threads = 0) {
  detail::check_paper_head("paper_reference_fp64_head", shape, q.size(), k.size(), v.size(), o.size(), lse.size());
  const double factor = scale ? *scale : detail::paper_default_scale(shape, "paper_reference_fp64_head");
  const double masked = to_double(detail::paper_masked_score);
  const std::size_t d = static_cast<std::size_t>(shape.head_dim), keys = static_cast<std::size_t>(shape.key_rows);
  const auto widen = [](std::span<const bfloat16> x) {
    std::vector<double> wide(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) wide[i] = to_double(x[i]);
    return wide;
  };
  const std::vector<double> q_wide = widen(q), k_wide = widen(k), v_wide = widen(v);
  for_each_index(static_cast<std::size_t>(shape.query_rows), threads, [&](std::size_t at) {
    const int row = static_cast<int>(at);
    const std::size_t visible = static_cast<std::size_t>(detail::paper_visible_keys(shape, row));
    std::vector<double> scores(keys), sums(d, 0.0);
    double row_max = -std::numeric_limits<double>::infinity();
    for (std::size_t key = 0; key < keys; ++key) {
      double dot = 0;
      if (key < visible)
        for (std::size_t c = 0; c < d; ++c) dot += q_wide[at * d + c] * k_wide[key * d + c];
      scores[key] = key < visible ? dot * factor : masked;
      row_max = std::max(row_max, scores[key]);
    }
    double sum = 0;
    for (std::size_t key = 0; key < keys; ++key) {
      const double p = std::exp(scores[key] - row_max);
      sum += p;
      for (std::size_t c = 0; c < d; ++c) sums[c] += p * v_wide[key * d + c];
    }
    for (std::size_t c = 0; c < d; ++c) o[at * d + c] = sums[c] / sum;
    lse[at] = row_max + std::log(sum);
    report(obs, rows_done_event{row, 1});
  });
}

}  // namespace bitexact::attention
