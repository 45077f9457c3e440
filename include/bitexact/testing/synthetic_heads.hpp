// Synthetic attention heads whose query rows have a chosen number of scores
// tied at the row maximum, for measuring the rounding bias of attention
// kernels (docs/bias.md, "Statistics"). Every element is drawn from a
// counter-based generator, splitmix64 of (seed, head, tensor, element index),
// and built from small integers times powers of two, so that every value is a
// bf16 exactly and an independent NumPy implementation
// (cuda/attention/synthetic_heads.py) produces the same bits.
//
// A head has `keys` keys and `rows` query rows, head dim d (at least 32).
// Dimensions of Q and K:
//   0          level:    Q[i][0] = lambda_i (the row's maximum score), K[j][0] = 1
//   1          gap:      Q[i][1] = 1, K[j][1] = -gamma_j for a background key, 0 for a tied one
//   2 .. 17    groups:   K[j][2 + g] = 1 for the tied keys of group g; Q[i][2 + g] = 0 for the
//                        row's own group g_i = i mod groups, -rho_{i,g} for the other groups
//   18 .. d-1  noise:    background keys and every query row: k * 2^-10, k uniform in [-128, 127];
//                        tied keys 0
// so that the score of row i (a real dot product) is exactly lambda_i at the t
// tied keys of its group (identical K rows), lambda_i - rho_{i,g} at the keys
// of another group g, and lambda_i - gamma_j + noise at a background key. With
// gamma and rho at least 8 and |noise| at most (d - 18) 2^-6 (1.72 for d 128)
// every other score lies at least 6 below the maximum.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "../core/format.hpp"
#include "../core/operations.hpp"

