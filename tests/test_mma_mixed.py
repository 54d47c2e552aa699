"""Mixed-input MMA (``llgen mma --a-dtype``, ``plan/mma_mixed.py``): acc += upcast(A) @ B with A of
i4, u4, e2m1, f8e4m3, f8e5m2, i8 or u8 and B and the instruction f16, bf16 or tf32 (A upcast to exact
f32, a 4-bit A stored K-interleaved: ``mixed_cases.k_interleaved``), and f16 or bf16 A into a tf32
instruction (cvt.f32.f16, bf16 shifted into f32's top half), and the 4-bit A types into the 8-bit
instructions that hold them exactly (i4, u4 -> s8, u4 -> u8, e2m1 -> e4m3, e5m2: byte interleave by
prmt, e2m1 by a prmt table lookup); and the native pairs of
the same catalogue (``testing/mixed_cases.NATIVE_PAIRS``): acc += A @ B with A and B in the
instruction's own types, each type with itself and the 8-bit pairs e4m3 x e5m2 and s8 x u8.

1. Plans: one operation composing the upcast into the MMA's A fragment and the MMA with A from
   registers; the emulator (the upcast by its ISA models, the MMA by the PTX model) reproduces numpy
   for every A type x instruction type on wgmma and mma.sync.
2. Host SIMT runtime (compile): the rendered header and harness, bit-exact against numpy, for every
   A type x {f16, bf16, tf32} on wgmma 64x16x16 and mma.sync 16x16x16, A from shared memory and from
   registers, f16 and bf16 A x tf32 on both tiles and both A spaces, and the scaled formats (int4
   groups of 128 bf16, e2m1 groups of 32 e8m0 into bf16 and tf32), each byte pair on both tiles; a
   wrong constant caught (f16, tf32, i4 -> s8's add, e2m1's table); nvcc sm_90a compiles the files,
   the PTX check runs an f16, a tf32, the 16-bit A x tf32 and two byte-pair cases, and catches a wrong
   bf16 shift and a wrong e2m1 table entry.
3. Native pairs: every pair on the smallest wgmma and mma.sync tiles through the emulator (the PTX
   model reads each operand in its own type), every pair once on the host runtime (wgmma and
   mma.sync in turn), a swapped B type caught there, the PTX check and nvcc on the cross pairs.
4. CLI: the command writes the files; what it cannot do is one line, exit status 2, before planning.
"""
from __future__ import annotations

import re
from dataclasses import replace

import pytest
import yaml
from click.testing import CliRunner

from ll_codegen.api import plan_mma
from ll_codegen.cli import main
from ll_codegen.core.dtypes import F32_ONLY_SOURCES, UPCAST_SOURCES
from ll_codegen.emit.upcast import wrapper_calls
from ll_codegen.operations import check, operation_of, render
from ll_codegen.plan.mma_mixed import MixedMmaPlan
from ll_codegen.testing.mixed_cases import (BYTE_PAIRS, MIXED_DTYPES, NATIVE_PAIRS, UPCAST_PAIRS, MixedCase,
                                            native_k, table_cases)

#: every A type x instruction type on the smallest wgmma and mma.sync tiles, A alternately from shared
#: memory and registers, and the scaled formats
SMALL = [MixedCase(kind, m, n, k, a, d, "registers" if (i + j + (kind == "wgmma")) % 2 else "shared")
         for kind, m, n, k in (("wgmma", 64, 16, 16), ("mma.sync", 16, 16, 16))
         for i, a in enumerate(UPCAST_SOURCES) for j, d in enumerate(MIXED_DTYPES)]
#: f16 and bf16 A into tf32 on the smallest tiles, each A type from shared memory and from registers
WIDE = [MixedCase("wgmma", 64, 16, 16, "f16", "tf32", "registers"), MixedCase("wgmma", 64, 16, 16, "bf16", "tf32", "shared"),
        MixedCase("mma.sync", 16, 16, 16, "f16", "tf32", "shared"),
        MixedCase("mma.sync", 16, 16, 16, "bf16", "tf32", "registers")]
