// FNV-1a 64, the checksum of every file the project writes and reads (the
// MUFU tables in data/, the GPU captures in tests/data/): one definition for
// the library, the tests and the tools. Its offset basis is not the standard
// 14695981039346656037 but 1469598103934665603, that number without its last
// digit: the first capture writer had it so, and every checksum shipped since
// was made with it. A standard FNV-1a 64 tool gives other values; the prime
// is the standard one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bitexact {

inline constexpr std::uint64_t fnv1a64_offset_basis = 1469598103934665603ull;

// Continues a hash over count bytes; start from fnv1a64_offset_basis.
constexpr std::uint64_t fnv1a64(const unsigned char* bytes, std::size_t count,
                                std::uint64_t hash = fnv1a64_offset_basis) {
  for (std::size_t i = 0; i < count; ++i) {
    hash ^= bytes[i];
    hash *= 1099511628211ull;
  }
  return hash;
}

// The hash of 32-bit values written as little-endian bytes, whatever the host's byte order.
constexpr std::uint64_t fnv1a64_of_values(const std::uint32_t* values, std::size_t count) {
  std::uint64_t hash = fnv1a64_offset_basis;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint32_t value = values[i];
    const unsigned char little_endian[4] = {static_cast<unsigned char>(value), static_cast<unsigned char>(value >> 8),
                                            static_cast<unsigned char>(value >> 16),
                                            static_cast<unsigned char>(value >> 24)};
    hash = fnv1a64(little_endian, 4, hash);
  }
  return hash;
}

}  // namespace bitexact
