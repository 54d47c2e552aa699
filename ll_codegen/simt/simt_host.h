// Host SIMT runtime: enough of CUDA and HIP to run ll_codegen's generated
// headers and harnesses, unchanged, on the CPU.
//
//   clang++ -std=c++17 -x c++ -I ll_codegen/simt -include simt_host.h driver.cpp
//
// (`<cuda_runtime.h>` and `<hip/hip_runtime.h>` in this folder include this
// file.)  One block runs at a time; each of its threads is a fiber (ucontext)
// on the calling OS thread, scheduled round-robin until it blocks:
//
// * `__syncthreads()` releases when every live thread of the block waits;
//   a named barrier (`bar.sync id, threads`, `named_barrier`) when whole warps
//   totalling `threads` threads wait at `id`, and orders the shared-memory
//   accesses of exactly those threads (see "named barriers" below);
//   `__syncwarp()` and every warp-collective instruction (shuffles, ldmatrix,
//   stmatrix) complete when every live lane of the warp has issued the same
//   one -- anything else is reported as divergence or deadlock.
// * Shuffles follow the vendors' semantics: NVIDIA `__shfl_sync` /
//   `__shfl_xor_sync` (member mask checked: it must hold every live lane of
//   the warp, `width` segments, 5-bit source-lane wrap, out-of-segment xor
//   lanes read their own value); AMD `__shfl` / `__shfl_xor` (ds_bpermute:
//   source lane modulo the wave size, wave64 and wave32).
// * Shared memory is one buffer per block, accessed only through the named
//   target-instruction wrappers of the generated headers (ld/st.shared,
//   ldmatrix/stmatrix with the PTX ISA fragment layout, LDS accesses).  Every
//   byte keeps a shadow (last writer and reader with their barrier
//   intervals): a read of a byte another thread wrote in the same barrier
//   interval, a write of a byte another thread read or wrote in it, a read of a
//   byte never written, a misaligned or out-of-bounds access -- each is an
//   error, as racecheck/initcheck/memcheck would report.
// * `cp.async` copies land when a `cp.async.wait_group` of the issuing thread covers their
//   committed group, as on the GPU: until then their shared bytes keep their old contents, and a
//   read (or another write) of them is reported; a copy never waited for is reported at exit.
// * Constructs it does not model do not compile: inline `asm`, `__shared__`
//   variables other than the `extern` dynamic buffer, unknown intrinsics -- and in HIP code
//   (`<hip/hip_runtime.h>`) CUDA's warp-level intrinsics (`__syncwarp`, `__shfl_*_sync`), which
//   hipcc does not have either.
// * Hopper's asynchronous operations (mbarrier, TMA through `<cuda.h>`'s tensor
//   maps, wgmma, mma.sync) are modelled in hopper.h, included at the end, and
//   AMD's MFMA (v_mfma_*) in hip/mfma.h after it.
#pragma once
#define LLGEN_HOST_SIMT 1

#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// Only `extern __shared__` (the dynamic buffer, defined by the host driver) is
// modelled; a section attribute on a local variable does not compile.
#define __shared__ __attribute__((section(".llgen_dynamic_shared_only")))

