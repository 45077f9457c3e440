// Compares the scalar captures in ops.bin (fp32 add/mul/fma in four rounding
// modes with and without .ftz, bf16 add/mul/fma, f32->bf16/f16 conversions)
// with IEEE reference results, and reports NaN encodings and ftz behaviour.
// Build: g++ -O1 -frounding-math -std=c++20 -o analyze_ops analyze_ops.cpp
// Run:   ./analyze_ops .captures/ops.bin
#include <cstdio>
#include <map>
#include <string>

#include "capture_files.hpp"
#include "reference_round.hpp"

using namespace reference;

static bool is_nan(uint32_t bits, const Format& f) { return (bits & (f.sign_bit() - 1)) > f.inf(); }
static bool is_subnormal(uint32_t bits, const Format& f) {
    return (bits & f.inf()) == 0 && (bits & ((1u << f.mantissa_bits) - 1)) != 0;
}
static double to_double(uint32_t bits, const Format& f) {
    if (&f == &kBf16) return (double)float_of(bits << 16);
    if (&f == &kF32) return (double)float_of(bits);
    return 0;
}

// Reference for one arithmetic result. ftz: flush subnormal inputs to signed
// zero, and flush a tiny result, tininess judged by `tiny_rule`.
enum TinyRule { kTinyAfterBoundedRounding = 0, kTinyBeforeRounding = 1, kTinyAfterUnboundedRounding = 2 };
static const char* kTinyNames[3] = {" [tiny = subnormal after rounding]", " [tiny = |exact| < 2^-126]",
                                    " [tiny = after rounding to 24 bits, unbounded exponent]"};
static uint32_t reference_op(Op op, uint32_t a, uint32_t b, uint32_t c, const Format& f, Mode mode, bool ftz,
                             int tiny_rule) {
    auto flush = [&](uint32_t x) { return ftz && is_subnormal(x, f) ? x & f.sign_bit() : x; };
    a = flush(a);
    b = flush(b);
    c = flush(c);
    if (is_nan(a, f) || is_nan(b, f) || (op == kFma && is_nan(c, f))) return f.inf() | (f.sign_bit() - 1);
    Exact e = compute(op, to_double(a, f), to_double(b, f), to_double(c, f), mode);
    if (std::isnan(e.in_mode)) return f.inf() | (f.sign_bit() - 1);
    if (std::isinf(e.in_mode) && std::isinf(e.odd)) return e.in_mode > 0 ? f.inf() : f.inf() | f.sign_bit();
    if (e.odd == 0) return std::signbit(e.in_mode) ? f.sign_bit() : 0;
    uint32_t r = round_to_format(e.odd, f, mode);
    if (ftz) {
        bool tiny;
        if (tiny_rule == kTinyBeforeRounding) {
            tiny = std::fabs(e.odd) < std::ldexp(1.0, f.emin());
        } else if (tiny_rule == kTinyAfterUnboundedRounding) {
            // scaling by 2^64 is exact and keeps round-to-odd valid; the value is then normal
            uint32_t wide = round_to_format(std::ldexp(e.odd, 64), f, mode);
            tiny = ((wide >> f.mantissa_bits) & f.max_field()) < (uint32_t)(f.emin() + 64 + f.bias);
        } else {
            tiny = is_subnormal(r, f);
        }
        if (tiny) return r & f.sign_bit();
    }
    return r;
}

struct Tally {
    long compared = 0, wrong = 0, nan_cases = 0;
    std::map<uint32_t, long> nan_outputs;
    int shown = 0;
};

static void compare(Tally& t, uint32_t got, uint32_t want, const Format& f, const char* what, uint32_t a, uint32_t b,
                    uint32_t c) {
    ++t.compared;
    if (is_nan(want, f)) {
        ++t.nan_cases;
        if (is_nan(got, f)) {
            t.nan_outputs[got]++;
            return;
        }
    } else if (got == want) {
        return;
    }
    ++t.wrong;
    if (t.shown++ < 4)
        std::printf("      %s a=%08x b=%08x c=%08x got=%08x ref=%08x\n", what, a, b, c, got, want);
}
static void compare_exact(Tally& t, uint32_t got, uint32_t want, const char* what, uint32_t a, uint32_t b) {
    ++t.compared;
    if (got == want) return;
    ++t.wrong;
    if (t.shown++ < 4) std::printf("      %s a=%08x b=%08x got=%08x ref=%08x\n", what, a, b, got, want);
}
static void report(const char* name, const Tally& t) {
    std::printf("  %-34s mismatches %ld / %ld; NaN results %ld, encodings:", name, t.wrong, t.compared, t.nan_cases);
    for (auto& [bits, n] : t.nan_outputs) std::printf(" %08x x%ld", bits, n);
    std::printf("\n");
}

