"""``llgen mma --target hip``: AMD MFMA plans (registers derived from the layouts), checked against
the independent model written from AMD's ISA (``verify/models/mfma_model.py``), the host SIMT runtime
(``simt/hip/mfma.h``), hipcc's assembly and the CLI."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from ll_codegen.core.target import get_target
from ll_codegen.operations import render_files
from ll_codegen.layouts.amd import AMDMFMALayout
from ll_codegen.layouts.dot_operand import DotOperandLayout
from ll_codegen.plan.mfma import MFMA_INSTRUCTIONS, mfma_fragment_layouts
from ll_codegen.plan.mma import MmaError, plan_mma
from ll_codegen.run import host
from ll_codegen.verify.models import mfma_model
from ll_codegen.operations import check
from ll_codegen.testing.corpus import mfma_cases

from toolchain import HIP_ENV, failures, need, run_all, split_isa

CASES = mfma_cases()
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = "examples/amd/"
#: the arch hipcc compiles a plan for: Debian's hipcc knows gfx940, not gfx942 (the same CDNA3 ISA)
COMPILE_ARCH = {"gfx90a": "gfx90a", "gfx940": "gfx940", "gfx942": "gfx940"}


def plan_of(c):
    return plan_mma(c.acc, c.a, c.b, c.a_space, c.b_space, c.version, c.dtype, c.acc_dtype, get_target("hip", c.arch))


@pytest.mark.parametrize("key", sorted(MFMA_INSTRUCTIONS), ids=lambda k: MFMA_INSTRUCTIONS[k][0])
def test_fragment_layouts_are_the_isa_layouts(key):
    """The layout library's one-instruction amd_mfma layout and its dot operands (k_width = the
    items a lane holds) are the ISA's register layouts of that instruction, as the model states
    them; the transposed layout is the layout of D^T."""
    name, k = MFMA_INSTRUCTIONS[key]
    m = key[2]
    acc, a, b = mfma_fragment_layouts(m, k, False)
    for L, items in ((a, mfma_model.source_items(name, "a")), (b, mfma_model.source_items(name, "b")),
                     (acc, mfma_model.accumulator_items(name))):
        for lane in range(64):
            for s in range(items.shape[1]):
                c = L.apply(register=s, lane=lane)
                assert (c["dim0"], c["dim1"]) == tuple(items[lane, s]), (name, lane, s)
    acc_t, _, _ = mfma_fragment_layouts(m, k, True)
    d = mfma_model.accumulator_items(name)
    for lane in range(64):
        for r in range(d.shape[1]):
            c = acc_t.apply(register=r, lane=lane)
            assert (c["dim1"], c["dim0"]) == tuple(d[lane, r])


def test_model_equals_amds_matrix_instruction_calculator():
    """Optional oracle: AMD's Matrix Instruction Calculator (``LLGEN_MFMA_CALCULATOR`` = the path of
    its matrix_calculator.py; needs ``tabulate``) gives the same lane, VGPR and bits for every
    element of every modelled instruction."""
    path = os.environ.get("LLGEN_MFMA_CALCULATOR")
    if not path or importlib.util.find_spec("tabulate") is None:
        pytest.skip("set LLGEN_MFMA_CALCULATOR to ROCm/amd_matrix_instruction_calculator's matrix_calculator.py")
    spec = importlib.util.spec_from_file_location("matrix_calculator", path)
    mc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mc)
    for name, ins in mfma_model.INSTRUCTIONS.items():
        calc = mc.InstCalcGfx9(name, mc.dict_insts[ins.arch][name], 64)
        calc.arch_name = ins.arch
        for which in "ab":
            items = mfma_model.source_items(name, which)
            for lane in range(64):
                for s in range(ins.items):
                    x, y = (int(v) for v in items[lane, s])
                    i, k, j = (x, y, 0) if which == "a" else (0, x, y)
                    _, reg, lanes = calc._get_reg_lanes(which, i, j, k, 0, 0, 0, 0, 0)
                    vgpr, lo = mfma_model.item_bits(name, s)
                    got = re.match(r"v(\d+)(?:\.\[(\d+):(\d+)\])?", reg)
                    assert lanes == [lane] and int(got.group(1)) == vgpr and got.group(3) in (None, str(lo))
        d = mfma_model.accumulator_items(name)
        for lane in range(64):
            for r in range(ins.acc_regs):
                _, reg, lanes = calc._get_reg_lanes("d", int(d[lane, r, 0]), int(d[lane, r, 1]), 0, 0, 0, 0, 0, 0)
                assert (reg, lanes) == (f"v{r}", [lane])


def test_model_computes_the_product():
    """The model is a product: identity A gives B, and i8 sums wrap at 32 bits."""
    name = "v_mfma_f32_32x32x8f16"
    rng = np.random.default_rng(0)
    B = rng.integers(-4, 4, size=(8, 32))
    A = np.zeros((32, 8))
    A[np.arange(8), np.arange(8)] = 1
    ia, ib = (mfma_model.source_items(name, w) for w in "ab")
    d = mfma_model.accumulator_items(name)
    got = mfma_model.mfma(name, A[ia[..., 0], ia[..., 1]], B[ib[..., 0], ib[..., 1]], np.zeros((64, 16)))
    want = np.zeros((32, 32))
    want[:8] = B
    assert np.array_equal(got, want[d[..., 0], d[..., 1]])
    big = mfma_model.mfma("v_mfma_i32_16x16x16i8", np.full((64, 4), 127), np.full((64, 4), 127),
                          np.full((64, 4), 2 ** 31 - 1))
    assert (big == 2 ** 31 - 1 + 16 * 127 * 127 - 2 ** 32).all()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_plans_run_exactly_on_the_isa_model(case):
    """Every form: the plan executed through the MFMA model equals C + A @ B in every register."""
    check(plan_of(case), 0)


def test_instructions_follow_the_arch_and_the_layout():
    names = {c.name: plan_of(c) for c in CASES}
    assert names["mfma_gfx90a_bf16_32x32_w2x2"].instr == "v_mfma_f32_32x32x8bf16_1k"
    assert names["mfma_gfx942_i8_16x16_w2x2"].instr == "v_mfma_i32_16x16x32_i8"
    assert names["mfma_gfx942_f16_32x32_t_w2x2"].swap_ab and not names["mfma_gfx942_f16_32x32_w2x2"].swap_ab
    p = names["mfma_gfx90a_f16_32x32_w1x2_tiles"]                  # two 32x32 tiles per wave along M
    assert len({s.acc for s in p.steps}) == 2 and p.acc_regs == 32


@pytest.mark.compile
@pytest.mark.parametrize("mutate", ["swap", "acc", "a_word"])
def test_a_wrong_plan_is_caught(mutate):
    """The emulator and the host runtime can fail: sources in the other order, two accumulator
    registers exchanged, or one A word of the first instruction taken from the next k-step."""
    p = plan_of(next(c for c in CASES if c.name == "mfma_gfx90a_f16_32x32_t_w2x2"))
    s0 = p.steps[0]
    if mutate == "swap":
        bad = replace(p, swap_ab=not p.swap_ab)
    elif mutate == "acc":
        bad = replace(p, steps=tuple(replace(s, acc=(s.acc[1], s.acc[0], *s.acc[2:])) for s in p.steps))
    else:
        bad = replace(p, steps=(replace(s0, a=(p.steps[1].a[0], *s0.a[1:])), *p.steps[1:]))
    with pytest.raises(AssertionError):
        check(bad, 0)
    if host.compiler() is not None:
        r, = host.verify_host([("bad", bad)], runs=1, seed=2)
        assert not r.ok and "acc[" in r.message, r.message


@pytest.mark.compile
def test_harnesses_run_bit_exact_on_the_host_simt_runtime():
    """Every case's generated header and harness, unchanged, on the host runtime (wave64)."""
    if host.compiler() is None:
        pytest.skip("no clang++ for the host SIMT runtime")
    results = host.verify_host([(c.name, plan_of(c)) for c in CASES], runs=1, seed=4)
    assert all(r.ok for r in results), [r.message for r in results if not r.ok][:3]


