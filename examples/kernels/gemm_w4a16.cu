// W4A16 GEMM on Hopper: Y (M x N, bf16) = X (M x K, bf16) W^T with 4-bit weights W (N x K), two formats:
//   int4:  one bf16 scale per 128 consecutive K of a row, W[n, k] = q[n, k] * s[n, k / 128], q in -8 .. 7 (i4);
//   mxfp4: one e8m0 exponent per 32, W[n, k] = v[n, k] * 2^(e[n, k / 32] - 127), v an e2m1 value (OCP MX);
// f32 accumulation, Y rounded to nearest even.  The upcast rounds q s to bf16 for wgmma, except at the
// decode tile, where int4's scales multiply each group's f32 sums instead (W = q s exactly).
//
// The weights are wgmma's A operand (Y^T = W X^T: A may come from registers, B may not), upcast in
// registers; the activations are its B operand, X^T read K-major from shared memory.  Everything that
// depends on a layout is a generated header (generated/manifest.yaml, examples/w4a16/):
//
//   w4a16_tma_w        two consecutive 64 x 64 tiles of the pre-shuffled weights (2 x 2 KiB, one TMA box)
//   w4a16_tma_s        the 64 scales of two groups for one 64-row block (2 x 128 B, one TMA box; mxfp4:
//                      w4a16_tma_s_e8m0, four groups of 64 exponents)
//   w4a16_tma_x_n<BN>  X^T's K 64 x BN token tile (the 128-byte swizzle wgmma reads K-major)
//   w4a16_upcast       the weight tile's 16 bytes a thread (one ld.shared.v4) -> i4 -> bf16 times the
//                      group's scale, exactly the registers of wgmma's A fragment (K 64); mxfp4:
//                      w4a16_upcast_mxfp4 (the same tile layout: the e2m1 sequence reads the same nibbles);
//                      w4a16_upcast_q (decode): q exactly, unscaled
//   w4a16_mma_n<BN>    acc (64 x BN) += A (registers) * X^T tile: 4 x wgmma m64nBNk16
//   w4a16_store_*      the accumulator (as bf16) -> Y, through shared memory (16-byte stores along N)
//
// The weights are reordered once, offline, into the layout llgen chain chose for the upcast's input
// (examples/w4a16/w4a16_preshuffle.yaml; its generated numpy module / CUDA kernel do it): W in 64 x 64
// tiles, tile (n / 64, k / 64) at byte ((n / 64) (K / 64) + k / 64) 2048 of the packed buffer, each tile
// one dense run in which thread t of a warp group finds its 32 nibbles at bytes 16 t .. 16 t + 15
// (llgen_w4a16_pack below runs the chain's generated CUDA reorder on the device).  The scales are stored
// as S^T (K / GROUP x N, row-major), so a few groups' scales for 64 rows are one TMA box.
//
// Three tile shapes (host: llgen_w4a16_prepare chooses by M):
//   Decode (M <= 16): 256 weight rows x 16 tokens, K in chunks of 256, four consumer warp groups each
//     owning 64 rows (-D LLGEN_W4A16_DECODE_ROWS=128: two, 128 rows; =64: 64 rows, as mid).
//   Mid (M <= 64): 64 weight rows x 64 tokens, K in chunks of 256; the two consumer warp groups take
//     alternate chunks (both upcast in parallel: at small M the upcast, not the tensor core, is the work)
//     and add their accumulators in a fixed order at the end.
//   Large M: 128 weight rows x 256 tokens, K in chunks of 128; each consumer warp group owns 64 rows.
//   K is split over CTAs when the tiles alone do not fill the GPU (deterministic: f32 partials summed in
//   range order by the CTA that completes the tile).
//
// Control (written here, layout-free): warp group 0 produces (one thread, or LLGEN_W4A16_PRODUCER_LANES,
// issues every TMA of a stage into the ring of `full` / `empty` mbarriers), the others consume.
// A consumer pipelines the 64-K slices of its chunks over BUFFERS A fragments (decode 2, mid 2, large 1:
// its 128 accumulator registers leave room for one), slice j adding into accumulator j % CHAINS (mid 2;
// the chains are added in a fixed order at the end), or at the decode tile, group h of a chunk's two
// groups of 128 K into accumulator h, scaled into the sum once its wgmma are done.  Slice j's upcast
// writes buffer j % BUFFERS while the wgmma of the slices before it run; before it writes,
// wait<BUFFERS - 1> leaves only the newest BUFFERS - 1 in flight, so the buffer's previous reader is done.  A chunk's wgmma drain
// under the upcast of the next chunk's first slice; then wait<0> and the chunk's stage goes back, every
// thread arriving (its ld.shared of the stage's weights and scales long done).  The loop over chunks
// starts at that first slice's wgmma, so its back edge follows the wait<0>: with wgmma in flight across
// a back edge, ptxas serialises every wgmma of the mxfp4 kernels (C7513; the tests fail on it).
// Launched overlapped (llgen_w4a16_overlap: programmatic dependent launch), a kernel may start while the
// one before it runs: its first round of stages streams the weights and scales, then grid_wait() before X;
// the consumers grid_wait() before they write the split-K workspace or Y.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdint>

#include "w4a16_tma_w.cuh"
#include "w4a16_tma_w_rm.cuh"
#include "w4a16_tma_s.cuh"
#include "w4a16_tma_s_e8m0.cuh"
#include "w4a16_tma_x_n16.cuh"
#include "w4a16_tma_x_n64.cuh"
#include "w4a16_tma_x_n256.cuh"
#include "w4a16_upcast.cuh"
#include "w4a16_upcast_q.cuh"
#include "w4a16_upcast_rm.cuh"
#include "w4a16_upcast_mxfp4.cuh"
#include "w4a16_upcast_mxfp4_rm.cuh"
#include "w4a16_mma_n16.cuh"
#include "w4a16_mma_n64.cuh"
#include "w4a16_mma_n256.cuh"
#include "w4a16_store_n16.cuh"
#include "w4a16_store_128x16.cuh"
#include "w4a16_store_256x16.cuh"
#include "w4a16_store_n64.cuh"
#include "w4a16_store_n256.cuh"
#include "w4a16_preshuffle_W_reorder.cuh"

extern __shared__ __align__(1024) unsigned char smem[];  // dynamic: Config::SMEM

