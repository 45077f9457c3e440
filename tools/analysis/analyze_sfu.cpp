// MUFU analysis: decodes the captured ex2/rcp tables, checks their checksums,
// measures how compactly they encode (first differences, distance from the
// correctly rounded value), and replays the MUFU samples in ops.bin against
// the table models, including the non-ftz wrappers seen in the SASS.
// Build: g++ -O2 -std=c++20 -o analyze_sfu analyze_sfu.cpp
// Run:   ./analyze_sfu .captures
#include <cmath>
#include <functional>
#include <cstdio>
#include <map>
#include <string>

#include "capture_files.hpp"

static float float_of(uint32_t u) {
    float x;
    std::memcpy(&x, &u, 4);
    return x;
}
static uint32_t bits_of(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return u;
}
static bool is_nan(uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }

// The models, as verified on the GPU over all 2^32 inputs (capture_common.cuh).
static uint32_t ex2_ftz_model(uint32_t x, const std::vector<uint32_t>& m_raw, const std::vector<uint32_t>& p01) {
    uint32_t magnitude = x & 0x7FFFFFFFu;
    if (magnitude > 0x7F800000u) return 0x7FFFFFFFu;
    if (x >> 31) {
        if (magnitude >= 0x43800000u) return 0;
        uint32_t q = (uint32_t)(float_of(magnitude) * 8388608.0f);
        uint32_t g = m_raw[q & 0x7FFFFF] + (1u << 23);
        int e = (int)(g >> 23) - (int)(q >> 23);
        return e <= 0 ? 0 : (g & 0x807FFFFFu) | ((uint32_t)e << 23);
    }
    if (x >= 0x43000000u) return 0x7F800000u;
    uint32_t q = (uint32_t)(float_of(x) * 8388608.0f);
    uint32_t v = p01[q & 0x7FFFFF];
    int e = (int)(v >> 23) + (int)(q >> 23);
    return e >= 255 ? 0x7F800000u : (v & 0x807FFFFFu) | ((uint32_t)e << 23);
}
static uint32_t rcp_ftz_model(uint32_t x, const std::vector<uint32_t>& r12) {
    uint32_t sign = x & 0x80000000u, magnitude = x & 0x7FFFFFFFu;
    if (magnitude > 0x7F800000u) return 0x7FFFFFFFu;
    if (magnitude == 0x7F800000u) return sign;
    if (magnitude < 0x00800000u) return sign | 0x7F800000u;
    uint32_t v = r12[magnitude & 0x7FFFFF];
    int e = (int)(v >> 23) - ((int)(magnitude >> 23) - 127);
    if (e <= 0) return sign;
    if (e >= 255) return sign | 0x7F800000u;
    return sign | (v & 0x7FFFFFu) | ((uint32_t)e << 23);
}
// SASS of ex2.approx.f32: FSETP.GEU P, x, -126; FSEL x' = P ? x : x*0.5; MUFU.EX2; @!P FMUL r, r, r.
static uint32_t ex2_model(uint32_t x, const std::vector<uint32_t>& m_raw, const std::vector<uint32_t>& p01) {
    float xf = float_of(x);
    if (xf < -126.0f) {
        float t = float_of(ex2_ftz_model(bits_of(xf * 0.5f), m_raw, p01));
        return bits_of(t * t);
    }
    return ex2_ftz_model(x, m_raw, p01);
}
// SASS of rcp.approx.f32: s = |x| > 2^126 ? 0.25 : (|x| < 2^-126 ? 2^24 : 1); r = s * MUFU.RCP(x * s).
static uint32_t rcp_model(uint32_t x, const std::vector<uint32_t>& r12) {
    float xf = float_of(x);
    float s = std::fabs(xf) > 0x1p126f ? 0.25f : (std::fabs(xf) < 0x1p-126f ? 0x1p24f : 1.0f);
    float r = float_of(rcp_ftz_model(bits_of(xf * s), r12));
    return bits_of(s * r);
}

static void table_statistics(const char* name, const std::vector<uint32_t>& v, double (*exact)(double),
                             double (*input)(uint32_t)) {
    std::map<long long, long> deltas, errors;
    for (size_t i = 1; i < v.size(); ++i) deltas[(long long)v[i] - (long long)v[i - 1]]++;
    long long first_odd = -1;
    for (size_t i = 1; i < v.size(); ++i) {
        long long d = (long long)v[i] - (long long)v[i - 1];
        if ((d == 3 || d == -3) && first_odd < 0) first_odd = (long long)i;
    }
    for (size_t i = 0; i < v.size(); ++i) {
        // correctly rounded float of the exact value (long double evaluation, then RN to float)
        float cr = (float)exact(input((uint32_t)i));
        errors[(long long)v[i] - (long long)bits_of(cr)]++;
    }
    double entropy_d = 0, entropy_e = 0, n = (double)v.size();
    for (auto& [d, c] : deltas) entropy_d -= c / n * std::log2(c / n);
    for (auto& [d, c] : errors) entropy_e -= c / n * std::log2(c / n);
    std::printf("  %s\n    first differences:", name);
    for (auto& [d, c] : deltas) std::printf(" %lld:%ld", d, c);
    std::printf("  (entropy %.3f bits/entry; |delta|=3 first at k=%lld)\n    value - RN(exact) in ulps:", entropy_d,
                first_odd);
    for (auto& [d, c] : errors) std::printf(" %lld:%ld", d, c);
    std::printf("  (entropy %.3f bits/entry)\n", entropy_e);
}

