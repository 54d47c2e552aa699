"""The host SIMT runtime's stand-ins of ``<cuda_fp8.h>``, ``<cuda_bf16.h>`` and ``<cuda_fp16.h>``
(``ll_codegen/simt/``) against references written here from the formats' definitions, not from the
headers: the OCP FP8 formats (E4M3: bias 7, no infinity, S.1111.111 the only NaN; E5M2: IEEE-like,
bias 15) rounded to nearest even with the PTX ISA's ``.satfinite`` and CUDA's ``__NV_NOSAT`` rules
(exact comparison with the midpoints of neighbouring values), numpy's float16 and a bit-level bfloat16.
Every fp8 code round-trips; a sweep of f32 bit patterns covers ties, subnormals, overflow, NaN,
+-0 and +-inf in every mode; ml_dtypes is a further oracle where it is installed."""
from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest

from ll_codegen.run import host
from toolchain import need

pytestmark = pytest.mark.compile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIMT = os.path.join(ROOT, "ll_codegen", "simt")

#: format -> (exponent bits, mantissa bits, bias, has infinities)
FORMATS = {"e4m3": (4, 3, 7, False), "e5m2": (5, 2, 15, True)}

DRIVER = r"""
#include <cuda_fp8.h>
#include <cstdio>
#include <cstring>
// stdin: f32 bit patterns (hex, one a line); stdout per pattern: e4m3 sat, e4m3 nosat, e5m2 sat, e5m2 nosat,
// the x2 pair (x, 1.0f) e4m3 sat, f16 bits, bf16 bits, the __nv_fp8_e4m3/__nv_fp8_e5m2 constructors.
int main(int argc, char** argv) {
    if (argc > 1) {  // every fp8 code: its float (bits) and half (bits) for both formats
        for (unsigned c = 0; c < 256; ++c) {
            const auto v = static_cast<__nv_fp8_storage_t>(c);
            __nv_fp8_e4m3 a; a.__x = v;
            __nv_fp8_e5m2 b; b.__x = v;
            float fa = float(a), fb = float(b);
            unsigned ua, ub;
            std::memcpy(&ua, &fa, 4); std::memcpy(&ub, &fb, 4);
            std::printf("%08x %04x %08x %04x %04x\n", ua, __nv_cvt_fp8_to_halfraw(v, __NV_E4M3).x, ub,
                        __nv_cvt_fp8_to_halfraw(v, __NV_E5M2).x,
                        __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(c | c << 8), __NV_E4M3).y);
        }
        return 0;
    }
    unsigned x;
    while (std::scanf("%x", &x) == 1) {
        float f;
        std::memcpy(&f, &x, 4);
        const __half2 h = __floats2half2_rn(f, 1.0f);
        const __nv_bfloat162 b = __floats2bfloat162_rn(1.0f, f);
        std::printf("%02x %02x %02x %02x %04x %04x %04x %02x %02x %02x\n",
                    __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3), __nv_cvt_float_to_fp8(f, __NV_NOSAT, __NV_E4M3),
                    __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E5M2), __nv_cvt_float_to_fp8(f, __NV_NOSAT, __NV_E5M2),
                    __nv_cvt_float2_to_fp8x2(make_float2(f, 1.0f), __NV_SATFINITE, __NV_E4M3),
                    __low2half(h).__x, __high2bfloat16(b).__x, __nv_fp8_e4m3(f).__x, __nv_fp8_e5m2(f).__x,
                    __nv_cvt_double_to_fp8(static_cast<double>(f), __NV_NOSAT, __NV_E5M2));
    }
}
"""


# ------------------------------------------------------------------ references from the definitions
def decode(code: int, fmt: str) -> float:
    """The value of an fp8 code (NaN as nan), from the format's definition."""
    e_bits, m_bits, bias, inf = FORMATS[fmt]
    s, e, m = code >> 7, (code >> m_bits) & ((1 << e_bits) - 1), code & ((1 << m_bits) - 1)
    top = (1 << e_bits) - 1
    if inf and e == top:
        v = np.inf if m == 0 else np.nan
    elif not inf and e == top and m == (1 << m_bits) - 1:
        v = np.nan
    elif e == 0:
        v = m * 2.0 ** (1 - bias - m_bits)
    else:
        v = (1 + m / (1 << m_bits)) * 2.0 ** (e - bias)
    return -v if s else v


