"""The instruction text itself, checked against the plan without a GPU.

The host SIMT runtime runs the ``LLGEN_HOST_SIMT`` branch of every instruction wrapper; the device
branch -- inline PTX on CUDA, the fenced LDS accesses on HIP -- was only counted.  Here:

* CUDA: harnesses compiled with ``nvcc -ptx`` and run by ``verify/ptx/sim.py`` (a PTX interpreter,
  one CTA); ``run/ptx_check.py`` compares the outputs with numpy and, per thread and
  instruction, the opcode and modifiers, addresses, the data registers in asm operand order,
  shuffle operands, barrier kinds, cp.async sizes and zero fill, TMA / mbarrier / wgmma /
  mma.sync operands with what the plan says.  The sample: the stratified sample's CUDA part
  (``strata.py``: ``QUOTA`` plans for every strategy and access form), the named corpus, gathers,
  TMA copies and mma plans (every CUDA harness of ``generated/`` as it is on disk:
  tests/test_compile_generated.py, from the PTX its build keeps).
* HIP: a smaller sample compiled with ``hipcc -S``; ``verify/ptx/isa_check.py`` checks the LDS
  instruction sequence (widths, immediate offsets, no pairing), barriers and shuffles.
* Mutations: each named edit of the rendered text (``.trans`` dropped from
  ldmatrix / stmatrix, a vector ld/st.shared register list reversed, shuffle width 16, stmatrix
  input order; and one per instruction form) must make the check fail -- the structural check on
  its own, not only the outputs -- while the unmutated text passes.
"""
from __future__ import annotations

import functools
import os
import re
import tempfile
from dataclasses import replace

import pytest

import strata
from ll_codegen.api import plan_conversion, plan_gather
from ll_codegen.emit.render import file_names
from ll_codegen.operations import write_files
from ll_codegen.spec import spec_from_dict
from ll_codegen.verify.ptx import isa_check
from ll_codegen.run import ptx_check
from ll_codegen.verify.ptx.sim import parse
from ll_codegen.testing.corpus import GATHER_NAMED, NAMED, mma_cases
from toolchain import HIP_ENV, need, ptx_units, run, run_all

pytestmark = pytest.mark.compile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = 20261126
QUOTA = strata.quota_from_env("ptx", 3)   # LLGEN_PTX_QUOTA: plans per strategy x access form
BATCH = 12
PAIRS = {p.name: p for p in NAMED}


def named(pair: str, dtype: str, target: str = "cuda", arch: str = "sm_90"):
    p = PAIRS[pair]
    return plan_conversion(spec_from_dict(dict(p.src)).linear, spec_from_dict(dict(p.dst)).linear, dtype, target, arch)


def matrix_candidate(store: str, load: str = "vector"):
    """A shared-memory candidate of the 128x128 mma -> blocked pair with these instructions (the
    planner scores them all; ldmatrix/stmatrix[.trans] pairings are rarely the winner)."""
    from ll_codegen.core.target import get_target
    from ll_codegen.plan import swizzle as sw
    from ll_codegen.plan.planner import normalise
    p = PAIRS["mma_v2_to_blocked_f16_128"]
    src, dst = (normalise(spec_from_dict(dict(x)).linear) for x in (p.src, p.dst))
    base = plan_conversion(src, dst, "f16", "cuda", "sm_90", strategy="smem")
    for mp in sw.plan_smem(src, dst, 2, get_target("cuda", "sm_90"), "optimal"):
        if (mp.store_instr, mp.load_instr) == (store, load):
            return replace(base, smem=mp)
    raise AssertionError(f"no {store}/{load} candidate")


