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
from typing import Any, Iterable, Mapping, Sequence

from ll_codegen.core import limits
from ll_codegen.core.layout import LinearLayout
from ll_codegen.plan.model import ConversionPlan
from ll_codegen.emit.render import write_atomic
from ll_codegen.spec import Spec, SpecError, load_spec, spec_from_dict

__all__ = ["plan_conversion", "load_layout", "conversion_files", "parse_emit", "check_name", "default_name",
           "layout_text", "back_plan", "write_atomic", "C_KEYWORDS", "RESERVED_NAMES", "DEFAULT_SMEM_BUDGET",
           "Conversion"]

DEFAULT_SMEM_BUDGET = 48 * 1024
EMIT_KINDS = ("header", "harness", "bench")

#: C and C++ keywords (and the alternative operator spellings) a name must not be.
C_KEYWORDS = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t class
compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype
default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline
int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public register
reinterpret_cast requires restrict return short signed sizeof static static_assert static_cast struct switch
template this thread_local throw true try typedef typeid typename union unsigned using virtual void volatile
wchar_t while xor xor_eq _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn
_Static_assert _Thread_local
""".split())

_C_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

#: Names a generated namespace must not take: CUDA/HIP built-ins, types and macros the generated code
#: and its harness use unqualified, and the names the generated code declares inside the namespace.
RESERVED_NAMES = frozenset("""
threadIdx blockIdx blockDim gridDim warpSize NULL nullptr_t size_t ptrdiff_t printf memcpy memset malloc free
assert min max abs uint8_t uint16_t uint32_t uint64_t int8_t int16_t int32_t int64_t uintptr_t intptr_t
uint2 uint4 float2 float4 half __half __nv_bfloat16 std cuda hip llgen_host dim3 cudaStream_t hipStream_t
convert convert_words store store_words store_masked load load_words load_masked copy copy_masked commit wait
src_index dst_index tile_index detail kSrcRegs kDstRegs kRegs kSmemBytes kTileBytes kTileAlign kThreads
kWarpSize kElemBytes kRank kShape kOrder kAlignment kSrcWords kDstWords kWords lane warp tid smem tile strides
extent fill
gather index index_bits idx_index kIdxRegs kIndexBytes kAxis kAxisSize kSrcShape kIdxShape V8 V16
""".split())


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


def _memory_plan(dist: LinearLayout, tile: LinearLayout, tile_spec: Spec | None, direction: str, dtype: str,
                 target: str, arch: str | None, strategy: str, swizzle: str, strides: Any,
                 max_vector_bytes: int | None, instr: str) -> ConversionPlan:
    """A store (registers -> memory) or load (memory -> registers) plan."""
    from ll_codegen.plan import planner
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
    from ll_codegen.plan import planner
    bits = getattr(tile_spec.layout, "element_bitwidth", None) if tile_spec is not None else None
    width = 8 * planner.DTYPE_BYTES.get(dtype, 0)
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
    from ll_codegen.plan import planner
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
        if strategy not in ("auto", "copy"):
            raise ValueError(f"strategy {strategy} does not apply: a global tile into a shared tile is a copy")
        _check_element_width(d_spec, dtype)
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
    from ll_codegen.plan import planner
    kw = dict(dtype=plan.dtype, target=plan.target, arch=plan.arch, swizzle=swizzle, smem_budget=smem_budget,
              scratch_buffers=scratch_buffers, scratch_per_warp=scratch_per_warp)
    try:
        return planner.plan_conversion(dst, src, strategy=strategy, **kw)
    except ValueError:
        if strategy == "auto":
            raise
        return planner.plan_conversion(dst, src, strategy="auto", **kw)


def _layouts_of(plan: ConversionPlan) -> tuple[LinearLayout, LinearLayout]:
    from ll_codegen.emit.render import layout_of
    return layout_of(plan.src_bases), layout_of(plan.dst_bases)


# -------------------------------------------------------------------- names
def check_name(name: str) -> str:
    """``name`` if it is a usable C/C++ identifier, else ValueError."""
    if not isinstance(name, str) or not _C_IDENT.match(name):
        raise ValueError(f"--name {limits.short(name)} is not a C identifier (letters, digits and _, not starting with a digit)")
    if name in C_KEYWORDS:
        raise ValueError(f"--name {limits.short(name)} is a C/C++ keyword")
    if name.startswith("__") or re.match(r"_[A-Z]", name):
        raise ValueError(f"--name {limits.short(name)} is reserved for the compiler (names starting with __ or _ and a capital)")
    if name in RESERVED_NAMES:
        raise ValueError(f"--name {limits.short(name)} is a CUDA/HIP built-in, a standard type or macro, or a name the "
                         f"generated code uses; pick another")
    return name


def _stem_ident(path: str) -> str:
    stem = os.path.splitext(os.path.basename(os.fspath(path)))[0]
    ident = re.sub(r"[^A-Za-z0-9_]", "_", stem) or "layout"
    return ident


def default_name(src: Any, dst: Any) -> str:
    """``<src stem>_to_<dst stem>`` made a C identifier (``cvt`` without paths)."""
    if isinstance(src, (str, os.PathLike)) and isinstance(dst, (str, os.PathLike)):
        name = f"{_stem_ident(src)}_to_{_stem_ident(dst)}"
    else:
        name = "cvt"
    if name[0].isdigit() or name.startswith("__") or re.match(r"_[A-Z]", name):
        name = "cvt_" + name
    return name + "_" if name in C_KEYWORDS or name in RESERVED_NAMES else name


def parse_emit(values: Iterable[str] | str | None) -> tuple[str, ...]:
    """``--emit`` values (repeatable, comma lists, ``all``) -> kinds in canonical order."""
    if values is None:
        return ("header", "harness")
    if isinstance(values, str):
        values = [values]
    kinds: set[str] = set()
    for v in values:
        for k in (x.strip() for x in str(v).split(",")):
            if not k:
                continue
            if k == "all":
                kinds.update(EMIT_KINDS)
            elif k in EMIT_KINDS:
                kinds.add(k)
            else:
                raise ValueError(f"--emit: unknown kind {limits.short(k)} (known: header, harness, bench, all)")
    if not kinds:
        return ("header", "harness")
    return tuple(k for k in EMIT_KINDS if k in kinds)


def layout_text(layout: LinearLayout, spec: Spec | None = None, source: str | None = None) -> str:
    """The text stating a layout in a header: the spec (kind, parameters,
    shape, file) and Triton's dump of the bases."""
    if spec is None:
        return repr(layout)
    from ll_codegen.layouts.show import layout_params
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
    from ll_codegen.emit.render import file_names, render
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
    if (plan.memory is not None or plan.copy is not None) and "bench" in kinds:
        said_all = any("all" in str(v).split(",") for v in ([emit] if isinstance(emit, str) else emit or ()))
        if not said_all:
            raise ValueError(f"--emit bench: the bench times register conversions; this pair is a {plan.strategy} "
                             f"between registers and memory" if plan.copy is None else
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
class Gather:
    """Everything ``llgen gather`` computed: plan, name, header command, files."""
    plan: Any
    name: str
    command: str
    files: dict[str, str]


def plan_gather(src: Any, index: Any, axis: int, dtype: str = "f16", index_dtype: str = "i32",
                target: str = "cuda", arch: str | None = None, strategy: str = "auto"):
    """Plan ``out = gather(src, index, axis)`` (``gather.plan_gather``); each
    layout may be a LinearLayout, a Spec, a spec mapping or a spec path."""
    from ll_codegen.plan import gather as G
    s, _ = load_layout(src, None, "source")
    i, _ = load_layout(index, None, "index")
    return G.plan_gather(s, i, axis, dtype=dtype, index_dtype=index_dtype, target=target, arch=arch,
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
                 emit: Sequence[str] | str | None = None, root: str | None = None) -> Gather:
    """Plan and render (in memory) the files ``llgen gather`` writes; spec
    paths are recorded as given and opened relative to ``root`` when given."""
    from ll_codegen.plan import gather as G
    from ll_codegen.emit.gather import gather_files as render_files
    kinds = parse_emit(emit)
    if name is not None:
        check_name(name)
    out_name = name if name is not None else f"{_stem_ident(src)}_gather{axis}"
    if out_name[0].isdigit():
        out_name = "gather_" + out_name
    s, s_spec = load_layout(os.path.join(root, src) if root else src, None, "source")
    i, i_spec = load_layout(os.path.join(root, index) if root else index, None, "index")
    plan = G.plan_gather(s, i, axis, dtype=dtype, index_dtype=index_dtype, target=target, arch=arch,
                         strategy=strategy)
    if "bench" in kinds and plan.target != "cuda":
        if not any("all" in str(v).split(",") for v in ([emit] if isinstance(emit, str) else emit or ())):
            raise ValueError("--emit bench: the gather bench is CUDA only")
        kinds = tuple(k for k in kinds if k != "bench")
    command = gather_command(src, index, axis, dtype, index_dtype, plan.target, plan.arch, strategy, name)
    files = render_files(plan, out_name, kinds, command, layout_text(s, s_spec, os.fspath(src)),
                         layout_text(i, i_spec, os.fspath(index)))
    return Gather(plan, out_name, command, files)


# ------------------------------------------------------------------ writing
def write_rendered(files: Mapping[str, str], directory: str | os.PathLike, option: str = "-o") -> list[str]:
    """Write already-rendered files into ``directory`` (created if missing):
    every target checked first, then all written or none (``files.write_all``)."""
    from ll_codegen.core.files import check_output_dir, write_all
    directory = os.fspath(directory)
    check_output_dir(directory, option)
    return write_all({os.path.join(directory, fname): text for fname, text in files.items()}, make_dirs=True)


# ------------------------------------------------- ConversionPlan methods
def plan_render(plan: ConversionPlan, kind: str = "header", name: str = "cvt", command: str = "",
                src_layout_text: str | None = None, dst_layout_text: str | None = None,
                back: ConversionPlan | None = None) -> str:
    from ll_codegen.emit.render import render
    check_name(name)
    if kind == "bench" and back is None:
        s, d = _layouts_of(plan)
        back = back_plan(plan, s, d)
    return render(plan, kind, name, command, src_layout_text, dst_layout_text, back)


def plan_write(plan: ConversionPlan, directory: str | os.PathLike, name: str = "cvt",
               emit: Sequence[str] | str | None = ("header", "harness"), command: str = "",
               src_layout_text: str | None = None, dst_layout_text: str | None = None,
               back: ConversionPlan | None = None) -> list[str]:
    from ll_codegen.emit.render import file_names
    kinds = parse_emit(emit)
    check_name(name)
    if "bench" in kinds and back is None:
        s, d = _layouts_of(plan)
        back = back_plan(plan, s, d)
    names = file_names(plan.target, name)
    files = {names[k]: plan_render(plan, k, name, command, src_layout_text, dst_layout_text, back) for k in kinds}
    return write_rendered(files, directory, option="directory")


# ------------------------------------------------------------------- verify
@dataclass
class VerifyJob:
    """One conversion to verify (``llgen verify``): one row per dtype."""
    pair: str
    src: Any                   # spec path (relative to the cwd) or a loaded Spec
    dst: Any
    dtypes: tuple[str, ...]
    target: str = "cuda"
    arch: str | None = None
    strategy: str = "auto"
    swizzle: str = "optimal"
    smem_budget: int = DEFAULT_SMEM_BUDGET
    shape: Any = None
    name: str | None = None


_CORPUS_FIELDS = ("src", "dst", "dtypes", "dtype", "target", "arch", "strategy", "swizzle", "smem_budget",
                  "shape", "name")


def load_corpus(path: str | os.PathLike) -> list[VerifyJob]:
    """Read and validate a verify corpus: a YAML list of mappings
    ``{src, dst, dtypes, strategy, swizzle, name, target, arch, shape,
    smem_budget}``; ``src``/``dst`` are spec paths relative to the corpus
    file or inline spec mappings.  Every problem raises SpecError
    ``"<file>: entry <n>[.<field>]: <what>"``; the layouts are loaded here."""
    from ll_codegen.spec import parse_yaml, read_spec_text
    source = os.fspath(path)
    data = parse_yaml(read_spec_text(source, "corpus"), source)
    if isinstance(data, Mapping) and set(data) == {"conversions"}:
        data = data["conversions"]
    if not isinstance(data, list) or not data:
        raise SpecError(source, "top level", "expected a non-empty list of conversions "
                                             "({src: ..., dst: ..., dtypes: [...]} each)")
    base = os.path.dirname(source)
    jobs = []
    seen: set[str] = set()
    for i, e in enumerate(data, 1):
        where = f"entry {i}"
        if not isinstance(e, Mapping):
            raise SpecError(source, where, f"expected a mapping with src, dst and dtypes, got {type(e).__name__}")
        unknown = [k for k in e if k not in _CORPUS_FIELDS]
        if unknown:
            raise SpecError(source, f"{where}.{limits.cut(str(unknown[0]), limits.MAX_ECHO)}", f"unknown field; allowed: {', '.join(_CORPUS_FIELDS)}")
        if "dtype" in e and "dtypes" in e:
            raise SpecError(source, f"{where}.dtype", "give dtype or dtypes, not both")

        def text_field(k: str, default: Any) -> Any:
            v = e.get(k, default)
            if v is not default and not isinstance(v, str):
                raise SpecError(source, f"{where}.{k}", f"expected a string, got {type(v).__name__}")
            return v
        specs = []
        for k in ("src", "dst"):
            if k not in e:
                raise SpecError(source, f"{where}.{k}", "missing (a spec path relative to the corpus, or a mapping)")
            v = e[k]
            if isinstance(v, str):
                spec = load_spec(os.path.join(base, v), shape_override=e.get("shape"))
                label = _stem_ident(v)
            elif isinstance(v, Mapping):
                spec = spec_from_dict(dict(v), f"{source}: {where}.{k}", shape_override=e.get("shape"))
                label = f"{v.get('kind', 'inline')}"
            else:
                raise SpecError(source, f"{where}.{k}", f"expected a spec path or mapping, got {type(v).__name__}")
            if spec.is_memory:
                raise SpecError(source, f"{where}.{k}", f"{spec.kind} is a memory layout; "
                                                         f"conversions need distributed layouts")
            specs.append((spec, label))
        dts = e.get("dtypes", e.get("dtype", ["f16"]))
        if isinstance(dts, str):
            dts = [d.strip() for d in dts.split(",")]
        field = "dtypes" if "dtypes" in e else "dtype"
        if not isinstance(dts, list) or not dts or not all(isinstance(d, str) and d for d in dts):
            raise SpecError(source, f"{where}.{field}", "expected a non-empty list of element types such as [f16, f32]")
        from ll_codegen.plan.planner import DTYPE_BYTES
        for d in dts:
            if d not in DTYPE_BYTES:
                raise SpecError(source, f"{where}.{field}", f"unknown dtype {limits.short(d)} (known: {', '.join(DTYPE_BYTES)})")
        name = text_field("name", None)
        if name is not None:
            try:
                check_name(name)
            except ValueError as err:
                raise SpecError(source, f"{where}.name", str(err).replace("--name ", "")) from None
        budget = e.get("smem_budget", DEFAULT_SMEM_BUDGET)
        if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
            raise SpecError(source, f"{where}.smem_budget", f"expected a positive number of bytes, got {limits.short(budget)}")
        pair = name or f"{specs[0][1]} -> {specs[1][1]}"
        if pair in seen:
            pair = f"{pair} #{i}"
        seen.add(pair)
        jobs.append(VerifyJob(pair=pair, src=specs[0][0], dst=specs[1][0], dtypes=tuple(dts),
                              target=text_field("target", "cuda"), arch=text_field("arch", None),
                              strategy=text_field("strategy", "auto"), swizzle=text_field("swizzle", "optimal"),
                              smem_budget=budget, shape=None, name=name))
    # plan every entry now, so that a bad option is reported against its entry
    for i, job in enumerate(jobs, 1):
        try:
            plan_jobs([job])
        except ValueError as err:
            raise SpecError(source, f"entry {i}", str(err)) from None
    return jobs


def plan_jobs(jobs: Sequence[VerifyJob]) -> list[tuple[VerifyJob, str, ConversionPlan]]:
    """(job, dtype, plan) for every row; raises ValueError for bad inputs."""
    out = []
    for job in jobs:
        for dt in job.dtypes:
            p = plan_conversion(job.src, job.dst, dtype=dt, target=job.target, arch=job.arch,
                                strategy=job.strategy, swizzle=job.swizzle, smem_budget=job.smem_budget,
                                shape=job.shape)
            out.append((job, dt, p))
    return out


def needs_gpu(planned: Sequence[tuple[VerifyJob, str, ConversionPlan]], host: bool) -> bool:
    """Whether ``run_jobs`` needs a CUDA GPU (CUDA rows not sent to the host runtime)."""
    return not host and any(p.target == "cuda" for _, _, p in planned)


def run_jobs(planned: Sequence[tuple[VerifyJob, str, ConversionPlan]], runs: int = 2, seed: int = 0,
             echo=print, host: bool = False) -> tuple[list[tuple[str, str, str, str]], int]:
    """Verify every planned row and print a table through ``echo`` as rows
    finish; returns (rows, number of failures).  CUDA rows run on the GPU
    (CuPy) unless ``host``; HIP rows (no AMD GPU is driven here) and, with
    ``host``, CUDA rows run on the host SIMT runtime (``host.py``)."""
    from ll_codegen.verify import gpu, host as host_runtime
    heads = ("pair", "dtype", "strategy", "result")
    w = [max([len(heads[0])] + [len(j.pair) for j, _, _ in planned]),
         max([len(heads[1])] + [len(d) for _, d, _ in planned]),
         max([len(heads[2])] + [len(f"{p.strategy} ({p.target} {p.arch})") for _, _, p in planned])]
    line = lambda a, b, c, d: f"{a:<{w[0]}}  {b:<{w[1]}}  {c:<{w[2]}}  {d}".rstrip()  # noqa: E731
    echo(line(*heads))
    rows, failed = [], 0
    for k, (job, dt, p) in enumerate(planned):
        strat = f"{p.strategy} ({p.target} {p.arch})"
        on_host = host or p.target != "cuda"
        if on_host and host_runtime.compiler() is None:
            result = "FAIL: the host SIMT runtime needs clang++ (apt-get install clang)"
        else:
            try:
                if on_host:
                    r = host_runtime.verify_host([(job.name or "cvt", p)], runs=runs, seed=seed + k)[0]
                else:
                    r = gpu.verify_plan(p, name=job.name or "cvt", runs=runs, seed=seed + k)
                result = f"ok ({r.message})" if r.ok else f"FAIL: {r.message}"
            except Exception as e:  # noqa: BLE001 - a compile or launch error is a failed row
                first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
                result = f"FAIL: {type(e).__name__}: {first}"
            failed += result.startswith("FAIL")
        rows.append((job.pair, dt, strat, result))
        echo(line(job.pair, dt, strat, result))
    echo(f"{len(rows)} row(s): {len(rows) - failed} passed or skipped, {failed} failed")
    return rows, failed
