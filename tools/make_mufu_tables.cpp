// Converts the GPU captures (cuda/capture, layouts in cuda/capture/README.md)
// into what bitexact ships: the MUFU tables in data/ and the MUFU sample
// replay file in tests/data/. Formats: include/bitexact/hardware/mufu_tables.hpp (tables),
// docs/mufu.md (both). Plain C++20; every file written is read back and
// compared with the capture before the program reports success.
//
// Build: g++ -O2 -std=c++20 -Iinclude -o /tmp/make_mufu_tables tools/make_mufu_tables.cpp
// Run:   /tmp/make_mufu_tables tables  .captures data
//        /tmp/make_mufu_tables samples .captures/ops.bin tests/data/mufu_samples.bxs
//        /tmp/make_mufu_tables lg2     .captures/lg2 data     (capture_lg2.cu's files)
//        /tmp/make_mufu_tables recode  data/mufu_lg2.bxt      (a shipped file in the current format)
#include <bitexact/hardware/mufu.hpp>
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "analysis/capture_files.hpp"

namespace {

// Where the captures came from (.captures/info.txt, FINDINGS.md).
const char* const provenance =
    "NVIDIA H200 (sm_90), driver 580.159.04, CUDA 13.0 (nvcc V13.0.88); cuda/capture/capture.cu";

struct byte_writer {
  std::vector<unsigned char> bytes;
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<unsigned char>(v >> (8 * i)));
  }
  void u64(std::uint64_t v) {
    u32(static_cast<std::uint32_t>(v));
    u32(static_cast<std::uint32_t>(v >> 32));
  }
  void text(const std::string& s, std::size_t width) {
    if (s.size() >= width) {
      std::fprintf(stderr, "text '%s' does not fit in %zu bytes\n", s.c_str(), width);
      std::exit(1);
    }
    bytes.insert(bytes.end(), s.begin(), s.end());
    bytes.insert(bytes.end(), width - s.size(), 0);
  }
  void varint(std::uint32_t v) {
    for (; v >= 0x80; v >>= 7) bytes.push_back(static_cast<unsigned char>(v | 0x80));
    bytes.push_back(static_cast<unsigned char>(v));
  }
  void save(const std::string& path) const {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
      std::perror(path.c_str());
      std::exit(1);
    }
    std::printf("wrote %s (%zu bytes)\n", path.c_str(), bytes.size());
  }
};

struct table_source {
  std::string name, rule;
  std::vector<std::uint32_t> values;  // the entries, fp32 bit patterns
  std::uint32_t grid = 0;             // > 0: stored as integers entry * 2^grid (mufu_tables.hpp)
};

// The finest power-of-two grid 2^-g (1 <= g <= 31) that every entry lies on
// when all are +0 or positive and below 2^(32-g); 0 when there is none, and
// the entries are stored as bit patterns.
std::uint32_t finest_grid(const std::vector<std::uint32_t>& entries) {
  int grid = 1;
  for (std::uint32_t entry : entries) {
    if (entry == 0) continue;
    if (entry >= 0x7F800000u) return 0;  // negative, infinite or NaN
    const int field = static_cast<int>(entry >> 23);
    const std::uint32_t significand = (entry & 0x7FFFFFu) | (field ? 0x800000u : 0u);
    grid = std::max(grid, 150 - std::max(field, 1) - std::countr_zero(significand));
  }
  if (grid > static_cast<int>(bitexact::detail::mufu_file::max_grid)) return 0;
  for (std::uint32_t entry : entries)
    if (std::ldexp(static_cast<double>(std::bit_cast<float>(entry)), grid) >= 0x1p32) return 0;
  return static_cast<std::uint32_t>(grid);
}

// The 2-bit codes of a table's values coded as differences of one order
// (mufu_tables.hpp): the three most frequent consecutive differences get
// codes 0-2, the most frequent window of three winning; code 3 sends a value
// as an exception.
struct coded_table {
  std::uint32_t order = 1;
  std::int64_t min_delta = 0;
  std::vector<unsigned char> codes;
  std::vector<std::uint32_t> exceptions;
};

