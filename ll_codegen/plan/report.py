"""Human-readable plan summaries (``llgen plan`` and generated headers), one function per
operation; the registry (``ll_codegen/operations.py``) records which is whose."""
from __future__ import annotations

from typing import Callable

from ll_codegen.core.dtypes import is_packed
from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.gather import GatherPlan
from ll_codegen.plan.mma import MmaPlan
from ll_codegen.plan.mma_mixed import MixedMmaPlan
from ll_codegen.plan.model import instruction_name, shuffle_name
from ll_codegen.plan.plans import LoadPlan, Transfer, steps
from ll_codegen.plan.reduce import ReducePlan
from ll_codegen.plan.tma import tma_summary_lines
from ll_codegen.plan.upcast import UpcastPlan, upcast_lines
from ll_codegen.core.target import get_target


def _vec(v: int, sizes: dict[str, int]) -> str:
    """A flattened tensor bit vector as coordinates, e.g. ``(0, 4)``."""
    return repr(tuple(LinearLayout.from_flat({"x": [v]}, sizes).bases["x"][0]))


def _plan_text(p: Transfer, detail: list[str]) -> str:
    """A Transfer's summary: the headline, the operation's ``detail`` lines,
    broadcast copies and the candidates (the chosen one starred)."""
    width = f"{p.elem_bytes} B = 2 elems packed" if is_packed(p.dtype) else f"{p.elem_bytes} B/elem"
    lines = [f"strategy: {p.strategy}  ({p.dtype}, {width}, {p.target} {p.arch}, "
             f"{p.num_warps} warps x {p.warp_size} lanes, {p.n_src} -> {p.n_dst} registers)"]
    lines += (p.packing.lines() if p.packing is not None else []) + detail
    if p.dst_copies:
        lines.append(f"broadcast copies: {len(p.dst_copies)} registers")
    best = min(range(len(p.candidates)), key=lambda i: p.candidates[i].score) if p.candidates else -1
    width = max([8] + [len(c.strategy) for c in p.candidates])            # wider only for shuffle+smem
    for i, c in enumerate(p.candidates):
        mark = "*" if i == best else " "
        lines.append(f"candidate{mark}{c.strategy:{width}s} score {c.score:8.2f}  {c.detail}")
    return "\n".join(lines)


def convert_summary(p: Transfer) -> str:
    """registers -> registers: the register permutation, the shuffle rounds or the trip
    through shared memory (swizzled layout, accesses, wavefronts, barriers); a staged
    conversion's shuffles to the layout in between first."""
    return _plan_text(p, convert_lines(p))


