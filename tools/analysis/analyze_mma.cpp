// Fits a fused multi-term adder model to the tensor-core captures: each
// product exact, every term cut (toward zero) to F fraction bits below the
// largest term exponent, an exact sum, one final rounding. Prints mismatch
// counts per tile class for a grid of model variants.
// Build: g++ -O2 -std=c++20 -o analyze_mma analyze_mma.cpp
// Run:   ./analyze_mma .captures/mma_bf16_f32.bin [more files]
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "capture_files.hpp"
#include "reference_round.hpp"

using reference::bf16_format;
using reference::float_format;
using reference::fp16_format;
using reference::fp32_format;
using reference::rounding;

namespace {

enum class value_kind { zero, finite, infinity, nan };
struct decoded_value {
  value_kind kind;
  bool negative;
  std::uint64_t significand;  // integer, value = significand * 2^lsb_exponent
  int lsb_exponent;
  int exponent;  // unbiased exponent of the leading significand position (min_exponent for subnormals)
};
decoded_value decode(std::uint32_t bits, const float_format& f) {
  decoded_value v{};
  v.negative = (bits >> (f.exponent_bits + f.fraction_bits)) & 1;
  const std::uint32_t field = (bits >> f.fraction_bits) & f.max_exponent_field();
  const std::uint32_t fraction = bits & ((1u << f.fraction_bits) - 1);
  if (field == f.max_exponent_field()) {
    v.kind = fraction ? value_kind::nan : value_kind::infinity;
    return v;
  }
  if (field == 0 && fraction == 0) {
    v.kind = value_kind::zero;
    return v;
  }
  v.kind = value_kind::finite;
  v.exponent = field ? static_cast<int>(field) - f.bias : f.min_exponent();
  v.significand = field ? (fraction | (1u << f.fraction_bits)) : fraction;
  v.lsb_exponent = v.exponent - f.fraction_bits;
  return v;
}

// One hypothesis about the tensor core's fused multi-term adder.
struct adder_model {
  int fraction_bits = 25;     // F
  int zero_exponent = -133;   // exponent given to zero terms (INT_MIN/2: ignored)
  bool zero_c_counts = true;  // does a zero C take part in e_max?
  rounding final_rounding = rounding::toward_zero;
  bool overflow_saturates = false;   // RZ overflow gives max finite instead of inf
  int chunk = 16;                    // products per fused step (8: two chained steps)
  bool normalized_products = false;  // product exponent after normalising to [1,2)
  int f16_path = 0;                  // f16 output: 0 direct, 1 via f32 RZ then RN to f16
  std::string description() const {
    char s[200];
    std::snprintf(s, sizeof s, "F=%d zero_exp=%s%s %s chunk=%d%s%s%s", fraction_bits,
                  zero_exponent < -100000 ? "none" : std::to_string(zero_exponent).c_str(),
                  zero_c_counts ? "" : "(C zero excluded)", final_rounding == rounding::toward_zero ? "RZ" : "RN",
                  chunk, normalized_products ? " normprod" : "", overflow_saturates ? " sat" : "",
                  f16_path ? " f16-via-f32" : "");
    return s;
  }
};

// Rounds (-1)^negative * magnitude * 2^exponent to format f, toward zero or to nearest even.
std::uint32_t round_pack(bool negative, std::uint64_t magnitude, int exponent, const float_format& f, rounding mode,
                         bool saturate) {
  const std::uint32_t sign = negative ? f.sign_bit() : 0;
  if (magnitude == 0) return sign;
  const int leading_exponent = 63 - __builtin_clzll(magnitude) + exponent;
  const int quantum = (leading_exponent < f.min_exponent() ? f.min_exponent() : leading_exponent) - f.fraction_bits;
  const int shift = quantum - exponent;
  std::uint64_t kept;
  if (shift <= 0) {
    kept = magnitude << -shift;
  } else {
    std::uint64_t discarded;
    if (shift >= 64) {
      kept = 0;
      discarded = magnitude;
    } else {
      kept = magnitude >> shift;
      discarded = magnitude & ((1ull << shift) - 1);
    }
    if (mode == rounding::nearest_even && shift <= 64) {
      const std::uint64_t half = 1ull << (shift - 1);
      if (discarded > half || (discarded == half && (kept & 1))) ++kept;
    }
  }
  std::uint64_t bits;
  if (leading_exponent < f.min_exponent()) {
    bits = kept;  // subnormal (kept = 2^fraction_bits becomes the minimum normal)
  } else {
    bits = (static_cast<std::uint64_t>(leading_exponent + f.bias - 1) << f.fraction_bits) + kept;
  }
  const std::uint64_t infinity = f.infinity_bits();
  if (bits >= infinity) bits = (mode == rounding::toward_zero && saturate) ? infinity - 1 : infinity;
  return sign | static_cast<std::uint32_t>(bits);
}

// A product or the accumulator, as the fused adder sees it.
struct term {
  value_kind kind;
  bool negative;
  std::uint64_t significand;
  int lsb_exponent, exponent;
};

// One fused step over terms; returns accumulator bits in format out.
std::uint32_t fused_sum(const std::vector<term>& terms, const adder_model& model, const float_format& out,
                        rounding mode) {
  bool nan = false, pos_inf = false, neg_inf = false;
  for (const term& t : terms) {
    if (t.kind == value_kind::nan) nan = true;
    if (t.kind == value_kind::infinity) (t.negative ? neg_inf : pos_inf) = true;
  }
  const std::uint32_t inf = out.infinity_bits();
  const std::uint32_t sign_bit = out.sign_bit();
  if (nan || (pos_inf && neg_inf)) return inf | (sign_bit - 1);  // canonical NaN guess: all ones
  if (pos_inf) return inf;
  if (neg_inf) return inf | sign_bit;
  int e_max = INT_MIN;
  bool any_nonzero = false, all_negative = true;
  for (const term& t : terms) {
    if (t.kind == value_kind::zero) {
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
  for (const term& t : terms) {
    if (t.kind != value_kind::finite) continue;
    const int shift = t.lsb_exponent - quantum;
    const std::uint64_t kept = shift >= 0 ? t.significand << shift : (shift <= -64 ? 0 : t.significand >> -shift);
    sum += t.negative ? -static_cast<__int128>(kept) : static_cast<__int128>(kept);
  }
  if (sum == 0) return 0;
  const bool negative = sum < 0;
  const unsigned __int128 magnitude =
      negative ? -static_cast<unsigned __int128>(sum) : static_cast<unsigned __int128>(sum);
  return round_pack(negative, static_cast<std::uint64_t>(magnitude), quantum, out, mode, model.overflow_saturates);
}

term product_term(const decoded_value& a, const decoded_value& b, const adder_model& model) {
  term t{};
  t.negative = a.negative != b.negative;
  if (a.kind == value_kind::nan || b.kind == value_kind::nan) {
    t.kind = value_kind::nan;
  } else if (a.kind == value_kind::infinity || b.kind == value_kind::infinity) {
    t.kind = (a.kind == value_kind::zero || b.kind == value_kind::zero) ? value_kind::nan : value_kind::infinity;
  } else if (a.kind == value_kind::zero || b.kind == value_kind::zero) {
    t.kind = value_kind::zero;
    t.exponent = model.zero_exponent;
  } else {
    t.kind = value_kind::finite;
    t.significand = a.significand * b.significand;
    t.lsb_exponent = a.lsb_exponent + b.lsb_exponent;
    t.exponent = a.exponent + b.exponent;
    if (model.normalized_products) {
      t.exponent = 63 - __builtin_clzll(t.significand) + t.lsb_exponent;
    }
  }
  return t;
}
term accumulator_term(const decoded_value& c, const adder_model& model) {
  term t{c.kind, c.negative, c.significand, c.lsb_exponent, c.exponent};
  if (c.kind == value_kind::zero) t.exponent = model.zero_c_counts ? model.zero_exponent : INT_MIN / 2;
  return t;
}

const float_format& accumulator_format(const capture::mma_tiles& tiles) {
  return tiles.acc_bytes == 2 ? fp16_format : fp32_format;
}

// Output (i, j) of a tile under the model: A is [m][16], B [16][8], C and D [m][8].
std::uint32_t model_output(const capture::mma_tiles& tiles, const capture::mma_tiles::tile& tile, int i, int j,
                           const adder_model& model) {
  const bool fp16_inputs = tiles.variant == 1 || tiles.variant == 2;
  const float_format& in = fp16_inputs ? fp16_format : bf16_format;
  const float_format& acc = accumulator_format(tiles);
  const decoded_value c = decode(tile.c[i * 8 + j], acc);
  std::uint32_t running = 0;
  const term c_term = accumulator_term(c, model);
  for (int first_k = 0; first_k < 16; first_k += model.chunk) {
    std::vector<term> terms;
    for (int k = first_k; k < first_k + model.chunk; ++k)
      terms.push_back(product_term(decode(tile.a[i * 16 + k], in), decode(tile.b[k * 8 + j], in), model));
    terms.push_back(first_k == 0 ? c_term : accumulator_term(decode(running, acc), model));
    const bool last = first_k + model.chunk >= 16;
    if (&acc == &fp16_format && model.f16_path == 1) {
      const std::uint32_t wide = fused_sum(terms, model, fp32_format, rounding::toward_zero);
      // Then nearest-even to f16, by way of the f32's exact value.
      const decoded_value w = decode(wide, fp32_format);
      if (w.kind == value_kind::finite)
        running = round_pack(w.negative, w.significand, w.lsb_exponent, fp16_format, rounding::nearest_even, false);
      else if (w.kind == value_kind::zero)
        running = w.negative ? 0x8000 : 0;
      else
        running = w.kind == value_kind::nan ? 0x7FFF : (w.negative ? 0xFC00 : 0x7C00);
    } else {
      running = fused_sum(terms, model, acc, last ? model.final_rounding : rounding::toward_zero);
    }
  }
  return running;
}

// Equal bits, or both NaN.
bool same(std::uint32_t gpu, std::uint32_t model, const float_format& f) {
  const std::uint32_t magnitude_mask = f.sign_bit() - 1;
  const bool gpu_nan = (gpu & magnitude_mask) > f.infinity_bits(),
             model_nan = (model & magnitude_mask) > f.infinity_bits();
  if (gpu_nan || model_nan) return gpu_nan && model_nan;
  return gpu == model;
}

// The structured tile classes of cuda/capture/README.md (100 and 101 are the layout checks).
constexpr const char* tile_class_names[] = {"baseline", "fullrange", "subnormal",  "zeros",    "infnan",   "cancel",
                                            "spread",   "maxpos",    "Cdominates", "nearties", "overflow", "negsums"};

struct evaluation {
  long compared = 0, wrong = 0;
  std::map<std::uint32_t, std::pair<long, long>> per_class;  // compared, wrong
};

// Every output of every tile under the model; prints the first show mismatches in full.
evaluation evaluate(const capture::mma_tiles& tiles, const adder_model& model, int show = 0) {
  evaluation result;
  const float_format& acc = accumulator_format(tiles);
  int shown = 0;
  for (std::size_t t = 0; t < tiles.tiles.size(); ++t) {
    const capture::mma_tiles::tile& tile = tiles.tiles[t];
    for (std::uint32_t i = 0; i < tiles.m; ++i)
      for (std::uint32_t j = 0; j < tiles.n; ++j) {
        const std::uint32_t expected = model_output(tiles, tile, i, j, model), gpu = tile.d[i * 8 + j];
        auto& [class_compared, class_wrong] = result.per_class[tile.tile_class];
        ++class_compared;
        ++result.compared;
        if (same(gpu, expected, acc)) continue;
        ++class_wrong;
        ++result.wrong;
        if (shown < show) {
          ++shown;
          std::printf("    tile %zu class %u (%u,%u): got %08x model %08x  C=%08x\n", t, tile.tile_class, i, j, gpu,
                      expected, tile.c[i * 8 + j]);
          std::printf("      A row:");
          for (int k = 0; k < 16; ++k) std::printf(" %04x", tile.a[i * 16 + k]);
          std::printf("\n      B col:");
          for (int k = 0; k < 16; ++k) std::printf(" %04x", tile.b[k * 8 + j]);
          std::printf("\n");
        }
      }
  }
  return result;
}

void print_evaluation(const adder_model& model, const evaluation& result) {
  std::printf("  %-60s mismatches %ld / %ld  [", model.description().c_str(), result.wrong, result.compared);
  for (const auto& [tile_class, counts] : result.per_class)
    if (counts.second) std::printf(" %s:%ld", tile_class < 12 ? tile_class_names[tile_class] : "layout", counts.second);
  std::printf(" ]\n");
}

}  // namespace

int main(int argc, char** argv) try {
  for (int file = 1; file < argc; ++file) {
    const capture::mma_tiles tiles = capture::read_mma(argv[file]);
    std::printf("== %s: variant %u, M=%u N=%u K=%u, %zu tiles, accumulator %u bytes\n", argv[file], tiles.variant,
                tiles.m, tiles.n, tiles.k, tiles.tiles.size(), tiles.acc_bytes);
    // The NaN encodings seen.
    std::map<std::uint32_t, long> nans;
    const float_format& acc = accumulator_format(tiles);
    for (const capture::mma_tiles::tile& tile : tiles.tiles)
      for (std::uint32_t d : tile.d)
        if ((d & (acc.sign_bit() - 1)) > acc.infinity_bits()) nans[d]++;
    std::printf("  NaN outputs:");
    for (auto& [bits, n] : nans) std::printf(" %08x x%ld", bits, n);
    std::printf("\n");
    std::vector<adder_model> grid;
    const adder_model base;
    for (int F : {23, 24, 25, 26, 27}) {
      adder_model m = base;
      m.fraction_bits = F;
      grid.push_back(m);
    }
    for (int z : {-126, -127, -128, -129, -130, -131, -132, -134, -140, -150, INT_MIN / 2}) {
      adder_model m = base;
      m.zero_exponent = z;
      grid.push_back(m);
    }
    {
      adder_model m = base;
      m.zero_c_counts = false;
      grid.push_back(m);
      m = base;
      m.final_rounding = rounding::nearest_even;
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
      if (tiles.acc_bytes == 2) {
        for (int F : {21, 22, 23, 24, 26, 27}) {
          m = base;
          m.final_rounding = rounding::nearest_even;
          m.fraction_bits = F;
          grid.push_back(m);
        }
        for (rounding r : {rounding::toward_zero, rounding::nearest_even})
          for (int path : {0, 1}) {
            m = base;
            m.final_rounding = r;
            m.f16_path = path;
            grid.push_back(m);
          }
      }
    }
    adder_model best;
    long best_wrong = -1;
    for (const adder_model& m : grid) {
      const evaluation result = evaluate(tiles, m);
      print_evaluation(m, result);
      if (best_wrong < 0 || result.wrong < best_wrong) {
        best_wrong = result.wrong;
        best = m;
      }
    }
    std::printf("  best: %s (%ld mismatches); first mismatches:\n", best.description().c_str(), best_wrong);
    evaluate(tiles, best, 6);
  }
} catch (const std::exception& error) {
  std::fprintf(stderr, "analyze_mma: %s\n", error.what());
  return 1;
}
