#include "eager/nn/layers.h"

#include <cmath>

#include "eager/autograd.h"
#include "eager/nn/functional.h"
#include "eager/nn/init.h"
#include "eager/ops.h"

namespace dtr::nn {

namespace {
TensorOptions plain(const TensorOptions& o) { return TensorOptions(o.dtype_).device(o.device_); }

/// The argument checks of Conv2d and ConvTranspose2d (ValueError).
void check_conv_args(std::string_view layer, int64_t in, int64_t out, Pair2 k, Pair2 s, Pair2 p,
                     Pair2 d, int64_t g) {
  DTR_CHECK(g > 0, ValueError, "{}: groups must be a positive integer, got {}", layer, g);
  DTR_CHECK(in % g == 0, ValueError, "{}: in_channels ({}) must be divisible by groups ({})", layer,
            in, g);
  DTR_CHECK(out % g == 0, ValueError, "{}: out_channels ({}) must be divisible by groups ({})",
            layer, out, g);
  DTR_CHECK(k.h > 0 && k.w > 0 && s.h > 0 && s.w > 0 && d.h > 0 && d.w > 0 && p.h >= 0 && p.w >= 0,
            ValueError,
            "{}: kernel_size ({}, {}), stride ({}, {}) and dilation ({}, {}) must be positive "
            "and padding ({}, {}) non-negative",
            layer, k.h, k.w, s.h, s.w, d.h, d.w, p.h, p.w);
}

/// A convolution's weight of `wshape`, kaiming_uniform(a=sqrt(5)), and its
/// bias (out) uniform in ±1/sqrt(fan_in), as torch.nn's _ConvNd.reset_parameters.
void init_conv(Module& m, const std::vector<int64_t>& wshape, int64_t out, bool with_bias,
               const TensorOptions& opts, Tensor& weight, Tensor& bias) {
  weight = m.register_parameter("weight", init::kaiming_uniform(wshape, std::sqrt(5.0), opts));
  if (with_bias) {
    const int64_t fan = init::fan_in(wshape);
    const double bound = fan > 0 ? 1.0 / std::sqrt(double(fan)) : 0.0;
    bias = m.register_parameter("bias", init::uniform({out}, -bound, bound, opts));
  }
}
}  // namespace

// ---- Linear ---------------------------------------------------------------------

LinearImpl::LinearImpl(const LinearOptions& o, TensorOptions opts) : UnaryModule("Linear"), options(o) {
  const int64_t in = o.in_features(), out = o.out_features();
  DTR_CHECK(in >= 0 && out >= 0, ValueError,
            "Linear: in_features and out_features must be non-negative, got {} and {}", in, out);
  opts = plain(opts);
  weight = register_parameter("weight", init::kaiming_uniform({out, in}, std::sqrt(5.0), opts));
  if (o.bias()) {
    const double bound = in > 0 ? 1.0 / std::sqrt(double(in)) : 0.0;
    bias = register_parameter("bias", init::uniform({out}, -bound, bound, opts));
  }
}

Tensor LinearImpl::forward(const Tensor& x) { return linear(x, weight, bias); }

// ---- Conv2d ---------------------------------------------------------------------

Conv2dImpl::Conv2dImpl(const Conv2dOptions& o, TensorOptions opts) : UnaryModule("Conv2d"), options(o) {
  const int64_t in = o.in_channels(), out = o.out_channels(), g = o.groups();
  const Pair2 k = o.kernel_size();
  check_conv_args("Conv2d", in, out, k, o.stride(), o.padding(), o.dilation(), g);
  init_conv(*this, {out, in / g, k.h, k.w}, out, o.bias(), plain(opts), weight, bias);
}

Tensor Conv2dImpl::forward(const Tensor& x) {
  const auto& o = options;
  return conv2d(x, weight, bias, {o.stride().h, o.stride().w}, {o.padding().h, o.padding().w},
                {o.dilation().h, o.dilation().w}, o.groups());
}

// ---- ConvTranspose2d ------------------------------------------------------------

ConvTranspose2dImpl::ConvTranspose2dImpl(const ConvTranspose2dOptions& o, TensorOptions opts)
    : UnaryModule("ConvTranspose2d"), options(o) {
  const int64_t in = o.in_channels(), out = o.out_channels(), g = o.groups();
  const Pair2 k = o.kernel_size(), s = o.stride(), d = o.dilation(), op = o.output_padding();
  check_conv_args("ConvTranspose2d", in, out, k, s, o.padding(), d, g);
  DTR_CHECK(op.h >= 0 && op.w >= 0 && (op.h < s.h || op.h < d.h) && (op.w < s.w || op.w < d.w),
            ValueError,
            "ConvTranspose2d: output_padding ({}, {}) must be non-negative and smaller than either "
            "stride ({}, {}) or dilation ({}, {})",
            op.h, op.w, s.h, s.w, d.h, d.w);
  // PyTorch's fan_in of the transposed weight (in, out/groups, kH, kW) is
  // size(1) * kH * kW, as for any weight.
  init_conv(*this, {in, out / g, k.h, k.w}, out, o.bias(), plain(opts), weight, bias);
}

Tensor ConvTranspose2dImpl::forward(const Tensor& x) {
  const auto& o = options;
  return conv_transpose2d(x, weight, bias, {o.stride().h, o.stride().w}, {o.padding().h, o.padding().w},
                          {o.output_padding().h, o.output_padding().w}, o.groups(),
                          {o.dilation().h, o.dilation().w});
}

// ---- BatchNorm2d ----------------------------------------------------------------

BatchNorm2dImpl::BatchNorm2dImpl(const BatchNorm2dOptions& o, TensorOptions opts)
    : UnaryModule("BatchNorm2d"), options(o) {
  const int64_t n = o.num_features();
  DTR_CHECK(n > 0, ValueError, "BatchNorm2d: num_features must be positive, got {}", n);
  opts = plain(opts);
  if (o.affine()) {
    weight = register_parameter("weight", init::constant({n}, 1.0, opts));
    bias = register_parameter("bias", init::constant({n}, 0.0, opts));
  }
  if (o.track_running_stats()) {
    // Buffers are state, not lineage: fresh constants (Note [what may be evicted]).
    running_mean = register_buffer("running_mean", init::constant({n}, 0.0, opts));
    running_var = register_buffer("running_var", init::constant({n}, 1.0, opts));
    num_batches_tracked =
        register_buffer("num_batches_tracked", init::constant({}, 0.0, kInt64));
  }
}

Tensor BatchNorm2dImpl::forward(const Tensor& x) {
  DTR_CHECK(x.defined() && x.dim() == 4, ValueError,
            "BatchNorm2d: expected 4D input (got {}D input of shape {})", x.defined() ? x.dim() : 0,
            x.defined() ? shape_str(x.shape()) : "undefined");
  DTR_CHECK(x.size(1) == options.num_features(), ValueError,
            "BatchNorm2d: expected input with {} channels, got shape {}", options.num_features(),
            shape_str(x.shape()));
  const auto& momentum = options.momentum();
  const bool track = options.track_running_stats();
  double factor = momentum.value_or(0.0);
  if (is_training() && track) {
    NoGradGuard no_grad;
    num_batches_tracked.add_(1);
    // momentum=None: cumulative moving average (torch.nn.modules.batchnorm).
    if (!momentum) factor = 1.0 / double(num_batches_tracked.item<int64_t>());
  }
  // Batch statistics in training mode, or whenever there are no running ones.
  const bool use_batch_stats = is_training() || !track;
  return batch_norm(x, running_mean, running_var, weight, bias, use_batch_stats, factor, options.eps());
}

// ---- LayerNorm ------------------------------------------------------------------

LayerNormImpl::LayerNormImpl(const LayerNormOptions& o, TensorOptions opts)
    : UnaryModule("LayerNorm"), options(o) {
  opts = plain(opts);
  if (o.elementwise_affine()) {
    weight = register_parameter("weight", init::constant(o.normalized_shape(), 1.0, opts));
    if (o.bias()) bias = register_parameter("bias", init::constant(o.normalized_shape(), 0.0, opts));
  }
}

Tensor LayerNormImpl::forward(const Tensor& x) {
  return layer_norm(x, options.normalized_shape(), weight, bias, options.eps());
}

// ---- GroupNorm ------------------------------------------------------------------

GroupNormImpl::GroupNormImpl(const GroupNormOptions& o, TensorOptions opts)
    : UnaryModule("GroupNorm"), options(o) {
  const int64_t g = o.num_groups(), c = o.num_channels();
  DTR_CHECK(g > 0 && c % g == 0, ValueError,
            "GroupNorm: num_channels ({}) must be divisible by num_groups ({}), a positive number", c,
            g);
  opts = plain(opts);
  if (o.affine()) {
    weight = register_parameter("weight", init::constant({c}, 1.0, opts));
    bias = register_parameter("bias", init::constant({c}, 0.0, opts));
  }
}

Tensor GroupNormImpl::forward(const Tensor& x) {
  return group_norm(x, options.num_groups(), weight, bias, options.eps());
}

// ---- RMSNorm --------------------------------------------------------------------

RMSNormImpl::RMSNormImpl(const RMSNormOptions& o, TensorOptions opts) : UnaryModule("RMSNorm"), options(o) {
  if (o.elementwise_affine())
    weight = register_parameter("weight", init::constant(o.normalized_shape(), 1.0, plain(opts)));
}

Tensor RMSNormImpl::forward(const Tensor& x) {
  return rms_norm(x, options.normalized_shape(), weight, options.eps());
}

// ---- Embedding ------------------------------------------------------------------

EmbeddingImpl::EmbeddingImpl(const EmbeddingOptions& o, TensorOptions opts)
    : UnaryModule("Embedding"), options(o) {
  const int64_t n = o.num_embeddings(), d = o.embedding_dim();
  DTR_CHECK(n >= 0 && d >= 0, ValueError,
            "Embedding: num_embeddings and embedding_dim must be non-negative, got {} and {}", n, d);
  weight = register_parameter("weight", init::normal({n, d}, 0.0, 1.0, plain(opts)));
}

Tensor EmbeddingImpl::forward(const Tensor& indices) { return embedding(weight, indices); }

// ---- Dropout, activations -------------------------------------------------------

namespace {
void check_p(std::string_view layer, double p) {
  DTR_CHECK(p >= 0.0 && p <= 1.0, ValueError,
            "{}: dropout probability has to be between 0 and 1, but got {}", layer, p);
}
}  // namespace

DropoutImpl::DropoutImpl(const DropoutOptions& o) : UnaryModule("Dropout"), options(o) {
  check_p("Dropout", o.p());
}

Tensor DropoutImpl::forward(const Tensor& x) { return dropout(x, options.p(), is_training()); }

Dropout2dImpl::Dropout2dImpl(const Dropout2dOptions& o) : UnaryModule("Dropout2d"), options(o) {
  check_p("Dropout2d", o.p());
}

Tensor Dropout2dImpl::forward(const Tensor& x) { return dropout2d(x, options.p(), is_training()); }

// ---- Upsample -------------------------------------------------------------------

UpsampleImpl::UpsampleImpl(const UpsampleOptions& o) : UnaryModule("Upsample"), options(o) {
  const bool has_size = o.size().has_value(), has_scale = o.scale_factor().has_value();
  DTR_CHECK(has_size != has_scale, ValueError, "Upsample: {} of size or scale_factor should be defined",
            has_size ? "only one" : "either");
  DTR_CHECK(!(std::holds_alternative<enumtype::kNearest>(o.mode()) && o.align_corners().has_value()),
            ValueError, "Upsample: align_corners option can only be set with the interpolating modes");
}

namespace {
UpsampleOptions upsample_options(std::vector<int64_t> size, std::vector<double> scale,
                                 const std::string& mode, std::optional<bool> align_corners) {
  DTR_CHECK(mode == "nearest" || mode == "bilinear", ValueError,
            "Upsample: mode must be 'nearest' or 'bilinear', got '{}'", mode);
  UpsampleOptions o;
  if (!size.empty()) o.size(std::move(size));
  if (!scale.empty()) o.scale_factor(std::move(scale));
  if (mode == "bilinear") o.mode(enumtype::kBilinear{});
  return o.align_corners(align_corners);
}
}  // namespace

UpsampleImpl::UpsampleImpl(std::vector<int64_t> size, std::vector<double> scale_factor,
                           const std::string& mode, std::optional<bool> align_corners)
    : UpsampleImpl(upsample_options(std::move(size), std::move(scale_factor), mode, align_corners)) {}

Tensor UpsampleImpl::forward(const Tensor& x) {
  return interpolate(x, options.size().value_or(std::vector<int64_t>{}),
                     options.scale_factor().value_or(std::vector<double>{}), enum_name(options.mode()),
                     options.align_corners());
}

Tensor ReLUImpl::forward(const Tensor& x) { return relu(x); }

Tensor LeakyReLUImpl::forward(const Tensor& x) {
  return functional::leaky_relu(x, functional::LeakyReLUFuncOptions().negative_slope(options.negative_slope()));
}

GELUImpl::GELUImpl(const GELUOptions& o) : UnaryModule("GELU"), options(o) {
  DTR_CHECK(o.approximate() == "none" || o.approximate() == "tanh", ValueError,
            "GELU: approximate must be 'none' or 'tanh', got '{}'", o.approximate());
}

Tensor GELUImpl::forward(const Tensor& x) { return gelu(x, options.approximate()); }

Tensor SiLUImpl::forward(const Tensor& x) { return silu(x); }
Tensor TanhImpl::forward(const Tensor& x) { return tanh(x); }
Tensor SigmoidImpl::forward(const Tensor& x) { return sigmoid(x); }
Tensor SoftmaxImpl::forward(const Tensor& x) { return softmax(x, options.dim()); }
Tensor LogSoftmaxImpl::forward(const Tensor& x) { return log_softmax(x, options.dim()); }

HardtanhImpl::HardtanhImpl(const HardtanhOptions& o) : HardtanhImpl("Hardtanh", o) {}

HardtanhImpl::HardtanhImpl(std::string name, const HardtanhOptions& o)
    : UnaryModule(std::move(name)), options(o) {
  DTR_CHECK(o.max_val() >= o.min_val(), ValueError, "{}: max_val ({}) must be at least min_val ({})",
            this->name(), o.max_val(), o.min_val());
}

Tensor HardtanhImpl::forward(const Tensor& x) { return clamp(x, options.min_val(), options.max_val()); }

ReLU6Impl::ReLU6Impl(const ReLU6Options& o)
    : HardtanhImpl("ReLU6", HardtanhOptions().min_val(0.0).max_val(6.0).inplace(o.inplace())) {}

// ---- pooling, Flatten, Functional ---------------------------------------------

Tensor MaxPool2dImpl::forward(const Tensor& x) {
  const auto& o = options;
  return max_pool2d(x, {o.kernel_size().h, o.kernel_size().w}, {o.stride().h, o.stride().w},
                    {o.padding().h, o.padding().w});
}

Tensor AvgPool2dImpl::forward(const Tensor& x) {
  const auto& o = options;
  return avg_pool2d(x, {o.kernel_size().h, o.kernel_size().w}, {o.stride().h, o.stride().w},
                    {o.padding().h, o.padding().w});
}

Tensor AdaptiveAvgPool2dImpl::forward(const Tensor& x) {
  return adaptive_avg_pool2d(x, {options.output_size().h, options.output_size().w});
}

Tensor FlattenImpl::forward(const Tensor& x) { return flatten(x, options.start_dim(), options.end_dim()); }

FunctionalImpl::FunctionalImpl(Function fn) : UnaryModule("Functional"), fn_(std::move(fn)) {
  DTR_CHECK(fn_ != nullptr, ValueError, "Functional: the function is empty");
}

Tensor FunctionalImpl::forward(const Tensor& x) { return fn_(x); }

}  // namespace dtr::nn
