// A hand-written CUDA kernel (sm_80 and later) that uses a generated layout conversion.
//
//   C[M x N] (f32, row-major) = A[M x K] (f16, row-major) * B[K x N] (f16, row-major)
//
// One CTA of 4 warps computes one 64x64 tile of C with mma.sync.m16n8k16 (the instruction wrapper of the
// generated mma header gemm_mma_sync.cuh): warps stack
// along M (Triton's warps_per_cta [4, 1]), each warp owns 16 rows x 64 columns = 8 mma tiles of
// 16x8, and the loop runs over K in steps of 16.  The fp32 accumulator is held in exactly the
// register order of Triton's nvidia_mma layout (version [2, 0], warps_per_cta [4, 1],
// instr_shape [16, 8], shape [64, 64]); `llgen show examples/specs/mma_v2_4x1_64x64.yaml` prints it:
//
//   register=1 -> (0, 1)     acc[r] with r = 4*j + c: c is the mma fragment index (c0..c3 of
//   register=2 -> (8, 0)     m16n8: bit 0 = column + 1, bit 1 = row + 8), j the 8-column tile
//   register=4 -> (0, 8)     (bits 2..4 = column + 8, 16, 32)
//   register=8 -> (0, 16)
//   register=16 -> (0, 32)
//   lane=1 -> (0, 2)         lane % 4 = "threadID_in_group": column 2 * (lane % 4)
//   lane=2 -> (0, 4)
//   lane=4 -> (1, 0)         lane / 4 = "groupID": row lane / 4
//   lane=8 -> (2, 0)
//   lane=16 -> (4, 0)
//   warp=1 -> (16, 0)        warp w: rows 16 w .. 16 w + 15
//   warp=2 -> (32, 0)
//
// That layout makes terrible global stores (each thread writes 2 adjacent floats per 8x8 block).
// The generated header converts the accumulator to the blocked layout size_per_thread [1, 4],
// threads_per_warp [2, 16], warps_per_cta [4, 1], order [1, 0] (through swizzled shared memory,
// bank-conflict free), in which register r of (lane, warp) is
//
//   row = lane / 16 + 2 * warp + 8 * (r / 4),   column = 4 * (lane % 16) + r % 4,
//
// so every thread stores 8 float4 (16 bytes each) and 16 consecutive lanes write one 256-byte row.
//
// Regenerate the header with `python -m ll_codegen.regenerate` (generated/manifest.yaml, entry
// mma_acc_to_blocked).  Launch: grid (N / 64, M / 64), 128 threads, no dynamic shared memory;
// M and N multiples of 64, K a multiple of 16, A, B and C 16-byte aligned.
// This file includes nothing but generated headers, so NVRTC (CuPy) compiles it as it is, given
// -I examples/kernels and the CUDA include folder (the headers include <cuda_runtime.h>); it uses
// no CUDA vector types or intrinsics from headers and no inline asm (the mma is the generated
// wrapper, the 16-byte store a 16-byte-aligned struct).

#include "../../generated/mma_acc_to_blocked.cuh"
#include "../../generated/gemm_mma_sync.cuh"  // for its mma.sync.m16n8k16 f32 += f16 * f16 wrapper

namespace {

constexpr int kTile = 64;
constexpr int kWarps = 4;
constexpr int kAccRegs = 32;  // 8 tiles of m16n8 x 4 floats

static_assert(mma_acc_to_blocked::kThreads == 32 * kWarps, "the conversion must span the CTA's 4 warps");
static_assert(mma_acc_to_blocked::kSrcRegs == kAccRegs && mma_acc_to_blocked::kDstRegs == kAccRegs,
              "the conversion must take and give 32 floats per thread");
static_assert(mma_acc_to_blocked::kElemBytes == sizeof(float), "the conversion must be planned for f32");

// Four floats as one 16-byte value: its alignment lets the compiler store it with one st.global.v4.f32
// (CUDA's float4 without its header).
struct alignas(16) Float4 {
    float x, y, z, w;
};

// One 16-byte global store; p must be 16-byte aligned.
__device__ __forceinline__ void st_global_v4(float* p, float x, float y, float z, float w) {
    *reinterpret_cast<Float4*>(p) = Float4{x, y, z, w};
}

// Two consecutive f16 (raw bits) as one .f16x2 register: the lower address in the low half.
__device__ __forceinline__ unsigned ld_pair(const unsigned short* p) {
    return *reinterpret_cast<const unsigned*>(p);
}

__device__ __forceinline__ unsigned pack(unsigned short lo, unsigned short hi) {
    return static_cast<unsigned>(lo) | (static_cast<unsigned>(hi) << 16);
}

// (d0, d1, d2, d3) += a (16x16 f16, row-major fragment) * b (16x8 f16, column fragment): one
// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 through the generated header's wrapper.
__device__ __forceinline__ void mma_m16n8k16(float& d0, float& d1, float& d2, float& d3, const unsigned (&a)[4],
                                             unsigned b0, unsigned b1) {
    gemm_mma_sync::detail::mma_m16n8k16_f32_f16(d0, d1, d2, d3, a[0], a[1], a[2], a[3], b0, b1);
}

}  // namespace

