"""Upcasts inside the operation: a conversion or load whose destination element type is wider.

``llgen convert --dtype u4 --dst-dtype bf16``: source elements of ``i4``, ``u4``, ``e2m1``,
``f8e4m3``, ``f8e5m2``, ``i8`` or ``u8`` become ``f16`` or ``bf16`` elements of the destination
layout (typically an MMA operand fragment).  Every one of these upcasts is exact: each source
value is representable in both targets (4-bit integers and 8-bit integers have at most 8
significant bits and |x| <= 255; e2m1 is {0, 0.5, 1, 1.5, 2, 3, 4, 6} with a sign; e4m3 has 4
significant bits and exponents 2^-9 .. 2^8, e5m2 3 bits and 2^-16 .. 2^15, inside f16's and bf16's
ranges, subnormals included).  e5m2's infinities stay infinities; the NaN codes of e4m3 (0x7f,
0xff) and e5m2 (exponent all ones, mantissa non-zero) become a NaN (the canonical 0x7fff on the
CPU models; the PTX ISA does not fix the payload, so the GPU check asks for a NaN).

Inside a mixed-input MMA of a tf32 instruction (``llgen mma --a-dtype X --dtype tf32``) the destination
is ``f32`` (``MMA_UPCAST_TARGETS``): one element per 32-bit register, each value exact (f32 holds every
f16 value) and a tf32 value (at most 8 significant bits, tf32 keeps 11).  The sequences are the f16
ones followed by ``cvt.f32.f16`` per element (4-bit and fp8 sources), or one integer -> f32
``cvt.rn`` per byte (i8, u8); e8m0 scales multiply in f32 (``mul.rn.f32`` by 2^(e - 127): exact but
for overflow to infinity, subnormals kept).  The f32 destination also takes the 16-bit floats
(``F32_ONLY_SOURCES``): f16 by ``cvt.f32.f16`` per element, bf16 (f32's top 16 bits) by a 16-bit
shift, both exact and tf32 values (at most 11 significant bits); they take no scales.

Inside a mixed-input MMA of an 8-bit instruction (``--dtype i8|u8|f8e4m3|f8e5m2``) the destination is
the instruction's own type, four elements a 32-bit word (element ``4m + j`` in byte ``j`` of word
``m``), from the 4-bit sources it holds exactly (``BYTE_UPCASTS``).  A source word holds 8 nibbles in
order (nibble ``j`` at bit ``4j``: ``I`` is the destination itself, its nibble pairs the destination's
K pairs) and gives two destination words:

* u4 -> u8 and u4 -> s8: ``l = x & 0x0f0f0f0f`` (nibbles 0, 2, 4, 6 as bytes), ``h = (x >> 4) &
  0x0f0f0f0f`` (1, 3, 5, 7), then ``prmt(l, h, 0x5140)`` = [n0, n1, n2, n3] and ``prmt(l, h, 0x7362)`` =
  [n4, n5, n6, n7];
* i4 -> s8: the same with ``l, h = lop3 (.. & 0x0f0f0f0f) ^ 0x08080808`` (each byte n ^ 8 = v + 8 for
  the signed value v), then per word ``(w + 0x78787878) ^ 0x80808080``: each byte v + 0x80 (no carry
  leaves a byte: at most 0x87), and the xor subtracts 0x80 modulo 256 -- v as s8;
* e2m1 -> e4m3 / e5m2: a table lookup, the selector the word's own nibbles: ``prmt(T0, T1, s &
  0x7777)`` picks byte ``n & 7`` of the eight-byte table of the magnitudes (e4m3: 00 30 38 3c 40 44 48
  4c, the subnormal 0.5 the normal 0x30; e5m2: 00 38 3c 3e 40 42 44 46), ``prmt(0, 0x80, (s >> 1) &
  0x4444)`` byte 4 (0x80) where the nibble's sign is set, or'ed: ``s`` is ``x`` for the first word,
  ``x >> 16`` for the second (prmt reads the selector's low 16 bits).

8-bit destinations take no scales (``parse_scales``).

The plan (``UpcastPlan``) is two steps:

1. ``move``: the data moved *in the source type* from the source layout into the intermediate
   register layout ``I`` -- the destination layout with its register bits permuted
   (``UpcastSequence.perm``: register basis ``j`` of ``I`` is register basis ``perm[j]`` of the
   destination) -- by the conversion or load planner (a packed 4-bit move is the byte plan of
   the quotient layouts, ``plan/packed.py``);
2. the in-thread upcast ``I -> destination``: each 32-bit source word (``group`` elements of ``I``)
   feeds the fast sequence of the pair (``kind``), whose output words are destination
   register pairs (element ``2m`` in the low half of word ``m``; f32: elements ``2m``, ``2m + 1`` in
   words ``2m``, ``2m + 1``).  A 16-bit source word is two elements, one per half: no packing, and
   its sequence reads each half on its own.

Why the permutation: the 4-bit sequences (lop3 magic numbers) turn the nibbles at bits ``4k``
and ``16 + 4k`` of a word into one f16x2/bf16x2 word with one lop3 and one fma, so output word
``k`` pairs nibbles ``k`` and ``k + group/2``: ``I``'s register bit ``log2(group) - 1`` is the
destination's register bit 0 and ``I``'s lower bits the destination's bits 1, 2.  The 8-bit
sequences (prmt, cvt) pair neighbouring bytes: ``I`` is the destination itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ll_codegen.core.dtypes import (BYTE_UPCASTS, DTYPE_BITS, F32_ONLY_SOURCES, MMA_UPCAST_TARGETS, dtype_bytes, is_packed,
                                    upcast_problem, upcast_sources)
from ll_codegen.core.limits import short
from ll_codegen.core.layout import LinearLayout
from ll_codegen.core.target import get_target
from ll_codegen.plan import packed, planner
from ll_codegen.plan.plans import LoadPlan, Transfer

#: (source, destination) -> the sequence kind
KINDS = {(s, d): f"{s}_{d}" for d in MMA_UPCAST_TARGETS for s in upcast_sources(d)}

#: sequence kind -> (the oldest sm_XY it runs on, what it does in one line)
SEQUENCES = {
    "u4_f16": (80, "lop3 (x & 0x000f000f) | 0x64006400 (1024 + n), fma.rn.f16x2 x * 1 - 1024"),
    "i4_f16": (80, "lop3 (x & 0x000f000f) ^ 0x64086408 (1024 + (n ^ 8)), fma.rn.f16x2 x * 1 - 1032"),
    "u4_bf16": (80, "lop3 (x & 0x000f000f) | 0x43004300 (128 + n), fma.rn.bf16x2 x * 1 - 128"),
    "i4_bf16": (80, "lop3 (x & 0x000f000f) ^ 0x43084308 (128 + (n ^ 8)), fma.rn.bf16x2 x * 1 - 136"),
    "e2m1_f16": (80, "exponent+mantissa to f16 bits 9-11, sign to bit 15 (lop3), fma.rn.f16x2 x * 2^14 - 0"),
    "e2m1_bf16": (80, "exponent+mantissa to bf16 bits 6-8, sign to bit 15 (lop3), fma.rn.bf16x2 x * 2^126 - 0"),
    "u8_f16": (80, "prmt [b, 0x64, b', 0x64] (1024 + b), fma.rn.f16x2 x * 1 - 1024"),
    "i8_f16": (80, "xor 0x80808080, prmt [b, 0x64, b', 0x64] (1024 + (b ^ 0x80)), fma.rn.f16x2 x * 1 - 1152"),
    "u8_bf16": (80, "each byte to f32 (cvt.rn.f32.u32, exact), cvt.rn.bf16x2.f32 (exact: 8 significant bits)"),
    "i8_bf16": (80, "each byte to f32 (cvt.rn.f32.s32, exact), cvt.rn.bf16x2.f32 (exact: 8 significant bits)"),
    "f8e4m3_f16": (89, "cvt.rn.f16x2.e4m3x2 per byte pair"),
    "f8e5m2_f16": (89, "cvt.rn.f16x2.e5m2x2 per byte pair"),
    "f8e4m3_bf16": (89, "cvt.rn.f16x2.e4m3x2, cvt.f32.f16 twice, cvt.rn.bf16x2.f32 (each exact)"),
    "f8e5m2_bf16": (89, "cvt.rn.f16x2.e5m2x2, cvt.f32.f16 twice, cvt.rn.bf16x2.f32 (each exact)"),
    "u4_f32": (80, "the u4 -> f16 sequence, then cvt.f32.f16 per element (exact)"),
    "i4_f32": (80, "the i4 -> f16 sequence, then cvt.f32.f16 per element (exact)"),
    "e2m1_f32": (80, "the e2m1 -> f16 sequence, then cvt.f32.f16 per element (exact)"),
    "u8_f32": (80, "each byte to f32 (cvt.rn.f32.u32, exact)"),
    "i8_f32": (80, "each byte to f32 (cvt.rn.f32.s32, exact)"),
    "f8e4m3_f32": (89, "cvt.rn.f16x2.e4m3x2 per byte pair, then cvt.f32.f16 per element (each exact)"),
    "f8e5m2_f32": (89, "cvt.rn.f16x2.e5m2x2 per byte pair, then cvt.f32.f16 per element (each exact)"),
    "f16_f32": (80, "cvt.f32.f16 per element (exact)"),
    "bf16_f32": (80, "each element shifted left 16 (bf16 is f32's top half: exact)"),
    "u4_u8": (80, "l = x & 0x0f0f0f0f, h = (x >> 4) & 0x0f0f0f0f, prmt(l, h) 0x5140 and 0x7362"),
    "u4_i8": (80, "l = x & 0x0f0f0f0f, h = (x >> 4) & 0x0f0f0f0f, prmt(l, h) 0x5140 and 0x7362 (0..15 fit s8)"),
    "i4_i8": (80, "l, h = lop3 (x & 0x0f0f0f0f) ^ 0x08080808 of x and x >> 4, prmt(l, h) 0x5140 / 0x7362, "
                  "(w + 0x78787878) ^ 0x80808080 (each byte minus 8)"),
    "e2m1_f8e4m3": (80, "prmt(0x3c383000, 0x4c484440, s & 0x7777) | prmt(0, 0x80, (s >> 1) & 0x4444), s the "
                        "word's nibbles (a table of the 8 magnitudes, the sign)"),
    "e2m1_f8e5m2": (80, "prmt(0x3e3c3800, 0x46444240, s & 0x7777) | prmt(0, 0x80, (s >> 1) & 0x4444), s the "
                        "word's nibbles (a table of the 8 magnitudes, the sign)"),
}


def source_bits(kind: str) -> int:
    """Bits of one source element of the sequence ``kind`` (4, 8 or 16)."""
    return DTYPE_BITS[kind.rsplit("_", 1)[0]]


def slot_size(kind: str) -> int:
    """Destination elements one output word of the sequence ``kind`` covers: four bytes of an 8-bit
    destination, else a pair (one 16-bit pair word, or two f32 words)."""
    return 4 if DTYPE_BITS[kind.rsplit("_", 1)[1]] == 8 else 2


def half_kind(kind: str) -> str | None:
    """The f16 sequence an f32 sequence widens (``cvt.f32.f16`` per element), or None: i8, u8 and the
    16-bit floats go to f32 directly, and the 16-bit destinations are their own sequences."""
    src, dst = kind.rsplit("_", 1)
    return f"{src}_f16" if dst == "f32" and src not in ("i8", "u8") + F32_ONLY_SOURCES else None


def slot_ops(kind: str, k: int, group: int) -> tuple[str, ...]:
    """The instructions output word ``k`` of a source word of ``group`` elements costs, as the
    emitter writes them (``emit/upcast.py``): wrapper instructions by their PTX name, the integer
    shifts and masks the compiler emits for plain C by theirs.  The source word's own ops
    (``word_ops``) are counted once per word."""
    half = half_kind(kind)
    if half is not None:
        return slot_ops(half, k, group) + ("cvt.f32.f16", "cvt.f32.f16")
    src = kind.split("_")[0]
    if slot_size(kind) == 4:                            # 4-bit into bytes
        if src == "e2m1":                               # two selector masks, two table prmts, the or
            return (("shr.b32",) if k else ()) + ("and.b32", "prmt.b32", "shr.b32", "and.b32", "prmt.b32", "or.b32")
        return ("prmt.b32",) + (("add.s32", "xor.b32") if src == "i4" else ())
    if kind == "f16_f32":                               # each half of the source word widened on its own
        return ("cvt.f32.f16", "cvt.f32.f16")
    if kind == "bf16_f32":
        return ("shl.b32", "shl.b32")
    if kind in ("u8_f32", "i8_f32"):                    # byte extract and int -> f32 are plain C casts
        cvt = "cvt.rn.f32.s32" if src == "i8" else "cvt.rn.f32.u32"
        return ("bfe", cvt, "bfe", cvt)
    if src in ("u4", "i4"):
        return (("shr.b32",) if k else ()) + ("lop3.b32", f"fma.rn.{_x2(kind)}")
    if src == "e2m1":
        sign = ("shl.b32",) if 12 - 4 * k else ()
        return (("shr.b32",) if k else ()) + ("and.b32", "shl.b32") + sign + ("lop3.b32", f"fma.rn.{_x2(kind)}")
    if kind in ("u8_f16", "i8_f16"):
        return ("prmt.b32", "fma.rn.f16x2")
    if kind in ("u8_bf16", "i8_bf16"):                  # byte extract and int -> f32 are plain C casts
        cvt = "cvt.rn.f32.s32" if kind == "i8_bf16" else "cvt.rn.f32.u32"
        return ("bfe", cvt, "bfe", cvt, "cvt.rn.bf16x2.f32")
    cvt = f"cvt.rn.f16x2.{'e4m3x2' if 'e4m3' in kind else 'e5m2x2'}"
    shift = ("shr.b32",) if k else ()
    if kind.endswith("_f16"):
        return shift + (cvt,)
    return shift + (cvt, "cvt.f32.f16", "cvt.f32.f16", "cvt.rn.bf16x2.f32")


def word_ops(kind: str, group: int) -> tuple[str, ...]:
    """The instructions a source word costs before its output words: assembling a word of fewer
    than 4 bytes (``group`` 2 or 4 nibbles), i8's sign flip."""
    kind = half_kind(kind) or kind
    ops: tuple[str, ...] = ()
    if kind.split("_")[0] in ("u4", "i4", "e2m1") and group < 8:
        ops += ("shl.b32", "or.b32")
    if slot_size(kind) == 4 and kind.split("_")[0] in ("u4", "i4"):   # the nibbles as bytes, l and h
        ops += ("shr.b32",) + (("lop3.b32", "lop3.b32") if kind.startswith("i4") else ("and.b32", "and.b32"))
    if kind == "i8_f16":
        ops += ("xor.b32",)
    return ops


