"""Mixed-input MMA (``llgen mma --a-dtype``): ``acc += upcast(A) @ B`` for one CTA tile.

A holds low-precision elements (``i4``, ``u4``, ``e2m1``, ``f8e4m3``, ``f8e5m2``, ``i8``, ``u8``; a
4-bit type packed two per byte) in a shared tile or in registers; B and the instruction are in
``dtype`` (``f16``, ``bf16`` or ``tf32``; a tf32 instruction's A is upcast to exact f32, one element
per 32-bit register, every such value a tf32 value).  A tf32 instruction also takes an ``f16`` or
``bf16`` A (every such value is a tf32 value; f16 and bf16 are not exact in each other), without
scales.  An 8-bit instruction takes the 4-bit A types it holds exactly, as its own type (four elements a
32-bit register, k_width 4; ``BYTE_UPCASTS``): i4 and u4 into s8, u4 into u8 (8-bit integers
accumulate in s32), e2m1 into e4m3 and e5m2; no scales.  The plan is the composition of two plans
this library already makes, nothing else:

1. ``upcast`` (an ``UpcastPlan``, ``plan/upcast.py``): A, with optional per-group scales along K,
   exactly into the register fragment ``F`` the MMA reads A from -- Triton's ``dot_operand``
   (operand 0, k_width 2; tf32: 1; 8-bit: 4) of the accumulator's ``nvidia_mma`` layout over M x K;
2. ``mma`` (an ``MmaPlan``, ``plan/mma.py``): ``acc += F @ B`` with A from registers (wgmma, whose
   A may come from registers and B from shared memory, or mma.sync, both from registers).

The element of A at (m, k) becomes ``u(m, k) = RNE(decode(A[m, k]) * s[m, k / G] + c)`` in
``dtype`` (exactly ``decode(A[m, k])`` without scales; tf32 takes e8m0 scales only, ``u = decode(A) *
2^(e - 127)`` exact in f32), and the MMA adds ``sum_k u(m, k) B[k, n]``
to ``acc[m, n]`` in f32.  On Hopper this is the weights-as-A arrangement: ``Y^T = W X^T`` with the
low-precision weights W as A, since only A can come from registers.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from ll_codegen.core.dtypes import (BYTE_UPCASTS, DTYPE_BITS, F32_ONLY_SOURCES, UPCAST_SOURCES, is_packed,
                                    upcast_sources)
from ll_codegen.core.layout import LinearLayout
from ll_codegen.layouts.dot_operand import DotOperandLayout
from ll_codegen.plan.mma import plan_mma
from ll_codegen.plan.mma_model import AB_BYTES, MmaError, MmaPlan
from ll_codegen.plan.packed import PAIR_DIM
from ll_codegen.plan.upcast import UpcastPlan, parse_scales, plan_upcast

#: the instruction types a mixed-input MMA computes in
MIXED_TYPES = ("f16", "bf16", "tf32") + tuple(BYTE_UPCASTS)


def upcast_dtype(dtype: str) -> str:
    """The upcast's destination type for an instruction of ``dtype``: its own (8-bit ones too), f32 for
    tf32 (the upcast values are exact f32 values with at most 8 significant bits: tf32 values as they
    stand)."""
    return "f32" if dtype == "tf32" else dtype


@dataclass(frozen=True)
class MixedMmaPlan:
    """``acc += upcast(A) @ B``: ``upcast`` moves and widens A into the fragment ``mma`` reads A from
    (its destination layout is ``mma.a``'s), ``mma`` issues the instructions."""
    operation: ClassVar[str] = "mma_mixed"
    a_dtype: str
    upcast: UpcastPlan
    mma: MmaPlan

    @property
    def dtype(self) -> str:
        return self.mma.dtype

    @property
    def acc_dtype(self) -> str:
        return self.mma.acc_dtype

    @property
    def kind(self) -> str:
        return self.mma.kind

    @property
    def strategy(self) -> str:
        return self.mma.kind

    @property
    def target(self) -> str:
        return self.mma.target

    @property
    def arch(self) -> str:
        return self.mma.arch

    @property
    def warp_size(self) -> int:
        return self.mma.warp_size

    @property
    def num_warps(self) -> int:
        return self.mma.num_warps

    @property
    def threads(self) -> int:
        return self.mma.threads

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.mma.shape

    @property
    def elem_bytes(self) -> int:
        """Bytes of one B element (the instruction's type)."""
        return self.mma.elem_bytes

    @property
    def a_shared(self) -> bool:
        """A is read from a shared tile (else from the caller's registers)."""
        return self.upcast.from_memory

    @property
    def a_bytes(self) -> int:
        """Bytes of the row-major A tensor as stored (4-bit types two elements a byte)."""
        M, _, K = self.shape
        return M * K * DTYPE_BITS[self.a_dtype] // 8

    @property
    def input_offsets(self) -> tuple[int, int]:
        """Byte offsets of the scale tensor and of the zero points in the harness's A input: after
        the A bytes (16-byte aligned), the zero points after the scales."""
        c = self.upcast.scaling
        at = -(-self.a_bytes // 16) * 16
        n = 0 if c is None else c.shape[0] * c.shape[1] * (1 if c.dtype == "e8m0" else 2)
        return at, at + -(-n // 16) * 16

    @property
    def a_offset(self) -> int:
        """Where the harness puts the upcast's tile or scratch: after the MMA's shared tiles (which count
        1024 bytes of alignment slack), on a 1024-byte boundary (every swizzle's pattern repeat)."""
        return -(-max(self.mma.smem_bytes - 1024, 0) // 1024) * 1024

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory of the harness: the MMA's shared tiles, the upcast's tile or scratch at
        ``a_offset``, and 1024 bytes of alignment slack."""
        return self.a_offset + self.upcast.smem_bytes + 1024

    def to_dict(self) -> dict[str, Any]:
        return {"operation": "mma_mixed", "a_dtype": self.a_dtype, "upcast": self.upcast.to_dict(),
                "mma": self.mma.to_dict()}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=_plain)


def _plain(x: Any) -> Any:
    return asdict(x) if hasattr(x, "__dataclass_fields__") else str(x)


def mixed_problem(dtype: str, a_dtype: str, acc_dtype: str = "f32", target: str = "cuda",
                  scales: Any = None) -> str | None:
    """Why ``--a-dtype a_dtype`` with ``--dtype dtype`` is no mixed-input MMA llgen plans (one line),
    or None -- decided from the types alone, before any layout is planned."""
    if a_dtype not in upcast_sources(upcast_dtype(dtype)):
        if a_dtype == dtype:
            return f"--a-dtype {a_dtype} is --dtype: A and B of one type are a plain llgen mma (leave --a-dtype out)"
        if dtype in BYTE_UPCASTS:
            pairs = ", ".join(f"{' or '.join(a)} into {d}" for d, a in BYTE_UPCASTS.items())
            return (f"--a-dtype {a_dtype} --dtype {dtype}: an 8-bit instruction takes the 4-bit A types it holds "
                    f"exactly ({pairs})")
        if a_dtype in F32_ONLY_SOURCES and dtype in MIXED_TYPES:
            return (f"--a-dtype {a_dtype} --dtype {dtype}: a 16-bit A is upcast into a tf32 instruction only "
                    f"(f16 and bf16 values are not exact in each other)")
        return (f"--a-dtype {a_dtype}: the low-precision A types are {', '.join(UPCAST_SOURCES)} "
                f"(and {', '.join(F32_ONLY_SOURCES)} into tf32)")
    if dtype not in MIXED_TYPES:
        return (f"--dtype {dtype}: a mixed-input MMA upcasts A to the instruction's type, f16, bf16 or tf32 "
                f"(or a 4-bit A into {', '.join(BYTE_UPCASTS)}; B is --dtype)")
    acc = "i32" if dtype in ("i8", "u8") else "f32"
    if acc_dtype != acc:
        return f"--acc-dtype {acc_dtype}: a mixed-input MMA of {dtype} accumulates in {acc}"
    if target != "cuda":
        return f"--target {target}: the upcast sequences are CUDA's (lop3, prmt, cvt); no mixed-input MFMA"
    if scales is not None:
        try:
            parse_scales(scales, upcast_dtype(dtype), 2, a_dtype)
        except ValueError as e:
            return str(e)
    return None


def plan_mixed_mma(acc: LinearLayout, a: LinearLayout, b: LinearLayout, fragment: LinearLayout, a_space: str,
                   b_space: str, version: int, dtype: str, a_dtype: str, acc_dtype: str = "f32",
                   target: str = "cuda", arch: str | None = None, alignment: int = 16,
                   scales: Any = None) -> MixedMmaPlan:
    """Plan ``acc += upcast(A) @ B``: ``a`` (M x K, ``a_dtype`` elements in ``a_space``) upcast into
    ``fragment`` (the A register fragment of ``acc``'s instruction, ``dtype``; ``scales`` as
    ``llgen convert --scales``, groups along K by default), then the MMA of ``plan_mma`` with A from
    registers.  ``MmaError`` or ValueError (one line) for what either step cannot do; the type
    checks and the MMA (cheap) come before the upcast."""
    problem = mixed_problem(dtype, a_dtype, acc_dtype, target, scales)
    if problem:
        raise MmaError(problem)
    if a.out_dim_sizes != fragment.out_dim_sizes:
        raise MmaError(f"A is {list(a.out_dim_sizes.values())} but the MMA's A is "
                       f"{list(fragment.out_dim_sizes.values())} (M x K: the accumulator's rows, B's rows)")
    mma = plan_mma(acc, fragment, b, "registers", b_space, version, dtype, acc_dtype, target, arch)
    try:
        up = plan_upcast(a, fragment, a_space, a_dtype, upcast_dtype(dtype), target, mma.arch, alignment=alignment,
                         scales=scales)
    except ValueError as e:
        raise type(e)(f"{e}{tf32_pair_hint(a, fragment, a_space, a_dtype, dtype)}") from None
    return MixedMmaPlan(a_dtype, up, mma)


def tf32_pair_hint(a: LinearLayout, fragment: LinearLayout, a_space: str, a_dtype: str, dtype: str) -> str:
    """What a failed upcast of a 4-bit A into a tf32 fragment needs, when A's byte pairs two elements
    no thread of the fragment holds ("" otherwise): a tf32 fragment holds one element a register, k
    and k + 4 (and rows m, m + 8) in one thread but never k and k + 1, and a packed move keeps a byte
    in one thread."""
    pin = PAIR_DIM[a_space]
    if dtype != "tf32" or not is_packed(a_dtype) or a.in_dim_size(pin) < 2:
        return ""
    pair = list(a.bases[pin][0])
    if pair in [list(b) for b in fragment.bases["register"]]:
        return ""
    return (f" -- a tf32 A fragment holds no two elements {pair} apart in one thread: store the {a_dtype} A with "
            f"(k, k + 4) in a byte (bits 0 and 2 of k swapped)")


def a_fragment(parent: Any, m: int, k: int, dtype: str = "f16") -> LinearLayout:
    """The A register fragment (M x K) of a ``dtype`` MMA whose accumulator is the ``nvidia_mma``
    layout ``parent``: its ``dot_operand`` with operand index 0 and k_width 4 / bytes -- 2 for 16-bit
    elements (two K-consecutive elements per 32-bit register), 1 for tf32, 4 for 8-bit types -- what
    ``llgen mma --write-operand-spec`` writes."""
    try:
        return DotOperandLayout(0, parent, 4 // AB_BYTES[dtype]).to_linear([m, k])
    except ValueError as e:
        raise MmaError(f"no A fragment of the accumulator over {m} x {k} ({e})") from None
