// Tensor-core captures of Hopper's narrow-input wgmma: m64n8k32 with e4m3 and
// e5m2 in all four pairings, into f32 and into f16, and m64n8k8 with tf32
// into f32. Every tile's A, B, C and D are written in logical (row-major)
// order, in the BXMMA01 layout of cuda/capture/README.md (variants 4-12).
// Needs capture_mma.cuh (Format, value_near, the fragment helpers).
#pragma once

#include "capture_common.cuh"
#include "capture_mma.cuh"

#include <vector>

// Variants 4-7: fp8 into f32 (A x B = e4m3 x e4m3, e4m3 x e5m2, e5m2 x e4m3,
// e5m2 x e5m2); 8-11: the same into f16; 12: tf32 into f32.
enum LowpVariant { kWgmmaFp8F32 = 4, kWgmmaFp8F16 = 8, kWgmmaTf32F32 = 12 };

__host__ __device__ constexpr bool lowp_is_tf32(int variant) { return variant == kWgmmaTf32F32; }
__host__ __device__ constexpr bool lowp_f16_acc(int variant) { return variant >= kWgmmaFp8F16 && variant < kWgmmaTf32F32; }
__host__ __device__ constexpr int lowp_k(int variant) { return lowp_is_tf32(variant) ? 8 : 32; }
__host__ __device__ constexpr int lowp_in_bytes(int variant) { return lowp_is_tf32(variant) ? 4 : 1; }
// For fp8 variants: whether A (B) is e5m2 rather than e4m3.
__host__ __device__ constexpr bool lowp_a_e5m2(int variant) { return ((variant - kWgmmaFp8F32) & 2) != 0; }
__host__ __device__ constexpr bool lowp_b_e5m2(int variant) { return ((variant - kWgmmaFp8F32) & 1) != 0; }

// The wgmma itself, A in registers (4 x b32 a thread), B from the descriptor.
// The f32 forms take four accumulators a thread, the f16 forms two packed pairs.
#define BX_WGMMA_F32(SHAPE, TYPES)                                                                                 \
    asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, 1, 0;\nwgmma.fence.sync.aligned;\n"         \
                 "wgmma.mma_async.sync.aligned." SHAPE ".f32." TYPES                                               \
                 " {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, accumulate, 1, 1;\n"                                          \
                 "wgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 0;\n}\n"                         \
                 : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])                                          \
                 : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "l"(descriptor)                                 \
                 : "memory")
#define BX_WGMMA_F16(TYPES)                                                                                        \
    asm volatile("{\n.reg .pred accumulate;\nsetp.ne.b32 accumulate, 1, 0;\nwgmma.fence.sync.aligned;\n"         \
                 "wgmma.mma_async.sync.aligned.m64n8k32.f16." TYPES " {%0,%1}, {%2,%3,%4,%5}, %6, accumulate, 1, 1;\n" \
                 "wgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 0;\n}\n"                         \
                 : "+r"(acc16[0]), "+r"(acc16[1])                                                                  \
                 : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "l"(descriptor)                                 \
                 : "memory")

// A's registers (CUTLASS's ALayout_64x32 for 8-bit types, ALayout_64x8 for
// 32-bit ones): register r holds row 16*warp + g + 8*(r&1); for 8-bit types
// k = 4t + 16*(r>>1) .. +3 (lowest k in the lowest byte), for tf32 k = t + 4*(r>>1).
template <int Variant>
__device__ inline void load_a_lowp(const uint8_t* a, int warp, int lane, uint32_t reg[4]) {
    const int g = lane >> 2, t = lane & 3, K = lowp_k(Variant);
    for (int r = 0; r < 4; ++r) {
        const int row = warp * 16 + g + 8 * (r & 1);
        if constexpr (lowp_is_tf32(Variant)) {
            const uint8_t* p = a + (row * K + t + 4 * (r >> 1)) * 4;
            reg[r] = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
        } else {
            const uint8_t* p = a + row * K + 4 * t + 16 * (r >> 1);
            reg[r] = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
        }
    }
}

