// Padding and resampling: pad (torch.nn.functional.pad, modes "constant" and
// "reflect") and interpolate (torch.nn.functional.interpolate on (N, C, H, W),
// modes "nearest" and "bilinear"), with the gradient rows their backward
// rules call. Row names follow PyTorch's ATen ops: constant_pad_nd,
// reflection_pad (reflection_pad1d/2d), upsample_nearest2d,
// upsample_bilinear2d. Kernels: cpu/resample.cpp; every gradient is a
// per-plane serial scatter in output order (no atomics), so it is
// deterministic.
#include <cmath>

#include "eager/ops/registration.h"

namespace dtr {
namespace ops {
namespace {

// ---- constant_pad_nd --------------------------------------------------------------
// attrs: pad ((before, after) pairs from the last dim backwards), value,
// int_value (integer fills). Negative pads crop.

Shape padded_shape(std::string_view op, const TensorMeta& x, const Shape& pad) {
  DTR_CHECK(pad.size() % 2 == 0, ValueError, "{}: padding length must be even, got {} values {}", op,
            pad.size(), shape_str(pad));
  DTR_CHECK(int64_t(pad.size() / 2) <= x.dim(), ValueError,
            "{}: padding length {} is too large for an input of {} dims (shape {})", op, pad.size(),
            x.dim(), shape_str(x.shape));
  Shape out = x.shape;
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    const size_t d = size_t(x.dim()) - 1 - i;
    out[d] = x.shape[d] + pad[2 * i] + pad[2 * i + 1];
    DTR_CHECK(out[d] >= 0, ValueError,
              "{}: the input size {} plus padding {} and {} gives a negative output size at "
              "dimension {} of input {}",
              op, x.shape[d], pad[2 * i], pad[2 * i + 1], d, shape_str(x.shape));
  }
  return out;
}

void infer_constant_pad(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  out.push_back(out_meta(padded_shape("pad", in[0], a.ints("pad")), in[0].dtype, in[0].device));
}

Tensor constant_pad(const Tensor& x, const Shape& pad, double value) {
  static const OpDef& o = op("constant_pad_nd");
  Attrs a{{"pad", pad}, {"value", value}};
  if (!is_floating(x.dtype()) && value == std::floor(value) && std::abs(value) < 0x1p62) {
    a.set("int_value", int64_t(value));
  }
  return dispatch1(o, {x}, std::move(a));
}

// The gradient of padding by p is padding by -p (cropping what was added,
// zero-filling what was cropped), as PyTorch.
std::vector<Tensor> constant_pad_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  Shape neg = ctx.attrs.ints("pad");
  for (int64_t& p : neg) p = -p;
  return {constant_pad(g[0], neg, 0.0)};
}

// ---- reflection_pad ----------------------------------------------------------------
// attrs: pad, 2 values (last dim: left, right) or 4 (left, right, top, bottom).

/// Checks a reflect pad of x: the ranks and the limit pad < input size.
Shape reflect_shape(std::string_view op, const TensorMeta& x, const Shape& pad) {
  check_floating(op, x);
  DTR_CHECK(pad.size() == 2 || pad.size() == 4, ValueError,
            "{}: reflect padding takes 2 or 4 values, got {}", op, shape_str(pad));
  const int64_t k = int64_t(pad.size()) / 2;  // padded dims
  DTR_CHECK(x.dim() == k + 1 || x.dim() == k + 2, ValueError,
            "{}: reflect padding of the last {} dim(s) expects a {}-D or {}-D input, got shape {}",
            op, k, k + 1, k + 2, shape_str(x.shape));
  for (int64_t i = 0; i < k; ++i) {
    const int64_t d = x.dim() - 1 - i, size = x.shape[size_t(d)];
    DTR_CHECK(pad[2 * i] < size && pad[2 * i + 1] < size, ValueError,
              "{}: padding size should be less than the corresponding input dimension, but got "
              "padding ({}, {}) at dimension {} of input {}",
              op, pad[2 * i], pad[2 * i + 1], d, shape_str(x.shape));
  }
  const Shape out = padded_shape(op, x, pad);
  for (int64_t i = 0; i < k; ++i) {
    DTR_CHECK(out[size_t(x.dim() - 1 - i)] > 0, ValueError,
              "{}: input {} padded by {} gives output shape {}: sizes must be positive", op,
              shape_str(x.shape), shape_str(pad), shape_str(out));
  }
  return out;
}

void infer_reflection_pad(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  out.push_back(out_meta(reflect_shape("pad", in[0], a.ints("pad")), in[0].dtype, in[0].device));
}

/// The meta of a gradient row's input_size of `like`'s dtype; ValueError
/// for a negative size.
TensorMeta input_meta(const Attrs& a, const TensorMeta& like, std::string_view op) {
  const Shape& v = a.ints("input_size");
  for (int64_t d : v) {
    DTR_CHECK(d >= 0, ValueError, "{}: input_size {} has a negative size", op, shape_str(v));
  }
  return out_meta(v, like.dtype, like.device);
}

/// A gradient row's grad must have the forward's output shape.
void check_grad_shape(std::string_view op, const TensorMeta& grad, const Shape& forward_out) {
  DTR_CHECK(grad.shape == forward_out, ValueError,
            "{}: grad of shape {} does not match the forward's output shape {}", op,
            shape_str(grad.shape), shape_str(forward_out));
}

void infer_reflection_pad_backward(std::span<const TensorMeta> in, const Attrs& a,
                                   std::vector<TensorMeta>& out) {
  constexpr std::string_view kOp = "reflection_pad_backward";
  const TensorMeta x = input_meta(a, in[0], kOp);
  check_grad_shape(kOp, in[0], reflect_shape(kOp, x, a.ints("pad")));
  out.push_back(x);
}

std::vector<Tensor> reflection_pad_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("reflection_pad_backward");
  return {dispatch1(o, {g[0]},
                    Attrs{{"pad", ctx.attrs.ints("pad")}, {"input_size", ctx.input_metas[0].shape}})};
}

