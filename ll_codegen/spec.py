"""Spec files: YAML (or plain dicts) -> layout objects -> ``LinearLayout``.

A spec describes one layout: a top-level ``kind`` (a key of
``layouts.kinds.LAYOUT_KINDS``), that kind's parameters under their Gluon
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
(``shape_override``, ``llgen --shape 64,64``; the override wins) or when the
layout states its own (a ``cute`` descriptor's modes: ``Layout.default_shape``).

Every problem raises ``SpecError`` whose text is one line,
``"<file>: <field>: <what is wrong>"``, where ``<field>`` is a dotted path
into the spec (``parent.warps_per_cta``).  Parameter checks live in the
layout classes (``ll_codegen/layouts/``: each ``__post_init__`` raises
``LayoutError``); this module checks the spec's structure (mapping, kind,
known and required fields, nesting, shape) and re-labels ``LayoutError`` with the file and the
field path.  Nothing else escapes: any other exception raised while building
a layout is reported against the layout it came from.

Hostile input is refused before any work (``limits.py`` names the caps): a
file is opened non-blocking and must be a regular file of at most 1 MiB;
the YAML loader refuses anchors/aliases, deep nesting and huge value counts;
every field is type-checked against its dataclass annotation (an int is an
int: not ``2.0``, ``true`` or ``"2"``) and range-checked before the layout
class sees it; shapes, registers, threads and CTAs are capped.
"""
from __future__ import annotations

import dataclasses
import os
import re
import stat
from dataclasses import MISSING, dataclass, field
from typing import Any, Mapping, Optional, Sequence

import yaml

from ll_codegen.core import limits
from ll_codegen.core.layout import LinearLayout
from ll_codegen.core.limits import short
from ll_codegen.layouts.base import LayoutError
from ll_codegen.layouts.kinds import LAYOUT_KINDS
from ll_codegen.layouts.show import layout_json
from ll_codegen.ttgir import TtgirDoc, TtgirError, parse_dims, read_ttgir, split_selector

__all__ = ["Spec", "SpecError", "load_spec", "spec_from_dict", "build_layout", "parse_shape", "parse_yaml", "flow_yaml",
           "read_spec_text", "read_ttgir_file", "ttgir_listing"]


class SpecError(ValueError):
    """A bad spec.  ``str(e)`` is ``"<source>: <field>: <message>"`` (the
    field part is left out when ``field`` is empty)."""

    def __init__(self, source: str, field: Optional[str], message: str):
        self.source = source
        self.field = limits.printable(field) if field else field     # a hostile key must not break the line
        self.message = limits.cut(_one_line(message))
        parts = [p for p in (source, self.field) if p]
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
            raise ValueError(f"expected sizes such as 64,64, got {short(text)}")
        toks = _SHAPE_SPLIT.split(body)
        if len(toks) > limits.MAX_RANK:
            raise ValueError(f"{len(toks)} sizes; at most {limits.MAX_RANK} dims")
        items: list[Any] = []
        for tok in toks:
            if not re.fullmatch(r"[+-]?\d{1,20}", tok):   # int() of 5000 digits alone is slow
                raise ValueError(f"{short(tok)} is not an integer (expected sizes such as 64,64)")
            items.append(int(tok))
    elif isinstance(text, Sequence) and not isinstance(text, (bytes, bytearray)):
        items = list(text)
    else:
        raise ValueError(f"expected a list of sizes such as [64, 64], got {_type_name(text)}")
    if not items:
        raise ValueError("expected at least one size")
    if len(items) > limits.MAX_RANK:
        raise ValueError(f"{len(items)} sizes; at most {limits.MAX_RANK} dims")
    for v in items:
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValueError(f"expected integer sizes, got {_type_name(v)}")
        if v < 1 or v & (v - 1):
            raise ValueError(f"size {short(v)} is not a power of two")
    n = 1
    for v in items:
        n *= v
    if n > limits.MAX_TILE_ELEMENTS:
        raise ValueError(f"{'x'.join(map(short, items))} is {short(n)} elements; at most "
                         f"{limits.MAX_TILE_ELEMENTS} (2^{limits.MAX_TILE_ELEMENTS.bit_length() - 1}) per tile")
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
        r = short(list(v), 40)
        return f"the list {r}" if not r.endswith(("...", "items")) else f"a list of {len(v)} items"
    return short(v)


