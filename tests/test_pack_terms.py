"""Packed-word composition (``plan.words.pack_term``): every term, evaluated with PTX's ``prmt.b32``
semantics written out here (byte n of the selector's nibble n picks byte n of {b, a}, a the low
word), holds exactly the requested elements; equal sub-terms are shared, so a 4x4 byte transpose
costs 8 permutes (not 12), which ``compose_ops`` counts and the rendered C spells once each.
Lane-dependent words (``lane_perm``): evaluated at every select value c, each holds that lane's
elements; a byte transpose whose words the lanes rotate costs what a plain one does."""
from __future__ import annotations

import random
import re

from ll_codegen.emit.cexpr import compose_word
from ll_codegen.plan.words import LanePerm, compose_ops, perm_count, lane_perm, pack_term


def prmt(a: int, b: int, sel: int) -> int:
    src = (b << 32) | a
    return sum(((src >> (8 * (sel >> (4 * q) & 7))) & 0xFF) << (8 * q) for q in range(4))


def evaluate(term, words: dict, c: int = 0) -> int:
    """The term's value in the lanes whose select value is ``c``."""
    if isinstance(term, LanePerm):
        return prmt(evaluate(term.a, words, c), 0 if term.b is None else evaluate(term.b, words, c), term.sels[c])
    if term[0] == "word":
        return words[term[1]]
    return prmt(evaluate(term[1], words, c), 0 if term[2] is None else evaluate(term[2], words, c), term[3])


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


def test_lane_dependent_words_hold_each_lanes_elements():
    rng = random.Random(11)
    fused = none = 0
    for _ in range(3000):
        eb = rng.choice((1, 1, 2))
        per = 4 // eb
        names = [f"w{i}" for i in range(rng.randint(1, 6))]
        words = {n: rng.getrandbits(32) for n in names}
        alts = [[None if rng.random() < 0.1 else (rng.choice(names), rng.randrange(per)) for _ in range(per)]
                for _ in range(rng.choice((2, 4, 8)))]
        term = lane_perm(alts, per)
        used = {x[0] for a in alts for x in a if x is not None}
        if term is None:
            assert len(used) > 4
            none += 1
            continue
        fused += 1
        mask = (1 << (8 * eb)) - 1
        for c, alt in enumerate(alts):
            got = evaluate(term, words, c)
            for k, x in enumerate(alt):
                if x is not None:
                    assert got >> (8 * eb * k) & mask == words[x[0]] >> (8 * eb * x[1]) & mask, (alts, c, k)
    assert fused > 1000 and none > 100, (fused, none)


def test_a_lane_rotated_4x4_byte_transpose_costs_8_permutes():
    """Word j of lane c takes byte j ^ c of each of four words (a 2-bit lane swap fused into the
    transpose, as a staged plan's shuffles send): 8 permutes for the 4 words, as without lanes,
    where selects would add 4 a word and swap stage.  Byte q of a 2-way lane-dependent pair of
    two words: one permute each."""
    outs = [[[(w, j ^ c) for w in "abcd"] for c in range(4)] for j in range(4)]
    terms = [lane_perm(o, 4) for o in outs]
    assert perm_count(terms) == 8
    words = {w: random.Random(2).getrandbits(32) ^ (i << 8) for i, w in enumerate("abcd")}
    for j, t in enumerate(terms):
        for c in range(4):
            assert evaluate(t, words, c) == sum((words[w] >> 8 * (j ^ c) & 0xFF) << 8 * q for q, w in enumerate("abcd"))
    pair = lane_perm([[("x", 0), ("y", 0), ("x", 2), ("y", 2)], [("x", 1), ("y", 1), ("x", 3), ("y", 3)]], 4)
    assert pair == LanePerm(("word", "x"), ("word", "y"), (0x6240, 0x7351))
    assert lane_perm([[("x", 0)] * 4, [("x", 0)] * 4], 4) == pack_term([("x", 0)] * 4, 4)     # lane-independent
