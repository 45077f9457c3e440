// README.md: without CMake, `g++ -std=c++20 -I include prog.cpp -DFMT_HEADER_ONLY` builds a program that
// renders traces with {fmt} compiled in, no -lfmt (the test package_fmt_header_only, tests/package.cmake).
#include <bitexact/bitexact.hpp>

#include <cstdio>
#include <string>

int main() {
  using namespace bitexact;
  // The paper's addition rounded to bf16, traced and rendered through fmt.
  const auto trace = traced([](auto& recorder) {
    return add<bf16>(float32{0xC01A0E2E}, float32{0xC0130000}, {}, recorder);
  });
  const std::string text = render(trace.record);
  std::fputs(text.c_str(), stdout);
  return text.find("bf16:0xC097 (-4.71875)") != std::string::npos ? 0 : 1;
}
