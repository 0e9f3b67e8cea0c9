// Joining and indexing: cat, stack, split, chunk, index_select, gather,
// masked_fill (and Tensor::masked_fill_), tril, triu, flip, scatter_add (and
// scatter_add_), index_add (and index_add_), and the compositions roll,
// repeat and repeat_interleave. PyTorch: torch.cat, torch.stack,
// torch.split, torch.chunk, torch.index_select, torch.gather,
// torch.masked_fill, torch.tril, torch.triu, torch.flip, torch.scatter_add,
// torch.index_add, torch.roll, torch.Tensor.repeat, torch.repeat_interleave.
//
// scatter_add and index_add accumulate like the backward scatters below: each
// output element by one thread, in index position order (Note [determinism]).
//
// The gradients of index_select and gather scatter-add into zeros of the
// input's shape. They are ops of their own (index_select_backward,
// gather_backward) whose kernels accumulate every output element in a fixed
// order, serially per output slot, without atomics (Note [determinism]).
#include <algorithm>

#include "core/shape_check.h"
#include "eager/ops/elementwise.h"
#include "eager/ops/registration.h"

namespace dtr {
namespace ops {
namespace {

// ---- cat -----------------------------------------------------------------------

/// PyTorch still accepts 1-D empty tensors of shape [0] in cat with any
/// other shape and skips them.
bool skipped_in_cat(const TensorMeta& m) { return m.dim() == 1 && m.shape[0] == 0; }

void infer_cat(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  DTR_CHECK(!in.empty(), ValueError, "cat: expected a non-empty list of tensors");
  // The first tensor that is not a legacy empty one fixes the shape.
  size_t ref = 0;
  while (ref < in.size() && skipped_in_cat(in[ref])) ++ref;
  if (ref == in.size()) ref = 0;
  const TensorMeta& r = in[ref];
  DTR_CHECK(r.dim() > 0, ValueError,
            "cat: zero-dimensional tensor (at position {}) cannot be concatenated", ref);
  const int64_t dim = normalize_dim(a.i("dim"), r.dim(), "cat");
  Shape shape = r.shape;
  shape[size_t(dim)] = 0;
  DType dtype = in[0].dtype;
  for (size_t k = 0; k < in.size(); ++k) {
    const TensorMeta& m = in[k];
    dtype = k == 0 ? m.dtype : promote_types(dtype, m.dtype);
    if (skipped_in_cat(m) && k != ref) continue;
    DTR_CHECK(m.dim() == r.dim(), ValueError,
              "cat: tensors must have same number of dimensions: got {} ({} at position {}) and {} "
              "({} at position {})",
              r.dim(), shape_str(r.shape), ref, m.dim(), shape_str(m.shape), k);
    for (int64_t d = 0; d < r.dim(); ++d) {
      if (d == dim) continue;
      DTR_CHECK(m.shape[size_t(d)] == r.shape[size_t(d)], ValueError,
                "cat: sizes of tensors must match except in dimension {}: expected size {} but got "
                "size {} for tensor number {} in the list (shapes {} and {})",
                dim, r.shape[size_t(d)], m.shape[size_t(d)], k, shape_str(r.shape),
                shape_str(m.shape));
    }
    DTR_CHECK(!__builtin_add_overflow(shape[size_t(dim)], m.shape[size_t(dim)], &shape[size_t(dim)]),
              ValueError, "cat: the sizes along dimension {} overflow int64 (tensor number {}, shape {})",
              dim, k, shape_str(m.shape));
  }
  out.push_back(out_meta(shape, dtype, r.device));
}

std::vector<Tensor> cat_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  const int64_t dim = normalize_dim(ctx.attrs.i("dim"), g[0].dim(), "cat");
  std::vector<Tensor> grads(ctx.input_metas.size());
  int64_t offset = 0;
  for (size_t k = 0; k < ctx.input_metas.size(); ++k) {
    const TensorMeta& m = ctx.input_metas[k];
    if (skipped_in_cat(m) && g[0].dim() != 1) {
      if (ctx.needs_grad(k)) grads[k] = zeros(m.shape, TensorOptions(m.dtype).device(m.device));
      continue;
    }
    const int64_t size = m.shape[size_t(dim)];
    if (ctx.needs_grad(k)) {
      // Note [cat gradients are copies].
      grads[k] = narrow(g[0], dim, offset, size);
      if (grads[k].dtype() != m.dtype) grads[k] = grads[k].to(m.dtype);
      else if (size != g[0].size(dim)) grads[k] = grads[k].clone();
    }
    offset += size;
  }
  return grads;
}

// ---- index_select ----------------------------------------------------------------

void check_index_dtype(std::string_view op, const TensorMeta& index, bool allow_int32) {
  DTR_CHECK(index.dtype == kInt64 || (allow_int32 && index.dtype == kInt32), TypeError,
            "{}: expected index of dtype int64{}, got {} (index shape {})", op,
            allow_int32 ? " or int32" : "", dtype_name(index.dtype), shape_str(index.shape));
}

void infer_index_select(std::span<const TensorMeta> in, const Attrs& a,
                        std::vector<TensorMeta>& out) {
  const TensorMeta& x = in[0];
  const TensorMeta& index = in[1];
  check_index_dtype("index_select", index, /*allow_int32=*/true);
  DTR_CHECK(index.dim() <= 1, ValueError,
            "index_select: index must be 0-d or 1-d, got shape {} (input shape {})",
            shape_str(index.shape), shape_str(x.shape));
  const int64_t dim = normalize_dim(a.i("dim"), x.dim(), "index_select");
  Shape shape = x.shape;
  if (x.dim() == 0) {
    DTR_CHECK(index.numel() == 1, IndexError,
              "index_select: index of a 0-d input must have one element, got shape {}",
              shape_str(index.shape));
  } else {
    DTR_CHECK(x.shape[size_t(dim)] > 0 || index.numel() == 0, IndexError,
              "index_select: cannot select from dimension {} of size 0 (input shape {})", dim,
              shape_str(x.shape));
    shape[size_t(dim)] = index.numel();
  }
  out.push_back(out_meta(shape, x.dtype, x.device));
}

std::vector<Tensor> index_select_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("index_select_backward");
  const TensorMeta& x = ctx.input_metas[0];
  const int64_t dim = x.dim() == 0 ? 0 : normalize_dim(ctx.attrs.i("dim"), x.dim(), "index_select");
  return {dispatch1(o, {g[0], ctx.inputs[1]}, Attrs{{"dim", dim}, {"input_shape", x.shape}})};
}

/// The `input_shape` of a scatter-style backward row (index_select_backward,
/// gather_backward) as a shape, and its `dim` normalized against it. These
/// rows are reachable by name (dispatch, the C API), so their attributes are
/// checked like any op's: ValueError for a negative size, IndexError for a
/// dim out of range.
std::pair<Shape, int64_t> scatter_backward_target(const Attrs& a, std::string_view op) {
  const IntList sizes = a.ints("input_shape");
  for (int64_t s : sizes) {
    DTR_CHECK(s >= 0, ValueError, "{}: input_shape {} has a negative size", op, shape_str(sizes));
  }
  Shape shape(sizes.begin(), sizes.end());
  const int64_t dim = shape.empty() ? 0 : normalize_dim(a.i("dim"), int64_t(shape.size()), op);
  return {std::move(shape), dim};
}

void infer_index_select_backward(std::span<const TensorMeta> in, const Attrs& a,
                                 std::vector<TensorMeta>& out) {
  constexpr std::string_view kOp = "index_select_backward";
  const TensorMeta& grad = in[0];
  const TensorMeta& index = in[1];
  check_index_dtype(kOp, index, /*allow_int32=*/true);
  auto [shape, dim] = scatter_backward_target(a, kOp);
  DTR_CHECK(index.dim() <= 1, ValueError, "{}: index must be 0-d or 1-d, got shape {}", kOp,
            shape_str(index.shape));
  Shape expected = shape;
  if (!expected.empty()) expected[size_t(dim)] = index.numel();
  DTR_CHECK(grad.shape == expected, ValueError,
            "{}: grad of shape {} does not match input_shape {} with {} indices at dimension {}",
            kOp, shape_str(grad.shape), shape_str(shape), index.numel(), dim);
  out.push_back(out_meta(shape, grad.dtype, grad.device));
}

std::vector<Tensor> index_select_backward_backward(const BackwardContext& ctx,
                                                   std::span<const Tensor> g) {
  return {index_select(g[0], ctx.attrs.i("dim"), ctx.inputs[1])};
}

// ---- gather ----------------------------------------------------------------------

void infer_gather(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const TensorMeta& x = in[0];
  const TensorMeta& index = in[1];
  check_index_dtype("gather", index, /*allow_int32=*/false);
  const int64_t dim = normalize_dim(a.i("dim"), x.dim(), "gather");
  DTR_CHECK(index.dim() == x.dim(), ValueError,
            "gather: index {} and input {} must have the same number of dimensions",
            shape_str(index.shape), shape_str(x.shape));
  for (int64_t d = 0; d < index.dim(); ++d) {
    if (d == dim) continue;
    DTR_CHECK(index.shape[size_t(d)] <= x.shape[size_t(d)], ValueError,
              "gather: size of index {} does not fit input {} at dimension {} (expected index "
              "size <= input size except at dimension {})",
              shape_str(index.shape), shape_str(x.shape), d, dim);
  }
  out.push_back(out_meta(index.shape, x.dtype, x.device));
}

std::vector<Tensor> gather_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("gather_backward");
  const TensorMeta& x = ctx.input_metas[0];
  const int64_t dim = normalize_dim(ctx.attrs.i("dim"), x.dim(), "gather");
  return {dispatch1(o, {g[0], ctx.inputs[1]}, Attrs{{"dim", dim}, {"input_shape", x.shape}})};
}

