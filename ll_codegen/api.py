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
import shlex
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ll_codegen.core import limits
from ll_codegen.core.dtypes import DTYPE_BYTES
from ll_codegen.core.files import check_output_dir, quote_path, write_all, write_atomic
from ll_codegen.core.layout import LinearLayout, layout_of
from ll_codegen.core.target import Target, get_target
# the names module is the home of these; the API keeps offering them (README, tests)
from ll_codegen.emit.names import (C_KEYWORDS, RESERVED_NAMES, check_name, default_name, gather_name, mma_name,
                                   parse_emit, said_all)
from ll_codegen.emit.render import file_names, render, render_files
from ll_codegen.layouts.show import layout_params
from ll_codegen.plan import planner
from ll_codegen.plan.gather import GatherPlan, plan_gather as plan_gather_layouts
from ll_codegen.plan.mma import AB_BYTES, MmaPlan, plan_mma as plan_mma_layouts
from ll_codegen.plan.model import ConversionPlan
from ll_codegen.plan.report import summary
from ll_codegen.plan.tma import plan_tma
from ll_codegen.spec import Spec, SpecError, load_spec, spec_from_dict

__all__ = ["plan_conversion", "load_layout", "conversion_files", "parse_emit", "check_name", "default_name",
           "layout_text", "back_plan", "write_atomic", "C_KEYWORDS", "RESERVED_NAMES", "DEFAULT_SMEM_BUDGET",
           "Conversion", "plan_mma", "mma_files"]

DEFAULT_SMEM_BUDGET = 48 * 1024
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


def _space(layout: LinearLayout, spec: Spec | None) -> str:
    """registers, shared or global."""
    if spec is not None:
        return spec.layout.space
    return "shared" if "offset" in layout.in_dims else "registers"


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


def _memory_plan(dist: LinearLayout, tile: LinearLayout, tile_spec: Spec | None, direction: str, dtype: str,
                 target: str, arch: str | None, strategy: str, swizzle: str, strides: Any,
                 max_vector_bytes: int | None, instr: str) -> ConversionPlan:
    """A store (registers -> memory) or load (memory -> registers) plan."""
    if strategy not in ("auto", direction):
        raise ValueError(f"strategy {strategy} does not apply: {'the destination' if direction == 'store' else 'the source'}"
                         f" is a memory layout, so the strategy is {direction}")
    space = _space(tile, tile_spec)
    _check_element_width(tile_spec, dtype)
    alignment = tile_spec.layout.alignment if space == "global" and tile_spec is not None else 16
    if strides is not None:
        strides = parse_strides(strides)
    return planner.plan_memory(dist, tile, direction, space, dtype=dtype, target=target, arch=arch,
                               alignment=alignment, strides=strides, instr=instr,
                               max_vector_bytes=max_vector_bytes)


def _check_element_width(tile_spec: Spec | None, dtype: str) -> None:
    """A shared layout made for another element width (nvmma_shared, cute) is refused."""
    bits = getattr(tile_spec.layout, "element_bitwidth", None) if tile_spec is not None else None
    width = 8 * DTYPE_BYTES.get(dtype, 0)
    if bits is not None and width and bits != width:
        raise ValueError(f"the {tile_spec.kind} layout is for {bits}-bit elements but the dtype {dtype} "
                         f"has {width} bits")


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


