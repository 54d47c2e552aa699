"""What every register <-> memory operation's rendering shares: the plain data
the templates take, the namespace constants, and the body builder's machinery.

``Namespace`` (one generated C++ namespace) and ``Fn`` (one device function)
are plain data for ``templates/namespace.j2``.  ``Builder`` builds one
function's body on the raw bits of the elements: ``s[]`` (the registers it
reads) and ``d[]`` (the registers it writes), or in the word view (8/16-bit
elements) 32-bit words of packed elements, so an access whose elements are a
whole word moves it untouched and the others cost one byte permute per word.
Thread-dependent values are XorForms over (lane, warp), computed once in the
prologue; an access at ``base ^ offset`` becomes ``base + offset`` (an
immediate) when the offset's bits are disjoint from the base's support.  The
operations' builders (``convert.py``, ``memory.py``, ``copy.py``) subclass it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from ll_codegen.core.dtypes import C_RAW, is_packed
from ll_codegen.core.layout import layout_of
from ll_codegen.emit.cexpr import (address_expr, aligned, comment_lines, compose_word, hex_const, pack_words,
                                   parity_expr, signature, strip_parens, unpack_elems, xor_form_expr)
from ll_codegen.emit.instructions import Instruction, memory
from ll_codegen.plan.model import LaneSelect, XorForm, word_view
from ll_codegen.plan.packed import side_bytes, side_pair
from ll_codegen.plan.plans import Transfer
from ll_codegen.emit.harness_tiles import (global_access, harness_cut, harness_fill, harness_strides, harness_tile,
                                          harness_variants, scratch_bytes)

#: the last parameter of every generated device function
TID = "unsigned tid = threadIdx.x"

INDEX_COMMENT = ["// Row-major index of the element that register `reg` of `lane` in `warp` holds (src_index: in the",
                 "// registers the call reads, dst_index: in the registers it writes): in[src_index(r, lane, warp)] is src[r]."]


@dataclass
class Fn:
    """One generated device function (plain data for ``namespace.j2``): its
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
class Namespace:
    """Plain data for one generated namespace (the ``namespace.j2`` macro's argument)."""
    name: str
    cuda: bool
    elem_bytes: int
    raw: str
    constants: list[str] = field(default_factory=list)
    index_functions: list[str] = field(default_factory=list)   # src_index / dst_index / tile_index
    functions: list[Fn] = field(default_factory=list)
    vector_types: list[tuple[str, int]] = field(default_factory=list)
    instructions: list[Instruction] = field(default_factory=list)   # the target instructions its code calls
    uses_smem_ptr: bool = False
    warp_sync: bool = False                # HIP: detail::warp_sync(), a wavefront-scope barrier
    byte_perm: bool = False                # HIP: detail::byte_perm(), v_perm_b32 with a per-lane selector
    uses_global_ptr: bool = False
    copy_groups: bool | None = None        # copy plans: commit()/wait<N>() (True: cp.async groups)
    nested: list["Namespace"] = field(default_factory=list)   # via plans: namespaces via and coalesced


def use_instruction(conv: Namespace, instr: Instruction) -> str:
    """``detail::<name>`` of an instruction's wrapper, recorded in ``conv`` (its detail namespace
    defines each once, by name)."""
    if instr not in conv.instructions:
        conv.instructions.append(instr)
        conv.instructions.sort(key=lambda i: i.name)
    return f"detail::{instr.name}"


def check_target(plan: Transfer) -> None:
    """ValueError unless the plan is for a target this stage renders."""
    if plan.target not in ("cuda", "hip"):
        raise ValueError(f"unknown target {plan.target!r}")


def new_namespace(plan: Transfer, name: str) -> Namespace:
    """An empty namespace ``name`` for ``plan``'s element type and target."""
    check_target(plan)
    return Namespace(name=name, cuda=plan.target == "cuda", elem_bytes=plan.elem_bytes, raw=C_RAW[plan.elem_bytes])


def constants(plan: Transfer, head: list[tuple[str, str]], tail: list[tuple[str, str]] = (),
              unused: bool = False) -> list[str]:
    """The namespace's constexpr lines: the operation's own ``head`` rows, the
    rows every namespace has (threads, element size, shape), then ``tail``;
    comments aligned in one column over all of them.  ``unused``: each marked
    ``__attribute__((unused))`` (a nested step's, which callers need not read)."""
    p = plan
    shape = ", ".join(map(str, p.shape))
    rows = list(head) + [
        (f"constexpr int kThreads   = {p.threads};", "threads taking part: tid in [0, kThreads)"),
        (f"constexpr int kWarpSize  = {p.warp_size};", ""),
        (f"constexpr int kElemBytes = {p.elem_bytes};", f"sizeof(T) ({p.dtype})" if not is_packed(p.dtype) else
         f"sizeof(T): one byte, two {p.dtype} elements (low nibble first)"),
        (f"constexpr int kRank      = {len(p.shape)};", ""),
        (f"__attribute__((unused)) constexpr int kShape[kRank] = {{{shape}}};", "the tensor (row-major)")]
    rows += list(tail)
    if unused:
        rows = [(c if c.startswith("__attribute__") else f"__attribute__((unused)) {c}", why) for c, why in rows]
    return aligned(rows)


