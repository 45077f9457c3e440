// FP8 attention captures replayed through their presets, every O and Stats (L) bit: cuDNN's fp8 SDPA
// forward (tests/data/attention_fp8, cuda/capture/cudnn_fp8_sdpa_probe.py on an H100; preset
// cudnn_sdpa_fp8_sm90) and our FP8 kernel (tests/data/flash_fp8, cuda/attention/capture_flash_fp8.py on an
// H200; the presets bitexact_flash_fp8_sm90*); the same data missed when one rule of a description is
// changed (the recipes' rules each matter); and the calls refused.
#include <doctest/doctest.h>

#include <bitexact/attention/call.hpp>
#include <bitexact/attention/kernel_json.hpp>
#include <bitexact/attention/kernels.hpp>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "attention_captures.hpp"
#include <bitexact/testing/npy.hpp>

using namespace bitexact;
using namespace bitexact::attention;

namespace {

const std::string cudnn_dir = std::string(BITEXACT_TEST_DATA_DIR) + "/attention_fp8";
const std::string ours_dir = std::string(BITEXACT_TEST_DATA_DIR) + "/flash_fp8";

// case NAME QUERY_ROWS KEY_ROWS HEAD_DIM CAUSAL, the six scales as float32 bits and, in flash_fp8, the
// preset (MANIFEST's header; attention_fp8's cases are cudnn_sdpa_fp8_sm90's).
struct fp8_case {
  std::string name, preset = "cudnn_sdpa_fp8_sm90";
  attention_shape shape;
  std::array<float32, 6> scales;  // fp8_scale_names' order
  std::vector<std::uint8_t> q, k, v;
  std::vector<std::uint16_t> o;  // e4m3 or bf16 bit patterns, as the preset writes O
  std::vector<float32> stats;
};

std::vector<std::uint16_t> read_bits(const std::string& path, std::size_t count, std::size_t element_size) {
  const npy::array a = npy::read(path);
  REQUIRE(a.element_size() == element_size);
  REQUIRE(a.element_count() == count);
  std::vector<std::uint16_t> bits(count);
  for (std::size_t i = 0; i < count; ++i) bits[i] = static_cast<std::uint16_t>(a.word(i));
  return bits;
}

std::vector<std::uint8_t> read_u8(const std::string& path, std::size_t count) {
  const std::vector<std::uint16_t> bits = read_bits(path, count, 1);
  return {bits.begin(), bits.end()};
}

// Every case of a folder, after checking each file's checksum.
const std::vector<fp8_case>& fp8_cases(const std::string& fp8_dir) {
  static std::map<std::string, std::vector<fp8_case>> folders;
  if (folders.contains(fp8_dir)) return folders[fp8_dir];
  return folders[fp8_dir] = [&] {
    std::ifstream in(fp8_dir + "/MANIFEST");
    REQUIRE_MESSAGE(in, "cannot open " << fp8_dir << "/MANIFEST");
    std::vector<fp8_case> out;
    int files = 0;
    for (std::string line; std::getline(in, line);) {
      std::istringstream fields(line);
      std::string kind;
      fields >> kind;
      if (kind == "file") {
        std::string checksum, path;
        fields >> checksum >> path;
        CHECK_MESSAGE(test::hex(test::file_checksum(fp8_dir + "/" + path)) == checksum, path << ": checksum differs");
        ++files;
      }
      if (kind != "case") continue;
      fp8_case c;
      int causal = 0;
      fields >> c.name >> c.shape.query_rows >> c.shape.key_rows >> c.shape.head_dim >> causal;
      for (float32& x : c.scales) {
        std::string bits;
        fields >> bits;
        x = float32::from_bits(static_cast<std::uint32_t>(std::stoul(bits, nullptr, 16)));
      }
      REQUIRE_MESSAGE(fields, "malformed MANIFEST line: " << line);
      if (std::string preset; fields >> preset) c.preset = preset;
      c.shape.batch = c.shape.heads = 1;
      c.shape.causal = causal != 0;
      const std::size_t rows = static_cast<std::size_t>(c.shape.query_rows), d = static_cast<std::size_t>(c.shape.head_dim);
      const std::size_t keys = static_cast<std::size_t>(c.shape.key_rows);
      const std::string dir = fp8_dir + "/" + c.name + "/";
      c.q = read_u8(dir + "q.npy", rows * d);
      c.k = read_u8(dir + "k.npy", keys * d);
      c.v = read_u8(dir + "v.npy", keys * d);
      c.o = read_bits(dir + "o.npy", rows * d, find_kernel(c.preset).arithmetic.o_format == bf16 ? 2 : 1);
      const npy::array stats = npy::read(dir + "stats.npy");
      REQUIRE(stats.element_count() == rows);
      for (std::size_t i = 0; i < rows; ++i) c.stats.push_back(float32::from_bits(stats.word(i)));
      out.push_back(std::move(c));
    }
    REQUIRE(files == static_cast<int>(out.size()) * 5);
    return out;
  }();
}

// O and Stats elements compared, and those that differ.
struct replay_count {
  std::size_t o = 0, o_missed = 0, stats = 0, stats_missed = 0;
};

// O and L of one case as the kernel computes them on `threads` threads, as bit patterns.
std::pair<std::vector<std::uint16_t>, std::vector<float32>> run_case(const flash_kernel& kernel, const fp8_case& c,
                                                                     unsigned threads = 0) {
  std::vector<float32> stats(c.stats.size());
  std::vector<std::uint16_t> bits;
  const auto run = [&]<class Out>(std::vector<Out> o) {
    flash_forward_head(kernel, c.shape, std::span<const std::uint8_t>(c.q), std::span<const std::uint8_t>(c.k),
                       std::span<const std::uint8_t>(c.v), std::span<Out>(o), std::span<float32>(stats),
                       no_observer{}, threads);
    for (const Out x : o) bits.push_back(static_cast<std::uint16_t>(x.bits));
  };
  if (kernel.o_format == bf16) run(std::vector<bfloat16>(c.o.size()));
  else run(std::vector<float8_e4m3>(c.o.size()));
  return {bits, stats};
}

call_options scales_of(const fp8_case& c) {
  call_options call;
  for (std::size_t i = 0; i < c.scales.size(); ++i) call.fp8.*fp8_scale_fields[i] = c.scales[i];
  return call;
}

// Every committed case of a folder through its preset, or through `describe`'s change of it; `edit`
// changes the resolved kernel first (an ablation).
replay_count replay(const std::string& dir, const std::function<void(kernel_description&)>& describe = {},
                    const std::function<void(flash_kernel&)>& edit = {}) {
  replay_count count;
  for (const fp8_case& c : fp8_cases(dir)) {
    kernel_description description = find_kernel(c.preset);
    if (describe) describe(description);
    flash_kernel kernel = resolve(description, c.shape, scales_of(c));
    if (edit) edit(kernel);
    const auto [o, stats] = run_case(kernel, c);
    for (std::size_t i = 0; i < o.size(); ++i) count.o_missed += o[i] != c.o[i];
    for (std::size_t i = 0; i < stats.size(); ++i) count.stats_missed += stats[i].bits != c.stats[i].bits;
    count.o += o.size();
    count.stats += stats.size();
  }
  return count;
}

}  // namespace

