"""AMD MFMA (``llgen mma --target hip``): ``acc += A @ B`` as the ``v_mfma_*`` instructions of a wave.

The accumulator is an ``amd_mfma`` register layout (wave64, CDNA: gfx90a, gfx940, gfx942), A and B
``dot_operand`` register layouts of it.  One instruction multiplies an M x K by a K x N tile (M = N
= 32 or 16) into M x N accumulators, every lane holding P = K M / 64 consecutive K elements of A
(and of B) in P e / 4 registers and 16 (32x32) or 4 (16x16) accumulators.  Which ones follows from
the layouts, as for mma.sync (``plan/mma_fragments.py``): the registers of ONE instruction are the
library's one-instruction layouts -- ``amd_mfma`` with ``warps_per_cta`` (1, 1) and the instruction's
shape for the accumulator, its ``dot_operand``\\ s with ``k_width`` = P for A and B -- and a user's
layout must hold them at every instruction origin, in the same registers for every lane; warps
move the origin linearly.  The instruction is the first of 32x32 and 16x16 (not transposed, then
transposed) whose accumulator fragment the layout holds.

A transposed ``amd_mfma`` layout (4 consecutive *columns* per register group) is the fragment of
D^T: the instruction run with its sources swapped computes B^T A^T = (A B)^T, reading B's registers
as its first source and A's as its second (``MmaPlan.swap_ab``), exactly as the operands' layouts
hold them (a ``dot_operand``'s fragment does not depend on the parent's transposition).

Instructions (CDNA3 ISA "Matrix Arithmetic Instructions"; gfx940/gfx942 share the CDNA3 mnemonics):

=========  ======  =============================  ==============================
arch       dtype   32 x 32                        16 x 16
=========  ======  =============================  ==============================
gfx90a     f16     v_mfma_f32_32x32x8f16          v_mfma_f32_16x16x16f16
gfx90a     bf16    v_mfma_f32_32x32x8bf16_1k      v_mfma_f32_16x16x16bf16_1k
gfx90a     i8      v_mfma_i32_32x32x8i8           v_mfma_i32_16x16x16i8
gfx94x     f16     v_mfma_f32_32x32x8_f16         v_mfma_f32_16x16x16_f16
gfx94x     bf16    v_mfma_f32_32x32x8_bf16        v_mfma_f32_16x16x16_bf16
gfx94x     i8      v_mfma_i32_32x32x16_i8         v_mfma_i32_16x16x32_i8
=========  ======  =============================  ==============================

The independent check is ``verify/models/mfma_model.py``, written from the ISA's register layouts.
"""
from __future__ import annotations

from ll_codegen.core.layout import LinearLayout
from ll_codegen.core.target import HIP_WAVE64, Target
from ll_codegen.layouts.amd import AMDMFMALayout
from ll_codegen.layouts.dot_operand import DotOperandLayout
from ll_codegen.plan.mma_fragments import bases, fragment_instructions, register_fetch
from ll_codegen.plan.mma_model import AB_BYTES, MmaError, MmaPlan, MmaStep, Operand

#: operand dtype -> its accumulator type
MFMA_TYPES = {"f16": "f32", "bf16": "f32", "i8": "i32"}
#: (CDNA3?, dtype, M) -> (mnemonic, K)
MFMA_INSTRUCTIONS = {
    (False, "f16", 32): ("v_mfma_f32_32x32x8f16", 8), (False, "f16", 16): ("v_mfma_f32_16x16x16f16", 16),
    (False, "bf16", 32): ("v_mfma_f32_32x32x8bf16_1k", 8), (False, "bf16", 16): ("v_mfma_f32_16x16x16bf16_1k", 16),
    (False, "i8", 32): ("v_mfma_i32_32x32x8i8", 8), (False, "i8", 16): ("v_mfma_i32_16x16x16i8", 16),
    (True, "f16", 32): ("v_mfma_f32_32x32x8_f16", 8), (True, "f16", 16): ("v_mfma_f32_16x16x16_f16", 16),
    (True, "bf16", 32): ("v_mfma_f32_32x32x8_bf16", 8), (True, "bf16", 16): ("v_mfma_f32_16x16x16_bf16", 16),
    (True, "i8", 32): ("v_mfma_i32_32x32x16_i8", 16), (True, "i8", 16): ("v_mfma_i32_16x16x32_i8", 32),
}


def is_cdna3(arch: str) -> bool:
    """gfx940/gfx942: the CDNA3 instruction set (gfx90a is CDNA2)."""
    return arch.startswith("gfx94")


