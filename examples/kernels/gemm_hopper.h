// The control shared by the Hopper GEMM kernels (gemm_wgmma.cu: f16 / bf16 operands; gemm_fp8.cu:
// e4m3 / e5m2 operands): C (M x N) = A (M x K) B (K x N) in 128 x 256, 128 x 192 or 128 x 128 tiles of
// C, f32 accumulation.  Written by hand here: the tile scheduler and the split of K, the stage ring and its
// mbarriers, the producer / consumer split and its register budgets, the epilogue's order.
// Everything that depends on a layout -- the TMA boxes, the swizzled tiles, the wgmma descriptors,
// the registers the epilogue stores -- is a generated header's function: the operands' (a kernel
// file hands them in through LLGEN_GEMM_HOPPER_OPERANDS) and the epilogue's (LLGEN_GEMM_HOPPER_EPILOGUE
// below, one per tile shape), shared by every operand type (the kernel files assert that each operand
// header's accumulator is the registers the epilogue reads).
//
//   gemm_wgmma_store_f32[_n128|_n64]  the f32 accumulator -> global C (8-byte vectors, store_masked at the edges)
//   gemm_wgmma_stage_c[_n128|_n64]    the 16-bit accumulator -> a 128-byte-swizzled shared C tile (st.shared)
//   gemm_wgmma_tma_c_<t>[_n128|_n64]  that shared tile -> global C (TMA boxes; TMA clips at the edges)
//
// A 192-column tile is not a layout of power-of-two size, so it is two parts side by side, each a
// layout with its own headers: columns 0-127 (the 128 x 128 tile's wgmma and epilogue) and columns
// 128-191 (the _n64 headers: wgmma m64n64, a 128 x 64 epilogue).  Its B tile is three 64-column boxes
// of one TMA header, the first two the 128-wide part's B tile; the accumulator is one array of
// registers, the first part's then the second's (LLGEN_GEMM_HOPPER_OPERANDS_PAIR and
// LLGEN_GEMM_HOPPER_EPILOGUE_PAIR below; the control sees one tile of 192 columns).
//
// Schedule (gemm_hopper_plan.h: the units of work and how the host chooses them).  Tiles are numbered
// in grouped order (GROUP_M tile rows form a group, walked column by column: the CTAs in flight
// together read few distinct A and B tiles, so L2 serves them).  A unit is a whole tile or one share of
// the tail's k-steps, cut into pieces at tile boundaries (split K: one range of a split tile; stream K:
// the end of one tile, whole tiles, the start of another).  Persistent (LLGEN_GEMM_PERSISTENT=1, the
// default): the grid has at most one CTA per SM and CTA b computes units b, b + gridDim.x, ...; the
// producer's stage ring runs on across units, so the next unit's operands load while the consumers run
// the epilogue of this one, and a 16-bit C is staged in a buffer of its own.  LLGEN_GEMM_PERSISTENT=0:
// one CTA per unit (the same loop, run once), a 16-bit C staged in the then idle operand stages.
//
// Split and stream K (deterministic).  A CTA that finishes a piece of a tile (less than the whole tile)
// writes its f32 accumulator to the piece's workspace slot and counts the piece in the tile's counter
// (atomicAdd after a __threadfence: the slot is visible before the count).  The CTA whose count
// completes the tile sums the tile's pieces in share order 0, 1, .., parts - 1 (its own accumulator
// stands for piece 0 when it holds piece 0; every other piece, its own included, is read back), so each
// element's sum is the same sequence of f32 additions whichever CTA comes last; it zeroes the counter
// for the next launch and runs the epilogue.  A slot holds the accumulator in register order, thread by
// thread (16-byte vectors: register 4c .. 4c + 3 of consumer thread t at float4 c * 256 + t): written
// and read back by the same thread index of CTAs sharing one accumulator layout, it holds no tile
// layout of its own.  No CTA ever waits for another, so any number of CTAs in any order (the host SIMT
// runtime runs them one after another) computes the same C.
//
// B landed MN-major (an operand type of LLGEN_GEMM_HOPPER_OPERANDS_KN: 8-bit B given K x N, which
// wgmma reads only K-major).  TMA lands the stage's B tile N-contiguous where the K-major tile goes
// (a `landed` barrier per stage); the producer warp group's 128 threads rewrite it in place into the
// K-major tile (a relayout header: every thread's loads, a rendezvous of the 128, every store) and
// arrive on the stage's `full` barrier, which then counts TMA's A bytes and the 128 arrivals.  One
// thread issues the loads of step g + S - IN_FLIGHT after transposing step g: that stage's release
// needs the consumers past step g - IN_FLIGHT, which (a wgmma group left in flight) needs step g's B;
// issued before the transpose, the load would wait on it.  So the loads run S - IN_FLIGHT steps ahead
// of the transpose, and a stage is overwritten only after both consumer groups released it.
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstdint>

#include "gemm_hopper_plan.h"
#include "gemm_wgmma_store_f32.cuh"
#include "gemm_wgmma_stage_c.cuh"
#include "gemm_wgmma_tma_c_f16.cuh"
#include "gemm_wgmma_tma_c_bf16.cuh"
#include "gemm_wgmma_store_f32_n128.cuh"
#include "gemm_wgmma_stage_c_n128.cuh"
#include "gemm_wgmma_tma_c_f16_n128.cuh"
#include "gemm_wgmma_tma_c_bf16_n128.cuh"
#include "gemm_wgmma_store_f32_n64.cuh"
#include "gemm_wgmma_stage_c_n64.cuh"
#include "gemm_wgmma_tma_c_f16_n64.cuh"
#include "gemm_wgmma_tma_c_bf16_n64.cuh"

extern __shared__ __align__(1024) unsigned char smem[];  // dynamic: gemm_hopper::smem_bytes<Op>(out)

// The hand-written control's knobs (bench/bench_gemm.py --ladder builds variants with -D):
#ifndef LLGEN_GEMM_STAGES
#define LLGEN_GEMM_STAGES 8  // at most; fewer where they do not fit (128 x 256: 4, or 3 beside a C buffer;
                             // 128 x 192: 5, or 4)
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
// -D LLGEN_GEMM_SKIP_AGREEMENT_CHECKS=1 passes the element-by-element static_asserts that the headers agree
// (same_tile, same_regs: ~10^5 index calls the compiler evaluates, most of a host SIMT compile) without
// evaluating them: for a build whose nvcc build of the same file checks them (the test suite's host SIMT drivers).
#ifndef LLGEN_GEMM_SKIP_AGREEMENT_CHECKS
#define LLGEN_GEMM_SKIP_AGREEMENT_CHECKS 0
#endif

