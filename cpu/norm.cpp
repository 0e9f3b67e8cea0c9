// layer_norm, rms_norm, batch_norm (training and inference), group_norm, the in-place
// running-statistics update, and the kernels of their backward rules.
//
// Statistics are two-pass sums in double over a fixed element order
// (Note [determinism]). Backward kernels recompute a row's or channel's
// statistics with the same functions as forward, so they see bitwise the
// forward's values without anything but the inputs being saved.
#include <cmath>
#include <type_traits>
#include <vector>

#include "cpu/accumulate.h"
#include "cpu/channel_sums.h"
#include "cpu/simd.h"

namespace dtr::cpu {
namespace {

// Columns per work item when reducing the rows of a (rows, n) matrix per column.
constexpr int64_t kColumnTile = 64;

/// The optional inputs of a norm op, in order after x: weight, bias.
template <typename T>
struct Affine {
  const T* weight = nullptr;
  const T* bias = nullptr;
};

template <typename T>
Affine<T> affine_inputs(const KernelContext& c, size_t first) {
  Affine<T> a;
  size_t i = first;
  if (c.attrs.b("has_weight")) a.weight = c.inputs[i++].ptr<T>();
  if (c.attrs.b("has_bias")) a.bias = c.inputs[i++].ptr<T>();
  return a;
}

/// Rows of length n = product of the last `ndim` dims of x.
int64_t row_length(const TensorArg& x, const Attrs& attrs) {
  const int64_t ndim = int64_t(attrs.ints("norm_shape").size());
  int64_t n = 1;
  for (int64_t d = x.dim() - ndim; d < x.dim(); ++d) n *= x.shape[size_t(d)];
  return n;
}

int64_t row_grain(int64_t n) { return std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(n, 1)); }

/// Per-row mean and 1/sqrt(var + eps) (layer_norm) or, with `rms`, mean 0
/// and 1/sqrt(mean(x^2) + eps) (rms_norm).
template <typename T>
struct RowStats {
  compute_t<T> mean;
  compute_t<T> rstd;
};

/// Rows per group in the row loops: R rows' statistics and sums run
/// interleaved, so their R dependency chains (sums in double, one add after
/// another) overlap. Each row still takes exactly its own operations in its
/// own order, so a row's values do not depend on its group.
constexpr int kRowGroup = 4;

/// RowStats of the R consecutive rows of length n > 0 starting at x: per row
/// the operations of moments_contiguous (cpu/accumulate.h), or for rms two
/// interleaved sums of squares.
template <int R, typename T>
[[gnu::always_inline]] inline void row_stats_body(const T* x, int64_t n, double eps, bool rms, RowStats<T>* out) {
  using C = compute_t<T>;
  if (rms) {
    double a0[R] = {}, a1[R] = {};
    int64_t j = 0;
    for (; j + 2 <= n; j += 2) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const double v0 = to_compute(x[r * n + j]), v1 = to_compute(x[r * n + j + 1]);
        a0[r] += v0 * v0;
        a1[r] += v1 * v1;
      }
    }
    for (; j < n; ++j) {
      for (int r = 0; r < R; ++r) {
        const double v = to_compute(x[r * n + j]);
        a0[r] += v * v;
      }
    }
    for (int r = 0; r < R; ++r) out[r] = {C(0), C(1.0 / std::sqrt((a0[r] + a1[r]) / double(n) + eps))};
    return;
  }
  // sum_run: four interleaved partial sums, combined as (s0 + s1) + (s2 + s3).
  double s0[R] = {}, s1[R] = {}, s2[R] = {}, s3[R] = {};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const T* p = x + r * n + j;
      s0[r] += double(to_compute(p[0]));
      s1[r] += double(to_compute(p[1]));
      s2[r] += double(to_compute(p[2]));
      s3[r] += double(to_compute(p[3]));
    }
  }
  for (; j < n; ++j)
    for (int r = 0; r < R; ++r) s0[r] += double(to_compute(x[r * n + j]));
  double mean[R], q0[R] = {}, q1[R] = {};
  for (int r = 0; r < R; ++r) mean[r] = ((s0[r] + s1[r]) + (s2[r] + s3[r])) / double(n);
  // Squared deviations: two interleaved partial sums.
  j = 0;
  for (; j + 2 <= n; j += 2) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const double d0 = double(to_compute(x[r * n + j])) - mean[r];
      const double d1 = double(to_compute(x[r * n + j + 1])) - mean[r];
      q0[r] += d0 * d0;
      q1[r] += d1 * d1;
    }
  }
  for (; j < n; ++j) {
    for (int r = 0; r < R; ++r) {
      const double d = double(to_compute(x[r * n + j])) - mean[r];
      q0[r] += d * d;
    }
  }
  for (int r = 0; r < R; ++r) out[r] = {C(mean[r]), C(1.0 / std::sqrt((q0[r] + q1[r]) / double(n) + eps))};
}

