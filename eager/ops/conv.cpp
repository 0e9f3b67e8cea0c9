// Convolution and pooling on (N, C, H, W): conv2d (torch.nn.functional.conv2d),
// conv_transpose2d, max_pool2d, avg_pool2d, adaptive_avg_pool2d, and the
// gradient ops their backward rules call. Kernels: cpu/conv.cpp (im2col +
// OpenBLAS GEMM). conv_transpose2d is conv2d's input gradient: its kernel is
// conv2d_input_grad's, its input gradient is conv2d and its weight gradient
// conv2d_weight_grad with the roles of input and output gradient swapped.
#include "eager/ops/registration.h"

namespace dtr {
namespace ops {
namespace {

void check_4d(std::string_view op, const TensorMeta& m, std::string_view what) {
  DTR_CHECK(m.dim() == 4, ValueError, "{}: expected a 4-D {} (N, C, H, W), got shape {}", op, what,
            shape_str(m.shape));
}

/// An attribute of exactly two ints (stride, padding, kernel_size, ...): these
/// rows are callable by name, so a shorter list is the caller's ValueError,
/// not a read past its end.
const Shape& two_ints(const Attrs& a, std::string_view key, std::string_view op) {
  const Shape& v = a.ints(key);
  DTR_CHECK(v.size() == 2, ValueError, "{}: {} must have two values, got {}", op, key,
            shape_str(v));
  return v;
}

/// The meta of a gradient row's `key` attribute (input_size, weight_size) as
/// a tensor of `like`'s dtype and device: ValueError for a negative size.
TensorMeta meta_of_size(const Attrs& a, std::string_view key, const TensorMeta& like,
                        std::string_view op) {
  const Shape& v = a.ints(key);
  for (int64_t d : v) {
    DTR_CHECK(d >= 0, ValueError, "{}: {} {} has a negative size", op, key, shape_str(v));
  }
  return out_meta(v, like.dtype, like.device);
}

/// A gradient row's grad_y must have the shape its forward gives `forward_in`.
void check_grad_fits(std::string_view op, const TensorMeta& grad, const TensorMeta& forward_out) {
  DTR_CHECK(grad.shape == forward_out.shape, ValueError,
            "{}: grad of shape {} does not match the forward's output shape {}", op,
            shape_str(grad.shape), shape_str(forward_out.shape));
}

// ---- conv2d ------------------------------------------------------------------------
// attrs: stride, padding, dilation (two ints each), groups.

// Output spatial size of a convolution/pool along one dim; 0 when the
// dilated kernel does not fit the padded input.
int64_t conv_out_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation) {
  const int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

void check_conv_attrs(std::string_view op, const Attrs& a) {
  const Shape &s = two_ints(a, "stride", op), &p = two_ints(a, "padding", op),
              &d = two_ints(a, "dilation", op);
  DTR_CHECK(s[0] > 0 && s[1] > 0, ValueError, "{}: stride must be positive, got {}", op, shape_str(s));
  DTR_CHECK(p[0] >= 0 && p[1] >= 0, ValueError, "{}: padding must be non-negative, got {}", op,
            shape_str(p));
  DTR_CHECK(d[0] > 0 && d[1] > 0, ValueError, "{}: dilation must be positive, got {}", op,
            shape_str(d));
  DTR_CHECK(a.i("groups") > 0, ValueError, "{}: groups must be positive, got {}", op, a.i("groups"));
}

void infer_conv2d(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const TensorMeta &x = in[0], &w = in[1];
  check_4d("conv2d", x, "input");
  check_4d("conv2d", w, "weight");
  for (size_t i = 0; i < in.size(); ++i) {
    check_floating("conv2d", in[i], i == 0 ? "input" : i == 1 ? "weight" : "bias");
    DTR_CHECK(in[i].dtype == x.dtype, TypeError,
              "conv2d: expected input, weight and bias of one dtype, got input {} and {} {}",
              dtype_name(x.dtype), i == 1 ? "weight" : "bias", dtype_name(in[i].dtype));
  }
  check_conv_attrs("conv2d", a);
  const int64_t groups = a.i("groups");
  DTR_CHECK(x.shape[1] == w.shape[1] * groups, ValueError,
            "conv2d: given groups={} and weight of shape {}, expected input of shape {} to have {} "
            "channels, but got {}",
            groups, shape_str(w.shape), shape_str(x.shape), w.shape[1] * groups, x.shape[1]);
  DTR_CHECK(w.shape[0] % groups == 0, ValueError,
            "conv2d: out_channels of weight {} must be divisible by groups={}", shape_str(w.shape),
            groups);
  if (in.size() > 2) {
    DTR_CHECK(in[2].dim() == 1 && in[2].shape[0] == w.shape[0], ValueError,
              "conv2d: bias must have shape [{}] for weight of shape {}, got {}", w.shape[0],
              shape_str(w.shape), shape_str(in[2].shape));
  }
  const Shape &s = a.ints("stride"), &p = a.ints("padding"), &d = a.ints("dilation");
  const int64_t Ho = conv_out_size(x.shape[2], w.shape[2], s[0], p[0], d[0]);
  const int64_t Wo = conv_out_size(x.shape[3], w.shape[3], s[1], p[1], d[1]);
  DTR_CHECK(Ho > 0 && Wo > 0, ValueError,
            "conv2d: input of shape {} padded by {} is smaller than the dilated kernel of weight {} "
            "(dilation {})",
            shape_str(x.shape), shape_str(p), shape_str(w.shape), shape_str(d));
  out.push_back(out_meta({x.shape[0], w.shape[0], Ho, Wo}, x.dtype, x.device));
}

// 2 * N * Cout * Ho * Wo * (C / groups) * kH * kW for the forward and both gradients.
double conv_flops(IntList w, IntList y) {
  return 2.0 * double(y[0]) * double(y[1]) * double(y[2]) * double(y[3]) * double(w[1]) *
         double(w[2]) * double(w[3]);
}

double all_bytes(std::span<const TensorMeta> in, std::span<const TensorMeta> out) {
  double b = 0;
  for (const TensorMeta& m : in) b += double(m.numel() * itemsize(m.dtype));
  for (const TensorMeta& m : out) b += double(m.numel() * itemsize(m.dtype));
  return b;
}

OpCost conv2d_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
  return {conv_flops(in[1].shape, out[0].shape), all_bytes(in, out)};
}

// inputs: grad_y (N, Cout, Ho, Wo), weight; attrs + input_size → grad_x.
void infer_conv2d_input_grad(std::span<const TensorMeta> in, const Attrs& a,
                             std::vector<TensorMeta>& out) {
  constexpr std::string_view kOp = "conv2d_input_grad";
  const TensorMeta x = meta_of_size(a, "input_size", in[0], kOp);
  std::vector<TensorMeta> fwd;
  const TensorMeta forward_in[2] = {x, in[1]};
  infer_conv2d(forward_in, a, fwd);
  check_grad_fits(kOp, in[0], fwd[0]);
  out.push_back(x);
}
OpCost conv2d_input_grad_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                              const Attrs&) {
  return {conv_flops(in[1].shape, in[0].shape), all_bytes(in, out)};
}

// inputs: grad_y (N, Cout, Ho, Wo), x; attrs + weight_size → grad_weight.
void infer_conv2d_weight_grad(std::span<const TensorMeta> in, const Attrs& a,
                              std::vector<TensorMeta>& out) {
  constexpr std::string_view kOp = "conv2d_weight_grad";
  const TensorMeta w = meta_of_size(a, "weight_size", in[0], kOp);
  std::vector<TensorMeta> fwd;
  const TensorMeta forward_in[2] = {in[1], w};
  infer_conv2d(forward_in, a, fwd);
  check_grad_fits(kOp, in[0], fwd[0]);
  out.push_back(w);
}
OpCost conv2d_weight_grad_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                               const Attrs&) {
  return {conv_flops(out[0].shape, in[0].shape), all_bytes(in, out)};
}

