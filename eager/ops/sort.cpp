// Sorting: sort and topk, each (values, int64 indices) along a dim.
// PyTorch: torch.sort(stable=True), torch.topk. Kernels in cpu/sort.cpp.
//
// Order: NaN counts as larger than every number (as PyTorch), and equal
// values keep their index order (the lower index first, in both directions:
// PyTorch's stable sort), so a rematerialized topk selects the same indices
// (Note [replay equals original]). The gradient of both scatters g back to
// the selected indices (the gather_backward row of eager/ops/index.cpp).
#include <algorithm>
#include <cmath>

#include "eager/ops/registration.h"

namespace dtr {
namespace ops {
namespace {

/// Checks the recorded dim (normalized; 0 for a 0-d input) and returns the
/// size of the sorted dim (1 for a 0-d input).
int64_t sorted_dim_size(const TensorMeta& x, int64_t dim, std::string_view op) {
  DTR_CHECK((x.dim() == 0 && dim == 0) || (dim >= 0 && dim < x.dim()), IndexError,
            "{}: dimension {} out of range for an input of shape {}", op, dim, shape_str(x.shape));
  return x.dim() == 0 ? 1 : x.shape[size_t(dim)];
}

void infer_sort(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  (void)sorted_dim_size(in[0], a.i("dim"), "sort");
  out.push_back(out_meta(in[0].shape, in[0].dtype, in[0].device));
  out.push_back(out_meta(in[0].shape, kInt64, in[0].device));
}

void infer_topk(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const int64_t dim = a.i("dim"), k = a.i("k");
  DTR_CHECK(in[0].dtype != kBool, TypeError, "topk: \"topk_cpu\" not implemented for 'Bool'");
  const int64_t size = sorted_dim_size(in[0], dim, "topk");
  DTR_CHECK(k >= 0 && k <= size, IndexError,
            "topk: selected index k out of range: k = {} for dimension {} of size {} (input shape {})", k,
            dim, size, shape_str(in[0].shape));
  Shape shape = in[0].shape;
  if (!shape.empty()) shape[size_t(dim)] = k;  // a 0-d input gives a 0-d result, as PyTorch
  out.push_back(out_meta(shape, in[0].dtype, in[0].device));
  out.push_back(out_meta(shape, kInt64, in[0].device));
}

/// g scattered into zeros of the input's shape at the selected indices.
std::vector<Tensor> sort_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("gather_backward");
  const TensorMeta& x = ctx.input_metas[0];
  if (x.dim() == 0) return {g[0]};  // the element itself (topk with k = 0 of a 0-d input too, as PyTorch)
  return {dispatch1(o, {g[0], ctx.outputs[1]}, Attrs{{"dim", ctx.attrs.i("dim")}, {"input_shape", x.shape}})};
}

/// Reading and writing every element once, plus log2(n) comparisons per element.
OpCost sort_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
  OpCost c;
  const double n = double(in[0].numel());
  c.bytes = n * double(itemsize(in[0].dtype));
  for (const auto& m : out) c.bytes += double(m.numel() * itemsize(m.dtype));
  c.flops = n * std::max(1.0, std::log2(std::max(2.0, n)));
  return c;
}

}  // namespace

void register_sort_ops() {
  auto& R = OpRegistry::instance();
  using param::b, param::i;

  // Multi-output: (values, indices); the indices are needed backward.
  OpDef sort{.name = "sort", .params = {i("dim"), b("descending", false)}, .infer = infer_sort,
             .cost = sort_cost, .backward = sort_backward};
  sort.save = kSaveOutputs;
  sort.inputs(1);
  R.define(std::move(sort));

  OpDef topk{.name = "topk", .params = {i("k"), i("dim"), b("largest", true), b("sorted", true)},
             .infer = infer_topk, .cost = sort_cost, .backward = sort_backward};
  topk.save = kSaveOutputs;
  topk.inputs(1);
  R.define(std::move(topk));
}

}  // namespace ops

/// torch.sort(x, dim, descending, stable=True): (values of x's dtype, int64
/// indices), both of x's shape, sorted along `dim` (ascending unless
/// `descending`). NaN counts as the largest value; equal values keep their
/// order (the lower index first), so the result is deterministic. Any dtype.
/// The gradient scatters g back to the indices. IndexError for a dim out of
/// range.
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending) {
  static const OpDef& o = op("sort");
  const int64_t d = normalize_dim(dim, x.dim(), "sort");
  std::vector<Tensor> outs = dispatch(o, std::vector<Tensor>{x}, Attrs{{"dim", d}, {"descending", descending}});
  return {std::move(outs[0]), std::move(outs[1])};
}

/// torch.topk(x, k, dim, largest, sorted): the k largest (or, with largest =
/// false, smallest) elements along `dim` as (values of x's dtype, int64
/// indices), shape x's with `dim` of size k (0-d for a 0-d input). NaN counts
/// as the largest value; ties select the lower index first, so a replay
/// selects the same indices. The values are always returned in sorted order
/// (`sorted` = false leaves the order unspecified in PyTorch; here it is the
/// sorted one). The gradient scatters g back to the indices. IndexError for a
/// dim out of range and for k outside [0, size of dim].
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  static const OpDef& o = op("topk");
  const int64_t d = normalize_dim(dim, x.dim(), "topk");
  std::vector<Tensor> outs = dispatch(
      o, std::vector<Tensor>{x}, Attrs{{"k", k}, {"dim", d}, {"largest", largest}, {"sorted", sorted}});
  return {std::move(outs[0]), std::move(outs[1])};
}

}  // namespace dtr
