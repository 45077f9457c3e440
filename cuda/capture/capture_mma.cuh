// Tensor-core captures: structured A, B, C tiles through mma.sync m16n8k16
// (bf16->f32, f16->f32, f16->f16) and wgmma m64n8k16 (bf16->f32). Every
// tile's A, B, C and D are written in logical (row-major) order.
#pragma once

#include "capture_common.cuh"

enum MmaVariant { kMmaBf16F32 = 0, kMmaF16F32 = 1, kMmaF16F16 = 2, kWgmmaBf16F32 = 3 };

__device__ __forceinline__ uint32_t pack_halves(uint16_t low, uint16_t high) {
    return (uint32_t)low | ((uint32_t)high << 16);
}

// Fragments of mma.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16"),
// g = lane/4, t = lane%4. A is row-major MxK (16x16), B is stored B[k][n].
__device__ inline void load_a_fragment(const uint16_t* a, int row0, int lane, uint32_t reg[4]) {
    int g = lane >> 2, t = lane & 3;
    const uint16_t* top = a + (row0 + g) * 16;
    const uint16_t* bottom = a + (row0 + g + 8) * 16;
    reg[0] = pack_halves(top[2 * t], top[2 * t + 1]);
    reg[1] = pack_halves(bottom[2 * t], bottom[2 * t + 1]);
    reg[2] = pack_halves(top[2 * t + 8], top[2 * t + 9]);
    reg[3] = pack_halves(bottom[2 * t + 8], bottom[2 * t + 9]);
}
__device__ inline void load_b_fragment(const uint16_t* b, int lane, uint32_t reg[2]) {
    int g = lane >> 2, t = lane & 3;
    reg[0] = pack_halves(b[(2 * t) * 8 + g], b[(2 * t + 1) * 8 + g]);
    reg[1] = pack_halves(b[(2 * t + 8) * 8 + g], b[(2 * t + 9) * 8 + g]);
}
// Accumulator element i of a lane: row g (+8 for i>=2), column 2t + (i&1).
__device__ inline int acc_index(int row0, int lane, int i) {
    int g = lane >> 2, t = lane & 3;
    return (row0 + g + (i >= 2 ? 8 : 0)) * 8 + 2 * t + (i & 1);
}

template <int Variant>
__global__ void kernel_mma(const uint16_t* a_all, const uint16_t* b_all, const void* c_all, void* d_all, int tiles) {
    int tile = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (tile >= tiles) return;
    const uint16_t* a = a_all + tile * 256;
    const uint16_t* b = b_all + tile * 128;
    uint32_t ra[4], rb[2];
    load_a_fragment(a, 0, lane, ra);
    load_b_fragment(b, lane, rb);
    if constexpr (Variant == kMmaF16F16) {
        const uint16_t* c = static_cast<const uint16_t*>(c_all) + tile * 128;
        uint16_t* d = static_cast<uint16_t*>(d_all) + tile * 128;
        uint32_t rc[2] = {pack_halves(c[acc_index(0, lane, 0)], c[acc_index(0, lane, 1)]),
                          pack_halves(c[acc_index(0, lane, 2)], c[acc_index(0, lane, 3)])};
        uint32_t rd[2];
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%8,%9};"
            : "=r"(rd[0]), "=r"(rd[1])
            : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]), "r"(rc[0]), "r"(rc[1]));
        d[acc_index(0, lane, 0)] = (uint16_t)rd[0];
        d[acc_index(0, lane, 1)] = (uint16_t)(rd[0] >> 16);
        d[acc_index(0, lane, 2)] = (uint16_t)rd[1];
        d[acc_index(0, lane, 3)] = (uint16_t)(rd[1] >> 16);
    } else {
        const uint32_t* c = static_cast<const uint32_t*>(c_all) + tile * 128;
        uint32_t* d = static_cast<uint32_t*>(d_all) + tile * 128;
        float rc[4], rd[4];
        for (int i = 0; i < 4; ++i) rc[i] = float_of(c[acc_index(0, lane, i)]);
        if constexpr (Variant == kMmaBf16F32) {
            asm volatile(
                "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                "{%10,%11,%12,%13};"
                : "=f"(rd[0]), "=f"(rd[1]), "=f"(rd[2]), "=f"(rd[3])
                : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]), "f"(rc[0]), "f"(rc[1]),
                  "f"(rc[2]), "f"(rc[3]));
        } else {
            asm volatile(
                "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                "{%10,%11,%12,%13};"
                : "=f"(rd[0]), "=f"(rd[1]), "=f"(rd[2]), "=f"(rd[3])
                : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "r"(rb[0]), "r"(rb[1]), "f"(rc[0]), "f"(rc[1]),
                  "f"(rc[2]), "f"(rc[3]));
        }
        for (int i = 0; i < 4; ++i) d[acc_index(0, lane, i)] = bits_of(rd[i]);
    }
}

