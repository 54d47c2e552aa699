// The control shared by the Hopper GEMM kernels (gemm_wgmma.cu: f16 / bf16 operands; gemm_fp8.cu:
// e4m3 / e5m2 operands): C (M x N) = A (M x K) B (K x N) in 128 x 256 tiles of C, f32 accumulation.
// Written by hand here: the tile scheduler, the stage ring and its mbarriers, the producer /
// consumer split and its register budgets, the epilogue's order.  Everything that depends on a
// layout -- the TMA boxes, the swizzled tiles, the wgmma descriptors, the registers the epilogue
// stores -- is a generated header's function: the operands' (a kernel file hands them in through
// LLGEN_GEMM_HOPPER_OPERANDS) and the epilogue's, included here and shared by every operand type
// (the kernel files assert that each operand header's accumulator is the registers they read).
//
//   gemm_wgmma_store_f32  the f32 accumulator -> global C (8-byte vectors, store_masked at the edges)
//   gemm_wgmma_stage_c    the 16-bit accumulator -> a 128-byte-swizzled shared C tile (st.shared)
//   gemm_wgmma_tma_c_<t>  that shared tile -> global C (four TMA boxes; TMA clips at the edges)
//
// Schedule.  Tiles are numbered in grouped order (GROUP_M tile rows form a group, walked column by
// column: the CTAs in flight together read few distinct A and B tiles, so L2 serves them).
// Persistent (LLGEN_GEMM_PERSISTENT=1, the default): the grid has one CTA per SM (at most one per
// tile) and CTA b computes tiles b, b + gridDim.x, ...; the producer's stage ring runs on across
// tiles, so the next tile's operands load while the consumers run the epilogue of this one, and a
// 16-bit C is staged in a buffer of its own.  LLGEN_GEMM_PERSISTENT=0: one CTA per tile (the same
// loop, run once), a 16-bit C staged in the then idle operand stages.
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstdint>

#include "gemm_wgmma_store_f32.cuh"
#include "gemm_wgmma_stage_c.cuh"
#include "gemm_wgmma_tma_c_f16.cuh"
#include "gemm_wgmma_tma_c_bf16.cuh"

extern __shared__ __align__(1024) unsigned char smem[];  // dynamic: gemm_hopper::smem_bytes<Op>(out)

// The hand-written control's knobs (bench/bench_gemm.py --ladder builds variants with -D):
#ifndef LLGEN_GEMM_STAGES
#define LLGEN_GEMM_STAGES 4
#endif
#ifndef LLGEN_GEMM_GROUP_M
#define LLGEN_GEMM_GROUP_M 8
#endif
#ifndef LLGEN_GEMM_IN_FLIGHT
#define LLGEN_GEMM_IN_FLIGHT 1
#endif
#ifndef LLGEN_GEMM_PERSISTENT
#define LLGEN_GEMM_PERSISTENT 1
#endif

