// cuBLAS and cuDNN on the CUDA backend (cuda/libraries.cpp): one handle per
// thread and device (Note [library handles per thread], cuda/handle_pool.h),
// created on first use, so that without a driver nothing calls into either
// library. Read by cuda/*_ops.cpp only.
//
// cuBLAS is loaded at run time (dlopen of libcublas.so.<major>, the major
// version built against) on the first GEMM on a device, not linked: loading
// libcublas and libcublasLt costs every process ~50 ms and ~200 MB of
// mappings, which a process that never multiplies on a GPU (every CPU
// program of a CUDA build) should not pay. Its entry points are the
// Cublas table below. cuDNN's loader is a small stub that loads its engines
// itself, so it stays linked.
//
// Note [library determinism]: both handles run on the legacy default stream
// (cudaStreamLegacy), the stream of every kernel and copy of the backend
// (cuda/runtime.h). cuBLAS gets a fixed workspace of its own
// (cublasSetWorkspace: with it, and one stream, cuBLAS picks the same
// algorithm and reduction order every call of one shape on one device),
// atomics off, and CUBLAS_DEFAULT_MATH with
// CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION, so float32 GEMMs are true
// FP32 (no TF32; there is no switch to turn TF32 on) and float16/bfloat16
// GEMMs accumulate in float32 throughout. Every thread's handle is set up
// the same way, with a workspace of the same size, so a replay on another
// thread picks the same algorithm. cuDNN convolutions use deterministic
// algorithms chosen once per shape and FMA math for float32 (Note [cudnn
// determinism], cuda/conv_ops.cpp).
// Verified here: compiles and links (ldd build/libdtr.so names libcublas
// and libcudnn). Not verified: any call, since no GPU was at hand.
#pragma once

#include <cstddef>

#include <cublas_v2.h>
#include <cudnn.h>

namespace dtr::cuda {

/// The cuBLAS entry points the backend calls, with cuBLAS's own signatures.
struct Cublas {
  decltype(&::cublasCreate) create;
  decltype(&::cublasDestroy) destroy;
  decltype(&::cublasSetStream) set_stream;
  decltype(&::cublasSetWorkspace) set_workspace;
  decltype(&::cublasSetMathMode) set_math_mode;
  decltype(&::cublasSetAtomicsMode) set_atomics_mode;
  decltype(&::cublasSetPointerMode) set_pointer_mode;
  decltype(&::cublasGetStatusString) get_status_string;
  decltype(&::cublasSgemmStridedBatched) sgemm_strided_batched;
  decltype(&::cublasDgemmStridedBatched) dgemm_strided_batched;
  /// The exported overload (compute type cublasComputeType_t; the header's
  /// inline cudaDataType one only converts to it).
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                            const void*, const void*, cudaDataType, int, long long, const void*,
                                            cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                            long long, int, cublasComputeType_t, cublasGemmAlgo_t);
};

/// cuBLAS, loaded on the first call (thread-safe). DeviceError naming the
/// library and dlerror()'s reason when it or one of its symbols is missing.
const Cublas& cublas();

/// The calling thread's cuBLAS handle for device `device`, bound to
/// cudaStreamLegacy with its own 32 MiB workspace (Note [library
/// determinism]; the workspace is cudaMalloc'd outside the caching
/// allocator and the budget). Made on the thread's first call for the
/// device, or taken from a thread that ended; DeviceError on failure.
cublasHandle_t cublas_handle(int device);

/// The calling thread's cuDNN handle for device `device`, bound to
/// cudaStreamLegacy; made or reused as cublas_handle's. DeviceError on failure.
cudnnHandle_t cudnn_handle(int device);

/// DeviceError naming `what` for a failed cuBLAS call; OutOfMemoryError for
/// CUBLAS_STATUS_ALLOC_FAILED; NotImplementedError for CUBLAS_STATUS_NOT_SUPPORTED.
void check_cublas(cublasStatus_t rc, const char* what);
/// The same for cuDNN (the CUDNN_STATUS_NOT_SUPPORTED category, 3000-3999:
/// NotImplementedError).
void check_cudnn(cudnnStatus_t rc, const char* what);
#define DTR_CUBLAS_CHECK(expr) ::dtr::cuda::check_cublas((expr), #expr)
#define DTR_CUDNN_CHECK(expr) ::dtr::cuda::check_cudnn((expr), #expr)

}  // namespace dtr::cuda