@pytest.mark.compile
def test_hipcc_compiles_to_the_planned_instructions(tmp_path):
    """hipcc (gfx90a; gfx942 as gfx940) compiles every harness, and each kernel's assembly holds
    exactly the plan's instruction, once per step."""
    hipcc = need("hipcc")
    plans, by_arch = {}, {}
    for c in CASES:
        p = plans[c.name] = plan_of(c)
        for f, text in render_files(p, c.name).items():
            (tmp_path / f).write_text(text)
        by_arch.setdefault(COMPILE_ARCH[c.arch], []).append(c.name)
    jobs = []                   # one translation unit per arch: hipcc's start-up once, not once a harness
    for arch, names in sorted(by_arch.items()):
        (tmp_path / f"{arch}.hip").write_text("".join(f'#include "{n}_harness.hip"\n' for n in names))
        jobs.append((arch, [hipcc, f"--offload-arch={arch}", "--genco", "-O3", "-save-temps=obj",
                            f"{arch}.hip", "-o", f"{arch}.co"]))
    bad = failures(run_all(jobs, str(tmp_path), HIP_ENV))
    assert not bad, bad[0][-3000:]
    for c in CASES:
        arch = COMPILE_ARCH[c.arch]
        chunks = split_isa((tmp_path / f"{arch}-hip-amdgcn-amd-amdhsa-{arch}.s").read_text())
        found = re.findall(r"^\s*(v_mfma\w*)", chunks[f"{c.name}_harness"], re.M)
        assert found == [plans[c.name].instr] * len(plans[c.name].steps), (c.name, sorted(set(found)), len(found))


