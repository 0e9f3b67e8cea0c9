// Strided, broadcasting, converting copies: clone, to_dtype, copy_, fill_.
#include <cstring>

#include "cpu/kernels.h"

namespace dtr::cpu {
namespace {

// out (any strides) = convert(in broadcast to out's shape).
void strided_convert(const TensorArg& in, const TensorArg& out) {
  const int64_t n = out.numel();
  const Strides in_strides = broadcast_strides(in.shape, in.strides, out.shape);
  const int64_t isz = itemsize(in.dtype), osz = itemsize(out.dtype);
  if (in.dtype == out.dtype && in.is_contiguous() && out.is_contiguous() && in.numel() == n) {
    std::memcpy(out.data, in.data, size_t(n * isz));
    return;
  }
  parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) {
    for_each_offset(out.shape, out.strides, b, e, [&](int64_t i, int64_t off) {
      int64_t rem = i, ioff = 0;
      for (int64_t d = out.dim() - 1; d >= 0; --d) {
        const int64_t s = out.shape[size_t(d)];
        ioff += (rem % s) * in_strides[size_t(d)];
        rem /= s;
      }
      convert_element(out.data + off * osz, out.dtype, in.data + ioff * isz, in.dtype);
    });
  });
}

void clone_kernel(const KernelContext& c) { strided_convert(c.inputs[0], c.outputs[0]); }
void copy_kernel(const KernelContext& c) { strided_convert(c.inputs[1], c.outputs[0]); }

void fill_kernel(const KernelContext& c) {
  const TensorArg& out = c.outputs[0];
  const double v = c.attrs.f("value");
  std::byte elem[8];
  store_from_double(elem, out.dtype, v);
  const int64_t osz = itemsize(out.dtype);
  parallel_for(out.numel(), 1 << 15, [&](int64_t b, int64_t e) {
    for_each_offset(out.shape, out.strides, b, e, [&](int64_t, int64_t off) {
      std::memcpy(out.data + off * osz, elem, size_t(osz));
    });
  });
}

}  // namespace

void register_copy_kernels() {
  set_cpu_kernel("clone", clone_kernel);
  set_cpu_kernel("to_dtype", clone_kernel);
  set_cpu_kernel("copy_", copy_kernel);
  set_cpu_kernel("fill_", fill_kernel);
}

}  // namespace dtr::cpu
