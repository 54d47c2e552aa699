"""The MMA plan as data (``llgen mma``): what every planner of ``acc += A @ B`` produces.

``MmaPlan`` is one CTA tile's product as the instructions every thread issues, in issue order
(``MmaStep``: the accumulator registers and the operands' register words or shared slices), for
NVIDIA's wgmma and mma.sync (``plan/mma.py``) and AMD's MFMA (``plan/mfma.py``).  Registers are
32-bit words: 16-bit values travel two to a word, 8-bit four, the element of index p w + h in part
h (low first) of word w (p = elements per word); ``acc_regs`` counts such words.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from ll_codegen.plan.model import XorForm

#: accumulator elements per 32-bit register (.f16 accumulators are .f16x2 registers)
ACC_PER_REG = {"f32": 1, "f16": 2, "i32": 1}
#: bytes of an element in shared memory / registers (tf32 is stored as f32)
AB_BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "f8e4m3": 1, "f8e5m2": 1, "i8": 1, "u8": 1}
SWIZZLE_MODE = {0: 0, 128: 1, 64: 2, 32: 3}     # wgmma descriptor bits 62-63


class MmaError(ValueError):
    """A layout or type the instruction cannot use; the message is one line naming the reason."""


@dataclass(frozen=True)
class Descriptor:
    """How wgmma reads one shared operand (the fields of its 64-bit matrix descriptor but the start).

    ``base_offset`` is 0: wgmma then applies the swizzle to the absolute address of every element,
    whatever the start (measured on an H200: a start moved by 32, 128 or 256 bytes reads correctly
    with base offset 0; base offset b reads the pattern's row as ``(addr >> 7) - b``).  Tiles start
    on the pattern's repeat (``kTileAlign``), so the tile's own offsets are what the swizzle sees."""
    swizzle_bytes: int
    lbo_bytes: int
    sbo_bytes: int
    k_major: bool
    base_offset: int = 0

    def fields(self) -> int:
        """The descriptor without its start address: LBO >> 4 at bit 16, SBO >> 4 at bit 32, the
        base offset at bit 49, the swizzle mode at bit 62."""
        return ((self.lbo_bytes >> 4) << 16 | (self.sbo_bytes >> 4) << 32 | self.base_offset << 49
                | SWIZZLE_MODE[self.swizzle_bytes] << 62)

    def bits(self, start: int) -> int:
        """The whole descriptor for an operand slice starting at shared byte address ``start``."""
        return self.fields() | (start & 0x3FFFF) >> 4


@dataclass(frozen=True)
class Operand:
    """Operand A or B: in ``registers`` (``regs`` 32-bit words per thread) or ``shared`` (a tile of
    ``bytes`` bytes aligned to ``align``, read through ``descriptor``; ``warp_offset``: the byte
    offset the thread's warp adds to every slice, ``tile``: offset -> coordinate bases)."""
    space: str
    layout: dict[str, Any]
    regs: int = 0
    descriptor: Descriptor | None = None
    bytes: int = 0
    align: int = 16
    warp_offset: XorForm | None = None


@dataclass(frozen=True)
class MmaStep:
    """One instruction: the accumulator registers in fragment order, and per operand either its
    register words in fragment order or ``(byte offset of the slice in its tile,)`` (shared)."""
    acc: tuple[int, ...]
    a: tuple[int, ...]
    b: tuple[int, ...]


@dataclass(frozen=True)
class MmaPlan:
    """``acc += A @ B`` for one CTA tile: ``steps`` in issue order (k-steps outermost)."""
    operation: ClassVar[str] = "mma"
    kind: str                          # wgmma | mma.sync | mfma
    instr: str                         # the PTX instruction or the AMD mnemonic
    dtype: str
    acc_dtype: str
    target: str
    arch: str
    warp_size: int
    num_warps: int
    shape: tuple[int, int, int]        # M, N, K of the tile
    instr_shape: tuple[int, int, int]
    acc_layout: dict[str, Any]
    acc_regs: int                      # 32-bit accumulator registers per thread (f16: 2 elements each)
    a: Operand
    b: Operand
    steps: tuple[MmaStep, ...]
    swap_ab: bool = False              # the instruction computes D^T = B^T A^T: its first source is B (mfma)
    a_dtype: str | None = None         # A's type where it is not ``dtype`` (B's): e4m3 x e5m2, s8 x u8

    @property
    def strategy(self) -> str:
        """The instruction family (``wgmma``, ``mma.sync`` or ``mfma``), as other plans name their strategy."""
        return self.kind

    @property
    def threads(self) -> int:
        return self.warp_size * self.num_warps

    @property
    def elem_bytes(self) -> int:
        return AB_BYTES[self.dtype]

    @property
    def a_type(self) -> str:
        """A's element type: ``a_dtype``, or ``dtype`` when both operands have one type (the pairs of
        two types, ``NATIVE_PAIRS``, have one element size, so ``elem_bytes`` is A's too)."""
        return self.a_dtype or self.dtype

    @property
    def acc_per_reg(self) -> int:
        """Accumulator elements per 32-bit register: element 2r + h of an f16 accumulator is half h of
        register r (``acc_regs`` counts registers)."""
        return ACC_PER_REG[self.acc_dtype]

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory of the harness: the shared operand tiles, each at its alignment,
        and 1024 bytes of slack to align the first (a dynamic buffer is only 16-byte aligned)."""
        total = 0
        for op in (self.a, self.b):
            if op.space == "shared":
                total = -(-total // op.align) * op.align + op.bytes
        return total + 1024 if total else 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["operation"] = "mma"
        if self.a_dtype is None:
            del d["a_dtype"]
        return d

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)
