// Scalar captures: fp32 add/mul/fma in every rounding mode with and without
// .ftz, bf16 add/mul/fma, f32->bf16 conversions, and MUFU samples outside
// the tables. Inputs are structured (subnormals, ties, specials, near
// 2^-126, overflow, cancellation) and stored beside the outputs in ops.bin.
#pragma once

#include "capture_common.cuh"

// ---------------- device kernels ----------------
#define F32_BINARY(instruction, d, x, y) asm volatile(instruction " %0, %1, %2;" : "=f"(d) : "f"(x), "f"(y))
#define F32_TERNARY(instruction, d, x, y, z) \
    asm volatile(instruction " %0, %1, %2, %3;" : "=f"(d) : "f"(x), "f"(y), "f"(z))

constexpr int kF32Outputs = 24;
static const char* kF32OutputNames[kF32Outputs] = {
    "add.rn.f32",     "add.rz.f32",     "add.rm.f32",     "add.rp.f32",     "add.rn.ftz.f32", "add.rz.ftz.f32",
    "add.rm.ftz.f32", "add.rp.ftz.f32", "mul.rn.f32",     "mul.rz.f32",     "mul.rm.f32",     "mul.rp.f32",
    "mul.rn.ftz.f32", "mul.rz.ftz.f32", "mul.rm.ftz.f32", "mul.rp.ftz.f32", "fma.rn.f32",     "fma.rz.f32",
    "fma.rm.f32",     "fma.rp.f32",     "fma.rn.ftz.f32", "fma.rz.ftz.f32", "fma.rm.ftz.f32", "fma.rp.ftz.f32"};

__global__ void kernel_f32(const uint32_t* a_bits, const uint32_t* b_bits, const uint32_t* c_bits, uint32_t* out,
                           int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = float_of(a_bits[i]), b = float_of(b_bits[i]), c = float_of(c_bits[i]);
    float r[kF32Outputs];
    F32_BINARY("add.rn.f32", r[0], a, b);
    F32_BINARY("add.rz.f32", r[1], a, b);
    F32_BINARY("add.rm.f32", r[2], a, b);
    F32_BINARY("add.rp.f32", r[3], a, b);
    F32_BINARY("add.rn.ftz.f32", r[4], a, b);
    F32_BINARY("add.rz.ftz.f32", r[5], a, b);
    F32_BINARY("add.rm.ftz.f32", r[6], a, b);
    F32_BINARY("add.rp.ftz.f32", r[7], a, b);
    F32_BINARY("mul.rn.f32", r[8], a, b);
    F32_BINARY("mul.rz.f32", r[9], a, b);
    F32_BINARY("mul.rm.f32", r[10], a, b);
    F32_BINARY("mul.rp.f32", r[11], a, b);
    F32_BINARY("mul.rn.ftz.f32", r[12], a, b);
    F32_BINARY("mul.rz.ftz.f32", r[13], a, b);
    F32_BINARY("mul.rm.ftz.f32", r[14], a, b);
    F32_BINARY("mul.rp.ftz.f32", r[15], a, b);
    F32_TERNARY("fma.rn.f32", r[16], a, b, c);
    F32_TERNARY("fma.rz.f32", r[17], a, b, c);
    F32_TERNARY("fma.rm.f32", r[18], a, b, c);
    F32_TERNARY("fma.rp.f32", r[19], a, b, c);
    F32_TERNARY("fma.rn.ftz.f32", r[20], a, b, c);
    F32_TERNARY("fma.rz.ftz.f32", r[21], a, b, c);
    F32_TERNARY("fma.rm.ftz.f32", r[22], a, b, c);
    F32_TERNARY("fma.rp.ftz.f32", r[23], a, b, c);
    for (int k = 0; k < kF32Outputs; ++k) out[(size_t)k * n + i] = bits_of(r[k]);
}

__global__ void kernel_bf16(const uint16_t* a, const uint16_t* b, const uint16_t* c, uint16_t* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    uint16_t sum, product, fused;
    asm volatile("add.rn.bf16 %0, %1, %2;" : "=h"(sum) : "h"(a[i]), "h"(b[i]));
    asm volatile("mul.rn.bf16 %0, %1, %2;" : "=h"(product) : "h"(a[i]), "h"(b[i]));
    asm volatile("fma.rn.bf16 %0, %1, %2, %3;" : "=h"(fused) : "h"(a[i]), "h"(b[i]), "h"(c[i]));
    out[i] = sum;
    out[n + i] = product;
    out[2 * n + i] = fused;
}

