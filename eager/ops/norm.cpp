// Normalization: layer_norm, rms_norm, batch_norm, group_norm.
// PyTorch: torch.nn.functional.{layer_norm, rms_norm, batch_norm, group_norm}. Kernels in
// cpu/norm.cpp. Under autocast they run in float32 on CUDA and in their
// input's dtype on the CPU (PyTorch's lists, Note [autocast lists]); a
// bfloat16 or float16 input with float32 parameters (what a float32 model's
// norm layers meet under CPU autocast) computes in float32 and returns the
// input's dtype, as PyTorch's CPU kernels do (is_mixed_type).
//
// Saved state. The backward rules save only the inputs (x, weight) and
// recompute the per-row (layer_norm, rms_norm) or per-channel (batch_norm)
// statistics with the same deterministic code as forward, so they are
// bitwise the forward's. Saving the statistics as extra outputs would need
// the row's save mask to include outputs, and the mask covers all outputs:
// the full-size normalized output would then be held for backward too. The
// recomputation is one extra read of x per row or channel, while the row is
// hot in cache for layer_norm.
//
// group_norm is fused like layer_norm: the (sample, group) rows of x
// (C/G * spatial contiguous elements) take layer_norm's statistics code, the
// affine is per channel, and backward saves only x and weight.
//
// batch_norm in training mode is two ops (Note [replay equals original]):
// the pure `batch_norm` op computes (y, batch mean, batch var) and may be
// replayed any number of times; `batch_norm_update_stats_` (flagged
// side_effect, in place) then folds the batch statistics into the running
// buffers once, and is never replayed.
#include <initializer_list>

#include "eager/ops/registration.h"

