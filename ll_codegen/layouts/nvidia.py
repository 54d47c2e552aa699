"""NVIDIA accumulator layouts: ``nvidia_mma`` (``#ttg.nvidia_mma``, mma.sync
v2 and wgmma v3), and ``mma_tile`` (Triton's ``nvidiaMmaTile``), which the
``dot_operand`` conversion shares.  The conversion steps are described in
``ll_codegen.layouts.base``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional, Sequence

from ll_codegen.core.layout import LinearLayout, identity_nd
from ll_codegen.layouts.base import (CgaFields, Layout, LayoutError, check_ints, check_shape, check_warps, combine,
                                     id_1d, matrix_order, set_field)


# ----------------------------------------------------------------- NVIDIA mma
def mma_tile(rank: int, tile_shape: Sequence[int], k_width: int, order: Sequence[int],
              rep_order: Sequence[int]) -> LinearLayout:
    """Triton's ``nvidiaMmaTile``; with ``inner = order[0]``, ``outer = order[1]``,
    ``m = tile[outer]``, ``n = tile[inner]``: k_width registers along inner,
    4 lanes along inner, 8 lanes along outer, m/8 registers along outer,
    n/(4 k_width) registers along inner.  Output dims in ``rep_order``."""
    inner, outer = order[0], order[1]
    m, n = tile_shape[outer], tile_shape[inner]
    L = identity_nd("register", [1] * rank, rep_order)
    return (L * id_1d(k_width, "register", f"dim{inner}") * id_1d(4, "lane", f"dim{inner}")
            * id_1d(8, "lane", f"dim{outer}") * id_1d(m // 8, "register", f"dim{outer}")
            * id_1d(n // (k_width * 4), "register", f"dim{inner}"))


@dataclass(frozen=True)
class NVMMADistributedLayout(CgaFields, Layout):
    """Triton's ``#ttg.nvidia_mma`` accumulator (Gluon ``NVMMADistributedLayout``).

    ``version`` ``[2, 0]`` (Ampere ``mma.sync``; ``instr_shape`` = [.., 16, 8])
    or ``[3, 0]`` (Hopper ``wgmma``; ``instr_shape`` = [16, N, K]).  Tile
    (``mma_tile`` with k_width 2) of one m16nN block: ``register 1 -> (0,1)``,
    ``lane 1,2 -> (0,2),(0,4)``, ``lane 4,8,16 -> (1,0),(2,0),(4,0)``,
    ``register -> (8,0)``, then ``(0,8), (0,16) ..`` up to N.  Warps in
    row-major order (Ampere) or column-major (Hopper: warp groups along M).
    """

    kind: ClassVar[str] = "nvidia_mma"
    version: Sequence[int]
    warps_per_cta: Sequence[int]
    instr_shape: Sequence[int]
    cga_layout: Optional[Sequence[Sequence[int]]] = None
    ctas_per_cga: Optional[Sequence[int]] = None
    cta_split_num: Optional[Sequence[int]] = None
    cta_order: Optional[Sequence[int]] = None

    def __post_init__(self):
        v = self.version
        if isinstance(v, int) and not isinstance(v, bool):
            v = (v, 0)
        v = check_ints("version", v, 2, pow2=False)
        if v[0] not in (2, 3) or v[1] > 15:
            raise LayoutError("version", f"{list(v)}: supported versions are [2, 0] (mma.sync) and [3, 0] (wgmma) "
                                         f"(minor 0 to 15)")
        set_field(self, "version", v)
        warps = check_ints("warps_per_cta", self.warps_per_cta)
        rank = len(warps)
        set_field(self, "warps_per_cta", warps)
        check_warps("warps_per_cta", warps, 32)
        instr = check_ints("instr_shape", self.instr_shape)
        set_field(self, "instr_shape", instr)
        if v[0] == 2:
            if rank not in (2, 3):
                raise LayoutError("warps_per_cta", f"mma v2 needs rank 2 or 3, got {rank}")
            if len(instr) != rank or tuple(instr[-2:]) != (16, 8) or any(s != 1 for s in instr[:-2]):
                raise LayoutError("instr_shape", f"{list(instr)}: mma v2 expects {[1] * (rank - 2) + [16, 8]}")
        else:
            if rank != 2:
                raise LayoutError("warps_per_cta", f"wgmma (v3) needs rank 2, got {rank}")
            if warps[0] % 4:
                raise LayoutError("warps_per_cta", f"wgmma needs whole warp groups along M (a multiple of 4), got {warps[0]}")
            if len(instr) != 3 or instr[0] != 16 or not 8 <= instr[1] <= 256:
                raise LayoutError("instr_shape", f"{list(instr)}: wgmma expects [16, N, K] with N a power of two in 8..256")
        self._check_cga(rank)

    @property
    def rank(self) -> int:
        return len(self.warps_per_cta)

    @property
    def is_hopper(self) -> bool:
        return self.version[0] == 3

    def tile_shape(self) -> list[int]:
        return list(self.instr_shape[:2]) if self.is_hopper else list(self.instr_shape)

    def cta_tile(self) -> LinearLayout:
        rank = self.rank
        order = matrix_order(rank, True)
        L = mma_tile(rank, self.tile_shape(), 2, order, order)
        warp_order = matrix_order(rank, row_major=not self.is_hopper)
        return L * identity_nd("warp", self.warps_per_cta, warp_order).transpose_outs(L.out_dims)

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        shape = check_shape(shape, self.rank)
        return combine(self.cta_tile(), self._cga(self.rank), shape)
