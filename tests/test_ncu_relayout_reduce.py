"""The CPU half of ``gpu_tests/ncu_relayout_reduce.py`` (no GPU, no ncu): its case list plans, its
harnesses render with the kernel names the ncu filter matches, the plan's predicted shared-memory
traffic equals the brute-force count from the emulator's addresses for every case, and the
table's verdicts follow the measured numbers."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "gpu_tests"))

import ncu_relayout_reduce as nrr  # noqa: E402

COUNTERS = nrr.KEYS + ("st_instr", "ld_instr")


@pytest.fixture(scope="module")
def cases():
    return nrr.cases()


@pytest.fixture(scope="module")
def rows(cases):
    return nrr.collect(cases)


def test_case_list_covers_the_relayouts_and_reductions(cases):
    names = [c.name for c in cases]
    assert len(set(names)) == len(names) and all(n.isidentifier() for n in names)
    assert {"relayout_transpose_f16", "relayout_wgmma_b_e4m3", "relayout_reswizzle_bf16",
            "fa3_v_transpose", "fa3_v_chain"} <= set(names)
    assert sum(n.startswith("rl_random") for n in names) == 6
    fa3 = {c.name: c.plan for c in cases if c.name.startswith("fa3_")}
    assert all(p.operation == "relayout" and p.dtype == "f8e4m3" for p in fa3.values())
    assert fa3["fa3_v_transpose"].dst_bases != fa3["fa3_v_chain"].dst_bases      # the chain relabels the keys
    red = [c.plan for c in cases if c.plan.operation == "reduce"]
    stages = [p for p in red if p.warps is not None]
    assert {p.warps.spread for p in stages} == {True, False} and {p.elem_bytes for p in stages} == {2, 4}
    from ll_codegen.plan.reduce import plan_reduce
    from ll_codegen.spec import spec_from_dict
    from ll_codegen.testing.corpus import REDUCE_NAMED
    want = {c.name for c in REDUCE_NAMED if c.target == "cuda"
            and plan_reduce(spec_from_dict(c.src).linear, c.dims).warps is not None}
    covered = {c.label.split()[0] for c in cases if c.plan.operation == "reduce" and c.plan.warps is not None}
    assert covered == want and len(want) >= 8, (covered, want)
    assert sum(p.warps is None and p.lane_xors != () for p in red) >= 3


def test_prediction_equals_brute_force(rows):
    bad = [(r["name"], {k: (r["pred"][k], r["brute"][k]) for k in COUNTERS if r["pred"][k] != r["brute"][k]})
           for r in rows if any(r["pred"][k] != r["brute"][k] for k in COUNTERS)]
    assert not bad, bad


def test_shuffle_only_reductions_predict_no_shared_traffic(rows, cases):
    plans = {c.name: c.plan for c in cases}
    for r in rows:
        p = plans[r["name"]]
        if p.operation == "reduce" and p.warps is None:
            assert all(r["pred"][k] == 0 for k in COUNTERS) and r["pred"]["shfl"] == p.shuffles * p.num_warps > 0
        elif p.operation == "reduce":
            assert r["pred"]["st_wf"] > 0 and r["pred"]["ld_wf"] > 0


def test_harnesses_render_the_profiled_kernels(cases, tmp_path):
    from ll_codegen.emit.harness_tiles import scratch_bytes
    from ll_codegen.operations import write_files
    for c in cases:
        write_files(c.plan, str(tmp_path), c.name, emit=("header", "harness"))
        src = (tmp_path / f"{c.name}_harness.cu").read_text()
        assert f"{c.kernel}(" in src, c.kernel
        if c.plan.operation == "relayout":
            assert scratch_bytes(c.plan) == 0 and "kSrcTileBytes / 4" in src    # the fill the prediction counts


def test_verdicts_follow_the_measurement(rows):
    row = dict(next(r for r in rows if r["name"] == "relayout_wgmma_b_e4m3"))
    exact = {k: row["pred"][k] for k in COUNTERS}
    assert nrr.verdict(dict(row, meas=exact)) == ("PASS", True)
    noisy = dict(exact, ld_wf=exact["ld_wf"] + 3, ld_conf=exact["ld_conf"] + 3)
    assert nrr.verdict(dict(row, meas=noisy)) == ("PASS within counter noise", True)
    assert not nrr.verdict(dict(row, meas=dict(exact, st_conf=exact["st_conf"] + 64)))[1]
    merged = dict(exact, st_wf=exact["st_wf"] - 64, st_instr=exact["st_instr"] - 64)
    assert nrr.verdict(dict(row, meas=merged)) == ("FAIL: executed instruction counts differ (compiler)", False)
    assert not nrr.verdict(dict(row, meas={}))[1]
    wrong = dict(row, brute=dict(row["brute"], ld_conf=row["brute"]["ld_conf"] + 1), meas=exact)
    assert nrr.verdict(wrong) == ("FAIL: prediction != brute force", False)
    shfl = next(r for r in rows if r["operation"] == "reduce" and r["pred"]["shfl"])
    base = {k: shfl["pred"][k] for k in COUNTERS}
    assert nrr.verdict(dict(shfl, meas=dict(base, shfl=shfl["pred"]["shfl"])))[1]
    assert nrr.verdict(dict(shfl, meas=dict(base, shfl=shfl["pred"]["shfl"] + 1))) == ("FAIL: shuffles", False)
    table, failures = nrr.render([dict(row, meas=exact), dict(row, name="x", meas={})])
    assert table.count("\n") == 4 and "| PASS |" in table and failures == ["x: FAIL: not measured (no ncu row)"]


def test_measured_reads_the_ncu_counters(cases):
    plan = next(c.plan for c in cases if c.plan.operation == "relayout"              # an ldmatrix load
                and c.plan.load.memory.instr.startswith("matrix"))
    meas = {nrr.REQUIRED[0]: 0.0, nrr.REQUIRED[1]: 0.0, nrr.REQUIRED[2]: 64.0, nrr.REQUIRED[3]: 128.0,
            "smsp__sass_inst_executed_op_shared_st.sum": 128.0, "smsp__sass_inst_executed_op_shared_ld.sum": 0.0,
            "smsp__sass_inst_executed_op_ldsm.sum": 16.0, "smsp__sass_inst_executed_op_shfl.sum": 0.0}
    got = nrr.measured(meas, plan, ["smsp__sass_inst_executed_op_shfl.sum"])
    assert got == {"st_wf": 128.0, "st_conf": 0.0, "ld_wf": 64.0, "ld_conf": 0.0, "st_instr": 128.0,
                   "ld_instr": 16.0, "shfl": 0.0}
    assert nrr.measured(None, plan, []) == {}
    red = next(c.plan for c in cases if c.plan.operation == "reduce" and c.plan.lane_xors)
    assert nrr.measured(meas, red, [], sass_shfl=6)["shfl"] == 6 * red.num_warps      # no ncu counter: SASS x warps
    assert nrr.measured(meas, red, ["smsp__sass_inst_executed_op_shfl.sum"], sass_shfl=6)["shfl"] == 0.0
    assert nrr.shuffle_metrics({"smsp__inst_executed_op_shfl", "smsp__sass_inst_executed_op_shfl", "x__y"}) == \
        ["smsp__sass_inst_executed_op_shfl.sum", "smsp__inst_executed_op_shfl.sum"]


#: Nsight Compute on an H200 (gpu_tests/NCU_NOTES.md, ncu_relayout_reduce table of the build whose warp
#: stage accessed one element at a time): rows where nvcc merged every thread's adjacent partials and
#: results into exactly the vector accesses the plan now issues (SASS STS.64/128, LDS.64/128), so the
#: hardware counted the traffic of those accesses: (st_wf, st_conf, ld_wf, ld_conf, st_instr, ld_instr)
H200_MERGED = {
    "rd_wgmma_cols_sum_f32_spread": (68, 0, 144, 0, 68, 80),
    "rd_wgmma_cols_max_f16_spread": (68, 0, 80, 0, 68, 80),
    "rd_wgmma_cols_sum_f32_direct": (64, 0, 512, 0, 64, 256),
    "rd_mma_v2_cols_sum_f32_spread": (18, 0, 36, 0, 18, 20),
    "rd_mma_v2_cols_max_f16_direct": (16, 0, 32, 0, 16, 32),
    "rd_mma_v2_cols_sum_f32_direct": (16, 0, 64, 0, 16, 32),
    "rd_blocked_cols_sum_f32_spread": (18, 8, 72, 32, 10, 16),
    "rd_blocked_cols_max_f16_spread": (6, 0, 24, 0, 6, 12),
    "rd_blocked_cols_sum_f32_direct": (16, 8, 256, 128, 8, 32),
    "rd_blocked_col_major_rows_sum_f32_spread": (18, 8, 72, 32, 10, 16),
    "rd_blocked_col_major_rows_max_f16_spread": (6, 0, 24, 0, 6, 12),
    "rd_blocked_col_major_rows_sum_f32_direct": (16, 8, 256, 128, 8, 32),
    "rd_blocked_small_bcast_cols_sum_f32_spread": (5, 0, 20, 0, 5, 8),
    "rd_blocked_small_bcast_cols_max_f16_direct": (4, 0, 32, 0, 4, 16),
    "rd_blocked_small_bcast_cols_sum_f32_direct": (4, 0, 64, 0, 4, 16),
}


def test_reduce_prediction_matches_the_h200_merged_accesses(rows):
    """The warp stage's predicted traffic (vector accesses of a thread's adjacent slots) equals what
    the H200 counted where the compiler had merged the element accesses into those same vectors."""
    got = {r["name"]: tuple(r["pred"][k] for k in COUNTERS) for r in rows if r["name"] in H200_MERGED}
    assert got == H200_MERGED