namespace dtr {
namespace ops {
namespace {

/// Checks an optional affine parameter of a norm: shape `shape`, dtype of x.
void check_param(const TensorMeta& x, const TensorMeta& p, const Shape& shape, std::string_view op,
                 std::string_view what) {
  DTR_CHECK(p.dtype == x.dtype, TypeError, "{}: {} has dtype {} but input has dtype {}", op, what,
            dtype_name(p.dtype), dtype_name(x.dtype));
  DTR_CHECK(p.shape == shape, ValueError, "{}: expected {} of shape {}, got {} (input shape {})", op,
            what, shape_str(shape), shape_str(p.shape), shape_str(x.shape));
}

/// ValueError unless x's shape ends with the non-empty normalized shape `ns`.
void check_norm_shape(const TensorMeta& x, const Shape& ns, std::string_view op) {
  bool ok = int64_t(ns.size()) <= x.dim() && !ns.empty();
  for (size_t i = 0; ok && i < ns.size(); ++i) ok = x.shape[size_t(x.dim()) - ns.size() + i] == ns[i];
  DTR_CHECK(ok, ValueError,
            "{}: input of shape {} does not end with a non-empty normalized_shape {}", op,
            shape_str(x.shape), shape_str(ns));
}

/// Checks x against normalized_shape and weight/bias for layer_norm / rms_norm.
void check_row_norm(std::span<const TensorMeta> in, const Attrs& a, std::string_view op) {
  const TensorMeta& x = in[0];
  const Shape& ns = a.ints("norm_shape");
  check_floating(op, x);
  check_norm_shape(x, ns, op);
  DTR_CHECK(a.f("eps") >= 0, ValueError, "{}: eps must be non-negative, got {}", op, a.f("eps"));
  // The count first: the weight and bias are read from the positions it promises.
  const size_t n = 1 + size_t(a.b("has_weight")) + size_t(a.b("has_bias"));
  DTR_CHECK(in.size() == n, ValueError, "{}: expected {} inputs, got {}", op, n, in.size());
  size_t i = 1;
  if (a.b("has_weight")) check_param(x, in[i++], ns, op, "weight");
  if (a.b("has_bias")) check_param(x, in[i++], ns, op, "bias");
}

OpCost norm_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
  OpCost c;
  for (const auto& m : in) c.bytes += double(m.numel() * itemsize(m.dtype));
  for (const auto& m : out) c.bytes += double(m.numel() * itemsize(m.dtype));
  c.flops = 8.0 * double(in[0].numel());
  return c;
}

// ---- layer_norm, rms_norm --------------------------------------------------------

void infer_layer_norm(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  check_row_norm(in, a, "layer_norm");
  out.push_back(out_meta(in[0].shape, in[0].dtype, in[0].device));
}

void infer_rms_norm(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  DTR_CHECK(!a.b("has_bias"), ValueError, "rms_norm: takes no bias");
  check_row_norm(in, a, "rms_norm");
  out.push_back(out_meta(in[0].shape, in[0].dtype, in[0].device));
}

/// Backward rows of the row norms: (g, x, [weight]) → (gx, [gweight], [gbias]).
void infer_row_norm_backward(std::span<const TensorMeta> in, const Attrs& a,
                             std::vector<TensorMeta>& out, std::string_view op) {
  DTR_CHECK(in[0].shape == in[1].shape && in[0].dtype == in[1].dtype, ValueError,
            "{}: gradient {} {} does not match input {} {}", op, shape_str(in[0].shape),
            dtype_name(in[0].dtype), shape_str(in[1].shape), dtype_name(in[1].dtype));
  const TensorMeta& x = in[1];
  check_floating(op, x);
  const Shape& ns = a.ints("norm_shape");
  check_norm_shape(x, ns, op);  // callable by name: the kernels read rows of ns's size
  out.push_back(out_meta(x.shape, x.dtype, x.device));
  if (a.b("has_weight")) {
    DTR_CHECK(in.size() == 3, ValueError, "{}: expected the weight as input 2", op);
    check_param(x, in[2], ns, op, "weight");
    out.push_back(out_meta(ns, x.dtype, x.device));
  }
  if (a.b("has_bias")) out.push_back(out_meta(ns, x.dtype, x.device));
}

void infer_layer_norm_backward(std::span<const TensorMeta> in, const Attrs& a,
                               std::vector<TensorMeta>& out) {
  infer_row_norm_backward(in, a, out, "layer_norm_backward");
}
void infer_rms_norm_backward(std::span<const TensorMeta> in, const Attrs& a,
                             std::vector<TensorMeta>& out) {
  infer_row_norm_backward(in, a, out, "rms_norm_backward");
}

/// Note [higher-order gradients]: in a backward with create_graph, the
/// gradients of layer_norm / rms_norm come from the same formula written with
/// differentiable ops (mean, rsqrt, ...), so they can be differentiated again;
/// the fused rows stay the first-order path.
std::vector<Tensor> row_norm_composite_grads(const BackwardContext& ctx, const Tensor& g, bool rms) {
  const bool has_weight = ctx.attrs.b("has_weight"), has_bias = ctx.attrs.b("has_bias");
  const int64_t k = int64_t(ctx.attrs.ints("norm_shape").size());
  Shape dims;
  for (int64_t d = -k; d < 0; ++d) dims.push_back(d);
  const Tensor& x = ctx.inputs[0];
  const Tensor w = has_weight ? ctx.inputs[1] : Tensor();
  const Tensor b = has_bias ? ctx.inputs[has_weight ? 2 : 1] : Tensor();
  const double eps = ctx.attrs.f("eps");
  Tensor y;
  if (rms) {
    y = mul(x, rsqrt(add(mean(mul(x, x), dims, true), eps)));
  } else {
    const Tensor xc = sub(x, mean(x, dims, true));
    y = mul(xc, rsqrt(add(mean(mul(xc, xc), dims, true), eps)));
  }
  if (has_weight) y = mul(y, w);
  if (has_bias) y = add(y, b);
  std::vector<Tensor> forward_inputs{x};
  if (has_weight) forward_inputs.push_back(w);
  if (has_bias) forward_inputs.push_back(b);
  std::vector<Tensor> wrt;
  std::vector<size_t> where;
  for (size_t i = 0; i < forward_inputs.size(); ++i) {
    if (ctx.needs_grad(i) && forward_inputs[i].requires_grad()) {
      wrt.push_back(forward_inputs[i]);
      where.push_back(i);
    }
  }
  std::vector<Tensor> out(forward_inputs.size());
  if (wrt.empty()) return out;
  std::vector<Tensor> grads = autograd::grad({y}, wrt, {g}, /*retain_graph=*/true,
                                             /*create_graph=*/true, /*allow_unused=*/true);
  for (size_t j = 0; j < where.size(); ++j) out[where[j]] = grads[j];
  return out;
}

/// Runs backward row `o` on (g, x, [weight]) and returns one gradient per
/// forward input (x, [weight], [bias]).
std::vector<Tensor> row_norm_grads(const OpDef& o, const BackwardContext& ctx, const Tensor& g) {
  if (autograd::in_create_graph() && is_grad_enabled())
    return row_norm_composite_grads(ctx, g, o.name == "rms_norm_backward");
  std::vector<Tensor> ins{g, ctx.inputs[0]};
  if (ctx.attrs.b("has_weight")) ins.push_back(ctx.inputs[1]);
  std::vector<Tensor> outs = dispatch(o, ins, ctx.attrs);
  return outs;  // gx, [gweight], [gbias]: already in forward input order
}

std::vector<Tensor> layer_norm_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("layer_norm_backward");
  return row_norm_grads(o, ctx, g[0]);
}

std::vector<Tensor> rms_norm_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("rms_norm_backward");
  return row_norm_grads(o, ctx, g[0]);
}

