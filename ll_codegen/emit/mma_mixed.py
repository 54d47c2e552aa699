"""Render a mixed-input MMA (``plan.operation == "mma_mixed"``, ``plan/mma_mixed.py``): one header
holding the upcast's namespace (``upcast``, as ``llgen convert --dst-dtype`` renders it) and the MMA's
(``tile``, as ``llgen mma`` renders it), and around them the calls a kernel author makes:

* ``load_a(smem_a, [scales,] a)`` (A a shared tile) or ``convert_a(src, [scales,] a, smem)`` (A in
  registers): A upcast into the MMA's A fragment ``a`` (``kAWords`` 32-bit words);
* ``mma(acc, a, b)``: ``acc += a @ B``, the MMA's own ``mma()``;
* ``mma_upcast(acc, <A>, [scales,] b)``: both, and for wgmma the ``fence()`` between them (A's
  registers are written before the asynchronous MMA reads them); the caller commits and waits.

Every value here is a forwarding line or a re-exported name: the code that moves, widens and
multiplies is the two plans' own.
"""
from __future__ import annotations

from ll_codegen.core.dtypes import C_RAW, is_packed
from ll_codegen.emit import mma as emit_mma, upcast as emit_upcast
from ll_codegen.emit.body import Fn
from ll_codegen.emit.cexpr import comment_lines, signature
from ll_codegen.emit.packed import param_names
from ll_codegen.plan.mma_mixed import MixedMmaPlan
from ll_codegen.plan.report import mixed_mma_summary

#: the nested namespaces' names
UPCAST_NS, MMA_NS = "upcast", "tile"
#: the MMA's names re-exported into the header's namespace, always / with wgmma
MMA_NAMES = ("kThreads", "kWarpSize", "kM", "kN", "kK", "kAccRegs", "kAWords", "acc_index", "a_index")
WGMMA_NAMES = ("fence", "commit", "wait", "wait_acc", "fence_smem", "regs_dec", "regs_inc")


def _split(params: str) -> list[str]:
    return [p.strip() for p in params.split(", ") if p.strip()]


def _a_function(plan: MixedMmaPlan, up) -> tuple[str, Fn]:
    """(the name of the glue function that upcasts A, the upcast namespace's function it forwards to)."""
    want = "load" if plan.a_shared else "convert"
    return ("load_a" if plan.a_shared else "convert_a"), next(f for f in up.functions if f.name == want)


def a_raw(plan: MixedMmaPlan) -> str:
    """The C type of A's registers and tile elements: a byte (8-bit codes, a 4-bit type's two), or the
    16-bit float's bits."""
    return C_RAW[plan.upcast.elem_bytes]