// ---- upsample_nearest2d, upsample_bilinear2d ----------------------------------------
// attrs: output_size (two ints), scale_h, scale_w (the scale_factor the
// caller gave, 0 when it gave a size: the kernels then use in / out),
// align_corners (bilinear). Gradient rows add input_size.

Shape upsample_shape(std::string_view op, const TensorMeta& x, const Attrs& a) {
  check_floating(op, x);
  DTR_CHECK(x.dim() == 4, ValueError, "{}: expected a 4-D input (N, C, H, W), got shape {}", op,
            shape_str(x.shape));
  const Shape& o = a.ints("output_size");
  DTR_CHECK(o.size() == 2 && o[0] > 0 && o[1] > 0, ValueError,
            "{}: output_size must be two positive values, got {}", op, shape_str(o));
  DTR_CHECK(x.shape[2] > 0 && x.shape[3] > 0, ValueError,
            "{}: expected an input with non-zero spatial size, got shape {}", op, shape_str(x.shape));
  DTR_CHECK(a.f("scale_h") >= 0 && a.f("scale_w") >= 0, ValueError,
            "{}: scales must be non-negative, got {} and {}", op, a.f("scale_h"), a.f("scale_w"));
  return {x.shape[0], x.shape[1], o[0], o[1]};
}

void infer_upsample_nearest(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  out.push_back(out_meta(upsample_shape("upsample_nearest2d", in[0], a), in[0].dtype, in[0].device));
}
void infer_upsample_bilinear(std::span<const TensorMeta> in, const Attrs& a,
                             std::vector<TensorMeta>& out) {
  out.push_back(out_meta(upsample_shape("upsample_bilinear2d", in[0], a), in[0].dtype, in[0].device));
}

void infer_upsample_backward(std::span<const TensorMeta> in, const Attrs& a,
                             std::vector<TensorMeta>& out) {
  const std::string_view op =
      a.has("align_corners") ? "upsample_bilinear2d_backward" : "upsample_nearest2d_backward";
  const TensorMeta x = input_meta(a, in[0], op);
  check_grad_shape(op, in[0], upsample_shape(op, x, a));
  out.push_back(x);
}

std::vector<Tensor> upsample_backward(const OpDef& o, const BackwardContext& ctx, const Tensor& g) {
  Attrs a = ctx.attrs;
  a.set("input_size", ctx.input_metas[0].shape);
  return {dispatch1(o, {g}, std::move(a))};
}
std::vector<Tensor> upsample_nearest_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("upsample_nearest2d_backward");
  return upsample_backward(o, ctx, g[0]);
}
std::vector<Tensor> upsample_bilinear_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("upsample_bilinear2d_backward");
  return upsample_backward(o, ctx, g[0]);
}

}  // namespace

