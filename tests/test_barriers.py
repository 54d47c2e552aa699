"""Barrier scope of shared-memory plans: in a plan whose data
stays inside warps, the barrier between the stores and the loads is
``__syncwarp()`` (HIP: a wavefront barrier) instead of ``__syncthreads()``.
The barrier before the stores stays block-wide: the scratch may still be read
by other warps in an earlier conversion that laid it out differently (a round
trip src -> dst -> src does; the bench kernel on the host runtime checks it).

The claim "every warp reads back only bytes it stored" is checked three ways:
the layout condition (``swizzle.warp_local``) on known pairs, the numpy
emulator (which, for a warp-barrier plan, rejects any load of a byte another
warp stored) on every sampled plan, and the host SIMT runtime's race detector
on rendered code -- including a plan mutated to a warp barrier where it is not
enough, which both must reject.
"""
import dataclasses
import random

import pytest

from ll_codegen.run import host
from ll_codegen.api import plan_conversion
from ll_codegen.testing.corpus import MMA, blocked
from ll_codegen.core.layout import layout_of
from ll_codegen.verify.emulate.common import SmemError
from ll_codegen.verify.emulate.convert import check_plan
from ll_codegen.operations import render
from ll_codegen.plan.swizzle import warp_local
from toolchain import random_plans

ROW = blocked([1, 8], [4, 8], [4, 1], [1, 0], [64, 64])
ROW4 = blocked([1, 4], [4, 8], [4, 1], [1, 0], [64, 64])
COL = blocked([8, 1], [8, 4], [1, 4], [0, 1], [64, 64])
# a warp-local transpose: each warp holds an 8x32 block, registers along
# columns before and along rows after (no common register bits), 8 warps
WARP_T_SRC = blocked([1, 8], [8, 4], [8, 1], [1, 0], [64, 32])
WARP_T_DST = blocked([8, 1], [1, 32], [8, 1], [1, 0], [64, 32])


def layouts(plan):
    return layout_of(plan.src_bases), layout_of(plan.dst_bases)


@pytest.mark.parametrize("src, dst, local", [(ROW, ROW4, True), (WARP_T_SRC, WARP_T_DST, True),
                                             (ROW, COL, False), (ROW4, COL, False)])
def test_warp_local_condition(src, dst, local):
    plan = plan_conversion(src, dst, "f16", strategy="smem")
    assert warp_local(*layouts(plan)) is local
    assert plan.smem.barrier == ("warp" if local else "block")


@pytest.mark.parametrize("dtype", ["i8", "f16", "f32"])
def test_warp_local_transpose_header_uses_warp_barriers(dtype):
    plan = plan_conversion(WARP_T_SRC, WARP_T_DST, dtype, strategy="smem")
    check_plan(plan, *layouts(plan))
    for target in ("cuda", "hip"):
        p = plan_conversion(WARP_T_SRC, WARP_T_DST, dtype, target=target, strategy="smem",
                            arch=None if target == "cuda" else "gfx1030")
        src = render(p, "header", "t")
        sync = "__syncwarp();" if target == "cuda" else "detail::warp_sync();"
        n = len(p.smem.rounds)
        assert src.count(sync) == n and src.count("__syncthreads();") == n
        assert "a warp barrier between stores and loads" in src


def test_emulator_rejects_a_warp_barrier_where_data_crosses_warps():
    plan = plan_conversion(ROW, COL, "f32", strategy="smem")
    check_plan(plan, *layouts(plan))
    wrong = dataclasses.replace(plan, smem=dataclasses.replace(plan.smem, barrier="warp"))
    with pytest.raises(SmemError, match="warp barrier"):
        check_plan(wrong, *layouts(plan))


def test_sampled_warp_barrier_plans_pass_the_emulator():
    """Random specs: every smem plan whose planner chose a warp barrier keeps each warp's bytes
    to itself (the emulator checks ownership), for warp 32 and 64."""
    rng = random.Random(14)
    seen = 0
    for target, arch, lanes in (("cuda", "sm_90", 32), ("hip", "gfx90a", 64)):
        for *_, plan in random_plans(rng, target, arch, lanes, 150, ("i8", "f16", "f32"), ("smem",), ("optimal",)):
            if plan.smem is not None and plan.smem.barrier == "warp":
                check_plan(plan, *layouts(plan))
                seen += 1
    assert seen >= 5, seen


