"""Staged conversions (strategy ``shuffle+smem``, plan/staged.py): the layout in
between, the plan's two steps, and how a forced staged strategy is refused."""
import random
from dataclasses import replace

import numpy as np
import pytest

from ll_codegen.core import f2
from ll_codegen.core.layout import layout_of
from ll_codegen.core.target import get_target
from ll_codegen.plan import planner
from ll_codegen.plan.model import word_view
from ll_codegen.plan.planner import normalise, plan_conversion, shuffle_forms, staged_plans
from ll_codegen.plan.shuffle import plan_shuffle
from ll_codegen.plan.plans import without_via
from ll_codegen.plan.staged import mid_layout, mid_layouts
from ll_codegen.layouts.kinds import from_dict
from ll_codegen.testing.corpus import COL, ROW, blocked, random_pair
from ll_codegen.verify.emulate.convert import check_plan


def _layouts(src, dst):
    return [normalise(from_dict(s).to_linear(s["shape"])) for s in (src, dst)]


def test_mid_layout_of_the_docstring_example():
    """T 64x64 f8, k = 2: (1,0) and (2,0) come into the registers, (0,1) and (0,2) go to lanes 3, 4."""
    src, dst = _layouts(ROW, COL)
    mid = mid_layout(src, dst, 2)
    assert mid.bases["register"] == [[1, 0], [2, 0], [0, 4], [16, 0], [32, 0]]
    assert mid.bases["lane"] == [[0, 8], [0, 16], [0, 32], [0, 1], [0, 2]]
    assert mid.bases["warp"] == src.bases["warp"]


@pytest.mark.parametrize("dtype_bytes", [1, 2, 4])
def test_mid_layouts_hold_the_destination_registers_and_stay_in_each_warp(dtype_bytes):
    src, dst = _layouts(ROW, COL)
    mids = mid_layouts(src, dst, dtype_bytes)
    assert mids and len(mids) == len({repr(m.bases) for m in mids})
    for mid in mids:
        k = next(k for k in range(1, 6) if mid == mid_layout(src, dst, k))
        assert mid.bases["register"][:k] == dst.bases["register"][:k]
        assert mid.bases["warp"] == src.bases["warp"]                     # the shuffle step stays in each warp
        assert mid.bases["lane"] != src.bases["lane"]                     # and moves data across lanes
        # the same tensor elements in each warp: the same span of register and lane columns
        own = mid.flat_bases("register") + mid.flat_bases("lane")
        assert f2.rank(own) == f2.rank(own + src.flat_bases("register") + src.flat_bases("lane")) == len(own)


def test_no_layout_in_between_when_the_destination_registers_are_in_other_warps():
    # the destination's registers run along dim 0, which the source spreads over warps
    src, dst = _layouts(blocked([1, 4], [1, 32], [4, 1], [1, 0], [4, 128]),
                        blocked([4, 1], [1, 32], [1, 4], [0, 1], [4, 128]))
    assert mid_layouts(src, dst, 1) == []
    with pytest.raises(ValueError, match="no layout in between"):
        plan_conversion(src, dst, "i8", strategy="shuffle+smem")


def test_forced_staged_is_illegal_when_no_data_crosses_lanes():
    src, _ = _layouts(ROW, COL)
    with pytest.raises(ValueError, match="shuffle\\+smem is illegal .*no data crosses lanes"):
        plan_conversion(src, src, "i8", strategy="shuffle+smem")


@pytest.mark.parametrize("dtype", ["f8e4m3", "f16", "f32"])
def test_staged_plan_steps_and_reference(dtype):
    """The plan's steps chain: via converts src -> the layout in between, the rest from it to dst; the
    emulator (which runs both) reproduces numpy; the scratch is the shared-memory step's."""
    src, dst = _layouts(ROW, COL)
    plan = plan_conversion(src, dst, dtype, strategy="shuffle+smem")
    rest = without_via(plan)
    assert plan.strategy == "shuffle+smem" and plan.via.shuffle is not None and rest.strategy == "smem"
    assert plan.via.src_bases == plan.src_bases and rest.src_bases == plan.via.dst_bases
    assert rest.dst_bases == plan.dst_bases and plan.smem_bytes == rest.smem.bytes
    # wider stores than the one-byte stores of the best plain shared-memory plan
    if dtype == "f8e4m3":
        plain = plan_conversion(src, dst, dtype, strategy="smem")
        assert rest.smem.store_vec * rest.elem_bytes > min(plain.smem.store_vec, plain.smem.load_vec)
    check_plan(plan, src, dst, np.random.default_rng(3))


def test_auto_takes_the_staged_plan_for_the_fp8_transpose():
    """Measured on the H200 (bench/RESULTS.md): 118 clocks against 139 for the best plain smem plan."""
    src, dst = _layouts(ROW, COL)
    plan = plan_conversion(src, dst, "f8e4m3")
    assert plan.strategy == "shuffle+smem"
    assert any(c.strategy == "smem" for c in plan.candidates)


def _shuffle_cost(step) -> float:
    """A shuffle step's cost by the planner's model (module docstring of ``plan/planner.py``):
    ``SHUFFLE`` a shuffle, ``SELECT`` a lane-dependent select, ``ALU`` a byte permute."""
    s = step.shuffle
    return (planner.SHUFFLE * s.shuffles + planner.SELECT * s.selects
            + planner.ALU * s.pack_ops(word_view(step), step.dst_copies))


def _staged_pairs():
    """The 8-bit transpose of the docstring example and seeded random warp-local pairs of 8, 16 and
    32-bit elements."""
    yield "ROW->COL/u8", *_layouts(ROW, COL), "u8"
    for seed in range(12):
        src, dst = random_pair(random.Random(seed), same_warps=True)
        dtype = ("u8", "f16", "f32")[seed % 3]
        yield f"random{seed}/{dtype}", normalise(src), normalise(dst), dtype