def plan_conversion(src: Any, dst: Any, dtype: str = "f16", target: str = "cuda", arch: str | None = None,
                    strategy: str = "auto", swizzle: str = "optimal", smem_budget: int = DEFAULT_SMEM_BUDGET,
                    shape: Any = None, max_vector_bytes: int | None = None, strides: Any = None,
                    instr: str = "auto", warps: int | None = None, scratch_buffers: int = 1,
                    scratch_per_warp: bool = False) -> ConversionPlan:
    """Plan ``src -> dst``; each layout may be a LinearLayout, a Spec, a spec
    mapping or a spec path (``shape`` overrides both specs' shapes).  When
    one side is a memory layout (shared or global) the plan is a ``store``
    (registers -> memory) or ``load`` (memory -> registers), and a global
    tile into a shared tile a ``copy`` by ``warps`` warps (default 4);
    ``strides`` (elements) are the global strides its cost is predicted for,
    ``instr`` forces vector or matrix (ldmatrix/stmatrix) accesses;
    ``scratch_buffers=2``: a conversion through shared memory issues no barrier before
    its stores, for callers that alternate two scratch buffers; ``scratch_per_warp``:
    a warp-local one keeps each warp in its own slice with warp-scope barriers only.  Raises ValueError
    (SpecError for a bad spec) with one clear line."""
    if swizzle not in ("optimal", "none"):
        raise ValueError(f"unknown swizzle {limits.short(swizzle)} (known: optimal, none)")
    if isinstance(smem_budget, bool) or not isinstance(smem_budget, int) \
            or not 1 <= smem_budget <= limits.MAX_SMEM_BUDGET:
        raise ValueError(f"shared-memory budget (--smem-budget) must be a number of bytes from 1 to "
                         f"{limits.MAX_SMEM_BUDGET}, got {limits.short(smem_budget)}")
    if warps is not None and (isinstance(warps, bool) or not isinstance(warps, int)):
        raise ValueError(f"--warps: expected an integer, got {limits.short(warps)}")
    s, s_spec = load_layout(src, shape, "source", memory_ok=True)
    d, d_spec = load_layout(dst, shape, "destination", memory_ok=True)
    s_space, d_space = _space(s, s_spec), _space(d, d_spec)
    check_sides([("source", s, s_spec), ("destination", d, d_spec)], get_target(target, arch), shape is not None)
    if (scratch_buffers != 1 or scratch_per_warp) and (s_space, d_space) != ("registers", "registers"):
        raise ValueError(f"--scratch-{'buffers' if scratch_buffers != 1 else 'per-warp'} applies to conversions "
                         f"between register layouts; a memory layout is given as --src/--dst")
    if swizzle != "optimal" and (s_space, d_space) != ("registers", "registers"):
        raise ValueError("--swizzle chooses the scratch layout of register conversions; "
                         "a memory layout given as --src/--dst is used as it is")
    if s_space != "registers" and d_space != "registers":
        if (s_space, d_space) != ("global", "shared"):
            raise ValueError(f"both layouts are memory layouts ({s_space} -> {d_space}); copies go from a global "
                             f"tile to a shared tile")
        if strategy not in ("auto", "copy", "tma"):
            raise ValueError(f"strategy {strategy} does not apply: a global tile into a shared tile is a copy "
                             f"(copy, or tma on sm_90a)")
        _check_element_width(d_spec, dtype)
        g_align = s_spec.layout.alignment if s_spec is not None else 16
        if strategy == "tma" or (strategy == "auto" and get_target(target, arch).has_hopper_async):
            try:        # sm_90a: TMA when the shared tile is a box TMA can write (tma.tma_box), else cp.async
                return plan_tma(s, d, dtype=dtype, target=target, arch=arch, alignment=g_align,
                                num_warps=4 if warps is None else warps)
            except ValueError:
                if strategy == "tma":
                    raise
        return planner.plan_copy(s, d, dtype=dtype, target=target, arch=arch,
                                 alignment=s_spec.layout.alignment if s_spec is not None else 16,
                                 num_warps=4 if warps is None else warps, strides=parse_strides(strides) if strides is not None else None,
                                 max_vector_bytes=max_vector_bytes)
    if warps is not None:
        raise ValueError("--warps sets the threads of a copy (global -> shared); register layouts carry their own")
    if d_space != "registers":
        return _memory_plan(s, d, d_spec, "store", dtype, target, arch, strategy, swizzle, strides,
                            max_vector_bytes, instr)
    if s_space != "registers":
        return _memory_plan(d, s, s_spec, "load", dtype, target, arch, strategy, swizzle, strides,
                            max_vector_bytes, instr)
    if strides is not None:
        raise ValueError("--stride applies to global tiles; neither layout is one")
    return planner.plan_conversion(s, d, dtype=dtype, target=target, arch=arch, strategy=strategy,
                                   swizzle=swizzle, smem_budget=smem_budget, max_vector_bytes=max_vector_bytes,
                                   scratch_buffers=scratch_buffers, scratch_per_warp=scratch_per_warp)


