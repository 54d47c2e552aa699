"""Upcasts inside the operation (``--dst-dtype``, ``plan/upcast.py``): i4, u4, e2m1, f8e4m3, f8e5m2,
i8, u8 -> f16, bf16 elements landing in the destination layout.

1. The numpy reference over every code (16 for 4-bit, 256 for 8-bit) against the formats'
   values written out independently (e2m1's table, fp8 by IEEE-style formulas checked at
   named codes), each exact in f16 and bf16; e4m3 NaN / e5m2 inf and NaN as stated.
2. Plans: the permutation makes each source word feed the fast sequence (I's pairs are the
   destination's pairs); a source already in I moves with a noop; the emulator (the move by its
   own emulator, the sequence by ISA models) reproduces the reference for every pair into
   wgmma / mma.sync fragments, small per-thread counts and random layout pairs, and fails on a
   wrong permutation; loads from a global or shared tile likewise (the move a load); the
   instruction count of the plan is the rendered code's.
3. Host SIMT runtime (compile): every pair bit-exact, a wrong constant caught; nvcc sm_90a and
   sm_80 compile the files; the PTX of the harnesses run by the PTX interpreter does what the
   plan says (outputs against numpy, the move's accesses) and catches a wrong constant.
   Scales (``--scales``): the scaled emulation against the reference (one rounding, checked
   against numpy where float64 is exact), the scale layout by brute force (every register's
   group is the one its scale register holds), host, PTX and nvcc as above.
4. CLI: ``--dst-dtype``, ``--scales``; one-line errors, exit status 2, for what it cannot do.
"""
from __future__ import annotations

import os
import random
import tempfile
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner

from ll_codegen.api import conversion_files, plan_conversion
from ll_codegen.cli import main
from ll_codegen.core.dtypes import UPCAST_SOURCES, UPCAST_TARGETS, upcast_problem
from ll_codegen.core.layout import layout_of
from ll_codegen.emit.upcast import wrapper_calls
from ll_codegen.operations import check
from ll_codegen.plan.upcast import permuted
from ll_codegen.testing.corpus import random_pair
from ll_codegen.verify.emulate.reference import row_major_index
from ll_codegen.verify.emulate.upcast import (decode, encode, random_codes, random_scales, scaled_reference,
                                              upcast_reference)

PAIRS = [(s, d) for s in UPCAST_SOURCES for d in UPCAST_TARGETS]
BLOCKED = "examples/blocked_64x64.yaml"
MMA_A = "examples/specs/dot_a_4x1_kw2_64x64.yaml"                # mma.sync m16n8k16 A (8 registers)
WGMMA_A = {"kind": "dot_operand", "operand_index": 0, "k_width": 2, "shape": [64, 64],
           "parent": {"kind": "nvidia_mma", "version": [3, 0], "warps_per_cta": [4, 1], "instr_shape": [16, 64, 16]}}
MMA_B = {"kind": "dot_operand", "operand_index": 1, "k_width": 2, "shape": [32, 32],
         "parent": {"kind": "nvidia_mma", "version": [2, 0], "warps_per_cta": [4, 1], "instr_shape": [16, 8]}}
B_SRC = {"kind": "blocked", "size_per_thread": [8, 1], "threads_per_warp": [4, 8], "warps_per_cta": [1, 4],
         "order": [0, 1], "shape": [32, 32]}                     # K (dim 0) fastest, as B pairs it
#: 4 and 2 destination registers per thread: the 4-bit words of 4 and 2 nibbles
FOUR = {"kind": "blocked", "size_per_thread": [1, 4], "threads_per_warp": [8, 4], "warps_per_cta": [4, 1],
        "order": [1, 0], "shape": [32, 16]}
FOUR_SRC = {"kind": "blocked", "size_per_thread": [1, 4], "threads_per_warp": [8, 4], "warps_per_cta": [4, 1],
            "order": [0, 1], "shape": [32, 16]}
TWO = {"kind": "blocked", "size_per_thread": [1, 2], "threads_per_warp": [4, 8], "warps_per_cta": [4, 1],
       "order": [1, 0], "shape": [16, 16]}
