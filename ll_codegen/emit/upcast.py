"""Render an upcast (``plan.operation == "upcast"``, ``plan/upcast.py``): the header's ``convert()``
(the move in the source type, nested as ``move``, then ``upcast()``) and the harness.

``upcast(mid, dst)`` is the in-thread step alone, for a caller that already holds ``I``: per source
word of ``I`` (``group`` elements) the plan's output words, each one line of wrapper instructions
(``emit/instructions.py``: lop3, prmt, fma.rn.f16x2/bf16x2, the fp8 cvt pairs) and plain shifts
and masks; ``dst`` is 32-bit words, element ``2m`` in the low half of word ``m``, as mma.sync and
wgmma take their register operands -- or, for an f32 destination (a tf32 MMA's A fragment), element
``m`` in word ``m``.  Only a mixed-input MMA renders an f32 destination (its header holds this
namespace); the upcast's own harness writes 16-bit elements.  A 16-bit float source (f16, bf16 into
f32) is read element by element (``half_line``): no source word is assembled.  An 8-bit destination
(an 8-bit MMA's A fragment) is four elements a word, element ``4m + j`` in byte ``j`` of word ``m``,
from a word of 8 nibbles in order (``byte_slot_expr``).
"""
from __future__ import annotations

import re

import numpy as np

from ll_codegen.core.dtypes import C_RAW
from ll_codegen.core.layout import layout_of
from ll_codegen.emit import convert as emit_convert, memory as emit_memory
from ll_codegen.emit.body import (INDEX_COMMENT, TID, Fn, Namespace, constants, header_context,
                                  harness_context, new_namespace, use_instruction)
from ll_codegen.emit.cexpr import index_function
from ll_codegen.emit.instructions import CVT_F32_F16, LOP3, MUL_RN_F32, PRMT, cvt_fp8x2, cvt_pack, fma_x2
from ll_codegen.emit.harness_tiles import scratch_bytes
from ll_codegen.emit.packed import param_names
from ll_codegen.plan.packed import side_bytes
from ll_codegen.plan.report import upcast_summary
from ll_codegen.plan.upcast import UpcastPlan, half_kind, slot_pair, slot_size, source_bits

#: 4-bit integer sequences: (lop3 LUT, magic OR'ed / xor'ed in, fma's b (1.0), fma's c (-bias))
LOP3_MAGIC = {"u4_f16": (0xEA, 0x64006400, 0x3C003C00, 0xE400E400),
              "i4_f16": (0x6A, 0x64086408, 0x3C003C00, 0xE408E408),
              "u4_bf16": (0xEA, 0x43004300, 0x3F803F80, 0xC300C300),
              "i4_bf16": (0x6A, 0x43084308, 0x3F803F80, 0xC308C308)}

#: e2m1: (shift of exponent+mantissa under the exponent field, fma's b (2^14 / 2^126), fma's c (-0))
E2M1 = {"e2m1_f16": (9, 0x74007400, 0x80008000), "e2m1_bf16": (6, 0x7E807E80, 0x80008000)}

#: e2m1 into an 8-bit float: the two table words of prmt's lookup, byte i the destination code of the
#: e2m1 magnitude code i (0, 0.5, 1, 1.5, 2, 3, 4, 6; e4m3's 0.5 the normal 0x30, e5m2's 0x38)
E2M1_BYTE_TABLE = {"e2m1_f8e4m3": (0x3C383000, 0x4C484440), "e2m1_f8e5m2": (0x3E3C3800, 0x46444240)}

#: i4 into s8: (each nibble's xor into l and h: n ^ 8 = v + 8, the add and xor that take 8 off each byte)
I4_BYTES = (0x08080808, 0x78787878, 0x80808080)


def _hex(v: int) -> str:
    return f"0x{v:08x}u"


