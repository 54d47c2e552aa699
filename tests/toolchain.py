"""Compiler toolchains for the CPU tests (shared by the compile checks: test_compile,
test_compile_generated, test_render, test_ptx_text, test_nvcc_arch_flags).

* finding ``nvcc`` and Debian's ``hipcc``: a missing tool skips the tests that
  need it with the reason, or fails them when ``LLGEN_REQUIRE_TOOLCHAINS=1``
  (CI sets it, so a broken install cannot pass silently);
* running many compiler invocations in parallel;
* ``nvcc_cubin``: the device-only compile every CUDA check uses (``-cubin``, the PTX kept): nvcc's
  host pass (gcc over ``cuda_runtime.h``, fatbinary) costs ~1.5 s per translation unit, twice the
  device pass of a harness, and the harnesses run through NVRTC, which has none; the host pass of
  every generated file is compiled once, batched, with the flags users type by
  ``tests/test_compile_generated.py``, of every example kernel by ``tests/test_nvcc_arch_flags.py``;
* ``users_build``: an example kernel built once per test run with the flags users type, the
  intermediate files and ptxas's report kept for every test that reads them;
* ``source_batches``: many sources to one translation unit (one nvcc start-up, ~0.4 s of cicc
  reading the CUDA headers, and one host pass for all of them); ``ptx_problems``: the PTX check of
  many harnesses compiled so;
* what a plan says the machine code of one ``convert()`` call contains
  (``expected``), and the matching counts from PTX (``ptx_counts``) and from
  AMDGPU assembly (``isa_counts``), per kernel/function (``split_ptx``,
  ``split_isa``) so that many conversions can share one translation unit.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable, Sequence

import pytest

from ll_codegen.core.files import made_once
from ll_codegen.plan.plans import Transfer, steps

NVCC = shutil.which("nvcc")
HIPCC = shutil.which("hipcc")
HIP_ENV = dict(os.environ, HIP_PLATFORM="amd")
REQUIRE = os.environ.get("LLGEN_REQUIRE_TOOLCHAINS", "") == "1"

MISSING = {
    "nvcc": "nvcc not found: CUDA compile checks need the CUDA toolkit",
    "hipcc": "hipcc not found: install Debian's hipcc (apt-get install -y hipcc) for HIP compile checks",
}


def need(tool: str) -> str:
    """Path of ``tool`` ("nvcc" or "hipcc"); otherwise skip the calling test or
    fixture with the reason (fail instead under ``LLGEN_REQUIRE_TOOLCHAINS=1``)."""
    path = {"nvcc": NVCC, "hipcc": HIPCC}[tool]
    if path:
        return path
    if REQUIRE:
        pytest.fail(MISSING[tool] + " (LLGEN_REQUIRE_TOOLCHAINS=1)", pytrace=False)
    pytest.skip(MISSING[tool])


#: the flags of ``nvcc -arch=sm_90 -cubin``'s ptxas step (``tests/test_nvcc_arch_flags.py`` reads them
#: from ``nvcc --dryrun``)
PTXAS_SM90 = ("-arch=sm_90", "-m64")


def arch_flags(arch: str) -> list[str]:
    """nvcc flags for ``arch``: ``-gencode arch=compute_90a,code=sm_90a`` for sm_90a (nvcc 13's
    ``-arch=sm_90a`` emits compute_90 PTX, where wgmma does not assemble), ``-arch=sm_XY`` otherwise."""
    return ["-gencode", f"arch=compute_{arch[3:]},code={arch}"] if arch.endswith("a") else [f"-arch={arch}"]


# ------------------------------------------------------------------ running
def nvcc_cubin(nvcc: str, src: str, arch: str, out: str, extra: Sequence[str] = ()) -> tuple[list[str], str]:
    """(command, kept PTX path): ``src`` compiled for ``arch``'s device only into ``out + ".cubin"``,
    the PTX kept in ``out + "_keep/"`` (``out``: an absolute path without extension)."""
    keep = out + "_keep"
    os.makedirs(keep, exist_ok=True)
    stem = os.path.splitext(os.path.basename(src))[0]
    cmd = [nvcc, "-std=c++17", *arch_flags(arch), *extra, "-cubin", "--keep", "--keep-dir", keep,
           "-o", out + ".cubin", src]
    return cmd, os.path.join(keep, stem + ".ptx")


#: the flags users type to build an example kernel (README, each example's header comment)
USERS_SM90A = ("-std=c++17", "-arch=sm_90a")


def users_build(src: str, root: str, include: str) -> tuple[int, str, str]:
    """``src`` built as users build it, ``nvcc -std=c++17 -arch=sm_90a -I include -c``, with ptxas's
    report (``-Xptxas -v``, printed for the sm_90a pass alone) and the intermediate files kept:
    (exit status, output, keep dir).  The keep dir holds ``<stem>.compute_90a.ptx`` and
    ``<stem>.compute_90a.sm_90a.cubin`` (the code an H100 runs) and the compute_90 PTX.

    Built once under ``root`` (``core.files.made_once``): every later caller -- another test, another
    xdist worker -- waits for the first and reads the recorded result,
    so the tests that check an example's build, its PTX and its registers share one compile."""
    stem = os.path.splitext(os.path.basename(src))[0]
    keep = os.path.join(root, stem)
    os.makedirs(keep, exist_ok=True)

    def make() -> bytes:
        cmd = [need("nvcc"), *USERS_SM90A, "-I", include, "-Xptxas", "-v", "--keep", "--keep-dir", keep,
               "-c", src, "-o", os.path.join(keep, stem + ".o")]
        rc, out = run(cmd, keep)
        return json.dumps({"rc": rc, "out": f"{' '.join(cmd)}\n{out}"}).encode()
    r = json.loads(made_once(os.path.join(keep, "build.json"), make))
    return r["rc"], r["out"], keep



