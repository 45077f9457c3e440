// The special-function unit (MUFU) as PTX reaches it: ex2.approx.ftz.f32,
// ex2.approx.f32, rcp.approx.ftz.f32 and rcp.approx.f32.
//
// MUFU is a table lookup, not a correctly rounded function. Captured on an
// NVIDIA H200 (sm_90, driver 580.159.04, CUDA 13.0) and proven over every
// input bit pattern on the GPU (cuda/probe_mufu.cu, docs/mufu.md):
//   ex2.ftz, x <= -0: q = trunc(|x| * 2^23), n = q >> 23, k = q mod 2^23,
//            result G(k) * 2^-n, flushed to +0 below 2^-126; |x| >= 256 -> +0.
//   ex2.ftz, x >= +0: result P(k) * 2^n with a second table (P is not G
//            mirrored); x >= 128 -> +inf. Subnormal or zero x -> 1 exactly.
//   rcp.ftz, x = +-(1 + k/2^23) * 2^e: result +-R(k) * 2^-e, flushed to a
//            signed zero below 2^-126; +-0 and subnormals -> +-inf, +-inf -> +-0.
//   NaN in -> 0x7FFFFFFF out, for all four.
// The non-FTZ forms are the wrappers the compiler emits around the same MUFU
// instruction (SASS in .captures/info.txt): ex2 squares M(x/2) for x < -126,
// rcp rescales by 0.25 or 2^24; their FMULs are IEEE round-to-nearest.
//
// Tables: G(k) = 2 * ex2.approx.ftz(-1 - k*2^-23) in (0.5, 1], P(k) =
// ex2.approx.ftz(k*2^-23) in [1, 2), R(k) = rcp.approx.ftz(1 + k*2^-23) in
// (0.5, 1], 2^23 entries each, shipped in data/ as:
//
//   file  := "BXMUFUT\0"  u32 version (1)  u32 table_count  char provenance[128]  table*
//   table := char name[16]  char rule[64]  u32 entry_count  u32 first_value
//            i32 min_delta  u32 exception_count  u64 checksum
//            u8 codes[ceil(entry_count / 4)]  u32 exceptions[exception_count]
//
// Little-endian throughout. Entry i's 2-bit code sits in bits 2*(i%4) of byte
// i/4 (entry 0's code is unused: it is first_value). Code c < 3 means
// value[i] = value[i-1] + min_delta + c; code 3 takes the next exception
// value. checksum is FNV-1a 64 over the decoded values as little-endian u32.
// mufu_ex2.bxt holds "ex2.negative" (G) and "ex2.positive" (P); mufu_rcp.bxt
// holds "rcp" (R). tools/make_mufu_tables.cpp writes them from the captures.
#pragma once

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "alu.hpp"
#include "../core/checksum.hpp"
#include "../core/format.hpp"
#include "../core/observer.hpp"
#include "../core/operations.hpp"

namespace bitexact {

enum class mufu_table : std::uint8_t { ex2_negative, ex2_positive, rcp };

constexpr std::string_view name_of(mufu_table table) {
  constexpr std::string_view names[] = {"ex2.negative", "ex2.positive", "rcp"};
  return names[static_cast<int>(table)];
}

// One MUFU table lookup: the result is entry * 2^scale before the flush to
// zero (or the overflow to infinity) that the unit applies.
struct mufu_lookup_event {
  mufu_table table;
  std::uint32_t index;  // k, the 23 bits after the grid point's leading part
  std::uint32_t entry;  // the table's fp32 bit pattern at k
  int scale;            // n (ex2) or -e (rcp)
};

// A missing, short or corrupt table file; what() names the file and the fix.
class mufu_data_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail::mufu_file {

inline constexpr char tables_magic[8] = {'B', 'X', 'M', 'U', 'F', 'U', 'T', '\0'};
inline constexpr std::uint32_t version = 1;
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
        ". The files mufu_ex2.bxt and mufu_rcp.bxt ship in the source tree's data/ folder and install to "
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
  if (const std::uint32_t v = in.u32(); v != version)
    in.fail("has format version " + std::to_string(v) + ", this library reads version " + std::to_string(version));
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
    if (count != entries)
      in.fail("has table '" + table.name + "' with " + std::to_string(count) + " entries, expected 2^23");
    const unsigned char* codes = in.take((std::size_t{count} + 3) / 4);
    const unsigned char* exceptions = in.take(std::size_t{exception_count} * 4);
    table.values.resize(count);
    std::uint32_t previous = table.values[0] = first, next_exception = 0;
    for (std::uint32_t i = 1; i < count; ++i) {
      const unsigned code = (codes[i / 4] >> (2 * (i % 4))) & 3;
      if (code == exception_code) {
        if (next_exception == exception_count) in.fail("has table '" + table.name + "' with too few exceptions");
        const unsigned char* p = exceptions + 4 * std::size_t{next_exception++};
        previous = std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 |
                   std::uint32_t{p[3]} << 24;
      } else {
        previous += static_cast<std::uint32_t>(min_delta + static_cast<std::int32_t>(code));
      }
      table.values[i] = previous;
    }
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

// The three 2^23-entry tables, decoded into plain arrays for fast lookups.
class mufu_tables {
 public:
  // Reads mufu_ex2.bxt and mufu_rcp.bxt from a folder; throws mufu_data_error.
  static mufu_tables load(const std::string& directory) {
    mufu_tables tables;
    const std::string ex2_path = directory + "/mufu_ex2.bxt", rcp_path = directory + "/mufu_rcp.bxt";
    auto ex2 = detail::mufu_file::read_tables(ex2_path);
    tables.negative_ = detail::mufu_file::take_table(ex2, name_of(mufu_table::ex2_negative), ex2_path);
    tables.positive_ = detail::mufu_file::take_table(ex2, name_of(mufu_table::ex2_positive), ex2_path);
    auto rcp = detail::mufu_file::read_tables(rcp_path);
    tables.reciprocal_ = detail::mufu_file::take_table(rcp, name_of(mufu_table::rcp), rcp_path);
    return tables;
  }

