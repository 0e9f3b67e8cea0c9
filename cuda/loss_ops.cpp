// The CUDA kernels of softmax, log_softmax, cross_entropy, nll_loss,
// mse_loss and their backward rows (cpu/loss.cpp): the CPU kernel's reading
// of inputs, outputs and attrs, its lane geometry and its checks (the
// targets range-checked on the device, the same IndexError and message as
// the CPU's, before the dtype's TypeError as there), then the launchers of
// cuda/loss.cu. All are emulatable (Note [host emulation of CUDA kernels]).
#include "cuda/kernel_util.h"
#include "cuda/loss.h"

namespace dtr::cuda {
namespace {

/// `shape` seen as (outer, size, inner) around `dim` (a 0-d shape is 1 x 1 x
/// 1), as cpu/loss.cpp's lanes_around.
LaneShape lanes_around(IntList shape, int64_t dim) {
  LaneShape s;
  if (shape.empty()) return s;
  for (int64_t d = 0; d < dim; ++d) s.outer *= shape[size_t(d)];
  s.size = shape[size_t(dim)];
  for (size_t d = size_t(dim) + 1; d < shape.size(); ++d) s.inner *= shape[d];
  return s;
}

/// The class dim of a loss input: 1 for (N, C) or (N, C, d...), 0 for (C).
LaneShape class_lanes(IntList shape) { return lanes_around(shape, shape.size() == 1 ? 0 : 1); }

const int64_t* targets(const TensorArg& t) { return reinterpret_cast<const int64_t*>(t.data); }

/// The loss over lanes of `shape` with `target`: IndexError as cpu/loss.cpp's
/// check_targets for a target outside [0, C) that is not ignore_index, then
/// TypeError naming `op` unless `dt` is floating.
ClassLoss class_loss(const KernelContext& c, IntList shape, const TensorArg& target, DType dt, std::string_view op,
                     const Exec& e) {
  ClassLoss s;
  s.lanes = class_lanes(shape);
  s.ignore_index = c.attrs.i("ignore_index");
  s.reduction = c.attrs.i("reduction");
  const TargetCheck r =
      check_targets(targets(target), s.lanes.outer * s.lanes.inner, s.lanes.size, s.ignore_index, e);
  DTR_CHECK(r.position < 0, IndexError, "{}: target {} at position {} is out of bounds for {} classes", op, r.value,
            r.position, s.lanes.size);
  s.count = r.count;
  check_floating_input(dt, op);
  return s;
}

template <bool kLog>
void softmax_kernel(const KernelContext& c) {
  const TensorArg& in = c.inputs[0];
  const LaneShape s = lanes_around(in.shape, c.attrs.i("dim"));
  check_floating_input(in.dtype, kLog ? "log_softmax" : "softmax");
  launch_softmax(c.outputs[0].data, in.data, in.dtype, s, kLog, exec_for(c.device));
}

template <bool kLog>
void softmax_backward_kernel(const KernelContext& c) {
  const TensorArg &g = c.inputs[0], &y = c.inputs[1];
  const LaneShape s = lanes_around(y.shape, c.attrs.i("dim"));
  check_floating_input(y.dtype, kLog ? "log_softmax_backward" : "softmax_backward");
  launch_softmax_backward(c.outputs[0].data, g.data, y.data, y.dtype, s, kLog, exec_for(c.device));
}

// cross_entropy (kEntropy) or nll_loss.
template <bool kEntropy>
void class_loss_kernel(const KernelContext& c) {
  const TensorArg &x = c.inputs[0], &t = c.inputs[1];
  const Exec e = exec_for(c.device);
  const ClassLoss s = class_loss(c, x.shape, t, x.dtype, kEntropy ? "cross_entropy" : "nll_loss", e);
  (kEntropy ? launch_cross_entropy : launch_nll_loss)(c.outputs[0].data, x.data, targets(t), x.dtype, s, e);
}

void cross_entropy_backward_kernel(const KernelContext& c) {
  const TensorArg &g = c.inputs[0], &x = c.inputs[1], &t = c.inputs[2];
  const Exec e = exec_for(c.device);
  const ClassLoss s = class_loss(c, x.shape, t, x.dtype, "cross_entropy_backward", e);
  launch_cross_entropy_backward(c.outputs[0].data, g.data, x.data, targets(t), x.dtype, s, e);
}

void nll_loss_backward_kernel(const KernelContext& c) {
  const TensorArg &g = c.inputs[0], &t = c.inputs[1], &out = c.outputs[0];
  const Exec e = exec_for(c.device);
  const ClassLoss s = class_loss(c, out.shape, t, out.dtype, "nll_loss_backward", e);
  launch_nll_loss_backward(out.data, g.data, targets(t), out.dtype, s, e);
}

void mse_loss_kernel(const KernelContext& c) {
  const TensorArg &a = c.inputs[0], &b = c.inputs[1];
  check_floating_input(a.dtype, "mse_loss");
  launch_mse_loss(c.outputs[0].data, a.data, b.data, a.dtype, a.numel(), c.attrs.i("reduction"), exec_for(c.device));
}

void mse_loss_backward_kernel(const KernelContext& c) {
  const TensorArg &g = c.inputs[0], &a = c.inputs[1], &b = c.inputs[2];
  check_floating_input(a.dtype, "mse_loss_backward");
  launch_mse_loss_backward(c.outputs[0].data, g.data, a.data, b.data, a.dtype, a.numel(), c.attrs.i("reduction"),
                           exec_for(c.device));
}

}  // namespace

void register_loss_kernels() {
  const auto bind = [](std::string_view name, KernelFn fn) { set_cuda_kernel(name, fn, /*emulatable=*/true); };
  bind("softmax", softmax_kernel<false>);
  bind("log_softmax", softmax_kernel<true>);
  bind("softmax_backward", softmax_backward_kernel<false>);
  bind("log_softmax_backward", softmax_backward_kernel<true>);
  bind("cross_entropy", class_loss_kernel<true>);
  bind("cross_entropy_backward", cross_entropy_backward_kernel);
  bind("nll_loss", class_loss_kernel<false>);
  bind("nll_loss_backward", nll_loss_backward_kernel);
  bind("mse_loss", mse_loss_kernel);
  bind("mse_loss_backward", mse_loss_backward_kernel);
}

}  // namespace dtr::cuda
