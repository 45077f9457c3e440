// The one GEMM emulator: D = A B as a gemm_description (description.hpp)
// says a kernel computes it, for A [M, K] and B [K, N] in any formats the
// description's tensor core takes, with the scales, alpha, beta x C and bias
// of the call, rounded once to the output format.
//
//   for each split of K (description.hpp, `splits`):
//     for each piece of the split (`promotion_k`, or the whole split):
//       c = the tensor core's chain of fused steps over the piece, from +0
//       acc = c for the first piece, else acc + c in fp32 (a block scale:
//             block_scaling's rule)
//     sum = acc for the first split, else sum + acc in fp32 (the reduce kernel)
//   sum * fl(sa * sb) (tensor or row/column scales), alpha and beta x C
//   (alpha_beta_rule), + bias, all fp32 round to nearest; then one rounding
//   to Out.
//
// Evidence: tests/data/matmul (cuBLAS 13.1 under torch 2.11 on an H200:
// torch.matmul, F.linear, torch.addmm, torch.mm and addmm into fp32,
// torch._scaled_mm with tensor, row and block scales), replayed by tests/test_matmul_replay.cpp; the rules the
// captures rule out are there and in tools/analysis/matmul_rules.py.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/format.hpp"
#include "../core/operations.hpp"
#include "../hardware/alu.hpp"
#include "../core/dispatch.hpp"
#include "../hardware/mma.hpp"
#include "../host/parallel.hpp"
#include "chain.hpp"
#include "description.hpp"

