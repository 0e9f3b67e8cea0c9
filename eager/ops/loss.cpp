// softmax, log_softmax and the losses: cross_entropy, nll_loss, mse_loss.
// PyTorch: torch.softmax, torch.log_softmax, torch.nn.functional.{cross_entropy,
// nll_loss, mse_loss}. Kernels in cpu/loss.cpp. Under autocast the losses run
// in float32 on every device type, and softmax and log_softmax in float32 on
// CUDA but in their input's dtype on the CPU, as PyTorch's autocast lists
// (Note [autocast lists]).
//
// cross_entropy is one fused op rather than log_softmax + nll_loss: its
// backward rebuilds softmax from the saved logits (recomputing each row's
// logsumexp, the same code as forward), so no (N, C) log-probability tensor
// is kept alive for backward — only the logits, which the layer before holds
// anyway.
#include "eager/ops/registration.h"

namespace dtr {
namespace ops {
namespace {

enum Reduction : int64_t { kReductionNone = 0, kReductionMean = 1, kReductionSum = 2 };

void check_reduction_attr(const Attrs& a, std::string_view op) {
  const int64_t r = a.i("reduction");
  DTR_CHECK(r >= kReductionNone && r <= kReductionSum, ValueError, "{}: invalid reduction code {}",
            op, r);
}

/// Elementwise-ish work: a few flops per input element.
OpCost loss_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
  OpCost c;
  for (const auto& m : in) c.bytes += double(m.numel() * itemsize(m.dtype));
  for (const auto& m : out) c.bytes += double(m.numel() * itemsize(m.dtype));
  c.flops = 4.0 * double(in[0].numel());
  return c;
}

// ---- softmax, log_softmax ---------------------------------------------------------

void infer_softmax(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out,
                   std::string_view op) {
  check_floating(op, in[0]);
  const int64_t dim = a.i("dim");
  DTR_CHECK((in[0].dim() == 0 && dim == 0) || (dim >= 0 && dim < in[0].dim()), IndexError,
            "{}: dimension {} out of range for an input of shape {}", op, dim,
            shape_str(in[0].shape));
  out.push_back(out_meta(in[0].shape, in[0].dtype, in[0].device));
}

void infer_softmax_fwd(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  infer_softmax(in, a, out, "softmax");
}
void infer_log_softmax_fwd(std::span<const TensorMeta> in, const Attrs& a,
                           std::vector<TensorMeta>& out) {
  infer_softmax(in, a, out, "log_softmax");
}

// (g, y) → like y.
void infer_softmax_backward(std::span<const TensorMeta> in, const Attrs& a,
                            std::vector<TensorMeta>& out) {
  DTR_CHECK(in[0].shape == in[1].shape && in[0].dtype == in[1].dtype, ValueError,
            "softmax_backward: gradient {} {} does not match output {} {}", shape_str(in[0].shape),
            dtype_name(in[0].dtype), shape_str(in[1].shape), dtype_name(in[1].dtype));
  infer_softmax(in.subspan(1), a, out, "softmax_backward");
}

std::vector<Tensor> softmax_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("softmax_backward");
  return {dispatch1(o, {g[0], ctx.outputs[0]}, Attrs{{"dim", ctx.attrs.i("dim")}})};
}

std::vector<Tensor> log_softmax_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("log_softmax_backward");
  return {dispatch1(o, {g[0], ctx.outputs[0]}, Attrs{{"dim", ctx.attrs.i("dim")}})};
}

// The softmax_backward row y (g - sum(g y)): linear in g with a symmetric
// Jacobian, so its gradient for g is the row applied to gg; for y,
// gg (g - sum(g y)) - g sum(gg y) (Note [higher-order gradients]).
std::vector<Tensor> softmax_backward_backward(const BackwardContext& ctx, std::span<const Tensor> gg) {
  static const OpDef& o = op("softmax_backward");
  const int64_t dim = ctx.attrs.i("dim");
  const Tensor& g = ctx.inputs[0];
  const Tensor& y = ctx.inputs[1];
  std::vector<Tensor> r(2);
  if (ctx.needs_grad(0)) r[0] = dispatch1(o, {gg[0], y}, Attrs{{"dim", dim}});
  if (ctx.needs_grad(1)) {
    r[1] = sub(mul(gg[0], sub(g, sum(mul(g, y), {dim}, true))), mul(g, sum(mul(gg[0], y), {dim}, true)));
  }
  return r;
}

