// Shared pieces of the capture program: inline-PTX wrappers for the
// instructions being captured, the table models that the GPU-side sweeps
// test, and the little-endian writers for the capture files.
// The file layouts are documented in cuda/capture/README.md.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "../../include/bitexact/core/checksum.hpp"  // bitexact::fnv1a64_of_values, the tables' checksum
#include "../probe_common.cuh"


__host__ __device__ inline uint32_t bits_of(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return u;
}
__host__ __device__ inline float float_of(uint32_t u) {
    float x;
    std::memcpy(&x, &u, 4);
    return x;
}
__host__ __device__ inline bool is_nan_bits32(uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }

// ---- the instructions under study (volatile so that nothing is folded) ----
__device__ __forceinline__ float ex2_approx_ftz(float x) {
    float y;
    asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float ex2_approx(float x) {
    float y;
    asm volatile("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float rcp_approx_ftz(float x) {
    float y;
    asm volatile("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float rcp_approx(float x) {
    float y;
    asm volatile("rcp.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// ---- table models (the hypotheses the sweeps count mismatches against) ----
// A returned value with is_nan_bits32() true means "any NaN is a match".
constexpr uint32_t kAnyNaN = 0x7FFFFFFFu;

// Lead's model for ex2.approx.ftz.f32 at x with the sign bit set.
// m_raw[k] = raw ex2.approx.ftz(-1 - k*2^-23), so G(k) = 2*m_raw[k].
__host__ __device__ inline uint32_t model_ex2_ftz_negative(uint32_t x_bits, const uint32_t* m_raw) {
    uint32_t magnitude = x_bits & 0x7FFFFFFFu;
    if (magnitude > 0x7F800000u) return kAnyNaN;
    if (magnitude >= 0x43800000u) return 0;  // |x| >= 256 (and -inf): far below 2^-126
    float m = float_of(magnitude);
    uint32_t q = (uint32_t)(m * 8388608.0f);  // exact scaling, truncation toward zero
    uint32_t n = q >> 23, k = q & 0x7FFFFFu;
    uint32_t g = m_raw[k] + (1u << 23);
    int exponent = (int)((g >> 23) & 0xFF) - (int)n;
    if (exponent <= 0) return 0;
    return (g & 0x807FFFFFu) | ((uint32_t)exponent << 23);
}

// Candidate model for x >= +0: p[k] = raw ex2.approx.ftz(k*2^-23), result p[frac] * 2^int.
__host__ __device__ inline uint32_t model_ex2_ftz_positive_p(uint32_t x_bits, const uint32_t* p) {
    if (x_bits > 0x7F800000u) return kAnyNaN;
    if (x_bits >= 0x43000000u) return 0x7F800000u;  // x >= 128
    float x = float_of(x_bits);
    uint32_t q = (uint32_t)(x * 8388608.0f);
    uint32_t n = q >> 23, k = q & 0x7FFFFFu;
    uint32_t v = p[k];
    int exponent = (int)((v >> 23) & 0xFF) + (int)n;
    if (exponent >= 255) return 0x7F800000u;
    return (v & 0x807FFFFFu) | ((uint32_t)exponent << 23);
}

// Candidate model for x >= +0 from the negative table: 2^f = 2*G(2^23-k) = 4*m_raw[2^23-k].
__host__ __device__ inline uint32_t model_ex2_ftz_positive_g(uint32_t x_bits, const uint32_t* m_raw) {
    if (x_bits > 0x7F800000u) return kAnyNaN;
    if (x_bits >= 0x43000000u) return 0x7F800000u;
    float x = float_of(x_bits);
    uint32_t q = (uint32_t)(x * 8388608.0f);
    uint32_t n = q >> 23, k = q & 0x7FFFFFu;
    uint32_t v = (k == 0) ? 0x3F800000u : m_raw[(1u << 23) - k] + (2u << 23);
    int exponent = (int)((v >> 23) & 0xFF) + (int)n;
    if (exponent >= 255) return 0x7F800000u;
    return (v & 0x807FFFFFu) | ((uint32_t)exponent << 23);
}

// Candidate model for rcp.approx.ftz.f32: r[k] = raw rcp(1 + k*2^-23), scaled by the exponent.
__host__ __device__ inline uint32_t model_rcp_ftz(uint32_t x_bits, const uint32_t* r) {
    uint32_t sign = x_bits & 0x80000000u, magnitude = x_bits & 0x7FFFFFFFu;
    if (magnitude > 0x7F800000u) return kAnyNaN;
    if (magnitude == 0x7F800000u) return sign;
    if (magnitude < 0x00800000u) return sign | 0x7F800000u;  // zero or flushed subnormal
    int unbiased = (int)(magnitude >> 23) - 127;
    uint32_t v = r[magnitude & 0x7FFFFFu];
    int exponent = (int)((v >> 23) & 0xFF) - unbiased;
    if (exponent <= 0) return sign;
    if (exponent >= 255) return sign | 0x7F800000u;
    return sign | (v & 0x007FFFFFu) | ((uint32_t)exponent << 23);
}

// ---- file writing ----
struct Writer {
    FILE* file = nullptr;
    explicit Writer(const std::string& path) {
        file = std::fopen(path.c_str(), "wb");
        if (!file) {
            std::perror(path.c_str());
            std::exit(3);
        }
    }
    ~Writer() {
        if (file) std::fclose(file);
    }
    void bytes(const void* data, size_t n) { std::fwrite(data, 1, n, file); }
    void u32(uint32_t v) { bytes(&v, 4); }  // the host is little-endian x86-64
    void u64(uint64_t v) { bytes(&v, 8); }
    void name(const char* s, size_t width) {
        std::vector<char> buf(width, 0);
        std::strncpy(buf.data(), s, width - 1);
        bytes(buf.data(), width);
    }
};

struct SplitMix64 {
    uint64_t state;
    explicit SplitMix64(uint64_t seed) : state(seed) {}
    uint64_t next() {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    uint32_t u32() { return (uint32_t)(next() >> 32); }
    int range(int lo, int hi) { return lo + (int)(next() % (uint64_t)(hi - lo + 1)); }  // inclusive
    bool chance(int one_in) { return next() % (uint64_t)one_in == 0; }
};
