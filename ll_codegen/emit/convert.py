"""Render a register -> register conversion (``plan.operation == "convert"``):
``convert()`` and its packed-word twin, the harness, and the round-trip bench.

A conversion moves every element from the register/lane/warp the source
layout gives it to the one the destination layout gives it, by one of three
bodies: register moves within the thread (whole words or byte permutes in
the word view), warp shuffles (rounds of ``__shfl_xor_sync``/``__shfl_sync``,
the payload selected per lane by parity bits of the lane, optionally by swap
stages), or a round trip through shared-memory scratch (stores, a barrier,
loads per round).  The barrier contract each body implies is written into the
function's comment (``barrier_contract``).
"""
from __future__ import annotations

from typing import Sequence

from ll_codegen.core.dtypes import C_RAW
from ll_codegen.core.layout import LinearLayout, layout_of
from ll_codegen.emit.body import (INDEX_COMMENT, TID, Builder, Fn, Namespace, constants, element_unit,
                                  harness_context, header_values, new_namespace, use_instruction, word_counts)
from ll_codegen.emit.packed import repacked_namespace
from ll_codegen.emit.cexpr import (FULL_MASK, address_expr, aligned, amd_perm_selector, compose_word, hex_const,
                                   index_function, row_major_bases, row_major_form, select_tree, strip_parens,
                                   term_expr, xor_form_expr)
from ll_codegen.emit.instructions import BAR_SYNC
from ll_codegen.plan.model import LaneSelect, swap_stages, with_partners, word_view
from ll_codegen.plan.plans import Transfer, without_via
from ll_codegen.plan.report import convert_summary
from ll_codegen.plan.words import LanePerm, PackTerm, lane_perm


