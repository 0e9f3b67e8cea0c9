// Layers of torch.nn: Linear, Conv2d, ConvTranspose2d, BatchNorm2d, LayerNorm,
// RMSNorm, GroupNorm, Embedding, Dropout, Dropout2d, Upsample, ReLU, GELU, SiLU,
// Tanh, Sigmoid, Hardtanh, ReLU6, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d,
// Flatten. Constructors take the PyTorch arguments in PyTorch's
// order and end with TensorOptions (PyTorch's dtype=/device=); parameters
// are initialized like PyTorch from the global seed (dtr::manual_seed).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "eager/nn/module.h"

namespace dtr::nn {

/// An (h, w) pair that also accepts a single int, like PyTorch's
/// `kernel_size=3` / `kernel_size=(3, 5)`.
struct Pair2 {
  int64_t h = 0, w = 0;
  Pair2(int64_t v) : h(v), w(v) {}  // NOLINT: implicit like _pair(v)
  Pair2(int64_t h_, int64_t w_) : h(h_), w(w_) {}
};

/// y = x W^T + b (torch.nn.Linear). weight (out, in), bias (out);
/// kaiming_uniform(a=sqrt(5)) weight, bias uniform in ±1/sqrt(in).
/// forward: x (*, in) → (*, out). Shape errors come from dtr::linear.
class Linear : public UnaryModule {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, TensorOptions opts = {});
  Tensor forward(const Tensor& x) override;

  int64_t in_features, out_features;
  Tensor weight, bias;  // bias undefined when bias=false
};

/// 2-D convolution (torch.nn.Conv2d, padding_mode="zeros"). weight
/// (out, in/groups, kH, kW), bias (out). forward: x (N, in, H, W) →
/// (N, out, H', W'). Throws ValueError when in/out are not divisible by groups.
class Conv2d : public UnaryModule {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Pair2 kernel_size, Pair2 stride = 1,
         Pair2 padding = 0, Pair2 dilation = 1, int64_t groups = 1, bool bias = true,
         TensorOptions opts = {});
  Tensor forward(const Tensor& x) override;

  int64_t in_channels, out_channels;
  Pair2 kernel_size, stride, padding, dilation;
  int64_t groups;
  Tensor weight, bias;
};

/// Transposed 2-D convolution (torch.nn.ConvTranspose2d, padding_mode="zeros").
/// weight (in, out/groups, kH, kW) kaiming_uniform(a=sqrt(5)) with PyTorch's
/// fan_in of that shape ((out/groups) * kH * kW), bias (out) uniform in
/// ±1/sqrt(fan_in). forward: x (N, in, H, W) or (in, H, W) → (N, out, H', W')
/// with H' = (H - 1) stride - 2 padding + dilation (kH - 1) + output_padding + 1.
/// Throws ValueError when in/out are not divisible by groups, for
/// non-positive kernel_size/stride/dilation/groups, negative padding, or
/// output_padding not smaller than stride or dilation.
class ConvTranspose2d : public UnaryModule {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, Pair2 kernel_size, Pair2 stride = 1,
                  Pair2 padding = 0, Pair2 output_padding = 0, int64_t groups = 1, bool bias = true,
                  Pair2 dilation = 1, TensorOptions opts = {});
  Tensor forward(const Tensor& x) override;

  int64_t in_channels, out_channels;
  Pair2 kernel_size, stride, padding, output_padding;
  int64_t groups;
  Pair2 dilation;
  Tensor weight, bias;
};

/// Batch normalization over (N, C, H, W) (torch.nn.BatchNorm2d). In training
/// mode it normalizes with the batch statistics, increments the int64
/// buffer num_batches_tracked once per forward and updates running_mean /
/// running_var (unbiased variance) through dtr::batch_norm's side-effect op;
/// in eval mode it uses the running statistics. momentum nullopt = cumulative
/// moving average (factor 1/num_batches_tracked). Buffers: running_mean
/// (zeros), running_var (ones), num_batches_tracked; parameters weight
/// (ones), bias (zeros) when affine. Throws ValueError for input that is not 4-D.
class BatchNorm2d : public UnaryModule {
 public:
  BatchNorm2d(int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
              bool affine = true, bool track_running_stats = true, TensorOptions opts = {});
  Tensor forward(const Tensor& x) override;

  int64_t num_features;
  double eps;
  std::optional<double> momentum;
  bool affine, track_running_stats;
  Tensor weight, bias;
  Tensor running_mean, running_var, num_batches_tracked;
};

/// Layer normalization over the trailing `normalized_shape` dims
/// (torch.nn.LayerNorm). weight ones, bias zeros.
class LayerNorm : public UnaryModule {
 public:
  LayerNorm(std::vector<int64_t> normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
            bool bias = true, TensorOptions opts = {});
  Tensor forward(const Tensor& x) override;

  std::vector<int64_t> normalized_shape;
  double eps;
  Tensor weight, bias;
};

/// Group normalization (torch.nn.GroupNorm): dtr::group_norm with
/// num_groups groups over (N, num_channels, *). weight ones, bias zeros
/// (both (num_channels)) when affine. Throws ValueError when num_groups does
/// not divide num_channels (or is not positive).
class GroupNorm : public UnaryModule {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true,
            TensorOptions opts = {});
  Tensor forward(const Tensor& x) override;

  int64_t num_groups, num_channels;
  double eps;
  bool affine;
  Tensor weight, bias;
};

