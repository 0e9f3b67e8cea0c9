// Convolution and pooling kernels on (N, C, H, W) tensors: conv2d by im2col +
// GEMM (forward; input gradient by GEMM + col2im; weight gradient by im2col +
// GEMM), conv_transpose2d (the input gradient's kernel plus bias),
// max/avg/adaptive-avg pooling and their backward scatters. float32
// convolutions first try oneDNN (cpu/onednn_conv.cpp, Note [oneDNN
// convolutions] below); im2col runs float64 and whatever oneDNN rejects.
//
// Convolutions work on chunks of images: the column matrix of a chunk holds
// the images side by side, (C/groups * kH * kW, images * Ho * Wo), so each
// group needs one large GEMM per chunk. gemm splits each into blocks on
// dtr's thread pool (cpu/linalg.h); the copies around them (im2col,
// col2im, layout changes) use parallel_for.
//
// Note [determinism]: every output element is written by one thread in a
// fixed order. col2im and the pool backward scatters run serially within one
// (image, channel) plane; the weight gradient adds chunk GEMMs in chunk
// order; the chunk size depends only on the shapes; GEMM follows
// cpu/linalg.h.
//
// Note [oneDNN convolutions]. float32 conv2d, conv2d_input_grad (hence
// conv_transpose2d) and conv2d_weight_grad run on oneDNN (Debian's libdnnl
// 2.6, built with the OpenMP runtime), as PyTorch's CPU convolutions do;
// float16/bfloat16 reach it through run_in_float32. Measured on the zoo's
// shapes and odd ones, with oneDNN's own OpenMP threads at 1, 2, 3 and 7:
// the forward and the input gradient came out bitwise the same for every
// thread count, the weight gradient did not (its kernels split the
// reduction over the batch among threads). So oneDNN never picks its
// thread count here. Each call cuts the batch into chunks of
// onednn_images_per_chunk images (halving while a chunk keeps 2^23
// multiply-adds, at most 64 chunks: the shapes alone decide), and dtr's
// pool runs one oneDNN call per chunk with the calling thread's OpenMP
// thread count set to 1 for the call (omp_set_num_threads of the runtime
// libdnnl loads, restored after), so every primitive is made for and run
// on one thread and no OpenMP team competes with the pool. An image's
// forward and input gradient come from one single-threaded call whose
// chunk is fixed; the weight gradient sums its chunks' results in chunk
// order. Thread counts then change only which thread runs a chunk.
// Primitives are cached per process by direction, chunk size and geometry
// (creation JITs code, ~1 ms). Operands stay in the tensors (NCHW, OIHW).
// oneDNN's blocked kernels (format_tag::any: oneDNN picks the layout, each
// chunk goes through reorders into per-thread buffers) beat its plain NCHW
// ones (its own im2col + GEMM) on nearly every shape: with plain layouts a
// zoo ResNet step took 369 ms, as with dtr's im2col, with blocked ones
// 193 ms. The exceptions run plain, in place (blocked_layout): a 1x1
// stride-1 convolution, a plain GEMM on NCHW, and the input gradient of a
// layer with fewer than 8 input channels. The choice is a function of the
// shapes, so a replay rounds as the original did. The per-thread buffers
// (reordered chunks, oneDNN's scratchpad, owned by the caller:
// scratchpad_mode::user) and the per-call weight partials lie outside the
// tensor budget like the im2col buffers; a chunk's activations stay within
// 2^22 elements (or 1/64 of the batch), the partials within 2^24 elements
// or one weight (a large weight's gradient adds several chunks, in order,
// into each partial). Results differ from im2col's in rounding, not in
// thread dependence. A oneDNN whose runtime is neither sequential nor
// OpenMP, or whose OpenMP entry points cannot be found, is not used.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/linalg.h"
#include "cpu/onednn_conv.h"
#include "cpu/simd.h"

#if DTR_HAVE_AVX2_DISPATCH
#include <immintrin.h>
#endif