std::vector<Tensor> conv2d_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  std::vector<Tensor> r(ctx.input_metas.size());
  if (ctx.needs_grad(0)) {
    static const OpDef& o = op("conv2d_input_grad");
    Attrs a = ctx.attrs;
    a.set("input_size", ctx.input_metas[0].shape);
    r[0] = dispatch1(o, {g[0], ctx.inputs[1]}, std::move(a));
  }
  if (ctx.needs_grad(1)) {
    static const OpDef& o = op("conv2d_weight_grad");
    Attrs a = ctx.attrs;
    a.set("weight_size", ctx.input_metas[1].shape);
    r[1] = dispatch1(o, {g[0], ctx.inputs[0]}, std::move(a));
  }
  if (r.size() > 2 && ctx.needs_grad(2)) r[2] = sum(g[0], {0, 2, 3});
  return r;
}

// ---- conv_transpose2d ---------------------------------------------------------------
// attrs: stride, padding, output_padding, dilation (two ints each), groups.
// x (N, C_in, H, W), weight (C_in, C_out / groups, kH, kW), bias (C_out).

// Output size of a transposed convolution along one dim.
int64_t conv_transpose_out_size(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                                int64_t dilation, int64_t output_padding) {
  return (in - 1) * stride - 2 * pad + dilation * (kernel - 1) + output_padding + 1;
}