coded_table code_differences(const std::vector<std::uint32_t>& v, std::uint32_t order) {
  // difference(i, step): what code i must carry, given the step into entry i-1
  const auto difference = [&](std::size_t i, std::int64_t step) {
    const std::int64_t here = static_cast<std::int64_t>(v[i]) - v[i - 1];
    return order == 1 ? here : here - step;
  };
  std::map<std::int64_t, std::uint64_t> counts;
  for (std::size_t i = 1; i < v.size(); ++i)
    ++counts[difference(i, i > 1 ? static_cast<std::int64_t>(v[i - 1]) - v[i - 2] : 0)];
  coded_table coded{order, counts.begin()->first, std::vector<unsigned char>((v.size() + 3) / 4, 0), {}};
  std::uint64_t best = 0;
  for (const auto& [delta, unused] : counts) {
    const std::uint64_t covered = counts[delta] + (counts.count(delta + 1) ? counts[delta + 1] : 0) +
                                  (counts.count(delta + 2) ? counts[delta + 2] : 0);
    if (covered > best) best = covered, coded.min_delta = delta;
  }
  // The decoder's step after an exception is the true step, so the true
  // steps are what every later code differs from.
  for (std::size_t i = 1; i < v.size(); ++i) {
    const std::int64_t code =
        difference(i, i > 1 ? static_cast<std::int64_t>(v[i - 1]) - v[i - 2] : 0) - coded.min_delta;
    unsigned stored = bitexact::detail::mufu_file::exception_code;
    if (code >= 0 && code < 3) stored = static_cast<unsigned>(code);
    else coded.exceptions.push_back(v[i]);
    coded.codes[i / 4] |= static_cast<unsigned char>(stored << (2 * (i % 4)));
  }
  return coded;
}

// One table: its header, then the codes of whichever order needs fewer exceptions.
void write_table(byte_writer& out, const table_source& table) {
  std::vector<std::uint32_t> v = table.values;
  if (table.grid)
    for (std::uint32_t& value : v)
      value = static_cast<std::uint32_t>(std::ldexp(static_cast<double>(std::bit_cast<float>(value)), table.grid));
  coded_table coded = code_differences(v, 1);
  if (coded_table second = code_differences(v, 2); second.exceptions.size() < coded.exceptions.size())
    coded = std::move(second);
  out.text(table.name, bitexact::detail::mufu_file::name_bytes);
  out.text(table.rule, bitexact::detail::mufu_file::rule_bytes);
  out.u32(static_cast<std::uint32_t>(v.size()));
  out.u32(v[0]);
  out.u32(static_cast<std::uint32_t>(static_cast<std::int32_t>(coded.min_delta)));
  out.u32(static_cast<std::uint32_t>(coded.exceptions.size()));
  const std::uint64_t checksum = bitexact::fnv1a64_of_values(table.values.data(), table.values.size());
  out.u64(checksum);
  out.u32(table.grid);
  out.u32(coded.order);
  out.bytes.insert(out.bytes.end(), coded.codes.begin(), coded.codes.end());
  for (std::uint32_t e : coded.exceptions) out.u32(e);
  std::printf("  %-13s grid %u, order %u, min_delta %lld, %zu exceptions, checksum %016llx\n", table.name.c_str(),
              table.grid, coded.order, static_cast<long long>(coded.min_delta), coded.exceptions.size(),
              static_cast<unsigned long long>(checksum));
}

void write_table_file(const std::string& path, const std::vector<table_source>& tables,
                      const std::string& provenance = ::provenance) {
  byte_writer out;
  out.bytes.insert(out.bytes.end(), bitexact::detail::mufu_file::tables_magic,
                   bitexact::detail::mufu_file::tables_magic + 8);
  out.u32(bitexact::detail::mufu_file::version);
  out.u32(static_cast<std::uint32_t>(tables.size()));
  out.text(provenance, bitexact::detail::mufu_file::provenance_bytes);
  for (const table_source& t : tables) write_table(out, t);
  out.save(path);
}

