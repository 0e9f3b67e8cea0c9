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

/// A CPU layout as the kernels' ElementwiseLayout over `operands` (output
/// first). Throws NotImplementedError naming `op` when more than kMaxDims
/// dims remain after merging.
template <int N>
ElementwiseLayout<N> to_layout(const cpu::elementwise_detail::Layout<size_t(N)>& L,
                               const std::array<const TensorArg*, size_t(N)>& operands, std::string_view op) {
  DTR_CHECK(L.ndim <= kMaxDims, NotImplementedError,
            "{}: {} dims after merging; the CUDA elementwise kernels take at most {}", op, L.ndim, kMaxDims);
  ElementwiseLayout<N> r;
  r.ndim = L.ndim;
  r.numel = L.numel;
  for (int d = 0; d < L.ndim; ++d) {
    r.sizes[d] = L.shape[d];
    for (int k = 0; k < N; ++k) r.strides[k][d] = L.strides[k][d];
  }
  for (int k = 0; k < N; ++k) {
    r.data[k] = operands[size_t(k)]->data;
    r.dtype[k] = operands[size_t(k)]->dtype;
  }
  return r;
}

/// The layout of `out` and `ins` broadcast to out's shape, dims merged as
/// on the CPU (cpu/elementwise.h). Throws NotImplementedError naming `op`
/// when more than kMaxDims dims remain after merging.
template <int N>
ElementwiseLayout<N> layout_of(const TensorArg& out, const std::array<const TensorArg*, size_t(N - 1)>& ins,
                               std::string_view op) {
  std::array<const TensorArg*, size_t(N)> operands{&out};
  for (size_t k = 1; k < size_t(N); ++k) operands[k] = ins[k - 1];
  return to_layout<N>(cpu::elementwise_detail::make_layout<size_t(N)>(out, ins), operands, op);
}

/// The layout of `operands` (output first) over `shape`, each read with its
/// element strides `strides` (broadcast strides allowed).
template <int N>
ElementwiseLayout<N> layout_of(IntList shape, const std::array<Strides, size_t(N)>& strides,
                               const std::array<const TensorArg*, size_t(N)>& operands, std::string_view op) {
  std::array<int64_t, size_t(N)> isz;
  for (size_t k = 0; k < size_t(N); ++k) isz[k] = itemsize(operands[k]->dtype);
  return to_layout<N>(cpu::elementwise_detail::make_layout<size_t(N)>(shape, strides, isz), operands, op);
}

/// TypeError naming `op` unless `dt` is floating, as cpu/accumulate.h's floating_dispatch.
inline void check_floating_input(DType dt, std::string_view op) {
  DTR_CHECK(is_floating(dt), TypeError, "{}: expected a floating point tensor, got {}", op, dtype_name(dt));
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