// The log_softmax_backward row g - exp(y) sum(g): for g, gg - sum(gg exp(y));
// for y, -gg exp(y) sum(g).
std::vector<Tensor> log_softmax_backward_backward(const BackwardContext& ctx,
                                                  std::span<const Tensor> gg) {
  const int64_t dim = ctx.attrs.i("dim");
  const Tensor& g = ctx.inputs[0];
  const Tensor p = exp(ctx.inputs[1]);
  std::vector<Tensor> r(2);
  if (ctx.needs_grad(0)) r[0] = sub(gg[0], sum(mul(gg[0], p), {dim}, true));
  if (ctx.needs_grad(1)) r[1] = neg(mul(mul(gg[0], p), sum(g, {dim}, true)));
  return r;
}

// ---- cross_entropy, nll_loss -----------------------------------------------------

/// Checks (input, target) of a class-index loss: input (C), (N, C) or
/// (N, C, d...), floating; target int64 of shape (), (N) or (N, d...).
void check_class_target(const TensorMeta& x, const TensorMeta& t, std::string_view op) {
  check_floating(op, x);
  DTR_CHECK(t.dtype == kInt64, TypeError,
            "{}: expected target of dtype int64 (class indices), got {} of shape {}", op,
            dtype_name(t.dtype), shape_str(t.shape));
  DTR_CHECK(x.dim() >= 1, ValueError, "{}: expected input of shape (C), (N, C) or (N, C, d...), got {}",
            op, shape_str(x.shape));
  Shape expected;
  if (x.dim() >= 2) {
    expected.push_back(x.shape[0]);
    for (int64_t d = 2; d < x.dim(); ++d) expected.push_back(x.shape[size_t(d)]);
  }
  DTR_CHECK(t.shape == expected, ValueError,
            "{}: expected target of shape {} for input of shape {}, got target of shape {}", op,
            shape_str(expected), shape_str(x.shape), shape_str(t.shape));
  DTR_CHECK(x.shape[x.dim() == 1 ? 0 : 1] > 0, ValueError, "{}: input of shape {} has no classes",
            op, shape_str(x.shape));
}

/// Loss output: the target's shape for "none", else 0-d.
TensorMeta loss_output(const TensorMeta& x, const Shape& none_shape, const Attrs& a) {
  return out_meta(a.i("reduction") == kReductionNone ? none_shape : Shape{}, x.dtype, x.device);
}

void infer_cross_entropy(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  check_class_target(in[0], in[1], "cross_entropy");
  check_reduction_attr(a, "cross_entropy");
  out.push_back(loss_output(in[0], in[1].shape, a));
}

void infer_nll_loss(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  check_class_target(in[0], in[1], "nll_loss");
  check_reduction_attr(a, "nll_loss");
  out.push_back(loss_output(in[0], in[1].shape, a));
}

/// Checks the incoming gradient of a loss against the loss's output shape.
void check_loss_grad(const TensorMeta& g, const TensorMeta& x, const Shape& none_shape,
                     const Attrs& a, std::string_view op) {
  const Shape expected = a.i("reduction") == kReductionNone ? none_shape : Shape{};
  DTR_CHECK(g.shape == expected && g.dtype == x.dtype, ValueError,
            "{}: gradient {} {} does not match the loss output {} {}", op, shape_str(g.shape),
            dtype_name(g.dtype), shape_str(expected), dtype_name(x.dtype));
}

// cross_entropy_backward row: (g, logits, target) → like logits.
void infer_cross_entropy_backward(std::span<const TensorMeta> in, const Attrs& a,
                                  std::vector<TensorMeta>& out) {
  check_class_target(in[1], in[2], "cross_entropy_backward");
  check_reduction_attr(a, "cross_entropy_backward");
  check_loss_grad(in[0], in[1], in[2].shape, a, "cross_entropy_backward");
  out.push_back(out_meta(in[1].shape, in[1].dtype, in[1].device));
}

// nll_loss_backward row: (g, target); attrs shape → like the input.
void infer_nll_loss_backward(std::span<const TensorMeta> in, const Attrs& a,
                             std::vector<TensorMeta>& out) {
  TensorMeta x = out_meta(a.ints("shape"), in[0].dtype, in[0].device);
  check_class_target(x, in[1], "nll_loss_backward");
  check_reduction_attr(a, "nll_loss_backward");
  check_loss_grad(in[0], x, in[1].shape, a, "nll_loss_backward");
  out.push_back(std::move(x));
}

