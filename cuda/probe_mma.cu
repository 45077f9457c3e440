// Probe: Hopper tensor cores against sm90_tensor_core (include/bitexact/hardware/mma.hpp):
// mma.sync m16n8k16 bf16->f32, f16->f32, f16->f16 and wgmma m64n8k16 bf16->f32,
// 32M outputs each (1.28 * 10^8 in all) from the capture's structured tile
// classes (cuda/capture/capture_mma.cuh: full-range exponents, subnormals,
// signed zeros, Inf/NaN, cancellation, spreads beyond the kept bits, the
// maximum at every product position, C dominating, near ties, overflow,
// negative sums) plus one class of its own for bf16: products below 2^-128
// around zero terms and C = 0, where the zero-term exponent shows (the
// captures left it open); for those tiles the probe also counts mismatches of
// neighbouring zero-term exponents.
//
// Then the wgmma shapes and operand sources of our wgmma attention kernel
// (cuda/attention/wgmma_kernel.cuh, through cuda/hopper.cuh):
// m64n64k16 and m64n128k16 with A and B K-major from 128-byte-swizzled
// shared memory (S = Q K^T), and with A from registers and B MN-major (O +=
// P V). Each m64n8 tile is laid into all N / 8 column chunks of the wide
// instruction, chunk j with its columns rotated by j, at the k16 step t % 4
// of a 64-column page (the start-address offsets the kernel uses); chunk 0,
// rotated back, is compared with the model and every other chunk with chunk 0.
//
//   probe_mma [--quick] [--save DIR]
//   --quick: 1M outputs per variant, for a smoke test; --save: write the tiles
//   whose GPU outputs decide the sign of a zero result, in the capture layout.
#include <bitexact/hardware/mma.hpp>
#include <chrono>
#include <cstdarg>
#include <cstring>

#include "capture/capture_mma.cuh"
#include "hopper.cuh"
#include "probe_common.cuh"

namespace bx = bitexact;

// log_line (capture_common.cuh) prints the capture-only functions' lines to stdout.

// The events of one fused step, printed beside a mismatch (outside the
// anonymous namespace: nvcc warns about its unused members there).
struct fused_step_recorder {
  std::string text;
  void on(const bx::fused_term_event& e) {
    char line[160];
    std::snprintf(line, sizeof line, "      term %3d: %c%llx * 2^%d (competes at 2^%d) -> kept %lld%s\n", e.index,
                  e.sign ? '-' : '+', (unsigned long long)e.significand, e.exponent, e.nominal_exponent,
                  (long long)e.kept, e.truncated ? ", bits cut" : "");
    text += line;
  }
  void on(const bx::fused_sum_event& e) {
    text += "      e_max " + std::to_string(e.max_exponent) + ", unit 2^" + std::to_string(e.lsb_exponent) +
            ", sum " + std::to_string(e.sum) + " units\n";
  }
  void on(const bx::special_event& e) { text += "      special " + std::to_string((int)e.reason) + "\n"; }
  void on(const bx::operation_event&) {}
  void on(const bx::operand_event&) {}
  void on(const bx::alignment_event&) {}
  void on(const bx::exact_event&) {}
  void on(const bx::normalization_event&) {}
  void on(const bx::rounding_event&) {}
  void on(const bx::result_event&) {}
};

