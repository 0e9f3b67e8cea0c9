// softmax, log_softmax, cross_entropy, nll_loss, mse_loss and the kernels
// of their backward rules.
//
// Ops over a class dim view their input as (outer, D, inner): a "lane" is
// one (outer, inner) position and its D elements sit `inner` apart. Lanes are
// independent and run in parallel; a loss's reduction over lanes goes
// through per-lane values in a buffer and parallel_reduce with a fixed block,
// so the result never depends on the thread count (Note [determinism]).
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/accumulate.h"

namespace dtr::cpu {
namespace {

enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };  // PyTorch's enum values

/// Lane geometry of `shape` around `dim`.
struct Lanes {
  int64_t outer = 1, size = 1, inner = 1;
  int64_t count() const { return outer * inner; }
  /// Offset of lane l's first element.
  int64_t base(int64_t l) const { return (l / inner) * size * inner + l % inner; }
};

Lanes lanes_around(const Shape& shape, int64_t dim) {
  Lanes g;
  if (shape.empty()) return g;
  for (int64_t d = 0; d < dim; ++d) g.outer *= shape[size_t(d)];
  g.size = shape[size_t(dim)];
  for (size_t d = size_t(dim) + 1; d < shape.size(); ++d) g.inner *= shape[d];
  return g;
}

/// Class-dim geometry of a loss input: (N, C) or (N, C, d...) → dim 1; (C) → dim 0.
Lanes class_lanes(const Shape& shape) { return lanes_around(shape, shape.size() == 1 ? 0 : 1); }

int64_t lane_grain(int64_t size) { return std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(size, 1)); }

/// The largest element of a lane (-inf for an empty one), or its last NaN
/// when it holds any, as a left-to-right scan keeping
/// `v > mx || isnan(v)` finds. The scan is a
/// vectorized max reduction: with +0 and -0 both largest either may come
/// out, which no caller can tell apart (x - mx and mx + log(sum) do not
/// depend on the sign of a zero mx; exp(+-0) is 1).
template <typename T>
inline compute_t<T> lane_max(const T* x, int64_t n, int64_t s) {
  using C = compute_t<T>;
  C mx = -std::numeric_limits<C>::infinity();
  int any_nan = 0;
  if (s == 1) {
#pragma omp simd reduction(max : mx) reduction(| : any_nan)
    for (int64_t j = 0; j < n; ++j) {
      const C v = to_compute(x[j]);
      mx = v > mx ? v : mx;
      any_nan |= v != v ? 1 : 0;
    }
  } else {
    for (int64_t j = 0; j < n; ++j) {
      const C v = to_compute(x[j * s]);
      mx = v > mx ? v : mx;
      any_nan |= v != v ? 1 : 0;
    }
  }
  if (any_nan) {
    for (int64_t j = n - 1; j >= 0; --j) {
      const C v = to_compute(x[j * s]);
      if (std::isnan(v)) return v;
    }
  }
  return mx;
}

/// max and log(sum(exp(x - max))) + max of one lane, in the compute type
/// with the sum in double. Forward and backward share it, so the softmax a
/// backward kernel rebuilds equals the forward's.
template <typename T>
inline double lane_logsumexp(const T* x, int64_t n, int64_t s) {
  const compute_t<T> mx = lane_max(x, n, s);
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += double(std::exp(to_compute(x[j * s]) - mx));
  return double(mx) + std::log(sum);
}

// ---- softmax, log_softmax ----------------------------------------------------------