// One tile per block iteration: B (K x 8, 32 bytes of k per n) goes to shared
// memory K-major without swizzle as two 8x16-byte core matrices 128 bytes
// apart (both byte offsets 128, as in kernel_wgmma); A from registers.
template <int Variant>
__global__ void kernel_wgmma_lowp(const uint8_t* a_all, const uint8_t* b_all, const uint32_t* c_all, uint32_t* d_all,
                                  int tiles) {
    constexpr int K = lowp_k(Variant), in_bytes = lowp_in_bytes(Variant);
    __shared__ __align__(256) uint8_t b_shared[256];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const uint8_t* a = a_all + (size_t)tile * 64 * K * in_bytes;
        const uint8_t* b = b_all + (size_t)tile * K * 8 * in_bytes;
        const uint32_t* c = c_all + (size_t)tile * 512;
        uint32_t* d = d_all + (size_t)tile * 512;
        __syncthreads();
        for (int byte = threadIdx.x; byte < 256; byte += blockDim.x) {
            const int element = byte / in_bytes, k = element / 8, n = element % 8;  // B[k][n]
            const int kb = k * in_bytes + byte % in_bytes;                           // byte along k
            b_shared[(kb >= 16 ? 128 : 0) + n * 16 + (kb & 15)] = b[byte];
        }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();
        uint32_t ra[4];
        load_a_lowp<Variant>(a, warp, lane, ra);
        uint64_t address = (uint64_t)__cvta_generic_to_shared(b_shared);
        uint64_t descriptor = ((address & 0x3FFFF) >> 4) | ((uint64_t)(128 >> 4) << 16) | ((uint64_t)(128 >> 4) << 32);
        if constexpr (lowp_f16_acc(Variant)) {
            uint32_t acc16[2];
            for (int j = 0; j < 2; ++j)
                acc16[j] = (c[acc_index(warp * 16, lane, 2 * j)] & 0xFFFF) |
                           (c[acc_index(warp * 16, lane, 2 * j + 1)] << 16);
            if constexpr (Variant == kWgmmaFp8F16 + 0) BX_WGMMA_F16("e4m3.e4m3");
            else if constexpr (Variant == kWgmmaFp8F16 + 1) BX_WGMMA_F16("e4m3.e5m2");
            else if constexpr (Variant == kWgmmaFp8F16 + 2) BX_WGMMA_F16("e5m2.e4m3");
            else BX_WGMMA_F16("e5m2.e5m2");
            for (int j = 0; j < 2; ++j) {
                d[acc_index(warp * 16, lane, 2 * j)] = acc16[j] & 0xFFFF;
                d[acc_index(warp * 16, lane, 2 * j + 1)] = acc16[j] >> 16;
            }
        } else {
            float acc[4];
            for (int i = 0; i < 4; ++i) acc[i] = float_of(c[acc_index(warp * 16, lane, i)]);
            if constexpr (Variant == kWgmmaFp8F32 + 0) BX_WGMMA_F32("m64n8k32", "e4m3.e4m3");
            else if constexpr (Variant == kWgmmaFp8F32 + 1) BX_WGMMA_F32("m64n8k32", "e4m3.e5m2");
            else if constexpr (Variant == kWgmmaFp8F32 + 2) BX_WGMMA_F32("m64n8k32", "e5m2.e4m3");
            else if constexpr (Variant == kWgmmaFp8F32 + 3) BX_WGMMA_F32("m64n8k32", "e5m2.e5m2");
            else BX_WGMMA_F32("m64n8k8", "tf32.tf32");
            for (int i = 0; i < 4; ++i) d[acc_index(warp * 16, lane, i)] = bits_of(acc[i]);
        }
    }
}

// ---------------- structured input generation (host) ----------------

// An input format as the generator sees it: e4m3 has no infinity (its top
// exponent holds normals up to 448, S.1111.111 is NaN); tf32 sits in the
// upper 19 bits of a 32-bit register.
struct LowpFormat {
    Format f;
    bool e4m3;
    int storage_shift;  // 13 for tf32
    int top_exponent() const { return e4m3 ? 8 : f.emax(); }
    uint32_t sign_bit() const { return f.sign_bit(); }
};
static const LowpFormat kE4m3{{4, 3, 7}, true, 0}, kE5m2{{5, 2, 15}, false, 0}, kTf32{{8, 10, 127}, false, 13};

