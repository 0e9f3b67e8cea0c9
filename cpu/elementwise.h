// Strided, broadcasting, converting elementwise loops shared by the unary and
// binary kernel families (cpu/unary.cpp, cpu/binary.cpp).
//
// `map_elements<R, In...>(out, {&a, &b, ...}, f)` writes out[i] = f(a[i], b[i], ...)
// where each input is broadcast to out's shape and may have any strides (an
// in-place op's output is a strided view). Two paths, all computing the
// same f on the same values, so the result never depends on the layout:
//  - typed: every operand is stored as the C++ type the functor takes; the
//    innermost run is a plain (vectorizable) loop when it is contiguous,
//    which is the float32 training path, also when some inputs repeat one
//    value along it (broadcast);
//  - buffered: otherwise (float16/bfloat16 storage, mixed dtypes), runs are
//    converted into small stack buffers, computed, and converted back.
// The vectorized loops run as AVX2 code where the CPU has it (without FMA,
// so the values are the SSE2 loop's, bit for bit).
// Work is split over output elements only (Note [determinism]).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <optional>
#include <utility>

#include "core/type_promotion.h"
#include "cpu/kernels.h"
#include "cpu/simd.h"

namespace dtr::cpu {

/// Calls f(C{}) with C the type elementwise math runs in for `dtype`:
/// float for float32/float16/bfloat16, double for float64, int64_t for the
/// integer dtypes and bool.
template <typename F>
void compute_type_dispatch(DType dtype, F&& f) {
  switch (dtype) {
    case kFloat32:
    case kFloat16:
    case kBFloat16: f(float{}); return;
    case kFloat64: f(double{}); return;
    default: f(int64_t{}); return;
  }
}

/// Like compute_type_dispatch for ops defined on floating dtypes only.
template <typename F>
void floating_compute_dispatch(DType dtype, std::string_view op, F&& f) {
  switch (dtype) {
    case kFloat32:
    case kFloat16:
    case kBFloat16: f(float{}); return;
    case kFloat64: f(double{}); return;
    default:
      throw NotImplementedError(fmt::format("{}: no CPU kernel for dtype {}", op, dtype_name(dtype)));
  }
}

namespace elementwise_detail {

/// The dtype whose elements are stored as T (the types kernels compute in).
template <typename T>
constexpr DType stored_dtype() {
  if constexpr (std::is_same_v<T, float>) return kFloat32;
  else if constexpr (std::is_same_v<T, double>) return kFloat64;
  else if constexpr (std::is_same_v<T, int64_t>) return kInt64;
  else if constexpr (std::is_same_v<T, bool>) return kBool;
  else static_assert(sizeof(T) == 0, "no dtype is stored as this type");
}

inline constexpr int kMaxDims = 16;
inline constexpr int64_t kGrain = int64_t{1} << 15;  // elements per parallel chunk, at least
inline constexpr int64_t kBuffer = 256;             // elements per conversion buffer

/// The loop over N operands (output first) in bytes: size-1 dims dropped and
/// neighbouring dims merged where every operand's strides allow.
template <size_t N>
struct Layout {
  int ndim = 0;
  int64_t numel = 1;
  int64_t shape[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};
};

/// The Layout of `shape` for N operands with element strides st[k] (already
/// broadcast to `shape`) and item sizes isz[k].
template <size_t N>
Layout<N> make_layout(IntList shape, const std::array<Strides, N>& st, const std::array<int64_t, N>& isz) {
  Layout<N> L;
  L.numel = dtr::numel(shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t size = shape[d];
    if (size == 1) continue;
    const int nd = L.ndim;
    bool merge = nd > 0;
    for (size_t k = 0; k < N && merge; ++k)
      merge = st[k][d] * size == L.strides[k][nd - 1];
    if (merge) {
      // The previous (outer) dim folds into this one: it keeps this dim's strides.
      L.shape[nd - 1] *= size;
      for (size_t k = 0; k < N; ++k) L.strides[k][nd - 1] = st[k][d];
      continue;
    }
    L.shape[nd] = size;
    for (size_t k = 0; k < N; ++k) L.strides[k][nd] = st[k][d];
    ++L.ndim;
  }
  for (size_t k = 0; k < N; ++k)
    for (int d = 0; d < L.ndim; ++d) L.strides[k][d] *= isz[k];
  return L;
}

template <size_t N>
Layout<N> make_layout(const TensorArg& out, const std::array<const TensorArg*, N - 1>& ins) {
  std::array<Strides, N> st;
  std::array<int64_t, N> isz;
  st[0] = out.strides;
  isz[0] = itemsize(out.dtype);
  for (size_t k = 1; k < N; ++k) {
    st[k] = broadcast_strides(ins[k - 1]->shape, ins[k - 1]->strides, out.shape);
    isz[k] = itemsize(ins[k - 1]->dtype);
  }
  return make_layout<N>(out.shape, st, isz);
}

/// Calls run(ptrs, inner_strides, n) for runs of the innermost dim covering
/// every element once; runs are split across threads by output position.
template <size_t N, typename Run>
void for_each_run(const Layout<N>& L, const std::array<std::byte*, N>& base, Run&& run) {
  if (L.numel == 0) return;
  if (L.ndim == 0) {
    run(base, std::array<int64_t, N>{}, int64_t{1});
    return;
  }
  const int last = L.ndim - 1;
  std::array<int64_t, N> inner{};
  for (size_t k = 0; k < N; ++k) inner[k] = L.strides[k][last];
  parallel_for(L.numel, kGrain, [&](int64_t begin, int64_t end) {
    int64_t idx[kMaxDims];
    std::array<int64_t, N> off{};
    int64_t rem = begin;
    for (int d = last; d >= 0; --d) {
      idx[d] = rem % L.shape[d];
      rem /= L.shape[d];
      for (size_t k = 0; k < N; ++k) off[k] += idx[d] * L.strides[k][d];
    }
    int64_t i = begin;
    while (i < end) {
      const int64_t n = std::min(end - i, L.shape[last] - idx[last]);
      std::array<std::byte*, N> p;
      for (size_t k = 0; k < N; ++k) p[k] = base[k] + off[k];
      run(p, inner, n);
      i += n;
      if (i >= end) break;
      // Next row: the innermost index wrapped to 0; carry into outer dims.
      for (size_t k = 0; k < N; ++k) off[k] -= idx[last] * inner[k];
      idx[last] = 0;
      for (int d = last - 1; d >= 0; --d) {
        for (size_t k = 0; k < N; ++k) off[k] += L.strides[k][d];
        if (++idx[d] < L.shape[d]) break;
        for (size_t k = 0; k < N; ++k) off[k] -= idx[d] * L.strides[k][d];
        idx[d] = 0;
      }
    }
  });
}

/// Copies n elements of sizeof(E) bytes between byte strides.
template <typename E>
void copy_run(std::byte* dst, int64_t ds, const std::byte* src, int64_t ss, int64_t n) {
  for (int64_t j = 0; j < n; ++j) std::memcpy(dst + j * ds, src + j * ss, sizeof(E));
}

}  // namespace elementwise_detail

/// dst = src for the elements of `shape`, each `isz` bytes, with element
/// strides dst_strides and src_strides (src strides may be 0: broadcast).
/// Runs along the innermost merged dim are copied whole: memcpy where both
/// sides are contiguous, a typed loop otherwise. Split across threads by
/// destination position.
inline void copy_strided(std::byte* dst, IntList dst_strides, const std::byte* src, IntList src_strides,
                         IntList shape, int64_t isz) {
  using namespace elementwise_detail;
  const std::array<Strides, 2> st{Strides(dst_strides.begin(), dst_strides.end()),
                                  Strides(src_strides.begin(), src_strides.end())};
  const Layout<2> L = make_layout<2>(shape, st, {isz, isz});
  if (L.ndim >= 2 && L.shape[L.ndim - 1] <= 4 && !(L.strides[0][L.ndim - 1] == isz && L.strides[1][L.ndim - 1] == isz)) {
    // A short strided innermost dim (a nearest upsample's broadcast pair, a
    // permuted copy's last dim): runs along the next dim, each element of
    // which copies the short dim, so the loop over runs is not paid per 2
    // elements.
    Layout<2> outer = L;
    const int last = --outer.ndim;
    const int64_t m = L.shape[last], d0 = L.strides[0][last], s0 = L.strides[1][last];
    outer.numel = L.numel / m;
    for_each_run(outer, {dst, const_cast<std::byte*>(src)},
                 [&](const std::array<std::byte*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
                   const auto rows = [&](auto e) {
                     using E = decltype(e);
                     for (int64_t j = 0; j < n; ++j)
                       for (int64_t t = 0; t < m; ++t)
                         std::memcpy(p[0] + j * s[0] + t * d0, p[1] + j * s[1] + t * s0, sizeof(E));
                   };
                   switch (isz) {
                     case 8: return rows(uint64_t{});
                     case 4: return rows(uint32_t{});
                     case 2: return rows(uint16_t{});
                     default: return rows(uint8_t{});
                   }
                 });
    return;
  }
  for_each_run(L, {dst, const_cast<std::byte*>(src)},
               [&](const std::array<std::byte*, 2>& p, const std::array<int64_t, 2>& s, int64_t m) {
                 if (s[0] == isz && s[1] == isz) {
                   std::memcpy(p[0], p[1], size_t(m * isz));
                   return;
                 }
                 switch (isz) {
                   case 8: return copy_run<uint64_t>(p[0], s[0], p[1], s[1], m);
                   case 4: return copy_run<uint32_t>(p[0], s[0], p[1], s[1], m);
                   case 2: return copy_run<uint16_t>(p[0], s[0], p[1], s[1], m);
                   default: return copy_run<uint8_t>(p[0], s[0], p[1], s[1], m);
                 }
               });
}

namespace elementwise_detail {

/// dst[j] = T(element j of a run of dtype `dt` at `src` with byte stride `stride`).
template <typename T>
void load_run(T* dst, const std::byte* src, int64_t stride, DType dt, int64_t n) {
  auto loop = [&](auto convert) {
    for (int64_t j = 0; j < n; ++j) dst[j] = convert(src + j * stride);
  };
  switch (dt) {
    case kFloat32: loop([](const std::byte* p) { return static_cast<T>(*reinterpret_cast<const float*>(p)); }); return;
    case kFloat64: loop([](const std::byte* p) { return static_cast<T>(*reinterpret_cast<const double*>(p)); }); return;
    case kFloat16: loop([](const std::byte* p) { return static_cast<T>(half_to_float(*reinterpret_cast<const uint16_t*>(p))); }); return;
    case kBFloat16: loop([](const std::byte* p) { return static_cast<T>(bfloat16_to_float(*reinterpret_cast<const uint16_t*>(p))); }); return;
    case kInt64: loop([](const std::byte* p) { return static_cast<T>(*reinterpret_cast<const int64_t*>(p)); }); return;
    case kInt32: loop([](const std::byte* p) { return static_cast<T>(*reinterpret_cast<const int32_t*>(p)); }); return;
    case kUInt8: loop([](const std::byte* p) { return static_cast<T>(*reinterpret_cast<const uint8_t*>(p)); }); return;
    case kBool: loop([](const std::byte* p) { return static_cast<T>(*reinterpret_cast<const uint8_t*>(p) != 0); }); return;
  }
}

/// Element j of a run of dtype `dt` at `dst` (byte stride `stride`) = src[j], converted.
template <typename T>
void store_run(std::byte* dst, int64_t stride, DType dt, const T* src, int64_t n) {
  auto loop = [&](auto store) {
    for (int64_t j = 0; j < n; ++j) store(dst + j * stride, src[j]);
  };
  switch (dt) {
    case kFloat32: loop([](std::byte* p, T v) { *reinterpret_cast<float*>(p) = static_cast<float>(v); }); return;
    case kFloat64: loop([](std::byte* p, T v) { *reinterpret_cast<double*>(p) = static_cast<double>(v); }); return;
    case kFloat16: loop([](std::byte* p, T v) { *reinterpret_cast<uint16_t*>(p) = float_to_half(static_cast<float>(v)); }); return;
    case kBFloat16: loop([](std::byte* p, T v) { *reinterpret_cast<uint16_t*>(p) = float_to_bfloat16(static_cast<float>(v)); }); return;
    case kInt64: loop([](std::byte* p, T v) { *reinterpret_cast<int64_t*>(p) = static_cast<int64_t>(v); }); return;
    case kInt32: loop([](std::byte* p, T v) { *reinterpret_cast<int32_t*>(p) = static_cast<int32_t>(static_cast<int64_t>(v)); }); return;
    case kUInt8: loop([](std::byte* p, T v) { *reinterpret_cast<uint8_t*>(p) = static_cast<uint8_t>(static_cast<int64_t>(v)); }); return;
    case kBool: loop([](std::byte* p, T v) { *reinterpret_cast<uint8_t*>(p) = v != T(0) ? 1 : 0; }); return;
  }
}

/// o[j] = f(x_0[j], x_1[j], ...) for j in [0, n): the vectorized inner loop.
template <typename R, typename... In, typename F, size_t... K>
void simd_map(R* o, const std::tuple<const In*...>& x, int64_t n, F& f, std::index_sequence<K...>) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) o[j] = f(std::get<K>(x)[j]...);
}

