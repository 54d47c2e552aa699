"""What ``llgen mma`` reads off an accumulator's spec beyond its layout: the wgmma K its
``instr_shape`` names (``check_instr_k``) and, for a mixed-input MMA, the A register fragment its
``nvidia_mma`` parameters imply (``a_fragment_of``); and the operation and options it plans (``mma_request``)."""
from __future__ import annotations

from typing import Any

from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.mma_mixed import a_fragment
from ll_codegen.plan.mma_model import AB_BYTES
from ll_codegen.spec import Spec, SpecError


def check_instr_k(acc_spec: Spec, dtype: str) -> None:
    """A Hopper accumulator's ``instr_shape`` [16, N, K] names its wgmma, whose K is 32 bytes of
    operands per row (Triton's instrShape K = 256 / element bits: 16 for f16, 32 for 8-bit, 8 for
    tf32): a spec made for another operand type is one ``SpecError``."""
    lay = acc_spec.layout
    if acc_spec.kind != "nvidia_mma" or lay.version[0] != 3 or dtype not in AB_BYTES:
        return
    instr, k = list(lay.instr_shape), 32 // AB_BYTES[dtype]
    if instr[-1] != k:
        raise SpecError(acc_spec.source, "instr_shape", f"{instr}: K = {instr[-1]}, but wgmma's K for --dtype "
                                                        f"{dtype} is {k} (instr_shape {instr[:-1] + [k]})")



def a_fragment_of(acc_spec: Spec | None, acc: LinearLayout, b: LinearLayout, dtype: str = "f16") -> LinearLayout:
    """The A register fragment (M x K: the accumulator's rows, B's rows) of the ``dtype`` MMA whose
    accumulator spec is ``acc_spec``: its ``dot_operand`` of k_width 2, 1 for tf32
    (``plan/mma_mixed.a_fragment``).  A bare
    LinearLayout accumulator has no parameters to take it from: ValueError in one line."""
    if acc_spec is None or acc_spec.kind != "nvidia_mma":
        raise ValueError("--a-dtype: the accumulator must be an nvidia_mma spec (the upcast's destination is its "
                         "dot_operand fragment), not a bare LinearLayout")
    return a_fragment(acc_spec.layout, acc.out_dim_size(acc.out_dims[0]), b.out_dim_size(b.out_dims[0]), dtype)


def mma_request(version: int, acc_dtype: str, a_dtype: str | None, scales: str | None, paired: bool,
                acc_spec: Spec | None, acc: LinearLayout, b: LinearLayout,
                dtype: str = "f16") -> tuple[str, dict[str, Any]]:
    """(operation, options) of ``llgen mma``: ``mma`` for one operand type, or for a pair one instruction
    multiplies as it is (``paired``: e4m3 x e5m2, s8 x u8; A's type an option); else ``mma_mixed``, whose
    upcast lands in the A fragment of the accumulator spec for a ``dtype`` instruction (``a_fragment_of``)."""
    options: dict[str, Any] = {"version": version, "acc_dtype": acc_dtype}
    if a_dtype is None:
        return "mma", options
    if paired:
        return "mma", dict(options, a_dtype=a_dtype)
    return "mma_mixed", dict(options, a_dtype=a_dtype, scales=scales, fragment=a_fragment_of(acc_spec, acc, b, dtype))