// -D LLGEN_W4A16_SKIP_AGREEMENT_CHECKS=1 passes the element-by-element static_asserts that the headers agree
// without evaluating them: for a build whose nvcc build of the same file checks them (the host SIMT drivers).
#ifndef LLGEN_W4A16_SKIP_AGREEMENT_CHECKS
#define LLGEN_W4A16_SKIP_AGREEMENT_CHECKS 0
#endif
// The control's knobs (bench/bench_mixed.py --ladder builds variants with -D): the stages at most, and the
// decode tile's A fragments in flight and independent accumulators (the wgmma of one slice are a chain
// dependent through their accumulator; on the H200 8 or 16 stages, 1 or 4 chains measured the same).
// -D LLGEN_W4A16_ROW_MAJOR=1: the weights row-major (N x K, two nibbles a byte) instead of pre-shuffled --
// the identity choice the chain's layout is timed against (bench/bench_mixed.py --ladder).
#ifndef LLGEN_W4A16_ROW_MAJOR
#define LLGEN_W4A16_ROW_MAJOR 0
#endif
// -D LLGEN_W4A16_DIAGNOSE=N (bench/bench_mixed.py --ladder; results WRONG by design, for timing only): which
// part bounds the consumers -- 1 no upcast (wgmma on zero registers), 2 no wgmma (the upcasts kept live),
// 3 the stream alone (consumers give each stage back unread), 4 the stream without X's boxes, 5 the stream
// without the weights' boxes.
#ifndef LLGEN_W4A16_DIAGNOSE
#define LLGEN_W4A16_DIAGNOSE 0
#endif
#define LLGEN_W4A16_STREAMS_X (LLGEN_W4A16_DIAGNOSE != 4)
#define LLGEN_W4A16_STREAMS_W (LLGEN_W4A16_DIAGNOSE != 5)
// The threads that issue a stage's TMA boxes (1 .. 32, of the producer's first warp).
#ifndef LLGEN_W4A16_PRODUCER_LANES
#define LLGEN_W4A16_PRODUCER_LANES 1
#endif
#ifndef LLGEN_W4A16_STAGES
#define LLGEN_W4A16_STAGES 16
#endif
// -D LLGEN_W4A16_DRAIN_CHUNKS=1: each chunk's wgmma drained before the next chunk's first upcast (the
// stage goes back at the chunk's end) instead of under it.  -D LLGEN_W4A16_PREFETCH=1: a chunk's weight
// bytes and scales, every slice's, read from shared memory as soon as its stage lands, instead of each
// slice's before its upcast (the wgmma between slices order the reads: asm with a memory clobber).
#ifndef LLGEN_W4A16_PREFETCH
#define LLGEN_W4A16_PREFETCH 0
#endif
#ifndef LLGEN_W4A16_DRAIN_CHUNKS
#define LLGEN_W4A16_DRAIN_CHUNKS 0
#endif
// Weight rows of a decode tile: 256 (four consumer warp groups, 64 rows each, every chunk), 128 (two) or 64
// (the two consumers on alternate chunks).  Every tile reads the chunk's X (16 tokens) through L2: at 64 rows
// as many bytes as its 4-bit weights, at 256 a quarter; and at small M the upcast, not the stream, is the
// work, so four consumer warp groups keep twice as many warps issuing it as two (H200, M = 1 at 8192^2:
// two consumer warp groups issued in 44% of the cycles, with 2.2 warps a scheduler).
#ifndef LLGEN_W4A16_DECODE_ROWS
#define LLGEN_W4A16_DECODE_ROWS 256
#endif
// The decode tile's A fragments in flight and accumulators: at 256 rows each consumer thread has 112
// registers (five warp groups), room for two of each.
#ifndef LLGEN_W4A16_DECODE_BUFFERS
#define LLGEN_W4A16_DECODE_BUFFERS (LLGEN_W4A16_DECODE_ROWS == 256 ? 2 : 4)
#endif
#ifndef LLGEN_W4A16_DECODE_CHAINS
#define LLGEN_W4A16_DECODE_CHAINS (LLGEN_W4A16_DECODE_ROWS == 256 ? 2 : 4)
#endif
// -D LLGEN_W4A16_ACC_SCALES=0: the decode tile's int4 scales applied in the upcast (RNE_bf16(q s) into
// wgmma) instead of to each group's f32 sums (W = q s exactly; one fma a sum register and group instead of
// a bf16 multiply an element pair).  The default where the decode tile has the two A buffers and two
// accumulators it needs; the row-major build has no unscaled upcast header: scales in the upcast.
#ifndef LLGEN_W4A16_ACC_SCALES
#define LLGEN_W4A16_ACC_SCALES \
    (!LLGEN_W4A16_ROW_MAJOR && LLGEN_W4A16_DECODE_BUFFERS == 2 && LLGEN_W4A16_DECODE_CHAINS == 2)
#endif

