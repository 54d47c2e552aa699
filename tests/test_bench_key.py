"""The conversion bench's key and both sides' kernels built offline.

The round-trip bench xors every element e with ``key(e) ^ k`` between the two conversions.  The key
(``emit.convert.bench_key``) is F2-linear in the row-major index e, so in any layout the key of a
thread's register r is an immediate (the key of ``e(r, 0, 0)``) xored with one value per thread (the key
of ``e(0, lane, warp)``): neither side keeps a key array in registers (at 128 elements a thread that
array alone spilled).  Checked here:

* the key itself (no compiler): linear, injective on 16-bit tile indices, odd-weight distinct low bytes
  (8-bit elements); ``timing.bench_key`` (numpy, what the GPU check compares with) agrees with it;
  ``bench_key_values`` (the template's immediates and per-thread columns) reproduce it for every
  register, lane and warp of a layout, words packed low register first;
* the Gluon side's split of the key (``gluon.key_regmask``) refuses layouts whose register and lane/warp
  bits of e overlap;
* offline builds (``crosscheck``, ``compile``: nvcc and Triton's ptxas, no GPU): for the held-out pairs
  with many elements a thread and for rank-3 pairs (which failed on the Triton side with a
  ``TypeError``: a 2-D kernel given three dims) both sides compile for sm_90, neither kernel spills or
  uses local memory, the two base loops do the same SASS ALU work, and the multiset of ``LOP3``
  immediates of Triton's round trip loop is ours: Triton computes the same key, by its own lowering
  of the tile's row-major offsets, as our template's constants.
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from ll_codegen.emit.convert import BENCH_KEY_COLUMNS, bench_key, bench_key_values
from ll_codegen.spec import spec_from_dict
from ll_codegen.testing.corpus import COL, MMA, blocked, dot, mma_v2
from llgen_bench.gluon import key_regmask
from llgen_bench.jobs import hardware_points
from llgen_bench.timing import bench_key as bench_key_np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from triton_oracle import triton_available  # noqa: E402


def test_key_is_linear_and_injective_on_16_bits():
    e = np.arange(1 << 16)
    k = bench_key_np(e)
    assert len(np.unique(k)) == 1 << 16 and int(k.max()) < 1 << 16
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 1 << 20, 500), rng.integers(0, 1 << 20, 500)
    assert np.array_equal(bench_key_np(a ^ b), bench_key_np(a) ^ bench_key_np(b))
    assert [bench_key(int(x)) for x in a[:50]] == bench_key_np(a[:50]).tolist()


def test_key_low_bytes_tell_small_misplacements_apart():
    """8-bit elements keep the low byte: odd weights, all distinct, so indices differing in one, two
    or three bits get different 8-bit keys."""
    low = [c & 0xFF for c in BENCH_KEY_COLUMNS]
    assert len(set(low)) == len(low) and all(bin(v).count("1") % 2 for v in low)
    bits = len(BENCH_KEY_COLUMNS)
    for i in range(bits):
        for j in range(i + 1, bits):
            assert (bench_key((1 << i) | (1 << j)) & 0xFF) != 0
            for m in range(j + 1, bits):
                assert (bench_key((1 << i) | (1 << j) | (1 << m)) & 0xFF) != 0


def test_key_refuses_indices_past_its_columns():
    with pytest.raises(ValueError, match="tiles up to"):
        bench_key(1 << len(BENCH_KEY_COLUMNS))


def _thread_value(expr: str, lane: int, warp: int) -> int:
    """The template's per-thread C expression evaluated for one thread (unsigned 32-bit)."""
    py = re.sub(r"\b(0x[0-9a-f]+|\d+)u\b", r"\1", expr)
    return eval(py, {}, {"lane": lane, "warp": warp}) & 0xFFFFFFFF      # noqa: S307 - our own expression


LAYOUTS = [("row_col_f16", COL, 2, 2), ("mma_f32", MMA, 4, 1), ("dotB_f8", dot(MMA, 1, 4, [64, 64]), 1, 4),
           ("rank3_f16", blocked([1, 8, 1], [1, 8, 4], [2, 1, 2], [1, 2, 0], [2, 64, 64]), 2, 2),
           ("mma3_f64", mma_v2([2, 2, 1], [2, 64, 64], (1, 16, 8)), 8, 1)]


@pytest.mark.parametrize("name,spec,elem_bytes,pack", LAYOUTS, ids=[x[0] for x in LAYOUTS])
def test_key_values_are_the_key_of_every_register(name, spec, elem_bytes, pack):
    """imm[r] ^ thread(lane, warp) is the key (truncated to the element) of the element the layout
    puts in register r of that thread; words pack ``pack`` registers, the lowest in the low bits."""
    L = spec_from_dict(dict(spec)).linear
    imm, thread = bench_key_values(L, elem_bytes, pack)
    pts = hardware_points(L)                             # (warps, lanes, registers) row-major indices
    bits = 8 * min(elem_bytes, 2)
    mask = (1 << bits) - 1
    assert len(imm) == pts.shape[2] // pack
    for w in range(pts.shape[0]):
        for lane in range(pts.shape[1]):
            t = _thread_value(thread, lane, w)
            for j, c in enumerate(imm):
                want = sum((bench_key(int(pts[w, lane, pack * j + i])) & mask) << (bits * i) for i in range(pack))
                assert (int(c.rstrip("u"), 16) ^ t) == want, (w, lane, j)


