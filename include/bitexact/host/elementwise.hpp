// Operations over whole buffers: out[i] = a[i] + b[i] (sub_each, mul_each
// alike), each element rounded exactly as the single operation rounds it,
// and the flags of all elements ORed into one result, the way IEEE's sticky
// flags collect them. Checking a kernel's output buffer needs no more, and a
// buffer goes several times faster than a call per element: under
// nearest-even, on x86-64, the host forms four exact results at a time in
// SSE2 lanes (as exact_double.hpp does for one), round_nearest_even rounds them
// in the same lanes, and the inexact flag is one OR over the whole buffer
// instead of a flags byte per element. Elements the lanes do not take go one
// by one through the single operation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../core/environment.hpp"
#include "../core/exact_double.hpp"
#include "../core/format.hpp"
#include "../core/observer.hpp"
#include "../core/operations.hpp"
#include "../core/round.hpp"

#if defined(__SSE2__) && defined(__GNUC__)
#include <emmintrin.h>
#define BITEXACT_HOST_LANES 1
#else
#define BITEXACT_HOST_LANES 0
#endif

namespace bitexact {
namespace detail {

template <class T>
struct format_of_value {
  static_assert(sizeof(T) == 0, "add_each, sub_each and mul_each take ranges of bitexact values (value<F>)");
};
template <format F>
struct format_of_value<value<F>> {
  static constexpr format fmt = F;
};
template <class Span>
inline constexpr format element_format = format_of_value<std::remove_cv_t<typename Span::element_type>>::fmt;

template <operation Op, format R, format A, format B, class O>
BITEXACT_INLINE constexpr rounded<R> apply_one(value<A> x, value<B> y, const environment& env, O& obs) {
  if constexpr (Op == operation::add) return add<R>(x, y, env, obs);
  else if constexpr (Op == operation::sub) return sub<R>(x, y, env, obs);
  else return mul<R>(x, y, env, obs);
}

template <operation Op, format R, format A, format B, class O>
constexpr flags one_by_one(const value<A>* a, const value<B>* b, value<R>* out, std::size_t first, std::size_t last,
                           const environment& env, O& obs) {
  flags raised;
  for (std::size_t i = first; i < last; ++i) {
    const rounded<R> r = apply_one<Op, R>(a[i], b[i], env, obs);
    out[i] = r.result;
    raised |= r.raised;
  }
  return raised;
}

#if BITEXACT_HOST_LANES
// Formats whose bit patterns widen to fp32's by a shift (bf16, tf32, fp32),
// stored in 16 or 32 bits.
template <format F>
inline constexpr bool widens_to_fp32 = F.exponent_bits == 8 && (sizeof(value<F>) == 4 || F.width() == 16);

template <format R, format A, format B>
inline constexpr bool lanes_take = widens_to_fp32<A> && widens_to_fp32<B> && widens_to_fp32<R>;

using u64x2 = std::uint64_t __attribute__((vector_size(16)));
using u32x4 = std::uint32_t __attribute__((vector_size(16)));

// Four operands of F as fp32 bit patterns, by exact_double's fp32_pattern.
template <format F>
BITEXACT_INLINE __m128i load_as_fp32(const value<F>* x) {
  __m128i patterns;
  if constexpr (sizeof(value<F>) == 4)
    patterns = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x));
  else  // 16-bit patterns, zero-extended into 32-bit lanes
    patterns = _mm_unpacklo_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x)), _mm_setzero_si128());
  return reinterpret_cast<__m128i>(fp32_pattern<F>(reinterpret_cast<u32x4>(patterns)));
}

template <format F>
BITEXACT_INLINE void store_patterns(value<F>* out, __m128i patterns) {
  if constexpr (sizeof(value<F>) == 4) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), patterns);
  } else {
    // Sign-extend each 16-bit pattern so that the signed pack keeps it.
    const __m128i extended = _mm_srai_epi32(_mm_slli_epi32(patterns, 16), 16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packs_epi32(extended, extended));
  }
}

