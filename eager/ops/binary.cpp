// Binary elementwise ops with NumPy/PyTorch broadcasting: add and sub (with
// alpha), mul, div, pow, maximum, minimum, the comparisons eq/ne/lt/le/gt/ge
// (bool results) and where(cond, a, b); the tensor-scalar forms (rows
// "<op>_scalar", the scalar in attribute "other" as a double plus
// "other_is_float"); and the in-place Tensor methods add_, sub_, mul_, div_.
// Kernels: cpu/binary.cpp.
//
// Dtypes follow torch.result_type (core/type_promotion.h): float32 tensor *
// float64 tensor is float64, an int64 tensor + 2.5 is float32, an int32
// tensor + a 0-d int64 tensor stays int32. div of integers is float32
// (true division); comparisons give bool.
//
// In-place rows write through views (output 0 is input 0, with its strides),
// need the broadcast shape to equal self's shape (ValueError) and a result
// dtype castable to self's dtype (TypeError), and reuse the out-of-place
// backward rule: dispatch hands autograd input 0 as it was before the write.
#include <cmath>

#include "eager/ops/elementwise.h"

namespace dtr {
namespace ops {
namespace {

// ---- shape and dtype inference -------------------------------------------------

enum class BinaryKind {
  kArithmetic,  // the promoted dtype
  kSubtract,    // the promoted dtype; bool - bool refused (as torch.sub)
  kTrueDivide,  // the promoted dtype, float32 when that is an integer or bool
  kComparison,  // bool
};

template <OpName name, BinaryKind kind>
DType binary_result_dtype(DType promoted, const TensorMeta& a) {
  switch (kind) {
    case BinaryKind::kArithmetic: return promoted;
    case BinaryKind::kSubtract:
      DTR_CHECK(promoted != kBool, TypeError,
                "{}: subtraction with two bool tensors is not supported (shape {}); use "
                "logical operations instead",
                name.view(), shape_str(a.shape));
      return promoted;
    case BinaryKind::kTrueDivide: return is_floating(promoted) ? promoted : kFloat32;
    case BinaryKind::kComparison: return kBool;
  }
  return promoted;
}

DType promote(const TensorMeta& a, const TensorMeta& b) {
  return ResultType().tensor(a.dtype, a.dim()).tensor(b.dtype, b.dim()).get();
}

DType promote_with_scalar(const TensorMeta& a, const Attrs& attrs) {
  return ResultType().tensor(a.dtype, a.dim()).scalar(attrs.b("other_is_float")).get();
}

// Tensor-tensor: (a, b) → broadcast shape.
template <OpName name, BinaryKind kind>
void infer_binary(std::span<const TensorMeta> in, const Attrs&, std::vector<TensorMeta>& out) {
  const Shape shape = broadcast_shapes(in[0].shape, in[1].shape, name.view());
  const DType dtype = binary_result_dtype<name, kind>(promote(in[0], in[1]), in[0]);
  out.push_back(out_meta(shape, dtype, in[0].device));
}

template <OpName name, BinaryKind kind>
void infer_binary_inplace(std::span<const TensorMeta> in, const Attrs&, std::vector<TensorMeta>& out) {
  const Shape shape = broadcast_shapes(in[0].shape, in[1].shape, name.view());
  const DType dtype = binary_result_dtype<name, kind>(promote(in[0], in[1]), in[0]);
  check_inplace_result(name.view(), in[0], shape, dtype);
  out.push_back(in[0]);
}

// Tensor-scalar: x → x's shape.
template <OpName name, BinaryKind kind>
void infer_scalar(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const DType dtype = binary_result_dtype<name, kind>(promote_with_scalar(in[0], a), in[0]);
  out.push_back(out_meta(in[0].shape, dtype, in[0].device));
}

template <OpName name, BinaryKind kind>
void infer_scalar_inplace(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const DType dtype = binary_result_dtype<name, kind>(promote_with_scalar(in[0], a), in[0]);
  check_inplace_result(name.view(), in[0], in[0].shape, dtype);
  out.push_back(in[0]);
}

void infer_pow_scalar(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const DType dtype = promote_with_scalar(in[0], a);
  DTR_CHECK(is_floating(dtype) || a.f("other") >= 0, ValueError,
            "pow: integers to negative integer powers are not allowed ({} tensor of shape {} to "
            "the power {})",
            dtype_name(in[0].dtype), shape_str(in[0].shape), a.f("other"));
  out.push_back(out_meta(in[0].shape, dtype, in[0].device));
}

// where(cond, a, b): cond bool; shape of all three broadcast; dtype of a and b promoted.
void infer_where(std::span<const TensorMeta> in, const Attrs&, std::vector<TensorMeta>& out) {
  DTR_CHECK(in[0].dtype == kBool, TypeError,
            "where: expected condition to be a bool tensor, got {} of shape {}",
            dtype_name(in[0].dtype), shape_str(in[0].shape));
  const Shape ab = broadcast_shapes(in[1].shape, in[2].shape, "where");
  const Shape shape = broadcast_shapes(in[0].shape, ab, "where");
  out.push_back(out_meta(shape, promote(in[1], in[2]), in[1].device));
}

// ---- backward rules ------------------------------------------------------------------

Tensor zero_like_scalar(const Tensor& g) { return zeros({}, TensorOptions(g.dtype()).device(g.device())); }

// a + alpha * b
std::vector<Tensor> add_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  const double alpha = ctx.attrs.f("alpha");
  std::vector<Tensor> r(2);
  if (ctx.needs_grad(0)) r[0] = reduce_grad(g[0], ctx.input_metas[0]);
  if (ctx.needs_grad(1)) r[1] = reduce_grad(alpha == 1 ? g[0] : mul(g[0], alpha), ctx.input_metas[1]);
  return r;
}

// a - alpha * b
std::vector<Tensor> sub_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  const double alpha = ctx.attrs.f("alpha");
  std::vector<Tensor> r(2);
  if (ctx.needs_grad(0)) r[0] = reduce_grad(g[0], ctx.input_metas[0]);
  if (ctx.needs_grad(1)) r[1] = reduce_grad(alpha == 1 ? neg(g[0]) : mul(g[0], -alpha), ctx.input_metas[1]);
  return r;
}

std::vector<Tensor> mul_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  const Tensor &a = ctx.inputs[0], &b = ctx.inputs[1];
  std::vector<Tensor> r(2);
  if (ctx.needs_grad(0)) r[0] = reduce_grad(mul(g[0], b), ctx.input_metas[0]);
  if (ctx.needs_grad(1)) r[1] = reduce_grad(mul(g[0], a), ctx.input_metas[1]);
  return r;
}

