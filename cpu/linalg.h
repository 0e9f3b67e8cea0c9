// GEMM through oneDNN and OpenBLAS, and the float32 staging used by the
// kernels of the linalg and conv families (cpu/linalg.cpp, cpu/conv.cpp).
//
// Note [determinism] for GEMM: OpenBLAS's results depend on its own thread
// count (measured on 0.3.21: the threaded and single-threaded paths, and
// different thread counts, round differently). So OpenBLAS always runs with
// one thread (fix_blas_threads) and dtr's pool (core/parallel.h) does the
// threading: gemm cuts C into blocks of whole rows or whole columns chosen
// from (M, N, K) alone (gemm_blocks) and makes one single-threaded BLAS call
// per block. Every thread count makes the same calls, so C is bitwise the
// same; one pool serves both GEMM and the other kernels, so nothing
// oversubscribes the cores. gemm may be called inside a parallel_for (the
// inner loop then runs its blocks on the calling thread).
//
// With DTR_ONEDNN_GEMM on (off by default), a float32 block whose shape
// onednn_gemm_shape admits goes to oneDNN's matmul primitive
// (cpu/onednn_gemm.h: made for and run on one OpenMP thread, like the
// convolutions) where oneDNN is built in and has a brgemm kernel for it;
// other blocks, float64, and builds without oneDNN go to OpenBLAS. For a
// given setting the choice is a function of the block's shape, so it keeps
// the property above, and a replay makes the same call as the first run
// (the setting must not change while recorded lineage may replay).
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

/// Multiply-adds a GEMM block aims for, and the fewest rows (or columns) a
/// block may have; see gemm_blocks.
inline constexpr int64_t kGemmBlockMacs = int64_t{1} << 23;
inline constexpr int64_t kGemmMinBlock = 128;

/// How gemm cuts C (M, N): `count` blocks of `size` whole rows (`rows`) or
/// whole columns, the last one possibly shorter; count == 1 means one call.
/// The count is a power of two, halved-block work stays >= kGemmBlockMacs
/// and blocks stay >= kGemmMinBlock long; the blocks' ends are multiples of 16.
struct GemmBlocks {
  bool rows = true;
  int64_t size = 0;
  int64_t count = 1;
};
GemmBlocks gemm_blocks(int64_t M, int64_t N, int64_t K);

/// Sets OpenBLAS to one thread, once per process (see the note above).
void fix_blas_threads();

/// Runs `kernel` with every float16/bfloat16 operand converted to a
/// contiguous float32 copy, then rounds the float32 outputs back to their
/// dtypes (round to nearest even). Other operands pass through unchanged.
/// How the lower-precision dtypes run GEMM-based kernels.
void run_in_float32(const KernelContext& ctx, KernelFn kernel);

/// True when some operand of `ctx` is float16 or bfloat16.
bool has_half_operand(const KernelContext& ctx);

/// An operand of torch.matmul as a batch of (rows, cols) matrices. A 1-D left
/// operand is a (1, K) row (left_form), a 1-D right operand a (K, 1) column
/// (right_form). Shared with the CUDA kernel (cuda/linalg_ops.cpp).
struct MatrixForm {
  Shape batch;
  Strides batch_strides;
  int64_t rows = 0, cols = 0;
  int64_t rs = 0, cs = 0;  // element strides of a row step and a column step
};
MatrixForm left_form(const TensorArg& t);
MatrixForm right_form(const TensorArg& t);

/// How BLAS can read a (rows, cols) matrix with strides (rs, cs): row-major
/// (no transpose, ld = rs) or column-major (transpose, ld = cs); !ok when
/// neither (the kernel packs a copy). Size-1 dims carry no meaningful stride.
struct BlasLayout {
  bool ok = false;
  bool trans = false;
  int64_t ld = 0;
};
BlasLayout blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs);

}  // namespace dtr::cpu