namespace dtr::cpu {
namespace {

ConvGeometry geometry(const Attrs& a, IntList x, IntList w, IntList out) {
  const Shape& s = a.ints("stride");
  const Shape& p = a.ints("padding");
  const Shape& d = a.ints("dilation");
  return ConvGeometry{x[0], x[1], x[2], x[3], w[0], w[1], w[2], w[3], out[2], out[3],
                      s[0], s[1], p[0], p[1], d[0], d[1], a.i("groups")};
}

// Images per chunk, so that a chunk's buffers stay near 2 Mi elements.
int64_t images_per_chunk(const ConvGeometry& g) {
  constexpr int64_t kBufferElements = int64_t{1} << 21;
  const int64_t per_image = std::max<int64_t>(std::max(g.kk(), g.Og()) * g.P(), 1);
  return std::clamp<int64_t>(kBufferElements / per_image, 1, std::max<int64_t>(g.N, 1));
}

// The column and output-gradient buffers of a chunk: kept per thread and
// grown on demand, so repeated convolutions do not fault in fresh pages.
// Kernel scratch lies outside the tensor budget (Note [hard budget] counts
// tensor storages); images_per_chunk bounds it.
template <typename T>
struct ConvScratch {
  T* col;
  T* tmp;
};
template <typename T>
ConvScratch<T> conv_scratch(size_t col_elements, size_t tmp_elements) {
  thread_local std::vector<T> col, tmp;
  if (col.size() < col_elements) col.resize(col_elements);
  if (tmp.size() < tmp_elements) tmp.resize(tmp_elements);
  return {col.data(), tmp.data()};
}

// Grain for parallel loops over rows of P elements.
int64_t row_grain(const ConvGeometry& g) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(g.P(), 1)); }

// The output columns [lo, hi) whose input column ow * sW - pW + kj * dW lies
// inside [0, W); the rest read padding.
struct ColumnRange {
  int64_t lo, hi;
};
inline ColumnRange valid_columns(const ConvGeometry& g, int64_t kj) {
  const int64_t off = kj * g.dW - g.pW;  // input column of ow = 0
  // ow * sW + off >= 0  and  ow * sW + off <= W - 1
  const int64_t lo = off >= 0 ? 0 : (-off + g.sW - 1) / g.sW;
  const int64_t hi = g.W - 1 - off < 0 ? 0 : std::min(g.Wo, (g.W - 1 - off) / g.sW + 1);
  return {std::min(lo, hi), hi};
}

// Row r = (c, ki, kj) of one image's column matrix, from its group's planes x (Cg, H, W).
template <typename T>
void im2col_row(const ConvGeometry& g, const T* x, int64_t r, T* dst) {
  const int64_t c = r / (g.kH * g.kW), ki = (r / g.kW) % g.kH, kj = r % g.kW;
  const T* plane = x + c * g.H * g.W;
  const ColumnRange cols = valid_columns(g, kj);
  const int64_t off = kj * g.dW - g.pW;
  for (int64_t oh = 0; oh < g.Ho; ++oh) {
    const int64_t ih = oh * g.sH - g.pH + ki * g.dH;
    T* row = dst + oh * g.Wo;
    if (ih < 0 || ih >= g.H) {
      std::fill(row, row + g.Wo, T(0));
      continue;
    }
    std::fill(row, row + cols.lo, T(0));
    const T* src = plane + ih * g.W;
    if (g.sW == 1) {
      std::copy(src + cols.lo + off, src + cols.hi + off, row + cols.lo);
    } else {
      for (int64_t ow = cols.lo; ow < cols.hi; ++ow) row[ow] = src[ow * g.sW + off];
    }
    std::fill(row + cols.hi, row + g.Wo, T(0));
  }
}

// col (kk, nc * P) of group `grp` for images [n0, n0 + nc) of X (N, C, H, W).
template <typename T>
void im2col_chunk(const ConvGeometry& g, const T* X, int64_t grp, int64_t n0, int64_t nc, T* col) {
  const int64_t kk = g.kk(), P = g.P(), ld = nc * P;
  parallel_for(nc * kk, row_grain(g), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t j = t / kk, r = t % kk;
      im2col_row(g, X + ((n0 + j) * g.C + grp * g.Cg) * g.H * g.W, r, col + r * ld + j * P);
    }
  });
}