/// simd_map compiled for AVX2 (8 floats a step instead of SSE2's 4); see
/// cpu/simd.h for why the values are the same.
template <typename R, typename... In, typename F, size_t... K>
DTR_TARGET_AVX2 void simd_map_avx2(R* o, const std::tuple<const In*...>& x, int64_t n, F& f,
                                   std::index_sequence<K...>) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) o[j] = f(std::get<K>(x)[j]...);
}

/// simd_map on the widest instruction set this CPU has.
template <typename R, typename... In, typename F, size_t... K>
void dispatch_simd_map(R* o, const std::tuple<const In*...>& x, int64_t n, F& f,
                       std::index_sequence<K...> seq) {
  if (n >= 16 && cpu_has_avx2()) return simd_map_avx2<R, In...>(o, x, n, f, seq);
  simd_map<R, In...>(o, x, n, f, seq);
}

template <typename R, typename... In, typename F, size_t... K>
void map_impl(const TensorArg& out, const std::array<const TensorArg*, sizeof...(In)>& ins, F& f,
              std::index_sequence<K...>) {
  constexpr size_t N = sizeof...(In) + 1;
  const Layout<N> L = make_layout<N>(out, ins);
  const std::array<std::byte*, N> base{out.data, ins[K]->data...};
  const bool typed = out.dtype == stored_dtype<R>() && ((ins[K]->dtype == stored_dtype<In>()) && ...);
  if (typed) {
    for_each_run(L, base, [&](const std::array<std::byte*, N>& p, const std::array<int64_t, N>& s,
                              int64_t n) {
      R* o = reinterpret_cast<R*>(p[0]);
      const bool out_contiguous = s[0] == int64_t(sizeof(R));
      const bool contiguous = out_contiguous && ((s[K + 1] == int64_t(sizeof(In))) && ...);
      if (contiguous || n == 1) {
        const std::tuple<const In*...> x{reinterpret_cast<const In*>(p[K + 1])...};
        // In-place ops pass o == an input exactly: element j reads then writes j only.
        dispatch_simd_map<R, In...>(o, x, n, f, std::index_sequence<K...>{});
        return;
      }
      const bool contiguous_or_repeated =
          out_contiguous && ((s[K + 1] == int64_t(sizeof(In)) || s[K + 1] == 0) && ...);
      if (contiguous_or_repeated) {
        // Inputs that repeat one value along the run (a broadcast dim, e.g.
        // (N, C) * (N, 1)) read from a filled buffer, so the loop stays
        // contiguous and vectorizes.
        std::tuple<std::array<In, kBuffer>...> repeated;
        const int64_t fill = std::min(n, kBuffer);
        ((s[K + 1] == 0 ? (void)std::fill_n(std::get<K>(repeated).data(), fill,
                                            *reinterpret_cast<const In*>(p[K + 1]))
                        : (void)0),
         ...);
        for (int64_t j0 = 0; j0 < n; j0 += kBuffer) {
          const int64_t m = std::min(kBuffer, n - j0);
          const std::tuple<const In*...> x{
              (s[K + 1] == 0 ? std::get<K>(repeated).data()
                             : reinterpret_cast<const In*>(p[K + 1]) + j0)...};
          dispatch_simd_map<R, In...>(o + j0, x, m, f, std::index_sequence<K...>{});
        }
        return;
      }
      for (int64_t j = 0; j < n; ++j) {
        *reinterpret_cast<R*>(p[0] + j * s[0]) =
            f(*reinterpret_cast<const In*>(p[K + 1] + j * s[K + 1])...);
      }
    });
    return;
  }
  for_each_run(L, base, [&](const std::array<std::byte*, N>& p, const std::array<int64_t, N>& s,
                            int64_t n) {
    std::tuple<std::array<In, kBuffer>...> buf;
    std::array<R, kBuffer> obuf;
    for (int64_t j0 = 0; j0 < n; j0 += kBuffer) {
      const int64_t m = std::min(kBuffer, n - j0);
      (load_run(std::get<K>(buf).data(), p[K + 1] + j0 * s[K + 1], s[K + 1], ins[K]->dtype, m), ...);
      const std::tuple<const In*...> x{std::get<K>(buf).data()...};
      dispatch_simd_map<R, In...>(obuf.data(), x, m, f, std::index_sequence<K...>{});
      store_run(p[0] + j0 * s[0], s[0], out.dtype, obuf.data(), m);
    }
  });
}

}  // namespace elementwise_detail

/// out[i] = f(in_0[i], in_1[i], ...) over out's shape, each input broadcast to
/// it; inputs are read as In... and the result is stored from R, converting
/// from and to the operands' dtypes where they differ.
template <typename R, typename... In, typename F>
void map_elements(const TensorArg& out, const std::array<const TensorArg*, sizeof...(In)>& ins, F f) {
  elementwise_detail::map_impl<R, In...>(out, ins, f, std::index_sequence_for<In...>{});
}

/// The dtype torch.result_type gives for the kernel's tensor inputs
/// [first, first + count) plus, when `scalar` is set, a wrapped scalar.
inline DType inputs_result_type(const KernelContext& c, size_t first, size_t count,
                                std::optional<bool> scalar_is_floating = std::nullopt) {
  ResultType r;
  for (size_t i = first; i < first + count; ++i) r.tensor(c.inputs[i].dtype, c.inputs[i].dim());
  if (scalar_is_floating.has_value()) r.scalar(*scalar_is_floating);
  return r.get();
}

}  // namespace dtr::cpu
