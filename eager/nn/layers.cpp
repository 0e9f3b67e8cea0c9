#include "eager/nn/layers.h"

#include <cmath>

#include "eager/autograd.h"
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

Linear::Linear(int64_t in, int64_t out, bool with_bias, TensorOptions opts)
    : UnaryModule("Linear"), in_features(in), out_features(out) {
  DTR_CHECK(in >= 0 && out >= 0, ValueError,
            "Linear: in_features and out_features must be non-negative, got {} and {}", in, out);
  opts = plain(opts);
  weight = register_parameter("weight", init::kaiming_uniform({out, in}, std::sqrt(5.0), opts));
  if (with_bias) {
    const double bound = in > 0 ? 1.0 / std::sqrt(double(in)) : 0.0;
    bias = register_parameter("bias", init::uniform({out}, -bound, bound, opts));
  }
}

Tensor Linear::forward(const Tensor& x) { return linear(x, weight, bias); }

// ---- Conv2d ---------------------------------------------------------------------

Conv2d::Conv2d(int64_t in, int64_t out, Pair2 k, Pair2 s, Pair2 p, Pair2 d, int64_t g,
               bool with_bias, TensorOptions opts)
    : UnaryModule("Conv2d"),
      in_channels(in),
      out_channels(out),
      kernel_size(k),
      stride(s),
      padding(p),
      dilation(d),
      groups(g) {
  check_conv_args("Conv2d", in, out, k, s, p, d, g);
  init_conv(*this, {out, in / g, k.h, k.w}, out, with_bias, plain(opts), weight, bias);
}

Tensor Conv2d::forward(const Tensor& x) {
  return conv2d(x, weight, bias, {stride.h, stride.w}, {padding.h, padding.w},
                {dilation.h, dilation.w}, groups);
}

// ---- ConvTranspose2d ------------------------------------------------------------

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, Pair2 k, Pair2 s, Pair2 p, Pair2 op,
                                 int64_t g, bool with_bias, Pair2 d, TensorOptions opts)
    : UnaryModule("ConvTranspose2d"),
      in_channels(in),
      out_channels(out),
      kernel_size(k),
      stride(s),
      padding(p),
      output_padding(op),
      groups(g),
      dilation(d) {
  check_conv_args("ConvTranspose2d", in, out, k, s, p, d, g);
  DTR_CHECK(op.h >= 0 && op.w >= 0 && (op.h < s.h || op.h < d.h) && (op.w < s.w || op.w < d.w),
            ValueError,
            "ConvTranspose2d: output_padding ({}, {}) must be non-negative and smaller than either "
            "stride ({}, {}) or dilation ({}, {})",
            op.h, op.w, s.h, s.w, d.h, d.w);
  // PyTorch's fan_in of the transposed weight (in, out/groups, kH, kW) is
  // size(1) * kH * kW, as for any weight.
  init_conv(*this, {in, out / g, k.h, k.w}, out, with_bias, plain(opts), weight, bias);
}

Tensor ConvTranspose2d::forward(const Tensor& x) {
  return conv_transpose2d(x, weight, bias, {stride.h, stride.w}, {padding.h, padding.w},
                          {output_padding.h, output_padding.w}, groups, {dilation.h, dilation.w});
}

// ---- BatchNorm2d ----------------------------------------------------------------

