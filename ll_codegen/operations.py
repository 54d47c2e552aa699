"""The operations: one registry that every stage and the API dispatch through.

An operation is a plan type registered once.  Its record (``Operation``) holds
what each stage does with its plans -- the planner, the readable summary, the
files it renders (kind -> template and the function computing its values), the
emulator check, the harness's inputs and expected outputs, the PTX each
harness thread must issue -- and the endpoints it moves between, by which the
API chooses it.  Nothing else keeps a table keyed by operation.

==========  ==========================================  ========================  ================
operation   moves                                       endpoints                 command
==========  ==========================================  ========================  ================
``convert`` registers -> registers                      registers, registers      ``llgen convert``
``upcast``  registers or a tile -> registers of a wider   registers|shared|global,  ``llgen convert``
            type (``--dst-dtype``: the move, then         registers                 ``--dst-dtype``
            in-thread)
``store``   registers -> a shared or global tile        registers, shared|global  ``llgen convert``
``load``    a shared or global tile -> registers        shared|global, registers  ``llgen convert``
``tma``     a global tile <-> a shared tile by TMA      global, shared            ``llgen convert``
``copy``    a global tile -> a shared tile              global, shared            ``llgen convert``
``relayout`` a shared tile -> a shared tile (transpose, shared, shared            ``llgen convert``
            re-swizzle) through registers
``gather``  out = src gathered by index along one axis  registers (src, index)    ``llgen gather``
``mma``     acc += A @ B for one CTA tile               acc, A, B                 ``llgen mma``
``mma_mixed`` acc += upcast(A) @ B: A of a narrower type  acc, A, B                 ``llgen mma``
            upcast into the MMA's A fragment                                      ``--a-dtype``
``reduce``  dst = reduce(src, dims, combine)            registers                 ``llgen reduce``
==========  ==========================================  ========================  ================

Where several operations take the same endpoints (``tma`` and ``copy``), the first
whose planner accepts the pair wins unless ``--strategy`` names one.
"""
from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ll_codegen.core.files import write_all
from ll_codegen.core.layout import LinearLayout, layout_of
from ll_codegen.emit import convert as emit_convert, copy as emit_copy, gather as emit_gather
from ll_codegen.emit import memory as emit_memory, mma as emit_mma, reduce as emit_reduce, tma as emit_tma
from ll_codegen.emit import relayout as emit_relayout, upcast as emit_upcast
from ll_codegen.emit.mma_mixed import MMA_MIXED_FILES
from ll_codegen.emit.render import file_names, render_template
from ll_codegen.plan import planner, report
from ll_codegen.plan.gather import GatherPlan, plan_gather
from ll_codegen.plan.mma import plan_mma
from ll_codegen.plan.mma_mixed import MixedMmaPlan, plan_mixed_mma
from ll_codegen.plan.mma_model import MmaPlan
from ll_codegen.plan.plans import ConvertPlan, CopyPlan, LoadPlan, RelayoutPlan, StorePlan
from ll_codegen.plan.relayout import plan_relayout
from ll_codegen.plan.reduce import ReducePlan, plan_reduce
from ll_codegen.plan.tma import TmaPlan, plan_tma
from ll_codegen.plan.upcast import UpcastPlan, plan_upcast
from ll_codegen.verify import harness
from ll_codegen.verify.emulate.convert import check_convert
from ll_codegen.verify.emulate.gather import check_gather
from ll_codegen.verify.emulate.memory import check_copy_plan, check_memory_plan
from ll_codegen.verify.emulate.mma import check_mma
from ll_codegen.verify.emulate.packed import check_packing
from ll_codegen.verify.emulate.reduce import check_reduce
from ll_codegen.verify.emulate.relayout import check_relayout
from ll_codegen.verify.emulate.tma import check_tma
from ll_codegen.verify.emulate.upcast import check_upcast
from ll_codegen.verify.mixed import MIXED_MMA, MIXED_MMA_PTX, check_mixed_mma
from ll_codegen.verify.ptx import expect, expect_async


@dataclass(frozen=True)
class Endpoint:
    """One layout an operation takes, as the API loaded it: the ``LinearLayout``, where
    its data lives (``registers``, ``shared`` or ``global``), the alignment a global
    tile promises (bytes; 16 unless its spec says), the element width a shared layout
    was made for (bits, or None), and the spec file it came from (None for a
    ``LinearLayout`` given directly)."""
    layout: LinearLayout
    space: str
    alignment: int = 16
    element_bits: int | None = None
    source: str | None = None


