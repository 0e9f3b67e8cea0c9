// cuBLAS and cuDNN on the CUDA backend (cuda/libraries.cpp): one handle per
// device, created on first use, so that without a driver nothing calls into
// either library (the CPU suite runs in a build that links both). Read by
// cuda/*_ops.cpp only.
//
// Note [library determinism]: both handles run on the legacy default stream
// (cudaStreamLegacy), the stream of every kernel and copy of the backend
// (cuda/runtime.h). cuBLAS gets a fixed workspace of its own
// (cublasSetWorkspace: with it, and one stream, cuBLAS picks the same
// algorithm and reduction order every call of one shape on one device),
// atomics off, and CUBLAS_DEFAULT_MATH, so float32 GEMMs are true FP32 (no
// TF32; there is no switch to turn TF32 on). cuDNN convolutions use fixed
// deterministic algorithms and FMA math for float32 (cuda/conv_ops.cpp).
// Verified here: compiles and links (ldd build/libdtr.so names libcublas
// and libcudnn). Not verified: any call, since no GPU was at hand.
#pragma once

#include <cstddef>

#include <cublas_v2.h>
#include <cudnn.h>

namespace dtr::cuda {

/// The cuBLAS handle of device `device`: made current, bound to
/// cudaStreamLegacy with its own workspace (Note [library determinism]).
/// Created on the first call for the device; DeviceError on failure.
cublasHandle_t cublas_handle(int device);

/// The cuDNN handle of device `device`, bound to cudaStreamLegacy. Created on
/// the first call for the device; DeviceError on failure.
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
