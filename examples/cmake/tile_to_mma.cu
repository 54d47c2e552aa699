// Two headers generated at build time by LLGen.cmake (see CMakeLists.txt): load_tile.cuh loads a
// 64x64 f16 tile from global memory into the blocked layout of examples/blocked_64x64.yaml, and
// to_mma.cuh converts it to the mma.sync accumulator layout of examples/mma_v2_64x64.yaml.  The
// kernel writes each register back to the element its dst_index() names, so the output is the
// input tile again (row-major, dense) when both headers do what they say.
#include <cstdint>
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

#include "load_tile.cuh"
#include "to_mma.cuh"

static_assert(load_tile::kRegs == to_mma::kSrcRegs, "load() fills what convert() reads");
static_assert(load_tile::kThreads == to_mma::kThreads, "one CTA runs both");
static_assert(load_tile::kElemBytes == sizeof(uint16_t) && to_mma::kElemBytes == sizeof(uint16_t), "f16");

constexpr int kRows = load_tile::kShape[0], kCols = load_tile::kShape[1];

// One CTA of to_mma::kThreads threads: the tile at `in` (row stride `ld` elements, 16-byte aligned)
// -> registers (blocked) -> registers (mma accumulator) -> out[row-major index].
__global__ void tile_to_mma(const uint16_t* in, long long ld, uint16_t* out) {
    // one scratch for both: load() may convert through shared memory too (kSmemBytes 0 when it does not)
    constexpr int kScratch = to_mma::kSmemBytes > load_tile::kSmemBytes ? to_mma::kSmemBytes : load_tile::kSmemBytes;
    __shared__ __align__(16) unsigned char smem[kScratch];
    uint16_t blocked[load_tile::kRegs], mma[to_mma::kDstRegs];
    const long long strides[2] = {ld, 1};
    load_tile::load(in, strides, blocked, smem);
    to_mma::convert(blocked, mma, smem);
    const int lane = threadIdx.x % to_mma::kWarpSize, warp = threadIdx.x / to_mma::kWarpSize;
    for (int r = 0; r < to_mma::kDstRegs; ++r) out[to_mma::dst_index(r, lane, warp)] = mma[r];
}

int main() {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::printf("no CUDA device: built, not run\n");
        return 0;
    }
    const long long ld = kCols + 8;  // a padded row stride: strides are runtime arguments
    std::vector<uint16_t> in(kRows * ld), out(kRows * kCols);
    for (int i = 0; i < kRows; ++i)
        for (int j = 0; j < kCols; ++j) in[i * ld + j] = static_cast<uint16_t>(i * kCols + j);
    uint16_t *d_in = nullptr, *d_out = nullptr;
    cudaMalloc(&d_in, in.size() * sizeof(uint16_t));
    cudaMalloc(&d_out, out.size() * sizeof(uint16_t));
    cudaMemcpy(d_in, in.data(), in.size() * sizeof(uint16_t), cudaMemcpyHostToDevice);
    tile_to_mma<<<1, to_mma::kThreads>>>(d_in, ld, d_out);
    cudaMemcpy(out.data(), d_out, out.size() * sizeof(uint16_t), cudaMemcpyDeviceToHost);
    const cudaError_t err = cudaGetLastError();
    cudaFree(d_in);
    cudaFree(d_out);
    if (err != cudaSuccess) {
        std::printf("CUDA error: %s\n", cudaGetErrorString(err));
        return 1;
    }
    int bad = 0;
    for (int k = 0; k < kRows * kCols; ++k) bad += out[k] != k;
    std::printf("%s: %d of %d elements differ\n", bad ? "FAILED" : "ok", bad, kRows * kCols);
    return bad != 0;
}
