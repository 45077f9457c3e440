// cuBLAS's matrix products, captured on an H200 (tests/data/matmul: torch.matmul
// and F.linear under torch 2.11, cuBLAS 13.1; cuda/capture/matmul_capture.py),
// replayed through the GEMM emulator (matmul/gemm.hpp): every kept output bit
// for bit. Each case keeps some rows of A and columns of B of the call
// (manifest.json names them); the split count is the one cuBLASLt logged.
#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <bitexact/core/checksum.hpp>
#include <bitexact/matmul/gemm.hpp>
#include <bitexact/matmul/scaled.hpp>
#include <bitexact/testing/npy.hpp>

using namespace bitexact;

namespace {

const std::string folder = std::string(BITEXACT_TEST_DATA_DIR) + "/matmul/";

std::string file_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  return bytes.str();
}

template <format F>
std::vector<value<F>> values_of(const npy::array& array) {
  std::vector<value<F>> values(array.element_count());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = value<F>::from_bits(array.word(i));
  return values;
}

struct replay_count {
  std::size_t cases = 0, outputs = 0, mismatches = 0;
  std::size_t split_cases = 0, split_cases_the_plain_chain_misses = 0;
  std::size_t other_accumulation_misses = 0, unrounded_steps_miss = 0;  // fp8 cases
};

template <format F>
void replay(const nlohmann::json& c, replay_count& count) {
  const std::string dir = folder + c["name"].get<std::string>() + "/";
  const npy::array d_file = npy::read(dir + "d.npy");
  const std::vector<value<F>> a = values_of<F>(npy::read(dir + "a.npy")), b = values_of<F>(npy::read(dir + "b.npy")),
                              d = values_of<F>(d_file);
  const std::string rule = c["rule"];
  const bool bias = rule.find("bias") != std::string::npos;
  const std::vector<value<F>> bias_values = bias ? values_of<F>(npy::read(dir + "bias.npy")) : std::vector<value<F>>{};
  // The rows and columns kept ("all", or a list): d's shape.
  REQUIRE(d_file.shape.size() == 2);
  const matmul::gemm_shape shape{d_file.shape[0], d_file.shape[1], c["K"].get<std::size_t>()};
  matmul::gemm_kernel kernel;
  if (rule.rfind("splitk", 0) == 0) kernel.splits = std::stoi(c["algorithm"]["numSplitsK"].get<std::string>());
  const std::vector<value<F>> model = matmul::gemm<F, F>(kernel, shape, a, b, bias_values);
  REQUIRE(model.size() == d.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < d.size(); ++i) bad += model[i].bits != d[i].bits;
  if (kernel.splits > 1) {  // the split-K rule is what makes these agree: one chain over K misses some
    const std::vector<value<F>> plain = matmul::gemm<F, F>(matmul::gemm_kernel{}, shape, a, b, bias_values);
    std::size_t plain_bad = 0;
    for (std::size_t i = 0; i < d.size(); ++i) plain_bad += plain[i].bits != d[i].bits;
    ++count.split_cases;
    count.split_cases_the_plain_chain_misses += plain_bad > 0;
    if (plain_bad == 0) MESSAGE(c["name"].get<std::string>() << ": one chain over K agrees on the kept outputs too");
  }
  CHECK_MESSAGE(bad == 0, c["name"].get<std::string>() << ": " << bad << " of " << d.size() << " differ");
  ++count.cases;
  count.outputs += d.size();
  count.mismatches += bad;
}

std::vector<float32> scales_of(const npy::array& array) {
  REQUIRE(array.descr == "<f4");
  std::vector<float32> values(array.element_count());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = float32::from_bits(array.word(i));
  return values;
}

template <format Out, format InA, format InB>
void replay_scaled(const nlohmann::json& c, replay_count& count) {
  const std::string dir = folder + c["name"].get<std::string>() + "/";
  const npy::array d_file = npy::read(dir + "d.npy");
  REQUIRE(d_file.shape.size() == 2);
  const matmul::gemm_shape shape{d_file.shape[0], d_file.shape[1], c["K"].get<std::size_t>()};
  matmul::scaled_gemm_kernel kernel;
  kernel.promotion_k = c["fast_accum"].get<bool>() ? 0 : 128;
  const std::vector<value<Out>> d = values_of<Out>(d_file);
  const std::vector<value<Out>> model = matmul::scaled_gemm<Out, InA, InB>(
      kernel, shape, values_of<InA>(npy::read(dir + "a.npy")), values_of<InB>(npy::read(dir + "b.npy")),
      scales_of(npy::read(dir + "scale_a.npy")), scales_of(npy::read(dir + "scale_b.npy")));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < d.size(); ++i) bad += model[i].bits != d[i].bits;
  CHECK_MESSAGE(bad == 0, c["name"].get<std::string>() << ": " << bad << " of " << d.size() << " differ");
  ++count.cases;
  count.outputs += d.size();
  count.mismatches += bad;
  // Each part of the rule decides bits: the other accumulation, or steps not rounded to E8M13, miss some.
  matmul::scaled_gemm_kernel other = kernel;
  other.promotion_k = kernel.promotion_k == 0 ? 128 : 0;
  matmul::scaled_gemm_kernel unrounded = kernel;
  unrounded.unit.rounds_to_e8m13 = false;
  for (const auto& [variant, misses] : {std::pair{other, &count.other_accumulation_misses}, std::pair{unrounded, &count.unrounded_steps_miss}}) {
    const std::vector<value<Out>> wrong = matmul::scaled_gemm<Out, InA, InB>(
        variant, shape, values_of<InA>(npy::read(dir + "a.npy")), values_of<InB>(npy::read(dir + "b.npy")),
        scales_of(npy::read(dir + "scale_a.npy")), scales_of(npy::read(dir + "scale_b.npy")));
    std::size_t differ = 0;
    for (std::size_t i = 0; i < d.size(); ++i) differ += wrong[i].bits != d[i].bits;
    *misses += differ > 0;
  }
}

}  // namespace

