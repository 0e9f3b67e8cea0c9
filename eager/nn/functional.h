// torch::nn::functional in dtr (`namespace F = torch::nn::functional;`):
// the functions of torch.nn.functional with libtorch's *FuncOptions, each a
// call of dtr ops (so every result rematerializes like the ops it is made
// of). Where an op takes a PyTorch string, the options take libtorch's tags:
//
//   F::leaky_relu(x, F::LeakyReLUFuncOptions().negative_slope(0.2));
//   F::dropout(x, F::DropoutFuncOptions().p(0.5).training(is_training()));
//   F::max_pool2d(x, F::MaxPool2dFuncOptions(2));
//   F::nll_loss(F::log_softmax(x, F::LogSoftmaxFuncOptions(1)), y,
//               F::NLLLossFuncOptions().reduction(dtr::kSum));
//   F::pad(x, F::PadFuncOptions({1, 1}).mode(dtr::kReflect));
//
// Errors are those of the underlying ops (shapes: ValueError; dims:
// IndexError; dtypes: TypeError) unless a function says otherwise.
#pragma once

#include <optional>
#include <variant>
#include <vector>

#include "eager/nn/enumtype.h"
#include "eager/nn/layers.h"
#include "eager/nn/loss.h"
#include "eager/nn/options.h"
#include "eager/tensor.h"

namespace dtr::nn::functional {

// ---- activations ------------------------------------------------------------------

using ReLUFuncOptions = ReLUOptions;
/// torch.nn.functional.relu (inplace ignored: always a new tensor).
Tensor relu(const Tensor& x, const ReLUFuncOptions& options = {});
using ReLU6FuncOptions = ReLU6Options;
/// torch.nn.functional.relu6: clamp(x, 0, 6).
Tensor relu6(const Tensor& x, const ReLU6FuncOptions& options = {});
using LeakyReLUFuncOptions = LeakyReLUOptions;
/// torch.nn.functional.leaky_relu: where(x >= 0, x, negative_slope * x)
/// (NaN stays NaN). TypeError for non-floating x.
Tensor leaky_relu(const Tensor& x, const LeakyReLUFuncOptions& options = {});
using GELUFuncOptions = GELUOptions;
/// torch.nn.functional.gelu (approximate "none" or "tanh").
Tensor gelu(const Tensor& x, const GELUFuncOptions& options = {});
/// torch.nn.functional.silu: x * sigmoid(x).
Tensor silu(const Tensor& x);
using HardtanhFuncOptions = HardtanhOptions;
/// torch.nn.functional.hardtanh: clamp(x, min_val, max_val); ValueError
/// when max_val < min_val.
Tensor hardtanh(const Tensor& x, const HardtanhFuncOptions& options = {});

/// torch::nn::functional::SoftmaxFuncOptions(dim) (also LogSoftmax):
/// dtype, when set, casts the input first.
struct SoftmaxFuncOptions {
  SoftmaxFuncOptions(int64_t dim) : dim_(dim) {}  // NOLINT
  DTR_ARG(int64_t, dim);
  DTR_ARG(std::optional<DType>, dtype) = std::nullopt;
};
using LogSoftmaxFuncOptions = SoftmaxFuncOptions;
/// torch.nn.functional.softmax along options.dim().
Tensor softmax(const Tensor& x, const SoftmaxFuncOptions& options);
/// torch.nn.functional.log_softmax along options.dim().
Tensor log_softmax(const Tensor& x, const LogSoftmaxFuncOptions& options);

// ---- dropout -----------------------------------------------------------------------

/// torch::nn::functional::DropoutFuncOptions: p 0.5, training true,
/// inplace false (ignored).
struct DropoutFuncOptions {
  DTR_ARG(double, p) = 0.5;
  DTR_ARG(bool, training) = true;
  DTR_ARG(bool, inplace) = false;
};
using Dropout2dFuncOptions = DropoutFuncOptions;
/// torch.nn.functional.dropout; ValueError for p outside [0, 1].
Tensor dropout(const Tensor& x, const DropoutFuncOptions& options = {});
/// torch.nn.functional.dropout2d (whole channels of (N, C, H, W)).
Tensor dropout2d(const Tensor& x, const Dropout2dFuncOptions& options = {});

// ---- linear, convolution, pooling ------------------------------------------------------

/// torch.nn.functional.linear: x (*, in) @ weight (out, in)^T + bias (out).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

/// torch::nn::functional::Conv2dFuncOptions: bias undefined, stride 1,
/// padding 0, dilation 1, groups 1.
struct Conv2dFuncOptions {
  DTR_ARG(Tensor, bias) = {};
  DTR_ARG(Pair2, stride) = 1;
  DTR_ARG(Pair2, padding) = 0;
  DTR_ARG(Pair2, dilation) = 1;
  DTR_ARG(int64_t, groups) = 1;
};
/// torch.nn.functional.conv2d: x (N, C_in, H, W), weight (C_out, C_in/groups, kH, kW).
Tensor conv2d(const Tensor& x, const Tensor& weight, const Conv2dFuncOptions& options = {});

/// torch::nn::functional::ConvTranspose2dFuncOptions: bias undefined,
/// stride 1, padding 0, output_padding 0, groups 1, dilation 1.
struct ConvTranspose2dFuncOptions {
  DTR_ARG(Tensor, bias) = {};
  DTR_ARG(Pair2, stride) = 1;
  DTR_ARG(Pair2, padding) = 0;
  DTR_ARG(Pair2, output_padding) = 0;
  DTR_ARG(int64_t, groups) = 1;
  DTR_ARG(Pair2, dilation) = 1;
};
/// torch.nn.functional.conv_transpose2d: weight (C_in, C_out/groups, kH, kW).
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const ConvTranspose2dFuncOptions& options = {});