def back_plan(plan: ConversionPlan, src: LinearLayout, dst: LinearLayout, strategy: str = "auto",
              swizzle: str = "optimal", smem_budget: int = DEFAULT_SMEM_BUDGET,
              scratch_buffers: int = 1, scratch_per_warp: bool = False) -> ConversionPlan:
    """The reverse (dst -> src) plan for the bench: the same options; a forced
    strategy that is illegal in reverse falls back to ``auto``."""
    kw = dict(dtype=plan.dtype, target=plan.target, arch=plan.arch, swizzle=swizzle, smem_budget=smem_budget,
              scratch_buffers=scratch_buffers, scratch_per_warp=scratch_per_warp)
    try:
        return planner.plan_conversion(dst, src, strategy=strategy, **kw)
    except ValueError:
        if strategy == "auto":
            raise
        return planner.plan_conversion(dst, src, strategy="auto", **kw)


def _layouts_of(plan: ConversionPlan) -> tuple[LinearLayout, LinearLayout]:
    return layout_of(plan.src_bases), layout_of(plan.dst_bases)


def layout_text(layout: LinearLayout, spec: Spec | None = None, source: str | None = None) -> str:
    """The text stating a layout in a header: the spec (kind, parameters,
    shape, file) and Triton's dump of the bases."""
    if spec is None:
        return repr(layout)
    params = {k: v for k, v in layout_params(spec.layout).items() if k != "kind"}
    ptxt = " ".join(f"{k}={v}" for k, v in params.items())
    where = f"  ({source if source is not None else spec.source})"
    return f"{spec.kind} {ptxt} shape={list(spec.shape)}{where}\n{repr(layout)}"


def render_command(src: str, dst: str, dtype: str, target: str, arch: str | None, strategy: str, swizzle: str,
                   smem_budget: int, shape: Any, name: str | None, strides: Any = None,
                   warps: int | None = None, scratch_buffers: int = 1, scratch_per_warp: bool = False) -> str:
    """The normalised ``llgen convert`` command recorded in a header (no -o, no --emit)."""
    q = shlex.quote
    parts = ["llgen", "convert", "--src", q(os.fspath(src)), "--dst", q(os.fspath(dst)),
             "--dtype", dtype, "--target", target]
    if arch:
        parts += ["--arch", arch]
    if strategy != "auto":
        parts += ["--strategy", strategy]
    if swizzle != "optimal":
        parts += ["--swizzle", swizzle]
    if smem_budget != DEFAULT_SMEM_BUDGET:
        parts += ["--smem-budget", str(smem_budget)]
    if scratch_buffers != 1:
        parts += ["--scratch-buffers", str(scratch_buffers)]
    if scratch_per_warp:
        parts.append("--scratch-per-warp")
    if shape is not None:
        parts += ["--shape", q(",".join(map(str, shape)) if isinstance(shape, (list, tuple)) else str(shape))]
    if warps is not None:
        parts += ["--warps", str(warps)]
    if strides is not None:
        parts += ["--stride", q(",".join(map(str, strides)) if isinstance(strides, (list, tuple)) else str(strides))]
    if name is not None:
        parts += ["--name", name]
    return " ".join(parts)


# ------------------------------------------------------------------ convert
@dataclass
class Conversion:
    """Everything ``llgen convert`` computed: the plan, the name, the header
    command, and ``files`` (file name -> text), in ``emit`` order."""
    plan: ConversionPlan
    name: str
    command: str
    files: dict[str, str]


