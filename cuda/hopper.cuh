// Hopper's asynchronous units as our kernels and probes use them (sm_90a):
// wgmma with bf16 or e4m3 operands and fp32 accumulators, shared-memory
// matrix descriptors for swizzled tiles, mbarriers and the tensor copy
// engine (TMA). PTX ISA 8.x, "Asynchronous Warpgroup Level Matrix
// Instructions" and "cp.async.bulk.tensor", is the source of every encoding.
//
// Tiles live in shared memory as the copy engine writes them with
// CU_TENSOR_MAP_SWIZZLE_128B and a box 64 bf16 wide: pages of 64 columns,
// 128 bytes a row, the 16-byte chunk index XORed with row % 8, every page
// 1024-byte aligned. wgmma reads such a page as a K-major operand (rows are
// M or N, 16 columns a k16 step) or, for V, as an MN-major one (rows are k,
// columns N).
//
// wgmma's arithmetic is mma.sync's: each k16 step is one fused 16-product
// sum of the unit `sm90_tensor_core` (include/bitexact/hardware/mma.hpp),
// every output column independent. cuda/probe_mma.cu checks that for each
// shape and operand source below against the model.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace hopper {

// A shared-memory matrix descriptor for a swizzled operand: start address,
// leading and stride byte offsets (in 16-byte units), and the swizzle's width
// (128 bytes: mode 1; 64 bytes: mode 2). K-major: rows `swizzle_bytes` apart,
// 8-row groups stride_bytes (8 rows) apart; the leading offset is unused.
// MN-major: 64 columns a page, pages leading_bytes apart along N, 8-row (k)
// groups stride_bytes apart.
__device__ __forceinline__ uint64_t swizzled_descriptor(uint32_t address, uint32_t leading_bytes,
                                                        uint32_t stride_bytes, uint32_t swizzle_bytes = 128) {
  const uint64_t mode = swizzle_bytes == 128 ? 1 : 2;
  return uint64_t((address & 0x3FFFF) >> 4) | uint64_t(leading_bytes >> 4) << 16 |
         uint64_t(stride_bytes >> 4) << 32 | mode << 62;
}

// D (m64nN, fp32, accumulator layout) += A B, one k16 step. wgmma_ss: A and
// B both K-major from shared memory (A: 64 rows, B: N rows). wgmma_rs_b_mn_major:
// A from registers in mma.sync's m16n8k16 A layout (warp w of the warpgroup
// holds rows 16w..16w + 15), B [16][N] MN-major from shared memory.
// wgmma_rs_b_mn_major always reads the accumulator (scale-d 1): a chain
// starts from zeros, as mma.sync's does. wgmma_ss reads it when accumulate
// is true; a chain's first step with accumulate false (scale-d 0) needs no
// zeroed registers, and is what ptxas made of a first step onto zeros in
// every S chain of our kernels (HGMMA ... RZ, !UPT). The caller brackets
// steps with warpgroup_arrive, commit and wait.
template <int N>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 8][4], uint64_t a, uint64_t b, bool accumulate);
template <int N>
__device__ __forceinline__ void wgmma_rs_b_mn_major(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t b);
// The fp8 steps (k32, e4m3 A and B, fp32 D; the unit sm90_tensor_core_fp8):
// both operands K-major, as fp8 wgmma requires. wgmma_ss_e4m3 as wgmma_ss;
// wgmma_rs_e4m3: A from registers, each word four e4m3 of one row (words 0
// and 2 row g, 1 and 3 row g + 8 of the warp's 16; columns 4t..4t + 3,
// then 16 + 4t..), B [N][32] from shared memory; it reads the accumulator
// when accumulate is true, as wgmma_ss.
template <int N>
__device__ __forceinline__ void wgmma_ss_e4m3(float (&d)[N / 8][4], uint64_t a, uint64_t b, bool accumulate);
template <int N>
__device__ __forceinline__ void wgmma_rs_e4m3(float (&d)[N / 8][4], const uint32_t (&a)[4], uint64_t b,
                                              bool accumulate);