// wgmma m64n8k16, A from registers (warp w holds rows 16w..16w+15 in the
// mma.m16n8k16 A layout), B from shared memory, K-major, no swizzle: two 8x8
// core matrices (8 rows n, 16 bytes of k each), 128 bytes apart. Both the
// leading and the stride byte offsets are set to 128, so the layout is right
// whichever of the two the hardware applies along k.
__global__ void kernel_wgmma(const uint16_t* a_all, const uint16_t* b_all, const uint32_t* c_all, uint32_t* d_all,
                             int tiles) {
    __shared__ __align__(256) uint16_t b_shared[128];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const uint16_t* a = a_all + tile * 64 * 16;
        const uint16_t* b = b_all + tile * 128;
        const uint32_t* c = c_all + tile * 512;
        uint32_t* d = d_all + tile * 512;
        __syncthreads();
        if (threadIdx.x < 128) {
            int k = threadIdx.x >> 3, n = threadIdx.x & 7;  // element B[k][n]
            int offset = (k >= 8 ? 64 : 0) + n * 8 + (k & 7);  // in 2-byte units
            b_shared[offset] = b[k * 8 + n];
        }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();
        uint32_t ra[4];
        load_a_fragment(a, warp * 16, lane, ra);
        float acc[4];
        for (int i = 0; i < 4; ++i) acc[i] = float_of(c[acc_index(warp * 16, lane, i)]);
        uint64_t address = (uint64_t)__cvta_generic_to_shared(b_shared);
        uint64_t descriptor = ((address & 0x3FFFF) >> 4) | ((uint64_t)(128 >> 4) << 16) | ((uint64_t)(128 >> 4) << 32);
        asm volatile(
            "{\n"
            ".reg .pred accumulate;\n"
            "setp.ne.b32 accumulate, 1, 0;\n"
            "wgmma.fence.sync.aligned;\n"
            "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, accumulate, 1, 1, 0;\n"
            "wgmma.commit_group.sync.aligned;\n"
            "wgmma.wait_group.sync.aligned 0;\n"
            "}\n"
            : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
            : "r"(ra[0]), "r"(ra[1]), "r"(ra[2]), "r"(ra[3]), "l"(descriptor)
            : "memory");
        for (int i = 0; i < 4; ++i) d[acc_index(warp * 16, lane, i)] = bits_of(acc[i]);
    }
}

// ---------------- structured input generation (host) ----------------
struct Format {
    int exponent_bits, mantissa_bits, bias;
    int emin() const { return 1 - bias; }
    int emax() const { return bias; }
    uint32_t inf() const { return ((1u << exponent_bits) - 1) << mantissa_bits; }
    uint32_t sign_bit() const { return 1u << (exponent_bits + mantissa_bits); }
};
static const Format kBf16{8, 7, 127}, kF16{5, 10, 15}, kF32{8, 23, 127};

