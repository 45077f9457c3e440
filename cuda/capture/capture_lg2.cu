// Captures MUFU.LG2 as PTX reaches it (lg2.approx.ftz.f32, lg2.approx.f32, and
// CUDA's __logf) for bitexact's lg2 model, independent of that model:
//   - the unit over one binade, T(k) = lg2.approx.ftz(1 + k*2^-23), and over the
//     binade below, U(k) = lg2.approx.ftz((1 + k*2^-23)/2), k < 2^23;
//   - GPU-side sweeps over all 2^32 inputs counting, per binade, the mismatches
//     of candidate models built from T and U, with samples of each;
//   - samples (specials first, then structured and random inputs) for CI replay.
// Files written into argv[1] (layouts in cuda/capture/README.md): info.txt (the
// log), lg2_tables_N.bin (BXTAB01 chunks of T and U), lg2_ops.bin (BXOPS01).
// Build: nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 capture_lg2.cu
#include <cmath>
#include <ctime>

#include "capture_common.cuh"

// Never launched: their SASS (cuobjdump -sass, appended to info.txt by
// run_capture.sh) shows what nvcc emits around MUFU.LG2 for each form.
extern "C" __global__ void sass_lg2_approx_ftz(const float* x, float* y) {
    y[threadIdx.x] = lg2_approx_ftz(x[threadIdx.x]);
}
extern "C" __global__ void sass_lg2_approx(const float* x, float* y) { y[threadIdx.x] = lg2_approx(x[threadIdx.x]); }
extern "C" __global__ void sass_logf(const float* x, float* y) { y[threadIdx.x] = __logf(x[threadIdx.x]); }

constexpr uint32_t kEntries = 1u << 23;
constexpr uint32_t kChunkEntries = 1u << 20;
constexpr size_t kMaxFileBytes = 15u << 20;  // the device run returns files of at most 16 MiB

__global__ void kernel_lg2_tables(uint32_t* t, uint32_t* u) {
    uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= kEntries) return;
    t[k] = bits_of(lg2_approx_ftz(float_of(0x3F800000u + k)));  // exponent 0: the unit's fraction alone
    u[k] = bits_of(lg2_approx_ftz(float_of(0x3F000000u + k)));  // exponent -1: -1 + that fraction
}

// ---- the candidate models ----
// Every model says the same for inputs other than positive normals: what IEEE
// log2 gives once .ftz has flushed subnormals to zero.
__device__ inline bool lg2_special(uint32_t x, uint32_t& expect) {
    uint32_t magnitude = x & 0x7FFFFFFFu;
    if (magnitude > 0x7F800000u) expect = kAnyNaN;
    else if (magnitude < 0x00800000u) expect = 0xFF800000u;  // +-0 and subnormals: -inf
    else if (x >> 31) expect = kAnyNaN;
    else if (magnitude == 0x7F800000u) expect = 0x7F800000u;
    else return false;
    return true;
}

enum Rounding { kNearest = 0, kTowardZero, kDown, kUp, kRoundings };

// H1: e + T(k) as an fp32 add with the given rounding (x = 2^e * (1 + k*2^-23)).
// FADD is commutative and rounds the exact sum once, so this also stands for
// "T(k) + e" and "the exact e + T(k), rounded".
__device__ inline uint32_t model_sum_of_table(uint32_t x, float table_value, int rounding) {
    uint32_t expect;
    if (lg2_special(x, expect)) return expect;
    float e = (float)((int)(x >> 23) - 127);
    switch (rounding) {
        case kNearest: return bits_of(__fadd_rn(e, table_value));
        case kTowardZero: return bits_of(__fadd_rz(e, table_value));
        case kDown: return bits_of(__fadd_rd(e, table_value));
        default: return bits_of(__fadd_ru(e, table_value));
    }
}