namespace {

constexpr int kClassTinyProducts = kClassCount;  // the probe's own class, after the capture's
constexpr int kClassSlots = kClassCount + 3;     // structured classes, tiny products, two layout checks
int class_slot(int cls) { return cls >= kClassLayoutIdentity ? kClassCount + 1 + (cls - kClassLayoutIdentity) : cls; }
const char* class_name(int slot) {
  static const char* names[kClassSlots] = {"baseline",     "full range",  "subnormal",     "zeros",
                                           "inf/nan",      "cancel",      "spread",        "max position",
                                           "C dominates",  "near ties",   "overflow",      "negative sums",
                                           "tiny products", "layout identity", "layout integers"};
  return names[slot];
}

// bf16 tiles whose products lie in [2^-152, 2^-128] (many cut at 2^(Z-25) when
// a zero term's exponent Z sets the window), with zero terms and C = +-0 or a
// tiny subnormal, so that the final truncation to the 2^-149 grid shows Z.
void tiny_products_tile(SplitMix64& rng, int rows, uint16_t* a, uint16_t* b, uint32_t* c) {
  for (int i = 0; i < rows * 16; ++i)
    a[i] = rng.chance(6) ? (uint16_t)((rng.next() & 1) << 15) : (uint16_t)random_value(rng, kBf16, -76, -64);
  for (int i = 0; i < 128; ++i)
    b[i] = rng.chance(16) ? (uint16_t)random_subnormal(rng, kBf16) : (uint16_t)random_value(rng, kBf16, -76, -64);
  for (int i = 0; i < rows * 8; ++i) {
    const int r = (int)(rng.next() % 4);
    c[i] = r < 3 ? (uint32_t)(rng.next() & 1) << 31 : (uint32_t)rng.range(1, 1 << 10) | (uint32_t)(rng.next() & 1) << 31;
  }
}

// count tiles of the variant, generated on every core in batches of 512
// (each batch from its own seed; each starts with the two layout tiles).
Tiles generate(int variant, int count, uint64_t seed) {
  constexpr int batch = 512;
  const int rows = variant == kWgmmaBf16F32 ? 64 : 16;
  const bool bf16_inputs = variant == kMmaBf16F32 || variant == kWgmmaBf16F32;
  Tiles t;
  t.m = rows;
  t.count = count;
  t.c_is_f16 = variant == kMmaF16F16;
  t.classes.resize(count);
  t.a.resize((size_t)count * rows * 16);
  t.b.resize((size_t)count * 128);
  t.c.resize((size_t)count * rows * 8);
  t.d.resize((size_t)count * rows * 8);
  const uint64_t batches = (count + batch - 1) / batch;
  probe::parallel_for(batches, [&](uint64_t first, uint64_t last) {
    for (uint64_t n = first; n < last; ++n) {
      const int begin = (int)n * batch, size = std::min(batch, count - begin);
      Tiles part = make_tiles(variant, size, seed * 1000003 + n);
      SplitMix64 rng(~(seed * 1000003 + n));
      for (int i = 0; i < size; ++i) {
        const size_t tile = begin + i;
        uint16_t* a = &t.a[tile * rows * 16];
        uint16_t* b = &t.b[tile * 128];
        uint32_t* c = &t.c[tile * rows * 8];
        std::copy_n(&part.a[(size_t)i * rows * 16], rows * 16, a);
        std::copy_n(&part.b[(size_t)i * 128], 128, b);
        std::copy_n(&part.c[(size_t)i * rows * 8], rows * 8, c);
        t.classes[tile] = part.classes[i];
        if (bf16_inputs && i % (kClassCount + 1) == kClassCount) {
          tiny_products_tile(rng, rows, a, b, c);
          t.classes[tile] = kClassTinyProducts;
        }
      }
    }
  });
  return t;
}

// Zero-term exponents compared on the tiny-products class (-100000: no floor at all).
constexpr int kZeroTermCandidates[] = {-126, -127, -128, -129, -130, -131, -132, -133, -134, -136, -140, -150, -100000};
constexpr int kCandidates = sizeof kZeroTermCandidates / sizeof kZeroTermCandidates[0];

// Catches the exact sum of a fused step, to tell which zero results decide the
// sign rule (a negative sum that rounds to zero, or a sum of negative zeros).
struct sum_catcher {
  std::int64_t sum = 0;
  void on(const bx::fused_sum_event& e) { sum = e.sum; }
};

bool every_term_negative_zero(std::span<const uint16_t> a, std::span<const uint16_t> b, uint32_t c, bool c_is_f16) {
  const uint32_t c_sign = c_is_f16 ? 0x8000u : 0x80000000u;
  if (c != c_sign) return false;
  for (size_t k = 0; k < a.size(); ++k) {
    const bool zero = (a[k] & 0x7FFF) == 0 || (b[k] & 0x7FFF) == 0;
    if (!zero || (((a[k] ^ b[k]) >> 15) & 1) == 0) return false;
  }
  return true;
}

// Tiles whose GPU outputs decide the sign of a zero result, kept for tests/data.
struct saved_tiles {
  std::mutex lock;
  std::vector<std::pair<const Tiles*, size_t>> taken;
  std::vector<uint32_t> classes;
  std::vector<uint16_t> a, b;
  std::vector<uint32_t> c, d;
};
constexpr size_t kSavedTilesPerVariant = 48;

struct variant_result {
  saved_tiles saved;
  probe::tally outputs;
  std::atomic<uint64_t> class_outputs[kClassSlots] = {}, class_mismatches[kClassSlots] = {};
  std::atomic<uint64_t> candidate_mismatches[kCandidates] = {}, tiny_outputs{0};
  explicit variant_result(std::string name) : outputs(std::move(name)) {}
};

std::string hex(uint32_t bits, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%0*X", digits, bits);
  return buf;
}

void save_tile(const Tiles& t, size_t tile, saved_tiles& saved) {
  std::lock_guard<std::mutex> guard(saved.lock);
  if (saved.classes.size() >= kSavedTilesPerVariant) return;
  const std::pair<const Tiles*, size_t> key{&t, tile};
  if (std::find(saved.taken.begin(), saved.taken.end(), key) != saved.taken.end()) return;
  saved.taken.push_back(key);
  const size_t outputs = (size_t)t.m * 8;
  saved.classes.push_back(t.classes[tile]);
  saved.a.insert(saved.a.end(), &t.a[tile * t.m * 16], &t.a[tile * t.m * 16] + t.m * 16);
  saved.b.insert(saved.b.end(), &t.b[tile * 128], &t.b[tile * 128] + 128);
  saved.c.insert(saved.c.end(), &t.c[tile * outputs], &t.c[tile * outputs] + outputs);
  saved.d.insert(saved.d.end(), &t.d[tile * outputs], &t.d[tile * outputs] + outputs);
}

// Writes saved tiles in the capture's BXMMA01 layout (cuda/capture/README.md).
void write_saved(const std::string& path, int variant, int rows, bool c_is_f16, const saved_tiles& saved) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    std::perror(path.c_str());
    std::exit(3);
  }
  const char magic[8] = {'B', 'X', 'M', 'M', 'A', '0', '1', 0};
  std::fwrite(magic, 1, 8, f);
  const uint32_t header[6] = {(uint32_t)variant, (uint32_t)rows, 8, 16, (uint32_t)saved.classes.size(),
                              c_is_f16 ? 2u : 4u};
  std::fwrite(header, 4, 6, f);
  const size_t outputs = (size_t)rows * 8;
  for (size_t i = 0; i < saved.classes.size(); ++i) {
    const uint32_t tile_header[2] = {saved.classes[i], 0};
    std::fwrite(tile_header, 4, 2, f);
    std::fwrite(&saved.a[i * rows * 16], 2, rows * 16, f);
    std::fwrite(&saved.b[i * 128], 2, 128, f);
    for (const auto* acc : {&saved.c, &saved.d})
      for (size_t j = 0; j < outputs; ++j) {
        const uint32_t bits = (*acc)[i * outputs + j];
        std::fwrite(&bits, c_is_f16 ? 2 : 4, 1, f);
      }
  }
  std::fclose(f);
}

