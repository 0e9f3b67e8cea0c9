// Layers of torch.nn, in libtorch's form: each layer is `XImpl` (the
// module) with its holder `X` (TORCH_MODULE), built from an `XOptions`
// (libtorch's options, with PyTorch's defaults) or from PyTorch's
// positional arguments:
//
//   nn::Conv2d conv(nn::Conv2dOptions(1, 10, 5).stride(2).bias(false));
//   nn::Conv2d same(1, 10, 5, /*stride=*/2, 0, 1, 1, /*bias=*/false);
//   nn::Linear fc(784, 64);
//   Tensor y = fc(x);                 // fc->forward(x)
//
// Layers: Linear, Conv2d, ConvTranspose2d, BatchNorm2d, LayerNorm,
// GroupNorm, RMSNorm, Embedding, Dropout, Dropout2d, Upsample, ReLU, ReLU6,
// LeakyReLU, GELU, SiLU, Tanh, Sigmoid, Hardtanh, Softmax, LogSoftmax,
// MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Flatten, Identity, Functional.
// Constructors end with TensorOptions (PyTorch's dtype=/device=);
// parameters are initialized like PyTorch from the global seed
// (dtr::manual_seed). `options` holds what the layer was built with.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "eager/nn/enumtype.h"
#include "eager/nn/module.h"
#include "eager/nn/options.h"

namespace dtr::nn {

// ---- Linear -----------------------------------------------------------------------

/// torch::nn::LinearOptions(in_features, out_features); bias true.
struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features)
      : in_features_(in_features), out_features_(out_features) {}
  DTR_ARG(int64_t, in_features);
  DTR_ARG(int64_t, out_features);
  DTR_ARG(bool, bias) = true;
};

/// y = x W^T + b (torch.nn.Linear). weight (out, in), bias (out);
/// kaiming_uniform(a=sqrt(5)) weight, bias uniform in ±1/sqrt(in).
/// forward: x (*, in) → (*, out). Shape errors come from dtr::linear;
/// ValueError for negative sizes.
class LinearImpl : public UnaryModule {
 public:
  explicit LinearImpl(const LinearOptions& options, TensorOptions opts = {});
  LinearImpl(int64_t in_features, int64_t out_features, bool bias = true, TensorOptions opts = {})
      : LinearImpl(LinearOptions(in_features, out_features).bias(bias), opts) {}
  Tensor forward(const Tensor& x) override;

  LinearOptions options;
  Tensor weight, bias;  // bias undefined when bias=false
};
DTR_MODULE(Linear);

// ---- convolutions -------------------------------------------------------------------

/// torch::nn::Conv2dOptions(in_channels, out_channels, kernel_size);
/// stride 1, padding 0, dilation 1, groups 1, bias true (padding_mode zeros).
struct Conv2dOptions {
  Conv2dOptions(int64_t in_channels, int64_t out_channels, Pair2 kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  DTR_ARG(int64_t, in_channels);
  DTR_ARG(int64_t, out_channels);
  DTR_ARG(Pair2, kernel_size);
  DTR_ARG(Pair2, stride) = 1;
  DTR_ARG(Pair2, padding) = 0;
  DTR_ARG(Pair2, dilation) = 1;
  DTR_ARG(int64_t, groups) = 1;
  DTR_ARG(bool, bias) = true;
};

/// 2-D convolution (torch.nn.Conv2d, padding_mode="zeros"). weight
/// (out, in/groups, kH, kW), bias (out). forward: x (N, in, H, W) →
/// (N, out, H', W'). Throws ValueError when in/out are not divisible by
/// groups, for non-positive kernel_size/stride/dilation/groups or negative
/// padding.
class Conv2dImpl : public UnaryModule {
 public:
  explicit Conv2dImpl(const Conv2dOptions& options, TensorOptions opts = {});
  Conv2dImpl(int64_t in_channels, int64_t out_channels, Pair2 kernel_size, Pair2 stride = 1,
             Pair2 padding = 0, Pair2 dilation = 1, int64_t groups = 1, bool bias = true,
             TensorOptions opts = {})
      : Conv2dImpl(Conv2dOptions(in_channels, out_channels, kernel_size)
                       .stride(stride)
                       .padding(padding)
                       .dilation(dilation)
                       .groups(groups)
                       .bias(bias),
                   opts) {}
  Tensor forward(const Tensor& x) override;