using MaxPool2dFuncOptions = MaxPool2dOptions;
using AvgPool2dFuncOptions = AvgPool2dOptions;
using AdaptiveAvgPool2dFuncOptions = AdaptiveAvgPool2dOptions;
/// torch.nn.functional.max_pool2d (stride defaults to kernel_size).
Tensor max_pool2d(const Tensor& x, const MaxPool2dFuncOptions& options);
/// torch.nn.functional.avg_pool2d (count_include_pad, stride defaults to kernel_size).
Tensor avg_pool2d(const Tensor& x, const AvgPool2dFuncOptions& options);
/// torch.nn.functional.adaptive_avg_pool2d.
Tensor adaptive_avg_pool2d(const Tensor& x, const AdaptiveAvgPool2dFuncOptions& options);

// ---- normalization, embedding ------------------------------------------------------------

/// torch::nn::functional::BatchNormFuncOptions: weight, bias undefined,
/// training false, momentum 0.1, eps 1e-5.
struct BatchNormFuncOptions {
  DTR_ARG(Tensor, weight) = {};
  DTR_ARG(Tensor, bias) = {};
  DTR_ARG(bool, training) = false;
  DTR_ARG(std::optional<double>, momentum) = 0.1;
  DTR_ARG(double, eps) = 1e-5;
};
/// torch.nn.functional.batch_norm on (N, C, ...): batch statistics in
/// training mode (updating running_mean / running_var in place when
/// defined), the running ones otherwise. momentum nullopt counts as 0.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const BatchNormFuncOptions& options = {});

/// torch::nn::functional::LayerNormFuncOptions(normalized_shape): weight,
/// bias undefined, eps 1e-5.
struct LayerNormFuncOptions {
  LayerNormFuncOptions(std::vector<int64_t> normalized_shape)  // NOLINT
      : normalized_shape_(std::move(normalized_shape)) {}
  DTR_ARG(std::vector<int64_t>, normalized_shape);
  DTR_ARG(Tensor, weight) = {};
  DTR_ARG(Tensor, bias) = {};
  DTR_ARG(double, eps) = 1e-5;
};
/// torch.nn.functional.layer_norm over the trailing normalized_shape dims.
Tensor layer_norm(const Tensor& x, const LayerNormFuncOptions& options);

/// torch::nn::functional::GroupNormFuncOptions(num_groups): weight, bias
/// undefined, eps 1e-5.
struct GroupNormFuncOptions {
  GroupNormFuncOptions(int64_t num_groups) : num_groups_(num_groups) {}  // NOLINT
  DTR_ARG(int64_t, num_groups);
  DTR_ARG(Tensor, weight) = {};
  DTR_ARG(Tensor, bias) = {};
  DTR_ARG(double, eps) = 1e-5;
};
/// torch.nn.functional.group_norm on (N, C, *).
Tensor group_norm(const Tensor& x, const GroupNormFuncOptions& options);

/// torch::nn::functional::EmbeddingFuncOptions (no settable field:
/// padding_idx, max_norm and sparse are not offered).
struct EmbeddingFuncOptions {};
/// torch.nn.functional.embedding(input, weight): int64 indices (*) and
/// weight (V, D) → (*, D). Note the argument order (input first), as
/// PyTorch; IndexError for an index outside [0, V).
Tensor embedding(const Tensor& input, const Tensor& weight, const EmbeddingFuncOptions& options = {});

