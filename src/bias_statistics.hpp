// The arithmetic of `bitexact bias statistics` (src/bias_statistics.cpp):
// the exact attention output of one query row in double (from bf16 inputs, or
// from e4m3 inputs quantised per tensor and dequantised), the per-row errors
// the command averages, and the mean with its 95% confidence interval.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstddef>
#include <limits>
#include <span>
#include <vector>

#include <bitexact/core/format.hpp>
#include <bitexact/core/operations.hpp>
#include <bitexact/hardware/alu.hpp>

namespace bitexact::cli::statistics {

// A value as the exact output reads it: a bf16 exactly, or an already
// dequantised double.
inline double value_of(bfloat16 x) { return to_double(x); }
inline double value_of(double x) { return x; }

// softmax(scale s) V of one query row from its scores s (double) against V
// [keys][d]: exp(scale (s - max)) and the two sums, each within a few units of
// 2^-53 relative.
template <class Element>
std::vector<double> softmax_times_v(std::span<const double> scores, std::span<const Element> v, std::size_t d,
                                    double scale) {
  const double max = *std::max_element(scores.begin(), scores.end());
  std::vector<double> o(d, 0.0);
  double weight_sum = 0;
  for (std::size_t j = 0; j < scores.size(); ++j) {
    const double p = std::exp(scale * (scores[j] - max));
    weight_sum += p;
    for (std::size_t c = 0; c < d; ++c) o[c] += p * value_of(v[j * d + c]);
  }
  for (double& x : o) x /= weight_sum;
  return o;
}

// softmax(scale q K^T) V of one query row, in double: the scores as sums of
// bf16 products (exact in double while they span fewer than 53 bits, as the
// synthetic heads' do: multiples of 2^-20 below 2^7), then softmax_times_v.
inline std::vector<double> exact_attention_row(std::span<const bfloat16> q, std::span<const bfloat16> k,
                                               std::span<const bfloat16> v, double scale) {
  const std::size_t d = q.size(), keys = k.size() / d;
  std::vector<double> scores(keys);
  for (std::size_t j = 0; j < keys; ++j) {
    double sum = 0;
    for (std::size_t c = 0; c < d; ++c) sum += to_double(q[c]) * to_double(k[j * d + c]);
    scores[j] = sum;
  }
  return softmax_times_v(std::span<const double>(scores), v, d, scale);
}

// A tensor quantised to e4m3 with one scale, as Transformer Engine's per-tensor
// recipe: descale = RN(amax / 448) in fp32 (1 when amax is 0), each element
// x8 = cvt.rn.satfinite.e4m3(RN(x / descale)) (div.rn.f32, then the
// conversion); x8 * descale is the value the kernel computes with.
struct e4m3_tensor {
  std::vector<std::uint8_t> bits;
  float32 descale{};
};

inline e4m3_tensor quantise_e4m3(std::span<const bfloat16> x) {
  double amax = 0;
  for (const bfloat16 e : x) amax = std::max(amax, std::abs(to_double(e)));
  const environment rn = ptx::gpu_environment();
  e4m3_tensor out{{}, from_host(1.0f)};
  if (amax > 0) out.descale = div(from_host(static_cast<float>(amax)), from_host(448.0f), rn).result;  // amax: a bf16
  out.bits.reserve(x.size());
  for (const bfloat16 e : x) {
    const float32 scaled = div(convert<fp32>(e, rn).result, out.descale, rn).result;
    out.bits.push_back(static_cast<std::uint8_t>(ptx::cvt_rn_satfinite_e4m3_f32(scaled).bits));
  }
  return out;
}

// The value of every e4m3 pattern, in double (a table: the scores below read each operand many times).
inline const std::array<double, 256>& e4m3_values() {
  static const std::array<double, 256> table = [] {
    std::array<double, 256> values{};
    for (std::uint32_t b = 0; b < 256; ++b) values[b] = to_double(float8_e4m3::from_bits(b));
    return values;
  }();
  return table;
}

// The raw scores sum_c q8_c k8_c of one query row against every key, on the
// e4m3 values themselves (before any descale): exact in double, since a
// product of two e4m3 values is a multiple of 2^-18 below 2^18 and a row sums
// at most 256 of them (44 bits). Tied keys (identical K rows) give equal
// scores, and only they do, so the row's maxima can be counted exactly.
inline std::vector<double> e4m3_raw_scores(std::span<const std::uint8_t> q_row, std::span<const std::uint8_t> k) {
  const std::array<double, 256>& value = e4m3_values();
  const std::size_t d = q_row.size(), keys = k.size() / d;
  std::vector<double> scores(keys);
  for (std::size_t j = 0; j < keys; ++j) {
    double sum = 0;
    for (std::size_t c = 0; c < d; ++c) sum += value[q_row[c]] * value[k[j * d + c]];
    scores[j] = sum;
  }
  return scores;
}

// The gradients of one head in double, from bf16 Q, K, V and dO: P =
// softmax(scale Q K^T), O = P V, delta_i = rowsum(dO_i O_i), dS = P (dO V^T -
// delta), dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO (the backward pass
// whose bf16 kernel attention/flash_backward.hpp models).
struct exact_gradients {
  std::vector<double> delta, dq, dk, dv;  // [rows], [rows][d], [keys][d], [keys][d]
};

inline exact_gradients exact_backward(std::span<const bfloat16> q, std::span<const bfloat16> k,
                                      std::span<const bfloat16> v, std::span<const bfloat16> d_o, std::size_t d,
                                      double scale) {
  const std::size_t rows = q.size() / d, keys = k.size() / d;
  exact_gradients g{std::vector<double>(rows), std::vector<double>(rows * d, 0.0), std::vector<double>(keys * d, 0.0),
                    std::vector<double>(keys * d, 0.0)};
  std::vector<double> p(keys), ds(keys);
  for (std::size_t i = 0; i < rows; ++i) {
    double max = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < keys; ++j) {
      double sum = 0;
      for (std::size_t c = 0; c < d; ++c) sum += to_double(q[i * d + c]) * to_double(k[j * d + c]);
      p[j] = scale * sum;
      max = std::max(max, p[j]);
    }
    double total = 0;
    for (double& x : p) total += (x = std::exp(x - max));
    for (double& x : p) x /= total;
    double delta = 0;
    for (std::size_t c = 0; c < d; ++c) {
      double o = 0;
      for (std::size_t j = 0; j < keys; ++j) o += p[j] * to_double(v[j * d + c]);
      delta += to_double(d_o[i * d + c]) * o;
    }
    g.delta[i] = delta;
    for (std::size_t j = 0; j < keys; ++j) {
      double dp = 0;
      for (std::size_t c = 0; c < d; ++c) dp += to_double(d_o[i * d + c]) * to_double(v[j * d + c]);
      ds[j] = p[j] * (dp - delta);
      for (std::size_t c = 0; c < d; ++c) {
        g.dq[i * d + c] += scale * ds[j] * to_double(k[j * d + c]);
        g.dk[j * d + c] += scale * ds[j] * to_double(q[i * d + c]);
        g.dv[j * d + c] += p[j] * to_double(d_o[i * d + c]);
      }
    }
  }
  return g;
}

