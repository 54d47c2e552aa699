"""``emit/harness_tiles.tile_chunk``: how many elements a TMA or MMA harness moves at once between a
shared tile and its row-major tensor, checked by brute force over the offset -> index map."""
from __future__ import annotations

import numpy as np
import pytest

from ll_codegen.emit.harness_tiles import tile_chunk


def index_of(bases: list[int], o: int) -> int:
    """The row-major index of offset ``o``: the xor of the bases of its set bits."""
    out = 0
    for k, b in enumerate(bases):
        if o >> k & 1:
            out ^= b
    return out


def holds(bases: list[int], c: int) -> bool:
    """Brute force: every run of ``c`` offsets starting at a multiple of ``c`` is ``c`` consecutive
    indices starting at a multiple of ``c``."""
    for o in range(0, 1 << len(bases), c):
        i = index_of(bases, o)
        if i % c or any(index_of(bases, o + j) != i + j for j in range(c)):
            return False
    return True


def random_bijection(rng: np.random.Generator, bits: int) -> list[int]:
    """Offset bases of a random bijective tile: an invertible F2 matrix, its low columns often the identity."""
    while True:
        keep = int(rng.integers(0, 5))
        bases = [1 << k for k in range(keep)] + [int(x) for x in rng.integers(1, 1 << bits, bits - keep)]
        m = np.array([[b >> r & 1 for r in range(bits)] for b in bases], dtype=np.uint8)
        rank, rows = 0, m.copy()
        for col in range(bits):
            piv = next((r for r in range(rank, bits) if rows[r, col]), None)
            if piv is None:
                continue
            rows[[rank, piv]] = rows[[piv, rank]]
            for r in range(bits):
                if r != rank and rows[r, col]:
                    rows[r] ^= rows[rank]
            rank += 1
        if rank == bits:
            return bases


@pytest.mark.parametrize("elem_bytes", [1, 2, 4, 8])
def test_chunk_is_the_largest_that_brute_force_allows(elem_bytes):
    rng = np.random.default_rng(elem_bytes)
    seen = set()
    for _ in range(300):
        bases = random_bijection(rng, 8)
        c = tile_chunk(bases, elem_bytes)
        seen.add(c)
        assert c * elem_bytes <= 16 and holds(bases, c), (bases, c)
        assert 2 * c * elem_bytes > 16 or not holds(bases, 2 * c), (bases, c)
    assert len(seen) > 1, seen


def test_swizzled_and_k_major_tiles():
    # 64 x 64 f16 tile, 128-byte swizzle: offsets 0..7 run along a row, the swizzle xors 16-byte chunks
    swizzled = [1, 2, 4, 8 ^ 64, 16 ^ 128, 32 ^ 256, 64, 128, 256] + [512 << k for k in range(3)]
    assert tile_chunk(swizzled, 2) == 8 and tile_chunk(swizzled, 1) == 8
    # offsets along the rows of a row-major tensor: one element at a time
    column = [64 << k for k in range(6)] + [1 << k for k in range(6)]
    assert tile_chunk(column, 2) == 1
    # a basis above the chunk reaching into its index bits cuts it short
    assert tile_chunk([1, 2, 4, 8 | 2, 16], 2) == 2
