// Fits a fused multi-term adder model to the tensor-core captures: each
// product exact, every term cut (toward zero) to F fraction bits below the
// largest term exponent, an exact sum, one final rounding. Prints mismatch
// counts per tile class for a grid of model variants.
// Build: g++ -O2 -std=c++20 -o analyze_mma analyze_mma.cpp
// Run:   ./analyze_mma .captures/mma_bf16_f32.bin [more files]
#include <algorithm>
#include <climits>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "capture_files.hpp"

struct Format {
    int exponent_bits, mantissa_bits, bias;
    int emin() const { return 1 - bias; }
    uint32_t max_field() const { return (1u << exponent_bits) - 1; }
};
static const Format kBf16{8, 7, 127}, kF16{5, 10, 15}, kF32{8, 23, 127};

enum Kind { kZero, kFinite, kInf, kNaN };
struct Value {
    Kind kind;
    bool negative;
    uint64_t significand;  // integer, value = significand * 2^lsb_exponent
    int lsb_exponent;
    int exponent;  // unbiased exponent of the leading significand position (emin for subnormals)
};
static Value decode(uint32_t bits, const Format& f) {
    Value v{};
    v.negative = (bits >> (f.exponent_bits + f.mantissa_bits)) & 1;
    uint32_t field = (bits >> f.mantissa_bits) & f.max_field();
    uint32_t mantissa = bits & ((1u << f.mantissa_bits) - 1);
    if (field == f.max_field()) {
        v.kind = mantissa ? kNaN : kInf;
        return v;
    }
    if (field == 0 && mantissa == 0) {
        v.kind = kZero;
        return v;
    }
    v.kind = kFinite;
    v.exponent = field ? (int)field - f.bias : f.emin();
    v.significand = field ? (mantissa | (1u << f.mantissa_bits)) : mantissa;
    v.lsb_exponent = v.exponent - f.mantissa_bits;
    return v;
}

enum Rounding { kRZ, kRN };
struct Model {
    int fraction_bits = 25;      // F
    int zero_exponent = -133;    // exponent given to zero terms (INT_MIN/2: ignored)
    bool zero_c_counts = true;   // does a zero C take part in e_max?
    Rounding rounding = kRZ;     // final rounding
    bool overflow_saturates = false;  // RZ overflow gives max finite instead of inf
    int chunk = 16;              // products per fused step (8: two chained steps)
    bool normalized_products = false;  // product exponent after normalising to [1,2)
    int f16_path = 0;            // f16 output: 0 direct, 1 via f32 RZ then RN to f16
    std::string name() const {
        char s[200];
        std::snprintf(s, sizeof s, "F=%d zero_exp=%s%s %s chunk=%d%s%s%s", fraction_bits,
                      zero_exponent < -100000 ? "none" : std::to_string(zero_exponent).c_str(),
                      zero_c_counts ? "" : "(C zero excluded)", rounding == kRZ ? "RZ" : "RN", chunk,
                      normalized_products ? " normprod" : "", overflow_saturates ? " sat" : "",
                      f16_path ? " f16-via-f32" : "");
        return s;
    }
};

// Rounds (-1)^negative * magnitude * 2^exponent to format f.
static uint32_t round_pack(bool negative, uint64_t magnitude, int exponent, const Format& f, Rounding mode,
                           bool saturate) {
    uint32_t sign = negative ? 1u << (f.exponent_bits + f.mantissa_bits) : 0;
    if (magnitude == 0) return sign;
    int msb = 63 - __builtin_clzll(magnitude);
    int lead = msb + exponent;
    int quantum = (lead < f.emin() ? f.emin() : lead) - f.mantissa_bits;
    int shift = quantum - exponent;
    uint64_t q;
    if (shift <= 0) {
        q = magnitude << -shift;
    } else {
        uint64_t rest;
        if (shift >= 64) {
            q = 0;
            rest = magnitude;
        } else {
            q = magnitude >> shift;
            rest = magnitude & ((1ull << shift) - 1);
        }
        if (mode == kRN && shift <= 64) {
            uint64_t half = 1ull << (shift - 1);
            if (rest > half || (rest == half && (q & 1))) ++q;
        }
    }
    uint64_t bits;
    if (lead < f.emin()) {
        bits = q;  // subnormal (q = 2^mantissa_bits becomes the minimum normal)
    } else {
        bits = ((uint64_t)(lead + f.bias - 1) << f.mantissa_bits) + q;
    }
    uint64_t inf = (uint64_t)f.max_field() << f.mantissa_bits;
    if (bits >= inf) bits = (mode == kRZ && saturate) ? inf - 1 : inf;
    return sign | (uint32_t)bits;
}

struct Term {
    Kind kind;
    bool negative;
    uint64_t significand;
    int lsb_exponent, exponent;
};