constexpr int kCvtOutputs32 = 2, kCvtOutputs16 = 4;
static const char* kCvtNames32[kCvtOutputs32] = {"cvt.rn.bf16x2.f32 d,a,b", "cvt.rn.f16x2.f32 d,a,b"};
static const char* kCvtNames16[kCvtOutputs16] = {"cvt.rn.bf16.f32 d,a", "cvt.rz.bf16.f32 d,a",
                                                 "cvt.rn.satfinite.bf16.f32 d,a", "cvt.rn.relu.bf16.f32 d,a"};

__global__ void kernel_cvt(const uint32_t* a_bits, const uint32_t* b_bits, uint32_t* out32, uint16_t* out16, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float a = float_of(a_bits[i]), b = float_of(b_bits[i]);
    uint32_t packed_bf16, packed_f16;
    uint16_t rn, rz, sat, relu;
    asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed_bf16) : "f"(a), "f"(b));
    asm volatile("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed_f16) : "f"(a), "f"(b));
    asm volatile("cvt.rn.bf16.f32 %0, %1;" : "=h"(rn) : "f"(a));
    asm volatile("cvt.rz.bf16.f32 %0, %1;" : "=h"(rz) : "f"(a));
    asm volatile("cvt.rn.satfinite.bf16.f32 %0, %1;" : "=h"(sat) : "f"(a));
    asm volatile("cvt.rn.relu.bf16.f32 %0, %1;" : "=h"(relu) : "f"(a));
    out32[i] = packed_bf16;
    out32[n + i] = packed_f16;
    out16[i] = rn;
    out16[n + i] = rz;
    out16[2 * n + i] = sat;
    out16[3 * n + i] = relu;
}

constexpr int kSfuOutputs = 4;
static const char* kSfuNames[kSfuOutputs] = {"ex2.approx.ftz.f32", "ex2.approx.f32", "rcp.approx.ftz.f32",
                                             "rcp.approx.f32"};
__global__ void kernel_sfu(const uint32_t* x_bits, uint32_t* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = float_of(x_bits[i]);
    out[i] = bits_of(ex2_approx_ftz(x));
    out[n + i] = bits_of(ex2_approx(x));
    out[2 * n + i] = bits_of(rcp_approx_ftz(x));
    out[3 * n + i] = bits_of(rcp_approx(x));
}

// ---------------- structured inputs (host) ----------------
static uint32_t f32_with_exponent(SplitMix64& rng, int e) {  // normal, or subnormal/zero below -126
    uint32_t sign = (rng.next() & 1) << 31;
    if (e > 127) e = 127;
    uint32_t mant;
    switch (rng.next() % 6) {
        case 0: mant = 0; break;
        case 1: mant = 0x7FFFFF; break;
        case 2: mant = 1u << (rng.next() % 23); break;
        default: mant = rng.u32() & 0x7FFFFF;
    }
    if (e >= -126) return sign | ((uint32_t)(e + 127) << 23) | mant;
    int shift = -126 - e;
    if (shift > 23) return sign;
    uint32_t lead = 1u << (23 - shift);
    return sign | lead | (rng.u32() & (lead - 1));
}