namespace gemm_hopper {

namespace store_f32 = gemm_wgmma_store_f32;
namespace stage_c = gemm_wgmma_stage_c;
namespace sync = gemm_wgmma_tma_c_f16;  // mbarriers, proxy fences, bulk groups: the same in every TMA header

// The output's element type.  F16 / BF16: rounded to nearest even, staged and stored by TMA.
enum Out { F32 = 0, BF16 = 1, F16 = 2 };

constexpr int BM = stage_c::kShape[0], BN = stage_c::kShape[1];  // the C tile of one CTA
constexpr int CONSUMERS = 2;                  // consumer warp groups, 64 rows of the tile each
constexpr int THREADS = 128 + CONSUMERS * 128;  // warp group 0 produces, 1 and 2 consume
constexpr int ALIGN = 1024;                   // the 128-byte swizzle's tile alignment (asserted)
constexpr int MAX_SMEM = 227 * 1024;          // sm_90's dynamic shared memory per block
constexpr int C_BYTES = stage_c::kTileBytes;  // the staged 16-bit C tile
constexpr int IN_FLIGHT = LLGEN_GEMM_IN_FLIGHT;  // wgmma groups a consumer leaves running (0 or 1)
constexpr int GROUP_M = LLGEN_GEMM_GROUP_M;   // tile rows of one group of the grouped order
constexpr bool PERSISTENT = LLGEN_GEMM_PERSISTENT;
constexpr int BARRIER_BYTES = 2 * 8 * 8 + 2 * 8;  // full/empty per stage (at most 8), two epilogue rendezvous

static_assert(IN_FLIGHT == 0 || IN_FLIGHT == 1, "a consumer releases one stage per k-step");
static_assert(GROUP_M >= 1, "a group holds at least one tile row");
static_assert(store_f32::kThreads == CONSUMERS * 128 && stage_c::kThreads == CONSUMERS * 128 &&
              store_f32::kRegs == stage_c::kRegs && store_f32::kShape[0] == BM && store_f32::kShape[1] == BN,
              "both epilogues store the consumers' registers of one C tile");
static_assert(gemm_wgmma_tma_c_f16::kTileBytes == C_BYTES && gemm_wgmma_tma_c_bf16::kTileBytes == C_BYTES &&
              gemm_wgmma_tma_c_f16::kShape[0] == BM && gemm_wgmma_tma_c_f16::kShape[1] == BN &&
              gemm_wgmma_tma_c_bf16::kShape[0] == BM && gemm_wgmma_tma_c_bf16::kShape[1] == BN &&
              gemm_wgmma_tma_c_f16::kTileAlign <= ALIGN && C_BYTES % ALIGN == 0, "the C tile TMA stores");

// ---- compile-time checks that headers agree on the bytes and registers they share ----
// f(o) == g(o) for every element offset o of a shared tile.
template <class F, class G>
constexpr bool same_tile(int elements, F f, G g) {
    for (int o = 0; o < elements; ++o)
        if (f(o) != g(o)) return false;
    return true;
}
// f(r, lane, warp) == g(r, lane, warp) for every register of every consumer thread.
template <class F, class G>
constexpr bool same_regs(int regs, F f, G g) {
    for (int w = 0; w < CONSUMERS * 4; ++w)
        for (int l = 0; l < 32; ++l)
            for (int r = 0; r < regs; ++r)
                if (f(r, l, w) != g(r, l, w)) return false;
    return true;
}
static_assert(same_regs(stage_c::kRegs, store_f32::src_index, stage_c::src_index), "one accumulator layout");
static_assert(same_tile(BM * BN, stage_c::tile_index, gemm_wgmma_tma_c_f16::tile_index) &&
              same_tile(BM * BN, stage_c::tile_index, gemm_wgmma_tma_c_bf16::tile_index),
              "TMA stores the C tile the epilogue stages");

// Operand stages in flight: LLGEN_GEMM_STAGES, fewer where they would not fit beside the C buffer.
__host__ __device__ constexpr int c_buffer_bytes(int out) { return PERSISTENT && out != F32 ? C_BYTES : 0; }
template <class Op>
__host__ __device__ constexpr int stages(int out) {
    return (MAX_SMEM - ALIGN - BARRIER_BYTES - c_buffer_bytes(out)) / Op::kStageBytes < LLGEN_GEMM_STAGES
               ? (MAX_SMEM - ALIGN - BARRIER_BYTES - c_buffer_bytes(out)) / Op::kStageBytes
               : LLGEN_GEMM_STAGES;
}
// Dynamic shared memory: the stages, the C buffer (persistent, 16-bit C), the barriers, alignment slack.
template <class Op>
__host__ __device__ constexpr int smem_bytes(int out) {
    return stages<Op>(out) * Op::kStageBytes + c_buffer_bytes(out) + BARRIER_BYTES + ALIGN;
}

// Register budgets of warp specialisation (setmaxnreg): the producer (one thread issuing TMA) gives
// registers back, the consumers take them for the 128 accumulator registers and the epilogue's.
constexpr int PRODUCER_REGS = 40, CONSUMER_REGS = 232;
static_assert(PRODUCER_REGS * 128 + CONSUMER_REGS * CONSUMERS * 128 <= 65536, "the register file");

// The tiles of C in grouped order: GROUP_M tile rows per group, each group walked column by column
// (tile id -> (m0, n0)); the last group has the rows that are left.
struct Schedule {
    int tiles_m, tiles_n;
    __host__ __device__ Schedule(int M, int N) : tiles_m((M + BM - 1) / BM), tiles_n((N + BN - 1) / BN) {}
    __host__ __device__ int count() const { return tiles_m * tiles_n; }
    __device__ __forceinline__ void origin(int id, int& m0, int& n0) const {
        const int group = id / (GROUP_M * tiles_n), first = group * GROUP_M;
        const int rows = tiles_m - first < GROUP_M ? tiles_m - first : GROUP_M;
        const int in_group = id % (GROUP_M * tiles_n);
        m0 = (first + in_group % rows) * BM;
        n0 = (in_group / rows) * BN;
    }
};

// The grid: one CTA per tile, or (persistent) one per SM and never more than the tiles.
inline int grid_size(int M, int N, int sms) {
    const int tiles = Schedule(M, N).count();
    return PERSISTENT && sms > 0 && sms < tiles ? sms : tiles;
}

inline __device__ uint16_t round16(float x, bool bf) {
    return bf ? __bfloat16_as_ushort(__float2bfloat16_rn(x)) : __half_as_ushort(__float2half_rn(x));
}

// C = (A B) * scale, scale = *scale_a * *scale_b in f32 (kScaled; else 1), for the operand type Op
// (a struct made by LLGEN_GEMM_HOPPER_OPERANDS) and the output kOut.  A stage holds Op's A tile (BM
// x kK) then its B tile (kK x BN); k-step g of the CTA (counted across its tiles) uses stage g % S,
// whose `full` barrier completes its phase (g / S) & 1 when TMA has landed both tiles and whose
// `empty` barrier completes a phase when both consumer warp groups are done reading it.
template <class Op, int kOut, bool kScaled>
__device__ __forceinline__ void gemm(const CUtensorMap* map_a, const CUtensorMap* map_b, const CUtensorMap* map_c,
                                     void* C, int M, int N, int K, const float* scale_a, const float* scale_b) {
    constexpr int S = stages<Op>(kOut);
    static_assert(S >= 2 && S <= 8, "between 2 and 8 stages fit");
    static_assert(smem_bytes<Op>(kOut) <= MAX_SMEM, "shared memory");
    static_assert(PERSISTENT || kOut == F32 || C_BYTES <= S * Op::kStageBytes, "C is staged in the idle stages");
    // dynamic shared memory is 16-byte aligned by contract: align the stages to the swizzle's 1024
    unsigned char* const base = smem + ((ALIGN - (static_cast<unsigned>(__cvta_generic_to_shared(smem)) % ALIGN)) % ALIGN);
    unsigned char* const c_tile = PERSISTENT ? base + S * Op::kStageBytes : base;
    uint64_t* const full = reinterpret_cast<uint64_t*>(base + S * Op::kStageBytes + c_buffer_bytes(kOut));
    uint64_t* const empty = full + S;
    uint64_t* const epilogue = empty + S;  // two rendezvous of the consumer threads per tile
    const int wg = threadIdx.x / 128;
    if (threadIdx.x == 0) {
        for (int s = 0; s < S; ++s) {
            sync::mbar_init(&full[s], 1);           // the producer's arrive_expect_tx
            sync::mbar_init(&empty[s], CONSUMERS);  // one arrival per consumer warp group
        }
        sync::mbar_init(&epilogue[0], CONSUMERS * 128);
        sync::mbar_init(&epilogue[1], CONSUMERS * 128);
        sync::fence_barrier_init();
    }
    __syncthreads();
    const Schedule tiles(M, N);
    const int ktiles = (K + Op::kK - 1) / Op::kK;

    if (wg == 0) {  // producer: one thread keeps the ring full, tile after tile
        Op::template regs_dec<PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            int g = 0;
            for (int t = blockIdx.x; t < tiles.count(); t += gridDim.x) {
                int m0, n0;
                tiles.origin(t, m0, n0);
                for (int kt = 0; kt < ktiles; ++kt, ++g) {
                    const int s = g % S;
                    if (g >= S) sync::mbar_wait(&empty[s], ((g / S) - 1) & 1);  // its last readers are done
                    sync::mbar_arrive_expect_tx(&full[s], Op::kTxBytes);
                    Op::load(map_a, map_b, m0, n0, kt * Op::kK, base + s * Op::kStageBytes, &full[s]);
                }
            }
        }
        return;
    }

