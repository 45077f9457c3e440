// A kernel author's unit test of a flash-attention forward kernel, written
// with bitexact/testing/check.hpp: the kernel's O (saved from the GPU as
// .npy) against PyTorch's flash kernel as bitexact models it, every bit of
// every element. On a mismatch it prints the report: how many elements
// differ, the first, both values decoded side by side, and the model's
// trace of that element's last rounding (fp32 to bf16).
//
//   check_flash_head Q.npy K.npy V.npy O.npy B,H
//
// Exit status 0 when every element agrees, 1 on a mismatch, 2 on bad input.
#include <cstdio>
#include <exception>
#include <span>

#include "flash_head_io.hpp"

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: check_flash_head Q.npy K.npy V.npy O.npy B,H\n");
    return 2;
  }
  try {
    using namespace kernel_testing;
    namespace attention = bitexact::attention;
    const head_matrix q = read_head(argv[1]), k = read_head(argv[2]), v = read_head(argv[3]);
    const head_matrix kernel_o = read_head(argv[4]);
    if (kernel_o.rows != q.rows || kernel_o.head_dim != q.head_dim)
      throw std::invalid_argument(std::string(argv[4]) + ": expected Q's shape");
    const attention::flash_kernel kernel = pytorch_kernel_for(q, k, parse_batch_heads(argv[5]), false);
    const attention::attention_shape shape = one_head(q, k, false);
    const auto model = attention::flash_forward(kernel, shape, q.values, k.values, v.values);

    const auto report = bitexact::check_against_model<bitexact::bf16>(
        kernel_o.values, [&](std::size_t i) { return model.o[i]; },
        [&](std::size_t i) {
          const int row = static_cast<int>(i / q.head_dim), col = static_cast<int>(i % q.head_dim);
          const auto record = attention::record_row(kernel, shape, q.values, k.values, v.values, row);
          return attention::trace_output_element(kernel, shape, record, v.values, col).steps.back().record;
        });
    std::printf("%s\n", report.message().c_str());
    if (!report.ok()) {
      const std::size_t first = report.first_mismatch->index;
      std::printf("first mismatch: O[%zu, %zu] (row, col)\n", first / q.head_dim, first % q.head_dim);
    }
    return report.ok() ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "check_flash_head: %s\n", error.what());
    return 2;
  }
}