BatchNorm2d::BatchNorm2d(int64_t n, double eps_, std::optional<double> momentum_, bool affine_,
                         bool track, TensorOptions opts)
    : UnaryModule("BatchNorm2d"),
      num_features(n),
      eps(eps_),
      momentum(momentum_),
      affine(affine_),
      track_running_stats(track) {
  DTR_CHECK(n > 0, ValueError, "BatchNorm2d: num_features must be positive, got {}", n);
  opts = plain(opts);
  if (affine) {
    weight = register_parameter("weight", init::constant({n}, 1.0, opts));
    bias = register_parameter("bias", init::constant({n}, 0.0, opts));
  }
  if (track) {
    // Buffers are state, not lineage: fresh constants (Note [what may be evicted]).
    running_mean = register_buffer("running_mean", init::constant({n}, 0.0, opts));
    running_var = register_buffer("running_var", init::constant({n}, 1.0, opts));
    num_batches_tracked =
        register_buffer("num_batches_tracked", init::constant({}, 0.0, kInt64));
  }
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  DTR_CHECK(x.defined() && x.dim() == 4, ValueError,
            "BatchNorm2d: expected 4D input (got {}D input of shape {})", x.defined() ? x.dim() : 0,
            x.defined() ? shape_str(x.shape()) : "undefined");
  DTR_CHECK(x.size(1) == num_features, ValueError,
            "BatchNorm2d: expected input with {} channels, got shape {}", num_features,
            shape_str(x.shape()));
  double factor = momentum.value_or(0.0);
  if (is_training() && track_running_stats) {
    NoGradGuard no_grad;
    num_batches_tracked.add_(1);
    // momentum=None: cumulative moving average (torch.nn.modules.batchnorm).
    if (!momentum) factor = 1.0 / double(num_batches_tracked.item<int64_t>());
  }
  // Batch statistics in training mode, or whenever there are no running ones.
  const bool use_batch_stats = is_training() || !track_running_stats;
  return batch_norm(x, running_mean, running_var, weight, bias, use_batch_stats, factor, eps);
}

// ---- LayerNorm ------------------------------------------------------------------

LayerNorm::LayerNorm(std::vector<int64_t> shape, double eps_, bool affine, bool with_bias,
                     TensorOptions opts)
    : UnaryModule("LayerNorm"), normalized_shape(std::move(shape)), eps(eps_) {
  opts = plain(opts);
  if (affine) {
    weight = register_parameter("weight", init::constant(normalized_shape, 1.0, opts));
    if (with_bias) bias = register_parameter("bias", init::constant(normalized_shape, 0.0, opts));
  }
}

Tensor LayerNorm::forward(const Tensor& x) { return layer_norm(x, normalized_shape, weight, bias, eps); }

// ---- GroupNorm ------------------------------------------------------------------

GroupNorm::GroupNorm(int64_t g, int64_t c, double eps_, bool affine_, TensorOptions opts)
    : UnaryModule("GroupNorm"), num_groups(g), num_channels(c), eps(eps_), affine(affine_) {
  DTR_CHECK(g > 0 && c % g == 0, ValueError,
            "GroupNorm: num_channels ({}) must be divisible by num_groups ({}), a positive number", c,
            g);
  opts = plain(opts);
  if (affine) {
    weight = register_parameter("weight", init::constant({c}, 1.0, opts));
    bias = register_parameter("bias", init::constant({c}, 0.0, opts));
  }
}

Tensor GroupNorm::forward(const Tensor& x) { return group_norm(x, num_groups, weight, bias, eps); }

// ---- RMSNorm --------------------------------------------------------------------

RMSNorm::RMSNorm(std::vector<int64_t> shape, std::optional<double> eps_, bool affine, TensorOptions opts)
    : UnaryModule("RMSNorm"), normalized_shape(std::move(shape)), eps(eps_) {
  if (affine) weight = register_parameter("weight", init::constant(normalized_shape, 1.0, plain(opts)));
}

Tensor RMSNorm::forward(const Tensor& x) { return rms_norm(x, normalized_shape, weight, eps); }

// ---- Embedding ------------------------------------------------------------------

Embedding::Embedding(int64_t n, int64_t d, TensorOptions opts)
    : UnaryModule("Embedding"), num_embeddings(n), embedding_dim(d) {
  DTR_CHECK(n >= 0 && d >= 0, ValueError,
            "Embedding: num_embeddings and embedding_dim must be non-negative, got {} and {}", n, d);
  weight = register_parameter("weight", init::normal({n, d}, 0.0, 1.0, plain(opts)));
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(weight, indices); }

// ---- Dropout, activations -------------------------------------------------------

Dropout::Dropout(double p_) : UnaryModule("Dropout"), p(p_) {
  DTR_CHECK(p >= 0.0 && p <= 1.0, ValueError,
            "Dropout: dropout probability has to be between 0 and 1, but got {}", p);
}

