// MUFU captures: the four 2^23-entry tables (written delta-encoded), the
// GPU-side sweeps over all 2^32 inputs that count mismatches against the
// table models, and the table-independent samples (written by capture_ops).
#pragma once

#include "capture_common.cuh"

enum TableId { kTableEx2Neg = 0, kTableEx2Pos01 = 1, kTableEx2Pos12 = 2, kTableRcp12 = 3, kTableCount = 4 };

__global__ void kernel_tables(uint32_t* m_raw, uint32_t* p01, uint32_t* p12, uint32_t* r12) {
    uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= (1u << 23)) return;
    m_raw[k] = bits_of(ex2_approx_ftz(float_of(0xBF800000u + k)));  // x = -1 - k*2^-23
    p01[k] = bits_of(ex2_approx_ftz((float)k * 0x1p-23f));           // x = k*2^-23
    p12[k] = bits_of(ex2_approx_ftz(float_of(0x3F800000u + k)));      // x = 1 + k*2^-23
    r12[k] = bits_of(rcp_approx_ftz(float_of(0x3F800000u + k)));      // x = 1 + k*2^-23
}

// Sweep models, each over a stated input domain.
enum SweepModel {
    kSweepEx2FtzNeg = 0,      // ex2.approx.ftz, sign bit set: lead's table model
    kSweepEx2FtzPosP,         // ex2.approx.ftz, sign clear: p01 table scaled by 2^int
    kSweepEx2FtzPosG,         // ex2.approx.ftz, sign clear: from the negative table
    kSweepEx2WrapTable,       // ex2.approx (non-ftz), all x: wrapper around the table models
    kSweepEx2WrapReal,        // ex2.approx (non-ftz), all x: wrapper around the real ftz instruction
    kSweepEx2FullVsFtz,       // all x: ex2.approx != ex2.approx.ftz (informative)
    kSweepRcpFtz,             // rcp.approx.ftz, all x: r12 table scaled by 2^-e
    kSweepRcpFullVsFtz,       // all x: rcp.approx != rcp.approx.ftz (informative)
    kSweepCount
};
static const char* kSweepNames[kSweepCount] = {
    "ex2.approx.ftz.f32 x<=-0 (sign set) vs table model M(x)=G(k)*2^-n",
    "ex2.approx.ftz.f32 x>=+0 vs P-table model P(k)*2^n, P(k)=ex2(k*2^-23)",
    "ex2.approx.ftz.f32 x>=+0 vs G-derived model 2*G(2^23-k)*2^n",
    "ex2.approx.f32 all x vs wrapper(x<-126 ? RN(T(x/2)^2) : T(x)), T=table models",
    "ex2.approx.f32 all x vs wrapper(x<-126 ? RN(F(x/2)^2) : F(x)), F=real ex2.approx.ftz",
    "ex2.approx.f32 vs ex2.approx.ftz.f32 differ (informative)",
    "rcp.approx.ftz.f32 all x vs table model R(mant)*2^-e",
    "rcp.approx.f32 vs rcp.approx.ftz.f32 differ (informative)",
};
constexpr int kSweepSamples = 64;

struct SweepState {
    unsigned long long compared[kSweepCount];
    unsigned long long mismatches[kSweepCount];
    unsigned long long per_binade[kSweepCount][512];  // by input bits >> 23 (sign and exponent field)
    unsigned int sample_count[kSweepCount];
    uint32_t samples[kSweepCount][kSweepSamples][3];  // input, got, model
    unsigned long long nan_out_not_canonical[4];     // ex2.ftz, ex2, rcp.ftz, rcp: NaN results != 0x7FFFFFFF
    uint32_t nan_out_example[4];
};

// Mismatches are counted in a per-block shared histogram so that a badly wrong
// candidate model costs shared-memory atomics, not 2^31 contended global ones.
__device__ inline void sweep_record(SweepState* s, unsigned int (*hist)[512], int model, uint32_t x, uint32_t got,
                                    uint32_t expect, unsigned long long& compared_local) {
    ++compared_local;
    bool mismatch = is_nan_bits32(expect) ? !is_nan_bits32(got) : got != expect;
    if (!mismatch) return;
    atomicAdd(&hist[model][x >> 23], 1u);
    if (*(volatile unsigned int*)&s->sample_count[model] >= kSweepSamples) return;
    unsigned int slot = atomicAdd(&s->sample_count[model], 1u);
    if (slot < kSweepSamples) {
        s->samples[model][slot][0] = x;
        s->samples[model][slot][1] = got;
        s->samples[model][slot][2] = expect;
    }
}

