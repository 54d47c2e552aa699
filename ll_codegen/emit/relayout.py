"""Render a shared tile -> shared tile relayout (``plan.operation == "relayout"``): ``relayout()``
and its harness.

The three steps of the plan are nested namespaces, each rendered by its own operation's
emitter: ``src`` (the load of the source tile into R1, ``emit/memory.py``), ``cvt`` (R1 -> R2 in
registers or by warp shuffles, ``emit/convert.py``; absent when R1 = R2) and ``dst`` (the store
of R2 into the destination tile).  ``relayout()`` chains them through registers of this thread:
no barrier inside and no scratch -- the caller's contract is in its doc comment.
"""
from __future__ import annotations

from ll_codegen.core.layout import layout_of
from ll_codegen.emit.body import TID, Fn, Namespace, constants, harness_context, header_values, new_namespace
from ll_codegen.emit.cexpr import hex_const, tile_index_function
from ll_codegen.emit.convert import namespace as convert_namespace
from ll_codegen.emit.memory import access_name, namespace as memory_namespace
from ll_codegen.plan.plans import Transfer
from ll_codegen.plan.report import relayout_summary
from ll_codegen.plan.tma import align_reason


def relayout_function(plan: Transfer) -> Fn:
    """``relayout(src, dst, tid)``: the load, the conversion (unless R1 = R2), the store; warps the
    load skips (``warp_skip``: they hold copies) return first."""
    ld, cv, st = plan.load, plan.convert, plan.store
    moved = cv.strategy != "noop"
    how = {"register": "register moves", "shuffle": "warp shuffles"}.get(cv.strategy, cv.strategy)
    doc = ["// relayout(): the tensor in the shared tile at src_smem (kSrcTileBytes bytes, kSrcTileAlign-byte aligned,",
           "// laid out as src_tile_index says) is written into the shared tile at dst_smem (kDstTileBytes bytes,",
           "// kDstTileAlign-byte aligned, laid out as dst_tile_index says) by the kThreads threads, through registers:",
           f"// {len(ld.memory.accesses)} x {access_name(ld)} per thread, "
           + (f"then {how} (cvt::convert), " if moved else "")
           + f"then {len(st.memory.accesses)} x {access_name(st)}.",
           f"// Per warp: {ld.memory.cost.total_wavefronts} load and {st.memory.cost.total_wavefronts} store "
           f"wavefronts ({ld.memory.cost.bank_conflicts} + {st.memory.cost.bank_conflicts} bank conflicts per "
           f"instruction).",
           "// Contract: no barrier inside. Before the call the whole source tile is written and visible to every",
           "// calling thread (e.g. __syncthreads() after the writes, or a completed TMA/cp.async wait); after it,",
           "// a barrier (__syncthreads()) before any thread reads the destination tile. The tiles must not",
           "// overlap: every thread stores while other warps may still be loading. Every one of the kThreads",
           "// threads calls, with tid in [0, kThreads)."]
    skip = ld.memory.warp_skip              # the store's too (plan/relayout.py); checked by the emulator
    if skip:
        doc.append(f"// Warps with warp & {hex_const(skip)} hold copies of other warps' data: they return at once "
                   "(no load, no store).")
    lines = ([f"if (((tid / kWarpSize) & {hex_const(skip)}) != 0) return;  // copies: nothing to load or store"]
             if skip else [])
    lines += ["T r1[src::kRegs];", "src::load(src_smem, r1, tid);"]
    if moved:
        lines += ["T r2[cvt::kDstRegs];", "cvt::convert(r1, r2, nullptr, tid);  // no scratch: registers or shuffles",
                  "dst::store(r2, dst_smem, tid);"]
    else:
        lines += ["dst::store(r1, dst_smem, tid);"]
    return Fn("relayout", f"const void* src_smem, void* dst_smem, {TID}", doc=doc, moves=lines)


def namespace(plan: Transfer, name: str) -> Namespace:
    """The generated namespace of a relayout: constants, both tile index functions, the three steps
    as nested namespaces, relayout()."""
    if name in ("src", "cvt", "dst"):      # the harness's `using namespace NAME;` would make NAME:: ambiguous
        raise ValueError(f"--name {name}: a relayout's header nests the namespaces src, cvt and dst; pick another")
    conv = new_namespace(plan, name)
    ld, st = plan.load.memory, plan.store.memory
    head = [(f"constexpr int kSrcTileBytes = {ld.bytes};", "bytes of the source tile"),
            (f"constexpr int kSrcTileAlign = {ld.alignment};", align_reason(ld.alignment)),
            (f"constexpr int kDstTileBytes = {st.bytes};", "bytes of the destination tile"),
            (f"constexpr int kDstTileAlign = {st.alignment};", align_reason(st.alignment)),
            (f"constexpr int kDstOffset    = {plan.dst_offset};", "the harness's destination tile, after the source")]
    conv.constants = constants(plan, head)
    conv.nested = [memory_namespace(plan.load, "src")]
    if plan.convert.strategy != "noop":
        conv.nested.append(convert_namespace(plan.convert, "cvt", nested=True))
    conv.nested.append(memory_namespace(plan.store, "dst"))
    conv.functions = [relayout_function(plan)]
    conv.index_functions = [
        "// Row-major index of the element at element offset `offset` of the source / destination tile.",
        tile_index_function(layout_of(plan.src_bases)).replace("tile_index(", "src_tile_index(", 1),
        tile_index_function(layout_of(plan.dst_bases)).replace("tile_index(", "dst_tile_index(", 1)]
    return conv


header = header_values(namespace, relayout_summary)


def harness(plan: Transfer, name: str, command: str = "", src_text: str | None = None,
            dst_text: str | None = None, back_plan: Transfer | None = None) -> dict:
    """Template values of the harness (the tensor into the source tile, relayout(), the destination tile
    back) and of the probe kernel."""
    return dict(conv=namespace(plan, name), **harness_context(plan, plan.store.memory))


#: kind -> (template, its values) of a relayout's files (no bench file: bench/bench_relayout.py times it)
RELAYOUT_FILES = {"header": ("header.cuh.j2", header), "harness": ("harness_relayout.cu.j2", harness)}
