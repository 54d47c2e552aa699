"""Spec files: YAML (or plain dicts) -> layout objects -> ``LinearLayout``.

A spec describes one layout: a top-level ``kind`` (a key of
``layouts.LAYOUT_KINDS``), that kind's parameters under their Gluon
snake_case names, and the tensor ``shape``::

    kind: blocked
    size_per_thread: [1, 4]
    threads_per_warp: [8, 4]
    warps_per_cta: [4, 1]
    order: [1, 0]
    shape: [64, 64]

``slice`` and ``dot_operand`` take their ``parent`` as a nested mapping of
the same form (without ``shape``: the shape belongs to the outer layout).
``shape`` may be left out of the file when the caller gives one
(``shape_override``, ``llgen --shape 64,64``); the override wins.

Every problem raises ``SpecError`` whose text is one line,
``"<file>: <field>: <what is wrong>"``, where ``<field>`` is a dotted path
into the spec (``parent.warps_per_cta``).  Parameter checks live in
``layouts.py`` (each class's ``__post_init__`` raises ``LayoutError``); this
module checks the spec's structure (mapping, kind, known and required
fields, nesting, shape) and re-labels ``LayoutError`` with the file and the
field path.  Nothing else escapes: any other exception raised while building
a layout is reported against the layout it came from.
"""
from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import MISSING, dataclass, field
from typing import Any, Mapping, Optional, Sequence

import yaml

from .layout import LinearLayout
from .layouts import LAYOUT_KINDS, LayoutError

__all__ = ["Spec", "SpecError", "load_spec", "spec_from_dict", "build_layout", "parse_shape"]


class SpecError(ValueError):
    """A bad spec.  ``str(e)`` is ``"<source>: <field>: <message>"`` (the
    field part is left out when ``field`` is empty)."""

    def __init__(self, source: str, field: Optional[str], message: str):
        self.source = source
        self.field = field
        self.message = _one_line(message)
        parts = [p for p in (source, field) if p]
        super().__init__(": ".join(parts + [self.message]))


def _one_line(text: Any) -> str:
    """First non-empty line of ``text`` (LinearLayout errors append a dump)."""
    for line in str(text).splitlines():
        if line.strip():
            return line.strip().rstrip(":")
    return str(text).strip() or "invalid"


@dataclass(frozen=True)
class Spec:
    """One loaded spec: where it came from, the layout object, the shape,
    and the ``LinearLayout`` they give (computed, and so validated, once)."""

    source: str
    layout: Any
    shape: tuple[int, ...]
    linear: LinearLayout = field(repr=False, compare=False)

    @property
    def kind(self) -> str:
        return self.layout.kind

    @property
    def is_memory(self) -> bool:
        return bool(self.layout.is_memory)


# ------------------------------------------------------------------- shape
_SHAPE_SPLIT = re.compile(r"\s*[,x×]\s*")


def parse_shape(text: Any) -> tuple[int, ...]:
    """``"64,64"`` (also ``"64x64"``, ``"[64, 64]"``, a list or tuple of ints)
    -> ``(64, 64)``.  Sizes must be positive powers of two; raises ValueError."""
    if isinstance(text, str):
        body = text.strip().strip("[]()").strip()
        if not body:
            raise ValueError(f"expected sizes such as 64,64, got {text!r}")
        items: list[Any] = []
        for tok in _SHAPE_SPLIT.split(body):
            try:
                items.append(int(tok))
            except ValueError:
                raise ValueError(f"{tok!r} in {text!r} is not an integer (expected sizes such as 64,64)") from None
    elif isinstance(text, Sequence) and not isinstance(text, (bytes, bytearray)):
        items = list(text)
    else:
        raise ValueError(f"expected a list of sizes such as [64, 64], got {text!r}")
    if not items:
        raise ValueError("expected at least one size")
    for v in items:
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValueError(f"expected integer sizes, got {v!r}")
        if v < 1 or v & (v - 1):
            raise ValueError(f"size {v} is not a power of two")
    return tuple(items)


# ----------------------------------------------------------- layout object
def _fields(cls: type) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(cls) if f.init]


def _required(f: dataclasses.Field) -> bool:
    return f.default is MISSING and f.default_factory is MISSING  # type: ignore[misc]


def _known_kinds() -> str:
    return ", ".join(sorted(LAYOUT_KINDS))


