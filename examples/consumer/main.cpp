// Rounds the paper's fp32 sum to bf16 and prints both, so the test sees the
// library working from outside its own tree.
#include <bitexact/bitexact.hpp>

#include <cstdio>

int main() {
  using namespace bitexact;
  const float32 sum = add(float32{0xC01A0E2E}, float32{0xC0130000});
  const bfloat16 narrowed = convert<bf16>(sum);
  std::printf("%08X %04X\n", static_cast<unsigned>(sum.bits), static_cast<unsigned>(narrowed.bits));
  return sum.bits == 0xC0968717u && narrowed.bits == 0xC097 ? 0 : 1;
}
