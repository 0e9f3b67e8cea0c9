// Launchers of the conv family's own kernels (cuda/conv.cu): max, average and
// adaptive-average pooling and their backwards over (N, C, H, W) planes, and
// the per-channel bias add after a cuDNN convolution. Semantics are
// cpu/conv.cpp's; computed in float for float32/float16/bfloat16, double for
// float64. Every backward is a gather: one index per input element, summing
// the windows that cover it in the order the CPU's scatter adds them, so no
// index writes another's element (no atomics) and the sums are bitwise the
// CPU's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/exec.h"

namespace dtr::cuda {

/// `planes` = N * C planes of (H, W) input and (Ho, Wo) output; the window
/// of max/avg pooling (kernel, stride, padding); ignored by adaptive pooling.
struct PoolGeometry {
  int64_t planes = 0, H = 0, W = 0, Ho = 0, Wo = 0;
  int64_t kH = 1, kW = 1, sH = 1, sW = 1, pH = 0, pW = 0;
};

enum class PoolKind : uint8_t { kMax, kAvg, kAdaptiveAvg };

/// y = pool(x); for kMax also `indices` (int64, ih * W + iw of each maximum;
/// padding is -inf, a NaN in the window wins, the first maximum otherwise).
/// avg: count_include_pad, each window divided by kH * kW.
void launch_pool_forward(PoolKind kind, const PoolGeometry& g, DType dt, const std::byte* x, std::byte* y,
                         int64_t* indices, const Exec& e);

/// grad_x (planes, H, W) from grad_y (planes, Ho, Wo) (and, for kMax, the
/// forward's indices: an output's gradient goes to the input element its
/// index names, which the forward took inside the output's window).
void launch_pool_backward(PoolKind kind, const PoolGeometry& g, DType dt, const std::byte* grad_y,
                          const int64_t* indices, std::byte* grad_x, const Exec& e);

/// y (N, C, P) += bias (C), all of dtype `dt`, added in the compute type.
void launch_add_channel_bias(std::byte* y, const std::byte* bias, DType dt, int64_t N, int64_t C, int64_t P,
                             const Exec& e);

}  // namespace dtr::cuda