def _x2(kind: str) -> str:
    return "bf16x2" if kind.endswith("bf16") else "f16x2"


@dataclass(frozen=True)
class UpcastSequence:
    """The in-thread upcast ``I -> destination`` as data: ``kind`` (a key of ``SEQUENCES``),
    ``group`` (elements of ``I`` per source word: 8 nibbles, 4 bytes or 2 halves, fewer when a thread
    holds fewer), ``perm`` (register basis ``j`` of ``I`` is register basis ``perm[j]`` of the
    destination), ``order`` (destination register ``r`` holds ``I``'s register ``order[r]``
    upcast), ``words`` (per output word, in order: (source word, slot k, destination word))."""
    kind: str
    group: int
    perm: tuple[int, ...]
    order: tuple[int, ...]
    words: tuple[tuple[int, int, int], ...]

    @property
    def ops(self) -> tuple[str, ...]:
        """Every instruction of the upcast, in order (``slot_ops``, ``word_ops``)."""
        out: list[str] = []
        for w, k, _ in self.words:
            if k == 0:
                out += word_ops(self.kind, self.group)
            out += slot_ops(self.kind, k, self.group)
        return tuple(out)

    @property
    def per_element(self) -> float:
        """Instructions per destination element."""
        return len(self.ops) / len(self.order)