class ConvertBuilder(Builder):
    """The body of ``convert()`` (or ``convert_words()``): register moves, shuffles or shared-memory rounds."""

    def build(self, masked: bool = False) -> Fn:
        p = self.p
        if p.in_registers and self.per:
            at = [(f"s[{j // self.per}]", j % self.per) for j in p.register.dst_from_src]
            self.fn.steps = [{"comment": "Register moves: whole words where they line up, else byte permutes",
                                "lines": [f"d[{k}] = {compose_word(at[k * self.per:(k + 1) * self.per], p.elem_bytes)};"
                                          for k in range(p.n_dst // self.per)]}]
            return self.fn
        if p.in_registers:
            pairs = [(f"dst[{i}] = src[{j}];", "") for i, j in enumerate(p.register.dst_from_src)]
            self.fn.moves = [c for c, _ in pairs] + [f"dst[{a}] = dst[{b}];" for a, b in p.dst_copies]
            return self.fn
        if p.by_shuffle:
            self.shuffle()
        elif p.through_smem:
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
        if s.src_lane is not None:      # images of the lane bits, then of the warp bits (warp-uniform)
            e = self.form(s.lane_form(self.lane_bits))
            rows.append((f"const unsigned src_lane = {strip_parens(e)};", "source lane before the round's xor"))
            src_lane = "src_lane"
        send_bits = self.select_bits(s.send_select)
        recv_bits = self.select_bits(s.recv_select)
        suffix = ["_lo", "_hi"] if s.words == 2 else [""]
        pack, shfl, recv_words = [], [], []
        if s.send_fused:       # each payload word one permute with a per-lane selector
            payloads = []
            for i, alts in enumerate(s.send_words(self.per)):
                named = [[(f"s[{w}]", k) for w, k in alt] for alt in alts]
                pack.append(f"const uint32_t out{i} = {self.lane_word(lane_perm(named, self.per), send_bits)};")
                payloads.append([f"out{i}"])
        elif s.send_swaps:     # the payload words of every tuple, then the swap stages
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
            if s.send_fused or s.send_swaps:
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
                    call = (f"__shfl_xor_sync({FULL_MASK}, {o}, {hex_const(rnd.lane_xor)})" if self.cuda
                            else f"__shfl_xor({o}, {hex_const(rnd.lane_xor)})")
                else:
                    lane_e = address_expr(src_lane, rnd.lane_xor, (1 << self.lane_bits) - 1).replace(" + ", " ^ ")
                    call = f"__shfl_sync({FULL_MASK}, {o}, {lane_e})" if self.cuda else f"__shfl({o}, {lane_e})"
                shfl.append(f"const uint32_t {n} = {call};")
            recv_words.append(in_names)
        unpack = []
        if s.recv_fused:      # each destination word one permute with a per-lane selector
            for j, alts in s.recv_words(self.per, self.p.dst_copies).items():
                named = [[x and (recv_words[x[0][0]][x[0][1]], x[1]) for x in alt] for alt in alts]
                unpack.append(f"d[{j}] = {self.lane_word(lane_perm(named, self.per), recv_bits)};")
        elif s.recv_swaps:    # swap stages on the received words, then one unpack for every lane
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

        def lane_dependent(side: str, sel: LaneSelect, swaps: tuple[int, ...], fused: bool) -> str:
            by = " by byte permutes with per-lane selectors" if fused else \
                f" by {len(swaps)} swap stage(s)" if swaps else ""
            return f"{sel.size}-way lane-dependent {side}{by}"
        send_how = f", {lane_dependent('send', s.send_select, s.send_swaps, s.send_fused)}" \
            if s.send_select.size > 1 else ""
        recv_how = f" ({lane_dependent('receive', s.recv_select, s.recv_swaps, s.recv_fused)})" \
            if s.recv_select.size > 1 else ""
        self.fn.steps = [
            {"comment": f"Pack: {len(s.rounds)} round(s) x {s.words} word(s), {s.vec} element(s) per payload"
                        + send_how, "lines": pack},
            {"comment": f"Exchange: {n_shfl} shuffle(s) issued back to back, source lane {how}", "lines": shfl},
            {"comment": "Unpack" + recv_how, "lines": unpack},
        ]

    def lane_word(self, term: PackTerm | LanePerm, bits: Sequence[str]) -> str:
        """C of a word as ``words.lane_perm`` composes it; each lane-dependent selector is a
        prologue constant ``perm<n>`` (the select tree over its values, once per thread).  HIP:
        the permute is ``detail::byte_perm`` (v_perm_b32, its selector's bytes), as HIP's
        ``__byte_perm`` with a run-time selector indexes a byte array in memory."""
        form = (lambda v: v) if self.cuda else amd_perm_selector
        if not self.cuda:
            self.conv.byte_perm = True

        def selector(sels: tuple[int, ...]) -> str:
            key = (tuple(bits), sels)
            if key not in self.perm_names:
                self.perm_names[key] = f"perm{len(self.perm_names)}"
                self.sel_lines.append((f"const uint32_t {self.perm_names[key]} = "
                                       f"{select_tree([f'{hex_const(form(v))}u' for v in sels], bits)};",
                                       "byte selector by lane"))
            return self.perm_names[key]
        return term_expr(term, selector, "__byte_perm" if self.cuda else "detail::byte_perm")

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
            guard = f"(warp & {hex_const(m.store_warp_skip)}) == 0"
        steps = []
        nround = len(m.rounds)
        # the block barrier: __syncthreads(), or a named barrier over the calling warps only
        block, note = "__syncthreads()", ""
        if m.named_barrier is not None:
            b = m.named_barrier
            block = f"{use_instruction(self.conv, BAR_SYNC)}({b.id}, {b.threads})"
            note = f" (named barrier {b.id}: the kThreads threads of this call)"
        visible = block                 # stores -> loads; the barrier before the stores stays block-wide
        if m.barrier == "warp":
            visible = "__syncwarp()" if self.cuda else "detail::warp_sync()"
            note = " (each warp reads only its own bytes)"
            self.conv.warp_sync = not self.cuda
        # the barrier before each round's stores (none before round 0 with two scratch buffers)
        free = (f"{visible};  // scratch free (previous use done by this warp: its own slice)" if m.per_warp
                else f"{block};  // scratch free (previous use done)")
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
                "stores": stores, "guard": guard, "loads": loads, "unpack": unpack, "visible": visible, "note": note,
                "free": free if i > 0 or m.buffers == 1 else None})
        self.fn.steps = steps
        self.finish_prologue(self.smem_rows(("st", m.store_base), ("ld", m.load_base)))


def one_line(plan: Transfer) -> str:
    """How the conversion moves data, in one line (``convert()``'s comment)."""
    p = plan
    if p.via is not None:
        return f"{one_line(p.via)} to a layout in between (via::), then {one_line(without_via(p))} (then::)"
    if p.by_shuffle:
        s = p.shuffle
        return f"warp shuffles: {len(s.rounds)} round(s) x {s.words} word(s)"
    if p.through_smem:
        m = p.smem
        return (f"through shared memory: {len(m.rounds)} round(s), {m.bytes} bytes, "
                f"{m.store.bank_conflicts}/{m.load.bank_conflicts} bank conflicts per store/load")
    if p.strategy == "noop":
        return "no data movement (identical layouts)"
    return "register permutation within each thread"


def barrier_contract(plan: Transfer) -> str:
    """Which barriers convert() issues and what the caller must guarantee: none
    for register moves and shuffles (whole warps call), block or warp barriers
    around each shared-memory round, none before the first stores when the
    caller alternates two scratch buffers; a staged plan's are its
    shared-memory step's (its shuffles need whole warps, which those do too).
    With a named barrier every block barrier is ``bar.sync id, threads`` and only
    the calling warps take part."""
    if plan.via is not None:
        return barrier_contract(without_via(plan))
    if plan.by_shuffle:
        return ("Barriers: none; smem is not touched. Each warp exchanges data within itself (shuffles), so "
                "the call must be made by whole warps (all lanes active).")
    if not plan.through_smem:
        return "Barriers: none; smem is not touched and no data leaves the thread."
    m, n, b = plan.smem, len(plan.smem.rounds), plan.smem.named_barrier
    bar = "__syncthreads()" if b is None else f"bar.sync {b.id}, {b.threads}"
    every = "Every thread of the block must make the call, with tid in [0, kThreads)."
    all_call = "Every thread of the block must make the call (block-wide barriers), with tid in [0, kThreads)."
    if b is not None:
        every = all_call = (f"Named barrier {b.id} counts {b.threads} threads: exactly the kThreads threads that "
                            f"make the call (whole warps, tid in [0, kThreads)) arrive at it; the block's other "
                            f"warps do not take part and must not use barrier {b.id} during the call.")
    still = (f"When it returns, other threads may still be reading smem: {bar} before writing smem "
             f"again (another convert() does that itself).")
    sync = "__syncwarp()" if plan.target == "cuda" else "wavefront barrier(s) (detail::warp_sync())"
    if m.buffers == 2:
        return (f"Barriers: {m.block_barriers} {bar} ({n} round(s)), none before the first stores: "
                f"kScratchBuffers = 2 -- consecutive conversions must use different scratch buffers (allocate "
                f"two of kSmemBytes and alternate), so that the block barrier between this call's stores and "
                f"loads has ordered every read of the buffer by the call before the previous one. Before the "
                f"first call, and before reusing a buffer for anything else, {bar}. {every}")
    if m.per_warp:
        return (f"Barriers: {m.warp_barriers} {sync}, no block barrier ({n} round(s)); the scratch is "
                f"split per warp (--scratch-per-warp): warp w stores and loads only bytes [w * kWarpSliceBytes, "
                f"(w + 1) * kWarpSliceBytes). The caller guarantees that no other warp has touched this "
                f"warp's slice since the last __syncthreads() (consecutive --scratch-per-warp conversions of "
                f"the same kSmemBytes on one scratch need nothing between them); before using the scratch for "
                f"anything else, __syncthreads(). {every}")
    if m.barrier == "warp":
        return (f"Barriers: {m.block_barriers} {bar} and {m.warp_barriers} {sync} ({n} round(s)): a "
                f"block barrier before each round's stores, so the scratch may still be in use by the caller or "
                f"an earlier convert() when this one starts; a warp barrier between stores and loads, enough "
                f"because every warp reads back only bytes it wrote itself. {every} {still}")
    return (f"Barriers: {2 * n} {bar} ({n} round(s): one before each round's stores, so the "
            f"scratch may still be in use by the caller or an earlier convert() when this one starts; one "
            f"between stores and loads). {all_call} {still}")


def convert_function(plan: Transfer, conv: Namespace) -> Fn:
    """``convert()`` (and ``convert_words()`` in the word view), its body built into ``conv``."""
    per = word_view(plan)
    fn = Fn("convert", f"const T (&src)[kSrcRegs], T (&dst)[kDstRegs], void* smem, {TID}",
            unused=[] if plan.smem_bytes else ["smem"],
            raw_in=["U s[kSrcRegs], d[kDstRegs];", "memcpy(s, src, sizeof s);"], raw_out=["memcpy(dst, d, sizeof d);"])
    fn.doc = [f"// dst = src in the destination layout: {one_line(plan)}.",
              "// tid: this thread's index among the kThreads threads taking part (default threadIdx.x);",
              "// smem: kSmemBytes bytes, 16-byte aligned, shared by those threads.",
              f"// {barrier_contract(plan)}"]
    if per:
        fn.word_params = f"const uint32_t (&s)[kSrcWords], uint32_t (&d)[kDstWords], void* smem, {TID}"
        fn.word_call = ["uint32_t s[kSrcWords], d[kDstWords];", "memcpy(s, src, sizeof s);",
                        "convert_words(s, d, smem, tid);", "memcpy(dst, d, sizeof d);"]
        fn.doc += ["// convert_words: the same on packed 32-bit words -- word i holds elements",
                   f"// {per}i .. {per}i+{per - 1}, lowest first, as mma fragments keep 8/16-bit data."]
    if plan.via is not None:            # staged: the two steps are nested namespaces, chained here
        conv.nested = [namespace(plan.via, "via", nested=True), namespace(without_via(plan), "then", nested=True)]
        fn.moves = ["T mid[via::kDstRegs];", "via::convert(src, mid, smem, tid);", "then::convert(mid, dst, smem, tid);"]
        what = ("The butterfly's shuffle steps before its last, then its last step" if plan.strategy == "butterfly"
                else "Warp shuffles to the layout in between, then the trip through shared memory")
        fn.steps = [{"comment": what,
                     "lines": ["uint32_t m[via::kDstWords];", "via::convert_words(s, m, smem, tid);",
                               "then::convert_words(m, d, smem, tid);"]}]
        return fn
    ConvertBuilder(plan, conv, fn).build()
    return fn


def namespace(plan: Transfer, name: str, nested: bool = False) -> Namespace:
    """The generated namespace of a conversion: constants, src_index/dst_index, convert()
    (``nested``: a staged conversion's step, its constants marked unused); a packed plan that
    repacks nibbles in registers, the byte plan wrapped (``emit/packed.py``)."""
    if plan.packing is not None and plan.packing.repacks:
        return repacked_namespace(plan, name, namespace)
    conv = new_namespace(plan, name)
    p = plan
    unit = element_unit(p)
    head = [(f"constexpr int kSrcRegs   = {p.n_src};", f"{unit} per thread before convert()"),
            (f"constexpr int kDstRegs   = {p.n_dst};", f"{unit} per thread after convert()"),
            (f"constexpr int kSmemBytes = {p.smem_bytes};", "shared-memory scratch convert() needs (0: none)")]
    if p.through_smem and p.smem.buffers == 2:
        head.append(("constexpr int kScratchBuffers = 2;", "alternate two kSmemBytes buffers between calls"))
    if p.through_smem and p.smem.per_warp:
        head.append((f"constexpr int kWarpSliceBytes = {p.smem.bytes // p.num_warps};",
                     "warp w uses scratch bytes [w * kWarpSliceBytes, (w + 1) * kWarpSliceBytes)"))
    words = word_counts(plan)
    tail = [(f"constexpr int kSrcWords  = {words[0]};", "packed 32-bit words for convert_words()"),
            (f"constexpr int kDstWords  = {words[1]};", "")] if words else []
    conv.constants = constants(plan, head, tail, unused=nested)
    conv.functions = [convert_function(plan, conv)]
    conv.index_functions = INDEX_COMMENT + [index_function("src_index", layout_of(plan.src_bases)),
                                            index_function("dst_index", layout_of(plan.dst_bases))]
    return conv


header = header_values(namespace, convert_summary)


def harness(plan: Transfer, name: str, command: str = "", src_text: str | None = None,
            dst_text: str | None = None, back_plan: Transfer | None = None) -> dict:
    """Template values of the harness: source registers from the tensor, convert(), back to the tensor."""
    return dict(conv=namespace(plan, name), **harness_context(plan, None))


# ------------------------------------------------------------------ the bench
#: (name, declaration) of the thread's lane and warp, in declaration order
LANE_WARP = (("lane", "const unsigned lane = threadIdx.x & (kWarpSize - 1);"),
             ("warp", "const unsigned warp = threadIdx.x / kWarpSize;"))


def thread_io(layout: LinearLayout, plan: Transfer, var: str, decls: list[str]) -> tuple[str, list[str]]:
    """(index declaration, per-register index expressions) of the row-major
    global tensor; adds the ``lane``/``warp`` declarations it needs to ``decls``."""
    form, consts = row_major_form(layout)
    lane_bits, warp_bits = plan.warp_size.bit_length() - 1, plan.num_warps.bit_length() - 1
    e = xor_form_expr(form, lane_bits, warp_bits)
    decls += [d for v, d in LANE_WARP if v in e and d not in decls]
    sup = form.support
    # pointer offsets, ``in + src_idx + c`` (not ``in[src_idx + c]``: that unsigned sum may wrap, so the
    # compiler keeps a 64-bit address per register group live from the loads before the loop to the
    # stores after it -- spills at 128 elements a thread); an xor form is parenthesised
    at = [address_expr(var, c, sup) for c in consts]
    return f"const unsigned {var} = {e};", [a if "^" not in a else f"({a})" for a in at]


#: bytes -> the type of one global access of the bench harness: 8 and 16 bytes as vectors of 32-bit
#: words, as Triton's kernel moves them (uint64_t accesses cost our f32 base loops extra moves and
#: spills on the H200: mma2_to_blocked_64_f32 45 SASS ALU per iteration against 34 with uint2)
VECTOR_TYPES = {**C_RAW, 8: "uint2", 16: "uint4"}


def io_vector(layout: LinearLayout, elem_bytes: int, max_bytes: int = 16) -> int:
    """Elements per global access of a thread's registers: the largest v = 2^k (v * elem_bytes <=
    ``max_bytes``) such that registers 0..v-1 hold row-major elements i, i + 1, .., i + v - 1 and
    every register group starts at a multiple of v -- the first k register bases are 1, 2, .., 2^(k-1)
    and no other basis has a bit below 2^k (the tile is row-major and 16-byte aligned)."""
    reg = row_major_bases(layout, "register")
    others = row_major_bases(layout, "lane") + row_major_bases(layout, "warp")
    k = 0
    while (k < len(reg) and reg[k] == 1 << k and (2 << k) * elem_bytes <= max_bytes
           and all(b & ((2 << k) - 1) == 0 for b in others + reg[k + 1:])):
        k += 1
    return 1 << k


#: The bench key is F2-linear in the element's row-major tile index e: ``key(e)`` is the XOR of
#: ``BENCH_KEY_COLUMNS[i]`` over the set bits i of e (16 bits, truncated to the element).  The first
#: 16 columns are linearly independent (a key per element of any tile up to 2^16 elements, so a
#: forward conversion that misplaces an element changes that element's output), and every column's
#: low byte has odd weight and differs from the others' (8-bit elements: two elements whose indices
#: differ in one, two or three bits get different keys).  Linear, so in a layout the key of register
#: r of a thread is ``key(e(r, 0, 0)) ^ key(e(0, lane, warp))``: a compile-time immediate per register
#: and one value per thread -- the loop needs no key array in registers.
BENCH_KEY_COLUMNS: tuple[int, ...] = (
    0x0107, 0x020e, 0x041c, 0x0838, 0x1070, 0x20e0, 0x40c1, 0x8083,
    0x0001, 0x0002, 0x0004, 0x0008, 0x0010, 0x0020, 0x0040, 0x0080,
    0x2d1f, 0x883e, 0xe37c, 0x3ef8, 0x99f1, 0xf4e3, 0x4fc7, 0xaa8f)


def bench_key(e: int) -> int:
    """key(e) = XOR of ``BENCH_KEY_COLUMNS[i]`` over the set bits i of ``e`` (``0 <= e < 2^24``)."""
    if not 0 <= e < 1 << len(BENCH_KEY_COLUMNS):
        raise ValueError(f"bench key of index {e}: tiles up to 2^{len(BENCH_KEY_COLUMNS)} elements")
    k = 0
    for i, col in enumerate(BENCH_KEY_COLUMNS):
        if e >> i & 1:
            k ^= col
    return k


def bench_key_values(layout: LinearLayout, elem_bytes: int, pack: int) -> tuple[list[str], str]:
    """(immediates, thread expression) of the bench key in ``layout``: register (or packed word of
    ``pack`` registers, low register in the low bits) r holds ``imm[r] ^ thread`` where ``imm[r]`` is
    the key of ``e(r, 0, 0)`` and ``thread``, a C expression of ``lane`` and ``warp``, the key of
    ``e(0, lane, warp)`` splat over the word's elements -- both truncated to the element width."""
    bits = 8 * min(elem_bytes, 2)
    mask = (1 << bits) - 1
    per = max(pack, 1)
    splat = sum(1 << (bits * i) for i in range(per))
    _, consts = row_major_form(layout)
    keys = [bench_key(c) & mask for c in consts]
    imm = [hex_const(sum(keys[j + i] << (bits * i) for i in range(per))) + "u" for j in range(0, len(keys), per)]
    terms = [f"((lane >> {b}) & 1u) * {hex_const((bench_key(v) & mask) * splat)}u"
             for b, v in enumerate(row_major_bases(layout, "lane")) if bench_key(v) & mask]
    terms += [f"((warp >> {b}) & 1u) * {hex_const((bench_key(v) & mask) * splat)}u"
              for b, v in enumerate(row_major_bases(layout, "warp")) if bench_key(v) & mask]
    # bit * column, not (0 - bit) & column: the multiply form needs fewer live temporaries (ptxas
    # spilled one register of a 64-element base loop computing the masks)
    return imm, " ^ ".join(f"({t})" for t in terms) or "0u"


def bench_smem(plan: Transfer, back_plan: Transfer) -> tuple[int, int]:
    """(bytes of one scratch buffer, dynamic shared memory of the bench launch): two buffers, the
    forward conversion in the first and the reverse one in the second, when either plan
    alternates scratch buffers (``SmemPlan.buffers == 2``)."""
    buffer = max(plan.smem_bytes, back_plan.smem_bytes)
    if not any(p.through_smem and p.smem.buffers == 2 for p in (plan, back_plan)):
        return buffer, buffer
    buffer = -(-buffer // 16) * 16            # the second buffer 16-byte aligned, as the first
    return buffer, 2 * buffer


def bench(plan: Transfer, name: str, command: str = "", src_text: str | None = None,
          dst_text: str | None = None, back_plan: Transfer | None = None) -> dict:
    """Template values of the round-trip bench: ``plan`` forward, ``back_plan``
    (the destination -> source conversion) back, ``iters`` times per CTA."""
    conv = namespace(plan, name)
    if back_plan is None:
        raise ValueError("the bench needs back_plan (the destination -> source plan)")
    if (back_plan.n_src, back_plan.n_dst, back_plan.elem_bytes, back_plan.threads, back_plan.target) != \
            (plan.n_dst, plan.n_src, plan.elem_bytes, plan.threads, plan.target):
        raise ValueError("back_plan is not the reverse of plan (registers, element size, threads or target differ)")
    elems = 1
    for s in plan.shape:
        elems *= s
    ctx = dict(conv=conv, tile_elems=elems, back=namespace(back_plan, f"{name}_back"))
    buffer, ctx["smem_bytes"] = bench_smem(plan, back_plan)
    ctx["buffer_bytes"] = buffer
    ctx["back_offset"] = f" + {buffer}" if ctx["smem_bytes"] > buffer else ""
    src = layout_of(plan.src_bases)
    idx_decls: list[str] = []
    ctx["src_idx"], at = thread_io(src, plan, "src_idx", idx_decls)
    # the tile moves in and out with the widest vectors the source layout allows, as Triton's kernel
    # does: with scalar accesses the base loop ran up to 3x slower than Triton's
    vec = io_vector(src, plan.elem_bytes)
    ctx.update(io_vec=vec, io_type=VECTOR_TYPES[vec * plan.elem_bytes], io_at=at[::vec])
    # 8/16-bit elements: the loop keeps packed words and calls convert_words;
    # the per-iteration change x ^= k then xors k into every element of a word
    ctx["xor_words"] = bool(word_view(plan) and word_view(back_plan))
    ctx["xor_splat"] = {1: "(static_cast<uint32_t>(k) & 0xffu) * 0x01010101u",
                        2: "(static_cast<uint32_t>(k) & 0xffffu) * 0x00010001u"}.get(plan.elem_bytes, "")
    # the key: an immediate per register (word) and one value per thread (bench_key_values), in the
    # destination layout for the round trip and in the source layout for the base loop
    pack = word_view(plan) if ctx["xor_words"] else 1
    ctx["key_dst"] = bench_key_values(layout_of(plan.dst_bases), plan.elem_bytes, pack)
    ctx["key_src"] = bench_key_values(src, plan.elem_bytes, pack)
    # each kernel declares the lane / warp its index and its key read (nvcc warns of an unused one)
    ctx["thread_decls"] = {base: [d for v, d in LANE_WARP if d in idx_decls or f"({v} >>" in key[1]]
                           for base, key in ((False, ctx["key_dst"]), (True, ctx["key_src"]))}
    return ctx


#: kind -> (template, its values) of a conversion's files
CONVERT_FILES = {"header": ("header.cuh.j2", header), "harness": ("harness_convert.cu.j2", harness),
                 "bench": ("bench.cu.j2", bench)}
