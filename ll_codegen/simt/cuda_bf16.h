// Host SIMT stand-in for <cuda_bf16.h> (see simt_host.h): bfloat16 storage, its pair and raw forms,
// and conversions, rounding as the device does (to nearest even; a NaN becomes the canonical NaN
// 0x7fff, as the PTX ISA's cvt gives it).
#pragma once
#include <cstdint>
#include <cstring>

#include "cuda_fp16.h"  // float2 (as CUDA's cuda_bf16.h, which includes cuda_fp16.h)

struct __nv_bfloat16;
// The raw bits of a __nv_bfloat16 (CUDA's __nv_bfloat16_raw: member x), convertible to __nv_bfloat16.
struct __nv_bfloat16_raw {
    unsigned short x;
    inline operator __nv_bfloat16() const;
};
struct __nv_bfloat162_raw {
    unsigned short x, y;
};

struct __nv_bfloat16 {
    uint16_t __x;
    operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }
};
inline __nv_bfloat16_raw::operator __nv_bfloat16() const { return __nv_bfloat16{x}; }

// Two bfloat16 in one 32-bit word: x in the low 16 bits, y in the high 16 (CUDA's __nv_bfloat162).
struct alignas(4) __nv_bfloat162 {
    __nv_bfloat16 x, y;
    operator __nv_bfloat162_raw() const { return __nv_bfloat162_raw{x.__x, y.__x}; }
};

inline __nv_bfloat16 __ushort_as_bfloat16(uint16_t bits) { return __nv_bfloat16{bits}; }
inline uint16_t __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{0x7fffu};      // NaN: canonical
    return __nv_bfloat16{static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16)};
}

inline float __bfloat162float(__nv_bfloat16 h) {
    const uint32_t x = uint32_t(h.__x) << 16;
    float f;
    std::memcpy(&f, &x, 4);
    return f;
}

// The arithmetic generated reductions use, as the device computes it (see cuda_fp16.h): a sum rounded once
// to nearest even; max/min return the other operand for one NaN, the canonical NaN for two, -0 below +0.
inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) {
    return __float2bfloat16_rn(__bfloat162float(a) + __bfloat162float(b));
}
inline __nv_bfloat16 __hmax(__nv_bfloat16 a, __nv_bfloat16 b) {
    const float x = __bfloat162float(a), y = __bfloat162float(b);
    if (x != x) return y != y ? __nv_bfloat16{0x7fffu} : b;
    if (y != y) return a;
    if (x == y) return (a.__x & 0x8000u) ? b : a;
    return x > y ? a : b;
}
inline __nv_bfloat16 __hmin(__nv_bfloat16 a, __nv_bfloat16 b) {
    const float x = __bfloat162float(a), y = __bfloat162float(b);
    if (x != x) return y != y ? __nv_bfloat16{0x7fffu} : b;
    if (y != y) return a;
    if (x == y) return (a.__x & 0x8000u) ? a : b;
    return x < y ? a : b;
}

// Pairs: CUDA's __nv_bfloat162 API as far as kernels packing MMA operands use it.
// __floats2bfloat162_rn(a, b) puts a in the low half, b in the high half (the PTX cvt.rn.bf16x2.f32 d, b, a).
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
    return __nv_bfloat162{__float2bfloat16_rn(a), __float2bfloat16_rn(b)};
}
inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __floats2bfloat162_rn(f.x, f.y); }
inline __nv_bfloat162 __float2bfloat162_rn(float a) { return __floats2bfloat162_rn(a, a); }
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 lo, __nv_bfloat16 hi) { return __nv_bfloat162{lo, hi}; }
inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 h) { return h.x; }
inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 h) { return h.y; }
inline float __low2float(__nv_bfloat162 h) { return __bfloat162float(h.x); }
inline float __high2float(__nv_bfloat162 h) { return __bfloat162float(h.y); }
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return float2{__bfloat162float(h.x), __bfloat162float(h.y)}; }
