// The work of one Hopper GEMM launch (examples/kernels/gemm_hopper.h): the tile shape of C and how K
// is split, chosen per (M, N, K) on the host.  Plain C++ (no CUDA), so the choice is unit-tested on
// any machine (tests/test_gemm_hopper_plan.py compiles this header alone and reads its table).
//
// Units of work.  C is cut into tiles of 128 x bn (bn 256, 192 or 128), numbered in grouped order.  The
// first `dp` tiles are computed whole, each by one unit ("data parallel").  The k-steps of the tiles
// after them (the tail: (tiles - dp) ksteps k-steps, tile after tile) are dealt to `shares` units in
// even consecutive ranges: share c holds tail k-steps [c I / shares, (c + 1) I / shares), I = (tiles -
// dp) ksteps.  A share's range cut at tile boundaries is its pieces; a tile of the tail is cut into
// pieces by one or more consecutive shares.  Two ways to deal the tail:
//
//   split K (splits = S >= 2):  shares = (tiles - dp) S, so share c holds range c % S of K of tail tile
//                               c / S: k-steps [r ksteps / S, (r + 1) ksteps / S) -- one piece each;
//   stream K (splits = STREAM_K): shares = sms (one a CTA of the persistent grid), dp = all but the last
//                               full round of tiles, so each share holds between one and two tiles' worth
//                               and a tile is cut where two shares meet (two pieces, or more when
//                               a share holds less than a tile).  Asked for only (plan()'s splits_want):
//                               on the H200 it ran 3-9% below the unsplit plan where it models 5%
//                               above (3000 x 5000 x 4000, 128 x 256: 507 against 553 TFLOP/s, f16;
//                               e4m3 1090 against 1173) and at par on 8192^3.  Likely (not measured):
//                               concurrent shares read their operand panels at k-steps spread over all
//                               of K, where whole tiles of a round read the same k-step of shared
//                               panels, so L2 would serve less.
//
// A piece that is not a whole tile writes its f32 partial tile to a workspace slot (a share's first
// piece: slot c; its last, when that is partial too: slot shares + c); the unit that finishes a tile's
// last piece (a counter per tail tile in global memory) sums the pieces in share order -- an order
// fixed by the plan, not by which CTA came last, so C is bit-identical run to run -- and runs the
// epilogue.  Unit u < dp is tile u; unit dp + c is share c.  A persistent grid walks the units u =
// blockIdx.x, + gridDim.x, ..; the shares come after every whole tile, in the last rounds.
//
// The choice (plan()): minimise a modelled time over bn in {256, 192, 128} and the ways to deal the
// tail (none, splits 2 .. 16), in units of one k-step of a 128 x 256 tile on one SM:
//
//   a k-step of a 128 x bn tile      costs  c(bn) = 0.1 + 0.9 bn / 256: c(256) = 1, c(192) = 0.775,
//                                           c(128) = 0.55.  A part proportional to the MACs, and a part
//                                           each k-step pays whatever its width (the full/empty barriers,
//                                           the TMA issue, the fences, the A tile every wgmma reads):
//                                           fitted to 128's measured 0.55 (half the MACs, not quite half
//                                           the time), 192 interpolated.  Its two wgmma (m64n128 +
//                                           m64n64) read the A tile twice: 40 KB of shared memory per
//                                           3/4 of 256's MACs, as 256 reads 40 KB for all of them
//                                           (104 B/clk at full rate against 80; the 128-byte/clk port
//                                           is not the limit), so no more than 128's overhead.
//   writing or reading one f32       costs  p(bn) = 2.5 bn / 128  (64 KB per 128 columns; measured on the
//   partial tile on one SM                  H200: a round of 128 x 256 partials, 17 MB from 132 SMs, takes
//                                           about 5 k-steps -- the 3000 x 5000 x 4000 tail split in 3 ran
//                                           546 TFLOP/s against 560 unsplit, 512 x 512 x 8192 in 8 ranges
//                                           2.3x its unsplit speed, as this cost predicts)
//   unsplit (splits 1, dp = tiles):  ceil(tiles / sms) * ksteps * c
//   split (splits S >= 2):           the full rounds W = floor(tiles / sms) stay whole (dp = W sms), the
//                                    tail's tail * S units take R = ceil(tail * S / sms) rounds:
//                                    W * ksteps * c + R * (ceil(ksteps / S) * c + p) + S * p
//                                    (each unit writes its partial; the last one reads S partials)
//   stream K (reported, not chosen): W' = max(W - 1, 0) full rounds whole (dp = W' sms), a share of
//                                    L = I / sms k-steps each: W' * ksteps * c + ceil(L) * c +
//                                    (1 + ceil(ksteps / L)) * p (a share writes its first piece; the
//                                    unit finishing a tile reads the others, at most ceil(ksteps / L));
//                                    it leaves out whatever costs the measured difference
//
// Splits need a tail (tiles not a multiple of sms), at least MIN_KSTEPS k-steps per range, and S <= 16;
// a split plan is taken only when its modelled time is below SPLIT_GAIN of the best unsplit one (the
// model is coarse and a split costs a workspace).  Ties go to the larger tile, then fewer splits.
// Examples on 132 SMs, 16-bit operands (64-deep k-steps): 512 x 512 x 8192 -> 128 x 128, 5 splits (16
// tiles -> 80 units; fp8: 4 splits); 3000 x 5000 x 4000 -> 128 x 192 unsplit (648 tiles, 4.91 rounds:
// 5 x 63 x 0.775 = 244 against 128 x 256's 480 tiles, 3.64 rounds: 4 x 63 = 252; splitting 256's
// 84-tile tail in 3 models 256: the partials' traffic eats the last round's gain); 4096^3 -> 128 x 256
// unsplit (512 tiles: 4 x 64 = 256; 192's 704 tiles take 6 rounds, 298); 8192^3 stays 128 x 256
// (2048 against 192's 2083).
#pragma once