template <int R, typename T>
DTR_TARGET_AVX2 void row_stats_avx2(const T* x, int64_t n, double eps, bool rms, RowStats<T>* out) {
  row_stats_body<R>(x, n, eps, rms, out);
}

template <int R, typename T>
void row_stats(const T* x, int64_t n, double eps, bool rms, RowStats<T>* out) {
  if (cpu_has_avx2()) return row_stats_avx2<R>(x, n, eps, rms, out);
  row_stats_body<R>(x, n, eps, rms, out);
}

/// Calls f(r, count) over rows [r0, r1) in groups of kRowGroup rows, the
/// last ones one at a time; f is a template on the group size.
template <typename F>
void for_row_groups(int64_t r0, int64_t r1, F&& f) {
  int64_t r = r0;
  for (; r + kRowGroup <= r1; r += kRowGroup) f.template operator()<kRowGroup>(r);
  for (; r < r1; ++r) f.template operator()<1>(r);
}

/// yr = (xr - mean) * rstd [* weight] [+ bias], in that order.
template <typename T>
void normalize_row(const T* xr, T* yr, int64_t n, RowStats<T> st, const Affine<T>& af) {
  using C = compute_t<T>;
  const C mean = st.mean, rstd = st.rstd;
  const T* w = af.weight;
  const T* b = af.bias;
  if (w != nullptr && b != nullptr) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      yr[j] = from_compute<T>((to_compute(xr[j]) - mean) * rstd * to_compute(w[j]) + to_compute(b[j]));
  } else if (w != nullptr) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) yr[j] = from_compute<T>((to_compute(xr[j]) - mean) * rstd * to_compute(w[j]));
  } else if (b != nullptr) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) yr[j] = from_compute<T>((to_compute(xr[j]) - mean) * rstd + to_compute(b[j]));
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) yr[j] = from_compute<T>((to_compute(xr[j]) - mean) * rstd);
  }
}

// layer_norm / rms_norm: inputs (x, [weight], [bias]); attrs
// norm_shape (normalized_shape), eps, has_weight, has_bias → y like x.
template <bool kRms>
void row_norm_kernel(const KernelContext& c) {
  const TensorArg& x = c.inputs[0];
  const int64_t n = row_length(x, c.attrs);
  const int64_t rows = n == 0 ? 0 : x.numel() / n;
  const double eps = c.attrs.f("eps");
  floating_dispatch(x.dtype, kRms ? "rms_norm" : "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.ptr<T>();
    T* y = c.outputs[0].ptr<T>();
    const Affine<T> af = affine_inputs<T>(c, 1);
    parallel_for(rows, row_grain(n), [&](int64_t r0, int64_t r1) {
      for_row_groups(r0, r1, [&]<int R>(int64_t r) {
        RowStats<T> st[R];
        row_stats<R>(xp + r * n, n, eps, kRms, st);
        for (int k = 0; k < R; ++k) normalize_row(xp + (r + k) * n, y + (r + k) * n, n, st[k], af);
      });
    });
  });
}