namespace gemm_w4a16 {

namespace sync = w4a16_tma_w;  // mbarriers and proxy fences: the same in every TMA header
#if LLGEN_W4A16_ROW_MAJOR
namespace tw = w4a16_tma_w_rm;  // the weights row-major (the chain's reference layout)
namespace up_i4 = w4a16_upcast_rm;
namespace up_mxfp4 = w4a16_upcast_mxfp4_rm;
#else
namespace tw = w4a16_tma_w;     // the weights pre-shuffled by the chain's layout
namespace up_i4 = w4a16_upcast;
namespace up_mxfp4 = w4a16_upcast_mxfp4;
#endif

constexpr int MAX_SMEM = 227 * 1024;       // sm_90's dynamic shared memory per block
constexpr int ALIGN = 1024;                // the 128-byte swizzle's tile alignment
constexpr int MAX_STAGES = LLGEN_W4A16_STAGES;  // stages in flight, at most (fewer where they do not fit)
static_assert(MAX_STAGES >= 2 && MAX_STAGES <= 16, "between 2 and 16 stages");
constexpr int LANES = LLGEN_W4A16_PRODUCER_LANES;  // producer threads issuing TMA
static_assert(LANES >= 1 && LANES <= 32, "1 to 32 producer lanes");
constexpr int PRODUCER_REGS = 24;            // setmaxnreg's least: the producer computes box coordinates only

constexpr int TILE = 2048;                                    // one 64 x 64 weight tile of 4-bit elements
constexpr int W_BOX = tw::kTileBytes / TILE;                  // consecutive K tiles one weight TMA box lands
static_assert(tw::kTileBytes % TILE == 0, "TMA lands whole 2 KiB weight tiles");

template <class F, class G>
constexpr bool same_regs(int regs, int warps, F f, G g) {
    if (LLGEN_W4A16_SKIP_AGREEMENT_CHECKS) return true;
    for (int w = 0; w < warps; ++w)
        for (int l = 0; l < 32; ++l)
            for (int r = 0; r < regs; ++r)
                if (f(r, l, w) != g(r, l, w)) return false;
    return true;
}

// A weight format: its upcast (the 64 x 64 tile in shared memory -> wgmma's A fragment as bf16, times the
// group's scale) and its scales (S^T: K / GROUP x N, SCALE elements; one TMA box S_BOX groups x 64 rows).
// A thread's scale register r reads the scale of row scale_index / TG, group scale_index % TG of the tile
// (the scale tensor of a tile is 64 x TG, TG groups along its K).
#define LLGEN_W4A16_FORMAT(NAME, UP, TMA_S, GROUP_, SCALE)                                                       \
    struct NAME {                                                                                                \
        using Scale = SCALE;                                                                                     \
        static constexpr int GROUP = GROUP_;                       /* K of one scale */                         \
        static constexpr bool ACC_SCALED = false;                  /* the scales applied in the upcast */     \
        static constexpr int TG = 64 / GROUP_ > 1 ? 64 / GROUP_ : 1;  /* scale groups along a tile's K */       \
        static constexpr int kScaleRegs = UP::kScaleRegs, kDstWords = UP::kDstWords, kDstRegs = UP::kDstRegs;   \
        static constexpr int S_BOX = TMA_S::kShape[0], S_BYTES = TMA_S::kTileBytes, S_TX = TMA_S::kTxBytes;    \
        static_assert(UP::kShape[0] == 64 && UP::kShape[1] == 64 && UP::kThreads == 128 && UP::kTileBytes == TILE, \
                      "the upcast takes the 64 x 64 tile TMA lands");                                            \
        static_assert(TMA_S::kShape[1] == 64 && TMA_S::kElemBytes == sizeof(SCALE) && kScaleRegs == 2 * TG,    \
                      "a box: whole groups of 64 rows' scales; a thread's scales: rows r, r + 8 of each group"); \
        __host__ __device__ static constexpr int dst_index(int r, int l, int w) { return UP::dst_index(r, l, w); } \
        __host__ __device__ static constexpr int scale_index(int r, int l, int w) {                              \
            return UP::scale_index(r, l, w);                                                                     \
        }                                                                                                        \
        static constexpr int kMidRegs = UP::kMidRegs;              /* a thread's bytes of the tile */          \
        __device__ static void load(const void* tile, uint8_t (&mid)[kMidRegs], unsigned tid) {                  \
            UP::move::load<uint8_t>(tile, mid, tid);                                                             \
        }                                                                                                        \
        __device__ static void upcast(const uint8_t (&mid)[kMidRegs], const Scale (&s)[kScaleRegs],              \
                                      uint32_t (&dst)[kDstWords]) {                                              \
            UP::upcast(mid, s, dst);                                                                             \
        }                                                                                                        \
        __device__ static void load_s(const CUtensorMap* map, int g, int n, void* dst, uint64_t* bar) {         \
            const int c[2] = {g, n};                                                                             \
            TMA_S::load(map, c, dst, bar);                                                                       \
        }                                                                                                        \
        static CUresult encode_s(CUtensorMap* map, const void* S, int N, int K) {                                \
            using u64 = unsigned long long;                                                                      \
            const u64 d[2] = {static_cast<u64>(K / GROUP), static_cast<u64>(N)}, st[2] = {static_cast<u64>(N), 1}; \
            return TMA_S::make_tensor_map(map, S, d, st);                                                        \
        }                                                                                                        \
    };

// int4 (i4) with a bf16 scale per 128 along K; mxfp4 (e2m1) with an e8m0 exponent per 32.
LLGEN_W4A16_FORMAT(I4, up_i4, w4a16_tma_s, 128, uint16_t)
LLGEN_W4A16_FORMAT(MXFP4, up_mxfp4, w4a16_tma_s_e8m0, 32, uint8_t)

// int4 whose scales multiply each group's f32 sums (the control's fold) instead of the upcast's elements:
// the upcast gives q exactly (w4a16_upcast_q, the same tile and fragment layouts as w4a16_upcast).
struct I4Q : I4 {
    static constexpr bool ACC_SCALED = true;
    static_assert(w4a16_upcast_q::kDstWords == kDstWords && w4a16_upcast_q::kMidRegs == kMidRegs &&
                      same_regs(kDstRegs, 4, w4a16_upcast_q::dst_index, up_i4::dst_index),
                  "the unscaled upcast fills the fragment as the scaled one");
    __device__ static void upcast(const uint8_t (&mid)[kMidRegs], const Scale (&)[kScaleRegs],
                                  uint32_t (&dst)[kDstWords]) {
        w4a16_upcast_q::upcast(mid, dst);
    }
};
#if LLGEN_W4A16_ACC_SCALES
using I4Decode = I4Q;
#else
using I4Decode = I4;
#endif

// One tile shape (for a weight format F): its headers, the stage's byte plan and the register agreements.
#define LLGEN_W4A16_CONFIG(NAME, BN_, RB_, KC_, KSPLIT_, BUFFERS_, CHAINS_, TMA_X, MMA, STORE)                 \
    template <class F_>                                                                                          \
    struct NAME {                                                                                                \
        using F = F_;                                                                                            \
        static constexpr int BN = BN_, RB = RB_, KC = KC_;                                                       \
        static constexpr bool KSPLIT = KSPLIT_;                                                                  \
        static constexpr int BUFFERS = BUFFERS_;         /* A fragments in flight */                            \
        static constexpr int CHAINS = CHAINS_;           /* accumulators: slice j adds into j % CHAINS */        \
        static constexpr int BM = 64 * RB;               /* weight rows of a tile */                            \
        /* consumer warp groups: one a row block, or (KSPLIT) two on alternate chunks; warp group 0 produces */ \
        static constexpr int CONSUMERS = KSPLIT ? 2 : RB, THREADS = 128 * (1 + CONSUMERS);                     \
        /* setmaxnreg: the registers the launch gives every thread (a multiple of 8), the producer's given */  \
        /* to the consumers */                                                                                  \
        static constexpr int LAUNCH_REGS = 65536 / THREADS / 8 * 8;                                             \
        static constexpr int CONSUMER_REGS_ = (LAUNCH_REGS * THREADS - PRODUCER_REGS * 128) / (CONSUMERS * 128) / 8 * 8; \
        static constexpr int CONSUMER_REGS = CONSUMER_REGS_ < 256 ? CONSUMER_REGS_ : 256;                       \
        static constexpr int SLICES = KC / 64;           /* 64-K slices of a chunk */                           \
        static constexpr int GROUPS = KC / F::GROUP;     /* scale groups of a chunk */                          \
        static constexpr int S_BOXES = (GROUPS + F::S_BOX - 1) / F::S_BOX;  /* scale boxes of a chunk a row block */ \
        static constexpr int X_BYTES = SLICES * TMA_X::kTileBytes;                                               \
        static constexpr int W_OFF = X_BYTES, S_OFF = W_OFF + RB * SLICES * TILE;                                \
        static constexpr int STAGE = (S_OFF + RB * S_BOXES * F::S_BYTES + ALIGN - 1) / ALIGN * ALIGN;             \
        static constexpr int TX = SLICES * TMA_X::kTxBytes * LLGEN_W4A16_STREAMS_X +                             \
                                  RB * SLICES / W_BOX * tw::kTxBytes * LLGEN_W4A16_STREAMS_W +                   \
                                  RB * S_BOXES * F::S_TX;                                                        \
        static_assert(SLICES % W_BOX == 0, "whole weight boxes a chunk");                                        \
        /* the bytes of the boxes producer lane l issues (box i, in the order X, weights, scales, by lane */    \
        /* i % LANES); they add up to TX */                                                                     \
        __host__ __device__ static constexpr int lane_tx(int l) {                                                \
            int bytes = 0, box = 0;                                                                              \
            for (int j = 0; j < SLICES; ++j, ++box)                                                              \
                bytes += box % LANES == l && LLGEN_W4A16_STREAMS_X ? TMA_X::kTxBytes : 0;                        \
            for (int j = 0; j < RB * SLICES / W_BOX; ++j, ++box)                                                 \
                bytes += box % LANES == l && LLGEN_W4A16_STREAMS_W ? tw::kTxBytes : 0;                           \
            for (int j = 0; j < RB * S_BOXES; ++j, ++box) bytes += box % LANES == l ? F::S_TX : 0;              \
            return bytes;                                                                                        \
        }                                                                                                        \
        __host__ __device__ static constexpr int lanes_tx(int l) {                                               \
            return l == LANES ? 0 : lane_tx(l) + lanes_tx(l + 1);                                                \
        }                                                                                                        \
        static constexpr int EPI_THREADS = STORE::kThreads;  /* the threads holding the tile's accumulator */   \
        static constexpr int ACC = MMA::kAccRegs;                                                                \
        /* the tile row (weight row of the warp group's 64) accumulator register r holds */                    \
        __device__ static constexpr int acc_row(int r, int l, int w) { return MMA::acc_index(r, l, w) / BN; }    \
        /* after the stages: the second warp group's accumulator (KSPLIT); the store's scratch is the stages' */ \
        static constexpr int HANDOFF = KSPLIT ? ACC * 128 * 4 : 0;                                               \
        static constexpr int BARRIERS = 8 * (2 * MAX_STAGES + 2) + 8;                                           \
        /* KSPLIT: an even number, so that every fill of a stage goes to the same warp group (chunk g to */   \
        /* g % 2) and each waits for the stage's phases one after another (a parity wait cannot tell a   */   \
        /* phase from the one two later) */                                                                     \
        static constexpr int FIT = (MAX_SMEM - ALIGN - HANDOFF - BARRIERS) / STAGE < MAX_STAGES                  \
                                       ? (MAX_SMEM - ALIGN - HANDOFF - BARRIERS) / STAGE : MAX_STAGES;             \
        static constexpr int STAGES = KSPLIT ? FIT / 2 * 2 : FIT;                                                \
        static constexpr int SMEM = ALIGN + STAGES * STAGE + HANDOFF + BARRIERS;                                 \
        static_assert(STAGES >= 2 && STORE::kSmemBytes <= STAGES * STAGE, "two stages fit; the store's scratch too"); \
        static_assert(KC % F::GROUP == 0 && SLICES % BUFFERS == 0 && SLICES % CHAINS == 0,       \
                      "whole groups; whole rounds of the A buffers and accumulators a chunk");    \
        static_assert(TMA_X::kShape[0] == 64 && TMA_X::kShape[1] == BN && MMA::kN == BN && MMA::kK == 64 &&     \
                      MMA::kTileBytesB == TMA_X::kTileBytes && TMA_X::kTileAlign <= ALIGN &&                     \
                      TMA_X::kTileBytes % ALIGN == 0, "X^T's tile: what TMA lands, wgmma reads");               \
        static_assert(MMA::kAWords == F::kDstWords &&                                                            \
                      same_regs(F::kDstRegs, 4, F::dst_index, MMA::a_index), "the upcast fills wgmma's A");       \
        static_assert(STORE::kShape[0] == BM && STORE::kShape[1] == BN && STORE::kRegs == ACC && ACC % 4 == 0 && \
                      same_regs(ACC, EPI_THREADS / 32, STORE::src_index,                                        \
                                [](int r, int l, int w) { return MMA::acc_index(r, l, w % 4) + (w / 4) * 64 * BN; }), \
                      "the store reads every consumer's accumulator");                                           \
        struct Mma {  /* the wgmma header's calls the control makes */                                          \
            __device__ static void fence() { MMA::fence(); }                                                     \
            __device__ static void commit() { MMA::commit(); }                                                   \
            template <int N> __device__ static void wait() { MMA::wait<N>(); }                                   \
            template <int N> __device__ static void wait_acc(float (&acc)[ACC]) { MMA::template wait_acc<N>(acc); } \
            __device__ static void mma(float (&acc)[ACC], const uint32_t (&a)[F::kDstWords], const void* b,      \
                                       int accumulate) {                                                         \
                MMA::mma(acc, a, b, accumulate);                                                                 \
            }                                                                                                    \
            template <int R> __device__ static void regs_dec() { MMA::regs_dec<R>(); }                           \
            template <int R> __device__ static void regs_inc() { MMA::regs_inc<R>(); }                           \
        };                                                                                                       \
        __device__ static void load_x(const CUtensorMap* map, int k, int m0, void* dst, uint64_t* bar) {        \
            const int c[2] = {k, m0};                                                                            \
            TMA_X::load(map, c, dst, bar);                                                                       \
        }                                                                                                        \
        __device__ static void store(const uint16_t (&v)[ACC], uint16_t* y, long long N, int rows, int tokens,  \
                                     void* scratch, unsigned tid) {                                              \
            const long long strides[2] = {1, N};                                                                 \
            if (rows >= BM && tokens >= BN) {                                                                    \
                STORE::store(v, y, strides, scratch, tid);                                                       \
            } else {                                                                                             \
                const int extent[2] = {rows, tokens};                                                            \
                STORE::store_masked(v, y, strides, extent, scratch, tid);                                        \
            }                                                                                                    \
        }                                                                                                        \
    };

#if LLGEN_W4A16_DECODE_ROWS == 256
LLGEN_W4A16_CONFIG(Decode, 16, 4, 256, false, LLGEN_W4A16_DECODE_BUFFERS, LLGEN_W4A16_DECODE_CHAINS, w4a16_tma_x_n16,
                   w4a16_mma_n16, w4a16_store_256x16)
#elif LLGEN_W4A16_DECODE_ROWS == 128
LLGEN_W4A16_CONFIG(Decode, 16, 2, 256, false, LLGEN_W4A16_DECODE_BUFFERS, LLGEN_W4A16_DECODE_CHAINS, w4a16_tma_x_n16,
                   w4a16_mma_n16, w4a16_store_128x16)
#else
LLGEN_W4A16_CONFIG(Decode, 16, 1, 256, true, LLGEN_W4A16_DECODE_BUFFERS, LLGEN_W4A16_DECODE_CHAINS, w4a16_tma_x_n16,
                   w4a16_mma_n16, w4a16_store_n16)
#endif
LLGEN_W4A16_CONFIG(Mid, 64, 1, 256, true, 2, 2, w4a16_tma_x_n64, w4a16_mma_n64, w4a16_store_n64)
LLGEN_W4A16_CONFIG(Large, 256, 2, 128, false, 1, 1, w4a16_tma_x_n256, w4a16_mma_n256, w4a16_store_n256)

// The launch's work: `splits` ranges of K per tile, their f32 partial slots and per-tile counters
// (zero between launches); splits == 1: none.
struct Work {
    int splits;
    float* partial;
    int* count;
    int overlap;  // launched overlapping the kernel before it (llgen_w4a16_overlap)
};

// The coordinates of the weight box holding 64 x 64 tile (row block rb, K tile kt): pre-shuffled, the
// tiles one after another (row block by row block, K tiles consecutive) as rows of 128 bytes; row-major,
// (row, byte) of W viewed as N x K / 2 bytes.
__device__ __forceinline__ void weight_box(int rb, int kt, int K, int (&w)[2]) {
    if (LLGEN_W4A16_ROW_MAJOR)
        w[0] = rb * 64, w[1] = kt * 32;
    else
        w[0] = (rb * (K / 64) + kt) * (TILE / 128), w[1] = 0;
}

__device__ __forceinline__ uint16_t bf16_bits(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }

// Y = X W^T for one tile and K range per CTA: blockIdx.x = (tile t, range r) as t * splits + r, tiles with the
// token block fastest (the CTAs in flight together share their weight rows in L2).
template <class C>
__device__ __forceinline__ void gemm(const CUtensorMap* map_w, const CUtensorMap* map_s, const CUtensorMap* map_x,
                                     uint16_t* Y, int M, int N, int K, const Work& work) {
    using Mma = typename C::Mma;
    using F = typename C::F;
    constexpr int S = C::STAGES;
    static_assert(C::lanes_tx(0) == C::TX, "the producer lanes arm the full barrier with the stage's bytes");
    unsigned char* const base = smem + ((ALIGN - (static_cast<unsigned>(__cvta_generic_to_shared(smem)) % ALIGN)) % ALIGN);
    float* const handoff = reinterpret_cast<float*>(base + S * C::STAGE);
    // the store's scratch: the stages, free once every chunk is consumed (its first barrier waits for
    // every holder, each past its last wgmma; every TMA of the CTA has landed by then)
    unsigned char* const scratch = base;
    uint64_t* const full = reinterpret_cast<uint64_t*>(base + S * C::STAGE + C::HANDOFF);
    uint64_t* const empty = full + MAX_STAGES;
    uint64_t* const handed = empty + MAX_STAGES;  // the second warp group's accumulator is in `handoff` (KSPLIT)
    uint64_t* const meet = handed + 1;    // the accumulator holders' rendezvous (split K)
    volatile int* const last_flag = reinterpret_cast<volatile int*>(meet + 1);

    const int tiles_m = (M + C::BN - 1) / C::BN;
    const int tile = blockIdx.x / work.splits, range = blockIdx.x % work.splits;
    const int n0 = (tile / tiles_m) * C::BM, m0 = (tile % tiles_m) * C::BN;
    const int chunks = K / C::KC;
    const int cb = static_cast<int>(static_cast<long long>(range) * chunks / work.splits);
    const int ce = static_cast<int>(static_cast<long long>(range + 1) * chunks / work.splits);
    const int wg = threadIdx.x / 128;
    if (threadIdx.x == 0) {
        for (int s = 0; s < S; ++s) {
            sync::mbar_init(&full[s], LANES);                  // each producer lane's arrive_expect_tx
            sync::mbar_init(&empty[s], (C::KSPLIT ? 1 : C::RB) * 128);  // every thread that reads the stage
        }
        sync::mbar_init(handed, 128);
        sync::mbar_init(meet, C::EPI_THREADS);
        sync::fence_barrier_init();
    }
    __syncthreads();
    sync::grid_launch_dependents();  // an overlapped launch after this one may start (it waits for us itself)

    if (wg == 0) {  // producer: one thread keeps the ring full
        Mma::template regs_dec<PRODUCER_REGS>();
        // PRODUCER_LANES threads of warp 0 issue a stage's boxes: box i (in the order X, weights, scales) by
        // lane i % PRODUCER_LANES, each lane arming the stage's `full` barrier with its own boxes' bytes
        // (one arrival a lane a phase), so no lane waits for another
        const int lane = threadIdx.x;
        if (lane < LANES) {
            // X's boxes of chunk c (boxes 0 .. SLICES - 1), then its weights' and scales'
            auto load_xs = [&](int c, unsigned char* st, uint64_t* bar) {
                for (int j = 0; j < C::SLICES; ++j)
                    if (j % LANES == lane && LLGEN_W4A16_STREAMS_X)
                        C::load_x(map_x, c * C::KC + j * 64, m0, st + j * (C::X_BYTES / C::SLICES), bar);
            };
            auto load_ws = [&](int c, unsigned char* st, uint64_t* bar) {
                int box = C::SLICES;
                for (int b = 0; b < C::RB; ++b)
                    for (int j = 0; j < C::SLICES; j += W_BOX, ++box)
                        if (box % LANES == lane && LLGEN_W4A16_STREAMS_W) {
                            int w[2];
                            weight_box(n0 / 64 + b, c * C::SLICES + j, K, w);
                            tw::load(map_w, w, st + C::W_OFF + (b * C::SLICES + j) * TILE, bar);
                        }
                for (int b = 0; b < C::RB; ++b)   // groups past K / GROUP (a box's tail) read as zero, unused
                    for (int q = 0; q < C::S_BOXES; ++q, ++box)
                        if (box % LANES == lane)
                            F::load_s(map_s, c * C::GROUPS + q * F::S_BOX, n0 + 64 * b,
                                      st + C::S_OFF + (b * C::S_BOXES + q) * F::S_BYTES, bar);
            };
            // An overlapped launch (llgen_w4a16_overlap) may start while the kernel before it, X's writer,
            // runs: its first round of stages streams the weights and scales before grid_wait(), X after it.
            // Otherwise each stage's X first (the weights of a whole round first delay the first stage).
            const int round = !work.overlap ? 0 : ce - cb < S ? ce - cb : S;
            for (int g = 0; g < round; ++g) {
                sync::mbar_arrive_expect_tx(&full[g], C::lane_tx(lane));
                load_ws(cb + g, base + g * C::STAGE, &full[g]);
            }
            sync::grid_wait();
            for (int g = 0; g < round; ++g) load_xs(cb + g, base + g * C::STAGE, &full[g]);
            for (int c = cb + round; c < ce; ++c) {
                const int g = c - cb, s = g % S;
                if (g >= S) sync::mbar_wait(&empty[s], ((g / S) - 1) & 1);  // its readers are done
                unsigned char* const st = base + s * C::STAGE;
                sync::mbar_arrive_expect_tx(&full[s], C::lane_tx(lane));
                load_xs(c, st, &full[s]);
                load_ws(c, st, &full[s]);
            }
        }
        return;
    }

    Mma::template regs_inc<C::CONSUMER_REGS>();
    const unsigned tid = threadIdx.x % 128, lane = tid % 32, warp = tid / 32;
    const int me = wg - 1;                       // consumer warp group 0 .. CONSUMERS - 1
    const int rb = C::KSPLIT ? 0 : me;           // its 64-row block of the tile
    const int first = C::KSPLIT ? me : 0, step = C::KSPLIT ? 2 : 1;
    int sat[F::kScaleRegs];                      // each scale register's scale: group * 64 + row in the boxes
#pragma unroll
    for (int r = 0; r < F::kScaleRegs; ++r) {
        const int i = F::scale_index(r, lane, warp);
        sat[r] = (i % F::TG) * 64 + i / F::TG;
    }

    float chain[C::CHAINS][C::ACC];
#pragma unroll
    for (int c = 0; c < C::CHAINS; ++c)
#pragma unroll
        for (int r = 0; r < C::ACC; ++r) chain[c][r] = 0.0f;
    // F::ACC_SCALED: group h of a chunk (slices 2h, 2h + 1: 128 K) sums into chain h, its first wgmma
    // overwriting; once they are done (slice 3's wait leaves slice 2 in flight; the chunk's wait<0>),
    // `fold` adds chain h times the group's scale of each register's row into `total`, in group order
    // the scales of the chunk's group g in stage st: the row block's boxes hold its groups one after
    // another, 64 scales each (a row's at its index)
    auto group_scales = [&](const unsigned char* st, int g) {
        return reinterpret_cast<const typename F::Scale*>(st + C::S_OFF + rb * C::S_BOXES * F::S_BYTES) + g * 64;
    };
    constexpr bool GS = F::ACC_SCALED;
    static_assert(!GS || (F::GROUP == 128 && C::SLICES == 4 && C::BUFFERS == 2 && C::CHAINS == 2),
                  "scaled sums: two groups of two slices a chunk, two A buffers, an accumulator a group");
    float total[C::ACC];
    int srow[C::ACC];
#pragma unroll
    for (int r = 0; r < C::ACC; ++r) total[r] = 0.0f, srow[r] = C::acc_row(r, lane, warp);
    auto fold = [&](const unsigned char* st, int h) {
        if constexpr (GS) {
            const uint16_t* const sc = group_scales(st, h);
#pragma unroll
            for (int r = 0; r < C::ACC; ++r)   // a bf16 scale's bits are the top half of the f32's
                total[r] = fmaf(chain[h][r], __uint_as_float(static_cast<uint32_t>(sc[srow[r]]) << 16), total[r]);
        }
    };
    uint32_t a[C::BUFFERS][F::kDstWords];
    uint32_t sink = 0;                           // LLGEN_W4A16_DIAGNOSE 2: the upcasts' words, kept live
    if (LLGEN_W4A16_DIAGNOSE == 1)               // no upcast: wgmma reads these registers as they are
        for (int b = 0; b < C::BUFFERS; ++b)
            for (int w = 0; w < F::kDstWords; ++w) a[b][w] = 0;
    // slice j of the chunk in stage st: its weight bytes and scales read (fetch), upcast into A buffer
    // j % BUFFERS, then its wgmma
    constexpr int FETCHED = LLGEN_W4A16_PREFETCH ? C::SLICES : 1;  // slices read ahead of their upcast
    uint8_t mid[FETCHED][F::kMidRegs];
    typename F::Scale scales[FETCHED][F::kScaleRegs];
    auto fetch = [&](const unsigned char* st, int j) {
        const typename F::Scale* const sc = group_scales(st, j * 64 / F::GROUP);  // slice j's first group
        if constexpr (!GS)
#pragma unroll
            for (int r = 0; r < F::kScaleRegs; ++r) scales[j % FETCHED][r] = sc[sat[r]];
        F::load(st + C::W_OFF + (rb * C::SLICES + j) * TILE, mid[j % FETCHED], tid);
    };
    auto upcast = [&](const unsigned char* st, int j) {
        if (!LLGEN_W4A16_PREFETCH) fetch(st, j);
        if (LLGEN_W4A16_DIAGNOSE != 1) F::upcast(mid[j % FETCHED], scales[j % FETCHED], a[j % C::BUFFERS]);
        if (LLGEN_W4A16_DIAGNOSE == 2)
#pragma unroll
            for (int w = 0; w < F::kDstWords; ++w) sink ^= a[j % C::BUFFERS][w];
    };
    auto mma = [&](const unsigned char* st, int j) {
        if (LLGEN_W4A16_DIAGNOSE == 2) return;
        Mma::fence();
        Mma::mma(chain[GS ? j / 2 : j % C::CHAINS], a[j % C::BUFFERS], st + j * (C::X_BYTES / C::SLICES),
                 GS ? j % 2 : 1);
        Mma::commit();
    };
    auto stage = [&](int g) {
        sync::mbar_wait(&full[g % S], (g / S) & 1);
        const unsigned char* const st = base + (g % S) * C::STAGE;
        if (LLGEN_W4A16_PREFETCH && LLGEN_W4A16_DIAGNOSE < 3)
#pragma unroll
            for (int j = 0; j < C::SLICES; ++j) fetch(st, j);
        return st;
    };
    const int n = ce - cb;
    if (LLGEN_W4A16_DIAGNOSE >= 3) {             // the stream alone: each stage goes back unread
        for (int g = first; g < n; g += step) {
            stage(g);
            sync::mbar_arrive(&empty[g % S]);
        }
    } else if (first < n) {
        // Chunk g's slice 0 is upcast before the loop reaches g: under chunk g - step's wgmma (after
        // wait<BUFFERS - 1> frees its buffer) or, with LLGEN_W4A16_DRAIN_CHUNKS, after they drained.
        // Either way the loop's back edge follows a wait<0>, so no wgmma is in flight across it.
        const unsigned char* st = stage(first);
        upcast(st, 0);
        for (int g = first; g < n; g += step) {
            mma(st, 0);
#pragma unroll
            for (int j = 1; j < C::SLICES; ++j) {
                Mma::template wait<C::BUFFERS - 1>();  // slice j - BUFFERS's wgmma (this buffer's reader) done
                if (GS && j == 3) {                    // group 0's slices done, slice 2 (chain 1) in flight
                    Mma::template wait_acc<C::BUFFERS - 1>(chain[0]);
                    fold(st, 0);
                }
                upcast(st, j);
                mma(st, j);
            }
            const unsigned char* const next = g + step < n ? stage(g + step) : nullptr;
            if (next && !LLGEN_W4A16_DRAIN_CHUNKS) {
                Mma::template wait<C::BUFFERS - 1>();
                upcast(next, 0);
            }
            Mma::template wait<0>();               // the chunk's wgmma done: its stage goes back
            if (GS) {
                Mma::template wait_acc<0>(chain[1]);
                fold(st, 1);
            }
            sync::mbar_arrive(&empty[g % S]);
            if (next && LLGEN_W4A16_DRAIN_CHUNKS) upcast(next, 0);
            st = next;
        }
    }
#pragma unroll
    for (int c = 0; c < C::CHAINS; ++c) Mma::template wait_acc<0>(chain[c]);
    if (LLGEN_W4A16_DIAGNOSE == 2) chain[0][0] += static_cast<float>(sink & 1);
    float (&acc)[C::ACC] = GS ? total : chain[0];  // ((chain 0 + chain 1) + chain 2) + ..: a fixed order
#pragma unroll
    for (int c = 1; c < (GS ? 1 : C::CHAINS); ++c)
#pragma unroll
        for (int r = 0; r < C::ACC; ++r) acc[r] += chain[c][r];

    unsigned ctid = tid;                         // index among the accumulator holders
    if constexpr (C::KSPLIT) {                   // the second warp group hands its sum to the first
        if (me == 1) {
#pragma unroll
            for (int r = 0; r < C::ACC; ++r) handoff[r * 128 + tid] = acc[r];
            sync::mbar_arrive(handed);
            return;
        }
        sync::mbar_wait(handed, 0);
#pragma unroll
        for (int r = 0; r < C::ACC; ++r) acc[r] += handoff[r * 128 + tid];
    } else {
        ctid = threadIdx.x - 128;
    }

    sync::grid_wait();      // an overlapped launch: the kernel before it (Y's and the workspace's user) is done
    if (work.splits > 1) {  // park this range's sum; the CTA completing the tile adds the ranges in order
        constexpr long long SLOT = static_cast<long long>(C::ACC) * C::EPI_THREADS;
        float4* const slots = reinterpret_cast<float4*>(work.partial + tile * work.splits * SLOT);
#pragma unroll
        for (int q = 0; q < C::ACC / 4; ++q)
            slots[range * SLOT / 4 + q * C::EPI_THREADS + ctid] =
                make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]);
        sync::mbar_arrive(meet);
        sync::mbar_wait(meet, 0);  // every holder's slot written
        if (ctid == 0) {
            __threadfence();       // the slot before the count
            const int last = atomicAdd(&work.count[tile], 1) == work.splits - 1;
            if (last) work.count[tile] = 0;  // every range has counted: zero for the next launch
            __threadfence();       // the other ranges' slots, seen through their counts, before the reads
            *last_flag = last;
        }
        sync::mbar_arrive(meet);
        sync::mbar_wait(meet, 1);  // the flag written
        if (!*last_flag) return;
        if (range != 0) {  // acc = slot 0 (range 0's sum is already in acc when it is this CTA's)
#pragma unroll
            for (int q = 0; q < C::ACC / 4; ++q) {
                const float4 v = slots[q * C::EPI_THREADS + ctid];
                acc[4 * q] = v.x, acc[4 * q + 1] = v.y, acc[4 * q + 2] = v.z, acc[4 * q + 3] = v.w;
            }
        }
        for (int r = 1; r < work.splits; ++r) {  // + slot 1 + slot 2 ..: the same f32 sums whichever CTA is last
#pragma unroll
            for (int q = 0; q < C::ACC / 4; ++q) {
                const float4 v = slots[r * SLOT / 4 + q * C::EPI_THREADS + ctid];
                acc[4 * q] += v.x, acc[4 * q + 1] += v.y, acc[4 * q + 2] += v.z, acc[4 * q + 3] += v.w;
            }
        }
    }
    uint16_t out[C::ACC];
