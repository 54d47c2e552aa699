"""Render a reduction (``plan.operation == "reduce"``, a ``ReducePlan``): ``reduce()``,
``broadcast()`` and the harness.

``reduce()`` runs the plan's steps in the plan's order (``plan/reduce.py``): the
in-thread pairwise trees (``RegisterGroup``), one butterfly round per reduced lane
bit, lowest first (``v = op(v, shfl_xor(v, mask))``), and, when warps span a
reduced dim, the warp stage: a block barrier, the guarded stores of each
warp's partial ``k`` of output element ``e`` to scratch element
``k * kOutputs + e``, a block barrier, the pairwise tree of the ``parts`` partials
over ``k`` -- in each thread for each of its outputs (the direct form), or, in the
spread form (``WarpStage.spread``), by thread ``tid`` for outputs ``tid, tid +
stride, ...``, stored at scratch element ``results + o``, a third block barrier,
then every thread's loads of its results.  A thread's accesses of its own slots move the
plan's vector groups (``WarpStage.vectors``) as one access each (``_Vector``: the
``st.shared``/``ld.shared`` wrappers of ``emit/instructions.py`` on CUDA, ``u32xN`` LDS accesses
on HIP); the combine trees stay those of the elements.  ``broadcast()`` copies result register ``dst_of_src[r]``
into source register ``r``.  Every register number, lane mask, guard and
index expression is computed here; the templates (``templates/reduce.cuh.j2``,
``reduce_harness.cu.j2``) only loop and substitute.  Shuffles are the
``__shfl_xor_sync`` (CUDA) / ``__shfl_xor`` (HIP) intrinsics on the element's
bits in a 32-bit word: no inline asm.
"""
from __future__ import annotations

import math
import textwrap
from typing import Sequence

from ll_codegen.core.layout import layout_of
from ll_codegen.emit.cexpr import (address_expr, aligned, comment_lines, hex_const, index_function, linear_expr,
                                   row_major_form, xor_form_expr)
from ll_codegen.emit.instructions import BAR_SYNC, EX2_FTZ, memory
from ll_codegen.plan.model import Barrier
from ll_codegen.plan.reduce import ReducePlan
from ll_codegen.plan.report import reduce_summary

#: target -> element type -> the C type ``reduce<T>`` computes in (the harness's ``T``)
ELEM_TYPES = {"cuda": {"f32": "float", "f16": "__half", "bf16": "__nv_bfloat16", "i32": "int32_t"},
              "hip": {"f32": "float", "f16": "__half", "bf16": "hip_bfloat16", "i32": "int32_t"}}
#: combine -> the header's functor
FUNCTORS = {"sum": "Sum", "max": "Max", "min": "Min"}
#: the longest line of statements a fold or the broadcast packs together (the indentation aside)
WIDTH = 112


def _wrap(statements: Sequence[str], width: int = WIDTH) -> list[str]:
    """``statements`` packed into lines of at most ``width`` characters (one a line where longer)."""
    lines: list[str] = []
    for st in statements:
        if lines and len(lines[-1]) + 1 + len(st) <= width:
            lines[-1] += " " + st
        else:
            lines.append(st)
    return lines


def _fold(dst: str, srcs: Sequence[str]) -> list[str]:
    """``dst`` = the pairwise tree of ``srcs`` (``plan.reduce.tree``: neighbours first, then pairs of
    pairs), one line of statements per level in a block of temporaries: its latency is log2 of a chain's."""
    half = len(srcs) // 2
    if not half:
        return [f"{dst} = {srcs[0]};"]
    t = [f"t{i}" for i in range(half)]
    lines = ["{"] + _wrap([f"T {t[i]} = op({srcs[2 * i]}, {srcs[2 * i + 1]});" for i in range(half)])
    step = 1
    while 2 * step < half:
        lines += _wrap([f"{t[i]} = op({t[i]}, {t[i + step]});" for i in range(0, half, 2 * step)])
        step *= 2
    return lines + [f"{dst} = {f'op({t[0]}, {t[step]})' if half > 1 else t[0]};", "}"]


def _bits_expr(var: str, bits: Sequence[int], nbits: int) -> str:
    """The bits of ``var`` (``nbits`` wide) at positions ``bits`` (lowest first), packed, as C."""
    coefs = [0] * nbits
    for i, b in enumerate(bits):
        coefs[b] = 1 << i
    return linear_expr(coefs, var, nbits) or "0u"


