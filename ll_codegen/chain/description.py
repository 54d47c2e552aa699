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
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ll_codegen.core import limits
from ll_codegen.core.dtypes import DTYPE_BYTES
from ll_codegen.core.target import get_target
from ll_codegen.spec import (
    Spec,
    SpecError,
    load_spec,
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
class Tensor:
    """A named tensor of the chain: its spec and the free indices its dims carry (dim -> index)."""
    name: str
    spec: Spec
    indices: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class Step:
    """One operation of the chain: ``src`` -> ``dst`` (tensor names), the element type, and the
    ``llgen convert`` options it is planned with (``warps``, ``swizzle``, ...)."""
    src: str
    dst: str
    dtype: str
    options: tuple[tuple[str, Any], ...] = ()


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


STEP_OPTIONS = ("warps", "swizzle", "smem_budget", "max_vector_bytes", "strides", "instr", "barrier")


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
        get_target(str(target), None if arch is None else str(arch))
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
        tensors.append(_tensor(source, root, str(name), _mapping(source, f"tensors.{name}", entry), indices))
    names = {t.name for t in tensors}
    raw_steps = data.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps or len(raw_steps) > MAX_STEPS:
        raise _fail(source, "steps", f"a list of 1 to {MAX_STEPS} steps")
    steps = tuple(_step(source, k, _mapping(source, f"steps[{k}]", s), names) for k, s in enumerate(raw_steps))
    used = {t for s in steps for t in (s.src, s.dst)}
    for t in tensors:
        for _, index in t.indices:
            if t.name not in used:
                raise _fail(source, f"tensors.{t.name}", "carries a free index but no step uses the tensor")
    return Chain(source, str(target), None if arch is None else str(arch), tuple(indices.items()),
                 tuple(tensors), steps)


def _tensor(source: str, root: str, name: str, entry: Mapping, indices: Mapping[str, int]) -> Tensor:
    where = f"tensors.{_named(name)}"
    if not name.isidentifier() or not name.isascii():
        raise _fail(source, where, "a tensor name is a C identifier (it names the generated files and functions)")
    extra = sorted(str(k) for k in entry if k not in ("spec", "index"))
    if extra:
        raise _fail(source, where, f"unknown field {limits.short(extra[0])}; allowed: spec, index")
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


def _step(source: str, k: int, entry: Mapping, names: set[str]) -> Step:
    where = f"steps[{k}]"
    allowed = ("src", "dst", "dtype") + STEP_OPTIONS
    extra = sorted(str(x) for x in entry if x not in allowed)
    if extra:
        raise _fail(source, where, f"unknown field {limits.short(extra[0])}; allowed: {', '.join(allowed)}")
    for side in ("src", "dst"):
        if entry.get(side) not in names:
            raise _fail(source, f"{where}.{side}", f"{limits.short(entry.get(side))} is not a tensor of the chain")
    dtype = entry.get("dtype", "f16")
    if dtype not in DTYPE_BYTES:
        raise _fail(source, f"{where}.dtype", f"{limits.short(dtype)} is not one of {', '.join(DTYPE_BYTES)}")
    options = tuple((o, entry[o]) for o in STEP_OPTIONS if o in entry)
    return Step(entry["src"], entry["dst"], dtype, options)
