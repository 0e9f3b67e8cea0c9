// Unary elementwise ops: neg, abs, exp, log, sqrt, rsqrt, tanh, sigmoid, relu,
// reciprocal, gelu, silu, clamp, sin, cos, erf, the in-place forms neg_, exp_, sqrt_, tanh_,
// sigmoid_, relu_, clamp_ (Tensor methods), and the fused backward ops of the
// activations (relu_backward, sigmoid_backward, ...; PyTorch has the same
// names). Kernels: cpu/unary.cpp.
//
// Dtypes follow PyTorch: exp, log, sqrt, rsqrt, tanh, sigmoid and reciprocal
// of an integer or bool tensor are float32; neg, abs and relu keep integer
// dtypes and refuse bool; gelu and silu need a floating tensor; clamp
// promotes with its bounds (an integer tensor clamped to 0.5 is float32).
//
// In-place rows write through views (output 0 is input 0, with its strides)
// and reuse the out-of-place backward rule: dispatch hands autograd the
// value of input 0 from before the write.
#include <cmath>

#include "eager/ops/elementwise.h"

namespace dtr {
namespace ops {
namespace {

// ---- shape and dtype inference -------------------------------------------------

enum class UnaryKind {
  kFloatingResult,  // integer and bool inputs give float32
  kNumeric,         // keeps the input's dtype; bool refused
  kFloatingOnly,    // floating inputs only
};

template <OpName name, UnaryKind kind>
DType unary_result_dtype(const TensorMeta& x) {
  switch (kind) {
    case UnaryKind::kFloatingResult: return is_floating(x.dtype) ? x.dtype : kFloat32;
    case UnaryKind::kNumeric:
      DTR_CHECK(x.dtype != kBool, TypeError, "{}: not supported for a bool tensor (shape {})",
                name.view(), shape_str(x.shape));
      return x.dtype;
    case UnaryKind::kFloatingOnly: check_floating(name.view(), x); return x.dtype;
  }
  return x.dtype;
}

template <OpName name, UnaryKind kind>
void infer_unary(std::span<const TensorMeta> in, const Attrs&, std::vector<TensorMeta>& out) {
  out.push_back(out_meta(in[0].shape, unary_result_dtype<name, kind>(in[0]), in[0].device));
}

template <OpName name, UnaryKind kind>
void infer_unary_inplace(std::span<const TensorMeta> in, const Attrs&, std::vector<TensorMeta>& out) {
  check_inplace_result(name.view(), in[0], in[0].shape, unary_result_dtype<name, kind>(in[0]));
  out.push_back(in[0]);
}

// clamp: attrs "min" and/or "max" (doubles), "float_bounds" (a bound was a
// floating point Scalar, which promotes integer tensors to float32).
template <OpName name>
DType clamp_result_dtype(const TensorMeta& x, const Attrs& a) {
  DTR_CHECK(a.has("min") || a.has("max"), ValueError,
            "{}: at least one of 'min' or 'max' must not be None", name.view());
  DTR_CHECK(x.dtype != kBool, TypeError, "{}: not supported for a bool tensor (shape {})",
            name.view(), shape_str(x.shape));
  const DType result = ResultType().tensor(x.dtype, x.dim()).scalar(a.b_or("float_bounds", false)).get();
  if (is_integral(result)) {
    // A bound of an integer result is converted to its type; a value the
    // type cannot hold (NaN, out of range: a by-name caller's attributes)
    // would be undefined behaviour.
    double lo = 0, hi = 0;
    switch (result) {
      case kInt64: lo = -9223372036854775808.0, hi = 9223372036854775808.0; break;
      case kInt32: lo = -2147483648.0, hi = 2147483648.0; break;
      case kUInt8: lo = 0, hi = 256; break;
      default: DTR_INTERNAL_ASSERT(false, "{}: integer dtype {}", name.view(), dtype_name(result));
    }
    for (const char* key : {"min", "max"}) {
      if (!a.has(key)) continue;
      const double v = a.f(key);
      DTR_CHECK(v >= lo && v < hi, ValueError,
                "{}: {} = {} cannot be converted to the result dtype {} (pass a floating bound to "
                "promote)",
                name.view(), key, v, dtype_name(result));
    }
  }
  return result;
}

void infer_clamp(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  out.push_back(out_meta(in[0].shape, clamp_result_dtype<"clamp">(in[0], a), in[0].device));
}

void infer_clamp_(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  check_inplace_result("clamp_", in[0], in[0].shape, clamp_result_dtype<"clamp_">(in[0], a));
  out.push_back(in[0]);
}

// Backward ops: (grad_out, y) of one shape → grad_in.
template <OpName name>
void infer_activation_backward(std::span<const TensorMeta> in, const Attrs&,
                               std::vector<TensorMeta>& out) {
  DTR_CHECK(in[0].shape == in[1].shape, ValueError,
            "{}: gradient of shape {} does not match the saved tensor of shape {}", name.view(),
            shape_str(in[0].shape), shape_str(in[1].shape));
  check_floating(name.view(), in[0], "gradient");
  check_floating(name.view(), in[1], "saved tensor");
  out.push_back(out_meta(in[0].shape, promote_types(in[0].dtype, in[1].dtype), in[0].device));
}

// ---- backward rules --------------------------------------------------------------

Tensor fused_backward(const OpDef& o, const Tensor& g, const Tensor& y, Attrs attrs = {}) {
  return dispatch1(o, {g, y}, std::move(attrs));
}

std::vector<Tensor> neg_backward(const BackwardContext&, std::span<const Tensor> g) {
  return {neg(g[0])};
}

std::vector<Tensor> abs_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("abs_backward");
  return {fused_backward(o, g[0], ctx.inputs[0])};
}

// d exp(x) = exp(x): uses the saved output.
std::vector<Tensor> exp_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {mul(g[0], ctx.outputs[0])};
}

std::vector<Tensor> log_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {div(g[0], ctx.inputs[0])};
}

