// The CUDA kernels of matmul and linear (cpu/linalg.cpp's rows) on cuBLAS:
// float32 through cublasSgemmStridedBatched (true FP32, TF32 off: Note
// [library determinism]), float64 through cublasDgemmStridedBatched,
// float16/bfloat16 through cublasGemmStridedBatchedEx with float32 compute
// (CUBLAS_COMPUTE_32F), as the CPU computes them in float32; integer matmul
// by cuda/linalg.cu's own kernel. Not emulatable (they call cuBLAS).
//
// Row-major tensors as column-major cuBLAS: a row-major (r, c) matrix with
// leading dimension ld is the column-major (c, r) matrix with that ld, so
// C (M, N) = A (M, K) B (K, N) is computed as C^T = B^T A^T: cuBLAS's m = N,
// n = M, its first operand B, its second A.
//
// Verified here: compiles and links. Not verified: any run (no GPU was at
// hand); the integer kernel and the packing copies are tested under host
// emulation through their launchers (tests/cuda/linalg_conv_test.cpp).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <limits>

#include "cpu/linalg.h"
#include "cuda/gemm.h"
#include "cuda/kernel_util.h"
#include "cuda/libraries.h"
#include "cuda/linalg.h"
#include "cuda/scratch.h"

namespace dtr::cuda {
namespace {

using cpu::blas_layout;
using cpu::left_form;
using cpu::right_form;
using Form = cpu::MatrixForm;
using Layout = cpu::BlasLayout;

// The one stride s with offset(i) = i * s for every batch index i
// (row-major over `batch`), if there is one: what a strided-batched GEMM
// can take. Broadcast dims have stride 0.
bool single_batch_stride(IntList batch, IntList strides, int64_t& s) {
  int64_t inner = 1;  // product of the sizes inside dim d
  bool have = false;
  s = 0;
  for (int64_t d = int64_t(batch.size()) - 1; d >= 0; --d) {
    const int64_t size = batch[size_t(d)], st = strides[size_t(d)];
    if (size == 1) continue;
    if (!have) {
      // The innermost non-trivial dim fixes s; dims outside must continue it.
      if (st % inner != 0) return false;
      s = st / inner;
      have = true;
    } else if (st != s * inner) {
      return false;
    }
    inner *= size;
  }
  return true;
}

MatrixBatch matrix_batch(const TensorArg& t, const Form& f, IntList batch, IntList bstrides, std::string_view op) {
  DTR_CHECK(batch.size() <= size_t(kMaxDims), NotImplementedError,
            "{}: {} batch dims; the CUDA kernel takes at most {}", op, batch.size(), kMaxDims);
  MatrixBatch m;
  m.data = t.data;
  m.dtype = t.dtype;
  m.ndim = int(batch.size());
  for (size_t d = 0; d < batch.size(); ++d) {
    m.batch[d] = batch[d];
    m.batch_strides[d] = bstrides[d];
  }
  m.rows = f.rows;
  m.cols = f.cols;
  m.rs = f.rs;
  m.cs = f.cs;
  return m;
}

int to_int(int64_t v, std::string_view what) {
  DTR_CHECK(v <= int64_t(std::numeric_limits<int>::max()), ValueError,
            "gemm: {} {} exceeds the range of cuBLAS's int", what, v);
  return int(v);
}

cublasOperation_t op_of(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

cudaDataType_t cuda_type(DType dt) {
  switch (dt) {
    case kFloat16: return CUDA_R_16F;
    case kBFloat16: return CUDA_R_16BF;
    case kFloat64: return CUDA_R_64F;
    default: return CUDA_R_32F;
  }
}

/// Strided-batched column-major GEMM: C_i = alpha op(A_i) op(B_i) + beta C_i
/// for i < batch, C (m, n) with ldc, in dtype `dt` (float16/bfloat16 with
/// float32 compute and float32 alpha/beta). Batches of at most 65535 per
/// call (the grid-dimension limit some cuBLAS kernels map batches to).
void gemm_strided_batched(int device, DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                          const std::byte* A, int64_t lda, int64_t stride_a, const std::byte* B, int64_t ldb,
                          int64_t stride_b, double beta, std::byte* C, int64_t ldc, int64_t stride_c,
                          int64_t batch) {
  cublasHandle_t h = cublas_handle(device);
  const int64_t isz = itemsize(dt);
  const int M = to_int(m, "dimension"), N = to_int(n, "dimension"), K = to_int(k, "dimension");
  const int LDA = to_int(std::max<int64_t>(lda, 1), "leading dimension");
  const int LDB = to_int(std::max<int64_t>(ldb, 1), "leading dimension");
  const int LDC = to_int(std::max<int64_t>(ldc, 1), "leading dimension");
  constexpr int64_t kMaxBatch = 65535;
  for (int64_t b0 = 0; b0 < batch; b0 += kMaxBatch) {
    const int count = int(std::min(kMaxBatch, batch - b0));
    const std::byte* a = A + b0 * stride_a * isz;
    const std::byte* b = B + b0 * stride_b * isz;
    std::byte* c = C + b0 * stride_c * isz;
    if (dt == kFloat64) {
      const double al = alpha, be = beta;
      DTR_CUBLAS_CHECK(cublas().dgemm_strided_batched(h, op_of(ta), op_of(tb), M, N, K, &al,
                                                 reinterpret_cast<const double*>(a), LDA, stride_a,
                                                 reinterpret_cast<const double*>(b), LDB, stride_b, &be,
                                                 reinterpret_cast<double*>(c), LDC, stride_c, count));
    } else if (dt == kFloat32) {
      const float al = float(alpha), be = float(beta);
      DTR_CUBLAS_CHECK(cublas().sgemm_strided_batched(h, op_of(ta), op_of(tb), M, N, K, &al,
                                                 reinterpret_cast<const float*>(a), LDA, stride_a,
                                                 reinterpret_cast<const float*>(b), LDB, stride_b, &be,
                                                 reinterpret_cast<float*>(c), LDC, stride_c, count));
    } else {
      const float al = float(alpha), be = float(beta);
      const cudaDataType_t t = cuda_type(dt);
      DTR_CUBLAS_CHECK(cublas().gemm_strided_batched_ex(h, op_of(ta), op_of(tb), M, N, K, &al, a, t, LDA, stride_a, b, t,
                                                  LDB, stride_b, &be, c, t, LDC, stride_c, count,
                                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
  }
}

}  // namespace

void gemm_rm(int device, DType dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
             const std::byte* A, int64_t lda, int64_t sa, const std::byte* B, int64_t ldb, int64_t sb, double beta,
             std::byte* C, int64_t ldc, int64_t sc, int64_t batch) {
  if (M == 0 || N == 0 || batch == 0) return;
  if (K == 0) {
    if (beta == 0.0) launch_zero_matrices(C, dt, batch, M, N, ldc, sc, Exec{.stream = nullptr, .emulate = false});
    return;
  }
  // Column-major: C^T (N, M) = op(B)^T (N, K) op(A)^T (K, M), where a
  // row-major matrix's storage read column-major is its transpose.
  gemm_strided_batched(device, dt, tb, ta, N, M, K, alpha, B, ldb, sb, A, lda, sa, beta, C, ldc, sc, batch);
}

namespace {

// ---- matmul ---------------------------------------------------------------------
// inputs: a, b (any strides, one dtype); outputs: out (contiguous), shape as
// infer_matmul gives it: (broadcast batch, M, N) with the 1-D dims squeezed,
// which is (nb, M, N) in memory.

void matmul_kernel(const KernelContext& c) {
  const TensorArg &a = c.inputs[0], &b = c.inputs[1], &out = c.outputs[0];
  const Exec e = exec_for(c.device);
  const Form fa = left_form(a), fb = right_form(b);
  const int64_t M = fa.rows, K = fa.cols, N = fb.cols;
  const Shape batch = broadcast_shapes(fa.batch, fb.batch, "matmul");
  const int64_t nb = numel(batch);
  if (M == 0 || N == 0 || nb == 0) return;
  const Strides a_bs = broadcast_strides(fa.batch, fa.batch_strides, batch);
  const Strides b_bs = broadcast_strides(fb.batch, fb.batch_strides, batch);
  MatrixBatch ma = matrix_batch(a, fa, batch, a_bs, "matmul");
  MatrixBatch mb = matrix_batch(b, fb, batch, b_bs, "matmul");

  if (!is_floating(a.dtype)) {
    DTR_CHECK(a.dtype == kInt32 || a.dtype == kInt64 || a.dtype == kUInt8, NotImplementedError,
              "matmul: no CUDA kernel for dtype {}", dtype_name(a.dtype));
    launch_matmul_integer(ma, mb, out.data, out.dtype, e);
    return;
  }

  // Each operand as one strided batch cuBLAS reads directly, else packed
  // into a contiguous (nb, rows, cols) copy (broadcast batches repeated).
  const int64_t isz = itemsize(a.dtype);
  Layout la = blas_layout(M, K, fa.rs, fa.cs), lb = blas_layout(K, N, fb.rs, fb.cs);
  int64_t sa = 0, sb = 0;
  const bool a_direct = la.ok && single_batch_stride(batch, a_bs, sa);
  const bool b_direct = lb.ok && single_batch_stride(batch, b_bs, sb);
  Scratch a_copy(e, a_direct ? 0 : size_t(nb * M * K * isz));
  Scratch b_copy(e, b_direct ? 0 : size_t(nb * K * N * isz));
  const std::byte* A = a.data;
  const std::byte* B = b.data;
  if (!a_direct) {
    launch_pack_matrices(ma, a_copy.data(), e);
    A = a_copy.data();
    la = {true, false, std::max<int64_t>(K, 1)};
    sa = M * K;
  }
  if (!b_direct) {
    launch_pack_matrices(mb, b_copy.data(), e);
    B = b_copy.data();
    lb = {true, false, std::max<int64_t>(N, 1)};
    sb = K * N;
  }
  gemm_rm(c.device.index, a.dtype, la.trans, lb.trans, M, N, K, 1.0, A, la.ld, sa, B, lb.ld, sb, 0.0, out.data, N,
          M * N, nb);
}

// ---- linear ---------------------------------------------------------------------
// inputs: x (*, K), weight (N, K), optional bias (N), contiguous; outputs:
// out (*, N) = x @ weight^T + bias, the bias copied into every row of C
// first and added with beta = 1 (as the CPU).

void linear_kernel(const KernelContext& c) {
  const TensorArg &x = c.inputs[0], &w = c.inputs[1], &out = c.outputs[0];
  check_floating(x.dtype, c);
  const Exec e = exec_for(c.device);
  const int64_t K = w.shape[1], N = w.shape[0];
  const int64_t M = K == 0 ? out.numel() / std::max<int64_t>(N, 1) : x.numel() / K;
  if (M == 0 || N == 0) return;
  const bool has_bias = c.inputs.size() > 2;
  if (has_bias) launch_fill_rows(out.data, c.inputs[2].data, out.dtype, M, N, e);
  gemm_rm(c.device.index, x.dtype, /*ta=*/false, /*tb=*/true, M, N, K, 1.0, x.data, K, 0, w.data, K, 0,
          has_bias ? 1.0 : 0.0, out.data, N, 0, 1);
}

}  // namespace

void register_linalg_kernels() {
  set_cuda_kernel("matmul", matmul_kernel, /*emulatable=*/false);
  set_cuda_kernel("linear", linear_kernel, /*emulatable=*/false);
}

}  // namespace dtr::cuda