void infer_conv_transpose2d(std::span<const TensorMeta> in, const Attrs& a,
                            std::vector<TensorMeta>& out) {
  constexpr std::string_view kOp = "conv_transpose2d";
  const TensorMeta &x = in[0], &w = in[1];
  check_4d(kOp, x, "input");
  check_4d(kOp, w, "weight");
  for (size_t i = 0; i < in.size(); ++i) {
    check_floating(kOp, in[i], i == 0 ? "input" : i == 1 ? "weight" : "bias");
    DTR_CHECK(in[i].dtype == x.dtype, TypeError,
              "conv_transpose2d: expected input, weight and bias of one dtype, got input {} and {} {}",
              dtype_name(x.dtype), i == 1 ? "weight" : "bias", dtype_name(in[i].dtype));
  }
  check_conv_attrs(kOp, a);
  const Shape &s = a.ints("stride"), &p = a.ints("padding"), &d = a.ints("dilation"),
              &opad = two_ints(a, "output_padding", kOp);
  for (size_t i = 0; i < 2; ++i) {
    DTR_CHECK(opad[i] >= 0 && (opad[i] < s[i] || opad[i] < d[i]), ValueError,
              "conv_transpose2d: output padding must be non-negative and smaller than either stride "
              "or dilation, got output_padding {}, stride {}, dilation {}",
              shape_str(opad), shape_str(s), shape_str(d));
  }
  const int64_t groups = a.i("groups");
  DTR_CHECK(x.shape[1] == w.shape[0], ValueError,
            "conv_transpose2d: given weight of shape {}, expected input of shape {} to have {} "
            "channels, but got {}",
            shape_str(w.shape), shape_str(x.shape), w.shape[0], x.shape[1]);
  DTR_CHECK(w.shape[0] % groups == 0, ValueError,
            "conv_transpose2d: in_channels {} of weight {} must be divisible by groups={}",
            w.shape[0], shape_str(w.shape), groups);
  const int64_t Cout = w.shape[1] * groups;
  if (in.size() > 2) {
    DTR_CHECK(in[2].dim() == 1 && in[2].shape[0] == Cout, ValueError,
              "conv_transpose2d: bias must have shape [{}] for weight of shape {} and groups={}, "
              "got {}",
              Cout, shape_str(w.shape), groups, shape_str(in[2].shape));
  }
  const int64_t Ho = conv_transpose_out_size(x.shape[2], w.shape[2], s[0], p[0], d[0], opad[0]);
  const int64_t Wo = conv_transpose_out_size(x.shape[3], w.shape[3], s[1], p[1], d[1], opad[1]);
  DTR_CHECK(Ho > 0 && Wo > 0, ValueError,
            "conv_transpose2d: input of shape {} with weight {}, stride {}, padding {}, dilation {} "
            "and output_padding {} gives a non-positive output size {}x{}",
            shape_str(x.shape), shape_str(w.shape), shape_str(s), shape_str(p), shape_str(d),
            shape_str(opad), Ho, Wo);
  out.push_back(out_meta({x.shape[0], Cout, Ho, Wo}, x.dtype, x.device));
}

// The forward's flops are those of conv2d's input gradient on output x.
OpCost conv_transpose2d_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                             const Attrs&) {
  return {conv_flops(in[1].shape, in[0].shape), all_bytes(in, out)};
}