#: a source's declarations of the dynamic shared array: nvcc warns when two in one translation unit
#: differ (alignment), so sources are batched with their like
SHARED_DECL = re.compile(r"^\s*extern\s+__shared__[^;]*;", re.M)


def source_batches(paths: Sequence[str], size: int) -> list[list[str]]:
    """``paths`` grouped so that one translation unit can include every group: sources that declare
    the dynamic shared array alike, ``size`` at a time (sorted, so a run's units are the same)."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for p in sorted(paths):
        with open(p) as f:
            groups.setdefault(tuple(sorted(set(SHARED_DECL.findall(f.read())))), []).append(p)
    return [g[k:k + size] for _, g in sorted(groups.items()) for k in range(0, len(g), size)]


def compile_together(nvcc: str, sources: Sequence[str], flags: Sequence[str], cwd: str, size: int = 32) -> list[str]:
    """``sources`` (paths relative to ``cwd``) compiled ``nvcc -std=c++17 <flags> -c``, a translation unit
    each ``source_batches`` group (nvcc's start-up and host pass once a unit, not once a file; every
    harness has its own namespace and kernel name): the ``failures``."""
    jobs = []
    for k, batch in enumerate(source_batches([os.path.join(cwd, s) for s in sources], size)):
        tu = os.path.join(cwd, f"unit{k}.cu")
        with open(tu, "w") as f:
            f.writelines(f'#include "{p}"\n' for p in batch)
        jobs.append((" + ".join(os.path.basename(p) for p in batch), [nvcc, "-std=c++17", *flags, "-c", tu, "-o",
                                                                       os.devnull]))
    return failures(run_all(jobs, cwd))


def ptx_units(names: Sequence[str], directory: str, arch: str) -> dict[str, str]:
    """The harnesses ``<name>_harness.cu`` in ``directory`` compiled by ``nvcc -ptx`` for ``arch``
    several to a translation unit (``source_batches``: one nvcc start-up for many), the units in
    parallel: name -> the PTX of its unit."""
    from ll_codegen.run import ptx_check
    nvcc = need("nvcc")
    jobs, units = [], []
    for k, batch in enumerate(source_batches([os.path.join(directory, f"{n}_harness.cu") for n in names], 32)):
        tu = os.path.join(directory, f"ptx_unit{k}.cu")
        with open(tu, "w") as f:
            f.writelines(f'#include "{p}"\n' for p in batch)
        jobs.append((tu, [nvcc, "-std=c++17", *ptx_check.nvcc_flags(arch), "-ptx", "-o", tu + ".ptx", tu]))
        units.append([os.path.basename(p)[:-len("_harness.cu")] for p in batch])
    out = {}
    for batch, (tu, _, rc, log) in zip(units, run_all(jobs, directory)):
        assert rc == 0, log[-2000:]
        with open(tu + ".ptx") as f:
            text = f.read()
        out.update({n: text for n in batch})
    return out


def ptx_problems(cases: Sequence[tuple[str, object]], directory: str, arch: str) -> dict[str, list[str]]:
    """The PTX check (``run/ptx_check.py``) of each ``(name, plan)`` whose ``<name>_harness.cu`` and header
    are in ``directory``, compiled by ``ptx_units``: name -> the problems of its harness's kernels run
    against its plan."""
    from ll_codegen.run import ptx_check
    from ll_codegen.verify.ptx.sim import parse
    texts = ptx_units([n for n, _ in cases], directory, arch)
    parsed = {t: parse(t) for t in set(texts.values())}
    return {n: ptx_check.check_kernels(p, parsed[texts[n]], n) for n, p in cases}


def run(cmd: Sequence[str], cwd: str, env: dict | None = None) -> tuple[int, str]:
    """(exit status, stdout + stderr) of one command."""
    r = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, env=env)
    return r.returncode, r.stdout + r.stderr


def run_all(jobs: Iterable[tuple], cwd: str, env: dict | None = None) -> list[tuple]:
    """Run ``(key, cmd)`` jobs on all cores; returns ``(key, cmd, rc, output)`` in job order."""
    jobs = list(jobs)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as ex:
        return list(ex.map(lambda j: (j[0], j[1], *run(j[1], cwd, env)), jobs))


def failures(results: Iterable[tuple]) -> list[str]:
    """One message per job that failed or printed a warning."""
    return [f"{key}: {' '.join(cmd)}\n{out}" for key, cmd, rc, out in results
            if rc != 0 or re.search(r"\bwarning\b", out, re.I)]


# ------------------------------------------------------------------ expectations
def expected(plan: Transfer) -> dict[str, object]:
    """What the plan says the machine code contains (one convert(), store() or load() call)."""
    exp: dict[str, object] = {}
    if plan.operation == "copy":
        c = plan
        if c.async_copy:
            exp["cp_async"] = len(c.load.accesses)
        else:
            exp["gld"] = sorted(c.load.vector_bytes for _ in c.load.accesses)
            exp["st"] = sorted(c.store.vector_bytes for _ in c.store.accesses)
        return exp
    if plan.operation in ("store", "load"):
        m = plan.memory
        side = "st" if m.direction == "store" else "ld"
        if plan.via is not None:                   # the conversion's instructions, then the access
            exp = expected(plan.via)
        if m.space == "global":
            exp["g" + side] = sorted(len(a.regs) * plan.elem_bytes for a in m.accesses)
        elif m.instr.startswith("matrix"):
            exp[side] = len(m.accesses)
        else:
            exp[side] = sorted(len(a.regs) * plan.elem_bytes for a in m.accesses)
        return exp
    if plan.operation != "convert":                 # a TMA copy: no shuffle, shared access or barrier counted
        return exp
    # a staged conversion shuffles in its via step, a butterfly in every step (plans.steps)
    shuffles = [q.shuffle.shuffles for q in steps(plan) if q.shuffle is not None]
    if shuffles:
        exp["shfl"] = sum(shuffles)
    if plan.smem is not None:
        m = plan.smem
        st = [a for r in m.rounds for a in r.stores]
        ld = [a for r in m.rounds for a in r.loads]
        for kind, accs, instr in (("st", st, m.store_instr), ("ld", ld, m.load_instr)):
            exp[kind] = len(accs) if instr.startswith("matrix") else sorted(len(a.regs) * plan.elem_bytes
                                                                             for a in accs)
        exp["bar"], exp["warpbar"] = m.block_barriers, m.warp_barriers
    return exp


def widths(ws) -> str:
    """``[1, 1, 4]`` -> ``"2x1B + 1x4B"`` (an access-width list, compactly)."""
    ws = list(ws)
    return " + ".join(f"{ws.count(w)}x{w}B" for w in sorted(set(ws))) or "none"


def uses_stmatrix(plan: Transfer) -> bool:
    """stmatrix: sm_90 only (ldmatrix runs on every CUDA arch of ``target.py``)."""
    if plan.operation in ("store", "load"):
        return plan.memory.instr.startswith("matrix") and plan.memory.direction == "store"
    return plan.operation == "convert" and plan.smem is not None and plan.smem.store_instr.startswith("matrix")


def uses_matrix(plan: Transfer) -> bool:
    """ldmatrix or stmatrix."""
    if plan.operation in ("store", "load"):
        return plan.memory.instr.startswith("matrix")
    return (plan.operation == "convert" and plan.smem is not None
            and "matrix" in (plan.smem.store_instr + plan.smem.load_instr))


# ------------------------------------------------------------------ PTX
PTX_BYTES = {"b8": 1, "u8": 1, "b16": 2, "u16": 2, "b32": 4, "u32": 4, "b64": 8, "u64": 8}


def ptx_counts(ptx: str) -> dict[str, object]:
    got: dict[str, object] = {"shfl": len(re.findall(r"\bshfl\.sync\.", ptx)),
                              "bar": len(re.findall(r"\bbar\.sync\b", ptx)),
                              "warpbar": len(re.findall(r"\bbar\.warp\.sync\b", ptx))}
    # generated code types its accesses .b8/.b16/.b32 (inline PTX); what the compiler
    # emits for plain C++ (the harness's own accesses) is .u8/.u16/.u32/.f32/...
    for kind, op in (("st", "st"), ("ld", "ld")):
        for space, key in (("shared", kind), ("global", "g" + kind)):
            widths = []
            for vec, ty in re.findall(rf"\b{op}\.{space}(?:\.v(\d))?\.(b\d+)\b", ptx):
                widths.append(int(vec or 1) * PTX_BYTES[ty])
            got[key] = sorted(widths)
        got[kind + "matrix"] = len(re.findall(rf"\b{op}matrix\.sync", ptx))
    got["cp_async"] = len(re.findall(r"\bcp\.async\.c[ag]\.shared\.global\b", ptx))
    return got


def ptx_mismatches(plan: Transfer, ptx: str) -> list[str]:
    """Differences between the plan's expectations and the PTX of one convert()."""
    exp, got = expected(plan), ptx_counts(ptx)
    m = plan.smem if plan.operation == "convert" else None
    bad = []
    for k in ("shfl", "bar", "warpbar"):
        if got[k] != exp.get(k, 0):
            bad.append(f"{k}: PTX has {got[k]}, plan says {exp.get(k, 0)}")
    for kind, instr in (("st", m and m.store_instr), ("ld", m and m.load_instr)):
        if instr and instr.startswith("matrix"):
            if got[kind + "matrix"] != exp[kind] or got[kind] != []:
                bad.append(f"{kind}matrix: PTX has {got[kind + 'matrix']} (+ {kind}.shared {got[kind]}), "
                           f"plan says {exp[kind]}")
        elif got[kind] != exp.get(kind, []) or got[kind + "matrix"]:
            bad.append(f"{kind}.shared bytes: PTX has {got[kind]} (+ {got[kind + 'matrix']} {kind}matrix), "
                       f"plan says {exp.get(kind, [])}")
    return bad


