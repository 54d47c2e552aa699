"""The Hopper GEMMs' choice of tile shape and split of K (examples/kernels/gemm_hopper_plan.h), without
a GPU: the header is plain C++, compiled here with the host compiler and asked for its plans.

* The table: the eight shapes bench/bench_gemm.py holds the GEMMs to, on 132 SMs, for 16-bit operands
  (64-deep k-steps) and fp8 (128-deep) -- 512 x 512 x 8192 takes 128 x 128 tiles and splits K, the
  ragged 3000 x 5000 x 4000 takes 128 x 192 tiles (648 of them fill 4.91 waves of 132 SMs where
  128 x 256's 480 fill 3.64), every other shape stays 128 x 256 and unsplit.
* The rule: a model written here from the header's comment (the modelled times, the candidates, the
  3% margin, the ties) picks the same plan as the header on random shapes and SM counts.
* The plan's invariants: units = dp + shares (split K: (tiles - dp) * splits shares; stream K: one a
  SM, after all but the last full round of tiles), every range and share holds a k-step, the grid is
  at most the SMs and the units, the workspace holds one 128 x bn f32 tile per share (stream K: two),
  a forced split cuts every tile.
* Stream K's pieces, from the header's own Schedule (the kernel's): every tail k-step in exactly one
  piece, in share order, each tile's pieces numbered 0 .. parts - 1, every partial piece in a slot of
  its own.
"""
from __future__ import annotations

import math
import os

import numpy as np
import pytest

from ll_codegen.run import host
from toolchain import need, run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.compile

HEADER = os.path.join(ROOT, "examples", "kernels", "gemm_hopper_plan.h")

PROGRAM = r"""
#include "%s"
#include <cstdio>
// stdin: M N K kK sms persistent bn splits per line; stdout: the plan's fields per line
int main() {
    int M, N, K, kK, sms, persistent, bn, splits;
    while (std::scanf("%%d %%d %%d %%d %%d %%d %%d %%d", &M, &N, &K, &kK, &sms, &persistent, &bn, &splits) == 8) {
        const gemm_hopper::Plan p = gemm_hopper::plan(M, N, K, kK, sms, persistent != 0, bn, splits);
        std::printf("%%d %%d %%d %%d %%d %%d %%d %%d %%lld %%d %%.6f\n", p.bn, p.splits, p.dp, p.tiles, p.ksteps, p.shares,
                    p.units, p.grid, p.workspace, p.counters, p.cost);
    }
    return 0;
}
"""
FIELDS = ("bn", "splits", "dp", "tiles", "ksteps", "shares", "units", "grid", "workspace", "counters", "cost")
STREAM_K = -1


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    """plans(rows) -> one dict of the plan's fields per (M, N, K, kK, sms, persistent, bn, splits) row."""
    cxx = host.compiler()
    if cxx is None:
        need("hipcc")  # Debian's hipcc brings clang++: skip (or fail under CI) with that reason
    d = tmp_path_factory.mktemp("gemm_plan")
    src, exe = d / "plan.cpp", d / "plan"
    src.write_text(PROGRAM % HEADER)
    rc, out = run([cxx, "-std=c++17", "-O1", "-Wall", "-Werror", "-o", str(exe), str(src)], str(d))
    assert rc == 0, out

    def ask(rows):
        (d / "in.txt").write_text("".join(" ".join(map(str, r)) + "\n" for r in rows))
        rc, out = run(["sh", "-c", f"{exe} < {d / 'in.txt'}"], str(d))
        assert rc == 0, out
        lines = out.strip().splitlines()
        assert len(lines) == len(rows)
        return [dict(zip(FIELDS, (float(x) if k == "cost" else int(x) for k, x in zip(FIELDS, ln.split()))))
                for ln in lines]
    return ask


SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (2048, 8192, 4096), (4096, 4096, 1024), (3000, 5000, 4000),
          (1024, 4096, 8192), (8192, 8192, 512), (512, 512, 8192)]
#: (bn, splits, dp) on 132 SMs: 16-bit operands (kK 64), fp8 (kK 128)
TABLE = {64: [(256, 1, 512), (256, 1, 2048), (256, 1, 512), (256, 1, 512), (192, 1, 648), (256, 1, 128),
              (256, 1, 2048), (128, 5, 0)],
         128: [(256, 1, 512), (256, 1, 2048), (256, 1, 512), (256, 1, 512), (192, 1, 648), (256, 1, 128),
               (256, 1, 2048), (128, 4, 0)]}


