"""Planner: strategies the named corpus must get, the seed-001 candidates,
broadcast handling and one-line errors for bad pairs.

The execution of every plan is checked in test_plans_property.py; here we
check the planner's *choices* against what the paper and Triton say."""
import pytest

from ll_codegen.testing import corpus
from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.planner import classify, plan_conversion
from ll_codegen.spec import spec_from_dict


def _pair(p):
    return spec_from_dict(p.src).linear, spec_from_dict(p.dst).linear


CASES = [(p, dt) for p in corpus.NAMED for dt in p.dtypes]


@pytest.mark.parametrize("pair,dtype", CASES, ids=[f"{p.name}-{dt}" for p, dt in CASES])
def test_named_pair_strategy_and_conflicts(pair, dtype):
    src, dst = _pair(pair)
    plan = plan_conversion(src, dst, dtype, pair.target)
    assert plan.strategy == pair.expect, pair.note
    if plan.smem is not None and pair.expect_conflicts is not None:
        assert (plan.smem.store.bank_conflicts, plan.smem.load.bank_conflicts) == pair.expect_conflicts
    # the chosen plan is the cheapest candidate, and every candidate is reported
    best = min(plan.candidates, key=lambda c: c.score)
    assert best.strategy == ("register" if plan.strategy == "noop" else plan.strategy)


def test_blocked_to_dot_a_128x64_scores_several_candidates():
    """The 128x64 f16 blocked -> dot operand A pair of the corpus: several shared-memory
    instruction pairings (vector and ldmatrix) are scored and reported."""
    p = next(x for x in corpus.NAMED if x.name.startswith("seed001"))
    plan = plan_conversion(*_pair(p), "f16", "cuda", "sm_90")
    smem = [c for c in plan.candidates if c.strategy == "smem"]
    assert len(smem) >= 3
    assert all(c.detail and c.score > 0 for c in smem)
    assert plan.smem.store.bank_conflicts == plan.smem.load.bank_conflicts == 0


def test_fp8_transpose_of_figure_2_uses_wide_vectors():
    """Paper Fig. 2: the fp8 blocked transpose goes through shared memory with
    16-byte accesses and no bank conflicts (Triton: 3.3x the bound)."""
    p = next(x for x in corpus.NAMED if x.name == "blocked_transpose_f8_fig2")
    plan = plan_conversion(*_pair(p), "f8e4m3", "cuda", "sm_90")
    assert plan.smem.vector_bytes == 16
    assert plan.smem.store.bank_conflicts == plan.smem.load.bank_conflicts == 0


def test_forced_strategies_and_their_legality():
    p = next(x for x in corpus.NAMED if x.name == "blocked_intra_warp_f16")
    src, dst = _pair(p)
    assert classify(src, dst) == "shuffle"
    assert plan_conversion(src, dst, "f16", strategy="smem").strategy == "smem"
    assert plan_conversion(src, dst, "f16", strategy="shuffle").strategy == "shuffle"
    with pytest.raises(ValueError, match="illegal"):
        plan_conversion(src, dst, "f16", strategy="register")
    with pytest.raises(ValueError, match="illegal"):
        plan_conversion(src, dst, "f16", strategy="noop")


def test_equal_layouts_with_broadcast_registers_are_a_noop():
    L = LinearLayout({"register": [[0, 1], [0, 0]], "lane": [[0, 2], [0, 4], [0, 8], [1, 0], [2, 0]],
                      "warp": []}, {"dim0": 4, "dim1": 16})
    plan = plan_conversion(L, L, "f32")
    assert plan.strategy == "noop"
    assert plan.register.dst_from_src == (0, 1, 2, 3)


def test_broadcast_destination_reads_one_owner():
    """dst broadcasts a register (zero basis): the duplicate is a copy of the
    lower register, not a second load."""
    src = LinearLayout({"register": [[0, 1]], "lane": [[0, 2], [0, 4], [0, 8], [1, 0], [2, 0]], "warp": []},
                       {"dim0": 4, "dim1": 16})
    dst = LinearLayout({"register": [[0, 0], [0, 2]], "lane": [[0, 1], [0, 4], [0, 8], [1, 0], [2, 0]],
                        "warp": []}, {"dim0": 4, "dim1": 16})
    plan = plan_conversion(src, dst, "f32", strategy="smem")
    assert (1, 0) in plan.dst_copies and (3, 2) in plan.dst_copies
    loaded = {r for rnd in plan.smem.rounds for acc in rnd.loads for r in acc.regs}
    assert not loaded & {1, 3}


def combined_register_pair():
    return tuple(spec_from_dict(s).linear for s in corpus.COMBINED_REGISTER_PAIR)