#: the 4-bit A types into the 8-bit instructions holding them (K 32: their k-step), each on both tiles,
#: A alternately from shared memory and registers
BYTES = [MixedCase(kind, m, n, 32, a, d, "registers" if (i + (kind == "wgmma")) % 2 else "shared")
         for kind, m, n in (("wgmma", 64, 16), ("mma.sync", 16, 16)) for i, (a, d) in enumerate(BYTE_PAIRS)]
SCALED = [MixedCase("wgmma", 64, 16, 128, "i4", "bf16", "shared", "128,bf16"),
          MixedCase("mma.sync", 16, 16, 64, "e2m1", "bf16", "registers", "32,e8m0"),
          MixedCase("wgmma", 64, 16, 64, "e2m1", "bf16", "shared", "32,e8m0"),
          MixedCase("mma.sync", 16, 16, 64, "e2m1", "tf32", "shared", "32,e8m0"),
          MixedCase("wgmma", 64, 16, 64, "e2m1", "tf32", "registers", "32,e8m0")]
#: every native pair on the smallest tiles (K at least the instruction's), A alternately in shared
#: memory and registers on wgmma
NATIVE = [MixedCase(kind, m, n, native_k(k, b), a, b, "registers" if kind == "mma.sync" or i % 2 else "shared")
          for kind, m, n, k in (("wgmma", 64, 16, 16), ("mma.sync", 16, 16, 16)) for i, (a, b) in enumerate(NATIVE_PAIRS)]
#: each native pair once on the host runtime: wgmma and mma.sync in turn, wgmma's A alternately in shared
#: memory and registers
NATIVE_HOST = [MixedCase("wgmma", 64, 16, native_k(16, b), a, b, "shared" if p % 4 == 0 else "registers") if p % 2 == 0
               else MixedCase("mma.sync", 16, 16, native_k(16, b), a, b, "registers")
               for p, (a, b) in enumerate(NATIVE_PAIRS)]
W = "examples/w4a16/"


def _plan(c: MixedCase):
    return plan_mma(**c.specs())


# ------------------------------------------------------------------ 1. plans and the emulator
def test_the_plan_composes_the_upcast_and_the_mma():
    p = _plan(MixedCase("wgmma", 64, 16, 16, "i4", "bf16"))
    assert isinstance(p, MixedMmaPlan) and operation_of(p).name == "mma_mixed"
    assert p.mma.a.space == "registers" and p.upcast.dst_bases == p.mma.a.layout
    assert p.upcast.dtype == "i4" and p.upcast.dst_dtype == "bf16" and p.mma.dtype == "bf16"
    assert "mixed-input mma" in p.summary() and '"operation": "mma_mixed"' in p.to_json()


@pytest.mark.parametrize("c", SMALL + WIDE + SCALED + BYTES, ids=lambda c: c.name)
def test_the_emulator_reproduces_numpy(c):
    check(_plan(c), 3)


@pytest.mark.parametrize("a", UPCAST_SOURCES + F32_ONLY_SOURCES)
def test_the_f32_upcast_counts_the_rendered_instructions(a):
    """Into a tf32 fragment: the plan's instruction count is the rendered upcast()'s wrapper calls (the
    int -> f32 conversions of i8 / u8 and bf16's shift are plain C), and each destination word is
    written once."""
    p = _plan(MixedCase("mma.sync", 16, 16, 16, a, "tf32", "registers"))
    up = p.upcast
    assert up.dst_dtype == "f32" and up.dst_words == up.n_dst == 8 and p.mma.dtype == "tf32"
    text = render(p, "header", "x")
    body = text[text.index("void upcast("):]
    body = body[:body.index("\n}\n")]
    wrappers = [op for op in up.sequence.ops if op.split(".")[0] in ("lop3", "fma", "prmt", "cvt")
                and not op.startswith("cvt.rn.f32.")]
    assert len(wrapper_calls(body)) == len(wrappers), (wrapper_calls(body), wrappers)
    assert sorted(int(w) for w in re.findall(r"dst\[(\d+)\] =", body)) == list(range(up.n_dst))


