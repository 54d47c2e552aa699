// Host SIMT stand-in for <cuda_fp16.h> (see simt_host.h): the 16-bit storage type and the
// conversions kernels use, rounding as the device does (to nearest even).
#pragma once
#include <cstdint>
#include <cstring>

struct __half {
    uint16_t __x;
};

inline __half __ushort_as_half(uint16_t bits) { return __half{bits}; }
inline uint16_t __half_as_ushort(__half h) { return h.__x; }

// IEEE binary16 from binary32, round to nearest even (subnormals, overflow to infinity, NaN kept).
inline __half __float2half_rn(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u, mag = x & 0x7fffffffu;
    if (mag > 0x7f800000u) return __half{static_cast<uint16_t>(sign | 0x7e00u)};   // NaN
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
