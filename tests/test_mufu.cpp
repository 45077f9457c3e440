// The MUFU model's tables and defining behaviours: loading and checksums,
// the errors a missing or corrupt table file gives, exact results a kernel
// author relies on, and the lookup trace. Replays of GPU captures and the
// per-entry sweeps are in test_mufu_replay.cpp.
#include <doctest/doctest.h>
#include <unistd.h>

#include <bitexact/hardware/mufu.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

using namespace bitexact;
namespace fs = std::filesystem;

namespace {

std::uint32_t bits(float x) { return from_host(x).bits; }
float32 f(float x) { return from_host(x); }
const ptx::mufu_tables& tables() { return ptx::mufu_tables::shared(); }

// A private copy of the shipped data folder, for corrupting.
struct scratch_copy {
  fs::path dir = fs::temp_directory_path() / ("bitexact_mufu_" + std::to_string(::getpid()));
  explicit scratch_copy(const std::string& from) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    for (const char* name : {"mufu_ex2.bxt", "mufu_rcp.bxt"}) fs::copy_file(fs::path(from) / name, dir / name);
  }
  ~scratch_copy() { fs::remove_all(dir); }
  void patch(const char* name, std::size_t offset, unsigned char x) const {
    std::fstream file(dir / name, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(static_cast<std::streamoff>(offset));
    const auto old = static_cast<unsigned char>(file.get());
    file.seekp(static_cast<std::streamoff>(offset));
    file.put(static_cast<char>(old ^ x));
  }
  void truncate(const char* name, std::uintmax_t size) const { fs::resize_file(dir / name, size); }
};

// The exception's message, which must name the file, the fault and the fix.
std::string load_error(const std::string& dir) {
  try {
    ptx::mufu_tables::load(dir);
  } catch (const mufu_data_error& e) {
    return e.what();
  }
  return "";
}

struct lookup_recorder {
  std::vector<mufu_lookup_event> lookups;
  std::vector<special_event> specials;
  void on(const mufu_lookup_event& e) { lookups.push_back(e); }
  void on(const special_event& e) { specials.push_back(e); }
};

}  // namespace

TEST_SUITE("tables") {
  TEST_CASE("shipped tables load and match the capture's checksums") {
    const ptx::mufu_tables& t = tables();
    // FNV-1a 64 of the raw captured arrays (.captures/FINDINGS.md); G is stored doubled, so undo that for G/2.
    std::vector<std::uint32_t> half_g(ptx::mufu_tables::size());
    for (std::uint32_t k = 0; k < half_g.size(); ++k) half_g[k] = t.entry(mufu_table::ex2_negative, k) - (1u << 23);
    CHECK(fnv1a64_of_values(half_g.data(), half_g.size()) == 0xbdb5657b3dd8bb3bull);
    CHECK(fnv1a64_of_values(t.data(mufu_table::ex2_positive), ptx::mufu_tables::size()) ==
          0xd324da30c66ff419ull);
    CHECK(fnv1a64_of_values(t.data(mufu_table::rcp), ptx::mufu_tables::size()) ==
          0xf8e542897275aba6ull);
    CHECK(t.entry(mufu_table::ex2_negative, 0) == 0x3F800000u);
    CHECK(t.entry(mufu_table::ex2_positive, 0) == 0x3F800000u);
    CHECK(t.entry(mufu_table::rcp, 0) == 0x3F800000u);
  }

  TEST_CASE("the tables are monotone, with the flat steps FINDINGS.md counts (G, P: 723,106; R: 1,439,437)") {
    const ptx::mufu_tables& t = tables();
    std::uint32_t g_rising = 0, g_flat = 0, p_falling = 0, p_flat = 0, r_rising = 0, r_flat = 0;
    for (std::uint32_t k = 1; k < ptx::mufu_tables::size(); ++k) {
      const auto step = [&](mufu_table table) {
        return static_cast<std::int64_t>(t.entry(table, k)) - t.entry(table, k - 1);
      };
      g_rising += step(mufu_table::ex2_negative) > 0, g_flat += step(mufu_table::ex2_negative) == 0;
      p_falling += step(mufu_table::ex2_positive) < 0, p_flat += step(mufu_table::ex2_positive) == 0;
      r_rising += step(mufu_table::rcp) > 0, r_flat += step(mufu_table::rcp) == 0;
    }
    CHECK(g_rising == 0);
    CHECK(p_falling == 0);
    CHECK(r_rising == 0);
    CHECK(g_flat == 723106);
    CHECK(p_flat == 723106);
    CHECK(r_flat == 1439437);
  }

  TEST_CASE("BITEXACT_DATA_DIR in the environment chooses the folder") {
    ::setenv("BITEXACT_DATA_DIR", "/some/where", 1);
    CHECK(ptx::mufu_tables::default_directory() == "/some/where");
    ::unsetenv("BITEXACT_DATA_DIR");
    CHECK(ptx::mufu_tables::default_directory() == BITEXACT_DATA_DIR);
  }
}

