// GEMM through OpenBLAS and the float32 staging used by the kernels of the
// linalg and conv families (cpu/linalg.cpp, cpu/conv.cpp).
//
// Note [determinism] for GEMM: OpenBLAS computes each output element with one
// kernel over the full K range; for a fixed OpenBLAS thread count its results
// are bitwise reproducible. We fix that count once, at kernel registration
// (fix_blas_threads), to OPENBLAS_NUM_THREADS when the user set it and to
// dtr::num_threads() otherwise; later dtr::set_num_threads calls do not
// change it. GEMMs of a batch run one after another, so no result depends on
// dtr's thread count.
//
// Call gemm only from the thread that runs the kernel, never inside a
// parallel_for: the pthread build of OpenBLAS called from OpenMP worker
// threads is 10-40x slower (measured on OpenBLAS 0.3.21), even with one
// OpenBLAS thread. Large GEMMs are threaded by OpenBLAS itself.
#pragma once

#include <cstdint>

#include "core/op_registry.h"

namespace dtr::cpu {

/// C (M, N) = alpha * op(A) @ op(B) + beta * C, all row-major; op(A) is
/// (M, K) and op(B) is (K, N); op(X) = X^T when trans_x. lda/ldb/ldc are row
/// strides in elements. K == 0 gives beta * C (zero when beta == 0).
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
          const double* A, int64_t lda, const double* B, int64_t ldb, double beta, double* C,
          int64_t ldc);

/// Sets OpenBLAS's thread count once per process (see the note above).
void fix_blas_threads();

/// Runs `kernel` with every float16/bfloat16 operand converted to a
/// contiguous float32 copy, then rounds the float32 outputs back to their
/// dtypes (round to nearest even). Other operands pass through unchanged.
/// How the lower-precision dtypes run GEMM-based kernels.
void run_in_float32(const KernelContext& ctx, KernelFn kernel);

/// True when some operand of `ctx` is float16 or bfloat16.
bool has_half_operand(const KernelContext& ctx);

}  // namespace dtr::cpu
