// layer_norm, rms_norm, batch_norm, group_norm and their backward kernels as
// CUDA kernels (cuda/norm.h); semantics follow cpu/norm.cpp. Statistics are
// fixed-order sums in double: one index per row (layer_norm, rms_norm,
// group_norm) takes the CPU's own operations in the CPU's order, so its
// values are the CPU's bit for bit under emulation; batch_norm's channels
// are reduced in blocks of kChannelBlock elements whose partial sums a
// later launch adds in block order (one block, the CPU's order, for a
// channel of at most kChannelBlock elements). Backward kernels recompute
// the statistics with the forward's functions, then one index per gradient
// element; the weight and bias gradients are column sums in row order. No
// atomics and no index reads what another writes, so a rerun is bitwise the
// first run (Note [host emulation of CUDA kernels]).
#include <cstdint>

#include "cuda/launch.cuh"
#include "cuda/norm.h"
#include "cuda/scratch.h"

namespace dtr::cuda {
namespace {

/// Elements per block of a batch_norm channel's reduction: a channel of
/// more is split into blocks whose partial sums are added in block order.
/// Depends on nothing but this constant and the shape.
constexpr int64_t kChannelBlock = 4096;

/// Elements of dtype dt at p, read as C.
template <typename C>
struct Elems {
  const std::byte* p;
  DType dt;
  int64_t sz;
  DTR_HD C operator[](int64_t j) const { return load<C>(p + j * sz, dt); }
  DTR_HD Elems from(int64_t k) const { return {p + k * sz, dt, sz}; }
};

/// cpu/accumulate.h's sum_run over x[0, n) in double: four interleaved
/// partial sums, combined as (a0 + a1) + (a2 + a3).
template <typename C>
DTR_HD double sum_run(Elems<C> x, int64_t n) {
  double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    a0 += double(x[j]);
    a1 += double(x[j + 1]);
    a2 += double(x[j + 2]);
    a3 += double(x[j + 3]);
  }
  for (; j < n; ++j) a0 += double(x[j]);
  return (a0 + a1) + (a2 + a3);
}

/// A row's mean and 1/sqrt(var + eps) (rms: mean 0 and 1/sqrt(mean(x^2) + eps)).
template <typename C>
struct RowStats {
  C mean;
  C rstd;
};

/// The statistics of row x[0, n), n > 0, with the operations of
/// cpu/norm.cpp's row_stats_body in its order. Forward and backward both
/// call this, so backward sees the forward's values bitwise.
template <typename C>
DTR_HD RowStats<C> row_stats(Elems<C> x, int64_t n, double eps, bool rms) {
  if (rms) {
    double a0 = 0, a1 = 0;
    int64_t j = 0;
    for (; j + 2 <= n; j += 2) {
      const double v0 = x[j], v1 = x[j + 1];
      a0 += v0 * v0;
      a1 += v1 * v1;
    }
    for (; j < n; ++j) {
      const double v = x[j];
      a0 += v * v;
    }
    return {C(0), C(1.0 / sqrt((a0 + a1) / double(n) + eps))};
  }
  const double mean = sum_run(x, n) / double(n);
  double q0 = 0, q1 = 0;
  int64_t j = 0;
  for (; j + 2 <= n; j += 2) {
    const double d0 = double(x[j]) - mean, d1 = double(x[j + 1]) - mean;
    q0 += d0 * d0;
    q1 += d1 * d1;
  }
  for (; j < n; ++j) {
    const double d = double(x[j]) - mean;
    q0 += d * d;
  }
  return {C(mean), C(1.0 / sqrt((q0 + q1) / double(n) + eps))};
}

// ---- layer_norm, rms_norm ----------------------------------------------------------

template <typename C>
void row_norm_typed(std::byte* y, const std::byte* x, AffineArgs af, DType dt, RowNormShape s, const Exec& e) {
  const int64_t sz = itemsize(dt), n = s.n;
  const double eps = s.eps;
  const bool rms = s.rms;
  Scratch scratch(e, size_t(s.rows) * sizeof(RowStats<C>));
  RowStats<C>* stats = scratch.as<RowStats<C>>();
  launch(
      e, s.rows,
      [=] __host__ __device__(int64_t r) { stats[r] = row_stats(Elems<C>{x + r * n * sz, dt, sz}, n, eps, rms); },
      "row_norm_stats");
  const std::byte* w = af.weight;
  const std::byte* b = af.bias;
  launch(
      e, s.rows * n,
      [=] __host__ __device__(int64_t i) {
        const int64_t j = i % n;
        const RowStats<C> st = stats[i / n];
        // (x - mean) * rstd [* weight] [+ bias], as cpu/norm.cpp's normalize_row.
        C v = (load<C>(x + i * sz, dt) - st.mean) * st.rstd;
        if (w != nullptr) v = v * load<C>(w + j * sz, dt);
        if (b != nullptr) v = v + load<C>(b + j * sz, dt);
        store<C>(y + i * sz, dt, v);
      },
      "row_norm");
}

/// A row's statistics and the means of h = g * weight and h * xhat over it.
template <typename C>
struct RowGrad {
  RowStats<C> st;
  C mean_h;
  C mean_hx;
};

template <typename C>
void row_norm_backward_typed(std::byte* gx, std::byte* gw, std::byte* gb, const std::byte* g, const std::byte* x,
                             const std::byte* w, DType dt, RowNormShape s, const Exec& e) {
  const int64_t sz = itemsize(dt), n = s.n, rows = s.rows;
  const double eps = s.eps;
  const bool rms = s.rms;
  Scratch scratch(e, size_t(rows) * sizeof(RowGrad<C>));
  RowGrad<C>* rg = scratch.as<RowGrad<C>>();
  launch(
      e, rows,
      [=] __host__ __device__(int64_t r) {
        const RowStats<C> st = row_stats(Elems<C>{x + r * n * sz, dt, sz}, n, eps, rms);
        double sum_h = 0, sum_hx = 0;
        for (int64_t j = 0; j < n; ++j) {
          const C xhat = (load<C>(x + (r * n + j) * sz, dt) - st.mean) * st.rstd;
          // Without a weight, g * 1 (which is g, bit for bit), as on the CPU.
          const C h = load<C>(g + (r * n + j) * sz, dt) * (w != nullptr ? load<C>(w + j * sz, dt) : C(1));
          sum_h += double(h);
          sum_hx += double(h) * double(xhat);
        }
        rg[r] = {st, rms ? C(0) : C(sum_h / double(n)), C(sum_hx / double(n))};
      },
      "row_norm_backward_stats");
  launch(
      e, rows * n,
      [=] __host__ __device__(int64_t i) {
        const RowGrad<C> q = rg[i / n];
        const C xhat = (load<C>(x + i * sz, dt) - q.st.mean) * q.st.rstd;
        const C h = load<C>(g + i * sz, dt) * (w != nullptr ? load<C>(w + (i % n) * sz, dt) : C(1));
        store<C>(gx + i * sz, dt, q.st.rstd * (h - q.mean_h - xhat * q.mean_hx));
      },
      "row_norm_backward");
  if (gw == nullptr && gb == nullptr) return;
  // One index per column, adding its rows in order.
  launch(
      e, n,
      [=] __host__ __device__(int64_t j) {
        double acc_w = 0, acc_b = 0;
        for (int64_t r = 0; r < rows; ++r) {
          const RowStats<C> st = rg[r].st;
          const C gv = load<C>(g + (r * n + j) * sz, dt);
          acc_w += double(gv * ((load<C>(x + (r * n + j) * sz, dt) - st.mean) * st.rstd));
          acc_b += double(gv);
        }
        if (gw != nullptr) store<double>(gw + j * sz, dt, acc_w);
        if (gb != nullptr) store<double>(gb + j * sz, dt, acc_b);
      },
      "row_norm_backward_columns");
}

// ---- batch_norm --------------------------------------------------------------------

/// Channel elements are numbered k = n * inner + s (sample n, position s);
/// a block covers [k0, k1). The blocks of a channel and their ranges.
struct ChannelBlocks {
  ChannelShape g;
  int64_t count;    // N * inner
  int64_t nblocks;  // at least 1
  DTR_HD int64_t begin(int64_t b) const { return b * kChannelBlock; }
  DTR_HD int64_t end(int64_t b) const { return count < (b + 1) * kChannelBlock ? count : (b + 1) * kChannelBlock; }
  /// The element offset in x of channel element k of channel ch; *len is
  /// how many contiguous elements follow it in its plane, up to k1.
  DTR_HD int64_t segment(int64_t ch, int64_t k, int64_t k1, int64_t* len) const {
    const int64_t n = k / g.inner, s = k % g.inner;
    *len = g.inner - s < k1 - k ? g.inner - s : k1 - k;
    return (n * g.channels + ch) * g.inner + s;
  }
};

ChannelBlocks blocks_of(const ChannelShape& g) {
  const int64_t count = g.batch * g.inner;
  const int64_t nb = (count + kChannelBlock - 1) / kChannelBlock;
  return {g, count, nb > 1 ? nb : 1};
}

/// Σ v(x[j]) over a segment of n elements in cpu/norm.cpp's order (Note
/// [channel sums]): sixteen interleaved partial sums over whole groups of
/// 16, folded as t[k] = (a[k] + a[k+4]) + (a[k+8] + a[k+12]), the rest added
/// to t[0], then (t0 + t1) + (t2 + t3); v(x) = x, or (x - mean)² when Square.
template <bool Square, typename C>
DTR_HD double plane_sum(Elems<C> x, int64_t n, double mean) {
  double a[16] = {};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int k = 0; k < 16; ++k) {
      const double d = double(x[j + k]) - (Square ? mean : 0.0);
      a[k] += Square ? d * d : double(x[j + k]);
    }
  double t[4];
  for (int k = 0; k < 4; ++k) t[k] = (a[k] + a[k + 4]) + (a[k + 8] + a[k + 12]);
  for (; j < n; ++j) {
    const double d = double(x[j]) - (Square ? mean : 0.0);
    t[0] += Square ? d * d : double(x[j]);
  }
  return (t[0] + t[1]) + (t[2] + t[3]);
}