// layer_norm_backward / rms_norm_backward: inputs (g, x, [weight]); attrs as
// forward → (gx, [gweight], [gbias]) with gweight when has_weight and gbias
// when has_bias. With xhat = (x - mean) * rstd and h = g * weight:
//   layer_norm: gx = rstd * (h - mean(h) - xhat * mean(h * xhat))
//   rms_norm:   gx = rstd * (h - xhat * mean(h * xhat))
//   gweight = sum over rows of g * xhat, gbias = sum over rows of g.
template <bool kRms>
void row_norm_backward_kernel(const KernelContext& c) {
  const TensorArg& gin = c.inputs[0];
  const TensorArg& x = c.inputs[1];
  const int64_t n = row_length(x, c.attrs);
  const int64_t rows = n == 0 ? 0 : x.numel() / n;
  const double eps = c.attrs.f("eps");
  const bool has_weight = c.attrs.b("has_weight");
  const bool has_bias = c.attrs.b("has_bias");
  floating_dispatch(x.dtype, kRms ? "rms_norm_backward" : "layer_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* gp = gin.ptr<T>();
    const T* xp = x.ptr<T>();
    const T* w = has_weight ? c.inputs[2].ptr<T>() : nullptr;
    T* gx = c.outputs[0].ptr<T>();
    std::vector<RowStats<T>> stats(static_cast<size_t>(rows));
    // h = g * weight; without a weight, g * 1 (which is g, bit for bit).
    std::vector<C> wc(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) wc[size_t(j)] = w != nullptr ? to_compute(w[j]) : C(1);
    const C* wv = wc.data();
    parallel_for(rows, row_grain(n), [&](int64_t r0, int64_t r1) {
      for_row_groups(r0, r1, [&]<int R>(int64_t r) {
        RowStats<T>* st = stats.data() + r;
        row_stats<R>(xp + r * n, n, eps, kRms, st);
        double sum_h[R] = {}, sum_hx[R] = {};
        for (int64_t j = 0; j < n; ++j) {
#pragma GCC unroll 8
          for (int k = 0; k < R; ++k) {
            const C xhat = (to_compute(xp[(r + k) * n + j]) - st[k].mean) * st[k].rstd;
            const C h = to_compute(gp[(r + k) * n + j]) * wv[j];
            sum_h[k] += double(h);
            sum_hx[k] += double(h) * double(xhat);
          }
        }
        for (int k = 0; k < R; ++k) {
          const T* xr = xp + (r + k) * n;
          const T* gr = gp + (r + k) * n;
          T* gxr = gx + (r + k) * n;
          const C mean = st[k].mean, rstd = st[k].rstd;
          const C mean_h = kRms ? C(0) : C(sum_h[k] / double(n));
          const C mean_hx = C(sum_hx[k] / double(n));
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) {
            const C xhat = (to_compute(xr[j]) - mean) * rstd;
            const C h = to_compute(gr[j]) * wv[j];
            gxr[j] = from_compute<T>(rstd * (h - mean_h - xhat * mean_hx));
          }
        }
      });
    });
    if (!has_weight && !has_bias) return;
    // Column sums over rows: each column accumulates rows in order.
    T* gw = has_weight ? c.outputs[1].ptr<T>() : nullptr;
    T* gb = has_bias ? c.outputs[has_weight ? 2 : 1].ptr<T>() : nullptr;
    const int64_t ntiles = (n + kColumnTile - 1) / kColumnTile;
    parallel_for(ntiles, 1, [&](int64_t t0, int64_t t1) {
      double acc_w[kColumnTile], acc_b[kColumnTile];
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t c0 = t * kColumnTile, width = std::min(kColumnTile, n - c0);
        std::fill(acc_w, acc_w + width, 0.0);
        std::fill(acc_b, acc_b + width, 0.0);
        for (int64_t r = 0; r < rows; ++r) {
          const T* xr = xp + r * n + c0;
          const T* gr = gp + r * n + c0;
          const RowStats<T> st = stats[size_t(r)];
#pragma omp simd
          for (int64_t j = 0; j < width; ++j) {
            const C g = to_compute(gr[j]);
            acc_w[j] += double(g * ((to_compute(xr[j]) - st.mean) * st.rstd));
            acc_b[j] += double(g);
          }
        }
        for (int64_t j = 0; j < width; ++j) {
          if (gw != nullptr) gw[c0 + j] = from_compute<T>(acc_w[j]);
          if (gb != nullptr) gb[c0 + j] = from_compute<T>(acc_b[j]);
        }
      }
    });
  });
}

