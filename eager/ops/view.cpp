// Views: view, transpose, permute, slice, select, unsqueeze, squeeze, expand,
// plus the compositions reshape, narrow and flatten. PyTorch: Tensor.view,
// torch.reshape, torch.transpose, torch.permute, Tensor[a:b:c], torch.narrow,
// torch.select, torch.unsqueeze, torch.squeeze, Tensor.expand, torch.flatten.
//
// Every row here sets flags.view: its infer computes the output's shape,
// strides and storage offset (in elements) within input 0's storage, dispatch
// runs no kernel and the output shares the storage (Note [unit of eviction]).
// Autograd still records a node; the backward rules are ordinary ops
// (slice_backward / select_backward scatter the gradient into zeros of the
// input's shape; their kernels live in cpu/index.cpp).
#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>

#include "eager/ops/registration.h"

namespace dtr {
namespace ops {
namespace {

// ---- shape helpers -----------------------------------------------------------

/// Resolves one -1 in `shape` against `numel` (PyTorch's infer_size).
/// Throws ValueError naming `op` and both shapes.
Shape infer_size(std::string_view op, IntList shape, IntList input_shape) {
  const int64_t numel = dtr::numel(input_shape);
  Shape out(shape.begin(), shape.end());
  int64_t known = 1;
  std::optional<size_t> infer_dim;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == -1) {
      DTR_CHECK(!infer_dim, ValueError,
                "{}: only one dimension can be inferred, got shape {} for input of shape {}", op,
                shape_str(shape), shape_str(input_shape));
      infer_dim = d;
    } else {
      DTR_CHECK(out[d] >= 0, ValueError,
                "{}: invalid shape dimension {} in shape {} for input of shape {}", op, out[d],
                shape_str(shape), shape_str(input_shape));
      // Checked before it could wrap: a product beyond int64 cannot match numel.
      DTR_CHECK(!__builtin_mul_overflow(known, out[d], &known), ValueError,
                "{}: shape {} is invalid for input of shape {} ({} elements)", op, shape_str(shape),
                shape_str(input_shape), numel);
    }
  }
  if (infer_dim) {
    DTR_CHECK(known != 0, ValueError,
              "{}: cannot reshape input of shape {} ({} elements) into shape {} because the "
              "unspecified dimension size -1 can be any value and is ambiguous",
              op, shape_str(input_shape), numel, shape_str(shape));
    DTR_CHECK(numel % known == 0, ValueError,
              "{}: shape {} is invalid for input of shape {} ({} elements)", op, shape_str(shape),
              shape_str(input_shape), numel);
    out[*infer_dim] = numel / known;
  } else {
    DTR_CHECK(known == numel, ValueError,
              "{}: shape {} is invalid for input of shape {} ({} elements)", op, shape_str(shape),
              shape_str(input_shape), numel);
  }
  return out;
}

/// Strides that view (old_shape, old_strides) as new_shape without copying,
/// or nullopt when some new dimension would span two non-mergeable input
/// dimensions (PyTorch's computeStride). `new_shape` has old_shape's numel.
std::optional<Strides> view_strides(IntList old_shape, IntList old_strides, IntList new_shape) {
  Strides out(new_shape.size(), 1);
  if (old_shape.empty()) return out;
  const int64_t n = dtr::numel(old_shape);
  if (n == 0 && old_shape == new_shape) return Strides(old_strides.begin(), old_strides.end());
  if (n == 0) {
    // Any strides work for an empty tensor; use the contiguous ones.
    return contiguous_strides(new_shape);
  }
  int64_t view_d = int64_t(new_shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = int64_t(old_shape.size()) - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= old_shape[size_t(tensor_d)];
    // A chunk of input dims ends where the next (outer) dim is not contiguous with it.
    const bool chunk_ends =
        tensor_d == 0 || (old_shape[size_t(tensor_d - 1)] != 1 &&
                          old_strides[size_t(tensor_d - 1)] != tensor_numel * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_shape[size_t(view_d)] == 1)) {
      out[size_t(view_d)] = view_numel * chunk_base_stride;
      view_numel *= new_shape[size_t(view_d)];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (tensor_d > 0) {
      chunk_base_stride = old_strides[size_t(tensor_d - 1)];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

/// The view of `in` with `shape`, `strides` and `offset` (dtype, device kept).
TensorMeta view_meta(const TensorMeta& in, Shape shape, Strides strides, int64_t offset) {
  TensorMeta m = in;
  m.shape = std::move(shape);
  m.strides = std::move(strides);
  m.offset = offset;
  return m;
}

void check_not_scalar(std::string_view op, const TensorMeta& m) {
  DTR_CHECK(m.dim() > 0, IndexError, "{}: cannot be applied to a 0-dim tensor", op);
}

/// start/end of a slice after PyTorch's wrapping and clamping.
struct SliceRange {
  int64_t start = 0;
  int64_t length = 0;  // elements in the result along the dim
};

SliceRange slice_range(int64_t size, const Attrs& a) {
  const int64_t step = a.i("step");
  int64_t start = a.i_or("start", 0);
  int64_t end = a.i_or("end", std::numeric_limits<int64_t>::max());
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  return {start, (end - start + step - 1) / step};
}

// ---- view ----------------------------------------------------------------------

void infer_view(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const TensorMeta& x = in[0];
  Shape shape = infer_size("view", a.ints("shape"), x.shape);
  std::optional<Strides> st = view_strides(x.shape, x.strides, shape);
  DTR_CHECK(st.has_value(), ValueError,
            "view: shape {} is not compatible with input of shape {} and strides {} (at least one "
            "dimension spans across two contiguous subspaces); use reshape instead",
            shape_str(a.ints("shape")), shape_str(x.shape), shape_str(x.strides));
  out.push_back(view_meta(x, std::move(shape), std::move(*st), x.offset));
}

std::vector<Tensor> view_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {reshape(g[0], ctx.input_metas[0].shape)};
}

// ---- transpose, permute -------------------------------------------------------

void infer_transpose(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const TensorMeta& x = in[0];
  const int64_t d0 = normalize_dim(a.i("dim0"), x.dim(), "transpose");
  const int64_t d1 = normalize_dim(a.i("dim1"), x.dim(), "transpose");
  Shape shape = x.shape;
  Strides strides = x.strides;
  if (x.dim() > 0) {
    std::swap(shape[size_t(d0)], shape[size_t(d1)]);
    std::swap(strides[size_t(d0)], strides[size_t(d1)]);
  }
  out.push_back(view_meta(x, std::move(shape), std::move(strides), x.offset));
}

std::vector<Tensor> transpose_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {transpose(g[0], ctx.attrs.i("dim0"), ctx.attrs.i("dim1"))};
}

/// The permutation `dims` normalized; throws ValueError / IndexError.
Shape normalize_permutation(IntList dims, const TensorMeta& x) {
  DTR_CHECK(int64_t(dims.size()) == x.dim(), ValueError,
            "permute: number of dims {} does not match the input's {} dimensions (input shape "
            "{}, dims {})",
            dims.size(), x.dim(), shape_str(x.shape), shape_str(dims));
  Shape perm(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = normalize_dim(dims[i], x.dim(), "permute");
    DTR_CHECK(!seen[size_t(d)], ValueError, "permute: repeated dim {} in dims {} (input shape {})",
              d, shape_str(dims), shape_str(x.shape));
    seen[size_t(d)] = true;
    perm[i] = d;
  }
  return perm;
}

void infer_permute(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const TensorMeta& x = in[0];
  const Shape perm = normalize_permutation(a.ints("dims"), x);
  Shape shape(perm.size());
  Strides strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    shape[i] = x.shape[size_t(perm[i])];
    strides[i] = x.strides[size_t(perm[i])];
  }
  out.push_back(view_meta(x, std::move(shape), std::move(strides), x.offset));
}

std::vector<Tensor> permute_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  const Shape perm = normalize_permutation(ctx.attrs.ints("dims"), ctx.input_metas[0]);
  Shape inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[size_t(perm[i])] = int64_t(i);
  return {permute(g[0], inverse)};
}