  Conv2dOptions options;
  Tensor weight, bias;
};
DTR_MODULE(Conv2d);

/// torch::nn::ConvTranspose2dOptions(in_channels, out_channels,
/// kernel_size); stride 1, padding 0, output_padding 0, groups 1, bias true,
/// dilation 1.
struct ConvTranspose2dOptions {
  ConvTranspose2dOptions(int64_t in_channels, int64_t out_channels, Pair2 kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  DTR_ARG(int64_t, in_channels);
  DTR_ARG(int64_t, out_channels);
  DTR_ARG(Pair2, kernel_size);
  DTR_ARG(Pair2, stride) = 1;
  DTR_ARG(Pair2, padding) = 0;
  DTR_ARG(Pair2, output_padding) = 0;
  DTR_ARG(int64_t, groups) = 1;
  DTR_ARG(bool, bias) = true;
  DTR_ARG(Pair2, dilation) = 1;
};

/// Transposed 2-D convolution (torch.nn.ConvTranspose2d, padding_mode="zeros").
/// weight (in, out/groups, kH, kW) kaiming_uniform(a=sqrt(5)) with PyTorch's
/// fan_in of that shape ((out/groups) * kH * kW), bias (out) uniform in
/// ±1/sqrt(fan_in). forward: x (N, in, H, W) or (in, H, W) → (N, out, H', W')
/// with H' = (H - 1) stride - 2 padding + dilation (kH - 1) + output_padding + 1.
/// Throws ValueError when in/out are not divisible by groups, for
/// non-positive kernel_size/stride/dilation/groups, negative padding, or
/// output_padding not smaller than stride or dilation.
class ConvTranspose2dImpl : public UnaryModule {
 public:
  explicit ConvTranspose2dImpl(const ConvTranspose2dOptions& options, TensorOptions opts = {});
  ConvTranspose2dImpl(int64_t in_channels, int64_t out_channels, Pair2 kernel_size, Pair2 stride = 1,
                      Pair2 padding = 0, Pair2 output_padding = 0, int64_t groups = 1,
                      bool bias = true, Pair2 dilation = 1, TensorOptions opts = {})
      : ConvTranspose2dImpl(ConvTranspose2dOptions(in_channels, out_channels, kernel_size)
                                .stride(stride)
                                .padding(padding)
                                .output_padding(output_padding)
                                .groups(groups)
                                .bias(bias)
                                .dilation(dilation),
                            opts) {}
  Tensor forward(const Tensor& x) override;

  ConvTranspose2dOptions options;
  Tensor weight, bias;
};
DTR_MODULE(ConvTranspose2d);

// ---- normalization ------------------------------------------------------------------

/// torch::nn::BatchNorm2dOptions(num_features); eps 1e-5, momentum 0.1
/// (nullopt: cumulative average), affine true, track_running_stats true.
struct BatchNorm2dOptions {
  BatchNorm2dOptions(int64_t num_features) : num_features_(num_features) {}  // NOLINT
  DTR_ARG(int64_t, num_features);
  DTR_ARG(double, eps) = 1e-5;
  DTR_ARG(std::optional<double>, momentum) = 0.1;
  DTR_ARG(bool, affine) = true;
  DTR_ARG(bool, track_running_stats) = true;
};

/// Batch normalization over (N, C, H, W) (torch.nn.BatchNorm2d). In training
/// mode it normalizes with the batch statistics, increments the int64
/// buffer num_batches_tracked once per forward and updates running_mean /
/// running_var (unbiased variance) through dtr::batch_norm's side-effect op;
/// in eval mode it uses the running statistics. momentum nullopt = cumulative
/// moving average (factor 1/num_batches_tracked). Buffers: running_mean
/// (zeros), running_var (ones), num_batches_tracked; parameters weight
/// (ones), bias (zeros) when affine. Throws ValueError for input that is not
/// 4-D or has the wrong channel count, and for num_features < 1.
class BatchNorm2dImpl : public UnaryModule {
 public:
  explicit BatchNorm2dImpl(const BatchNorm2dOptions& options, TensorOptions opts = {});
  BatchNorm2dImpl(int64_t num_features, double eps, std::optional<double> momentum = 0.1,
                  bool affine = true, bool track_running_stats = true, TensorOptions opts = {})
      : BatchNorm2dImpl(BatchNorm2dOptions(num_features)
                            .eps(eps)
                            .momentum(momentum)
                            .affine(affine)
                            .track_running_stats(track_running_stats),
                        opts) {}
  Tensor forward(const Tensor& x) override;

