// Probe: the GPU's scalar FP32 and BF16 instructions and bf16 conversions
// against the models in include/bitexact/hardware/alu.hpp, over every bf16 pair,
// every fp32 value, and 10^8 random fp32 cases per instruction variant.
//
//   probe_alu [--quick]     (--quick: 1/64 of each sweep, for a smoke test)
#include <cuda_bf16.h>

#include <bitexact/hardware/alu.hpp>
#include <cstring>

#include "probe_common.cuh"

using namespace bitexact;

namespace {

// Deterministic operands both sides can regenerate from an index.
__host__ __device__ inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Random fp32 bit patterns weighted toward the cases that matter: a quarter
// subnormal or tiny, and operands whose exponents are close (cancellation).
__host__ __device__ inline void fp32_operands(std::uint64_t index, std::uint32_t seed, std::uint32_t out[3]) {
  const std::uint64_t r0 = mix(index * 3 + seed), r1 = mix(index * 3 + 1 + seed), r2 = mix(index * 3 + 2 + seed);
  const std::uint64_t r[3] = {r0, r1, r2};
  for (int i = 0; i < 3; ++i) {
    std::uint32_t bits = static_cast<std::uint32_t>(r[i]);
    const unsigned kind = static_cast<unsigned>(r[i] >> 32) & 7;
    if (kind == 0) bits &= 0x80FFFFFFu;                                      // subnormal or smallest normals
    if (kind == 1) bits = (bits & 0x807FFFFFu) | (static_cast<std::uint32_t>((r[i] >> 40) % 8 + 1) << 23);  // tiny normals
    if (kind == 2 && i > 0) bits = (bits & 0x807FFFFFu) | (out[0] & 0x7F800000u);  // same exponent as a
    if (kind == 3 && i > 0) bits = (out[0] ^ 0x80000000u) ^ static_cast<std::uint32_t>((r[i] >> 40) & 0xFF);  // near -a
    out[i] = bits;
  }
}

enum class fp32_op { add, mul, fma };

template <int Op, int Mode, bool Ftz>
__device__ std::uint32_t fp32_instruction(std::uint32_t a, std::uint32_t b, std::uint32_t c);

#define SPECIALISE(op_id, op, mode_id, mode, ftz_flag, ftz_text)                                       \
  template <>                                                                                           \
  __device__ std::uint32_t fp32_instruction<op_id, mode_id, ftz_flag>(std::uint32_t a, std::uint32_t b,  \
                                                                      std::uint32_t c) {                 \
    std::uint32_t d;                                                                                    \
    if constexpr (op_id == 2)                                                                           \
      asm volatile("fma." #mode ftz_text ".f32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));   \
    else                                                                                                \
      asm volatile(#op "." #mode ftz_text ".f32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));               \
    (void)c;                                                                                            \
    return d;                                                                                           \
  }
#define SPECIALISE_MODES(op_id, op)                                                                   \
  SPECIALISE(op_id, op, 0, rn, false, "") SPECIALISE(op_id, op, 1, rz, false, "")                       \
  SPECIALISE(op_id, op, 2, rm, false, "") SPECIALISE(op_id, op, 3, rp, false, "")                       \
  SPECIALISE(op_id, op, 0, rn, true, ".ftz") SPECIALISE(op_id, op, 1, rz, true, ".ftz")                 \
  SPECIALISE(op_id, op, 2, rm, true, ".ftz") SPECIALISE(op_id, op, 3, rp, true, ".ftz")
SPECIALISE_MODES(0, add)
SPECIALISE_MODES(1, mul)
SPECIALISE_MODES(2, fma)

template <int Op, int Mode, bool Ftz>
__global__ void fp32_kernel(std::uint64_t count, std::uint32_t seed, std::uint32_t* out) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    std::uint32_t in[3];
    fp32_operands(i, seed, in);
    out[i] = fp32_instruction<Op, Mode, Ftz>(in[0], in[1], in[2]);
  }
}

constexpr rounding_mode ptx_modes[] = {rounding_mode::nearest_even, rounding_mode::toward_zero,
                                       rounding_mode::downward, rounding_mode::upward};
constexpr const char* ptx_mode_names[] = {"rn", "rz", "rm", "rp"};
constexpr const char* op_names[] = {"add", "mul", "fma"};

std::string hex32(std::uint32_t x) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08X", x);
  return buf;
}

