// The launchers of layer_norm, rms_norm, batch_norm, group_norm and their
// backward kernels (cuda/norm.cu), for cuda/norm_ops.cpp. Semantics:
// cpu/norm.cpp. Every launcher takes contiguous tensors of one floating
// dtype `dt` (float32, float64, float16, bfloat16; the wrapper rejects
// others before calling) and computes in the CPU's types: elementwise math
// in float (float64 for float64 x), statistics and sums in double over a
// fixed element order, so a rerun is bitwise the first run.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/exec.h"

namespace dtr::cuda {

/// x (rows, n) of a row norm: layer_norm / rms_norm rows are the trailing
/// normalized_shape dims; eps is added to the (mean square or) variance.
struct RowNormShape {
  int64_t rows = 0;
  int64_t n = 0;
  double eps = 0;
  bool rms = false;  // rms_norm: mean 0 and 1/sqrt(mean(x^2) + eps)
};

/// x (N, C, *) seen per channel as N planes of `inner` contiguous elements.
struct ChannelShape {
  int64_t batch = 0;
  int64_t channels = 0;
  int64_t inner = 1;
};

/// x (N, C, *) with C = groups * (C / groups) and S spatial elements per
/// channel: the (n, g) rows of (C / groups) * S contiguous elements.
struct GroupShape {
  int64_t batch = 0;
  int64_t channels = 0;
  int64_t groups = 1;
  int64_t spatial = 0;
};

/// The optional affine inputs of a norm (null when absent), of dtype dt:
/// (n) for the row norms, (C) for batch_norm and group_norm.
struct AffineArgs {
  const std::byte* weight = nullptr;
  const std::byte* bias = nullptr;
};

/// layer_norm / rms_norm: y (rows, n) = (x - mean) * rstd [* weight] [+ bias].
void launch_row_norm(std::byte* y, const std::byte* x, AffineArgs af, DType dt, const RowNormShape& s,
                     const Exec& e);

/// layer_norm_backward / rms_norm_backward on g, x (rows, n) and the
/// optional weight (n): gx (rows, n) and, when not null, gweight (n) =
/// sum over rows of g * xhat and gbias (n) = sum over rows of g. The row
/// statistics are recomputed as forward computes them.
void launch_row_norm_backward(std::byte* gx, std::byte* gweight, std::byte* gbias, const std::byte* g,
                              const std::byte* x, const std::byte* weight, DType dt, const RowNormShape& s,
                              const Exec& e);

/// batch_norm (training): y like x (N, C, *) normalised per channel with the
/// batch mean and biased variance, written to mean (C) and var (C) of dtype
/// stat_dt (float64 for float64 x, float32 otherwise).
void launch_batch_norm(std::byte* y, std::byte* mean, std::byte* var, DType stat_dt, const std::byte* x,
                       AffineArgs af, DType dt, const ChannelShape& s, double eps, const Exec& e);

/// batch_norm_inference: y like x (N, C, *) normalised with running_mean
/// and running_var (C) of dtype dt.
void launch_batch_norm_inference(std::byte* y, const std::byte* x, const std::byte* running_mean,
                                 const std::byte* running_var, AffineArgs af, DType dt, const ChannelShape& s,
                                 double eps, const Exec& e);

/// batch_norm_update_stats_: running[i] = momentum * (stat[i] * scale) +
/// (1 - momentum) * running[i] in double for i < n, in place; running and
/// stat floating of any dtypes, strided (strides in elements).
void launch_batch_norm_update_stats(std::byte* running, DType running_dt, int64_t running_stride,
                                    const std::byte* stat, DType stat_dt, int64_t stat_stride, int64_t n,
                                    double momentum, double scale, const Exec& e);

/// batch_norm_backward on g, x (N, C, *): gx like x and, when not null,
/// gweight (C) = sum of g * xhat and gbias (C) = sum of g per channel. With
/// running_mean / running_var null (training) the batch statistics are
/// recomputed as forward computes them; else the running ones (C) are used
/// and gx = g * weight * invstd.
void launch_batch_norm_backward(std::byte* gx, std::byte* gweight, std::byte* gbias, const std::byte* g,
                                const std::byte* x, const std::byte* running_mean, const std::byte* running_var,
                                const std::byte* weight, DType dt, const ChannelShape& s, double eps,
                                const Exec& e);

/// group_norm: y like x (N, C, *) = (x - mean) * rstd [* weight[c]] [+ bias[c]]
/// with the statistics of x's (n, g) row.
void launch_group_norm(std::byte* y, const std::byte* x, AffineArgs af, DType dt, const GroupShape& s, double eps,
                       const Exec& e);

/// group_norm_backward on g, x (N, C, *) and the optional weight (C): gx like
/// x and, when not null, gweight (C) and gbias (C), each the sum over n of
/// the per (n, c) sums of g * xhat and of g.
void launch_group_norm_backward(std::byte* gx, std::byte* gweight, std::byte* gbias, const std::byte* g,
                                const std::byte* x, const std::byte* weight, DType dt, const GroupShape& s,
                                double eps, const Exec& e);

}  // namespace dtr::cuda
