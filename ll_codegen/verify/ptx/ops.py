"""What every part of ``sim`` shares: the address windows, ``Event`` (one recorded
instruction), ``PtxError``, the type helpers and ``Compiler`` (operand texts -> getters and
setters of one thread's registers, or their Python source for ``blocks``).  The instructions'
semantics: ``execute`` (arithmetic, moves, loads and stores, branches) and ``warp`` (warp
collectives, cp.async, the recorded Hopper instructions).

Registers hold Python ints; every operation masks its inputs to its type's width and
sign-extends ``.s`` inputs where the PTX ISA widens (``mul.wide``, ``cvt``, ``shr.s``, ``setp``
orderings, ``min``/``max``).  Shared addresses are shared-window addresses; a generic address
``SHARED_GENERIC + w`` is window address ``w`` (``cvta``), one at ``LOCAL_GENERIC + o`` the
thread's local byte ``o``, every other generic address global.  Which instructions leave an
``Event`` in the thread's trace: every shared and global access, shuffles, barriers, ldmatrix /
stmatrix, the cp.async family, mbarrier, fences, TMA and wgmma / mma (see ``sim``).
"""
from __future__ import annotations

import functools
import re
import struct
from dataclasses import dataclass
from typing import Callable

#: global buffer k (kernel argument k) starts at GLOBAL_BASE * (k + 1)
GLOBAL_BASE = 1 << 36
SHARED_GENERIC = 0x7E00_0000_0000
LOCAL_GENERIC = 0x7D00_0000_0000
#: shared-window address of the kernel's (only) extern dynamic shared array
SMEM_WINDOW = 0x400

#: opcodes whose effects sim does not model: executed for their operands only
UNMODELLED = ("wgmma.mma_async", "mma.sync", "cp.async.bulk.tensor", "mbarrier.try_wait")

_TYPE = re.compile(r"^[bsuf](8|16|32|64)$|^pred$|^f16x2$|^bf16x2$|^bf16$|^tf32$|^e4m3x2$|^e5m2x2$")
_MEM = re.compile(r"^\[\s*([^\]+]+?)\s*(?:\+\s*(-?(?:0x)?[0-9a-fA-F]+))?\s*\]$")
_SPECIAL = {"%tid.y": 0, "%tid.z": 0, "%ctaid.x": 0, "%ctaid.y": 0, "%ctaid.z": 0, "%nctaid.x": 1,
            "%nctaid.y": 1, "%nctaid.z": 1, "%ntid.y": 1, "%ntid.z": 1}


class PtxError(Exception):
    """The PTX does something the interpreter does not model, or something wrong."""


@dataclass
class Event:
    """One recorded instruction of one thread: ``addr`` is a shared-window address for shared
    accesses, the (generic) global address otherwise; ``data`` the values stored, loaded, sent or
    received (32-bit registers unless the access is narrower); ``extra`` the operand values that
    are neither (shuffle b, c, mask; cp.async sizes and source; TMA coordinates...)."""
    op: str
    asm: bool
    space: str = ""
    addr: int | None = None
    data: tuple[int, ...] = ()
    extra: tuple = ()
    line: int = 0


def unwritten(th, name: str) -> str:
    """Why thread ``th`` may not read register ``name``: never written, or an accumulator register
    of a wgmma.mma_async in flight (``th.wg_inflight``: name -> (its wgmma, value at the issue))."""
    held = getattr(th, "wg_inflight", {}).get(name)
    if held is not None:
        return (f"thread {th.tid}: register {name} read while the wgmma.mma_async of PTX line "
                f"{th.wg_issued[held[0]][0]} writing it is in flight (no wgmma.wait_group covers it)")
    return f"thread {th.tid}: register {name} read before it is written"


def local_window(addr: int) -> int | None:
    """The local byte a generic address names, or None."""
    return addr - LOCAL_GENERIC if LOCAL_GENERIC <= addr < LOCAL_GENERIC + (1 << 32) else None


@functools.lru_cache(maxsize=None)
def bits_of(t: str) -> int:
    if t == "pred":
        return 1
    if t in ("f16x2", "bf16x2"):         # two 16-bit halves in a .b32
        return 32
    if t in ("e4m3x2", "e5m2x2"):        # two 8-bit floats in a .b16
        return 16
    m = re.search(r"(\d+)", t)
    return int(m.group(1)) if m else 32


def signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) & 1 else v


def split_op(op: str) -> tuple[str, list[str], list[str]]:
    """(base, modifiers, types) of an opcode: ``ld.global.nc.v4.u32`` -> (ld, [global, nc, v4], [u32])."""
    base, mods, types = _split_op(op)
    return base, list(mods), list(types)


