"""The Python API behind ``llgen plan`` and ``llgen convert``.

``plan_conversion`` accepts each layout as a ``LinearLayout``, a loaded
``Spec``, a spec mapping (as in a YAML file) or the path of a spec file, and
otherwise takes the planner's arguments::

    from ll_codegen import plan_conversion
    plan = plan_conversion("examples/blocked_64x64.yaml", "examples/mma_v2_64x64.yaml", dtype="f16")
    print(plan.summary())
    text = plan.render("header", name="cvt")
    paths = plan.write("out", name="cvt", emit=("header", "harness", "bench"))

``conversion_files`` is what ``llgen convert`` runs: it plans, renders every
requested file in memory and returns them (nothing is written), so a failure
leaves no partial output.  Everything here is deterministic.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

from ll_codegen.core import limits
from ll_codegen.core.dtypes import DTYPE_BITS, is_packed, upcast_problem
from ll_codegen.core.files import check_output_dir, quote_path, write_all, write_atomic
from ll_codegen.core.layout import LinearLayout
from ll_codegen.core.target import Target, get_target
# the names module is the home of these; the API keeps offering them (docs/python-api.md, tests)
from ll_codegen.emit.names import (C_KEYWORDS, RESERVED_NAMES, check_name, default_name, gather_name, mma_name,
                                   parse_emit, reduce_name, said_all)
from ll_codegen.emit.render import file_names
from ll_codegen.layouts.show import layout_params
from ll_codegen.operations import (OPERATIONS, Endpoint, Operation, Request, command_line, for_endpoints,
                                   layout_bases, operation_of, render, render_files, summary)
from ll_codegen.plan import packed, planner
from ll_codegen.plan.mma import AB_BYTES, paired_types
from ll_codegen.plan.model import parse_barrier
from ll_codegen.plan.mma_mixed import MixedMmaPlan, mixed_problem
from ll_codegen.plan.mma_model import MmaError, MmaPlan
from ll_codegen.mma_specs import check_instr_k, mma_request
from ll_codegen.plan.plans import ConvertPlan, Transfer
from ll_codegen.spec import Spec, SpecError, load_spec, spec_from_dict

__all__ = ["plan_conversion", "load_layout", "conversion_files", "parse_emit", "check_name", "default_name",
           "layout_text", "back_plan", "write_atomic", "C_KEYWORDS", "RESERVED_NAMES", "DEFAULT_SMEM_BUDGET",
           "Conversion", "plan_mma", "mma_files", "plan_gather", "gather_files", "plan_reduce", "reduce_files", "parse_dims",
           "endpoint"]

DEFAULT_SMEM_BUDGET = planner.DEFAULT_SMEM_BUDGET
# ------------------------------------------------------------------ layouts
def load_layout(layout: Any, shape: Any = None, what: str = "layout",
                memory_ok: bool = False) -> tuple[LinearLayout, Spec | None]:
    """(LinearLayout, Spec or None) for a LinearLayout, Spec, spec mapping or
    spec path.  ``shape`` overrides the spec's shape (not for LinearLayouts).
    Unless ``memory_ok``, a memory layout is refused with one line naming it."""
    if isinstance(layout, LinearLayout):
        problem = limits.layout_problem(layout)
        if problem is not None:
            raise ValueError(f"{what}: {problem[1]}")
        return layout, None
    if isinstance(layout, Spec):
        spec = layout
        if shape is not None:
            raise ValueError(f"{what}: a shape override needs a spec mapping or file, not a loaded Spec")
    elif isinstance(layout, Mapping):
        spec = spec_from_dict(dict(layout), f"<{what} spec>", shape_override=shape)
    elif isinstance(layout, (str, os.PathLike)):
        spec = load_spec(layout, shape_override=shape)
    else:
        raise TypeError(f"{what}: expected a LinearLayout, Spec, spec mapping or spec path, "
                        f"got {type(layout).__name__}")
    if spec.is_memory and not memory_ok:
        raise SpecError(spec.source, "kind", f"{spec.kind} is a memory ({spec.layout.space}) layout; conversions "
                                             f"need distributed (register) layouts such as blocked or nvidia_mma")
    return spec.linear, spec


def endpoint(layout: Any, shape: Any = None, what: str = "layout") -> tuple[Endpoint, Spec | None]:
    """(Endpoint, Spec or None) of a layout given as ``load_layout`` takes it: the one place a
    spec's own fields reach the planner -- where the data lives, the alignment a global tile
    promises (16 bytes unless its spec says), the element width a shared layout was made for.
    A bare ``LinearLayout`` is a shared tile when it has ``offset`` bases, else registers."""
    L, spec = load_layout(layout, shape, what, memory_ok=True)
    if spec is None:
        return Endpoint(L, space_of(L, None)), None
    lay = spec.layout
    return Endpoint(L, lay.space, getattr(lay, "alignment", 16) if lay.space == "global" else 16,
                    getattr(lay, "element_bitwidth", None) if lay.space != "registers" else None,
                    spec.source), spec


def space_of(L: LinearLayout, spec: Spec | None) -> str:
    """Where a layout's data lives: its spec's space, or for a bare ``LinearLayout`` shared memory
    when it has ``offset`` bases, else registers."""
    if spec is not None:
        return spec.layout.space
    return "shared" if "offset" in L.in_dims else "registers"


def _side(role: str, spec: Spec | None) -> str:
    """A layout as an error names it: ``source examples/a.yaml`` (``source`` when given as a LinearLayout)."""
    return f"{role} {quote_path(spec.source)}" if spec is not None else role


def _lane_hint(lanes: int) -> str:
    if lanes == 32:
        return "; for 32-lane layouts give --target cuda, or --target hip --arch gfx1030 or gfx1100 (wave32)"
    if lanes == 64:
        return "; for 64-lane layouts give --target hip (gfx90a, gfx940 or gfx942: wave64)"
    return "; no target has warps of this size"


def check_sides(sides: Sequence[tuple[str, LinearLayout, Spec | None]], target: Target,
                shape_given: bool = False, shapes: bool = True) -> None:
    """What the planner would refuse about a pair of layouts, said with the
    spec file of each side and the option that fixes it: shapes that differ
    (``--shape``), lane or warp counts that differ between register layouts,
    and a lane count that is not the target's warp size (``--target``).
    ``sides``: (role, layout, spec or None) for each layout, source first;
    ``shapes=False`` for a gather, whose index may differ along the axis."""
    (r0, a, sa), (r1, b, sb) = sides[0], sides[1]
    if shapes and a.out_dim_sizes != b.out_dim_sizes:
        na, nb = list(a.out_dim_sizes.values()), list(b.out_dim_sizes.values())
        hint = ("; the ranks differ" if len(na) != len(nb) else "" if shape_given else
                f"; --shape {','.join(str(max(x, y)) for x, y in zip(na, nb))} lays out both at one shape")
        raise ValueError(f"shapes differ: {_side(r0, sa)} is {na}, {_side(r1, sb)} is {nb}{hint}")
    regs = [(r, L, spec) for r, L, spec in sides if "lane" in L.in_dims]
    if len(regs) == 2:
        for dim, unit in (("lane", "lanes per warp"), ("warp", "warps")):
            n, m = a.in_dim_size(dim), b.in_dim_size(dim)
            if n != m:
                raise ValueError(f"{dim} counts differ: {_side(r0, sa)} has {n} {unit}, {_side(r1, sb)} has {m}"
                                 + ("; both sides of a conversion have one warp size" if dim == "lane" else ""))
    for role, L, spec in regs[:1]:
        lanes = L.in_dim_size("lane")
        if lanes != target.warp_size:
            where = f" ({quote_path(spec.source)})" if spec is not None else ""
            raise ValueError(f"the {role} layout{where} has {lanes} lanes but target {target.name} {target.arch} has "
                             f"warp size {target.warp_size}{_lane_hint(lanes)}")


def _check_element_width(e: Endpoint, spec: Spec | None, dtype: str) -> None:
    """A memory layout made for another element width (nvmma_shared, cute) is refused."""
    width = DTYPE_BITS.get(dtype, 0)
    if e.element_bits is not None and width and e.element_bits != width:
        raise ValueError(f"the {spec.kind if spec else 'memory'} layout is for {e.element_bits}-bit elements but the "
                         f"dtype {dtype} has {width} bits")


def parse_strides(text: Any) -> tuple[int, ...]:
    """``"72,1"`` or a list -> positive int strides (elements); ValueError otherwise."""
    bad = ValueError(f"--stride {limits.short(text)}: expected positive integers up to {limits.MAX_STRIDE} "
                     f"such as 72,1, one per dim")
    if isinstance(text, str):
        items: list[Any] = text.replace("[", "").replace("]", "").split(",")
    elif isinstance(text, (list, tuple)):
        items = list(text)
    else:
        raise bad
    if not items or len(items) > limits.MAX_RANK:
        raise bad
    out = []
    for x in items:
        if isinstance(x, str) and re.fullmatch(r"\s*\d{1,12}\s*", x):
            x = int(x)
        if not isinstance(x, int) or isinstance(x, bool) or not 1 <= x <= limits.MAX_STRIDE:
            raise bad
        out.append(x)
    return tuple(out)


#: planner options of ``plan_conversion``: (default, the flag, why it is refused where it does not apply)
OPTIONS: dict[str, tuple[Any, str, str]] = {
    "swizzle": ("optimal", "--swizzle", "chooses the scratch layout of register conversions; a memory layout given "
                                        "as --src/--dst is used as it is"),
    "smem_budget": (DEFAULT_SMEM_BUDGET, "--smem-budget", "bounds the scratch of register conversions"),
    "scratch_buffers": (1, "--scratch-buffers", "applies to conversions between register layouts; a memory layout "
                                                "is given as --src/--dst"),
    "scratch_per_warp": (False, "--scratch-per-warp", "applies to conversions between register layouts; a memory "
                                                      "layout is given as --src/--dst"),
    "strides": (None, "--stride", "applies to global tiles"),
    "instr": ("auto", "--instr", "chooses the instruction of a store or load"),
    "warps": (None, "--warps", "sets the threads of a copy (global -> shared) or a relayout (shared -> shared); "
                                "register layouts carry their own"),
    "max_vector_bytes": (None, "--max-vector-bytes", "caps the vectors of conversions, stores, loads and copies"),
    "barrier": (None, "--barrier", "names the block barrier of plans that synchronise (conversions through shared "
                                   "memory, stores and loads via one); a copy or TMA issues none"),
    "dst_dtype": (None, "--dst-dtype", "upcasts into a register layout (from registers or a tile: the destination "
                                       "registers of a wider type)"),
    "scales": (None, "--scales", "scales an upcast (--dst-dtype) per group"),
}


def _choose(spaces: tuple[str, ...], strategy: str, given: Mapping[str, Any]) -> list[Operation]:
    """The operations that could plan this pair with these options, in registry order; ValueError
    with one line when none can (what the pair is, and what it accepts)."""
    ops = for_endpoints(spaces)
    pair = " -> ".join(spaces)
    if not ops:
        both = " (both layouts are memory layouts)" if "registers" not in spaces else ""
        takes = "; ".join(f"{' -> '.join(e)} ({op.name})" for op in OPERATIONS.values() if op.command == "convert"
                          for e in op.endpoints)
        raise ValueError(f"no operation moves {pair}{both}; llgen convert plans {takes}")
    what = " or ".join(op.name for op in ops)
    if strategy != "auto":
        named = [op for op in ops if strategy in op.strategies]
        if not named:
            known = ", ".join(["auto"] + [s for op in ops for s in op.strategies])
            raise ValueError(f"strategy {strategy} does not apply: {pair} is a {what} (strategies: {known})")
        ops = named
    ops = [op for op in ops if op.requires <= set(given)] or ops   # an upcast only with --dst-dtype
    fits = [op for op in ops if set(given) <= op.options]
    if not fits:
        key = next(k for k in given if k not in ops[0].options)
        _, flag, why = OPTIONS[key]
        raise ValueError(f"{flag} {why}; {pair} is a {' or '.join(op.name for op in ops)}")
    return fits


def plan_conversion(src: Any, dst: Any, dtype: str = "f16", target: str = "cuda", arch: str | None = None,
                    strategy: str = "auto", swizzle: str = "optimal", smem_budget: int = DEFAULT_SMEM_BUDGET,
                    shape: Any = None, max_vector_bytes: int | None = None, strides: Any = None,
                    instr: str = "auto", warps: int | None = None, scratch_buffers: int = 1,
                    scratch_per_warp: bool = False, barrier: int | str | None = None,
                    dst_dtype: str | None = None, scales: str | None = None) -> Transfer:
    """Plan ``src -> dst``; each layout may be a LinearLayout, a Spec, a spec mapping or a spec
    path (``shape`` overrides both specs' shapes).  The registry chooses the operation from
    where the two layouts live (``operations.for_endpoints``): registers -> registers a
    ``convert``, registers -> a shared or global tile a ``store``, the reverse a ``load``, a
    global tile into a shared tile a ``tma`` (sm_90a, when the shared tile is a TMA box) or
    else a ``copy`` by ``warps`` warps (default 4).  ``strides`` (elements) are the global
    strides a cost is predicted for, ``instr`` forces vector or matrix (ldmatrix/stmatrix)
    accesses; ``scratch_buffers=2``: a conversion through shared memory issues no barrier
    before its stores, for callers that alternate two scratch buffers; ``scratch_per_warp``: a
    warp-local one keeps each warp in its own slice with warp-scope barriers only; ``barrier``:
    ``"block"``/None (``__syncthreads()``) or a named barrier id 1..15, the plan's block barriers
    then ``bar.sync id, threads`` over its threads only (CUDA).  ``dst_dtype``: an ``upcast``
    (``plan/upcast.py``), the destination registers of that wider type (f16, bf16) from ``dtype``
    (i4, u4, e2m1, f8e4m3, f8e5m2, i8, u8), ``scales`` its per-group scales.  An option the chosen operation
    does not take is refused.  Raises ValueError (SpecError for a bad
    spec) with one clear line."""
    if swizzle not in ("optimal", "none"):
        raise ValueError(f"unknown swizzle {limits.short(swizzle)} (known: optimal, none)")
    if isinstance(smem_budget, bool) or not isinstance(smem_budget, int) \
            or not 1 <= smem_budget <= limits.MAX_SMEM_BUDGET:
        raise ValueError(f"shared-memory budget (--smem-budget) must be a number of bytes from 1 to "
                         f"{limits.MAX_SMEM_BUDGET}, got {limits.short(smem_budget)}")
    if warps is not None and (isinstance(warps, bool) or not isinstance(warps, int)):
        raise ValueError(f"--warps: expected an integer, got {limits.short(warps)}")
    barrier = parse_barrier(barrier, target)
    if dst_dtype is not None and upcast_problem(dtype, dst_dtype):
        raise ValueError(upcast_problem(dtype, dst_dtype))
    s, s_spec = endpoint(src, shape, "source")
    d, d_spec = endpoint(dst, shape, "destination")
    check_sides([("source", s.layout, s_spec), ("destination", d.layout, d_spec)], get_target(target, arch),
                shape is not None)
    values = dict(swizzle=swizzle, smem_budget=smem_budget, scratch_buffers=scratch_buffers,
                  scratch_per_warp=scratch_per_warp, strides=strides, instr=instr, warps=warps,
                  max_vector_bytes=max_vector_bytes, barrier=barrier, dst_dtype=dst_dtype, scales=scales)
    given = {k: v for k, v in values.items() if v != OPTIONS[k][0]}
    ops = _choose((s.space, d.space), strategy, given)
    for e, spec in ((s, s_spec), (d, d_spec)):
        _check_element_width(e, spec, dtype)
    if "strides" in given:
        given["strides"] = parse_strides(strides)
    request = Request((s, d), dtype, target, arch, strategy, given)
    if is_packed(dtype) and dst_dtype is None:      # an upcast plans its packed move itself
        return _plan_packed(ops, request)
    return _first(ops, request)


def _first(ops: Sequence[Operation], request: Request) -> Transfer:
    """The plan of the first operation of ``ops`` whose planner takes ``request`` (the last one's error otherwise)."""
    for op in ops[:-1]:
        try:
            return op.plan(request)
        except ValueError:
            continue                # the next operation of these endpoints may take the pair (tma -> copy)
    return ops[-1].plan(request)


def _plan_packed(ops: Sequence[Operation], r: Request) -> Transfer:
    """A transfer of 4-bit elements, two per byte: the byte plan of the two quotient layouts
    (``plan/packed.py``: both layouts pair the same elements, the pair dropped, its dim halved),
    stating the 4-bit dtype and its ``packing``; global strides are read as 4-bit elements."""
    s, d = r.endpoints
    sq, dq, packing = packed.quotient_pair(s.layout, s.space, d.layout, d.space, r.dtype)
    options = dict(r.options)
    if "strides" in options:
        options["strides"] = packed.quotient_strides(options["strides"], packing)
    byte_request = replace(r, endpoints=(replace(s, layout=sq), replace(d, layout=dq)), dtype=packed.CARRIER,
                           options=options)
    return packed.relabel(_first(ops, byte_request), r.dtype, packing)


def back_plan(plan: ConvertPlan, src: LinearLayout, dst: LinearLayout, strategy: str = "auto",
              swizzle: str = "optimal", smem_budget: int = DEFAULT_SMEM_BUDGET,
              scratch_buffers: int = 1, scratch_per_warp: bool = False) -> ConvertPlan:
    """The reverse (dst -> src) plan for the bench: the same options; a forced
    strategy that is illegal in reverse falls back to ``auto``."""
    kw = dict(dtype=plan.dtype, target=plan.target, arch=plan.arch, swizzle=swizzle, smem_budget=smem_budget,
              scratch_buffers=scratch_buffers, scratch_per_warp=scratch_per_warp)
    # a packed plan's reverse is planned packed too, from the 4-bit layouts
    plan_pair = planner.plan_conversion if plan.packing is None else plan_conversion
    try:
        return plan_pair(dst, src, strategy=strategy, **kw)
    except ValueError:
        if strategy == "auto":
            raise
        return plan_pair(dst, src, strategy="auto", **kw)


def layout_text(layout: LinearLayout, spec: Spec | None = None, source: str | None = None) -> str:
    """The text stating a layout in a header: the spec (kind, parameters,
    shape, file) and Triton's dump of the bases."""
    if spec is None:
        return repr(layout)
    params = {k: v for k, v in layout_params(spec.layout).items() if k != "kind"}
    ptxt = " ".join(f"{k}={v}" for k, v in params.items())
    where = f"  ({source if source is not None else spec.source})"
    return f"{spec.kind} {ptxt} shape={list(spec.shape)}{where}\n{repr(layout)}"


# ------------------------------------------------------------------ files of a command
@dataclass
class Generated:
    """Everything an ``llgen`` command that writes files computed: the plan, the name, the
    header command, and ``files`` (file name -> text), in ``emit`` order."""
    plan: Any
    name: str
    command: str
    files: dict[str, str]


Conversion = Generated          # what ``llgen convert`` computed


def _kinds(op: Operation, emit: Sequence[str] | str | None, plan: Any) -> tuple[str, ...]:
    """The file kinds to render: ``emit`` less those the operation lacks (left out for ``all``,
    refused when asked for by name)."""
    kinds = parse_emit(emit)
    lacking = [k for k in kinds if k not in op.kinds(plan)]
    if lacking and not said_all(emit):
        raise ValueError(f"--emit {lacking[0]}: {op.bench[1]}; this plan is a {op.name} ({op.moves}) "
                         f"for {plan.target}")
    return tuple(k for k in kinds if k not in lacking)


def conversion_files(src: str, dst: str, dtype: str = "f16", target: str = "cuda", arch: str | None = None,
                     strategy: str = "auto", swizzle: str = "optimal", smem_budget: int = DEFAULT_SMEM_BUDGET,
                     shape: Any = None, name: str | None = None, emit: Sequence[str] | str | None = None,
                     root: str | None = None, strides: Any = None, warps: int | None = None,
                     scratch_buffers: int = 1, scratch_per_warp: bool = False,
                     barrier: int | str | None = None, dst_dtype: str | None = None,
                     scales: str | None = None) -> Generated:
    """Plan and render (in memory) the files ``llgen convert`` writes.

    ``src``/``dst`` are spec paths as the user gave them (recorded in the
    header's command); they are opened relative to ``root`` when given."""
    parse_emit(emit)
    if name is not None:
        check_name(name)
    out_name = name if name is not None else default_name(src, dst)
    s, s_spec = load_layout(os.path.join(root, src) if root else src, shape, "source", memory_ok=True)
    d, d_spec = load_layout(os.path.join(root, dst) if root else dst, shape, "destination", memory_ok=True)
    if "bench" in parse_emit(emit) and not said_all(emit):
        # the operations these spaces can be are known before planning: a bench none has is refused at once
        ops = [op for op in for_endpoints((space_of(s, s_spec), space_of(d, d_spec)))
               if op.requires <= ({"dst_dtype"} if dst_dtype else set())]   # an upcast only with --dst-dtype
        if ops and not any(target in op.bench[0] for op in ops):
            raise ValueError(f"--emit bench: {ops[0].bench[1]}; --src and --dst make a "
                             f"{' or '.join(op.name for op in ops)} ({ops[0].moves}) for {target}")
    plan = plan_conversion(s_spec or s, d_spec or d, dtype=dtype, target=target, arch=arch, strategy=strategy,
                           swizzle=swizzle, smem_budget=smem_budget, strides=strides, warps=warps,
                           scratch_buffers=scratch_buffers, scratch_per_warp=scratch_per_warp, barrier=barrier,
                           dst_dtype=dst_dtype, scales=scales)
    kinds = _kinds(operation_of(plan), emit, plan)
    command = command_line("convert", src=src, dst=dst, dtype=dtype, dst_dtype=dst_dtype, scales=scales,
                           target=plan.target, arch=plan.arch,
                           strategy=strategy, swizzle=swizzle, smem_budget=smem_budget,
                           scratch_buffers=scratch_buffers, scratch_per_warp=scratch_per_warp,
                           barrier=parse_barrier(barrier, plan.target), shape=shape,
                           warps=warps, strides=strides, name=name)
    back = (back_plan(plan, s, d, strategy, swizzle, smem_budget, scratch_buffers, scratch_per_warp)
            if "bench" in kinds else None)
    files = render_files(plan, out_name, kinds, command, layout_text(s, s_spec, os.fspath(src)),
                         layout_text(d, d_spec, os.fspath(dst)), back)
    return Generated(plan, out_name, command, files)


def plan_gather(src: Any, index: Any, axis: int, dtype: str = "f16", index_dtype: str = "i32",
                target: str = "cuda", arch: str | None = None, strategy: str = "auto"):
    """Plan ``out = gather(src, index, axis)`` (``gather.plan_gather``); each
    layout may be a LinearLayout, a Spec, a spec mapping or a spec path."""
    s, s_spec = load_layout(src, None, "source")
    i, i_spec = load_layout(index, None, "index")
    check_sides([("source", s, s_spec), ("index", i, i_spec)], get_target(target, arch), shapes=False)
    return OPERATIONS["gather"].plan(Request((Endpoint(s, "registers"), Endpoint(i, "registers")), dtype, target,
                                             arch, strategy, {"axis": axis, "index_dtype": index_dtype}))


def gather_files(src: str, index: str, axis: int, dtype: str = "f16", index_dtype: str = "i32",
                 target: str = "cuda", arch: str | None = None, strategy: str = "auto", name: str | None = None,
                 emit: Sequence[str] | str | None = None, root: str | None = None) -> Generated:
    """Plan and render (in memory) the files ``llgen gather`` writes; spec
    paths are recorded as given and opened relative to ``root`` when given."""
    parse_emit(emit)
    if name is not None:
        check_name(name)
    out_name = name if name is not None else gather_name(src, axis)
    s, s_spec = load_layout(os.path.join(root, src) if root else src, None, "source")
    i, i_spec = load_layout(os.path.join(root, index) if root else index, None, "index")
    plan = plan_gather(s_spec or s, i_spec or i, axis, dtype, index_dtype, target, arch, strategy)
    kinds = _kinds(OPERATIONS["gather"], emit, plan)
    command = command_line("gather", src=src, index=index, axis=axis, dtype=dtype, index_dtype=index_dtype,
                           target=plan.target, arch=plan.arch, strategy=strategy, name=name)
    files = render_files(plan, out_name, kinds, command, layout_text(s, s_spec, os.fspath(src)),
                         layout_text(i, i_spec, os.fspath(index)))
    return Generated(plan, out_name, command, files)


def parse_dims(values: Any) -> tuple[int, ...]:
    """``--dim`` values (repeatable, comma lists: ``("0,1",)``, ``"1"``, ``[0, 2]``) -> the tensor dims,
    in the order given; ValueError in one line otherwise."""
    out = []
    for v in ([values] if isinstance(values, (str, int)) else values):
        for item in (str(v).split(",") if not isinstance(v, int) else [v]):
            try:
                out.append(item if isinstance(item, int) else int(item.strip(), 10))
            except ValueError:
                raise ValueError(f"--dim {limits.short(v)}: a tensor dim (an integer) or a comma list of them") from None
    return tuple(out)


def plan_reduce(src: Any, dims: int | Sequence[int], combine: str = "sum", dtype: str = "f32", target: str = "cuda",
                arch: str | None = None, barrier: int | str | None = None):
    """Plan ``reduce(src, dims, combine)`` (``plan/reduce.py``): ``src`` a distributed layout (a
    LinearLayout, Spec, spec mapping or path), ``dims`` one tensor dim or several, ``combine``
    ``sum``, ``max`` or ``min``; the result is the slice layout of ``dims``.  ``barrier``: as for
    ``plan_conversion`` (a named barrier for the warp stage's block barriers)."""
    barrier = parse_barrier(barrier, target)
    s, s_spec = load_layout(src, None, "source")
    t = get_target(target, arch)
    lanes = s.in_dim_size("lane") if "lane" in s.in_dims else 0
    if lanes and lanes != t.warp_size:
        where = f" ({quote_path(s_spec.source)})" if s_spec is not None else ""
        raise ValueError(f"the source layout{where} has {lanes} lanes but target {t.name} {t.arch} has warp size "
                         f"{t.warp_size}{_lane_hint(lanes)}")
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    return OPERATIONS["reduce"].plan(Request((Endpoint(s, "registers"),), dtype, target, arch,
                                             options={"dims": dims, "combine": combine, "barrier": barrier}))


def reduce_files(src: str, dims: Any, combine: str = "sum", dtype: str = "f32", target: str = "cuda",
                 arch: str | None = None, name: str | None = None, emit: Sequence[str] | str | None = None,
                 root: str | None = None, barrier: int | str | None = None) -> Generated:
    """Plan and render (in memory) the files ``llgen reduce`` writes (header, harness); ``dims`` as
    ``parse_dims`` reads them; the spec path is recorded as given and opened relative to ``root``."""
    parse_emit(emit)
    dims = parse_dims(dims)
    if name is not None:
        check_name(name)
    out_name = name if name is not None else reduce_name(src, dims, combine)
    s, s_spec = load_layout(os.path.join(root, src) if root else src, None, "source")
    plan = plan_reduce(s_spec or s, dims, combine, dtype, target, arch, barrier)
    kinds = _kinds(OPERATIONS["reduce"], emit, plan)
    command = command_line("reduce", src=src, dims=plan.dims, combine=plan.combine, dtype=dtype, target=plan.target,
                           arch=plan.arch, barrier=parse_barrier(barrier, plan.target), name=name)
    files = render_files(plan, out_name, kinds, command, layout_text(s, s_spec, os.fspath(src)))
    return Generated(plan, out_name, command, files)


def plan_mma(acc: Any, a: Any, b: Any, dtype: str = "f16", acc_dtype: str = "f32", target: str = "cuda",
             arch: str | None = None, version: int | None = None, a_dtype: str | None = None,
             scales: str | None = None) -> MmaPlan | MixedMmaPlan:
    """Plan ``acc += A @ B`` for one CTA tile (``plan/mma.py``): ``acc`` an ``nvidia_mma`` layout (v3:
    wgmma, v2: mma.sync; ``version`` when it is a bare LinearLayout), or with ``target="hip"`` an
    ``amd_mfma`` layout (MFMA, ``plan/mfma.py``); ``a`` (M x K) and ``b`` (K x N) shared layouts or
    ``dot_operand`` register layouts; each a LinearLayout, Spec, mapping or path.  ``a_dtype``, ``scales``:
    ``acc += upcast(A) @ B``, A of that narrower type (``plan/mma_mixed.py``; ``acc`` a spec) -- or, for a
    pair one instruction takes as it is (``paired_types``: e4m3 x e5m2, s8 x u8), A's type in a plain MMA."""
    paired = a_dtype is not None and scales is None and paired_types(a_dtype, dtype)
    # the types alone decide these, before any layout is loaded
    problem = mixed_problem(dtype, a_dtype, acc_dtype, target, scales) if a_dtype is not None and not paired else None
    if problem or (a_dtype is None and scales is not None):
        raise MmaError(problem or "--scales: scales apply to a narrower A (give --a-dtype)")
    acc_l, acc_spec = load_layout(acc, None, "accumulator")
    hip = target == "hip"
    if acc_spec is not None:
        if acc_spec.kind != ("amd_mfma" if hip else "nvidia_mma"):
            raise SpecError(acc_spec.source, "kind", f"{acc_spec.kind}: the accumulator of llgen mma is an "
                                                     f"nvidia_mma layout (version [3, 0]: wgmma, [2, 0]: mma.sync), or "
                                                     f"with --target hip an amd_mfma layout")
        version = acc_spec.layout.version if hip else acc_spec.layout.version[0]
        if not hip:
            check_instr_k(acc_spec, dtype)
    if hip:
        if arch is None:                                 # the CDNA generation the spec names (2: CDNA2, 3: CDNA3)
            arch = {2: "gfx90a", 3: "gfx942"}.get(version)
    elif version not in (2, 3):
        raise ValueError("give the accumulator's nvidia_mma version (3: wgmma, 2: mma.sync)")
    elif arch is None and target == "cuda" and version == 3:
        arch = "sm_90a"                                  # wgmma exists only there
    operands = []
    for what, x in (("A", a), ("B", b)):
        e, spec = endpoint(x, None, what)
        if e.space == "global":
            raise SpecError(spec.source, "kind", f"{what} is a global tile; the MMA reads shared memory or registers")
        narrow = what == "A" and a_dtype is not None
        flag, t = ("--a-dtype", a_dtype) if narrow else ("--dtype", dtype)
        bits = DTYPE_BITS.get(a_dtype, 0) if narrow else 8 * AB_BYTES.get(dtype, 0)
        if e.element_bits is not None and e.element_bits != bits:
            raise SpecError(spec.source, "element_bitwidth", f"{e.element_bits}: the layout is made for "
                                                             f"{e.element_bits}-bit elements, {flag} {t} has {bits}")
        operands.append(e)
    op, options = mma_request(version, acc_dtype, a_dtype, scales, paired, acc_spec, acc_l, operands[1].layout, dtype)
    return OPERATIONS[op].plan(Request((Endpoint(acc_l, "registers"), *operands), dtype, target, arch, options=options))


def mma_files(acc: str, a: str, b: str, dtype: str = "f16", acc_dtype: str = "f32", target: str = "cuda",
              arch: str | None = None, name: str | None = None, emit: Sequence[str] | str | None = None,
              root: str | None = None, a_dtype: str | None = None, scales: str | None = None) -> Generated:
    """Plan and render (in memory) the files ``llgen mma`` writes (header, harness)."""
    parse_emit(emit)
    if name is not None:
        check_name(name)
    out_name = name if name is not None else mma_name(acc)
    at = (lambda p: os.path.join(root, p)) if root else (lambda p: p)
    plan = plan_mma(at(acc), at(a), at(b), dtype, acc_dtype, target, arch, a_dtype=a_dtype, scales=scales)
    kinds = _kinds(operation_of(plan), emit, plan)
    command = command_line("mma", acc=acc, a=a, b=b, dtype=dtype, a_dtype=a_dtype, scales=scales,
                           acc_dtype=acc_dtype, target=plan.target, arch=plan.arch, name=name)
    return Generated(plan, out_name, command, render_files(plan, out_name, kinds, command))


# ------------------------------------------------------------------ writing
def write_rendered(files: Mapping[str, str], directory: str | os.PathLike, option: str = "-o",
                   announce: Callable[[list[str]], None] | None = None) -> list[str]:
    """Write already-rendered files into ``directory`` (created if missing):
    every target checked first, then all written or none (``files.write_all``;
    ``announce(paths)``, the CLI's listing, is printed before the commit)."""
    directory = os.fspath(directory)
    check_output_dir(directory, option)
    return write_all({os.path.join(directory, fname): text for fname, text in files.items()}, make_dirs=True,
                     announce=announce)


# ------------------------------------------------ rendering a plan (by hand)
def plan_render(plan: Transfer, kind: str = "header", name: str = "cvt", command: str = "",
                src_layout_text: str | None = None, dst_layout_text: str | None = None,
                back: Transfer | None = None) -> str:
    check_name(name)
    if kind == "bench" and back is None:
        back = back_plan(plan, *layout_bases(plan))
    return render(plan, kind, name, command, src_layout_text, dst_layout_text, back)


def plan_write(plan: Transfer, directory: str | os.PathLike, name: str = "cvt",
               emit: Sequence[str] | str | None = ("header", "harness"), command: str = "",
               src_layout_text: str | None = None, dst_layout_text: str | None = None,
               back: Transfer | None = None) -> list[str]:
    kinds = parse_emit(emit)
    check_name(name)
    if "bench" in kinds and back is None:
        back = back_plan(plan, *layout_bases(plan))
    names = file_names(plan.target, name)
    files = {names[k]: plan_render(plan, k, name, command, src_layout_text, dst_layout_text, back) for k in kinds}
    return write_rendered(files, directory, option="directory")


# ------------------------------------------- conveniences on the plan classes
# Plans are data: plan/ imports nothing above it.  The API sees every stage, so it
# gives the plan classes the methods docs/python-api.md shows (summary, render, write).
def _summary(self: Any) -> str:
    """The readable plan (``llgen plan``'s text; the operation's summary in the registry)."""
    return summary(self)


def _render(self: Transfer, kind: str = "header", name: str = "cvt", command: str = "",
            src_layout_text: str | None = None, dst_layout_text: str | None = None,
            back_plan: Transfer | None = None) -> str:
    """Source text of one generated file (``header``, ``harness`` or ``bench``; the
    bench plans the reverse conversion itself unless ``back_plan`` is given)."""
    return plan_render(self, kind, name, command, src_layout_text, dst_layout_text, back_plan)


def _write(self: Transfer, directory: str, name: str = "cvt", emit: Any = ("header", "harness"),
           command: str = "", src_layout_text: str | None = None, dst_layout_text: str | None = None,
           back_plan: Transfer | None = None) -> list[str]:
    """Render ``emit`` (kinds, a comma list or ``all``) first, then write each file
    atomically into ``directory`` (created if missing); returns the paths."""
    return plan_write(self, directory, name, emit, command, src_layout_text, dst_layout_text, back_plan)


for _op in OPERATIONS.values():
    _op.plan_type.summary = _summary
Transfer.render = _render
Transfer.write = _write
