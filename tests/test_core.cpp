#include <doctest/doctest.h>

#include <bitexact/bitexact.hpp>

using namespace bitexact;

// The paper's Section 3.3.2 addition, checkable at compile time.
static_assert(add(float32{0xC01A0E2E}, float32{0xC0130000}).result == float32{0xC0968717});
static_assert(convert<bf16>(float32{0xC0968717}).result == bfloat16{0xC097});

TEST_CASE("paper 3.3.2: fp32 sum of two same-sign values rounds up to bf16 0xC097") {
  const auto sum = add(float32{0xC01A0E2E}, float32{0xC0130000});
  CHECK(sum.result.bits == 0xC0968717u);
  CHECK(sum.raised.bits == 0);
  const auto narrowed = convert<bf16>(sum.result);
  CHECK(narrowed.result.bits == 0xC097);
  CHECK(narrowed.raised.bits == flags::inexact);
  CHECK(to_double(narrowed.result) - to_double(sum.result) == doctest::Approx(-0.014759540557861328).epsilon(1e-15));
}