def slot_elems(kind: str, group: int, word: int, k: int) -> tuple[int, ...]:
    """The ``I`` registers of output word ``k`` of source word ``word``, in destination order: four
    nibbles ``4k .. 4k + 3`` for an 8-bit destination, else ``slot_pair``'s two."""
    if slot_size(kind) == 4:
        return tuple(group * word + 4 * k + j for j in range(4))
    return slot_pair(kind, group, word, k)


def slot_pair(kind: str, group: int, word: int, k: int) -> tuple[int, int]:
    """(``I`` register of the low half, of the high half) of output word ``k`` of source word ``word``:
    4-bit sequences pair nibbles ``k`` and ``k + group/2`` (bits ``4k`` and ``16 + 4k`` of the word),
    8- and 16-bit ones elements ``2k`` and ``2k + 1``."""
    base = group * word
    if kind.split("_")[0] in ("u4", "i4", "e2m1"):
        return base + k, base + k + group // 2
    return base + 2 * k, base + 2 * k + 1


def sequence(kind: str, n: int, pair_vector: tuple[int, ...] | None, dst: LinearLayout) -> UpcastSequence:
    """The upcast of ``n`` destination registers per thread for ``kind`` (an 8-bit destination: ``I`` the
    destination itself, nibbles in order); ``pair_vector`` (a 4-bit
    source's nibble pair, or None) picks, among the permutations the sequence allows, one whose
    ``I`` pairs the same elements as the source, so that the packed move needs no repack."""
    four = source_bits(kind) == 4
    per = slot_size(kind)
    group = min(32 // source_bits(kind), n)
    g = group.bit_length() - 1
    r = n.bit_length() - 1
    perm = list(range(r))
    if four and per == 2:
        perm[:g] = list(range(1, g)) + [0]
        reg = dst.bases["register"]
        if g == 3 and pair_vector is not None and tuple(reg[2]) == tuple(pair_vector):
            perm[:g] = [2, 1, 0]                        # I pairs the source's nibble pair
    order = tuple(sum(((d >> perm[j]) & 1) << j for j in range(r)) for d in range(n))
    where = {i: d for d, i in enumerate(order)}
    words = []
    for w in range(n // group):
        for k in range(group // per):
            elems = slot_elems(kind, group, w, k)
            d = where[elems[0]]
            if d % per or [where[e] for e in elems] != list(range(d, d + per)):
                raise AssertionError(f"upcast {kind}: output word {k} of source word {w} is not a destination word")
            words.append((w, k, d // per))
    return UpcastSequence(kind, group, tuple(perm), order, tuple(words))


def permuted(dst: LinearLayout, perm: tuple[int, ...]) -> LinearLayout:
    """``I``: ``dst`` with register basis ``j`` replaced by register basis ``perm[j]``."""
    reg = dst.bases["register"]
    return LinearLayout({**dst.bases, "register": [reg[p] for p in perm]}, dst.out_dim_sizes,
                        require_surjective=False)


def input_layout(dst: LinearLayout, dtype: str, dst_dtype: str) -> LinearLayout:
    """``I``: the register layout an upcast from ``dtype`` into ``dst`` (``dst_dtype``) reads, for a
    source that does not fix its nibble pair (a free or pre-shuffled one): ``dst`` with its register
    bases permuted by the sequence's ``perm``."""
    return permuted(dst, sequence(KINDS[(dtype, dst_dtype)], dst.in_dim_size("register"), None, dst).perm)


#: scale types: the destination's own (f16, bf16: any value) or e8m0 (mxfp4's power-of-two exponents, bf16 only)
SCALE_TYPES = ("f16", "bf16", "e8m0")


@dataclass(frozen=True)
class Scaling:
    """Per-group scales applied during the upcast: element ``x`` of group ``g`` (``group`` consecutive
    elements along tensor dim ``dim``) becomes ``RNE(u * s[g] + c[g])`` in the destination type, ``u``
    the exact upcast, ``s`` the group's scale (``dtype``: the destination type's bits, or an e8m0
    exponent: 2^(e - 127), 255 a NaN), ``c = -RNE(z[g] * s[g])`` with ``zero_point`` (a zero point
    ``z`` per group, the destination type; else ``c = -0``) -- one ``fma.rn`` after the exact upcast,
    so one rounding (two with a zero point: ``c`` is rounded first).

    The scales live in the layout the destination implies (``bases``: the destination layout with
    the group's low ``log2(group)`` bits of ``dim`` dropped; the register bases that then move
    nothing dropped): the lanes and registers holding one group hold one scale, loaded once
    (``scale_index``), no shuffle.  ``reg_of[r]``: the scale register of destination register ``r``."""
    dtype: str
    dim: int
    group: int
    zero_point: bool
    shape: tuple[int, ...]
    bases: dict[str, Any]
    reg_of: tuple[int, ...]

    @property
    def regs(self) -> int:
        return 1 << len(self.bases["in_dims"]["register"])


def parse_scales(text: Any, dst_dtype: str, rank: int, src: str | None = None) -> tuple[int, int, str, bool]:
    """``--scales G[,dim=D][,e8m0|f16|bf16][,zero]`` -> (group, dim, scale type, zero point): groups of
    ``G`` (a power of two) consecutive elements along dim ``D`` (default the last), the scale type
    (default the destination's); ValueError in one line otherwise, and for a 16-bit float ``src``
    (scales belong to the narrow formats; a 16-bit value times a scale need not be exact in f32)."""
    if src in F32_ONLY_SOURCES:
        raise ValueError(f"--scales: a {src} A is upcast as it is; scales apply to the 8- and 4-bit A types")
    if dst_dtype in BYTE_UPCASTS:
        raise ValueError(f"--scales: an {dst_dtype} instruction's A takes no scales (u * s is a {dst_dtype} value only "
                         f"for scales the data decide, e8m0's 2^-127 .. 2^127 reach past every 8-bit range, and a "
                         f"rounded product is not the scaled weight): scale the accumulator per K group instead")
    bad = ValueError(f"--scales {short(text)}: expected G[,dim=D][,e8m0|f16|bf16][,zero] with G a power of two "
                     f"(elements per group), e.g. 128 or 32,e8m0")
    parts = [x.strip() for x in str(text).split(",")]
    if not parts[0].isdigit():
        raise bad
    group, dim, dtype, zero = int(parts[0]), rank - 1, dst_dtype, False
    for x in parts[1:]:
        if x.startswith("dim=") and x[4:].isdigit():
            dim = int(x[4:])
        elif x in SCALE_TYPES:
            dtype = x
        elif x == "zero":
            zero = True
        else:
            raise bad
    if group < 1 or group & (group - 1) or dim >= rank:
        raise bad
    if dtype == "e8m0" and (dst_dtype not in ("bf16", "f32") or zero):
        raise ValueError("--scales e8m0: power-of-two exponents scale bf16 destinations (or a tf32 MMA's f32 ones; "
                         "2^-127 .. 2^127 need their range), without a zero point")
    if dst_dtype == "f32" and dtype != "e8m0":
        raise ValueError(f"--scales {dtype}: a tf32 MMA's upcast takes e8m0 scales only (an exact power-of-two "
                         f"product; an f32 fma would round to f32, not to a tf32 value)")
    if dtype != "e8m0" and dtype != dst_dtype:
        raise ValueError(f"--scales {dtype}: f16/bf16 scales are the destination's type ({dst_dtype})")
    return group, dim, dtype, zero


def scaling(dst: LinearLayout, group: int, dim: int, dtype: str, zero: bool) -> Scaling:
    """The scale layout of ``dst`` (``Scaling``; powers of two: a group divides the dim or spans it);
    ValueError in one line when two register bases of the destination land on one scale register."""
    sizes = list(dst.out_dim_sizes.values())
    g = group.bit_length() - 1
    # a group at least the tile's extent along dim: one group there (a fragment of a larger group)
    shape = tuple(max(1, s // group) if d == dim else s for d, s in enumerate(sizes))
    q = lambda b: [x >> g if d == dim else x for d, x in enumerate(b)]  # noqa: E731
    reg = [q(b) for b in dst.bases["register"]]
    kept = [j for j, b in enumerate(reg) if any(b)]
    images = [tuple(reg[j]) for j in kept]
    if len(set(images)) != len(images) or not _independent(images):
        raise ValueError("--scales: the destination's register bases give dependent scale registers (a basis "
                         "moving both a group's bits and others); give groups aligned to the layout")
    bases = {d: ([reg[j] for j in kept] if d == "register" else [q(b) for b in bs]) for d, bs in dst.bases.items()}
    reg_of = tuple(sum(((r >> j) & 1) << i for i, j in enumerate(kept)) for r in range(1 << len(reg)))
    names = list(dst.out_dim_sizes)
    return Scaling(dtype, dim, group, zero, shape, {"in_dims": bases, "out_dims": dict(zip(names, shape))}, reg_of)


def _independent(vectors: list[tuple[int, ...]]) -> bool:
    """Whether tensor coordinate vectors are linearly independent over F2 (as flat bit vectors)."""
    rows = [int("".join(f"{x:032b}" for x in v), 2) for v in vectors]
    basis: list[int] = []
    for r in rows:
        for b in basis:
            r = min(r, r ^ b)
        if not r:
            return False
        basis.append(r)
    return True


@dataclass(frozen=True, kw_only=True)
class UpcastPlan(Transfer):
    """Registers or a tile of ``dtype`` elements -> destination registers of ``dst_dtype`` (strategy
    ``upcast``): ``move`` brings the source into ``I`` in the source type (a ``ConvertPlan`` or a
    ``LoadPlan``; ``src_bases`` is the source as given), ``sequence`` upcasts ``I`` into the
    destination registers, each thread on its own.  ``n_src`` counts the source registers the caller
    holds (bytes of two elements for a 4-bit type, 0 for a tile), ``n_dst`` destination elements
    (``dst_dtype``, two per 32-bit word; f32 one, 8-bit four), ``elem_bytes`` the bytes of a source
    register (a 4-bit type's byte of two).  A sequence's output word ``(w, k, dw)`` is the destination
    pair ``2dw, 2dw + 1`` (one word of f16/bf16, two of f32) or, 8-bit, the word ``dw`` of four."""
    operation: ClassVar[str] = "upcast"
    dst_dtype: str
    move: Any
    sequence: UpcastSequence
    scaling: Scaling | None = None

    @property
    def smem_bytes(self) -> int:
        return self.move.smem_bytes

    @property
    def cost(self) -> float:
        """The move's score plus the upcast's instructions at ``planner.ALU`` each (one ``fma`` a
        destination word more with scales): what a chain sums over its steps."""
        ops = len(self.sequence.ops) + (self.dst_words if self.scaling is not None else 0)
        return self.move.cost + planner.ALU * ops

    @property
    def from_memory(self) -> bool:
        """The source is a shared or global tile (``move`` is a load)."""
        return isinstance(self.move, LoadPlan)

    @property
    def dst_words(self) -> int:
        """32-bit words of the destination registers: two 16-bit elements a word, one f32, four 8-bit."""
        return self.n_dst * DTYPE_BITS[self.dst_dtype] // 32


def plan_upcast(src: LinearLayout, dst: LinearLayout, src_space: str, dtype: str, dst_dtype: str,
                target: str = "cuda", arch: str | None = None, alignment: int = 16, scales: Any = None,
                **options: Any) -> UpcastPlan:
    """Plan the upcast ``src`` (``dtype``, in ``src_space``) -> ``dst`` (registers, ``dst_dtype``);
    ``scales`` (``parse_scales``' text) applies per-group scales; ``options`` go to the move's
    planner.  ValueError in one line for a pair, target or layout this cannot do (checked before
    the move is planned).  ``dst_dtype`` f32 (a tf32 MMA's A fragment) is the mixed-input MMA's alone."""
    problem = upcast_problem(dtype, dst_dtype, MMA_UPCAST_TARGETS)
    if problem:
        raise ValueError(problem)
    if target != "cuda":
        raise ValueError(f"--dst-dtype: upcasts are CUDA sequences (lop3, prmt, cvt); target {target} has none")
    t = get_target(target, arch)
    kind = KINDS[(dtype, dst_dtype)]
    need = SEQUENCES[kind][0]
    if int(t.arch[3:5]) < need:
        raise ValueError(f"--dst-dtype {dst_dtype} from {dtype} needs sm_{need} or newer ({t.arch} has no "
                         f"{'cvt.rn.f16x2.e4m3x2/e5m2x2' if need == 89 else 'such instruction'})")
    n = dst.in_dim_size("register")
    if n < 2:
        raise ValueError(f"the destination layout holds {n} register per thread; an upcast writes {dst_dtype} pairs "
                         f"(32-bit words): give it at least 2 registers per thread")
    if n * DTYPE_BITS[dst_dtype] < 32:
        raise ValueError(f"the destination layout holds {n} registers per thread; an upcast writes 32-bit words of "
                         f"four {dst_dtype} elements: give it at least 4 registers per thread")
    pair_vec = None
    if is_packed(dtype):
        pin = packed.PAIR_DIM[src_space]
        if src.in_dim_size(pin) >= 2:
            pair_vec = tuple(src.bases[pin][0])
    scale = None if scales is None else scaling(dst, *parse_scales(scales, dst_dtype, len(dst.out_dim_sizes), dtype))
    seq = sequence(kind, n, pair_vec, dst)
    mid = permuted(dst, seq.perm)
    move = _plan_move(src, mid, src_space, dtype, target, arch, alignment, options)
    src_regs = 0 if src_space != "registers" else move.n_src
    return UpcastPlan(strategy="upcast", dtype=dtype, elem_bytes=1 if is_packed(dtype) else dtype_bytes(dtype),
                      target=move.target, arch=move.arch,
                      warp_size=move.warp_size, num_warps=move.num_warps, n_src=src_regs, n_dst=n,
                      src_bases=packed.bases_of(src), dst_bases=packed.bases_of(dst),
                      shape=tuple(dst.out_dim_sizes.values()), dst_dtype=dst_dtype, move=move, sequence=seq,
                      scaling=scale)


#: the planner options the move takes: (a load's, a conversion's)
MOVE_OPTIONS = (("strides", "instr", "max_vector_bytes", "barrier"),
                ("swizzle", "smem_budget", "max_vector_bytes", "scratch_buffers", "scratch_per_warp", "barrier"))


def _plan_move(src: LinearLayout, mid: LinearLayout, space: str, dtype: str, target: str, arch: str | None,
               alignment: int, options: dict[str, Any]) -> Transfer:
    """``src -> I`` in the source type: a conversion or a load; a 4-bit one as the byte plan of
    the quotient layouts (as ``api.plan_conversion`` plans packed transfers)."""
    takes = MOVE_OPTIONS[space == "registers"]      # (``scales`` is the upcast's own: taken by plan_upcast)
    extra = [k for k in options if k not in takes]
    if extra:
        where = "between register layouts" if space == "registers" else f"of a {space} tile"
        raise ValueError(f"--{extra[0].replace('_', '-')} does not apply to an upcast {where} (it takes "
                         f"{', '.join('--' + k.replace('_', '-') for k in takes)})")

    def plan(s: LinearLayout, d: LinearLayout, dt: str, opts: dict[str, Any]) -> Transfer:
        if space == "registers":
            return planner.plan_conversion(s, d, dtype=dt, target=target, arch=arch, **opts)
        return planner.plan_memory(d, s, "load", space, dtype=dt, target=target, arch=arch, alignment=alignment,
                                   **opts)
    if not is_packed(dtype):
        return plan(src, mid, dtype, options)
    sq, dq, packing = packed.quotient_pair(src, space, mid, "registers", dtype)
    opts = dict(options)
    if "strides" in opts:
        opts["strides"] = packed.quotient_strides(opts["strides"], packing)
    return packed.relabel(plan(sq, dq, packed.CARRIER, opts), dtype, packing)


def upcast_lines(p: UpcastPlan) -> list[str]:
    """What a reader of an upcast plan must know, one line each (``report.upcast_summary``)."""
    s = p.sequence
    kind_arch, what = SEQUENCES[s.kind]
    counts: dict[str, int] = {}
    for op in s.ops:
        counts[op] = counts.get(op, 0) + 1
    unit = {4: "nibbles", 8: "bytes", 16: "halves"}[DTYPE_BITS[p.dtype]]
    return [f"upcast {p.dtype} -> {p.dst_dtype} (exact), in each thread after the move: {what}",
            f"  I = the destination layout with register basis j taken from destination basis perm[j], "
            f"perm = {list(s.perm)}; {s.group} {unit} per source word, {p.dst_words} output word(s)",
            f"  dst[r] = upcast(I[order[r]]), order = {list(s.order)}",
            f"  instructions: {len(s.ops)} for {len(s.order)} elements ({s.per_element:.3g} per element): "
            + ", ".join(f"{n} {op}" for op, n in counts.items()) + f"; sm_{kind_arch}+"] + scale_lines(p)


def scale_lines(p: UpcastPlan) -> list[str]:
    """The scales of a plan, one line each (none without)."""
    c = p.scaling
    if c is None:
        return []
    t = p.dst_dtype
    if t == "f32":                                   # e8m0 only (parse_scales): one exact multiply an element
        return [f"scales: e8m0 per {c.group} elements along dim {c.dim} (scale tensor {list(c.shape)}), "
                f"{c.regs} scale register(s) per thread; dst = u * s: mul.rn.f32, s = 2^(e - 127) (exact but "
                f"for overflow)",
                f"  scale layout (the destination's, the group bits dropped): {c.bases['in_dims']}; "
                f"dst[r] uses scale register reg_of[r] = {list(c.reg_of)}",
                f"  +{p.dst_words} mul.rn.f32 (1 per element)"]
    how = (f"RNE_{t}(u * s + c), c = -RNE_{t}(z * s): fma.rn.{t}x2 (z the group's zero point)" if c.zero_point
           else f"RNE_{t}(u * s): fma.rn.{t}x2 u * s - 0" + (", s = 2^(e - 127) from e8m0 e" if c.dtype == "e8m0"
                                                                 else ""))
    return [f"scales: {c.dtype} per {c.group} elements along dim {c.dim} (scale tensor {list(c.shape)}), "
            f"{c.regs} scale register(s) per thread{' and as many zero points' if c.zero_point else ''}; "
            f"dst = {how}",
            f"  scale layout (the destination's, the group bits dropped): {c.bases['in_dims']}; "
            f"dst[r] uses scale register reg_of[r] = {list(c.reg_of)}",
            f"  +{p.dst_words} fma.rn.{t}x2 ({p.dst_words / p.n_dst:.3g} per element)"
            + (f", +{c.regs} for c once per scale register" if c.zero_point else "")]