/// The attributes of conv2d rows (no output_padding) from a transposed row's.
Attrs conv_attrs_of(const Attrs& a) {
  return Attrs{{"stride", a.ints("stride")},
               {"padding", a.ints("padding")},
               {"dilation", a.ints("dilation")},
               {"groups", a.i("groups")}};
}

// y = A^T x with A the linear map u -> conv2d(u, w) from y's space to x's:
// grad_x = A grad_y = conv2d(grad_y, w), grad_w = d/dw <conv2d(grad_y, w), x>
// = conv2d_weight_grad(x, grad_y). When output_padding >= stride (allowed
// below the dilation) conv2d of the output is larger than x: grad_x is
// cropped to x, and x zero-padded to it for the weight gradient.
std::vector<Tensor> conv_transpose2d_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  std::vector<Tensor> r(ctx.input_metas.size());
  const Shape& xs = ctx.input_metas[0].shape;
  const Shape &s = ctx.attrs.ints("stride"), &opad = ctx.attrs.ints("output_padding");
  const int64_t extra_h = opad[0] / s[0], extra_w = opad[1] / s[1];
  if (ctx.needs_grad(0)) {
    Tensor gx = conv2d(g[0], ctx.inputs[1], Tensor(), s, ctx.attrs.ints("padding"),
                       ctx.attrs.ints("dilation"), ctx.attrs.i("groups"));
    if (extra_h > 0) gx = narrow(gx, 2, 0, xs[2]);
    if (extra_w > 0) gx = narrow(gx, 3, 0, xs[3]);
    r[0] = gx;
  }
  if (ctx.needs_grad(1)) {
    static const OpDef& o = op("conv2d_weight_grad");
    Attrs a = conv_attrs_of(ctx.attrs);
    a.set("weight_size", ctx.input_metas[1].shape);
    Tensor x = ctx.inputs[0];
    if (extra_h > 0 || extra_w > 0) x = pad(x, {0, extra_w, 0, extra_h});
    r[1] = dispatch1(o, {x, g[0]}, std::move(a));
  }
  if (r.size() > 2 && ctx.needs_grad(2)) r[2] = sum(g[0], {0, 2, 3});
  return r;
}

// ---- pooling ------------------------------------------------------------------------
// attrs: kernel_size, stride, padding (two ints each) for max/avg pooling;
// output_size for adaptive pooling. Backward ops get input_size too.

void infer_pool(std::string_view op, std::span<const TensorMeta> in, const Attrs& a,
                std::vector<TensorMeta>& out) {
  const TensorMeta& x = in[0];
  check_4d(op, x, "input");
  check_floating(op, x);
  const Shape &k = two_ints(a, "kernel_size", op), &s = two_ints(a, "stride", op),
              &p = two_ints(a, "padding", op);
  DTR_CHECK(k[0] > 0 && k[1] > 0, ValueError, "{}: kernel_size must be positive, got {}", op,
            shape_str(k));
  DTR_CHECK(s[0] > 0 && s[1] > 0, ValueError, "{}: stride must be positive, got {}", op, shape_str(s));
  DTR_CHECK(p[0] >= 0 && p[1] >= 0 && p[0] <= k[0] / 2 && p[1] <= k[1] / 2, ValueError,
            "{}: padding should be non-negative and at most half of the kernel size, but got "
            "padding {} for kernel_size {}",
            op, shape_str(p), shape_str(k));
  const int64_t Ho = conv_out_size(x.shape[2], k[0], s[0], p[0], 1);
  const int64_t Wo = conv_out_size(x.shape[3], k[1], s[1], p[1], 1);
  DTR_CHECK(Ho > 0 && Wo > 0, ValueError,
            "{}: input of shape {} is too small for kernel_size {} with padding {} (output size "
            "{}x{})",
            op, shape_str(x.shape), shape_str(k), shape_str(p), Ho, Wo);
  out.push_back(out_meta({x.shape[0], x.shape[1], Ho, Wo}, x.dtype, x.device));
}

void infer_max_pool2d(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  infer_pool("max_pool2d", in, a, out);
  out.push_back(out_meta(out[0].shape, kInt64, out[0].device));  // argmax indices
}

void infer_avg_pool2d(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  infer_pool("avg_pool2d", in, a, out);
}

