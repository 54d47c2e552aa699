"""Render a global -> shared tile copy (``plan.operation == "copy"``):
``copy()``, ``copy_masked()``, ``commit()``/``wait<N>()`` and the harness.

Per pair of accesses (a global vector at the thread's coordinates, a shared
vector at ``base ^ offset``) one ``cp.async`` of the same bytes or, without
it, one global load and one shared store through a register.  The masked form
zero-fills what lies beyond ``extent``: through cp.async's source size, or
element by element where the edge cuts a vector.  Threads holding broadcast
copies of an element skip their copies, so every shared byte is written once.
"""
from __future__ import annotations

from dataclasses import replace

from ll_codegen.core.dtypes import C_RAW
from ll_codegen.core.layout import layout_of
from ll_codegen.emit.body import (TID, Builder, Fn, Namespace, alignment_dispatch, constants, harness_context,
                                  header_values, new_namespace, path_name, use_instruction)
from ll_codegen.emit.cexpr import tile_index_function
from ll_codegen.emit.instructions import CP_ASYNC_GROUPS
from ll_codegen.plan.plans import Transfer
from ll_codegen.plan.report import copy_summary
from ll_codegen.plan.tma import align_reason


class CopyBuilder(Builder):
    """The body of ``copy()`` (``masked``: ``copy_masked()``), always in the element view."""

    def build(self, masked: bool = False) -> Fn:
        self.memory_copy(masked)
        return self.fn

    def memory_copy(self, masked: bool) -> None:
        """Global tile -> shared tile: per access pair one cp.async (zero-filling
        what lies beyond ``extent`` through its source size) or, without
        cp.async, a global load and a shared store of the same bytes."""
        p = c = self.p
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
        t = self.vec_type(n) if n >= 4 or not self.cuda else C_RAW[n]
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


def copy_functions(plan: Transfer, conv: Namespace) -> list[Fn]:
    """copy() and copy_masked(): global tile -> shared tile."""
    c = plan
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
    fn = Fn("copy", f"{params}, {TID}", doc=doc)
    CopyBuilder(plan, conv, fn, element_view=True).build()
    masked = Fn("copy_masked", f"{params}, const int (&extent)[kRank], {TID}",
                doc=["// copy_masked(): the same for a tile cut by the tensor's edge: extent[d] elements along dim d",
                     "// are valid (from the tile's origin); the shared tile holds zeros beyond them."])
    CopyBuilder(plan, conv, masked, element_view=True).build(masked=True)
    return [fn, masked]


def namespace(plan: Transfer, name: str) -> Namespace:
    """The generated namespace of a copy: constants, tile_index, copy(), copy groups."""
    conv = new_namespace(plan, name)
    p = c = plan
    head = [(f"constexpr int kTileBytes = {c.store.bytes};", "bytes of the shared tile"),
            (f"constexpr int kTileAlign = {c.store.alignment};", align_reason(c.store.alignment)),
            (f"__attribute__((unused)) constexpr int kOrder[{len(p.shape)}] = "
             f"{{{', '.join(map(str, c.load.layout['order']))}}};", "global tile: kOrder[0] has stride 1"),
            (f"constexpr int kAlignment = {(p.paths[-1] if p.paths else c).load.alignment};",
             "bytes the global tile and its strides are aligned to (promised)")]
    conv.constants = constants(plan, head)          # no registers on either side: no word counts
    if plan.paths:                                  # run-time alignment: a nested namespace per path
        every = (replace(plan, paths=()), *plan.paths)
        conv.nested = [namespace(q, path_name(q.load.vector_bytes)) for q in every]
        params = "const T* tile, const long long (&strides)[kRank], void* smem"
        conv.functions = alignment_dispatch(
            plan, [(q.load.vector_bytes, f"{'cp.async' if q.async_copy else 'ld + st'} "
                    f"{q.load.vector_bytes} B, {q.load.cost.sectors} sectors/instr") for q in every],
            [("copy", params, "tile, strides, smem"),
             ("copy_masked", f"{params}, const int (&extent)[kRank]", "tile, strides, smem, extent")])
        conv.copy_groups = any(q.async_copy for q in every)   # one commit()/wait<N>() for every path
    else:
        conv.functions = copy_functions(plan, conv)
        conv.copy_groups = c.async_copy
    for group in CP_ASYNC_GROUPS if conv.copy_groups else ():   # commit() and wait<N>()
        use_instruction(conv, group)
    conv.index_functions = ["// Row-major index of the element at element offset `offset` of the shared tile.",
                            tile_index_function(layout_of(plan.dst_bases))]
    return conv


header = header_values(namespace, copy_summary)


def harness(plan: Transfer, name: str, command: str = "", src_text: str | None = None,
            dst_text: str | None = None, back_plan: Transfer | None = None) -> dict:
    """Template values of the harness (whole and masked tiles) and of the probe kernel."""
    return dict(conv=namespace(plan, name), **harness_context(plan, plan.load))


#: kind -> (template, its values) of a copy's files (no bench: it times register conversions)
COPY_FILES = {"header": ("header.cuh.j2", header), "harness": ("harness_copy.cu.j2", harness)}