def conversion_files(src: str, dst: str, dtype: str = "f16", target: str = "cuda", arch: str | None = None,
                     strategy: str = "auto", swizzle: str = "optimal", smem_budget: int = DEFAULT_SMEM_BUDGET,
                     shape: Any = None, name: str | None = None, emit: Sequence[str] | str | None = None,
                     root: str | None = None, strides: Any = None, warps: int | None = None,
                     scratch_buffers: int = 1, scratch_per_warp: bool = False) -> Conversion:
    """Plan and render (in memory) the files ``llgen convert`` writes.

    ``src``/``dst`` are spec paths as the user gave them (recorded in the
    header's command); they are opened relative to ``root`` when given."""
    kinds = parse_emit(emit)
    if name is not None:
        check_name(name)
    out_name = name if name is not None else default_name(src, dst)
    open_src = os.path.join(root, src) if root else src
    open_dst = os.path.join(root, dst) if root else dst
    s, s_spec = load_layout(open_src, shape, "source", memory_ok=True)
    d, d_spec = load_layout(open_dst, shape, "destination", memory_ok=True)
    plan = plan_conversion(s_spec or s, d_spec or d, dtype=dtype, target=target, arch=arch, strategy=strategy,
                           swizzle=swizzle, smem_budget=smem_budget, strides=strides, warps=warps,
                           scratch_buffers=scratch_buffers, scratch_per_warp=scratch_per_warp)
    if plan.operation != "convert" and "bench" in kinds:
        if not said_all(emit):
            raise ValueError(f"--emit bench: the bench times register conversions; this pair is a {plan.strategy} "
                             f"between registers and memory" if plan.operation not in ("copy", "tma") else
                             "--emit bench: the bench times register conversions; this pair is a copy")
        kinds = tuple(k for k in kinds if k != "bench")          # `all`: every kind that applies
    command = render_command(src, dst, dtype, plan.target, plan.arch, strategy, swizzle, smem_budget, shape, name,
                             strides, warps, scratch_buffers, scratch_per_warp)
    back = (back_plan(plan, s, d, strategy, swizzle, smem_budget, scratch_buffers, scratch_per_warp)
            if "bench" in kinds else None)
    s_text = layout_text(s, s_spec, os.fspath(src))
    d_text = layout_text(d, d_spec, os.fspath(dst))
    names = file_names(plan.target, out_name)
    files = {names[k]: render(plan, k, out_name, command, s_text, d_text, back) for k in kinds}
    return Conversion(plan, out_name, command, files)


# ------------------------------------------------------------------ gather
@dataclass
class Generated:
    """Everything ``llgen gather`` or ``llgen mma`` computed: plan, name, header command, files."""
    plan: Any
    name: str
    command: str
    files: dict[str, str]


def plan_gather(src: Any, index: Any, axis: int, dtype: str = "f16", index_dtype: str = "i32",
                target: str = "cuda", arch: str | None = None, strategy: str = "auto"):
    """Plan ``out = gather(src, index, axis)`` (``gather.plan_gather``); each
    layout may be a LinearLayout, a Spec, a spec mapping or a spec path."""
    s, _ = load_layout(src, None, "source")
    i, _ = load_layout(index, None, "index")
    return plan_gather_layouts(s, i, axis, dtype=dtype, index_dtype=index_dtype, target=target, arch=arch,
                         strategy=strategy)


def gather_command(src: str, index: str, axis: int, dtype: str, index_dtype: str, target: str, arch: str | None,
                   strategy: str, name: str | None) -> str:
    """The normalised ``llgen gather`` command recorded in a header (no -o, no --emit)."""
    q = shlex.quote
    parts = ["llgen", "gather", "--src", q(os.fspath(src)), "--index", q(os.fspath(index)), "--axis", str(axis),
             "--dtype", dtype, "--index-dtype", index_dtype, "--target", target]
    if arch:
        parts += ["--arch", arch]
    if strategy != "auto":
        parts += ["--strategy", strategy]
    if name is not None:
        parts += ["--name", name]
    return " ".join(parts)