@functools.lru_cache(maxsize=None)
def _split_op(op: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    parts = op.split(".")
    types = tuple(p for p in parts[1:] if _TYPE.match(p))
    mods = tuple(p for p in parts[1:] if not _TYPE.match(p))
    return parts[0], mods, types


@functools.lru_cache(maxsize=None)
def _imm(tok: str) -> int | None:
    """The value of an immediate operand (integer, ``0f``/``0d`` float bits, decimal float), or None;
    cached: a machine decodes every operand of its kernel once per run."""
    t = tok.strip()
    if re.fullmatch(r"0[fF][0-9a-fA-F]{8}", t) or re.fullmatch(r"0[dD][0-9a-fA-F]{16}", t):
        return int(t[2:], 16)
    if re.fullmatch(r"-?(0[xX][0-9a-fA-F]+|\d+)[uU]?", t):
        return int(t.rstrip("uU"), 0)
    if re.fullmatch(r"-?\d+\.\d*(e-?\d+)?", t):
        return struct.unpack("<I", struct.pack("<f", float(t)))[0]
    return None


class Compiler:
    """Turns operand texts into getters and setters for one machine (``sim.Machine``)."""

    def __init__(self, m):
        self.m = m
        k = m.kernel
        self.symbols = dict(k.shared)
        self.symbols.update(m.params)
        self.symbols.update({s: off for s, off in k.local_syms.items()})
        self.local_syms = set(k.local_syms)
        self.env: dict[str, object] = {}          # values the instructions' snippets name (``bind``)
        self.keys: dict[str, str] = {}

    def bind(self, value: object, key: str | None = None) -> str:
        """A name for ``value`` in the snippets' source (``blocks``); one name per ``key`` when given
        (the machine's buffers and methods, which many instructions name)."""
        if key is not None and key in self.keys:
            return self.keys[key]
        name = f"_k{len(self.env)}"
        self.env[name] = value
        if key is not None:
            self.keys[key] = name
        return name

    def expr(self, tok: str) -> str:
        """``get(tok)`` as Python source over the thread ``th`` and its registers ``r`` (a register
        never written raises ``KeyError``: ``sim`` reports it with the instruction's line)."""
        tok = tok.strip()
        v = _imm(tok)
        if v is not None:
            return f"({v})" if v < 0 else str(v)
        if tok in ("%tid.x", "%laneid", "%warpid"):
            return {"%tid.x": "th.tid", "%laneid": "th.lane", "%warpid": "th.warp"}[tok]
        if tok == "%ntid.x":
            return str(len(self.m.threads))
        if tok in _SPECIAL:
            return str(_SPECIAL[tok])
        if tok in self.symbols:
            return str(self.symbols[tok])
        if tok.startswith("%") and "." in tok:
            raise PtxError(f"special register {tok} is not modelled")
        return f"r[{tok!r}]"

    @staticmethod
    def assign(tok: str, bits: int, value: str) -> str:
        """``setter(tok, bits)`` of the source ``value`` as a statement."""
        tok = tok.strip()
        if tok == "_":
            return f"_ = {value}"                 # evaluated all the same: its reads may fail
        if bits == 1:
            return f"r[{tok!r}] = bool({value})"
        return f"r[{tok!r}] = ({value}) & {(1 << bits) - 1}"

    def addr_expr(self, tok: str) -> str:
        """``addr(tok)`` as Python source."""
        m = _MEM.match(tok.strip())
        if not m:
            raise PtxError(f"memory operand {tok!r} is not modelled")
        off = int(m.group(2) or "0", 0)
        return f"{self.expr(m.group(1))} + {off}" if off >= 0 else f"{self.expr(m.group(1))} - {-off}"

    def get(self, tok: str) -> Callable:
        tok = tok.strip()
        v = _imm(tok)
        if v is not None:
            return lambda th, v=v: v
        if tok == "%tid.x":
            return lambda th: th.tid
        if tok == "%laneid":
            return lambda th: th.lane
        if tok == "%warpid":
            return lambda th: th.warp
        if tok == "%ntid.x":
            n = len(self.m.threads)
            return lambda th, n=n: n
        if tok in _SPECIAL:
            return lambda th, v=_SPECIAL[tok]: v
        if tok in self.symbols:
            return lambda th, v=self.symbols[tok]: v
        if tok.startswith("%") and "." in tok:
            raise PtxError(f"special register {tok} is not modelled")

        def reg(th, name=tok):
            try:
                return th.r[name]
            except KeyError:
                raise PtxError(unwritten(th, name)) from None
        return reg

    def getv(self, tok: str) -> list[Callable]:
        """Getters of a vector operand ``{a, b, ..}`` (one element for a scalar)."""
        tok = tok.strip()
        if tok.startswith("{"):
            return [self.get(x) for x in tok[1:-1].split(",")]
        return [self.get(tok)]

    @staticmethod
    def setter(tok: str, bits: int) -> Callable:
        tok = tok.strip()
        if tok == "_":
            return lambda th, v: None
        mask = (1 << bits) - 1
        if bits == 1:
            return lambda th, v, n=tok: th.r.__setitem__(n, bool(v))
        return lambda th, v, n=tok, k=mask: th.r.__setitem__(n, v & k)

    def setv(self, tok: str, bits: int) -> list[Callable]:
        tok = tok.strip()
        if tok.startswith("{"):
            return [self.setter(x, bits) for x in tok[1:-1].split(",")]
        return [self.setter(tok, bits)]

    def addr(self, tok: str) -> Callable:
        """Getter of a memory operand ``[base+offset]``."""
        m = _MEM.match(tok.strip())
        if not m:
            raise PtxError(f"memory operand {tok!r} is not modelled")
        base, off = self.get(m.group(1)), int(m.group(2) or "0", 0)
        name = m.group(1).strip()
        if base.__name__ == "reg":
            # a plain register read straight from the file (``sim.Machine.run_thread`` reports a
            # register read before it is written)
            return lambda th: th.r[name] + off
        return lambda th: base(th) + off


# ------------------------------------------------------------------ arithmetic


def record_event(th, ins, space="", addr=None, data=(), extra=()):
    """Append one ``Event`` of instruction ``ins`` to the thread's trace."""
    th.events.append(Event(ins.op, ins.asm, space, addr, tuple(data), tuple(extra), ins.line))


def advancing(f: Callable) -> Callable:
    """``f`` followed by the thread's pc moving to the next instruction."""
    def step(th):
        f(th)
        th.pc += 1
    return step