// H2: e + F(k) rounded once, with the fraction F taken from whichever capture
// holds it more precisely: T(k) below 0.5, else 1 + U(k) (for a unit that
// computes e + F in fixed point, both are F rounded to their binade's grid).
__device__ inline uint32_t model_sum_of_fraction(uint32_t x, float t, float u, int rounding) {
    uint32_t expect;
    if (lg2_special(x, expect)) return expect;
    double fraction = t < 0.5f ? (double)t : 1.0 + (double)u;
    double sum = (double)((int)(x >> 23) - 127) + fraction;  // exact: at most 8 + 26 significant bits
    switch (rounding) {
        case kNearest: return bits_of(__double2float_rn(sum));
        case kTowardZero: return bits_of(__double2float_rz(sum));
        case kDown: return bits_of(__double2float_rd(sum));
        default: return bits_of(__double2float_ru(sum));
    }
}

// H3: two tables, one per side of 1: for x >= 1, RZ(e + T(k)); below 1,
// x = 2^(e+1) * (1 + k*2^-23)/2 and RZ((e + 1) + U(k)), U the binade [0.5, 1).
// Both sums are rounded toward zero.
__device__ inline uint32_t model_two_tables(uint32_t x, float t, float u) {
    uint32_t expect;
    if (lg2_special(x, expect)) return expect;
    int e = (int)(x >> 23) - 127;
    return e >= 0 ? bits_of(__fadd_rz((float)e, t)) : bits_of(__fadd_rz((float)(e + 1), u));
}

// The non-FTZ form as a compiler wrapper: inputs below 2^-126 in magnitude are
// scaled by 2^s into the normal range, and s is subtracted from the result.
// The unit is the real lg2.approx.ftz, or H1 (round to nearest) on table T.
__device__ inline uint32_t model_wrapper(float x, int s, const uint32_t* t, bool unit_from_table) {
    bool scaled = fabsf(x) < 0x1p-126f;
    float input = scaled ? __fmul_rn(x, ldexpf(1.0f, s)) : x;
    float unit = unit_from_table ? float_of(model_sum_of_table(bits_of(input), float_of(t[bits_of(input) & 0x7FFFFFu]), kNearest))
                                 : lg2_approx_ftz(input);
    return bits_of(scaled ? __fadd_rn(unit, (float)-s) : unit);
}

enum Lg2Model {
    kSumOfTable = 0,                          // + Rounding: 4 models
    kSumOfFraction = kSumOfTable + kRoundings,  // + Rounding: 4 models
    kWrapper23Unit = kSumOfFraction + kRoundings,
    kWrapper24Unit,
    kWrapper23Table,
    kWrapper24Table,
    kFullVsFtz,
    kTwoTables,
    kWrapper24TwoTables,
    kModelCount
};
static const char* kModelNames[kModelCount] = {
    "H1  lg2.approx.ftz = RN(e + T(k)) (FADD.rn, either operand order)",
    "H1z lg2.approx.ftz = RZ(e + T(k)) (FADD.rz)",
    "H1m lg2.approx.ftz = RM(e + T(k)) (FADD.rm: two's-complement truncation)",
    "H1p lg2.approx.ftz = RP(e + T(k)) (FADD.rp)",
    "H2  lg2.approx.ftz = RN(e + F(k)), F = T < 0.5 ? T : 1 + U",
    "H2z lg2.approx.ftz = RZ(e + F(k))",
    "H2m lg2.approx.ftz = RM(e + F(k))",
    "H2p lg2.approx.ftz = RP(e + F(k))",
    "W23  lg2.approx = |x| < 2^-126 ? FADD(lg2.approx.ftz(x*2^23), -23) : lg2.approx.ftz(x)",
    "W24  lg2.approx = |x| < 2^-126 ? FADD(lg2.approx.ftz(x*2^24), -24) : lg2.approx.ftz(x)",
    "W23t lg2.approx = the W23 wrapper around H1 instead of the unit",
    "W24t lg2.approx = the W24 wrapper around H1 instead of the unit",
    "lg2.approx differs from lg2.approx.ftz (informative)",
    "H3  lg2.approx.ftz = e >= 0 ? RZ(e + T(k)) : RZ((e+1) + U(k))",
    "W24h3 lg2.approx = the W24 wrapper around H3",
};

