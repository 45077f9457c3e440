// Fits fused_sum_unit parameters to the narrow-input wgmma captures of
// cuda/capture/capture_lowp.cu (fp8 m64n8k32 into f32 and f16, tf32 m64n8k8
// into f32): replays every output of every tile through the library's
// fused_dot under a candidate unit and its neighbours (one parameter changed
// at a time) and prints the mismatch counts, per tile class for the candidate.
// Build: g++ -O2 -std=c++20 -Iinclude -Itools -o /tmp/analyze_wgmma_lowp tools/analysis/analyze_wgmma_lowp.cpp
// Run:   /tmp/analyze_wgmma_lowp .captures/lowp/wgmma_*.bin   (or the replay files, tests/data/wgmma_*.bin)
#include <bitexact/hardware/mma.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "analysis/capture_files.hpp"

using namespace bitexact;

namespace {

// One output D[i][j] of a tile under some model.
using output_model = std::function<std::uint32_t(const capture::mma_tiles::tile&, int i, int j)>;

// The tf32 value sits in the upper 19 bits of its register: the low 13 are
// ignored, or (the alternative) the register is rounded to nearest tf32.
template <format F>
value<F> input_of(std::uint32_t stored, bool round_register) {
  if constexpr (F == tf32) {
    if (!round_register) return value<F>::from_bits(stored >> 13);
    return convert<tf32>(value<fp32>::from_bits(stored), environment{}).result;
  } else {
    return value<F>::from_bits(stored);
  }
}

template <format Acc, format InA, format InB>
output_model unit_model(const fused_sum_unit& unit, int k_size, bool round_register = false) {
  return [unit, k_size, round_register](const capture::mma_tiles::tile& tile, int i, int j) {
    value<InA> a[32];
    value<InB> b[32];
    for (int k = 0; k < k_size; ++k) {
      a[k] = input_of<InA>(tile.a[i * k_size + k], round_register);
      b[k] = input_of<InB>(tile.b[k * 8 + j], round_register);
    }
    return std::uint32_t{fused_dot<Acc, InA, InB>(unit, std::span<const value<InA>>(a, k_size),
                                                  std::span<const value<InB>>(b, k_size),
                                                  value<Acc>::from_bits(tile.c[i * 8 + j]))
                             .result.bits};
  };
}

// An f16 accumulator run through the fp32 path (an f16 C is exact in fp32),
// then converted to f16 in the given mode: the E8M13 result rounded twice.
template <format InA, format InB>
output_model via_fp32_model(const fused_sum_unit& unit, int k_size, rounding_mode to_f16) {
  const output_model fp32_path = unit_model<fp32, InA, InB>(unit, k_size);
  return [fp32_path, to_f16](const capture::mma_tiles::tile& tile, int i, int j) {
    capture::mma_tiles::tile as_fp32 = tile;
    as_fp32.c[i * 8 + j] = convert<fp32>(value<fp16>::from_bits(tile.c[i * 8 + j]), environment{}).result.bits;
    environment env;
    env.rounding = to_f16;
    env.nans = nan_policy::canonical;
    const value<fp32> wide = value<fp32>::from_bits(fp32_path(as_fp32, i, j));
    value<fp16> narrow = convert<fp16>(wide, env).result;
    if (narrow.is_zero()) narrow = value<fp16>::zero(false);
    return std::uint32_t{narrow.bits};
  };
}

struct candidate {
  std::string name;
  output_model model;
};

struct evaluation {
  std::uint64_t outputs = 0, mismatches = 0;
  std::map<std::uint32_t, std::pair<std::uint64_t, std::uint64_t>> per_class;  // class -> (outputs, mismatches)
};

evaluation evaluate(const capture::mma_tiles& tiles, const output_model& model, int show) {
  evaluation e;
  for (const auto& tile : tiles.tiles)
    for (int i = 0; i < static_cast<int>(tiles.m); ++i)
      for (int j = 0; j < 8; ++j) {
        const std::uint32_t gpu = tile.d[i * 8 + j], ours = model(tile, i, j);
        ++e.outputs;
        ++e.per_class[tile.tile_class].first;
        if (gpu == ours) continue;
        ++e.mismatches;
        ++e.per_class[tile.tile_class].second;
        if (show-- > 0) {
          std::printf("    class %u D[%d][%d]: gpu %08x model %08x C %08x\n      A:", tile.tile_class, i, j, gpu, ours,
                      tile.c[i * 8 + j]);
          for (std::uint32_t k = 0; k < tiles.k; ++k) std::printf(" %x", tile.a[i * tiles.k + k]);
          std::printf("\n      B:");
          for (std::uint32_t k = 0; k < tiles.k; ++k) std::printf(" %x", tile.b[k * 8 + j]);
          std::printf("\n");
        }
      }
  return e;
}

// The candidate first, then its neighbours.
template <format Acc, format InA, format InB>
std::vector<candidate> candidates(const fused_sum_unit& base, int k_size, int narrow, int wide) {
  std::vector<candidate> list;
  auto add = [&](const std::string& name, fused_sum_unit unit) {
    list.push_back({name, unit_model<Acc, InA, InB>(unit, k_size)});
  };
  add("candidate", base);
  for (int bits : {narrow - 2, narrow - 1, narrow + 1, narrow + 2, wide}) {
    fused_sum_unit u = base;
    u.kept_fraction_bits = base.kept_fraction_bits + (bits - narrow);
    add("kept_fraction_bits " + std::to_string(u.kept_fraction_bits), u);
  }
  for (int steps : {4, 8, 16}) {
    if (steps >= base.products_per_step) continue;
    fused_sum_unit u = base;
    u.products_per_step = steps;
    add("products_per_step " + std::to_string(steps), u);
  }
  for (int zero : {base.zero_term_exponent - 1, base.zero_term_exponent + 1, -127, -126, -125, -120, -100, -149, -1000}) {
    fused_sum_unit u = base;
    u.zero_term_exponent = zero;
    add("zero_term_exponent " + std::to_string(zero), u);
  }
  for (rounding_mode r : {rounding_mode::nearest_even, rounding_mode::toward_zero}) {
    fused_sum_unit u = base;
    (Acc == fp16 ? u.fp16_rounding : u.fp32_rounding) = r;
    if (u == base) continue;
    add(std::string("output rounding ") + (r == rounding_mode::nearest_even ? "RN" : "RZ"), u);
  }
  if (Acc == fp32) {  // the unit rounds to E8M13 into fp32 accumulators only
    fused_sum_unit u = base;
    u.rounds_to_e8m13 = !base.rounds_to_e8m13;
    add(std::string("rounds_to_e8m13 ") + (u.rounds_to_e8m13 ? "true" : "false"), u);
  }
  {
    fused_sum_unit u = base;
    u.canonical_nan = false;
    add("canonical_nan false", u);
  }
  if constexpr (InA == tf32)
    list.push_back({"tf32 inputs rounded to nearest from the register", unit_model<Acc, InA, InB>(base, k_size, true)});
  {
    fused_sum_unit u = base;
    u.never_negative_zero = false;
    add("never_negative_zero false", u);
  }
  {
    fused_sum_unit u = base;
    u.overflow_to_infinity = false;
    add("overflow_to_infinity false", u);
  }
  if constexpr (Acc == fp16) {  // the E8M13 step before an fp16 accumulator too
    for (rounding_mode to_e8m13 : {rounding_mode::toward_zero, rounding_mode::nearest_even})
      for (rounding_mode to_f16 : {rounding_mode::nearest_even, rounding_mode::toward_zero}) {
        fused_sum_unit via = base;
        via.fp32_rounding = to_e8m13;
        via.rounds_to_e8m13 = true;
        list.push_back({std::string("E8M13 ") + (to_e8m13 == rounding_mode::toward_zero ? "RZ" : "RN") +
                            ", then " + (to_f16 == rounding_mode::toward_zero ? "RZ" : "RN") + " to f16",
                        via_fp32_model<InA, InB>(via, k_size, to_f16)});
      }
  }
  return list;
}

// The zero's sign: how often the GPU returns -0, and on how many outputs
// every term is a negative zero (IEEE's sum is then -0 in every rounding).
template <format Acc, format InA, format InB>
void count_negative_zeros(const capture::mma_tiles& tiles) {
  std::uint64_t gpu_negative_zero = 0, all_terms_negative_zero = 0, gpu_positive_there = 0;
  const std::uint32_t negative_zero = value<Acc>::zero(true).bits;
  for (const auto& tile : tiles.tiles)
    for (std::uint32_t i = 0; i < tiles.m; ++i)
      for (std::uint32_t j = 0; j < 8; ++j) {
        gpu_negative_zero += tile.d[i * 8 + j] == negative_zero;
        bool every = tile.c[i * 8 + j] == negative_zero;
        for (std::uint32_t k = 0; every && k < tiles.k; ++k) {
          const value<InA> a = input_of<InA>(tile.a[i * tiles.k + k], false);
          const value<InB> b = input_of<InB>(tile.b[k * 8 + j], false);
          const bool zero_product = (a.is_zero() && !b.is_nan() && !b.is_inf()) || (b.is_zero() && !a.is_nan() && !a.is_inf());
          every = zero_product && a.sign() != b.sign();
        }
        if (!every) continue;
        ++all_terms_negative_zero;
        gpu_positive_there += tile.d[i * 8 + j] == 0;
      }
  std::printf("  zero signs: the GPU returned -0 %llu times; %llu outputs sum negative zeros only, the GPU gave +0 to %llu\n",
              static_cast<unsigned long long>(gpu_negative_zero), static_cast<unsigned long long>(all_terms_negative_zero),
              static_cast<unsigned long long>(gpu_positive_there));
}

template <format Acc, format InA, format InB>
void analyze(const capture::mma_tiles& tiles, const fused_sum_unit& base, int narrow, int wide) {
  count_negative_zeros<Acc, InA, InB>(tiles);
  const auto list = candidates<Acc, InA, InB>(base, static_cast<int>(tiles.k), narrow, wide);
  for (std::size_t c = 0; c < list.size(); ++c) {
    const evaluation e = evaluate(tiles, list[c].model, c == 0 ? 4 : 0);
    std::printf("  %-46s outputs %8llu  mismatches %8llu\n", list[c].name.c_str(),
                static_cast<unsigned long long>(e.outputs), static_cast<unsigned long long>(e.mismatches));
    if (c == 0)
      for (const auto& [cls, counts] : e.per_class)
        std::printf("      class %3u: outputs %7llu  mismatches %llu\n", cls, static_cast<unsigned long long>(counts.first),
                    static_cast<unsigned long long>(counts.second));
  }
}

// The candidate: sm90_tensor_core_fp8 for fp8 captures, sm90_tensor_core_k8
// for tf32. BITEXACT_LOWP_STEP, _BITS, _ZERO (numbers), _F16_RZ, _F32_RN and
// _E8M13 (0 or 1) replace one of its fields, to search from another start.
fused_sum_unit base_unit(std::uint32_t variant) {
  fused_sum_unit unit = capture::is_tf32_variant(variant) ? sm90_tensor_core_k8 : sm90_tensor_core_fp8;
  if (const char* v = std::getenv("BITEXACT_LOWP_STEP")) unit.products_per_step = std::atoi(v);
  if (const char* v = std::getenv("BITEXACT_LOWP_BITS")) unit.kept_fraction_bits = std::atoi(v);
  if (const char* v = std::getenv("BITEXACT_LOWP_ZERO")) unit.zero_term_exponent = std::atoi(v);
  if (const char* v = std::getenv("BITEXACT_LOWP_F16_RZ")) unit.fp16_rounding = *v == '1' ? rounding_mode::toward_zero : rounding_mode::nearest_even;
  if (const char* v = std::getenv("BITEXACT_LOWP_F32_RN")) unit.fp32_rounding = *v == '1' ? rounding_mode::nearest_even : rounding_mode::toward_zero;
  if (const char* v = std::getenv("BITEXACT_LOWP_E8M13")) unit.rounds_to_e8m13 = *v == '1';
  return unit;
}

}  // namespace

