// One reader for every GPU capture file, shared by the tests and the tools:
// the raw captures written by cuda/capture (tables "BXTAB01", scalar sections
// "BXOPS01", tensor-core tiles "BXMMA01"; layouts in cuda/capture/README.md)
// and the checksummed replay files cut from them into tests/data by
// tools/make_test_data.cpp, which carry the same tile and section bodies:
//
//   char magic[8] = "BXDATA1\0"
//   u32  kind;              // 1: tensor-core tiles, 2: one section of scalar instructions
//   u32  provenance_bytes;
//   u64  payload_bytes;
//   u64  payload_fnv1a64;   // FNV-1a 64 of the payload bytes
//   char provenance[provenance_bytes];  // text: GPU, driver, CUDA, date, the commands
//   payload:
//     kind 1: the BXMMA01 body, with each tile's index in the full capture in place of its reserved word
//     kind 2: one BXOPS01 section
//
// Everything is little-endian. Every reader throws std::runtime_error naming
// the file and what is wrong with it, so that a test or a tool stops with the
// reason rather than reading garbage.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "../../include/bitexact/core/checksum.hpp"

namespace capture {

inline std::vector<unsigned char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(in), {});
}

inline std::uint32_t little_endian(const unsigned char* bytes, std::size_t count) {
  std::uint32_t value = 0;
  for (std::size_t i = 0; i < count; ++i) value |= std::uint32_t{bytes[i]} << (8 * i);
  return value;
}

// Little-endian reads from a byte buffer, refusing to run past its end.
class cursor {
 public:
  cursor(const std::vector<unsigned char>& bytes, std::size_t at, std::string path)
      : bytes_(bytes), at_(at), path_(std::move(path)) {}
  const unsigned char* take(std::size_t count) {
    if (count > bytes_.size() - at_)
      throw std::runtime_error(path_ + ": truncated (needs " + std::to_string(count) + " more bytes at offset " +
                               std::to_string(at_) + ")");
    const unsigned char* taken = bytes_.data() + at_;
    at_ += count;
    return taken;
  }
  std::uint32_t u32() { return little_endian(take(4), 4); }
  std::uint64_t u64() {
    const std::uint64_t low = u32();
    return low | std::uint64_t{u32()} << 32;
  }
  // A NUL-padded text field of width bytes.
  std::string text(std::size_t width) {
    const char* field = reinterpret_cast<const char*>(take(width));
    return std::string(field, strnlen(field, width));
  }
  void expect_magic(const char (&magic)[8], const char* what) {
    if (std::memcmp(take(8), magic, 8) != 0) throw std::runtime_error(path_ + ": not " + what + " (no " + magic + ")");
  }
  std::size_t at() const { return at_; }
  const std::string& path() const { return path_; }

 private:
  const std::vector<unsigned char>& bytes_;
  std::size_t at_;
  std::string path_;
};

// The variants of BXMMA01 (cuda/capture/README.md): 0 bf16->f32, 1 f16->f32,
// 2 f16->f16 (mma.sync m16n8k16), 3 wgmma m64n8k16 bf16->f32; 4-7 wgmma
// m64n8k32 fp8->f32 and 8-11 fp8->f16, A x B = e4m3 x e4m3, e4m3 x e5m2,
// e5m2 x e4m3, e5m2 x e5m2 in that order; 12 wgmma m64n8k8 tf32->f32.
inline constexpr std::uint32_t last_mma_variant = 12;
inline constexpr bool is_fp8_variant(std::uint32_t variant) { return variant >= 4 && variant <= 11; }
inline constexpr bool is_tf32_variant(std::uint32_t variant) { return variant == 12; }
// The bytes of one A or B element: an fp8 byte, the 32-bit register a tf32 value sits in, else 16 bits.
inline constexpr std::uint32_t input_bytes(std::uint32_t variant) {
  return is_fp8_variant(variant) ? 1 : is_tf32_variant(variant) ? 4 : 2;
}
// The products a tile's dot products have: 32 for fp8, 8 for tf32, else 16.
inline constexpr std::uint32_t variant_k(std::uint32_t variant) {
  return is_fp8_variant(variant) ? 32 : is_tf32_variant(variant) ? 8 : 16;
}

// Tensor-core tiles, D = A * B + C.
struct mma_tiles {
  std::uint32_t variant, m, n, k, acc_bytes;  // variant: above
  struct tile {
    std::uint32_t tile_class, source_index;  // source_index: 0 in a raw capture
    std::vector<std::uint32_t> a;            // [m][k], input_bytes(variant) each (a tf32 register whole)
    std::vector<std::uint32_t> b;            // [k][n]
    std::vector<std::uint32_t> c, d;         // [m][n], fp16 accumulators in the low half
  };
  std::vector<tile> tiles;
};

