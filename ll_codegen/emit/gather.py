"""Render a gather (``plan.operation == "gather"``, a ``GatherPlan``):
``gather()``, the harness and the CUDA bench.

``out[r]`` is the source element at ``idx_index(r, lane, warp)`` with
coordinate ``kAxis`` replaced by ``idx[r] mod kAxisSize``.  Both layouts are
linear, so the source lane and register of that element are XorForms of the
thread plus a linear map of the index's bits ``v``: a shuffle plan sends
every candidate register (packed into 32-bit words) from the computed lane
and selects by the index's register bits; a shared-memory plan stores the
source tile once (threads holding broadcast copies skip), a barrier, then
loads at ``ld_base ^ offset ^ v_offset(v)``.  As for the other operations,
every expression is decided here; the templates (``templates/gather.cuh.j2``,
``gather_harness.cu.j2``, ``gather_bench.cu.j2``) only loop and substitute.
"""
from __future__ import annotations

import math
from typing import Sequence

from ll_codegen.core.dtypes import C_RAW, INDEX_DTYPES
from ll_codegen.core.layout import layout_of
from ll_codegen.emit.cexpr import (FULL_MASK, address_expr, aligned, comment_lines, hex_const, index_function,
                                   linear_expr, pack_words, select_tree, signature, strip_parens, xor_form_expr)
from ll_codegen.emit.instructions import LOP3
from ll_codegen.plan.gather import GatherPlan
from ll_codegen.plan.report import gather_summary


def _bit(var: str, p: int) -> str:
    return f"(({var} >> {p}) & 1u)" if p else f"({var} & 1u)"


def _shfl(cuda: bool, word: str, lane: str) -> str:
    return f"__shfl_sync({FULL_MASK}, {word}, {lane})" if cuda else f"__shfl({word}, {lane})"


