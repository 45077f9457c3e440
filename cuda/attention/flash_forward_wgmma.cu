// The wgmma kernel's launch (the kernel: wgmma_kernel.cuh) and its host API
// (the contract: flash_call.h).
#include "flash_api.cuh"
#include "wgmma_kernel.cuh"

#include <cudaTypedefs.h>

namespace {

using namespace flash;
using namespace flash::wgmma;

// cuTensorMapEncodeTiled from the driver, found through the runtime (no -lcuda).
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const auto encoder = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000, cudaEnableDefault, &found) !=
          cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
      function = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
  }();
  return encoder;
}

// A box's elements and their swizzle: its width in bytes.
struct box_format {
  CUtensorMapDataType type;
  int bytes, columns;
};
constexpr box_format bf16_pages{CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, 64};

// [batch][heads][rows][columns] at its strides as a 4-D tensor, boxes of
// f.columns columns x box_rows rows of one head, swizzled as wide as a box's
// row (128 or 64 bytes); rows past a head's end read as zeros (as FA2's copies give them).
bool head_map(CUtensorMap* map, const void* data, const tensor_strides& s, int batch, int heads, int rows,
            int columns, int box_rows, box_format f) {
  const auto encode = tensor_map_encoder();
  if (!encode) return false;
  const cuuint64_t dims[4] = {cuuint64_t(columns), cuuint64_t(rows), cuuint64_t(heads), cuuint64_t(batch)};
  const cuuint64_t strides[3] = {cuuint64_t(s.row) * f.bytes, cuuint64_t(s.head) * f.bytes,
                               cuuint64_t(s.batch) * f.bytes};  // bytes
  const cuuint32_t box[4] = {cuuint32_t(f.columns), cuuint32_t(box_rows), 1, 1}, element_strides[4] = {1, 1, 1, 1};
  const auto swizzle = f.columns * f.bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B;
  return encode(map, f.type, 4, const_cast<void*>(data), dims, strides, box, element_strides,
              CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// Q, K and V in the boxes the producer copies, O in the epilogue's. e4m3's
// V is V^T, D rows of key_columns(key_rows) keys a head (flash_call.h).
template <class Op, int D>
bool make_tensor_maps(tensor_maps& maps, const forward_params& p, int heads) {
  using L = smem_layout<Op, D>;
  const int batch = heads / p.heads, kv_heads = p.heads / p.kv_group;
  const box_format pages =
      Op::fp8 ? box_format{CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, L::page_columns} : bf16_pages;
  const bool v_map = Op::fp8 ? head_map(&maps.v, p.v, p.v_strides, batch, kv_heads, D, fp8_key_columns(p.key_rows),
                                      D, {CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, L::BN})
                           : head_map(&maps.v, p.v, p.v_strides, batch, kv_heads, p.key_rows, D, L::BN, pages);
  return v_map && head_map(&maps.q, p.q, p.q_strides, batch, p.heads, p.query_rows, D, L::rows, pages) &&
       head_map(&maps.k, p.k, p.k_strides, batch, kv_heads, p.key_rows, D, L::BN, pages) &&
       head_map(&maps.o, p.o, p.o_strides, batch, p.heads, p.query_rows, D, consumer_rows, bf16_pages);
}

// The wgmma kernel of one kind of operand, head dim, mask and rule (flash::forward dispatches to it).
template <class Op>
struct wgmma_structure {
  template <int D, bool Causal, stabilization Rule, bool Count>
  struct of {
    static int launch(const forward_params& p, int heads, cudaStream_t stream) {
      using L = smem_layout<Op, D>;
      tensor_maps maps;
      if (!make_tensor_maps<Op, D>(maps, p, heads)) return 2;
      const auto kernel = flash_forward_wgmma_kernel<Op, D, Causal, Rule, Count>;
      if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L::bytes) != cudaSuccess) return 2;
      int device = 0, sms = 0;
      if (cudaGetDevice(&device) != cudaSuccess ||
          cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
        return 2;
      const long tiles = long(row_blocks<Op, D>(p.query_rows)) * heads;
      if (tiles > 0x7FFFFFFF) return 1;  // the kernel counts them in an int
      kernel<<<tile_schedule::grid<Causal>(tiles, sms), warpgroup_threads * (1 + Op::consumers(D)), L::bytes, stream>>>(
          p, maps, heads);
      return cudaGetLastError() == cudaSuccess ? 0 : 2;
    }
  };
};

}  // namespace

// The host API (its contract: flash_call.h).
int flash::forward_wgmma(const call& c, cudaStream_t stream) {
  if (c.fp8 && c.p_bar_sum)
    return flash::forward<wgmma_structure<e4m3_pv_fp32_add_p_bar_sum_operands>::of>(c, stream);
  if (c.fp8 && c.pv_fp32_add) return flash::forward<wgmma_structure<e4m3_pv_fp32_add_operands>::of>(c, stream);
  return c.fp8 ? flash::forward<wgmma_structure<e4m3_operands>::of>(c, stream)
               : flash::forward<wgmma_structure<bf16_operands>::of>(c, stream);
}