// ---- batch_norm ----------------------------------------------------------------------

/// x (N, C, *) seen as N planes per channel, each `inner` contiguous elements.
struct Channels {
  int64_t batch = 1, channels = 1, inner = 1;
  int64_t count() const { return batch * inner; }
  int64_t plane(int64_t n, int64_t ch) const { return (n * channels + ch) * inner; }
};

Channels channels_of(const TensorArg& x) {
  Channels g;
  g.batch = x.shape[0];
  g.channels = x.shape[1];
  for (int64_t d = 2; d < x.dim(); ++d) g.inner *= x.shape[size_t(d)];
  return g;
}

/// Mean and biased variance of channel `ch`, two passes in double (Note
/// [channel sums]).
template <typename T>
Moments channel_moments(const T* x, const Channels& g, int64_t ch) {
  Moments m;
  double s = 0;
  for (int64_t n = 0; n < g.batch; ++n) s += plane_sum<false>(x + g.plane(n, ch), g.inner, 0.0);
  m.mean = s / double(g.count());
  double q = 0;
  for (int64_t n = 0; n < g.batch; ++n) q += plane_sum<true>(x + g.plane(n, ch), g.inner, m.mean);
  m.var = q / double(g.count());
  return m;
}

int64_t channel_grain(const Channels& g) {
  return std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(g.count(), 1));
}

/// y = (x - mean) * invstd * weight + bias for channel ch.
template <typename T>
void normalize_channel(const T* x, T* y, const Channels& g, int64_t ch, compute_t<T> mean,
                       compute_t<T> invstd, const Affine<T>& af) {
  using C = compute_t<T>;
  const C scale = invstd * (af.weight != nullptr ? to_compute(af.weight[ch]) : C(1));
  const C shift = (af.bias != nullptr ? to_compute(af.bias[ch]) : C(0)) - mean * scale;
  for (int64_t n = 0; n < g.batch; ++n) {
    const T* p = x + g.plane(n, ch);
    T* q = y + g.plane(n, ch);
    for (int64_t k = 0; k < g.inner; ++k) q[k] = from_compute<T>(to_compute(p[k]) * scale + shift);
  }
}

template <typename S>
void store_stat(const TensorArg& out, int64_t i, double v) {
  out.ptr<S>()[i] = S(v);
}

// batch_norm (training): inputs (x (N, C, *), [weight], [bias]); attrs eps,
// has_weight, has_bias → (y, batch mean (C), biased batch var (C)); the
// statistics are float64 for float64 x and float32 otherwise.
void batch_norm_kernel(const KernelContext& c) {
  const TensorArg& x = c.inputs[0];
  const Channels g = channels_of(x);
  const double eps = c.attrs.f("eps");
  floating_dispatch(x.dtype, "batch_norm", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* xp = x.ptr<T>();
    T* y = c.outputs[0].ptr<T>();
    const Affine<T> af = affine_inputs<T>(c, 1);
    const bool f64 = c.outputs[1].dtype == kFloat64;
    parallel_for(g.channels, channel_grain(g), [&](int64_t c0, int64_t c1) {
      for (int64_t ch = c0; ch < c1; ++ch) {
        const Moments m = channel_moments(xp, g, ch);
        normalize_channel(xp, y, g, ch, C(m.mean), C(1.0 / std::sqrt(m.var + eps)), af);
        if (f64) {
          store_stat<double>(c.outputs[1], ch, m.mean);
          store_stat<double>(c.outputs[2], ch, m.var);
        } else {
          store_stat<float>(c.outputs[1], ch, m.mean);
          store_stat<float>(c.outputs[2], ch, m.var);
        }
      }
    });
  });
}