__device__ inline void nan_census(SweepState* s, int which, uint32_t got) {
    if (is_nan_bits32(got) && got != 0x7FFFFFFFu) {
        atomicAdd(&s->nan_out_not_canonical[which], 1ull);
        s->nan_out_example[which] = got;
    }
}

__global__ void kernel_sweep(const uint32_t* m_raw, const uint32_t* p01, const uint32_t* r12, SweepState* s) {
    __shared__ unsigned int hist[kSweepCount][512];
    for (int i = threadIdx.x; i < kSweepCount * 512; i += blockDim.x) hist[i / 512][i % 512] = 0;
    __syncthreads();
    unsigned long long local[kSweepCount] = {};
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32); i += stride) {
        uint32_t x = (uint32_t)i;
        float xf = float_of(x);
        uint32_t ftz = bits_of(ex2_approx_ftz(xf));
        uint32_t full = bits_of(ex2_approx(xf));
        uint32_t rftz = bits_of(rcp_approx_ftz(xf));
        uint32_t rfull = bits_of(rcp_approx(xf));
        nan_census(s, 0, ftz);
        nan_census(s, 1, full);
        nan_census(s, 2, rftz);
        nan_census(s, 3, rfull);

        uint32_t table_value;
        if (x >> 31) {
            table_value = model_ex2_ftz_negative(x, m_raw);
            sweep_record(s, hist, kSweepEx2FtzNeg, x, ftz, table_value, local[kSweepEx2FtzNeg]);
        } else {
            table_value = model_ex2_ftz_positive_p(x, p01);
            sweep_record(s, hist, kSweepEx2FtzPosP, x, ftz, table_value, local[kSweepEx2FtzPosP]);
            sweep_record(s, hist, kSweepEx2FtzPosG, x, ftz, model_ex2_ftz_positive_g(x, m_raw),
                         local[kSweepEx2FtzPosG]);
        }
        // Wrapper: FSETP.GEU x, -126 then, for x < -126 (ordered), halve, MUFU, square.
        uint32_t wrap_table, wrap_real;
        if (xf < -126.0f) {
            float half = __fmul_rn(xf, 0.5f);
            float t = float_of(model_ex2_ftz_negative(bits_of(half), m_raw));
            wrap_table = bits_of(__fmul_rn(t, t));
            float r = ex2_approx_ftz(half);
            wrap_real = bits_of(__fmul_rn(r, r));
        } else {
            wrap_table = table_value;
            wrap_real = ftz;
        }
        sweep_record(s, hist, kSweepEx2WrapTable, x, full, wrap_table, local[kSweepEx2WrapTable]);
        sweep_record(s, hist, kSweepEx2WrapReal, x, full, wrap_real, local[kSweepEx2WrapReal]);
        sweep_record(s, hist, kSweepEx2FullVsFtz, x, full, ftz, local[kSweepEx2FullVsFtz]);
        sweep_record(s, hist, kSweepRcpFtz, x, rftz, model_rcp_ftz(x, r12), local[kSweepRcpFtz]);
        sweep_record(s, hist, kSweepRcpFullVsFtz, x, rfull, rftz, local[kSweepRcpFullVsFtz]);
    }
    for (int m = 0; m < kSweepCount; ++m) atomicAdd(&s->compared[m], local[m]);
    __syncthreads();
    for (int i = threadIdx.x; i < kSweepCount * 512; i += blockDim.x) {
        unsigned int count = hist[i / 512][i % 512];
        if (count) {
            atomicAdd(&s->per_binade[i / 512][i % 512], (unsigned long long)count);
            atomicAdd(&s->mismatches[i / 512], (unsigned long long)count);
        }
    }
}