namespace gemm_hopper {

constexpr int PLAN_BM = 128;           // every tile shape has 128 rows (two consumer warp groups of 64)
constexpr int MAX_SPLITS = 16;
constexpr int STREAM_K = -1;           // Plan::splits of a tail dealt by stream K (see the top of this file)
constexpr int MIN_KSTEPS = 4;          // k-steps per split range, at least
constexpr double SPLIT_GAIN = 0.97;    // a split plan must model at least 3% faster than the best unsplit one

// One launch's work.  bn: 256, 192 or 128; splits: 1 (no tail), S >= 2 or STREAM_K; dp: tiles computed
// whole (all of them when splits is 1); shares: the units the tail's k-steps are dealt to (0 when splits
// is 1); units = dp + shares; grid: CTAs launched; workspace: f32 elements of the partial tiles (one
// 128 x bn slot a share, two for stream K); counters: ints, one per tail tile, zero between launches;
// cost: the modelled time (k-steps of a 128 x 256 tile).
struct Plan {
    int bn, splits, dp, tiles, ksteps, shares, units, grid;
    long long workspace;
    int counters;
    double cost;
};

#if defined(__CUDACC__)
#define GEMM_HOPPER_HD __host__ __device__
#else
#define GEMM_HOPPER_HD
#endif

// The k-steps [kb, ke) of `tile` one unit computes: the pos-th of the `parts` pieces the tile is cut
// into (parts 1: the whole tile), parking in workspace slot `slot` when parts > 1.
struct Piece {
    int tile, kb, ke, pos, parts, slot;
};

// The units of one launch over `tiles` tiles of `ksteps` k-steps: dp whole tiles, then the tail dealt to
// `shares` units (see the top of this file); the kernel walks them, the host checks them.
struct Units {
    int tiles, ksteps, dp, shares;
    GEMM_HOPPER_HD int count() const { return dp + shares; }
    // The tail's k-steps, I, and the first of share c's: c I / shares (never empty while shares <= I).
    GEMM_HOPPER_HD long long tail_steps() const { return static_cast<long long>(tiles - dp) * ksteps; }
    GEMM_HOPPER_HD long long share_begin(int c) const { return c * tail_steps() / shares; }
    // The share holding tail k-step x: the largest c with c I / shares <= x.
    GEMM_HOPPER_HD int share_of(long long x) const {
        return static_cast<int>(((x + 1) * shares + tail_steps() - 1) / tail_steps() - 1);
    }
    // Piece i of unit u (false past its last): a whole tile u < dp, else share c = u - dp's i-th
    // tile from its first, cut to the share's k-steps.
    GEMM_HOPPER_HD bool piece(int u, int i, Piece& p) const {
        if (u < dp) {
            p = Piece{u, 0, ksteps, 0, 1, 0};
            return i == 0;
        }
        const int c = u - dp;
        const long long lo = share_begin(c), hi = share_begin(c + 1), t = lo / ksteps + i, t0 = t * ksteps;
        if (t0 >= hi) return false;
        const int first = share_of(t0);
        p.tile = dp + static_cast<int>(t);
        p.kb = lo > t0 ? static_cast<int>(lo - t0) : 0;
        p.ke = hi < t0 + ksteps ? static_cast<int>(hi - t0) : ksteps;
        p.pos = c - first;
        p.parts = share_of(t0 + ksteps - 1) - first + 1;
        p.slot = i == 0 ? c : shares + c;
        return true;
    }
    // The workspace slot of tail tile `tile`'s piece `pos`: its share's first piece or its last.
    GEMM_HOPPER_HD int slot(int tile, int pos) const {
        const long long t = tile - dp;
        const int c = share_of(t * ksteps) + pos;
        return share_begin(c) / ksteps == t ? c : shares + c;
    }
};

inline int plan_ceil(long long a, long long b) { return static_cast<int>((a + b - 1) / b); }
// c(bn): the modelled time of one k-step of a 128 x bn tile (see the top of this file).
inline double plan_kstep_cost(int bn) { return 0.1 + 0.9 * bn / 256.0; }

// The plan of tile width bn and `splits` (1, S >= 2 or STREAM_K; dp: -1 for the rule above, else the
// whole tiles).  sms <= 0: no SM count (one CTA per unit; stream K: a share per tail tile).  Stream K
// deals the tail to min(sms, its k-steps) shares.  persistent: the grid is min(sms, units).
inline Plan plan_fixed(int M, int N, int K, int kK, int sms, bool persistent, int bn, int splits, int dp = -1) {
    Plan p{};
    p.bn = bn;
    p.splits = splits == STREAM_K || splits > 1 ? splits : 1;
    p.tiles = plan_ceil(M, PLAN_BM) * plan_ceil(N, bn);
    p.ksteps = plan_ceil(K, kK);
    const double c = plan_kstep_cost(bn), partial = 2.5 * bn / 128.0;
    const int round = sms > 0 ? sms : p.tiles;          // CTAs a round (no SM count: every unit at once)
    const int rounds = sms > 0 ? p.tiles / sms : 0;     // full rounds of whole tiles
    auto whole = [&] { return static_cast<double>(p.dp) / round * p.ksteps * c; };  // the dp tiles' time
    if (p.splits == 1) {
        p.dp = p.tiles;
        p.cost = plan_ceil(p.tiles, round) * static_cast<double>(p.ksteps) * c;
    } else if (p.splits == STREAM_K) {
        p.dp = dp >= 0 ? dp : (rounds > 1 ? rounds - 1 : 0) * sms;
        const long long steps = static_cast<long long>(p.tiles - p.dp) * p.ksteps;
        const long long want = sms > 0 ? sms : p.tiles - p.dp;
        p.shares = static_cast<int>(want < steps ? want : steps);
        p.cost = whole();
        if (p.shares)  // a share's k-steps, its first piece written, the others of a tile read
            p.cost += plan_ceil(steps, p.shares) * c +
                      (1 + plan_ceil(static_cast<long long>(p.ksteps) * p.shares, steps)) * partial;
    } else {
        p.dp = dp >= 0 ? dp : rounds * sms;
        const int tail = p.tiles - p.dp;
        p.shares = tail * splits;
        const int tail_rounds = plan_ceil(static_cast<long long>(tail) * splits, sms > 0 ? sms : tail * splits);
        p.cost = whole() + tail_rounds * (plan_ceil(p.ksteps, splits) * c + partial) + splits * partial;
    }
    p.units = p.dp + p.shares;
    p.grid = persistent && sms > 0 && sms < p.units ? sms : p.units;
    p.workspace = static_cast<long long>(p.shares) * (p.splits == STREAM_K ? 2 : 1) * PLAN_BM * bn;
    p.counters = p.shares ? p.tiles - p.dp : 0;
    return p;
}

// The plan of least modelled time (see the top of this file).  bn_want: 0 to choose, else 256, 192 or
// 128; splits_want: 0 to choose, 1 for none, S >= 2 to cut every tile into S ranges (dp = 0), STREAM_K for
// stream K (the rule's dp).  with192: whether the kernel has 128 x 192 tiles to choose (the fp8 GEMM's B
// given K x N has not).
inline Plan plan(int M, int N, int K, int kK, int sms, bool persistent, int bn_want = 0, int splits_want = 0,
                 bool with192 = true) {
    if (splits_want >= 2) return plan_fixed(M, N, K, kK, sms, persistent, bn_want ? bn_want : 256, splits_want, 0);
    if (splits_want == STREAM_K) return plan_fixed(M, N, K, kK, sms, persistent, bn_want ? bn_want : 256, STREAM_K);
    Plan best{}, best_split{};
    bool have = false, have_split = false;
    for (int i = 0; i < 3; ++i) {
        const int bn = i == 0 ? 256 : i == 1 ? 192 : 128;  // ties: the first, the larger tile
        if ((bn_want && bn != bn_want) || (bn == 192 && !with192)) continue;
        const Plan whole = plan_fixed(M, N, K, kK, sms, persistent, bn, 1);
        if (!have || whole.cost < best.cost) best = whole, have = true;
        if (splits_want == 1 || sms <= 0) continue;
        const int tail = whole.tiles % sms;
        if (tail == 0) continue;
        for (int s = 2; s <= MAX_SPLITS && s * MIN_KSTEPS <= whole.ksteps; ++s) {
            const Plan sp = plan_fixed(M, N, K, kK, sms, persistent, bn, s);
            if (!have_split || sp.cost < best_split.cost) best_split = sp, have_split = true;
        }
    }
    return have_split && best_split.cost < SPLIT_GAIN * best.cost ? best_split : best;
}

}  // namespace gemm_hopper

#undef GEMM_HOPPER_HD