// A random mantissa, biased toward the patterns that expose rounding corners.
static uint32_t random_mantissa(SplitMix64& rng, const Format& f) {
    uint32_t mask = (1u << f.mantissa_bits) - 1;
    switch (rng.next() % 8) {
        case 0: return 0;
        case 1: return mask;
        case 2: return 1u << (rng.next() % f.mantissa_bits);
        default: return rng.u32() & mask;
    }
}
// A value of about 2^e: normal when e is in range, subnormal or zero below, clamped above.
static uint32_t value_near(SplitMix64& rng, const Format& f, int e, bool negative) {
    uint32_t sign = negative ? f.sign_bit() : 0;
    if (e > f.emax()) e = f.emax();
    if (e >= f.emin()) return sign | ((uint32_t)(e + f.bias) << f.mantissa_bits) | random_mantissa(rng, f);
    int shift = f.emin() - e;  // subnormal: leading bit at mantissa_bits - shift
    if (shift > f.mantissa_bits) return sign;
    uint32_t lead = 1u << (f.mantissa_bits - shift);
    return sign | lead | (rng.u32() & (lead - 1));
}
static uint32_t random_value(SplitMix64& rng, const Format& f, int elo, int ehi) {
    return value_near(rng, f, rng.range(elo, ehi), rng.next() & 1);
}
static uint32_t random_subnormal(SplitMix64& rng, const Format& f) {
    uint32_t m = rng.u32() & ((1u << f.mantissa_bits) - 1);
    if (!m) m = 1;
    return (rng.next() & 1 ? f.sign_bit() : 0) | m;
}
static uint32_t random_finite_bits(SplitMix64& rng, const Format& f) {
    uint32_t total = f.exponent_bits + f.mantissa_bits + 1;
    for (;;) {
        uint32_t v = total == 32 ? rng.u32() : rng.u32() & ((1u << total) - 1);
        if ((v & f.inf()) != f.inf()) return v;
    }
}
static uint32_t random_special(SplitMix64& rng, const Format& f) {
    uint32_t quiet = 1u << (f.mantissa_bits - 1);
    uint32_t payload = rng.u32() & (quiet - 1);
    switch (rng.next() % 7) {
        case 0: return f.inf();
        case 1: return f.inf() | f.sign_bit();
        case 2: return f.inf() | quiet;
        case 3: return f.inf() | quiet | f.sign_bit();
        case 4: return f.inf() | quiet | payload;
        case 5: return f.inf() | (payload ? payload : 1);  // signalling
        default: return f.sign_bit() | f.inf() | (payload ? payload : 1);
    }
}

enum TileClass {
    kClassLayoutIdentity = 100,
    kClassLayoutIntegers = 101,
    kClassBaseline = 0,
    kClassFullRange,
    kClassSubnormal,
    kClassZeros,
    kClassInfNaN,
    kClassCancel,
    kClassSpread,
    kClassMaxPosition,
    kClassCDominates,
    kClassNearTies,
    kClassOverflow,
    kClassNegativeSums,
    kClassCount
};

struct Tiles {
    int m, n = 8, k = 16, count;
    bool c_is_f16;
    std::vector<uint32_t> classes;
    std::vector<uint16_t> a, b;
    std::vector<uint32_t> c;    // f32 bits, or f16 bits in the low half
    std::vector<uint32_t> d;
};

