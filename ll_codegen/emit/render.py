"""Render a ``ConversionPlan`` as CUDA or HIP source through Jinja2 templates.

Everything the generated code computes is decided here, in Python: thread-index
expressions (``XorForm`` -> shift-and-mask terms), shared-memory addresses,
packing of sub-word elements into 32-bit words, select trees over lane-dependent
registers.  The templates in ``templates/`` only loop over the resulting plain
data (strings and lists) and substitute it.

Files (``file_names``):

===========  =====================  =====================
kind         CUDA                   HIP
===========  =====================  =====================
header       ``<name>.cuh``         ``<name>.h``
harness      ``<name>_harness.cu``  ``<name>_harness.hip``
bench        ``<name>_bench.cu``    ``<name>_bench.hip``
===========  =====================  =====================

The harness and the bench include the header by its relative name.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import jinja2

from ll_codegen.core.files import write_all, write_atomic  # noqa: F401 - write_atomic is re-exported
from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.model import (ConversionPlan, LaneSelect, XorForm, access_plan, harness_cut, harness_fill, harness_strides,
                   harness_variants, instruction_name, swap_stages, with_partners, word_view)

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# installed: <package>/templates; editable install or checkout: <repo>/templates
TEMPLATES = next(p for p in (os.path.join(_PKG, "templates"), os.path.join(os.path.dirname(_PKG), "templates"))
                 if os.path.isdir(p))
KINDS = ("header", "harness", "bench")
RAW_TYPES = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t"}
FULL_MASK = "0xffffffff"


# ----------------------------------------------------------------- naming
def file_names(target: str, name: str) -> dict[str, str]:
    """kind -> file name for ``target`` ("cuda" or "hip")."""
    if target == "hip":
        return {"header": f"{name}.h", "harness": f"{name}_harness.hip", "bench": f"{name}_bench.hip"}
    return {"header": f"{name}.cuh", "harness": f"{name}_harness.cu", "bench": f"{name}_bench.cu"}


# ------------------------------------------------------- C expression helpers
def _hex(v: int) -> str:
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
            terms.append(var if m == full else f"({var} & {_hex(m)})")
        elif s > 0:
            terms.append(f"({var} << {s})" if m == full else f"(({var} & {_hex(m)}) << {s})")
        else:
            r = -s
            terms.append(f"({var} >> {r})" if m == full & ~((1 << r) - 1) else f"(({var} >> {r}) & {_hex(m >> r)})")
    nonzero = [(k, c) for k, c in enumerate(coefs) if c]
    if len(nonzero) < len(terms):            # fewer terms as one multiply per input bit
        terms = [f"({var} * {_hex(c)})" if nbits == 1 else f"((({var} >> {k}) & 1) * {_hex(c)})" if k
                 else f"(({var} & 1) * {_hex(c)})" for k, c in nonzero]
    return " ^ ".join(terms)


def _strip(e: str) -> str:
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
    return _strip(parts[0]) if len(parts) == 1 else " ^ ".join(parts)


def address_expr(base: str, offset: int, support: int) -> str:
    """``base ^ offset`` as C; ``base + offset`` when the bits are disjoint
    (so the constant folds into the ``[reg+imm]`` addressing mode)."""
    if offset == 0:
        return base
    return f"{base} {'+' if offset & support == 0 else '^'} {_hex(offset)}"


def parity_expr(mask: int, var: str = "lane") -> str:
    """Parity of ``var & mask`` (0 or 1) as C."""
    if mask & (mask - 1) == 0:
        k = mask.bit_length() - 1
        return f"({var} >> {k}) & 1" if k else f"{var} & 1"
    return f"__popc({var} & {_hex(mask)}) & 1"


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
            out.append(e if len(g) == per else f"static_cast<{RAW_TYPES[len(g) * elem_bytes]}>({e})")
    return out


def compose_word(sources: Sequence[tuple[str, int] | None], elem_bytes: int) -> str:
    """A 32-bit word whose element k is element ``sources[k] = (word, index)``
    of another word (None: don't care), with as few ``__byte_perm`` as it takes:
    the word itself when nothing moves, one permute for up to two words, three
    when four bytes come from four words (8-bit elements); ``plan.compose_ops``
    counts them for the cost model."""
    used = [x for x in sources if x is not None]
    if all(x is None or x == (used[0][0], k) for k, x in enumerate(sources)):
        return used[0][0]
    words = list(dict.fromkeys(w for w, _ in used))
    if len(words) > 2:
        half = len(sources) // 2
        lo = compose_word(list(sources[:half]) + [None] * (len(sources) - half), elem_bytes)
        hi = compose_word([None] * half + list(sources[half:]), elem_bytes)
        return f"__byte_perm({lo}, {hi}, 0x7610)"
    sel = 0
    for k in range(4 // elem_bytes):
        x = sources[k] if k < len(sources) else None
        for b in range(elem_bytes):
            nib = k * elem_bytes + b if x is None else 4 * words.index(x[0]) + x[1] * elem_bytes + b
            sel |= nib << (4 * (k * elem_bytes + b))
    return f"__byte_perm({words[0]}, {words[1] if len(words) > 1 else '0u'}, {_hex(sel)})"


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


# ------------------------------------------------------------- layouts
def layout_of(bases: dict) -> LinearLayout:
    return LinearLayout(bases["in_dims"], bases["out_dims"], require_surjective=False)


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


# ------------------------------------------------------- target instructions
PTX_SHARED_TYPES = {1: ".b8", 2: ".b16", 4: ".b32", 8: ".v2.b32", 16: ".v4.b32"}


def intrinsic_spec(op: str, nbytes: int = 0, x: int = 0, trans: bool = False) -> dict:
    """One target instruction behind a named inline function (``templates/intrinsics.j2``).

    Every ld/st.shared, ld/st.global, ldmatrix and stmatrix a CUDA header
    issues goes through ``detail::<name><kImm>(addr, words...)``: ``addr`` is
    a 32-bit shared-window address (a generic pointer for global accesses),
    ``kImm`` a byte offset the PTX keeps as an immediate, ``words`` 32-bit
    registers (sub-word stores take the low bits).  On the device the body is
    the one PTX instruction; compiled for the host (``LLGEN_HOST_SIMT``,
    ``ll_codegen/simt/simt_host.h``) it calls the host SIMT runtime's model of
    the same instruction.

    ``op``: ``st_shared``/``ld_shared``/``st_global``/``ld_global`` (``nbytes``
    1, 2, 4, 8, 16), ``stmatrix``/``ldmatrix`` (m8n8 b16, ``x`` 1, 2, 4
    matrices, ``trans``) or ``cp_async``/``cp_async_zfill`` (``nbytes`` 4, 8,
    16: global -> shared, the zfill form reading ``src_bytes`` and zeroing
    the rest)."""
    glob = op.endswith("global")
    if op in ("st_shared", "ld_shared", "st_global", "ld_global"):
        t = PTX_SHARED_TYPES[nbytes]
        words = max(1, nbytes // 4)
        name = f"{op}{t.replace('.', '_')}"
        ptx = f"{op.replace('_', '.')}{t}"
    elif op in ("stmatrix", "ldmatrix"):
        words, nbytes = x, 0
        name = f"{op}_x{x}{'_trans' if trans else ''}"
        ptx = f"{op}.sync.aligned.m8n8.x{x}{'.trans' if trans else ''}.shared.b16"
    elif op in ("cp_async", "cp_async_zfill"):
        zfill = op.endswith("zfill")
        cache = "cg" if nbytes == 16 else "ca"          # .cg (L2 only) takes 16-byte copies alone
        src_size = ", %2" if zfill else ""
        imm = 3 if zfill else 2
        ops = '"r"(addr), "l"(src)' + (', "r"(src_bytes)' if zfill else "") + ', "n"(kImm)'
        return {"name": f"{op}_{nbytes}",
                "params": "unsigned addr, const void* src" + (", unsigned src_bytes" if zfill else ""),
                "host": [f"llgen_host::cp_async(addr + kImm, src, {nbytes}, {'src_bytes' if zfill else nbytes});"],
                "asm": f'asm volatile("cp.async.{cache}.shared.global [%0+%{imm}], [%1], {nbytes}{src_size};" '
                       f':: {ops} : "memory");'}
    else:
        raise ValueError(f"unknown target instruction {op!r}")
    store = op.startswith("st")
    regs = [f"%{j + (1 if store else 0)}" for j in range(words)]
    regs_text = regs[0] if words == 1 and not op.endswith("matrix") else "{" + ", ".join(regs) + "}"
    addr_op, imm_op = (0, words + 1) if store else (words, words + 1)
    operand = f"[%{addr_op}+%{imm_op}]"
    asm = f"{ptx} {operand}, {regs_text};" if store else f"{ptx} {regs_text}, {operand};"
    rs = [f"r{j}" for j in range(words)]
    a = '"l"(addr)' if glob else '"r"(addr)'
    if store:
        constraints = ":: " + ", ".join([a] + [f'"r"({r})' for r in rs] + ['"n"(kImm)'])
    else:
        constraints = ": " + ", ".join(f'"=r"({r})' for r in rs) + f' : {a}, "n"(kImm)'
    if op.endswith("matrix"):
        model = f"{op}(addr + kImm, {x}, {'true' if trans else 'false'}, regs)"
    elif glob:
        model = f"{op}(static_cast<{'' if store else 'const '}char*>(addr) + kImm, {nbytes}, regs)"
    else:
        model = f"{op}(addr + kImm, {nbytes}, regs)"
    addr_t = ("void* addr" if store else "const void* addr") if glob else "unsigned addr"
    return {"name": name,
            "params": ", ".join([addr_t] + [f"uint32_t{'' if store else '&'} {r}" for r in rs]),
            "host": [f"uint32_t* regs[] = {{{', '.join(f'&{r}' for r in rs)}}};", f"llgen_host::{model};"],
            "asm": f'asm volatile("{asm}" {constraints} : "memory");'}


# ------------------------------------------------------------- conversion body
@dataclass
class _Fn:
    """One generated device function (plain data for ``convert.j2``): its
    signature, the body's lines, and for 8/16-bit data the packed-word twin
    ``<name>_words`` that the typed function wraps."""
    name: str
    params: str                                       # of the typed template <typename T> function
    doc: list[str] = field(default_factory=list)      # comment lines above it
    word_params: str = ""                             # "" : no packed-word twin
    word_call: list[str] = field(default_factory=list)     # typed function -> <name>_words
    raw_in: list[str] = field(default_factory=list)        # typed function: T -> raw bits s[] / d[]
    raw_out: list[str] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)        # parameters the body does not read
    moves: list[str] = field(default_factory=list)         # register / noop plans, on T directly
    prologue: list[str] = field(default_factory=list)      # thread-index values, computed once
    steps: list[dict] = field(default_factory=list)        # {"comment", "lines"} or smem round blocks
    copies: list[str] = field(default_factory=list)

    @property
    def signature(self) -> str:
        return signature(f"__device__ __forceinline__ void {self.name}", self.params)

    @property
    def word_signature(self) -> str:
        return signature(f"__device__ __forceinline__ void {self.name}_words", self.word_params)


@dataclass
class _Conv:
    """Plain data for one generated namespace (the ``convert.j2`` macro's argument)."""
    name: str
    cuda: bool
    elem_bytes: int
    raw: str
    constants: list[str] = field(default_factory=list)
    index_functions: list[str] = field(default_factory=list)   # src_index / dst_index / tile_index
    functions: list[_Fn] = field(default_factory=list)
    vector_types: list[tuple[str, int]] = field(default_factory=list)
    intrinsics: list[dict] = field(default_factory=list)   # intrinsic_spec of each target instruction used
    uses_smem_ptr: bool = False
    warp_sync: bool = False                # HIP: detail::warp_sync(), a wavefront-scope barrier
    uses_global_ptr: bool = False
    copy_groups: bool | None = None        # copy plans: commit()/wait<N>() (True: cp.async groups)
    nested: list["_Conv"] = field(default_factory=list)   # via plans: namespaces via and coalesced


def _constants(plan: ConversionPlan, words: tuple[int, int] | None) -> list[str]:
    """The namespace's constexpr lines."""
    p = plan
    m = p.memory
    shape = ", ".join(map(str, p.shape))
    if p.copy is not None:
        c = p.copy
        rows = [(f"constexpr int kTileBytes = {c.store.bytes};", "bytes of the shared tile"),
                (f"constexpr int kTileAlign = {c.store.alignment};", "byte alignment the shared tile needs"),
                (f"__attribute__((unused)) constexpr int kOrder[{len(p.shape)}] = "
                 f"{{{', '.join(map(str, c.load.layout['order']))}}};", "global tile: kOrder[0] has stride 1"),
                (f"constexpr int kAlignment = {c.load.alignment};", "bytes the global tile and its strides are aligned to")]
    elif m is None:
        rows = [(f"constexpr int kSrcRegs   = {p.n_src};", "elements per thread before convert()"),
                (f"constexpr int kDstRegs   = {p.n_dst};", "elements per thread after convert()"),
                (f"constexpr int kSmemBytes = {p.smem_bytes};", "shared-memory scratch convert() needs (0: none)")]
        if p.smem is not None and p.smem.buffers == 2:
            rows.append(("constexpr int kScratchBuffers = 2;", "alternate two kSmemBytes buffers between calls"))
        if p.smem is not None and p.smem.per_warp:
            rows.append((f"constexpr int kWarpSliceBytes = {p.smem.bytes // p.num_warps};",
                         "warp w uses scratch bytes [w * kWarpSliceBytes, (w + 1) * kWarpSliceBytes)"))
    else:
        rows = [(f"constexpr int kRegs      = {max(p.n_src, p.n_dst)};", f"elements per thread {m.direction}() moves")]
        if p.via is not None:
            rows.append((f"constexpr int kSmemBytes = {p.smem_bytes};", "scratch of the conversion step (via)"))
        if m.space == "shared":
            rows += [(f"constexpr int kTileBytes = {m.bytes};", "bytes of the shared tile"),
                     (f"constexpr int kTileAlign = {m.alignment};", "byte alignment the tile's address needs")]
        else:
            rows += [(f"__attribute__((unused)) constexpr int kOrder[{len(p.shape)}] = "
                      f"{{{', '.join(map(str, m.layout['order']))}}};", "dims fastest first: kOrder[0] has stride 1"),
                     (f"constexpr int kAlignment = {m.alignment};", "bytes the tile pointer and every stride are aligned to")]
    rows += [(f"constexpr int kThreads   = {p.threads};", "threads taking part: tid in [0, kThreads)"),
             (f"constexpr int kWarpSize  = {p.warp_size};", ""),
             (f"constexpr int kElemBytes = {p.elem_bytes};", f"sizeof(T) ({p.dtype})"),
             (f"constexpr int kRank      = {len(p.shape)};", ""),
             (f"__attribute__((unused)) constexpr int kShape[kRank] = {{{shape}}};", "the tensor (row-major)")]
    if p.copy is not None:
        pass                                        # no registers on either side
    elif words and m is None:
        rows += [(f"constexpr int kSrcWords  = {words[0]};", "packed 32-bit words for convert_words()"),
                 (f"constexpr int kDstWords  = {words[1]};", "")]
    elif words:
        rows += [(f"constexpr int kWords     = {max(words)};", f"packed 32-bit words for {m.direction}_words()")]
    return aligned(rows)


class _Builder:
    """Builds the body of one device function (``fn``) from a plan; the
    target instructions and vector types it uses are recorded in ``conv``."""

    def __init__(self, plan: ConversionPlan, conv: _Conv, fn: _Fn, element_view: bool = False):
        self.p = plan
        self.conv, self.fn = conv, fn
        self.cuda = plan.target == "cuda"
        self.lane_bits = plan.warp_size.bit_length() - 1
        self.warp_bits = plan.num_warps.bit_length() - 1
        self.raw = RAW_TYPES[plan.elem_bytes]
        self.needs = set()
        # Word view (8/16-bit elements): s[] and d[] hold 32-bit words of 4/w
        # packed elements (the bytes of src/dst as they are), so an access
        # whose elements are a whole word moves it untouched and the others
        # cost one byte permute per word, never one register per element.
        self.per = word_view(plan) if not element_view else 0
        self.dst_src: dict[int, tuple[str, int]] = {}    # word view: dst element -> (word, index)
        self.copy_of = dict(plan.dst_copies)              # broadcast register -> the one it copies
        self.words_done: set[int] = set()
        self.sel_names: dict[int, str] = {}
        self.sel_lines: list[tuple[str, str]] = []

    # thread indices -------------------------------------------------------
    def form(self, f: XorForm) -> str:
        e = xor_form_expr(f, self.lane_bits, self.warp_bits)
        if "lane" in e:
            self.needs.add("lane")
        if "warp" in e:
            self.needs.add("warp")
        return e

    def select_bits(self, sel: LaneSelect) -> list[str]:
        names = []
        for m in sel.masks:
            if m not in self.sel_names:
                n = f"sel{len(self.sel_names)}"
                self.sel_names[m] = n
                self.sel_lines.append((f"const unsigned {n} = {parity_expr(m)};", f"parity of lane & {_hex(m)}"))
                self.needs.add("lane")
            names.append(self.sel_names[m])
        return names

    def src_words(self, regs: Sequence[int]) -> list[str]:
        """32-bit payload words of source registers ``regs`` (lowest first)."""
        if not self.per:
            return pack_words([f"s[{r}]" for r in regs], self.p.elem_bytes, self.cuda)
        return [compose_word([(f"s[{r // self.per}]", r % self.per) for r in regs[i:i + self.per]],
                             self.p.elem_bytes) for i in range(0, len(regs), self.per)]

    def receive(self, words: Sequence[str], regs: Sequence[int]) -> list[tuple[int, str]]:
        """Destination registers ``regs`` arrive packed in ``words``: (index
        into d[], value) for each element, or in the word view for each
        destination word completed now (broadcast copies included)."""
        if not self.per:
            return list(zip(regs, unpack_elems(words, len(regs), self.p.elem_bytes, self.raw)))
        for k, r in enumerate(regs):
            self.dst_src[r] = (words[k // self.per], k % self.per)
        arrived = set(regs)
        touched = {r // self.per for r in regs} | {a // self.per for a, b in self.copy_of.items() if b in arrived}
        out = []
        for j in sorted(touched):
            srcs = [self.dst_src.get(self.copy_of.get(r, r)) for r in range(j * self.per, (j + 1) * self.per)]
            if all(x is not None for x in srcs) and j not in self.words_done:
                self.words_done.add(j)
                out.append((j, compose_word(srcs, self.p.elem_bytes)))
        return out

    def finish_prologue(self, rows: list[tuple[str, str]]) -> None:
        head = []
        if "lane" in self.needs:
            head.append(("const unsigned lane = tid & (kWarpSize - 1);", ""))
        if "warp" in self.needs:
            head.append(("const unsigned warp = tid / kWarpSize;", ""))
        self.fn.prologue = aligned(head + rows + self.sel_lines)

    # strategies -------------------------------------------------------------
    def build(self, masked: bool = False) -> _Fn:
        p = self.p
        if p.copy is not None:
            self.memory_copy(masked)
            return self.fn
        if p.memory is not None:
            if p.memory.space == "shared":
                self.memory_shared()
            else:
                self.memory_global(masked)
            if p.memory.direction == "load" and not self.per:
                self.fn.copies = aligned((f"d[{a}] = d[{b}];", "broadcast copy") for a, b in p.dst_copies)
            return self.fn
        if p.register is not None and p.shuffle is None and p.smem is None and self.per:
            at = [(f"s[{j // self.per}]", j % self.per) for j in p.register.dst_from_src]
            self.fn.steps = [{"comment": "Register moves: whole words where they line up, else byte permutes",
                                "lines": [f"d[{k}] = {compose_word(at[k * self.per:(k + 1) * self.per], p.elem_bytes)};"
                                          for k in range(p.n_dst // self.per)]}]
            return self.fn
        if p.register is not None and p.shuffle is None and p.smem is None:
            pairs = [(f"dst[{i}] = src[{j}];", "") for i, j in enumerate(p.register.dst_from_src)]
            self.fn.moves = [c for c, _ in pairs] + [f"dst[{a}] = dst[{b}];" for a, b in p.dst_copies]
            return self.fn
        if p.shuffle is not None:
            self.shuffle()
        elif p.smem is not None:
            self.smem()
        else:
            raise ValueError(f"plan with strategy {p.strategy!r} has no register, shuffle or smem part")
        if not self.per:                          # the word view folds copies into the words
            self.fn.copies = aligned((f"d[{a}] = d[{b}];", "broadcast copy") for a, b in p.dst_copies)
        return self.fn

    def shuffle(self) -> None:
        s = self.p.shuffle
        rows: list[tuple[str, str]] = []
        src_lane = None
        if s.src_lane is not None:
            e = linear_expr(s.src_lane, "lane", self.lane_bits) or "0u"
            rows.append((f"const unsigned src_lane = {_strip(e)};", "source lane before the round's xor"))
            self.needs.add("lane")
            src_lane = "src_lane"
        send_bits = self.select_bits(s.send_select)
        recv_bits = self.select_bits(s.recv_select)
        suffix = ["_lo", "_hi"] if s.words == 2 else [""]
        pack, shfl, recv_words = [], [], []
        if s.send_swaps:       # the payload words of every tuple, then the swap stages
            finals = [rnd.send[0] for rnd in s.rounds]
            stages = swap_stages(finals, s.send_swaps)
            words = {}
            for j, t in enumerate(with_partners(stages[0], s.send_swaps[0])):
                words[t] = [f"w{j}{x}" for x in suffix]
                pack += [f"const uint32_t {n} = {e};" for n, e in zip(words[t], self.src_words(t))]
            lines, words = self.swap_lines("w", words, stages, s.send_swaps, send_bits, suffix)
            pack += lines
            payloads = [words[t] for t in finals]
        for i, rnd in enumerate(s.rounds):
            out_names = [f"out{i}{x}" for x in suffix]
            in_names = [f"in{i}{x}" for x in suffix]
            if s.send_swaps:
                out_names = payloads[i]
            else:
                cands = [self.src_words(regs) for regs in rnd.send]
                pack += [f"const uint32_t {o} = {select_tree([c[k] for c in cands], send_bits)};"
                         for k, o in enumerate(out_names)]
            for k, (o, n) in enumerate(zip(out_names, in_names)):
                if src_lane is None and rnd.lane_xor == 0:
                    in_names[k] = o                              # the lane keeps its own payload
                    continue
                if src_lane is None:
                    call = (f"__shfl_xor_sync({FULL_MASK}, {o}, {_hex(rnd.lane_xor)})" if self.cuda
                            else f"__shfl_xor({o}, {_hex(rnd.lane_xor)})")
                else:
                    lane_e = address_expr(src_lane, rnd.lane_xor, (1 << self.lane_bits) - 1).replace(" + ", " ^ ")
                    call = f"__shfl_sync({FULL_MASK}, {o}, {lane_e})" if self.cuda else f"__shfl({o}, {lane_e})"
                shfl.append(f"const uint32_t {n} = {call};")
            recv_words.append(in_names)
        unpack = []
        if s.recv_swaps:      # swap stages on the received words, then one unpack for every lane
            words = {rnd.recv[0]: recv_words[i] for i, rnd in enumerate(s.rounds)}
            lines, words = self.swap_lines("v", words, swap_stages(list(words), s.recv_swaps), s.recv_swaps,
                                           recv_bits, suffix)
            unpack += lines
            self.dst_src, self.words_done = {}, set()
            for t, names in words.items():
                unpack += [f"d[{r}] = {e};" for r, e in self.receive(names, t)]
        else:
            # destination register (word) <- (round, slot) for each recv-select value
            written: dict[int, dict[int, str]] = {}
            for c in range(s.recv_select.size):
                self.dst_src, self.words_done = {}, set()
                for i, rnd in enumerate(s.rounds):
                    for r, e in self.receive(recv_words[i], rnd.recv[c]):
                        written.setdefault(r, {})[c] = e
            for r in sorted(written):
                by_c = written[r]
                if len(by_c) != s.recv_select.size:
                    raise ValueError(f"shuffle plan: dst[{r}] is received for only some lanes")
                unpack.append(f"d[{r}] = {select_tree([by_c[c] for c in range(s.recv_select.size)], recv_bits)};")
        self.finish_prologue(rows)
        n_shfl = len(shfl)
        how = "lane ^ c" if s.src_lane is None else "src_lane ^ c"

        def lane_dependent(side: str, sel: LaneSelect, swaps: tuple[int, ...]) -> str:
            return f"{sel.size}-way lane-dependent {side}" + (f" by {len(swaps)} swap stage(s)" if swaps else "")
        send_how = f", {lane_dependent('send', s.send_select, s.send_swaps)}" if s.send_select.size > 1 else ""
        recv_how = f" ({lane_dependent('receive', s.recv_select, s.recv_swaps)})" if s.recv_select.size > 1 else ""
        self.fn.steps = [
            {"comment": f"Pack: {len(s.rounds)} round(s) x {s.words} word(s), {s.vec} element(s) per payload"
                        + send_how, "lines": pack},
            {"comment": f"Exchange: {n_shfl} shuffle(s) issued back to back, source lane {how}", "lines": shfl},
            {"comment": "Unpack" + recv_how, "lines": unpack},
        ]

    @staticmethod
    def swap_lines(prefix: str, words: dict[tuple[int, ...], list[str]], stages: list[list[tuple[int, ...]]],
                   swaps: Sequence[int], bits: Sequence[str], suffix: Sequence[str]
                   ) -> tuple[list[str], dict[tuple[int, ...], list[str]]]:
        """Swap stage k: ``t = bit_k ? t ^ swaps[k] : t`` for the register tuples it writes
        (``plan.swap_stages``), from ``words`` (tuple -> word names); the lines and the last
        stage's words."""
        lines = []
        for k, (x, outs) in enumerate(zip(swaps, stages)):
            new = {}
            for j, t in enumerate(outs):
                partner = tuple(r ^ x for r in t)
                if t not in words or partner not in words:
                    raise ValueError(f"shuffle plan: swap stage {k} needs registers {t} and {partner}")
                new[t] = [f"{prefix}{k + 1}_{j}{sfx}" for sfx in suffix]
                lines += [f"const uint32_t {n} = {bits[k]} ? {b} : {a};"
                          for n, a, b in zip(new[t], words[t], words[partner])]
            words = new
        return lines, words

    def smem(self) -> None:
        m = self.p.smem
        st_sup, ld_sup = m.store_base.support, m.load_base.support
        guard = None
        if m.store_warp_skip:
            self.needs.add("warp")
            guard = f"(warp & {_hex(m.store_warp_skip)}) == 0"
        steps = []
        nround = len(m.rounds)
        visible = "__syncthreads()"     # stores -> loads; the barrier before the stores stays block-wide
        if m.barrier == "warp":
            visible = "__syncwarp()" if self.cuda else "detail::warp_sync()"
            self.conv.warp_sync = not self.cuda
        # the barrier before each round's stores (none before round 0 with two scratch buffers)
        free = (f"{visible};  // scratch free (previous use done by this warp: its own slice)" if m.per_warp
                else "__syncthreads();  // scratch free (previous use done)")
        for i, rnd in enumerate(m.rounds):
            stores = [self.store(a, m.store_instr, m.store_vec, st_sup, k) for k, a in enumerate(rnd.stores)]
            loads, unpack = [], []
            for k, a in enumerate(rnd.loads):
                ld, un = self.load(a, m.load_instr, m.load_vec, ld_sup, f"v{k}" if nround == 1 else f"v{i}_{k}")
                loads.append(ld)
                unpack += un
            tag = f"Round {i}/{nround}: " if nround > 1 else ""
            steps.append({
                "comment": f"{tag}{len(stores)} store(s) of {self.width(m.store_instr, m.store_vec)}, "
                           f"{len(loads)} load(s) of {self.width(m.load_instr, m.load_vec)}",
                "stores": stores, "guard": guard, "loads": loads, "unpack": unpack, "visible": visible,
                "free": free if i > 0 or m.buffers == 1 else None})
        self.fn.steps = steps
        self.finish_prologue(self.smem_rows(("st", m.store_base), ("ld", m.load_base)))

    def memory_shared(self) -> None:
        """Stores into / loads from the given shared tile: the accesses of
        ``SmemAccess`` at ``base ^ offset``, no barrier (the caller's)."""
        m = self.p.memory
        sup = m.base.support
        if m.direction == "store":
            side = "st"
            lines = [self.store(a, m.instr, m.vec, sup, k) for k, a in enumerate(m.accesses)]
            if m.warp_skip:
                self.needs.add("warp")
                lines = ([f"if ((warp & {_hex(m.warp_skip)}) == 0) {{  // warps holding broadcast copies skip"]
                         + ["    " + x for x in lines] + ["}"])
        else:
            side = "ld"
            lines, unpack = [], []
            for k, a in enumerate(m.accesses):
                ld, un = self.load(a, m.instr, m.vec, sup, f"v{k}")
                lines.append(ld)
                unpack += un
            lines += unpack
        self.fn.steps = [{"comment": f"{len(m.accesses)} {m.direction}(s) of {self.width(m.instr, m.vec)}",
                          "lines": lines}]
        rows = self.smem_rows((side, m.base))
        self.finish_prologue(rows)

    def global_addressing(self, m, writable: bool) -> tuple[list[tuple[str, str]], list[dict]]:
        """Prologue rows (the thread's coordinates and first-element pointer)
        and, per access of the global plan ``m``: ``ptr`` (a byte pointer
        expression), ``fe`` (the first element's coordinate along the
        contiguous dim) and ``inside`` (the other dims' extent test)."""
        w, f = self.p.elem_bytes, m.layout["order"][0]
        coord, rows = [], []
        for d, cb in enumerate(m.coord_base):
            e = self.form(cb)
            if e == "0u":
                coord.append(None)
            else:
                rows.append((f"const unsigned c{d} = {_strip(e)};", f"this thread's coordinate along dim {d}"))
                coord.append(f"c{d}")

        def offset(cs: list[str | None]) -> str:          # byte offset of coordinates (None = 0) from the tile
            terms = [c if d == f else f"static_cast<long long>({c}) * strides[{d}]"
                     for d, c in enumerate(cs) if c is not None]
            return f"({' + '.join(terms)}) * kElemBytes" if terms else "0"
        ptr_t = "char*" if writable else "const char*"
        cast = f"reinterpret_cast<{ptr_t}>(tile)"
        rows.append((f"{ptr_t} const thread_ptr = {cast} + {offset(coord)};", "this thread's first element"))
        out = []
        for a in m.accesses:
            sup = [cb.support for cb in m.coord_base]
            if all(c & s_ == 0 for c, s_ in zip(a.coords, sup)):      # disjoint bits: an added constant
                parts = [f"{c * w}" if d == f else f"strides[{d}] * {c * w}" for d, c in enumerate(a.coords) if c]
                ptr = f"thread_ptr + {' + '.join(parts)}" if parts else "thread_ptr"
            else:
                xored = [f"({coord[d] or '0u'} ^ {_hex(c)}u)" if c else coord[d] for d, c in enumerate(a.coords)]
                ptr = f"{cast} + {offset(xored)}"
            first = []
            for d, (c, base) in enumerate(zip(a.coords, coord)):
                base = base or "0u"
                e = base if not c else (f"({base} + {c}u)" if c & sup[d] == 0 else f"({base} ^ {_hex(c)}u)")
                first.append(e)
            inside = [f"static_cast<int>({e}) < extent[{d}]" for d, e in enumerate(first) if d != f and e != "0u"]
            out.append({"ptr": ptr, "fe": first[f], "inside": " && ".join(inside) or "true"})
        return rows, out

    def memory_global(self, masked: bool) -> None:
        """Vector accesses to a global tile with runtime strides; ``masked``:
        elements at or beyond ``extent`` are skipped (stores) or ``fill`` (loads)."""
        p, m = self.p, self.p.memory
        w, v, f = p.elem_bytes, m.vec, m.layout["order"][0]
        store = m.direction == "store"
        rows, where = self.global_addressing(m, store)
        lines = []
        for k, (a, at) in enumerate(zip(m.accesses, where)):
            if not masked:
                lines += self.global_access(a, at["ptr"], f"v{k}")
                continue
            fe = at["fe"]
            lines.append(f"if ({at['inside']}) {{")
            whole = f"static_cast<int>({fe}) + {v} <= extent[{f}]" if v > 1 else f"static_cast<int>({fe}) < extent[{f}]"
            lines.append(f"    if ({whole}) {{")
            lines += ["        " + x for x in self.global_access(a, at["ptr"], f"v{k}")]
            if v > 1:
                lines.append("    } else {  // the edge cuts this vector: element by element")
                for j, r in enumerate(a.regs):
                    one = self.global_element(r, f"{at['ptr']} + {j * w}" if j else at["ptr"])
                    lines.append(f"        if (static_cast<int>({fe}) + {j} < extent[{f}]) {one}")
            lines.append("    }")
            lines.append("}")
        if masked and not store:
            lines = [f"d[{r}] = fill_bits;" for r in range(p.n_dst) if r not in dict(p.dst_copies)] + lines
        if store:
            lines = self.skip_broadcast(lines, m)
        what = "masked " if masked else ""
        self.fn.steps = [{"comment": f"{len(m.accesses)} {what}{m.direction}(s) of {v * w} B", "lines": lines}]
        self.conv.uses_global_ptr = True
        self.finish_prologue(rows)

    def skip_broadcast(self, lines: list[str], m) -> list[str]:
        """``lines`` under the guard that lets threads holding broadcast copies (``m.lane_skip``,
        ``m.warp_skip``) skip their stores."""
        conds = []
        if m.lane_skip:
            conds.append(f"(lane & {_hex(m.lane_skip)}) == 0")
            self.needs.add("lane")
        if m.warp_skip:
            conds.append(f"(warp & {_hex(m.warp_skip)}) == 0")
            self.needs.add("warp")
        if not conds:
            return lines
        return [f"if ({' && '.join(conds)}) {{  // threads holding broadcast copies skip"] + ["    " + x for x in lines] + ["}"]

    def memory_copy(self, masked: bool) -> None:
        """Global tile -> shared tile: per access pair one cp.async (zero-filling
        what lies beyond ``extent`` through its source size) or, without
        cp.async, a global load and a shared store of the same bytes."""
        p, c = self.p, self.p.copy
        ld, st = c.load, c.store
        w, v, f = p.elem_bytes, ld.vec, ld.layout["order"][0]
        n = v * w
        rows, where = self.global_addressing(ld, False)
        sup = st.base.support
        lines = []
        for k, (ga, sa, at) in enumerate(zip(ld.accesses, st.accesses, where)):
            if c.async_copy:
                saddr, imm = self.u32_addr("st", sa.offset, sup)
                if not masked:
                    fn = self.intrinsic("cp_async", nbytes=n)
                    lines.append(f"{fn}<{imm}>({saddr}, {at['ptr']});")
                    continue
                fn = self.intrinsic("cp_async_zfill", nbytes=n)
                lines.append(f"{{  // bytes beyond the extent are zero-filled (source size {n} or less)")
                lines.append(f"    const int room = ({at['inside']}) ? extent[{f}] - static_cast<int>({at['fe']}) : 0;")
                lines.append(f"    const unsigned src_bytes = room <= 0 ? 0u : room >= {v} ? {n}u : "
                             f"static_cast<unsigned>(room) * kElemBytes;")
                lines.append(f"    {fn}<{imm}>({saddr}, src_bytes ? {at['ptr']} : reinterpret_cast<const char*>(tile), "
                             f"src_bytes);")
                lines.append("}")
                continue
            # through a register: one global load, one shared store of the same bytes
            lines += self.copy_through_register(ga, sa, at, masked, k, n, f, sup)
        lines = self.skip_broadcast(lines, st)
        self.fn.steps = [{"comment": f"{len(ld.accesses)} {'masked ' if masked else ''}copies of {n} B "
                                     f"({'cp.async' if c.async_copy else 'through registers'})", "lines": lines}]
        self.conv.uses_global_ptr = True
        if not self.cuda:
            self.conv.uses_smem_ptr = True
        rows += self.smem_rows(("st", st.base))
        self.finish_prologue(rows)

    def copy_through_register(self, ga, sa, at, masked: bool, k: int, n: int, f: int, sup: int) -> list[str]:
        v = len(ga.regs)
        w = self.p.elem_bytes
        t = self.vec_type(n) if n >= 4 or not self.cuda else RAW_TYPES[n]
        if self.cuda:
            ldf = self.intrinsic("ld_global", nbytes=n)
            stf = self.intrinsic("st_shared", nbytes=n)
            nw = max(1, n // 4)
            names = [f"v{k}_{j}" for j in range(nw)]
            addr, imm = self.u32_addr("st", sa.offset, sup)
            whole = [f"uint32_t {', '.join(names)}; {ldf}<0>({at['ptr']}, {', '.join(names)});",
                     f"{stf}<{imm}>({addr}, {', '.join(names)});"]
            zero = [f"{stf}<{imm}>({addr}, {', '.join('0u' for _ in names)});"]
            elem_st = self.intrinsic("st_shared", nbytes=w) if masked else ""
            def one(j: int, val: str) -> str:
                a2, i2 = self.u32_addr("st", sa.offset + j * w, sup)
                return f"{elem_st}<{i2}>({a2}, {val});"
            def elem_val(j: int) -> str:
                ptr = f"{at['ptr']} + {j * w}" if j else at["ptr"]
                return f"static_cast<uint32_t>(*reinterpret_cast<const {self.raw}*>({ptr}))" if w < 8 else ""
        else:
            sptr = self.pt_addr("st", sa.offset, sup)
            whole = [f"detail::st({sptr}, detail::gld<{t}>({at['ptr']}));"]
            zero = [f"detail::st({sptr}, {t}{{}});"] if n > 4 else [f"detail::st({sptr}, static_cast<{t}>(0));"]
            def one(j: int, val: str) -> str:
                return f"detail::st({self.pt_addr('st', sa.offset + j * w, sup)}, {val});"
            def elem_val(j: int) -> str:
                ptr = f"{at['ptr']} + {j * w}" if j else at["ptr"]
                return f"*reinterpret_cast<const {self.raw}*>({ptr})"
        if not masked:
            return whole
        fe = at["fe"]
        full = f"static_cast<int>({fe}) + {v} <= extent[{f}]" if v > 1 else f"static_cast<int>({fe}) < extent[{f}]"
        out = [f"if (({at['inside']}) && {full}) {{"] + ["    " + x for x in whole]
        if v > 1 and (w < 8 or not self.cuda):       # (CUDA copies 8-byte vectors with cp.async)
            out.append(f"}} else if ({at['inside']}) {{  // the edge cuts this vector: element by element, zeros beyond")
            for j in range(v):
                zero_v = "0u" if self.cuda else f"static_cast<{self.raw}>(0)"
                out.append(f"    {one(j, f'static_cast<int>({fe}) + {j} < extent[{f}] ? {elem_val(j)} : {zero_v}')}")
            out.append("} else {")
        else:
            out.append("} else {")
        out += ["    " + x for x in zero] + ["}"]
        return out

    def smem_rows(self, *sides: tuple[str, XorForm]) -> list[tuple[str, str]]:
        """Prologue rows for shared addresses: the tile pointer, its 32-bit
        window address, and per side (``st``/``ld``, thread base form) the
        thread's byte offset and what the accesses use of it."""
        rows = []
        if "smem_bytes" in self.needs or any(f"{side}_ptr" in self.needs for side, _ in sides):
            rows.append(("char* const smem_bytes = static_cast<char*>(const_cast<void*>(smem));", ""))
        if "smem_u32" in self.needs:
            rows.append(("const unsigned smem_u32 = static_cast<unsigned>(__cvta_generic_to_shared(smem));",
                         "shared-window address"))
        for side, base in sides:
            rows.append((f"const unsigned {side}_base = {self.form(base)};",
                         f"byte offset this thread {'store' if side == 'st' else 'load'}s at"))
            if f"{side}_ptr" in self.needs:
                rows.append((f"char* const {side}_ptr = smem_bytes + {side}_base;", ""))
            if f"{side}_addr" in self.needs:
                rows.append((f"const unsigned {side}_addr = smem_u32 + {side}_base;", ""))
        return rows

    def global_access(self, a, ptr: str, name: str) -> list[str]:
        """One whole vector access at byte pointer ``ptr``."""
        p = self.p
        n = len(a.regs) * p.elem_bytes
        if p.memory.direction == "store":
            words = self.src_words(a.regs)
            if self.cuda:
                word = "{}" if n >= 4 else "static_cast<uint32_t>({})"
                fn = self.intrinsic("st_global", nbytes=n)
                return [f"{fn}<0>({ptr}, {', '.join(word.format(e) for e in words)});"]
            t = self.vec_type(n)
            val = (f"static_cast<{t}>({words[0]})" if n < 4 else words[0]) if len(words) == 1 \
                else f"{t}{{{', '.join(words)}}}"
            return [f"detail::gst({ptr}, {val});"]
        nw = max(1, n // 4)
        names = [f"{name}_{j}" for j in range(nw)] if nw > 1 else [name]
        if self.cuda:
            fn = self.intrinsic("ld_global", nbytes=n)
            line = f"uint32_t {', '.join(names)}; {fn}<0>({ptr}, {', '.join(names)});"
            words = names
        else:
            t = self.vec_type(n)
            if n <= 4:
                line = f"const uint32_t {name} = detail::gld<{t}>({ptr});"
                words = [name]
            else:
                line = f"const {t} {name} = detail::gld<{t}>({ptr});"
                words = [f"{name}.{'xyzw'[j]}" for j in range(nw)]
        return [line] + [f"d[{r}] = {e};" for r, e in self.receive(words, a.regs)]

    def global_element(self, r: int, ptr: str) -> str:
        """One element (register ``r``) at byte pointer ``ptr`` (masked edges; element view)."""
        p = self.p
        t = self.raw
        if p.memory.direction == "store":
            return f"*reinterpret_cast<{t}*>({ptr}) = s[{r}];"
        return f"d[{r}] = *reinterpret_cast<const {t}*>({ptr});"

    def width(self, instr: str, vec: int) -> str:
        if instr.startswith("matrix"):
            x = vec * self.p.elem_bytes // 4
            return f"m8n8.x{x}{'.trans' if instr.endswith('trans') else ''} matrices"
        return f"{vec * self.p.elem_bytes} B"

    def vec_type(self, nbytes: int) -> str:
        if nbytes < 4:
            return RAW_TYPES[nbytes]
        if nbytes == 4:
            return "uint32_t"
        n = nbytes // 4
        t = f"u32x{n}"
        if (t, n) not in self.conv.vector_types:
            self.conv.vector_types.append((t, n))
            self.conv.vector_types.sort()
        return f"detail::{t}"

    def intrinsic(self, op: str, nbytes: int = 0, x: int = 0, trans: bool = False) -> str:
        """Name of a target instruction's wrapper (``intrinsics.j2``), recorded as used."""
        spec = intrinsic_spec(op, nbytes, x, trans)
        if spec not in self.conv.intrinsics:
            self.conv.intrinsics.append(spec)
            self.conv.intrinsics.sort(key=lambda i: i["name"])
        return f"detail::{spec['name']}"

    def store(self, a, instr: str, vec: int, support: int, k: int) -> str:
        w = self.p.elem_bytes
        words = self.src_words(a.regs)
        if instr.startswith("matrix"):
            addr, imm = self.u32_addr("st", a.offset, support)
            fn = self.intrinsic("stmatrix", x=len(words), trans=instr.endswith("trans"))
            return f"{fn}<{imm}>({addr}, {', '.join(words)});"
        if self.cuda:                                            # exactly the planned access
            addr, imm = self.u32_addr("st", a.offset, support)
            word = "{}" if len(a.regs) * w >= 4 else "static_cast<uint32_t>({})"   # sub-word: widen
            fn = self.intrinsic("st_shared", nbytes=len(a.regs) * w)
            return f"{fn}<{imm}>({addr}, {', '.join(word.format(e) for e in words)});"
        self.conv.uses_smem_ptr = True
        if len(a.regs) == 1 and not self.per:                   # one element: its raw type
            return f"detail::st({self.pt_addr('st', a.offset, support)}, s[{a.regs[0]}]);"
        nbytes = len(a.regs) * w
        t = self.vec_type(nbytes)
        val = (f"static_cast<{t}>({words[0]})" if nbytes < 4 else words[0]) if len(words) == 1 \
            else f"{t}{{{', '.join(words)}}}"
        return f"detail::st({self.pt_addr('st', a.offset, support)}, {val});"

    def load(self, a, instr: str, vec: int, support: int, name: str) -> tuple[str, list[str]]:
        w = self.p.elem_bytes
        n = len(a.regs)
        if instr.startswith("matrix"):
            x = n * w // 4
            addr, imm = self.u32_addr("ld", a.offset, support)
            names = [f"{name}_{j}" for j in range(x)]
            fn = self.intrinsic("ldmatrix", x=x, trans=instr.endswith("trans"))
            line = f"uint32_t {', '.join(names)}; {fn}<{imm}>({addr}, {', '.join(names)});"
            words = names
        elif self.cuda:                                          # exactly the planned access
            addr, imm = self.u32_addr("ld", a.offset, support)
            nw = max(1, n * w // 4)
            names = [f"{name}_{j}" for j in range(nw)] if nw > 1 else [name]
            fn = self.intrinsic("ld_shared", nbytes=n * w)
            line = f"uint32_t {', '.join(names)}; {fn}<{imm}>({addr}, {', '.join(names)});"
            words = names
        else:
            self.conv.uses_smem_ptr = True
            if n == 1 and not self.per:                          # one element: its raw type
                return (f"const {self.raw} {name} = detail::ld<{self.raw}>({self.pt_addr('ld', a.offset, support)});",
                        [f"d[{a.regs[0]}] = {name};"])
            if n * w < 4:                                        # word view: a sub-word access, zero-extended
                t = self.vec_type(n * w)
                line = f"const uint32_t {name} = detail::ld<{t}>({self.pt_addr('ld', a.offset, support)});"
                return line, [f"d[{r}] = {e};" for r, e in self.receive([name], a.regs)]
            t = self.vec_type(n * w)
            line = f"const {t} {name} = detail::ld<{t}>({self.pt_addr('ld', a.offset, support)});"
            nw = n * w // 4
            words = [name] if nw <= 1 else [f"{name}.{'xyzw'[j]}" for j in range(nw)]
        return line, [f"d[{r}] = {e};" for r, e in self.receive(words, a.regs)]

    def pt_addr(self, side: str, offset: int, support: int) -> str:
        """Generic pointer to ``base ^ offset``: ``st_ptr + imm`` when the bits are disjoint."""
        if offset & support == 0:
            self.needs.add(f"{side}_ptr")
            return address_expr(f"{side}_ptr", offset, support)
        self.needs.add("smem_bytes")
        return f"smem_bytes + ({address_expr(f'{side}_base', offset, support)})"

    def u32_addr(self, side: str, offset: int, support: int) -> tuple[str, int]:
        """(register operand, immediate byte offset) of the 32-bit shared address ``base ^ offset``."""
        self.needs.add("smem_u32")
        if offset & support == 0:
            self.needs.add(f"{side}_addr")
            return f"{side}_addr", offset
        return f"smem_u32 + ({address_expr(f'{side}_base', offset, support)})", 0


def _one_line(plan: ConversionPlan) -> str:
    p = plan
    if p.shuffle is not None:
        s = p.shuffle
        return f"warp shuffles: {len(s.rounds)} round(s) x {s.words} word(s)"
    if p.smem is not None:
        m = p.smem
        return (f"through shared memory: {len(m.rounds)} round(s), {m.bytes} bytes, "
                f"{m.store.bank_conflicts}/{m.load.bank_conflicts} bank conflicts per store/load")
    if p.strategy == "noop":
        return "no data movement (identical layouts)"
    return "register permutation within each thread"


def _summary_lines(plan: ConversionPlan) -> list[str]:
    try:
        from ll_codegen.plan.report import summary
        text = summary(plan)
    except Exception:  # pragma: no cover - report is optional for rendering
        text = plan.strategy
    lines = text.splitlines()
    if plan.smem is not None:
        lines.insert(2, f"  widest access tile: {plan.smem.vector_bytes} bytes")
    return lines


def _barrier_contract(plan: ConversionPlan) -> str:
    """Which barriers convert() issues and what the caller must guarantee."""
    if plan.shuffle is not None:
        return ("Barriers: none; smem is not touched. Each warp exchanges data within itself (shuffles), so "
                "the call must be made by whole warps (all lanes active).")
    if plan.smem is None:
        return "Barriers: none; smem is not touched and no data leaves the thread."
    m, n = plan.smem, len(plan.smem.rounds)
    every = "Every thread of the block must make the call, with tid in [0, kThreads)."
    still = ("When it returns, other threads may still be reading smem: __syncthreads() before writing smem "
             "again (another convert() does that itself).")
    sync = "__syncwarp()" if plan.target == "cuda" else "wavefront barrier(s) (detail::warp_sync())"
    if m.buffers == 2:
        return (f"Barriers: {m.block_barriers} __syncthreads() ({n} round(s)), none before the first stores: "
                f"kScratchBuffers = 2 -- consecutive conversions must use different scratch buffers (allocate "
                f"two of kSmemBytes and alternate), so that the block barrier between this call's stores and "
                f"loads has ordered every read of the buffer by the call before the previous one. Before the "
                f"first call, and before reusing a buffer for anything else, __syncthreads(). {every}")
    if m.per_warp:
        return (f"Barriers: {m.warp_barriers} {sync}, no block barrier ({n} round(s)); the scratch is "
                f"split per warp (--scratch-per-warp): warp w stores and loads only bytes [w * kWarpSliceBytes, "
                f"(w + 1) * kWarpSliceBytes). The caller guarantees that no other warp has touched this "
                f"warp's slice since the last __syncthreads() (consecutive --scratch-per-warp conversions of "
                f"the same kSmemBytes on one scratch need nothing between them); before using the scratch for "
                f"anything else, __syncthreads(). {every}")
    if m.barrier == "warp":
        return (f"Barriers: {m.block_barriers} __syncthreads() and {m.warp_barriers} {sync} ({n} round(s)): a "
                f"block barrier before each round's stores, so the scratch may still be in use by the caller or "
                f"an earlier convert() when this one starts; a warp barrier between stores and loads, enough "
                f"because every warp reads back only bytes it wrote itself. {every} {still}")
    return (f"Barriers: {2 * n} __syncthreads() ({n} round(s): one before each round's stores, so the "
            f"scratch may still be in use by the caller or an earlier convert() when this one starts; one "
            f"between stores and loads). Every thread of the block must make the call (block-wide barriers), "
            f"with tid in [0, kThreads). {still}")


TID = "unsigned tid = threadIdx.x"


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


def _convert_function(plan: ConversionPlan, conv: _Conv) -> _Fn:
    per = word_view(plan)
    fn = _Fn("convert", f"const T (&src)[kSrcRegs], T (&dst)[kDstRegs], void* smem, {TID}",
             unused=[] if plan.smem_bytes else ["smem"],
             raw_in=["U s[kSrcRegs], d[kDstRegs];", "memcpy(s, src, sizeof s);"], raw_out=["memcpy(dst, d, sizeof d);"])
    fn.doc = [f"// dst = src in the destination layout: {_one_line(plan)}.",
              "// tid: this thread's index among the kThreads threads taking part (default threadIdx.x);",
              "// smem: kSmemBytes bytes, 16-byte aligned, shared by those threads.",
              f"// {_barrier_contract(plan)}"]
    if per:
        fn.word_params = f"const uint32_t (&s)[kSrcWords], uint32_t (&d)[kDstWords], void* smem, {TID}"
        fn.word_call = ["uint32_t s[kSrcWords], d[kDstWords];", "memcpy(s, src, sizeof s);",
                        "convert_words(s, d, smem, tid);", "memcpy(dst, d, sizeof d);"]
        fn.doc += ["// convert_words: the same on packed 32-bit words -- word i holds elements",
                   f"// {per}i .. {per}i+{per - 1}, lowest first, as mma fragments keep 8/16-bit data."]
    _Builder(plan, conv, fn).build()
    return fn


def _memory_functions(plan: ConversionPlan, conv: _Conv) -> list[_Fn]:
    """store()/load() (+ the packed-word twins, + the masked forms for global tiles)."""
    m = plan.memory
    per = word_view(plan)
    store = m.direction == "store"
    regs = "const T (&src)[kRegs]" if store else "T (&dst)[kRegs]"
    words = "const uint32_t (&s)[kWords]" if store else "uint32_t (&d)[kWords]"
    raw_in = ["U s[kRegs];", "memcpy(s, src, sizeof s);"] if store else ["U d[kRegs];"]
    raw_out = [] if store else ["memcpy(dst, d, sizeof d);"]
    who = ("every thread's kRegs registers (src_index) are written to" if store
           else "every thread's kRegs registers (dst_index) are read from")
    if m.space == "shared":
        mem_t, mem_w = ("void* smem", "void* smem") if store else ("const void* smem", "const void* smem")
        params = [regs, mem_t] if store else [mem_t, regs]
        wparams = [words, mem_w] if store else [mem_w, words]
        args = "s, smem, tid" if store else "smem, d, tid"
        c = m.cost
        doc = [f"// {m.direction}(): {who} the shared tile at smem",
               "// (kTileBytes bytes, kTileAlign-byte aligned) laid out as the given layout: tile_index(offset) is",
               "// the row-major index of the element at each element offset.",
               f"// {len(m.accesses)} x {_access_name(plan)} per thread; {c.wavefronts} wavefront(s) and "
               f"{c.bank_conflicts} bank conflict(s) per warp instruction.",
               "// No barrier inside: __syncthreads() between a store() and reads of the tile by other threads.",
               "// tid: this thread's index among the kThreads threads (default threadIdx.x)."]
    else:
        mem_t = "T* tile" if store else "const T* tile"
        mem_w = "void* tile" if store else "const void* tile"
        strides = "const long long (&strides)[kRank]"
        params = [regs, mem_t, strides] if store else [mem_t, strides, regs]
        wparams = [words, mem_w, strides] if store else [mem_w, strides, words]
        args = "s, tile, strides, tid" if store else "tile, strides, d, tid"
        c = m.cost
        doc = [f"// {m.direction}(): {who} the global tile",
               "// at `tile`: element (i0, i1, ..) at tile[i0 * strides[0] + i1 * strides[1] + ..]; strides in elements,",
               "// strides[kOrder[0]] is 1 (not read); tile and every stride aligned to kAlignment bytes.",
               f"// {len(m.accesses)} x {m.vector_bytes}-byte access(es) per thread; {c.sectors} sector(s) of 32 B per "
               f"warp instruction at strides {list(m.strides)}.",
               "// tid: this thread's index among the kThreads threads (default threadIdx.x)."]
    fns = []
    fn = _Fn(m.direction, ", ".join(params + [TID]), doc=doc, raw_in=raw_in, raw_out=raw_out)
    if per:
        fn.word_params = ", ".join(wparams + [TID])
        fn.word_call = (["uint32_t s[kWords];", "memcpy(s, src, sizeof s);", f"store_words({args});"] if store
                        else ["uint32_t d[kWords];", f"load_words({args});", "memcpy(dst, d, sizeof d);"])
        fn.doc.append(f"// {m.direction}_words: the same on packed 32-bit words (word i: elements {per}i .. "
                      f"{per}i+{per - 1}, lowest first).")
    _Builder(plan, conv, fn).build()
    fns.append(fn)
    if m.space == "global":
        extent = "const int (&extent)[kRank]"
        mparams = ([regs, mem_t, "const long long (&strides)[kRank]", extent] if store
                   else [mem_t, "const long long (&strides)[kRank]", extent, regs, "T fill"])
        masked = _Fn(f"{m.direction}_masked", ", ".join(mparams + [TID]),
                     raw_in=raw_in + ([] if store else ["U fill_bits;", "memcpy(&fill_bits, &fill, sizeof fill_bits);"]),
                     raw_out=raw_out)
        masked.doc = [f"// {m.direction}_masked(): the same for a tile cut by the tensor's edge: extent[d] elements along",
                      "// dim d are valid (from the tile's origin); " + (
                          "elements beyond are not written." if store else "registers of elements beyond get `fill`.")]
        _Builder(plan, conv, masked, element_view=True).build(masked=True)
        fns.append(masked)
    return fns


def _via_functions(plan: ConversionPlan, conv: _Conv) -> list[_Fn]:
    """store()/load() of a ``via`` plan: the conversion (namespace ``via``)
    and the access in the coalesced layout (namespace ``coalesced``), both
    nested in this one, chained by two small wrappers."""
    m = plan.memory
    conv.nested = [_conversion(plan.via, "via"), _conversion(access_plan(plan), "coalesced")]
    store = m.direction == "store"
    strides = "const long long (&strides)[kRank]"
    smem_doc = ("// smem: kSmemBytes bytes of scratch for the conversion; its barriers are via::convert's "
                "(every thread of the block calls).")
    how = (f"// {m.direction}(): converts to the coalesced layout first (via::convert, {plan.via.strategy}), then "
           f"stores {m.vector_bytes}-byte vectors" if store else
           f"// {m.direction}(): loads {m.vector_bytes}-byte vectors in the coalesced layout, then converts "
           f"(via::convert, {plan.via.strategy})")
    if store:
        fns = [_Fn("store", f"const T (&src)[kRegs], T* tile, {strides}, void* smem, {TID}",
                   doc=[how + " (the planner found it cheaper than storing from these registers).", smem_doc],
                   moves=["T mid[via::kDstRegs];", "via::convert(src, mid, smem, tid);",
                          "coalesced::store(mid, tile, strides, tid);"]),
               _Fn("store_masked", f"const T (&src)[kRegs], T* tile, {strides}, const int (&extent)[kRank], "
                                   f"void* smem, {TID}",
                   doc=["// store_masked(): the same for a tile cut by the tensor's edge (see coalesced::store_masked)."],
                   moves=["T mid[via::kDstRegs];", "via::convert(src, mid, smem, tid);",
                          "coalesced::store_masked(mid, tile, strides, extent, tid);"])]
    else:
        fns = [_Fn("load", f"const T* tile, {strides}, T (&dst)[kRegs], void* smem, {TID}",
                   doc=[how + " (the planner found it cheaper than loading into these registers).", smem_doc],
                   moves=["T mid[via::kSrcRegs];", "coalesced::load(tile, strides, mid, tid);",
                          "via::convert(mid, dst, smem, tid);"]),
               _Fn("load_masked", f"const T* tile, {strides}, const int (&extent)[kRank], T (&dst)[kRegs], T fill, "
                                  f"void* smem, {TID}",
                   doc=["// load_masked(): the same for a tile cut by the tensor's edge (see coalesced::load_masked)."],
                   moves=["T mid[via::kSrcRegs];", "coalesced::load_masked(tile, strides, extent, mid, fill, tid);",
                          "via::convert(mid, dst, smem, tid);"])]
    return fns


def _copy_functions(plan: ConversionPlan, conv: _Conv) -> list[_Fn]:
    """copy() and copy_masked(): global tile -> shared tile."""
    c = plan.copy
    params = "const T* tile, const long long (&strides)[kRank], void* smem"
    how = (f"{len(c.load.accesses)} x cp.async of {c.load.vector_bytes} B per thread (asynchronous: commit(), "
           f"then wait<N>() and __syncthreads() before reading the tile)" if c.async_copy else
           f"{len(c.load.accesses)} x ({c.load.vector_bytes}-byte global load + shared store) per thread "
           f"(synchronous; commit()/wait<N>() are no-ops, kept so pipelines read the same)")
    doc = ["// copy(): the global tile at `tile` (element (i0, i1, ..) at tile[i0 * strides[0] + i1 * strides[1] + ..],",
           "// strides in elements, strides[kOrder[0]] = 1 and not read; tile and strides kAlignment-byte aligned)",
           "// into the shared tile at smem (kTileBytes bytes, kTileAlign-byte aligned, laid out as tile_index says)",
           "// by the kThreads threads:", f"// {how}.",
           f"// Per warp instruction: {c.load.cost.sectors} global sector(s) of 32 B, {c.store.cost.wavefronts} shared "
           f"wavefront(s), {c.store.cost.bank_conflicts} bank conflict(s)."]
    fn = _Fn("copy", f"{params}, {TID}", doc=doc)
    _Builder(plan, conv, fn, element_view=True).build()
    masked = _Fn("copy_masked", f"{params}, const int (&extent)[kRank], {TID}",
                 doc=["// copy_masked(): the same for a tile cut by the tensor's edge: extent[d] elements along dim d",
                      "// are valid (from the tile's origin); the shared tile holds zeros beyond them."])
    _Builder(plan, conv, masked, element_view=True).build(masked=True)
    return [fn, masked]


def _access_name(plan: ConversionPlan) -> str:
    m = plan.memory
    name = instruction_name(plan.target, m.instr, m.direction, m.vec * plan.elem_bytes)
    if m.instr.startswith("matrix"):
        return f"{name} (m8n8.x{m.vec * plan.elem_bytes // 4})"
    return f"{m.vector_bytes}-byte {name}"


INDEX_COMMENT = ["// Row-major index of the element that register `reg` of `lane` in `warp` holds (src_index: in the",
                 "// registers the call reads, dst_index: in the registers it writes): in[src_index(r, lane, warp)] is src[r]."]


def tile_index_function(tile: LinearLayout) -> str:
    """``__host__ __device__ constexpr int tile_index(int offset)``: the
    row-major index of the element at element ``offset`` of a shared tile."""
    coefs = row_major_bases(tile, "offset")
    body = linear_expr(coefs, "offset", len(coefs)) or "0"
    return (f"__host__ __device__ constexpr int tile_index(int offset) "
            f"{{ return (void)offset, {body}; }}")


def _conversion(plan: ConversionPlan, name: str) -> _Conv:
    if plan.target not in ("cuda", "hip"):
        raise ValueError(f"unknown target {plan.target!r}")
    conv = _Conv(name=name, cuda=plan.target == "cuda", elem_bytes=plan.elem_bytes, raw=RAW_TYPES[plan.elem_bytes])
    per = word_view(plan)
    conv.constants = _constants(plan, (plan.n_src // per, plan.n_dst // per) if per else None)
    m = plan.memory
    if plan.copy is not None:
        conv.functions = _copy_functions(plan, conv)
        conv.copy_groups = plan.copy.async_copy
        conv.index_functions = ["// Row-major index of the element at element offset `offset` of the shared tile.",
                                 tile_index_function(layout_of(plan.dst_bases))]
        return conv
    if m is None:
        conv.functions = [_convert_function(plan, conv)]
        conv.index_functions = INDEX_COMMENT + [index_function("src_index", layout_of(plan.src_bases)),
                                                index_function("dst_index", layout_of(plan.dst_bases))]
        return conv
    conv.functions = _memory_functions(plan, conv) if plan.via is None else _via_functions(plan, conv)
    dist, tile = (plan.src_bases, plan.dst_bases) if m.direction == "store" else (plan.dst_bases, plan.src_bases)
    conv.index_functions = INDEX_COMMENT + [index_function("src_index" if m.direction == "store" else "dst_index",
                                                           layout_of(dist))]
    if m.space == "shared":
        conv.index_functions.append(tile_index_function(layout_of(tile)))
    return conv


# ------------------------------------------------------------- thread I/O
def _io(layout: LinearLayout, plan: ConversionPlan, var: str, decls: list[str]) -> tuple[str, list[str]]:
    """(index declaration, per-register index expressions) of the row-major
    global tensor; adds the ``lane``/``warp`` declarations it needs to ``decls``."""
    form, consts = row_major_form(layout)
    lane_bits, warp_bits = plan.warp_size.bit_length() - 1, plan.num_warps.bit_length() - 1
    e = xor_form_expr(form, lane_bits, warp_bits)
    for v, d in (("lane", "const unsigned lane = threadIdx.x & (kWarpSize - 1);"),
                 ("warp", "const unsigned warp = threadIdx.x / kWarpSize;")):
        if v in e and d not in decls:
            decls.append(d)
    decls.sort(key=lambda d: "warp" in d.split("=")[0])
    sup = form.support
    return f"const unsigned {var} = {e};", [address_expr(var, c, sup) for c in consts]


def _comment(text: str) -> list[str]:
    return [("// " + line).rstrip() for line in text.splitlines()]


def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), keep_trailing_newline=True,
                              trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined,
                              autoescape=False)


def render(plan: ConversionPlan, kind: str, name: str, command: str = "",
           src_layout_text: str | None = None, dst_layout_text: str | None = None,
           back_plan: ConversionPlan | None = None) -> str:
    """Source text of one generated file.

    ``kind``: ``header`` (the ``convert()``, or ``store()``/``load()``, device
    functions), ``harness`` (one CTA moving a row-major tensor through them,
    for bit-exact checks) or ``bench``
    (needs ``back_plan``, the dst -> src plan).  ``command`` and the layout texts
    go into the header's opening comment (layouts default to their Triton-style
    dump).  Deterministic: the same arguments give the same text."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r} (known: {', '.join(KINDS)})")
    if not name.isidentifier():
        raise ValueError(f"name {name!r} is not a C identifier")
    src, dst = layout_of(plan.src_bases), layout_of(plan.dst_bases)
    cuda = plan.target == "cuda"
    names = file_names(plan.target, name)
    ctx = dict(name=name, cuda=cuda, raw=RAW_TYPES[plan.elem_bytes], header_file=names["header"],
               conv=_conversion(plan, name))
    if kind == "header":
        def what(n: int, side: str) -> str:
            if plan.memory is not None and n == 0:
                return f"{side} layout ({plan.memory.space} memory tile)"
            return f"{side} layout ({n} registers x {plan.warp_size} lanes x {plan.num_warps} warps)"
        ctx["comment"] = _comment(
            f"Generated by ll_codegen. Do not edit.\n"
            f"Command: {command or '(library call)'}\n\n"
            f"{what(plan.n_src, 'Source')}:\n"
            f"{src_layout_text if src_layout_text is not None else repr(src)}\n\n"
            f"{what(plan.n_dst, 'Destination')}:\n"
            f"{dst_layout_text if dst_layout_text is not None else repr(dst)}\n\n"
            "Plan:\n" + "\n".join("  " + line for line in _summary_lines(plan)))
        return _env().get_template("header.cuh.j2").render(**ctx)
    tile = 1
    for s in plan.shape:
        tile *= s
    ctx["tile_elems"] = tile
    ctx["thread_decls"] = decls = []
    if kind == "harness":
        m = plan.copy.load if plan.copy is not None else plan.memory
        mode = "copy" if plan.copy is not None else "convert" if m is None else f"{m.direction}_{m.space}"
        ctx.update(mode=mode, variants=harness_variants(plan),
                   smem_bytes=plan.smem_bytes, scratch_bytes=plan.scratch_bytes, strides=[], extent=[], fill="0",
                   shape=list(plan.shape), plan_strides=list(m.strides) if m is not None else [],
                   via_arg=", smem" if plan.via is not None else "")
        if m is not None and m.space == "global":
            ctx.update(strides=list(harness_strides(plan.shape, m.layout["order"], m.alignment, plan.elem_bytes)),
                       extent=list(harness_cut(plan.shape)), fill=_hex(harness_fill(plan.elem_bytes)))
        return _env().get_template("harness.cu.j2").render(**ctx)
    if back_plan is None:
        raise ValueError("the bench needs back_plan (the destination -> source plan)")
    if (back_plan.n_src, back_plan.n_dst, back_plan.elem_bytes, back_plan.threads, back_plan.target) != \
            (plan.n_dst, plan.n_src, plan.elem_bytes, plan.threads, plan.target):
        raise ValueError("back_plan is not the reverse of plan (registers, element size, threads or target differ)")
    ctx["back"] = _conversion(back_plan, f"{name}_back")
    buffer, ctx["smem_bytes"] = bench_smem(plan, back_plan)
    ctx["buffer_bytes"] = buffer
    ctx["back_offset"] = f" + {buffer}" if ctx["smem_bytes"] > buffer else ""
    ctx["src_idx"], ctx["src_at"] = _io(src, plan, "src_idx", decls)
    # 8/16-bit elements: the loop keeps packed words and calls convert_words;
    # the per-iteration change x ^= k then xors k into every element of a word
    ctx["xor_words"] = bool(word_view(plan) and word_view(back_plan))
    ctx["xor_splat"] = {1: "(static_cast<uint32_t>(k) & 0xffu) * 0x01010101u",
                        2: "(static_cast<uint32_t>(k) & 0xffffu) * 0x00010001u"}.get(plan.elem_bytes, "")
    return _env().get_template("bench.cu.j2").render(**ctx)


def bench_smem(plan: ConversionPlan, back_plan: ConversionPlan) -> tuple[int, int]:
    """(bytes of one scratch buffer, dynamic shared memory of the bench launch): two buffers, the
    forward conversion in the first and the reverse one in the second, when either plan
    alternates scratch buffers (``SmemPlan.buffers == 2``)."""
    buffer = max(plan.smem_bytes, back_plan.smem_bytes)
    if not any(p.smem is not None and p.smem.buffers == 2 for p in (plan, back_plan)):
        return buffer, buffer
    buffer = -(-buffer // 16) * 16            # the second buffer 16-byte aligned, as the first
    return buffer, 2 * buffer


def write_files(plan: ConversionPlan, directory: str, name: str, emit: Sequence[str] = ("header", "harness"),
                command: str = "", src_layout_text: str | None = None, dst_layout_text: str | None = None,
                back_plan: ConversionPlan | None = None) -> list[str]:
    """Render ``emit`` kinds into ``directory`` (all rendered before any is
    written; all written or none, ``files.write_all``); returns the written paths."""
    names = file_names(plan.target, name)
    texts = {names[k]: render(plan, k, name, command, src_layout_text, dst_layout_text, back_plan) for k in emit}
    return write_all({os.path.join(directory, fname): text for fname, text in texts.items()}, make_dirs=True)