@dataclass(frozen=True)
class Request:
    """What the API asks an operation's planner for: the endpoints in the operation's
    order, the element type and target, and the options given (name -> value; only
    options the operation takes, ``Operation.options``)."""
    endpoints: tuple[Endpoint, ...]
    dtype: str
    target: str
    arch: str | None
    strategy: str = "auto"
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Operation:
    """One operation and what every stage does with its plans.

    ``endpoints``: the spaces of the layouts it takes, one tuple per accepted
    combination; ``strategies``: the ``--strategy`` values that name it or its
    variants; ``options``: the planner options it takes beyond the layouts;
    ``plan(request)``: the planner; ``files``: file kind -> (template, or a function
    of the plan giving one; values(plan, name, command, src_text, dst_text,
    back_plan)); ``emulate(plan, rng, **options)``: the emulator check;
    ``harness``: the harness's data and comparison (host and GPU drivers);
    ``ptx``: what each harness thread issues (the PTX check); ``command``: the
    ``llgen`` subcommand that plans it; ``bench``: the targets whose plans have a
    bench file, and what is timed instead where none has one; ``requires``: the options
    it is chosen by (an upcast by ``dst_dtype``), which the operations of the same
    endpoints do not take."""
    name: str
    plan_type: type
    moves: str
    endpoints: tuple[tuple[str, ...], ...]
    strategies: tuple[str, ...]
    options: frozenset[str]
    plan: Callable[[Request], Any]
    summary: Callable[[Any], str]
    files: Mapping[str, tuple[Any, Callable[..., dict]]]
    emulate: Callable[..., None]
    harness: harness.HarnessOp
    ptx: expect.PtxWants
    command: str
    bench: tuple[tuple[str, ...], str] = ((), "the bench times register conversions")
    requires: frozenset[str] = frozenset()     # options without which it is not chosen (``--dst-dtype``)

    def kinds(self, plan: Any) -> tuple[str, ...]:
        """The file kinds ``plan`` has."""
        return tuple(k for k in self.files if k != "bench" or plan.target in self.bench[0])


def _opts(r: Request, *names: str) -> dict[str, Any]:
    return {k: r.options[k] for k in names if k in r.options}


def _plan_convert(r: Request) -> ConvertPlan:
    src, dst = r.endpoints
    return planner.plan_conversion(src.layout, dst.layout, dtype=r.dtype, target=r.target, arch=r.arch,
                                   strategy=r.strategy, **_opts(r, "swizzle", "smem_budget", "max_vector_bytes",
                                                                "scratch_buffers", "scratch_per_warp", "barrier"))


def _plan_upcast(r: Request) -> UpcastPlan:
    src, dst = r.endpoints
    return plan_upcast(src.layout, dst.layout, src.space, r.dtype, r.options["dst_dtype"], r.target, r.arch,
                       alignment=src.alignment, **{k: v for k, v in r.options.items() if k != "dst_dtype"})


def _plan_access(direction: str) -> Callable[[Request], StorePlan | LoadPlan]:
    def plan(r: Request):
        dist, tile = r.endpoints if direction == "store" else r.endpoints[::-1]
        return planner.plan_memory(dist.layout, tile.layout, direction, tile.space, dtype=r.dtype, target=r.target,
                                   arch=r.arch, alignment=tile.alignment,
                                   **_opts(r, "strides", "instr", "max_vector_bytes", "barrier"))
    return plan


def _plan_copy(r: Request) -> CopyPlan:
    g, s = r.endpoints
    return planner.plan_copy(g.layout, s.layout, dtype=r.dtype, target=r.target, arch=r.arch, alignment=g.alignment,
                             num_warps=r.options.get("warps", 4), **_opts(r, "strides", "max_vector_bytes"))


def _plan_tma(r: Request) -> TmaPlan:
    g, s = r.endpoints
    return plan_tma(g.layout, s.layout, dtype=r.dtype, target=r.target, arch=r.arch, alignment=g.alignment,
                    num_warps=r.options.get("warps", 4))