// Lanes whose 32-bit value lies outside [low, high], as all-ones: x - low
// above high - low unsigned, which SSE2 compares signed once both sides are
// moved down by 2^31 (one addition and one compare).
BITEXACT_INLINE __m128i outside(__m128i x, std::int32_t low, std::int32_t high) {
  const auto moved = [](std::uint32_t v) { return static_cast<std::int32_t>(v ^ 0x80000000u); };
  return _mm_cmpgt_epi32(_mm_add_epi32(x, _mm_set1_epi32(moved(-static_cast<std::uint32_t>(low)))),
                         _mm_set1_epi32(moved(static_cast<std::uint32_t>(high) - static_cast<std::uint32_t>(low))));
}

// Whether all four sums or products are exact in doubles, by the test of
// add_fast and mul_fast on fp32 patterns: both operands normal, and for a sum
// their exponents at most 52 - p apart (p the larger operand precision). The
// operands are tested before the host sees them: a NaN or infinity would
// raise a host flag.
template <operation Op, format A, format B>
BITEXACT_INLINE bool exact_in_doubles(__m128i x, __m128i y) {
  constexpr std::int32_t unit = 1 << 23, max_field = 254 * unit;
  const __m128i exponent_mask = _mm_set1_epi32(0x7F800000);
  const __m128i x_field = _mm_and_si128(x, exponent_mask), y_field = _mm_and_si128(y, exponent_mask);
  __m128i refused;
  if constexpr (Op == operation::mul) {
    refused = _mm_or_si128(outside(x_field, unit, max_field), outside(y_field, unit, max_field));
  } else {
    // The window of the operand with more fraction bits (both have fp32's
    // exponent range), on fp32 exponent fields.
    using window = exact_sum_window<(A.fraction_bits > B.fraction_bits ? A : B)>;
    constexpr std::int32_t far_apart = window::far_apart;
    refused = _mm_or_si128(outside(x_field, (window::lowest_exponent + fp32.bias()) * unit,
                                   (window::highest_exponent + fp32.bias()) * unit),
                           outside(_mm_sub_epi32(x_field, y_field), -far_apart * unit, far_apart * unit));
  }
  return _mm_movemask_epi8(refused) == 0;
}

// Whether four exact doubles, given by their upper halves, are normal in R
// and below its top binade, where rounding up could overflow. Zero and
// subnormal results, and those near overflow, go one by one.
template <format R>
BITEXACT_INLINE bool normal_below_top_binade(__m128i upper_halves) {
  constexpr auto upper_half_of_power = [](int exponent) {
    return (exponent + double_bias) << (double_fraction_bits - 32);
  };
  const __m128i magnitude = _mm_and_si128(upper_halves, _mm_set1_epi32(0x7FFFFFFF));
  return _mm_movemask_epi8(outside(magnitude, upper_half_of_power(R.min_exponent()),
                                   upper_half_of_power(R.max_exponent()) - 1)) == 0;
}

// Round two exact doubles into R's magnitude patterns (in their lanes' low
// 32 bits), as double_as_extended and round_extended round one, and OR their
// doubled patterns into any_discarded, whose low extra_bits collect every
// discarded bit.
template <format R>
BITEXACT_INLINE __m128 round_nearest_even_lanes(__m128d exact, u64x2& any_discarded) {
  using pattern = double_as_extended<R>;
  const u64x2 doubled = reinterpret_cast<u64x2>(_mm_castpd_si128(exact)) << 1;
  any_discarded |= doubled;
  const u64x2 magnitude = round_nearest_even<pattern::extra_bits>(doubled - pattern::rebias, u64x2{});
  return _mm_castsi128_ps(reinterpret_cast<__m128i>(magnitude));
}