def check_ptx(plan: Transfer, ptx: str, name: str) -> None:
    bad = ptx_mismatches(plan, ptx)
    assert not bad, (name, bad)


_PTX_FUNC = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)",
                       re.M)


def split_ptx(ptx: str) -> dict[str, str]:
    """Function or kernel name -> its PTX text (declarations without a body are dropped)."""
    marks = list(_PTX_FUNC.finditer(ptx))
    out: dict[str, str] = {}
    for i, m in enumerate(marks):
        body = ptx[m.start():marks[i + 1].start() if i + 1 < len(marks) else len(ptx)]
        if "{" in body:
            out[m.group(1)] = out.get(m.group(1), "") + body
    return out


# ------------------------------------------------------------------ AMDGPU ISA
ISA_BYTES = {"b8": 1, "u8": 1, "b16": 2, "u16": 2, "b32": 4, "b64": 8, "b96": 12, "b128": 16}


def isa_counts(isa: str) -> dict[str, object]:
    got: dict[str, object] = {"shfl": len(re.findall(r"\bds_(?:bpermute|swizzle)_b32\b", isa)),
                              "bar": len(re.findall(r"\bs_barrier\b", isa))}
    for kind, op in (("st", "write"), ("ld", "read")):
        # a ds_{read,write}2[st64]_bN pair counts as two accesses of bN in `st`/`ld` and once in `st2`/`ld2`:
        # the headers fence every LDS access, so a pair means the backend merged planned accesses
        # (the _d16/_d16_hi forms move the low/high half of a 32-bit register: one access each)
        found = re.findall(rf"\bds_{op}(2(?:st64)?)?_([bu]\d+)(?:_d16(?:_hi)?)?\b", isa)
        got[kind] = sorted(ISA_BYTES[t] for two, t in found for _ in range(2 if two else 1))
        got[kind + "2"] = sum(1 for two, _ in found if two)
    return got