// Fills one tile. `f` is the input format, `cf` the accumulator format.
static void generate_tile(SplitMix64& rng, int cls, int tile_index, int m, const Format& f, const Format& cf,
                          uint16_t* a, uint16_t* b, uint32_t* c) {
    const int K = 16, N = 8;
    const bool small = f.exponent_bits == 5;  // f16: 40 binades instead of 260
    const int w = small ? 5 : 10;             // baseline exponent half-width
    auto A = [&](int i, int k) -> uint16_t& { return a[i * K + k]; };
    auto B = [&](int k, int j) -> uint16_t& { return b[k * N + j]; };
    auto C = [&](int i, int j) -> uint32_t& { return c[i * N + j]; };
    auto fill_baseline = [&](int zero_one_in) {
        for (int i = 0; i < m * K; ++i) a[i] = rng.chance(zero_one_in) ? 0 : random_value(rng, f, -w, w);
        for (int i = 0; i < K * N; ++i) b[i] = rng.chance(zero_one_in) ? 0 : random_value(rng, f, -w, w);
        for (int i = 0; i < m * N; ++i) c[i] = random_value(rng, cf, -w, w);
    };
    switch (cls) {
        case kClassLayoutIdentity:  // D[i][j] = B[i%16][j] + 16*(i/16)
            for (int i = 0; i < m; ++i)
                for (int k = 0; k < K; ++k) A(i, k) = (k == i % 16) ? (uint16_t)(f.bias << f.mantissa_bits) : 0;
            for (int k = 0; k < K; ++k)
                for (int j = 0; j < N; ++j) {
                    float v = (float)(k * 8 + j + 1);
                    uint32_t bits = bits_of(v);
                    B(k, j) = small ? (uint16_t)((((bits >> 23) - 127 + 15) << 10) | ((bits >> 13) & 0x3FF))
                                    : (uint16_t)(bits >> 16);
                }
            for (int i = 0; i < m; ++i)
                for (int j = 0; j < N; ++j) {
                    float v = (float)(16 * (i / 16));
                    uint32_t bits = bits_of(v);
                    C(i, j) = cf.exponent_bits == 5
                                  ? (v == 0 ? 0u : (((bits >> 23) - 127 + 15) << 10) | ((bits >> 13) & 0x3FF))
                                  : bits;
                }
            return;
        case kClassLayoutIntegers:  // small integers: every model gives the exact sum
            for (int i = 0; i < m * K; ++i) {
                float v = (float)rng.range(-4, 4);
                uint32_t bits = bits_of(v);
                a[i] = v == 0 ? 0 : small ? (uint16_t)(((bits >> 31) << 15) | ((((bits >> 23) & 0xFF) - 127 + 15) << 10) | ((bits >> 13) & 0x3FF))
                                          : (uint16_t)(bits >> 16);
            }
            for (int i = 0; i < K * N; ++i) {
                float v = (float)rng.range(-4, 4);
                uint32_t bits = bits_of(v);
                b[i] = v == 0 ? 0 : small ? (uint16_t)(((bits >> 31) << 15) | ((((bits >> 23) & 0xFF) - 127 + 15) << 10) | ((bits >> 13) & 0x3FF))
                                          : (uint16_t)(bits >> 16);
            }
            for (int i = 0; i < m * N; ++i) {
                float v = (float)rng.range(-64, 64);
                uint32_t bits = bits_of(v);
                c[i] = cf.exponent_bits == 5
                           ? (v == 0 ? 0u : ((bits >> 31) << 15) | ((((bits >> 23) & 0xFF) - 127 + 15) << 10) | ((bits >> 13) & 0x3FF))
                           : bits;
            }
            return;
        case kClassBaseline: fill_baseline(16); return;
        case kClassFullRange:
            for (int i = 0; i < m * K; ++i) a[i] = random_finite_bits(rng, f);
            for (int i = 0; i < K * N; ++i) b[i] = random_finite_bits(rng, f);
            for (int i = 0; i < m * N; ++i) c[i] = random_finite_bits(rng, cf);
            return;
        case kClassSubnormal:
            for (int i = 0; i < m * K; ++i)
                a[i] = rng.chance(2) ? random_subnormal(rng, f) : random_value(rng, f, f.emin(), f.emin() + (small ? 6 : 20));
            for (int i = 0; i < K * N; ++i)
                b[i] = rng.chance(4) ? random_subnormal(rng, f) : random_value(rng, f, f.emin(), f.emax());
            for (int i = 0; i < m * N; ++i) {
                int r = (int)(rng.next() % 4);
                c[i] = r == 0 ? (rng.next() & 1 ? cf.sign_bit() : 0)
                     : r == 1 ? random_subnormal(rng, cf)
                     : r == 2 ? random_value(rng, cf, cf.emin(), cf.emin() + 20)
                              : random_value(rng, cf, small ? -30 : -140, small ? -10 : -100);
            }
            return;
        case kClassZeros:
            fill_baseline(1 << 30);
            for (int i = 0; i < m * K; ++i)
                if (rng.chance(2) || (i / K) % 4 == 0) a[i] = rng.next() & 1 ? (uint16_t)f.sign_bit() : 0;
            for (int i = 0; i < K * N; ++i)
                if (rng.chance(2)) b[i] = rng.next() & 1 ? (uint16_t)f.sign_bit() : 0;
            for (int i = 0; i < m * N; ++i)
                if (!rng.chance(4)) c[i] = rng.next() & 1 ? cf.sign_bit() : 0;
            return;
        case kClassInfNaN:
            fill_baseline(8);
            for (int i = 0; i < m * K; ++i)
                if (rng.chance(24)) a[i] = random_special(rng, f);
            for (int i = 0; i < K * N; ++i)
                if (rng.chance(24)) b[i] = random_special(rng, f);
            for (int i = 0; i < m * N; ++i)
                if (rng.chance(12)) c[i] = random_special(rng, cf);
            return;
        case kClassCancel: {
            int big = rng.range(small ? 2 : 5, small ? 6 : 20);
            for (int i = 0; i < m * K; ++i) a[i] = random_value(rng, f, small ? -8 : -40, 0);
            for (int i = 0; i < K * N; ++i) b[i] = random_value(rng, f, -2, 2);
            int perm[16];
            for (int k = 0; k < 16; ++k) perm[k] = k;
            for (int k = 15; k > 0; --k) std::swap(perm[k], perm[rng.next() % (k + 1)]);
            for (int p = 0; p < 8; ++p) {
                if (!rng.chance(2) && p) continue;
                int k1 = perm[2 * p], k2 = perm[2 * p + 1];
                for (int j = 0; j < N; ++j) B(k2, j) = B(k1, j);
                for (int i = 0; i < m; ++i) {
                    A(i, k1) = random_value(rng, f, big, big + 3);
                    A(i, k2) = A(i, k1) ^ (uint16_t)f.sign_bit();
                }
            }
            for (int i = 0; i < m * N; ++i) c[i] = rng.chance(2) ? 0 : random_value(rng, cf, small ? -8 : -40, 0);
            return;
        }
        case kClassSpread:
            for (int i = 0; i < m; ++i) {
                int e = rng.range(small ? -4 : -20, small ? 4 : 20);
                int spread = small ? 30 : 70;
                for (int k = 0; k < K; ++k) A(i, k) = value_near(rng, f, e - rng.range(0, spread), rng.next() & 1);
                A(i, rng.next() % 16) = value_near(rng, f, e, rng.next() & 1);
                for (int j = 0; j < N; ++j)
                    C(i, j) = rng.chance(3) ? 0 : value_near(rng, cf, e - rng.range(-2, spread), rng.next() & 1);
            }
            for (int i = 0; i < K * N; ++i) b[i] = random_value(rng, f, -3, 3);
            return;
        case kClassMaxPosition:
            for (int i = 0; i < m; ++i) {
                int e = rng.range(-3, 3);
                int position = (i * 5 + tile_index) % 16;
                for (int k = 0; k < K; ++k) A(i, k) = random_value(rng, f, e - (small ? 4 : 8), e);
                A(i, position) = value_near(rng, f, e + rng.range(0, small ? 8 : 30), rng.next() & 1);
                for (int j = 0; j < N; ++j)
                    C(i, j) = rng.chance(3) ? 0 : random_value(rng, cf, e - (small ? 12 : 30), e);
            }
            for (int i = 0; i < K * N; ++i) b[i] = random_value(rng, f, -1, 1);
            return;
        case kClassCDominates:
            fill_baseline(16);
            for (int i = 0; i < m * N; ++i) {
                int r = (int)(rng.next() % 4);
                c[i] = r == 0 ? random_value(rng, cf, small ? 5 : 10, small ? 15 : 40)
                     : r == 1 ? random_value(rng, cf, small ? -20 : -40, small ? -5 : -10)
                     : r == 2 ? (rng.next() & 1 ? cf.sign_bit() : 0)
                              : random_subnormal(rng, cf);
            }
            return;
        case kClassNearTies:
            for (int i = 0; i < m; ++i) {
                int e = rng.range(-4, 4);
                int lo = small ? 10 : 23, hi = small ? 15 : 30;
                for (int k = 0; k < K; ++k) A(i, k) = value_near(rng, f, e - rng.range(lo, hi), rng.next() & 1);
                A(i, rng.next() % 16) = value_near(rng, f, e, rng.next() & 1);
                for (int j = 0; j < N; ++j) C(i, j) = rng.chance(2) ? 0 : value_near(rng, cf, e, rng.next() & 1);
            }
            for (int i = 0; i < K * N; ++i) b[i] = value_near(rng, f, 0, rng.next() & 1);
            return;
        case kClassOverflow: {
            bool f16_acc = cf.exponent_bits == 5;
            int lo = small ? (f16_acc ? 6 : 12) : 56, hi = small ? (f16_acc ? 9 : 15) : 64;
            for (int i = 0; i < m * K; ++i) a[i] = rng.chance(2) ? random_value(rng, f, lo, hi) : random_value(rng, f, -w, w);
            for (int i = 0; i < K * N; ++i) b[i] = rng.chance(2) ? random_value(rng, f, lo, hi) : random_value(rng, f, -w, w);
            for (int i = 0; i < m * N; ++i) {
                int r = (int)(rng.next() % 3);
                c[i] = r == 0 ? 0 : r == 1 ? random_value(rng, cf, cf.emax() - 3, cf.emax()) : (cf.inf() - 1) | (rng.next() & 1 ? cf.sign_bit() : 0);
            }
            return;
        }
        case kClassNegativeSums:
            fill_baseline(16);
            for (int i = 0; i < m * K; ++i) a[i] |= (uint16_t)f.sign_bit();
            for (int i = 0; i < K * N; ++i) b[i] &= (uint16_t)~f.sign_bit();
            for (int i = 0; i < m * N; ++i) c[i] |= cf.sign_bit();
            return;
    }
}

