// Hopper (sm_90a) asynchronous operations on the host SIMT runtime (included at
// the end of simt_host.h; `<cuda.h>` in this folder is the host side of TMA).
// Generated headers call these under `LLGEN_HOST_SIMT` instead of inline PTX.
// Semantics follow the PTX ISA sections named at each function.
//
// Layouts and fragments follow the PTX ISA and cuTensorMapEncodeTiled's documentation, and were
// checked on an H200 (sm_90a) where those leave room: TMA boxes (narrow, strided, out of
// bounds), wgmma shared layouts and base offsets, register fragments (wgmma A, f32 / f16 D;
// mma.sync f16 / tf32 / s8).
//
// Memory model (what the shadow checks; simple, and sound for the patterns below)
// * Each thread has a clock (Fiber::clk) that stamps its shared accesses.  An
//   mbarrier arrival releases what the arriving thread knows (its clock, the
//   clocks it learnt, the mbarrier phases it saw complete) into the barrier;
//   mbarrier_try_wait_parity returning true acquires everything released by the
//   arrivals of the phases completed so far.  An access happens before another
//   thread's when a barrier interval or __syncwarp orders them (simt_host.h) or
//   such a release/acquire chain does (__syncwarp joins its lanes' knowledge).
// * A TMA load's shared-memory writes belong to the asynchronous proxy: they are
//   recorded with the mbarrier phase their complete_tx counted towards, and are
//   visible to a thread -- the issuing one included -- only once it knows that
//   phase completed (its own try_wait, an acquire chain, or a thread that knew
//   it before the last __syncthreads).  The writes themselves must be ordered
//   after earlier accesses of the bytes as seen from the issuing thread.
// * A TMA store reads shared memory between its issue and the issuing thread's
//   cp.async.bulk.wait_group.read that covers its committed group (PTX ISA
//   "cp.async.bulk.wait_group"): its box is checked as a read at the issue, its
//   bytes may not be written until that wait (an error otherwise), and the global
//   tensor is written at the wait -- a store never waited for is reported at exit.
// * TMA loads land when issued (visible only through their mbarrier phase, see
//   above); their conflicts are reported once per box and other party, with the
//   byte range.  mma.sync computes when the warp issues it.  Proxy fences are no-ops.
// * wgmma (wgmma.h) is asynchronous as the PTX ISA says: pending from the
//   warpgroup's issue to the wgmma.wait_group that covers its committed group,
//   where it reads its shared operands and writes its accumulator registers.  Its
//   operand bytes must be visible at the issue (written before any member's
//   issue) and stay untouched until the wait (a stage released early is a race);
//   the reads are recorded as the completing member's and every member learns
//   them at its covering wait, so any member's release (mbarrier arrival) orders
//   them.  Accumulator registers are poisoned in flight; reading them through the
//   accumulator pin or writing them before the wait, a missing wgmma.fence, a
//   wait without commit and an exit with a wgmma in flight are errors.
// * A race by a thread whose last mbarrier wait returned at once without
//   ordering anything (the parity of the phase before the first, or of one the
//   thread had seen complete) is reported as that wrong-parity wait, one line.
//   docs/host-runtime.md lists what is modelled and what is not.
#pragma once

#include <cmath>
#include <map>
#include <utility>

#define __grid_constant__

