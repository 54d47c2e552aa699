"""Human-readable views of a layout: JSON data, a text dump, an SVG picture.

Pure functions (``LinearLayout`` and a little metadata in, ``str``/``dict``
out); ``cli.py show`` only wires them to files and streams.

* ``layout_json(L)`` -- DESIGN.md's ``--json`` form: ``{"in_dims": {dim:
  [[...], ...]}, "out_dims": {"dim0": N, ...}}``; a distributed layout always
  lists ``register, lane, warp, block``, a memory layout ``offset, block``.
* ``render_text(...)`` -- kind, shape, parameters, the bases table in
  Triton's ``toString`` format, and for 1-D/2-D layouts up to 64x64 a grid:
  each element shows the hardware location holding it, ``t<lane>:r<register>``
  (prefixed ``w<warp>:`` when there are several warps, ``b<block>:`` with
  several blocks), or its ``offset`` for memory layouts.  When several
  locations hold the same element (broadcast) the lowest one -- smallest
  ``(block, warp, lane, register)`` -- is shown, marked ``*``.
* ``render_svg(...)`` -- the same grid as a picture (paper 000, Figure 1):
  distributed layouts coloured by warp and labelled ``t<lane>:r<register>``;
  memory layouts labelled with offsets and coloured by bank group (the
  16-byte chunk, 4 banks, of the 128-byte row of banks an element falls in),
  with alternate 128-byte segments drawn darker.
"""
from __future__ import annotations

import colorsys
import html
import re
from typing import Any, Mapping, Optional

import numpy as np

from ll_codegen.core.layout import LinearLayout
from ll_codegen.layouts.cute import ELEMENT_BITS

__all__ = ["layout_json", "json_text", "layout_params", "owner_grid", "render_text", "render_svg", "element_bits_of",
           "TEXT_GRID_MAX", "SVG_GRID_MAX", "xml_text"]

#: Largest grid (per dim) printed by ``render_text``.
TEXT_GRID_MAX = 64
#: Largest grid (per dim) drawn by ``render_svg``.
SVG_GRID_MAX = 128

DISTRIBUTED_DIMS = ("register", "lane", "warp", "block")
MEMORY_DIMS = ("offset", "block")


def is_memory_layout(L: LinearLayout) -> bool:
    return "offset" in L.in_dims


def layout_json(L: LinearLayout) -> dict:
    """``{"in_dims": {...}, "out_dims": {...}}`` (see the module docstring)."""
    bases = L.bases
    names = MEMORY_DIMS if is_memory_layout(L) else DISTRIBUTED_DIMS
    ins = {d: [list(b) for b in bases.get(d, [])] for d in names}
    for d in L.in_dims:  # any extra input dim, in the layout's order
        if d not in ins:
            ins[d] = [list(b) for b in bases[d]]
    return {"in_dims": ins, "out_dims": dict(L.out_dim_sizes)}


# --------------------------------------------------------------------- grid
def _grid_dims(L: LinearLayout) -> Optional[tuple[int, int]]:
    """(rows, cols) of the grid drawn for ``L``; None unless rank 1 or 2."""
    sizes = list(L.out_dim_sizes.values())
    if len(sizes) == 1:
        return 1, sizes[0]
    if len(sizes) == 2:
        return sizes[0], sizes[1]
    return None