// softmax / log_softmax: inputs (x); attrs dim → y like x.
template <bool kLog>
void softmax_kernel(const KernelContext& c) {
  const TensorArg& in = c.inputs[0];
  const TensorArg& out = c.outputs[0];
  const Lanes g = lanes_around(in.shape, c.attrs.i("dim"));
  floating_dispatch(in.dtype, kLog ? "log_softmax" : "softmax", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* x = in.ptr<T>();
    T* y = out.ptr<T>();
    const int64_t n = g.size, s = g.inner;
    parallel_for(g.count(), lane_grain(n), [&](int64_t l0, int64_t l1) {
      for (int64_t l = l0; l < l1; ++l) {
        const T* xl = x + g.base(l);
        T* yl = y + g.base(l);
        const C mx = lane_max(xl, n, s);
        double sum = 0;
        if constexpr (!kLog && std::is_same_v<T, C>) {
          // Store the exponentials, then scale them. With a finite max, a
          // -inf input (a masked score) gives exp(-inf) = +0 exactly: the
          // library call is skipped, the value is the same.
          const bool finite_max = std::isfinite(mx);
          for (int64_t j = 0; j < n; ++j) {
            const C v = xl[j * s];
            const C e = finite_max && v == -std::numeric_limits<C>::infinity() ? C(0) : std::exp(v - mx);
            yl[j * s] = e;
            sum += double(e);
          }
          const C inv = C(1.0 / sum);
          for (int64_t j = 0; j < n; ++j) yl[j * s] *= inv;
        } else {
          for (int64_t j = 0; j < n; ++j) sum += double(std::exp(to_compute(xl[j * s]) - mx));
          if constexpr (kLog) {
            const C shift = C(double(mx) + std::log(sum));
            for (int64_t j = 0; j < n; ++j) yl[j * s] = from_compute<T>(to_compute(xl[j * s]) - shift);
          } else {
            const C inv = C(1.0 / sum);
            for (int64_t j = 0; j < n; ++j) yl[j * s] = from_compute<T>(std::exp(to_compute(xl[j * s]) - mx) * inv);
          }
        }
      }
    });
  });
}

// softmax_backward: (g, y) → y * (g - sum(g * y)).
// log_softmax_backward: (g, y) → g - exp(y) * sum(g).
template <bool kLog>
void softmax_backward_kernel(const KernelContext& c) {
  const TensorArg& gin = c.inputs[0];
  const TensorArg& yin = c.inputs[1];
  const TensorArg& out = c.outputs[0];
  const Lanes g = lanes_around(yin.shape, c.attrs.i("dim"));
  floating_dispatch(yin.dtype, kLog ? "log_softmax_backward" : "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* gp = gin.ptr<T>();
    const T* y = yin.ptr<T>();
    T* gx = out.ptr<T>();
    const int64_t n = g.size, s = g.inner;
    parallel_for(g.count(), lane_grain(n), [&](int64_t l0, int64_t l1) {
      for (int64_t l = l0; l < l1; ++l) {
        const int64_t b = g.base(l);
        double acc = 0;
        for (int64_t j = 0; j < n; ++j) {
          const double gv = to_compute(gp[b + j * s]);
          acc += kLog ? gv : gv * double(to_compute(y[b + j * s]));
        }
        const C dot = C(acc);
        for (int64_t j = 0; j < n; ++j) {
          const C gv = to_compute(gp[b + j * s]);
          const C yv = to_compute(y[b + j * s]);
          gx[b + j * s] = from_compute<T>(kLog ? gv - std::exp(yv) * dot : yv * (gv - dot));
        }
      }
    });
  });
}

// ---- cross_entropy, nll_loss --------------------------------------------------------

/// Throws IndexError unless each target is a class in [0, C) or ignore_index.
/// Returns the number of targets not ignored. Runs before any parallel work:
/// kernels must not throw inside parallel_for.
int64_t check_targets(const int64_t* t, int64_t n, int64_t classes, int64_t ignore_index,
                      std::string_view op) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (t[i] == ignore_index) continue;
    DTR_CHECK(t[i] >= 0 && t[i] < classes, IndexError,
              "{}: target {} at position {} is out of bounds for {} classes", op, t[i], i, classes);
    ++count;
  }
  return count;
}

/// Writes per-lane losses for reduction "none", or the 0-d sum / mean.
template <typename T>
void write_loss(const std::vector<double>& losses, int64_t reduction, int64_t count, T* out) {
  if (reduction == kNone) {
    for (size_t i = 0; i < losses.size(); ++i) out[i] = from_compute<T>(losses[i]);
    return;
  }
  const double total = parallel_reduce(int64_t(losses.size()), 4096, 0.0, [&](int64_t b, int64_t e) {
    double s = 0;
    for (int64_t i = b; i < e; ++i) s += losses[size_t(i)];
    return s;
  });
  out[0] = from_compute<T>(reduction == kMean ? total / double(count) : total);
}