  // The folder the library reads at first use: $BITEXACT_DATA_DIR, else the
  // one compiled in (the source tree's data/, or the installed share/bitexact).
  static std::string default_directory() {
    if (const char* from_environment = std::getenv("BITEXACT_DATA_DIR"); from_environment && *from_environment)
      return from_environment;
#ifdef BITEXACT_DATA_DIR
    return BITEXACT_DATA_DIR;
#else
    throw mufu_data_error(
        "bitexact: no folder for the MUFU tables: set the environment variable BITEXACT_DATA_DIR to the folder "
        "holding mufu_ex2.bxt and mufu_rcp.bxt (the source tree's data/), or build through CMake, which defines "
        "BITEXACT_DATA_DIR.");
#endif
  }

  // Loaded once, on first use, thread-safely (a function-local static).
  static const mufu_tables& shared() {
    static const mufu_tables tables = load(default_directory());
    return tables;
  }

  std::uint32_t entry(mufu_table table, std::uint32_t k) const { return data(table)[k]; }
  const std::uint32_t* data(mufu_table table) const {
    return table == mufu_table::ex2_negative   ? negative_.data()
           : table == mufu_table::ex2_positive ? positive_.data()
                                               : reciprocal_.data();
  }
  static constexpr std::uint32_t size() { return detail::mufu_file::entries; }

