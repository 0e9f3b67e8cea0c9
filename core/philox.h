// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011): a counter-based generator. A random op records only (seed, offset)
// in its lineage node, so replay reproduces the same bits with no generator
// state to save (Note [replay equals original]). Same constants as
// PyTorch's at::Philox4_32 and cuRAND.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

#include "core/host_device.h"

// The generator is one function on host and device (DTR_HOST_DEVICE):
// cuda/elementwise.cu draws the same bits as the CPU kernels.
namespace dtr {

struct RngState {
  uint64_t seed = 0;
  /// Counter offset in units of 32-bit draws, advanced by each random op.
  uint64_t offset = 0;
};

/// Four 32-bit outputs for counter `ctr` (128 bits) and key `seed` (64 bits).
DTR_HOST_DEVICE inline std::array<uint32_t, 4> philox4x32_10(uint64_t seed, uint64_t ctr_lo, uint64_t ctr_hi = 0) {
  uint32_t c0 = uint32_t(ctr_lo), c1 = uint32_t(ctr_lo >> 32);
  uint32_t c2 = uint32_t(ctr_hi), c3 = uint32_t(ctr_hi >> 32);
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(kM0) * c0;
    const uint64_t p1 = uint64_t(kM1) * c2;
    const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    const uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    const uint32_t n0 = hi1 ^ c1 ^ k0;
    const uint32_t n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return {c0, c1, c2, c3};
}

/// The 32-bit draw number `i` of the stream starting at `state.offset`.
DTR_HOST_DEVICE inline uint32_t philox_u32(const RngState& state, uint64_t i) {
  const uint64_t n = state.offset + i;
  return philox4x32_10(state.seed, n / 4)[n % 4];
}

/// Reads draws of one stream in increasing order, computing each 4-draw
/// Philox block once: philox_u32 recomputes the block for every draw, so
/// draws read one by one cost 4x the rounds. Same values as philox_u32.
class PhiloxStream {
 public:
  explicit PhiloxStream(const RngState& state) : state_(state) {}
  uint32_t operator()(uint64_t i) {
    const uint64_t n = state_.offset + i;
    const uint64_t block = n / 4;
    if (!valid_ || block != block_) {
      draws_ = philox4x32_10(state_.seed, block);
      block_ = block;
      valid_ = true;
    }
    return draws_[n % 4];
  }

 private:
  RngState state_;
  uint64_t block_ = 0;
  bool valid_ = false;
  std::array<uint32_t, 4> draws_{};
};

/// Uniform float in [0, 1) with 24 random bits (like torch.rand).
DTR_HOST_DEVICE inline float u32_to_uniform(uint32_t x) { return float(x >> 8) * (1.0f / 16777216.0f); }

/// Standard normal from two 32-bit draws (Box-Muller), float32 precision.
DTR_HOST_DEVICE inline float box_muller(uint32_t a, uint32_t b) {
  const float u1 = (float(a >> 8) + 1.0f) * (1.0f / 16777216.0f);  // (0, 1]
  const float u2 = float(b >> 8) * (1.0f / 16777216.0f);
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.283185307179586f * u2);
}

}  // namespace dtr
