// Host SIMT stand-in for <cuda_fp8.h> (see simt_host.h): the 8-bit floats of the OCP FP8 formats
// (E4M3: bias 7, no infinity, S.1111.111 the only NaN, largest 448; E5M2: bias 15, IEEE-like with
// infinities and NaNs, largest 57344) as far as kernels use them -- storage types, the conversion
// functions and the scalar / pair / quad structs.
//
// Rounding is the device's: to nearest, ties to even (PTX ISA "cvt": .rn is the only mode for
// e4m3x2/e5m2x2).  Saturation, as the PTX ISA and CUDA's documentation give it:
//   __NV_SATFINITE (the PTX .satfinite, the only form of the device instruction): a finite value
//     beyond the largest finite one and +-infinity become +-MAXNORM (448, 57344);
//   __NV_NOSAT: beyond MAXNORM + 1/2 ulp (464, 61440) E4M3 gives NaN (0x7f | sign) and E5M2
//     +-infinity (0x7c | sign); values in between round to +-MAXNORM as any other.
// A NaN input becomes 0x7f either way (the sign is dropped, as CUDA's cuda_fp8.hpp does); +-0 and
// values below half the smallest subnormal (2^-10, 2^-17) become +-0.  Decoding is exact: every fp8
// value is a __half (and a float); fp8 -> __half turns a NaN into the canonical 0x7fff.
#pragma once
#include <cstdint>
#include <cstring>

#include "cuda_bf16.h"
#include "cuda_fp16.h"

typedef unsigned char __nv_fp8_storage_t;
typedef unsigned short int __nv_fp8x2_storage_t;
typedef unsigned int __nv_fp8x4_storage_t;

enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE };
enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 };

namespace llgen_host {
namespace fp8 {

// A finite nonzero magnitude sig * 2^(e - frac) (sig < 2^(frac + 1); normal: sig >= 2^frac) -> fp8 bits.
// With m mantissa bits and the smallest normal exponent emin = 1 - bias, the value is an integer count n
// of its quantum q = 2^(max(e, emin) - m), rounded to nearest even; the code is
// (max(e, emin) - emin) << m plus n (n = 2^(m+1) after rounding carries into the exponent, a
// subnormal's n <= 2^m is the code itself).  Beyond the largest finite code: saturation.
inline __nv_fp8_storage_t encode(unsigned sign, int e, uint64_t sig, int frac, __nv_saturation_t sat,
                                 __nv_fp8_interpretation_t kind) {
    const bool e4m3 = kind == __NV_E4M3;
    const int m = e4m3 ? 3 : 2, emin = e4m3 ? -6 : -14;
    const unsigned maxnorm = e4m3 ? 0x7eu : 0x7bu;      // 448, 57344
    const unsigned overflow = e4m3 ? 0x7fu : 0x7cu;      // NOSAT beyond MAXNORM + 1/2 ulp: NaN, infinity
    if (e > 64) e = 64;                                  // far beyond either format: overflow below
    const int ee = e > emin ? e : emin;
    const int shift = frac - m + (ee - e);               // n = sig / 2^shift (shift >= frac - m >= 20)
    uint64_t n = 0;
    if (shift < 62) {
        const uint64_t half = uint64_t(1) << (shift - 1), rem = sig & ((half << 1) - 1);
        n = sig >> shift;
        n += rem > half || (rem == half && (n & 1u));
    }
    const uint64_t code = (static_cast<uint64_t>(ee - emin) << m) + n;
    if (code > maxnorm) return static_cast<__nv_fp8_storage_t>(sign | (sat == __NV_SATFINITE ? maxnorm : overflow));
    return static_cast<__nv_fp8_storage_t>(sign | code);
}

// IEEE bits (exponent bits `eb`, fraction bits `frac`, the sign at bit eb + frac) -> fp8 bits.
inline __nv_fp8_storage_t from_ieee_bits(uint64_t x, int eb, int frac, __nv_saturation_t sat,
                                         __nv_fp8_interpretation_t kind) {
    const uint64_t mag = x & ((uint64_t(1) << (eb + frac)) - 1), emax = (uint64_t(1) << eb) - 1;
    const unsigned sign = (x >> (eb + frac)) & 1u ? 0x80u : 0u;
    const uint64_t biased = mag >> frac, fraction = mag & ((uint64_t(1) << frac) - 1);
    if (biased == emax && fraction) return 0x7fu;                                         // NaN
    if (biased == emax) return static_cast<__nv_fp8_storage_t>(
        sign | (sat == __NV_SATFINITE ? (kind == __NV_E4M3 ? 0x7eu : 0x7bu) : (kind == __NV_E4M3 ? 0x7fu : 0x7cu)));
    if (!mag) return static_cast<__nv_fp8_storage_t>(sign);
    const int bias = static_cast<int>(emax >> 1);
    const int e = biased ? static_cast<int>(biased) - bias : 1 - bias;
    return encode(sign, e, fraction | (biased ? uint64_t(1) << frac : 0), frac, sat, kind);
}

// fp8 bits -> binary16 bits, exact (E4M3 NaN -> the canonical 0x7fff, E5M2 NaN -> 0x7fff too).
inline unsigned short to_half_bits(__nv_fp8_storage_t v, __nv_fp8_interpretation_t kind) {
    const unsigned sign = (v & 0x80u) << 8, mag = v & 0x7fu;
    if (kind == __NV_E5M2) return static_cast<unsigned short>(mag > 0x7cu ? 0x7fffu : (v << 8));   // f16 cut short
    if (mag == 0x7fu) return 0x7fffu;
    const unsigned e = mag >> 3, f = mag & 7u;
    if (e) return static_cast<unsigned short>(sign | ((e + 8u) << 10) | (f << 7));                  // rebias 7 -> 15
    if (!f) return static_cast<unsigned short>(sign);
    unsigned ex = 9u, ff = f;                                  // f * 2^-9: normalise into binary16
    while (!(ff & 8u)) ff <<= 1, --ex;
    return static_cast<unsigned short>(sign | (ex << 10) | ((ff & 7u) << 7));
}

}  // namespace fp8
}  // namespace llgen_host

inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t saturate,
                                                __nv_fp8_interpretation_t fp8_interpretation) {
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    return llgen_host::fp8::from_ieee_bits(bits, 8, 23, saturate, fp8_interpretation);
}

// A double rounds to fp8 once, at its own precision (not through float).
inline __nv_fp8_storage_t __nv_cvt_double_to_fp8(double x, __nv_saturation_t saturate,
                                                 __nv_fp8_interpretation_t fp8_interpretation) {
    uint64_t bits;
    std::memcpy(&bits, &x, 8);
    return llgen_host::fp8::from_ieee_bits(bits, 11, 52, saturate, fp8_interpretation);
}

// x.x in the low byte, x.y in the high byte (the PTX cvt.rn.satfinite.e4m3x2.f32 d, x.y, x.x).
inline __nv_fp8x2_storage_t __nv_cvt_float2_to_fp8x2(float2 x, __nv_saturation_t saturate,
                                                     __nv_fp8_interpretation_t fp8_interpretation) {
    return static_cast<__nv_fp8x2_storage_t>(__nv_cvt_float_to_fp8(x.y, saturate, fp8_interpretation) << 8 |
                                             __nv_cvt_float_to_fp8(x.x, saturate, fp8_interpretation));
}

inline __nv_fp8_storage_t __nv_cvt_halfraw_to_fp8(__half_raw x, __nv_saturation_t saturate,
                                                  __nv_fp8_interpretation_t fp8_interpretation) {
    return __nv_cvt_float_to_fp8(__half2float(__half{x.x}), saturate, fp8_interpretation);   // exact widening
}

inline __nv_fp8x2_storage_t __nv_cvt_halfraw2_to_fp8x2(__half2_raw x, __nv_saturation_t saturate,
                                                       __nv_fp8_interpretation_t fp8_interpretation) {
    return static_cast<__nv_fp8x2_storage_t>(
        __nv_cvt_halfraw_to_fp8(__half_raw{x.y}, saturate, fp8_interpretation) << 8 |
        __nv_cvt_halfraw_to_fp8(__half_raw{x.x}, saturate, fp8_interpretation));
}

inline __nv_fp8_storage_t __nv_cvt_bfloat16raw_to_fp8(__nv_bfloat16_raw x, __nv_saturation_t saturate,
                                                      __nv_fp8_interpretation_t fp8_interpretation) {
    return __nv_cvt_float_to_fp8(__bfloat162float(__nv_bfloat16{x.x}), saturate, fp8_interpretation);
}

inline __half_raw __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t x, __nv_fp8_interpretation_t fp8_interpretation) {
    return __half_raw{llgen_host::fp8::to_half_bits(x, fp8_interpretation)};
}

