// Integer helpers for significands: counting, and shifting with a sticky bit.
#pragma once

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

namespace bitexact {

__extension__ using uint128 = unsigned __int128;  // __extension__: no -Wpedantic warning in users' builds

// For the small steps of every operation (split, decide, round, unpack): they
// pay off only inlined into the operation, where the compiler can drop what an
// absent observer never reads, and GCC's size heuristics otherwise keep them
// out of line (measured in bench/: several times slower).
#if defined(__GNUC__)
#define BITEXACT_INLINE [[gnu::always_inline]] inline
#else
#define BITEXACT_INLINE inline
#endif

// A precondition that prose alone would leave undefined: in constant
// evaluation a violation is a compile error (the non-constexpr function below
// is called); at run time it is an assert, so Release builds pay nothing.
[[noreturn]] inline void precondition_violated(const char* message) {
  std::fprintf(stderr, "bitexact: precondition violated: %s\n", message);
  std::abort();
}
#ifdef NDEBUG
#define BITEXACT_EXPECTS(condition, message) \
  (std::is_constant_evaluated() && !(condition) ? ::bitexact::precondition_violated(message) : void())
#else
#define BITEXACT_EXPECTS(condition, message) ((condition) ? void() : ::bitexact::precondition_violated(message))
#endif

// std::bit_cast through the builtin that implements it in GCC and Clang: the
// libc++ of Debian 12's emscripten (3.1.6), which builds the page in web/, has
// no std::bit_cast.
template <class To, class From>
  requires(sizeof(To) == sizeof(From) && std::is_trivially_copyable_v<To> && std::is_trivially_copyable_v<From>)
constexpr To bit_cast(const From& from) noexcept {
  return __builtin_bit_cast(To, from);
}

constexpr int msb_index(std::uint64_t x) { return 63 - std::countl_zero(x); }
// For x known to be nonzero: one bsr, where countl_zero adds a test for zero.
constexpr int leading_zeros_nonzero(std::uint64_t x) {
#if defined(__GNUC__)
  return __builtin_clzll(x);
#else
  return std::countl_zero(x);
#endif
}
constexpr int msb_index(uint128 x) {
  const auto high = static_cast<std::uint64_t>(x >> 64);
  return high ? 64 + msb_index(high) : msb_index(static_cast<std::uint64_t>(x));
}

// Shift right and OR every bit shifted out into bit 0 ("jam"), so that later
// rounding still sees that the value was not exact.
template <class Unsigned>
constexpr Unsigned shift_right_jam(Unsigned x, int count) {
  constexpr int width = sizeof(Unsigned) * 8;
  if (count <= 0) return x;
  if (count >= width) return x != 0;
  const Unsigned lost = x & ((Unsigned{1} << count) - 1);
  return (x >> count) | (lost != 0);
}

}  // namespace bitexact