// ---- slice, select ------------------------------------------------------------

void infer_slice(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const TensorMeta& x = in[0];
  check_not_scalar("slice", x);
  const int64_t dim = normalize_dim(a.i("dim"), x.dim(), "slice");
  const int64_t step = a.i("step");
  DTR_CHECK(step > 0, ValueError, "slice: step must be positive, got {} (input shape {})", step,
            shape_str(x.shape));
  const SliceRange r = slice_range(x.shape[size_t(dim)], a);
  Shape shape = x.shape;
  Strides strides = x.strides;
  shape[size_t(dim)] = r.length;
  strides[size_t(dim)] *= step;
  out.push_back(
      view_meta(x, std::move(shape), std::move(strides), x.offset + r.start * x.strides[size_t(dim)]));
}

std::vector<Tensor> slice_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("slice_backward");
  const TensorMeta& x = ctx.input_metas[0];
  const int64_t dim = normalize_dim(ctx.attrs.i("dim"), x.dim(), "slice");
  const SliceRange r = slice_range(x.shape[size_t(dim)], ctx.attrs);
  return {dispatch1(o, {g[0]},
                    Attrs{{"input_shape", x.shape},
                          {"dim", dim},
                          {"start", r.start},
                          {"step", ctx.attrs.i("step")}})};
}

