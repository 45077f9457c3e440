// Our flash-attention forward kernel for sm_90, standard and stabilized from
// one source: the arithmetic of PyTorch 2.11's single-split FlashAttention-2
// kernel (include/bitexact/attention/flash_forward.hpp says it step by step),
// written with explicit roundings (__fmul_rn, __fsub_rn, __fmaf_rn, exp2f
// without fast math, mma.sync m16n8k16) so that nvcc cannot contract or
// reorder them. Tiles as PyTorch's: 128 query rows per block, warp w owning
// rows 16w.. and 16w + 64.., K/V blocks of 128 keys (d = 64) or 64 (d = 128)
// from the last to the first.
//
// This first version is correct before it is fast: operands go from global
// memory straight into mma fragments (no shared memory, no cp.async
// pipeline), about a sixth of PyTorch's speed. cuda/attention/check_flash_forward.py
// compares it with PyTorch and with the emulator on the device machine.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cmath>
#include <cstdint>

namespace {

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat16 l = __float2bfloat16_rn(lo), h = __float2bfloat16_rn(hi);
  return uint32_t(__bfloat16_as_ushort(l)) | (uint32_t(__bfloat16_as_ushort(h)) << 16);
}

__device__ __forceinline__ float lg2_approx(float x) {
  float y;
  asm("lg2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <int D, int BN>
__global__ void __launch_bounds__(128) flash_forward_kernel(const uint16_t* __restrict__ q, const uint16_t* __restrict__ k,
                                                          const uint16_t* __restrict__ v, uint16_t* __restrict__ o,
                                                          float* __restrict__ lse, int nq, int nk, int causal,
                                                          float scale, float scale_log2, int stabilize, float beta,
                                                          float eps) {
  constexpr int BM = 128;
  const int head = blockIdx.y;
  const int m_block = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const uint16_t* qh = q + size_t(head) * nq * D;
  const uint16_t* kh = k + size_t(head) * nk * D;
  const uint16_t* vh = v + size_t(head) * nk * D;
  // FA2: warp w owns rows m_block*128 + w*16 + {0..15} and + 64.
  for (int slab = 0; slab < 2; ++slab) {
    const int row0 = m_block * BM + warp * 16 + slab * 64;
    if (row0 >= nq) continue;
    const int rows[2] = {row0 + g, row0 + g + 8};
    uint32_t qa[D / 16][4];
    for (int c = 0; c < D / 16; ++c)
      for (int r = 0; r < 4; ++r) {
        const int row = rows[r & 1], col = 16 * c + 2 * t + (r >> 1) * 8;
        qa[c][r] = row < nq ? *reinterpret_cast<const uint32_t*>(qh + size_t(row) * D + col) : 0u;
      }
    float acc_o[D / 8][4];
    for (int j = 0; j < D / 8; ++j)
      for (int r = 0; r < 4; ++r) acc_o[j][r] = 0.f;
    float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};

    const int key_blocks = (nk + BN - 1) / BN;
    int n_block_max = key_blocks;
    if (causal) n_block_max = min(n_block_max, ((m_block + 1) * BM + nk - nq + BN - 1) / BN);
    const bool even_mn = nk % BN == 0 && nq % BM == 0;
    const int masking_steps = !causal ? 1 : (even_mn ? (BM + BN - 1) / BN : (BM + BN - 1) / BN + 1);
    int step = 0;
    for (int n_block = n_block_max - 1; n_block >= 0; --n_block, ++step) {
      const bool first = step == 0, masking = step < masking_steps;
      float s[BN / 8][4];
      for (int j = 0; j < BN / 8; ++j) {
        for (int r = 0; r < 4; ++r) s[j][r] = 0.f;
        const int key = n_block * BN + 8 * j + g;
        for (int c = 0; c < D / 16; ++c) {
          uint32_t b0 = 0, b1 = 0;
          if (key < nk) {
            b0 = *reinterpret_cast<const uint32_t*>(kh + size_t(key) * D + 16 * c + 2 * t);
            b1 = *reinterpret_cast<const uint32_t*>(kh + size_t(key) * D + 16 * c + 8 + 2 * t);
          }
          mma_bf16(s[j], qa[c], b0, b1);
        }
      }
      if (masking)
        for (int j = 0; j < BN / 8; ++j)
          for (int r = 0; r < 4; ++r) {
            const int col = n_block * BN + 8 * j + 2 * t + (r & 1);
            const int row = rows[r >> 1];
            int limit = nk;
            if (causal) limit = min(limit, row + 1 + nk - nq);
            if (col >= limit) s[j][r] = -INFINITY;
          }
      float block_max[2] = {s[0][0], s[0][2]};
      for (int j = 0; j < BN / 8; ++j)
        for (int r = 0; r < 4; ++r) block_max[r >> 1] = fmaxf(block_max[r >> 1], s[j][r]);
      for (int h = 0; h < 2; ++h) {
        block_max[h] = fmaxf(block_max[h], __shfl_xor_sync(0xffffffff, block_max[h], 2));
        block_max[h] = fmaxf(block_max[h], __shfl_xor_sync(0xffffffff, block_max[h], 1));
      }
      if (stabilize)
        for (int h = 0; h < 2; ++h) {
          int ties = 0;
          for (int j = 0; j < BN / 8; ++j)
            for (int r = 2 * h; r < 2 * h + 2; ++r) ties += __fmul_rn(__fsub_rn(block_max[h], s[j][r]), scale) <= eps;
          ties += __shfl_xor_sync(0xffffffff, ties, 2);
          ties += __shfl_xor_sync(0xffffffff, ties, 1);
          if (ties > 1 && block_max[h] > 0.f) block_max[h] = __fmul_rn(beta, block_max[h]);
          else if (ties > 1 && block_max[h] < 0.f) block_max[h] = 0.f;
        }
      float alpha[2] = {1.f, 1.f};
      for (int h = 0; h < 2; ++h) {
        const float previous = row_max[h];
        const float m = first ? block_max[h] : fmaxf(previous, block_max[h]);
        row_max[h] = m;
        if (!first) {
          const float current = (masking && causal && m == -INFINITY) ? 0.f : m;
          alpha[h] = exp2f(__fmul_rn(__fsub_rn(previous, current), scale_log2));
          for (int j = 0; j < D / 8; ++j)
            for (int r = 2 * h; r < 2 * h + 2; ++r) acc_o[j][r] = __fmul_rn(acc_o[j][r], alpha[h]);
        }
        const float max_scaled = m == -INFINITY ? 0.f : __fmul_rn(m, scale_log2);
        for (int j = 0; j < BN / 8; ++j)
          for (int r = 2 * h; r < 2 * h + 2; ++r) s[j][r] = exp2f(__fsub_rn(__fmul_rn(s[j][r], scale_log2), max_scaled));
        // This thread's columns 8j + 2t, 8j + 2t + 1, in order; later blocks fuse the rescale with the first add.
        float sum = first ? s[0][2 * h] : __fmaf_rn(alpha[h], row_sum[h], s[0][2 * h]);
        sum = __fadd_rn(sum, s[0][2 * h + 1]);
        for (int j = 1; j < BN / 8; ++j) {
          sum = __fadd_rn(sum, s[j][2 * h]);
          sum = __fadd_rn(sum, s[j][2 * h + 1]);
        }
        row_sum[h] = sum;
      }
      // O += P V, 16 keys at a time.
      for (int kk = 0; kk < BN / 16; ++kk) {
        const uint32_t pa[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                                pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
        const int key0 = n_block * BN + 16 * kk + 2 * t;
        for (int j = 0; j < D / 8; ++j) {
          const int col = 8 * j + g;
          const auto vload = [&](int key) -> uint32_t { return key < nk ? vh[size_t(key) * D + col] : 0u; };
          const uint32_t b0 = vload(key0) | (vload(key0 + 1) << 16);
          const uint32_t b1 = vload(key0 + 8) | (vload(key0 + 9) << 16);
          mma_bf16(acc_o[j], pa, b0, b1);
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      float sum = row_sum[h];
      sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffff, sum, 2));
      sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffff, sum, 1));
      const bool degenerate = sum == 0.f || sum != sum;
      const float inverse = degenerate ? 1.f : __frcp_rn(sum);
      const int row = rows[h];
      if (row >= nq) continue;
      if (t == 0)
        lse[size_t(head) * nq + row] =
            degenerate ? INFINITY : __fmaf_rn(row_max[h], scale, __fmul_rn(lg2_approx(sum), 0.693147182f));
      for (int j = 0; j < D / 8; ++j) {
        const uint32_t packed = pack_bf16(__fmul_rn(acc_o[j][2 * h], inverse), __fmul_rn(acc_o[j][2 * h + 1], inverse));
        *reinterpret_cast<uint32_t*>(o + (size_t(head) * nq + row) * D + 8 * j + 2 * t) = packed;
      }
    }
  }
}

}  // namespace

