// Traces of a tensor-core step: the worked example of docs/hardware.md
// ("Worked trace of a tensor-core step"), its key numbers asserted.
//
// Four bf16 products and an fp32 C on the Hopper unit (e_max = 0, window
// 2^-25): p2 = (1 + 2^-7)^2 * 2^-18 has a bit at 2^-32 that the window cuts
// away, and the kept sum 2 + 2^-18 + 2^-20 + 2^-21 + 2^-22 + 2^-23 lies
// exactly half an ulp above an fp32 value: round toward zero keeps
// 0x40000017 where round to nearest even would give 0x40000018.
#include <bitexact/hardware/mma.hpp>
#include <bitexact/trace/render.hpp>

#include <array>
#include <cstdlib>
#include <span>
#include <string>

#include <doctest/doctest.h>

namespace {

using namespace bitexact;

struct worked_example {
  std::array<bfloat16, 4> a{bfloat16::from_bits(0x3F80), bfloat16::from_bits(0x3FC0), bfloat16::from_bits(0x3F81),
                            bfloat16::from_bits(0x3FC0)};
  std::array<bfloat16, 4> b{bfloat16::from_bits(0x3F80), bfloat16::from_bits(0x3580), bfloat16::from_bits(0x3681),
                            bfloat16::from_bits(0x3400)};
  float32 c = float32::from_bits(0x3F800001);  // 1 + 2^-23

  auto run() const {
    return traced([&](auto& recorder) {
      return fused_multiply_add_step<fp32, bf16>(sm90_tensor_core, std::span<const bfloat16>(a),
                                                 std::span<const bfloat16>(b), c, recorder);
    });
  }
};

}  // namespace

TEST_CASE("fused step trace: window, truncated term, fused sum and the final round toward zero") {
  const auto [result, record] = worked_example{}.run();
  CHECK(result.result.bits == 0x40000017u);
  CHECK(result.raised.bits == flags::inexact);
  REQUIRE(record.fused.has_value());
  const fused_step_record& f = *record.fused;
  CHECK(f.max_exponent == 0);
  CHECK(f.lsb_exponent == -25);
  CHECK(f.kept_fraction_bits == 25);
  REQUIRE(f.terms.size() == 5);
  // p2 = (1 + 2^-7)^2 * 2^-18: significand 129 * 129 = 16641, last bit 2^-32.
  const fused_term_record& p2 = f.terms[2];
  CHECK(p2.event.index == 2);
  CHECK(p2.event.significand == 16641u);
  CHECK(p2.event.exponent == -32);
  CHECK(p2.event.nominal_exponent == -18);
  CHECK(p2.event.truncated);
  CHECK(p2.truncated_bits == "0000001");
  CHECK(p2.truncated_value == exact_rational(1, boost::multiprecision::cpp_int(1) << 32));
  CHECK(p2.event.kept == 130);  // 2^-18 + 2^-24 in units of 2^-25
  for (const int untouched : {0, 1, 3, 4}) CHECK_FALSE(f.terms[static_cast<std::size_t>(untouched)].event.truncated);
  CHECK(f.terms[4].event.index == -1);  // C comes last
  // 2 + 2^-18 + 2^-20 + 2^-21 + 2^-22 + 2^-23 in units of 2^-25.
  CHECK(f.sum == (std::int64_t{2} << 25) + 128 + 32 + 16 + 8 + 4);
  CHECK(f.exact_sum - f.kept_sum == exact_rational(1, boost::multiprecision::cpp_int(1) << 32));
  // The rounding: guard bit 1 (2^-23), nothing after it, truncated toward zero.
  REQUIRE(record.rounding.has_value());
  CHECK(record.rounding->mode == rounding_mode::toward_zero);
  CHECK(record.rounding->guard);
  CHECK_FALSE(record.rounding->sticky);
  CHECK_FALSE(record.rounding->increment);
  CHECK(record.result_bits == 0x40000017u);
  REQUIRE(record.error.has_value());  // result - exact = -(2^-23 + 2^-32)
  CHECK(*record.error == -(exact_rational(1, boost::multiprecision::cpp_int(1) << 23) +
                           exact_rational(1, boost::multiprecision::cpp_int(1) << 32)));
}

TEST_CASE("fused step trace renders the aligned terms, the cut bits and the rounding") {
  const auto [result, record] = worked_example{}.run();
  const std::string text = render(record, output_style::text);
  CHECK(text.find("fused multiply-add step: 4 products + C -> fp32") != std::string::npos);
  CHECK(text.find("e_max = 0") != std::string::npos);
  CHECK(text.find("truncated 0000001") != std::string::npos);
  CHECK(text.find("fp32:0x40000017") != std::string::npos);
  CHECK(text.find("round toward zero") != std::string::npos);
  const std::string json = render(record, output_style::json);
  CHECK(json.find("\"operation\": \"fused_multiply_add_step\"") != std::string::npos);
  CHECK(json.find("\"truncated_bits\": \"0000001\"") != std::string::npos);
  CHECK(json.find("\"max_exponent\": 0, \"lsb_exponent\": -25") != std::string::npos);
  const std::string markdown = render(record, output_style::markdown);
  CHECK(markdown.find("truncated 0000001") != std::string::npos);
  if (std::getenv("BITEXACT_PRINT_TRACE")) {
    const std::string both = "\n" + text + "\n" + json;
    MESSAGE(both);
  }
}

TEST_CASE("fused step trace of a special case records the NaN decision") {
  const std::array<bfloat16, 2> a{bfloat16::infinity(), bfloat16::from_bits(0x3F80)};
  const std::array<bfloat16, 2> b{bfloat16::zero(), bfloat16::from_bits(0x3F80)};
  const auto [result, record] = traced([&](auto& recorder) {
    return fused_multiply_add_step<fp32, bf16>(sm90_tensor_core, std::span<const bfloat16>(a),
                                               std::span<const bfloat16>(b), float32::zero(), recorder);
  });
  CHECK(result.result.bits == 0x7FFFFFFFu);
  REQUIRE(record.specials.size() == 1);
  CHECK(record.specials[0] == special_reason::invalid_operation);
  REQUIRE(record.fused.has_value());
  CHECK(record.fused->terms.empty());  // decided before any alignment
  CHECK(record.result_bits == 0x7FFFFFFFu);
  CHECK(record.raised.bits == flags::invalid);
  const std::string text = render(record, output_style::text);
  CHECK(text.find("zero times infinity, or infinities of opposite sign") != std::string::npos);
  CHECK(text.find("fp32:0x7FFFFFFF") != std::string::npos);
}

TEST_CASE("traced() still finishes ordinary operations from their result event") {
  const auto [sum, record] = traced([&](auto& recorder) {
    return add(float32::from_bits(0x3F800000), float32::from_bits(0x33800000), environment{}, recorder);
  });
  CHECK_FALSE(record.fused.has_value());
  CHECK(record.result_bits == sum.result.bits);
  CHECK(record.op == operation::add);
}
