"""Worked examples published about linear layouts, reproduced exactly.

Every expected value is transcribed here from its source (nothing is read from
outside the repository):

* the linear-layouts paper -- "Linear Layouts: Robust Code Generation of
  Efficient Tensor Computation Using F2" (Zhou et al., ASPLOS '26), §4.1:
  layout A (Figure 1a), its matrix and Table 1;
* the blog post "Triton Linear Layout: Examples": Triton's dump of
  ``identityStandardND`` and of an MFMA layout, the MFMA single-warp tile;
* the blog post "Linear Layout in Triton (3)": ``identityStandardND`` of a
  blocked layout's registers, CGA split and replication;
* the notes "Linear Layouts in Triton": product order, the swizzled-shared
  offset tables, a blocked layout over a CGA, the MFMA tables, a slice layout.
"""
import pytest

from ll_codegen.core.layout import LinearLayout, identity_nd
from ll_codegen.layouts import distributed
from ll_codegen.layouts.amd import AMDMFMALayout
from ll_codegen.layouts.distributed import BlockedLayout, SliceLayout
from ll_codegen.layouts.memory import SwizzledSharedLayout


# ------------------------------------------------------------- the linear-layouts paper, §4.1
def layout_a():
    """Figure 1a: 16x16, 2x2 registers, 4x8 threads, 2x1 warps, dim1 fastest."""
    return BlockedLayout([2, 2], [4, 8], [2, 1], [1, 0]).to_linear((16, 16))


def test_paper_layout_a_matrix():
    # rows j0..j3, i0..i3; columns v0..v7 = Reg(2) Thr(5) Wrp(1) (paper §4.1)
    A = [[1, 0, 0, 0, 0, 0, 0, 0],
         [0, 0, 1, 0, 0, 0, 0, 0],
         [0, 0, 0, 1, 0, 0, 0, 0],
         [0, 0, 0, 0, 1, 0, 0, 0],
         [0, 1, 0, 0, 0, 0, 0, 0],
         [0, 0, 0, 0, 0, 1, 0, 0],
         [0, 0, 0, 0, 0, 0, 1, 0],
         [0, 0, 0, 0, 0, 0, 0, 1]]
    cols = layout_a().sublayout(["register", "lane", "warp"], ["dim0", "dim1"]) \
        .transpose_outs(["dim1", "dim0"]).flat_matrix()       # w0..3 = j, w4..7 = i
    assert cols == [sum(A[r][c] << r for r in range(8)) for c in range(8)]


@pytest.mark.parametrize("loc, reg, thread, warp", [
    ((0, 0), 0, 0, 0), ((0, 1), 1, 0, 0), ((0, 2), 0, 1, 0), ((0, 3), 1, 1, 0),
    ((1, 0), 2, 0, 0), ((1, 1), 3, 0, 0), ((2, 2), 0, 9, 0), ((2, 3), 1, 9, 0),
    ((3, 2), 2, 9, 0), ((3, 3), 3, 9, 0)])
def test_paper_table_1(loc, reg, thread, warp):
    got = layout_a().apply(register=reg, lane=thread, warp=warp)
    assert (got["dim0"], got["dim1"]) == loc


def test_paper_r1_of_t9_is_xor_of_tile_locations():
    L = layout_a()
    # loc_w0 ^ loc_t9 ^ loc_r1 = (0,0) ^ (2,2) ^ (0,1) = (2, 3)
    assert L.apply(lane=9) == {"dim0": 2, "dim1": 2}
    assert L.apply(register=1) == {"dim0": 0, "dim1": 1}
    assert L.apply(register=1, lane=9) == {"dim0": 2, "dim1": 3}


# ------------------------------------------------------------- "Triton Linear Layout: Examples"
DUMP_IDENTITY_ND = """\
 - register=1 -> (1, 0, 0)
   register=2 -> (2, 0, 0)
   register=4 -> (4, 0, 0)
   register=8 -> (0, 1, 0)
   register=16 -> (0, 2, 0)
   register=32 -> (0, 0, 1)
where out dims are: [dim2 (size 8), dim1 (size 4), dim0 (size 2)]"""

DUMP_MFMA_32X64 = """\
 - register=1 -> (1, 0)
   register=2 -> (2, 0)
   register=4 -> (0, 32)
 - lane=1 -> (0, 1)
   lane=2 -> (0, 2)
   lane=4 -> (0, 4)
   lane=8 -> (0, 8)
   lane=16 -> (4, 0)
   lane=32 -> (8, 0)
 - warp=1 -> (0, 16)
   warp=2 -> (16, 0)
 - block is a size 1 dimension
where out dims are: [dim0 (size 32), dim1 (size 64)]"""