void infer_gather_backward(std::span<const TensorMeta> in, const Attrs& a,
                           std::vector<TensorMeta>& out) {
  constexpr std::string_view kOp = "gather_backward";
  const TensorMeta& grad = in[0];
  const TensorMeta& index = in[1];
  check_index_dtype(kOp, index, /*allow_int32=*/false);
  auto [shape, dim] = scatter_backward_target(a, kOp);
  DTR_CHECK(grad.shape == index.shape, ValueError,
            "{}: grad {} and index {} must have the same shape", kOp, shape_str(grad.shape),
            shape_str(index.shape));
  DTR_CHECK(index.dim() == int64_t(shape.size()), ValueError,
            "{}: index {} and input_shape {} must have the same number of dimensions", kOp,
            shape_str(index.shape), shape_str(shape));
  for (int64_t d = 0; d < index.dim(); ++d) {
    DTR_CHECK(d == dim || index.shape[size_t(d)] <= shape[size_t(d)], ValueError,
              "{}: index {} does not fit input_shape {} at dimension {}", kOp,
              shape_str(index.shape), shape_str(shape), d);
  }
  out.push_back(out_meta(shape, grad.dtype, grad.device));
}

std::vector<Tensor> gather_backward_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {gather(g[0], ctx.attrs.i("dim"), ctx.inputs[1])};
}

