// softmax, log_softmax, cross_entropy, nll_loss, mse_loss and their backward
// kernels as CUDA kernels (cuda/loss.h); semantics follow cpu/loss.cpp.
// One index per lane takes the CPU's operations on that lane in the CPU's
// order (the maximum, then the sum of exp(x - max) in double, then the
// CPU's divide or log) into a per-lane scratch value, and one index per
// element then writes the output from it. A loss's sum over lanes (and
// mse_loss's over elements) runs as on the CPU's parallel_reduce: one index
// per fixed block of the CPU's size writes its partial, and one index adds
// the partials in block order from 0. The targets are checked first, on
// the device, through an error buffer the host reads back (a kernel cannot
// throw). No atomics and no index reads what another of its launch writes,
// so a rerun is bitwise the first run (Note [host emulation of CUDA kernels]).
#include <cstdint>
#include <limits>
#include <type_traits>

#include "cuda/launch.cuh"
#include "cuda/loss.h"
#include "cuda/scratch.h"

namespace dtr::cuda {
namespace {

/// Lanes per partial of a class loss's sum (cpu/loss.cpp's write_loss).
constexpr int64_t kLaneBlock = 4096;
/// Elements per partial of mse_loss's sum (cpu/loss.cpp's mse_loss_kernel).
constexpr int64_t kMseBlock = int64_t{1} << 14;
/// Targets per chunk of the target check's first launch.
constexpr int64_t kTargetChunk = 4096;

/// exp in the compute type, as std::exp's overloads on the CPU (the int64
/// instantiations of compute_dispatch never run).
template <typename C>
DTR_HD C exp_of(C v) {
  if constexpr (std::is_same_v<C, float>) {
    return expf(v);
  } else {
    return C(exp(double(v)));
  }
}

/// Element offset of lane l's first element.
DTR_HD int64_t lane_base(const LaneShape& s, int64_t l) { return (l / s.inner) * s.size * s.inner + l % s.inner; }
/// The lane of element offset i.
DTR_HD int64_t lane_of(const LaneShape& s, int64_t i) { return (i / (s.size * s.inner)) * s.inner + i % s.inner; }
/// The position along its lane of element offset i.
DTR_HD int64_t along_lane(const LaneShape& s, int64_t i) { return (i / s.inner) % s.size; }

/// The largest element of the lane at b (-inf for an empty one), or its
/// last NaN when it holds any, as cpu/loss.cpp's lane_max.
template <typename C>
DTR_HD C lane_max(Input x, int64_t b, const LaneShape& s) {
  C mx = -std::numeric_limits<C>::infinity();
  bool any_nan = false;
  for (int64_t j = 0; j < s.size; ++j) {
    const C v = x.at<C>(b + j * s.inner);
    mx = v > mx ? v : mx;
    any_nan = any_nan || v != v;
  }
  if (any_nan) {
    for (int64_t j = s.size - 1; j >= 0; --j) {
      const C v = x.at<C>(b + j * s.inner);
      if (v != v) return v;
    }
  }
  return mx;
}

/// A lane's maximum and the sum in double of exp(x - max) over it, in order.
template <typename C>
struct LaneExp {
  C max;
  double sum;
  /// log(sum(exp(x))) in double, as cpu/loss.cpp's lane_logsumexp.
  DTR_HD double logsumexp() const { return double(max) + log(sum); }
};

template <typename C>
DTR_HD LaneExp<C> lane_exp(Input x, int64_t b, const LaneShape& s) {
  const C mx = lane_max<C>(x, b, s);
  double sum = 0;
  for (int64_t j = 0; j < s.size; ++j) sum += double(exp_of(x.at<C>(b + j * s.inner) - mx));
  return {mx, sum};
}

/// Out[0] = the partials' sum, added in block order from 0 as
/// parallel_reduce combines them, divided by `divisor` when `mean`.
void finish_sum(std::byte* out, DType dt, const double* parts, int64_t nblocks, bool mean, double divisor,
                const Exec& e) {
  launch(
      e, 1,
      [=] __host__ __device__(int64_t) {
        double total = 0.0;
        for (int64_t b = 0; b < nblocks; ++b) total = total + parts[b];
        store<double>(out, dt, mean ? total / divisor : total);
      },
      "loss_sum");
}

/// The gradient flowing into lane l of a class loss: g[l] for "none",
/// g[0] * scale otherwise (scale 1/count for "mean", 1 for "sum").
template <typename C>
struct LaneGrad {
  Input g;
  bool none;
  double scale;
  DTR_HD double operator()(int64_t l) const { return none ? double(g.at<C>(l)) : double(g.at<C>(0)) * scale; }
};

template <typename C>
LaneGrad<C> lane_grad(const std::byte* g, DType dt, const ClassLoss& s) {
  return {input_of(g, dt), s.reduction == kReduceNone, s.reduction == kReduceMean ? 1.0 / double(s.count) : 1.0};
}

// ---- softmax, log_softmax --------------------------------------------------------------

/// A lane's shift (the maximum; log_softmax: max + log(sum)) and softmax's 1 / sum.
template <typename C>
struct SoftmaxLane {
  C shift;
  C inv;
};

template <typename C>
void softmax_typed(std::byte* y, const std::byte* x, DType dt, const LaneShape& s, bool take_log, const Exec& e) {
  const int64_t lanes = s.outer * s.inner, sz = itemsize(dt);
  const Input xs = input_of(x, dt);
  Scratch scratch(e, size_t(lanes) * sizeof(SoftmaxLane<C>));
  SoftmaxLane<C>* st = scratch.as<SoftmaxLane<C>>();
  launch(
      e, lanes,
      [=] __host__ __device__(int64_t l) {
        const LaneExp<C> le = lane_exp<C>(xs, lane_base(s, l), s);
        st[l] = take_log ? SoftmaxLane<C>{C(le.logsumexp()), C(0)} : SoftmaxLane<C>{le.max, C(1.0 / le.sum)};
      },
      take_log ? "log_softmax_lanes" : "softmax_lanes");
  launch(
      e, s.outer * s.size * s.inner,
      [=] __host__ __device__(int64_t i) {
        const SoftmaxLane<C> q = st[lane_of(s, i)];
        const C v = xs.at<C>(i);
        store<C>(y + i * sz, dt, take_log ? v - q.shift : exp_of(v - q.shift) * q.inv);
      },
      take_log ? "log_softmax" : "softmax");
}

template <typename C>
void softmax_backward_typed(std::byte* gx, const std::byte* g, const std::byte* y, DType dt, const LaneShape& s,
                            bool take_log, const Exec& e) {
  const int64_t lanes = s.outer * s.inner, sz = itemsize(dt);
  const Input gs = input_of(g, dt), ys = input_of(y, dt);
  Scratch scratch(e, size_t(lanes) * sizeof(C));
  C* dots = scratch.as<C>();
  launch(
      e, lanes,
      [=] __host__ __device__(int64_t l) {
        const int64_t b = lane_base(s, l);
        double acc = 0;
        for (int64_t j = 0; j < s.size; ++j) {
          const double gv = double(gs.at<C>(b + j * s.inner));
          acc += take_log ? gv : gv * double(ys.at<C>(b + j * s.inner));
        }
        dots[l] = C(acc);
      },
      take_log ? "log_softmax_backward_lanes" : "softmax_backward_lanes");
  launch(
      e, s.outer * s.size * s.inner,
      [=] __host__ __device__(int64_t i) {
        const C dot = dots[lane_of(s, i)];
        const C gv = gs.at<C>(i), yv = ys.at<C>(i);
        store<C>(gx + i * sz, dt, take_log ? gv - exp_of(yv) * dot : yv * (gv - dot));
      },
      take_log ? "log_softmax_backward" : "softmax_backward");
}

// ---- cross_entropy, nll_loss -----------------------------------------------------------

/// Lane l's loss in double: logsumexp(x) - x[target] (kEntropy) or
/// -x[target]; 0 for an ignored target.
template <typename C, bool kEntropy>
struct LaneLoss {
  Input x;
  const int64_t* t;
  LaneShape s;
  int64_t ignore;
  DTR_HD double operator()(int64_t l) const {
    if (t[l] == ignore) return 0.0;
    const int64_t b = lane_base(s, l);
    const double picked = double(x.at<C>(b + t[l] * s.inner));
    if constexpr (kEntropy) {
      return lane_exp<C>(x, b, s).logsumexp() - picked;
    } else {
      return -picked;
    }
  }
};

template <typename C, bool kEntropy>
void class_loss_typed(std::byte* out, const std::byte* x, const int64_t* t, DType dt, const ClassLoss& s,
                      const Exec& e) {
  const LaneLoss<C, kEntropy> loss{input_of(x, dt), t, s.lanes, s.ignore_index};
  const int64_t lanes = s.lanes.outer * s.lanes.inner, sz = itemsize(dt);
  const char* name = kEntropy ? "cross_entropy" : "nll_loss";
  if (s.reduction == kReduceNone) {
    launch(e, lanes, [=] __host__ __device__(int64_t l) { store<double>(out + l * sz, dt, loss(l)); }, name);
    return;
  }
  const int64_t nblocks = (lanes + kLaneBlock - 1) / kLaneBlock;
  Scratch scratch(e, size_t(lanes + nblocks) * sizeof(double));
  double* losses = scratch.as<double>();
  double* parts = losses + lanes;
  launch(e, lanes, [=] __host__ __device__(int64_t l) { losses[l] = loss(l); }, name);
  launch(
      e, nblocks,
      [=] __host__ __device__(int64_t b) {
        const int64_t end = (b + 1) * kLaneBlock < lanes ? (b + 1) * kLaneBlock : lanes;
        double acc = 0;
        for (int64_t i = b * kLaneBlock; i < end; ++i) acc += losses[i];
        parts[b] = acc;
      },
      "class_loss_partials");
  finish_sum(out, dt, parts, nblocks, s.reduction == kReduceMean, double(s.count), e);
}

template <typename C>
void cross_entropy_backward_typed(std::byte* gx, const std::byte* g, const std::byte* x, const int64_t* t, DType dt,
                                  const ClassLoss& s, const Exec& e) {
  const LaneShape L = s.lanes;
  const int64_t lanes = L.outer * L.inner, sz = itemsize(dt), ignore = s.ignore_index;
  const Input xs = input_of(x, dt);
  const LaneGrad<C> grad = lane_grad<C>(g, dt, s);
  Scratch scratch(e, size_t(lanes) * sizeof(C));
  C* lse = scratch.as<C>();
  launch(
      e, lanes,
      [=] __host__ __device__(int64_t l) {
        lse[l] = t[l] == ignore ? C(0) : C(lane_exp<C>(xs, lane_base(L, l), L).logsumexp());
      },
      "cross_entropy_backward_lanes");
  launch(
      e, L.outer * L.size * L.inner,
      [=] __host__ __device__(int64_t i) {
        const int64_t l = lane_of(L, i);
        if (t[l] == ignore) {
          store<C>(gx + i * sz, dt, C(0));
          return;
        }
        const C gl = C(grad(l));
        const C p = exp_of(xs.at<C>(i) - lse[l]);
        store<C>(gx + i * sz, dt, (p - (along_lane(L, i) == t[l] ? C(1) : C(0))) * gl);
      },
      "cross_entropy_backward");
}

template <typename C>
void nll_loss_backward_typed(std::byte* gx, const std::byte* g, const int64_t* t, DType dt, const ClassLoss& s,
                             const Exec& e) {
  const LaneShape L = s.lanes;
  const int64_t sz = itemsize(dt), ignore = s.ignore_index;
  const LaneGrad<C> grad = lane_grad<C>(g, dt, s);
  launch(
      e, L.outer * L.size * L.inner,
      [=] __host__ __device__(int64_t i) {
        const int64_t l = lane_of(L, i);
        const bool hit = t[l] != ignore && t[l] == along_lane(L, i);
        store<double>(gx + i * sz, dt, hit ? -grad(l) : 0.0);
      },
      "nll_loss_backward");
}

// ---- mse_loss ------------------------------------------------------------------------

template <typename C>
void mse_loss_typed(std::byte* out, const std::byte* a, const std::byte* b, DType dt, int64_t n, int64_t reduction,
                    const Exec& e) {
  const Input as = input_of(a, dt), bs = input_of(b, dt);
  const int64_t sz = itemsize(dt);
  if (reduction == kReduceNone) {
    launch(
        e, n,
        [=] __host__ __device__(int64_t i) {
          const C d = as.at<C>(i) - bs.at<C>(i);
          store<C>(out + i * sz, dt, d * d);
        },
        "mse_loss");
    return;
  }
  const int64_t nblocks = (n + kMseBlock - 1) / kMseBlock;
  Scratch scratch(e, size_t(nblocks) * sizeof(double));
  double* parts = scratch.as<double>();
  launch(
      e, nblocks,
      [=] __host__ __device__(int64_t blk) {
        const int64_t i1 = (blk + 1) * kMseBlock < n ? (blk + 1) * kMseBlock : n;
        // Two interleaved partial sums, as the CPU's block.
        double s0 = 0, s1 = 0;
        int64_t i = blk * kMseBlock;
        for (; i + 2 <= i1; i += 2) {
          const double d0 = double(as.at<C>(i)) - double(bs.at<C>(i));
          const double d1 = double(as.at<C>(i + 1)) - double(bs.at<C>(i + 1));
          s0 += d0 * d0;
          s1 += d1 * d1;
        }
        for (; i < i1; ++i) {
          const double d = double(as.at<C>(i)) - double(bs.at<C>(i));
          s0 += d * d;
        }
        parts[blk] = s0 + s1;
      },
      "mse_loss_partials");
  finish_sum(out, dt, parts, nblocks, reduction == kReduceMean, double(n), e);
}

template <typename C>
void mse_loss_backward_typed(std::byte* gx, const std::byte* g, const std::byte* a, const std::byte* b, DType dt,
                             int64_t n, int64_t reduction, const Exec& e) {
  const Input gs = input_of(g, dt), as = input_of(a, dt), bs = input_of(b, dt);
  const int64_t sz = itemsize(dt);
  const C norm = C(reduction == kReduceMean ? 2.0 / double(n) : 2.0);
  const bool none = reduction == kReduceNone;
  launch(
      e, n,
      [=] __host__ __device__(int64_t i) {
        const C gv = gs.at<C>(none ? i : 0);
        store<C>(gx + i * sz, dt, norm * (as.at<C>(i) - bs.at<C>(i)) * gv);
      },
      "mse_loss_backward");
}

}  // namespace

void launch_softmax(std::byte* y, const std::byte* x, DType dt, const LaneShape& s, bool log, const Exec& e) {
  compute_dispatch(dt, [&](auto tag) { softmax_typed<decltype(tag)>(y, x, dt, s, log, e); });
}

void launch_softmax_backward(std::byte* gx, const std::byte* g, const std::byte* y, DType dt, const LaneShape& s,
                             bool log, const Exec& e) {
  compute_dispatch(dt, [&](auto tag) { softmax_backward_typed<decltype(tag)>(gx, g, y, dt, s, log, e); });
}

TargetCheck check_targets(const int64_t* target, int64_t n, int64_t classes, int64_t ignore_index, const Exec& e) {
  TargetCheck r;
  if (n <= 0) return r;
  const int64_t chunks = (n + kTargetChunk - 1) / kTargetChunk;
  // Per chunk: its first bad position (or -1), that target, its count; then the result.
  Scratch s(e, size_t(3 * chunks + 3) * sizeof(int64_t));
  int64_t* part = s.as<int64_t>();
  int64_t* result = part + 3 * chunks;
  launch(
      e, chunks,
      [=] __host__ __device__(int64_t c) {
        const int64_t end = (c + 1) * kTargetChunk < n ? (c + 1) * kTargetChunk : n;
        int64_t* p = part + 3 * c;
        p[0] = -1;
        p[1] = 0;
        int64_t count = 0;
        for (int64_t i = c * kTargetChunk; i < end; ++i) {
          const int64_t v = target[i];
          if (v == ignore_index) continue;
          if ((v < 0 || v >= classes) && p[0] < 0) {
            p[0] = i;
            p[1] = v;
          }
          ++count;
        }
        p[2] = count;
      },
      "target_check");
  launch(
      e, 1,
      [=] __host__ __device__(int64_t) {
        result[0] = -1;
        result[1] = 0;
        result[2] = 0;
        for (int64_t c = 0; c < chunks; ++c) {
          if (result[0] < 0 && part[3 * c] >= 0) {
            result[0] = part[3 * c];
            result[1] = part[3 * c + 1];
          }
          result[2] += part[3 * c + 2];
        }
      },
      "target_check_combine");
  int64_t host[3];
  read_back(host, result, sizeof host, e);
  r.position = host[0];
  r.value = host[1];
  r.count = host[2];
  return r;
}

void launch_cross_entropy(std::byte* out, const std::byte* x, const int64_t* target, DType dt, const ClassLoss& s,
                          const Exec& e) {
  compute_dispatch(dt, [&](auto tag) { class_loss_typed<decltype(tag), true>(out, x, target, dt, s, e); });
}

void launch_cross_entropy_backward(std::byte* gx, const std::byte* g, const std::byte* x, const int64_t* target,
                                   DType dt, const ClassLoss& s, const Exec& e) {
  compute_dispatch(dt, [&](auto tag) { cross_entropy_backward_typed<decltype(tag)>(gx, g, x, target, dt, s, e); });
}

void launch_nll_loss(std::byte* out, const std::byte* x, const int64_t* target, DType dt, const ClassLoss& s,
                     const Exec& e) {
  compute_dispatch(dt, [&](auto tag) { class_loss_typed<decltype(tag), false>(out, x, target, dt, s, e); });
}

void launch_nll_loss_backward(std::byte* gx, const std::byte* g, const int64_t* target, DType dt, const ClassLoss& s,
                              const Exec& e) {
  compute_dispatch(dt, [&](auto tag) { nll_loss_backward_typed<decltype(tag)>(gx, g, target, dt, s, e); });
}

void launch_mse_loss(std::byte* out, const std::byte* a, const std::byte* b, DType dt, int64_t n, int64_t reduction,
                     const Exec& e) {
  compute_dispatch(dt, [&](auto tag) { mse_loss_typed<decltype(tag)>(out, a, b, dt, n, reduction, e); });
}

void launch_mse_loss_backward(std::byte* gx, const std::byte* g, const std::byte* a, const std::byte* b, DType dt,
                              int64_t n, int64_t reduction, const Exec& e) {
  if (n == 0) return;
  compute_dispatch(dt, [&](auto tag) { mse_loss_backward_typed<decltype(tag)>(gx, g, a, b, dt, n, reduction, e); });
}

}  // namespace dtr::cuda
