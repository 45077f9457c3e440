// Replays real GPU results (tests/data, cut from H200 captures by
// tools/make_test_data.cpp) through the hardware models and demands the same
// bits for every case. Setting BITEXACT_REPLAY_DATA_DIR replays another
// directory of files in the same layout, e.g. a whole capture (make_test_data --all).
#include <doctest/doctest.h>

#include <bitexact/hardware/alu.hpp>
#include <bitexact/hardware/mma.hpp>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>

#include <analysis/capture_files.hpp>

using namespace bitexact;

namespace {

std::string data_path(const std::string& name) {
  const char* override_dir = std::getenv("BITEXACT_REPLAY_DATA_DIR");
  return std::string(override_dir ? override_dir : BITEXACT_TEST_DATA_DIR) + "/" + name;
}

std::string hex(std::uint32_t bits, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%0*X", digits, bits);
  return buf;
}

// The events of one fused tensor-core step, kept to explain a mismatch.
struct fused_step_recorder {
  std::string text;
  void on(const fused_term_event& e) {
    char line[200];
    std::snprintf(line, sizeof line,
                  "    term %3d: %c%llx * 2^%d (competes at 2^%d) -> kept %lld units%s\n", e.index, e.sign ? '-' : '+',
                  static_cast<unsigned long long>(e.significand), e.exponent, e.nominal_exponent,
                  static_cast<long long>(e.kept), e.truncated ? ", bits cut" : "");
    text += line;
  }
  void on(const fused_sum_event& e) {
    text += "    e_max " + std::to_string(e.max_exponent) + ", unit 2^" + std::to_string(e.lsb_exponent) +
            ", exact sum of kept terms " + std::to_string(e.sum) + " units\n";
  }
  void on(const rounding_event& e) {
    text += "    rounding: kept 0x" + hex(static_cast<std::uint32_t>(e.kept), 8) + " at 2^" +
            std::to_string(e.lsb_exponent) + ", guard " + std::to_string(e.guard) + " round " +
            std::to_string(e.round) + " sticky " + std::to_string(e.sticky) + (e.increment ? ", round up\n" : ", keep\n");
  }
  void on(const special_event& e) { text += "    special case " + std::to_string(static_cast<int>(e.reason)) + "\n"; }
  void on(const operation_event&) {}
  void on(const operand_event&) {}
  void on(const alignment_event&) {}
  void on(const exact_event&) {}
  void on(const normalization_event&) {}
  void on(const result_event&) {}
};
static_assert(observer<fused_step_recorder>);

struct replay_count {
  std::uint64_t compared = 0, mismatches = 0;
  void print(const std::string& what) const {
    std::printf("replay %-58s compared %8llu  mismatches %llu\n", what.c_str(),
                static_cast<unsigned long long>(compared), static_cast<unsigned long long>(mismatches));
  }
};

// ---- tensor cores ----

// mma.sync m16n8k16 and each 16-row block of wgmma m64n8k16 are the same
// fused step per output, so both replay through mma_m16n8k16.
template <format Acc, format In>
replay_count replay_tiles(const capture::mma_tiles& file, std::map<std::uint32_t, int>& tiles_per_class) {
  replay_count count;
  const int digits = Acc.width() / 4;
  for (const auto& tile : file.tiles) {
    ++tiles_per_class[tile.tile_class];
    for (std::uint32_t row0 = 0; row0 < file.m; row0 += 16) {
      std::array<value<In>, 256> a;
      std::array<value<In>, 128> b;  // column-major: element (k, n) at n * 16 + k
      std::array<value<Acc>, 128> c, d;
      for (int i = 0; i < 16; ++i)
        for (int k = 0; k < 16; ++k) a[i * 16 + k] = value<In>::from_bits(tile.a[(row0 + i) * 16 + k]);
      for (int k = 0; k < 16; ++k)
        for (int n = 0; n < 8; ++n) b[n * 16 + k] = value<In>::from_bits(tile.b[k * 8 + n]);
      for (int i = 0; i < 128; ++i) c[i] = value<Acc>::from_bits(tile.c[row0 * 8 + i]);
      mma_m16n8k16<Acc, In>(sm90_tensor_core, a, b, c, d);
      for (int i = 0; i < 128; ++i) {
        ++count.compared;
        const std::uint32_t gpu = tile.d[row0 * 8 + i];
        if (d[i].bits == gpu) continue;
        if (++count.mismatches > 5) continue;
        const int m = i / 8, n = i % 8;
        std::string report = "tile " + std::to_string(tile.source_index) + " (class " +
                             std::to_string(tile.tile_class) + ") output D[" + std::to_string(row0 + m) + "][" +
                             std::to_string(n) + "]: gpu " + hex(gpu, digits) + " model " + hex(d[i].bits, digits) +
                             "\n  A row:";
        for (int k = 0; k < 16; ++k) report.append(" ").append(hex(a[m * 16 + k].bits, 4));
        report += "\n  B column:";
        for (int k = 0; k < 16; ++k) report.append(" ").append(hex(b[n * 16 + k].bits, 4));
        report += "\n  C: " + hex(c[i].bits, digits) + "\n  model trace:\n";
        fused_step_recorder recorder;
        fused_multiply_add_step<Acc, In>(sm90_tensor_core, std::span<const value<In>>(&a[m * 16], 16),
                                         std::span<const value<In>>(&b[n * 16], 16), c[i], recorder);
        report += recorder.text;
        FAIL_CHECK(report);
      }
    }
  }
  return count;
}

void replay_mma_file(const std::string& name, std::uint32_t variant, std::uint32_t rows,
                     bool every_class_present = true) {
  const capture::replay_file file = capture::read_replay_file(data_path(name));
  const capture::mma_tiles tiles = capture::read_tiles(file);
  REQUIRE(tiles.variant == variant);
  REQUIRE(tiles.m == rows);
  std::map<std::uint32_t, int> tiles_per_class;
  const replay_count count = variant == 1   ? replay_tiles<fp32, fp16>(tiles, tiles_per_class)
                             : variant == 2 ? replay_tiles<fp16, fp16>(tiles, tiles_per_class)
                                            : replay_tiles<fp32, bf16>(tiles, tiles_per_class);
  count.print(name + " (" + std::to_string(tiles.tiles.size()) + " tiles)");
  CHECK(count.mismatches == 0);
  // Every structured class and both layout checks are present, so the
  // replay covers what the capture was built to probe.
  if (every_class_present) {
    for (std::uint32_t cls : {100u, 101u, 0u, 1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u, 9u, 10u, 11u}) {
      CAPTURE(cls);
      CHECK(tiles_per_class[cls] > 0);
    }
  }
  // Every output of every tile the file's header counts, and a file of no tiles fails.
  CHECK(!tiles.tiles.empty());
  CHECK(count.compared == tiles.tiles.size() * rows * 8);
}

// ---- narrow-input wgmma (cuda/capture/capture_lowp.cu): fp8 k32, tf32 k8 ----

// An A or B element as the capture stores it: an fp8 byte, or the whole
// 32-bit register of a tf32 operand (whose low 13 bits the hardware ignores).
template <format F>
value<F> narrow_operand(std::uint32_t stored) {
  if constexpr (F == tf32) return tf32_operand(stored);
  else return value<F>::from_bits(stored);
}

// Every output D[i][j] of every tile through fused_dot on the unit; a
// mismatch reports the operands and the traced step.
template <format Acc, format InA, format InB>
replay_count replay_narrow_tiles(const capture::mma_tiles& file, const fused_sum_unit& unit,
                                 std::map<std::uint32_t, int>& tiles_per_class) {
  replay_count count;
  const int digits = Acc.width() / 4;
  const std::size_t k_size = file.k;
  for (const auto& tile : file.tiles) {
    ++tiles_per_class[tile.tile_class];
    for (std::uint32_t i = 0; i < file.m; ++i)
      for (std::uint32_t j = 0; j < file.n; ++j) {
        std::array<value<InA>, 32> a;
        std::array<value<InB>, 32> b;
        for (std::size_t k = 0; k < k_size; ++k) {
          a[k] = narrow_operand<InA>(tile.a[i * k_size + k]);
          b[k] = narrow_operand<InB>(tile.b[k * file.n + j]);
        }
        const value<Acc> c = value<Acc>::from_bits(tile.c[i * file.n + j]);
        const std::span<const value<InA>> a_row(a.data(), k_size);
        const std::span<const value<InB>> b_column(b.data(), k_size);
        const std::uint32_t model = fused_dot<Acc, InA, InB>(unit, a_row, b_column, c).result.bits;
        const std::uint32_t gpu = tile.d[i * file.n + j];
        ++count.compared;
        if (model == gpu || ++count.mismatches > 5) continue;
        std::string report = "tile " + std::to_string(tile.source_index) + " (class " + std::to_string(tile.tile_class) +
                             ") output D[" + std::to_string(i) + "][" + std::to_string(j) + "]: gpu " + hex(gpu, digits) +
                             " model " + hex(model, digits) + "\n  A row:";
        for (std::size_t k = 0; k < k_size; ++k) report.append(" ").append(hex(tile.a[i * k_size + k], InA == tf32 ? 8 : 2));
        report += "\n  B column:";
        for (std::size_t k = 0; k < k_size; ++k) report.append(" ").append(hex(tile.b[k * file.n + j], InB == tf32 ? 8 : 2));
        report += "\n  C: " + hex(c.bits, digits) + "\n  model trace of the step:\n";
        fused_step_recorder recorder;
        fused_multiply_add_step<Acc, InA, InB>(unit, a_row, b_column, c, recorder);
        report += recorder.text;
        FAIL_CHECK(report);
      }
  }
  return count;
}

// One capture_lowp replay file: variant 4-7 fp8 into f32, 8-11 fp8 into f16
// (A x B = e4m3 x e4m3, e4m3 x e5m2, e5m2 x e4m3, e5m2 x e5m2), 12 tf32 into f32.
void replay_narrow_file(const std::string& name, std::uint32_t variant, std::uint64_t expected_outputs) {
  const capture::replay_file file = capture::read_replay_file(data_path(name));
  const capture::mma_tiles tiles = capture::read_tiles(file);
  REQUIRE(tiles.variant == variant);
  REQUIRE(tiles.m == 64);
  REQUIRE(tiles.k == capture::variant_k(variant));
  std::map<std::uint32_t, int> per_class;
  const fused_sum_unit& fp8 = sm90_tensor_core_fp8;
  replay_count count;
  switch (variant) {
    case 4: count = replay_narrow_tiles<fp32, e4m3, e4m3>(tiles, fp8, per_class); break;
    case 5: count = replay_narrow_tiles<fp32, e4m3, e5m2>(tiles, fp8, per_class); break;
    case 6: count = replay_narrow_tiles<fp32, e5m2, e4m3>(tiles, fp8, per_class); break;
    case 7: count = replay_narrow_tiles<fp32, e5m2, e5m2>(tiles, fp8, per_class); break;
    case 8: count = replay_narrow_tiles<fp16, e4m3, e4m3>(tiles, fp8, per_class); break;
    case 9: count = replay_narrow_tiles<fp16, e4m3, e5m2>(tiles, fp8, per_class); break;
    case 10: count = replay_narrow_tiles<fp16, e5m2, e4m3>(tiles, fp8, per_class); break;
    case 11: count = replay_narrow_tiles<fp16, e5m2, e5m2>(tiles, fp8, per_class); break;
    default: count = replay_narrow_tiles<fp32, tf32, tf32>(tiles, sm90_tensor_core_k8, per_class);
  }
  count.print(name + " (" + std::to_string(tiles.tiles.size()) + " tiles)");
  CHECK(count.mismatches == 0);
  // Both layout checks and every class capture_lowp.cu writes (the tf32
  // register's low bits, 13, for tf32 only) are present.
  for (std::uint32_t cls : {100u, 101u, 0u, 1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u, 9u, 10u, 11u, 12u, 14u, 15u}) {
    CAPTURE(cls);
    CHECK(per_class[cls] > 0);
  }
  if (capture::is_tf32_variant(variant)) CHECK(per_class[13] > 0);
  CHECK(count.compared == tiles.tiles.size() * 64 * 8);
  // The count the test's name states, for the committed file (a whole capture replayed instead has more).
  if (!std::getenv("BITEXACT_REPLAY_DATA_DIR")) CHECK(count.compared == expected_outputs);
}

// ---- scalar instructions ----

using scalar_model = std::function<std::uint32_t(std::uint32_t a, std::uint32_t b, std::uint32_t c)>;

// The model of one fp32 instruction named as PTX writes it: add.rm.ftz.f32.
scalar_model fp32_model(const std::string& name) {
  const std::string op = name.substr(0, 3), mode = name.substr(4, 2);
  const bool ftz = name.find(".ftz") != std::string::npos;
  const rounding_mode r = mode == "rn"   ? rounding_mode::nearest_even
                          : mode == "rz" ? rounding_mode::toward_zero
                          : mode == "rm" ? rounding_mode::downward
                          : mode == "rp" ? rounding_mode::upward
                                         : throw std::runtime_error("unknown rounding in " + name);
  if (op == "add") return [=](auto a, auto b, auto) { return ptx::add_f32(float32{a}, float32{b}, r, ftz).bits; };
  if (op == "mul") return [=](auto a, auto b, auto) { return ptx::mul_f32(float32{a}, float32{b}, r, ftz).bits; };
  if (op == "fma")
    return [=](auto a, auto b, auto c) { return ptx::fma_f32(float32{a}, float32{b}, float32{c}, r, ftz).bits; };
  throw std::runtime_error("no model for " + name);
}

scalar_model bf16_model(const std::string& name) {
  auto bf = [](std::uint32_t bits) { return bfloat16::from_bits(bits); };
  if (name == "add.rn.bf16") return [=](auto a, auto b, auto) { return std::uint32_t{ptx::add_rn_bf16(bf(a), bf(b)).bits}; };
  if (name == "mul.rn.bf16") return [=](auto a, auto b, auto) { return std::uint32_t{ptx::mul_rn_bf16(bf(a), bf(b)).bits}; };
  if (name == "fma.rn.bf16")
    return [=](auto a, auto b, auto c) { return std::uint32_t{ptx::fma_rn_bf16(bf(a), bf(b), bf(c)).bits}; };
  throw std::runtime_error("no model for " + name);
}

scalar_model cvt_model(const std::string& name) {
  if (name == "cvt.rn.bf16x2.f32 d,a,b") return [](auto a, auto b, auto) { return ptx::cvt_rn_bf16x2_f32(float32{a}, float32{b}); };
  if (name == "cvt.rn.f16x2.f32 d,a,b") return [](auto a, auto b, auto) { return ptx::cvt_rn_f16x2_f32(float32{a}, float32{b}); };
  if (name == "cvt.rn.bf16.f32 d,a") return [](auto a, auto, auto) { return std::uint32_t{ptx::cvt_rn_bf16_f32(float32{a}).bits}; };
  if (name == "cvt.rz.bf16.f32 d,a") return [](auto a, auto, auto) { return std::uint32_t{ptx::cvt_rz_bf16_f32(float32{a}).bits}; };
  if (name == "cvt.rn.satfinite.bf16.f32 d,a")
    return [](auto a, auto, auto) { return std::uint32_t{ptx::cvt_rn_satfinite_bf16_f32(float32{a}).bits}; };
  if (name == "cvt.rn.relu.bf16.f32 d,a")
    return [](auto a, auto, auto) { return std::uint32_t{ptx::cvt_rn_relu_bf16_f32(float32{a}).bits}; };
  throw std::runtime_error("no model for " + name);
}

// Every output array of the section is an instruction with a model; an
// instruction without one fails the test rather than being skipped.
void replay_section_file(const std::string& name, const std::function<scalar_model(const std::string&)>& model_of) {
  const capture::replay_file file = capture::read_replay_file(data_path(name));
  const capture::scalar_section section = capture::read_section(file);
  const auto* a = &section.find("a");
  const auto* b = section.arrays.size() > 1 && section.arrays[1].is_input ? &section.find("b") : a;
  const auto* c = section.arrays.size() > 2 && section.arrays[2].is_input ? &section.find("c") : a;
  replay_count total;
  std::uint64_t outputs = 0;
  for (const auto& output : section.arrays) {
    if (output.is_input) continue;
    ++outputs;
    CAPTURE(output.name);
    scalar_model model;
    REQUIRE_NOTHROW(model = model_of(output.name));
    replay_count count;
    const int digits = static_cast<int>(output.element_bytes) * 2;
    for (std::uint32_t i = 0; i < section.count; ++i) {
      ++count.compared;
      const std::uint32_t expected = model(a->values[i], b->values[i], c->values[i]), gpu = output.values[i];
      if (expected == gpu) continue;
      if (++count.mismatches <= 5)
        FAIL_CHECK(output.name << " a " << hex(a->values[i], a->element_bytes * 2) << " b "
                               << hex(b->values[i], b->element_bytes * 2) << " c " << hex(c->values[i], c->element_bytes * 2)
                               << ": gpu " << hex(gpu, digits) << " model " << hex(expected, digits));
    }
    count.print(name + " " + output.name);
    total.compared += count.compared;
    total.mismatches += count.mismatches;
  }
  CHECK(total.mismatches == 0);
  // Every case the section's header counts, through every output, and a section of none fails.
  CHECK(outputs > 0);
  CHECK(section.count > 0);
  CHECK(total.compared == outputs * section.count);
}

}  // namespace

