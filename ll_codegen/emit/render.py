"""Render one file of a plan from its operation's file table.

Each operation's record in the registry (``ll_codegen/operations.py``) holds its
file table: for each file kind the operation has, the template and the function
that computes its values (plain data: every expression is decided in Python, the
templates in ``templates/`` only loop and substitute).  Rendering is
deterministic: the same arguments give the same text.

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

from typing import Any, Callable, Mapping

from ll_codegen.core.dtypes import C_RAW
from ll_codegen.emit.env import environment

KINDS = ("header", "harness", "bench")


def file_names(target: str, name: str) -> dict[str, str]:
    """kind -> file name for ``target`` ("cuda" or "hip")."""
    if target == "hip":
        return {"header": f"{name}.h", "harness": f"{name}_harness.hip", "bench": f"{name}_bench.hip"}
    return {"header": f"{name}.cuh", "harness": f"{name}_harness.cu", "bench": f"{name}_bench.cu"}


def render_template(plan: Any, operation: str, files: Mapping[str, tuple[Any, Callable[..., dict]]], kind: str,
                    name: str, command: str = "", src_layout_text: str | None = None,
                    dst_layout_text: str | None = None, back_plan: Any = None) -> str:
    """Source text of one generated file of ``plan``, whose operation renders ``files``: kind ->
    (template, or a function of the plan giving one; values(plan, name, command, src_text,
    dst_text, back_plan) -> the template's values).  ``command`` and the layout texts (a
    gather's second layout is its index layout) go into the header's opening comment;
    layouts default to their Triton-style dump."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r} (known: {', '.join(KINDS)})")
    if not name.isidentifier():
        raise ValueError(f"name {name!r} is not a C identifier")
    if kind not in files:
        raise ValueError(f"no {kind} for a {operation} plan (the bench times register conversions)")
    template, values = files[kind]
    if callable(template):                 # an operation whose plans pick their template (mma: NVIDIA or AMD)
        template = template(plan)
    ctx = dict(name=name, cuda=plan.target == "cuda", raw=C_RAW[plan.elem_bytes],
               header_file=file_names(plan.target, name)["header"])
    ctx.update(values(plan, name, command, src_layout_text, dst_layout_text, back_plan))
    return environment().get_template(template).render(**ctx)