 private:
  std::vector<std::uint32_t> negative_, positive_, reciprocal_;
};

namespace detail {

inline constexpr std::uint32_t magnitude_mask = 0x7FFFFFFFu, infinity_bits = 0x7F800000u;
inline constexpr std::uint32_t fraction_mask = 0x007FFFFFu, smallest_normal_bits = 0x00800000u;

// trunc(m * 2^23) for a magnitude m < 256: the input on the tables' 2^-23
// grid, truncated toward zero (off-grid inputs lose their low bits).
constexpr std::uint32_t grid_point(std::uint32_t magnitude) {
  const int biased_exponent = static_cast<int>(magnitude >> 23);
  if (biased_exponent == 0) return 0;  // zero and subnormals lie far below 2^-23
  const std::uint32_t significand = (magnitude & fraction_mask) | smallest_normal_bits;
  const int shift = biased_exponent - 127;  // m * 2^23 = significand * 2^(biased_exponent - 127)
  if (shift >= 0) return significand << shift;
  return -shift >= 24 ? 0 : significand >> -shift;
}

// An fp32 table entry times 2^scale, as the unit forms it: a biased exponent
// that drops to 0 or below flushes to zero, one that reaches 255 gives infinity.
constexpr std::uint32_t scale_entry(std::uint32_t entry, int scale, std::uint32_t sign) {
  const int biased_exponent = static_cast<int>(entry >> 23) + scale;
  if (biased_exponent <= 0) return sign;
  if (biased_exponent >= 255) return sign | infinity_bits;
  return sign | (entry & fraction_mask) | static_cast<std::uint32_t>(biased_exponent) << 23;
}

}  // namespace detail

// ex2.approx.ftz.f32 (MUFU.EX2).
template <class O = no_observer>
inline float32 ex2_approx_ftz(float32 x, const mufu_tables& tables = mufu_tables::shared(), O&& obs = {}) {
  const std::uint32_t magnitude = x.bits & detail::magnitude_mask;
  if (magnitude > detail::infinity_bits) [[unlikely]] {
    report(obs, special_event{special_reason::nan_operand});
    return float32::canonical_nan();
  }
  if (x.sign()) {
    // 2^-256 is far below the flush threshold; -inf lands here too.
    if (magnitude >= 0x43800000u) [[unlikely]] {
      report(obs, special_event{special_reason::flushed_to_zero});
      return float32::zero();
    }
    const std::uint32_t q = detail::grid_point(magnitude), k = q & detail::fraction_mask;
    const std::uint32_t entry = tables.data(mufu_table::ex2_negative)[k];
    const int scale = -static_cast<int>(q >> 23);
    report(obs, mufu_lookup_event{mufu_table::ex2_negative, k, entry, scale});
    const std::uint32_t result = detail::scale_entry(entry, scale, 0);
    if (result == 0) report(obs, special_event{special_reason::flushed_to_zero});
    return float32::from_bits(result);
  }
  // 2^128 overflows; +inf lands here too.
  if (magnitude >= 0x43000000u) [[unlikely]] {
    report(obs, special_event{special_reason::overflow});
    return float32::infinity();
  }
  const std::uint32_t q = detail::grid_point(magnitude), k = q & detail::fraction_mask;
  const std::uint32_t entry = tables.data(mufu_table::ex2_positive)[k];
  const int scale = static_cast<int>(q >> 23);
  report(obs, mufu_lookup_event{mufu_table::ex2_positive, k, entry, scale});
  return float32::from_bits(detail::scale_entry(entry, scale, 0));
}

// ex2.approx.f32: what nvcc emits (FSETP.GEU x, -126; FMUL x*0.5; MUFU.EX2;
// FMUL r*r): below -126 the unit's result would be flushed, so it evaluates
// 2^(x/2) and squares it with an IEEE round-to-nearest multiply, which is how
// subnormal results (down to 2^-149) come out. Exact halving: x/2 is normal.
template <class O = no_observer>
inline float32 ex2_approx(float32 x, const mufu_tables& tables = mufu_tables::shared(), O&& obs = {}) {
  constexpr std::uint32_t minus_126_magnitude = 0x42FC0000u;
  const std::uint32_t magnitude = x.bits & detail::magnitude_mask;
  const bool below_minus_126 = x.sign() && magnitude > minus_126_magnitude && magnitude <= detail::infinity_bits;
  if (!below_minus_126) return ex2_approx_ftz(x, tables, obs);
  const environment fmul = gpu_environment();
  const float32 half = mul(x, from_host(0.5f), fmul, obs).result;
  const float32 root = ex2_approx_ftz(half, tables, obs);
  return mul(root, root, fmul, obs).result;
}

// rcp.approx.ftz.f32 (MUFU.RCP).
template <class O = no_observer>
inline float32 rcp_approx_ftz(float32 x, const mufu_tables& tables = mufu_tables::shared(), O&& obs = {}) {
  const std::uint32_t sign = x.bits & ~detail::magnitude_mask, magnitude = x.bits & detail::magnitude_mask;
  if (magnitude > detail::infinity_bits) [[unlikely]] {
    report(obs, special_event{special_reason::nan_operand});
    return float32::canonical_nan();
  }
  if (magnitude == detail::infinity_bits) [[unlikely]] {
    report(obs, special_event{special_reason::infinity_operand});
    return float32::from_bits(sign);
  }
  // Subnormal inputs read as zero (.ftz): 1/0 is infinity.
  if (magnitude < detail::smallest_normal_bits) [[unlikely]] {
    report(obs, special_event{special_reason::division_by_zero});
    return float32::from_bits(sign | detail::infinity_bits);
  }
  const std::uint32_t k = magnitude & detail::fraction_mask;
  const std::uint32_t entry = tables.data(mufu_table::rcp)[k];
  const int scale = 127 - static_cast<int>(magnitude >> 23);
  report(obs, mufu_lookup_event{mufu_table::rcp, k, entry, scale});
  const std::uint32_t result = detail::scale_entry(entry, scale, sign);
  if ((result & detail::magnitude_mask) == 0) report(obs, special_event{special_reason::flushed_to_zero});
  return float32::from_bits(result);
}

// rcp.approx.f32: what nvcc emits, s * MUFU.RCP(x * s) with IEEE
// round-to-nearest multiplies: s = 0.25 for |x| > 2^126 (whose reciprocal the
// unit would flush) and s = 2^24 for |x| < 2^-126 (which the unit reads as
// zero); subnormal results come out of the final multiply. For s = 1 both
// multiplies are identities (the unit's result is never subnormal, and any
// NaN is the canonical one), so that path is the bare lookup.
template <class O = no_observer>
inline float32 rcp_approx(float32 x, const mufu_tables& tables = mufu_tables::shared(), O&& obs = {}) {
  constexpr std::uint32_t two_to_126_magnitude = 0x7E800000u;
  const std::uint32_t magnitude = x.bits & detail::magnitude_mask;
  float32 scale;
  if (magnitude > two_to_126_magnitude && magnitude <= detail::infinity_bits) scale = from_host(0.25f);
  else if (magnitude < detail::smallest_normal_bits) scale = from_host(0x1p24f);
  else return rcp_approx_ftz(x, tables, obs);
  const environment fmul = gpu_environment();
  const float32 scaled = mul(x, scale, fmul, obs).result;
  const float32 reciprocal = rcp_approx_ftz(scaled, tables, obs);
  return mul(scale, reciprocal, fmul, obs).result;
}

}  // namespace ptx
}  // namespace bitexact