// The host API, over device pointers: q [heads][query_rows][head_dim], k and
// v [heads][key_rows][head_dim] (bf16 bit patterns), o like q, lse
// [heads][query_rows] (fp32, natural-log units). scale: the softmax scale as
// the kernel takes it (PyTorch: float(1/sqrt(d))). stabilize != 0 runs the
// paper's Algorithm 3 with beta and eps (pytorch_sdpa_flash_sm90_stabilized).
// Returns 0, 1 for arguments it does not take (head_dim other than 64 or 128,
// a count below 1, more than 65535 heads, a null pointer), 2 when the launch failed.
extern "C" int bitexact_flash_forward(const void* q, const void* k, const void* v, void* o, float* lse, int heads,
                                      int query_rows, int key_rows, int head_dim, int causal, float scale,
                                      int stabilize, float beta, float eps, cudaStream_t stream) {
  // heads go in the grid's y (at most 65535).
  if (!q || !k || !v || !o || !lse || heads < 1 || heads > 65535 || query_rows < 1 || key_rows < 1 ||
      (head_dim != 64 && head_dim != 128))
    return 1;
  // As PyTorch's set_params_fprop: float(double(scale) * log2(e)).
  const float scale_log2 = static_cast<float>(static_cast<double>(scale) * 1.44269504088896340736);
  const dim3 grid((query_rows + 127) / 128, heads);
  const auto* qb = static_cast<const uint16_t*>(q);
  const auto* kb = static_cast<const uint16_t*>(k);
  const auto* vb = static_cast<const uint16_t*>(v);
  auto* ob = static_cast<uint16_t*>(o);
  if (head_dim == 64)
    flash_forward_kernel<64, 128><<<grid, 128, 0, stream>>>(qb, kb, vb, ob, lse, query_rows, key_rows, causal, scale,
                                                            scale_log2, stabilize, beta, eps);
  else
    flash_forward_kernel<128, 64><<<grid, 128, 0, stream>>>(qb, kb, vb, ob, lse, query_rows, key_rows, causal, scale,
                                                            scale_log2, stabilize, beta, eps);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
