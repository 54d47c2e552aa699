"""Human-readable plan summaries (``llgen plan`` and generated headers)."""
from __future__ import annotations

from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.model import ConversionPlan, instruction_name, shuffle_name
from ll_codegen.core.target import get_target


def _vec(v: int, sizes: dict[str, int]) -> str:
    """A flattened tensor bit vector as coordinates, e.g. ``(0, 4)``."""
    return repr(tuple(LinearLayout.from_flat({"x": [v]}, sizes).bases["x"][0]))


def summary(plan: ConversionPlan) -> str:
    """Several lines: strategy, its steps and costs, and every candidate's score."""
    p = plan
    lines = [f"strategy: {p.strategy}  ({p.dtype}, {p.elem_bytes} B/elem, {p.target} {p.arch}, "
             f"{p.num_warps} warps x {p.warp_size} lanes, {p.n_src} -> {p.n_dst} registers)"]
    if p.register is not None:
        lines.append(f"registers: dst[i] = src[{list(p.register.dst_from_src)}[i]]")
    if p.shuffle is not None:
        s = p.shuffle
        sizes = dict(zip([f"dim{i}" for i in range(len(p.shape))], p.shape))
        lane = "lane ^ c" if s.src_lane is None else f"L(lane) ^ c with L = {list(s.src_lane)}"
        lines.append(f"shuffle: {len(s.rounds)} rounds x {s.words} word(s), {s.vec} element(s) per word, "
                     f"source lane {lane}" + (f", {shuffle_name(p.target)} per word" if p.target == "hip" else ""))
        def how(sel, swaps) -> str:
            if sel.size == 1:
                return "1 way"
            return (f"{sel.size} ways by {len(swaps)} swap stage(s) (register xors {list(swaps)})" if swaps
                    else f"{sel.size} ways by select trees")
        lines.append(f"  lane-dependent registers: send {how(s.send_select, s.send_swaps)}, "
                     f"receive {how(s.recv_select, s.recv_swaps)}; {s.selects} selects")
        for i, r in enumerate(s.rounds):
            send = list(r.send[0]) if len(r.send) == 1 else [list(x) for x in r.send]
            recv = list(r.recv[0]) if len(r.recv) == 1 else [list(x) for x in r.recv]
            lines.append(f"  round {i}: send src{send}, source lane ^ {r.lane_xor:#x}, receive dst{recv}")
        for k in ("V", "I", "E", "F", "G", "R"):
            lines.append(f"  {k} = [{', '.join(_vec(v, sizes) for v in s.sets.get(k, ()))}]")
    if p.smem is not None:
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
        if m.warp_barriers:
            slices = f"; per-warp scratch slices of {m.bytes // p.num_warps} bytes" if m.per_warp else ""
            barriers += f" + {m.warp_barriers} warp (each warp reads back only its own bytes{slices})"
        if m.buffers == 2:
            barriers += "; none before the first stores: the caller alternates 2 scratch buffers"
        lines.append(barriers)
        if p.target == "hip":
            lines.append(f"  bank model: {get_target(p.target, p.arch).bank_model}")
    if p.memory is not None:
        lines += memory_lines(p)
    if p.copy is not None:
        lines += copy_lines(p)
    if p.dst_copies:
        lines.append(f"broadcast copies: {len(p.dst_copies)} registers")
    best = min(range(len(p.candidates)), key=lambda i: p.candidates[i].score) if p.candidates else -1
    for i, c in enumerate(p.candidates):
        mark = "*" if i == best else " "
        lines.append(f"candidate{mark}{c.strategy:8s} score {c.score:8.2f}  {c.detail}")
    return "\n".join(lines)


def memory_lines(p: ConversionPlan) -> list[str]:
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
               f"{m.vector_bytes}-byte vectors{hip}",
               f"  at strides {list(m.strides)}: {c.instructions} instr/warp (requests), {c.sectors} sectors/instr "
               f"({c.min_sectors} at best), {c.total_sectors} sectors/warp"]
    if m.warp_skip or m.lane_skip:
        out.append(f"  stores skipped by warps & {m.warp_skip:#x}, lanes & {m.lane_skip:#x} (broadcast copies)")
    if p.via is not None:
        v = p.via
        when = "before the stores" if m.direction == "store" else "after the loads"
        out.append(f"  via: {when}, a conversion to the coalesced layout "
                   f"{v.dst_bases['in_dims'] if m.direction == 'store' else v.src_bases['in_dims']}:")
        out += ["    " + line for line in summary(v).splitlines()]
    return out


def copy_lines(p: ConversionPlan) -> list[str]:
    """A copy plan: the thread mapping, the global reads and the shared writes."""
    c = p.copy
    ld, st = c.load.cost, c.store.cost
    how = "cp.async" if c.async_copy else "a global load and a shared store through a register"
    if p.target == "hip":
        how = (f"{instruction_name(p.target, 'vector', 'load', c.load.vector_bytes, 'global')} and "
               f"{instruction_name(p.target, 'vector', 'store', c.store.vector_bytes)} through a register")
    return [f"copy: global tile (order {c.load.layout['order']}, {c.load.alignment}-byte aligned) -> shared tile of "
            f"{c.store.bytes} bytes, {c.load.vector_bytes} B per thread per copy, by {how}",
            f"  thread mapping (register, lane, warp -> tensor): {c.threads['in_dims']}",
            f"  global: {ld.instructions} copies/warp, {ld.sectors} sectors/instr ({ld.min_sectors} at best) at strides "
            f"{list(c.load.strides)}",
            f"  shared: {st.wavefronts} wavefronts/instr, {st.bank_conflicts} bank conflicts/instr, "
            f"{st.total_wavefronts} wavefronts/warp"]
