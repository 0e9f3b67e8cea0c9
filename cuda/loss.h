// The launchers of softmax, log_softmax, cross_entropy, nll_loss, mse_loss
// and the kernels of their backward rules (cuda/loss.cu), for
// cuda/loss_ops.cpp. Semantics: cpu/loss.cpp. Every launcher takes
// contiguous tensors of one floating dtype `dt` (float32, float64, float16,
// bfloat16; the wrapper rejects others before calling) and int64 targets,
// and computes in the CPU's types and order: elementwise math in float
// (float64 for float64 inputs), lane sums and loss sums in double, the sums
// over lanes in the CPU's fixed blocks, so the values are the CPU kernel's
// bit for bit under emulation and a rerun is bitwise the first run.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/exec.h"

namespace dtr::cuda {

/// PyTorch's reduction codes, as the op rows' `reduction` attr holds them.
enum LossReduction : int64_t { kReduceNone = 0, kReduceMean = 1, kReduceSum = 2 };

/// A tensor seen as (outer, size, inner) around a dim: a lane is one
/// (outer, inner) position, its `size` elements `inner` apart.
struct LaneShape {
  int64_t outer = 1;
  int64_t size = 1;
  int64_t inner = 1;
};

/// softmax (log false) or log_softmax of x along s's dim into y (like x).
void launch_softmax(std::byte* y, const std::byte* x, DType dt, const LaneShape& s, bool log, const Exec& e);

/// softmax_backward: gx = y * (g - sum(g * y)); log_softmax_backward: gx =
/// g - exp(y) * sum(g); sums along s's dim. g, y and gx alike.
void launch_softmax_backward(std::byte* gx, const std::byte* g, const std::byte* y, DType dt, const LaneShape& s,
                             bool log, const Exec& e);

/// The first target outside [0, classes) that is not ignore_index (position
/// -1 when there is none) and how many targets are not ignore_index, found
/// on the device and read back.
struct TargetCheck {
  int64_t position = -1;
  int64_t value = 0;
  int64_t count = 0;
};
TargetCheck check_targets(const int64_t* target, int64_t n, int64_t classes, int64_t ignore_index, const Exec& e);

/// A class-index loss over lanes: one lane per target, its classes along
/// the lane; `count` targets are not ignore_index (check_targets).
struct ClassLoss {
  LaneShape lanes;
  int64_t ignore_index = -100;
  int64_t reduction = kReduceMean;
  int64_t count = 0;
};

/// cross_entropy of logits x and in-range targets: per lane logsumexp(x) -
/// x[target] (0 for an ignored one), into out (the target's shape for
/// "none", else 0-d: the sum, or the sum / count for "mean").
void launch_cross_entropy(std::byte* out, const std::byte* x, const int64_t* target, DType dt, const ClassLoss& s,
                          const Exec& e);

/// cross_entropy_backward: gx like x = (softmax(x) - onehot(target)) times
/// the lane's gradient (g[lane] for "none", g / count for "mean", g for
/// "sum"); 0 in ignored lanes.
void launch_cross_entropy_backward(std::byte* gx, const std::byte* g, const std::byte* x, const int64_t* target,
                                   DType dt, const ClassLoss& s, const Exec& e);

/// nll_loss of log-probabilities x: per lane -x[target] (0 for an ignored
/// one), reduced as cross_entropy.
void launch_nll_loss(std::byte* out, const std::byte* x, const int64_t* target, DType dt, const ClassLoss& s,
                     const Exec& e);

/// nll_loss_backward: gx of s.lanes' shape, zero but for -(the lane's
/// gradient) at each target not ignored.
void launch_nll_loss_backward(std::byte* gx, const std::byte* g, const int64_t* target, DType dt, const ClassLoss& s,
                              const Exec& e);

/// mse_loss of a and b (n elements each): (a - b)^2 into out (n elements
/// for "none"), or their sum (/ n for "mean") into the 0-d out.
void launch_mse_loss(std::byte* out, const std::byte* a, const std::byte* b, DType dt, int64_t n, int64_t reduction,
                     const Exec& e);

/// mse_loss_backward: gx (n elements) = 2 (a - b) g (/ n for "mean"); g has
/// n elements for "none", one otherwise.
void launch_mse_loss_backward(std::byte* gx, const std::byte* g, const std::byte* a, const std::byte* b, DType dt,
                              int64_t n, int64_t reduction, const Exec& e);

}  // namespace dtr::cuda
