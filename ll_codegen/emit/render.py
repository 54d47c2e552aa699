"""Render any plan's files: one dispatcher over the operations' renderers.

``plan.operation`` (``convert``, ``store``, ``load``, ``copy``, ``gather``)
picks one row of ``OPERATIONS``: for each file kind the operation has, the
template and the function that computes its values (plain data: every
expression is decided in Python, the templates in ``templates/`` only loop
and substitute).  Rendering is deterministic: the same arguments give the
same text.

Files (``file_names``):

===========  =====================  =====================
kind         CUDA                   HIP
===========  =====================  =====================
header       ``<name>.cuh``         ``<name>.h``
harness      ``<name>_harness.cu``  ``<name>_harness.hip``
bench        ``<name>_bench.cu``    ``<name>_bench.hip``
===========  =====================  =====================

The harness and the bench include the header by its relative name.  Only
conversions and (CUDA) gathers have a bench.
"""
from __future__ import annotations

import os
from typing import Sequence

from ll_codegen.core.dtypes import C_RAW
from ll_codegen.core.files import write_all
from ll_codegen.emit.convert import CONVERT_FILES
from ll_codegen.emit.copy import COPY_FILES
from ll_codegen.emit.env import environment
from ll_codegen.emit.gather import GATHER_FILES
from ll_codegen.emit.memory import LOAD_FILES, STORE_FILES
from ll_codegen.emit.tma import TMA_FILES
from ll_codegen.emit.mma import MMA_FILES
from ll_codegen.plan.gather import GatherPlan
from ll_codegen.plan.model import ConversionPlan

Plan = ConversionPlan | GatherPlan

KINDS = ("header", "harness", "bench")

#: plan.operation -> {kind: (template or template(plan), values(plan, name, command, src_text, dst_text,
#: back_plan) -> dict)}
OPERATIONS = {"convert": CONVERT_FILES, "store": STORE_FILES, "load": LOAD_FILES, "copy": COPY_FILES,
              "gather": GATHER_FILES, "mma": MMA_FILES,
              "tma": TMA_FILES}


def file_names(target: str, name: str) -> dict[str, str]:
    """kind -> file name for ``target`` ("cuda" or "hip")."""
    if target == "hip":
        return {"header": f"{name}.h", "harness": f"{name}_harness.hip", "bench": f"{name}_bench.hip"}
    return {"header": f"{name}.cuh", "harness": f"{name}_harness.cu", "bench": f"{name}_bench.cu"}


def render(plan: Plan, kind: str, name: str, command: str = "", src_layout_text: str | None = None,
           dst_layout_text: str | None = None, back_plan: ConversionPlan | None = None) -> str:
    """Source text of one generated file of ``plan`` (a ``ConversionPlan`` or a ``GatherPlan``).

    ``kind``: ``header`` (the device functions), ``harness`` (one CTA moving
    row-major tensors through them, for bit-exact checks) or ``bench`` (a
    conversion's round trip, which needs ``back_plan``, the dst -> src plan;
    a CUDA gather's loop).  ``command`` and the layout texts (a gather's
    second layout is its index layout) go into the header's opening comment;
    layouts default to their Triton-style dump."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r} (known: {', '.join(KINDS)})")
    if not name.isidentifier():
        raise ValueError(f"name {name!r} is not a C identifier")
    files = OPERATIONS[plan.operation]
    if kind not in files:
        raise ValueError(f"no {kind} for a {plan.operation} plan (the bench times register conversions)")
    template, values = files[kind]
    if callable(template):                 # an operation whose plans pick their template (mma: NVIDIA or AMD)
        template = template(plan)
    ctx = dict(name=name, cuda=plan.target == "cuda", raw=C_RAW[plan.elem_bytes],
               header_file=file_names(plan.target, name)["header"])
    ctx.update(values(plan, name, command, src_layout_text, dst_layout_text, back_plan))
    return environment().get_template(template).render(**ctx)


def render_files(plan: Plan, name: str, kinds: Sequence[str] = ("header", "harness"), command: str = "",
                 src_text: str | None = None, dst_text: str | None = None,
                 back_plan: ConversionPlan | None = None) -> dict[str, str]:
    """file name -> text for ``kinds`` (``render`` of each)."""
    names = file_names(plan.target, name)
    return {names[k]: render(plan, k, name, command, src_text, dst_text, back_plan) for k in kinds}


def write_files(plan: Plan, directory: str, name: str, emit: Sequence[str] = ("header", "harness"),
                command: str = "", src_layout_text: str | None = None, dst_layout_text: str | None = None,
                back_plan: ConversionPlan | None = None) -> list[str]:
    """``render_files`` written into ``directory`` by the one writer (``core.files.write_all``:
    all rendered before any is written, all written or none); returns the written paths."""
    files = render_files(plan, name, emit, command, src_layout_text, dst_layout_text, back_plan)
    return write_all({os.path.join(directory, fname): text for fname, text in files.items()}, make_dirs=True)
