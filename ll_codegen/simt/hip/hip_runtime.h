// Host SIMT stand-in for <hip/hip_runtime.h> (see ../simt_host.h).
#pragma once
#include "../simt_host.h"

// CUDA's warp-level intrinsics are not HIP: hipcc rejects them, and so does the host runtime in
// every HIP translation unit (they become undeclared names from here on).
#define __syncwarp llgen_hip_has_no___syncwarp
#define __shfl_sync llgen_hip_has_no___shfl_sync
#define __shfl_xor_sync llgen_hip_has_no___shfl_xor_sync
#define __shfl_up_sync llgen_hip_has_no___shfl_up_sync
#define __shfl_down_sync llgen_hip_has_no___shfl_down_sync
#define __ballot_sync llgen_hip_has_no___ballot_sync
#define __activemask llgen_hip_has_no___activemask