#pragma unroll
    for (int r = 0; r < C::ACC; ++r) out[r] = bf16_bits(acc[r]);
    C::store(out, Y + static_cast<long long>(m0) * N + n0, N, N - n0, M - m0, scratch, ctid);
}

}  // namespace gemm_w4a16

#define LLGEN_W4A16_KERNEL(NAME, CONFIG, FORMAT)                                                                  \
    extern "C" __global__ void __launch_bounds__(gemm_w4a16::CONFIG<gemm_w4a16::FORMAT>::THREADS, 1)            \
    NAME(const __grid_constant__ CUtensorMap map_w, const __grid_constant__ CUtensorMap map_s,                   \
         const __grid_constant__ CUtensorMap map_x, uint16_t* Y, int M, int N, int K, gemm_w4a16::Work work) {   \
        gemm_w4a16::gemm<gemm_w4a16::CONFIG<gemm_w4a16::FORMAT>>(&map_w, &map_s, &map_x, Y, M, N, K, work);      \
    }
LLGEN_W4A16_KERNEL(gemm_w4a16_decode, Decode, I4Decode)
LLGEN_W4A16_KERNEL(gemm_w4a16_mid, Mid, I4)
LLGEN_W4A16_KERNEL(gemm_w4a16_large, Large, I4)
LLGEN_W4A16_KERNEL(gemm_mxfp4_decode, Decode, MXFP4)
LLGEN_W4A16_KERNEL(gemm_mxfp4_mid, Mid, MXFP4)
LLGEN_W4A16_KERNEL(gemm_mxfp4_large, Large, MXFP4)

