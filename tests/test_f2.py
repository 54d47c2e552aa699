"""Every public function of ``core/f2.py`` against brute force on small random systems.

A system is up to 6 column vectors of F2^n, n <= 6, so every combination (2^k of them) and every
vector of the space (2^n) can be enumerated: the span, the rank, which vectors are independent,
every solution of ``apply(cols, x) = b``.  Hypothesis draws the systems (derandomized); columns
are often dependent or zero because they are drawn from a small space.
"""
from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings, strategies as st

from ll_codegen.core import f2

SETTINGS = settings(derandomize=True, max_examples=300, deadline=None)


@st.composite
def systems(draw, max_cols: int = 6, max_n: int = 6) -> tuple[int, list[int]]:
    """(n, columns): up to ``max_cols`` vectors of F2^n; one column in four a combination of the
    earlier ones, so dependent systems are common."""
    n = draw(st.integers(1, max_n))
    cols: list[int] = []
    for _ in range(draw(st.integers(0, max_cols))):
        if cols and draw(st.integers(0, 3)) == 0:
            cols.append(brute_apply(cols, draw(st.integers(0, (1 << len(cols)) - 1))))
        else:
            cols.append(draw(st.integers(0, (1 << n) - 1)))
    return n, cols


def brute_apply(cols: list[int], x: int) -> int:
    """XOR of the columns whose bit is set in x, written out as a sum over the bits."""
    y = 0
    for j in range(len(cols)):
        y ^= cols[j] * ((x >> j) & 1)
    return y


def brute_span(cols: list[int]) -> set[int]:
    return {brute_apply(cols, x) for x in range(1 << len(cols))}


def brute_rank(cols: list[int]) -> int:
    """dim span = log2 |span| (a subspace of F2^n has 2^dim elements)."""
    return len(brute_span(cols)).bit_length() - 1


def brute_independent_prefix(cols: list[int]) -> list[int]:
    """Indices j whose column is not in the span of the columns before it."""
    return [j for j in range(len(cols)) if cols[j] not in brute_span(cols[:j])]


@SETTINGS
@given(systems(), st.integers(0, 63))
def test_apply_and_apply_array(system, x):
    n, cols = system
    x &= (1 << len(cols)) - 1
    assert f2.apply(cols, x) == brute_apply(cols, x)
    xs = np.arange(1 << len(cols), dtype=np.int64)
    assert f2.apply_array(cols, xs).tolist() == [brute_apply(cols, int(v)) for v in xs]


@SETTINGS
@given(systems(), systems())
def test_matmul_is_composition(a_sys, b_sys):
    """(a @ b) x = a (b x) for every x: column j of the product is a applied to b[j]."""
    n, a = a_sys
    _, b = b_sys
    k = len(a)
    b = [v & ((1 << k) - 1) for v in b]           # b's outputs are a's inputs
    ab = f2.matmul(a, b)
    assert len(ab) == len(b)
    for x in range(1 << len(b)):
        assert brute_apply(ab, x) == brute_apply(a, brute_apply(b, x))


@SETTINGS
@given(systems())
def test_rank_span_and_in_span(system):
    n, cols = system
    space = brute_span(cols)
    assert f2.rank(cols) == brute_rank(cols)
    for v in range(1 << n):
        assert f2.in_span(v, cols) == (v in space)
    ind = f2.independent_subset(cols)
    assert ind == brute_independent_prefix(cols)
    basis = [cols[j] for j in ind]
    got = f2.span(basis)
    assert len(got) == 1 << len(basis) and set(got) == space      # each element once
    assert got == [brute_apply(basis, i) for i in range(1 << len(basis))]


@SETTINGS
@given(systems())
def test_echelon_basis_and_reduce(system):
    """The basis spans the same space, is reduced (pivot bit j set in basis vector j only), so the
    coordinates of v in the span are its pivot bits; reduce() removes exactly the span part."""
    n, cols = system
    space = brute_span(cols)
    basis, pivots = f2.echelon_basis(cols)
    assert len(basis) == len(pivots) == brute_rank(cols)
    assert pivots == sorted(pivots) and brute_span(basis) == space
    for j, (b, p) in enumerate(zip(basis, pivots)):
        assert b.bit_length() - 1 == p                      # the pivot is the leading bit
        assert all((o >> p & 1) == (i == j) for i, o in enumerate(basis))
    for v in space:
        assert brute_apply(basis, sum(((v >> p) & 1) << j for j, p in enumerate(pivots))) == v
    ech = {p: (b, 0) for b, p in zip(basis, pivots)}        # the form reduce() takes
    for v in range(1 << n):
        r = f2.reduce(v, ech)
        assert (v ^ r) in space                              # v minus something in the span
        assert all(not (r >> p & 1) for p in pivots)         # no pivot bit left
        assert (r == 0) == (v in space)


