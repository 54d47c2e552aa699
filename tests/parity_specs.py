"""Seeded random layout specs for the Triton parity checks.

``random_spec(rng, kind)`` draws one spec dict (our YAML form) of a legacy
kind: ranks 1-3 where the kind allows them, shapes smaller and larger than the
layout's tile, every CTA-tiling form (none, ``cga_layout`` with split and
duplicating bases, the old ``ctas_per_cga``/``cta_split_num``/``cta_order``
triple), every parent kind of ``slice`` and ``dot_operand``, warp 32 and 64.
Most draws are valid; a few are deliberately at the edges (tiny shapes, odd
warp counts) so that accept/reject decisions are exercised too.
"""
from __future__ import annotations

import random

from triton_oracle import rank_of

KINDS = ("blocked", "slice", "nvidia_mma", "dot_operand", "amd_mfma", "amd_wmma",
         "swizzled_shared", "nvmma_shared")


def _pow2(rng: random.Random, lo: int, hi: int) -> int:
    return 1 << rng.randint(lo, hi)


def _split(rng: random.Random, total_log: int, rank: int) -> list[int]:
    """``2**total_log`` as a product of ``rank`` powers of two."""
    parts = [0] * rank
    for _ in range(total_log):
        parts[rng.randrange(rank)] += 1
    return [1 << p for p in parts]


def _cta_tiling(rng: random.Random, rank: int) -> dict:
    form = rng.choice(["none", "none", "cga", "triple"])
    if form == "none":
        return {}
    if form == "cga":
        used = [0] * rank
        bases = []
        for _ in range(rng.randint(1, 3)):
            if rng.random() < 0.25:
                bases.append([0] * rank)
            else:
                d = rng.randrange(rank)
                b = [0] * rank
                b[d] = 1 << used[d]
                used[d] += 1
                bases.append(b)
        return {"cga_layout": bases}
    ctas = _split(rng, rng.randint(1, 3), rank)
    split = [_pow2(rng, 0, c.bit_length() - 1) for c in ctas]
    order = list(range(rank))
    rng.shuffle(order)
    return {"ctas_per_cga": ctas, "cta_split_num": split, "cta_order": order}


def _shape(rng: random.Random, rank: int, max_log: int = 8, total_log: int = 15, low: int = 0) -> list[int]:
    while True:
        s = [_pow2(rng, low, max_log) for _ in range(rank)]
        if sum(x.bit_length() - 1 for x in s) <= total_log:
            return s


def _blocked(rng: random.Random, rank: int, warp: int | None = None) -> dict:
    warp = warp or rng.choice([32, 64])
    return {"kind": "blocked", "size_per_thread": [_pow2(rng, 0, 3) for _ in range(rank)],
            "threads_per_warp": _split(rng, warp.bit_length() - 1, rank),
            "warps_per_cta": _split(rng, rng.randint(0, 3), rank),
            "order": rng.sample(range(rank), rank), **_cta_tiling(rng, rank)}


def _mma(rng: random.Random, rank: int | None = None, version: int | None = None) -> dict:
    version = version or rng.choice([2, 3])
    if version == 3:
        m_warps = rng.choice([4, 4, 4, 8, 1, 2])
        return {"kind": "nvidia_mma", "version": [3, 0], "warps_per_cta": [m_warps, _pow2(rng, 0, 1)],
                "instr_shape": [16, _pow2(rng, 3, 8), 16], **_cta_tiling(rng, 2)}
    rank = rank or rng.choice([2, 2, 3])
    return {"kind": "nvidia_mma", "version": [2, 0], "warps_per_cta": _split(rng, rng.randint(0, 3), rank),
            "instr_shape": [1] * (rank - 2) + [16, 8], **_cta_tiling(rng, rank)}