@pytest.mark.parametrize("kk", [64, 128], ids=["16-bit", "fp8"])
def test_gemm_plan_table_of_the_bench_shapes(plans, kk):
    got = plans([(M, N, K, kk, 132, 1, 0, 0) for M, N, K in SHAPES])
    assert [(p["bn"], p["splits"], p["dp"]) for p in got] == TABLE[kk]
    small = got[-1]  # 512 x 512 x 8192: 16 tiles of 128 x 128, each split, on 80 (fp8: 64) of 132 SMs
    assert small["tiles"] == 16 and small["units"] == 16 * small["splits"] == small["grid"] <= 132


def model(M, N, K, kk, sms, bn_want=0, splits_want=0):
    """The header's rule, as its comment states it: (bn, splits, dp) of least modelled time."""
    def cost(bn, s):
        tiles, ks = math.ceil(M / 128) * math.ceil(N / bn), math.ceil(K / kk)
        c, p = 0.1 + 0.9 * bn / 256, 2.5 * bn / 128  # a fixed part per k-step, the rest in proportion to bn
        if s == 1:
            return math.ceil(tiles / sms) * ks * c, tiles
        whole = (tiles // sms) * sms
        rounds = math.ceil((tiles - whole) * s / sms)
        return (tiles // sms) * ks * c + rounds * (math.ceil(ks / s) * c + p) + s * p, whole

    if splits_want >= 2:
        return bn_want or 256, splits_want, 0
    unsplit, split = [], []
    for order, bn in enumerate((256, 192, 128)):
        if bn_want and bn != bn_want:
            continue
        t, dp = cost(bn, 1)
        unsplit.append((t, order, 1, bn, dp))
        tiles = math.ceil(M / 128) * math.ceil(N / bn)
        if splits_want == 1 or tiles % sms == 0:
            continue
        for s in range(2, 17):  # stream K is never chosen (gemm_hopper_plan.h says why)
            if s * 4 > math.ceil(K / kk):
                break
            t, dp = cost(bn, s)
            split.append((t, order, s, bn, dp))
    best = min(unsplit)
    if split and min(split)[0] < 0.97 * best[0]:
        best = min(split)
    return best[3], best[2], best[4]


def random_rows(n, seed):
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        M, N = (int(x) for x in 8 * rng.integers(1, 1100, size=2))
        K = int(16 * rng.integers(1, 1100))
        rows.append((M, N, K, int(rng.choice([64, 128])), int(rng.choice([132, 114, 78, 16])), 1, 0, 0))
    return rows


def test_gemm_plan_follows_its_stated_rule(plans):
    rows = random_rows(400, 41) + [(M, N, K, 64, sms, 1, 0, 0) for M, N, K in SHAPES for sms in (114, 78)]
    got = plans(rows)
    for r, p in zip(rows, got):
        M, N, K, kk, sms = r[:5]
        assert (p["bn"], p["splits"], p["dp"]) == model(M, N, K, kk, sms), r
    kinds = [sum(p["splits"] > 1 for p in got), sum(p["bn"] == 128 for p in got), sum(p["bn"] == 192 for p in got)]
    assert min(kinds) >= 20, kinds  # every choice occurs


def test_gemm_plan_invariants(plans):
    rows = random_rows(300, 7)
    rows += [(*r[:6], bn, s) for r in rows[:60]
             for bn, s in ((256, 1), (128, 0), (128, 3), (192, 0), (192, 2), (0, 2), (128, STREAM_K), (0, STREAM_K))
             if s <= math.ceil(r[2] / r[3])]
    got = plans(rows)
    for r, p in zip(rows, got):
        M, N, K, kk, sms, _, bn_want, s_want = r
        tiles = math.ceil(M / 128) * math.ceil(N / p["bn"])
        tail = tiles - p["dp"]
        assert p["tiles"] == tiles and p["ksteps"] == math.ceil(K / kk) and 0 <= p["dp"] <= tiles, r
        assert p["units"] == p["dp"] + p["shares"] and p["grid"] == min(sms, p["units"]), r
        assert p["counters"] == (tail if p["shares"] else 0), r
        if p["splits"] == 1:
            assert p["dp"] == tiles and p["shares"] == 0 and p["workspace"] == 0, r
        elif p["splits"] == STREAM_K:  # one share a SM (fewer only where the tail has fewer k-steps)
            assert p["shares"] == min(sms, tail * p["ksteps"]) and p["workspace"] == 2 * p["shares"] * 128 * p["bn"], r
        else:                                                                          # every range has a k-step
            assert 2 <= p["splits"] <= p["ksteps"] and p["shares"] == tail * p["splits"], r
            assert p["workspace"] == p["shares"] * 128 * p["bn"], r
        if bn_want:
            assert p["bn"] == bn_want, r
        if s_want >= 2:
            assert p["splits"] == s_want and p["dp"] == 0, r
        elif s_want == 1:
            assert p["splits"] == 1, r
        elif s_want == STREAM_K:
            assert p["splits"] == STREAM_K and p["dp"] == max(tiles // sms - 1, 0) * sms, r
        elif p["splits"] > 1:
            assert tiles % sms and p["dp"] == (tiles // sms) * sms and p["ksteps"] >= 4 * p["splits"], r


PIECES = r"""
#include "%s"
#include <cstdio>
// stdin: tiles ksteps dp shares per line; stdout per line: every unit's pieces as
// "u tile kb ke pos parts slot slot_of(tile, pos);" then a newline
int main() {
    int tiles, ksteps, dp, shares;
    while (std::scanf("%%d %%d %%d %%d", &tiles, &ksteps, &dp, &shares) == 4) {
        const gemm_hopper::Units units{tiles, ksteps, dp, shares};
        gemm_hopper::Piece p;
        for (int u = 0; u < units.count(); ++u)
            for (int i = 0; units.piece(u, i, p); ++i)
                std::printf("%%d %%d %%d %%d %%d %%d %%d %%d;", u, p.tile, p.kb, p.ke, p.pos, p.parts, p.slot,
                            p.parts > 1 ? units.slot(p.tile, p.pos) : -1);
        std::printf("\n");
    }
    return 0;
}
"""


def test_gemm_stream_k_pieces_cover_the_tail_once(tmp_path):
    """The kernel's own piece arithmetic (gemm_hopper_plan.h's Units), on random tails and shares and
    on the bench shapes' stream-K plans: the pieces of the units, in order, are every whole tile then
    every tail k-step exactly once in share order; share c's range is [c I / S, (c + 1) I / S); each
    tail tile's pieces are numbered 0 .. parts - 1 by consecutive shares; the slots of the partial
    pieces are distinct, inside the workspace (2 S slots), and found again by slot(tile, pos) -- what
    the unit completing a tile reads back."""
    cxx = host.compiler()
    if cxx is None:
        need("hipcc")
    src, exe = tmp_path / "pieces.cpp", tmp_path / "pieces"
    src.write_text(PIECES % HEADER)
    rc, out = run([cxx, "-std=c++17", "-O1", "-Wall", "-Werror", "-o", str(exe), str(src)], str(tmp_path))
    assert rc == 0, out
    rng = np.random.default_rng(3)
    rows = [(480, 63, 264, 132), (648, 63, 396, 132), (16, 128, 0, 132), (5, 4, 1, 16), (3, 1, 0, 3)]
    for _ in range(300):
        tiles, ks = int(rng.integers(1, 40)), int(rng.integers(1, 20))
        dp = int(rng.integers(0, tiles))
        rows.append((tiles, ks, dp, int(rng.integers(1, (tiles - dp) * ks + 1))))
    (tmp_path / "in.txt").write_text("".join(" ".join(map(str, r)) + "\n" for r in rows))
    rc, out = run(["sh", "-c", f"{exe} < {tmp_path / 'in.txt'}"], str(tmp_path))
    assert rc == 0, out
    for (tiles, ks, dp, shares), line in zip(rows, out.splitlines()):
        pieces = [tuple(map(int, x.split())) for x in line.split(";") if x]
        steps = (tiles - dp) * ks
        whole = [p for p in pieces if p[0] < dp]
        assert [(p[1], p[2], p[3], p[5]) for p in whole] == [(t, 0, ks, 1) for t in range(dp)]
        tail = [p for p in pieces if p[0] >= dp]
        flat = [(t - dp) * ks + k for _, t, kb, ke, *_ in tail for k in range(kb, ke)]
        assert flat == list(range(steps)), (tiles, ks, dp, shares)
        for u, t, kb, ke, pos, parts, slot, again in tail:
            c = u - dp
            assert c * steps // shares <= (t - dp) * ks + kb and (t - dp) * ks + ke <= (c + 1) * steps // shares
            assert (parts == 1) == (kb == 0 and ke == ks) and 0 <= pos < parts
            assert parts == 1 or (again == slot and 0 <= slot < 2 * shares)
        for t in range(dp, tiles):
            mine = [p for p in tail if p[1] == t]
            assert [p[4] for p in mine] == list(range(len(mine))) and {p[5] for p in mine} == {len(mine)}
            assert [p[0] for p in mine] == list(range(mine[0][0], mine[0][0] + len(mine)))
        slots = [p[6] for p in tail if p[5] > 1]
        assert len(slots) == len(set(slots))