inline std::vector<std::uint32_t> read_values(cursor& in, std::size_t count, std::size_t element_bytes) {
  const unsigned char* bytes = in.take(count * element_bytes);
  std::vector<std::uint32_t> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = little_endian(bytes + i * element_bytes, element_bytes);
  return values;
}

// The BXMMA01 body: shape, then every tile.
inline mma_tiles read_tiles(cursor& in) {
  mma_tiles tiles{};
  tiles.variant = in.u32();
  tiles.m = in.u32();
  tiles.n = in.u32();
  tiles.k = in.u32();
  const std::uint32_t count = in.u32();
  tiles.acc_bytes = in.u32();
  if (tiles.variant > last_mma_variant || tiles.m % 16 || tiles.n != 8 || tiles.k != variant_k(tiles.variant) ||
      (tiles.acc_bytes != 2 && tiles.acc_bytes != 4))
    throw std::runtime_error(in.path() + ": variant " + std::to_string(tiles.variant) + " tiles of M=" +
                             std::to_string(tiles.m) + " N=" + std::to_string(tiles.n) + " K=" +
                             std::to_string(tiles.k) + " with " + std::to_string(tiles.acc_bytes) +
                             "-byte accumulators; expected a variant up to " + std::to_string(last_mma_variant) +
                             ", M a multiple of 16, N 8, the variant's K and 2 or 4 bytes");
  const std::uint32_t element_bytes = input_bytes(tiles.variant);
  for (std::uint32_t i = 0; i < count; ++i) {
    mma_tiles::tile tile;
    tile.tile_class = in.u32();
    tile.source_index = in.u32();
    tile.a = read_values(in, std::size_t{tiles.m} * tiles.k, element_bytes);
    tile.b = read_values(in, std::size_t{tiles.k} * tiles.n, element_bytes);
    tile.c = read_values(in, std::size_t{tiles.m} * tiles.n, tiles.acc_bytes);
    tile.d = read_values(in, std::size_t{tiles.m} * tiles.n, tiles.acc_bytes);
    tiles.tiles.push_back(std::move(tile));
  }
  return tiles;
}

// One section of scalar instructions: inputs a, b, c (or x) and one output
// array per instruction, named as PTX writes it (fma.rm.ftz.f32).
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

// The BXOPS01 section: name, count, array headers, then the arrays.
inline scalar_section read_section(cursor& in) {
  scalar_section section;
  section.name = in.text(48);
  section.count = in.u32();
  const std::uint32_t arrays = in.u32();
  for (std::uint32_t i = 0; i < arrays; ++i) {
    scalar_section::array array;
    array.name = in.text(40);
    array.element_bytes = in.u32();
    array.is_input = in.u32() != 0;
    if (array.element_bytes != 2 && array.element_bytes != 4)
      throw std::runtime_error(in.path() + ": array " + array.name + " of section " + section.name + " has " +
                               std::to_string(array.element_bytes) + "-byte elements, not 2 or 4");
    section.arrays.push_back(std::move(array));
  }
  for (scalar_section::array& array : section.arrays)
    array.values = read_values(in, section.count, array.element_bytes);
  return section;
}

// ---- raw captures (cuda/capture) ----

// A BXMMA01 file (mma_*.bin, wgmma_*.bin).
inline mma_tiles read_mma(const std::string& path) {
  const std::vector<unsigned char> bytes = read_bytes(path);
  cursor in(bytes, 0, path);
  in.expect_magic("BXMMA01", "a tensor-core capture");
  return read_tiles(in);
}

// ops.bin: "BXOPS01\0", u32 section count, u32 0, then the sections.
struct ops_capture {
  std::string path;
  std::vector<scalar_section> sections;
  // The section whose name starts with prefix ("fp32", "bf16", "cvt", "mufu").
  const scalar_section& section(const std::string& prefix) const {
    for (const scalar_section& s : sections)
      if (s.name.rfind(prefix, 0) == 0) return s;
    throw std::runtime_error(path + ": no section named " + prefix + "...");
  }
};

inline ops_capture read_ops(const std::string& path) {
  const std::vector<unsigned char> bytes = read_bytes(path);
  cursor in(bytes, 0, path);
  in.expect_magic("BXOPS01", "a scalar-instruction capture");
  ops_capture ops{path, {}};
  const std::uint32_t sections = in.u32();
  in.u32();  // reserved
  for (std::uint32_t i = 0; i < sections; ++i) ops.sections.push_back(read_section(in));
  return ops;
}

// One table of sfu_tables_*.bin, decoded; checksum_ok says whether it matches
// the checksum the GPU side wrote.
struct table {
  std::string name;
  std::vector<std::uint32_t> values;
  bool checksum_ok;
};

