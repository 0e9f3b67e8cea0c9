// Row-major GEMM on cuBLAS for the CUDA kernels' host side (cuda/linalg_ops.cpp
// defines it; the attention kernels use it too). Never emulatable.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace dtr::cuda {

/// C_i = alpha op(A_i) op(B_i) + beta C_i for i < batch, all row-major with
/// row strides lda/ldb/ldc and batch strides sa/sb/sc (elements; 0 repeats
/// a matrix); op(A) (M, K), op(B) (K, N), op(X) = X^T when tX. dtype `dt`:
/// float32 (true FP32), float64, float16/bfloat16 with float32 compute.
/// K == 0 gives beta C (zeros for beta == 0). On device `device`'s cuBLAS
/// handle (the legacy default stream). Throws ValueError for a dimension
/// beyond cuBLAS's int.
void gemm_rm(int device, DType dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
             const std::byte* A, int64_t lda, int64_t sa, const std::byte* B, int64_t ldb, int64_t sb, double beta,
             std::byte* C, int64_t ldc, int64_t sc, int64_t batch);

}  // namespace dtr::cuda
