// Kernel scratch memory of the CUDA kernels (host wrappers in cuda/*.cpp and
// launchers in cuda/*.cu alike, so it includes nothing nvcc cannot read):
// device memory from cudaMallocAsync on the launch's stream, freed with
// cudaFreeAsync after the work queued there (stream order keeps it alive for
// the launches that use it); host memory when the Exec emulates. Kernel
// scratch lies outside the tensor budget, as on the CPU (cpu/conv.cpp).
//
// One definition for every translation unit: two classes of one name in
// dtr::cuda would share inline member symbols (the destructor) across
// layouts, and the linker would keep either. read_back copies results (an
// error buffer) to the host.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "cuda/exec.h"

namespace dtr::cuda {

class Scratch {
 public:
  /// `nbytes` of scratch for launches on `e`; none (data() null) for 0.
  /// Throws OutOfMemoryError when the memory is not there.
  Scratch(const Exec& e, size_t nbytes) : exec_(e) {
    if (nbytes == 0) return;
    if (e.emulate) {
      data_ = static_cast<std::byte*>(std::malloc(nbytes));
      if (data_ == nullptr) throw_cuda_error(int(cudaErrorMemoryAllocation), "scratch malloc", __FILE__, __LINE__);
      return;
    }
    void* p = nullptr;
    cudaError_t rc = cudaMallocAsync(&p, nbytes, stream());
    if (rc == cudaErrorMemoryAllocation) {
      // The caching allocator's free segments may hold the memory (outside
      // any budget): give them back and try once more.
      (void)cudaGetLastError();
      release_cached_segments();
      rc = cudaMallocAsync(&p, nbytes, stream());
    }
    if (rc != cudaSuccess) throw_cuda_error(int(rc), "cudaMallocAsync (kernel scratch)", __FILE__, __LINE__);
    data_ = static_cast<std::byte*>(p);
  }
  ~Scratch() {
    if (data_ == nullptr) return;
    if (exec_.emulate) {
      std::free(data_);
    } else if (cudaFreeAsync(data_, stream()) != cudaSuccess) {
      // The context is gone (process exit): nothing left to free.
      (void)cudaGetLastError();
    }
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  std::byte* data() const { return data_; }
  template <typename T>
  T* as() const {
    return reinterpret_cast<T*>(data_);
  }

 private:
  // Exec's nullptr is the legacy default stream (cuda/runtime.h exec_for).
  cudaStream_t stream() const {
    return exec_.stream != nullptr ? static_cast<cudaStream_t>(exec_.stream) : cudaStreamLegacy;
  }
  Exec exec_;
  std::byte* data_ = nullptr;
};

/// Copies n bytes of device (or, under emulation, host) memory to the host;
/// on a device cudaMemcpy waits for the launches queued before it.
inline void read_back(void* dst, const void* src, size_t n, const Exec& e) {
  if (e.emulate) {
    std::memcpy(dst, src, n);
    return;
  }
  const cudaError_t rc = cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost);
  if (rc != cudaSuccess) throw_cuda_error(int(rc), "cudaMemcpy (error buffer)", __FILE__, __LINE__);
}

}  // namespace dtr::cuda
