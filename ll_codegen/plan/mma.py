"""The MMA of one CTA tile (``llgen mma``): ``acc += A @ B`` as the instructions every thread issues.

A is M x K, B is K x N and the accumulator M x N, each given as a layout: the accumulator a
``nvidia_mma`` layout (v3: Hopper ``wgmma.mma_async``; v2: ``mma.sync``), A a shared tile or
``dot_operand`` registers, B a shared tile (wgmma) or ``dot_operand`` registers (mma.sync).

Fragments.  The registers one instruction reads or writes are themselves a layout of the library:
the accumulator of a single instruction is ``nvidia_mma`` with one instruction tile (v3, 4 warps,
64 x n: wgmma's D fragment; v2, 1 warp, 16 x 8: mma.sync's C fragment) and its operands are that
layout's ``dot_operand``\\ s.  A user's register layout *holds* an instruction when, on the
registers of that instruction, it equals the fragment translated to the instruction's origin.
``fragment_instructions`` finds, for every thread and fragment element, the user register holding
it and requires the answer to be the same for every thread of the instruction (a register index is
a compile-time name); the warps beyond one instruction move its origin linearly.

Descriptors (wgmma, PTX ISA "Matrix Descriptor Format" and "Shared Memory Matrix Layout").  wgmma
reads a shared operand slice (rows = M for A, N for B, by the instruction's K) at the addresses a
canonical layout gives, then applies the swizzle to the address bits (``swizzle``, a span of S
bytes: bits 4.. ^= bits 7..).  With T = 16 / elem_bytes elements per 16-byte chunk, in bytes:

=========  =========  ===========================================================================
major      swizzle    unswizzled address of element (r, k), r along M/N
=========  =========  ===========================================================================
K          none       start + (r % 8) * 16 + (r // 8) * SBO + (k % T) * e + (k // T) * LBO
K          S          start + (r % 8) * S + (r // 8) * SBO + k * e            (LBO unused: 16)
MN         none       start + (r % T) * e + (r // T) * SBO + (k % 8) * 16 + (k // 8) * LBO
MN         S          start + (r % (S/e)) * e + (r // (S/e)) * LBO + (k % 8) * S + (k // 8) * SBO
=========  =========  ===========================================================================

``descriptor_of`` reads start, LBO and SBO off the slice's own offsets (the images of rows 8 or T
or S/e and of k 8 or T) and accepts the first (major, swizzle) whose formula reproduces every
element of the slice.  The tile must start on the swizzle pattern's repeat (8 S bytes, the header's
alignment), so swizzling tile offsets equals swizzling absolute addresses.  The independent check
is ``verify/ptx_model.py``, written from the PTX ISA, and the GPU.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from ll_codegen.core.dtypes import DTYPE_BYTES
from ll_codegen.core.layout import LinearLayout
from ll_codegen.core.target import Target, get_target
from ll_codegen.layouts.dot_operand import DotOperandLayout
from ll_codegen.layouts.nvidia import NVMMADistributedLayout
from ll_codegen.plan.model import XorForm
from ll_codegen.plan.tma import swizzle, tile_alignment

#: operand dtype -> (PTX type, accumulator dtypes allowed, wgmma may read it MN-major)
#: (f16 accumulators, which the instructions also offer, are not generated yet)
AB_TYPES = {"f16": ("f16", ("f32",), True), "bf16": ("bf16", ("f32",), True),
            "tf32": ("tf32", ("f32",), False), "f8e4m3": ("e4m3", ("f32",), False),
            "f8e5m2": ("e5m2", ("f32",), False), "i8": ("s8", ("i32",), False),
            "u8": ("u8", ("i32",), False)}
ACC_PTX = {"f32": "f32", "f16": "f16", "i32": "s32"}
#: bytes of an element in shared memory / registers (tf32 is stored as f32)
AB_BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "f8e4m3": 1, "f8e5m2": 1, "i8": 1, "u8": 1}
SWIZZLE_MODE = {0: 0, 128: 1, 64: 2, 32: 3}     # descriptor bits 62-63


class MmaError(ValueError):
    """A layout or type the instruction cannot use; the message is one line naming the reason."""


@dataclass(frozen=True)
class Descriptor:
    """How wgmma reads one shared operand (the fields of its 64-bit matrix descriptor but the start).

    ``base_offset`` is 0: wgmma then applies the swizzle to the absolute address of every element,
    whatever the start (measured on an H200: a start moved by 32, 128 or 256 bytes reads correctly
    with base offset 0; base offset b reads the pattern's row as ``(addr >> 7) - b``).  Tiles start
    on the pattern's repeat (``kTileAlign``), so the tile's own offsets are what the swizzle sees."""
    swizzle_bytes: int
    lbo_bytes: int
    sbo_bytes: int
    k_major: bool
    base_offset: int = 0

    def fields(self) -> int:
        """The descriptor without its start address: LBO >> 4 at bit 16, SBO >> 4 at bit 32, the
        base offset at bit 49, the swizzle mode at bit 62."""
        return ((self.lbo_bytes >> 4) << 16 | (self.sbo_bytes >> 4) << 32 | self.base_offset << 49
                | SWIZZLE_MODE[self.swizzle_bytes] << 62)

    def bits(self, start: int) -> int:
        """The whole descriptor for an operand slice starting at shared byte address ``start``."""
        return self.fields() | (start & 0x3FFFF) >> 4


@dataclass(frozen=True)
class Operand:
    """Operand A or B: in ``registers`` (``regs`` 32-bit words per thread) or ``shared`` (a tile of
    ``bytes`` bytes aligned to ``align``, read through ``descriptor``; ``warp_offset``: the byte
    offset the thread's warp adds to every slice, ``tile``: offset -> coordinate bases)."""
    space: str
    layout: dict[str, Any]
    regs: int = 0
    descriptor: Descriptor | None = None
    bytes: int = 0
    align: int = 16
    warp_offset: XorForm | None = None


@dataclass(frozen=True)
class MmaStep:
    """One instruction: the accumulator registers in fragment order, and per operand either its
    register words in fragment order or ``(byte offset of the slice in its tile,)`` (shared)."""
    acc: tuple[int, ...]
    a: tuple[int, ...]
    b: tuple[int, ...]


@dataclass(frozen=True)
class MmaPlan:
    """``acc += A @ B`` for one CTA tile: ``steps`` in issue order (k-steps outermost)."""
    kind: str                          # wgmma | mma.sync
    instr: str                         # the PTX instruction
    dtype: str
    acc_dtype: str
    target: str
    arch: str
    warp_size: int
    num_warps: int
    shape: tuple[int, int, int]        # M, N, K of the tile
    instr_shape: tuple[int, int, int]
    acc_layout: dict[str, Any]
    acc_regs: int
    a: Operand
    b: Operand
    steps: tuple[MmaStep, ...]

    @property
    def operation(self) -> str:
        return "mma"

    @property
    def strategy(self) -> str:
        """The instruction family (``wgmma`` or ``mma.sync``), as other plans name their strategy."""
        return self.kind

    @property
    def threads(self) -> int:
        return self.warp_size * self.num_warps

    @property
    def elem_bytes(self) -> int:
        return AB_BYTES[self.dtype]

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory of the harness: the shared operand tiles, each at its alignment,
        and 1024 bytes of slack to align the first (a dynamic buffer is only 16-byte aligned)."""
        total = 0
        for op in (self.a, self.b):
            if op.space == "shared":
                total = -(-total // op.align) * op.align + op.bytes
        return total + 1024 if total else 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["operation"] = "mma"
        return d

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)


# ------------------------------------------------------------------ fragments
def fragment_layouts(kind: str, n: int, k: int, k_width: int) -> tuple[LinearLayout, LinearLayout, LinearLayout]:
    """(accumulator, A, B) register layouts of ONE instruction, as the layout library defines them."""
    if kind == "wgmma":
        acc = NVMMADistributedLayout(version=(3, 0), warps_per_cta=(4, 1), instr_shape=(16, n, k))
        a = DotOperandLayout(0, acc, k_width)
        return acc.to_linear([64, n]), a.to_linear([64, k]), LinearLayout.empty()
    acc = NVMMADistributedLayout(version=(2, 0), warps_per_cta=(1, 1), instr_shape=(16, 8))
    return (acc.to_linear([16, 8]), DotOperandLayout(0, acc, k_width).to_linear([16, k]),
            DotOperandLayout(1, acc, k_width).to_linear([k, 8]))


def _coords(L: LinearLayout) -> np.ndarray:
    """(registers, lanes, warps, 2) array: the (dim0, dim1) coordinate each register of each thread holds."""
    if "block" in L.in_dims and L.in_dim_size("block") > 1:
        raise MmaError("the layout spans several CTAs; give the layout of one CTA")
    ins = [d for d in L.in_dims if d != "block"]
    if ins != [d for d in ("register", "lane", "warp") if d in ins] or L.out_dims != ["dim0", "dim1"]:
        raise MmaError("expected a rank-2 register layout (register, lane, warp -> dim0, dim1)")
    sizes = [L.in_dim_size(d) if d in ins else 1 for d in ("register", "lane", "warp")]
    pts = L.apply_all()[: int(np.prod(sizes))]          # first input dim in the low bits
    return pts.reshape(sizes[2], sizes[1], sizes[0], 2).transpose(2, 1, 0, 3)


def fragment_instructions(user: LinearLayout, frag: LinearLayout, group: int, what: str,
                          word: int = 1) -> tuple[dict[tuple[int, ...], tuple[int, ...]], list[tuple[int, int]]]:
    """The instructions a register layout ``user`` holds, each as ``origin (for warp group 0) ->
    the user's registers in fragment order`` (``word`` > 1: 32-bit words of ``word`` elements),
    and the origin's shift per warp bit (a warp group is ``group`` warps; bits within it add none).
    Raises ``MmaError`` when some thread does not hold the fragment or threads disagree."""
    C, F = _coords(user), _coords(frag)
    tile = [frag.out_dim_size(d) for d in frag.out_dims]
    nreg, lanes, warps = C.shape[:3]
    if F.shape[1] != lanes:
        raise MmaError(f"{what}: {lanes} lanes per warp; the instruction needs {F.shape[1]}")
    if warps % group:
        raise MmaError(f"{what}: {warps} warps are no whole number of {group}-warp groups")
    local = {}                                       # (lane, warp in group, coordinate) -> fragment index
    for i in range(F.shape[0]):
        for lane in range(lanes):
            for w in range(group):
                local.setdefault((lane, w, *F[i, lane, w]), i)
    per_group: list[dict[tuple[int, ...], tuple[int, ...]]] = []
    for g in range(warps // group):
        found: dict[tuple[int, ...], list[int]] | None = None
        for w in range(group):
            for lane in range(lanes):
                mine: dict[tuple[int, ...], list[int]] = {}
                for r in range(nreg):
                    c = C[r, lane, g * group + w]
                    origin = (int(c[0]) // tile[0] * tile[0], int(c[1]) // tile[1] * tile[1])
                    i = local.get((lane, w, int(c[0]) - origin[0], int(c[1]) - origin[1]))
                    if i is None:
                        raise MmaError(f"{what}: register {r} of lane {lane}, warp {g * group + w} holds "
                                       f"({int(c[0])}, {int(c[1])}), which the instruction's fragment puts in "
                                       f"another thread")
                    regs = mine.setdefault(origin, [-1] * F.shape[0])
                    if regs[i] < 0:
                        regs[i] = r
                if any(-1 in v for v in mine.values()):
                    raise MmaError(f"{what}: lane {lane}, warp {g * group + w} lacks part of an instruction's "
                                   f"fragment")
                if found is None:
                    found = mine
                elif found != mine:
                    raise MmaError(f"{what}: threads of one instruction hold its fragment in different registers")
        per_group.append({o: tuple(v) for o, v in found.items()})
    base = per_group[0]
    shifts = []
    for b in range((warps // group).bit_length() - 1):
        g = 1 << b
        moved = {tuple(v): o for o, v in per_group[g].items()}
        d = {(o[0] ^ moved[v][0], o[1] ^ moved[v][1]) for o, v in base.items() if v in moved}
        if len(d) != 1 or len(moved) != len(base):
            raise MmaError(f"{what}: warp group {g} holds other registers than warp group 0")
        shifts.append(d.pop())
    for g in range(len(per_group)):
        for o, v in base.items():
            sh = [0, 0]
            for b, s in enumerate(shifts):
                if g >> b & 1:
                    sh = [sh[0] ^ s[0], sh[1] ^ s[1]]
            if per_group[g].get((o[0] ^ sh[0], o[1] ^ sh[1])) != v:
                raise MmaError(f"{what}: the warp groups' instructions do not move linearly with the warp")
    if word > 1:
        base = {o: _words(v, word, what) for o, v in base.items()}
    return base, shifts


def _words(regs: tuple[int, ...], word: int, what: str) -> tuple[int, ...]:
    """Fragment elements ``regs`` as 32-bit words: elements 2w, 2w+1 (for word=2) must be the
    registers of one word of the user's layout, in order."""
    out = []
    for j in range(0, len(regs), word):
        chunk = regs[j:j + word]
        if chunk[0] % word or any(r != chunk[0] + t for t, r in enumerate(chunk)):
            raise MmaError(f"{what}: registers {list(chunk)} form one word of the instruction but not of the layout")
        out.append(chunk[0] // word)
    return tuple(out)


# ----------------------------------------------------------------- descriptors
def tile_offsets(tile: LinearLayout) -> np.ndarray:
    """(rows, cols) array of each element's offset (elements) in a bijective rank-2 shared tile."""
    sizes = [tile.out_dim_size(d) for d in tile.out_dims]
    coords = tile.apply_all()
    out = np.full(sizes, -1, dtype=np.int64)
    n = tile.in_dim_size("offset")
    out[coords[:n, 0], coords[:n, 1]] = np.arange(n)
    if (out < 0).any():
        raise MmaError("the shared tile does not hold every element of its shape")
    return out


def descriptor_of(addr: np.ndarray, e: int, allow_mn: bool, what: str) -> tuple[Descriptor, int]:
    """(descriptor, start) under which wgmma reads the byte offsets ``addr`` (rows by K, as stored,
    swizzle included) -- the first canonical layout of the module table that matches."""
    R, K = addr.shape
    r = np.arange(R)[:, None]
    k = np.arange(K)[None, :]
    T = 16 // e
    mn_seen = False
    for k_major in (True, False):
        for span in (128, 64, 32, 0):
            u = np.vectorize(lambda a: swizzle(int(a), span))(addr) if span else addr
            start = int(u[0, 0])
            at = (lambda i, j: int(u[i, j]) - start if i < R and j < K else 0)
            if k_major:
                sbo = at(8, 0)
                if span:
                    lbo = 16
                    want = start + (r % 8) * span + (r // 8) * sbo + k * e
                else:
                    lbo = at(0, T)
                    want = start + (r % 8) * 16 + (r // 8) * sbo + (k % T) * e + (k // T) * lbo
            else:
                if span:
                    row = span // e
                    lbo, sbo = at(row, 0), at(0, 8)
                    want = start + (r % row) * e + (r // row) * lbo + (k % 8) * span + (k // 8) * sbo
                else:
                    lbo, sbo = at(0, 8), at(T, 0)
                    want = start + (r % T) * e + (r // T) * sbo + (k % 8) * 16 + (k // 8) * lbo
            if not np.array_equal(want, u) or start % 16 or any(x < 0 or x % 16 or x >= 1 << 18 for x in (lbo, sbo)):
                continue
            if not k_major and not allow_mn:
                mn_seen = True
                continue
            return Descriptor(span, lbo, sbo, k_major), start
    if mn_seen:
        raise MmaError(f"{what}: the tile is MN-major; wgmma reads {what.split()[0]} MN-major only for 16-bit "
                       f"types (8-bit and tf32 operands must be K-major)")
    raise MmaError(f"{what}: no wgmma canonical layout (K- or MN-major, swizzle 128/64/32 B or none) holds the "
                   f"shared tile's offsets")


# -------------------------------------------------------------------- planner
def plan_mma(acc: LinearLayout, a: LinearLayout, b: LinearLayout, a_space: str, b_space: str, version: int,
             dtype: str = "f16", acc_dtype: str = "f32", target: Target | str = "cuda",
             arch: str | None = None) -> MmaPlan:
    """Plan ``acc += A @ B``: ``acc`` (M x N) the accumulator's layout (``version`` 3 = wgmma, 2 =
    mma.sync), ``a`` (M x K) and ``b`` (K x N) register layouts or shared tiles (``*_space``).
    Raises ``MmaError`` (one line) for what the instruction cannot do."""
    if isinstance(target, str):
        target = get_target(target, arch)
    if not target.is_cuda:
        raise MmaError("llgen mma generates NVIDIA wgmma and mma.sync; AMD mfma is not generated yet")
    if dtype not in AB_TYPES:
        raise MmaError(f"--dtype {dtype}: the MMA operand types are {', '.join(AB_TYPES)}")
    ptx_ab, accs, mn_ok = AB_TYPES[dtype]
    if acc_dtype not in accs:
        raise MmaError(f"--acc-dtype {acc_dtype}: {dtype} operands accumulate in {' or '.join(accs)}")
    e = AB_BYTES[dtype]
    M, N = (acc.out_dim_size(d) for d in acc.out_dims)
    Ma, K = (a.out_dim_size(d) for d in a.out_dims)
    Kb, Nb = (b.out_dim_size(d) for d in b.out_dims)
    if (Ma, Kb, Nb) != (M, K, N):
        raise MmaError(f"shapes do not chain: A {Ma}x{K}, B {Kb}x{Nb}, acc {M}x{N}")
    k_i = 32 // e
    if K % k_i:
        raise MmaError(f"K = {K} is not a multiple of the instruction's K ({k_i} for {dtype})")
    kw = max(1, 4 // e)
    if version == 3:
        if not target.has_hopper_async:
            raise MmaError("wgmma needs --arch sm_90a")
        if b_space != "shared":
            raise MmaError("wgmma reads B from shared memory; give a shared layout for --b")
        n_i = _wgmma_n(acc)
        kind, group = "wgmma", 4
    else:
        if a_space != "registers" or b_space != "registers":
            raise MmaError("mma.sync reads A and B from registers; give dot_operand layouts")
        if dtype.startswith("f8") and target.arch in ("sm_80", "sm_86"):
            raise MmaError(f"fp8 mma.sync needs sm_89 or newer (--arch {target.arch})")
        n_i, kind, group = 8, "mma.sync", 1
    acc_frag, a_frag, b_frag = fragment_layouts(kind, n_i, k_i, kw)
    acc_word = 2 if acc_dtype == "f16" else 1
    acc_ins, acc_shift = fragment_instructions(acc, acc_frag, group, "the accumulator", acc_word)
    warps = acc.in_dim_size("warp") if "warp" in acc.in_dims else 1
    operands, fetch = {}, {}
    for name, L, space, frag, rows_first in (("a", a, a_space, a_frag, True), ("b", b, b_space, b_frag, False)):
        what = f"{name.upper()} operand"
        if space == "registers":
            ins, shift = fragment_instructions(L, frag, group, what, max(1, 4 // e))
            operands[name] = Operand("registers", _bases(L), regs=L.in_dim_size("register") * e // 4)
            fetch[name] = _register_fetch(ins, shift, acc_shift, rows_first, what)
        else:
            rows = 64 if name == "a" else n_i
            operands[name], fetch[name] = _shared_operand(L, e, rows_first, rows, mn_ok, acc_shift, group, warps,
                                                          what)
    steps = []
    for s in range(K // k_i):
        for origin, regs in sorted(acc_ins.items(), key=lambda kv: kv[1]):
            steps.append(MmaStep(regs, fetch["a"](origin[0], s * k_i), fetch["b"](origin[1], s * k_i)))
    for name in ("a", "b"):
        if operands[name].space == "shared":
            operands[name] = replace(operands[name], descriptor=next(iter(fetch[name].descriptors)))
    m_i = 64 if kind == "wgmma" else 16
    if kind == "wgmma":
        instr = (f"wgmma.mma_async.sync.aligned.m64n{n_i}k{k_i}.{ACC_PTX[acc_dtype]}.{ptx_ab}.{ptx_ab}")
    else:
        instr = (f"mma.sync.aligned.m16n8k{k_i}.row.col.{ACC_PTX[acc_dtype]}.{ptx_ab}.{ptx_ab}."
                 f"{ACC_PTX[acc_dtype]}")
    return MmaPlan(kind, instr, dtype, acc_dtype, target.name, target.arch, target.warp_size, warps, (M, N, K),
                   (m_i, n_i, k_i), _bases(acc), acc.in_dim_size("register"), operands["a"], operands["b"],
                   tuple(steps))


def _wgmma_n(acc: LinearLayout) -> int:
    """wgmma's N: the extent of the accumulator's contiguous register run along N in one warp
    (registers 0, then the bases that move along dim 1 only, from (0, 1) doubling, after the 8-row one)."""
    regs = acc.bases.get("register", [])
    if len(regs) < 2 or regs[0] != [0, 1] or regs[1] != [8, 0]:
        raise MmaError("the accumulator is no wgmma fragment (registers must start (0, 1), (8, 0))")
    n = 8
    for bvec in regs[2:]:
        if bvec != [0, n] or n == 256:
            break
        n *= 2
    return n


def _bases(L: LinearLayout) -> dict[str, Any]:
    return {"in_dims": L.bases, "out_dims": L.out_dim_sizes}


def _register_fetch(ins, shift, acc_shift, rows_first: bool, what: str):
    """Operand registers for the instruction at (outer coordinate, k0): A's origin is (m0, k0), B's (k0, n0)."""
    if [s[0 if rows_first else 1] for s in shift] != [s[0 if rows_first else 1] for s in acc_shift]:
        raise MmaError(f"{what}: its warps do not hold the rows/columns of the accumulator's warps")
    def fetch(outer: int, k0: int) -> tuple[int, ...]:
        key = (outer, k0) if rows_first else (k0, outer)
        if key not in ins:
            raise MmaError(f"{what}: no registers hold the instruction tile at {key}")
        return ins[key]
    return fetch


def _shared_operand(tile: LinearLayout, e: int, rows_first: bool, rows: int, mn_ok: bool, acc_shift,
                    group: int, warps: int, what: str):
    """Operand in shared memory: the ``Operand`` (descriptor still unset) and ``fetch(outer, k0) ->
    (slice byte offset,)``; every slice must be read under one descriptor, which ``fetch.descriptors``
    collects."""
    offs = tile_offsets(tile) * e
    k_i = 32 // e
    # warp groups move A's rows (B's columns) by the accumulator's shift: the byte offset is linear in it
    warp_coefs = [0] * (warps.bit_length() - 1)
    for b, s in enumerate(acc_shift):
        c = s[0] if rows_first else s[1]
        warp_coefs[b + group.bit_length() - 1] = int(offs[c, 0] if rows_first else offs[0, c])
    descriptors: set[Descriptor] = set()

    def fetch(outer: int, k0: int) -> tuple[int]:
        addr = offs[outer:outer + rows, k0:k0 + k_i] if rows_first else offs[k0:k0 + k_i, outer:outer + rows].T
        desc, start = descriptor_of(addr, e, mn_ok, what)
        descriptors.add(desc)
        if len(descriptors) > 1:
            raise MmaError(f"{what}: the swizzle atom does not repeat (its slices need different descriptors)")
        return (start,)

    fetch.descriptors = descriptors
    op = Operand("shared", _bases(tile), bytes=int(offs.size * e), align=tile_alignment(tile, e),
                 warp_offset=XorForm((), tuple(warp_coefs)))
    return op, fetch