template <int Op, int Mode, bool Ftz>
bool probe_fp32(std::uint64_t count, std::uint32_t* device_out, std::vector<std::uint32_t>& host_out) {
  const std::uint32_t seed = 1000 * Op + 10 * Mode + Ftz;
  fp32_kernel<Op, Mode, Ftz><<<1024, 256>>>(count, seed, device_out);
  PROBE_CHECK(cudaGetLastError());
  PROBE_CHECK(cudaMemcpy(host_out.data(), device_out, count * 4, cudaMemcpyDeviceToHost));
  probe::tally t(std::string(op_names[Op]) + "." + ptx_mode_names[Mode] + (Ftz ? ".ftz" : "") + ".f32 (random)");
  probe::parallel_for(count, [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t i = begin; i < end; ++i) {
      std::uint32_t in[3];
      fp32_operands(i, seed, in);
      const float32 a{in[0]}, b{in[1]}, c{in[2]};
      const float32 model = Op == 0   ? ptx::add_f32(a, b, ptx_modes[Mode], Ftz)
                            : Op == 1 ? ptx::mul_f32(a, b, ptx_modes[Mode], Ftz)
                                      : ptx::fma_f32(a, b, c, ptx_modes[Mode], Ftz);
      if (model.bits != host_out[i])
        t.mismatch(hex32(in[0]) + " " + hex32(in[1]) + (Op == 2 ? " " + hex32(in[2]) : "") + " gpu " +
                   hex32(host_out[i]) + " model " + hex32(model.bits));
    }
    t.compared += end - begin;
  });
  return t.report();
}

// ---- bf16: every pair ----
template <int Op>
__global__ void bf16_pairs_kernel(std::uint32_t first_a, std::uint32_t a_count, std::uint16_t* out) {
  const std::uint64_t total = std::uint64_t{a_count} << 16;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    const auto a = static_cast<std::uint16_t>(first_a + (i >> 16)), b = static_cast<std::uint16_t>(i);
    std::uint16_t d;
    if constexpr (Op == 0) asm volatile("add.rn.bf16 %0, %1, %2;" : "=h"(d) : "h"(a), "h"(b));
    else asm volatile("mul.rn.bf16 %0, %1, %2;" : "=h"(d) : "h"(a), "h"(b));
    out[i] = d;
  }
}

template <int Op>
bool probe_bf16_pairs(std::uint32_t a_stride) {
  constexpr std::uint32_t chunk = 4096;
  std::uint16_t* device_out = nullptr;
  PROBE_CHECK(cudaMalloc(&device_out, std::size_t{chunk} << 17));
  std::vector<std::uint16_t> host(std::size_t{chunk} << 16);
  probe::tally t(std::string(Op == 0 ? "add" : "mul") + ".rn.bf16 (every pair" + (a_stride > 1 ? ", sampled a)" : ")"));
  for (std::uint32_t first = 0; first < 65536; first += chunk * a_stride) {
    bf16_pairs_kernel<Op><<<2048, 256>>>(first, chunk, device_out);
    PROBE_CHECK(cudaGetLastError());
    PROBE_CHECK(cudaMemcpy(host.data(), device_out, host.size() * 2, cudaMemcpyDeviceToHost));
    probe::parallel_for(host.size(), [&](std::uint64_t begin, std::uint64_t end) {
      for (std::uint64_t i = begin; i < end; ++i) {
        const bfloat16 a{static_cast<std::uint16_t>(first + (i >> 16))}, b{static_cast<std::uint16_t>(i)};
        const bfloat16 model = Op == 0 ? ptx::add_rn_bf16(a, b) : ptx::mul_rn_bf16(a, b);
        if (model.bits != host[i]) {
          char buf[96];
          std::snprintf(buf, sizeof buf, "%04X %04X gpu %04X model %04X", a.bits, b.bits, host[i], model.bits);
          t.mismatch(buf);
        }
      }
      t.compared += end - begin;
    });
  }
  PROBE_CHECK(cudaFree(device_out));
  return t.report();
}

__global__ void bf16_fma_kernel(std::uint64_t count, std::uint16_t* out) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    std::uint32_t in[3];
    fp32_operands(i, 77, in);
    const auto a = static_cast<std::uint16_t>(in[0] >> 16), b = static_cast<std::uint16_t>(in[1] >> 16),
               c = static_cast<std::uint16_t>(in[2] >> 16);
    std::uint16_t d;
    asm volatile("fma.rn.bf16 %0, %1, %2, %3;" : "=h"(d) : "h"(a), "h"(b), "h"(c));
    out[i] = d;
  }
}

bool probe_bf16_fma(std::uint64_t count) {
  std::uint16_t* device_out = nullptr;
  PROBE_CHECK(cudaMalloc(&device_out, count * 2));
  bf16_fma_kernel<<<1024, 256>>>(count, device_out);
  PROBE_CHECK(cudaGetLastError());
  std::vector<std::uint16_t> host(count);
  PROBE_CHECK(cudaMemcpy(host.data(), device_out, count * 2, cudaMemcpyDeviceToHost));
  PROBE_CHECK(cudaFree(device_out));
  probe::tally t("fma.rn.bf16 (random)");
  probe::parallel_for(count, [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t i = begin; i < end; ++i) {
      std::uint32_t in[3];
      fp32_operands(i, 77, in);
      const bfloat16 a{static_cast<std::uint16_t>(in[0] >> 16)}, b{static_cast<std::uint16_t>(in[1] >> 16)},
          c{static_cast<std::uint16_t>(in[2] >> 16)};
      const bfloat16 model = ptx::fma_rn_bf16(a, b, c);
      if (model.bits != host[i]) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "%04X %04X %04X gpu %04X model %04X", a.bits, b.bits, c.bits, host[i], model.bits);
        t.mismatch(buf);
      }
    }
    t.compared += end - begin;
  });
  return t.report();
}

