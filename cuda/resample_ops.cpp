// The CUDA kernels of the padding and resampling family (cpu/resample.cpp):
// the CPU's attributes and dtype rules (float16/bfloat16 computed in
// float32 and rounded once, as its run_in_float32), then the launchers of
// cuda/resample.cu. All are emulatable (Note [host emulation of CUDA kernels]).
#include "cuda/index_ops.h"
#include "cuda/kernel_util.h"
#include "cuda/resample.h"

namespace dtr::cuda {
namespace {

void constant_pad_kernel(const KernelContext& c) {
  const TensorArg &x = c.inputs[0], &y = c.outputs[0];
  const int64_t isz = itemsize(y.dtype), r = y.dim();
  const uint64_t bits = fill_bits(c.attrs, y.dtype);
  if (y.numel() == 0) return;
  const Shape& pad = c.attrs.ints("pad");
  Shape before(size_t(r), 0);
  for (size_t i = 0; i < pad.size() / 2; ++i) before[size_t(r) - 1 - i] = pad[2 * i];
  launch_constant_pad(y.data, contiguous_dims(y.shape, "constant_pad_nd"), x.data,
                      contiguous_dims(x.shape, "constant_pad_nd"), before.data(), bits, isz, exec_for(c.device));
}

Planes planes_of(IntList in, IntList out, int64_t spatial) {
  const size_t r = in.size();
  Planes g;
  g.H = spatial == 2 ? in[r - 2] : 1;
  g.Ho = spatial == 2 ? out[r - 2] : 1;
  for (size_t d = 0; d + size_t(spatial) < r; ++d) g.count *= in[d];
  g.W = in[r - 1];
  g.Wo = out[r - 1];
  return g;
}

int64_t mapped_dims(const Attrs& a) { return a.has("pad") ? int64_t(a.ints("pad").size()) / 2 : 2; }

void check_resample_dtype(DType dt) {
  DTR_CHECK(is_floating(dt), NotImplementedError, "resample: no CUDA kernel for dtype {}", dtype_name(dt));
}

IndexMapArgs reflect_args(const Attrs& a) {
  const Shape& p = a.ints("pad");
  IndexMapArgs m;
  m.kind = MapKind::kReflect;
  m.left = p[0];
  m.top = p.size() == 4 ? p[2] : 0;
  return m;
}
IndexMapArgs nearest_args(const Attrs& a) {
  IndexMapArgs m;
  m.kind = MapKind::kNearest;
  m.scale_h = a.f("scale_h");
  m.scale_w = a.f("scale_w");
  return m;
}

template <IndexMapArgs (*Args)(const Attrs&)>
void map_forward_kernel(const KernelContext& c) {
  const TensorArg &x = c.inputs[0], &y = c.outputs[0];
  check_resample_dtype(x.dtype);
  launch_map_forward(y.data, x.data, x.dtype, planes_of(x.shape, y.shape, mapped_dims(c.attrs)), Args(c.attrs),
                     exec_for(c.device));
}
template <IndexMapArgs (*Args)(const Attrs&)>
void map_backward_kernel(const KernelContext& c) {
  const TensorArg &gy = c.inputs[0], &gx = c.outputs[0];
  check_resample_dtype(gx.dtype);
  launch_map_backward(gx.data, gy.data, gx.dtype, planes_of(gx.shape, gy.shape, mapped_dims(c.attrs)), Args(c.attrs),
                      exec_for(c.device));
}

void bilinear_forward_kernel(const KernelContext& c) {
  const TensorArg &x = c.inputs[0], &y = c.outputs[0];
  check_resample_dtype(x.dtype);
  launch_bilinear_forward(y.data, x.data, x.dtype, planes_of(x.shape, y.shape, 2), c.attrs.f("scale_h"),
                          c.attrs.f("scale_w"), c.attrs.b("align_corners"), exec_for(c.device));
}
void bilinear_backward_kernel(const KernelContext& c) {
  const TensorArg &gy = c.inputs[0], &gx = c.outputs[0];
  check_resample_dtype(gx.dtype);
  launch_bilinear_backward(gx.data, gy.data, gx.dtype, planes_of(gx.shape, gy.shape, 2), c.attrs.f("scale_h"),
                           c.attrs.f("scale_w"), c.attrs.b("align_corners"), exec_for(c.device));
}

}  // namespace

void register_resample_kernels() {
  const auto bind = [](std::string_view name, KernelFn fn) { set_cuda_kernel(name, fn, /*emulatable=*/true); };
  bind("constant_pad_nd", constant_pad_kernel);
  bind("reflection_pad", map_forward_kernel<reflect_args>);
  bind("reflection_pad_backward", map_backward_kernel<reflect_args>);
  bind("upsample_nearest2d", map_forward_kernel<nearest_args>);
  bind("upsample_nearest2d_backward", map_backward_kernel<nearest_args>);
  bind("upsample_bilinear2d", bilinear_forward_kernel);
  bind("upsample_bilinear2d_backward", bilinear_backward_kernel);
}

}  // namespace dtr::cuda
