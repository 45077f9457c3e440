// The flash-attention emulator against PyTorch's flash backend on an H100:
// every element of O and L of the captured heads in tests/data/attention
// (MANIFEST says which calls they come from), and the split count of every
// shape in its kernel survey.
#include <doctest/doctest.h>

#include <bitexact/attention/flash_forward.hpp>
#include <bitexact/attention/kernels.hpp>
#include <bitexact/core/checksum.hpp>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "attention_captures.hpp"
#include <bitexact/testing/npy.hpp>

using namespace bitexact;
using namespace bitexact::attention;

namespace {

const std::string data_dir = std::string(BITEXACT_TEST_DATA_DIR) + "/attention";

using test::captured_case;
using test::read_bf16;

// A folder's cases, every file's checksum checked, files_per_case files a case.
std::vector<captured_case> read_manifest(const std::string& dir = data_dir, int files_per_case = 5) {
  const test::captured_manifest manifest = test::read_manifest(dir);
  CHECK(manifest.files == files_per_case * static_cast<int>(manifest.cases.size()));
  return manifest.cases;
}

// A captured scale as the kernel takes it.
std::optional<float32> scale_of(const captured_case& c) {
  return c.scale ? std::optional<float32>(from_host(static_cast<float>(*c.scale))) : std::nullopt;
}

}  // namespace