namespace llgen_host {

struct Dim3 {
    unsigned x = 0, y = 0, z = 0;
};

// kAsyncWait: blocked in mbarrier_try_wait_parity until the barrier completes a phase (hopper.h)
// kNamedBarrier: waiting at a named barrier (bar.sync id, threads) until its count arrives
enum class State { kRunnable, kBlockBarrier, kWarpOp, kDone, kAsyncWait, kNamedBarrier };
enum class WarpOp {
    kNone, kSyncWarp, kShflIdx, kShflXor, kAmdShfl, kAmdShflXor, kLdMatrix, kStMatrix, kWgmma, kMmaSync, kMfma
};

// A fiber's stack.  Left uninitialised: zeroing it (std::vector) wrote every page of every fiber's
// stack at each launch, most of a short harness run; untouched pages stay unmapped.
constexpr size_t kStackBytes = 256 * 1024;

struct Fiber {
    ucontext_t ctx;
    std::unique_ptr<char[]> stack;
    Dim3 tid;
    State state = State::kRunnable;
    // the warp operation this lane waits in, and its operands / result
    WarpOp op = WarpOp::kNone;
    uint64_t value = 0, result = 0;
    unsigned arg = 0, mask = 0, width = 0, bytes = 0;
    int x = 0;
    bool trans = false;
    uint32_t words[4] = {0, 0, 0, 0};
    unsigned bar_id = 0, bar_threads = 0;  // the named barrier this thread waits at, and its count
    uint64_t clk = 1;  // this thread's clock: stamps its shared accesses, advanced by mbarrier arrivals (hopper.h)
    // cp.async: copies issued since the last commit, and committed groups not yet waited for (oldest first)
    struct AsyncCopy {
        unsigned addr, bytes;
        unsigned char data[16];
    };
    std::vector<AsyncCopy> cp_pending;
    std::vector<std::vector<AsyncCopy>> cp_groups;
};

struct Shadow {  // one shared-memory byte
    int writer = -1, reader = -1;
    uint64_t write_epoch = 0, read_epoch = 0, write_wepoch = 0, read_wepoch = 0;
    uint64_t write_clk = 0, read_clk = 0;  // the accessing thread's clock (hopper.h: ordering through mbarriers)
    int async = -1;                        // >= 0: the last write was this asynchronous (TMA) copy's (hopper.h)
    int inflight = 0, copier = -1;         // cp.async copies into this byte not landed yet, and the last issuer
    int tma_reads = 0;                     // TMA stores and wgmma in flight that still read this byte (hopper.h)
};

struct HopperState;  // hopper.h: mbarriers, asynchronous copies, warpgroup operands

struct Block {
    std::vector<Fiber> fibers;
    int current = -1;
    ucontext_t sched;
    Dim3 dim, bid, grid;
    int warp_size = 32;
    unsigned char* shared = nullptr;
    size_t shared_bytes = 0;
    uint64_t epoch = 1;                 // block barrier intervals
    std::vector<uint64_t> warp_epoch;   // __syncwarp intervals per warp
    std::vector<Shadow> shadow;
    std::vector<std::string> errors;
    std::function<void()> kernel;
    std::shared_ptr<HopperState> hopper;  // created by the first Hopper operation
};

inline Block* g_block = nullptr;

inline Fiber& self() { return g_block->fibers[g_block->current]; }
inline int self_id() { return g_block->current; }

inline void error(const std::string& what) {
    auto& e = g_block->errors;
    if (e.size() < 8 && std::find(e.begin(), e.end(), what) == e.end()) e.push_back(what);
}

inline std::string where(int t) {
    const Dim3 &b = g_block->bid, &g = g_block->grid;  // the block, when a grid of several runs
    return "thread " + std::to_string(t) + " (warp " + std::to_string(t / g_block->warp_size) + ", lane " +
           std::to_string(t % g_block->warp_size) + (g.x * g.y * g.z > 1 ? ", block (" + std::to_string(b.x) + ", " +
           std::to_string(b.y) + ", " + std::to_string(b.z) + ")" : std::string()) + ")";
}

inline void yield_to_scheduler() { swapcontext(&self().ctx, &g_block->sched); }

// ------------------------------------------------------------ shared memory
inline bool ordered(int t, uint64_t epoch, uint64_t wepoch, int now) {
    // an access of thread t in (epoch, wepoch) happens before thread `now`'s
    if (t < 0 || t == now) return true;
    Block& b = *g_block;
    if (epoch < b.epoch) return true;
    int w = t / b.warp_size;
    return w == now / b.warp_size && wepoch < b.warp_epoch[w];
}

// hopper.h: ordering through mbarrier release/acquire, and the asynchronous proxy's writes
inline bool synced(int t, uint64_t clk, int now);
inline bool async_visible(int id, int now);
inline void block_synced();
inline void warp_synced(int w0, int lanes);
inline void async_exit_check();
inline std::string async_reader(unsigned addr);  // "<who> still reads (<what would order it>)"
inline bool parity_explains(int t);              // reports t's wrong-parity mbarrier wait behind a race
inline bool hopper_warp_op(int w0, int lanes, WarpOp op);
inline std::string deadlock_detail();
inline void named_synced(const std::vector<int>& members);  // defined after hopper.h: its clocks

// does the byte's last write (read) happen before thread `now`'s access?
inline bool write_before(const Shadow& s, int now) {
    if (s.async >= 0) return async_visible(s.async, now);
    return ordered(s.writer, s.write_epoch, s.write_wepoch, now) || synced(s.writer, s.write_clk, now);
}
inline bool read_before(const Shadow& s, int now) {
    return ordered(s.reader, s.read_epoch, s.read_wepoch, now) || synced(s.reader, s.read_clk, now);
}

inline bool check_range(const char* what, unsigned addr, unsigned bytes, unsigned align, int t) {
    Block& b = *g_block;
    if (addr % align) {
        error(where(t) + ": " + what + " at shared address " + std::to_string(addr) + " is not " +
              std::to_string(align) + "-byte aligned");
        return false;
    }
    if (size_t(addr) + bytes > b.shared_bytes) {
        error(where(t) + ": " + what + " of " + std::to_string(bytes) + " bytes at shared address " +
              std::to_string(addr) + " is outside the " + std::to_string(b.shared_bytes) + "-byte buffer");
        return false;
    }
    return true;
}

inline void shared_write(unsigned addr, const void* src, unsigned bytes, unsigned align, int t) {
    Block& b = *g_block;
    if (!check_range("store", addr, bytes, align, t)) return;
    uint64_t we = b.warp_epoch[t / b.warp_size];
    const size_t before = b.errors.size();
    for (unsigned i = 0; i < bytes; ++i) {
        Shadow& s = b.shadow[addr + i];
        unsigned char v = static_cast<const unsigned char*>(src)[i];
        if (b.errors.size() > before) {  // one report per access and conflict, not one per byte
        } else if (s.inflight)
            error("race: " + where(t) + " writes shared byte " + std::to_string(addr + i) + " that a cp.async of " +
                  where(s.copier) + " still copies into (no cp.async.wait_group covers it)");
        else if (s.tma_reads)
            error("race: " + where(t) + " writes shared byte " + std::to_string(addr + i) + " that " +
                  async_reader(addr + i));
        // threads holding broadcast copies store the same value: benign, as for racecheck
        else if (!write_before(s, t) && b.shared[addr + i] != v) {
            if (!parity_explains(t))
                error("race: " + where(t) + " writes shared byte " + std::to_string(addr + i) + " that " +
                      where(s.writer) + " wrote (another value) in the same barrier interval");
        } else if (!read_before(s, t) && !parity_explains(t))
            error("race: " + where(t) + " writes shared byte " + std::to_string(addr + i) + " that " +
                  where(s.reader) + " read in the same barrier interval");
        s.writer = t;
        s.write_epoch = b.epoch;
        s.write_wepoch = we;
        s.write_clk = b.fibers[t].clk;
        s.async = -1;
    }
    std::memcpy(b.shared + addr, src, bytes);
}

inline void shared_read(unsigned addr, void* dst, unsigned bytes, unsigned align, int t) {
    Block& b = *g_block;
    if (!check_range("load", addr, bytes, align, t)) {
        std::memset(dst, 0, bytes);
        return;
    }
    uint64_t we = b.warp_epoch[t / b.warp_size];
    const size_t before = b.errors.size();
    for (unsigned i = 0; i < bytes; ++i) {
        Shadow& s = b.shadow[addr + i];
        if (b.errors.size() > before) {  // one report per access and conflict, not one per byte
        } else if (s.inflight)
            error(where(t) + " reads shared byte " + std::to_string(addr + i) + " before the cp.async of " +
                  where(s.copier) + " landed there (no cp.async.wait_group covers it): stale data");
        else if (s.writer < 0)
            error(where(t) + " reads shared byte " + std::to_string(addr + i) +
                  " before any thread wrote it (uninitialised, or a missing barrier)");
        else if (!write_before(s, t) && !parity_explains(t))
            error("race: " + where(t) + " reads shared byte " + std::to_string(addr + i) + " that " +
                  where(s.writer) + " wrote in the same barrier interval");
        s.reader = t;
        s.read_epoch = b.epoch;
        s.read_wepoch = we;
        s.read_clk = b.fibers[t].clk;
    }
    std::memcpy(dst, b.shared + addr, bytes);
}

// ld/st.shared of 1, 2, 4, 8 or 16 bytes; words are 32-bit registers (sub-word: low bits)
inline void st_shared(unsigned addr, unsigned bytes, uint32_t* const* words) {
    unsigned char buf[16];
    for (unsigned i = 0; i < (bytes + 3) / 4; ++i) std::memcpy(buf + 4 * i, words[i], bytes < 4 ? bytes : 4);
    shared_write(addr, buf, bytes, bytes, self_id());
}

inline void ld_shared(unsigned addr, unsigned bytes, uint32_t* const* words) {
    unsigned char buf[16] = {0};
    shared_read(addr, buf, bytes, bytes, self_id());
    for (unsigned i = 0; i < (bytes + 3) / 4; ++i) {
        uint32_t w = 0;
        std::memcpy(&w, buf + 4 * i, bytes < 4 ? bytes : 4);
        *words[i] = w;  // sub-word loads zero-extend (ld.shared.b8/b16 into a 32-bit register)
    }
}

// Global memory the program allocated through llgen_host::device_malloc (llgen_host.h): [begin, end)
// ranges.  When any is registered, every global access of generated code must fall inside one.
inline std::vector<std::pair<uintptr_t, uintptr_t>>& global_buffers() {
    static std::vector<std::pair<uintptr_t, uintptr_t>> buffers;
    return buffers;
}

inline std::string hex_address(const void* p) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%#llx", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p)));
    return buf;
}

