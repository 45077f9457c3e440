// The buffer check helper finds a planted mismatch at the right index and
// explains it with both bit patterns and the model's trace.
#include <doctest/doctest.h>

#include <bitexact/bitexact.hpp>
#include <bitexact/testing/check.hpp>
#include <bitexact/testing/doctest.hpp>

#include <cstdint>
#include <vector>

using namespace bitexact;

namespace {

// A deterministic batch of bf16 additions standing in for a kernel's inputs.
struct batch {
  std::vector<bfloat16> x, y;
  explicit batch(std::size_t n) {
    std::uint32_t state = 12345;
    const auto next = [&] {
      state = state * 1664525u + 1013904223u;
      return bfloat16::from_bits((0x3C00 + ((state >> 16) & 0x07FF)) | ((state >> 8) & 0x8000));
    };
    for (std::size_t i = 0; i < n; ++i) {
      x.push_back(next());
      y.push_back(next());
    }
  }
  bfloat16 model(std::size_t i) const { return add(x[i], y[i]).result; }
  trace explain(std::size_t i) const {
    return traced([&](auto& recorder) { return add(x[i], y[i], {}, recorder); }).record;
  }
};

}  // namespace

TEST_SUITE("check") {

TEST_CASE("a planted one-ulp mismatch is reported at its index with both patterns and the model's trace") {
  const batch b(1000);
  std::vector<std::uint16_t> kernel_output;
  for (std::size_t i = 0; i < 1000; ++i) kernel_output.push_back(b.model(i).bits);
  kernel_output[437] ^= 1;  // the "kernel" rounded element 437 differently
  kernel_output[900] ^= 0x8000;

  const auto report = check_against_model<bf16>(
      kernel_output, [&](std::size_t i) { return b.model(i); }, [&](std::size_t i) { return b.explain(i); });
  CHECK(report.compared == 1000);
  CHECK(report.mismatches == 2);
  CHECK(!report.ok());
  REQUIRE(report.first_mismatch);
  CHECK(report.first_mismatch->index == 437);
  CHECK(report.first_mismatch->expected == b.model(437).bits);
  CHECK(report.first_mismatch->got == (b.model(437).bits ^ 1u));
  CHECK(report.first_mismatch->side_by_side.find("<- differs") != std::string::npos);
  CHECK(report.first_mismatch->model_trace == render(b.explain(437)));
  const std::string message = report.message();
  CHECK(message.find("2 of 1000 elements differ from the model; first at index 437") == 0);
  CHECK(message.find("model trace of element 437:\nadd bf16, bf16 -> bf16") != std::string::npos);
}

TEST_CASE("spans of value<F> compare the same way, and a clean buffer passes the doctest macro") {
  const batch b(256);
  std::vector<bfloat16> kernel_output;
  for (std::size_t i = 0; i < 256; ++i) kernel_output.push_back(b.model(i));
  BITEXACT_CHECK_MATCHES_MODEL(check_against_model<bf16>(std::span<const bfloat16>(kernel_output),
                                                         [&](std::size_t i) { return b.model(i); }));
  kernel_output[0] = bfloat16::from_bits(kernel_output[0].bits + 1);
  const auto report = check_against_model<bf16>(kernel_output, [&](std::size_t i) { return b.model(i); });
  CHECK(report.mismatches == 1);
  CHECK(report.first_mismatch->index == 0);
  CHECK(report.first_mismatch->model_trace.empty());  // no explainer given
  CHECK(report.first_mismatch->side_by_side.find("distance   1 ulp") != std::string::npos);
}

TEST_CASE("NaN payload differences count unless any NaN is allowed to match") {
  const std::vector<std::uint32_t> kernel_output = {0x7FFFFFFFu, 0x3F800000u};  // CUDA's canonical NaN
  const auto model = [](std::size_t i) { return i == 0 ? float32{0xFFC00000u} : float32{0x3F800000u}; };
  CHECK(check_against_model<fp32>(kernel_output, model).mismatches == 1);
  CHECK(check_against_model<fp32>(kernel_output, model, {}, check_options{true}).ok());
}

}  // TEST_SUITE