namespace gemm_hopper {

namespace sync = gemm_wgmma_tma_c_f16;  // mbarriers, proxy fences, bulk groups: the same in every TMA header

// The output's element type.  F16 / BF16: rounded to nearest even, staged and stored by TMA.
enum Out { F32 = 0, BF16 = 1, F16 = 2 };

constexpr int CONSUMERS = 2;                  // consumer warp groups, 64 rows of the tile each
constexpr int CONSUMER_THREADS = CONSUMERS * 128;
constexpr int THREADS = 128 + CONSUMER_THREADS;  // warp group 0 produces, 1 and 2 consume
constexpr int ALIGN = 1024;                   // the 128-byte swizzle's tile alignment (asserted)
constexpr int MAX_SMEM = 227 * 1024;          // sm_90's dynamic shared memory per block
constexpr int IN_FLIGHT = LLGEN_GEMM_IN_FLIGHT;  // wgmma groups a consumer leaves running (0 or 1)
constexpr int GROUP_M = LLGEN_GEMM_GROUP_M;   // tile rows of one group of the grouped order
constexpr bool PERSISTENT = LLGEN_GEMM_PERSISTENT;
// full/empty/landed per stage (at most 8), the consumers' rendezvous, the tail's "last piece" flag, the
// transposing producer's rendezvous
constexpr int BARRIER_BYTES = 3 * 8 * 8 + 8 + 8 + 8;

static_assert(IN_FLIGHT == 0 || IN_FLIGHT == 1, "a consumer releases one stage per k-step");
static_assert(GROUP_M >= 1, "a group holds at least one tile row");
static_assert(LLGEN_GEMM_STAGES >= 2 && LLGEN_GEMM_STAGES <= 8, "between 2 and 8 stages");

// ---- compile-time checks that headers agree on the bytes and registers they share ----
// f(o) == g(o) for every element offset o of a shared tile.
template <class F, class G>
constexpr bool same_tile(int elements, F f, G g) {
    if (LLGEN_GEMM_SKIP_AGREEMENT_CHECKS) return true;
    for (int o = 0; o < elements; ++o)
        if (f(o) != g(o)) return false;
    return true;
}
// f(r, lane, warp) == g(r, lane, warp) for every register of every thread of `warps` warps (by default
// the consumers').
template <class F, class G>
constexpr bool same_regs(int regs, F f, G g, int warps = CONSUMERS * 4) {
    if (LLGEN_GEMM_SKIP_AGREEMENT_CHECKS) return true;
    for (int w = 0; w < warps; ++w)
        for (int l = 0; l < 32; ++l)
            for (int r = 0; r < regs; ++r)
                if (f(r, l, w) != g(r, l, w)) return false;
    return true;
}

// The registers [OFF, OFF + N) of an accumulator array as an array of their own: one part of a
// two-part tile (the first part's registers, then the second's).  Indices stay compile-time
// constants, so the registers stay registers.
template <int OFF, int N, class T, int R>
__host__ __device__ __forceinline__ T (&regs_part(T (&a)[R]))[N] {
    static_assert(OFF >= 0 && OFF + N <= R, "a part within the array");
    return *reinterpret_cast<T(*)[N]>(a + OFF);
}

// Element offset o of a B tile made of K x W TMA tiles laid one after the other (part p = o / (K W)
// holds columns p W .. p W + W - 1; tile_index: the TMA header's, offset -> k * W + n) -> its
// element index k * N + n in the K x N tile a wgmma header reads: (row, column) of tile_index in
// part p, shifted by p W columns.
struct BParts {
    int (*tile_index)(int);
    int K, W, N;
    __host__ __device__ constexpr int operator()(int o) const {
        const int t = tile_index(o % (K * W));
        return (t / W) * N + (o / (K * W)) * W + t % W;
    }
};

// The launch's work as the kernel reads it (gemm_hopper_plan.h's Plan, less what the host alone
// needs): `dp` tiles computed whole, the tail's k-steps dealt to `shares` units, the partial-tile
// workspace (slots of BM x BN f32: a share's first piece, then its last) and the per-tail-tile counters
// (zero between launches).
struct Work {
    int dp, shares;
    float* partial;
    int* count;
};

// Register budgets of warp specialisation (setmaxnreg): the producer gives registers back, the
// consumers take what it leaves for the accumulator and the epilogue's registers.  The budgets add up
// to at most what the CTA holds at launch (__launch_bounds__(THREADS, 1): 65536 / THREADS rounded down
// to 8 a thread): setmaxnreg.inc waits for registers the other warp groups released.  The producer
// keeps 40 (one thread issuing TMA), or 88 where its warp group transposes B (Op::kTransposeB: a part's
// 32 words and the offsets of its loads and stores; ptxas spills a few bytes at 64 and 72, none at 80,
// which leaves the consumers the same 208); the consumers get 232, or 208.
constexpr int LAUNCH_REGS = 65536 / THREADS / 8 * 8;
constexpr int PRODUCER_REGS = 40, TRANSPOSER_REGS = 88;
template <class Op>
__host__ __device__ constexpr int producer_regs() { return Op::kTransposeB ? TRANSPOSER_REGS : PRODUCER_REGS; }
template <class Op>
__host__ __device__ constexpr int consumer_regs() {
    return (LAUNCH_REGS * THREADS - producer_regs<Op>() * 128) / CONSUMER_THREADS / 8 * 8;
}

// The units of C in grouped order: GROUP_M tile rows per group, each group walked column by column
// (tile id -> (m0, n0)); the last group has the rows that are left.  Units as gemm_hopper_plan.h.
template <int BM, int BN>
struct Schedule {
    int tiles_m, tiles_n, ksteps;
    Work work;
    __host__ __device__ Schedule(int M, int N, int K, int kK, Work w)
        : tiles_m((M + BM - 1) / BM), tiles_n((N + BN - 1) / BN), ksteps((K + kK - 1) / kK), work(w) {}
    __host__ __device__ int count() const { return tiles_m * tiles_n; }
    __host__ __device__ int units() const { return units_of().count(); }
    __device__ __forceinline__ void origin(int id, int& m0, int& n0) const {
        const int group = id / (GROUP_M * tiles_n), first = group * GROUP_M;
        const int rows = tiles_m - first < GROUP_M ? tiles_m - first : GROUP_M;
        const int in_group = id % (GROUP_M * tiles_n);
        m0 = (first + in_group % rows) * BM;
        n0 = (in_group / rows) * BN;
    }
    // Piece i of unit u (false past its last) and the slot of tail tile `tile`'s piece `pos`
    // (gemm_hopper_plan.h's Units).
    __host__ __device__ Units units_of() const { return Units{count(), ksteps, work.dp, work.shares}; }
    __host__ __device__ bool piece(int u, int i, Piece& p) const { return units_of().piece(u, i, p); }
    __host__ __device__ int slot(int tile, int pos) const { return units_of().slot(tile, pos); }
};

// This CTA's pieces in order, unit after unit (units blockIdx.x, + gridDim.x, ..): next() gives the
// next one, false after the last.
template <int BM, int BN>
struct Pieces {
    const Schedule<BM, BN>& sched;
    int u, i = 0;
    __device__ explicit Pieces(const Schedule<BM, BN>& s) : sched(s), u(blockIdx.x) {}
    __device__ __forceinline__ bool next(Piece& p) {
        for (; u < sched.units(); u += gridDim.x, i = 0)
            if (sched.piece(u, i++, p)) return true;
        return false;
    }
};

// This CTA's k-steps in order, piece after piece: next() gives the next one's tile origin and k-step,
// false after the last.
template <int BM, int BN>
struct Steps {
    Pieces<BM, BN> pieces;
    int kt = 0, ke = 0, m0 = 0, n0 = 0;
    __device__ explicit Steps(const Schedule<BM, BN>& s) : pieces(s) {}
    __device__ __forceinline__ bool next(int& m, int& n, int& k) {
        while (kt == ke) {
            Piece p;
            if (!pieces.next(p)) return false;
            kt = p.kb, ke = p.ke;
            pieces.sched.origin(p.tile, m0, n0);
        }
        m = m0, n = n0, k = kt++;
        return true;
    }
};

inline __device__ uint16_t round16(float x, bool bf) {
    return bf ? __bfloat16_as_ushort(__float2bfloat16_rn(x)) : __half_as_ushort(__float2half_rn(x));
}

// A piece's accumulator -> its workspace slot, in register order (see the top of this file).
template <int R>
__device__ __forceinline__ void store_partial(const float (&acc)[R], float* slot, unsigned tid) {
    float4* const p = reinterpret_cast<float4*>(slot);
#pragma unroll
    for (int c = 0; c < R / 4; ++c)
        p[c * CONSUMER_THREADS + tid] = make_float4(acc[4 * c], acc[4 * c + 1], acc[4 * c + 2], acc[4 * c + 3]);
}

// acc = ((piece 0 + piece 1) + piece 2) + .. + piece parts-1, f32 additions in that order (piece j's
// partial in slot(j)); acc holds piece `mine`'s partial on entry (== slot(mine), so for mine == 0
// piece 0 is not read back).
template <int R, class Slot>
__device__ __forceinline__ void sum_partials(float (&acc)[R], Slot slot, int parts, int mine, unsigned tid) {
    if (mine != 0) {
        const float4* const p = reinterpret_cast<const float4*>(slot(0));
#pragma unroll
        for (int c = 0; c < R / 4; ++c) {
            const float4 v = p[c * CONSUMER_THREADS + tid];
            acc[4 * c] = v.x, acc[4 * c + 1] = v.y, acc[4 * c + 2] = v.z, acc[4 * c + 3] = v.w;
        }
    }
    for (int s = 1; s < parts; ++s) {
        const float4* const q = reinterpret_cast<const float4*>(slot(s));
#pragma unroll
        for (int c = 0; c < R / 4; ++c) {
            const float4 v = q[c * CONSUMER_THREADS + tid];
            acc[4 * c] += v.x, acc[4 * c + 1] += v.y, acc[4 * c + 2] += v.z, acc[4 * c + 3] += v.w;
        }
    }
}

// Operand stages in flight: LLGEN_GEMM_STAGES, fewer where they would not fit beside the C buffer.
template <class Op>
__host__ __device__ constexpr int c_buffer_bytes(int out) { return PERSISTENT && out != F32 ? Op::Epi::C_BYTES : 0; }
template <class Op>
__host__ __device__ constexpr int stages(int out) {
    return (MAX_SMEM - ALIGN - BARRIER_BYTES - c_buffer_bytes<Op>(out)) / Op::kStageBytes < LLGEN_GEMM_STAGES
               ? (MAX_SMEM - ALIGN - BARRIER_BYTES - c_buffer_bytes<Op>(out)) / Op::kStageBytes
               : LLGEN_GEMM_STAGES;
}
// Dynamic shared memory: the stages, the C buffer (persistent, 16-bit C), the barriers, alignment slack.
template <class Op>
__host__ __device__ constexpr int smem_bytes(int out) {
    return stages<Op>(out) * Op::kStageBytes + c_buffer_bytes<Op>(out) + BARRIER_BYTES + ALIGN;
}

// The producer warp group of an operand type whose B lands MN-major (Op::kTransposeB; see the top of
// this file): thread 0 issues step g's loads (A onto full[g % S], B onto landed[g % S]) S - IN_FLIGHT
// steps ahead, every thread transposes each landed B tile in place and arrives on full[g % S].
template <class Op, int S, int BM, int BN>
__device__ __forceinline__ void produce_transposing(const CUtensorMap* map_a, const CUtensorMap* map_b,
                                                    const Schedule<BM, BN>& sched, unsigned char* base,
                                                    uint64_t* full, uint64_t* empty, uint64_t* landed,
                                                    uint64_t* tmeet) {
    constexpr int AHEAD = S - IN_FLIGHT;
    const unsigned ptid = threadIdx.x;  // 0 .. 127: the relayout's thread index
    int steps = 0;                      // this CTA's k-steps, over all its pieces
    Piece p;
    for (Pieces<BM, BN> pieces(sched); pieces.next(p);) steps += p.ke - p.kb;
    Steps<BM, BN> next(sched);  // thread 0: the next step to load
    auto issue = [&](int g) {
        int m0, n0, kt;
        next.next(m0, n0, kt);
        const int s = g % S;
        unsigned char* const stage = base + s * Op::kStageBytes;
        if (g >= S) sync::mbar_wait(&empty[s], ((g / S) - 1) & 1);  // its last readers are done
        sync::mbar_arrive_expect_tx(&full[s], Op::kTxBytesA);
        Op::load_a(map_a, m0, kt * Op::kK, stage, &full[s]);
        sync::mbar_arrive_expect_tx(&landed[s], Op::kTxBytesB);
        Op::load_b(map_b, kt * Op::kK, n0, stage, &landed[s]);
    };
    if (ptid == 0)
        for (int g = 0; g < AHEAD && g < steps; ++g) issue(g);
    unsigned meets = 0;  // rendezvous passed
    auto rendezvous = [&] {
        sync::mbar_arrive(tmeet);
        sync::mbar_wait(tmeet, meets & 1);
        ++meets;
    };
    for (int g = 0; g < steps; ++g) {
        const int s = g % S;
        sync::mbar_wait(&landed[s], (g / S) & 1);
        Op::transpose_b(base + s * Op::kStageBytes, ptid, rendezvous);
        sync::fence_proxy_async();  // this thread's st.shared visible to wgmma (the async proxy)
        sync::mbar_arrive(&full[s]);
        if (ptid == 0 && g + AHEAD < steps) issue(g + AHEAD);
    }
}

// C = (A B) * scale, scale = *scale_a * *scale_b in f32 (kScaled; else 1), for the operand type Op
// (a struct made by LLGEN_GEMM_HOPPER_OPERANDS, its epilogue Op::Epi) and the output kOut, over the
// units of `work`.  A stage holds Op's A tile (BM x kK) then its B tile (kK x BN); k-step g of the CTA
// (counted across its units) uses stage g % S, whose `full` barrier completes its phase (g / S) & 1
// when TMA has landed both tiles (Op::kTransposeB: A, and B transposed by the producer warp group) and
// whose `empty` barrier completes a phase when both consumer warp groups are done reading it.
template <class Op, int kOut, bool kScaled>
__device__ __forceinline__ void gemm(const CUtensorMap* map_a, const CUtensorMap* map_b, const CUtensorMap* map_c,
                                     void* C, int M, int N, int K, const float* scale_a, const float* scale_b,
                                     const Work& work) {
    using Epi = typename Op::Epi;
    constexpr int BM = Epi::BM, BN = Epi::BN;
    constexpr int S = stages<Op>(kOut);
    static_assert(S >= 2 && S <= 8, "between 2 and 8 stages fit");
    static_assert(smem_bytes<Op>(kOut) <= MAX_SMEM, "shared memory");
    static_assert(PERSISTENT || kOut == F32 || Epi::C_BYTES <= S * Op::kStageBytes, "C is staged in the idle stages");
    // dynamic shared memory is 16-byte aligned by contract: align the stages to the swizzle's 1024
    unsigned char* const base = smem + ((ALIGN - (static_cast<unsigned>(__cvta_generic_to_shared(smem)) % ALIGN)) % ALIGN);
    unsigned char* const c_tile = PERSISTENT ? base + S * Op::kStageBytes : base;
    uint64_t* const full = reinterpret_cast<uint64_t*>(base + S * Op::kStageBytes + c_buffer_bytes<Op>(kOut));
    uint64_t* const empty = full + S;
    uint64_t* const meet = empty + S;  // the consumer threads' rendezvous, phase after phase
    volatile int* const last_flag = reinterpret_cast<volatile int*>(meet + 1);
    uint64_t* const landed = meet + 2;  // Op::kTransposeB: TMA landed stage s's B (MN-major)
    uint64_t* const tmeet = landed + S;  // Op::kTransposeB: the producer threads' rendezvous
    const int wg = threadIdx.x / 128;
    if (threadIdx.x == 0) {
        for (int s = 0; s < S; ++s) {
            // the producer's arrive_expect_tx (Op::kTransposeB: and every producer thread's transpose)
            sync::mbar_init(&full[s], Op::kTransposeB ? 1 + 128 : 1);
            sync::mbar_init(&empty[s], CONSUMERS);  // one arrival per consumer warp group
            if (Op::kTransposeB) sync::mbar_init(&landed[s], 1);
        }
        sync::mbar_init(meet, CONSUMER_THREADS);
        if (Op::kTransposeB) sync::mbar_init(tmeet, 128);
        sync::fence_barrier_init();
    }
    __syncthreads();
    const Schedule<BM, BN> sched(M, N, K, Op::kK, work);

    if (wg == 0) {  // producer: one thread keeps the ring full, unit after unit (and B transposed)
        Op::template regs_dec<producer_regs<Op>()>();
        if constexpr (Op::kTransposeB) {
            produce_transposing<Op, S>(map_a, map_b, sched, base, full, empty, landed, tmeet);
        } else if (threadIdx.x == 0) {
            int g = 0;
            Piece p;
            for (Pieces<BM, BN> pieces(sched); pieces.next(p);) {
                int m0, n0;
                sched.origin(p.tile, m0, n0);
                for (int kt = p.kb; kt < p.ke; ++kt, ++g) {
                    const int s = g % S;
                    if (g >= S) sync::mbar_wait(&empty[s], ((g / S) - 1) & 1);  // its last readers are done
                    sync::mbar_arrive_expect_tx(&full[s], Op::kTxBytes);
                    Op::load(map_a, map_b, m0, n0, kt * Op::kK, base + s * Op::kStageBytes, &full[s]);
                }
            }
        }
        return;
    }

    Op::template regs_inc<consumer_regs<Op>()>();
    const unsigned tid = threadIdx.x - 128;  // 0 .. 255: the mma's and the epilogue's thread index
    const float scale = kScaled ? *scale_a * *scale_b : 1.0f;
    int g = 0;
    unsigned meets = 0;  // rendezvous passed: the next one completes phase parity meets & 1
    auto rendezvous = [&] {
        sync::mbar_arrive(meet);
        sync::mbar_wait(meet, meets & 1);
        ++meets;
    };
    Piece piece;
    for (Pieces<BM, BN> pieces(sched); pieces.next(piece);) {
        const int kb = piece.kb, ke = piece.ke;
        int m0, n0;
        sched.origin(piece.tile, m0, n0);
        float acc[Op::kAccRegs];
#pragma unroll
        for (int r = 0; r < Op::kAccRegs; ++r) acc[r] = 0.0f;
        for (int kt = kb; kt < ke; ++kt, ++g) {
            const int s = g % S;
            sync::mbar_wait(&full[s], (g / S) & 1);
            Op::fence();
            Op::mma(acc, base + s * Op::kStageBytes, tid);
            Op::commit();
            Op::template wait<IN_FLIGHT>();  // k-step g - IN_FLIGHT's wgmma are done: release its stage
            if (kt - kb >= IN_FLIGHT && tid % 128 == 0) sync::mbar_arrive(&empty[(g - IN_FLIGHT) % S]);
        }
        Op::wait_acc(acc);  // every wgmma of the unit done; acc readable
        // the unit's last IN_FLIGHT stages, released now that their wgmma are done
        if (IN_FLIGHT && tid % 128 == 0) sync::mbar_arrive(&empty[(g - 1) % S]);

        if (piece.parts > 1) {  // one piece of a tile: park it; the CTA completing the tile sums
            const int tile = piece.tile;
            auto slot = [&](int pos) {
                return work.partial + static_cast<long long>(sched.slot(tile, pos)) * (BM * BN);
            };
            store_partial(acc, work.partial + static_cast<long long>(piece.slot) * (BM * BN), tid);
            rendezvous();  // every consumer thread's slot written (and the last piece's flag read)
            if (tid == 0) {
                __threadfence();  // the slot (this CTA's writes, ordered by the rendezvous) before the count
                const int last = atomicAdd(&work.count[tile - work.dp], 1) == piece.parts - 1;
                if (last) work.count[tile - work.dp] = 0;  // every piece has counted: zero for the next launch
                __threadfence();  // the other pieces' slots, seen through their counts, before the reads
                *last_flag = last;
            }
            rendezvous();  // the flag written
            if (!*last_flag) continue;
            sum_partials(acc, slot, piece.parts, piece.pos, tid);
        }

        if constexpr (kScaled) {
#pragma unroll
            for (int r = 0; r < Op::kAccRegs; ++r) acc[r] *= scale;
        }
        if constexpr (kOut == F32) {
            const long long strides[2] = {N, 1};
            float* const c = static_cast<float*>(C) + static_cast<long long>(m0) * N + n0;
            if (m0 + BM <= M && n0 + BN <= N) {
                Epi::store_f32(acc, c, strides, base, tid);  // (kSmemBytes 0: no scratch)
            } else {
                const int extent[2] = {M - m0, N - n0};
                Epi::store_f32_masked(acc, c, strides, extent, base, tid);
            }
        } else {
            uint16_t out[Op::kAccRegs];
#pragma unroll
            for (int r = 0; r < Op::kAccRegs; ++r) out[r] = round16(acc[r], kOut == BF16);
            // Rendezvous 1: C may be written.  Persistent: the previous tile's TMA store has read the
            // C buffer (thread 0 issued it and waits for its reads before arriving).  One CTA per
            // unit: both consumer groups are past their last wgmma, so the stages are free for C.
            if (PERSISTENT && tid == 0) sync::store_wait<0>();
            rendezvous();
            Epi::stage(out, c_tile, tid);
            sync::fence_proxy_async();  // the tile's st.shared visible to TMA
            // Rendezvous 2: the whole C tile is in shared memory.
            rendezvous();
            if (tid == 0) {
                const int cc[2] = {m0, n0};
                Epi::template tma_store<kOut == BF16>(map_c, cc, c_tile);
                sync::store_commit();  // its reads are waited for before the next tile's C, or below
            }
        }
    }
    if (kOut != F32 && tid == 0) sync::store_wait<0>();  // shared memory must outlive the store's reads
}

}  // namespace gemm_hopper

