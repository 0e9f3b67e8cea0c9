// Reductions: sum, mean, var, max (whole tensor, and values/indices over a
// dim), argmax, argmin, amax, amin, logsumexp, the kernels of their backward
// rules, and the scan cumsum (sequential along its dim).
//
// Every reduction walks one geometry (below) with a fixed accumulation order
// that depends only on shapes and strides, never on the thread count
// (Note [determinism]): work is split over output elements, and when a few
// outputs share a long reduction, over fixed blocks of the reduction whose
// partials are combined in block order (the scheme of parallel_reduce).
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/accumulate.h"
#include "cpu/reduce_geometry.h"
#include "cpu/simd.h"

namespace dtr::cpu {
namespace {

// ---- geometry (cpu/reduce_geometry.h) ----------------------------------------

/// Offset (in elements) of row-major index i of (shape, strides).
int64_t offset_of(int64_t i, const Shape& shape, const Strides& strides) {
  int64_t off = 0;
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    off += (i % shape[size_t(d)]) * strides[size_t(d)];
    i /= shape[size_t(d)];
  }
  return off;
}

/// Calls f(r, offset, len) for the runs of indices [r0, r1) of (shape,
/// strides) that lie along the innermost dim: elements r..r+len-1 sit at
/// offset + j * strides.back().
template <typename F>
void for_each_run(const Shape& shape, const Strides& strides, int64_t r0, int64_t r1, F&& f) {
  const int64_t nd = int64_t(shape.size());
  const int64_t len_inner = shape.back(), stride_inner = strides.back();
  int64_t idx[16] = {0};
  int64_t q = r0 / len_inner, j = r0 % len_inner, off = 0;
  for (int64_t d = nd - 2; d >= 0; --d) {
    idx[d] = q % shape[size_t(d)];
    q /= shape[size_t(d)];
    off += idx[d] * strides[size_t(d)];
  }
  for (int64_t r = r0; r < r1;) {
    const int64_t len = std::min(len_inner - j, r1 - r);
    f(r, off + j * stride_inner, len);
    r += len;
    j = 0;
    for (int64_t d = nd - 2; d >= 0; --d) {
      off += strides[size_t(d)];
      if (++idx[d] < shape[size_t(d)]) break;
      off -= idx[d] * strides[size_t(d)];
      idx[d] = 0;
    }
  }
}

// Outputs handled together when they are contiguous in the input and the
// reduction strides over them (e.g. the column sums of a (N, C) matrix).
constexpr int64_t kTile = 64;

/// Runs reduction `op` over geometry `g`. Op provides: Acc, init(o),
/// update(acc, x, r), update_run(acc, p, len, stride, r0), combine(acc,
/// later_acc) and finish(o, acc).
template <typename T, typename Op>
void run_reduce(const Geometry& g, const T* in, Op& op) {
  using Acc = typename Op::Acc;
  if (g.nout == 0) return;
  if (g.nred == 0) {
    for (int64_t o = 0; o < g.nout; ++o) op.finish(o, op.init(o));
    return;
  }
  const int64_t rstride = g.rstrides.back();

  if (const int64_t nblocks = split_blocks(g); nblocks > 1) {
    // Few outputs with long reductions: fixed blocks of r, combined in order.
    std::vector<Acc> parts(size_t(g.nout * nblocks));
    parallel_for(g.nout * nblocks, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t o = i / nblocks, b = i % nblocks;
        const T* base = in + offset_of(o, g.kshape, g.kstrides);
        Acc a = op.init(o);
        for_each_run(g.rshape, g.rstrides, b * kSplitBlock, std::min(g.nred, (b + 1) * kSplitBlock),
                     [&](int64_t r, int64_t off, int64_t len) { op.update_run(a, base + off, len, rstride, r); });
        parts[size_t(i)] = a;
      }
    });
    for (int64_t o = 0; o < g.nout; ++o) {
      Acc a = parts[size_t(o * nblocks)];
      for (int64_t b = 1; b < nblocks; ++b) op.combine(a, parts[size_t(o * nblocks + b)]);
      op.finish(o, a);
    }
    return;
  }

  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / g.nred);
  if (sums_by_element(g)) {
    // Outputs contiguous in the input, reduction strided (e.g. the column
    // sums of a (N, C) matrix): walk the reduction once for a tile of
    // neighbouring outputs, streaming along the input's rows. Each output
    // still accumulates in increasing r, so the tile width (chosen here from
    // the thread count, for streaming) never changes a result.
    const int64_t inner = g.kshape.back();
    const int64_t nouter = g.nout / inner;
    const int64_t splits = std::max<int64_t>(1, (num_threads() + nouter - 1) / nouter);
    const int64_t tile = std::min(inner, std::max(kTile, (inner + splits - 1) / splits));
    const int64_t ntiles = (inner + tile - 1) / tile;
    const Shape kouter(g.kshape.begin(), g.kshape.end() - 1);
    const Strides kouter_strides(g.kstrides.begin(), g.kstrides.end() - 1);
    const int64_t nitems = nouter * ntiles;
    parallel_for(nitems, std::max<int64_t>(1, grain / tile), [&](int64_t i0, int64_t i1) {
      std::vector<Acc> acc(static_cast<size_t>(tile));
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t ko = i / ntiles, c0 = (i % ntiles) * tile;
        const int64_t w = std::min(tile, inner - c0);
        const int64_t o0 = ko * inner + c0;
        const T* base = in + offset_of(ko, kouter, kouter_strides) + c0;
        Acc* a = acc.data();
        for (int64_t j = 0; j < w; ++j) a[j] = op.init(o0 + j);
        if constexpr (requires(Acc* x, const T* p) { op.update_row(x, p, w); }) {
          // Each output still takes its terms in increasing r.
          for_each_offset(g.rshape, g.rstrides, 0, g.nred,
                          [&](int64_t, int64_t off) { op.update_row(a, base + off, w); });
        } else {
          for_each_offset(g.rshape, g.rstrides, 0, g.nred, [&](int64_t r, int64_t off) {
            const T* p = base + off;
            for (int64_t j = 0; j < w; ++j) op.update(a[j], p[j], r);
          });
        }
        for (int64_t j = 0; j < w; ++j) op.finish(o0 + j, a[j]);
      }
    });
    return;
  }

  // One output at a time, its reduction walked in runs along the innermost reduced dim.
  parallel_for(g.nout, grain, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o) {
      const T* base = in + offset_of(o, g.kshape, g.kstrides);
      Acc a = op.init(o);
      for_each_run(g.rshape, g.rstrides, 0, g.nred,
                   [&](int64_t r, int64_t off, int64_t len) { op.update_run(a, base + off, len, rstride, r); });
      op.finish(o, a);
    }
  });
}

