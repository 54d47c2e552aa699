"""The AMDGPU assembly hipcc emits for a HIP header, checked against the plan.

HIP headers have no inline asm: each LDS access is plain C++ (``detail::st/ld``) followed by a
scheduling fence (``__builtin_amdgcn_sched_barrier(0)``), so the backend keeps the planned
accesses apart and in order.  What the compiler decides, and this module reads from the
assembly of ``<name>_harness`` (a conversion) or ``<name>_probe`` (a store, load or copy: only
the planned accesses), per kernel:

* the LDS accesses in program order: ``ds_write_b{8n}`` / ``ds_read_{u8,u16,b32,b64,b128}`` (the
  ``_d16``/``_d16_hi`` forms count as their width) of exactly the planned widths, never paired
  (``ds_write2``/``ds_read2``), each at the planned immediate ``offset:`` -- ``base + offset``,
  which the header writes as a pointer plus a constant when the offset's bits are disjoint from
  the thread's base (others are XORed into the address register and not compared);
* ``s_barrier`` where the plan puts a block barrier (none in a one-wave workgroup, where the
  backend drops them) and none for a wavefront-scope one;
* one ``ds_bpermute_b32`` / ``ds_swizzle_b32`` per planned shuffle word.

A conversion without shared memory whose assembly touches LDS anyway (the backend promoted a
thread-private array) is reported with the prefix ``lds-promoted:``: a known, benign deviation.

Which VGPR carries which element is the C++ compiler's business (no asm string to get wrong) and
the host SIMT runtime runs that same C++; this check covers what only the device branch decides.
"""
from __future__ import annotations

import re
from dataclasses import replace
from ll_codegen.plan.plans import steps

_LABEL = re.compile(r"^([A-Za-z_$][\w$.]*):", re.M)
_LDS = re.compile(r"^\s*(ds_(write|read)(2(?:st64)?)?_([bu]\d+)(?:_d16(?:_hi)?)?)\b([^\n]*)", re.M)
_BAR = re.compile(r"^\s*s_barrier\b", re.M)
_SHFL = re.compile(r"^\s*ds_(?:bpermute|swizzle)_b32\b", re.M)


def kernels(asm: str) -> dict[str, str]:
    """Kernel or function symbol -> its assembly (from its label to the next global label)."""
    marks = list(_LABEL.finditer(asm))
    return {m.group(1): asm[m.start():marks[i + 1].start() if i + 1 < len(marks) else len(asm)]
            for i, m in enumerate(marks) if not m.group(1).startswith((".", "$"))}


def lds_events(text: str) -> list[tuple]:
    """("st"/"ld", bytes, offset, paired) per LDS instruction, and ("bar",) per s_barrier, in order."""
    out = []
    for line in text.splitlines():
        m = _LDS.match(line)
        if m:
            off = re.search(r"offset:(\d+)", m.group(5))
            out.append(("st" if m.group(2) == "write" else "ld", int(m.group(4)[1:]) // 8,
                        int(off.group(1)) if off else 0, bool(m.group(3))))
        elif _BAR.match(line):
            out.append(("bar",))
    return out


def _access(kind: str, a, w: int, support: int) -> tuple:
    n = len(a.regs) * w
    # the immediate of base + offset (a pointer plus a constant), when it fits the 16-bit offset field
    imm = a.offset if a.offset & support == 0 and a.offset < 1 << 16 else None
    return (kind, n, imm, False)


def expected(plan) -> list[tuple]:
    """What the plan says the kernel's LDS and barrier sequence is (offset None: not compared)."""
    w = plan.elem_bytes
    if plan.operation == "copy":
        st = plan.store
        return [_access("st", a, w, st.base.support) for a in st.accesses]
    if plan.operation in ("store", "load"):
        m = plan.memory
        seq = expected(plan.via) if plan.via is not None else []
        if m.space == "shared":
            kind = "st" if m.direction == "store" else "ld"
            mine = [_access(kind, a, w, m.base.support) for a in m.accesses]
        else:
            mine = []
        return seq + mine if m.direction == "store" else mine + seq
    if not plan.through_smem:               # a staged conversion's too: its via step issues no LDS
        return []
    m = plan.smem
    seq: list[tuple] = []
    for i, rnd in enumerate(m.rounds):
        if (i > 0 or m.buffers == 1) and not m.per_warp:
            seq.append(("bar",))
        seq += [_access("st", a, w, m.store_base.support) for a in rnd.stores]
        if m.barrier != "warp":
            seq.append(("bar",))
        seq += [_access("ld", a, w, m.load_base.support) for a in rnd.loads]
    return seq


