// Helpers of the CUDA kernels' host side (cuda/*.cpp): the elementwise
// layout of a kernel's operands, and the argument checks the CPU kernels
// make before their loops (a device kernel cannot throw).
#pragma once

#include <array>
#include <cstddef>
#include <string_view>

#include "core/element.h"
#include "core/error.h"
#include "cpu/elementwise.h"
#include "cuda/exec.h"
#include "cuda/runtime.h"

namespace dtr::cuda {

/// The layout of `out` and `ins` broadcast to out's shape, dims merged as
/// on the CPU (cpu/elementwise.h). Throws NotImplementedError naming `op`
/// when more than kMaxDims dims remain after merging.
template <int N>
ElementwiseLayout<N> layout_of(const TensorArg& out, const std::array<const TensorArg*, size_t(N - 1)>& ins,
                               std::string_view op) {
  const auto L = cpu::elementwise_detail::make_layout<size_t(N)>(out, ins);
  DTR_CHECK(L.ndim <= kMaxDims, NotImplementedError,
            "{}: {} dims after merging; the CUDA elementwise kernels take at most {}", op, L.ndim, kMaxDims);
  ElementwiseLayout<N> r;
  r.ndim = L.ndim;
  r.numel = L.numel;
  for (int d = 0; d < L.ndim; ++d) {
    r.sizes[d] = L.shape[d];
    for (int k = 0; k < N; ++k) r.strides[k][d] = L.strides[k][d];
  }
  r.data[0] = out.data;
  r.dtype[0] = out.dtype;
  for (int k = 1; k < N; ++k) {
    r.data[k] = ins[size_t(k - 1)]->data;
    r.dtype[k] = ins[size_t(k - 1)]->dtype;
  }
  return r;
}

/// NotImplementedError unless `dt` is floating (the CPU's floating_compute_dispatch).
inline void check_floating(DType dt, const KernelContext& c) {
  (void)c;
  DTR_CHECK(is_floating(dt), NotImplementedError, "no CUDA kernel for dtype {} (floating dtypes only)",
            dtype_name(dt));
}

/// ValueError unless `v` fits integer dtype `dt` (as store_from_double checks on the CPU).
inline void check_integer_value(double v, DType dt, std::string_view op) {
  std::byte scratch[8];
  try {
    store_from_double(scratch, dt, v);
  } catch (const ValueError& e) {
    throw ValueError(fmt::format("{}: {}", op, e.what()));
  }
}

}  // namespace dtr::cuda