// Sums col (kk, nc * P) back into group `grp`'s planes of images [n0, n0 + nc)
// of GX (N, C, H, W), overwriting them. One thread per (image, channel) plane.
template <typename T>
void col2im_chunk(const ConvGeometry& g, const T* col, int64_t grp, int64_t n0, int64_t nc, T* GX) {
  const int64_t P = g.P(), ld = nc * P;
  parallel_for(nc * g.Cg, std::max<int64_t>(1, row_grain(g) / (g.kH * g.kW)), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t j = t / g.Cg, c = t % g.Cg;
      T* plane = GX + ((n0 + j) * g.C + grp * g.Cg + c) * g.H * g.W;
      std::fill(plane, plane + g.H * g.W, T(0));
      for (int64_t ki = 0; ki < g.kH; ++ki) {
        for (int64_t kj = 0; kj < g.kW; ++kj) {
          const T* src = col + ((c * g.kH + ki) * g.kW + kj) * ld + j * P;
          const ColumnRange cols = valid_columns(g, kj);
          const int64_t off = kj * g.dW - g.pW;
          for (int64_t oh = 0; oh < g.Ho; ++oh) {
            const int64_t ih = oh * g.sH - g.pH + ki * g.dH;
            if (ih < 0 || ih >= g.H) continue;
            T* dst = plane + ih * g.W;
            const T* s = src + oh * g.Wo;
            if (g.sW == 1) {
              for (int64_t ow = cols.lo; ow < cols.hi; ++ow) dst[ow + off] += s[ow];
            } else {
              for (int64_t ow = cols.lo; ow < cols.hi; ++ow) dst[ow * g.sW + off] += s[ow];
            }
          }
        }
      }
    }
  });
}

// dst (Og, nc * P) = group `grp`'s channels of images [n0, n0 + nc) of Y (N, Cout, Ho, Wo).
template <typename T>
void gather_output_grad(const ConvGeometry& g, const T* Y, int64_t grp, int64_t n0, int64_t nc, T* dst) {
  const int64_t Og = g.Og(), P = g.P(), ld = nc * P;
  parallel_for(nc * Og, row_grain(g), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t j = t / Og, o = t % Og;
      const T* src = Y + ((n0 + j) * g.Cout + grp * Og + o) * P;
      std::copy(src, src + P, dst + o * ld + j * P);
    }
  });
}

// ---- conv2d forward ------------------------------------------------------------
// inputs: x (N, C, H, W), weight (Cout, Cg, kH, kW), optional bias (Cout);
// outputs: y (N, Cout, Ho, Wo). Per chunk and group:
//   tmp (Og, nc * P) = W_g (Og, kk) @ col (kk, nc * P);  y = tmp + bias.
template <typename T>
void conv2d_forward(const KernelContext& c) {
  const TensorArg &x = c.inputs[0], &w = c.inputs[1], &y = c.outputs[0];
  const ConvGeometry g = geometry(c.attrs, x.shape, w.shape, y.shape);
  const T* X = x.ptr<T>();
  const T* Wt = w.ptr<T>();
  const T* bias = c.inputs.size() > 2 ? c.inputs[2].ptr<T>() : nullptr;
  T* Y = y.ptr<T>();
  if constexpr (std::is_same_v<T, float>) {
    if (onednn_conv2d_forward(g, X, Wt, bias, Y)) return;
  }
  const int64_t Og = g.Og(), kk = g.kk(), P = g.P();
  const int64_t chunk = images_per_chunk(g);
  const ConvScratch<T> scratch = conv_scratch<T>(size_t(kk * chunk * P), size_t(Og * chunk * P));
  T* col = scratch.col;
  T* tmp = scratch.tmp;
  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    const int64_t nc = std::min(chunk, g.N - n0), ld = nc * P;
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      im2col_chunk(g, X, grp, n0, nc, col);
      gemm(false, false, Og, ld, kk, T(1), Wt + grp * Og * kk, kk, col, ld, T(0), tmp, ld);
      parallel_for(nc * Og, row_grain(g), [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
          const int64_t j = t / Og, o = t % Og;
          const T* src = tmp + o * ld + j * P;
          T* dst = Y + ((n0 + j) * g.Cout + grp * Og + o) * P;
          const T add = bias != nullptr ? bias[grp * Og + o] : T(0);
          for (int64_t p = 0; p < P; ++p) dst[p] = src[p] + add;
        }
      });
    }
  }
}

