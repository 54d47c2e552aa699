"""The index header of a chain: each relabelled index's bit map and its inverse as C functions.

A chain (``ll_codegen/chain``) may relabel a free index ``I`` by an invertible map ``pi``
of its bits over F2; every generated step of the chain already applies it.  An author who
needs the true index at a relabelled position (a causal mask, a bias, a TMA coordinate)
calls ``<I>(k) = pi(k)`` and ``<I>_inverse(k) = pi^-1(k)``, both ``constexpr`` and usable on
host and device.
"""
from __future__ import annotations

from collections.abc import Sequence

from ll_codegen.core import f2
from ll_codegen.emit.cexpr import linear_expr
from ll_codegen.emit.env import environment


def inverse(pi: Sequence[int]) -> list[int]:
    """The bit images of ``pi^-1`` (``pi`` invertible over F2): column ``j`` solves ``pi(x) = 2**j``."""
    out = []
    for j in range(len(pi)):
        x = f2.solve(list(pi), 1 << j)
        if x is None:
            raise ValueError(f"the bit map {list(pi)} is not invertible")
        out.append(x)
    return out


def index_header(maps: Sequence[tuple[str, Sequence[int]]], command: str, target: str = "cuda") -> str:
    """Source text of the index header: for each (index name, ``pi``) the functions ``name(k)``
    and ``name_inverse(k)`` for ``0 <= k < 2**len(pi)``."""
    functions = []
    for name, pi in maps:
        if not name.isidentifier():
            raise ValueError(f"index name {name!r} is not a C identifier")
        bits = len(pi)
        functions.append(dict(name=name, size=1 << bits, images=", ".join(str(v) for v in pi),
                              forward=linear_expr(list(pi), "k", bits),
                              backward=linear_expr(inverse(pi), "k", bits)))
    return environment().get_template("index_map.cuh.j2").render(command=command, functions=functions,
                                                                 cuda=target == "cuda")
