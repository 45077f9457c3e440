// One query row of the single-kernel flash-attention forward pass
// (flash_forward.hpp's row_slab, splits = 1) recomputed in a wide binary
// floating-point type, with each of the kernel's rounding sites a switch:
// `kernel` rounds there as the kernel does, `exact` does not round there.
// With every site `kernel` the row's O and L are the emulator's bits; with
// every site `exact` O is softmax(S * scale) V to the working precision. The
// error of O split by site (attribute_row) follows from comparing the two
// with the configurations in between.
//
// The kernel's roundings are the library's: the fp32 and bf16 roundings of
// a wide value go through round_pack, the tensor-core steps through
// fused_multiply_add_step or, where an upstream site is exact and an operand
// is not in the unit's formats, through the unit's own truncate_to and
// round_fused_sum; MUFU.EX2 is ptx::ex2_approx.
//
// The working type has 128 significand bits. Every kernel operand is a bf16
// or fp32 value or a product or sum of a few of them, so that the roundings
// to fp32 and bf16 see exact values (a sum of two fp32 values far apart is
// rounded at bit 128 first, which cannot move it across an fp32 midpoint);
// exp and the exact sums of a row carry relative errors near 2^-120, some
// 2^90 below the smallest kernel rounding measured (about 2^-30 relative).
#pragma once

#include <array>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <boost/math/constants/constants.hpp>
#include <boost/multiprecision/cpp_bin_float.hpp>

#include "../core/format.hpp"
#include "../core/operations.hpp"
#include "../core/round.hpp"
#include "../hardware/alu.hpp"
#include "../hardware/mma.hpp"
#include "../hardware/mufu.hpp"
#include "flash_forward.hpp"

