// wgmma on the host SIMT runtime (included by hopper.h): PTX ISA "Asynchronous Warpgroup Level
// Matrix Multiply-Accumulate" -- wgmma.mma_async, wgmma.fence, wgmma.commit_group, wgmma.wait_group.
//
// A wgmma.mma_async the warpgroup issues is pending until the wgmma.wait_group N of a member leaves
// at most N of that member's newer committed groups in flight.  Then (the first member's covering
// wait; earlier wgmma of the warpgroup first, in issue order) it reads its shared operands and
// computes D; each member's accumulator registers receive D at that member's own covering wait.
//
// What it checks, each as one error line naming the thread, the warpgroup and the wgmma (its issue
// order in the warpgroup, shape and descriptors):
// * operand bytes: visible at the issue (written before it, TMA writes through their mbarrier
//   phase), then locked until the wgmma completes: a thread's st.shared, a TMA load landing there,
//   a cp.async -- any writer in between -- is a race (an operand stage released before the
//   wgmma.wait_group that covers its reads).  The reads are recorded as the completing member's, at
//   its wait; every member learns them at its own covering wait (so any member may release the stage).
// * accumulator registers: the wrapper hands the runtime their addresses.  At the issue their values
//   (C) are saved and the registers poisoned (kAccPoison, a NaN in f32 and in both f16 halves).
//   Reading one through the accumulator pin (`wait_acc`'s `detail::pin_*`, register_read) before the
//   covering wait, and writing one (found at the next chained issue or at the wait: the poison is
//   gone) are errors.  A plain C++ read in between is *not* seen: it reads the poison (a NaN, or a
//   garbage integer) -- and if no wait ever covers the wgmma, the exit check reports it.
// * a wgmma of a thread whose accumulator registers it may have touched since they were last
//   accessible (thread start, or a wait that landed them) needs a wgmma.fence first; accumulators
//   chained from an earlier wgmma still in flight need none (the ISA's exception for accumulators
//   of same-shape wgmma).  Stricter than the ISA after a wait that landed registers the thread then
//   did not touch.  A registers are taken by value at the issue: their later reuse is not checked.
// * a wgmma.wait_group with wgmma issued since the thread's last commit (the wait does not cover
//   them), and a thread exiting with wgmma in flight.
#pragma once