def test_gluon_key_split_needs_disjoint_register_bits():
    assert key_regmask([1, 2, 64], [4, 8, 16, 32]) == 67
    assert key_regmask([0, 1], [2, 0]) == 1                 # broadcast (zero) images take no bits
    with pytest.raises(ValueError, match="overlap"):
        key_regmask([1, 3], [2])


# ------------------------------------------------------------------ offline builds (nvcc + Triton)
#: held-out pairs with many elements a thread (their bench kernels spilled or ran at 255 registers)
#: and rank-3 pairs (the Triton side failed); names of bench/bench_convert.py's CORPUS
OFFLINE = ["blocked_to_dotB_64x128_f16", "T_row_col_64x128_f32_2w", "T3_batch_row_col_2x64x64_f16",
           "mma2_3d_to_blocked_2x64x64_f16"]

WORKER = r"""
import json, os, re, sys
sys.path.insert(0, os.path.join(sys.argv[1], "bench"))
from bench_convert import CORPUS
from llgen_bench.jobs import compile_jobs, prepare
from llgen_bench.convert import preflight_job
from llgen_bench.sass import functions, loop_xor_immediates, sass_counts

def keys(path, fn):
    fns = functions(open(path).read())
    text = fns[fn] if fn else next(iter(fns.values()))
    step = sass_counts(text)["loop_step"] or 1          # a loop unrolled k times xors every key k times
    imm = loop_xor_immediates(text)
    return sorted(set(imm)), {v: imm.count(v) / step for v in set(imm)}

out = {}
work = sys.argv[2]
for name, s, d, dt, _, note in CORPUS:
    if name not in sys.argv[3:]:
        continue
    job = prepare(name, s, d, dt, work, naive=False, note=note)
    compile_jobs([job], log=lambda m: None)
    row = preflight_job(job, work=work)
    v = job.variants[0]
    ours = keys(v.cubin[:-6] + ".sass", v.kernel + "_bench")
    tri = keys(os.path.join(work, re.sub(r"\W", "_", name) + "_triton_bench.sass"), "")
    out[name] = {"flags": row["flags"], "base_work": row["base_work"], "error": row["triton"].get("error"),
                 "ours_imm": ours, "triton_imm": tri}
sys.__stdout__.write(json.dumps(out) + "\n")
"""


@pytest.fixture(scope="module")
def offline_rows(tmp_path_factory):
    if not triton_available():
        pytest.skip("triton is not installed (pip install '.[crosscheck]' to compare with Triton)")
    work = tmp_path_factory.mktemp("bench_offline")
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path_factory.mktemp("triton_cache")))
    r = subprocess.run([sys.executable, "-c", WORKER, str(ROOT), str(work), *OFFLINE], capture_output=True,
                       text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.splitlines()[-1])


@pytest.mark.crosscheck
@pytest.mark.compile          # nvcc; triton.compile runs ptxas (Triton's own copy)
@pytest.mark.parametrize("name", OFFLINE)
def test_both_sides_build_offline_without_spills(offline_rows, name):
    row = offline_rows[name]
    assert row["error"] is None, row["error"]
    assert row["flags"] == [], row["flags"]                  # no spill, stack, local memory, STL/LDL
    assert row["base_work"]["ok"] is True, row["base_work"]


@pytest.mark.crosscheck
@pytest.mark.compile          # nvcc; triton.compile runs ptxas (Triton's own copy)
@pytest.mark.parametrize("name", OFFLINE)
def test_triton_round_trip_xors_our_key(offline_rows, name):
    """The xor immediates of both round-trip loops (``sass.loop_xor_immediates``, per iteration of a
    loop unrolled k times) are the same multiset: one per destination word (or element) with a
    nonzero key, each xored once per iteration -- Triton's key from its own row-major offsets equals
    our template's constants."""
    row = offline_rows[name]
    ours, tri = row["ours_imm"], row["triton_imm"]
    assert len(ours[0]) >= 8 and ours == tri
    assert set(ours[1].values()) == {1.0}


