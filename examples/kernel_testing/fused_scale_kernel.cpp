// Stands in for a kernel author's flash-attention forward kernel with one
// realistic bug planted: the softmax scale is fused into the exponent's
// FFMA, exp2(fma(s, scale * log2 e, -max * scale * log2 e)), the way
// flash-attention computes it when built without UNFUSE_FMA. PyTorch builds
// with UNFUSE_FMA: a rounded FMUL, then FADD. Everything else is PyTorch's
// kernel bit for bit, so the written O differs from PyTorch's only where
// that one rounding does (docs/unit-testing-kernels.md).
//
//   fused_scale_kernel Q.npy K.npy V.npy B,H O.npy
//
// Q, K, V: one head, [rows, head_dim] bf16 bit patterns; B,H: the call's
// batch and heads; O: written as uint16 bf16 patterns, Q's shape.
#include <cstdio>
#include <exception>

#include "flash_head_io.hpp"

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: fused_scale_kernel Q.npy K.npy V.npy B,H O.npy\n");
    return 2;
  }
  try {
    using namespace kernel_testing;
    const head_matrix q = read_head(argv[1]), k = read_head(argv[2]), v = read_head(argv[3]);
    bitexact::attention::flash_kernel kernel = pytorch_kernel_for(q, k, parse_batch_heads(argv[4]), false);
    kernel.unfused_scale = false;  // the planted bug
    const auto out = bitexact::attention::flash_forward(kernel, one_head(q, k, false), q.values, k.values, v.values);
    std::vector<std::uint16_t> bits;
    for (const bitexact::bfloat16 x : out.o) bits.push_back(x.bits);
    bitexact::npy::write(argv[5], "<u2", {q.rows, q.head_dim}, bits.data());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "fused_scale_kernel: %s\n", error.what());
    return 2;
  }
  return 0;
}