// d sqrt(x) = 1 / (2 sqrt(x)).
std::vector<Tensor> sqrt_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {div(g[0], mul(ctx.outputs[0], 2))};
}

// d x^-1/2 = -1/2 x^-3/2 = -1/2 rsqrt(x)^3.
std::vector<Tensor> rsqrt_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {mul(mul(g[0], -0.5), pow(ctx.outputs[0], 3))};
}

std::vector<Tensor> tanh_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("tanh_backward");
  return {fused_backward(o, g[0], ctx.outputs[0])};
}

std::vector<Tensor> sigmoid_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("sigmoid_backward");
  return {fused_backward(o, g[0], ctx.outputs[0])};
}

std::vector<Tensor> relu_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("relu_backward");
  return {fused_backward(o, g[0], ctx.outputs[0])};
}

// d 1/x = -1/x^2 = -(1/x)^2.
std::vector<Tensor> reciprocal_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  const Tensor& r = ctx.outputs[0];
  return {mul(neg(g[0]), mul(r, r))};
}

std::vector<Tensor> gelu_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("gelu_backward");
  return {fused_backward(o, g[0], ctx.inputs[0],
                         Attrs{{"tanh", ctx.attrs.b("tanh")}})};
}

std::vector<Tensor> silu_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("silu_backward");
  return {fused_backward(o, g[0], ctx.inputs[0])};
}

// The gradient passes where min <= x <= max (torch: zero outside, and at NaN).
std::vector<Tensor> clamp_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  const Tensor& x = ctx.inputs[0];
  Tensor inside;
  if (ctx.attrs.has("min")) inside = ge(x, ctx.attrs.f("min"));
  if (ctx.attrs.has("max")) {
    Tensor below_max = le(x, ctx.attrs.f("max"));
    inside = inside.defined() ? mul(inside, below_max) : below_max;
  }
  return {mul(g[0], inside)};
}

// ---- sin, cos, erf ----------------------------------------------------------------

// d sin(x) = cos(x).
std::vector<Tensor> sin_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {mul(g[0], cos(ctx.inputs[0]))};
}

// d cos(x) = -sin(x).
std::vector<Tensor> cos_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {mul(g[0], neg(sin(ctx.inputs[0])))};
}

