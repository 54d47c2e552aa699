"""Integrity of every timed kernel: registers, spills, local memory; equal work in two base loops.

A kernel that spills is timed for its local-memory traffic, not for the code under test, so every
kernel a bench times gets a record (``kernel_record``) from whatever the run has:

* ptxas ``-v`` (our kernels: ``nvcc -Xptxas -v``): registers, stack frame, spill store/load bytes;
* ``cuobjdump -res-usage`` of the cubin (both sides): REG, STACK, LOCAL;
* the loaded function: CuPy's ``num_regs``/``local_size_bytes``, Triton's ``n_regs``/``n_spills``
  (``n_spills`` is the function's local bytes / 4);
* its SASS (``sass.sass_counts``): ``STL``/``LDL`` in the whole kernel and in its main loop.

``problems`` lists what in a record spills or uses local memory; a pair with any problem on
either side is left out of every headline figure (``headline.pair_flags``).  ``base_work``
compares the SASS ALU instructions per iteration of two base loops (the loops a conversion's
time is measured against): equal work within 10%, or 2 instructions (a pass's counter add and
compare, which two differently unrolled loops spread over a different number of iterations).
"""
from __future__ import annotations

import re
import subprocess
from typing import Any

from llgen_bench.sass import cuobjdump

#: the record's fields that must all be zero for a kernel to count as spill-free
LOCAL_FIELDS = ("spill_stores", "spill_loads", "stack", "local", "stl", "ldl")
BASE_REL, BASE_SLACK = 0.10, 2.0

_PTXAS_FN = re.compile(r"(?:Compiling entry function|Function properties for)\s+'?([\w$]+)'?")
_PTXAS_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_RES_FN = re.compile(r"^\s*Function\s+([\w$]+):")
_RES = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")


def parse_ptxas(log: str) -> dict[str, dict[str, int]]:
    """ptxas ``-v`` output -> per function: regs, stack, spill_stores, spill_loads (bytes)."""
    out: dict[str, dict[str, int]] = {}
    fn = ""
    for line in log.splitlines():
        m = _PTXAS_FN.search(line)
        if m:
            fn = m.group(1)
            out.setdefault(fn, {})
            continue
        m = _PTXAS_STACK.search(line)
        if m:
            out.setdefault(fn, {}).update(stack=int(m.group(1)), spill_stores=int(m.group(2)),
                                          spill_loads=int(m.group(3)))
        m = _PTXAS_REGS.search(line)
        if m:
            out.setdefault(fn, {})["regs"] = int(m.group(1))
    return out


def parse_res_usage(text: str) -> dict[str, dict[str, int]]:
    """``cuobjdump -res-usage`` output -> per function: regs, stack, shared, local (bytes)."""
    out: dict[str, dict[str, int]] = {}
    fn = None
    for line in text.splitlines():
        m = _RES_FN.match(line)
        if m:
            fn = m.group(1)
            continue
        m = _RES.search(line)
        if m and fn is not None:
            out[fn] = dict(zip(("regs", "stack", "shared", "local"), map(int, m.groups())))
    return out


def res_usage(cubin: str) -> dict[str, dict[str, int]]:
    """``parse_res_usage`` of ``cuobjdump -res-usage cubin`` ({} when it cannot run)."""
    try:
        r = subprocess.run([cuobjdump(), "-res-usage", cubin], capture_output=True, text=True)
    except OSError:
        return {}
    return parse_res_usage(r.stdout) if r.returncode == 0 else {}


def _max(*xs: int | None) -> int | None:
    known = [x for x in xs if x is not None]
    return max(known) if known else None


def kernel_record(*, regs: int | None = None, ptxas: dict | None = None, res: dict | None = None,
                  local_bytes: int | None = None, sass: dict | None = None, cap: int | None = None) -> dict[str, Any]:
    """One kernel's integrity record from any of: ptxas ``-v`` (``parse_ptxas`` entry), res-usage
    (``parse_res_usage`` entry), the loaded function's register count and local bytes, its
    ``sass_counts``; ``cap``: the register cap it was built with (None: the compiler's default).
    A field no source gave is None (unknown, not zero)."""
    ptxas, res = ptxas or {}, res or {}
    rec: dict[str, Any] = {"cap": cap,
        "regs": _max(regs, ptxas.get("regs"), res.get("regs")),
        "spill_stores": ptxas.get("spill_stores"), "spill_loads": ptxas.get("spill_loads"),
        "stack": _max(ptxas.get("stack"), res.get("stack")),
        "local": _max(res.get("local"), local_bytes),
        "stl": None, "ldl": None, "loop_stl": None, "loop_ldl": None,
        "sources": [k for k, v in (("ptxas", ptxas), ("res-usage", res), ("runtime", regs is not None
                                   or local_bytes is not None), ("sass", sass)) if v]}
    if sass:
        rec.update(stl=sass["kernel"].get("STL", 0), ldl=sass["kernel"].get("LDL", 0),
                   loop_stl=sass["loop"].get("STL", 0), loop_ldl=sass["loop"].get("LDL", 0))
    return rec


def spills(per_function: dict[str, dict]) -> bool:
    """Whether any function of a ``parse_ptxas``/``parse_res_usage`` result has spill, stack or local
    bytes (the build to redo with a register cap)."""
    return any(f.get(k) for f in per_function.values() for k in ("spill_stores", "spill_loads", "stack", "local"))


def problems(rec: dict | None) -> list[str]:
    """What in a record spills or uses local memory (``['no integrity data']`` when it knows nothing)."""
    if not rec or all(rec.get(k) is None for k in LOCAL_FIELDS):
        return ["no integrity data"]
    return [f"{k} {rec[k]}" for k in LOCAL_FIELDS if rec.get(k)]


def describe(rec: dict | None) -> str:
    """Short text of a record: ``'168 regs'`` or ``'255 regs, spill 304/304 B, stack 296, 76 STL/76 LDL'``."""
    if not rec:
        return "no data"
    parts = [f"{rec['regs']} regs" if rec.get("regs") is not None else "regs ?"]
    if rec.get("cap"):
        parts[0] += f" (cap {rec['cap']})"
    if rec.get("spill_stores") or rec.get("spill_loads"):
        parts.append(f"spill {rec.get('spill_stores')}/{rec.get('spill_loads')} B")
    for k in ("stack", "local"):
        if rec.get(k):
            parts.append(f"{k} {rec[k]}")
    if rec.get("stl") or rec.get("ldl"):
        parts.append(f"{rec.get('stl')} STL/{rec.get('ldl')} LDL ({rec.get('loop_stl')}/{rec.get('loop_ldl')} in loop)")
    return ", ".join(parts)


def base_work(ours: dict | None, triton: dict | None, rel: float = BASE_REL, slack: float = BASE_SLACK) -> dict:
    """Two base loops' SASS ALU instructions per iteration (``sass_counts``) and whether they agree
    within ``rel`` (or ``slack`` instructions); ``ok`` is None when either side has no loop."""
    a = (ours or {}).get("alu_per_iter")
    b = (triton or {}).get("alu_per_iter")
    res: dict[str, Any] = {"ours": a, "triton": b, "ours_step": (ours or {}).get("loop_step"),
                           "triton_step": (triton or {}).get("loop_step"), "ratio": None, "ok": None}
    if a is not None and b is not None:
        res["ratio"] = a / b if b else None
        res["ok"] = abs(a - b) <= max(rel * max(a, b), slack)
    return res
