// The lg2 model (mufu.hpp: lg2.approx.ftz.f32, lg2.approx.f32, and __logf as
// lg2.approx.f32 times 0.693147182 in one FMUL) against the GPU: the captured
// samples (tests/data/ops_lg2.bin) including every special input, the raw
// capture when present, and the structure the model has by construction.
//
// The table (data/mufu_lg2.bxt) and the samples come from one run of
// cuda/capture/capture_lg2.cu (an H100, docs/mufu.md).
#include <doctest/doctest.h>

#include "mufu_comparisons.hpp"

#include <analysis/capture_files.hpp>
#include <bitexact/hardware/mufu.hpp>
#include <filesystem>
#include <string>
#include <vector>

using namespace bitexact;

namespace {

constexpr std::uint32_t grid = ptx::mufu_tables::size();  // 2^23

const ptx::mufu_tables& tables() { return ptx::mufu_tables::shared(); }

// The table ships in data/mufu_lg2.bxt: its absence is a failure, not a skip.
bool lg2_table_absent() {
  REQUIRE_MESSAGE(tables().has(mufu_table::lg2), "no lg2 table (data/mufu_lg2.bxt) in the data folder");
  return false;
}

using testing::comparisons;
using testing::hex;

bool positive_normal(std::uint32_t x) { return x >= 0x00800000u && x < 0x7F800000u; }

// __logf(x) as nvcc 13 compiles it without fast-math: lg2.approx.f32, then
// mul.rn.f32 by 0f3F317218 (PTX in cuda/capture/capture_lg2.cu's sass_logf).
float32 logf_intrinsic(float32 x) {
  return ptx::mul_f32(ptx::lg2_approx(x), float32::from_bits(0x3F317218u));
}

struct lg2_recorder {
  std::vector<mufu_lookup_event> lookups;
  void on(const mufu_lookup_event& e) { lookups.push_back(e); }
};

}  // namespace

TEST_SUITE("lg2") {
  TEST_CASE("every entry of T through the model: lg2.approx.ftz(1 + k*2^-23) is T(k), 2^23 inputs") {
    if (lg2_table_absent()) return;
    comparisons outputs;
    for (std::uint32_t k = 0; k < grid; ++k) {
      const std::uint32_t one_plus = 0x3F800000u | k;
      outputs.compare("lg2(1+k/2^23)", one_plus, tables().entry(mufu_table::lg2, k),
                      ptx::lg2_approx_ftz(float32::from_bits(one_plus)).bits);
    }
    MESSAGE("compared " << outputs.compared << " grid inputs, mismatches " << outputs.mismatched);
    CHECK(outputs.compared == grid);
    CHECK_MESSAGE(outputs.mismatched == 0, outputs.first);
  }

  TEST_CASE("the shipped T never decreases with k") {
    if (lg2_table_absent()) return;
    std::uint32_t falling = 0, flat = 0;
    for (std::uint32_t k = 1; k < grid; ++k) {
      const float previous = to_host(float32::from_bits(tables().entry(mufu_table::lg2, k - 1)));
      const float current = to_host(float32::from_bits(tables().entry(mufu_table::lg2, k)));
      falling += current < previous, flat += current == previous;
    }
    MESSAGE("T: " << flat << " flat steps of " << grid - 1);
    CHECK(falling == 0);
  }

  TEST_CASE("lg2.approx is the FTZ form for normal inputs, and the 2^24-scaled FTZ form minus 24 below") {
    if (lg2_table_absent()) return;
    std::uint64_t normal = 0, subnormal = 0;
    for (std::uint64_t pattern = 0; pattern < (std::uint64_t{1} << 32); pattern += 4093) {
      const float32 x = float32::from_bits(static_cast<std::uint32_t>(pattern));
      if ((x.bits & 0x7FFFFFFFu) >= 0x00800000u) {
        ++normal;
        REQUIRE(ptx::lg2_approx(x).bits == ptx::lg2_approx_ftz(x).bits);
      } else {
        ++subnormal;
        const float32 scaled = ptx::mul_f32(x, from_host(0x1p24f));
        REQUIRE(ptx::lg2_approx(x).bits == ptx::add_f32(ptx::lg2_approx_ftz(scaled), from_host(-24.0f)).bits);
      }
    }
    MESSAGE("every 4093rd pattern: " << normal << " normal, NaN or infinite inputs, " << subnormal << " zero or subnormal");
    CHECK(normal + subnormal == (std::uint64_t{1} << 32) / 4093 + 1);
  }

  TEST_CASE("an lg2 lookup reports the table, k, T(k) and the integer added: x = 3") {
    if (lg2_table_absent()) return;
    // 3 = 2^1 * 1.5: e = 1, k = 0.5 * 2^23.
    lg2_recorder trace;
    const float32 result = ptx::lg2_approx_ftz(from_host(3.0f), tables(), trace);
    REQUIRE(trace.lookups.size() == 1);
    CHECK(trace.lookups[0].table == mufu_table::lg2);
    CHECK(trace.lookups[0].index == (1u << 22));
    CHECK(trace.lookups[0].scale == 1);
    CHECK(trace.lookups[0].entry == tables().entry(mufu_table::lg2, 1u << 22));
    // e + T(k) rounded toward zero (the GPU sweep H3).
    CHECK(result.bits ==
          ptx::add_f32(from_host(1.0f), float32::from_bits(trace.lookups[0].entry), rounding_mode::toward_zero).bits);
  }

  TEST_CASE("below 1 the lookup is in U and adds e + 1: x = 0.375") {
    if (lg2_table_absent()) return;
    // 0.375 = 2^-1 * 0.75: e = -2, k = 0.5 * 2^23, U(k) = lg2.approx.ftz(0.75).
    lg2_recorder trace;
    const float32 result = ptx::lg2_approx_ftz(from_host(0.375f), tables(), trace);
    REQUIRE(trace.lookups.size() == 1);
    CHECK(trace.lookups[0].table == mufu_table::lg2_below);
    CHECK(trace.lookups[0].index == (1u << 22));
    CHECK(trace.lookups[0].scale == -1);
    CHECK(result.bits == ptx::add_f32(from_host(-1.0f), float32::from_bits(trace.lookups[0].entry),
                                      rounding_mode::toward_zero).bits);
    CHECK(ptx::lg2_approx_ftz(from_host(0.75f)).bits == trace.lookups[0].entry);  // e + 1 = 0 adds nothing
  }

  TEST_CASE("every captured lg2 sample: lg2.approx.ftz, lg2.approx and __logf give the GPU's bits") {
    if (lg2_table_absent()) return;
    const capture::replay_file file = capture::read_replay_file(std::string(BITEXACT_TEST_DATA_DIR) + "/ops_lg2.bin");
    const capture::scalar_section samples = capture::read_section(file);
    const auto& x = samples.find("x").values;
    const auto& ftz = samples.find("lg2.approx.ftz.f32").values;
    const auto& full = samples.find("lg2.approx.f32").values;
    const auto& logf = samples.find("__logf").values;
    comparisons normal, special;
    std::uint64_t below_one = 0;
    for (std::uint32_t i = 0; i < samples.count; ++i) {
      const float32 input = float32::from_bits(x[i]);
      below_one += positive_normal(x[i]) && x[i] < 0x3F800000u;
      comparisons& outputs = positive_normal(x[i]) ? normal : special;
      outputs.compare("lg2.approx.ftz.f32", x[i], ftz[i], ptx::lg2_approx_ftz(input).bits);
      outputs.compare("lg2.approx.f32", x[i], full[i], ptx::lg2_approx(input).bits);
      outputs.compare("__logf", x[i], logf[i], logf_intrinsic(input).bits);
    }
    MESSAGE(samples.count << " samples: " << normal.compared << " outputs of positive normal inputs ("
                          << below_one << " inputs below 1), mismatches " << normal.mismatched << "; "
                          << special.compared << " of zeros, subnormals, negatives, infinities and NaNs, mismatches "
                          << special.mismatched);
    CHECK(normal.compared + special.compared == 3ull * samples.count);
    CHECK(below_one > 1000);
    CHECK(special.compared >= 3 * 20);  // the capture starts with 52 special and edge inputs
    CHECK_MESSAGE(normal.mismatched == 0, normal.first);
    CHECK_MESSAGE(special.mismatched == 0, special.first);
  }
}