namespace bitexact::testing {

// The scenario axes of one head.
enum class max_kind { positive, small_positive, negative, negative_near_zero };
enum class tie_placement { one_block, across_blocks, sink };

inline constexpr std::array<max_kind, 4> every_max_kind = {max_kind::positive, max_kind::small_positive,
                                                           max_kind::negative, max_kind::negative_near_zero};
inline constexpr std::array<tie_placement, 3> every_tie_placement = {tie_placement::one_block,
                                                                     tie_placement::across_blocks, tie_placement::sink};

inline std::string_view name_of(max_kind kind) {
  switch (kind) {
    case max_kind::positive: return "positive";
    case max_kind::small_positive: return "small_positive";
    case max_kind::negative: return "negative";
    case max_kind::negative_near_zero: return "negative_near_zero";
  }
  return "";
}

inline std::string_view name_of(tie_placement placement) {
  switch (placement) {
    case tie_placement::one_block: return "one_block";
    case tie_placement::across_blocks: return "across_blocks";
    case tie_placement::sink: return "sink";
  }
  return "";
}

// The row maximum lambda (unscaled) of each kind: sign (1 + k/128) 2^e, k uniform
// in [0, 127], e uniform in [low_exponent, low_exponent + exponents).
struct max_range {
  int low_exponent = 0, exponents = 0;
  bool negative = false;
};

inline max_range range_of(max_kind kind) {
  switch (kind) {
    case max_kind::positive: return {2, 3, false};             // [4, 32)
    case max_kind::small_positive: return {-11, 4, false};     // [2^-11, 2^-7)
    case max_kind::negative: return {2, 3, true};              // -[4, 32)
    case max_kind::negative_near_zero: return {-11, 4, true};  // -[2^-11, 2^-7)
  }
  return {};
}

// One head's scenario cell and size.
struct head_spec {
  int head_dim = 64;   // d: a multiple of 16 from 32 to 256
  int keys = 1024;     // N, a multiple of tile, at most 65536
  int rows = 64;       // query rows, 1 to 65536
  int tile = 128;      // keys of the kernel's K/V block, which the placements refer to
  max_kind maximum = max_kind::positive;
  tie_placement placement = tie_placement::one_block;
  int ties = 1;        // t: keys tied at each row's maximum, 1 to min(64, tile)
  double v_mean = 0;   // V's and dO's mean: one of -1, -0.5, 0, 0.5, 1
};

inline constexpr int max_groups = 16;
inline constexpr int first_noise_dim = 2 + max_groups;

// How many tie groups the head holds: 16, fewer where the placement leaves
// no room (one_block: floor(tile / t) groups a block; across_blocks: each
// group takes ceil(t / blocks) keys of every block), 1 for a sink.
inline int group_count(const head_spec& spec) {
  const int blocks = spec.keys / spec.tile;
  switch (spec.placement) {
    case tie_placement::one_block: return std::min(max_groups, blocks * (spec.tile / spec.ties));
    case tie_placement::across_blocks: return std::min(max_groups, spec.tile / ((spec.ties + blocks - 1) / blocks));
    case tie_placement::sink: return 1;
  }
  return 0;
}

// std::invalid_argument unless the spec is one the generator builds.
inline void check_spec(const head_spec& spec) {
  const auto fail = [](const std::string& what) { throw std::invalid_argument("synthetic_head: " + what); };
  if (spec.head_dim < 32 || spec.head_dim > 256 || spec.head_dim % 16 != 0)
    fail("head_dim must be a multiple of 16 from 32 to 256");
  if (spec.tile < 16 || spec.tile % 16 != 0) fail("tile must be a multiple of 16");
  if (spec.keys < spec.tile || spec.keys > 65536 || spec.keys % spec.tile != 0)
    fail("keys must be a multiple of tile, at most 65536");
  if (spec.rows < 1 || spec.rows > 65536) fail("rows must be from 1 to 65536");
  if (spec.ties < 1 || spec.ties > 64 || spec.ties > spec.tile) fail("ties must be from 1 to min(64, tile)");
  if (spec.v_mean != -1 && spec.v_mean != -0.5 && spec.v_mean != 0 && spec.v_mean != 0.5 && spec.v_mean != 1)
    fail("v_mean must be -1, -0.5, 0, 0.5 or 1 (V = v_mean + k 2^-7 is then a bf16 exactly)");
}

// The key index of tie k (0 <= k < ties) of group g.
inline int tied_key(const head_spec& spec, int group, int k) {
  const int blocks = spec.keys / spec.tile;
  switch (spec.placement) {
    case tie_placement::one_block:
      return (group % blocks) * spec.tile + (group / blocks) * spec.ties + k;
    case tie_placement::across_blocks: {
      const int per_block = (spec.ties + blocks - 1) / blocks;
      return ((group + k) % blocks) * spec.tile + group * per_block + k / blocks;
    }
    case tie_placement::sink: return k;
  }
  return 0;
}

// The counter-based generator: splitmix64's output function of x + golden gamma.
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  std::uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Which tensor (or per-row, per-key quantity) a draw belongs to.
enum class stream : std::uint64_t { q = 1, k = 2, v = 3, d_o = 4, row_max = 5, key_gap = 6 };

// The draw of element `index` of `what` in head `head`: splitmix64(splitmix64(seed) xor
// (head << 40 | stream << 32 | index)). head < 2^24, index < 2^32 (keys x d and rows x d are below 2^24).
constexpr std::uint64_t draw(std::uint64_t seed, std::uint64_t head, stream what, std::uint64_t index) {
  return splitmix64(splitmix64(seed) ^ (head << 40 | static_cast<std::uint64_t>(what) << 32 | index));
}

// A draw's small signed integer: its top 8 bits minus 128, in [-128, 127].
constexpr int signed_byte(std::uint64_t bits) { return static_cast<int>(bits >> 56) - 128; }

// A draw as (1 + k/128) 2^e: k = its low 7 bits, e = low_exponent + ((bits >> 32) * exponents >> 32).
inline double magnitude_of(std::uint64_t bits, int low_exponent, int exponents) {
  const int k = static_cast<int>(bits & 127);
  const int e = low_exponent + static_cast<int>(((bits >> 32) * static_cast<std::uint64_t>(exponents)) >> 32);
  return (1.0 + k / 128.0) * std::ldexp(1.0, e);
}

// One head, row-major: q and d_o [rows][d], k and v [keys][d].
struct synthetic_head {
  head_spec spec;
  int groups = 0;
  std::vector<int> group_of_row;    // g_i
  std::vector<int> group_of_key;    // the key's group, -1 for a background key
  std::vector<double> row_max;      // lambda_i, unscaled (exactly the tied keys' score)
  std::vector<bfloat16> q, k, v, d_o;
};

// The head number `head` of the run seeded `seed` (see the top of the file; docs/bias.md spells out every draw).
inline synthetic_head make_synthetic_head(const head_spec& spec, std::uint64_t seed, std::uint64_t head) {
  check_spec(spec);
  if (head >= (std::uint64_t{1} << 24)) throw std::invalid_argument("synthetic_head: head must be below 2^24");
  const std::size_t d = static_cast<std::size_t>(spec.head_dim), keys = static_cast<std::size_t>(spec.keys),
                    rows = static_cast<std::size_t>(spec.rows);
  synthetic_head out{spec, group_count(spec), {}, std::vector<int>(keys, -1), {}, {}, {}, {}, {}};
  for (int g = 0; g < out.groups; ++g)
    for (int t = 0; t < spec.ties; ++t) out.group_of_key[static_cast<std::size_t>(tied_key(spec, g, t))] = g;
  const auto exact = [](double x) { return from_double<bf16>(x).result; };  // every value built here is a bf16
  const auto noise = [&](stream what, std::size_t index) { return signed_byte(draw(seed, head, what, index)) * 0x1p-10; };
  const max_range range = range_of(spec.maximum);

  out.q.resize(rows * d), out.d_o.resize(rows * d);
  for (std::size_t i = 0; i < rows; ++i) {
    const int own = static_cast<int>(i % static_cast<std::size_t>(out.groups));
    const double lambda = (range.negative ? -1 : 1) *
                          magnitude_of(draw(seed, head, stream::row_max, i), range.low_exponent, range.exponents);
    out.group_of_row.push_back(own);
    out.row_max.push_back(lambda);
    for (std::size_t c = 0; c < d; ++c) {
      const std::size_t at = i * d + c;
      double x = 0;
      if (c == 0) x = lambda;
      else if (c == 1) x = 1;
      else if (c < first_noise_dim) {
        const int g = static_cast<int>(c) - 2;
        if (g < out.groups && g != own) x = -magnitude_of(draw(seed, head, stream::q, at), 3, 3);  // rho in [8, 64)
      } else {
        x = noise(stream::q, at);
      }
      out.q[at] = exact(x);
      out.d_o[at] = exact(spec.v_mean + signed_byte(draw(seed, head, stream::d_o, at)) * 0x1p-7);
    }
  }
  out.k.resize(keys * d), out.v.resize(keys * d);
  for (std::size_t j = 0; j < keys; ++j) {
    const int group = out.group_of_key[j];
    for (std::size_t c = 0; c < d; ++c) {
      const std::size_t at = j * d + c;
      double x = 0;
      if (c == 0) x = 1;
      else if (c == 1) x = group < 0 ? -magnitude_of(draw(seed, head, stream::key_gap, j), 3, 3) : 0;  // gamma in [8, 64)
      else if (c < first_noise_dim) x = group == static_cast<int>(c) - 2 ? 1 : 0;
      else x = group < 0 ? noise(stream::k, at) : 0;
      out.k[at] = exact(x);
      out.v[at] = exact(spec.v_mean + signed_byte(draw(seed, head, stream::v, at)) * 0x1p-7);
    }
  }
  return out;
}

}  // namespace bitexact::testing
