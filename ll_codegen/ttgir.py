"""TTGIR / TTIR dumps -> llgen spec mappings (the layouts a Triton kernel already has).

A TTGIR dump (``MLIR_ENABLE_DUMP=1``, ``kernel.asm["ttgir"]``, ``TRITON_KERNEL_DUMP``) names its
layouts once, as attribute aliases at the top of the file::

    #blocked = #ttg.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>
    #mma = #ttg.nvidia_mma<{versionMajor = 3, versionMinor = 0, warpsPerCTA = [4, 1], instrShape = [16, 128, 16]}>

and uses them in tensor and memory-descriptor types, which give the shapes::

    %a = tt.load %p : tensor<128x64x!tt.ptr<f16>, #blocked>
    %b = ttg.convert_layout %a : tensor<128x64xf16, #blocked> -> tensor<128x64xf16, #ttg.dot_op<{opIdx = 0, parent = #mma, kWidth = 2}>>
    %s = ttg.local_alloc %a : (tensor<128x64xf16, #blocked>) -> !ttg.memdesc<128x64xf16, #shared, #smem>

Attributes Triton prints without an alias (``#ttg.slice``, ``#ttg.dot_op``) are read from the types
too and named ``<kind>.<n>`` (``slice.1``, ``dot_op.2``) in order of first use.

``read_ttgir`` parses the text into a ``TtgirDoc``: one ``Entry`` per layout attribute (alias or
inline), with its line, its text and every distinct shape of the types that use it (the
largest first).
``TtgirDoc.spec_of`` turns an entry into the spec mapping of ``ll_codegen.spec`` (the YAML a user
would write), renaming Triton's camelCase parameters to the layout classes' fields -- nested
parents resolved through the aliases -- and nothing more: the layout classes of
``ll_codegen/layouts/`` check and lay out the result, so there is one implementation of each kind.

=====================  ==================  ====================================================
TTGIR attribute        llgen kind          parameters
=====================  ==================  ====================================================
``ttg.blocked``        ``blocked``         sizePerThread, threadsPerWarp, warpsPerCTA, order
``ttg.slice``          ``slice``           dim, parent
``ttg.nvidia_mma``     ``nvidia_mma``      versionMajor/versionMinor -> version, warpsPerCTA,
                                           instrShape
``ttg.dot_op``         ``dot_operand``     opIdx -> operand_index, parent, kWidth -> k_width
``ttg.linear``         ``linear``          register, lane, warp, block (``generic_linear`` too)
``ttg.amd_mfma``       ``amd_mfma``        version, warpsPerCTA, instrShape, isTransposed,
                                           tilesPerWarp, elementBitWidth
``ttg.amd_wmma``       ``amd_wmma``        version, isTranspose, instrShape, ctaLayout's warp
                                           bases -> warps_per_cta (a row-major warp tiling)
``ttg.swizzled_shared`` ``swizzled_shared`` vec, perPhase, maxPhase, order
``ttg.nvmma_shared``   ``nvmma_shared``    swizzlingByteWidth, transposed, elementBitWidth,
                                           fp4Padded; rank from the shape
``ttg.shared_linear``  ``shared_linear``   offset, block (the alignment is not a layout field)
=====================  ==================  ====================================================

Every kind also takes the CTA-tiling fields: ``CGALayout`` (Triton 3.5 and later) or the older
``CTAsPerCGA``/``CTASplitNum``/``CTAOrder`` triple.  The dialect may be spelled ``ttg`` or
``triton_gpu`` (older dumps).  Other layout attributes (``amd_rotating_shared``,
``padded_shared``, the tensor-memory encodings) are listed as unsupported.

Errors are ``TtgirError``: one line naming the line of the file and the alias.  The text is
scanned once, linearly; nesting, attribute count and shapes kept are capped (``core/limits.py``).
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any, Optional, Union

import yaml

from ll_codegen.core import limits
from ll_codegen.core.limits import short

__all__ = ["SUFFIXES", "TtgirError", "Attr", "Ref", "Entry", "TtgirDoc", "read_ttgir", "split_selector",
           "parse_dims", "spec_yaml", "listing_text"]

#: File name endings read as TTGIR/TTIR (``FILE.ttgir#alias``).
SUFFIXES = (".ttgir", ".ttir", ".mlir")
#: Dialect prefixes of the layout attributes.
LAYOUT_DIALECTS = ("ttg", "triton_gpu", "ttng", "triton_nvidia_gpu")
#: Deepest nesting of lists, dictionaries and attributes inside one attribute.
MAX_DEPTH = 32

_CGA = {"CGALayout": "cga_layout", "CTAsPerCGA": "ctas_per_cga", "CTASplitNum": "cta_split_num",
        "CTAOrder": "cta_order"}
_LINEAR = {"register": "register", "lane": "lane", "warp": "warp", "block": "block"}
#: TTGIR kind -> (llgen kind, TTGIR parameter -> llgen field; None: read elsewhere or dropped).
KINDS: dict[str, tuple[str, dict[str, Optional[str]]]] = {
    "blocked": ("blocked", {"sizePerThread": "size_per_thread", "threadsPerWarp": "threads_per_warp",
                            "warpsPerCTA": "warps_per_cta", "order": "order", **_CGA}),
    "slice": ("slice", {"dim": "dim", "parent": "parent"}),
    "nvidia_mma": ("nvidia_mma", {"versionMajor": None, "versionMinor": None, "warpsPerCTA": "warps_per_cta",
                                  "instrShape": "instr_shape", **_CGA}),
    "dot_op": ("dot_operand", {"opIdx": "operand_index", "parent": "parent", "kWidth": "k_width"}),
    "linear": ("linear", _LINEAR),
    "generic_linear": ("linear", _LINEAR),
    "amd_mfma": ("amd_mfma", {"version": "version", "versionMajor": "version", "versionMinor": None,
                              "warpsPerCTA": "warps_per_cta", "instrShape": "instr_shape",
                              "isTransposed": "transposed", "tilesPerWarp": "tiles_per_warp",
                              "elementBitWidth": "element_bitwidth", **_CGA}),
    "amd_wmma": ("amd_wmma", {"version": "version", "isTranspose": "transposed", "isTransposed": "transposed",
                              "warpsPerCTA": "warps_per_cta", "instrShape": "instr_shape", "ctaLayout": None,
                              **_CGA}),
    "swizzled_shared": ("swizzled_shared", {"vec": "vec", "perPhase": "per_phase", "maxPhase": "max_phase",
                                            "order": "order", **_CGA}),
    "shared": ("swizzled_shared", {"vec": "vec", "perPhase": "per_phase", "maxPhase": "max_phase",
                                   "order": "order", "hasLeadingOffset": None, **_CGA}),
    "nvmma_shared": ("nvmma_shared", {"swizzlingByteWidth": "swizzle_byte_width", "transposed": "transposed",
                                      "elementBitWidth": "element_bitwidth", "fp4Padded": "fp4_padded", **_CGA}),
    "shared_linear": ("shared_linear", {"offset": "offset", "block": "block", "alignment": None}),
}


class TtgirError(ValueError):
    """A TTGIR text that cannot be read: ``where`` (``line 12``, ``#blocked2``), ``message``."""

    def __init__(self, where: str, message: str):
        self.where = where
        self.message = limits.cut(message)
        super().__init__(f"{where}: {self.message}" if where else self.message)


@dataclass(frozen=True)
class Ref:
    """A reference to an alias, ``#blocked``."""

    name: str


@dataclass(frozen=True)
class Attr:
    """A parsed attribute ``#dialect.kind<...>``: ``dialect``, ``kind``, ``params`` (name ->
    int, bool, str, list, dict, ``Ref`` or nested ``Attr``; empty when it has no body), ``text``
    (as written, whitespace collapsed) and ``layout`` (a ``<...>`` body in a layout dialect)."""

    dialect: str
    kind: str
    params: Any
    text: str
    layout: bool


Value = Union[int, bool, str, list, dict, Ref, Attr, None]


@dataclass(frozen=True)
class Entry:
    """One layout attribute of a dump: ``name`` (alias without ``#``, or ``<kind>.<n>`` for an
    inline one), its ``attr``, the ``line`` defining (or first using) it, and ``shapes``, every
    distinct shape of the tensor and memdesc types using it, in order of first use."""

    name: str
    attr: Attr
    line: int
    shapes: tuple[tuple[int, ...], ...]
    inline: bool

    @property
    def kind(self) -> str:
        return f"{self.attr.dialect}.{self.attr.kind}"

    @property
    def llgen_kind(self) -> Optional[str]:
        return KINDS[self.attr.kind][0] if self.attr.kind in KINDS and self.attr.dialect in ("ttg", "triton_gpu") \
            else None


# --------------------------------------------------------------------- reading
_IDENT = re.compile(r"[A-Za-z_][\w$.\-]*")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_TYPE_SUFFIX = re.compile(r"\s*:\s*(?:[if]\d+|index|bf16)\b")
_ALIAS_DEF = re.compile(r"^[ \t]*#([A-Za-z_][\w$.\-]*)[ \t]*=[ \t]*", re.M)
_TYPE = re.compile(r"(?<![\w])(?:tensor|memdesc)<")
_DIMS = re.compile(r"((?:\d+x)+)")


class _Reader:
    """Recursive descent over MLIR attribute syntax, positions in the whole text."""

    def __init__(self, text: str, line_of: Any):
        self.s = text
        self.line_of = line_of

    def fail(self, pos: int, message: str) -> TtgirError:
        return TtgirError(f"line {self.line_of(pos)}", message)

    def ws(self, pos: int) -> int:
        while pos < len(self.s) and self.s[pos] in " \t\r\n":
            pos += 1
        return pos

    def expect(self, pos: int, ch: str) -> int:
        pos = self.ws(pos)
        if not self.s.startswith(ch, pos):
            got = self.s[pos:pos + 12].split("\n")[0] or "the end of the line"
            raise self.fail(pos, f"malformed attribute: expected {ch!r}, found {short(got)}")
        return pos + 1

    def value(self, pos: int, depth: int) -> tuple[Value, int]:
        if depth > MAX_DEPTH:
            raise self.fail(pos, f"attribute nested more than {MAX_DEPTH} levels deep")
        pos = self.ws(pos)
        c = self.s[pos:pos + 1]
        if c == "[":
            return self.sequence(pos + 1, "]", depth)
        if c == "{":
            return self.mapping(pos + 1, depth)
        if c == "#":
            return self.attribute(pos, depth)
        if c == '"':
            end = self.s.find('"', pos + 1)
            if end < 0 or "\n" in self.s[pos:end]:
                raise self.fail(pos, "malformed attribute: unterminated string")
            return self.s[pos + 1:end], end + 1
        m = _NUMBER.match(self.s, pos)
        if m:
            text = m.group()
            if len(text) > 20:
                raise self.fail(pos, f"number {short(text)} has too many digits")
            end = m.end()
            t = _TYPE_SUFFIX.match(self.s, end)          # "16 : i32"
            return (float(text) if "." in text or "e" in text.lower() else int(text)), (t.end() if t else end)
        m = _IDENT.match(self.s, pos)
        if m:
            word = m.group()
            return {"true": True, "false": False}.get(word, word), m.end()
        found = self.s[pos:pos + 12].split("\n")[0] or "the end of the line"
        raise self.fail(pos, f"malformed attribute: unexpected {short(found)}")

    def sequence(self, pos: int, close: str, depth: int) -> tuple[list, int]:
        out: list = []
        pos = self.ws(pos)
        if self.s.startswith(close, pos):
            return out, pos + 1
        while True:
            v, pos = self.value(pos, depth + 1)
            out.append(v)
            pos = self.ws(pos)
            if self.s.startswith(",", pos):
                pos += 1
            elif self.s.startswith(close, pos):
                return out, pos + 1
            else:
                raise self.fail(pos, f"malformed attribute: expected ',' or {close!r} in a list")

    def mapping(self, pos: int, depth: int) -> tuple[dict, int]:
        out: dict = {}
        pos = self.ws(pos)
        if self.s.startswith("}", pos):
            return out, pos + 1
        while True:
            pos = self.ws(pos)
            m = _IDENT.match(self.s, pos)
            if self.s.startswith('"', pos):
                key, pos = self.value(pos, depth + 1)
            elif m:
                key, pos = m.group(), m.end()
            else:
                raise self.fail(pos, "malformed attribute: expected a parameter name")
            pos = self.ws(pos)
            if self.s.startswith("=", pos):
                out[key], pos = self.value(pos + 1, depth + 1)
            else:
                out[key] = True                         # a unit parameter
            pos = self.ws(pos)
            if self.s.startswith(",", pos):
                pos += 1
            elif self.s.startswith("}", pos):
                return out, pos + 1
            else:
                raise self.fail(pos, "malformed attribute: expected ',' or '}' after a parameter")

    def attribute(self, pos: int, depth: int) -> tuple[Value, int]:
        """``#name`` (a Ref) or ``#dialect.kind`` with an optional ``<...>`` body (an Attr)."""
        start = pos
        m = _IDENT.match(self.s, pos + 1)
        if not m:
            raise self.fail(pos, "malformed attribute: '#' without a name")
        name, pos = m.group(), m.end()
        if not self.s.startswith("<", pos):
            if "." in name and name.split(".", 1)[0] in LAYOUT_DIALECTS:
                dialect, kind = name.split(".", 1)
                return Attr(dialect, kind, {}, "#" + name, False), pos
            return Ref(name), pos
        dialect, _, kind = name.partition(".")
        if dialect not in LAYOUT_DIALECTS:          # another dialect's syntax: kept as text
            end = self.balanced(pos)
            return Attr(dialect, kind, {}, _collapse(self.s[start:end]), False), end
        params: dict = {}
        pos = self.ws(pos + 1)
        if not self.s.startswith(">", pos):
            while True:
                pos = self.ws(pos)
                if self.s.startswith("{", pos):
                    d, pos = self.mapping(pos + 1, depth + 1)
                    params.update(d)
                else:
                    m = _IDENT.match(self.s, pos)
                    if not m:
                        raise self.fail(pos, f"malformed #{name} attribute: expected a parameter")
                    key, pos = m.group(), self.ws(m.end())
                    if self.s.startswith("=", pos):
                        params[key], pos = self.value(pos + 1, depth + 1)
                    else:
                        params[key] = True
                pos = self.ws(pos)
                if self.s.startswith(",", pos):
                    pos += 1
                    continue
                break
        pos = self.expect(pos, ">")
        return Attr(dialect, kind, params, _collapse(self.s[start:pos]), True), pos

    def balanced(self, pos: int) -> int:
        """The position after the ``>`` closing the ``<`` at ``pos`` (strings skipped)."""
        level, i, n = 0, pos, len(self.s)
        while i < n:
            c = self.s[i]
            if c == '"':
                j = self.s.find('"', i + 1)
                i = n if j < 0 else j
            elif c in "<([{":
                level += 1
            elif c in ">)]}":
                level -= 1
                if level == 0:
                    return i + 1
            i += 1
        raise self.fail(pos, "malformed text: unbalanced '<'")

    def tensor_type(self, pos: int) -> tuple[Optional[tuple[int, ...]], Value, int]:
        """At ``tensor<``/``memdesc<``'s ``<``: (shape, encoding or None, position after it)."""
        pos += 1
        m = _DIMS.match(self.s, pos)
        dims = tuple(int(d) for d in m.group(1).split("x")[:-1]) if m else None
        pos = m.end() if m else pos
        level = 0
        while pos < len(self.s):                       # the element type: up to a ',' or '>' of this level
            c = self.s[pos]
            if c == "<" and self.s.endswith(("tensor", "memdesc"), 0, pos):
                return dims, None, pos     # a type inside the element type: read on its own, so each
                #                            character is scanned by one type only (linear time)
            if c in "<([{":
                level += 1
            elif c in ">)]}":
                if level == 0:
                    return dims, None, pos + 1
                level -= 1
            elif c == "," and level == 0:
                break
            elif c == "\n":
                raise self.fail(pos, "malformed type: a tensor type without its closing '>'")
            pos += 1
        pos = self.ws(pos + 1)
        if not self.s.startswith("#", pos):
            return dims, None, pos
        enc, pos = self.attribute(pos, 0)
        after = self.ws(pos)
        if not self.s.startswith((">", ","), after):      # tensor<..., #enc> / memdesc<..., #enc, #smem, ...>
            raise self.fail(pos, "malformed type: expected '>' or ',' after the layout of a tensor type")
        return dims, enc, pos


def _collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def read_ttgir(text: str, source: str = "<ttgir>") -> "TtgirDoc":
    """Parse a TTGIR/TTIR dump: its layout aliases, the inline layout attributes of its types,
    and the shapes of the types using each.  Raises TtgirError (``"line N: ..."``)."""
    starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line_of(pos: int) -> int:
        return bisect.bisect_right(starts, pos)

    r = _Reader(text, line_of)
    aliases: dict[str, tuple[Attr, int]] = {}
    others: set[str] = set()                             # aliases of other attributes (#smem, #loc3)
    for m in _ALIAS_DEF.finditer(text):
        others.add(m.group(1))
        if not text.startswith("#", m.end()):
            continue                                     # #loc = loc(...), #smem = ... handled alike
        value, _ = r.attribute(m.end(), 0)
        if isinstance(value, Attr) and value.layout:
            if m.group(1) in aliases:
                raise TtgirError(f"line {line_of(m.start())}", f"#{m.group(1)} is defined twice "
                                 f"(first at line {aliases[m.group(1)][1]})")
            aliases[m.group(1)] = (value, line_of(m.start()))
            _too_many(len(aliases), line_of(m.start()))
    shapes: dict[str, list[tuple[int, ...]]] = {n: [] for n in aliases}
    inline: dict[str, tuple[str, Attr, int]] = {}
    counts: dict[str, int] = {}
    for m in _TYPE.finditer(text):
        dims, enc, _ = r.tensor_type(m.end() - 1)
        if isinstance(enc, Ref):
            if enc.name in others and enc.name not in aliases:
                continue
            if enc.name not in aliases:
                raise TtgirError(f"line {line_of(m.start())}", f"#{enc.name} is used but not defined")
            key = enc.name
        elif isinstance(enc, Attr) and enc.layout:
            if enc.text not in inline:
                counts[enc.kind] = counts.get(enc.kind, 0) + 1
                name = f"{enc.kind}.{counts[enc.kind]}"
                while name in aliases:
                    name += "_"
                inline[enc.text] = (name, enc, line_of(m.start()))
                shapes[name] = []
                _too_many(len(aliases) + len(inline), line_of(m.start()))
            key = inline[enc.text][0]
        else:
            continue
        if dims is not None and dims not in shapes[key] and len(shapes[key]) < limits.MAX_TTGIR_SHAPES:
            shapes[key].append(dims)
    for n in shapes:                                     # the largest first: the tile, then its slivers
        shapes[n].sort(key=lambda d: -_size(d))
    entries = [Entry(n, a, line, tuple(shapes[n]), False) for n, (a, line) in aliases.items()]
    entries += [Entry(n, a, line, tuple(shapes[n]), True) for n, a, line in inline.values()]
    doc = TtgirDoc(source, entries, {n: a for n, (a, _) in aliases.items()})
    for e in entries:                                    # every parent reference resolves, no cycle
        doc.check_refs(e.attr, e, ())
    return doc


def _size(dims: tuple[int, ...]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _too_many(n: int, line: int) -> None:
    if n > limits.MAX_TTGIR_LAYOUTS:
        raise TtgirError(f"line {line}", f"more than {limits.MAX_TTGIR_LAYOUTS} layout attributes")


@dataclass(frozen=True)
class TtgirDoc:
    """A read dump: its ``entries`` (aliases in file order, then inline attributes) and the alias table."""

    source: str
    entries: list
    aliases: dict

    def find(self, name: str) -> Entry:
        for e in self.entries:
            if e.name == name:
                return e
        known = ", ".join(f"#{e.name}" for e in self.entries[:12]) or "none"
        more = f" and {len(self.entries) - 12} more" if len(self.entries) > 12 else ""
        raise TtgirError(f"#{limits.printable(limits.cut(name, 40))}", f"no such layout attribute in the file "
                                                                  f"(it has {known}{more}; llgen show lists them)")

    def check_refs(self, v: Value, entry: Entry, seen: tuple) -> None:
        if isinstance(v, Ref):
            if v.name not in self.aliases:
                raise TtgirError(f"line {entry.line}", f"#{entry.name} refers to #{v.name}, which is not defined")
            if v.name in seen:
                raise TtgirError(f"line {entry.line}", f"#{entry.name}: #{v.name} is its own parent")
            self.check_refs(self.aliases[v.name], entry, seen + (v.name,))
        elif isinstance(v, Attr):
            for x in (v.params.values() if isinstance(v.params, dict) else ()):
                self.check_refs(x, entry, seen)
        elif isinstance(v, (list, dict)):
            for x in (v.values() if isinstance(v, dict) else v):
                self.check_refs(x, entry, seen)

    def spec_of(self, entry: Entry, rank: Optional[int]) -> dict:
        """The llgen spec mapping of ``entry`` (without ``shape``); ``rank`` is the tensor rank
        (``nvmma_shared`` and a one-warp ``amd_wmma`` take theirs from it).  Raises TtgirError for
        an attribute llgen has no kind for."""
        return self.convert(entry.attr, entry, rank)

    def convert(self, v: Value, entry: Entry, rank: Optional[int]) -> dict:
        if isinstance(v, Ref):
            v = self.aliases[v.name]
        where = f"#{entry.name} (line {entry.line})"
        if not isinstance(v, Attr) or not v.layout:
            raise TtgirError(where, f"expected a layout attribute, got {short(v)}")
        if v.dialect not in ("ttg", "triton_gpu") or v.kind not in KINDS:
            raise TtgirError(where, f"#{v.dialect}.{v.kind} has no llgen layout kind (supported: "
                                    f"{', '.join(sorted(KINDS))})")
        if v.kind == "shared" and v.params.get("hasLeadingOffset"):
            raise TtgirError(where, "a #ttg.shared layout with hasLeadingOffset is an nvmma layout: unsupported")
        kind, names = KINDS[v.kind]
        out: dict[str, Any] = {"kind": kind}
        for key, val in v.params.items():
            if key not in names:
                raise TtgirError(where, f"#{v.dialect}.{v.kind} parameter {short(key)} is not understood "
                                        f"(known: {', '.join(names)})")
            if names[key] == "parent":
                out["parent"] = self.convert(val, entry, None if rank is None else rank + (v.kind == "slice"))
            elif names[key] is not None:
                out[names[key]] = val
        if v.kind == "nvidia_mma":
            out = {"kind": kind, "version": [v.params.get("versionMajor"), v.params.get("versionMinor", 0)],
                   **{k: x for k, x in out.items() if k != "kind"}}
        elif v.kind == "nvmma_shared" and rank is not None and rank != 2:
            out["rank"] = rank
        elif v.kind == "amd_mfma" and v.params.get("versionMinor", 0) != 0:
            raise TtgirError(where, f"amd_mfma versionMinor {short(v.params['versionMinor'])}: llgen knows minor 0")
        elif v.kind == "amd_wmma" and "ctaLayout" in v.params:
            out.update(_wmma_cta(v.params["ctaLayout"], rank, where))
        return out


def _wmma_cta(cta: Value, rank: Optional[int], where: str) -> dict:
    """``ctaLayout = {warp = [...], register = [...], block = [...]}`` of ``amd_wmma`` ->
    ``warps_per_cta`` (+ ``cga_layout``): the warp bases must tile the dims row-major (last dim
    fastest, each dim's bases 1, 2, 4, ...), the tiling llgen's amd_wmma lays out."""
    if not isinstance(cta, dict) or set(cta) - {"warp", "register", "block"}:
        raise TtgirError(where, f"amd_wmma ctaLayout {short(cta)}: expected {{warp = [...], block = [...]}}")
    if cta.get("register"):
        raise TtgirError(where, "amd_wmma ctaLayout register bases (tile repetitions) have no llgen field")
    warp = cta.get("warp") or []
    if not isinstance(warp, list) or not all(isinstance(b, list) for b in warp):
        raise TtgirError(where, f"amd_wmma ctaLayout warp bases {short(warp)}: expected a list of bases")
    r = len(warp[0]) if warp else (rank or 2)
    if not all(len(b) == r and all(isinstance(x, int) and not isinstance(x, bool) for x in b) for b in warp):
        raise TtgirError(where, f"amd_wmma ctaLayout warp bases {short(warp)}: expected bases of {r} integers")
    warps = [1] * r
    for b in warp:
        nz = [d for d, x in enumerate(b) if x]
        if len(nz) == 1:
            warps[nz[0]] *= 2
    expect = [[(1 << i) if k == d else 0 for k in range(r)] for d in reversed(range(r))
              for i in range(warps[d].bit_length() - 1)]
    if warp != expect:
        raise TtgirError(where, f"amd_wmma warp bases {short(warp)} are not a row-major warp tiling; llgen's "
                                f"amd_wmma takes warps_per_cta (write the layout as kind: linear)")
    out: dict[str, Any] = {"warps_per_cta": warps}
    if cta.get("block"):
        out["cga_layout"] = cta["block"]
    return out


# -------------------------------------------------------------------- selection
def split_selector(path: str) -> Optional[tuple[str, str, Optional[str]]]:
    """``FILE.ttgir#NAME[@SHAPE]`` -> (FILE.ttgir, NAME, SHAPE or None); ``FILE.ttgir`` alone ->
    (FILE.ttgir, "", None); None for any other path (a YAML spec)."""
    m = re.match(r"(.*?\.(?:ttgir|ttir|mlir))#(.*)\Z", path, re.I | re.S)
    if m:
        name, at, shape = m.group(2).partition("@")
        return m.group(1), name.lstrip("#"), shape if at else None
    if path.lower().endswith(SUFFIXES):
        return path, "", None
    return None


def parse_dims(text: str) -> Optional[tuple[int, ...]]:
    """``128x64`` -> (128, 64), as a type prints it; None if it is not that form."""
    if not re.fullmatch(r"\d{1,9}(?:[x,]\d{1,9}){0,7}", text):
        return None
    return tuple(int(t) for t in re.split("[x,]", text))


# ----------------------------------------------------------------------- listing
def spec_yaml(spec: dict) -> str:
    """A spec mapping as the YAML a user would save (lists inline)."""
    return yaml.safe_dump(spec, sort_keys=False, default_flow_style=None, width=120)


def listing_text(source: str, items: list) -> str:
    """``llgen show FILE.ttgir``: per layout attribute its name, kind, line, attribute text,
    shapes, spec YAML (at its first shape) and bases at each shape (``items`` as
    ``spec.ttgir_listing`` makes them)."""
    lines = [f"{source}: {len(items)} layout attribute{'s' * (len(items) != 1)} "
             f"(use one as {source}#NAME, at one of its shapes as #NAME@128x64)"]
    for it in items:
        lines += ["", f"#{it['name']}  {it['kind']}  (line {it['line']}{', inline' if it['inline'] else ''})",
                  f"  {it['attribute']}"]
        shapes = ", ".join(it["shapes"]) or "none (no tensor or memdesc type uses it: give --shape or #NAME@SHAPE)"
        lines.append(f"  shapes: {shapes}")
        if it["problem"]:
            lines.append(f"  unsupported: {it['problem']}")
            continue
        lines.append("  spec:")
        lines += ["    " + s for s in spec_yaml(it["spec"]).splitlines()]
        for shape, b in it["bases"].items():
            if isinstance(b, str):
                lines.append(f"  at {shape}: {b}")
                continue
            lines.append(f"  bases at {shape}:")
            lines += [f"    {d}: {_bases(v)}" for d, v in b.items()]
    return "\n".join(lines) + "\n"


def _bases(bases: list) -> str:
    return "[" + ", ".join("[" + ", ".join(map(str, b)) + "]" for b in bases) + "]"