TEST_CASE("matmul replay: the captures are the files MANIFEST lists, byte for byte") {
  std::ifstream manifest(folder + "MANIFEST");
  REQUIRE(manifest);
  std::string line;
  int files = 0;
  while (std::getline(manifest, line)) {
    if (line.rfind("file ", 0) != 0) continue;
    std::istringstream fields(line.substr(5));
    std::string fnv, sha, path;
    fields >> fnv >> sha >> path;
    const std::string bytes = file_bytes(folder + path);
    const std::uint64_t hash = fnv1a64(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
    CHECK_MESSAGE(std::stoull(fnv, nullptr, 16) == hash, path);
    ++files;
  }
  CHECK(files >= 100);
}

TEST_CASE("matmul replay: cuBLAS's bf16 and fp16 products, plain, split-K and with a bias, bit for bit") {
  std::ifstream file(folder + "manifest.json");
  REQUIRE(file);
  const nlohmann::json manifest = nlohmann::json::parse(file);
  const std::set<std::string> modelled = {"chain16", "splitk", "chain16_bias", "splitk_bias"};
  replay_count count;
  std::vector<std::string> not_modelled;
  for (const nlohmann::json& c : manifest["cases"]) {
    if (!modelled.count(c["rule"].get<std::string>())) {
      not_modelled.push_back(c["name"]);
      continue;
    }
    if (c["dtype"] == "bf16") replay<bf16>(c, count);
    else if (c["dtype"] == "fp16") replay<fp16>(c, count);
    else FAIL("unexpected dtype in ", c["name"].get<std::string>());
  }
  std::string skipped;
  for (const std::string& name : not_modelled) skipped += " " + name;
  MESSAGE(count.cases << " cases, " << count.outputs << " outputs compared, " << count.mismatches
                      << " mismatches; not modelled yet:" << skipped);
  MESSAGE("one chain over K instead of the splits misses outputs in " << count.split_cases_the_plain_chain_misses
                                                                       << " of the " << count.split_cases
                                                                       << " split-K cases");
  CHECK(count.cases == 21);
  CHECK(count.outputs == 16160);
  CHECK(count.mismatches == 0);
  CHECK(count.split_cases == 12);
  // All but fp16_splitk_128x128x4096, whose kept outputs one chain over K happens to give too.
  CHECK(count.split_cases_the_plain_chain_misses == 11);
}

TEST_CASE("matmul replay: torch._scaled_mm's fp8 products, fast accumulation and promotion, bit for bit") {
  std::ifstream file(folder + "manifest.json");
  REQUIRE(file);
  const nlohmann::json manifest = nlohmann::json::parse(file);
  replay_count count;
  for (const nlohmann::json& c : manifest["cases"]) {
    if (c["op"] != "scaled_mm") continue;
    const bool e5m2_a = c["a_type"] == "e5m2", fp32_out = c["out"] == "fp32";
    REQUIRE(c["b_type"] == "e4m3");
    if (e5m2_a && fp32_out) replay_scaled<fp32, e5m2, e4m3>(c, count);
    else if (e5m2_a) replay_scaled<bf16, e5m2, e4m3>(c, count);
    else if (fp32_out) replay_scaled<fp32, e4m3, e4m3>(c, count);
    else replay_scaled<bf16, e4m3, e4m3>(c, count);
  }
  MESSAGE(count.cases << " fp8 cases, " << count.outputs << " outputs compared, " << count.mismatches
                      << " mismatches; the other accumulation misses outputs in " << count.other_accumulation_misses
                      << " cases, steps not rounded to E8M13 in " << count.unrounded_steps_miss);
  CHECK(count.cases == 14);
  CHECK(count.outputs == 124416);
  CHECK(count.mismatches == 0);
  CHECK(count.other_accumulation_misses == 14);
  CHECK(count.unrounded_steps_miss == 12);
}