// ld/st.global of 1, 2, 4, 8 or 16 bytes through a generic pointer (global
// memory is host memory here; the checks are the hardware's alignment rule and, for
// registered buffers, memcheck's bounds)
inline bool global_aligned(const char* what, const void* p, unsigned bytes) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    if (a % bytes) {
        error(where(self_id()) + ": " + what + " of " + std::to_string(bytes) + " bytes at a global address that is "
              "not " + std::to_string(bytes) + "-byte aligned");
        return false;
    }
    const auto& bufs = global_buffers();
    if (bufs.empty() || std::any_of(bufs.begin(), bufs.end(), [&](const auto& r) {
            return a >= r.first && a + bytes <= r.second; }))
        return true;
    error(where(self_id()) + ": " + what + " of " + std::to_string(bytes) + " bytes at " + hex_address(p) +
          " is outside every allocated global buffer (out of bounds)");
    return false;
}

inline void st_global(char* p, unsigned bytes, uint32_t* const* words) {
    if (!global_aligned("st.global", p, bytes)) return;
    for (unsigned i = 0; i < (bytes + 3) / 4; ++i) std::memcpy(p + 4 * i, words[i], bytes < 4 ? bytes : 4);
}

inline void ld_global(const char* p, unsigned bytes, uint32_t* const* words) {
    if (!global_aligned("ld.global", p, bytes)) return;
    for (unsigned i = 0; i < (bytes + 3) / 4; ++i) {
        uint32_t w = 0;
        std::memcpy(&w, p + 4 * i, bytes < 4 ? bytes : 4);
        *words[i] = w;  // sub-word loads zero-extend
    }
}