void infer_adaptive_avg_pool2d(std::span<const TensorMeta> in, const Attrs& a,
                               std::vector<TensorMeta>& out) {
  const TensorMeta& x = in[0];
  check_4d("adaptive_avg_pool2d", x, "input");
  check_floating("adaptive_avg_pool2d", x);
  const Shape& o = two_ints(a, "output_size", "adaptive_avg_pool2d");
  DTR_CHECK(o[0] > 0 && o[1] > 0, ValueError,
            "adaptive_avg_pool2d: output_size must be positive, got {}", shape_str(o));
  DTR_CHECK(x.shape[2] > 0 && x.shape[3] > 0, ValueError,
            "adaptive_avg_pool2d: expected an input with non-zero spatial size, got shape {}",
            shape_str(x.shape));
  out.push_back(out_meta({x.shape[0], x.shape[1], o[0], o[1]}, x.dtype, x.device));
}

// Pool gradient ops: grad_y (+ indices for max) → grad_x of attrs input_size.
void infer_pool_backward(std::span<const TensorMeta> in, const Attrs& a,
                         std::vector<TensorMeta>& out) {
  const bool adaptive = a.has("output_size");
  const bool max = in.size() == 2;  // max_pool2d_backward: grad_y, indices
  const std::string_view op = adaptive ? "adaptive_avg_pool2d_backward"
                              : max    ? "max_pool2d_backward"
                                       : "avg_pool2d_backward";
  const TensorMeta x = meta_of_size(a, "input_size", in[0], op);
  std::vector<TensorMeta> fwd;
  if (adaptive) {
    infer_adaptive_avg_pool2d({&x, 1}, a, fwd);
  } else {
    infer_pool(op, {&x, 1}, a, fwd);
  }
  check_grad_fits(op, in[0], fwd[0]);
  if (max) {
    DTR_CHECK(in[1].dtype == kInt64 && in[1].shape == in[0].shape, ValueError,
              "{}: indices must be int64 of the grad's shape {}, got {} {}", op,
              shape_str(in[0].shape), dtype_name(in[1].dtype), shape_str(in[1].shape));
  }
  out.push_back(x);
}

// Calls the gradient row `o` with the forward's attributes plus input_size.
Tensor pool_grad(const OpDef& o, const BackwardContext& ctx, std::vector<Tensor> inputs) {
  Attrs a = ctx.attrs;
  a.set("input_size", ctx.input_metas[0].shape);
  return dispatch1(o, inputs, std::move(a));
}

std::vector<Tensor> max_pool2d_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("max_pool2d_backward");
  return {pool_grad(o, ctx, {g[0], ctx.outputs[1]})};
}
std::vector<Tensor> avg_pool2d_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("avg_pool2d_backward");
  return {pool_grad(o, ctx, {g[0]})};
}
std::vector<Tensor> adaptive_avg_pool2d_backward(const BackwardContext& ctx,
                                                 std::span<const Tensor> g) {
  static const OpDef& o = op("adaptive_avg_pool2d_backward");
  return {pool_grad(o, ctx, {g[0]})};
}

// Two ints from one (repeated) or two values, like PyTorch's _pair.
Shape pair(IntList v, std::string_view op, std::string_view what) {
  DTR_CHECK(v.size() == 1 || v.size() == 2, ValueError, "{}: {} must have one or two values, got {}",
            op, what, shape_str(v));
  return v.size() == 1 ? Shape{v[0], v[0]} : Shape{v[0], v[1]};
}

void check_defined(std::string_view op, const Tensor& x) {
  DTR_CHECK(x.defined(), ValueError, "{}: input is an undefined tensor", op);
}

}  // namespace