// d erf(x) = 2/sqrt(pi) e^(-x^2).
std::vector<Tensor> erf_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  const Tensor& x = ctx.inputs[0];
  return {mul(g[0], mul(exp(neg(mul(x, x))), M_2_SQRTPI))};
}

// ---- the fused backward rows' own backward -----------------------------------------
// Note [higher-order gradients]: the rows (g, saved) -> g * f'(saved) are
// linear in g, so their gradient for g is the row itself applied to gg; for
// the saved tensor it is gg * g * d f'(saved) / d saved.

// relu'(y) and |x|' are piecewise constant: nothing for the saved tensor.
std::vector<Tensor> relu_backward_backward(const BackwardContext& ctx, std::span<const Tensor> gg) {
  static const OpDef& o = op("relu_backward");
  return {fused_backward(o, gg[0], ctx.inputs[1]), Tensor()};
}

std::vector<Tensor> abs_backward_backward(const BackwardContext& ctx, std::span<const Tensor> gg) {
  static const OpDef& o = op("abs_backward");
  return {fused_backward(o, gg[0], ctx.inputs[1]), Tensor()};
}

// tanh' = 1 - y^2: d/dy = -2y.
std::vector<Tensor> tanh_backward_backward(const BackwardContext& ctx, std::span<const Tensor> gg) {
  static const OpDef& o = op("tanh_backward");
  const Tensor& g = ctx.inputs[0];
  const Tensor& y = ctx.inputs[1];
  std::vector<Tensor> r(2);
  if (ctx.needs_grad(0)) r[0] = fused_backward(o, gg[0], y);
  if (ctx.needs_grad(1)) r[1] = mul(mul(gg[0], g), mul(y, -2.0));
  return r;
}

// sigmoid' = y (1 - y): d/dy = 1 - 2y.
std::vector<Tensor> sigmoid_backward_backward(const BackwardContext& ctx, std::span<const Tensor> gg) {
  static const OpDef& o = op("sigmoid_backward");
  const Tensor& g = ctx.inputs[0];
  const Tensor& y = ctx.inputs[1];
  std::vector<Tensor> r(2);
  if (ctx.needs_grad(0)) r[0] = fused_backward(o, gg[0], y);
  if (ctx.needs_grad(1)) r[1] = mul(mul(gg[0], g), add(mul(y, -2.0), 1.0));
  return r;
}

// silu' = s (1 + x (1 - s)), s = sigmoid(x): silu'' = s (1 - s) (2 + x (1 - 2s)).
std::vector<Tensor> silu_backward_backward(const BackwardContext& ctx, std::span<const Tensor> gg) {
  static const OpDef& o = op("silu_backward");
  const Tensor& g = ctx.inputs[0];
  const Tensor& x = ctx.inputs[1];
  std::vector<Tensor> r(2);
  if (ctx.needs_grad(0)) r[0] = fused_backward(o, gg[0], x);
  if (ctx.needs_grad(1)) {
    const Tensor s = sigmoid(x);
    const Tensor second = mul(mul(s, (1.0 - s)), add(mul(x, add(mul(s, -2.0), 1.0)), 2.0));
    r[1] = mul(mul(gg[0], g), second);
  }
  return r;
}

// gelu (erf): gelu'' = phi(x) (2 - x^2). tanh form, with u = c (x + a x^3),
// t = tanh(u): gelu'' = (1 - t^2) (u' - x t u'^2 + x u'' / 2).
std::vector<Tensor> gelu_backward_backward(const BackwardContext& ctx, std::span<const Tensor> gg) {
  static const OpDef& o = op("gelu_backward");
  const Tensor& g = ctx.inputs[0];
  const Tensor& x = ctx.inputs[1];
  const bool tanh_form = ctx.attrs.b("tanh");
  std::vector<Tensor> r(2);
  if (ctx.needs_grad(0)) r[0] = fused_backward(o, gg[0], x, Attrs{{"tanh", tanh_form}});
  if (ctx.needs_grad(1)) {
    Tensor second;
    const Tensor x2 = mul(x, x);
    if (!tanh_form) {
      const Tensor phi = mul(exp(mul(x2, -0.5)), 0.5 * M_2_SQRTPI * M_SQRT1_2);
      second = mul(phi, (2.0 - x2));
    } else {
      constexpr double kC = 0.7978845608028654;  // sqrt(2 / pi)
      constexpr double kA = 0.044715;
      const Tensor t = tanh(mul(add(x, mul(mul(x2, x), kA)), kC));
      const Tensor du = mul(add(mul(x2, 3.0 * kA), 1.0), kC);
      const Tensor d2u = mul(x, 6.0 * kA * kC);
      const Tensor inner = add(sub(du, mul(mul(x, t), mul(du, du))), mul(mul(x, d2u), 0.5));
      second = mul((1.0 - mul(t, t)), inner);
    }
    r[1] = mul(mul(gg[0], g), second);
  }
  return r;
}

