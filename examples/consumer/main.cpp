// Rounds the paper's fp32 sum to bf16 and evaluates one MUFU ex2, so the test
// sees the library working from outside its own tree, tables included.
#include <bitexact/bitexact.hpp>
#include <bitexact/hardware/mufu.hpp>

#include <cstdio>

int main() {
  using namespace bitexact;
  const float32 sum = add(float32{0xC01A0E2E}, float32{0xC0130000});
  const bfloat16 narrowed = convert<bf16>(sum);
  // The table's 2^-1.5 is one ulp below the correctly rounded 0x3EB504F3: this value comes from data/.
  const float32 power = ptx::ex2_approx(from_host(-1.5f));
  std::printf("%08X %04X %08X\n", static_cast<unsigned>(sum.bits), static_cast<unsigned>(narrowed.bits),
              static_cast<unsigned>(power.bits));
  return sum.bits == 0xC0968717u && narrowed.bits == 0xC097 && power.bits == 0x3EB504F2u ? 0 : 1;
}