void register_conv_ops() {
  auto& R = OpRegistry::instance();
  using param::ints;
  // Two ints each; the gradient rows get the forward's plus the size they produce.
  const std::vector<ParamSpec> kConv{ints("stride"), ints("padding"), ints("dilation"),
                                     param::i("groups", 1)};
  auto with = [](std::vector<ParamSpec> p, ParamSpec extra) {
    p.push_back(std::move(extra));
    return p;
  };
  const std::vector<ParamSpec> kPool{ints("kernel_size"), ints("stride"), ints("padding")};
  const std::vector<ParamSpec> kAdaptive{ints("output_size")};
  OpDef conv{.name = "conv2d", .params = kConv, .infer = infer_conv2d, .cost = conv2d_cost, .backward = conv2d_backward};
  conv.autocast = AutocastPolicy::kLowerPrecision;
  conv.min_inputs = 2;
  conv.max_inputs = 3;
  R.define(std::move(conv));
  R.define(OpDef{.name = "conv2d_input_grad", .params = with(kConv, ints("input_size")), .infer = infer_conv2d_input_grad,
                 .cost = conv2d_input_grad_cost, .save = kSaveNone,
                 .min_inputs = 2, .max_inputs = 2});
  R.define(OpDef{.name = "conv2d_weight_grad", .params = with(kConv, ints("weight_size")), .infer = infer_conv2d_weight_grad,
                 .cost = conv2d_weight_grad_cost, .save = kSaveNone,
                 .min_inputs = 2, .max_inputs = 2});
  OpDef convt{.name = "conv_transpose2d", .params = with(kConv, ints("output_padding")),
              .infer = infer_conv_transpose2d, .cost = conv_transpose2d_cost,
              .backward = conv_transpose2d_backward};
  convt.autocast = AutocastPolicy::kLowerPrecision;
  convt.min_inputs = 2;
  convt.max_inputs = 3;
  R.define(std::move(convt));

  // Indices are a second output, saved for the backward scatter.
  R.define(OpDef{.name = "max_pool2d", .params = kPool, .infer = infer_max_pool2d, .backward = max_pool2d_backward,
                 .save = kSaveOutputs,
                 .min_inputs = 1, .max_inputs = 1});
  R.define(OpDef{.name = "max_pool2d_backward", .params = with(kPool, ints("input_size")), .infer = infer_pool_backward, .save = kSaveNone,
                 .min_inputs = 2, .max_inputs = 2});
  R.define(OpDef{.name = "avg_pool2d", .params = kPool, .infer = infer_avg_pool2d, .backward = avg_pool2d_backward,
                 .save = kSaveNone,
                 .min_inputs = 1, .max_inputs = 1});
  R.define(OpDef{.name = "avg_pool2d_backward", .params = with(kPool, ints("input_size")), .infer = infer_pool_backward, .save = kSaveNone,
                 .min_inputs = 1, .max_inputs = 1});
  R.define(OpDef{.name = "adaptive_avg_pool2d", .params = kAdaptive, .infer = infer_adaptive_avg_pool2d,
                 .backward = adaptive_avg_pool2d_backward, .save = kSaveNone,
                 .min_inputs = 1, .max_inputs = 1});
  R.define(OpDef{.name = "adaptive_avg_pool2d_backward",
                 .params = with(kAdaptive, ints("input_size")), .infer = infer_pool_backward,
                 .save = kSaveNone,
                 .min_inputs = 1, .max_inputs = 1});
}

}  // namespace ops

/// torch.nn.functional.conv2d. x (N, C_in, H, W) or unbatched (C_in, H, W);
/// weight (C_out, C_in / groups, kH, kW); bias (C_out) or undefined.
/// stride, padding, dilation: one value (both dims) or two.
/// Returns (N, C_out, H_out, W_out) with H_out = (H + 2 p - d (kH - 1) - 1) / s + 1.
/// Floating dtypes (float16/bfloat16 compute in float32), all of one dtype.
/// Throws ValueError on bad ranks, channel/group mismatches, non-positive
/// stride/dilation/groups, negative padding or an input smaller than the
/// kernel; TypeError on non-floating or mixed dtypes.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntList stride,
              IntList padding, IntList dilation, int64_t groups) {
  static const OpDef& o = op("conv2d");
  ops::check_defined("conv2d", x);
  if (x.dim() == 3) {
    return squeeze(conv2d(unsqueeze(x, 0), weight, bias, stride, padding, dilation, groups), 0);
  }
  Attrs a{{"stride", ops::pair(stride, "conv2d", "stride")},
          {"padding", ops::pair(padding, "conv2d", "padding")},
          {"dilation", ops::pair(dilation, "conv2d", "dilation")},
          {"groups", groups}};
  if (bias.defined()) return dispatch1(o, {x, weight, bias}, std::move(a));
  return dispatch1(o, {x, weight}, std::move(a));
}

