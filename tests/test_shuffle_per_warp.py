"""Conversions whose warps each hold what the destination's same warp needs, with different warp
columns (``shuffle.held_per_warp``, ``shuffle.per_warp``): a shuffle plan whose selects and source
lane depend on the warp id, no shared memory, no barrier.

Checked independently of the planner: which pairs qualify by enumerating every warp's elements
(brute force over the layouts, no F2 algebra), every form of every per-warp plan by the numpy
emulator against the reference, the rendered code on the host SIMT runtime, and the PTX of the
harness by the PTX interpreter (no barrier, one shfl.sync.idx per shuffle)."""
from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from ll_codegen.api import plan_conversion
from ll_codegen.core.layout import LinearLayout
from ll_codegen.operations import check, write_files
from ll_codegen.plan.planner import normalise, shuffle_forms
from ll_codegen.plan.shuffle import NotShuffleable, held_per_warp, shuffle_plans
from ll_codegen.run import host, ptx_check
from ll_codegen.spec import spec_from_dict
from ll_codegen.testing.corpus import COL, MMA, ROW, per_warp_pair, random_pair, sliced
from ll_codegen.verify.emulate.convert import check_plan

# bench/bench_convert.py's slice pairs: (name, src, dst, dtype)
BENCH = (("slice_blocked_to_slice_mma_f32", sliced(ROW, 1, [64]), sliced(MMA, 1, [64]), "f32"),
         ("slice_dim0_row_to_col_f16", sliced(ROW, 0, [64]), sliced(COL, 0, [64]), "f16"),
         ("slice_mma_to_slice_row_f32", sliced(MMA, 0, [64]), sliced(ROW, 0, [64]), "f32"))


def _layout(d: dict) -> LinearLayout:
    return normalise(spec_from_dict(dict(d)).linear)


def _elements(L: LinearLayout) -> list[set[int]]:
    """Brute force: the flat tensor indices each warp of ``L`` holds (every register and lane)."""
    cols = {d: L.flat_bases(d) for d in ("register", "lane", "warp")}

    def at(d: str, i: int) -> int:
        x = 0
        for k, v in enumerate(cols[d]):
            x ^= v if i >> k & 1 else 0
        return x
    regs = [at("register", r) for r in range(L.in_dim_size("register"))]
    lanes = [at("lane", t) for t in range(L.in_dim_size("lane"))]
    return [{r ^ t ^ at("warp", w) for r in regs for t in lanes} for w in range(L.in_dim_size("warp"))]


def _brute_held(src: LinearLayout, dst: LinearLayout) -> bool:
    return all(d <= s for s, d in zip(_elements(src), _elements(dst)))


def _pairs(n: int, seed: int) -> list[tuple[LinearLayout, LinearLayout]]:
    rng = random.Random(seed)
    return [tuple(normalise(L) for L in per_warp_pair(rng)) for _ in range(n)]


def test_held_per_warp_is_the_brute_force_containment():
    rng = random.Random(20261128)
    seen = {True: 0, False: 0}
    for _ in range(150):
        src, dst = (normalise(L) for L in (per_warp_pair(rng) if rng.random() < 0.5 else random_pair(rng)))
        want = _brute_held(src, dst)
        assert held_per_warp(src, dst) == want, (src.bases, dst.bases)
        seen[want] += 1
    assert min(seen.values()) >= 20, seen


def test_bench_slice_pairs_need_no_barrier_where_no_data_crosses_warps():
    """Of the bench's slice pairs, slice_dim0 forward and slice_mma back hold every warp's data in
    that warp (brute force); auto plans them as warp shuffles (no scratch, cheaper than every
    shared-memory candidate).  The other directions move data between warps and keep their
    shared-memory plans."""
    held = {}
    for name, a, b, dtype in BENCH:
        for way, src, dst in (("forward", _layout(a), _layout(b)), ("back", _layout(b), _layout(a))):
            held[name, way] = _brute_held(src, dst)
            plan = plan_conversion(src, dst, dtype, arch="sm_90")
            if held[name, way]:
                assert plan.strategy == "shuffle" and plan.smem_bytes == 0, (name, way)
                assert plan.cost < min(c.score for c in plan.candidates if c.strategy in ("smem", "shuffle+smem"))
                check(plan, 1)
            else:
                assert plan.through_smem, (name, way)
                with pytest.raises(ValueError, match="data crosses warps"):
                    plan_conversion(src, dst, dtype, strategy="shuffle")
    assert [k for k, v in held.items() if v] == [("slice_dim0_row_to_col_f16", "forward"),
                                                  ("slice_mma_to_slice_row_f32", "back")]


def test_bench_plans_shuffle_only_inside_each_warp():
    """slice_dim0 forward: 4 shuffles (each thread receives 4 halves, one a source lane); slice_mma
    back: 8 (each thread receives 8 words); the source lane depends on the warp id."""
    for (name, a, b, dtype), back, shuffles in ((BENCH[1], False, 4), (BENCH[2], True, 8)):
        src, dst = (_layout(b), _layout(a)) if back else (_layout(a), _layout(b))
        s = plan_conversion(src, dst, dtype).shuffle
        assert s.shuffles == shuffles and len(s.src_lane) == 5 + 2, name
        assert any(s.src_lane[5:]), name                     # a warp-dependent source lane