// cross_entropy: inputs (logits (N, C, d...) or (C), int64 target (N, d...)
// or ()); attrs ignore_index, reduction. loss = logsumexp(x) - x[target].
void cross_entropy_kernel(const KernelContext& c) {
  const TensorArg& in = c.inputs[0];
  const int64_t* t = c.inputs[1].ptr<int64_t>();
  const Lanes g = class_lanes(in.shape);
  const int64_t ignore = c.attrs.i("ignore_index"), reduction = c.attrs.i("reduction");
  const int64_t count = check_targets(t, g.count(), g.size, ignore, "cross_entropy");
  floating_dispatch(in.dtype, "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const T* x = in.ptr<T>();
    std::vector<double> losses(size_t(g.count()));
    parallel_for(g.count(), lane_grain(g.size), [&](int64_t l0, int64_t l1) {
      for (int64_t l = l0; l < l1; ++l) {
        if (t[l] == ignore) {
          losses[size_t(l)] = 0;
          continue;
        }
        const T* xl = x + g.base(l);
        losses[size_t(l)] = lane_logsumexp(xl, g.size, g.inner) - double(to_compute(xl[t[l] * g.inner]));
      }
    });
    write_loss(losses, reduction, count, c.outputs[0].ptr<T>());
  });
}

/// The gradient flowing into lane l of a loss: g[l] for "none", g / count
/// for "mean", g for "sum".
template <typename T>
struct LaneGrad {
  const T* g;
  int64_t reduction;
  double scale;  // 1/count for mean, 1 otherwise
  double operator()(int64_t l) const {
    return reduction == kNone ? double(to_compute(g[l])) : double(to_compute(g[0])) * scale;
  }
};

// cross_entropy_backward: (g, logits, target); attrs ignore_index,
// reduction → (softmax(x) - onehot(target)) * lane gradient.
void cross_entropy_backward_kernel(const KernelContext& c) {
  const TensorArg& gin = c.inputs[0];
  const TensorArg& in = c.inputs[1];
  const int64_t* t = c.inputs[2].ptr<int64_t>();
  const Lanes g = class_lanes(in.shape);
  const int64_t ignore = c.attrs.i("ignore_index"), reduction = c.attrs.i("reduction");
  const int64_t count = check_targets(t, g.count(), g.size, ignore, "cross_entropy_backward");
  floating_dispatch(in.dtype, "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* x = in.ptr<T>();
    T* gx = c.outputs[0].ptr<T>();
    const LaneGrad<T> lane_grad{gin.ptr<T>(), reduction, reduction == kMean ? 1.0 / double(count) : 1.0};
    const int64_t n = g.size, s = g.inner;
    parallel_for(g.count(), lane_grain(n), [&](int64_t l0, int64_t l1) {
      for (int64_t l = l0; l < l1; ++l) {
        const int64_t b = g.base(l);
        if (t[l] == ignore) {
          for (int64_t j = 0; j < n; ++j) gx[b + j * s] = from_compute<T>(C(0));
          continue;
        }
        const C lse = C(lane_logsumexp(x + b, n, s));
        const C gl = C(lane_grad(l));
        for (int64_t j = 0; j < n; ++j) {
          const C p = std::exp(to_compute(x[b + j * s]) - lse);
          gx[b + j * s] = from_compute<T>((p - (j == t[l] ? C(1) : C(0))) * gl);
        }
      }
    });
  });
}

// nll_loss: inputs (log_probs, int64 target); attrs as cross_entropy.
// loss = -log_probs[target].
void nll_loss_kernel(const KernelContext& c) {
  const TensorArg& in = c.inputs[0];
  const int64_t* t = c.inputs[1].ptr<int64_t>();
  const Lanes g = class_lanes(in.shape);
  const int64_t ignore = c.attrs.i("ignore_index"), reduction = c.attrs.i("reduction");
  const int64_t count = check_targets(t, g.count(), g.size, ignore, "nll_loss");
  floating_dispatch(in.dtype, "nll_loss", [&](auto tag) {
    using T = decltype(tag);
    const T* x = in.ptr<T>();
    std::vector<double> losses(size_t(g.count()));
    for (int64_t l = 0; l < g.count(); ++l) {
      losses[size_t(l)] = t[l] == ignore ? 0.0 : -double(to_compute(x[g.base(l) + t[l] * g.inner]));
    }
    write_loss(losses, reduction, count, c.outputs[0].ptr<T>());
  });
}