  BatchNorm2dOptions options;
  Tensor weight, bias;
  Tensor running_mean, running_var, num_batches_tracked;
};
DTR_MODULE(BatchNorm2d);

/// torch::nn::LayerNormOptions(normalized_shape); eps 1e-5,
/// elementwise_affine true, bias true (PyTorch 2.1's bias=).
struct LayerNormOptions {
  LayerNormOptions(std::vector<int64_t> normalized_shape)  // NOLINT
      : normalized_shape_(std::move(normalized_shape)) {}
  DTR_ARG(std::vector<int64_t>, normalized_shape);
  DTR_ARG(double, eps) = 1e-5;
  DTR_ARG(bool, elementwise_affine) = true;
  DTR_ARG(bool, bias) = true;
};

/// Layer normalization over the trailing `normalized_shape` dims
/// (torch.nn.LayerNorm). weight ones, bias zeros when elementwise_affine.
/// Shape errors (ValueError) from dtr::layer_norm.
class LayerNormImpl : public UnaryModule {
 public:
  explicit LayerNormImpl(const LayerNormOptions& options, TensorOptions opts = {});
  LayerNormImpl(std::vector<int64_t> normalized_shape, double eps, bool elementwise_affine = true,
                bool bias = true, TensorOptions opts = {})
      : LayerNormImpl(LayerNormOptions(std::move(normalized_shape))
                          .eps(eps)
                          .elementwise_affine(elementwise_affine)
                          .bias(bias),
                      opts) {}
  Tensor forward(const Tensor& x) override;

  LayerNormOptions options;
  Tensor weight, bias;
};
DTR_MODULE(LayerNorm);

/// torch::nn::GroupNormOptions(num_groups, num_channels); eps 1e-5, affine true.
struct GroupNormOptions {
  GroupNormOptions(int64_t num_groups, int64_t num_channels)
      : num_groups_(num_groups), num_channels_(num_channels) {}
  DTR_ARG(int64_t, num_groups);
  DTR_ARG(int64_t, num_channels);
  DTR_ARG(double, eps) = 1e-5;
  DTR_ARG(bool, affine) = true;
};

/// Group normalization (torch.nn.GroupNorm): dtr::group_norm with
/// num_groups groups over (N, num_channels, *). weight ones, bias zeros
/// (both (num_channels)) when affine. Throws ValueError when num_groups does
/// not divide num_channels (or is not positive).
class GroupNormImpl : public UnaryModule {
 public:
  explicit GroupNormImpl(const GroupNormOptions& options, TensorOptions opts = {});
  GroupNormImpl(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true,
                TensorOptions opts = {})
      : GroupNormImpl(GroupNormOptions(num_groups, num_channels).eps(eps).affine(affine), opts) {}
  Tensor forward(const Tensor& x) override;