// ---- conv2d input gradient ----------------------------------------------------------
// inputs: grad_y (N, Cout, Ho, Wo), weight (Cout, Cg, kH, kW); outputs:
// grad_x (N, C, H, W) (its shape is the input_size attribute). Per chunk and group:
//   col (kk, nc * P) = W_g^T (kk, Og) @ grad_y_g (Og, nc * P);  grad_x = col2im(col).
template <typename T>
void conv2d_input_grad(const KernelContext& c) {
  const TensorArg &gy = c.inputs[0], &w = c.inputs[1], &gx = c.outputs[0];
  const ConvGeometry g = geometry(c.attrs, gx.shape, w.shape, gy.shape);
  const T* GY = gy.ptr<T>();
  const T* Wt = w.ptr<T>();
  T* GX = gx.ptr<T>();
  if constexpr (std::is_same_v<T, float>) {
    if (onednn_conv2d_input_grad(g, GY, Wt, GX)) return;
  }
  const int64_t Og = g.Og(), kk = g.kk(), P = g.P();
  const int64_t chunk = images_per_chunk(g);
  const ConvScratch<T> scratch = conv_scratch<T>(size_t(kk * chunk * P), size_t(Og * chunk * P));
  T* col = scratch.col;
  T* tmp = scratch.tmp;
  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    const int64_t nc = std::min(chunk, g.N - n0), ld = nc * P;
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      gather_output_grad(g, GY, grp, n0, nc, tmp);
      gemm(true, false, kk, ld, Og, T(1), Wt + grp * Og * kk, kk, tmp, ld, T(0), col, ld);
      col2im_chunk(g, col, grp, n0, nc, GX);
    }
  }
}

// ---- conv2d weight gradient --------------------------------------------------------------
// inputs: grad_y (N, Cout, Ho, Wo), x (N, C, H, W); outputs: grad_w (Cout, Cg, kH, kW).
//   grad_w_g (Og, kk) = sum over chunks of grad_y_g (Og, nc * P) @ col^T (nc * P, kk),
// the chunks added in order.
template <typename T>
void conv2d_weight_grad(const KernelContext& c) {
  const TensorArg &gy = c.inputs[0], &x = c.inputs[1], &gw = c.outputs[0];
  const ConvGeometry g = geometry(c.attrs, x.shape, gw.shape, gy.shape);
  const T* GY = gy.ptr<T>();
  const T* X = x.ptr<T>();
  T* GW = gw.ptr<T>();
  const int64_t Og = g.Og(), kk = g.kk(), P = g.P();
  if (g.N == 0) {
    std::fill(GW, GW + g.Cout * kk, T(0));
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (onednn_conv2d_weight_grad(g, GY, X, GW)) return;
  }
  const int64_t chunk = images_per_chunk(g);
  const ConvScratch<T> scratch = conv_scratch<T>(size_t(kk * chunk * P), size_t(Og * chunk * P));
  T* col = scratch.col;
  T* tmp = scratch.tmp;
  for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
    const int64_t nc = std::min(chunk, g.N - n0), ld = nc * P;
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      gather_output_grad(g, GY, grp, n0, nc, tmp);
      im2col_chunk(g, X, grp, n0, nc, col);
      gemm(false, true, Og, kk, ld, T(1), tmp, ld, col, ld, n0 == 0 ? T(0) : T(1),
           GW + grp * Og * kk, kk);
    }
  }
}