// ---- reduction ops -------------------------------------------------------------

/// a[j] += p[j] for j < w, in the accumulator type.
template <typename A, typename T>
void add_row(A* a, const T* p, int64_t w) {
#pragma omp simd
  for (int64_t j = 0; j < w; ++j) a[j] += A(to_compute(p[j]));
}
template <typename A, typename T>
DTR_TARGET_AVX2 void add_row_avx2(A* a, const T* p, int64_t w) {
#pragma omp simd
  for (int64_t j = 0; j < w; ++j) a[j] += A(to_compute(p[j]));
}

template <typename T, typename Finish>
struct SumOp {
  using Acc = sum_acc_t<T>;
  Finish finish;
  Acc init(int64_t) const { return 0; }
  void update(Acc& a, T x, int64_t) const { a += Acc(to_compute(x)); }
  void update_run(Acc& a, const T* p, int64_t n, int64_t s, int64_t) const { a += sum_run(p, n, s); }
  /// a[j] += p[j] for j < w: one reduction step of w neighbouring outputs.
  void update_row(Acc* a, const T* p, int64_t w) const {
    if (w >= 16 && cpu_has_avx2()) return add_row_avx2(a, p, w);
    add_row(a, p, w);
  }
  void combine(Acc& a, const Acc& b) const { a += b; }
};
template <typename T, typename Finish>
SumOp<T, Finish> sum_op(Finish f) {
  return SumOp<T, Finish>{std::move(f)};
}

template <typename C>
inline bool is_nan(C x) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::isnan(x);
  } else {
    return false;
  }
}