TEST_SUITE("attention") {
  TEST_CASE("pytorch_sdpa_flash_sm90 reproduces PyTorch's flash forward, O and L, bit for bit") {
    const std::vector<captured_case> cases = read_manifest();
    std::uint64_t o_compared = 0, lse_compared = 0, mismatches = 0, split_path_elements = 0;
    for (const captured_case& c : cases) {
      const std::size_t rows = static_cast<std::size_t>(c.shape.query_rows), keys = static_cast<std::size_t>(c.shape.key_rows);
      const std::size_t d = static_cast<std::size_t>(c.shape.head_dim);
      const flash_kernel kernel = pytorch_sdpa_flash_sm90(c.shape, scale_of(c));
      CHECK_MESSAGE(kernel.splits == c.splits, c.name);
      const std::string dir = data_dir + "/" + c.name + "/";
      const auto q = read_bf16(dir + "q.npy", rows * d), k = read_bf16(dir + "k.npy", keys * d),
                 v = read_bf16(dir + "v.npy", keys * d), expected_o = read_bf16(dir + "o.npy", rows * d);
      const npy::array expected_lse = npy::read(dir + "lse.npy");
      REQUIRE(expected_lse.element_count() == rows);
      std::vector<bfloat16> o(rows * d);
      std::vector<float32> lse(rows);
      flash_forward_head(kernel, c.shape, q, k, v, o, lse);
      std::uint64_t bad = 0;
      std::string first;
      for (std::size_t i = 0; i < rows * d; ++i)
        if (o[i] != expected_o[i] && bad++ == 0) first = "O[" + std::to_string(i / d) + "][" + std::to_string(i % d) + "]";
      for (std::size_t i = 0; i < rows; ++i)
        if (lse[i].bits != expected_lse.word(i) && bad++ == 0) first = "L[" + std::to_string(i) + "]";
      CHECK_MESSAGE(bad == 0, c.name << ": " << bad << " mismatches, the first at " << first);
      o_compared += rows * d;
      lse_compared += rows;
      mismatches += bad;
      if (kernel.splits > 1) split_path_elements += rows * d + rows;
      MESSAGE(c.name << " (" << kernel.splits << (kernel.splits > 1 ? std::string(" splits") : std::string(" split")) << "): " << rows * d
                     << " O and " << rows << " L elements, " << bad << " mismatches");
    }
    MESSAGE(cases.size() << " captured heads: " << o_compared << " O and " << lse_compared << " L elements, "
                         << mismatches << " mismatches");
    CHECK(cases.size() == 6);
    CHECK(o_compared == 17 * 64 + 128 * 128 + 17 * 128 + 2 * 1000 * 64 + 1000 * 128);
    CHECK(split_path_elements > 0);
    CHECK(mismatches == 0);
  }

  TEST_CASE("our kernels on the H100 agree with pytorch_sdpa_flash_sm90 and its stabilized presets, O and L, bit for bit") {
    // cuda/attention/flash_forward.cu, the three kernels on the same inputs, captured by
    // cuda/attention/check_flash_forward.py (tests/data/README.md).
    const std::string dir = std::string(BITEXACT_TEST_DATA_DIR) + "/attention_kernel";
    const std::vector<captured_case> cases = read_manifest(dir, 9);
    std::uint64_t compared = 0, mismatches = 0, differ_from_standard = 0, across_differs = 0;
    for (const captured_case& c : cases) {
      const std::size_t rows = static_cast<std::size_t>(c.shape.query_rows), keys = static_cast<std::size_t>(c.shape.key_rows);
      const std::size_t d = static_cast<std::size_t>(c.shape.head_dim);
      const std::string head = dir + "/" + c.name + "/";
      const auto q = read_bf16(head + "q.npy", rows * d), k = read_bf16(head + "k.npy", keys * d),
                 v = read_bf16(head + "v.npy", keys * d);
      attention_shape one_head = c.shape;
      one_head.batch = one_head.heads = 1;
      std::vector<bfloat16> standard_o, stabilized_o;
      for (const std::string variant : {"standard", "stabilized", "across"}) {
        // The call's B x H decide the path: our kernels are PyTorch's single-split one.
        const flash_kernel kernel = variant == "standard"     ? pytorch_sdpa_flash_sm90(c.shape, scale_of(c))
                                    : variant == "stabilized" ? pytorch_sdpa_flash_sm90_stabilized(c.shape, scale_of(c))
                                                              : pytorch_sdpa_flash_sm90_stabilized_across_blocks(c.shape, scale_of(c));
        REQUIRE(kernel.splits == 1);
        const auto expected_o = read_bf16(head + "o_" + variant + ".npy", rows * d);
        const npy::array expected_lse = npy::read(head + "lse_" + variant + ".npy");
        REQUIRE(expected_lse.element_count() == rows);
        const attention_output out = flash_forward(kernel, one_head, q, k, v);
        std::uint64_t bad = 0;
        for (std::size_t i = 0; i < rows * d; ++i) bad += out.o[i] != expected_o[i];
        for (std::size_t i = 0; i < rows; ++i) bad += out.lse[i].bits != expected_lse.word(i);
        CHECK_MESSAGE(bad == 0, c.name << ", " << variant << ": " << bad << " mismatches");
        MESSAGE(c.name << ", " << variant << ": " << rows * d << " O and " << rows << " L elements, " << bad << " mismatches");
        compared += rows * d + rows;
        mismatches += bad;
        if (variant == "standard") standard_o = expected_o;
        else if (variant == "stabilized") {
          stabilized_o = expected_o;
          for (std::size_t i = 0; i < rows * d; ++i) differ_from_standard += expected_o[i] != standard_o[i];
        } else
          for (std::size_t i = 0; i < rows * d; ++i) across_differs += expected_o[i] != stabilized_o[i];
      }
    }
    MESSAGE(cases.size() << " heads, three kernels: " << compared << " O and L elements, " << mismatches << " mismatches; "
                         << differ_from_standard << " O elements of the stabilized kernel differ from the standard one, "
                         << across_differs << " of the across-blocks kernel from the stabilized one");
    CHECK(cases.size() == 10);
    CHECK(compared == 3 * (64 + 1 + 128 + 1 + 17 * 64 + 17 + 17 * 128 + 17 + 128 * 64 + 128 + 128 * 128 + 128 + 1000 * 64 + 1000 +
                           1000 * 128 + 1000 + 1000 * 64 + 1000 + 300 * 64 + 300));
    CHECK(mismatches == 0);
    CHECK(differ_from_standard > 0);  // the rule changed something: the stabilized captures are not the standard kernel's
    CHECK(across_differs > 0);        // and across blocks it is another rule
  }

  TEST_CASE("flash_forward runs every head of a call; wrong sizes are refused before any read") {
    // The b1h2 call of the command's tests: two heads of N = 17, d = 64, causal, one kernel for both.
    const std::string dir = std::string(BITEXACT_TEST_DATA_DIR) + "/../cli/";
    const attention_shape shape{1, 2, 17, 17, 64, true};
    const auto q = read_bf16(dir + "attention_b1h2_q.npy", 2 * 17 * 64), k = read_bf16(dir + "attention_b1h2_k.npy", 2 * 17 * 64),
               v = read_bf16(dir + "attention_b1h2_v.npy", 2 * 17 * 64), o = read_bf16(dir + "attention_b1h2_o.npy", 2 * 17 * 64);
    const npy::array lse = npy::read(dir + "attention_b1h2_lse.npy");
    const flash_kernel kernel = pytorch_sdpa_flash_sm90(shape);
    const attention_output out = flash_forward(kernel, shape, q, k, v);
    REQUIRE(out.o.size() == o.size());
    REQUIRE(out.lse.size() == lse.element_count());
    int mismatches = 0;
    for (std::size_t i = 0; i < o.size(); ++i) mismatches += out.o[i] != o[i];
    for (std::size_t i = 0; i < out.lse.size(); ++i) mismatches += out.lse[i].bits != lse.word(i);
    CHECK(mismatches == 0);

    const std::vector<bfloat16> short_q(q.begin(), q.end() - 1);
    CHECK_THROWS_AS(flash_forward(kernel, shape, short_q, k, v), std::invalid_argument);
    std::vector<bfloat16> head_o(17 * 64);
    std::vector<float32> head_lse(17);
    const attention_shape one_head{1, 1, 17, 17, 64, true};
    CHECK_THROWS_AS(flash_forward_head(kernel, one_head, std::span<const bfloat16>(q).first(17 * 64 - 1),
                                       std::span<const bfloat16>(k).first(17 * 64), std::span<const bfloat16>(v).first(17 * 64),
                                       head_o, head_lse),
                    std::invalid_argument);
    attention_shape odd_dim = one_head;
    odd_dim.head_dim = 40;
    CHECK_THROWS_AS(flash_forward_head(kernel, odd_dim, std::span<const bfloat16>(q).first(17 * 40),
                                       std::span<const bfloat16>(k).first(17 * 40), std::span<const bfloat16>(v).first(17 * 40),
                                       std::span<bfloat16>(head_o).first(17 * 40), head_lse),
                    std::invalid_argument);
  }

  TEST_CASE("the split heuristic gives PyTorch's split count for every shape of its survey") {
    std::ifstream in(data_dir + "/split_survey.txt");
    REQUIRE(in);
    int shapes = 0, mismatches = 0, split = 0;
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream fields(line);
      attention_shape shape;
      int causal = 0, splits = 0;
      fields >> shape.batch >> shape.heads >> shape.query_rows >> shape.head_dim >> causal >> splits;
      REQUIRE(fields);
      shape.key_rows = shape.query_rows;
      shape.causal = causal != 0;
      ++shapes;
      split += splits > 1;
      if (pytorch_sdpa_flash_sm90(shape).splits != splits && mismatches++ < 5)
        MESSAGE("B " << shape.batch << " H " << shape.heads << " N " << shape.query_rows << " d " << shape.head_dim
                     << ": PyTorch " << splits << ", model " << pytorch_sdpa_flash_sm90(shape).splits);
    }
    MESSAGE(shapes << " shapes (" << split << " on the split-KV path), " << mismatches << " mismatches");
    CHECK(shapes == 936);
    CHECK(split > 100);
    CHECK(mismatches == 0);
  }
}
