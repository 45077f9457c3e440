// Probe: the special-function unit's ex2 and rcp, as PTX reaches them
// (ex2.approx.ftz.f32, ex2.approx.f32, rcp.approx.ftz.f32, rcp.approx.f32),
// over every fp32 input pattern, against the table model in
// include/bitexact/hardware/mufu.hpp. The non-FTZ forms check the compiler's wrapper
// (square of ex2(x/2) below -126; rescaling around rcp) along with the tables.
//
//   probe_mufu [--quick] [--data DIR]
//     --quick  2^24 inputs spread over the whole range (x = 257*j), a smoke test
//     --data   folder with mufu_ex2.bxt and mufu_rcp.bxt (default: $BITEXACT_DATA_DIR,
//              else the folder compiled in, else ./data)
#include <bitexact/hardware/mufu.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "probe_common.cuh"

using namespace bitexact;

namespace {

constexpr int instruction_count = 4;
constexpr const char* instruction_names[instruction_count] = {"ex2.approx.ftz.f32", "ex2.approx.f32",
                                                              "rcp.approx.ftz.f32", "rcp.approx.f32"};

// Input j of a sweep: every pattern in order, or (quick) an odd stride that
// touches every exponent and many fraction patterns.
__host__ __device__ inline std::uint32_t input_of(std::uint64_t j, std::uint32_t multiplier) {
  return static_cast<std::uint32_t>(j * multiplier);
}

__global__ void mufu_kernel(std::uint64_t first, std::uint64_t count, std::uint32_t multiplier, std::uint32_t* out) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint32_t x = input_of(first + i, multiplier);
    std::uint32_t ex2_ftz, ex2, rcp_ftz, rcp;
    asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=r"(ex2_ftz) : "r"(x));
    asm volatile("ex2.approx.f32 %0, %1;" : "=r"(ex2) : "r"(x));
    asm volatile("rcp.approx.ftz.f32 %0, %1;" : "=r"(rcp_ftz) : "r"(x));
    asm volatile("rcp.approx.f32 %0, %1;" : "=r"(rcp) : "r"(x));
    out[i] = ex2_ftz;
    out[count + i] = ex2;
    out[2 * count + i] = rcp_ftz;
    out[3 * count + i] = rcp;
  }
}

float32 model(int instruction, float32 x, const ptx::mufu_tables& tables) {
  switch (instruction) {
    case 0: return ptx::ex2_approx_ftz(x, tables);
    case 1: return ptx::ex2_approx(x, tables);
    case 2: return ptx::rcp_approx_ftz(x, tables);
    default: return ptx::rcp_approx(x, tables);
  }
}

// The model's lookups for one input, to print beside a mismatch.
struct lookup_trace {
  std::string text;
  void on(const mufu_lookup_event& e) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " [%s k=%u entry=%08X scale=%d]", std::string(name_of(e.table)).c_str(), e.index,
                  e.entry, e.scale);
    text += buf;
  }
};

std::string describe(int instruction, std::uint32_t x, std::uint32_t gpu, std::uint32_t expected,
                     const ptx::mufu_tables& tables) {
  lookup_trace trace;
  const float32 in = float32::from_bits(x);
  switch (instruction) {
    case 0: ptx::ex2_approx_ftz(in, tables, trace); break;
    case 1: ptx::ex2_approx(in, tables, trace); break;
    case 2: ptx::rcp_approx_ftz(in, tables, trace); break;
    default: ptx::rcp_approx(in, tables, trace); break;
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, "x %08X gpu %08X model %08X", x, gpu, expected);
  return buf + trace.text;
}

std::string data_directory(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--data") == 0) return argv[i + 1];
  if (const char* from_environment = std::getenv("BITEXACT_DATA_DIR"); from_environment && *from_environment)
    return from_environment;
  // The compiled-in folder is this checkout's; a copy on another machine finds ./data.
  if (std::filesystem::exists(std::string(BITEXACT_DATA_DIR) + "/mufu_ex2.bxt")) return BITEXACT_DATA_DIR;
  return "data";
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) quick |= std::strcmp(argv[i], "--quick") == 0;
  probe::print_device();
  const std::string directory = data_directory(argc, argv);
  ptx::mufu_tables tables;
  try {
    tables = ptx::mufu_tables::load(directory);
  } catch (const mufu_data_error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  std::printf("tables from %s\n", directory.c_str());

  const std::uint64_t total = quick ? std::uint64_t{1} << 24 : std::uint64_t{1} << 32;
  const std::uint32_t multiplier = quick ? 257 : 1;
  const std::uint64_t chunk = std::min<std::uint64_t>(total, std::uint64_t{1} << 28);
  std::uint32_t* device_out = nullptr;
  PROBE_CHECK(cudaMalloc(&device_out, chunk * instruction_count * 4));
  std::vector<std::uint32_t> host(chunk * instruction_count);
  const std::string coverage = quick ? " (quick: 2^24 inputs, x = 257*j)" : " (every fp32 pattern)";
  std::vector<probe::tally*> tallies;
  for (const char* name : instruction_names) tallies.push_back(new probe::tally(name + coverage));
  double gpu_seconds = 0, host_seconds = 0;
  for (std::uint64_t first = 0; first < total; first += chunk) {
    const auto start = std::chrono::steady_clock::now();
    mufu_kernel<<<4096, 256>>>(first, chunk, multiplier, device_out);
    PROBE_CHECK(cudaGetLastError());
    PROBE_CHECK(cudaMemcpy(host.data(), device_out, host.size() * 4, cudaMemcpyDeviceToHost));
    const auto copied = std::chrono::steady_clock::now();
    probe::parallel_for(chunk, [&](std::uint64_t begin, std::uint64_t end) {
      for (std::uint64_t i = begin; i < end; ++i) {
        const std::uint32_t x = input_of(first + i, multiplier);
        for (int instruction = 0; instruction < instruction_count; ++instruction) {
          const std::uint32_t gpu = host[instruction * chunk + i];
          const std::uint32_t expected = model(instruction, float32::from_bits(x), tables).bits;
          if (gpu != expected) tallies[instruction]->mismatch(describe(instruction, x, gpu, expected, tables));
        }
      }
      for (probe::tally* t : tallies) t->compared += end - begin;
    });
    const auto compared = std::chrono::steady_clock::now();
    gpu_seconds += std::chrono::duration<double>(copied - start).count();
    host_seconds += std::chrono::duration<double>(compared - copied).count();
  }
  PROBE_CHECK(cudaFree(device_out));
  bool ok = true;
  for (probe::tally* t : tallies) {
    ok &= t->report();
    delete t;
  }
  std::printf("gpu + copy %.1f s, host model comparison %.1f s\n", gpu_seconds, host_seconds);
  std::printf("probe_mufu: %s\n", ok ? "all zero mismatches" : "MISMATCHES FOUND");
  return ok ? 0 : 1;
}