def check(plan, text: str, name: str) -> list[str]:
    """Problems of one kernel's assembly ``text`` against ``plan`` (empty: as planned)."""
    got = lds_events(text)
    want = expected(plan)
    if plan.operation == "load" and plan.memory.space == "shared" and plan.via is None:
        # the load probe first fills the tile (its own LDS writes, then a barrier): a load has none
        got = [g for g in got if g[0] == "ld"]
    if plan.operation != "convert":
        # the harness's own barriers around the call (a memory plan's via conversion keeps its inner ones)
        got = _inner(got)
        want = _inner(want)
    if getattr(plan, "paths", ()):
        # run-time alignment paths: each path's code sits in its own branch, in the order the
        # backend lays the blocks out -- their LDS accesses compared as a multiset over every path
        want = [x for q in (replace(plan, paths=()), *plan.paths) for x in expected(q) if x != ("bar",)]
        got = sorted((g[:2] + (None, g[3]) for g in got if g != ("bar",)), key=_key)
        want = sorted((x[:2] + (None, x[3]) for x in want), key=_key)
    if plan.threads <= plan.warp_size:                     # a one-wave workgroup: barriers are no-ops
        got = [g for g in got if g != ("bar",)]
        want = [x for x in want if x != ("bar",)]
    if not want and got and plan.operation == "convert" and not plan.through_smem:
        # a documented, benign deviation (tests/plan_counts.py): the backend promoted a thread-private
        # array to LDS in a conversion that plans none
        return [f"{name}: lds-promoted: {len(got)} LDS instruction(s) in a conversion without shared memory"]
    problems = [f"{name}: ds_{'write' if g[0] == 'st' else 'read'}2 pairs planned accesses (ISA {k})"
                for k, g in enumerate(got) if len(g) > 1 and g[3]]
    for k, (g, x) in enumerate(zip(got, want)):
        if g[:2] != x[:2] or (len(x) > 2 and x[2] is not None and g[2] != x[2]):
            problems.append(f"{name}: LDS instruction {k}: ISA has {_show(g)}, the plan says {_show(x)}")
            break
    if len(got) != len(want):
        problems.append(f"{name}: {len(got)} LDS instructions and barriers, the plan says {len(want)}: "
                        f"ISA {[_show(g) for g in got][:8]} vs plan {[_show(x) for x in want][:8]}")
    shuffles = len(_SHFL.findall(text))
    planned = _planned_shuffles(plan)
    if shuffles != planned:
        problems.append(f"{name}: {shuffles} ds_bpermute/ds_swizzle, the plan says {planned} shuffle word(s)")
    return problems


def _planned_shuffles(plan) -> int:
    """Shuffle words of a plan and of the steps before it (a staged conversion's shuffles, a store's or
    load's via conversion, staged or not), over every run-time alignment path (each path's code is
    in the kernel)."""
    paths = (plan, *getattr(plan, "paths", ()))
    return sum(q.shuffle.shuffles for r in paths for p in steps(r) for q in steps(p)
               if q.operation == "convert" and q.strategy == "shuffle")


def _key(x: tuple) -> tuple:
    return (x[0],) + tuple(v if v is not None else -1 for v in x[1:2])


def _inner(seq: list) -> list:
    idx = [i for i, x in enumerate(seq) if x != ("bar",)]
    return seq[idx[0]:idx[-1] + 1] if idx else []


def _show(x: tuple) -> str:
    if x == ("bar",):
        return "s_barrier"
    kind, n, off = x[0], x[1], x[2]
    op = f"ds_write_b{8 * n}" if kind == "st" else (f"ds_read_u{8 * n}" if n < 4 else f"ds_read_b{8 * n}")
    return op + (f" offset:{off}" if off else "" if off is not None else " offset:?")