// One fused step over `terms`; returns accumulator bits in format out.
static uint32_t fused_sum(const std::vector<Term>& terms, const Model& model, const Format& out, Rounding mode,
                          bool* all_negative_zero_out = nullptr) {
    bool nan = false, pos_inf = false, neg_inf = false;
    for (const Term& t : terms) {
        if (t.kind == kNaN) nan = true;
        if (t.kind == kInf) (t.negative ? neg_inf : pos_inf) = true;
    }
    uint32_t inf = out.max_field() << out.mantissa_bits;
    uint32_t sign_bit = 1u << (out.exponent_bits + out.mantissa_bits);
    if (nan || (pos_inf && neg_inf)) return inf | (sign_bit - 1);  // canonical NaN guess: all ones
    if (pos_inf) return inf;
    if (neg_inf) return inf | sign_bit;
    int e_max = INT_MIN;
    bool any_nonzero = false, all_negative = true;
    for (const Term& t : terms) {
        if (t.kind == kZero) {
            if (!t.negative) all_negative = false;
            e_max = std::max(e_max, t.exponent);
            continue;
        }
        any_nonzero = true;
        all_negative = false;
        e_max = std::max(e_max, t.exponent);
    }
    if (!any_nonzero) return all_negative ? sign_bit : 0;
    int quantum = e_max - model.fraction_bits;
    __int128 sum = 0;
    for (const Term& t : terms) {
        if (t.kind != kFinite) continue;
        int shift = t.lsb_exponent - quantum;
        uint64_t m = shift >= 0 ? t.significand << shift : (shift <= -64 ? 0 : t.significand >> -shift);
        sum += t.negative ? -(__int128)m : (__int128)m;
    }
    if (sum == 0) return 0;
    bool negative = sum < 0;
    unsigned __int128 magnitude = negative ? -(unsigned __int128)sum : (unsigned __int128)sum;
    return round_pack(negative, (uint64_t)magnitude, quantum, out, mode, model.overflow_saturates);
}

static Term product_term(const Value& a, const Value& b, const Model& model) {
    Term t{};
    t.negative = a.negative != b.negative;
    if (a.kind == kNaN || b.kind == kNaN) {
        t.kind = kNaN;
    } else if (a.kind == kInf || b.kind == kInf) {
        t.kind = (a.kind == kZero || b.kind == kZero) ? kNaN : kInf;
    } else if (a.kind == kZero || b.kind == kZero) {
        t.kind = kZero;
        t.exponent = model.zero_exponent;
    } else {
        t.kind = kFinite;
        t.significand = a.significand * b.significand;
        t.lsb_exponent = a.lsb_exponent + b.lsb_exponent;
        t.exponent = a.exponent + b.exponent;
        if (model.normalized_products) {
            int msb = 63 - __builtin_clzll(t.significand);
            t.exponent = msb + t.lsb_exponent;
        }
    }
    return t;
}
static Term accumulator_term(const Value& c, const Model& model) {
    Term t{c.kind, c.negative, c.significand, c.lsb_exponent, c.exponent};
    if (c.kind == kZero) t.exponent = model.zero_c_counts ? model.zero_exponent : INT_MIN / 2;
    return t;
}

static uint32_t model_output(const capture::MmaCapture& cap, size_t tile, int i, int j, const Model& model) {
    bool f16_inputs = cap.variant == 1 || cap.variant == 2;
    const Format& in = f16_inputs ? kF16 : kBf16;
    const Format& acc = cap.acc_bytes == 2 ? kF16 : kF32;
    Value c = decode(cap.c(tile, i, j), acc);
    uint32_t running = 0;
    Term c_term = accumulator_term(c, model);
    for (int k0 = 0; k0 < 16; k0 += model.chunk) {
        std::vector<Term> terms;
        for (int k = k0; k < k0 + model.chunk; ++k)
            terms.push_back(product_term(decode(cap.a(tile, i, k), in), decode(cap.b(tile, k, j), in), model));
        terms.push_back(k0 == 0 ? c_term : accumulator_term(decode(running, acc), model));
        bool last = k0 + model.chunk >= 16;
        if (&acc == &kF16 && model.f16_path == 1) {
            uint32_t wide = fused_sum(terms, model, kF32, kRZ);
            // then RN to f16 (via exact decode of the f32)
            Value w = decode(wide, kF32);
            if (w.kind == kFinite)
                running = round_pack(w.negative, w.significand, w.lsb_exponent, kF16, kRN, false);
            else if (w.kind == kZero)
                running = w.negative ? 0x8000 : 0;
            else
                running = w.kind == kNaN ? 0x7FFF : (w.negative ? 0xFC00 : 0x7C00);
        } else {
            running = fused_sum(terms, model, acc, last ? model.rounding : kRZ);
        }
    }
    return running;
}

static bool same(uint32_t got, uint32_t want, const Format& f) {
    uint32_t inf = f.max_field() << f.mantissa_bits;
    uint32_t abs_mask = (1u << (f.exponent_bits + f.mantissa_bits)) - 1;
    bool got_nan = (got & abs_mask) > inf, want_nan = (want & abs_mask) > inf;
    if (got_nan || want_nan) return got_nan && want_nan;
    return got == want;
}

