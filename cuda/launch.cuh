// Launching CUDA kernels whose bodies also run on the host (cuda/exec.h,
// Note [host emulation of CUDA kernels]), and the strided, converting element
// access the elementwise families share. Included by cuda/*.cu only.
//
// A body is a __host__ __device__ callable of one int64_t index. On a device
// it runs as a grid-stride loop of 256-thread blocks on the Exec's stream; in
// emulation, as `for (i = 0; i < n; ++i) body(i)`. Bodies write only their
// own outputs, never read what another index writes, and use no atomics, so
// the two give the same values and a replay is bitwise the original (Note
// [replay equals original]).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/exec.h"

namespace dtr::cuda {

#define DTR_HD __host__ __device__ inline

template <typename F>
__global__ void grid_stride_kernel(int64_t n, F body) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) body(i);
}

/// Launch shape (cuda/exec.h): threads per block and blocks of n indices.
inline constexpr int kThreads = kThreadsPerBlock;
inline unsigned blocks_for(int64_t n) { return launch_blocks(n); }

/// Runs body(i) for i in [0, n) on `e`.
template <typename F>
void launch(const Exec& e, int64_t n, F body, const char* name) {
  if (n <= 0) return;
  if (e.emulate) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
  grid_stride_kernel<<<launch_blocks(n), kThreadsPerBlock, 0, static_cast<cudaStream_t>(e.stream)>>>(n, body);
  check_launch(name);
}

// ---- element access ----------------------------------------------------------------

DTR_HD float bf16_bits_to_float(uint16_t b) { return __bfloat162float(__ushort_as_bfloat16(b)); }
DTR_HD float half_bits_to_float(uint16_t b) { return __half2float(__ushort_as_half(b)); }
DTR_HD uint16_t float_to_bf16_bits(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
DTR_HD uint16_t float_to_half_bits(float f) { return __half_as_ushort(__float2half_rn(f)); }

/// The element at `p` of dtype `dt` as C (float16/bfloat16 through float32).
template <typename C>
DTR_HD C load(const std::byte* p, DType dt) {
  switch (dt) {
    case DType::kFloat32: return C(*reinterpret_cast<const float*>(p));
    case DType::kFloat64: return C(*reinterpret_cast<const double*>(p));
    case DType::kFloat16: return C(half_bits_to_float(*reinterpret_cast<const uint16_t*>(p)));
    case DType::kBFloat16: return C(bf16_bits_to_float(*reinterpret_cast<const uint16_t*>(p)));
    case DType::kInt64: return C(*reinterpret_cast<const int64_t*>(p));
    case DType::kInt32: return C(*reinterpret_cast<const int32_t*>(p));
    case DType::kBool: return C(*reinterpret_cast<const uint8_t*>(p) != 0 ? 1 : 0);
    case DType::kUInt8: return C(*reinterpret_cast<const uint8_t*>(p));
  }
  return C(0);
}

/// Stores v (of type C) at `p` as dtype `dt`: rounded to nearest even for
/// float16/bfloat16, nonzero as true for bool, truncated toward zero (and
/// wrapped for uint8, like PyTorch's) for the integer dtypes.
template <typename C>
DTR_HD void store(std::byte* p, DType dt, C v) {
  switch (dt) {
    case DType::kFloat32: *reinterpret_cast<float*>(p) = float(v); return;
    case DType::kFloat64: *reinterpret_cast<double*>(p) = double(v); return;
    case DType::kFloat16: *reinterpret_cast<uint16_t*>(p) = float_to_half_bits(float(v)); return;
    case DType::kBFloat16: *reinterpret_cast<uint16_t*>(p) = float_to_bf16_bits(float(v)); return;
    case DType::kInt64: *reinterpret_cast<int64_t*>(p) = int64_t(v); return;
    case DType::kInt32: *reinterpret_cast<int32_t*>(p) = int32_t(int64_t(v)); return;
    case DType::kBool: *reinterpret_cast<uint8_t*>(p) = v != C(0) ? 1 : 0; return;
    case DType::kUInt8: *reinterpret_cast<uint8_t*>(p) = uint8_t(int64_t(v)); return;
  }
}

/// An operand of dtype `dt` at `p`: element k (an element offset, `sz`
/// bytes each) read as T.
struct Input {
  const std::byte* p;
  DType dt;
  int64_t sz;
  template <typename T>
  DTR_HD T at(int64_t k) const {
    return load<T>(p + k * sz, dt);
  }
};

inline Input input_of(const std::byte* x, DType dt) { return Input{x, dt, itemsize(dt)}; }

/// Byte offsets of linear index i (row-major over L.sizes) for each operand.
template <int N>
DTR_HD void offsets_of(const ElementwiseLayout<N>& L, int64_t i, int64_t (&off)[N]) {
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int d = L.ndim - 1; d >= 0; --d) {
    const int64_t size = L.sizes[d];
    const int64_t idx = i % size;
    i /= size;
    for (int k = 0; k < N; ++k) off[k] += idx * L.strides[k][d];
  }
}

template <typename C, int N, typename F>
struct MapBody {
  ElementwiseLayout<N> L;
  F f;
  DTR_HD void operator()(int64_t i) const {
    int64_t off[N];
    offsets_of(L, i, off);
    C r;
    if constexpr (N == 1) {
      r = f();
    } else if constexpr (N == 2) {
      r = f(load<C>(L.data[1] + off[1], L.dtype[1]));
    } else if constexpr (N == 3) {
      r = f(load<C>(L.data[1] + off[1], L.dtype[1]), load<C>(L.data[2] + off[2], L.dtype[2]));
    } else {
      r = f(load<C>(L.data[1] + off[1], L.dtype[1]), load<C>(L.data[2] + off[2], L.dtype[2]),
            load<C>(L.data[3] + off[3], L.dtype[3]));
    }
    store<C>(L.data[0] + off[0], L.dtype[0], r);
  }
};

/// out = f(in_1, ..., in_{N-1}) elementwise, computed in C and converted on
/// load and store.
template <typename C, int N, typename F>
void map_elements(const Exec& e, const ElementwiseLayout<N>& L, F f, const char* name) {
  static_assert(N >= 1 && N <= 4, "map_elements takes 0 to 3 inputs");
  launch(e, L.numel, MapBody<C, N, F>{L, f}, name);
}

/// Calls f(C{}) with C the compute type of `dt`, as cpu/elementwise.h's
/// compute_type_dispatch: float for float32/float16/bfloat16, double for
/// float64, int64_t otherwise.
template <typename F>
void compute_dispatch(DType dt, F&& f) {
  switch (dt) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16: f(float{}); return;
    case DType::kFloat64: f(double{}); return;
    default: f(int64_t{}); return;
  }
}

}  // namespace dtr::cuda