// ---- masked_fill -------------------------------------------------------------------

void check_mask(std::string_view op, const TensorMeta& x, const TensorMeta& mask) {
  DTR_CHECK(mask.dtype == kBool, TypeError,
            "{}: expected a mask of dtype bool, got {} (mask shape {}, input shape {})", op,
            dtype_name(mask.dtype), shape_str(mask.shape), shape_str(x.shape));
}

void infer_masked_fill(std::span<const TensorMeta> in, const Attrs&, std::vector<TensorMeta>& out) {
  check_mask("masked_fill", in[0], in[1]);
  const Shape shape = broadcast_shapes(in[0].shape, in[1].shape, "masked_fill");
  out.push_back(out_meta(shape, in[0].dtype, in[0].device));
}

void infer_masked_fill_(std::span<const TensorMeta> in, const Attrs&, std::vector<TensorMeta>& out) {
  check_mask("masked_fill_", in[0], in[1]);
  const Shape shape = broadcast_shapes(in[0].shape, in[1].shape, "masked_fill_");
  DTR_CHECK(shape == in[0].shape, ValueError,
            "masked_fill_: mask of shape {} cannot be broadcast to the input's shape {}",
            shape_str(in[1].shape), shape_str(in[0].shape));
  out.push_back(in[0]);
}

std::vector<Tensor> masked_fill_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {autograd::sum_to(masked_fill(g[0], ctx.inputs[1], 0), ctx.input_metas[0].shape)};
}

// ---- tril, triu --------------------------------------------------------------------

template <bool kLower>
void infer_triangle(std::span<const TensorMeta> in, const Attrs&, std::vector<TensorMeta>& out) {
  const TensorMeta& x = in[0];
  DTR_CHECK(x.dim() >= 2, ValueError, "{}: input must have at least 2 dimensions, got shape {}",
            kLower ? "tril" : "triu", shape_str(x.shape));
  out.push_back(out_meta(x.shape, x.dtype, x.device));
}

std::vector<Tensor> tril_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {tril(g[0], ctx.attrs.i("diagonal"))};
}

std::vector<Tensor> triu_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {triu(g[0], ctx.attrs.i("diagonal"))};
}

// ---- flip ----------------------------------------------------------------------------

/// `dims` normalized against `ndim`; ValueError naming the op for a repeated dim.
Shape normalized_dims(IntList dims, int64_t ndim, std::string_view op) {
  Shape out;
  for (int64_t d : dims) {
    const int64_t n = normalize_dim(d, ndim, op);
    DTR_CHECK(std::find(out.begin(), out.end(), n) == out.end(), ValueError,
              "{}: dims {} has duplicates (dimension {} appears twice)", op, shape_str(dims), n);
    out.push_back(n);
  }
  return out;
}

void infer_flip(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  (void)normalized_dims(a.ints("dims"), in[0].dim(), "flip");
  out.push_back(out_meta(in[0].shape, in[0].dtype, in[0].device));
}

std::vector<Tensor> flip_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {flip(g[0], ctx.attrs.ints("dims"))};
}

// ---- scatter_add, index_add ------------------------------------------------------------

/// The checks of torch.scatter_add: int64 index, src of self's dtype, all three
/// with the same number of dims, index no larger than src anywhere and than
/// self outside `dim`. Returns dim normalized.
int64_t check_scatter_add(std::string_view op, const TensorMeta& x, const TensorMeta& index,
                          const TensorMeta& src, int64_t dim_attr) {
  check_index_dtype(op, index, /*allow_int32=*/false);
  DTR_CHECK(src.dtype == x.dtype, TypeError,
            "{}: expected self.dtype to be equal to src.dtype, got {} and {}", op,
            dtype_name(x.dtype), dtype_name(src.dtype));
  const int64_t dim = normalize_dim(dim_attr, x.dim(), op);
  DTR_CHECK(index.dim() == x.dim() && src.dim() == x.dim(), ValueError,
            "{}: index {}, self {} and src {} must have the same number of dimensions", op,
            shape_str(index.shape), shape_str(x.shape), shape_str(src.shape));
  for (int64_t d = 0; d < x.dim(); ++d) {
    const int64_t n = index.shape[size_t(d)];
    DTR_CHECK(n <= src.shape[size_t(d)] && (d == dim || n <= x.shape[size_t(d)]), ValueError,
              "{}: expected index {} to be no larger than self {} apart from dimension {} and no "
              "larger than src {} (at dimension {})",
              op, shape_str(index.shape), shape_str(x.shape), dim, shape_str(src.shape), d);
  }
  return dim;
}