def mfma_fragment_layouts(m: int, k: int, transposed: bool) -> tuple[LinearLayout, LinearLayout, LinearLayout]:
    """(accumulator, A, B) register layouts of ONE m x m x k instruction, as the layout library
    defines them: lane l holds P = k m / 64 consecutive K elements (``k_width`` P)."""
    parent = AMDMFMALayout(version=3, instr_shape=(m, m, k), transposed=transposed, warps_per_cta=(1, 1))
    kw = k * m // 64
    return (parent.to_linear([m, m]), DotOperandLayout(0, parent, kw).to_linear([m, k]),
            DotOperandLayout(1, parent, kw).to_linear([k, m]))


def plan_mfma(acc: LinearLayout, a: LinearLayout, b: LinearLayout, a_space: str, b_space: str, dtype: str,
              acc_dtype: str, target: Target) -> MmaPlan:
    """Plan ``acc += A @ B`` with MFMA instructions (``target`` a wave64 HIP target).  Raises
    ``MmaError`` (one line) for what the instructions cannot do."""
    if target.arch not in HIP_WAVE64:
        raise MmaError(f"MFMA runs on CDNA GPUs ({', '.join(HIP_WAVE64)}); --arch {target.arch} is RDNA, whose "
                       f"wmma is not generated")
    if a_space != "registers" or b_space != "registers":
        raise MmaError("mfma reads A and B from registers; give dot_operand layouts for --a and --b")
    if dtype not in MFMA_TYPES:
        raise MmaError(f"--dtype {dtype}: AMD MFMA is generated for f16, bf16 (f32 accumulators) and i8 (i32)")
    if acc_dtype != MFMA_TYPES[dtype]:
        raise MmaError(f"--acc-dtype {acc_dtype}: {dtype} MFMA accumulates in {MFMA_TYPES[dtype]}")
    e = AB_BYTES[dtype]
    M, N = (acc.out_dim_size(d) for d in acc.out_dims)
    Ma, K = (a.out_dim_size(d) for d in a.out_dims)
    Kb, Nb = (b.out_dim_size(d) for d in b.out_dims)
    if (Ma, Kb, Nb) != (M, K, N):
        raise MmaError(f"shapes do not chain: A {Ma}x{K}, B {Kb}x{Nb}, acc {M}x{N}")
    found, why = None, ""
    for m in (32, 16):
        instr, k_i = MFMA_INSTRUCTIONS[(is_cdna3(target.arch), dtype, m)]
        for transposed in (False, True):
            frags = mfma_fragment_layouts(m, k_i, transposed)
            try:
                found = (m, k_i, instr, transposed, frags, *fragment_instructions(acc, frags[0], 1, "the accumulator"))
                break
            except MmaError as err:
                why = why or str(err)
        if found:
            break
    if found is None:
        raise MmaError(f"the accumulator holds no 32x32 or 16x16 MFMA fragment (an amd_mfma layout with "
                       f"element_bitwidth 32); for 32x32: {why}")
    m, k_i, instr, transposed, (_, a_frag, b_frag), acc_ins, acc_shift = found
    if K % k_i:
        raise MmaError(f"K = {K} is not a multiple of {instr}'s K ({k_i})")
    operands, fetch = {}, {}
    for name, L, frag, rows_first in (("a", a, a_frag, True), ("b", b, b_frag, False)):
        what = f"{name.upper()} operand"
        try:
            ins, shift = fragment_instructions(L, frag, 1, what, max(1, 4 // e))
        except MmaError as err:       # say what the instruction wants: its items per lane are the k_width
            raise MmaError(f"{err} ({instr} reads {k_i * m // 64} consecutive K elements per lane: a dot_operand "
                           f"of k_width {k_i * m // 64})") from None
        operands[name] = Operand("registers", bases(L), regs=L.in_dim_size("register") * e // 4)
        fetch[name] = register_fetch(ins, shift, acc_shift, rows_first, what)
    steps = [MmaStep(regs, fetch["a"](origin[0], s * k_i), fetch["b"](origin[1], s * k_i))
             for s in range(K // k_i) for origin, regs in sorted(acc_ins.items(), key=lambda kv: kv[1])]
    warps = acc.in_dim_size("warp") if "warp" in acc.in_dims else 1
    return MmaPlan("mfma", instr, dtype, acc_dtype, target.name, target.arch, target.warp_size, warps, (M, N, K),
                   (m, m, k_i), bases(acc), acc.in_dim_size("register"), operands["a"], operands["b"], tuple(steps),
                   swap_ab=transposed)