// Tells the compiler the registers change under it (wgmma writes them
// asynchronously): no read or write of them moves across this point.
template <int N>
__device__ __forceinline__ void fence_accumulators(float (&d)[N / 8][4]);

// The operand lists: PTX names every register, so each accumulator shape
// has its list of d's registers (four a column group of 8) and of their
// operand numbers, %0 upwards.
#define HOPPER_GROUP(d, j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
#define HOPPER_ACCUMULATORS_64(d) \
  HOPPER_GROUP(d, 0), HOPPER_GROUP(d, 1), HOPPER_GROUP(d, 2), HOPPER_GROUP(d, 3), \
  HOPPER_GROUP(d, 4), HOPPER_GROUP(d, 5), HOPPER_GROUP(d, 6), HOPPER_GROUP(d, 7)
#define HOPPER_ACCUMULATORS_128(d) HOPPER_ACCUMULATORS_64(d), \
  HOPPER_GROUP(d, 8), HOPPER_GROUP(d, 9), HOPPER_GROUP(d, 10), HOPPER_GROUP(d, 11), \
  HOPPER_GROUP(d, 12), HOPPER_GROUP(d, 13), HOPPER_GROUP(d, 14), HOPPER_GROUP(d, 15)
#define HOPPER_D_64 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define HOPPER_D_128 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

template <>
__device__ __forceinline__ void wgmma_ss<64>(float (&d)[8][4], uint64_t a, uint64_t b, bool accumulate) {
  asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " HOPPER_D_64 ", %32, %33, accumulate, 1, 1, 0, 0;\n}\n"
               : HOPPER_ACCUMULATORS_64(d)
               : "l"(a), "l"(b), "r"(uint32_t(accumulate)));
}

template <>
__device__ __forceinline__ void wgmma_rs_b_mn_major<64>(float (&d)[8][4], const uint32_t (&a)[4], uint64_t b) {
  asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " HOPPER_D_64 ", {%32, %33, %34, %35}, %36, accumulate, 1, 1, 1;\n}\n"
               : HOPPER_ACCUMULATORS_64(d)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

template <>
__device__ __forceinline__ void wgmma_ss_e4m3<64>(float (&d)[8][4], uint64_t a, uint64_t b, bool accumulate) {
  asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " HOPPER_D_64 ", %32, %33, accumulate, 1, 1;\n}\n"
               : HOPPER_ACCUMULATORS_64(d)
               : "l"(a), "l"(b), "r"(uint32_t(accumulate)));
}

template <>
__device__ __forceinline__ void wgmma_rs_e4m3<64>(float (&d)[8][4], const uint32_t (&a)[4], uint64_t b,
                                                  bool accumulate) {
  asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %37, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 " HOPPER_D_64 ", {%32, %33, %34, %35}, %36, accumulate, 1, 1;\n}\n"
               : HOPPER_ACCUMULATORS_64(d)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(uint32_t(accumulate)));
}

template <>
__device__ __forceinline__ void fence_accumulators<64>(float (&d)[8][4]) {
  asm volatile("" : HOPPER_ACCUMULATORS_64(d) :: "memory");
}

template <>
__device__ __forceinline__ void wgmma_ss<128>(float (&d)[16][4], uint64_t a, uint64_t b, bool accumulate) {
  asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " HOPPER_D_128 ", %64, %65, accumulate, 1, 1, 0, 0;\n}\n"
               : HOPPER_ACCUMULATORS_128(d)
               : "l"(a), "l"(b), "r"(uint32_t(accumulate)));
}

template <>
__device__ __forceinline__ void wgmma_rs_b_mn_major<128>(float (&d)[16][4], const uint32_t (&a)[4], uint64_t b) {
  asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, 1, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " HOPPER_D_128 ", {%64, %65, %66, %67}, %68, accumulate, 1, 1, 1;\n}\n"
               : HOPPER_ACCUMULATORS_128(d)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}