template <bx::format Acc, bx::format In>
void compare_tile(const Tiles& t, size_t tile, variant_result& r) {
  const int slot = class_slot((int)t.classes[tile]);
  const int digits = Acc.width() / 4;
  for (int row0 = 0; row0 < t.m; row0 += 16) {
    std::array<bx::value<In>, 256> a;
    std::array<bx::value<In>, 128> b;  // column-major, as mma_m16n8k16 takes it
    std::array<bx::value<Acc>, 128> c, d;
    const size_t base = tile * t.m * 8 + row0 * 8;
    for (int i = 0; i < 256; ++i) a[i] = bx::value<In>::from_bits(t.a[tile * t.m * 16 + row0 * 16 + i]);
    for (int k = 0; k < 16; ++k)
      for (int n = 0; n < 8; ++n) b[n * 16 + k] = bx::value<In>::from_bits(t.b[tile * 128 + k * 8 + n]);
    for (int i = 0; i < 128; ++i) c[i] = bx::value<Acc>::from_bits(t.c[base + i]);
    bx::mma_m16n8k16<Acc, In>(bx::sm90_tensor_core, a, b, c, d);
    uint64_t wrong = 0;
    for (int i = 0; i < 128; ++i) {
      const uint32_t gpu = t.d[base + i];
      const auto row = std::span<const bx::value<In>>(&a[(i / 8) * 16], 16);
      const auto column = std::span<const bx::value<In>>(&b[(i % 8) * 16], 16);
      if (slot == kClassTinyProducts) {
        ++r.tiny_outputs;
        for (int z = 0; z < kCandidates; ++z) {
          bx::fused_sum_unit unit = bx::sm90_tensor_core;
          unit.zero_term_exponent = kZeroTermCandidates[z];
          if (bx::fused_multiply_add_step<Acc, In>(unit, row, column, c[i]).result.bits != gpu) ++r.candidate_mismatches[z];
        }
      }
      if ((gpu & (Acc.width() == 32 ? 0x7FFFFFFFu : 0x7FFFu)) == 0) {
        sum_catcher caught;
        bx::fused_multiply_add_step<Acc, In>(bx::sm90_tensor_core, row, column, c[i], caught);
        std::array<uint16_t, 16> row_bits, column_bits;
        for (int k = 0; k < 16; ++k) row_bits[k] = row[k].bits, column_bits[k] = column[k].bits;
        if (caught.sum < 0 || (caught.sum == 0 && every_term_negative_zero(row_bits, column_bits, c[i].bits,
                                                                              Acc.width() == 16)))
          save_tile(t, tile, r.saved);
      }
      if (d[i].bits == gpu) continue;
      ++wrong;
      if (r.outputs.mismatches.load() >= 5) {
        r.outputs.mismatches++;
        continue;
      }
      std::string report = std::string(class_name(slot)) + " tile, D[" + std::to_string(row0 + i / 8) + "][" +
                           std::to_string(i % 8) + "]: gpu " + hex(gpu, digits) + " model " + hex(d[i].bits, digits) +
                           "\n      A row:";
      for (const auto& x : row) report += " " + hex(x.bits, 4);
      report += "\n      B column:";
      for (const auto& x : column) report += " " + hex(x.bits, 4);
      report += "\n      C " + hex(c[i].bits, digits) + "\n";
      fused_step_recorder recorder;
      bx::fused_multiply_add_step<Acc, In>(bx::sm90_tensor_core, row, column, c[i], recorder);
      r.outputs.mismatch(report + recorder.text);
    }
    r.class_outputs[slot] += 128;
    r.class_mismatches[slot] += wrong;
  }
}

