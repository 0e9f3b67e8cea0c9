// Kernel scratch memory for the CUDA kernels' host side (cuda/*_ops.cpp):
// device memory from cudaMallocAsync on the launch's stream, freed with
// cudaFreeAsync after the work queued there (stream order keeps it alive
// for the launches that use it); host memory when the Exec emulates. Kernel
// scratch lies outside the tensor budget, as on the CPU (cpu/conv.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "cuda/exec.h"
#include "cuda/runtime.h"

namespace dtr::cuda {

class Scratch {
 public:
  Scratch(const Exec& e, size_t nbytes) : exec_(e) {
    if (nbytes == 0) return;
    if (e.emulate) {
      host_.resize(nbytes);
      data_ = host_.data();
      return;
    }
    void* p = nullptr;
    DTR_CUDA_CHECK(cudaMallocAsync(&p, nbytes, stream()));
    data_ = static_cast<std::byte*>(p);
  }
  ~Scratch() {
    // A failure here means the context is gone (process exit): nothing to free.
    if (!exec_.emulate && data_ != nullptr && cudaFreeAsync(data_, stream()) != cudaSuccess)
      (void)cudaGetLastError();
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
  std::vector<std::byte> host_;
  std::byte* data_ = nullptr;
};

}  // namespace dtr::cuda