#if !defined(__CUDACC_RTC__)
namespace gemm_w4a16 {

struct Maps {
    CUtensorMap w, s, x;
};

// The weight formats (llgen_w4a16_prepare's `format`) and the tile shapes: 0 decode (M <= 16), 1 mid
// (M <= 64), 2 large.
enum Format { INT4 = 0, MXFP4_E8M0 = 1 };
enum Shape { DECODE = 0, MID = 1, LARGE = 2 };
inline Shape shape_of(int M) { return M <= Decode<I4>::BN ? DECODE : M <= Mid<I4>::BN ? MID : LARGE; }

// A tile shape's numbers as the host needs them.
struct Sizes {
    int bm, bn, kc, smem, holders, acc, threads;
};
template <class C>
constexpr Sizes sizes_of() { return {C::BM, C::BN, C::KC, C::SMEM, C::EPI_THREADS, C::ACC, C::THREADS}; }
template <class F>
Sizes sizes_for(Shape s) {
    return s == DECODE ? sizes_of<Decode<F>>() : s == MID ? sizes_of<Mid<F>>() : sizes_of<Large<F>>();
}
inline Sizes sizes(Format f, Shape s) {
    if (f == MXFP4_E8M0) return sizes_for<MXFP4>(s);
    return s == DECODE ? sizes_of<Decode<I4Decode>>() : sizes_for<I4>(s);
}

// The tensor maps: W the packed buffer as rows of 128 bytes (row-major build: N x K / 2 bytes), S^T as
// K / GROUP x N scales, X^T as (K, M) with K contiguous (the box of the tile shape's token count).
inline CUresult encode(Maps& m, Format format, Shape shape, const void* X, const void* Wp, const void* St, int M,
                       int N, int K) {
    const unsigned long long dw[2] = {LLGEN_W4A16_ROW_MAJOR ? static_cast<unsigned long long>(N)
                                                            : static_cast<unsigned long long>(N) * K / 256,
                                      LLGEN_W4A16_ROW_MAJOR ? static_cast<unsigned long long>(K / 2) : 128};
    const unsigned long long sw[2] = {dw[1], 1};
    const unsigned long long dx[2] = {static_cast<unsigned long long>(K), static_cast<unsigned long long>(M)};
    const unsigned long long sx[2] = {1, static_cast<unsigned long long>(K)};
    CUresult r = tw::make_tensor_map(&m.w, Wp, dw, sw);
    if (r == CUDA_SUCCESS) r = format == INT4 ? I4::encode_s(&m.s, St, N, K) : MXFP4::encode_s(&m.s, St, N, K);
    if (r == CUDA_SUCCESS)
        r = shape == DECODE ? w4a16_tma_x_n16::make_tensor_map(&m.x, X, dx, sx)
            : shape == MID  ? w4a16_tma_x_n64::make_tensor_map(&m.x, X, dx, sx)
                            : w4a16_tma_x_n256::make_tensor_map(&m.x, X, dx, sx);
    return r;
}

using Kernel = void (*)(CUtensorMap, CUtensorMap, CUtensorMap, uint16_t*, int, int, int, Work);

// The launch: the tile shape, how many ranges of K, the grid.  K is split so that about one CTA runs per
// SM, each range at least 4 chunks, at most 16 ranges.
struct Plan {
    Format format;
    Shape shape;
    int splits, grid, threads, smem;
    long long workspace;   // f32 partial slots
    int counters;
};

inline Plan plan(Format format, int M, int N, int K, int sms, int splits = 0) {
    Plan p{};
    p.format = format;
    p.shape = shape_of(M);
    const Sizes z = sizes(format, p.shape);
    // a tile past the last weight row (N a multiple of 128 under 256-row tiles) reads zeros, stores masked
    const int tiles = ((N + z.bm - 1) / z.bm) * ((M + z.bn - 1) / z.bn), chunks = K / z.kc;
    if (splits <= 0) {
        splits = 1;
        while (splits < 16 && tiles * (splits + 1) <= sms && chunks / (splits + 1) >= 4) ++splits;
    }
    p.splits = splits < chunks ? splits : chunks;
    p.grid = tiles * p.splits;
    p.threads = z.threads;
    p.smem = z.smem;
    p.workspace = p.splits > 1 ? static_cast<long long>(tiles) * p.splits * z.acc * z.holders : 0;
    p.counters = p.splits > 1 ? tiles : 0;
    return p;
}

inline Kernel kernel_of(Format f, Shape s) {
    if (f == MXFP4_E8M0) return s == DECODE ? gemm_mxfp4_decode : s == MID ? gemm_mxfp4_mid : gemm_mxfp4_large;
    return s == DECODE ? gemm_w4a16_decode : s == MID ? gemm_w4a16_mid : gemm_w4a16_large;
}

}  // namespace gemm_w4a16

