// Cuts the full GPU captures (.captures/, written by cuda/capture) down to the
// small checksummed replay files in tests/data (layout: tools/analysis/capture_files.hpp).
//
//   g++ -O2 -std=c++20 -Iinclude -o /tmp/make_test_data tools/make_test_data.cpp
//   /tmp/make_test_data .captures tests/data [--tiles N] [--wgmma-tiles N] [--narrow-tiles N] [--fp32 N] [--bf16 N]
//                       [--cvt N] [--all]
//                       [--capture-command TEXT]   (how the capture was made, for the provenance header)
//
// Tensor-core tiles: the two layout-check tiles, then an equal share of each
// structured class. Within a class, half the share goes to the tiles that
// best tell the sm_90 parameters from their neighbours (outputs on which one
// bit fewer or more kept, a round-to-nearest fp32 / round-toward-zero fp16
// final rounding, half the products a step (Ampere's two chained steps for
// 16-bit inputs) or, for fp8 into fp32, no rounding to E8M13 disagree with
// the GPU), the other half is spread evenly over the rest, so that typical
// tiles stay represented; tf32 also keeps every tile on which a zero-term
// exponent one off disagrees. The narrow-input captures of capture_lowp.cu
// (fp8 and tf32 wgmma) are cut the same way, --narrow-tiles tiles each.
// Scalar sections: blocks of 16 consecutive cases (the capture cycles through
// 16 input categories), every stride-th block; the fp32 section also keeps
// every case without subnormal inputs on which an .ftz result differs from
// its non-.ftz twin (the results that pin down .ftz's tininess rule).
// --all keeps everything (for replaying the whole capture on the CPU).
// The lg2 samples (lg2_ops.bin, from capture_lg2.cu) are kept whole. Each
// file is cut when its capture is in CAPTURES_DIR; the others are skipped,
// with a line saying so.
#include <algorithm>
#include <bitexact/hardware/mma.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "analysis/capture_files.hpp"

using namespace bitexact;

namespace {

struct options {
  std::string captures, out;
  std::size_t tiles = 302, wgmma_tiles = 122, narrow_tiles = 40, fp32 = 4096, bf16 = 8192, cvt = 8192;
  bool all = false;
  std::string command_line;
  // How the capture was made (the default is the capture program).
  std::string capture_command = "OUT=<dir> bash cuda/capture/run_capture.sh (cuda/capture/README.md)";
};

// GPU, driver, CUDA and capture date, read from the capture's info.txt.
std::string capture_environment(const std::string& captures) {
  std::ifstream in(captures + "/info.txt");
  std::string line, gpu_line, date, device, nvcc;
  bool next_is_gpu = false, next_is_date = false;
  while (std::getline(in, line)) {
    if (next_is_gpu) gpu_line = line, next_is_gpu = false, next_is_date = true;
    else if (next_is_date) date = line, next_is_date = false;
    if (line.rfind("name, driver_version", 0) == 0) next_is_gpu = true;
    if (line.rfind("device: ", 0) == 0 && device.empty()) device = line.substr(8);
    if (line.find("Cuda compilation tools") != std::string::npos && nvcc.empty()) nvcc = line;
  }
  while (!date.empty() && date.back() == ' ') date.pop_back();
  std::string gpu = "unknown", driver = "unknown";
  if (auto comma = gpu_line.find(", "); comma != std::string::npos) {
    gpu = gpu_line.substr(0, comma);
    driver = gpu_line.substr(comma + 2, gpu_line.find(',', comma + 2) - comma - 2);
  }
  return "GPU: " + gpu + " (" + device + ")\nDriver: " + driver + "\nCUDA: " + nvcc + "\nCaptured: " + date + "\n";
}

// Builds a test-data file: header, provenance text, checksummed payload.
struct payload_writer {
  std::vector<unsigned char> bytes;
  void raw(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    bytes.insert(bytes.end(), b, b + n);
  }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<unsigned char>(v >> (8 * i)));
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<unsigned char>(v >> (8 * i)));
  }
  void text(const std::string& s, std::size_t width) {
    std::vector<unsigned char> field(width, 0);
    std::copy_n(s.begin(), std::min(s.size(), width - 1), field.begin());
    raw(field.data(), width);
  }
  void uint_n(std::uint32_t v, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) bytes.push_back(static_cast<unsigned char>(v >> (8 * i)));
  }
};