std::vector<Tensor> cross_entropy_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("cross_entropy_backward");
  return {dispatch1(o, {g[0], ctx.inputs[0], ctx.inputs[1]}, ctx.attrs), Tensor()};
}

std::vector<Tensor> nll_loss_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("nll_loss_backward");
  return {dispatch1(o, {g[0], ctx.inputs[1]},
                    Attrs{{"shape", ctx.input_metas[0].shape},
                          {"ignore_index", ctx.attrs.i("ignore_index")},
                          {"reduction", ctx.attrs.i("reduction")}}),
          Tensor()};
}

// ---- mse_loss ----------------------------------------------------------------------

void check_mse_pair(const TensorMeta& a, const TensorMeta& b, std::string_view op) {
  check_floating(op, a);
  check_floating(op, b, "target");
  DTR_CHECK(a.dtype == b.dtype, TypeError,
            "{}: input and target must have the same dtype, got {} and {}", op, dtype_name(a.dtype),
            dtype_name(b.dtype));
  DTR_CHECK(a.shape == b.shape, ValueError,
            "{}: input and target must have the same shape, got {} and {}", op, shape_str(a.shape),
            shape_str(b.shape));
}

void infer_mse_loss(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  check_mse_pair(in[0], in[1], "mse_loss");
  check_reduction_attr(a, "mse_loss");
  out.push_back(loss_output(in[0], in[0].shape, a));
}

// mse_loss_backward row: (g, a, b) → like a.
void infer_mse_loss_backward(std::span<const TensorMeta> in, const Attrs& a,
                             std::vector<TensorMeta>& out) {
  check_mse_pair(in[1], in[2], "mse_loss_backward");
  check_reduction_attr(a, "mse_loss_backward");
  check_loss_grad(in[0], in[1], in[1].shape, a, "mse_loss_backward");
  out.push_back(out_meta(in[1].shape, in[1].dtype, in[1].device));
}

std::vector<Tensor> mse_loss_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("mse_loss_backward");
  std::vector<Tensor> r(2);
  const Attrs attrs{{"reduction", ctx.attrs.i("reduction")}};
  if (ctx.needs_grad(0)) r[0] = dispatch1(o, {g[0], ctx.inputs[0], ctx.inputs[1]}, attrs);
  if (ctx.needs_grad(1)) r[1] = dispatch1(o, {g[0], ctx.inputs[1], ctx.inputs[0]}, attrs);
  return r;
}

// The mse_loss_backward row (g, a, b) -> 2 (a - b) g / n (n: the element
// count for "mean", else 1; g a scalar unless "none"): linear in each input.
std::vector<Tensor> mse_loss_backward_backward(const BackwardContext& ctx,
                                               std::span<const Tensor> gg) {
  const int64_t reduction = ctx.attrs.i("reduction");
  const Tensor& g = ctx.inputs[0];
  const Tensor& a = ctx.inputs[1];
  const Tensor& b = ctx.inputs[2];
  const double scale = reduction == kReductionMean ? 2.0 / double(a.numel()) : 2.0;
  std::vector<Tensor> r(3);
  if (ctx.needs_grad(0)) {
    Tensor d = mul(mul(gg[0], sub(a, b)), scale);
    r[0] = reduction == kReductionNone ? d : reshape(sum(d), ctx.input_metas[0].shape);
  }
  if (ctx.needs_grad(1) || ctx.needs_grad(2)) {
    const Tensor d = mul(mul(gg[0], g), scale);
    if (ctx.needs_grad(1)) r[1] = d;
    if (ctx.needs_grad(2)) r[2] = neg(d);
  }
  return r;
}

}  // namespace

