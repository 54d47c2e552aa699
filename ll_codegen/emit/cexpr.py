"""C expressions of the linear maps a plan records, as plain strings.

Every thread-dependent quantity the generated code computes is a linear map
over GF(2): an output is the XOR of the coefficients of the set bits of its
inputs (``lane``, ``warp``, ``reg``, a shared-memory ``offset``).  This module
turns such maps into the cheapest C expression (one shift-and-mask term per
distinct bit shift, ``+`` where XOR bits are disjoint so constants fold into
addressing modes), packs sub-word elements into 32-bit words and back, and
formats the lines around them (aligned comments, wrapped signatures, the
row-major index functions).  Nothing here looks at a plan's strategy.
"""
from __future__ import annotations

from typing import Callable, Iterable, Sequence

from ll_codegen.core.dtypes import C_RAW
from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.model import XorForm
from ll_codegen.plan.words import LanePerm, PackTerm, pack_term

#: every lane of a warp takes part in a shuffle
FULL_MASK = "0xffffffff"


def hex_const(v: int) -> str:
    """``v`` as a C hex literal (``0x1c``)."""
    return f"{v:#x}"


def linear_expr(coefs: Sequence[int], var: str, nbits: int) -> str:
    """C expression of ``XOR_k (bit k of var ? coefs[k] : 0)`` for ``var < 2**nbits``.

    Every set bit ``b`` of ``coefs[k]`` moves input bit ``k`` by ``b - k``; the
    bits that move by the same amount form one shift-and-mask term, so the
    expression has one term per distinct shift (``lane``; ``(lane >> 1) & 0x3``;
    ``((lane & 0x1c) << 3) ^ (lane & 0x3)``; ``0``)."""
    by_shift: dict[int, int] = {}
    for k, c in enumerate(coefs):
        b = 0
        while c:
            if c & 1:
                by_shift[b - k] = by_shift.get(b - k, 0) | 1 << k
            c >>= 1
            b += 1
    full = (1 << nbits) - 1
    terms = []
    for s in sorted(by_shift, reverse=True):
        m = by_shift[s]
        if s == 0:
            terms.append(var if m == full else f"({var} & {hex_const(m)})")
        elif s > 0:
            terms.append(f"({var} << {s})" if m == full else f"(({var} & {hex_const(m)}) << {s})")
        else:
            r = -s
            terms.append(f"({var} >> {r})" if m == full & ~((1 << r) - 1) else f"(({var} >> {r}) & {hex_const(m >> r)})")
    nonzero = [(k, c) for k, c in enumerate(coefs) if c]
    if len(nonzero) < len(terms):            # fewer terms as one multiply per input bit
        terms = [f"({var} * {hex_const(c)})" if nbits == 1 else f"((({var} >> {k}) & 1) * {hex_const(c)})" if k
                 else f"(({var} & 1) * {hex_const(c)})" for k, c in nonzero]
    return " ^ ".join(terms)


def strip_parens(e: str) -> str:
    """Drop one pair of parentheses around a whole expression."""
    if e.startswith("(") and e.endswith(")"):
        depth = 0
        for i, ch in enumerate(e):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and i < len(e) - 1:
                return e
        return e[1:-1]
    return e


def xor_form_expr(form: XorForm, lane_bits: int, warp_bits: int, lane: str = "lane", warp: str = "warp") -> str:
    """Cheapest C expression of a ``XorForm`` over (lane, warp); ``0u`` if zero."""
    parts = [p for p in (linear_expr(form.lane, lane, lane_bits), linear_expr(form.warp, warp, warp_bits)) if p]
    if not parts:
        return "0u"
    return strip_parens(parts[0]) if len(parts) == 1 else " ^ ".join(parts)


def address_expr(base: str, offset: int, support: int) -> str:
    """``base ^ offset`` as C; ``base + offset`` when the bits are disjoint
    (so the constant folds into the ``[reg+imm]`` addressing mode)."""
    if offset == 0:
        return base
    return f"{base} {'+' if offset & support == 0 else '^'} {hex_const(offset)}"


def parity_expr(mask: int, var: str = "lane") -> str:
    """Parity of ``var & mask`` (0 or 1) as C."""
    if mask & (mask - 1) == 0:
        k = mask.bit_length() - 1
        return f"({var} >> {k}) & 1" if k else f"{var} & 1"
    return f"__popc({var} & {hex_const(mask)}) & 1"


