// Kernels of padding and resampling: constant_pad_nd (any dtype, copied as
// bytes), reflection_pad (last 1 or 2 dims), upsample_nearest2d and
// upsample_bilinear2d, and their gradients. Index rules follow PyTorch's CPU
// kernels (aten/src/ATen/native/UpSample.h). Every gradient scatters one
// (image, channel) plane serially in output order, so sums are formed in a
// fixed order (Note [determinism] in cpu/conv.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu/kernels.h"
#include "cpu/linalg.h"

namespace dtr::cpu {
namespace {

// ---- constant_pad_nd ----------------------------------------------------------------
// inputs: x (*); outputs: y (*) with y.shape[d] = x.shape[d] + before + after.
// Rows of the last dim: a row whose index lies outside x in some dim is all
// fill; otherwise the valid middle is copied and the ends filled.
void constant_pad_kernel(const KernelContext& c) {
  const TensorArg &x = c.inputs[0], &y = c.outputs[0];
  const int64_t isz = itemsize(y.dtype), r = int64_t(y.shape.size());
  std::byte fill[16] = {};
  if (c.attrs.has("int_value") && !is_floating(y.dtype)) {
    store_from_int(fill, y.dtype, c.attrs.i("int_value"));
  } else {
    store_from_double(fill, y.dtype, c.attrs.f("value"));
  }
  if (y.numel() == 0) return;
  if (r == 0) {
    std::memcpy(y.data, x.data, size_t(isz));
    return;
  }
  const Shape& pad = c.attrs.ints("pad");
  Shape before(size_t(r), 0);
  for (size_t i = 0; i < pad.size() / 2; ++i) before[size_t(r) - 1 - i] = pad[2 * i];
  const int64_t Wy = y.shape.back(), Wx = x.shape.back(), lead = before.back();
  const int64_t rows = y.numel() / Wy;
  // The copied columns [lo, hi) of a row: y column j reads x column j - lead.
  const int64_t lo = std::clamp<int64_t>(lead, 0, Wy), hi = std::clamp<int64_t>(lead + Wx, lo, Wy);
  auto fill_range = [&](std::byte* p, int64_t n) {
    for (int64_t k = 0; k < n; ++k) std::memcpy(p + k * isz, fill, size_t(isz));
  };
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(Wy, 1)), [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      std::byte* dst = y.data + row * Wy * isz;
      // Decompose the row index over dims [0, r - 1), innermost first.
      int64_t rem = row, src_row = 0, stride = 1;
      bool inside = true;
      for (int64_t d = r - 2; d >= 0; --d) {
        const int64_t idx = rem % y.shape[size_t(d)] - before[size_t(d)];
        rem /= y.shape[size_t(d)];
        if (idx < 0 || idx >= x.shape[size_t(d)]) inside = false;
        src_row += idx * stride;
        stride *= x.shape[size_t(d)];
      }
      if (!inside || hi <= lo) {
        fill_range(dst, Wy);
        continue;
      }
      fill_range(dst, lo);
      std::memcpy(dst + lo * isz, x.data + (src_row * Wx + lo - lead) * isz, size_t((hi - lo) * isz));
      fill_range(dst + hi * isz, Wy - hi);
    }
  });
}

// ---- planes -------------------------------------------------------------------------
// The padded/resampled dims are the last two (H = 1 for 1-D reflect padding);
// the leading dims are independent planes.
struct Planes {
  int64_t count, H, W, Ho, Wo;
};

Planes planes_of(IntList in, IntList out, int64_t spatial) {
  const size_t r = in.size();
  const int64_t H = spatial == 2 ? in[r - 2] : 1, Ho = spatial == 2 ? out[r - 2] : 1;
  int64_t count = 1;
  for (size_t d = 0; d + size_t(spatial) < r; ++d) count *= in[d];
  return {count, H, in[r - 1], Ho, out[r - 1]};
}

template <typename F>
void for_each_plane(const Planes& g, F&& f) {
  const int64_t per_plane = std::max<int64_t>(g.Ho * g.Wo, 1);
  parallel_for(g.count, std::max<int64_t>(1, 16384 / per_plane), [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) f(p);
  });
}

// ---- reflection_pad -------------------------------------------------------------------
// Output index o reads input index reflect(o - before): -i below 0,
// 2 (n - 1) - i past the end (the edge is not repeated).
inline int64_t reflect_index(int64_t o, int64_t before, int64_t n) {
  const int64_t i = o - before;
  return i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i;
}

// ---- index maps: reflection_pad, upsample_nearest2d --------------------------------
// Both read y[oh, ow] = x[rows[oh], cols[ow]] for per-dim source indices;
// the gradient adds grad_y back in output order.
struct IndexMap {
  std::vector<int64_t> rows, cols;
};