void infer_select(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const TensorMeta& x = in[0];
  check_not_scalar("select", x);
  const int64_t dim = normalize_dim(a.i("dim"), x.dim(), "select");
  const int64_t size = x.shape[size_t(dim)];
  int64_t index = a.i("index");
  DTR_CHECK(index >= -size && index < size, IndexError,
            "select: index {} out of range for tensor of shape {} at dimension {}", index,
            shape_str(x.shape), dim);
  if (index < 0) index += size;
  Shape shape = x.shape;
  Strides strides = x.strides;
  shape.erase(shape.begin() + dim);
  strides.erase(strides.begin() + dim);
  out.push_back(view_meta(x, std::move(shape), std::move(strides),
                          x.offset + index * x.strides[size_t(dim)]));
}

std::vector<Tensor> select_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("select_backward");
  const TensorMeta& x = ctx.input_metas[0];
  const int64_t dim = normalize_dim(ctx.attrs.i("dim"), x.dim(), "select");
  int64_t index = ctx.attrs.i("index");
  if (index < 0) index += x.shape[size_t(dim)];
  return {dispatch1(o, {g[0]}, Attrs{{"input_shape", x.shape}, {"dim", dim}, {"index", index}})};
}

// slice_backward / select_backward: zeros of `input_shape` with the gradient
// written into the region the forward view covered. Each is differentiable
// (its backward is the forward view again), so double backward works.

void infer_slice_backward(std::span<const TensorMeta> in, const Attrs& a,
                          std::vector<TensorMeta>& out) {
  const Shape& shape = a.ints("input_shape");
  const int64_t dim = a.i("dim"), start = a.i("start"), step = a.i("step");
  const Shape& g = in[0].shape;
  // A row callable by name (bindings): its attributes are the caller's.
  DTR_CHECK(dim >= 0 && dim < int64_t(shape.size()), IndexError,
            "slice_backward: dim {} out of range for input shape {}", dim, shape_str(shape));
  bool fits = g.size() == shape.size() && start >= 0 && step > 0;
  for (size_t d = 0; fits && d < g.size(); ++d) {
    if (int64_t(d) != dim) fits = g[d] == shape[d];
  }
  fits = fits && (g[size_t(dim)] == 0 || start + (g[size_t(dim)] - 1) * step < shape[size_t(dim)]);
  DTR_CHECK(fits, ValueError,
            "slice_backward: gradient of shape {} does not fit input shape {} (dim {}, start {}, "
            "step {})",
            shape_str(g), shape_str(shape), dim, start, step);
  out.push_back(out_meta(shape, in[0].dtype, in[0].device));
}

std::vector<Tensor> slice_backward_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  const int64_t dim = ctx.attrs.i("dim"), start = ctx.attrs.i("start"), step = ctx.attrs.i("step");
  const int64_t len = ctx.input_metas[0].shape[size_t(dim)];
  const int64_t end = len == 0 ? start : start + (len - 1) * step + 1;  // one past the last element
  return {slice(g[0], dim, start, end, step)};
}

void infer_select_backward(std::span<const TensorMeta> in, const Attrs& a,
                           std::vector<TensorMeta>& out) {
  const Shape& shape = a.ints("input_shape");
  const int64_t dim = a.i("dim"), index = a.i("index");
  // A row callable by name (bindings): its attributes are the caller's.
  DTR_CHECK(dim >= 0 && dim < int64_t(shape.size()), IndexError,
            "select_backward: dim {} out of range for input shape {}", dim, shape_str(shape));
  Shape expected = shape;
  expected.erase(expected.begin() + dim);
  DTR_CHECK(expected == in[0].shape && index >= 0 && index < shape[size_t(dim)], ValueError,
            "select_backward: gradient of shape {} does not fit input shape {} (index {})",
            shape_str(in[0].shape), shape_str(shape), index);
  out.push_back(out_meta(shape, in[0].dtype, in[0].device));
}

