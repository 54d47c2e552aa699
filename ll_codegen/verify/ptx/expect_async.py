"""What the plan says one thread of a gather, TMA or mma harness issues, as
``expect`` does for conversions and memory plans; ``check`` compares.

* gather: per output register the ``shfl.sync.idx`` of every candidate word from lane
  ``lane(lane, warp) ^ v_lane(v) ^ out.lane`` (``v`` the index's low bits), or the shared-memory
  path's block barrier, its stores at ``store_base ^ offset`` (threads holding broadcast copies
  skip) and a barrier; its loads at ``load_base ^ offset ^ v_offset(v)``.
* TMA (``cp.async.bulk.tensor``, mbarrier, sm_90a): thread 0 initialises the mbarrier at the end of
  the tile to one arrival, expects ``tx_bytes`` and issues one box per ``TmaPlan.boxes``: shared
  address ``tile + offset``, the tensor map, the coordinates ``origin + offset`` *innermost dim
  first* (``TmaPlan.dims``), the mbarrier; every thread waits on parity 0.  A store: the boxes the
  other way, then ``cp.async.bulk.commit_group`` and ``wait_group.read 0``.
* mma: per ``MmaPlan.steps`` one instruction with the shape and types spelt out; wgmma: the
  accumulator registers in fragment order (``step.acc``), the descriptors (``ptx_model``'s encoding
  of the plan's LBO / SBO / swizzle with the slice's start address: tile + (warp offset ^ slice
  offset)), scale-d, imm-scale-a/b = 1 and, for 16-bit operands, imm-trans-a/b = MN-major; before
  them one ``wgmma.fence``, after them one ``wgmma.commit_group`` and ``wgmma.wait_group``
  ``ACC_READ_IN_FLIGHT`` (the harness reads the accumulator after ``wait_acc``: PTX allows that
  only once no group writing it is in flight);
  mma.sync: the A, B and C registers in fragment order.
* reduce: per butterfly round and result register one ``shfl.sync.bfly.b32`` (the round's mask,
  clamp 0x1f, full member mask, the register's bits before the round, zero-extended); with a warp
  stage, element by element (``element_accesses``: the compiler vectorises and reorders these
  plain C++ accesses): a block barrier, the writer's stores of its result registers, a block
  barrier, the loads of every partial, each with the bits its writer stored.
"""
from __future__ import annotations

import math

import numpy as np

from ll_codegen.core import f2
from ll_codegen.plan.mma import ACC_PTX, AB_BYTES, AB_TYPES
from ll_codegen.emit.harness_tiles import harness_origin
from ll_codegen.core.layout import layout_of
from ll_codegen.verify.emulate.reduce import emulate_reduce, result_elements
from ll_codegen.verify.emulate.reference import reduce_raw, reduce_values, regs_of
from ll_codegen.verify.ptx.expect import (BLOCK_BARRIER, FULL, WARP_CLAMP, PtxWants, Want, barrier, elements,
                                         event_bytes, generated_only, pack, through_wrappers)
from ll_codegen.verify.models.ptx_model import encode_descriptor
from ll_codegen.verify.ptx.ops import SMEM_WINDOW, Event
from ll_codegen.verify.ptx.sim import GLOBAL_BASE

TMA_LOAD = "cp.async.bulk.tensor.{r}d.shared::cluster.global.mbarrier::complete_tx::bytes"
TMA_STORE = "cp.async.bulk.tensor.{r}d.global.shared::cta.bulk_group"
MAP_ARG = 3                    # the TMA harness's tensor-map argument (verify/harness.py: TensorMapArgs)
#: wgmma groups that may stay in flight where the accumulator is read (PTX ISA "wgmma.wait_group":
#: the registers of a wgmma in flight may not be accessed): none
ACC_READ_IN_FLIGHT = 0
WGMMA_FENCE, WGMMA_COMMIT, WGMMA_WAIT = (f"wgmma.{x}.sync.aligned" for x in ("fence", "commit_group", "wait_group"))