// ---- conversions: every fp32 value ----
__global__ void cvt_kernel(std::uint64_t first, std::uint64_t count, std::uint32_t* packed_rn, std::uint16_t* rz) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    const auto x = static_cast<std::uint32_t>(first + i), y = ~x;
    std::uint32_t d;
    asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "r"(x), "r"(y));
    packed_rn[i] = d;
    std::uint16_t z;
    asm volatile("cvt.rz.bf16.f32 %0, %1;" : "=h"(z) : "r"(x));
    rz[i] = z;
  }
}

bool probe_cvt(std::uint64_t stride) {
  constexpr std::uint64_t chunk = std::uint64_t{1} << 28;
  std::uint32_t* device_rn = nullptr;
  std::uint16_t* device_rz = nullptr;
  PROBE_CHECK(cudaMalloc(&device_rn, chunk * 4));
  PROBE_CHECK(cudaMalloc(&device_rz, chunk * 2));
  std::vector<std::uint32_t> rn(chunk);
  std::vector<std::uint16_t> rz(chunk);
  probe::tally packed("cvt.rn.bf16x2.f32 (every fp32, both halves)"), truncating("cvt.rz.bf16.f32 (every fp32)");
  for (std::uint64_t first = 0; first < (std::uint64_t{1} << 32); first += chunk * stride) {
    cvt_kernel<<<2048, 256>>>(first, chunk, device_rn, device_rz);
    PROBE_CHECK(cudaGetLastError());
    PROBE_CHECK(cudaMemcpy(rn.data(), device_rn, chunk * 4, cudaMemcpyDeviceToHost));
    PROBE_CHECK(cudaMemcpy(rz.data(), device_rz, chunk * 2, cudaMemcpyDeviceToHost));
    probe::parallel_for(chunk, [&](std::uint64_t begin, std::uint64_t end) {
      for (std::uint64_t i = begin; i < end; ++i) {
        const float32 x{static_cast<std::uint32_t>(first + i)}, y{~x.bits};
        const std::uint32_t model = ptx::cvt_rn_bf16x2_f32(x, y);
        if (model != rn[i]) packed.mismatch(hex32(x.bits) + " gpu " + hex32(rn[i]) + " model " + hex32(model));
        const std::uint16_t model_rz = ptx::cvt_rz_bf16_f32(x).bits;
        if (model_rz != rz[i]) truncating.mismatch(hex32(x.bits) + " gpu " + hex32(rz[i]) + " model " + hex32(model_rz));
      }
      packed.compared += 2 * (end - begin);
      truncating.compared += end - begin;
    });
  }
  PROBE_CHECK(cudaFree(device_rn));
  PROBE_CHECK(cudaFree(device_rz));
  const bool ok_packed = packed.report();
  return truncating.report() && ok_packed;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  probe::print_device();
  const std::uint64_t random_count = quick ? 1'000'000 : 100'000'000;
  std::uint32_t* device_out = nullptr;
  PROBE_CHECK(cudaMalloc(&device_out, random_count * 4));
  std::vector<std::uint32_t> host_out(random_count);
  bool ok = true;
  ok &= probe_bf16_pairs<0>(quick ? 16 : 1);
  ok &= probe_bf16_pairs<1>(quick ? 16 : 1);
  ok &= probe_bf16_fma(random_count);
  ok &= probe_cvt(quick ? 16 : 1);
#define RUN_FP32(op, mode, ftz) ok &= probe_fp32<op, mode, ftz>(random_count, device_out, host_out);
  RUN_FP32(0, 0, false) RUN_FP32(0, 1, false) RUN_FP32(0, 2, false) RUN_FP32(0, 3, false)
  RUN_FP32(0, 0, true) RUN_FP32(0, 1, true) RUN_FP32(0, 2, true) RUN_FP32(0, 3, true)
  RUN_FP32(1, 0, false) RUN_FP32(1, 1, false) RUN_FP32(1, 2, false) RUN_FP32(1, 3, false)
  RUN_FP32(1, 0, true) RUN_FP32(1, 1, true) RUN_FP32(1, 2, true) RUN_FP32(1, 3, true)
  RUN_FP32(2, 0, false) RUN_FP32(2, 1, false) RUN_FP32(2, 2, false) RUN_FP32(2, 3, false)
  RUN_FP32(2, 0, true) RUN_FP32(2, 1, true) RUN_FP32(2, 2, true) RUN_FP32(2, 3, true)
#undef RUN_FP32
  PROBE_CHECK(cudaFree(device_out));
  std::printf("probe_alu: %s\n", ok ? "all zero mismatches" : "MISMATCHES FOUND");
  return ok ? 0 : 1;
}