std::vector<Tensor> select_backward_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {select(g[0], ctx.attrs.i("dim"), ctx.attrs.i("index"))};
}

// ---- unsqueeze, squeeze ---------------------------------------------------------

void infer_unsqueeze(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const TensorMeta& x = in[0];
  const int64_t dim = normalize_dim(a.i("dim"), x.dim() + 1, "unsqueeze");
  Shape shape = x.shape;
  Strides strides = x.strides;
  // PyTorch's stride for the new dim: as if it sat just outside the next one.
  const int64_t stride = dim >= x.dim() ? 1 : x.shape[size_t(dim)] * x.strides[size_t(dim)];
  shape.insert(shape.begin() + dim, 1);
  strides.insert(strides.begin() + dim, stride);
  out.push_back(view_meta(x, std::move(shape), std::move(strides), x.offset));
}

std::vector<Tensor> unsqueeze_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {squeeze(g[0], ctx.attrs.i("dim"))};
}

/// Squeezes dim `a.i("dim")`, or every size-1 dim when the attribute is absent.
void infer_squeeze(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const TensorMeta& x = in[0];
  Shape shape;
  Strides strides;
  if (a.has("dim")) {
    const int64_t dim = normalize_dim(a.i("dim"), x.dim(), "squeeze");
    for (int64_t d = 0; d < x.dim(); ++d) {
      if (d == dim && x.shape[size_t(d)] == 1) continue;
      shape.push_back(x.shape[size_t(d)]);
      strides.push_back(x.strides[size_t(d)]);
    }
  } else {
    for (int64_t d = 0; d < x.dim(); ++d) {
      if (x.shape[size_t(d)] == 1) continue;
      shape.push_back(x.shape[size_t(d)]);
      strides.push_back(x.strides[size_t(d)]);
    }
  }
  out.push_back(view_meta(x, std::move(shape), std::move(strides), x.offset));
}

std::vector<Tensor> squeeze_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {reshape(g[0], ctx.input_metas[0].shape)};
}

// ---- expand ---------------------------------------------------------------------

void infer_expand(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const TensorMeta& x = in[0];
  const Shape& sizes = a.ints("shape");
  const int64_t ndim = int64_t(sizes.size()), xdim = x.dim();
  DTR_CHECK(ndim >= xdim, ValueError,
            "expand: the number of sizes provided ({}) must be greater or equal to the number of "
            "dimensions in the tensor ({}); target sizes {}, tensor shape {}",
            ndim, xdim, shape_str(sizes), shape_str(x.shape));
  Shape shape(static_cast<size_t>(ndim));
  Strides strides(static_cast<size_t>(ndim));
  for (int64_t i = ndim - 1; i >= 0; --i) {
    const int64_t d = xdim - (ndim - i);  // matching input dim, < 0 for new leading dims
    int64_t size = d >= 0 ? x.shape[size_t(d)] : 1;
    int64_t stride = d >= 0          ? x.strides[size_t(d)]
                     : xdim == 0     ? 0
                     : i + 1 < ndim ? shape[size_t(i + 1)] * strides[size_t(i + 1)]
                                     : 1;
    int64_t target = sizes[size_t(i)];
    if (target == -1) {
      DTR_CHECK(d >= 0, ValueError,
                "expand: the expanded size -1 isn't allowed in a leading, non-existing dimension "
                "{}; target sizes {}, tensor shape {}",
                i, shape_str(sizes), shape_str(x.shape));
      target = size;
    }
    DTR_CHECK(target >= 0, ValueError, "expand: invalid size {} in target sizes {} (tensor shape {})",
              target, shape_str(sizes), shape_str(x.shape));
    if (size != target) {
      DTR_CHECK(size == 1, ValueError,
                "expand: the expanded size of the tensor ({}) must match the existing size ({}) at "
                "non-singleton dimension {}; target sizes {}, tensor shape {}",
                target, size, i, shape_str(sizes), shape_str(x.shape));
      size = target;
      stride = 0;
    }
    shape[size_t(i)] = size;
    strides[size_t(i)] = stride;
  }
  (void)numel(shape);  // ValueError naming the shape for 2^60 elements or more
  out.push_back(view_meta(x, std::move(shape), std::move(strides), x.offset));
}

