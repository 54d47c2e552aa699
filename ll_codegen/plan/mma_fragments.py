"""Which registers an MMA instruction reads and writes, found from the layouts.

The registers one instruction reads or writes are themselves a layout of the library (its
*fragment*): the accumulator of a single instruction, and that layout's ``dot_operand``\\ s for the
operands.  A user's register layout *holds* an instruction when, on the registers of that
instruction, it equals the fragment translated to the instruction's origin.
``fragment_instructions`` finds, for every thread and fragment element, the user register holding
it and requires the answer to be the same for every thread of the instruction (a register index is
a compile-time name); the warps beyond one instruction move its origin linearly.

Registers of 16- and 8-bit elements.  The instructions pass such values several to a 32-bit
register, the element of the fragment's register index p j + h in part h (low first) of register j
(p = 2 or 4): register bits 0.. of a fragment layout are the part within a word (NVIDIA's f16/bf16
and 8-bit A/B and .f16 accumulators -- wgmma's D is N/4 registers .f16x2 holding d(2j), d(2j+1);
mma.sync's C/D 2 registers -- and AMD's packed MFMA sources alike).  The user's register layout is
read the same way, so an instruction's word j is a word of the user's layout exactly when fragment
elements p j .. p j + p - 1 are the user's elements p w .. p w + p - 1 (``words``); plans name words.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.mma_model import MmaError


def register_coords(L: LinearLayout) -> np.ndarray:
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
    C, F = register_coords(user), register_coords(frag)
    tile = [frag.out_dim_size(d) for d in frag.out_dims]
    nreg, lanes, warps = C.shape[:3]
    if F.shape[1] != lanes:
        raise MmaError(f"{what}: {lanes} lanes per warp; the instruction needs {F.shape[1]}")
    if warps % group:
        raise MmaError(f"{what}: {warps} warps are no whole number of {group}-warp groups")
    # local[lane, warp in group, coordinate in the tile] -> the first fragment index holding it (-1: none)
    local = np.full((lanes, group, *tile), -1, dtype=np.int64)
    for i in reversed(range(F.shape[0])):
        local[np.arange(lanes)[:, None], np.arange(group)[None, :], F[i, :, :group, 0], F[i, :, :group, 1]] = i
    origin = C // tile * tile                        # (registers, lanes, warps, 2): the instruction's origin
    idx = local[np.arange(lanes)[None, :, None], (np.arange(warps) % group)[None, None, :],
                C[..., 0] - origin[..., 0], C[..., 1] - origin[..., 1]]
    # a register's (origin, fragment index) as one key, origins numbered in the order of the dims
    span1 = int(origin[..., 1].max()) + 1
    oid = origin[..., 0] * span1 + origin[..., 1]
    key = oid * F.shape[0] + idx
    per_group: list[dict[tuple[int, ...], tuple[int, ...]]] = []
    for g in range(warps // group):
        found = None
        for w in range(group):
            for lane in range(lanes):
                warp = g * group + w
                bad = np.flatnonzero(idx[:, lane, warp] < 0)
                if bad.size:
                    r = int(bad[0])
                    c = C[r, lane, warp]
                    raise MmaError(f"{what}: register {r} of lane {lane}, warp {warp} holds "
                                   f"({int(c[0])}, {int(c[1])}), which the instruction's fragment puts in "
                                   f"another thread")
                # the first register holding each (origin, fragment element) of this thread
                keys, first = np.unique(key[:, lane, warp], return_index=True)
                if np.any(np.unique(keys // F.shape[0], return_counts=True)[1] != F.shape[0]):
                    raise MmaError(f"{what}: lane {lane}, warp {warp} lacks part of an instruction's "
                                   f"fragment")
                if found is None:
                    found = (keys, first)
                elif not (np.array_equal(found[0], keys) and np.array_equal(found[1], first)):
                    raise MmaError(f"{what}: threads of one instruction hold its fragment in different registers")
        keys, first = found
        instrs: dict[tuple[int, int], list[int]] = {}
        # origins in the order their first register comes (the order instructions are issued in)
        ids = keys // F.shape[0]
        order = sorted(set(ids.tolist()), key=lambda o: int(first[ids == o].min()))
        for o in order:
            regs = [-1] * F.shape[0]
            for k, r in zip(keys[ids == o], first[ids == o]):
                regs[int(k % F.shape[0])] = int(r)
            instrs[(o // span1, o % span1)] = regs
        per_group.append({o: tuple(v) for o, v in instrs.items()})
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
        base = {o: words(v, word, what) for o, v in base.items()}
    return base, shifts


def words(regs: tuple[int, ...], word: int, what: str) -> tuple[int, ...]:
    """Fragment elements ``regs`` as 32-bit words of ``word`` elements: the fragment's elements
    word j .. word j + word - 1 must be the elements of one word of the user's layout, in order."""
    out = []
    for j in range(0, len(regs), word):
        chunk = regs[j:j + word]
        if chunk[0] % word or any(r != chunk[0] + t for t, r in enumerate(chunk)):
            raise MmaError(f"{what}: registers {list(chunk)} form one word of the instruction but not of the layout")
        out.append(chunk[0] // word)
    return tuple(out)


def register_fetch(ins: dict[tuple[int, ...], tuple[int, ...]], shift: list[tuple[int, int]],
                   acc_shift: list[tuple[int, int]], rows_first: bool,
                   what: str) -> Callable[[int, int], tuple[int, ...]]:
    """``fetch(outer, k0)``: an operand's register words for the instruction at (outer coordinate,
    k0) -- A's origin is (m0, k0), B's (k0, n0).  Its warps must move its rows (A) or columns (B)
    as the accumulator's warps move the accumulator's."""
    if [s[0 if rows_first else 1] for s in shift] != [s[0 if rows_first else 1] for s in acc_shift]:
        raise MmaError(f"{what}: its warps do not hold the rows/columns of the accumulator's warps")

    def fetch(outer: int, k0: int) -> tuple[int, ...]:
        key = (outer, k0) if rows_first else (k0, outer)
        if key not in ins:
            raise MmaError(f"{what}: no registers hold the instruction tile at {key}")
        return ins[key]
    return fetch


def bases(L: LinearLayout) -> dict[str, object]:
    """A layout as plan data (``core.layout.layout_of`` rebuilds it)."""
    return {"in_dims": L.bases, "out_dims": L.out_dim_sizes}


def operand_from_accumulator(source: LinearLayout, operand: LinearLayout, word: int,
                             what: str) -> tuple[tuple[int, ...], ...]:
    """Where each element of a register operand sits in an accumulator of the same M x K tile held by
    the same threads: ``pack[w][h]`` is the ``source`` register holding part h (low first) of the
    operand's 32-bit word w, i.e. of operand element ``word * w + h``.

    The pack is a thread-local register renaming only when, for every thread, operand element i and
    source register ``pack`` of it hold the same (row, col) and that register index is the same for
    every thread (a register index is a compile-time name); else ``MmaError`` names the first element
    that lives in another thread or another register."""
    S, A = register_coords(source), register_coords(operand)
    if S.shape[1:3] != A.shape[1:3]:
        raise MmaError(f"{what}: the accumulator spans {S.shape[2]} warps of {S.shape[1]} lanes, the operand "
                       f"{A.shape[2]} of {A.shape[1]}")
    regs = A.shape[0]
    if regs % word:
        raise MmaError(f"{what}: {regs} operand registers are no whole number of {word}-element words")
    found: list[int] = [-1] * regs
    for lane in range(A.shape[1]):
        for warp in range(A.shape[2]):
            at = {(int(c[0]), int(c[1])): r for r, c in enumerate(S[:, lane, warp])}
            for i in range(regs):
                c = (int(A[i, lane, warp, 0]), int(A[i, lane, warp, 1]))
                r = at.get(c)
                if r is None:
                    raise MmaError(f"{what}: operand element {i} of lane {lane}, warp {warp} is {c}, which the "
                                   f"accumulator keeps in another thread")
                if found[i] < 0:
                    found[i] = r
                elif found[i] != r:
                    raise MmaError(f"{what}: operand element {i} is accumulator register {found[i]} in one thread "
                                   f"and {r} in lane {lane}, warp {warp}")
    return tuple(tuple(found[w * word:(w + 1) * word]) for w in range(regs // word))
