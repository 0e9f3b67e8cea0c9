// The CUDA backend's host side (cuda/runtime.cpp): devices, the one stream
// per device, error mapping, library handles, and the table of CUDA kernels
// (DESIGN.md "The CUDA backend"). Read by cuda/*.cpp only; nvcc never sees
// it (kernels in cuda/*.cu include cuda/exec.h).
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/device.h"
#include "core/op_registry.h"
#include "cuda/emulation.h"
#include "cuda/exec.h"

namespace dtr::cuda {

/// CUDA devices present (0 without a driver or a device; the reason is
/// logged once at debug level). Cached after the first call.
int devices_present();

/// Where a kernel for operands on `device` runs: on a CUDA device, that
/// device made current and its stream (the legacy default stream: the NCCL
/// backend's collectives order themselves after it); on any other device
/// type, host emulation over host memory (Note [host emulation of CUDA
/// kernels]).
Exec exec_for(Device device);

/// Makes device `index` current on the calling thread: cudaSetDevice,
/// skipped when cudaGetDevice says it already is (never a cached belief:
/// PyTorch or the program may change the current device in between).
void set_device(int index);

/// Makes device `index` current for its scope and then restores the device
/// that was current before (c10::cuda::CUDAGuard). Every host path of this
/// backend that calls the CUDA runtime for a device holds one, so no call
/// leaves the caller's current device changed.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  int index_ = -1;
};

/// Whether `error` is sticky: a fault of a kernel (illegal address,
/// misaligned address, illegal instruction, a failed device assert, ...)
/// after which the context is unusable and every later call of the process
/// returns it (Note [lost devices]). Such an error marks the device lost.
bool is_sticky_error(cudaError_t error);

/// Throws for a failed CUDA call: OutOfMemoryError for an allocation
/// failure, DeviceError naming `what` and CUDA's message otherwise.
void check(cudaError_t rc, const char* what);
#define DTR_CUDA_CHECK(expr) ::dtr::cuda::check((expr), #expr)

/// Binds `fn` as the CUDA kernel of op `name`. `emulatable`: its work is all
/// cuda/launch.cuh bodies (no cuBLAS or cuDNN call), so it also runs under
/// host emulation.
void set_cuda_kernel(std::string_view name, KernelFn fn, bool emulatable);

/// Binds every CUDA kernel into the op rows (cuda/register.cpp): the
/// backend's register_kernels slot.
void register_kernels();

}  // namespace dtr::cuda