def _mfma(rng: random.Random, rank: int | None = None) -> dict:
    rank = rank or rng.choice([2, 2, 3])
    mn = rng.choice([(32, 32), (16, 16), (64, 4), (4, 64)])
    k = {(32, 32): 8, (16, 16): 16, (64, 4): 4, (4, 64): 4}[mn]
    spec = {"kind": "amd_mfma", "version": rng.choice([2, 3, 4]), "instr_shape": [*mn, k],
            "transposed": mn == (64, 4) or rng.random() < 0.5,
            "warps_per_cta": _split(rng, rng.randint(0, 3), rank), **_cta_tiling(rng, rank)}
    if rng.random() < 0.3:
        spec["element_bitwidth"] = rng.choice([32, 64])
    if rng.random() < 0.3:
        spec["tiles_per_warp"] = [_pow2(rng, 0, 1) for _ in range(rank)]
    return spec


def _wmma(rng: random.Random, rank: int | None = None) -> dict:
    rank = rank or rng.choice([2, 2, 3])
    version = rng.choice([1, 2, 2, 3])
    spec = {"kind": "amd_wmma", "version": version, "transposed": rng.random() < 0.5,
            "warps_per_cta": _split(rng, rng.randint(0, 3), rank), **_cta_tiling(rng, rank)}
    if version == 3:
        spec["instr_shape"] = [16, 16, rng.choice([32, 64, 128, 16])]
    return spec


def _parent(rng: random.Random, rank: int) -> dict:
    kind = rng.choice(["blocked", "nvidia_mma", "amd_mfma", "amd_wmma"])
    if kind == "blocked":
        return _blocked(rng, rank)
    if kind == "nvidia_mma":
        return _mma(rng, rank, 2 if rank == 3 else None)
    return _mfma(rng, rank) if kind == "amd_mfma" else _wmma(rng, rank)


def _dot(rng: random.Random) -> dict:
    parent = _parent(rng, rng.choice([2, 2, 3]))
    op = rng.choice([0, 1])
    if parent["kind"] == "nvidia_mma" and parent["version"][0] == 3:
        op = 0
    kw = 0 if parent["kind"] == "blocked" else _pow2(rng, 0, 4)
    return {"kind": "dot_operand", "operand_index": op, "k_width": kw, "parent": parent}


def random_spec(rng: random.Random, kind: str) -> dict:
    """One spec of ``kind`` (see the module docstring)."""
    if kind == "blocked":
        spec = _blocked(rng, rng.randint(1, 3))
    elif kind == "slice":
        prank = rng.choice([2, 2, 3])
        parent = _dot(rng) if rng.random() < 0.2 else _parent(rng, prank)
        spec = {"kind": "slice", "dim": rng.randrange(rank_of(parent)), "parent": parent}
        spec["shape"] = _shape(rng, rank_of(parent) - 1)
        return spec
    elif kind == "nvidia_mma":
        spec = _mma(rng)
    elif kind == "dot_operand":
        spec = _dot(rng)
    elif kind == "amd_mfma":
        spec = _mfma(rng)
    elif kind == "amd_wmma":
        spec = _wmma(rng)
    elif kind == "swizzled_shared":
        rank = rng.randint(1, 3)
        spec = {"kind": "swizzled_shared", "vec": _pow2(rng, 0, 3), "per_phase": _pow2(rng, 0, 3),
                "max_phase": _pow2(rng, 0, 4), "order": rng.sample(range(rank), rank), **_cta_tiling(rng, rank)}
    elif kind == "nvmma_shared":
        rank = rng.choice([2, 2, 3, 1])
        swz = rng.choice([0, 32, 64, 128])
        bits = rng.choice([8, 16, 32])
        spec = {"kind": "nvmma_shared", "swizzle_byte_width": swz, "element_bitwidth": bits, "rank": rank,
                "transposed": rng.random() < 0.4, **_cta_tiling(rng, rank)}
        if bits == 8 and rng.random() < 0.2:
            spec["fp4_padded"] = True
    else:
        raise ValueError(kind)
    rank = rank_of(spec)
    # swizzled nvmma tiles need at least one 8-row core matrix: mostly draw those
    low = 3 if spec["kind"] == "nvmma_shared" and spec["swizzle_byte_width"] and rng.random() < 0.8 else 0
    spec["shape"] = _shape(rng, rank, low=low)
    return spec


def specs(n: int, seed: int = 0) -> list[dict]:
    """``n`` specs, kinds in turn, from one seeded generator."""
    rng = random.Random(seed)
    return [random_spec(rng, KINDS[i % len(KINDS)]) for i in range(n)]
