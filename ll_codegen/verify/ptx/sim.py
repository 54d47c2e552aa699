"""A PTX interpreter for one CTA: runs what nvcc emitted, not what the templates say.

``parse(ptx)`` reads the kernels of a PTX file; ``run(kernel, args, threads, smem_bytes)`` executes
one kernel on the CPU for every thread of one block and returns the arguments as the kernel left
them plus, per thread, the ``Event`` trace of every memory, shuffle, barrier and asynchronous
instruction with its *concrete* operand values (addresses, registers, immediates).
``run/ptx_check.py`` compares those traces with what the plan says, instruction by instruction.

Semantics follow the PTX ISA (9.0): integer arithmetic modulo 2^width (``.s`` operands
sign-extended where the result is wider: ``mul.wide``, ``cvt``, ``shr.s``); ``prmt`` default mode;
``shfl.sync`` with its clamp/segment-mask operand c (``maxLane = (lane & segmask) | (c[4:0] &
~segmask)``); ``ldmatrix``/``stmatrix`` m8n8 b16 fragments (lane 8m + r gives row r of matrix m;
lane l holds elements (l / 4, 2 (l % 4) + h) of matrix m in register m, .trans swapping rows and
columns of the memory image); ``cp.async`` data that lands only at the ``cp.async.wait_group``
that covers its committed group (a read of its bytes before then is reported); ``bar.sync`` and
``bar.warp.sync`` as barriers of the block / warp.  Each thread runs until it blocks (a barrier or
a warp collective), so a missing barrier reads stale bytes.  Hopper instructions (mbarrier, TMA,
wgmma) are recorded with their operands but move no data (``mbarrier.try_wait`` succeeds at once);
``check`` checks their operands and does not compare such kernels' outputs.  wgmma's accumulator
registers are in flight from its issue to the ``wgmma.wait_group`` that covers its committed group
(PTX ISA "wgmma.wait_group"): reading or writing one in between, a wait with wgmma not committed
and a thread exiting with one in flight are errors (the registers keep their values: D is not
computed).  An instruction
this interpreter does not know raises ``PtxError`` naming it: nothing is skipped silently.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ll_codegen.verify.ptx.blocks import block
from ll_codegen.verify.ptx.execute import compile_instr
from ll_codegen.verify.ptx.ops import (GLOBAL_BASE, SHARED_GENERIC, SMEM_WINDOW, Compiler, Event, PtxError,
                                       local_window, unwritten)
from ll_codegen.verify.ptx.warp import matrix_op, shuffle_op

STEP_LIMIT = 2_000_000
#: what shared memory holds before the kernel writes it, 256 bytes of a repeating pattern
_SMEM_FILL = bytes(0xa5 ^ i for i in range(256))


@dataclass(frozen=True)
class Instr:
    """One PTX instruction: guard predicate, opcode (with every modifier) and operand texts."""
    op: str
    args: tuple[str, ...]
    pred: str | None
    neg: bool
    asm: bool            # inside a `// begin inline asm` block: written by our wrappers, not the compiler
    line: int


@dataclass
class Kernel:
    name: str
    params: list[str]
    instrs: list[Instr]
    labels: dict[str, int]
    shared: dict[str, int]                    # shared symbol -> window address
    local_bytes: int = 0
    local_syms: dict[str, int] = field(default_factory=dict)


# ------------------------------------------------------------------ parsing
_ENTRY = re.compile(r"\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)\s*\(([^)]*)\)", re.S)
_PARAM = re.compile(r"\.param\s+[^,]*?([\w$]+)(?:\[\d+\])?\s*(?:,|$)")
_SHARED = re.compile(r"\.(?:extern\s+)?\.shared\s+(?:\.align\s+\d+\s+)?\.\w+\s+([\w$]+)\s*(?:\[(\d*)\])?")
_LOCAL = re.compile(r"\.local\s+(?:\.align\s+(\d+)\s+)?\.\w+\s+([\w$]+)\s*\[(\d+)\]")
_LABEL = re.compile(r"[\w$]+:")
_GUARD = re.compile(r"@(!?)(%?[\w$]+)\s+(.*)$", re.S)


def _statements(body: str) -> list[tuple[str, bool, int]]:
    """(statement, inside inline asm, line) for every statement and label of a body."""
    out, asm = [], False
    for no, raw in enumerate(body.split("\n")):
        text = raw.strip()
        if text.startswith("// begin inline asm"):
            asm = True
            continue
        if text.startswith("// end inline asm"):
            asm = False
            continue
        text = text.split("//", 1)[0].strip()
        for part in text.split(";"):
            # a brace opening a statement opens or closes a scope (inline asm's `{ .reg .pred p; .. }`);
            # braces after an opcode are vector operands
            part = part.strip()
            while part[:1] in ("{", "}"):
                part = part[1:].strip()
            while part and _LABEL.match(part):        # labels
                lab, part = part.split(":", 1)
                out.append((lab + ":", asm, no))
                part = part.strip()
            if part:
                out.append((part, asm, no))
    return out


def _split_args(text: str) -> tuple[str, ...]:
    """Operands split at top-level commas ({..} vectors and [..] addresses stay whole; an empty
    last operand is dropped)."""
    if "{" not in text and "[" not in text:
        args = [x.strip() for x in text.split(",")]
    else:
        args, cur, depth = [], [], 0
        for piece in text.split(","):        # a comma splits where the brackets before it balance
            cur.append(piece)
            depth += piece.count("{") + piece.count("[") - piece.count("}") - piece.count("]")
            if depth == 0:
                args.append(",".join(cur).strip())
                cur = []
        if cur:
            args.append(",".join(cur).strip())
    if args and not args[-1]:
        args.pop()
    return tuple(args)


def parse(ptx: str) -> dict[str, Kernel]:
    """Every kernel (``.entry``) and function with a body in ``ptx``, by name."""
    shared = {}
    for m in _SHARED.finditer(ptx):
        shared[m.group(1)] = SMEM_WINDOW
    kernels: dict[str, Kernel] = {}
    marks = list(_ENTRY.finditer(ptx))
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(ptx)
        text = ptx[m.end():end]
        if "{" not in text:
            continue
        body = text[text.index("{") + 1:]
        params = [p.group(1) for p in _PARAM.finditer(m.group(2))]
        k = Kernel(m.group(1), params, [], {}, dict(shared))
        for stmt, asm, no in _statements(body):
            if stmt.endswith(":") and " " not in stmt:
                k.labels[stmt[:-1]] = len(k.instrs)
                continue
            if stmt.startswith("."):
                lm = _LOCAL.match(stmt)
                if lm:
                    align = int(lm.group(1) or 1)
                    k.local_bytes = -(-k.local_bytes // align) * align
                    k.local_syms[lm.group(2)] = k.local_bytes
                    k.local_bytes += int(lm.group(3))
                continue
            pred, neg = None, False
            pm = _GUARD.match(stmt) if stmt.startswith("@") else None
            if pm:
                neg, pred, stmt = pm.group(1) == "!", pm.group(2), pm.group(3)
            parts = stmt.split(None, 1)
            k.instrs.append(Instr(parts[0], _split_args(parts[1]) if len(parts) > 1 else (), pred, neg, asm, no))
        kernels[k.name] = k
    return kernels


# ------------------------------------------------------------------ machine state
@dataclass(slots=True)
class Thread:
    tid: int
    lane: int
    warp: int
    r: dict = field(default_factory=dict)
    pc: int = 0
    state: str = "run"           # run | bar | warp | done
    waiting: object = None       # the collective instruction's pending operands
    local: bytearray = field(default_factory=bytearray)
    events: list[Event] = field(default_factory=list)
    cp_pending: list = field(default_factory=list)     # issued, not yet committed: (window addr, bytes)
    cp_groups: list = field(default_factory=list)      # committed groups, oldest first
    # wgmma: every wgmma.mma_async issued ((PTX line, accumulator register names)), those since the
    # last commit_group and the committed groups (indices, oldest first), and the accumulator
    # registers in flight: name -> (the last wgmma writing it, its value at the first issue)
    wg_issued: list = field(default_factory=list)
    wg_open: list = field(default_factory=list)
    wg_groups: list = field(default_factory=list)
    wg_inflight: dict = field(default_factory=dict)
    steps: int = 0


class Machine:
    """One block: global buffers (the kernel's arguments), shared memory, its threads."""

    def __init__(self, kernel: Kernel, args: Sequence[np.ndarray], threads: int, smem_bytes: int,
                 warp_size: int = 32):
        self.kernel = kernel
        self.buffers = [bytearray(np.ascontiguousarray(a).tobytes()) for a in args]
        size = max(smem_bytes, 16)
        self.smem = bytearray((_SMEM_FILL * (size // 256 + 1))[:size])      # byte i: 0xa5 ^ (i % 256)
        self.smem_bytes = smem_bytes
        self.inflight: dict[int, int] = {}          # shared byte -> cp.async copies still in flight
        self.warp_size = warp_size
        self.errors: list[str] = []
        self.unmodelled: set[str] = set()           # opcodes run for their operands only (ops.UNMODELLED)
        self.threads = [Thread(t, t % warp_size, t // warp_size, local=bytearray(kernel.local_bytes))
                        for t in range(threads)]
        self.params = {p: GLOBAL_BASE * (i + 1) for i, p in enumerate(kernel.params)}
        compiler = Compiler(self)
        self.snippets = [compile_instr(self, ins, compiler) for ins in kernel.instrs]
        self.scope = compiler.env                      # the blocks' globals: the values snippets name
        # the block entered at each pc (``blocks``), made when a thread first gets there, and its length
        self.code: list[Callable | None] = [None] * len(self.snippets)
        self.size: list[int] = [0] * len(self.snippets)

    # memory ------------------------------------------------------------
    def error(self, msg: str) -> None:
        if len(self.errors) < 8:
            self.errors.append(msg)
        raise PtxError(msg)

    def resolve(self, space: str, addr: int, th: Thread) -> tuple[str, int]:
        """(space, address in it) of an access; generic addresses are sorted into their window."""
        if space in ("", "generic"):
            if SHARED_GENERIC <= addr < SHARED_GENERIC + (1 << 32):
                return "shared", addr - SHARED_GENERIC
            lw = local_window(addr)
            if lw is not None:
                return "local", lw
            return "global", addr
        return space, addr

    def read(self, space: str, addr: int, n: int, th: Thread) -> bytes:
        if space == "shared":
            off = addr - SMEM_WINDOW
            if off < 0 or off + n > self.smem_bytes:
                self.error(f"thread {th.tid}: shared load of {n} bytes at {addr:#x} outside the "
                           f"{self.smem_bytes}-byte buffer at {SMEM_WINDOW:#x}")
            if self.inflight and any(self.inflight.get(a) for a in range(off, off + n)):
                self.error(f"thread {th.tid}: shared load at {addr:#x} reads bytes of a cp.async still in flight "
                           "(no cp.async.wait_group covers it): stale data")
            return bytes(self.smem[off:off + n])
        if space == "local":
            return bytes(th.local[addr:addr + n])
        buf, off = self.global_at(addr, n, th)
        return bytes(buf[off:off + n])

    def write(self, space: str, addr: int, data: bytes, th: Thread) -> None:
        n = len(data)
        if space == "shared":
            off = addr - SMEM_WINDOW
            if off < 0 or off + n > self.smem_bytes:
                self.error(f"thread {th.tid}: shared store of {n} bytes at {addr:#x} outside the "
                           f"{self.smem_bytes}-byte buffer at {SMEM_WINDOW:#x}")
            if self.inflight and any(self.inflight.get(a) for a in range(off, off + n)):
                self.error(f"thread {th.tid}: shared store at {addr:#x} into bytes a cp.async still copies into "
                           "(no cp.async.wait_group covers it)")
            self.smem[off:off + n] = data
        elif space == "local":
            th.local[addr:addr + n] = data
        else:
            buf, off = self.global_at(addr, n, th)
            buf[off:off + n] = data

    def global_at(self, addr: int, n: int, th: Thread) -> tuple[bytearray, int]:
        k, off = divmod(addr, GLOBAL_BASE)
        if 1 <= k <= len(self.buffers) and off + n <= len(self.buffers[k - 1]):
            return self.buffers[k - 1], off
        self.error(f"thread {th.tid}: global access of {n} bytes at {addr:#x} outside every argument buffer")

    # cp.async ----------------------------------------------------------
    def land(self, th: Thread, keep: int) -> None:
        """cp.async.wait_group keep: the thread's committed groups but the newest ``keep`` land."""
        while len(th.cp_groups) > keep:
            for window, data in th.cp_groups.pop(0):
                off = window - SMEM_WINDOW
                for a in range(off, off + len(data)):
                    self.inflight[a] -= 1
                    if not self.inflight[a]:
                        del self.inflight[a]
                self.smem[off:off + len(data)] = data

    # scheduling ---------------------------------------------------------
    def run_thread(self, th: Thread) -> None:
        code, size, n = self.code, self.size, len(self.code)
        steps = th.steps
        try:
            while th.state == "run":
                pc = th.pc
                if pc >= n:
                    th.state = "done"
                    break
                f = code[pc]
                if f is None:
                    f, size[pc] = block(self.snippets, pc, self.scope)
                    code[pc] = f
                steps += size[pc]
                if steps > STEP_LIMIT:
                    self.error(f"thread {th.tid}: more than {STEP_LIMIT} instructions (a loop that does not end?)")
                f(th)
        except KeyError as e:               # blocks read registers straight from the dict
            self.error(f"{unwritten(th, e.args[0])} "
                       f"(PTX line {self.kernel.instrs[th.pc].line})")
        finally:
            th.steps = steps

    def resolve_warps(self) -> bool:
        any_done = False
        ws = self.warp_size
        for w0 in range(0, len(self.threads), ws):
            lanes = self.threads[w0:w0 + ws]
            live = [t for t in lanes if t.state != "done"]
            if not live or any(t.state != "warp" for t in live):
                continue
            if len(live) != len(lanes):
                self.error(f"warp {w0 // ws}: a warp collective with exited lanes")
            pcs = {t.pc for t in live}
            if len(pcs) != 1:
                self.error(f"warp {w0 // ws}: lanes wait in different warp collectives (lines "
                           f"{sorted(self.kernel.instrs[p].line for p in pcs)})")
            kind = live[0].waiting[0]
            if kind == "shfl":
                shuffle_op(self, live)
            elif kind == "matrix":
                matrix_op(self, live)
            for t in live:                       # bar.warp.sync: nothing to compute
                t.state, t.waiting = "run", None
                t.pc += 1
            any_done = True
        return any_done

    def run(self) -> None:
        while True:
            for th in self.threads:
                if th.state == "run":
                    self.run_thread(th)
            states = [t.state for t in self.threads]
            if all(s == "done" for s in states):
                return
            if self.resolve_warps():
                continue
            at_bar = [t for t in self.threads if t.state == "bar"]
            if at_bar and len(at_bar) + states.count("done") == len(self.threads):
                if len(at_bar) != len(self.threads):
                    self.error(f"bar.sync reached by {len(at_bar)} threads while the others have exited")
                for t in at_bar:
                    t.state = "run"
                    t.pc += 1
                continue
            self.error("deadlock: threads wait in different barriers or warp collectives")


@dataclass
class RunOutput:
    args: list[np.ndarray]           # every argument after the run (same dtypes and shapes as given)
    events: list[list[Event]]        # per thread, in program order
    smem: bytes
    unmodelled: set[str]             # opcodes whose data movement was not modelled: outputs are not comparable


def run(kernel: Kernel, args: Sequence[np.ndarray], threads: int, smem_bytes: int,
        warp_size: int = 32) -> RunOutput:
    """Execute ``kernel`` for one block of ``threads`` threads; raises ``PtxError`` (with the first
    problem) when the PTX does something unmodelled or wrong (out-of-bounds access, a read of an
    in-flight cp.async, divergence at a collective, a deadlock, ``trap``)."""
    m = Machine(kernel, args, threads, smem_bytes, warp_size)
    m.run()
    for th in m.threads:
        if th.cp_pending or th.cp_groups:
            m.error(f"thread {th.tid} exits with cp.async copies that no cp.async.wait_group waited for")
        if th.wg_inflight:
            line = th.wg_issued[min(i for i, _ in th.wg_inflight.values())][0]
            m.error(f"thread {th.tid} exits with the wgmma.mma_async of PTX line {line} in flight: no "
                    "wgmma.wait_group covered it")
    outs = [np.frombuffer(bytes(b), dtype=np.asarray(a).dtype).reshape(np.shape(a)).copy()
            for b, a in zip(m.buffers, args)]
    return RunOutput(outs, [t.events for t in m.threads], bytes(m.smem[:smem_bytes]), m.unmodelled)
