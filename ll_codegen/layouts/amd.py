"""AMD accumulator layouts: ``amd_mfma`` (``#ttg.amd_mfma``, CDNA, wave64)
and ``amd_wmma`` (``#ttg.amd_wmma``, RDNA, wave32).  The conversion steps are
described in ``ll_codegen.layouts.base``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Optional, Sequence

from ll_codegen.core import limits
from ll_codegen.core.layout import LinearLayout, identity_nd
from ll_codegen.core.limits import short
from ll_codegen.layouts.base import (CgaFields, Layout, LayoutError, check_int, check_ints, check_shape, check_warps,
                                     combine, id_1d, matrix_order, set_field)


# ---------------------------------------------------------------- AMD MFMA
_MFMA_SHAPES = ((32, 32), (16, 16), (64, 4), (4, 64))


@dataclass(frozen=True)
class AMDMFMALayout(CgaFields, Layout):
    """Triton's ``#ttg.amd_mfma`` (Gluon ``AMDMFMALayout``), wave64.

    ``instr_shape`` = [M, N] or [M, N, K] with (M, N) in 32x32, 16x16, 64x4
    (must be ``transposed``), 4x64; ``element_bitwidth`` 32 (4 consecutive
    rows per lane, ``height`` 4) or 64 (height 1).  Non-transposed tile:
    ``height`` registers along M, lanes N first then ``64/N`` along M, then
    ``M*N/(64*height)`` registers along M; transposed swaps M and N.  Then
    ``tiles_per_warp[N]`` registers and ``warps_per_cta[N]`` warps along N,
    registers up to ``shape[N]``, ``tiles_per_warp[M]`` registers and the M
    warps (N-contiguous tile order).  Rank 3 adds a batch dim 0 (warps only).
    """

    kind: ClassVar[str] = "amd_mfma"
    version: int
    instr_shape: Sequence[int]
    transposed: bool
    warps_per_cta: Sequence[int]
    element_bitwidth: Optional[int] = None
    tiles_per_warp: Optional[Sequence[int]] = None
    cga_layout: Optional[Sequence[Sequence[int]]] = None
    ctas_per_cga: Optional[Sequence[int]] = None
    cta_split_num: Optional[Sequence[int]] = None
    cta_order: Optional[Sequence[int]] = None

    def __post_init__(self):
        if not isinstance(self.version, int) or self.version not in (1, 2, 3, 4) or isinstance(self.version, bool):
            raise LayoutError("version", f"{short(self.version)} is not in 1..4 (gfx908, gfx90a, gfx942, gfx950)")
        instr = check_ints("instr_shape", self.instr_shape)
        if len(instr) not in (2, 3) or tuple(instr[:2]) not in _MFMA_SHAPES:
            raise LayoutError("instr_shape", f"{list(instr)}: (M, N) must be one of {[list(s) for s in _MFMA_SHAPES]}")
        set_field(self, "instr_shape", instr)
        if not isinstance(self.transposed, bool):
            raise LayoutError("transposed", f"expected true/false, got {short(self.transposed)}")
        if tuple(instr[:2]) == (64, 4) and not self.transposed:
            raise LayoutError("transposed", "a 64x4 mfma layout must be transposed")
        warps = check_ints("warps_per_cta", self.warps_per_cta)
        rank = len(warps)
        if rank not in (2, 3):
            raise LayoutError("warps_per_cta", f"mfma needs rank 2 or 3, got {rank}")
        set_field(self, "warps_per_cta", warps)
        check_warps("warps_per_cta", warps, 64)
        ebw = 32 if self.element_bitwidth is None else check_int("element_bitwidth", self.element_bitwidth, (32, 64))
        set_field(self, "element_bitwidth", ebw)
        tpw = (1,) * rank if self.tiles_per_warp is None else self.tiles_per_warp
        set_field(self, "tiles_per_warp", check_ints("tiles_per_warp", tpw, rank))
        if math.prod(self.tiles_per_warp) > limits.MAX_REGISTERS:
            raise LayoutError("tiles_per_warp", f"{list(self.tiles_per_warp)}: at most {limits.MAX_REGISTERS} tiles")
        self._check_cga(rank)

    @property
    def rank(self) -> int:
        return len(self.warps_per_cta)

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        shape = check_shape(shape, self.rank)
        rank = self.rank
        mi, ni = rank - 2, rank - 1
        dm, dn = f"dim{mi}", f"dim{ni}"
        m, n = self.instr_shape[0], self.instr_shape[1]
        height = 1 if self.element_bitwidth == 64 else 4
        tiles = m * n // (64 * height)
        if not self.transposed:
            tile = id_1d(height, "register", dm) * (id_1d(n, "lane", dn) * id_1d(64 // n, "lane", dm))
            tile = tile * id_1d(tiles, "register", dm)
        else:
            tile = id_1d(height, "register", dn) * (id_1d(m, "lane", dm) * id_1d(64 // m, "lane", dn))
            tile = tile * id_1d(tiles, "register", dn)
        tile = tile.transpose_outs([dn, dm])
        tpw, wpc = self.tiles_per_warp, self.warps_per_cta
        tile = tile * id_1d(tpw[ni], "register", dn) * id_1d(wpc[ni], "warp", dn)
        tile = tile * id_1d(shape[ni] // (n * wpc[ni] * tpw[ni]), "register", dn)
        tile = tile * id_1d(tpw[mi], "register", dm) * id_1d(wpc[mi], "warp", dm)
        if rank == 3:
            tile = tile * id_1d(1, "register", "dim0") * id_1d(1, "lane", "dim0") * id_1d(wpc[0], "warp", "dim0")
        return combine(tile, self._cga(rank), shape)


# ---------------------------------------------------------------- AMD WMMA
@dataclass(frozen=True)
class AMDWMMALayout(CgaFields, Layout):
    """Triton's ``#ttg.amd_wmma`` (Gluon ``AMDWMMALayout``), wave32, 16x16 output.

    Version 1 (RDNA3): ``register -> (2,0),(4,0),(8,0)``, ``lane -> (0,1)..(0,8),
    (1,0)`` (rows interleaved between the two half-waves); versions 2 (RDNA4)
    and 3 (gfx1250): ``register -> (1,0),(2,0),(4,0)``, ``lane -> (0,1)..(0,8),
    (8,0)``.  ``transposed`` swaps the two dims.  Warps row-major; the tile
    repeats N first.
    """

    kind: ClassVar[str] = "amd_wmma"
    version: int
    transposed: bool
    warps_per_cta: Sequence[int]
    instr_shape: Optional[Sequence[int]] = None
    cga_layout: Optional[Sequence[Sequence[int]]] = None
    ctas_per_cga: Optional[Sequence[int]] = None
    cta_split_num: Optional[Sequence[int]] = None
    cta_order: Optional[Sequence[int]] = None

    def __post_init__(self):
        if not isinstance(self.version, int) or self.version not in (1, 2, 3) or isinstance(self.version, bool):
            raise LayoutError("version", f"{short(self.version)} is not 1, 2 or 3 (RDNA3, RDNA4, gfx1250)")
        if not isinstance(self.transposed, bool):
            raise LayoutError("transposed", f"expected true/false, got {short(self.transposed)}")
        warps = check_ints("warps_per_cta", self.warps_per_cta)
        if len(warps) not in (2, 3):
            raise LayoutError("warps_per_cta", f"wmma needs rank 2 or 3, got {len(warps)}")
        set_field(self, "warps_per_cta", warps)
        check_warps("warps_per_cta", warps, 32)
        if self.instr_shape is None and self.version == 3:
            raise LayoutError("instr_shape", "wmma v3 needs instr_shape [16, 16, K] with K 32, 64 or 128")
        instr = check_ints("instr_shape", (16, 16, 16) if self.instr_shape is None else self.instr_shape, 3)
        if instr[:2] != (16, 16) or (self.version < 3 and instr[2] != 16) or (self.version == 3 and instr[2] not in (32, 64, 128)):
            raise LayoutError("instr_shape", f"{list(instr)}: wmma v1/v2 is [16, 16, 16], v3 is [16, 16, K] with K 32, 64 or 128")
        set_field(self, "instr_shape", instr)
        self._check_cga(len(warps))

    @property
    def rank(self) -> int:
        return len(self.warps_per_cta)

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        shape = check_shape(shape, self.rank)
        rank = self.rank
        t = matrix_order(rank, row_major=not self.transposed)
        outs = [f"dim{t[0]}", f"dim{t[1]}"]
        if self.version == 1:
            tile = LinearLayout({"register": [[0, 2], [0, 4], [0, 8]],
                                 "lane": [[1, 0], [2, 0], [4, 0], [8, 0], [0, 1]]}, outs)
        else:
            tile = LinearLayout({"register": [[0, 1], [0, 2], [0, 4]],
                                 "lane": [[1, 0], [2, 0], [4, 0], [8, 0], [0, 8]]}, outs)
        if rank == 3:
            tile = tile * id_1d(1, "register", "dim0") * id_1d(1, "lane", "dim0")
        rep = [f"dim{d}" for d in matrix_order(rank, True)]
        warps = identity_nd("warp", self.warps_per_cta, matrix_order(rank, True))
        return combine(tile.transpose_outs(rep) * warps.transpose_outs(rep), self._cga(rank), shape)