// ---- conv_transpose2d ---------------------------------------------------------------
// inputs: x (N, Cin, H, W), weight (Cin, Cg, kH, kW), optional bias (Cg * groups);
// outputs: y (N, Cg * groups, Ho, Wo). conv2d's input gradient with x as the
// output gradient (y plays conv2d's input), then y += bias per channel.
template <typename T>
void conv_transpose2d_forward(const KernelContext& c) {
  conv2d_input_grad<T>(c);
  if (c.inputs.size() < 3) return;
  const T* bias = c.inputs[2].ptr<T>();
  const TensorArg& y = c.outputs[0];
  T* Y = y.ptr<T>();
  const int64_t C = y.shape[1], P = y.shape[2] * y.shape[3];
  parallel_for(y.shape[0] * C, std::max<int64_t>(1, 16384 / std::max<int64_t>(P, 1)),
               [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const T add = bias[t % C];
      for (T* p = Y + t * P; p < Y + (t + 1) * P; ++p) *p += add;
    }
  });
}

template <template <typename> class Impl>
KernelFn conv_kernel() {
  return [](const KernelContext& c) {
    if (has_half_operand(c)) return run_in_float32(c, conv_kernel<Impl>());
    float_dispatch(c.inputs[0].dtype, "conv2d", [&](auto t) { Impl<decltype(t)>::run(c); });
  };
}

template <typename T> struct Conv2dForward { static void run(const KernelContext& c) { conv2d_forward<T>(c); } };
template <typename T> struct Conv2dInputGrad { static void run(const KernelContext& c) { conv2d_input_grad<T>(c); } };
template <typename T> struct Conv2dWeightGrad { static void run(const KernelContext& c) { conv2d_weight_grad<T>(c); } };
template <typename T> struct ConvTranspose2d { static void run(const KernelContext& c) { conv_transpose2d_forward<T>(c); } };

// ---- pooling ----------------------------------------------------------------------------
// Every pool runs over the N*C planes independently (Note [determinism]).

struct PoolGeometry {
  int64_t planes, H, W, Ho, Wo;
  int64_t kH = 1, kW = 1, sH = 1, sW = 1, pH = 0, pW = 0;
};

PoolGeometry pool_geometry(IntList in, IntList out, const Attrs& a) {
  PoolGeometry g{in[0] * in[1], in[2], in[3], out[2], out[3]};
  if (a.has("kernel_size")) {
    const Shape &k = a.ints("kernel_size"), &s = a.ints("stride"), &p = a.ints("padding");
    g.kH = k[0], g.kW = k[1], g.sH = s[0], g.sW = s[1], g.pH = p[0], g.pW = p[1];
  }
  return g;
}

// Per-plane loop with a grain that keeps small planes together.
template <typename F>
void for_planes(const PoolGeometry& g, F&& f) {
  const int64_t per_plane = std::max<int64_t>(g.H * g.W, 1);
  parallel_for(g.planes, std::max<int64_t>(1, 16384 / per_plane), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) f(p);
  });
}

// One output row of a 2x2, stride-2, unpadded max pool (the U-Net's), from
// input rows r0 and r1 = r0 + W, for outputs [ow0, Wo): the window scanned in
// the general loop's order (r0[2ow], r0[2ow+1], r1[2ow], r1[2ow+1]), a value
// taking over when greater or NaN, so ties keep the first and the last NaN
// wins, bitwise the general loop's choice. `base`: the index of r0[0].
template <typename T>
void max_pool_2x2_row(const T* r0, const T* r1, int64_t W, int64_t base, int64_t ow0, int64_t Wo, T* y,
                      int64_t* idx) {
  for (int64_t ow = ow0; ow < Wo; ++ow) {
    const T v[4] = {r0[2 * ow], r0[2 * ow + 1], r1[2 * ow], r1[2 * ow + 1]};
    T best = v[0];
    int64_t code = 0;
    for (int64_t k = 1; k < 4; ++k) {
      const bool take = v[k] > best || std::isnan(v[k]);
      best = take ? v[k] : best;
      code = take ? k : code;
    }
    y[ow] = best;
    idx[ow] = base + (code >> 1) * W + 2 * ow + (code & 1);
  }
}

#if DTR_HAVE_AVX2_DISPATCH
// The even and odd columns of 16 floats at r. shuffle_ps works per 128-bit
// half, so the 64-bit quarters are put back in order after it.
DTR_TARGET_AVX2 inline void split_even_odd(const float* r, __m256& even, __m256& odd) {
  const __m256 lo = _mm256_loadu_ps(r), hi = _mm256_loadu_ps(r + 8);
  even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8));
  odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xDD)), 0xD8));
}