def test_identity_standard_nd_dump():
    assert repr(identity_nd("register", [2, 4, 8], [2, 1, 0])) == DUMP_IDENTITY_ND


def test_mfma_32x64_dump():
    # #ttg.amd_mfma<{version = 3, warpsPerCTA = [2, 2], instrShape = [16, 16, 16], isTransposed = false}>
    L = AMDMFMALayout(3, [16, 16, 16], False, [2, 2]).to_linear((32, 64))
    assert repr(L) == DUMP_MFMA_32X64


def test_mfma_single_warp_tile():
    tile = (LinearLayout.identity_1d(4, "register", "dim0") * LinearLayout.identity_1d(16, "lane", "dim1")
            * LinearLayout.identity_1d(64 // 16, "lane", "dim0"))
    L = AMDMFMALayout(3, [16, 16, 16], False, [1, 1]).to_linear((16, 16))
    assert L.sublayout(["register", "lane"], ["dim0", "dim1"]) == tile.transpose_outs(["dim0", "dim1"])


# ------------------------------------------------------------- "Linear Layout in Triton (3)"
def test_identity_standard_nd_register_4x2():
    # sizePerThread = [4, 2], order = [1, 0]
    want = LinearLayout.identity_1d(2, "register", "dim1") * LinearLayout.identity_1d(4, "register", "dim0")
    assert identity_nd("register", [4, 2], [1, 0]) == want
    tile = BlockedLayout([4, 2], [8, 4], [1, 1], [1, 0]).to_linear((4, 2))
    assert tile.bases["register"] == [[0, 1], [1, 0], [2, 0]]


def test_cga_layout_split_and_replication():
    # CTAsPerCGA = [2, 4], CTASplitNum = [2, 2], CTAOrder = [1, 0]: block bit 0 -> dim1,
    # bit 1 replicates (blocks 0,2 and 1,3 share dim1 pieces), bit 2 -> dim0
    b = BlockedLayout([1, 1], [1, 32], [1, 1], [1, 0], ctas_per_cga=[2, 4], cta_split_num=[2, 2], cta_order=[1, 0])
    assert b._cga(2).bases["block"] == [[0, 1], [0, 0], [1, 0]]
    L = b.to_linear((2, 64))
    assert L.bases["block"] == [[0, 32], [0, 0], [1, 0]]
    # CTAsPerCGA = [2, 1], CTASplitNum = [1, 1]: both blocks hold the same data
    r = BlockedLayout([1, 1], [32, 1], [1, 1], [1, 0], ctas_per_cga=[2, 1], cta_split_num=[1, 1])
    assert r.to_linear((32, 1)).bases["block"] == [[0, 0]]
    # the same tiling as Gluon cga_layout bases
    g = BlockedLayout([1, 1], [1, 32], [1, 1], [1, 0], cga_layout=[[0, 1], [0, 0], [1, 0]])
    assert g.to_linear((2, 64)) == L


# ------------------------------------------------------------- "Linear Layouts in Triton" (notes)
def test_product_examples():
    i, o = "i", "o"
    div4 = LinearLayout.zeros_1d(4, i, o) * LinearLayout.identity_1d(2, i, o)
    mod4 = LinearLayout.identity_1d(4, i, o) * LinearLayout.zeros_1d(2, i, o)
    both = LinearLayout.identity_1d(4, i, "o1") * LinearLayout.identity_1d(8, i, "o2")
    assert [div4.apply(i=x)["o"] for x in range(8)] == [x // 4 for x in range(8)]
    assert [mod4.apply(i=x)["o"] for x in range(8)] == [x % 4 for x in range(8)]
    assert [(both.apply(i=x)["o1"], both.apply(i=x)["o2"]) for x in range(32)] == [(x % 4, x // 4) for x in range(32)]


SWIZZLE_TABLE_1 = [  # vec=1, perPhase=2, maxPhase=2, order=[1,0]; 8 rows of 4
    [0, 1, 2, 3], [4, 5, 6, 7], [9, 8, 11, 10], [13, 12, 15, 14],
    [16, 17, 18, 19], [20, 21, 22, 23], [25, 24, 27, 26], [29, 28, 31, 30]]
SWIZZLE_TABLE_2 = [  # vec=2, perPhase=1, maxPhase=4, order=[1,0]; 4 rows of 8
    [0, 1, 2, 3, 4, 5, 6, 7], [10, 11, 8, 9, 14, 15, 12, 13],
    [20, 21, 22, 23, 16, 17, 18, 19], [30, 31, 28, 29, 26, 27, 24, 25]]


@pytest.mark.parametrize("params, table", [((1, 2, 2), SWIZZLE_TABLE_1), ((2, 1, 4), SWIZZLE_TABLE_2)])
def test_swizzled_shared_offset_tables(params, table):
    rows, cols = len(table), len(table[0])
    L = SwizzledSharedLayout(*params, [1, 0]).to_linear((rows, cols))
    for i in range(rows):
        for p in range(cols):
            # slot p of row i holds logical element table[i][p] (an involution per row)
            assert L.apply(offset=i * cols + p) == {"dim0": i, "dim1": table[i][p] - i * cols}


def test_blocked_with_cga_table():
    # sizePerThread={2,2}, threadsPerWarp={8,4}, warpsPerCTA={1,2}, CTAsPerCGA={2,2},
    # CTASplitNum={2,2}, order={1,0}: 32x32 over 2x2 CTAs; every CTA's 16x16 piece shows
    # thread ids [0 0 1 1 2 2 3 3 ; 32 32 33 33 ...] on rows 0-1, [4 4 5 5 ...] on rows 2-3
    L = BlockedLayout([2, 2], [8, 4], [1, 2], [1, 0], ctas_per_cga=[2, 2], cta_split_num=[2, 2]).to_linear((32, 32))
    rows = {0: [0, 0, 1, 1, 2, 2, 3, 3, 32, 32, 33, 33, 34, 34, 35, 35],
            2: [4, 4, 5, 5, 6, 6, 7, 7, 36, 36, 37, 37, 38, 38, 39, 39],
            14: [28, 28, 29, 29, 30, 30, 31, 31, 60, 60, 61, 61, 62, 62, 63, 63]}
    owner = {}
    for block in range(4):
        for warp in range(2):
            for lane in range(32):
                for reg in range(4):
                    p = L.apply(register=reg, lane=lane, warp=warp, block=block)
                    owner[(block, p["dim0"], p["dim1"])] = lane + 32 * warp
    for block in range(4):
        bi, bj = block >> 1, block & 1          # CTAOrder [1, 0]: block bit 0 walks dim1
        for r, ids in rows.items():
            for rr in (r, r + 1):
                assert [owner[(block, 16 * bi + rr, 16 * bj + c)] for c in range(16)] == ids


def test_mfma_tables():
    # 32x32: rows 4k..4k+3 belong to lanes 0..31 (k even) or 32..63 (k odd), lane n on column n
    L = AMDMFMALayout(2, [32, 32], False, [1, 1]).to_linear((32, 32))
    assert L.sublayout(["register", "lane"], ["dim0", "dim1"]).bases == {
        "register": [[1, 0], [2, 0], [8, 0], [16, 0]],
        "lane": [[0, 1], [0, 2], [0, 4], [0, 8], [0, 16], [4, 0]]}
    for lane in range(64):
        for reg in range(16):
            p = L.apply(register=reg, lane=lane)
            assert p["dim1"] == lane % 32 and (p["dim0"] // 4) % 2 == lane // 32
    # 16x16: rows 4k..4k+3 belong to lanes 16k..16k+15
    L = AMDMFMALayout(2, [16, 16], False, [1, 1]).to_linear((16, 16))
    assert L.sublayout(["register", "lane"], ["dim0", "dim1"]).bases == {
        "register": [[1, 0], [2, 0]], "lane": [[0, 1], [0, 2], [0, 4], [0, 8], [4, 0], [8, 0]]}
    for lane in range(64):
        for reg in range(4):
            p = L.apply(register=reg, lane=lane)
            assert p["dim1"] + 16 * (p["dim0"] // 4) == lane


def test_slice_example(monkeypatch):
    # parent: threads 0..15 in a row-major 4x4 tile; squeezing dim 0 leaves column j held
    # by threads {j, 4+j, 8+j, 12+j}; a length-8 tensor wraps around
    monkeypatch.setattr(distributed, "WARP_SIZES", None)
    S = SliceLayout(0, BlockedLayout([1, 1], [4, 4], [1, 1], [1, 0]))
    L = S.to_linear((8,))
    holders = {}
    for lane in range(16):
        for reg in range(2):
            holders.setdefault(L.apply(register=reg, lane=lane)["dim0"], set()).add(lane)
    assert holders == {j: {j % 4, 4 + j % 4, 8 + j % 4, 12 + j % 4} for j in range(8)}