// cp.async (sm_80): `bytes` copied global -> shared, the first `src_bytes` read and the rest zeroed.
// PTX ISA "cp.async": the copy is asynchronous; cp.async.commit_group closes the thread's group of
// copies issued since the last one, cp.async.wait_group N returns once at most the N newest groups
// are in flight.  So the source is read at issue, the shared bytes are written when the wait
// covers the copy -- as a write of the issuing thread then (other threads read it after a barrier)
// -- and reading or writing them before is an error (stale bytes on the GPU).
inline void cp_async(unsigned addr, const void* src, unsigned bytes, unsigned src_bytes) {
    int t = self_id();
    Fiber::AsyncCopy c{addr, bytes, {0}};
    if (src_bytes > bytes) src_bytes = bytes;
    if (src_bytes && !global_aligned("cp.async source", src, bytes)) return;
    if (!check_range("cp.async", addr, bytes, bytes, t)) return;
    std::memcpy(c.data, src, src_bytes);
    for (unsigned i = 0; i < bytes; ++i) {
        Shadow& s = g_block->shadow[addr + i];
        ++s.inflight;
        s.copier = t;
    }
    self().cp_pending.push_back(c);
}

// cp.async.commit_group
inline void cp_async_commit() {
    Fiber& f = self();
    f.cp_groups.push_back(std::move(f.cp_pending));
    f.cp_pending.clear();
}

// cp.async.wait_group n: the thread's committed groups but the newest n land, oldest first
inline void cp_async_wait(int n) {
    Fiber& f = self();
    while (f.cp_groups.size() > size_t(n < 0 ? 0 : n)) {
        for (auto& c : f.cp_groups.front()) {
            for (unsigned i = 0; i < c.bytes; ++i) --g_block->shadow[c.addr + i].inflight;
            shared_write(c.addr, c.data, c.bytes, c.bytes, self_id());
        }
        f.cp_groups.erase(f.cp_groups.begin());
    }
}

// LDS accesses of the HIP headers (generic pointers into the block's buffer)
inline unsigned lds_offset(const void* p) {
    return unsigned(static_cast<const unsigned char*>(p) - g_block->shared);
}
inline void st_lds(void* p, const void* v, unsigned bytes) { shared_write(lds_offset(p), v, bytes, bytes, self_id()); }
inline void ld_lds(const void* p, void* v, unsigned bytes) { shared_read(lds_offset(p), v, bytes, bytes, self_id()); }

// ------------------------------------------------------------ warp collectives
inline void warp_op(Fiber& f) {
    f.state = State::kWarpOp;
    yield_to_scheduler();
}

inline void ldmatrix(unsigned addr, int x, bool trans, uint32_t* const* words) {
    Fiber& f = self();
    f.op = WarpOp::kLdMatrix;
    f.arg = addr;
    f.x = x;
    f.trans = trans;
    warp_op(f);
    for (int m = 0; m < x; ++m) *words[m] = f.words[m];
}

inline void stmatrix(unsigned addr, int x, bool trans, uint32_t* const* words) {
    Fiber& f = self();
    f.op = WarpOp::kStMatrix;
    f.arg = addr;
    f.x = x;
    f.trans = trans;
    for (int m = 0; m < x; ++m) f.words[m] = *words[m];
    warp_op(f);
}

// m8n8 b16 matrices (PTX ISA, "Warp-level matrix load/store"): lane 8m + r
// gives the address of row r of matrix m; lane l holds, in register m, the
// elements (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1) of matrix m (low half
// first); .trans exchanges rows and columns of the memory image.
inline void matrix_op(int w0, int lanes) {
    Block& b = *g_block;
    Fiber& f0 = b.fibers[w0];
    int x = f0.x;
    bool trans = f0.trans, store = f0.op == WarpOp::kStMatrix;
    if (lanes < 32) {
        error("ldmatrix/stmatrix needs a 32-lane warp");
        return;
    }
    for (int l = 0; l < 32; ++l) {
        Fiber& f = b.fibers[w0 + l];
        if (f.x != x || f.trans != trans) {
            error("warp divergence: " + where(w0 + l) + " issues a different ldmatrix/stmatrix shape");
            return;
        }
    }
    for (int m = 0; m < x; ++m) {
        for (int r = 0; r < 8; ++r) {
            int provider = w0 + 8 * m + r;
            unsigned row = b.fibers[provider].arg;
            uint16_t e[8];
            if (!store) shared_read(row, e, 16, 16, provider);
            for (int c = 0; c < 8; ++c) {
                // fragment element (i, j) of matrix m lives in lane 4 i + j / 2, half j % 2
                int i = trans ? c : r, j = trans ? r : c;
                Fiber& holder = b.fibers[w0 + 4 * i + j / 2];
                uint32_t& word = holder.words[m];
                int shift = 16 * (j % 2);
                if (store)
                    e[c] = uint16_t(word >> shift);
                else
                    word = (word & ~(0xffffu << shift)) | (uint32_t(e[c]) << shift);
            }
            if (store) shared_write(row, e, 16, 16, provider);
        }
    }
}