template <typename F>
std::vector<int64_t> indices(int64_t out, F&& source) {
  std::vector<int64_t> idx(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) idx[size_t(o)] = source(o);
  return idx;
}

IndexMap reflect_map(const Planes& g, const Attrs& a) {
  const Shape& p = a.ints("pad");
  const int64_t left = p[0], top = p.size() == 4 ? p[2] : 0;
  return {indices(g.Ho, [&](int64_t o) { return reflect_index(o, top, g.H); }),
          indices(g.Wo, [&](int64_t o) { return reflect_index(o, left, g.W); })};
}

// PyTorch's nearest_idx: the identity and exact doubling are special cases;
// otherwise min(floor(o * scale), in - 1) in float32, with scale
// 1 / scale_factor when the caller gave one, else in / out.
inline int64_t nearest_index(int64_t o, int64_t in, int64_t out, double scale_factor) {
  if (out == in) return o;
  if (out == 2 * in) return o >> 1;
  const float scale = scale_factor > 0 ? float(1.0 / scale_factor) : float(in) / float(out);
  return std::min<int64_t>(int64_t(std::floor(float(o) * scale)), in - 1);
}

IndexMap nearest_map(const Planes& g, const Attrs& a) {
  const double sh = a.f("scale_h"), sw = a.f("scale_w");
  return {indices(g.Ho, [&](int64_t o) { return nearest_index(o, g.H, g.Ho, sh); }),
          indices(g.Wo, [&](int64_t o) { return nearest_index(o, g.W, g.Wo, sw); })};
}

// The last `spatial` dims of the input (forward) or output (gradient) are the
// mapped ones: reflect padding of 2 values maps the last dim only.
int64_t mapped_dims(const Attrs& a) { return a.has("pad") ? int64_t(a.ints("pad").size()) / 2 : 2; }

// inputs: x; outputs: y.
template <typename T, IndexMap (*Map)(const Planes&, const Attrs&)>
void gather_forward(const KernelContext& c) {
  const Planes g = planes_of(c.inputs[0].shape, c.outputs[0].shape, mapped_dims(c.attrs));
  const IndexMap m = Map(g, c.attrs);
  const T* X = c.inputs[0].ptr<T>();
  T* Y = c.outputs[0].ptr<T>();
  for_each_plane(g, [&](int64_t plane) {
    const T* x = X + plane * g.H * g.W;
    T* y = Y + plane * g.Ho * g.Wo;
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      const T* row = x + m.rows[size_t(oh)] * g.W;
      for (int64_t ow = 0; ow < g.Wo; ++ow) y[oh * g.Wo + ow] = row[m.cols[size_t(ow)]];
    }
  });
}

// inputs: grad_y; outputs: grad_x (input_size).
template <typename T, IndexMap (*Map)(const Planes&, const Attrs&)>
void gather_backward(const KernelContext& c) {
  const Planes g = planes_of(c.outputs[0].shape, c.inputs[0].shape, mapped_dims(c.attrs));
  const IndexMap m = Map(g, c.attrs);
  const T* GY = c.inputs[0].ptr<T>();
  T* GX = c.outputs[0].ptr<T>();
  for_each_plane(g, [&](int64_t plane) {
    T* gx = GX + plane * g.H * g.W;
    const T* gy = GY + plane * g.Ho * g.Wo;
    std::fill(gx, gx + g.H * g.W, T(0));
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      T* row = gx + m.rows[size_t(oh)] * g.W;
      for (int64_t ow = 0; ow < g.Wo; ++ow) row[m.cols[size_t(ow)]] += gy[oh * g.Wo + ow];
    }
  });
}

// ---- upsample_bilinear2d ------------------------------------------------------------------
// PyTorch's area_pixel_compute_scale / area_pixel_compute_source_index /
// compute_source_index_and_lambda, in the compute type T.
template <typename T>
struct Lerp {
  int64_t i0, i1;
  T l0, l1;
};

template <typename T>
std::vector<Lerp<T>> lerps(int64_t in, int64_t out, double scale_factor, bool align_corners) {
  T scale;
  if (align_corners) {
    scale = out > 1 ? T(in - 1) / T(out - 1) : T(0);
  } else {
    scale = scale_factor > 0 ? T(1.0 / scale_factor) : T(in) / T(out);
  }
  std::vector<Lerp<T>> v(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    if (in == out) {
      v[size_t(o)] = {o, o, T(1), T(0)};
      continue;
    }
    T src = align_corners ? scale * T(o) : scale * (T(o) + T(0.5)) - T(0.5);
    if (!align_corners && src < T(0)) src = T(0);
    const int64_t i0 = int64_t(src);
    const int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
    const T l1 = std::min(std::max(src - T(i0), T(0)), T(1));
    v[size_t(o)] = {i0, i1, T(1) - l1, l1};
  }
  return v;
}