static Tiles make_tiles(int variant, int count, uint64_t seed) {
    Tiles t;
    t.m = variant == kWgmmaBf16F32 ? 64 : 16;
    t.count = count;
    t.c_is_f16 = variant == kMmaF16F16;
    const Format& f = (variant == kMmaF16F32 || variant == kMmaF16F16) ? kF16 : kBf16;
    const Format& cf = t.c_is_f16 ? kF16 : kF32;
    t.classes.resize(count);
    t.a.resize((size_t)count * t.m * 16);
    t.b.resize((size_t)count * 128);
    t.c.resize((size_t)count * t.m * 8);
    t.d.resize((size_t)count * t.m * 8);
    SplitMix64 rng(seed);
    for (int tile = 0; tile < count; ++tile) {
        int cls = tile < 2 ? kClassLayoutIdentity + tile : (tile - 2) % kClassCount;
        t.classes[tile] = cls;
        std::vector<uint16_t> a16(t.m * 16), b16(128);
        generate_tile(rng, cls, tile, t.m, f, cf, a16.data(), b16.data(), &t.c[(size_t)tile * t.m * 8]);
        std::copy(a16.begin(), a16.end(), t.a.begin() + (size_t)tile * t.m * 16);
        std::copy(b16.begin(), b16.end(), t.b.begin() + (size_t)tile * 128);
    }
    return t;
}

