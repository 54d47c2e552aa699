"""Floating-point arithmetic of ``sim`` (``add``, ``sub``, ``mul``, ``fma``/``mad``, ``min``, ``max``,
``neg``, ``abs`` and ``cvt`` between float types and from integers), on raw bits, for ``.f64``,
``.f32``, ``.f16`` and ``.bf16``.

Every result is the exact value rounded once to the destination format (``Fraction`` arithmetic,
then ``round_bits``): round to nearest even (``.rn``, the default) or ``.rz``/``.rm``/``.rp``;
overflow gives infinity (``.rn``) or the largest finite value (``.rz`` and the directed mode
away from it).  ``.ftz`` (``.f32`` only, as the PTX ISA) flushes subnormal inputs and results to
a zero of the same sign.  NaN inputs give the canonical NaN for arithmetic; ``min``/``max``
return the other operand when one is NaN (both: canonical NaN) and order ``-0.0 < +0.0`` (PTX
ISA "min", "max").  An exact zero sum is ``+0.0`` (``-0.0`` when rounding down, or when both
addends are ``-0.0``).  Packed ``f16x2``/``bf16x2`` ``add``/``sub``/``mul``/``fma`` are the same per
16-bit half (``packed_arith``); ``cvt`` to ``f16x2``/``bf16x2`` from two ``.f32`` (the first
operand into the upper half) and from ``e4m3x2``/``e5m2x2`` (each byte widened exactly, the upper
byte into the upper half, a NaN the canonical NaN) is ``convert_packed``.  Not modelled
(``PtxError``): ``.sat``, ``.NaN``, ``.xorsign``, ``.relu``, ``.approx`` division and the
transcendental functions.
"""
from __future__ import annotations

import functools
from fractions import Fraction
from typing import Callable

from ll_codegen.verify.ptx.ops import PtxError

#: type -> (exponent bits, stored significand bits)
FORMATS = {"f64": (11, 52), "f32": (8, 23), "f16": (5, 10), "bf16": (8, 7)}
_MODES = ("rn", "rz", "rm", "rp")


def _fmt(t: str) -> tuple[int, int, int, int]:
    e, m = FORMATS[t]
    return e, m, (1 << (e - 1)) - 1, 1 + e + m          # exponent bits, significand bits, bias, width


def canonical_nan(t: str) -> int:
    e, m, _, _ = _fmt(t)
    return ((1 << e) - 1) << m | ((1 << m) - 1)          # 0x7fffffff, 0x7fff, ... as the PTX ISA


@functools.lru_cache(maxsize=1 << 16)   # pure, and called with few distinct values
def decode(bits: int, t: str) -> Fraction | str:
    """The value of raw ``bits``: a Fraction, or ``'nan'``, ``'+inf'``, ``'-inf'``; ``-0.0`` is
    ``'-0'``."""
    e, m, bias, width = _fmt(t)
    bits &= (1 << width) - 1
    neg = bits >> (width - 1) & 1
    ex, frac = bits >> m & ((1 << e) - 1), bits & ((1 << m) - 1)
    if ex == (1 << e) - 1:
        return "nan" if frac else ("-inf" if neg else "+inf")
    return finite_value(neg, ex, frac, m, bias)


def finite_value(neg: int, ex: int, frac: int, m: int, bias: int) -> Fraction | str:
    """(-1)^neg 2^(ex - bias) (1 + frac / 2^m), or 2^(1 - bias) frac / 2^m when ex == 0 (subnormal);
    ``'-0'`` for negative zero."""
    if ex == 0 and frac == 0:
        return "-0" if neg else Fraction(0)
    v = Fraction(frac, 1 << m) * Fraction(2) ** (1 - bias) if ex == 0 else \
        Fraction((1 << m) | frac, 1 << m) * Fraction(2) ** (ex - bias)
    return -v if neg else v


def _exp2_floor(a: Fraction) -> int:
    """floor(log2(a)) of a positive Fraction."""
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    return e


