"""Render an AMD MFMA plan (``plan.kind == "mfma"``): ``mma(acc, a, b)`` in HIP and its harness.

Everything is decided here as plain data; ``templates/mfma.h.j2`` and ``templates/harness_mfma.hip.j2``
loop over it:

* one instruction wrapper (``MfmaWrapper``): the ``__builtin_amdgcn_mfma_*`` builtin with its source
  and accumulator vector types, the 32-bit words it reads (bit-cast to the source type), and the
  host SIMT call (``simt/hip/mfma.h``) that replaces it on the CPU;
* ``calls``: one line per ``MmaStep`` -- the accumulator registers in the instruction's VGPR order,
  then the first source's words and the second's: A's then B's, or B's then A's when the plan swaps
  them (a transposed accumulator, D^T = B^T A^T);
* the index functions the harness and users place data with (``acc_index``, ``a_index``, ``b_index``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ll_codegen.core.layout import layout_of
from ll_codegen.emit.cexpr import comment_lines, index_function
from ll_codegen.plan.mma_model import AB_BYTES, MmaPlan
from ll_codegen.plan.report import mma_summary

#: mnemonic (CDNA2 and CDNA3 spellings) -> the clang builtin that emits it
BUILTINS = {"v_mfma_f32_32x32x8f16": "__builtin_amdgcn_mfma_f32_32x32x8f16",
            "v_mfma_f32_32x32x8_f16": "__builtin_amdgcn_mfma_f32_32x32x8f16",
            "v_mfma_f32_16x16x16f16": "__builtin_amdgcn_mfma_f32_16x16x16f16",
            "v_mfma_f32_16x16x16_f16": "__builtin_amdgcn_mfma_f32_16x16x16f16",
            "v_mfma_f32_32x32x8bf16_1k": "__builtin_amdgcn_mfma_f32_32x32x8bf16_1k",
            "v_mfma_f32_32x32x8_bf16": "__builtin_amdgcn_mfma_f32_32x32x8bf16_1k",
            "v_mfma_f32_16x16x16bf16_1k": "__builtin_amdgcn_mfma_f32_16x16x16bf16_1k",
            "v_mfma_f32_16x16x16_bf16": "__builtin_amdgcn_mfma_f32_16x16x16bf16_1k",
            "v_mfma_i32_32x32x8i8": "__builtin_amdgcn_mfma_i32_32x32x8i8",
            "v_mfma_i32_16x16x16i8": "__builtin_amdgcn_mfma_i32_16x16x16i8",
            "v_mfma_i32_32x32x16_i8": "__builtin_amdgcn_mfma_i32_32x32x16_i8",
            "v_mfma_i32_16x16x32_i8": "__builtin_amdgcn_mfma_i32_16x16x32_i8"}
#: (dtype, source words) -> the builtin's source type: 4 f16 (_Float16 x 4), 4 bf16 (short x 4: the
#: bf16 bits), 4 i8 (one int), 8 i8 (one long)
SOURCE_TYPE = {("f16", 2): "_Float16 __attribute__((ext_vector_type(4)))",
               ("bf16", 2): "short __attribute__((ext_vector_type(4)))",
               ("i8", 1): "int", ("i8", 2): "long"}
HOST_TYPE = {"f16": "kF16", "bf16": "kBF16", "i8": "kS8", "f32": "kF32", "i32": "kS32"}
ACC_C = {"f32": "float", "i32": "int"}
RAW = {1: "uint8_t", 2: "uint16_t"}


@dataclass(frozen=True)
class MfmaWrapper:
    """One instruction form: ``name(d0.., x0.., y0..)`` with x the first source's words, y the second's."""
    name: str
    instr: str
    builtin: str
    nd: int                  # accumulator registers
    acc_c: str
    words: int               # 32-bit words of each source
    source_type: str
    host_call: str

    @property
    def params(self) -> str:
        ps = [f"{self.acc_c}& d{i}" for i in range(self.nd)]
        ps += [f"uint32_t {x}{i}" for x in "xy" for i in range(self.words)]
        return ", ".join(ps)

    def source(self, x: str) -> str:
        """The source value the builtin takes: the words bit-cast to its type."""
        if self.words == 1:
            return f"__builtin_bit_cast(Src, {x}0)"
        return f"__builtin_bit_cast(Src, Words{{{', '.join(f'{x}{i}' for i in range(self.words))}}})"


def wrapper(plan: MmaPlan) -> MfmaWrapper:
    """The instruction wrapper of ``plan`` (every step of a plan uses one instruction)."""
    m, n, k = plan.instr_shape
    words = k * m // 64 * AB_BYTES[plan.dtype] // 4
    host = (f"llgen_host::mfma({m}, {n}, {k}, llgen_host::MmaType::{HOST_TYPE[plan.dtype]}, "
            f"llgen_host::MmaType::{HOST_TYPE[plan.acc_dtype]}, x, y, w, w)")
    return MfmaWrapper(plan.instr, plan.instr, BUILTINS[plan.instr], m * n // 64, ACC_C[plan.acc_dtype], words,
                       SOURCE_TYPE[(plan.dtype, words)], host)


def calls(plan: MmaPlan, wrap: MfmaWrapper) -> list[str]:
    """One wrapper call per step: accumulators, then the first source's words, then the second's."""
    out = []
    for s in plan.steps:
        first, second = (s.b, s.a) if plan.swap_ab else (s.a, s.b)
        args = ([f"acc[{r}]" for r in s.acc] + [f"{'b' if plan.swap_ab else 'a'}[{w}]" for w in first]
                + [f"{'a' if plan.swap_ab else 'b'}[{w}]" for w in second])
        out.append(f"detail::{wrap.name}({', '.join(args)});")
    return out


def namespace_values(plan: MmaPlan, name: str) -> dict:
    """Everything the header's namespace holds."""
    wrap = wrapper(plan)
    M, N, K = plan.shape
    consts = [(f"constexpr int kThreads = {plan.threads};", "threads taking part: tid in [0, kThreads)"),
              (f"constexpr int kWarpSize = {plan.warp_size};", ""),
              (f"constexpr int kM = {M}, kN = {N}, kK = {K};", "acc (M x N) += A (M x K) * B (K x N)"),
              (f"constexpr int kElemBytes = {AB_BYTES[plan.dtype]};", f"bytes of one A/B element ({plan.dtype})"),
              (f"constexpr int kAccRegs = {plan.acc_regs};", f"accumulator registers per thread ({plan.acc_dtype})"),
              (f"constexpr int kAWords = {plan.a.regs};", "32-bit words of operand A per thread"),
              (f"constexpr int kBWords = {plan.b.regs};", "32-bit words of operand B per thread")]
    index = [comment_lines("Row-major index in the M x N accumulator of the element register `reg` of (lane, warp) "
                           "holds.")[0], index_function("acc_index", layout_of(plan.acc_layout))]
    for which, dims in (("a", "M x K"), ("b", "K x N")):
        index += [f"// Row-major index in {which.upper()} ({dims}) of the element register `reg` (element, not word) "
                  f"of (lane, warp) holds.", index_function(f"{which}_index", layout_of(getattr(plan, which).layout))]
    return dict(constants=consts, index=index, wrapper=wrap, calls=calls(plan, wrap), acc_c=ACC_C[plan.acc_dtype],
                ab_raw=RAW[AB_BYTES[plan.dtype]], swap_ab=plan.swap_ab)


def header(plan: MmaPlan, name: str, command: str = "", src_text: str | None = None, dst_text: str | None = None,
           back_plan=None) -> dict:
    """Values of ``mfma.h.j2``."""
    comment = comment_lines(f"Generated by ll_codegen. Do not edit.\nCommand: {command or '(library call)'}\n\n"
                            f"Plan:\n{mma_summary(plan)}")
    return dict(comment=comment, **namespace_values(plan, name))


def harness(plan: MmaPlan, name: str, command: str = "", src_text: str | None = None, dst_text: str | None = None,
            back_plan=None) -> dict:
    """Values of ``harness_mfma.hip.j2``: A and B row-major in, the accumulator in and out."""
    e = AB_BYTES[plan.dtype]
    return dict(namespace_values(plan, name), a_regs=plan.a.regs * 4 // e, b_regs=plan.b.regs * 4 // e)


#: kind -> (template, its values) of an MFMA plan's files
MFMA_FILES = {"header": ("mfma.h.j2", header), "harness": ("harness_mfma.hip.j2", harness)}