const capture::table& checked(const std::vector<capture::table>& tables, std::size_t i, const std::string& file) {
  if (tables.size() <= i || !tables[i].checksum_ok || tables[i].values.size() != (1u << 23)) {
    std::fprintf(stderr, "%s: table %zu missing, not 2^23 entries, or failing its capture checksum\n", file.c_str(), i);
    std::exit(1);
  }
  return tables[i];
}

int make_tables(const std::string& captures, const std::string& data) {
  const std::string a_path = captures + "/sfu_tables_a.bin", b_path = captures + "/sfu_tables_b.bin";
  const auto a = capture::read_tables(a_path), b = capture::read_tables(b_path);
  // sfu_tables_a: [0] ex2.ftz(-1 - k*2^-23) = G(k)/2, [1] ex2.ftz(k*2^-23) = P(k);
  // sfu_tables_b: [0] ex2.ftz(1 + k*2^-23), [1] rcp.ftz(1 + k*2^-23) = R(k).
  const capture::table &half_g = checked(a, 0, a_path), &p = checked(a, 1, a_path), &r = checked(b, 1, b_path);
  table_source g{"ex2.negative", "G(k) = 2 * ex2.approx.ftz.f32(-1 - k*2^-23)", half_g.values};
  for (std::uint32_t& value : g.values) value += 1u << 23;  // doubling: every G/2 entry is a normal in [0.5, 1)
  const table_source positive{"ex2.positive", "P(k) = ex2.approx.ftz.f32(k*2^-23)", p.values};
  const table_source reciprocal{"rcp", "R(k) = rcp.approx.ftz.f32(1 + k*2^-23)", r.values};
  write_table_file(data + "/mufu_ex2.bxt", {g, positive});
  write_table_file(data + "/mufu_rcp.bxt", {reciprocal});

  // Read back through the library and compare every entry with the capture.
  const auto shipped = bitexact::ptx::mufu_tables::load(data);
  std::uint64_t wrong = 0;
  for (std::uint32_t k = 0; k < (1u << 23); ++k) {
    wrong += shipped.entry(bitexact::mufu_table::ex2_negative, k) != g.values[k];
    wrong += shipped.entry(bitexact::mufu_table::ex2_positive, k) != p.values[k];
    wrong += shipped.entry(bitexact::mufu_table::rcp, k) != r.values[k];
  }
  std::printf("read back: %llu of %u entries differ from the capture\n", static_cast<unsigned long long>(wrong),
              3u << 23);
  return wrong == 0 ? 0 : 1;
}

// The capture's device and compiler, from its info.txt, for the file header.
std::string capture_provenance(const std::string& captures, const char* program) {
  std::ifstream info(captures + "/info.txt");
  std::string line, device = "unknown GPU", nvcc = "unknown nvcc";
  while (std::getline(info, line)) {
    if (line.rfind("device: ", 0) == 0) device = line.substr(8, line.find(',') - 8);
    if (line.rfind("Cuda compilation tools, ", 0) == 0) nvcc = line.substr(24);
  }
  std::string text = device + ", " + nvcc + "; " + program;
  return text.substr(0, bitexact::detail::mufu_file::provenance_bytes - 1);
}