/// The output of an accumulating row: a new tensor like x, or x itself for
/// the in-place rows (named with a trailing '_'), which must not be expanded.
template <OpName kName>
void push_accumulated(const TensorMeta& x, std::vector<TensorMeta>& out) {
  if constexpr (kName.view().back() == '_') {
    check_inplace_result(kName.view(), x, x.shape, x.dtype);
    out.push_back(x);
  } else {
    out.push_back(out_meta(x.shape, x.dtype, x.device));
  }
}

template <OpName kName>
void infer_scatter_add(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  (void)check_scatter_add(kName.view(), in[0], in[1], in[2], a.i("dim"));
  push_accumulated<kName>(in[0], out);
}

/// `t` with zeros appended along every dim where it is smaller than `shape`.
Tensor zero_pad_to(Tensor t, IntList shape) {
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t have = t.shape()[d];
    if (have == shape[d]) continue;
    Shape extra = t.shape();
    extra[d] = shape[d] - have;
    t = cat({t, zeros(extra, TensorOptions(t.dtype()).device(t.device()))}, int64_t(d));
  }
  return t;
}

// self → g; src → g gathered at index (zeros where src has no index entry).
std::vector<Tensor> scatter_add_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  std::vector<Tensor> grads(3);
  if (ctx.needs_grad(0)) grads[0] = g[0];
  if (ctx.needs_grad(2)) {
    grads[2] = zero_pad_to(gather(g[0], ctx.attrs.i("dim"), ctx.inputs[1]), ctx.input_metas[2].shape);
  }
  return grads;
}

/// The checks of torch.index_add: a 0-d or 1-d int64/int32 index, source of
/// self's dtype and of self's shape with index.numel() at `dim`.
template <OpName kName>
void infer_index_add(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  constexpr std::string_view kOp = kName.view();
  const TensorMeta &x = in[0], &index = in[1], &source = in[2];
  check_index_dtype(kOp, index, /*allow_int32=*/true);
  DTR_CHECK(index.dim() <= 1, ValueError, "{}: index must be 0-d or 1-d, got shape {}", kOp,
            shape_str(index.shape));
  DTR_CHECK(source.dtype == x.dtype, TypeError,
            "{}: self ({}) and source ({}) must have the same dtype", kOp, dtype_name(x.dtype),
            dtype_name(source.dtype));
  const int64_t dim = normalize_dim(a.i("dim"), x.dim(), kOp);
  Shape expected = x.shape;
  if (!expected.empty()) expected[size_t(dim)] = index.numel();
  DTR_CHECK(source.shape == expected && (x.dim() > 0 || index.numel() == 1), ValueError,
            "{}: source of shape {} does not match self {} with {} indices at dimension {} "
            "(expected source shape {})",
            kOp, shape_str(source.shape), shape_str(x.shape), index.numel(), dim, shape_str(expected));
  push_accumulated<kName>(x, out);
}

// self → g; source → alpha * g selected at index.
std::vector<Tensor> index_add_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  std::vector<Tensor> grads(3);
  if (ctx.needs_grad(0)) grads[0] = g[0];
  if (ctx.needs_grad(2)) {
    const TensorMeta& x = ctx.input_metas[0];
    const int64_t dim = x.dim() == 0 ? 0 : normalize_dim(ctx.attrs.i("dim"), x.dim(), "index_add");
    Tensor s = index_select(g[0], dim, ctx.inputs[1]);
    const double alpha = ctx.attrs.f("alpha");
    grads[2] = alpha == 1.0 ? s : mul(s, alpha);
  }
  return grads;
}

OpDef row(std::string name, InferFn infer, BackwardFn backward, uint8_t save,
          std::vector<ParamSpec> params) {
  OpDef d;
  d.name = std::move(name);
  d.params = std::move(params);
  d.infer = infer;
  d.backward = backward;
  d.save = save;
  return d;
}

}  // namespace