@functools.lru_cache(maxsize=1 << 16)   # pure, and called with few distinct values
def round_bits(x: Fraction, t: str, mode: str = "rn", neg_zero: bool = False) -> int:
    """Raw bits of the exact value ``x`` rounded once to format ``t`` (``mode`` as ``cvt``'s)."""
    e, m, bias, width = _fmt(t)
    sign = 1 << (width - 1)
    if x == 0:
        return sign if neg_zero else 0
    neg = x < 0
    a = -x if neg else x
    emin, emax = 1 - bias, bias
    ex = max(_exp2_floor(a), emin)
    q = a / Fraction(2) ** (ex - m)                        # the significand, m fraction bits above the point
    fl = q.numerator // q.denominator
    rest = q - fl
    up = {"rn": rest > Fraction(1, 2) or (rest == Fraction(1, 2) and fl & 1),
          "rz": False, "rm": neg and rest > 0, "rp": (not neg) and rest > 0}[mode]
    n = fl + up
    if n == 1 << (m + 1):
        n, ex = n >> 1, ex + 1
    if ex > emax:
        if mode == "rn" or (mode == "rm" and neg) or (mode == "rp" and not neg):
            return (sign if neg else 0) | ((1 << e) - 1) << m                # infinity
        return (sign if neg else 0) | ((1 << e) - 2) << m | ((1 << m) - 1)  # the largest finite value
    if n < 1 << m:                                          # subnormal (ex == emin)
        body = n
    else:
        body = (ex + bias) << m | (n - (1 << m))
    if body == 0:
        return sign if neg else 0
    return (sign if neg else 0) | body


def _value(v: Fraction | str) -> Fraction:
    return Fraction(0) if v == "-0" else v                  # type: ignore[return-value]


def _is_zero(v) -> bool:
    return v == "-0" or (isinstance(v, Fraction) and v == 0)


def _neg_zero(v) -> bool:
    return v == "-0"


def _flush(v, t: str, ftz: bool):
    """``.ftz``: a subnormal value -> a zero of its sign."""
    if not ftz or isinstance(v, str):
        return v
    _, m, bias, _ = _fmt(t)
    if v != 0 and abs(v) < Fraction(2) ** (1 - bias):
        return "-0" if v < 0 else Fraction(0)
    return v


def _special(vals: list, t: str, base: str) -> int | None:
    """The result when an operand is NaN or infinite (None: all finite)."""
    if not any(isinstance(v, str) and v != "-0" for v in vals):
        return None
    if "nan" in vals:
        return canonical_nan(t)
    e, m, _, width = _fmt(t)
    inf = ((1 << e) - 1) << m
    sign = 1 << (width - 1)

    def sgn(v) -> int:                                      # +1 / -1 of a value (zeros by their sign)
        if isinstance(v, str):
            return -1 if v.startswith("-") else 1
        return -1 if v < 0 else 1
    if base in ("add", "sub"):
        a, b = vals
        if base == "sub":
            b = {"+inf": "-inf", "-inf": "+inf"}.get(b, b) if isinstance(b, str) else -b
        infs = [v for v in (a, b) if v in ("+inf", "-inf")]
        if len(set(infs)) > 1:
            return canonical_nan(t)
        return inf | (sign if infs[0] == "-inf" else 0)
    if base == "mul":
        a, b = vals
        if _is_zero(a) or _is_zero(b):
            return canonical_nan(t)
        return inf | (sign if sgn(a) * sgn(b) < 0 else 0)
    if base == "fma":
        a, b, c = vals
        prod_inf = any(v in ("+inf", "-inf") for v in (a, b))
        if prod_inf and (_is_zero(a) or _is_zero(b)):
            return canonical_nan(t)
        ps = sgn(a) * sgn(b)
        if prod_inf and c in ("+inf", "-inf") and ps != sgn(c):
            return canonical_nan(t)
        s = ps if prod_inf else sgn(c)
        return inf | (sign if s < 0 else 0)
    return None


