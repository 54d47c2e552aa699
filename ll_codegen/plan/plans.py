"""The plan types of the operations that move one tensor between two layouts of a CTA.

Each operation is its own frozen dataclass; the operation *is* the type
(``plan.operation`` is a class constant, a key of the registry in
``ll_codegen/operations``).  They share a header (``Transfer``: element type,
target, threads, both layouts as bases, the broadcast copies, the scored
candidates) and compose the parts of ``model.py``:

==============  ================================================  =====================================
type            moves                                             parts
==============  ================================================  =====================================
``ConvertPlan`` registers -> registers                            one of ``RegisterPlan``,
                (noop, register, shuffle, smem, shuffle+smem,     ``ShufflePlan``, ``SmemPlan``; a staged
                butterfly)                                        plan's first step is ``via``, a
                                                                  butterfly's steps before its last
``StorePlan``   registers -> a shared or global tile              ``memory`` (a ``MemoryPlan``), an
``LoadPlan``    a shared or global tile -> registers              optional ``via`` conversion, ``paths``
``CopyPlan``    a global tile -> a shared tile                    a thread ``mapping``, its ``load`` and
                (cp.async, or through registers)                  ``store`` (``MemoryPlan`` each)
``RelayoutPlan`` a shared tile -> a shared tile (a transpose,    ``load`` (a ``LoadPlan``), ``convert``
                a re-swizzle) through registers                   (a ``ConvertPlan`` without shared
                                                                  memory), ``store`` (a ``StorePlan``)
==============  ================================================  =====================================

``TmaPlan`` (``plan/tma.py``), ``GatherPlan`` (``plan/gather.py``) and ``MmaPlan``
(``plan/mma_model.py``) are the other operations' types.

Conventions: each thread holds ``src[0..n_src)`` before and ``dst[0..n_dst)``
after (elements of ``elem_bytes`` bytes, raw bits; for a 4-bit ``dtype`` the plan is the byte
plan of the quotient layouts, ``packing`` (``plan/packed.py``) the 4-bit layouts and the pair bit,
and every register, offset and count is a byte of two elements); a memory side has no
registers (``n_dst = 0`` for a store, ``n_src = 0`` for a load) and its bases
are the tile's (``offset`` -> tensor).  The strategy fills the canonical
destination registers; ``dst_copies`` (dst, from_dst) then fills the ones the
destination layout broadcasts.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, ClassVar

from ll_codegen.plan.model import (Candidate, MemoryPlan, RegisterPlan, ShufflePlan, SmemPlan,
                                   instruction_name)
from ll_codegen.plan.packed import Packing


@dataclass(frozen=True, kw_only=True)
class Transfer:
    """What every plan moving a tensor between two layouts of one CTA states."""
    operation: ClassVar[str]
    strategy: str
    dtype: str
    elem_bytes: int
    target: str
    arch: str
    warp_size: int
    num_warps: int
    n_src: int
    n_dst: int
    src_bases: dict[str, Any]
    dst_bases: dict[str, Any]
    shape: tuple[int, ...]
    dst_copies: tuple[tuple[int, int], ...] = ()
    candidates: tuple[Candidate, ...] = ()
    packing: Packing | None = None      # 4-bit elements two per byte: the byte plan of the quotient layouts

    @property
    def threads(self) -> int:
        return self.warp_size * self.num_warps

    @property
    def cost(self) -> float:
        """The planner's score of this plan (its cost model's weights): the candidates are listed
        cheapest first and the plan is the first of them; 0 for a plan with no candidates."""
        return self.candidates[0].score if self.candidates else 0.0

    @property
    def smem_bytes(self) -> int:
        """Shared memory the generated function uses (a conversion's scratch, a shared tile)."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """Plain data: the fields, the operation, and ``shuffle``/``smem`` (null when the
        plan has none, as the JSON interface promises)."""
        d = {"operation": self.operation, **asdict(self)}
        d.setdefault("shuffle", None)
        d.setdefault("smem", None)
        return d

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=False)


@dataclass(frozen=True, kw_only=True)
class ConvertPlan(Transfer):
    """Registers -> registers.  ``strategy`` says which part is set: ``noop`` and
    ``register`` a ``RegisterPlan``, ``shuffle`` a ``ShufflePlan``, ``smem`` and
    ``shuffle+smem`` an ``SmemPlan`` -- the staged one after ``via`` (warp shuffles
    to a layout in between; ``without_via`` is the step after it as a plan).
    ``butterfly`` (a chain of shuffle steps, ``plan/butterfly.py``) holds its last step's
    ``ShufflePlan``; ``via`` is the chain before it (a ``butterfly`` plan again, or the first
    step's ``shuffle`` plan), so ``steps`` lists every step in order."""
    operation: ClassVar[str] = "convert"
    register: RegisterPlan | None = None
    shuffle: ShufflePlan | None = None
    smem: SmemPlan | None = None
    via: ConvertPlan | None = None

    @property
    def staged(self) -> bool:
        """Warp shuffles to a layout in between (``via``), then shared memory."""
        return self.via is not None

    @property
    def in_registers(self) -> bool:
        """No data leaves the thread (``noop``, ``register``: a ``RegisterPlan``)."""
        return self.strategy in ("noop", "register")

    @property
    def by_shuffle(self) -> bool:
        """Warp shuffles only (a ``ShufflePlan``; a butterfly's last step, after ``via``)."""
        return self.strategy in ("shuffle", "butterfly")

    @property
    def through_smem(self) -> bool:
        """A trip through shared memory (an ``SmemPlan``; a staged plan's second step)."""
        return self.strategy in ("smem", "shuffle+smem")

    @property
    def smem_bytes(self) -> int:
        if self.via is not None:
            return max(self.via.smem_bytes, without_via(self).smem_bytes)
        return self.smem.bytes if self.smem is not None else 0


@dataclass(frozen=True, kw_only=True)
class AccessPlan(Transfer):
    """Registers <-> a shared or global tile: ``memory`` is the access.  With ``via``
    a store converts first (registers -> ``via``'s destination layout, whose
    registers ``memory`` stores) and a load converts last (``memory`` loads
    registers of ``via``'s source layout).  A global tile that promises less
    alignment than its widest vector carries ``paths``: the plans for smaller
    run-time alignments, widest first (this plan is the fastest); the header
    dispatches on the actual pointer and strides."""
    memory: MemoryPlan
    via: ConvertPlan | None = None
    paths: tuple[AccessPlan, ...] = ()

    @property
    def smem_bytes(self) -> int:
        if self.paths:
            return max(p.smem_bytes for p in (replace(self, paths=()), *self.paths))
        if self.via is not None:
            return max(self.via.smem_bytes, without_via(self).smem_bytes)
        return self.memory.bytes if self.memory.space == "shared" else 0

    def to_dict(self) -> dict[str, Any]:
        """Plain data; ``memory`` also states the target instruction (``instr``; the access
        kind moves to ``access``) and its cost at top level."""
        d = super().to_dict()
        m, mem = self.memory, d["memory"]
        mem["access"] = m.instr
        mem["instr"] = instruction_name(self.target, m.instr, m.direction, m.vec * self.elem_bytes, m.space)
        mem.update(dict(mem["cost"].items()))
        if m.space == "global":
            mem["requests"] = m.cost.instructions
        return d


@dataclass(frozen=True, kw_only=True)
class StorePlan(AccessPlan):
    """Registers -> a tile (``n_dst = 0``; ``dst_bases`` is the tile)."""
    operation: ClassVar[str] = "store"


@dataclass(frozen=True, kw_only=True)
class LoadPlan(AccessPlan):
    """A tile -> registers (``n_src = 0``; ``src_bases`` is the tile)."""
    operation: ClassVar[str] = "load"


@dataclass(frozen=True, kw_only=True)
class CopyPlan(Transfer):
    """A global tile -> a shared tile (strategy ``copy``), no registers on either side.
    ``mapping`` is the thread mapping the planner built (register, lane, warp ->
    tensor bases); ``load`` reads the global tile into registers of that mapping,
    ``store`` writes them into the shared tile, and access k of both moves the same
    registers, so one ``cp.async`` per pair copies global -> shared directly
    (``async_copy``: sm_80+ and 4/8/16-byte vectors) or a load and a store move it
    through a register.  ``paths`` as for ``AccessPlan``."""
    operation: ClassVar[str] = "copy"
    mapping: dict[str, Any]
    load: MemoryPlan
    store: MemoryPlan
    async_copy: bool
    paths: tuple[CopyPlan, ...] = ()

    @property
    def smem_bytes(self) -> int:
        return self.store.bytes

    def halves(self) -> tuple[LoadPlan, StorePlan]:
        """The copy as two access plans over its thread mapping: the load of the global
        tile into the mapping's registers, then their store into the shared tile."""
        n = 1 << len(self.mapping["in_dims"]["register"])
        common = {f.name: getattr(self, f.name) for f in fields(Transfer)} | {"candidates": ()}
        load = LoadPlan(**(common | dict(strategy="load", n_src=0, n_dst=n, dst_bases=self.mapping)), memory=self.load)
        store = StorePlan(**(common | dict(strategy="store", n_src=n, n_dst=0, src_bases=self.mapping)),
                          memory=self.store)
        return load, store

    def to_dict(self) -> dict[str, Any]:
        """Plain data and a ``memory`` summary: the instruction(s), sectors and wavefronts."""
        d = super().to_dict()
        ld, st = self.load, self.store
        instr = ("cp.async" if self.async_copy else
                 f"{instruction_name(self.target, 'vector', 'load', ld.vector_bytes, 'global')} + "
                 f"{instruction_name(self.target, 'vector', 'store', st.vector_bytes)}")
        d["memory"] = {"space": "global -> shared", "instr": instr, "vector_bytes": ld.vector_bytes,
                       "instructions": ld.cost.instructions, "sectors": ld.cost.sectors,
                       "requests": ld.cost.instructions, "wavefronts": st.cost.wavefronts,
                       "bank_conflicts": st.cost.bank_conflicts}
        return d


@dataclass(frozen=True, kw_only=True)
class RelayoutPlan(Transfer):
    """A shared tile -> a shared tile (strategy ``relayout``), no registers on either side
    (``n_src = n_dst = 0``; ``src_bases``/``dst_bases`` are the tiles).  ``load`` reads the
    source tile into the register layout R1 the planner chose (its ``dst_bases``), ``convert``
    moves R1 -> R2 in registers or by warp shuffles (``noop`` when R1 = R2), ``store`` writes R2
    into the destination tile.  The tiles are separate buffers: the source at offset 0 of the
    harness's shared memory, the destination at ``dst_offset``."""
    operation: ClassVar[str] = "relayout"
    load: LoadPlan
    convert: ConvertPlan
    store: StorePlan

    @property
    def dst_offset(self) -> int:
        """Byte offset of the destination tile after the source tile in the harness (aligned to both)."""
        align = max(16, self.store.memory.alignment, self.load.memory.alignment)
        return -(-self.load.memory.bytes // align) * align

    @property
    def smem_bytes(self) -> int:
        """Both tiles, as the harness lays them out (the header itself needs no scratch)."""
        return self.dst_offset + self.store.memory.bytes

    def to_dict(self) -> dict[str, Any]:
        """Plain data and a ``memory`` summary: each side's instruction, wavefronts and conflicts
        (``read``: the source tile's loads, ``write``: the destination tile's stores)."""
        d = super().to_dict()
        ld, st = self.load.memory, self.store.memory
        d["memory"] = {"space": "shared -> shared", "conversion": self.convert.strategy,
                       "read": {"instr": instruction_name(self.target, ld.instr, "load", ld.vector_bytes),
                                "vector_bytes": ld.vector_bytes, "instructions": ld.cost.instructions,
                                "wavefronts": ld.cost.wavefronts, "bank_conflicts": ld.cost.bank_conflicts,
                                "total_wavefronts": ld.cost.total_wavefronts},
                       "write": {"instr": instruction_name(self.target, st.instr, "store", st.vector_bytes),
                                 "vector_bytes": st.vector_bytes, "instructions": st.cost.instructions,
                                 "wavefronts": st.cost.wavefronts, "bank_conflicts": st.cost.bank_conflicts,
                                 "total_wavefronts": st.cost.total_wavefronts}}
        return d


def without_via(plan: ConvertPlan | AccessPlan) -> ConvertPlan | AccessPlan:
    """The step of a ``via`` plan after (store, staged convert) or before (load) its
    conversion, as a plan of its own: the memory access over the layout ``via``
    converts to (store) or from (load); for a staged conversion the shared-memory
    step from ``via``'s destination layout (a butterfly's: its last shuffle step).  ``plan``
    itself when it has no ``via``."""
    v = plan.via
    if v is None:
        return plan
    if isinstance(plan, ConvertPlan):
        last = "shuffle" if plan.strategy == "butterfly" else "smem"
        return replace(plan, via=None, strategy=last, src_bases=v.dst_bases, n_src=v.n_dst, candidates=())
    if isinstance(plan, StorePlan):
        return replace(plan, via=None, src_bases=v.dst_bases, n_src=v.n_dst, candidates=())
    return replace(plan, via=None, dst_bases=v.src_bases, n_dst=v.n_src, dst_copies=(), candidates=())


def steps(plan: Transfer) -> list[Transfer]:
    """The plans ``plan`` executes, in order: a store's or staged conversion's ``via`` first and
    then the step after it, a load's access first and then its ``via``; ``[plan]`` otherwise.
    A ``via`` with steps of its own (a butterfly's chain) is listed step by step."""
    via = plan.via if isinstance(plan, (ConvertPlan, AccessPlan)) else None
    if via is None:
        return [plan]
    return [without_via(plan), *steps(via)] if isinstance(plan, LoadPlan) else [*steps(via), without_via(plan)]