int main(int argc, char** argv) {
    std::string dir = argc > 1 ? argv[1] : ".captures";
    auto a = capture::read_tables(dir + "/sfu_tables_a.bin");
    auto b = capture::read_tables(dir + "/sfu_tables_b.bin");
    std::printf("== tables\n");
    for (auto* tables : {&a, &b})
        for (auto& t : *tables)
            std::printf("  %-50s %zu entries, checksum %s, first %08x last %08x\n", t.name.c_str(), t.values.size(),
                        t.checksum_ok ? "ok" : "BAD", t.values.front(), t.values.back());
    const std::vector<uint32_t>&m_raw = a[0].values, &p01 = a[1].values, &p12 = b[0].values, &r12 = b[1].values;
    // G(k) = 2*m_raw[k] = ex2-table for 2^(-k/2^23)
    std::vector<uint32_t> g(m_raw.size());
    for (size_t k = 0; k < g.size(); ++k) g[k] = m_raw[k] + (1u << 23);
    long p12_is_2p01 = 0, g_vs_p = 0;
    for (size_t k = 0; k < p01.size(); ++k) {
        p12_is_2p01 += p12[k] == p01[k] + (1u << 23);
        if (k) g_vs_p += p01[k] == g[(1u << 23) - k] + (1u << 23);
    }
    std::printf("  ex2(1+k/2^23) == 2*ex2(k/2^23): %ld of %zu\n", p12_is_2p01, p01.size());
    std::printf("  ex2(k/2^23) == 2*G(2^23-k) (k>0): %ld of %zu\n", g_vs_p, p01.size() - 1);
    long monotone_g = 0, monotone_r = 0;
    for (size_t k = 1; k < g.size(); ++k) {
        monotone_g += g[k] <= g[k - 1];
        monotone_r += r12[k] <= r12[k - 1];
    }
    std::printf("  G non-increasing steps: %ld of %zu; R non-increasing steps: %ld\n", monotone_g, g.size() - 1,
                monotone_r);
    std::printf("== encodings\n");
    table_statistics("G(k) = 2^(-k/2^23) table", g, [](double t) { return (double)exp2l(-(long double)t); },
                     [](uint32_t k) { return (double)k * 0x1p-23; });
    table_statistics("P(k) = ex2(k/2^23) table", p01, [](double t) { return (double)exp2l((long double)t); },
                     [](uint32_t k) { return (double)k * 0x1p-23; });
    table_statistics("R(k) = rcp(1+k/2^23) table", r12, [](double t) { return (double)(1.0L / (long double)t); },
                     [](uint32_t k) { return 1.0 + (double)k * 0x1p-23; });

    capture::Ops ops = capture::read_ops(dir + "/ops.bin");
    const capture::Section& s = ops.section("mufu");
    const capture::Array& x = s.array("x");
    struct Check {
        const char* name;
        std::function<uint32_t(uint32_t)> model;
    };
    const char* names[4] = {"ex2.approx.ftz.f32", "ex2.approx.f32", "rcp.approx.ftz.f32", "rcp.approx.f32"};
    std::printf("== MUFU samples (%u inputs: off-grid positives, the -126 switch, subnormals, specials)\n", s.count);
    for (int which = 0; which < 4; ++which) {
        const capture::Array& out = s.array(names[which]);
        long wrong = 0;
        int shown = 0;
        for (uint32_t i = 0; i < s.count; ++i) {
            uint32_t in = x.at(i), got = out.at(i), want;
            switch (which) {
                case 0: want = ex2_ftz_model(in, m_raw, p01); break;
                case 1: want = ex2_model(in, m_raw, p01); break;
                case 2: want = rcp_ftz_model(in, r12); break;
                default: want = rcp_model(in, r12); break;
            }
            bool ok = is_nan(want) ? got == 0x7FFFFFFFu : got == want;
            if (!ok) {
                ++wrong;
                if (shown++ < 5) std::printf("    %s x=%08x got=%08x model=%08x\n", names[which], in, got, want);
            }
        }
        std::printf("  %-20s model mismatches %ld / %u (NaN results compared as 0x7FFFFFFF)\n", names[which], wrong,
                    s.count);
    }
    // a few named values
    std::printf("  ex2.approx.f32(-127) = %08x, ex2.approx.f32(-149) = %08x, ex2.approx.f32(-126.5) = %08x\n",
                ex2_model(bits_of(-127.0f), m_raw, p01), ex2_model(bits_of(-149.0f), m_raw, p01),
                ex2_model(bits_of(-126.5f), m_raw, p01));
    return 0;
}