def test_round_trip_bound_is_the_mean_of_both_directions():
    """A round trip's time is two conversions, so a conversion's bound is the mean of the forward and
    the back bound; for blocked -> dot B 64 x 128 (every warp holds all of B) the back bound is one
    stored copy and one load of the source, below the forward one (four loaded copies), and no
    shared-memory plan of either direction moves fewer wavefronts than its direction's bound (stores
    counted in the warps that store: broadcast warps skip them)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_convert import CORPUS
    from llgen_bench.jobs import as_linear, bounds, round_trip_bound
    from ll_codegen.core.target import get_target
    from ll_codegen.plan.planner import normalise
    from ll_codegen.plan.swizzle import plan_smem
    name, s, d, dt, *_ = next(c for c in CORPUS if c[0] == "blocked_to_dotB_64x128_f16")
    src, dst = normalise(as_linear(s)), normalise(as_linear(d))
    fwd, back = bounds(src, dst, 2), bounds(dst, src, 2)
    assert (fwd["bound_clk"], back["bound_clk"]) == (64 * 128 * 2 * (1 + 4) / 128, 64 * 128 * 2 * (1 + 1) / 128)
    rt = round_trip_bound(fwd, back)
    assert (rt["bound_clk"], rt["fwd_clk"], rt["back_clk"]) == (448.0, 640.0, 256.0)
    warps = src.in_dim_size("warp")
    for a, b, bound in ((src, dst, fwd), (dst, src, back)):
        for m in plan_smem(a, b, 2, get_target("cuda", "sm_90"), "optimal", 48 * 1024, None):
            storing = warps >> bin(m.store_warp_skip).count("1")
            waves = m.store.total_wavefronts * storing + m.load.total_wavefronts * warps
            assert waves >= bound["bound_clk"] - 1e-9, (waves, bound)
    same = round_trip_bound(fwd, fwd)
    assert same["bound_clk"] == fwd["bound_clk"] and same["bound_kind"] == fwd["bound_kind"]


SASS = """\
        /*0000*/                   LOP3.LUT R4, R4, 0x111, R2, 0x96, !PT ;          /* 0x0 */
        /*0010*/                   ISETP.NE.AND P0, PT, R3, RZ, PT ;                /* 0x0 */
        /*0020*/                   LOP3.LUT R5, R5, 0x40c1, R7, 0x96, !PT ;         /* 0x0 */
        /*0030*/                   LOP3.LUT R6, R6, 0x3090, RZ, 0x3c, !PT ;         /* 0x0 */
        /*0040*/                   LOP3.LUT R8, R9, 0x7040, R7, 0x1e, !PT ;         /* 0x0 */
        /*0050*/                   LOP3.LUT R10, R10, 0xffff, RZ, 0xc0, !PT ;       /* 0x0 */
        /*0060*/                   LOP3.LUT R11, R11, R12, R7, 0x96, !PT ;          /* 0x0 */
        /*0070*/                   LOP3.LUT R5, R5, 0x80838083, R7, 0x96, !PT ;     /* 0x0 */
        /*0080*/               @P0 BRA 0x20 ;                                       /* 0x0 */
        /*0090*/                   LOP3.LUT R4, R4, 0x222, R2, 0x96, !PT ;          /* 0x0 */
        /*00a0*/                   EXIT ;                                           /* 0x0 */
"""


SASS_ADDRESS = """\
        /*0000*/                   LOP3.LUT R88, R154, 0xc86a48e9, R88, 0x96, !PT ;   /* 0x0 */
        /*0010*/                   LOP3.LUT R77, R76, 0x10, RZ, 0x3c, !PT ;          /* 0x0 */
        /*0020*/                   PRMT R35, R88, 0x5410, R91 ;                      /* 0x0 */
        /*0030*/                   STS.128 [R77+UR5+0x900], R32 ;                    /* 0x0 */
        /*0040*/                   LOP3.LUT R77, R154, 0xc04640c5, R77, 0x96, !PT ;  /* 0x0 */
        /*0050*/                   LOP3.LUT R6, R4, 0x20, RZ, 0x3c, !PT ;            /* 0x0 */
        /*0060*/                   LDSM.16.MT88.4 R28, [R6+UR5+0x1000] ;             /* 0x0 */
        /*0070*/                   STS.128 [R5], R76 ;                               /* 0x0 */
        /*0080*/               @P0 BRA 0x0 ;                                         /* 0x0 */
        /*0090*/                   EXIT ;                                            /* 0x0 */
"""


def test_loop_xor_immediates_leave_out_addresses():
    """An xor whose result is next read inside a memory operand's brackets is an address ptxas
    recomputes in the loop (``R76 ^ 0x10`` for an STS, ``R4 ^ 0x20`` for an LDSM), not a key; the
    same register reused for data afterwards (R77 ^ key, stored as data) is a key."""
    from llgen_bench.sass import loop_xor_immediates
    assert loop_xor_immediates(SASS_ADDRESS) == sorted([0xc86a48e9, 0xc04640c5])


def test_loop_xor_immediates_reads_the_main_loop():
    """The immediates of the xor LOP3s between a backward branch's target and the branch: three-input
    xor, two-input xor with RZ, a ^ (b | c) (ptxas's form for disjoint bits); not an AND, not a xor of
    registers only, nothing before or after the loop."""
    from llgen_bench.sass import loop_xor_immediates
    assert loop_xor_immediates(SASS) == sorted([0x40C1, 0x3090, 0x7040, 0x80838083])