void register_resample_ops() {
  auto& R = OpRegistry::instance();
  using param::ints, param::f, param::b;
  R.define(OpDef{.name = "constant_pad_nd",
                 .params = {ints("pad"), f("value", 0.0), param::optional(param::i("int_value"))},
                 .infer = infer_constant_pad, .backward = constant_pad_backward, .save = kSaveNone,
                 .min_inputs = 1, .max_inputs = 1});
  // PyTorch's CPU autocast runs reflection_pad1d/2d in float32; its CUDA
  // lists leave them out (Note [autocast lists]).
  R.define(OpDef{.name = "reflection_pad", .params = {ints("pad")}, .infer = infer_reflection_pad,
                 .backward = reflection_pad_backward, .autocast_cpu = AutocastPolicy::kFloat32,
                 .save = kSaveNone,
                 .min_inputs = 1, .max_inputs = 1});
  R.define(OpDef{.name = "reflection_pad_backward", .params = {ints("pad"), ints("input_size")},
                 .infer = infer_reflection_pad_backward, .save = kSaveNone,
                 .min_inputs = 1, .max_inputs = 1});
  const std::vector<ParamSpec> kNearest{ints("output_size"), f("scale_h", 0.0), f("scale_w", 0.0)};
  std::vector<ParamSpec> bilinear = kNearest;
  bilinear.push_back(b("align_corners", false));
  auto with_input_size = [](std::vector<ParamSpec> p) {
    p.push_back(ints("input_size"));
    return p;
  };
  R.define(OpDef{.name = "upsample_nearest2d", .params = kNearest, .infer = infer_upsample_nearest,
                 .backward = upsample_nearest_backward, .save = kSaveNone,
                 .min_inputs = 1, .max_inputs = 1});
  R.define(OpDef{.name = "upsample_nearest2d_backward", .params = with_input_size(kNearest),
                 .infer = infer_upsample_backward, .save = kSaveNone,
                 .min_inputs = 1, .max_inputs = 1});
  R.define(OpDef{.name = "upsample_bilinear2d", .params = bilinear, .infer = infer_upsample_bilinear,
                 .backward = upsample_bilinear_backward, .save = kSaveNone,
                 .min_inputs = 1, .max_inputs = 1});
  R.define(OpDef{.name = "upsample_bilinear2d_backward", .params = with_input_size(bilinear),
                 .infer = infer_upsample_backward, .save = kSaveNone,
                 .min_inputs = 1, .max_inputs = 1});
}

}  // namespace ops

/// torch.nn.functional.pad. `pad` holds (before, after) pairs, the first for
/// the last dim, the next for the one before, ... (at most x.dim() pairs).
/// mode "constant": any rank and dtype, filled with `value` (default 0);
/// negative pads crop. mode "reflect": floating x, `pad` of 2 values (the
/// last dim of a 2-D or 3-D input) or 4 (the last two dims of a 3-D or 4-D
/// input), each smaller than the size it pads (the edge is not repeated:
/// reflect([1, 2, 3], (2, 0)) = [3, 2, 1, 2, 3]); under CPU autocast it
/// runs in float32 (PyTorch's CPU list). Throws ValueError for an
/// odd or too long pad, a negative output size, reflect limits or ranks, a
/// value with mode "reflect", or an unknown mode; NotImplementedError for
/// PyTorch's "replicate" and "circular" and 3-D reflect padding; TypeError
/// for a non-floating x with mode "reflect".
Tensor pad(const Tensor& x, IntList pad, std::string_view mode, std::optional<double> value) {
  DTR_CHECK(x.defined(), ValueError, "pad: input is an undefined tensor");
  if (mode == "constant") return ops::constant_pad(x, pad.vec(), value.value_or(0.0));
  DTR_CHECK(mode != "replicate" && mode != "circular", NotImplementedError,
            "pad: mode '{}' is not implemented (constant and reflect are)", mode);
  DTR_CHECK(mode == "reflect", ValueError,
            "pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got '{}'", mode);
  DTR_CHECK(!value.has_value(), ValueError,
            "pad: padding mode 'reflect' doesn't take in a value argument");
  DTR_CHECK(pad.size() != 6, NotImplementedError,
            "pad: 3-D reflect padding (6 values) is not implemented");
  static const OpDef& o = op("reflection_pad");
  return dispatch1(o, {x}, Attrs{{"pad", pad.vec()}});
}