def _plan_relayout(r: Request) -> RelayoutPlan:
    s, d = r.endpoints
    return plan_relayout(s.layout, d.layout, dtype=r.dtype, target=r.target, arch=r.arch,
                         num_warps=r.options.get("warps", 4), max_vector_bytes=r.options.get("max_vector_bytes"))


def _plan_gather(r: Request) -> GatherPlan:
    src, index = r.endpoints
    return plan_gather(src.layout, index.layout, r.options["axis"], dtype=r.dtype,
                       index_dtype=r.options.get("index_dtype", "i32"), target=r.target, arch=r.arch,
                       strategy=r.strategy)


def _plan_mma(r: Request) -> MmaPlan:
    acc, a, b = r.endpoints
    return plan_mma(acc.layout, a.layout, b.layout, a.space, b.space, r.options["version"], r.dtype,
                    r.options.get("acc_dtype", "f32"), r.target, r.arch, r.options.get("a_dtype"))


def _plan_mma_mixed(r: Request) -> MixedMmaPlan:
    acc, a, b = r.endpoints
    o = r.options
    return plan_mixed_mma(acc.layout, a.layout, b.layout, o["fragment"], a.space, b.space, o["version"], r.dtype,
                          o["a_dtype"], o.get("acc_dtype", "f32"), r.target, r.arch, a.alignment, o.get("scales"))


def _plan_reduce(r: Request) -> ReducePlan:
    (src,) = r.endpoints
    return plan_reduce(src.layout, r.options["dims"], r.options["combine"], r.dtype, r.target, r.arch,
                       barrier=r.options.get("barrier"))


_ACCESS_OPTIONS = frozenset({"strides", "instr", "max_vector_bytes", "barrier"})
_STORE_ENDS = (("registers", "shared"), ("registers", "global"))

OPERATIONS: dict[str, Operation] = {op.name: op for op in (
    Operation("convert", ConvertPlan, "registers -> registers", (("registers", "registers"),),
              planner.STRATEGIES + (planner.STAGED, planner.BUTTERFLY),
              frozenset({"swizzle", "smem_budget", "max_vector_bytes", "scratch_buffers", "scratch_per_warp",
                         "barrier"}),
              _plan_convert, report.convert_summary, emit_convert.CONVERT_FILES, check_convert,
              harness.CONVERSION, expect.CONVERSION_PTX, "convert", (("cuda", "hip"), "")),
    Operation("upcast", UpcastPlan, "registers or a tile -> registers of a wider element type (--dst-dtype)",
              (("registers", "registers"), ("shared", "registers"), ("global", "registers")), ("upcast",),
              frozenset({"dst_dtype", "swizzle", "smem_budget", "max_vector_bytes", "scratch_buffers",
                         "scratch_per_warp", "barrier", "strides", "instr", "scales"}),
              _plan_upcast, report.upcast_summary, emit_upcast.UPCAST_FILES, check_upcast, harness.UPCAST,
              expect.UPCAST_PTX, "convert", ((), "an upcast has no bench file"), frozenset({"dst_dtype"})),
    Operation("store", StorePlan, "registers -> a shared or global tile", _STORE_ENDS, ("store",), _ACCESS_OPTIONS,
              _plan_access("store"), report.memory_summary, emit_memory.STORE_FILES, check_memory_plan,
              harness.CONVERSION, expect.ACCESS_PTX, "convert"),
    Operation("load", LoadPlan, "a shared or global tile -> registers", tuple(e[::-1] for e in _STORE_ENDS),
              ("load",), _ACCESS_OPTIONS, _plan_access("load"), report.memory_summary, emit_memory.LOAD_FILES,
              check_memory_plan, harness.CONVERSION, expect.ACCESS_PTX, "convert"),
    Operation("tma", TmaPlan, "a global tile <-> a shared tile by TMA (sm_90a)", (("global", "shared"),),
              ("tma",), frozenset({"warps"}), _plan_tma, report.tma_summary, emit_tma.TMA_FILES, check_tma,
              harness.TMA, expect_async.TMA_PTX, "convert"),
    Operation("copy", CopyPlan, "a global tile -> a shared tile", (("global", "shared"),), ("copy",),
              frozenset({"warps", "strides", "max_vector_bytes"}), _plan_copy, report.copy_summary,
              emit_copy.COPY_FILES, check_copy_plan, harness.CONVERSION, expect.ACCESS_PTX, "convert"),
    Operation("relayout", RelayoutPlan, "a shared tile -> a shared tile through registers (a transpose, a re-swizzle)",
              (("shared", "shared"),), ("relayout",), frozenset({"warps", "max_vector_bytes"}), _plan_relayout,
              report.relayout_summary, emit_relayout.RELAYOUT_FILES, check_relayout, harness.CONVERSION,
              expect.RELAYOUT_PTX, "convert", ((), "a relayout has no bench file (bench/bench_relayout.py times it)")),
    Operation("gather", GatherPlan, "out = src gathered by index along one axis", (("registers", "registers"),),
              ("shuffle", "smem"), frozenset({"axis", "index_dtype"}), _plan_gather, report.gather_summary,
              emit_gather.GATHER_FILES, check_gather, harness.GATHER, expect_async.GATHER_PTX, "gather",
              (("cuda",), "the gather bench is CUDA only")),
    Operation("mma", MmaPlan, "acc += A @ B for one CTA tile (wgmma, mma.sync, MFMA)",
              (("registers", "shared", "shared"), ("registers", "registers", "shared"),
               ("registers", "registers", "registers")), ("auto",), frozenset({"version", "acc_dtype", "a_dtype"}),
              _plan_mma, report.mma_summary, emit_mma.MMA_FILES, check_mma, harness.MMA, expect_async.MMA_PTX,
              "mma", ((), "llgen mma has no bench (bench/bench_gemm.py times whole GEMMs)")),
    Operation("mma_mixed", MixedMmaPlan, "acc += upcast(A) @ B: A of a narrower type (--a-dtype) upcast into "
              "the MMA's A fragment", (("registers", "shared", "shared"), ("registers", "registers", "shared"),
                                       ("registers", "registers", "registers"), ("registers", "shared", "registers")),
              ("auto",), frozenset({"version", "acc_dtype", "a_dtype", "scales", "fragment"}), _plan_mma_mixed,
              report.mixed_mma_summary, MMA_MIXED_FILES, check_mixed_mma, MIXED_MMA, MIXED_MMA_PTX, "mma",
              ((), "llgen mma has no bench (bench/bench_gemm.py times whole GEMMs)"), frozenset({"a_dtype"})),
    Operation("reduce", ReducePlan, "dst = reduce(src, dims, combine) over tensor dims", (("registers",),),
              ("registers", "shuffle", "smem"), frozenset({"dims", "combine", "barrier"}), _plan_reduce,
              report.reduce_summary, emit_reduce.REDUCE_FILES, check_reduce, harness.REDUCE, expect_async.REDUCE_PTX,
              "reduce",
              ((), "llgen reduce has no bench (bench/bench_reduce.py times reductions against Triton)")),
)}