def select_tree(cands: Sequence[str], bits: Sequence[str]) -> str:
    """``cands[c]`` for the runtime index c whose bit j is the variable ``bits[j]``."""
    if len(cands) == 1:
        return cands[0]
    half = len(cands) // 2
    lo, hi = select_tree(cands[:half], bits[:-1]), select_tree(cands[half:], bits[:-1])
    if lo == hi:
        return lo
    wrap = lambda e: f"({e})" if "?" in e else e   # noqa: E731
    return f"{bits[-1]} ? {wrap(hi)} : {wrap(lo)}"


def aligned(rows: Iterable[tuple[str, str]]) -> list[str]:
    """``code  // comment`` lines with the comments in one column."""
    rows = list(rows)
    width = max((len(c) for c, m in rows if m), default=0)
    return [f"{c:<{width}}  // {m}" if m else c for c, m in rows]


def comment_lines(text: str) -> list[str]:
    """``text`` as ``//`` comment lines (no trailing blanks)."""
    return [("// " + line).rstrip() for line in text.splitlines()]


def signature(head: str, params: str, width: int = 116) -> str:
    """``head(params) {`` wrapped at commas, continuation lines under the first parameter."""
    line = f"{head}({params}) {{"
    if len(line) <= width:
        return line
    indent = " " * (len(head) + 1)
    out, cur = [], f"{head}("
    for k, prm in enumerate(params.split(", ")):
        piece = prm + (", " if k < params.count(", ") else ") {")
        if len(cur) + len(piece.rstrip()) > width and cur.strip() != f"{head}(".strip():
            out.append(cur.rstrip())
            cur = indent
        cur += piece
    out.append(cur)
    return "\n".join(out)


# ----------------------------------------------------------- packing
def pack_words(vals: Sequence[str], elem_bytes: int, cuda: bool) -> list[str]:
    """Raw element expressions (lowest first) -> 32-bit word expressions
    (one value narrower than 32 bits when there are fewer than 4 bytes)."""
    if elem_bytes == 8:
        return [w for v in vals for w in (f"static_cast<uint32_t>({v})", f"static_cast<uint32_t>({v} >> 32)")]
    if elem_bytes == 4:
        return list(vals)
    per = 4 // elem_bytes
    out = []
    for i in range(0, len(vals), per):
        g = vals[i:i + per]
        if len(g) == 1:
            out.append(g[0])
        elif elem_bytes == 2 and cuda:
            out.append(f"__byte_perm({g[0]}, {g[1]}, 0x5410)")
        else:
            bits = 8 * elem_bytes
            terms = [f"static_cast<uint32_t>({g[0]})"] + [f"(static_cast<uint32_t>({v}) << {bits * j})"
                                                          for j, v in enumerate(g) if j]
            e = " | ".join(terms)
            out.append(e if len(g) == per else f"static_cast<{C_RAW[len(g) * elem_bytes]}>({e})")
    return out


