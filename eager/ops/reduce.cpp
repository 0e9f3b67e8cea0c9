// Reductions: sum, mean, var, max, argmax, argmin, amax, amin, logsumexp,
// and the scan cumsum.
// PyTorch: torch.sum, torch.mean, torch.var(correction=), torch.max,
// torch.argmax, torch.argmin, torch.amax, torch.amin, torch.logsumexp,
// torch.cumsum. Kernels in cpu/reduce.cpp; every reduction has a fixed
// accumulation order independent of the thread count (Note [determinism]).
#include <algorithm>

#include "eager/ops/elementwise.h"
#include "eager/ops/registration.h"

namespace dtr {
namespace ops {
namespace {

/// The dims a reduction runs over: normalized, sorted, unique; empty means
/// every dim. A 0-d tensor accepts dim 0 and -1 and has nothing to reduce.
/// Throws IndexError for a dim out of range and ValueError for a repeated dim.
Shape reduce_dims(IntList dims, int64_t ndim, std::string_view op) {
  Shape out;
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) {
    const int64_t n = normalize_dim(d, ndim, op);
    if (ndim == 0) continue;
    DTR_CHECK(std::find(out.begin(), out.end(), n) == out.end(), ValueError,
              "{}: dim {} appears multiple times in the list of dims {}", op, n,
              shape_str(dims));
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// Runs the reduction row `o` (attributes dims, keepdim) over `dims` of x.
Tensor reduce_over(const OpDef& o, const Tensor& x, IntList dims, bool keepdim) {
  return dispatch1(o, {x}, Attrs{{"dims", reduce_dims(dims, x.dim(), o.name)}, {"keepdim", keepdim}});
}

/// Checks the recorded `dims` attribute against the input (rows may be
/// dispatched directly, so infer validates what the public function built).
void check_dims_attr(const TensorMeta& in, const Shape& dims, std::string_view op) {
  for (size_t i = 0; i < dims.size(); ++i) {
    DTR_CHECK(dims[i] >= 0 && dims[i] < in.dim(), IndexError,
              "{}: dimension {} out of range for an input of shape {}", op, dims[i],
              shape_str(in.shape));
    DTR_CHECK(i == 0 || dims[i] > dims[i - 1], ValueError,
              "{}: dims {} must be sorted and unique", op, shape_str(dims));
  }
}

/// Shape of `shape` reduced over `dims` (kept as size 1 with keepdim).
Shape reduced_shape(const Shape& shape, const Shape& dims, bool keepdim) {
  Shape out;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) {
      out.push_back(shape[size_t(d)]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

/// The number of elements folded into each output element when `shape` is
/// reduced over `dims` (normalized). ValueError for a dim outside `shape`
/// (the gradient rows are callable by name with the caller's attributes).
int64_t reduced_count(const Shape& shape, const Shape& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    DTR_CHECK(d >= 0 && d < int64_t(shape.size()), ValueError,
              "reduction: dim {} out of range for shape {} (dims must be normalized)", d,
              shape_str(shape));
    n *= shape[size_t(d)];
  }
  return n;
}

/// Reading every input element once is the work of a reduction.
OpCost reduce_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
  OpCost c;
  for (const auto& m : in) {
    c.bytes += double(m.numel() * itemsize(m.dtype));
    c.flops += double(m.numel());
  }
  for (const auto& m : out) c.bytes += double(m.numel() * itemsize(m.dtype));
  return c;
}

// ---- sum, mean -------------------------------------------------------------------

void infer_sum(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const Shape& dims = a.ints("dims");
  check_dims_attr(in[0], dims, "sum");
  const DType dt = is_floating(in[0].dtype) ? in[0].dtype : kInt64;
  out.push_back(out_meta(reduced_shape(in[0].shape, dims, a.b("keepdim")), dt, in[0].device));
}

void infer_mean(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  DTR_CHECK(is_floating(in[0].dtype), TypeError,
            "mean: could not infer output dtype; input dtype must be floating point, got {} (shape "
            "{})",
            dtype_name(in[0].dtype), shape_str(in[0].shape));
  const Shape& dims = a.ints("dims");
  check_dims_attr(in[0], dims, "mean");
  out.push_back(out_meta(reduced_shape(in[0].shape, dims, a.b("keepdim")), in[0].dtype, in[0].device));
}

/// The gradient of a sum or mean: g broadcast back to the input's shape
/// (divided by the reduced count for mean).
Tensor sum_grad(const Tensor& g, const BackwardContext& ctx, int64_t divisor) {
  static const OpDef& o = op("sum_backward");
  return dispatch1(o, {g}, Attrs{{"shape", ctx.input_metas[0].shape}, {"dims", ctx.attrs.ints("dims")},
                                 {"divisor", divisor}});
}

std::vector<Tensor> sum_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {sum_grad(g[0], ctx, 1)};
}

std::vector<Tensor> mean_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {sum_grad(g[0], ctx, reduced_count(ctx.input_metas[0].shape, ctx.attrs.ints("dims")))};
}

// The sum_backward row is linear in g: its gradient sums gg back over the
// dims (Note [higher-order gradients]).
std::vector<Tensor> sum_backward_backward(const BackwardContext& ctx, std::span<const Tensor> gg) {
  Tensor r = sum(gg[0], ctx.attrs.ints("dims"), /*keepdim=*/true);
  if (const int64_t divisor = ctx.attrs.i("divisor"); divisor != 1) r = div(r, double(divisor));
  return {reshape(r, ctx.input_metas[0].shape)};
}

// sum_backward row: g (the reduced shape, keepdim or not) → attrs' shape.
void infer_sum_backward(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const Shape& shape = a.ints("shape");
  const Shape& dims = a.ints("dims");
  check_floating("sum_backward", in[0], "gradient");
  DTR_CHECK(in[0].numel() * reduced_count(shape, dims) == numel(shape), ValueError,
            "sum_backward: gradient of shape {} does not match input shape {} reduced over {}",
            shape_str(in[0].shape), shape_str(shape), shape_str(dims));
  out.push_back(out_meta(shape, in[0].dtype, in[0].device));
}

// ---- var -----------------------------------------------------------------------

void infer_var(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  DTR_CHECK(is_floating(in[0].dtype), TypeError,
            "var: only floating point inputs are supported, got {} (shape {})",
            dtype_name(in[0].dtype), shape_str(in[0].shape));
  DTR_CHECK(a.i("correction") >= 0, ValueError, "var: correction must be non-negative, got {}",
            a.i("correction"));
  const Shape& dims = a.ints("dims");
  check_dims_attr(in[0], dims, "var");
  out.push_back(out_meta(reduced_shape(in[0].shape, dims, a.b("keepdim")), in[0].dtype, in[0].device));
}

std::vector<Tensor> var_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("var_backward");
  return {dispatch1(o, {g[0], ctx.inputs[0]},
                    Attrs{{"dims", ctx.attrs.ints("dims")}, {"correction", ctx.attrs.i("correction")}})};
}

// var_backward row: (g, x) → like x.
void infer_var_backward(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  check_floating("var_backward", in[0], "gradient");
  check_dims_attr(in[1], a.ints("dims"), "var_backward");
  DTR_CHECK(in[0].dtype == in[1].dtype, TypeError,
            "var_backward: gradient dtype {} differs from input dtype {}", dtype_name(in[0].dtype),
            dtype_name(in[1].dtype));
  DTR_CHECK(in[0].numel() * reduced_count(in[1].shape, a.ints("dims")) == in[1].numel(), ValueError,
            "var_backward: gradient of shape {} does not match input shape {}",
            shape_str(in[0].shape), shape_str(in[1].shape));
  out.push_back(out_meta(in[1].shape, in[1].dtype, in[1].device));
}

// ---- max, argmax -------------------------------------------------------------------

void infer_max(std::span<const TensorMeta> in, const Attrs&, std::vector<TensorMeta>& out) {
  DTR_CHECK(in[0].numel() > 0, ValueError,
            "max: expected reduction dim to be specified for an input with no elements (shape {})",
            shape_str(in[0].shape));
  out.push_back(out_meta({}, in[0].dtype, in[0].device));
}

std::vector<Tensor> max_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("max_backward");
  return {dispatch1(o, {g[0], ctx.inputs[0], ctx.outputs[0]})};
}

