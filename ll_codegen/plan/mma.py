"""The MMA of one CTA tile (``llgen mma``): ``acc += A @ B`` as the instructions every thread issues.

A is M x K, B is K x N and the accumulator M x N, each given as a layout: the accumulator an
``nvidia_mma`` layout (v3: Hopper ``wgmma.mma_async``; v2: ``mma.sync``), A a shared tile or
``dot_operand`` registers, B a shared tile (wgmma) or ``dot_operand`` registers (mma.sync).

Fragments (``plan/mma_fragments.py``): the registers one instruction reads or writes are the
library's one-instruction layouts -- v3, 4 warps, 64 x n: wgmma's D fragment; v2, 1 warp, 16 x 8:
mma.sync's C fragment -- and their ``dot_operand``\\ s; a user's register layout must hold them.
AMD MFMA (``--target hip``) is planned in ``plan/mfma.py``; ``plan_mma`` dispatches by target.

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
is ``verify/models/ptx_model.py``, written from the PTX ISA, and the GPU.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np

from ll_codegen.core.layout import LinearLayout, layout_of
from ll_codegen.core.target import Target, get_target
from ll_codegen.layouts.dot_operand import DotOperandLayout
from ll_codegen.layouts.nvidia import NVMMADistributedLayout
from ll_codegen.plan.mfma import plan_mfma
from ll_codegen.plan.mma_fragments import bases, fragment_instructions, operand_from_accumulator, register_fetch
from ll_codegen.plan.mma_model import (AB_BYTES, ACC_PER_REG, SWIZZLE_MODE, Descriptor, MmaError, MmaPlan, MmaStep,
                                       Operand)
from ll_codegen.plan.model import XorForm
from ll_codegen.plan.tma import swizzle, tile_alignment

__all__ = ["AB_TYPES", "ACC_PTX", "AB_BYTES", "ACC_PER_REG", "SWIZZLE_MODE", "Descriptor", "MmaError", "MmaPlan",
           "MmaStep", "Operand", "fragment_layouts", "tile_offsets", "descriptor_of", "first_slice_descriptor",
           "plan_mma", "PACK_TYPES", "pack_source", "pack_map", "PAIR_FAMILIES", "paired_types"]


#: operand dtype -> (PTX type, accumulator dtypes allowed, wgmma may read it MN-major).  PTX ISA
#: "wgmma.mma_async" / "mma": .f16 and .e4m3/.e5m2 operands accumulate in .f32 or .f16 (fp8 mma.sync
#: with .f16: PTX ISA 8.7, sm_89+), .bf16 and .tf32 in .f32, 8-bit integers in .s32
AB_TYPES = {"f16": ("f16", ("f32", "f16"), True), "bf16": ("bf16", ("f32",), True),
            "tf32": ("tf32", ("f32",), False), "f8e4m3": ("e4m3", ("f32", "f16"), False),
            "f8e5m2": ("e5m2", ("f32", "f16"), False), "i8": ("s8", ("i32",), False),
            "u8": ("u8", ("i32",), False)}
ACC_PTX = {"f32": "f32", "f16": "f16", "i32": "s32"}
#: the type families whose instructions take A and B of different members (PTX ISA: wgmma's and
#: mma.sync's .atype and .btype are each .e4m3 or .e5m2, each .s8 or .u8)
PAIR_FAMILIES = (("f8e4m3", "f8e5m2"), ("i8", "u8"))


def paired_types(a_dtype: str, dtype: str) -> bool:
    """A of ``a_dtype`` and B of ``dtype`` are two different types one instruction multiplies as they
    are (e4m3 x e5m2, s8 x u8, ...): no conversion, each element's exact value enters the product."""
    return a_dtype != dtype and any(a_dtype in f and dtype in f for f in PAIR_FAMILIES)


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
            u = swizzle(addr.astype(np.int64), span)          # numpy: the same bits as the int version
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