static uint32_t lowp_near(SplitMix64& rng, const LowpFormat& x, int e, bool negative) {
    if (x.e4m3 && e >= 8) return (negative ? 0x80u : 0u) | 0x78u | (uint32_t)(rng.next() % 7);  // 256..448
    return value_near(rng, x.f, e, negative);
}
static uint32_t lowp_random(SplitMix64& rng, const LowpFormat& x, int elo, int ehi) {
    return lowp_near(rng, x, rng.range(elo, ehi), rng.next() & 1);
}
static uint32_t lowp_finite_bits(SplitMix64& rng, const LowpFormat& x) {
    if (!x.e4m3) return random_finite_bits(rng, x.f);
    for (;;) {
        uint32_t v = rng.u32() & 0xFF;
        if ((v & 0x7F) != 0x7F) return v;
    }
}
static uint32_t lowp_special(SplitMix64& rng, const LowpFormat& x) {
    if (x.e4m3) return rng.next() & 1 ? 0xFFu : 0x7Fu;  // the only NaNs; e4m3 has no infinity
    return random_special(rng, x.f);
}
// A small integer v in a format whose significand holds it exactly.
static uint32_t encode_integer(int v, const Format& f) {
    if (v == 0) return 0;
    uint32_t bits = bits_of((float)v);
    uint32_t sign = (bits >> 31) ? f.sign_bit() : 0;
    int e = (int)((bits >> 23) & 0xFF) - 127;
    return sign | ((uint32_t)(e + f.bias) << f.mantissa_bits) | ((bits & 0x7FFFFF) >> (23 - f.mantissa_bits));
}

enum LowpClass {
    kLowpBaseline = 0,       // random normal tiles
    kLowpFullRange,          // random finite bit patterns
    kLowpSubnormal,          // fp8 (tf32) subnormal inputs, tiny and subnormal C
    kLowpZeros,              // signed zeros everywhere
    kLowpSpecials,           // NaN (and inf but for e4m3) inputs and C
    kLowpCancel,             // the largest products cancel in pairs
    kLowpWindowEdge,         // the other terms 11-16 binades below the largest
    kLowpZeroTerms,          // every product zero (or tiny): C alone, the zero-term exponent
    kLowpAddendVsProducts,   // large C against small products and small C against large ones
    kLowpOverflow,           // sums beyond the accumulator's range
    kLowpNegativeSums,       // every term negative
    kLowpMaxPosition,        // the largest product at each k in turn
    kLowpNearTies,           // terms just around the window's and the output's last bit
    kLowpTf32LowBits,        // tf32 only: the register's low 13 bits set
    kLowpTinyProducts,       // products at the bottom of the range, C +-0 or a tiny subnormal
    kLowpNegativeZeros,      // sums of -0 terms, and exact cancellations, with C = -0
};

struct LowpTiles {
    int variant, k, count;
    std::vector<uint32_t> classes;
    std::vector<uint32_t> a, b;  // storage values: fp8 bytes, or the tf32 register
    std::vector<uint32_t> c, d;  // f32 bits, or f16 bits in the low half
};