// Inputs by binade: class 0 is every input that is not a positive normal.
constexpr int kClasses = 8;
static const char* kClassNames[kClasses] = {"x not a positive normal", "e <= -3", "e = -2", "e = -1",
                                            "e = 0",                   "e = 1",   "e = 2",  "e >= 3"};
__device__ inline int class_of(uint32_t x) {
    uint32_t field = x >> 23;  // sign and exponent
    if (field == 0 || field >= 255) return 0;
    int e = (int)field - 127;
    return e <= -3 ? 1 : e >= 3 ? 7 : e + 4;
}

// Signed distance got - model in ulps, toward +inf, clamped to -8..8; bin 17
// when the two cannot be compared that way (NaN, infinity, zero, signs differ).
constexpr int kDistanceBins = 18;
__device__ inline int distance_bin(uint32_t got, uint32_t model) {
    uint32_t got_magnitude = got & 0x7FFFFFFFu, model_magnitude = model & 0x7FFFFFFFu;
    if ((got ^ model) >> 31 || got_magnitude == 0 || model_magnitude == 0 || got_magnitude >= 0x7F800000u ||
        model_magnitude >= 0x7F800000u)
        return kDistanceBins - 1;
    long long distance = (long long)got_magnitude - (long long)model_magnitude;
    if (got >> 31) distance = -distance;
    return (int)(distance < -8 ? -8 : distance > 8 ? 8 : distance) + 8;
}

// Per model and class, two pools of samples: the first mismatches found, and
// mismatches at inputs a hash picks (about one in 4096), spread over the class.
constexpr int kPoolSamples = 32;
constexpr int kPools = 2;
struct Lg2SweepState {
    unsigned long long inputs;
    unsigned long long mismatches[kModelCount];
    unsigned long long per_binade[kModelCount][512];  // by input bits >> 23 (sign and exponent field)
    unsigned long long distance[kModelCount][kClasses][kDistanceBins];
    unsigned int sample_count[kModelCount][kClasses][kPools];
    uint32_t samples[kModelCount][kClasses][kPools][kPoolSamples][3];  // input, got, model
    unsigned long long nan_not_canonical[2];                           // lg2.approx.ftz, lg2.approx
    uint32_t nan_example[2];
};

__device__ inline uint32_t spread_hash(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    return x ^ (x >> 16);
}

struct BlockTallies {
    unsigned int per_binade[kModelCount][512];
    unsigned int distance[kModelCount][kClasses][kDistanceBins];
    bool pool_full[kModelCount][kClasses][kPools];
};

// Called by all 32 lanes of a warp together; the lanes hold 32 consecutive
// inputs, so they share one binade and one class.
__device__ inline void record(Lg2SweepState* s, BlockTallies& block, int model, int input_class, uint32_t x,
                              uint32_t got, uint32_t expect) {
    bool mismatch = is_nan_bits32(expect) ? !is_nan_bits32(got) : got != expect;
    unsigned mismatching = __ballot_sync(0xFFFFFFFFu, mismatch);
    if (!mismatching) return;
    int lane = threadIdx.x & 31;
    if (lane == __ffs(mismatching) - 1) atomicAdd(&block.per_binade[model][x >> 23], (unsigned)__popc(mismatching));
    if (!mismatch) return;
    int bin = distance_bin(got, expect);
    unsigned same_bin = __match_any_sync(mismatching, bin);
    if (lane == __ffs(same_bin) - 1) atomicAdd(&block.distance[model][input_class][bin], (unsigned)__popc(same_bin));
    int pool = (spread_hash(x) & 4095) == 0 && !block.pool_full[model][input_class][1] ? 1
               : !block.pool_full[model][input_class][0]                                   ? 0
                                                                                           : -1;
    if (pool < 0) return;
    unsigned slot = atomicAdd(&s->sample_count[model][input_class][pool], 1u);
    if (slot >= kPoolSamples) {
        block.pool_full[model][input_class][pool] = true;
        return;
    }
    uint32_t* sample = s->samples[model][input_class][pool][slot];
    sample[0] = x;
    sample[1] = got;
    sample[2] = expect;
}

