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

/// A loss's per-element values reduced as `r` says.
Tensor reduce(const Tensor& loss, LossReduction r) {
  switch (r.get()) {
    case Reduction::None:
      return loss;
    case Reduction::Sum:
      return dtr::sum(loss);
    case Reduction::Mean:
      break;
  }
  return dtr::mean(loss);
}

void check_same_shape(std::string_view fn, const Tensor& input, const Tensor& target) {
  DTR_CHECK(input.defined() && target.defined() && input.shape() == target.shape(), ValueError,
            "{}: using a target size ({}) that is different to the input size ({}) is not allowed",
            fn, target.defined() ? shape_str(target.shape()) : "undefined",
            input.defined() ? shape_str(input.shape()) : "undefined");
}
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

// ---- losses -------------------------------------------------------------------------------

Tensor mse_loss(const Tensor& input, const Tensor& target, const MSELossFuncOptions& o) {
  return dtr::mse_loss(input, target, o.reduction().name());
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const L1LossFuncOptions& o) {
  return reduce(dtr::abs(input - target), o.reduction());
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossFuncOptions& o) {
  return dtr::nll_loss(input, target, o.ignore_index(), o.reduction().name());
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyFuncOptions& o) {
  const double eps = o.label_smoothing();
  DTR_CHECK(eps >= 0.0 && eps <= 1.0, ValueError,
            "cross_entropy: label_smoothing must be between 0.0 and 1.0, got {}", eps);
  if (eps == 0.0) return dtr::cross_entropy(input, target, o.ignore_index(), o.reduction().name());
  DTR_CHECK(input.defined() && input.dim() >= 2, ValueError,
            "cross_entropy: label smoothing expects input (N, C) or (N, C, d...), got {}",
            input.defined() ? shape_str(input.shape()) : "undefined");
  const Tensor lp = dtr::log_softmax(input, 1);
  const Tensor nll = dtr::nll_loss(lp, target, o.ignore_index(), o.reduction().name());
  // -Σ_c log p_c per position, zero where the target is ignored.
  const Tensor kept = target != Scalar(o.ignore_index());
  Tensor smooth = -dtr::sum(lp, {1});
  smooth = dtr::where(kept, smooth, dtr::zeros_like(smooth));
  switch (o.reduction().get()) {
    case Reduction::None:
      break;
    case Reduction::Sum:
      smooth = dtr::sum(smooth);
      break;
    case Reduction::Mean:
      smooth = dtr::sum(smooth) / dtr::sum(kept.to(smooth.dtype()));
      break;
  }
  const double classes = double(input.size(1));
  return nll * (1.0 - eps) + smooth * (eps / classes);
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const BinaryCrossEntropyFuncOptions& o) {
  check_same_shape("binary_cross_entropy", input, target);
  // PyTorch clamps each log at -100 so that 0 and 1 give finite losses.
  const Tensor log_x = dtr::clamp(dtr::log(input), -100.0, std::nullopt);
  const Tensor log_1mx = dtr::clamp(dtr::log(1.0 - input), -100.0, std::nullopt);
  Tensor loss = (target - 1.0) * log_1mx - target * log_x;
  if (o.weight().defined()) loss = loss * o.weight();
  return reduce(loss, o.reduction());
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BinaryCrossEntropyWithLogitsFuncOptions& o) {
  check_same_shape("binary_cross_entropy_with_logits", input, target);
  // log(1 + exp(-x)) computed as max_val + log(exp(-max_val) + exp(-x - max_val)),
  // max_val = max(-x, 0), which never overflows.
  const Tensor max_val = dtr::clamp(-input, 0.0, std::nullopt);
  const Tensor lse = dtr::log(dtr::exp(-max_val) + dtr::exp(-input - max_val));
  Tensor loss = (1.0 - target) * input;
  if (o.pos_weight().defined()) {
    const Tensor log_weight = (o.pos_weight() - 1.0) * target + 1.0;
    loss = loss + log_weight * (lse + max_val);
  } else {
    loss = loss + max_val + lse;
  }
  if (o.weight().defined()) loss = loss * o.weight();
  return reduce(loss, o.reduction());
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1LossFuncOptions& o) {
  const double beta = o.beta();
  DTR_CHECK(beta >= 0.0, ValueError, "smooth_l1_loss: beta must be non-negative, got {}", beta);
  const Tensor d = dtr::abs(input - target);
  if (beta == 0.0) return reduce(d, o.reduction());
  const Tensor loss = dtr::where(d < beta, d * d * 0.5 / beta, d - 0.5 * beta);
  return reduce(loss, o.reduction());
}

}  // namespace dtr::nn::functional
