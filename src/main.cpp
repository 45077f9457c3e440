// `bitexact`: trace one operation, evaluate TestFloat-style case streams, or
// run the paper's worked example.
#include <cstdio>
#include <string>
#include <string_view>

#include "cli.hpp"

#ifndef BITEXACT_VERSION
#define BITEXACT_VERSION "unknown"
#endif

namespace bitexact::cli {
int trace_command(const arguments& args);
int eval_command(const arguments& args);
int demo_command(const arguments& args);
}  // namespace bitexact::cli

namespace {

constexpr std::string_view top_help =
    "usage: bitexact COMMAND [arguments]\n"
    "\n"
    "Bit-exact bf16, fp16, fp32, tf32 and fp8 (e5m2, e4m3) arithmetic, explained.\n"
    "\n"
    "commands:\n"
    "  trace OP OPERANDS...   show how one operation computes and rounds its result\n"
    "                         (OP: add sub mul fma div sqrt convert cmp)\n"
    "  eval FUNCTION          evaluate Berkeley TestFloat lines from stdin (f32_add, bf16_mul, ...)\n"
    "  demo                   the paper's Section 3.3.2 example and bf16 accumulation bias\n"
    "\n"
    "  bitexact COMMAND --help   help on one command\n"
    "  bitexact --version        the version\n"
    "\n"
    "Bad input gives a one-line message on stderr and exit status 2.\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace bitexact::cli;
  arguments args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(top_help.data(), stderr);
    return 2;
  }
  const std::string_view command = args.front();
  const arguments rest(args.begin() + 1, args.end());
  if (command == "--help" || command == "-h" || command == "help") {
    std::fputs(top_help.data(), stdout);
    return 0;
  }
  if (command == "--version" || command == "-V") {
    std::printf("bitexact %s\n", BITEXACT_VERSION);
    return 0;
  }
  if (command == "trace") return trace_command(rest);
  if (command == "eval") return eval_command(rest);
  if (command == "demo") return demo_command(rest);
  fail("unknown command '" + std::string(command) + "'; expected trace, eval or demo (bitexact --help)");
}