__device__ inline void nan_census(Lg2SweepState* s, int which, uint32_t got) {
    if (is_nan_bits32(got) && got != 0x7FFFFFFFu) {
        atomicAdd(&s->nan_not_canonical[which], 1ull);
        s->nan_example[which] = got;
    }
}

// The grid stride must be a power of two (a divisor of 2^32) so that every
// lane runs every iteration and the warp-wide votes in record() are complete.
__global__ void __launch_bounds__(256) kernel_lg2_sweep(const uint32_t* t, const uint32_t* u, Lg2SweepState* s) {
    __shared__ BlockTallies block;
    unsigned int* flat = &block.per_binade[0][0];
    for (int i = threadIdx.x; i < kModelCount * 512; i += blockDim.x) flat[i] = 0;
    flat = &block.distance[0][0][0];
    for (int i = threadIdx.x; i < kModelCount * kClasses * kDistanceBins; i += blockDim.x) flat[i] = 0;
    bool* full = &block.pool_full[0][0][0];
    for (int i = threadIdx.x; i < kModelCount * kClasses * kPools; i += blockDim.x) full[i] = false;
    __syncthreads();
    unsigned long long inputs = 0;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32); i += stride) {
        uint32_t x = (uint32_t)i;
        float xf = float_of(x);
        int input_class = class_of(x);
        uint32_t ftz = bits_of(lg2_approx_ftz(xf)), full_form = bits_of(lg2_approx(xf));
        nan_census(s, 0, ftz);
        nan_census(s, 1, full_form);
        float t_k = float_of(t[x & 0x7FFFFFu]), u_k = float_of(u[x & 0x7FFFFFu]);
#pragma unroll
        for (int r = 0; r < kRoundings; ++r) {
            record(s, block, kSumOfTable + r, input_class, x, ftz, model_sum_of_table(x, t_k, r));
            record(s, block, kSumOfFraction + r, input_class, x, ftz, model_sum_of_fraction(x, t_k, u_k, r));
        }
        record(s, block, kWrapper23Unit, input_class, x, full_form, model_wrapper(xf, 23, t, false));
        record(s, block, kWrapper24Unit, input_class, x, full_form, model_wrapper(xf, 24, t, false));
        record(s, block, kWrapper23Table, input_class, x, full_form, model_wrapper(xf, 23, t, true));
        record(s, block, kWrapper24Table, input_class, x, full_form, model_wrapper(xf, 24, t, true));
        record(s, block, kFullVsFtz, input_class, x, full_form, ftz);
        record(s, block, kTwoTables, input_class, x, ftz, model_two_tables(x, t_k, u_k));
        {
            bool scaled = fabsf(xf) < 0x1p-126f;
            uint32_t in = bits_of(scaled ? __fmul_rn(xf, 0x1p24f) : xf);
            float unit = float_of(model_two_tables(in, float_of(t[in & 0x7FFFFFu]), float_of(u[in & 0x7FFFFFu])));
            record(s, block, kWrapper24TwoTables, input_class, x, full_form, bits_of(scaled ? __fadd_rn(unit, -24.0f) : unit));
        }
        ++inputs;
    }
    atomicAdd(&s->inputs, inputs);
    __syncthreads();
    for (int i = threadIdx.x; i < kModelCount * 512; i += blockDim.x) {
        unsigned int count = block.per_binade[i / 512][i % 512];
        if (count) {
            atomicAdd(&s->per_binade[i / 512][i % 512], (unsigned long long)count);
            atomicAdd(&s->mismatches[i / 512], (unsigned long long)count);
        }
    }
    for (int i = threadIdx.x; i < kModelCount * kClasses * kDistanceBins; i += blockDim.x) {
        unsigned int count = (&block.distance[0][0][0])[i];
        if (count) atomicAdd(&(&s->distance[0][0][0])[i], (unsigned long long)count);
    }
}