// batch_norm_inference: inputs (x, running_mean, running_var, [weight],
// [bias]) of one dtype; attrs eps, has_weight, has_bias → y.
void batch_norm_inference_kernel(const KernelContext& c) {
  const TensorArg& x = c.inputs[0];
  const Channels g = channels_of(x);
  const double eps = c.attrs.f("eps");
  floating_dispatch(x.dtype, "batch_norm", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* rm = c.inputs[1].ptr<T>();
    const T* rv = c.inputs[2].ptr<T>();
    const Affine<T> af = affine_inputs<T>(c, 3);
    parallel_for(g.channels, channel_grain(g), [&](int64_t c0, int64_t c1) {
      for (int64_t ch = c0; ch < c1; ++ch) {
        const C invstd = C(1.0 / std::sqrt(double(to_compute(rv[ch])) + eps));
        normalize_channel(x.ptr<T>(), c.outputs[0].ptr<T>(), g, ch, to_compute(rm[ch]), invstd, af);
      }
    });
  });
}

// batch_norm_update_stats_ (in place, side effect): inputs (running (C),
// batch statistic (C)); attrs momentum, scale →
// running = (1 - momentum) * running + momentum * scale * statistic.
// scale is n / (n - 1) for the variance (PyTorch keeps the unbiased one).
void batch_norm_update_stats_kernel(const KernelContext& c) {
  const TensorArg& running = c.outputs[0];
  const TensorArg& stat = c.inputs[1];
  const double momentum = c.attrs.f("momentum"), scale = c.attrs.f("scale");
  const int64_t rsz = itemsize(running.dtype), ssz = itemsize(stat.dtype);
  const int64_t rstride = running.dim() == 0 ? 0 : running.strides[0];
  const int64_t sstride = stat.dim() == 0 ? 0 : stat.strides[0];
  for (int64_t i = 0; i < running.numel(); ++i) {
    std::byte* r = running.data + i * rstride * rsz;
    const double s = load_as_double(stat.data + i * sstride * ssz, stat.dtype);
    store_from_double(r, running.dtype, momentum * (s * scale) + (1.0 - momentum) * load_as_double(r, running.dtype));
  }
}

// batch_norm_backward: inputs (g, x, [running_mean, running_var] in eval
// mode, [weight]); attrs training, eps, has_weight, has_bias →
// (gx, [gweight], [gbias]). In training mode the batch statistics are
// recomputed from x (same code as forward) and
//   gx = weight * invstd * (g - mean(g) - xhat * mean(g * xhat));
// in eval mode gx = g * weight * invstd with the running statistics.
void batch_norm_backward_kernel(const KernelContext& c) {
  const TensorArg& gin = c.inputs[0];
  const TensorArg& x = c.inputs[1];
  const Channels g = channels_of(x);
  const bool training = c.attrs.b("training");
  const double eps = c.attrs.f("eps");
  const bool has_weight = c.attrs.b("has_weight"), has_bias = c.attrs.b("has_bias");
  floating_dispatch(x.dtype, "batch_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* gp = gin.ptr<T>();
    const T* xp = x.ptr<T>();
    const T* rm = training ? nullptr : c.inputs[2].ptr<T>();
    const T* rv = training ? nullptr : c.inputs[3].ptr<T>();
    const T* w = has_weight ? c.inputs[training ? 2 : 4].ptr<T>() : nullptr;
    T* gx = c.outputs[0].ptr<T>();
    T* gw = has_weight ? c.outputs[1].ptr<T>() : nullptr;
    T* gb = has_bias ? c.outputs[has_weight ? 2 : 1].ptr<T>() : nullptr;
    parallel_for(g.channels, channel_grain(g), [&](int64_t c0, int64_t c1) {
      for (int64_t ch = c0; ch < c1; ++ch) {
        double mean, invstd;
        if (training) {
          const Moments m = channel_moments(xp, g, ch);
          mean = m.mean;
          invstd = 1.0 / std::sqrt(m.var + eps);
        } else {
          mean = double(to_compute(rm[ch]));
          invstd = 1.0 / std::sqrt(double(to_compute(rv[ch])) + eps);
        }
        const C mean_c = C(mean), invstd_c = C(invstd);
        // Per plane in sixteen interleaved partial sums, planes in batch
        // order (Note [channel sums]).
        double sum_g = 0, sum_gx = 0;
        for (int64_t n = 0; n < g.batch; ++n) {
          double pg, pgx;
          plane_grad_sums(gp + g.plane(n, ch), xp + g.plane(n, ch), g.inner, mean_c, invstd_c, pg, pgx);
          sum_g += pg;
          sum_gx += pgx;
        }
        const C wv = w != nullptr ? to_compute(w[ch]) : C(1);
        const C mean_g = training ? C(sum_g / double(g.count())) : C(0);
        const C mean_gx = training ? C(sum_gx / double(g.count())) : C(0);
        for (int64_t n = 0; n < g.batch; ++n) {
          const T* xq = xp + g.plane(n, ch);
          const T* gq = gp + g.plane(n, ch);
          T* out = gx + g.plane(n, ch);
          for (int64_t k = 0; k < g.inner; ++k) {
            const C xhat = (to_compute(xq[k]) - mean_c) * invstd_c;
            out[k] = from_compute<T>(wv * invstd_c * (to_compute(gq[k]) - mean_g - xhat * mean_gx));
          }
        }
        if (gw != nullptr) gw[ch] = from_compute<T>(sum_gx);
        if (gb != nullptr) gb[ch] = from_compute<T>(sum_g);
      }
    });
  });
}