@pytest.mark.parametrize("a, d", BYTE_PAIRS)
def test_the_byte_upcast_counts_the_rendered_instructions(a, d):
    """Into an 8-bit fragment (four elements a word): the plan's lop3 and prmt count is the rendered
    upcast()'s wrapper calls and __byte_perm lookups, each destination word written once."""
    p = _plan(MixedCase("mma.sync", 16, 16, 32, a, d, "registers"))
    up = p.upcast
    assert up.dst_dtype == d and up.n_dst == 16 and up.dst_words == 4 and p.mma.dtype == d
    text = render(p, "header", "x")
    body = text[text.index("void upcast("):]
    body = body[:body.index("\n}\n")]
    calls = wrapper_calls(body) + re.findall(r"__byte_perm\(", body)
    assert len(calls) == sum(op.split(".")[0] in ("lop3", "prmt") for op in up.sequence.ops), calls
    assert sorted(int(w) for w in re.findall(r"dst\[(\d+)\] =", body)) == list(range(up.dst_words))


def test_the_emulator_catches_a_wrong_fragment():
    p = _plan(MixedCase("mma.sync", 16, 16, 16, "u4", "f16"))
    lay = dict(p.mma.a.layout)
    lay["in_dims"] = dict(lay["in_dims"], register=lay["in_dims"]["register"][::-1])
    with pytest.raises(AssertionError, match="not the MMA's A fragment"):
        check(replace(p, mma=replace(p.mma, a=replace(p.mma.a, layout=lay))))


def test_every_table_case_plans():
    """The GPU table's large cases (gpu_tests/test_mma_mixed.py) plan: every A type at 128 rows, a 4-bit
    and an 8-bit one at 256 x 256 x 128 (16 warps of mma.sync)."""
    for c in table_cases():
        if c.m * c.n * c.k >= 128 * 128 * 128 and (c.m < 256 or c.a_dtype in ("i4", "f8e4m3")):
            p = _plan(c)
            assert (p if c.native else p.mma).shape == (c.m, c.n, c.k)


# ------------------------------------------------------------------ 2. host runtime, nvcc
def _host():
    from ll_codegen.run import host
    if host.compiler() is None:
        pytest.skip("the host SIMT runtime needs clang++")
    return host


@pytest.mark.compile
def test_harnesses_run_bit_exact_on_the_host():
    host = _host()
    items = [(c.name, _plan(c)) for c in SMALL + WIDE + SCALED + BYTES]
    results = host.verify_host(items, runs=1, seed=7, jobs=2)
    bad = [r.message for r in results if not r.ok]
    assert not bad, bad[0]


@pytest.mark.compile
def test_a_wrong_upcast_constant_is_caught_on_the_host(monkeypatch):
    """A wrong bias in the i4 sequence into bf16, and into f16 under an f32 destination (tf32); i4 -> s8's
    per-byte add off by one; one entry of e2m1 -> e4m3's table wrong (1.5 as 1.25)."""
    host = _host()
    from ll_codegen.emit import upcast as emit_upcast
    monkeypatch.setitem(emit_upcast.LOP3_MAGIC, "i4_bf16", (0x6A, 0x43084308, 0x3F803F80, 0xC309C309))
    monkeypatch.setitem(emit_upcast.LOP3_MAGIC, "i4_f16", (0x6A, 0x64086408, 0x3C003C00, 0xE409E408))
    monkeypatch.setattr(emit_upcast, "I4_BYTES", (0x08080808, 0x78787879, 0x80808080))
    monkeypatch.setitem(emit_upcast.E2M1_BYTE_TABLE, "e2m1_f8e4m3", (0x3A383000, 0x4C484440))
    items = [("mxbad", _plan(MixedCase("mma.sync", 16, 16, 16, "i4", "bf16"))),
             ("mxbad32", _plan(MixedCase("wgmma", 64, 16, 16, "i4", "tf32", "registers"))),
             ("mxbad8", _plan(MixedCase("mma.sync", 16, 16, 32, "i4", "i8", "registers"))),
             ("mxbadf8", _plan(MixedCase("wgmma", 64, 16, 32, "e2m1", "f8e4m3", "shared")))]
    for r in host.verify_host(items, seed=1, jobs=2):
        assert not r.ok and "compile failed" not in r.message, r.message