  GroupNormOptions options;
  Tensor weight, bias;
};
DTR_MODULE(GroupNorm);

/// torch::nn::RMSNormOptions(normalized_shape); eps nullopt (the dtype's
/// machine epsilon), elementwise_affine true.
struct RMSNormOptions {
  RMSNormOptions(std::vector<int64_t> normalized_shape)  // NOLINT
      : normalized_shape_(std::move(normalized_shape)) {}
  DTR_ARG(std::vector<int64_t>, normalized_shape);
  DTR_ARG(std::optional<double>, eps) = std::nullopt;
  DTR_ARG(bool, elementwise_affine) = true;
};

/// Root-mean-square normalization over the trailing `normalized_shape` dims
/// (torch.nn.RMSNorm, PyTorch 2.4): y = x / sqrt(mean(x^2) + eps) * weight.
/// eps nullopt = torch.finfo(x.dtype).eps; weight ones (of normalized_shape)
/// when elementwise_affine, else undefined. forward: x (*, normalized_shape)
/// → the same shape; ValueError from dtr::rms_norm when x's trailing dims
/// differ from normalized_shape.
class RMSNormImpl : public UnaryModule {
 public:
  explicit RMSNormImpl(const RMSNormOptions& options, TensorOptions opts = {});
  RMSNormImpl(std::vector<int64_t> normalized_shape, std::optional<double> eps,
              bool elementwise_affine = true, TensorOptions opts = {})
      : RMSNormImpl(
            RMSNormOptions(std::move(normalized_shape)).eps(eps).elementwise_affine(elementwise_affine),
            opts) {}
  Tensor forward(const Tensor& x) override;

  RMSNormOptions options;
  Tensor weight;
};
DTR_MODULE(RMSNorm);

// ---- embedding, dropout ---------------------------------------------------------------

/// torch::nn::EmbeddingOptions(num_embeddings, embedding_dim)
/// (padding_idx, max_norm and sparse are not offered).
struct EmbeddingOptions {
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  DTR_ARG(int64_t, num_embeddings);
  DTR_ARG(int64_t, embedding_dim);
};

/// A lookup table (torch.nn.Embedding): weight (num_embeddings,
/// embedding_dim) from N(0, 1). forward: int64 indices (*) → (*, embedding_dim);
/// IndexError for out-of-range indices (from dtr::embedding); ValueError
/// for negative sizes.
class EmbeddingImpl : public UnaryModule {
 public:
  explicit EmbeddingImpl(const EmbeddingOptions& options, TensorOptions opts = {});
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim, TensorOptions opts = {})
      : EmbeddingImpl(EmbeddingOptions(num_embeddings, embedding_dim), opts) {}
  Tensor forward(const Tensor& indices) override;

  EmbeddingOptions options;
  Tensor weight;
};
DTR_MODULE(Embedding);

/// torch::nn::DropoutOptions(p = 0.5); inplace false (accepted, ignored:
/// the result is always a new tensor, which PyTorch's in-place dropout
/// equals in value).
struct DropoutOptions {
  DropoutOptions(double p = 0.5) : p_(p) {}  // NOLINT
  DTR_ARG(double, p);
  DTR_ARG(bool, inplace) = false;
};
using Dropout2dOptions = DropoutOptions;

/// Zeroes elements with probability p in training mode and scales the rest
/// by 1/(1-p); identity in eval mode (torch.nn.Dropout). Throws ValueError
/// for p outside [0, 1].
class DropoutImpl : public UnaryModule {
 public:
  explicit DropoutImpl(const DropoutOptions& options = {});
  explicit DropoutImpl(double p) : DropoutImpl(DropoutOptions(p)) {}
  Tensor forward(const Tensor& x) override;

  DropoutOptions options;
};
DTR_MODULE(Dropout);

/// Zeroes whole channels of (N, C, H, W) with probability p in training
/// mode and scales the rest by 1/(1-p); identity in eval mode
/// (torch.nn.Dropout2d, through dtr::dropout2d). Throws ValueError for p
/// outside [0, 1].
class Dropout2dImpl : public UnaryModule {
 public:
  explicit Dropout2dImpl(const Dropout2dOptions& options = {});
  explicit Dropout2dImpl(double p) : Dropout2dImpl(Dropout2dOptions(p)) {}
  Tensor forward(const Tensor& x) override;