@pytest.mark.parametrize("dtype", ["i8", "f16", "f32"])
def test_vector_accesses_over_combined_register_bits_cover_every_register(dtype):
    """An access whose registers differ in two bits: the accesses run over the cosets of the
    access's register span, so every destination register is loaded once (the emulator agrees)."""
    from ll_codegen.operations import check
    src, dst = combined_register_pair()
    plan = plan_conversion(src, dst, dtype, strategy="smem")
    loads = [acc.regs for rnd in plan.smem.rounds for acc in rnd.loads]
    assert any(len(regs) > 1 and bin(regs[0] ^ regs[1]).count("1") > 1 for regs in loads), loads
    loaded = sorted(r for regs in loads for r in regs)
    assert loaded == list(range(plan.n_dst)), loaded
    for strategy in ("auto", "smem", "shuffle"):
        check(plan_conversion(src, dst, dtype, strategy=strategy), 2)


@pytest.mark.parametrize("swizzle", ["optimal", "none"])
def test_rounds_split_by_register_bits_no_lane_crosses(swizzle):
    """A quarter of the tile a round: the round bits are register bits of both sides that no lane or
    warp vector reaches ([0, 1] is a register of both, but also [8, 1] ^ [8, 0] of two lanes), so each
    lane's address is the same in every round (the emulator reads the wrong bytes otherwise)."""
    from ll_codegen.core import f2
    from ll_codegen.operations import check
    src, dst = combined_register_pair()
    for dtype in ("i8", "f16", "f32"):
        tile = plan_conversion(src, dst, dtype, strategy="smem").smem.bytes
        plan = plan_conversion(src, dst, dtype, strategy="smem", swizzle=swizzle, smem_budget=tile // 4)
        rounds = LinearLayout(plan.smem.layout, src.out_dim_sizes).flat_bases("round")
        assert len(plan.smem.rounds) == 4 and len(rounds) == 2
        moving = [v for L in (src, dst) for k in ("lane", "warp") for v in L.flat_bases(k) if v]
        assert f2.rank(moving + rounds) == f2.rank(moving) + 2
        check(plan, 2)


@pytest.mark.compile
def test_vector_accesses_over_combined_register_bits_run_on_the_host():
    from ll_codegen.run import host
    if host.compiler() is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    src, dst = combined_register_pair()
    items = [(f"comb_{dt}", plan_conversion(src, dst, dt, strategy="smem")) for dt in ("i8", "f16", "f32")]
    results = host.verify_host(items, runs=2)
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]


def _lin(reg, lane, warp, shape=(4, 16), block=()):
    return LinearLayout({"register": reg, "lane": lane, "warp": warp, "block": list(block)},
                        {"dim0": shape[0], "dim1": shape[1]}, require_surjective=False)


LANES = [[0, 2], [0, 4], [0, 8], [1, 0], [2, 0]]


@pytest.mark.parametrize("src,dst,target,match", [
    (_lin([[0, 1]], LANES, []), _lin([[0, 1], [4, 0]], LANES, [], (8, 16)), "cuda", "shapes differ"),
    (_lin([[0, 1]], LANES, []), _lin([], LANES, [[0, 1]]), "cuda", "warp counts differ"),
    (_lin([[0, 1]], LANES, []), _lin([[0, 1]], LANES, []), "hip:gfx90a", "warp size 64"),
    (LinearLayout({"offset": [[0, 1], [0, 2], [0, 4], [0, 8], [1, 0], [2, 0]]}, {"dim0": 4, "dim1": 16}),
     _lin([[0, 1]], LANES, []), "cuda", "not a distributed layout"),
    (_lin([[0, 1]], LANES[:4], [], (2, 16), [[1, 0]]), _lin([[0, 1]], LANES[:4], [], (2, 16), [[1, 0]]),
     "cuda:sm_90", "lanes"),
])
def test_bad_pairs_are_one_clear_error(src, dst, target, match):
    t, _, arch = target.partition(":")
    with pytest.raises(ValueError, match=match):
        plan_conversion(src, dst, "f16", t, arch or None)


def test_cross_cta_conversion_is_not_supported():
    lanes = [[0, 2], [0, 4], [0, 8], [0, 16], [1, 0]]
    src = LinearLayout({"register": [[0, 1]], "lane": lanes, "warp": [], "block": [[2, 0]]}, {"dim0": 4, "dim1": 32})
    dst = LinearLayout({"register": [[2, 0]], "lane": lanes, "warp": [], "block": [[0, 1]]}, {"dim0": 4, "dim1": 32})
    with pytest.raises(ValueError, match="across CTAs"):
        plan_conversion(src, dst, "f16")


def test_unknown_dtype_and_strategy():
    L = _lin([[0, 1]], LANES, [])
    with pytest.raises(ValueError, match="unknown dtype"):
        plan_conversion(L, L, "f12")
    with pytest.raises(ValueError, match="unknown strategy"):
        plan_conversion(L, L, "f16", strategy="magic")