/// Σ g and Σ g · xhat over a segment of n elements, xhat = (x - mean) *
/// invstd in C: cpu/channel_sums.h's plane_grad_sums, in its order.
template <typename C>
DTR_HD void plane_grad_sums(Elems<C> g, Elems<C> x, int64_t n, C mean, C invstd, double& sum_g, double& sum_gx) {
  double a[16] = {}, b[16] = {};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int k = 0; k < 16; ++k) {
      const C gv = g[j + k];
      a[k] += double(gv);
      b[k] += double(gv) * double((x[j + k] - mean) * invstd);
    }
  double t[4], u[4];
  for (int k = 0; k < 4; ++k) {
    t[k] = (a[k] + a[k + 4]) + (a[k + 8] + a[k + 12]);
    u[k] = (b[k] + b[k + 4]) + (b[k + 8] + b[k + 12]);
  }
  for (; j < n; ++j) {
    const C gv = g[j];
    t[0] += double(gv);
    u[0] += double(gv) * double((x[j] - mean) * invstd);
  }
  sum_g = (t[0] + t[1]) + (t[2] + t[3]);
  sum_gx = (u[0] + u[1]) + (u[2] + u[3]);
}

/// Sum of x over channel elements [k0, k1): per plane segment plane_sum, the
/// segments added in order (with one block, cpu/norm.cpp's channel_moments).
template <typename C>
DTR_HD double block_sum(Elems<C> x, const ChannelBlocks& cb, int64_t ch, int64_t k0, int64_t k1) {
  double acc = 0;
  for (int64_t k = k0, len = 0; k < k1; k += len) {
    const Elems<C> p = x.from(cb.segment(ch, k, k1, &len));
    acc += plane_sum<false>(p, len, 0.0);
  }
  return acc;
}