def glue(plan: MixedMmaPlan, up) -> tuple[list[str], list[str]]:
    """(the re-exported names, the glue functions' lines) of the header's namespace."""
    mm = plan.mma
    names = [f"using {MMA_NS}::{n};" for n in MMA_NAMES]
    if mm.b.space == "registers":
        names += [f"using {MMA_NS}::kBWords;", f"using {MMA_NS}::b_index;"]
    else:
        names += [f"using {MMA_NS}::{n};" for n in ("kTileBytesB", "kTileAlignB", "b_tile_index")]
    if mm.kind == "wgmma":
        names += [f"using {MMA_NS}::{n};" for n in WGMMA_NAMES]
    if plan.upcast.scaling is not None:
        names += [f"using {UPCAST_NS}::kScaleRegs;", f"using {UPCAST_NS}::scale_index;"]
    packed = " (two elements a byte)" if is_packed(plan.a_dtype) else ""
    raw = a_raw(plan)
    units, unit = ("bytes", "byte") if plan.upcast.elem_bytes == 1 else (f"{plan.a_dtype} elements", "element")
    if plan.a_shared:
        names += [f"constexpr int kTileBytesA = {UPCAST_NS}::kTileBytes;  // bytes of A's shared tile{packed}",
                  f"constexpr int kTileAlignA = {UPCAST_NS}::kTileAlign;",
                  f"// Row-major index in A's {units}{packed} of the {unit} at offset `offset` of A's tile.",
                  "__host__ __device__ constexpr int a_tile_index(int offset) { return "
                  f"{UPCAST_NS}::tile_index(offset); }}"]
    else:
        names += [f"constexpr int kASrcRegs = {UPCAST_NS}::kSrcRegs;  // {units} of A per thread{packed}",
                  f"constexpr int kSmemBytesA = {UPCAST_NS}::kSmemBytes;  // shared scratch convert_a() needs (0: none)",
                  f"// Row-major index in A's {units}{packed} of the {unit} register `reg` of (lane, warp) holds.",
                  "__host__ __device__ constexpr int a_src_index(int reg, int lane, int warp) { return "
                  f"{UPCAST_NS}::src_index(reg, lane, warp); }}"]
    name_a, f = _a_function(plan, up)
    rename = {"dst": "a", "smem": "smem_a" if plan.a_shared else "smem"}
    a_params = [p.replace("T (&", f"{raw} (&").replace("(&dst)[kDstWords]", "(&a)[kAWords]")
                .replace("kSrcRegs", "kASrcRegs").replace("void* smem", "void* " + rename["smem"])
                for p in _split(f.params)]
    a_args = [rename.get(x, x) for x in param_names(f.params)]
    mma_params = _split(emit_mma.namespace_values(mm, MMA_NS)["params"])
    mma_args = param_names(", ".join(mma_params))
    src = f"the shared tile smem_a, {unit} o of A's a_tile_index(o)" if plan.a_shared else \
        f"this thread's registers src, {unit} r of A's a_src_index(r, lane, warp)" + (
            "; smem: kSmemBytesA of scratch" if plan.upcast.smem_bytes else "")
    scales = (f", times the {plan.upcast.scaling.dtype} scales of its groups (scale_index)"
              if plan.upcast.scaling is not None else "")
    lines = [f"// {name_a}(): A ({plan.a_dtype}{packed}, from {src}) -> the MMA's A fragment a",
             f"// ({plan.dtype}, a_index(r, lane, warp) the element of r), exactly{scales}: {UPCAST_NS}::{f.name}.",
             signature(f"__device__ __forceinline__ void {name_a}", ", ".join(a_params)),
             f"    {UPCAST_NS}::{f.name}<{raw}>({', '.join(a_args)});", "}", "",
             f"// mma(): acc += a * B, {MMA_NS}::mma ({len(mm.steps)} x {mm.instr} per thread"
             + (", asynchronous: fence() before, commit() and wait_acc() after)." if mm.kind == "wgmma" else ")."),
             signature("__device__ __forceinline__ void mma", ", ".join(mma_params)),
             f"    {MMA_NS}::mma({', '.join(mma_args)});", "}", ""]
    # the fused call: A's parameters (less a), then B's, then the defaulted ones of both, each once
    own = [p for p in a_params if "(&a)" not in p and "=" not in p]
    b_param = [p for p in mma_params[2:] if "=" not in p]
    tail = [p for p in mma_params if "=" in p] + [p for p in a_params if "=" in p and p not in mma_params]
    fused = [mma_params[0]] + own + b_param + tail
    body = ["    uint32_t a[kAWords];", f"    {name_a}({', '.join(a_args)});"]
    if mm.kind == "wgmma":
        body.append("    fence();  // a's registers written before the asynchronous MMA reads them")
    body.append(f"    mma({', '.join(mma_args)});")
    lines += [f"// mma_upcast(): {name_a}() then mma() in one call"
              + (" (and the fence() between them; commit() and wait_acc() are the caller's)."
                 if mm.kind == "wgmma" else "."),
              signature("__device__ __forceinline__ void mma_upcast", ", ".join(fused))] + body + ["}"]
    return names, lines


def header(plan: MixedMmaPlan, name: str, command: str = "", src_text: str | None = None,
           dst_text: str | None = None, back_plan=None) -> dict:
    """Values of ``mma_mixed.cuh.j2``: the comment, the host includes, the upcast's namespace (``up``),
    the MMA's values (``mm``) and the glue."""
    comment = comment_lines(f"Generated by ll_codegen. Do not edit.\nCommand: {command or '(library call)'}\n\n"
                            f"Plan:\n{mixed_mma_summary(plan)}")
    up = emit_upcast.namespace(plan.upcast, UPCAST_NS)
    mm = emit_mma.namespace_values(plan.mma, MMA_NS)
    names, lines = glue(plan, up)
    return dict(comment=comment, host_includes=mm["host_includes"], up=up, mm=mm, mma_ns=MMA_NS, names=names,
                glue=lines)


def harness(plan: MixedMmaPlan, name: str, command: str = "", src_text: str | None = None,
            dst_text: str | None = None, back_plan=None) -> dict:
    """Values of ``harness_mma_mixed.cu.j2``: A's bytes (and its scales) in, B row-major in, the
    accumulator in and out; the MMA harness's own values for B and the accumulator."""
    mm = emit_mma.harness(plan.mma, name)
    c = plan.upcast.scaling
    scale_off, zero_off = plan.input_offsets
    return dict(mm, b_off=0, a_off=plan.a_offset, smem_bytes=plan.smem_bytes, a_shared=plan.a_shared,
                a_fn=_a_function(plan, emit_upcast.namespace(plan.upcast, UPCAST_NS))[0],
                scale_t=("uint8_t" if c.dtype == "e8m0" else "uint16_t") if c else "", zero=bool(c and c.zero_point),
                scale_args=(", sc, zr" if c.zero_point else ", sc") if c else "", scale_offset=scale_off,
                zero_offset=zero_off, a_dtype=plan.a_dtype, a_raw=a_raw(plan), mma_ns=MMA_NS)


#: kind -> (template, its values) of a mixed-input MMA's files
MMA_MIXED_FILES = {"header": ("mma_mixed.cuh.j2", header), "harness": ("harness_mma_mixed.cu.j2", harness)}
