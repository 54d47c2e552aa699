"""The upcast's numpy reference and its emulator (``plan/upcast.py``).

``upcast_reference(codes, src, dst)``: each source code's value from its format's definition
(float64), then that value in ``dst``'s bits -- asserted exact (the value must round-trip), a NaN
as the canonical 0x7fff.  ``check_upcast`` checks a plan: the move by its own emulator, then the
sequence executed instruction by instruction on the bits of ``I`` with models of the instructions
written from the PTX ISA (lop3's truth table, prmt's byte select, fma on f16x2/bf16x2 halves
rounded once to nearest even, the fp8 cvt as a bit-level re-biasing, cvt.f32.f16 and bf16's shift
into f32's top half; an 8-bit destination's byte interleave and table lookup by prmt, the tables taken
from the formats' definitions), its destination registers against the reference at the destination
layout's coordinates.  Source codes are one per element in the narrowest unsigned type that holds them
(uint8, uint16 for the 16-bit floats).
"""
from __future__ import annotations

import functools
from dataclasses import replace
from fractions import Fraction

import numpy as np

from ll_codegen.core.dtypes import DTYPE_BITS
from ll_codegen.core.layout import LinearLayout, layout_of
from ll_codegen.plan.upcast import UpcastPlan, half_kind, permuted, slot_elems, slot_pair, slot_size, source_bits
from ll_codegen.verify.emulate.convert import check_convert
from ll_codegen.verify.emulate.memory import check_memory_plan
from ll_codegen.verify.emulate.packed import check_packing
from ll_codegen.verify.emulate.reference import row_major_index

CANONICAL_NAN = 0x7FFF
#: the NaN an f32 destination's reference holds (a tf32 MMA's A; the payload is the instruction's own)
CANONICAL_NAN_F32 = 0x7FFFFFFF


def decode(codes: np.ndarray, src: str) -> np.ndarray:
    """float64 values of ``src`` codes (uint8 arrays, 4-bit codes in 0..15; uint16 for f16, bf16), from
    the formats' definitions: two's complement integers; e2m1 (bias 1, no inf/NaN: 0.5 m when e = 0,
    else 2^(e-1) (1 + m/2)); OCP e4m3 (bias 7, no inf, NaN = S.1111.111); e5m2 (bias 15, IEEE-like);
    IEEE binary16 and bf16 (f32's top 16 bits)."""
    if src in ("f16", "bf16"):
        return half_values(codes, src)
    c = codes.astype(np.int64)
    if src in ("u4", "u8"):
        return c.astype(np.float64)
    if src in ("i4", "i8"):
        half = 8 if src == "i4" else 128
        return np.where(c >= half, c - 2 * half, c).astype(np.float64)
    if src == "e2m1":
        s, e, m = c >> 3 & 1, c >> 1 & 3, c & 1
        v = np.where(e == 0, 0.5 * m, np.ldexp(1.0 + m / 2.0, e - 1))
        return np.where(s == 1, -v, v)
    if src == "f8e4m3":
        s, e, m = c >> 7 & 1, c >> 3 & 15, c & 7
        v = np.where(e == 0, np.ldexp(m / 8.0, -6), np.ldexp(1.0 + m / 8.0, e - 7))
        v = np.where((e == 15) & (m == 7), np.nan, v)
        return np.where(s == 1, -v, v)
    if src == "f8e5m2":
        s, e, m = c >> 7 & 1, c >> 2 & 31, c & 3
        v = np.where(e == 0, np.ldexp(m / 4.0, -14), np.ldexp(1.0 + m / 4.0, e - 15))
        v = np.where(e == 31, np.where(m == 0, np.inf, np.nan), v)
        return np.where(s == 1, -v, v)
    raise ValueError(f"no upcast from {src}")