  Dropout2dOptions options;
};
DTR_MODULE(Dropout2d);

// ---- Upsample -------------------------------------------------------------------------

/// torch::nn::UpsampleOptions(): size or scale_factor (exactly one set),
/// mode kNearest (or kBilinear), align_corners unset.
struct UpsampleOptions {
  using mode_t = std::variant<enumtype::kNearest, enumtype::kBilinear>;
  DTR_ARG(std::optional<std::vector<int64_t>>, size) = std::nullopt;
  DTR_ARG(std::optional<std::vector<double>>, scale_factor) = std::nullopt;
  DTR_ARG(mode_t, mode) = enumtype::kNearest{};
  DTR_ARG(std::optional<bool>, align_corners) = std::nullopt;
};

/// torch.nn.Upsample: dtr::interpolate of (N, C, H, W) with one of size and
/// scale_factor, mode "nearest" or "bilinear". Throws ValueError for both
/// or neither, an unknown mode or align_corners with "nearest" (at
/// construction), as interpolate.
class UpsampleImpl : public UnaryModule {
 public:
  explicit UpsampleImpl(const UpsampleOptions& options = {});
  /// PyTorch's positional form; an empty vector stands for None, mode is
  /// "nearest" or "bilinear".
  UpsampleImpl(std::vector<int64_t> size, std::vector<double> scale_factor = {},
               const std::string& mode = "nearest", std::optional<bool> align_corners = std::nullopt);
  Tensor forward(const Tensor& x) override;

  UpsampleOptions options;
};
DTR_MODULE(Upsample);

// ---- activations ------------------------------------------------------------------------

/// torch::nn::ReLUOptions(inplace = false); inplace is accepted and
/// ignored (the result equals the in-place one).
struct ReLUOptions {
  ReLUOptions(bool inplace = false) : inplace_(inplace) {}  // NOLINT
  DTR_ARG(bool, inplace);
};
using ReLU6Options = ReLUOptions;

/// torch.nn.ReLU.
class ReLUImpl : public UnaryModule {
 public:
  explicit ReLUImpl(const ReLUOptions& options = {}) : UnaryModule("ReLU"), options(options) {}
  Tensor forward(const Tensor& x) override;

  ReLUOptions options;
};
DTR_MODULE(ReLU);

/// torch::nn::LeakyReLUOptions(); negative_slope 0.01, inplace false (ignored).
struct LeakyReLUOptions {
  DTR_ARG(double, negative_slope) = 1e-2;
  DTR_ARG(bool, inplace) = false;
};

/// torch.nn.LeakyReLU: x where x >= 0, negative_slope * x elsewhere
/// (dtr::nn::functional::leaky_relu). TypeError for non-floating input.
class LeakyReLUImpl : public UnaryModule {
 public:
  explicit LeakyReLUImpl(const LeakyReLUOptions& options = {})
      : UnaryModule("LeakyReLU"), options(options) {}
  Tensor forward(const Tensor& x) override;

  LeakyReLUOptions options;
};
DTR_MODULE(LeakyReLU);

/// torch::nn::GELUOptions(); approximate "none" (erf) or "tanh".
struct GELUOptions {
  DTR_ARG(std::string, approximate) = "none";
};

/// torch.nn.GELU; ValueError for an approximate other than "none"/"tanh".
class GELUImpl : public UnaryModule {
 public:
  explicit GELUImpl(const GELUOptions& options = {});
  explicit GELUImpl(std::string approximate) : GELUImpl(GELUOptions().approximate(std::move(approximate))) {}
  explicit GELUImpl(const char* approximate) : GELUImpl(std::string(approximate)) {}
  Tensor forward(const Tensor& x) override;