namespace bitexact::matmul {

struct gemm_shape {
  std::size_t m = 0, n = 0, k = 0;
};

// How a scale array covers its operand (torch._scaled_mm's recipes).
enum class scale_layout {
  none,           // no scale
  tensor,         // one value
  rows,           // A: [M], one a row; B: [N], one a column of B
  block_1x128,    // A: [M, ceil(K/128)]; B: [ceil(K/128), N], each over 128 of K
  block_128x128,  // B: [ceil(K/128), ceil(N/128)], 128 of K by 128 columns
};

// The formats the emulator computes in: bf16 or fp16 into the same format or
// fp32 (torch.mm's out_dtype), fp32 into fp32 (the tf32 tensor core), e4m3
// or e5m2 into bf16, fp16 or fp32 (torch._scaled_mm).
template <format A, format B, format Out>
inline constexpr bool gemm_formats = ((A == bf16 || A == fp16) && B == A && (Out == A || Out == fp32)) ||
                                     (A == fp32 && B == fp32 && Out == fp32) ||
                                     ((A == e4m3 || A == e5m2) && (B == e4m3 || B == e5m2) &&
                                      (Out == bf16 || Out == fp16 || Out == fp32));
inline constexpr std::string_view gemm_formats_text =
    "bf16 or fp16 into the same format or fp32; fp32 (on the tf32 tensor core) into fp32; e4m3 or e5m2 into bf16, "
    "fp16 or fp32";

// Calls fn(format_tag<A>, format_tag<B>, format_tag<Out>) for formats the
// emulator computes in; std::invalid_argument naming them otherwise.
template <class Fn>
decltype(auto) visit_gemm_formats(format a, format b, format out, Fn&& fn) {
  return visit_format(a, [&](auto ta) {
    return visit_format(b, [&](auto tb) {
      return visit_format(out, [&](auto to) -> decltype(fn(format_tag<bf16>{}, format_tag<bf16>{}, format_tag<bf16>{})) {
        if constexpr (gemm_formats<std::remove_cvref_t<decltype(ta)>::fmt, std::remove_cvref_t<decltype(tb)>::fmt,
                                   std::remove_cvref_t<decltype(to)>::fmt>)
          return fn(ta, tb, to);
        throw std::invalid_argument("matmul takes " + std::string(gemm_formats_text) + "; not " +
                                    std::string(name_of(a)) + " x " + std::string(name_of(b)) + " into " +
                                    std::string(name_of(out)));
      });
    });
  });
}

template <format InA, format InB, format Out>
struct gemm_call {
  gemm_shape shape;
  std::span<const value<InA>> a;  // [M][K], row-major
  std::span<const value<InB>> b;  // [K][N], row-major
  scale_layout a_scales = scale_layout::none, b_scales = scale_layout::none;
  std::span<const float32> scale_a, scale_b;
  float32 alpha = from_host(1.0f);
  float32 beta = float32::zero();
  std::span<const value<Out>> c;     // [M][N], with beta; empty: none
  std::span<const value<Out>> bias;  // [N]; empty: none
  unsigned threads = 0;              // 0: every core; the bits are the same
};

// A split's K positions [first, end); empty for a split past K.
inline std::pair<std::size_t, std::size_t> split_range(const gemm_description& d, std::size_t k, int split) {
  const auto splits = static_cast<std::size_t>(d.splits);
  const std::size_t align = k % d.k_tile == 0 ? d.k_tile : d.ragged_split_alignment;
  const std::size_t share = ((k + splits - 1) / splits + align - 1) / align * align;
  const std::size_t first = std::min(k, static_cast<std::size_t>(split) * share);
  return {first, split + 1 == d.splits ? k : std::min(k, first + share)};
}

inline std::size_t blocks_of(std::size_t extent) { return (extent + 127) / 128; }

// The layout of a scale array of this shape (numpy's: [] or [1] is one value),
// for A's scales or B's; none when the shape fits no layout. A [M, 1] or
// [1, N] array is per row or column as torch._scaled_mm takes it.
inline scale_layout scale_layout_of(const std::vector<std::size_t>& shape, bool of_a, const gemm_shape& s) {
  std::size_t count = 1;
  for (const std::size_t extent : shape) count *= extent;
  const auto is = [&](std::vector<std::size_t> expected) { return shape == expected; };
  const std::size_t kb = blocks_of(s.k);
  if (count == 1) return scale_layout::tensor;
  if (of_a ? is({s.m}) || is({s.m, 1}) : is({s.n}) || is({1, s.n})) return scale_layout::rows;
  if (of_a ? is({s.m, kb}) : is({kb, s.n})) return scale_layout::block_1x128;
  if (!of_a && is({kb, blocks_of(s.n)})) return scale_layout::block_128x128;
  return scale_layout::none;
}

// What scale_layout_of takes, in words: "[M] or [M, 1] (per row), ...".
inline std::string scale_shapes(bool of_a, const gemm_shape& s) {
  const std::string kb = std::to_string(blocks_of(s.k)), m = std::to_string(s.m), n = std::to_string(s.n);
  return of_a ? "one value, [" + m + "] or [" + m + ", 1] (per row), [" + m + ", " + kb + "] (1 x 128 blocks)"
              : "one value, [" + n + "] or [1, " + n + "] (per column), [" + kb + ", " + n + "] (1 x 128 blocks) or [" +
                    kb + ", " + std::to_string(blocks_of(s.n)) + "] (128 x 128 blocks)";
}

// The call against the description, or std::invalid_argument naming what is wrong.
template <format InA, format InB, format Out>
void check_call(const gemm_description& d, const gemm_call<InA, InB, Out>& call) {
  check_description(d);
  const gemm_shape& s = call.shape;
  const auto refuse = [](const std::string& what) { throw std::invalid_argument("matmul: " + what); };
  if (s.m == 0 || s.n == 0 || s.k == 0) refuse("M, N and K must be at least 1");
  if (s.m > (std::size_t{1} << 24) || s.n > (std::size_t{1} << 24) || s.k > (std::size_t{1} << 24) ||
      s.m * s.k > (std::size_t{1} << 34) || s.k * s.n > (std::size_t{1} << 34) || s.m * s.n > (std::size_t{1} << 34))
    refuse("the shape is too large to emulate (each extent at most 2^24, each matrix at most 2^34 elements)");
  if (call.a.size() != s.m * s.k) refuse("A needs M x K values");
  if (call.b.size() != s.k * s.n) refuse("B needs K x N values");
  if (!takes(d, InA, InB))
    refuse("'" + d.name + "' takes no " + std::string(name_of(InA)) + " x " + std::string(name_of(InB)) +
           " products (its tensor core " + std::string(d.tensor_core->unit_name) + ", " +
           std::string(d.tensor_core->instruction) +
           (d.operands == operand_rule::widened_to_fp16 ? ", on fp8 operands widened to fp16)" : ")"));
  if (!call.c.empty() && call.c.size() != s.m * s.n) refuse("C needs M x N values");
  if (!call.bias.empty() && call.bias.size() != s.n) refuse("the bias needs N values");
  if (!call.bias.empty() && !call.c.empty()) refuse("a bias and C together are not modelled (no capture has both)");
  if (call.c.empty() && !call.beta.is_zero()) refuse("beta needs C");
  for (const float32 x : {call.alpha, call.beta})
    if (!std::isfinite(to_host(x))) refuse("alpha and beta must be finite");
  const auto expected = [&](scale_layout layout, bool a) -> std::size_t {
    switch (layout) {
      case scale_layout::none: return 0;
      case scale_layout::tensor: return 1;
      case scale_layout::rows: return a ? s.m : s.n;
      case scale_layout::block_1x128: return a ? s.m * blocks_of(s.k) : blocks_of(s.k) * s.n;
      case scale_layout::block_128x128: return blocks_of(s.k) * blocks_of(s.n);
    }
    return 0;
  };
  if (call.a_scales == scale_layout::block_128x128) refuse("A's scales are per tensor, per row or 1 x 128 blocks");
  if (call.scale_a.size() != expected(call.a_scales, true)) refuse("scale_a has the wrong number of values for its layout");
  if (call.scale_b.size() != expected(call.b_scales, false)) refuse("scale_b has the wrong number of values for its layout");
  if ((call.a_scales == scale_layout::none) != (call.b_scales == scale_layout::none))
    refuse("scale_a and scale_b come together");
  const bool a_blocks = call.a_scales == scale_layout::block_1x128;
  const bool b_blocks = call.b_scales == scale_layout::block_1x128 || call.b_scales == scale_layout::block_128x128;
  if (a_blocks != b_blocks) refuse("block scales of A need block scales of B, and the other way round");
  if (a_blocks && d.promotion_k != 128)
    refuse("block scales need a description that promotes every 128 of K (promotion_k 128; '" + d.name + "' has " +
           std::to_string(d.promotion_k) + ")");
  for (const auto scales : {call.scale_a, call.scale_b})
    for (const float32 x : scales)
      if (!std::isfinite(to_host(x))) refuse("scales must be finite");
}

namespace detail {

// The K positions a chain over [first, end) takes before its steps start at
// whole K tiles: the split's partial tile, where the kernel loads it first.
inline std::size_t leading_residue(const gemm_description& d, std::size_t first, std::size_t end) {
  return d.residue == k_residue::first_tile ? (end - first) % d.k_tile : 0;
}

// Chains over any K range of every output, from +0, into fp32: 16 x 8 tiles
// through mma_m16n8k16 (its fast path) for 16-bit inputs on a unit of 16
// products a step when every range starts at a whole step (tiles_allowed),
// else fused_dot an output at a time.
template <format InA, format InB>
class chain_source {
 public:
  chain_source(const fused_sum_unit& unit, const gemm_shape& s, std::span<const value<InA>> a,
               std::span<const value<InB>> b, bool tiles_allowed)
      : unit_(unit), shape_(s), a_(a), tiles_(tile_formats && unit.products_per_step == 16 && tiles_allowed) {
    if constexpr (tile_formats) {
      if (tiles_) {
        packed_ = pack<InA>(a, b, s.m, s.n, s.k);
        return;
      }
    }
    b_columns_.resize(s.k * s.n);
    for (std::size_t x = 0; x < s.k; ++x)
      for (std::size_t col = 0; col < s.n; ++col) b_columns_[col * s.k + x] = b[x * s.n + col];
  }