static void run_sfu(const std::string& out_dir) {
    const size_t n = 1u << 23;
    uint32_t *d_m, *d_p01, *d_p12, *d_r12;
    PROBE_CHECK(cudaMalloc(&d_m, n * 4));
    PROBE_CHECK(cudaMalloc(&d_p01, n * 4));
    PROBE_CHECK(cudaMalloc(&d_p12, n * 4));
    PROBE_CHECK(cudaMalloc(&d_r12, n * 4));
    kernel_tables<<<n / 256, 256>>>(d_m, d_p01, d_p12, d_r12);
    PROBE_CHECK(cudaDeviceSynchronize());
    std::vector<uint32_t> m(n), p01(n), p12(n), r12(n);
    PROBE_CHECK(cudaMemcpy(m.data(), d_m, n * 4, cudaMemcpyDeviceToHost));
    PROBE_CHECK(cudaMemcpy(p01.data(), d_p01, n * 4, cudaMemcpyDeviceToHost));
    PROBE_CHECK(cudaMemcpy(p12.data(), d_p12, n * 4, cudaMemcpyDeviceToHost));
    PROBE_CHECK(cudaMemcpy(r12.data(), d_r12, n * 4, cudaMemcpyDeviceToHost));
    {
        Writer w(out_dir + "/sfu_tables_a.bin");
        w.bytes("BXTAB01", 8);
        w.u32(2);
        w.u32(0);
        write_table(w, "ex2.approx.ftz.f32(bits 0xBF800000+k) [= G(k)/2]", m);
        write_table(w, "ex2.approx.ftz.f32((float)k*2^-23)", p01);
    }
    {
        Writer w(out_dir + "/sfu_tables_b.bin");
        w.bytes("BXTAB01", 8);
        w.u32(2);
        w.u32(0);
        write_table(w, "ex2.approx.ftz.f32(bits 0x3F800000+k)", p12);
        write_table(w, "rcp.approx.ftz.f32(bits 0x3F800000+k)", r12);
    }

    SweepState* d_state;
    PROBE_CHECK(cudaMalloc(&d_state, sizeof(SweepState)));
    PROBE_CHECK(cudaMemset(d_state, 0, sizeof(SweepState)));
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start);
    kernel_sweep<<<132 * 8, 256>>>(d_m, d_p01, d_r12, d_state);
    cudaEventRecord(stop);
    PROBE_CHECK(cudaDeviceSynchronize());
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    SweepState* s = new SweepState;
    PROBE_CHECK(cudaMemcpy(s, d_state, sizeof(SweepState), cudaMemcpyDeviceToHost));
    log_line("== GPU sweeps over all 2^32 input bit patterns (%.1f ms) ==", ms);
    for (int model = 0; model < kSweepCount; ++model) {
        log_line("sweep %d: %s: compared %llu mismatches %llu", model, kSweepNames[model], s->compared[model],
                 s->mismatches[model]);
        if (!s->mismatches[model]) continue;
        char line[8192];
        int pos = std::snprintf(line, sizeof line, "   mismatches by input bits>>23 (sign|exp):");
        int shown = 0;
        for (int b = 0; b < 512 && pos < 7900; ++b)
            if (s->per_binade[model][b]) {
                pos += std::snprintf(line + pos, sizeof line - pos, " %03x:%llu", b, s->per_binade[model][b]);
                ++shown;
            }
        log_line("%s", line);
        unsigned count = s->sample_count[model] < kSweepSamples ? s->sample_count[model] : kSweepSamples;
        for (unsigned i = 0; i < count && i < 24; ++i)
            log_line("   x=%08x (%.9g) got=%08x (%.9g) model=%08x (%.9g)", s->samples[model][i][0],
                     float_of(s->samples[model][i][0]), s->samples[model][i][1], float_of(s->samples[model][i][1]),
                     s->samples[model][i][2], float_of(s->samples[model][i][2]));
    }
    const char* nan_names[4] = {"ex2.approx.ftz", "ex2.approx", "rcp.approx.ftz", "rcp.approx"};
    for (int i = 0; i < 4; ++i)
        log_line("NaN outputs of %s other than 0x7FFFFFFF: %llu (example %08x)", nan_names[i],
                 s->nan_out_not_canonical[i], s->nan_out_example[i]);
    delete s;
    cudaFree(d_state);
    cudaFree(d_m);
    cudaFree(d_p01);
    cudaFree(d_p12);
    cudaFree(d_r12);
}