// d(a/b)/da = 1/b; d(a/b)/db = -(a/b)/b.
std::vector<Tensor> div_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  const Tensor &a = ctx.inputs[0], &b = ctx.inputs[1];
  std::vector<Tensor> r(2);
  if (ctx.needs_grad(0)) r[0] = reduce_grad(div(g[0], b), ctx.input_metas[0]);
  if (ctx.needs_grad(1)) r[1] = reduce_grad(mul(neg(g[0]), div(div(a, b), b)), ctx.input_metas[1]);
  return r;
}

// d(a^b)/da = b a^(b-1) (zero where b == 0); d(a^b)/db = a^b log(a) (zero
// where a == 0 and b >= 0), as torch's pow_backward_self/_exponent.
std::vector<Tensor> pow_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  const Tensor &a = ctx.inputs[0], &b = ctx.inputs[1], &result = ctx.outputs[0];
  const Tensor zero = zero_like_scalar(g[0]);
  std::vector<Tensor> r(2);
  if (ctx.needs_grad(0)) {
    const Tensor d = mul(g[0], mul(b, pow(a, sub(b, 1))));
    r[0] = reduce_grad(where(eq(b, 0), zero, d), ctx.input_metas[0]);
  }
  if (ctx.needs_grad(1)) {
    const Tensor base_zero = mul(eq(a, 0), ge(b, 0));
    r[1] = reduce_grad(mul(g[0], where(base_zero, zero, mul(result, log(a)))), ctx.input_metas[1]);
  }
  return r;
}

// maximum/minimum: the gradient goes to the selected input, split evenly on ties.
std::vector<Tensor> extremum_backward(const BackwardContext& ctx, std::span<const Tensor> g,
                                      bool maximum) {
  const Tensor &a = ctx.inputs[0], &b = ctx.inputs[1];
  const Tensor half_on_ties = mul(mul(g[0], eq(a, b)), 0.5);
  std::vector<Tensor> r(2);
  if (ctx.needs_grad(0)) {
    const Tensor a_wins = maximum ? gt(a, b) : lt(a, b);
    r[0] = reduce_grad(add(mul(g[0], a_wins), half_on_ties), ctx.input_metas[0]);
  }
  if (ctx.needs_grad(1)) {
    const Tensor b_wins = maximum ? lt(a, b) : gt(a, b);
    r[1] = reduce_grad(add(mul(g[0], b_wins), half_on_ties), ctx.input_metas[1]);
  }
  return r;
}