/// Sum of (x - mean)^2 over channel elements [k0, k1), as block_sum.
template <typename C>
DTR_HD double block_squares(Elems<C> x, const ChannelBlocks& cb, int64_t ch, int64_t k0, int64_t k1, double mean) {
  double acc = 0;
  for (int64_t k = k0, len = 0; k < k1; k += len) {
    const Elems<C> p = x.from(cb.segment(ch, k, k1, &len));
    acc += plane_sum<true>(p, len, mean);
  }
  return acc;
}

/// Sum of part[0, nb) in order, from 0.
DTR_HD double sum_parts(const double* part, int64_t nb) {
  double t = 0;
  for (int64_t b = 0; b < nb; ++b) t += part[b];
  return t;
}

/// Per channel the batch mean and biased variance of x (mean[C], var[C]),
/// two passes in double over blocks; part holds C * nblocks doubles. Forward
/// and backward both call this.
template <typename C>
void channel_moments(const std::byte* x, DType dt, const ChannelBlocks& cb, double* mean, double* var, double* part,
                     const Exec& e) {
  const Elems<C> xs{x, dt, itemsize(dt)};
  const int64_t nb = cb.nblocks, channels = cb.g.channels;
  launch(
      e, channels * nb,
      [=] __host__ __device__(int64_t i) {
        const int64_t ch = i / nb, b = i % nb;
        part[i] = block_sum(xs, cb, ch, cb.begin(b), cb.end(b));
      },
      "batch_norm_sum");
  launch(
      e, channels,
      [=] __host__ __device__(int64_t ch) { mean[ch] = sum_parts(part + ch * nb, nb) / double(cb.count); },
      "batch_norm_mean");
  launch(
      e, channels * nb,
      [=] __host__ __device__(int64_t i) {
        const int64_t ch = i / nb, b = i % nb;
        part[i] = block_squares(xs, cb, ch, cb.begin(b), cb.end(b), mean[ch]);
      },
      "batch_norm_squares");
  launch(
      e, channels,
      [=] __host__ __device__(int64_t ch) { var[ch] = sum_parts(part + ch * nb, nb) / double(cb.count); },
      "batch_norm_var");
}