namespace bitexact::attention {

using working_real =
    boost::multiprecision::number<boost::multiprecision::cpp_bin_float<128, boost::multiprecision::digit_base_2>,
                                  boost::multiprecision::et_off>;

// Where the kernel rounds, in the order a block meets them.
enum class rounding_site : std::uint8_t {
  scores,             // S = Q K^T: the chained tensor-core steps (truncation, RZ into fp32)
  exponent_argument,  // RN(RN(S * scale_log2) - RN(m * scale_log2)), alpha's RN(RN(m_old - m) * scale_log2),
                      // scale_log2 = RN(scale * log2 e) itself, and the stabilized max RN(beta * m)
  ex2_unit,           // MUFU.EX2 for P and alpha
  p_to_bf16,          // P to bf16 for P V (RN)
  pv_tensor_core,     // O + bf16(P) V: the tensor-core steps, O as their C
  o_rescale,          // O = RN(O * alpha)
  row_sum,            // the fp32 row sums: additions, the FFMA rescale, the final reduction
  normalization,      // RN(1 / l) and RN(O * RN(1 / l))
  output_bf16,        // O to bf16 (RN)
};
inline constexpr std::size_t rounding_site_count = 9;

inline constexpr std::array<rounding_site, rounding_site_count> every_rounding_site{
    rounding_site::scores,         rounding_site::exponent_argument, rounding_site::ex2_unit,
    rounding_site::p_to_bf16,      rounding_site::pv_tensor_core,    rounding_site::o_rescale,
    rounding_site::row_sum,        rounding_site::normalization,     rounding_site::output_bf16};

inline constexpr std::string_view site_name(rounding_site site) {
  constexpr std::array<std::string_view, rounding_site_count> names{
      "scores", "exponent_argument", "ex2_unit", "p_to_bf16", "pv_tensor_core",
      "o_rescale", "row_sum", "normalization", "output_bf16"};
  return names[static_cast<std::size_t>(site)];
}

// Which sites do not round: bit site set means that site is exact.
using exact_sites = std::bitset<rounding_site_count>;

inline exact_sites only_exact(rounding_site site) { return exact_sites{}.set(static_cast<std::size_t>(site)); }
inline exact_sites only_kernel(rounding_site site) { return ~only_exact(site); }

namespace detail {

template <format F>
working_real working_of(value<F> x) {
  return working_real(to_double(x));
}

// x rounded to nearest even into F by round_pack, as the GPU's RN operations
// round (no flush to zero). Precondition: x is not NaN.
template <format F>
value<F> nearest(const working_real& x) {
  if (boost::multiprecision::isnan(x)) throw std::invalid_argument("rounding_sites: a NaN reached a rounding");
  if (boost::multiprecision::isinf(x)) return value<F>::infinity(x < 0);
  if (x == 0) return value<F>::zero(boost::multiprecision::signbit(x) != 0);
  int exponent = 0;
  const working_real scaled = boost::multiprecision::ldexp(boost::multiprecision::frexp(boost::multiprecision::abs(x), &exponent), 64);
  const working_real whole = boost::multiprecision::trunc(scaled);
  flags raised;
  return round_pack<F>(x < 0, exponent - 64, whole.convert_to<std::uint64_t>(), whole != scaled, ptx::gpu_environment(),
                       raised);
}

template <format F>
working_real rounded_to(const working_real& x) {
  return working_of(nearest<F>(x));
}

// x as a value of F when F holds it exactly.
template <format F>
std::optional<value<F>> held_by(const working_real& x) {
  const value<F> candidate = nearest<F>(x);
  if (working_of(candidate) == x) return candidate;
  return std::nullopt;
}

// The exponent a nonzero term's factor takes part in e_max with: its leading
// bit's, but no lower than F's smallest normal exponent (a subnormal compares
// as the smallest normal does, nominal_exponent in mma.hpp).
template <format F>
int nominal_exponent_of(const working_real& x) {
  int exponent = 0;
  boost::multiprecision::frexp(x, &exponent);
  return std::max(exponent - 1, F.min_exponent());
}

// fused_multiply_add_step's rule on operands its formats may not hold (P or
// O where an upstream site is exact): the exact products, e_max from the
// factors' exponents, each term truncated toward zero (truncate_to) to
// kept_fraction_bits below 2^e_max, the exact sum rounded by
// round_fused_sum. On bf16 a and b and an fp32 c it is that step's result.
// Precondition: finite operands, a and b of one length of at most 64.
inline working_real fused_step_on_exact_terms(const fused_sum_unit& unit, std::span<const working_real> a,
                                              std::span<const bfloat16> b, const working_real& c) {
  constexpr std::size_t most = max_products_per_step;
  if (a.size() != b.size() || a.size() > most)
    throw std::invalid_argument("fused_step_on_exact_terms: a and b must have one length, at most 64");
  std::array<working_real, most + 1> terms;
  std::array<int, most + 1> nominal{};
  int max_exponent = unit.zero_term_exponent;
  for (std::size_t k = 0; k <= a.size(); ++k) {
    const bool addend = k == a.size();
    terms[k] = addend ? c : a[k] * working_of(b[k]);
    if (!boost::multiprecision::isfinite(terms[k]))
      throw std::invalid_argument("fused_step_on_exact_terms: a non-finite operand");
    nominal[k] = terms[k] == 0 ? unit.zero_term_exponent
                 : addend      ? nominal_exponent_of<fp32>(c)
                               : nominal_exponent_of<bf16>(a[k]) + nominal_exponent_of<bf16>(working_of(b[k]));
    max_exponent = std::max(max_exponent, nominal[k]);
  }
  const int lsb_exponent = max_exponent - unit.kept_fraction_bits;
  std::int64_t sum = 0;
  for (std::size_t k = 0; k <= a.size(); ++k) {
    if (terms[k] == 0) continue;
    // The term's top 64 bits, cut toward zero: their last bit lies below the
    // window (a term is below 2^(e_max + 2)), so truncate_to cuts the same bits.
    int exponent = 0;
    const working_real top = boost::multiprecision::trunc(
        boost::multiprecision::ldexp(boost::multiprecision::frexp(boost::multiprecision::abs(terms[k]), &exponent), 64));
    bool truncated = false;
    const std::int64_t kept =
        bitexact::detail::truncate_to(top.convert_to<std::uint64_t>(), exponent - 64, lsb_exponent, truncated);
    sum += terms[k] < 0 ? -kept : kept;
  }
  return working_of(bitexact::detail::round_fused_sum<fp32>(unit, bitexact::detail::fused_sum_environment<fp32>(unit),
                                                             sum, lsb_exponent, no_observer{})
                        .result);
}

// One fused tensor-core step, sum of a[k] * b[k] plus c rounded into fp32:
// fused_multiply_add_step itself when a is bf16 and c fp32, else the same
// rule on the exact terms.
inline working_real fused_step(const fused_sum_unit& unit, std::span<const working_real> a,
                               std::span<const bfloat16> b, const working_real& c) {
  std::array<bfloat16, max_products_per_step> a_held{};
  bool held = a.size() <= a_held.size();
  for (std::size_t k = 0; k < a.size() && held; ++k) {
    const auto x = held_by<bf16>(a[k]);
    held = x.has_value();
    if (held) a_held[k] = *x;
  }
  const auto c_held = held_by<fp32>(c);
  if (!held || !c_held) return fused_step_on_exact_terms(unit, a, b, c);
  return working_of(
      fused_multiply_add_step<fp32, bf16>(unit, std::span<const bfloat16>(a_held.data(), a.size()), b, *c_held).result);
}

inline const working_real& ln_two() {
  static const working_real value = boost::math::constants::ln_two<working_real>();
  return value;
}

}  // namespace detail

// The row's results under one choice of sites.
struct rounding_site_result {
  std::vector<working_real> o;  // [head_dim], after the output site (bf16 values when it is kernel)
  working_real max, sum;        // the row's final max (the stabilized one when stabilized) and row sum
  working_real lse;             // L: the kernel's formula when the row-sum site rounds and the max is an fp32
                                // value, else m scale + ln l exactly (L is not attributed)
};

// One query row of one head under pytorch_sdpa_flash_sm90 (or its stabilized
// preset, the per-block rule) with splits = 1. q [query_rows][head_dim], k and
// v [key_rows][head_dim] as flash_forward_head takes them; row: the query
// row. The scores are computed once in each mode at construction.
class rounding_site_row {
 public:
  rounding_site_row(const flash_kernel& kernel, const attention_shape& shape, std::span<const bfloat16> q,
                    std::span<const bfloat16> k, std::span<const bfloat16> v, int row)
      : kernel_(kernel), shape_(shape), d_(static_cast<std::size_t>(shape.head_dim)), row_(row) {
    const auto refuse = [](const std::string& why) { throw std::invalid_argument("rounding_site_row: " + why); };
    if (kernel.splits != 1)
      refuse("the kernel splits the keys (split-KV): only the single-kernel path (splits = 1) is modelled");
    if (kernel.stabilize && kernel.stabilize->across_blocks)
      refuse("the stabilized rule across blocks is not modelled (the per-block rule is)");
    if (shape.head_dim != 64 && shape.head_dim != 128) refuse("head_dim must be 64 or 128");
    if (kernel.block_n < 16 || kernel.block_n % 16 != 0 || kernel.block_m < 16 || kernel.block_m % 16 != 0 ||
        16 % kernel.tensor_core.products_per_step != 0)
      refuse("block_m and block_n must be multiples of 16, and a tensor-core step must divide 16 products");
    if (shape.query_rows < 1 || shape.key_rows < 1 || row < 0 || row >= shape.query_rows)
      refuse("row " + std::to_string(row) + " is not a query row of the shape");
    const std::size_t keys = static_cast<std::size_t>(shape.key_rows);
    if (q.size() != static_cast<std::size_t>(shape.query_rows) * d_ || k.size() != keys * d_ || v.size() != keys * d_)
      refuse("q needs query_rows x head_dim elements, k and v key_rows x head_dim");

    const bitexact::attention::block_range range =
        bitexact::attention::blocks_of(kernel, shape, row / kernel.block_m, 0);
    first_block_ = range.first, end_block_ = range.end;
    const bitexact::attention::detail::masking_plan plan = bitexact::attention::detail::masking_of(kernel, shape);
    masking_steps_ = plan.steps, check_inf_ = plan.check_inf;
    key_limit_ = shape.key_rows;
    if (shape.causal) key_limit_ = bitexact::attention::visible_keys(kernel, shape, row);
    exact_scale_log2_ = detail::working_of(kernel.scale) / detail::ln_two();

    const std::size_t padded = static_cast<std::size_t>(std::max(end_block_, 0)) * static_cast<std::size_t>(kernel.block_n);
    const std::span<const bfloat16> q_row = q.subspan(static_cast<std::size_t>(row) * d_, d_);
    kernel_scores_.assign(padded, working_real(0));
    exact_scores_.assign(padded, working_real(0));
    v_by_column_.assign(d_ * padded, bfloat16::zero());
    for (std::size_t key = 0; key < std::min(keys, padded); ++key) {
      const std::span<const bfloat16> k_row = k.subspan(key * d_, d_);
      kernel_scores_[key] = detail::working_of(fused_dot<fp32, bf16>(kernel.tensor_core, q_row, k_row, float32::zero()).result);
      for (std::size_t c = 0; c < d_; ++c) {
        exact_scores_[key] += detail::working_of(q_row[c]) * detail::working_of(k_row[c]);
        v_by_column_[c * padded + key] = v[key * d_ + c];
      }
    }
  }