void register_index_ops() {
  auto& R = OpRegistry::instance();

  using param::i, param::ints;
  // The scatter rows of the backward get the forward's dim and input shape.
  const std::vector<ParamSpec> kScatter{i("dim"), ints("input_shape")};
  // fill_value_attrs: the value as a double, and as an int64 for an integer or bool.
  const std::vector<ParamSpec> kFill{param::f("value"), param::optional(i("int_value"))};

  OpDef cat = row("cat", infer_cat, cat_backward, kSaveNone, {i("dim", 0)});
  cat.autocast = AutocastPolicy::kPromote;
  cat.min_inputs = 0;
  cat.max_inputs = -1;
  R.define(std::move(cat));

  // The index (input 1) gets no gradient; backward needs it, so it is saved
  // (the source only through its metadata).
  OpDef is = row("index_select", infer_index_select, index_select_backward, kSaveInputs, {i("dim")});
  is.nondiff_inputs = 1u << 1;
  is.unsaved_inputs = 1u << 0;
  is.inputs(2);
  R.define(std::move(is));
  OpDef isb = row("index_select_backward", infer_index_select_backward,
                  index_select_backward_backward, kSaveInputs, kScatter);
  isb.nondiff_inputs = 1u << 1;
  isb.inputs(2);
  R.define(std::move(isb));

  OpDef ga = row("gather", infer_gather, gather_backward, kSaveInputs, {i("dim")});
  ga.nondiff_inputs = 1u << 1;
  ga.unsaved_inputs = 1u << 0;
  ga.inputs(2);
  R.define(std::move(ga));
  OpDef gab = row("gather_backward", infer_gather_backward, gather_backward_backward, kSaveInputs,
                  kScatter);
  gab.nondiff_inputs = 1u << 1;
  gab.inputs(2);
  R.define(std::move(gab));

  OpDef mf = row("masked_fill", infer_masked_fill, masked_fill_backward, kSaveInputs, kFill);
  mf.flags.strided_inputs = true;
  mf.nondiff_inputs = 1u << 1;
  mf.unsaved_inputs = 1u << 0;  // backward reads the mask only
  mf.inputs(2);
  R.define(std::move(mf));
  OpDef mfi = row("masked_fill_", infer_masked_fill_, masked_fill_backward, kSaveInputs, kFill);
  mfi.flags.inplace = true;
  mfi.flags.strided_inputs = true;
  mfi.nondiff_inputs = 1u << 1;
  mfi.inputs(2);
  R.define(std::move(mfi));

  R.define(row("tril", infer_triangle<true>, tril_backward, kSaveNone, {i("diagonal", 0)}).inputs(1));
  R.define(row("triu", infer_triangle<false>, triu_backward, kSaveNone, {i("diagonal", 0)}).inputs(1));

  R.define(row("flip", infer_flip, flip_backward, kSaveNone, {ints("dims")}).inputs(1));

  // (self, index, src); the index gets no gradient. The in-place rows read
  // self with any strides (index and src are made contiguous by their callers).
  const std::vector<ParamSpec> kIndexAdd{i("dim"), param::f("alpha", 1.0), param::optional(i("int_alpha"))};
  struct Accumulating {
    const char* name;
    InferFn infer;
    BackwardFn backward;
    std::vector<ParamSpec> params;
    bool inplace;
  };
  for (const Accumulating& r : std::initializer_list<Accumulating>{
           {"scatter_add", infer_scatter_add<"scatter_add">, scatter_add_backward, {i("dim")}, false},
           {"scatter_add_", infer_scatter_add<"scatter_add_">, scatter_add_backward, {i("dim")}, true},
           {"index_add", infer_index_add<"index_add">, index_add_backward, kIndexAdd, false},
           {"index_add_", infer_index_add<"index_add_">, index_add_backward, kIndexAdd, true}}) {
    OpDef d = row(r.name, r.infer, r.backward, kSaveInputs, r.params);
    d.flags.inplace = r.inplace;
    d.nondiff_inputs = 1u << 1;
    d.inputs(3);
    R.define(std::move(d));
  }
}

/// Attributes of index_add: alpha as a double, and as an int64 for an
/// integer alpha. TypeError for a floating alpha with an integer tensor.
Attrs index_add_attrs(std::string_view op, const Tensor& x, int64_t dim, Scalar alpha) {
  DTR_CHECK(is_floating(x.dtype()) || !alpha.is_floating(), TypeError,
            "{}: for integral input tensors, argument alpha must not be a floating point number "
            "(self dtype {})",
            op, dtype_name(x.dtype()));
  Attrs a{{"dim", dim}, {"alpha", alpha.to_double()}};
  if (!alpha.is_floating()) a.set("int_alpha", alpha.to_int());
  return a;
}

/// An operand of an in-place scatter into `self`: contiguous, and a copy when
/// it shares self's storage (the kernel must not read what it wrote).
Tensor scatter_operand(const Tensor& self, const Tensor& t) {
  if (self.defined() && t.defined() && self.storage() == t.storage()) return t.clone();
  return t.contiguous();
}

}  // namespace ops