@pytest.mark.compile
def test_nvcc_compiles_the_files(tmp_path):
    from toolchain import arch_flags, compile_together, need
    nvcc = need("nvcc")
    units = []
    for c in (SCALED[0], SCALED[-1], SMALL[3], SMALL[-1], WIDE[0], WIDE[1], BYTES[0], BYTES[-2], NATIVE[7],
              NATIVE[-2]):
        p = _plan(c)
        for kind, suffix in (("header", ".cuh"), ("harness", "_harness.cu")):
            (tmp_path / f"{c.name}{suffix}").write_text(render(p, kind, c.name))
        units.append(f"{c.name}_harness.cu")
    bad = compile_together(nvcc, units, arch_flags("sm_90a"), str(tmp_path))
    assert not bad, bad[0][-2000:]


def _ptx_problems(tmp_path, c: MixedCase, mutate=None) -> list[str]:
    """The harness compiled to PTX for the plan's arch and run by the PTX interpreter against the plan
    (``run/ptx_check.py``): the MMA instructions' operands -- the upcast A's words among them -- per
    thread, and for mma.sync (computed by the interpreter) the outputs against numpy."""
    from toolchain import need
    from ll_codegen.run import ptx_check
    p = _plan(c)
    for kind, suffix in (("header", ".cuh"), ("harness", "_harness.cu")):
        text = render(p, kind, c.name)
        (tmp_path / f"{c.name}{suffix}").write_text(mutate(text) if mutate and kind == "header" else text)
    ptx, log = ptx_check.compile_ptx(need("nvcc"), str(tmp_path / f"{c.name}_harness.cu"), p.arch,
                                     str(tmp_path / c.name), cwd=str(tmp_path))
    assert ptx is not None, log[-2000:]
    return ptx_check.check(p, ptx, c.name)