// The epilogue of one C tile shape as the control above calls it: NAME::store_f32 / store_f32_masked
// (STORE_F32: the f32 accumulator to global C), NAME::stage (STAGE_C: the 16-bit accumulator to the
// swizzled shared C tile), NAME::tma_store (TMA_C_F16 / TMA_C_BF16: that tile to global C) and
// NAME::encode_c (C's tensor map).  The assertions: both stores read one accumulator layout, TMA
// stores the tile the stage writes.
#define LLGEN_GEMM_HOPPER_EPILOGUE(NAME, STORE_F32, STAGE_C, TMA_C_F16, TMA_C_BF16)                              \
    struct NAME {                                                                                                \
        static constexpr int BM = STAGE_C::kShape[0], BN = STAGE_C::kShape[1], kRegs = STAGE_C::kRegs;          \
        static constexpr int C_BYTES = STAGE_C::kTileBytes;                                                      \
        static_assert(BM == gemm_hopper::PLAN_BM && STORE_F32::kShape[0] == BM && STORE_F32::kShape[1] == BN &&  \
                      STORE_F32::kThreads == gemm_hopper::CONSUMER_THREADS &&                                    \
                      STAGE_C::kThreads == gemm_hopper::CONSUMER_THREADS && STORE_F32::kRegs == kRegs &&         \
                      kRegs % 4 == 0, "both epilogues store the consumers' registers of one C tile");           \
        static_assert(TMA_C_F16::kTileBytes == C_BYTES && TMA_C_BF16::kTileBytes == C_BYTES &&                   \
                      TMA_C_F16::kShape[0] == BM && TMA_C_F16::kShape[1] == BN && TMA_C_BF16::kShape[0] == BM && \
                      TMA_C_BF16::kShape[1] == BN && TMA_C_F16::kTileAlign <= gemm_hopper::ALIGN &&              \
                      C_BYTES % gemm_hopper::ALIGN == 0, "the C tile TMA stores");                               \
        static_assert(gemm_hopper::same_regs(kRegs, STORE_F32::src_index, STAGE_C::src_index),                   \
                      "one accumulator layout");                                                                 \
        /* C's tensor map: its box, box dims, swizzle and data types (a pair of parts shares one map) */         \
        static constexpr unsigned kCBox[2] = {TMA_C_F16::kBox[0], TMA_C_F16::kBox[1]};                            \
        static constexpr int kCBoxDims[2] = {TMA_C_F16::kBoxDims[0], TMA_C_F16::kBoxDims[1]};                     \
        static constexpr int kCSwizzle = TMA_C_F16::kSwizzle, kCTypeF16 = TMA_C_F16::kDataType;                  \
        static constexpr int kCTypeBf16 = TMA_C_BF16::kDataType;                                                 \
        static_assert(TMA_C_BF16::kBox[0] == kCBox[0] && TMA_C_BF16::kBox[1] == kCBox[1] &&                      \
                      TMA_C_BF16::kBoxDims[0] == kCBoxDims[0] && TMA_C_BF16::kBoxDims[1] == kCBoxDims[1] &&      \
                      TMA_C_BF16::kSwizzle == kCSwizzle, "one C box for f16 and bf16");                          \
        static_assert(gemm_hopper::same_tile(BM * BN, STAGE_C::tile_index, TMA_C_F16::tile_index) &&             \
                      gemm_hopper::same_tile(BM * BN, STAGE_C::tile_index, TMA_C_BF16::tile_index),              \
                      "TMA stores the C tile the epilogue stages");                                              \
        __host__ __device__ static constexpr int src_index(int r, int lane, int warp) {                          \
            return STAGE_C::src_index(r, lane, warp);                                                            \
        }                                                                                                        \
        __device__ static __forceinline__ void store_f32(const float (&acc)[kRegs], float* tile,                 \
                                                         const long long (&strides)[2], void* s, unsigned tid) { \
            STORE_F32::store(acc, tile, strides, s, tid);                                                        \
        }                                                                                                        \
        __device__ static __forceinline__ void store_f32_masked(const float (&acc)[kRegs], float* tile,          \
                                                                const long long (&strides)[2],                   \
                                                                const int (&extent)[2], void* s, unsigned tid) { \
            STORE_F32::store_masked(acc, tile, strides, extent, s, tid);                                         \
        }                                                                                                        \
        __device__ static __forceinline__ void stage(const uint16_t (&out)[kRegs], void* c_tile, unsigned tid) { \
            STAGE_C::store(out, c_tile, tid);                                                                    \
        }                                                                                                        \
        template <bool kBf16>                                                                                    \
        __device__ static __forceinline__ void tma_store(const CUtensorMap* map, const int (&cc)[2],             \
                                                         const void* c_tile) {                                   \
            if constexpr (kBf16) TMA_C_BF16::store(map, cc, c_tile);                                             \
            else TMA_C_F16::store(map, cc, c_tile);                                                              \
        }                                                                                                        \
        /* C's tensor map (16-bit C only: the f32 epilogue stores from registers).  C: M x N row-major. */      \
        static inline CUresult encode_c(CUtensorMap* map, int out, const void* C, int M, int N) {                \
            if (out == gemm_hopper::F32) return CUDA_SUCCESS;                                                    \
            const unsigned long long dc[2] = {static_cast<unsigned long long>(M), static_cast<unsigned long long>(N)}; \
            const unsigned long long sc[2] = {static_cast<unsigned long long>(N), 1};                            \
            return out == gemm_hopper::BF16 ? TMA_C_BF16::make_tensor_map(map, C, dc, sc)                        \
                                            : TMA_C_F16::make_tensor_map(map, C, dc, sc);                        \
        }                                                                                                        \
    };

