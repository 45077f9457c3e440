// Platform policy kept apart from the arithmetic: which NaN an operation returns.
#pragma once

#include "environment.hpp"
#include "format.hpp"

namespace bitexact {

// A NaN moved into format R keeps its sign and the top of its payload and
// becomes quiet, as x86 conversions do.
template <format R, format F>
constexpr value<R> quieted_nan(value<F> x) {
  if constexpr (!R.has_infinity()) {
    return value<R>::default_nan(x.sign());
  } else {
    std::uint32_t payload = x.fraction();
    if constexpr (F.fraction_bits > R.fraction_bits) payload >>= F.fraction_bits - R.fraction_bits;
    else payload <<= R.fraction_bits - F.fraction_bits;
    const value<R> quiet = value<R>::default_nan(x.sign());
    return value<R>::from_bits(quiet.bits | payload);
  }
}

// The NaN result of an operation with at least one NaN operand: under IEEE
// propagation the first NaN operand, quieted (x86 SSE picks the first source
// operand whether it is signaling or quiet); under the canonical policy the
// one NaN CUDA produces. A signaling operand raises invalid either way.
template <format R, format... Fs>
constexpr value<R> propagate_nan(const environment& env, flags& raised, value<Fs>... operands) {
  if ((operands.is_signaling_nan() || ...)) raised.bits |= flags::invalid;
  if (env.nans == nan_policy::canonical) return value<R>::canonical_nan();
  value<R> result{};
  bool found = false;
  const auto take_first_nan = [&](auto x) {
    if (!found && x.is_nan()) {
      result = quieted_nan<R>(x);
      found = true;
    }
  };
  (take_first_nan(operands), ...);
  return result;
}

// Where an infinity results: the infinity, or, in E4M3FN, which has none, a
// NaN of that sign (OCP's non-saturating rule; canonical under CUDA's policy).
template <format R>
constexpr value<R> infinity_result(bool sign, const environment& env) {
  if constexpr (R.has_infinity()) return value<R>::infinity(sign);
  else return env.nans == nan_policy::canonical ? value<R>::canonical_nan() : value<R>::default_nan(sign);
}

// The NaN of an invalid operation on non-NaN operands (inf - inf, 0 * inf, ...).
template <format R>
constexpr value<R> invalid_result(const environment& env, flags& raised) {
  raised.bits |= flags::invalid;
  return env.nans == nan_policy::canonical ? value<R>::canonical_nan() : value<R>::default_nan(true);
}

}  // namespace bitexact