/// Largest (kMax) or smallest value and the index of its first occurrence;
/// NaN beats everything either way (PyTorch propagates NaN through max and
/// min, and argmax/argmin point at it).
template <typename T, typename Finish, bool kMax = true>
struct ExtremeOp {
  using C = compute_t<T>;
  struct Acc {
    C v{};
    int64_t i = -1;
  };
  Finish finish;
  static bool better(C x, const Acc& a) {
    if (a.i < 0 || (is_nan(x) && !is_nan(a.v))) return true;
    if constexpr (kMax) {
      return x > a.v;
    } else {
      return x < a.v;
    }
  }
  Acc init(int64_t) const { return Acc{}; }
  void update(Acc& a, T x, int64_t r) const {
    const C c = to_compute(x);
    if (better(c, a)) a = Acc{c, r};
  }
  void update_run(Acc& a, const T* p, int64_t n, int64_t s, int64_t r0) const {
    for (int64_t j = 0; j < n; ++j) update(a, p[j * s], r0 + j);
  }
  // `b` covers later indices than `a`: ties keep `a`.
  void combine(Acc& a, const Acc& b) const {
    if (b.i >= 0 && better(b.v, a)) a = b;
  }
};
template <typename T, typename Finish>
ExtremeOp<T, Finish> max_op(Finish f) {
  return ExtremeOp<T, Finish>{std::move(f)};
}
template <typename T, typename Finish>
ExtremeOp<T, Finish, false> min_op(Finish f) {
  return ExtremeOp<T, Finish, false>{std::move(f)};
}

/// Sum of term(x - c) with a per-output centre c, in double: the squared
/// deviations from the mean (second pass of var), exp(x - max) (second
/// pass of logsumexp).
template <typename T, typename Term, typename Finish>
struct CentredSumOp {
  struct Acc {
    double sum = 0;
    double centre = 0;
  };
  const double* centres;
  Term term;
  Finish finish;
  Acc init(int64_t o) const { return Acc{0, centres[o]}; }
  void update(Acc& a, T x, int64_t) const { a.sum += term(double(to_compute(x)) - a.centre); }
  void update_run(Acc& a, const T* p, int64_t n, int64_t s, int64_t) const {
    for (int64_t j = 0; j < n; ++j) update(a, p[j * s], 0);
  }
  void combine(Acc& a, const Acc& b) const { a.sum += b.sum; }
};
template <typename T, typename Term, typename Finish>
CentredSumOp<T, Term, Finish> centred_sum_op(const double* centres, Term term, Finish finish) {
  return CentredSumOp<T, Term, Finish>{centres, std::move(term), std::move(finish)};
}

/// Mean over the reduced dims of each output of `g`, in double.
template <typename T>
std::vector<double> reduce_means(const Geometry& g, const T* x) {
  std::vector<double> means(size_t(g.nout));
  const double n = double(g.nred);
  auto op = sum_op<T>([&](int64_t o, double a) { means[size_t(o)] = a / n; });
  run_reduce(g, x, op);
  return means;
}

// ---- kernels -------------------------------------------------------------------

// sum: inputs (x); attrs dims (sorted, unique), keepdim. Floating sums keep
// the dtype; integer and bool sums are int64.
void sum_kernel(const KernelContext& c) {
  const TensorArg& in = c.inputs[0];
  const TensorArg& out = c.outputs[0];
  const Geometry g = make_geometry(in, c.attrs.ints("dims"));
  all_dispatch(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_storage_v<T>) {
      T* y = out.ptr<T>();
      auto op = sum_op<T>([y](int64_t o, double a) { y[o] = from_compute<T>(a); });
      run_reduce(g, in.ptr<T>(), op);
    } else {
      int64_t* y = out.ptr<int64_t>();
      auto op = sum_op<T>([y](int64_t o, int64_t a) { y[o] = a; });
      run_reduce(g, in.ptr<T>(), op);
    }
  });
}

