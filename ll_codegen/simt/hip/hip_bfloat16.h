// Host SIMT stand-in for <hip/hip_bfloat16.h> (see ../simt_host.h): ROCm's hip_bfloat16, its bits in `data`,
// from float rounded to nearest even (infinities kept, a NaN stays a NaN, as ROCm rounds) and to float exactly.
#pragma once
#include <cstdint>
#include <cstring>

struct hip_bfloat16 {
    uint16_t data;
    hip_bfloat16() = default;
    explicit hip_bfloat16(float f) {
        uint32_t x;
        std::memcpy(&x, &f, 4);
        if ((x & 0x7f800000u) == 0x7f800000u) data = static_cast<uint16_t>((x | ((x & 0xffffu) ? 0x10000u : 0u)) >> 16);
        else data = static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);   // as ROCm's float_to_bfloat16
    }
    operator float() const {
        const uint32_t x = uint32_t(data) << 16;
        float f;
        std::memcpy(&f, &x, 4);
        return f;
    }
};