def test_candidates_cheapest_first_in_the_targets_instruction_names():
    p = next(x for x in corpus.NAMED if x.name.startswith("seed001"))
    plan = plan_conversion(*_pair(p), "f16", "cuda", "sm_90")
    scores = [c.score for c in plan.candidates]
    assert scores == sorted(scores) and len(scores) >= 3
    assert any("ldmatrix" in c.detail for c in plan.candidates)
    hip = next(x for x in corpus.NAMED if x.name == "mfma_to_blocked_wave64")
    plan = plan_conversion(*_pair(hip), "f16", "hip", "gfx90a")
    details = " ".join(c.detail for c in plan.candidates if c.strategy == "smem")
    assert "ds_write_b" in details and "ds_read_" in details and ".shared" not in details


def test_per_side_widths_for_an_8bit_transpose():
    """An i8 row -> column transpose (128x64, 4 warps) shares only one
    register column (rows r, r + 64).  One side widens that 2-byte tile by its own registers
    that are lanes of the other (16-byte accesses) and the other side accesses the 2-byte
    prefix of the same chunks, whose other bytes neighbouring lanes touch in the same
    wavefront: 16 + 32 wavefronts a warp, where one tile for both sides gave at best 80
    (st1B + ldmatrix).  Of the two mirror plans the tie-break takes the wide loads.  The
    emulator executes it against the reference.  (``auto`` now stages it: shuffles first,
    then 4-byte stores -- tests/test_staged.py.)"""
    import numpy as np
    from ll_codegen.testing.corpus import blocked
    from ll_codegen.verify.emulate.convert import check_plan
    src = spec_from_dict(blocked([1, 16], [8, 4], [4, 1], [1, 0], [128, 64])).linear
    dst = spec_from_dict(blocked([16, 1], [4, 8], [1, 4], [0, 1], [128, 64])).linear
    plan = plan_conversion(src, dst, "i8", "cuda", "sm_90", strategy="smem")
    m = plan.smem
    assert (m.store_instr, m.store_vec, m.load_instr, m.load_vec) == ("vector", 2, "vector", 16)
    assert (m.store.total_wavefronts, m.load.total_wavefronts) == (32, 16)
    assert (m.store.bank_conflicts, m.load.bank_conflicts) == (0, 0)
    assert min(c.score for c in plan.candidates if "ldmatrix" in c.detail) > plan.candidates[0].score
    check_plan(plan, src, dst, np.random.default_rng(0))


def test_swap_stages_for_a_warp_local_transpose():
    """A warp's 8x32 block, 8 registers along columns -> along rows, has no
    common register column: 8 rounds whose sent and received registers are 8-way lane-dependent.
    As select trees that is 7 + 7 selects a round (112); as swap stages (Triton's "swap"
    factorisation, r <-> r ^ x for each select bit) 3 stages of 8 words on each side (48).
    The planner scores both and keeps the cheaper; the emulator executes both.  At SELECT = 0.5 a
    select costs half a shuffle and auto takes shared memory, as measured (H100: 113 against 196
    clocks a conversion)."""
    import numpy as np
    from dataclasses import replace
    from ll_codegen.testing.corpus import blocked
    from ll_codegen.verify.emulate.convert import check_plan
    from ll_codegen.plan.model import swap_stages
    from ll_codegen.plan.planner import normalise
    from ll_codegen.plan.shuffle import plan_shuffle
    assert swap_stages([(0,), (1,)], [1, 2]) == [[(0,), (1,), (2,), (3,)], [(0,), (1,)]]
    src = spec_from_dict(blocked([1, 8], [8, 4], [8, 1], [1, 0], [64, 32])).linear
    dst = spec_from_dict(blocked([8, 1], [1, 32], [8, 1], [1, 0], [64, 32])).linear
    assert plan_conversion(src, dst, "f32", "cuda", "sm_90").strategy == "smem"
    plan = plan_conversion(src, dst, "f32", "cuda", "sm_90", strategy="shuffle")
    s = plan.shuffle
    assert len(s.rounds) == 8 and s.shuffles == 8
    assert (len(s.send_swaps), len(s.recv_swaps), s.selects) == (3, 3, 48)
    trees = plan_shuffle(normalise(src), normalise(dst), 4)
    assert (trees.send_select.size, trees.recv_select.size, trees.selects) == (8, 8, 112)
    assert [c.detail for c in plan.candidates if c.strategy == "shuffle"] == [
        "8 shuffles, 48 selects (swap stages), 0 pack ops", "8 shuffles, 112 selects, 0 pack ops"]
    for p in (plan, replace(plan, shuffle=trees)):
        check_plan(p, src, dst, np.random.default_rng(0))


