// FP8 attention captures replayed through their presets, every O and Stats (L) bit: cuDNN's fp8 SDPA
// forward (tests/data/attention_fp8, cuda/capture/cudnn_fp8_sdpa_probe.py on an H100; preset
// cudnn_sdpa_fp8_sm90) and our FP8 kernel (tests/data/flash_fp8, cuda/attention/capture_flash_fp8.py on an
// H200; the presets bitexact_flash_fp8_sm90*); the same data missed when one rule of a description is
// changed (the recipes' rules each matter); and the calls refused.
#include <doctest/doctest.h>

#include <bitexact/attention/call.hpp>
#include <bitexact/attention/explain.hpp>
#include <bitexact/attention/repeated_max.hpp>
#include <bitexact/attention/kernel_json.hpp>
#include <bitexact/attention/kernels.hpp>

#include <algorithm>
#include <cstdlib>
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
  std::vector<std::int32_t> p_bar_ones, max_repeated;  // the GPU's leading indicator per row, where it ran
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
    int files = 0, expected_files = 0;
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
      if (std::ifstream(dir + "p_bar_ones.npy")) {
        for (auto [file, values] : {std::pair{"p_bar_ones.npy", &c.p_bar_ones}, {"max_repeated.npy", &c.max_repeated}}) {
          const npy::array a = npy::read(dir + file);
          REQUIRE(a.element_count() == rows);
          for (std::size_t i = 0; i < rows; ++i) values->push_back(static_cast<std::int32_t>(a.word(i)));
        }
        expected_files += 2;
      }
      expected_files += 5;
      out.push_back(std::move(c));
    }
    REQUIRE(files == expected_files);
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
    CHECK(fp8_cases(ours_dir).size() == 22);
    CHECK(count.o == 165888);
    CHECK(count.stats == 2048);
    CHECK(count.o_missed == 0);
    CHECK(count.stats_missed == 0);
  }

  TEST_CASE("fp8 explain: rows of our FP8 kernel's captures traced element by element, as it runs and promoted") {
    // Each traced chain is replayed against the emulator step by step (trace_output_element throws
    // std::logic_error at the first that differs); with the preset, its last step is the GPU's O.
    std::size_t elements = 0, promoted = 0, steps = 0;
    for (const fp8_case& c : fp8_cases(ours_dir)) {
      const auto q = std::span<const std::uint8_t>(c.q), k = std::span<const std::uint8_t>(c.k),
                 v = std::span<const std::uint8_t>(c.v);
      const std::size_t d = static_cast<std::size_t>(c.shape.head_dim);
      // The preset's own P V (its GPU bits), then the other one.
      const pv_accumulation own = find_kernel(c.preset).arithmetic.pv;
      const pv_accumulation other = own == pv_accumulation::c_operand ? pv_accumulation::fp32_add : pv_accumulation::c_operand;
      for (const pv_accumulation pv : {own, other}) {
        kernel_description description = find_kernel(c.preset);
        description.arithmetic.pv = pv;
        const flash_kernel kernel = resolve(description, c.shape, scales_of(c));
        for (const int row : {0, c.shape.query_rows / 2, c.shape.query_rows - 1}) {
          const row_record record = record_row(kernel, c.shape, q, k, v, row);
          int pv_steps = 0;
          for (const row_block& b : record.blocks) {
            REQUIRE(b.p_bf16.empty());
            REQUIRE(b.p_e4m3.size() == static_cast<std::size_t>(kernel.block_n));
            pv_steps += kernel.block_n / 32;
          }
          for (const int col : {0, 17, c.shape.head_dim - 1}) {
            const element_trace t = trace_output_element(kernel, c.shape, record, v, col);
            int tensor_core = 0, block_adds = 0;
            for (const traced_step& s : t.steps) {
              tensor_core += s.what == traced_step::kind::tensor_core;
              block_adds += s.what == traced_step::kind::block_add;
              if (s.what == traced_step::kind::tensor_core) CHECK(s.record.fused->terms.size() == 33);  // 32 products, C
            }
            CHECK(tensor_core == pv_steps);
            CHECK(block_adds == (pv == pv_accumulation::fp32_add ? static_cast<int>(record.blocks.size()) : 0));
            steps += t.steps.size();
            promoted += pv == pv_accumulation::fp32_add;
            if (pv != own) continue;
            CHECK(t.steps.back().record.result_bits == c.o[static_cast<std::size_t>(row) * d + static_cast<std::size_t>(col)]);
            ++elements;
          }
        }
      }
    }
    MESSAGE(elements << " elements of the captures traced to the GPU's bits under their presets and again "
                     << "under the other pv_accumulation (" << promoted << " traces with fp32_add), " << steps
                     << " steps replayed");
    CHECK(elements == 22 * 9);
    CHECK(promoted == 22 * 9);
  }

  TEST_CASE("fp8 explain: scores of our FP8 kernel's captures traced step by step, k32 chains from +0") {
    // trace_score_element replays Q's row times K's row on the fp8 unit and throws std::logic_error where
    // the traced chain's last result differs from the emulator's score (whose O and L are the GPU's).
    std::size_t scores = 0;
    for (const fp8_case& c : fp8_cases(ours_dir)) {
      const auto q = std::span<const std::uint8_t>(c.q), k = std::span<const std::uint8_t>(c.k),
                 v = std::span<const std::uint8_t>(c.v);
      const flash_kernel kernel = resolve(find_kernel(c.preset), c.shape, scales_of(c));
      const int row = c.shape.query_rows - 1;
      const row_record record = record_row(kernel, c.shape, q, k, v, row);
      for (const int key : {0, row / 2, row}) {  // keys every row sees, causal or not
        const std::vector<trace> steps = trace_score_element(kernel, c.shape, record, q, k, key);
        REQUIRE(steps.size() == static_cast<std::size_t>(c.shape.head_dim / 32));
        for (const trace& step : steps) CHECK(step.fused->terms.size() == 33);  // 32 products, C
        ++scores;
      }
      if (c.shape.causal && row + 1 < c.shape.key_rows)
        CHECK_THROWS_AS(trace_score_element(kernel, c.shape, record, q, k, row + 1), std::invalid_argument);
      const std::vector<bfloat16> q16(c.q.size()), k16(c.k.size());
      CHECK_THROWS_AS(trace_score_element(kernel, c.shape, record, q16, k16, 0), std::invalid_argument);
    }
    MESSAGE(scores << " scores traced");
    CHECK(scores == 22 * 3);
  }

  TEST_CASE("fp8 indicator: the GPU's leading indicator per row equals the emulator's (the standard cases)") {
    // flash_forward_fp8(indicator=True) counted, per row, the keys whose e4m3 P-bar is the row max's and
    // the tie test on the row's two largest scores; fp8_repeated_max_rows counts the emulator's own.
    // BITEXACT_FP8_INDICATOR_DIR names another folder of the same layout (a whole capture packed).
    const char* other = std::getenv("BITEXACT_FP8_INDICATOR_DIR");
    const std::string dir = other ? other : ours_dir;
    std::size_t cases = 0, rows = 0, ones_missed = 0, repeated_missed = 0, rows_twice = 0, rows_repeated = 0;
    for (const fp8_case& c : fp8_cases(dir)) {
      if (c.p_bar_ones.empty()) continue;
      const flash_kernel kernel = resolve(find_kernel(c.preset), c.shape, scales_of(c));
      const std::vector<row_repeated_max> model = fp8_repeated_max_rows(
          kernel, c.shape, std::span<const std::uint8_t>(c.q), std::span<const std::uint8_t>(c.k),
          std::span<const std::uint8_t>(c.v));
      for (std::size_t r = 0; r < model.size(); ++r) {
        ones_missed += model[r].p_bar_ones != c.p_bar_ones[r];
        repeated_missed += static_cast<int>(model[r].max_repeated) != c.max_repeated[r];
        rows_twice += model[r].p_bar_ones >= 2;
        rows_repeated += model[r].max_repeated;
      }
      rows += model.size();
      ++cases;
    }
    MESSAGE(cases << " cases, " << rows << " rows: p_bar_ones " << ones_missed << " differ, max_repeated "
                  << repeated_missed << " differ (" << rows_twice << " rows with P-bar at the max twice, "
                  << rows_repeated << " with the max repeated)");
    CHECK(ones_missed == 0);
    CHECK(repeated_missed == 0);
    if (!other) {
      CHECK(cases == 15);
      CHECK(rows == 128 + 320 + 32 * 6 + 32 + 256 + 32 + 32 + 256 + 32 + 32);
      CHECK(rows_twice > 0);
      CHECK(rows_repeated >= 32);  // the ties head: every row
    }
    const fp8_case& bf16_twin = fp8_cases(ours_dir).front();
    CHECK_THROWS_AS(fp8_repeated_max_rows(pytorch_sdpa_flash_sm90(bf16_twin.shape), bf16_twin.shape,
                                          std::span<const std::uint8_t>(bf16_twin.q),
                                          std::span<const std::uint8_t>(bf16_twin.k),
                                          std::span<const std::uint8_t>(bf16_twin.v)),
                    std::invalid_argument);
  }

  TEST_CASE("fp8 explain: bf16 operands, another fp8 recipe and scores are refused") {
    const fp8_case& c = fp8_cases(ours_dir).front();
    const flash_kernel kernel = resolve(find_kernel(c.preset), c.shape, scales_of(c));
    const std::vector<bfloat16> q(c.q.size()), kv(c.k.size());
    CHECK_THROWS_WITH_AS(record_row(kernel, c.shape, q, kv, kv, 0),
                         "flash_forward_head: the kernel takes e4m3 Q, K and V, not bf16", std::invalid_argument);
    const auto q8 = std::span<const std::uint8_t>(c.q), k8 = std::span<const std::uint8_t>(c.k),
               v8 = std::span<const std::uint8_t>(c.v);
    const row_record record = record_row(kernel, c.shape, q8, k8, v8, 0);
    CHECK_THROWS_AS(trace_output_element(kernel, c.shape, record, std::span<const bfloat16>(kv), 0), std::invalid_argument);
    CHECK_THROWS_AS(trace_output_element(kernel, c.shape, record, v8, c.shape.head_dim), std::invalid_argument);
    CHECK_THROWS_AS(record_row(kernel, c.shape, q8, k8, v8, c.shape.query_rows), std::invalid_argument);
    std::vector<bfloat16> q16(c.q.size()), k16(c.k.size());
    CHECK_THROWS_AS(trace_score_element(kernel, c.shape, record, q16, k16, 0), std::invalid_argument);
    CHECK_THROWS_AS(trace_score_element(kernel, c.shape, record, q8, k8, c.shape.key_rows), std::invalid_argument);
    // cuDNN's recipe writes e4m3 O: its rows are not recorded.
    const flash_kernel cudnn = resolve(find_kernel("cudnn_sdpa_fp8_sm90"), c.shape, scales_of(c));
    CHECK_THROWS_WITH_AS(record_row(cudnn, c.shape, q8, k8, v8, 0),
                         "flash_forward_head: the kernel writes O as e4m3 (its o_rounding), not bf16",
                         std::invalid_argument);
    CHECK(explainable(kernel));
    CHECK_FALSE(explainable(cudnn));
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
    CHECK(compared == 3 * (176128 + 1856 + 165888 + 2048));
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
        {"the other P V: added after the fp8 unit, or (pv_fp32_add presets) O as its C",
         [](kernel_description& d) {
           d.arithmetic.pv = d.arithmetic.pv == pv_accumulation::c_operand ? pv_accumulation::fp32_add
                                                                            : pv_accumulation::c_operand;
         },
         {}},
        {"the other l: of P-bar, or (p_bar_sum presets) of the fp32 P",
         [](kernel_description& d) {
           d.arithmetic.row_sum = d.arithmetic.row_sum == row_sum_rule::thread_partials_across_blocks
                                      ? row_sum_rule::thread_partials_of_p_bar
                                      : row_sum_rule::thread_partials_across_blocks;
         },
         {}},
        {"P-bar without scale_s (P's e4m3 from P itself)", {}, [](flash_kernel& k) { k.p_scale = from_host(1.0f); }},
        {"the fp8 unit without its E8M13 rounding", {},
         [](flash_kernel& k) { k.tensor_core.rounds_to_e8m13 = false; }},
        {"the bf16 unit's 16-product steps", {},
         [](flash_kernel& k) { k.tensor_core = fused_sum_unit{16, 13, -133, rounding_mode::toward_zero,
                                                              rounding_mode::nearest_even, true, true, true, true}; }},
    };
    check_ablations(ours_dir, ablations);
  }

  TEST_CASE("fp8 flash: P from exp2f instead of MUFU.EX2 alone changes no committed bit (the standard max)") {
    // The kernel's P below 2^-126 is 0 where exp2f's is subnormal: 0 in e4m3 either way, and lost in l.
    // A description says it one way only (exp2f for P is refused under the standard max), so the
    // resolved kernels take a stabilize rule that never fires (epsilon -inf) and exp2f for P.
    const replay_count count = replay(ours_dir, {}, [](flash_kernel& k) {
      k.exponential = exponential_unit::ex2_approx_f32;
      if (!k.stabilize) k.stabilize = stabilized_max{from_host(2.0f), float32::infinity(true), false};
    });
    MESSAGE("exp2f for P: O " << count.o_missed << " of " << count.o << " missed, Stats " << count.stats_missed
                               << " of " << count.stats);
    CHECK(count.o > 0);
    CHECK(count.o_missed + count.stats_missed == 0);
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