def _comment(text: str, width: int = 112) -> list[str]:
    """``text`` as ``//`` lines of at most ``width`` characters."""
    return ["// " + line for line in textwrap.wrap(text, width - 3)]


class _Vector:
    """One thread's vector accesses of its own scratch slots (``WarpStage.vectors``): ``n`` adjacent
    elements of ``T`` as ``n * elem_bytes`` bytes in 32-bit words (``detail::word`` packs them, lowest
    first; ``detail::elem`` unpacks).  CUDA: the ``st.shared`` / ``ld.shared`` wrappers of
    ``emit/instructions.memory`` on the element's 32-bit shared address; HIP: one access of the
    ``u32xN`` vector type (``ds_write_b64`` / ``b128``), as the conversions' LDS accesses."""

    def __init__(self, cuda: bool, elem_bytes: int, vectors):
        self.cuda, self.w = cuda, elem_bytes
        self.n = len(vectors[0]) if vectors else 1
        self.bytes = self.n * elem_bytes
        self.words = max(1, self.bytes // 4)
        self.used: list = []
        if self.n > 1 and cuda:
            self.used = [memory("st_shared", nbytes=self.bytes), memory("ld_shared", nbytes=self.bytes)]

    @property
    def vtype(self) -> str:
        """HIP: the C type of one access."""
        return "uint32_t" if self.words == 1 else f"detail::u32x{self.words}"

    def packed(self, regs) -> list[str]:
        per = 4 // self.w
        return [f"detail::word({', '.join(f'dst[{j}]' for j in regs[i:i + per])})" for i in range(0, len(regs), per)]

    def store(self, ptr: str, regs) -> str:
        words = self.packed(regs)
        if self.cuda:
            return f"detail::{self.used[0].name}<0>(detail::smem_u32({ptr}), {', '.join(words)});"
        val = words[0] if self.words == 1 else f"{self.vtype}{{{', '.join(words)}}}"
        return f"detail::st(reinterpret_cast<{self.vtype}*>({ptr}), {val});"

    def load(self, ptr: str, name: str) -> tuple[str, list[str]]:
        """(the load of the access at ``ptr`` into words named ``name``..., its elements as C)."""
        if self.cuda:
            names = [f"{name}_{i}" for i in range(self.words)]
            line = (f"uint32_t {', '.join(names)}; detail::{self.used[1].name}<0>(detail::smem_u32({ptr}), "
                    f"{', '.join(names)});")
        else:
            names = [name] if self.words == 1 else [f"{name}.{'xyzw'[i]}" for i in range(self.words)]
            line = f"const {self.vtype} {name} = detail::ld(reinterpret_cast<const {self.vtype}*>({ptr}));"
        per = 4 // self.w
        return line, [f"detail::elem<T>({names[i // per]}, {i % per})" for i in range(self.n)]


class _Body:
    """The steps of ``reduce()`` for one plan: (comment, lines) each, plus the declarations they need."""

    def __init__(self, plan: ReducePlan):
        self.p = plan
        self.cuda = plan.target == "cuda"
        self.lane_bits = plan.warp_size.bit_length() - 1
        self.warp_bits = plan.num_warps.bit_length() - 1
        self.prologue: list[tuple[str, str]] = []
        self.steps: list[dict] = []
        self.unused: list[str] = []
        self.vector = _Vector(self.cuda, plan.elem_bytes, ())

    def registers(self) -> None:
        p = self.p
        n = sorted({len(g.srcs) for g in p.groups})
        lines = []
        for g in p.groups:
            lines += _fold(f"dst[{g.dst}]", [f"src[{s}]" for s in g.srcs])
        skipped = p.n_src - sum(len(g.srcs) for g in p.groups)
        self.steps.append(dict(
            comment=_comment(f"In each thread: result register j is the pairwise tree of {' or '.join(map(str, n))} source "
                    f"register(s), neighbours first" + (f" ({skipped} broadcast copies skipped)" if skipped else "")),
            lines=lines))

    def lanes(self) -> None:
        p = self.p
        if not p.lane_xors:
            return
        lines = []
        for m in p.lane_xors:
            lines += [f"dst[{j}] = op(dst[{j}], detail::shfl_xor(dst[{j}], {hex_const(m)}));" for j in range(p.n_dst)]
        self.steps.append(dict(
            comment=_comment(f"Across lanes: {len(p.lane_xors)} butterfly round(s), lane xor "
                             f"{', '.join(hex_const(m) for m in p.lane_xors)} (lowest bit first); both partners get "
                             f"the same value"), lines=lines))

    def warps(self) -> None:
        p, w = self.p, self.p.warps
        if w is None:
            self.unused += ["smem", "tid"]
            return
        form, consts = row_major_form(layout_of(p.dst_bases))
        e = xor_form_expr(form, self.lane_bits, self.warp_bits)
        uses = {v for v in ("lane", "warp") if v in e}
        guard = []
        if w.lane_skip:
            uses.add("lane")
            guard.append(f"(lane & {hex_const(w.lane_skip)}) == 0")
        if w.warp_skip:
            uses.add("warp")
            guard.append(f"(warp & {hex_const(w.warp_skip)}) == 0")
        uses.add("warp")                                     # k: the warp's reduced bits
        if "lane" in uses:
            self.prologue.append(("const unsigned lane = static_cast<unsigned>(tid) % kWarpSize;", ""))
        self.prologue.append(("const unsigned warp = static_cast<unsigned>(tid) / kWarpSize;", ""))
        self.prologue.append(("T* const scratch = static_cast<T*>(smem);", f"{w.parts} x kOutputs elements"))
        self.prologue.append((f"const unsigned e = {e};",
                              "result element of dst[0] (row-major in the result tensor)"))
        sup = form.support
        at = [address_expr("e", c, sup) for c in consts]
        k = _bits_expr("warp", w.warp_bits, self.warp_bits)
        block = block_barrier(w.named_barrier)
        at = [f"({a})" if "^" in a else a for a in at]                  # e + 0x10 needs no parentheses
        vec = _Vector(self.cuda, p.elem_bytes, w.vectors)
        self.vector = vec
        if vec.n > 1:
            stores = [vec.store(f"scratch + k * kOutputs + {at[g[0]]}", g) for g in w.vectors]
        else:
            stores = [f"detail::st(scratch + k * kOutputs + {at[j]}, dst[{j}]);" for j in range(p.n_dst)]
        loads, spread = [], []
        if w.spread:
            # thread tid combines outputs o = tid, tid + stride, ... (below kOutputs): the same tree over k
            base = f"scratch + {w.results} + " if w.results else "scratch + "
            one = w.outputs <= w.stride
            head = ("{  // output o = tid" if w.outputs == w.stride else
                    f"if (static_cast<unsigned>(tid) < {w.outputs}u) {{  // output o = tid" if one else
                    f"for (unsigned o = static_cast<unsigned>(tid); o < {w.outputs}u; o += {w.stride}u) {{"
                    f"  // outputs tid, tid + {w.stride}, ...")
            body = (["const unsigned o = static_cast<unsigned>(tid);"] if one else []) + ["T r;"]
            body += _fold("r", [f"detail::ld(scratch + {q * w.outputs} + o)" if q else "detail::ld(scratch + o)"
                                for q in range(w.parts)])
            body.append(f"detail::st({base}o, r);  // only this thread read partial 0 of o" if not w.results
                        else f"detail::st({base}o, r);")
            spread = [head] + ["    " + line for line in body] + ["}", f"{block};  // every result stored"]
            if vec.n > 1:
                for a, g in enumerate(w.vectors):
                    line, elems = vec.load(f"{base}{at[g[0]]}", f"r{a}")
                    loads += ["{  // " + f"the results of dst[{', '.join(map(str, g))}]", "    " + line]
                    loads += ["    " + x for x in _wrap([f"dst[{j}] = {elems[i]};" for i, j in enumerate(g)])]
                    loads.append("}")
            else:
                for j in range(p.n_dst):
                    loads.append(f"dst[{j}] = detail::ld({base}{at[j]});")
                loads = _wrap(loads)
            what = (f"then thread tid combines the {w.parts} partials of outputs tid, tid + {w.stride}, ... as a "
                    f"pairwise tree over k and stores the result at scratch[{f'{w.results} + ' if w.results else ''}o]; "
                    f"then every thread "
                    f"loads its {p.n_dst} result(s)")
        elif vec.n > 1:
            for a, g in enumerate(w.vectors):
                loads.append("{  // " + f"the {w.parts} partials of dst[{', '.join(map(str, g))}]")
                parts = []
                for q in range(w.parts):
                    line, elems = vec.load(f"scratch + {q * w.outputs} + {at[g[0]]}" if q else
                                           f"scratch + {at[g[0]]}", f"p{q}")
                    loads.append("    " + line)
                    parts.append(elems)
                for i, j in enumerate(g):
                    loads += ["    " + x for x in _fold(f"dst[{j}]", [parts[q][i] for q in range(w.parts)])]
                loads.append("}")
            what = f"then the {w.parts} partials combined as a pairwise tree over k"
        else:
            for j in range(p.n_dst):
                loads += _fold(f"dst[{j}]", [f"detail::ld(scratch + {q * w.outputs} + {at[j]})" if q else
                                             f"detail::ld(scratch + {at[j]})" for q in range(w.parts)])
            what = f"then the {w.parts} partials combined as a pairwise tree over k"
        how = (f"; a thread's own slots {vec.n} at a time ({vec.n * p.elem_bytes} B accesses: its registers "
               f"{', '.join('[' + ', '.join(map(str, g)) + ']' for g in w.vectors)} are adjacent elements)"
               if vec.n > 1 else "")
        self.steps.append(dict(
            comment=_comment(f"Across warps: partial k (the warp's reduced bit(s) {list(w.warp_bits)}) of output e "
                             f"at scratch[k * kOutputs + e], one writer each; {what}{how}"),
            free=f"{block};  // scratch free (an earlier use by the caller is done)",
            open=f"if ({' && '.join(guard)}) {{  // one writer per output element and partial" if guard else "{",
            k=f"const unsigned k = {k};", stores=stores,
            visible=f"{block};  // every partial stored", spread=spread, lines=loads))


def block_barrier(b: Barrier | None) -> str:
    """The C of the warp stage's block barrier: ``__syncthreads()``, or the named barrier's wrapper
    (``emit/instructions.BAR_SYNC``, defined in the header's detail namespace)."""
    return "__syncthreads()" if b is None else f"detail::{BAR_SYNC.name}({b.id}, {b.threads})"


def _barriers(plan: ReducePlan) -> list[str]:
    if plan.warps is None:
        return ["// Barriers: none; smem is not touched" + (" and no data leaves the thread." if not plan.lane_xors
                else ". Each warp exchanges data within itself (shuffles), so the call must be made by whole warps "
                     "(all lanes active)."),
                "// tid and smem are unused (kSmemBytes is 0)."]
    b = plan.warps.named_barrier
    if b is not None:
        rounds = ("one between the partials' stores and their combine; one between the results' stores and the "
                  "loads" if plan.warps.spread else "one between the stores and the loads")
        text = (f"Barriers: {plan.warps.barriers} bar.sync {b.id}, {b.threads} (named barrier {b.id}, in place of "
                f"__syncthreads(): one before the stores, so the scratch may still be in use by the caller or an "
                f"earlier call; {rounds}). Named barrier {b.id} counts {b.threads} threads: exactly the kThreads "
                f"threads that make the call (whole warps, tid = its index in [0, kThreads): lane = tid % kWarpSize, "
                f"warp = tid / kWarpSize) arrive at it; the block's other warps do not take part and must not use "
                f"barrier {b.id} during the call. smem must hold kSmemBytes bytes of scratch, aligned to kSmemAlign bytes, "
                f"shared by those threads. When it returns other threads may still be reading the scratch: "
                f"bar.sync {b.id}, {b.threads} before writing it again.")
        return ["// " + line for line in textwrap.wrap(text, 110)]
    if plan.warps.spread:
        head = ["// Barriers: 3 __syncthreads() (one before the stores, so the scratch may still be in use by the caller",
                "// or an earlier call when this one starts; one between the partials' stores and their combine; one",
                "// between the combined results' stores and every thread's loads of its results). Every thread of the"]
    else:
        head = ["// Barriers: 2 __syncthreads() (one before the stores, so the scratch may still be in use by the caller",
                "// or an earlier call when this one starts; one between the stores and the loads). Every thread of the"]
    return head + [
            "// block must make the call, with tid = its index in [0, kThreads) (lane = tid % kWarpSize, warp =",
            "// tid / kWarpSize), and smem must hold kSmemBytes bytes of scratch, aligned to kSmemAlign bytes, shared",
            "// by the block. When it returns other threads may still be reading the scratch: __syncthreads() before",
            "// writing it again."]


def _values(plan: ReducePlan) -> dict:
    return dict(elem_t=ELEM_TYPES[plan.target][plan.dtype], src_elems=math.prod(plan.shape),
                dst_elems=math.prod(plan.result_shape), smem_bytes=plan.smem_bytes)


def header(plan: ReducePlan, name: str, command: str = "", src_text: str | None = None,
           dst_text: str | None = None, back_plan: None = None) -> dict:
    """Template values of the header (``dst_text``: the result layout's text, default its dump)."""
    src, dst = layout_of(plan.src_bases), layout_of(plan.dst_bases)
    body = _Body(plan)
    body.registers()
    body.lanes()
    body.warps()
    functor = FUNCTORS[plan.combine]
    w = plan.warps
    rows = [(f"constexpr int kSrcRegs   = {plan.n_src};", "source elements per thread (reduce() reads)"),
            (f"constexpr int kDstRegs   = {plan.n_dst};", "result elements per thread (reduce() writes)"),
            (f"constexpr int kSmemBytes = {plan.smem_bytes};", "shared-memory scratch reduce() needs (0: none)"),
            (f"constexpr int kSmemAlign = {body.vector.bytes};", "its alignment in bytes (the widest access)"),
            (f"constexpr int kThreads   = {plan.threads};", "threads taking part: tid in [0, kThreads)"),
            (f"constexpr int kWarpSize  = {plan.warp_size};", ""),
            (f"constexpr int kElemBytes = {plan.elem_bytes};", f"sizeof(T) ({plan.dtype})"),
            (f"constexpr int kOutputs   = {math.prod(plan.result_shape)};", "elements of the result tensor"),
            (f"constexpr int kParts     = {w.parts if w is not None else 1};", "partials per output across warps")]
    dims = ", ".join(map(str, plan.dims))
    exp2 = plan.target == "cuda" and plan.dtype == "f32"      # exp2_sub(): a softmax's numerator, CUDA f32
    return dict(
        _values(plan),
        comment=comment_lines(
            f"Generated by ll_codegen. Do not edit.\nCommand: {command or '(library call)'}\n\n"
            f"Source layout ({plan.n_src} registers x {plan.warp_size} lanes x {plan.num_warps} warps):\n"
            f"{src_text if src_text is not None else repr(src)}\n\n"
            f"Result layout, the slice of dim(s) {dims} ({plan.n_dst} registers x {plan.warp_size} lanes x "
            f"{plan.num_warps} warps):\n{dst_text if dst_text is not None else repr(dst)}\n\nPlan:\n"
            + "\n".join("  " + line for line in reduce_summary(plan).rstrip("\n").splitlines())),
        constants=aligned(rows), functor=functor, combine=plan.combine, dims=dims,
        index_functions=[index_function("src_index", src), index_function("dst_index", dst)],
        barriers=_barriers(plan), unused=body.unused, prologue=aligned(body.prologue), steps=body.steps,
        uses_smem=w is not None, vector_words=body.vector.words if body.vector.n > 1 else 0,
        instructions_used=(([BAR_SYNC] if w is not None and w.named_barrier is not None else []) + body.vector.used
                           + ([EX2_FTZ] if exp2 else [])),
        broadcast=_wrap([f"out[{r}] = red[{j}];" for r, j in enumerate(plan.dst_of_src)]),
        exp2_sub=_wrap([f"x[{r}] = detail::ex2_ftz(fmaf(x[{r}], scale, -red[{j}]));"
                        for r, j in enumerate(plan.dst_of_src)]) if exp2 else [])


def harness(plan: ReducePlan, name: str, command: str = "", src_text: str | None = None,
            dst_text: str | None = None, back_plan: None = None) -> dict:
    """Template values of the harness: one CTA reducing the row-major tensor and broadcasting back."""
    return _values(plan)


#: kind -> (template, its values) of a reduction's files
REDUCE_FILES = {"header": ("reduce.cuh.j2", header), "harness": ("reduce_harness.cu.j2", harness)}