#if !defined(LLGEN_HOST_SIMT)
struct llgen_w4a16_params {
    gemm_w4a16::Maps maps;
    gemm_w4a16::Kernel kernel;
    gemm_w4a16::Work work;
    uint16_t* Y;
    int M, N, K, grid, threads, smem, splits;
    void* workspace;
};

// Y (M x N bf16) = X (M x K bf16) W^T.  format 0: Wp the pre-shuffled int4 weights (N K / 2 bytes), St the
// scales as S^T (K / 128 x N bf16); format 1 (mxfp4): Wp the pre-shuffled e2m1 weights, St the e8m0 exponents
// as S^T (K / 32 x N bytes).  Device pointers, 16-byte aligned; N a multiple of 128, K of 256.  splits 0:
// chosen.  Returns 0, or a CUresult / cudaError_t.
extern "C" int llgen_w4a16_prepare(llgen_w4a16_params* p, int format, const void* X, const void* Wp, const void* St,
                                   void* Y, int M, int N, int K, int splits) {
    using namespace gemm_w4a16;
    if (M <= 0 || N <= 0 || K <= 0 || N % 128 || K % 256 || (format != INT4 && format != MXFP4_E8M0))
        return cudaErrorInvalidValue;
    *p = {};
    int dev = 0, sms = 0;
    if (cudaError_t e = cudaGetDevice(&dev)) return e;
    if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) return e;
    const Plan pl = plan(Format(format), M, N, K, sms, splits);
    if (CUresult r = encode(p->maps, pl.format, pl.shape, X, Wp, St, M, N, K)) return r;
    p->kernel = kernel_of(pl.format, pl.shape);
    p->Y = static_cast<uint16_t*>(Y);
    p->M = M, p->N = N, p->K = K, p->grid = pl.grid, p->threads = pl.threads, p->smem = pl.smem, p->splits = pl.splits;
    if (cudaError_t e = cudaFuncSetAttribute(p->kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, p->smem)) return e;
    p->work = {pl.splits, nullptr, nullptr, 0};
    if (pl.splits > 1) {
        const size_t bytes = pl.workspace * sizeof(float) + pl.counters * sizeof(int);
        if (cudaError_t e = cudaMalloc(&p->workspace, bytes)) return e;
        p->work.partial = static_cast<float*>(p->workspace);
        p->work.count = reinterpret_cast<int*>(p->work.partial + pl.workspace);
        if (cudaError_t e = cudaMemset(p->work.count, 0, pl.counters * sizeof(int))) return e;
    }
    return 0;
}