// ---- table statistics (host) ----
static int biased_exponent(uint32_t bits) { return (int)((bits >> 23) & 0xFF); }

// log2 of the power of two that the lowest set bit of a finite nonzero fp32 stands for.
static int lowest_bit_exponent(uint32_t bits) {
    int field = biased_exponent(bits);
    uint32_t significand = (bits & 0x7FFFFFu) | (field ? 0x800000u : 0u);
    return (field ? field : 1) - 150 + __builtin_ctz(significand);
}

// Monotonicity, steps, the finest power-of-two grid the entries lie on, and
// the error against log2 in long double, absolute and in ulps of the entry.
static void describe_table(const char* label, const std::vector<uint32_t>& v, long double offset) {
    log_line("table %s", label);
    for (uint32_t k : {0u, 1u, 2u, 3u, 4u, 1u << 20, 1u << 22, kEntries - 2, kEntries - 1})
        log_line("   k=%-8u %08x (%.9g)", k, v[k], (double)float_of(v[k]));
    long long falling = 0, flat = 0, rising = 0;
    for (uint32_t k = 1; k < kEntries; ++k) {
        long long step = (long long)(int32_t)v[k] - (long long)(int32_t)v[k - 1];
        falling += step < 0, flat += step == 0, rising += step > 0;
    }
    log_line("   steps between consecutive bit patterns: %lld falling, %lld flat, %lld rising", falling, flat, rising);
    int finest = 1000;
    long long off_grid[6] = {};  // entries not on the grid 2^-21 .. 2^-26
    long long not_finite = 0;
    for (uint32_t k = 0; k < kEntries; ++k) {
        if ((v[k] & 0x7FFFFFFFu) >= 0x7F800000u) {
            ++not_finite;
            continue;
        }
        if ((v[k] & 0x7FFFFFFFu) == 0) continue;
        int low = lowest_bit_exponent(v[k]);
        finest = low < finest ? low : finest;
        for (int g = 0; g < 6; ++g) off_grid[g] += low < -(21 + g);
    }
    log_line("   finest grid: every finite entry is a multiple of 2^%d; entries off the grid 2^-21..2^-26: %lld %lld "
             "%lld %lld %lld %lld; not finite: %lld",
             finest, off_grid[0], off_grid[1], off_grid[2], off_grid[3], off_grid[4], off_grid[5], not_finite);
    long double worst = 0;
    uint32_t worst_k = 0;
    long long from_nearest[9] = {};  // entry bits - RN(exact) bits, -4..4 clamped
    for (uint32_t k = 0; k < kEntries; ++k) {
        long double exact = log2l(1.0L + (long double)k * 0x1p-23L) + offset;
        long double error = fabsl((long double)float_of(v[k]) - exact);
        if (error > worst) worst = error, worst_k = k;
        long long distance = (long long)(int32_t)v[k] - (long long)(int32_t)bits_of((float)exact);
        if (v[k] >> 31) distance = -distance;  // toward +inf
        from_nearest[(distance < -4 ? -4 : distance > 4 ? 4 : distance) + 4]++;
    }
    log_line("   largest |entry - exact| = %.4Lg * 2^-24 = 2^%.2Lf at k=%u", worst * 0x1p24L, log2l(worst), worst_k);
    log_line("   entry - RN(exact) in ulps toward +inf, -4..4 (clamped): %lld %lld %lld %lld %lld %lld %lld %lld %lld",
             from_nearest[0], from_nearest[1], from_nearest[2], from_nearest[3], from_nearest[4], from_nearest[5],
             from_nearest[6], from_nearest[7], from_nearest[8]);
}