// The low byte to the low half, the high byte to the high half (the PTX cvt.rn.f16x2.e4m3x2).
inline __half2_raw __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t x, __nv_fp8_interpretation_t fp8_interpretation) {
    return __half2_raw{llgen_host::fp8::to_half_bits(static_cast<__nv_fp8_storage_t>(x & 0xffu), fp8_interpretation),
                       llgen_host::fp8::to_half_bits(static_cast<__nv_fp8_storage_t>(x >> 8), fp8_interpretation)};
}

namespace llgen_host {
namespace fp8 {
inline float to_float(__nv_fp8_storage_t v, __nv_fp8_interpretation_t kind) {
    return __half2float(__half{to_half_bits(v, kind)});
}

// One fp8 value of `Kind`: CUDA's __nv_fp8_e4m3 / __nv_fp8_e5m2 (conversions from wider types saturate
// to finite, as CUDA's constructors do).
template <__nv_fp8_interpretation_t Kind>
struct Scalar {
    __nv_fp8_storage_t __x;
    Scalar() = default;
    explicit Scalar(float f) : __x(__nv_cvt_float_to_fp8(f, __NV_SATFINITE, Kind)) {}
    explicit Scalar(double f) : __x(__nv_cvt_double_to_fp8(f, __NV_SATFINITE, Kind)) {}
    explicit Scalar(__half f) : __x(__nv_cvt_halfraw_to_fp8(static_cast<__half_raw>(f), __NV_SATFINITE, Kind)) {}
    explicit Scalar(__nv_bfloat16 f)
        : __x(__nv_cvt_bfloat16raw_to_fp8(static_cast<__nv_bfloat16_raw>(f), __NV_SATFINITE, Kind)) {}
    explicit Scalar(int v) : Scalar(static_cast<float>(v)) {}
    explicit operator float() const { return to_float(__x, Kind); }
    explicit operator double() const { return to_float(__x, Kind); }
    explicit operator __half() const { return __half{to_half_bits(__x, Kind)}; }
};

// Two fp8 values (x.x / the first in the low byte), CUDA's __nv_fp8x2_e4m3 / __nv_fp8x2_e5m2.
template <__nv_fp8_interpretation_t Kind>
struct Pair {
    __nv_fp8x2_storage_t __x;
    Pair() = default;
    explicit Pair(float2 f) : __x(__nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, Kind)) {}
    explicit Pair(__half2 f) : __x(__nv_cvt_halfraw2_to_fp8x2(static_cast<__half2_raw>(f), __NV_SATFINITE, Kind)) {}
    explicit operator float2() const {
        return float2{to_float(static_cast<__nv_fp8_storage_t>(__x & 0xffu), Kind),
                      to_float(static_cast<__nv_fp8_storage_t>(__x >> 8), Kind)};
    }
    explicit operator __half2() const {
        const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(__x, Kind);
        return __half2{__half{r.x}, __half{r.y}};
    }
};

// Four fp8 values (x in the low byte .. w in the high byte), CUDA's __nv_fp8x4_e4m3 / __nv_fp8x4_e5m2.
template <__nv_fp8_interpretation_t Kind>
struct Quad {
    __nv_fp8x4_storage_t __x;
    Quad() = default;
    explicit Quad(float4 f)
        : __x(static_cast<__nv_fp8x4_storage_t>(__nv_cvt_float2_to_fp8x2(float2{f.z, f.w}, __NV_SATFINITE, Kind)) << 16 |
              __nv_cvt_float2_to_fp8x2(float2{f.x, f.y}, __NV_SATFINITE, Kind)) {}
    explicit operator float4() const {
        float v[4];
        for (int i = 0; i < 4; ++i) v[i] = to_float(static_cast<__nv_fp8_storage_t>(__x >> (8 * i)), Kind);
        return float4{v[0], v[1], v[2], v[3]};
    }
};
}  // namespace fp8
}  // namespace llgen_host

typedef llgen_host::fp8::Scalar<__NV_E4M3> __nv_fp8_e4m3;
typedef llgen_host::fp8::Scalar<__NV_E5M2> __nv_fp8_e5m2;
typedef llgen_host::fp8::Pair<__NV_E4M3> __nv_fp8x2_e4m3;
typedef llgen_host::fp8::Pair<__NV_E5M2> __nv_fp8x2_e5m2;
typedef llgen_host::fp8::Quad<__NV_E4M3> __nv_fp8x4_e4m3;
typedef llgen_host::fp8::Quad<__NV_E5M2> __nv_fp8x4_e5m2;