def arith(base: str, mods: list[str], t: str) -> Callable[..., int]:
    """The function of ``add``/``sub``/``mul``/``fma``/``mad``/``neg``/``abs``/``min``/``max`` of
    type ``t`` on raw bits (see the module docstring)."""
    if t not in FORMATS:
        raise PtxError(f"{base}.{t}: packed or unknown float type not modelled")
    e, m, bias, width = _fmt(t)
    sign = 1 << (width - 1)
    bad = [x for x in mods if x not in _MODES + ("ftz",)]
    if bad or ("ftz" in mods and t != "f32"):
        raise PtxError(f"{base}.{'.'.join(mods + [t])}: modifier(s) {', '.join(bad) or 'ftz'} not modelled")
    mode = next((x for x in mods if x in _MODES), "rn")
    ftz = "ftz" in mods
    if base == "neg":
        return lambda a: (a ^ sign) & ((1 << width) - 1)
    if base == "abs":
        return lambda a: a & (sign - 1)
    if base in ("min", "max"):
        def minmax(a, b):
            x, y = _flush(decode(a, t), t, ftz), _flush(decode(b, t), t, ftz)
            if x == "nan" and y == "nan":
                return canonical_nan(t)
            if x == "nan":
                return b
            if y == "nan":
                return a

            def rank(v):   # infinities beyond every finite value, -0 just below +0
                if v in ("+inf", "-inf"):
                    return (1 if v == "+inf" else -1, Fraction(0), 0)
                return (0, _value(v), -1 if v == "-0" else 0)
            pick_a = rank(x) <= rank(y) if base == "min" else rank(x) >= rank(y)
            r = a if pick_a else b
            if ftz:                                        # the flushed value is the result
                v = x if pick_a else y
                if _is_zero(v):
                    return sign if _neg_zero(v) else 0
            return r
        return minmax
    if base == "mad":
        base = "fma"
    if base not in ("add", "sub", "mul", "fma"):
        raise PtxError(f"{base}.{t} not modelled")

    def op(*raw):
        vals = [_flush(decode(r, t), t, ftz) for r in raw]
        s = _special(vals, t, base)
        if s is not None:
            return s
        v = [_value(x) for x in vals]
        if base == "add":
            x = v[0] + v[1]
            nz = _neg_zero(vals[0]) and _neg_zero(vals[1])
        elif base == "sub":
            x = v[0] - v[1]
            nz = _neg_zero(vals[0]) and _is_zero(vals[1]) and not _neg_zero(vals[1])
        elif base == "mul":
            x = v[0] * v[1]
            nz = (_neg_zero(vals[0]) or v[0] < 0) != (_neg_zero(vals[1]) or v[1] < 0)
        else:
            x = v[0] * v[1] + v[2]
            pn = (_neg_zero(vals[0]) or v[0] < 0) != (_neg_zero(vals[1]) or v[1] < 0)
            nz = pn and _neg_zero(vals[2]) if v[0] * v[1] == 0 else False
        if x == 0 and base != "mul":
            nz = nz or (mode == "rm" and not all(_is_zero(u) for u in vals))
        r = round_bits(x, t, mode, neg_zero=nz)
        if ftz:
            fl = _flush(decode(r, t), t, True)
            if _is_zero(fl):
                return sign if (_neg_zero(fl) or r & sign) else 0
        return r
    return functools.lru_cache(maxsize=1 << 16)(op)     # pure in the raw bits, which repeat