// One row's errors against the exact output (o_exact):
//   o:      the mean over the columns of O - O_exact (O the kernel's bf16 output)
//   o_away: the same with each column's error signed by O_exact's sign (> 0: away from zero)
//   delta:  sum over the columns of dO (O - O_exact), the part of delta = rowsum(dO O)'s error that O makes
struct row_errors {
  double o = 0, o_away = 0, delta = 0;
};

inline row_errors errors_of(std::span<const double> o, std::span<const double> o_exact, std::span<const bfloat16> d_o) {
  row_errors e;
  for (std::size_t c = 0; c < o.size(); ++c) {
    const double error = o[c] - o_exact[c];
    e.o += error;
    e.o_away += o_exact[c] < 0 ? -error : error;
    e.delta += to_double(d_o[c]) * error;
  }
  e.o /= static_cast<double>(o.size());
  e.o_away /= static_cast<double>(o.size());
  return e;
}

// The 0.975 quantile of Student's t with `freedom` degrees of freedom: the
// usual table to 30, the Cornish-Fisher expansion in 1/freedom beyond (within
// 1e-4 there), NaN below 1.
inline double student_t_975(int freedom) {
  constexpr double table[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                              2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                              2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (freedom < 1) return std::numeric_limits<double>::quiet_NaN();
  if (freedom <= 30) return table[freedom - 1];
  const double z = 1.959963984540054, n = freedom;
  return z + (z * z * z + z) / (4 * n) + (5 * std::pow(z, 5) + 16 * z * z * z + 3 * z) / (96 * n * n) +
         (3 * std::pow(z, 7) + 19 * std::pow(z, 5) + 17 * z * z * z - 15 * z) / (384 * n * n * n);
}

// The rows of one scenario cell, each in a cluster of rows that share what
// dominates their output (the tied keys and their V rows: the rows of one tie
// group of one head). The mean is over rows; its 95% confidence interval
// treats the clusters as the independent units: t(0.975, k - 1) s / sqrt(k),
// s the standard deviation of the k cluster means (clusters hold equally many
// rows in the command's heads, up to one). Values are summed in the order
// added, so that a result does not depend on how many threads made them.
class clustered_sample {
 public:
  // cluster: 0, 1, 2, ... in any order; a new number opens a new cluster.
  void add(double x, std::size_t cluster) {
    values_.push_back(x);
    if (cluster >= cluster_sums_.size()) cluster_sums_.resize(cluster + 1, 0.0), cluster_rows_.resize(cluster + 1, 0);
    cluster_sums_[cluster] += x;
    ++cluster_rows_[cluster];
  }
  std::size_t count() const { return values_.size(); }
  std::size_t clusters() const {
    return static_cast<std::size_t>(std::count_if(cluster_rows_.begin(), cluster_rows_.end(), [](std::size_t n) { return n > 0; }));
  }
  double mean() const {
    if (values_.empty()) return std::numeric_limits<double>::quiet_NaN();
    double sum = 0;
    for (const double x : values_) sum += x;
    return sum / static_cast<double>(values_.size());
  }
  // NaN for fewer than two clusters.
  double half_width() const {
    std::vector<double> means;
    for (std::size_t c = 0; c < cluster_sums_.size(); ++c)
      if (cluster_rows_[c] > 0) means.push_back(cluster_sums_[c] / static_cast<double>(cluster_rows_[c]));
    const std::size_t k = means.size();
    if (k < 2) return std::numeric_limits<double>::quiet_NaN();
    double sum = 0, squares = 0;
    for (const double m : means) sum += m;
    const double grand = sum / static_cast<double>(k);
    for (const double m : means) squares += (m - grand) * (m - grand);
    return student_t_975(static_cast<int>(k) - 1) * std::sqrt(squares / static_cast<double>(k - 1) / static_cast<double>(k));
  }

 private:
  std::vector<double> values_, cluster_sums_;
  std::vector<std::size_t> cluster_rows_;
};

}  // namespace bitexact::cli::statistics