def _did_you_mean(word: Any, choices: Sequence[str]) -> str:
    import difflib
    if not isinstance(word, str) or len(word) > 100:    # difflib is quadratic
        return ""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


_EXPECTED = {"int": "an integer", "bool": "true or false", "str": "a string",
             "Sequence[int]": "a list of integers such as [4, 1]",
             "Sequence[Sequence[int]]": "a list of bases such as [[0, 1], [1, 0]]"}


def _check_int(v: Any, source: str, fld: str) -> None:
    """An integer (not a bool, float or string) in ``0..MAX_INT``."""
    if not isinstance(v, int) or isinstance(v, bool):
        raise SpecError(source, fld, f"expected an integer, got {_type_name(v)}")
    if not 0 <= v <= limits.MAX_INT:
        raise SpecError(source, fld, f"{short(v)} is out of range (0 to {limits.MAX_INT})")


def _check_list(v: Any, most: int, what: str, source: str, fld: str) -> list[Any]:
    if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
        raise SpecError(source, fld, f"expected {what}, got {_type_name(v)}")
    if len(v) > most:
        raise SpecError(source, fld, f"{len(v)} entries; at most {most}")
    return list(v)


def _check_type(v: Any, annotation: str, kind: str, source: str, fld: str) -> None:
    """Check a field value against its dataclass annotation before the layout
    class sees it: ints are ints (YAML ``true`` and ``2.0`` are not), in
    range, and lists are short -- so no later message or loop meets a
    hostile value.  The class then checks what the value means."""
    optional = annotation.startswith("Optional[")
    base = annotation[len("Optional["):-1] if optional else annotation
    if v is None:
        if optional or base == "Sequence[Sequence[int]]":     # bases may be left empty
            return
        raise SpecError(source, fld, f"expected {_EXPECTED.get(base, 'a value')}, got nothing (null)")
    if base == "int":
        _check_int(v, source, fld)
    elif base == "bool":
        if not isinstance(v, bool):
            raise SpecError(source, fld, f"expected true or false, got {_type_name(v)}")
    elif base == "str":
        if not isinstance(v, str):
            raise SpecError(source, fld, f"expected a string, got {_type_name(v)}")
        if len(v) > limits.MAX_DESCRIPTOR_CHARS:
            raise SpecError(source, fld, f"{len(v)} characters; at most {limits.MAX_DESCRIPTOR_CHARS}")
    elif base == "Sequence[int]":
        if kind == "nvidia_mma" and fld.endswith("version") and isinstance(v, int) and not isinstance(v, bool):
            v = [v]                                           # version: 2 means [2, 0]
        for i, x in enumerate(_check_list(v, limits.MAX_RANK, _EXPECTED[base], source, fld)):
            _check_int(x, source, f"{fld}[{i}]")
    elif base == "Sequence[Sequence[int]]":
        for i, b in enumerate(_check_list(v, limits.MAX_BASES, _EXPECTED[base], source, fld)):
            for j, x in enumerate(_check_list(b, limits.MAX_RANK, "a basis such as [0, 1]", source, f"{fld}[{i}]")):
                _check_int(x, source, f"{fld}[{i}][{j}]")