// ---- rows ---------------------------------------------------------------------------

OpDef& define_row(std::string name, InferFn infer, BackwardFn backward, uint8_t save,
                  bool inplace, AutocastPolicy autocast = AutocastPolicy::kNone,
                  std::vector<ParamSpec> params = {}) {
  OpDef d{.name = std::move(name), .params = std::move(params), .infer = infer, .backward = backward};
  d.save = save;
  d.flags.strided_inputs = true;
  d.flags.inplace = inplace;
  // In-place rows never autocast: a cast copy of self would take the write.
  // `autocast` is the CUDA lists' policy; PyTorch's CPU lists hold no
  // elementwise op, so on the CPU these run in their input's dtype
  // (Note [autocast lists]).
  d.autocast = inplace ? AutocastPolicy::kNone : autocast;
  d.autocast_cpu = AutocastPolicy::kNone;
  // x; the backward rows (grad, saved tensor).
  d.inputs(d.name.ends_with("_backward") ? 2 : 1);
  return OpRegistry::instance().define(std::move(d));
}

}  // namespace

void register_unary_ops() {
  using K = UnaryKind;
  constexpr auto kF32 = AutocastPolicy::kFloat32;  // PyTorch autocast's float32 list (CUDA)
  constexpr auto kNoCast = AutocastPolicy::kNone;
  // .scalar_flops_per_element: Note [scores] (transcendental kernels).
  // gelu: the tanh approximation (approximate="tanh") or erf.
  const std::vector<ParamSpec> kGelu{param::b("tanh", false)};
  // clamp: either bound may be absent, not both (infer_clamp checks).
  const std::vector<ParamSpec> kClamp{param::optional(param::f("min")),
                                      param::optional(param::f("max")),
                                      param::optional(param::b("float_bounds", false))};
  define_row("neg", infer_unary<"neg", K::kNumeric>, neg_backward, kSaveNone, false);
  define_row("neg_", infer_unary_inplace<"neg_", K::kNumeric>, neg_backward, kSaveNone, true);
  define_row("abs", infer_unary<"abs", K::kNumeric>, abs_backward, kSaveInputs, false);
  define_row("exp", infer_unary<"exp", K::kFloatingResult>, exp_backward, kSaveOutputs, false, kF32).scalar_flops_per_element = 75;
  define_row("exp_", infer_unary_inplace<"exp_", K::kFloatingResult>, exp_backward, kSaveOutputs, true);
  define_row("log", infer_unary<"log", K::kFloatingResult>, log_backward, kSaveInputs, false, kF32).scalar_flops_per_element = 75;
  define_row("sqrt", infer_unary<"sqrt", K::kFloatingResult>, sqrt_backward, kSaveOutputs, false);
  define_row("sqrt_", infer_unary_inplace<"sqrt_", K::kFloatingResult>, sqrt_backward, kSaveOutputs, true);
  define_row("rsqrt", infer_unary<"rsqrt", K::kFloatingResult>, rsqrt_backward, kSaveOutputs, false, kF32);
  define_row("tanh", infer_unary<"tanh", K::kFloatingResult>, tanh_backward, kSaveOutputs, false).scalar_flops_per_element = 120;
  define_row("tanh_", infer_unary_inplace<"tanh_", K::kFloatingResult>, tanh_backward, kSaveOutputs, true);
  define_row("sigmoid", infer_unary<"sigmoid", K::kFloatingResult>, sigmoid_backward, kSaveOutputs, false).scalar_flops_per_element = 75;
  define_row("sigmoid_", infer_unary_inplace<"sigmoid_", K::kFloatingResult>, sigmoid_backward, kSaveOutputs, true);
  define_row("relu", infer_unary<"relu", K::kNumeric>, relu_backward, kSaveOutputs, false);
  define_row("relu_", infer_unary_inplace<"relu_", K::kNumeric>, relu_backward, kSaveOutputs, true);
  define_row("reciprocal", infer_unary<"reciprocal", K::kFloatingResult>, reciprocal_backward, kSaveOutputs, false, kF32);
  define_row("gelu", infer_unary<"gelu", K::kFloatingOnly>, gelu_backward, kSaveInputs, false, kNoCast, kGelu).scalar_flops_per_element = 130;
  define_row("silu", infer_unary<"silu", K::kFloatingOnly>, silu_backward, kSaveInputs, false).scalar_flops_per_element = 80;
  define_row("clamp", infer_clamp, clamp_backward, kSaveInputs, false, kNoCast, kClamp);
  define_row("clamp_", infer_clamp_, clamp_backward, kSaveInputs, true, kNoCast, kClamp);
  // sin, cos, erf: floating results (integer inputs give float32), as PyTorch.
  define_row("sin", infer_unary<"sin", K::kFloatingResult>, sin_backward, kSaveInputs, false);
  define_row("cos", infer_unary<"cos", K::kFloatingResult>, cos_backward, kSaveInputs, false);
  define_row("erf", infer_unary<"erf", K::kFloatingResult>, erf_backward, kSaveInputs, false);

  // Fused backward ops (grad_out, saved) → grad_in; not differentiable themselves.
  define_row("relu_backward", infer_activation_backward<"relu_backward">, relu_backward_backward, kSaveInputs, false);
  define_row("sigmoid_backward", infer_activation_backward<"sigmoid_backward">, sigmoid_backward_backward, kSaveInputs, false);
  define_row("tanh_backward", infer_activation_backward<"tanh_backward">, tanh_backward_backward, kSaveInputs, false);
  define_row("abs_backward", infer_activation_backward<"abs_backward">, abs_backward_backward, kSaveInputs, false);
  define_row("silu_backward", infer_activation_backward<"silu_backward">, silu_backward_backward, kSaveInputs, false).scalar_flops_per_element = 110;
  define_row("gelu_backward", infer_activation_backward<"gelu_backward">, gelu_backward_backward, kSaveInputs, false, kNoCast, kGelu).scalar_flops_per_element = 180;
}

}  // namespace ops

