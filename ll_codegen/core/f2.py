"""Linear algebra over F2 with bit vectors stored as Python ints.

A vector of F2^n is an int whose bit i is coordinate i; addition is XOR.  A
matrix is a list of column vectors (``cols[j]`` is the image of basis vector
``e_j``), which is exactly how a linear layout stores its bases, so
``apply(cols, x) = XOR of cols[j] for every bit j set in x``.

Worked example: the columns ``[0b01, 0b10, 0b11]`` map ``x = 0b101`` to
``0b01 ^ 0b11 = 0b10``; their rank is 2 and ``solve`` finds the preimage of
``0b10`` with the fewest set bits, ``0b010`` (the free third column is 0).
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np


def apply(cols: Sequence[int], x: int) -> int:
    """Matrix-vector product: XOR of the columns selected by the bits of x."""
    y, j = 0, 0
    while x:
        if x & 1:
            y ^= cols[j]
        x >>= 1
        j += 1
    return y


def apply_array(cols: Sequence[int], xs: np.ndarray) -> np.ndarray:
    """``apply`` for every entry of an int64 array at once."""
    y = np.zeros_like(xs)
    for j, c in enumerate(cols):
        y ^= ((xs >> j) & 1) * c
    return y


def matmul(a: Sequence[int], b: Sequence[int]) -> list[int]:
    """Product ``a @ b`` of column matrices: column j is ``a`` applied to ``b[j]``."""
    return [apply(a, c) for c in b]


def _echelon(vectors: Iterable[int]) -> dict[int, tuple[int, int]]:
    """Reduced echelon form keyed by pivot bit: {pivot: (vector, combination)}.

    ``combination`` records, as a bit mask over the input order, which input
    vectors XOR to the stored vector (used by ``solve``).
    """
    rows: dict[int, tuple[int, int]] = {}
    for j, v in enumerate(vectors):
        combo = 1 << j
        for p, (r, rc) in rows.items():
            if v >> p & 1:
                v ^= r
                combo ^= rc
        if v:
            p = v.bit_length() - 1
            for q, (r, rc) in list(rows.items()):  # keep the form fully reduced
                if r >> p & 1:
                    rows[q] = (r ^ v, rc ^ combo)
            rows[p] = (v, combo)
    return rows


def _span_basis(vectors: Iterable[int]) -> dict[int, int]:
    """A basis of span(vectors) keyed by each vector's leading bit (not reduced: cheaper than
    ``_echelon`` where only the span matters)."""
    basis: dict[int, int] = {}
    for v in vectors:
        while v:
            top = v.bit_length() - 1
            b = basis.get(top)
            if b is None:
                basis[top] = v
                break
            v ^= b
    return basis


def rank(vectors: Iterable[int]) -> int:
    """Dimension of the span of ``vectors``."""
    return len(_span_basis(vectors))


def reduce(v: int, basis_echelon: dict[int, tuple[int, int]]) -> int:
    for p, (r, _) in basis_echelon.items():
        if v >> p & 1:
            v ^= r
    return v


def in_span(v: int, vectors: Iterable[int]) -> bool:
    basis = _span_basis(vectors)
    while v:
        b = basis.get(v.bit_length() - 1)
        if b is None:
            return False
        v ^= b
    return True


class Solver:
    """Precomputed elimination of a column matrix; ``solve`` is then cheap.

    ``solve(b)`` returns x with ``apply(cols, x) == b`` built from pivot columns
    only (each pivot is the first column, in order, that raised the rank), so
    free variables are zero and the Hamming weight is minimal among solutions
    on those columns; ``None`` if ``b`` is not in the span.  Paper 000 §5.4
    ("promoting broadcast")."""

    __slots__ = ("_rows",)

    def __init__(self, cols: Sequence[int]):
        self._rows = list(_echelon(cols).values())

    def solve(self, b: int) -> int | None:
        x = 0
        for r, combo in self._rows:
            if b >> (r.bit_length() - 1) & 1:
                b ^= r
                x ^= combo
        return x if b == 0 else None

    def solve_array(self, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``solve`` for every entry of an int64 array: (x, solvable).  The form
        is fully reduced, so pivot bits of ``b`` pick the rows directly and
        the map is linear."""
        x, rest = np.zeros_like(b), b.copy()
        for r, combo in self._rows:
            hit = (b >> (r.bit_length() - 1)) & 1
            x ^= hit * combo
            rest ^= hit * r
        return x, rest == 0


def solve(cols: Sequence[int], b: int) -> int | None:
    """One-off ``Solver(cols).solve(b)``."""
    return Solver(cols).solve(b)


def _reduced_rows(vectors: Sequence[int]) -> tuple[dict[int, int], list[int]]:
    """Reduced echelon form of span(vectors), ``{pivot bit: row}`` with each
    pivot bit set in exactly one row, and the indices of the vectors that
    raised the rank when taken in order."""
    rows: dict[int, int] = {}
    keep = []
    for j, v in enumerate(vectors):
        for p, r in rows.items():
            if v >> p & 1:
                v ^= r
        if v:
            p = v.bit_length() - 1
            for q in list(rows):
                if rows[q] >> p & 1:
                    rows[q] ^= v
            rows[p] = v
            keep.append(j)
    return rows, keep


def independent_subset(vectors: Sequence[int]) -> list[int]:
    """Indices of the vectors that raise the rank when taken in order."""
    return _reduced_rows(vectors)[1]


def echelon_basis(vectors: Sequence[int]) -> tuple[list[int], list[int]]:
    """(basis in reduced echelon form, ascending pivot bits) of span(vectors):
    each pivot bit is set in exactly one basis vector, so coordinate j of x in
    the span is bit ``pivots[j]`` of x."""
    rows = _reduced_rows(vectors)[0]
    pivots = sorted(rows)
    return [rows[p] for p in pivots], pivots


def complete_basis(vectors: Sequence[int], n: int, candidates: Sequence[int] | None = None) -> list[int]:
    """Vectors to add to ``vectors`` so that together they span F2^n.

    Candidates are tried in order (default: the unit vectors 1, 2, 4, ...), so
    the completion consists of unit vectors when possible.
    """
    cands = list(candidates) if candidates is not None else [1 << i for i in range(n)]
    if candidates is not None:
        cands += [1 << i for i in range(n)]
    base = list(vectors)
    r = rank(base)
    out = []
    for c in cands:
        if r == n:
            break
        if rank(base + out + [c]) > r + len(out):
            out.append(c)
    if rank(base + out) != n:
        raise ValueError("vectors do not live in F2^%d" % n)
    return out


def span(vectors: Sequence[int]) -> list[int]:
    """All 2^k elements of the span of k independent vectors, element i = apply(vectors, i)."""
    out = [0]
    for v in vectors:
        out += [x ^ v for x in out]
    return out


def intersect(a: Sequence[int], b: Sequence[int]) -> list[int]:
    """A basis of span(a) ∩ span(b).

    Every dependency ``a·x ^ b·y = 0`` among the columns of ``[a | b]`` gives a
    common vector ``a·x``; one dependency per non-pivot column spans them all.
    """
    a = [a[i] for i in independent_subset(a)]
    cols = a + list(b)
    common = []
    for j in range(len(a), len(cols)):
        x = solve(cols[:j], cols[j])
        if x is not None:
            common.append(apply(a, x & ((1 << len(a)) - 1)))
    return [common[i] for i in independent_subset(common)]