def build_layout(d: Any, source: str = "<dict>", path: str = "", top: bool = True) -> Any:
    """Build the layout object of one (possibly nested) spec mapping.

    ``path`` is the dotted prefix of this mapping's fields (``"parent."``);
    ``top`` allows the ``shape`` key.  Raises SpecError."""
    where = path.rstrip(".") or "top level"
    if not isinstance(d, Mapping):
        raise SpecError(source, where, f"expected a mapping with a 'kind' and its fields, got {_type_name(d)}")
    for k in d:
        if not isinstance(k, str):
            raise SpecError(source, where, f"field names must be strings, got {short(k)}")
    if "kind" not in d:
        raise SpecError(source, path + "kind", f"missing; known kinds: {_known_kinds()}")
    kind = d["kind"]
    if not isinstance(kind, str) or kind not in LAYOUT_KINDS:
        raise SpecError(source, path + "kind", f"unknown kind {short(kind)}{_did_you_mean(kind, list(LAYOUT_KINDS))}; known kinds: {_known_kinds()}")
    cls = LAYOUT_KINDS[kind]
    flds = _fields(cls)
    names = [f.name for f in flds]
    allowed = ["kind"] + names + (["shape"] if top else [])
    for k in d:
        if k == "shape" and not top:
            raise SpecError(source, path + k, "give shape at the top level only "
                                              "(a nested layout takes the outer layout's shape)")
        if k not in allowed:
            raise SpecError(source, path + limits.field_name(k), f"unknown field for kind {kind!r}{_did_you_mean(k, allowed)}; allowed fields: {', '.join(allowed)}")
    missing = [f.name for f in flds if _required(f) and f.name not in d]
    if missing:
        raise SpecError(source, path + missing[0], f"missing; kind {kind!r} requires "
                                                   f"{', '.join(f.name for f in flds if _required(f))}")
    types = {f.name: str(f.type) for f in flds}
    args: dict[str, Any] = {}
    for k, v in d.items():
        if k in ("kind", "shape"):
            continue
        if k == "parent":
            if path.count("parent.") >= limits.MAX_RANK:      # a dict from Python can nest without end
                raise SpecError(source, path + k, f"parents nested more than {limits.MAX_RANK} deep")
            v = build_layout(v, source, path + "parent.", top=False)
        elif isinstance(v, Mapping):
            raise SpecError(source, path + k, "expected a value, got a mapping")
        else:
            _check_type(v, types[k], kind, source, path + k)
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
        L = layout.to_linear(shape)
    except LayoutError as e:
        fld = shape_field if e.field == "shape" else e.field
        raise SpecError(source, fld, e.message) from None
    except Exception as e:  # noqa: BLE001
        raise SpecError(source, shape_field, f"cannot lay out shape {list(shape)}: {_one_line(e)}") from None
    problem = limits.layout_problem(L)
    if problem is not None:
        dim, message = problem
        if layout.kind in ("linear", "shared_linear"):
            fld = dim
        else:   # registers grow with the shape; threads and CTAs come from the (parent's) fields
            fld = {"register": shape_field, "warp": "warps_per_cta", "block": "cga_layout"}[dim]
        raise SpecError(source, fld, f"{message} (shape {list(shape)})")
    return L


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
        if "shape" not in d and layout.default_shape() is not None:
            shape = layout.default_shape()          # a CuTe descriptor states its shape: say it once
        elif "shape" not in d:
            raise SpecError(source, "shape", "missing; add e.g. 'shape: [64, 64]' or pass --shape 64,64")
        elif not isinstance(d["shape"], (list, tuple)):
            raise SpecError(source, "shape", f"expected a list of sizes such as [64, 64], "
                                             f"got {_type_name(d['shape'])}")
        else:
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
try:  # libyaml's parser: 1 MiB of hostile text in milliseconds, where pure Python takes seconds
    from yaml.cyaml import CParser as _Parser
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml.parser import Parser as _Parser  # type: ignore[assignment]
    from yaml.reader import Reader as _Reader
    from yaml.scanner import Scanner as _Scanner

    class _Parser(_Reader, _Scanner, _Parser):  # type: ignore[no-redef]
        def __init__(self, stream: str):
            _Reader.__init__(self, stream)
            _Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)