def path_name(vector_bytes: int) -> str:
    """The nested namespace of one run-time alignment path: ``a<vector bytes>``."""
    return f"a{vector_bytes}"


def alignment_dispatch(plan: Transfer, paths: Sequence[tuple[int, str]],
                       forms: Sequence[tuple[str, str, str]], smem_doc: str = "") -> list[Fn]:
    """The public functions of a global store/load/copy with run-time alignment
    paths (``plan.paths``; the paths' own functions are nested namespaces
    ``a<v>``): each reads the alignment of the tile pointer and of every stride
    but the contiguous dim's (the same in every thread) and calls the first
    path, widest first, whose ``v``-byte vectors it allows; the last path is
    the promise and needs no test.  ``paths``: (v, its cost in words) per path;
    ``forms``: (function, its parameters before ``tid``, the arguments)."""
    f = global_access(plan).layout["order"][0]
    bits = " | ".join(["reinterpret_cast<unsigned long long>(tile)"] +
                      [f"static_cast<unsigned long long>(strides[{d}]) * kElemBytes"
                       for d in range(len(plan.shape)) if d != f])
    costs = "; ".join(f"{path_name(v)}: {cost}" for v, cost in paths)
    fns = []
    for k, (fname, params, args) in enumerate(forms):
        lines = [f"const unsigned long long align = {bits};  // the same in every thread"]
        for j, (v, _) in enumerate(paths):
            call = f"{path_name(v)}::{fname}({args}, tid);"
            last = j == len(paths) - 1
            lines.append(("else " if j else "") + (call if last else f"if (align % {v} == 0) {call}"))
        doc = ([f"// {fname}(): run-time alignment -- the tile pointer and the strides (but strides[kOrder[0]]) "
                f"pick the widest path their alignment allows (kAlignment bytes are promised): {costs}."]
               + ([smem_doc] if smem_doc else [])
               + ["// tid: this thread's index among the kThreads threads (default threadIdx.x)."] if k % 2 == 0 else
               [f"// {fname}(): the same for a tile cut by the tensor's edge (see each path's {fname})."])
        fns.append(Fn(fname, f"{params}, {TID}", doc=doc, moves=lines))
    return fns