  // With tiles, first is a multiple of the unit's step and lead is 0. The
  // chain takes [first, first + lead) in steps, then steps from first + lead.
  void chains(std::size_t first, std::size_t end, std::size_t lead, std::span<float32> out, unsigned threads) const {
    if constexpr (tile_formats) {
      if (tiles_) {
        chain_products<fp32, InA>(unit_, packed_, first / k_step, (end + k_step - 1) / k_step, out, threads);
        return;
      }
    }
    const std::span<const value<InB>> columns(b_columns_);
    for_each_index(shape_.m, threads, [&](std::size_t row) {
      const auto a_row = a_.subspan(row * shape_.k + first, end - first);
      for (std::size_t col = 0; col < shape_.n; ++col) {
        const auto b_column = columns.subspan(col * shape_.k + first, end - first);
        const float32 led = fused_dot<fp32, InA, InB>(unit_, a_row.first(lead), b_column.first(lead), float32::zero()).result;
        out[row * shape_.n + col] =
            fused_dot<fp32, InA, InB>(unit_, a_row.subspan(lead), b_column.subspan(lead), led).result;
      }
    });
  }

 private:
  static constexpr bool tile_formats = InA == InB && InA.width() == 16;
  const fused_sum_unit& unit_;
  gemm_shape shape_;
  std::span<const value<InA>> a_;
  bool tiles_;
  packed_operands<InA> packed_;
  std::vector<value<InB>> b_columns_;
};

}  // namespace detail

namespace detail {

// A piece's chain c into the split's fp32 accumulator acc (from +0 for the
// first piece): plain, or with the block scales sa and sb of its 128 of K.
inline float32 add_piece(const gemm_description& d, scale_layout b_scales, bool blocks, bool first_piece, float32 acc,
                         float32 c, float32 sa, float32 sb) {
  if (!blocks) return first_piece ? c : ptx::add_f32(acc, c);
  const float32 from = first_piece ? float32::zero() : acc;
  const block_scaling rule = b_scales == scale_layout::block_128x128 ? d.epilogue.blocks_128x128 : d.epilogue.blocks_1x128;
  return rule == block_scaling::fma_with_scale_product ? ptx::fma_f32(c, ptx::mul_f32(sa, sb), from)
                                                       : ptx::fma_f32(ptx::mul_f32(c, sa), sb, from);
}

// The block scales of output (row, col) for the 128 of K numbered block.
template <format InA, format InB, format Out>
std::pair<float32, float32> block_scales(const gemm_call<InA, InB, Out>& call, std::size_t row, std::size_t col,
                                         std::size_t block) {
  const gemm_shape& s = call.shape;
  return {call.scale_a[row * blocks_of(s.k) + block], call.b_scales == scale_layout::block_128x128
                                                          ? call.scale_b[block * blocks_of(s.n) + col / 128]
                                                          : call.scale_b[block * s.n + col]};
}

// The epilogue of output (row, col) from its fp32 sum, each value it passes through.
struct epilogue_values {
  float32 sum, scaled, combined, biased;
  bool has_scale, has_alpha_beta, has_bias;
};

template <format InA, format InB, format Out>
epilogue_values epilogue_of(const gemm_description& d, const gemm_call<InA, InB, Out>& call, std::size_t row,
                            std::size_t col, float32 sum) {
  epilogue_values e{sum, sum, sum, sum, false, false, !call.bias.empty()};
  e.has_scale = call.a_scales == scale_layout::tensor || call.a_scales == scale_layout::rows;
  if (e.has_scale)
    e.scaled = ptx::mul_f32(sum, ptx::mul_f32(call.scale_a[call.scale_a.size() == 1 ? 0 : row],
                                              call.scale_b[call.scale_b.size() == 1 ? 0 : col]));
  e.combined = e.scaled;
  e.has_alpha_beta = call.alpha.bits != from_host(1.0f).bits || !call.c.empty();
  if (e.has_alpha_beta) {
    const alpha_beta_rule rule = d.splits > 1 ? d.epilogue.alpha_beta_split_k : d.epilogue.alpha_beta;
    const float32 c = call.c.empty() ? float32::zero() : convert<fp32>(call.c[row * call.shape.n + col]).result;
    e.combined = rule == alpha_beta_rule::fma_alpha ? ptx::fma_f32(call.alpha, e.scaled, ptx::mul_f32(call.beta, c))
                                                    : ptx::fma_f32(call.beta, c, ptx::mul_f32(call.alpha, e.scaled));
  }
  e.biased = e.has_bias ? ptx::add_f32(e.combined, convert<fp32>(call.bias[col]).result) : e.combined;
  return e;
}

}  // namespace detail

namespace detail {

// K positions in the order the tensor core's steps take them: position p of
// the reordered operands holds k = position_of(p); past K, zeros.
inline std::size_t ordered_k(k_order order, std::size_t p) {
  if (order == k_order::ascending) return p;
  const std::size_t block = p / 32, within = p % 32, pair = within % 16;
  // Step 0 of the block: k mod 4 in {0, 1}; step 1: k mod 4 in {2, 3}.
  return block * 32 + (pair / 2) * 4 + (within / 16) * 2 + pair % 2;
}

// One operand as the tensor core sees it (operand_rule): fp8 widened to fp16
// (exact), fp32 rounded to tf32 or read as tf32 from its register.
template <format To, format From>
value<To> tensor_core_operand(value<From> v, operand_rule rule) {
  if constexpr (To == From) return v;
  else if constexpr (To == tf32 && From == fp32) {
    if (rule == operand_rule::truncated_to_tf32) return tf32_operand(v.bits);
    environment nearest_even;
    nearest_even.rounding = rounding_mode::nearest_even;
    return convert<tf32>(v, nearest_even).result;
  } else {
    return convert<To>(v).result;  // fp8 to fp16: exact
  }
}

// A [M][K] and B [K][N] with K reordered (and padded to whole 32s) and each
// value as the tensor core sees it.
template <format To, format From>
std::vector<value<To>> reordered(std::span<const value<From>> x, std::size_t rows, std::size_t columns, bool k_is_column,
                                 k_order order, std::size_t padded_k, operand_rule rule) {
  const std::size_t k = k_is_column ? columns : rows;
  const std::size_t out_rows = k_is_column ? rows : padded_k, out_columns = k_is_column ? padded_k : columns;
  std::vector<value<To>> out(out_rows * out_columns);
  for (std::size_t r = 0; r < out_rows; ++r)
    for (std::size_t c = 0; c < out_columns; ++c) {
      const std::size_t kk = ordered_k(order, k_is_column ? c : r);
      if (kk >= k) continue;
      out[r * out_columns + c] = tensor_core_operand<To>(k_is_column ? x[r * columns + kk] : x[kk * columns + c], rule);
    }
  return out;
}

// The fp32 sum of every output before the epilogue: splits of pieces of
// chains from `source`, as the description says; `k_end` rounds a range's end
// up to the reordered K's blocks.
template <class Source, format InA, format InB, format Out>
std::vector<float32> accumulate(const gemm_description& d, const gemm_call<InA, InB, Out>& call, const Source& source,
                                std::size_t padded_k) {
  const gemm_shape& s = call.shape;
  const std::size_t outputs = s.m * s.n;
  const bool blocks = call.a_scales == scale_layout::block_1x128;
  const auto k_end = [&](std::size_t end) { return end == s.k ? padded_k : end; };
  std::vector<float32> sum(outputs), acc(outputs), piece(outputs);
  bool first_split = true;
  for (int split = 0; split < d.splits; ++split) {
    const auto [split_first, split_end] = split_range(d, s.k, split);
    if (split_first >= split_end) continue;  // not launched
    const std::size_t width = d.promotion_k == 0 ? split_end - split_first : d.promotion_k;
    for (std::size_t first = split_first; first < split_end; first += width) {
      const std::size_t end = std::min(split_end, first + width);
      source.chains(first, k_end(end), leading_residue(d, first, end), piece, call.threads);
      const bool first_piece = first == split_first;
      for_each_index(s.m, call.threads, [&](std::size_t row) {
        for (std::size_t col = 0; col < s.n; ++col) {
          const std::size_t i = row * s.n + col;
          const auto [sa, sb] = blocks ? block_scales(call, row, col, first / 128) : std::pair<float32, float32>{};
          acc[i] = add_piece(d, call.b_scales, blocks, first_piece, acc[i], piece[i], sa, sb);
        }
      });
    }
    for (std::size_t i = 0; i < outputs; ++i) sum[i] = first_split ? acc[i] : ptx::add_f32(sum[i], acc[i]);
    first_split = false;
  }
  return sum;
}

// The sum through the operands the tensor core sees (operand_rule, k_order).
template <format InA, format InB, format Out>
std::vector<float32> sum_of(const gemm_description& d, const gemm_call<InA, InB, Out>& call) {
  const gemm_shape& s = call.shape;
  const fused_sum_unit& unit = d.tensor_core->unit;
  const bool converted = d.operands != operand_rule::as_given;
  // Tiles need every chain to start at a whole 16 of K.
  const bool tiles_allowed =
      d.residue == k_residue::last_tile && (s.k % d.k_tile == 0 || d.ragged_split_alignment % k_step == 0);
  if (!converted && d.order == k_order::ascending)
    return accumulate(d, call, chain_source<InA, InB>(unit, s, call.a, call.b, tiles_allowed), s.k);
  const std::size_t padded = d.order == k_order::ascending ? s.k : (s.k + 31) / 32 * 32;
  const auto with = [&](auto a_tag, auto b_tag) {
    constexpr format A = decltype(a_tag)::fmt, B = decltype(b_tag)::fmt;
    const std::vector<value<A>> a = reordered<A, InA>(call.a, s.m, s.k, true, d.order, padded, d.operands);
    const std::vector<value<B>> b = reordered<B, InB>(call.b, s.k, s.n, false, d.order, padded, d.operands);
    return accumulate(d, call, chain_source<A, B>(unit, {s.m, s.n, padded}, a, b, tiles_allowed), padded);
  };
  if constexpr (InA.width() == 8 && InB.width() == 8)
    if (d.operands == operand_rule::widened_to_fp16) return with(format_tag<fp16>{}, format_tag<fp16>{});
  if constexpr (InA == fp32 && InB == fp32) return with(format_tag<tf32>{}, format_tag<tf32>{});
  else return with(format_tag<InA>{}, format_tag<InB>{});
}

}  // namespace detail

// D, rounded to Out (row-major [M][N]).
template <format InA, format InB, format Out>
std::vector<value<Out>> gemm(const gemm_description& d, const gemm_call<InA, InB, Out>& call) {
  check_call(d, call);
  const gemm_shape& s = call.shape;
  const std::size_t outputs = s.m * s.n;
  const std::vector<float32> sum = detail::sum_of(d, call);
  std::vector<value<Out>> out(outputs);
  for_each_index(s.m, call.threads, [&](std::size_t row) {
    for (std::size_t col = 0; col < s.n; ++col) {
      const std::size_t i = row * s.n + col;
      out[i] = convert<Out>(detail::epilogue_of(d, call, row, col, sum[i]).biased, ptx::gpu_environment()).result;
    }
  });
  return out;
}

// One output's arithmetic as data, for --explain and a mismatch's account:
// every fused step of every chain (its window and the terms it cut), each
// piece's addition into its split, the splits' reduction and the epilogue.
// explain_output follows gemm()'s path and gives its bits (tests compare).
struct step_record {
  std::size_t k_first = 0, k_end = 0;  // positions in the order the steps take K
  float32 before, after;               // the accumulator into and out of the step
  int e_max = 0, lsb_exponent = 0;     // the window: terms below 2^lsb_exponent are cut
  int terms_cut = 0;                   // terms (products or the addend) that lost bits
};

struct piece_record {
  std::size_t first = 0, end = 0;  // K positions
  std::vector<step_record> steps;
  float32 chain;                   // the chain's result
  float32 sa, sb;                  // block scales, when the call has them
  float32 accumulator;             // the split's fp32 accumulator after this piece
};

struct split_record {
  std::size_t first = 0, end = 0;
  std::vector<piece_record> pieces;
  float32 total;  // the reduction so far: splits 0 to this one added in order
};

template <format Out>
struct output_explanation {
  std::size_t row = 0, col = 0;
  bool blocks = false, reordered = false;
  operand_rule operands = operand_rule::as_given;
  std::vector<split_record> splits;
  detail::epilogue_values epilogue;
  value<Out> out;
};

namespace detail {

struct step_window {
  int e_max = 0, lsb_exponent = 0, cut = 0;
  void on(const fused_term_event& e) { cut += e.truncated; }
  void on(const fused_sum_event& e) { e_max = e.max_exponent, lsb_exponent = e.lsb_exponent; }
};

template <format A, format B, format InA, format InB, format Out>
output_explanation<Out> explain_with(const gemm_description& d, const gemm_call<InA, InB, Out>& call, std::size_t row,
                                     std::size_t col) {
  const gemm_shape& s = call.shape;
  const std::size_t padded = d.order == k_order::ascending ? s.k : (s.k + 31) / 32 * 32;
  std::vector<value<InB>> column(s.k);
  for (std::size_t x = 0; x < s.k; ++x) column[x] = call.b[x * s.n + col];
  const std::vector<value<A>> a =
      reordered<A, InA>(call.a.subspan(row * s.k, s.k), 1, s.k, true, d.order, padded, d.operands);
  const std::vector<value<B>> b =
      reordered<B, InB>(std::span<const value<InB>>(column), s.k, 1, false, d.order, padded, d.operands);
  output_explanation<Out> e;
  e.row = row, e.col = col;
  e.blocks = call.a_scales == scale_layout::block_1x128;
  e.operands = d.operands;
  e.reordered = d.order != k_order::ascending;
  const std::size_t step = k_per_step(d);
  float32 total;
  for (int split = 0; split < d.splits; ++split) {
    const auto [split_first, split_end] = split_range(d, s.k, split);
    if (split_first >= split_end) continue;
    split_record sr{split_first, split_end, {}, {}};
    const std::size_t width = d.promotion_k == 0 ? split_end - split_first : d.promotion_k;
    float32 acc;
    for (std::size_t first = split_first; first < split_end; first += width) {
      const std::size_t end = std::min(split_end, first + width), chain_end = end == s.k ? padded : end;
      piece_record pr{first, end, {}, float32::zero(), {}, {}, {}};
      const std::size_t lead_end = first + leading_residue(d, first, end);
      for (std::size_t k = first, n = 0; k < chain_end; k += n) {
        n = std::min(step, (k < lead_end ? lead_end : chain_end) - k);  // the lead's last step ends with it
        step_window window;
        const float32 before = pr.chain;
        pr.chain = fused_multiply_add_step<fp32, A, B>(d.tensor_core->unit, std::span<const value<A>>(a).subspan(k, n),
                                                       std::span<const value<B>>(b).subspan(k, n), pr.chain, window)
                       .result;
        pr.steps.push_back({k, k + n, before, pr.chain, window.e_max, window.lsb_exponent, window.cut});
      }
      if (e.blocks) std::tie(pr.sa, pr.sb) = block_scales(call, row, col, first / 128);
      acc = add_piece(d, call.b_scales, e.blocks, first == split_first, acc, pr.chain, pr.sa, pr.sb);
      pr.accumulator = acc;
      sr.pieces.push_back(std::move(pr));
    }
    total = e.splits.empty() ? acc : ptx::add_f32(total, acc);
    sr.total = total;
    e.splits.push_back(std::move(sr));
  }
  e.epilogue = epilogue_of(d, call, row, col, total);
  e.out = convert<Out>(e.epilogue.biased, ptx::gpu_environment()).result;
  return e;
}

}  // namespace detail

template <format InA, format InB, format Out>
output_explanation<Out> explain_output(const gemm_description& d, const gemm_call<InA, InB, Out>& call, std::size_t row,
                                       std::size_t col) {
  check_call(d, call);
  if (row >= call.shape.m || col >= call.shape.n) throw std::invalid_argument("matmul: the element is outside D");
  if constexpr (InA.width() == 8 && InB.width() == 8)
    if (d.operands == operand_rule::widened_to_fp16) return detail::explain_with<fp16, fp16>(d, call, row, col);
  if constexpr (InA == fp32 && InB == fp32) return detail::explain_with<tf32, tf32>(d, call, row, col);
  else return detail::explain_with<InA, InB>(d, call, row, col);
}

}  // namespace bitexact::matmul
