// Binary floating-point formats and their bit layouts.
#pragma once

#include <bit>
#include <compare>
#include <cstdint>
#include <type_traits>

#include "bits.hpp"

namespace bitexact {

// How the all-ones exponent field is used. IEEE formats spend it on Inf and
// NaN; OCP E4M3FN keeps it for finite values except the one pattern with an
// all-ones fraction, which is NaN, and has no infinities.
enum class special_encoding : std::uint8_t { ieee, fn_no_infinity };

struct format {
  int exponent_bits = 0;
  int fraction_bits = 0;
  special_encoding specials = special_encoding::ieee;

  constexpr int width() const { return 1 + exponent_bits + fraction_bits; }
  constexpr int precision() const { return fraction_bits + 1; }
  constexpr int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  constexpr int max_biased_exponent() const { return (1 << exponent_bits) - 1; }
  // Unbiased exponent of the smallest normal and of the largest finite value.
  constexpr int min_exponent() const { return 1 - bias(); }
  constexpr int max_exponent() const {
    return specials == special_encoding::ieee ? bias() : max_biased_exponent() - bias();
  }
  constexpr bool has_infinity() const { return specials == special_encoding::ieee; }

  friend constexpr bool operator==(const format&, const format&) = default;
};

inline constexpr format fp32{8, 23};
inline constexpr format bf16{8, 7};
inline constexpr format fp16{5, 10};
inline constexpr format tf32{8, 10};  // a 19-bit value in the low bits of its storage
inline constexpr format e5m2{5, 2};
inline constexpr format e4m3{4, 3, special_encoding::fn_no_infinity};  // OCP E4M3FN, max 448

template <format F>
using storage_t = std::conditional_t<F.width() <= 8, std::uint8_t,
                  std::conditional_t<F.width() <= 16, std::uint16_t, std::uint32_t>>;

// A number of format F, held as its bit pattern.
template <format F>
struct value {
  static_assert(F.exponent_bits >= 2 && F.exponent_bits <= 8, "exponent fields of 2 to 8 bits are supported");
  static_assert(F.fraction_bits >= 1 && F.fraction_bits <= 23, "fraction fields of 1 to 23 bits are supported");
  using storage = storage_t<F>;
  static constexpr format fmt = F;

  storage bits = 0;

  static constexpr value from_bits(std::uint32_t pattern) { return {static_cast<storage>(pattern & mask())}; }
  static constexpr std::uint32_t mask() { return F.width() == 32 ? 0xFFFFFFFFu : (1u << F.width()) - 1; }
  static constexpr std::uint32_t fraction_mask() { return (1u << F.fraction_bits) - 1; }

  constexpr bool sign() const { return (bits >> (F.width() - 1)) & 1; }
  constexpr std::uint32_t biased_exponent() const {
    return (std::uint32_t{bits} >> F.fraction_bits) & static_cast<std::uint32_t>(F.max_biased_exponent());
  }
  constexpr std::uint32_t fraction() const { return bits & fraction_mask(); }

  constexpr bool is_nan() const {
    if (biased_exponent() != static_cast<std::uint32_t>(F.max_biased_exponent())) return false;
    return F.has_infinity() ? fraction() != 0 : fraction() == fraction_mask();
  }
  constexpr bool is_inf() const {
    return F.has_infinity() && biased_exponent() == static_cast<std::uint32_t>(F.max_biased_exponent()) &&
           fraction() == 0;
  }
  constexpr bool is_zero() const { return (bits & (mask() >> 1)) == 0; }
  constexpr bool is_subnormal() const { return biased_exponent() == 0 && fraction() != 0; }
  constexpr bool is_finite() const { return !is_nan() && !is_inf(); }
  // A quiet NaN has the top fraction bit set (the x86 and ARM convention).
  constexpr bool is_signaling_nan() const {
    return F.has_infinity() && is_nan() && !((fraction() >> (F.fraction_bits - 1)) & 1);
  }

  static constexpr value zero(bool negative = false) { return from_bits(std::uint32_t{negative} << (F.width() - 1)); }
  static constexpr value infinity(bool negative = false) {
    static_assert(F.has_infinity(), "this format has no infinity");
    return from_bits((std::uint32_t{negative} << (F.width() - 1)) |
                     (static_cast<std::uint32_t>(F.max_biased_exponent()) << F.fraction_bits));
  }
  static constexpr value max_finite(bool negative = false) {
    const std::uint32_t magnitude =
        F.has_infinity() ? ((static_cast<std::uint32_t>(F.max_biased_exponent()) << F.fraction_bits) - 1)
                         : ((static_cast<std::uint32_t>(F.max_biased_exponent()) << F.fraction_bits) |
                            (fraction_mask() - 1));
    return from_bits((std::uint32_t{negative} << (F.width() - 1)) | magnitude);
  }
  // The quiet NaN that a fresh invalid operation produces: the default NaN of
  // x86 (sign set, top fraction bit) for IEEE formats, the only NaN for E4M3FN.
  static constexpr value default_nan(bool negative) {
    const std::uint32_t fraction = F.has_infinity() ? 1u << (F.fraction_bits - 1) : fraction_mask();
    return from_bits((std::uint32_t{negative} << (F.width() - 1)) |
                     (static_cast<std::uint32_t>(F.max_biased_exponent()) << F.fraction_bits) | fraction);
  }
  // CUDA's canonical NaN: sign clear, every fraction bit set (0x7FFFFFFF, 0x7FFF).
  static constexpr value canonical_nan() {
    return from_bits((static_cast<std::uint32_t>(F.max_biased_exponent()) << F.fraction_bits) | fraction_mask());
  }

  constexpr value operator-() const { return from_bits(bits ^ (1u << (F.width() - 1))); }
  constexpr value abs() const { return from_bits(bits & (mask() >> 1)); }
  friend constexpr bool operator==(value, value) = default;  // bit equality, not IEEE equality
};

using float32 = value<fp32>;
using bfloat16 = value<bf16>;
using float16 = value<fp16>;
using tfloat32 = value<tf32>;
using float8_e5m2 = value<e5m2>;
using float8_e4m3 = value<e4m3>;

constexpr float32 from_host(float x) { return {bit_cast<std::uint32_t>(x)}; }
constexpr float to_host(float32 x) { return bit_cast<float>(x.bits); }

}  // namespace bitexact
