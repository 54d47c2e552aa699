"""The PTX nvcc emits for a harness, checked against the plan instruction by instruction.

The host SIMT runtime runs the ``LLGEN_HOST_SIMT`` branch of each instruction wrapper; this module
reads the *other* branch as the compiler left it.  ``check(plan, ptx, name)`` parses the PTX of
``<name>_harness<variant>`` (``sim``), runs every variant for one block on the harness data of
``verify/harness.py`` and reports:

* behaviour: the outputs against numpy, bit for bit (kernels whose data movement the interpreter
  does not model -- TMA, wgmma, mma.sync -- are checked by their operands only);
* structure, per thread: the sequence of shared-memory instructions, barriers and cp.async the
  plan prescribes -- opcode with every modifier (``.trans``, ``.x1/.x2/.x4``, ``.v2/.v4``, the
  type), the concrete address (shared window: ``SMEM_WINDOW + (base(lane, warp) ^ offset)``;
  global: the tile pointer plus the coordinates times the harness's strides), the data words
  in asm operand order (the source elements, lowest first, packed into 32-bit registers), the
  barrier kind (``bar.sync 0`` / ``bar.warp.sync -1``), cp.async's size, source and zero-fill
  source size; shuffles as a multiset of (mode, lane operand b, clamp/segment operand c = 0x1f,
  member mask, payload); TMA, mbarrier and wgmma operands (``expect_async``).

The expected events are written from the plan's data and the PTX ISA's opcode spellings here,
not from the templates or ``emit/``.  Kernels: the harness's, so the operands are the values a
real launch computes (the harness's own global loads and stores are not compared).
"""
from __future__ import annotations

import os
import subprocess

import numpy as np

from ll_codegen.operations import operation_of
from ll_codegen.verify.harness import byte_plan_input
from ll_codegen.verify.ptx.expect import BLOCK_BARRIER, Want, show
from ll_codegen.verify.ptx.ops import Event, PtxError
from ll_codegen.verify.ptx.sim import Kernel, parse, run


def first_loads(seq: list, parts) -> list:
    """``seq`` without the shared loads of an address an earlier load read since the last barrier;
    ``parts(x)`` is (a block barrier?, a shared load?, its address)."""
    seen: set = set()
    out = []
    for x in seq:
        bar, load, addr = parts(x)
        if bar:
            seen = set()
        elif load and addr in seen:
            continue
        elif load:
            seen.add(addr)
        out.append(x)
    return out


def _inner(seq: list, is_bar) -> list:
    """``seq`` less the barriers before its first and after its last other instruction (the
    harness's own, around the generated call)."""
    idx = [i for i, x in enumerate(seq) if not is_bar(x)]
    return seq[idx[0]:idx[-1] + 1] if idx else []


def compare(where: str, wants: list[Want], shfl: list[Want], events: list[Event], trim: bool) -> list[str]:
    """Differences between one thread's expected and actual instructions (ordered, then the
    shuffles as a multiset)."""
    got = [e for e in events if not e.op.startswith("shfl.")]
    got_shfl = [e for e in events if e.op.startswith("shfl.")]
    if trim:
        got = _inner(got, lambda e: e.op in BLOCK_BARRIER)
        wants = _inner(wants, lambda x: x.ops == BLOCK_BARRIER)
    for i, (want, e) in enumerate(zip(wants, got)):
        if not want.matches(e):
            return [f"{where}: instruction {i}: {show(e)}; the plan says {want}"]
    if len(wants) != len(got):
        extra = got[len(wants):] or wants[len(got):]
        return [f"{where}: {len(got)} instruction(s), the plan says {len(wants)}; first unmatched: "
                f"{show(extra[0]) if isinstance(extra[0], Event) else extra[0]}"]
    left = list(got_shfl)
    for want in shfl:
        hit = next((k for k, e in enumerate(left) if want.matches(e)), None)
        if hit is None:
            near = ", ".join(show(e) for e in left[:2])
            return [f"{where}: no shuffle {want} (of {len(shfl)} the plan says; PTX has {near or 'none left'})"]
        left.pop(hit)
    if left:
        return [f"{where}: {len(left)} shuffle(s) the plan does not say, first {show(left[0])}"]
    return []


# ------------------------------------------------------------------ the entry points
def check_kernels(plan, kernels: dict[str, Kernel], name: str, seed: int = 0, max_problems: int = 4,
                  behaviour: bool = True, structure: bool = True) -> list[str]:
    """Problems of the harness kernels of ``plan`` (named ``name``) in parsed PTX: ``behaviour``
    (outputs against numpy) and, per thread, ``structure`` (the instructions against the plan).
    An empty list: the PTX does what the plan says."""
    record = operation_of(plan)
    op, want = record.harness, record.ptx
    rng = np.random.default_rng(seed)
    problems: list[str] = []
    for v in op.variants(plan):
        kname = f"{name}_harness{v}"
        if kname not in kernels:
            problems.append(f"{kname}: no such kernel in the PTX")
            continue
        data = op.data(plan, rng, v)
        try:
            out = run(kernels[kname], data.args, plan.threads, plan.smem_bytes, plan.warp_size)
        except PtxError as e:
            problems.append(f"{kname}: {e}")
            continue
        if behaviour and not out.unmodelled:
            r = op.compare(kname, plan, data, {i: out.args[i] for i in data.wants}, "ok", None)
            if not r.ok:
                problems.append(f"{kname}: behaviour: {r.message}")
        for t, events in enumerate(out.events if structure else ()):
            lane, warp = t % plan.warp_size, t // plan.warp_size
            # a source repack runs before the byte plan: its steps move the byte plan's tensor
            args = [byte_plan_input(plan, data.args[0]), *data.args[1:]]
            wants, shfl = want.wants(plan, args, v, lane, warp)
            mine = [e for e in events if want.counts(e)]
            if want.normalise is not None:
                mine = want.normalise(mine, plan)
            if want.plain_loads:
                mine = first_loads(mine, lambda e: (e.op in BLOCK_BARRIER, e.op.startswith("ld.shared"), e.addr))
                wants = first_loads(wants, lambda w: (w.ops == BLOCK_BARRIER, w.ops[0].startswith("ld.shared"), w.addr))
            problems += compare(f"{kname} thread {t} (warp {warp}, lane {lane})", wants, shfl, mine, want.trim)
            if len(problems) >= max_problems:
                return problems
    return problems


def check(plan, ptx: str, name: str, seed: int = 0, behaviour: bool = True, structure: bool = True) -> list[str]:
    """``check_kernels`` on PTX text."""
    return check_kernels(plan, parse(ptx), name, seed, behaviour=behaviour, structure=structure)


def nvcc_flags(arch: str) -> list[str]:
    """-arch for sm_XY; sm_90a through -gencode (nvcc 13's -arch=sm_90a emits compute_90 PTX)."""
    return ["-gencode", f"arch=compute_{arch[3:]},code=compute_{arch[3:]}"] if arch.endswith("a") \
        else [f"-arch={arch}"]


def compile_ptx(nvcc: str, source: str, arch: str, out: str, cwd: str | None = None) -> tuple[str | None, str]:
    """``nvcc -ptx`` of one translation unit: (the PTX text or None, the compiler's output)."""
    r = subprocess.run([nvcc, "-std=c++17", *nvcc_flags(arch), "-ptx", "-o", out, source],
                       capture_output=True, text=True, cwd=cwd or os.path.dirname(source) or ".")
    if r.returncode:
        return None, r.stdout + r.stderr
    with open(out) as fh:
        return fh.read(), r.stdout + r.stderr