// The same for a format whose last bit and guard bit lie in a double's upper
// half (bf16, tf32), four at a time in 32-bit lanes: the magnitude of the
// upper half, rebiased, is R's extended pattern with 20 - R.fraction_bits
// extra bits, and a nonzero lower half is a sticky bit below them.
template <format R>
inline constexpr bool rounds_in_upper_halves = R.fraction_bits < double_fraction_bits - 32;

template <format R>
BITEXACT_INLINE __m128i round_nearest_even_upper_halves(__m128i upper_halves, __m128i lower_halves,
                                                        u32x4& any_upper, u32x4& any_lower) {
  constexpr int extra_bits = double_fraction_bits - 32 - R.fraction_bits;
  constexpr std::uint32_t rebias = static_cast<std::uint32_t>(double_bias - R.bias()) << (double_fraction_bits - 32);
  const u32x4 upper = reinterpret_cast<u32x4>(upper_halves), lower = reinterpret_cast<u32x4>(lower_halves);
  any_upper |= upper;
  any_lower |= lower;
  const u32x4 sticky = reinterpret_cast<u32x4>(lower != 0) & 1;
  return reinterpret_cast<__m128i>(round_nearest_even<extra_bits>((upper & 0x7FFFFFFF) - rebias, sticky));
}

template <operation Op>
BITEXACT_INLINE __m128d exact_operation(__m128d x, __m128d y) {
  if constexpr (Op == operation::mul) return _mm_mul_pd(x, y);
  else return _mm_add_pd(x, y);  // sub arrives with y negated
}

template <operation Op, format R, format A, format B>
flags nearest_even_in_lanes(const value<A>* a, const value<B>* b, value<R>* out, std::size_t count,
                            const environment& env) {
  no_observer none;
  flags raised;
  u64x2 any_discarded{};  // wide results: OR of the doubled patterns
  u32x4 any_upper{}, any_lower{};  // narrow results: OR of the upper and the lower halves
  const __m128i sign_bit = _mm_set1_epi32(static_cast<std::int32_t>(0x80000000u));
  std::size_t i = 0;
  for (; i + 4 <= count; i += 4) {
    const __m128i x = load_as_fp32<A>(a + i);
    __m128i y = load_as_fp32<B>(b + i);
    if constexpr (Op == operation::sub) y = _mm_xor_si128(y, sign_bit);
    if (!exact_in_doubles<Op, A, B>(x, y)) [[unlikely]] {
      raised |= one_by_one<Op, R>(a, b, out, i, i + 4, env, none);
      continue;
    }
    const __m128 x_float = _mm_castsi128_ps(x), y_float = _mm_castsi128_ps(y);
    const __m128d low = exact_operation<Op>(_mm_cvtps_pd(x_float), _mm_cvtps_pd(y_float));
    const __m128d high = exact_operation<Op>(_mm_cvtps_pd(_mm_movehl_ps(x_float, x_float)),
                                             _mm_cvtps_pd(_mm_movehl_ps(y_float, y_float)));
    const __m128i upper_halves =
        _mm_castps_si128(_mm_shuffle_ps(_mm_castpd_ps(low), _mm_castpd_ps(high), _MM_SHUFFLE(3, 1, 3, 1)));
    if (!normal_below_top_binade<R>(upper_halves)) [[unlikely]] {
      raised |= one_by_one<Op, R>(a, b, out, i, i + 4, env, none);
      continue;
    }
    __m128i magnitudes;
    if constexpr (rounds_in_upper_halves<R>) {
      const __m128i lower_halves =
          _mm_castps_si128(_mm_shuffle_ps(_mm_castpd_ps(low), _mm_castpd_ps(high), _MM_SHUFFLE(2, 0, 2, 0)));
      magnitudes = round_nearest_even_upper_halves<R>(upper_halves, lower_halves, any_upper, any_lower);
    } else {
      magnitudes = _mm_castps_si128(_mm_shuffle_ps(round_nearest_even_lanes<R>(low, any_discarded),
                                                   round_nearest_even_lanes<R>(high, any_discarded),
                                                   _MM_SHUFFLE(2, 0, 2, 0)));
    }
    const __m128i signs = _mm_srli_epi32(_mm_and_si128(upper_halves, sign_bit), 32 - R.width());
    store_patterns<R>(out + i, _mm_or_si128(magnitudes, signs));
  }
  raised |= one_by_one<Op, R>(a, b, out, i, count, env, none);
  bool inexact;
  if constexpr (rounds_in_upper_halves<R>) {
    constexpr std::uint32_t discarded_mask = (1u << (double_fraction_bits - 32 - R.fraction_bits)) - 1;
    const u32x4 discarded = (any_upper & discarded_mask) | any_lower;
    inexact = (discarded[0] | discarded[1] | discarded[2] | discarded[3]) != 0;
  } else {
    constexpr std::uint64_t discarded_mask = (std::uint64_t{1} << double_as_extended<R>::extra_bits) - 1;
    inexact = ((any_discarded[0] | any_discarded[1]) & discarded_mask) != 0;
  }
  if (inexact) raised.bits |= flags::inexact;
  return raised;
}
#endif