/// Root-mean-square normalization over the trailing `normalized_shape` dims
/// (torch.nn.RMSNorm, PyTorch 2.4): y = x / sqrt(mean(x^2) + eps) * weight.
/// eps nullopt = torch.finfo(x.dtype).eps; weight ones (of normalized_shape)
/// when elementwise_affine, else undefined. forward: x (*, normalized_shape)
/// → the same shape; ValueError from dtr::rms_norm when x's trailing dims
/// differ from normalized_shape.
class RMSNorm : public UnaryModule {
 public:
  RMSNorm(std::vector<int64_t> normalized_shape, std::optional<double> eps = std::nullopt,
          bool elementwise_affine = true, TensorOptions opts = {});
  Tensor forward(const Tensor& x) override;

  std::vector<int64_t> normalized_shape;
  std::optional<double> eps;
  Tensor weight;
};

/// A lookup table (torch.nn.Embedding): weight (num_embeddings,
/// embedding_dim) from N(0, 1). forward: int64 indices (*) → (*, embedding_dim);
/// IndexError for out-of-range indices (from dtr::embedding).
class Embedding : public UnaryModule {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, TensorOptions opts = {});
  Tensor forward(const Tensor& indices) override;

  int64_t num_embeddings, embedding_dim;
  Tensor weight;
};

/// Zeroes elements with probability p in training mode and scales the rest
/// by 1/(1-p); identity in eval mode (torch.nn.Dropout). Throws ValueError
/// for p outside [0, 1].
class Dropout : public UnaryModule {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;

  double p;
};

/// Zeroes whole channels of (N, C, H, W) with probability p in training
/// mode and scales the rest by 1/(1-p); identity in eval mode
/// (torch.nn.Dropout2d, through dtr::dropout2d). Throws ValueError for p
/// outside [0, 1].
class Dropout2d : public UnaryModule {
 public:
  explicit Dropout2d(double p = 0.5);
  Tensor forward(const Tensor& x) override;

  double p;
};

/// torch.nn.Upsample: dtr::interpolate of (N, C, H, W) with one of size and
/// scale_factor (the other empty), mode "nearest" or "bilinear". Throws
/// ValueError for both or neither, an unknown mode or align_corners with
/// "nearest" (at construction), as interpolate.
class Upsample : public UnaryModule {
 public:
  explicit Upsample(std::vector<int64_t> size = {}, std::vector<double> scale_factor = {},
                    std::string mode = "nearest", std::optional<bool> align_corners = std::nullopt);
  Tensor forward(const Tensor& x) override;

  std::vector<int64_t> size;
  std::vector<double> scale_factor;
  std::string mode;
  std::optional<bool> align_corners;
};

/// torch.nn.ReLU.
class ReLU : public UnaryModule {
 public:
  ReLU() : UnaryModule("ReLU") {}
  Tensor forward(const Tensor& x) override;
};

/// torch.nn.GELU; approximate "none" (erf) or "tanh".
class GELU : public UnaryModule {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;

  std::string approximate;
};

/// torch.nn.SiLU: x * sigmoid(x). TypeError for non-floating input.
class SiLU : public UnaryModule {
 public:
  SiLU() : UnaryModule("SiLU") {}
  Tensor forward(const Tensor& x) override;
};

/// torch.nn.Tanh.
class Tanh : public UnaryModule {
 public:
  Tanh() : UnaryModule("Tanh") {}
  Tensor forward(const Tensor& x) override;
};

/// torch.nn.Sigmoid.
class Sigmoid : public UnaryModule {
 public:
  Sigmoid() : UnaryModule("Sigmoid") {}
  Tensor forward(const Tensor& x) override;
};

/// torch.nn.MaxPool2d(kernel_size, stride=None, padding=0) (dilation 1, no
/// ceil_mode, no indices). `stride` omitted = kernel_size. forward: x (N, C,
/// H, W) → (N, C, H', W'); errors from dtr::max_pool2d.
class MaxPool2d : public UnaryModule {
 public:
  explicit MaxPool2d(Pair2 kernel_size, std::optional<Pair2> stride = std::nullopt, Pair2 padding = 0);
  Tensor forward(const Tensor& x) override;

  Pair2 kernel_size, stride, padding;
};

/// torch.nn.AvgPool2d(kernel_size, stride=None, padding=0) (count_include_pad,
/// no ceil_mode). `stride` omitted = kernel_size. forward: x (N, C, H, W) →
/// (N, C, H', W'); errors from dtr::avg_pool2d.
class AvgPool2d : public UnaryModule {
 public:
  explicit AvgPool2d(Pair2 kernel_size, std::optional<Pair2> stride = std::nullopt, Pair2 padding = 0);
  Tensor forward(const Tensor& x) override;

  Pair2 kernel_size, stride, padding;
};

/// torch.nn.AdaptiveAvgPool2d(output_size): x (N, C, H, W) → (N, C, oh, ow).
class AdaptiveAvgPool2d : public UnaryModule {
 public:
  explicit AdaptiveAvgPool2d(Pair2 output_size);
  Tensor forward(const Tensor& x) override;

  Pair2 output_size;
};

/// torch.nn.Flatten(start_dim=1, end_dim=-1): flattens dims start..end into one.
class Flatten : public UnaryModule {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);
  Tensor forward(const Tensor& x) override;

  int64_t start_dim, end_dim;
};

/// clamp(x, min_val, max_val) (torch.nn.Hardtanh; defaults -1, 1). Throws
/// ValueError when max_val < min_val.
class Hardtanh : public UnaryModule {
 public:
  explicit Hardtanh(double min_val = -1.0, double max_val = 1.0);
  Tensor forward(const Tensor& x) override;

  double min_val, max_val;

 protected:
  Hardtanh(std::string name, double min_val, double max_val);
};

/// clamp(x, 0, 6) (torch.nn.ReLU6): a Hardtanh(0, 6) named "ReLU6".
class ReLU6 : public Hardtanh {
 public:
  ReLU6();
};

}  // namespace dtr::nn