  // The row with the sites in `exact` not rounding and every other one rounding as the kernel does.
  rounding_site_result run(exact_sites exact) const {
    const pass p{*this, exact};
    return p.result();
  }

  int head_dim() const { return static_cast<int>(d_); }

 private:
  // One run: the switches and the helpers that apply them.
  struct pass {
    const rounding_site_row& row;
    exact_sites exact;

    bool kernel_at(rounding_site site) const { return !exact.test(static_cast<std::size_t>(site)); }
    working_real fp32_at(rounding_site site, const working_real& x) const {
      return kernel_at(site) ? detail::rounded_to<fp32>(x) : x;
    }
    working_real scale_log2() const {
      return kernel_at(rounding_site::exponent_argument) ? detail::working_of(row.kernel_.scale_log2)
                                                         : row.exact_scale_log2_;
    }
    // MUFU.EX2 of an argument that may not be an fp32 value (the argument
    // site exact): the unit's result at the nearest fp32 argument times
    // 2^(x - that argument), i.e. the unit's relative error at that argument.
    working_real ex2(const working_real& x) const {
      if (boost::multiprecision::isinf(x) && x < 0) return working_real(0);
      if (!kernel_at(rounding_site::ex2_unit)) return boost::multiprecision::exp(x * detail::ln_two());
      const float32 argument = detail::nearest<fp32>(x);
      const working_real unit = detail::working_of(ptx::ex2_approx(argument));
      const working_real rest = x - detail::working_of(argument);
      return rest == 0 ? unit : unit * boost::multiprecision::exp(rest * detail::ln_two());
    }
    // Algorithm 3's test: (max - s) * scale <= epsilon, in the kernel's fp32
    // operations on the kernel's scores, exactly on exact scores (a decision,
    // not a rounding: it only chooses the shift).
    bool within_epsilon(const working_real& max, const working_real& score) const {
      if (boost::multiprecision::isinf(score)) return false;
      const working_real scale = detail::working_of(row.kernel_.scale);
      const working_real epsilon = detail::working_of(row.kernel_.stabilize->epsilon);
      if (!kernel_at(rounding_site::scores)) return (max - score) * scale <= epsilon;
      return detail::rounded_to<fp32>(detail::rounded_to<fp32>(max - score) * scale) <= epsilon;
    }
    working_real stabilized(const working_real& m) const {
      if (m > 0) return fp32_at(rounding_site::exponent_argument, detail::working_of(row.kernel_.stabilize->beta) * m);
      return m < 0 ? working_real(0) : m;
    }