namespace llgen_host {

// ------------------------------------------------------------ tensor maps
// cuTensorMapEncodeTiled's parameters, stored in CUtensorMap's 128 opaque bytes (cuda.h)
struct TensorMapDesc {
    uint32_t magic;
    uint8_t dtype, rank, elem_bytes, interleave, swizzle, l2, oob, pad;
    uint64_t address;
    uint64_t dim[5];     // elements, innermost first
    uint64_t stride[4];  // bytes, of dims 1..rank-1
    uint16_t box[5];
    uint8_t estride[5];
};
static_assert(sizeof(TensorMapDesc) <= 128, "a tensor map is 128 bytes");
constexpr uint32_t kTensorMapMagic = 0x4c4c544du;

// swizzled shared address (TMA "swizzle modes", wgmma "Shared Memory Matrix Layout"): with
// `bits` = 1, 2, 3 for 32B, 64B, 128B, address bits [4, 4+bits) ^= bits [7, 7+bits) of the
// absolute shared address, less wgmma's descriptor base offset (measured on an H200: base 0
// swizzles absolute addresses; base b reads a pattern that starts b 128-byte rows early)
inline unsigned swizzle_address(unsigned a, unsigned bits, unsigned base = 0) {
    return bits ? a ^ ((((a >> 7) - base) & ((1u << bits) - 1)) << 4) : a;
}

// ------------------------------------------------------------ state
struct Knowledge {                       // what a thread knows happened before its next access
    std::vector<uint64_t> vc;            // accesses of thread u stamped <= vc[u] (empty: all 0)
    std::map<unsigned, uint64_t> seen;   // mbarrier -> number of its phases known complete
    void join(const Knowledge& o) {
        if (!o.vc.empty()) {
            if (vc.size() < o.vc.size()) vc.resize(o.vc.size(), 0);
            for (size_t u = 0; u < o.vc.size(); ++u) vc[u] = std::max(vc[u], o.vc[u]);
        }
        for (auto& [bar, n] : o.seen) seen[bar] = std::max(seen[bar], n);
    }
};

struct MBarrier {       // PTX ISA "Parallel Synchronization and Communication Instructions: mbarrier"
    uint32_t count = 0;       // expected arrivals per phase
    uint32_t pending = 0;     // pending arrival count of the current phase
    int64_t tx = 0;           // tx-count (bytes expected minus bytes completed)
    uint64_t phase = 0;       // phases completed (since the first init at this address)
    uint64_t base = 0;        // `phase` at the last init: the current phase's parity is phase - base
    Knowledge released, done; // released by all arrivals so far / at the last phase completion
};

struct AsyncWrite {  // a TMA load: visible once phase `phase` of the mbarrier at `bar` completed
    unsigned bar;
    uint64_t phase;
};

enum class MmaType { kF16, kBF16, kTF32, kE4M3, kE5M2, kS8, kU8, kF32, kS32 };

struct MmaOperands {  // one thread's operands of the wgmma / mma.sync it waits in
    int m = 0, n = 0, k = 0;
    MmaType ab = MmaType::kF16, bt = MmaType::kF16, acc = MmaType::kF32;  // A's type, B's, the accumulator's
    bool tnsp_a = false, tnsp_b = false, scale_d = true;
    uint64_t a_desc = 0, b_desc = 0;
    const uint32_t *a = nullptr, *b = nullptr, *c = nullptr;
    uint32_t* d = nullptr;
    void* const* dregs = nullptr;  // wgmma: the addresses of the thread's `nd` accumulator registers
    int nd = 0;
};

// an accumulator register a wgmma in flight will write holds this (a NaN as f32 and as both f16 halves)
constexpr uint32_t kAccPoison = 0x7fbb7fbbu;

struct PendingWgmma {  // one wgmma.mma_async of a warpgroup, from its issue (wgmma.h)
    int group = 0, order = 0;                  // its warpgroup, its issue order there (1, 2, ...)
    MmaOperands o;                             // shape, types, descriptors
    int nd = 0;                                // accumulator registers per member
    std::vector<void*> regs;                   // [member * nd + i]: the address of register d_i
    std::vector<uint32_t> c, d;                // C saved at the issue; D once computed
    std::vector<std::pair<int, int>> chain;    // C from this wgmma's D at that index instead (-1: saved C)
    std::vector<uint32_t> a;                   // A's words per member, taken at the issue (A in registers)
    std::vector<unsigned> addrs;               // every operand element's shared address, A then B per k
    bool computed = false;
    int completer = -1;                        // the member whose wait completed it, and its clock then
    uint64_t stamp = 0;
};

struct WgmmaState {
    struct Owner {
        int id, t, i;  // wgmma, member, register index
    };
    std::vector<PendingWgmma> ops;                     // every wgmma issued, in issue order
    // hash maps: looked up for every accumulator register and operand byte of every wgmma, never iterated
    std::unordered_map<const void*, Owner> owner;      // accumulator register -> the last wgmma in flight writing it
    std::vector<std::vector<int>> open;                // per thread: issued since its last commit_group
    std::vector<std::vector<std::vector<int>>> groups; // per thread: committed, oldest first
    std::vector<char> fenced;                          // per thread: a wgmma.fence since its registers were its own
    std::vector<int> issued;                           // per warpgroup: wgmma issued
    std::unordered_map<unsigned, int> reader;          // shared byte -> a wgmma in flight reading it
    bool said = false;                                 // a wgmma error was reported: the rest follow from it
};

struct LastWait {  // a thread's last successful mbarrier.try_wait.parity
    unsigned bar = 0, parity = 0;
    uint64_t phase = 0;      // the barrier's current phase (since its init) then
    bool vacuous = false;    // it waited for a phase that ordered nothing new: the one before the
    bool before_first = false;  // first (none completed since init), or one the thread had seen complete
};

struct BulkStore {  // a TMA store not yet covered by a cp.async.bulk.wait_group.read
    const void* map;
    unsigned smem;
    int coords[5];
};

struct HopperState {
    std::map<unsigned, MBarrier> bars;
    std::vector<AsyncWrite> writes;
    std::vector<Knowledge> know;   // per thread
    std::vector<MmaOperands> ops;  // per thread
    std::vector<std::vector<BulkStore>> bulk_open;                 // per thread: since the last commit
    std::vector<std::vector<std::vector<BulkStore>>> bulk_groups;  // per thread: committed, oldest first
    std::map<unsigned, int> tma_reader;                            // shared byte -> a TMA store's issuer
    WgmmaState wg;                                                 // wgmma in flight (wgmma.h)
    std::vector<LastWait> last_wait;                               // per thread
    std::vector<unsigned> parity_reported;                         // barriers whose wrong-parity wait was reported
    std::vector<int> regs;                                         // per thread: its setmaxnreg budget (0: at launch)
    long free_regs = 0;                                            // registers released by setmaxnreg.dec, not yet taken
};

inline HopperState& hopper() {
    Block& b = *g_block;
    if (!b.hopper) {
        b.hopper = std::make_shared<HopperState>();
        b.hopper->know.resize(b.fibers.size());
        b.hopper->ops.resize(b.fibers.size());
        b.hopper->bulk_open.resize(b.fibers.size());
        b.hopper->bulk_groups.resize(b.fibers.size());
        b.hopper->last_wait.resize(b.fibers.size());
    }
    return *b.hopper;
}

// ---- the hooks simt_host.h declares
inline bool synced(int t, uint64_t clk, int now) {
    HopperState* h = g_block->hopper.get();
    if (!h || t < 0) return false;
    const auto& vc = h->know[now].vc;
    return size_t(t) < vc.size() && clk <= vc[t];
}

inline bool seen_complete(const Knowledge& k, const AsyncWrite& w) {
    auto it = k.seen.find(w.bar);
    return it != k.seen.end() && it->second > w.phase;
}
inline bool async_visible(int id, int now) { return seen_complete(hopper().know[now], hopper().writes[id]); }

inline void block_synced() {  // __syncthreads: the mbarrier phases any thread saw complete, all now know
    HopperState* h = g_block->hopper.get();
    if (!h) return;
    std::map<unsigned, uint64_t> all;
    for (auto& k : h->know)
        for (auto& [bar, n] : k.seen) all[bar] = std::max(all[bar], n);
    for (auto& k : h->know) k.seen = all;
}

inline void warp_synced(int w0, int lanes) {  // __syncwarp: the lanes' knowledge is joined
    HopperState* h = g_block->hopper.get();
    if (!h) return;
    Knowledge all;
    for (int l = 0; l < lanes; ++l) {
        Knowledge& k = h->know[w0 + l];
        k.vc.resize(g_block->fibers.size(), 0);
        k.vc[w0 + l] = g_block->fibers[w0 + l].clk++;
        all.join(k);
    }
    for (int l = 0; l < lanes; ++l) h->know[w0 + l] = all;
}

// wgmma.h: who of the wgmma in flight reads a byte (""; its warpgroup, -1), and the wgmma a thread exits with
inline std::string wgmma_reader(unsigned addr);
inline int wgmma_reader_group(unsigned addr);
inline void wg_error(const std::string& what);  // one wgmma error per launch
inline void wgmma_exit_check();

// A race by thread t whose last mbarrier wait returned at once without ordering anything (it waited
// for the parity of the phase before the barrier's current one, and that phase is the one before
// the first, or one the thread had seen complete already): the wait's parity is the bug, reported
// as one line (once per barrier) instead of the race's per-access reports; true when it did.
inline bool parity_explains(int t) {
    HopperState* h = g_block->hopper.get();
    if (!h || t < 0 || size_t(t) >= h->last_wait.size() || !h->last_wait[t].vacuous) return false;
    const LastWait& lw = h->last_wait[t];
    auto& done = h->parity_reported;
    if (std::find(done.begin(), done.end(), lw.bar) != done.end()) return true;
    done.push_back(lw.bar);
    error(where(t) + ": wrong mbarrier parity: mbarrier.try_wait.parity on the mbarrier at " + std::to_string(lw.bar) +
          " waited for parity " + std::to_string(lw.parity) + " while the barrier is in phase " +
          std::to_string(lw.phase) + " (parity " + std::to_string(lw.phase & 1) + "), so it returned at once for " +
          (lw.before_first ? "the phase before the first (none has completed since mbarrier.init)"
                           : "phase " + std::to_string(lw.phase - 1) + ", which this thread had seen complete") +
          " and ordered nothing; the thread's next shared-memory access races (the phase it needs has parity " +
          std::to_string(lw.phase & 1) + ")");
    return true;
}

// ------------------------------------------------------------ mbarrier
// PTX ISA "mbarrier": a phase completes when its pending arrival count and its
// tx-count are both zero; then the next phase starts with `count` arrivals pending.
inline void release(int t, MBarrier& bar) {
    Knowledge& k = hopper().know[t];
    k.vc.resize(g_block->fibers.size(), 0);
    k.vc[t] = g_block->fibers[t].clk++;  // this thread's accesses so far
    bar.released.join(k);
}

inline void try_complete(unsigned addr, MBarrier& bar) {
    if (bar.pending || bar.tx) return;
    bar.done = bar.released;
    ++bar.phase;
    bar.pending = bar.count;
    for (auto& f : g_block->fibers)
        if (f.state == State::kAsyncWait && f.arg == addr) f.state = State::kRunnable;
}

// the initialised mbarrier at `addr`; its 8 bytes are read through the shadow, so using a
// barrier that no barrier interval (or acquire) orders after its mbarrier.init is a race
inline MBarrier* mbarrier_at(unsigned addr, const char* what, int t) {
    HopperState& h = hopper();
    if (!check_range(what, addr, 8, 8, t)) return nullptr;
    auto it = h.bars.find(addr);
    if (it == h.bars.end()) {
        error(where(t) + ": " + what + " on shared address " + std::to_string(addr) +
              ", which holds no initialised mbarrier");
        return nullptr;
    }
    unsigned char bytes[8];
    shared_read(addr, bytes, 8, 8, t);
    return &it->second;
}

// mbarrier.init.shared::cta.b64 [addr], count
inline void mbarrier_init(unsigned addr, unsigned count) {
    int t = self_id();
    if (count < 1 || count > (1u << 20) - 1) {
        error(where(t) + ": mbarrier.init count " + std::to_string(count) + " is outside [1, 2^20 - 1]");
        return;
    }
    if (!check_range("mbarrier.init", addr, 8, 8, t)) return;
    uint64_t image = count;  // the opaque object's bytes: written, so its users are ordered after
    shared_write(addr, &image, 8, 8, t);
    MBarrier& bar = hopper().bars[addr];
    uint64_t phase = bar.phase;  // a re-initialised barrier keeps counting (threads' `seen` stays true)
    bar = MBarrier();
    bar.count = bar.pending = count;
    bar.phase = bar.base = phase;
}

inline void mbarrier_arrive_tx(unsigned addr, unsigned tx_bytes, const char* what) {
    int t = self_id();
    MBarrier* bar = mbarrier_at(addr, what, t);
    if (!bar) return;
    bar->tx += tx_bytes;  // expect-tx first (PTX: mbarrier.arrive.expect_tx)
    if (bar->pending == 0) {
        error(where(t) + ": " + what + " on the mbarrier at " + std::to_string(addr) + " in phase " +
              std::to_string(bar->phase - bar->base) + ": more arrivals than its count " + std::to_string(bar->count));
        return;
    }
    release(t, *bar);
    --bar->pending;
    try_complete(addr, *bar);
}

// mbarrier.arrive.shared::cta.b64 _, [addr]
inline void mbarrier_arrive(unsigned addr) { mbarrier_arrive_tx(addr, 0, "mbarrier.arrive"); }

// mbarrier.arrive.expect_tx.shared::cta.b64 _, [addr], tx_bytes
inline void mbarrier_arrive_expect_tx(unsigned addr, unsigned tx_bytes) {
    mbarrier_arrive_tx(addr, tx_bytes, "mbarrier.arrive.expect_tx");
}

// mbarrier.try_wait.parity.shared::cta.b64 p, [addr], parity: true once the phase with this
// parity completed, i.e. the current phase's parity differs.  Otherwise the thread blocks until
// the barrier completes a phase and then returns false (the caller loops); a barrier that never
// completes leaves every thread blocked: the runtime reports the deadlock.
inline bool mbarrier_try_wait_parity(unsigned addr, unsigned parity) {
    int t = self_id();
    MBarrier* bar = mbarrier_at(addr, "mbarrier.try_wait.parity", t);
    Fiber& f = self();
    if (bar && ((bar->phase - bar->base) & 1) != (parity & 1)) {
        Knowledge& k = hopper().know[t];  // acquire
        auto seen = k.seen.find(addr);
        LastWait& lw = hopper().last_wait[t];
        lw.bar = addr, lw.parity = parity & 1, lw.phase = bar->phase - bar->base;
        lw.before_first = bar->phase == bar->base;
        lw.vacuous = lw.before_first || (seen != k.seen.end() && seen->second >= bar->phase);
        k.join(bar->done);
        k.seen[addr] = std::max(k.seen[addr], bar->phase);
        return true;
    }
    f.state = State::kAsyncWait;  // after an error: blocked for good, the launch stops
    f.arg = addr;
    yield_to_scheduler();
    return false;
}

inline void fence_proxy_async() {}  // fence.proxy.async: proxies are not modelled

// ------------------------------------------------------------ setmaxnreg
// setmaxnreg.{inc,dec}.sync.aligned.u32 R: the registers a thread of the warp group holds.  At launch each
// thread holds what __launch_bounds__(threads, 1) allows, launch_regs() (ptxas may allocate fewer, and
// then the GPU has fewer to hand out than this model).  .dec returns the difference to the CTA's pool;
// .inc blocks until the pool covers it, so budgets that add up to more than the launch's allocation wait
// for ever -- the runtime reports the deadlock.  Registers of exited warps are not returned to the pool.
constexpr unsigned kRegisterWait = 0xffffffffu;  // Fiber::arg of a thread waiting in setmaxnreg.inc
inline int launch_regs() { return std::min(255, 65536 / int(g_block->fibers.size()) / 8 * 8); }

inline void setmaxnreg(int r, bool inc) {
    HopperState& h = hopper();
    const int t = self_id();
    if (h.regs.empty()) h.regs.assign(g_block->fibers.size(), launch_regs());
    const int now = h.regs[t];
    const char* op = inc ? "setmaxnreg.inc" : "setmaxnreg.dec";
    if (r % 8 || r < 24 || r > 256 || (inc ? r < now : r > now)) {
        error(std::string(op) + " to " + std::to_string(r) + " registers in " + where(t) + ", which holds " +
              std::to_string(now) + " (24 .. 256, a multiple of 8, " + (inc ? "not below" : "not above") +
              " the current count)");
        return;
    }
    if (!inc) {
        h.free_regs += now - r;
        h.regs[t] = r;
        for (auto& f : g_block->fibers)  // a thread waiting in setmaxnreg.inc may now have its registers
            if (f.state == State::kAsyncWait && f.arg == kRegisterWait) f.state = State::kRunnable;
        return;
    }
    while (h.free_regs < r - now) {
        Fiber& f = self();
        f.state = State::kAsyncWait;
        f.arg = kRegisterWait;
        yield_to_scheduler();
        if (!g_block->errors.empty()) return;
    }
    h.free_regs -= r - now;
    h.regs[t] = r;
}

// ------------------------------------------------------------ TMA
// cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes and
// cp.async.bulk.tensor.Nd.global.shared::cta.tile.bulk_group: the box, innermost dimension first,
// in shared memory, each element's absolute shared address swizzled.
// calls fn(shared address, global address or nullptr outside the tensor) for each element of the
// box of `map` at `coords`; returns the box's bytes (the complete_tx count), 0 after an error.
// As measured on an H200: dimension i > 0 holds ceil(boxDim[i] / elementStrides[i]) elements
// (coordinates c + j elementStrides[i]); the innermost holds boxDim[0] consecutive ones
// (elementStrides[0] has no effect); a swizzled box's rows are `span` bytes apart in shared
// memory even when boxDim[0] is narrower (the tx count stays the unpadded box bytes).
// Coordinates the hardware refuses, as measured on an H200 (neither is in cuTensorMapEncodeTiled's
// documentation, which the encode checks): the innermost coordinate must address a multiple of 16
// bytes (else the copy raises an illegal instruction), and a store must not start at a negative
// coordinate (it faults; stores clip only past the tensor's end, loads zero-fill on both sides).
inline bool tma_coords_ok(const TensorMapDesc& m, const int* coords, bool store, const char* what, int t) {
    std::string at = "(";
    for (int i = 0; i < m.rank; ++i) at += (i ? ", " : "") + std::to_string(coords[i]);
    at += ")";
    int64_t inner = int64_t(coords[0]) * m.elem_bytes;
    if (inner % 16) {
        error(where(t) + ": " + what + " at coordinates " + at + " (innermost first): the innermost coordinate " +
              std::to_string(coords[0]) + " x " + std::to_string(m.elem_bytes) + " bytes = " + std::to_string(inner) +
              " is not a multiple of 16 bytes (the hardware raises an illegal instruction)");
        return false;
    }
    for (int i = 0; store && i < m.rank; ++i)
        if (coords[i] < 0) {
            error(where(t) + ": " + what + " at coordinates " + at + " (innermost first): coordinate " +
                  std::to_string(i) + " is " + std::to_string(coords[i]) + " < 0; a TMA store at a negative "
                  "coordinate faults on the GPU (stores clip only past the tensor's end)");
            return false;
        }
    return true;
}

template <typename Fn>
inline unsigned tma_box(const void* map, unsigned smem_addr, const int* coords, bool store, const char* what, int t,
                        Fn fn) {
    auto* m = static_cast<const TensorMapDesc*>(map);
    if (!m || m->magic != kTensorMapMagic) {
        error(where(t) + ": " + what + " with a tensor map cuTensorMapEncodeTiled did not encode");
        return 0;
    }
    if (!tma_coords_ok(*m, coords, store, what, t)) return 0;
    unsigned n[5] = {m->box[0]}, rows = 1, eb = m->elem_bytes, swz = m->swizzle;  // SWIZZLE_32B/64B/128B: 1/2/3
    for (int i = 1; i < m->rank; ++i) rows *= n[i] = (m->box[i] + m->estride[i] - 1) / m->estride[i];
    unsigned pitch = swz ? 16u << swz : n[0] * eb;
    // shared memory: 128-byte aligned; swizzled, aligned to the pattern's repeat (8 x span)
    if (!check_range(what, smem_addr, rows * pitch, swz ? 8u * (16u << swz) : 128u, t)) return 0;
    for (unsigned e = 0; e < rows * n[0]; ++e) {
        uint64_t offset = 0;
        bool inside = true;
        for (unsigned i = 0, rest = e; i < m->rank; rest /= n[i], ++i) {
            int64_t c = int64_t(coords[i]) + int64_t(rest % n[i]) * (i ? m->estride[i] : 1);
            inside = inside && c >= 0 && uint64_t(c) < m->dim[i];
            offset += uint64_t(c) * (i ? m->stride[i - 1] : eb);
        }
        auto* global = inside ? reinterpret_cast<unsigned char*>(m->address) + offset : nullptr;
        if (!fn(swizzle_address(smem_addr + (e / n[0]) * pitch + (e % n[0]) * eb, swz), global, *m)) return 0;
    }
    return rows * n[0] * eb;
}

// the thread whose TMA store still reads a byte, or -1
inline int h_tma_reader(unsigned addr) {
    auto it = hopper().tma_reader.find(addr);
    return it == hopper().tma_reader.end() ? -1 : it->second;
}

// the conflicts of one TMA load's box: one report per (kind, other party), with its byte range
struct BoxConflicts {
    struct Range {
        unsigned lo, hi, n;
    };
    // kind (0 wrote, 1 read, 2 still reads) and the other party (a thread; a warpgroup's wgmma in flight
    // count as one) -> the bytes, and the first byte's description of the party
    std::map<std::pair<int, std::string>, Range> found;
    std::map<std::pair<int, std::string>, std::string> who;
    template <typename Who>
    void add(int kind, const std::string& party, unsigned a, Who describe) {
        auto it = found.find({kind, party});
        if (it == found.end()) found[{kind, party}] = {a, a, 1}, who[{kind, party}] = describe();
        else it->second.lo = std::min(it->second.lo, a), it->second.hi = std::max(it->second.hi, a), ++it->second.n;
    }
    void report(int t) const {  // the issuer's wrong-parity wait explains them all, when it has one
        if (found.empty() || parity_explains(t)) return;
        for (auto& [key, r] : found) {  // landing on a wgmma's operands: once (every box of the stage does)
            std::string what = "race: the TMA load issued by " + where(t) + " writes shared bytes " +
                               std::to_string(r.lo) + ".." + std::to_string(r.hi) + " (" + std::to_string(r.n) +
                               " bytes) that " + who.at(key) +
                               (key.first == 0 ? " wrote (other values), unordered before the issue"
                                : key.first == 1 ? " read, unordered before the issue" : "");
            if (key.first == 2 && key.second.rfind("wgmma", 0) == 0) wg_error(what);
            else error(what);
        }
    }
};

// a shared write by the asynchronous proxy on behalf of thread t (async write `id`)
inline void async_write(unsigned addr, const unsigned char* src, unsigned bytes, int t, int id, BoxConflicts& bad) {
    Block& b = *g_block;
    for (unsigned i = 0; i < bytes; ++i) {
        Shadow& s = b.shadow[addr + i];
        unsigned a = addr + i;
        if (s.tma_reads)
            bad.add(2, wgmma_reader_group(a) >= 0 ? "wgmma " + std::to_string(wgmma_reader_group(a))
                                                   : "tma " + std::to_string(h_tma_reader(a)), a,
                    [&] { return async_reader(a); });
        else if (s.writer >= 0 && !write_before(s, t) && b.shared[a] != src[i])
            bad.add(0, std::to_string(s.async >= 0) + " " + std::to_string(s.writer), a, [&] {
                return s.async >= 0 ? "the TMA load issued by " + where(s.writer) : where(s.writer); });
        else if (s.reader >= 0 && !read_before(s, t))
            bad.add(1, std::to_string(s.reader), a, [&] { return where(s.reader); });
        s.writer = t;
        s.write_epoch = b.epoch;
        s.write_wepoch = b.warp_epoch[t / b.warp_size];
        s.write_clk = b.fibers[t].clk;
        s.async = id;
        b.shared[addr + i] = src[i];
    }
}

inline void tma_load(const void* map, unsigned smem_addr, unsigned mbar_addr, const int* coords) {
    int t = self_id();
    MBarrier* bar = mbarrier_at(mbar_addr, "cp.async.bulk.tensor (TMA load) complete_tx", t);
    if (!bar) return;
    HopperState& h = hopper();
    int id = int(h.writes.size());
    h.writes.push_back({mbar_addr, bar->phase});  // complete_tx counts towards the current phase
    BoxConflicts bad;
    unsigned bytes = tma_box(map, smem_addr, coords, false, "cp.async.bulk.tensor (TMA load)", t,
                             [&](unsigned dst, const unsigned char* src, const TensorMapDesc& m) {
        unsigned char fill[8] = {0};  // out of bounds: zero, or (NAN_REQUEST_ZERO_FMA) 0x7f..ff
        if (m.oob) std::memset(fill, 0xff, m.elem_bytes - 1), fill[m.elem_bytes - 1] = 0x7f;
        async_write(dst, src ? src : fill, m.elem_bytes, t, id, bad);
        return true;
    });
    bad.report(t);
    bar->tx -= bytes;  // complete_tx: the whole box, filled elements included
    if (bytes) try_complete(mbar_addr, *bar);
}

// shared -> global: elements past the tensor's end are neither written nor read.  The box is read
// (race-checked as this thread's read) and its bytes locked now; the tensor is written when the
// thread's cp.async.bulk.wait_group.read covers the store's group.
inline void tma_store(const void* map, unsigned smem_addr, const int* coords) {
    int t = self_id();
    HopperState& h = hopper();
    unsigned bytes = tma_box(map, smem_addr, coords, true, "cp.async.bulk.tensor (TMA store)", t,
                             [&](unsigned src, unsigned char* dst, const TensorMapDesc& m) {
        if (!dst) return true;
        unsigned char tmp[8];
        shared_read(src, tmp, m.elem_bytes, 1, t);
        for (unsigned i = 0; i < m.elem_bytes; ++i) {
            ++g_block->shadow[src + i].tma_reads;
            h.tma_reader[src + i] = t;
        }
        return g_block->errors.empty();
    });
    if (!bytes) return;
    BulkStore st{map, smem_addr, {0}};
    std::memcpy(st.coords, coords, sizeof(int) * static_cast<const TensorMapDesc*>(map)->rank);
    h.bulk_open[t].push_back(st);
}

// cp.async.bulk.commit_group: the thread's stores since the last commit form a group
inline void bulk_commit_group() {
    HopperState& h = hopper();
    int t = self_id();
    h.bulk_groups[t].push_back(std::move(h.bulk_open[t]));
    h.bulk_open[t].clear();
}

// cp.async.bulk.wait_group.read n: the thread's committed groups but the newest n have read shared
// memory: their boxes are copied to the tensor now and their bytes unlocked
inline void bulk_wait_group_read(int n) {
    HopperState& h = hopper();
    int t = self_id();
    auto& groups = h.bulk_groups[t];
    while (groups.size() > size_t(n < 0 ? 0 : n)) {
        for (const BulkStore& st : groups.front())
            tma_box(st.map, st.smem, st.coords, true, "cp.async.bulk.tensor (TMA store)", t,
                    [&](unsigned src, unsigned char* dst, const TensorMapDesc& m) {
                if (!dst) return true;
                std::memcpy(dst, g_block->shared + src, m.elem_bytes);
                for (unsigned i = 0; i < m.elem_bytes; ++i) --g_block->shadow[src + i].tma_reads;
                return true;
            });
        groups.erase(groups.begin());
    }
}

// the hooks simt_host.h declares: who still reads a byte (a TMA store or a wgmma in flight), and
// what a thread may not exit with
inline std::string async_reader(unsigned addr) {
    if (HopperState* h = g_block->hopper.get()) {
        std::string wgmma = wgmma_reader(addr);
        if (!wgmma.empty()) return wgmma;
        auto it = h->tma_reader.find(addr);
        if (it != h->tma_reader.end())
            return "the TMA store issued by " + where(it->second) + " still reads (no cp.async.bulk.wait_group.read "
                   "covers it)";
    }
    return "a TMA store still reads (no cp.async.bulk.wait_group.read covers it)";
}

inline void async_exit_check() {
    HopperState* h = g_block->hopper.get();
    if (!h) return;
    wgmma_exit_check();
    if (!g_block->errors.empty()) return;
    for (size_t t = 0; t < h->bulk_open.size(); ++t)
        if (!h->bulk_open[t].empty() || !h->bulk_groups[t].empty()) {
            error(where(int(t)) + " exits with TMA stores that no cp.async.bulk.wait_group.read covered "
                  "(committed and waited for): the tensor is not written");
            return;
        }
}

// ------------------------------------------------------------ element types
// exact decoders (every value of these formats is a float): a binary format of `e` exponent
// bits (bias 2^(e-1) - 1) and `m` mantissa bits; `ieee`: the top exponent is inf / NaN, else
// (e4m3) only S.1111.111 is NaN
inline float minifloat(uint32_t bits, int e, int m, bool ieee) {
    int ex = int(bits >> m) & ((1 << e) - 1), man = int(bits) & ((1 << m) - 1), bias = (1 << (e - 1)) - 1;
    float v = ieee && ex == (1 << e) - 1           ? (man ? NAN : INFINITY)
              : !ieee && ex == (1 << e) - 1 && man == (1 << m) - 1 ? NAN
              : ex ? std::ldexp(float((1 << m) + man), ex - bias - m)
                   : std::ldexp(float(man), 1 - bias - m);
    return (bits >> (e + m)) & 1 ? -v : v;
}
inline float f32_bits(uint32_t w) {
    float f;
    std::memcpy(&f, &w, 4);
    return f;
}
inline float element_value(MmaType t, uint32_t bits) {
    switch (t) {
        case MmaType::kF16: return minifloat(bits, 5, 10, true);
        case MmaType::kBF16: return f32_bits(bits << 16);
        case MmaType::kTF32: return f32_bits(bits & 0xffffe000u);  // .tf32: 19 bits (the model truncates)
        case MmaType::kE4M3: return minifloat(bits, 4, 3, false);
        case MmaType::kE5M2: return minifloat(bits, 5, 2, true);
        case MmaType::kF32: return f32_bits(bits);
        default: return 0;
    }
}
inline int32_t element_int(MmaType t, uint32_t bits) { return t == MmaType::kS8 ? int8_t(bits) : int32_t(bits & 0xff); }

inline uint16_t f16_bits(float f) {  // round to nearest even
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint16_t sign = uint16_t((x >> 16) & 0x8000);
    x &= 0x7fffffff;
    if (x >= 0x7f800000) return sign | (x > 0x7f800000 ? 0x7e00 : 0x7c00);
    int e = int(x >> 23) - 127;
    uint32_t m = x & 0x7fffff;
    if (e == -127) e = -126;
    else m |= 0x800000;  // value m * 2^(e - 23)
    int shift = 13 + std::max(e, -14) - e;  // keep units of 2^(max(e, -14) - 10)
    if (shift > 25) return sign;
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
    uint32_t bits = e < -14 ? q : (uint32_t(e + 15) << 10) + q - 1024;
    return sign | uint16_t(std::min(bits, 0x7c00u));
}

inline unsigned element_bytes(MmaType t) {
    return t == MmaType::kF16 || t == MmaType::kBF16 ? 2 : t == MmaType::kTF32 || t == MmaType::kF32 ? 4 : 1;
}
inline bool integer_type(MmaType t) { return t == MmaType::kS8 || t == MmaType::kU8; }
inline bool fp8_type(MmaType t) { return t == MmaType::kE4M3 || t == MmaType::kE5M2; }
// A and B types one instruction takes: equal, or (PTX ISA .atype / .btype) e4m3 / e5m2 or s8 / u8 each
inline bool pair_ok(MmaType a, MmaType b) {
    return a == b || (fp8_type(a) && fp8_type(b)) || (integer_type(a) && integer_type(b));
}

// ------------------------------------------------------------ matrix products
// A (rows x K) and B (N x K, i.e. B^T), raw element bits; D = A B^T + C, accumulated in k order
// in float (f32 / f16 accumulators: every product of these inputs is exact in float) or int32.
struct Product {
    int rows = 0, n = 0, k = 0;
    MmaType ab = MmaType::kF16, bt = MmaType::kF16, acc = MmaType::kF32;  // A's type, B's, the accumulator's
    std::vector<uint32_t> a, b;  // a[r * k + kk], b[c * k + kk]
    std::vector<uint32_t> c;     // accumulators as 32-bit values (f16: in the low half)
    void compute() {
        // every element decoded once, not once per product it enters (rows x n x k of them)
        if (integer_type(ab)) {
            std::vector<int32_t> x(a.size()), y(b.size());
            for (size_t i = 0; i < a.size(); ++i) x[i] = element_int(ab, a[i]);
            for (size_t i = 0; i < b.size(); ++i) y[i] = element_int(bt, b[i]);
            for (int r = 0; r < rows; ++r)
                for (int col = 0; col < n; ++col) {
                    uint32_t s = c[r * n + col];  // s32: wraps
                    for (int kk = 0; kk < k; ++kk) s += uint32_t(x[r * k + kk] * y[col * k + kk]);
                    c[r * n + col] = s;
                }
            return;
        }
        std::vector<float> x(a.size()), y(b.size());
        for (size_t i = 0; i < a.size(); ++i) x[i] = element_value(ab, a[i]);
        for (size_t i = 0; i < b.size(); ++i) y[i] = element_value(bt, b[i]);
        for (int r = 0; r < rows; ++r)
            for (int col = 0; col < n; ++col) {
                uint32_t& out = c[r * n + col];
                float s = element_value(acc, out);
                for (int kk = 0; kk < k; ++kk) s += x[r * k + kk] * y[col * k + kk];
                if (acc == MmaType::kF16) out = f16_bits(s);
                else std::memcpy(&out, &s, 4);
            }
    }
};

// register fragments (PTX ISA "Matrix Fragments for mma.m16n8k16 / m16n8k8 / m16n8k32", and
// wgmma's "Register Fragments", which repeat them per warp w of the warpgroup for rows 16 w..):
// g = lane / 4, q = lane % 4, `per` = elements per 32-bit register (low bits first).
// A (16 x K): register i, element h: row g + 8 (i % 2), column per q + h + K/2 (i / 2)
// B (K x 8):  register i, element h: row per q + h + K/2 i, column g
// C/D (16 x 8 per n-block j): f32/s32 register 4 j + i: row g + 8 (i / 2), column 8 j + 2 q + i % 2;
// f16 register 2 j + i, half h: row g + 8 i, column 8 j + 2 q + h
inline uint32_t element_of(uint32_t word, unsigned eb, int h) {
    return eb == 4 ? word : (word >> (8 * eb * h)) & ((1u << (8 * eb)) - 1);
}
// C into the product (`zero`: scale-d false) or D out of one lane's accumulator registers
inline void move_c(Product& p, int row0, int lane, uint32_t* regs, bool out, bool zero = false) {
    bool f16 = p.acc == MmaType::kF16;
    for (int r = 0; r < (f16 ? p.n / 4 : p.n / 2); ++r) {
        if (out) regs[r] = 0;
        for (int h = 0; h < (f16 ? 2 : 1); ++h) {
            int j = f16 ? r / 2 : r / 4, i = f16 ? r % 2 : r % 4, row = lane / 4 + 8 * (f16 ? i : i / 2);
            uint32_t& v = p.c[(row0 + row) * p.n + 8 * j + 2 * (lane % 4) + (f16 ? h : i % 2)];
            if (out) regs[r] |= v << (16 * h);
            else v = zero ? 0 : f16 ? (regs[r] >> (16 * h)) & 0xffff : regs[r];
        }
    }
}
inline void gather_a(Product& p, int row0, int lane, const uint32_t* regs) {
    unsigned eb = element_bytes(p.ab), per = 4 / eb;
    for (int i = 0; i < 4; ++i)
        for (unsigned h = 0; h < per; ++h)
            p.a[(row0 + lane / 4 + 8 * (i % 2)) * p.k + per * (lane % 4) + h + p.k / 2 * (i / 2)] =
                element_of(regs[i], eb, h);
}

inline bool mma_shape_ok(MmaType ab, MmaType acc, int k) {
    bool f16in = ab == MmaType::kF16, fp8 = ab == MmaType::kE4M3 || ab == MmaType::kE5M2;
    if (k != int(32 / element_bytes(ab))) return false;  // K = 32 bytes: k16 f16/bf16, k8 tf32, k32 8-bit
    if (integer_type(ab)) return acc == MmaType::kS32;
    if (ab == MmaType::kF32 || ab == MmaType::kS32) return false;
    return acc == MmaType::kF32 || (acc == MmaType::kF16 && (f16in || fp8));
}

// mma.sync.aligned.m16n8kK.row.col (warp-collective); accumulators f32 / s32, or f16 for f16
// and (PTX ISA 8.7) e4m3 / e5m2 inputs; A of type `at`, B of `bt` (a pair pair_ok accepts)
inline void mma_sync(int m, int n, int k, MmaType at, MmaType bt, MmaType acc, const uint32_t* a, const uint32_t* b,
                     const uint32_t* c, uint32_t* d) {
    Fiber& f = self();
    MmaOperands& o = hopper().ops[self_id()];
    o = MmaOperands();
    o.m = m, o.n = n, o.k = k, o.ab = at, o.bt = bt, o.acc = acc, o.a = a, o.b = b, o.c = c, o.d = d;
    f.op = WarpOp::kMmaSync;
    warp_op(f);
}
// A and B of one type
inline void mma_sync(int m, int n, int k, MmaType ab, MmaType acc, const uint32_t* a, const uint32_t* b,
                     const uint32_t* c, uint32_t* d) {
    mma_sync(m, n, k, ab, ab, acc, a, b, c, d);
}

inline void mma_sync_op(int w0, int lanes) {
    auto& ops = hopper().ops;
    const MmaOperands& o = ops[w0];
    if (lanes != 32 || o.m != 16 || o.n != 8 || !mma_shape_ok(o.ab, o.acc, o.k) || !pair_ok(o.ab, o.bt)) {
        error(where(w0) + ": mma.sync shape m" + std::to_string(o.m) + "n" + std::to_string(o.n) + "k" +
              std::to_string(o.k) + " with these types is not modelled (m16n8k16 f16/bf16, m16n8k8 tf32, "
              "m16n8k32 8-bit; 32 lanes)");
        return;
    }
    Product p;
    p.rows = 16, p.n = 8, p.k = o.k, p.ab = o.ab, p.bt = o.bt, p.acc = o.acc;
    p.a.assign(16 * o.k, 0), p.b.assign(8 * o.k, 0), p.c.assign(16 * 8, 0);
    unsigned eb = element_bytes(o.ab), per = 4 / eb;
    for (int l = 0; l < 32; ++l) {
        const MmaOperands& q = ops[w0 + l];
        if (q.m != o.m || q.n != o.n || q.k != o.k || q.ab != o.ab || q.bt != o.bt || q.acc != o.acc) {
            error("warp divergence: " + where(w0 + l) + " issues a different mma.sync");
            return;
        }
        gather_a(p, 0, l, q.a);
        for (int i = 0; i < 2; ++i)
            for (unsigned h = 0; h < per; ++h)
                p.b[(l / 4) * o.k + per * (l % 4) + h + o.k / 2 * i] = element_of(q.b[i], eb, h);
        move_c(p, 0, l, const_cast<uint32_t*>(q.c), false);
    }
    p.compute();
    for (int l = 0; l < 32; ++l) move_c(p, 0, l, ops[w0 + l].d, true);
}

}  // namespace llgen_host