@pytest.mark.compile
@pytest.mark.parametrize("c", [SMALL[1], SMALL[len(SMALL) // 2 + 3],
                               MixedCase("mma.sync", 16, 16, 16, "e2m1", "tf32", "registers"), WIDE[2], WIDE[3],
                               BYTES[5], BYTES[-1]],
                         ids=lambda c: c.name)
def test_ptx_is_what_the_plan_says(tmp_path, c):
    assert _ptx_problems(tmp_path, c) == []


@pytest.mark.compile
def test_the_ptx_check_catches_a_wrong_bf16_shift(tmp_path):
    """bf16 -> f32 is the bits shifted into the top half: one element shifted by 15 must be caught."""
    problems = _ptx_problems(tmp_path, WIDE[3], mutate=lambda t: t.replace("m[1]) << 16", "m[1]) << 15", 1))
    assert problems, "a wrong bf16 shift passed the PTX check"


@pytest.mark.compile
def test_the_ptx_check_catches_a_wrong_e2m1_table_entry(tmp_path):
    """e2m1 -> e4m3's lookup with 1.5 (0x3c) read as 1.25 (0x3a) must be caught."""
    problems = _ptx_problems(tmp_path, BYTES[-2], mutate=lambda t: t.replace("0x3c383000u", "0x3a383000u"))
    assert problems, "a wrong e2m1 table entry passed the PTX check"


@pytest.mark.compile
def test_the_ptx_check_catches_a_wrong_upcast_constant(tmp_path):
    problems = _ptx_problems(tmp_path, MixedCase("mma.sync", 16, 16, 16, "i4", "bf16", "registers"),
                             mutate=lambda t: t.replace("0xc308c308u", "0xc309c308u"))
    assert problems, "a wrong upcast constant passed the PTX check"


# ------------------------------------------------------------------ 3. native pairs
@pytest.mark.parametrize("c", NATIVE, ids=lambda c: c.name)
def test_native_pairs_on_the_emulator(c):
    p = _plan(c)
    assert operation_of(p).name == "mma" and p.a_type == c.a_dtype and p.dtype == c.dtype
    check(p, 3)


def test_the_table_has_every_pair_at_every_shape():
    cases = table_cases()
    native = [c for c in cases if c.native]
    assert len(native) == 7 * len(NATIVE_PAIRS) == 77 and len(cases) == 276
    assert sum(c.dtype == "tf32" and not c.native for c in cases) == 9 * 7 + 5
    byte = [c for c in cases if (c.a_dtype, c.dtype) in BYTE_PAIRS]
    assert len(byte) == 5 * len(BYTE_PAIRS) == 25 and all(c.k % 32 == 0 for c in byte)
    assert {c.a_space for c in byte if c.kind == "mma.sync" and c.a_dtype == "u4"} == {"shared", "registers"}
    assert {(c.a_dtype, c.dtype) for c in cases if not c.native and c.scales is None} == set(UPCAST_PAIRS)
    assert {(c.a_dtype, c.dtype) for c in native} == set(NATIVE_PAIRS)
    assert len({c.name for c in cases}) == len(cases)


def test_a_cross_pair_names_both_types():
    p = _plan(MixedCase("mma.sync", 16, 16, 32, "i8", "u8", "registers"))
    assert p.instr == "mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32" and p.acc_dtype == "i32"
    p = _plan(MixedCase("wgmma", 64, 16, 32, "f8e5m2", "f8e4m3", "shared"))
    assert p.instr == "wgmma.mma_async.sync.aligned.m64n16k32.f32.e5m2.e4m3"
    assert "kE5M2, llgen_host::MmaType::kE4M3" in render(p, "header", "x")


@pytest.mark.compile
def test_native_harnesses_run_bit_exact_on_the_host():
    host = _host()
    results = host.verify_host([(c.name, _plan(c)) for c in NATIVE_HOST], runs=1, seed=5, jobs=2)
    bad = [r.message for r in results if not r.ok]
    assert not bad, bad[0]


@pytest.mark.compile
def test_a_wrong_b_type_is_caught_on_the_host(monkeypatch):
    """The host call naming B's type as A's (e5m2 bits read as e4m3) must fail."""
    host = _host()
    from ll_codegen.emit import mma as emit_mma
    monkeypatch.setitem(emit_mma.HOST_TYPE, "f8e5m2", "kE4M3")
    (r,) = host.verify_host([("nbad", _plan(MixedCase("mma.sync", 16, 16, 32, "f8e4m3", "f8e5m2", "registers")))],
                            seed=1, jobs=1)
    assert not r.ok and "compile failed" not in r.message, r.message


@pytest.mark.compile
def test_ptx_of_a_cross_pair_is_what_the_plan_says(tmp_path):
    assert _ptx_problems(tmp_path, MixedCase("wgmma", 64, 16, 32, "f8e5m2", "f8e4m3", "shared")) == []


# ------------------------------------------------------------------ 4. CLI
def test_cli_writes_the_files_and_the_plan(tmp_path):
    args = ["mma", "--acc", W + "acc_64x64.yaml", "--a", W + "w_smem.yaml", "--b", W + "x_smem_64x64.yaml",
            "--dtype", "bf16", "--a-dtype", "i4", "--scales", "128,bf16"]
    r = CliRunner().invoke(main, args + ["--name", "w4", "-o", str(tmp_path)])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "w4.cuh").read_text()
    assert "--a-dtype i4 --scales 128,bf16" in text
    for fn in ("void load_a(", "void mma(", "void mma_upcast(", "namespace upcast {", "namespace tile {"):
        assert fn in text, fn
    assert (tmp_path / "w4_harness.cu").exists()
    r = CliRunner().invoke(main, args + ["--plan"])
    assert r.exit_code == 0 and r.output.startswith("mixed-input mma:"), r.output


