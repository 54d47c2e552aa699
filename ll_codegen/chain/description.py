"""A chain: operations connected by named tensors, some of whose layouts are free.

A chain file (YAML, or the same mapping from Python) names tensors, each with a
spec (a spec file's path relative to the chain file, or the spec's mapping inline: any
layout ``llgen show`` reads, registers, shared or global), the
free *indices*, and the steps between the tensors::

    target: cuda
    indices:
      keys: 128                 # a contraction index: its bits may be relabelled
    tensors:
      S:  {spec: s_acc.yaml}                      # fixed
      P:  {spec: p_operand.yaml, index: {1: keys}}  # dim 1 of P carries the keys
      Vm: {spec: v_tma.yaml}
      Vk: {spec: v_kmajor.yaml, index: {0: keys}}
    steps:
      - {src: S, dst: P, dtype: f8e4m3}
      - {src: Vm, dst: Vk, dtype: f8e4m3}

A step moves its source into its destination in ``dtype`` (``llgen convert``'s operations:
conversion, load, store, copy, TMA, shared -> shared), or computes (``op``)::

      - {op: mma, acc: O, a: P, b: Vk, dtype: f8e4m3, acc_dtype: f32}     # O += P @ Vk (llgen mma)
      - {op: reduce, src: S, dst: m, dims: [1], combine: max, dtype: f32}  # m = max over S's dim 1

An mma or a reduction runs on the registers and tiles the kernel holds (their *hardware* layouts:
as written, or a free tensor's choice), never relabelled: ``O = P V`` over relabelled keys is
right because P and V carry the same relabelling, so the chain checks that every free index an
mma's operand carries is carried the same way by the tensor sharing that dim (A's K and B's K,
A's M and the accumulator's M, B's N and its N), and that a reduction's result carries its
source's indices on the dims it keeps (a reduction over a relabelled dim is unchanged by it).
Both plan the same under every choice: they constrain the free layouts (a choice their planner
refuses is not taken) and add no cost.  A reduction's result must be the slice layout of its
source over ``dims`` (a ``slice`` spec).

With ``dst_dtype`` (f16 or bf16) a move is an
*upcast* (``plan/upcast.py``): the source in ``dtype`` (i4, u4, e2m1, f8e4m3, f8e5m2, i8, u8)
moved into the register order the upcast reads, then widened in each thread into the
destination, a fixed register layout (an MMA fragment).  A free source of an upcast is chosen
for that register order: a pre-shuffled 4-bit weight loads as 16-byte vectors of exactly the
nibbles its thread widens.

**Relabelling.**  A free index ``I`` of size ``2**b`` is relabelled by an
invertible map ``pi`` of its ``b`` bits over F2 (``pi[i]`` is the image of
``2**i``; the search uses bit permutations).  Every tensor dim that carries
``I`` has its layout composed with ``pi`` on that dim: where the layout ``L``
placed logical element ``(.., k, ..)`` the relabelled layout places
``(.., pi(k), ..)``.  A step from a fixed tensor ``X`` to a relabelled tensor
``Y`` therefore leaves ``Y[.., k, ..] = X[.., pi(k), ..]``.  When ``I`` is a
contraction index (the keys of attention: ``O = P V`` sums over them), every
operand that carries it is permuted the same way and the contraction is
unchanged: ``sum_k P[q, k] V[k, d] = sum_k X[q, pi(k)] W[pi(k), d]``.  Where the
author needs the true index (a causal mask, a bias), ``pi`` is in the chain's
generated index header.

**Free layouts.**  A tensor may instead leave its whole layout free within a
family; the logical tensor is unchanged, only where its elements live is chosen::

    T:  {free: registers, shape: [64, 64], warps: 4}   # any distributed layout, 4 warps
    Ts: {free: shared, shape: [64, 64]}                # any shared tile of the shape

``free: global``: a tensor in global memory the caller reorders once, offline (weights):
any invertible map from packed offsets to elements (``preshuffle``'s module docstring); its
steps load it into (or store it from) a fixed register layout.

``free: registers``: any layout of the shape onto ``warps`` warps of the
target's lanes in which every element is held once (``per_thread`` elements a
thread, ``elements / (lanes * warps)``; given, it is checked).  ``free: shared``:
any bijective shared tile (offsets -> elements) of the shape, for the element type
of the steps that touch it.  Each family has a *reference*, the layout the chain
is costed against (what an author writes without thinking about it): for
registers Triton's default blocked layout of the shape and warps
(``getDefaultBlockedEncoding``: one element a thread a step, lanes then warps
along the last dim first), for shared the unswizzled row-major tile, for global the
row-major tile (the last dim contiguous, 16-byte aligned).  A
``spec`` given with ``free`` is the reference instead (its shape and warps are
the family's).  A free tensor carries no free index: its layout already
ranges over every placement of its elements.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from math import prod
from typing import Any

from ll_codegen.api import parse_dims
from ll_codegen.core import limits
from ll_codegen.core.dtypes import DTYPE_BITS, upcast_problem
from ll_codegen.plan.reduce import COMBINES, REDUCE_DTYPES
from ll_codegen.core.target import get_target
from ll_codegen.spec import (
    Spec,
    SpecError,
    load_spec,
    parse_shape,
    parse_yaml,
    read_spec_text,
    spec_from_dict,
)

#: steps in a chain at most (the search plans every step for each candidate relabelling)
MAX_STEPS = 16
#: bits of a free index at most (the search's transposition rounds grow with b**2)
MAX_INDEX_BITS = 10


class ChainError(ValueError):
    """A chain file that cannot be planned; the message is one line naming the file and the entry."""


@dataclass(frozen=True)
class Free:
    """A free layout's family (module docstring): ``space`` (``registers``, ``shared`` or ``global``), and for
    registers the ``warps`` and elements ``per_thread`` every candidate has."""
    space: str
    warps: int = 1
    per_thread: int = 1


@dataclass(frozen=True)
class Tensor:
    """A named tensor of the chain: its spec (for a free tensor, its family's reference), the
    free indices its dims carry (dim -> index), and ``free``: the family its layout ranges
    over, None when the layout is fixed."""
    name: str
    spec: Spec
    indices: tuple[tuple[int, str], ...] = ()
    free: Free | None = None


#: the operations a step may name besides moves (``op``), and the fields each takes
COMPUTE_FIELDS = {"mma": ("acc", "a", "b", "acc_dtype"), "reduce": ("src", "dst", "dims", "combine", "barrier")}


@dataclass(frozen=True)
class Step:
    """One operation of the chain.  ``op`` ``move`` (the default): ``src`` -> ``dst`` in ``dtype``,
    planned with ``llgen convert``'s ``options`` (``warps``, ``swizzle``, ``dst_dtype``, ...);
    ``reduce``: ``dst`` = the reduction of ``src`` (``options``: ``dims``, ``combine``);
    ``mma``: ``dst += src @ b`` (``src`` the A operand, ``dst`` the accumulator; ``options``:
    ``acc_dtype``)."""
    src: str
    dst: str
    dtype: str
    options: tuple[tuple[str, Any], ...] = ()
    op: str = "move"
    b: str | None = None

    @property
    def dst_dtype(self) -> str | None:
        """The destination's element type of an upcast step, None for a move in ``dtype``."""
        return dict(self.options).get("dst_dtype")

    @property
    def reads(self) -> tuple[str, ...]:
        """The tensors the step reads: its source (and an mma's B and accumulator)."""
        return (self.src, self.b, self.dst) if self.op == "mma" else (self.src,)

    @property
    def names(self) -> tuple[str, ...]:
        """Every tensor the step touches."""
        return (self.src, self.b, self.dst) if self.op == "mma" else (self.src, self.dst)

    def bits(self, tensor: str) -> int:
        """The element width the step gives ``tensor`` (one it touches)."""
        if tensor == self.dst and self.op == "mma":
            return DTYPE_BITS[dict(self.options)["acc_dtype"]]
        return DTYPE_BITS[self.dst_dtype if tensor == self.dst and self.dst_dtype else self.dtype]


@dataclass(frozen=True)
class Chain:
    """The tensors, the free indices (name -> size), the steps and the target of a chain."""
    source: str
    target: str
    arch: str | None
    indices: tuple[tuple[str, int], ...]
    tensors: tuple[Tensor, ...]
    steps: tuple[Step, ...]

    def tensor(self, name: str) -> Tensor:
        return next(t for t in self.tensors if t.name == name)


STEP_OPTIONS = ("warps", "swizzle", "smem_budget", "max_vector_bytes", "strides", "instr", "barrier", "dst_dtype")


def _named(x: Any) -> str:
    """A name in a message: as written when it is an identifier, else quoted and cut."""
    return x if isinstance(x, str) and x.isidentifier() and x.isascii() else limits.short(x)


def _fail(source: str, where: str, what: str) -> ChainError:
    return ChainError(f"{source}: {where}: {what}")


def _mapping(source: str, where: str, x: Any) -> Mapping:
    if not isinstance(x, Mapping):
        raise _fail(source, where, f"expected a mapping, got {limits.short(x)}")
    return x


def load_chain(path: str | os.PathLike) -> Chain:
    """Read a chain file (with a spec file's limits: a regular UTF-8 file, size, YAML depth);
    spec paths are relative to the chain file's folder."""
    source = os.fspath(path)
    try:
        data = parse_yaml(read_spec_text(source, "chain file"), source)
    except SpecError as e:
        raise ChainError(str(e)) from None
    return chain_from_dict(_mapping(source, "the file", data), source, os.path.dirname(source))


def chain_from_dict(data: Mapping[str, Any], source: str = "<chain>", root: str = "") -> Chain:
    """A ``Chain`` from its mapping (as in the YAML file); ChainError with one line when it is not one."""
    known = {"target", "arch", "indices", "tensors", "steps"}
    extra = sorted(str(k) for k in data if k not in known)
    if extra:
        raise _fail(source, limits.short(extra[0]), f"unknown field; allowed: {', '.join(sorted(known))}")
    target, arch = data.get("target", "cuda"), data.get("arch")
    try:
        tgt = get_target(str(target), None if arch is None else str(arch))
    except ValueError as e:
        raise _fail(source, "target", str(e)) from None
    indices = {}
    for name, size in _mapping(source, "indices", data.get("indices", {})).items():
        if not isinstance(size, int) or isinstance(size, bool) or size < 2 or size & (size - 1) \
                or size > 1 << MAX_INDEX_BITS:
            raise _fail(source, f"indices.{_named(name)}",
                        f"a size is a power of two from 2 to {1 << MAX_INDEX_BITS}, got {limits.short(size)}")
        indices[str(name)] = size
    tensors = []
    for name, entry in _mapping(source, "tensors", data.get("tensors")).items():
        tensors.append(_tensor(source, root, str(name), _mapping(source, f"tensors.{_named(name)}", entry),
                               indices, tgt))
    names = {t.name for t in tensors}
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps or len(raw_steps) > MAX_STEPS:
        raise _fail(source, "steps", f"a list of 1 to {MAX_STEPS} steps")
    steps = tuple(_step(source, k, _mapping(source, f"steps[{k}]", s), names) for k, s in enumerate(raw_steps))
    used = {t for s in steps for t in s.names}
    free_global = {t.name for t in tensors if t.free is not None and t.free.space == "global"}
    by_name = {t.name: t for t in tensors}
    for k, s in enumerate(steps):
        if s.op != "move":
            _check_compute(source, k, s, by_name)
            continue
        dst = by_name[s.dst]
        if s.dst_dtype and (dst.free is not None or dst.spec.layout.space != "registers"):
            raise _fail(source, f"steps[{k}].dst", f"an upcast (dst_dtype) writes a fixed register layout (the "
                                                   f"fragment it feeds); {s.dst} is "
                                                   f"{'free' if dst.free else 'a ' + dst.spec.layout.space + ' layout'}")
        if DTYPE_BITS[s.dtype] < 8 and not {s.src, s.dst} & free_global:
            raise _fail(source, f"steps[{k}].dtype", f"{s.dtype} (4-bit) steps are planned in a chain only to "
                                                     f"load or store a free: global (pre-shuffled) tensor")
    for t in tensors:
        if (t.indices or t.free) and t.name not in used:
            raise _fail(source, f"tensors.{t.name}", f"{'is free' if t.free else 'carries a free index'} but no "
                                                     f"step uses the tensor")
        if t.free is not None and t.free.space == "global":
            _check_preshuffled(source, t, steps, {x.name: x for x in tensors})
        widths = sorted({s.bits(t.name) for s in steps if t.name in s.names})
        if len(widths) > 1:
            raise _fail(source, f"tensors.{t.name}", f"a tensor holds one element width; its steps move "
                                                     f"{' and '.join(f'{w}-bit' for w in widths)} elements (name "
                                                     f"the tensor in each type: S and S8, say)")
    return Chain(source, str(target), None if arch is None else str(arch), tuple(indices.items()),
                 tuple(tensors), steps)


def _tensor(source: str, root: str, name: str, entry: Mapping, indices: Mapping[str, int], target) -> Tensor:
    where = f"tensors.{_named(name)}"
    if not name.isidentifier() or not name.isascii():
        raise _fail(source, where, "a tensor name is a C identifier (it names the generated files and functions)")
    allowed = ("spec", "index", "free", "shape", "warps", "per_thread")
    extra = sorted(str(k) for k in entry if k not in allowed)
    if extra:
        raise _fail(source, where, f"unknown field {limits.short(extra[0])}; allowed: {', '.join(allowed)}")
    if "free" in entry:
        return _free_tensor(source, root, name, entry, target)
    for k in ("shape", "warps", "per_thread"):
        if k in entry:
            raise _fail(source, f"{where}.{k}", "belongs to a free layout (free: registers or free: shared)")
    given = entry.get("spec")
    if not isinstance(given, (str, Mapping)):
        raise _fail(source, where, "needs spec: the path of a layout spec file, or the spec's mapping")
    try:
        spec = (load_spec(os.path.join(root, given)) if isinstance(given, str)
                else spec_from_dict(dict(given), f"{source}: {where}.spec"))
    except SpecError as e:
        raise _fail(source, where, str(e)) from None
    carried = []
    for dim, index in _mapping(source, f"{where}.index", entry.get("index", {})).items():
        if index not in indices:
            raise _fail(source, f"{where}.index", f"{limits.short(index)} is not one of the chain's indices")
        if not isinstance(dim, int) or isinstance(dim, bool) or not 0 <= dim < len(spec.shape):
            raise _fail(source, f"{where}.index", f"dim {limits.short(dim)} is not a dim of a rank-"
                                                  f"{len(spec.shape)} tensor")
        if spec.shape[dim] != indices[index]:
            raise _fail(source, f"{where}.index", f"dim {dim} has size {spec.shape[dim]} but index {index} has "
                                                  f"size {indices[index]}")
        carried.append((dim, str(index)))
    return Tensor(name, spec, tuple(sorted(carried)))


def _check_preshuffled(source: str, t: Tensor, steps: tuple[Step, ...], tensors: Mapping[str, Tensor]) -> None:
    """A pre-shuffled tensor's steps move it between global memory and a fixed register layout
    (the layout it is shuffled for): one line naming the first step that does not."""
    for k, s in enumerate(steps):
        if t.name not in s.names:
            continue
        if s.op != "move":
            raise _fail(source, f"steps[{k}]", f"{t.name} is free: global (pre-shuffled offline); an {s.op} reads "
                                               f"registers and shared tiles: load it first")
        other = tensors[s.dst if s.src == t.name else s.src]
        if other.name == t.name or other.free is not None or other.spec.layout.space != "registers":
            what = ("itself" if other.name == t.name else f"{other.name}, a free layout" if other.free is not None
                    else f"{other.name}, a {other.spec.layout.space} layout")
            raise _fail(source, f"steps[{k}]", f"{t.name} is free: global (pre-shuffled offline), so its steps "
                                               f"load it into or store it from a fixed register layout; this one "
                                               f"moves it to {what}")


def _step(source: str, k: int, entry: Mapping, names: set[str]) -> Step:
    where = f"steps[{k}]"
    if "op" in entry:
        return _compute_step(source, k, entry, names)
    allowed = ("src", "dst", "dtype") + STEP_OPTIONS
    if "scales" in entry:
        raise _fail(source, f"{where}.scales", "per-group scales do not change the chain's choice (their layout "
                                               "follows the fixed destination): plan the scaled upcast with "
                                               "llgen convert --scales from the chosen layout")
    extra = sorted(str(x) for x in entry if x not in allowed)
    if extra:
        raise _fail(source, where, f"unknown field {limits.short(extra[0])}; allowed: {', '.join(allowed)}")
    for side in ("src", "dst"):
        if entry.get(side) not in names:
            raise _fail(source, f"{where}.{side}", f"{limits.short(entry.get(side))} is not a tensor of the chain")
    dtype = entry.get("dtype", "f16")
    if dtype not in DTYPE_BITS:
        raise _fail(source, f"{where}.dtype", f"{limits.short(dtype)} is not one of {', '.join(DTYPE_BITS)}")
    if "dst_dtype" in entry and upcast_problem(dtype, entry["dst_dtype"]):
        raise _fail(source, f"{where}.dst_dtype", upcast_problem(dtype, entry["dst_dtype"]))
    options = tuple((o, entry[o]) for o in STEP_OPTIONS if o in entry)
    return Step(entry["src"], entry["dst"], dtype, options)


def _compute_step(source: str, k: int, entry: Mapping, names: set[str]) -> Step:
    """An ``op: mma`` or ``op: reduce`` step (module docstring)."""
    where, op = f"steps[{k}]", entry["op"]
    if op not in COMPUTE_FIELDS:
        raise _fail(source, f"{where}.op", f"{limits.short(op)} is not an operation; known: move (no op), "
                                           f"{', '.join(COMPUTE_FIELDS)}")
    allowed = ("op", "dtype") + COMPUTE_FIELDS[op]
    extra = sorted(str(x) for x in entry if x not in allowed)
    if extra:
        raise _fail(source, where, f"unknown field {limits.short(extra[0])} of an {op} step; allowed: "
                                   f"{', '.join(allowed)}")
    roles = ("acc", "a", "b") if op == "mma" else ("src", "dst")
    for role in roles:
        if entry.get(role) not in names:
            raise _fail(source, f"{where}.{role}", f"{limits.short(entry.get(role))} is not a tensor of the chain")
    if op == "mma":
        dtype, acc_dtype = entry.get("dtype", "f16"), entry.get("acc_dtype", "f32")
        for field, t in (("dtype", dtype), ("acc_dtype", acc_dtype)):
            if t not in DTYPE_BITS:
                raise _fail(source, f"{where}.{field}", f"{limits.short(t)} is not one of {', '.join(DTYPE_BITS)}")
        if len({entry["acc"], entry["a"], entry["b"]}) < 3:
            raise _fail(source, where, "an mma's acc, a and b are three different tensors")
        return Step(entry["a"], entry["acc"], dtype, (("acc_dtype", acc_dtype),), "mma", entry["b"])
    dtype, combine = entry.get("dtype", "f32"), entry.get("combine", "sum")
    if combine not in COMBINES or dtype not in REDUCE_DTYPES:
        field, bad, known = (("combine", combine, COMBINES) if combine not in COMBINES
                             else ("dtype", dtype, REDUCE_DTYPES))
        raise _fail(source, f"{where}.{field}", f"a reduction's {field} is one of {', '.join(known)}, not "
                                                f"{limits.short(bad)}")
    try:
        dims = parse_dims(entry.get("dims"))
    except ValueError as e:
        raise _fail(source, f"{where}.dims", str(e)) from None
    if entry["src"] == entry["dst"]:
        raise _fail(source, where, "a reduction's src and dst are two tensors")
    options = (("dims", dims), ("combine", combine)) + ((("barrier", entry["barrier"]),) if "barrier" in entry
                                                        else ())
    return Step(entry["src"], entry["dst"], dtype, options, "reduce")


def _index_at(t: Tensor, dim: int) -> str | None:
    return dict(t.indices).get(dim)


def _check_compute(source: str, k: int, s: Step, tensors: Mapping[str, Tensor]) -> None:
    """An mma's or reduction's tensors: fixed registers where the result goes, the free indices
    carried consistently (module docstring); one line naming the step otherwise."""
    where, out = f"steps[{k}]", tensors[s.dst]
    if out.free is not None or out.spec.layout.space != "registers":
        raise _fail(source, f"{where}.{'acc' if s.op == 'mma' else 'dst'}", f"an {s.op} writes a fixed register "
                                                                            f"layout; {out.name} is "
                                                                            f"{'free' if out.free else 'a ' + out.spec.layout.space + ' layout'}")
    if s.op == "mma":
        a, b = tensors[s.src], tensors[s.b]
        for (x, dx), (y, dy), what in (((a, 1), (b, 0), "K"), ((a, 0), (out, 0), "M"), ((b, 1), (out, 1), "N")):
            ix, iy = _index_at(x, dx), _index_at(y, dy)
            if ix != iy:
                raise _fail(source, where, f"mma: {x.name} dim {dx} carries {ix or 'no free index'} but {y.name} "
                                           f"dim {dy} carries {iy or 'none'}; the tensors sharing the {what} dim "
                                           f"must carry the same relabelling")
        return
    src, dims = tensors[s.src], dict(s.options)["dims"]
    kept = [d for d in range(len(src.spec.shape)) if d not in dims]
    want = tuple((j, i) for j, d in enumerate(kept) if (i := _index_at(src, d)) is not None)
    if want != out.indices:
        raise _fail(source, where, f"reduce: {out.name} must carry {src.name}'s free indices on the dims it keeps "
                                   f"({dict(want) or 'none'}), not {dict(out.indices) or 'none'}")


FREE_SPACES = ("registers", "shared", "global")
#: warps of a free register layout at most (the threads of a CTA: 32 warps of 32 lanes)
MAX_FREE_WARPS = 32


def default_blocked(shape: tuple[int, ...], warps: int, lanes: int) -> dict[str, Any]:
    """Triton's default blocked layout of ``shape`` on ``warps`` warps of ``lanes`` lanes
    (``getDefaultBlockedEncoding``: one element a thread, order ``[rank-1 .. 0]``; along
    each dim from the fastest, threads take ``min(threads left, size)``, lanes first, then
    warps; the slowest dim takes the lanes and warps left) as a spec mapping."""
    rank = len(shape)
    order = list(range(rank - 1, -1, -1))
    tpw, wpc = [1] * rank, [1] * rank
    lanes_left, threads_left, warps_left, lanes_used, warps_used = lanes, lanes * warps, warps, 1, 1
    for i in order[:-1]:
        per_cta = min(max(threads_left, 1), shape[i])
        tpw[i] = min(per_cta, lanes_left)
        wpc[i] = min(max(per_cta // tpw[i], 1), warps_left)
        warps_left //= wpc[i]
        lanes_left //= tpw[i]
        threads_left //= per_cta
        lanes_used *= tpw[i]
        warps_used *= wpc[i]
    tpw[order[-1]], wpc[order[-1]] = lanes // lanes_used, warps // warps_used
    return {"kind": "blocked", "size_per_thread": [1] * rank, "threads_per_warp": tpw, "warps_per_cta": wpc,
            "order": order, "shape": list(shape)}


def row_major_shared(shape: tuple[int, ...]) -> dict[str, Any]:
    """The unswizzled row-major shared tile of ``shape`` (the last dim contiguous) as a spec mapping."""
    return {"kind": "swizzled_shared", "vec": 1, "per_phase": 1, "max_phase": 1,
            "order": list(range(len(shape) - 1, -1, -1)), "shape": list(shape)}


def row_major_global(shape: tuple[int, ...]) -> dict[str, Any]:
    """The row-major global tile of ``shape`` (the last dim contiguous, 16-byte aligned) as a spec mapping."""
    return {"kind": "global", "order": list(range(len(shape) - 1, -1, -1)), "alignment": 16, "shape": list(shape)}


def _free_tensor(source: str, root: str, name: str, entry: Mapping, target: Any) -> Tensor:
    """A tensor whose layout is free within ``entry["free"]``'s family (module docstring)."""
    where = f"tensors.{_named(name)}"
    space = entry["free"]
    if space not in FREE_SPACES:
        raise _fail(source, f"{where}.free", f"{limits.short(space)} is not a free layout family; known: "
                                             f"{', '.join(FREE_SPACES)}")
    if "index" in entry:
        raise _fail(source, f"{where}.index", "a free layout carries no free index (it already ranges over every "
                                              "placement of its elements); relabel a fixed tensor's dim instead")
    for k in ("warps", "per_thread"):
        if space != "registers" and k in entry:
            raise _fail(source, f"{where}.{k}", f"belongs to free: registers (a {space} tile has no threads)")
    given, lanes = entry.get("spec"), target.warp_size
    if given is not None:
        for k in ("shape", "warps"):
            if k in entry:
                raise _fail(source, f"{where}.{k}", "the reference spec gives it: give spec, or shape (and warps), "
                                                    "not both")
        if not isinstance(given, (str, Mapping)):
            raise _fail(source, f"{where}.spec", "the path of a layout spec file, or the spec's mapping")
        try:
            spec = (load_spec(os.path.join(root, given)) if isinstance(given, str)
                    else spec_from_dict(dict(given), f"{source}: {where}.spec"))
        except SpecError as e:
            raise _fail(source, where, str(e)) from None
        if spec.layout.space != space:
            raise _fail(source, f"{where}.spec", f"the reference is a {spec.layout.space} layout but the tensor is "
                                                 f"free: {space}")
        if space == "registers" and spec.linear.in_dim_size("lane") != lanes:
            raise _fail(source, f"{where}.spec", f"the reference has {spec.linear.in_dim_size('lane')} lanes; "
                                                 f"target {target.name} has {lanes}")
        shape, warps = spec.shape, spec.linear.in_dim_size("warp") if space == "registers" else 1
    else:
        if "shape" not in entry:
            raise _fail(source, where, f"free: {space} needs shape (or spec: the reference layout)")
        try:
            shape = parse_shape(entry["shape"])
        except ValueError as e:
            raise _fail(source, f"{where}.shape", str(e)) from None
        warps = entry.get("warps", 1 if space == "shared" else None)
        if space == "registers" and (not isinstance(warps, int) or isinstance(warps, bool) or warps < 1
                                     or warps & (warps - 1) or warps * lanes > limits.MAX_THREADS_PER_CTA):
            raise _fail(source, f"{where}.warps", f"free: registers needs warps, a power of two from 1 to "
                                                  f"{limits.MAX_THREADS_PER_CTA // lanes}, got "
                                                  f"{'none' if warps is None else limits.short(warps)}")
        mapping = (default_blocked(shape, warps, lanes) if space == "registers" else row_major_shared(shape)
                   if space == "shared" else row_major_global(shape))
        spec = spec_from_dict(mapping, f"{source}: {where} (reference)")
    per = 1
    if space == "registers":
        elements, threads = prod(shape), lanes * warps
        if elements < threads:
            raise _fail(source, where, f"{list(shape)} has {elements} elements for {threads} threads; a free register "
                                       f"layout holds every element once and gives every thread one at least")
        per = elements // threads
        if "per_thread" in entry and entry["per_thread"] != per:
            raise _fail(source, f"{where}.per_thread", f"{list(shape)} over {warps} warps of {lanes} lanes is {per} "
                                                       f"elements a thread, not {limits.short(entry['per_thread'])}")
    return Tensor(name, spec, (), Free(space, warps, per))