std::vector<Tensor> maximum_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return extremum_backward(ctx, g, true);
}

std::vector<Tensor> minimum_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return extremum_backward(ctx, g, false);
}

std::vector<Tensor> where_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  const Tensor& cond = ctx.inputs[0];
  const Tensor zero = zero_like_scalar(g[0]);
  std::vector<Tensor> r(3);
  if (ctx.needs_grad(1)) r[1] = reduce_grad(where(cond, g[0], zero), ctx.input_metas[1]);
  if (ctx.needs_grad(2)) r[2] = reduce_grad(where(cond, zero, g[0]), ctx.input_metas[2]);
  return r;
}

std::vector<Tensor> add_scalar_backward(const BackwardContext&, std::span<const Tensor> g) {
  return {g[0]};
}

std::vector<Tensor> mul_scalar_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {mul(g[0], ctx.attrs.f("other"))};
}

std::vector<Tensor> div_scalar_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {div(g[0], ctx.attrs.f("other"))};
}

// d(x^e)/dx = e x^(e-1), zero for e == 0.
std::vector<Tensor> pow_scalar_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  const double e = ctx.attrs.f("other");
  if (e == 0) return {zeros_like(g[0])};
  return {mul(g[0], mul(pow(ctx.inputs[0], e - 1), e))};
}

// ---- rows ------------------------------------------------------------------------------

OpDef& define_row(std::string name, InferFn infer, BackwardFn backward, uint8_t save,
                  bool inplace, std::vector<ParamSpec> params = {},
                  AutocastPolicy autocast = AutocastPolicy::kNone) {
  OpDef d{.name = std::move(name), .params = std::move(params), .infer = infer, .backward = backward};
  d.save = save;
  d.flags.strided_inputs = true;
  d.flags.inplace = inplace;
  // In-place rows never autocast: a cast copy of self would take the write.
  // `autocast` is the CUDA lists' policy; PyTorch's CPU lists hold no
  // elementwise op, so on the CPU these run in their inputs' dtypes
  // (Note [autocast lists]).
  d.autocast = inplace ? AutocastPolicy::kNone : autocast;
  d.autocast_cpu = AutocastPolicy::kNone;
  // (a, b); (x) with the scalar in an attribute; where(cond, a, b).
  d.inputs(d.name.find("_scalar") != std::string::npos ? 1 : d.name == "where" ? 3 : 2);
  return OpRegistry::instance().define(std::move(d));
}

}  // namespace

