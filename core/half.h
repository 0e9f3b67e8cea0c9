// float16 and bfloat16 storage types. Arithmetic is always done in float32
// (issue: "float16/bfloat16 storage with conversions, computing in float32").
// Conversions round to nearest even, like PyTorch's c10::Half / c10::BFloat16.
#pragma once

#include <bit>
#include <cstdint>

namespace dtr {

struct Half {
  uint16_t bits = 0;
};
struct BFloat16 {
  uint16_t bits = 0;
};

inline float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t out;
  if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      out = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    out = sign | 0x7f800000u | (mant << 13);
  } else {
    out = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(out);
}

inline uint16_t float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // inf or nan
    return uint16_t(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  }
  if (absx >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {  // subnormal or zero in half
    // value = absx as float; half subnormal unit = 2^-24
    const float v = std::bit_cast<float>(absx);
    // scale by 2^24 and round to nearest even via float arithmetic
    const float scaled = v * 16777216.0f;
    uint32_t m = uint32_t(scaled);
    const float rem = scaled - float(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    return uint16_t(sign | m);
  }
  const uint32_t exp = ((absx >> 23) - 127 + 15) << 10;
  const uint32_t mant = absx & 0x7fffffu;
  uint32_t h = exp | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return uint16_t(sign | h);
}

inline float bfloat16_to_float(uint16_t b) {
  return std::bit_cast<float>(uint32_t(b) << 16);
}

inline uint16_t float_to_bfloat16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet nan
  const uint32_t rounding_bias = 0x7fffu + ((x >> 16) & 1u);
  return uint16_t((x + rounding_bias) >> 16);
}

}  // namespace dtr