template <operation Op, format R, class InA, class InB, class Out, class O>
constexpr flags each(const char* name, const InA& a_range, const InB& b_range, Out& out_range, const environment& env,
                     O& obs) {
  const std::span a{a_range};
  const std::span b{b_range};
  const std::span out{out_range};
  constexpr format A = element_format<decltype(a)>, B = element_format<decltype(b)>;
  constexpr format Rf = pick_result_format<R, A, B>();
  static_assert(std::is_same_v<typename decltype(out)::element_type, value<Rf>>,
                "the output buffer must hold writable values of the result format");
  if (a.size() != b.size() || out.size() != a.size())
    throw std::invalid_argument(std::string(name) + ": the buffers differ in length (a " + std::to_string(a.size()) +
                                ", b " + std::to_string(b.size()) + ", out " + std::to_string(out.size()) + ")");
#if BITEXACT_HOST_LANES
  if constexpr (lanes_take<Rf, A, B>)
    if (!std::is_constant_evaluated() && !is_listening(obs) && env.rounding == rounding_mode::nearest_even)
      return nearest_even_in_lanes<Op, Rf>(a.data(), b.data(), out.data(), a.size(), env);
#endif
  return one_by_one<Op, Rf>(a.data(), b.data(), out.data(), 0, a.size(), env, obs);
}

}  // namespace detail

// out[i] = a[i] + b[i] for every i; returns the OR of every element's flags.
// a, b and out are contiguous ranges of values (std::vector, std::array,
// std::span) of one length; out holds the result format, which is the
// operands' own unless named first, as for add. out may be a or b itself
// (in place), but must not otherwise overlap them. Every element is rounded
// under env as given: stochastic rounding reads the same env.random_bits for
// each (call add per element for fresh bits). An observer sees every
// element's events in order.
template <format R = same_format, class InA, class InB, class Out, class O = no_observer>
constexpr flags add_each(const InA& a, const InB& b, Out&& out, const environment& env = {}, O&& obs = {}) {
  return detail::each<operation::add, R>("add_each", a, b, out, env, obs);
}

template <format R = same_format, class InA, class InB, class Out, class O = no_observer>
constexpr flags sub_each(const InA& a, const InB& b, Out&& out, const environment& env = {}, O&& obs = {}) {
  return detail::each<operation::sub, R>("sub_each", a, b, out, env, obs);
}

template <format R = same_format, class InA, class InB, class Out, class O = no_observer>
constexpr flags mul_each(const InA& a, const InB& b, Out&& out, const environment& env = {}, O&& obs = {}) {
  return detail::each<operation::mul, R>("mul_each", a, b, out, env, obs);
}

}  // namespace bitexact
