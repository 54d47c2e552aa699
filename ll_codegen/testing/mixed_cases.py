"""Mixed-input MMA cases (``llgen mma --a-dtype``) as spec mappings: the accumulator, A (a shared tile
or a blocked register layout of the narrow elements) and B of one CTA tile, for wgmma and mma.sync --
one catalogue for the CPU tests (``tests/test_mma_mixed.py``) and the GPU table
(``gpu_tests/test_mma_mixed.py``), so every case the GPU runs is one the host runtime can run."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ll_codegen.core.dtypes import UPCAST_SOURCES

#: the instruction types
MIXED_DTYPES = ("f16", "bf16")
#: (kind, M, N, K): small to the largest tiles one CTA holds.  A 256 x 256 f32 accumulator is the whole
#: register file (64 Ki registers); mma.sync runs it in 16 warps (ptxas spills what does not fit), but
#: wgmma's accumulators cannot spill (ptxas refuses the 4-warp-group tile), so its largest is 128 x 256.
SHAPES = (("mma.sync", 16, 16, 16), ("mma.sync", 64, 64, 64), ("mma.sync", 128, 128, 128), ("mma.sync", 256, 256, 128),
          ("wgmma", 64, 16, 16), ("wgmma", 64, 64, 64), ("wgmma", 128, 256, 128))


@dataclass(frozen=True)
class MixedCase:
    """One mixed-input MMA: ``acc += upcast(A) @ B`` of ``a_dtype`` A (``a_space``: shared or
    registers) and ``dtype`` B on ``kind`` (wgmma or mma.sync) over M x N x K; ``scales`` as
    ``--scales`` (or None)."""
    kind: str
    m: int
    n: int
    k: int
    a_dtype: str
    dtype: str
    a_space: str = "shared"
    scales: str | None = None

    @property
    def name(self) -> str:
        s = "" if self.scales is None else "_s" + self.scales.replace(",", "_")
        return (f"mx_{'wg' if self.kind == 'wgmma' else 'ms'}{self.m}x{self.n}x{self.k}_{self.a_dtype}_{self.dtype}"
                f"_{self.a_space[0]}{s}")

    @property
    def warps(self) -> int:
        """wgmma: a warp group per 64 rows; mma.sync: up to 4 warps along M, 16 (a warp per 16 rows, 128
        accumulator registers a thread, the most 512 threads have) for 256 rows."""
        if self.kind == "wgmma":
            return 4 * max(1, self.m // 64)
        return 16 if self.m >= 256 else max(1, min(4, self.m // 16))

    def specs(self) -> dict[str, Any]:
        """``plan_mma``'s keyword arguments: acc, a, b (spec mappings), dtype, a_dtype, scales."""
        m, n, k, w = self.m, self.n, self.k, self.warps
        if self.kind == "wgmma":
            acc = {"kind": "nvidia_mma", "version": [3, 0], "warps_per_cta": [w, 1], "instr_shape": [16, min(n, 256), 16],
                   "shape": [m, n]}
            b = {"kind": "nvmma_shared", "swizzle_byte_width": min(128, 2 * k), "element_bitwidth": 16,
                 "transposed": True, "shape": [k, n]}
        else:
            acc = {"kind": "nvidia_mma", "version": [2, 0], "warps_per_cta": [w, 1], "instr_shape": [16, 8],
                   "shape": [m, n]}
            b = {"kind": "dot_operand", "operand_index": 1, "k_width": 2, "parent": dict(acc), "shape": [k, n]}
            b["parent"].pop("shape")
        if self.a_space == "shared":
            a = {"kind": "swizzled_shared", "vec": 1, "per_phase": 1, "max_phase": 1, "order": [1, 0], "shape": [m, k]}
        else:
            along_k = min(32, k // 8)
            a = {"kind": "blocked", "size_per_thread": [1, 8], "threads_per_warp": [32 // along_k, along_k],
                 "warps_per_cta": [w, 1], "order": [1, 0], "shape": [m, k]}
        return dict(acc=acc, a=a, b=b, dtype=self.dtype, a_dtype=self.a_dtype, scales=self.scales)


def table_cases() -> list[MixedCase]:
    """Every A type x instruction type x shape, A from shared memory on wgmma and alternately from
    shared memory and registers on mma.sync; plus the scaled formats (int4 groups of 128 bf16,
    mxfp4: e2m1 groups of 32 e8m0) on both instructions."""
    out = []
    for kind, m, n, k in SHAPES:
        for i, a in enumerate(UPCAST_SOURCES):
            for d in MIXED_DTYPES:
                space = "registers" if kind == "mma.sync" and i % 2 else "shared"
                out.append(MixedCase(kind, m, n, k, a, d, space))
    for kind, m, n, k in SHAPES:
        if k >= 128:
            out.append(MixedCase(kind, m, n, k, "i4", "bf16", "shared", "128,bf16"))
        if k >= 32:
            out.append(MixedCase(kind, m, n, k, "e2m1", "bf16", "shared", "32,e8m0"))
    return out