// max_backward row: (g 0-d, x, max 0-d) → like x.
void infer_max_backward(std::span<const TensorMeta> in, const Attrs&, std::vector<TensorMeta>& out) {
  check_floating("max_backward", in[1]);
  DTR_CHECK(in[0].numel() == 1 && in[2].numel() == 1 && in[0].dtype == in[1].dtype &&
                in[2].dtype == in[1].dtype,
            ValueError, "max_backward: expected one-element gradient and max of dtype {}, got {} {} and {} {}",
            dtype_name(in[1].dtype), shape_str(in[0].shape), dtype_name(in[0].dtype),
            shape_str(in[2].shape), dtype_name(in[2].dtype));
  out.push_back(out_meta(in[1].shape, in[1].dtype, in[1].device));
}

/// Validates the dim of max(x, dim) / argmax and returns the output shape.
Shape infer_dim_reduction(const TensorMeta& x, const Attrs& a, std::string_view op) {
  const int64_t dim = a.i("dim");
  const int64_t size = x.dim() == 0 ? 1 : (dim >= 0 && dim < x.dim() ? x.shape[size_t(dim)] : 0);
  DTR_CHECK(x.dim() == 0 || (dim >= 0 && dim < x.dim()), IndexError,
            "{}: dimension {} out of range for an input of shape {}", op, dim, shape_str(x.shape));
  DTR_CHECK(size > 0, ValueError,
            "{}: cannot reduce over dimension {} of size 0 (input shape {}): the operation has no "
            "identity",
            op, dim, shape_str(x.shape));
  if (x.dim() == 0) return {};
  return reduced_shape(x.shape, Shape{dim}, a.b("keepdim"));
}

