// V as our FP8 kernel reads it (flash_call.h): V^T, its keys permuted within
// each 32 as P's e4m3 A fragments hold them (flash_softmax.cuh,
// p_fragment_e4m3). fp8 wgmma reads B K-major only, so V [keys][d] must
// become d rows of keys; one pass over V, memory-bound.
#include "flash_call.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace {

// Column 32G + 16h + 4t + 2a + b of V^T holds key 32G + 16h + 8a + 2t + b: the
// word at column 32G + 16h + 4t holds, from its lowest byte, keys k, k + 1,
// k + 8, k + 9 with k = 32G + 16h + 2t.
__host__ __device__ constexpr int word_key(int word_in_group) {  // word_in_group = 4h + t
  return 16 * (word_in_group / 4) + 2 * (word_in_group % 4);
}
__host__ __device__ constexpr int word_key_offset(int i) { return 8 * (i / 2) + i % 2; }  // 0, 1, 8, 9

// V read 16 bytes at a time: a thread takes one V^T word's four keys and 16
// of d, and transposes the 4 x 16 bytes in registers (PRMT) into 16 words, one
// a V^T row. A warp's lanes 0-7 are the 8 words of one group of 32 keys (a
// store writes a row's 32-byte sector), lanes 8-31 three more pieces of 16 of
// d (a load reads 64 bytes of 8 rows). A thread block: 8 groups (256 keys),
// 64 of d.
constexpr int vector_groups = 8, vector_pieces = 4;

__global__ void __launch_bounds__(256) fp8_value_layout_vector(const uint8_t* v, flash::call_strides in, int key_rows,
                                                               int head_dim, int kv_heads, uint8_t* vt,
                                                               int64_t columns) {
  const int lane_word = threadIdx.x % 8, piece = blockIdx.y * vector_pieces + threadIdx.x / 8 % vector_pieces;
  const int group = blockIdx.x * vector_groups + threadIdx.x / 32;
  const int head = blockIdx.z % kv_heads, batch = blockIdx.z / kv_heads;
  if (piece * 16 >= head_dim || group * 32 >= columns) return;
  const uint8_t* rows = v + batch * in.batch + head * in.head + piece * 16;
  const int key = group * 32 + word_key(lane_word);
  uint4 bytes[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int k = key + word_key_offset(i);
    bytes[i] = k < key_rows ? *reinterpret_cast<const uint4*>(rows + int64_t(k) * in.row) : make_uint4(0, 0, 0, 0);
  }
  uint8_t* out = vt + ((int64_t(batch) * kv_heads + head) * head_dim + piece * 16) * columns + group * 32 + 4 * lane_word;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const auto word = [&](int i) { return (&bytes[i].x)[w]; };
    // words_of_d[e]: byte e of the four keys' word w, the V^T word of d =
    // 16 piece + 4w + e; first the pairs of keys interleaved (k0 e, k1 e,
    // k0 e+1, k1 e+1), then the pairs joined.
    const uint32_t low01 = __byte_perm(word(0), word(1), 0x5140), high01 = __byte_perm(word(0), word(1), 0x7362);
    const uint32_t low23 = __byte_perm(word(2), word(3), 0x5140), high23 = __byte_perm(word(2), word(3), 0x7362);
    const uint32_t words_of_d[4] = {__byte_perm(low01, low23, 0x5410), __byte_perm(low01, low23, 0x7632),
                                      __byte_perm(high01, high23, 0x5410), __byte_perm(high01, high23, 0x7632)};
#pragma unroll
    for (int e = 0; e < 4; ++e) *reinterpret_cast<uint32_t*>(out + (4 * w + e) * columns) = words_of_d[e];
  }
}

// Any view with a unit stride on d, a byte at a time: one thread a column c
// of one group of 32 keys, written as one 32-byte row segment of V^T.
__global__ void fp8_value_layout_bytes(const uint8_t* v, flash::call_strides in, int key_rows, int head_dim,
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
      const int key = group * 32 + word_key(w) + word_key_offset(i);
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
  const int64_t columns = fp8_key_columns(key_rows);
  const auto* in = static_cast<const uint8_t*>(v);
  auto* out = static_cast<uint8_t*>(vt);
  if (head_dim % 16 == 0 && layout_taken(v, strides, batch, kv_heads, key_rows, 1)) {
    const dim3 grid((columns / 32 + vector_groups - 1) / vector_groups, (head_dim / 16 + vector_pieces - 1) / vector_pieces,
                    batch * kv_heads);
    fp8_value_layout_vector<<<grid, 256, 0, stream>>>(in, strides, key_rows, head_dim, kv_heads, out, columns);
  } else {
    const dim3 grid(columns / 32, batch * kv_heads);
    fp8_value_layout_bytes<<<grid, (head_dim + 31) / 32 * 32, 0, stream>>>(in, strides, key_rows, head_dim, kv_heads,
                                                                           out, columns);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