  GELUOptions options;
};
DTR_MODULE(GELU);

/// torch.nn.SiLU: x * sigmoid(x). TypeError for non-floating input.
class SiLUImpl : public UnaryModule {
 public:
  SiLUImpl() : UnaryModule("SiLU") {}
  Tensor forward(const Tensor& x) override;
};
DTR_MODULE(SiLU);

/// torch.nn.Tanh.
class TanhImpl : public UnaryModule {
 public:
  TanhImpl() : UnaryModule("Tanh") {}
  Tensor forward(const Tensor& x) override;
};
DTR_MODULE(Tanh);

/// torch.nn.Sigmoid.
class SigmoidImpl : public UnaryModule {
 public:
  SigmoidImpl() : UnaryModule("Sigmoid") {}
  Tensor forward(const Tensor& x) override;
};
DTR_MODULE(Sigmoid);

/// torch::nn::HardtanhOptions(); min_val -1, max_val 1, inplace false (ignored).
struct HardtanhOptions {
  DTR_ARG(double, min_val) = -1.0;
  DTR_ARG(double, max_val) = 1.0;
  DTR_ARG(bool, inplace) = false;
};

/// clamp(x, min_val, max_val) (torch.nn.Hardtanh). Throws ValueError when
/// max_val < min_val.
class HardtanhImpl : public UnaryModule {
 public:
  explicit HardtanhImpl(const HardtanhOptions& options = {});
  HardtanhImpl(double min_val, double max_val)
      : HardtanhImpl(HardtanhOptions().min_val(min_val).max_val(max_val)) {}
  Tensor forward(const Tensor& x) override;

  HardtanhOptions options;

 protected:
  HardtanhImpl(std::string name, const HardtanhOptions& options);
};
DTR_MODULE(Hardtanh);

/// clamp(x, 0, 6) (torch.nn.ReLU6): a Hardtanh(0, 6) named "ReLU6".
class ReLU6Impl : public HardtanhImpl {
 public:
  explicit ReLU6Impl(const ReLU6Options& options = {});
};
DTR_MODULE(ReLU6);

/// torch::nn::SoftmaxOptions(dim) (also LogSoftmaxOptions).
struct SoftmaxOptions {
  SoftmaxOptions(int64_t dim) : dim_(dim) {}  // NOLINT
  DTR_ARG(int64_t, dim);
};
using LogSoftmaxOptions = SoftmaxOptions;

/// torch.nn.Softmax(dim): dtr::softmax along dim (IndexError for a bad dim).
class SoftmaxImpl : public UnaryModule {
 public:
  explicit SoftmaxImpl(const SoftmaxOptions& options) : UnaryModule("Softmax"), options(options) {}
  explicit SoftmaxImpl(int64_t dim) : SoftmaxImpl(SoftmaxOptions(dim)) {}
  Tensor forward(const Tensor& x) override;

  SoftmaxOptions options;
};
DTR_MODULE(Softmax);

/// torch.nn.LogSoftmax(dim): dtr::log_softmax along dim.
class LogSoftmaxImpl : public UnaryModule {
 public:
  explicit LogSoftmaxImpl(const LogSoftmaxOptions& options)
      : UnaryModule("LogSoftmax"), options(options) {}
  explicit LogSoftmaxImpl(int64_t dim) : LogSoftmaxImpl(LogSoftmaxOptions(dim)) {}
  Tensor forward(const Tensor& x) override;

  LogSoftmaxOptions options;
};
DTR_MODULE(LogSoftmax);

// ---- pooling, Flatten, Identity, Functional -------------------------------------------------

/// torch::nn::MaxPool2dOptions(kernel_size); stride = kernel_size, padding 0
/// (dilation 1 and ceil_mode false, not settable).
struct MaxPool2dOptions {
  MaxPool2dOptions(Pair2 kernel_size)  // NOLINT
      : kernel_size_(kernel_size), stride_(kernel_size) {}
  DTR_ARG(Pair2, kernel_size);
  DTR_ARG(Pair2, stride);
  DTR_ARG(Pair2, padding) = 0;
};
/// torch::nn::AvgPool2dOptions(kernel_size); stride = kernel_size, padding
/// 0 (count_include_pad true, ceil_mode false, not settable).
using AvgPool2dOptions = MaxPool2dOptions;

/// torch.nn.MaxPool2d. forward: x (N, C, H, W) → (N, C, H', W'); errors
/// from dtr::max_pool2d.
class MaxPool2dImpl : public UnaryModule {
 public:
  explicit MaxPool2dImpl(const MaxPool2dOptions& options) : UnaryModule("MaxPool2d"), options(options) {}
  explicit MaxPool2dImpl(Pair2 kernel_size) : MaxPool2dImpl(MaxPool2dOptions(kernel_size)) {}
  MaxPool2dImpl(Pair2 kernel_size, std::optional<Pair2> stride, Pair2 padding = 0)
      : MaxPool2dImpl(MaxPool2dOptions(kernel_size).stride(stride.value_or(kernel_size)).padding(padding)) {}
  Tensor forward(const Tensor& x) override;

