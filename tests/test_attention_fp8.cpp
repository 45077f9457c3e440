// cuDNN's fp8 SDPA forward (tests/data/attention_fp8, cuda/capture/cudnn_fp8_sdpa_probe.py on an H100)
// replayed through the preset cudnn_sdpa_fp8_sm90, every O and Stats bit; the same data missed when one
// rule of the description is changed (the recipe's rules each matter); and the calls refused.
#include <doctest/doctest.h>

#include <bitexact/attention/call.hpp>
#include <bitexact/attention/kernel_json.hpp>
#include <bitexact/attention/kernels.hpp>

#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "attention_captures.hpp"
#include <bitexact/testing/npy.hpp>

using namespace bitexact;
using namespace bitexact::attention;

namespace {

const std::string fp8_dir = std::string(BITEXACT_TEST_DATA_DIR) + "/attention_fp8";

// case NAME QUERY_ROWS KEY_ROWS HEAD_DIM CAUSAL and the six scales as float32 bits (MANIFEST's header).
struct fp8_case {
  std::string name;
  attention_shape shape;
  std::array<float32, 6> scales;  // fp8_scale_names' order
  std::vector<std::uint8_t> q, k, v, o;
  std::vector<float32> stats;
};

std::vector<std::uint8_t> read_u8(const std::string& path, std::size_t count) {
  const npy::array a = npy::read(path);
  REQUIRE(a.element_size() == 1);
  REQUIRE(a.element_count() == count);
  std::vector<std::uint8_t> bits(count);
  for (std::size_t i = 0; i < count; ++i) bits[i] = static_cast<std::uint8_t>(a.word(i));
  return bits;
}

// Every case of the folder, after checking each file's checksum.
const std::vector<fp8_case>& fp8_cases() {
  static const std::vector<fp8_case> cases = [] {
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
      c.shape.batch = c.shape.heads = 1;
      c.shape.causal = causal != 0;
      const std::size_t rows = static_cast<std::size_t>(c.shape.query_rows), d = static_cast<std::size_t>(c.shape.head_dim);
      const std::size_t keys = static_cast<std::size_t>(c.shape.key_rows);
      const std::string dir = fp8_dir + "/" + c.name + "/";
      c.q = read_u8(dir + "q.npy", rows * d);
      c.k = read_u8(dir + "k.npy", keys * d);
      c.v = read_u8(dir + "v.npy", keys * d);
      c.o = read_u8(dir + "o.npy", rows * d);
      const npy::array stats = npy::read(dir + "stats.npy");
      REQUIRE(stats.element_count() == rows);
      for (std::size_t i = 0; i < rows; ++i) c.stats.push_back(float32::from_bits(stats.word(i)));
      out.push_back(std::move(c));
    }
    REQUIRE(files == static_cast<int>(out.size()) * 5);
    return out;
  }();
  return cases;
}

// O and Stats elements compared, and those that differ.
struct replay_count {
  std::size_t o = 0, o_missed = 0, stats = 0, stats_missed = 0;
};

// Every committed case through the description; `edit` changes the resolved kernel first (an ablation).
replay_count replay(const kernel_description& description, const std::function<void(flash_kernel&)>& edit = {}) {
  replay_count count;
  for (const fp8_case& c : fp8_cases()) {
    call_options call;
    for (std::size_t i = 0; i < c.scales.size(); ++i) call.fp8.*fp8_scale_fields[i] = c.scales[i];
    flash_kernel kernel = resolve(description, c.shape, call);
    if (edit) edit(kernel);
    std::vector<float8_e4m3> o(c.o.size());
    std::vector<float32> stats(c.stats.size());
    flash_forward_head(kernel, c.shape, std::span<const std::uint8_t>(c.q), std::span<const std::uint8_t>(c.k),
                       std::span<const std::uint8_t>(c.v), std::span<float8_e4m3>(o), std::span<float32>(stats));
    for (std::size_t i = 0; i < o.size(); ++i) count.o_missed += o[i].bits != c.o[i];
    for (std::size_t i = 0; i < stats.size(); ++i) count.stats_missed += stats[i].bits != c.stats[i].bits;
    count.o += o.size();
    count.stats += stats.size();
  }
  return count;
}

}  // namespace

TEST_SUITE("attention") {
  TEST_CASE("fp8 replay: cuDNN's fp8 SDPA forward (tests/data/attention_fp8), every O and Stats bit") {
    const replay_count count = replay(find_kernel("cudnn_sdpa_fp8_sm90"));
    MESSAGE(fp8_cases().size() << " cases: " << count.o << " O elements, " << count.o_missed << " mismatches; "
                               << count.stats << " Stats, " << count.stats_missed << " mismatches");
    CHECK(fp8_cases().size() == 9);
    CHECK(count.o == 176128);
    CHECK(count.stats == 1856);
    CHECK(count.o_missed == 0);
    CHECK(count.stats_missed == 0);
  }

  TEST_CASE("fp8 threads: every committed case the same bits on 2, 3 threads and one per core as on 1") {
    const kernel_description preset = find_kernel("cudnn_sdpa_fp8_sm90");
    std::size_t compared = 0;
    for (const fp8_case& c : fp8_cases()) {
      call_options call;
      for (std::size_t i = 0; i < c.scales.size(); ++i) call.fp8.*fp8_scale_fields[i] = c.scales[i];
      const flash_kernel kernel = resolve(preset, c.shape, call);
      const auto bits = [&](unsigned threads) {
        std::vector<float8_e4m3> o(c.o.size());
        std::vector<float32> stats(c.stats.size());
        flash_forward_head(kernel, c.shape, std::span<const std::uint8_t>(c.q), std::span<const std::uint8_t>(c.k),
                           std::span<const std::uint8_t>(c.v), std::span<float8_e4m3>(o), std::span<float32>(stats),
                           no_observer{}, threads);
        std::vector<std::uint32_t> out;
        for (const float8_e4m3 x : o) out.push_back(x.bits);
        for (const float32 x : stats) out.push_back(x.bits);
        return out;
      };
      const std::vector<std::uint32_t> one = bits(1);
      for (const unsigned threads : {2u, 3u, 0u}) {
        CHECK(bits(threads) == one);
        compared += one.size();
      }
    }
    CHECK(compared == 3 * (176128 + 1856));
  }

  TEST_CASE("fp8 ablations: each rule of cudnn_sdpa_fp8_sm90 changed misses committed bits") {
    const kernel_description preset = find_kernel("cudnn_sdpa_fp8_sm90");
    struct ablation {
      std::string what;
      std::function<void(kernel_description&)> describe;
      std::function<void(flash_kernel&)> edit;
    };
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
    for (const ablation& a : ablations) {
      kernel_description d = preset;
      if (a.describe) a.describe(d);
      // A changed description is one the emulator computes (its checks pass); a unit edited after
      // resolve() is a tensor core no GPU record names.
      const replay_count count = replay(d, a.edit);
      MESSAGE(a.what << ": O " << count.o_missed << " of " << count.o << " missed, Stats " << count.stats_missed
                     << " of " << count.stats);
      CHECK_MESSAGE(count.o_missed + count.stats_missed > 0, a.what << " misses nothing");
    }
  }

  TEST_CASE("fp8 calls: bad scales, head dims and operand formats refused in one line") {
    attention_call call;
    call.model = model_choice(find_preset("cudnn_sdpa_fp8_sm90"));
    call.shape = {1, 1, 64, 256, 128, false};
    const auto refusal = [](const attention_call& c) -> std::string {
      try {
        resolve_call(c);
      } catch (const std::invalid_argument& e) {
        return e.what();
      }
      return "";
    };
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