// The epilogue of a tile of two parts side by side, E0's columns then E1's (the accumulator: E0's
// registers then E1's; the staged C tile: E0's bytes then E1's), with E0's C tensor map serving both
// (asserted: the same TMA box, swizzle and data type).
#define LLGEN_GEMM_HOPPER_EPILOGUE_PAIR(NAME, E0, E1)                                                            \
    struct NAME {                                                                                                \
        using Part0 = E0;                                                                                        \
        using Part1 = E1;                                                                                        \
        static constexpr int BM = E0::BM, BN = E0::BN + E1::BN, kRegs = E0::kRegs + E1::kRegs;                  \
        static constexpr int C_BYTES = E0::C_BYTES + E1::C_BYTES;                                                \
        static_assert(E1::BM == BM && E0::C_BYTES % gemm_hopper::ALIGN == 0, "two parts of one row of tiles");   \
        static_assert(E0::kCBox[0] == E1::kCBox[0] && E0::kCBox[1] == E1::kCBox[1] &&                            \
                      E0::kCBoxDims[0] == E1::kCBoxDims[0] && E0::kCBoxDims[1] == E1::kCBoxDims[1] &&            \
                      E0::kCSwizzle == E1::kCSwizzle && E0::kCTypeF16 == E1::kCTypeF16 &&                        \
                      E0::kCTypeBf16 == E1::kCTypeBf16, "one C tensor map for both parts");                      \
        __device__ static __forceinline__ void store_f32(const float (&acc)[kRegs], float* tile,                 \
                                                         const long long (&strides)[2], void* s, unsigned tid) { \
            E0::store_f32(gemm_hopper::regs_part<0, E0::kRegs>(acc), tile, strides, s, tid);                     \
            E1::store_f32(gemm_hopper::regs_part<E0::kRegs, E1::kRegs>(acc), tile + E0::BN * strides[1], strides, s, \
                          tid);                                                                                  \
        }                                                                                                        \
        __device__ static __forceinline__ void store_f32_masked(const float (&acc)[kRegs], float* tile,          \
                                                                const long long (&strides)[2],                   \
                                                                const int (&extent)[2], void* s, unsigned tid) { \
            const int extent1[2] = {extent[0], extent[1] - E0::BN};  /* <= 0: the part lies past N, all masked */ \
            E0::store_f32_masked(gemm_hopper::regs_part<0, E0::kRegs>(acc), tile, strides, extent, s, tid);      \
            E1::store_f32_masked(gemm_hopper::regs_part<E0::kRegs, E1::kRegs>(acc), tile + E0::BN * strides[1],  \
                                 strides, extent1, s, tid);                                                      \
        }                                                                                                        \
        __device__ static __forceinline__ void stage(const uint16_t (&out)[kRegs], void* c_tile, unsigned tid) { \
            E0::stage(gemm_hopper::regs_part<0, E0::kRegs>(out), c_tile, tid);                                   \
            E1::stage(gemm_hopper::regs_part<E0::kRegs, E1::kRegs>(out), static_cast<unsigned char*>(c_tile) +   \
                      E0::C_BYTES, tid);                                                                         \
        }                                                                                                        \
        /* a part wholly past N is a box TMA clips away entirely: it writes nothing */                           \
        template <bool kBf16>                                                                                    \
        __device__ static __forceinline__ void tma_store(const CUtensorMap* map, const int (&cc)[2],             \
                                                         const void* c_tile) {                                   \
            const int cc1[2] = {cc[0], cc[1] + E0::BN};                                                          \
            E0::template tma_store<kBf16>(map, cc, c_tile);                                                      \
            E1::template tma_store<kBf16>(map, cc1, static_cast<const unsigned char*>(c_tile) + E0::C_BYTES);    \
        }                                                                                                        \
        static inline CUresult encode_c(CUtensorMap* map, int out, const void* C, int M, int N) {                \
            return E0::encode_c(map, out, C, M, N);                                                              \
        }                                                                                                        \
    };