static const char* kClassNames[] = {"baseline", "fullrange", "subnormal", "zeros", "infnan", "cancel",
                                    "spread", "maxpos", "Cdominates", "nearties", "overflow", "negsums"};

struct Result {
    long compared = 0, wrong = 0;
    std::map<uint32_t, std::pair<long, long>> per_class;
};
static Result evaluate(const capture::MmaCapture& cap, const Model& model, int show = 0) {
    Result r;
    const Format& acc = cap.acc_bytes == 2 ? kF16 : kF32;
    int shown = 0;
    for (size_t t = 0; t < cap.tiles; ++t)
        for (uint32_t i = 0; i < cap.m; ++i)
            for (uint32_t j = 0; j < cap.n; ++j) {
                uint32_t want = model_output(cap, t, i, j, model), got = cap.d(t, i, j);
                bool ok = same(got, want, acc);
                auto& pc = r.per_class[cap.tile[t].cls];
                ++pc.first;
                ++r.compared;
                if (!ok) {
                    ++pc.second;
                    ++r.wrong;
                    if (shown < show) {
                        ++shown;
                        std::printf("    tile %zu class %u (%u,%u): got %08x model %08x  C=%08x\n", t, cap.tile[t].cls,
                                    i, j, got, want, cap.c(t, i, j));
                        std::printf("      A row:");
                        for (int k = 0; k < 16; ++k) std::printf(" %04x", cap.a(t, i, k));
                        std::printf("\n      B col:");
                        for (int k = 0; k < 16; ++k) std::printf(" %04x", cap.b(t, k, j));
                        std::printf("\n");
                    }
                }
            }
    return r;
}

static void print_result(const Model& model, const Result& r) {
    std::printf("  %-60s mismatches %ld / %ld  [", model.name().c_str(), r.wrong, r.compared);
    for (auto& [cls, counts] : r.per_class)
        if (counts.second) std::printf(" %s:%ld", cls < 12 ? kClassNames[cls] : "layout", counts.second);
    std::printf(" ]\n");
}

int main(int argc, char** argv) {
    for (int file = 1; file < argc; ++file) {
        capture::MmaCapture cap = capture::read_mma(argv[file]);
        std::printf("== %s: variant %u, M=%u N=%u K=%u, %u tiles, accumulator %u bytes\n", argv[file], cap.variant,
                    cap.m, cap.n, cap.k, cap.tiles, cap.acc_bytes);
        // NaN encodings seen
        std::map<uint32_t, long> nans;
        const Format& acc = cap.acc_bytes == 2 ? kF16 : kF32;
        for (size_t t = 0; t < cap.tiles; ++t)
            for (uint32_t i = 0; i < cap.m; ++i)
                for (uint32_t j = 0; j < cap.n; ++j) {
                    uint32_t d = cap.d(t, i, j);
                    uint32_t abs_mask = (1u << (acc.exponent_bits + acc.mantissa_bits)) - 1;
                    if ((d & abs_mask) > (acc.max_field() << acc.mantissa_bits)) nans[d]++;
                }
        std::printf("  NaN outputs:");
        for (auto& [bits, n] : nans) std::printf(" %08x x%ld", bits, n);
        std::printf("\n");
        std::vector<Model> grid;
        Model base;
        for (int F : {23, 24, 25, 26, 27}) {
            Model m = base;
            m.fraction_bits = F;
            grid.push_back(m);
        }
        for (int z : {-126, -127, -128, -129, -130, -131, -132, -134, -140, -150, INT_MIN / 2}) {
            Model m = base;
            m.zero_exponent = z;
            grid.push_back(m);
        }
        {
            Model m = base;
            m.zero_c_counts = false;
            grid.push_back(m);
            m = base;
            m.rounding = kRN;
            grid.push_back(m);
            m = base;
            m.overflow_saturates = true;
            grid.push_back(m);
            m = base;
            m.normalized_products = true;
            grid.push_back(m);
            m = base;
            m.chunk = 8;
            m.fraction_bits = 24;
            grid.push_back(m);
            if (cap.acc_bytes == 2) {
                for (int F : {21, 22, 23, 24, 26, 27}) {
                    m = base;
                    m.rounding = kRN;
                    m.fraction_bits = F;
                    grid.push_back(m);
                }
                for (Rounding r : {kRZ, kRN})
                    for (int path : {0, 1}) {
                        m = base;
                        m.rounding = r;
                        m.f16_path = path;
                        grid.push_back(m);
                    }
            }
        }
        Model best;
        long best_wrong = -1;
        for (const Model& m : grid) {
            Result r = evaluate(cap, m);
            print_result(m, r);
            if (best_wrong < 0 || r.wrong < best_wrong) {
                best_wrong = r.wrong;
                best = m;
            }
        }
        std::printf("  best: %s (%ld mismatches); first mismatches:\n", best.name().c_str(), best_wrong);
        evaluate(cap, best, 6);
    }
}