  MaxPool2dOptions options;
};
DTR_MODULE(MaxPool2d);

/// torch.nn.AvgPool2d. forward: x (N, C, H, W) → (N, C, H', W'); errors
/// from dtr::avg_pool2d.
class AvgPool2dImpl : public UnaryModule {
 public:
  explicit AvgPool2dImpl(const AvgPool2dOptions& options) : UnaryModule("AvgPool2d"), options(options) {}
  explicit AvgPool2dImpl(Pair2 kernel_size) : AvgPool2dImpl(AvgPool2dOptions(kernel_size)) {}
  AvgPool2dImpl(Pair2 kernel_size, std::optional<Pair2> stride, Pair2 padding = 0)
      : AvgPool2dImpl(AvgPool2dOptions(kernel_size).stride(stride.value_or(kernel_size)).padding(padding)) {}
  Tensor forward(const Tensor& x) override;

  AvgPool2dOptions options;
};
DTR_MODULE(AvgPool2d);

/// torch::nn::AdaptiveAvgPool2dOptions(output_size).
struct AdaptiveAvgPool2dOptions {
  AdaptiveAvgPool2dOptions(Pair2 output_size) : output_size_(output_size) {}  // NOLINT
  DTR_ARG(Pair2, output_size);
};

/// torch.nn.AdaptiveAvgPool2d(output_size): x (N, C, H, W) → (N, C, oh, ow).
class AdaptiveAvgPool2dImpl : public UnaryModule {
 public:
  explicit AdaptiveAvgPool2dImpl(const AdaptiveAvgPool2dOptions& options)
      : UnaryModule("AdaptiveAvgPool2d"), options(options) {}
  explicit AdaptiveAvgPool2dImpl(Pair2 output_size)
      : AdaptiveAvgPool2dImpl(AdaptiveAvgPool2dOptions(output_size)) {}
  Tensor forward(const Tensor& x) override;

  AdaptiveAvgPool2dOptions options;
};
DTR_MODULE(AdaptiveAvgPool2d);

/// torch::nn::FlattenOptions(); start_dim 1, end_dim -1.
struct FlattenOptions {
  DTR_ARG(int64_t, start_dim) = 1;
  DTR_ARG(int64_t, end_dim) = -1;
};

/// torch.nn.Flatten: flattens dims start_dim..end_dim into one.
class FlattenImpl : public UnaryModule {
 public:
  explicit FlattenImpl(const FlattenOptions& options = {}) : UnaryModule("Flatten"), options(options) {}
  FlattenImpl(int64_t start_dim, int64_t end_dim = -1)
      : FlattenImpl(FlattenOptions().start_dim(start_dim).end_dim(end_dim)) {}
  Tensor forward(const Tensor& x) override;

  FlattenOptions options;
};
DTR_MODULE(Flatten);

/// torch.nn.Identity: returns its input (the same tensor).
class IdentityImpl : public UnaryModule {
 public:
  IdentityImpl() : UnaryModule("Identity") {}
  Tensor forward(const Tensor& x) override { return x; }
};
DTR_MODULE(Identity);

/// torch::nn::Functional: a function as a module, for a Sequential
/// (`nn::Functional(dtr::relu)`, or with trailing arguments bound:
/// `nn::Functional(dtr::softmax, 1)` calls softmax(x, 1)).
class FunctionalImpl : public UnaryModule {
 public:
  using Function = std::function<Tensor(Tensor)>;
  explicit FunctionalImpl(Function fn);
  template <typename F, typename A, typename... As>
  FunctionalImpl(F fn, A a, As... as)
      : FunctionalImpl(Function([fn, a, as...](Tensor x) -> Tensor { return fn(x, a, as...); })) {}
  Tensor forward(const Tensor& x) override;

 private:
  Function fn_;
};
DTR_MODULE(Functional);

}  // namespace dtr::nn
