// Helpers shared by the reduction-shaped CPU kernel families (reduce, loss,
// norm): the type arithmetic runs in for each storage type, conversions, and
// dtype dispatch. float16/bfloat16 are loaded to float, computed in float and
// rounded back on store; float32 sums accumulate in double.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/half.h"
#include "cpu/kernels.h"

namespace dtr::cpu {

/// The type elementwise arithmetic runs in for storage type T: float for
/// float32, float16 and bfloat16; double for float64; T itself otherwise.
template <typename T>
struct ComputeType {
  using type = T;
};
template <>
struct ComputeType<Half> {
  using type = float;
};
template <>
struct ComputeType<BFloat16> {
  using type = float;
};
template <typename T>
using compute_t = typename ComputeType<T>::type;

template <typename T>
inline constexpr bool is_float_storage_v =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

/// Accumulator of sums over T: double for every floating type, int64 for
/// integers and bool (PyTorch sums integers into int64).
template <typename T>
using sum_acc_t = std::conditional_t<is_float_storage_v<T>, double, int64_t>;

inline float to_compute(Half v) { return half_to_float(v.bits); }
inline float to_compute(BFloat16 v) { return bfloat16_to_float(v.bits); }
template <typename T>
inline T to_compute(T v) {
  return v;
}

/// Rounds a computed value to storage type T.
template <typename T, typename C>
inline T from_compute(C v) {
  if constexpr (std::is_same_v<T, Half>) {
    return Half{float_to_half(float(v))};
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return BFloat16{float_to_bfloat16(float(v))};
  } else {
    return T(v);
  }
}

/// Calls f(T{}) with T the storage type of a floating `dtype` (float, double,
/// Half, BFloat16). Throws TypeError naming `op` for other dtypes.
template <typename F>
void floating_dispatch(DType dtype, std::string_view op, F&& f) {
  switch (dtype) {
    case kFloat32: f(float{}); return;
    case kFloat64: f(double{}); return;
    case kFloat16: f(Half{}); return;
    case kBFloat16: f(BFloat16{}); return;
    default:
      throw TypeError(fmt::format("{}: expected a floating point tensor, got {}", op, dtype_name(dtype)));
  }
}

/// Calls f(T{}) with T the storage type of `dtype`, for every dtype (bool is
/// read as its byte, uint8_t).
template <typename F>
void all_dispatch(DType dtype, F&& f) {
  switch (dtype) {
    case kFloat32: f(float{}); return;
    case kFloat64: f(double{}); return;
    case kFloat16: f(Half{}); return;
    case kBFloat16: f(BFloat16{}); return;
    case kInt64: f(int64_t{}); return;
    case kInt32: f(int32_t{}); return;
    case kBool:
    case kUInt8: f(uint8_t{}); return;
  }
}

/// Sum of p[0], p[s], ..., p[(n-1)s] in double (or int64 for integer T), in a
/// fixed order: four interleaved partial sums for unit stride, combined as
/// (a0 + a1) + (a2 + a3); one running sum otherwise.
template <typename T>
inline sum_acc_t<T> sum_run(const T* p, int64_t n, int64_t s) {
  using A = sum_acc_t<T>;
  if (s == 1) {
    A a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
      a0 += A(to_compute(p[j]));
      a1 += A(to_compute(p[j + 1]));
      a2 += A(to_compute(p[j + 2]));
      a3 += A(to_compute(p[j + 3]));
    }
    for (; j < n; ++j) a0 += A(to_compute(p[j]));
    return (a0 + a1) + (a2 + a3);
  }
  A a = 0;
  for (int64_t j = 0; j < n; ++j) a += A(to_compute(p[j * s]));
  return a;
}

/// Mean and 1/sqrt(var + eps) of p[0..n) (biased variance), two passes in
/// double. Forward and backward kernels both call this, so statistics
/// recomputed in backward equal the forward's bitwise.
struct Moments {
  double mean = 0;
  double var = 0;
};
template <typename T>
inline Moments moments_contiguous(const T* p, int64_t n) {
  Moments m;
  if (n == 0) return m;
  m.mean = double(sum_run(p, n, 1)) / double(n);
  double a0 = 0, a1 = 0;
  int64_t j = 0;
  for (; j + 2 <= n; j += 2) {
    const double d0 = double(to_compute(p[j])) - m.mean;
    const double d1 = double(to_compute(p[j + 1])) - m.mean;
    a0 += d0 * d0;
    a1 += d1 * d1;
  }
  for (; j < n; ++j) {
    const double d = double(to_compute(p[j])) - m.mean;
    a0 += d * d;
  }
  m.var = (a0 + a1) / double(n);
  return m;
}

}  // namespace dtr::cpu