TEST_CASE("replay: H200 mma.sync m16n8k16 bf16 -> f32 tiles match sm90_tensor_core bit for bit") {
  replay_mma_file("mma_bf16_f32.bin", 0, 16);
}
TEST_CASE("replay: H200 mma.sync m16n8k16 f16 -> f32 tiles match sm90_tensor_core bit for bit") {
  replay_mma_file("mma_f16_f32.bin", 1, 16);
}
TEST_CASE("replay: H200 mma.sync m16n8k16 f16 -> f16 tiles match sm90_tensor_core bit for bit") {
  replay_mma_file("mma_f16_f16.bin", 2, 16);
}
TEST_CASE("replay: H200 wgmma m64n8k16 bf16 -> f32 tiles match sm90_tensor_core bit for bit") {
  replay_mma_file("wgmma_bf16_f32.bin", 3, 64);
}
// Tiles saved by probe_mma --save: every one holds an output whose exact sum is
// negative but rounds to zero, or is a sum of negative zeros; the GPU gave +0.
TEST_CASE("replay: H200 tensor cores never return -0 (zero-sign tiles from probe_mma, all four variants)") {
  replay_mma_file("zero_sign_mma_bf16_f32.bin", 0, 16, false);
  replay_mma_file("zero_sign_mma_f16_f32.bin", 1, 16, false);
  replay_mma_file("zero_sign_mma_f16_f16.bin", 2, 16, false);
  replay_mma_file("zero_sign_wgmma_bf16_f32.bin", 3, 64, false);
}
TEST_CASE("replay: H200 wgmma m64n8k32 e4m3 x e4m3 -> f32, 16,384 outputs, match sm90_tensor_core_fp8 bit for bit") {
  replay_narrow_file("wgmma_e4m3_e4m3_f32.bin", 4, 16384);
}
TEST_CASE("replay: H200 wgmma m64n8k32 e4m3 x e5m2 -> f32, 16,384 outputs, match sm90_tensor_core_fp8 bit for bit") {
  replay_narrow_file("wgmma_e4m3_e5m2_f32.bin", 5, 16384);
}
TEST_CASE("replay: H200 wgmma m64n8k32 e5m2 x e4m3 -> f32, 16,384 outputs, match sm90_tensor_core_fp8 bit for bit") {
  replay_narrow_file("wgmma_e5m2_e4m3_f32.bin", 6, 16384);
}
TEST_CASE("replay: H200 wgmma m64n8k32 e5m2 x e5m2 -> f32, 16,384 outputs, match sm90_tensor_core_fp8 bit for bit") {
  replay_narrow_file("wgmma_e5m2_e5m2_f32.bin", 7, 16384);
}
TEST_CASE("replay: H200 wgmma m64n8k32 e4m3 x e4m3 -> f16, 16,384 outputs, match sm90_tensor_core_fp8 bit for bit") {
  replay_narrow_file("wgmma_e4m3_e4m3_f16.bin", 8, 16384);
}
TEST_CASE("replay: H200 wgmma m64n8k32 e4m3 x e5m2 -> f16, 16,384 outputs, match sm90_tensor_core_fp8 bit for bit") {
  replay_narrow_file("wgmma_e4m3_e5m2_f16.bin", 9, 16384);
}
TEST_CASE("replay: H200 wgmma m64n8k32 e5m2 x e4m3 -> f16, 16,384 outputs, match sm90_tensor_core_fp8 bit for bit") {
  replay_narrow_file("wgmma_e5m2_e4m3_f16.bin", 10, 16384);
}
TEST_CASE("replay: H200 wgmma m64n8k32 e5m2 x e5m2 -> f16, 16,384 outputs, match sm90_tensor_core_fp8 bit for bit") {
  replay_narrow_file("wgmma_e5m2_e5m2_f16.bin", 11, 16384);
}
TEST_CASE("replay: H200 wgmma m64n8k8 tf32 -> f32, 29,184 outputs, match sm90_tensor_core_k8 bit for bit") {
  replay_narrow_file("wgmma_tf32_f32.bin", 12, 29184);
}
TEST_CASE("replay: H200 fp32 add/mul/fma in four rounding modes, with and without .ftz, match ptx::") {
  replay_section_file("ops_fp32.bin", fp32_model);
}
TEST_CASE("replay: H200 add/mul/fma.rn.bf16 match ptx::") { replay_section_file("ops_bf16.bin", bf16_model); }
TEST_CASE("replay: H200 cvt f32 -> bf16/f16 (rn, rz, satfinite, relu, x2 packing) match ptx::") {
  replay_section_file("ops_cvt.bin", cvt_model);
}