// mean: like sum, floating only; an empty reduction gives NaN (0/0).
void mean_kernel(const KernelContext& c) {
  const TensorArg& in = c.inputs[0];
  const TensorArg& out = c.outputs[0];
  const Geometry g = make_geometry(in, c.attrs.ints("dims"));
  floating_dispatch(in.dtype, "mean", [&](auto tag) {
    using T = decltype(tag);
    T* y = out.ptr<T>();
    const double n = double(g.nred);
    auto op = sum_op<T>([y, n](int64_t o, double a) { y[o] = from_compute<T>(a / n); });
    run_reduce(g, in.ptr<T>(), op);
  });
}

// var: inputs (x, contiguous); attrs dims, correction, keepdim. Two passes
// in double: means, then squared deviations / max(0, N - correction).
void var_kernel(const KernelContext& c) {
  const TensorArg& in = c.inputs[0];
  const TensorArg& out = c.outputs[0];
  const Geometry g = make_geometry(in, c.attrs.ints("dims"));
  const double divisor = double(std::max<int64_t>(0, g.nred - c.attrs.i("correction")));
  floating_dispatch(in.dtype, "var", [&](auto tag) {
    using T = decltype(tag);
    const std::vector<double> means = reduce_means(g, in.ptr<T>());
    T* y = out.ptr<T>();
    auto op = centred_sum_op<T>(
        means.data(), [](double d) { return d * d; },
        [y, divisor](int64_t o, const auto& a) { y[o] = from_compute<T>(a.sum / divisor); });
    run_reduce(g, in.ptr<T>(), op);
  });
}

// max: whole tensor → 0-d value.
void max_kernel(const KernelContext& c) {
  const TensorArg& in = c.inputs[0];
  const TensorArg& out = c.outputs[0];
  Shape all;
  for (int64_t d = 0; d < in.dim(); ++d) all.push_back(d);
  const Geometry g = make_geometry(in, all);
  all_dispatch(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* y = out.ptr<T>();
    auto op = max_op<T>([y](int64_t o, const auto& a) { y[o] = from_compute<T>(a.v); });
    run_reduce(g, in.ptr<T>(), op);
  });
}

// max_dim: inputs (x); attrs dim, keepdim → (values, int64 indices).
// argmax: the same reduction, indices only.
void max_dim_kernel(const KernelContext& c) {
  const TensorArg& in = c.inputs[0];
  const bool with_values = c.outputs.size() == 2;
  const TensorArg& idx_out = c.outputs[with_values ? 1 : 0];
  const Geometry g = make_geometry(in, Shape{c.attrs.i("dim")});
  all_dispatch(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* values = with_values ? c.outputs[0].ptr<T>() : nullptr;
    int64_t* indices = idx_out.ptr<int64_t>();
    auto op = max_op<T>([values, indices](int64_t o, const auto& a) {
      if (values != nullptr) values[o] = from_compute<T>(a.v);
      indices[o] = a.i;
    });
    run_reduce(g, in.ptr<T>(), op);
  });
}

// argmin: like argmax with the smallest element.
void argmin_kernel(const KernelContext& c) {
  const TensorArg& in = c.inputs[0];
  const Geometry g = make_geometry(in, Shape{c.attrs.i("dim")});
  all_dispatch(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    int64_t* indices = c.outputs[0].ptr<int64_t>();
    auto op = min_op<T>([indices](int64_t o, const auto& a) { indices[o] = a.i; });
    run_reduce(g, in.ptr<T>(), op);
  });
}

// amax, amin: inputs (x); attrs dims (sorted, unique, each non-empty), keepdim → x's dtype.
template <bool kMax>
void extreme_kernel(const KernelContext& c) {
  const TensorArg& in = c.inputs[0];
  const Geometry g = make_geometry(in, c.attrs.ints("dims"));
  all_dispatch(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* y = c.outputs[0].ptr<T>();
    auto finish = [y](int64_t o, const auto& a) { y[o] = from_compute<T>(a.v); };
    ExtremeOp<T, decltype(finish), kMax> op{finish};
    run_reduce(g, in.ptr<T>(), op);
  });
}