/// torch.nn.functional.interpolate (recompute_scale_factor None) on x
/// (N, C, H, W), floating. Exactly one of `size` (one value for both dims or
/// (H_out, W_out)) and `scale_factor` (one or two positive values; output
/// size floor(in * scale), and the kernels map with 1 / scale as PyTorch)
/// is non-empty. mode "nearest": source index min(floor(dst * scale), in - 1)
/// with scale = in / out (or 1 / scale_factor) in float32, as PyTorch.
/// mode "bilinear": align_corners true maps the corner pixels' centres onto
/// each other (scale (in - 1) / (out - 1)); false (the default) maps
/// src = scale (dst + 0.5) - 0.5, clamped at 0. Throws ValueError for both
/// or neither of size and scale_factor, wrong lengths, non-positive sizes or
/// scales, align_corners with mode "nearest", an unknown mode or an input
/// that is not 4-D; NotImplementedError for PyTorch's other modes (linear,
/// bicubic, trilinear, area, nearest-exact); TypeError for non-floating x.
Tensor interpolate(const Tensor& x, IntList size, std::vector<double> scale_factor,
                   std::string_view mode, std::optional<bool> align_corners) {
  DTR_CHECK(x.defined(), ValueError, "interpolate: input is an undefined tensor");
  const bool nearest = mode == "nearest", bilinear = mode == "bilinear";
  DTR_CHECK(nearest || bilinear || !(mode == "linear" || mode == "bicubic" || mode == "trilinear" ||
                                     mode == "area" || mode == "nearest-exact"),
            NotImplementedError, "interpolate: mode '{}' is not implemented (nearest and bilinear are)",
            mode);
  DTR_CHECK(nearest || bilinear, ValueError,
            "interpolate: unknown mode '{}' (expected 'nearest' or 'bilinear')", mode);
  DTR_CHECK(!(nearest && align_corners.has_value()), ValueError,
            "interpolate: align_corners option can only be set with the interpolating modes: "
            "linear | bilinear | bicubic | trilinear");
  DTR_CHECK(x.dim() == 4, ValueError,
            "interpolate: expected a 4-D input (N, C, H, W), got shape {}", shape_str(x.shape()));
  DTR_CHECK(size.empty() != scale_factor.empty(), ValueError,
            "interpolate: {} of size or scale_factor should be defined",
            size.empty() ? "either" : "only one");
  Shape out(2);
  double scales[2] = {0.0, 0.0};
  if (!size.empty()) {
    DTR_CHECK(size.size() <= 2, ValueError,
              "interpolate: input with 2 spatial dimensions needs an output size of 1 or 2 values, "
              "got {}",
              shape_str(size.vec()));
    out[0] = size[0];
    out[1] = size[size.size() - 1];
    DTR_CHECK(out[0] > 0 && out[1] > 0, ValueError, "interpolate: output size must be positive, got {}",
              shape_str(out));
  } else {
    DTR_CHECK(scale_factor.size() <= 2, ValueError,
              "interpolate: input with 2 spatial dimensions needs a scale_factor of 1 or 2 values, got "
              "{}",
              scale_factor.size());
    for (size_t i = 0; i < 2; ++i) {
      const double s = scale_factor[std::min(i, scale_factor.size() - 1)];
      DTR_CHECK(std::isfinite(s) && s > 0, ValueError,
                "interpolate: scale_factor must be positive and finite, got {}", s);
      scales[i] = s;
      out[i] = int64_t(std::floor(double(x.size(int64_t(i) + 2)) * s));
      DTR_CHECK(out[i] > 0, ValueError,
                "interpolate: input of shape {} scaled by {} gives an empty output", shape_str(x.shape()), s);
    }
  }
  Attrs a{{"output_size", out}, {"scale_h", scales[0]}, {"scale_w", scales[1]}};
  if (nearest) {
    static const OpDef& o = op("upsample_nearest2d");
    return dispatch1(o, {x}, std::move(a));
  }
  static const OpDef& o = op("upsample_bilinear2d");
  a.set("align_corners", align_corners.value_or(false));
  return dispatch1(o, {x}, std::move(a));
}

}  // namespace dtr
