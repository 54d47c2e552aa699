// Host SIMT stand-in for <hip/hip_fp16.h> (see ../simt_host.h): the 16-bit float of <cuda_fp16.h>'s
// stand-in and the conversions HIP code calls.
#pragma once
#include "../cuda_fp16.h"

inline __half __float2half(float f) { return __float2half_rn(f); }