static void generate_lowp_tile(SplitMix64& rng, int cls, int tile_index, int K, const LowpFormat& fa,
                               const LowpFormat& fb, const Format& cf, uint32_t* a, uint32_t* b, uint32_t* c) {
    const int M = 64, N = 8;
    const bool tf32 = fa.storage_shift != 0;
    const bool f16_acc = cf.exponent_bits == 5;
    const int wa = tf32 ? 10 : fa.e4m3 ? 3 : 5, wb = tf32 ? 10 : fb.e4m3 ? 3 : 5;
    auto A = [&](int i, int k) -> uint32_t& { return a[i * K + k]; };
    auto B = [&](int k, int j) -> uint32_t& { return b[k * N + j]; };
    auto C = [&](int i, int j) -> uint32_t& { return c[i * N + j]; };
    auto baseline = [&](int zero_one_in) {
        for (int i = 0; i < M * K; ++i) a[i] = rng.chance(zero_one_in) ? 0 : lowp_random(rng, fa, -wa, wa);
        for (int i = 0; i < K * N; ++i) b[i] = rng.chance(zero_one_in) ? 0 : lowp_random(rng, fb, -wb, wb);
        for (int i = 0; i < M * N; ++i) c[i] = rng.chance(8) ? 0 : random_value(rng, cf, -(wa + wb), wa + wb);
    };
    // The top exponent a row's largest A takes: high in the format, so that
    // fp8 has room below it for the window's edge.
    auto top_a = [&]() { return tf32 ? rng.range(-8, 8) : rng.range(fa.top_exponent() - 2, fa.top_exponent()); };
    switch (cls) {
        case kClassLayoutIdentity:  // D[i][j] = B[i % K][j]
            for (int i = 0; i < M; ++i)
                for (int k = 0; k < K; ++k) A(i, k) = k == i % K ? (uint32_t)fa.f.bias << fa.f.mantissa_bits : 0;
            for (int k = 0; k < K; ++k)
                for (int j = 0; j < N; ++j)
                    B(k, j) = tf32 ? encode_integer(k * 8 + j + 1, fb.f) : (uint32_t)((k * 8 + j) % 96 + 8);
            for (int i = 0; i < M * N; ++i) c[i] = 0;
            return;
        case kClassLayoutIntegers:  // small integers: every model gives the exact sum
            for (int i = 0; i < M * K; ++i) a[i] = encode_integer(rng.range(-4, 4), fa.f);
            for (int i = 0; i < K * N; ++i) b[i] = encode_integer(rng.range(-4, 4), fb.f);
            for (int i = 0; i < M * N; ++i) c[i] = encode_integer(rng.range(-64, 64), cf);
            return;
        case kLowpBaseline: baseline(16); return;
        case kLowpFullRange:
            for (int i = 0; i < M * K; ++i) a[i] = lowp_finite_bits(rng, fa);
            for (int i = 0; i < K * N; ++i) b[i] = lowp_finite_bits(rng, fb);
            for (int i = 0; i < M * N; ++i)
                c[i] = rng.chance(2) ? random_finite_bits(rng, cf) : random_value(rng, cf, -2 * wa, 2 * wb);
            return;
        case kLowpSubnormal:
            for (int i = 0; i < M * K; ++i)
                a[i] = rng.chance(2) ? random_subnormal(rng, fa.f) : lowp_random(rng, fa, fa.f.emin(), fa.f.emin() + 4);
            for (int i = 0; i < K * N; ++i)
                b[i] = rng.chance(4) ? random_subnormal(rng, fb.f) : lowp_random(rng, fb, fb.f.emin(), fb.top_exponent());
            for (int i = 0; i < M * N; ++i) {
                int r = (int)(rng.next() % 4);
                c[i] = r == 0   ? (rng.next() & 1 ? cf.sign_bit() : 0)
                       : r == 1 ? random_subnormal(rng, cf)
                       : r == 2 ? random_value(rng, cf, cf.emin(), cf.emin() + 12)
                                : random_value(rng, cf, fa.f.emin() + fb.f.emin() - 4, fa.f.emin() + fb.top_exponent());
            }
            return;
        case kLowpZeros:
            baseline(1 << 30);
            for (int i = 0; i < M * K; ++i)
                if (rng.chance(2) || (i / K) % 4 == 0) a[i] = rng.next() & 1 ? fa.sign_bit() : 0;
            for (int i = 0; i < K * N; ++i)
                if (rng.chance(2)) b[i] = rng.next() & 1 ? fb.sign_bit() : 0;
            for (int i = 0; i < M * N; ++i)
                if (!rng.chance(4)) c[i] = rng.next() & 1 ? cf.sign_bit() : 0;
            return;
        case kLowpSpecials:
            baseline(8);
            for (int i = 0; i < M * K; ++i)
                if (rng.chance(K == 32 ? 48 : 12)) a[i] = lowp_special(rng, fa);
            for (int i = 0; i < K * N; ++i)
                if (rng.chance(K == 32 ? 48 : 12)) b[i] = lowp_special(rng, fb);
            for (int i = 0; i < M * N; ++i)
                if (rng.chance(12)) c[i] = random_special(rng, cf);
            return;
        case kLowpCancel: {
            for (int i = 0; i < M * K; ++i) a[i] = lowp_random(rng, fa, fa.f.emin(), tf32 ? 0 : fa.top_exponent() - 4);
            for (int i = 0; i < K * N; ++i) b[i] = lowp_random(rng, fb, -1, 1);
            int perm[32];
            for (int k = 0; k < K; ++k) perm[k] = k;
            for (int k = K - 1; k > 0; --k) std::swap(perm[k], perm[rng.next() % (k + 1)]);
            for (int p = 0; p < K / 2; ++p) {
                if (!rng.chance(2) && p) continue;
                int k1 = perm[2 * p], k2 = perm[2 * p + 1];
                for (int j = 0; j < N; ++j) B(k2, j) = B(k1, j);
                for (int i = 0; i < M; ++i) {
                    A(i, k1) = lowp_random(rng, fa, fa.top_exponent() - 2, fa.top_exponent());
                    if (tf32) A(i, k1) = lowp_random(rng, fa, 10, 14);
                    A(i, k2) = A(i, k1) ^ fa.sign_bit();
                }
            }
            for (int i = 0; i < M * N; ++i) c[i] = rng.chance(2) ? 0 : random_value(rng, cf, -8, tf32 ? 4 : fa.top_exponent() - 2);
            return;
        }
        case kLowpWindowEdge:
            for (int i = 0; i < M; ++i) {
                const int e = top_a();
                const int span = tf32 ? rng.range(22, 27) : rng.range(11, 16);  // binades below the largest term
                // fp8's 17 binades (e4m3) leave B to make the rest of the span.
                for (int k = 0; k < K; ++k)
                    A(i, k) = lowp_near(rng, fa, std::max(e - span + (rng.chance(3) ? rng.range(-1, 1) : 0), fa.f.emin() - 1),
                                        rng.next() & 1);
                A(i, rng.next() % K) = lowp_near(rng, fa, e, rng.next() & 1);
                for (int j = 0; j < N; ++j) {
                    int r = (int)(rng.next() % 3);
                    C(i, j) = r == 0 ? 0 : value_near(rng, cf, r == 1 ? e - span : e + rng.range(0, 1), rng.next() & 1);
                }
            }
            for (int i = 0; i < K * N; ++i) b[i] = lowp_near(rng, fb, tf32 ? 0 : -rng.range(0, 3), rng.next() & 1);
            return;
        case kLowpZeroTerms:
            for (int i = 0; i < M; ++i) {
                const bool all_zero = i % 2 == 0;
                for (int k = 0; k < K; ++k)
                    A(i, k) = all_zero ? (rng.next() & 1 ? fa.sign_bit() : 0) : random_subnormal(rng, fa.f);
                for (int j = 0; j < N; ++j) {
                    int r = (int)(rng.next() % 5);
                    C(i, j) = r == 0   ? (rng.next() & 1 ? cf.sign_bit() : 0)
                              : r == 1 ? random_subnormal(rng, cf)
                              : r == 2 ? random_value(rng, cf, cf.emin(), cf.emin() + 16)
                              : r == 3 ? random_value(rng, cf, f16_acc ? -14 : -150, f16_acc ? -2 : -110)
                                       : random_value(rng, cf, -10, 10);
                }
            }
            for (int i = 0; i < K * N; ++i) b[i] = rng.chance(2) ? random_subnormal(rng, fb.f) : lowp_random(rng, fb, -2, 2);
            return;
        case kLowpAddendVsProducts:
            baseline(16);
            for (int i = 0; i < M * N; ++i) {
                int r = (int)(rng.next() % 5);
                c[i] = r == 0   ? random_value(rng, cf, 8, f16_acc ? 15 : 40)
                       : r == 1 ? random_value(rng, cf, f16_acc ? -24 : -40, -8)
                       : r == 2 ? random_value(rng, cf, wa + wb + 11, wa + wb + 16)  // products at C's window edge
                       : r == 3 ? random_subnormal(rng, cf)
                                : random_value(rng, cf, wa + wb - 16, wa + wb - 11);  // C at the products' edge
            }
            return;
        case kLowpOverflow: {
            const int hia = tf32 ? 64 : fa.top_exponent(), hib = tf32 ? 64 : fb.top_exponent();
            for (int i = 0; i < M * K; ++i) a[i] = rng.chance(2) ? lowp_near(rng, fa, hia - (int)(rng.next() % 3), rng.chance(4)) : lowp_random(rng, fa, -wa, wa);
            for (int i = 0; i < K * N; ++i) b[i] = rng.chance(2) ? lowp_near(rng, fb, hib - (int)(rng.next() % 3), rng.chance(4)) : lowp_random(rng, fb, -wb, wb);
            for (int i = 0; i < M * N; ++i) {
                int r = (int)(rng.next() % 3);
                c[i] = r == 0 ? 0 : r == 1 ? random_value(rng, cf, cf.emax() - 3, cf.emax()) : (cf.inf() - 1) | (rng.next() & 1 ? cf.sign_bit() : 0);
            }
            return;
        }
        case kLowpNegativeSums:
            baseline(16);
            for (int i = 0; i < M * K; ++i) a[i] |= fa.sign_bit();
            for (int i = 0; i < K * N; ++i) b[i] &= ~fb.sign_bit();
            for (int i = 0; i < M * N; ++i) c[i] |= cf.sign_bit();
            return;
        case kLowpMaxPosition:
            for (int i = 0; i < M; ++i) {
                const int e = top_a();
                const int position = (i * 5 + tile_index) % K;
                for (int k = 0; k < K; ++k) A(i, k) = lowp_random(rng, fa, e - (tf32 ? 30 : 14), e - 1);
                A(i, position) = lowp_near(rng, fa, e, rng.next() & 1);
                for (int j = 0; j < N; ++j) C(i, j) = rng.chance(3) ? 0 : random_value(rng, cf, e - (tf32 ? 30 : 14), e);
            }
            for (int i = 0; i < K * N; ++i) b[i] = lowp_random(rng, fb, -1, 1);
            return;
        case kLowpNearTies:
            for (int i = 0; i < M; ++i) {
                const int e = top_a();
                const int lo = tf32 ? 20 : 8, hi = tf32 ? 28 : 14;
                for (int k = 0; k < K; ++k) A(i, k) = lowp_near(rng, fa, e - rng.range(lo, hi), rng.next() & 1);
                A(i, rng.next() % K) = lowp_near(rng, fa, e, rng.next() & 1);
                for (int j = 0; j < N; ++j) C(i, j) = rng.chance(2) ? 0 : value_near(rng, cf, e, rng.next() & 1);
            }
            for (int i = 0; i < K * N; ++i) b[i] = lowp_near(rng, fb, 0, rng.next() & 1);
            return;
        case kLowpTf32LowBits:
            baseline(16);
            return;  // the low bits are added when stored
        case kLowpTinyProducts:
            // tf32: products in [2^-152, 2^-128], many cut at 2^(Z-25) when a
            // zero term's exponent Z sets the window (probe_mma's tiles for
            // bf16); fp8: products at the bottom of the range, whose negative
            // sums round to zero in an f16 accumulator.
            for (int i = 0; i < M * K; ++i)
                a[i] = rng.chance(6) ? (rng.next() & 1 ? fa.sign_bit() : 0)
                       : tf32        ? lowp_random(rng, fa, -76, -64)
                       : rng.chance(2) ? random_subnormal(rng, fa.f)
                                       : lowp_random(rng, fa, fa.f.emin(), fa.f.emin() + 1);
            for (int i = 0; i < K * N; ++i)
                b[i] = tf32 ? (rng.chance(16) ? random_subnormal(rng, fb.f) : lowp_random(rng, fb, -76, -64))
                       : rng.chance(2) ? random_subnormal(rng, fb.f)
                                       : lowp_random(rng, fb, fb.f.emin(), fb.f.emin() + 1);
            for (int i = 0; i < M * N; ++i) {
                const uint32_t sign = rng.next() & 1 ? cf.sign_bit() : 0;
                c[i] = rng.next() % 4 < 3 ? sign : sign | (uint32_t)rng.range(1, 1 << 10);
            }
            return;
        case kLowpNegativeZeros:
            // Rows 4r: every product -0; 4r+1: zeros of both signs; 4r+2 and
            // 4r+3: products cancelling in pairs (k, k+1 share B's row), small
            // and large; C mostly -0. IEEE gives -0 to the first.
            baseline(1 << 30);
            for (int i = 0; i < K * N; ++i) b[i] &= ~fb.sign_bit();  // B >= 0: A's sign is the product's
            for (int k = 0; k < K; k += 2)
                for (int j = 0; j < N; ++j) B(k + 1, j) = B(k, j);
            for (int i = 0; i < M; ++i) {
                for (int k = 0; k < K; k += 2) {
                    switch (i % 4) {
                        case 0: A(i, k) = A(i, k + 1) = fa.sign_bit(); break;
                        case 1: A(i, k) = rng.next() & 1 ? fa.sign_bit() : 0, A(i, k + 1) = rng.next() & 1 ? fa.sign_bit() : 0; break;
                        case 2: A(i, k + 1) = A(i, k) ^ fa.sign_bit(); break;
                        default:
                            A(i, k) = lowp_random(rng, fa, fa.top_exponent() - 2, fa.top_exponent());
                            A(i, k + 1) = A(i, k) ^ fa.sign_bit();
                    }
                }
                for (int j = 0; j < N; ++j) C(i, j) = rng.chance(4) ? 0 : cf.sign_bit();
            }
            return;
    }
}

