// The MUFU tables and their file format: what ex2.approx, rcp.approx and
// lg2.approx (mufu.hpp) look up, read from data/ at first use.
//
// G(k) = 2 * ex2.approx.ftz(-1 - k*2^-23) in (0.5, 1], P(k) =
// ex2.approx.ftz(k*2^-23) in [1, 2), R(k) = rcp.approx.ftz(1 + k*2^-23) in
// (0.5, 1], T(k) = lg2.approx.ftz(1 + k*2^-23), 2^23 entries each, shipped in
// data/ as:
//
//   file  := "BXMUFUT\0"  u32 version (1 to 3)  u32 table_count  char provenance[128]  table*
//   table := char name[16]  char rule[64]  u32 entry_count  u32 first_value
//            i32 min_delta  u32 exception_count  u64 checksum  [version >= 2: u32 grid]
//            [version 3: u32 order]  u8 codes[ceil(entry_count / 4)]  u32 exceptions[exception_count]
//
// Little-endian throughout. Entry i's 2-bit code sits in bits 2*(i%4) of byte
// i/4 (entry 0's code is unused: it is first_value). With order 1 (and before
// version 3), code c < 3 means value[i] = value[i-1] + min_delta + c; with
// order 2 the step itself moves: step[i] = step[i-1] + min_delta + c and
// value[i] = value[i-1] + step[i] (step[0] = 0), which codes T's slowly
// turning steps in 2 bits where order 1 needed an exception for most of them.
// Code 3 takes the next exception value (and, with order 2, the step to it).
// With grid 0 (and in version 1) the values are the entries, fp32 bit
// patterns; with grid g > 0 value v is an integer and the entry is the fp32
// number v * 2^-g, exactly (for T, whose small entries step by many ulps but
// lie on a common grid). checksum is FNV-1a 64 over the entries as
// little-endian u32. mufu_ex2.bxt holds "ex2.negative" (G) and
// "ex2.positive" (P); mufu_rcp.bxt holds "rcp" (R); mufu_lg2.bxt holds "lg2"
// (T). tools/make_mufu_tables.cpp writes them from the captures.
#pragma once

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "../core/checksum.hpp"

namespace bitexact {

enum class mufu_table : std::uint8_t { ex2_negative, ex2_positive, rcp, lg2, lg2_below };

constexpr std::string_view name_of(mufu_table table) {
  constexpr std::string_view names[] = {"ex2.negative", "ex2.positive", "rcp", "lg2", "lg2.below"};
  return names[static_cast<int>(table)];
}

// A missing, short or corrupt table file; what() names the file and the fix.
class mufu_data_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail::mufu_file {

inline constexpr char tables_magic[8] = {'B', 'X', 'M', 'U', 'F', 'U', 'T', '\0'};
inline constexpr std::uint32_t version = 3, first_version = 1;
inline constexpr std::size_t provenance_bytes = 128, name_bytes = 16, rule_bytes = 64;
inline constexpr std::uint32_t entries = 1u << 23;
inline constexpr unsigned exception_code = 3;

// Reads the little-endian fields of a file held in memory, failing with the
// file's name when it ends early.
struct reader {
  const std::string& path;
  const std::vector<unsigned char>& bytes;
  std::size_t at = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw mufu_data_error(
        "bitexact: MUFU table file '" + path + "' " + what +
        ". The files mufu_ex2.bxt, mufu_rcp.bxt and mufu_lg2.bxt ship in the source tree's data/ folder and install to "
        "<prefix>/share/bitexact; point the environment variable BITEXACT_DATA_DIR at the folder holding "
        "intact copies (or regenerate them as docs/mufu.md describes).");
  }
  const unsigned char* take(std::size_t count) {
    if (bytes.size() - at < count) fail("is truncated (ends at byte " + std::to_string(bytes.size()) + ")");
    const unsigned char* p = bytes.data() + at;
    at += count;
    return p;
  }
  std::uint32_t u32() {
    const unsigned char* p = take(4);
    return std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 | std::uint32_t{p[3]} << 24;
  }
  std::uint64_t u64() {
    const std::uint64_t low = u32();
    return low | std::uint64_t{u32()} << 32;
  }
  std::string text(std::size_t width) {
    const char* p = reinterpret_cast<const char*>(take(width));
    return std::string(p, strnlen(p, width));
  }
};

inline std::vector<unsigned char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const std::vector<unsigned char> none;
    reader{path, none}.fail("cannot be opened (missing or unreadable)");
  }
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline constexpr std::uint32_t max_grid = 31;

