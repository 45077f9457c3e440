// Platform policy kept apart from the arithmetic, as SoftFloat keeps it in
// specialize.h: which NaN an operation returns, what an infinite result is in
// a format without infinities, what a conversion to an integer returns when it
// cannot, and which rule wins where IEEE 754 lets the platform choose. The
// arithmetic in operations.hpp never spells these out; a new platform is a
// new version of this header (or a new environment choice), not edits there.
//
// The rules here are x86 SSE's (the host's, checked against it in
// tests/test_proof_fp32.cpp), with CUDA's canonical NaN selected by
// environment::nans and OCP's non-saturating rules for E4M3FN.
#pragma once

#include <cstdint>
#include <limits>

#include "bits.hpp"
#include "environment.hpp"
#include "format.hpp"

namespace bitexact {

// A NaN in no particular format: its sign and its payload, the fraction bits
// left-aligned at bit 63 (so the quiet bit is bit 63). Every NaN that moves
// between formats, doubles included, goes through this form, one path for
// every pair (SoftFloat's commonNaN).
struct common_nan {
  bool sign = false;
  std::uint64_t payload = 0;
};

template <format F>
constexpr common_nan to_common_nan(value<F> x) {
  return {x.sign(), std::uint64_t{x.fraction()} << (64 - F.fraction_bits)};
}

// A NaN of R with the top of the payload, quiet, as x86 conversions make it.
// E4M3FN has one NaN per sign.
template <format R>
constexpr value<R> quiet_nan_from_common(common_nan nan) {
  const value<R> quiet = value<R>::default_nan(nan.sign);
  if constexpr (!R.has_infinity()) return quiet;
  else return value<R>::from_bits(quiet.bits | static_cast<std::uint32_t>(nan.payload >> (64 - R.fraction_bits)));
}

// The NaN result when a NaN operand (given in common form) decides it: that
// NaN quieted under IEEE propagation, CUDA's one NaN under the canonical policy.
template <format R>
constexpr value<R> nan_operand_result(const environment& env, common_nan first_nan) {
  if (env.nans == nan_policy::canonical) return value<R>::canonical_nan();
  return quiet_nan_from_common<R>(first_nan);
}

// The NaN result of an operation with at least one NaN operand: under IEEE
// propagation the first NaN operand, quieted (x86 SSE picks the first source
// operand whether it is signaling or quiet). A signaling operand raises
// invalid either way.
template <format R, format... Fs>
BITEXACT_INLINE constexpr value<R> propagate_nan(const environment& env, flags& raised, value<Fs>... operands) {
  if ((operands.is_signaling_nan() || ...)) raised.bits |= flags::invalid;
  common_nan first{};
  bool found = false;
  const auto take_first_nan = [&](auto x) {
    if (!found && x.is_nan()) {
      first = to_common_nan(x);
      found = true;
    }
  };
  (take_first_nan(operands), ...);
  return nan_operand_result<R>(env, first);
}

// Where an infinity results (overflow, division by zero): the infinity, or,
// in E4M3FN, which has none, a NaN of that sign (OCP's non-saturating rule;
// canonical under CUDA's policy).
template <format R>
constexpr value<R> infinity_result(bool sign, const environment& env) {
  if constexpr (R.has_infinity()) return value<R>::infinity(sign);
  else return env.nans == nan_policy::canonical ? value<R>::canonical_nan() : value<R>::default_nan(sign);
}

// An exact infinite result that an infinite operand decides (inf + x, inf * x,
// inf / x, sqrt(inf), a conversion): in a format without infinities the NaN of
// infinity_result, and the operation is invalid.
template <format R>
BITEXACT_INLINE constexpr value<R> infinite_operand_result(bool sign, const environment& env, flags& raised) {
  if constexpr (!R.has_infinity()) raised.bits |= flags::invalid;
  return infinity_result<R>(sign, env);
}

// The NaN of an invalid operation on non-NaN operands (inf - inf, 0 * inf, ...):
// x86's default NaN (sign set), or CUDA's canonical one.
template <format R>
BITEXACT_INLINE constexpr value<R> invalid_result(const environment& env, flags& raised) {
  raised.bits |= flags::invalid;
  return env.nans == nan_policy::canonical ? value<R>::canonical_nan() : value<R>::default_nan(true);
}

// fma(0, inf, NaN) and fma(inf, 0, NaN): a NaN operand decides the result
// before the invalid product is looked at, as x86's vfmadd does (it raises
// nothing for a quiet NaN; host SSE sweep). IEEE 754 leaves the choice open.
inline constexpr bool fma_nan_operand_before_invalid_product = true;

// The integer a conversion returns for NaN, infinity or a value out of range,
// with the invalid flag: x86's "integer indefinite".
inline constexpr std::int64_t invalid_integer_result = std::numeric_limits<std::int64_t>::min();

}  // namespace bitexact