def convert(dst_t: str, src_t: str, mods: list[str]) -> Callable[[int], int]:
    """``cvt.<mods>.dst.src`` with a float on either side (float -> float, integer -> float):
    widening float conversions are exact, narrowing ones and integer sources round by the mode
    (``.rn`` default).  Float -> integer is not modelled."""
    if dst_t not in FORMATS:
        raise PtxError(f"cvt.{dst_t}.{src_t}: float -> integer conversions are not modelled")
    bad = [x for x in mods if x not in _MODES + ("ftz",)]
    if bad:
        raise PtxError(f"cvt.{'.'.join(mods)}.{dst_t}.{src_t}: modifier(s) {', '.join(bad)} not modelled")
    mode = next((x for x in mods if x in _MODES), "rn")
    ftz = "ftz" in mods
    e, m, _, width = _fmt(dst_t)
    sign = 1 << (width - 1)
    if src_t in FORMATS:
        def cvt(a):
            v = _flush(decode(a, src_t), src_t, ftz and src_t == "f32")
            if v == "nan":
                return canonical_nan(dst_t)
            if v in ("+inf", "-inf"):
                return ((1 << e) - 1) << m | (sign if v == "-inf" else 0)
            if v == "-0":
                return sign
            return round_bits(v, dst_t, mode)
        return cvt
    if src_t[0] in "us" and src_t[1:].isdigit():
        bits, sgn = int(src_t[1:]), src_t[0] == "s"

        def cvt_int(a):
            a &= (1 << bits) - 1
            if sgn and a >> (bits - 1):
                a -= 1 << bits
            return round_bits(Fraction(a), dst_t, mode)
        return cvt_int
    raise PtxError(f"cvt.{dst_t}.{src_t} not modelled")


#: packed types -> the type of each 16-bit half
PACKED = {"f16x2": "f16", "bf16x2": "bf16"}

#: 8-bit float formats of ``cvt``'s packed sources: (exponent bits, mantissa bits, bias)
FP8 = {"e4m3x2": (4, 3, 7), "e5m2x2": (5, 2, 15)}


def packed_arith(base: str, mods: list[str], t: str) -> Callable[..., int]:
    """``base`` on each 16-bit half of packed ``t`` operands, as ``arith`` on the half type."""
    f = arith(base, mods, PACKED[t])

    def op(*raw):
        lo = f(*[r & 0xffff for r in raw])
        hi = f(*[(r >> 16) & 0xffff for r in raw])
        return lo | hi << 16
    return op


def fp8_value(bits: int, fmt: str) -> Fraction | str:
    """The value of one 8-bit float (OCP e4m3: no infinities, NaN S.1111.111; e5m2: IEEE-like)."""
    e, m, bias = FP8[fmt]
    neg, ex, frac = bits >> 7 & 1, bits >> m & ((1 << e) - 1), bits & ((1 << m) - 1)
    if fmt == "e4m3x2" and ex == 15 and frac == 7:
        return "nan"
    if fmt == "e5m2x2" and ex == 31:
        return "nan" if frac else ("-inf" if neg else "+inf")
    return finite_value(neg, ex, frac, m, bias)


def convert_packed(dst_t: str, src_t: str, mods: list[str]) -> Callable[..., int]:
    """``cvt.<mods>.{f16x2,bf16x2}.f32 d, a, b`` (``a`` rounded into the upper half, ``b`` the lower)
    and ``cvt.rn.f16x2.{e4m3x2,e5m2x2} d, a`` (the upper byte of ``a`` into the upper half)."""
    half = PACKED[dst_t]
    if src_t == "f32":
        one = convert(half, "f32", mods)
        return lambda a, b: one(b) | one(a) << 16
    if src_t not in FP8 or dst_t != "f16x2":
        raise PtxError(f"cvt.{dst_t}.{src_t} not modelled")
    bad = [x for x in mods if x != "rn"]
    if bad:
        raise PtxError(f"cvt.{'.'.join(mods)}.{dst_t}.{src_t}: modifier(s) {', '.join(bad)} not modelled")
    e, m, _, width = _fmt(half)

    def widen(byte: int) -> int:
        v = fp8_value(byte, src_t)
        if v == "nan":
            return canonical_nan(half)
        if v in ("+inf", "-inf"):
            return ((1 << e) - 1) << m | (1 << (width - 1) if v == "-inf" else 0)
        if v == "-0":
            return 1 << (width - 1)
        return round_bits(v, half)
    return lambda a: widen(a & 0xff) | widen(a >> 8 & 0xff) << 16