static void f32_case(SplitMix64& rng, int category, uint32_t& a, uint32_t& b, uint32_t& c) {
    auto special = [&]() { return kF32Specials[rng.next() % (sizeof kF32Specials / 4)]; };
    auto near = [&](uint32_t v, int spread) { return v + (uint32_t)rng.range(-spread, spread); };
    switch (category) {
        case 0: a = rng.u32(); b = rng.u32(); c = rng.u32(); return;
        case 1: a = f32_with_exponent(rng, rng.range(-30, 30)); b = f32_with_exponent(rng, rng.range(-30, 30));
                c = f32_with_exponent(rng, rng.range(-60, 60)); return;
        case 2: {  // related exponents: additions with partial cancellation and ties
            int e = rng.range(-100, 100);
            a = f32_with_exponent(rng, e);
            b = f32_with_exponent(rng, e - rng.range(0, 26));
            c = f32_with_exponent(rng, e - rng.range(-2, 50));
            return;
        }
        case 3: a = f32_with_exponent(rng, rng.range(-150, -120)); b = f32_with_exponent(rng, rng.range(-150, 10));
                c = f32_with_exponent(rng, rng.range(-150, -120)); return;
        case 4: {  // products next to 2^-126 (rounding up into the normal range)
            switch (rng.next() % 3) {
                case 0: a = near(0x3F800000u, 8); b = near(0x00800000u, 8); break;
                case 1: a = near(0x3F000000u, 8); b = near(0x01000000u, 8); break;
                default: a = near(0x3F800000u, 8); b = 0x00800000u - (uint32_t)rng.range(1, 4); break;
            }
            a |= (uint32_t)(rng.next() & 1) << 31;
            b |= (uint32_t)(rng.next() & 1) << 31;
            c = rng.next() & 1 ? 0 : f32_with_exponent(rng, rng.range(-150, -125));
            if (rng.next() & 1) std::swap(a, b);
            return;
        }
        case 5: {  // sums of nearby tiny numbers: results subnormal or just normal
            a = near(0x00800000u + (rng.u32() & 0x1FFFFFF), 0);
            b = (a ^ 0x80000000u) + (uint32_t)rng.range(-40, 40);
            if (rng.next() & 1) b = f32_with_exponent(rng, rng.range(-149, -125)) | 0x80000000u;
            c = near(0x00800000u, 16) | ((rng.next() & 1) << 31);
            return;
        }
        case 6: a = rng.next() & 1 ? special() : rng.u32(); b = rng.next() & 1 ? special() : rng.u32();
                c = rng.next() & 1 ? special() : rng.u32(); return;
        case 7: {  // exact ties in addition: b is half an ulp of a (or an odd multiple)
            int e = rng.range(-100, 100);
            a = f32_with_exponent(rng, e) & 0xFF7FFFFFu;
            a = ((uint32_t)(e + 127) << 23) | (rng.u32() & 0x7FFFFF) | (a & 0x80000000u);
            b = ((uint32_t)(e - 24 + 127) << 23) | ((rng.next() & 1) ? 0 : 0x400000u) | ((rng.next() & 1) << 31);
            c = ((uint32_t)(e - 24 + 127) << 23) | ((rng.next() & 1) << 31);
            return;
        }
        case 8: a = f32_with_exponent(rng, rng.range(60, 127)); b = f32_with_exponent(rng, rng.range(60, 127));
                c = f32_with_exponent(rng, rng.range(120, 127)); return;
        case 9: {  // fma cancellation: c = -RN(a*b), result is the rounding error of a*b
            a = f32_with_exponent(rng, rng.range(-80, 40));
            b = f32_with_exponent(rng, rng.range(-80, 40));
            float p = float_of(a) * float_of(b);
            c = bits_of(-p);
            if (rng.next() & 1) c += (uint32_t)rng.range(-2, 2);
            return;
        }
        case 10: {  // fma landing next to 2^-126
            a = near(0x3F800000u, 8);
            b = near(0x00800000u, 8);
            c = near(0x00000010u, 16) | ((rng.next() & 1) << 31);
            if (rng.next() & 1) b |= 0x80000000u;
            return;
        }
        default: a = f32_with_exponent(rng, rng.range(-152, 127)); b = f32_with_exponent(rng, rng.range(-152, 127));
                 c = f32_with_exponent(rng, rng.range(-152, 127)); return;
    }
}

static uint16_t bf16_of_f32_truncate(uint32_t v) { return (uint16_t)(v >> 16); }

static void bf16_case(SplitMix64& rng, int category, uint16_t& a, uint16_t& b, uint16_t& c) {
    uint32_t a32, b32, c32;
    switch (category) {
        case 0: a = (uint16_t)rng.u32(); b = (uint16_t)rng.u32(); c = (uint16_t)rng.u32(); return;
        case 7: {  // ties: b is half an ulp of a (bf16 has 7 fraction bits)
            int e = rng.range(-100, 100);
            a = (uint16_t)(((e + 127) << 7) | (rng.u32() & 0x7F) | ((rng.next() & 1) << 15));
            b = (uint16_t)(((e - 8 + 127) << 7) | ((rng.next() & 1) ? 0 : 0x40) | ((rng.next() & 1) << 15));
            c = (uint16_t)(((e - 8 + 127) << 7) | ((rng.next() & 1) << 15));
            return;
        }
        case 9: {  // fma cancellation
            a = (uint16_t)(f32_with_exponent(rng, rng.range(-60, 60)) >> 16);
            b = (uint16_t)(f32_with_exponent(rng, rng.range(-60, 60)) >> 16);
            float p = float_of((uint32_t)a << 16) * float_of((uint32_t)b << 16);
            c = (uint16_t)((bits_of(-p) + 0x8000u) >> 16);
            if (rng.next() & 1) c = (uint16_t)(c + rng.range(-2, 2));
            return;
        }
        default:
            f32_case(rng, category, a32, b32, c32);
            a = bf16_of_f32_truncate(a32);
            b = bf16_of_f32_truncate(b32);
            c = bf16_of_f32_truncate(c32);
            return;
    }
}