def encode(values: np.ndarray, dst: str, exact: bool = True) -> np.ndarray:
    """uint16 bits of float64 ``values`` in ``dst`` (f16, bf16; uint32 for f32), rounded to nearest
    even; ``exact``: AssertionError unless every value is representable.  A NaN is the canonical
    0x7fff (f32: 0x7fffffff)."""
    v = np.asarray(values, dtype=np.float64)
    if DTYPE_BITS[dst] == 8:
        return byte_codes(v, dst, exact)
    if dst == "f32":
        with np.errstate(over="ignore"):
            f = v.astype(np.float32)                                         # RNE, subnormals kept
        bits = np.where(np.isnan(v), np.uint32(CANONICAL_NAN_F32), f.view(np.uint32)).astype(np.uint32)
        bad = ~np.isnan(v) & (f.astype(np.float64) != v)
        if exact and bad.any():
            raise AssertionError(f"{v[bad][0]!r} is not exact in f32")
        return bits
    if dst == "f16":
        with np.errstate(over="ignore"):
            h = v.astype(np.float16)
        bits = h.view(np.uint16)
        back = h.astype(np.float64)
    elif dst == "bf16":
        a = np.abs(v)
        fin = np.isfinite(v) & (a > 0)
        e = np.where(fin, np.floor(np.log2(np.where(fin, a, 1.0))), 0)
        q = np.ldexp(1.0, (np.maximum(e, -126) - 7).astype(np.int64))       # bf16's quantum at that exponent
        r = np.where(fin, np.round(v / q) * q, v)                            # np.round: half to even
        with np.errstate(over="ignore"):
            f = r.astype(np.float32)
        bits = (f.view(np.uint32) >> 16).astype(np.uint16)
        back = f.astype(np.float64)
    else:
        raise ValueError(f"no upcast to {dst}")
    nan = np.isnan(v)
    bits = np.where(nan, np.uint16(CANONICAL_NAN), bits).astype(np.uint16)
    if exact:
        bad = ~nan & (back != v)
        if bad.any():
            raise AssertionError(f"{v[bad][0]!r} is not exact in {dst}")
    return bits


def byte_codes(v: np.ndarray, dst: str, exact: bool = True) -> np.ndarray:
    """uint8 codes of float64 values in an 8-bit type (i8, u8, f8e4m3, f8e5m2): the code whose value
    (``decode``) and sign are the value's -- 8-bit destinations take exact values only."""
    if not exact:
        raise ValueError(f"{dst}: an 8-bit destination takes exact values only")
    table = decode(np.arange(256, dtype=np.uint8), dst)
    code = {}
    for c in range(255, -1, -1):                  # the lower code of two with one value (none here)
        if not np.isnan(table[c]):
            code[(float(table[c]), bool(np.signbit(table[c])))] = c
    flat = v.reshape(-1)
    keys, inv = np.unique(flat.view(np.uint64), return_inverse=True)     # bits: -0 apart from +0
    out = np.zeros(len(keys), dtype=np.uint8)
    for i, x in enumerate(keys.view(np.float64)):
        key = (float(x), bool(np.signbit(x)))
        if key not in code:
            raise AssertionError(f"{x!r} is not exact in {dst}")
        out[i] = code[key]
    return out[inv.reshape(-1)].reshape(v.shape)


def dst_values(bits: np.ndarray, t: str) -> np.ndarray:
    """float64 values of destination bits of ``t``: 8-bit codes by ``decode``, else ``half_values``."""
    return decode(bits, t) if DTYPE_BITS[t] == 8 else half_values(bits, t)


def upcast_reference(codes: np.ndarray, src: str, dst: str) -> np.ndarray:
    """The exact upcast of ``src`` codes to ``dst`` bits (uint16), sign of zero kept."""
    return encode(decode(codes, src), dst)


