#include "eager/nn/functional.h"

#include <array>
#include <cmath>

#include "eager/ops.h"

namespace dtr::nn::functional {

namespace {
/// An (h, w) pair as an IntList argument; the temporary outlives the call.
struct Ints2 {
  std::array<int64_t, 2> v;
  operator IntList() const { return IntList(v.data(), v.size()); }  // NOLINT
};
Ints2 pair(Pair2 p) { return {{p.h, p.w}}; }

}  // namespace

// ---- activations ----------------------------------------------------------------

Tensor relu(const Tensor& x, const ReLUFuncOptions&) { return dtr::relu(x); }

Tensor relu6(const Tensor& x, const ReLU6FuncOptions&) { return dtr::clamp(x, 0.0, 6.0); }

Tensor leaky_relu(const Tensor& x, const LeakyReLUFuncOptions& options) {
  DTR_CHECK(x.defined() && x.is_floating_point(), TypeError,
            "leaky_relu: expected a floating-point tensor, got {}",
            x.defined() ? dtype_name(x.dtype()) : "undefined");
  // PyTorch's gradient is 1 where x > 0 and negative_slope elsewhere (x = 0 included).
  return dtr::where(x > 0.0, x, x * options.negative_slope());
}

Tensor gelu(const Tensor& x, const GELUFuncOptions& options) { return dtr::gelu(x, options.approximate()); }

Tensor silu(const Tensor& x) { return dtr::silu(x); }

Tensor hardtanh(const Tensor& x, const HardtanhFuncOptions& options) {
  DTR_CHECK(options.max_val() >= options.min_val(), ValueError,
            "hardtanh: max_val ({}) must be at least min_val ({})", options.max_val(), options.min_val());
  return dtr::clamp(x, options.min_val(), options.max_val());
}

Tensor softmax(const Tensor& x, const SoftmaxFuncOptions& options) {
  return dtr::softmax(options.dtype() ? x.to(*options.dtype()) : x, options.dim());
}

Tensor log_softmax(const Tensor& x, const LogSoftmaxFuncOptions& options) {
  return dtr::log_softmax(options.dtype() ? x.to(*options.dtype()) : x, options.dim());
}

// ---- dropout -----------------------------------------------------------------------

Tensor dropout(const Tensor& x, const DropoutFuncOptions& options) {
  DTR_CHECK(options.p() >= 0.0 && options.p() <= 1.0, ValueError,
            "dropout: dropout probability has to be between 0 and 1, but got {}", options.p());
  return dtr::dropout(x, options.p(), options.training());
}

Tensor dropout2d(const Tensor& x, const Dropout2dFuncOptions& options) {
  DTR_CHECK(options.p() >= 0.0 && options.p() <= 1.0, ValueError,
            "dropout2d: dropout probability has to be between 0 and 1, but got {}", options.p());
  return dtr::dropout2d(x, options.p(), options.training());
}

// ---- linear, convolution, pooling -----------------------------------------------------

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) { return dtr::linear(x, weight, bias); }

Tensor conv2d(const Tensor& x, const Tensor& weight, const Conv2dFuncOptions& o) {
  return dtr::conv2d(x, weight, o.bias(), pair(o.stride()), pair(o.padding()), pair(o.dilation()), o.groups());
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const ConvTranspose2dFuncOptions& o) {
  return dtr::conv_transpose2d(x, weight, o.bias(), pair(o.stride()), pair(o.padding()),
                               pair(o.output_padding()), o.groups(), pair(o.dilation()));
}

Tensor max_pool2d(const Tensor& x, const MaxPool2dFuncOptions& o) {
  return dtr::max_pool2d(x, pair(o.kernel_size()), pair(o.stride()), pair(o.padding()));
}

Tensor avg_pool2d(const Tensor& x, const AvgPool2dFuncOptions& o) {
  return dtr::avg_pool2d(x, pair(o.kernel_size()), pair(o.stride()), pair(o.padding()));
}

