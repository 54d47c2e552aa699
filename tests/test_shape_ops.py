"""Shape operations (ll_codegen.layouts.shape_ops) on distributed layouts."""

import pytest

from ll_codegen.layouts.amd import AMDMFMALayout
from ll_codegen.layouts.base import LayoutError
from ll_codegen.layouts.distributed import BlockedLayout, SliceLayout
from ll_codegen.layouts.nvidia import NVMMADistributedLayout
from ll_codegen.layouts.shape_ops import broadcast, expand_dims, join, reshape, split, transpose

BLOCKED = [
    (BlockedLayout([2, 4], [8, 4], [2, 2], [1, 0]), (64, 32)),
    (BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0]), (256, 256)),
    (BlockedLayout([4, 1], [4, 8], [1, 4], [0, 1]), (16, 128)),
]
MMA = [
    (NVMMADistributedLayout([3, 0], [4, 1], [16, 128, 16]), (128, 128)),
    (NVMMADistributedLayout([2, 0], [2, 2], [16, 8]), (64, 64)),
    (AMDMFMALayout(3, [32, 32], True, [2, 2]), (64, 128)),
]


def elements(L):
    """Map hardware point (flat input index) -> element tuple."""
    return [tuple(r) for r in L.apply_all()]


@pytest.mark.parametrize("b, shape", BLOCKED)
def test_transpose_of_blocked_is_blocked_with_permuted_params(b, shape):
    T = transpose(b.to_linear(shape), [1, 0])
    inv = {0: 1, 1: 0}
    bt = BlockedLayout(b.size_per_thread[::-1], b.threads_per_warp[::-1], b.warps_per_cta[::-1],
                       [inv[d] for d in b.order])
    assert T == bt.to_linear(shape[::-1])


def test_transpose_3d_blocked_matches_permuted_blocked():
    b = BlockedLayout([1, 2, 4], [2, 4, 4], [1, 2, 2], [2, 1, 0])
    perm = [2, 0, 1]
    inv = [perm.index(d) for d in range(3)]
    bt = BlockedLayout([b.size_per_thread[p] for p in perm], [b.threads_per_warp[p] for p in perm],
                       [b.warps_per_cta[p] for p in perm], [inv[d] for d in b.order])
    assert transpose(b.to_linear((4, 16, 32)), perm) == bt.to_linear((32, 4, 16))


@pytest.mark.parametrize("lay, shape", BLOCKED + MMA)
def test_transpose_twice_is_identity_and_moves_elements(lay, shape):
    L = lay.to_linear(shape)
    T = transpose(L, [1, 0])
    assert transpose(T, [1, 0]) == L
    assert elements(T) == [(j, i) for i, j in elements(L)]


@pytest.mark.parametrize("lay, shape", BLOCKED + MMA)
def test_reshape_round_trip_and_row_major_flattening(lay, shape):
    L = lay.to_linear(shape)
    n = shape[0] * shape[1]
    flat = reshape(L, [n])
    assert [e[0] for e in elements(flat)] == [i * shape[1] + j for i, j in elements(L)]
    assert reshape(flat, shape) == L
    three = reshape(L, [2, shape[0] // 2, shape[1]])
    assert reshape(three, shape) == L
    assert [(a * shape[0] // 2 + i, j) for a, i, j in elements(three)] == elements(L)


def test_reshape_rejects_bad_shapes():
    L = BLOCKED[0][0].to_linear(BLOCKED[0][1])
    with pytest.raises(LayoutError) as e:
        reshape(L, [64, 64])
    assert e.value.field == "shape"
    with pytest.raises(LayoutError):
        reshape(L, [3, 512])


@pytest.mark.parametrize("lay, shape", BLOCKED + MMA)
def test_expand_dims_inverts_slice(lay, shape):
    for dim in (0, 1):
        sliced_shape = tuple(s for k, s in enumerate(shape) if k != dim)
        S = SliceLayout(dim, lay).to_linear(sliced_shape)
        E = expand_dims(S, dim)
        assert E.out_dim_sizes == {f"dim{k}": (1 if k == dim else s) for k, s in enumerate(shape)}
        assert all(e[dim] == 0 for e in elements(E))
        assert [tuple(e[k] for k in range(2) if k != dim) for e in elements(E)] == elements(S)


def test_broadcast_matches_blocked_at_larger_shape():
    b = BlockedLayout([1, 1], [32, 1], [4, 1], [0, 1])
    L = b.to_linear((128, 1))
    assert broadcast(L, 1, 8) == b.to_linear((128, 8))
    with pytest.raises(LayoutError):
        broadcast(b.to_linear((128, 2)), 1, 8)


@pytest.mark.parametrize("lay, shape", BLOCKED + MMA)
def test_join_split_inverse(lay, shape):
    L = lay.to_linear(shape)
    J = join(L)
    assert J.bases["register"][0] == [0, 0, 1]
    assert J.out_dim_sizes == {"dim0": shape[0], "dim1": shape[1], "dim2": 2}
    assert split(J) == L


def test_join_equals_blocked_with_new_fastest_dim():
    # tt.join on a blocked layout: sizePerThread gains a trailing 2, the new dim is fastest
    b = BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])
    j = BlockedLayout([1, 4, 2], [8, 4, 1], [4, 1, 1], [2, 1, 0])
    assert join(b.to_linear((32, 16))) == j.to_linear((32, 16, 2))


def test_split_rejects_lane_held_last_dim():
    b = BlockedLayout([1, 1], [16, 2], [1, 1], [1, 0])
    with pytest.raises(LayoutError):
        split(b.to_linear((16, 2)))
