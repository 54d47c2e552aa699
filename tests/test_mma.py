"""``llgen mma``: the plan (fragments, wgmma descriptors), checked against the independent PTX
model (``verify/models/ptx_model.py``), the emulator, the compilers, the host SIMT runtime and the CLI."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from ll_codegen.api import mma_files
from ll_codegen.core.layout import LinearLayout, layout_of
from ll_codegen.layouts.dot_operand import DotOperandLayout
from ll_codegen.layouts.memory import NVMMASharedLayout
from ll_codegen.layouts.nvidia import NVMMADistributedLayout
from ll_codegen.plan.mma import AB_BYTES, MmaError, plan_mma as plan_layouts, tile_offsets
from ll_codegen.verify.models import ptx_model
from ll_codegen.operations import check
from ll_codegen.testing.corpus import mma_cases

from toolchain import arch_flags, need

ACC = {"i8": "i32", "u8": "i32"}
CASES = mma_cases()
WGMMA_SS = [c for c in CASES if c.a_space == c.b_space == "shared"]


def wgmma_acc(m: int, n: int, n_instr: int, warps_m: int = 4, warps_n: int = 1) -> LinearLayout:
    return NVMMADistributedLayout(version=(3, 0), warps_per_cta=(warps_m, warps_n),
                                  instr_shape=(16, n_instr, 16)).to_linear([m, n])


def shared(shape, swz: int, bits: int, transposed: bool = False) -> LinearLayout:
    return NVMMASharedLayout(swz, bits, transposed=transposed).to_linear(list(shape))


def plan_of(c):
    return plan_layouts(c.acc, c.a, c.b, c.a_space, c.b_space, c.version, c.dtype, c.acc_dtype, "cuda", c.arch)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_plans_run_exactly_on_the_ptx_model(case):
    """Every generated form: the plan executed through the PTX model equals C + A @ B."""
    check(plan_of(case), 0)


@pytest.mark.parametrize("case", WGMMA_SS[::2], ids=[c.name for c in WGMMA_SS[::2]])
def test_descriptor_addresses_equal_the_layout_offsets(case):
    """For every step and warp group: the addresses the PTX model reads through the plan's
    descriptor are the shared layout's own byte offsets of that slice, element for element."""
    p = plan_of(case)
    e, (_, n_i, k_i) = AB_BYTES[case.dtype], p.instr_shape
    for name, tile, rows_first, rows in (("a", case.a, True, 64), ("b", case.b, False, n_i)):
        op = getattr(p, name)
        offs = tile_offsets(tile) * e
        acc_l = layout_of(p.acc_layout)
        tiles = len({s.acc for s in p.steps})            # steps: k-steps outermost, then accumulator tiles
        for g in range(p.num_warps // 4):
            for j, s in enumerate(p.steps):
                start, = getattr(s, name)
                desc = op.descriptor.bits(start ^ op.warp_offset(0, 4 * g))
                got = ptx_model.wgmma_operand_addresses(desc, rows, k_i, 8 * e, op.descriptor.k_major)
                o = acc_l.apply(register=s.acc[0] * p.acc_per_reg, lane=0, warp=4 * g)   # the step's origin
                r0, k0 = (o["dim0"] if rows_first else o["dim1"]), j // tiles * k_i
                want = offs[r0:r0 + rows, k0:k0 + k_i] if rows_first else offs[k0:k0 + k_i, r0:r0 + rows].T
                assert np.array_equal(got, want), (name, g, s)


def test_fragment_layouts_are_the_ptx_fragments():
    """The layout library's one-instruction layouts are the PTX ISA's fragment figures."""
    for n in (8, 64, 256):
        frag = NVMMADistributedLayout(version=(3, 0), warps_per_cta=(4, 1), instr_shape=(16, n, 16)).to_linear([64, n])
        want = ptx_model.wgmma_d_fragment(n)
        for t in (0, 5, 31, 32, 77, 127):
            for i in range(n // 2):
                c = frag.apply(register=i, lane=t % 32, warp=t // 32)
                assert (c["dim0"], c["dim1"]) == tuple(want[t, i])
    par = NVMMADistributedLayout(version=(2, 0), warps_per_cta=(1, 1), instr_shape=(16, 8))
    for dtype, k, kw in (("f16", 16, 2), ("tf32", 8, 1), ("s8", 32, 4)):
        shape = f"m16n8k{k}"
        f = ptx_model.mma_sync_fragments(shape, dtype)
        for name, L in (("a", DotOperandLayout(0, par, kw).to_linear([16, k])),
                        ("b", DotOperandLayout(1, par, kw).to_linear([k, 8])), ("c", par.to_linear([16, 8]))):
            for lane in range(32):
                for i in range(f[name].shape[1]):
                    c = L.apply(register=i, lane=lane)
                    assert (c["dim0"], c["dim1"]) == tuple(f[name][lane, i]), (dtype, name, lane, i)


def test_no_swizzle_core_matrices_from_explicit_bases():
    """A K-major unswizzled operand of 8 x 16-byte core matrices (explicit bases): LBO, SBO read off."""
    bases = [[0, 1], [0, 2], [0, 4], [1, 0], [2, 0], [4, 0], [0, 8], [8, 0], [16, 0], [32, 0]]
    a = LinearLayout({"offset": bases}, {"dim0": 64, "dim1": 16})
    b = shared((16, 64), 128, 16)
    p = plan_layouts(wgmma_acc(64, 64, 64), a, b, "shared", "shared", 3, "f16", "f32", "cuda", "sm_90a")
    d = p.a.descriptor
    assert (d.swizzle_bytes, d.k_major, d.lbo_bytes, d.sbo_bytes) == (0, True, 128, 256)
    check(p, 1)


def test_a_wrong_descriptor_is_caught():
    """The emulator can fail: the same plan with B's SBO doubled reads other bytes."""
    from dataclasses import replace
    p = plan_layouts(wgmma_acc(64, 64, 64), shared((64, 64), 128, 16), shared((64, 64), 128, 16, True),
                     "shared", "shared", 3, "f16", "f32", "cuda", "sm_90a")
    bad = replace(p, b=replace(p.b, descriptor=replace(p.b.descriptor, sbo_bytes=2 * p.b.descriptor.sbo_bytes)))
    with pytest.raises(AssertionError):
        check(bad, 0)


@pytest.mark.parametrize("args, message", [
    (dict(arch="sm_90"), "wgmma needs --arch sm_90a"),
    (dict(dtype="f8e4m3", b=("mn",)), "must be K-major"),
    (dict(a=("rowmajor",)), "no wgmma canonical layout"),
    (dict(b=("registers",)), "wgmma reads B from shared memory"),
    (dict(acc_dtype="i32"), "accumulate in f32"),
    (dict(dtype="bf16", acc_dtype="f16"), "bf16 operands accumulate in f32"),
])
def test_refusals_are_one_line(args, message):
    e = {"f8e4m3": 8}.get(args.get("dtype"), 16)      # bf16 lays out as f16
    acc = wgmma_acc(64, 64, 64)
    a = shared((64, 8 * 128 // e), 128, e)
    a_space, b_space = "shared", "shared"
    b = shared((8 * 128 // e, 64), 128 if e == 16 else 64, e, transposed=True)
    if args.get("b") == ("mn",):
        b = shared((8 * 128 // e, 64), 64, e)
    if args.get("a") == ("rowmajor",):
        a = shared((64, 64), 0, 16)
    if args.get("b") == ("registers",):
        b_space = "registers"
    with pytest.raises(MmaError) as ei:
        plan_layouts(acc, a, b, a_space, b_space, 3, args.get("dtype", "f16"), args.get("acc_dtype", "f32"),
                     "cuda", args.get("arch", "sm_90a"))
    assert message in str(ei.value) and "\n" not in str(ei.value)


EX = "examples/hopper/"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_cli_plan_json_and_files(tmp_path):
    import json
    run = lambda *a: subprocess.run([sys.executable, "-m", "ll_codegen", "mma", *a], capture_output=True, text=True, cwd=ROOT)
    args = ["--acc", EX + "wgmma_acc_128x128.yaml", "--a", EX + "a_smem_128x64.yaml", "--b", EX + "b_smem_64x128.yaml"]
    r = run(*args, "--plan", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["instr"] == "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"
    assert d["b"]["descriptor"] == {"swizzle_bytes": 128, "lbo_bytes": 8192, "sbo_bytes": 1024, "k_major": False,
                                    "base_offset": 0}
    r = run(*args, "-o", str(tmp_path), "--name", "g")
    assert r.returncode == 0 and sorted(os.listdir(tmp_path)) == ["g.cuh", "g_harness.cu"]
    r = run(*args, "--arch", "sm_80", "-o", str(tmp_path / "x"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and not (tmp_path / "x").exists()


@pytest.mark.compile
@pytest.mark.parametrize("acc_dtype", ["f32", "f16"])
def test_compiles_for_sm_90a_and_sm_80(tmp_path, acc_dtype):
    """The header and harness from the example specs compile (f16 accumulators: wgmma's .f16 D and
    mma.sync m16n8k16 .f16.f16.f16.f16, each register an .f16x2)."""
    nvcc = need("nvcc")
    for name, (acc, a, b, arch) in {
            "w": (EX + "wgmma_acc_128x128.yaml", EX + "a_smem_128x64.yaml", EX + "b_smem_kmajor_64x128.yaml", "sm_90a"),
            "m": ("examples/gemm/acc.yaml", "examples/gemm/a_dot.yaml", "examples/gemm/b_dot.yaml", "sm_80")}.items():
        g = mma_files(acc, a, b, acc_dtype=acc_dtype, arch=arch, name=name, root=ROOT)
        assert g.plan.instr.split(".")[-1 if name == "m" else -3] == acc_dtype
        for f, text in g.files.items():
            (tmp_path / f).write_text(text)
        r = subprocess.run([nvcc, "-std=c++17", *arch_flags(arch), "-cubin", "-o", os.devnull,
                            str(tmp_path / f"{name}_harness.cu")], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]


F16_ACC = [c for c in CASES if c.acc_dtype == "f16"]


@pytest.mark.compile
def test_f16_accumulator_corpus_compiles(tmp_path):
    """Every f16-accumulator form of the corpus (wgmma .f16 D with f16 / e4m3 / e5m2 operands, A in
    shared memory or registers; mma.sync .f16 with f16 and, PTX ISA 8.7, e4m3 operands) assembles
    for its arch: one translation unit per arch, every harness in it."""
    from ll_codegen.operations import render_files
    from toolchain import failures, run_all
    nvcc = need("nvcc")
    jobs = []
    for arch in sorted({c.arch for c in F16_ACC}):
        units = []
        for c in (c for c in F16_ACC if c.arch == arch):
            for f, text in render_files(plan_of(c), c.name).items():
                (tmp_path / f).write_text(text)
            units.append(f'#include "{c.name}_harness.cu"')
        (tmp_path / f"all_{arch}.cu").write_text("\n".join(units) + "\n")
        jobs.append((arch, [nvcc, "-std=c++17", *arch_flags(arch), "-cubin", "-o", os.devnull, f"all_{arch}.cu"]))
    bad = failures(run_all(jobs, str(tmp_path)))
    assert not bad, bad[0][-3000:]


def test_f16_accumulator_plans_name_registers():
    """.f16 accumulators: half the registers of f32, each instruction's D in N/4 (wgmma) or 2
    (mma.sync) registers, and the instruction's register j is the layout's elements 2j, 2j + 1."""
    assert {c.kind for c in map(plan_of, F16_ACC)} == {"wgmma", "mma.sync"}
    for c in F16_ACC:
        p = plan_of(c)
        acc_l = layout_of(p.acc_layout)
        assert p.acc_per_reg == 2 and p.acc_regs * 2 == acc_l.in_dim_size("register")
        n_i = p.instr_shape[1]
        assert all(len(s.acc) == (n_i // 4 if p.kind == "wgmma" else 2) for s in p.steps)
        frag = (ptx_model.wgmma_d_fragment(n_i, 16) if p.kind == "wgmma"
                else ptx_model.mma_sync_fragments("m16n8k16", "f16")["c"])
        regs = ptx_model.accumulator_registers(frag, 16)          # (threads, registers, half, (row, col))
        s = p.steps[0]
        o = acc_l.apply(register=2 * s.acc[0], lane=0, warp=0)      # the instruction's origin
        for t in (0, 5, 31, 32 if p.kind == "wgmma" else 30, 127 if p.kind == "wgmma" else 17):
            for j, w in enumerate(s.acc):
                for h in range(2):
                    c_ = acc_l.apply(register=2 * w + h, lane=t % 32, warp=t // 32)
                    assert (c_["dim0"] - o["dim0"], c_["dim1"] - o["dim1"]) == tuple(regs[t, j, h]), (c.name, t, j, h)


def test_f16_accumulator_pairs_must_be_words_of_the_layout():
    """A layout whose register bit 0 is not the instruction's half (registers of rows, not of
    adjacent columns, paired) holds f32 accumulators but not .f16x2 ones."""
    acc = NVMMADistributedLayout(version=(2, 0), warps_per_cta=(1, 1), instr_shape=(16, 8)).to_linear([16, 16])
    regs = acc.bases["register"]
    swapped = LinearLayout({**acc.bases, "register": [regs[1], regs[0], *regs[2:]]}, acc.out_dim_sizes)
    par = NVMMADistributedLayout(version=(2, 0), warps_per_cta=(1, 1), instr_shape=(16, 8))
    a = DotOperandLayout(0, par, 2).to_linear([16, 16])
    b = DotOperandLayout(1, par, 2).to_linear([16, 16])
    check(plan_layouts(swapped, a, b, "registers", "registers", 2, "f16", "f32", "cuda", "sm_80"), 0)
    with pytest.raises(MmaError, match="form one word of the instruction but not of the layout"):
        plan_layouts(swapped, a, b, "registers", "registers", 2, "f16", "f16", "cuda", "sm_80")


@pytest.mark.compile
@pytest.mark.parametrize("name", ["wgmma_f16_sw128_ak_bmn_64x256x128_w4x2_f16acc", "mma_sync_f16_f16acc"])
def test_a_wrong_f16_accumulator_register_is_caught(name):
    """The emulator and the host runtime can fail: the first instruction's two .f16x2 registers
    swapped (or a step writing the other half of a pair) reads and writes the wrong elements."""
    from dataclasses import replace
    from ll_codegen.run import host
    p = plan_of(next(c for c in F16_ACC if c.name == name))
    s0 = p.steps[0]
    bad = replace(p, steps=tuple(replace(s, acc=(s0.acc[1], s0.acc[0], *s0.acc[2:])) if s.acc == s0.acc else s
                                 for s in p.steps))
    with pytest.raises(AssertionError):
        check(bad, 0)
    if host.compiler() is not None:
        r, = host.verify_host([(name, bad)], runs=1, seed=1)
        assert not r.ok and "acc[" in r.message


@pytest.mark.compile
def test_f16_accumulators_run_bit_exact_on_the_host_simt_runtime():
    """Every f16-accumulator form of the corpus: wgmma .f16 D (f16, e4m3, e5m2 operands; both
    operands in shared memory or A in registers) and mma.sync .f16 (f16, e4m3), bit for bit."""
    from ll_codegen.run import host
    if host.compiler() is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    results = host.verify_host([(c.name, plan_of(c)) for c in F16_ACC], runs=1, seed=5)
    assert all(r.ok for r in results), [r.message for r in results if not r.ok][:3]


def test_cli_f16_accumulator_plan():
    import json
    r = subprocess.run([sys.executable, "-m", "ll_codegen", "mma", "--acc", EX + "wgmma_acc_128x128.yaml", "--a", EX + "a_smem_128x64.yaml",
                        "--b", EX + "b_smem_64x128.yaml", "--acc-dtype", "f16", "--plan", "--json"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["instr"] == "wgmma.mma_async.sync.aligned.m64n128k16.f16.f16.f16" and d["acc_regs"] == 64
    r = subprocess.run([sys.executable, "-m", "ll_codegen", "mma", "--acc", EX + "wgmma_acc_128x128.yaml", "--a", EX + "a_smem_128x64.yaml",
                        "--b", EX + "b_smem_64x128.yaml", "--dtype", "bf16", "--acc-dtype", "f16", "--plan"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "accumulate in f32" in r.stderr


@pytest.mark.compile
def test_harnesses_run_bit_exact_on_the_host_simt_runtime():
    """The generated headers and harnesses, unchanged, on the host runtime (wgmma, mma.sync): a
    spread of the corpus -- every register-operand form and every fifth shared-operand one."""
    from ll_codegen.run import host
    if host.compiler() is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    picked = [c for c in CASES if c.a_space == "registers"] + WGMMA_SS[::5]
    results = host.verify_host([(c.name, plan_of(c)) for c in picked], runs=1, seed=3)
    assert all(r.ok for r in results), [r.message for r in results if not r.ok][:3]