template <>
__device__ __forceinline__ void wgmma_ss_e4m3<128>(float (&d)[16][4], uint64_t a, uint64_t b, bool accumulate) {
  asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " HOPPER_D_128 ", %64, %65, accumulate, 1, 1;\n}\n"
               : HOPPER_ACCUMULATORS_128(d)
               : "l"(a), "l"(b), "r"(uint32_t(accumulate)));
}

template <>
__device__ __forceinline__ void wgmma_rs_e4m3<128>(float (&d)[16][4], const uint32_t (&a)[4], uint64_t b,
                                                  bool accumulate) {
  asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, %69, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 " HOPPER_D_128 ", {%64, %65, %66, %67}, %68, accumulate, 1, 1;\n}\n"
               : HOPPER_ACCUMULATORS_128(d)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(uint32_t(accumulate)));
}

template <>
__device__ __forceinline__ void fence_accumulators<128>(float (&d)[16][4]) {
  asm volatile("" : HOPPER_ACCUMULATORS_128(d) :: "memory");
}

#undef HOPPER_GROUP
#undef HOPPER_ACCUMULATORS_64
#undef HOPPER_ACCUMULATORS_128
#undef HOPPER_D_64
#undef HOPPER_D_128

__device__ __forceinline__ void warpgroup_arrive() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void warpgroup_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int Pending>
__device__ __forceinline__ void warpgroup_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
}

// mbarriers (shared::cta addresses).
__device__ __forceinline__ void barrier_init(uint32_t barrier, int arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(barrier), "r"(arrivals));
}
// The inits visible to the copy engine (the async proxy) before any copy completes on them.
__device__ __forceinline__ void barrier_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
__device__ __forceinline__ void barrier_arrive(uint32_t barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(barrier) : "memory");
}
__device__ __forceinline__ void barrier_arrive_expect_bytes(uint32_t barrier, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(barrier), "r"(bytes) : "memory");
}
// Waits until the phase of this parity has completed (a fresh barrier counts
// its phase before the first, parity 1, as completed).
__device__ __forceinline__ void barrier_wait(uint32_t barrier, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "wait:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait;\n}\n" ::"r"(barrier),
      "r"(parity)
      : "memory");
}

// One box of a 4-D tensor map (coordinates innermost first) into shared
// memory, completing on barrier with its bytes; elements outside the
// tensor arrive as zeros.
__device__ __forceinline__ void copy_box(uint32_t destination, const CUtensorMap* map, uint32_t barrier, int x, int y,
                                         int z, int w) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2];\n" ::"r"(destination),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(barrier), "r"(x), "r"(y), "r"(z), "r"(w)
      : "memory");
}

// One box of shared memory into a 4-D tensor map (coordinates innermost
// first); elements outside the tensor are not written. Completes in a bulk
// group: commit, then wait for the reads before the shared memory is reused.
__device__ __forceinline__ void store_box(const CUtensorMap* map, uint32_t source, int x, int y, int z, int w) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(source), "r"(x), "r"(y), "r"(z), "r"(w)
               : "memory");
}
__device__ __forceinline__ void store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void store_wait_reads() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
// Ordinary shared-memory stores made visible to the copy engine (the async proxy).
__device__ __forceinline__ void fence_shared_for_copies() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Named barriers (0 is __syncthreads'): wait until `threads` threads have
// arrived, or arrive without waiting.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Registers moved between warpgroups' roles (sm_90a; the kernel needs a
// register cap at entry, __launch_bounds__(threads, 1)).
template <int Registers>
__device__ __forceinline__ void registers_shrink() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Registers)); }
template <int Registers>
__device__ __forceinline__ void registers_grow() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Registers)); }

}  // namespace hopper