    rounding_site_result result() const;
  };

  flash_kernel kernel_;
  attention_shape shape_;
  std::size_t d_;
  int row_;
  int first_block_ = 0, end_block_ = 0, masking_steps_ = 1, key_limit_ = 0;
  bool check_inf_ = false;
  working_real exact_scale_log2_;
  std::vector<working_real> kernel_scores_, exact_scores_;  // [padded keys]
  std::vector<bfloat16> v_by_column_;                        // [head_dim][padded keys], zero past the last key
};

inline rounding_site_result rounding_site_row::pass::result() const {
  using site = rounding_site;
  const flash_kernel& kernel = row.kernel_;
  const std::size_t d = row.d_, bn = static_cast<std::size_t>(kernel.block_n);
  const std::size_t padded = row.kernel_scores_.size();
  const std::vector<working_real>& scores = kernel_at(site::scores) ? row.kernel_scores_ : row.exact_scores_;
  const working_real negative_infinity = -std::numeric_limits<working_real>::infinity();
  const working_real c = scale_log2();
  const auto add = [&](const working_real& a, const working_real& b) { return fp32_at(site::row_sum, a + b); };

  std::vector<working_real> o(d, working_real(0)), s(bn), p(bn);
  std::array<working_real, 4> sums{};
  working_real m = negative_infinity;
  int iteration = 0;
  for (int block = row.end_block_ - 1; block >= row.first_block_; --block, ++iteration) {
    const bool first = iteration == 0, masking = iteration < row.masking_steps_;
    const std::size_t key0 = static_cast<std::size_t>(block) * bn;
    working_real block_max = negative_infinity;
    for (std::size_t j = 0; j < bn; ++j) {
      const bool masked = masking && static_cast<int>(key0 + j) >= row.key_limit_;
      s[j] = masked ? negative_infinity : scores[key0 + j];
      block_max = std::max(block_max, s[j]);
    }
    if (kernel.stabilize) {
      int ties = 0;
      for (std::size_t j = 0; j < bn; ++j) ties += within_epsilon(block_max, s[j]);
      if (ties > 1) block_max = stabilized(block_max);
    }
    const working_real previous = m;
    m = first ? block_max : std::max(previous, block_max);
    working_real alpha = 1;
    if (!first) {
      const working_real current = row.check_inf_ && boost::multiprecision::isinf(m) ? working_real(0) : m;
      const working_real difference = kernel_at(site::exponent_argument) ? detail::rounded_to<fp32>(previous - current)
                                                                         : previous - current;
      if (boost::multiprecision::isnan(difference)) throw std::invalid_argument("rounding_site_row: alpha of -inf - -inf");
      alpha = ex2(fp32_at(site::exponent_argument, difference * c));
      // The kernel skips the multiply when alpha is exactly 1.
      if (alpha != 1)
        for (working_real& x : o) x = fp32_at(site::o_rescale, x * alpha);
    }
    const working_real max_scaled = boost::multiprecision::isinf(m) ? working_real(0)
                                                                    : fp32_at(site::exponent_argument, m * c);
    for (std::size_t j = 0; j < bn; ++j) {
      const working_real argument =
          boost::multiprecision::isinf(s[j]) ? negative_infinity
          : kernel.unfused_scale             ? fp32_at(site::exponent_argument,
                                                       fp32_at(site::exponent_argument, s[j] * c) - max_scaled)
                                             : fp32_at(site::exponent_argument, s[j] * c - max_scaled);
      p[j] = ex2(argument);
    }
    // Thread t of the quad sums columns 8 nj + 2 t + {0, 1}; on later blocks
    // its first addition is FFMA(alpha, sum, p).
    for (std::size_t t = 0; t < 4; ++t)
      for (std::size_t nj = 0; nj < bn / 8; ++nj)
        for (std::size_t jj = 0; jj < 2; ++jj) {
          const working_real& x = p[nj * 8 + 2 * t + jj];
          if (nj + jj > 0) sums[t] = add(sums[t], x);
          else sums[t] = first ? x : fp32_at(site::row_sum, alpha * sums[t] + x);
        }
    for (working_real& x : p) x = kernel_at(site::p_to_bf16) ? detail::rounded_to<bf16>(x) : x;
    const std::size_t step = static_cast<std::size_t>(kernel.tensor_core.products_per_step);
    for (std::size_t chunk = 0; chunk < bn; chunk += 16)
      for (std::size_t col = 0; col < d; ++col)
        for (std::size_t k0 = chunk; k0 < chunk + 16; k0 += step) {
          const std::span<const working_real> a(p.data() + k0, step);
          const std::span<const bfloat16> b(row.v_by_column_.data() + col * padded + key0 + k0, step);
          if (kernel_at(site::pv_tensor_core)) {
            o[col] = detail::fused_step(kernel.tensor_core, a, b, o[col]);
          } else {
            for (std::size_t k = 0; k < step; ++k) o[col] += a[k] * detail::working_of(b[k]);
          }
        }
  }

  rounding_site_result out{{}, m, add(add(sums[0], sums[2]), add(sums[1], sums[3])), 0};
  // A row whose every key is masked has l = 0: the kernel multiplies by 1 and writes L = +inf.
  const bool degenerate = out.sum == 0;
  const working_real inverse = degenerate ? working_real(1) : fp32_at(site::normalization, 1 / out.sum);
  for (working_real& x : o) {
    if (!degenerate) x = kernel_at(site::normalization) ? detail::rounded_to<fp32>(x * inverse) : x / out.sum;
    if (kernel_at(site::output_bf16)) x = detail::rounded_to<bf16>(x);
  }
  out.o = std::move(o);
  const auto max32 = detail::held_by<fp32>(out.max), sum32 = detail::held_by<fp32>(out.sum);
  if (degenerate) {
    out.lse = std::numeric_limits<working_real>::infinity();
  } else if (kernel_at(site::row_sum) && max32 && sum32) {
    // The kernel's L = FFMA(m, scale, RN(lg2.approx(l) * ln 2)), as row_slab::log_sum_exp.
    const float32 log_sum = ptx::mul_f32(ptx::lg2_approx(*sum32), from_host(0.693147182f));
    out.lse = detail::working_of(ptx::fma_f32(*max32, kernel.scale, log_sum));
  } else {
    out.lse = out.max * detail::working_of(kernel.scale) + boost::multiprecision::log(out.sum);
  }
  return out;
}

// The sums over a row's elements of an error of O.
struct error_sums {
  working_real signed_sum;      // sum of (value - reference)
  working_real away_from_zero;  // sum of (value - reference) * sign(exact O): > 0 away from zero
};

// One row's O under the configurations that split its error by site.
struct row_attribution {
  std::vector<working_real> exact;   // every site exact
  std::vector<working_real> kernel;  // every site kernel: the emulator's O
  std::array<std::vector<working_real>, rounding_site_count> without;  // that site exact, the others kernel
  std::array<std::vector<working_real>, rounding_site_count> alone;    // that site kernel, the others exact

