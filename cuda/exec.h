// What host code hands a CUDA kernel, in types nvcc's front end and g++ both
// read: no fmt, no Abseil (the kernels in cuda/*.cu include only this,
// cuda/launch.cuh and the CUDA headers; cuda/*.cpp turn KernelContext into
// these and raise the typed errors).
//
// Every kernel body is a __host__ __device__ function of one index, so the
// same code runs as a CUDA grid on a device or as a plain host loop over host
// memory (Note [host emulation of CUDA kernels]). The emulation is how the
// kernels' indexing, broadcasting, dtype conversion and math are tested on a
// machine without a GPU: the conformance harness runs them on the test
// device (tests/second_device.h) against PyTorch's values.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace dtr::cuda {

/// Where a launch runs: `stream` (a cudaStream_t) on the current device, or,
/// when `emulate` is set, on the host over host memory, one index at a time
/// in increasing order.
struct Exec {
  void* stream = nullptr;
  bool emulate = false;
};

/// Dims an elementwise layout keeps after merging (cpu/elementwise.h merges
/// the same way); more is a NotImplementedError of the wrapper.
inline constexpr int kMaxDims = 8;

/// N operands (output first) over one iteration space: sizes outermost
/// first, byte strides per operand, element dtypes per operand.
template <int N>
struct ElementwiseLayout {
  int ndim = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};
  std::byte* data[N] = {};
  DType dtype[N] = {};
};

/// Threads per block of every launch, and the blocks of a launch of `n`
/// indices: one index per thread, at most 2^20 blocks (a grid-stride loop
/// covers the rest); 0 for n <= 0. cuda/launch.cuh launches with these.
inline constexpr int kThreadsPerBlock = 256;
inline constexpr int64_t kMaxBlocks = int64_t{1} << 20;
constexpr unsigned launch_blocks(int64_t n) {
  if (n <= 0) return 0;
  const int64_t b = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return unsigned(b < kMaxBlocks ? b : kMaxBlocks);
}

/// Throws the typed error for a failed CUDA call `what` (cuda/runtime.cpp):
/// OutOfMemoryError for cudaErrorMemoryAllocation, DeviceError otherwise.
[[noreturn]] void throw_cuda_error(int error, const char* what, const char* file, int line);
/// Checks the last launch on the calling thread (cudaGetLastError).
void check_launch(const char* kernel);
/// Gives the entirely free segments of the current device's caching
/// allocator back to the device (cuda/runtime.cpp), for kernel scratch
/// that found no memory outside them.
void release_cached_segments();

}  // namespace dtr::cuda
