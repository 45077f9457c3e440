// Reference rounding for the analysis programs: an exact value is computed in
// double with round-to-odd (round toward zero, then OR the inexact flag into
// the last bit), which rounds correctly to any format of at most 51 bits in
// every rounding mode; round_to_format then rounds it to the target format.
#pragma once

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace reference {

struct Format {
    int exponent_bits, mantissa_bits, bias;
    int emin() const { return 1 - bias; }
    uint32_t max_field() const { return (1u << exponent_bits) - 1; }
    uint32_t inf() const { return max_field() << mantissa_bits; }
    uint32_t sign_bit() const { return 1u << (exponent_bits + mantissa_bits); }
};
inline constexpr Format kBf16{8, 7, 127}, kF16{5, 10, 15}, kF32{8, 23, 127};

enum Mode { kRN, kRZ, kRM, kRP };

inline uint64_t bits_of(double x) {
    uint64_t u;
    std::memcpy(&u, &x, 8);
    return u;
}
inline double double_of(uint64_t u) {
    double x;
    std::memcpy(&x, &u, 8);
    return x;
}
inline float float_of(uint32_t u) {
    float x;
    std::memcpy(&x, &u, 4);
    return x;
}
inline uint32_t bits_of(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return u;
}

// Rounds a finite, nonzero double (already round-to-odd) to format f.
// overflow_to_max: satfinite behaviour.
inline uint32_t round_to_format(double v, const Format& f, Mode mode, bool overflow_to_max = false) {
    uint64_t u = bits_of(v);
    bool negative = u >> 63;
    uint32_t sign = negative ? f.sign_bit() : 0;
    int field = (int)((u >> 52) & 0x7FF);
    uint64_t significand = (u & ((1ull << 52) - 1)) | (field ? 1ull << 52 : 0);
    int lsb = (field ? field : 1) - 1075;
    if (significand == 0) return sign;
    int msb = 63 - __builtin_clzll(significand);
    int lead = msb + lsb;
    int quantum = (lead < f.emin() ? f.emin() : lead) - f.mantissa_bits;
    int shift = quantum - lsb;
    uint64_t q = 0, rest = 0, half = 0;
    if (shift <= 0) {
        q = significand << -shift;
    } else if (shift >= 64) {
        rest = significand;
        half = ~0ull;  // rest is below half
        q = 0;
    } else {
        q = significand >> shift;
        rest = significand & ((1ull << shift) - 1);
        half = 1ull << (shift - 1);
    }
    bool up = false;
    if (rest) {
        switch (mode) {
            case kRN: up = rest > half || (rest == half && (q & 1)); break;
            case kRZ: up = false; break;
            case kRM: up = negative; break;
            case kRP: up = !negative; break;
        }
    }
    if (up) ++q;
    uint64_t bits = lead < f.emin() ? q : ((uint64_t)(lead + f.bias - 1) << f.mantissa_bits) + q;
    if (bits >= f.inf()) {
        bool to_inf = mode == kRN || (mode == kRM && negative) || (mode == kRP && !negative);
        bits = (to_inf && !overflow_to_max) ? f.inf() : f.inf() - 1;
    }
    return sign | (uint32_t)bits;
}

inline int fe_mode(Mode m) {
    switch (m) {
        case kRN: return FE_TONEAREST;
        case kRZ: return FE_TOWARDZERO;
        case kRM: return FE_DOWNWARD;
        default: return FE_UPWARD;
    }
}

enum Op { kAdd, kMul, kFma };
// Exact result of the operation, round-to-odd in double, and the same
// operation in `mode` (whose sign is the IEEE sign of an exact zero).
struct Exact {
    double odd;
    double in_mode;
};
inline Exact compute(Op op, double a, double b, double c, Mode mode) {
    volatile double va = a, vb = b, vc = c;
    Exact e;
    std::fesetround(FE_TOWARDZERO);
    std::feclearexcept(FE_INEXACT);
    double r = op == kAdd ? va + vb : op == kMul ? va * vb : std::fma(va, vb, vc);
    if (std::fetestexcept(FE_INEXACT)) r = double_of(bits_of(r) | 1);
    e.odd = r;
    std::fesetround(fe_mode(mode));
    e.in_mode = op == kAdd ? va + vb : op == kMul ? va * vb : std::fma(va, vb, vc);
    std::fesetround(FE_TONEAREST);
    return e;
}

}  // namespace reference