  error_sums difference(const std::vector<working_real>& value, const std::vector<working_real>& reference) const {
    error_sums sums{0, 0};
    for (std::size_t c = 0; c < exact.size(); ++c) {
      const working_real error = value[c] - reference[c];
      sums.signed_sum += error;
      sums.away_from_zero += exact[c] < 0 ? -error : exact[c] > 0 ? error : working_real(0);
    }
    return sums;
  }
  // The kernel's error: O minus the exact O.
  error_sums total() const { return difference(kernel, exact); }
  // What the site adds with every other site rounding: the kernel's O minus O with that site exact.
  error_sums contribution(rounding_site site) const { return difference(kernel, without[static_cast<std::size_t>(site)]); }
  // The site's error when it alone rounds.
  error_sums alone_error(rounding_site site) const { return difference(alone[static_cast<std::size_t>(site)], exact); }
  // The total minus the sum of the contributions: how far the sites' errors do not add.
  error_sums residual() const {
    error_sums rest = total();
    for (const rounding_site site : every_rounding_site) {
      const error_sums part = contribution(site);
      rest.signed_sum -= part.signed_sum;
      rest.away_from_zero -= part.away_from_zero;
    }
    return rest;
  }
};

// One row's attribution twice: of O before its conversion to bf16 (the
// output site exact in every configuration; its bf16 rounding would hide
// most fp32-sized errors) and of the bf16 O.
struct row_attributions {
  row_attribution fp32_output, bf16_output;
};

// The 2 + 2 x 8 configurations of one row with an fp32 output; since the
// output site is the last, each configuration's bf16 O is its fp32 O converted.
inline row_attributions attribute_row(const rounding_site_row& row) {
  const std::size_t output = static_cast<std::size_t>(rounding_site::output_bf16);
  const exact_sites unconverted = only_exact(rounding_site::output_bf16);
  const auto converted = [](std::vector<working_real> o) {
    for (working_real& x : o) x = detail::rounded_to<bf16>(x);
    return o;
  };
  row_attributions out;
  row_attribution& wide = out.fp32_output;
  row_attribution& narrow = out.bf16_output;
  wide.exact = row.run(exact_sites{}.set()).o;
  wide.kernel = row.run(unconverted).o;
  narrow.exact = wide.exact;
  narrow.kernel = converted(wide.kernel);
  for (const rounding_site site : every_rounding_site) {
    const std::size_t i = static_cast<std::size_t>(site);
    if (i == output) continue;
    wide.without[i] = row.run(unconverted | only_exact(site)).o;
    wide.alone[i] = row.run(only_kernel(site)).o;
    narrow.without[i] = converted(wide.without[i]);
    narrow.alone[i] = wide.alone[i];
  }
  wide.without[output] = wide.kernel;
  wide.alone[output] = wide.exact;
  narrow.without[output] = wide.kernel;
  narrow.alone[output] = converted(wide.exact);
  return out;
}

}  // namespace bitexact::attention
