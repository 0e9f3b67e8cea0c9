// Padding and resampling CUDA kernels (cuda/resample.h): one index per
// output element for the forwards; the gradients as one index per input
// element that finds the output positions reading it (scanning the output
// rows, then the columns of the matching rows) and sums them in the CPU's
// order, so there are no atomics and the sums are the CPU's.
#include <cmath>

#include "cuda/launch.cuh"
#include "cuda/resample.h"
#include "cuda/scatter.cuh"

namespace dtr::cuda {

namespace {
/// The leading pad of each dim, by value (an array a body captures).
struct LeadingPads {
  int64_t v[kMaxIndexDims] = {};
};
}  // namespace

void launch_constant_pad(std::byte* y, const Dims& y_dims, const std::byte* x, const Dims& x_dims,
                         const int64_t* before, uint64_t fill, int64_t isz, const Exec& e) {
  const int64_t numel = numel_of(y_dims);
  LeadingPads bb;
  for (int d = 0; d < y_dims.ndim; ++d) bb.v[d] = before[d];
  launch(
      e, numel,
      [=] __host__ __device__(int64_t q) {
        int64_t c[kMaxIndexDims];
        coords_of(y_dims, q, c);
        bool inside = true;
        int64_t off = 0;
        for (int d = 0; d < y_dims.ndim; ++d) {
          const int64_t i = c[d] - bb.v[d];
          inside = inside && i >= 0 && i < x_dims.size[d];
          off += i * x_dims.stride[d];
        }
        const uint64_t f = fill;
        copy_element(y + q * isz, inside ? x + off * isz : reinterpret_cast<const std::byte*>(&f), isz);
      },
      "constant_pad_nd");
}

namespace {

DTR_HD int64_t reflect_index(int64_t o, int64_t before, int64_t n) {
  const int64_t i = o - before;
  return i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i;
}

// PyTorch's nearest_idx, in float32 (cpu/resample.cpp).
DTR_HD int64_t nearest_index(int64_t o, int64_t in, int64_t out, double scale_factor) {
  if (out == in) return o;
  if (out == 2 * in) return o >> 1;
  const float scale = scale_factor > 0 ? float(1.0 / scale_factor) : float(in) / float(out);
  const int64_t i = int64_t(floorf(float(o) * scale));
  return i < in - 1 ? i : in - 1;
}

DTR_HD int64_t map_row(const IndexMapArgs& m, const Planes& g, int64_t oh) {
  return m.kind == MapKind::kReflect ? reflect_index(oh, m.top, g.H) : nearest_index(oh, g.H, g.Ho, m.scale_h);
}
DTR_HD int64_t map_col(const IndexMapArgs& m, const Planes& g, int64_t ow) {
  return m.kind == MapKind::kReflect ? reflect_index(ow, m.left, g.W) : nearest_index(ow, g.W, g.Wo, m.scale_w);
}

template <typename C>
void map_backward_typed(std::byte* gx, const std::byte* gy, DType dt, const Planes& g, const IndexMapArgs& m,
                        const Exec& e) {
  const int64_t sz = itemsize(dt);
  launch(
      e, g.count * g.H * g.W,
      [=] __host__ __device__(int64_t q) {
        const int64_t w = q % g.W, h = (q / g.W) % g.H, p = q / (g.W * g.H);
        const std::byte* plane = gy + p * g.Ho * g.Wo * sz;
        C acc = C(0);
        for (int64_t oh = 0; oh < g.Ho; ++oh) {
          if (map_row(m, g, oh) != h) continue;
          for (int64_t ow = 0; ow < g.Wo; ++ow)
            if (map_col(m, g, ow) == w) acc += load<C>(plane + (oh * g.Wo + ow) * sz, dt);
        }
        store<C>(gx + q * sz, dt, acc);
      },
      "resample_backward");
}

// PyTorch's area_pixel_compute_scale / compute_source_index_and_lambda in C.
template <typename C>
struct Lerp {
  int64_t i0, i1;
  C l0, l1;
};

template <typename C>
DTR_HD Lerp<C> lerp_at(int64_t o, int64_t in, int64_t out, double scale_factor, bool align_corners) {
  C scale;
  if (align_corners) scale = out > 1 ? C(in - 1) / C(out - 1) : C(0);
  else scale = scale_factor > 0 ? C(1.0 / scale_factor) : C(in) / C(out);
  if (in == out) return {o, o, C(1), C(0)};
  C src = align_corners ? scale * C(o) : scale * (C(o) + C(0.5)) - C(0.5);
  if (!align_corners && src < C(0)) src = C(0);
  const int64_t i0 = int64_t(src);
  const int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
  C l1 = src - C(i0);
  l1 = l1 < C(0) ? C(0) : l1;
  l1 = l1 > C(1) ? C(1) : l1;
  return {i0, i1, C(1) - l1, l1};
}

template <typename C>
void bilinear_forward_typed(std::byte* y, const std::byte* x, DType dt, const Planes& g, double sh, double sw,
                            bool ac, const Exec& e) {
  const int64_t sz = itemsize(dt);
  launch(
      e, g.count * g.Ho * g.Wo,
      [=] __host__ __device__(int64_t q) {
        const int64_t ow = q % g.Wo, oh = (q / g.Wo) % g.Ho, p = q / (g.Wo * g.Ho);
        const Lerp<C> h = lerp_at<C>(oh, g.H, g.Ho, sh, ac), w = lerp_at<C>(ow, g.W, g.Wo, sw, ac);
        const std::byte* r0 = x + (p * g.H + h.i0) * g.W * sz;
        const std::byte* r1 = x + (p * g.H + h.i1) * g.W * sz;
        const C v = h.l0 * (w.l0 * load<C>(r0 + w.i0 * sz, dt) + w.l1 * load<C>(r0 + w.i1 * sz, dt)) +
                    h.l1 * (w.l0 * load<C>(r1 + w.i0 * sz, dt) + w.l1 * load<C>(r1 + w.i1 * sz, dt));
        store<C>(y + q * sz, dt, v);
      },
      "upsample_bilinear2d");
}

template <typename C>
void bilinear_backward_typed(std::byte* gx, const std::byte* gy, DType dt, const Planes& g, double sh, double sw,
                             bool ac, const Exec& e) {
  const int64_t sz = itemsize(dt);
  launch(
      e, g.count * g.H * g.W,
      [=] __host__ __device__(int64_t q) {
        const int64_t iw = q % g.W, ih = (q / g.W) % g.H, p = q / (g.W * g.H);
        const std::byte* plane = gy + p * g.Ho * g.Wo * sz;
        C acc = C(0);
        // The CPU adds, per output (oh, ow) in order, to r0[i0], r0[i1],
        // r1[i0], r1[i1]: this element takes the ones that land on it, in that order.
        for (int64_t oh = 0; oh < g.Ho; ++oh) {
          const Lerp<C> h = lerp_at<C>(oh, g.H, g.Ho, sh, ac);
          if (h.i0 != ih && h.i1 != ih) continue;
          for (int64_t ow = 0; ow < g.Wo; ++ow) {
            const Lerp<C> w = lerp_at<C>(ow, g.W, g.Wo, sw, ac);
            if (w.i0 != iw && w.i1 != iw) continue;
            const C v = load<C>(plane + (oh * g.Wo + ow) * sz, dt);
            if (h.i0 == ih && w.i0 == iw) acc += h.l0 * w.l0 * v;
            if (h.i0 == ih && w.i1 == iw) acc += h.l0 * w.l1 * v;
            if (h.i1 == ih && w.i0 == iw) acc += h.l1 * w.l0 * v;
            if (h.i1 == ih && w.i1 == iw) acc += h.l1 * w.l1 * v;
          }
        }
        store<C>(gx + q * sz, dt, acc);
      },
      "upsample_bilinear2d_backward");
}

}  // namespace

void launch_map_forward(std::byte* y, const std::byte* x, DType dt, const Planes& g, const IndexMapArgs& m,
                        const Exec& e) {
  const int64_t sz = itemsize(dt);
  launch(
      e, g.count * g.Ho * g.Wo,
      [=] __host__ __device__(int64_t q) {
        const int64_t ow = q % g.Wo, oh = (q / g.Wo) % g.Ho, p = q / (g.Wo * g.Ho);
        copy_element(y + q * sz, x + ((p * g.H + map_row(m, g, oh)) * g.W + map_col(m, g, ow)) * sz, sz);
      },
      "resample");
}

void launch_map_backward(std::byte* gx, const std::byte* gy, DType dt, const Planes& g, const IndexMapArgs& m,
                         const Exec& e) {
  compute_dispatch(dt, [&](auto tag) { map_backward_typed<decltype(tag)>(gx, gy, dt, g, m, e); });
}

void launch_bilinear_forward(std::byte* y, const std::byte* x, DType dt, const Planes& g, double scale_h,
                             double scale_w, bool align_corners, const Exec& e) {
  compute_dispatch(dt, [&](auto tag) {
    bilinear_forward_typed<decltype(tag)>(y, x, dt, g, scale_h, scale_w, align_corners, e);
  });
}

void launch_bilinear_backward(std::byte* gx, const std::byte* gy, DType dt, const Planes& g, double scale_h,
                              double scale_w, bool align_corners, const Exec& e) {
  compute_dispatch(dt, [&](auto tag) {
    bilinear_backward_typed<decltype(tag)>(gx, gy, dt, g, scale_h, scale_w, align_corners, e);
  });
}

}  // namespace dtr::cuda
