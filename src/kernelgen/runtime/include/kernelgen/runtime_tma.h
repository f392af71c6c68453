// kernelgen launcher runtime: TMA descriptors (a kernel's `tensor_maps`), encoded on the host for
// each launch. The driver's cuTensorMapEncodeTiled is reached through the runtime's driver entry
// point (no link against libcuda); encoding is host arithmetic only (no synchronisation, no
// allocation), so launches stay capturable in CUDA graphs: the map is a kernel parameter, copied
// into the graph by value.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernelgen/abi.h"

namespace kg {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// cuTensorMapEncodeTiled of the installed driver, looked up once: null when the driver lacks it,
// or when the runtime cannot ask (no usable driver): then *err is that CUDA error, else cudaSuccess.
inline EncodeTiled encode_tiled(cudaError_t* err) {
  struct Lookup {
    EncodeTiled fn;
    cudaError_t err;
  };
  static const Lookup lookup = []() -> Lookup {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t e =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found);
    if (e != cudaSuccess || found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();  // this lookup's own error: not the next launch's
      return {nullptr, e};
    }
    return {reinterpret_cast<EncodeTiled>(p), cudaSuccess};
  }();
  *err = lookup.err;
  return lookup.fn;
}

// Encodes the map of a row-major array of `rank` dimensions (dims and box outermost first, as the
// spec writes them) with elements of elem_bytes bytes, copied as unsigned integers of that size
// (bit-exact, zeros outside the array). KG_LAUNCHED; the UNALIGNED not-launched code (detail:
// `index`, the map's index) when the address is not 16-byte aligned or a row stride is not a
// multiple of 16 bytes; the TENSOR_MAP error (detail: the CUresult, 0 when the driver lacks the
// function) when the driver refuses the rest; the CUDA error when the runtime cannot reach a driver.
inline int32_t encode_tensor_map(CUtensorMap* map, const void* base, int64_t elem_bytes, int rank,
                                 const int64_t* dims, const int64_t* box, int swizzle, int32_t index) {
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0) return KG_CODE(KG_NL_UNALIGNED, index);
  cuuint64_t extent[5], stride[4];
  cuuint32_t boxes[5], step[5];
  int64_t bytes = elem_bytes;
  for (int i = 0; i < rank; ++i) {  // innermost first, as the driver takes them
    const int64_t d = dims[rank - 1 - i], b = box[rank - 1 - i];
    if (d < 1 || b < 1 || b > 256) return -KG_CODE(KG_E_TENSOR_MAP, CUDA_ERROR_INVALID_VALUE);
    extent[i] = static_cast<cuuint64_t>(d);
    boxes[i] = static_cast<cuuint32_t>(b);
    step[i] = 1;
    if (i + 1 < rank) {
      if (d > (static_cast<int64_t>(1) << 40) / bytes) return -KG_CODE(KG_E_TENSOR_MAP, CUDA_ERROR_INVALID_VALUE);
      bytes *= d;
      if (bytes % 16 != 0) return KG_CODE(KG_NL_UNALIGNED, index);
      stride[i] = static_cast<cuuint64_t>(bytes);
    }
  }
  cudaError_t lookup = cudaSuccess;
  const EncodeTiled fn = encode_tiled(&lookup);
  if (fn == nullptr) return lookup != cudaSuccess ? -KG_CODE(KG_E_CUDA, lookup) : -KG_CODE(KG_E_TENSOR_MAP, 0);
  const CUtensorMapDataType type = elem_bytes == 1   ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                   : elem_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_UINT16
                                   : elem_bytes == 4 ? CU_TENSOR_MAP_DATA_TYPE_UINT32
                                                     : CU_TENSOR_MAP_DATA_TYPE_UINT64;
  const CUtensorMapSwizzle swz = swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                 : swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                 : swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                 : CU_TENSOR_MAP_SWIZZLE_NONE;
  const CUresult r = fn(map, type, static_cast<cuuint32_t>(rank), const_cast<void*>(base), extent, stride, boxes,
                        step, CU_TENSOR_MAP_INTERLEAVE_NONE, swz, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? KG_LAUNCHED : -KG_CODE(KG_E_TENSOR_MAP, static_cast<int32_t>(r) & 0xffff);
}

}  // namespace kg
