// cuBLAS and cuDNN handles per device (cuda/libraries.h, Note [library
// determinism]).
#include "cuda/libraries.h"

#include <dlfcn.h>

#include <array>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda/runtime.h"

namespace dtr::cuda {
namespace {

constexpr int kMaxHandles = 64;  // cuda/runtime.cpp's kMaxDevices

// cuBLAS's recommended workspace: 32 MiB on Hopper, 4 MiB before (cuBLAS
// docs, cublasSetWorkspace); the larger for every device keeps one rule.
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

struct Handles {
  std::mutex mu;
  std::array<cublasHandle_t, kMaxHandles> cublas{};
  std::array<void*, kMaxHandles> cublas_workspace{};
  std::array<cudnnHandle_t, kMaxHandles> cudnn{};
};

Handles& handles() {
  static Handles* h = new Handles;  // never destroyed: handles outlive static destructors
  return *h;
}

void check_index(int device) {
  DTR_CHECK(device >= 0 && device < kMaxHandles && device < device_count(), DeviceError,
            "cuda:{}: {} cuda devices present", device, device_count());
}

#define DTR_CUDA_STR2(x) #x
#define DTR_CUDA_STR(x) DTR_CUDA_STR2(x)

/// The symbol `name` of `lib` as `fn`'s type; DeviceError when missing.
template <typename Fn>
void resolve(void* lib, const char* soname, const char* name, Fn& fn) {
  void* sym = dlsym(lib, name);
  DTR_CHECK(sym != nullptr, DeviceError, "{}: no symbol {}: {}", soname, name, dlerror());
  fn = reinterpret_cast<Fn>(sym);
}

Cublas load_cublas() {
  static constexpr const char* kSoname = "libcublas.so." DTR_CUDA_STR(CUBLAS_VER_MAJOR);
  // Never closed: handles and kernels live until the process exits.
  void* lib = dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
  DTR_CHECK(lib != nullptr, DeviceError, "cannot load cuBLAS ({}): {}", kSoname, dlerror());
  Cublas api{};
  // The macros of cublas_v2.h (cublasCreate -> cublasCreate_v2) name the
  // exported symbols after expansion.
#define DTR_RESOLVE(field, fn) resolve(lib, kSoname, DTR_CUDA_STR(fn), api.field)
  DTR_RESOLVE(create, cublasCreate);
  DTR_RESOLVE(set_stream, cublasSetStream);
  DTR_RESOLVE(set_workspace, cublasSetWorkspace);
  DTR_RESOLVE(set_math_mode, cublasSetMathMode);
  DTR_RESOLVE(set_atomics_mode, cublasSetAtomicsMode);
  DTR_RESOLVE(set_pointer_mode, cublasSetPointerMode);
  DTR_RESOLVE(get_status_string, cublasGetStatusString);
  DTR_RESOLVE(sgemm_strided_batched, cublasSgemmStridedBatched);
  DTR_RESOLVE(dgemm_strided_batched, cublasDgemmStridedBatched);
  DTR_RESOLVE(gemm_strided_batched_ex, cublasGemmStridedBatchedEx);
#undef DTR_RESOLVE
  return api;
}

}  // namespace

const Cublas& cublas() {
  static const Cublas api = load_cublas();  // a failed load throws, and the next call retries
  return api;
}

void check_cublas(cublasStatus_t rc, const char* what) {
  if (rc == CUBLAS_STATUS_SUCCESS) [[likely]] return;
  std::string msg = fmt::format("{} failed: {} ({})", what, cublas().get_status_string(rc), int(rc));
  if (rc == CUBLAS_STATUS_ALLOC_FAILED) throw OutOfMemoryError(std::move(msg));
  if (rc == CUBLAS_STATUS_NOT_SUPPORTED) throw NotImplementedError(std::move(msg));
  throw DeviceError(std::move(msg));
}

void check_cudnn(cudnnStatus_t rc, const char* what) {
  if (rc == CUDNN_STATUS_SUCCESS) [[likely]] return;
  std::string msg = fmt::format("{} failed: {} ({})", what, cudnnGetErrorString(rc), int(rc));
  if (rc == CUDNN_STATUS_ALLOC_FAILED) throw OutOfMemoryError(std::move(msg));
  if (CUDNN_STATUS_CATEGORY(rc) == CUDNN_STATUS_NOT_SUPPORTED) throw NotImplementedError(std::move(msg));
  throw DeviceError(std::move(msg));
}

cublasHandle_t cublas_handle(int device) {
  check_index(device);
  Handles& h = handles();
  std::lock_guard lock(h.mu);
  set_device(device);
  cublasHandle_t& handle = h.cublas[size_t(device)];
  if (handle != nullptr) return handle;
  cublasHandle_t made = nullptr;
  DTR_CUBLAS_CHECK(cublas().create(&made));
  void* workspace = nullptr;
  DTR_CUDA_CHECK(cudaMalloc(&workspace, kCublasWorkspaceBytes));
  DTR_CUBLAS_CHECK(cublas().set_stream(made, cudaStreamLegacy));
  DTR_CUBLAS_CHECK(cublas().set_workspace(made, workspace, kCublasWorkspaceBytes));
  DTR_CUBLAS_CHECK(cublas().set_math_mode(made, CUBLAS_DEFAULT_MATH));
  DTR_CUBLAS_CHECK(cublas().set_atomics_mode(made, CUBLAS_ATOMICS_NOT_ALLOWED));
  DTR_CUBLAS_CHECK(cublas().set_pointer_mode(made, CUBLAS_POINTER_MODE_HOST));
  h.cublas_workspace[size_t(device)] = workspace;
  handle = made;
  return handle;
}

cudnnHandle_t cudnn_handle(int device) {
  check_index(device);
  Handles& h = handles();
  std::lock_guard lock(h.mu);
  set_device(device);
  cudnnHandle_t& handle = h.cudnn[size_t(device)];
  if (handle != nullptr) return handle;
  cudnnHandle_t made = nullptr;
  DTR_CUDNN_CHECK(cudnnCreate(&made));
  DTR_CUDNN_CHECK(cudnnSetStream(made, cudaStreamLegacy));
  handle = made;
  return handle;
}

}  // namespace dtr::cuda
