// A GPU as data: its architecture (which tensor-core units its instructions
// run, which MUFU tables its special-function unit reads) and its count of
// multiprocessors, which PyTorch's launch heuristics read. The one place a GPU,
// an architecture or a tensor-core unit is named: the command's --gpu and
// --unit, the binding's gpu= and arch=, and a kernel description's
// "tensor_core" field look their names up here.
#pragma once

#include <algorithm>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "../core/format.hpp"
#include "../core/names.hpp"
#include "mma.hpp"

namespace bitexact {

// A tensor-core instruction as an architecture runs it: the unit model of
// mma.hpp that computes it, under the name descriptions and traces use.
struct tensor_core_instruction {
  std::string_view unit_name;    // "sm90": a kernel description's "tensor_core", `trace mma --unit`
  std::string_view instruction;  // the PTX that runs it
  std::span<const format> inputs;  // the input formats the model holds for
  std::string_view evidence;     // what the model rests on (docs/hardware.md has the counts)
  fused_sum_unit unit;

  bool takes(format input) const { return std::find(inputs.begin(), inputs.end(), input) != inputs.end(); }
};

// What the instructions of one compute capability compute.
struct architecture {
  std::string_view name;  // "sm_90"
  std::span<const tensor_core_instruction> tensor_cores;  // the first is mma.sync m16n8k16's
  // The MUFU table set (hardware/mufu_tables.hpp) of its special-function
  // unit, empty when none was measured: the tables in data/ were captured on
  // sm_90 (H100 and H200 gave the same bits, docs/mufu.md).
  std::string_view mufu_tables;

  const fused_sum_unit& mma_unit() const { return tensor_cores.front().unit; }
  // The unit of the first instruction that takes an input format (mma.sync
  // m16n8k16's for bf16 and fp16; on sm_90 wgmma k32's for fp8, k8's for
  // tf32); std::invalid_argument when no unit of the architecture is measured for it.
  const fused_sum_unit& mma_unit(format input) const {
    for (const tensor_core_instruction& i : tensor_cores)
      if (i.takes(input)) return i.unit;
    std::string measured;
    for (const tensor_core_instruction& i : tensor_cores) {
      std::string takes;
      for (const format f : i.inputs) takes += (takes.empty() ? "" : ", ") + std::string(name_of(f));
      measured += (measured.empty() ? "" : "; ") + std::string(i.unit_name) + " takes " + takes;
    }
    throw std::invalid_argument("no tensor-core unit of " + std::string(name) + " is measured for " +
                                std::string(name_of(input)) + " inputs (" + measured + ")");
  }
  // The instruction whose unit is `unit`, or null.
  const tensor_core_instruction* instruction_of(const fused_sum_unit& unit) const {
    const auto found = std::find_if(tensor_cores.begin(), tensor_cores.end(),
                                    [&](const tensor_core_instruction& i) { return i.unit == unit; });
    return found == tensor_cores.end() ? nullptr : &*found;
  }
};

struct gpu {
  std::string_view name;     // "h100_sxm": --gpu, gpu=
  std::string_view summary;  // the product it stands for
  const architecture* arch;
  int sm_count;  // multiprocessors (cudaDeviceProp::multiProcessorCount)
};

// The inputs each unit was measured with: tf32 runs the adder of 8 products
// a step (wgmma m64nNk8), fp8 its own of 32 (wgmma m64nNk32).
inline constexpr format half_precision_inputs[] = {bf16, fp16};
inline constexpr format k8_inputs[] = {bf16, fp16, tf32};
inline constexpr format fp8_inputs[] = {e4m3, e5m2};

inline constexpr tensor_core_instruction sm90_tensor_core_instructions[] = {
    {"sm90", "mma.sync m16n8k16, wgmma k16", half_precision_inputs, "probed on an H100 and an H200", sm90_tensor_core},
    {"sm90_k8", "mma.sync m16n8k8, wgmma k8 (tf32)", k8_inputs, "attention captures (bf16, fp16); tf32 probed on an H200",
     sm90_tensor_core_k8},
    {"sm90_fp8", "wgmma k32", fp8_inputs, "probed on an H200; cuBLAS's fp8 products agree", sm90_tensor_core_fp8},
};
inline constexpr tensor_core_instruction sm80_tensor_core_instructions[] = {
    {"sm80", "mma.sync m16n8k16", half_precision_inputs, "from the literature, not probed here", sm80_tensor_core},
};

inline constexpr architecture architectures[] = {
    {"sm_90", sm90_tensor_core_instructions, "sm_90"},
    {"sm_80", sm80_tensor_core_instructions, ""},
};

// The GPUs, the default first. SM counts are NVIDIA's specifications; the
// H100 SXM's and the H200's 132 are what the device machines report.
inline constexpr gpu gpus[] = {
    {"h100_sxm", "NVIDIA H100 SXM5 (sm_90, 132 SMs)", &architectures[0], 132},
    {"h100_pcie", "NVIDIA H100 PCIe (sm_90, 114 SMs)", &architectures[0], 114},
    {"h200", "NVIDIA H200 SXM (sm_90, 132 SMs)", &architectures[0], 132},
};

inline constexpr const gpu& default_gpu() { return gpus[0]; }

namespace detail {
template <class Record>
std::string names_of(std::span<const Record> records) {
  std::string names;
  for (const Record& r : records) names += (names.empty() ? "" : ", ") + std::string(r.name);
  return names;
}

template <class Record>
const Record& find_named(std::span<const Record> records, std::string_view name, std::string_view what) {
  const auto found = std::find_if(records.begin(), records.end(), [&](const Record& r) { return r.name == name; });
  if (found == records.end())
    throw std::invalid_argument("unknown " + std::string(what) + " '" + std::string(name) + "'; the " +
                                std::string(what) + "s are: " + names_of(records));
  return *found;
}
}  // namespace detail

inline std::string gpu_names() { return detail::names_of(std::span<const gpu>(gpus)); }
inline std::string architecture_names() { return detail::names_of(std::span<const architecture>(architectures)); }

// The record called name; std::invalid_argument listing the names otherwise.
inline const gpu& find_gpu(std::string_view name) { return detail::find_named(std::span<const gpu>(gpus), name, "GPU"); }
inline const architecture& find_architecture(std::string_view name) {
  return detail::find_named(std::span<const architecture>(architectures), name, "architecture");
}

// Every tensor-core unit name, comma-separated, for messages and help.
inline std::string tensor_core_unit_names() {
  std::string names;
  for (const architecture& a : architectures)
    for (const tensor_core_instruction& i : a.tensor_cores) names += (names.empty() ? "" : ", ") + std::string(i.unit_name);
  return names;
}

// The instruction whose unit is called name (sm90, sm90_k8, sm80); std::invalid_argument otherwise.
inline const tensor_core_instruction& find_tensor_core_unit(std::string_view name) {
  for (const architecture& a : architectures)
    for (const tensor_core_instruction& i : a.tensor_cores)
      if (i.unit_name == name) return i;
  throw std::invalid_argument("unknown tensor-core unit '" + std::string(name) + "'; the units are: " +
                              tensor_core_unit_names());
}

// The name of a unit's parameters, or null for a unit no instruction runs.
inline const tensor_core_instruction* tensor_core_instruction_of(const fused_sum_unit& unit) {
  for (const architecture& a : architectures)
    if (const tensor_core_instruction* i = a.instruction_of(unit)) return i;
  return nullptr;
}

}  // namespace bitexact