extern "C" int llgen_w4a16_launch(const llgen_w4a16_params* p, cudaStream_t stream) {
    if (!p->work.overlap) {  // else: launched with programmatic stream serialization
        p->kernel<<<p->grid, p->threads, p->smem, stream>>>(p->maps.w, p->maps.s, p->maps.x, p->Y, p->M, p->N,
                                                             p->K, p->work);
        return cudaGetLastError();
    }
    cudaLaunchAttribute attr[1] = {};
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(p->grid), config.blockDim = dim3(p->threads), config.dynamicSmemBytes = p->smem;
    config.stream = stream, config.attrs = attr, config.numAttrs = 1;
    return cudaLaunchKernelEx(&config, p->kernel, p->maps.w, p->maps.s, p->maps.x, p->Y, p->M, p->N, p->K, p->work);
}

// Overlapped launches (on != 0): each launch may start while the kernel before it in the stream still runs
// (programmatic dependent launch), streaming its first stages' weights and scales under that kernel's tail;
// it reads X and writes Y and its workspace only once that kernel has completed.  The caller's promise: the
// weights and scales are not written by the kernels this launch may overlap.
extern "C" int llgen_w4a16_overlap(llgen_w4a16_params* p, int on) {
    p->work.overlap = on != 0;
    return 0;
}