namespace {

Tensor unary(const OpDef& o, const Tensor& x, Attrs attrs = {}) {
  return dispatch1(o, {x}, std::move(attrs));
}

Tensor& unary_(const OpDef& o, Tensor& self, Attrs attrs = {}) {
  dispatch(o, std::vector<Tensor>{self}, std::move(attrs));
  return self;
}

Attrs clamp_attrs(std::optional<Scalar> min, std::optional<Scalar> max) {
  Attrs a;
  bool float_bounds = false;
  if (min.has_value()) {
    a.set("min", min->to_double());
    float_bounds = float_bounds || min->is_floating();
  }
  if (max.has_value()) {
    a.set("max", max->to_double());
    float_bounds = float_bounds || max->is_floating();
  }
  a.set("float_bounds", float_bounds);
  return a;
}

}  // namespace

/// -x (torch.neg). Same dtype; TypeError for bool.
Tensor neg(const Tensor& x) {
  static const OpDef& o = op("neg");
  return unary(o, x);
}

/// |x| (torch.abs). Same dtype; TypeError for bool.
Tensor abs(const Tensor& x) {
  static const OpDef& o = op("abs");
  return unary(o, x);
}

/// e^x (torch.exp). Integer and bool inputs give float32.
Tensor exp(const Tensor& x) {
  static const OpDef& o = op("exp");
  return unary(o, x);
}

/// Natural logarithm (torch.log). Integer and bool inputs give float32.
Tensor log(const Tensor& x) {
  static const OpDef& o = op("log");
  return unary(o, x);
}

