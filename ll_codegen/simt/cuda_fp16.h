// Host SIMT stand-in for <cuda_fp16.h> (see simt_host.h): the 16-bit storage type, its pair and raw
// forms, and the conversions kernels use, rounding as the device does (to nearest even; a NaN becomes
// the canonical NaN 0x7fff, as the PTX ISA's cvt and CUDA's own host code give it).  float2/float4,
// which the pair conversions take, come from here too (CUDA's vector types without <vector_types.h>).
#pragma once
#include <cstdint>
#include <cstring>

#ifndef LLGEN_HOST_VECTOR_TYPES
#define LLGEN_HOST_VECTOR_TYPES
struct alignas(8) float2 {
    float x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
#endif

struct __half;
// The raw bits of a __half (CUDA's __half_raw: member x), convertible to __half.
struct __half_raw {
    unsigned short x;
    inline operator __half() const;
};
struct __half2_raw {
    unsigned short x, y;
};

struct __half {
    uint16_t __x;
    operator __half_raw() const { return __half_raw{__x}; }
};
inline __half_raw::operator __half() const { return __half{x}; }

// Two halves in one 32-bit word: x in the low 16 bits, y in the high 16 (CUDA's __half2).
struct alignas(4) __half2 {
    __half x, y;
    operator __half2_raw() const { return __half2_raw{x.__x, y.__x}; }
};

inline __half __ushort_as_half(uint16_t bits) { return __half{bits}; }
inline uint16_t __half_as_ushort(__half h) { return h.__x; }

// IEEE binary16 from binary32, round to nearest even (subnormals, overflow to infinity, NaN kept).
inline __half __float2half_rn(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u, mag = x & 0x7fffffffu;
    if (mag > 0x7f800000u) return __half{0x7fffu};                                  // NaN: canonical
    if (mag >= 0x477ff000u) return __half{static_cast<uint16_t>(sign | 0x7c00u)};  // rounds to infinity
    if (mag < 0x38800000u) {                                                        // subnormal or zero
        const uint32_t shift = 126u - (mag >> 23);
        if (shift > 24u) return __half{static_cast<uint16_t>(sign)};
        const uint32_t m = (mag & 0x7fffffu) | 0x800000u;
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        r += rem > half || (rem == half && (r & 1u));
        return __half{static_cast<uint16_t>(sign | r)};
    }
    uint32_t r = mag - 0x38000000u;                                                 // rebias 127 -> 15
    r = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
    return __half{static_cast<uint16_t>(sign | r)};
}

inline float __half2float(__half h) {
    const uint32_t sign = (h.__x & 0x8000u) << 16, e = (h.__x >> 10) & 0x1f, m = h.__x & 0x3ffu;
    uint32_t x;
    if (e == 0x1f) x = sign | 0x7f800000u | (m << 13);
    else if (e) x = sign | ((e + 112u) << 23) | (m << 13);
    else if (!m) x = sign;
    else {
        int s = 0;
        uint32_t mm = m;
        while (!(mm & 0x400u)) mm <<= 1, ++s;
        x = sign | ((113u - s) << 23) | ((mm & 0x3ffu) << 13);
    }
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}

// The arithmetic generated reductions use, as the device computes it: a sum rounded once to nearest even
// (through float, which holds more than twice the precision plus 2 bits, so rounding twice is rounding once);
// max/min return the other operand for one NaN, the canonical NaN for two, and order -0 below +0.
inline __half __hadd(__half a, __half b) { return __float2half_rn(__half2float(a) + __half2float(b)); }
inline __half __hmax(__half a, __half b) {
    const float x = __half2float(a), y = __half2float(b);
    if (x != x) return y != y ? __half{0x7fffu} : b;
    if (y != y) return a;
    if (x == y) return (a.__x & 0x8000u) ? b : a;
    return x > y ? a : b;
}
inline __half __hmin(__half a, __half b) {
    const float x = __half2float(a), y = __half2float(b);
    if (x != x) return y != y ? __half{0x7fffu} : b;
    if (y != y) return a;
    if (x == y) return (a.__x & 0x8000u) ? a : b;
    return x < y ? a : b;
}

// Pairs: CUDA's __half2 API as far as kernels packing MMA operands use it.  __floats2half2_rn(a, b)
// puts a in the low half, b in the high half (the PTX cvt.rn.f16x2.f32 d, b, a).
inline __half2 __floats2half2_rn(float a, float b) { return __half2{__float2half_rn(a), __float2half_rn(b)}; }
inline __half2 __float22half2_rn(float2 f) { return __floats2half2_rn(f.x, f.y); }
inline __half2 __float2half2_rn(float a) { return __floats2half2_rn(a, a); }
inline __half2 __halves2half2(__half lo, __half hi) { return __half2{lo, hi}; }
inline __half __low2half(__half2 h) { return h.x; }
inline __half __high2half(__half2 h) { return h.y; }
inline float __low2float(__half2 h) { return __half2float(h.x); }
inline float __high2float(__half2 h) { return __half2float(h.y); }
inline float2 __half22float2(__half2 h) { return float2{__half2float(h.x), __half2float(h.y)}; }