// Column n' of chunk j holds the tile's column (n' + j) % 8.
__host__ __device__ inline int rotated(int column, int chunk) { return (column + chunk) % 8; }

// The wide wgmma (see the top of the file) on each tile, A from shared
// memory (SharedA) or registers; out[tile][chunk][64][8], rotated back.
template <int N, bool SharedA>
__global__ void kernel_wgmma_wide(const uint16_t* a_all, const uint16_t* b_all, const uint32_t* c_all, uint32_t* out,
                                  int tiles) {
  // A: one K-major page [64][64]; B: K-major [N][64] (SharedA) or MN-major
  // pages [64 k][64 n], N / 64 of them 8 KiB apart.
  __shared__ __align__(1024) uint16_t a_page[64 * 64];
  __shared__ __align__(1024) uint16_t b_pages[N * 64];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const auto swizzled = [](int row, int column) {  // element offset in a page of 64 columns
    return row * 64 + (((column / 8) ^ (row % 8)) * 8) + column % 8;
  };
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const uint16_t* a = a_all + size_t(tile) * 64 * 16;
    const uint16_t* b = b_all + size_t(tile) * 128;  // b[k][n]
    const uint32_t* c = c_all + size_t(tile) * 512;
    const int step = tile % 4;  // the tile's k16 step within the page
    __syncthreads();
    for (int i = threadIdx.x; i < 64 * 16; i += blockDim.x) a_page[swizzled(i / 16, 16 * step + i % 16)] = a[i];
    for (int i = threadIdx.x; i < 16 * N; i += blockDim.x) {
      const int k = i / N, n = i % N, value = b[k * 8 + rotated(n % 8, n / 8)];
      if constexpr (SharedA) b_pages[swizzled(n, 16 * step + k)] = value;
      else b_pages[(n / 64) * 64 * 64 + swizzled(16 * step + k, n % 64)] = value;
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    float d[N / 8][4];
    for (int j = 0; j < N / 8; ++j)
      for (int r = 0; r < 4; ++r)
        d[j][r] = float_of(c[(warp * 16 + g + 8 * (r / 2)) * 8 + rotated(2 * t + r % 2, j)]);
    const uint32_t a_address = static_cast<uint32_t>(__cvta_generic_to_shared(a_page));
    const uint32_t b_address = static_cast<uint32_t>(__cvta_generic_to_shared(b_pages));
    hopper::warpgroup_arrive();
    if constexpr (SharedA) {
      hopper::wgmma_ss<N>(d, hopper::swizzled_descriptor(a_address + 32 * step, 16, 1024),
                          hopper::swizzled_descriptor(b_address + 32 * step, 16, 1024), true);
    } else {
      uint32_t ra[4];
      load_a_fragment(a, warp * 16, lane, ra);
      hopper::wgmma_rs_b_mn_major<N>(d, ra, hopper::swizzled_descriptor(b_address + step * 16 * 128, 64 * 128, 1024));
    }
    hopper::warpgroup_commit();
    hopper::warpgroup_wait<0>();
    hopper::fence_accumulators<N>(d);
    for (int j = 0; j < N / 8; ++j)
      for (int r = 0; r < 4; ++r)
        out[((size_t(tile) * (N / 8) + j) * 64 + warp * 16 + g + 8 * (r / 2)) * 8 + rotated(2 * t + r % 2, j)] =
            bits_of(d[j][r]);
  }
}