/// Square root (torch.sqrt); NaN for negative elements. Integer inputs give float32.
Tensor sqrt(const Tensor& x) {
  static const OpDef& o = op("sqrt");
  return unary(o, x);
}

/// 1 / sqrt(x) (torch.rsqrt). Integer inputs give float32.
Tensor rsqrt(const Tensor& x) {
  static const OpDef& o = op("rsqrt");
  return unary(o, x);
}

/// Hyperbolic tangent (torch.tanh). Integer inputs give float32.
Tensor tanh(const Tensor& x) {
  static const OpDef& o = op("tanh");
  return unary(o, x);
}

/// 1 / (1 + e^-x) (torch.sigmoid). Integer inputs give float32.
Tensor sigmoid(const Tensor& x) {
  static const OpDef& o = op("sigmoid");
  return unary(o, x);
}

/// max(x, 0) (torch.relu); keeps NaN. Same dtype; TypeError for bool.
Tensor relu(const Tensor& x) {
  static const OpDef& o = op("relu");
  return unary(o, x);
}

/// 1 / x (torch.reciprocal). Integer inputs give float32.
Tensor reciprocal(const Tensor& x) {
  static const OpDef& o = op("reciprocal");
  return unary(o, x);
}

// ---- sin, cos, erf

/// Sine, elementwise (torch.sin). Any shape; integer and bool inputs give float32.
Tensor sin(const Tensor& x) {
  static const OpDef& o = op("sin");
  return unary(o, x);
}

/// Cosine, elementwise (torch.cos). Any shape; integer and bool inputs give float32.
Tensor cos(const Tensor& x) {
  static const OpDef& o = op("cos");
  return unary(o, x);
}

/// The error function 2/sqrt(pi) * integral_0^x e^(-t^2) dt (torch.erf). Any
/// shape; integer and bool inputs give float32.
Tensor erf(const Tensor& x) {
  static const OpDef& o = op("erf");
  return unary(o, x);
}

/// x * Phi(x) (torch.nn.functional.gelu): approximate "none" uses erf,
/// "tanh" the tanh approximation. TypeError for non-floating x, ValueError
/// for another `approximate`.
Tensor gelu(const Tensor& x, std::string_view approximate) {
  static const OpDef& o = op("gelu");
  DTR_CHECK(approximate == "none" || approximate == "tanh", ValueError,
            "gelu: approximate must be \"none\" or \"tanh\", got \"{}\"", approximate);
  return unary(o, x, Attrs{{"tanh", approximate == "tanh"}});
}

/// x * sigmoid(x) (torch.nn.functional.silu). TypeError for non-floating x.
Tensor silu(const Tensor& x) {
  static const OpDef& o = op("silu");
  return unary(o, x);
}

/// min(max(x, min), max) elementwise (torch.clamp); either bound may be
/// omitted, not both (ValueError). The dtype promotes with the bounds: an
/// integer tensor with a floating bound gives float32. TypeError for bool.
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  static const OpDef& o = op("clamp");
  return unary(o, x, clamp_attrs(min, max));
}

// In-place forms (Tensor.neg_ etc.): write through views, bump the version;
// TypeError when the result dtype cannot be stored in self (exp_ of an
// integer tensor), ValueError when self is expanded.
Tensor& Tensor::neg_() {
  static const OpDef& o = op("neg_");
  return unary_(o, *this);
}

Tensor& Tensor::exp_() {
  static const OpDef& o = op("exp_");
  return unary_(o, *this);
}

Tensor& Tensor::sqrt_() {
  static const OpDef& o = op("sqrt_");
  return unary_(o, *this);
}

Tensor& Tensor::tanh_() {
  static const OpDef& o = op("tanh_");
  return unary_(o, *this);
}

Tensor& Tensor::sigmoid_() {
  static const OpDef& o = op("sigmoid_");
  return unary_(o, *this);
}

Tensor& Tensor::relu_() {
  static const OpDef& o = op("relu_");
  return unary_(o, *this);
}

Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) {
  static const OpDef& o = op("clamp_");
  return unary_(o, *this, clamp_attrs(min, max));
}

}  // namespace dtr