// The fp32 bit pattern of the number value * 2^-grid (0 < grid <= 31), into
// entry; false when that number needs more than fp32's 24 significant bits.
constexpr bool entry_on_grid(std::uint32_t value, std::uint32_t grid, std::uint32_t& entry) {
  if (value == 0) return entry = 0, true;
  const int top = static_cast<int>(std::bit_width(value)) - 1;  // value = 1.f * 2^top
  if (top > 23 && (value & ((1u << (top - 23)) - 1)) != 0) return false;
  const std::uint32_t fraction = (top > 23 ? value >> (top - 23) : value << (23 - top)) & 0x7FFFFFu;
  entry = static_cast<std::uint32_t>(top - static_cast<int>(grid) + 127) << 23 | fraction;
  return true;
}

struct named_table {
  std::string name, rule;
  std::vector<std::uint32_t> values;
};

// Decodes every table of one file and checks each against its checksum.
inline std::vector<named_table> read_tables(const std::string& path) {
  const std::vector<unsigned char> bytes = read_file(path);
  reader in{path, bytes};
  if (std::memcmp(in.take(sizeof tables_magic), tables_magic, sizeof tables_magic) != 0)
    in.fail("does not start with the magic \"BXMUFUT\" (not a bitexact MUFU table file)");
  const std::uint32_t file_version = in.u32();
  if (file_version < first_version || file_version > version)
    in.fail("has format version " + std::to_string(file_version) + ", this library reads versions " +
            std::to_string(first_version) + " to " + std::to_string(version));
  const std::uint32_t table_count = in.u32();
  in.text(provenance_bytes);
  std::vector<named_table> tables;
  for (std::uint32_t t = 0; t < table_count; ++t) {
    named_table table;
    table.name = in.text(name_bytes);
    table.rule = in.text(rule_bytes);
    const std::uint32_t count = in.u32(), first = in.u32();
    const auto min_delta = static_cast<std::int32_t>(in.u32());
    const std::uint32_t exception_count = in.u32();
    const std::uint64_t checksum = in.u64();
    const std::uint32_t grid = file_version >= 2 ? in.u32() : 0;
    if (grid > max_grid) in.fail("has table '" + table.name + "' on the grid 2^-" + std::to_string(grid) + ", finer than 2^-31");
    const std::uint32_t order = file_version >= 3 ? in.u32() : 1;
    if (order != 1 && order != 2)
      in.fail("has table '" + table.name + "' coded with differences of order " + std::to_string(order) +
              ", this library reads orders 1 and 2");
    if (count != entries)
      in.fail("has table '" + table.name + "' with " + std::to_string(count) + " entries, expected 2^23");
    const unsigned char* codes = in.take((std::size_t{count} + 3) / 4);
    const unsigned char* exceptions = in.take(std::size_t{exception_count} * 4);
    table.values.resize(count);
    std::uint32_t previous = table.values[0] = first, step = 0, next_exception = 0;
    for (std::uint32_t i = 1; i < count; ++i) {
      const unsigned code = (codes[i / 4] >> (2 * (i % 4))) & 3;
      if (code == exception_code) {
        if (next_exception == exception_count) in.fail("has table '" + table.name + "' with too few exceptions");
        const unsigned char* p = exceptions + 4 * std::size_t{next_exception++};
        const std::uint32_t value = std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 |
                                    std::uint32_t{p[3]} << 24;
        step = value - previous;
        previous = value;
      } else {
        const auto coded = static_cast<std::uint32_t>(min_delta + static_cast<std::int32_t>(code));
        step = order == 1 ? coded : step + coded;
        previous += step;
      }
      table.values[i] = previous;
    }
    if (grid)
      for (std::uint32_t& value : table.values)
        if (!entry_on_grid(value, grid, value))
          in.fail("has table '" + table.name + "' with a grid value that is no fp32 number (corrupt)");
    if (fnv1a64_of_values(table.values.data(), count) != checksum)
      in.fail("has table '" + table.name + "' whose decoded values fail their FNV-1a checksum (corrupt)");
    tables.push_back(std::move(table));
  }
  return tables;
}