// ---- group_norm ------------------------------------------------------------------

/// Checks x (N, C, *) against num_groups and the optional weight/bias (C) after x.
void check_group_norm(std::span<const TensorMeta> in, const Attrs& a, std::string_view op) {
  const TensorMeta& x = in[0];
  check_floating(op, x);
  DTR_CHECK(x.dim() >= 2, ValueError,
            "{}: expected at least 2 dimensions for input tensor but received shape {}", op,
            shape_str(x.shape));
  const int64_t G = a.i("num_groups");
  DTR_CHECK(G > 0 && x.shape[1] % G == 0, ValueError,
            "{}: expected number of channels in input to be divisible by num_groups (a positive "
            "number), but got input of shape {} and num_groups={}",
            op, shape_str(x.shape), G);
  DTR_CHECK(a.f("eps") >= 0, ValueError, "{}: eps must be non-negative, got {}", op, a.f("eps"));
  const Shape c{x.shape[1]};
  const size_t n = 1 + size_t(a.b("has_weight")) + size_t(a.b("has_bias"));
  DTR_CHECK(in.size() == n, ValueError, "{}: expected {} inputs, got {}", op, n, in.size());
  size_t i = 1;
  if (a.b("has_weight")) check_param(x, in[i++], c, op, "weight");
  if (a.b("has_bias")) check_param(x, in[i++], c, op, "bias");
}

void infer_group_norm(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  check_group_norm(in, a, "group_norm");
  out.push_back(out_meta(in[0].shape, in[0].dtype, in[0].device));
}

// group_norm_backward: (g, x, [weight]) → (gx, [gweight], [gbias]).
void infer_group_norm_backward(std::span<const TensorMeta> in, const Attrs& a,
                               std::vector<TensorMeta>& out) {
  constexpr std::string_view kOp = "group_norm_backward";
  DTR_CHECK(in[0].shape == in[1].shape && in[0].dtype == in[1].dtype, ValueError,
            "{}: gradient {} {} does not match input {} {}", kOp, shape_str(in[0].shape),
            dtype_name(in[0].dtype), shape_str(in[1].shape), dtype_name(in[1].dtype));
  Attrs forward = a;
  forward.set("has_bias", false);
  check_group_norm(in.subspan(1), forward, kOp);
  const TensorMeta& x = in[1];
  out.push_back(out_meta(x.shape, x.dtype, x.device));
  if (a.b("has_weight")) out.push_back(out_meta({x.shape[1]}, x.dtype, x.device));
  if (a.b("has_bias")) out.push_back(out_meta({x.shape[1]}, x.dtype, x.device));
}

std::vector<Tensor> group_norm_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("group_norm_backward");
  return row_norm_grads(o, ctx, g[0]);
}

// ---- batch_norm ------------------------------------------------------------------

/// Checks x (N, C, *) and the optional weight/bias (C) that follow input `first`.
void check_batch_norm(std::span<const TensorMeta> in, size_t first, const Attrs& a,
                      std::string_view op) {
  const TensorMeta& x = in[0];
  check_floating(op, x);
  DTR_CHECK(x.dim() >= 2, ValueError, "{}: expected input of shape (N, C, ...), got {}", op,
            shape_str(x.shape));
  DTR_CHECK(a.f("eps") >= 0, ValueError, "{}: eps must be non-negative, got {}", op, a.f("eps"));
  const Shape c{x.shape[1]};
  const size_t n = first + size_t(a.b("has_weight")) + size_t(a.b("has_bias"));
  DTR_CHECK(in.size() == n, ValueError, "{}: expected {} inputs, got {}", op, n, in.size());
  size_t i = first;
  if (a.b("has_weight")) check_param(x, in[i++], c, op, "weight");
  if (a.b("has_bias")) check_param(x, in[i++], c, op, "bias");
}