void write_file(const std::string& path, capture::replay_kind kind, const std::string& provenance,
                const std::vector<unsigned char>& payload) {
  payload_writer file;
  file.raw(capture::replay_magic, 8);
  file.u32(static_cast<std::uint32_t>(kind));
  file.u32(static_cast<std::uint32_t>(provenance.size()));
  file.u64(payload.size());
  file.u64(fnv1a64(payload.data(), payload.size()));
  file.raw(provenance.data(), provenance.size());
  file.raw(payload.data(), payload.size());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(file.bytes.data()), static_cast<std::streamsize>(file.bytes.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
  std::printf("%-28s %9zu bytes  fnv1a64 %016llx\n", path.c_str(), file.bytes.size(),
              static_cast<unsigned long long>(fnv1a64(payload.data(), payload.size())));
}

// ---- tensor-core tiles ----

// Output (i, j) of an m16n8k16 row block: A is [m][16], B [16][8], C [m][8].
template <format Acc, format In>
std::uint32_t model_output(const fused_sum_unit& unit, const capture::mma_tiles::tile& tile, int i, int j) {
  value<In> a[16], b[16];
  for (int k = 0; k < 16; ++k) {
    a[k] = value<In>::from_bits(tile.a[i * 16 + k]);
    b[k] = value<In>::from_bits(tile.b[k * 8 + j]);
  }
  return fused_dot<Acc, In>(unit, a, b, value<Acc>::from_bits(tile.c[i * 8 + j])).result.bits;
}

// An A or B element as stored in a capture: an fp8 byte, or tf32's register.
template <format F>
value<F> operand_of(std::uint32_t stored) {
  if constexpr (F == tf32) return tf32_operand(stored);
  else return value<F>::from_bits(stored);
}

// Output (i, j) of a narrow-input wgmma tile (K 32 or 8, A and B formats apart).
template <format Acc, format InA, format InB>
std::uint32_t narrow_output(const fused_sum_unit& unit, const capture::mma_tiles::tile& tile, std::uint32_t k_size,
                            int i, int j) {
  value<InA> a[32];
  value<InB> b[32];
  for (std::uint32_t k = 0; k < k_size; ++k) {
    a[k] = operand_of<InA>(tile.a[i * k_size + k]);
    b[k] = operand_of<InB>(tile.b[k * 8 + j]);
  }
  return fused_dot<Acc, InA, InB>(unit, std::span<const value<InA>>(a, k_size), std::span<const value<InB>>(b, k_size),
                                  value<Acc>::from_bits(tile.c[i * 8 + j]))
      .result.bits;
}

std::uint32_t model_output(const fused_sum_unit& unit, const capture::mma_tiles& m, std::size_t t, int i, int j) {
  const capture::mma_tiles::tile& tile = m.tiles[t];
  switch (m.variant) {
    case 1: return model_output<fp32, fp16>(unit, tile, i, j);
    case 2: return model_output<fp16, fp16>(unit, tile, i, j);
    case 0: case 3: return model_output<fp32, bf16>(unit, tile, i, j);
    case 4: return narrow_output<fp32, e4m3, e4m3>(unit, tile, m.k, i, j);
    case 5: return narrow_output<fp32, e4m3, e5m2>(unit, tile, m.k, i, j);
    case 6: return narrow_output<fp32, e5m2, e4m3>(unit, tile, m.k, i, j);
    case 7: return narrow_output<fp32, e5m2, e5m2>(unit, tile, m.k, i, j);
    case 8: return narrow_output<fp16, e4m3, e4m3>(unit, tile, m.k, i, j);
    case 9: return narrow_output<fp16, e4m3, e5m2>(unit, tile, m.k, i, j);
    case 10: return narrow_output<fp16, e5m2, e4m3>(unit, tile, m.k, i, j);
    case 11: return narrow_output<fp16, e5m2, e5m2>(unit, tile, m.k, i, j);
    default: return narrow_output<fp32, tf32, tf32>(unit, tile, m.k, i, j);
  }
}

// The measured unit of a variant and its neighbours: one bit fewer and one
// more kept, the other final rounding, half the products a step, and for fp8
// into fp32 no rounding to E8M13.
std::vector<fused_sum_unit> neighbours(std::uint32_t variant) {
  const fused_sum_unit measured = capture::is_fp8_variant(variant)    ? sm90_tensor_core_fp8
                                  : capture::is_tf32_variant(variant) ? sm90_tensor_core_k8
                                                                      : sm90_tensor_core;
  fused_sum_unit narrower = measured, wider = measured, other_rounding = measured, chained = measured,
                 no_e8m13 = measured;
  --narrower.kept_fraction_bits;
  ++wider.kept_fraction_bits;
  other_rounding.fp32_rounding = rounding_mode::nearest_even;
  other_rounding.fp16_rounding = rounding_mode::toward_zero;
  chained.products_per_step /= 2;
  no_e8m13.rounds_to_e8m13 = false;
  std::vector<fused_sum_unit> units = {narrower, wider, other_rounding, chained};
  if (measured.rounds_to_e8m13) units.push_back(no_e8m13);
  return units;
}

// How many outputs of tile t the neighbouring parameter sets get wrong.
int discriminating_outputs(const capture::mma_tiles& m, std::size_t t) {
  const std::vector<fused_sum_unit> units = neighbours(m.variant);
  int count = 0;
  for (int i = 0; i < static_cast<int>(m.m); ++i)
    for (int j = 0; j < 8; ++j) {
      const std::uint32_t gpu = m.tiles[t].d[i * 8 + j];
      for (const fused_sum_unit& unit : units)
        if (model_output(unit, m, t, i, j) != gpu) {
          ++count;
          break;
        }
    }
  return count;
}

// Whether tile t shows the zero-term exponent: a tf32 tile on which -132 or
// -134 disagrees with the GPU somewhere (a few of the tiny-products tiles;
// fp8 and the 16-bit captures cannot, or were cut before this rule).
bool shows_zero_term_exponent(const capture::mma_tiles& m, std::size_t t) {
  if (!capture::is_tf32_variant(m.variant)) return false;
  fused_sum_unit higher = sm90_tensor_core_k8, lower = sm90_tensor_core_k8;
  ++higher.zero_term_exponent;
  --lower.zero_term_exponent;
  for (int i = 0; i < static_cast<int>(m.m); ++i)
    for (int j = 0; j < 8; ++j)
      for (const fused_sum_unit& unit : {higher, lower})
        if (model_output(unit, m, t, i, j) != m.tiles[t].d[i * 8 + j]) return true;
  return false;
}

std::vector<std::size_t> select_tiles(const capture::mma_tiles& m, std::size_t wanted, bool all) {
  std::vector<std::size_t> chosen;
  if (all || wanted >= m.tiles.size()) {
    chosen.resize(m.tiles.size());
    std::iota(chosen.begin(), chosen.end(), 0);
    return chosen;
  }
  std::map<std::uint32_t, std::vector<std::size_t>> by_class;
  for (std::size_t t = 0; t < m.tiles.size(); ++t) by_class[m.tiles[t].tile_class].push_back(t);
  std::size_t structured_classes = 0;
  for (auto& [cls, tiles] : by_class)
    if (cls < 100) ++structured_classes;
    else chosen.insert(chosen.end(), tiles.begin(), tiles.end());  // layout checks: always
  const std::size_t share = (wanted - std::min(wanted, chosen.size())) / std::max<std::size_t>(1, structured_classes);
  for (auto& [cls, tiles] : by_class) {
    if (cls >= 100) continue;
    std::vector<std::pair<int, std::size_t>> scored;
    for (std::size_t t : tiles) scored.push_back({-discriminating_outputs(m, t), t});
    std::stable_sort(scored.begin(), scored.end());
    const std::size_t best = std::min(share / 2, scored.size());
    std::vector<std::size_t> rest;
    for (std::size_t i = 0; i < scored.size(); ++i)
      (i < best ? chosen : rest).push_back(scored[i].second);
    std::sort(rest.begin(), rest.end());
    const std::size_t spread = std::min(share - best, rest.size());
    for (std::size_t i = 0; i < spread; ++i) chosen.push_back(rest[i * rest.size() / spread]);
  }
  for (std::size_t t = 0; t < m.tiles.size(); ++t)
    if (m.tiles[t].tile_class < 100 && shows_zero_term_exponent(m, t)) chosen.push_back(t);
  std::sort(chosen.begin(), chosen.end());
  chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
  return chosen;
}

std::string mma_instruction(std::uint32_t variant) {
  static const char* const pairings[] = {"e4m3.e4m3", "e4m3.e5m2", "e5m2.e4m3", "e5m2.e5m2"};
  switch (variant) {
    case 0: return "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32";
    case 1: return "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32";
    case 2: return "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16";
    case 3: return "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 (A in registers)";
    case 12: return "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 (A in registers)";
    default:
      return std::string("wgmma.mma_async.sync.aligned.m64n8k32.") + (variant >= 8 ? "f16." : "f32.") +
             pairings[(variant - 4) % 4] + " (A in registers)";
  }
}

void subset_mma(const options& o, const std::string& name, std::size_t wanted, const std::string& environment) {
  const capture::mma_tiles m = capture::read_mma(o.captures + "/" + name);
  const std::vector<std::size_t> chosen = select_tiles(m, wanted, o.all);
  payload_writer p;
  for (std::uint32_t v : {m.variant, m.m, m.n, m.k, static_cast<std::uint32_t>(chosen.size()), m.acc_bytes}) p.u32(v);
  std::map<std::uint32_t, int> per_class;
  for (std::size_t t : chosen) {
    const capture::mma_tiles::tile& tile = m.tiles[t];
    ++per_class[tile.tile_class];
    p.u32(tile.tile_class);
    p.u32(static_cast<std::uint32_t>(t));
    for (std::uint32_t v : tile.a) p.uint_n(v, capture::input_bytes(m.variant));
    for (std::uint32_t v : tile.b) p.uint_n(v, capture::input_bytes(m.variant));
    for (std::uint32_t v : tile.c) p.uint_n(v, m.acc_bytes);
    for (std::uint32_t v : tile.d) p.uint_n(v, m.acc_bytes);
  }
  std::ostringstream provenance;
  provenance << environment << "Instruction: " << mma_instruction(m.variant) << "\n"
             << "Capture: " << o.capture_command << ", file " << name << ", "
             << m.tiles.size() << " tiles\nSubset: " << o.command_line << "\nKept: " << chosen.size() << " tiles (class:count";
  for (auto [cls, count] : per_class) provenance << " " << cls << ":" << count;
  provenance << ")\n";
  write_file(o.out + "/" + name, capture::replay_kind::mma_tiles, provenance.str(), p.bytes);
}

// ---- scalar sections ----

// Every stride-th block of 16 cases (one of each input category), plus the
// cases `also` asks for.
template <class Also>
std::vector<std::uint32_t> select_cases(std::uint32_t count, std::size_t wanted, bool all, Also also) {
  std::vector<std::uint32_t> chosen;
  const std::uint32_t blocks = count / 16;
  const std::uint32_t stride = all ? 1 : std::max<std::uint32_t>(1, static_cast<std::uint32_t>(blocks / std::max<std::size_t>(1, wanted / 16)));
  for (std::uint32_t i = 0; i < count; ++i)
    if ((i / 16) % stride == 0 || also(i)) chosen.push_back(i);
  return chosen;
}

template <class Also>
void subset_section(const options& o, const capture::ops_capture& ops, const std::string& section_prefix,
                    const std::string& file_name, std::size_t wanted, const std::string& environment,
                    const std::string& extra_rule, Also also) {
  const capture::scalar_section& s = ops.section(section_prefix);
  const std::vector<std::uint32_t> chosen = select_cases(s.count, wanted, o.all, [&](std::uint32_t i) { return also(s, i); });
  payload_writer p;
  p.text(s.name, 48);
  p.u32(static_cast<std::uint32_t>(chosen.size()));
  p.u32(static_cast<std::uint32_t>(s.arrays.size()));
  for (const capture::scalar_section::array& a : s.arrays) {
    p.text(a.name, 40);
    p.u32(a.element_bytes);
    p.u32(a.is_input);
  }
  for (const capture::scalar_section::array& a : s.arrays)
    for (std::uint32_t i : chosen) p.uint_n(a.values[i], a.element_bytes);
  std::ostringstream provenance;
  provenance << environment << "Section: " << s.name << "\n"
             << "Capture: " << o.capture_command << ", file " << std::filesystem::path(ops.path).filename().string() << ", "
             << s.count << " cases\nSubset: " << o.command_line << "\nKept: " << chosen.size()
             << " cases (every case of each kept block of 16" << extra_rule << ")\n";
  write_file(o.out + "/" + file_name, capture::replay_kind::scalar_section, provenance.str(), p.bytes);
}

}  // namespace

