"""What the verification stages do with a mixed-input MMA (``plan/mma_mixed.py``): its data, the
emulator check, the harness row and the PTX wants -- each the upcast's and the MMA's own, composed.

Data (``mixed_tensors``): A's codes, scales and zero points chosen so that every number on the way
is exact -- the upcast always is; then ``u = RNE(decode(A) s + c)`` in the instruction's type (the
upcast's own reference, ``scaled_reference``), B small integers (u8: not negative), C integers in [-64, 64] -- and
every partial sum of ``C + u @ B`` is a multiple of u's common quantum q below ``2^24 q``, so f32
accumulation in any order gives numpy's float64 result exactly: the comparison is bit for bit.
"""
from __future__ import annotations

import numpy as np

from ll_codegen.core.dtypes import DTYPE_BITS, NP_RAW, is_packed
from ll_codegen.core.layout import layout_of
from ll_codegen.plan.mma_mixed import MixedMmaPlan
from ll_codegen.plan.packed import side_pair
from ll_codegen.verify.emulate.mma import emulate as emulate_mma
from ll_codegen.verify.emulate.packed import unpacked_tensor
from ll_codegen.verify.emulate.reference import acc_bits, encode_small, regs_of, row_major_index
from ll_codegen.verify.emulate.upcast import (check_upcast, decode, dst_values, encode, scaled_reference,
                                              upcast_reference)
from ll_codegen.verify.harness import MMA, HarnessOp, RunData, upcast_input
from ll_codegen.verify.ptx.expect import PtxWants
from ll_codegen.verify.ptx.expect_async import mma_wants

#: the largest B magnitude the data uses (smaller where K and A's range need it)
B_MAX = 4