def test_staged_first_step_is_its_cheapest_shuffle_form():
    """Every staged candidate (one per layout in between) shuffles with the cheapest of its shuffle
    plan's forms (select trees, swap stages, fused words) by the cost model, the first of the
    cheapest on a tie -- the plan the planner makes for that shuffle step alone, whose reported
    candidate scores are the forms' costs computed here.  The sample holds steps whose first and
    second forms cost more than the cheapest, and steps whose last form is not the one chosen."""
    dearer = {0: 0, 1: 0}
    other_last = steps = 0
    for label, src, dst, dtype in _staged_pairs():
        if planner.classify(src, dst) not in ("shuffle", "smem"):
            continue
        w = planner.DTYPE_BYTES[dtype]
        base = replace(plan_conversion(src, dst, dtype, strategy="smem"), smem=None, dst_copies=(), candidates=())
        for plan in staged_plans(base, src, dst, get_target("cuda")):
            mid = layout_of(plan.via.dst_bases)
            forms = shuffle_forms(plan.via, plan_shuffle(src, mid, w))
            costs = [_shuffle_cost(f) for f in forms]
            alone = plan_conversion(src, mid, dtype, strategy="shuffle")
            assert sorted(costs) == sorted(c.score for c in alone.candidates), label
            cheapest = min(costs)
            assert plan.via.shuffle == forms[costs.index(cheapest)].shuffle == alone.shuffle, \
                f"{label}: first step costs {_shuffle_cost(plan.via)}, its forms {costs}"
            for k in dearer:
                dearer[k] += len(costs) > k and costs[k] > cheapest
            other_last += forms[-1].shuffle != plan.via.shuffle
            steps += 1
    assert steps >= 10 and all(dearer.values()) and other_last, (steps, dearer, other_last)


def test_distinct_lanes_layout_keeps_a_different_part_on_each_copy():
    """A source whose lanes hold copies (T3 dims 021 f16's blocked [8,1,1]/[8,4,1]/[1,1,4] on 8x16x32:
    lane bits 0..2 broadcast, 256 elements a lane) as the reverse conversion's source: in between,
    lane bits 0..2 take its last three register bases -- the same elements in each warp, none held
    twice.  Auto stages through it with selects only (no shuffle), and its stores, replayed by the
    brute-force counter, take 16 wavefronts a warp where the plain plan's take 128 (each wavefront of
    8 copies carries 16 distinct bytes); the emulator reproduces numpy."""
    from ll_codegen.plan.staged import distinct_lanes_layout
    from ll_codegen.verify.emulate.banks import measure_smem
    dst, src = _layouts(blocked([1, 1, 8], [1, 4, 8], [4, 1, 1], [2, 1, 0], [8, 16, 32]),
                        blocked([8, 1, 1], [8, 4, 1], [1, 1, 4], [0, 1, 2], [8, 16, 32]))
    mid = distinct_lanes_layout(src)
    assert mid.bases["lane"] == src.bases["register"][-3:] + src.bases["lane"][3:]
    assert mid.bases["register"] == src.bases["register"][:-3] and mid.bases["warp"] == src.bases["warp"]
    own = mid.flat_bases("register") + mid.flat_bases("lane")
    assert f2.rank(own) == len(own) == f2.rank(own + src.flat_bases("register"))
    assert distinct_lanes_layout(dst) is not None and distinct_lanes_layout(_layouts(ROW, COL)[0]) is None
    plan = plan_conversion(src, dst, "f16", "cuda", "sm_90")
    assert plan.strategy == "shuffle+smem" and layout_of(plan.via.dst_bases) == mid
    assert (plan.via.shuffle.shuffles, plan.via.shuffle.selects) == (0, 112)
    tgt = get_target("cuda", "sm_90")
    staged_store, _ = measure_smem(without_via(plan), tgt)
    plain_store, _ = measure_smem(plan_conversion(src, dst, "f16", "cuda", "sm_90", strategy="smem"), tgt)
    assert (staged_store.total_wavefronts, plain_store.total_wavefronts) == (16, 128)
    check_plan(plan, src, dst, np.random.default_rng(5))


@pytest.mark.compile
@pytest.mark.parametrize("direction", ["forward", "back"])
def test_distinct_lanes_ptx_is_what_the_plan_says(direction, tmp_path):
    """T3 dims 021 f16 both ways (each source has lanes that hold copies: the staged plans select by
    lane first): nvcc -ptx of the harness, run by the PTX interpreter and compared thread by thread
    with the plan."""
    from toolchain import need
    from ll_codegen.operations import write_files
    from ll_codegen.run import ptx_check
    nvcc = need("nvcc")
    a, b = _layouts(blocked([1, 1, 8], [1, 4, 8], [4, 1, 1], [2, 1, 0], [8, 16, 32]),
                    blocked([8, 1, 1], [8, 4, 1], [1, 1, 4], [0, 1, 2], [8, 16, 32]))
    src, dst = (a, b) if direction == "forward" else (b, a)
    plan = plan_conversion(src, dst, "f16", "cuda", "sm_90")
    assert plan.strategy == "shuffle+smem" and plan.via.n_dst < plan.n_src
    write_files(plan, str(tmp_path), "m", emit=("header", "harness"))
    ptx, log = ptx_check.compile_ptx(nvcc, str(tmp_path / "m_harness.cu"), "sm_90", str(tmp_path / "m.ptx"))
    assert ptx, log
    assert ptx_check.check(plan, ptx, "m") == []