void infer_max_dim(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const Shape s = infer_dim_reduction(in[0], a, "max");
  out.push_back(out_meta(s, in[0].dtype, in[0].device));
  out.push_back(out_meta(s, kInt64, in[0].device));
}

void infer_argmax(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  out.push_back(out_meta(infer_dim_reduction(in[0], a, "argmax"), kInt64, in[0].device));
}

std::vector<Tensor> max_dim_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("max_dim_backward");
  const TensorMeta& x = ctx.input_metas[0];
  // A 0-d input is its own max: the gradient passes through.
  if (x.dim() == 0) return {g[0]};
  return {dispatch1(o, {g[0], ctx.outputs[1]}, Attrs{{"shape", x.shape}, {"dim", ctx.attrs.i("dim")}})};
}

// max_dim_backward row: (g, int64 indices) → zeros of attrs' shape with g
// at the indices along dim.
void infer_max_dim_backward(std::span<const TensorMeta> in, const Attrs& a,
                            std::vector<TensorMeta>& out) {
  const Shape& shape = a.ints("shape");
  const int64_t dim = a.i("dim");
  check_floating("max_dim_backward", in[0], "gradient");
  DTR_CHECK(dim >= 0 && dim < int64_t(shape.size()), IndexError,
            "max_dim_backward: dimension {} out of range for shape {}", dim, shape_str(shape));
  DTR_CHECK(in[1].dtype == kInt64 && in[0].numel() == in[1].numel() &&
                in[0].numel() * shape[size_t(dim)] == numel(shape),
            ValueError, "max_dim_backward: gradient {} and int64 indices {} ({}) do not match shape {}",
            shape_str(in[0].shape), shape_str(in[1].shape), dtype_name(in[1].dtype), shape_str(shape));
  out.push_back(out_meta(shape, in[0].dtype, in[0].device));
}

// ---- argmin, amax, amin --------------------------------------------------------------

void infer_argmin(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  out.push_back(out_meta(infer_dim_reduction(in[0], a, "argmin"), kInt64, in[0].device));
}

/// amax, amin: the dims attribute checked, every reduced dim non-empty
/// (IndexError, as PyTorch); the result has the input's dtype.
template <OpName Name>
void infer_extreme(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const std::string_view name = Name.view();
  const Shape& dims = a.ints("dims");
  check_dims_attr(in[0], dims, name);
  for (int64_t d : dims) {
    DTR_CHECK(in[0].shape[size_t(d)] > 0, IndexError,
              "{}: expected reduction dim {} to have non-zero size (input shape {})", name, d,
              shape_str(in[0].shape));
  }
  out.push_back(out_meta(reduced_shape(in[0].shape, dims, a.b("keepdim")), in[0].dtype, in[0].device));
}