TEST_SUITE("errors") {
  TEST_CASE("a missing folder names the file and the environment variable") {
    const std::string message = load_error("/nonexistent/bitexact-data");
    CHECK(message.find("/nonexistent/bitexact-data/mufu_ex2.bxt") != std::string::npos);
    CHECK(message.find("cannot be opened") != std::string::npos);
    CHECK(message.find("BITEXACT_DATA_DIR") != std::string::npos);
  }

  TEST_CASE("a wrong magic is reported as not a table file") {
    scratch_copy copy(BITEXACT_DATA_DIR);
    copy.patch("mufu_rcp.bxt", 0, 0x20);
    const std::string message = load_error(copy.dir.string());
    CHECK(message.find("mufu_rcp.bxt") != std::string::npos);
    CHECK(message.find("magic") != std::string::npos);
    CHECK(message.find("BITEXACT_DATA_DIR") != std::string::npos);
  }

  TEST_CASE("a truncated file is reported as truncated") {
    scratch_copy copy(BITEXACT_DATA_DIR);
    copy.truncate("mufu_ex2.bxt", 3'000'000);
    const std::string message = load_error(copy.dir.string());
    CHECK(message.find("mufu_ex2.bxt") != std::string::npos);
    CHECK(message.find("truncated") != std::string::npos);
  }

  TEST_CASE("one flipped bit in the codes fails the checksum") {
    scratch_copy copy(BITEXACT_DATA_DIR);
    copy.patch("mufu_ex2.bxt", 1'000'000, 0x01);  // inside the first table's 2-bit codes
    const std::string message = load_error(copy.dir.string());
    CHECK(message.find("mufu_ex2.bxt") != std::string::npos);
    CHECK(message.find("checksum") != std::string::npos);
    CHECK(message.find("ex2.negative") != std::string::npos);
  }

  TEST_CASE("a folder without mufu_lg2.bxt serves ex2 and rcp; lg2 then throws, naming the file") {
    scratch_copy copy(BITEXACT_DATA_DIR);  // mufu_ex2.bxt and mufu_rcp.bxt only
    const ptx::mufu_tables older = ptx::mufu_tables::load(copy.dir.string());
    CHECK_FALSE(older.has(mufu_table::lg2));
    CHECK(ptx::ex2_approx_ftz(f(-2.75f), older).bits == 0x3E1837F0u);
    std::string message;
    try {
      ptx::lg2_approx_ftz(f(3.0f), older);
    } catch (const mufu_data_error& e) {
      message = e.what();
    }
    CHECK(message.find((copy.dir / "mufu_lg2.bxt").string()) != std::string::npos);
    CHECK(message.find("BITEXACT_DATA_DIR") != std::string::npos);
  }

  TEST_CASE("mufu_lg2.bxt's tables, coded as second differences, decode; an order the library lacks is refused") {
    scratch_copy copy(BITEXACT_DATA_DIR);
    fs::copy_file(fs::path(BITEXACT_DATA_DIR) / "mufu_lg2.bxt", copy.dir / "mufu_lg2.bxt");
    CHECK(ptx::mufu_tables::load(copy.dir.string()).has(mufu_table::lg2));  // every entry passed its checksum
    // The first table's order field: after the file header (8 + 4 + 4 + 128 bytes) and the table's 108 bytes
    // of name, rule, counts, checksum and grid; 2 XOR 1 is 3.
    copy.patch("mufu_lg2.bxt", 144 + 108, 0x01);
    const std::string message = load_error(copy.dir.string());
    CHECK(message.find("mufu_lg2.bxt") != std::string::npos);
    CHECK(message.find("order 3") != std::string::npos);
    CHECK(message.find("'lg2'") != std::string::npos);
  }

  TEST_CASE("an intact copy loads") {
    scratch_copy copy(BITEXACT_DATA_DIR);
    CHECK(load_error(copy.dir.string()).empty());
  }
}

