"""The layout kinds by YAML name (``LAYOUT_KINDS``) and ``from_dict``, which
builds a layout from plain data (a spec's ``layout`` mapping)."""
from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any, Mapping

from ll_codegen.core import limits
from ll_codegen.core.limits import short
from ll_codegen.layouts.amd import AMDMFMALayout, AMDWMMALayout
from ll_codegen.layouts.base import Layout, LayoutError
from ll_codegen.layouts.distributed import BlockedLayout, DistributedLinearLayout, SliceLayout
from ll_codegen.layouts.dot_operand import DotOperandLayout
from ll_codegen.layouts.memory import (CuteLayout, GlobalLayout, NVMMASharedLayout, SharedLinearLayout,
                                       SwizzledSharedLayout)
from ll_codegen.layouts.nvidia import NVMMADistributedLayout


# ------------------------------------------------------------------ registry
LAYOUT_KINDS: dict[str, type] = {cls.kind: cls for cls in (
    BlockedLayout, SliceLayout, NVMMADistributedLayout, DotOperandLayout, AMDMFMALayout,
    AMDWMMALayout, SwizzledSharedLayout, NVMMASharedLayout, DistributedLinearLayout,
    SharedLinearLayout, CuteLayout, GlobalLayout)}


def from_dict(spec: Mapping[str, Any]) -> Layout:
    """Build a layout from plain data: ``{"kind": ..., field: value, ...}``
    (nested ``parent`` mappings are built recursively; a ``shape`` key is
    ignored).  Unknown kinds or fields raise ``LayoutError``."""
    if not isinstance(spec, Mapping):
        raise LayoutError("kind", f"expected a mapping, got {short(spec)}")
    kind = spec.get("kind")
    if kind not in LAYOUT_KINDS:
        raise LayoutError("kind", f"{short(kind)} is not one of {sorted(LAYOUT_KINDS)}")
    cls = LAYOUT_KINDS[kind]
    names = {f.name for f in fields(cls)}
    args = {}
    for k, v in spec.items():
        if k in ("kind", "shape"):
            continue
        if k not in names:
            raise LayoutError(limits.cut(str(k), limits.MAX_ECHO), f"unknown field for kind {kind!r} (fields: {sorted(names)})")
        args[k] = from_dict(v) if k == "parent" and isinstance(v, Mapping) else v
    missing = [f.name for f in fields(cls) if f.name not in args and f.default is MISSING]
    if missing:
        raise LayoutError(missing[0], f"required for kind {kind!r}")
    return cls(**args)