/// The gradient of amax/amin: g shared evenly among the elements equal to
/// the result, (g / count) * (x == result), as PyTorch's scale_grad_by_count.
std::vector<Tensor> extreme_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  const TensorMeta& x = ctx.input_metas[0];
  const Shape& dims = ctx.attrs.ints("dims");
  const Shape kept = reduced_shape(x.shape, dims, true);
  const Tensor selected = eq(ctx.inputs[0], reshape(ctx.outputs[0], kept)).to(x.dtype);
  const Tensor count = sum(selected, dims, true);
  return {mul(div(reshape(g[0], kept), count), selected)};
}

// ---- logsumexp ----------------------------------------------------------------------

// Floating inputs keep their dtype; integer and bool inputs give float32, as PyTorch.
void infer_logsumexp(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const Shape& dims = a.ints("dims");
  check_dims_attr(in[0], dims, "logsumexp");
  const DType dt = is_floating(in[0].dtype) ? in[0].dtype : kFloat32;
  out.push_back(out_meta(reduced_shape(in[0].shape, dims, a.b("keepdim")), dt, in[0].device));
}

// d logsumexp(x) = exp(x - logsumexp(x)).
std::vector<Tensor> logsumexp_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  const Shape kept = reduced_shape(ctx.input_metas[0].shape, ctx.attrs.ints("dims"), true);
  return {mul(reshape(g[0], kept), exp(sub(ctx.inputs[0], reshape(ctx.outputs[0], kept))))};
}

// ---- cumsum -------------------------------------------------------------------------

// cumsum and cumsum_backward (the reversed scan): floating inputs keep their
// dtype, integer and bool inputs give int64 (cumsum only; its gradient row is
// floating).
template <OpName Name>
void infer_cumsum(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const std::string_view name = Name.view();
  const int64_t dim = a.i("dim");
  DTR_CHECK((in[0].dim() == 0 && dim == 0) || (dim >= 0 && dim < in[0].dim()), IndexError,
            "{}: dimension {} out of range for an input of shape {}", name, dim, shape_str(in[0].shape));
  if (name == "cumsum_backward") check_floating(name, in[0], "gradient");
  const DType dt = is_floating(in[0].dtype) ? in[0].dtype : kInt64;
  out.push_back(out_meta(in[0].shape, dt, in[0].device));
}

// The gradient of a cumulative sum is the reversed cumulative sum of g.
std::vector<Tensor> cumsum_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("cumsum_backward");
  return {dispatch1(o, {g[0]}, Attrs{{"dim", ctx.attrs.i("dim")}})};
}

std::vector<Tensor> cumsum_backward_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("cumsum");
  return {dispatch1(o, {g[0]}, Attrs{{"dim", ctx.attrs.i("dim")}})};
}

/// Defines a one-input reduction row reading strided inputs, saving `save`.
OpDef& reduction_row(OpDef row, uint8_t save) {
  row.flags.strided_inputs = true;
  row.save = save;
  row.inputs(1);
  return OpRegistry::instance().define(std::move(row));
}

}  // namespace

