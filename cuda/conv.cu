// The conv family's own kernels (cuda/conv.h): pooling forwards with one
// index per output element, backwards with one index per input element
// gathering from the windows that cover it, in increasing (oh, ow) order,
// the order in which cpu/conv.cpp's serial scatter adds them.
#include <limits>

#include "cuda/conv.h"
#include "cuda/launch.cuh"

namespace dtr::cuda {
namespace {

// Adaptive window [start, end) of output o among `out` over `in`: floor(o *
// in / out) to ceil((o + 1) * in / out), as in PyTorch.
DTR_HD int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
DTR_HD int64_t adaptive_end(int64_t o, int64_t in, int64_t out) { return ((o + 1) * in + out - 1) / out; }

// The window of output (oh, ow) clipped to the input: rows [h0, h1), columns [w0, w1).
struct Window {
  int64_t h0, h1, w0, w1;
};
DTR_HD Window window_of(const PoolGeometry& g, PoolKind kind, int64_t oh, int64_t ow) {
  if (kind == PoolKind::kAdaptiveAvg) {
    return {adaptive_start(oh, g.H, g.Ho), adaptive_end(oh, g.H, g.Ho), adaptive_start(ow, g.W, g.Wo),
            adaptive_end(ow, g.W, g.Wo)};
  }
  const int64_t hs = oh * g.sH - g.pH, ws = ow * g.sW - g.pW;
  return {hs > 0 ? hs : 0, hs + g.kH < g.H ? hs + g.kH : g.H, ws > 0 ? ws : 0, ws + g.kW < g.W ? ws + g.kW : g.W};
}

// Outputs [lo, hi) along one dim whose window may cover input i: for a
// strided window, o * s - p <= i < o * s - p + k; for adaptive windows,
// floor(i * out / in) <= o < ceil((i + 1) * out / in). Callers still test
// the window itself.
DTR_HD void covering(int64_t i, int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, bool adaptive,
                     int64_t& lo, int64_t& hi) {
  if (adaptive) {
    lo = (i * out) / in;
    hi = ((i + 1) * out + in - 1) / in;
  } else {
    const int64_t num = i + p - k + 1;  // o >= ceil(num / s)
    lo = num <= 0 ? 0 : (num + s - 1) / s;
    hi = (i + p) / s + 1;
  }
  if (hi > out) hi = out;
}

template <typename C>
struct PoolForward {
  PoolGeometry g;
  PoolKind kind;
  DType dt;
  const std::byte* x;
  std::byte* y;
  int64_t* indices;
  DTR_HD void operator()(int64_t i) const {
    const int64_t isz = itemsize(dt);
    const int64_t p = i / (g.Ho * g.Wo), oh = (i / g.Wo) % g.Ho, ow = i % g.Wo;
    const std::byte* plane = x + p * g.H * g.W * isz;
    const Window w = window_of(g, kind, oh, ow);
    if (kind == PoolKind::kMax) {
      C best = -std::numeric_limits<C>::infinity();
      int64_t best_i = w.h0 * g.W + w.w0;
      for (int64_t ih = w.h0; ih < w.h1; ++ih) {
        for (int64_t iw = w.w0; iw < w.w1; ++iw) {
          const C v = load<C>(plane + (ih * g.W + iw) * isz, dt);
          if (v > best || v != v) {
            best = v;
            best_i = ih * g.W + iw;
          }
        }
      }
      store<C>(y + i * isz, dt, best);
      indices[i] = best_i;
      return;
    }
    C acc = C(0);
    for (int64_t ih = w.h0; ih < w.h1; ++ih)
      for (int64_t iw = w.w0; iw < w.w1; ++iw) acc += load<C>(plane + (ih * g.W + iw) * isz, dt);
    const C divisor = kind == PoolKind::kAvg ? C(g.kH * g.kW) : C((w.h1 - w.h0) * (w.w1 - w.w0));
    store<C>(y + i * isz, dt, acc / divisor);
  }
};

template <typename C>
struct PoolBackward {
  PoolGeometry g;
  PoolKind kind;
  DType dt;
  const std::byte* gy;
  const int64_t* indices;
  std::byte* gx;
  DTR_HD void operator()(int64_t i) const {
    const int64_t isz = itemsize(dt);
    const int64_t p = i / (g.H * g.W), ih = (i / g.W) % g.H, iw = i % g.W;
    const int64_t self = ih * g.W + iw;
    const bool adaptive = kind == PoolKind::kAdaptiveAvg;
    int64_t oh0, oh1, ow0, ow1;
    covering(ih, g.H, g.Ho, g.kH, g.sH, g.pH, adaptive, oh0, oh1);
    covering(iw, g.W, g.Wo, g.kW, g.sW, g.pW, adaptive, ow0, ow1);
    const std::byte* gplane = gy + p * g.Ho * g.Wo * isz;
    const int64_t* iplane = indices != nullptr ? indices + p * g.Ho * g.Wo : nullptr;
    C acc = C(0);
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const int64_t o = oh * g.Wo + ow;
        const Window w = window_of(g, kind, oh, ow);
        if (ih < w.h0 || ih >= w.h1 || iw < w.w0 || iw >= w.w1) continue;
        if (kind == PoolKind::kMax) {
          if (iplane[o] == self) acc += load<C>(gplane + o * isz, dt);
          continue;
        }
        const C divisor = kind == PoolKind::kAvg ? C(g.kH * g.kW) : C((w.h1 - w.h0) * (w.w1 - w.w0));
        acc += load<C>(gplane + o * isz, dt) / divisor;
      }
    }
    store<C>(gx + i * isz, dt, acc);
  }
};

template <typename C>
struct AddChannelBias {
  std::byte* y;
  const std::byte* bias;
  DType dt;
  int64_t C_, P;
  DTR_HD void operator()(int64_t i) const {
    const int64_t isz = itemsize(dt);
    const int64_t c = (i / P) % C_;
    store<C>(y + i * isz, dt, load<C>(y + i * isz, dt) + load<C>(bias + c * isz, dt));
  }
};

}  // namespace

void launch_pool_forward(PoolKind kind, const PoolGeometry& g, DType dt, const std::byte* x, std::byte* y,
                         int64_t* indices, const Exec& e) {
  const int64_t n = g.planes * g.Ho * g.Wo;
  if (dt == DType::kFloat64) launch(e, n, PoolForward<double>{g, kind, dt, x, y, indices}, "pool_forward");
  else launch(e, n, PoolForward<float>{g, kind, dt, x, y, indices}, "pool_forward");
}

void launch_pool_backward(PoolKind kind, const PoolGeometry& g, DType dt, const std::byte* grad_y,
                          const int64_t* indices, std::byte* grad_x, const Exec& e) {
  const int64_t n = g.planes * g.H * g.W;
  if (dt == DType::kFloat64) launch(e, n, PoolBackward<double>{g, kind, dt, grad_y, indices, grad_x}, "pool_backward");
  else launch(e, n, PoolBackward<float>{g, kind, dt, grad_y, indices, grad_x}, "pool_backward");
}

void launch_add_channel_bias(std::byte* y, const std::byte* bias, DType dt, int64_t N, int64_t C, int64_t P,
                             const Exec& e) {
  const int64_t n = N * C * P;
  if (dt == DType::kFloat64) launch(e, n, AddChannelBias<double>{y, bias, dt, C, P}, "add_channel_bias");
  else launch(e, n, AddChannelBias<float>{y, bias, dt, C, P}, "add_channel_bias");
}

}  // namespace dtr::cuda