def encode(x: np.ndarray, fmt: str, satfinite: bool) -> np.ndarray:
    """f32 values -> fp8 codes, rounded to nearest even by comparison with the exact midpoints between
    neighbouring positive values (the value one step past the largest finite one is the overflow
    candidate: 480 for E4M3, 65536 = infinity for E5M2; its code parity decides the tie)."""
    codes = [c for c in range(0x80) if np.isfinite(decode(c, fmt))]
    vals = np.array([decode(c, fmt) for c in codes])              # increasing with the code
    step = vals[-1] - vals[-2]
    over = codes[-1] + 1                                          # 0x7f (odd) / 0x7c (even)
    vals = np.append(vals, vals[-1] + step)
    codes = np.array(codes + [over])
    with np.errstate(invalid="ignore"):
        a = np.abs(x.astype(np.float64))
    i = np.clip(np.searchsorted(vals, a, side="right") - 1, 0, len(vals) - 2)   # vals[i] <= a < vals[i + 1]
    lo, hi = vals[i], vals[i + 1]
    mid = (lo + hi) / 2                                           # exact: fp8 values have few bits
    up = (a > mid) | ((a == mid) & (codes[i] % 2 == 1))
    out = np.where(up, codes[i + 1], codes[i])
    out = np.where(a >= vals[-1], over, out)                      # beyond the last midpoint, or infinity
    overflow = out == over
    out = np.where(overflow, codes[-2] if satfinite else (0x7f if fmt == "e4m3" else 0x7c), out)
    out = out | np.where(np.signbit(x), 0x80, 0)
    return np.where(np.isnan(x), 0x7f, out).astype(np.int64)


def bf16_reference(bits: np.ndarray) -> np.ndarray:
    """bfloat16 = the top half of binary32 rounded to nearest even; a NaN is 0x7fff."""
    b = bits.astype(np.uint64)
    r = ((b + 0x7fff + ((b >> 16) & 1)) >> 16) & 0xffff
    return np.where((b & 0x7fffffff) > 0x7f800000, 0x7fff, r).astype(np.int64)