# ------------------------------------------------------------------ instruction models (PTX ISA)
def lop3(a: np.ndarray, b: int, c: np.ndarray, lut: int) -> np.ndarray:
    """lop3.b32: bit i of the result is bit (a_i << 2 | b_i << 1 | c_i) of ``lut``."""
    a, c = a.astype(np.uint32), np.asarray(c, dtype=np.uint32)
    b = np.uint32(b)
    out = np.zeros_like(a)
    for i in range(8):
        if lut >> i & 1:
            out |= (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
    return out


def prmt(a, b, sel) -> np.ndarray:
    """prmt.b32 (default mode): result byte i is byte (sel >> 4i) & 7 of the 8 bytes b:a (a low),
    replaced by its sign replicated when (sel >> 4i) & 8; a, b and sel words or arrays of words
    (sel's low 16 bits read)."""
    a, b, sel = (np.asarray(v, dtype=np.uint64) for v in (a, b, sel))
    x = a | b << np.uint64(32)
    out = np.zeros(np.broadcast(x, sel).shape, dtype=np.uint32)
    for i in range(4):
        s = sel >> np.uint64(4 * i) & np.uint64(0xF)
        byte = (x >> (np.uint64(8) * (s & np.uint64(7))) & np.uint64(0xFF)).astype(np.uint32)
        byte = np.where(s & np.uint64(8), np.where(byte & 0x80, np.uint32(0xFF), np.uint32(0)), byte)
        out |= byte.astype(np.uint32) << np.uint32(8 * i)
    return out


def half_values(bits: np.ndarray, t: str) -> np.ndarray:
    """float64 values of 16-bit ``t`` (f16, bf16) bits, or of 32-bit ones (f32; tf32 as f32 bits)."""
    if t in ("f32", "tf32"):
        return np.asarray(bits).astype(np.uint32).view(np.float32).astype(np.float64)
    bits = np.asarray(bits).astype(np.uint16)
    if t == "f16":
        return bits.view(np.float16).astype(np.float64)
    with np.errstate(invalid="ignore"):      # a signalling NaN's widening is a quiet NaN: still a NaN
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


#: (stored mantissa bits, smallest normal exponent, the exponent of 2 that overflows)
FORMAT = {"f16": (10, -14, 16), "bf16": (7, -126, 128)}


@functools.lru_cache(maxsize=1 << 16)   # pure, and called with few distinct values
def round_exact(v: Fraction, t: str, negative: bool) -> int:
    """Bits of the exact value ``v`` rounded once to nearest even in ``t`` (subnormals, overflow to
    infinity); ``negative``: the sign a zero result keeps."""
    mant, emin, emax = FORMAT[t]
    sign = 0x8000 if (v < 0 or (v == 0 and negative)) else 0
    a = abs(v)
    if a == 0:
        return sign
    e = max(a.numerator.bit_length() - a.denominator.bit_length(), emin)
    while Fraction(2) ** e > a and e > emin:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    q = Fraction(2) ** (e - mant)
    n, rest = divmod(a, q)
    n = int(n) + (1 if rest > q / 2 or (rest == q / 2 and int(n) & 1) else 0)
    r = n * q
    if r >= Fraction(2) ** emax:
        return sign | (0x7C00 if t == "f16" else 0x7F80)
    return sign | int(encode(np.array([float(r)]), t)[0])


@functools.lru_cache(maxsize=1 << 16)   # pure, and called with few distinct values
def exact_fma(a: int, b: int, c: int, t: str) -> int:
    """fma.rn of one 16-bit half: a * b + c exact (Fractions), rounded once; NaN -> 0x7fff, the
    infinities by IEEE's rules (float64 computes those exactly)."""
    va, vb, vc = (float(half_values(np.array([x], dtype=np.uint16), t)[0]) for x in (a, b, c))
    if not all(np.isfinite([va, vb, vc])):
        with np.errstate(invalid="ignore"):
            return int(encode(np.array([va * vb + vc]), t, exact=False)[0])
    p = Fraction(va) * Fraction(vb)
    v = p + Fraction(vc)
    neg = v == 0 and (np.signbit(va) != np.signbit(vb)) and np.signbit(vc) and p == 0
    return round_exact(v, t, bool(neg))


def fma_x2(a: np.ndarray, b, c, t: str) -> np.ndarray:
    """fma.rn.{f16x2,bf16x2}: each half a * b + c rounded once to nearest even (``exact_fma``, once per
    distinct operand triple)."""
    a = np.asarray(a, dtype=np.uint32)
    b, c = (np.broadcast_to(np.asarray(x, dtype=np.uint32), a.shape) for x in (b, c))
    out = np.zeros(a.shape, dtype=np.uint32)
    for shift in (0, 16):
        h = [(x >> np.uint32(shift)) & np.uint32(0xFFFF) for x in (a, b, c)]
        key = h[0].astype(np.uint64) << np.uint64(32) | h[1].astype(np.uint64) << np.uint64(16) | h[2]
        uniq, inv = np.unique(key.reshape(-1), return_inverse=True)
        vals = np.array([exact_fma(int(k >> 32), int(k >> 16 & 0xFFFF), int(k & 0xFFFF), t) for k in uniq],
                        dtype=np.uint32)
        out |= vals[inv].reshape(a.shape) << np.uint32(shift)
    return out


def fp8_to_f16_bits(c: np.ndarray, src: str) -> np.ndarray:
    """cvt.rn.f16x2.{e4m3x2,e5m2x2} on one byte: e5m2 is f16's top byte; e4m3's exponent re-biased
    (7 -> 15), its subnormals (m 2^-9) normalised; NaN -> 0x7fff."""
    c = c.astype(np.uint32)
    if src == "f8e5m2":
        mag = c & 0x7F
        return np.where(mag > 0x7C, CANONICAL_NAN, c << 8).astype(np.uint32)
    s, e, m = c >> 7, c >> 3 & 15, c & 7
    normal = s << 15 | (e + 8) << 10 | m << 7
    sub = np.zeros_like(c)
    for mm in range(1, 8):                          # m 2^-9 = 2^(p-9) (1 + f), p = floor(log2 m)
        p = mm.bit_length() - 1
        sub = np.where(m == mm, (p - 9 + 15) << 10 | ((mm - (1 << p)) << (10 - p)), sub)
    out = np.where(e == 0, s << 15 | sub, normal)
    return np.where((c & 0x7F) == 0x7F, CANONICAL_NAN, out).astype(np.uint32)


def bf16_pack(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """cvt.rn.bf16x2.f32 of two float64 values (exact here): ``hi`` in the upper half."""
    return (encode(lo, "bf16", exact=False).astype(np.uint32)
            | encode(hi, "bf16", exact=False).astype(np.uint32) << np.uint32(16))


# ------------------------------------------------------------------ the sequence
_MAGIC = {"u4_f16": (0xEA, 0x64006400, 0x3C003C00, 0xE400E400), "i4_f16": (0x6A, 0x64086408, 0x3C003C00, 0xE408E408),
          "u4_bf16": (0xEA, 0x43004300, 0x3F803F80, 0xC300C300),
          "i4_bf16": (0x6A, 0x43084308, 0x3F803F80, 0xC308C308)}


def run_sequence(plan: UpcastPlan, mid: np.ndarray) -> np.ndarray:
    """Destination words (threads, n_dst / 2) of the sequence run on ``I``'s source codes ``mid``
    (threads, n_dst; one code per element, nibbles for 4-bit types)."""
    s = plan.sequence
    kind, g = s.kind, s.group
    if plan.dst_dtype == "f32":
        return _run_f32(plan, mid)
    if slot_size(kind) == 4:
        return _run_bytes(plan, mid)
    out = np.zeros((mid.shape[0], plan.n_dst // 2), dtype=np.uint32)
    four = kind.split("_")[0] in ("u4", "i4", "e2m1")
    t = "bf16" if kind.endswith("bf16") else "f16"
    for w, k, dw in s.words:
        codes = mid[:, g * w:g * (w + 1)].astype(np.uint32)
        if four:                      # nibble j at bit 4j (j < g/2), 16 + 4(j - g/2) above
            x = np.zeros(mid.shape[0], dtype=np.uint32)
            for j in range(g):
                pos = 4 * j if j < g // 2 else 16 + 4 * (j - g // 2)
                x |= (codes[:, j] & 0xF) << np.uint32(pos)
            tk = x >> np.uint32(4 * k)
            if kind in _MAGIC:
                lut, magic, one, bias = _MAGIC[kind]
                r = fma_x2(lop3(tk, 0x000F000F, np.uint32(magic), lut), one, bias, t)
            else:                     # e2m1: exponent+mantissa under f16/bf16's exponent, the sign at bit 15
                em = (tk & np.uint32(0x00070007)) << np.uint32(9 if t == "f16" else 6)
                r = lop3(em, 0x80008000, x << np.uint32(12 - 4 * k), 0xF8)
                r = fma_x2(r, 0x74007400 if t == "f16" else 0x7E807E80, 0x80008000, t)
        else:
            x = np.zeros(mid.shape[0], dtype=np.uint32)
            for j in range(g):
                x |= (codes[:, j] & 0xFF) << np.uint32(8 * j)
            if kind in ("u8_f16", "i8_f16"):
                if kind == "i8_f16":
                    x = x ^ np.uint32(0x80808080)
                r = prmt(x, 0x64646464, 0x4140 + 2 * k * 0x101)   # bytes 2k, 2k + 1 under 0x64
                r = fma_x2(r, 0x3C003C00, 0xE400E400 if kind == "u8_f16" else 0xE480E480, "f16")
            elif kind in ("u8_bf16", "i8_bf16"):
                lo, hi = (x >> np.uint32(8 * (2 * k + h)) & np.uint32(0xFF) for h in (0, 1))
                if kind == "i8_bf16":
                    lo, hi = (np.where(v >= 128, v.astype(np.int64) - 256, v) for v in (lo, hi))
                r = bf16_pack(lo.astype(np.float64), hi.astype(np.float64))
            else:
                src = kind.rsplit("_", 1)[0]
                pair = x >> np.uint32(16 * k) & np.uint32(0xFFFF)
                h16 = fp8_to_f16_bits(pair & 0xFF, src) | fp8_to_f16_bits(pair >> 8, src) << np.uint32(16)
                if t == "f16":
                    r = h16
                else:
                    r = bf16_pack(half_values(h16 & 0xFFFF, "f16"), half_values(h16 >> 16, "f16"))
        out[:, dw] = r
    return out


def _run_f32(plan: UpcastPlan, mid: np.ndarray) -> np.ndarray:
    """Destination words (threads, n_dst) of an f32 sequence: the f16 sequence's pair words, each half
    widened exactly (cvt.f32.f16), or each byte of i8 / u8 converted to f32 (an exact cvt.rn), or each
    16-bit element widened: f16 by cvt.f32.f16 (a NaN as the canonical NaN), bf16 shifted into the top
    half (its bits unchanged: a NaN keeps its payload)."""
    s = plan.sequence
    out = np.zeros((mid.shape[0], plan.n_dst), dtype=np.uint32)
    if source_bits(s.kind) == 16:
        for w, k, dw in s.words:
            for j, i in enumerate(slot_pair(s.kind, s.group, w, k)):
                c = mid[:, i].astype(np.uint32)
                out[:, 2 * dw + j] = c << np.uint32(16) if plan.dtype == "bf16" else encode(half_values(c, "f16"), "f32")
        return out
    half = half_kind(s.kind)
    if half is not None:
        words = run_sequence(replace(plan, sequence=replace(s, kind=half), dst_dtype="f16"), mid)
        for _, _, dw in s.words:
            for j in (0, 1):
                h = words[:, dw] >> np.uint32(16 * j) & np.uint32(0xFFFF)
                out[:, 2 * dw + j] = encode(half_values(h, "f16"), "f32")
        return out
    for w, k, dw in s.words:
        for j in (0, 1):
            c = mid[:, s.group * w + 2 * k + j].astype(np.int64)
            v = np.where(c >= 128, c - 256, c) if s.kind == "i8_f32" else c
            out[:, 2 * dw + j] = encode(v.astype(np.float64), "f32")
    return out



def _run_bytes(plan: UpcastPlan, mid: np.ndarray) -> np.ndarray:
    """Destination words (threads, n_dst / 4) of a 4-bit -> 8-bit sequence: the word of ``group``
    nibbles in order; u4 / i4 its even and odd nibbles as bytes (i4 xor 8), interleaved by prmt (i4:
    plus 0x78 and xor 0x80 a byte); e2m1 prmt's lookup of the magnitude codes in the table of the
    destination's codes of e2m1's 8 magnitudes, or'ed with prmt's pick of 0x80 by the sign bits."""
    s = plan.sequence
    src = s.kind.split("_")[0]
    out = np.zeros((mid.shape[0], plan.n_dst // 4), dtype=np.uint32)
    if src == "e2m1":                 # byte i: the destination code of e2m1's magnitude code i
        mags = upcast_reference(np.arange(8, dtype=np.uint8), "e2m1", plan.dst_dtype).astype(np.uint32)
        t0, t1 = (int(sum(int(mags[4 * h + i]) << 8 * i for i in range(4))) for h in (0, 1))
    for w, k, dw in s.words:
        x = np.zeros(mid.shape[0], dtype=np.uint32)
        for j in range(s.group):
            x |= (mid[:, s.group * w + j].astype(np.uint32) & 0xF) << np.uint32(4 * j)
        if src == "e2m1":
            sel = x >> np.uint32(16 * k)
            out[:, dw] = (prmt(t0, t1, sel & np.uint32(0x7777))
                          | prmt(0, 0x80, (sel >> np.uint32(1)) & np.uint32(0x4444)))
            continue
        lo, hi = x & np.uint32(0x0F0F0F0F), (x >> np.uint32(4)) & np.uint32(0x0F0F0F0F)
        if src == "i4":
            lo, hi = lop3(x, 0x0F0F0F0F, 0x08080808, 0x6A), lop3(x >> np.uint32(4), 0x0F0F0F0F, 0x08080808, 0x6A)
        r = prmt(lo, hi, 0x7362 if k else 0x5140)
        if src == "i4":
            r = (r + np.uint32(0x78787878)) ^ np.uint32(0x80808080)
        out[:, dw] = r
    return out


# ------------------------------------------------------------------ scales
def scale_value(bits: np.ndarray, dtype: str, dst: str) -> np.ndarray:
    """float64 values of scale bits: an e8m0 exponent e is 2^(e - 127) (255: NaN), else ``dst`` bits."""
    if dtype == "e8m0":
        e = np.asarray(bits).astype(np.int64)
        return np.where(e == 255, np.nan, np.ldexp(1.0, e - 127))
    return half_values(bits, dst)


def random_scales(plan: UpcastPlan, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(scales, zero points) of the row-major scale tensor: f16/bf16 scales normal values of both
    signs with exponents -8 .. 4 (zero points -16 .. 16, every mantissa); e8m0 exponents 100 .. 150
    and the extremes 0, 254 and 255 (NaN) among them."""
    c = plan.scaling
    n = int(np.prod(c.shape))
    if c.dtype == "e8m0":
        e = rng.integers(100, 151, size=n).astype(np.uint8)
        e[rng.permutation(n)[:min(n, 3)]] = np.array([0, 254, 255][:min(n, 3)], dtype=np.uint8)
        return e, np.zeros(n, dtype=np.uint16)
    mant, _, _ = FORMAT[plan.dst_dtype]
    bias = 15 if plan.dst_dtype == "f16" else 127
    sign = rng.integers(0, 2, size=n).astype(np.uint16) << 15
    exp = rng.integers(bias - 8, bias + 5, size=n).astype(np.uint16) << mant
    s = sign | exp | rng.integers(0, 1 << mant, size=n).astype(np.uint16)
    zv = rng.integers(-16, 17, size=n) + rng.integers(0, 4, size=n) / 4.0
    return s.astype(np.uint16), encode(zv, plan.dst_dtype)


def scaled_reference(plan: UpcastPlan, codes: np.ndarray, scales: np.ndarray, zeros: np.ndarray) -> np.ndarray:
    """Row-major destination bits: element x of group g -> RNE(u * s[g] + c[g]), c = -RNE(z[g] s[g]) with
    zero points (else -0), u the exact upcast -- each rounding exact (``round_exact``)."""
    c = plan.scaling
    t = plan.dst_dtype
    coords = np.indices(plan.shape).reshape(len(plan.shape), -1)
    coords[c.dim] //= c.group
    g = np.ravel_multi_index(tuple(coords), c.shape)
    u = decode(codes, plan.dtype)
    sv = scale_value(scales, c.dtype, t)[g]
    if t == "f32":                    # e8m0 only: u s exact in float64, then one rounding (overflow, subnormals)
        with np.errstate(invalid="ignore", over="ignore"):
            return encode(u * sv, "f32", exact=False)
    out = np.zeros(u.shape, dtype=np.uint16)
    for i in range(len(u)):
        if c.zero_point:              # a zero product keeps its sign: -0 when z and s differ in sign
            zv = float(half_values(np.array([zeros[g[i]]], dtype=np.uint16), t)[0])
            zs = Fraction(zv) * Fraction(sv[i])
            cb = round_exact(zs, t, bool(np.signbit(zv) != np.signbit(sv[i]))) ^ 0x8000
        else:
            cb = 0x8000
        cv = float(half_values(np.array([cb], dtype=np.uint16), t)[0])
        if not (np.isfinite(u[i]) and np.isfinite(sv[i])):
            with np.errstate(invalid="ignore"):
                out[i] = encode(np.array([u[i] * sv[i] + cv]), t, exact=False)[0]
            continue
        v = Fraction(u[i]) * Fraction(sv[i]) + Fraction(cv)
        neg = v == 0 and u[i] * sv[i] == 0 and (np.signbit(u[i]) != np.signbit(sv[i])) and np.signbit(cv)
        out[i] = round_exact(v, t, bool(neg))
    return out


def thread_scales(plan: UpcastPlan, scales: np.ndarray, zeros: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(threads, scale registers) of the scales and zero points each thread holds (the scale layout)."""
    idx = row_major_index(layout_of(plan.scaling.bases)).reshape(plan.threads, -1)
    return scales[idx], zeros[idx]


def apply_scales(plan: UpcastPlan, words: np.ndarray, sc: np.ndarray, zr: np.ndarray) -> np.ndarray:
    """The scale step as the header issues it (``emit/upcast.scale_lines``), on the upcast words."""
    c = plan.scaling
    t = plan.dst_dtype
    if t == "f32":                    # mul.rn.f32 by 2^(e - 127) per register (emit/upcast.f32_scale_lines)
        e = sc.astype(np.uint32)
        sb = np.where(e == 0, np.uint32(0x00400000), np.where(e == 255, np.uint32(0x7FFFFFFF), e << np.uint32(23)))
        s32 = sb.astype(np.uint32).view(np.float32)[:, list(c.reg_of)]
        with np.errstate(invalid="ignore", over="ignore"):
            prod = words.view(np.float32) * s32
        return np.where(np.isnan(prod), np.uint32(CANONICAL_NAN_F32), prod.view(np.uint32)).astype(np.uint32)
    v = sc.astype(np.uint32)
    if c.dtype == "e8m0":
        v = np.where(v == 0, np.uint32(0x40), np.where(v == 255, np.uint32(0x7FFF), v << np.uint32(7)))
    s = v * np.uint32(0x10001)
    cz = (fma_x2(zr.astype(np.uint32) * np.uint32(0x10001), s, np.uint32(0x80008000), t) ^ np.uint32(0x80008000)
          if c.zero_point else np.full(s.shape, 0x80008000, dtype=np.uint32))
    out = np.zeros_like(words)
    lo16, hi16 = np.uint32(0xFFFF), np.uint32(0xFFFF0000)
    for dw in range(words.shape[1]):
        a, b = c.reg_of[2 * dw], c.reg_of[2 * dw + 1]
        S = (s[:, a] & lo16) | (s[:, b] & hi16)
        C = (cz[:, a] & lo16) | (cz[:, b] & hi16)
        out[:, dw] = fma_x2(words[:, dw], S, C, t)
    return out


def upcast_registers(plan: UpcastPlan, dst_bits: np.ndarray) -> np.ndarray:
    """(threads, dst_words) words of per-element destination bits (threads, n_dst): element 2m low
    (f32: the bits themselves, a word each; 8-bit: element 4m + j in byte j)."""
    d = dst_bits.astype(np.uint32)
    bits = DTYPE_BITS[plan.dst_dtype]
    per = 32 // bits
    out = np.zeros((d.shape[0], d.shape[1] // per), dtype=np.uint32)
    for j in range(per):
        out |= d[:, j::per] << np.uint32(bits * j)
    return out


def random_codes(plan: UpcastPlan, rng: np.random.Generator) -> np.ndarray:
    """The row-major source tensor as codes (one per element; uint16 for a 16-bit type), every code
    present when it fits."""
    n = int(np.prod(plan.shape))
    span = 1 << DTYPE_BITS[plan.dtype]
    t = np.uint16 if span > 256 else np.uint8
    codes = rng.integers(0, span, size=n, dtype=t)
    first = rng.permutation(n)[:min(n, span)]
    codes[first] = np.arange(min(n, span)).astype(t)
    return codes


def check_upcast(plan: UpcastPlan, rng: np.random.Generator | int | None = 0, **options) -> None:
    """The move by its own emulator, then the sequence on ``I`` against ``upcast_reference`` at every
    destination register; AssertionError naming the first thread and register that differ."""
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    mv = plan.move
    if plan.from_memory:
        check_memory_plan(mv, rng, **options)
    else:
        check_convert(mv, rng)
    if mv.packing is not None:
        check_packing(mv, rng)
    dst = layout_of(plan.dst_bases)
    mid_layout = permuted(dst, plan.sequence.perm)
    _check_mid(plan, mid_layout)
    codes = random_codes(plan, rng)
    mid = codes[row_major_index(mid_layout)].reshape(plan.threads, -1)
    got = run_sequence(plan, mid)
    if plan.scaling is None:
        flat = upcast_reference(codes, plan.dtype, plan.dst_dtype)
    else:
        scales, zeros = random_scales(plan, rng)
        got = apply_scales(plan, got, *thread_scales(plan, scales, zeros))
        flat = scaled_reference(plan, codes, scales, zeros)
    want_bits = flat[row_major_index(dst)].reshape(plan.threads, -1)
    want = upcast_registers(plan, want_bits)
    if plan.dst_dtype == "f32":       # the reference's canonical NaN stands for any NaN (bf16's shift keeps payloads)
        nan = (got & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
        got = np.where((want == CANONICAL_NAN_F32) & nan, want, got)
    bad = np.argwhere(got != want)
    if len(bad):
        t, r = (int(x) for x in bad[0])
        el = ", ".join(f"I[{i}]" for i in slot_elems(plan.sequence.kind, plan.sequence.group, 0, 0))
        raise AssertionError(f"upcast {plan.dtype} -> {plan.dst_dtype}: thread {t} dst word {r}: expected "
                             f"{int(want[t, r]):#010x}, got {int(got[t, r]):#010x} ({len(bad)} words differ; "
                             f"sequence {plan.sequence.kind}, words like {el})")


def _check_mid(plan: UpcastPlan, mid: LinearLayout) -> None:
    """The move was planned into ``I`` (the 4-bit layout its packing records, else its destination)."""
    mv = plan.move
    bases = mv.packing.dst_bases if mv.packing is not None else mv.dst_bases
    if layout_of(bases).bases != mid.bases:
        raise AssertionError("upcast: the move's destination is not the intermediate layout I of the sequence")