void register_binary_ops() {
  using K = BinaryKind;
  constexpr uint8_t kNone = kSaveNone, kIn = kSaveInputs;
  constexpr auto kF32 = AutocastPolicy::kFloat32;  // PyTorch's CUDA autocast runs pow in float32
  // add/sub: other * alpha; the scalar rows: the Scalar as a double and
  // whether it was a floating point number (it promotes integer tensors).
  const std::vector<ParamSpec> kAlpha{param::f("alpha", 1.0)};
  const std::vector<ParamSpec> kScalar{param::f("other"), param::b("other_is_float")};

  define_row("add", infer_binary<"add", K::kArithmetic>, add_backward, kNone, false, kAlpha);
  define_row("sub", infer_binary<"sub", K::kSubtract>, sub_backward, kNone, false, kAlpha);
  define_row("mul", infer_binary<"mul", K::kArithmetic>, mul_backward, kIn, false);
  define_row("div", infer_binary<"div", K::kTrueDivide>, div_backward, kIn, false);
  define_row("pow", infer_binary<"pow", K::kArithmetic>, pow_backward, kSaveInputs | kSaveOutputs, false, {}, kF32);
  define_row("maximum", infer_binary<"maximum", K::kArithmetic>, maximum_backward, kIn, false);
  define_row("minimum", infer_binary<"minimum", K::kArithmetic>, minimum_backward, kIn, false);
  define_row("eq", infer_binary<"eq", K::kComparison>, nullptr, kNone, false);
  define_row("ne", infer_binary<"ne", K::kComparison>, nullptr, kNone, false);
  define_row("lt", infer_binary<"lt", K::kComparison>, nullptr, kNone, false);
  define_row("le", infer_binary<"le", K::kComparison>, nullptr, kNone, false);
  define_row("gt", infer_binary<"gt", K::kComparison>, nullptr, kNone, false);
  define_row("ge", infer_binary<"ge", K::kComparison>, nullptr, kNone, false);
  // where: cond (input 0) never gets a gradient.
  OpDef& where_row = define_row("where", infer_where, where_backward, kIn, false);
  where_row.nondiff_inputs = 1u << 0;
  where_row.unsaved_inputs = (1u << 1) | (1u << 2);  // backward reads the condition only

  define_row("add_scalar", infer_scalar<"add", K::kArithmetic>, add_scalar_backward, kNone, false, kScalar);
  define_row("mul_scalar", infer_scalar<"mul", K::kArithmetic>, mul_scalar_backward, kNone, false, kScalar);
  define_row("div_scalar", infer_scalar<"div", K::kTrueDivide>, div_scalar_backward, kNone, false, kScalar);
  define_row("pow_scalar", infer_pow_scalar, pow_scalar_backward, kIn, false, kScalar, kF32);
  define_row("eq_scalar", infer_scalar<"eq", K::kComparison>, nullptr, kNone, false, kScalar);
  define_row("ne_scalar", infer_scalar<"ne", K::kComparison>, nullptr, kNone, false, kScalar);
  define_row("lt_scalar", infer_scalar<"lt", K::kComparison>, nullptr, kNone, false, kScalar);
  define_row("le_scalar", infer_scalar<"le", K::kComparison>, nullptr, kNone, false, kScalar);
  define_row("gt_scalar", infer_scalar<"gt", K::kComparison>, nullptr, kNone, false, kScalar);
  define_row("ge_scalar", infer_scalar<"ge", K::kComparison>, nullptr, kNone, false, kScalar);

  define_row("add_", infer_binary_inplace<"add_", K::kArithmetic>, add_backward, kNone, true, kAlpha);
  define_row("sub_", infer_binary_inplace<"sub_", K::kSubtract>, sub_backward, kNone, true, kAlpha);
  define_row("mul_", infer_binary_inplace<"mul_", K::kArithmetic>, mul_backward, kIn, true);
  define_row("div_", infer_binary_inplace<"div_", K::kTrueDivide>, div_backward, kIn, true);
  define_row("add_scalar_", infer_scalar_inplace<"add_", K::kArithmetic>, add_scalar_backward, kNone, true, kScalar);
  define_row("mul_scalar_", infer_scalar_inplace<"mul_", K::kArithmetic>, mul_scalar_backward, kNone, true, kScalar);
  define_row("div_scalar_", infer_scalar_inplace<"div_", K::kTrueDivide>, div_scalar_backward, kNone, true, kScalar);
}

}  // namespace ops

namespace {

Attrs scalar_attrs(Scalar s) {
  return Attrs{{"other", s.to_double()}, {"other_is_float", s.is_floating()}};
}

Scalar negated(Scalar s) {
  return s.is_floating() ? Scalar(-s.to_double()) : Scalar(-s.to_int());
}

// torch.add/sub: "For integral input tensors, argument alpha must not be a
// floating point number."
Attrs alpha_attrs(std::string_view name, const Tensor& a, const Tensor& b, Scalar alpha) {
  if (alpha.is_floating() && alpha.to_double() != 1) {
    const DType t = ResultType().tensor(a.dtype(), a.dim()).tensor(b.dtype(), b.dim()).get();
    DTR_CHECK(is_floating(t), TypeError,
              "{}: for integral input tensors ({} and {}), argument alpha must not be a floating "
              "point number (got {})",
              name, dtype_name(a.dtype()), dtype_name(b.dtype()), alpha.to_double());
  }
  return Attrs{{"alpha", alpha.is_floating() ? alpha.to_double() : double(alpha.to_int())}};
}

Tensor binary(const OpDef& o, const Tensor& a, const Tensor& b, Attrs attrs = {}) {
  return dispatch1(o, {a, b}, std::move(attrs));
}

Tensor with_scalar(const OpDef& o, const Tensor& a, Scalar s) {
  return dispatch1(o, {a}, scalar_attrs(s));
}

Tensor& inplace(const OpDef& o, Tensor& self, const Tensor& other, Attrs attrs = {}) {
  dispatch(o, std::vector<Tensor>{self, ops::unaliased_operand(self, other)}, std::move(attrs));
  return self;
}

Tensor& inplace_scalar(const OpDef& o, Tensor& self, Scalar s) {
  dispatch(o, std::vector<Tensor>{self}, scalar_attrs(s));
  return self;
}

}  // namespace

// All binary ops broadcast (ValueError naming the op and both shapes when the
// shapes are not broadcastable) and promote like torch.result_type.

/// a + alpha * b (torch.add). TypeError for a floating alpha with integer tensors.
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) {
  static const OpDef& o = op("add");
  return binary(o, a, b, alpha_attrs("add", a, b, alpha));
}

