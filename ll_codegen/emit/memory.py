"""Render a store or a load between registers and a memory tile
(``plan.operation`` ``"store"`` / ``"load"``): ``store()``/``load()``, their
packed-word twins and, for a global tile, the masked forms; the harness.

The tile is either shared (a layout over the byte ``offset``: every access at
``base ^ offset`` with the thread's base a XorForm over (lane, warp), no
barrier inside -- the caller orders the tile's other users) or global (an
``order`` of dims and runtime strides: the thread's coordinates are XorForms,
its first element one pointer, every access a constant byte step from it when
the bits are disjoint).  The masked forms test ``extent`` per vector and fall
back to element by element where the edge cuts one.  A ``via`` plan converts
first (nested namespace ``via``, a conversion) and accesses a coalesced layout
(nested namespace ``coalesced``), chained by two small wrappers.
"""
from __future__ import annotations

from dataclasses import replace

from ll_codegen.core.layout import layout_of
from ll_codegen.emit.body import (INDEX_COMMENT, TID, Builder, Fn, Namespace, alignment_dispatch, constants,
                                  element_unit, harness_context, header_values, new_namespace, path_name,
                                  word_counts)
from ll_codegen.emit.cexpr import aligned, hex_const, index_function, tile_index_function
from ll_codegen.emit.packed import repacked_namespace
from ll_codegen.emit.convert import namespace as convert_namespace
from ll_codegen.plan.model import instruction_name, word_view
from ll_codegen.plan.plans import Transfer, without_via
from ll_codegen.plan.report import memory_summary
from ll_codegen.plan.tma import align_reason

SMEM = "void* smem"  # the scratch parameter of every global store()/load() (kSmemBytes may be 0)


class MemoryBuilder(Builder):
    """The body of ``store()``/``load()`` (``masked``: ``store_masked()``/``load_masked()``)."""

    def build(self, masked: bool = False) -> Fn:
        p = self.p
        if p.memory.space == "shared":
            self.memory_shared()
        else:
            self.memory_global(masked)
        if p.memory.direction == "load" and not self.per:
            self.fn.copies = aligned((f"d[{a}] = d[{b}];", "broadcast copy") for a, b in p.dst_copies)
        return self.fn

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
                lines = ([f"if ((warp & {hex_const(m.warp_skip)}) == 0) {{  // warps holding broadcast copies skip"]
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


def memory_functions(plan: Transfer, conv: Namespace) -> list[Fn]:
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
               f"// {len(m.accesses)} x {access_name(plan)} per thread; {c.wavefronts} wavefront(s) and "
               f"{c.bank_conflicts} bank conflict(s) per warp instruction.",
               "// No barrier inside: __syncthreads() between a store() and reads of the tile by other threads.",
               "// tid: this thread's index among the kThreads threads (default threadIdx.x)."]
    else:
        mem_t = "T* tile" if store else "const T* tile"
        mem_w = "void* tile" if store else "const void* tile"
        strides = "const long long (&strides)[kRank]"
        # `smem` in every global store/load, used or not: a via plan needs scratch, a direct one does
        # not (kSmemBytes 0), and the call site must not change with what the planner picked
        params = [regs, mem_t, strides, SMEM] if store else [mem_t, strides, regs, SMEM]
        wparams = [words, mem_w, strides] if store else [mem_w, strides, words]
        args = "s, tile, strides, tid" if store else "tile, strides, d, tid"
        c = m.cost
        doc = [f"// {m.direction}(): {who} the global tile",
               "// at `tile`: element (i0, i1, ..) at tile[i0 * strides[0] + i1 * strides[1] + ..]; strides in elements,",
               "// strides[kOrder[0]] is 1 (not read); tile and every stride aligned to kAlignment bytes.",
               f"// {len(m.accesses)} x {m.vector_bytes}-byte access(es) per thread; {c.sectors} sector(s) of 32 B per "
               f"warp instruction at strides {list(m.strides)}.",
               "// smem: unused (kSmemBytes is 0; the parameter keeps one signature for every plan of a store/load).",
               "// tid: this thread's index among the kThreads threads (default threadIdx.x)."]
        raw_in = ["(void)smem;"] + raw_in
    fns = []
    fn = Fn(m.direction, ", ".join(params + [TID]), doc=doc, raw_in=raw_in, raw_out=raw_out)
    if per:
        fn.word_params = ", ".join(wparams + [TID])
        fn.word_call = (["uint32_t s[kWords];", "memcpy(s, src, sizeof s);", f"store_words({args});"] if store
                        else ["uint32_t d[kWords];", f"load_words({args});", "memcpy(dst, d, sizeof d);"])
        fn.doc.append(f"// {m.direction}_words: the same on packed 32-bit words (word i: elements {per}i .. "
                      f"{per}i+{per - 1}, lowest first).")
    MemoryBuilder(plan, conv, fn).build()
    fns.append(fn)
    if m.space == "global":
        extent = "const int (&extent)[kRank]"
        mparams = ([regs, mem_t, "const long long (&strides)[kRank]", extent, SMEM] if store
                   else [mem_t, "const long long (&strides)[kRank]", extent, regs, "T fill", SMEM])
        masked = Fn(f"{m.direction}_masked", ", ".join(mparams + [TID]),
                    raw_in=raw_in + ([] if store else ["U fill_bits;", "memcpy(&fill_bits, &fill, sizeof fill_bits);"]),
                    raw_out=raw_out)
        masked.doc = [f"// {m.direction}_masked(): the same for a tile cut by the tensor's edge: extent[d] elements along",
                      "// dim d are valid (from the tile's origin); " + (
                          "elements beyond are not written." if store else "registers of elements beyond get `fill`.")]
        MemoryBuilder(plan, conv, masked, element_view=True).build(masked=True)
        fns.append(masked)
    return fns