def f16_reference(bits: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        h = bits.view(np.float32).astype(np.float16).view(np.uint16).astype(np.int64)
    return np.where(np.isnan(bits.view(np.float32)), 0x7fff, h)


def sample_bits() -> np.ndarray:
    """f32 bit patterns: every fp8 value of both formats, the midpoints between neighbours and one ulp
    either side (ties), subnormal f32, the overflow thresholds, +-0, +-inf, NaNs, and random patterns."""
    vals = set()
    for fmt in FORMATS:
        v = np.array(sorted({abs(decode(c, fmt)) for c in range(256) if np.isfinite(decode(c, fmt))}))
        step = v[-1] - v[-2]
        v = np.append(v, [v[-1] + step, 2 * v[-1]])
        mids = (v[:-1] + v[1:]) / 2
        for w in (v, mids):
            w32 = w.astype(np.float32).view(np.uint32)
            for d in (-1, 0, 1):
                vals.update((w32.astype(np.int64) + d).tolist())
    special = [0, 0x80000000, 1, 0x007fffff, 0x00800000, 0x7f7fffff, 0x7f800000, 0xff800000, 0x7fc00000,
               0xffc00000, 0x7f800001, 0xffffffff, 0x7fbfffff, 0x3f800000]
    vals.update(special)
    named = np.array([448, 464, 465, 61440, 2.0 ** -10, 2.0 ** -10 * 1.0001, 3.0], dtype=np.float32)
    vals.update(named.view(np.uint32).tolist())
    rng = np.random.default_rng(7)
    vals.update(rng.integers(0, 1 << 32, 40000, dtype=np.uint64).tolist())
    vals.update((rng.normal(0, 100, 20000).astype(np.float32).view(np.uint32)).tolist())
    base = np.array(sorted(v & 0x7fffffff for v in vals if v >= 0), dtype=np.uint32)
    return np.concatenate([base, base | np.uint32(0x80000000)])


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    cxx = host.compiler()
    if cxx is None:
        need("hipcc")
    d = tmp_path_factory.mktemp("fp8")
    src, exe = d / "fp8.cpp", str(d / "fp8")
    src.write_text(DRIVER)
    r = subprocess.run([cxx, "-std=c++17", "-O1", "-Wall", "-Werror", "-I", SIMT, str(src), "-o", exe],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return exe


@pytest.fixture(scope="module")
def sweep(driver):
    bits = sample_bits()
    r = subprocess.run([driver], input="\n".join(f"{b:x}" for b in bits.tolist()), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    got = np.array([[int(t, 16) for t in line.split()] for line in r.stdout.splitlines()], dtype=np.int64)
    assert got.shape == (len(bits), 10)
    return bits, got


def test_every_fp8_code_decodes_exactly_and_round_trips(driver, sweep):
    out = subprocess.run([driver, "codes"], capture_output=True, text=True).stdout.split("\n")[:256]
    rows = [[int(t, 16) for t in line.split()] for line in out]
    for fmt, col in (("e4m3", 0), ("e5m2", 2)):
        for c in range(256):
            want = decode(c, fmt)
            got = np.array([rows[c][col]], dtype=np.uint32).view(np.float32)[0]
            half = np.array([rows[c][col + 1]], dtype=np.uint16).view(np.float16)[0]
            if np.isnan(want):
                assert np.isnan(got) and rows[c][col + 1] == 0x7fff, (fmt, hex(c))
                continue
            assert got == want and np.signbit(got) == bool(c & 0x80), (fmt, hex(c), got, want)
            assert half == want and np.signbit(half) == bool(c & 0x80), (fmt, hex(c))
            for sat in (True, False):       # the value encodes back to its code (infinity saturates: MAXNORM)
                back = (c & 0x80) | 0x7b if np.isinf(got) and sat else c
                assert encode(np.array([got], dtype=np.float32), fmt, sat)[0] == back, (fmt, hex(c))
    assert [rows[c][4] for c in range(256)] == [rows[c][1] for c in range(256)]   # x2: the high half likewise
    bits, got = sweep
    for c in range(256):                                             # the stand-in's encoder agrees on them
        for fmt, sat_col in (("e4m3", 0), ("e5m2", 2)):
            v = decode(c, fmt)
            if np.isfinite(v):
                idx = np.nonzero(bits == np.float32(v).view(np.uint32))[0]
                assert idx.size and (got[idx, sat_col] == c).all(), (fmt, hex(c))


@pytest.mark.parametrize("fmt, sat, col", [("e4m3", True, 0), ("e4m3", False, 1), ("e5m2", True, 2),
                                           ("e5m2", False, 3)])
def test_float_to_fp8_equals_the_definition(sweep, fmt, sat, col):
    bits, got = sweep
    want = encode(bits.view(np.float32), fmt, sat)
    bad = np.nonzero(got[:, col] != want)[0]
    assert bad.size == 0, [(hex(int(bits[i])), hex(int(got[i, col])), hex(int(want[i]))) for i in bad[:10]]


def test_edge_cases_by_name(sweep):
    bits, got = sweep
    row = {int(b): g for b, g in zip(bits.tolist(), got)}
    f = lambda v: int(np.float32(v).view(np.uint32))
    assert list(row[f(448.0)][:4]) == [0x7e, 0x7e, 0x5f, 0x5f]
    assert list(row[f(464.0)][:2]) == [0x7e, 0x7e]                   # the tie goes to the even 448
    assert list(row[f(465.0)][:2]) == [0x7e, 0x7f]                   # NOSAT: NaN
    assert list(row[f(61440.0)][2:4]) == [0x7b, 0x7c]                # the tie goes to the even infinity
    assert list(row[0x7f800000][:4]) == [0x7e, 0x7f, 0x7b, 0x7c]
    assert list(row[0xff800000][:4]) == [0xfe, 0xff, 0xfb, 0xfc]
    assert list(row[0xffc00000][:4]) == [0x7f] * 4                   # NaN: 0x7f, the sign dropped
    assert list(row[0x80000000][:4]) == [0x80] * 4
    assert list(row[f(2.0 ** -10)][:2]) == [0, 0] and list(row[f(2.0 ** -10 * 1.0001)][:2]) == [1, 1]
    assert row[f(3.0)][4] == (0x38 << 8 | 0x44)                      # x2: x in the low byte, y = 1.0 high


def test_constructors_and_double_saturate_like_the_functions(sweep):
    bits, got = sweep
    assert (got[:, 7] == got[:, 0]).all() and (got[:, 8] == got[:, 2]).all()      # __nv_fp8_e4m3(f): SATFINITE
    assert (got[:, 9] == got[:, 3]).all()                                        # double: exact widening
    assert (got[:, 4] & 0xff == got[:, 0]).all() and (got[:, 4] >> 8 == 0x38).all()


def test_half_and_bfloat16_pairs(sweep):
    bits, got = sweep
    assert (got[:, 5] == f16_reference(bits)).all()
    assert (got[:, 6] == bf16_reference(bits)).all()


def test_the_reference_can_fail(sweep):
    """A rounding that truncates instead of rounding to nearest even disagrees with the sweep."""
    bits, got = sweep
    x = bits.view(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        trunc = encode(np.where(np.isfinite(x), x * np.float32(0.999), x).astype(np.float32), "e4m3", True)
    assert (trunc != got[:, 0]).any()


def test_against_ml_dtypes(sweep):
    ml = pytest.importorskip("ml_dtypes")
    bits, got = sweep
    x = bits.view(np.float32)
    for fmt, col, t in (("e4m3", 1, ml.float8_e4m3fn), ("e5m2", 3, ml.float8_e5m2)):
        finite = np.isfinite(x) & (np.abs(x) < (448 if fmt == "e4m3" else 57344))
        want = x[finite].astype(t).view(np.uint8).astype(np.int64)
        assert (got[finite, col] == want).all(), fmt