def first_slice_descriptor(tile: LinearLayout, e: int, rows_first: bool, rows: int, allow_mn: bool,
                           what: str) -> Descriptor:
    """The descriptor of a shared operand's first instruction slice (rows 0.. of A, columns 0.. of B;
    K 0..k_i): ``descriptor_of`` on it, raising ``MmaError`` when wgmma cannot read the tile at all."""
    k_i = 32 // e
    offs = tile_offsets(tile) * e
    addr = offs[:rows, :k_i] if rows_first else offs[:k_i, :rows].T
    return descriptor_of(addr, e, allow_mn, what)[0]


# -------------------------------------------------------------------- planner
def plan_mma(acc: LinearLayout, a: LinearLayout, b: LinearLayout, a_space: str, b_space: str, version: int,
             dtype: str = "f16", acc_dtype: str = "f32", target: Target | str = "cuda",
             arch: str | None = None, a_dtype: str | None = None) -> MmaPlan:
    """Plan ``acc += A @ B``: ``acc`` (M x N) the accumulator's layout (``version`` 3 = wgmma, 2 =
    mma.sync), ``a`` (M x K) and ``b`` (K x N) register layouts or shared tiles (``*_space``); on a HIP
    target ``acc`` is an ``amd_mfma`` layout and ``plan_mfma`` plans it (``version`` unused).  ``a_dtype``:
    A's type where it differs from ``dtype`` (B's), a pair ``paired_types`` accepts; the instruction
    computes ``sum_k A[m, k] B[k, n]`` of the two types' exact values.
    Raises ``MmaError`` (one line) for what the instruction cannot do."""
    if isinstance(target, str):
        target = get_target(target, arch)
    if a_dtype == dtype:
        a_dtype = None
    if a_dtype is not None and (not target.is_cuda or not paired_types(a_dtype, dtype)):
        raise MmaError(f"--a-dtype {a_dtype} with --dtype {dtype}: no {target.name} instruction multiplies "
                       f"the two types (pairs: {', '.join(' x '.join(f) for f in PAIR_FAMILIES)})")
    if not target.is_cuda:
        return plan_mfma(acc, a, b, a_space, b_space, dtype, acc_dtype, target)
    if dtype not in AB_TYPES:
        raise MmaError(f"--dtype {dtype}: the MMA operand types are {', '.join(AB_TYPES)}")
    ptx_ab, accs, mn_ok = AB_TYPES[dtype]
    ptx_a = AB_TYPES[a_dtype or dtype][0]
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
        # a shared tile wgmma cannot read (no canonical layout, an 8-bit MN-major operand) is refused on its
        # first instruction slice, before the fragment walk below visits every register of every thread
        for name, L, space, rows in (("a", a, a_space, 64), ("b", b, b_space, n_i)):
            if space == "shared":
                first_slice_descriptor(L, e, name == "a", rows, mn_ok, f"{name.upper()} operand")
    else:
        if a_space != "registers" or b_space != "registers":
            raise MmaError("mma.sync reads A and B from registers; give dot_operand layouts")
        if dtype.startswith("f8") and target.arch in ("sm_80", "sm_86"):
            raise MmaError(f"fp8 mma.sync needs sm_89 or newer (--arch {target.arch})")
        n_i, kind, group = 8, "mma.sync", 1
    acc_frag, a_frag, b_frag = fragment_layouts(kind, n_i, k_i, kw)
    acc_word = ACC_PER_REG[acc_dtype]
    acc_ins, acc_shift = fragment_instructions(acc, acc_frag, group, "the accumulator", acc_word)
    warps = acc.in_dim_size("warp") if "warp" in acc.in_dims else 1
    operands, fetch = {}, {}
    for name, L, space, frag, rows_first in (("a", a, a_space, a_frag, True), ("b", b, b_space, b_frag, False)):
        what = f"{name.upper()} operand"
        if space == "registers":
            ins, shift = fragment_instructions(L, frag, group, what, max(1, 4 // e))
            operands[name] = Operand("registers", bases(L), regs=L.in_dim_size("register") * e // 4)
            fetch[name] = register_fetch(ins, shift, acc_shift, rows_first, what)
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
        instr = (f"wgmma.mma_async.sync.aligned.m64n{n_i}k{k_i}.{ACC_PTX[acc_dtype]}.{ptx_a}.{ptx_ab}")
    else:
        instr = (f"mma.sync.aligned.m16n8k{k_i}.row.col.{ACC_PTX[acc_dtype]}.{ptx_a}.{ptx_ab}."
                 f"{ACC_PTX[acc_dtype]}")
    return MmaPlan(kind, instr, dtype, acc_dtype, target.name, target.arch, target.warp_size, warps, (M, N, K),
                   (m_i, n_i, k_i), bases(acc), acc.in_dim_size("register") // acc_word, operands["a"], operands["b"],
                   tuple(steps), a_dtype=a_dtype)


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


def _shared_operand(tile: LinearLayout, e: int, rows_first: bool, rows: int, mn_ok: bool, acc_shift,
                    group: int, warps: int, what: str) -> tuple[Operand, Callable[[int, int], tuple[int]]]:
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
    op = Operand("shared", bases(tile), bytes=int(offs.size * e), align=tile_alignment(tile, e),
                 warp_offset=XorForm((), tuple(warp_coefs)))
    return op, fetch


# ------------------------------------------------------- accumulator -> register A (pack_operand)
#: the A element types an f32 accumulator is packed into (one cvt per pair, emit/instructions.cvt_pack)
PACK_TYPES = ("f16", "bf16", "f8e4m3", "f8e5m2")


def pack_source(plan: MmaPlan) -> LinearLayout:
    """The f32 accumulator ``pack_operand`` packs into A: the one an MMA of the plan's family leaves
    over A's M x K tile with the plan's warps all along M (FlashAttention's P = softmax(Q K^T), fed
    to the next MMA as A) -- wgmma m64nXk16 (its register order is the same for every instruction N
    dividing K) or mma.sync m16n8."""
    M, _, K = plan.shape
    if plan.kind == "wgmma":
        n = 8
        while n < 256 and K % (2 * n) == 0:
            n *= 2
        parent = NVMMADistributedLayout(version=(3, 0), warps_per_cta=(plan.num_warps, 1), instr_shape=(16, n, 16))
    else:
        parent = NVMMADistributedLayout(version=(2, 0), warps_per_cta=(plan.num_warps, 1), instr_shape=(16, 8))
    try:
        return parent.to_linear([M, K])
    except ValueError as e:
        raise MmaError(f"pack_operand: no {plan.kind} accumulator of {plan.num_warps} warps spans {M} x {K} ({e})") \
            from None


def pack_map(plan: MmaPlan) -> tuple[tuple[int, ...], ...]:
    """``pack[w]``: the ``pack_source`` registers whose values, converted to ``plan.a_type``, fill A's
    32-bit word w, low part first (``mma_fragments.operand_from_accumulator``).  Raises ``MmaError``
    (one line) when A is not in registers, its type is not in ``PACK_TYPES``, or the accumulator's
    elements are not A's in the same thread -- 8-bit A (k_width 4) reads four consecutive K per
    thread where the accumulator holds two: that takes warp shuffles (``llgen convert``)."""
    if plan.kind == "mfma" or plan.a.space != "registers":
        raise MmaError("pack_operand: A is not in registers")
    if plan.a_type not in PACK_TYPES:
        raise MmaError(f"pack_operand: {plan.a_type} is none of {', '.join(PACK_TYPES)}")
    return operand_from_accumulator(pack_source(plan), layout_of(plan.a.layout), 4 // AB_BYTES[plan.a_type],
                                    f"pack_operand ({plan.a_type} A)")
