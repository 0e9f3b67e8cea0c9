// The CUDA kernels of the reduce family (cpu/reduce.cpp): sum, mean, var,
// max, max_dim, argmax, argmin, amax, amin, logsumexp, cumsum and the
// kernels of their backward rules. The CPU kernel's reading of inputs,
// outputs and attrs, its geometry (cpu/reduce_geometry.h) and its dtype
// checks, then the launchers of cuda/reduce.cu; max_dim_backward's indices
// are range-checked on the device. All are emulatable (Note [host emulation
// of CUDA kernels]).
#include <algorithm>

#include "cpu/reduce_geometry.h"
#include "cuda/elementwise.h"
#include "cuda/index_ops.h"
#include "cuda/kernel_util.h"
#include "cuda/reduce.h"

namespace dtr::cuda {
namespace {

/// in reduced over `dims` as cpu/reduce.cpp walks it; NotImplementedError
/// naming `op` when a group keeps more than kMaxDims dims after merging.
ReduceGeometry reduce_geometry(const TensorArg& in, const Shape& dims, std::string_view op) {
  const cpu::Geometry g = cpu::make_geometry(in, dims);
  DTR_CHECK(g.kshape.size() <= size_t(kMaxDims) && g.rshape.size() <= size_t(kMaxDims), NotImplementedError,
            "{}: {} kept and {} reduced dims after merging; the CUDA reduce kernels take at most {} of each", op,
            g.kshape.size(), g.rshape.size(), kMaxDims);
  ReduceGeometry r;
  r.kdim = int(g.kshape.size());
  r.rdim = int(g.rshape.size());
  std::copy(g.kshape.begin(), g.kshape.end(), r.kshape);
  std::copy(g.kstrides.begin(), g.kstrides.end(), r.kstrides);
  std::copy(g.rshape.begin(), g.rshape.end(), r.rshape);
  std::copy(g.rstrides.begin(), g.rstrides.end(), r.rstrides);
  r.nout = g.nout;
  r.nred = g.nred;
  r.nblocks = cpu::split_blocks(g);
  r.block = cpu::kSplitBlock;
  r.by_element = r.nblocks == 1 && cpu::sums_by_element(g);
  return r;
}

/// `shape` seen as (outer, size, inner) around `dim` (a 0-d shape is 1 x 1 x 1).
ScanShape scan_shape(IntList shape, int64_t dim) {
  ScanShape s;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    const int64_t n = shape[size_t(d)];
    if (d < dim) s.outer *= n;
    if (d == dim) s.size = n;
    if (d > dim) s.inner *= n;
  }
  return s;
}

void sum_kernel(const KernelContext& c) {
  const TensorArg &in = c.inputs[0], &out = c.outputs[0];
  launch_sum(out.data, out.dtype, in.data, in.dtype, reduce_geometry(in, c.attrs.ints("dims"), "sum"), false,
             exec_for(c.device));
}

void mean_kernel(const KernelContext& c) {
  const TensorArg &in = c.inputs[0], &out = c.outputs[0];
  check_floating_input(in.dtype, "mean");
  launch_sum(out.data, out.dtype, in.data, in.dtype, reduce_geometry(in, c.attrs.ints("dims"), "mean"), true,
             exec_for(c.device));
}

void var_kernel(const KernelContext& c) {
  const TensorArg &in = c.inputs[0], &out = c.outputs[0];
  const ReduceGeometry g = reduce_geometry(in, c.attrs.ints("dims"), "var");
  const double divisor = double(std::max<int64_t>(0, g.nred - c.attrs.i("correction")));
  check_floating_input(in.dtype, "var");
  launch_var(out.data, in.data, in.dtype, g, divisor, exec_for(c.device));
}

void max_kernel(const KernelContext& c) {
  const TensorArg& in = c.inputs[0];
  Shape all;
  for (int64_t d = 0; d < in.dim(); ++d) all.push_back(d);
  launch_extreme(c.outputs[0].data, nullptr, in.data, in.dtype, reduce_geometry(in, all, "max"), true,
                 exec_for(c.device));
}

// max_dim → (values, indices); argmax → indices; argmin → indices of the minimum.
template <bool kMax>
void dim_extreme_kernel(const KernelContext& c) {
  const TensorArg& in = c.inputs[0];
  const bool with_values = c.outputs.size() == 2;
  std::byte* values = with_values ? c.outputs[0].data : nullptr;
  std::byte* indices = c.outputs[with_values ? 1 : 0].data;
  launch_extreme(values, indices, in.data, in.dtype,
                 reduce_geometry(in, Shape{c.attrs.i("dim")}, kMax ? "argmax" : "argmin"), kMax,
                 exec_for(c.device));
}

// amax, amin.
template <bool kMax>
void extreme_kernel(const KernelContext& c) {
  const TensorArg& in = c.inputs[0];
  launch_extreme(c.outputs[0].data, nullptr, in.data, in.dtype,
                 reduce_geometry(in, c.attrs.ints("dims"), kMax ? "amax" : "amin"), kMax, exec_for(c.device));
}

void logsumexp_kernel(const KernelContext& c) {
  const TensorArg &in = c.inputs[0], &out = c.outputs[0];
  launch_logsumexp(out.data, out.dtype, in.data, in.dtype, reduce_geometry(in, c.attrs.ints("dims"), "logsumexp"),
                   exec_for(c.device));
}

template <bool kReverse>
void cumsum_kernel(const KernelContext& c) {
  const TensorArg &in = c.inputs[0], &out = c.outputs[0];
  launch_cumsum(out.data, out.dtype, in.data, in.dtype, scan_shape(in.shape, c.attrs.i("dim")), kReverse,
                exec_for(c.device));
}

// sum_backward: g broadcast back to attrs' shape (a copy), divided by divisor.
void sum_backward_kernel(const KernelContext& c) {
  const TensorArg &g = c.inputs[0], &out = c.outputs[0];
  check_floating_input(g.dtype, "sum_backward");
  const Shape& shape = c.attrs.ints("shape");
  const ElementwiseLayout<2> L = layout_of<2>(
      shape, {contiguous_strides(shape), cpu::reduced_broadcast_strides(shape, c.attrs.ints("dims"))}, {&out, &g},
      "sum_backward");
  const int64_t divisor = c.attrs.i("divisor");
  if (divisor == 1) {
    launch_convert(L, exec_for(c.device));
  } else {
    launch_scalar(ScalarOp::kDiv, g.dtype, L, double(divisor), exec_for(c.device));
  }
}

void var_backward_kernel(const KernelContext& c) {
  const TensorArg &g = c.inputs[0], &x = c.inputs[1], &out = c.outputs[0];
  const Shape& dims = c.attrs.ints("dims");
  const ReduceGeometry geom = reduce_geometry(x, dims, "var_backward");
  const double scale = 2.0 / double(std::max<int64_t>(0, geom.nred - c.attrs.i("correction")));
  check_floating_input(x.dtype, "var_backward");
  const ElementwiseLayout<3> L = layout_of<3>(
      x.shape, {out.strides, cpu::reduced_broadcast_strides(x.shape, dims), x.strides}, {&out, &g, &x},
      "var_backward");
  launch_var_backward(L, geom, scale, exec_for(c.device));
}

void max_backward_kernel(const KernelContext& c) {
  const TensorArg& x = c.inputs[1];
  check_floating_input(x.dtype, "max_backward");
  launch_max_backward(c.outputs[0].data, c.inputs[0].data, x.data, c.inputs[2].data, x.dtype, x.numel(),
                      exec_for(c.device));
}

void max_dim_backward_kernel(const KernelContext& c) {
  const TensorArg &g = c.inputs[0], &indices = c.inputs[1];
  check_floating_input(g.dtype, "max_dim_backward");
  const Shape& shape = c.attrs.ints("shape");
  const int64_t dim = c.attrs.i("dim");
  const Exec e = exec_for(c.device);
  check_indices_on_device("max_dim_backward", indices, dim, shape[size_t(dim)], e);
  launch_max_dim_backward(c.outputs[0].data, g.data, indices.data, g.dtype, scan_shape(shape, dim), e);
}

}  // namespace

void register_reduce_kernels() {
  const auto bind = [](std::string_view name, KernelFn fn) { set_cuda_kernel(name, fn, /*emulatable=*/true); };
  bind("sum", sum_kernel);
  bind("mean", mean_kernel);
  bind("var", var_kernel);
  bind("max", max_kernel);
  bind("max_dim", dim_extreme_kernel<true>);
  bind("argmax", dim_extreme_kernel<true>);
  bind("argmin", dim_extreme_kernel<false>);
  bind("amax", extreme_kernel<true>);
  bind("amin", extreme_kernel<false>);
  bind("logsumexp", logsumexp_kernel);
  bind("cumsum", cumsum_kernel<false>);
  bind("cumsum_backward", cumsum_kernel<true>);
  bind("sum_backward", sum_backward_kernel);
  bind("var_backward", var_backward_kernel);
  bind("max_backward", max_backward_kernel);
  bind("max_dim_backward", max_dim_backward_kernel);
}

}  // namespace dtr::cuda
