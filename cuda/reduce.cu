// The reduce family as CUDA kernels (cuda/reduce.h); semantics follow
// cpu/reduce.cpp. A reduction runs one index per output over the CPU's
// geometry, its reduction indices in increasing order in the CPU's runs and
// types, so its values are the CPU's bit for bit under emulation. When few
// outputs share a long reduction it is split as on the CPU: one index per
// (output, fixed block of reduction indices) writes a partial, and a second
// launch combines each output's partials in block order. The scans run one
// index per line, sequentially; the backward kernels one index per gradient
// element (max_backward first counts the selected elements in fixed
// blocks). No atomics and no index reads what another writes, so a rerun is
// bitwise the first run (Note [host emulation of CUDA kernels]).
#include <cstdint>
#include <type_traits>

#include "cuda/launch.cuh"
#include "cuda/reduce.h"
#include "cuda/scratch.h"

namespace dtr::cuda {
namespace {

/// Elements per block of max_backward's count of selected elements.
constexpr int64_t kCountBlock = 4096;

template <typename C>
DTR_HD bool is_nan(C x) {
  if constexpr (std::is_floating_point_v<C>) {
    return isnan(x);
  } else {
    return false;
  }
}

/// The accumulator of sums over elements computed in C: double for floating
/// C, int64 otherwise (cpu/accumulate.h's sum_acc_t).
template <typename C>
using SumAcc = std::conditional_t<std::is_floating_point_v<C>, double, int64_t>;

/// Element offset of output o's first term: o row-major over the kept dims.
DTR_HD int64_t output_offset(const ReduceGeometry& g, int64_t o) {
  int64_t off = 0;
  for (int d = g.kdim - 1; d >= 0; --d) {
    off += (o % g.kshape[d]) * g.kstrides[d];
    o /= g.kshape[d];
  }
  return off;
}

/// Calls op.run(a, off, len, stride, r) for the runs of reduction indices
/// [r0, r1) that lie along the innermost reduced dim: terms r..r+len-1 sit
/// at element offsets off + j * stride (cpu/reduce.cpp's for_each_run).
template <typename Op>
DTR_HD void reduce_range(const Op& op, typename Op::Acc& a, const ReduceGeometry& g, int64_t base, int64_t r0,
                         int64_t r1) {
  const int nd = g.rdim;
  const int64_t len_inner = g.rshape[nd - 1], stride_inner = g.rstrides[nd - 1];
  int64_t idx[kMaxDims] = {};
  int64_t q = r0 / len_inner, j = r0 % len_inner, off = base;
  for (int d = nd - 2; d >= 0; --d) {
    idx[d] = q % g.rshape[d];
    q /= g.rshape[d];
    off += idx[d] * g.rstrides[d];
  }
  for (int64_t r = r0; r < r1;) {
    const int64_t len = len_inner - j < r1 - r ? len_inner - j : r1 - r;
    op.run(a, off + j * stride_inner, len, stride_inner, r);
    r += len;
    j = 0;
    for (int d = nd - 2; d >= 0; --d) {
      off += g.rstrides[d];
      if (++idx[d] < g.rshape[d]) break;
      off -= idx[d] * g.rstrides[d];
      idx[d] = 0;
    }
  }
}

// ---- reduction ops -------------------------------------------------------------------
// Each provides Acc, init(o), run(a, off, len, stride, r), combine(a, later)
// and finish(o, a), as cpu/reduce.cpp's ops.

/// Sums in SumAcc<C>, finished as out[o] = a (or a / count for a mean).
template <typename C>
struct SumOp {
  using Acc = SumAcc<C>;
  Input x;
  bool by_element;
  std::byte* out;
  DType out_dt;
  int64_t out_sz;
  bool mean;
  double count;
  DTR_HD Acc init(int64_t) const { return Acc(0); }
  DTR_HD void run(Acc& a, int64_t off, int64_t n, int64_t s, int64_t) const {
    if (by_element) {
      for (int64_t j = 0; j < n; ++j) a += x.at<Acc>(off + j * s);
      return;
    }
    // cpu/accumulate.h's sum_run: four interleaved partials for unit stride.
    if (s == 1) {
      Acc a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      int64_t j = 0;
      for (; j + 4 <= n; j += 4) {
        a0 += x.at<Acc>(off + j);
        a1 += x.at<Acc>(off + j + 1);
        a2 += x.at<Acc>(off + j + 2);
        a3 += x.at<Acc>(off + j + 3);
      }
      for (; j < n; ++j) a0 += x.at<Acc>(off + j);
      a += (a0 + a1) + (a2 + a3);
      return;
    }
    Acc t = 0;
    for (int64_t j = 0; j < n; ++j) t += x.at<Acc>(off + j * s);
    a += t;
  }
  DTR_HD void combine(Acc& a, const Acc& b) const { a += b; }
  DTR_HD void finish(int64_t o, const Acc& a) const {
    if (mean) {
      store<double>(out + o * out_sz, out_dt, double(a) / count);
    } else {
      store<Acc>(out + o * out_sz, out_dt, a);
    }
  }
};

template <typename C>
struct Extreme {
  C v;
  int64_t i;
};

/// The largest (kMax) or smallest element and the index of its first
/// occurrence; NaN beats everything. Finished into values, indices (either
/// may be null) and, for logsumexp, shifts: the maximum as a double, 0 where
/// infinite or the reduction is empty.
template <typename C, bool kMax>
struct ExtremeOp {
  using Acc = Extreme<C>;
  Input x;
  std::byte* values;
  DType values_dt;
  int64_t values_sz;
  int64_t* indices;
  double* shifts;
  DTR_HD static bool better(C v, const Acc& a) {
    if (a.i < 0 || (is_nan(v) && !is_nan(a.v))) return true;
    return kMax ? v > a.v : v < a.v;
  }
  DTR_HD Acc init(int64_t) const { return Acc{C(0), -1}; }
  DTR_HD void run(Acc& a, int64_t off, int64_t n, int64_t s, int64_t r0) const {
    for (int64_t j = 0; j < n; ++j) {
      const C v = x.at<C>(off + j * s);
      if (better(v, a)) a = Acc{v, r0 + j};
    }
  }
  // `b` covers later indices than `a`: ties keep `a`.
  DTR_HD void combine(Acc& a, const Acc& b) const {
    if (b.i >= 0 && better(b.v, a)) a = b;
  }
  DTR_HD void finish(int64_t o, const Acc& a) const {
    if (values != nullptr) store<C>(values + o * values_sz, values_dt, a.v);
    if (indices != nullptr) indices[o] = a.i;
    if (shifts != nullptr) {
      const double m = a.i < 0 ? 0.0 : double(a.v);
      shifts[o] = isinf(m) ? 0.0 : m;
    }
  }
};

struct CentredSum {
  double sum;
  double centre;
};

/// Sum in double of (x - centre[o])^2 (kExp false: var's second pass) or of
/// exp(x - centre[o]) (logsumexp's), finished as out[o] = sum / divisor or
/// log(sum) + centre.
template <bool kExp>
struct CentredOp {
  using Acc = CentredSum;
  Input x;
  const double* centres;
  std::byte* out;
  DType out_dt;
  int64_t out_sz;
  double divisor;
  DTR_HD Acc init(int64_t o) const { return Acc{0, centres[o]}; }
  DTR_HD void run(Acc& a, int64_t off, int64_t n, int64_t s, int64_t) const {
    for (int64_t j = 0; j < n; ++j) {
      const double d = x.at<double>(off + j * s) - a.centre;
      a.sum += kExp ? exp(d) : d * d;
    }
  }
  DTR_HD void combine(Acc& a, const Acc& b) const { a.sum += b.sum; }
  DTR_HD void finish(int64_t o, const Acc& a) const {
    store<double>(out + o * out_sz, out_dt, kExp ? log(a.sum) + a.centre : a.sum / divisor);
  }
};

// ---- the reduction driver --------------------------------------------------------------

/// One output over its whole reduction.
template <typename Op>
struct ReduceBody {
  Op op;
  ReduceGeometry g;
  DTR_HD void operator()(int64_t o) const {
    typename Op::Acc a = op.init(o);
    if (g.nred > 0) reduce_range(op, a, g, output_offset(g, o), 0, g.nred);
    op.finish(o, a);
  }
};

/// The partial of output i / nblocks over its block i % nblocks.
template <typename Op>
struct PartialBody {
  Op op;
  ReduceGeometry g;
  typename Op::Acc* parts;
  DTR_HD void operator()(int64_t i) const {
    const int64_t o = i / g.nblocks, b = i % g.nblocks;
    const int64_t r1 = (b + 1) * g.block < g.nred ? (b + 1) * g.block : g.nred;
    typename Op::Acc a = op.init(o);
    reduce_range(op, a, g, output_offset(g, o), b * g.block, r1);
    parts[i] = a;
  }
};

/// Output o's partials combined in block order.
template <typename Op>
struct CombineBody {
  Op op;
  int64_t nblocks;
  const typename Op::Acc* parts;
  DTR_HD void operator()(int64_t o) const {
    typename Op::Acc a = parts[o * nblocks];
    for (int64_t b = 1; b < nblocks; ++b) op.combine(a, parts[o * nblocks + b]);
    op.finish(o, a);
  }
};

template <typename Op>
void run_reduce(const Exec& e, const ReduceGeometry& g, const Op& op, const char* name) {
  if (g.nout == 0) return;
  if (g.nblocks <= 1) {
    launch(e, g.nout, ReduceBody<Op>{op, g}, name);
    return;
  }
  using Acc = typename Op::Acc;
  Scratch s(e, size_t(g.nout * g.nblocks) * sizeof(Acc));
  launch(e, g.nout * g.nblocks, PartialBody<Op>{op, g, s.as<Acc>()}, name);
  launch(e, g.nout, CombineBody<Op>{op, g.nblocks, s.as<Acc>()}, name);
}

/// The means of x over g into means (nout doubles), as var computes them.
template <typename C>
void reduce_means(double* means, const std::byte* x, DType dt, const ReduceGeometry& g, const Exec& e) {
  const SumOp<C> op{input_of(x, dt), g.by_element, reinterpret_cast<std::byte*>(means), kFloat64,
                    int64_t(sizeof(double)), true, double(g.nred)};
  run_reduce(e, g, op, "reduce_means");
}

// ---- reductions ----------------------------------------------------------------------

template <typename C>
void sum_typed(std::byte* out, DType out_dt, const std::byte* x, DType dt, const ReduceGeometry& g, bool mean,
               const Exec& e) {
  const SumOp<C> op{input_of(x, dt), g.by_element, out, out_dt, itemsize(out_dt), mean, double(g.nred)};
  run_reduce(e, g, op, mean ? "mean" : "sum");
}

template <typename C>
void var_typed(std::byte* out, const std::byte* x, DType dt, const ReduceGeometry& g, double divisor,
               const Exec& e) {
  Scratch s(e, size_t(g.nout) * sizeof(double));
  double* means = s.as<double>();
  reduce_means<C>(means, x, dt, g, e);
  const CentredOp<false> op{input_of(x, dt), means, out, dt, itemsize(dt), divisor};
  run_reduce(e, g, op, "var");
}

template <typename C, bool kMax>
void extreme_typed(std::byte* values, std::byte* indices, const std::byte* x, DType dt, const ReduceGeometry& g,
                   const Exec& e) {
  const ExtremeOp<C, kMax> op{input_of(x, dt), values, dt, itemsize(dt), reinterpret_cast<int64_t*>(indices),
                              nullptr};
  run_reduce(e, g, op, kMax ? "max" : "min");
}

template <typename C>
void logsumexp_typed(std::byte* out, DType out_dt, const std::byte* x, DType dt, const ReduceGeometry& g,
                     const Exec& e) {
  Scratch s(e, size_t(g.nout) * sizeof(double));
  double* shifts = s.as<double>();
  const ExtremeOp<C, true> mop{input_of(x, dt), nullptr, dt, itemsize(dt), nullptr, shifts};
  run_reduce(e, g, mop, "logsumexp_max");
  const CentredOp<true> op{input_of(x, dt), shifts, out, out_dt, itemsize(out_dt), 1.0};
  run_reduce(e, g, op, "logsumexp");
}

// ---- scans and backward kernels --------------------------------------------------------

/// One line of a cumsum: acc over the line in order (from its end when kReverse).
template <typename A, bool kReverse>
struct CumsumBody {
  std::byte* y;
  DType out_dt;
  int64_t out_sz;
  Input x;
  ScanShape s;
  DTR_HD void operator()(int64_t line) const {
    const int64_t base = (line / s.inner) * s.size * s.inner + line % s.inner;
    A acc = 0;
    for (int64_t j = 0; j < s.size; ++j) {
      const int64_t at = base + (kReverse ? s.size - 1 - j : j) * s.inner;
      acc += x.at<A>(at);
      store<A>(y + at * out_sz, out_dt, acc);
    }
  }
};

template <typename C>
void cumsum_typed(std::byte* out, DType out_dt, const std::byte* x, DType dt, const ScanShape& s, bool reverse,
                  const Exec& e) {
  using A = SumAcc<C>;
  const int64_t lines = s.outer * s.inner, out_sz = itemsize(out_dt);
  if (reverse) {
    launch(e, lines, CumsumBody<A, true>{out, out_dt, out_sz, input_of(x, dt), s}, "cumsum_backward");
  } else {
    launch(e, lines, CumsumBody<A, false>{out, out_dt, out_sz, input_of(x, dt), s}, "cumsum");
  }
}

template <typename C>
struct VarBackwardBody {
  ElementwiseLayout<3> L;
  const double* means;
  double scale;
  int64_t g_sz;
  DTR_HD void operator()(int64_t i) const {
    int64_t off[3];
    offsets_of(L, i, off);
    // g's element offset is the output's kept-dim index.
    const double d = double(load<C>(L.data[2] + off[2], L.dtype[2])) - means[off[1] / g_sz];
    store<double>(L.data[0] + off[0], L.dtype[0], double(load<C>(L.data[1] + off[1], L.dtype[1])) * scale * d);
  }
};

template <typename C>
void var_backward_typed(const ElementwiseLayout<3>& L, const ReduceGeometry& g, double scale, const Exec& e) {
  Scratch s(e, size_t(g.nout) * sizeof(double));
  double* means = s.as<double>();
  reduce_means<C>(means, L.data[2], L.dtype[2], g, e);
  launch(e, L.numel, VarBackwardBody<C>{L, means, scale, itemsize(L.dtype[1])}, "var_backward");
}

/// Whether x[i] is selected by max_backward: equal to the max, or NaN when it is.
template <typename C>
DTR_HD bool selected(Input x, int64_t i, C max) {
  const C v = x.at<C>(i);
  return is_nan(max) ? is_nan(v) : v == max;
}

template <typename C>
struct CountBody {
  Input x;
  Input max;
  int64_t n;
  int64_t* counts;
  DTR_HD void operator()(int64_t b) const {
    const C m = max.at<C>(0);
    const int64_t end = (b + 1) * kCountBlock < n ? (b + 1) * kCountBlock : n;
    int64_t k = 0;
    for (int64_t i = b * kCountBlock; i < end; ++i) k += selected(x, i, m) ? 1 : 0;
    counts[b] = k;
  }
};

/// counts[nblocks] = the sum of counts[0, nblocks).
struct TotalBody {
  int64_t* counts;
  int64_t nblocks;
  DTR_HD void operator()(int64_t) const {
    int64_t t = 0;
    for (int64_t b = 0; b < nblocks; ++b) t += counts[b];
    counts[nblocks] = t;
  }
};

template <typename C>
struct MaxBackwardBody {
  std::byte* gx;
  Input g;
  Input x;
  Input max;
  const int64_t* count;
  DTR_HD void operator()(int64_t i) const {
    const C share = g.at<C>(0) / C(*count);
    store<C>(gx + i * x.sz, x.dt, selected(x, i, max.at<C>(0)) ? share : C(0));
  }
};

template <typename C>
void max_backward_typed(std::byte* gx, const std::byte* g, const std::byte* x, const std::byte* max, DType dt,
                        int64_t n, const Exec& e) {
  const int64_t nblocks = (n + kCountBlock - 1) / kCountBlock;
  Scratch s(e, size_t(nblocks + 1) * sizeof(int64_t));
  int64_t* counts = s.as<int64_t>();
  const Input xs = input_of(x, dt), ms = input_of(max, dt);
  launch(e, nblocks, CountBody<C>{xs, ms, n, counts}, "max_backward_count");
  launch(e, 1, TotalBody{counts, nblocks}, "max_backward_total");
  launch(e, n, MaxBackwardBody<C>{gx, input_of(g, dt), xs, ms, counts + nblocks}, "max_backward");
}

template <typename C>
struct MaxDimBackwardBody {
  std::byte* gx;
  Input g;
  const int64_t* indices;
  ScanShape s;
  DTR_HD void operator()(int64_t i) const {
    const int64_t k = i % s.inner, j = (i / s.inner) % s.size, o = i / (s.inner * s.size);
    const int64_t at = o * s.inner + k;
    store<C>(gx + i * g.sz, g.dt, indices[at] == j ? g.at<C>(at) : C(0));
  }
};

}  // namespace

void launch_sum(std::byte* out, DType out_dt, const std::byte* x, DType dt, const ReduceGeometry& g, bool mean,
                const Exec& e) {
  compute_dispatch(dt, [&](auto tag) { sum_typed<decltype(tag)>(out, out_dt, x, dt, g, mean, e); });
}

void launch_var(std::byte* out, const std::byte* x, DType dt, const ReduceGeometry& g, double divisor,
                const Exec& e) {
  if (g.nout == 0) return;
  compute_dispatch(dt, [&](auto tag) { var_typed<decltype(tag)>(out, x, dt, g, divisor, e); });
}

void launch_extreme(std::byte* values, std::byte* indices, const std::byte* x, DType dt, const ReduceGeometry& g,
                    bool is_max, const Exec& e) {
  compute_dispatch(dt, [&](auto tag) {
    using C = decltype(tag);
    if (is_max) {
      extreme_typed<C, true>(values, indices, x, dt, g, e);
    } else {
      extreme_typed<C, false>(values, indices, x, dt, g, e);
    }
  });
}

void launch_logsumexp(std::byte* out, DType out_dt, const std::byte* x, DType dt, const ReduceGeometry& g,
                      const Exec& e) {
  if (g.nout == 0) return;
  compute_dispatch(dt, [&](auto tag) { logsumexp_typed<decltype(tag)>(out, out_dt, x, dt, g, e); });
}

void launch_cumsum(std::byte* out, DType out_dt, const std::byte* x, DType dt, const ScanShape& s, bool reverse,
                   const Exec& e) {
  compute_dispatch(dt, [&](auto tag) { cumsum_typed<decltype(tag)>(out, out_dt, x, dt, s, reverse, e); });
}

void launch_var_backward(const ElementwiseLayout<3>& L, const ReduceGeometry& g, double scale, const Exec& e) {
  if (L.numel == 0) return;
  compute_dispatch(L.dtype[2], [&](auto tag) { var_backward_typed<decltype(tag)>(L, g, scale, e); });
}

void launch_max_backward(std::byte* gx, const std::byte* g, const std::byte* x, const std::byte* max, DType dt,
                         int64_t n, const Exec& e) {
  if (n == 0) return;
  compute_dispatch(dt, [&](auto tag) { max_backward_typed<decltype(tag)>(gx, g, x, max, dt, n, e); });
}

void launch_max_dim_backward(std::byte* gx, const std::byte* g, const std::byte* indices, DType dt,
                             const ScanShape& s, const Exec& e) {
  compute_dispatch(dt, [&](auto tag) {
    using C = decltype(tag);
    launch(e, s.outer * s.size * s.inner,
           MaxDimBackwardBody<C>{gx, input_of(g, dt), reinterpret_cast<const int64_t*>(indices), s},
           "max_dim_backward");
  });
}

}  // namespace dtr::cuda
