"""Packed-word composition (``plan.model.pack_term``): every term, evaluated with PTX's ``prmt.b32``
semantics written out here (byte n of the selector's nibble n picks byte n of {b, a}, a the low
word), holds exactly the requested elements; equal sub-terms are shared, so a 4x4 byte transpose
costs 8 permutes (not 12), which ``compose_ops`` counts and the rendered C spells once each."""
from __future__ import annotations

import random
import re

from ll_codegen.emit.cexpr import compose_word
from ll_codegen.plan.model import compose_ops, pack_term


def prmt(a: int, b: int, sel: int) -> int:
    src = (b << 32) | a
    return sum(((src >> (8 * (sel >> (4 * q) & 7))) & 0xFF) << (8 * q) for q in range(4))


def evaluate(term, words: dict) -> int:
    if term[0] == "word":
        return words[term[1]]
    return prmt(evaluate(term[1], words), 0 if term[2] is None else evaluate(term[2], words), term[3])


def test_random_compositions_hold_the_requested_elements():
    rng = random.Random(5)
    for _ in range(3000):
        eb = rng.choice((1, 1, 2))
        per = 4 // eb
        names = [f"w{i}" for i in range(rng.randint(1, 6))]
        words = {n: rng.getrandbits(32) for n in names}
        sources = [None if rng.random() < 0.15 else (rng.choice(names), rng.randrange(per)) for _ in range(per)]
        if all(s is None for s in sources):
            continue
        got = evaluate(pack_term(sources, per), words)
        mask = (1 << (8 * eb)) - 1
        for k, s in enumerate(sources):
            if s is not None:
                assert got >> (8 * eb * k) & mask == words[s[0]] >> (8 * eb * s[1]) & mask, (sources, k)


def test_a_4x4_byte_transpose_costs_8_permutes_rendered_once_each():
    outs = [[(w, k) for w in ("a", "b", "c", "d")] for k in range(4)]
    assert compose_ops(4, *outs) == 8
    assert [compose_ops(4, o) for o in outs] == [3, 3, 3, 3]
    exprs = [compose_word(o, 1) for o in outs]
    perms = set()
    for e in exprs:
        perms |= set(re.findall(r"__byte_perm\([a-z], [a-z], 0x[0-9a-f]+\)", e))
    assert len(perms) == 4                        # the stage-1 interleaves, shared by two words each
    words = {w: random.Random(1).getrandbits(32) ^ i for i, w in enumerate("abcd")}
    for k, o in enumerate(outs):
        assert evaluate(pack_term(o, 4), words) == sum((words[w] >> 8 * k & 0xFF) << 8 * j for j, w in enumerate("abcd"))
