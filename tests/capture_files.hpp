// The replay files in tests/data: real GPU results cut down from the full
// captures (cuda/capture) by tools/make_test_data.cpp. One layout serves
// every file, little-endian:
//
//   char magic[8] = "BXDATA1\0"
//   u32  kind;              // 1: tensor-core tiles, 2: one section of scalar instructions
//   u32  provenance_bytes;
//   u64  payload_bytes;
//   u64  payload_fnv1a64;   // FNV-1a 64 of the payload bytes
//   char provenance[provenance_bytes];  // text: GPU, driver, CUDA, date, the commands
//   payload:
//     kind 1: u32 variant, M, N, K, tiles, acc_bytes;
//             per tile: u32 class, u32 index in the full capture,
//                       u16 A[M][K], u16 B[K][N], C[M][N], D[M][N] (acc_bytes each), row-major
//     kind 2: char name[48]; u32 count; u32 arrays;
//             per array: char name[40]; u32 element_bytes; u32 is_input;
//             then each array's count*element_bytes bytes, in the order listed
//
// The reader throws std::runtime_error saying what is wrong, so that a test
// fails with the reason rather than replaying garbage.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace test_data {

inline constexpr char magic[8] = "BXDATA1";
enum class kind : std::uint32_t { mma_tiles = 1, scalar_section = 2 };
inline constexpr std::size_t header_bytes = 8 + 4 + 4 + 8 + 8;

constexpr std::uint64_t fnv1a64(const unsigned char* bytes, std::size_t n) {
  std::uint64_t hash = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i) {
    hash ^= bytes[i];
    hash *= 1099511628211ull;
  }
  return hash;
}

// Little-endian reads from a byte buffer, refusing to run past its end.
class cursor {
 public:
  cursor(const std::vector<unsigned char>& bytes, std::size_t at, std::string what)
      : bytes_(bytes), at_(at), what_(std::move(what)) {}
  const unsigned char* take(std::size_t n) {
    if (n > bytes_.size() - at_) throw std::runtime_error(what_ + ": truncated (needs " + std::to_string(n) +
                                                          " more bytes at offset " + std::to_string(at_) + ")");
    const unsigned char* p = bytes_.data() + at_;
    at_ += n;
    return p;
  }
  std::uint32_t u32() { return static_cast<std::uint32_t>(little_endian(take(4), 4)); }
  std::uint64_t u64() { return little_endian(take(8), 8); }
  std::string text(std::size_t width) {
    const char* p = reinterpret_cast<const char*>(take(width));
    return std::string(p, strnlen(p, width));
  }
  std::size_t at() const { return at_; }
  static std::uint64_t little_endian(const unsigned char* p, std::size_t n) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v |= std::uint64_t{p[i]} << (8 * i);
    return v;
  }

 private:
  const std::vector<unsigned char>& bytes_;
  std::size_t at_;
  std::string what_;
};

struct file {
  std::string path;
  kind type;
  std::string provenance;
  std::vector<unsigned char> bytes;  // the whole file; the payload starts at payload_offset
  std::size_t payload_offset;
  cursor payload() const { return cursor(bytes, payload_offset, path); }
};

// Parses the header and verifies the checksum of a file's bytes.
inline file parse(std::vector<unsigned char> bytes, const std::string& path) {
  file f{path, kind::mma_tiles, {}, std::move(bytes), 0};
  cursor c(f.bytes, 0, path);
  if (std::memcmp(c.take(8), magic, 8) != 0) throw std::runtime_error(path + ": not a bitexact test-data file (magic)");
  f.type = static_cast<kind>(c.u32());
  if (f.type != kind::mma_tiles && f.type != kind::scalar_section) throw std::runtime_error(path + ": unknown kind");
  const std::uint32_t provenance_bytes = c.u32();
  const std::uint64_t payload_bytes = c.u64(), checksum = c.u64();
  f.provenance = std::string(reinterpret_cast<const char*>(c.take(provenance_bytes)), provenance_bytes);
  f.payload_offset = c.at();
  if (f.bytes.size() - f.payload_offset != payload_bytes)
    throw std::runtime_error(path + ": payload is " + std::to_string(f.bytes.size() - f.payload_offset) +
                             " bytes, the header says " + std::to_string(payload_bytes));
  const std::uint64_t actual = fnv1a64(f.bytes.data() + f.payload_offset, payload_bytes);
  if (actual != checksum) {
    char message[160];
    std::snprintf(message, sizeof message, ": checksum mismatch (header %016llx, payload %016llx): file corrupt",
                  static_cast<unsigned long long>(checksum), static_cast<unsigned long long>(actual));
    throw std::runtime_error(path + message);
  }
  return f;
}