TEST_SUITE("attention") {
  TEST_CASE("fp8 replay: cuDNN's fp8 SDPA forward (tests/data/attention_fp8), every O and Stats bit") {
    const replay_count count = replay(cudnn_dir);
    MESSAGE(fp8_cases(cudnn_dir).size() << " cases: " << count.o << " O elements, " << count.o_missed
                                        << " mismatches; " << count.stats << " Stats, " << count.stats_missed
                                        << " mismatches");
    CHECK(fp8_cases(cudnn_dir).size() == 9);
    CHECK(count.o == 176128);
    CHECK(count.stats == 1856);
    CHECK(count.o_missed == 0);
    CHECK(count.stats_missed == 0);
  }

  TEST_CASE("fp8 replay: our FP8 kernel (tests/data/flash_fp8), every O and L bit, standard and stabilized") {
    const replay_count count = replay(ours_dir);
    MESSAGE(fp8_cases(ours_dir).size() << " cases: " << count.o << " O elements, " << count.o_missed
                                       << " mismatches; " << count.stats << " L, " << count.stats_missed
                                       << " mismatches");
    CHECK(fp8_cases(ours_dir).size() == 10);
    CHECK(count.o == 102400);
    CHECK(count.stats == 1216);
    CHECK(count.o_missed == 0);
    CHECK(count.stats_missed == 0);
  }

  TEST_CASE("fp8 threads: every committed case the same bits on 2, 3 threads and one per core as on 1") {
    std::size_t compared = 0;
    for (const std::string& dir : {cudnn_dir, ours_dir})
      for (const fp8_case& c : fp8_cases(dir)) {
        const flash_kernel kernel = resolve(find_kernel(c.preset), c.shape, scales_of(c));
        const auto one = run_case(kernel, c, 1);
        for (const unsigned threads : {2u, 3u, 0u}) {
          const auto other = run_case(kernel, c, threads);
          CHECK(other.first == one.first);
          CHECK(std::equal(other.second.begin(), other.second.end(), one.second.begin(),
                           [](float32 a, float32 b) { return a.bits == b.bits; }));
          compared += one.first.size() + one.second.size();
        }
      }
    CHECK(compared == 3 * (176128 + 1856 + 102400 + 1216));
  }

  struct ablation {
    std::string what;
    std::function<void(kernel_description&)> describe;
    std::function<void(flash_kernel&)> edit;
  };

  // A changed description is one the emulator computes (its checks pass); a unit edited after
  // resolve() is a tensor core no GPU record names.
  void check_ablations(const std::string& dir, std::span<const ablation> ablations) {
    for (const ablation& a : ablations) {
      const replay_count count = replay(dir, a.describe, a.edit);
      MESSAGE(a.what << ": O " << count.o_missed << " of " << count.o << " missed, Stats " << count.stats_missed
                     << " of " << count.stats);
      CHECK_MESSAGE(count.o_missed + count.stats_missed > 0, a.what << " misses nothing");
    }
  }

  TEST_CASE("fp8 ablations: each rule of cudnn_sdpa_fp8_sm90 changed misses committed bits") {
    const ablation ablations[] = {
        {"key blocks of 128", [](kernel_description& d) { d.tiles = {{64, {64, 128}}, {128, {64, 128}}}; }, {}},
        {"key blocks of 64", [](kernel_description& d) { d.tiles = {{64, {64, 64}}, {128, {64, 64}}}; }, {}},
        {"blocks from the last", [](kernel_description& d) { d.arithmetic.order = block_order::last_to_first; }, {}},
        {"P V added after the fp8 unit", [](kernel_description& d) { d.arithmetic.pv = pv_accumulation::fp32_add; }, {}},
        {"exponent by one FFMA", [](kernel_description& d) { d.arithmetic.unfused_scale = false; }, {}},
        {"the bf16 unit's 16-product steps for S and P V", {},
         [](flash_kernel& k) { k.tensor_core = fused_sum_unit{16, 13, -133, rounding_mode::toward_zero,
                                                              rounding_mode::nearest_even, true, true, true, true}; }},
        {"the fp8 unit without its E8M13 rounding", {},
         [](flash_kernel& k) { k.tensor_core.rounds_to_e8m13 = false; }},
    };
    check_ablations(cudnn_dir, ablations);
  }

  TEST_CASE("fp8 ablations: each rule of our FP8 kernel changed misses committed bits") {
    const ablation ablations[] = {
        {"FA2's blocks of 64 keys at d 128", [](kernel_description& d) { d.tiles[128].block_n = 64; }, {}},
        {"blocks of 64 keys at d 64", [](kernel_description& d) { d.tiles[64].block_n = 64; }, {}},
        {"the exponent as FA2's FMUL then FADD", [](kernel_description& d) { d.arithmetic.unfused_scale = true; }, {}},
        {"P V added after the fp8 unit", [](kernel_description& d) { d.arithmetic.pv = pv_accumulation::fp32_add; }, {}},
        {"P-bar without scale_s (P's e4m3 from P itself)", {}, [](flash_kernel& k) { k.p_scale = from_host(1.0f); }},
        {"the fp8 unit without its E8M13 rounding", {},
         [](flash_kernel& k) { k.tensor_core.rounds_to_e8m13 = false; }},
        {"the bf16 unit's 16-product steps", {},
         [](flash_kernel& k) { k.tensor_core = fused_sum_unit{16, 13, -133, rounding_mode::toward_zero,
                                                              rounding_mode::nearest_even, true, true, true, true}; }},
    };
    check_ablations(ours_dir, ablations);
  }

  TEST_CASE("fp8 calls: bad scales, head dims and operand formats refused in one line") {
    attention_call call;
    call.model = model_choice(find_preset("cudnn_sdpa_fp8_sm90"));
    call.shape = {1, 1, 64, 256, 128, false};
    const auto refusal = [](const attention_call& c) { return test::refusal_of(c); };
    CHECK(refusal(call).empty());
    for (const double bad : {0.0, -1.0, 1e300, std::nan("")}) {
      attention_call c = call;
      c.fp8_scales[0] = bad;
      CHECK(refusal(c).starts_with("descale_q "));
      CHECK(refusal(c).find("is not a positive finite number") != std::string::npos);
    }
    attention_call d96 = call;
    d96.shape.head_dim = 96;
    CHECK(refusal(d96) == "kernel cudnn_sdpa_fp8_sm90: head_dim 96 is not described (tiles has 64, 128)");
    attention_call bf16 = call;
    bf16.model = model_choice(find_preset("pytorch_sdpa_cudnn_sm90"));
    bf16.fp8_scales[4] = 448.0;
    CHECK(refusal(bf16) == "scale_s is a scale of fp8 kernels; pytorch_sdpa_cudnn_sm90 takes bf16 Q, K and V");
    // bf16 operands to the fp8 kernel, and fp8 ones to a bf16 kernel.
    const resolved_call fp8 = resolve_call(call);
    std::vector<bfloat16> q(64 * 128), kv(256 * 128), o(64 * 128);
    std::vector<float32> lse(64);
    CHECK_THROWS_WITH_AS(forward(fp8, q, kv, kv, o, lse),
                         "kernel cudnn_sdpa_fp8_sm90 takes e4m3 Q, K and V (fp8 bit patterns), not bf16",
                         std::invalid_argument);
    attention_call plain_call = call;
    plain_call.model = model_choice(find_preset("pytorch_sdpa_cudnn_sm90"));
    const resolved_call plain = resolve_call(plain_call);
    std::vector<std::uint8_t> q8(64 * 128), kv8(256 * 128);
    std::vector<float8_e4m3> o8(64 * 128);
    CHECK_THROWS_WITH_AS(forward(plain, q8, kv8, kv8, o8, lse),
                         "pytorch_sdpa_cudnn_sm90 takes bf16 Q, K and V, not fp8 bit patterns", std::invalid_argument);
  }
}