def isa_mismatches(plan: Transfer, isa: str) -> list[str]:
    exp, got = expected(plan), isa_counts(isa)
    bad = [f"ds_{op}2: ISA pairs {got[k + '2']} planned accesses" for k, op in (("st", "write"), ("ld", "read"))
           if got[k + "2"]]
    if got["shfl"] != exp.get("shfl", 0):
        bad.append(f"ds_bpermute: ISA has {got['shfl']}, plan says {exp.get('shfl', 0)}")
    if got["bar"] != exp.get("bar", 0):
        bad.append(f"s_barrier: ISA has {got['bar']}, plan says {exp.get('bar', 0)}")
    for kind in ("st", "ld"):
        g, want = got[kind], exp.get(kind, [])
        # ... and may also fuse adjacent narrow accesses into one wider one: same bytes, never narrower
        if not (sum(g) == sum(want) and (not g or min(g) >= min(want))):
            bad.append(f"ds_{'write' if kind == 'st' else 'read'} bytes: ISA has {g}, plan says {want}")
    return bad


def check_isa(plan: Transfer, isa: str, name: str) -> None:
    bad = isa_mismatches(plan, isa)
    assert not bad, (name, bad)


_ISA_FUNC = re.compile(r"^([A-Za-z_$][\w$.]*):", re.M)