// sfu_tables_*.bin ("BXTAB01"): per table, 4-bit steps from the previous
// value, the step -8 meaning "the next exception holds the value".
inline std::vector<table> read_tables(const std::string& path) {
  const std::vector<unsigned char> bytes = read_bytes(path);
  cursor in(bytes, 0, path);
  in.expect_magic("BXTAB01", "an SFU table capture");
  const std::uint32_t count = in.u32();
  in.u32();  // reserved
  constexpr int exception_step = 8;
  std::vector<table> tables;
  for (std::uint32_t t = 0; t < count; ++t) {
    table decoded;
    decoded.name = in.text(64);
    const std::uint32_t entries = in.u32(), exception_count = in.u32();
    const std::uint64_t checksum = in.u64();
    in.u32();  // smallest step
    in.u32();  // largest step
    const unsigned char* steps = in.take(entries / 2);
    const unsigned char* exceptions = in.take(std::size_t{exception_count} * 8);
    decoded.values.resize(entries);
    std::size_t next_exception = 0;
    std::uint32_t previous = 0;
    for (std::uint32_t i = 0; i < entries; ++i) {
      const int step = (steps[i / 2] >> ((i & 1) * 4)) & 0xF;
      std::uint32_t value;
      if (step == exception_step) {
        if (next_exception == exception_count)
          throw std::runtime_error(path + ": table " + decoded.name + " asks for more than its " +
                                   std::to_string(exception_count) + " exceptions");
        value = little_endian(exceptions + next_exception++ * 8 + 4, 4);
      } else {
        value = previous + static_cast<std::uint32_t>(step >= 8 ? step - 16 : step);
      }
      decoded.values[i] = previous = value;
    }
    decoded.checksum_ok = bitexact::fnv1a64_of_values(decoded.values.data(), entries) == checksum;
    tables.push_back(std::move(decoded));
  }
  return tables;
}

// ---- replay files (tests/data, BXDATA1) ----

inline constexpr char replay_magic[8] = "BXDATA1";
enum class replay_kind : std::uint32_t { mma_tiles = 1, scalar_section = 2 };

struct replay_file {
  std::string path;
  replay_kind kind;
  std::string provenance;
  std::vector<unsigned char> bytes;  // the whole file; the payload starts at payload_offset
  std::size_t payload_offset;
  cursor payload() const { return cursor(bytes, payload_offset, path); }
};

// Parses the header and verifies the checksum of a replay file's bytes.
inline replay_file parse_replay_file(std::vector<unsigned char> bytes, const std::string& path) {
  replay_file file{path, replay_kind::mma_tiles, {}, std::move(bytes), 0};
  cursor in(file.bytes, 0, path);
  in.expect_magic(replay_magic, "a bitexact replay file");
  file.kind = static_cast<replay_kind>(in.u32());
  if (file.kind != replay_kind::mma_tiles && file.kind != replay_kind::scalar_section)
    throw std::runtime_error(path + ": unknown kind " + std::to_string(static_cast<std::uint32_t>(file.kind)));
  const std::uint32_t provenance_bytes = in.u32();
  const std::uint64_t payload_bytes = in.u64(), checksum = in.u64();
  file.provenance = std::string(reinterpret_cast<const char*>(in.take(provenance_bytes)), provenance_bytes);
  file.payload_offset = in.at();
  if (file.bytes.size() - file.payload_offset != payload_bytes)
    throw std::runtime_error(path + ": payload is " + std::to_string(file.bytes.size() - file.payload_offset) +
                             " bytes, the header says " + std::to_string(payload_bytes));
  const std::uint64_t actual = bitexact::fnv1a64(file.bytes.data() + file.payload_offset, payload_bytes);
  if (actual != checksum) {
    char message[160];
    std::snprintf(message, sizeof message, ": checksum mismatch (header %016llx, payload %016llx): file corrupt",
                  static_cast<unsigned long long>(checksum), static_cast<unsigned long long>(actual));
    throw std::runtime_error(path + message);
  }
  return file;
}

inline replay_file read_replay_file(const std::string& path) {
  std::vector<unsigned char> bytes;
  try {
    bytes = read_bytes(path);
  } catch (const std::runtime_error& error) {
    throw std::runtime_error(std::string(error.what()) +
                             " (regenerate with tools/make_test_data.cpp, tests/data/README.md)");
  }
  return parse_replay_file(std::move(bytes), path);
}

inline mma_tiles read_tiles(const replay_file& file) {
  if (file.kind != replay_kind::mma_tiles) throw std::runtime_error(file.path + ": not a tensor-core file");
  cursor in = file.payload();
  return read_tiles(in);
}

inline scalar_section read_section(const replay_file& file) {
  if (file.kind != replay_kind::scalar_section) throw std::runtime_error(file.path + ": not a scalar-instruction file");
  cursor in = file.payload();
  return read_section(in);
}

}  // namespace capture