void register_reduce_ops() {
  auto& R = OpRegistry::instance();
  using param::b, param::i, param::ints;
  // dims: normalized and sorted by reduce_dims (every dim when the caller gave none).
  const std::vector<ParamSpec> kDims{ints("dims"), b("keepdim", false)};
  const std::vector<ParamSpec> kDim{i("dim"), b("keepdim", false)};

  OpDef sum{.name = "sum", .params = kDims, .infer = infer_sum, .cost = reduce_cost, .backward = sum_backward};
  sum.flags.strided_inputs = true;
  sum.save = kSaveNone;
  sum.inputs(1);
  R.define(std::move(sum));

  OpDef mean{.name = "mean", .params = kDims, .infer = infer_mean, .cost = reduce_cost, .backward = mean_backward};
  mean.flags.strided_inputs = true;
  mean.save = kSaveNone;
  mean.inputs(1);
  R.define(std::move(mean));

  OpDef var{.name = "var", .params = {ints("dims"), b("keepdim", false), i("correction", 1)},
            .infer = infer_var, .cost = reduce_cost, .backward = var_backward};
  var.save = kSaveInputs;
  var.inputs(1);
  R.define(std::move(var));

  OpDef max{.name = "max", .infer = infer_max, .cost = reduce_cost, .backward = max_backward};
  max.flags.strided_inputs = true;
  max.save = kSaveInputs | kSaveOutputs;
  max.inputs(1);
  R.define(std::move(max));

  // Multi-output: (values, indices). Only the indices are needed backward,
  // and both are the size of the reduced output.
  OpDef max_dim{.name = "max_dim", .params = kDim, .infer = infer_max_dim, .cost = reduce_cost,
                .backward = max_dim_backward};
  max_dim.flags.strided_inputs = true;
  max_dim.save = kSaveOutputs;
  max_dim.inputs(1);
  R.define(std::move(max_dim));

  reduction_row(OpDef{.name = "argmax", .params = kDim, .infer = infer_argmax, .cost = reduce_cost}, kSaveNone);
  reduction_row(OpDef{.name = "argmin", .params = kDim, .infer = infer_argmin, .cost = reduce_cost}, kSaveNone);
  // amax, amin, logsumexp: the backward reads x and the result.
  for (const auto& [name, infer] : {std::pair<const char*, InferFn>{"amax", infer_extreme<"amax">},
                                    std::pair<const char*, InferFn>{"amin", infer_extreme<"amin">}}) {
    reduction_row(OpDef{.name = name, .params = kDims, .infer = infer, .cost = reduce_cost,
                        .backward = extreme_backward},
                  kSaveInputs | kSaveOutputs);
  }
  reduction_row(OpDef{.name = "logsumexp", .params = kDims, .infer = infer_logsumexp, .cost = reduce_cost,
                      .backward = logsumexp_backward},
                kSaveInputs | kSaveOutputs);

  OpDef cumsum{.name = "cumsum", .params = {i("dim")}, .infer = infer_cumsum<"cumsum">,
               .cost = reduce_cost, .backward = cumsum_backward};
  cumsum.save = kSaveNone;
  cumsum.inputs(1);
  R.define(std::move(cumsum));
  OpDef cumsum_b{.name = "cumsum_backward", .params = {i("dim")}, .infer = infer_cumsum<"cumsum_backward">,
                 .cost = reduce_cost, .backward = cumsum_backward_backward};
  cumsum_b.save = kSaveNone;
  cumsum_b.inputs(1);
  R.define(std::move(cumsum_b));

  // Kernels of backward rules; those with a backward of their own can be
  // differentiated again (create_graph).
  R.define(OpDef{.name = "sum_backward", .params = {ints("shape"), ints("dims"), i("divisor")},
                 .infer = infer_sum_backward, .backward = sum_backward_backward, .save = kSaveNone,
                 .min_inputs = 1, .max_inputs = 1});
  R.define(OpDef{.name = "var_backward", .params = {ints("dims"), i("correction")}, .infer = infer_var_backward, .cost = reduce_cost,
                 .save = kSaveNone,
                 .min_inputs = 2, .max_inputs = 2});
  R.define(OpDef{.name = "max_backward", .infer = infer_max_backward, .save = kSaveNone,
                 .min_inputs = 3, .max_inputs = 3});
  R.define(OpDef{.name = "max_dim_backward", .params = {ints("shape"), i("dim")}, .infer = infer_max_dim_backward, .save = kSaveNone,
                 .min_inputs = 2, .max_inputs = 2});
}

}  // namespace ops

/// torch.sum(x, dims, keepdim): sum over `dims` (empty: every dim), each
/// reduced dim removed or, with keepdim, kept as size 1. Floating inputs
/// keep their dtype (float32 accumulates in double, float16/bfloat16 in
/// float32 or wider); integer and bool inputs sum into int64. Throws
/// IndexError for a dim out of range and ValueError for a repeated dim.
Tensor sum(const Tensor& x, IntList dims, bool keepdim) {
  static const OpDef& o = op("sum");
  return ops::reduce_over(o, x, dims, keepdim);
}

/// torch.mean(x, dims, keepdim): like sum divided by the reduced count
/// (NaN for an empty reduction). Floating inputs only: TypeError otherwise.
Tensor mean(const Tensor& x, IntList dims, bool keepdim) {
  static const OpDef& o = op("mean");
  return ops::reduce_over(o, x, dims, keepdim);
}