class _Body:
    """The lines of ``gather()``'s body for one plan."""

    def __init__(self, plan: GatherPlan):
        self.p = plan
        self.cuda = plan.target == "cuda"
        self.lane_bits = plan.warp_size.bit_length() - 1
        self.warp_bits = plan.num_warps.bit_length() - 1
        self.axis_bits = plan.axis_size.bit_length() - 1
        self.raw = C_RAW[plan.elem_bytes]
        self.needs: set[str] = set()
        self.prologue: list[tuple[str, str]] = []
        self.lines: list[str] = []

    def form(self, f) -> str:
        e = xor_form_expr(f, self.lane_bits, self.warp_bits)
        for v in ("lane", "warp"):
            if v in e:
                self.needs.add(v)
        return e

    def v_expr(self, coefs: Sequence[int]) -> str:
        return linear_expr(coefs, "v", self.axis_bits)

    def head(self) -> list[str]:
        rows = []
        if "lane" in self.needs:
            rows.append(("const unsigned lane = tid & (kWarpSize - 1);", ""))
        if "warp" in self.needs:
            rows.append(("const unsigned warp = tid / kWarpSize;", ""))
        return aligned(rows + self.prologue)

    # ---------------------------------------------------------------- shuffle
    def shuffle(self) -> None:
        p, s = self.p, self.p.shuffle
        lane_t, reg_t = self.form(s.lane), self.form(s.reg)
        if lane_t != "0u":
            self.prologue.append((f"const unsigned lane_t = {lane_t};", "source lane: this thread's part"))
        if reg_t != "0u" and s.select_bits:
            self.prologue.append((f"const unsigned reg_t = {reg_t};", "source register: this thread's part"))
        w = p.elem_bytes
        for r, o in enumerate(s.outs):
            n = len(o.cands)
            lp = min(int(math.log2(s.per)), len(s.select_bits))          # candidate-index bits inside a word
            per = 1 << lp if w < 4 else 1
            nk = -(-n // per)
            self.lines.append(f"{{  // out[{r}]: {n} candidate register(s), {nk * s.words} shuffle(s)")
            body = [f"const unsigned v = detail::index_bits(idx[{r}]);"]
            if not (self.v_expr(s.v_lane) or (s.select_bits and self.v_expr(s.v_reg))):
                body.append("(void)v;  // an axis of size 1")
            lane_terms = [t for t in ("lane_t" if lane_t != "0u" else "", self.v_expr(s.v_lane),
                                      hex_const(o.lane) if o.lane else "") if t]
            body.append(f"const int src_lane = static_cast<int>({' ^ '.join(lane_terms) or '0u'});")
            if s.select_bits:
                x_terms = [t for t in ("reg_t" if reg_t != "0u" else "", self.v_expr(s.v_reg)) if t]
                body.append(f"const unsigned x = {' ^ '.join(x_terms) or '0u'};  // source register ^ {o.reg}")
            bits = [_bit("x", q) for q in s.select_bits]
            halves = [""] if s.words == 1 else ["_lo", "_hi"]
            got = []
            for h, suf in enumerate(halves):
                words = []
                for k in range(nk):
                    group = [f"s[{c}]" for c in o.cands[k * per:(k + 1) * per]]
                    if w == 8:
                        payload = (f"static_cast<uint32_t>({group[0]})" if h == 0
                                   else f"static_cast<uint32_t>({group[0]} >> 32)")
                    else:
                        payload = f"static_cast<uint32_t>({pack_words(group, w, self.cuda)[0]})"
                    name = f"w{k}{suf}"
                    body.append(f"const uint32_t {name} = {_shfl(self.cuda, payload, 'src_lane')};")
                    words.append(name)
                sel = select_tree(words, bits[lp:]) if nk > 1 else words[0]
                if w < 4 and lp:
                    slot = " | ".join(f"({b} << {j})" if j else b for j, b in enumerate(bits[:lp]))
                    sel = f"({strip_parens(sel) if '?' not in sel else sel}) >> (({slot}) * {8 * w})"
                got.append(sel)
            if w == 8:
                body.append(f"d[{r}] = (static_cast<uint64_t>({got[1]}) << 32) | ({got[0]});")
            else:
                body.append(f"d[{r}] = static_cast<{self.raw}>({got[0]});")
            self.lines += ["    " + b for b in body] + ["}"]

    # ---------------------------------------------------------------- smem
    def smem(self) -> None:
        p, m = self.p, self.p.smem
        w = p.elem_bytes
        st_base, ld_base = self.form(m.store_base), self.form(m.load_base)
        self.prologue.append(("char* const sm = static_cast<char*>(smem);", ""))
        self.prologue.append((f"const unsigned st_base = {st_base};", "byte address of this thread's stores"))
        self.prologue.append((f"const unsigned ld_base = {ld_base};", "byte address of its loads, index 0"))
        guard = []
        if m.lane_skip:
            self.needs.add("lane")
            guard.append(f"(lane & {hex_const(m.lane_skip)}) == 0")
        if m.warp_skip:
            self.needs.add("warp")
            guard.append(f"(warp & {hex_const(m.warp_skip)}) == 0")
        self.lines.append("__syncthreads();  // smem free (an earlier use by the caller is done)")
        if guard:
            self.lines.append(f"if ({' && '.join(guard)}) {{  // lanes/warps holding broadcast copies skip the store")
        ind = "    " if guard else ""
        sup = m.store_base.support
        for acc in m.stores:
            nb = len(acc.regs) * w
            words = pack_words([f"s[{r}]" for r in acc.regs], w, self.cuda)
            if nb <= 4:
                t, val = C_RAW[nb], f"static_cast<{C_RAW[nb]}>({words[0]})"
            else:
                t = f"detail::V{nb}"
                val = f"{t}{{{{{', '.join(words)}}}}}"
            self.lines.append(f"{ind}detail::st<{t}>(sm + ({address_expr('st_base', acc.offset, sup)}), {val});")
        if guard:
            self.lines.append("}")
        self.lines.append("__syncthreads();  // the tile is complete")
        sup = m.load_base.support
        vt = self.v_expr(m.v_offset)
        for r, off in enumerate(m.load_offsets):
            a = address_expr("ld_base", off, sup)
            if vt:
                self.lines.append(f"{{ const unsigned v = detail::index_bits(idx[{r}]); "
                                  f"d[{r}] = detail::ld<{self.raw}>(sm + ({a} ^ ({strip_parens(vt)}))); }}")
            else:                                     # an axis of size 1: every index reads coordinate 0
                self.lines.append(f"(void)detail::index_bits(idx[{r}]); d[{r}] = detail::ld<{self.raw}>(sm + ({a}));")


def _summary(plan: GatherPlan) -> list[str]:
    return gather_summary(plan).rstrip("\n").splitlines()


def _barriers(plan: GatherPlan) -> str:
    if plan.shuffle is not None:
        return ("Barriers: none; smem is not touched. Each warp exchanges data within itself (shuffles), so the "
                "call must be made by whole warps (all lanes active).")
    return ("Barriers: 2 __syncthreads() (one before the stores, so smem may still be in use by the caller or an "
            "earlier call when this one starts; one between stores and loads). Every thread of the block must make "
            "the call, with tid in [0, kThreads). When it returns, other threads may still be reading smem: "
            "__syncthreads() before writing smem again.")


def _values(plan: GatherPlan) -> dict:
    """Template values every gather file uses."""
    return dict(index_t=INDEX_DTYPES[plan.index_dtype][1], smem_bytes=plan.smem_bytes,
                src_elems=math.prod(plan.src_shape), idx_elems=math.prod(plan.idx_shape))


def header(plan: GatherPlan, name: str, command: str = "", src_text: str | None = None,
           idx_text: str | None = None, back_plan: None = None) -> dict:
    """Template values of the header (``idx_text``: the index layout's text)."""
    src, idx = layout_of(plan.src_bases), layout_of(plan.idx_bases)
    body = _Body(plan)
    if plan.shuffle is not None:
        body.shuffle()
    else:
        body.smem()
    rows = [(f"constexpr int kSrcRegs   = {plan.n_src};", "source elements per thread"),
            (f"constexpr int kIdxRegs   = {plan.n_idx};", "index (and output) elements per thread"),
            (f"constexpr int kSmemBytes = {plan.smem_bytes};", "shared memory gather() needs (0: none)"),
            (f"constexpr int kThreads   = {plan.threads};", "threads taking part: tid in [0, kThreads)"),
            (f"constexpr int kWarpSize  = {plan.warp_size};", ""),
            (f"constexpr int kElemBytes = {plan.elem_bytes};", f"sizeof(T) ({plan.dtype})"),
            (f"constexpr int kIndexBytes = {plan.index_bytes};", f"sizeof(I) ({plan.index_dtype})"),
            (f"constexpr int kAxis      = {plan.axis};", ""),
            (f"constexpr int kAxisSize  = {plan.axis_size};", "indices are taken modulo this (a power of two)"),
            (f"constexpr int kRank      = {len(plan.src_shape)};", ""),
            (f"__attribute__((unused)) constexpr int kSrcShape[kRank] = {{{', '.join(map(str, plan.src_shape))}}};",
             "source tensor (row-major)"),
            (f"__attribute__((unused)) constexpr int kIdxShape[kRank] = {{{', '.join(map(str, plan.idx_shape))}}};",
             "index and output tensors (row-major)")]
    what = f"{'shuffles' if plan.shuffle is not None else 'shared memory'}"
    return dict(
        _values(plan),
        comment=comment_lines(
            f"Generated by ll_codegen. Do not edit.\nCommand: {command or '(library call)'}\n\n"
            f"Source layout ({plan.n_src} registers x {plan.warp_size} lanes x {plan.num_warps} warps):\n"
            f"{src_text if src_text is not None else repr(src)}\n\n"
            f"Index / output layout ({plan.n_idx} registers x {plan.warp_size} lanes x {plan.num_warps} warps):\n"
            f"{idx_text if idx_text is not None else repr(idx)}\n\nPlan:\n"
            + "\n".join("  " + line for line in _summary(plan))),
        constants=aligned(rows),
        index_functions=[index_function("src_index", src), index_function("idx_index", idx)],
        doc=["// out[r] = src element at idx_index(r, lane, warp) with coordinate kAxis replaced by idx[r] mod kAxisSize,",
             f"// through {what}. Out-of-range indices wrap (index & (kAxisSize - 1): -1 -> kAxisSize - 1); compile with",
             "// -DLLGEN_GATHER_CHECK to trap on them instead.",
             "// tid: this thread's index among the kThreads threads (default threadIdx.x); smem: kSmemBytes bytes,",
             "// 16-byte aligned, shared by those threads (unused when kSmemBytes is 0).",
             f"// {_barriers(plan)}"],
        signature=signature("__device__ __forceinline__ void gather",
                            "const T (&src)[kSrcRegs], const I (&idx)[kIdxRegs], T (&out)[kIdxRegs], void* smem, "
                            "unsigned tid = threadIdx.x"),
        unused=[] if plan.smem is not None else ["smem"],
        prologue=body.head(), lines=body.lines, uses_smem=plan.smem is not None)


def harness(plan: GatherPlan, name: str, command: str = "", src_text: str | None = None,
            idx_text: str | None = None, back_plan: None = None) -> dict:
    """Template values of the harness: one CTA gathering the row-major tensors."""
    return _values(plan)


def bench(plan: GatherPlan, name: str, command: str = "", src_text: str | None = None,
          idx_text: str | None = None, back_plan: None = None) -> dict:
    """Template values of the bench (CUDA only): the gather ``iters`` times, each index depending on the last output."""
    if plan.target != "cuda":
        raise ValueError("the gather bench is CUDA only")
    return dict(_values(plan), base_loop=[LOP3])


#: kind -> (template, its values) of a gather's files
GATHER_FILES = {"header": ("gather.cuh.j2", header), "harness": ("gather_harness.cu.j2", harness),
                "bench": ("gather_bench.cu.j2", bench)}