def test_fused_forms_of_a_warp_local_8bit_transpose():
    """The same 8x32 block with 8-bit elements: one side's words draw on at most four
    words for every select value, so the fused form (byte permutes with per-lane selectors) has no
    select on that side and is scored beside the others, on HIP too (rendered as v_perm_b32,
    ``tests/test_hip_byte_perm.py``)."""
    from ll_codegen.testing.corpus import blocked
    src = spec_from_dict(blocked([1, 8], [8, 4], [8, 1], [1, 0], [64, 32])).linear
    dst = spec_from_dict(blocked([8, 1], [1, 32], [8, 1], [1, 0], [64, 32])).linear
    cuda = plan_conversion(src, dst, "i8", "cuda", "sm_90", strategy="shuffle")
    shuffles = [c.detail for c in cuda.candidates if c.strategy == "shuffle"]
    assert any("fused" in d for d in shuffles) and any("fused" not in d for d in shuffles), shuffles
    assert cuda.shuffle.send_fused or cuda.shuffle.recv_fused
    hip = plan_conversion(src, dst, "i8", "hip", "gfx1030", strategy="shuffle")    # wave32: the same layouts
    assert any("fused" in c.detail for c in hip.candidates), [c.detail for c in hip.candidates]


def test_sass_table_of_the_recorded_run():
    """bench/sass_table.py re-derives the benchmarked plans from bench/results_h100.json and compares them
    with the SASS counts recorded there (32 of 34 pairs equal up to ptxas's unroll on the H100 run); a
    planner change that renames a plan the run used shows up here."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run([sys.executable, "bench/sass_table.py", "bench/results_h100.json"], capture_output=True,
                       text=True, cwd=root)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "not among today's candidates" not in p.stdout
    assert "32 of 34 pairs: SASS loop = the plans' counts times the unroll factor" in p.stdout


def test_sass_selects_of_the_recorded_shuffle_run():
    """The selects of the shuffle plans against the SASS of bench/results_shuffle_h100.json
    (the warp-local pairs with every candidate, SEL recorded): swap stages compile to exactly their selects;
    select trees only when a lane chooses between two registers (ptxas folds wider trees)."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = subprocess.run([sys.executable, "bench/sass_table.py", "bench/results_shuffle_h100.json"],
                       capture_output=True, text=True, cwd=root)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = [line.split(" | ") for line in p.stdout.splitlines() if "swap stages |" in line or "select trees |" in line]
    swaps = [r for r in rows if r[2] == "swap stages"]
    assert len(swaps) == 3 and all(r[-1].startswith("yes") for r in swaps), swaps
    assert "5 of 9 shuffle variants: SASS SEL = the plans' selects times the unroll factor" in p.stdout


def test_equal_scores_go_to_the_plan_with_fewer_byte_permutes():
    """Blocked -> dot B 64x128 f16 (warps along M): ld16B and ldmatrix.trans tie at 160 wavefronts a
    warp and 32 loads; ldmatrix.trans delivers the dot-B word pairs itself, ld16B needs a PRMT for
    each of the 128 destination words (and the stores 32), so auto takes the transposing load.
    ``SmemPlan.pack_ops`` is checked against the rendered header: the distinct ``__byte_perm``
    expressions of its ``convert_words`` (16-bit words: one permute each, none nested)."""
    import re
    from dataclasses import replace
    from ll_codegen.operations import render
    from ll_codegen.plan.model import word_view
    from ll_codegen.plan.planner import normalise
    from ll_codegen.plan.swizzle import plan_smem
    from ll_codegen.core.target import get_target
    from ll_codegen.verify.emulate.convert import check_plan
    import numpy as np
    src = normalise(spec_from_dict(corpus.blocked([1, 8], [4, 8], [4, 1], [1, 0], [64, 128])).linear)
    dst = normalise(spec_from_dict(corpus.dot(corpus.mma_v2([4, 1], [64, 128]), 1, 2, [64, 128])).linear)
    plan = plan_conversion(src, dst, "f16", "cuda", "sm_90")
    assert (plan.smem.store_instr, plan.smem.load_instr) == ("vector", "matrix.trans")
    assert plan.candidates[0].score == plan.candidates[1].score
    counts = {}
    for m in plan_smem(src, dst, 2, get_target("cuda", "sm_90"), "optimal"):
        cand = replace(plan, smem=m, candidates=())
        text = render(cand, "header", "k")
        start = text.index("__device__ __forceinline__ void convert_words(")
        body = text[start:text.index("\n}\n", start)]
        ops = m.pack_ops(word_view(cand), cand.n_dst, cand.dst_copies)
        assert ops == len(set(re.findall(r"__byte_perm\([^()]*\)", body)))
        counts[(m.store_instr, m.store_vec, m.load_instr, m.load_vec)] = ops
    assert counts[("vector", 8, "vector", 8)] == 160 and counts[("vector", 8, "matrix.trans", 8)] == 0
    check_plan(plan, src, dst, np.random.default_rng(2))
