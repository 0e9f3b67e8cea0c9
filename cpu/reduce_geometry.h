// The geometry of a reduction (cpu/reduce.cpp): an input seen as (kept
// dims) x (reduced dims), and the shape-only choices of how its terms are
// accumulated. Shared with the CUDA reduce kernels (cuda/reduce_ops.cpp),
// which follow the same order so that their sums equal the CPU's.
#pragma once

#include <cstdint>

#include "core/op_registry.h"
#include "core/shape.h"

namespace dtr::cpu {

/// An input seen as (kept dims) x (reduced dims). Output element o walks the
/// kept dims in row-major order (the output's own order, keepdim or not);
/// the reduction index r walks the reduced dims in row-major order, and each
/// output accumulates in increasing r. Size-1 dims are dropped and
/// neighbours merged where strides allow; each group keeps at least one dim.
/// Strides are in elements.
struct Geometry {
  Shape kshape;
  Strides kstrides;
  Shape rshape;
  Strides rstrides;
  int64_t nout = 1;
  int64_t nred = 1;
};

namespace reduce_detail {
inline void push_dim(Shape& shape, Strides& strides, int64_t size, int64_t stride) {
  if (size == 1) return;
  if (!shape.empty() && strides.back() == stride * size) {
    shape.back() *= size;
    strides.back() = stride;
    return;
  }
  shape.push_back(size);
  strides.push_back(stride);
}
}  // namespace reduce_detail

/// The geometry of `in` reduced over `dims` (normalized).
inline Geometry make_geometry(const TensorArg& in, const Shape& dims) {
  uint64_t mask = 0;
  for (int64_t d : dims) mask |= uint64_t{1} << d;
  Geometry g;
  for (int64_t d = 0; d < in.dim(); ++d) {
    const int64_t size = in.shape[size_t(d)], stride = in.strides[size_t(d)];
    if ((mask >> d) & 1u) {
      reduce_detail::push_dim(g.rshape, g.rstrides, size, stride);
    } else {
      reduce_detail::push_dim(g.kshape, g.kstrides, size, stride);
    }
  }
  if (g.kshape.empty()) g.kshape = {1}, g.kstrides = {0};
  if (g.rshape.empty()) g.rshape = {1}, g.rstrides = {0};
  g.nout = numel(g.kshape);
  g.nred = numel(g.rshape);
  return g;
}

/// Reduction indices per partial when few outputs share a long reduction.
inline constexpr int64_t kSplitBlock = int64_t{1} << 14;

/// The fixed blocks of kSplitBlock reduction indices each output of `g` is
/// split into, their partials combined in block order: more than one only
/// when few outputs share a long reduction.
inline int64_t split_blocks(const Geometry& g) {
  if (g.nout < 16 && g.nred >= 4 * kSplitBlock) return (g.nred + kSplitBlock - 1) / kSplitBlock;
  return 1;
}

/// Whether (without a split) sums take their terms one at a time in
/// increasing r: outputs contiguous in the input and a strided reduction
/// (e.g. the column sums of a (N, C) matrix), walked a row of outputs at a
/// time. Otherwise each run along the innermost reduced dim is summed on its
/// own (four interleaved partials for unit stride) and added.
inline bool sums_by_element(const Geometry& g) {
  return g.kstrides.back() == 1 && g.kshape.back() > 1 && g.rstrides.back() != 1;
}

/// Strides that read a reduced tensor (contiguous, keepdim layout or not)
/// as if broadcast back to `shape`: 0 along the reduced dims.
inline Strides reduced_broadcast_strides(const Shape& shape, const Shape& dims) {
  Shape kshape = shape;
  for (int64_t d : dims) kshape[size_t(d)] = 1;
  Strides s = contiguous_strides(kshape);
  for (int64_t d : dims) s[size_t(d)] = 0;
  return s;
}

}  // namespace dtr::cpu