int main(int argc, char** argv) try {
  for (int f = 1; f < argc; ++f) {
    // A raw capture (BXMMA01), or a replay file cut from one (tests/data, BXDATA1).
    const std::string path = argv[f];
    const std::vector<unsigned char> bytes = capture::read_bytes(path);
    const bool replay = bytes.size() >= 8 && std::memcmp(bytes.data(), capture::replay_magic, 8) == 0;
    const capture::mma_tiles tiles = replay ? capture::read_tiles(capture::read_replay_file(path)) : capture::read_mma(path);
    const fused_sum_unit base = base_unit(tiles.variant);
    std::printf("%s: variant %u, %zu tiles of %ux%ux%u; candidate {%d products, %d bits, zero %d, e8m13 %d}\n", argv[f],
                tiles.variant, tiles.tiles.size(), tiles.m, tiles.n, tiles.k, base.products_per_step,
                base.kept_fraction_bits, base.zero_term_exponent, base.rounds_to_e8m13);
    const int narrow = base.kept_fraction_bits, wide = capture::is_tf32_variant(tiles.variant) ? 30 : 25;
    switch (tiles.variant) {
      case 4: analyze<fp32, e4m3, e4m3>(tiles, base, narrow, wide); break;
      case 5: analyze<fp32, e4m3, e5m2>(tiles, base, narrow, wide); break;
      case 6: analyze<fp32, e5m2, e4m3>(tiles, base, narrow, wide); break;
      case 7: analyze<fp32, e5m2, e5m2>(tiles, base, narrow, wide); break;
      case 8: analyze<fp16, e4m3, e4m3>(tiles, base, narrow, wide); break;
      case 9: analyze<fp16, e4m3, e5m2>(tiles, base, narrow, wide); break;
      case 10: analyze<fp16, e5m2, e4m3>(tiles, base, narrow, wide); break;
      case 11: analyze<fp16, e5m2, e5m2>(tiles, base, narrow, wide); break;
      case 12: analyze<fp32, tf32, tf32>(tiles, base, narrow, wide); break;
      default: std::printf("  not a narrow-input capture: skipped\n");
    }
    std::fflush(stdout);
  }
  return 0;
} catch (const std::exception& error) {
  std::fprintf(stderr, "analyze_wgmma_lowp: %s\n", error.what());
  return 1;
}