/// torch.var(x, dims, correction=, keepdim=): sum((x - mean)^2) /
/// max(0, N - correction) over `dims` (empty: every dim), computed in two
/// passes in double. Floating inputs only (TypeError); ValueError for a
/// negative correction; dims as sum.
Tensor var(const Tensor& x, IntList dims, int64_t correction, bool keepdim) {
  static const OpDef& o = op("var");
  return dispatch1(o, {x}, Attrs{{"dims", ops::reduce_dims(dims, x.dim(), "var")},
                                 {"correction", correction},
                                 {"keepdim", keepdim}});
}

/// torch.max(x): the largest element as a 0-d tensor of x's dtype; NaN if
/// any element is NaN. ValueError for an empty tensor. Its gradient is
/// shared evenly among the elements equal to the max, like PyTorch.
Tensor max(const Tensor& x) {
  static const OpDef& o = op("max");
  return dispatch1(o, {x});
}

/// torch.max(x, dim, keepdim): (values of x's dtype, int64 indices) along
/// `dim`; the index is the first occurrence of the maximum (NaN counts as
/// the maximum). IndexError for a dim out of range, ValueError when the dim
/// has size 0. The gradient flows to the selected index only.
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  static const OpDef& o = op("max_dim");
  const int64_t d = normalize_dim(dim, x.dim(), "max");
  std::vector<Tensor> outs = dispatch(o, std::vector<Tensor>{x}, Attrs{{"dim", d}, {"keepdim", keepdim}});
  return {std::move(outs[0]), std::move(outs[1])};
}

/// torch.argmax(x, dim, keepdim): the int64 indices of max(x, dim).
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  static const OpDef& o = op("argmax");
  const int64_t d = normalize_dim(dim, x.dim(), "argmax");
  return dispatch1(o, {x}, Attrs{{"dim", d}, {"keepdim", keepdim}});
}

/// torch.argmin(x, dim, keepdim): the int64 indices of the smallest element
/// along `dim`, the first occurrence on ties (NaN counts as the minimum, as
/// PyTorch). Any dtype. IndexError for a dim out of range, ValueError when
/// the dim has size 0. Not differentiable.
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  static const OpDef& o = op("argmin");
  const int64_t d = normalize_dim(dim, x.dim(), "argmin");
  return dispatch1(o, {x}, Attrs{{"dim", d}, {"keepdim", keepdim}});
}

/// torch.amax(x, dims, keepdim): the largest element over `dims` (empty:
/// every dim), x's dtype (any), NaN if any reduced element is NaN. The
/// gradient is shared evenly among the elements equal to the result, as
/// PyTorch. IndexError for a dim out of range or a reduced dim of size 0,
/// ValueError for a repeated dim.
Tensor amax(const Tensor& x, IntList dims, bool keepdim) {
  static const OpDef& o = op("amax");
  return ops::reduce_over(o, x, dims, keepdim);
}

/// torch.amin(x, dims, keepdim): the smallest element over `dims`; as amax.
Tensor amin(const Tensor& x, IntList dims, bool keepdim) {
  static const OpDef& o = op("amin");
  return ops::reduce_over(o, x, dims, keepdim);
}

/// torch.logsumexp(x, dims, keepdim): log(sum(exp(x))) over `dims` (empty:
/// every dim), computed stably in double as m + log(sum(exp(x - m))) with m
/// the maximum (0 where it is infinite, as PyTorch); an empty reduction
/// gives -inf. Floating inputs keep their dtype, integer and bool inputs
/// give float32. Gradient g * exp(x - result). IndexError for a dim out of
/// range, ValueError for a repeated dim.
Tensor logsumexp(const Tensor& x, IntList dims, bool keepdim) {
  static const OpDef& o = op("logsumexp");
  return ops::reduce_over(o, x, dims, keepdim);
}

/// torch.cumsum(x, dim): y[..., i, ...] = sum of x[..., j, ...] for j <= i
/// along `dim`, accumulated sequentially in increasing j (in double for
/// floating inputs, int64 otherwise). Same shape; floating inputs keep their
/// dtype, integer and bool inputs give int64, as PyTorch. The gradient is
/// the reversed cumulative sum of g. IndexError for a dim out of range.
Tensor cumsum(const Tensor& x, int64_t dim) {
  static const OpDef& o = op("cumsum");
  const int64_t d = normalize_dim(dim, x.dim(), "cumsum");
  return dispatch1(o, {x}, Attrs{{"dim", d}});
}

}  // namespace dtr
