// float16 / bfloat16 conversions: round to nearest even, like c10::Half and
// c10::BFloat16.
#include "core/half.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

namespace dtr {
namespace {

float pow2(int e) { return std::ldexp(1.0f, e); }

TEST(Half, ExactValues) {
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(0.5f), 0x3800);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);  // largest finite half
  EXPECT_EQ(float_to_half(pow2(-14)), 0x0400);  // smallest normal
  EXPECT_EQ(float_to_half(pow2(-24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half(1023 * pow2(-24)), 0x03ff);  // largest subnormal
}

TEST(Half, ToFloat) {
  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_to_float(0x0001), pow2(-24));
  EXPECT_EQ(half_to_float(0x03ff), 1023 * pow2(-24));
  EXPECT_EQ(half_to_float(0x0400), pow2(-14));
  EXPECT_EQ(half_to_float(0xc000), -2.0f);
  EXPECT_TRUE(std::signbit(half_to_float(0x8000)));
  EXPECT_EQ(half_to_float(0x8000), 0.0f);
  EXPECT_EQ(half_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(half_to_float(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(half_to_float(0x7e00)));
  EXPECT_TRUE(std::isnan(half_to_float(0x7c01)));
}

TEST(Half, TinyValuesRoundToZeroOrSubnormal) {
  EXPECT_EQ(float_to_half(1e-8f), 0x0000);     // 0.17 of the smallest subnormal
  EXPECT_EQ(float_to_half(-1e-8f), 0x8000);
  EXPECT_EQ(float_to_half(pow2(-25)), 0x0000);  // tie between 0 and 1 → even (0)
  EXPECT_EQ(float_to_half(std::nextafter(pow2(-25), 1.0f)), 0x0001);
  EXPECT_EQ(float_to_half(1e-7f), 0x0002);     // 1.68 units
  EXPECT_EQ(float_to_half(6e-8f), 0x0001);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::denorm_min()), 0x0000);
}

TEST(Half, TiesRoundToEven) {
  // Normal range: spacing near 1 is 2^-10.
  EXPECT_EQ(float_to_half(1.0f + pow2(-11)), 0x3c00);      // 1 | 1+ulp: to even 1
  EXPECT_EQ(float_to_half(1.0f + 3 * pow2(-11)), 0x3c02);  // 1+ulp | 1+2ulp: to even
  EXPECT_EQ(float_to_half(1.0f + pow2(-11) + pow2(-20)), 0x3c01);  // above the tie
  EXPECT_EQ(float_to_half(1.0f + pow2(-11) - pow2(-20)), 0x3c00);  // below the tie
  // Subnormal range.
  EXPECT_EQ(float_to_half(1.5f * pow2(-24)), 0x0002);
  EXPECT_EQ(float_to_half(2.5f * pow2(-24)), 0x0002);
  EXPECT_EQ(float_to_half(3.5f * pow2(-24)), 0x0004);
  // Largest subnormal + half a unit rounds up into the normals.
  EXPECT_EQ(float_to_half(1023.5f * pow2(-24)), 0x0400);
  // Carry out of the mantissa into the exponent.
  EXPECT_EQ(float_to_half(2.0f - pow2(-12)), 0x4000);
}

TEST(Half, OverflowAndSpecials) {
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);  // below the tie at 65520
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // tie, 0x7bff is odd → inf
  EXPECT_EQ(float_to_half(1e5f), 0x7c00);
  EXPECT_EQ(float_to_half(-1e5f), 0xfc00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::infinity()), 0xfc00);
  const uint16_t nan = float_to_half(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  // A signalling-looking NaN whose payload lives only in the low bits stays NaN.
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::bit_cast<float>(0x7f800001u)))));
}

TEST(Half, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = half_to_float(uint16_t(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f)))) << std::hex << h;
    } else {
      ASSERT_EQ(float_to_half(f), h) << std::hex << h;
    }
  }
}

TEST(Half, MidpointsBetweenNeighboursRoundToEven) {
  // Every midpoint between two adjacent positive finite halves.
  for (uint32_t h = 0; h < 0x7bff; ++h) {
    const double lo = half_to_float(uint16_t(h));
    const double hi = half_to_float(uint16_t(h + 1));
    const float mid = float((lo + hi) / 2);  // exact in float
    const uint16_t expected = (h & 1u) ? uint16_t(h + 1) : uint16_t(h);
    ASSERT_EQ(float_to_half(mid), expected) << std::hex << h;
  }
}

TEST(BFloat16, ExactValues) {
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16(-2.0f), 0xc000);
  EXPECT_EQ(float_to_bfloat16(0.0f), 0x0000);
  EXPECT_EQ(float_to_bfloat16(-0.0f), 0x8000);
  EXPECT_EQ(bfloat16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bfloat16_to_float(0x4049), 3.140625f);
  EXPECT_EQ(float_to_bfloat16(3.14159265f), 0x4049);
}

TEST(BFloat16, TiesRoundToEven) {
  // Spacing near 1 is 2^-7.
  EXPECT_EQ(float_to_bfloat16(1.0f + pow2(-8)), 0x3f80);
  EXPECT_EQ(float_to_bfloat16(1.0f + 3 * pow2(-8)), 0x3f82);
  EXPECT_EQ(float_to_bfloat16(1.0f + pow2(-8) + pow2(-20)), 0x3f81);
  EXPECT_EQ(float_to_bfloat16(1.0f + pow2(-8) - pow2(-20)), 0x3f80);
}

TEST(BFloat16, Specials) {
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(float_to_bfloat16(-std::numeric_limits<float>::infinity()), 0xff80);
  // FLT_MAX is above the largest bfloat16's midpoint: rounds to inf.
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload is only in the low 16 bits must not become inf.
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(std::bit_cast<float>(0x7f800001u)))));
}

TEST(BFloat16, EveryBFloat16RoundTrips) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const float f = bfloat16_to_float(uint16_t(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bfloat16(f), b) << std::hex << b;
  }
}

}  // namespace
}  // namespace dtr
