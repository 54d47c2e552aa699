"""``generated/`` compiles as users build it, and its machine code is what the manifest's plans say.

One build of every source of ``generated/`` (each harness and bench with the header it includes
first; a header no harness includes first is compiled on its own), the CUDA sources ``BATCH`` to a
translation unit (``toolchain.source_batches``: nvcc's start-up and host pass cost ~1.5 s per unit,
the code itself a fraction of that):

* ``nvcc -arch=sm_90a -c``, the flags users type, the intermediate files kept: the host pass, the
  compute_90a pass (ptxas for sm_90a: the code an H100 runs) and the compute_90 pass (the PTX kept for
  later GPUs, without ``__CUDA_ARCH_FEAT_SM90_ALL``; the instruction wrappers' arch guards keep it
  compiling).  ``ptxas -arch=sm_90`` then assembles that compute_90 PTX: its cicc step is the one of
  ``nvcc -arch=sm_90 -cubin`` argument for argument (``tests/test_nvcc_arch_flags.py`` compares the
  ``--dryrun`` steps), so together they are the sm_90 build of every source;
* ``nvcc -arch=sm_80``, device code only, for every source not planned for sm_90a: a source that
  issues stmatrix (sm_90) must compile there too, its wrapper's guard keeping the instruction out;
* HIP files with Debian's ``hipcc`` for gfx90a (64-lane layouts) or gfx1030 (32-lane), ``BATCH`` to a
  unit likewise.

Every harness is also compiled on its own, by the host SIMT runtime (``tests/test_host_run.py``:
the whole file but the device branch of the wrappers), so a harness that leans on an earlier one of
its translation unit is caught there; the first source of every unit is compiled alone here too.

Where ``generated/manifest.yaml`` lists a file's ``llgen convert`` arguments the conversion is
re-planned, and each harness's PTX/ISA counts are checked against the plan (for every arch of
``plan_counts.compile_archs``), and every CUDA harness is run by the PTX interpreter against it.
"""
from __future__ import annotations

import functools
import glob
import os
import re

import pytest

from ll_codegen.plan.plans import Transfer
from ll_codegen.run import ptx_check
from ll_codegen.verify.ptx.sim import parse
from plan_counts import CUDA_ARCHS, compile_archs, count_check
from toolchain import HIP_ENV, PTXAS_SM90, failures, need, nvcc_cubin, run_all, source_batches, split_isa, split_ptx

pytestmark = pytest.mark.compile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GENERATED = os.path.join(ROOT, "generated")
#: the flags users type (README, docs/hopper.md)
USERS = ["-arch=sm_90a"]
#: sources per translation unit
BATCH = 40
#: the operations of ``llgen convert`` entries, whose harnesses this module counts and compiles for
#: ``compile_archs``; mma, reduce and gather harnesses are counted by their own tests and compiled for
#: the arch their text implies (``file_archs``)
COUNTED = ("convert", "store", "load", "copy", "tma", "relayout")


def manifest_plans(entries) -> dict[str, Transfer]:
    """name -> plan of every ``generated/manifest.yaml`` entry of one plan (not a chain), planned as
    ``llgen regenerate`` plans it (the ``manifest_build`` fixture's entries)."""
    return {e.params["name"]: e.conv.plan for e in entries if e.command != "chain"}


_HEADER_OF = re.compile(r'#include\s+"([^"]+)"')


def header_text(path: str) -> str:
    """The file's text plus the generated header it includes (same folder)."""
    with open(path) as f:
        text = f.read()
    for inc in _HEADER_OF.findall(text):
        p = os.path.join(os.path.dirname(path), inc)
        if os.path.exists(p):
            with open(p) as f:
                text += f.read()
    return text


def generated_files() -> list[str]:
    pats = ("*.cuh", "*_harness.cu", "*_bench.cu", "*.h", "*_harness.hip", "*_bench.hip")
    return sorted({p for pat in pats for p in glob.glob(os.path.join(GENERATED, pat))})


def conversion_name(path: str) -> str:
    base = os.path.basename(path)
    return re.sub(r"(_harness|_bench)?\.(cuh|cu|h|hip)$", "", base)


def file_archs(path: str, plans: dict[str, Transfer]) -> tuple[str, ...]:
    """Archs to compile one generated file for: from the re-planned manifest
    entry, else from the file (wgmma -> sm_90a only; stmatrix asm -> sm_90 only; a HIP
    header's kWarpSize 64 -> gfx90a, 32 -> gfx1030)."""
    plan = plans.get(conversion_name(path))
    if plan is not None and plan.operation in COUNTED:
        return compile_archs(plan)
    text = header_text(path)
    if path.endswith((".cuh", ".cu")):
        if re.search(r"\bwgmma\.", text):                 # an llgen mma header: wgmma exists on sm_90a only
            return ("sm_90a",)
        return ("sm_90",) if re.search(r"\bstmatrix\.sync", text) else CUDA_ARCHS
    m = re.search(r"constexpr int kWarpSize\s*=\s*(\d+)", text)
    return ("gfx90a",) if m and m.group(1) == "64" else ("gfx1030",)


