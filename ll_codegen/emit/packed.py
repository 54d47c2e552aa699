"""The namespace of a packed 4-bit plan that repacks nibbles in registers (``Packing.src_swap`` /
``dst_swap``, ``plan/packed.py``).

The byte plan (the quotient layouts of the swapped side) is rendered as it is, as the nested
namespace ``bytes``.  The public namespace around it keeps the byte plan's constants, states
the caller's own byte layouts (``src_index``/``dst_index``: each side's 4-bit layout modulo
its own pair vector) and forwards every public function of ``bytes``: a source repack runs
before the call on a copy of ``src``, a destination repack after it into ``dst``.

The repack exchanges register bits 0 and ``j`` of a thread's nibbles.  With byte ``b``
(bit ``j - 1`` clear) and its partner ``c = b | 2^(j-1)``::

    out[b] = lo(in[b]) | lo(in[c]) << 4        out[c] = hi(in[b]) | hi(in[c]) << 4

(nibble ``2b + 1``, register bits 0 and ``j`` exchanged, is nibble ``2c``: the low nibble of
``c``).  The exchange is its own inverse; it is plain shifts and masks over bytes, which the
compilers fuse into 32-bit ``lop3``/``prmt`` sequences -- no instruction of its own.
"""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Callable

from ll_codegen.core.layout import layout_of
from ll_codegen.emit.body import INDEX_COMMENT, Fn, Namespace, new_namespace
from ll_codegen.emit.cexpr import index_function
from ll_codegen.plan.packed import side_bytes
from ll_codegen.plan.plans import Transfer

#: the nested namespace holding the byte plan
INNER = "bytes"


def repack_lines(n: int, j: int) -> list[str]:
    """Body of ``repack(in, out)`` over ``n`` bytes: register bits 0 and ``j`` of the nibbles exchanged."""
    if j < 1 or n < 2 ** j:
        raise ValueError(f"cannot exchange register bits 0 and {j} over {n} bytes")
    step = 1 << (j - 1)
    lines = [f"uint8_t a[{n}], b[{n}];", "memcpy(a, in, sizeof a);"]
    for lo in range(n):
        if lo & step:
            continue
        hi = lo | step
        lines += [f"b[{lo}] = static_cast<uint8_t>((a[{lo}] & 0x0Fu) | (a[{hi}] << 4));",
                  f"b[{hi}] = static_cast<uint8_t>((a[{lo}] >> 4) | (a[{hi}] & 0xF0u));"]
    return lines + ["memcpy(out, b, sizeof b);"]


def param_names(params: str) -> list[str]:
    """The names of a C parameter list (``const T (&src)[kRegs], T* tile, unsigned tid = threadIdx.x``)."""
    out = []
    for p in params.split(","):
        p = p.split("=")[0].strip()
        m = re.search(r"\(&\s*(\w+)\)", p) or re.search(r"(\w+)\s*$", p)
        out.append(m.group(1))
    return out


def forwarder(f: Fn, n: int, src_swap: int, dst_swap: int) -> Fn:
    """``f`` of the byte plan called from the public namespace: the source repacked before, the
    destination after."""
    names = param_names(f.params)
    args = ["r_src" if a == "src" and src_swap else "r_dst" if a == "dst" and dst_swap else a for a in names]
    call = f"{INNER}::{f.name}({', '.join(args)});"
    lines = []
    if src_swap and "src" in names:
        lines += [f"T r_src[{n}];", "repack_src(src, r_src);"]
    if dst_swap and "dst" in names:
        lines += [f"T r_dst[{n}];", call, "repack_dst(r_dst, dst);"]
    else:
        lines.append(call)
    how = ("the source nibbles are repacked first" if src_swap else "the destination nibbles are repacked last")
    doc = list(f.doc) + [f"// (here {how}, in each thread: repack_{'src' if src_swap else 'dst'}; the byte plan is "
                         f"{INNER}::{f.name})"]
    return Fn(f.name, f.params, doc=doc, moves=lines)


def repacked_namespace(plan: Transfer, name: str, namespace: Callable[[Transfer, str], Namespace]) -> Namespace:
    """The public namespace of a packed plan that repacks: the byte plan (``namespace`` of it, the
    operation's own) nested as ``bytes``, forwarders, the repack functions and the caller's index
    functions (module comment)."""
    k = plan.packing
    inner = namespace(replace(plan, packing=replace(k, src_swap=0, dst_swap=0)), INNER)
    conv = new_namespace(plan, name)
    conv.constants = list(inner.constants)
    conv.nested = [inner]
    public = {"src_index": layout_of(plan.src_bases), "dst_index": layout_of(plan.dst_bases)}
    if k.src_swap:
        public["src_index"] = side_bytes(k, "src")
    if k.dst_swap:
        public["dst_index"] = side_bytes(k, "dst")
    conv.index_functions = list(INDEX_COMMENT)
    for line in inner.index_functions:
        m = re.search(r"constexpr int (\w+)\(", line)
        if m is None or line in INDEX_COMMENT:
            continue
        conv.index_functions.append(index_function(m.group(1), public[m.group(1)]) if m.group(1) in public else line)
    fns = []
    for side, j, n in (("src", k.src_swap, plan.n_src), ("dst", k.dst_swap, plan.n_dst)):
        if j:
            what = "before the byte plan" if side == "src" else "after the byte plan"
            fns.append(Fn(f"repack_{side}", f"const T (&in)[{n}], T (&out)[{n}]",
                          doc=[f"// repack_{side}(): in-thread nibble repack {what}: element registers 2b+e and "
                               f"their register bits 0 and {j}",
                               f"// exchanged (out[b] = lo(in[b]) | lo(in[b + {1 << (j - 1)}]) << 4, and the high "
                               f"nibbles alike, for b with bit {j - 1} clear)."],
                          moves=repack_lines(n, j)))
    conv.functions = fns + [forwarder(f, plan.n_src if k.src_swap else plan.n_dst, k.src_swap, k.dst_swap)
                            for f in inner.functions]
    return conv