def a_codes(a_dtype: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` codes of ``a_dtype`` (uint16 for the 16-bit floats): every code of the integer and 4-bit
    types; of the 8- and 16-bit floats the finite ones that are multiples of 1/16 of magnitude at most
    64 (the others would need more bits than an f32 sum keeps)."""
    span = 1 << DTYPE_BITS[a_dtype]
    allowed = np.arange(span, dtype=np.uint16 if span > 256 else np.uint8)
    if a_dtype in ("f8e4m3", "f8e5m2", "f16", "bf16"):
        v = decode(allowed, a_dtype)
        with np.errstate(invalid="ignore"):  # inf and NaN are dropped by isfinite
            allowed = allowed[np.isfinite(v) & (np.abs(v) <= 64) & (v * 16 == np.round(v * 16))]
    return allowed[rng.integers(0, len(allowed), size=n)]


def a_scales(plan: MixedMmaPlan, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(scales, zero points) of the scale tensor, row-major: e8m0 exponents 124 .. 130 (2^-3 .. 2^3),
    else values +-(1 + m/4) 2^e of the destination type, e in -2 .. 2; zero points integers -4 .. 4."""
    c = plan.upcast.scaling
    n = int(np.prod(c.shape))
    if c.dtype == "e8m0":
        return rng.integers(124, 131, size=n).astype(np.uint8), np.zeros(n, dtype=np.uint16)
    v = (1 + rng.integers(0, 4, size=n) / 4) * np.ldexp(1.0, rng.integers(-2, 3, size=n))
    v = np.where(rng.integers(0, 2, size=n) == 1, -v, v)
    return encode(v, plan.dtype), encode(rng.integers(-4, 5, size=n).astype(np.float64), plan.dtype)


def quantum(values: np.ndarray) -> float:
    """The largest power of two (at most 1) of which every value is a multiple."""
    for e in range(64):
        if np.array_equal(values * 2.0 ** e, np.round(values * 2.0 ** e)):
            return 2.0 ** -e
    raise AssertionError("no common quantum")


def mixed_tensors(plan: MixedMmaPlan, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One run's data: ``codes`` (A, row-major), ``scales``, ``zeros`` (empty without scales), ``a``
    (the upcast values, M x K), ``b``, ``c`` and ``want`` = C + a @ B (exact in f32)."""
    M, N, K = plan.shape
    up = plan.upcast
    codes = a_codes(plan.a_dtype, M * K, rng)
    scales = zeros = np.zeros(0, dtype=np.uint16)
    if up.scaling is None:
        bits = upcast_reference(codes, plan.a_dtype, up.dst_dtype)
    else:
        scales, zeros = a_scales(plan, rng)
        bits = scaled_reference(up, codes, scales, zeros)
    a = dst_values(bits, up.dst_dtype).reshape(M, K)
    q, top = quantum(a), max(float(np.abs(a).max()), 1.0)
    b_max = int(min(B_MAX, (2.0 ** 24 * q - 64) // (K * top)))
    if b_max < 1:
        raise AssertionError(f"no exact f32 accumulation for A of quantum {q} up to {top} over K = {K}")
    b = rng.integers(0 if plan.dtype == "u8" else -b_max, b_max, size=(K, N), endpoint=True)   # u8 B: 0 .. b_max
    c = rng.integers(-64, 64, size=(M, N), endpoint=True)
    return dict(codes=codes, scales=scales, zeros=zeros, a=a, b=b, c=c, want=c + a @ b)


def check_mixed_mma(plan: MixedMmaPlan, rng: np.random.Generator | int | None = 0, **options) -> None:
    """The upcast by its own check, the upcast's destination is the MMA's A, then the MMA emulated on
    the upcast values against numpy's ``C + upcast(A) @ B``; AssertionError naming the first wrong register."""
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    check_upcast(plan.upcast, rng)
    if layout_of(plan.upcast.dst_bases).bases != layout_of(plan.mma.a.layout).bases:
        raise AssertionError("mma_mixed: the upcast's destination is not the MMA's A fragment")
    d = mixed_tensors(plan, rng)
    got = emulate_mma(plan.mma, d["a"], d["b"], d["c"])
    expect = regs_of(layout_of(plan.mma.acc_layout), d["want"])
    bad = np.argwhere(got != expect)
    if len(bad):
        w, lane, r = (int(x) for x in bad[0])
        raise AssertionError(f"mma_mixed: warp {w} lane {lane} acc[{r}] = {got[w, lane, r]}, expected "
                             f"{expect[w, lane, r]} ({len(bad)} of {got.size} registers differ)")


def _pad16(a: np.ndarray) -> np.ndarray:
    b = np.ascontiguousarray(a).view(np.uint8).reshape(-1)
    return np.pad(b, (0, -b.size % 16))


def _data(plan: MixedMmaPlan, rng: np.random.Generator, variant: str) -> RunData:
    """``a_in`` (A's bytes as the layout holds them, the scales and zero points after, at
    ``plan.input_offsets``), B's raw bits, the accumulator's initial bits; the accumulator and every
    thread's registers poisoned with the complement of the result."""
    d = mixed_tensors(plan, rng)
    parts = [_pad16(upcast_input(plan.upcast, d["codes"]))]
    if plan.upcast.scaling is not None:
        parts += [_pad16(d["scales"]), _pad16(d["zeros"])]
    want_bits = acc_bits(d["want"], plan.acc_dtype)
    regs = want_bits.reshape(-1)[row_major_index(layout_of(plan.mma.acc_layout))].reshape(plan.threads, -1)
    regs = np.ascontiguousarray(regs)
    return RunData([np.concatenate(parts), encode_small(d["b"], plan.dtype).reshape(-1),
                    acc_bits(d["c"], plan.acc_dtype).reshape(-1), ~regs], {2: want_bits.reshape(-1), 3: regs})


def _compare(name: str, plan: MixedMmaPlan, run: RunData, got, ok: str, entropy: int | None):
    return MMA.compare(name, plan.mma, run, got, ok, entropy)


MIXED_MMA = HarnessOp(variants=lambda p: ("",),
                      c_types=lambda p: ["const uint8_t*", f"const uint{8 * p.elem_bytes}_t*", "uint32_t*",
                                         "uint32_t*"],
                      data=_data, compare=_compare)


def a_bits_of(plan: MixedMmaPlan, a_in: np.ndarray) -> np.ndarray:
    """The upcast A (row-major bits of the instruction's type) a harness input ``a_in`` holds."""
    M, _, K = plan.shape
    raw = np.asarray(a_in, dtype=np.uint8)
    if is_packed(plan.a_dtype):
        d, bit = side_pair(plan.upcast.move.packing, "src")
        shape = tuple(n // 2 if i == d else n for i, n in enumerate((M, K)))
        codes = unpacked_tensor(raw[:plan.a_bytes].reshape(shape), d, bit).reshape(-1)
    else:
        codes = raw[:plan.a_bytes].view(NP_RAW[plan.upcast.elem_bytes])
    c = plan.upcast.scaling
    if c is None:
        return upcast_reference(codes, plan.a_dtype, plan.upcast.dst_dtype)
    n = int(np.prod(c.shape))
    s_at, z_at = plan.input_offsets
    scales = raw[s_at:s_at + n * (1 if c.dtype == "e8m0" else 2)].view(np.uint8 if c.dtype == "e8m0" else np.uint16)
    zeros = raw[z_at:z_at + 2 * n].view(np.uint16) if c.zero_point else np.zeros(n, dtype=np.uint16)
    return scaled_reference(plan.upcast, codes, scales, zeros)


def _ptx_wants(p: MixedMmaPlan, args: list, variant: str, lane: int, warp: int):
    """The MMA's instructions with the upcast A's words: what reaches each instruction is checked
    (the upcast's own arithmetic by the outputs)."""
    return mma_wants(p.mma, [a_bits_of(p, args[0])] + list(args[1:]), variant, lane, warp)


MIXED_MMA_PTX = PtxWants(_ptx_wants, lambda e: e.op.startswith(("wgmma.", "mma.sync")), False)
