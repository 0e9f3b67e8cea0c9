// Launchers of the linear-algebra family's own kernels (cuda/linalg.cu): the
// copies and fills around the cuBLAS GEMMs of cuda/linalg_ops.cpp, and
// integer matmul, which cuBLAS has no GEMM for. Their bodies run on a device
// or under host emulation (Note [host emulation of CUDA kernels]).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/exec.h"

namespace dtr::cuda {

/// A batch of (rows, cols) matrices: matrix b's element (r, c) lies at
/// element offset off(b) + r * rs + c * cs from `data`, off(b) the offset
/// of batch index b (row-major over `batch`) under `batch_strides` (0 where
/// broadcast). Strides in elements of `dtype`.
struct MatrixBatch {
  const std::byte* data = nullptr;
  DType dtype = DType::kFloat32;
  int ndim = 0;
  int64_t batch[kMaxDims] = {};
  int64_t batch_strides[kMaxDims] = {};
  int64_t rows = 0, cols = 0, rs = 0, cs = 0;
};

/// dst (nb, rows, cols), contiguous, of src's dtype = src's matrices, one
/// per batch index (broadcast ones repeated).
void launch_pack_matrices(const MatrixBatch& src, std::byte* dst, const Exec& e);

/// out (M, N), contiguous, of dtype `dt`: every row = bias (N) of dtype `dt`.
void launch_fill_rows(std::byte* out, const std::byte* bias, DType dt, int64_t M, int64_t N, const Exec& e);

/// Zeros C_i (M, N) with row stride ldc for i < batch, batch stride sc (elements of `dt`).
void launch_zero_matrices(std::byte* C, DType dt, int64_t batch, int64_t M, int64_t N, int64_t ldc, int64_t sc,
                          const Exec& e);

/// out (nb, M, N), contiguous, of dtype `out_dt` = a (nb, M, K) @ b (nb, K, N)
/// for integer dtypes, accumulating in 64 bits with wrap-around and stored
/// as out's dtype (cpu/linalg.cpp matmul_integer). a.rows = M, a.cols = K,
/// b.rows = K, b.cols = N; both batches over the same batch shape.
void launch_matmul_integer(const MatrixBatch& a, const MatrixBatch& b, std::byte* out, DType out_dt,
                           const Exec& e);

}  // namespace dtr::cuda