TEST_SUITE("model") {
  TEST_CASE("ex2.approx.ftz of an integer is the exact power of two, from -126 to 127") {
    for (int n = -126; n <= 127; ++n) {
      CAPTURE(n);
      CHECK(ptx::ex2_approx_ftz(f(static_cast<float>(n))).bits == bits(std::ldexp(1.0f, n)));
    }
    CHECK(ptx::ex2_approx_ftz(f(0.0f)).bits == 0x3F800000u);   // P = 1 at the row maximum
    CHECK(ptx::ex2_approx_ftz(f(-0.0f)).bits == 0x3F800000u);
    CHECK(ptx::ex2_approx_ftz(f(-127.0f)).bits == 0u);  // flushed
    CHECK(ptx::ex2_approx_ftz(f(128.0f)).bits == 0x7F800000u);
  }

  TEST_CASE("ex2.approx.ftz specials: NaN is canonical, -inf gives +0, +inf gives +inf, subnormal x gives 1") {
    CHECK(ptx::ex2_approx_ftz(float32::from_bits(0xFFC00001u)).bits == 0x7FFFFFFFu);
    CHECK(ptx::ex2_approx_ftz(float32::from_bits(0x7F800001u)).bits == 0x7FFFFFFFu);
    CHECK(ptx::ex2_approx_ftz(float32::infinity(true)).bits == 0u);
    CHECK(ptx::ex2_approx_ftz(float32::infinity()).bits == 0x7F800000u);
    CHECK(ptx::ex2_approx_ftz(float32::from_bits(0x00000001u)).bits == 0x3F800000u);
    CHECK(ptx::ex2_approx_ftz(float32::from_bits(0x807FFFFFu)).bits == 0x3F800000u);
  }

  TEST_CASE("ex2.approx.ftz truncates an off-grid input to the 2^-23 grid") {
    // Every float in [1, 2) or above is on the grid; below 1 the bits under 2^-23 are cut away.
    const float32 just_above_half = float32::from_bits(0x3F000001u);  // 0.5 + 2^-24, below the next grid point
    CHECK(ptx::ex2_approx_ftz(just_above_half).bits == ptx::ex2_approx_ftz(f(0.5f)).bits);
    const float32 minus_just_above_half = float32::from_bits(0xBF000001u);
    CHECK(ptx::ex2_approx_ftz(minus_just_above_half).bits == ptx::ex2_approx_ftz(f(-0.5f)).bits);
  }

  TEST_CASE("ex2.approx (non-FTZ) reaches subnormal results through the rounded square") {
    // GPU values from .captures/FINDINGS.md.
    CHECK(ptx::ex2_approx(f(-127.0f)).bits == 0x003FFFFFu);
    CHECK(ptx::ex2_approx(f(-126.5f)).bits == 0x005A8279u);
    CHECK(ptx::ex2_approx(f(-149.0f)).bits == 0x00000001u);
    CHECK(ptx::ex2_approx(f(-126.0f)).bits == 0x00800000u);  // not below -126: the bare lookup
    CHECK(ptx::ex2_approx(f(-151.0f)).bits == 0u);
    CHECK(ptx::ex2_approx(float32::infinity(true)).bits == 0u);
    CHECK(ptx::ex2_approx(float32::from_bits(0xFFFFFFFFu)).bits == 0x7FFFFFFFu);
  }

  TEST_CASE("rcp.approx.ftz: exact for powers of two, signed specials, subnormal inputs read as zero") {
    CHECK(ptx::rcp_approx_ftz(f(1.0f)).bits == 0x3F800000u);
    CHECK(ptx::rcp_approx_ftz(f(-4.0f)).bits == bits(-0.25f));
    CHECK(ptx::rcp_approx_ftz(f(0x1p-126f)).bits == bits(0x1p126f));
    CHECK(ptx::rcp_approx_ftz(f(0x1p126f)).bits == bits(0x1p-126f));
    CHECK(ptx::rcp_approx_ftz(f(0x1p127f)).bits == 0u);  // 2^-127 flushed
    CHECK(ptx::rcp_approx_ftz(f(-0x1p127f)).bits == 0x80000000u);
    CHECK(ptx::rcp_approx_ftz(f(-0.0f)).bits == 0xFF800000u);
    CHECK(ptx::rcp_approx_ftz(float32::from_bits(0x00000001u)).bits == 0x7F800000u);
    CHECK(ptx::rcp_approx_ftz(float32::infinity(true)).bits == 0x80000000u);
    CHECK(ptx::rcp_approx_ftz(float32::from_bits(0x7FC00000u)).bits == 0x7FFFFFFFu);
  }

  TEST_CASE("rcp.approx (non-FTZ) keeps subnormal inputs and results by rescaling") {
    CHECK(ptx::rcp_approx(f(0x1p127f)).bits == bits(0x1p-127f));      // subnormal result, exact
    CHECK(ptx::rcp_approx(f(-0x1p-130f)).bits == 0xFF800000u);        // -2^130 overflows in the final multiply
    CHECK(ptx::rcp_approx(f(0x1p-127f)).bits == bits(0x1p127f));      // subnormal input
    CHECK(ptx::rcp_approx(f(0.0f)).bits == 0x7F800000u);
    CHECK(ptx::rcp_approx(float32::infinity(true)).bits == 0x80000000u);
  }
}