/// y = x * scale + shift per channel.
template <typename C>
struct ScaleShift {
  C scale;
  C shift;
};

/// scale = invstd * weight, shift = bias - mean * scale (cpu/norm.cpp's normalize_channel).
template <typename C>
DTR_HD ScaleShift<C> scale_shift(C mean, C invstd, const std::byte* w, const std::byte* b, DType dt, int64_t sz,
                                 int64_t ch) {
  const C scale = invstd * (w != nullptr ? load<C>(w + ch * sz, dt) : C(1));
  const C shift = (b != nullptr ? load<C>(b + ch * sz, dt) : C(0)) - mean * scale;
  return {scale, shift};
}

template <typename C>
void normalize_channels(std::byte* y, const std::byte* x, DType dt, const ChannelShape& g, const ScaleShift<C>* ss,
                        const Exec& e) {
  const int64_t sz = itemsize(dt), inner = g.inner, channels = g.channels;
  launch(
      e, g.batch * channels * inner,
      [=] __host__ __device__(int64_t i) {
        const ScaleShift<C> t = ss[(i / inner) % channels];
        store<C>(y + i * sz, dt, load<C>(x + i * sz, dt) * t.scale + t.shift);
      },
      "batch_norm_normalize");
}

template <typename C>
void batch_norm_typed(std::byte* y, std::byte* mean_out, std::byte* var_out, DType stat_dt, const std::byte* x,
                      AffineArgs af, DType dt, const ChannelShape& g, double eps, const Exec& e) {
  const ChannelBlocks cb = blocks_of(g);
  const int64_t channels = g.channels, sz = itemsize(dt), stat_sz = itemsize(stat_dt);
  Scratch s(e, size_t(channels * (2 + cb.nblocks)) * sizeof(double) + size_t(channels) * sizeof(ScaleShift<C>));
  double* mean = s.as<double>();
  double* var = mean + channels;
  double* part = var + channels;
  ScaleShift<C>* ss = reinterpret_cast<ScaleShift<C>*>(part + channels * cb.nblocks);
  channel_moments<C>(x, dt, cb, mean, var, part, e);
  const std::byte* w = af.weight;
  const std::byte* b = af.bias;
  launch(
      e, channels,
      [=] __host__ __device__(int64_t ch) {
        ss[ch] = scale_shift<C>(C(mean[ch]), C(1.0 / sqrt(var[ch] + eps)), w, b, dt, sz, ch);
        store<double>(mean_out + ch * stat_sz, stat_dt, mean[ch]);
        store<double>(var_out + ch * stat_sz, stat_dt, var[ch]);
      },
      "batch_norm_affine");
  normalize_channels<C>(y, x, dt, g, ss, e);
}