def word_line(kind: str, group: int, w: int) -> str:
    """``x<w>``: source word ``w`` of ``mid`` with its elements where the sequence reads them (nibble
    ``j`` at bit 4j below group/2 and 16 + 4(j - group/2) above; byte ``j`` at bit 8j)."""
    four = kind.split("_")[0] in ("u4", "i4", "e2m1")
    m = lambda i: f"static_cast<uint32_t>(m[{i}])"  # noqa: E731
    if slot_size(kind) == 4:                             # nibbles in order: the bytes of I as they are
        b = group // 2 * w
        e = " | ".join(m(b + i) + (f" << {8 * i}" if i else "") for i in range(group // 2))
    elif four and group == 8 or not four and group == 4:
        b = 4 * w
        e = f"{m(b)} | {m(b + 1)} << 8 | {m(b + 2)} << 16 | {m(b + 3)} << 24"
    elif four and group == 4:
        e = f"{m(2 * w)} | {m(2 * w + 1)} << 16"
    elif four:
        e = f"{m(w)} | {m(w)} << 12"                         # the high nibble to bits 16-19
    else:
        e = f"{m(2 * w)} | {m(2 * w + 1)} << 8"
    if kind == "i8_f16":
        return f"const uint32_t x{w} = ({e}) ^ 0x80808080u;  // b ^ 0x80 = b + 128 for signed b"
    return f"const uint32_t x{w} = {e};"


def nibble_bytes_line(conv: Namespace, kind: str, w: int) -> str:
    """``l<w>``, ``h<w>``: the even and the odd nibbles of ``x<w>`` as bytes (i4: each xor 8, the signed
    value plus 8), which the output words interleave (``byte_slot_expr``)."""
    x = f"x{w}"
    if kind.startswith("i4"):
        lop = use_instruction(conv, LOP3)
        f = lambda a: f"{lop}<0x0f0f0f0fu, 0x6a>({a}, {_hex(I4_BYTES[0])})"  # noqa: E731  (a & b) ^ c
        return f"const uint32_t l{w} = {f(x)}, h{w} = {f(f'{x} >> 4')};"
    return f"const uint32_t l{w} = {x} & 0x0f0f0f0fu, h{w} = ({x} >> 4) & 0x0f0f0f0fu;"


def byte_slot_expr(conv: Namespace, kind: str, w: int, k: int) -> str:
    """Output word ``k`` (elements ``4k .. 4k + 3`` of ``x<w>``) of a 4-bit -> 8-bit sequence: the bytes
    of l and h interleaved by prmt (i4: then 8 taken off each byte without a carry between bytes:
    ``(b + 0x78) ^ 0x80`` = b - 8 for b in 0 .. 15), or e2m1's table lookup.  The lookup's selector is
    a register, which the prmt wrapper's immediate cannot be: CUDA's ``__byte_perm`` is that prmt."""
    if kind in E2M1_BYTE_TABLE:
        t0, t1 = E2M1_BYTE_TABLE[kind]
        s, sign = (f"(x{w} >> 16)", f"(x{w} >> 17)") if k else (f"x{w}", f"(x{w} >> 1)")
        return f"__byte_perm({_hex(t0)}, {_hex(t1)}, {s} & 0x7777u) | __byte_perm(0u, 0x80u, {sign} & 0x4444u)"
    prmt = use_instruction(conv, PRMT)
    e = f"{prmt}<0x{0x7362 if k else 0x5140:04x}u>(l{w}, h{w})"
    if kind.startswith("i4"):
        return f"(({e}) + {_hex(I4_BYTES[1])}) ^ {_hex(I4_BYTES[2])}"
    return e


def word_expr(conv: Namespace, kind: str, w: int, k: int) -> str | None:
    """Output word ``k`` of source word ``x<w>`` as one expression, for the sequences that are one (the
    4-bit lop3 / e2m1 ones, u8 and i8 to f16, fp8 to f16); None for the others."""
    x = f"x{w}"
    t = "bf16x2" if kind.endswith("bf16") else "f16x2"
    if kind in LOP3_MAGIC:
        lut, magic, one, bias = LOP3_MAGIC[kind]
        lop = use_instruction(conv, LOP3)
        fma = use_instruction(conv, fma_x2(t))
        shifted = f"{x} >> {4 * k}" if k else x
        return f"{fma}({lop}<0x000f000fu, 0x{lut:02x}>({shifted}, {_hex(magic)}), {_hex(one)}, {_hex(bias)})"
    if kind in E2M1:
        sh, scale, zero = E2M1[kind]
        lop = use_instruction(conv, LOP3)
        fma = use_instruction(conv, fma_x2(t))
        t_k = f"({x} >> {4 * k})" if k else x
        sign = f"{x} << {12 - 4 * k}" if 12 - 4 * k else x
        return f"{fma}({lop}<0x80008000u, 0xf8>(({t_k} & 0x00070007u) << {sh}, {sign}), {_hex(scale)}, {_hex(zero)})"
    if kind in ("u8_f16", "i8_f16"):
        prmt = use_instruction(conv, PRMT)
        fma = use_instruction(conv, fma_x2("f16x2"))
        sel = 0x4140 + 2 * k * 0x101
        bias = 0xE400E400 if kind == "u8_f16" else 0xE480E480
        return f"{fma}({prmt}<0x{sel:04x}u>({x}, 0x64646464u), 0x3c003c00u, {_hex(bias)})"
    if kind in ("f8e4m3_f16", "f8e5m2_f16"):
        cvt = use_instruction(conv, cvt_fp8x2(kind.rsplit("_", 1)[0]))
        return f"{cvt}(static_cast<uint16_t>({x} >> {16 * k}))" if k else f"{cvt}(static_cast<uint16_t>({x}))"
    return None


def slot_line(conv: Namespace, kind: str, w: int, k: int, dw: int) -> str:
    """``dst[dw] = ...``: output word ``k`` of source word ``w`` (an f32 destination: the two words
    ``dst[2dw]``, ``dst[2dw + 1]``)."""
    x = f"x{w}"
    if slot_size(kind) == 4:
        return f"dst[{dw}] = {byte_slot_expr(conv, kind, w, k)};"
    half = half_kind(kind)
    if half is not None:              # the f16 pair, each half widened exactly (cvt.f32.f16)
        to32 = use_instruction(conv, CVT_F32_F16)
        return (f"{{ const uint32_t h = {word_expr(conv, half, w, k)}; "
                f"dst[{2 * dw}] = __float_as_uint({to32}(static_cast<uint16_t>(h))); "
                f"dst[{2 * dw + 1}] = __float_as_uint({to32}(static_cast<uint16_t>(h >> 16))); }}")
    if kind in ("u8_f32", "i8_f32"):  # each byte converted exactly (the integer -> f32 cvt of a C cast)
        c = "signed char" if kind == "i8_f32" else "uint8_t"   # NVRTC has no int8_t (cuda_types.j2)
        f = lambda s: f"__float_as_uint(static_cast<float>(static_cast<{c}>({x} >> {s})))"  # noqa: E731
        return f"dst[{2 * dw}] = {f(16 * k)}; dst[{2 * dw + 1}] = {f(16 * k + 8)};"
    e = word_expr(conv, kind, w, k)
    if e is not None:
        return f"dst[{dw}] = {e};"
    if kind in ("u8_bf16", "i8_bf16"):
        pack = use_instruction(conv, cvt_pack("bf16"))
        c = "signed char" if kind == "i8_bf16" else "uint8_t"   # NVRTC has no int8_t (cuda_types.j2)
        f = lambda s: f"static_cast<float>(static_cast<{c}>({x} >> {s}))"  # noqa: E731
        return f"dst[{dw}] = {pack}({f(16 * k + 8)}, {f(16 * k)});"
    src = kind.rsplit("_", 1)[0]
    cvt = use_instruction(conv, cvt_fp8x2(src))
    pair = f"static_cast<uint16_t>({x} >> {16 * k})" if k else f"static_cast<uint16_t>({x})"
    pack = use_instruction(conv, cvt_pack("bf16"))
    to32 = use_instruction(conv, CVT_F32_F16)
    return (f"{{ const uint32_t h = {cvt}({pair}); dst[{dw}] = {pack}({to32}(static_cast<uint16_t>(h >> 16)), "
            f"{to32}(static_cast<uint16_t>(h))); }}")


def half_line(conv: Namespace, kind: str, lo: int, hi: int, dw: int) -> str:
    """``dst[2dw], dst[2dw + 1]`` from the 16-bit elements ``m[lo]``, ``m[hi]`` of an f32 sequence: f16 by
    ``cvt.f32.f16`` (exact: f32 holds every f16 value), bf16 by shifting its bits into f32's top half
    (bf16 is f32 with the low 16 mantissa bits dropped, so this is the value itself, NaNs and all)."""
    if kind == "f16_f32":
        to32 = use_instruction(conv, CVT_F32_F16)
        f = lambda i: f"__float_as_uint({to32}(m[{i}]))"  # noqa: E731
    else:
        f = lambda i: f"static_cast<uint32_t>(m[{i}]) << 16"  # noqa: E731
    return f"dst[{2 * dw}] = {f(lo)}; dst[{2 * dw + 1}] = {f(hi)};"


def upcast_lines(conv: Namespace, plan: UpcastPlan) -> list[str]:
    """The body of ``upcast()``: one word line per source word, then its output words (a 16-bit source:
    its elements read as they are, ``half_line``); with scales, one fma per output word after them
    (``scale_lines``)."""
    s = plan.sequence
    raw = C_RAW[plan.elem_bytes]
    lines = [f"const {raw}* const m = reinterpret_cast<const {raw}*>(mid);"]
    for w, k, dw in s.words:
        if source_bits(s.kind) == 16:
            lines.append(half_line(conv, s.kind, *slot_pair(s.kind, s.group, w, k), dw))
            continue
        if k == 0:
            lines.append(word_line(s.kind, s.group, w))
            if slot_size(s.kind) == 4 and not s.kind.startswith("e2m1"):
                lines.append(nibble_bytes_line(conv, s.kind, w))
        lines.append(slot_line(conv, s.kind, w, k, dw))
    return lines + (scale_lines(conv, plan) if plan.scaling is not None else [])


def scale_lines(conv: Namespace, plan: UpcastPlan) -> list[str]:
    """Each scale register as a pair word (e8m0: 2^(e-127) as bf16, 0 -> the subnormal 2^-127, 255 ->
    NaN), with zero points ``c = -RNE(z * s)`` (an fma, the sign flipped), then per output word
    ``dst = fma(dst, S, C)`` with S, C the pair words of its two elements' scale registers."""
    c = plan.scaling
    if plan.dst_dtype == "f32":
        return f32_scale_lines(conv, plan)
    t = "bf16x2" if plan.dst_dtype == "bf16" else "f16x2"
    fma = use_instruction(conv, fma_x2(t))
    lines = [f"// scales: dst = RNE(u * s{' + c' if c.zero_point else ''}), s per {c.group} elements along dim {c.dim}"]
    for j in range(c.regs):
        v = f"static_cast<uint32_t>(scales[{j}])"
        if c.dtype == "e8m0":
            v = f"({v} == 0u ? 0x40u : {v} == 255u ? 0x7fffu : {v} << 7)"
        lines.append(f"const uint32_t s{j} = {v} * 0x10001u;")
        if c.zero_point:
            lines.append(f"const uint32_t c{j} = {fma}(static_cast<uint32_t>(zeros[{j}]) * 0x10001u, s{j}, "
                         f"0x80008000u) ^ 0x80008000u;  // -RNE(z * s)")

    def pair(name: str, a: int, b: int) -> str:
        return f"{name}{a}" if a == b else f"(({name}{a} & 0xffffu) | ({name}{b} & 0xffff0000u))"
    for dw in range(plan.dst_words):
        a, b = c.reg_of[2 * dw], c.reg_of[2 * dw + 1]
        cz = pair("c", a, b) if c.zero_point else "0x80008000u"
        lines.append(f"dst[{dw}] = {fma}(dst[{dw}], {pair('s', a, b)}, {cz});")
    return lines


def f32_scale_lines(conv: Namespace, plan: UpcastPlan) -> list[str]:
    """e8m0 scales of f32 destinations: each scale register as the f32 2^(e - 127) (0 -> the subnormal
    2^-127, 255 -> NaN), then ``dst[r] = dst[r] * s`` (mul.rn.f32: exact but for overflow to infinity,
    the product of a value of at most 8 significant bits and a power of two)."""
    c = plan.scaling
    mul = use_instruction(conv, MUL_RN_F32)
    lines = [f"// scales: dst = u * s, s = 2^(e - 127) per {c.group} elements along dim {c.dim}"]
    for j in range(c.regs):
        e = f"static_cast<uint32_t>(scales[{j}])"
        lines.append(f"const float s{j} = __uint_as_float({e} == 0u ? 0x00400000u : {e} == 255u ? 0x7fffffffu "
                     f": {e} << 23);")
    lines += [f"dst[{r}] = __float_as_uint({mul}(__uint_as_float(dst[{r}]), s{c.reg_of[r]}));"
              for r in range(plan.n_dst)]
    return lines


def word_elements(plan: UpcastPlan) -> str:
    """Where a destination element sits in the 32-bit words (as mma.sync and wgmma read registers)."""
    return {1: "one f32 element each", 2: "element 2m the low half of m",
            4: "element 4m + j byte j of m"}[plan.n_dst // plan.dst_words]


def scale_params(plan: UpcastPlan) -> str:
    """The scale parameters of the public functions (none without scales)."""
    c = plan.scaling
    if c is None:
        return ""
    t = "uint8_t" if c.dtype == "e8m0" else "uint16_t"
    return f", const {t} (&scales)[kScaleRegs]" + (", const uint16_t (&zeros)[kScaleRegs]" if c.zero_point else "")


def scale_args(plan: UpcastPlan) -> str:
    c = plan.scaling
    return "" if c is None else ", scales" + (", zeros" if c.zero_point else "")


def namespace(plan: UpcastPlan, name: str) -> Namespace:
    """The upcast's namespace: constants, src_index (or the tile's constants and tile_index) and
    dst_index, the move (nested), ``upcast()`` and ``convert()`` (a load: ``load()`` and
    ``load_masked()``, the move's own parameters with 32-bit destination words)."""
    conv = new_namespace(plan, name)
    mv = plan.move
    inner = emit_memory.namespace(mv, "move") if plan.from_memory else emit_convert.namespace(mv, "move", nested=True)
    conv.nested = [inner]
    s = plan.sequence
    head = [(f"constexpr int kSrcRegs   = {plan.n_src};", "source registers per thread (bytes of two elements)"
             if mv.packing is not None else f"source registers per thread ({plan.dtype})"),
            (f"constexpr int kMidRegs   = {mv.n_dst};", "the same in the layout I, before upcast()"),
            (f"constexpr int kDstRegs   = {plan.n_dst};", f"{plan.dst_dtype} elements per thread after convert()"),
            (f"constexpr int kDstWords  = {plan.dst_words};", f"32-bit words of them: {word_elements(plan)}"),
            (f"constexpr int kSmemBytes = {plan.smem_bytes};", "shared-memory scratch convert() needs (0: none)")]
    if plan.from_memory:
        head = head[1:]                                          # no source registers: a tile
    if plan.scaling is not None:
        zeros = " and zero points" if plan.scaling.zero_point else ""
        head.append((f"constexpr int kScaleRegs = {plan.scaling.regs};",
                     f"{plan.scaling.dtype} scales per thread (scale_index){zeros}"))
    conv.constants = constants(plan, head)
    if plan.from_memory:                                         # the tile's own constants, as the move states them
        mine = {_declared(c) for c in conv.constants}
        conv.constants += [c for c in inner.constants if _declared(c) not in mine and _declared(c) != "kRegs"]
        tile = [line for line in inner.index_functions if "tile_index(" in line]
        conv.index_functions = INDEX_COMMENT + tile + [index_function("dst_index", layout_of(plan.dst_bases))]
    else:
        src = side_bytes(mv.packing, "src") if mv.packing is not None else layout_of(plan.src_bases)
        conv.index_functions = INDEX_COMMENT + [index_function("src_index", src),
                                                index_function("dst_index", layout_of(plan.dst_bases))]
    if plan.scaling is not None:
        conv.index_functions.append(index_function("scale_index", layout_of(plan.scaling.bases)))
    counts = f"{len(s.ops)} instructions for {len(s.order)} elements ({s.per_element:.3g} per element)"
    up = Fn("upcast", "const T (&mid)[kMidRegs]" + scale_params(plan) + ", uint32_t (&dst)[kDstWords]",
            doc=[f"// upcast(): {plan.dtype} -> {plan.dst_dtype} in this thread, exactly: mid holds the layout I "
                 f"(the destination's",
                 f"// register bases permuted: I's basis j is the destination's basis {list(s.perm)}[j]); "
                 + {1: "dst[m] gets element m", 2: "dst[m] gets elements 2m, 2m+1",
                    4: "dst[m] gets elements 4m .. 4m+3"}[plan.n_dst // plan.dst_words],
                 f"// of the destination layout. {counts}."],
            moves=upcast_lines(conv, plan))
    if plan.from_memory:
        conv.functions = [up] + [forward_load(f, plan) for f in inner.functions if f.name in ("load", "load_masked")]
        return conv
    cv = Fn("convert", f"const T (&src)[kSrcRegs]{scale_params(plan)}, uint32_t (&dst)[kDstWords], void* smem, {TID}",
            doc=[f"// convert(): the move in {plan.dtype} (move::convert, {mv.strategy}) into I, then upcast()."],
            moves=["T mid[kMidRegs];", "move::convert(src, mid, smem, tid);", f"upcast(mid{scale_args(plan)}, dst);"])
    conv.functions = [up, cv]
    return conv


def _declared(line: str) -> str:
    m = re.search(r"constexpr \w+ (\w+)", line)
    return m.group(1) if m else line


def forward_load(f: Fn, plan: UpcastPlan) -> Fn:
    """``load()`` / ``load_masked()`` of the upcast: the move's function with the same parameters but
    ``uint32_t (&dst)[kDstWords]`` (the scales before it), loading ``I`` in the source type and
    upcasting it."""
    params = f.params.replace("T (&dst)[kRegs]", scale_params(plan)[2:] + (", " if plan.scaling else "")
                              + "uint32_t (&dst)[kDstWords]")
    args = ["mid" if a == "dst" else a for a in param_names(f.params)]
    doc = [line.replace("kRegs registers", "kDstWords destination words") for line in f.doc]
    doc.append(f"// Here: move::{f.name} loads the layout I in the source type (kMidRegs registers), then upcast().")
    return Fn(f.name, params, doc=doc,
              moves=["T mid[kMidRegs];", f"move::{f.name}({', '.join(args)});",
                     f"upcast(mid{scale_args(plan)}, dst);"])


def header(plan: UpcastPlan, name: str, command: str = "", src_text: str | None = None,
           dst_text: str | None = None, back_plan=None) -> dict:
    """Template values of the header."""
    return header_context(plan, namespace(plan, name), command, src_text, dst_text, upcast_summary(plan))


def harness(plan: UpcastPlan, name: str, command: str = "", src_text: str | None = None,
            dst_text: str | None = None, back_plan=None) -> dict:
    """Template values of the harness: source registers from ``in``, convert(), the destination words to
    ``dst_regs_out`` and their halves to ``out``."""
    c = plan.scaling
    offsets = scale_offsets(plan)
    scale = dict(scale_t=("uint8_t" if c.dtype == "e8m0" else "uint16_t") if c else "",
                 zero=bool(c and c.zero_point), scale_args=(", sc, zr" if c.zero_point else ", sc") if c else "",
                 scale_offset=offsets[0], zero_offset=offsets[1])
    if not plan.from_memory:
        return dict(conv=namespace(plan, name), **harness_context(plan, None), **scale)
    ctx = harness_context(plan.move, plan.move.memory)      # the move's tile: its strides and scratch
    ctx.update(variants=("",), smem_bytes=plan.smem_bytes, tile_elems=int(np.prod(plan.shape)),
               packed_elems=int(np.prod(plan.move.shape)), shape=list(plan.move.shape), **scale)
    return dict(conv=namespace(plan, name), **ctx)


def scale_offsets(plan: UpcastPlan) -> tuple[int, int]:
    """Byte offsets of the scale tensor and the zero points in the harness's ``scratch``: after the
    global source tile (16-byte aligned), the zero points after the scales."""
    tile = max(16, -(-scratch_bytes(plan.move) // 16) * 16)
    c = plan.scaling
    n = int(np.prod(c.shape)) * (1 if c.dtype == "e8m0" else 2) if c is not None else 0
    return tile, tile + -(-n // 16) * 16


def wrapper_calls(text: str) -> list[str]:
    """The ``detail::`` wrapper calls of generated code, in order (what ``UpcastSequence.ops`` counts)."""
    return re.findall(r"detail::(\w+)", text)


#: kind -> (template, its values) of an upcast's files
UPCAST_FILES = {"header": ("upcast.cuh.j2", header), "harness": ("harness_upcast.cu.j2", harness)}


