"""Hard limits on user input, checked before any real work.

Specs, CLI options and corpus files come from users (and fuzzers): a number
that no real tile has must be refused with one clear line long before it
turns into a gigabyte table or a minute of planning.  Every limit is far
above what a GPU tile can be, so nothing legitimate is refused (the largest
spec in ``examples/`` and ``ll_codegen/testing/corpus.py`` is a 128x256 tile of
32768 elements, at most 128 registers per thread, 8 warps):

* files: ``MAX_SPEC_BYTES`` per spec or corpus file, which must be a regular
  file (a FIFO or ``/dev/zero`` would block or never end);
* YAML: ``MAX_YAML_DEPTH`` nesting levels and ``MAX_YAML_NODES`` values; no
  anchors or aliases (``&a`` / ``*a``: a few hundred bytes of aliases expand
  to gigabytes, the "billion laughs");
* layouts: ``MAX_RANK`` dims, ``MAX_TILE_ELEMENTS`` elements per tensor
  (``--shape``/``shape``), ``MAX_REGISTERS`` registers (elements) per
  thread, ``MAX_THREADS_PER_CTA`` threads per CTA (so 32 warps of 32 lanes,
  16 wavefronts of 64), ``MAX_CTAS_PER_CGA`` CTAs per cluster,
  ``MAX_BASES`` bases per input dim of an explicit layout, ``MAX_INT`` for
  any integer of a spec, ``MAX_DESCRIPTOR_CHARS`` for a CuTe descriptor;
* options: ``--smem-budget`` up to ``MAX_SMEM_BUDGET``, ``--iters``,
  ``--ctas``, ``--runs``, ``--seed``, ``--stride`` as below; ``verify``:
  ``MAX_DTYPES`` element types per list, ``MAX_VERIFY_WORK`` tile elements
  over all rows (each row counted as at least ``MIN_ROW_WORK``);
* messages: a user value echoed into an error is cut to ``MAX_ECHO`` chars.
"""
from __future__ import annotations

from typing import Any

#: Largest spec (or corpus) file, bytes.  Real specs are under 1 KiB.
MAX_SPEC_BYTES = 1 << 20
#: Deepest YAML nesting (a slice of a dot operand of an mma with cga_layout
#: bases is 5 levels).
MAX_YAML_DEPTH = 64
#: Most YAML values (scalars, lists, mappings) in one file; a spec has < 200,
#: the repository's verify corpus < 1000.
MAX_YAML_NODES = 20_000
#: Most tensor dims (Triton layouts go up to rank 5).
MAX_RANK = 8
#: Most elements of one tensor tile (a 1024x1024 tile; real tiles are <= 2^16).
MAX_TILE_ELEMENTS = 1 << 20
#: Most registers (elements) per thread of a distributed layout; the
#: hardware has 255 (CUDA) or 512 (AMD) 32-bit registers per thread.
MAX_REGISTERS = 1 << 12
#: Most threads per CTA (CUDA and HIP): 32 warps of 32, 16 wavefronts of 64.
MAX_THREADS_PER_CTA = 1024
#: Most CTAs per cluster (CGA); Hopper allows 16 with a non-portable size.
MAX_CTAS_PER_CGA = 16
#: Most bases per input dim of an explicit (linear / shared_linear) layout.
MAX_BASES = 32
#: Largest integer anywhere in a spec (sizes, bases, strides, widths).
MAX_INT = MAX_TILE_ELEMENTS
#: Longest CuTe descriptor string.
MAX_DESCRIPTOR_CHARS = 4096
#: Largest shared-memory budget (bytes); a GPU has at most 228 KiB per CTA.
MAX_SMEM_BUDGET = 1 << 30
#: Most round trips (bench --iters), CTAs per launch (--ctas), random runs
#: (verify --runs); seeds are 32-bit.
MAX_ITERS = 1 << 20
MAX_CTAS = 1 << 20
MAX_RUNS = 1000
MAX_SEED = (1 << 32) - 1
#: Most element types one ``verify --dtype`` list or corpus entry may name (there are 12; a list is
#: de-duplicated after this check).
MAX_DTYPES = 64
#: The work one ``llgen verify`` run may take on, counted before anything is planned: the sum over its
#: rows (conversion x dtype) of each row's tile elements, a row counting as at least ``MIN_ROW_WORK``
#: (a harness compiled and launched costs that much whatever its tile).  Planning, compiling and
#: checking a row grow with its tile (a 1024 x 1024 row plans in ~1.5 s, a 64 x 64 row in ~10 ms), so
#: the bound is on elements, not rows: 64 rows of the largest tile (``MAX_TILE_ELEMENTS``), or 16,384
#: rows of 64 x 64 tiles or smaller.
MAX_VERIFY_WORK = 1 << 26
MIN_ROW_WORK = 1 << 12
#: Largest TTGIR/TTIR dump read for its layouts (a big kernel's dump with locations is a few MiB),
#: most distinct layout attributes in it, most distinct shapes kept per attribute.
MAX_TTGIR_BYTES = 8 << 20
MAX_TTGIR_LAYOUTS = 1024
MAX_TTGIR_SHAPES = 64
#: Most (attribute, shape) layouts ``llgen show FILE.ttgir`` lays out (real dumps: under a hundred).
MAX_TTGIR_LISTED = 512
#: Largest global stride (elements) of --stride.
MAX_STRIDE = 1 << 31
#: Most characters of a user value echoed into an error message.
MAX_ECHO = 60