def convert_lines(p: Transfer) -> list[str]:
    """The steps of a conversion (``convert_summary`` without the headline and candidates)."""
    lines: list[str] = []
    if p.strategy == "butterfly":                   # the chain's steps in order, not nested
        chain = steps(p)
        lines.append(f"butterfly: {len(chain)} shuffle steps, each exchanging one lane bit with one register bit")
        for k, q in enumerate(chain):
            lines.append(f"step {k + 1}: to {q.dst_bases['in_dims']}:" if k + 1 < len(chain) else
                         f"step {k + 1}: to the destination layout:")
            lines += ["  " + line for line in convert_lines(q)]
        return lines
    if p.via is not None:
        lines.append(f"via: warp shuffles to the layout in between {p.via.dst_bases['in_dims']}:")
        lines += ["  " + line for line in convert_lines(p.via)]
        lines.append("then, from that layout:")
    if p.in_registers:
        lines.append(f"registers: dst[i] = src[{list(p.register.dst_from_src)}[i]]")
    if p.by_shuffle:
        s = p.shuffle
        sizes = dict(zip([f"dim{i}" for i in range(len(p.shape))], p.shape))
        nl = p.warp_size.bit_length() - 1
        form = s.lane_form(nl)
        lane = ("lane ^ c" if form is None else f"L(lane) ^ c with L = {list(form.lane)}" if not form.warp
                else f"L(lane) ^ W(warp) ^ c with L = {list(form.lane)}, W = {list(form.warp)}")
        lines.append(f"shuffle: {len(s.rounds)} rounds x {s.words} word(s), {s.vec} element(s) per word, "
                     f"source lane {lane}" + (f", {shuffle_name(p.target)} per word" if p.target == "hip" else ""))
        def how(sel, swaps, fused) -> str:
            if sel.size == 1:
                return "1 way"
            return (f"{sel.size} ways by byte permutes with per-lane selectors" if fused else
                    f"{sel.size} ways by {len(swaps)} swap stage(s) (register xors {list(swaps)})" if swaps
                    else f"{sel.size} ways by select trees")
        by_warp = any(m >> nl for m in s.send_select.masks + s.recv_select.masks)
        lines.append(f"  lane-dependent registers: send {how(s.send_select, s.send_swaps, s.send_fused)}, "
                     f"receive {how(s.recv_select, s.recv_swaps, s.recv_fused)}; {s.selects} selects"
                     + (f" (masks over lane + {p.warp_size} * warp: the warp bits' choices are warp-uniform)"
                        if by_warp else ""))
        for i, r in enumerate(s.rounds):
            send = list(r.send[0]) if len(r.send) == 1 else [list(x) for x in r.send]
            recv = list(r.recv[0]) if len(r.recv) == 1 else [list(x) for x in r.recv]
            lines.append(f"  round {i}: send src{send}, source lane ^ {r.lane_xor:#x}, receive dst{recv}")
        for k in ("V", "I", "E", "F", "G", "R") if s.sets else ():     # (a butterfly step's rounds have none)
            lines.append(f"  {k} = [{', '.join(_vec(v, sizes) for v in s.sets.get(k, ()))}]")
    if p.through_smem:
        m = p.smem
        lines.append(f"smem: {m.bytes} bytes, {len(m.rounds)} round(s), swizzle {m.swizzle}, "
                     f"store {m.store_instr} x{m.store_vec} elements, load {m.load_instr} x{m.load_vec} elements, "
                     f"vector width {m.vector_bytes} B")
        lines.append(f"  offset bases (swizzled memory layout, offset -> tensor element): {m.layout['offset']}")
        if m.layout.get("round"):
            lines.append(f"  round bases: {m.layout['round']}")
        for kind, c in (("store", m.store), ("load", m.load)):
            if p.target == "hip":       # the AMD instruction of each side
                vec = m.store_vec if kind == "store" else m.load_vec
                kind += f" ({instruction_name(p.target, 'vector', kind, vec * p.elem_bytes)})"
            lines.append(f"  {kind}: {c.instructions} instr/warp, {c.wavefronts} wavefronts/instr, "
                         f"{c.bank_conflicts} bank conflicts/instr, {c.total_wavefronts} wavefronts/warp")
        barriers = f"  barriers: {m.block_barriers} block"
        if m.named_barrier is not None:
            barriers += f" as named barrier {m.named_barrier.id} ({m.named_barrier.call}: the calling warps only)"
        if m.warp_barriers:
            slices = f"; per-warp scratch slices of {m.bytes // p.num_warps} bytes" if m.per_warp else ""
            barriers += f" + {m.warp_barriers} warp (each warp reads back only its own bytes{slices})"
        if m.buffers == 2:
            barriers += "; none before the first stores: the caller alternates 2 scratch buffers"
        lines.append(barriers)
        if p.target == "hip":
            lines.append(f"  bank model: {get_target(p.target, p.arch).bank_model}")
    return lines


def upcast_summary(p: UpcastPlan) -> str:
    """An upcast: the headline, the move in the source type (a conversion into the layout I, its
    summary indented), then the in-thread upcast: the sequence, the permutation, the instruction count."""
    mv = p.move
    head = (f"strategy: upcast  ({p.dtype} -> {p.dst_dtype}, {p.target} {p.arch}, {p.num_warps} warps x "
            f"{p.warp_size} lanes, {p.n_src} -> {p.n_dst} registers)")
    move = memory_summary(mv) if isinstance(mv, LoadPlan) else convert_summary(mv)
    return "\n".join([head, "move into I (in the source type):"]
                     + ["  " + line for line in move.splitlines()] + upcast_lines(p))


def memory_summary(p: Transfer) -> str:
    """A store or load: the memory side's instruction and cost (and a ``via`` conversion)."""
    return _plan_text(p, memory_lines(p))


def copy_summary(p: Transfer) -> str:
    """A copy, global tile -> shared tile."""
    return _plan_text(p, copy_lines(p))