def first_in_harness(header: str) -> bool:
    """Whether ``header``'s harness includes it before anything else: compiling the harness for the
    same archs then compiles the header on its own too, as a user includes it."""
    harness = re.sub(r"\.(cuh|h)$", lambda m: "_harness." + ("cu" if m.group(1) == "cuh" else "hip"), header)
    if not os.path.exists(harness):
        return False
    with open(harness) as f:
        first = next((ln for ln in f if ln.startswith("#include")), "")
    return first.strip() == f'#include "{os.path.basename(header)}"'


def sources() -> list[str]:
    """What is compiled: every harness and bench, and each header no harness includes first."""
    return [p for p in generated_files() if not (p.endswith((".cuh", ".h")) and first_in_harness(p))]


@functools.lru_cache(maxsize=None)
def _parsed(path: str):
    with open(path) as f:
        return parse(f.read())


class Build:
    """The compiled ``generated/``: its ``sources``, ``results`` [(what, cmd, rc, output)] of every compiler run, and
    where each (source, arch) code went: ``code[source, arch]`` = the PTX (CUDA: the batch's) or
    AMDGPU assembly file that holds its kernels."""

    def __init__(self, plans: dict[str, Transfer]) -> None:
        self.plans = plans
        self.sources: list[str] = []
        self.results: list[tuple] = []
        self.code: dict[tuple[str, str], str] = {}
        self.ok: dict[tuple[str, str], bool] = {}


@pytest.fixture(scope="module")
def generated_build(tmp_path_factory, manifest_build) -> Build:
    srcs = sources()
    if not srcs:
        pytest.skip(f"no generated sources in {GENERATED}")
    b = Build(manifest_plans(manifest_build[0]))
    b.sources = srcs
    cuda = [p for p in srcs if p.endswith((".cuh", ".cu"))]
    hip = [p for p in srcs if p.endswith((".h", ".hip"))]
    nvcc = need("nvcc") if cuda else None         # skips (or fails) the generated/ tests without a tool
    hipcc = need("hipcc") if hip else None
    d = str(tmp_path_factory.mktemp("generated"))
    jobs, meta = [], []                 # meta: (sources, arch, code file) per job

    def unit(k: str, batch: list[str], ext: str = "cu") -> str:
        tu = os.path.join(d, f"{k}.{ext}")
        with open(tu, "w") as f:
            f.writelines(f'#include "{p}"\n' for p in batch)
        return tu

    def label(batch: list[str], what: str) -> str:
        return " + ".join(os.path.relpath(p, ROOT) for p in batch) + f" ({what})"

    for k, batch in enumerate(source_batches(cuda, BATCH)):          # the users' build
        keep = os.path.join(d, f"u{k:02d}_keep")
        os.makedirs(keep)
        tu = unit(f"u{k:02d}", batch)
        jobs.append((label(batch, " ".join(USERS)),
                     [nvcc, "-std=c++17", *USERS, "-I", GENERATED, "-c", "--keep", "--keep-dir", keep,
                      "-o", os.path.join(d, f"u{k:02d}.o"), tu]))
        meta.append((batch, "sm_90a", os.path.join(keep, f"u{k:02d}.compute_90a.ptx")))
        meta.append((batch, "sm_90", os.path.join(keep, f"u{k:02d}.compute_90.ptx")))
    older = [p for p in cuda if "sm_90a" not in file_archs(p, b.plans)]
    for k, batch in enumerate(source_batches(older, BATCH)):          # sm_80, device code only
        cmd, ptx = nvcc_cubin(nvcc, unit(f"o{k:02d}", batch), "sm_80", os.path.join(d, f"o{k:02d}.sm_80"))
        jobs.append((label(batch, "sm_80"), cmd))
        meta.append((batch, "sm_80", ptx))
    by_arch: dict[str, list[str]] = {}
    for path in hip:
        for arch in file_archs(path, b.plans):
            by_arch.setdefault(arch, []).append(path)
    for arch, paths in sorted(by_arch.items()):                     # HIP, per arch
        for k, batch in enumerate(source_batches(paths, BATCH)):
            stem = f"h_{arch}_{k:02d}"
            tu = unit(stem, batch, "hip")
            jobs.append((label(batch, arch),
                         [hipcc, f"--offload-arch={arch}", "--genco", "-save-temps=obj", tu, "-o",
                          os.path.join(d, stem + ".co")]))
            meta.append((batch, arch, os.path.join(d, f"{stem}-hip-amdgcn-amd-amdhsa-{arch}.s")))
    results = run_all(jobs, d, HIP_ENV)
    b.results = list(results)
    # the compute_90 PTX of the users' build, assembled for sm_90 (nvcc -arch=sm_90 -cubin's ptxas step)
    ptxas = os.path.join(os.path.dirname(nvcc), "ptxas") if nvcc else None
    second = []
    for batch, arch, code in meta:
        if arch == "sm_90" and os.path.exists(code):
            second.append((f"{os.path.basename(code)} (ptxas -arch=sm_90)",
                           [ptxas, *PTXAS_SM90, code, "-o", code[:-4] + ".sm_90.cubin"]))
    b.results += run_all(second, d)
    for batch, arch, code in meta:
        for p in batch:
            b.code[p, arch] = code
            b.ok[p, arch] = os.path.exists(code)
    return b