static void cvt_case(SplitMix64& rng, int category, uint32_t& a, uint32_t& b) {
    uint32_t unused;
    switch (category) {
        case 0: {  // around bf16 ties
            static const uint32_t lows[] = {0x8000, 0x7FFF, 0x8001, 0x0000, 0xFFFF, 0x0001, 0x7FFE, 0xC000};
            a = (rng.u32() & 0xFFFF0000u) | lows[rng.next() % 8];
            b = (rng.u32() & 0xFFFF0000u) | lows[rng.next() % 8];
            return;
        }
        case 1:  // next to the overflow threshold and to FLT_MAX
            a = (0x7F7F0000u + (rng.u32() & 0xFFFF)) | ((rng.next() & 1) << 31);
            b = (0x477FE000u + (rng.u32() & 0x3FFF)) | ((rng.next() & 1) << 31);  // f16 overflow region
            return;
        case 2:  // f32 subnormals and tiny values (bf16 subnormals, f16 underflow)
            a = f32_with_exponent(rng, rng.range(-150, -110));
            b = f32_with_exponent(rng, rng.range(-30, -10));
            return;
        case 3:
            a = kF32Specials[rng.next() % (sizeof kF32Specials / 4)];
            b = kF32Specials[rng.next() % (sizeof kF32Specials / 4)];
            if (rng.next() & 1) a = 0x7F800000u | rng.u32();  // NaN payloads of either sign
            return;
        default:
            f32_case(rng, category, a, b, unused);
            return;
    }
}

static uint32_t sfu_case(SplitMix64& rng, int category) {
    switch (category) {
        case 0: return bits_of((float)(rng.u32() >> 8) * 0x1p-24f * 130.0f);            // [0,130), off the grid
        case 1: return rng.u32() % 0x43100000u;                                          // positive up to 144
        case 2: return 0x80000000u | (rng.u32() % 0x43300000u);                         // negative down to -176
        case 3: return rng.u32();                                                        // anything
        case 4: return bits_of(-125.0f) + (uint32_t)rng.range(-0x30000, 0x60000);        // the -126 switch
        case 5: return bits_of((float)rng.range(-160, 140));                             // integers
        case 6: return f32_with_exponent(rng, rng.range(-150, -1)) & 0x7FFFFFFFu;       // small positive
        case 7: return kF32Specials[rng.next() % (sizeof kF32Specials / 4)] ^ ((rng.next() & 1) << 31);
        case 8: return (0x7E800000u + (rng.u32() & 0x00FFFFFF)) | ((rng.next() & 1) << 31);  // rcp -> subnormal
        default: return f32_with_exponent(rng, rng.range(-140, 140));
    }
}

