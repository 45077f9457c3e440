// Shared pieces of the capture program: inline-PTX wrappers for the
// instructions being captured, the table models that the GPU-side sweeps
// test, and the little-endian writers for the capture files.
// The file layouts are documented in cuda/capture/README.md.
#pragma once

#include <cstdarg>
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
__device__ __forceinline__ float lg2_approx_ftz(float x) {
    float y;
    asm volatile("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float lg2_approx(float x) {
    float y;
    asm volatile("lg2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
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

// Every line of the run's log goes to stdout and to info_file (the capture's
// info.txt) when one is open.
inline FILE* info_file = nullptr;

inline void log_line(const char* fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::vfprintf(stdout, fmt, args);
    va_end(args);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (info_file) {
        va_start(args, fmt);
        std::vfprintf(info_file, fmt, args);
        va_end(args);
        std::fputc('\n', info_file);
        std::fflush(info_file);
    }
}

// ---- the start every capture program shares ----
__global__ void kernel_probe(int* out) { *out = 42; }

// Parses "OUT_DIR [--probe]". With --probe, exits at once with whether this
// binary runs on this driver (0) or not; otherwise opens OUT_DIR/info.txt
// (appending to the header run_capture.sh wrote) and logs the device.
inline std::string start_capture(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s OUT_DIR [--probe]\n", argv[0]);
        std::exit(1);
    }
    std::string out_dir = argv[1];
    if (argc > 2 && std::string(argv[2]) == "--probe") {
        int* d;
        int h = 0;
        PROBE_CHECK(cudaMalloc(&d, 4));
        kernel_probe<<<1, 1>>>(d);
        PROBE_CHECK(cudaMemcpy(&h, d, 4, cudaMemcpyDeviceToHost));
        std::exit(h == 42 ? 0 : 4);
    }
    info_file = std::fopen((out_dir + "/info.txt").c_str(), "a");
    cudaDeviceProp prop;
    PROBE_CHECK(cudaGetDeviceProperties(&prop, 0));
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    log_line("device: %s sm_%d%d, %d SMs, driver API %d, runtime %d", prop.name, prop.major, prop.minor,
             prop.multiProcessorCount, driver, runtime);
    return out_dir;
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

// Specials every scalar capture includes (zeros, infinities, NaNs of both
// signs and several payloads, extremes of each range, +-1).
static const uint32_t kF32Specials[] = {0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
                                        0x7F800001, 0xFFBFFFFF, 0x7FFFFFFF, 0x7FC12345, 0x7F7FFFFF, 0xFF7FFFFF,
                                        0x00800000, 0x80800000, 0x00000001, 0x80000001, 0x007FFFFF, 0x3F800000,
                                        0xBF800000, 0x7FA00000};

// A step between consecutive table values that a BXTAB01 nibble holds; any
// other (and entry 0) is written as an exception.
inline bool step_fits_nibble(long long step) { return step >= -7 && step <= 7; }

// The bytes write_table will write for v, to plan how tables share files.
inline size_t encoded_table_bytes(const std::vector<uint32_t>& v) {
    size_t exceptions = 1;
    for (size_t i = 1; i < v.size(); ++i) exceptions += !step_fits_nibble((long long)v[i] - (long long)v[i - 1]);
    return 64 + 4 + 4 + 8 + 4 + 4 + v.size() / 2 + 8 * exceptions;
}

// Delta-encodes one table: nibble i is bits[i]-bits[i-1] as a signed 4-bit value;
// the nibble value 8 (-8) means "next exception entry" (index, value) instead.
static void write_table(Writer& w, const char* name, const std::vector<uint32_t>& v) {
    const size_t n = v.size();
    std::vector<uint8_t> nibbles(n / 2, 0);
    std::vector<uint32_t> exceptions;
    long long histogram[17] = {};  // deltas -8..8, clamped
    long long min_delta = 1ll << 40, max_delta = -(1ll << 40);
    for (size_t i = 0; i < n; ++i) {
        long long delta = i == 0 ? 1000 : (long long)v[i] - (long long)v[i - 1];
        if (i) {
            min_delta = delta < min_delta ? delta : min_delta;
            max_delta = delta > max_delta ? delta : max_delta;
            histogram[(delta < -8 ? -8 : delta > 8 ? 8 : delta) + 8]++;
        }
        uint8_t code;
        if (step_fits_nibble(delta)) {
            code = (uint8_t)(delta & 0xF);
        } else {
            code = 0x8;
            exceptions.push_back((uint32_t)i);
            exceptions.push_back(v[i]);
        }
        nibbles[i / 2] |= (uint8_t)(code << ((i & 1) * 4));
    }
    uint64_t checksum = bitexact::fnv1a64_of_values(v.data(), n);
    w.name(name, 64);
    w.u32((uint32_t)n);
    w.u32((uint32_t)(exceptions.size() / 2));
    w.u64(checksum);
    w.u32((uint32_t)(int32_t)min_delta);
    w.u32((uint32_t)(int32_t)max_delta);
    w.bytes(nibbles.data(), nibbles.size());
    w.bytes(exceptions.data(), exceptions.size() * 4);
    log_line("table %-40s n=%zu exceptions=%zu fnv1a64=%016llx delta[min,max]=[%lld,%lld]", name, n,
             exceptions.size() / 2, (unsigned long long)checksum, min_delta, max_delta);
    char line[512];
    int pos = std::snprintf(line, sizeof line, "   delta histogram (-8..8, ends clamped):");
    for (int d = 0; d < 17; ++d)
        if (histogram[d]) pos += std::snprintf(line + pos, sizeof line - pos, " %d:%lld", d - 8, histogram[d]);
    log_line("%s", line);
}

// ---------------- ops.bin writer ----------------
struct ArraySpec {
    std::string name;
    uint32_t element_bytes, is_input;
    const void* data;
};
static void write_section(Writer& w, const char* name, uint32_t count, const std::vector<ArraySpec>& arrays) {
    w.name(name, 48);
    w.u32(count);
    w.u32((uint32_t)arrays.size());
    for (const ArraySpec& s : arrays) {
        w.name(s.name.c_str(), 40);
        w.u32(s.element_bytes);
        w.u32(s.is_input);
    }
    for (const ArraySpec& s : arrays) w.bytes(s.data, (size_t)count * s.element_bytes);
}

template <typename T>
static T* to_device(const std::vector<T>& v) {
    T* d;
    PROBE_CHECK(cudaMalloc(&d, v.size() * sizeof(T)));
    PROBE_CHECK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}
template <typename T>
static std::vector<T> from_device(const T* d, size_t n) {
    std::vector<T> v(n);
    PROBE_CHECK(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
}
