// Host SIMT stand-in for <cuda_bf16.h> (see simt_host.h): bfloat16 storage and conversions,
// rounding as the device does (to nearest even; NaN stays NaN).
#pragma once
#include <cstdint>
#include <cstring>

struct __nv_bfloat16 {
    uint16_t __x;
};

inline __nv_bfloat16 __ushort_as_bfloat16(uint16_t bits) { return __nv_bfloat16{bits}; }
inline uint16_t __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{static_cast<uint16_t>((x >> 16) | 0x40u)};
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