def via_functions(plan: Transfer, conv: Namespace) -> list[Fn]:
    """store()/load() of a ``via`` plan: the conversion (namespace ``via``)
    and the access in the coalesced layout (namespace ``coalesced``), both
    nested in this one, chained by two small wrappers."""
    m = plan.memory
    conv.nested = [convert_namespace(plan.via, "via"), namespace(without_via(plan), "coalesced")]
    store = m.direction == "store"
    strides = "const long long (&strides)[kRank]"
    smem_doc = ("// smem: kSmemBytes bytes of scratch for the conversion; its barriers are via::convert's "
                "(every thread of the block calls).")
    how = (f"// {m.direction}(): converts to the coalesced layout first (via::convert, {plan.via.strategy}), then "
           f"stores {m.vector_bytes}-byte vectors" if store else
           f"// {m.direction}(): loads {m.vector_bytes}-byte vectors in the coalesced layout, then converts "
           f"(via::convert, {plan.via.strategy})")
    if store:
        fns = [Fn("store", f"const T (&src)[kRegs], T* tile, {strides}, {SMEM}, {TID}",
                  doc=[how + " (the planner found it cheaper than storing from these registers).", smem_doc],
                  moves=["T mid[via::kDstRegs];", "via::convert(src, mid, smem, tid);",
                         "coalesced::store(mid, tile, strides, smem, tid);"]),
               Fn("store_masked", f"const T (&src)[kRegs], T* tile, {strides}, const int (&extent)[kRank], "
                                  f"{SMEM}, {TID}",
                  doc=["// store_masked(): the same for a tile cut by the tensor's edge (see coalesced::store_masked)."],
                  moves=["T mid[via::kDstRegs];", "via::convert(src, mid, smem, tid);",
                         "coalesced::store_masked(mid, tile, strides, extent, smem, tid);"])]
    else:
        fns = [Fn("load", f"const T* tile, {strides}, T (&dst)[kRegs], {SMEM}, {TID}",
                  doc=[how + " (the planner found it cheaper than loading into these registers).", smem_doc],
                  moves=["T mid[via::kSrcRegs];", "coalesced::load(tile, strides, mid, smem, tid);",
                         "via::convert(mid, dst, smem, tid);"]),
               Fn("load_masked", f"const T* tile, {strides}, const int (&extent)[kRank], T (&dst)[kRegs], T fill, "
                                 f"{SMEM}, {TID}",
                  doc=["// load_masked(): the same for a tile cut by the tensor's edge (see coalesced::load_masked)."],
                  moves=["T mid[via::kSrcRegs];", "coalesced::load_masked(tile, strides, extent, mid, fill, smem, tid);",
                         "via::convert(mid, dst, smem, tid);"])]
    return fns


def access_name(plan: Transfer) -> str:
    """The instruction of a shared tile's accesses as the doc comment names it."""
    m = plan.memory
    name = instruction_name(plan.target, m.instr, m.direction, m.vec * plan.elem_bytes)
    if m.instr.startswith("matrix"):
        return f"{name} (m8n8.x{m.vec * plan.elem_bytes // 4})"
    return f"{m.vector_bytes}-byte {name}"