// max_pool_2x2_row for float, 8 outputs at a time; returns the first output
// it left to the scalar loop. Comparisons are exact, so the lanes choose
// what the scalar loop chooses.
DTR_TARGET_AVX2 int64_t max_pool_2x2_row_avx2(const float* r0, const float* r1, int64_t W, int64_t base,
                                              int64_t Wo, float* y, int64_t* idx) {
  int64_t ow = 0;
  alignas(32) int32_t code[8];
  for (; ow + 8 <= Wo; ow += 8) {
    __m256 v[4];
    split_even_odd(r0 + 2 * ow, v[0], v[1]);
    split_even_odd(r1 + 2 * ow, v[2], v[3]);
    __m256 best = v[0];
    __m256i which = _mm256_setzero_si256();
    for (int k = 1; k < 4; ++k) {
      const __m256 take = _mm256_or_ps(_mm256_cmp_ps(v[k], best, _CMP_GT_OQ), _mm256_cmp_ps(v[k], v[k], _CMP_UNORD_Q));
      best = _mm256_blendv_ps(best, v[k], take);
      which = _mm256_castps_si256(
          _mm256_blendv_ps(_mm256_castsi256_ps(which), _mm256_castsi256_ps(_mm256_set1_epi32(k)), take));
    }
    _mm256_storeu_ps(y + ow, best);
    _mm256_store_si256(reinterpret_cast<__m256i*>(code), which);
    for (int j = 0; j < 8; ++j) idx[ow + j] = base + (code[j] >> 1) * W + 2 * (ow + j) + (code[j] & 1);
  }
  return ow;
}
#endif

// inputs: x (N, C, H, W); outputs: y (N, C, Ho, Wo), indices int64 (N, C,
// Ho, Wo) holding ih * W + iw of each maximum (PyTorch's convention). Padding
// counts as -inf; a NaN in the window wins.
template <typename T>
void max_pool2d_forward(const KernelContext& c) {
  const PoolGeometry g = pool_geometry(c.inputs[0].shape, c.outputs[0].shape, c.attrs);
  const T* X = c.inputs[0].ptr<T>();
  T* Y = c.outputs[0].ptr<T>();
  int64_t* I = c.outputs[1].ptr<int64_t>();
  if (g.kH == 2 && g.kW == 2 && g.sH == 2 && g.sW == 2 && g.pH == 0 && g.pW == 0) {
    // Every window lies inside the plane: no clamping, no -inf start.
    for_planes(g, [&](int64_t p) {
      const T* x = X + p * g.H * g.W;
      for (int64_t oh = 0; oh < g.Ho; ++oh) {
        const T* r0 = x + 2 * oh * g.W;
        T* y = Y + (p * g.Ho + oh) * g.Wo;
        int64_t* idx = I + (p * g.Ho + oh) * g.Wo;
        int64_t ow0 = 0;
#if DTR_HAVE_AVX2_DISPATCH
        if constexpr (std::is_same_v<T, float>) {
          if (cpu_has_avx2()) ow0 = max_pool_2x2_row_avx2(r0, r0 + g.W, g.W, 2 * oh * g.W, g.Wo, y, idx);
        }
#endif
        max_pool_2x2_row(r0, r0 + g.W, g.W, 2 * oh * g.W, ow0, g.Wo, y, idx);
      }
    });
    return;
  }
  for_planes(g, [&](int64_t p) {
    const T* x = X + p * g.H * g.W;
    T* y = Y + p * g.Ho * g.Wo;
    int64_t* idx = I + p * g.Ho * g.Wo;
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      const int64_t h0 = std::max<int64_t>(oh * g.sH - g.pH, 0);
      const int64_t h1 = std::min<int64_t>(oh * g.sH - g.pH + g.kH, g.H);
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        const int64_t w0 = std::max<int64_t>(ow * g.sW - g.pW, 0);
        const int64_t w1 = std::min<int64_t>(ow * g.sW - g.pW + g.kW, g.W);
        T best = -std::numeric_limits<T>::infinity();
        int64_t best_i = h0 * g.W + w0;
        for (int64_t ih = h0; ih < h1; ++ih) {
          for (int64_t iw = w0; iw < w1; ++iw) {
            const T v = x[ih * g.W + iw];
            if (v > best || std::isnan(v)) {
              best = v;
              best_i = ih * g.W + iw;
            }
          }
        }
        y[oh * g.Wo + ow] = best;
        idx[oh * g.Wo + ow] = best_i;
      }
    }
  });
}