def test_generated_compiles(generated_build):
    """Every nvcc, ptxas and hipcc run above succeeds without a warning, and every source was
    compiled for each of its archs (``file_archs``) and, unless planned for sm_90a, for sm_80."""
    b = generated_build
    bad = failures(b.results)
    assert not bad, f"{len(bad)} of {len(b.results)} compiler invocation(s) failed or warned; first:\n{bad[0]}"
    for p in b.sources:
        want = set(file_archs(p, b.plans))
        if p.endswith((".cuh", ".cu")):
            want |= {"sm_90a", "sm_90"} | (set() if "sm_90a" in want else {"sm_80"})
        missing = sorted(a for a in want if not b.ok.get((p, a)))
        assert not missing, (os.path.relpath(p, ROOT), missing)
    assert sum(1 for (p, a) in b.ok if a == "sm_90a") >= 60


def counted(b: Build):
    """(name, plan, source, arch, tool) for every manifest harness whose counts this module checks."""
    for p in b.sources:
        name = conversion_name(p)
        plan = b.plans.get(name)
        if plan is None or not re.search(r"_harness\.(cu|hip)$", p) or plan.operation not in COUNTED:
            continue
        if plan.operation == "tma":     # no per-instruction plan counts: boxes, barriers (tests/test_tma.py)
            continue
        if plan.operation == "relayout":   # its harness fills and reads tiles around relayout(); the PTX
            continue                       # check compares it per thread (tests/test_shared_relayout.py)
        if plan.operation in ("store", "load", "copy") and plan.paths:   # run-time alignment
            continue
        for arch in file_archs(p, b.plans):
            yield name, plan, p, arch, "cuda" if p.endswith(".cu") else "hip"


@functools.lru_cache(maxsize=None)
def _split(path: str, tool: str) -> dict[str, str]:
    with open(path) as f:
        text = f.read()
    return split_ptx(text) if tool == "cuda" else split_isa(text)


def kernel_code(name: str, plan: Transfer, path: str, tool: str) -> str:
    """The code of one harness in its batch's PTX or AMDGPU assembly: the ``_probe`` kernel of a
    memory plan (it issues only the planned accesses); a conversion's harness kernel and the
    functions of its namespace (``convert()`` when not inlined)."""
    chunks = _split(path, tool)
    if plan.operation in ("store", "load", "copy"):
        return chunks.get(f"{name}_probe", "")
    code = chunks.get(f"{name}_harness", "")
    return code + "".join(body for sym, body in chunks.items() if f"N{len(name)}{name}" in sym[:len(name) + 8])


def _generated_counts(b: Build) -> tuple[list[str], list[str], int]:
    hard, soft, checked = [], [], 0
    for name, plan, path, arch, tool in counted(b):
        if not b.ok.get((path, arch)):
            continue                              # reported by test_generated_compiles
        code = kernel_code(name, plan, b.code[path, arch], tool)
        key = f"{os.path.relpath(path, ROOT)} ({arch})"
        if not code:
            hard.append(f"{key}: no code for {name}_harness in {os.path.basename(b.code[path, arch])}")
            continue
        h, s = count_check(plan, code, tool)
        checked += 1
        hard += [f"{key}: {x}" for x in h]
        soft += [f"{key}: {x}" for x in s]
    assert checked, "no generated harness compiled"
    return hard, soft, checked


def test_generated_ptx_is_what_the_manifest_says(generated_build):
    """Every CUDA harness of generated/, as it is on disk, run by the PTX interpreter against its
    re-planned manifest entry (``run/ptx_check.py``, see tests/test_ptx_text.py): the PTX nvcc kept
    while compiling it for the plan's arch."""
    b = generated_build
    bad, checked = [], 0
    for p in b.sources:
        name = conversion_name(p)
        plan = b.plans.get(name)
        if not p.endswith("_harness.cu") or plan is None or plan.target != "cuda":
            continue
        assert b.ok.get((p, plan.arch)), (p, plan.arch)
        bad += ptx_check.check_kernels(plan, _parsed(b.code[p, plan.arch]), name)
        checked += 1
    assert checked >= 15 and not bad, "\n".join(bad[:8])


def test_generated_instruction_counts(generated_build):
    """Harnesses of manifest entries: PTX/ISA counts match the re-planned
    conversion (up to the benign deviations of ``count_check``)."""
    hard, _, _ = _generated_counts(generated_build)
    assert not hard, "\n".join(hard)


def test_generated_instruction_counts_exact(generated_build):
    hard, soft, checked = _generated_counts(generated_build)
    assert not hard, "see test_generated_instruction_counts"
    assert all("lds-promoted:" in x for x in soft), "\n".join(soft)   # see count_check
    if soft:
        pytest.xfail(f"{len(soft)} of {checked} generated harness compiles differ benignly from their plans:\n"
                     + "\n".join(soft))