static double decode_small(uint32_t bits, const Format& f) {
    uint32_t e = (bits >> f.mantissa_bits) & ((1u << f.exponent_bits) - 1);
    uint32_t mant = bits & ((1u << f.mantissa_bits) - 1);
    double v = e == 0 ? std::ldexp((double)mant, f.emin() - f.mantissa_bits)
                      : std::ldexp((double)(mant | (1u << f.mantissa_bits)), (int)e - f.bias - f.mantissa_bits);
    return (bits >> (f.exponent_bits + f.mantissa_bits)) & 1 ? -v : v;
}

// Runs every tile of t through the variant's instruction on the device and
// fills t.d (shared with cuda/probe_mma.cu). Returns the f16 C and D arrays
// as uploaded and read back (empty for f32 accumulators).
static void execute_tiles(int variant, Tiles& t, std::vector<uint16_t>& c16, std::vector<uint16_t>& d16) {
    const int count = t.count;
    const size_t a_n = t.a.size(), b_n = t.b.size(), c_n = t.c.size();
    uint16_t *d_a, *d_b;
    void *d_c, *d_d;
    PROBE_CHECK(cudaMalloc(&d_a, a_n * 2));
    PROBE_CHECK(cudaMalloc(&d_b, b_n * 2));
    PROBE_CHECK(cudaMalloc(&d_c, c_n * 4));
    PROBE_CHECK(cudaMalloc(&d_d, c_n * 4));
    PROBE_CHECK(cudaMemcpy(d_a, t.a.data(), a_n * 2, cudaMemcpyHostToDevice));
    PROBE_CHECK(cudaMemcpy(d_b, t.b.data(), b_n * 2, cudaMemcpyHostToDevice));
    if (t.c_is_f16) {
        c16.resize(c_n);
        for (size_t i = 0; i < c_n; ++i) c16[i] = (uint16_t)t.c[i];
        PROBE_CHECK(cudaMemcpy(d_c, c16.data(), c_n * 2, cudaMemcpyHostToDevice));
    } else {
        PROBE_CHECK(cudaMemcpy(d_c, t.c.data(), c_n * 4, cudaMemcpyHostToDevice));
    }
    PROBE_CHECK(cudaMemset(d_d, 0xFF, c_n * 4));
    switch (variant) {
        case kMmaBf16F32: kernel_mma<kMmaBf16F32><<<(count + 3) / 4, 128>>>(d_a, d_b, d_c, d_d, count); break;
        case kMmaF16F32: kernel_mma<kMmaF16F32><<<(count + 3) / 4, 128>>>(d_a, d_b, d_c, d_d, count); break;
        case kMmaF16F16: kernel_mma<kMmaF16F16><<<(count + 3) / 4, 128>>>(d_a, d_b, d_c, d_d, count); break;
        case kWgmmaBf16F32:
            kernel_wgmma<<<264, 128>>>(d_a, d_b, (const uint32_t*)d_c, (uint32_t*)d_d, count);
            break;
    }
    PROBE_CHECK(cudaGetLastError());
    PROBE_CHECK(cudaDeviceSynchronize());
    if (t.c_is_f16) {
        d16.resize(c_n);
        PROBE_CHECK(cudaMemcpy(d16.data(), d_d, c_n * 2, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < c_n; ++i) t.d[i] = d16[i];
    } else {
        PROBE_CHECK(cudaMemcpy(t.d.data(), d_d, c_n * 4, cudaMemcpyDeviceToHost));
    }
    cudaFree(d_a);
    cudaFree(d_b);
    cudaFree(d_c);
    cudaFree(d_d);
}

static void run_mma_variant(const std::string& out_dir, int variant, int count, const char* file_name,
                            const char* description) {
    Tiles t = make_tiles(variant, count, 0xB17E3AC700ull + variant);
    std::vector<uint16_t> c16, d16;
    execute_tiles(variant, t, c16, d16);

    // Layout check: the first two tiles have exact answers under any model.
    const Format& f = (variant == kMmaF16F32 || variant == kMmaF16F16) ? kF16 : kBf16;
    const Format& cf = t.c_is_f16 ? kF16 : kF32;
    int wrong = 0, checked = 0;
    for (int tile = 0; tile < 2; ++tile)
        for (int i = 0; i < t.m; ++i)
            for (int j = 0; j < 8; ++j) {
                double sum = decode_small(t.c[((size_t)tile * t.m + i) * 8 + j], cf);
                for (int k = 0; k < 16; ++k)
                    sum += decode_small(t.a[((size_t)tile * t.m + i) * 16 + k], f) *
                           decode_small(t.b[(size_t)tile * 128 + k * 8 + j], f);
                double got = decode_small(t.d[((size_t)tile * t.m + i) * 8 + j], cf);
                ++checked;
                if (got != sum) {
                    if (wrong < 6)
                        log_line("   layout check %s tile %d (%d,%d): got %g expected %g", description, tile, i, j, got,
                                 sum);
                    ++wrong;
                }
            }
    log_line("mma %-40s tiles=%d layout check: %s (%d of %d exact-answer outputs wrong)", description, count,
             wrong ? "FAIL" : "OK", wrong, checked);

    Writer w(out_dir + "/" + file_name);
    w.bytes("BXMMA01", 8);
    w.u32((uint32_t)variant);
    w.u32((uint32_t)t.m);
    w.u32(8);
    w.u32(16);
    w.u32((uint32_t)count);
    w.u32(t.c_is_f16 ? 2 : 4);
    for (int tile = 0; tile < count; ++tile) {
        w.u32(t.classes[tile]);
        w.u32(0);
        w.bytes(&t.a[(size_t)tile * t.m * 16], (size_t)t.m * 16 * 2);
        w.bytes(&t.b[(size_t)tile * 128], 128 * 2);
        if (t.c_is_f16) {
            w.bytes(&c16[(size_t)tile * t.m * 8], (size_t)t.m * 8 * 2);
            w.bytes(&d16[(size_t)tile * t.m * 8], (size_t)t.m * 8 * 2);
        } else {
            w.bytes(&t.c[(size_t)tile * t.m * 8], (size_t)t.m * 8 * 4);
            w.bytes(&t.d[(size_t)tile * t.m * 8], (size_t)t.m * 8 * 4);
        }
    }
}

static void run_mma(const std::string& out_dir) {
    run_mma_variant(out_dir, kMmaBf16F32, 6144, "mma_bf16_f32.bin", "mma.m16n8k16.row.col.f32.bf16.bf16.f32");
    run_mma_variant(out_dir, kMmaF16F32, 4096, "mma_f16_f32.bin", "mma.m16n8k16.row.col.f32.f16.f16.f32");
    run_mma_variant(out_dir, kMmaF16F16, 4096, "mma_f16_f16.bin", "mma.m16n8k16.row.col.f16.f16.f16.f16");
    run_mma_variant(out_dir, kWgmmaBf16F32, 1024, "wgmma_bf16_f32.bin", "wgmma.m64n8k16.f32.bf16.bf16 (A regs)");
}
