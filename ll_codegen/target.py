"""Target descriptions: what differs between CUDA and HIP is data, not code paths."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """One GPU target.

    Shared-memory model (both vendors, paper 000 App. 9.2): ``banks`` banks of
    ``bank_bytes`` bytes; a warp-wide access of ``v`` bytes per thread is served
    in phases of ``wavefront_bytes // max(v, bank_bytes)`` consecutive lanes;
    within a phase, each bank serves one distinct 4-byte word per wavefront.
    """

    name: str            # "cuda" or "hip"
    arch: str            # "sm_90", "gfx90a", ...
    warp_size: int
    banks: int = 32
    bank_bytes: int = 4
    wavefront_bytes: int = 128
    max_vector_bytes: int = 16
    has_ldmatrix: bool = False

    @property
    def is_cuda(self) -> bool:
        return self.name == "cuda"


CUDA_ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90")
HIP_WAVE64 = ("gfx90a", "gfx940", "gfx942")
HIP_WAVE32 = ("gfx1030", "gfx1100")


def get_target(name: str = "cuda", arch: str | None = None) -> Target:
    """``cuda`` (default sm_90) or ``hip`` (default gfx90a); raises ValueError."""
    if name == "cuda":
        arch = arch or "sm_90"
        if arch not in CUDA_ARCHS:
            raise ValueError(f"unknown CUDA arch {arch!r} (known: {', '.join(CUDA_ARCHS)})")
        return Target("cuda", arch, 32, has_ldmatrix=arch == "sm_90")
    if name == "hip":
        arch = arch or "gfx90a"
        if arch in HIP_WAVE64:
            return Target("hip", arch, 64)
        if arch in HIP_WAVE32:
            return Target("hip", arch, 32)
        raise ValueError(f"unknown HIP arch {arch!r} (known: {', '.join(HIP_WAVE64 + HIP_WAVE32)})")
    raise ValueError(f"unknown target {name!r} (known: cuda, hip)")