def _type_name(v: Any) -> str:
    if v is None:
        return "nothing (null)"
    if isinstance(v, bool):
        return f"the boolean {str(v).lower()}"
    if isinstance(v, Mapping):
        return "a mapping"
    if isinstance(v, (list, tuple)):
        r = repr(list(v))
        return f"the list {r}" if len(r) <= 40 else f"a list of {len(v)} items"
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _did_you_mean(word: Any, choices: Sequence[str]) -> str:
    import difflib
    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def build_layout(d: Any, source: str = "<dict>", path: str = "", top: bool = True) -> Any:
    """Build the layout object of one (possibly nested) spec mapping.

    ``path`` is the dotted prefix of this mapping's fields (``"parent."``);
    ``top`` allows the ``shape`` key.  Raises SpecError."""
    where = path.rstrip(".") or "top level"
    if not isinstance(d, Mapping):
        raise SpecError(source, where, f"expected a mapping with a 'kind' and its fields, got {_type_name(d)}")
    for k in d:
        if not isinstance(k, str):
            raise SpecError(source, where, f"field names must be strings, got {k!r}")
    if "kind" not in d:
        raise SpecError(source, path + "kind", f"missing; known kinds: {_known_kinds()}")
    kind = d["kind"]
    if not isinstance(kind, str) or kind not in LAYOUT_KINDS:
        raise SpecError(source, path + "kind", f"unknown kind {kind!r}{_did_you_mean(kind, list(LAYOUT_KINDS))}; known kinds: {_known_kinds()}")
    cls = LAYOUT_KINDS[kind]
    flds = _fields(cls)
    names = [f.name for f in flds]
    allowed = ["kind"] + names + (["shape"] if top else [])
    for k in d:
        if k == "shape" and not top:
            raise SpecError(source, path + k, "give shape at the top level only "
                                              "(a nested layout takes the outer layout's shape)")
        if k not in allowed:
            raise SpecError(source, path + k, f"unknown field for kind {kind!r}{_did_you_mean(k, allowed)}; allowed fields: {', '.join(allowed)}")
    missing = [f.name for f in flds if _required(f) and f.name not in d]
    if missing:
        raise SpecError(source, path + missing[0], f"missing; kind {kind!r} requires "
                                                   f"{', '.join(f.name for f in flds if _required(f))}")
    args: dict[str, Any] = {}
    for k, v in d.items():
        if k in ("kind", "shape"):
            continue
        if k == "parent":
            v = build_layout(v, source, path + "parent.", top=False)
        elif isinstance(v, Mapping):
            raise SpecError(source, path + k, f"expected a value, got a mapping")
        args[k] = v
    try:
        return cls(**args)
    except LayoutError as e:
        raise SpecError(source, path + e.field, e.message) from None
    except SpecError:
        raise
    except Exception as e:  # noqa: BLE001 - a bad value must never become a traceback
        raise SpecError(source, where if path else "kind", f"invalid {kind} layout: {type(e).__name__}: {e}") from None


def _linear(layout: Any, shape: tuple[int, ...], source: str, shape_field: str) -> LinearLayout:
    try:
        return layout.to_linear(shape)
    except LayoutError as e:
        fld = shape_field if e.field == "shape" else e.field
        raise SpecError(source, fld, e.message) from None
    except Exception as e:  # noqa: BLE001
        raise SpecError(source, shape_field, f"cannot lay out shape {list(shape)}: {_one_line(e)}") from None


def spec_from_dict(d: Any, source: str = "<dict>", shape_override: Any = None) -> Spec:
    """Build a ``Spec`` from plain data (the parsed YAML).  ``shape_override``
    (a tuple or a string such as ``"64,64"``) replaces the spec's ``shape``."""
    layout = build_layout(d, source)
    if shape_override is not None:
        shape_field = "--shape"
        try:
            shape = parse_shape(shape_override)
        except ValueError as e:
            raise SpecError(source, shape_field, str(e)) from None
    else:
        shape_field = "shape"
        if "shape" not in d:
            raise SpecError(source, "shape", "missing; add e.g. 'shape: [64, 64]' or pass --shape 64,64")
        if not isinstance(d["shape"], (list, tuple)):
            raise SpecError(source, "shape", f"expected a list of sizes such as [64, 64], "
                                             f"got {_type_name(d['shape'])}")
        try:
            shape = parse_shape(d["shape"])
        except ValueError as e:
            raise SpecError(source, "shape", str(e)) from None
    rank = getattr(layout, "rank", None)
    if isinstance(rank, int) and rank != len(shape):
        raise SpecError(source, shape_field, f"{list(shape)} has rank {len(shape)}, "
                                             f"but the {layout.kind} layout has rank {rank}")
    return Spec(source, layout, shape, _linear(layout, shape, source, shape_field))


# --------------------------------------------------------------------- YAML
class _Loader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys (PyYAML keeps the last one)."""


def _construct_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False):
    loader.flatten_mapping(node)
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            dup = key in seen
        except TypeError:
            dup = False
        if dup:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first at line {seen[key].line + 1})", key_node.start_mark)
        try:
            seen[key] = key_node.start_mark
        except TypeError:
            pass
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_yaml(text: str, source: str) -> Any:
    """Parse YAML text; errors become SpecError naming the line and column."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "YAML"
        what = e.problem or "malformed YAML"
        if e.context:
            cm = e.context_mark
            started = (f" started at line {cm.line + 1}, column {cm.column + 1}"
                       if cm is not None and mark is not None and cm.line != mark.line else "")
            what = f"{e.context}{started}: {what}"
        raise SpecError(source, where, f"malformed YAML: {what}") from None
    except yaml.YAMLError as e:
        raise SpecError(source, "YAML", f"malformed YAML: {_one_line(e)}") from None


def load_spec(path: str | os.PathLike, shape_override: Any = None) -> Spec:
    """Load one spec file.  Every problem (unreadable file, malformed YAML,
    bad layout, bad shape) raises SpecError."""
    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as e:
        raise SpecError(source, None, f"cannot read the spec: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise SpecError(source, None, f"not a UTF-8 text file ({e.reason} at byte {e.start})") from None
    d = parse_yaml(text, source)
    if d is None:
        raise SpecError(source, "top level", "the file is empty; expected a mapping with 'kind', its fields and 'shape'")
    return spec_from_dict(d, source, shape_override)