/// a + b for a Scalar b (torch.add); an integer tensor plus a floating b is float32.
Tensor add(const Tensor& a, Scalar b) {
  static const OpDef& o = op("add_scalar");
  return with_scalar(o, a, b);
}

/// a - alpha * b (torch.sub). TypeError for two bool tensors.
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) {
  static const OpDef& o = op("sub");
  return binary(o, a, b, alpha_attrs("sub", a, b, alpha));
}

/// a - b for a Scalar b (torch.sub); computed as a + (-b), which is exact.
Tensor sub(const Tensor& a, Scalar b) { return add(a, negated(b)); }

/// a * b (torch.mul).
Tensor mul(const Tensor& a, const Tensor& b) {
  static const OpDef& o = op("mul");
  return binary(o, a, b);
}

Tensor mul(const Tensor& a, Scalar b) {
  static const OpDef& o = op("mul_scalar");
  return with_scalar(o, a, b);
}

/// a / b, true division (torch.div): integer inputs give float32.
Tensor div(const Tensor& a, const Tensor& b) {
  static const OpDef& o = op("div");
  return binary(o, a, b);
}

Tensor div(const Tensor& a, Scalar b) {
  static const OpDef& o = op("div_scalar");
  return with_scalar(o, a, b);
}

/// a ** b elementwise (torch.pow). Integer tensors stay integer (a negative
/// exponent gives 0 unless the base is 1 or -1, like PyTorch).
Tensor pow(const Tensor& a, const Tensor& b) {
  static const OpDef& o = op("pow");
  return binary(o, a, b);
}

/// a ** exponent (torch.pow). ValueError for an integer tensor and a negative
/// integer exponent.
Tensor pow(const Tensor& a, Scalar exponent) {
  static const OpDef& o = op("pow_scalar");
  return with_scalar(o, a, exponent);
}

/// Elementwise max (torch.maximum); NaN if either is NaN.
Tensor maximum(const Tensor& a, const Tensor& b) {
  static const OpDef& o = op("maximum");
  return binary(o, a, b);
}

/// Elementwise min (torch.minimum); NaN if either is NaN.
Tensor minimum(const Tensor& a, const Tensor& b) {
  static const OpDef& o = op("minimum");
  return binary(o, a, b);
}

// Comparisons (torch.eq, ne, lt, le, gt, ge): bool results, compared in the
// promoted dtype of the operands; not differentiable.
#define DTR_COMPARISON(NAME)                                \
  Tensor NAME(const Tensor& a, const Tensor& b) {           \
    static const OpDef& o = op(#NAME);                      \
    return binary(o, a, b);                                 \
  }                                                         \
  Tensor NAME(const Tensor& a, Scalar b) {                  \
    static const OpDef& o = op(#NAME "_scalar");            \
    return with_scalar(o, a, b);                            \
  }
DTR_COMPARISON(eq)
DTR_COMPARISON(ne)
DTR_COMPARISON(lt)
DTR_COMPARISON(le)
DTR_COMPARISON(gt)
DTR_COMPARISON(ge)
#undef DTR_COMPARISON

/// cond ? a : b (torch.where); cond must be bool (TypeError), all three broadcast.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  static const OpDef& o = op("where");
  return dispatch1(o, {cond, a, b});
}

// In-place forms (Tensor.add_ etc.): the broadcast result must have self's
// shape (ValueError) and a dtype self can hold (TypeError); they write
// through views and bump the storage's version.
Tensor& Tensor::add_(const Tensor& o, Scalar alpha) {
  static const OpDef& d = op("add_");
  return inplace(d, *this, o, alpha_attrs("add_", *this, o, alpha));
}

Tensor& Tensor::add_(Scalar o) {
  static const OpDef& d = op("add_scalar_");
  return inplace_scalar(d, *this, o);
}

Tensor& Tensor::sub_(const Tensor& o, Scalar alpha) {
  static const OpDef& d = op("sub_");
  return inplace(d, *this, o, alpha_attrs("sub_", *this, o, alpha));
}

Tensor& Tensor::sub_(Scalar o) { return add_(negated(o)); }

Tensor& Tensor::mul_(const Tensor& o) {
  static const OpDef& d = op("mul_");
  return inplace(d, *this, o);
}

Tensor& Tensor::mul_(Scalar o) {
  static const OpDef& d = op("mul_scalar_");
  return inplace_scalar(d, *this, o);
}

Tensor& Tensor::div_(const Tensor& o) {
  static const OpDef& d = op("div_");
  return inplace(d, *this, o);
}

Tensor& Tensor::div_(Scalar o) {
  static const OpDef& d = op("div_scalar_");
  return inplace_scalar(d, *this, o);
}

}  // namespace dtr
