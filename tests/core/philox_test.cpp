// Philox4x32-10 against the known-answer vectors of Random123
// (kat_vectors: philox4x32 10 rounds).
#include "core/philox.h"

#include <array>
#include <cstdint>

#include <gtest/gtest.h>

namespace dtr {
namespace {

using Words = std::array<uint32_t, 4>;

/// Random123 lists the counter as four words c0..c3 and the key as k0, k1;
/// philox4x32_10 takes them packed little-end first into 64-bit halves.
Words philox_words(Words ctr, std::array<uint32_t, 2> key) {
  const uint64_t ctr_lo = uint64_t(ctr[0]) | (uint64_t(ctr[1]) << 32);
  const uint64_t ctr_hi = uint64_t(ctr[2]) | (uint64_t(ctr[3]) << 32);
  const uint64_t seed = uint64_t(key[0]) | (uint64_t(key[1]) << 32);
  return philox4x32_10(seed, ctr_lo, ctr_hi);
}

TEST(Philox, KnownAnswerZeros) {
  EXPECT_EQ(philox_words({0, 0, 0, 0}, {0, 0}),
            (Words{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
}

TEST(Philox, KnownAnswerAllOnes) {
  EXPECT_EQ(philox_words({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                         {0xffffffffu, 0xffffffffu}),
            (Words{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
}

TEST(Philox, KnownAnswerPiDigits) {
  EXPECT_EQ(philox_words({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                         {0xa4093822u, 0x299f31d0u}),
            (Words{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, DefaultHighCounterIsZero) {
  EXPECT_EQ(philox4x32_10(0, 0), philox_words({0, 0, 0, 0}, {0, 0}));
}

TEST(Philox, StreamIndexesBlocksOfFour) {
  const RngState state{.seed = 0x1234, .offset = 0};
  const Words block0 = philox4x32_10(0x1234, 0);
  const Words block1 = philox4x32_10(0x1234, 1);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(philox_u32(state, i), block0[i]);
    EXPECT_EQ(philox_u32(state, 4 + i), block1[i]);
  }
  // An offset shifts the stream: draw i at offset k is draw k+i at offset 0.
  const RngState shifted{.seed = 0x1234, .offset = 6};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(philox_u32(shifted, i), philox_u32(state, 6 + i));
}

TEST(Philox, DifferentSeedsDiffer) {
  EXPECT_NE(philox4x32_10(1, 0), philox4x32_10(2, 0));
  EXPECT_NE(philox4x32_10(1, 0), philox4x32_10(1, 1));
}

TEST(Philox, UniformInUnitInterval) {
  EXPECT_EQ(u32_to_uniform(0), 0.0f);
  EXPECT_LT(u32_to_uniform(0xffffffffu), 1.0f);
  EXPECT_EQ(u32_to_uniform(0x80000000u), 0.5f);
}

TEST(Philox, BoxMullerIsFinite) {
  // u1 = 0 would give log(0); the +1 keeps it in (0, 1].
  EXPECT_TRUE(std::isfinite(box_muller(0, 0)));
  EXPECT_TRUE(std::isfinite(box_muller(0xffffffffu, 0xffffffffu)));
  // Rough moments over a few thousand draws.
  const RngState state{.seed = 42, .offset = 0};
  double sum = 0.0, sum_sq = 0.0;
  constexpr int kN = 20000;
  for (int i = 0; i < kN; ++i) {
    const float z = box_muller(philox_u32(state, 2 * i), philox_u32(state, 2 * i + 1));
    sum += z;
    sum_sq += double(z) * z;
  }
  EXPECT_NEAR(sum / kN, 0.0, 0.05);
  EXPECT_NEAR(sum_sq / kN, 1.0, 0.05);
}

}  // namespace
}  // namespace dtr