// logsumexp: inputs (x, any dtype); attrs dims, keepdim. Two passes in
// double: the maximum m (0 where infinite, as PyTorch), then
// m + log(sum(exp(x - m))). The output is floating (float32 for integer x).
void logsumexp_kernel(const KernelContext& c) {
  const TensorArg& in = c.inputs[0];
  const TensorArg& out = c.outputs[0];
  const Geometry g = make_geometry(in, c.attrs.ints("dims"));
  const int64_t osz = itemsize(out.dtype);
  all_dispatch(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    std::vector<double> shifts(size_t(g.nout), 0.0);
    auto mop = max_op<T>([&shifts](int64_t o, const auto& a) {
      const double m = a.i < 0 ? 0.0 : double(a.v);
      shifts[size_t(o)] = std::isinf(m) ? 0.0 : m;
    });
    run_reduce(g, in.ptr<T>(), mop);
    auto op = centred_sum_op<T>(
        shifts.data(), [](double d) { return std::exp(d); },
        [&](int64_t o, const auto& a) { store_from_double(out.data + o * osz, out.dtype, std::log(a.sum) + a.centre); });
    run_reduce(g, in.ptr<T>(), op);
  });
}

/// cumsum along `dim` of a contiguous `shape`: each line (outer, inner)
/// accumulates sequentially, forward or (kReverse, the gradient) backward.
/// Floating values accumulate in double, integers and bool in int64.
template <bool kReverse>
void cumsum_kernel(const KernelContext& c) {
  const TensorArg& in = c.inputs[0];
  const TensorArg& out = c.outputs[0];
  const int64_t dim = c.attrs.i("dim");
  int64_t outer = 1, inner = 1, size = 1;
  for (int64_t d = 0; d < in.dim(); ++d) {
    const int64_t n = in.shape[size_t(d)];
    if (d < dim) outer *= n;
    if (d == dim) size = n;
    if (d > dim) inner *= n;
  }
  all_dispatch(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = sum_acc_t<T>;
    using Out = std::conditional_t<is_float_storage_v<T>, T, int64_t>;
    const T* x = in.ptr<T>();
    Out* y = out.ptr<Out>();
    parallel_for(outer * inner, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, size)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t line = b; line < e; ++line) {
                     const int64_t base = (line / inner) * size * inner + line % inner;
                     A acc = 0;
                     for (int64_t j = 0; j < size; ++j) {
                       const int64_t at = base + (kReverse ? size - 1 - j : j) * inner;
                       acc += A(to_compute(x[at]));
                       if constexpr (is_float_storage_v<T>) {
                         y[at] = from_compute<T>(acc);
                       } else {
                         y[at] = acc;
                       }
                     }
                   }
                 });
  });
}

// ---- backward kernels ------------------------------------------------------------

// sum_backward: inputs (g); attrs shape, dims, divisor → g broadcast to
// shape, divided by divisor (1 for sum, N for mean).
void sum_backward_kernel(const KernelContext& c) {
  const TensorArg& gin = c.inputs[0];
  const TensorArg& out = c.outputs[0];
  const Shape& shape = c.attrs.ints("shape");
  const Strides gs = reduced_broadcast_strides(shape, c.attrs.ints("dims"));
  const int64_t divisor = c.attrs.i("divisor");
  floating_dispatch(gin.dtype, "sum_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* gp = gin.ptr<T>();
    T* y = out.ptr<T>();
    parallel_for(out.numel(), 1 << 15, [&](int64_t b, int64_t e) {
      if (divisor == 1) {
        for_each_offset(shape, gs, b, e, [&](int64_t i, int64_t off) { y[i] = gp[off]; });
      } else {
        const C n = C(divisor);
        for_each_offset(shape, gs, b, e,
                        [&](int64_t i, int64_t off) { y[i] = from_compute<T>(to_compute(gp[off]) / n); });
      }
    });
  });
}

