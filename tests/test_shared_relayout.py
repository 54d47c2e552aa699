"""Shared tile -> shared tile relayouts (``relayout``, ``plan/relayout.py``): the planner's
properties checked by the numpy emulator and the brute-force bank counters, the wavefront bound of
the transposes, the warps that hold copies (no load, no store), the CLI, the generated harness on
the host SIMT runtime, the PTX read back, and mutations the checks must catch."""
from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from ll_codegen.api import plan_conversion
from ll_codegen.core import f2
from ll_codegen.core.layout import layout_of
from ll_codegen.core.target import get_target
from ll_codegen.operations import check, write_files
from ll_codegen.plan.model import RegisterPlan
from ll_codegen.plan.planner import plan_memory
from ll_codegen.plan.relayout import fill_side, plan_relayout, templates
from ll_codegen.spec import spec_from_dict
from ll_codegen.testing.corpus import random_memory_tile
from ll_codegen.verify.emulate.banks import count_wavefronts, measure_memory, min_wavefronts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = os.path.join(ROOT, "examples", "specs")


def nvmma(shape, bits, transposed, swizzle=128) -> dict:
    return dict(kind="nvmma_shared", swizzle_byte_width=swizzle, element_bitwidth=bits, rank=2,
                transposed=transposed, fp4_padded=False, shape=list(shape))


def tile(d: dict):
    return spec_from_dict(dict(d)).linear


