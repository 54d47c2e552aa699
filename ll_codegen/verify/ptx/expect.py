"""What the plan says one thread's harness issues, instruction by instruction: the
expected ``Event``s of ``sim`` for conversions, stores, loads and copies, written from the
plan's data and the PTX ISA's opcode spellings (not from the templates or ``emit/``).

A ``Want`` is one expected instruction: the accepted opcodes (every modifier spelled out:
``.trans``, ``.x1/.x2/.x4``, ``.v2/.v4``, the type), the shared-window or global address, the data
words in asm operand order (the elements, lowest first, packed into 32-bit registers; narrower
accesses compare their low bits) and the remaining operands (shuffle lane, clamp and mask;
cp.async sizes and source).  Addresses: a shared access of a thread is at
``SMEM_WINDOW + (base(lane, warp) ^ offset)``; a global one at the harness's tile
(``scratch``) plus ``sum_d (coord_base[d](lane, warp) ^ coords[d]) * stride_d`` elements, the
strides the harness's (``harness_strides``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np

from ll_codegen.core import f2
from ll_codegen.core.layout import layout_of
from ll_codegen.emit.harness_tiles import global_access, harness_cut, harness_fill, harness_tile, variant_masked
from ll_codegen.plan.plans import Transfer, steps, without_via
from ll_codegen.verify.ptx.ops import SMEM_WINDOW, Event, bits_of, split_op
from ll_codegen.verify.ptx.sim import GLOBAL_BASE
from ll_codegen.verify.emulate.packed import packed_tensor, unpacked_tensor
from ll_codegen.verify.emulate.reference import row_major_index
from ll_codegen.plan.packed import side_pair

#: the vector type of an n-byte ld/st of 32-bit registers (PTX ISA "ld", "st": .v2/.v4 of .b32)
VECTOR = {1: "b8", 2: "b16", 4: "b32", 8: "v2.b32", 16: "v4.b32"}
BLOCK_BARRIER = ("bar.sync", "barrier.sync", "barrier.sync.aligned")
FULL = 0xffffffff
#: shfl.sync's c operand for a whole-warp shuffle: segment mask (32 - width) << 8 = 0, clamp 31
WARP_CLAMP = 0x1f
SCRATCH_ARG = 3          # the harness argument holding a global tile (verify/harness.py)


@dataclass(frozen=True)
class Want:
    """One expected instruction: accepted opcodes, then each field that is checked (None: not).
    ``payload``: the bytes its data operands carry, in operand order (``prefix``: only the first
    ``len(payload)`` bytes, for a register wider than its payload)."""
    ops: tuple[str, ...]
    space: str | None = None
    addr: int | None = None
    payload: bytes | None = None
    prefix: bool = False
    extra: tuple | None = None

    def matches(self, e: Event) -> bool:
        if e.op not in self.ops or (self.space is not None and e.space != self.space) or \
                (self.addr is not None and e.addr != self.addr) or \
                (self.extra is not None and tuple(e.extra) != tuple(self.extra)):
            return False
        if self.payload is None:
            return True
        got = event_bytes(e)
        return got[:len(self.payload)] == self.payload if self.prefix else got == self.payload

    def __str__(self) -> str:
        parts = ["|".join(self.ops)]
        if self.addr is not None:
            parts.append(f"[{self.addr:#x}]")
        if self.payload is not None:
            parts.append("bytes " + self.payload.hex() + ("..." if self.prefix else ""))
        if self.extra is not None:
            parts.append(f"extra={tuple(hex(x) if isinstance(x, int) else x for x in self.extra)}")
        return " ".join(parts)


def event_bytes(e: Event) -> bytes:
    """The bytes an event's data operands carry: each operand as wide as the opcode's type
    (ldmatrix / stmatrix / shfl: 32-bit registers)."""
    width = 4 if e.op.startswith(("ldmatrix", "stmatrix", "shfl")) else bits_of(split_op(e.op)[2][-1]) // 8
    return b"".join(int(v).to_bytes(width, "little") for v in e.data)


def show(e: Event) -> str:
    addr = f" [{e.addr:#x}]" if e.addr is not None else ""
    data = " bytes " + event_bytes(e).hex() if e.data else ""
    extra = f" extra={tuple(hex(x) if isinstance(x, int) else x for x in e.extra)}" if e.extra else ""
    return f"PTX line {e.line}: {e.op}{addr}{data}{extra}"


# ------------------------------------------------------------------ values the plan speaks of
def elements(bases: dict, flat: np.ndarray, warps: int, lanes: int) -> np.ndarray:
    """[warp, lane, reg] -> the raw value register ``reg`` holds when the tensor is ``flat``."""
    key = repr(bases)
    idx = _INDEX.get(key)
    if idx is None:                       # asked once per thread of a harness: the layout's index once
        if len(_INDEX) >= 256:
            _INDEX.clear()
        idx = _INDEX[key] = row_major_index(layout_of(bases))
    return np.asarray(flat).reshape(-1)[idx].reshape(warps, lanes, -1)


#: ``row_major_index`` of the layouts ``elements`` was asked about, by the text of their bases
_INDEX: dict[str, np.ndarray] = {}


def pack(values: Sequence[int], w: int) -> bytes:
    """The bytes of elements of ``w`` bytes packed lowest first: what the register operands of
    one access carry."""
    return b"".join(int(v).to_bytes(w, "little") for v in values)


def vector_op(kind: str, space: str, nbytes: int) -> tuple[str, ...]:
    """``st.shared.v4.b32`` and friends (an n-byte access of ``.b`` registers)."""
    return (f"{kind}.{space}.{VECTOR[nbytes]}",)


def matrix_op(kind: str, x: int, trans: bool) -> tuple[str, ...]:
    return (f"{kind}.sync.aligned.m8n8.x{x}{'.trans' if trans else ''}.shared.b16",)


def barrier(kind: str, named=None) -> Want:
    """A block barrier (``bar.sync 0``, or ``bar.sync id, threads`` of a named ``model.Barrier``) or a warp one."""
    if kind != "block":
        return Want(("bar.warp.sync",), extra=(FULL,))
    return Want(BLOCK_BARRIER, extra=(0,) if named is None else (named.id, named.threads))


def smem_access(store: bool, instr: str, regs, w: int, addr: int, vals) -> Want:
    """One planned shared access (``SmemAccess``): vector or ldmatrix/stmatrix, data for stores."""
    kind = "st" if store else "ld"
    if instr.startswith("matrix"):
        ops = matrix_op(kind + "matrix", len(regs) * w // 4, instr.endswith("trans"))
    else:
        ops = vector_op(kind, "shared", len(regs) * w)
    if not store:
        return Want(ops, "shared", addr)
    return Want(ops, "shared", addr, pack([vals[r] for r in regs], w))


# ------------------------------------------------------------------ per operation
def convert_wants(p: Transfer, vals: np.ndarray, lane: int, warp: int) -> tuple[list[Want], list[Want]]:
    """(ordered instructions, shuffles) one thread of a conversion issues."""
    w, v = p.elem_bytes, vals[warp, lane]
    seq: list[Want] = []
    shfl: list[Want] = []
    if p.through_smem:
        m = p.smem
        visible = "warp" if m.barrier == "warp" else "block"
        free = visible if m.per_warp else "block"          # before each round's stores
        for i, rnd in enumerate(m.rounds):
            if i > 0 or m.buffers == 1:
                seq.append(barrier(free, m.named_barrier))
            if not warp & m.store_warp_skip:
                seq += [smem_access(True, m.store_instr, a.regs, w, SMEM_WINDOW + (m.store_base(lane, warp) ^ a.offset),
                                    v) for a in rnd.stores]
            seq.append(barrier(visible, m.named_barrier))
            seq += [smem_access(False, m.load_instr, a.regs, w, SMEM_WINDOW + (m.load_base(lane, warp) ^ a.offset),
                                v) for a in rnd.loads]
    if p.by_shuffle:
        s = p.shuffle
        xor = s.src_lane is None
        tid = lane + p.warp_size * warp              # selects and the source lane read lane and warp bits
        sel = s.send_select(tid)
        for rnd in s.rounds:
            if xor and not rnd.lane_xor:
                continue                                  # the lane keeps its own payload
            payload = pack([v[r] for r in s.sent(rnd)[sel]], w)
            b = rnd.lane_xor if xor else f2.apply(s.src_lane, tid & ((1 << len(s.src_lane)) - 1)) ^ rnd.lane_xor
            op = "shfl.sync.bfly.b32" if xor else "shfl.sync.idx.b32"
            shfl += [Want((op,), payload=payload[i:i + 4], prefix=len(payload) < 4, extra=(b, WARP_CLAMP, FULL))
                     for i in range(0, len(payload), 4)]
    return seq, shfl


def path_of(p: Transfer, variant: str) -> Transfer:
    """The plan a harness variant runs: a global tile's ``_a<bytes>`` variants steer the run-time
    alignment dispatch into the path of that vector width (``Transfer.paths``), the others
    run the fastest one, the plan itself."""
    if not variant.startswith("_a"):
        return replace(p, paths=())
    width = int(variant[2:].split("_")[0])
    return next(q for q in p.paths if global_access(q).vector_bytes == width)


def tile_base(p: Transfer, variant: str) -> tuple[int, tuple[int, ...]]:
    """(byte address of the harness's global tile, its strides in elements) for ``variant``
    (``harness_tile``: padded strides, or a run-time alignment path's strides and pointer offset)."""
    strides, offset = harness_tile(p, variant)
    return GLOBAL_BASE * (SCRATCH_ARG + 1) + offset * p.elem_bytes, strides


def global_address(m, a, lane: int, warp: int, elem_bytes: int, tile: tuple[int, tuple[int, ...]]) -> int:
    """The byte address of a global access's first element in the harness's tile ``(base, strides)``."""
    base, strides = tile
    coords = [cb(lane, warp) ^ c for cb, c in zip(m.coord_base, a.coords)]
    return base + elem_bytes * sum(c * s for c, s in zip(coords, strides))


def loaded(p: Transfer, flat: np.ndarray, variant: str) -> np.ndarray:
    """The tensor as a load's registers see it: the masked harness's elements beyond the extent
    (``harness_cut``) read as ``fill`` (``harness_fill``)."""
    if not variant_masked(variant) or p.operation != "load":
        return flat
    coords = np.indices(p.shape).reshape(len(p.shape), -1)
    inside = np.all(coords < np.array(harness_cut(p.shape))[:, None], axis=0)
    return np.where(inside, flat, flat.dtype.type(harness_fill(p.elem_bytes)))


def memory_wants(p: Transfer, flat: np.ndarray, variant: str, lane: int, warp: int) -> list[Want]:
    """What one thread of a store / load harness issues: the conversion of a ``via`` plan and the
    planned accesses (for the masked variant only the vectors the extent leaves whole)."""
    tile = tile_base(p, variant) if p.memory.space == "global" else None
    p = path_of(p, variant)
    acc = without_via(p)
    m, w = p.memory, p.elem_bytes
    store = m.direction == "store"
    vals = elements(acc.src_bases if store else acc.dst_bases, flat, p.num_warps, p.warp_size)[warp, lane]
    seq: list[Want] = []
    if p.via is not None:
        seq += conversion_wants(p.via, loaded(p, flat, variant), lane, warp)[0]
    skip = store and (warp & m.warp_skip or lane & m.lane_skip)
    mine: list[Want] = []
    if m.space == "shared":
        if not (store and warp & m.warp_skip):
            mine = [smem_access(store, m.instr, a.regs, w, SMEM_WINDOW + (m.base(lane, warp) ^ a.offset), vals)
                    for a in m.accesses]
    elif not skip:
        cut = harness_cut(p.shape) if variant_masked(variant) else None
        f = m.layout["order"][0]
        for a in m.accesses:
            first = [cb(lane, warp) ^ c for cb, c in zip(m.coord_base, a.coords)]
            if cut is not None and (any(c >= e for d, (c, e) in enumerate(zip(first, cut)) if d != f)
                                    or first[f] + len(a.regs) > cut[f]):
                continue                                  # cut: element by element in plain C++, or nothing
            addr = global_address(m, a, lane, warp, w, tile)
            ops = vector_op("st" if store else "ld", "global", len(a.regs) * w)
            mine.append(Want(ops, "global", addr, pack([vals[r] for r in a.regs], w) if store else None))
    return (seq + mine) if store else (mine + seq)


def copy_wants(p: Transfer, flat: np.ndarray, variant: str, lane: int, warp: int) -> list[Want]:
    """A copy's cp.async (size, destination, source, zero-fill source size) or ld.global +
    st.shared pairs, then the harness's commit and wait<0>."""
    base, strides = tile = tile_base(p, variant)
    groups = any(q.async_copy for q in (p, *p.paths))     # the header's commit()/wait() are cp.async's
    p = path_of(p, variant)
    c = p
    ld, st, w = c.load, c.store, p.elem_bytes
    f = ld.layout["order"][0]
    cut = harness_cut(p.shape) if variant_masked(variant) else None
    tensor = np.asarray(flat).reshape(p.shape)
    seq: list[Want] = []
    if not (warp & st.warp_skip or lane & st.lane_skip):
        for ga, sa in zip(ld.accesses, st.accesses):
            n = len(ga.regs) * w
            first = [cb(lane, warp) ^ x for cb, x in zip(ld.coord_base, ga.coords)]
            src = global_address(ld, ga, lane, warp, w, tile)
            dst = SMEM_WINDOW + (st.base(lane, warp) ^ sa.offset)
            inside = cut is None or all(x < e for d, (x, e) in enumerate(zip(first, cut)) if d != f)
            room = (len(ga.regs) if cut is None else max(0, cut[f] - first[f])) if inside else 0
            room = min(room, len(ga.regs))
            if c.async_copy:
                op = "cp.async.cg.shared.global" if n == 16 else "cp.async.ca.shared.global"
                if cut is None:
                    seq.append(Want((op,), "shared", dst, extra=(n, n, src)))
                else:                                   # a copy with nothing inside reads the tile's first byte
                    seq.append(Want((op,), "shared", dst, extra=(n, room * w, src if room else base)))
                continue
            coords = [tuple(first[d] + (j if d == f else 0) for d in range(len(first))) for j in range(len(ga.regs))]
            elems = [int(tensor[cc]) if j < room else 0 for j, cc in enumerate(coords)]
            if room == len(ga.regs):
                seq += [Want(vector_op("ld", "global", n), "global", src),
                        Want(vector_op("st", "shared", n), "shared", dst, pack(elems, w))]
            elif inside and len(ga.regs) > 1 and w < 8:
                for j, e in enumerate(elems):               # the edge cuts the vector: element by element
                    seq.append(Want(vector_op("st", "shared", w), "shared", dst + j * w, pack([e], w)))
            else:
                seq.append(Want(vector_op("st", "shared", n), "shared", dst, pack([0] * len(ga.regs), w)))
    if groups:
        seq += [Want(("cp.async.commit_group",)), Want(("cp.async.wait_group",), extra=(0,))]
    return seq


def relayout_wants(p: Transfer, flat: np.ndarray, variant: str, lane: int, warp: int) -> tuple[list[Want], list[Want]]:
    """A relayout's thread: the load's accesses of the source tile, the conversion (its ordered
    instructions; its shuffles apart), the store's accesses of the destination tile -- at the
    harness's addresses (the destination tile at ``dst_offset``).  A warp the load skips
    (``warp_skip``: it holds copies) issues none of them."""
    if warp & p.load.memory.warp_skip:
        return [], []
    load = memory_wants(p.load, flat, variant, lane, warp)
    seq, shfl = conversion_wants(p.convert, flat, lane, warp)
    store = [replace(x, addr=x.addr + p.dst_offset) for x in memory_wants(p.store, flat, variant, lane, warp)]
    return load + seq + store, shfl


def conversion_wants(p: Transfer, flat: np.ndarray, lane: int, warp: int) -> tuple[list[Want], list[Want]]:
    """``convert_wants`` of a conversion of the tensor ``flat``, step by step for a staged one
    (its shuffles, then its trip through shared memory), also as a store's or load's ``via``."""
    seq: list[Want] = []
    shfl: list[Want] = []
    for q in steps(p):
        a, b = convert_wants(q, elements(q.src_bases, flat, p.num_warps, p.warp_size), lane, warp)
        seq, shfl = seq + a, shfl + b
    return seq, shfl


def thread_wants(p, flat: np.ndarray, variant: str, lane: int, warp: int) -> tuple[list[Want], list[Want]]:
    if p.operation == "convert":
        return conversion_wants(p, flat, lane, warp)
    if p.operation in ("store", "load"):
        via = path_of(p, variant).via
        shfl = conversion_wants(via, loaded(p, flat, variant), lane, warp)[1] if via is not None else []
        return memory_wants(p, flat, variant, lane, warp), shfl
    if p.operation == "copy":
        return copy_wants(p, flat, variant, lane, warp), []
    raise ValueError(f"no instruction expectations for operation {p.operation!r}")


# ------------------------------------------------------------------ per operation
@dataclass(frozen=True)
class PtxWants:
    """What the PTX check compares for one operation's harness: ``wants(plan, args, variant, lane,
    warp)`` -> (the expected events of one thread in order, its shuffles as a multiset);
    ``counts(event)``: which recorded events those speak of; ``trim``: whether the harness's own
    barriers around the generated call are dropped before comparing; ``plain_loads``: its shared
    loads are plain C++, not our wrappers, so the compiler may merge loads of one address and
    repeats are dropped; ``normalise(events, plan)``: the counted events of one thread put in a
    canonical form before comparing (plain C++ accesses the compiler may vectorise and reorder
    between barriers: ``expect_async.element_accesses``)."""
    wants: Callable[..., tuple[list[Want], list[Want]]]
    counts: Callable[[Event], bool]
    trim: bool
    plain_loads: bool = False
    normalise: Callable[[list[Event], Any], list[Event]] | None = None


def generated_only(e: Event) -> bool:
    """A conversion's or a gather's harness touches shared memory only through the generated call."""
    return e.space != "global"


def through_wrappers(e: Event) -> bool:
    """Memory, copy and TMA harnesses also move their tiles themselves (plain C++, not our
    wrappers): only inline-asm instructions, shuffles and barriers are the generated code's."""
    return e.asm or e.op.startswith(("shfl.", "bar.", "barrier."))


def _tile_wants(p, args: list, variant: str, lane: int, warp: int) -> tuple[list[Want], list[Want]]:
    return thread_wants(p, args[0], variant, lane, warp)       # args[0]: the row-major tensor `in`


def _relayout_wants(p, args: list, variant: str, lane: int, warp: int) -> tuple[list[Want], list[Want]]:
    return relayout_wants(p, args[0], variant, lane, warp)


def _upcast_wants(p, args: list, variant: str, lane: int, warp: int) -> tuple[list[Want], list[Want]]:
    """An upcast's move (a conversion's shuffles and shared-memory rounds, or a load's accesses, in the
    source type); the upcast after it stays in the thread (its arithmetic is checked by the outputs)."""
    return thread_wants(p.move, move_input(p.move, args[0]), variant, lane, warp)


def move_input(move: Transfer, flat: np.ndarray) -> np.ndarray:
    """The harness's ``in`` (packed by the source's own pair) as the move's byte plan reads it."""
    k = move.packing
    if k is None or not k.src_swap:
        return flat
    d, b = side_pair(k, "src")
    shape = tuple(s // 2 if i == d else s for i, s in enumerate(k.shape))
    return packed_tensor(unpacked_tensor(np.asarray(flat).reshape(shape), d, b), k.dim, k.bit).reshape(-1)


CONVERSION_PTX = PtxWants(_tile_wants, generated_only, False)
UPCAST_PTX = PtxWants(_upcast_wants, through_wrappers, True)   # a load's harness fills its tile in plain C++
RELAYOUT_PTX = PtxWants(_relayout_wants, through_wrappers, True)
ACCESS_PTX = PtxWants(_tile_wants, through_wrappers, True)      # store, load, copy
