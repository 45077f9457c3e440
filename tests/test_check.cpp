// The buffer check helper finds a planted mismatch at the right index and
// explains it with both bit patterns and the model's trace.
#include <doctest/doctest.h>

#include <bitexact/bitexact.hpp>
#include <bitexact/testing/check.hpp>
#include <bitexact/testing/doctest.hpp>

#include <cstdint>
#include <optional>
#include <string>
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
  CHECK(report.mismatch_indices == std::vector<std::size_t>{437, 900});
  CHECK(!report.ok());
  REQUIRE(report.first_mismatch);
  CHECK(report.first_mismatch->index == 437);
  CHECK(report.first_mismatch->expected == b.model(437).bits);
  CHECK(report.first_mismatch->got == (b.model(437).bits ^ 1u));
  CHECK(report.first_mismatch->side_by_side.find("<- differs") != std::string::npos);
  CHECK(report.first_mismatch->model_trace == render(b.explain(437)));
  const std::string message = report.message();
  CHECK(message.find("2 of 1000 elements differ from the model; first at index 437\nindices: 437 900\n") == 0);
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
  CHECK(report.first_mismatch->side_by_side.find("distance   +1 ulp (got above the model's value)") !=
        std::string::npos);
}

TEST_CASE("NaN payload differences count unless any NaN is allowed to match") {
  const std::vector<std::uint32_t> kernel_output = {0x7FFFFFFFu, 0x3F800000u};  // CUDA's canonical NaN
  const auto model = [](std::size_t i) { return i == 0 ? float32{0xFFC00000u} : float32{0x3F800000u}; };
  CHECK(check_against_model<fp32>(kernel_output, model).mismatches == 1);
  CHECK(check_against_model<fp32>(kernel_output, model, {}, check_options{true}).ok());
}

TEST_CASE("a buffer wider than the format is refused at compile time instead of masked") {
  static_assert(model_buffer_element<bf16, std::uint16_t> && model_buffer_element<bf16, bfloat16>);
  static_assert(!model_buffer_element<bf16, std::uint32_t>);  // 0xDEAD3F80 would have passed as 0x3F80
  static_assert(!model_buffer_element<bf16, float32> && !model_buffer_element<bf16, std::int16_t>);
  static_assert(!model_buffer_element<fp32, std::uint64_t> && !model_buffer_element<e4m3, bool>);
  static_assert(model_buffer_element<tf32, std::uint32_t> && model_buffer_element<e5m2, std::uint8_t>);
  static_assert(model_buffer_element<fp32, float> && !model_buffer_element<bf16, float>);
}

TEST_CASE("an fp32 kernel's float buffer is compared by its bits") {
  const std::vector<float> kernel_output = {1.0f, -0.0f, 0.1f};
  const auto model = [](std::size_t i) { return i == 0 ? from_host(1.0f) : i == 1 ? float32::zero() : from_host(0.1f); };
  const auto report = check_against_model<fp32>(std::span<const float>(kernel_output), model);
  CHECK(report.mismatch_indices == std::vector<std::size_t>{1});  // -0 is not +0
}

TEST_CASE("a tf32 in 32-bit storage with a bit set above bit 18 is a mismatch, shown apart from the fields") {
  const tfloat32 one = tfloat32::from_bits(0x1FC00);
  const std::vector<std::uint32_t> kernel_output = {one.bits, one.bits | (1u << 19), one.bits | 0xFFF80000u};
  const auto report = check_against_model<tf32>(kernel_output, [&](std::size_t) { return one; });
  CHECK(report.mismatch_indices == std::vector<std::size_t>{1, 2});
  REQUIRE(report.first_mismatch);
  CHECK(report.first_mismatch->got == 0x9FC00u);
  CHECK(report.first_mismatch->side_by_side.find("  above 18   0x80000                            none") !=
        std::string::npos);
  CHECK(report.first_mismatch->side_by_side.find("distance") == std::string::npos);  // not a value of tf32
  const std::vector<tfloat32> stray_in_value = {tfloat32{0x1FC00u | (1u << 31)}};
  CHECK(check_against_model<tf32>(stray_in_value, [&](std::size_t) { return one; }).mismatches == 1);
}

TEST_CASE("the distance counts representable values from the model's to the buffer's, positive above it") {
  CHECK(ulp_distance(bf16, 0xBF2E, 0xC02E) == 256);  // -0.6796875 lies 256 bf16 values above -2.71875
  CHECK(ulp_distance(bf16, 0xC02E, 0xBF2E) == -256);
  CHECK(ulp_distance(bf16, 0x3F81, 0x3F80) == 1);
  CHECK(ulp_distance(bf16, 0x8001, 0x0001) == -2);  // across zero, +0 and -0 one point
  CHECK(ulp_distance(bf16, 0x8000, 0x0000) == 0);
  CHECK(ulp_distance(bf16, 0x7F80, 0x7F7F) == 1);  // infinity is the step after the largest finite value
  CHECK(ulp_distance(bf16, 0x7FC0, 0x3F80) == std::nullopt);
  CHECK(ulp_distance(fp32, 0xFF7FFFFFu, 0x7F7FFFFFu) == -2 * 0x7F7FFFFFll);
  const std::string negative = side_by_side(bf16, 0xBF2E, 0xC02E);
  CHECK(negative.find("distance   +256 ulp (got above the model's value)") != std::string::npos);
  CHECK(side_by_side(bf16, 0x8001, 0x0001).find("distance   -2 ulp (got below the model's value)") !=
        std::string::npos);
}

TEST_CASE("zero and subnormal exponent fields show what they mean, not the field minus the bias") {
  const std::string shown = side_by_side(bf16, 0x0000, 0x0001);
  CHECK(shown.find("exponent   00000000 (zero)                    00000000 (-126, subnormal)   <- differs") !=
        std::string::npos);
  CHECK(shown.find("(-127)") == std::string::npos);
  CHECK(side_by_side(fp16, 0x7C00, 0x7E00).find("11111 (infinity)                   11111 (NaN)") !=
        std::string::npos);
  CHECK(side_by_side(e4m3, 0x7E, 0x7F).find("1111 (8)                           1111 (8)\n") != std::string::npos);
}

TEST_CASE("counts read in the singular for one, and the reference column is named for what it holds") {
  CHECK(counted(1, "mismatch", "mismatches") == "1 mismatch");
  CHECK(counted(0, "mismatch", "mismatches") == "0 mismatches");
  CHECK(counted(2176, "element", "elements") == "2176 elements");
  const std::string by_hand = side_by_side(bf16, 0x3F80, 0x3F81, "expected");
  CHECK(by_hand.starts_with("             got                                expected\n"));
  CHECK(by_hand.find("(got below the expected value)") != std::string::npos);
  CHECK(by_hand.find("model") == std::string::npos);
  CHECK(side_by_side(bf16, 0x3F80, 0x3F81).find("(got below the model's value)") != std::string::npos);
}

}  // TEST_SUITE
