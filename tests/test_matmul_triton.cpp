// Triton's tutorial matmul (tl.dot) on an H200 (fp32: an H100), captured by
// cuda/capture/triton_matmul_capture.py (tests/data/matmul_triton: Triton
// 3.6, torch 2.11), replayed through the GEMM emulator with the triton_*
// presets of matmul/kernels.hpp: every kept output bit for bit, in the
// autotuned cases and in every one of the 16 configurations forced.
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <bitexact/matmul/gemm.hpp>
#include <bitexact/matmul/kernels.hpp>
#include <bitexact/testing/npy.hpp>

#include "manifest_files.hpp"

using namespace bitexact;

namespace {

const std::string folder = std::string(BITEXACT_TEST_DATA_DIR) + "/matmul_triton/";

template <format F>
std::vector<value<F>> values_of(const npy::array& array) {
  std::vector<value<F>> values(array.element_count());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = value<F>::from_bits(array.word(i));
  return values;
}

// Mismatches of `d` against the file `expected` (row-major [M'][N']).
template <format In, format Out>
std::size_t replay(const std::string& dir, std::size_t k, const std::string& expected, const matmul::gemm_description& d,
                   std::size_t& outputs) {
  const npy::array d_file = npy::read(dir + expected);
  const std::vector<value<In>> a = values_of<In>(npy::read(dir + "a.npy")), b = values_of<In>(npy::read(dir + "b.npy"));
  const std::vector<value<Out>> gpu = values_of<Out>(d_file);
  matmul::gemm_call<In, In, Out> call;
  call.shape = {d_file.shape[0], d_file.shape[1], k};
  call.a = a, call.b = b;
  const std::vector<value<Out>> model = matmul::gemm(d, call);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < gpu.size(); ++i) bad += model[i].bits != gpu[i].bits;
  outputs += gpu.size();
  return bad;
}

std::size_t replay_any(const nlohmann::json& c, const std::string& expected, const matmul::gemm_description& d,
                       std::size_t& outputs) {
  const std::string dir = folder + c["name"].get<std::string>() + "/";
  const std::size_t k = c["K"];
  if (c["dtype"] == "bf16") return replay<bf16, bf16>(dir, k, expected, d, outputs);
  if (c["dtype"] == "fp16") return replay<fp16, fp16>(dir, k, expected, d, outputs);
  if (c["dtype"] == "fp32") return replay<fp32, fp32>(dir, k, expected, d, outputs);
  if (c["dtype"] == "e4m3") return replay<e4m3, fp16>(dir, k, expected, d, outputs);
  return replay<e5m2, fp16>(dir, k, expected, d, outputs);
}

// The preset for a configuration: 2 warps take fp8 through fp16.
const matmul::gemm_description& preset_of(const std::string& dtype, int warps) {
  if (dtype == "bf16" || dtype == "fp16") return matmul::find_gemm_preset("triton_matmul_sm90");
  if (dtype == "fp32") return matmul::find_gemm_preset("triton_matmul_sm90_tf32");
  return matmul::find_gemm_preset(warps == 2 ? "triton_matmul_sm90_fp8_two_warps" : "triton_matmul_sm90_fp8");
}

}  // namespace

TEST_CASE("matmul replay: Triton's tutorial tl.dot matmul, every configuration, bit for bit") {
  std::ifstream file(folder + "manifest.json");
  REQUIRE(file);
  const nlohmann::json manifest = nlohmann::json::parse(file);
  std::size_t runs = 0, outputs = 0, mismatches = 0, two_warp_runs = 0, other_fp8_preset_misses = 0, tf32_runs = 0,
              rounded_operand_misses = 0;
  for (const nlohmann::json& c : manifest["cases"]) {
    std::vector<std::pair<std::string, int>> runs_of_case;  // (file, num_warps)
    if (c["all_configs"].get<bool>()) {
      for (const nlohmann::json& config : c["configs"])
        if (!config.contains("error"))  // fp32 tiles too large for shared memory did not run
          runs_of_case.emplace_back("d_config" + std::to_string(config["index"].get<int>()) + ".npy",
                                    config["config"]["num_warps"].get<int>());
    } else {
      runs_of_case.emplace_back("d.npy", c["config"]["num_warps"].get<int>());
    }
    for (const auto& [expected, warps] : runs_of_case) {
      const std::string dtype = c["dtype"];
      const matmul::gemm_description& d = preset_of(dtype, warps);
      const std::size_t bad = replay_any(c, expected, d, outputs);
      CHECK_MESSAGE(bad == 0, c["name"].get<std::string>() << " " << expected << " (" << d.name << "): " << bad);
      ++runs, mismatches += bad;
      if (dtype == "e4m3" || dtype == "e5m2") {  // the other fp8 path misses some
        std::size_t ignored = 0;
        const matmul::gemm_description& other = preset_of(dtype, warps == 2 ? 4 : 2);
        other_fp8_preset_misses += replay_any(c, expected, other, ignored) > 0;
        two_warp_runs += warps == 2;
      }
      if (dtype == "fp32") {  // Triton converts nothing: operands rounded to tf32, as cuBLAS's are, miss
        std::size_t ignored = 0;
        matmul::gemm_description rounded = d;
        rounded.operands = matmul::operand_rule::rounded_to_tf32;
        ++tf32_runs;
        rounded_operand_misses += replay_any(c, expected, rounded, ignored) > 0;
      }
    }
  }
  MESSAGE(runs << " Triton runs, " << outputs << " outputs compared, " << mismatches << " mismatches; "
               << two_warp_runs << " fp8 runs on 2 warps; the other fp8 preset misses outputs in "
               << other_fp8_preset_misses << " of the fp8 runs; " << tf32_runs << " fp32 (tf32) runs, operands "
               << "rounded to tf32 miss outputs in " << rounded_operand_misses);
  CHECK(runs == 19 + 4 * 16 + 3 + 10);  // fp32: 10 of the 16 configurations fit in shared memory
  CHECK(outputs == 187456 + 16 * 16 + 16 * 16 + 8 * 8 + 10 * 72 * 40);
  CHECK(tf32_runs == 13);
  CHECK(rounded_operand_misses == 13);
  CHECK(mismatches == 0);
  CHECK(two_warp_runs == 6);
  CHECK(other_fp8_preset_misses == 42);  // every fp8 run
}

TEST_CASE("matmul replay: the Triton captures are the files MANIFEST lists, byte for byte") {
  CHECK(check_manifest_files(folder) >= 100);
}