template <typename T>
inline T shuffle(WarpOp op, T v, unsigned arg, unsigned width, unsigned mask) {
    static_assert(sizeof(T) <= 8, "shuffles move at most 8 bytes");
    Fiber& f = self();
    f.op = op;
    std::memcpy(&f.value, &v, sizeof(T));
    f.arg = arg;
    f.width = width;
    f.mask = mask;
    f.bytes = sizeof(T);
    warp_op(f);
    T out;
    std::memcpy(&out, &f.result, sizeof(T));
    return out;
}

inline void shuffle_op(int w0, int lanes, WarpOp op) {
    Block& b = *g_block;
    for (int l = 0; l < lanes; ++l) {
        Fiber& f = b.fibers[w0 + l];
        int src = l;
        unsigned width = f.width;
        if (width == 0 || width > unsigned(lanes) || (width & (width - 1))) {
            error(where(w0 + l) + ": shuffle width " + std::to_string(width) + " is not a power of two <= " +
                  std::to_string(lanes));
            return;
        }
        unsigned base = l & ~(width - 1);
        switch (op) {
            case WarpOp::kShflIdx:  // shfl.sync.idx: lane srcLane modulo width, in this lane's segment
                src = int(base + (f.arg & (width - 1)));
                break;
            case WarpOp::kShflXor:  // shfl.sync.bfly: lanes past the segment read their own value
                src = int(l ^ f.arg);
                if (unsigned(src) >= base + width) src = l;
                break;
            case WarpOp::kAmdShfl:  // __shfl: ds_bpermute of ((srcLane & (width-1)) + segment base) * 4
                src = int((base + (f.arg & (width - 1))) % unsigned(lanes));
                break;
            case WarpOp::kAmdShflXor:
                src = int(l ^ f.arg);
                if (unsigned(src) >= ((l + width) & ~(width - 1))) src = l;
                src %= lanes;
                break;
            default:
                break;
        }
        if (op == WarpOp::kShflIdx || op == WarpOp::kShflXor) {
            unsigned full = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1);
            if (f.mask != full) {
                error(where(w0 + l) + ": __shfl*_sync member mask " + std::to_string(f.mask) +
                      " does not name exactly the lanes that execute it");
                return;
            }
        }
        f.result = b.fibers[w0 + src].value;
    }
}

// ------------------------------------------------------------ scheduling
inline void fiber_entry() {
    g_block->kernel();
    self().state = State::kDone;
    swapcontext(&self().ctx, &g_block->sched);
}

inline bool resolve_warps() {
    Block& b = *g_block;
    bool any = false;
    int n = int(b.fibers.size());
    for (int w0 = 0; w0 < n; w0 += b.warp_size) {
        int lanes = std::min(b.warp_size, n - w0);
        int waiting = 0, live = 0;
        for (int l = 0; l < lanes; ++l) {
            State s = b.fibers[w0 + l].state;
            live += s != State::kDone;
            waiting += s == State::kWarpOp;
        }
        if (!waiting || waiting != live) continue;
        if (live != lanes) {
            error("warp " + std::to_string(w0 / b.warp_size) + ": a warp-wide operation with exited lanes");
            return false;
        }
        WarpOp op = b.fibers[w0].op;
        for (int l = 0; l < lanes; ++l)
            if (b.fibers[w0 + l].op != op) {
                error("warp divergence: lanes of warp " + std::to_string(w0 / b.warp_size) +
                      " wait in different warp-wide operations");
                return false;
            }
        if (op == WarpOp::kSyncWarp) {
            ++b.warp_epoch[w0 / b.warp_size];
            warp_synced(w0, lanes);
        } else if (op == WarpOp::kLdMatrix || op == WarpOp::kStMatrix) {
            matrix_op(w0, lanes);
        } else if (op == WarpOp::kWgmma || op == WarpOp::kMmaSync || op == WarpOp::kMfma) {
            if (!hopper_warp_op(w0, lanes, op)) continue;  // a wgmma waits for its whole warpgroup
        } else
            shuffle_op(w0, lanes, op);
        for (int l = 0; l < lanes; ++l) b.fibers[w0 + l].state = State::kRunnable;
        any = true;
    }
    return any;
}