/// torch::nn::functional::NormalizeFuncOptions: p 2, dim 1, eps 1e-12.
struct NormalizeFuncOptions {
  DTR_ARG(double, p) = 2.0;
  DTR_ARG(int64_t, dim) = 1;
  DTR_ARG(double, eps) = 1e-12;
};
/// torch.nn.functional.normalize: x / max(||x||_p along dim, eps).
/// TypeError for non-floating x, ValueError for p <= 0.
Tensor normalize(const Tensor& x, const NormalizeFuncOptions& options = {});

/// torch.nn.functional.one_hot: int64 indices (*) → int64 (*, num_classes);
/// -1 infers max + 1.
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);

// ---- padding, resampling --------------------------------------------------------------------

/// torch::nn::functional::PadFuncOptions(pad): mode kConstant (or
/// kReflect), value 0 (the fill of constant padding, unused by reflect).
/// `pad` holds (before, after) pairs from the last dim.
struct PadFuncOptions {
  using mode_t = std::variant<enumtype::kConstant, enumtype::kReflect>;
  PadFuncOptions(std::vector<int64_t> pad) : pad_(std::move(pad)) {}  // NOLINT
  DTR_ARG(std::vector<int64_t>, pad);
  DTR_ARG(mode_t, mode) = enumtype::kConstant{};
  DTR_ARG(double, value) = 0.0;
};
/// torch.nn.functional.pad.
Tensor pad(const Tensor& x, const PadFuncOptions& options);

/// torch::nn::functional::InterpolateFuncOptions: size or scale_factor
/// (exactly one), mode kNearest (or kBilinear), align_corners unset.
struct InterpolateFuncOptions {
  using mode_t = std::variant<enumtype::kNearest, enumtype::kBilinear>;
  DTR_ARG(std::optional<std::vector<int64_t>>, size) = std::nullopt;
  DTR_ARG(std::optional<std::vector<double>>, scale_factor) = std::nullopt;
  DTR_ARG(mode_t, mode) = enumtype::kNearest{};
  DTR_ARG(std::optional<bool>, align_corners) = std::nullopt;
};
/// torch.nn.functional.interpolate on (N, C, H, W); ValueError for both or
/// neither of size and scale_factor.
Tensor interpolate(const Tensor& x, const InterpolateFuncOptions& options = {});

// ---- losses -------------------------------------------------------------------------------

using MSELossFuncOptions = MSELossOptions;
using L1LossFuncOptions = L1LossOptions;
using NLLLossFuncOptions = NLLLossOptions;
using CrossEntropyFuncOptions = CrossEntropyLossOptions;
using BinaryCrossEntropyFuncOptions = BCELossOptions;
using BinaryCrossEntropyWithLogitsFuncOptions = BCEWithLogitsLossOptions;
using SmoothL1LossFuncOptions = SmoothL1LossOptions;

// Each is the free function of eager/ops.h of the same name (dtr::mse_loss,
// dtr::nll_loss, ...) with its arguments taken from the options; shapes,
// dtypes, values and errors are documented there.

/// torch.nn.functional.mse_loss: (input - target)^2, reduced.
Tensor mse_loss(const Tensor& input, const Tensor& target, const MSELossFuncOptions& options = {});
/// torch.nn.functional.l1_loss: |input - target|, reduced.
Tensor l1_loss(const Tensor& input, const Tensor& target, const L1LossFuncOptions& options = {});
/// torch.nn.functional.nll_loss: input log-probabilities (N, C) or
/// (N, C, d...), int64 target (N) or (N, d...); class weights; targets equal
/// to ignore_index are skipped.
Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossFuncOptions& options = {});
/// torch.nn.functional.cross_entropy: log_softmax over dim 1, then
/// nll_loss; class weights, ignore_index, label_smoothing ε in [0, 1]
/// (ValueError otherwise), or class-probability targets of input's shape.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyFuncOptions& options = {});
/// torch.nn.functional.binary_cross_entropy: -(t log x + (1 - t) log(1 - x))
/// with each log clamped at -100 (PyTorch's), times weight when defined.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                            const BinaryCrossEntropyFuncOptions& options = {});
/// torch.nn.functional.binary_cross_entropy_with_logits: binary cross
/// entropy of sigmoid(input) computed stably, with weight and pos_weight.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BinaryCrossEntropyWithLogitsFuncOptions& options = {});
/// torch.nn.functional.smooth_l1_loss: d = |input - target|;
/// 0.5 d^2 / beta where d < beta, d - 0.5 beta elsewhere (beta 0: l1).
/// ValueError for negative beta.
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1LossFuncOptions& options = {});

}  // namespace dtr::nn::functional
