// The launchers of the reduce family (cuda/reduce.cu) for
// cuda/reduce_ops.cpp: sum, mean, var, max and its dim and index forms,
// amax, amin, logsumexp, cumsum and the kernels of their backward rules.
// Semantics: cpu/reduce.cpp. Reductions take the CPU's geometry
// (cpu/reduce_geometry.h) and accumulate in the CPU's types and order:
// sums in double for floating inputs (int64 for integer and bool ones),
// extremes in the compute type (float for float32/float16/bfloat16, double
// for float64, int64 otherwise), so a rerun is bitwise the first run.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/exec.h"

namespace dtr::cuda {

/// An input seen as (kept dims) x (reduced dims), strides in elements
/// (cpu::Geometry, each group at most kMaxDims dims). Output o walks the
/// kept dims row-major; each output takes its reduction indices r in
/// increasing order, in `nblocks` fixed blocks of `block` indices whose
/// partials are combined in block order when nblocks > 1. `by_element`:
/// sums add their terms one at a time rather than per run along the
/// innermost reduced dim (cpu::sums_by_element, without a split).
struct ReduceGeometry {
  int kdim = 1;
  int rdim = 1;
  int64_t kshape[kMaxDims] = {1};
  int64_t kstrides[kMaxDims] = {0};
  int64_t rshape[kMaxDims] = {1};
  int64_t rstrides[kMaxDims] = {0};
  int64_t nout = 1;
  int64_t nred = 1;
  int64_t nblocks = 1;
  int64_t block = 1;
  bool by_element = false;
};

/// sum (mean false) or mean of x (dtype dt) over g into the contiguous out
/// (dtype out_dt: dt for floating x, int64 otherwise; mean floating only).
void launch_sum(std::byte* out, DType out_dt, const std::byte* x, DType dt, const ReduceGeometry& g, bool mean,
                const Exec& e);

/// var of floating x over g: two passes in double, the squared deviations
/// from the mean divided by `divisor`; out has x's dtype.
void launch_var(std::byte* out, const std::byte* x, DType dt, const ReduceGeometry& g, double divisor,
                const Exec& e);

/// The largest (is_max) or smallest element of x over g and the index of its
/// first occurrence (NaN beats everything), written to the contiguous
/// `values` (x's dtype) and int64 `indices`, either of which may be null.
void launch_extreme(std::byte* values, std::byte* indices, const std::byte* x, DType dt, const ReduceGeometry& g,
                    bool is_max, const Exec& e);

/// logsumexp of x over g in double into out (dtype out_dt): m + log(sum(exp(x
/// - m))) with m the maximum, 0 where infinite or the reduction is empty.
void launch_logsumexp(std::byte* out, DType out_dt, const std::byte* x, DType dt, const ReduceGeometry& g,
                      const Exec& e);

/// The contiguous x seen as (outer, size, inner) around the scanned dim.
struct ScanShape {
  int64_t outer = 1;
  int64_t size = 1;
  int64_t inner = 1;
};

/// cumsum (reverse: cumsum_backward, the scan from the end) of contiguous x
/// along s's dim into out (dtype out_dt: dt for floating x, int64
/// otherwise), each line accumulated sequentially in double or int64.
void launch_cumsum(std::byte* out, DType out_dt, const std::byte* x, DType dt, const ScanShape& s, bool reverse,
                   const Exec& e);

/// var_backward over L's operands (gx contiguous, g broadcast to x's shape,
/// x; one floating dtype): gx = g * scale * (x - mean), the means of x over
/// g (x's geometry) recomputed as var computes them.
void launch_var_backward(const ElementwiseLayout<3>& L, const ReduceGeometry& g, double scale, const Exec& e);

/// max_backward on contiguous x of n elements (floating dt), the one-element
/// gradient g and max: gx = g / count at the elements equal to the max (NaN
/// ones when it is NaN), 0 elsewhere.
void launch_max_backward(std::byte* gx, const std::byte* g, const std::byte* x, const std::byte* max, DType dt,
                         int64_t n, const Exec& e);

/// max_dim_backward: gx (outer, size, inner) zero but for g (outer, inner)
/// at the int64 indices (outer, inner) along the middle dim, each in [0, size).
void launch_max_dim_backward(std::byte* gx, const std::byte* g, const std::byte* indices, DType dt,
                             const ScanShape& s, const Exec& e);

}  // namespace dtr::cuda
