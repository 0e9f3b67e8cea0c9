// The sums behind a batch norm's statistics (Note [channel sums]).
#pragma once

#include <cstdint>
#include <type_traits>

#include "cpu/accumulate.h"
#include "cpu/simd.h"

#if DTR_HAVE_AVX2_DISPATCH
#include <immintrin.h>
#endif

namespace dtr::cpu {

// Note [channel sums]. A batch norm's statistics sum one channel's
// N * H * W elements in double. One running sum is a chain of dependent
// adds (4 cycles each): the variance pass was 8% of a ResNet step. Each
// plane is summed instead in sixteen interleaved partial sums a[k] (k = j
// mod 16) over whole groups of 16 elements, folded as
// t[k] = (a[k] + a[k+4]) + (a[k+8] + a[k+12]), the remaining elements added
// to t[0] in order, and the plane's sum is (t0 + t1) + (t2 + t3); planes are
// added in batch order. The AVX2 copy for float32 keeps a[k] in four vectors
// of four doubles and computes the same operations, so its sums are bitwise
// the scalar loop's (no FMA: -ffp-contract=off). cuda/norm.cu's block_sum
// and block_squares use the same order. Batch norm's backward sums Σ g and
// Σ g · xhat per plane the same way (plane_grad_sums).

/// The fold of Note [channel sums]: t[k] = (a[k] + a[k+4]) + (a[k+8] + a[k+12]).
inline void fold_lanes(const double (&a)[16], double (&t)[4]) {
  for (int k = 0; k < 4; ++k) t[k] = (a[k] + a[k + 4]) + (a[k + 8] + a[k + 12]);
}
inline double sum_lanes(const double (&t)[4]) { return (t[0] + t[1]) + (t[2] + t[3]); }

/// Σ v(p[j]) over a plane of n elements in the order of Note [channel
/// sums]; v(x) = x, or (x - mean)² when Square.
template <bool Square, typename T>
inline double plane_sum_scalar(const T* p, int64_t n, double mean) {
  const auto v = [&](const T& x) {
    const double d = double(to_compute(x)) - (Square ? mean : 0.0);
    return Square ? d * d : double(to_compute(x));
  };
  double a[16] = {};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int k = 0; k < 16; ++k) a[k] += v(p[j + k]);
  double t[4];
  fold_lanes(a, t);
  for (; j < n; ++j) t[0] += v(p[j]);
  return sum_lanes(t);
}

#if DTR_HAVE_AVX2_DISPATCH
template <bool Square>
DTR_TARGET_AVX2 inline double plane_sum_avx2(const float* p, int64_t n, double mean) {
  const __m256d m = _mm256_set1_pd(mean);
  __m256d a[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    for (int q = 0; q < 4; ++q) {
      __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(p + j + 4 * q));
      if constexpr (Square) {
        v = _mm256_sub_pd(v, m);
        v = _mm256_mul_pd(v, v);
      }
      a[q] = _mm256_add_pd(a[q], v);
    }
  }
  alignas(32) double t[4];
  _mm256_store_pd(t, _mm256_add_pd(_mm256_add_pd(a[0], a[1]), _mm256_add_pd(a[2], a[3])));
  for (; j < n; ++j) {
    const double d = double(p[j]) - (Square ? mean : 0.0);
    t[0] += Square ? d * d : double(p[j]);
  }
  return sum_lanes(t);
}
#endif

/// Σ g and Σ g · xhat over a plane of n elements (batch norm's backward),
/// xhat = (x - mean) * invstd in the compute type, products in double; each
/// sum in the order of Note [channel sums].
template <typename T>
inline void plane_grad_sums_scalar(const T* g, const T* x, int64_t n, compute_t<T> mean, compute_t<T> invstd,
                                   double& sum_g, double& sum_gx) {
  double a[16] = {}, b[16] = {};
  const auto gx = [&](int64_t j) {
    return double(to_compute(g[j])) * double((to_compute(x[j]) - mean) * invstd);
  };
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int k = 0; k < 16; ++k) {
      a[k] += double(to_compute(g[j + k]));
      b[k] += gx(j + k);
    }
  double t[4], u[4];
  fold_lanes(a, t);
  fold_lanes(b, u);
  for (; j < n; ++j) {
    t[0] += double(to_compute(g[j]));
    u[0] += gx(j);
  }
  sum_g = sum_lanes(t);
  sum_gx = sum_lanes(u);
}

#if DTR_HAVE_AVX2_DISPATCH
DTR_TARGET_AVX2 inline void plane_grad_sums_avx2(const float* g, const float* x, int64_t n, float mean, float invstd,
                                                 double& sum_g, double& sum_gx) {
  const __m128 m = _mm_set1_ps(mean), s = _mm_set1_ps(invstd);
  __m256d a[4], b[4];
  for (int q = 0; q < 4; ++q) a[q] = b[q] = _mm256_setzero_pd();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    for (int q = 0; q < 4; ++q) {
      const __m256d gv = _mm256_cvtps_pd(_mm_loadu_ps(g + j + 4 * q));
      const __m256d xhat = _mm256_cvtps_pd(_mm_mul_ps(_mm_sub_ps(_mm_loadu_ps(x + j + 4 * q), m), s));
      a[q] = _mm256_add_pd(a[q], gv);
      b[q] = _mm256_add_pd(b[q], _mm256_mul_pd(gv, xhat));
    }
  }
  alignas(32) double t[4], u[4];
  _mm256_store_pd(t, _mm256_add_pd(_mm256_add_pd(a[0], a[1]), _mm256_add_pd(a[2], a[3])));
  _mm256_store_pd(u, _mm256_add_pd(_mm256_add_pd(b[0], b[1]), _mm256_add_pd(b[2], b[3])));
  for (; j < n; ++j) {
    t[0] += double(g[j]);
    u[0] += double(g[j]) * double((x[j] - mean) * invstd);
  }
  sum_g = sum_lanes(t);
  sum_gx = sum_lanes(u);
}
#endif

template <typename T>
inline void plane_grad_sums(const T* g, const T* x, int64_t n, compute_t<T> mean, compute_t<T> invstd, double& sum_g,
                            double& sum_gx) {
#if DTR_HAVE_AVX2_DISPATCH
  if constexpr (std::is_same_v<T, float>) {
    if (cpu_has_avx2()) return plane_grad_sums_avx2(g, x, n, mean, invstd, sum_g, sum_gx);
  }
#endif
  plane_grad_sums_scalar(g, x, n, mean, invstd, sum_g, sum_gx);
}

template <bool Square, typename T>
inline double plane_sum(const T* p, int64_t n, double mean) {
#if DTR_HAVE_AVX2_DISPATCH
  if constexpr (std::is_same_v<T, float>) {
    if (cpu_has_avx2()) return plane_sum_avx2<Square>(p, n, mean);
  }
#endif
  return plane_sum_scalar<Square>(p, n, mean);
}

}  // namespace dtr::cpu