def split_isa(isa: str) -> dict[str, str]:
    """Function or kernel symbol -> its assembly (from its label to the next global label)."""
    marks = list(_ISA_FUNC.finditer(isa))
    return {m.group(1): isa[m.start():marks[i + 1].start() if i + 1 < len(marks) else len(isa)]
            for i, m in enumerate(marks)}


def owner(symbol: str, names: Iterable[str]) -> str | None:
    """The conversion a kernel or function belongs to: ``<name>_harness`` /
    ``<name>_bench`` kernels, or a C++ function in ``namespace <name>``
    (Itanium mangling ``_ZN<len><name>...``)."""
    for n in names:
        if symbol in (f"{n}_bench", f"{n}_probe") or re.fullmatch(rf"{re.escape(n)}_harness(_a\d+)?(_masked)?", symbol) \
                or f"N{len(n)}{n}" in symbol[:len(n) + 8]:
            return n
    return None


def counted_kernel(symbol: str, name: str, plan: Transfer) -> bool:
    """Whether ``symbol`` (owned by conversion ``name``) holds the code the
    plan's counts describe: a conversion's harness, or a memory or copy plan's
    probe (its harnesses move the tile themselves; the probe issues only the
    planned accesses)."""
    if plan.operation in ("store", "load", "copy"):
        if plan.paths:      # run-time alignment: every path inlined in one call (see count_check)
            return False
        return symbol == f"{name}_probe"
    return not symbol.endswith(("_harness_masked", "_probe"))