// nll_loss_backward: (g, target); attrs shape, ignore_index, reduction →
// zeros of shape with -(lane gradient) at each target.
void nll_loss_backward_kernel(const KernelContext& c) {
  const TensorArg& gin = c.inputs[0];
  const int64_t* t = c.inputs[1].ptr<int64_t>();
  const TensorArg& out = c.outputs[0];
  const Lanes g = class_lanes(out.shape);
  const int64_t ignore = c.attrs.i("ignore_index"), reduction = c.attrs.i("reduction");
  const int64_t count = check_targets(t, g.count(), g.size, ignore, "nll_loss_backward");
  floating_dispatch(out.dtype, "nll_loss_backward", [&](auto tag) {
    using T = decltype(tag);
    T* gx = out.ptr<T>();
    std::fill(gx, gx + out.numel(), from_compute<T>(0.0f));
    const LaneGrad<T> lane_grad{gin.ptr<T>(), reduction, reduction == kMean ? 1.0 / double(count) : 1.0};
    for (int64_t l = 0; l < g.count(); ++l) {
      if (t[l] != ignore) gx[g.base(l) + t[l] * g.inner] = from_compute<T>(-lane_grad(l));
    }
  });
}

// ---- mse_loss -----------------------------------------------------------------------

// mse_loss: inputs (a, b) of one shape and dtype; attrs reduction.
void mse_loss_kernel(const KernelContext& c) {
  const TensorArg& a = c.inputs[0];
  const TensorArg& b = c.inputs[1];
  const int64_t reduction = c.attrs.i("reduction");
  const int64_t n = a.numel();
  floating_dispatch(a.dtype, "mse_loss", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* ap = a.ptr<T>();
    const T* bp = b.ptr<T>();
    T* y = c.outputs[0].ptr<T>();
    if (reduction == kNone) {
      parallel_for(n, 1 << 15, [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          const C d = to_compute(ap[i]) - to_compute(bp[i]);
          y[i] = from_compute<T>(d * d);
        }
      });
      return;
    }
    const double total = parallel_reduce(n, 1 << 14, 0.0, [&](int64_t i0, int64_t i1) {
      double s0 = 0, s1 = 0;
      int64_t i = i0;
      for (; i + 2 <= i1; i += 2) {
        const double d0 = double(to_compute(ap[i])) - double(to_compute(bp[i]));
        const double d1 = double(to_compute(ap[i + 1])) - double(to_compute(bp[i + 1]));
        s0 += d0 * d0;
        s1 += d1 * d1;
      }
      for (; i < i1; ++i) {
        const double d = double(to_compute(ap[i])) - double(to_compute(bp[i]));
        s0 += d * d;
      }
      return s0 + s1;
    });
    y[0] = from_compute<T>(reduction == kMean ? total / double(n) : total);
  });
}

// mse_loss_backward: (g, a, b); attrs reduction → 2 (a - b) g (/ N for mean).
// The gradient for b is this kernel with a and b swapped.
void mse_loss_backward_kernel(const KernelContext& c) {
  const TensorArg& gin = c.inputs[0];
  const TensorArg& a = c.inputs[1];
  const TensorArg& b = c.inputs[2];
  const int64_t reduction = c.attrs.i("reduction");
  const int64_t n = a.numel();
  floating_dispatch(a.dtype, "mse_loss_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* gp = gin.ptr<T>();
    const T* ap = a.ptr<T>();
    const T* bp = b.ptr<T>();
    T* gx = c.outputs[0].ptr<T>();
    if (n == 0) return;
    const C norm = C(reduction == kMean ? 2.0 / double(n) : 2.0);
    const C g0 = to_compute(gp[0]);
    parallel_for(n, 1 << 15, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const C gv = reduction == kNone ? to_compute(gp[i]) : g0;
        gx[i] = from_compute<T>(norm * (to_compute(ap[i]) - to_compute(bp[i])) * gv);
      }
    });
  });
}

}  // namespace

void register_loss_kernels() {
  set_cpu_kernel("softmax", softmax_kernel<false>);
  set_cpu_kernel("log_softmax", softmax_kernel<true>);
  set_cpu_kernel("softmax_backward", softmax_backward_kernel<false>);
  set_cpu_kernel("log_softmax_backward", softmax_backward_kernel<true>);
  set_cpu_kernel("cross_entropy", cross_entropy_kernel);
  set_cpu_kernel("cross_entropy_backward", cross_entropy_backward_kernel);
  set_cpu_kernel("nll_loss", nll_loss_kernel);
  set_cpu_kernel("nll_loss_backward", nll_loss_backward_kernel);
  set_cpu_kernel("mse_loss", mse_loss_kernel);
  set_cpu_kernel("mse_loss_backward", mse_loss_backward_kernel);
}

}  // namespace dtr::cpu
