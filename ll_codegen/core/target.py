"""Target descriptions: what differs between CUDA and HIP is data, not code paths."""
from __future__ import annotations

from dataclasses import dataclass

from ll_codegen.core.limits import short


@dataclass(frozen=True)
class Target:
    """One GPU target.

    Shared-memory model (both vendors, paper 000 App. 9.2): ``banks`` banks of
    ``bank_bytes`` bytes; a warp-wide access of ``v`` bytes per thread is served
    in phases of ``wavefront_bytes // max(v, bank_bytes)`` consecutive lanes;
    within a phase, each bank serves one distinct 4-byte word per wavefront.
    ``bank_model`` says where the numbers come from and whether they were
    measured (``llgen plan`` prints it for HIP).

    NVIDIA (sm_80..sm_90): 32 banks x 4 B, 128 B per wavefront; measured with
    Nsight Compute on an H100 (``gpu_tests/RESULTS.md``).  ``load_quad_merge``:
    an 8- or 16-byte ``ld.shared`` whose every quad of lanes (4k..4k+3) reads
    at most two distinct addresses -- lane bit 0 or 1 a broadcast -- is served
    in phases of twice as many lanes (16 at 16 B, 32 at 8 B).  Stores never
    merge, nor do loads whose broadcast lane bits are higher (measured on an
    H100 with one-instruction probes, ``gpu_tests/NCU_NOTES.md``).

    AMD LDS, from AMD's documents, NOT measured on AMD hardware:
    * CDNA2/CDNA3 (gfx90a, gfx940/gfx942, wave64): 32 banks x 4 B (bank = address
      bits 6:2); ds_read/ds_write_b32 are checked for conflicts per half wave
      (lanes 0-31, 32-63), b64 per 16 lanes, b128 per 8 lanes (8 phases of 8
      lanes for ds_write_b128) -- the same phases as the formula above with
      128 B wavefronts.  Sources: AMD Accelerated Parallel Processing OpenCL
      Programming Guide, "Local Memory (LDS) Optimization" (GCN, 32 banks,
      half-wave conflict check); ROCm Composable Kernel documentation,
      "Understanding AMD GPU LDS and Bank Conflicts" (phases per instruction
      width on MI-series GPUs).
    * RDNA2/RDNA3 (gfx1030, gfx1100, wave32): modelled the same (32 banks x
      4 B per 128 B wavefront); AMD's RDNA whitepapers give the LDS as two
      halves of 32 banks per work-group processor.
    """

    name: str            # "cuda" or "hip"
    arch: str            # "sm_90", "gfx90a", ...
    warp_size: int
    banks: int = 32
    bank_bytes: int = 4
    wavefront_bytes: int = 128
    max_vector_bytes: int = 16
    has_ldmatrix: bool = False      # ldmatrix[.trans]: sm_75 and newer
    has_stmatrix: bool = False      # stmatrix[.trans]: sm_90
    has_hopper_async: bool = False  # TMA (cp.async.bulk.tensor), wgmma, mbarrier tx-counts: sm_90a only
    load_quad_merge: bool = False   # see above (NVIDIA)
    bank_model: str = "32 banks x 4 B, 128 B wavefronts (measured with Nsight Compute on an H100)"

    @property
    def is_cuda(self) -> bool:
        return self.name == "cuda"

    def merges_quads(self, access_bytes: int, load: bool) -> bool:
        """Whether such an access may be served in double phases (``load_quad_merge``)."""
        return load and self.load_quad_merge and access_bytes in (8, 16)


CUDA_ARCHS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")
LDS_MODEL = ("LDS 32 banks x 4 B, phases of 128 B (32 lanes at b32, 16 at b64, 8 at b128), "
             "from AMD's documents; not yet measured on AMD hardware")
HIP_WAVE64 = ("gfx90a", "gfx940", "gfx942")
HIP_WAVE32 = ("gfx1030", "gfx1100")


def get_target(name: str = "cuda", arch: str | None = None) -> Target:
    """``cuda`` (default sm_90) or ``hip`` (default gfx90a); raises ValueError.

    ``sm_90a`` is sm_90 plus the architecture-specific features wgmma and TMA
    need (PTX ``.target sm_90a``; code for it runs only on sm_90 devices)."""
    if name == "cuda":
        arch = arch or "sm_90"
        if arch not in CUDA_ARCHS:
            raise ValueError(f"unknown CUDA arch {short(arch)} (known: {', '.join(CUDA_ARCHS)})")
        return Target("cuda", arch, 32, has_ldmatrix=True, has_stmatrix=arch.startswith("sm_90"),
                      load_quad_merge=True, has_hopper_async=arch == "sm_90a")
    if name == "hip":
        arch = arch or "gfx90a"
        if arch in HIP_WAVE64:
            return Target("hip", arch, 64, bank_model=LDS_MODEL)
        if arch in HIP_WAVE32:
            return Target("hip", arch, 32, bank_model=LDS_MODEL)
        raise ValueError(f"unknown HIP arch {short(arch)} (known: {', '.join(HIP_WAVE64 + HIP_WAVE32)})")
    raise ValueError(f"unknown target {short(name)} (known: cuda, hip)")