// ------------------------------------------------------------ named barriers
// PTX ISA "bar.sync / barrier.sync": `bar.sync a, b` waits at barrier a (0..15) until b threads
// arrived; barriers count whole warps (b is a multiple of the warp size, and a warp's arrival
// counts warp-size threads), and every thread of a warp executes the same bar.sync.  When the
// count is reached the barrier completes, its waiting threads resume and it resets.  Modelled:
// a warp arrives when every live lane waits at the same id; the barrier completes when the
// arrived warps' threads equal the count; the members' shared-memory accesses before it then
// happen before their accesses after it (a join of their clocks, hopper.h's Knowledge) -- no
// other thread is ordered.  Reported, one line each, naming the barrier, the counts and the
// warps: a count that is not a multiple of the warp size or exceeds the block, threads that
// give different counts for one id in one phase, more warps arriving than the count, and a
// barrier still short of its count when nothing else can run (a warp that never arrives).
inline void named_barrier(unsigned id, unsigned threads) {
    Block& b = *g_block;
    Fiber& f = self();
    const std::string bar = "named barrier " + std::to_string(id) + " (bar.sync " + std::to_string(id) + ", " +
                            std::to_string(threads) + ")";
    std::string wrong;  // one line for every thread that issues it (error() keeps one copy)
    if (id > 15) wrong = bar + ": barrier ids are 0..15";
    else if (threads == 0 || threads % unsigned(b.warp_size) || threads > b.fibers.size())
        wrong = bar + ": the thread count must be a nonzero multiple of the warp size " +
                std::to_string(b.warp_size) + " and at most the block's " + std::to_string(b.fibers.size()) +
                " threads";
    if (!wrong.empty()) {
        error(wrong);
        f.state = State::kBlockBarrier;  // blocked for good: the launch stops at this error
        yield_to_scheduler();
        return;
    }
    f.bar_id = id;
    f.bar_threads = threads;
    f.state = State::kNamedBarrier;
    yield_to_scheduler();
}

// "warps 0-3, 8" for an ascending list of warp indices
inline std::string warp_ranges(const std::vector<int>& warps) {
    std::string out;
    for (size_t i = 0; i < warps.size();) {
        size_t j = i;
        while (j + 1 < warps.size() && warps[j + 1] == warps[j] + 1) ++j;
        out += (out.empty() ? "" : ", ") + std::to_string(warps[i]) +
               (j > i ? "-" + std::to_string(warps[j]) : std::string());
        i = j + 1;
    }
    return out.empty() ? "none" : out;
}

// the warps whose every live lane waits at named barrier `id` (arrived), and whether any lane waits there
inline std::vector<int> arrived_warps(unsigned id, bool* any) {
    Block& b = *g_block;
    std::vector<int> out;
    *any = false;
    const int n = int(b.fibers.size());
    for (int w0 = 0; w0 < n; w0 += b.warp_size) {
        int live = 0, here = 0;
        for (int t = w0; t < std::min(n, w0 + b.warp_size); ++t) {
            const Fiber& f = b.fibers[t];
            live += f.state != State::kDone;
            here += f.state == State::kNamedBarrier && f.bar_id == id;
        }
        *any = *any || here;
        if (here && here == live) out.push_back(w0 / b.warp_size);
    }
    return out;
}

// Completes every named barrier whose count has arrived; false when none did (or on an error).
inline bool resolve_named_barriers() {
    Block& b = *g_block;
    bool progress = false;
    for (unsigned id = 0; id < 16; ++id) {
        bool any = false;
        const std::vector<int> warps = arrived_warps(id, &any);
        if (!any) continue;
        std::map<unsigned, std::vector<int>> by_count;  // count -> warps with a lane waiting with it
        for (size_t t = 0; t < b.fibers.size(); ++t) {
            const Fiber& f = b.fibers[t];
            if (f.state != State::kNamedBarrier || f.bar_id != id) continue;
            auto& ws = by_count[f.bar_threads];
            if (ws.empty() || ws.back() != int(t) / b.warp_size) ws.push_back(int(t) / b.warp_size);
        }
        if (by_count.size() > 1) {
            std::string counts;
            for (auto& [c, ws] : by_count)
                counts += (counts.empty() ? "" : ", ") + std::to_string(c) + " (warps " + warp_ranges(ws) + ")";
            error("named barrier " + std::to_string(id) + ": threads give different counts in one phase: " + counts);
            return false;
        }
        const unsigned count = by_count.begin()->first;
        const unsigned arrived = unsigned(warps.size()) * unsigned(b.warp_size);
        if (arrived > count) {
            error("named barrier " + std::to_string(id) + " (bar.sync " + std::to_string(id) + ", " +
                  std::to_string(count) + "): " + std::to_string(arrived) + " threads (warps " + warp_ranges(warps) +
                  ") arrive for a count of " + std::to_string(count));
            return false;
        }
        if (arrived < count) continue;  // more warps may still come
        std::vector<int> members;
        for (int w : warps)
            for (int t = w * b.warp_size; t < std::min(int(b.fibers.size()), (w + 1) * b.warp_size); ++t)
                if (b.fibers[t].state == State::kNamedBarrier) members.push_back(t);
        named_synced(members);
        for (int t : members) b.fibers[t].state = State::kRunnable;
        progress = true;
    }
    return progress;
}

// what a warp that has not arrived at a named barrier does instead
inline std::string warp_state(int w) {
    Block& b = *g_block;
    std::string what;
    for (int t = w * b.warp_size; t < std::min(int(b.fibers.size()), (w + 1) * b.warp_size); ++t) {
        const Fiber& f = b.fibers[t];
        const std::string s = f.state == State::kDone ? "exited" : f.state == State::kBlockBarrier ? "in __syncthreads()"
                            : f.state == State::kNamedBarrier ? "at named barrier " + std::to_string(f.bar_id)
                            : f.state == State::kAsyncWait ? "waiting on an mbarrier" : "in a warp-wide operation";
        if (what.empty()) what = s;
        else if (what != s) return "diverged";
    }
    return what;
}

