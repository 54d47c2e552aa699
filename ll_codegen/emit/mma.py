"""Render an MMA plan (``plan.operation == "mma"``): ``mma(acc, a, b)`` and its harness.

Everything is decided here as plain data; ``templates/mma.cuh.j2`` loops over it:

* one instruction wrapper per instruction form (``Wrapper``): the PTX instruction, its operands and
  the host SIMT call that replaces it on the CPU, rendered through ``emit/instructions.py`` (with
  wgmma also fence / commit / wait, the async-proxy fence and setmaxnreg);
* ``calls``: one line per ``MmaStep`` -- the accumulator registers in fragment order, then the
  operands: register words, or a descriptor: the tile's ``a_desc`` plus the slice's offset in 16-byte
  units (``detail::desc_at``), or, where warp groups read different slices, ``detail::desc(kDescA,
  address)`` of the tile's address plus the slice's byte offset XOR the warp group's;
* the index functions the harness and users place data with (``acc_index``, ``a_index`` or
  ``a_tile_index``, ...);
* with A in registers, ``pack_operand(p, a)``: an f32 accumulator of A's M x K tile converted into A's
  words, one ``cvt`` per pair of elements, in the register order ``plan/mma.pack_map`` reads off the
  layouts (or, where the layouts put an accumulator element in another thread, the reason there is none).
"""
from __future__ import annotations

from dataclasses import dataclass

from ll_codegen.core.layout import layout_of
from ll_codegen.emit.cexpr import comment_lines, hex_const, index_function, tile_index_function, xor_form_expr
from ll_codegen.emit.harness_tiles import harness_chunk
from ll_codegen.emit.instructions import (FENCE_PROXY_ASYNC, WGMMA_COMMIT_GROUP, WGMMA_FENCE, WGMMA_WAIT_GROUP,
                                          Instruction, cvt_pack, register_pin, setmaxnreg)
from ll_codegen.emit.instructions import mma as mma_instruction
from ll_codegen.emit.mfma import MFMA_FILES
from ll_codegen.plan.mma import AB_BYTES, MmaError, MmaPlan, pack_map, pack_source
from ll_codegen.plan.report import mma_summary

#: dtype -> the host SIMT runtime's MmaType
HOST_TYPE = {"f16": "kF16", "bf16": "kBF16", "tf32": "kTF32", "f8e4m3": "kE4M3", "f8e5m2": "kE5M2", "i8": "kS8",
             "u8": "kU8", "f32": "kF32", "i32": "kS32"}
ACC_C = {"f32": "float", "i32": "int", "f16": "uint32_t"}           # one accumulator register (f16: a word of 2)
ACC_CONSTRAINT = {"f32": "f", "i32": "r", "f16": "r"}
RAW = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t"}


@dataclass(frozen=True)
class Wrapper:
    """One instruction form: ``name(d0.., [a0..], [b0..], [desc_a], desc_b, accumulate)``."""
    name: str
    instr: str
    nd: int                  # accumulator words
    acc_c: str
    constraint: str
    a_words: int             # 0: A through a descriptor
    b_words: int             # 0: B through a descriptor
    tail: str                # immediates after the scale-d predicate (wgmma), e.g. ", 1, 1, 0, 1"
    host_call: str           # the llgen_host call (`w` the word array; wgmma: `d` the registers' addresses)
    wgmma: bool

    @property
    def instructions(self) -> list[Instruction]:
        """The header's instruction wrappers (``emit/instructions.py``): this form; with wgmma also
        fence / commit / wait, the async-proxy fence, the accumulator pin and setmaxnreg."""
        form = mma_instruction(self.name, self.instr, self.nd, self.acc_c, self.constraint, self.a_words,
                               self.b_words, self.tail, self.host_call, self.wgmma)
        if not self.wgmma:
            return [form]
        return [form, WGMMA_FENCE, WGMMA_COMMIT_GROUP, WGMMA_WAIT_GROUP, FENCE_PROXY_ASYNC,
                register_pin(self.acc_c, self.constraint), setmaxnreg(False), setmaxnreg(True)]