@pytest.mark.compile
def test_host_runtime_runs_warp_barrier_plans_and_catches_a_wrong_one():
    if host.compiler() is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    good = [(f"wb_{t}_{d}", plan_conversion(WARP_T_SRC, WARP_T_DST, d, target=t, strategy="smem",
                                             arch=None if t == "cuda" else "gfx1030"))
            for t in ("cuda", "hip") for d in ("i8", "f16", "f32")]
    good.append(("wb_row", plan_conversion(ROW, ROW4, "f16", strategy="smem")))
    plan = plan_conversion(ROW, COL, "f32", strategy="smem")
    wrong = ("wb_wrong", dataclasses.replace(plan, smem=dataclasses.replace(plan.smem, barrier="warp")))
    results = host.verify_host(good + [wrong], seed=14)
    assert all(r.ok for r in results[:-1]), [r.message for r in results if not r.ok]
    assert not results[-1].ok and "race:" in results[-1].message, results[-1].message


@pytest.mark.parametrize("src, dst, rounds_budget", [(ROW, COL, 48 * 1024), (MMA, ROW, 4096), (WARP_T_SRC, WARP_T_DST, 48 * 1024)])
def test_two_scratch_buffers_drop_the_barrier_before_the_first_stores(src, dst, rounds_budget):
    one = plan_conversion(src, dst, "f32", strategy="smem", smem_budget=rounds_budget)
    two = plan_conversion(src, dst, "f32", strategy="smem", smem_budget=rounds_budget, scratch_buffers=2)
    n = len(two.smem.rounds)
    assert two.smem.buffers == 2 and two.smem.barrier == "block" and n == len(one.smem.rounds)
    check_plan(two, *layouts(two))
    text = render(two, "header", "t")
    # rounds after the first still wait for the previous round's loads: 2n - 1 block barriers
    assert text.count("__syncthreads();") == 2 * n - 1 and "__syncwarp" not in text
    assert "kScratchBuffers = 2" in text and "alternate" in two.summary()
    assert "__syncthreads();" in render(one, "header", "t")


def test_scratch_buffers_is_for_register_conversions():
    with pytest.raises(ValueError, match="scratch-buffers"):
        plan_conversion(ROW, COL, "f16", scratch_buffers=3)


@pytest.mark.parametrize("dtype", ["i8", "f16", "f32"])
def test_scratch_per_warp_puts_each_warp_in_its_slice(dtype):
    """--scratch-per-warp on a warp-local pair: the warp bases are the top offset bits (warp w's
    bytes are [w * kWarpSliceBytes, (w + 1) * kWarpSliceBytes)), both barriers are warp-scope, the
    swizzle is as conflict-free as without, and the emulator accepts it -- while forcing per_warp on
    the reverse plan of the default swizzle (warps not on top) is rejected by its slice check."""
    # through shared memory (auto takes a butterfly for i8, which needs no scratch)
    plain = plan_conversion(WARP_T_SRC, WARP_T_DST, dtype, strategy="smem")
    p = plan_conversion(WARP_T_SRC, WARP_T_DST, dtype, strategy="smem", scratch_per_warp=True)
    m = p.smem
    warps = layout_of(p.src_bases).bases["warp"]
    assert m.per_warp and (m.block_barriers, m.warp_barriers) == (0, 2)
    assert m.layout["offset"][-len(warps):] == warps
    assert m.store.total_wavefronts + m.load.total_wavefronts == \
        plain.smem.store.total_wavefronts + plain.smem.load.total_wavefronts
    check_plan(p, *layouts(p))
    text = render(p, "header", "t")
    assert text.count("__syncwarp();") == 2 and "__syncthreads();" not in text
    assert f"kWarpSliceBytes = {m.bytes // 8};" in text and "--scratch-per-warp" in text
    back = plan_conversion(WARP_T_DST, WARP_T_SRC, dtype, strategy="smem")
    if back.smem.layout["offset"][-len(warps):] != layout_of(back.src_bases).bases["warp"]:
        forced = dataclasses.replace(back, smem=dataclasses.replace(back.smem, per_warp=True))
        with pytest.raises(AssertionError, match="outside its slice"):
            check_plan(forced, *layouts(forced))


def test_scratch_per_warp_leaves_other_plans_alone_and_excludes_two_buffers():
    p = plan_conversion(ROW, COL, "f16", scratch_per_warp=True)        # data crosses warps
    assert not p.smem.per_warp and p.smem.block_barriers == 2
    with pytest.raises(ValueError, match="do not combine"):
        plan_conversion(WARP_T_SRC, WARP_T_DST, "f16", scratch_per_warp=True, scratch_buffers=2)
    with pytest.raises(ValueError, match="scratch-per-warp"):
        plan_conversion("examples/swizzled_shared_64x64.yaml", "examples/blocked_64x64.yaml",
                        scratch_per_warp=True)