// Whether T and U are one fixed-point fraction seen through two binades.
static void compare_tables(const std::vector<uint32_t>& t, const std::vector<uint32_t>& u) {
    long long nearest = 0, toward_zero = 0, below_half = 0;
    for (uint32_t k = 0; k < kEntries; ++k) {
        double from_u = 1.0 + (double)float_of(u[k]);
        nearest += bits_of((float)from_u) == t[k];
        toward_zero += bits_of(std::nextafter((float)from_u, 0.0f)) == t[k] || (double)float_of(t[k]) == from_u;
        below_half += float_of(t[k]) < 0.5f;
    }
    log_line("T(k) == RN(1 + U(k)): %lld of %u; T(k) == RZ-ish(1 + U(k)) (exact or one ulp toward zero): %lld; "
             "T(k) < 0.5: %lld",
             nearest, kEntries, toward_zero, below_half);
}

// ---- table files: 2^20-entry chunks of T and U, packed into files below the size limit ----
struct TableChunk {
    std::string name;
    std::vector<uint32_t> values;
};

static void write_table_files(const std::string& out_dir, const std::vector<uint32_t>& t,
                              const std::vector<uint32_t>& u) {
    std::vector<TableChunk> chunks;
    for (int which = 0; which < 2; ++which)
        for (uint32_t first = 0; first < kEntries; first += kChunkEntries) {
            const std::vector<uint32_t>& table = which == 0 ? t : u;
            char name[64];
            std::snprintf(name, sizeof name, "%c[%u,%u) lg2.approx.ftz.f32(%s)", which == 0 ? 'T' : 'U', first,
                          first + kChunkEntries, which == 0 ? "1+k*2^-23" : "0.5+k*2^-24");
            chunks.push_back({name, std::vector<uint32_t>(table.begin() + first, table.begin() + first + kChunkEntries)});
        }
    size_t next = 0;
    for (int file = 0; next < chunks.size(); ++file) {
        size_t end = next, bytes = 16;
        do bytes += encoded_table_bytes(chunks[end++].values);
        while (end < chunks.size() && bytes + encoded_table_bytes(chunks[end].values) <= kMaxFileBytes);
        std::string path = out_dir + "/lg2_tables_" + std::to_string(file) + ".bin";
        Writer w(path);
        w.bytes("BXTAB01", 8);
        w.u32((uint32_t)(end - next));
        w.u32(0);
        for (; next < end; ++next) write_table(w, chunks[next].name.c_str(), chunks[next].values);
        log_line("wrote %s (%zu bytes)", path.c_str(), bytes);
    }
}

// ---- the sweep report ----
static void report_sweep(const Lg2SweepState& s, const std::vector<uint32_t>& t, const std::vector<uint32_t>& u) {
    log_line("== GPU sweeps over all 2^32 input bit patterns: %llu inputs ==", s.inputs);
    for (int model = 0; model < kModelCount; ++model) {
        log_line("sweep %d: %s: mismatches %llu", model, kModelNames[model], s.mismatches[model]);
        if (!s.mismatches[model]) continue;
        char line[8192];
        int pos = std::snprintf(line, sizeof line, "   by input bits>>23 (sign|exp):");
        for (int b = 0; b < 512 && pos < 7900; ++b)
            if (s.per_binade[model][b]) pos += std::snprintf(line + pos, sizeof line - pos, " %03x:%llu", b, s.per_binade[model][b]);
        log_line("%s", line);
        for (int c = 0; c < kClasses; ++c) {
            const unsigned long long* d = s.distance[model][c];
            unsigned long long total = 0;
            for (int b = 0; b < kDistanceBins; ++b) total += d[b];
            if (!total) continue;
            log_line("   class %-24s %llu mismatches; got - model in ulps toward +inf, -8..8 clamped, then not "
                     "comparable: %llu %llu %llu %llu %llu %llu %llu %llu | %llu | %llu %llu %llu %llu %llu %llu %llu "
                     "%llu | %llu",
                     kClassNames[c], total, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9], d[10], d[11],
                     d[12], d[13], d[14], d[15], d[16], d[17]);
            for (int pool = 0; pool < kPools; ++pool) {
                unsigned count = s.sample_count[model][c][pool] < kPoolSamples ? s.sample_count[model][c][pool] : kPoolSamples;
                for (unsigned i = 0; i < count; ++i) {
                    const uint32_t* sample = s.samples[model][c][pool][i];
                    uint32_t k = sample[0] & 0x7FFFFFu;
                    log_line("      %s x=%08x (%.9g) got=%08x (%.9g) model=%08x (%.9g) T=%08x U=%08x",
                             pool == 0 ? "first " : "spread", sample[0], (double)float_of(sample[0]), sample[1],
                             (double)float_of(sample[1]), sample[2], (double)float_of(sample[2]), t[k], u[k]);
                }
            }
        }
    }
    const char* forms[2] = {"lg2.approx.ftz", "lg2.approx"};
    for (int i = 0; i < 2; ++i)
        log_line("NaN outputs of %s other than 0x7FFFFFFF: %llu (example %08x)", forms[i], s.nan_not_canonical[i],
                 s.nan_example[i]);
}