Tensor adaptive_avg_pool2d(const Tensor& x, const AdaptiveAvgPool2dFuncOptions& o) {
  return dtr::adaptive_avg_pool2d(x, pair(o.output_size()));
}

// ---- normalization, embedding ------------------------------------------------------------

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const BatchNormFuncOptions& o) {
  return dtr::batch_norm(x, running_mean, running_var, o.weight(), o.bias(), o.training(),
                         o.momentum().value_or(0.0), o.eps());
}

Tensor layer_norm(const Tensor& x, const LayerNormFuncOptions& o) {
  return dtr::layer_norm(x, o.normalized_shape(), o.weight(), o.bias(), o.eps());
}

Tensor group_norm(const Tensor& x, const GroupNormFuncOptions& o) {
  return dtr::group_norm(x, o.num_groups(), o.weight(), o.bias(), o.eps());
}

Tensor embedding(const Tensor& input, const Tensor& weight, const EmbeddingFuncOptions&) {
  return dtr::embedding(weight, input);
}

Tensor normalize(const Tensor& x, const NormalizeFuncOptions& o) {
  DTR_CHECK(x.defined() && x.is_floating_point(), TypeError,
            "normalize: expected a floating-point tensor, got {}",
            x.defined() ? dtype_name(x.dtype()) : "undefined");
  DTR_CHECK(o.p() > 0.0, ValueError, "normalize: p must be positive, got {}", o.p());
  const Tensor a = dtr::abs(x);
  Tensor norm;
  if (o.p() == 2.0) {
    norm = dtr::sqrt(dtr::sum(x * x, {o.dim()}, true));
  } else if (o.p() == 1.0) {
    norm = dtr::sum(a, {o.dim()}, true);
  } else {
    norm = dtr::pow(dtr::sum(dtr::pow(a, o.p()), {o.dim()}, true), 1.0 / o.p());
  }
  return x / dtr::clamp(norm, o.eps(), std::nullopt);
}

Tensor one_hot(const Tensor& indices, int64_t num_classes) { return dtr::one_hot(indices, num_classes); }

// ---- padding, resampling ----------------------------------------------------------------

Tensor pad(const Tensor& x, const PadFuncOptions& o) {
  // value is the fill of constant padding; the other modes take none.
  const bool constant = std::holds_alternative<enumtype::kConstant>(o.mode());
  return dtr::pad(x, o.pad(), enum_name(o.mode()), constant ? std::optional<double>(o.value()) : std::nullopt);
}

Tensor interpolate(const Tensor& x, const InterpolateFuncOptions& o) {
  return dtr::interpolate(x, o.size().value_or(std::vector<int64_t>{}),
                          o.scale_factor().value_or(std::vector<double>{}), enum_name(o.mode()),
                          o.align_corners());
}

// ---- losses: the free loss functions of eager/ops.h with the options' fields ----------------

Tensor mse_loss(const Tensor& input, const Tensor& target, const MSELossFuncOptions& o) {
  return dtr::mse_loss(input, target, o.reduction());
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const L1LossFuncOptions& o) {
  return dtr::l1_loss(input, target, o.reduction());
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossFuncOptions& o) {
  return dtr::nll_loss(input, target, o.weight(), o.reduction(), o.ignore_index());
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyFuncOptions& o) {
  return dtr::cross_entropy(input, target, o.weight(), o.reduction(), o.ignore_index(),
                            o.label_smoothing());
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const BinaryCrossEntropyFuncOptions& o) {
  return dtr::binary_cross_entropy(input, target, o.weight(), o.reduction());
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BinaryCrossEntropyWithLogitsFuncOptions& o) {
  return dtr::binary_cross_entropy_with_logits(input, target, o.weight(), o.pos_weight(), o.reduction());
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1LossFuncOptions& o) {
  return dtr::smooth_l1_loss(input, target, o.reduction(), o.beta());
}

}  // namespace dtr::nn::functional