int main(int argc, char** argv) {
    capture::Ops ops = capture::read_ops(argc > 1 ? argv[1] : ".captures/ops.bin");
    {
        const capture::Section& s = ops.section("fp32");
        const capture::Array &a = s.array("a"), &b = s.array("b"), &c = s.array("c");
        const char* ops_names[3] = {"add", "mul", "fma"};
        const char* modes[4] = {"rn", "rz", "rm", "rp"};
        std::printf("== fp32 arithmetic, %u cases each\n", s.count);
        for (int op = 0; op < 3; ++op)
            for (int ftz = 0; ftz < 2; ++ftz)
                for (int mode = 0; mode < 4; ++mode) {
                    std::string name = std::string(ops_names[op]) + "." + modes[mode] + (ftz ? ".ftz" : "") + ".f32";
                    const capture::Array& out = s.array(name);
                    for (int before = 0; before < (ftz ? 3 : 1); ++before) {
                        Tally t;
                        for (uint32_t i = 0; i < s.count; ++i)
                            compare(t, out.at(i),
                                    reference_op((Op)op, a.at(i), b.at(i), c.at(i), kF32, (Mode)mode, ftz, before),
                                    kF32, name.c_str(), a.at(i), b.at(i), c.at(i));
                        std::string label = name + (ftz ? kTinyNames[before] : "");
                        report(label.c_str(), t);
                    }
                }
    }
    {
        const capture::Section& s = ops.section("bf16");
        const capture::Array &a = s.array("a"), &b = s.array("b"), &c = s.array("c");
        std::printf("== bf16 arithmetic, %u cases each (reference: IEEE RN, subnormals kept)\n", s.count);
        const char* names[3] = {"add.rn.bf16", "mul.rn.bf16", "fma.rn.bf16"};
        for (int op = 0; op < 3; ++op) {
            Tally t;
            const capture::Array& out = s.array(names[op]);
            for (uint32_t i = 0; i < s.count; ++i)
                compare(t, out.at(i), reference_op((Op)op, a.at(i), b.at(i), c.at(i), kBf16, kRN, false, 0), kBf16,
                        names[op], a.at(i), b.at(i), c.at(i));
            report(names[op], t);
            Tally t2;  // same with ftz, to see whether subnormal results are kept
            for (uint32_t i = 0; i < s.count; ++i)
                compare(t2, out.at(i), reference_op((Op)op, a.at(i), b.at(i), c.at(i), kBf16, kRN, true, 0), kBf16,
                        names[op], a.at(i), b.at(i), c.at(i));
            report((std::string(names[op]) + " [if it flushed]").c_str(), t2);
        }
    }
    {
        const capture::Section& s = ops.section("cvt");
        const capture::Array &a = s.array("a"), &b = s.array("b");
        std::printf("== conversions, %u cases\n", s.count);
        auto convert = [](uint32_t x, const Format& f, Mode mode, bool sat) -> uint32_t {
            if (is_nan(x, kF32)) return f.inf() | (f.sign_bit() - 1);
            double v = (double)float_of(x);
            if (std::isinf(v)) return (sat ? f.inf() - 1 : f.inf()) | (v < 0 ? f.sign_bit() : 0);
            if (v == 0) return x >> 31 ? f.sign_bit() : 0;
            return round_to_format(v, f, mode, sat);
        };
        Tally hi_a, hi_b, f16_hi_a;
        const capture::Array& packed = s.array("cvt.rn.bf16x2.f32 d,a,b");
        const capture::Array& packed16 = s.array("cvt.rn.f16x2.f32 d,a,b");
        for (uint32_t i = 0; i < s.count; ++i) {
            uint32_t want_a = convert(a.at(i), kBf16, kRN, false), want_b = convert(b.at(i), kBf16, kRN, false);
            compare_exact(hi_a, packed.at(i), (want_a << 16) | want_b, "bf16x2 a-high", a.at(i), b.at(i));
            compare_exact(hi_b, packed.at(i), (want_b << 16) | want_a, "bf16x2 b-high", a.at(i), b.at(i));
            uint32_t wa16 = convert(a.at(i), kF16, kRN, false), wb16 = convert(b.at(i), kF16, kRN, false);
            compare_exact(f16_hi_a, packed16.at(i), (wa16 << 16) | wb16, "f16x2 a-high", a.at(i), b.at(i));
        }
        // the packed compare treats the pair as one 32-bit value: count NaN halves separately
        std::map<uint32_t, long> nan_halves;
        for (uint32_t i = 0; i < s.count; ++i)
            for (int h = 0; h < 2; ++h) {
                uint32_t half = (packed.at(i) >> (16 * h)) & 0xFFFF;
                if (is_nan(half, kBf16)) nan_halves[half]++;
            }
        report("cvt.rn.bf16x2.f32 (a->high half)", hi_a);
        report("cvt.rn.bf16x2.f32 (b->high half)", hi_b);
        report("cvt.rn.f16x2.f32 (a->high half)", f16_hi_a);
        std::printf("    bf16x2 NaN halves:");
        for (auto& [bits, n] : nan_halves) std::printf(" %04x x%ld", bits, n);
        std::printf("\n");
        struct One {
            const char* name;
            Mode mode;
            bool sat, relu;
        } singles[] = {{"cvt.rn.bf16.f32 d,a", kRN, false, false},
                       {"cvt.rz.bf16.f32 d,a", kRZ, false, false},
                       {"cvt.rn.satfinite.bf16.f32 d,a", kRN, true, false},
                       {"cvt.rn.relu.bf16.f32 d,a", kRN, false, true}};
        for (const One& one : singles) {
            Tally t;
            const capture::Array& out = s.array(one.name);
            for (uint32_t i = 0; i < s.count; ++i) {
                uint32_t want = convert(a.at(i), kBf16, one.mode, one.sat);
                if (one.relu && !is_nan(want, kBf16) && (want & 0x8000)) want = 0;
                compare(t, out.at(i), want, kBf16, one.name, a.at(i), 0, 0);
            }
            report(one.name, t);
        }
    }
    return 0;
}