// ---- samples for CI replay ----
constexpr int kSampleOutputs = 3;
static const char* kSampleOutputNames[kSampleOutputs] = {"lg2.approx.ftz.f32", "lg2.approx.f32", "__logf"};

__global__ void kernel_lg2_samples(const uint32_t* x_bits, uint32_t* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x = float_of(x_bits[i]);
    out[i] = bits_of(lg2_approx_ftz(x));
    out[n + i] = bits_of(lg2_approx(x));
    out[2 * n + i] = bits_of(__logf(x));  // no fast-math: lg2.approx.f32, then mul.rn.f32 by 0f3F317218
}

// The inputs the replay starts with: every special of either sign, and the
// edges of the binades the wrapper and the table meet at.
static std::vector<uint32_t> lg2_special_inputs() {
    std::vector<uint32_t> inputs;
    for (uint32_t special : kF32Specials) inputs.push_back(special);
    for (uint32_t special : kF32Specials) inputs.push_back(special ^ 0x80000000u);
    for (uint32_t edge : {0x00400000u, 0x00000002u, 0x00800001u, 0x3F7FFFFFu, 0x3F800001u, 0x3F000000u, 0x40000000u,
                          0x3F3504F3u, 0x3FB504F3u, 0x3F7FFFFEu, 0x3F800002u, 0x7F000000u})
        inputs.push_back(edge);
    return inputs;
}

static uint32_t lg2_sample_input(SplitMix64& rng, int category) {
    switch (category) {
        case 0: return rng.u32();                                                          // anything
        case 1: return 0x00800000u + rng.u32() % 0x7F000000u;                              // positive normal
        case 2: return 0x3F800000u + (uint32_t)rng.range(-4096, 4096);                     // near 1
        case 3: return ((uint32_t)rng.range(1, 254) << 23) + (uint32_t)rng.range(-2, 2);  // near powers of two
        case 4: return rng.u32() & 0x007FFFFFu;                                            // positive subnormal
        case 5: return 0x80000000u | (rng.u32() & 0x007FFFFFu);                            // negative subnormal
        case 6: return ((uint32_t)rng.range(124, 130) << 23) | (rng.u32() & 0x7FFFFFu);    // e in -3..3
        case 7: return 0x3F000000u + rng.u32() % 0x01000000u;                              // [0.5, 2)
        case 8: return 0x80000000u | rng.u32();                                            // negative
        case 9: return 0x00800000u + (uint32_t)rng.range(-0x10000, 0x10000);               // the 2^-126 switch
        case 10: return 0x7E800000u + rng.u32() % 0x00FFFFFFu;                             // largest binades
        default: return (0x7F800001u + rng.u32() % 0x7FFFFFu) | (rng.u32() & 0x80000000u);  // NaN payloads
    }
}