std::vector<Tensor> expand_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {autograd::sum_to(g[0], ctx.input_metas[0].shape)};
}

OpDef row(std::string name, InferFn infer, BackwardFn backward, std::vector<ParamSpec> params) {
  OpDef d;
  d.name = std::move(name);
  d.params = std::move(params);
  d.infer = infer;
  d.backward = backward;
  d.save = kSaveNone;
  return d;
}

OpDef view_row(std::string name, InferFn infer, BackwardFn backward,
               std::vector<ParamSpec> params) {
  OpDef d = row(std::move(name), infer, backward, std::move(params));
  d.flags.view = true;
  d.inputs(1);
  return d;
}

}  // namespace

void register_view_ops() {
  auto& R = OpRegistry::instance();
  using param::i, param::ints, param::optional;
  R.define(view_row("view", infer_view, view_backward, {ints("shape")}));
  R.define(view_row("transpose", infer_transpose, transpose_backward, {i("dim0"), i("dim1")}));
  R.define(view_row("permute", infer_permute, permute_backward, {ints("dims")}));
  // start and end absent: the dim's beginning and end (slice_range).
  R.define(view_row("slice", infer_slice, slice_backward,
                    {i("dim"), optional(i("start", 0)),
                     optional(i("end", std::numeric_limits<int64_t>::max())), i("step", 1)}));
  R.define(view_row("select", infer_select, select_backward, {i("dim"), i("index")}));
  R.define(view_row("unsqueeze", infer_unsqueeze, unsqueeze_backward, {i("dim")}));
  // dim absent: every size-1 dim.
  R.define(view_row("squeeze", infer_squeeze, squeeze_backward, {optional(i("dim"))}));
  R.define(view_row("expand", infer_expand, expand_backward, {ints("shape")}));

  // Gradient scatters of slice/select (kernels in cpu/index.cpp).
  OpDef sb = row("slice_backward", infer_slice_backward, slice_backward_backward,
                 {ints("input_shape"), i("dim"), i("start"), i("step")});
  sb.flags.strided_inputs = true;
  sb.inputs(1);
  R.define(std::move(sb));
  OpDef selb = row("select_backward", infer_select_backward, select_backward_backward,
                   {ints("input_shape"), i("dim"), i("index")});
  selb.flags.strided_inputs = true;
  selb.inputs(1);
  R.define(std::move(selb));
}

}  // namespace ops

/// x viewed as `shape` (one entry may be -1), sharing x's storage
/// (torch.Tensor.view). Any dtype. Throws ValueError when the element count
/// differs or when x's strides do not allow a view (use reshape then).
Tensor view(const Tensor& x, IntList shape) {
  static const OpDef& o = op("view");
  return dispatch1(o, {x}, Attrs{{"shape", shape.vec()}});
}

/// x as `shape` (one entry may be -1): a view when x's strides allow one,
/// else a contiguous copy (torch.reshape). Throws ValueError when the element
/// count differs.
Tensor reshape(const Tensor& x, IntList shape) {
  const Shape resolved = ops::infer_size("reshape", shape, x.shape());
  if (ops::view_strides(x.shape(), x.strides(), resolved).has_value()) return view(x, resolved);
  return view(x.clone(), resolved);
}

/// Swaps dims dim0 and dim1 (negative counts from the end); a view
/// (torch.transpose). Throws IndexError for out-of-range dims.
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  static const OpDef& o = op("transpose");
  return dispatch1(o, {x}, Attrs{{"dim0", dim0}, {"dim1", dim1}});
}

/// Reorders dims: output dim i is input dim dims[i]; a view (torch.permute).
/// Throws ValueError unless `dims` is a permutation of x's dims, IndexError
/// for out-of-range entries.
Tensor permute(const Tensor& x, IntList dims) {
  static const OpDef& o = op("permute");
  return dispatch1(o, {x}, Attrs{{"dims", dims.vec()}});
}

