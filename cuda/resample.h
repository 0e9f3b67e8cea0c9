// The launchers of the padding and resampling kernels (cuda/resample.cu),
// for cuda/resample_ops.cpp. Semantics and index rules: cpu/resample.cpp
// (PyTorch's aten/src/ATen/native/UpSample.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/exec.h"
#include "cuda/index.h"

namespace dtr::cuda {

/// y (y_dims, contiguous) = x (x_dims, contiguous) shifted by `before` per
/// dim, `fill` (isz bytes) outside x.
void launch_constant_pad(std::byte* y, const Dims& y_dims, const std::byte* x, const Dims& x_dims,
                         const int64_t* before, uint64_t fill, int64_t isz, const Exec& e);

/// The last two dims of independent planes: input H x W, output Ho x Wo.
struct Planes {
  int64_t count = 1, H = 1, W = 1, Ho = 1, Wo = 1;
};

/// How an output position reads its source: reflection padding (top, left)
/// or nearest upsampling (scale factors, 0 when not given).
enum class MapKind : uint8_t { kReflect, kNearest };
struct IndexMapArgs {
  MapKind kind = MapKind::kReflect;
  int64_t top = 0, left = 0;
  double scale_h = 0, scale_w = 0;
};

/// y[p, oh, ow] = x[p, row(oh), col(ow)] (floating dtype dt).
void launch_map_forward(std::byte* y, const std::byte* x, DType dt, const Planes& g, const IndexMapArgs& m,
                        const Exec& e);
/// gx[p, h, w] = sum of gy[p, oh, ow] with row(oh) = h and col(ow) = w, oh
/// then ow ascending (the CPU's order), accumulated in float or double.
void launch_map_backward(std::byte* gx, const std::byte* gy, DType dt, const Planes& g, const IndexMapArgs& m,
                         const Exec& e);

/// Bilinear upsampling and its gradient (the gradient as one index per
/// input element summing the output positions that read it in the CPU's order).
void launch_bilinear_forward(std::byte* y, const std::byte* x, DType dt, const Planes& g, double scale_h,
                             double scale_w, bool align_corners, const Exec& e);
void launch_bilinear_backward(std::byte* gx, const std::byte* gy, DType dt, const Planes& g, double scale_h,
                              double scale_w, bool align_corners, const Exec& e);

}  // namespace dtr::cuda
