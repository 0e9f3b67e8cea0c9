// Copies and casts: clone (→ contiguous), to_dtype, to_device, copy_, fill_.
// PyTorch: Tensor.clone, Tensor.to(dtype), Tensor.to(device), Tensor.copy_,
// Tensor.fill_.
#include "core/backend.h"
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

// to_device: attrs "device_type" and "device_index" (ints) name the output's device.
Device target_device(const Attrs& a) {
  return Device(DeviceType(a.i("device_type")), int(a.i("device_index")));
}

void infer_to_device(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  out.push_back(out_meta(in[0].shape, in[0].dtype, target_device(a)));
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

// The gradient goes back to the input's device.
std::vector<Tensor> to_device_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  return {g[0].to(ctx.input_metas[0].device)};
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
  clone.inputs(1);
  R.define(std::move(clone));

  OpDef to{.name = "to_dtype", .params = {param::dtype("dtype")}, .infer = infer_to_dtype, .backward = to_dtype_backward};
  to.flags.strided_inputs = true;
  to.save = kSaveNone;
  to.inputs(1);
  R.define(std::move(to));

  // Note [cross-device copies]: the one op whose output is on another device
  // than its input. Dispatch runs no kernel for it: the bytes move through
  // the two backends' copies (core/backend.h copy_bytes), on the first run
  // and on every replay, so a copy evicted on one device is rebuilt from the
  // other. Its input is contiguous (dispatch makes it so); the output counts
  // against the output device's budget.
  OpDef to_device{.name = "to_device",
                  .params = {param::i("device_type"), param::i("device_index")},
                  .infer = infer_to_device,
                  .backward = to_device_backward};
  to_device.flags.cross_device = true;
  to_device.save = kSaveNone;
  to_device.inputs(1);
  R.define(std::move(to_device));

  OpDef copy{.name = "copy_", .infer = infer_copy_, .backward = copy_backward};
  copy.flags.inplace = true;
  copy.flags.strided_inputs = true;
  copy.save = kSaveNone;
  copy.inputs(2);
  R.define(std::move(copy));

  OpDef fill{.name = "fill_", .params = {param::f("value")}, .infer = infer_inplace_self, .backward = fill_backward};
  fill.flags.inplace = true;
  fill.flags.strided_inputs = true;
  fill.save = kSaveNone;
  fill.inputs(1);
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
  static const OpDef& o = op("to_device");
  if (device() == d) return *this;
  check_device(d);  // DeviceError: no backend for d's type, or no such device
  return dispatch1(o, {*this}, Attrs{{"device_type", int64_t(d.type)}, {"device_index", int64_t(d.index)}});
}

Tensor& Tensor::copy_(const Tensor& src) {
  static const OpDef& o = op("copy_");
  // torch.Tensor.copy_ copies across devices: src comes to this tensor's
  // device first (loading a checkpoint read on the CPU into a CUDA model).
  const bool across = src.defined() && defined() && src.device() != device();
  dispatch(o, std::vector<Tensor>{*this, across ? src.to(device()) : src});
  return *this;
}

Tensor& Tensor::fill_(Scalar value) {
  static const OpDef& o = op("fill_");
  dispatch(o, std::vector<Tensor>{*this}, Attrs{{"value", value.to_double()}});
  return *this;
}

Tensor& Tensor::zero_() { return fill_(0); }

}  // namespace dtr