@SETTINGS
@given(systems())
def test_solve_against_every_solution(system):
    """``solve``/``Solver.solve``: None exactly when b is outside the span; otherwise a solution
    supported on the pivot columns (the first columns, in order, that raised the rank), which
    is the unique such solution, so free variables are zero."""
    n, cols = system
    pivots = set(brute_independent_prefix(cols))
    solver = f2.Solver(cols)
    for b in range(1 << n):
        sols = [x for x in range(1 << len(cols)) if brute_apply(cols, x) == b]
        on_pivots = [x for x in sols if all(j in pivots for j in range(len(cols)) if x >> j & 1)]
        x = solver.solve(b)
        assert x == f2.solve(cols, b)
        if not sols:
            assert x is None
            continue
        assert on_pivots == [x], (cols, b, x, on_pivots)
        assert bin(x).count("1") <= min(bin(s).count("1") for s in on_pivots)


@SETTINGS
@given(systems())
def test_solve_array_equals_solve_everywhere(system):
    """``Solver.solve_array`` over every b of the space: solvable exactly where ``solve`` is not
    None, and there the same x (elsewhere x is unspecified)."""
    n, cols = system
    solver = f2.Solver(cols)
    bs = np.arange(1 << n, dtype=np.int64)
    x, ok = solver.solve_array(bs)
    assert x.shape == ok.shape == bs.shape
    for b in range(1 << n):
        want = solver.solve(b)
        assert bool(ok[b]) == (want is not None), (cols, b)
        if want is not None:
            assert int(x[b]) == want
            assert brute_apply(cols, int(x[b])) == b


@SETTINGS
@given(systems(), st.lists(st.integers(0, 63), max_size=4), st.booleans())
def test_complete_basis(system, cands, with_candidates):
    """The completion makes the columns span F2^n with exactly n - rank vectors, each raising
    the rank; without candidates (or when they fall short) unit vectors are used, lowest first."""
    n, cols = system
    cands = [c & ((1 << n) - 1) for c in cands]
    out = f2.complete_basis(cols, n, cands if with_candidates else None)
    r = brute_rank(cols)
    assert len(out) == n - r
    assert brute_rank(cols + out) == n
    for j in range(len(out)):
        assert brute_rank(cols + out[:j + 1]) == r + j + 1
    if not with_candidates:
        assert all(v & (v - 1) == 0 and v for v in out)
        # greedy over 1, 2, 4, ...: every skipped unit vector was already in the span so far
        chosen = iter(out)
        nxt = next(chosen, None)
        have = list(cols)
        for i in range(n):
            if (1 << i) == nxt:
                have.append(nxt)
                nxt = next(chosen, None)
            else:
                assert (1 << i) in brute_span(have) or brute_rank(have) == n
    else:
        order = cands + [1 << i for i in range(n)]
        # the completion is the greedy choice over the candidates, then the unit vectors
        have, want = list(cols), []
        for c in order:
            if brute_rank(have) == n:
                break
            if c not in brute_span(have):
                have.append(c)
                want.append(c)
        assert out == want


def test_complete_basis_rejects_vectors_outside_the_space():
    import pytest
    with pytest.raises(ValueError):
        f2.complete_basis([0b100], 2)


@SETTINGS
@given(systems(max_cols=4, max_n=5), systems(max_cols=4, max_n=5))
def test_intersect(a_sys, b_sys):
    """A basis (independent vectors) of exactly span(a) ∩ span(b)."""
    na, a = a_sys
    nb, b = b_sys
    common = brute_span(a) & brute_span(b)
    got = f2.intersect(a, b)
    assert brute_rank(got) == len(got)
    assert brute_span(got) == common


def test_small_systems_are_exhaustive():
    """Every system of 3 columns of F2^2 (64 of them): rank, span and solve by enumeration."""
    for cols in itertools.product(range(4), repeat=3):
        cols = list(cols)
        assert f2.rank(cols) == brute_rank(cols)
        x, ok = f2.Solver(cols).solve_array(np.arange(4, dtype=np.int64))
        for b in range(4):
            s = f2.solve(cols, b)
            assert (s is not None) == bool(ok[b]) == (b in brute_span(cols))
            if s is not None:
                assert brute_apply(cols, s) == b == brute_apply(cols, int(x[b]))
