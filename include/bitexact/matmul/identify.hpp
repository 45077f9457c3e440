// Which descriptions give a captured product's bits: each candidate (the
// presets that take the inputs, or the given descriptions) with each split
// count from 1 to max_splits, with its mismatch count, fewest first. The
// command's --identify and bitexact.identify_matmul read it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "description_json.hpp"
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
// (stable: the candidates' order, then split counts ascending). Candidates
// that compute alike (the same fields but name, summary and splits, and the
// same cut of K: split counts whose shares round up to the same K tiles) are
// computed once.
template <format InA, format InB, format Out>
std::vector<identified> identify(const std::vector<gemm_description>& candidates, const gemm_call<InA, InB, Out>& call,
                                 const std::vector<value<Out>>& expected, int max_splits = 64) {
  if (expected.size() != call.shape.m * call.shape.n) throw std::invalid_argument("identify: expected needs M x N values");
  std::vector<identified> results;
  std::map<std::string, std::uint64_t> computed;  // what a candidate computes -> its mismatches
  for (gemm_description d : candidates)
    for (int splits = 1; splits <= max_splits; ++splits) {
      d.splits = splits;
      try {
        check_call(d, call);
      } catch (const std::invalid_argument&) {
        break;  // the description does not take this call (block scales without promotion, say)
      }
      nlohmann::ordered_json arithmetic = gemm_to_json(d);
      arithmetic.erase("name"), arithmetic.erase("summary"), arithmetic.erase("splits");
      std::string key = arithmetic.dump();
      for (int split = 0; split < splits; ++split) {
        const auto [first, end] = split_range(d, call.shape.k, split);
        // append, not " " + std::string: GCC 12 warns (-Wrestrict) about the inlined operator+ (PR 105651).
        if (first < end) key.append(" ").append(std::to_string(first)).append("-").append(std::to_string(end));
      }
      // With more than one split the reduce kernel applies alpha and beta (alpha_beta_split_k).
      key += splits > 1 ? " reduce" : "";
      const auto known = computed.find(key);
      if (known == computed.end()) {
        const std::vector<value<Out>> out = gemm(d, call);
        std::uint64_t mismatches = 0;
        for (std::size_t i = 0; i < out.size(); ++i) mismatches += out[i].bits != expected[i].bits;
        computed.emplace(key, mismatches);
        results.push_back({d.name, splits, mismatches});
      } else {
        results.push_back({d.name, splits, known->second});
      }
    }
  std::stable_sort(results.begin(), results.end(),
                   [](const identified& x, const identified& y) { return x.mismatches < y.mismatches; });
  return results;
}

}  // namespace bitexact::matmul