def test_cli_writes_a_native_pair(tmp_path):
    """--a-dtype f8e4m3 --dtype f8e5m2: one mma.sync of the two types, no upcast."""
    specs = MixedCase("mma.sync", 16, 16, 32, "f8e4m3", "f8e5m2", "registers").specs()
    for which in ("acc", "a", "b"):
        (tmp_path / f"{which}.yaml").write_text(yaml.safe_dump(specs[which]))
    args = ["mma", "--acc", str(tmp_path / "acc.yaml"), "--a", str(tmp_path / "a.yaml"), "--b", str(tmp_path / "b.yaml"),
            "--dtype", "f8e5m2", "--a-dtype", "f8e4m3", "--arch", "sm_90"]
    r = CliRunner().invoke(main, args + ["--name", "p8", "-o", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "out" / "p8.cuh").read_text()
    assert "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32" in text and "namespace upcast" not in text


def _write_specs(tmp_path, c: MixedCase, **replace_specs) -> list[str]:
    """``llgen mma``'s spec arguments for the case's specs (some replaced), written to ``tmp_path``."""
    specs = dict(c.specs(), **replace_specs)
    args = ["mma"]
    for which in ("acc", "a", "b"):
        (tmp_path / f"{which}.yaml").write_text(yaml.safe_dump(specs[which]))
        args += [f"--{which}", str(tmp_path / f"{which}.yaml")]
    return args


def test_cli_writes_a_tf32_upcast(tmp_path):
    """--a-dtype i4 --dtype tf32: A (K-interleaved) upcast to f32 into the tf32 wgmma's A fragment."""
    args = _write_specs(tmp_path, MixedCase("wgmma", 64, 16, 16, "i4", "tf32", "shared"))
    r = CliRunner().invoke(main, args + ["--dtype", "tf32", "--a-dtype", "i4", "--name", "w4t",
                                         "-o", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "out" / "w4t.cuh").read_text()
    assert "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32" in text and "i4 -> f32" in text
    assert "detail::cvt_f32_f16" in text and "void mma_upcast(" in text


@pytest.mark.parametrize("a, says", [("f16", "detail::cvt_f32_f16(m["), ("bf16", ") << 16;")])
def test_cli_writes_a_16bit_upcast_into_tf32(tmp_path, a, says):
    """--a-dtype f16 / bf16 --dtype tf32: 16-bit A registers (uint16_t) widened to f32 into the tf32
    mma.sync's A fragment, and a harness."""
    args = _write_specs(tmp_path, MixedCase("mma.sync", 16, 16, 16, a, "tf32", "registers"))
    r = CliRunner().invoke(main, args + ["--dtype", "tf32", "--a-dtype", a, "--name", "h", "-o", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "out" / "h.cuh").read_text()
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in text and f"{a} -> f32" in text
    assert says in text and "void convert_a(const uint16_t (&src)[kASrcRegs]" in text, text[-3000:]
    assert (tmp_path / "out" / "h_harness.cu").exists()


@pytest.mark.parametrize("a, d, says", [("u4", "u8", "detail::prmt_b32<0x7362u>(l0, h0)"),
                                         ("e2m1", "f8e5m2", "__byte_perm(0x3e3c3800u, 0x46444240u")])
def test_cli_writes_a_byte_upcast(tmp_path, a, d, says):
    """--a-dtype u4 --dtype u8 (s32 accumulator) and e2m1 into e5m2 on wgmma (A from registers): the
    header with the 8-bit instruction and the upcast's byte words, and a harness."""
    c = MixedCase("wgmma", 64, 16, 32, a, d, "registers")
    args = _write_specs(tmp_path, c) + ["--dtype", d, "--a-dtype", a, "--acc-dtype", c.acc_dtype]
    r = CliRunner().invoke(main, args + ["--name", "b8", "-o", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    text = (tmp_path / "out" / "b8.cuh").read_text()
    ptx = {"u8": "s32.u8.u8", "f8e5m2": "f32.e5m2.e5m2"}[d]
    assert f"wgmma.mma_async.sync.aligned.m64n16k32.{ptx}" in text and f"{a} -> {d}" in text
    assert says in text and "element 4m + j byte j of m" in text and "void mma_upcast(" in text
    assert (tmp_path / "out" / "b8_harness.cu").exists()


@pytest.mark.parametrize("d, a, extra, says", [
    ("f8e4m3", "e2m1", ["--scales", "32,e8m0"], "takes no scales"),
    ("i8", "i4", ["--scales", "128"], "takes no scales"),
    ("i8", "u4", ["--acc-dtype", "f32"], "accumulates in i32"),
])
def test_cli_refuses_what_an_8bit_destination_cannot_hold(tmp_path, d, a, extra, says):
    """Scales (a scaled 4-bit value need not be an 8-bit value) and a float accumulator of an integer
    instruction: one line, exit status 2, nothing written."""
    c = MixedCase("mma.sync", 16, 16, 32, a, d, "registers")
    args = _write_specs(tmp_path, c) + ["--dtype", d, "--a-dtype", a] + (
        [] if "--acc-dtype" in extra else ["--acc-dtype", c.acc_dtype]) + extra
    r = CliRunner().invoke(main, args + ["-o", str(tmp_path / "out")])
    assert r.exit_code == 2, r.output
    assert says in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert not (tmp_path / "out").exists()


def test_cli_refuses_a_4bit_a_pairing_k_and_k_plus_1_for_tf32(tmp_path):
    """A row-major 4-bit tile pairs k and k + 1 in a byte, which no thread of a tf32 fragment holds."""
    row_major = {"kind": "swizzled_shared", "vec": 1, "per_phase": 1, "max_phase": 1, "order": [1, 0],
                 "shape": [64, 16]}
    args = _write_specs(tmp_path, MixedCase("wgmma", 64, 16, 16, "i4", "tf32", "shared"), a=row_major)
    r = CliRunner().invoke(main, args + ["--dtype", "tf32", "--a-dtype", "i4", "-o", str(tmp_path / "out")])
    assert r.exit_code == 2, r.output
    assert "(k, k + 4)" in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert not (tmp_path / "out").exists()


B8 = "kind: nvmma_shared\nswizzle_byte_width: 64\nelement_bitwidth: 8\ntransposed: true\nshape: [64, 64]\n"


@pytest.mark.parametrize("extra, says", [
    (["--dtype", "bf16", "--a-dtype", "bf16"], "--a-dtype bf16 is --dtype"),
    (["--dtype", "f8e4m3", "--a-dtype", "i4"], "holds exactly (i4 or u4 into i8"),
    (["--dtype", "f16", "--a-dtype", "i4", "--acc-dtype", "f16"], "accumulates in f32"),
    (["--dtype", "f16", "--a-dtype", "e2m1", "--scales", "32,e8m0"], "e8m0"),
    (["--dtype", "bf16", "--scales", "128"], "give --a-dtype"),
    (["--dtype", "bf16", "--a-dtype", "i4", "--scales", "3"], "a power of two"),
    (["--dtype", "bf16", "--a-dtype", "i4", "--b", "B8"], "element_bitwidth"),       # B made for 8-bit elements
    (["--dtype", "i8", "--a-dtype", "f8e4m3"], "holds exactly"),                       # no instruction takes fp8 x s8
    (["--dtype", "u8", "--a-dtype", "i4"], "u4 into u8"),                              # -8 .. -1 are no u8
    (["--dtype", "f16", "--a-dtype", "i4", "--acc-dtype", "i32"], "accumulates in f32"),
    (["--dtype", "tf32", "--a-dtype", "i4", "--scales", "128,bf16"], "e8m0 scales only"),
    (["--dtype", "tf32", "--a-dtype", "bf16", "--scales", "32,e8m0"], "scales apply to the 8- and 4-bit A"),
    (["--dtype", "bf16", "--a-dtype", "f16"], "into a tf32 instruction only"),
])
def test_cli_errors_are_one_line(extra, says, tmp_path):
    out, specs = tmp_path / "out", tmp_path / "specs"
    specs.mkdir()
    (specs / "b8.yaml").write_text(B8)
    extra = [str(specs / "b8.yaml") if x == "B8" else x for x in extra]
    args = ["mma", "--acc", W + "acc_64x64.yaml", "--a", W + "w_smem.yaml", "--b", W + "x_smem_64x64.yaml",
            "-o", str(out)] + extra
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    assert says in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert not out.exists()