template <typename C>
void batch_norm_inference_typed(std::byte* y, const std::byte* x, const std::byte* rm, const std::byte* rv,
                                AffineArgs af, DType dt, const ChannelShape& g, double eps, const Exec& e) {
  const int64_t sz = itemsize(dt);
  Scratch s(e, size_t(g.channels) * sizeof(ScaleShift<C>));
  ScaleShift<C>* ss = s.as<ScaleShift<C>>();
  const std::byte* w = af.weight;
  const std::byte* b = af.bias;
  launch(
      e, g.channels,
      [=] __host__ __device__(int64_t ch) {
        const C invstd = C(1.0 / sqrt(double(load<C>(rv + ch * sz, dt)) + eps));
        ss[ch] = scale_shift<C>(load<C>(rm + ch * sz, dt), invstd, w, b, dt, sz, ch);
      },
      "batch_norm_inference_affine");
  normalize_channels<C>(y, x, dt, g, ss, e);
}

/// A channel's statistics in C and the coefficients of its gradient.
template <typename C>
struct ChannelGrad {
  C mean, invstd, weight, mean_g, mean_gx;
};

template <typename C>
void batch_norm_backward_typed(std::byte* gx, std::byte* gw, std::byte* gb, const std::byte* g, const std::byte* x,
                               const std::byte* rm, const std::byte* rv, const std::byte* w, DType dt,
                               const ChannelShape& shape, double eps, const Exec& e) {
  const ChannelBlocks cb = blocks_of(shape);
  const int64_t channels = shape.channels, nb = cb.nblocks, sz = itemsize(dt), inner = shape.inner;
  const bool training = rm == nullptr;
  Scratch s(e, size_t(channels * (2 + 2 * nb)) * sizeof(double) + size_t(channels) * sizeof(ChannelGrad<C>));
  double* mean = s.as<double>();
  double* var = mean + channels;
  double* part = var + channels;  // sums of g, then sums of g * xhat: 2 * channels * nb
  ChannelGrad<C>* cg = reinterpret_cast<ChannelGrad<C>*>(part + 2 * channels * nb);
  if (training) channel_moments<C>(x, dt, cb, mean, var, part, e);
  launch(
      e, channels,
      [=] __host__ __device__(int64_t ch) {
        double m, invstd;
        if (training) {
          m = mean[ch];
          invstd = 1.0 / sqrt(var[ch] + eps);
        } else {
          m = double(load<C>(rm + ch * sz, dt));
          invstd = 1.0 / sqrt(double(load<C>(rv + ch * sz, dt)) + eps);
        }
        cg[ch].mean = C(m);
        cg[ch].invstd = C(invstd);
      },
      "batch_norm_backward_stats");
  const Elems<C> gs{g, dt, sz}, xs{x, dt, sz};
  launch(
      e, channels * nb,
      [=] __host__ __device__(int64_t i) {
        const int64_t ch = i / nb, b = i % nb, k1 = cb.end(b);
        const C m = cg[ch].mean, invstd = cg[ch].invstd;
        double sum_g = 0, sum_gx = 0;
        for (int64_t k = cb.begin(b), len = 0; k < k1; k += len) {
          const int64_t off = cb.segment(ch, k, k1, &len);
          double pg, pgx;
          plane_grad_sums(gs.from(off), xs.from(off), len, m, invstd, pg, pgx);
          sum_g += pg;
          sum_gx += pgx;
        }
        part[i] = sum_g;
        part[channels * nb + i] = sum_gx;
      },
      "batch_norm_backward_sums");
  launch(
      e, channels,
      [=] __host__ __device__(int64_t ch) {
        const double sum_g = sum_parts(part + ch * nb, nb);
        const double sum_gx = sum_parts(part + channels * nb + ch * nb, nb);
        ChannelGrad<C>& q = cg[ch];
        q.weight = w != nullptr ? load<C>(w + ch * sz, dt) : C(1);
        q.mean_g = training ? C(sum_g / double(cb.count)) : C(0);
        q.mean_gx = training ? C(sum_gx / double(cb.count)) : C(0);
        if (gw != nullptr) store<double>(gw + ch * sz, dt, sum_gx);
        if (gb != nullptr) store<double>(gb + ch * sz, dt, sum_g);
      },
      "batch_norm_backward_coefficients");
  launch(
      e, shape.batch * channels * inner,
      [=] __host__ __device__(int64_t i) {
        const ChannelGrad<C> q = cg[(i / inner) % channels];
        const C xhat = (xs[i] - q.mean) * q.invstd;
        store<C>(gx + i * sz, dt, q.weight * q.invstd * (gs[i] - q.mean_g - xhat * q.mean_gx));
      },
      "batch_norm_backward");
}

// ---- group_norm --------------------------------------------------------------------