/// x[..., start:end:step, ...] along `dim`, Python-style: negative start/end
/// count from the end, out-of-range ones are clamped, nullopt means the
/// beginning/end; a view. Throws ValueError for step <= 0 and IndexError for
/// an out-of-range dim or a 0-d input.
Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
             int64_t step) {
  static const OpDef& o = op("slice");
  Attrs a{{"dim", dim}, {"step", step}};
  if (start) a.set("start", *start);
  if (end) a.set("end", *end);
  return dispatch1(o, {x}, std::move(a));
}

/// Elements [start, start + length) along `dim` (start may be negative); a
/// view (torch.narrow). Throws IndexError when start is out of range or the
/// range exceeds the dim, ValueError for a negative length.
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  DTR_CHECK(x.dim() > 0, IndexError, "narrow: cannot be applied to a 0-dim tensor");
  const int64_t d = normalize_dim(dim, x.dim(), "narrow");
  const int64_t size = x.shape()[size_t(d)];
  DTR_CHECK(length >= 0, ValueError, "narrow: length must be non-negative, got {} (input shape {})",
            length, shape_str(x.shape()));
  DTR_CHECK(start >= -size && start <= size, IndexError,
            "narrow: start {} out of range for dimension {} of size {} (input shape {})", start, d,
            size, shape_str(x.shape()));
  if (start < 0) start += size;
  DTR_CHECK(start + length <= size, IndexError,
            "narrow: start ({}) + length ({}) exceeds dimension {} of size {} (input shape {})",
            start, length, d, size, shape_str(x.shape()));
  return slice(x, d, start, start + length, 1);
}

/// x indexed at `index` along `dim`, which is removed; a view
/// (torch.select). Negative index counts from the end. Throws IndexError for
/// an out-of-range dim or index, or a 0-d input.
Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  static const OpDef& o = op("select");
  return dispatch1(o, {x}, Attrs{{"dim", dim}, {"index", index}});
}

/// Inserts a size-1 dim at `dim` in [-x.dim()-1, x.dim()]; a view
/// (torch.unsqueeze). Throws IndexError.
Tensor unsqueeze(const Tensor& x, int64_t dim) {
  static const OpDef& o = op("unsqueeze");
  return dispatch1(o, {x}, Attrs{{"dim", dim}});
}

/// Removes every size-1 dim; a view (torch.squeeze).
Tensor squeeze(const Tensor& x) {
  static const OpDef& o = op("squeeze");
  return dispatch1(o, {x});
}

/// Removes `dim` if its size is 1 (else returns a view of x unchanged); a
/// view (torch.squeeze(x, dim)). Throws IndexError for an out-of-range dim.
Tensor squeeze(const Tensor& x, int64_t dim) {
  static const OpDef& o = op("squeeze");
  return dispatch1(o, {x}, Attrs{{"dim", dim}});
}

/// Broadcasts size-1 dims (and new leading dims) to `shape`, -1 keeping a
/// size; expanded dims get stride 0, no data is copied (torch.Tensor.expand).
/// Throws ValueError for fewer sizes than dims or a mismatched non-1 size.
Tensor expand(const Tensor& x, IntList shape) {
  static const OpDef& o = op("expand");
  return dispatch1(o, {x}, Attrs{{"shape", shape.vec()}});
}

/// Merges dims start_dim..end_dim into one (torch.flatten): a view when the
/// strides allow, else a copy; a 0-d input becomes shape [1]. Throws
/// IndexError for out-of-range dims, ValueError when start_dim > end_dim.
Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  const int64_t s = normalize_dim(start_dim, x.dim(), "flatten");
  const int64_t e = normalize_dim(end_dim, x.dim(), "flatten");
  DTR_CHECK(s <= e, ValueError,
            "flatten: start_dim ({}) cannot come after end_dim ({}) (input shape {})", start_dim,
            end_dim, shape_str(x.shape()));
  if (x.dim() == 0) return reshape(x, {1});
  if (s == e) return x;
  Shape shape;
  for (int64_t d = 0; d < s; ++d) shape.push_back(x.shape()[size_t(d)]);
  int64_t merged = 1;
  for (int64_t d = s; d <= e; ++d) merged *= x.shape()[size_t(d)];
  shape.push_back(merged);
  for (int64_t d = e + 1; d < x.dim(); ++d) shape.push_back(x.shape()[size_t(d)]);
  return reshape(x, shape);
}

}  // namespace dtr