def operation_of(plan: Any) -> Operation:
    """The record of ``plan``'s operation."""
    try:
        return OPERATIONS[plan.operation]
    except (KeyError, AttributeError):
        raise ValueError(f"not a plan of a registered operation: {type(plan).__name__}") from None


def for_endpoints(spaces: Sequence[str], command: str = "convert") -> list[Operation]:
    """The operations of ``llgen <command>`` that take layouts in these spaces, in registry order."""
    return [op for op in OPERATIONS.values() if op.command == command and tuple(spaces) in op.endpoints]


# ------------------------------------------------------------------ the stages, through the registry
def summary(plan: Any) -> str:
    """The readable plan (``llgen plan``'s text)."""
    return operation_of(plan).summary(plan)


def render(plan: Any, kind: str, name: str, command: str = "", src_layout_text: str | None = None,
           dst_layout_text: str | None = None, back_plan: Any = None) -> str:
    """Source text of one generated file of ``plan``: ``kind`` is ``header`` (the device
    functions), ``harness`` (one CTA moving row-major tensors through them, for bit-exact
    checks) or ``bench`` (a conversion's round trip, which needs ``back_plan``, the
    dst -> src plan; a CUDA gather's loop).  ``command`` and the layout texts go into the
    header's opening comment (``emit.render.render_template``)."""
    op = operation_of(plan)
    return render_template(plan, op.name, op.files, kind, name, command, src_layout_text, dst_layout_text, back_plan)


def render_files(plan: Any, name: str, kinds: Sequence[str] = ("header", "harness"), command: str = "",
                 src_text: str | None = None, dst_text: str | None = None, back_plan: Any = None) -> dict[str, str]:
    """file name -> text for ``kinds`` (``render`` of each)."""
    names = file_names(plan.target, name)
    return {names[k]: render(plan, k, name, command, src_text, dst_text, back_plan) for k in kinds}