template <typename C>
void group_norm_typed(std::byte* y, const std::byte* x, AffineArgs af, DType dt, const GroupShape& gs, double eps,
                      const Exec& e) {
  const int64_t sz = itemsize(dt), S = gs.spatial, G = gs.groups, cg = gs.channels / gs.groups, n = cg * S;
  const int64_t rows = gs.batch * G;
  if (n == 0) return;
  Scratch scratch(e, size_t(rows) * sizeof(RowStats<C>));
  RowStats<C>* stats = scratch.as<RowStats<C>>();
  launch(
      e, rows,
      [=] __host__ __device__(int64_t r) { stats[r] = row_stats(Elems<C>{x + r * n * sz, dt, sz}, n, eps, false); },
      "group_norm_stats");
  const std::byte* w = af.weight;
  const std::byte* b = af.bias;
  launch(
      e, rows * n,
      [=] __host__ __device__(int64_t i) {
        const int64_t r = i / n, ch = (r % G) * cg + (i % n) / S;
        const RowStats<C> st = stats[r];
        const C wv = w != nullptr ? load<C>(w + ch * sz, dt) : C(1);
        const C bv = b != nullptr ? load<C>(b + ch * sz, dt) : C(0);
        store<C>(y + i * sz, dt, (load<C>(x + i * sz, dt) - st.mean) * st.rstd * wv + bv);
      },
      "group_norm");
}

/// An (n, g) row's statistics and the means of h = g * weight and h * xhat, in double.
struct GroupGrad {
  double mean, rstd, mean_h, mean_hx;
};

template <typename C>
void group_norm_backward_typed(std::byte* gx, std::byte* gw, std::byte* gb, const std::byte* g, const std::byte* x,
                               const std::byte* w, DType dt, const GroupShape& gs, double eps, const Exec& e) {
  const int64_t sz = itemsize(dt), S = gs.spatial, G = gs.groups, channels = gs.channels, batch = gs.batch;
  const int64_t cg = channels / G, n = cg * S, rows = batch * G;
  // Per (n, c): the sums of g * xhat and of g over its S elements; per row its GroupGrad.
  Scratch scratch(e, size_t(2 * batch * channels) * sizeof(double) + size_t(rows) * sizeof(GroupGrad));
  double* dw = scratch.as<double>();
  double* db = dw + batch * channels;
  GroupGrad* rg = reinterpret_cast<GroupGrad*>(db + batch * channels);
  const Elems<C> gv{g, dt, sz}, xv{x, dt, sz};
  if (n > 0) {
    launch(
        e, rows,
        [=] __host__ __device__(int64_t r) {
          const RowStats<C> st = row_stats(xv.from(r * n), n, eps, false);
          const double mean = double(st.mean), rstd = double(st.rstd);
          const int64_t ch0 = (r % G) * cg, nn = r / G;
          double sum_h = 0, sum_hx = 0;
          for (int64_t k = 0; k < cg; ++k) {
            const double wk = w != nullptr ? double(load<C>(w + (ch0 + k) * sz, dt)) : 1.0;
            double sg = 0, sgx = 0;
            for (int64_t j = 0; j < S; ++j) {
              const int64_t i = r * n + k * S + j;
              const double gj = double(gv[i]);
              sg += gj;
              sgx += gj * ((double(xv[i]) - mean) * rstd);
            }
            dw[nn * channels + ch0 + k] = sgx;
            db[nn * channels + ch0 + k] = sg;
            sum_h += wk * sg;
            sum_hx += wk * sgx;
          }
          rg[r] = {mean, rstd, sum_h / double(n), sum_hx / double(n)};
        },
        "group_norm_backward_stats");
    launch(
        e, rows * n,
        [=] __host__ __device__(int64_t i) {
          const int64_t r = i / n, ch = (r % G) * cg + (i % n) / S;
          const GroupGrad q = rg[r];
          const double wk = w != nullptr ? double(load<C>(w + ch * sz, dt)) : 1.0;
          const double xh = (double(xv[i]) - q.mean) * q.rstd;
          store<C>(gx + i * sz, dt, C(q.rstd * (double(gv[i]) * wk - q.mean_h - xh * q.mean_hx)));
        },
        "group_norm_backward");
  }
  if (gw == nullptr && gb == nullptr) return;
  // Per channel the (n, c) sums added over n in order (zero without rows).
  const bool have_rows = n > 0;
  launch(
      e, channels,
      [=] __host__ __device__(int64_t ch) {
        double acc_w = 0, acc_b = 0;
        for (int64_t k = 0; have_rows && k < batch; ++k) {
          acc_w += dw[k * channels + ch];
          acc_b += db[k * channels + ch];
        }
        if (gw != nullptr) store<C>(gw + ch * sz, dt, C(acc_w));
        if (gb != nullptr) store<C>(gb + ch * sz, dt, C(acc_b));
      },
      "group_norm_backward_columns");
}

}  // namespace