def dispatch_functions(plan: Transfer, conv: Namespace) -> list[Fn]:
    """store()/load() (and the masked forms) of a plan with run-time alignment
    paths (``body.alignment_dispatch``), each path a nested namespace."""
    conv.nested = [namespace(p, path_name(p.memory.vector_bytes)) for p in (replace(plan, paths=()), *plan.paths)]
    strides = "const long long (&strides)[kRank]"
    forms = ([("store", f"const T (&src)[kRegs], T* tile, {strides}", "src, tile, strides"),
              ("store_masked", f"const T (&src)[kRegs], T* tile, {strides}, const int (&extent)[kRank]",
               "src, tile, strides, extent")] if plan.memory.direction == "store" else
             [("load", f"const T* tile, {strides}, T (&dst)[kRegs]", "tile, strides, dst"),
              ("load_masked", f"const T* tile, {strides}, const int (&extent)[kRank], T (&dst)[kRegs], T fill",
               "tile, strides, extent, dst, fill")])
    paths = [(p.memory.vector_bytes, f"{p.memory.vector_bytes}-byte vectors{' via ' + p.via.strategy if p.via else ''}"
              f", {p.memory.cost.sectors} sectors/instr") for p in (plan, *plan.paths)]
    return alignment_dispatch(plan, paths, [(n, f"{ps}, {SMEM}", f"{a}, smem") for n, ps, a in forms],
                              "// smem: kSmemBytes of scratch (paths that convert first use it; every thread of "
                              "the block calls).")


def namespace(plan: Transfer, name: str) -> Namespace:
    """The generated namespace of a store or load: constants, the index
    functions of the registers (and of a shared tile), the functions; a packed plan that
    repacks nibbles in registers, the byte plan wrapped (``emit/packed.py``)."""
    if plan.packing is not None and plan.packing.repacks:
        return repacked_namespace(plan, name, namespace)
    conv = new_namespace(plan, name)
    p, m = plan, plan.memory
    head = [(f"constexpr int kRegs      = {max(p.n_src, p.n_dst)};",
             f"{element_unit(p)} per thread {m.direction}() moves")]
    if p.via is not None or p.paths:
        head.append((f"constexpr int kSmemBytes = {p.smem_bytes};", "scratch of a conversion step (via)"))
    elif m.space == "global":
        head.append(("constexpr int kSmemBytes = 0;", "no scratch: store()/load() leave their smem alone"))
    if m.space == "shared":
        head += [(f"constexpr int kTileBytes = {m.bytes};", "bytes of the shared tile"),
                 (f"constexpr int kTileAlign = {m.alignment};", align_reason(m.alignment))]
    else:
        head += [(f"__attribute__((unused)) constexpr int kOrder[{len(p.shape)}] = "
                  f"{{{', '.join(map(str, m.layout['order']))}}};", "dims fastest first: kOrder[0] has stride 1"),
                 (f"constexpr int kAlignment = {(p.paths[-1].memory if p.paths else m).alignment};",
                  "bytes the tile pointer and every stride are aligned to (promised)")]
    words = word_counts(plan) if not p.paths else None
    tail = [(f"constexpr int kWords     = {max(words)};", f"packed 32-bit words for {m.direction}_words()")] \
        if words else []
    conv.constants = constants(plan, head, tail)
    conv.functions = (dispatch_functions(plan, conv) if plan.paths else
                      memory_functions(plan, conv) if plan.via is None else via_functions(plan, conv))
    store = m.direction == "store"
    dist, tile = (plan.src_bases, plan.dst_bases) if store else (plan.dst_bases, plan.src_bases)
    conv.index_functions = INDEX_COMMENT + [index_function("src_index" if store else "dst_index", layout_of(dist))]
    if m.space == "shared":
        conv.index_functions.append(tile_index_function(layout_of(tile)))
    return conv


header = header_values(namespace, memory_summary)


def harness(plan: Transfer, name: str, command: str = "", src_text: str | None = None,
            dst_text: str | None = None, back_plan: Transfer | None = None) -> dict:
    """Template values of the harness (whole and masked tiles) and of the probe kernel."""
    return dict(conv=namespace(plan, name), **harness_context(plan, plan.memory))


#: kind -> (template, its values) of a store's / a load's files (no bench: it times register conversions)
STORE_FILES = {"header": ("header.cuh.j2", header), "harness": ("harness_store.cu.j2", harness)}
LOAD_FILES = {"header": ("header.cuh.j2", header), "harness": ("harness_load.cu.j2", harness)}
