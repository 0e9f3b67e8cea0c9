// Strided, broadcasting, converting copies: clone, to_dtype, copy_, fill_.
#include <cstring>

#include "cpu/elementwise.h"

namespace dtr::cpu {
namespace {

// out (any strides) = convert(in broadcast to out's shape). Bytes are
// copied unchanged when the dtypes agree (copy_strided, by runs); otherwise
// each element of each run goes through convert_element.
void strided_convert(const TensorArg& in, const TensorArg& out) {
  const int64_t n = out.numel();
  const int64_t isz = itemsize(in.dtype);
  if (in.dtype == out.dtype && in.is_contiguous() && out.is_contiguous() && in.numel() == n) {
    std::memcpy(out.data, in.data, size_t(n * isz));
    return;
  }
  if (in.dtype == out.dtype) {
    copy_strided(out.data, out.strides, in.data, broadcast_strides(in.shape, in.strides, out.shape), out.shape, isz);
    return;
  }
  using elementwise_detail::Layout;
  const Layout<2> L = elementwise_detail::make_layout<2>(out, {&in});
  elementwise_detail::for_each_run(
      L, {out.data, in.data}, [&](const std::array<std::byte*, 2>& p, const std::array<int64_t, 2>& s, int64_t m) {
        for (int64_t j = 0; j < m; ++j) convert_element(p[0] + j * s[0], out.dtype, p[1] + j * s[1], in.dtype);
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