static LowpTiles make_lowp_tiles(int variant, int count, uint64_t seed) {
    LowpTiles t;
    t.variant = variant;
    t.k = lowp_k(variant);
    t.count = count;
    const bool tf32 = lowp_is_tf32(variant);
    const LowpFormat& fa = tf32 ? kTf32 : lowp_a_e5m2(variant) ? kE5m2 : kE4m3;
    const LowpFormat& fb = tf32 ? kTf32 : lowp_b_e5m2(variant) ? kE5m2 : kE4m3;
    const Format& cf = lowp_f16_acc(variant) ? kF16 : kF32;
    // Every class for tf32; fp8 skips the tf32 register's low bits.
    std::vector<int> cycle;
    for (int cls = kLowpBaseline; cls <= kLowpNegativeZeros; ++cls)
        if (tf32 || cls != kLowpTf32LowBits) cycle.push_back(cls);
    t.classes.resize(count);
    t.a.resize((size_t)count * 64 * t.k);
    t.b.resize((size_t)count * t.k * 8);
    t.c.resize((size_t)count * 512);
    t.d.resize((size_t)count * 512);
    SplitMix64 rng(seed);
    for (int tile = 0; tile < count; ++tile) {
        const int cls = tile < 2 ? kClassLayoutIdentity + tile : cycle[(tile - 2) % cycle.size()];
        t.classes[tile] = cls;
        uint32_t* a = &t.a[(size_t)tile * 64 * t.k];
        uint32_t* b = &t.b[(size_t)tile * t.k * 8];
        generate_lowp_tile(rng, cls, tile, t.k, fa, fb, cf, a, b, &t.c[(size_t)tile * 512]);
        if (tf32) {  // the tf32 value in the register's upper 19 bits
            const bool low_bits = cls == kLowpTf32LowBits;
            for (int i = 0; i < 64 * t.k; ++i) a[i] = (a[i] << 13) | (low_bits ? rng.u32() & 0x1FFF : 0);
            for (int i = 0; i < t.k * 8; ++i) b[i] = (b[i] << 13) | (low_bits ? rng.u32() & 0x1FFF : 0);
        }
    }
    return t;
}