int main(int argc, char** argv) try {
  options o;
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s CAPTURES_DIR OUT_DIR [--tiles N] [--wgmma-tiles N] [--narrow-tiles N] [--fp32 N] [--bf16 N] [--cvt N] "
                 "[--all]\n",
                 argv[0]);
    return 2;
  }
  o.captures = argv[1];
  o.out = argv[2];
  o.command_line = "make_test_data";
  for (int i = 1; i < argc; ++i) o.command_line += std::string(" ") + argv[i];
  for (int i = 3; i < argc; ++i) {
    const std::string arg = argv[i];
    auto number = [&]() -> std::size_t {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a number\n", arg.c_str());
        std::exit(2);
      }
      return std::stoul(argv[++i]);
    };
    if (arg == "--tiles") o.tiles = number();
    else if (arg == "--wgmma-tiles") o.wgmma_tiles = number();
    else if (arg == "--narrow-tiles") o.narrow_tiles = number();
    else if (arg == "--fp32") o.fp32 = number();
    else if (arg == "--bf16") o.bf16 = number();
    else if (arg == "--cvt") o.cvt = number();
    else if (arg == "--all") o.all = true;
    else if (arg == "--capture-command" && i + 1 < argc) o.capture_command = argv[++i];
    else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  const std::string environment = capture_environment(o.captures);
  int cut = 0;
  const auto present = [&](const char* capture_file) {
    if (std::filesystem::exists(o.captures + "/" + capture_file)) return ++cut, true;
    std::printf("%-28s absent from %s: skipped\n", capture_file, o.captures.c_str());
    return false;
  };
  for (const auto& [file, tiles] : {std::pair{"mma_bf16_f32.bin", o.tiles}, std::pair{"mma_f16_f32.bin", o.tiles},
                                    std::pair{"mma_f16_f16.bin", o.tiles}, std::pair{"wgmma_bf16_f32.bin", o.wgmma_tiles}})
    if (present(file)) subset_mma(o, file, tiles, environment);
  // The narrow-input wgmma captures of capture_lowp.cu (fp8 k32, tf32 k8).
  options narrow = o;
  narrow.capture_command = "OUT=<dir> bash cuda/capture/run_capture.sh capture_lowp (cuda/capture/README.md)";
  for (const char* file : {"wgmma_e4m3_e4m3_f32.bin", "wgmma_e4m3_e5m2_f32.bin", "wgmma_e5m2_e4m3_f32.bin",
                           "wgmma_e5m2_e5m2_f32.bin", "wgmma_e4m3_e4m3_f16.bin", "wgmma_e4m3_e5m2_f16.bin",
                           "wgmma_e5m2_e4m3_f16.bin", "wgmma_e5m2_e5m2_f16.bin", "wgmma_tf32_f32.bin"})
    if (present(file)) subset_mma(narrow, file, o.narrow_tiles, environment);
  auto nothing_more = [](const capture::scalar_section&, std::uint32_t) { return false; };
  if (present("lg2_ops.bin")) {
    options whole = o;
    whole.capture_command = "OUT=<dir> bash cuda/capture/run_capture.sh capture_lg2 (cuda/capture/README.md)";
    subset_section(whole, capture::read_ops(o.captures + "/lg2_ops.bin"), "lg2", "ops_lg2.bin",
                   std::numeric_limits<std::size_t>::max(), environment, "", nothing_more);
  }
  if (!present("ops.bin")) return cut ? 0 : 1;
  const capture::ops_capture ops = capture::read_ops(o.captures + "/ops.bin");
  // The .ftz outputs follow their non-.ftz twins 4 arrays later (names in capture_ops.cuh).
  subset_section(o, ops, "fp32", "ops_fp32.bin", o.fp32, environment,
                 ", and every case with no subnormal input where an .ftz result differs from the same instruction without .ftz",
                 [](const capture::scalar_section& s, std::uint32_t i) {
                   // Subnormal inputs flush trivially; the cases that pin the
                   // tininess rule are those whose result alone is flushed.
                   for (const char* input : {"a", "b", "c"}) {
                     const std::uint32_t bits = s.find(input).values[i];
                     if ((bits & 0x7F800000u) == 0 && (bits & 0x007FFFFFu) != 0) return false;
                   }
                   for (const capture::scalar_section::array& a : s.arrays) {
                     const auto at = a.name.find(".ftz");
                     if (at == std::string::npos) continue;
                     const std::string twin = a.name.substr(0, at) + a.name.substr(at + 4);
                     if (a.values[i] != s.find(twin).values[i]) return true;
                   }
                   return false;
                 });
  subset_section(o, ops, "bf16", "ops_bf16.bin", o.bf16, environment, "", nothing_more);
  subset_section(o, ops, "cvt", "ops_cvt.bin", o.cvt, environment, "", nothing_more);
  return 0;
} catch (const std::exception& error) {  // a capture file missing, truncated or of the wrong kind
  std::fprintf(stderr, "make_test_data: %s\n", error.what());
  return 1;
}