// ---- group_norm -------------------------------------------------------------------
// x (N, C, *) with C = G * Cg: the (n, g) rows of Cg * S contiguous elements
// (S the spatial size) are layer_norm's rows, with the same statistics code;
// the affine is per channel.

struct GroupShape {
  int64_t N, C, G, S;
  int64_t Cg() const { return C / G; }
  int64_t row() const { return Cg() * S; }
};

GroupShape group_shape(const TensorArg& x, const Attrs& a) {
  const int64_t N = x.shape[0], C = x.shape[1];
  return {N, C, a.i("num_groups"), N * C == 0 ? 0 : x.numel() / (N * C)};
}

// group_norm: inputs (x, [weight], [bias]); attrs num_groups, eps, has_weight,
// has_bias → y like x: (x - mean) * rstd [* weight[c]] [+ bias[c]].
void group_norm_kernel(const KernelContext& c) {
  const TensorArg& x = c.inputs[0];
  const GroupShape gs = group_shape(x, c.attrs);
  const double eps = c.attrs.f("eps");
  floating_dispatch(x.dtype, "group_norm", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* xp = x.ptr<T>();
    T* y = c.outputs[0].ptr<T>();
    const Affine<T> af = affine_inputs<T>(c, 1);
    const int64_t n = gs.row(), S = gs.S;
    if (n == 0) return;
    parallel_for(gs.N * gs.G, row_grain(n), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        RowStats<T> st[1];
        row_stats<1>(xp + r * n, n, eps, false, st);
        for (int64_t k = 0; k < gs.Cg(); ++k) {
          const int64_t ch = (r % gs.G) * gs.Cg() + k;
          const C w = af.weight != nullptr ? to_compute(af.weight[ch]) : C(1);
          const C b = af.bias != nullptr ? to_compute(af.bias[ch]) : C(0);
          const T* xr = xp + r * n + k * S;
          T* yr = y + r * n + k * S;
          for (int64_t j = 0; j < S; ++j)
            yr[j] = from_compute<T>((to_compute(xr[j]) - st[0].mean) * st[0].rstd * w + b);
        }
      }
    });
  });
}