    Op::template regs_inc<CONSUMER_REGS>();
    const unsigned tid = threadIdx.x - 128;  // 0 .. 255: the mma's and the epilogue's thread index
    const float scale = kScaled ? *scale_a * *scale_b : 1.0f;
    int g = 0;
    unsigned phase = 0;  // of the epilogue rendezvous
    for (int t = blockIdx.x; t < tiles.count(); t += gridDim.x, phase ^= 1) {
        int m0, n0;
        tiles.origin(t, m0, n0);
        float acc[Op::kAccRegs];
#pragma unroll
        for (int r = 0; r < Op::kAccRegs; ++r) acc[r] = 0.0f;
        for (int kt = 0; kt < ktiles; ++kt, ++g) {
            const int s = g % S;
            sync::mbar_wait(&full[s], (g / S) & 1);
            Op::fence();
            Op::mma(acc, base + s * Op::kStageBytes, tid);
            Op::commit();
            Op::template wait<IN_FLIGHT>();  // k-step g - IN_FLIGHT's wgmma are done: release its stage
            if (kt >= IN_FLIGHT && tid % 128 == 0) sync::mbar_arrive(&empty[(g - IN_FLIGHT) % S]);
        }
        Op::wait_acc(acc);  // every wgmma of the tile done; acc readable
        // the tile's last IN_FLIGHT stages, released now that their wgmma are done
        if (IN_FLIGHT && tid % 128 == 0) sync::mbar_arrive(&empty[(g - 1) % S]);

        if constexpr (kScaled) {
#pragma unroll
            for (int r = 0; r < Op::kAccRegs; ++r) acc[r] *= scale;
        }
        if constexpr (kOut == F32) {
            const long long strides[2] = {N, 1};
            float* const tile = static_cast<float*>(C) + static_cast<long long>(m0) * N + n0;
            if (m0 + BM <= M && n0 + BN <= N) {
                store_f32::store(acc, tile, strides, base, tid);  // (kSmemBytes 0: no scratch)
            } else {
                const int extent[2] = {M - m0, N - n0};
                store_f32::store_masked(acc, tile, strides, extent, base, tid);
            }
        } else {
            uint16_t out[Op::kAccRegs];
#pragma unroll
            for (int r = 0; r < Op::kAccRegs; ++r) out[r] = round16(acc[r], kOut == BF16);
            // Rendezvous 1: C may be written.  Persistent: the previous tile's TMA store has read the
            // C buffer (thread 0 issued it and waits for its reads before arriving).  One CTA per
            // tile: both consumer groups are past their last wgmma, so the stages are free for C.
            if (PERSISTENT && tid == 0) sync::store_wait<0>();
            sync::mbar_arrive(&epilogue[0]);
            sync::mbar_wait(&epilogue[0], phase);
            stage_c::store(out, c_tile, tid);
            sync::fence_proxy_async();  // the tile's st.shared visible to TMA
            // Rendezvous 2: the whole C tile is in shared memory.
            sync::mbar_arrive(&epilogue[1]);
            sync::mbar_wait(&epilogue[1], phase);
            if (tid == 0) {
                const int cc[2] = {m0, n0};
                if constexpr (kOut == BF16) gemm_wgmma_tma_c_bf16::store(map_c, cc, c_tile);
                else gemm_wgmma_tma_c_f16::store(map_c, cc, c_tile);
                sync::store_commit();  // its reads are waited for before the next tile's C, or below
            }
        }
    }
    if (kOut != F32 && tid == 0) sync::store_wait<0>();  // shared memory must outlive the store's reads
}

