// `bitexact`: trace one operation, evaluate TestFloat-style case streams, run
// the paper's worked example, model attention kernels. Its commands are rows
// of one table, from which the help, the dispatch and the errors come.
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
int matmul_command(const arguments& args);
int bias_command(const arguments& args);
std::span<const command> bias_analyses();
}  // namespace bitexact::cli

namespace {

using namespace bitexact::cli;
using bitexact::quoted_input;

std::span<const command> commands() {
  static const command table[] = {
      {"trace", "OP OPERANDS...",
       "show how one operation computes and rounds its result\n(OP: add sub mul fma div sqrt convert cmp; mma ex2)",
       trace_command},
      {"eval", "FUNCTION", "evaluate Berkeley TestFloat lines from stdin (f32_add, bf16_mul, ...)", eval_command},
      {"demo", "", "the paper's Section 3.3.2 example and bf16 accumulation bias", demo_command},
      {"attention", "Q K V", "PyTorch's flash-attention forward on .npy heads, bit for bit", attention_command},
      {"matmul", "A B", "cuBLAS's bf16 and fp16 matrix products on .npy matrices, bit for bit", matmul_command},
      {"bias", "ANALYSIS", "", bias_command, bias_analyses()},
  };
  return table;
}

void print_top_help(std::FILE* to) {
  std::fprintf(to,
               "usage: bitexact COMMAND [arguments]\n"
               "\n"
               "Bit-exact bf16, fp16, fp32, tf32 and fp8 (e5m2, e4m3) arithmetic, explained.\n"
               "\n"
               "commands:\n"
               "%s"
               "\n"
               "  bitexact COMMAND --help   help on one command (also: bitexact help COMMAND)\n"
               "  bitexact --version        the version\n"
               "\n"
               "Exit status: 0 success; 1 eval found bad input lines (each reported on stderr, the\n"
               "rest evaluated) or eval --check found a mismatch; 2 bad arguments, or output that\n"
               "could not be written, with a one-line message on stderr. For attention, 1 is a\n"
               "mismatch with --expect-o or --expect-lse (for matmul, --expect), and 2 also a bad input file.\n",
               command_list(commands()).c_str());
}

// Output lost to a full disk or a closed pipe is a failure, not a success: flush and look.
int finish(int status) {
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout))
    fail(std::string("cannot write to stdout") + (errno ? std::string(" (") + std::strerror(errno) + ")" : "") +
         "; the output is incomplete");
  return status;
}

int run(std::string_view name, const arguments& rest) {
  if (name == "--help" || name == "-h" || name == "help") {
    if (rest.size() == 1 && find_command(commands(), rest[0])) return run(rest[0], {"--help"});
    if (!rest.empty())
      fail("help takes at most one COMMAND (" + names_of(commands()) + "), not " + quoted_input(rest.front()));
    print_top_help(stdout);
    return 0;
  }
  if (name == "--version" || name == "-V") {
    if (!rest.empty()) fail("--version takes no arguments, not " + quoted_input(rest.front()));
    std::printf("bitexact %s\n", BITEXACT_VERSION);
    return 0;
  }
  if (const command* c = find_command(commands(), name)) return c->run(rest);
  fail("unknown command " + quoted_input(name) + "; expected " + names_of(commands()) + " (bitexact --help)");
}

}  // namespace

int main(int argc, char** argv) {
  arguments args(argv + 1, argv + argc);
  if (args.empty()) {
    print_top_help(stderr);
    return 2;
  }
  return finish(run(args.front(), arguments(args.begin() + 1, args.end())));
}