class _Loader(_Parser, yaml.composer.Composer, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
    """A safe loader for hostile input: PyYAML's composer and safe
    constructor on libyaml's parser, refusing anchors and aliases (alias
    expansion is the "billion laughs"), nesting deeper than
    ``limits.MAX_YAML_DEPTH`` (the composer recurses: 500 ``[`` overflow the
    Python stack) and more than ``limits.MAX_YAML_NODES`` values, and
    rejecting duplicate keys (PyYAML keeps the last one)."""

    def __init__(self, stream: str):
        _Parser.__init__(self, stream)
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)
        self._depth = 0
        self._nodes = 0

    # the Python composer, not CParser's C one, so that compose_node can check
    compose_document = yaml.composer.Composer.compose_document
    compose_scalar_node = yaml.composer.Composer.compose_scalar_node
    compose_sequence_node = yaml.composer.Composer.compose_sequence_node
    compose_mapping_node = yaml.composer.Composer.compose_mapping_node
    get_single_node = yaml.composer.Composer.get_single_node
    check_node = yaml.composer.Composer.check_node
    get_node = yaml.composer.Composer.get_node

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise yaml.composer.ComposerError(None, None, "YAML anchors and aliases (&name, *name) are not "
                                              "allowed in a spec; write the value out", event.start_mark)
        self._nodes += 1
        if self._nodes > limits.MAX_YAML_NODES:
            raise yaml.composer.ComposerError(None, None, f"more than {limits.MAX_YAML_NODES} values",
                                              event.start_mark)
        if self._depth >= limits.MAX_YAML_DEPTH:
            raise yaml.composer.ComposerError(None, None, f"nested more than {limits.MAX_YAML_DEPTH} levels deep",
                                              event.start_mark)
        self._depth += 1
        try:
            return yaml.composer.Composer.compose_node(self, parent, index)
        finally:
            self._depth -= 1


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
                None, None, f"duplicate key {short(key)} (first at line {seen[key].line + 1})", key_node.start_mark)
        try:
            seen[key] = key_node.start_mark
        except TypeError:
            pass
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_yaml(text: str, source: str) -> Any:
    """Parse YAML text; errors become SpecError naming the line and column."""
    loader = _Loader(text)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "YAML"
        what = e.problem or "malformed YAML"
        if "maximum nesting depth" in what:   # libyaml >= 0.2.5 stops at depth 1000, before the composer looks
            raise SpecError(source, where, f"nested more than {limits.MAX_YAML_DEPTH} levels deep") from None
        if e.context:
            cm = e.context_mark
            started = (f" started at line {cm.line + 1}, column {cm.column + 1}"
                       if cm is not None and mark is not None and cm.line != mark.line else "")
            what = f"{e.context}{started}: {what}"
        raise SpecError(source, where, f"malformed YAML: {what}") from None
    except yaml.YAMLError as e:
        raise SpecError(source, "YAML", f"malformed YAML: {_one_line(e)}") from None
    except ValueError as e:     # a scalar the constructor cannot read: 5000 digits, a 13th month
        what = "a number with too many digits" if "digits" in str(e) else _one_line(e)
        raise SpecError(source, "YAML", f"malformed YAML: cannot read a value: {what}") from None
    finally:
        loader.dispose()


def flow_yaml(v: Any) -> str:
    """A spec value as one line of YAML flow style (names, integers, booleans, nested lists and
    mappings: what spec mappings hold), e.g. ``{kind: global, order: [0], shape: [64]}``."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return f"[{', '.join(flow_yaml(x) for x in v)}]"
    if isinstance(v, Mapping):
        return f"{{{', '.join(f'{k}: {flow_yaml(x)}' for k, x in v.items())}}}"
    return str(v)


def read_spec_text(path: str | os.PathLike, what: str = "spec", most: int = limits.MAX_SPEC_BYTES) -> str:
    """The text of a spec (or corpus) file, refusing before reading anything
    large: the file is opened non-blocking (a FIFO must not hang), must be a
    regular file (not ``/dev/zero``, a folder, a device) of at most ``most``
    bytes (``limits.MAX_SPEC_BYTES``, 1 MiB), and UTF-8.  Raises SpecError."""
    source = os.fspath(path)
    try:
        fd = os.open(source, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise SpecError(source, None, f"cannot read the {what}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = ("a folder" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                    else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a file")
            raise SpecError(source, None, f"cannot read the {what}: {kind}, not a regular file")
        if st.st_size > most:
            raise SpecError(source, None, f"the {what} is {st.st_size} bytes; at most {most} "
                                          f"({most >> 20} MiB)")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(most + 1)                             # the file may grow after fstat
    except OSError as e:
        raise SpecError(source, None, f"cannot read the {what}: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if len(data) > most:
        raise SpecError(source, None, f"the {what} is over {most} bytes ({most >> 20} MiB)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(source, None, f"not a UTF-8 text file ({e.reason} at byte {e.start})") from None


def load_spec(path: str | os.PathLike, shape_override: Any = None) -> Spec:
    """Load one spec file, or one layout of a TTGIR dump (``FILE.ttgir#NAME``, ``#NAME@128x64``:
    ``ttgir_spec``).  Every problem (unreadable, not a regular file, too large, malformed YAML
    or TTGIR, bad layout, bad shape) raises SpecError."""
    source = os.fspath(path)
    selection = split_selector(source)
    if selection is not None:
        return ttgir_spec(*selection, shape_override=shape_override)
    d = parse_yaml(read_spec_text(source), source)
    if d is None:
        raise SpecError(source, "top level", "the file is empty; expected a mapping with 'kind', its fields and 'shape'")
    return spec_from_dict(d, source, shape_override)


# -------------------------------------------------------------------- TTGIR
def read_ttgir_file(path: str) -> TtgirDoc:
    """A TTGIR/TTIR dump read for its layout attributes (``ll_codegen.ttgir``), at most
    ``limits.MAX_TTGIR_BYTES``.  Raises SpecError naming the file and the line."""
    text = read_spec_text(path, "TTGIR file", limits.MAX_TTGIR_BYTES)
    try:
        return read_ttgir(text, path)
    except TtgirError as e:
        raise SpecError(path, e.where, e.message) from None


def ttgir_spec(path: str, name: str, shape_text: Optional[str], shape_override: Any = None) -> Spec:
    """The ``Spec`` of layout attribute ``name`` of a dump (the only one when ``name`` is empty),
    at ``shape_override``, else the ``@SHAPE`` of the selector, else the one shape the dump uses
    it with.  Its source is ``FILE#NAME``, so every later error names the attribute."""
    doc = read_ttgir_file(path)
    if not name:
        if len(doc.entries) != 1:
            raise SpecError(path, None, f"holds {len(doc.entries)} layout attributes; choose one as "
                                        f"{path}#NAME (llgen show {path} lists them)")
        entry = doc.entries[0]
    else:
        try:
            entry = doc.find(name)
        except TtgirError as e:
            raise SpecError(path, e.where, e.message) from None
    label = f"{path}#{entry.name}"
    listed = ", ".join("x".join(map(str, s)) for s in entry.shapes[:8])
    if shape_override is not None:
        try:
            shape = parse_shape(shape_override)
        except ValueError as e:
            raise SpecError(label, "--shape", str(e)) from None
    elif shape_text is not None:
        dims = parse_dims(shape_text)
        if dims is None:
            raise SpecError(label, "@" + limits.cut(shape_text, 40), "expected a shape such as 128x64")
        shape = dims
    elif len(entry.shapes) == 1:
        shape = entry.shapes[0]
    elif not entry.shapes:
        raise SpecError(label, "shape", "no tensor or memdesc type uses it; give one as "
                                        f"#{entry.name}@128x64 or --shape 128,64")
    else:
        raise SpecError(label, "shape", f"used with {len(entry.shapes)} shapes ({listed}); choose one as "
                                        f"#{entry.name}@{'x'.join(map(str, entry.shapes[0]))}")
    try:
        d = doc.spec_of(entry, len(shape))
    except TtgirError as e:
        raise SpecError(path, e.where, e.message) from None
    return spec_from_dict(dict(d, shape=list(shape)), label)