def memory_lines(p: Transfer) -> list[str]:
    """The memory side of a store/load plan: where, which instruction, the cost."""
    m = p.memory
    if m.space == "shared":
        c = m.cost
        instr = instruction_name(p.target, m.instr, m.direction, m.vec * p.elem_bytes)
        out = [f"memory: shared tile of {m.bytes} bytes ({m.alignment}-byte aligned), {m.direction} with {instr}, "
               f"{m.vec} element(s) = {m.vec * p.elem_bytes} B per lane per instruction",
               f"  offset bases (given layout, offset -> tensor element): {m.layout['offset']}",
               f"  {m.direction}: {c.instructions} instr/warp, {c.wavefronts} wavefronts/instr, "
               f"{c.bank_conflicts} bank conflicts/instr, {c.total_wavefronts} wavefronts/warp"]
        if p.target == "hip":
            out.append(f"  bank model: {get_target(p.target, p.arch).bank_model}")
    else:
        c = m.cost
        hip = (f" ({instruction_name(p.target, 'vector', m.direction, m.vector_bytes, 'global')})"
               if p.target == "hip" else "")
        out = [f"memory: global tile, order {m.layout['order']}, {m.alignment}-byte aligned, {m.direction} with "
               f"{m.vector_bytes}-byte vectors{hip}" + (" (a run-time alignment path: more below)" if p.paths else ""),
               f"  at strides {list(m.strides)}: {c.instructions} instr/warp (requests), {c.sectors} sectors/instr "
               f"({c.min_sectors} at best), {c.total_sectors} sectors/warp"]
    if m.warp_skip or m.lane_skip:
        out.append(f"  stores skipped by warps & {m.warp_skip:#x}, lanes & {m.lane_skip:#x} (broadcast copies)")
    if p.via is not None:
        v = p.via
        when = "before the stores" if m.direction == "store" else "after the loads"
        out.append(f"  via: {when}, a conversion to the coalesced layout "
                   f"{v.dst_bases['in_dims'] if m.direction == 'store' else v.src_bases['in_dims']}:")
        out += ["    " + line for line in convert_summary(v).splitlines()]
    return out + path_lines(p, memory_lines, lambda q: q.memory.vector_bytes)


def path_lines(p: Transfer, lines_of: Callable[[Transfer], list[str]],
               vector_of: Callable[[Transfer], int]) -> list[str]:
    """Run-time alignment: each narrower path (``p.paths``) stated like the plan itself."""
    out = []
    for q in p.paths:
        v = vector_of(q)
        last = q is p.paths[-1]
        out.append(f"  else path a{v} ({'the promise' if last else f'pointer and strides multiples of {v} B'}):")
        out += ["    " + line for line in lines_of(q)]
    return out


def tma_summary(p: Transfer) -> str:
    """A TMA copy: the box, the swizzle, each box's shared offset and coordinates."""
    return _plan_text(p, tma_summary_lines(p.tma))


def copy_lines(p: Transfer) -> list[str]:
    """A copy plan: the thread mapping, the global reads and the shared writes."""
    c = p
    ld, st = c.load.cost, c.store.cost
    how = "cp.async" if c.async_copy else "a global load and a shared store through a register"
    if p.target == "hip":
        how = (f"{instruction_name(p.target, 'vector', 'load', c.load.vector_bytes, 'global')} and "
               f"{instruction_name(p.target, 'vector', 'store', c.store.vector_bytes)} through a register")
    return [f"copy: global tile (order {c.load.layout['order']}, {c.load.alignment}-byte aligned) -> shared tile of "
            f"{c.store.bytes} bytes, {c.load.vector_bytes} B per thread per copy, by {how}",
            f"  thread mapping (register, lane, warp -> tensor): {c.mapping['in_dims']}",
            f"  global: {ld.instructions} copies/warp, {ld.sectors} sectors/instr ({ld.min_sectors} at best) at strides "
            f"{list(c.load.strides)}",
            f"  shared: {st.wavefronts} wavefronts/instr, {st.bank_conflicts} bank conflicts/instr, "
            f"{st.total_wavefronts} wavefronts/warp"] + path_lines(p, copy_lines, lambda q: q.load.vector_bytes)


