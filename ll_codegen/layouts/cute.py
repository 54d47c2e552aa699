"""CuTe-style layout descriptors (seed 001, "Layout Descriptor Grammar").

Grammar (whitespace allowed between tokens)::

    layout-desc := "<" shape "," stride swizzle-opt elem-opt ">"
    shape       := tuple
    stride      := tuple
    tuple       := integer | "(" tuple-item ("," tuple-item)* ")"
    tuple-item  := tuple | integer
    swizzle-opt := ("," "swizzle" "<" integer "," integer "," integer ">")?
    elem-opt    := ("," "elem" "=" elem-name)?

Meaning (CuTe): each top-level mode of ``shape`` is a tensor dim; a nested
mode is a hierarchical coordinate whose first sub-mode varies fastest, and
the logical offset is ``sum(coord_leaf * stride_leaf)``.  ``swizzle<B,M,S>``
then XORs address bits ``[M+S, M+S+B)`` into bits ``[M, M+B)`` of the *byte*
address (the descriptor packer's convention: ``swizzle<3,4,3>`` is the
128-byte swizzle of 16-byte chunks).  The element width comes from
``elem=`` or the caller; without either, one element counts as one byte
(CuTe's element-offset swizzle).

Only power-of-two, bijective layouts are linear over F2: every leaf size and
every stride of a leaf of size > 1 must be a power of two and the strides must
tile ``[0, size)`` exactly.  The result is a memory layout ``offset -> dims``.

Example: ``<(4,8),(8,1)>`` is a 4x8 row-major tile: ``offset=1..4 -> dim1``,
``offset=8,16 -> dim0``; adding ``swizzle<1,0,3>`` (element = byte) XORs
offset bit 3 into bit 0, so ``offset=8 -> (1, 1)``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from ll_codegen.core import limits
from ll_codegen.core.layout import LinearLayout
from ll_codegen.layouts.base import LayoutError

Tree = Union[int, tuple]

ELEMENT_BITS = {
    **dict.fromkeys(["f64", "fp64", "i64", "u64", "s64"], 64),
    **dict.fromkeys(["f32", "fp32", "tf32", "i32", "u32", "s32", "float"], 32),
    **dict.fromkeys(["f16", "fp16", "bf16", "half", "i16", "u16", "s16"], 16),
    **dict.fromkeys(["f8", "fp8", "e4m3", "e5m2", "f8e4m3", "f8e5m2", "i8", "u8", "s8", "mxf8", "ue8m0", "b8"], 8),
    **dict.fromkeys(["nvfp4", "mxf4", "f4", "fp4", "e2m1", "i4", "u4", "s4"], 4),
}


def _err(message: str) -> LayoutError:
    return LayoutError("descriptor", message)


@dataclass(frozen=True)
class CuteDescriptor:
    """A parsed descriptor: ``modes`` (shape tree per dim), ``strides`` (same
    nesting), ``swizzle`` (B, M, S) or None, ``elem`` name or None."""

    text: str
    modes: tuple
    strides: tuple
    swizzle: Optional[tuple[int, int, int]]
    elem: Optional[str]

    def to_linear(self, element_bitwidth: Optional[int] = None) -> LinearLayout:
        """Memory layout ``offset -> dims`` (sizes = the modes' sizes)."""
        dim_bits: list[int] = []
        source: dict[int, tuple[int, int]] = {}   # offset bit -> (dim, coordinate bit)
        for d, (shape, stride) in enumerate(zip(self.modes, self.strides)):
            pos = 0
            for size, st in zip(_leaves(shape), _leaves(stride)):
                if size < 1 or size & (size - 1):
                    raise _err(f"mode {d}: size {size} is not a power of two")
                if size > 1 and (st < 1 or st & (st - 1)):
                    raise _err(f"mode {d}: stride {st} of a size-{size} mode is not a power of two "
                               "(the layout is not linear over F2 or not injective)")
                for b in range(size.bit_length() - 1):
                    k = (st << b).bit_length() - 1
                    if k in source:
                        raise _err(f"mode {d}: offset {1 << k} is reached twice; the layout is not injective")
                    source[k] = (d, pos + b)
                pos += size.bit_length() - 1
            dim_bits.append(pos)
        n = len(source)
        if sorted(source) != list(range(n)):
            gap = min(set(range(n + 1)) - set(source))
            raise _err(f"offsets are not contiguous: offset {1 << gap} is never reached "
                       f"(the layout is not a bijection onto [0, {1 << n}))")
        unit = [[(1 << p) if e == d else 0 for e in range(len(dim_bits))] for d, p in (source[k] for k in range(n))]
        phys = [list(u) for u in unit]
        if self.swizzle:
            B, M, S = self.swizzle
            w = ELEMENT_BITS[self.elem] if self.elem else (element_bitwidth or 8)
            shift = w.bit_length() - 1 - 3            # element bit k is byte-address bit k + shift
            if M - shift < 0:
                raise _err(f"swizzle<{B},{M},{S}> moves bits below one {w}-bit element")
            for j in range(B):
                src, dst = M + S + j - shift, M + j - shift
                if src < n:   # physical bit src also flips logical bit dst (an involution)
                    phys[src] = [a ^ b for a, b in zip(phys[src], unit[dst])]
        sizes = {f"dim{d}": 1 << b for d, b in enumerate(dim_bits)}
        return LinearLayout({"offset": phys}, sizes)


def _leaves(t: Tree) -> list[int]:
    return [t] if isinstance(t, int) else [x for s in t for x in _leaves(s)]


def _same_nesting(a: Tree, b: Tree) -> bool:
    if isinstance(a, int) or isinstance(b, int):
        return isinstance(a, int) and isinstance(b, int)
    return len(a) == len(b) and all(_same_nesting(x, y) for x, y in zip(a, b))


class _Parser:
    def __init__(self, text: str):
        self.s, self.i = text, 0

    def _ws(self):
        while self.i < len(self.s) and self.s[self.i].isspace():
            self.i += 1

    def _where(self) -> str:
        if self.i >= len(self.s):
            return "at the end of the descriptor"
        return f"at position {self.i} ({self.s[self.i:self.i + 10]!r})"

    def expect(self, tok: str):
        self._ws()
        if not self.s.startswith(tok, self.i):
            raise _err(f"expected {tok!r} {self._where()}")
        self.i += len(tok)

    def peek(self, tok: str) -> bool:
        self._ws()
        return self.s.startswith(tok, self.i)

    def integer(self) -> int:
        self._ws()
        j = self.i
        while j < len(self.s) and self.s[j].isdigit():
            j += 1
        if j == self.i:
            raise _err(f"expected an integer {self._where()}")
        if j - self.i > 9 or int(self.s[self.i:j]) > limits.MAX_INT:   # before int() of a huge number
            raise _err(f"integer at position {self.i} is out of range (0 to {limits.MAX_INT})")
        v, self.i = int(self.s[self.i:j]), j
        return v

    def ident(self) -> str:
        self._ws()
        j = self.i
        while j < len(self.s) and (self.s[j].isalnum() or self.s[j] == "_"):
            j += 1
        if j == self.i:
            raise _err(f"expected an element type name {self._where()}")
        v, self.i = self.s[self.i:j], j
        return v

    def tuple_(self, depth: int = 0) -> Tree:
        if not self.peek("("):
            return self.integer()
        if depth >= limits.MAX_RANK:          # recursive descent: bound it before Python's stack does
            raise _err(f"modes nested more than {limits.MAX_RANK} deep {self._where()}")
        self.expect("(")
        items = [self.tuple_(depth + 1)]
        while self.peek(","):
            self.expect(",")
            items.append(self.tuple_(depth + 1))
        self.expect(")")
        return tuple(items)


def parse(text: str) -> CuteDescriptor:
    """Parse a descriptor; malformed text raises ``LayoutError("descriptor", ...)``
    naming what was expected and where."""
    p = _Parser(text)
    p.expect("<")
    shape_at = p.i
    shape = p.tuple_()
    p.expect(",")
    stride = p.tuple_()
    if not _same_nesting(shape, stride):
        raise _err(f"stride {_fmt(stride)} does not have the nesting of shape {_fmt(shape)} "
                   f"(shape starts at position {shape_at})")
    swizzle, elem = None, None
    if p.peek(","):
        p.expect(",")
        if p.peek("swizzle"):
            p.expect("swizzle")
            p.expect("<")
            b = p.integer()
            p.expect(",")
            m = p.integer()
            p.expect(",")
            s = p.integer()
            p.expect(">")
            if max(b, m, s) > 32:          # address bits: a tile has at most 2^20 elements of 8 bytes
                raise _err(f"swizzle<{b},{m},{s}>: B, M and S must be at most 32")
            if b and s < b:
                raise _err(f"swizzle<{b},{m},{s}>: the shift S must be at least B (CuTe requires |S| >= B)")
            swizzle = (b, m, s) if b else None
            if p.peek(","):
                p.expect(",")
                elem = _elem(p)
        elif p.peek("elem"):
            elem = _elem(p)
        else:
            raise _err(f"expected 'swizzle<...>' or 'elem=...' {p._where()}")
    p.expect(">")
    p._ws()
    if p.i != len(text):
        raise _err(f"unexpected text after '>' {p._where()}")
    modes = (shape,) if isinstance(shape, int) else shape
    strides = (stride,) if isinstance(stride, int) else stride
    if len(modes) > limits.MAX_RANK:
        raise _err(f"{len(modes)} modes; at most {limits.MAX_RANK} (dims)")
    return CuteDescriptor(text, modes, strides, swizzle, elem)


def _elem(p: _Parser) -> str:
    p.expect("elem")
    p.expect("=")
    at = p.i
    name = p.ident()
    if name not in ELEMENT_BITS:
        raise _err(f"unknown element type {limits.short(name)} at position {at} (known: {', '.join(sorted(ELEMENT_BITS))})")
    return name


def _fmt(t: Tree) -> str:
    return str(t) if isinstance(t, int) else "(" + ",".join(_fmt(x) for x in t) + ")"
