// The rounding environment: what a caller chooses, and the flags an operation raises.
#pragma once

#include <cstdint>

namespace bitexact {

enum class rounding_mode : std::uint8_t {
  nearest_even,
  nearest_away,
  toward_zero,
  upward,
  downward,
  to_odd,      // truncate, then set the last bit if anything was lost
  stochastic,  // round up with probability (discarded part / ulp), from caller-supplied bits
};

enum class tininess : std::uint8_t { before_rounding, after_rounding };

// What a NaN result looks like. IEEE propagation keeps the first NaN operand's
// payload and quiets it, as x86 SSE does; a fresh NaN is the x86 default NaN.
// CUDA instead returns one canonical NaN (0x7FFFFFFF, 0x7FFF) whatever the inputs.
enum class nan_policy : std::uint8_t { ieee_propagate, canonical };

struct environment {
  rounding_mode rounding = rounding_mode::nearest_even;
  // x86 detects tininess after rounding (the default); ARM VFP/NEON before
  // (SoftFloat's ARM specialisations agree); CUDA's .ftz after (probe_alu).
  tininess tiny = tininess::after_rounding;
  bool flush_to_zero = false;                // subnormal results become zero of the same sign
  bool denormals_are_zero = false;           // subnormal operands are read as zero of the same sign
  nan_policy nans = nan_policy::ieee_propagate;
  // For rounding_mode::stochastic: the discarded bits, read as a fraction of
  // one ulp, are compared against these bits; supply fresh ones per operation.
  std::uint32_t random_bits = 0;

  friend constexpr bool operator==(const environment&, const environment&) = default;
};

// IEEE 754 exception flags, with TestFloat's bit values.
struct flags {
  static constexpr std::uint8_t inexact = 1, underflow = 2, overflow = 4, divide_by_zero = 8, invalid = 16;
  std::uint8_t bits = 0;

  constexpr bool any(std::uint8_t which) const { return (bits & which) != 0; }
  constexpr flags& operator|=(flags other) {
    bits |= other.bits;
    return *this;
  }
  friend constexpr bool operator==(flags, flags) = default;
};

}  // namespace bitexact
