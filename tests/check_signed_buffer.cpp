// Must not compile: check_against_model<fp32> given int32_t elements. The test trace_check_signed_buffer
// (tests/trace.cmake) compiles it and expects testing/check.hpp's message for a signed buffer, which says
// what is wrong and what to pass, rather than the general one about wider elements.
#include <bitexact/bitexact.hpp>

#include <cstdint>
#include <vector>

int main() {
  using namespace bitexact;
  const std::vector<std::int32_t> kernel_output(4, 0x3F800000);
  return check_against_model<fp32>(kernel_output, [](std::size_t) { return float32{0x3F800000}; }).ok() ? 0 : 1;
}
