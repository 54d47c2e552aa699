"""F2 laws of LinearLayout (``core/layout.py``): composition, products, division, inverses, reshapes.  Hypothesis, derandomized."""
import numpy as np
from hypothesis import given, settings, strategies as st

from ll_codegen.core import f2
from ll_codegen.core.layout import LinearLayout, divide_left, divide_right

SETTINGS = settings(derandomize=True, max_examples=150, deadline=None)


@st.composite
def layouts(draw, in_dims=("register", "lane"), out_dims=("dim0", "dim1"), bijective=False, max_bits=6,
            surjective=False):
    """Random layout; with ``bijective`` a random invertible matrix split over
    the dims; with ``surjective`` random columns completed (at random
    positions) until they span the output space."""
    out_logs = [draw(st.integers(0, 3)) for _ in out_dims]
    n_out = sum(out_logs)
    if bijective:
        cols = []
        while len(cols) < n_out:          # random invertible: keep independent columns
            v = draw(st.integers(1, (1 << n_out) - 1)) if n_out else 0
            if f2.rank(cols + [v]) > len(cols):
                cols.append(v)
        cuts = sorted(draw(st.lists(st.integers(0, n_out), min_size=len(in_dims) - 1, max_size=len(in_dims) - 1)))
    else:
        n_in = draw(st.integers(0, max_bits))
        cols = [draw(st.integers(0, (1 << n_out) - 1)) for _ in range(n_in)]
        if surjective:
            for c in f2.complete_basis(cols, n_out):
                cols.insert(draw(st.integers(0, len(cols))), c)
        cuts = sorted(draw(st.lists(st.integers(0, n_in), min_size=len(in_dims) - 1, max_size=len(in_dims) - 1)))
    parts = [cols[a:b] for a, b in zip([0] + cuts, cuts + [len(cols)])]
    return LinearLayout.from_flat(dict(zip(in_dims, parts)), {n: 1 << k for n, k in zip(out_dims, out_logs)})


@SETTINGS
@given(layouts(bijective=True))
def test_compose_with_inverse_is_identity(L):
    ident = L.invert().compose(L)
    for d in L.out_dims:
        for i, b in enumerate(ident.bases[d]):
            assert b == [(1 << i) if n == d else 0 for n in ident.out_dims]
    back = L.compose(L.invert())
    for d in L.in_dims:
        for i, b in enumerate(back.bases[d]):
            assert b == [(1 << i) if n == d else 0 for n in back.out_dims]


@SETTINGS
@given(layouts(out_dims=("dim0", "dim1")), layouts(in_dims=("register", "lane", "warp"), out_dims=("dim1", "dim2")))
def test_divide_left_inverts_product(A, B):
    B = _drop_trivial(B)
    got = divide_left(A * B, A)
    assert got is not None and got.equal_ignoring_trivial_dims(B)
    assert divide_right(A * B, B).equal_ignoring_trivial_dims(_drop_trivial(A))


def _drop_trivial(L):
    outs = {n: s for n, s in L.out_dim_sizes.items() if s > 1}
    bases = {d: bs for d, bs in L.sublayout(L.in_dims, outs).bases.items() if bs}
    return LinearLayout(bases, outs, require_surjective=False)


@SETTINGS
@given(layouts(in_dims=("register", "lane", "warp"), max_bits=8, surjective=True))
def test_invert_and_compose_with_itself_is_identity_on_image(L):
    assert L.is_surjective()
    C = L.invert_and_compose(L)
    # C maps every input to an input with the same image, and is the identity on pivot columns
    for d in L.in_dims:
        for i in range(L.in_dim_size_log2(d)):
            x = C.apply(**{d: 1 << i})
            assert L.apply(**x) == L.apply(**{d: 1 << i})
    free = L.free_variable_masks()
    for d in L.in_dims:
        for i in range(L.in_dim_size_log2(d)):
            if not free[d] >> i & 1:
                assert C.apply(**{d: 1 << i}) == {e: (1 << i if e == d else 0) for e in L.in_dims}


@SETTINGS
@given(layouts(in_dims=("register", "lane"), max_bits=8, surjective=True))
def test_pseudoinverse_is_right_inverse_with_zero_free_variables(L):
    assert L.is_surjective()
    P = L.pseudoinvert()
    R = P.compose(L)
    for d in L.out_dims:
        for i, b in enumerate(R.bases[d]):
            assert b == [(1 << i) if n == d else 0 for n in R.out_dims]
    free = L.free_variable_masks()
    for d in L.out_dims:
        for b in P.bases[d]:
            for v, e in zip(b, P.out_dims):
                assert v & free[e] == 0


@SETTINGS
@given(layouts(in_dims=("register", "lane", "warp"), max_bits=8))
def test_apply_all_matches_apply(L):
    table = L.apply_all()
    sizes = [L.in_dim_size_log2(d) for d in L.in_dims]
    for idx in range(0, len(table), max(1, len(table) // 16)):
        point, x = {}, idx
        for d, k in zip(L.in_dims, sizes):
            point[d], x = x & ((1 << k) - 1), x >> k
        assert list(table[idx]) == list(L.apply(**point).values())


def test_product_order_semantics():
    a = LinearLayout.identity_1d(4, "i", "o") * LinearLayout.zeros_1d(2, "i", "o")
    b = LinearLayout.zeros_1d(2, "i", "o") * LinearLayout.identity_1d(4, "i", "o")
    xs = range(8)
    assert [a.apply(i=x)["o"] for x in xs] == [x % 4 for x in xs]
    assert [b.apply(i=x)["o"] for x in xs] == [x // 2 for x in xs]


def test_reshape_transpose_flatten_quotient():
    L = LinearLayout({"register": [[0, 1], [1, 0]], "lane": [[0, 2], [2, 0]]}, ["dim0", "dim1"])
    flat = L.flatten_outs()
    assert flat.out_dim_sizes == {"dim0": 16}
    assert flat.reshape_outs([("dim0", 4), ("dim1", 4)]) == L
    assert L.transpose_outs(["dim1", "dim0"]).transpose_outs(["dim0", "dim1"]) == L
    assert L.flatten_ins().in_dims == ["register"] and L.flatten_ins().in_dim_size("register") == 16
    ident = LinearLayout.identity_1d(4, "register", "register") * LinearLayout.identity_1d(8, "lane", "lane")
    assert ident.quotient(["register"]) == LinearLayout.identity_1d(8, "lane", "lane")
    assert LinearLayout({"register": [[1], [0]]}, {"register": 4}, require_surjective=False).quotient(["register"]) is None


def test_num_consecutive_and_free_masks():
    L = LinearLayout({"register": [[1], [2], [8], [0]], "lane": [[4]]}, ["dim0"])
    assert L.num_consecutive() == 4
    assert L.free_variable_masks() == {"register": 0b1000, "lane": 0}
    assert not L.is_injective() and L.is_surjective()


def test_f2_solve_minimal_weight_and_intersection():
    assert f2.solve([0b01, 0b10, 0b11], 0b10) == 0b010
    assert f2.rank([0b01, 0b10, 0b11]) == 2
    assert f2.solve([0b01], 0b10) is None
    assert sorted(f2.intersect([0b011, 0b100], [0b001, 0b010])) == [0b011]
    assert f2.complete_basis([0b011], 2) == [0b01]
    assert np.array_equal(np.array(f2.span([1, 2])), np.array([0, 1, 2, 3]))