def compose_word(sources: Sequence[tuple[str, int] | None], elem_bytes: int) -> str:
    """A 32-bit word whose element k is element ``sources[k] = (word, index)`` of another word
    (None: don't care) as C: ``plan.words.pack_term``'s permutes, each as ``__byte_perm``.  Equal
    sub-terms render as equal expressions, which the compiler computes once."""
    return term_expr(pack_term(sources, 4 // elem_bytes))


def term_expr(term: PackTerm | LanePerm, selector: Callable[[tuple[int, ...]], str] | None = None,
              lane_perm_fn: str = "__byte_perm") -> str:
    """C expression of a ``plan.words.PackTerm``; a ``LanePerm``'s selector is the name
    ``selector(sels)`` gives its per-lane values, and it is called as ``lane_perm_fn``."""
    fn = "__byte_perm"
    if isinstance(term, LanePerm):
        a, b, sel, fn = term.a, term.b, selector(term.sels), lane_perm_fn
    elif term[0] == "word":
        return term[1]
    else:
        a, b, sel = term[1], term[2], hex_const(term[3])
    a_e = term_expr(a, selector, lane_perm_fn)
    b_e = "0u" if b is None else term_expr(b, selector, lane_perm_fn)
    return f"{fn}({a_e}, {b_e}, {sel})"


def amd_perm_selector(sel: int) -> int:
    """``__byte_perm(a, b, sel)``'s selector -- byte q of the result is byte ``sel >> 4q & 7`` of
    the pair (a: bytes 0-3, b: 4-7) -- as the selector of ``v_perm_b32`` (``detail::byte_perm``
    on HIP), whose byte q of the result is byte ``s >> 8q`` of the same pair: each nibble moved
    to its byte.  Only byte indices 0-7 (CUDA's sign-replicate nibbles and v_perm's constant
    bytes differ)."""
    if sel >> 16 or any(sel >> (4 * q) & 8 for q in range(4)):
        raise ValueError(f"byte selector {sel:#x}: only byte indices 0-7 translate to v_perm_b32")
    return sum((sel >> (4 * q) & 7) << (8 * q) for q in range(4))


def unpack_elems(words: Sequence[str], n: int, elem_bytes: int, raw: str) -> list[str]:
    """Inverse of ``pack_words``: ``n`` raw element expressions from word expressions."""
    if elem_bytes == 8:
        return [f"(static_cast<uint64_t>({words[2 * k + 1]}) << 32) | {words[2 * k]}" for k in range(n)]
    if elem_bytes == 4:
        return list(words[:n])
    per = 4 // elem_bytes
    out = []
    for k in range(n):
        w, j = words[k // per], k % per
        out.append(w if n == 1 else f"static_cast<{raw}>({w})" if j == 0
                   else f"static_cast<{raw}>({w} >> {8 * elem_bytes * j})")
    return out


# ------------------------------------------------------------- row-major index
def row_major_bases(layout: LinearLayout, dim: str) -> list[int]:
    """Row-major element index (last tensor dim fastest) of each basis of ``dim``.
    Sizes are powers of two, so every dim owns its own bits of the index and the
    index of any input is the XOR of the indices of its bases."""
    sizes = [s.bit_length() - 1 for s in layout.out_dim_sizes.values()]

    def rm(v: int) -> int:
        coords, shift = [], 0
        for k in sizes:
            coords.append(v >> shift & ((1 << k) - 1))
            shift += k
        idx, shift = 0, 0
        for c, k in zip(reversed(coords), reversed(sizes)):
            idx |= c << shift
            shift += k
        return idx

    return [rm(v) for v in layout.flat_bases(dim)] if dim in layout.in_dims else []


def index_function(name: str, layout: LinearLayout) -> str:
    """``__host__ __device__ constexpr int name(int reg, int lane, int warp)``:
    the row-major index of the element that register ``reg`` of ``lane`` in
    ``warp`` holds (the XOR of its bases' indices)."""
    terms = []
    for d, v in (("register", "reg"), ("lane", "lane"), ("warp", "warp")):
        coefs = row_major_bases(layout, d)
        terms.append(linear_expr(coefs, v, len(coefs)))
    body = " ^ ".join(t for t in terms if t) or "0"
    return (f"__host__ __device__ constexpr int {name}(int reg, int lane, int warp) "
            f"{{ return (void)reg, (void)lane, (void)warp, {body}; }}")


def tile_index_function(tile: LinearLayout) -> str:
    """``__host__ __device__ constexpr int tile_index(int offset)``: the
    row-major index of the element at element ``offset`` of a shared tile."""
    coefs = row_major_bases(tile, "offset")
    body = linear_expr(coefs, "offset", len(coefs)) or "0"
    return (f"__host__ __device__ constexpr int tile_index(int offset) "
            f"{{ return (void)offset, {body}; }}")


def row_major_form(layout: LinearLayout) -> tuple[XorForm, list[int]]:
    """(XorForm over lane/warp, per-register constants) of the row-major element
    index (last dim fastest) of every element a thread holds."""
    form = XorForm(tuple(row_major_bases(layout, "lane")), tuple(row_major_bases(layout, "warp")))
    reg = row_major_bases(layout, "register")
    consts = []
    for r in range(1 << len(reg)):
        c = 0
        for k, v in enumerate(reg):
            if r >> k & 1:
                c ^= v
        consts.append(c)
    return form, consts