/// Concatenates `tensors` along `dim` (torch.cat). Shapes must match except
/// along `dim`; 1-D tensors of shape [0] are skipped. The result dtype is
/// the promoted dtype of the inputs; any dtype. Throws ValueError for an
/// empty list, 0-d tensors or mismatched shapes, IndexError for a bad dim.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  static const OpDef& o = op("cat");
  // Autograd tracks at most 64 inputs per node; join larger lists in groups.
  constexpr size_t kGroup = 64;
  if (tensors.size() <= kGroup) return dispatch1(o, tensors, Attrs{{"dim", dim}});
  std::vector<Tensor> parts;
  for (size_t b = 0; b < tensors.size(); b += kGroup) {
    const size_t e = std::min(tensors.size(), b + kGroup);
    parts.push_back(cat(std::vector<Tensor>(tensors.begin() + int64_t(b), tensors.begin() + int64_t(e)), dim));
  }
  return cat(parts, dim);
}

/// Stacks equally shaped tensors along a new dim `dim` in [-ndim-1, ndim]
/// (torch.stack): cat of unsqueezed views. Throws ValueError for an empty list
/// or unequal shapes, IndexError for a bad dim.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  DTR_CHECK(!tensors.empty(), ValueError, "stack: expected a non-empty list of tensors");
  for (size_t k = 1; k < tensors.size(); ++k) {
    DTR_CHECK(tensors[k].shape() == tensors[0].shape(), ValueError,
              "stack: expects each tensor to be equal size, but got {} at entry 0 and {} at entry {}",
              shape_str(tensors[0].shape()), shape_str(tensors[k].shape()), k);
  }
  const int64_t d = normalize_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(unsqueeze(t, d));
  return cat(parts, d);
}

/// Views of consecutive pieces of `split_size` along `dim`, the last one
/// smaller if needed (torch.split). Throws ValueError for a negative
/// split_size (or 0 on a non-empty dim), IndexError for a bad dim.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  DTR_CHECK(x.dim() > 0, IndexError, "split: expects at least a 1-dimensional tensor");
  const int64_t d = normalize_dim(dim, x.dim(), "split");
  const int64_t size = x.shape()[size_t(d)];
  DTR_CHECK(split_size >= 0, ValueError, "split: split_size must be non-negative, got {}",
            split_size);
  DTR_CHECK(split_size > 0 || size == 0, ValueError,
            "split: split_size can only be 0 if dimension size is 0, but got dimension {} of size {} "
            "(input shape {})",
            d, size, shape_str(x.shape()));
  const int64_t pieces = split_size == 0 ? 1 : std::max<int64_t>((size + split_size - 1) / split_size, 1);
  std::vector<Tensor> out;
  out.reserve(size_t(pieces));
  for (int64_t p = 0; p < pieces; ++p) {
    const int64_t start = p * split_size;
    out.push_back(narrow(x, d, start, std::min(split_size, size - start)));
    // As PyTorch's: views from an op with several outputs, which autograd
    // does not let an in-place op write (Note [views and in-place writes]).
    out.back().impl()->view_creation = TensorImpl::ViewCreation::kMultiOutput;
  }
  return out;
}

/// Splits into at most `chunks` views of ceil(size / chunks) along `dim`
/// (torch.chunk; may return fewer). Throws ValueError for chunks <= 0,
/// IndexError for a bad dim.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  DTR_CHECK(chunks > 0, ValueError, "chunk: expects `chunks` to be greater than 0, got {}", chunks);
  DTR_CHECK(x.dim() > 0, IndexError, "chunk: expects at least a 1-dimensional tensor");
  const int64_t d = normalize_dim(dim, x.dim(), "chunk");
  const int64_t size = x.shape()[size_t(d)];
  if (size == 0) {
    std::vector<Tensor> out;
    for (int64_t c = 0; c < chunks; ++c) {
      out.push_back(narrow(x, d, 0, 0));
      out.back().impl()->view_creation = TensorImpl::ViewCreation::kMultiOutput;
    }
    return out;
  }
  return split(x, (size + chunks - 1) / chunks, d);
}

/// Entries of x at `index` (int64 or int32, 0-d or 1-d, values in
/// [0, size)) along `dim` (torch.index_select); any dtype of x. Throws
/// TypeError for another index dtype, ValueError for a multi-dim index,
/// IndexError for an out-of-range dim or index value.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  static const OpDef& o = op("index_select");
  return dispatch1(o, {x, index}, Attrs{{"dim", dim}});
}

/// out[i][j][k] = x[i][index[i][j][k]][k] for dim 1, and likewise for other
/// dims (torch.gather). index is int64 with x's number of dims and sizes no
/// larger than x's except along `dim`; out has index's shape. Throws
/// TypeError, ValueError for mismatched shapes, IndexError for out-of-range
/// dims or index values.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  static const OpDef& o = op("gather");
  return dispatch1(o, {x, index}, Attrs{{"dim", dim}});
}

/// x with `value` where the bool `mask` is true (torch.masked_fill); x and
/// mask broadcast together. Any dtype of x. Throws TypeError for a non-bool
/// mask, ValueError for shapes that do not broadcast.
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) {
  static const OpDef& o = op("masked_fill");
  return dispatch1(o, {x, mask}, ops::fill_value_attrs(value));
}