@pytest.mark.parametrize("change, message", [
    (dict(a_space="shared"), "mfma reads A and B from registers"),
    (dict(arch="gfx1100"), "gfx1100 is RDNA"),
    (dict(dtype="tf32"), "AMD MFMA is generated for f16, bf16"),
    (dict(acc_dtype="f16"), "f16 MFMA accumulates in f32"),
    (dict(k_width=8), "a dot_operand of k_width 4"),
    (dict(acc="wide"), "holds no 32x32 or 16x16 MFMA fragment"),
])
def test_refusals_are_one_line(change, message):
    par = AMDMFMALayout(version=2, instr_shape=(32, 32, 8), transposed=False, warps_per_cta=(2, 2))
    kw = change.get("k_width", 4)
    acc = par.to_linear([64, 64])
    if change.get("acc") == "wide":                     # 64-bit accumulators: one row per register
        acc = AMDMFMALayout(version=2, instr_shape=(32, 32, 8), transposed=False, warps_per_cta=(2, 2),
                            element_bitwidth=64).to_linear([64, 64])
    a, b = DotOperandLayout(0, par, kw).to_linear([64, 32]), DotOperandLayout(1, par, kw).to_linear([32, 64])
    with pytest.raises(MmaError) as ei:
        plan_mma(acc, a, b, change.get("a_space", "registers"), "registers", 0, change.get("dtype", "f16"),
                 change.get("acc_dtype", "f32"), get_target("hip", change.get("arch", "gfx90a")))
    assert message in str(ei.value) and "\n" not in str(ei.value), str(ei.value)


def test_cli(tmp_path):
    run = lambda *a: subprocess.run([sys.executable, "-m", "ll_codegen", "mma", *a], capture_output=True, text=True, cwd=ROOT)
    args = ["--acc", EX + "mfma_acc_64x64.yaml", "--a", EX + "a_dot_64x32.yaml", "--b", EX + "b_dot_32x64.yaml",
            "--target", "hip"]
    r = run(*args, "--plan", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert (d["kind"], d["instr"], d["arch"], d["swap_ab"]) == ("mfma", "v_mfma_f32_32x32x8_f16", "gfx942", False)
    r = run(*args, "--arch", "gfx90a", "-o", str(tmp_path), "--name", "m")
    assert r.returncode == 0 and sorted(os.listdir(tmp_path)) == ["m.h", "m_harness.hip"], r.stderr
    assert "v_mfma_f32_32x32x8f16" in (tmp_path / "m.h").read_text()
    for bad in (["--target", "cuda"], ["--dtype", "u8", "--acc-dtype", "i32"]):
        r = run(*args[:6], *(bad if bad[0] == "--target" else ["--target", "hip", *bad]), "-o", str(tmp_path / "x"))
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and not (tmp_path / "x").exists(), r.stderr
