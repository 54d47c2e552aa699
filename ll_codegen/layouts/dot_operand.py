"""``dot_operand`` (``#ttg.dot_op``): operand A or B of a dot whose
accumulator layout (blocked, nvidia_mma, amd_mfma or amd_wmma) is the parent.
The conversion steps are described in ``ll_codegen.layouts.base``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

from ll_codegen.core.layout import LinearLayout, identity_nd
from ll_codegen.core.limits import short
from ll_codegen.layouts.amd import AMDMFMALayout, AMDWMMALayout
from ll_codegen.layouts.base import (Layout, LayoutError, broadcast_dot, check_shape, combine, dot_operand_order,
                                     id_1d, is_pow2, matrix_order, zero_out_dim)
from ll_codegen.layouts.distributed import BlockedLayout
from ll_codegen.layouts.nvidia import NVMMADistributedLayout, mma_tile


# --------------------------------------------------------------- dot operand
@dataclass(frozen=True)
class DotOperandLayout(Layout):
    """Triton's ``#ttg.dot_op``: operand A (``operand_index`` 0, M x K) or B
    (1, K x N) of a dot whose accumulator has layout ``parent``.

    * blocked parent (FMA dot, ``k_width`` 0): each thread holds the whole K
      extent; lanes and warps broadcast along K.
    * ``nvidia_mma`` parent: mma tile of A = 16 x 8k_width, B = 8k_width x 8
      (only A for wgmma): k_width registers along K, 4 lanes along K, 8 lanes
      along M/N; warps as the accumulator's but broadcast along K.
    * ``amd_mfma`` parent: k_width registers along K, lanes M/N-first then
      ``64/nonK`` along K, registers repeat K; warps not broadcast.
    * ``amd_wmma`` parent: k_width registers along K, 16 lanes along M/N, the
      other half-wave duplicates K (v1) or continues K (v2/v3).
    """

    kind: ClassVar[str] = "dot_operand"
    operand_index: int
    parent: Layout
    k_width: int = 0

    def __post_init__(self):
        if not isinstance(self.operand_index, int) or isinstance(self.operand_index, bool) \
                or self.operand_index not in (0, 1):
            raise LayoutError("operand_index", f"{short(self.operand_index)} is not 0 (A) or 1 (B)")
        if not isinstance(self.k_width, int) or isinstance(self.k_width, bool):
            raise LayoutError("k_width", f"expected an integer, got {short(self.k_width)}")
        p = self.parent
        if not isinstance(p, (BlockedLayout, NVMMADistributedLayout, AMDMFMALayout, AMDWMMALayout)):
            raise LayoutError("parent", f"expected a blocked, nvidia_mma, amd_mfma or amd_wmma layout, "
                                        f"got {getattr(p, 'kind', None) or short(p)}")
        if isinstance(p, BlockedLayout):
            if self.k_width != 0:
                raise LayoutError("k_width", "must be 0 for a blocked (FMA) parent")
            if p.rank < 2:
                raise LayoutError("parent", "a dot operand needs rank >= 2")
            return
        if not is_pow2(self.k_width) or self.k_width > 64:
            raise LayoutError("k_width", f"{short(self.k_width)} is not a power of two from 1 to 64")
        if isinstance(p, AMDWMMALayout) and p.version < 3 and self.k_width not in ((8, 16) if p.version == 1 else (4, 8, 16)):
            raise LayoutError("k_width", f"{self.k_width}: a wmma v{p.version} operand needs k_width "
                                         f"{'8 or 16' if p.version == 1 else '4, 8 or 16'}")
        if isinstance(p, NVMMADistributedLayout) and p.is_hopper and self.operand_index == 1:
            raise LayoutError("operand_index", "wgmma takes operand B from shared memory; only A (0) can be in registers")

    @property
    def rank(self) -> int:
        return self.parent.rank

    def to_linear(self, shape: Sequence[int]) -> LinearLayout:
        shape = check_shape(shape, self.rank)
        p, rank, op, kw = self.parent, self.rank, self.operand_index, self.k_width
        k_idx = rank - 1 if op == 0 else rank - 2
        cga = p._cga(rank)
        if not isinstance(p, AMDMFMALayout):
            # Triton's getCTALayout of a dot operand: the CTAs that split the
            # accumulator along K would each need the whole K extent, so the
            # K component of every CGA basis is zeroed (those CTAs hold
            # copies) and registers cover K.  The mfma conversion keeps them.
            cga = zero_out_dim(cga, f"dim{k_idx}")
        if isinstance(p, BlockedLayout):
            size = list(p.size_per_thread)
            size[k_idx] = shape[k_idx]
            rep = [f"dim{d}" for d in p.order]
            cta = (identity_nd("register", size, p.order).transpose_outs(rep)
                   * broadcast_dot(p.threads_per_warp, p.order, k_idx, "lane").transpose_outs(rep)
                   * broadcast_dot(p.warps_per_cta, p.order, k_idx, "warp").transpose_outs(rep))
            return combine(cta, cga, shape)
        order = dot_operand_order(op, rank)
        dk, dnk = f"dim{order[0]}", f"dim{order[1]}"
        if isinstance(p, NVMMADistributedLayout):
            tile = [1] * rank
            tile[-2:] = [16, kw * 8] if op == 0 else [kw * 8, 8]
            cta = mma_tile(rank, tile, kw, order, order)
            warps = broadcast_dot(p.warps_per_cta, matrix_order(rank, not p.is_hopper), k_idx, "warp")
            return combine(cta * warps.transpose_outs(cta.out_dims), cga, shape)
        if isinstance(p, AMDMFMALayout):
            m, n = p.instr_shape[0], p.instr_shape[1]
            nonk = m if op == 0 else n
            tile = id_1d(kw, "register", dk) * (id_1d(nonk, "lane", dnk) * id_1d(64 // nonk, "lane", dk))
            k_tile = 64 // nonk * kw
            if (m, n, op) in ((64, 4, 0), (4, 64, 1)):
                tile = tile * id_1d(16, "register", dk)
                k_tile *= 16
            if shape[k_idx] > k_tile:
                tile = tile * id_1d(shape[k_idx] // k_tile, "register", dk)
            nonk_idx = rank - 2 if op == 0 else rank - 1
            tile = (tile * id_1d(p.tiles_per_warp[nonk_idx], "register", dnk)).transpose_outs([dk, dnk])
            if rank == 3:
                tile = tile * id_1d(1, "register", "dim0") * id_1d(1, "lane", "dim0")
            cta = tile * identity_nd("warp", p.warps_per_cta, matrix_order(rank, True))
            return combine(cta, p._cga(rank), shape)
        # AMD WMMA
        nonk = p.instr_shape[0] if op == 0 else p.instr_shape[1]
        depth = 32 // nonk
        tile = id_1d(kw, "register", dk) * id_1d(nonk, "lane", dnk)
        tile = tile * (LinearLayout.zeros_1d(depth, "lane", dk) if p.version == 1 else id_1d(depth, "lane", dk))
        tile = tile * id_1d(p.instr_shape[2] // (depth * kw), "register", dk)
        if rank == 3:
            tile = tile * id_1d(1, "register", "dim0") * id_1d(1, "lane", "dim0")
        rep = [f"dim{d}" for d in order]
        warps = broadcast_dot(p.warps_per_cta, matrix_order(rank, True), k_idx, "warp")
        return combine(tile.transpose_outs(rep) * warps.transpose_outs(rep), cga, shape)
