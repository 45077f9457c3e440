// PyTorch's flash-attention backward (attention/flash_backward.hpp) against
// the captures of tests/data/attention_backward: dQ, dK and dV of each head,
// bit for bit, under torch.use_deterministic_algorithms; and models that are
// wrong in one place fail them.
#include <doctest/doctest.h>

#include <bitexact/attention/flash_backward.hpp>
#include <cmath>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "attention_captures.hpp"
#include <bitexact/testing/npy.hpp>

using namespace bitexact;
using namespace bitexact::attention;

namespace {

const std::string backward_dir = std::string(BITEXACT_TEST_DATA_DIR) + "/attention_backward";

struct backward_case {
  test::captured_case c;
  std::vector<bfloat16> q, k, v, o, d_o, dq, dk, dv;
  std::vector<float32> lse;
};

std::vector<backward_case> read_backward_heads() {
  test::captured_manifest manifest = test::read_manifest(backward_dir);
  CHECK(manifest.files == 6 * 9);
  std::vector<backward_case> heads;
  for (const test::captured_case& c : manifest.cases) {
    const std::size_t rows = static_cast<std::size_t>(c.shape.query_rows), keys = static_cast<std::size_t>(c.shape.key_rows);
    const std::size_t d = static_cast<std::size_t>(c.shape.head_dim);
    const std::string head = backward_dir + "/" + c.name + "/";
    backward_case b{c,
                    test::read_bf16(head + "q.npy", rows * d),
                    test::read_bf16(head + "k.npy", keys * d),
                    test::read_bf16(head + "v.npy", keys * d),
                    test::read_bf16(head + "o.npy", rows * d),
                    test::read_bf16(head + "do.npy", rows * d),
                    test::read_bf16(head + "dq.npy", rows * d),
                    test::read_bf16(head + "dk.npy", keys * d),
                    test::read_bf16(head + "dv.npy", keys * d),
                    {}};
    const npy::array lse = npy::read(head + "lse.npy");
    REQUIRE(lse.element_count() == rows);
    for (std::size_t i = 0; i < rows; ++i) b.lse.push_back(float32::from_bits(lse.word(i)));
    heads.push_back(std::move(b));
  }
  return heads;
}

// How a model differs from the captures: elements compared, and the
// mismatches of dQ, dK and dV.
struct replay_counts {
  std::uint64_t compared = 0, dq = 0, dk = 0, dv = 0;
  std::uint64_t mismatches() const { return dq + dk + dv; }
};

template <class Adjust>
replay_counts replay(std::span<const backward_case> heads, Adjust&& adjust) {
  replay_counts counts;
  for (const backward_case& b : heads) {
    const double scale = b.c.scale ? *b.c.scale : 1.0 / std::sqrt(static_cast<double>(b.c.shape.head_dim));
    flash_backward_kernel kernel = pytorch_sdpa_flash_sm90_backward(b.c.shape, scale);
    CHECK_MESSAGE(kernel.dq_splits == b.c.splits, b.c.name);
    adjust(kernel);
    const backward_gradients g = flash_backward_head(kernel, b.c.shape, b.q, b.k, b.v, b.o, b.lse, b.d_o);
    std::uint64_t bad[3] = {0, 0, 0};
    for (std::size_t i = 0; i < b.dq.size(); ++i) bad[0] += g.dq[i] != b.dq[i];
    for (std::size_t i = 0; i < b.dk.size(); ++i) bad[1] += g.dk[i] != b.dk[i];
    for (std::size_t i = 0; i < b.dv.size(); ++i) bad[2] += g.dv[i] != b.dv[i];
    MESSAGE(b.c.name << ": " << b.dq.size() + b.dk.size() + b.dv.size() << " elements, mismatches dQ " << bad[0]
                     << ", dK " << bad[1] << ", dV " << bad[2]);
    counts.compared += b.dq.size() + b.dk.size() + b.dv.size();
    counts.dq += bad[0];
    counts.dk += bad[1];
    counts.dv += bad[2];
  }
  return counts;
}

// dQ, dK and dV elements of the six heads: 4096 x 64 (17 dQ buffers, two key
// blocks each), 512 x 128 (one buffer, four key blocks), 512 x 128 causal with
// 64 keys at the max, 1000 queries against 300 keys causal (rows that see no
// key), 512 x 64 with NaN and inf, 17 x 128 causal.
constexpr std::uint64_t captured_elements = 3 * 4096 * 64 + 3 * 512 * 128 + 3 * 512 * 128 + (1000 + 2 * 300) * 64 +
                                            3 * 512 * 64 + 3 * 17 * 128;

}  // namespace

TEST_SUITE("attention") {
  TEST_CASE("backward: PyTorch's flash backward on the H100, dQ, dK and dV bit for bit") {
    const std::vector<backward_case> heads = read_backward_heads();
    const replay_counts counts = replay(heads, [](flash_backward_kernel&) {});
    MESSAGE("flash backward: " << counts.compared << " elements, " << counts.mismatches() << " mismatches");
    CHECK(counts.compared == captured_elements);
    CHECK(counts.mismatches() == 0);
  }

  TEST_CASE("backward: a model wrong in one place fails the replay") {
    const std::vector<backward_case> heads = read_backward_heads();
    // dQ's tiles all added into one buffer, as when B H >= 132, instead of dealt to the call's 17.
    const replay_counts one_buffer =
        replay(std::span(heads).first(1), [](flash_backward_kernel& k) { k.dq_splits = 1; });
    MESSAGE("one dQ buffer: " << one_buffer.dq << " dQ mismatches");
    CHECK(one_buffer.dq > 0);
    CHECK(one_buffer.dk + one_buffer.dv == 0);
    // The tensor core taking 8 products a step (mma.sync m16n8k8) instead of 16.
    const std::span<const backward_case> smaller = std::span(heads).subspan(1);
    const replay_counts k8 = replay(smaller, [](flash_backward_kernel& k) { k.tensor_core = sm90_tensor_core_k8; });
    MESSAGE("8-product steps: " << k8.mismatches() << " mismatches");
    CHECK(k8.dk > 0);
    CHECK(k8.dv > 0);
    // P's exponent as one FFMA instead of PyTorch's unfused multiply and subtraction.
    const replay_counts fused = replay(smaller, [](flash_backward_kernel& k) { k.unfused_exponent = false; });
    MESSAGE("fused exponent: " << fused.mismatches() << " mismatches");
    CHECK(fused.mismatches() > 0);
  }
}
