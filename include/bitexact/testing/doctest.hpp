// doctest glue for check.hpp: fails the current test with the report
// (first mismatch decoded side by side, the model's trace) as its message.
//
//   BITEXACT_CHECK_MATCHES_MODEL(check_against_model<bf16>(gpu_out, model, explain));
//   BITEXACT_REQUIRE_MATCHES_MODEL(...);  // stops the test case on failure
#pragma once

#include <doctest/doctest.h>

#include "check.hpp"

#define BITEXACT_CHECK_MATCHES_MODEL(...)                                     \
  do {                                                                        \
    const ::bitexact::check_report bitexact_report_ = (__VA_ARGS__);          \
    CHECK_MESSAGE(bitexact_report_.ok(), bitexact_report_.message());         \
  } while (false)

#define BITEXACT_REQUIRE_MATCHES_MODEL(...)                                   \
  do {                                                                        \
    const ::bitexact::check_report bitexact_report_ = (__VA_ARGS__);          \
    REQUIRE_MESSAGE(bitexact_report_.ok(), bitexact_report_.message());       \
  } while (false)