static void execute_lowp_tiles(LowpTiles& t) {
    const int in_bytes = lowp_in_bytes(t.variant);
    std::vector<uint8_t> a_bytes(t.a.size() * in_bytes), b_bytes(t.b.size() * in_bytes);
    for (size_t i = 0; i < t.a.size(); ++i) std::memcpy(&a_bytes[i * in_bytes], &t.a[i], in_bytes);
    for (size_t i = 0; i < t.b.size(); ++i) std::memcpy(&b_bytes[i * in_bytes], &t.b[i], in_bytes);
    uint8_t *d_a, *d_b;
    uint32_t *d_c, *d_d;
    PROBE_CHECK(cudaMalloc(&d_a, a_bytes.size()));
    PROBE_CHECK(cudaMalloc(&d_b, b_bytes.size()));
    PROBE_CHECK(cudaMalloc(&d_c, t.c.size() * 4));
    PROBE_CHECK(cudaMalloc(&d_d, t.d.size() * 4));
    PROBE_CHECK(cudaMemcpy(d_a, a_bytes.data(), a_bytes.size(), cudaMemcpyHostToDevice));
    PROBE_CHECK(cudaMemcpy(d_b, b_bytes.data(), b_bytes.size(), cudaMemcpyHostToDevice));
    PROBE_CHECK(cudaMemcpy(d_c, t.c.data(), t.c.size() * 4, cudaMemcpyHostToDevice));
    PROBE_CHECK(cudaMemset(d_d, 0xFF, t.d.size() * 4));
    switch (t.variant) {
#define BX_LAUNCH(V) \
    case V: kernel_wgmma_lowp<V><<<264, 128>>>(d_a, d_b, d_c, d_d, t.count); break;
        BX_LAUNCH(4) BX_LAUNCH(5) BX_LAUNCH(6) BX_LAUNCH(7) BX_LAUNCH(8) BX_LAUNCH(9) BX_LAUNCH(10) BX_LAUNCH(11)
        BX_LAUNCH(12)
#undef BX_LAUNCH
    }
    PROBE_CHECK(cudaGetLastError());
    PROBE_CHECK(cudaDeviceSynchronize());
    PROBE_CHECK(cudaMemcpy(t.d.data(), d_d, t.d.size() * 4, cudaMemcpyDeviceToHost));
    cudaFree(d_a);
    cudaFree(d_b);
    cudaFree(d_c);
    cudaFree(d_d);
}

