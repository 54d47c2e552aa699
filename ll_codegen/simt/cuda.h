// Host SIMT stand-in for the CUDA driver API's <cuda.h> (see simt_host.h): the
// tensor-map part TMA needs.  cuTensorMapEncodeTiled validates its arguments
// as the driver documents them ("Tensor Map Object Managment") and stores them
// in the map's opaque bytes, which hopper.h's tma_load / tma_store read.
#pragma once
#include "simt_host.h"

typedef uint32_t cuuint32_t;
typedef uint64_t cuuint64_t;

typedef enum cudaError_enum { CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1, CUDA_ERROR_NOT_FOUND = 500 } CUresult;

typedef struct alignas(64) CUtensorMap_st {
    unsigned long long opaque[16];
} CUtensorMap;

typedef enum CUtensorMapDataType_enum {
    CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0,
    CU_TENSOR_MAP_DATA_TYPE_UINT16,
    CU_TENSOR_MAP_DATA_TYPE_UINT32,
    CU_TENSOR_MAP_DATA_TYPE_INT32,
    CU_TENSOR_MAP_DATA_TYPE_UINT64,
    CU_TENSOR_MAP_DATA_TYPE_INT64,
    CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
    CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
    CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
    CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
    CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ,
    CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
    CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ
} CUtensorMapDataType;

typedef enum CUtensorMapInterleave_enum {
    CU_TENSOR_MAP_INTERLEAVE_NONE = 0,
    CU_TENSOR_MAP_INTERLEAVE_16B,
    CU_TENSOR_MAP_INTERLEAVE_32B
} CUtensorMapInterleave;

typedef enum CUtensorMapSwizzle_enum {
    CU_TENSOR_MAP_SWIZZLE_NONE = 0,
    CU_TENSOR_MAP_SWIZZLE_32B,
    CU_TENSOR_MAP_SWIZZLE_64B,
    CU_TENSOR_MAP_SWIZZLE_128B
} CUtensorMapSwizzle;

typedef enum CUtensorMapL2promotion_enum {
    CU_TENSOR_MAP_L2_PROMOTION_NONE = 0,
    CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
    CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
    CU_TENSOR_MAP_L2_PROMOTION_L2_256B
} CUtensorMapL2promotion;

typedef enum CUtensorMapFloatOOBfill_enum {
    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0,
    CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
} CUtensorMapFloatOOBfill;

namespace llgen_host {
inline CUresult tensor_map_invalid(const char* why) {
    std::fprintf(stderr, "cuTensorMapEncodeTiled: %s\n", why);  // the driver only says INVALID_VALUE
    return CUDA_ERROR_INVALID_VALUE;
}
}  // namespace llgen_host

inline CUresult cuTensorMapEncodeTiled(CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType,
                                       cuuint32_t tensorRank, void* globalAddress, const cuuint64_t* globalDim,
                                       const cuuint64_t* globalStrides, const cuuint32_t* boxDim,
                                       const cuuint32_t* elementStrides, CUtensorMapInterleave interleave,
                                       CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
                                       CUtensorMapFloatOOBfill oobFill) {
    using llgen_host::tensor_map_invalid;
    static const unsigned char kBytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
    if (!tensorMap || reinterpret_cast<uintptr_t>(tensorMap) % 64)
        return tensor_map_invalid("tensorMap must be 64-byte aligned");
    if (unsigned(tensorDataType) > CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ)
        return tensor_map_invalid("tensorDataType is not modelled");
    if (tensorRank < 1 || tensorRank > 5) return tensor_map_invalid("tensorRank must be 1..5");
    if (!globalAddress || reinterpret_cast<uintptr_t>(globalAddress) % 16)
        return tensor_map_invalid("globalAddress must be 16-byte aligned");
    if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE)
        return tensor_map_invalid("interleaved layouts are not modelled");  // (the driver accepts them)
    if (unsigned(swizzle) > CU_TENSOR_MAP_SWIZZLE_128B || unsigned(l2Promotion) > CU_TENSOR_MAP_L2_PROMOTION_L2_256B ||
        unsigned(oobFill) > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
        return tensor_map_invalid("swizzle, l2Promotion or oobFill out of range");
    unsigned elem = kBytes[tensorDataType];
    bool floating = tensorDataType >= CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    if (oobFill == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA && !floating)
        return tensor_map_invalid("NAN_REQUEST_ZERO_FMA needs a floating-point tensorDataType");
    llgen_host::TensorMapDesc d{};
    d.magic = llgen_host::kTensorMapMagic;
    d.dtype = uint8_t(tensorDataType), d.rank = uint8_t(tensorRank), d.elem_bytes = uint8_t(elem);
    d.interleave = uint8_t(interleave), d.swizzle = uint8_t(swizzle), d.l2 = uint8_t(l2Promotion);
    d.oob = uint8_t(oobFill);
    d.address = reinterpret_cast<uintptr_t>(globalAddress);
    for (unsigned i = 0; i < tensorRank; ++i) {
        if (globalDim[i] == 0 || globalDim[i] > (uint64_t(1) << 32))
            return tensor_map_invalid("globalDim must be 1..2^32");
        if (boxDim[i] == 0 || boxDim[i] > 256) return tensor_map_invalid("boxDim must be 1..256");
        if (elementStrides[i] == 0 || elementStrides[i] > 8) return tensor_map_invalid("elementStrides must be 1..8");
        d.dim[i] = globalDim[i];
        d.box[i] = uint16_t(boxDim[i]);
        d.estride[i] = uint8_t(elementStrides[i]);
        if (i) {
            if (globalStrides[i - 1] % 16 || globalStrides[i - 1] >= (uint64_t(1) << 40))
                return tensor_map_invalid("globalStrides must be multiples of 16 below 2^40");
            d.stride[i - 1] = globalStrides[i - 1];
        }
    }
    unsigned inner = boxDim[0] * elem;
    if (inner % 16) return tensor_map_invalid("boxDim[0] * element size must be a multiple of 16 bytes");
    if (swizzle != CU_TENSOR_MAP_SWIZZLE_NONE && inner > (16u << swizzle))
        return tensor_map_invalid("the inner box dimension exceeds the swizzle span");
    std::memset(tensorMap->opaque, 0, sizeof tensorMap->opaque);
    std::memcpy(tensorMap->opaque, &d, sizeof d);
    return CUDA_SUCCESS;
}