namespace gemm_hopper {
LLGEN_GEMM_HOPPER_EPILOGUE(Epi256, gemm_wgmma_store_f32, gemm_wgmma_stage_c, gemm_wgmma_tma_c_f16, gemm_wgmma_tma_c_bf16)
LLGEN_GEMM_HOPPER_EPILOGUE(Epi128, gemm_wgmma_store_f32_n128, gemm_wgmma_stage_c_n128, gemm_wgmma_tma_c_f16_n128,
                           gemm_wgmma_tma_c_bf16_n128)
LLGEN_GEMM_HOPPER_EPILOGUE(Epi64, gemm_wgmma_store_f32_n64, gemm_wgmma_stage_c_n64, gemm_wgmma_tma_c_f16_n64,
                           gemm_wgmma_tma_c_bf16_n64)
LLGEN_GEMM_HOPPER_EPILOGUE_PAIR(Epi192, Epi128, Epi64)
}  // namespace gemm_hopper

#if !defined(__CUDACC_RTC__) && !defined(LLGEN_HOST_SIMT)
namespace gemm_hopper {
// The tail's workspace for plan p (none when p.splits is 1): the counters, zeroed (the CTA completing
// a tile zeroes its counter again, so they stay zero between launches), then the partial tiles
// (256-byte aligned), in one allocation *mem.  Launches sharing a workspace must not overlap (one
// stream).  Returns 0 or a cudaError_t.
inline int allocate_work(const Plan& p, void** mem, Work* w) {
    *mem = nullptr;
    *w = Work{p.dp, p.shares, nullptr, nullptr};
    if (p.shares == 0) return 0;
    const size_t counters = (static_cast<size_t>(p.counters) * sizeof(int) + 255) / 256 * 256;
    if (cudaError_t e = cudaMalloc(mem, counters + static_cast<size_t>(p.workspace) * sizeof(float))) return e;
    if (cudaError_t e = cudaMemset(*mem, 0, counters)) return e;
    if (cudaError_t e = cudaStreamSynchronize(0)) return e;  // zero before a launch on any stream
    w->count = static_cast<int*>(*mem);
    w->partial = reinterpret_cast<float*>(static_cast<char*>(*mem) + counters);
    return 0;
}
// The plan of an (M, N, K) GEMM of k-step kK on the current device (bn: 0 to choose; splits: 0 to
// choose, 1 none, S >= 2 every tile in S ranges, STREAM_K; with192: whether the kernel has 128 x 192
// tiles).
inline int device_plan(Plan* p, int M, int N, int K, int kK, int bn, int splits, bool with192 = true) {
    int device = 0, sms = 0;
    if (cudaError_t e = cudaGetDevice(&device)) return e;
    if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) return e;
    if ((bn != 0 && bn != 128 && bn != 192 && bn != 256) || (bn == 192 && !with192) ||
        (splits < 0 && splits != STREAM_K) || splits > MAX_SPLITS)
        return cudaErrorInvalidValue;
    *p = plan(M, N, K, kK, sms, PERSISTENT, bn, splits, with192);
    return p->splits > p->ksteps ? cudaErrorInvalidValue : 0;  // a range without a k-step
}
}  // namespace gemm_hopper
#endif