// var_backward: inputs (g, x contiguous); attrs dims, correction →
// g * 2 (x - mean) / (N - correction), the mean recomputed as in forward.
void var_backward_kernel(const KernelContext& c) {
  const TensorArg& gin = c.inputs[0];
  const TensorArg& x = c.inputs[1];
  const TensorArg& out = c.outputs[0];
  const Shape& dims = c.attrs.ints("dims");
  const Geometry g = make_geometry(x, dims);
  const Strides gs = reduced_broadcast_strides(x.shape, dims);
  const double scale = 2.0 / double(std::max<int64_t>(0, g.nred - c.attrs.i("correction")));
  floating_dispatch(x.dtype, "var_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.ptr<T>();
    const T* gp = gin.ptr<T>();
    T* y = out.ptr<T>();
    const std::vector<double> means = reduce_means(g, xp);
    // The kept-dim index of element i is its offset into the broadcast output.
    parallel_for(out.numel(), 1 << 14, [&](int64_t b, int64_t e) {
      for_each_offset(x.shape, gs, b, e, [&](int64_t i, int64_t o) {
        const double d = double(to_compute(xp[i])) - means[size_t(o)];
        y[i] = from_compute<T>(double(to_compute(gp[o])) * scale * d);
      });
    });
  });
}

// max_backward: inputs (g 0-d, x, value 0-d) → g split evenly among the
// elements equal to the max (NaN elements when the max is NaN), like
// PyTorch's evenly_distribute_backward.
void max_backward_kernel(const KernelContext& c) {
  const TensorArg& x = c.inputs[1];
  const TensorArg& out = c.outputs[0];
  floating_dispatch(x.dtype, "max_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* xp = x.ptr<T>();
    T* y = out.ptr<T>();
    const C value = to_compute(c.inputs[2].ptr<T>()[0]);
    const bool nan_max = std::isnan(value);
    auto selected = [&](int64_t i) {
      const C v = to_compute(xp[i]);
      return nan_max ? std::isnan(v) : v == value;
    };
    const int64_t n = x.numel();
    const int64_t count = parallel_reduce(n, 1 << 15, int64_t{0}, [&](int64_t b, int64_t e) {
      int64_t k = 0;
      for (int64_t i = b; i < e; ++i) k += selected(i) ? 1 : 0;
      return k;
    });
    const C share = to_compute(c.inputs[0].ptr<T>()[0]) / C(count);
    parallel_for(n, 1 << 15, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) y[i] = from_compute<T>(selected(i) ? share : C(0));
    });
  });
}

// max_dim_backward: inputs (g, int64 indices); attrs shape, dim → zeros of
// shape with g written at the selected index along dim.
void max_dim_backward_kernel(const KernelContext& c) {
  const TensorArg& gin = c.inputs[0];
  const int64_t* idx = c.inputs[1].ptr<int64_t>();
  const TensorArg& out = c.outputs[0];
  const Shape& shape = c.attrs.ints("shape");
  const int64_t dim = c.attrs.i("dim");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[size_t(d)];
  for (size_t d = size_t(dim) + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t size = shape[size_t(dim)];
  floating_dispatch(gin.dtype, "max_dim_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* gp = gin.ptr<T>();
    T* y = out.ptr<T>();
    parallel_for(outer, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, size * inner)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t o = b; o < e; ++o) {
                     T* row = y + o * size * inner;
                     std::fill(row, row + size * inner, from_compute<T>(0.0f));
                     for (int64_t k = 0; k < inner; ++k) row[idx[o * inner + k] * inner + k] = gp[o * inner + k];
                   }
                 });
  });
}

}  // namespace

void register_reduce_kernels() {
  set_cpu_kernel("sum", sum_kernel);
  set_cpu_kernel("mean", mean_kernel);
  set_cpu_kernel("var", var_kernel);
  set_cpu_kernel("max", max_kernel);
  set_cpu_kernel("max_dim", max_dim_kernel);
  set_cpu_kernel("argmax", max_dim_kernel);
  set_cpu_kernel("argmin", argmin_kernel);
  set_cpu_kernel("amax", extreme_kernel<true>);
  set_cpu_kernel("amin", extreme_kernel<false>);
  set_cpu_kernel("logsumexp", logsumexp_kernel);
  set_cpu_kernel("cumsum", cumsum_kernel<false>);
  set_cpu_kernel("cumsum_backward", cumsum_kernel<true>);
  set_cpu_kernel("sum_backward", sum_backward_kernel);
  set_cpu_kernel("var_backward", var_backward_kernel);
  set_cpu_kernel("max_backward", max_backward_kernel);
  set_cpu_kernel("max_dim_backward", max_dim_backward_kernel);
}

}  // namespace dtr::cpu