DType stats_dtype(DType x) { return x == kFloat64 ? kFloat64 : kFloat32; }

// batch_norm (training, pure): (x, [weight], [bias]) → (y, mean (C), var (C)).
void infer_batch_norm(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  check_batch_norm(in, 1, a, "batch_norm");
  const TensorMeta& x = in[0];
  DTR_CHECK(x.numel() / std::max<int64_t>(x.shape[1], 1) > 1, ValueError,
            "batch_norm: expected more than 1 value per channel when training, got input of shape {}",
            shape_str(x.shape));
  out.push_back(out_meta(x.shape, x.dtype, x.device));
  out.push_back(out_meta({x.shape[1]}, stats_dtype(x.dtype), x.device));
  out.push_back(out_meta({x.shape[1]}, stats_dtype(x.dtype), x.device));
}

// batch_norm_inference: (x, running_mean, running_var, [weight], [bias]) → y.
void infer_batch_norm_inference(std::span<const TensorMeta> in, const Attrs& a,
                                std::vector<TensorMeta>& out) {
  DTR_CHECK(in.size() >= 3, ValueError, "batch_norm: running_mean and running_var are required");
  check_batch_norm(in, 3, a, "batch_norm");
  const Shape c{in[0].shape[1]};
  check_param(in[0], in[1], c, "batch_norm", "running_mean");
  check_param(in[0], in[2], c, "batch_norm", "running_var");
  out.push_back(out_meta(in[0].shape, in[0].dtype, in[0].device));
}

// batch_norm_update_stats_ (in place): (running (C), statistic (C)) → running.
void infer_update_stats(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  DTR_CHECK(is_floating(in[0].dtype) && is_floating(in[1].dtype), TypeError,
            "batch_norm: running statistics must be floating point, got {}", dtype_name(in[0].dtype));
  DTR_CHECK(in[0].dim() == 1 && in[0].shape == in[1].shape, ValueError,
            "batch_norm: running statistic of shape {} does not match the {} channels of the input",
            shape_str(in[0].shape), in[1].numel());
  DTR_CHECK(a.f("momentum") >= 0 && a.f("momentum") <= 1, ValueError,
            "batch_norm: momentum must be in [0, 1], got {}", a.f("momentum"));
  out.push_back(in[0]);
}

// batch_norm_backward: (g, x, [running_mean, running_var], [weight]) →
// (gx, [gweight], [gbias]).
void infer_batch_norm_backward(std::span<const TensorMeta> in, const Attrs& a,
                               std::vector<TensorMeta>& out) {
  DTR_CHECK(in[0].shape == in[1].shape && in[0].dtype == in[1].dtype, ValueError,
            "batch_norm_backward: gradient {} {} does not match input {} {}", shape_str(in[0].shape),
            dtype_name(in[0].dtype), shape_str(in[1].shape), dtype_name(in[1].dtype));
  const TensorMeta& x = in[1];
  check_floating("batch_norm_backward", x);
  DTR_CHECK(x.dim() >= 2, ValueError,
            "batch_norm_backward: expected an input of at least 2 dims (N, C, ...), got shape {}",
            shape_str(x.shape));
  const Shape c{x.shape[1]};
  const size_t expected = 2 + (a.b("training") ? 0 : 2) + (a.b("has_weight") ? 1 : 0);
  DTR_CHECK(in.size() == expected, ValueError, "batch_norm_backward: expected {} inputs, got {}",
            expected, in.size());
  for (size_t i = 2; i < in.size(); ++i) check_param(x, in[i], c, "batch_norm_backward", "parameter");
  out.push_back(out_meta(x.shape, x.dtype, x.device));
  if (a.b("has_weight")) out.push_back(out_meta(c, x.dtype, x.device));
  if (a.b("has_bias")) out.push_back(out_meta(c, x.dtype, x.device));
}