// The deadlock line when a named barrier is short of its count: "" when no thread waits at one.
inline std::string named_barrier_deadlock() {
    Block& b = *g_block;
    for (unsigned id = 0; id < 16; ++id) {
        bool any = false;
        const std::vector<int> warps = arrived_warps(id, &any);
        if (!any) continue;
        unsigned count = 0;
        for (auto& f : b.fibers)
            if (f.state == State::kNamedBarrier && f.bar_id == id) count = f.bar_threads;
        std::map<std::string, std::vector<int>> missing;  // what the other warps do -> those warps
        const int nwarps = int((b.fibers.size() + b.warp_size - 1) / b.warp_size);
        for (int w = 0; w < nwarps; ++w)
            if (std::find(warps.begin(), warps.end(), w) == warps.end()) missing[warp_state(w)].push_back(w);
        std::string rest;
        for (auto& [what, ws] : missing) rest += (rest.empty() ? "" : ", ") + std::string("warps ") +
                                                 warp_ranges(ws) + " " + what;
        const unsigned arrived = unsigned(warps.size()) * unsigned(b.warp_size);
        return "deadlock: named barrier " + std::to_string(id) + " (bar.sync " + std::to_string(id) + ", " +
               std::to_string(count) + ") waits for " + std::to_string(count) + " threads: " +
               std::to_string(arrived) + " arrived (warps " + warp_ranges(warps) + "), " +
               std::to_string(count - arrived) + " missing; " + (rest.empty() ? "no other warp" : rest);
    }
    return "";
}

// Runs `kernel` in `threads` threads of one block (warps of `warp_size`) on
// `shared_bytes` bytes of shared memory at `shared`; returns the errors seen.  `block` is the
// block's blockIdx and `grid` gridDim (a grid runs as one launch per block, in any order: blocks do
// not talk; llgen_host.h's launch_grid does that).
inline std::vector<std::string> launch(int threads, int warp_size, unsigned char* shared, size_t shared_bytes,
                                       std::function<void()> kernel, Dim3 block = Dim3(), Dim3 grid = Dim3()) {
    Block b;
    b.bid = block;
    b.grid.x = std::max(grid.x, 1u), b.grid.y = std::max(grid.y, 1u), b.grid.z = std::max(grid.z, 1u);
    b.dim.x = unsigned(threads);
    b.dim.y = b.dim.z = 1;
    b.warp_size = warp_size;
    b.shared = shared;
    b.shared_bytes = shared_bytes;
    b.shadow.assign(shared_bytes, Shadow());
    b.warp_epoch.assign((threads + warp_size - 1) / warp_size, 1);
    b.kernel = std::move(kernel);
    b.fibers.resize(threads);
    g_block = &b;
    for (int t = 0; t < threads; ++t) {
        Fiber& f = b.fibers[t];
        f.tid.x = unsigned(t);
        f.stack.reset(new char[kStackBytes]);
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack.get();
        f.ctx.uc_stack.ss_size = kStackBytes;
        f.ctx.uc_link = nullptr;
        makecontext(&f.ctx, fiber_entry, 0);
    }
    for (;;) {
        for (int t = 0; t < threads; ++t) {
            if (b.fibers[t].state != State::kRunnable) continue;
            b.current = t;
            swapcontext(&b.sched, &b.fibers[t].ctx);
        }
        if (!b.errors.empty()) break;
        int done = 0, at_barrier = 0, runnable = 0;
        for (auto& f : b.fibers) {
            done += f.state == State::kDone;
            at_barrier += f.state == State::kBlockBarrier;
            runnable += f.state == State::kRunnable;  // woken by an mbarrier phase (hopper.h)
        }
        if (done == threads) break;
        if (runnable) continue;
        if (resolve_warps()) continue;
        if (!b.errors.empty()) break;
        if (resolve_named_barriers()) continue;
        if (!b.errors.empty()) break;
        if (at_barrier && at_barrier + done == threads) {
            if (done) {
                error("__syncthreads() reached by " + std::to_string(at_barrier) + " threads while " +
                      std::to_string(done) + " have exited");
                break;
            }
            ++b.epoch;
            block_synced();
            for (auto& f : b.fibers) f.state = State::kRunnable;
            continue;
        }
        const std::string named = named_barrier_deadlock();
        error(named.empty() ? "deadlock: threads wait in different barriers or warp-wide operations" +
                              deadlock_detail() : named);
        break;
    }
    if (b.errors.empty()) {
        for (auto& f : b.fibers)
            if (!f.cp_pending.empty() || !f.cp_groups.empty()) {
                error("thread " + std::to_string(&f - b.fibers.data()) + " exits with cp.async copies that no "
                      "cp.async.wait_group waited for (their bytes never land)");
                break;
            }
        async_exit_check();
    }
    g_block = nullptr;
    return b.errors;
}

}  // namespace llgen_host