// C's tensor map (16-bit C only: the f32 epilogue stores from registers).  C: M x N row-major.
inline CUresult encode_c(CUtensorMap* map, int out, const void* C, int M, int N) {
    if (out == F32) return CUDA_SUCCESS;
    const unsigned long long dc[2] = {static_cast<unsigned long long>(M), static_cast<unsigned long long>(N)};
    const unsigned long long sc[2] = {static_cast<unsigned long long>(N), 1};
    return out == BF16 ? gemm_wgmma_tma_c_bf16::make_tensor_map(map, C, dc, sc)
                       : gemm_wgmma_tma_c_f16::make_tensor_map(map, C, dc, sc);
}

}  // namespace gemm_hopper

// One operand type of the GEMM as the control above calls it: NAME::load() (one stage: TMA_A's A
// tile at (m0, k0), TMA_B's B tile at (k0, n0), both in the tensors' dim order), NAME::mma() (MMA's
// wgmma over one stage), and MMA's fence / commit / wait / register budgets.  The assertions are the
// claims the control relies on: TMA writes the tiles wgmma reads (element by element, through the
// headers' index functions), the accumulator is the registers the epilogue headers read.
#define LLGEN_GEMM_HOPPER_OPERANDS(NAME, TMA_A, TMA_B, MMA)                                                      \
    struct NAME {                                                                                                \
        static constexpr int kK = MMA::kK, kAccRegs = MMA::kAccRegs;                                             \
        static constexpr int kBytesA = MMA::kTileBytesA, kStageBytes = MMA::kTileBytesA + MMA::kTileBytesB;      \
        static constexpr int kTxBytes = TMA_A::kTxBytes + TMA_B::kTxBytes;                                       \
        static_assert(MMA::kM == gemm_hopper::BM && MMA::kN == gemm_hopper::BN &&                                \
                      MMA::kThreads == gemm_hopper::CONSUMERS * 128, #MMA ": the C tile of two consumer groups"); \
        static_assert(TMA_A::kShape[0] == MMA::kM && TMA_A::kShape[1] == kK && TMA_B::kShape[0] == kK &&          \
                      TMA_B::kShape[1] == MMA::kN && TMA_A::kTileBytes == MMA::kTileBytesA &&                    \
                      TMA_B::kTileBytes == MMA::kTileBytesB && kTxBytes == kStageBytes, "tile shapes and bytes");  \
        static_assert(MMA::kTileAlignA <= gemm_hopper::ALIGN && MMA::kTileAlignB <= gemm_hopper::ALIGN &&        \
                      TMA_A::kTileAlign <= gemm_hopper::ALIGN && TMA_B::kTileAlign <= gemm_hopper::ALIGN &&      \
                      kBytesA % gemm_hopper::ALIGN == 0 && kStageBytes % gemm_hopper::ALIGN == 0,                \
                      "every tile starts kTileAlign-aligned");                                                   \
        static_assert(gemm_hopper::same_tile(MMA::kM * kK, TMA_A::tile_index, MMA::a_tile_index) &&              \
                      gemm_hopper::same_tile(kK * MMA::kN, TMA_B::tile_index, MMA::b_tile_index),                \
                      "TMA writes the A and B tiles wgmma reads");                                               \
        static_assert(kAccRegs == gemm_hopper::stage_c::kRegs &&                                                 \
                      gemm_hopper::same_regs(kAccRegs, MMA::acc_index, gemm_hopper::stage_c::src_index),         \
                      "the epilogue stores the registers the mma fills");                                        \
        __device__ static __forceinline__ void load(const CUtensorMap* a, const CUtensorMap* b, int m0, int n0,  \
                                                    int k0, unsigned char* stage, uint64_t* bar) {               \
            const int ca[2] = {m0, k0}, cb[2] = {k0, n0};                                                        \
            TMA_A::load(a, ca, stage, bar);                                                                      \
            TMA_B::load(b, cb, stage + kBytesA, bar);                                                            \
        }                                                                                                        \
        __device__ static __forceinline__ void mma(float (&acc)[kAccRegs], const unsigned char* stage,           \
                                                   unsigned tid) {                                               \
            MMA::mma(acc, stage, stage + kBytesA, 1, tid);                                                       \
        }                                                                                                        \
        __device__ static __forceinline__ void fence() { MMA::fence(); }                                         \
        __device__ static __forceinline__ void commit() { MMA::commit(); }                                       \
        template <int N>                                                                                         \
        __device__ static __forceinline__ void wait() { MMA::wait<N>(); }                               \
        __device__ static __forceinline__ void wait_acc(float (&acc)[kAccRegs]) { MMA::wait_acc(acc); }          \
        template <int R>                                                                                         \
        __device__ static __forceinline__ void regs_dec() { MMA::regs_dec<R>(); }                       \
        template <int R>                                                                                         \
        __device__ static __forceinline__ void regs_inc() { MMA::regs_inc<R>(); }                       \
    };
