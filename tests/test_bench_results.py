"""The conversion bench's headline is recomputed from a recorded results file.

``bench/bench_convert.py`` stores every row and its ``headline`` in ``results.json``; the headline is
what ``bench/RESULTS.md`` quotes.  Here ``llgen_bench.headline`` recomputes it from the rows alone --
the flag rule included: a pair with any kernel (ours' or Triton's round trip or base loop) that
spills, uses local memory, has no integrity record, is wrong or failed is left out -- on a
hand-made fixture whose every row exercises one branch of the rule (``tests/data/
bench_results_fixture.json``), and on ``bench/results_h200.json`` when it exists, whose headline
line must appear verbatim in ``bench/RESULTS.md`` (so the numbers there cannot drift from the file).
The integrity columns' parsers (ptxas ``-v``, ``cuobjdump -res-usage``, SASS loops and ``STL``/``LDL``)
are checked on text saved from real builds (``tests/data/bench_*_sample.txt``).  No GPU, no Triton.
"""
from __future__ import annotations

import copy
import json
import math
import pathlib

import pytest

from llgen_bench.headline import headline, headline_line, pair_flags
from llgen_bench.integrity import base_work, kernel_record, parse_ptxas, parse_res_usage, problems
from llgen_bench.sass import functions, loop_step, sass_counts

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
H200 = ROOT / "bench" / "results_h200.json"