/// Writes `value` where the bool `mask` (broadcast to this tensor's shape)
/// is true (torch.Tensor.masked_fill_). Throws TypeError for a non-bool mask,
/// ValueError when the mask does not broadcast to this shape.
Tensor& Tensor::masked_fill_(const Tensor& mask, Scalar value) {
  static const OpDef& o = op("masked_fill_");
  dispatch(o, std::vector<Tensor>{*this, mask}, ops::fill_value_attrs(value));
  return *this;
}

/// Lower triangle of the last two dims: elements with col - row <= diagonal
/// are kept, the rest zeroed (torch.tril). x has at least 2 dims, any dtype.
/// Throws ValueError otherwise.
Tensor tril(const Tensor& x, int64_t diagonal) {
  static const OpDef& o = op("tril");
  return dispatch1(o, {x}, Attrs{{"diagonal", diagonal}});
}

/// Upper triangle of the last two dims: elements with col - row >= diagonal
/// are kept (torch.triu). Throws ValueError for fewer than 2 dims.
Tensor triu(const Tensor& x, int64_t diagonal) {
  static const OpDef& o = op("triu");
  return dispatch1(o, {x}, Attrs{{"diagonal", diagonal}});
}

/// x with the order of elements reversed along each of `dims` (torch.flip);
/// a copy, x's shape and dtype. Throws IndexError for an out-of-range dim,
/// ValueError for a repeated one.
Tensor flip(const Tensor& x, IntList dims) {
  static const OpDef& o = op("flip");
  return dispatch1(o, {x}, Attrs{{"dims", dims.vec()}});
}

namespace {
/// x rolled by `shift` along one dim: the last `shift` entries come first.
Tensor roll_dim(const Tensor& x, int64_t shift, int64_t dim) {
  const int64_t size = x.shape()[size_t(dim)];
  int64_t start = (size - shift % size) % size;  // in [0, size)
  if (start < 0) start += size;
  return cat({narrow(x, dim, start, size - start), narrow(x, dim, 0, start)}, dim);
}
}  // namespace

/// x with its elements shifted by shifts[k] along dims[k], wrapping around
/// (torch.roll): out[(i + shift) mod size] = x[i]. With no dims, x is
/// flattened, rolled by the one shift and given its shape back. A copy;
/// differentiable through narrow and cat. Throws ValueError when shifts and
/// dims differ in length (or no dims and not exactly one shift), IndexError
/// for an out-of-range dim.
Tensor roll(const Tensor& x, IntList shifts, IntList dims) {
  if (dims.empty()) {
    DTR_CHECK(shifts.size() == 1, ValueError,
              "roll: without dims, shifts must have one element, got {} (input shape {})",
              shape_str(shifts), shape_str(x.shape()));
    if (x.numel() == 0) return x.clone();
    return view(roll_dim(flatten(x), shifts[0], 0), x.shape());
  }
  DTR_CHECK(shifts.size() == dims.size(), ValueError,
            "roll: shifts and dimensions must align, got shifts {} and dims {}", shape_str(shifts),
            shape_str(dims));
  Shape nd(dims.size());
  for (size_t k = 0; k < dims.size(); ++k) nd[k] = normalize_dim(dims[k], x.dim(), "roll");
  if (x.numel() == 0) return x.clone();
  Tensor out = x.dim() == 0 ? x.clone() : x;
  for (size_t k = 0; k < nd.size() && x.dim() > 0; ++k) out = roll_dim(out, shifts[k], nd[k]);
  return out;
}

namespace {
/// A contiguous copy of the (expanded) view `t` with `shape`: never t's own storage.
Tensor copy_as(const Tensor& t, IntList shape) {
  return view(t.is_contiguous() ? t.clone() : contiguous(t), shape);
}
}  // namespace

/// x tiled `repeats[k]` times along dim k (torch.Tensor.repeat); repeats may
/// have more entries than x has dims (x gets leading size-1 dims). The result
/// has shape repeats[k] * padded_shape[k]; a copy whose gradient sums the
/// tiles (through expand). Throws ValueError for fewer repeats than dims or a
/// negative repeat.
Tensor repeat(const Tensor& x, IntList repeats) {
  DTR_CHECK(repeats.size() >= size_t(x.dim()), ValueError,
            "repeat: number of dimensions of repeat dims ({}) can not be smaller than number of "
            "dimensions of tensor ({}, shape {})",
            repeats.size(), x.dim(), shape_str(x.shape()));
  const size_t n = repeats.size(), lead = n - size_t(x.dim());
  Shape interleaved, expanded, target;
  for (size_t d = 0; d < n; ++d) {
    DTR_CHECK(repeats[d] >= 0, ValueError, "repeat: repeats {} has a negative entry",
              shape_str(repeats));
    const int64_t s = d < lead ? 1 : x.shape()[d - lead];
    interleaved.insert(interleaved.end(), {1, s});
    expanded.insert(expanded.end(), {repeats[d], s});
    target.push_back(repeats[d] * s);
  }
  {
    ShapeCheckScope scope("repeat");
    (void)dtr::numel(target);  // ValueError for a result of 2^60 elements or more
  }
  return copy_as(expand(reshape(x, interleaved), expanded), target);
}