/// torch.nn.functional.conv_transpose2d. x (N, C_in, H, W) or unbatched
/// (C_in, H, W); weight (C_in, C_out / groups, kH, kW); bias (C_out) or
/// undefined. stride, padding, output_padding, dilation: one value (both
/// dims) or two. Returns (N, C_out, H_out, W_out) with
/// H_out = (H - 1) s - 2 p + d (kH - 1) + output_padding + 1: the gradient of
/// conv2d with these arguments w.r.t. its input, plus bias. Floating dtypes
/// (float16/bfloat16 compute in float32), all of one dtype. Throws
/// ValueError on bad ranks, C_in differing from weight.size(0) or not
/// divisible by groups, non-positive stride/dilation/groups, negative
/// padding, output_padding not smaller than stride or dilation, or a
/// non-positive output size; TypeError on non-floating or mixed dtypes.
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias, IntList stride,
                        IntList padding, IntList output_padding, int64_t groups, IntList dilation) {
  static const OpDef& o = op("conv_transpose2d");
  constexpr std::string_view kOp = "conv_transpose2d";
  ops::check_defined(kOp, x);
  if (x.dim() == 3) {
    return squeeze(conv_transpose2d(unsqueeze(x, 0), weight, bias, stride, padding,
                                    output_padding, groups, dilation),
                   0);
  }
  Attrs a{{"stride", ops::pair(stride, kOp, "stride")},
          {"padding", ops::pair(padding, kOp, "padding")},
          {"dilation", ops::pair(dilation, kOp, "dilation")},
          {"groups", groups},
          {"output_padding", ops::pair(output_padding, kOp, "output_padding")}};
  if (bias.defined()) return dispatch1(o, {x, weight, bias}, std::move(a));
  return dispatch1(o, {x, weight}, std::move(a));
}

namespace {
Attrs pool_attrs(std::string_view op, IntList kernel_size, IntList stride, IntList padding) {
  const Shape k = ops::pair(kernel_size, op, "kernel_size");
  return Attrs{{"kernel_size", k},
               {"stride", stride.empty() ? k : ops::pair(stride, op, "stride")},
               {"padding", ops::pair(padding, op, "padding")}};
}
}  // namespace

/// torch.nn.functional.max_pool2d (dilation 1, ceil_mode False). x (N, C, H, W)
/// or (C, H, W), floating. stride defaults to kernel_size; padding (at most
/// half the kernel) counts as -inf. The argmax indices are kept as a second
/// output of the op for the backward. Throws ValueError on bad sizes.
Tensor max_pool2d(const Tensor& x, IntList kernel_size, IntList stride, IntList padding) {
  static const OpDef& o = op("max_pool2d");
  ops::check_defined("max_pool2d", x);
  if (x.dim() == 3) return squeeze(max_pool2d(unsqueeze(x, 0), kernel_size, stride, padding), 0);
  return dispatch(o, std::vector<Tensor>{x}, pool_attrs("max_pool2d", kernel_size, stride, padding))[0];
}

/// torch.nn.functional.avg_pool2d (ceil_mode False, count_include_pad True:
/// every window divides by kH * kW). x (N, C, H, W) or (C, H, W), floating.
/// stride defaults to kernel_size. Throws ValueError on bad sizes.
Tensor avg_pool2d(const Tensor& x, IntList kernel_size, IntList stride, IntList padding) {
  static const OpDef& o = op("avg_pool2d");
  ops::check_defined("avg_pool2d", x);
  if (x.dim() == 3) return squeeze(avg_pool2d(unsqueeze(x, 0), kernel_size, stride, padding), 0);
  return dispatch1(o, {x}, pool_attrs("avg_pool2d", kernel_size, stride, padding));
}

/// torch.nn.functional.adaptive_avg_pool2d. x (N, C, H, W) or (C, H, W),
/// floating; output_size one or two positive values. Output cell i averages
/// input rows floor(i H / Ho) .. ceil((i + 1) H / Ho). Throws ValueError.
Tensor adaptive_avg_pool2d(const Tensor& x, IntList output_size) {
  static const OpDef& o = op("adaptive_avg_pool2d");
  ops::check_defined("adaptive_avg_pool2d", x);
  if (x.dim() == 3) return squeeze(adaptive_avg_pool2d(unsqueeze(x, 0), output_size), 0);
  return dispatch1(o, {x},
                   Attrs{{"output_size", ops::pair(output_size, "adaptive_avg_pool2d", "output_size")}});
}

}  // namespace dtr