TWO_SRC = {"kind": "blocked", "size_per_thread": [1, 2], "threads_per_warp": [4, 8], "warps_per_cta": [4, 1],
           "order": [0, 1], "shape": [16, 16]}
#: (source, destination) layout pairs every element-type pair is planned for
LAYOUTS = [(BLOCKED, WGMMA_A), (BLOCKED, MMA_A), (B_SRC, MMA_B), (FOUR_SRC, FOUR), (TWO_SRC, TWO)]
GLOBAL = "examples/global_64x64.yaml"
SWIZZLED = "examples/swizzled_shared_64x64.yaml"
#: loads with an upcast: a global and a swizzled shared tile into the fragments
LOADS = [(GLOBAL, WGMMA_A), (SWIZZLED, MMA_A), (GLOBAL, MMA_A)]


def _plan(src, dst, s, d, arch=None):
    return plan_conversion(src, dst, dtype=s, dst_dtype=d, arch=arch)


# ------------------------------------------------------------------ 1. the reference
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def _fp8(code: int, e_bits: int, m_bits: int, bias: int) -> float:
    """An 8-bit float's value by the IEEE pattern (the NaN/inf codes the caller's business)."""
    s, e, m = code >> 7, code >> m_bits & ((1 << e_bits) - 1), code & ((1 << m_bits) - 1)
    v = (m / (1 << m_bits)) * 2.0 ** (1 - bias) if e == 0 else (1 + m / (1 << m_bits)) * 2.0 ** (e - bias)
    return -v if s else v


