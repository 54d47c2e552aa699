"""Straight-line runs of a kernel's instructions executed as one Python function each.

``execute.compile_instr`` turns every instruction into a ``Snippet``: Python statements that run it
on one thread (the common integer, move, conversion, predicate and global forms written out
inline; every other instruction a call of its closure).  ``Block`` joins the snippets from an
entry point to the first instruction that may leave the straight line (a branch, exit, trap,
barrier or warp collective) into one function, compiled once per distinct source text: a thread
then pays one call per run of instructions instead of one per instruction, and reads and writes
its registers straight from the dict.  The semantics are the snippets' alone; a block only
sequences them and keeps the thread's ``pc`` exact wherever control leaves it (at its end, at a
terminator, and at an unwritten register -- ``KeyError`` -- for ``sim``'s report of the line).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from types import CodeType, FunctionType
from typing import Callable, Sequence


@dataclass(frozen=True)
class Snippet:
    """One instruction as Python source over the thread ``th`` and its registers ``r``: ``code``
    (statements, one per line), ``guard`` (the source of its guard's truth value, or None),
    ``ends`` (control may leave the straight line here: the code sets or leaves the thread's pc and
    state itself, with ``th.pc`` at this instruction).  Its other names are the machine's bound
    values (``Compiler.bind``)."""
    code: str
    guard: str | None = None
    ends: bool = False


def source(snippets: Sequence[Snippet], start: int) -> tuple[str, int]:
    """(source of the function ``block(th)`` running the block entered at ``start``, number of
    instructions)."""
    body, n = [], 0
    for pc in range(start, len(snippets)):
        s = snippets[pc]
        n += 1
        lines = s.code.split("\n")
        if s.ends:
            lines = [f"th.pc = {pc}"] + lines
        body.append(f"i = {pc}")            # the instruction running, for an unwritten register's report
        if s.guard is not None:
            body.append(f"if {s.guard}:")
            body += ["    " + x for x in lines]
            if s.ends:                      # not taken: on to the next instruction
                body += ["else:", f"    th.pc = {pc + 1}"]
        else:
            body += lines
        if s.ends:
            break
    else:
        body.append(f"th.pc = {start + n}")
    head = ["def block(th):", "    r = th.r", "    try:"]
    tail = ["    except KeyError:", "        th.pc = i", "        raise"]
    return "\n".join(head + ["        " + x for x in body] + tail), n


@functools.lru_cache(maxsize=4096)
def _code(text: str) -> CodeType:
    """The code of a block's source, compiled once per text (the same kernel run again, by another
    machine, compiles nothing)."""
    scope: dict = {}
    exec(compile(text, "<ptx block>", "exec"), scope)
    return scope["block"].__code__


def block(snippets: Sequence[Snippet], start: int, scope: dict) -> tuple[Callable, int]:
    """(the function running the block entered at ``start``, its number of instructions); ``scope``:
    its globals, the machine's bound values (``Compiler.env``)."""
    text, n = source(snippets, start)
    return FunctionType(_code(text), scope), n