/// Gradients of (x, [weight], [bias]) from batch_norm_backward.
std::vector<Tensor> batch_norm_grads(const BackwardContext& ctx, const Tensor& g, bool training,
                                     std::span<const Tensor> running, const Tensor& weight) {
  static const OpDef& o = op("batch_norm_backward");
  std::vector<Tensor> ins{g, ctx.inputs[0]};
  ins.insert(ins.end(), running.begin(), running.end());
  if (weight.defined()) ins.push_back(weight);
  Attrs attrs = ctx.attrs;
  attrs.set("training", training);
  return dispatch(o, ins, std::move(attrs));
}

std::vector<Tensor> batch_norm_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  const Tensor weight = ctx.attrs.b("has_weight") ? ctx.inputs[1] : Tensor();
  return batch_norm_grads(ctx, g[0], /*training=*/true, {}, weight);
}

std::vector<Tensor> batch_norm_inference_backward(const BackwardContext& ctx,
                                                  std::span<const Tensor> g) {
  const Tensor weight = ctx.attrs.b("has_weight") ? ctx.inputs[3] : Tensor();
  std::vector<Tensor> grads =
      batch_norm_grads(ctx, g[0], /*training=*/false, ctx.inputs.subspan(1, 2), weight);
  // Inputs are (x, running_mean, running_var, [weight], [bias]).
  grads.insert(grads.begin() + 1, 2, Tensor());
  return grads;
}

/// A fused norm row (x, [weight], [bias]) → y: run in float32 under CUDA
/// autocast and in x's dtype under CPU autocast (Note [autocast lists]),
/// inputs saved for a backward that recomputes the statistics.
void define_norm(OpRegistry& R, std::string name, std::vector<ParamSpec> params, InferFn infer,
                 BackwardFn backward) {
  OpDef d{.name = std::move(name), .params = std::move(params), .infer = infer, .cost = norm_cost,
          .backward = backward};
  d.autocast = AutocastPolicy::kFloat32;
  d.autocast_cpu = AutocastPolicy::kNone;
  d.save = kSaveInputs;
  d.min_inputs = 1;
  d.max_inputs = 3;
  R.define(std::move(d));
}

}  // namespace

void register_norm_ops() {
  auto& R = OpRegistry::instance();
  using param::b, param::f;
  // has_weight / has_bias: which optional inputs follow x.
  const std::vector<ParamSpec> kLayerNorm{param::ints("norm_shape"), f("eps", 1e-5),
                                          b("has_weight"), b("has_bias")};
  // rms_norm's eps defaults to the machine epsilon of x's dtype: no fixed default.
  const std::vector<ParamSpec> kRmsNorm{param::ints("norm_shape"), f("eps"), b("has_weight"),
                                        b("has_bias")};
  const std::vector<ParamSpec> kBatchNorm{f("eps", 1e-5), b("has_weight"), b("has_bias")};
  std::vector<ParamSpec> batch_norm_grad = kBatchNorm;
  batch_norm_grad.push_back(b("training"));  // batch statistics (else the running ones)

  define_norm(R, "layer_norm", kLayerNorm, infer_layer_norm, layer_norm_backward);
  define_norm(R, "rms_norm", kRmsNorm, infer_rms_norm, rms_norm_backward);

  OpDef bn{.name = "batch_norm", .params = kBatchNorm, .infer = infer_batch_norm, .cost = norm_cost,
           .backward = batch_norm_backward};
  bn.autocast = AutocastPolicy::kFloat32;
  bn.autocast_cpu = AutocastPolicy::kNone;  // not on PyTorch's CPU lists
  bn.save = kSaveInputs;
  bn.scalar_flops_per_element = 90;  // Note [scores]
  bn.min_inputs = 1;
  bn.max_inputs = 3;
  R.define(std::move(bn));

  OpDef bn_inf{.name = "batch_norm_inference", .params = kBatchNorm, .infer = infer_batch_norm_inference,
               .cost = norm_cost, .backward = batch_norm_inference_backward};
  bn_inf.autocast = AutocastPolicy::kFloat32;
  bn_inf.autocast_cpu = AutocastPolicy::kNone;
  bn_inf.save = kSaveInputs;
  bn_inf.nondiff_inputs = (1u << 1) | (1u << 2);  // the running statistics
  bn_inf.min_inputs = 3;
  bn_inf.max_inputs = 5;
  R.define(std::move(bn_inf));

  const std::vector<ParamSpec> kGroupNorm{param::i("num_groups"), f("eps", 1e-5), b("has_weight"),
                                          b("has_bias")};
  define_norm(R, "group_norm", kGroupNorm, infer_group_norm, group_norm_backward);
  R.define(OpDef{.name = "group_norm_backward", .params = kGroupNorm,
                 .infer = infer_group_norm_backward, .cost = norm_cost, .save = kSaveNone,
                 .min_inputs = 2, .max_inputs = 3});

  // Never replayed: its output (the running buffer) becomes a constant.
  // running = (1 - momentum) * running + momentum * scale * statistic.
  OpDef update{.name = "batch_norm_update_stats_", .params = {f("momentum"), f("scale")},
               .infer = infer_update_stats};
  update.flags.inplace = true;
  update.flags.side_effect = true;
  update.flags.strided_inputs = true;
  update.save = kSaveNone;
  update.inputs(2);
  R.define(std::move(update));

  // Kernels of backward rules (run under NoGradGuard: no backward of their own).
  R.define(OpDef{.name = "layer_norm_backward", .params = kLayerNorm, .infer = infer_layer_norm_backward,
                 .cost = norm_cost, .save = kSaveNone,
                 .min_inputs = 2, .max_inputs = 3});
  R.define(OpDef{.name = "rms_norm_backward", .params = kRmsNorm, .infer = infer_rms_norm_backward, .cost = norm_cost,
                 .save = kSaveNone,
                 .min_inputs = 2, .max_inputs = 3});
  R.define(OpDef{.name = "batch_norm_backward", .params = batch_norm_grad, .infer = infer_batch_norm_backward,
                 .cost = norm_cost, .save = kSaveNone,
                 .min_inputs = 2, .max_inputs = 5});
}

}  // namespace ops

