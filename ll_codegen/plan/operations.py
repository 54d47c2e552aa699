"""The operations a plan can perform: the one list every later stage dispatches on.

A plan names its operation (``plan.operation``); each stage after this one keeps
one table keyed by these names -- the summary (``plan/report.py: SUMMARIES``),
the renderer (``emit``), the emulator and the host and GPU drivers (``verify``)
-- and ``tests/test_architecture.py`` checks that every table covers exactly
these keys.  Adding an operation is adding a plan type and planner here, then
one entry per stage table (``docs/ARCHITECTURE.md``: "Adding an operation").

====================  ===========================================  ====================
operation             what moves                                   plan type
====================  ===========================================  ====================
``convert``           registers -> registers (noop, register       ``ConversionPlan``
                      permutation, warp shuffles, shared memory)
``store``             registers -> a shared or global tile         ``ConversionPlan``
``load``              a shared or global tile -> registers         ``ConversionPlan``
``copy``              a global tile -> a shared tile               ``ConversionPlan``
``tma``               a global tile <-> a shared tile by TMA       ``ConversionPlan``
                      (sm_90a: cp.async.bulk.tensor per box)
``gather``            ``out = src[.., index, ..]`` along one axis   ``GatherPlan``
``mma``               ``acc += A @ B`` (wgmma, mma.sync)            ``MmaPlan``
====================  ===========================================  ====================
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ll_codegen.plan.gather import GatherPlan, plan_gather
from ll_codegen.plan.mma import MmaPlan, plan_mma
from ll_codegen.plan.model import ConversionPlan
from ll_codegen.plan.planner import plan_conversion, plan_copy, plan_memory
from ll_codegen.plan.tma import plan_tma


@dataclass(frozen=True)
class Operation:
    """One operation: its plan type, the planner that makes such plans, and a line for people."""
    plan_type: type
    planner: Callable[..., object]
    moves: str


OPERATIONS: dict[str, Operation] = {
    "convert": Operation(ConversionPlan, plan_conversion, "registers -> registers"),
    "store": Operation(ConversionPlan, plan_memory, "registers -> a shared or global tile"),
    "load": Operation(ConversionPlan, plan_memory, "a shared or global tile -> registers"),
    "copy": Operation(ConversionPlan, plan_copy, "a global tile -> a shared tile"),
    "tma": Operation(ConversionPlan, plan_tma, "a global tile <-> a shared tile by TMA (sm_90a)"),
    "gather": Operation(GatherPlan, plan_gather, "out = src gathered by index along one axis"),
    "mma": Operation(MmaPlan, plan_mma, "acc += A @ B for one CTA tile (wgmma, mma.sync)"),
}