// Its own ctest (mufu_lg2_captures): the raw capture is some 40 MB outside the
// repository, so CI never has it; its absence is reported as a skip.
TEST_SUITE("lg2_captures") {
  TEST_CASE("the raw lg2 tables T and U in .captures/lg2 (when present): 2 x 2^23 outputs") {
    const std::string dir = std::string(BITEXACT_CAPTURE_DIR) + "/lg2";
    if (!std::filesystem::exists(dir + "/lg2_tables_0.bin") || !tables().has(mufu_table::lg2)) {
      MESSAGE("SKIPPED: no raw captures (lg2_tables_*.bin) in " << dir << ", or no lg2 table; "
                                                                      "cuda/capture/README.md says how to make them");
      return;
    }
    comparisons outputs;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().filename().string().rfind("lg2_tables_", 0) != 0) continue;
      for (const capture::table& chunk : capture::read_tables(entry.path().string())) {
        REQUIRE(chunk.checksum_ok);
        char which = 0;
        unsigned first = 0, end = 0;
        REQUIRE(std::sscanf(chunk.name.c_str(), "%c[%u,%u)", &which, &first, &end) == 3);
        REQUIRE(end - first == chunk.values.size());
        // T(k) at 1 + k*2^-23 (e = 0); U(k) at (1 + k*2^-23)/2 (e = -1).
        const std::uint32_t binade = which == 'T' ? 0x3F800000u : 0x3F000000u;
        for (unsigned k = first; k < end; ++k)
          outputs.compare(std::string(1, which) + "(k)", binade | k, chunk.values[k - first],
                          ptx::lg2_approx_ftz(float32::from_bits(binade | k)).bits);
      }
    }
    MESSAGE("compared " << outputs.compared << " captured outputs, mismatches " << outputs.mismatched);
    CHECK(outputs.compared == 2ull * grid);
    CHECK_MESSAGE(outputs.mismatched == 0, outputs.first);
  }
}