Tensor Dropout::forward(const Tensor& x) { return dropout(x, p, is_training()); }

Dropout2d::Dropout2d(double p_) : UnaryModule("Dropout2d"), p(p_) {
  DTR_CHECK(p >= 0.0 && p <= 1.0, ValueError,
            "Dropout2d: dropout probability has to be between 0 and 1, but got {}", p);
}

Tensor Dropout2d::forward(const Tensor& x) { return dropout2d(x, p, is_training()); }

// ---- Upsample -------------------------------------------------------------------

Upsample::Upsample(std::vector<int64_t> size_, std::vector<double> scale_factor_, std::string mode_,
                   std::optional<bool> align_corners_)
    : UnaryModule("Upsample"),
      size(std::move(size_)),
      scale_factor(std::move(scale_factor_)),
      mode(std::move(mode_)),
      align_corners(align_corners_) {
  DTR_CHECK(size.empty() != scale_factor.empty(), ValueError,
            "Upsample: {} of size or scale_factor should be defined", size.empty() ? "either" : "only one");
  DTR_CHECK(mode == "nearest" || mode == "bilinear", ValueError,
            "Upsample: mode must be 'nearest' or 'bilinear', got '{}'", mode);
  DTR_CHECK(!(mode == "nearest" && align_corners.has_value()), ValueError,
            "Upsample: align_corners option can only be set with the interpolating modes");
}

Tensor Upsample::forward(const Tensor& x) {
  return interpolate(x, size, scale_factor, mode, align_corners);
}

Tensor ReLU::forward(const Tensor& x) { return relu(x); }

GELU::GELU(std::string approx) : UnaryModule("GELU"), approximate(std::move(approx)) {
  DTR_CHECK(approximate == "none" || approximate == "tanh", ValueError,
            "GELU: approximate must be 'none' or 'tanh', got '{}'", approximate);
}

Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate); }

// ---- activations, pooling, Flatten ---------------------------------------------

Tensor SiLU::forward(const Tensor& x) { return silu(x); }
Tensor Tanh::forward(const Tensor& x) { return tanh(x); }
Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }

MaxPool2d::MaxPool2d(Pair2 k, std::optional<Pair2> s, Pair2 p)
    : UnaryModule("MaxPool2d"), kernel_size(k), stride(s.value_or(k)), padding(p) {}

Tensor MaxPool2d::forward(const Tensor& x) {
  return max_pool2d(x, {kernel_size.h, kernel_size.w}, {stride.h, stride.w}, {padding.h, padding.w});
}

AvgPool2d::AvgPool2d(Pair2 k, std::optional<Pair2> s, Pair2 p)
    : UnaryModule("AvgPool2d"), kernel_size(k), stride(s.value_or(k)), padding(p) {}

Tensor AvgPool2d::forward(const Tensor& x) {
  return avg_pool2d(x, {kernel_size.h, kernel_size.w}, {stride.h, stride.w}, {padding.h, padding.w});
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Pair2 o) : UnaryModule("AdaptiveAvgPool2d"), output_size(o) {}

Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  return adaptive_avg_pool2d(x, {output_size.h, output_size.w});
}

Flatten::Flatten(int64_t s, int64_t e) : UnaryModule("Flatten"), start_dim(s), end_dim(e) {}

Tensor Flatten::forward(const Tensor& x) { return flatten(x, start_dim, end_dim); }

}  // namespace dtr::nn

namespace dtr::nn {

Hardtanh::Hardtanh(double lo, double hi) : Hardtanh("Hardtanh", lo, hi) {}

Hardtanh::Hardtanh(std::string name, double lo, double hi)
    : UnaryModule(std::move(name)), min_val(lo), max_val(hi) {
  DTR_CHECK(max_val >= min_val, ValueError, "{}: max_val ({}) must be at least min_val ({})", this->name(),
            max_val, min_val);
}

Tensor Hardtanh::forward(const Tensor& x) { return clamp(x, min_val, max_val); }

ReLU6::ReLU6() : Hardtanh("ReLU6", 0.0, 6.0) {}

}  // namespace dtr::nn