TEST_SUITE("trace") {
  TEST_CASE("an ex2 lookup reports table, index, entry and scale: x = -2.75") {
    // m = 2.75, q = trunc(2.75 * 2^23) = 2 * 2^23 + 6291456: n = 2, k = 0.75 * 2^23.
    lookup_recorder trace;
    const float32 result = ptx::ex2_approx_ftz(f(-2.75f), tables(), trace);
    REQUIRE(trace.lookups.size() == 1);
    CHECK(trace.lookups[0].table == mufu_table::ex2_negative);
    CHECK(trace.lookups[0].index == 6291456u);
    CHECK(trace.lookups[0].scale == -2);
    CHECK(trace.lookups[0].entry == tables().entry(mufu_table::ex2_negative, 6291456u));
    CHECK(result.bits == trace.lookups[0].entry - (2u << 23));  // G(k) * 2^-2: the exponent field drops by 2
    char line[96];
    std::snprintf(line, sizeof line, "ex2.approx.ftz(-2.75): G(6291456) = 0x%08X, result 0x%08X = %.9g",
                  trace.lookups[0].entry, result.bits, static_cast<double>(to_host(result)));
    MESSAGE(line);
  }

  TEST_CASE("a flushed ex2 reports the lookup and the flush") {
    lookup_recorder trace;
    CHECK(ptx::ex2_approx_ftz(f(-130.0f), tables(), trace).bits == 0u);
    REQUIRE(trace.lookups.size() == 1);
    CHECK(trace.lookups[0].scale == -130);
    REQUIRE(trace.specials.size() == 1);
    CHECK(trace.specials[0].reason == special_reason::flushed_to_zero);
  }
}