def bound(plan, side: str) -> int:
    """The wavefront bound counted here, apart from the planner: the bytes one warp moves (the tile
    over the warps whose register layout holds distinct data) over 128-byte wavefronts."""
    regs = layout_of(plan.load.dst_bases if side == "load" else plan.store.src_bases)
    distinct = 1 << sum(1 for v in regs.flat_bases("warp") if v)
    tile_bytes = plan.elem_bytes * int(np.prod(plan.shape))
    return -(-(tile_bytes // distinct) // 128)


def same_candidates(plan, src, dst):
    """R1 = R2 plans built apart from the relayout planner: each tile's own offset order (vector
    registers first, then lanes, warps, registers), loaded and stored by the memory planner."""
    t = get_target(plan.target, plan.arch)
    out = []
    for T in (src, dst):
        units = T.flat_bases("offset")
        k = min((16 // plan.elem_bytes).bit_length() - 1, len(units))
        nl, nw = 5, (plan.num_warps.bit_length() - 1)
        nwv = min(nw, max(0, len(units) - nl - k))
        rest = units[k:]
        lanes, warps = rest[:nl], rest[nl:nl + nwv]
        regs = units[:k] + rest[nl + nwv:]
        from ll_codegen.core.layout import LinearLayout
        R = LinearLayout.from_flat({"register": regs, "lane": lanes, "warp": warps + [0] * (nw - nwv), "block": []},
                                   dict(T.out_dim_sizes), require_surjective=True)
        ld = plan_memory(R, src, "load", "shared", plan.dtype, t)
        st = plan_memory(R, dst, "store", "shared", plan.dtype, t)
        out.append(min(c.score for c in ld.candidates) + min(c.score for c in st.candidates))
    return out


def random_pairs(n: int, seed: int = 7):
    rng = random.Random(seed)
    kinds = ("shared_linear", "swizzled_shared", "nvmma_shared")
    for i in range(n):
        dtype = rng.choice(["f16", "f8e4m3", "f32", "bf16", "i8"])
        w = {"f16": 2, "bf16": 2, "f32": 4}.get(dtype, 1)
        shape = rng.choice([{"dim0": 32, "dim1": 32}, {"dim0": 64, "dim1": 64}, {"dim0": 16, "dim1": 128},
                            {"dim0": 64, "dim1": 32}])
        _, a = random_memory_tile(rng, shape, w, rng.choice(kinds))
        _, b = random_memory_tile(rng, shape, w, rng.choice(kinds))
        yield i, dtype, a, b, rng.choice([1, 2, 4])


@pytest.mark.parametrize("i,dtype,src,dst,warps", list(random_pairs(10)))
def test_random_pairs_emulate_and_count(i, dtype, src, dst, warps):
    """Every element arrives (emulator), both sides' predicted wavefronts are what the brute-force
    counters see, and no R1 = R2 plan built apart is cheaper."""
    p = plan_relayout(src, dst, dtype, num_warps=warps)
    check(p, rng=i)
    for step in (p.load, p.store):
        got = measure_memory(step)
        c = step.memory.cost
        assert (got.wavefronts, got.bank_conflicts, got.total_wavefronts) == \
            (c.wavefronts, c.bank_conflicts, c.total_wavefronts), (step.memory.direction, got, c)
    assert min(c.score for c in p.candidates) <= min(same_candidates(p, src, dst)) + 1e-9
    assert p.convert.strategy in ("noop", "register", "shuffle")


@pytest.mark.parametrize("dtype,bits,shape,sides", [("f16", 16, (64, 64), ("load", "store")),
                                                   ("bf16", 16, (64, 128), ("load", "store")),
                                                   ("f8e4m3", 8, (128, 128), ("load",))])
def test_transposes_of_the_128b_swizzle_reach_the_wavefront_bound(dtype, bits, shape, sides):
    """MN-major -> K-major of a 128-byte swizzled nvmma tile: each listed side spends exactly the
    bound of wavefronts a warp, counted by the brute-force counter over every instruction."""
    src, dst = tile(nvmma(shape, bits, True)), tile(nvmma(shape, bits, False))
    p = plan_relayout(src, dst, dtype)
    check(p)
    t = get_target("cuda")
    for side in sides:
        step = p.load if side == "load" else p.store
        got = measure_memory(step, t)
        assert got.total_wavefronts == bound(p, side), (side, got, bound(p, side))
        assert got.bank_conflicts == 0


@pytest.mark.parametrize("transposed", [True, False])
def test_e4m3_transpose_by_blocks_reaches_the_bound_on_both_sides(transposed):
    """The e4m3 128 x 128 transpose between the two 128-byte swizzles: the block candidate (a thread
    holds 8 x 8 bytes, 8-byte vectors along each tile's fast direction out of the same registers)
    reaches the bound on both sides -- 32 wavefronts a warp each, no conflicts, counted by the
    brute-force counter --, no conversion in between, cost 72 (each side 32 wavefronts plus 16
    instructions at ALU 0.25)."""
    src, dst = tile(nvmma((128, 128), 8, transposed)), tile(nvmma((128, 128), 8, not transposed))
    p = plan_relayout(src, dst, "f8e4m3")
    check(p)
    for side, step in (("load", p.load), ("store", p.store)):
        got = measure_memory(step)
        assert (got.total_wavefronts, got.bank_conflicts, bound(p, side)) == (32, 0, 32), (side, got)
        assert step.memory.vector_bytes == 8
    assert p.convert.strategy == "noop" and p.cost == 72.0


def test_block_candidates_keep_every_template_candidate():
    """The block layouts are added after the template candidates, none of which is dropped: the
    planner's best score is the minimum over a superset, so it never rises."""
    from ll_codegen.plan.relayout import block_layouts, register_layouts
    src, dst = tile(nvmma((128, 128), 8, True)), tile(nvmma((128, 128), 8, False))
    t = get_target("cuda")
    got = register_layouts(src, dst, 1, t, 4, 16)
    blocks = block_layouts(src, dst, 1, t, 4, 16)
    assert blocks and [(lab, a) for lab, a, b in got[-len(blocks):] if a == b] == blocks
    assert not any("blocks" in lab for lab, _, _ in got[:-len(blocks)])


def test_counter_sees_a_conflict():
    """The counter the bound tests rely on can fail: eight lanes on one bank cost eight wavefronts."""
    t = get_target("cuda")
    addrs = np.arange(32) * 128
    assert count_wavefronts(addrs, 4, t) == 32 and min_wavefronts(addrs, 4, t) == 1


def test_mutations_are_caught_by_the_emulator():
    """A wrong register permutation (a byte permute selector in the word view), a shuffled store
    offset and a chained layout that does not fit are each caught (on the first seeded random pair
    whose plan converts by register moves)."""
    p = next(q for q in (plan_relayout(a, b, dt, num_warps=w) for _, dt, a, b, w in random_pairs(30, seed=3))
             if q.convert.strategy == "register")
    perm = list(p.convert.register.dst_from_src)
    perm[0], perm[1] = perm[1], perm[0]
    bad = replace(p, convert=replace(p.convert, register=RegisterPlan(tuple(perm))))
    with pytest.raises(AssertionError, match="conversion"):
        check(bad)
    m = p.store.memory
    acc = list(m.accesses)
    acc[0], acc[1] = replace(acc[0], offset=acc[1].offset), replace(acc[1], offset=acc[0].offset)
    with pytest.raises(AssertionError):
        check(replace(p, store=replace(p.store, memory=replace(m, accesses=tuple(acc)))))
    with pytest.raises(AssertionError, match="does not start"):
        check(replace(p, load=replace(p.load, dst_bases=p.store.src_bases)))


def fill_side_by_span(t, other, fill, warps, nl, nr, cross):
    """``fill_side`` as the module docstring states it, apart from the planner: every vector is
    tested against the span of everything placed so far by ``f2.in_span``."""
    regs, lanes = list(t.regs[:nr]), [0] * nl
    for s, v in t.lanes:
        lanes[s] = v
    used = regs + [v for v in lanes if v] + [w for w in warps if w]

    def put(v, slot=None, as_reg=False):
        if v == 0 or f2.in_span(v, used):
            return
        if slot is not None and not lanes[slot]:
            lanes[slot] = v
        elif as_reg and len(regs) < nr:
            regs.append(v)
        elif 0 in lanes:
            lanes[lanes.index(0)] = v
        elif len(regs) < nr:
            regs.append(v)
        else:
            return
        used.append(v)
    if cross:
        for s, v in other.lanes:
            if not lanes[s]:
                put(v, s)
        for _, v in other.lanes:
            put(v)
        for v in other.regs:
            put(v, as_reg=True)
    for v in fill:
        put(v)
    return regs, lanes


def test_fill_side_places_what_a_span_test_places():
    """The planner's incremental span (``fill_side``) places every vector where the plain
    span test does, for the templates and fill orders of random tile pairs."""
    t = get_target("cuda")
    for i, dtype, src, dst, warps in random_pairs(12, seed=5):
        S, D = src.flat_bases("offset"), dst.flat_bases("offset")
        w = {"f32": 4, "f16": 2, "bf16": 2}.get(dtype, 1)
        for a in templates(S, w, t, "load", 16):
            for b in templates(D, w, t, "store", 16):
                for fill in (S + D, D + S, [x ^ y for x, y in zip(S, D)] + S + D):
                    for nr, warps_ in ((len(S) - 5, []), (len(S) - 6, fill[-1:])):
                        for cross in (True, False):
                            assert fill_side(a, b, fill, warps_, 5, nr, cross) == \
                                fill_side_by_span(a, b, fill, warps_, 5, nr, cross), (i, a, b, cross)


def test_bad_input_is_one_line():
    src = tile(nvmma((64, 64), 16, True))
    with pytest.raises(ValueError, match="power of two"):
        plan_relayout(src, src, "f16", num_warps=3)
    with pytest.raises(ValueError, match="shapes differ"):
        plan_relayout(src, tile(nvmma((64, 128), 16, False)), "f16")
    with pytest.raises(ValueError, match="fewer than the 32 lanes"):
        small = spec_from_dict({"kind": "shared_linear", "offset": [[0, 1], [0, 2], [1, 0], [2, 0]],
                                "shape": [4, 4]}).linear
        plan_relayout(small, small, "f16")


def llgen(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ll_codegen", *args], cwd=ROOT, capture_output=True, text=True)


def test_cli_convert_between_two_shared_layouts(tmp_path):
    r = llgen("convert", "--src", "examples/specs/nvmma_f8_128x128_t.yaml", "--dst",
              "examples/specs/nvmma_f8_128x128.yaml", "--dtype", "f8e4m3", "--warps", "8", "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    header = (tmp_path / "nvmma_f8_128x128_t_to_nvmma_f8_128x128.cuh").read_text()
    assert "relayout(const void* src_smem, void* dst_smem" in header and "kThreads   = 256" in header
    r = llgen("plan", "--src", "examples/specs/nvmma_f16_64x64_t.yaml", "--dst", "examples/nvmma_shared_64x64.yaml",
              "--dtype", "f16")
    assert r.returncode == 0 and "strategy: relayout" in r.stdout and "bound 16" in r.stdout, r.stderr


@pytest.mark.parametrize("args,message", [
    (["--warps", "3"], "--warps 3: a power of two"),
    (["--dtype", "f16"], "is for 8-bit elements"),
    (["--strategy", "smem"], "strategy smem does not apply"),
    (["--swizzle", "none"], "--swizzle"),
])
def test_cli_bad_input_is_one_line_exit_2(tmp_path, args, message):
    base = ["convert", "--src", "examples/specs/nvmma_f8_128x128_t.yaml", "--dst",
            "examples/specs/nvmma_f8_128x128.yaml", "--dtype", "f8e4m3", "-o", str(tmp_path)]
    r = llgen(*(base + args))
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1 \
        and "Traceback" not in r.stderr, r.stderr
    assert not list(tmp_path.iterdir())


def host_items():
    f16 = plan_conversion(nvmma((64, 64), 16, True), nvmma((64, 64), 16, False), "f16")
    e4m3 = plan_conversion(nvmma((128, 128), 8, True), nvmma((128, 128), 8, False), "f8e4m3")
    swz = {"kind": "swizzled_shared", "vec": 8, "per_phase": 1, "max_phase": 8, "order": [1, 0], "shape": [64, 64]}
    reswizzle = plan_conversion(swz, nvmma((64, 64), 16, False), "bf16", warps=2)
    shfl = plan_conversion(nvmma((64, 64), 32, True), nvmma((64, 64), 32, False), "f32", warps=4)
    hip = plan_conversion(nvmma((64, 64), 16, True), nvmma((64, 64), 16, False), "f16", target="hip")
    return [("rl_f16", f16), ("rl_e4m3", e4m3), ("rl_reswizzle", reswizzle), ("rl_f32", shfl), ("rl_hip", hip),
            ("rl_v_e4m3_d64", v_transpose_d64())]


def v_transpose_d64():
    """FA3's e4m3 V tile at head dim 64, MN-major as TMA lands it -> K-major, keys in their own order:
    its register step is a shuffle whose receive side lists words holding the same registers in
    another byte order (a swap stage of whole words cannot pair them)."""
    from ll_codegen.api import load_spec
    return plan_conversion(load_spec(os.path.join(ROOT, "examples/chains/fa3_v_tma_d64.yaml")),
                           load_spec(os.path.join(ROOT, "examples/chains/fa3_v_kmajor_d64.yaml")), "f8e4m3",
                           "cuda", "sm_90a")


def test_every_shuffle_form_renders_where_received_words_hold_registers_in_another_order():
    """The register step the V transpose above may take (MN-major e4m3 lanes -> K-major rows): its
    shuffle receives words whose partners under a swap hold the same registers in another byte order
    ((0, 20, 8, 28) ^ 16 is the word received as (4, 16, 12, 24)); every form the planner scores
    renders, and the emulator accepts each."""
    from ll_codegen.emit.convert import convert_function, namespace
    from ll_codegen.plan.planner import normalise, shuffle_forms
    from ll_codegen.plan.shuffle import plan_shuffle
    warps = [[32, 0], [64, 0]]
    src = {"kind": "linear", "shape": [128, 64], "warp": warps,
           "register": [[0, 1], [0, 2], [2, 16], [4, 32], [8, 0], [16, 0]],
           "lane": [[0, 4], [0, 8], [0, 16], [0, 32], [1, 0]]}
    dst = {"kind": "linear", "shape": [128, 64], "warp": warps,
           "register": [[1, 0], [2, 0], [4, 0], [8, 0], [0, 32], [16, 0]],
           "lane": [[0, 1], [0, 2], [0, 4], [0, 8], [0, 16]]}
    src, dst = spec_from_dict(src).linear, spec_from_dict(dst).linear
    p = plan_conversion(src, dst, "f8e4m3", "cuda", "sm_90a", strategy="shuffle")
    trees = plan_shuffle(normalise(src), normalise(dst), 1)
    assert trees.recv_select.size > 1
    forms = shuffle_forms(p, trees)
    assert len(forms) >= 3
    for form in forms:
        convert_function(form, namespace(form, "k"))
        check(form)


@pytest.mark.compile
def test_generated_harness_runs_bit_exact_on_the_host():
    from ll_codegen.run import host
    if host.compiler() is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    items = host_items()
    for _, p in items:
        check(p)
    results = host.verify_host(items)
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]


@pytest.mark.compile
def test_host_run_catches_a_wrong_byte_permute_selector(tmp_path):
    """The e4m3 transpose's in-register byte transpose with one selector changed fails on the host."""
    from ll_codegen.run import host
    if host.compiler() is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    name, p = host_items()[1]
    write_files(p, str(tmp_path), name)
    path = tmp_path / f"{name}.cuh"
    text = path.read_text()
    sels = re.findall(r"__byte_perm\(([^;]*?), (0x[0-9a-f]+)u?\)", text)
    assert sels, "the e4m3 transpose should permute bytes"
    old = sels[0][1]
    new = hex(int(old, 16) ^ 0x1)
    text, n = re.subn(re.escape(old), new, text, count=1)
    assert n == 1
    path.write_text(text)
    r = host.verify_host([(name, p)], sources=str(tmp_path))
    assert not r[0].ok


@pytest.mark.compile
def test_ptx_is_what_the_plan_says(tmp_path):
    from toolchain import ptx_problems
    import shutil
    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc")
    cases = host_items()[:4]
    for name, p in cases:
        write_files(p, str(tmp_path), name, emit=("header", "harness"))
    for arch in sorted({p.arch for _, p in cases}):
        mine = [(n, p) for n, p in cases if p.arch == arch]
        for name, problems in ptx_problems(mine, str(tmp_path), arch).items():
            assert problems == [], name


def small_transpose(dtype: str = "f32", warps: int = 4):
    """An 8 x 8 row-major -> column-major transpose by ``warps`` warps: 64 elements leave a warp bit
    with nothing distinct to move (2 lanes x 32 = 64), so R1 and R2 broadcast over it."""
    rm = spec_from_dict({"kind": "shared_linear", "offset": [[0, 1], [0, 2], [0, 4], [1, 0], [2, 0], [4, 0]],
                         "shape": [8, 8]}).linear
    cm = spec_from_dict({"kind": "shared_linear", "offset": [[1, 0], [2, 0], [4, 0], [0, 1], [0, 2], [0, 4]],
                         "shape": [8, 8]}).linear
    return plan_relayout(rm, cm, dtype, num_warps=warps)


def zero_warp_bits(bases: dict) -> int:
    """The warp bits whose basis is zero (copies), read from the register layout apart from the plan's masks."""
    return sum(1 << k for k, v in enumerate(bases["in_dims"]["warp"]) if not any(v))


@pytest.mark.parametrize("dtype", ["f32", "f16", "i8"])
def test_broadcast_warps_neither_load_nor_store(dtype):
    """A small tile with 4 warps: the register layouts broadcast over a warp bit; the load skips
    exactly the warps the store skips (the zero warp bases), the emulator's chain holds with those
    warps' registers random, and the brute-force count over the loading warps equals the plan's
    per-warp cost and the ncu script's per-CTA prediction."""
    p = small_transpose(dtype)
    skip = zero_warp_bits(p.load.dst_bases)
    assert skip and skip == zero_warp_bits(p.store.src_bases)
    assert p.load.memory.warp_skip == p.store.memory.warp_skip == skip
    check(p, rng=3)
    loaders = [w for w in range(p.num_warps) if not w & skip]
    for step in (p.load, p.store):
        got = measure_memory(step)
        c = step.memory.cost
        assert sorted({q[2] for q in got.per_instruction}) == loaders
        assert len(got.per_instruction) == c.instructions * len(loaders)
        assert (got.wavefronts, got.bank_conflicts, got.total_wavefronts) == \
            (c.wavefronts, c.bank_conflicts, c.total_wavefronts)
    if os.path.join(ROOT, "gpu_tests") not in sys.path:
        sys.path.insert(0, os.path.join(ROOT, "gpu_tests"))
    import ncu_relayout_reduce as nrr                  # the per-CTA prediction the ncu run compares
    pred, brute = nrr.predict(p), nrr.brute_force(p)
    both = (pred.keys() & brute.keys()) - {"fill"}           # shuffles: predicted only (no brute force of them)
    assert {k: pred[k] for k in both} == {k: brute[k] for k in both} and "ld_wf" in both
    assert pred["ld_instr"] == p.load.memory.cost.instructions * len(loaders)


def test_a_load_in_the_copy_warps_is_counted_and_a_missing_one_is_caught():
    """Mutations: the load with no skip is counted in every warp by the brute force (more
    instructions than the plan's); a load that skips a warp the store needs fails the emulator."""
    p = small_transpose("f32")
    m = p.load.memory
    every = replace(p, load=replace(p.load, memory=replace(m, warp_skip=0)))
    assert len(measure_memory(every.load).per_instruction) > len(measure_memory(p.load).per_instruction)
    check(every)                                       # wasteful, still correct
    wrong = replace(p, load=replace(p.load, memory=replace(m, warp_skip=m.warp_skip | 1)))
    with pytest.raises(AssertionError, match="did not load"):
        check(wrong)


def test_planner_gives_every_warp_distinct_work_when_the_tile_has_room():
    """A 32 x 32 e4m3 re-swizzle by 4 warps: 16-byte vectors would leave a warp bit broadcast (each
    working warp moving 512 B); 8-byte vectors give all 4 warps distinct data, half the wavefronts a
    warp (the bound), and win."""
    rm = spec_from_dict({"kind": "shared_linear", "offset": [[0, 1], [0, 2], [0, 4], [0, 8], [0, 16], [1, 0],
                                                             [2, 0], [4, 0], [8, 0], [16, 0]], "shape": [32, 32]}).linear
    sw = spec_from_dict({"kind": "swizzled_shared", "vec": 16, "per_phase": 1, "max_phase": 2, "order": [1, 0],
                         "shape": [32, 32]}).linear
    p = plan_relayout(rm, sw, "f8e4m3", num_warps=4)
    check(p)
    assert zero_warp_bits(p.load.dst_bases) == 0 and p.load.memory.warp_skip == p.store.memory.warp_skip == 0
    bcast = [c.score for c in p.candidates if "broadcast warp bit" in c.detail]
    assert bcast and min(c.score for c in p.candidates) < min(bcast)
    for side, step in (("load", p.load), ("store", p.store)):
        assert measure_memory(step).total_wavefronts == bound(p, side) == 2


@pytest.mark.compile
def test_broadcast_warps_header_guards_and_runs_bit_exact_on_the_host(tmp_path):
    """The header returns first in the copy warps; the harness is bit-exact on the host SIMT runtime."""
    from ll_codegen.run import host
    for dtype in ("f32", "f16"):
        p = small_transpose(dtype)
        write_files(p, str(tmp_path), f"rl_bcast_{dtype}")
        text = (tmp_path / f"rl_bcast_{dtype}.cuh").read_text()
        assert f"if (((tid / kWarpSize) & {p.load.memory.warp_skip:#x}) != 0) return;" in text
    if host.compiler() is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    items = [(f"rl_bcast_{d}", small_transpose(d)) for d in ("f32", "f16")]
    results = host.verify_host(items)
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]


@pytest.mark.compile
def test_broadcast_warps_ptx_issues_no_load_in_the_copy_warps(tmp_path):
    """The PTX read back matches the plan (the copy warps issue nothing); with the guard removed
    from the header, the copy warps' loads show up as differences."""
    from ll_codegen.run import ptx_check
    import shutil
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc")
    p = small_transpose("f32")
    results = []
    for guard in (True, False):
        d = tmp_path / ("guarded" if guard else "unguarded")
        write_files(p, str(d), "m", emit=("header", "harness"))
        if not guard:
            h = d / "m.cuh"
            text, n = re.subn(r"\n[^\n]*\(tid / kWarpSize\) & 0x[0-9a-f]+\) != 0\) return;[^\n]*", "", h.read_text())
            assert n == 1
            h.write_text(text)
        ptx, log = ptx_check.compile_ptx(nvcc, str(d / "m_harness.cu"), p.arch, str(d / "m.ptx"))
        assert ptx, log
        results.append(ptx_check.check(p, ptx, "m"))
    assert results[0] == [] and results[1] != []