inline std::vector<std::uint32_t> take_table(std::vector<named_table>& tables, std::string_view name,
                                             const std::string& path) {
  for (named_table& table : tables)
    if (table.name == name) return std::move(table.values);
  const std::vector<unsigned char> none;
  reader{path, none}.fail("has no table named '" + std::string(name) + "'");
}

}  // namespace detail::mufu_file

namespace ptx {

// The 2^23-entry tables, decoded into plain arrays for fast lookups.
class mufu_tables {
 public:
  // Reads mufu_ex2.bxt, mufu_rcp.bxt and, when the folder has it,
  // mufu_lg2.bxt; throws mufu_data_error. A folder without mufu_lg2.bxt (an
  // older install) serves ex2 and rcp; lg2 then throws, naming the file.
  static mufu_tables load(const std::string& directory) {
    mufu_tables tables;
    const std::string ex2_path = directory + "/mufu_ex2.bxt", rcp_path = directory + "/mufu_rcp.bxt";
    auto ex2 = detail::mufu_file::read_tables(ex2_path);
    tables.negative_ = detail::mufu_file::take_table(ex2, name_of(mufu_table::ex2_negative), ex2_path);
    tables.positive_ = detail::mufu_file::take_table(ex2, name_of(mufu_table::ex2_positive), ex2_path);
    auto rcp = detail::mufu_file::read_tables(rcp_path);
    tables.reciprocal_ = detail::mufu_file::take_table(rcp, name_of(mufu_table::rcp), rcp_path);
    tables.lg2_path_ = directory + "/mufu_lg2.bxt";
    if (std::ifstream(tables.lg2_path_).good()) {
      auto lg2 = detail::mufu_file::read_tables(tables.lg2_path_);
      tables.logarithm_ = detail::mufu_file::take_table(lg2, name_of(mufu_table::lg2), tables.lg2_path_);
      tables.logarithm_below_ = detail::mufu_file::take_table(lg2, name_of(mufu_table::lg2_below), tables.lg2_path_);
    }
    return tables;
  }

  // The folder the library reads at first use: $BITEXACT_DATA_DIR, else the
  // one compiled in (CMake: the source tree's data/, or the install's share/bitexact; a plain -I build: none).
  static std::string default_directory() {
    if (const char* from_environment = std::getenv("BITEXACT_DATA_DIR"); from_environment && *from_environment)
      return from_environment;
#ifdef BITEXACT_DATA_DIR
    return BITEXACT_DATA_DIR;
#else
    throw mufu_data_error(
        "bitexact: no folder for the MUFU tables: set the environment variable BITEXACT_DATA_DIR to the folder "
        "holding mufu_ex2.bxt and mufu_rcp.bxt (the source tree's data/ or an install's share/bitexact), compile "
        "with -DBITEXACT_DATA_DIR='\"/that/folder\"', or link bitexact::bitexact through CMake, which defines it.");
#endif
  }

  // Loaded once, on first use, thread-safely (a function-local static).
  static const mufu_tables& shared() {
    static const mufu_tables tables = load(default_directory());
    return tables;
  }

  bool has(mufu_table table) const {
    return (table != mufu_table::lg2 && table != mufu_table::lg2_below) || !logarithm_.empty();
  }
  std::uint32_t entry(mufu_table table, std::uint32_t k) const { return data(table)[k]; }
  const std::uint32_t* data(mufu_table table) const {
    switch (table) {
      case mufu_table::ex2_negative: return negative_.data();
      case mufu_table::ex2_positive: return positive_.data();
      case mufu_table::rcp: return reciprocal_.data();
      case mufu_table::lg2:
      case mufu_table::lg2_below: break;
    }
    if (logarithm_.empty()) [[unlikely]] {
      const std::vector<unsigned char> none;
      detail::mufu_file::reader{lg2_path_, none}.fail("cannot be opened (missing or unreadable), so lg2 has no table");
    }
    return table == mufu_table::lg2 ? logarithm_.data() : logarithm_below_.data();
  }
  static constexpr std::uint32_t size() { return detail::mufu_file::entries; }

 private:
  std::vector<std::uint32_t> negative_, positive_, reciprocal_, logarithm_, logarithm_below_;
  std::string lg2_path_;  // where load() looked for mufu_lg2.bxt, for the error when it was absent
};

}  // namespace ptx
}  // namespace bitexact