def word_counts(plan: Transfer) -> tuple[int, int] | None:
    """(source, destination) packed 32-bit words in the word view; None without it."""
    per = word_view(plan)
    return (plan.n_src // per, plan.n_dst // per) if per else None


def _summary_lines(plan: Transfer, text: str) -> list[str]:
    lines = text.splitlines()
    if plan.strategy in ("smem", "shuffle+smem"):
        lines.insert(2, f"  widest access tile: {plan.smem.vector_bytes} bytes")
    return lines


def header_context(plan: Transfer, conv: Namespace, command: str, src_text: str | None,
                   dst_text: str | None, summary: str) -> dict:
    """Template values of a header (``header.cuh.j2``): the namespace and the
    opening comment (command, both layouts, the plan's ``summary``)."""
    def what(n: int, side: str) -> str:
        if plan.operation in ("store", "load") and n == 0:
            return f"{side} layout ({plan.memory.space} memory tile)"
        if plan.operation == "relayout":
            return f"{side} layout (shared memory tile)"
        n = 2 * n if plan.packing is not None else n          # the 4-bit layout's registers: one element each
        return f"{side} layout ({n} registers x {plan.warp_size} lanes x {plan.num_warps} warps)"
    src, dst = layout_of(plan.src_bases), layout_of(plan.dst_bases)
    comment = comment_lines(
        f"Generated by ll_codegen. Do not edit.\n"
        f"Command: {command or '(library call)'}\n\n"
        f"{what(plan.n_src, 'Source')}:\n"
        f"{src_text if src_text is not None else repr(src)}\n\n"
        f"{what(plan.n_dst, 'Destination')}:\n"
        f"{dst_text if dst_text is not None else repr(dst)}\n\n"
        + (packing_text(plan) if plan.packing is not None else "")
        + "Plan:\n" + "\n".join("  " + line for line in _summary_lines(plan, summary)))
    return dict(conv=conv, comment=comment)


def element_unit(plan: Transfer) -> str:
    """What a register of ``plan`` holds, as its header counts them: elements, or for a packed
    4-bit plan bytes of two elements."""
    return f"bytes (two {plan.dtype} elements each)" if is_packed(plan.dtype) else "elements"


def packing_text(plan: Transfer) -> str:
    """The header paragraph of a packed plan: what its registers and tiles hold, each side's packed
    tensor (the one its index function indexes), and the byte layouts as the caller holds them."""
    k = plan.packing

    def side(name: str, role: str) -> str:
        d, b = side_pair(k, name)
        shape = [s // 2 if i == d else s for i, s in enumerate(k.shape)]
        return (f"The {role}'s packed tensor: shape {shape}, byte y holding the two elements that differ in bit {b} of "
                f"dim {d}\n(clear: low nibble, set: high nibble).\n")
    return (f"Packed {k.dtype} (4-bit elements, two per byte): both layouts above are in elements. Every function\n"
            f"here moves whole bytes (T is a 1-byte type): kSrcRegs, kDstRegs and kRegs count bytes, byte i of a\n"
            f"thread holding its elements 2i (low nibble) and 2i+1 (high nibble), as register basis 0 pairs them;\n"
            f"a tile's offsets and strides count bytes (element offset o is byte o >> 1, nibble o & 1).\n"
            + side("src", "source") + side("dst", "destination")
            + f"src_index/dst_index/tile_index index these packed tensors; kShape is the byte plan's "
              f"({list(k.packed_shape)}).\n"
            + "".join(f"{line.strip()}\n" for line in k.lines()[:-2])
            + f"\nSource bytes (as the caller holds them):\n{side_bytes(k, 'src')!r}\n\n"
            f"Destination bytes (as the caller holds them):\n{side_bytes(k, 'dst')!r}\n\n")


def header_values(namespace: Callable[[Transfer, str], "Namespace"],
                  summary: Callable[[Transfer], str]) -> Callable[..., dict]:
    """The ``header`` entry of an operation's file table: the values of ``header.cuh.j2``
    for the namespace that ``namespace(plan, name)`` builds, with the operation's ``summary``."""
    def header(plan: Transfer, name: str, command: str = "", src_text: str | None = None,
               dst_text: str | None = None, back_plan: Transfer | None = None) -> dict:
        return header_context(plan, namespace(plan, name), command, src_text, dst_text, summary(plan))
    return header


def harness_context(plan: Transfer, tile) -> dict:
    """Template values of a harness (``harness_base.cu.j2``): one CTA moving the
    row-major tensor through the generated function(s); ``tile`` is the
    operation's global or shared tile plan (None for a conversion), whose
    strides and edge cut the masked variants use."""
    check_target(plan)
    elems = 1
    for s in plan.shape:
        elems *= s
    ctx = dict(tile_elems=elems, variants=harness_variants(plan), smem_bytes=plan.smem_bytes,
               scratch_bytes=scratch_bytes(plan), strides=[], extent=[], fill="0", shape=list(plan.shape),
               plan_strides=list(tile.strides) if tile is not None else [],
               shared=tile is not None and tile.space == "shared",
               # a store/load harness passes smem to a via plan and to every global access (a direct
               # plan leaves it alone); no other harness reads via_arg
               via_arg=", smem" if plan.operation in ("store", "load") and (
                   plan.via is not None or tile.space == "global") else "")
    if tile is not None and tile.space == "global":
        ctx.update(strides=list(harness_strides(plan.shape, tile.layout["order"], tile.alignment, plan.elem_bytes)),
                   tiles={v: harness_tile(plan, v) for v in ctx["variants"]},
                   extent=list(harness_cut(plan.shape)), fill=hex_const(harness_fill(plan.elem_bytes)))
    return ctx


class Builder:
    """Builds the body of one device function (``fn``) from a plan; the
    target instructions and vector types it uses are recorded in ``conv``.
    Subclasses add ``build()`` for their operation."""

    def __init__(self, plan: Transfer, conv: Namespace, fn: Fn, element_view: bool = False):
        self.p = plan
        self.conv, self.fn = conv, fn
        self.cuda = plan.target == "cuda"
        self.lane_bits = plan.warp_size.bit_length() - 1
        self.warp_bits = plan.num_warps.bit_length() - 1
        self.raw = C_RAW[plan.elem_bytes]
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
        self.perm_names: dict[tuple, str] = {}           # (select bits, selectors) -> prologue constant

    # thread indices -------------------------------------------------------
    def form(self, f: XorForm) -> str:
        e = xor_form_expr(f, self.lane_bits, self.warp_bits)
        if "lane" in e:
            self.needs.add("lane")
        if "warp" in e:
            self.needs.add("warp")
        return e

    def select_bits(self, sel: LaneSelect) -> list[str]:
        """Prologue constants of the select bits: parities of the lane, or of the thread index
        ``tid = lane + kWarpSize * warp`` for a mask reaching the warp bits (warp-uniform terms)."""
        names = []
        for m in sel.masks:
            if m not in self.sel_names:
                n = f"sel{len(self.sel_names)}"
                self.sel_names[m] = n
                var = "lane" if m >> self.lane_bits == 0 else "tid"
                self.sel_lines.append((f"const unsigned {n} = {parity_expr(m, var)};",
                                       f"parity of {var} & {hex_const(m)}"))
                self.needs.add(var)
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

    # addresses ---------------------------------------------------------------
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
                rows.append((f"const unsigned c{d} = {strip_parens(e)};", f"this thread's coordinate along dim {d}"))
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
                xored = [f"({coord[d] or '0u'} ^ {hex_const(c)}u)" if c else coord[d] for d, c in enumerate(a.coords)]
                ptr = f"{cast} + {offset(xored)}"
            first = []
            for d, (c, base) in enumerate(zip(a.coords, coord)):
                base = base or "0u"
                e = base if not c else (f"({base} + {c}u)" if c & sup[d] == 0 else f"({base} ^ {hex_const(c)}u)")
                first.append(e)
            inside = [f"static_cast<int>({e}) < extent[{d}]" for d, e in enumerate(first) if d != f and e != "0u"]
            out.append({"ptr": ptr, "fe": first[f], "inside": " && ".join(inside) or "true"})
        return rows, out

    def skip_broadcast(self, lines: list[str], m) -> list[str]:
        """``lines`` under the guard that lets threads holding broadcast copies (``m.lane_skip``,
        ``m.warp_skip``) skip their stores."""
        conds = []
        if m.lane_skip:
            conds.append(f"(lane & {hex_const(m.lane_skip)}) == 0")
            self.needs.add("lane")
        if m.warp_skip:
            conds.append(f"(warp & {hex_const(m.warp_skip)}) == 0")
            self.needs.add("warp")
        if not conds:
            return lines
        return [f"if ({' && '.join(conds)}) {{  // threads holding broadcast copies skip"] + ["    " + x for x in lines] + ["}"]

    # accesses ----------------------------------------------------------------
    def width(self, instr: str, vec: int) -> str:
        if instr.startswith("matrix"):
            x = vec * self.p.elem_bytes // 4
            return f"m8n8.x{x}{'.trans' if instr.endswith('trans') else ''} matrices"
        return f"{vec * self.p.elem_bytes} B"

    def vec_type(self, nbytes: int) -> str:
        if nbytes < 4:
            return C_RAW[nbytes]
        if nbytes == 4:
            return "uint32_t"
        n = nbytes // 4
        t = f"u32x{n}"
        if (t, n) not in self.conv.vector_types:
            self.conv.vector_types.append((t, n))
            self.conv.vector_types.sort()
        return f"detail::{t}"

    def intrinsic(self, op: str, nbytes: int = 0, x: int = 0, trans: bool = False) -> str:
        """Name of a memory instruction's wrapper (``emit/instructions.memory``), recorded as used."""
        return use_instruction(self.conv, memory(op, nbytes, x, trans))

    def store(self, a, instr: str, vec: int, support: int, k: int) -> str:
        """One planned shared-memory store of source registers ``a.regs`` at ``base ^ a.offset``."""
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
        """One planned shared-memory load into ``name``: (the load line, the lines unpacking it into d[])."""
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
        """Generic pointer to ``base ^ offset``: ``st_ptr + imm`` when the bits are disjoint, else
        ``(base ^ (offset & support)) + (offset & ~support)`` (see ``u32_addr``)."""
        if offset & support == 0:
            self.needs.add(f"{side}_ptr")
            return address_expr(f"{side}_ptr", offset, support)
        self.needs.add("smem_bytes")
        rest = offset & ~support
        return (f"smem_bytes + ({address_expr(f'{side}_base', offset & support, support)})"
                + (f" + {hex_const(rest)}" if rest else ""))

    def u32_addr(self, side: str, offset: int, support: int) -> tuple[str, int]:
        """(register operand, immediate byte offset) of the 32-bit shared address ``base ^ offset``.
        ``base`` has no bits outside ``support``, so ``base ^ offset = (base ^ (offset & support)) +
        (offset & ~support)``: only the xor with the overlapping bits needs a register, the rest is the
        immediate -- accesses whose offsets differ outside ``support`` share one address register."""
        self.needs.add("smem_u32")
        if offset & support == 0:
            self.needs.add(f"{side}_addr")
            return f"{side}_addr", offset
        return f"smem_u32 + ({address_expr(f'{side}_base', offset & support, support)})", offset & ~support