def gather_files(src: str, index: str, axis: int, dtype: str = "f16", index_dtype: str = "i32",
                 target: str = "cuda", arch: str | None = None, strategy: str = "auto", name: str | None = None,
                 emit: Sequence[str] | str | None = None, root: str | None = None) -> Generated:
    """Plan and render (in memory) the files ``llgen gather`` writes; spec
    paths are recorded as given and opened relative to ``root`` when given."""
    kinds = parse_emit(emit)
    if name is not None:
        check_name(name)
    out_name = name if name is not None else gather_name(src, axis)
    s, s_spec = load_layout(os.path.join(root, src) if root else src, None, "source")
    i, i_spec = load_layout(os.path.join(root, index) if root else index, None, "index")
    check_sides([("source", s, s_spec), ("index", i, i_spec)], get_target(target, arch), shapes=False)
    plan = plan_gather_layouts(s, i, axis, dtype=dtype, index_dtype=index_dtype, target=target, arch=arch,
                         strategy=strategy)
    if "bench" in kinds and plan.target != "cuda":
        if not said_all(emit):
            raise ValueError("--emit bench: the gather bench is CUDA only")
        kinds = tuple(k for k in kinds if k != "bench")
    command = gather_command(src, index, axis, dtype, index_dtype, plan.target, plan.arch, strategy, name)
    files = render_files(plan, out_name, kinds, command, layout_text(s, s_spec, os.fspath(src)),
                         layout_text(i, i_spec, os.fspath(index)))
    return Generated(plan, out_name, command, files)


# ---------------------------------------------------------------------- mma
def plan_mma(acc: Any, a: Any, b: Any, dtype: str = "f16", acc_dtype: str = "f32", target: str = "cuda",
             arch: str | None = None, version: int | None = None) -> MmaPlan:
    """Plan ``acc += A @ B`` for one CTA tile (``plan/mma.py``): ``acc`` an ``nvidia_mma`` layout (v3:
    wgmma, v2: mma.sync; ``version`` when it is a bare LinearLayout), or with ``target="hip"`` an
    ``amd_mfma`` layout (MFMA, ``plan/mfma.py``); ``a`` (M x K) and ``b`` (K x N) shared layouts or
    ``dot_operand`` register layouts; each a LinearLayout, Spec, mapping or path."""
    acc_l, acc_spec = load_layout(acc, None, "accumulator")
    hip = target == "hip"
    if acc_spec is not None:
        if acc_spec.kind != ("amd_mfma" if hip else "nvidia_mma"):
            raise SpecError(acc_spec.source, "kind", f"{acc_spec.kind}: the accumulator of llgen mma is an "
                                                     f"nvidia_mma layout (version [3, 0]: wgmma, [2, 0]: mma.sync), or "
                                                     f"with --target hip an amd_mfma layout")
        version = acc_spec.layout.version if hip else acc_spec.layout.version[0]
    if hip:
        if arch is None:                                 # the CDNA generation the spec names (2: CDNA2, 3: CDNA3)
            arch = {2: "gfx90a", 3: "gfx942"}.get(version)
    elif version not in (2, 3):
        raise ValueError("give the accumulator's nvidia_mma version (3: wgmma, 2: mma.sync)")
    elif arch is None and target == "cuda" and version == 3:
        arch = "sm_90a"                                  # wgmma exists only there
    ops = []
    for what, x in (("A", a), ("B", b)):
        L, spec = load_layout(x, None, what, memory_ok=True)
        space = _space(L, spec)
        if space == "global":
            raise SpecError(spec.source, "kind", f"{what} is a global tile; the MMA reads shared memory or registers")
        bits = getattr(spec.layout, "element_bitwidth", None) if spec is not None else None
        if bits is not None and bits != 8 * AB_BYTES.get(dtype, 0):
            raise SpecError(spec.source, "element_bitwidth", f"{bits}: the layout is made for {bits}-bit elements, "
                                                             f"--dtype {dtype} has {8 * AB_BYTES.get(dtype, 0)}")
        ops += [L, space]
    return plan_mma_layouts(acc_l, ops[0], ops[2], ops[1], ops[3], version, dtype, acc_dtype, target, arch)