TEST_CASE("replay files carry their provenance and refuse a corrupted payload") {
  for (const char* name : {"mma_bf16_f32.bin", "mma_f16_f32.bin", "mma_f16_f16.bin", "wgmma_bf16_f32.bin",
                           "wgmma_e4m3_e4m3_f32.bin", "wgmma_e4m3_e5m2_f32.bin", "wgmma_e5m2_e4m3_f32.bin",
                           "wgmma_e5m2_e5m2_f32.bin", "wgmma_e4m3_e4m3_f16.bin", "wgmma_e4m3_e5m2_f16.bin",
                           "wgmma_e5m2_e4m3_f16.bin", "wgmma_e5m2_e5m2_f16.bin", "wgmma_tf32_f32.bin",
                           "ops_fp32.bin", "ops_bf16.bin", "ops_cvt.bin"}) {
    CAPTURE(name);
    const capture::replay_file file = capture::read_replay_file(data_path(name));
    CHECK(file.provenance.find("GPU: ") != std::string::npos);
    CHECK(file.provenance.find("Driver: ") != std::string::npos);
    CHECK(file.provenance.find("run_capture.sh") != std::string::npos);
    // One flipped bit in the last payload byte must be caught by the checksum.
    std::vector<unsigned char> corrupted = file.bytes;
    corrupted.back() ^= 1;
    CHECK_THROWS_WITH_AS(capture::parse_replay_file(corrupted, name), doctest::Contains("checksum mismatch"),
                         std::runtime_error);
    std::vector<unsigned char> truncated(file.bytes.begin(), file.bytes.end() - 1);
    CHECK_THROWS_AS(capture::parse_replay_file(truncated, name), std::runtime_error);
  }
}