def relayout_summary(p: Transfer) -> str:
    """A shared tile -> shared tile relayout: each side's instruction, vector bytes, wavefronts and
    conflicts per warp against the bound, and the conversion in between."""
    target = get_target(p.target, p.arch)
    lines = [f"relayout: shared tile of {p.load.memory.bytes} bytes -> registers R1 -> R2 -> shared tile of "
             f"{p.store.memory.bytes} bytes (no barrier inside, no scratch)"]
    for side, step, regs in (("load", p.load, p.load.dst_bases), ("store", p.store, p.store.src_bases)):
        m, c = step.memory, step.memory.cost
        movers = sum(1 for v in regs["in_dims"].get("warp", []) if any(v))
        bound = -(-(m.bytes >> movers) // target.wavefront_bytes)
        instr = instruction_name(p.target, m.instr, m.direction, m.vec * p.elem_bytes)
        lines += [f"  {side}: {instr}, {m.vector_bytes} B per lane per instruction, {c.instructions} instr/warp, "
                  f"{c.wavefronts} wavefronts/instr, {c.bank_conflicts} bank conflicts/instr, "
                  f"{c.total_wavefronts} wavefronts/warp (bound {bound}: {m.bytes >> movers} B a warp / "
                  f"{target.wavefront_bytes} B)",
                  f"    register layout {'R1' if side == 'load' else 'R2'}: {regs['in_dims']}"]
        if side == "load":
            cv = p.convert
            lines.append(f"  conversion R1 -> R2: {cv.strategy}" + ("" if cv.strategy == "noop" else ":"))
            if cv.strategy != "noop":
                lines += ["    " + line for line in convert_lines(cv)]
    if p.load.memory.warp_skip:
        lines.append(f"  warps with warp & {p.load.memory.warp_skip:#x} hold copies (zero warp bases of R1 and R2): "
                     f"they neither load nor store")
    if p.target == "hip":
        lines.append(f"  bank model: {target.bank_model}")
    return _plan_text(p, lines)


def gather_summary(p: GatherPlan) -> str:
    """A gather: sizes, the shuffle candidates per output or the shared-memory round trip."""
    lines = [f"gather along axis {p.axis}: {p.strategy}  ({p.dtype}, index {p.index_dtype}, "
             f"{p.target} {p.arch}, warp {p.warp_size} x {p.num_warps} warps)",
             f"  source {list(p.src_shape)}: {p.n_src} registers/thread; index/output "
             f"{list(p.idx_shape)}: {p.n_idx} registers/thread; indices mod {p.axis_size}"]
    if p.strategy == "shuffle":
        s = p.shuffle
        n = len(s.outs[0].cands) if s.outs else 0
        lines.append(f"  shuffle: {n} candidate register(s) per output element, {s.per} per word, "
                     f"{s.shuffles} shuffles per thread")
    if p.strategy == "smem":
        m = p.smem
        lines.append(f"  smem: {m.bytes} bytes; store {m.vector_bytes}-byte vectors x{len(m.stores)} "
                     f"({m.store.wavefronts} wavefront(s), {m.store.bank_conflicts} conflicts/instr); "
                     f"{p.n_idx} loads, {m.load_wavefronts:.2f} wavefronts/instr on random indices")
    lines.append("  candidates (cheapest first):")
    lines += [f"    {c.strategy:8s} {c.score:9.2f}  {c.detail}" for c in p.candidates]
    return "\n".join(lines) + "\n"


def mma_summary(p: MmaPlan) -> str:
    """An MMA: the instruction, how each operand is read, the steps."""
    M, N, K = p.shape
    types = p.dtype if p.a_dtype is None else f"A {p.a_dtype}, B {p.dtype}"
    lines = [f"mma: {p.instr}  (acc {M}x{N} += A {M}x{K} * B {K}x{N}, {types} -> {p.acc_dtype}, "
             f"{p.target} {p.arch}, {p.num_warps} warps x {p.warp_size} lanes)",
             f"  {len(p.steps)} instructions per thread ({len({s.acc for s in p.steps})} accumulator tiles x "
             f"{K // p.instr_shape[2]} k-steps), {p.acc_regs} accumulator registers"]
    if p.swap_ab:
        lines.append("  transposed accumulator: each instruction computes D^T = B^T A^T (B's registers first)")
    for name, op in (("A", p.a), ("B", p.b)):
        if op.space == "registers":
            lines.append(f"  {name}: registers, {op.regs} words per thread")
        else:
            d = op.descriptor
            lines.append(f"  {name}: shared tile of {op.bytes} B ({op.align}-byte aligned), "
                         f"{'K' if d.k_major else 'MN'}-major, swizzle {d.swizzle_bytes or 'none'}, "
                         f"LBO {d.lbo_bytes} B, SBO {d.sbo_bytes} B")
    return "\n".join(lines)


def reduce_summary(p: ReducePlan) -> str:
    """A reduction: sizes, the in-thread groups, the butterfly lane rounds, the warp stage, the candidate."""
    dims = ", ".join(map(str, p.dims))
    lines = [f"reduce {p.combine} over dim(s) {dims}: {p.strategy}  ({p.dtype}, {p.target} {p.arch}, "
             f"{p.num_warps} warps x {p.warp_size} lanes, {p.n_src} -> {p.n_dst} registers)",
             f"  source {list(p.shape)} -> result {list(p.result_shape)} (the slice layout of dim(s) {dims})"]
    sizes = sorted({len(g.srcs) for g in p.groups})
    lines.append(f"  in thread: {len(p.groups)} result register(s), each a pairwise tree of "
                 f"{' or '.join(map(str, sizes))} source register(s), neighbours first"
                 + (f"; {p.n_src - sum(len(g.srcs) for g in p.groups)} broadcast register(s) skipped"
                    if p.n_src > sum(len(g.srcs) for g in p.groups) else ""))
    if p.lane_xors:
        masks = ", ".join(f"{m:#x}" for m in p.lane_xors)
        lines.append(f"  lanes: {len(p.lane_xors)} butterfly round(s), lane xor {masks} (lowest first), "
                     f"{p.shuffles} shuffle(s) per thread")
    else:
        lines.append("  lanes: none (no reduced lane bit)")
    w = p.warps
    if w is not None:
        who = " and ".join(f"{v} & {m:#x} == 0" for v, m in (("lane", w.lane_skip), ("warp", w.warp_skip)) if m)
        lines.append(f"  warps: {w.parts} partials per output (reduced warp bit(s) {list(w.warp_bits)}) through "
                     f"{w.bytes} B of shared memory ({w.outputs} outputs); writers: {who or 'every thread'}; "
                     f"{w.barriers} barriers"
                     + (f" as named barrier {w.named_barrier.id} ({w.named_barrier.call}: the calling warps only)"
                        if w.named_barrier is not None else ""))
        if w.spread:
            lines.append(f"  form: spread -- thread t combines the partials of outputs t, t + {w.stride}, ... "
                         f"(at most {w.share} a thread), stores each result at scratch element "
                         f"{f'{w.results} + o' if w.results else 'o (partial 0 of o, read only by that thread)'}, "
                         f"a barrier, then every thread loads its {p.n_dst} result(s)")
        else:
            lines.append(f"  form: direct -- every thread loads and combines the {w.parts} partials of each of its "
                         f"{p.n_dst} output(s)")
    else:
        lines.append("  warps: none (no reduced warp bit; no shared memory, no barrier)")
    chosen = ("smem-spread" if w.spread else "smem") if w is not None else p.strategy
    lines.append("  candidates (cheapest first; * the plan's):")
    lines += [f"   {'*' if c.strategy == chosen else ' '}{c.strategy:11s} {c.score:9.2f}  {c.detail}"
              for c in p.candidates]
    return "\n".join(lines) + "\n"


def mixed_mma_summary(p: MixedMmaPlan) -> str:
    """A mixed-input MMA: the headline, then its two plans' summaries indented (the upcast of A into
    the MMA's A fragment, the MMA with A from registers)."""
    M, N, K = p.shape
    head = (f"mixed-input mma: acc {M}x{N} += upcast(A {M}x{K}, {p.a_dtype} -> {p.dtype}) * B {K}x{N} ({p.dtype}), "
            f"{p.kind}, {p.target} {p.arch}; A {'from a shared tile' if p.a_shared else 'from registers'}")
    return "\n".join([head, "1. upcast of A into the MMA's A fragment:"]
                     + ["  " + line for line in upcast_summary(p.upcast).splitlines()]
                     + ["2. the MMA, A from registers:"] + ["  " + line for line in mma_summary(p.mma).splitlines()])
