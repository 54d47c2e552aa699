"""The element-type pairs of one CTA tile's MMA as spec mappings, for wgmma and mma.sync: the
accumulator, A and B -- one catalogue for the CPU tests (``tests/test_mma_mixed.py``) and the GPU table
(``gpu_tests/test_mma_mixed.py``), so every case the GPU runs is one the host runtime can run.

Two kinds of pair:

* upcast (``llgen mma --a-dtype``): A of a narrow type (a shared tile or a blocked register layout)
  upcast in registers into the A fragment of an f16 / bf16 / tf32 instruction, B of that type (tf32:
  A upcast to exact f32, one element a 32-bit register; a 4-bit A stored K-interleaved,
  ``k_interleaved``), f16 or bf16 A upcast into a tf32 instruction's, and the 4-bit A types into the
  8-bit instructions that hold them exactly (``BYTE_PAIRS``: i4, u4 into s8, u4 into u8, e2m1 into e4m3
  and e5m2; four elements a 32-bit register) (``UPCAST_PAIRS``);
* native (``NATIVE_PAIRS``): A and B in the instruction's own types -- every MMA type with itself
  (tf32: f32 bits whose low 13 mantissa bits are zero, see ``table_cases``) and the 8-bit pairs of two
  types, e4m3 x e5m2 and s8 x u8 -- A a ``dot_operand`` fragment or (wgmma) a shared tile.

276 cases (``table_cases``): 186 upcast pairs (7 A types x f16, bf16, tf32 and f16, bf16 x tf32, x 7
shapes; the 5 byte pairs x the 5 shapes whose K is a multiple of 32), 13 scaled ones (int4 with bf16 scales at the 3 shapes with K >= 128, e2m1 with e8m0 scales into
bf16 and into tf32 at the 5 with K >= 32) and 77 native pairs.  The tf32 rows are 63 upcast pairs (the 7
narrow A types and f16, bf16) and 5 scaled ones: every table shape has K a multiple of 16, so of tf32's
k-step 8, and none is missing.  The byte pairs skip the two K = 16 shapes: an 8-bit instruction's
k-step is 32 (mma.sync m16n8k32, wgmma k32), so a K = 16 tile of them cannot exist."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ll_codegen.core.dtypes import BYTE_UPCASTS, F32_ONLY_SOURCES, UPCAST_SOURCES, is_packed
from ll_codegen.plan.mma import AB_TYPES, PAIR_FAMILIES, paired_types
from ll_codegen.plan.mma_model import AB_BYTES

#: the instruction types of the upcast pairs (tf32: A upcast to exact f32, one element a register)
MIXED_DTYPES = ("f16", "bf16", "tf32")
#: (A type, instruction type) of the upcast pairs: each narrow A type into every instruction type, then
#: the 16-bit floats into tf32 (the one instruction type both are exact in)
#: (A type, 8-bit instruction type) of the 4-bit A types an 8-bit instruction holds exactly
BYTE_PAIRS = tuple((a, d) for d, srcs in BYTE_UPCASTS.items() for a in srcs)
UPCAST_PAIRS = (tuple((a, d) for a in UPCAST_SOURCES for d in MIXED_DTYPES)
                + tuple((a, "tf32") for a in F32_ONLY_SOURCES) + BYTE_PAIRS)
#: (A type, B type) the instruction multiplies as they are: each MMA type with itself, then the pairs
#: of two 8-bit types (e4m3 x e5m2, e5m2 x e4m3, s8 x u8, u8 x s8)
NATIVE_PAIRS = tuple((t, t) for t in AB_TYPES) + tuple((a, b) for f in PAIR_FAMILIES for a in f for b in f if a != b)
#: (kind, M, N, K): small to the largest tiles one CTA holds.  A 256 x 256 f32 accumulator is the whole
#: register file (64 Ki registers); mma.sync runs it in 16 warps (ptxas spills what does not fit), but
#: wgmma's accumulators cannot spill (ptxas refuses the 4-warp-group tile), so its largest is 128 x 256.
SHAPES = (("mma.sync", 16, 16, 16), ("mma.sync", 64, 64, 64), ("mma.sync", 128, 128, 128), ("mma.sync", 256, 256, 128),
          ("wgmma", 64, 16, 16), ("wgmma", 64, 64, 64), ("wgmma", 128, 256, 128))


@dataclass(frozen=True)
class MixedCase:
    """One MMA of ``a_dtype`` A (``a_space``: shared or registers) and ``dtype`` B on ``kind`` (wgmma or
    mma.sync) over M x N x K: ``acc += upcast(A) @ B`` (``scales`` as ``--scales``, or None) for an
    upcast pair, ``acc += A @ B`` for a native one (``native``)."""
    kind: str
    m: int
    n: int
    k: int
    a_dtype: str
    dtype: str
    a_space: str = "shared"
    scales: str | None = None

    @property
    def native(self) -> bool:
        """A and B are the instruction's own types (no upcast)."""
        return self.a_dtype == self.dtype or paired_types(self.a_dtype, self.dtype)

    @property
    def acc_dtype(self) -> str:
        """8-bit integers accumulate in s32, everything else in f32."""
        return "i32" if self.dtype in ("i8", "u8") else "f32"

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
        """``plan_mma``'s keyword arguments: acc, a, b (spec mappings), dtype, acc_dtype, arch, a_dtype
        (None for one type), scales."""
        m, n, k, w = self.m, self.n, self.k, self.warps
        e = AB_BYTES[self.dtype]                      # bytes of B's element (and of the instruction's A)
        kw = max(1, 4 // e)                           # K-consecutive elements per 32-bit register
        if self.kind == "wgmma":
            acc = {"kind": "nvidia_mma", "version": [3, 0], "warps_per_cta": [w, 1],
                   "instr_shape": [16, min(n, 256), 32 // e], "shape": [m, n]}
            b = {"kind": "nvmma_shared", "swizzle_byte_width": min(128, e * k), "element_bitwidth": 8 * e,
                 "transposed": True, "shape": [k, n]}
        else:
            acc = {"kind": "nvidia_mma", "version": [2, 0], "warps_per_cta": [w, 1], "instr_shape": [16, 8],
                   "shape": [m, n]}
            b = {"kind": "dot_operand", "operand_index": 1, "k_width": kw, "parent": dict(acc), "shape": [k, n]}
            b["parent"].pop("shape")
        if self.native:
            parent = {x: v for x, v in acc.items() if x != "shape"}
            if self.a_space == "shared":              # wgmma only: K-major, as 8-bit and tf32 A must be
                a = {"kind": "nvmma_shared", "swizzle_byte_width": min(128, e * k), "element_bitwidth": 8 * e,
                     "transposed": False, "shape": [m, k]}
            else:
                a = {"kind": "dot_operand", "operand_index": 0, "k_width": kw, "parent": parent, "shape": [m, k]}
            return dict(acc=acc, a=a, b=b, dtype=self.dtype, acc_dtype=self.acc_dtype, arch=self.arch,
                        a_dtype=None if self.a_dtype == self.dtype else self.a_dtype, scales=None)
        if self.a_space == "shared":
            a = {"kind": "swizzled_shared", "vec": 1, "per_phase": 1, "max_phase": 1, "order": [1, 0], "shape": [m, k]}
        else:
            along_k = min(32, k // 8)
            a = {"kind": "blocked", "size_per_thread": [1, 8], "threads_per_warp": [32 // along_k, along_k],
                 "warps_per_cta": [w, 1], "order": [1, 0], "shape": [m, k]}
        if self.dtype == "tf32" and is_packed(self.a_dtype):
            a = k_interleaved(a, "offset" if self.a_space == "shared" else "register")
        return dict(acc=acc, a=a, b=b, dtype=self.dtype, acc_dtype=self.acc_dtype, arch=self.arch,
                    a_dtype=self.a_dtype, scales=self.scales)

    @property
    def arch(self) -> str | None:
        """fp8 mma.sync needs sm_89 or newer; the rest plan for the default (sm_80) or wgmma's sm_90a."""
        return "sm_90" if self.kind == "mma.sync" and self.dtype.startswith("f8") else None


def k_interleaved(spec: dict[str, Any], in_dim: str) -> dict[str, Any]:
    """``spec`` (row-major along K in ``in_dim``'s first three bases) with bases 0 and 2 of ``in_dim``
    swapped: byte j of a 4-bit tile or register file holds (k, k + 4) instead of (k, k + 1).  A tf32
    fragment (one element a 32-bit register) holds k and k + 4 in one thread but never k and k + 1,
    and a packed move keeps a byte in one thread: 4-bit A for a tf32 instruction is stored so, as
    weights pre-shuffled for their instruction are."""
    from ll_codegen.api import load_layout
    lay, _ = load_layout(spec, memory_ok=True)
    bases = {d: [list(b) for b in v] for d, v in lay.bases.items()}
    bases[in_dim][0], bases[in_dim][2] = bases[in_dim][2], bases[in_dim][0]
    kind = "shared_linear" if in_dim == "offset" else "linear"
    return {"kind": kind, **bases, "shape": list(spec["shape"])}


def native_k(k: int, dtype: str) -> int:
    """The K a native case of a table shape takes: at least the instruction's (32 bytes of a row: 32
    for the 8-bit types, so the 16 x 16 x 16 shapes run as 16 x 16 x 32)."""
    return max(k, 32 // AB_BYTES[dtype])


def table_cases() -> list[MixedCase]:
    """Every upcast pair (``UPCAST_PAIRS``) x shape (a byte pair where K is a multiple of 32), A from
    shared memory on wgmma and alternately (by A type; a byte pair by pair and shape) from shared memory
    and registers on mma.sync; the scaled formats (int4 groups of 128 bf16, mxfp4:
    e2m1 groups of 32 e8m0, into bf16 and tf32) on both instructions; then every native pair x shape (K at least the
    instruction's, ``native_k``), A in registers on mma.sync and alternately in shared memory and
    registers on wgmma.

    The native data are small integers (``verify/emulate/reference.mma_tensors``), exact in every type:
    tf32 operands are f32 bits with the low 13 mantissa bits zero.  The PTX ISA (alternate
    floating-point data formats) gives tf32 f32's range and at least 10 mantissa bits, its internal
    layout implementation-defined, and ``cvt.rna.tf32.f32`` (round to nearest, ties away) to make it:
    what an instruction does with other f32 bits is not specified (the host runtime drops the low 13),
    so a caller rounds f32 inputs with that cvt first and the table checks tf32 values only."""
    out = []
    for j, (kind, m, n, k) in enumerate(SHAPES):
        for a, d in UPCAST_PAIRS:
            if (a, d) in BYTE_PAIRS:          # K a multiple of 32, A's space alternating by pair and shape
                if k % 32 == 0:
                    odd = (BYTE_PAIRS.index((a, d)) + j) % 2
                    out.append(MixedCase(kind, m, n, k, a, d, "registers" if kind == "mma.sync" and odd else "shared"))
                continue
            i = (UPCAST_SOURCES + F32_ONLY_SOURCES).index(a)
            space = "registers" if kind == "mma.sync" and i % 2 else "shared"
            out.append(MixedCase(kind, m, n, k, a, d, space))
    for kind, m, n, k in SHAPES:
        if k >= 128:
            out.append(MixedCase(kind, m, n, k, "i4", "bf16", "shared", "128,bf16"))
        if k >= 32:
            out.append(MixedCase(kind, m, n, k, "e2m1", "bf16", "shared", "32,e8m0"))
            out.append(MixedCase(kind, m, n, k, "e2m1", "tf32", "shared", "32,e8m0"))
    for j, (kind, m, n, k) in enumerate(SHAPES):
        for i, (a, b) in enumerate(NATIVE_PAIRS):
            space = "registers" if kind == "mma.sync" or (i + j) % 2 else "shared"
            out.append(MixedCase(kind, m, n, native_k(k, b), a, b, space))
    return out