@pytest.mark.parametrize("src", UPCAST_SOURCES)
def test_the_reference_decodes_every_code(src):
    n = 16 if src in ("i4", "u4", "e2m1") else 256
    codes = np.arange(n, dtype=np.uint8)
    got = decode(codes, src)
    if src in ("u4", "u8"):
        want = np.arange(n, dtype=np.float64)
    elif src in ("i4", "i8"):
        want = np.array([c - n if c >= n // 2 else c for c in range(n)], dtype=np.float64)
    elif src == "e2m1":
        want = np.array(E2M1 + [-v for v in E2M1])
    elif src == "f8e4m3":
        want = np.array([np.nan if c & 0x7F == 0x7F else _fp8(c, 4, 3, 7) for c in range(n)])
        assert (got[0x7E], got[0x08], got[0x01]) == (448.0, 2.0 ** -6, 2.0 ** -9)
    else:
        want = np.array([(np.nan if c & 3 else (-np.inf if c >> 7 else np.inf)) if (c >> 2 & 31) == 31
                         else _fp8(c, 5, 2, 15) for c in range(n)])
        assert (got[0x7B], got[0x01], got[0x7C], got[0xFC]) == (57344.0, 2.0 ** -16, np.inf, -np.inf)
    assert np.array_equal(got, want, equal_nan=True)
    num = ~np.isnan(want)
    assert np.array_equal(np.signbit(got[num]), np.signbit(want[num]))        # -0 kept


@pytest.mark.parametrize("src,dst", PAIRS)
def test_every_upcast_is_exact(src, dst):
    n = 16 if src in ("i4", "u4", "e2m1") else 256
    codes = np.arange(n, dtype=np.uint8)
    bits = upcast_reference(codes, src, dst)                         # asserts exactness itself
    vals = decode(codes, src)
    back = (bits.view(np.float16).astype(np.float64) if dst == "f16"
            else (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64))
    finite = ~np.isnan(vals)
    assert np.array_equal(back[finite], vals[finite])
    assert np.array_equal(np.signbit(back[finite]), np.signbit(vals[finite]))
    assert (bits[~finite] == 0x7FFF).all() and finite.sum() == n - {"f8e4m3": 2, "f8e5m2": 6}.get(src, 0)


def test_encode_refuses_an_inexact_value():
    with pytest.raises(AssertionError, match="not exact"):
        encode(np.array([1 + 2.0 ** -9]), "bf16")
    assert upcast_problem("f16", "bf16") and upcast_problem("u4", "f32") and upcast_problem("u4", "bf16") is None


# ------------------------------------------------------------------ 2. plans and the emulator
@pytest.mark.parametrize("src,dst", PAIRS)
def test_the_emulator_reproduces_numpy(src, dst):
    for s_lay, d_lay in LAYOUTS:
        p = _plan(s_lay, d_lay, src, dst)
        check(p, 3)
        assert p.operation == "upcast" and p.n_dst == layout_of(p.dst_bases).in_dim_size("register")


@pytest.mark.parametrize("src,dst", PAIRS)
def test_loads_from_a_tile_reproduce_numpy(src, dst):
    for s_lay, d_lay in LOADS:
        p = _plan(s_lay, d_lay, src, dst)
        assert p.from_memory and p.move.operation == "load" and p.n_src == 0
        check(p, 4)


@pytest.mark.parametrize("src", ["u4", "e2m1", "i8", "f8e5m2"])
def test_the_permutation_pairs_what_the_sequence_pairs(src):
    p = _plan(BLOCKED, WGMMA_A, src, "bf16")
    s = p.sequence
    four = src in ("u4", "e2m1")
    assert s.group == (8 if four else 4)
    assert list(s.perm[:3]) == ([1, 2, 0] if four else [0, 1, 2])
    for w, k, dw in s.words:                 # output word k of a source word: I's (k, k + 4) or (2k, 2k + 1)
        lo, hi = (8 * w + k, 8 * w + k + 4) if four else (4 * w + 2 * k, 4 * w + 2 * k + 1)
        assert (s.order[2 * dw], s.order[2 * dw + 1]) == (lo, hi)


def test_a_source_already_in_I_moves_with_a_noop():
    dst = layout_of(_plan(BLOCKED, WGMMA_A, "u4", "f16").dst_bases)
    mid = permuted(dst, _plan(BLOCKED, WGMMA_A, "u4", "f16").sequence.perm)
    p = plan_conversion(mid, dst, dtype="u4", dst_dtype="f16")
    assert p.move.strategy == "noop"
    check(p, 1)


def test_random_layout_pairs():
    rng = random.Random(40)
    planned = 0
    for i in range(60):
        s, d = random_pair(rng, max_bits=4)
        src, dst = PAIRS[i % len(PAIRS)]
        try:
            p = plan_conversion(s, d, dtype=src, dst_dtype=dst)
        except ValueError as e:              # one register per thread, a zero pair basis, unpaired nibbles
            assert "\n" not in str(e)
            continue
        check(p, i)
        planned += 1
    assert planned >= 30, planned


def test_the_emulator_catches_a_wrong_permutation():
    p = _plan(BLOCKED, WGMMA_A, "u4", "bf16")
    s = p.sequence
    bad = replace(p, sequence=replace(s, words=tuple((w, k, dw ^ 1) for w, k, dw in s.words)))
    with pytest.raises(AssertionError, match="dst word"):
        check(bad, 0)


@pytest.mark.parametrize("src,dst", PAIRS)
def test_the_instruction_count_is_the_rendered_codes(src, dst):
    p = _plan(BLOCKED, WGMMA_A, src, dst)
    text = p.render("header", name="up")
    body = text[text.index("void upcast("):]
    body = body[:body.index("\n}\n")]
    wrappers = [op for op in p.sequence.ops if op.split(".")[0] in ("lop3", "fma", "prmt", "cvt")
                and not op.startswith("cvt.rn.f32.")]                  # int -> f32: plain C casts
    assert len(wrapper_calls(body)) == len(wrappers), (wrapper_calls(body), wrappers)
    assert f"({p.sequence.per_element:.3g} per element)" in p.summary()


# ------------------------------------------------------------------ 2b. scales
#: (source layout, destination, source type, destination type, --scales)
SCALED = [(BLOCKED, WGMMA_A, "u4", "bf16", "128"), (BLOCKED, WGMMA_A, "i4", "f16", "64,zero"),
          (BLOCKED, MMA_A, "e2m1", "bf16", "32,e8m0"), (GLOBAL, WGMMA_A, "u4", "f16", "32,zero"),
          (B_SRC, MMA_B, "i8", "bf16", "16,dim=0,zero"), (SWIZZLED, MMA_A, "f8e4m3", "f16", "16"),
          (TWO_SRC, TWO, "e2m1", "bf16", "8,e8m0")]


def _scaled(i):
    s_lay, d_lay, src, dst, sc = SCALED[i]
    return plan_conversion(s_lay, d_lay, dtype=src, dst_dtype=dst, scales=sc)


@pytest.mark.parametrize("i", range(len(SCALED)))
def test_scaled_upcasts_reproduce_numpy(i):
    p = _scaled(i)
    for seed in (0, 1):
        check(p, seed)


@pytest.mark.parametrize("i", range(len(SCALED)))
def test_lanes_and_registers_of_a_group_share_a_scale(i):
    """Brute force: every destination register's element lies in the group that the scale register
    it uses (reg_of, through the scale layout) indexes -- no shuffle needed, each scale loaded once."""
    p = _scaled(i)
    c = p.scaling
    dst = layout_of(p.dst_bases)
    coords = dst.apply_all().reshape(p.threads, p.n_dst, -1)
    coords[..., c.dim] //= c.group
    want = np.ravel_multi_index(tuple(np.moveaxis(coords, -1, 0)), c.shape)
    held = row_major_index(layout_of(c.bases)).reshape(p.threads, c.regs)
    assert (held[:, list(c.reg_of)] == want).all()
    assert c.regs <= p.n_dst and len(set(held[0])) == c.regs       # distinct scales, none loaded twice


def test_a_wrong_scale_register_is_caught():
    p = _scaled(0)
    c = p.scaling
    bad = replace(p, scaling=replace(c, reg_of=tuple(r ^ 1 for r in c.reg_of)))
    with pytest.raises(AssertionError, match="dst word"):
        check(bad, 0)


def test_the_scaled_reference_rounds_once():
    """Without zero points RNE(u * s) is numpy's: u * s is exact in float64, np.float16 rounds it once."""
    p = _scaled(5)                                                    # f8e4m3 -> f16, scale per 16
    rng = np.random.default_rng(3)
    codes = random_codes(p, rng)
    scales, zeros = random_scales(p, rng)
    got = scaled_reference(p, codes, scales, zeros)
    coords = np.indices(p.shape).reshape(2, -1)
    coords[p.scaling.dim] //= p.scaling.group
    sv = scales.view(np.float16).astype(np.float64)[np.ravel_multi_index(tuple(coords), p.scaling.shape)]
    with np.errstate(invalid="ignore", over="ignore"):
        want = (decode(codes, "f8e4m3") * sv).astype(np.float16).view(np.uint16)
    nan = np.isnan(decode(codes, "f8e4m3"))
    assert np.array_equal(got[~nan], want[~nan]) and (got[nan] == 0x7FFF).all()


def test_scale_errors_are_one_line():
    for sc, says in (("12", "power of two"), ("abc", "expected G"), ("32,e8m0", "scale bf16 destinations"),
                     ("48,dim=5", "power of two"), ("16,dim=2", "expected G"), ("16,bf16", "destination's type")):
        with pytest.raises(ValueError, match=says) as e:
            plan_conversion(B_SRC, MMA_B, dtype="u4", dst_dtype="f16", scales=sc)
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="--scales scales an upcast"):
        plan_conversion(BLOCKED, MMA_A, dtype="u4", scales="32")


# ------------------------------------------------------------------ 3. host runtime, nvcc, PTX
def _host():
    from ll_codegen.run import host
    if host.compiler() is None:
        pytest.skip("the host SIMT runtime needs clang++")
    return host


@pytest.mark.compile
def test_harnesses_run_bit_exact_on_the_host():
    host = _host()
    items = [(f"up_{s}_{d}", _plan(BLOCKED, WGMMA_A, s, d)) for s, d in PAIRS]
    items += [(f"upl{i}_{s}", _plan(*LAYOUTS[i], s, "f16")) for i in (1, 2, 3, 4) for s in ("i4", "e2m1", "u8")]
    items += [(f"upm{i}_{s}_{d}", _plan(*LOADS[i % 3], s, d)) for i, (s, d) in enumerate(PAIRS)]
    items += [(f"ups{i}", _scaled(i)) for i in range(len(SCALED))]
    results = host.verify_host(items, runs=2, seed=5, jobs=1)
    bad = [r.message for r in results if not r.ok]
    assert not bad, bad[0]


@pytest.mark.compile
def test_a_wrong_constant_is_caught_on_the_host(monkeypatch):
    host = _host()
    from ll_codegen.emit import upcast as emit_upcast
    monkeypatch.setitem(emit_upcast.LOP3_MAGIC, "u4_f16", (0xEA, 0x64006400, 0x3C003C00, 0xE401E401))
    monkeypatch.setitem(emit_upcast.E2M1, "e2m1_bf16", (7, 0x7E807E80, 0x80008000))
    results = host.verify_host([("upw", _plan(BLOCKED, WGMMA_A, "u4", "f16")),
                                ("upw2", _plan(BLOCKED, MMA_A, "e2m1", "bf16"))], runs=1, seed=2, jobs=1)
    for r in results:
        assert not r.ok and "compile failed" not in r.message, r.message


@pytest.mark.compile
def test_a_wrong_scale_register_is_caught_on_the_host():
    host = _host()
    p = _scaled(1)
    bad = replace(p, scaling=replace(p.scaling, reg_of=tuple(r ^ 1 for r in p.scaling.reg_of)))
    with tempfile.TemporaryDirectory() as d:          # the header of the wrong plan, the data of the right one
        for kind, suffix in (("header", ".cuh"), ("harness", "_harness.cu")):
            with open(os.path.join(d, f"upsw{suffix}"), "w") as f:
                f.write((bad if kind == "header" else p).render(kind, name="upsw"))
        (r,) = host.verify_host([("upsw", p)], runs=1, seed=1, jobs=1, sources=d)
    assert not r.ok and "compile failed" not in r.message, r.message


@pytest.mark.compile
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_nvcc_compiles_the_files(arch, tmp_path):
    from toolchain import arch_flags, compile_together, need
    nvcc = need("nvcc")
    units = []
    for i, (s, d) in enumerate(PAIRS):
        if arch == "sm_80" and s.startswith("f8"):
            continue                                   # fp8 cvt pairs are sm_89+: refused for sm_80 (below)
        src = (BLOCKED, GLOBAL, SWIZZLED)[i % 3]
        conv = conversion_files(src, MMA_A, dtype=s, dst_dtype=d, arch="sm_80" if arch == "sm_80" else "sm_90",
                                name=f"up{i}", emit=("header", "harness"))
        for fname, text in conv.files.items():
            (tmp_path / fname).write_text(text)
        units.append(f"up{i}_harness.cu")
    if arch == "sm_80":
        for i in (0, 1, 2, 3):
            s_lay, d_lay, src, dst, sc = SCALED[i]
            p = plan_conversion(s_lay, d_lay, dtype=src, dst_dtype=dst, scales=sc, arch="sm_80")
            for kind, suffix in (("header", ".cuh"), ("harness", "_harness.cu")):
                (tmp_path / f"ups{i}{suffix}").write_text(p.render(kind, name=f"ups{i}"))
            units.append(f"ups{i}_harness.cu")
    bad = compile_together(nvcc, units, arch_flags(arch), str(tmp_path))
    assert not bad, bad[0][-2000:]


def _ptx(p, n, tmp_path, mutate=None):
    from toolchain import need
    from ll_codegen.run import ptx_check
    nvcc = need("nvcc")
    for kind, suffix in (("header", ".cuh"), ("harness", "_harness.cu")):
        text = p.render(kind, name=n)
        (tmp_path / f"{n}{suffix}").write_text(mutate(text) if mutate and kind == "header" else text)
    ptx, log = ptx_check.compile_ptx(nvcc, str(tmp_path / f"{n}_harness.cu"), "sm_90", str(tmp_path / n),
                                     cwd=str(tmp_path))
    assert ptx is not None, log[-2000:]
    text = open(ptx).read() if os.path.exists(ptx) else ptx
    return ptx_check.check(p, text, n)


@pytest.mark.compile
def test_ptx_of_the_harnesses_does_what_the_plan_says(tmp_path):
    """The device branch read back: lop3, prmt, fma.rn.f16x2/bf16x2 and the fp8 cvt pairs run by the
    PTX interpreter (models from the ISA, ``verify/ptx/floats.py``), outputs against numpy."""
    from toolchain import ptx_problems
    cases = [(f"upp{i}", _plan(*LAYOUTS[i % 3], s, d), (s, d)) for i, (s, d) in enumerate(PAIRS)]
    # loads: the tile accesses per thread too; scales: fma.rn.x2 rounding by the ISA model
    cases += [(f"upq{i}", _plan(*LOADS[i % 3], s, d), (s, d)) for i, (s, d) in enumerate(PAIRS[::3])]
    cases += [(f"ups{i}", _scaled(i), SCALED[i]) for i in range(len(SCALED))]
    for n, p, _ in cases:
        for kind, suffix in (("header", ".cuh"), ("harness", "_harness.cu")):
            (tmp_path / f"{n}{suffix}").write_text(p.render(kind, name=n))
    problems = ptx_problems([(n, p) for n, p, _ in cases], str(tmp_path), "sm_90")
    for n, _, what in cases:
        assert problems[n] == [], what


@pytest.mark.compile
def test_the_ptx_check_catches_a_wrong_constant(tmp_path):
    problems = _ptx(_plan(BLOCKED, WGMMA_A, "i4", "bf16"), "uppw", tmp_path,
                    mutate=lambda t: t.replace("0xc308c308u", "0xc309c308u"))
    assert problems and "behaviour" in problems[0], problems


# ------------------------------------------------------------------ 4. CLI
def test_cli_convert_and_plan(tmp_path):
    spec = tmp_path / "wgmma_a.yaml"
    spec.write_text("kind: dot_operand\noperand_index: 0\nk_width: 2\nshape: [64, 64]\nparent:\n  kind: nvidia_mma\n"
                    "  version: [3, 0]\n  warps_per_cta: [4, 1]\n  instr_shape: [16, 64, 16]\n")
    r = CliRunner().invoke(main, ["plan", "--src", BLOCKED, "--dst", str(spec), "--dtype", "u4", "--dst-dtype", "bf16"])
    assert r.exit_code == 0 and "upcast u4 -> bf16 (exact)" in r.output and "1.38 per element" in r.output, r.output
    r = CliRunner().invoke(main, ["convert", "--src", BLOCKED, "--dst", str(spec), "--dtype", "u4", "--dst-dtype",
                                  "bf16", "-o", str(tmp_path), "--name", "w4"])
    assert r.exit_code == 0, r.output
    assert "--dtype u4 --dst-dtype bf16" in (tmp_path / "w4.cuh").read_text()


@pytest.mark.parametrize("args,says", [
    (["--dtype", "f16", "--dst-dtype", "bf16"], "no upcast f16 -> bf16"),
    (["--dtype", "f8e4m3", "--dst-dtype", "f16", "--arch", "sm_80"], "needs sm_89 or newer"),
    (["--dtype", "u4", "--dst-dtype", "f32"], "Invalid value for '--dst-dtype'"),
    (["--dtype", "u4", "--dst-dtype", "f16", "--dst", "examples/global_64x64.yaml"], "--dst-dtype upcasts"),
    (["--dtype", "u4", "--dst-dtype", "f16", "--src", GLOBAL, "--swizzle", "none"], "does not apply to an upcast"),
    (["--dtype", "u4", "--dst-dtype", "f16", "--target", "hip", "--arch", "gfx1100"], "CUDA sequences"),
])
def test_cli_errors_are_one_line(args, says, tmp_path):
    dst = [] if "--dst" in args else ["--dst", MMA_A]
    src = [] if "--src" in args else ["--src", BLOCKED]
    r = CliRunner().invoke(main, ["convert", *src, *dst, *args, "-o", str(tmp_path)])
    assert r.exit_code == 2 and says in r.output and r.output.count("\n") == 1, r.output
    assert not list(tmp_path.iterdir())


def test_one_register_per_thread_is_refused():
    one = {"kind": "blocked", "size_per_thread": [1, 1], "threads_per_warp": [4, 8], "warps_per_cta": [4, 1],
           "order": [1, 0], "shape": [16, 8]}
    with pytest.raises(ValueError, match="at least 2 registers per thread"):
        plan_conversion(one, one, dtype="i8", dst_dtype="f16")