# ------------------------------------------------------------------ seeded samples
def random_plans(rng, target: str, arch: str, lanes: int, n: int, dtypes: Sequence[str],
                 strategies: Sequence[str], swizzles: Sequence[str]):
    """``n`` seeded random conversions for one (target, arch): the settings
    cycle (dtype fastest, then strategy, then swizzle) so every combination
    appears; yields (dtype, strategy, swizzle, src, dst, plan).  A pair for
    which a forced strategy is illegal is redrawn."""
    from ll_codegen.api import plan_conversion
    from ll_codegen.testing.corpus import random_pair
    for i in range(n):
        dtype = dtypes[i % len(dtypes)]
        strategy = strategies[i // len(dtypes) % len(strategies)]
        swizzle = swizzles[i // (len(dtypes) * len(strategies)) % len(swizzles)]
        for _ in range(50):
            src, dst = random_pair(rng, lanes=lanes, same_warps=True if strategy == "shuffle" else None)
            try:
                plan = plan_conversion(src, dst, dtype, target, arch, strategy=strategy, swizzle=swizzle)
            except ValueError:          # illegal forced strategy for this pair: draw another
                continue
            break
        else:  # pragma: no cover - the corpus always yields pairs
            raise AssertionError(f"no {strategy} pair for {target} {arch} in 50 draws")
        yield dtype, strategy, swizzle, src, dst, plan


def random_memory_plans(rng, target: str, arch: str, lanes: int, n: int, dtypes: Sequence[str]):
    """``n`` seeded random memory plans for one (target, arch): a random
    distributed layout against a random tile of every memory kind
    (``corpus.MEMORY_KINDS``), stores and loads; the settings cycle (dtype
    fastest, then kind, then direction).  Yields (kind, direction, dtype,
    dist, tile, spec or None, plan)."""
    from ll_codegen.testing.corpus import MEMORY_KINDS, random_layout, random_memory_tile
    from ll_codegen.plan.planner import DTYPE_BYTES, plan_memory
    for i in range(n):
        dtype = dtypes[i % len(dtypes)]
        kind = MEMORY_KINDS[i // len(dtypes) % len(MEMORY_KINDS)]
        direction = ("store", "load")[i // (len(dtypes) * len(MEMORY_KINDS)) % 2]
        warps = 1 << rng.randint(0, 3)
        total = lanes.bit_length() - 1 + warps.bit_length() - 1 + rng.randint(0, 5)
        d0 = rng.randint(0, total)
        shape = {"dim0": 1 << d0, "dim1": 1 << (total - d0)}
        dist = random_layout(rng, shape, lanes, warps)
        spec, tile = random_memory_tile(rng, shape, DTYPE_BYTES[dtype], kind)
        space = "global" if kind == "global" else "shared"
        plan = plan_memory(dist, tile, direction, space, dtype, target, arch,
                           alignment=spec["alignment"] if space == "global" else 16)
        yield kind, direction, dtype, dist, tile, spec, plan


def random_copy_plans(rng, target: str, arch: str, lanes: int, n: int, dtypes: Sequence[str]):
    """``n`` seeded random copies (global tile -> shared tile of a random
    shared kind, 1-8 warps); yields (kind, dtype, warps, global spec, tile, plan)."""
    from ll_codegen.testing.corpus import random_memory_tile
    from ll_codegen.plan.planner import DTYPE_BYTES, plan_copy
    kinds = ("shared_linear", "swizzled_shared", "nvmma_shared")
    for i in range(n):
        dtype = dtypes[i % len(dtypes)]
        kind = kinds[i // len(dtypes) % len(kinds)]
        warps = 1 << rng.randint(0, 3)
        total = rng.randint(3, 13)
        d0 = rng.randint(0, total)
        shape = {"dim0": 1 << d0, "dim1": 1 << (total - d0)}
        w = DTYPE_BYTES[dtype]
        gspec, gtile = random_memory_tile(rng, shape, w, "global")
        _, stile = random_memory_tile(rng, shape, w, kind)
        plan = plan_copy(gtile, stile, dtype, target, arch, alignment=gspec["alignment"], num_warps=warps)
        yield kind, dtype, warps, gspec, stile, plan
