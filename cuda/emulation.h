// Note [host emulation of CUDA kernels]: the CUDA kernels' bodies are
// __host__ __device__ functions of one index (cuda/launch.cuh), so the same
// code runs as a grid on a GPU or as a host loop over host memory. Bound
// under the test device (tests/second_device.h, DTR_TEST_DEVICE_KERNELS=cuda),
// the conformance harness runs them against PyTorch's values on a machine
// without a GPU: their indexing, broadcasting, strides, dtype conversions and
// math are tested there; launch configuration, device memory and the library
// calls (cuBLAS, cuDNN) only on a GPU. Declared without CUDA headers, for
// the tests.
#pragma once

#include <string>
#include <vector>

#include "core/device.h"

namespace dtr::cuda {

/// Binds the emulatable CUDA kernels as the kernels of device type `type` (a
/// test device over host memory), leaving its other kernels as they are,
/// and returns the names of the ops bound, sorted. Call after the op rows
/// exist (from a backend's register_kernels slot).
std::vector<std::string> bind_emulated_kernels(DeviceType type);

/// The ops with a CUDA kernel, sorted.
std::vector<std::string> ops_with_cuda_kernels();

}  // namespace dtr::cuda