def gather_wants(p, args, variant: str, lane: int, warp: int) -> tuple[list[Want], list[Want]]:
    w = p.elem_bytes
    src = elements(p.src_bases, args[0], p.num_warps, p.warp_size)[warp, lane]
    idx = elements(p.idx_bases, args[1], p.num_warps, p.warp_size)[warp, lane]
    vs = [int(i) & (p.axis_size - 1) for i in idx]                 # indices wrap modulo the axis
    if p.strategy == "shuffle":
        s = p.shuffle
        lp = min(int(math.log2(s.per)), len(s.select_bits))          # candidates packed per word
        per = 1 << lp if w < 4 else 1
        shfl = []
        for r, o in enumerate(s.outs):
            lane_src = s.lane(lane, warp) ^ f2.apply(s.v_lane, vs[r]) ^ o.lane
            for k in range(-(-len(o.cands) // per)):
                payload = pack([src[c] for c in o.cands[k * per:(k + 1) * per]], w)
                for h in range(s.words):
                    shfl.append(Want(("shfl.sync.idx.b32",), payload=payload[4 * h:4 * h + 4],
                                     prefix=len(payload) < 4, extra=(lane_src, WARP_CLAMP, FULL)))
        return [], shfl
    m = p.smem
    seq = [barrier("block")]
    if not (lane & m.lane_skip or warp & m.warp_skip):
        for a in m.stores:
            seq.append(Want(shared_ops("st", len(a.regs) * w), "shared",
                            SMEM_WINDOW + (m.store_base(lane, warp) ^ a.offset), pack([src[r] for r in a.regs], w)))
    seq.append(barrier("block"))
    for r, off in enumerate(m.load_offsets):
        addr = SMEM_WINDOW + (m.load_base(lane, warp) ^ off ^ f2.apply(m.v_offset, vs[r]))
        seq.append(Want(shared_ops("ld", w), "shared", addr))
    return seq, []


def shared_ops(kind: str, n: int) -> tuple[str, ...]:
    """Every spelling of an n-byte shared access nvcc picks for plain C++ (any integer type,
    scalar or vector)."""
    out = []
    for total, parts in ((n, 1), (n // 2, 2), (n // 4, 4)):
        if total in (1, 2, 4, 8) and total * parts == n:
            v = f".v{parts}" if parts > 1 else ""
            out += [f"{kind}.shared{v}.{t}{8 * total}" for t in ("u", "b", "s", "f")]
    return tuple(out)


def tma_wants(p, args, variant: str, lane: int, warp: int) -> tuple[list[Want], list[Want]]:
    t = p.tma
    rank = len(p.shape)
    origin = harness_origin(p.shape, t.order[0], p.elem_bytes) if variant else (0,) * rank
    bar, tile, tmap = SMEM_WINDOW + t.bytes, SMEM_WINDOW, GLOBAL_BASE * (MAP_ARG + 1)

    def coords(c) -> tuple[int, ...]:
        return tuple(origin[d] + c[d] for d in t.dims)               # innermost first
    tid = warp * p.warp_size + lane
    if variant == "_store":
        seq = [Want(("fence.proxy.async.shared::cta",))]
        if tid == 0:
            seq += [Want(BLOCK_BARRIER, extra=(0,)), Want(("fence.proxy.async.shared::cta",))]
            seq += [Want((TMA_STORE.format(r=rank),), extra=((tmap, coords(c)), tile + off)) for off, c in t.boxes]
            seq += [Want(("cp.async.bulk.commit_group",)), Want(("cp.async.bulk.wait_group.read",), extra=(0,))]
        return seq, []
    seq = []
    if tid == 0:
        seq += [Want(("mbarrier.init.shared::cta.b64",), extra=(bar, 1)), Want(("fence.mbarrier_init.release.cluster",)),
                Want(BLOCK_BARRIER, extra=(0,)),
                Want(("mbarrier.arrive.expect_tx.shared::cta.b64",), extra=(None, bar, t.tx_bytes))]
        seq += [Want((TMA_LOAD.format(r=rank),), extra=(tile + off, (tmap, coords(c)), bar)) for off, c in t.boxes]
    seq.append(Want(("mbarrier.try_wait.parity.shared::cta.b64",), extra=(True, bar, 0)))
    return seq, []


def mma_wants(p, args, variant: str, lane: int, warp: int) -> tuple[list[Want], list[Want]]:
    ab, acc_t = AB_TYPES[p.dtype][0], ACC_PTX[p.acc_dtype]
    at = AB_TYPES[p.a_type][0]                       # A's PTX type: B's but for the 8-bit pairs (e4m3 x e5m2, ...)
    M, N, K = p.instr_shape
    acc0 = elements(p.acc_layout, args[2], p.num_warps, p.warp_size)[warp, lane]     # the initial accumulator
    if getattr(p, "acc_per_reg", 1) == 2:          # f16: register r packs elements 2r (low half), 2r + 1
        acc0 = (acc0[0::2] & 0xffff) | (acc0[1::2] & 0xffff) << 16
    seq = []
    if p.kind == "wgmma":
        op = f"wgmma.mma_async.sync.aligned.m{M}n{N}k{K}.{acc_t}.{at}.{ab}"
        a_off = 0
        b_off = -(-p.a.bytes // p.b.align) * p.b.align if p.a.space == "shared" else 0
        seq.append(Want((WGMMA_FENCE,)))
        for s in p.steps:
            accs = tuple(acc0[list(s.acc)].tolist())      # the interpreter leaves wgmma's results out
            a = desc(p.a, SMEM_WINDOW + a_off, s.a[0], lane, warp) if p.a.space == "shared" else \
                tuple(int(x) for x in operand_words(p, "a", args, lane, warp)[list(s.a)])
            b = desc(p.b, SMEM_WINDOW + b_off, s.b[0], lane, warp)
            seq.append(Want((op,), extra=(accs, a, b, True) + immediates(p)))
        return seq + [Want((WGMMA_COMMIT,)), Want((WGMMA_WAIT,), extra=(ACC_READ_IN_FLIGHT,))], []
    op = f"mma.sync.aligned.m{M}n{N}k{K}.row.col.{acc_t}.{at}.{ab}.{acc_t}"
    a_words, b_words = operand_words(p, "a", args, lane, warp), operand_words(p, "b", args, lane, warp)
    for s in p.steps:
        accs = tuple(acc0[list(s.acc)].tolist())
        seq.append(Want((op,), extra=(accs, tuple(int(a_words[i]) for i in s.a),
                                      tuple(int(b_words[i]) for i in s.b), accs)))
    return seq, []


def immediates(p) -> tuple[int, ...]:
    """wgmma's immediates after scale-d (PTX ISA "wgmma.mma_async"): none for integer types;
    imm-scale-a, imm-scale-b = 1 (no negation) for floating-point ones; then for .f16 / .bf16
    imm-trans-a (only with A in shared memory) and imm-trans-b, 1 for an MN-major operand."""
    if p.dtype in ("i8", "u8"):
        return ()
    if AB_BYTES[p.dtype] != 2:
        return (1, 1)
    trans_a = (int(not p.a.descriptor.k_major),) if p.a.space == "shared" else ()
    return (1, 1) + trans_a + (int(not p.b.descriptor.k_major),)


def desc(op, tile: int, start: int, lane: int, warp: int) -> int:
    """The descriptor of a slice at byte ``start`` of the tile at ``tile`` as this thread's warp
    reads it (``ptx_model.encode_descriptor``, written from the PTX ISA)."""
    d = op.descriptor
    off = op.warp_offset(lane, warp) ^ start if op.warp_offset is not None else start
    return encode_descriptor(tile + off, d.lbo_bytes, d.sbo_bytes, d.swizzle_bytes, d.base_offset)


def operand_words(p, which: str, args, lane: int, warp: int) -> np.ndarray:
    """A register operand's 32-bit words as the harness packs them (element r in word r e / 4,
    lowest first)."""
    op = getattr(p, which)
    e = AB_BYTES[p.dtype]
    vals = elements(op.layout, args[0 if which == "a" else 1], p.num_warps, p.warp_size)[warp, lane]
    blob = pack([int(v) for v in vals], e)
    return np.frombuffer(blob.ljust(4 * op.regs, b"\0"), dtype="<u4").astype(np.int64)


def _mma_instruction(e) -> bool:
    return e.op.startswith(("wgmma.", "mma.sync"))


# ------------------------------------------------------------------ reduce
_REDUCE_TRACE: list = []          # (plan, input array, result layout's elements, trace): the last one computed


def _reduce_trace(p, flat) -> tuple[np.ndarray, list]:
    """(result element of every (warp, lane, register), the emulator's trace of ``p`` on the
    row-major raw input ``flat``), computed once per harness run."""
    if _REDUCE_TRACE and _REDUCE_TRACE[0] is p and _REDUCE_TRACE[1] is flat:
        return _REDUCE_TRACE[2], _REDUCE_TRACE[3]
    src = regs_of(layout_of(p.src_bases), reduce_values(np.asarray(flat).reshape(p.shape), p.dtype))
    trace: list = []
    emulate_reduce(p, src, trace)
    e = result_elements(p)
    _REDUCE_TRACE[:] = [p, flat, e, [reduce_raw(t, p.dtype) for t in trace]]
    return e, _REDUCE_TRACE[3]


def element_op(kind: str, w: int) -> str:
    """The opcode ``element_accesses`` gives one element's access of a plain shared ld / st."""
    return f"{kind}.shared.b{8 * w}"


def element_accesses(events: list, p) -> list:
    """A thread's events with every shared ld / st split into one event per element (``element_op``,
    its address, its bits) and, between two barriers, those sorted by kind and address: the plain
    C++ accesses of a reduction's warp stage may be vectorised (``st.shared.v4.u32`` of eight
    halves) and reordered by the compiler; what is compared is every element's address and bits
    and the barriers between them."""
    w = p.elem_bytes
    out, seg = [], []

    def flush():
        out.extend(sorted(seg, key=lambda e: (e.op, e.addr)))
        seg.clear()
    for e in events:
        kind = e.op.split(".")[0]
        if e.space == "shared" and kind in ("ld", "st"):
            blob = event_bytes(e)
            seg.extend(Event(element_op(kind, w), e.asm, "shared", e.addr + i,
                             (int.from_bytes(blob[i:i + w], "little"),), (), e.line) for i in range(0, len(blob), w))
            continue
        if e.op in BLOCK_BARRIER or e.op == "bar.warp.sync":
            flush()
        out.append(e)
    flush()
    return out


def reduce_wants(p, args, variant: str, lane: int, warp: int) -> tuple[list[Want], list[Want]]:
    """One thread of a reduction's harness: per butterfly round and result register a
    ``shfl.sync.bfly.b32`` with the round's lane mask, clamp 0x1f, the full member mask and the
    register's bits (zero-extended to the word) before the round; with a warp stage, in element
    form (``element_accesses``): a block barrier, the stores of its result registers at scratch
    element ``k * outputs + e`` (only where ``lane & lane_skip`` and ``warp & warp_skip`` are 0),
    a block barrier, the loads of the ``parts`` partials of each result register, each with the
    bits its writer stored -- or, in the spread form, the loads of the partials of the outputs the
    thread combines and the stores of their results, a block barrier, the loads of its results
    (``_spread_wants``)."""
    w = p.elem_bytes
    e, trace = _reduce_trace(p, args[0])
    shfl = []
    for i, x in enumerate(p.lane_xors):
        for j in range(p.n_dst):
            payload = pack([int(trace[i][warp, lane, j])], w).ljust(4, b"\0")
            shfl.append(Want(("shfl.sync.bfly.b32",), payload=payload, extra=(x, WARP_CLAMP, FULL)))
    m = p.warps
    if m is None:
        return [], shfl
    final = trace[len(p.lane_xors)]                      # what the warp stage stores

    def k_of(wp: int) -> int:
        return sum(((wp >> b) & 1) << i for i, b in enumerate(m.warp_bits))

    def at(k: int, j: int) -> int:
        return SMEM_WINDOW + (k * m.outputs + int(e[warp, lane, j])) * w
    seq = [barrier("block", m.named_barrier)]
    if not (lane & m.lane_skip or warp & m.warp_skip):
        stores = [(at(k_of(warp), j), int(final[warp, lane, j])) for j in range(p.n_dst)]
        seq += [Want((element_op("st", w),), "shared", a, pack([v], w)) for a, v in sorted(stores)]
    seq.append(barrier("block", m.named_barrier))
    red = sum(1 << b for b in m.warp_bits)
    loads = []
    for k in range(m.parts):
        src_warp = (warp & ~red) | sum(((k >> i) & 1) << b for i, b in enumerate(m.warp_bits))
        loads += [(at(k, j), int(final[src_warp, lane, j])) for j in range(p.n_dst)]
    if m.spread:
        seq += _spread_wants(p, m, e, final, trace[-1], warp * p.warp_size + lane, warp, lane, w)
        return seq, shfl
    seq += [Want((element_op("ld", w),), "shared", a, pack([v], w)) for a, v in sorted(loads)]
    return seq, shfl


def _spread_wants(p, m, e, final, results, tid: int, warp: int, lane: int, w: int) -> list[Want]:
    """The spread form after the partials' barrier: thread ``tid`` loads the ``parts`` partials of
    each of its outputs ``o = tid, tid + stride, ...`` (each with the bits its writer stored) and
    stores the result at ``results + o``; a block barrier; it loads its ``n_dst`` results."""
    ee = np.asarray(e).reshape(-1)
    fin = np.asarray(final).reshape(-1)
    writer = np.broadcast_to(((np.arange(p.num_warps)[:, None, None] & m.warp_skip) == 0)
                             & ((np.arange(p.warp_size)[None, :, None] & m.lane_skip) == 0), np.shape(e)).reshape(-1)
    wp = np.broadcast_to(np.arange(p.num_warps)[:, None, None], np.shape(e)).reshape(-1)
    k = sum(((wp >> b) & 1) << i for i, b in enumerate(m.warp_bits))
    part = {}                                              # scratch element -> the partial's bits stored there
    for s, v in zip((k * m.outputs + ee)[writer].tolist(), fin[writer].tolist()):
        part[s] = v
    res = {}                                               # output -> its result's bits
    for o, v in zip(ee.tolist(), np.asarray(results).reshape(-1).tolist()):
        res[o] = v

    def at(slot: int) -> int:
        return SMEM_WINDOW + slot * w
    loads, stores = [], []
    for o in range(tid, m.outputs, m.stride):
        loads += [(at(q * m.outputs + o), part[q * m.outputs + o]) for q in range(m.parts)]
        stores.append((at(m.results + o), res[o]))
    seq = [Want((element_op("ld", w),), "shared", a, pack([v], w)) for a, v in sorted(loads)]
    seq += [Want((element_op("st", w),), "shared", a, pack([v], w)) for a, v in sorted(stores)]
    seq.append(barrier("block", m.named_barrier))
    mine = sorted((at(m.results + int(e[warp, lane, j])), int(results[warp, lane, j])) for j in range(p.n_dst))
    return seq + [Want((element_op("ld", w),), "shared", a, pack([v], w)) for a, v in mine]


GATHER_PTX = PtxWants(gather_wants, generated_only, False, plain_loads=True)
REDUCE_PTX = PtxWants(reduce_wants, generated_only, False, normalise=element_accesses)
TMA_PTX = PtxWants(tma_wants, through_wrappers, True)
MMA_PTX = PtxWants(mma_wants, _mma_instruction, False)