void register_loss_ops() {
  auto& R = OpRegistry::instance();
  using param::i;
  // reduction: 0 none, 1 mean, 2 sum (Reduction::None / Mean / Sum, eager/reduction.h).
  const std::vector<ParamSpec> kClassLoss{i("ignore_index", -100), i("reduction", 1)};
  const std::vector<ParamSpec> kNllGrad{param::ints("shape"), i("ignore_index", -100),
                                        i("reduction", 1)};

  OpDef softmax{.name = "softmax", .params = {i("dim")}, .infer = infer_softmax_fwd, .cost = loss_cost,
                .backward = softmax_backward};
  softmax.autocast = AutocastPolicy::kFloat32;
  softmax.autocast_cpu = AutocastPolicy::kNone;  // not on PyTorch's CPU lists
  softmax.save = kSaveOutputs;
  softmax.scalar_flops_per_element = 380;  // exp per element: Note [scores]
  softmax.inputs(1);
  R.define(std::move(softmax));

  OpDef log_softmax{.name = "log_softmax", .params = {i("dim")}, .infer = infer_log_softmax_fwd, .cost = loss_cost,
                    .backward = log_softmax_backward};
  log_softmax.autocast = AutocastPolicy::kFloat32;
  log_softmax.autocast_cpu = AutocastPolicy::kNone;  // not on PyTorch's CPU lists
  log_softmax.save = kSaveOutputs;
  log_softmax.scalar_flops_per_element = 380;  // Note [scores]
  log_softmax.inputs(1);
  R.define(std::move(log_softmax));

  OpDef ce{.name = "cross_entropy", .params = kClassLoss, .infer = infer_cross_entropy, .cost = loss_cost,
           .backward = cross_entropy_backward};
  ce.autocast = AutocastPolicy::kFloat32;
  ce.save = kSaveInputs;
  ce.nondiff_inputs = 1u << 1;
  ce.scalar_flops_per_element = 350;  // Note [scores]
  ce.inputs(2);
  R.define(std::move(ce));

  OpDef nll{.name = "nll_loss", .params = kClassLoss, .infer = infer_nll_loss, .backward = nll_loss_backward};
  nll.autocast = AutocastPolicy::kFloat32;
  nll.save = kSaveInputs;
  nll.nondiff_inputs = 1u << 1;
  nll.inputs(2);
  R.define(std::move(nll));

  OpDef mse{.name = "mse_loss", .params = {i("reduction", 1)}, .infer = infer_mse_loss, .cost = loss_cost,
            .backward = mse_loss_backward};
  mse.autocast = AutocastPolicy::kFloat32;
  mse.save = kSaveInputs;
  mse.inputs(2);
  R.define(std::move(mse));

  // Kernels of backward rules; those with a backward of their own can be
  // differentiated again (create_graph).
  R.define(OpDef{.name = "softmax_backward", .params = {i("dim")}, .infer = infer_softmax_backward, .cost = loss_cost,
                 .backward = softmax_backward_backward, .save = kSaveInputs,
                 .min_inputs = 2, .max_inputs = 2});
  R.define(OpDef{.name = "log_softmax_backward", .params = {i("dim")}, .infer = infer_softmax_backward,
                 .cost = loss_cost, .backward = log_softmax_backward_backward, .save = kSaveInputs,
                 .min_inputs = 2, .max_inputs = 2});
  R.define(OpDef{.name = "cross_entropy_backward", .params = kClassLoss, .infer = infer_cross_entropy_backward,
                 .cost = loss_cost, .save = kSaveNone,
                 .min_inputs = 3, .max_inputs = 3});
  R.define(OpDef{.name = "nll_loss_backward", .params = kNllGrad, .infer = infer_nll_loss_backward, .save = kSaveNone,
                 .min_inputs = 2, .max_inputs = 2});
  R.define(OpDef{.name = "mse_loss_backward", .params = {i("reduction", 1)}, .infer = infer_mse_loss_backward, .cost = loss_cost,
                 .backward = mse_loss_backward_backward, .save = kSaveInputs,
                 .min_inputs = 3, .max_inputs = 3});
}

}  // namespace ops

/// Softmax of `x` along `dim` (torch.softmax): exp(x - max) / sum(exp(x - max)).
/// x: any shape, floating dtype (TypeError otherwise); output like x. Throws
/// IndexError for a dim out of range. Under autocast it runs in float32 on
/// CUDA and in x's dtype on the CPU (PyTorch's lists, Note [autocast lists]).
Tensor softmax(const Tensor& x, int64_t dim) {
  static const OpDef& o = op("softmax");
  return dispatch1(o, {x}, Attrs{{"dim", normalize_dim(dim, x.dim(), "softmax")}});
}

/// log(softmax(x, dim)) computed stably as x - logsumexp(x) (torch.log_softmax).
/// Same shapes, dtypes and errors as softmax.
Tensor log_softmax(const Tensor& x, int64_t dim) {
  static const OpDef& o = op("log_softmax");
  return dispatch1(o, {x}, Attrs{{"dim", normalize_dim(dim, x.dim(), "log_softmax")}});
}

// cross_entropy, nll_loss and mse_loss, the public functions over these rows,
// are in eager/ops/loss_functions.cpp with the losses composed of other rows.

}  // namespace dtr