// group_norm_backward: inputs (g, x, [weight]) → (gx, [gweight], [gbias]).
// With xhat = (x - mean) * rstd and h = g * weight[c], over each (n, g) row:
//   gx = rstd * (h - mean(h) - xhat * mean(h * xhat)),
// and per channel gweight = sum over n, s of g * xhat, gbias = sum of g: the
// (n, c) partial sums are formed per row, then added over n in order.
void group_norm_backward_kernel(const KernelContext& c) {
  const TensorArg &gin = c.inputs[0], &x = c.inputs[1];
  const GroupShape gs = group_shape(x, c.attrs);
  const double eps = c.attrs.f("eps");
  const bool has_w = c.attrs.b("has_weight"), has_b = c.attrs.b("has_bias");
  floating_dispatch(x.dtype, "group_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* gp = gin.ptr<T>();
    const T* xp = x.ptr<T>();
    const T* wp = has_w ? c.inputs[2].ptr<T>() : nullptr;
    T* gx = c.outputs[0].ptr<T>();
    const int64_t n = gs.row(), S = gs.S, Cg = gs.Cg();
    std::vector<double> dw(size_t(gs.N * gs.C), 0.0), db(size_t(gs.N * gs.C), 0.0);
    if (n > 0) {
      parallel_for(gs.N * gs.G, row_grain(n), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          RowStats<T> st[1];
          row_stats<1>(xp + r * n, n, eps, false, st);
          const double mean = double(st[0].mean), rstd = double(st[0].rstd);
          const T* xr = xp + r * n;
          const T* gr = gp + r * n;
          const int64_t ch0 = (r % gs.G) * Cg, nn = r / gs.G;
          double sum_h = 0, sum_hx = 0;
          for (int64_t k = 0; k < Cg; ++k) {
            const double w = wp != nullptr ? double(to_compute(wp[ch0 + k])) : 1.0;
            double sg = 0, sgx = 0;
            for (int64_t j = 0; j < S; ++j) {
              const double g = double(to_compute(gr[k * S + j]));
              const double xh = (double(to_compute(xr[k * S + j])) - mean) * rstd;
              sg += g;
              sgx += g * xh;
            }
            dw[size_t(nn * gs.C + ch0 + k)] = sgx;
            db[size_t(nn * gs.C + ch0 + k)] = sg;
            sum_h += w * sg;
            sum_hx += w * sgx;
          }
          const double mh = sum_h / double(n), mhx = sum_hx / double(n);
          for (int64_t k = 0; k < Cg; ++k) {
            const double w = wp != nullptr ? double(to_compute(wp[ch0 + k])) : 1.0;
            for (int64_t j = 0; j < S; ++j) {
              const int64_t i = k * S + j;
              const double xh = (double(to_compute(xr[i])) - mean) * rstd;
              gx[r * n + i] = from_compute<T>(
                  compute_t<T>(rstd * (double(to_compute(gr[i])) * w - mh - xh * mhx)));
            }
          }
        }
      });
    }
    size_t out = 1;
    auto reduce_over_n = [&](const std::vector<double>& part) {
      T* dst = c.outputs[out++].ptr<T>();
      for (int64_t ch = 0; ch < gs.C; ++ch) {
        double acc = 0;
        for (int64_t k = 0; k < gs.N; ++k) acc += part[size_t(k * gs.C + ch)];
        dst[ch] = from_compute<T>(compute_t<T>(acc));
      }
    };
    if (has_w) reduce_over_n(dw);
    if (has_b) reduce_over_n(db);
  });
}

}  // namespace

void register_norm_kernels() {
  set_cpu_kernel("layer_norm", row_norm_kernel<false>);
  set_cpu_kernel("rms_norm", row_norm_kernel<true>);
  set_cpu_kernel("layer_norm_backward", row_norm_backward_kernel<false>);
  set_cpu_kernel("rms_norm_backward", row_norm_backward_kernel<true>);
  set_cpu_kernel("batch_norm", batch_norm_kernel);
  set_cpu_kernel("batch_norm_inference", batch_norm_inference_kernel);
  set_cpu_kernel("batch_norm_update_stats_", batch_norm_update_stats_kernel);
  set_cpu_kernel("batch_norm_backward", batch_norm_backward_kernel);
  set_cpu_kernel("group_norm", group_norm_kernel);
  set_cpu_kernel("group_norm_backward", group_norm_backward_kernel);
}

}  // namespace dtr::cpu