// Frees the workspace (after the launches that use it have finished).
extern "C" int llgen_w4a16_release(llgen_w4a16_params* p) {
    const cudaError_t e = p->workspace ? cudaFree(p->workspace) : cudaSuccess;
    p->workspace = nullptr, p->work.partial = nullptr, p->work.count = nullptr;
    return e;
}

extern "C" int llgen_w4a16_params_size() { return sizeof(llgen_w4a16_params); }

// The weights' offline reorder on the device: W (N x K int4, row-major, two a byte, element k of a row in
// byte k / 2's low nibble when k is even) -> the packed buffer the kernel reads (N K / 2 bytes).  N and K
// multiples of 64.
extern "C" int llgen_w4a16_pack(const void* W, void* Wp, int N, int K, cudaStream_t stream) {
    namespace r = w4a16_preshuffle_W_reorder;
    if (N <= 0 || K <= 0 || N % 64 || K % 64) return cudaErrorInvalidValue;
    const r::Extent e = {{N / 64, K / 64}, {K, 1}};
    const long long threads = r::vectors(e);
    r::reorder<<<static_cast<unsigned>((threads + 255) / 256), 256, 0, stream>>>(static_cast<const r::Raw*>(W),
                                                                                  static_cast<r::Raw*>(Wp), e);
    return cudaGetLastError();
}
#endif
#endif
