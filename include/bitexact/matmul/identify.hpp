// Which descriptions give a captured product's bits: each candidate (the
// presets that take the inputs, or the given descriptions) with each split
// count from 1 to max_splits, with its mismatch count, fewest first. The
// command's --identify and bitexact.identify_matmul read it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "gemm.hpp"
#include "kernels.hpp"

namespace bitexact::matmul {

struct identified {
  std::string name;
  int splits = 1;
  std::uint64_t mismatches = 0;
};

// The presets that compute products of these formats.
template <format InA, format InB>
std::vector<gemm_description> presets_taking() {
  std::vector<gemm_description> out;
  for (const gemm_description& d : gemm_presets())
    if (takes(d, InA, InB)) out.push_back(d);
  return out;
}

// Every (candidate, split count) the call allows, fewest mismatches first
// (stable: the candidates' order, then split counts ascending).
template <format InA, format InB, format Out>
std::vector<identified> identify(const std::vector<gemm_description>& candidates, const gemm_call<InA, InB, Out>& call,
                                 const std::vector<value<Out>>& expected, int max_splits = 64) {
  if (expected.size() != call.shape.m * call.shape.n) throw std::invalid_argument("identify: expected needs M x N values");
  std::vector<identified> results;
  for (gemm_description d : candidates)
    for (int splits = 1; splits <= max_splits; ++splits) {
      d.splits = splits;
      try {
        check_call(d, call);
      } catch (const std::invalid_argument&) {
        break;  // the description does not take this call (block scales without promotion, say)
      }
      const std::vector<value<Out>> out = gemm(d, call);
      std::uint64_t mismatches = 0;
      for (std::size_t i = 0; i < out.size(); ++i) mismatches += out[i].bits != expected[i].bits;
      results.push_back({d.name, splits, mismatches});
    }
  std::stable_sort(results.begin(), results.end(),
                   [](const identified& x, const identified& y) { return x.mismatches < y.mismatches; });
  return results;
}

}  // namespace bitexact::matmul