// inputs: grad_y (N, C, Ho, Wo), indices int64 (N, C, Ho, Wo); outputs: grad_x (N, C, H, W).
template <typename T>
void max_pool2d_backward(const KernelContext& c) {
  const PoolGeometry g = pool_geometry(c.outputs[0].shape, c.inputs[0].shape, Attrs{});
  const T* GY = c.inputs[0].ptr<T>();
  const int64_t* I = c.inputs[1].ptr<int64_t>();
  T* GX = c.outputs[0].ptr<T>();
  for_planes(g, [&](int64_t p) {
    T* gx = GX + p * g.H * g.W;
    std::fill(gx, gx + g.H * g.W, T(0));
    const T* gy = GY + p * g.Ho * g.Wo;
    const int64_t* idx = I + p * g.Ho * g.Wo;
    for (int64_t o = 0; o < g.Ho * g.Wo; ++o) gx[idx[o]] += gy[o];
  });
}

// inputs: x (N, C, H, W); outputs: y (N, C, Ho, Wo). count_include_pad=True:
// each window divides by kH * kW (PyTorch's default, ceil_mode=False).
template <typename T>
void avg_pool2d_forward(const KernelContext& c) {
  const PoolGeometry g = pool_geometry(c.inputs[0].shape, c.outputs[0].shape, c.attrs);
  const T* X = c.inputs[0].ptr<T>();
  T* Y = c.outputs[0].ptr<T>();
  const T divisor = T(g.kH * g.kW);
  for_planes(g, [&](int64_t p) {
    const T* x = X + p * g.H * g.W;
    T* y = Y + p * g.Ho * g.Wo;
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      const int64_t h0 = std::max<int64_t>(oh * g.sH - g.pH, 0);
      const int64_t h1 = std::min<int64_t>(oh * g.sH - g.pH + g.kH, g.H);
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        const int64_t w0 = std::max<int64_t>(ow * g.sW - g.pW, 0);
        const int64_t w1 = std::min<int64_t>(ow * g.sW - g.pW + g.kW, g.W);
        T acc = T(0);
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) acc += x[ih * g.W + iw];
        y[oh * g.Wo + ow] = acc / divisor;
      }
    }
  });
}

// inputs: grad_y (N, C, Ho, Wo); outputs: grad_x (N, C, H, W).
template <typename T>
void avg_pool2d_backward(const KernelContext& c) {
  const PoolGeometry g = pool_geometry(c.outputs[0].shape, c.inputs[0].shape, c.attrs);
  const T* GY = c.inputs[0].ptr<T>();
  T* GX = c.outputs[0].ptr<T>();
  const T divisor = T(g.kH * g.kW);
  for_planes(g, [&](int64_t p) {
    T* gx = GX + p * g.H * g.W;
    std::fill(gx, gx + g.H * g.W, T(0));
    const T* gy = GY + p * g.Ho * g.Wo;
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      const int64_t h0 = std::max<int64_t>(oh * g.sH - g.pH, 0);
      const int64_t h1 = std::min<int64_t>(oh * g.sH - g.pH + g.kH, g.H);
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        const int64_t w0 = std::max<int64_t>(ow * g.sW - g.pW, 0);
        const int64_t w1 = std::min<int64_t>(ow * g.sW - g.pW + g.kW, g.W);
        const T v = gy[oh * g.Wo + ow] / divisor;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) gx[ih * g.W + iw] += v;
      }
    }
  });
}

