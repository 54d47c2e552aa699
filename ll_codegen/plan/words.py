"""Packed 32-bit words of 8/16-bit elements, as the renderer builds them.

A word whose element k is element ``sources[k] = (word, index)`` of other
words is a ``PackTerm``: the word itself, or ``__byte_perm(a, b, sel)`` of two
terms -- PTX's ``prmt.b32``: byte q of the result is byte ``sel >> 4q & 7`` of
the eight bytes ``a.0 .. a.3, b.0 .. b.3``.  Terms are canonical, so equal
terms are equal C expressions and ``compose_ops`` counts what a thread runs.

A ``LanePerm`` is the lane-dependent twin (``lane_perm``): the word that lanes
with select value c compose from ``alternatives[c]``.  When every alternative
draws on the same two words it is one ``__byte_perm(a, b, sels[c])`` whose
selector is a per-lane constant (computed once per thread), where a select
between permuted words costs a permute per alternative and a select per
choice.  Example (8-bit elements, a lane bit swapped with a register bit, as a
shuffle sends): ``alternatives = ([(x, 0), (y, 0), (x, 2), (y, 2)],
[(x, 1), (y, 1), (x, 3), (y, 3)])`` is ``__byte_perm(x, y, c ? 0x7351 : 0x6240)``.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple, Sequence

#: entries of each memo of the pure functions below: the planner composes the same words for
#: many candidate conversions (a relayout's candidates, the forms of one shuffle plan)
MEMO_SIZE = 1 << 14


def _hashable(key: Any) -> bool:
    try:
        hash(key)
    except TypeError:
        return False
    return True

#: A packed 32-bit word as the renderer builds it: ``("word", w)`` is word ``w`` as it is,
#: ``("perm", a, b, sel)`` is ``__byte_perm(a, b, sel)`` of two such terms (``b`` None: ``0u``).
#: Terms are hashable and canonical, so equal terms render as equal C expressions, which the
#: compiler computes once: counting distinct ``perm`` nodes counts the permutes a thread runs.
PackTerm = tuple


def _bytes_of(term: "PackTerm | LanePerm | None", c: int = 0) -> list[tuple[Any, int] | None]:
    """(word, byte) held by each byte of ``term`` (in the lanes whose select value is ``c``)."""
    if term is None:
        return [None] * 4
    if isinstance(term, LanePerm):
        a, b, sel = _bytes_of(term.a, c), _bytes_of(term.b, c), term.sels[c]
    elif term[0] == "word":
        return [(term[1], q) for q in range(4)]
    else:
        a, b, sel = _bytes_of(term[1]), _bytes_of(term[2]), term[3]
    return [(a + b)[sel >> (4 * q) & 7] for q in range(4)]


def _perm(a: PackTerm, b: PackTerm | None, want: Sequence[tuple[Any, int] | None], c: int = 0) -> PackTerm:
    """``__byte_perm(a, b, sel)`` whose byte q is ``want[q]`` (None: byte q of a, don't care),
    with a and b as they are in the lanes whose select value is ``c``."""
    have = _bytes_of(a, c) + _bytes_of(b, c)
    sel = 0
    for q, x in enumerate(want):
        sel |= (q if x is None else have.index(x)) << (4 * q)
    return ("perm", a, b, sel)


def _half(items: Sequence[tuple[Any, int]]) -> PackTerm:
    """A term holding the bytes ``items`` (from at most two words) for the join of ``pack_term``.
    Bytes i of words X and Y in the same byte pair {2g, 2g + 1}: the interleave
    ``[X.2g, Y.2g, X.2g+1, Y.2g+1]`` (X < Y), which also serves the word that needs byte 2g+1 of
    both -- a 4x4 byte transpose then costs 8 permutes, not 12."""
    words = sorted({w for w, _ in items}, key=str)
    if len(words) == 1:
        return ("word", words[0])
    groups = {q >> 1 for _, q in items}
    if len(groups) == 1:
        g = 2 * groups.pop()
        return _perm(("word", words[0]), ("word", words[1]),
                     [(words[0], g), (words[1], g), (words[0], g + 1), (words[1], g + 1)])
    return _perm(("word", words[0]), ("word", words[1]), list(items) + [None] * (4 - len(items)))


def pack_term(sources: Sequence[tuple[Any, int] | None], per: int) -> PackTerm:
    """``_pack_term``, memoised on the sources (when hashable): a pure function of their values."""
    key = tuple(sources)
    return _pack_term_memo(key, per) if _hashable(key) else _pack_term(key, per)


def _pack_term(sources: Sequence[tuple[Any, int] | None], per: int) -> PackTerm:
    """The term of a 32-bit word whose element k is element ``sources[k] = (word, index)`` of
    another word (None, or k past the list: don't care; ``per`` elements a word): the word itself when
    nothing moves, one permute for up to two words, else (8-bit elements from three or four
    words) one term per half (``_half``) and one permute joining them."""
    eb = 4 // per
    sources = list(sources) + [None] * (per - len(sources))
    used = [x for x in sources if x is not None]
    if not used:                                    # no element wanted: nothing to build
        return ("word", None)
    if all(x is None or x == (used[0][0], k) for k, x in enumerate(sources)):
        return ("word", used[0][0])
    want = [None if x is None else (x[0], x[1] * eb + b) for x in sources for b in range(eb)]
    words = list(dict.fromkeys(w for w, _ in used))
    if len(words) <= 2:
        return _perm(("word", words[0]), ("word", words[1]) if len(words) > 1 else None, want)
    lo, hi = (_half([x for x in want[h:h + 2] if x is not None]) for h in (0, 2))
    return _perm(lo, hi, want)


_pack_term_memo = lru_cache(maxsize=MEMO_SIZE)(_pack_term)


def perm_nodes(term: "PackTerm | LanePerm | None") -> set:
    """The distinct permutes of a term (lane-dependent ones included)."""
    return set(_nodes(term)) if _is_perm(term) else set()


def _is_perm(term: "PackTerm | LanePerm | None") -> bool:
    return term is not None and (isinstance(term, LanePerm) or term[0] != "word")


@lru_cache(maxsize=MEMO_SIZE)
def _nodes(term: "PackTerm | LanePerm") -> frozenset:
    """``perm_nodes`` of a permute, memoised (a permute is hashable: sets of them are counted)."""
    a, b = (term.a, term.b) if isinstance(term, LanePerm) else (term[1], term[2])
    return frozenset((term,)).union(*(_nodes(t) for t in (a, b) if _is_perm(t)))


def compose_ops(per: int, *words: Sequence[tuple[Any, int] | None]) -> int:
    """``__byte_perm`` instructions that build the words (each as ``pack_term``'s sources),
    each distinct permute once (the compiler merges equal expressions).  Memoised on the words
    (when hashable): a pure function of their values."""
    key = tuple(tuple(w) for w in words)
    return _compose_ops_memo(per, key) if _hashable(key) else _compose_ops(per, key)


def _compose_ops(per: int, words: tuple) -> int:
    return perm_count([pack_term(w, per) for w in words])


_compose_ops_memo = lru_cache(maxsize=MEMO_SIZE)(_compose_ops)


class LanePerm(NamedTuple):
    """``__byte_perm(a, b, sels[c])`` in the lanes whose select value is c: ``a`` and ``b`` are
    terms (``PackTerm`` or ``LanePerm``; ``b`` None: ``0u``)."""
    a: Any
    b: Any
    sels: tuple[int, ...]


def _lane(a: Any, b: Any, wants: Sequence[Sequence[tuple[Any, int] | None]]) -> "PackTerm | LanePerm":
    """The permute of ``a`` and ``b`` whose bytes are ``wants[c]`` in the lanes whose select value is c."""
    sels = tuple(_perm(a, b, want, c)[3] for c, want in enumerate(wants))
    if not any(isinstance(t, LanePerm) for t in (a, b)) and len(set(sels)) == 1:
        return ("perm", a, b, sels[0])
    return LanePerm(a, b, sels)


def _lane_half(words: Sequence[Any], wants: Sequence[Sequence[tuple[Any, int] | None]]) -> "PackTerm | LanePerm":
    """A term holding the bytes that ``wants[c]`` takes from ``words`` (one or two), for every c:
    ``_half`` of all of them when they fit in one word (the same in every lane), else ``_half`` of
    each lane's, as one lane-dependent permute of the two words."""
    items = [[x for x in want if x is not None and x[0] in words] for want in wants]
    union = list(dict.fromkeys(x for its in items for x in its))
    if len(union) <= 4:
        return _half(union)
    terms = [_half(its) if its else None for its in items]
    return _lane(("word", words[0]), ("word", words[1]), [_bytes_of(t) for t in terms])


def lane_perm(alternatives: Sequence[Sequence[tuple[Any, int] | None]], per: int) -> "PackTerm | LanePerm | None":
    """``_lane_perm``, memoised on the alternatives (when hashable): a pure function of their values."""
    key = tuple(tuple(a) for a in alternatives)
    return _lane_perm_memo(key, per) if _hashable(key) else _lane_perm(key, per)


def _lane_perm(alternatives: Sequence[Sequence[tuple[Any, int] | None]], per: int) -> "PackTerm | LanePerm | None":
    """The word whose element k is ``alternatives[c][k]`` (as ``pack_term``'s sources) in the lanes
    whose select value is c: ``pack_term`` when every lane composes the same; else one
    lane-dependent permute of the words the alternatives draw on when they are at most two, or
    of two halves when they are three or four -- each half a term of two of the words
    (``_lane_half``: lane-independent when all lanes' bytes from them fit in one word, as in a
    byte transpose), so a lane-dependent 4x4 byte transpose costs what a plain one does; None
    for more words (which lane reads which register is then a select)."""
    alts = [list(a) + [None] * (per - len(a)) for a in alternatives]
    if all(a == alts[0] for a in alts):
        return pack_term(alts[0], per)
    eb = 4 // per
    wants = [[None if x is None else (x[0], x[1] * eb + q) for x in alt for q in range(eb)] for alt in alts]
    words = list(dict.fromkeys(x[0] for want in wants for x in want if x is not None))    # renaming-invariant
    if len(words) <= 2:
        return _lane(("word", words[0]), ("word", words[1]) if len(words) > 1 else None, wants)
    if len(words) > 4:
        return None
    return _lane(_lane_half(words[:2], wants), _lane_half(words[2:], wants), wants)


_lane_perm_memo = lru_cache(maxsize=MEMO_SIZE)(_lane_perm)


def lane_perms(words: Sequence[Sequence[Sequence[tuple[Any, int] | None]]], per: int
               ) -> "list[PackTerm | LanePerm] | None":
    """``lane_perm`` of every word (each given as its alternatives); None if one has none.
    Memoised on the words (when hashable): a pure function of their values."""
    key = tuple(tuple(tuple(a) for a in alts) for alts in words)
    terms = _lane_perms_memo(key, per) if _hashable(key) else _lane_perms(key, per)
    return None if terms is None else list(terms)


def _lane_perms(words: tuple, per: int) -> "tuple[PackTerm | LanePerm, ...] | None":
    terms = tuple(lane_perm(alts, per) for alts in words)
    return None if any(t is None for t in terms) else terms


_lane_perms_memo = lru_cache(maxsize=MEMO_SIZE)(_lane_perms)


def perm_count(terms: Sequence["PackTerm | LanePerm"]) -> int:
    """``__byte_perm`` instructions that build ``terms``, each distinct permute once."""
    nodes: set = set()
    for t in terms:
        if _is_perm(t):
            nodes |= _nodes(t)
    return len(nodes)
