// Copies and casts: clone (→ contiguous), to_dtype, copy_, fill_.
// PyTorch: Tensor.clone, Tensor.to(dtype), Tensor.copy_, Tensor.fill_.
#include "eager/ops/registration.h"

namespace dtr {
namespace ops {
namespace {

void infer_same(std::span<const TensorMeta> in, const Attrs&, std::vector<TensorMeta>& out) {
  out.push_back(out_meta(in[0].shape, in[0].dtype, in[0].device));
}

void infer_to_dtype(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  out.push_back(out_meta(in[0].shape, a.dtype("dtype"), in[0].device));
}

void infer_inplace_self(std::span<const TensorMeta> in, const Attrs&, std::vector<TensorMeta>& out) {
  out.push_back(in[0]);
}

void infer_copy_(std::span<const TensorMeta> in, const Attrs&, std::vector<TensorMeta>& out) {
  const Shape b = broadcast_shapes(in[1].shape, in[0].shape, "copy_");
  DTR_CHECK(IntList(b).size() == in[0].shape.size() && b == in[0].shape, ValueError,
            "copy_: source of shape {} cannot be broadcast to destination shape {}",
            shape_str(in[1].shape), shape_str(in[0].shape));
  out.push_back(in[0]);
}

std::vector<Tensor> clone_backward(const BackwardContext&, std::span<const Tensor> g) {
  return {g[0]};
}

std::vector<Tensor> to_dtype_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {g[0].to(ctx.input_metas[0].dtype)};
}

std::vector<Tensor> copy_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  std::vector<Tensor> r(2);
  if (ctx.needs_grad(0)) r[0] = zeros_like(g[0]);
  if (ctx.needs_grad(1)) {
    r[1] = autograd::sum_to(g[0], ctx.input_metas[1].shape);
    if (r[1].dtype() != ctx.input_metas[1].dtype) r[1] = r[1].to(ctx.input_metas[1].dtype);
  }
  return r;
}

std::vector<Tensor> fill_backward(const BackwardContext&, std::span<const Tensor> g) {
  return {zeros_like(g[0])};
}

}  // namespace

void register_copy_ops() {
  auto& R = OpRegistry::instance();
  OpDef clone{.name = "clone", .infer = infer_same, .backward = clone_backward};
  clone.flags.strided_inputs = true;
  clone.save = kSaveNone;
  R.define(std::move(clone));

  OpDef to{.name = "to_dtype", .params = {param::dtype("dtype")}, .infer = infer_to_dtype, .backward = to_dtype_backward};
  to.flags.strided_inputs = true;
  to.save = kSaveNone;
  R.define(std::move(to));

  OpDef copy{.name = "copy_", .infer = infer_copy_, .backward = copy_backward};
  copy.flags.inplace = true;
  copy.flags.strided_inputs = true;
  copy.save = kSaveNone;
  R.define(std::move(copy));

  OpDef fill{.name = "fill_", .params = {param::f("value")}, .infer = infer_inplace_self, .backward = fill_backward};
  fill.flags.inplace = true;
  fill.flags.strided_inputs = true;
  fill.save = kSaveNone;
  R.define(std::move(fill));
}

}  // namespace ops

Tensor Tensor::clone() const {
  static const OpDef& o = op("clone");
  return dispatch1(o, {*this});
}

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : x.clone(); }

Tensor Tensor::to(DType t) const {
  static const OpDef& o = op("to_dtype");
  if (dtype() == t) return *this;
  return dispatch1(o, {*this}, Attrs{{"dtype", t}});
}

Tensor Tensor::to(Device d) const {
  if (device() == d) return *this;
  throw NotImplementedError(fmt::format("to: copies from {} to {} need the CUDA backend",
                                        device().str(), d.str()));
}

Tensor& Tensor::copy_(const Tensor& src) {
  static const OpDef& o = op("copy_");
  dispatch(o, std::vector<Tensor>{*this, src});
  return *this;
}

Tensor& Tensor::fill_(Scalar value) {
  static const OpDef& o = op("fill_");
  dispatch(o, std::vector<Tensor>{*this}, Attrs{{"value", value.to_double()}});
  return *this;
}

Tensor& Tensor::zero_() { return fill_(0); }

}  // namespace dtr