// One operand type of the GEMM as the control above calls it: NAME::load() (one stage: TMA_A's A
// tile at (m0, k0), TMA_B's B tile at (k0, n0), both in the tensors' dim order), NAME::mma() (MMA's
// wgmma over one stage), MMA's fence / commit / wait / register budgets, and NAME::Epi (EPI, the
// epilogue of MMA's C tile shape: gemm_hopper::Epi256 or Epi128; Epi192 is a pair, below).  The assertions are the
// claims the control relies on: TMA writes the tiles wgmma reads (element by element, through the
// headers' index functions), the accumulator is the registers the epilogue headers read.
#define LLGEN_GEMM_HOPPER_OPERANDS(NAME, TMA_A, TMA_B, MMA, EPI)                                                 \
    struct NAME {                                                                                                \
        using Epi = EPI;                                                                                         \
        static constexpr bool kTransposeB = false;                                                               \
        static constexpr int kK = MMA::kK, kN = MMA::kN, kAccRegs = MMA::kAccRegs;                               \
        static constexpr int kBytesA = MMA::kTileBytesA, kBytesB = MMA::kTileBytesB, kStageBytes = kBytesA + kBytesB; \
        static constexpr int kTxBytesA = TMA_A::kTxBytes, kTxBytes = TMA_A::kTxBytes + TMA_B::kTxBytes;          \
        static_assert(MMA::kM == EPI::BM && MMA::kN == EPI::BN &&                                                \
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
        static_assert(kAccRegs == EPI::kRegs && gemm_hopper::same_regs(kAccRegs, MMA::acc_index, EPI::src_index), \
                      "the epilogue stores the registers the mma fills");                                        \
        /* the element index k * kN + n of element offset o of the B tile wgmma reads */                       \
        __host__ __device__ static constexpr int b_tile_index(int o) { return MMA::b_tile_index(o); }           \
        __device__ static __forceinline__ void load_a(const CUtensorMap* a, int m0, int k0, unsigned char* stage, \
                                                      uint64_t* bar) {                                           \
            const int ca[2] = {m0, k0};                                                                          \
            TMA_A::load(a, ca, stage, bar);                                                                      \
        }                                                                                                        \
        __device__ static __forceinline__ void load(const CUtensorMap* a, const CUtensorMap* b, int m0, int n0,  \
                                                    int k0, unsigned char* stage, uint64_t* bar) {               \
            const int cb[2] = {k0, n0};                                                                          \
            load_a(a, m0, k0, stage, bar);                                                                       \
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

// One operand type of a two-part tile (columns 0 .. MMA0::kN - 1, then MMA1::kN more) as the control
// calls it: the same members as LLGEN_GEMM_HOPPER_OPERANDS.  A stage holds the A tile both parts read,
// then the B tile as TMA_B's tiles (kK x W each, W columns) at n0, n0 + W, ..: the first MMA0::kN / W
// of them are MMA0's B tile, the rest MMA1's.  One commit group holds both parts' wgmma.  EPI: an
// LLGEN_GEMM_HOPPER_EPILOGUE_PAIR whose parts store MMA0's and MMA1's registers.  The assertions: TMA
// writes the tiles both wgmma read (BParts: element by element), each part's accumulator is the
// registers its epilogue reads.
#define LLGEN_GEMM_HOPPER_OPERANDS_PAIR(NAME, TMA_A, TMA_B, MMA0, MMA1, EPI)                                     \
    struct NAME {                                                                                                \
        using Epi = EPI;                                                                                         \
        static constexpr bool kTransposeB = false;                                                               \
        static constexpr int kK = MMA0::kK, kAccRegs = MMA0::kAccRegs + MMA1::kAccRegs;                          \
        static constexpr int W = TMA_B::kShape[1], kPartsB = (MMA0::kN + MMA1::kN) / W;                          \
        static constexpr int kBytesA = MMA0::kTileBytesA, kBytesB0 = MMA0::kTileBytesB;                          \
        static constexpr int kStageBytes = kBytesA + MMA0::kTileBytesB + MMA1::kTileBytesB;                      \
        static constexpr int kTxBytes = TMA_A::kTxBytes + kPartsB * TMA_B::kTxBytes;                             \
        static_assert(MMA1::kK == kK && MMA1::kM == MMA0::kM && MMA1::kTileBytesA == kBytesA &&                  \
                      MMA0::kThreads == gemm_hopper::CONSUMERS * 128 && MMA1::kThreads == MMA0::kThreads &&      \
                      MMA0::kM == EPI::BM && MMA0::kN == EPI::Part0::BN && MMA1::kN == EPI::Part1::BN,           \
                      #MMA0 " + " #MMA1 ": the two parts of the C tile of two consumer groups");                 \
        static_assert(TMA_A::kShape[0] == MMA0::kM && TMA_A::kShape[1] == kK && TMA_B::kShape[0] == kK &&         \
                      MMA0::kN % W == 0 && MMA1::kN % W == 0 && TMA_A::kTileBytes == kBytesA &&                  \
                      MMA0::kTileBytesB == MMA0::kN / W * TMA_B::kTileBytes &&                                   \
                      MMA1::kTileBytesB == MMA1::kN / W * TMA_B::kTileBytes && kTxBytes == kStageBytes,          \
                      "tile shapes and bytes");                                                                  \
        static_assert(MMA0::kTileAlignA <= gemm_hopper::ALIGN && MMA0::kTileAlignB <= gemm_hopper::ALIGN &&      \
                      MMA1::kTileAlignB <= gemm_hopper::ALIGN && TMA_A::kTileAlign <= gemm_hopper::ALIGN &&      \
                      TMA_B::kTileAlign <= gemm_hopper::ALIGN && kBytesA % gemm_hopper::ALIGN == 0 &&            \
                      TMA_B::kTileBytes % gemm_hopper::ALIGN == 0 && kStageBytes % gemm_hopper::ALIGN == 0,      \
                      "every tile starts kTileAlign-aligned");                                                   \
        static_assert(gemm_hopper::same_tile(MMA0::kM * kK, TMA_A::tile_index, MMA0::a_tile_index) &&            \
                      gemm_hopper::same_tile(MMA0::kM * kK, TMA_A::tile_index, MMA1::a_tile_index) &&            \
                      gemm_hopper::same_tile(kK * MMA0::kN, gemm_hopper::BParts{TMA_B::tile_index, kK, W, MMA0::kN}, \
                                             MMA0::b_tile_index) &&                                              \
                      gemm_hopper::same_tile(kK * MMA1::kN, gemm_hopper::BParts{TMA_B::tile_index, kK, W, MMA1::kN}, \
                                             MMA1::b_tile_index),                                                \
                      "TMA writes the A and B tiles both parts' wgmma read");                                    \
        static_assert(kAccRegs == EPI::kRegs &&                                                                  \
                      gemm_hopper::same_regs(MMA0::kAccRegs, MMA0::acc_index, EPI::Part0::src_index) &&          \
                      gemm_hopper::same_regs(MMA1::kAccRegs, MMA1::acc_index, EPI::Part1::src_index),            \
                      "each part's epilogue stores the registers its mma fills");                                \
        __device__ static __forceinline__ void load(const CUtensorMap* a, const CUtensorMap* b, int m0, int n0,  \
                                                    int k0, unsigned char* stage, uint64_t* bar) {               \
            const int ca[2] = {m0, k0};                                                                          \
            TMA_A::load(a, ca, stage, bar);                                                                      \
            _Pragma("unroll") for (int p = 0; p < kPartsB; ++p) {                                                \
                const int cb[2] = {k0, n0 + p * W};                                                              \
                TMA_B::load(b, cb, stage + kBytesA + p * TMA_B::kTileBytes, bar);                                \
            }                                                                                                    \
        }                                                                                                        \
        __device__ static __forceinline__ void mma(float (&acc)[kAccRegs], const unsigned char* stage,           \
                                                   unsigned tid) {                                               \
            MMA0::mma(gemm_hopper::regs_part<0, MMA0::kAccRegs>(acc), stage, stage + kBytesA, 1, tid);           \
            MMA1::mma(gemm_hopper::regs_part<MMA0::kAccRegs, MMA1::kAccRegs>(acc), stage, stage + kBytesA + kBytesB0, \
                      1, tid);                                                                                   \
        }                                                                                                        \
        __device__ static __forceinline__ void fence() { MMA0::fence(); }                                        \
        __device__ static __forceinline__ void commit() { MMA0::commit(); }                                      \
        template <int N>                                                                                         \
        __device__ static __forceinline__ void wait() { MMA0::wait<N>(); }                                       \
        __device__ static __forceinline__ void wait_acc(float (&acc)[kAccRegs]) {                                \
            MMA0::wait_acc(gemm_hopper::regs_part<0, MMA0::kAccRegs>(acc));                                      \
            MMA1::wait_acc(gemm_hopper::regs_part<MMA0::kAccRegs, MMA1::kAccRegs>(acc));                         \
        }                                                                                                        \
        template <int R>                                                                                         \
        __device__ static __forceinline__ void regs_dec() { MMA0::regs_dec<R>(); }                               \
        template <int R>                                                                                         \
        __device__ static __forceinline__ void regs_inc() { MMA0::regs_inc<R>(); }                               \
    };

// An operand type BASE (LLGEN_GEMM_HOPPER_OPERANDS) with B given K x N, N contiguous: TMA_B lands the
// stage's B tile as kN / W parts of kK x W (W: TMA_B's columns) side by side, each N-contiguous
// (MN-major), in the bytes where BASE's K-major B tile goes; RELAYOUT rewrites each part in place into
// the K-major part wgmma reads, by the producer warp group (every thread's loads, a rendezvous of the
// 128, every store; gemm_hopper::produce_transposing runs it).  A lands on the stage's `full` barrier,
// B on its `landed` one; the wgmma, its accumulator and the epilogue are BASE's.  The assertions: TMA
// writes the parts the relayout reads, the relayout writes the tile wgmma reads (element by element,
// BParts), and its loads fill the registers its stores take, so the two may be split by the rendezvous.
#define LLGEN_GEMM_HOPPER_OPERANDS_KN(NAME, BASE, TMA_B, RELAYOUT)                                               \
    struct NAME : BASE {                                                                                         \
        static constexpr bool kTransposeB = true;                                                                \
        static constexpr int W = TMA_B::kShape[1], kPartsB = BASE::kN / W;                                       \
        static constexpr int kTxBytesB = kPartsB * TMA_B::kTxBytes;                                              \
        static_assert(TMA_B::kShape[0] == BASE::kK && BASE::kN % W == 0 &&                                      \
                      kPartsB * TMA_B::kTileBytes == BASE::kBytesB && BASE::kTxBytesA + kTxBytesB == BASE::kStageBytes && \
                      RELAYOUT::kSrcTileBytes == TMA_B::kTileBytes && RELAYOUT::kDstTileBytes == TMA_B::kTileBytes, \
                      #TMA_B ": its parts fill the stage's B tile");                                            \
        static_assert(TMA_B::kTileAlign <= gemm_hopper::ALIGN && RELAYOUT::kSrcTileAlign <= gemm_hopper::ALIGN && \
                      RELAYOUT::kDstTileAlign <= gemm_hopper::ALIGN && TMA_B::kTileBytes % gemm_hopper::ALIGN == 0, \
                      "every part starts kTileAlign-aligned");                                                   \
        static_assert(RELAYOUT::kThreads == 128 && RELAYOUT::src::kWords == RELAYOUT::dst::kWords &&             \
                      gemm_hopper::same_regs(RELAYOUT::src::kRegs, RELAYOUT::src::dst_index,                     \
                                             RELAYOUT::dst::src_index, 4),                                       \
                      #RELAYOUT ": the producer warp group; its stores take the registers its loads fill");      \
        static_assert(gemm_hopper::same_tile(BASE::kK * W, TMA_B::tile_index, RELAYOUT::src_tile_index) &&       \
                      gemm_hopper::same_tile(BASE::kK * BASE::kN,                                                \
                                             gemm_hopper::BParts{RELAYOUT::dst_tile_index, BASE::kK, W, BASE::kN}, \
                                             BASE::b_tile_index),                                                \
                      "TMA writes the parts the relayout reads; the relayout writes the B tile wgmma reads");    \
        __device__ static __forceinline__ void load_b(const CUtensorMap* b, int k0, int n0, unsigned char* stage, \
                                                      uint64_t* bar) {                                           \
            _Pragma("unroll") for (int p = 0; p < kPartsB; ++p) {                                                \
                const int cb[2] = {k0, n0 + p * W};                                                              \
                TMA_B::load(b, cb, stage + BASE::kBytesA + p * TMA_B::kTileBytes, bar);                          \
            }                                                                                                    \
        }                                                                                                        \
        /* B's parts in the stage, MN-major -> K-major in place, by the 128 producer threads (tid); */          \
        /* rendezvous(): every producer thread has loaded the part (then it may be overwritten). */              \
        template <class Rendezvous>                                                                              \
        __device__ static __forceinline__ void transpose_b(unsigned char* stage, unsigned tid,                   \
                                                           Rendezvous&& rendezvous) {                            \
            _Pragma("unroll 1") for (int p = 0; p < kPartsB; ++p) {                                              \
                unsigned char* const part = stage + BASE::kBytesA + p * TMA_B::kTileBytes;                       \
                uint32_t w[RELAYOUT::src::kWords];                                                               \
                RELAYOUT::src::load_words(part, w, tid);                                                         \
                rendezvous();                                                                                    \
                RELAYOUT::dst::store_words(w, part, tid);                                                        \
            }                                                                                                    \
        }                                                                                                        \
    };