extern "C" __global__ void __launch_bounds__(32 * kWarps)
mma_store(const unsigned short* __restrict__ A,  // M x K f16 bits, row-major
          const unsigned short* __restrict__ B,  // K x N f16 bits, row-major
          float* __restrict__ C,                 // M x N, row-major
          int M, int N, int K) {
    __shared__ __align__(16) unsigned char smem[mma_acc_to_blocked::kSmemBytes > 0 ? mma_acc_to_blocked::kSmemBytes : 16];
    (void)M;
    const unsigned lane = threadIdx.x % 32;
    const unsigned warp = threadIdx.x / 32;
    const unsigned group = lane / 4;  // PTX "groupID"
    const unsigned tig = lane % 4;    // PTX "threadID_in_group"
    const int row0 = blockIdx.y * kTile;
    const int col0 = blockIdx.x * kTile;

    // ---- C tile = A * B with mma.sync; acc in the nvidia_mma v2 register order (see above)
    float acc[kAccRegs];
#pragma unroll
    for (int r = 0; r < kAccRegs; ++r) acc[r] = 0.0f;

    const unsigned short* a_lo = A + static_cast<long long>(row0 + 16 * warp + group) * K;  // row groupID
    const unsigned short* a_hi = a_lo + 8LL * K;                                           // row groupID + 8
    for (int k0 = 0; k0 < K; k0 += 16) {
        // A fragment: a0 (row g, k 2t..2t+1), a1 (row g+8, same k), a2 (row g, k + 8), a3 (row g+8, k + 8)
        const unsigned a[4] = {ld_pair(a_lo + k0 + 2 * tig), ld_pair(a_hi + k0 + 2 * tig),
                               ld_pair(a_lo + k0 + 2 * tig + 8), ld_pair(a_hi + k0 + 2 * tig + 8)};
        const unsigned short* b_k = B + static_cast<long long>(k0 + 2 * tig) * N + col0 + group;
#pragma unroll
        for (int j = 0; j < 8; ++j) {  // 8-column tile j of the warp's 64 columns
            // B fragment (column n = 8j + g): b0 = k 2t, 2t+1; b1 = k 2t+8, 2t+9
            const unsigned short* b = b_k + 8 * j;
            mma_m16n8k16(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3], a,
                         pack(b[0], b[N]), pack(b[8LL * N], b[9LL * N]));
        }
    }

    // ---- the generated conversion: mma accumulator -> blocked [1, 4] x [2, 16] x [4, 1]
    float out[kAccRegs];
    mma_acc_to_blocked::convert(acc, out, smem);

    // ---- coalesced 16-byte stores: registers 4 q .. 4 q + 3 hold 4 consecutive elements of one row;
    // dst_index (generated) gives the row-major index of each register's element in the 64x64 tile
    constexpr int kCols = mma_acc_to_blocked::kShape[1];
#pragma unroll
    for (int q = 0; q < kAccRegs / 4; ++q) {
        const int e = mma_acc_to_blocked::dst_index(4 * q, lane, warp);
        st_global_v4(C + static_cast<long long>(row0 + e / kCols) * N + col0 + e % kCols,
                     out[4 * q], out[4 * q + 1], out[4 * q + 2], out[4 * q + 3]);
    }
}
