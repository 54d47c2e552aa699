"""Packed 32-bit words of a distributed tile, as a 1-D layout Gluon can hold (no GPU needed).

Our bench kernels change 8/16-bit data as packed words: registers ``(p*j, .., p*j + p-1)`` of a
thread form word ``j`` (``plan.model.word_view``), one xor per word.  Triton holds every element
in its own register, so a Gluon loop over elements does 2-4x the ALU work, and its base loop is
not the loop ours subtracts.  ``word_view`` gives the same words as a tile Gluon can carry
through a loop: a 1-D ``DistributedLinearLayout`` over word indices whose registers, lanes and
warps hold exactly the words ours holds, and for every word the row-major tile indices of its
``p`` elements -- so the Gluon base kernel gathers each word's elements once (prologue), xors
words in the loop, and scatters them once (epilogue).

Word indices: the row-major element index ``e`` of a word's first element (its *representative*,
with the ``pivots`` bits zero) with those bits deleted; the word's element ``i`` is at
``representative ^ parts[i]``.  ``word_view`` checks its answer against the layout itself.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.planner import normalise


@dataclass(frozen=True)
class WordView:
    """One tile as packed words: ``pack`` elements (registers in a row) per word."""
    pack: int                            # elements per word; 1: the elements themselves
    words: int                           # words in the tile
    bases: dict[str, list[list[int]]]    # 1-D layout of the word index (register, lane, warp, block)
    parts: tuple[int, ...]               # element i of a word is at representative ^ parts[i]
    pivots: tuple[int, ...]              # bits of e deleted to give the word index (ascending)


def _row_major(L: LinearLayout, basis: list[int]) -> int:
    """Row-major tile index of one basis image (xor-linear: every size is a power of two)."""
    e = 0
    for size, x in zip(L.out_dim_sizes.values(), basis):
        e = e * size + x
    return e


def _delete_bits(e: int, pivots: tuple[int, ...]) -> int:
    for q in reversed(pivots):           # highest first: lower positions keep their meaning
        e = ((e >> (q + 1)) << q) | (e & ((1 << q) - 1))
    return e


def insert_zero_bits(c: np.ndarray | int, pivots: tuple[int, ...]):
    """The representative's row-major index of word index ``c`` (what the Gluon kernel computes)."""
    for q in pivots:                     # lowest first: ``pivots`` are positions in the result
        c = ((c >> q) << (q + 1)) | (c & ((1 << q) - 1))
    return c


def word_view(L: LinearLayout, pack: int) -> WordView | None:
    """``L``'s tile as words of ``pack`` consecutive registers, or None when those registers do
    not hold ``pack`` distinct elements (a broadcast register) or ``pack`` does not divide them."""
    L = normalise(L)
    regs = [_row_major(L, b) for b in L.bases["register"]]
    k = pack.bit_length() - 1
    if pack < 1 or pack & (pack - 1) or len(regs) < k:
        return None
    tile = int(np.prod(list(L.out_dim_sizes.values())))
    # reduce the packing images to echelon form: one pivot bit each, cleared in the others
    red: list[int] = []
    for v in regs[:k]:
        for r in red:
            if v & (1 << (r.bit_length() - 1)):
                v ^= r
        if v == 0:
            return None                  # the word would hold one element twice
        red = [r ^ v if r & (1 << (v.bit_length() - 1)) else r for r in red] + [v]
    pivots = tuple(sorted(r.bit_length() - 1 for r in red))

    def word_index(e: int) -> int:
        for r in red:                    # into the representative's coset, then drop the pivots
            if e & (1 << (r.bit_length() - 1)):
                e ^= r
        return _delete_bits(e, pivots)
    bases = {d: [[word_index(_row_major(L, b))] for b in L.bases[d]] for d in ("register", "lane", "warp", "block")}
    bases["register"] = bases["register"][k:]
    parts = []
    for i in range(pack):                # element i of a word: registers i of the word, as xors of images
        e = 0
        for j in range(k):
            if i >> j & 1:
                e ^= regs[j]
        parts.append(e)
    wv = WordView(pack, tile // pack, bases, tuple(parts), pivots)
    _check(L, wv)
    return wv


def _check(L: LinearLayout, wv: WordView) -> None:
    """Every (register word, lane, warp) of ``wv`` names the elements ``L`` puts in those registers,
    in register order up to one xor per word (the same for data and key, so the xor is unchanged)."""
    from llgen_bench.jobs import hardware_points
    pts = hardware_points(L)                                 # (warps, lanes, registers) row-major indices
    W, La, R = pts.shape
    lin = np.zeros((W, La, R // wv.pack), dtype=np.int64)
    for d, axis in (("warp", 0), ("lane", 1), ("register", 2)):
        for i, (b,) in enumerate(wv.bases[d]):
            idx = np.arange(lin.shape[axis])
            sel = ((idx >> i) & 1).astype(bool)
            shape = [1, 1, 1]
            shape[axis] = -1
            lin ^= np.where(sel.reshape(shape), b, 0)
    rep = insert_zero_bits(lin, wv.pivots)
    got = np.stack([rep ^ p for p in wv.parts], axis=-1)     # (warps, lanes, words, pack)
    want = pts.reshape(W, La, R // wv.pack, wv.pack)
    if not (np.sort(got, axis=-1) == np.sort(want, axis=-1)).all() or int(lin.max()) >= wv.words:
        raise AssertionError("word_view: the word layout does not hold the layout's elements")
