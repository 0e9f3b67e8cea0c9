// Strided, broadcasting, converting copies: clone, to_dtype, copy_, fill_.
#include <cstring>

#include "cpu/elementwise.h"

namespace dtr::cpu {
namespace {

// Copies one run of n elements of `isz` bytes between byte strides.
template <typename E>
void copy_run(std::byte* dst, int64_t ds, const std::byte* src, int64_t ss, int64_t n) {
  for (int64_t j = 0; j < n; ++j) std::memcpy(dst + j * ds, src + j * ss, sizeof(E));
}

// out (any strides) = convert(in broadcast to out's shape). Runs along the
// innermost merged dim (cpu/elementwise.h) are copied whole: memcpy where
// both sides are contiguous, a typed loop otherwise. Bytes are copied
// unchanged when the dtypes agree; otherwise each element goes through
// convert_element.
void strided_convert(const TensorArg& in, const TensorArg& out) {
  const int64_t n = out.numel();
  const int64_t isz = itemsize(in.dtype), osz = itemsize(out.dtype);
  if (in.dtype == out.dtype && in.is_contiguous() && out.is_contiguous() && in.numel() == n) {
    std::memcpy(out.data, in.data, size_t(n * isz));
    return;
  }
  using elementwise_detail::Layout;
  const Layout<2> L = elementwise_detail::make_layout<2>(out, {&in});
  const bool same = in.dtype == out.dtype;
  elementwise_detail::for_each_run(
      L, {out.data, in.data}, [&](const std::array<std::byte*, 2>& p, const std::array<int64_t, 2>& s, int64_t m) {
        if (!same) {
          for (int64_t j = 0; j < m; ++j) convert_element(p[0] + j * s[0], out.dtype, p[1] + j * s[1], in.dtype);
          return;
        }
        if (s[0] == osz && s[1] == isz) {
          std::memcpy(p[0], p[1], size_t(m * isz));
          return;
        }
        switch (isz) {
          case 8: return copy_run<uint64_t>(p[0], s[0], p[1], s[1], m);
          case 4: return copy_run<uint32_t>(p[0], s[0], p[1], s[1], m);
          case 2: return copy_run<uint16_t>(p[0], s[0], p[1], s[1], m);
          default: return copy_run<uint8_t>(p[0], s[0], p[1], s[1], m);
        }
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
