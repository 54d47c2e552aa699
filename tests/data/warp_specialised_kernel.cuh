// A warp-specialised block around a generated conversion and reduction: the first
// LLGEN_PRODUCER_THREADS threads are a "producer" warp group that never calls the headers; the
// kThreads threads after them are the consumers and call them with tid = threadIdx.x - producers.
// Included after the generated headers of namespaces CVT (llgen convert) and RED (llgen reduce);
// the host SIMT runtime (tests/test_named_barriers.py) and the GPU (gpu_tests/test_named_barriers.py)
// run this same kernel.  With a named barrier over the consumers it must be bit-exact.  With the
// headers' block barriers as __syncthreads() the producers never arrive at barrier 0: the host
// runtime reports it (exited threads, or a deadlock); on the GPU mode 1 reports a timeout (an H200
// counts exited warps at barrier 0, so mode 0 finishes there).
//
// LLGEN_PRODUCER_MODE 0: the producers exit at once.  1: they stay busy until the consumers have
// finished the call (on the host: named barrier 15, which the consumers join after the call; on
// the GPU: a bounded spin on a flag the consumers set, giving up after ~2^31 cycles and reporting
// it, so that a regression to __syncthreads() fails instead of hanging).
//
// Element bits: element i of the source tensor is llgen_value(i); the conversion must deliver
// dst[r] = llgen_value(dst_index(r, lane, warp)); the reduction sums small integers as f32 (exact),
// so its result is known in closed form.  wrong[tid] counts a consumer's mismatches.
#pragma once
#ifndef LLGEN_PRODUCER_THREADS
#define LLGEN_PRODUCER_THREADS 128
#endif
#ifndef LLGEN_PRODUCER_MODE
#define LLGEN_PRODUCER_MODE 0
#endif

__device__ __forceinline__ unsigned llgen_value(unsigned i) { return (i * 2654435761u) >> 9; }
__device__ __forceinline__ float llgen_small(unsigned i) { return float((i * 7u) % 13u); }

template <int kBytes> struct LlgenBits;
template <> struct LlgenBits<1> { typedef unsigned char type; };
template <> struct LlgenBits<2> { typedef unsigned short type; };
template <> struct LlgenBits<4> { typedef unsigned int type; };

// The producers' part (threadIdx.x < LLGEN_PRODUCER_THREADS); `done` is set by consumer 0 at its end.
__device__ __forceinline__ void llgen_producers(volatile unsigned* done, unsigned* timed_out, int consumers) {
#if LLGEN_PRODUCER_MODE == 1
#if defined(LLGEN_HOST_SIMT)
    (void)done, (void)timed_out;
    llgen_host::named_barrier(15, LLGEN_PRODUCER_THREADS + consumers);  // until the consumers are through
#else
    (void)consumers;
    const long long start = clock64();
    while (*done == 0) {
        if (clock64() - start > (1ll << 31)) {  // the consumers never finished: report, do not hang
            *timed_out = 1;
            return;
        }
    }
#endif
#else
    (void)done, (void)timed_out, (void)consumers;
#endif
}

// The consumers' end: the producers may go on.
__device__ __forceinline__ void llgen_consumers_done(volatile unsigned* done, int tid, int consumers) {
#if LLGEN_PRODUCER_MODE == 1 && defined(LLGEN_HOST_SIMT)
    (void)done, (void)tid;
    llgen_host::named_barrier(15, LLGEN_PRODUCER_THREADS + consumers);
#else
    (void)consumers;
    if (tid == 0) *done = 1;
#endif
}

extern "C" __global__ void ws_convert(unsigned* wrong, unsigned* done, unsigned* timed_out) {
    extern __shared__ __align__(16) unsigned char smem[];
    if (threadIdx.x < LLGEN_PRODUCER_THREADS) {
        llgen_producers(done, timed_out, CVT::kThreads);
        return;
    }
    const int tid = int(threadIdx.x) - LLGEN_PRODUCER_THREADS, lane = tid % 32, warp = tid / 32;
    typedef typename LlgenBits<CVT::kElemBytes>::type T;
    T src[CVT::kSrcRegs], dst[CVT::kDstRegs];
    for (int r = 0; r < CVT::kSrcRegs; ++r) src[r] = T(llgen_value(unsigned(CVT::src_index(r, lane, warp))));
    CVT::convert(src, dst, smem, tid);
    unsigned bad = 0;
    for (int r = 0; r < CVT::kDstRegs; ++r) bad += dst[r] != T(llgen_value(unsigned(CVT::dst_index(r, lane, warp))));
    wrong[tid] = bad;
    llgen_consumers_done(done, tid, CVT::kThreads);
}

// RED reduces dim 0 of a rows x cols tensor (f32 sums of small integers: exact in any order).
extern "C" __global__ void ws_reduce(unsigned* wrong, unsigned* done, unsigned* timed_out, int rows, int cols) {
    extern __shared__ __align__(16) unsigned char smem[];
    if (threadIdx.x < LLGEN_PRODUCER_THREADS) {
        llgen_producers(done, timed_out, RED::kThreads);
        return;
    }
    const int tid = int(threadIdx.x) - LLGEN_PRODUCER_THREADS, lane = tid % 32, warp = tid / 32;
    float src[RED::kSrcRegs], dst[RED::kDstRegs];
    for (int r = 0; r < RED::kSrcRegs; ++r) src[r] = llgen_small(unsigned(RED::src_index(r, lane, warp)));
    RED::reduce(src, dst, smem, RED::Sum(), tid);
    unsigned bad = 0;
    for (int r = 0; r < RED::kDstRegs; ++r) {
        const int col = RED::dst_index(r, lane, warp);
        float want = 0.0f;
        for (int row = 0; row < rows; ++row) want += llgen_small(unsigned(row * cols + col));
        bad += dst[r] != want;
    }
    wrong[tid] = bad;
    llgen_consumers_done(done, tid, RED::kThreads);
}
