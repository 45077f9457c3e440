// Kernels as data: the registry's descriptions and a user's description file
// read from and written to JSON, bad descriptions refused naming the field,
// and the captures of FlexAttention, the Triton example and PyTorch's
// memory-efficient and cuDNN backends (tests/data/attention_backends)
// replayed through their descriptions, O and L bit for bit.
#include <doctest/doctest.h>

#include <bitexact/attention/flash_forward.hpp>
#include <bitexact/attention/kernel_json.hpp>
#include <bitexact/attention/kernels.hpp>
#include <bitexact/core/checksum.hpp>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "attention_captures.hpp"
#include <bitexact/testing/npy.hpp>

using namespace bitexact;
using namespace bitexact::attention;

namespace {

const std::string backends_dir = std::string(BITEXACT_TEST_DATA_DIR) + "/attention_backends";
const std::string example_json = std::string(BITEXACT_TEST_DATA_DIR) + "/../../examples/triton/flash_forward.json";

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in, "cannot open " << path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The message of the std::invalid_argument that reading text throws ("" if none).
std::string refusal(const std::string& text) {
  try {
    kernel_from_json(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// The example's description with one field's value replaced (JSON text of the value).
std::string with_field(const std::string& field, const std::string& value) {
  nlohmann::json j = nlohmann::json::parse(read_text(example_json));
  j[field] = nlohmann::json::parse(value);
  return j.dump();
}

using test::captured_case;
using test::hex;
using test::read_bf16;

// The heads of attention_backends/, every file's checksum checked; each is one head (batch = heads = 1).
std::vector<captured_case> read_backend_heads() {
  test::captured_manifest manifest = test::read_manifest(backends_dir);
  // 11 a case, 7 in the one that only SDPA's backends ran (1000 queries, 300 keys, causal top-left).
  CHECK(manifest.files == 11 * 11 + 7);
  for (captured_case& c : manifest.cases) c.shape.batch = c.shape.heads = 1;
  return manifest.cases;
}

// Every captured head of one kernel ("flex", "triton_example", "efficient")
// through a description: {elements compared, mismatches}. L is compared on
// its first query_rows elements (the memory-efficient backend pads it).
std::pair<std::uint64_t, std::uint64_t> replay(const kernel_description& description, const std::string& kernel) {
  std::uint64_t compared = 0, mismatches = 0;
  for (const captured_case& c : read_backend_heads()) {
    const std::size_t rows = static_cast<std::size_t>(c.shape.query_rows), keys = static_cast<std::size_t>(c.shape.key_rows);
    const std::size_t d = static_cast<std::size_t>(c.shape.head_dim);
    const std::string head = backends_dir + "/" + c.name + "/";
    if (!std::ifstream(head + "o_" + kernel + ".npy")) continue;
    const auto q = read_bf16(head + "q.npy", rows * d), k = read_bf16(head + "k.npy", keys * d),
               v = read_bf16(head + "v.npy", keys * d);
    const auto expected_o = read_bf16(head + "o_" + kernel + ".npy", rows * d);
    const npy::array expected_lse = npy::read(head + "lse_" + kernel + ".npy");
    REQUIRE(expected_lse.element_count() >= rows);
    const attention_output out = flash_forward(resolve(description, c.shape, {c.scale, default_gpu(), {}, {}}), c.shape, q, k, v);
    std::uint64_t bad = 0;
    for (std::size_t i = 0; i < rows * d; ++i) bad += out.o[i] != expected_o[i];
    for (std::size_t i = 0; i < rows; ++i) bad += out.lse[i].bits != expected_lse.word(i);
    MESSAGE(description.name << " on " << c.name << ": " << rows * d << " O and " << rows << " L elements, " << bad
                             << " mismatches");
    compared += rows * d + rows;
    mismatches += bad;
  }
  return {compared, mismatches};
}

// O and L elements of the eleven heads every kernel ran; the memory-efficient
// and cuDNN backends also ran the causal 1000 x 300 one (a top-left mask).
constexpr std::uint64_t captured_elements = 128 * 65 + 128 * 129 + 1000 * 65 + 300 * 129 + 300 * 65 + 512 * 65 +
                                            512 * 129 + 512 * 65 + 512 * 129 + 512 * 129 + 512 * 65;
constexpr std::uint64_t efficient_elements = captured_elements + 1000 * 65;

}  // namespace

TEST_SUITE("attention") {
  TEST_CASE("kernel descriptions: every registry kernel and the Triton example survive JSON unchanged") {
    int round_trips = 0;
    for (const preset& p : presets()) {
      if (p.description == nullptr) continue;
      const kernel_description d = p.description();
      CHECK(d.name == p.name);
      const kernel_description back = kernel_from_json(kernel_to_json(d).dump());
      CHECK_MESSAGE(kernel_to_json(back) == kernel_to_json(d), p.name);
      ++round_trips;
    }
    CHECK(round_trips == 12);
    const kernel_description example = kernel_from_json(read_text(example_json));
    CHECK(example.name == "triton_flash_forward_example");
    CHECK(kernel_to_json(kernel_from_json(kernel_to_json(example).dump())) == kernel_to_json(example));
    CHECK(presets().front().name == "pytorch_sdpa_flash_sm90");  // the default
    CHECK_THROWS_WITH_AS(find_preset("flash"), doctest::Contains("the presets are: pytorch_sdpa_flash_sm90"),
                         std::invalid_argument);
  }

  TEST_CASE("kernel descriptions: what is not understood is refused, naming the field") {
    CHECK(refusal(read_text(example_json)).empty());
    CHECK(refusal("{") .find("not JSON") != std::string::npos);
    CHECK(refusal(with_field("colour", "\"red\"")) == "kernel description: field 'colour': unknown field");
    CHECK(refusal(with_field("row_sum", "\"pairwise\"")) ==
          "kernel description: field 'row_sum': 'pairwise' is not one of: thread_partials_across_blocks, block_sum_then_fma, "
          "warp_slices_then_add, thread_block_sums_fma, thread_block_sums_descaled_fma, thread_partials_of_p_bar");
    CHECK(refusal(with_field("tiles", R"({"64": {"block_m": "128", "block_n": 64}})")) ==
          "kernel description: field 'tiles.64.block_m': expected an integer from 16 to 1024");
    CHECK(refusal(with_field("tiles", R"({"64": {"block_m": 128, "block_n": 64, "warps": 4}})")) ==
          "kernel description: field 'tiles.64.warps': unknown field");
    CHECK(refusal(with_field("exponential", "2")) == "kernel description: field 'exponential': expected a string");
    // A combination the emulator does not compute.
    CHECK(refusal(with_field("max_units", "\"scores\"")).find("masked_max zero_shift or unshifted goes with max_units exponent") !=
          std::string::npos);
    nlohmann::json missing = nlohmann::json::parse(read_text(example_json));
    missing.erase("normalization");
    CHECK(refusal(missing.dump()) == "kernel description: field 'normalization': missing");
    // FlexAttention's decoding kernel runs below 128 query rows: refused, not computed.
    CHECK_THROWS_WITH_AS(resolve(flex_attention_sm90_description(), {1, 1, 17, 17, 64, false}),
                         doctest::Contains("min_query_rows"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(resolve(flex_attention_sm90_description(), {1, 1, 128, 128, 64, false}, {{}, default_gpu(), 2, {}}),
                         doctest::Contains("no split-KV path"), std::invalid_argument);
  }

  TEST_CASE("flex_attention_sm90 reproduces torch.compile(flex_attention) on the H100, O and L, bit for bit") {
    const auto [compared, mismatches] = replay(flex_attention_sm90_description(), "flex");
    MESSAGE("flex_attention_sm90: " << compared << " O and L elements, " << mismatches << " mismatches");
    CHECK(compared == captured_elements);
    CHECK(mismatches == 0);
  }

  TEST_CASE("pytorch_sdpa_efficient_sm90 reproduces PyTorch's memory-efficient backend on the H100, O and L, bit for bit") {
    const auto [compared, mismatches] = replay(pytorch_sdpa_efficient_sm90_description(), "efficient");
    MESSAGE("pytorch_sdpa_efficient_sm90: " << compared << " O and L elements, " << mismatches << " mismatches");
    CHECK(compared == efficient_elements);
    CHECK(mismatches == 0);
  }

  TEST_CASE("pytorch_sdpa_cudnn_sm90 reproduces PyTorch's cuDNN backend on the H100, O and L, bit for bit") {
    const auto [compared, mismatches] = replay(pytorch_sdpa_cudnn_sm90_description(), "cudnn");
    MESSAGE("pytorch_sdpa_cudnn_sm90: " << compared << " O and L elements, " << mismatches << " mismatches");
    CHECK(compared == efficient_elements);
    CHECK(mismatches == 0);
  }

  TEST_CASE("the Triton example's description file reproduces examples/triton/flash_forward.py, bit for bit") {
    const auto [compared, mismatches] = replay(kernel_from_json(read_text(example_json)), "triton_example");
    MESSAGE("triton_flash_forward_example: " << compared << " O and L elements, " << mismatches << " mismatches");
    CHECK(compared == captured_elements);
    CHECK(mismatches == 0);
  }

  TEST_CASE("a user's tiles whose blocks do not divide each other still mask every key past the diagonal") {
    // 128-row blocks and 192-key blocks (a description file may say so; no
    // preset does): the diagonal of row block 1 (rows 128..255) crosses key
    // blocks 0 and 1 even in an even shape, so FA2's ceil(128 / 192) = 1
    // masking step would leave keys 129..191 visible to rows 128..190.
    const attention_shape shape{1, 1, 384, 384, 64, true};
    flash_kernel kernel = pytorch_sdpa_flash_sm90(shape);
    kernel.block_m = 128;
    kernel.block_n = 192;
    kernel.splits = 1;  // one split: each split's first iteration is a masking step
    std::mt19937_64 generator(5);
    const auto draws = [&](std::size_t n) {
      std::vector<bfloat16> x(n);
      for (auto& e : x) e = from_double<bf16>(static_cast<double>(generator() >> 11) * 0x1p-52 - 1).result;
      return x;
    };
    const std::size_t d = 64, n = 384;
    const std::vector<bfloat16> q = draws(n * d), k = draws(n * d), v = draws(n * d);
    std::vector<bfloat16> future = v;  // keys 129.. changed: rows 0..128 never see them
    for (std::size_t i = 129 * d; i < n * d; ++i) future[i] = from_double<bf16>(100.0).result;
    const attention_output a = flash_forward(kernel, shape, q, k, v), b = flash_forward(kernel, shape, q, k, future);
    int differ = 0;
    for (std::size_t i = 0; i < 129 * d; ++i) differ += a.o[i].bits != b.o[i].bits;
    CHECK(differ == 0);
    // Row 129 sees key 129: the changed V reaches it, so the check can fail.
    int seen = 0;
    for (std::size_t i = 129 * d; i < 130 * d; ++i) seen += a.o[i].bits != b.o[i].bits;
    CHECK(seen > 0);
  }

  TEST_CASE("a wrong description fails the replay") {
    // One field changed from what the kernel does; the replay must see it.
    const auto fails = [](const kernel_description& wrong, const std::string& kernel, const std::string& what) {
      const auto [compared, mismatches] = replay(wrong, kernel);
      MESSAGE(what << ": " << mismatches << " mismatches of " << compared);
      CHECK(mismatches > 0);
    };
    // The example with the exponent as a rounded multiply and a subtraction instead of its FFMA.
    fails(kernel_from_json(with_field("exponent", "\"mul_then_sub\"")), "triton_example",
          "example with exponent mul_then_sub");
    // FlexAttention visiting the causal mask's blocks in plain ascending order
    // instead of its partially masked blocks first.
    kernel_description flex = flex_attention_sm90_description();
    flex.arithmetic.order = block_order::first_to_last;
    fails(flex, "flex", "flex with block_order first_to_last");
    // The memory-efficient kernel with Hopper's 16-product step (mma.sync m16n8k16) instead of its m16n8k8.
    kernel_description efficient = pytorch_sdpa_efficient_sm90_description();
    efficient.arithmetic.tensor_core = sm90_tensor_core;
    fails(efficient, "efficient", "efficient with 16-product steps");
    // The memory-efficient kernel's causal mask aligned bottom-right (flash-attention's) instead of top-left.
    efficient = pytorch_sdpa_efficient_sm90_description();
    efficient.arithmetic.causal = causal_alignment::bottom_right;
    fails(efficient, "efficient", "efficient with causal_alignment bottom_right");
    // cuDNN's kernel with Triton's per-block row sum instead of its per-thread sums.
    kernel_description cudnn = pytorch_sdpa_cudnn_sm90_description();
    cudnn.arithmetic.row_sum = row_sum_rule::block_sum_then_fma;
    fails(cudnn, "cudnn", "cudnn with block_sum_then_fma");
  }
}

TEST_SUITE("attention") {
  TEST_CASE("ptx::div_full_f32 reproduces Triton's x / y (div.full.f32) on the H100 bit for bit") {
    // x, y, x / y as fp32 bits, [17060, 3]: 8,192 attention-like quotients (an accumulator over a row
    // sum up to 2^20), 676 pairs of special and edge values, 8,192 random bit patterns; cut from the
    // 1,048,576 of cuda/capture/triton_attention.py (tests/data/README.md).
    const std::string path = std::string(BITEXACT_TEST_DATA_DIR) + "/div_full_f32.npy";
    CHECK(hex(test::file_checksum(path)) == "2c7f8cd941cf0415");
    const npy::array samples = npy::read(path);
    REQUIRE(samples.element_size() == 4);
    REQUIRE(samples.element_count() == 3 * 17060);
    std::uint64_t mismatches = 0;
    for (std::size_t i = 0; i < 17060; ++i) {
      const float32 x = float32::from_bits(samples.word(3 * i)), y = float32::from_bits(samples.word(3 * i + 1));
      const std::uint32_t gpu = samples.word(3 * i + 2), model = ptx::div_full_f32(x, y).bits;
      if (model != gpu && mismatches++ < 5)
        MESSAGE(hex(x.bits) << " / " << hex(y.bits) << ": GPU " << hex(gpu) << ", model " << hex(model));
    }
    CHECK(mismatches == 0);
  }
}