inline file load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open (regenerate with tools/make_test_data.cpp, tests/data/README.md)");
  return parse(std::vector<unsigned char>(std::istreambuf_iterator<char>(in), {}), path);
}

// Kind 1: tensor-core tiles, D = A * B + C.
struct mma_tiles {
  std::uint32_t variant, m, n, k, acc_bytes;
  struct tile {
    std::uint32_t tile_class, source_index;
    std::vector<std::uint16_t> a;    // [m][k]
    std::vector<std::uint16_t> b;    // [k][n]
    std::vector<std::uint32_t> c, d;  // [m][n], fp16 accumulators in the low half
  };
  std::vector<tile> tiles;
};

inline mma_tiles read_mma(const file& f) {
  if (f.type != kind::mma_tiles) throw std::runtime_error(f.path + ": not a tensor-core file");
  cursor c = f.payload();
  mma_tiles t{};
  t.variant = c.u32();
  t.m = c.u32();
  t.n = c.u32();
  t.k = c.u32();
  const std::uint32_t count = c.u32();
  t.acc_bytes = c.u32();
  if (t.m % 16 || t.n != 8 || t.k != 16 || (t.acc_bytes != 2 && t.acc_bytes != 4))
    throw std::runtime_error(f.path + ": unexpected tile shape");
  auto read_u16s = [&](std::size_t n) {
    std::vector<std::uint16_t> v(n);
    const unsigned char* p = c.take(2 * n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint16_t>(cursor::little_endian(p + 2 * i, 2));
    return v;
  };
  auto read_accumulators = [&](std::size_t n) {
    std::vector<std::uint32_t> v(n);
    const unsigned char* p = c.take(t.acc_bytes * n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint32_t>(cursor::little_endian(p + t.acc_bytes * i, t.acc_bytes));
    return v;
  };
  for (std::uint32_t i = 0; i < count; ++i) {
    mma_tiles::tile tile;
    tile.tile_class = c.u32();
    tile.source_index = c.u32();
    tile.a = read_u16s(std::size_t{t.m} * t.k);
    tile.b = read_u16s(std::size_t{t.k} * t.n);
    tile.c = read_accumulators(std::size_t{t.m} * t.n);
    tile.d = read_accumulators(std::size_t{t.m} * t.n);
    t.tiles.push_back(std::move(tile));
  }
  return t;
}

// Kind 2: one section of scalar instructions; inputs a, b, c (or x) and one
// output array per instruction, named as PTX writes it.
struct scalar_section {
  std::string name;
  std::uint32_t count;
  struct array {
    std::string name;
    std::uint32_t element_bytes;
    bool is_input;
    std::vector<std::uint32_t> values;
  };
  std::vector<array> arrays;
  const array& find(const std::string& array_name) const {
    for (const array& a : arrays)
      if (a.name == array_name) return a;
    throw std::runtime_error("section " + name + " has no array " + array_name);
  }
};

inline scalar_section read_section(const file& f) {
  if (f.type != kind::scalar_section) throw std::runtime_error(f.path + ": not a scalar-instruction file");
  cursor c = f.payload();
  scalar_section s;
  s.name = c.text(48);
  s.count = c.u32();
  const std::uint32_t arrays = c.u32();
  for (std::uint32_t i = 0; i < arrays; ++i) {
    scalar_section::array a;
    a.name = c.text(40);
    a.element_bytes = c.u32();
    a.is_input = c.u32() != 0;
    if (a.element_bytes != 2 && a.element_bytes != 4) throw std::runtime_error(f.path + ": bad element size");
    s.arrays.push_back(std::move(a));
  }
  for (auto& a : s.arrays) {
    const unsigned char* p = c.take(std::size_t{s.count} * a.element_bytes);
    a.values.resize(s.count);
    for (std::uint32_t i = 0; i < s.count; ++i)
      a.values[i] = static_cast<std::uint32_t>(cursor::little_endian(p + std::size_t{i} * a.element_bytes, a.element_bytes));
  }
  return s;
}

}  // namespace test_data