@pytest.mark.parametrize("dtype", ["i8", "f16", "f32", "f64"])
def test_every_form_of_random_per_warp_plans_matches_the_reference(dtype):
    """Random pairs held per warp (zero warp columns of the source: copies, as a slice's; warp
    columns shifted by register and lane vectors; mixed and broadcast bases): every plan
    ``shuffle_plans`` offers, in every form the planner scores (select trees, swap stages, fused
    byte permutes), run by the emulator against the reference; most pairs have a plan."""
    planned = by_warp = 0
    pairs = _pairs(30, seed=11)
    for k, (src, dst) in enumerate(pairs):
        assert held_per_warp(src, dst) and src.flat_bases("warp") != dst.flat_bases("warp")
        base = plan_conversion(src, dst, dtype, strategy="shuffle") if _plans(src, dst, dtype) else None
        if base is None:
            continue
        planned += 1
        for sp in _plans(src, dst, dtype):
            by_warp += any(m >> 5 for m in sp.send_select.masks) or bool(sp.src_lane and any(sp.src_lane[5:]))
            for p in shuffle_forms(replace(base, candidates=()), sp):
                check_plan(p, src, dst, np.random.default_rng(k))
    assert planned >= 0.6 * len(pairs) and by_warp >= planned, (planned, by_warp)


def _plans(src: LinearLayout, dst: LinearLayout, dtype: str) -> list:
    try:
        return shuffle_plans(src, dst, {"i8": 1, "f16": 2, "f32": 4, "f64": 8}[dtype])
    except NotShuffleable:
        return []


def test_auto_takes_the_per_warp_shuffle_only_when_cheaper():
    rng = random.Random(5)
    chosen = 0
    for _ in range(25):
        src, dst = (normalise(L) for L in per_warp_pair(rng))
        try:
            plan = plan_conversion(src, dst, "f16")
        except (ValueError, IndexError):      # a shared-memory candidate the planner cannot build for
            continue                          # mixed broadcast bases: not this module's plans
        scores = [c.score for c in plan.candidates]
        assert plan.cost == min(scores)
        if plan.strategy == "shuffle":
            chosen += 1
            check_plan(plan, src, dst, 3)
    assert chosen >= 5


def test_the_emulator_catches_a_plan_without_its_warp_terms():
    """The warp-dependent parts are needed: the same plan with the warp bits' source lanes or
    selects dropped (warp 0's plan in every warp) fails the reference check."""
    _, a, b, dtype = BENCH[1]
    src, dst = _layout(a), _layout(b)
    plan = plan_conversion(src, dst, dtype)
    s = plan.shuffle
    no_lane = replace(s, src_lane=s.src_lane[:5] + (0,) * len(s.src_lane[5:]))
    no_sel = replace(s, send_select=replace(s.send_select, masks=tuple(m & 31 for m in s.send_select.masks)))
    for bad in (no_lane, no_sel):
        with pytest.raises(AssertionError):
            check_plan(replace(plan, shuffle=bad), src, dst, 0)


def test_forced_shuffle_across_warps_is_one_line():
    src, dst = _layout(sliced(ROW, 1, [64])), _layout(sliced(MMA, 1, [64]))
    with pytest.raises(ValueError, match=r"^strategy shuffle is illegal for this pair: data crosses warps"):
        plan_conversion(src, dst, "f32", strategy="shuffle")


@pytest.mark.compile
@pytest.mark.skipif(host.compiler() is None, reason="no clang++ for the host SIMT runtime")
def test_per_warp_plans_run_bit_exact_on_the_host_runtime():
    items = [(f"bench_{name}_{'back' if back else 'fwd'}",
              plan_conversion(*((_layout(b), _layout(a)) if back else (_layout(a), _layout(b))), dtype))
             for (name, a, b, dtype), back in ((BENCH[1], False), (BENCH[2], True))]
    for k, (src, dst) in enumerate(_pairs(6, seed=3)):
        for dtype in ("i8", "f16", "f32", "f64")[k % 2::2]:
            if _plans(src, dst, dtype):
                items.append((f"pw{k}_{dtype}", plan_conversion(src, dst, dtype, strategy="shuffle")))
    rng = random.Random(9)
    while True:                                                         # wave64: HIP's shuffles
        src, dst = (normalise(L) for L in per_warp_pair(rng, lanes=64))
        if _plans(src, dst, "f16"):
            break
    items.append(("pw_hip_f16", plan_conversion(src, dst, "f16", "hip", "gfx90a", strategy="shuffle")))
    assert len(items) >= 7
    results = host.verify_host(items, runs=2, jobs=1)
    bad = [r.message for r in results if not r.ok]
    assert not bad, bad[0]


@pytest.mark.compile
@pytest.mark.parametrize("which", [1, 2])
def test_per_warp_ptx_has_no_barrier(which, tmp_path):
    """nvcc -ptx of the harness (sm_90a), run by the PTX interpreter and compared thread by thread
    with the plan: one shfl.sync.idx per shuffle, no bar.sync."""
    from toolchain import need
    nvcc = need("nvcc")
    _, a, b, dtype = BENCH[which]
    src, dst = (_layout(a), _layout(b)) if which == 1 else (_layout(b), _layout(a))
    plan = plan_conversion(src, dst, dtype, arch="sm_90a")
    write_files(plan, str(tmp_path), "m", emit=("header", "harness"))
    ptx, log = ptx_check.compile_ptx(nvcc, str(tmp_path / "m_harness.cu"), "sm_90a", str(tmp_path / "m.ptx"))
    assert ptx, log
    assert ptx_check.check(plan, ptx, "m") == []
    assert "bar.sync" not in ptx and "barrier" not in ptx
    assert ptx.count("shfl.sync.idx.b32") == plan.shuffle.shuffles