// Adaptive pooling window [start, end) of output o among `out` over `in`:
// floor(o * in / out) to ceil((o + 1) * in / out), as in PyTorch.
inline int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
inline int64_t adaptive_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

// inputs: x (N, C, H, W); outputs: y (N, C, Ho, Wo).
template <typename T>
void adaptive_avg_pool2d_forward(const KernelContext& c) {
  const PoolGeometry g = pool_geometry(c.inputs[0].shape, c.outputs[0].shape, Attrs{});
  const T* X = c.inputs[0].ptr<T>();
  T* Y = c.outputs[0].ptr<T>();
  for_planes(g, [&](int64_t p) {
    const T* x = X + p * g.H * g.W;
    T* y = Y + p * g.Ho * g.Wo;
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      const int64_t h0 = adaptive_start(oh, g.H, g.Ho), h1 = adaptive_end(oh, g.H, g.Ho);
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        const int64_t w0 = adaptive_start(ow, g.W, g.Wo), w1 = adaptive_end(ow, g.W, g.Wo);
        T acc = T(0);
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) acc += x[ih * g.W + iw];
        y[oh * g.Wo + ow] = acc / T((h1 - h0) * (w1 - w0));
      }
    }
  });
}

// inputs: grad_y (N, C, Ho, Wo); outputs: grad_x (N, C, H, W).
template <typename T>
void adaptive_avg_pool2d_backward(const KernelContext& c) {
  const PoolGeometry g = pool_geometry(c.outputs[0].shape, c.inputs[0].shape, Attrs{});
  const T* GY = c.inputs[0].ptr<T>();
  T* GX = c.outputs[0].ptr<T>();
  for_planes(g, [&](int64_t p) {
    T* gx = GX + p * g.H * g.W;
    std::fill(gx, gx + g.H * g.W, T(0));
    const T* gy = GY + p * g.Ho * g.Wo;
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      const int64_t h0 = adaptive_start(oh, g.H, g.Ho), h1 = adaptive_end(oh, g.H, g.Ho);
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        const int64_t w0 = adaptive_start(ow, g.W, g.Wo), w1 = adaptive_end(ow, g.W, g.Wo);
        const T v = gy[oh * g.Wo + ow] / T((h1 - h0) * (w1 - w0));
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) gx[ih * g.W + iw] += v;
      }
    }
  });
}

template <typename T> struct MaxPoolForward { static void run(const KernelContext& c) { max_pool2d_forward<T>(c); } };
template <typename T> struct MaxPoolBackward { static void run(const KernelContext& c) { max_pool2d_backward<T>(c); } };
template <typename T> struct AvgPoolForward { static void run(const KernelContext& c) { avg_pool2d_forward<T>(c); } };
template <typename T> struct AvgPoolBackward { static void run(const KernelContext& c) { avg_pool2d_backward<T>(c); } };
template <typename T> struct AdaptiveForward { static void run(const KernelContext& c) { adaptive_avg_pool2d_forward<T>(c); } };
template <typename T> struct AdaptiveBackward { static void run(const KernelContext& c) { adaptive_avg_pool2d_backward<T>(c); } };

}  // namespace

void register_conv_kernels() {
  set_cpu_kernel("conv2d", conv_kernel<Conv2dForward>());
  set_cpu_kernel("conv2d_input_grad", conv_kernel<Conv2dInputGrad>());
  set_cpu_kernel("conv2d_weight_grad", conv_kernel<Conv2dWeightGrad>());
  set_cpu_kernel("conv_transpose2d", conv_kernel<ConvTranspose2d>());
  set_cpu_kernel("max_pool2d", conv_kernel<MaxPoolForward>());
  set_cpu_kernel("max_pool2d_backward", conv_kernel<MaxPoolBackward>());
  set_cpu_kernel("avg_pool2d", conv_kernel<AvgPoolForward>());
  set_cpu_kernel("avg_pool2d_backward", conv_kernel<AvgPoolBackward>());
  set_cpu_kernel("adaptive_avg_pool2d", conv_kernel<AdaptiveForward>());
  set_cpu_kernel("adaptive_avg_pool2d_backward", conv_kernel<AdaptiveBackward>());
}

}  // namespace dtr::cpu