template <int N, bool SharedA>
bool probe_wide(const char* name, uint64_t outputs) {
  constexpr int rows = 64, chunks = N / 8;
  const uint64_t tiles = outputs / (rows * N);
  constexpr uint64_t chunk = 16384;
  variant_result r(name);
  probe::tally chunk_agreement(std::string(name) + ", chunks vs chunk 0");
  for (uint64_t first = 0; first < tiles; first += chunk) {
    const int count = (int)std::min(chunk, tiles - first);
    Tiles t = generate(kWgmmaBf16F32, count, 0x3A0BE000ull + N * 0x1000 + SharedA * 0x100000 + first / chunk);
    uint16_t *d_a, *d_b;
    uint32_t *d_c, *d_out;
    std::vector<uint32_t> wide((size_t)count * chunks * rows * 8);
    PROBE_CHECK(cudaMalloc(&d_a, t.a.size() * 2));
    PROBE_CHECK(cudaMalloc(&d_b, t.b.size() * 2));
    PROBE_CHECK(cudaMalloc(&d_c, t.c.size() * 4));
    PROBE_CHECK(cudaMalloc(&d_out, wide.size() * 4));
    PROBE_CHECK(cudaMemcpy(d_a, t.a.data(), t.a.size() * 2, cudaMemcpyHostToDevice));
    PROBE_CHECK(cudaMemcpy(d_b, t.b.data(), t.b.size() * 2, cudaMemcpyHostToDevice));
    PROBE_CHECK(cudaMemcpy(d_c, t.c.data(), t.c.size() * 4, cudaMemcpyHostToDevice));
    kernel_wgmma_wide<N, SharedA><<<264, 128>>>(d_a, d_b, d_c, d_out, count);
    PROBE_CHECK(cudaGetLastError());
    PROBE_CHECK(cudaMemcpy(wide.data(), d_out, wide.size() * 4, cudaMemcpyDeviceToHost));
    for (auto* p : {(void*)d_a, (void*)d_b, (void*)d_c, (void*)d_out}) cudaFree(p);
    for (int tile = 0; tile < count; ++tile) {
      const uint32_t* first_chunk = &wide[(size_t)tile * chunks * rows * 8];
      std::copy_n(first_chunk, rows * 8, &t.d[(size_t)tile * rows * 8]);
      for (int j = 1; j < chunks; ++j)
        for (int i = 0; i < rows * 8; ++i)
          if (first_chunk[j * rows * 8 + i] != first_chunk[i])
            chunk_agreement.mismatch("tile " + std::to_string(first + tile) + " chunk " + std::to_string(j) +
                                     " output " + std::to_string(i) + ": " + hex(first_chunk[j * rows * 8 + i], 8) +
                                     " vs chunk 0 " + hex(first_chunk[i], 8));
      chunk_agreement.compared += (chunks - 1) * rows * 8;
    }
    probe::parallel_for(count, [&](uint64_t begin, uint64_t end) {
      for (uint64_t tile = begin; tile < end; ++tile) compare_tile<bx::fp32, bx::bf16>(t, tile, r);
      r.outputs.compared += (end - begin) * rows * 8;
    });
  }
  const bool ok = r.outputs.report() & chunk_agreement.report();
  for (int slot = 0; slot < kClassSlots; ++slot)
    if (r.class_outputs[slot])
      std::printf("    class %-16s outputs %12llu  mismatches %llu\n", class_name(slot),
                  (unsigned long long)r.class_outputs[slot].load(), (unsigned long long)r.class_mismatches[slot].load());
  std::fflush(stdout);
  return ok;
}

