// cuBLAS and cuDNN handles per thread and device (cuda/libraries.h, Note
// [library determinism], Note [library handles per thread]).
#include "cuda/libraries.h"

#include <dlfcn.h>

#include <array>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda/handle_pool.h"
#include "cuda/runtime.h"

namespace dtr::cuda {
namespace {

constexpr int kMaxHandles = 64;  // cuda/runtime.cpp's kMaxDevices

// cuBLAS's recommended workspace: 32 MiB on Hopper, 4 MiB before (cuBLAS
// docs, cublasSetWorkspace); the larger for every device keeps one rule.
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

void check_index(int device) {
  DTR_CHECK(device >= 0 && device < kMaxHandles && device < devices_present(), DeviceError,
            "cuda:{}: {} cuda devices present", device, devices_present());
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
  DTR_RESOLVE(destroy, cublasDestroy);
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

namespace {

// Note [library handles per thread]: a handle per thread and device.

/// cudaMalloc of `nbytes` outside the caching allocator; when the device is
/// full, the allocator's free segments go back to it and the call is tried
/// once more (free memory held in the cache is no shortage).
void* device_malloc(size_t nbytes, const char* what) {
  void* p = nullptr;
  cudaError_t rc = cudaMalloc(&p, nbytes);
  if (rc == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    release_cached_segments();
    rc = cudaMalloc(&p, nbytes);
  }
  check(rc, what);
  return p;
}

/// `create(&h)` for a library whose handle allocates device memory: on an
/// allocation failure the cache goes back to the device and it is tried once
/// more.
template <typename Status, typename Create>
Status create_retrying(Create create, Status alloc_failed) {
  Status rc = create();
  if (rc == alloc_failed) {
    release_cached_segments();
    rc = create();
  }
  return rc;
}

cublasHandle_t make_cublas_handle(int device) {
  DeviceGuard guard(device);
  cublasHandle_t made = nullptr;
  DTR_CUBLAS_CHECK(create_retrying([&] { return cublas().create(&made); }, CUBLAS_STATUS_ALLOC_FAILED));
  void* workspace = nullptr;
  try {
    workspace = device_malloc(kCublasWorkspaceBytes, "cudaMalloc of the cuBLAS workspace");
    DTR_CUBLAS_CHECK(cublas().set_stream(made, cudaStreamLegacy));
    DTR_CUBLAS_CHECK(cublas().set_workspace(made, workspace, kCublasWorkspaceBytes));
    // True FP32 for float32, and no reduced-precision reductions for float16
    // and bfloat16 inputs: their products accumulate in float32 all the way
    // (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION), as the CPU's do.
    DTR_CUBLAS_CHECK(cublas().set_math_mode(
        made, cublasMath_t(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    DTR_CUBLAS_CHECK(cublas().set_atomics_mode(made, CUBLAS_ATOMICS_NOT_ALLOWED));
    DTR_CUBLAS_CHECK(cublas().set_pointer_mode(made, CUBLAS_POINTER_MODE_HOST));
  } catch (...) {  // nothing is kept: the next call makes a handle afresh
    (void)cublas().destroy(made);
    if (workspace != nullptr && cudaFree(workspace) != cudaSuccess) (void)cudaGetLastError();
    throw;
  }
  return made;
}

cudnnHandle_t make_cudnn_handle(int device) {
  DeviceGuard guard(device);
  cudnnHandle_t made = nullptr;
  DTR_CUDNN_CHECK(create_retrying([&] { return cudnnCreate(&made); }, CUDNN_STATUS_ALLOC_FAILED));
  if (const cudnnStatus_t rc = cudnnSetStream(made, cudaStreamLegacy); rc != CUDNN_STATUS_SUCCESS) {
    (void)cudnnDestroy(made);
    check_cudnn(rc, "cudnnSetStream");
  }
  return made;
}

}  // namespace

cublasHandle_t cublas_handle(int device) {
  check_index(device);
  static auto* pool = new ThreadHandlePool<cublasHandle_t>(make_cublas_handle);  // never destroyed
  return pool->get(device);
}

cudnnHandle_t cudnn_handle(int device) {
  check_index(device);
  static auto* pool = new ThreadHandlePool<cudnnHandle_t>(make_cudnn_handle);  // never destroyed
  return pool->get(device);
}

}  // namespace dtr::cuda