static void run_ops(const std::string& out_dir) {
    Writer w(out_dir + "/ops.bin");
    w.bytes("BXOPS01", 8);
    w.u32(4);
    w.u32(0);
    SplitMix64 rng(0x0B5C0DEull);
    {  // fp32 arithmetic
        const int n = 1 << 15;
        std::vector<uint32_t> a(n), b(n), c(n);
        for (int i = 0; i < n; ++i) f32_case(rng, i % 16, a[i], b[i], c[i]);
        uint32_t *da = to_device(a), *db = to_device(b), *dc = to_device(c), *dout;
        PROBE_CHECK(cudaMalloc(&dout, (size_t)n * kF32Outputs * 4));
        kernel_f32<<<n / 256, 256>>>(da, db, dc, dout, n);
        PROBE_CHECK(cudaDeviceSynchronize());
        std::vector<uint32_t> out = from_device(dout, (size_t)n * kF32Outputs);
        std::vector<ArraySpec> arrays = {{"a", 4, 1, a.data()}, {"b", 4, 1, b.data()}, {"c", 4, 1, c.data()}};
        for (int k = 0; k < kF32Outputs; ++k) arrays.push_back({kF32OutputNames[k], 4, 0, &out[(size_t)k * n]});
        write_section(w, "fp32 add(a,b) mul(a,b) fma(a,b,c)", n, arrays);
        log_line("ops: fp32 section, %d cases x %d instructions", n, kF32Outputs);
        cudaFree(da); cudaFree(db); cudaFree(dc); cudaFree(dout);
    }
    {  // bf16 arithmetic
        const int n = 1 << 17;
        std::vector<uint16_t> a(n), b(n), c(n);
        for (int i = 0; i < n; ++i) bf16_case(rng, i % 16, a[i], b[i], c[i]);
        uint16_t *da = to_device(a), *db = to_device(b), *dc = to_device(c), *dout;
        PROBE_CHECK(cudaMalloc(&dout, (size_t)n * 3 * 2));
        kernel_bf16<<<n / 256, 256>>>(da, db, dc, dout, n);
        PROBE_CHECK(cudaDeviceSynchronize());
        std::vector<uint16_t> out = from_device(dout, (size_t)n * 3);
        write_section(w, "bf16 add(a,b) mul(a,b) fma(a,b,c)", n,
                      {{"a", 2, 1, a.data()}, {"b", 2, 1, b.data()}, {"c", 2, 1, c.data()},
                       {"add.rn.bf16", 2, 0, &out[0]}, {"mul.rn.bf16", 2, 0, &out[n]},
                       {"fma.rn.bf16", 2, 0, &out[2 * (size_t)n]}});
        log_line("ops: bf16 section, %d cases", n);
        cudaFree(da); cudaFree(db); cudaFree(dc); cudaFree(dout);
    }
    {  // conversions
        const int n = 1 << 17;
        std::vector<uint32_t> a(n), b(n);
        for (int i = 0; i < n; ++i) cvt_case(rng, i % 16, a[i], b[i]);
        uint32_t *da = to_device(a), *db = to_device(b), *d32;
        uint16_t* d16;
        PROBE_CHECK(cudaMalloc(&d32, (size_t)n * kCvtOutputs32 * 4));
        PROBE_CHECK(cudaMalloc(&d16, (size_t)n * kCvtOutputs16 * 2));
        kernel_cvt<<<n / 256, 256>>>(da, db, d32, d16, n);
        PROBE_CHECK(cudaDeviceSynchronize());
        std::vector<uint32_t> o32 = from_device(d32, (size_t)n * kCvtOutputs32);
        std::vector<uint16_t> o16 = from_device(d16, (size_t)n * kCvtOutputs16);
        std::vector<ArraySpec> arrays = {{"a", 4, 1, a.data()}, {"b", 4, 1, b.data()}};
        for (int k = 0; k < kCvtOutputs32; ++k) arrays.push_back({kCvtNames32[k], 4, 0, &o32[(size_t)k * n]});
        for (int k = 0; k < kCvtOutputs16; ++k) arrays.push_back({kCvtNames16[k], 2, 0, &o16[(size_t)k * n]});
        write_section(w, "cvt f32 -> bf16/f16", n, arrays);
        log_line("ops: cvt section, %d cases", n);
        cudaFree(da); cudaFree(db); cudaFree(d32); cudaFree(d16);
    }
    {  // MUFU samples outside the tables
        const int n = 1 << 17;
        std::vector<uint32_t> x(n);
        for (int i = 0; i < n; ++i) x[i] = sfu_case(rng, i % 10);
        uint32_t *dx = to_device(x), *dout;
        PROBE_CHECK(cudaMalloc(&dout, (size_t)n * kSfuOutputs * 4));
        kernel_sfu<<<n / 256, 256>>>(dx, dout, n);
        PROBE_CHECK(cudaDeviceSynchronize());
        std::vector<uint32_t> out = from_device(dout, (size_t)n * kSfuOutputs);
        std::vector<ArraySpec> arrays = {{"x", 4, 1, x.data()}};
        for (int k = 0; k < kSfuOutputs; ++k) arrays.push_back({kSfuNames[k], 4, 0, &out[(size_t)k * n]});
        write_section(w, "mufu samples", n, arrays);
        log_line("ops: mufu section, %d cases", n);
        cudaFree(dx); cudaFree(dout);
    }
}
