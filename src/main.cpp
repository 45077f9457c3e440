// `bitexact`: trace one operation, evaluate TestFloat-style case streams, or
// run the paper's worked example.
#include <cerrno>
#include <cstdio>
#include <cstring>
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
int attention_command(const arguments& args);
int bias_command(const arguments& args);
}  // namespace bitexact::cli

namespace {

using bitexact::cli::fail;
using bitexact::quoted_input;

constexpr std::string_view top_help =
    "usage: bitexact COMMAND [arguments]\n"
    "\n"
    "Bit-exact bf16, fp16, fp32, tf32 and fp8 (e5m2, e4m3) arithmetic, explained.\n"
    "\n"
    "commands:\n"
    "  trace OP OPERANDS...   show how one operation computes and rounds its result\n"
    "                         (OP: add sub mul fma div sqrt convert cmp; mma ex2)\n"
    "  eval FUNCTION          evaluate Berkeley TestFloat lines from stdin (f32_add, bf16_mul, ...)\n"
    "  demo                   the paper's Section 3.3.2 example and bf16 accumulation bias\n"
    "  attention Q K V        PyTorch's flash-attention forward on .npy heads, bit for bit\n"
    "  bias mechanism         the paper's P-bar V rounding bias on one row: cumulative error\n"
    "                         along the keys, paper's arithmetic vs the GPU kernel's (CSV, SVG)\n"
    "  bias attribution       the GPU kernel's error of O split by rounding site (CSV, SVG)\n"
    "  bias statistics        mean signed error of O and delta over synthetic tie rows, standard\n"
    "                         vs stabilized softmax, 95% intervals (CSV, SVG)\n"
    "\n"
    "  bitexact COMMAND --help   help on one command (also: bitexact help COMMAND)\n"
    "  bitexact --version        the version\n"
    "\n"
    "Exit status: 0 success; 1 eval found bad input lines (each reported on stderr, the\n"
    "rest evaluated) or eval --check found a mismatch; 2 bad arguments, or output that\n"
    "could not be written, with a one-line message on stderr. For attention, 1 is a\n"
    "mismatch with --expect-o or --expect-lse, and 2 also a bad input file.\n";

// Output lost to a full disk or a closed pipe is a failure, not a success: flush and look.
int finish(int status) {
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout))
    fail(std::string("cannot write to stdout") + (errno ? std::string(" (") + std::strerror(errno) + ")" : "") +
         "; the output is incomplete");
  return status;
}

int run(std::string_view command, const bitexact::cli::arguments& rest) {
  using namespace bitexact::cli;
  if (command == "--help" || command == "-h" || command == "help") {
    const bool one_command = rest.size() == 1 && (rest[0] == "trace" || rest[0] == "eval" || rest[0] == "demo" ||
                                                    rest[0] == "attention" || rest[0] == "bias");
    if (one_command) return run(rest.front(), {"--help"});
    if (!rest.empty()) fail("help takes at most one COMMAND (trace, eval, demo, attention or bias), not " + quoted_input(rest.front()));
    std::fputs(top_help.data(), stdout);
    return 0;
  }
  if (command == "--version" || command == "-V") {
    if (!rest.empty()) fail("--version takes no arguments, not " + quoted_input(rest.front()));
    std::printf("bitexact %s\n", BITEXACT_VERSION);
    return 0;
  }
  if (command == "trace") return trace_command(rest);
  if (command == "eval") return eval_command(rest);
  if (command == "demo") return demo_command(rest);
  if (command == "attention") return attention_command(rest);
  if (command == "bias") return bias_command(rest);
  fail("unknown command " + quoted_input(command) + "; expected trace, eval, demo, attention or bias (bitexact --help)");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace bitexact::cli;
  arguments args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(top_help.data(), stderr);
    return 2;
  }
  return finish(run(args.front(), arguments(args.begin() + 1, args.end())));
}