static void run_samples(const std::string& out_dir) {
    const int n = 1 << 14;
    const std::vector<uint32_t> specials = lg2_special_inputs();
    std::vector<uint32_t> x(n);
    SplitMix64 rng(0x1062u);
    for (int i = 0; i < n; ++i) x[i] = i < (int)specials.size() ? specials[i] : lg2_sample_input(rng, i % 12);
    uint32_t *dx = to_device(x), *dout;
    PROBE_CHECK(cudaMalloc(&dout, (size_t)n * kSampleOutputs * 4));
    kernel_lg2_samples<<<n / 256, 256>>>(dx, dout, n);
    PROBE_CHECK(cudaDeviceSynchronize());
    std::vector<uint32_t> out = from_device(dout, (size_t)n * kSampleOutputs);
    Writer w(out_dir + "/lg2_ops.bin");
    w.bytes("BXOPS01", 8);
    w.u32(1);
    w.u32(0);
    std::vector<ArraySpec> arrays = {{"x", 4, 1, x.data()}};
    for (int k = 0; k < kSampleOutputs; ++k) arrays.push_back({kSampleOutputNames[k], 4, 0, &out[(size_t)k * n]});
    write_section(w, "lg2 samples", n, arrays);
    log_line("lg2_ops.bin: %d samples, the first %zu the special inputs:", n, specials.size());
    for (size_t i = 0; i < specials.size(); ++i)
        log_line("   x=%08x (%-14.9g) lg2.approx.ftz=%08x (%-14.9g) lg2.approx=%08x (%-14.9g) __logf=%08x", x[i],
                 (double)float_of(x[i]), out[i], (double)float_of(out[i]), out[n + i], (double)float_of(out[n + i]),
                 out[2 * n + i]);
    cudaFree(dx);
    cudaFree(dout);
}

int main(int argc, char** argv) {
    const std::string out_dir = start_capture(argc, argv);
    std::time_t start = std::time(nullptr);

    uint32_t *d_t, *d_u;
    PROBE_CHECK(cudaMalloc(&d_t, kEntries * 4));
    PROBE_CHECK(cudaMalloc(&d_u, kEntries * 4));
    kernel_lg2_tables<<<kEntries / 256, 256>>>(d_t, d_u);
    PROBE_CHECK(cudaDeviceSynchronize());
    std::vector<uint32_t> t = from_device(d_t, kEntries), u = from_device(d_u, kEntries);
    write_table_files(out_dir, t, u);

    Lg2SweepState* d_state;
    PROBE_CHECK(cudaMalloc(&d_state, sizeof(Lg2SweepState)));
    PROBE_CHECK(cudaMemset(d_state, 0, sizeof(Lg2SweepState)));
    cudaEvent_t sweep_start, sweep_stop;
    cudaEventCreate(&sweep_start);
    cudaEventCreate(&sweep_stop);
    cudaEventRecord(sweep_start);
    kernel_lg2_sweep<<<512, 256>>>(d_t, d_u, d_state);  // 2^17 threads: a power-of-two stride, one wave
    cudaEventRecord(sweep_stop);
    PROBE_CHECK(cudaDeviceSynchronize());
    float ms = 0;
    cudaEventElapsedTime(&ms, sweep_start, sweep_stop);
    log_line("sweep kernel: %.1f ms", ms);
    Lg2SweepState* state = new Lg2SweepState;
    PROBE_CHECK(cudaMemcpy(state, d_state, sizeof(Lg2SweepState), cudaMemcpyDeviceToHost));
    run_samples(out_dir);

    // Host-side analysis last, so that a slow host cannot cost the GPU results.
    report_sweep(*state, t, u);
    describe_table("T(k) = lg2.approx.ftz.f32(1 + k*2^-23), exact log2(1 + k*2^-23)", t, 0.0L);
    describe_table("U(k) = lg2.approx.ftz.f32((1 + k*2^-23)/2), exact log2(1 + k*2^-23) - 1", u, -1.0L);
    compare_tables(t, u);
    delete state;
    cudaFree(d_state);
    cudaFree(d_t);
    cudaFree(d_u);
    log_line("capture_lg2 finished in %ld s", (long)(std::time(nullptr) - start));
    std::fclose(info_file);
    return 0;
}