std::string save_dir;  // --save DIR: write the zero-sign tiles there

bool probe_variant(int variant, const char* name, const char* file_name, uint64_t outputs) {
  const int rows = variant == kWgmmaBf16F32 ? 64 : 16;
  const uint64_t tiles = outputs / (rows * 8);
  constexpr uint64_t chunk = 16384;
  variant_result r(name);
  std::vector<uint16_t> c16, d16;
  for (uint64_t first = 0; first < tiles; first += chunk) {
    const int count = (int)std::min(chunk, tiles - first);
    Tiles t = generate(variant, count, 0x9A0BE000ull + (uint64_t)variant * 0x100000 + first / chunk);
    execute_tiles(variant, t, c16, d16);
    probe::parallel_for(count, [&](uint64_t begin, uint64_t end) {
      for (uint64_t tile = begin; tile < end; ++tile) {
        if (variant == kMmaF16F32) compare_tile<bx::fp32, bx::fp16>(t, tile, r);
        else if (variant == kMmaF16F16) compare_tile<bx::fp16, bx::fp16>(t, tile, r);
        else compare_tile<bx::fp32, bx::bf16>(t, tile, r);
      }
      r.outputs.compared += (end - begin) * rows * 8;
    });
  }
  const bool ok = r.outputs.report();
  if (!save_dir.empty()) {
    write_saved(save_dir + "/" + file_name, variant, rows, variant == kMmaF16F16, r.saved);
    std::printf("    saved %zu tiles that decide the sign of zero results to %s/%s\n", r.saved.classes.size(),
                save_dir.c_str(), file_name);
  }
  for (int slot = 0; slot < kClassSlots; ++slot)
    if (r.class_outputs[slot])
      std::printf("    class %-16s outputs %12llu  mismatches %llu\n", class_name(slot),
                  (unsigned long long)r.class_outputs[slot].load(), (unsigned long long)r.class_mismatches[slot].load());
  if (r.tiny_outputs) {
    std::printf("    zero-term exponent candidates on %llu tiny-products outputs (model: %d):\n",
                (unsigned long long)r.tiny_outputs.load(), bx::sm90_tensor_core.zero_term_exponent);
    for (int z = 0; z < kCandidates; ++z)
      std::printf("      Z = %-7s mismatches %llu\n",
                  kZeroTermCandidates[z] < -1000 ? "none" : std::to_string(kZeroTermCandidates[z]).c_str(),
                  (unsigned long long)r.candidate_mismatches[z].load());
  }
  std::fflush(stdout);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else if (std::strcmp(argv[i], "--save") == 0 && i + 1 < argc) save_dir = argv[++i];
  }
  probe::print_device();
  const uint64_t per_variant = quick ? (1u << 20) : (uint64_t{1} << 25);
  const auto start = std::chrono::steady_clock::now();
  bool ok = true;
  ok &= probe_variant(kMmaBf16F32, "mma.m16n8k16 f32.bf16.bf16.f32", "mma_bf16_f32.bin", per_variant);
  ok &= probe_variant(kMmaF16F32, "mma.m16n8k16 f32.f16.f16.f32", "mma_f16_f32.bin", per_variant);
  ok &= probe_variant(kMmaF16F16, "mma.m16n8k16 f16.f16.f16.f16", "mma_f16_f16.bin", per_variant);
  ok &= probe_variant(kWgmmaBf16F32, "wgmma.m64n8k16 f32.bf16.bf16", "wgmma_bf16_f32.bin", per_variant);
  ok &= probe_wide<64, true>("wgmma.m64n64k16 A, B K-major smem", per_variant);
  ok &= probe_wide<128, true>("wgmma.m64n128k16 A, B K-major smem", per_variant);
  ok &= probe_wide<64, false>("wgmma.m64n64k16 A regs, B MN-major smem", per_variant);
  ok &= probe_wide<128, false>("wgmma.m64n128k16 A regs, B MN-major smem", per_variant);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("probe_mma: %llu outputs in %.1f s: %s\n", (unsigned long long)(8 * per_variant), seconds,
              ok ? "all zero mismatches" : "MISMATCHES FOUND");
  return ok ? 0 : 1;
}
