// V as our FP8 kernel reads it (flash_call.h): V^T, its keys permuted within
// each 32 as P's e4m3 A fragments hold them (flash_softmax.cuh,
// p_fragment_e4m3). fp8 wgmma reads B K-major only, so V [keys][d] must
// become d rows of keys; one pass over V, memory-bound.
#include "flash_call.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace {

// One thread a column c of one group of 32 keys: the group's 32 bytes of
// column c, read where the permutation takes them from, written as one
// 32-byte row segment of V^T.
__global__ void fp8_value_layout_kernel(const uint8_t* v, flash::call_strides in, int key_rows, int head_dim,
                                        int kv_heads, uint8_t* vt, int64_t columns) {
  const int group = blockIdx.x, head = blockIdx.y % kv_heads, batch = blockIdx.y / kv_heads, c = threadIdx.x;
  if (c >= head_dim) return;
  const uint8_t* column = v + batch * in.batch + head * in.head + c;
  uint32_t words[8];
#pragma unroll
  for (int w = 0; w < 8; ++w) {
    uint32_t word = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      // Column 32G + 16h + 4t + 2a + b holds key 32G + 16h + 8a + 2t + b.
      const int position = 4 * w + i, h = position / 16, t = position / 4 % 4, a = position / 2 % 2, b = position % 2;
      const int key = group * 32 + 16 * h + 8 * a + 2 * t + b;
      if (key < key_rows) word |= uint32_t(column[int64_t(key) * in.row]) << (8 * i);
    }
    words[w] = word;
  }
  uint4* out = reinterpret_cast<uint4*>(vt + ((int64_t(batch) * kv_heads + head) * head_dim + c) * columns + group * 32);
  out[0] = make_uint4(words[0], words[1], words[2], words[3]);
  out[1] = make_uint4(words[4], words[5], words[6], words[7]);
}

}  // namespace

int flash::fp8_value_layout(const void* v, const call_strides& strides, int batch, int kv_heads, int key_rows,
                            int head_dim, void* vt, cudaStream_t stream) {
  if (!v || !vt || batch < 1 || kv_heads < 1 || key_rows < 1 || head_dim < 1 || head_dim > 1024 ||
      int64_t(batch) * kv_heads > 65535 || reinterpret_cast<uintptr_t>(vt) % 16 != 0)
    return 1;
  const dim3 grid(fp8_key_columns(key_rows) / 32, batch * kv_heads);
  fp8_value_layout_kernel<<<grid, (head_dim + 31) / 32 * 32, 0, stream>>>(
      static_cast<const uint8_t*>(v), strides, key_rows, head_dim, kv_heads, static_cast<uint8_t*>(vt),
      fp8_key_columns(key_rows));
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