def load(path: pathlib.Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def same(a, b) -> bool:
    """Equal, floats to 1e-12 (nan equals nan: a headline with no pairs)."""
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


# ------------------------------------------------------------------ fixture
def test_fixture_headline_by_hand():
    """The fixture's headline, worked out by hand: 4 of 11 pairs unflagged; ratios 0.8, 1.25, 1.0
    (loop minus base) and 0.9, 1.1, 0.8 (whole loops); clean_b is slower than 1.05x by whole loops,
    above 1.15x of the bound (1.2) but within 1.05x of its measured floor (153.6 / 148 clocks), and has
    unequal base work; the noop has no ratio and no bound."""
    h = headline(load(DATA / "bench_results_fixture.json")["rows"])
    assert (h["pairs"], h["unflagged"], len(h["flagged"])) == (11, 4, 7)
    assert (h["with_ratio"], h["with_loop_ratio"]) == (3, 3)
    assert math.isclose(h["geomean_conv"], 1.0, rel_tol=1e-12)
    assert math.isclose(h["geomean_loop"], (0.9 * 1.1 * 0.8) ** (1 / 3), rel_tol=1e-12)
    assert h["slower_loop"] == ["clean_b"]
    assert (h["near_bound"], h["with_bound"]) == (3, 3)
    assert (h["with_floor"], h["near_floor_only"]) == (1, ["clean_b"])
    assert h["base_work_off"] == ["clean_b"]
    assert headline_line(h) == ("HEADLINE over 4 unflagged pairs (7 flagged of 11): geomean ours/Triton 1.000 by "
                                "loop minus base (3 pairs), 0.925 by whole loops (3); 1 slower than 1.05x by whole "
                                "loops; 3/3 within 1.15x of the bound or 1.05x of a measured floor (1 with a floor)")


def test_floor_counts_within_1_05x_only():
    """clean_b at 1.06x of its floor (and 1.2x of its bound) is near neither; without any floor the
    headline line states the bound rule alone, as a run without floors reads."""
    rows = load(DATA / "bench_results_fixture.json")["rows"]
    far = copy.deepcopy(rows)
    next(r for r in far if r["name"] == "clean_b")["ours_over_floor"] = 1.06
    h = headline(far)
    assert (h["near_bound"], h["with_floor"], h["near_floor_only"]) == (2, 1, [])
    bare = [{k: v for k, v in r.items() if k not in ("latency_floor_clk", "floor_clk", "ours_over_floor")}
            for r in rows]
    h = headline(bare)
    assert (h["near_bound"], h["with_floor"]) == (2, 0)
    assert headline_line(h).endswith("; 2/3 within 1.15x of the bound")


def test_with_floor_is_the_larger_of_bound_and_latency_for_pairs_across_warps():
    """``with_floor``: a pair whose data crosses warps gets max(bound, latency floor) and ours over
    it; a warp-local pair (level shuffle) or a run without a floor gets none."""
    from llgen_bench.convert import with_floor
    row = {"level": "smem", "bound_clk": 5.0, "variants": {"auto": {"clk_per_conv_sm": 24.0}}}
    with_floor(row, 20.0)
    assert (row["latency_floor_clk"], row["floor_clk"], row["ours_over_floor"]) == (20.0, 20.0, 1.2)
    with_floor(row, 2.0)                                   # bandwidth-bound: the floor is the bound
    assert (row["floor_clk"], row["ours_over_floor"]) == (5.0, 24.0 / 5.0)
    with_floor(row, None)
    assert "floor_clk" not in row and "ours_over_floor" not in row
    warp_local = {"level": "shuffle", "bound_clk": 5.0, "variants": {"auto": {"clk_per_conv_sm": 24.0}}}
    with_floor(warp_local, 20.0)
    assert "floor_clk" not in warp_local


def test_fixture_flag_reasons():
    """Each flagged row is flagged for what its records show, on the side and kernel that show it."""
    h = headline(load(DATA / "bench_results_fixture.json")["rows"])
    reasons = {f["name"]: f["reasons"] for f in h["flagged"]}
    assert reasons["flag_triton_stack"][0] == "Triton bench: stack 176"
    assert "ours base: spill_stores 304" in reasons["flag_ours_base_spill"]
    assert reasons["flag_triton_local_runtime"] == ["Triton base: local 8"]
    assert reasons["flag_ours_sass_stl"] == ["ours bench: stl 3"]
    assert reasons["flag_no_integrity"] == ["Triton base: no integrity data"]
    assert reasons["flag_wrong"] == ["ours: wrong output"]
    assert reasons["flag_triton_error"][0].startswith("Triton: CompilationError")
    # flagged pairs keep their numbers (listed apart), and none of them enters a figure
    stack = next(f for f in h["flagged"] if f["name"] == "flag_triton_stack")
    assert stack["ours_over_triton"] == 0.5


def test_fixture_stored_headline_matches():
    """The headline stored in the file is the one its rows give."""
    doc = load(DATA / "bench_results_fixture.json")
    assert same(headline(doc["rows"]), doc["headline"])


@pytest.mark.parametrize("field", ["spill_stores", "spill_loads", "stack", "local", "stl", "ldl"])
def test_any_local_memory_flags_a_clean_pair(field):
    """One byte or instruction of local memory in any of the four kernels flags the pair."""
    rows = load(DATA / "bench_results_fixture.json")["rows"]
    clean = next(r for r in rows if r["name"] == "clean_a")
    assert pair_flags(clean) == []
    for side, kind in (("ours", "bench"), ("ours", "base"), ("triton", "bench"), ("triton", "base")):
        r = copy.deepcopy(clean)
        entry = r["variants"]["auto"] if side == "ours" else r["triton"]
        entry["integrity"][kind][field] = 1
        assert pair_flags(r), (side, kind, field)
        before = headline(rows)
        after = headline([r if x["name"] == "clean_a" else x for x in rows])
        assert after["unflagged"] == before["unflagged"] - 1


def test_unknown_fields_are_not_zero():
    """A record with no source at all is 'no integrity data' (flagged), not a clean kernel."""
    assert problems(kernel_record()) == ["no integrity data"]
    assert problems(None) == ["no integrity data"]
    assert problems(kernel_record(regs=80, local_bytes=0)) == []


# ------------------------------------------------------------------ parsers
def test_parse_ptxas_sample():
    """nvcc -Xptxas -v of a pair whose both kernels spill (wgmma 128x128 f32: x and key, 256 registers)."""
    p = parse_ptxas((DATA / "bench_ptxas_sample.txt").read_text())
    assert p["wgmma_to_blocked_128_f32_auto_base"] == {"stack": 296, "spill_stores": 304, "spill_loads": 304,
                                                       "regs": 255}
    assert p["wgmma_to_blocked_128_f32_auto_bench"]["spill_loads"] == 188


def test_parse_res_usage_sample():
    """cuobjdump -res-usage of that cubin and of a Gluon kernel (one function, ``rt2``)."""
    r = parse_res_usage((DATA / "bench_res_usage_sample.txt").read_text())
    assert r["wgmma_to_blocked_128_f32_auto_bench"] == {"regs": 255, "stack": 192, "shared": 1024, "local": 0}
    assert r["rt2"]["stack"] == 16


def test_sass_sample_loops_and_local_memory():
    """Per-function SASS: ours' base loop unrolled 4x by ptxas (counter UR5 -= 4, compared by the
    loop-closing ISETP) -> ALU per iteration = loop ALU / 4; a spilling kernel's STL/LDL in and
    outside its loop."""
    fns = functions((DATA / "bench_sass_sample.txt").read_text())
    assert list(fns) == ["T_row_col_64_f16_auto_base", "wgmma_to_blocked_128_f32_auto_bench"]
    base = sass_counts(fns["T_row_col_64_f16_auto_base"])
    assert base["loop_step"] == 4
    assert base["loop"]["ALU"] == 22            # 8 LOP3, 5 UIADD3, 4 ULOP3, 4 UIMAD, 1 ISETP
    assert base["alu_per_iter"] == 22 / 4
    spill = sass_counts(fns["wgmma_to_blocked_128_f32_auto_bench"])
    assert (spill["kernel"]["STL"], spill["kernel"]["LDL"]) == (7, 40)
    assert (spill["loop"]["STL"], spill["loop"]["LDL"]) == (0, 40)
    assert (spill["loop"]["BAR"], spill["loop"]["STS"], spill["loop"]["LDS"]) == (8, 64, 64)
    assert spill["loop_step"] == 1
    rec = kernel_record(regs=255, sass=spill)
    assert problems(rec) == ["stl 7", "ldl 40"]


def test_loop_step_through_a_copied_predicate():
    """Gluon's gather base loop (H200, sweep_r4_l4_f32): unrolled 4x, the counter UR4 -= 4 compared by
    ``UISETP.GT UP0`` whose value ``PLOP3.LUT P1`` copies for the loop-closing branch; 8 LOP3 an
    iteration (one per element) + the pass's counter add, compare and predicate copy."""
    fns = functions((DATA / "bench_sass_gluon_base.txt").read_text())
    base = sass_counts(fns["sweep_r4_l4_f32_triton_base"])
    assert base["loop_step"] == 4
    assert base["loop"]["ALU"] == 35 and base["alu_per_iter"] == 35 / 4


def test_loop_step_without_a_counter_is_unknown():
    assert loop_step([]) is None


def test_base_work_tolerance():
    """Within 10%, or 2 instructions per iteration (a pass's counter add and compare)."""
    assert base_work({"alu_per_iter": 19.5, "loop_step": 4}, {"alu_per_iter": 20.0, "loop_step": 1})["ok"]
    assert base_work({"alu_per_iter": 1.1}, {"alu_per_iter": 2.5})["ok"]
    assert base_work({"alu_per_iter": 34.0}, {"alu_per_iter": 68.0})["ok"] is False
    assert base_work(None, {"alu_per_iter": 3.0})["ok"] is None


# ------------------------------------------------------------------ the recorded H200 run
def test_recorded_h200_headline():
    """``bench/results_h200.json``: the stored headline is its rows' headline, and RESULTS.md quotes
    its headline line verbatim."""
    if not H200.exists():
        pytest.skip("bench/results_h200.json is not recorded yet (run bench/bench_convert.py on an H200 and "
                    "copy OUT/results.json there)")
    doc = load(H200)
    h = headline(doc["rows"])
    if "headline" in doc:
        mine, stored = json.loads(json.dumps(h, default=str)), doc["headline"]
        if "with_floor" not in stored:       # recorded before the latency floor: every key it has matches
            mine = dict({k: mine[k] for k in stored}, rule={k: mine["rule"][k] for k in stored["rule"]})
        assert same(mine, stored)
    results_md = (ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8")
    assert headline_line(h) in results_md, f"bench/RESULTS.md does not quote: {headline_line(h)}"


def test_smem_bound_is_below_every_smem_plan_and_counts_replicated_destinations():
    """The bound the bench divides by is a lower bound: no shared-memory plan of the corpus (auto's
    and every scored candidate's wavefronts, summed over warps) moves fewer wavefronts than it; a
    destination every warp holds whole (dot operand B, warps along M) is loaded once per warp."""
    import sys
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_convert import CORPUS
    from llgen_bench.jobs import as_linear, bounds
    from ll_codegen.core.dtypes import DTYPE_BYTES
    from ll_codegen.plan.swizzle import plan_smem
    from ll_codegen.plan.planner import normalise
    from ll_codegen.core.target import get_target
    seen = {}
    for name, s, d, dt, *_ in CORPUS:
        src, dst = normalise(as_linear(s)), normalise(as_linear(d))
        w = DTYPE_BYTES[dt]
        b = bounds(src, dst, w)
        seen[name] = b["smem_clk"]
        warps = src.in_dim_size("warp")
        for m in plan_smem(src, dst, w, get_target("cuda", "sm_90"), "optimal", 48 * 1024, None):
            waves = (m.store.total_wavefronts + m.load.total_wavefronts) * warps
            assert waves >= b["smem_clk"] - 1e-9, (name, waves, b)
    assert seen["acc_to_dotB_kw2_f16"] == (64 * 64 * 2 * (1 + 4)) / 128      # 4 warps each load all of B
    assert seen["blocked_to_dotB_64_f16"] == (64 * 64 * 2 * (1 + 2)) / 128   # warps [2, 2]: two copies
    assert seen["T_row_col_64_f16"] == 2 * 64 * 64 * 2 / 128


def test_smem_bound_counts_the_register_bytes_of_lanes_that_share_data():
    """A destination replicated over lanes is loaded by every lane: one load wavefront fills at most
    256 bytes of registers, and 128 where the lanes of a quad hold more than two places (the
    brute-force counter: a 16-byte load that every lane of a warp reads from one address takes 2
    wavefronts, an 8-byte one 1; 16-byte loads of 4 places a quad 4).  T3 dims 021 f16 forward -- 8
    lanes hold each element, 512 B a lane -- loads 64 wavefronts a warp, not the 16 that its 2 KB of
    distinct bytes would fill; back, lanes 0..15 and 16..31 hold the same 128 B a lane, 4 places a
    quad: 32, not 16.  The auto plans' loads, replayed by the counter, reach exactly that (the bound
    is tight on that side)."""
    import sys
    import numpy as np
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_convert import CORPUS
    from llgen_bench.jobs import LANE_BYTES_PER_WAVEFRONT, as_linear, bounds, round_trip_bound
    from ll_codegen.api import plan_conversion
    from ll_codegen.core.target import get_target
    from ll_codegen.plan.plans import without_via
    from ll_codegen.verify.emulate.banks import count_wavefronts, measure_smem
    tgt = get_target("cuda", "sm_90")
    for v in (8, 16):
        waves = count_wavefronts(np.zeros(32, dtype=np.int64), v, tgt, load=True)
        assert waves * LANE_BYTES_PER_WAVEFRONT == 32 * v
        quads = np.arange(32, dtype=np.int64) % 16 * v       # lanes l and l + 16 read one place: 4 a quad
        assert count_wavefronts(quads, v, tgt, load=True) * 128 == 32 * v
    name, s, d, dt, *_ = next(c for c in CORPUS if c[0] == "T3_dims_021_8x16x32_f16")
    src, dst = as_linear(s), as_linear(d)
    fwd, back = bounds(src, dst, 2), bounds(dst, src, 2)
    assert fwd["smem_clk"] == (8192 + 4 * 8192) / 128        # was (8192 + 4 * 2048) / 128: the lanes' copies unseen
    assert back["smem_clk"] == (8192 + 4 * 4096) / 128       # the source: 2 lanes a copy, 128 B a lane
    assert round_trip_bound(fwd, back)["bound_clk"] == 256.0
    for a, b, per_warp in ((src, dst, 8192), (dst, src, 4096)):
        plan = plan_conversion(a, b, dt, "cuda", "sm_90")
        _, load = measure_smem(without_via(plan), tgt)
        assert load.total_wavefronts * 128 == per_warp


@pytest.mark.parametrize("warps", [2, 4, 8])
def test_latency_floor_pair_is_the_minimal_round_trip_across_warps(warps):
    """The latency floor's pair (``jobs.latency_floor_specs``) crosses warps in both directions and
    its plans are what every shared-memory conversion does at least: one 4-byte store and one 4-byte
    load a thread, conflict-free (1 wavefront each, as the brute-force counter replays them), and the
    two block barriers (before the stores: the buffer is reused; between stores and loads)."""
    from llgen_bench.jobs import as_linear, latency_floor_specs
    from ll_codegen.api import plan_conversion
    from ll_codegen.core.target import get_target
    from ll_codegen.plan.planner import classify
    from ll_codegen.verify.emulate.banks import measure_smem
    src, dst = (as_linear(x) for x in latency_floor_specs(warps))
    assert src.in_dim_size("warp") == warps and src.in_dim_size("register") == 1
    for a, b in ((src, dst), (dst, src)):
        assert classify(a, b) == "smem"
        p = plan_conversion(a, b, "f32", "cuda", "sm_90")
        m = p.smem
        assert (p.strategy, m.store_vec, m.load_vec, m.block_barriers, m.warp_barriers) == ("smem", 1, 1, 2, 0)
        st, ld = measure_smem(p, get_target("cuda", "sm_90"))
        assert (st.instructions, st.total_wavefronts, ld.instructions, ld.total_wavefronts) == (1, 1, 1, 1)