def tma_items() -> list[tuple[str, object]]:
    """TMA copies: every swizzle, 8/16/32-bit elements, transposed or not, one to several boxes."""
    from ll_codegen.layouts.memory import GlobalLayout, NVMMASharedLayout
    from ll_codegen.plan.tma import plan_tma
    out = []
    for sw, bits, tr, shape in ((128, 16, False, (64, 64)), (128, 16, False, (16, 128)), (128, 8, True, (128, 256)),
                                (64, 32, False, (64, 64)), (32, 16, True, (64, 64)), (0, 16, False, (16, 128)),
                                (128, 32, True, (256, 32))):
        tile = NVMMASharedLayout(sw, bits, transposed=tr).to_linear(list(shape))
        glob = GlobalLayout(order=[0, 1] if tr else [1, 0]).to_linear(list(shape))
        out.append((f"tma_sw{sw}_b{bits}_{'t' if tr else 'n'}_{shape[0]}x{shape[1]}",
                    plan_tma(glob, tile, {8: "i8", 16: "f16", 32: "f32"}[bits], "cuda", "sm_90a", num_warps=2)))
    return out


def hopper_plans() -> list[tuple[str, object]]:
    """TMA copies (every swizzle, 8/16/32-bit, several boxes) and mma plans (wgmma with shared or
    register A, every operand type; mma.sync)."""
    from ll_codegen.plan.mma import plan_mma
    out = tma_items()
    step = max(5, 50 // QUOTA)               # every 16th wgmma form at the default quota (3), every 5th from 10
    cases = {c.name: c for c in mma_cases()[::step] + [c for c in mma_cases() if c.name.startswith("mma_sync")]}
    for c in cases.values():
        out.append((c.name, plan_mma(c.acc, c.a, c.b, c.a_space, c.b_space, c.version, c.dtype, c.acc_dtype,
                                     "cuda", c.arch)))
    return out


@functools.lru_cache(maxsize=None)
def cuda_sample() -> tuple[tuple[str, object], ...]:
    items = [(n, p) for n, p, _ in strata.sample(SEED, quota=QUOTA, targets=("cuda",))]
    for pair in NAMED:
        if pair.target == "cuda":
            for dtype in pair.dtypes:
                items.append((f"n_{pair.name}_{dtype}", named(pair.name, dtype)))
    for g in GATHER_NAMED:
        if g.target == "cuda":
            items += [(f"g_{g.name}_{dt}", plan_gather(g.src, g.idx, g.axis, dtype=dt, index_dtype=g.index_dtype))
                      for dt in g.dtypes]
    return tuple(items) + tuple(hopper_plans())


def build(items, directory: str, tool: str) -> dict[str, tuple[object, str | None, str]]:
    """Render ``items`` into batched translation units and compile them (PTX, or AMDGPU assembly):
    name -> (plan, the code of its batch or None, the compiler's output)."""
    groups: dict[str, list] = {}
    for name, plan in items:
        write_files(plan, directory, name, emit=("header", "harness"))
        groups.setdefault(plan.arch, []).append((name, plan))
    jobs, meta = [], []
    for arch, group in sorted(groups.items()):
        for k in range(0, len(group), BATCH):
            part = group[k:k + BATCH]
            tu = os.path.join(directory, f"b_{arch}_{k}.{'cu' if tool == 'nvcc' else 'hip'}")
            with open(tu, "w") as f:
                f.writelines(f'#include "{file_names(p.target, n)["harness"]}"\n' for n, p in part)
            if tool == "nvcc":
                jobs.append((tu, [need("nvcc"), "-std=c++17", *ptx_check.nvcc_flags(arch), "-ptx", "-o", tu + ".s", tu]))
            else:
                jobs.append((tu, [need("hipcc"), f"--offload-arch={arch}", "-S", "--cuda-device-only", "-O3",
                                  "-o", tu + ".s", tu]))
            meta.append(part)
    out = {}
    for part, (tu, cmd, rc, log) in zip(meta, run_all(jobs, directory, HIP_ENV)):
        code = open(tu + ".s").read() if rc == 0 else None
        out.update({n: (p, code, log) for n, p in part})
    return out


@pytest.fixture(scope="module")
def cuda_build(tmp_path_factory):
    need("nvcc")
    return build(cuda_sample(), str(tmp_path_factory.mktemp("ptx")), "nvcc")


def test_sample_covers_every_form():
    """The CUDA sample: every strategy and access form of the stratified sample at its quota, the
    Hopper forms (TMA load and store in several box counts, wgmma with shared and register A, every
    operand type, mma.sync), gathers both ways."""
    items = strata.sample(SEED, quota=QUOTA, targets=("cuda",))
    assert not strata.shortfall(items, QUOTA, targets=("cuda",))
    ops = {p.operation for _, p in cuda_sample()}
    assert ops == {"convert", "store", "load", "copy", "gather", "tma", "mma"}
    mma = [p for _, p in cuda_sample() if p.operation == "mma"]
    assert {p.kind for p in mma} == {"wgmma", "mma.sync"} and {p.a.space for p in mma} == {"shared", "registers"}
    assert {p.dtype for p in mma} >= {"f16", "bf16", "tf32", "f8e4m3", "i8"}
    assert len({len(p.tma.boxes) for _, p in cuda_sample() if p.operation == "tma"}) > 2


def test_ptx_is_what_the_plans_say(cuda_build):
    bad = []
    for name, (plan, ptx, log) in cuda_build.items():
        if ptx is None:
            bad.append(f"{name}: nvcc failed: {log[-800:]}")
            continue
        bad += ptx_check.check_kernels(plan, parse_cached(ptx), name)
    assert not bad, f"{len(bad)} problem(s); first:\n" + "\n".join(bad[:8])


@functools.lru_cache(maxsize=8)
def parse_cached(ptx: str):
    return parse(ptx)


# ------------------------------------------------------------------ mutations
def check_text(plan, mutations=(), arch: str | None = None, behaviour: bool = True, structure: bool = True):
    """Render ``plan``, apply the (regex, replacement) edits to its header (each must apply
    exactly once), compile to PTX and check it."""
    with tempfile.TemporaryDirectory(prefix="llgen_ptx_") as d:
        write_files(plan, d, "m", emit=("header", "harness"))
        with open(os.path.join(d, file_names(plan.target, "m")["header"])) as f:
            text = f.read()
        with open(os.path.join(d, "m_harness.cu")) as f:
            harness = f.read()
    for regex, repl in mutations:
        text, n = re.subn(regex, repl, text, count=1)
        assert n == 1, f"mutation {regex!r} found nothing to change"
    if not mutations and behaviour and structure:     # the clean text of a plan several mutations edit: once
        key = (text, harness, arch or plan.arch)
        if key not in CLEAN:
            CLEAN[key] = checked(plan, text, harness, arch or plan.arch, True, True)
        return CLEAN[key]
    return checked(plan, text, harness, arch or plan.arch, behaviour, structure)


#: (header, harness, arch) -> the problems of the unmutated text
CLEAN: dict[tuple[str, str, str], list[str]] = {}


def checked(plan, header: str, harness: str, arch: str, behaviour: bool, structure: bool) -> list[str]:
    ptx, log = harness_ptx(header, harness, arch)
    assert ptx, log
    return ptx_check.check(plan, ptx, "m", behaviour=behaviour, structure=structure)


@functools.lru_cache(maxsize=None)
def harness_ptx(header: str, harness: str, arch: str) -> tuple[str | None, str]:
    """``nvcc -ptx`` of a harness ``m_harness.cu`` and its header ``m.cuh`` (by their text: the
    unmutated text of a plan, which every mutation of it checks first, is compiled once)."""
    with tempfile.TemporaryDirectory(prefix="llgen_ptx_") as d:
        for name, text in ((file_names("cuda", "m")["header"], header), ("m_harness.cu", harness)):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        return ptx_check.compile_ptx(need("nvcc"), os.path.join(d, "m_harness.cu"), arch, os.path.join(d, "m.ptx"))


def copy_plan(async_copy: bool, masked_kind: str = "global"):
    from ll_codegen.layouts.memory import GlobalLayout, NVMMASharedLayout
    from ll_codegen.plan.planner import plan_copy
    g = GlobalLayout(order=[1, 0]).to_linear([64, 64])
    s = NVMMASharedLayout(128, 16).to_linear([64, 64])
    return plan_copy(g, s, "f16", "cuda", "sm_90" if async_copy else "sm_90", num_warps=4)


def global_store_plan():
    return plan_conversion(os.path.join(ROOT, "examples/specs/mma_v2_2x2_64x64.yaml"),
                           os.path.join(ROOT, "examples/global_64x64.yaml"), dtype="f32", arch="sm_80")


def per_warp_plan():
    """A warp-local conversion with per-warp scratch: both of its barriers are bar.warp.sync."""
    items = strata.sample(SEED, quota=QUOTA, targets=("cuda",))
    return next(p for _, p, mine in items if "cuda:smem:per-warp" in mine)


def gather_plan(strategy: str):
    g = next(c for c in GATHER_NAMED if c.name == ("lanes_4x32_axis1" if strategy == "shuffle" else "issue_64x64_axis0"))
    return plan_gather(g.src, g.idx, g.axis, dtype="f32", index_dtype=g.index_dtype, strategy=strategy)


def tma_plan():
    return dict(tma_items())["tma_sw128_b16_n_64x64"]


def mma_plan(name: str):
    from ll_codegen.plan.mma import plan_mma
    c = next(c for c in mma_cases() if c.name == name)
    return plan_mma(c.acc, c.a, c.b, c.a_space, c.b_space, c.version, c.dtype, c.acc_dtype, "cuda", c.arch)


#: (id, plan factory, edits of the rendered header).  Each must be caught by the structural
#: (instruction-by-instruction) check, except where a load's output operands are permuted
#: (LOAD_SIDE): a load's outputs are what memory holds, in operand order, whichever C variable the
#: asm binds them to -- the permutation shows where those registers go, in the outputs.
MUTATIONS = [
    ("ldmatrix_drop_trans", lambda: named("blocked_transpose_f16", "f16"), [(r"(ldmatrix\.sync\.aligned\.m8n8\.x\d)\.trans", r"\1")]),
    ("stmatrix_drop_trans", lambda: matrix_candidate("matrix.trans"), [(r"(stmatrix\.sync\.aligned\.m8n8\.x\d)\.trans", r"\1")]),
    ("st_shared_reversed_registers", lambda: named("blocked_transpose_f16", "f16"),
     [(r"(st\.shared\.v4\.b32 \[%0\+%5\]), \{%1, %2, %3, %4\}", r"\1, {%4, %3, %2, %1}")]),
    ("ld_shared_reversed_registers", lambda: named("mma_v2_to_blocked_f32", "f32", arch="sm_80"),
     [(r"ld\.shared\.v4\.b32 \{%0, %1, %2, %3\}", "ld.shared.v4.b32 {%3, %2, %1, %0}")]),
    ("shuffle_width_16", lambda: named("blocked_intra_warp_f16", "f32"),
     [(r"(__shfl_(?:xor_)?sync\(0xffffffff, [^,]+, [^)]+)\)", r"\1, 16)")]),
    ("stmatrix_input_order", lambda: matrix_candidate("matrix"),
     [(r"(stmatrix\.sync[^\"]*)\{%1, %2, %3, %4\}", r"\1{%2, %1, %3, %4}")]),
    ("ldmatrix_output_order", lambda: named("blocked_transpose_f16", "f16"),
     [(r"(ldmatrix\.sync[^\"]*)\{%0, %1, %2, %3\}", r"\1{%1, %0, %2, %3}")]),
    ("ldmatrix_x4_as_x2", lambda: named("blocked_transpose_f16", "f16"),
     [(r"ldmatrix\.sync\.aligned\.m8n8\.x4(\.trans)?\.shared\.b16 \{%0, %1, %2, %3\}",
       r"ldmatrix.sync.aligned.m8n8.x2\1.shared.b16 {%0, %1}")]),
    ("barrier_warp_to_block", per_warp_plan, [(r"__syncwarp\(\);  // stores visible[^\n]*", "__syncthreads();")]),
    ("barrier_block_dropped", lambda: named("blocked_transpose_f16", "f16"),
     [(r"__syncthreads\(\);  // stores visible", "")]),
    ("cp_async_drop_zero_fill", lambda: copy_plan(True), [(r"(cp\.async\.cg\.shared\.global \[%0\+%3\], \[%1\], 16), %2;",
                                                         r"\1;")]),
    ("cp_async_size", lambda: copy_plan(True), [(r"\[%1\], 16;", "[%1], 16, 8;")]),
    ("st_global_reversed_registers", global_store_plan,
     [(r"(st\.global\.v2\.b32 \[%0\+%3\]), \{%1, %2\}", r"\1, {%2, %1}")]),
    ("tma_coordinate_order", tma_plan, [(r"(tma_load_2d\(tile \+ \d+u, map, )coords\[1\], coords\[0\]",
                                         r"\1coords[0], coords[1]")]),
    ("tma_store_coordinate_order", tma_plan, [(r"(tma_store_2d\(map, tile \+ \d+u, )coords\[1\], coords\[0\]",
                                               r"\1coords[0], coords[1]")]),
    ("mbarrier_expect_tx", tma_plan, [(r"constexpr int kTxBytes   = (\d+);", r"constexpr int kTxBytes   = \1 + 16;")]),
    ("mbarrier_init_count", tma_plan, [(r'"r"\(count\)', '"r"(count + 1)')]),
    ("mbarrier_wait_parity", tma_plan, [(r'"r"\(bar\), "r"\(parity\)', '"r"(bar), "r"(parity ^ 1u)')]),
    ("gather_shuffle_lane", lambda: gather_plan("shuffle"), [(r"__shfl_sync\(0xffffffff, ([^,]+), src_lane\)",
                                                            r"__shfl_sync(0xffffffff, \1, src_lane ^ 1)")]),
    ("gather_smem_barrier", lambda: gather_plan("smem"), [(r"__syncthreads\(\);  // the tile is complete", "")]),
    ("wgmma_transpose_immediate", lambda: mma_plan("wgmma_f16_sw128_ak_bk_64x64x128_w4x1"),
     [(r"p, 1, 1, 0, 0;", "p, 1, 1, 0, 1;")]),
    ("wgmma_scale_immediate", lambda: mma_plan("wgmma_f16_sw128_ak_bk_64x64x128_w4x1"),
     [(r"p, 1, 1, 0, 0;", "p, 1, -1, 0, 0;")]),
    ("wgmma_descriptor", lambda: mma_plan("wgmma_f16_sw128_ak_bk_64x64x128_w4x1"),
     [(r"constexpr uint64_t kDescA = 0x([0-9a-fA-F]+)ull;", r"constexpr uint64_t kDescA = 0x\1ull ^ (1ull << 32);")]),
    ("wgmma_accumulator_order", lambda: mma_plan("wgmma_f16_sw128_ak_bk_64x64x128_w4x1"),
     [(r"\{%0, %1, %2,", "{%1, %0, %2,")]),
    ("mma_sync_a_order", lambda: mma_plan("mma_sync_f16"), [(r"\{%4, %5, %6, %7\}", "{%5, %4, %6, %7}")]),
]


LOAD_SIDE = {"ld_shared_reversed_registers", "ldmatrix_output_order"}


def write_mutant(plan, directory: str, name: str, mutations=()) -> None:
    """``plan``'s header and harness as ``name`` in ``directory``, the (regex, replacement) edits applied
    to the header (each must apply exactly once)."""
    write_files(plan, directory, name, emit=("header", "harness"))
    path = os.path.join(directory, file_names(plan.target, name)["header"])
    with open(path) as f:
        text = f.read()
    for regex, repl in mutations:
        text, n = re.subn(regex, repl, text, count=1)
        assert n == 1, f"mutation {regex!r} found nothing to change"
    with open(path, "w") as f:
        f.write(text)


@pytest.fixture(scope="module")
def mutants(tmp_path_factory):
    """Every mutation's text and the unmutated text of its plan (once per distinct text), compiled to PTX
    together (``toolchain.ptx_units``: one nvcc start-up a batch): mutation id -> (plan, the clean
    harness's name, the mutated one's), and name -> the PTX of its unit."""
    d = str(tmp_path_factory.mktemp("mutants"))
    cases, clean, archs = {}, {}, {}
    for k, (mid, factory, edits) in enumerate(MUTATIONS):
        plan = factory()
        files = plan_files(plan)
        if files not in clean:
            clean[files] = f"clean{len(clean)}"
            write_mutant(plan, d, clean[files])
            archs[clean[files]] = plan.arch
        write_mutant(plan, d, f"mutant{k}", edits)
        archs[f"mutant{k}"] = plan.arch
        cases[mid] = plan, clean[files], f"mutant{k}"
    texts: dict[str, str] = {}
    for arch in sorted(set(archs.values())):
        texts.update(ptx_units([n for n, a in archs.items() if a == arch], d, arch))
    return cases, texts


def plan_files(plan) -> tuple[str, ...]:
    """The text of a plan's header and harness (rendered as ``m``) and its arch: equal for equal plans."""
    with tempfile.TemporaryDirectory(prefix="llgen_ptx_") as d:
        write_files(plan, d, "m", emit=("header", "harness"))
        texts = []
        for f in (file_names(plan.target, "m")["header"], "m_harness.cu"):
            with open(os.path.join(d, f)) as fh:
                texts.append(fh.read())
    return (*texts, plan.arch)


@pytest.mark.parametrize("case", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_mutation_is_caught(case, mutants):
    name = case[0]
    (plan, clean, mutant), texts = mutants[0][name], mutants[1]
    problems = checked_once(plan, texts[clean], clean)
    assert not problems, problems[:3]
    bad = ptx_check.check_kernels(plan, parse_cached(texts[mutant]), mutant)
    assert bad, "the mutated text passes"
    if name in LOAD_SIDE:
        assert any(": behaviour: " in b for b in bad), bad[:3]
    else:
        assert ptx_check.check_kernels(plan, parse_cached(texts[mutant]), mutant, behaviour=False), \
            "the mutated text passes the instruction-by-instruction check"


def checked_once(plan, ptx: str, name: str) -> list[str]:
    """The check of the unmutated text of a plan, which several mutations edit: once."""
    if name not in CHECKED:
        CHECKED[name] = ptx_check.check_kernels(plan, parse_cached(ptx), name)
    return CHECKED[name]


#: the clean harness's name (``mutants``) -> its problems
CHECKED: dict[str, list[str]] = {}


def test_unmodelled_instruction_is_refused():
    """An instruction the interpreter does not know fails loudly instead of being skipped."""
    ptx = (".visible .entry k(\n.param .u64 k_param_0\n)\n{\n.reg .b32 %r<3>;\n"
           "mov.u32 %r1, %tid.x;\nsin.approx.f32 %r2, %r1;\nret;\n}\n")
    from ll_codegen.verify.ptx.ops import PtxError
    from ll_codegen.verify.ptx.sim import run as run_kernel
    import numpy as np
    with pytest.raises(PtxError, match="sin.approx.f32"):
        run_kernel(parse(ptx)["k"], [np.zeros(4, np.uint32)], 32, 16)


def test_missing_cp_async_wait_reads_stale_bytes(tmp_path):
    """cp.async data lands at the cp.async.wait_group that covers it: reading the tile without the
    wait is reported (the copy harness's wait<0>() removed)."""
    plan = copy_plan(True)
    d = str(tmp_path)
    write_files(plan, d, "m", emit=("header", "harness"))
    harness = os.path.join(d, "m_harness.cu")
    text = open(harness).read()
    open(harness, "w").write(text.replace("    wait<0>();\n    __syncthreads();", "    __syncthreads();", 1))
    ptx, log = ptx_check.compile_ptx(need("nvcc"), harness, plan.arch, os.path.join(d, "m.ptx"))
    assert ptx, log
    bad = ptx_check.check(plan, ptx, "m")
    assert any("in flight" in b for b in bad), bad


# ------------------------------------------------------------------ HIP
@functools.lru_cache(maxsize=None)
def hip_sample() -> tuple[tuple[str, object], ...]:
    items = [(n, p) for n, p, _ in strata.sample(SEED, quota=2, targets=("hip",))
             if p.operation in ("convert", "store", "load", "copy")]
    for pair in NAMED:
        if pair.target == "hip":
            items += [(f"n_{pair.name}_{dt}", named(pair.name, dt, "hip", "gfx90a")) for dt in pair.dtypes]
    return tuple(items)


def isa_problems(plan, asm: str, name: str) -> list[str]:
    ks = isa_check.kernels(asm)
    kernel = f"{name}_harness" if plan.operation == "convert" else f"{name}_probe"
    if kernel not in ks:
        return [f"{name}: no kernel {kernel} in the assembly"]
    return [x for x in isa_check.check(plan, ks[kernel], name) if "lds-promoted:" not in x]


def test_hip_assembly_is_what_the_plans_say(tmp_path):
    items = hip_sample()
    assert len({p.operation for _, p in items}) == 4 and len(items) >= 40
    bad = []
    for name, (plan, asm, log) in build(items, str(tmp_path), "hipcc").items():
        bad += [f"{name}: hipcc failed: {log[-500:]}"] if asm is None else isa_problems(plan, asm, name)
    assert not bad, "\n".join(bad[:8])


HIP_MUTATIONS = [
    ("lds_store_offset", ("mfma_to_blocked_wave64", "f16"), [(r"detail::st\(st_ptr \+ 0x80,", "detail::st(st_ptr + 0x88,")]),
    ("lds_device_pointer", ("mfma_to_blocked_wave64", "f32"),
     [(r"\*reinterpret_cast<V\*>\(p\) = v;", "*reinterpret_cast<V*>(p + 16) = v;")]),
    ("lds_load_narrowed", ("mfma_to_blocked_wave64", "f16"),
     [(r"detail::ld<detail::u32x4>\(ld_ptr\)", "detail::ld<detail::u32x4>(ld_ptr + 0x1000)")]),
    ("lds_store_order", ("mfma_to_blocked_wave64", "f16"),
     [(r"(    detail::st\(st_ptr, [^\n]*\n)(    detail::st\(st_ptr \+ 0x80, [^\n]*\n)", r"\2\1")]),
    ("missing_block_barrier", ("mfma_to_blocked_wave64", "f32"), [(r"__syncthreads\(\);  // stores visible", "")]),
]


@pytest.fixture(scope="module")
def hip_mutants(tmp_path_factory):
    """Every HIP mutation's text and the unmutated text of its conversion, compiled together by one
    ``hipcc -S``: mutation id -> (plan, the clean harness's name, the mutated one's), and the assembly."""
    d = str(tmp_path_factory.mktemp("hip_mutants"))
    cases, clean = {}, {}
    for k, (mid, (pair, dtype), edits) in enumerate(HIP_MUTATIONS):
        plan = named(pair, dtype, "hip", "gfx90a")
        if (pair, dtype) not in clean:
            clean[pair, dtype] = f"clean{len(clean)}"
            write_mutant(plan, d, clean[pair, dtype])
        write_mutant(plan, d, f"mutant{k}", edits)
        cases[mid] = plan, clean[pair, dtype], f"mutant{k}"
    with open(os.path.join(d, "all.hip"), "w") as f:
        f.writelines(f'#include "{n}_harness.hip"\n' for n in [*clean.values(), *(c[2] for c in cases.values())])
    rc, log = run([need("hipcc"), "--offload-arch=gfx90a", "-S", "--cuda-device-only", "-O3", "-o", "all.s",
                   "all.hip"], d, HIP_ENV)
    assert rc == 0, log
    with open(os.path.join(d, "all.s")) as f:
        return cases, f.read()


@pytest.mark.parametrize("case", HIP_MUTATIONS, ids=[m[0] for m in HIP_MUTATIONS])
def test_hip_mutation_is_caught(case, hip_mutants):
    (plan, clean, mutant), asm = hip_mutants[0][case[0]], hip_mutants[1]
    bad = isa_problems(plan, asm, clean)
    assert not bad, bad
    assert isa_problems(plan, asm, mutant), "the mutated text passes"