def write_files(plan: Any, directory: str, name: str, emit: Sequence[str] = ("header", "harness"),
                command: str = "", src_layout_text: str | None = None, dst_layout_text: str | None = None,
                back_plan: Any = None) -> list[str]:
    """``render_files`` written into ``directory`` by the one writer (``core.files.write_all``:
    all rendered before any is written, all written or none); returns the written paths."""
    files = render_files(plan, name, emit, command, src_layout_text, dst_layout_text, back_plan)
    return write_all({os.path.join(directory, fname): text for fname, text in files.items()}, make_dirs=True)


def check(plan: Any, rng: np.random.Generator | int | None = 0, **options) -> None:
    """Emulate ``plan`` on random data and compare with numpy; AssertionError on any
    difference (options: ``extent``/``strides`` for store, load and copy, ``runs`` for gather).
    A packed 4-bit plan's byte layouts are checked against its 4-bit layouts too."""
    operation_of(plan).emulate(plan, rng, **options)
    if getattr(plan, "packing", None) is not None:
        check_packing(plan, rng)


def harness_of(plan: Any) -> harness.HarnessOp:
    """How ``plan``'s harness is called, fed and checked."""
    return operation_of(plan).harness


# ------------------------------------------------------------------ command lines
#: every option of every command in the order a command line states them: (parameter, flag,
#: always stated, or else its default); flags whose value is True are stated bare
FLAGS: tuple[tuple[str, str, bool, Any], ...] = (
    ("file", "", True, None),
    ("src", "--src", True, None), ("index", "--index", True, None), ("acc", "--acc", True, None),
    ("a", "--a", True, None), ("b", "--b", True, None), ("dst", "--dst", True, None),
    ("axis", "--axis", True, None), ("dims", "--dim", True, None), ("combine", "--op", True, None),
    ("dtype", "--dtype", True, None), ("a_dtype", "--a-dtype", False, None), ("dst_dtype", "--dst-dtype", False, None),
    ("scales", "--scales", False, None), ("index_dtype", "--index-dtype", True, None),
    ("acc_dtype", "--acc-dtype", True, None), ("target", "--target", True, None), ("arch", "--arch", False, None),
    ("strategy", "--strategy", False, "auto"), ("swizzle", "--swizzle", False, "optimal"),
    ("smem_budget", "--smem-budget", False, planner.DEFAULT_SMEM_BUDGET),
    ("scratch_buffers", "--scratch-buffers", False, 1), ("scratch_per_warp", "--scratch-per-warp", False, False),
    ("barrier", "--barrier", False, None),
    ("shape", "--shape", False, None), ("warps", "--warps", False, None), ("strides", "--stride", False, None),
    ("rounds", "--rounds", False, None),
    ("name", "--name", False, None))


def command_line(command: str, **values: Any) -> str:
    """The normalised ``llgen <command>`` line recorded in a header (no -o, no --emit): every
    given value in ``FLAGS`` order, those equal to their default left out, paths and lists
    quoted as a shell reads them."""
    unknown = set(values) - {f[0] for f in FLAGS}
    if unknown:
        raise ValueError(f"no command-line flag for {', '.join(sorted(unknown))}")
    parts = ["llgen", command]
    for key, flag, always, default in FLAGS:
        if key not in values:
            continue
        v = values[key]
        if not always and (v is None or v == default):
            continue
        if v is True:
            parts.append(flag)
            continue
        if isinstance(v, (list, tuple)):
            v = ",".join(map(str, v))
        text = shlex.quote(os.fspath(v)) if isinstance(v, (str, os.PathLike)) else str(v)
        parts += [flag, text] if flag else [text]           # a flag "" is the command's positional argument
    return " ".join(parts)


def layout_bases(plan: Any) -> tuple[LinearLayout, LinearLayout]:
    """The source and destination layouts a ``Transfer`` plan was made for (a packed plan's: the
    4-bit layouts its ``packing`` records, not the byte layouts it moves)."""
    src, dst = (plan.src_bases, plan.dst_bases) if plan.packing is None else (plan.packing.src_bases,
                                                                              plan.packing.dst_bases)
    return layout_of(src), layout_of(dst)