#include "wgmma.h"  // wgmma.mma_async / fence / commit_group / wait_group

namespace llgen_host {

inline bool mfma_op(int w0, int lanes);  // hip/mfma.h (included after this file)

inline bool hopper_warp_op(int w0, int lanes, WarpOp op) {
    if (op == WarpOp::kWgmma) return wgmma_op(w0);
    if (op == WarpOp::kMfma) return mfma_op(w0, lanes);
    mma_sync_op(w0, lanes);
    return true;
}

inline std::string deadlock_detail() {  // what the mbarrier / wgmma waiters wait for
    Block& b = *g_block;
    if (!b.hopper) return "";
    std::string out;
    int waiting = 0, first = -1, threads = int(b.fibers.size());
    for (int t = threads - 1; t >= 0; --t)
        if (b.fibers[t].state == State::kAsyncWait) ++waiting, first = t;
    if (first >= 0 && b.fibers[first].arg == kRegisterWait)
        return "; " + std::to_string(waiting) + " threads (first " + where(first) + ") wait in setmaxnreg.inc " +
               "for registers: the warp groups' budgets add up to more than the " + std::to_string(launch_regs()) +
               " a thread the CTA holds at launch (__launch_bounds__ of " + std::to_string(threads) + " threads)";
    auto it = first < 0 ? b.hopper->bars.end() : b.hopper->bars.find(b.fibers[first].arg);
    if (it != b.hopper->bars.end()) {
        const MBarrier& bar = it->second;
        out += "; " + std::to_string(waiting) + " threads (first " + where(first) + ") wait on the mbarrier at " +
               std::to_string(it->first) + " in its phase " + std::to_string(bar.phase - bar.base) + ", with " +
               std::to_string(bar.pending) + " of " + std::to_string(bar.count) + " arrivals and " +
               std::to_string(bar.tx) + " tx bytes pending";
    }
    for (int w0 = 0; w0 < threads; w0 += 32)
        if (b.fibers[w0].state == State::kWarpOp && b.fibers[w0].op == WarpOp::kWgmma)
            return out + "; warp " + std::to_string(w0 / 32) + " waits in a wgmma for the rest of its warpgroup";
    return out;
}

}  // namespace llgen_host