// The planes and the per-row, per-column interpolation of one call.
template <typename T>
struct Bilinear {
  Bilinear(const Planes& planes, const Attrs& a)
      : g(planes),
        lh(lerps<T>(g.H, g.Ho, a.f("scale_h"), a.b("align_corners"))),
        lw(lerps<T>(g.W, g.Wo, a.f("scale_w"), a.b("align_corners"))) {}
  Planes g;
  std::vector<Lerp<T>> lh, lw;
};

// inputs: x (N, C, H, W); outputs: y (N, C, Ho, Wo).
template <typename T>
void upsample_bilinear_forward(const KernelContext& c) {
  const Bilinear<T> m(planes_of(c.inputs[0].shape, c.outputs[0].shape, 2), c.attrs);
  const Planes& g = m.g;
  const T* X = c.inputs[0].ptr<T>();
  T* Y = c.outputs[0].ptr<T>();
  for_each_plane(g, [&](int64_t plane) {
    const T* x = X + plane * g.H * g.W;
    T* y = Y + plane * g.Ho * g.Wo;
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      const Lerp<T>& h = m.lh[size_t(oh)];
      const T* r0 = x + h.i0 * g.W;
      const T* r1 = x + h.i1 * g.W;
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        const Lerp<T>& w = m.lw[size_t(ow)];
        y[oh * g.Wo + ow] =
            h.l0 * (w.l0 * r0[w.i0] + w.l1 * r0[w.i1]) + h.l1 * (w.l0 * r1[w.i0] + w.l1 * r1[w.i1]);
      }
    }
  });
}

// inputs: grad_y (N, C, Ho, Wo); outputs: grad_x (N, C, H, W).
template <typename T>
void upsample_bilinear_backward(const KernelContext& c) {
  const Bilinear<T> m(planes_of(c.outputs[0].shape, c.inputs[0].shape, 2), c.attrs);
  const Planes& g = m.g;
  const T* GY = c.inputs[0].ptr<T>();
  T* GX = c.outputs[0].ptr<T>();
  for_each_plane(g, [&](int64_t plane) {
    T* gx = GX + plane * g.H * g.W;
    const T* gy = GY + plane * g.Ho * g.Wo;
    std::fill(gx, gx + g.H * g.W, T(0));
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      const Lerp<T>& h = m.lh[size_t(oh)];
      T* r0 = gx + h.i0 * g.W;
      T* r1 = gx + h.i1 * g.W;
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        const Lerp<T>& w = m.lw[size_t(ow)];
        const T v = gy[oh * g.Wo + ow];
        r0[w.i0] += h.l0 * w.l0 * v;
        r0[w.i1] += h.l0 * w.l1 * v;
        r1[w.i0] += h.l1 * w.l0 * v;
        r1[w.i1] += h.l1 * w.l1 * v;
      }
    }
  });
}

// float32/float64 kernels; float16/bfloat16 compute in float32.
template <template <typename> class Impl>
KernelFn resample_kernel() {
  return [](const KernelContext& c) {
    if (has_half_operand(c)) return run_in_float32(c, resample_kernel<Impl>());
    float_dispatch(c.inputs[0].dtype, "resample", [&](auto t) { Impl<decltype(t)>::run(c); });
  };
}

template <typename T> struct ReflectForward { static void run(const KernelContext& c) { gather_forward<T, reflect_map>(c); } };
template <typename T> struct ReflectBackward { static void run(const KernelContext& c) { gather_backward<T, reflect_map>(c); } };
template <typename T> struct NearestForward { static void run(const KernelContext& c) { gather_forward<T, nearest_map>(c); } };
template <typename T> struct NearestBackward { static void run(const KernelContext& c) { gather_backward<T, nearest_map>(c); } };
template <typename T> struct BilinearForward { static void run(const KernelContext& c) { upsample_bilinear_forward<T>(c); } };
template <typename T> struct BilinearBackward { static void run(const KernelContext& c) { upsample_bilinear_backward<T>(c); } };

}  // namespace

void register_resample_kernels() {
  set_cpu_kernel("constant_pad_nd", constant_pad_kernel);
  set_cpu_kernel("reflection_pad", resample_kernel<ReflectForward>());
  set_cpu_kernel("reflection_pad_backward", resample_kernel<ReflectBackward>());
  set_cpu_kernel("upsample_nearest2d", resample_kernel<NearestForward>());
  set_cpu_kernel("upsample_nearest2d_backward", resample_kernel<NearestBackward>());
  set_cpu_kernel("upsample_bilinear2d", resample_kernel<BilinearForward>());
  set_cpu_kernel("upsample_bilinear2d_backward", resample_kernel<BilinearBackward>());
}

}  // namespace dtr::cpu