namespace llgen_host {

// PTX ISA "Asynchronous Warpgroup Level Matrix Shared Memory Layout": "Matrix Descriptor Format"
// (start address, leading/stride dimension byte offsets: bits 0-13, 16-29, 32-45, each >> 4;
// base offset: bits 49-51; layout: bits 62-63, 0 none, 1 128B, 2 64B, 3 32B swizzle) and the
// canonical layouts (CUTLASS cute/atom/mma_traits_sm90_gmma.hpp writes them as cute layouts):
// with e-byte elements, S = the swizzle span (16 without swizzle), element (mn, k), c = mn e:
//   K-major,  no swizzle: (mn % 8) 16 + (mn / 8) SBO + (k e) % 16 + (k e / 16) LBO
//   K-major,  swizzled:   (mn % 8) S  + (mn / 8) SBO + k e                        (LBO unused)
//   MN-major, no swizzle: c % 16 + (c / 16) SBO + (k % 8) 16 + (k / 8) LBO
//   MN-major, swizzled:   c % S  + (c / S)  LBO + (k % 8) S  + (k / 8) SBO
// then the swizzle of the absolute address (as TMA writes it) with the descriptor's base offset:
// the PTX ISA's "base offset = (pattern start addr >> 7) & 7" for a pattern that does not start
// at its repeat boundary, which an H200 reads as pattern row ((address >> 7) - base offset).
// (Measured there too: every layout above, start addresses advanced by 32 / 128 / 256 bytes.)
inline unsigned wgmma_address(uint64_t desc, bool mn_major, unsigned eb, int mn, int k) {
    unsigned start = unsigned(desc & 0x3fff) << 4, lbo = unsigned((desc >> 16) & 0x3fff) << 4,
             sbo = unsigned((desc >> 32) & 0x3fff) << 4, base = unsigned((desc >> 49) & 7),
             layout = unsigned(desc >> 62);
    unsigned bits = layout ? 4 - layout : 0, span = 16u << bits, c = unsigned(mn) * eb, off;
    if (!mn_major)
        off = bits ? (mn % 8) * span + (mn / 8) * sbo + k * eb
                   : (mn % 8) * 16 + (mn / 8) * sbo + (k * eb) % 16 + (k * eb / 16) * lbo;
    else
        off = bits ? c % span + (c / span) * lbo + (k % 8) * span + (k / 8) * sbo
                   : c % 16 + (c / 16) * sbo + (k % 8) * 16 + (k / 8) * lbo;
    return swizzle_address(start + off, bits, base);
}

// one wgmma error per launch: what follows the first (the same registers read by every member, the
// waits after a missing commit) are its consequences
inline void wg_error(const std::string& what) {
    if (!std::exchange(hopper().wg.said, true)) error(what);
}

inline std::string hex64(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%#llx", static_cast<unsigned long long>(v));
    return buf;
}

// "the wgmma #k of warpgroup g (m64nNkK, A descriptor .., B descriptor ..)"
inline std::string wgmma_name(const PendingWgmma& p) {
    return "the wgmma #" + std::to_string(p.order) + " of warpgroup " + std::to_string(p.group) + " (m64n" +
           std::to_string(p.o.n) + "k" + std::to_string(p.o.k) + ", A " +
           (p.a.empty() ? "descriptor " + hex64(p.o.a_desc) : std::string("in registers")) + ", B descriptor " +
           hex64(p.o.b_desc) + ")";
}

// an operand element at issue: visible when its write happens before any member's issue (`k`: the
// members' joined knowledge)
inline bool operand_visible(unsigned addr, unsigned bytes, int g0, const Knowledge& k) {
    Block& b = *g_block;
    HopperState& h = hopper();
    if (!check_range("wgmma operand load", addr, bytes, bytes, g0)) return false;
    for (unsigned i = 0; i < bytes; ++i) {
        Shadow& s = b.shadow[addr + i];
        bool member = s.writer >= g0 && s.writer < g0 + 128, visible;
        if (s.async >= 0)
            visible = seen_complete(k, h.writes[s.async]);
        else
            visible = s.writer >= 0 && (member || ordered(s.writer, s.write_epoch, s.write_wepoch, g0) ||
                                        (size_t(s.writer) < k.vc.size() && s.write_clk <= k.vc[s.writer]));
        if (s.writer < 0) {
            error(where(g0) + ": wgmma reads shared byte " + std::to_string(addr + i) + " before any thread wrote it");
        } else if (!visible) {
            bool explained = false;
            for (int t = g0; t < g0 + 128 && !explained; ++t) explained = parity_explains(t);
            if (!explained)
                error("race: the wgmma of " + where(g0) + "'s warpgroup reads shared byte " + std::to_string(addr + i) +
                      (s.async >= 0 ? " that a TMA load wrote, before any member saw its mbarrier phase complete"
                                    : " that " + where(s.writer) + " wrote, unordered before the wgmma"));
        }
        if (!b.errors.empty()) return false;
    }
    return true;
}

// wgmma.mma_async.sync.aligned.m64nNkK (warpgroup-collective): `d` the addresses of this thread's
// `nd` accumulator registers (32-bit each), in the instruction's order; `a_regs` A's 4 words, or
// nullptr with A through `a_desc`.  The registers must stay where they are until the covering wait.
// A of type `at`, B of `bt` (a pair pair_ok accepts).
inline void wgmma(int n, MmaType at, MmaType bt, MmaType acc, bool tnsp_a, bool tnsp_b, uint64_t a_desc,
                  const uint32_t* a_regs, uint64_t b_desc, void* const* d, int nd, bool scale_d) {
    Fiber& f = self();
    MmaOperands& o = hopper().ops[self_id()];
    o = MmaOperands();
    o.m = 64, o.n = n, o.k = int(32 / element_bytes(at)), o.ab = at, o.bt = bt, o.acc = acc, o.tnsp_a = tnsp_a,
    o.tnsp_b = tnsp_b, o.a_desc = a_desc, o.a = a_regs, o.b_desc = b_desc, o.dregs = d, o.nd = nd, o.scale_d = scale_d;
    f.op = WarpOp::kWgmma;
    warp_op(f);
}

// A and B of one type
inline void wgmma(int n, MmaType ab, MmaType acc, bool tnsp_a, bool tnsp_b, uint64_t a_desc, const uint32_t* a_regs,
                  uint64_t b_desc, void* const* d, int nd, bool scale_d) {
    wgmma(n, ab, ab, acc, tnsp_a, tnsp_b, a_desc, a_regs, b_desc, d, nd, scale_d);
}

// the same with the accumulator registers contiguous at `d` (n / 2 words; .f16: n / 4)
inline void wgmma(int n, MmaType ab, MmaType acc, bool tnsp_a, bool tnsp_b, uint64_t a_desc, const uint32_t* a_regs,
                  uint64_t b_desc, uint32_t* d, bool scale_d) {
    std::vector<void*> regs(acc == MmaType::kF16 ? n / 4 : n / 2);
    for (size_t i = 0; i < regs.size(); ++i) regs[i] = d + i;
    wgmma(n, ab, acc, tnsp_a, tnsp_b, a_desc, a_regs, b_desc, regs.data(), int(regs.size()), scale_d);
}

inline WgmmaState& wgmma_state() {
    HopperState& h = hopper();
    WgmmaState& w = h.wg;
    if (w.open.empty()) {
        size_t n = g_block->fibers.size();
        w.open.resize(n), w.groups.resize(n), w.fenced.assign(n, 0), w.issued.assign(n / 128 + 1, 0);
    }
    return w;
}

// wgmma.fence: the thread's register accesses before it are ordered before the next wgmma
inline void wgmma_fence() { wgmma_state().fenced[self_id()] = 1; }

// wgmma.commit_group: the thread's wgmma since the last commit form a group (possibly empty)
inline void wgmma_commit_group() {
    WgmmaState& w = wgmma_state();
    int t = self_id();
    w.groups[t].push_back(std::move(w.open[t]));
    w.open[t].clear();
}

inline uint32_t reg_value(const void* r) {
    uint32_t v;
    std::memcpy(&v, r, 4);
    return v;
}

inline bool wgmma_n_ok(MmaType ab, int n) {
    if (n < 8 || n > 256 || n % 8) return false;
    return !integer_type(ab) || n <= 24 || n % 16 == 0;  // .s8/.u8: 8, 16, 24, then multiples of 16
}

// the warpgroup of the warp at w0 issues its wgmma once all four warps wait in it: operands checked
// and locked, accumulators saved and poisoned; nothing is computed yet
inline bool wgmma_op(int w0) {
    Block& b = *g_block;
    HopperState& h = hopper();
    int group = w0 / 128, g0 = 128 * group, threads = int(b.fibers.size());
    if (b.warp_size != 32) {
        error("wgmma needs 32-lane warps");
        return true;
    }
    for (int w = g0; w < g0 + 128; w += 32) {
        bool exited = w < threads;
        for (int l = 0; l < 32 && w + l < threads; ++l) exited = exited && b.fibers[w + l].state == State::kDone;
        if (w >= threads || exited) {
            error("wgmma of warpgroup " + std::to_string(group) + ": its warp " + std::to_string(w / 32) +
                  (w >= threads ? " is not in the block (" + std::to_string(threads) + " threads)" : " has exited"));
            return true;
        }
        for (int l = 0; l < 32; ++l)
            if (w + l >= threads || b.fibers[w + l].state != State::kWarpOp || b.fibers[w + l].op != WarpOp::kWgmma)
                return false;  // not all members issued it yet
    }
    const MmaOperands& o = h.ops[g0];
    Knowledge k;
    for (int t = g0; t < g0 + 128; ++t) {
        const MmaOperands& q = h.ops[t];
        if (q.n != o.n || q.ab != o.ab || q.bt != o.bt || q.acc != o.acc || q.tnsp_a != o.tnsp_a || q.tnsp_b != o.tnsp_b ||
            q.a_desc != o.a_desc || q.b_desc != o.b_desc || (q.a == nullptr) != (o.a == nullptr) ||
            q.scale_d != o.scale_d || q.nd != o.nd) {
            error("warpgroup divergence: " + where(t) + " issues a different wgmma than " + where(g0));
            return true;
        }
        k.join(h.know[t]);
        if (k.vc.size() <= size_t(t)) k.vc.resize(t + 1, 0);
        k.vc[t] = std::max(k.vc[t], b.fibers[t].clk);  // the members' own accesses before the issue
    }
    bool sixteen = o.ab == MmaType::kF16 || o.ab == MmaType::kBF16;
    if (!wgmma_n_ok(o.ab, o.n) || !mma_shape_ok(o.ab, o.acc, o.k) || !pair_ok(o.ab, o.bt) ||
        ((o.tnsp_a || o.tnsp_b) && !sixteen)) {
        error(where(g0) + ": wgmma m64n" + std::to_string(o.n) + "k" + std::to_string(o.k) +
              " with these types / transposes is not a PTX wgmma");
        return true;
    }
    int nd = o.acc == MmaType::kF16 ? o.n / 4 : o.n / 2;
    if (o.nd != nd) {
        error(where(g0) + ": wgmma m64n" + std::to_string(o.n) + " with " + std::to_string(o.nd) +
              " accumulator registers (it has " + std::to_string(nd) + ")");
        return true;
    }
    WgmmaState& w = wgmma_state();
    int id = int(w.ops.size());
    w.ops.emplace_back();
    PendingWgmma& p = w.ops.back();
    p.group = group, p.order = ++w.issued[group], p.o = o, p.nd = nd;
    p.o.a = nullptr, p.o.dregs = nullptr;
    unsigned eb = element_bytes(o.ab);
    for (int kk = 0; kk < o.k; ++kk) {
        for (int r = 0; r < 64 && !o.a; ++r) p.addrs.push_back(wgmma_address(o.a_desc, o.tnsp_a, eb, r, kk));
        for (int c = 0; c < o.n; ++c) p.addrs.push_back(wgmma_address(o.b_desc, o.tnsp_b, eb, c, kk));
    }
    for (unsigned a : p.addrs)
        if (!operand_visible(a, eb, g0, k)) return true;
    p.regs.resize(128 * nd), p.c.assign(128 * nd, 0), p.chain.assign(128 * nd, {-1, 0});
    if (o.a) p.a.resize(128 * 4);
    for (int t = 0; t < 128; ++t) {
        const MmaOperands& q = h.ops[g0 + t];
        if (o.a) std::copy(q.a, q.a + 4, p.a.begin() + 4 * t);
        bool chained_all = true;
        for (int i = 0; i < nd; ++i) {
            void* r = q.dregs[i];
            p.regs[t * nd + i] = r;
            auto it = w.owner.find(r);
            if (it != w.owner.end() && it->second.id == id) {
                error(where(g0 + t) + ": " + wgmma_name(p) + " names one accumulator register twice (d" +
                      std::to_string(it->second.i) + " and d" + std::to_string(i) + ")");
                return true;
            }
            if (it != w.owner.end()) {  // in flight: C is the earlier wgmma's D (same-shape chaining)
                const PendingWgmma& prev = w.ops[it->second.id];
                if (reg_value(r) != kAccPoison) {
                    wg_error(where(g0 + t) + " wrote its accumulator register d" + std::to_string(it->second.i) + " of " +
                          wgmma_name(prev) + " while it was in flight (before a wgmma.wait_group covered it)");
                    return true;
                }
                p.chain[t * nd + i] = {it->second.id, it->second.t * prev.nd + it->second.i};
            } else {
                chained_all = false;
                p.c[t * nd + i] = reg_value(r);
                std::memcpy(r, &kAccPoison, 4);
            }
            w.owner[r] = {id, t, i};
        }
        if (!chained_all && !w.fenced[g0 + t]) {
            wg_error(where(g0 + t) + ": missing wgmma.fence before " + wgmma_name(p) + " (PTX ISA: before the first "
                  "wgmma, and between the thread's register accesses and a wgmma using them; its accumulator registers "
                  "were its own since thread start or the wgmma.wait_group that wrote them)");
            return true;
        }
    }
    for (unsigned a : p.addrs)
        for (unsigned j = 0; j < eb; ++j) {
            ++b.shadow[a + j].tma_reads;  // locked until the wgmma completes
            w.reader[a + j] = id;
        }
    for (int t = 0; t < 128; ++t) {
        w.open[g0 + t].push_back(id);
        b.fibers[g0 + t].state = State::kRunnable;
    }
    return true;
}

// the wgmma `id` completes (at member c's covering wait): its operands are read and D computed
inline void wgmma_complete(int id, int c) {
    Block& b = *g_block;
    WgmmaState& w = wgmma_state();
    if (w.ops[id].computed) return;
    for (int e = 0; e < id; ++e)  // the warpgroup's earlier wgmma first: they complete in issue order
        if (w.ops[e].group == w.ops[id].group && !w.ops[e].computed) wgmma_complete(e, c);
    PendingWgmma& p = w.ops[id];
    const MmaOperands& o = p.o;
    unsigned eb = element_bytes(o.ab);
    Product prod;
    prod.rows = 64, prod.n = o.n, prod.k = o.k, prod.ab = o.ab, prod.bt = o.bt, prod.acc = o.acc;
    prod.a.assign(64 * o.k, 0), prod.b.assign(o.n * o.k, 0), prod.c.assign(64 * o.n, 0);
    size_t at = 0;
    for (int kk = 0; kk < o.k; ++kk) {
        for (int r = 0; r < 64 && p.a.empty(); ++r, ++at) std::memcpy(&prod.a[r * o.k + kk], b.shared + p.addrs[at], eb);
        for (int col = 0; col < o.n; ++col, ++at) std::memcpy(&prod.b[col * o.k + kk], b.shared + p.addrs[at], eb);
    }
    for (unsigned a : p.addrs)  // the reads, as member c's at this wait; the bytes unlocked
        for (unsigned j = 0; j < eb; ++j) {
            Shadow& s = b.shadow[a + j];
            s.reader = c, s.read_epoch = b.epoch, s.read_wepoch = b.warp_epoch[c / 32], s.read_clk = b.fibers[c].clk;
            if (--s.tma_reads == 0) w.reader.erase(a + j);
        }
    std::vector<uint32_t> regs(p.nd);
    for (int t = 0; t < 128; ++t) {
        for (int i = 0; i < p.nd; ++i) {
            auto [from, idx] = p.chain[t * p.nd + i];
            regs[i] = from >= 0 ? w.ops[from].d[idx] : p.c[t * p.nd + i];
        }
        if (!p.a.empty()) gather_a(prod, 16 * (t / 32), t % 32, &p.a[4 * t]);
        move_c(prod, 16 * (t / 32), t % 32, regs.data(), false, !o.scale_d);
    }
    prod.compute();
    p.d.assign(128 * p.nd, 0);
    for (int t = 0; t < 128; ++t) move_c(prod, 16 * (t / 32), t % 32, &p.d[t * p.nd], true);
    p.computed = true, p.completer = c, p.stamp = b.fibers[c].clk;
}

// member t's covering wait of the completed wgmma `id`: its registers receive D (unless a later
// chained wgmma in flight owns them), and it learns the operand reads
inline void wgmma_land(int id, int t) {
    using Owner = WgmmaState::Owner;
    WgmmaState& w = wgmma_state();
    PendingWgmma& p = w.ops[id];
    int m = t - 128 * p.group;
    for (int i = 0; i < p.nd; ++i) {
        void* r = p.regs[m * p.nd + i];
        auto it = w.owner.find(r);
        bool mine = it != w.owner.end() && it->second.id == id;
        if (reg_value(r) != kAccPoison) {  // name the wgmma in flight that owns it
            const Owner& o = it != w.owner.end() ? it->second : Owner{id, m, i};
            wg_error(where(t) + " wrote its accumulator register d" + std::to_string(o.i) + " of " +
                     wgmma_name(w.ops[o.id]) + " while it was in flight (before a wgmma.wait_group covered it)");
            return;
        }
        if (mine) {
            std::memcpy(r, &p.d[m * p.nd + i], 4);
            w.owner.erase(it);
        }
    }
    Knowledge& k = hopper().know[t];
    if (k.vc.size() <= size_t(p.completer)) k.vc.resize(g_block->fibers.size(), 0);
    k.vc[p.completer] = std::max(k.vc[p.completer], p.stamp);
    w.fenced[t] = 0;  // its registers are the thread's again: the next wgmma needs a fence
}

// wgmma.wait_group N: the thread's committed groups but the newest N complete and land
inline void wgmma_wait_group(int n) {
    WgmmaState& w = wgmma_state();
    int t = self_id();
    if (!w.open[t].empty()) {
        wg_error(where(t) + ": wgmma.wait_group " + std::to_string(n) + " with " + wgmma_name(w.ops[w.open[t][0]]) +
              (w.open[t].size() > 1 ? " and " + std::to_string(w.open[t].size() - 1) + " more" : std::string()) +
              " not committed (no wgmma.commit_group since the issue): the wait does not cover it");
        return;
    }
    auto& groups = w.groups[t];
    while (groups.size() > size_t(n < 0 ? 0 : n)) {
        for (int id : groups.front()) {
            wgmma_complete(id, t);
            wgmma_land(id, t);
        }
        groups.erase(groups.begin());
    }
}

// a read of a register (the accumulator pin after wait_acc's wait): an error while a wgmma in
// flight writes it
inline void register_read(const void* r) {
    if (!g_block->hopper) return;
    WgmmaState& w = g_block->hopper->wg;
    auto it = w.owner.find(r);
    if (it == w.owner.end()) return;
    const PendingWgmma& p = w.ops[it->second.id];
    wg_error(where(self_id()) + " reads its accumulator register d" + std::to_string(it->second.i) + " of " +
          wgmma_name(p) + " before a wgmma.wait_group covered it (the wgmma is in flight)");
}

inline int wgmma_reader_group(unsigned addr) {
    WgmmaState& w = hopper().wg;
    auto it = w.reader.find(addr);
    return it == w.reader.end() ? -1 : w.ops[it->second].group;
}

inline std::string wgmma_reader(unsigned addr) {
    WgmmaState& w = hopper().wg;
    auto it = w.reader.find(addr);
    if (it == w.reader.end()) return "";
    return wgmma_name(w.ops[it->second]) + " still reads (no wgmma.wait_group covered it: the operand was "
           "released before the wgmma completed)";
}

inline void wgmma_exit_check() {
    WgmmaState& w = hopper().wg;
    for (size_t t = 0; t < w.open.size(); ++t) {
        int id = !w.open[t].empty() ? w.open[t][0] : -1;
        for (size_t g = 0; g < w.groups[t].size() && id < 0; ++g)
            if (!w.groups[t][g].empty()) id = w.groups[t][g][0];
        if (id >= 0) {
            error(where(int(t)) + " exits with " + wgmma_name(w.ops[id]) + " in flight: no wgmma.wait_group "
                  "covered it, so its accumulator registers are never written");
            return;
        }
    }
}

}  // namespace llgen_host