def ttgir_listing(path: str, most_shapes: int = 8) -> list[dict]:
    """Every layout attribute of a dump as plain data (``llgen show FILE.ttgir``): ``name``,
    ``kind`` (TTGIR's), ``llgen_kind``, ``line``, ``inline``, ``attribute`` (its text),
    ``shapes`` (``"128x64"``), ``spec`` (the mapping, at its first shape), ``problem`` (why
    llgen cannot read it, else None) and ``bases`` (per shape, the first ``most_shapes``: the
    bases of each input dim, or the error line of that shape)."""
    doc = read_ttgir_file(path)
    if not doc.entries:
        raise SpecError(path, None, "no layout attributes (a TTIR dump, before the TTGIR passes, has none)")
    items = []
    budget = limits.MAX_TTGIR_LISTED                     # layouts computed in all: a hostile dump stays cheap
    for e in doc.entries:
        item: dict[str, Any] = {"name": e.name, "kind": e.kind, "llgen_kind": e.llgen_kind, "line": e.line,
                                "inline": e.inline, "attribute": e.attr.text,
                                "shapes": ["x".join(map(str, s)) for s in e.shapes], "spec": None, "problem": None,
                                "bases": {}}
        items.append(item)
        try:
            first = doc.spec_of(e, len(e.shapes[0]) if e.shapes else None)
        except TtgirError as err:
            item["problem"] = err.message
            continue
        item["spec"] = dict(first, shape=list(e.shapes[0])) if e.shapes else first
        for shape in e.shapes[:most_shapes]:
            key = "x".join(map(str, shape))
            budget -= 1
            if budget < 0:
                item["bases"][key] = f"not computed (more than {limits.MAX_TTGIR_LISTED} layouts listed): " \
                                     f"llgen show {path}#{e.name}@{key}"
                continue
            try:
                s = spec_from_dict(dict(doc.spec_of(e, len(shape)), shape=list(shape)), f"{path}#{e.name}")
                item["bases"][key] = layout_json(s.linear)["in_dims"]
            except (SpecError, TtgirError) as err:
                item["bases"][key] = f"error: {err.field + ': ' if getattr(err, 'field', None) else ''}" \
                                     f"{err.message}"
    return items