// data/mufu_lg2.bxt from capture_lg2.cu's lg2_tables_*.bin: the chunks named
// "T[first,end) ..." put together into T (the unit over [1, 2)) and those
// named "U[...": U (over [0.5, 1)).
int make_lg2_table(const std::string& captures, const std::string& data) {
  constexpr std::uint32_t entries = 1u << 23;
  std::vector<std::uint32_t> t(entries), u(entries);
  std::vector<bool> t_filled(entries), u_filled(entries);
  for (const auto& file : std::filesystem::directory_iterator(captures)) {
    const std::string name = file.path().filename().string();
    if (name.rfind("lg2_tables_", 0) != 0) continue;
    for (const capture::table& chunk : capture::read_tables(file.path().string())) {
      char which = 0;
      unsigned first = 0, end = 0;
      if (std::sscanf(chunk.name.c_str(), "%c[%u,%u)", &which, &first, &end) != 3 || (which != 'T' && which != 'U'))
        continue;
      if (!chunk.checksum_ok || end > entries || end - first != chunk.values.size()) {
        std::fprintf(stderr, "%s: chunk '%s' fails its checksum or its range\n", name.c_str(), chunk.name.c_str());
        return 1;
      }
      auto& values = which == 'T' ? t : u;
      auto& filled = which == 'T' ? t_filled : u_filled;
      for (unsigned k = first; k < end; ++k) {
        if (filled[k]) {
          std::fprintf(stderr, "%s: %c(%u) captured twice\n", name.c_str(), which, k);
          return 1;
        }
        filled[k] = true;
        values[k] = chunk.values[k - first];
      }
    }
  }
  for (const auto* filled : {&t_filled, &u_filled})
    if (const auto missing = std::count(filled->begin(), filled->end(), false)) {
      std::fprintf(stderr, "%s: %lld entries of %c missing from lg2_tables_*.bin\n", captures.c_str(),
                   static_cast<long long>(missing), filled == &t_filled ? 'T' : 'U');
      return 1;
    }
  const table_source lg2{"lg2", "T(k) = lg2.approx.ftz.f32(1 + k*2^-23)", t, finest_grid(t)};
  const table_source below{"lg2.below", "U(k) = lg2.approx.ftz.f32((1 + k*2^-23)/2)", u, finest_grid(u)};
  write_table_file(data + "/mufu_lg2.bxt", {lg2, below}, capture_provenance(captures, "cuda/capture/capture_lg2.cu"));
  const auto shipped = bitexact::ptx::mufu_tables::load(data);
  std::uint64_t wrong = 0;
  for (std::uint32_t k = 0; k < entries; ++k)
    wrong += (shipped.entry(bitexact::mufu_table::lg2, k) != t[k]) + (shipped.entry(bitexact::mufu_table::lg2_below, k) != u[k]);
  std::printf("read back: %llu of %u entries differ from the capture\n", static_cast<unsigned long long>(wrong), 2 * entries);
  return wrong == 0 ? 0 : 1;
}

// Rewrites a shipped table file in the current format, entries unchanged:
// its provenance and rules are kept, every entry is read back and compared.
int recode(const std::string& path) {
  const std::vector<unsigned char> bytes = bitexact::detail::mufu_file::read_file(path);
  constexpr std::size_t provenance_at = sizeof bitexact::detail::mufu_file::tables_magic + 8;
  if (bytes.size() < provenance_at + bitexact::detail::mufu_file::provenance_bytes) {
    std::fprintf(stderr, "%s: too short for a table file\n", path.c_str());
    return 1;
  }
  const char* text = reinterpret_cast<const char*>(bytes.data() + provenance_at);
  const std::string provenance(text, strnlen(text, bitexact::detail::mufu_file::provenance_bytes));
  const auto tables = bitexact::detail::mufu_file::read_tables(path);
  std::vector<table_source> sources;
  for (const auto& table : tables) sources.push_back({table.name, table.rule, table.values, finest_grid(table.values)});
  write_table_file(path, sources, provenance);
  const auto again = bitexact::detail::mufu_file::read_tables(path);
  std::uint64_t wrong = 0;
  for (std::size_t t = 0; t < tables.size(); ++t)
    for (std::size_t k = 0; k < tables[t].values.size(); ++k) wrong += again[t].values[k] != tables[t].values[k];
  std::printf("read back: %llu entries differ from the file's before\n", static_cast<unsigned long long>(wrong));
  return wrong == 0 ? 0 : 1;
}