def owner_grid(L: LinearLayout) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """For a rank-1 or rank-2 layout: ``(owner, count)`` where ``owner[dim]``
    is a (rows, cols) array giving, per element, that input dim's value at
    the lowest flattened input holding the element (first input dim in the
    low bits, so the lowest ``(block, warp, lane, register)``), and ``count``
    says how many inputs hold it (0: nobody, >1: broadcast)."""
    grid = _grid_dims(L)
    if grid is None:
        raise ValueError(f"a grid needs a 1-D or 2-D layout, this one has {len(L.out_dims)} dims")
    rows, cols = grid
    images = L.apply_all()
    if images.shape[1] == 1:
        cell = images[:, 0]
    else:
        cell = images[:, 0] * cols + images[:, 1]
    n_cells = rows * cols
    idx = np.arange(images.shape[0], dtype=np.int64)
    lowest = np.full(n_cells, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(lowest, cell, idx)
    count = np.bincount(cell, minlength=n_cells)
    lowest = np.where(count > 0, lowest, 0)
    owner: dict[str, np.ndarray] = {}
    shift = 0
    for d in L.in_dims:
        k = L.in_dim_size_log2(d)
        owner[d] = ((lowest >> shift) & ((1 << k) - 1)).reshape(rows, cols)
        shift += k
    return owner, count.reshape(rows, cols)


def _cell_labels(L: LinearLayout, memory: bool) -> tuple[list[list[str]], np.ndarray, dict[str, np.ndarray]]:
    owner, count = owner_grid(L)
    rows, cols = count.shape
    nblocks = L.in_dim_size("block") if "block" in L.in_dims else 1
    nwarps = L.in_dim_size("warp") if "warp" in L.in_dims else 1
    labels = []
    for i in range(rows):
        row = []
        for j in range(cols):
            if count[i, j] == 0:
                row.append(".")
                continue
            if memory:
                s = str(int(owner["offset"][i, j]))
            else:
                s = f"t{int(owner['lane'][i, j])}:r{int(owner['register'][i, j])}"
                if nwarps > 1:
                    s = f"w{int(owner['warp'][i, j])}:" + s
            if nblocks > 1:
                s = f"b{int(owner['block'][i, j])}:" + s
            if count[i, j] > 1:
                s += "*"
            row.append(s)
        labels.append(row)
    return labels, count, owner


def _fmt_params(params: Mapping[str, Any]) -> str:
    parts = []
    for k, v in params.items():
        if k == "kind":
            continue
        if isinstance(v, Mapping):
            parts.append(f"{k}=<{_fmt_kind(v)}>")
        else:
            parts.append(f"{k}={v}")
    return " ".join(parts)


def _fmt_kind(params: Mapping[str, Any]) -> str:
    inner = _fmt_params(params)
    return f"{params.get('kind', '?')}" + (f" {inner}" if inner else "")


def layout_params(layout: Any) -> dict:
    """The layout object's parameters as plain data (``kind`` first)."""
    to_dict = getattr(layout, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    import dataclasses
    out: dict[str, Any] = {"kind": getattr(layout, "kind", type(layout).__name__)}
    if dataclasses.is_dataclass(layout):
        for f in dataclasses.fields(layout):
            v = getattr(layout, f.name)
            if v is not None:
                out[f.name] = layout_params(v) if dataclasses.is_dataclass(v) else v
    return out


def render_text(L: LinearLayout, kind: str, shape: tuple[int, ...], params: Optional[Mapping[str, Any]] = None,
                source: str = "", grid_max: int = TEXT_GRID_MAX) -> str:
    """The readable dump printed by ``llgen show``."""
    memory = is_memory_layout(L)
    lines = []
    head = f"{kind} layout, shape {list(shape)}"
    if source:
        head += f"  ({source})"
    lines.append(head)
    if params:
        p = _fmt_params(params)
        if p:
            lines.append(f"parameters: {p}")
    ins = ", ".join(f"{d} {L.in_dim_size(d)}" for d in L.in_dims)
    outs = " x ".join(str(s) for s in L.out_dim_sizes.values())
    kindword = "memory" if memory else "distributed"
    lines.append(f"{kindword} layout: {ins} -> {outs}")
    props = []
    props.append("injective" if L.is_injective() else "not injective (broadcast: several locations hold one element)")
    lines.append("properties: " + ", ".join(props))
    lines.append("")
    lines.append("bases (bases[in_dim][i] = image of in_dim = 2**i, one value per out dim):")
    lines.append(repr(L))
    grid = _grid_dims(L)
    lines.append("")
    if grid is None:
        lines.append(f"(no grid: only 1-D and 2-D layouts are drawn; this one has {len(L.out_dims)} dims)")
        return "\n".join(lines) + "\n"
    rows, cols = grid
    if rows > grid_max or cols > grid_max:
        lines.append(f"(no grid: {rows}x{cols} is larger than {grid_max}x{grid_max}; "
                     f"use --shape to show a smaller tensor)")
        return "\n".join(lines) + "\n"
    labels, count, _ = _cell_labels(L, memory)
    if memory:
        what = "offset of each element"
    else:
        what = "t<lane>:r<register> holding each element"
        if "warp" in L.in_dims and L.in_dim_size("warp") > 1:
            what = "w<warp>:" + what
    if "block" in L.in_dims and L.in_dim_size("block") > 1:
        what = "b<block>:" + what
    if len(L.out_dims) == 2:
        lines.append(f"grid: rows {L.out_dims[0]}, columns {L.out_dims[1]}; cell = {what}")
    else:
        lines.append(f"grid: {L.out_dims[0]} along one row; cell = {what}")
    if (count > 1).any():
        lines.append(f"  * = broadcast: held by {int(count.max())} locations; the lowest "
                     f"({'block, offset' if memory else 'block, warp, lane, register'}) is shown")
    if (count == 0).any():
        lines.append("  . = held by no location")
    w = max(max(len(s) for row in labels for s in row), len(str(cols - 1)))
    rw = max(len(str(rows - 1)), 1)
    lines.append(" " * (rw + 2) + " ".join(str(j).rjust(w) for j in range(cols)))
    for i, row in enumerate(labels):
        lines.append(f"{str(i).rjust(rw)}: " + " ".join(s.rjust(w) for s in row))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- SVG
_PALETTE = ["#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
            "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f"]


def _color(i: int) -> str:
    if i < len(_PALETTE):
        return _PALETTE[i]
    h = (i * 0.6180339887) % 1.0
    r, g, b = colorsys.hls_to_rgb(h, 0.75, 0.55)
    return "#{:02x}{:02x}{:02x}".format(int(r * 255), int(g * 255), int(b * 255))


def _darken(color: str, f: float = 0.8) -> str:
    r, g, b = (int(color[k:k + 2], 16) for k in (1, 3, 5))
    return "#{:02x}{:02x}{:02x}".format(int(r * f), int(g * f), int(b * f))


def element_bits_of(layout: Any, default: int = 16) -> int:
    """Element width of a memory layout object: its ``element_bitwidth``,
    a cute descriptor's ``elem=``, else ``default`` (cute: 8, one byte)."""
    bits = getattr(layout, "element_bitwidth", None)
    if isinstance(bits, int) and bits > 0:
        return bits
    if getattr(layout, "kind", "") == "cute":
        parsed = getattr(layout, "_parsed", None)
        elem = getattr(parsed, "elem", None)
        if elem:
            if elem in ELEMENT_BITS:
                return ELEMENT_BITS[elem]
        return 8
    return default


#: Characters XML 1.0 does not allow (C0 controls but tab/newline/CR, surrogates, U+FFFE/U+FFFF), and
#: the tab/newline/CR and DEL it allows but that would break a one-line title.
_NOT_XML_TEXT = re.compile("[\x00-\x1f\x7f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """``text`` as SVG character data: markup escaped, and every character XML
    cannot hold (a control character in a spec's file name, an undecodable
    byte) written as its Python escape, so the picture stays well-formed."""
    return html.escape(_NOT_XML_TEXT.sub(lambda m: repr(m.group())[1:-1], text))


def render_svg(L: LinearLayout, title: str = "", element_bits: int = 16,
               grid_max: int = SVG_GRID_MAX) -> str:
    """An SVG picture of the tensor grid (see the module docstring)."""
    grid = _grid_dims(L)
    if grid is None:
        raise ValueError(f"--svg draws 1-D and 2-D layouts only; this one has {len(L.out_dims)} dims")
    rows, cols = grid
    if rows > grid_max or cols > grid_max:
        raise ValueError(f"--svg draws grids up to {grid_max}x{grid_max}; shape {rows}x{cols} is larger "
                         f"(use --shape for a smaller tensor)")
    memory = is_memory_layout(L)
    labels, count, owner = _cell_labels(L, memory)
    # labels without the warp/block prefix: colour carries those
    if not memory:
        labels = [[s.split(":", s.count(":") - 1)[-1] if s != "." else s for s in row] for row in labels]
    font = 10
    char_w = font * 0.62
    cw = max(28, int(max(len(s) for row in labels for s in row) * char_w + 10))
    ch = 20
    left, top = 40, 54
    nb = L.in_dim_size("block") if "block" in L.in_dims else 1
    nw = L.in_dim_size("warp") if "warp" in L.in_dims else 1
    if memory:
        entries = [(f"bytes {16 * g}-{16 * g + 15} (banks {4 * g}-{4 * g + 3})", _color(g)) for g in range(8)]
    else:
        entries = [((f"b{b} " if nb > 1 else "") + f"w{w}", _color(b * nw + w))
                   for b in range(nb) for w in range(nw)][:64]
    grid_w = cols * cw
    legend_rows, x = 1, 0
    for text, _ in entries:
        tw = int(len(text) * char_w) + 22
        if x and x + tw > max(grid_w, 620):
            legend_rows, x = legend_rows + 1, 0
        x += tw
    width = left + max(grid_w, 620) + 10
    height = top + rows * ch + 16 * legend_rows + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="{font}">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    out.append(f'<text x="{left}" y="18" font-size="13" font-weight="bold">{xml_text(title)}</text>')
    if memory:
        sub = (f"cell = offset; colour = bank group (16-byte chunk of 4 banks, {element_bits}-bit elements); "
               "darker = odd 128-byte segment")
    else:
        sub = "cell = t<lane>:r<register>; colour = warp" + (" and block" if nb > 1 else "")
    if (count > 1).any():
        sub += "; * = broadcast (lowest location shown)"
    out.append(f'<text x="{left}" y="34">{xml_text(sub)}</text>')
    # column / row indices
    for j in range(cols):
        out.append(f'<text x="{left + j * cw + cw / 2:.1f}" y="{top - 6}" text-anchor="middle" '
                   f'fill="#666">{j}</text>')
    for i in range(rows):
        out.append(f'<text x="{left - 4}" y="{top + i * ch + ch / 2 + font / 3:.1f}" text-anchor="end" '
                   f'fill="#666">{i}</text>')
    for i in range(rows):
        for j in range(cols):
            x, y = left + j * cw, top + i * ch
            if count[i, j] == 0:
                fill, tip = "#ffffff", "no location"
            elif memory:
                off = int(owner["offset"][i, j])
                byte = off * element_bits // 8
                fill = _color((byte // 16) % 8)
                if (byte // 128) % 2:
                    fill = _darken(fill)
                bank = (byte // 4) % 32
                tip = f"offset {off}, byte {byte}, bank {bank}, 128-byte segment {byte // 128}"
            else:
                w = int(owner["warp"][i, j]) if "warp" in owner else 0
                b = int(owner["block"][i, j]) if "block" in owner else 0
                fill = _color(b * nw + w)
                tip = (f"block {b}, " if nb > 1 else "") + (f"warp {w}, lane {int(owner['lane'][i, j])}, "
                                                            f"register {int(owner['register'][i, j])}")
            if count[i, j] > 1:
                tip += f" (held by {int(count[i, j])} locations)"
            out.append(f'<g><title>({i}, {j}): {xml_text(tip)}</title>'
                       f'<rect x="{x}" y="{y}" width="{cw}" height="{ch}" fill="{fill}" stroke="#444" '
                       f'stroke-width="0.5"/>'
                       f'<text x="{x + cw / 2:.1f}" y="{y + ch / 2 + font / 3:.1f}" text-anchor="middle">'
                       f'{xml_text(labels[i][j])}</text></g>')
    # legend
    ly = top + rows * ch + 10
    x = 0
    for text, col in entries:
        tw = int(len(text) * char_w) + 22
        if x and x + tw > max(grid_w, 620):
            ly, x = ly + 16, 0
        out.append(f'<rect x="{left + x}" y="{ly}" width="12" height="12" fill="{col}" stroke="#444" '
                   f'stroke-width="0.5"/>')
        out.append(f'<text x="{left + x + 16}" y="{ly + 10}">{xml_text(text)}</text>')
        x += tw
    out.append("</svg>")
    return "\n".join(out) + "\n"


def json_text(d: Mapping[str, Any]) -> str:
    """JSON with one line per input dim (valid JSON, easy to read and diff)."""
    import json
    lines = ["{", '  "in_dims": {']
    ins = list(d["in_dims"].items())
    for k, (name, bases) in enumerate(ins):
        lines.append(f"    {json.dumps(name)}: {json.dumps(bases)}" + ("," if k + 1 < len(ins) else ""))
    lines.append("  },")
    lines.append(f'  "out_dims": {json.dumps(d["out_dims"])}')
    extra = [(k, v) for k, v in d.items() if k not in ("in_dims", "out_dims")]
    if extra:
        lines[-1] += ","
        for k, (name, v) in enumerate(extra):
            lines.append(f"  {json.dumps(name)}: {json.dumps(v)}" + ("," if k + 1 < len(extra) else ""))
    lines.append("}")
    return "\n".join(lines) + "\n"
