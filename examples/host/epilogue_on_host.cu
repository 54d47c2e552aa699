// A hand-written kernel built on a generated header, run on the host SIMT runtime (no GPU): each
// block writes its 128 x 128 tile of a row-major f16 matrix C whose leading dimension `ldc` is
// known only at run time.  The store is generated (generated/epilogue_any_ldc_f16.cuh, whose tile
// promises element alignment only): it reads the pointer and ldc and takes the widest vectors they
// allow, masked at the matrix's edges.
//
//   clang++ -std=c++17 -x c++ -I ll_codegen/simt -I generated -include llgen_host.h \
//           examples/host/epilogue_on_host.cu -o epilogue && ./epilogue 999
//
// The same kernel compiles for the GPU (nvcc -I generated -c); main() exists only on the host.
#include <cuda_fp16.h>

#include "epilogue_any_ldc_f16.cuh"

namespace ep = epilogue_any_ldc_f16;
constexpr int kTile = 128;

// The value the kernel writes at C[row][col] (small integers: exact in f16).
__host__ __device__ inline float value_at(int row, int col) { return float(row % 97 * 7 + col % 61); }

extern "C" __global__ void __launch_bounds__(ep::kThreads) write_tiles(__half* C, int M, int N, long long ldc) {
    extern __shared__ __align__(16) unsigned char smem[];        // ep::kSmemBytes: the store's scratch
    const int m0 = blockIdx.y * kTile, n0 = blockIdx.x * kTile;
    const int lane = threadIdx.x % ep::kWarpSize, warp = threadIdx.x / ep::kWarpSize;
    __half v[ep::kRegs];                                           // this thread's accumulator registers
    for (int r = 0; r < ep::kRegs; ++r) {
        const int i = ep::src_index(r, lane, warp);                // row-major index in the tile
        v[r] = __float2half_rn(value_at(m0 + i / kTile, n0 + i % kTile));
    }
    const long long strides[2] = {ldc, 1};
    __half* tile = C + m0 * ldc + n0;
    if (m0 + kTile <= M && n0 + kTile <= N) {
        ep::store(v, tile, strides, smem);
    } else {
        const int extent[2] = {M - m0, N - n0};
        ep::store_masked(v, tile, strides, extent, smem);
    }
#if defined(LLGEN_EXAMPLE_OOB)  // a bug to be caught: one element past the matrix's last row
    if (threadIdx.x == 5 && blockIdx.x == 0 && blockIdx.y == 0) C[(M - 1) * ldc + ldc] = __float2half_rn(1.0f);
#endif
}

#if defined(LLGEN_HOST_SIMT)
#include <cstdio>
#include <cstdlib>

LLGEN_HOST_SHARED(smem, ep::kSmemBytes > 0 ? ep::kSmemBytes : 16);

// epilogue [ldc [M N [short]]]: runs a grid over an M x N matrix with leading dimension ldc (C
// allocated `short` elements too small, to see the runtime catch the generated store); 0 when every
// element is right and the runtime saw no error.
int main(int argc, char** argv) {
    const long long ldc = argc > 1 ? std::atoll(argv[1]) : 264;
    const int M = argc > 3 ? std::atoi(argv[2]) : 200, N = argc > 3 ? std::atoi(argv[3]) : 264;
    const size_t elems = size_t(M - 1) * ldc + N - (argc > 4 ? std::atoi(argv[4]) : 0);
    __half* C = static_cast<__half*>(llgen_host::device_malloc(elems * sizeof(__half)));
    llgen_host::Dim3 grid;
    grid.x = (N + kTile - 1) / kTile, grid.y = (M + kTile - 1) / kTile;
    const auto errors = llgen_host::launch_grid(grid, ep::kThreads, smem, ep::kSmemBytes,
                                                [&] { write_tiles(C, M, N, ldc); });
    for (const auto& e : errors) std::printf("ERR %s\n", e.c_str());
    long bad = 0;
    for (int r = 0; r < M; ++r)
        for (int c = 0; c < N && size_t(r * ldc + c) < elems; ++c)
            bad += __half2float(C[r * ldc + c]) != value_at(r, c);
    std::printf("%s: %ld of %d elements differ (ldc %lld, %u x %u blocks)\n", bad || !errors.empty() ? "FAIL" : "ok",
                bad, M * N, ldc, grid.x, grid.y);
    llgen_host::device_free(C);
    return bad || !errors.empty();
}
#endif