def mma_files(acc: str, a: str, b: str, dtype: str = "f16", acc_dtype: str = "f32", target: str = "cuda",
              arch: str | None = None, name: str | None = None, emit: Sequence[str] | str | None = None,
              root: str | None = None) -> Generated:
    """Plan and render (in memory) the files ``llgen mma`` writes (header, harness)."""
    kinds = parse_emit(emit)
    if "bench" in kinds:
        if not said_all(emit):
            raise ValueError("--emit bench: llgen mma has no bench (bench/bench_gemm.py times whole GEMMs)")
        kinds = tuple(k for k in kinds if k != "bench")
    if name is not None:
        check_name(name)
    out_name = name if name is not None else mma_name(acc)
    at = (lambda p: os.path.join(root, p)) if root else (lambda p: p)
    plan = plan_mma(at(acc), at(a), at(b), dtype, acc_dtype, target, arch)
    q = shlex.quote
    command = " ".join(["llgen", "mma", "--acc", q(os.fspath(acc)), "--a", q(os.fspath(a)), "--b", q(os.fspath(b)),
                        "--dtype", dtype, "--acc-dtype", acc_dtype, "--target", plan.target, "--arch", plan.arch]
                       + (["--name", name] if name is not None else []))
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
def plan_render(plan: ConversionPlan, kind: str = "header", name: str = "cvt", command: str = "",
                src_layout_text: str | None = None, dst_layout_text: str | None = None,
                back: ConversionPlan | None = None) -> str:
    check_name(name)
    if kind == "bench" and back is None:
        s, d = _layouts_of(plan)
        back = back_plan(plan, s, d)
    return render(plan, kind, name, command, src_layout_text, dst_layout_text, back)


def plan_write(plan: ConversionPlan, directory: str | os.PathLike, name: str = "cvt",
               emit: Sequence[str] | str | None = ("header", "harness"), command: str = "",
               src_layout_text: str | None = None, dst_layout_text: str | None = None,
               back: ConversionPlan | None = None) -> list[str]:
    kinds = parse_emit(emit)
    check_name(name)
    if "bench" in kinds and back is None:
        s, d = _layouts_of(plan)
        back = back_plan(plan, s, d)
    names = file_names(plan.target, name)
    files = {names[k]: plan_render(plan, k, name, command, src_layout_text, dst_layout_text, back) for k in kinds}
    return write_rendered(files, directory, option="directory")


# ------------------------------------------- conveniences on the plan classes
# Plans are data: plan/ imports nothing above it.  The API sees every stage, so it
# gives the plan classes the methods the README shows (summary, render, write).
def _summary(self: ConversionPlan | GatherPlan) -> str:
    """The readable plan (``llgen plan``'s text; ``plan/report.summary``)."""
    return summary(self)


def _render(self: ConversionPlan, kind: str = "header", name: str = "cvt", command: str = "",
            src_layout_text: str | None = None, dst_layout_text: str | None = None,
            back_plan: ConversionPlan | None = None) -> str:
    """Source text of one generated file (``header``, ``harness`` or ``bench``; the
    bench plans the reverse conversion itself unless ``back_plan`` is given)."""
    return plan_render(self, kind, name, command, src_layout_text, dst_layout_text, back_plan)


def _write(self: ConversionPlan, directory: str, name: str = "cvt", emit: Any = ("header", "harness"),
           command: str = "", src_layout_text: str | None = None, dst_layout_text: str | None = None,
           back_plan: ConversionPlan | None = None) -> list[str]:
    """Render ``emit`` (kinds, a comma list or ``all``) first, then write each file
    atomically into ``directory`` (created if missing); returns the paths."""
    return plan_write(self, directory, name, emit, command, src_layout_text, dst_layout_text, back_plan)


ConversionPlan.summary = _summary
ConversionPlan.render = _render
ConversionPlan.write = _write
GatherPlan.summary = _summary
MmaPlan.summary = _summary