def wrapper(plan: MmaPlan) -> Wrapper:
    """The instruction wrapper of ``plan`` (every step of a plan uses one instruction form)."""
    wg = plan.kind == "wgmma"
    m, n, k = plan.instr_shape
    nd = (n // 2 if wg else 4) // plan.acc_per_reg          # wgmma D: N/2 elements; mma.sync C/D: 4
    a_words = 0 if plan.a.space == "shared" else 4
    b_words = 0 if plan.b.space == "shared" else 2
    tnsp_a = int(plan.a.descriptor is not None and not plan.a.descriptor.k_major)
    tnsp_b = int(plan.b.descriptor is not None and not plan.b.descriptor.k_major)
    if not wg or plan.dtype in ("i8", "u8"):
        tail = ""
    elif plan.dtype in ("f16", "bf16"):
        tail = f", 1, 1, {tnsp_a}, {tnsp_b}" if not a_words else f", 1, 1, {tnsp_b}"
    else:
        tail = ", 1, 1"
    ab, acc = f"llgen_host::MmaType::{HOST_TYPE[plan.dtype]}", f"llgen_host::MmaType::{HOST_TYPE[plan.acc_dtype]}"
    if plan.a_dtype is not None:                          # two operand types: the host call names A's, then B's
        ab = f"llgen_host::MmaType::{HOST_TYPE[plan.a_dtype]}, {ab}"
    types = plan.dtype if plan.a_dtype is None else f"{plan.a_dtype}_{plan.dtype}"
    if wg:
        flag = {0: "false", 1: "true"}
        host = (f"llgen_host::wgmma({n}, {ab}, {acc}, {flag[tnsp_a]}, {flag[tnsp_b]}, "
                f"{'0' if a_words else 'desc_a'}, {'a' if a_words else 'nullptr'}, desc_b, d, {nd}, accumulate != 0)")
    else:
        host = f"llgen_host::mma_sync(16, 8, {k}, {ab}, {acc}, a, b, w, w)"
    name = (f"wgmma_m64n{n}k{k}_{plan.acc_dtype}_{types}_{'r' if a_words else 's'}s" if wg
            else f"mma_m16n8k{k}_{plan.acc_dtype}_{types}")
    return Wrapper(name, plan.instr, nd, ACC_C[plan.acc_dtype], ACC_CONSTRAINT[plan.acc_dtype], a_words, b_words,
                   tail, host, wg)


def _types(plan: MmaPlan) -> str:
    """The operand type, or A's and B's where they differ."""
    return plan.dtype if plan.a_dtype is None else f"A {plan.a_dtype}, B {plan.dtype}"


def _operand_arg(plan: MmaPlan, which: str, slot: tuple[int, ...]) -> list[str]:
    op = getattr(plan, which)
    if op.space == "registers":
        return [f"{which}[{w}]" for w in slot]
    start, = slot
    fields = f"kDesc{which.upper()}"
    w = op.warp_offset
    if w is not None and w.support:
        addr = f"{which}_tile + ({which}_warp ^ {hex_const(start)})" if start else f"{which}_tile + {which}_warp"
        return [f"detail::desc({fields}, {addr})"]
    return [f"detail::desc_at({which}_desc, {hex_const(start >> 4)})" if start else f"{which}_desc"]


def calls(plan: MmaPlan, wrap: Wrapper) -> list[str]:
    """One wrapper call per step; the first k-step of each accumulator tile takes ``accumulate``."""
    out, seen = [], set()
    for s in plan.steps:
        acc = [f"acc[{r}]" for r in s.acc]
        args = acc + _operand_arg(plan, "a", s.a) + _operand_arg(plan, "b", s.b)
        if wrap.wgmma:
            args.append("accumulate" if s.acc not in seen else "1")
        seen.add(s.acc)
        out.append(f"detail::{wrap.name}({', '.join(args)});")
    return out


def _prologue(plan: MmaPlan) -> list[str]:
    lines = []
    warp_bits = plan.num_warps.bit_length() - 1
    for which in ("a", "b"):
        op = getattr(plan, which)
        if op.space != "shared":
            continue
        lines.append(f"const unsigned {which}_tile = static_cast<unsigned>(__cvta_generic_to_shared(smem_{which}));"
                     f"  // shared-window address (kTileAlign{which.upper()}-aligned)")
        if op.warp_offset is not None and op.warp_offset.support:
            lines.append(f"const unsigned {which}_warp = {xor_form_expr(op.warp_offset, 5, warp_bits)};"
                         f"  // this warp group's rows/columns of {which.upper()}")
        else:
            lines.append(f"const uint64_t {which}_desc = detail::desc(kDesc{which.upper()}, {which}_tile);"
                         f"  // the slices': desc_at(), one add each")
    if any(getattr(plan, w).space == "shared" and getattr(plan, w).warp_offset.support for w in ("a", "b")):
        lines.insert(0, "const unsigned warp = tid / kWarpSize;")
    return lines


def _params(plan: MmaPlan) -> str:
    acc = f"{ACC_C[plan.acc_dtype]} (&acc)[kAccRegs]"
    ps = [acc]
    for which in ("a", "b"):
        op = getattr(plan, which)
        ps.append(f"const uint32_t (&{which})[k{which.upper()}Words]" if op.space == "registers"
                  else f"const void* smem_{which}")
    if plan.kind == "wgmma":
        ps.append("int accumulate = 1")
        if any(getattr(plan, w).space == "shared" and getattr(plan, w).warp_offset.support for w in ("a", "b")):
            ps.append("unsigned tid = threadIdx.x")
    return ", ".join(ps)


#: the C headers whose host stand-ins the cvt wrappers of each A type call (``simt/``)
PACK_HEADERS = {"f16": "<cuda_fp16.h>", "bf16": "<cuda_bf16.h>", "f8e4m3": "<cuda_fp8.h>", "f8e5m2": "<cuda_fp8.h>"}


def pack_values(plan: MmaPlan) -> dict:
    """``pack_operand``'s constant, index function, body lines, cvt wrapper and host include -- or, when the
    accumulator's elements are not A's in the same thread, comment lines saying why there is none."""
    none = dict(pack_consts=[], pack_index=[], pack_note=[], pack_lines=[], pack_instructions=[], pack_includes=[])
    if plan.a.space != "registers":
        return none
    try:
        pack = pack_map(plan)
    except MmaError as e:
        return dict(none, pack_note=[f"// No pack_operand(): {e}."])
    wrap = f"detail::cvt_pack_{plan.a_type}"
    lines = []
    for w, regs in enumerate(pack):
        pairs = [f"{wrap}(p[{regs[j + 1]}], p[{regs[j]}])" for j in range(0, len(regs), 2)]
        if len(pairs) == 1:
            lines.append(f"a[{w}] = {pairs[0]};")
        else:                                            # 8-bit: two .b16 pairs, the first in the low half
            lines.append(f"a[{w}] = uint32_t({pairs[0]}) | uint32_t({pairs[1]}) << 16;")
    src = pack_source(plan)
    M, _, K = plan.shape
    return dict(pack_consts=[(f"constexpr int kPackRegs = {src.in_dim_size('register')};",
                              f"f32 registers per thread of the {M} x {K} accumulator pack_operand() takes")],
                pack_index=[f"// Row-major index in the {M} x {K} accumulator pack_operand() takes of the element "
                            f"register `reg` of (lane, warp) holds ({plan.kind}, warps along M).",
                            index_function("p_index", src)],
                pack_note=[], pack_lines=lines, pack_instructions=[cvt_pack(plan.a_type)],
                pack_includes=[f"#include {PACK_HEADERS[plan.a_type]}"])


def namespace_values(plan: MmaPlan, name: str) -> dict:
    """Everything the header's namespace holds."""
    wrap = wrapper(plan)
    acc = layout_of(plan.acc_layout)
    M, N, K = plan.shape
    consts = [(f"constexpr int kThreads = {plan.threads};", "threads taking part: tid in [0, kThreads)"),
              (f"constexpr int kWarpSize = {plan.warp_size};", ""),
              (f"constexpr int kM = {M}, kN = {N}, kK = {K};", "acc (M x N) += A (M x K) * B (K x N)"),
              (f"constexpr int kElemBytes = {AB_BYTES[plan.dtype]};", f"bytes of one A/B element ({_types(plan)})"),
              (f"constexpr int kAccRegs = {plan.acc_regs};",
               f"accumulator registers per thread ({plan.acc_dtype}"
               f"{', two per register' if plan.acc_per_reg > 1 else ''})")]
    if plan.acc_per_reg > 1:
        consts.append((f"constexpr int kAccPerReg = {plan.acc_per_reg};",
                       "f16 accumulator elements per register: element 2r + h is half h (low first) of acc[r]"))
    index = [comment_lines("Row-major index in the M x N accumulator of the element register `reg` of (lane, warp) "
                           "holds" + (" (element, not register: see kAccPerReg)." if plan.acc_per_reg > 1 else "."))[0],
             index_function("acc_index", acc)]
    for which, dims in (("a", "M x K"), ("b", "K x N")):
        op = getattr(plan, which)
        W = which.upper()
        L = layout_of(op.layout)
        if op.space == "registers":
            consts.append((f"constexpr int k{W}Words = {op.regs};", f"32-bit words of operand {W} per thread"))
            index += [f"// Row-major index in {W} ({dims}) of the element register `reg` (element, not word) of "
                      f"(lane, warp) holds.", index_function(f"{which}_index", L)]
        else:
            d = op.descriptor
            consts += [(f"constexpr int kTileBytes{W} = {op.bytes};", f"bytes of {W}'s shared tile"),
                       (f"constexpr int kTileAlign{W} = {op.align};",
                        "the swizzle acts on address bits: the tile starts on its pattern's repeat"
                        if op.align > 16 else "byte alignment of the tile"),
                       (f"constexpr uint64_t kDesc{W} = {hex_const(d.fields())}ull;",
                        f"{'K' if d.k_major else 'MN'}-major, swizzle {d.swizzle_bytes or 'none'}, "
                        f"LBO {d.lbo_bytes} B, SBO {d.sbo_bytes} B (start address added per instruction)")]
            index += [f"// Row-major index in {W} ({dims}) of the element at element offset `offset` of {W}'s tile.",
                      tile_index_function(L).replace("int tile_index(", f"int {which}_tile_index(")]
    pack = pack_values(plan)
    return dict(constants=consts + pack["pack_consts"], index=index + pack["pack_index"], wrapper=wrap,
                records=wrap.instructions + pack["pack_instructions"], pack_lines=pack["pack_lines"],
                pack_note=pack["pack_note"],
                host_includes=["#include <cstring>"] + pack["pack_includes"],
                calls=calls(plan, wrap), prologue=_prologue(plan),
                params=_params(plan), wgmma=plan.kind == "wgmma", ab_raw=RAW[AB_BYTES[plan.dtype]],
                acc_c=ACC_C[plan.acc_dtype], acc_constraint=ACC_CONSTRAINT[plan.acc_dtype],
                acc_per_reg=plan.acc_per_reg,
                acc_wait=0,          # wait_acc's default N: acc is read next, so no wgmma group may stay in flight
                shared_a=plan.a.space == "shared", shared_b=plan.b.space == "shared")


def header(plan: MmaPlan, name: str, command: str = "", src_text: str | None = None, dst_text: str | None = None,
           back_plan=None) -> dict:
    """Values of ``mma.cuh.j2``: the opening comment, the host includes, ``ns`` (the namespace's values,
    ``mma_namespace.j2``)."""
    comment = comment_lines(f"Generated by ll_codegen. Do not edit.\nCommand: {command or '(library call)'}\n\n"
                            f"Plan:\n{mma_summary(plan)}")
    ns = namespace_values(plan, name)
    return dict(comment=comment, host_includes=ns["host_includes"], ns=ns)


def harness(plan: MmaPlan, name: str, command: str = "", src_text: str | None = None, dst_text: str | None = None,
            back_plan=None) -> dict:
    """Values of ``harness_mma.cu.j2``: A and B row-major in, the accumulator in and out."""
    vals = namespace_values(plan, name)
    a_off = 0
    b_off = 0
    if plan.a.space == "shared" and plan.b.space == "shared":
        b_off = -(-plan.a.bytes // plan.b.align) * plan.b.align
    chunks = {}
    for which in ("a", "b"):
        op = getattr(plan, which)
        c, t = harness_chunk(op.layout, AB_BYTES[plan.dtype]) if op.space == "shared" else (1, None)
        chunks.update({f"{which}_chunk": c, f"{which}_chunk_type": t})
    return dict(vals, **chunks, a_off=a_off, b_off=b_off, smem_bytes=plan.smem_bytes,
                a_regs=(plan.a.regs * 4 // AB_BYTES[plan.dtype]) if plan.a.space == "registers" else 0,
                b_regs=(plan.b.regs * 4 // AB_BYTES[plan.dtype]) if plan.b.space == "registers" else 0)


def _files(kind: str, template: str, values):
    """(template of the plan, values of the plan) for one file kind: AMD MFMA plans render through
    ``emit/mfma.py``'s templates and values, NVIDIA's through this module's."""
    def template_of(plan: MmaPlan) -> str:
        return MFMA_FILES[kind][0] if plan.kind == "mfma" else template

    def values_of(plan: MmaPlan, *args) -> dict:
        return (MFMA_FILES[kind][1] if plan.kind == "mfma" else values)(plan, *args)
    return template_of, values_of


#: kind -> (template of the plan, its values) of an MMA's files
MMA_FILES = {"header": _files("header", "mma.cuh.j2", header),
             "harness": _files("harness", "harness_mma.cu.j2", harness)}