std::uint32_t zigzag(std::uint32_t difference) {
  const auto d = static_cast<std::int32_t>(difference);
  return (static_cast<std::uint32_t>(d) << 1) ^ static_cast<std::uint32_t>(d >> 31);
}

// tests/data/mufu_samples.bxs: every distinct input of ops.bin's MUFU section
// with its four GPU outputs, sorted by input and delta-coded (layout in
// docs/mufu.md) so that all of them fit in well under 1 MB.
int make_samples(const std::string& ops_path, const std::string& out_path) {
  const capture::ops_capture ops = capture::read_ops(ops_path);
  const capture::scalar_section& section = ops.section("mufu");
  const char* const outputs[4] = {"ex2.approx.ftz.f32", "ex2.approx.f32", "rcp.approx.ftz.f32", "rcp.approx.f32"};
  std::map<std::uint32_t, std::array<std::uint32_t, 4>> by_input;
  for (std::uint32_t i = 0; i < section.count; ++i) {
    std::array<std::uint32_t, 4> results;
    for (int o = 0; o < 4; ++o) results[o] = section.find(outputs[o]).values[i];
    const std::uint32_t x = section.find("x").values[i];
    if (auto [at, fresh] = by_input.emplace(x, results); !fresh && at->second != results) {
      std::fprintf(stderr, "input %08x gave two different outputs: the capture is not deterministic\n", x);
      return 1;
    }
  }
  std::vector<std::uint32_t> records;
  byte_writer stream;
  std::uint32_t previous_x = 0, previous_ex2 = 0, previous_rcp = 0;
  for (const auto& [x, r] : by_input) {
    records.insert(records.end(), {x, r[0], r[1], r[2], r[3]});
    stream.varint(x - previous_x);
    stream.varint(zigzag(r[0] - previous_ex2));
    stream.varint(zigzag(r[1] - r[0]));
    stream.varint(zigzag(r[2] - previous_rcp));
    stream.varint(zigzag(r[3] - r[2]));
    previous_x = x, previous_ex2 = r[0], previous_rcp = r[2];
  }
  byte_writer out;
  out.bytes.insert(out.bytes.end(), {'B', 'X', 'M', 'U', 'F', 'U', 'S', '\0'});
  out.u32(1);  // version
  out.u32(static_cast<std::uint32_t>(by_input.size()));
  out.u32(section.count);
  out.u32(static_cast<std::uint32_t>(stream.bytes.size()));
  out.u64(bitexact::fnv1a64_of_values(records.data(), records.size()));
  out.text(provenance, bitexact::detail::mufu_file::provenance_bytes);
  out.bytes.insert(out.bytes.end(), stream.bytes.begin(), stream.bytes.end());
  out.save(out_path);
  std::printf("%zu distinct inputs of %u samples\n", by_input.size(), section.count);
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string mode = argc == 4 || argc == 3 ? argv[1] : "";
  if (mode == "recode" && argc == 3) return recode(argv[2]);
  if (mode == "tables") return make_tables(argv[2], argv[3]);
  if (mode == "samples") return make_samples(argv[2], argv[3]);
  if (mode == "lg2") return make_lg2_table(argv[2], argv[3]);
  std::fprintf(stderr,
               "usage: make_mufu_tables tables <captures-dir> <data-dir>\n"
               "       make_mufu_tables samples <ops.bin> <samples-file>\n"
               "       make_mufu_tables lg2 <lg2-captures-dir> <data-dir>\n"
               "       make_mufu_tables recode <table-file>   (rewrite in the current format)\n");
  return 2;
} catch (const std::exception& error) {  // a capture file missing, truncated or of the wrong kind
  std::fprintf(stderr, "make_mufu_tables: %s\n", error.what());
  return 1;
}