def short(value: Any, limit: int = MAX_ECHO) -> str:
    """``repr(value)`` cut to ``limit`` characters (``...`` marks the cut),
    so an error line never carries a whole hostile value.  Large containers
    are not repr-ed whole (that alone could take seconds)."""
    if isinstance(value, (list, tuple, dict)) and len(value) > limit:
        kind = "mapping" if isinstance(value, dict) else "list"
        return f"a {kind} of {len(value)} items"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4 * limit:
        return f"an integer of {value.bit_length()} bits"
    try:
        r = repr(value)
    except Exception:  # noqa: BLE001 - a value that cannot be printed still gets a message
        r = f"<{type(value).__name__}>"
    return r if len(r) <= limit else r[:limit - 3] + "..."


def field_name(key: Any) -> str:
    """A field *name* (a YAML key) as an error line shows it: as it is when it
    is a short printable string, else quoted like a value (``short``), so that
    a key holding a newline, a carriage return or a number stays readable on
    the one line."""
    if isinstance(key, str) and key and len(key) <= MAX_ECHO and key.isprintable():
        return key
    return short(key)


def printable(text: str) -> str:
    """``text`` with every character that is not printable (newline, carriage
    return, other control and line-separator characters) written as its
    escape: the last guard that keeps an error message on one line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def dtype_list(items: Any, what: str) -> list[str]:
    """An element-type list, refused when longer than ``MAX_DTYPES`` and then
    de-duplicated in order (``f16,f16,f32`` is two rows, not three): a
    thousand-item list is one error line at once, not a thousand plans."""
    if len(items) > MAX_DTYPES:
        raise ValueError(f"{what}: {len(items)} element types; at most {MAX_DTYPES}")
    return list(dict.fromkeys(items))


#: Longest error line (without ``llgen: error:``); longer ones lose their middle.
MAX_ERROR_LINE = 600


def cut(text: str, limit: int = MAX_ERROR_LINE) -> str:
    """``text`` cut to ``limit`` characters by dropping its middle (an error
    line's start says where, its end often says why): the last guard of an
    error line, e.g. for a 2000-character path or option value."""
    if len(text) <= limit:
        return text
    head = (limit - 5) * 2 // 3
    return text[:head] + " ... " + text[len(text) - (limit - 5 - head):]


def layout_problem(layout: Any) -> "tuple[str, str] | None":
    """``(input dim, message)`` when a built ``LinearLayout`` exceeds the
    per-thread, per-CTA or per-cluster limits, else None.  Cheap: it reads
    the bases' counts, never the layout's tables."""
    ins = layout.in_dims
    size = {d: layout.in_dim_size(d) for d in ("register", "lane", "warp", "block") if d in ins}
    if size.get("register", 1) > MAX_REGISTERS:
        return "register", f"{size['register']} registers per thread; at most {MAX_REGISTERS}"
    threads = size.get("lane", 1) * size.get("warp", 1)
    if threads > MAX_THREADS_PER_CTA:
        return "warp", f"{threads} threads per CTA; at most {MAX_THREADS_PER_CTA}"
    if size.get("block", 1) > MAX_CTAS_PER_CGA:
        return "block", f"{size['block']} CTAs per cluster; at most {MAX_CTAS_PER_CGA}"
    return None