/// Each element of x repeated `repeats` times along `dim` (torch.repeat_interleave
/// with an int): [a, b] → [a, a, b, b] for 2. Without dim, x is flattened
/// first and the result is 1-D. A copy whose gradient sums each group.
/// Throws ValueError for negative repeats, IndexError for a bad dim.
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) {
  DTR_CHECK(repeats >= 0, ValueError, "repeat_interleave: repeats can not be negative, got {}", repeats);
  if (!dim) return repeat_interleave(flatten(x), repeats, 0);
  const int64_t d = normalize_dim(*dim, x.dim(), "repeat_interleave");
  if (x.dim() == 0) return repeat_interleave(reshape(x, {1}), repeats, 0);
  Shape expanded = x.shape(), target = x.shape();
  expanded.insert(expanded.begin() + d + 1, repeats);
  target[size_t(d)] *= repeats;
  return copy_as(expand(unsqueeze(x, d + 1), expanded), target);
}

/// Element i of x along `dim` repeated repeats[i] times (torch.repeat_interleave
/// with a tensor): repeats is int64 or int32, 1-d with x.size(dim) entries or
/// one entry (used for every element), values >= 0. Without dim, x is
/// flattened. Implemented as index_select (the gradient sums each group).
/// Reads the repeats' values (the result's size depends on them). Throws
/// TypeError for another repeats dtype, ValueError for a repeats shape that
/// does not match or a negative value, IndexError for a bad dim.
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim) {
  DTR_CHECK(repeats.dtype() == kInt64 || repeats.dtype() == kInt32, TypeError,
            "repeat_interleave: repeats has to be an int64 or int32 tensor, got {}",
            dtype_name(repeats.dtype()));
  DTR_CHECK(repeats.dim() <= 1, ValueError,
            "repeat_interleave: repeats must be 0-dim or 1-dim tensor, got shape {}",
            shape_str(repeats.shape()));
  if (!dim) return repeat_interleave(flatten(x), repeats, 0);
  const int64_t d = normalize_dim(*dim, x.dim(), "repeat_interleave");
  const Tensor base = x.dim() == 0 ? reshape(x, {1}) : x;
  const int64_t size = base.shape()[size_t(d)];
  const std::vector<int64_t> r = repeats.to(kInt64).to_vector<int64_t>();
  if (r.size() == 1 && size != 1) return repeat_interleave(base, r[0], d);
  DTR_CHECK(int64_t(r.size()) == size, ValueError,
            "repeat_interleave: repeats must have the same size as input along dim {}: got {} "
            "repeats for input shape {}",
            d, r.size(), shape_str(base.shape()));
  std::vector<int64_t> index;
  for (int64_t i = 0; i < size; ++i) {
    DTR_CHECK(r[size_t(i)] >= 0, ValueError, "repeat_interleave: repeats can not be negative, got {}",
              r[size_t(i)]);
    index.insert(index.end(), size_t(r[size_t(i)]), i);
  }
  return index_select(base, d, from_vector(index, {int64_t(index.size())}, TensorOptions(kInt64).device(x.device())));
}

/// out = x with out[index[i][j][k]][j][k] += src[i][j][k] for dim 0, and
/// likewise for other dims (torch.scatter_add); out has x's shape and dtype.
/// index is int64 with x's number of dims, no larger than src in any dim and
/// than x outside `dim`; src has x's dtype. Accumulates in index order, one
/// thread per output row (deterministic). Throws TypeError for the dtypes,
/// ValueError for the shapes, IndexError for a bad dim or index value.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  static const OpDef& o = op("scatter_add");
  return dispatch1(o, {x, index, src}, Attrs{{"dim", dim}});
}

/// out = x with alpha * source[.., i, ..] added into out[.., index[i], ..]
/// along `dim` (torch.index_add); index is 0-d or 1-d int64/int32, source
/// has x's dtype and x's shape with index.numel() at `dim`. Accumulates in
/// index order (deterministic). Throws TypeError for the dtypes (or a
/// floating alpha with an integer x), ValueError for the shapes, IndexError
/// for a bad dim or index value.
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha) {
  static const OpDef& o = op("index_add");
  return dispatch1(o, {x, index, source}, ops::index_add_attrs("index_add", x, dim, alpha));
}

/// In-place scatter_add (torch.Tensor.scatter_add_): this tensor, any strides,
/// is written; index and src as for dtr::scatter_add.
Tensor& Tensor::scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) {
  static const OpDef& o = op("scatter_add_");
  dispatch(o, std::vector<Tensor>{*this, ops::scatter_operand(*this, index), ops::scatter_operand(*this, src)},
           Attrs{{"dim", dim}});
  return *this;
}

/// In-place index_add (torch.Tensor.index_add_); arguments as dtr::index_add.
Tensor& Tensor::index_add_(int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha) {
  static const OpDef& o = op("index_add_");
  dispatch(o, std::vector<Tensor>{*this, ops::scatter_operand(*this, index), ops::scatter_operand(*this, source)},
           ops::index_add_attrs("index_add_", *this, dim, alpha));
  return *this;
}

}  // namespace dtr
