// The CUDA kernels of layer_norm, rms_norm, batch_norm, batch_norm_inference,
// batch_norm_update_stats_, group_norm and their backward rows
// (cpu/norm.cpp): the CPU kernel's reading of inputs, outputs and attrs and
// its dtype check, then the launchers of cuda/norm.cu. All are emulatable
// (Note [host emulation of CUDA kernels]).
#include "cuda/kernel_util.h"
#include "cuda/norm.h"

namespace dtr::cuda {
namespace {

/// The optional inputs weight, bias at input `first` on, as has_weight / has_bias say.
AffineArgs affine_inputs(const KernelContext& c, size_t first) {
  AffineArgs a;
  size_t i = first;
  if (c.attrs.b("has_weight")) a.weight = c.inputs[i++].data;
  if (c.attrs.b("has_bias")) a.bias = c.inputs[i++].data;
  return a;
}

/// Outputs 1 and on of a backward row: gweight when has_weight, gbias when has_bias (null otherwise).
std::pair<std::byte*, std::byte*> affine_grads(const KernelContext& c) {
  const bool has_weight = c.attrs.b("has_weight"), has_bias = c.attrs.b("has_bias");
  return {has_weight ? c.outputs[1].data : nullptr, has_bias ? c.outputs[has_weight ? 2 : 1].data : nullptr};
}

/// Rows of length n = product of the last norm_shape-many dims of x.
RowNormShape row_shape(const TensorArg& x, const Attrs& attrs, bool rms) {
  const int64_t ndim = int64_t(attrs.ints("norm_shape").size());
  int64_t n = 1;
  for (int64_t d = x.dim() - ndim; d < x.dim(); ++d) n *= x.shape[size_t(d)];
  return {n == 0 ? 0 : x.numel() / n, n, attrs.f("eps"), rms};
}

ChannelShape channels_of(const TensorArg& x) {
  ChannelShape g{x.shape[0], x.shape[1], 1};
  for (int64_t d = 2; d < x.dim(); ++d) g.inner *= x.shape[size_t(d)];
  return g;
}

GroupShape group_shape(const TensorArg& x, const Attrs& a) {
  const int64_t N = x.shape[0], C = x.shape[1];
  return {N, C, a.i("num_groups"), N * C == 0 ? 0 : x.numel() / (N * C)};
}

template <bool kRms>
void row_norm_kernel(const KernelContext& c) {
  const TensorArg& x = c.inputs[0];
  check_floating_input(x.dtype, kRms ? "rms_norm" : "layer_norm");
  launch_row_norm(c.outputs[0].data, x.data, affine_inputs(c, 1), x.dtype, row_shape(x, c.attrs, kRms),
                  exec_for(c.device));
}

template <bool kRms>
void row_norm_backward_kernel(const KernelContext& c) {
  const TensorArg &g = c.inputs[0], &x = c.inputs[1];
  check_floating_input(x.dtype, kRms ? "rms_norm_backward" : "layer_norm_backward");
  const std::byte* w = c.attrs.b("has_weight") ? c.inputs[2].data : nullptr;
  const auto [gw, gb] = affine_grads(c);
  launch_row_norm_backward(c.outputs[0].data, gw, gb, g.data, x.data, w, x.dtype, row_shape(x, c.attrs, kRms),
                           exec_for(c.device));
}

void batch_norm_kernel(const KernelContext& c) {
  const TensorArg& x = c.inputs[0];
  check_floating_input(x.dtype, "batch_norm");
  launch_batch_norm(c.outputs[0].data, c.outputs[1].data, c.outputs[2].data, c.outputs[1].dtype, x.data,
                    affine_inputs(c, 1), x.dtype, channels_of(x), c.attrs.f("eps"), exec_for(c.device));
}

void batch_norm_inference_kernel(const KernelContext& c) {
  const TensorArg& x = c.inputs[0];
  check_floating_input(x.dtype, "batch_norm");
  launch_batch_norm_inference(c.outputs[0].data, x.data, c.inputs[1].data, c.inputs[2].data, affine_inputs(c, 3),
                              x.dtype, channels_of(x), c.attrs.f("eps"), exec_for(c.device));
}

void batch_norm_update_stats_kernel(const KernelContext& c) {
  const TensorArg &running = c.outputs[0], &stat = c.inputs[1];
  launch_batch_norm_update_stats(running.data, running.dtype, running.dim() == 0 ? 0 : running.strides[0], stat.data,
                                 stat.dtype, stat.dim() == 0 ? 0 : stat.strides[0], running.numel(),
                                 c.attrs.f("momentum"), c.attrs.f("scale"), exec_for(c.device));
}

void batch_norm_backward_kernel(const KernelContext& c) {
  const TensorArg &g = c.inputs[0], &x = c.inputs[1];
  const bool training = c.attrs.b("training");
  check_floating_input(x.dtype, "batch_norm_backward");
  const std::byte* rm = training ? nullptr : c.inputs[2].data;
  const std::byte* rv = training ? nullptr : c.inputs[3].data;
  const std::byte* w = c.attrs.b("has_weight") ? c.inputs[training ? 2 : 4].data : nullptr;
  const auto [gw, gb] = affine_grads(c);
  launch_batch_norm_backward(c.outputs[0].data, gw, gb, g.data, x.data, rm, rv, w, x.dtype, channels_of(x),
                             c.attrs.f("eps"), exec_for(c.device));
}

void group_norm_kernel(const KernelContext& c) {
  const TensorArg& x = c.inputs[0];
  check_floating_input(x.dtype, "group_norm");
  launch_group_norm(c.outputs[0].data, x.data, affine_inputs(c, 1), x.dtype, group_shape(x, c.attrs),
                    c.attrs.f("eps"), exec_for(c.device));
}

void group_norm_backward_kernel(const KernelContext& c) {
  const TensorArg &g = c.inputs[0], &x = c.inputs[1];
  check_floating_input(x.dtype, "group_norm_backward");
  const std::byte* w = c.attrs.b("has_weight") ? c.inputs[2].data : nullptr;
  const auto [gw, gb] = affine_grads(c);
  launch_group_norm_backward(c.outputs[0].data, gw, gb, g.data, x.data, w, x.dtype, group_shape(x, c.attrs),
                             c.attrs.f("eps"), exec_for(c.device));
}

}  // namespace

void register_norm_kernels() {
  const auto bind = [](std::string_view name, KernelFn fn) { set_cuda_kernel(name, fn, /*emulatable=*/true); };
  bind("layer_norm", row_norm_kernel<false>);
  bind("rms_norm", row_norm_kernel<true>);
  bind("layer_norm_backward", row_norm_backward_kernel<false>);
  bind("rms_norm_backward", row_norm_backward_kernel<true>);
  bind("batch_norm", batch_norm_kernel);
  bind("batch_norm_inference", batch_norm_inference_kernel);
  bind("batch_norm_update_stats_", batch_norm_update_stats_kernel);
  bind("batch_norm_backward", batch_norm_backward_kernel);
  bind("group_norm", group_norm_kernel);
  bind("group_norm_backward", group_norm_backward_kernel);
}

}  // namespace dtr::cuda