// ------------------------------------------------------------ the CUDA/HIP surface
#define threadIdx (::llgen_host::self().tid)
#define blockIdx (::llgen_host::g_block->bid)
#define gridDim (::llgen_host::g_block->grid)
#define blockDim (::llgen_host::g_block->dim)
#define warpSize (::llgen_host::g_block->warp_size)

inline void __syncthreads() {
    ::llgen_host::self().state = ::llgen_host::State::kBlockBarrier;
    ::llgen_host::yield_to_scheduler();
}

// Global-memory atomics and fences (a split-K GEMM's per-tile counters, say).  One fiber runs at a
// time and switches only at a barrier or a warp-collective operation, so a read-modify-write is
// atomic and every write is seen by every later read: __threadfence() has nothing left to order.
inline int atomicAdd(int* p, int v) {
    const int old = *p;
    *p = old + v;
    return old;
}
inline unsigned atomicAdd(unsigned* p, unsigned v) {
    const unsigned old = *p;
    *p = old + v;
    return old;
}
inline void __threadfence() {}

namespace llgen_host {
// a warp-scope barrier (bar.warp.sync, or the HIP headers' wavefront barrier)
inline void sync_warp(unsigned mask = 0xffffffffu) {
    auto& f = self();
    f.op = WarpOp::kSyncWarp;
    f.mask = mask;
    warp_op(f);
}
}  // namespace llgen_host

inline void __syncwarp(unsigned mask = 0xffffffffu) { ::llgen_host::sync_warp(mask); }

template <typename T>
inline T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
    return ::llgen_host::shuffle(::llgen_host::WarpOp::kShflIdx, v, unsigned(src_lane), unsigned(width), mask);
}
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    return ::llgen_host::shuffle(::llgen_host::WarpOp::kShflXor, v, unsigned(lane_mask), unsigned(width), mask);
}
template <typename T>
inline T __shfl(T v, int src_lane, int width = -1) {
    return ::llgen_host::shuffle(::llgen_host::WarpOp::kAmdShfl, v, unsigned(src_lane),
                                 unsigned(width < 0 ? warpSize : width), 0u);
}
template <typename T>
inline T __shfl_xor(T v, int lane_mask, int width = -1) {
    return ::llgen_host::shuffle(::llgen_host::WarpOp::kAmdShflXor, v, unsigned(lane_mask),
                                 unsigned(width < 0 ? warpSize : width), 0u);
}

// population count (CUDA and HIP both have it): a lane select's parity of several lane bits
inline int __popc(unsigned x) { return __builtin_popcount(x); }

inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    uint64_t bytes = (uint64_t(y) << 32) | x;
    unsigned out = 0;
    for (int i = 0; i < 4; ++i) {
        unsigned sel = (s >> (4 * i)) & 0xf;
        unsigned b = unsigned(bytes >> (8 * (sel & 7))) & 0xff;
        if (sel & 8) b = (b & 0x80) ? 0xff : 0;  // sign-replicate mode
        out |= b << (8 * i);
    }
    return out;
}

inline size_t __cvta_generic_to_shared(const void* p) { return ::llgen_host::lds_offset(p); }

// vote.sync.all: every lane of the (full) warp's predicate, through xor shuffles (member mask checked).
inline int __all_sync(unsigned mask, int pred) {
    int all = pred != 0;
    for (int b = 1; b < warpSize; b <<= 1) all &= __shfl_xor_sync(mask, all, b);
    return all;
}
// The bits of a float as an unsigned and back (mov.b32).
inline unsigned __float_as_uint(float x) {
    unsigned u;
    std::memcpy(&u, &x, 4);
    return u;
}
inline float __uint_as_float(unsigned u) {
    float x;
    std::memcpy(&x, &u, 4);
    return x;
}
// add.rm.f32: a + b rounded toward -inf (the nearest sum, one ulp down where it lies above the exact sum;
// exact where a + b is exact in double, as for operands within 2^29 of each other's scale).
inline float __fadd_rd(float a, float b) {
    const float r = a + b;
    return double(r) > double(a) + double(b) ? std::nextafter(r, -INFINITY) : r;
}

struct uint2 {
    unsigned x, y;
};
struct uint4 {
    unsigned x, y, z, w;
};

// inline PTX / GCN assembly is not modelled: route it through a named wrapper
#define asm llgen_host_does_not_model_inline_asm

// Hopper (sm_90a) asynchronous operations: mbarrier, TMA, wgmma, mma.sync
#include "hopper.h"

namespace llgen_host {
// A named barrier's completion orders its members' shared-memory accesses, and only theirs: each
// member's clock is stamped (its accesses so far) and the members' knowledge joined, as __syncwarp
// does for a warp (hopper.h's vector clocks; mbarrier phases any member saw complete, all know).
inline void named_synced(const std::vector<int>& members) {
    HopperState& h = hopper();
    Knowledge all;
    for (int t : members) {
        Knowledge& k = h.know[t];
        k.vc.resize(g_block->fibers.size(), 0);
        k.vc[t] = g_block->fibers[t].clk++;
        all.join(k);
    }
    for (int t : members) h.know[t] = all;
}
}  // namespace llgen_host
// AMD CDNA matrix instructions (v_mfma_*), on hopper.h's operand records and products
#include "hip/mfma.h"