void launch_row_norm(std::byte* y, const std::byte* x, AffineArgs af, DType dt, const RowNormShape& s,
                     const Exec& e) {
  if (s.rows * s.n == 0) return;
  compute_dispatch(dt, [&](auto tag) { row_norm_typed<decltype(tag)>(y, x, af, dt, s, e); });
}

void launch_row_norm_backward(std::byte* gx, std::byte* gweight, std::byte* gbias, const std::byte* g,
                              const std::byte* x, const std::byte* weight, DType dt, const RowNormShape& s,
                              const Exec& e) {
  compute_dispatch(dt, [&](auto tag) {
    row_norm_backward_typed<decltype(tag)>(gx, gweight, gbias, g, x, weight, dt, s, e);
  });
}

void launch_batch_norm(std::byte* y, std::byte* mean, std::byte* var, DType stat_dt, const std::byte* x,
                       AffineArgs af, DType dt, const ChannelShape& s, double eps, const Exec& e) {
  if (s.channels == 0) return;
  compute_dispatch(dt, [&](auto tag) { batch_norm_typed<decltype(tag)>(y, mean, var, stat_dt, x, af, dt, s, eps, e); });
}

void launch_batch_norm_inference(std::byte* y, const std::byte* x, const std::byte* running_mean,
                                 const std::byte* running_var, AffineArgs af, DType dt, const ChannelShape& s,
                                 double eps, const Exec& e) {
  if (s.channels == 0) return;
  compute_dispatch(dt, [&](auto tag) {
    batch_norm_inference_typed<decltype(tag)>(y, x, running_mean, running_var, af, dt, s, eps, e);
  });
}

void launch_batch_norm_update_stats(std::byte* running, DType running_dt, int64_t running_stride,
                                    const std::byte* stat, DType stat_dt, int64_t stat_stride, int64_t n,
                                    double momentum, double scale, const Exec& e) {
  const int64_t rstep = running_stride * itemsize(running_dt), sstep = stat_stride * itemsize(stat_dt);
  launch(
      e, n,
      [=] __host__ __device__(int64_t i) {
        std::byte* r = running + i * rstep;
        const double s = load<double>(stat + i * sstep, stat_dt);
        store<double>(r, running_dt, momentum * (s * scale) + (1.0 - momentum) * load<double>(r, running_dt));
      },
      "batch_norm_update_stats");
}

void launch_batch_norm_backward(std::byte* gx, std::byte* gweight, std::byte* gbias, const std::byte* g,
                                const std::byte* x, const std::byte* running_mean, const std::byte* running_var,
                                const std::byte* weight, DType dt, const ChannelShape& s, double eps,
                                const Exec& e) {
  if (s.channels == 0) return;
  compute_dispatch(dt, [&](auto tag) {
    batch_norm_backward_typed<decltype(tag)>(gx, gweight, gbias, g, x, running_mean, running_var, weight, dt, s,
                                             eps, e);
  });
}

void launch_group_norm(std::byte* y, const std::byte* x, AffineArgs af, DType dt, const GroupShape& s, double eps,
                       const Exec& e) {
  compute_dispatch(dt, [&](auto tag) { group_norm_typed<decltype(tag)>(y, x, af, dt, s, eps, e); });
}

void launch_group_norm_backward(std::byte* gx, std::byte* gweight, std::byte* gbias, const std::byte* g,
                                const std::byte* x, const std::byte* weight, DType dt, const GroupShape& s,
                                double eps, const Exec& e) {
  if (s.channels == 0) return;
  compute_dispatch(dt, [&](auto tag) {
    group_norm_backward_typed<decltype(tag)>(gx, gweight, gbias, g, x, weight, dt, s, eps, e);
  });
}

}  // namespace dtr::cuda
