// One row's intermediates and one element's traced computation
// (attention/explain.hpp) on captured heads: the record agrees with the
// emulator and with the GPU, and the traced chain of every element tried
// replays the emulator's values step by step (trace_output_element throws
// std::logic_error at the first step that does not).
#include <doctest/doctest.h>

#include <bitexact/attention/explain.hpp>
#include <bitexact/attention/kernels.hpp>
#include <string>
#include <vector>

#include <bitexact/testing/npy.hpp>

using namespace bitexact;
using namespace bitexact::attention;

namespace {

const std::string data_dir = std::string(BITEXACT_TEST_DATA_DIR) + "/attention/";

std::vector<bfloat16> read_bf16(const std::string& path) {
  const npy::array a = npy::read(path);
  std::vector<bfloat16> values(a.element_count());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = bfloat16::from_bits(a.word(i));
  return values;
}

struct captured_head {
  attention_shape shape;
  std::vector<bfloat16> q, k, v, o;
  std::vector<float32> lse;
};

captured_head read_head(const std::string& name, attention_shape shape) {
  const std::string dir = data_dir + name + "/";
  captured_head h{shape, read_bf16(dir + "q.npy"), read_bf16(dir + "k.npy"), read_bf16(dir + "v.npy"),
                  read_bf16(dir + "o.npy"), {}};
  const npy::array lse = npy::read(dir + "lse.npy");
  for (std::size_t i = 0; i < lse.element_count(); ++i) h.lse.push_back(float32::from_bits(lse.word(i)));
  return h;
}

int count(const element_trace& t, traced_step::kind what) {
  int n = 0;
  for (const traced_step& s : t.steps) n += s.what == what;
  return n;
}

// Rows and columns of one captured head: the record against the GPU's O and
// L, and the element chains with the steps the kernel runs.
void check_head(const captured_head& h, const flash_kernel& kernel, const std::vector<int>& rows,
                const std::vector<int>& cols) {
  const std::size_t d = static_cast<std::size_t>(h.shape.head_dim);
  int elements = 0;
  for (const int row : rows) {
    const row_record record = record_row(kernel, h.shape, h.q, h.k, h.v, row);
    for (std::size_t c = 0; c < d; ++c)
      REQUIRE_MESSAGE(record.o[c].bits == h.o[static_cast<std::size_t>(row) * d + c].bits, "row " << row << " col " << c);
    CHECK(record.lse.bits == h.lse[static_cast<std::size_t>(row)].bits);
    int tensor_core_steps = 0, splits_run = 0;
    for (const row_block& b : record.blocks) tensor_core_steps += static_cast<int>(b.p_bf16.size()) / 16;
    for (const row_split_end& end : record.splits) splits_run += end.ran;
    for (const int col : cols) {
      const element_trace t = trace_output_element(kernel, h.shape, record, h.v, col);
      ++elements;
      CHECK(count(t, traced_step::kind::tensor_core) == tensor_core_steps);
      CHECK(count(t, traced_step::kind::rescale) == static_cast<int>(record.blocks.size()) - splits_run);
      CHECK(count(t, traced_step::kind::normalize) == splits_run);
      CHECK(count(t, traced_step::kind::combine) == (kernel.splits > 1 ? kernel.splits : 0));
      REQUIRE(t.steps.back().what == traced_step::kind::to_bf16);
      CHECK(t.steps.back().record.result_bits == h.o[static_cast<std::size_t>(row) * d + static_cast<std::size_t>(col)].bits);
      for (const traced_step& s : t.steps)
        if (s.what == traced_step::kind::tensor_core) {
          REQUIRE(s.record.fused);
          CHECK(s.record.fused->terms.size() == 17);  // 16 products of P and V, then C
        }
    }
    // A score the row saw: its chain over the head dim, in steps of 16.
    const row_block& last = record.blocks.front();
    for (std::size_t j = 0; j < last.scores.size(); ++j)
      if (last.scores[j] != float32::infinity(true)) {
        CHECK(trace_score_element(kernel, h.shape, record, h.q, h.k, last.first_key + static_cast<int>(j)).size() == d / 16);
        break;
      }
  }
  MESSAGE(elements << " elements traced, each step replayed against the emulator");
}

}  // namespace

TEST_SUITE("attention") {
  TEST_CASE("explain: one row and its elements' traced roundings, single-kernel and split-KV heads") {
    const captured_head single = read_head("single_d128_n17_causal_normal_h211", {1, 1, 17, 17, 128, true});
    // Head 211 of a call with 212 heads (MANIFEST): the single kernel.
    const flash_kernel single_kernel = pytorch_sdpa_flash_sm90({1, 212, 17, 17, 128, true});
    REQUIRE(single_kernel.splits == 1);
    check_head(single, single_kernel, {0, 9, 16}, {0, 77, 127});

    const captured_head split = read_head("split_d64_n1000_causal_ties_positive_h3", {1, 1, 1000, 1000, 64, true});
    const flash_kernel split_kernel = pytorch_sdpa_flash_sm90({1, 4, 1000, 1000, 64, true});
    REQUIRE(split_kernel.splits > 1);
    check_head(split, split_kernel, {0, 511, 999}, {5, 63});
  }

  TEST_CASE("explain: rows, columns and keys that do not exist are refused") {
    const captured_head h = read_head("single_d128_n17_causal_normal_h211", {1, 1, 17, 17, 128, true});
    const flash_kernel kernel = pytorch_sdpa_flash_sm90(h.shape);
    CHECK_THROWS_AS(record_row(kernel, h.shape, h.q, h.k, h.v, 17), std::invalid_argument);
    CHECK_THROWS_AS(record_row(kernel, h.shape, h.q, h.k, h.v, -1), std::invalid_argument);
    const row_record record = record_row(kernel, h.shape, h.q, h.k, h.v, 3);
    CHECK_THROWS_AS(trace_output_element(kernel, h.shape, record, h.v, 128), std::invalid_argument);
    CHECK_THROWS_AS(trace_score_element(kernel, h.shape, record, h.q, h.k, 4), std::invalid_argument);  // causal: row 3 sees keys 0..3
    CHECK_THROWS_AS(trace_score_element(kernel, h.shape, record, h.q, h.k, 17), std::invalid_argument);
    CHECK_NOTHROW(trace_score_element(kernel, h.shape, record, h.q, h.k, 3));
  }
}