static double decode_lowp(uint32_t stored, const LowpFormat& x) { return decode_small(stored >> x.storage_shift, x.f); }

static void run_lowp_variant(const std::string& out_dir, int variant, int count, const char* file_name,
                             const char* description) {
    LowpTiles t = make_lowp_tiles(variant, count, 0xB17E3AC700ull + variant);
    execute_lowp_tiles(t);

    // Layout check: the first two tiles have exact answers under any model.
    const bool tf32 = lowp_is_tf32(variant);
    const LowpFormat& fa = tf32 ? kTf32 : lowp_a_e5m2(variant) ? kE5m2 : kE4m3;
    const LowpFormat& fb = tf32 ? kTf32 : lowp_b_e5m2(variant) ? kE5m2 : kE4m3;
    const Format& cf = lowp_f16_acc(variant) ? kF16 : kF32;
    const int K = t.k;
    int wrong = 0, checked = 0;
    for (int tile = 0; tile < 2; ++tile)
        for (int i = 0; i < 64; ++i)
            for (int j = 0; j < 8; ++j) {
                double sum = decode_small(t.c[((size_t)tile * 64 + i) * 8 + j], cf);
                for (int k = 0; k < K; ++k)
                    sum += decode_lowp(t.a[((size_t)tile * 64 + i) * K + k], fa) *
                           decode_lowp(t.b[(size_t)tile * K * 8 + k * 8 + j], fb);
                double got = decode_small(t.d[((size_t)tile * 64 + i) * 8 + j], cf);
                ++checked;
                if (got != sum) {
                    if (wrong < 6)
                        log_line("   layout check %s tile %d (%d,%d): got %g expected %g", description, tile, i, j, got, sum);
                    ++wrong;
                }
            }
    log_line("mma %-44s tiles=%d layout check: %s (%d of %d exact-answer outputs wrong)", description, count,
             wrong ? "FAIL" : "OK", wrong, checked);

    const int in_bytes = lowp_in_bytes(variant), acc_bytes = lowp_f16_acc(variant) ? 2 : 4;
    Writer w(out_dir + "/" + file_name);
    w.bytes("BXMMA01", 8);
    w.u32((uint32_t)variant);
    w.u32(64);
    w.u32(8);
    w.u32((uint32_t)K);
    w.u32((uint32_t)count);
    w.u32((uint32_t)acc_bytes);
    for (int tile = 0; tile < count; ++tile) {
        w.u32(t.classes[tile]);
        w.u32(0);
        for (size_t i = 0; i < (size_t)64 * K; ++i) w.bytes(&t.a[(size_t)tile * 64 * K + i], in_bytes);
        for (size_t i = 0; i < (size_t)K * 8; ++i) w.bytes(&t.b[(size_t)tile * K * 8 + i], in_bytes);
        for (size_t i = 0; i < 512; ++i) w.bytes(&t.c[(size_t)tile * 512 + i], acc_bytes);
        for (size_t i = 0; i < 512; ++i) w.bytes(&t.d[(size_t)tile * 512 + i], acc_bytes);
    }
}

static void run_mma_lowp(const std::string& out_dir, int tiles) {
    static const char* const pairings[] = {"e4m3_e4m3", "e4m3_e5m2", "e5m2_e4m3", "e5m2_e5m2"};
    static const char* const ptx_pairings[] = {"e4m3.e4m3", "e4m3.e5m2", "e5m2.e4m3", "e5m2.e5m2"};
    for (int acc = 0; acc < 2; ++acc)
        for (int p = 0; p < 4; ++p) {
            const std::string file = std::string("wgmma_") + pairings[p] + (acc ? "_f16.bin" : "_f32.bin");
            const std::string what = std::string("wgmma.m64n8k32.") + (acc ? "f16." : "f32.") + ptx_pairings[p] + " (A regs)";
            run_lowp_variant(out_dir, (acc ? kWgmmaFp8F16 : kWgmmaFp8F32) + p, tiles, file.c_str(), what.c_str());
        }
    run_lowp_variant(out_dir, kWgmmaTf32F32, tiles, "wgmma_tf32_f32.bin", "wgmma.m64n8k8.f32.tf32.tf32 (A regs)");
}