namespace {
/// x, then the defined ones of weight and bias.
std::vector<Tensor> with_affine(std::vector<Tensor> ins, const Tensor& weight, const Tensor& bias) {
  if (weight.defined()) ins.push_back(weight);
  if (bias.defined()) ins.push_back(bias);
  return ins;
}

/// PyTorch's norm kernels take a bfloat16 or float16 x with float32
/// parameters ("mixed type"): what a float32 model's norm layers meet under
/// CPU autocast, whose lists leave norms in their input's dtype. True when x
/// is such and every defined tensor of `params` (at least one) is float32.
bool is_mixed_type(const Tensor& x, std::initializer_list<const Tensor*> params) {
  if (!x.defined() || (x.dtype() != kBFloat16 && x.dtype() != kFloat16)) return false;
  bool any = false;
  for (const Tensor* p : params) {
    if (!p->defined()) continue;
    if (p->dtype() != kFloat32) return false;
    any = true;
  }
  return any;
}

/// torch.finfo(dtype).eps.
double machine_epsilon(DType t) {
  switch (t) {
    case kFloat64: return 2.220446049250313e-16;
    case kFloat16: return 0.0009765625;
    case kBFloat16: return 0.0078125;
    default: return 1.1920928955078125e-07;
  }
}
}  // namespace

/// torch.nn.functional.layer_norm: normalizes over the trailing dims given by
/// normalized_shape, y = (x - mean) / sqrt(var + eps) * weight + bias with
/// the biased variance. x (*, normalized_shape...), floating; weight and bias
/// of shape normalized_shape and x's dtype, or undefined; output of x's
/// dtype. A bfloat16 or float16 x with float32 parameters (mixed type, as
/// PyTorch's kernels take: a float32 model under CPU autocast) is normalized
/// in float32 and the result rounded to x's dtype. Throws ValueError when x
/// does not end with normalized_shape or a parameter's shape differs,
/// TypeError for non-floating x or a parameter of another dtype.
Tensor layer_norm(const Tensor& x, IntList normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  static const OpDef& o = op("layer_norm");
  if (is_mixed_type(x, {&weight, &bias})) {
    return layer_norm(x.to(kFloat32), normalized_shape, weight, bias, eps).to(x.dtype());
  }
  return dispatch1(o, with_affine({x}, weight, bias),
                   Attrs{{"norm_shape", normalized_shape.vec()},
                         {"eps", eps},
                         {"has_weight", weight.defined()},
                         {"has_bias", bias.defined()}});
}

/// torch.nn.functional.rms_norm: y = x / sqrt(mean(x^2) + eps) * weight over
/// the trailing normalized_shape dims. eps defaults to torch.finfo(x.dtype).eps
/// (of x's own dtype, also under autocast). Shapes and errors as layer_norm,
/// but a bfloat16 or float16 x with a float32 weight gives, as PyTorch's
/// rms_norm, the normalized x in x's dtype times the weight: float32.
Tensor rms_norm(const Tensor& x, IntList normalized_shape, const Tensor& weight,
                std::optional<double> eps) {
  static const OpDef& o = op("rms_norm");
  if (is_mixed_type(x, {&weight})) return mul(rms_norm(x, normalized_shape, Tensor(), eps), weight);
  return dispatch1(o, with_affine({x}, weight, Tensor()),
                   Attrs{{"norm_shape", normalized_shape.vec()},
                         {"eps", eps.value_or(machine_epsilon(x.dtype()))},
                         {"has_weight", weight.defined()},
                         {"has_bias", false}});
}

/// torch.nn.functional.batch_norm on x (N, C, *), floating. weight, bias,
/// running_mean and running_var are (C) of x's dtype, or undefined; output
/// of x's dtype. A bfloat16 or float16 x with float32 parameters and running
/// statistics (mixed type, as layer_norm) is normalized in float32 and the
/// result rounded to x's dtype; the float32 running statistics are updated
/// from float32 batch statistics.
/// training: normalizes with the batch statistics (biased variance) and, when
/// the running buffers are given, updates them in place once:
/// running = (1 - momentum) * running + momentum * statistic, with the
/// unbiased batch variance for running_var. Throws ValueError when a channel
/// has a single value. eval: normalizes with the running statistics
/// (ValueError if they are undefined). Other errors as layer_norm.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  if (is_mixed_type(x, {&running_mean, &running_var, &weight, &bias})) {
    return batch_norm(x.to(kFloat32), running_mean, running_var, weight, bias, training, momentum,
                      eps)
        .to(x.dtype());
  }
  const Attrs attrs{{"eps", eps}, {"has_weight", weight.defined()}, {"has_bias", bias.defined()}};
  if (!training) {
    static const OpDef& inference = op("batch_norm_inference");
    DTR_CHECK(running_mean.defined() && running_var.defined(), ValueError,
              "batch_norm: running_mean and running_var are required when not training");
    return dispatch1(inference, with_affine({x, running_mean, running_var}, weight, bias), attrs);
  }
  static const OpDef& pure = op("batch_norm");
  static const OpDef& update = op("batch_norm_update_stats_");
  DTR_CHECK(running_mean.defined() == running_var.defined(), ValueError,
            "batch_norm: give both running_mean and running_var, or neither");
  std::vector<Tensor> outs = dispatch(pure, with_affine({x}, weight, bias), attrs);
  if (running_mean.defined()) {
    // The running buffers are not part of the autograd graph.
    NoGradGuard no_grad;
    const double n = double(x.numel() / x.size(1));
    dispatch(update, std::vector<Tensor>{running_mean, outs[1]},
             Attrs{{"momentum", momentum}, {"scale", 1.0}});
    dispatch(update, std::vector<Tensor>{running_var, outs[2]},
             Attrs{{"momentum", momentum}, {"scale", n / (n - 1)}});
  }
  return outs[0];
}

/// torch.nn.functional.group_norm on x (N, C, *), floating: the C channels
/// are split into num_groups contiguous groups; each (sample, group) is
/// normalized over its C / num_groups channels and all spatial positions,
/// y = (x - mean) / sqrt(var + eps) with the biased variance, then
/// y * weight[c] + bias[c]. weight and bias: (C) of x's dtype, or undefined
/// (a bfloat16 or float16 x with float32 ones: mixed type, as layer_norm);
/// output of x's dtype. Throws ValueError for fewer than 2 dims, num_groups
/// not positive or not dividing C, a weight/bias not of shape (C) or a
/// negative eps; TypeError for non-floating x or a weight/bias of another
/// dtype.
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  static const OpDef& o = op("group_norm");
  DTR_CHECK(x.defined(), ValueError, "group_norm: input is an undefined tensor");
  if (is_mixed_type(x, {&weight, &bias})) {
    return group_norm(x.to(kFloat32), num_groups, weight, bias, eps).to(x.dtype());
  }
  return dispatch1(o, with_affine({x}, weight, bias),
                   Attrs{{"num_groups", num_groups},
                         {"eps", eps},
                         {"has_weight", weight.defined()},
                         {"has_bias", bias.defined()}});
}

}  // namespace dtr
