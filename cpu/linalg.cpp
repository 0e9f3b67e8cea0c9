// Linear algebra kernels: matmul (torch.matmul semantics, strided operands,
// batch broadcasting) and linear (x @ W^T + b), both on GEMM: OpenBLAS, or
// with DTR_ONEDNN_GEMM on oneDNN's matmul for the float32 blocks that
// onednn_gemm_shape admits (Note [determinism] for GEMM in cpu/linalg.h).
#include "cpu/linalg.h"

#include <cblas.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <vector>

#include <absl/container/inlined_vector.h>

#include "cpu/kernels.h"
#include "cpu/onednn_gemm.h"

namespace dtr::cpu {

// ---- GEMM ----------------------------------------------------------------------

namespace {

blasint to_blas(int64_t v) {
  DTR_CHECK(v <= int64_t(std::numeric_limits<blasint>::max()), ValueError,
            "gemm: dimension {} exceeds the range of the BLAS integer type", v);
  return blasint(v);
}

template <typename T>
void scale_c(int64_t M, int64_t N, T beta, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == T(0) ? T(0) : beta * C[i * ldc + j];
}

void blas_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
               int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  // Note [determinism] for GEMM: the library is chosen by the block's shape
  // (and DTR_ONEDNN_GEMM).
  if (onednn_gemm_shape(M, N, K) && onednn_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              to_blas(M), to_blas(N), to_blas(K), alpha, A, to_blas(lda), B, to_blas(ldb), beta, C,
              to_blas(ldc));
}

void blas_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
               int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              to_blas(M), to_blas(N), to_blas(K), alpha, A, to_blas(lda), B, to_blas(ldb), beta, C,
              to_blas(ldc));
}

/// Splits C (M, N) into blocks of whole rows (when M >= N) or whole columns
/// and runs one single-threaded BLAS call per block on the thread pool. The
/// blocks depend only on (M, N, K), so every thread count makes the same
/// BLAS calls and gets bitwise the same C.
template <typename T>
void blocked_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                  int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) return scale_c(M, N, beta, C, ldc);
  const GemmBlocks blocks = gemm_blocks(M, N, K);
  if (blocks.count == 1) return blas_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  parallel_for(blocks.count, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t lo = b * blocks.size;
      if (blocks.rows) {
        // Rows [lo, hi) of C: rows of op(A), which are columns of A when transposed.
        const int64_t m = std::min(M, lo + blocks.size) - lo;
        blas_gemm(ta, tb, m, N, K, alpha, A + (ta ? lo : lo * lda), lda, B, ldb, beta, C + lo * ldc, ldc);
      } else {
        // Columns [lo, hi) of C: columns of op(B), which are rows of B when transposed.
        const int64_t n = std::min(N, lo + blocks.size) - lo;
        blas_gemm(ta, tb, M, n, K, alpha, A, lda, B + (tb ? lo * ldb : lo), ldb, beta, C + lo, ldc);
      }
    }
  });
}

}  // namespace

GemmBlocks gemm_blocks(int64_t M, int64_t N, int64_t K) {
  GemmBlocks g;
  const bool rows = M >= N;
  const int64_t len = rows ? M : N;
  const double macs = double(M) * double(N) * double(std::max<int64_t>(K, 1));
  // A power-of-two count spreads evenly over 2, 4, 8 threads. Each block
  // packs the other operand again, which costs single-threaded time:
  // measured on OpenBLAS 0.3.21 for the (512, 128..512, 128..512) products
  // of a small transformer, +0-3% for 2 blocks, +3-8% for 4, +5-15% for 8;
  // 64-row blocks cost ~10%, 32-row ~20%. Hence blocks of >= 2^23
  // multiply-adds (~0.2 ms) and >= 128 rows.
  int64_t count = 1;
  while (macs / double(2 * count) >= double(kGemmBlockMacs) && len / (2 * count) >= kGemmMinBlock) count *= 2;
  if (count == 1) return g;
  g.rows = rows;
  g.size = ((len + count - 1) / count + 15) / 16 * 16;
  g.count = (len + g.size - 1) / g.size;
  return g;
}

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  blocked_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
          const double* A, int64_t lda, const double* B, int64_t ldb, double beta, double* C,
          int64_t ldc) {
  blocked_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void fix_blas_threads() {
  static std::once_flag once;
  // dtr's pool runs the GEMM blocks; OpenBLAS threads would oversubscribe
  // the cores and make results depend on their count.
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

// ---- float32 staging for float16 / bfloat16 ----------------------------------------

namespace {

bool is_half(DType t) { return t == kFloat16 || t == kBFloat16; }

void half_to_float32(const TensorArg& src, float* dst) {
  const uint16_t* p = src.ptr<uint16_t>();
  const bool bf = src.dtype == kBFloat16;
  parallel_for(src.numel(), 1 << 15, [&](int64_t b, int64_t e) {
    for_each_offset(src.shape, src.strides, b, e, [&](int64_t i, int64_t off) {
      dst[i] = bf ? bfloat16_to_float(p[off]) : half_to_float(p[off]);
    });
  });
}

void float32_to_half(const float* src, const TensorArg& dst) {
  uint16_t* p = dst.ptr<uint16_t>();
  const bool bf = dst.dtype == kBFloat16;
  parallel_for(dst.numel(), 1 << 15, [&](int64_t b, int64_t e) {
    for_each_offset(dst.shape, dst.strides, b, e, [&](int64_t i, int64_t off) {
      p[off] = bf ? float_to_bfloat16(src[i]) : float_to_half(src[i]);
    });
  });
}

TensorArg float32_arg(const TensorArg& like, std::vector<float>& buf) {
  buf.resize(size_t(like.numel()));
  TensorArg a;
  a.data = reinterpret_cast<std::byte*>(buf.data());
  a.shape = like.shape;
  a.strides = contiguous_strides(like.shape);
  a.dtype = kFloat32;
  return a;
}

}  // namespace

bool has_half_operand(const KernelContext& ctx) {
  for (const TensorArg& a : ctx.inputs)
    if (is_half(a.dtype)) return true;
  for (const TensorArg& a : ctx.outputs)
    if (is_half(a.dtype)) return true;
  return false;
}

void run_in_float32(const KernelContext& ctx, KernelFn kernel) {
  std::vector<std::vector<float>> in_bufs(ctx.inputs.size()), out_bufs(ctx.outputs.size());
  absl::InlinedVector<TensorArg, 4> ins(ctx.inputs.begin(), ctx.inputs.end());
  absl::InlinedVector<TensorArg, 4> outs(ctx.outputs.begin(), ctx.outputs.end());
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!is_half(ins[i].dtype)) continue;
    ins[i] = float32_arg(ctx.inputs[i], in_bufs[i]);
    half_to_float32(ctx.inputs[i], in_bufs[i].data());
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    if (is_half(outs[i].dtype)) outs[i] = float32_arg(ctx.outputs[i], out_bufs[i]);
  }
  kernel(KernelContext{ins, outs, ctx.attrs, ctx.rng, ctx.device});
  for (size_t i = 0; i < outs.size(); ++i) {
    if (is_half(ctx.outputs[i].dtype)) float32_to_half(out_bufs[i].data(), ctx.outputs[i]);
  }
}

// ---- matmul --------------------------------------------------------------------------

MatrixForm left_form(const TensorArg& t) {
  MatrixForm f;
  const size_t nd = t.shape.size();
  if (nd == 1) {
    f.rows = 1;
    f.cols = t.shape[0];
    f.cs = t.strides[0];
    return f;
  }
  f.batch.assign(t.shape.begin(), t.shape.end() - 2);
  f.batch_strides.assign(t.strides.begin(), t.strides.end() - 2);
  f.rows = t.shape[nd - 2];
  f.cols = t.shape[nd - 1];
  f.rs = t.strides[nd - 2];
  f.cs = t.strides[nd - 1];
  return f;
}

MatrixForm right_form(const TensorArg& t) {
  MatrixForm f = left_form(t);
  if (t.shape.size() == 1) {
    f.rows = t.shape[0];
    f.cols = 1;
    f.rs = t.strides[0];
    f.cs = 0;
  }
  return f;
}

BlasLayout blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  const int64_t min_row_ld = std::max<int64_t>(cols, 1);
  const int64_t row_cs = cols == 1 ? 1 : cs;
  const int64_t row_rs = rows == 1 ? min_row_ld : rs;
  if (row_cs == 1 && row_rs >= min_row_ld) return {true, false, row_rs};
  const int64_t min_col_ld = std::max<int64_t>(rows, 1);
  const int64_t col_rs = rows == 1 ? 1 : rs;
  const int64_t col_cs = cols == 1 ? min_col_ld : cs;
  if (col_rs == 1 && col_cs >= min_col_ld) return {true, true, col_cs};
  return {};
}

namespace {

// Copies a matrix form into `buf` as contiguous row-major matrices and
// returns the form describing the copy.
template <typename T>
MatrixForm pack(const MatrixForm& f, const T* src, std::vector<T>& buf) {
  const int64_t nb = numel(f.batch), mat = f.rows * f.cols;
  buf.resize(size_t(nb * mat));
  const Strides contiguous = contiguous_strides(f.batch);
  for_each_offset(f.batch, f.batch_strides, 0, nb, [&](int64_t bi, int64_t off) {
    T* dst = buf.data() + bi * mat;
    for (int64_t r = 0; r < f.rows; ++r)
      for (int64_t c = 0; c < f.cols; ++c) dst[r * f.cols + c] = src[off + r * f.rs + c * f.cs];
  });
  MatrixForm p = f;
  p.batch_strides.clear();
  for (int64_t s : contiguous) p.batch_strides.push_back(s * mat);
  p.rs = f.cols;
  p.cs = 1;
  return p;
}

// Element offsets of batch element `i` (row-major over `shape`) under `strides`.
int64_t batch_offset(int64_t i, IntList shape, IntList strides) {
  int64_t off = 0;
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    const int64_t s = shape[size_t(d)];
    off += (i % s) * strides[size_t(d)];
    i /= s;
  }
  return off;
}

// True when a's batch dims and its row dim collapse into one row dim of
// stride `ld` (so a batched-by-2-D product is a single GEMM).
bool rows_collapse(const MatrixForm& f, int64_t ld) {
  int64_t expect = ld * f.rows;
  for (int64_t d = int64_t(f.batch.size()) - 1; d >= 0; --d) {
    if (f.batch[size_t(d)] != 1 && f.batch_strides[size_t(d)] != expect) return false;
    expect *= f.batch[size_t(d)];
  }
  return true;
}

template <typename T>
void matmul_floating(const TensorArg& a, const TensorArg& b, const TensorArg& out) {
  MatrixForm fa = left_form(a), fb = right_form(b);
  const int64_t M = fa.rows, K = fa.cols, N = fb.cols;
  const Shape batch = broadcast_shapes(fa.batch, fb.batch, "matmul");
  const int64_t nb = numel(batch);
  T* C = out.ptr<T>();
  if (M == 0 || N == 0 || nb == 0) return;

  const T* A = a.ptr<T>();
  const T* B = b.ptr<T>();
  std::vector<T> a_buf, b_buf;
  BlasLayout la = blas_layout(M, K, fa.rs, fa.cs);
  if (!la.ok) {
    fa = pack(fa, A, a_buf);
    A = a_buf.data();
    la = {true, false, std::max<int64_t>(K, 1)};
  }
  BlasLayout lb = blas_layout(K, N, fb.rs, fb.cs);
  if (!lb.ok) {
    fb = pack(fb, B, b_buf);
    B = b_buf.data();
    lb = {true, false, std::max<int64_t>(N, 1)};
  }

  // (batch..., M, K) @ (K, N) with collapsible rows: one (batch*M, K) GEMM.
  if (fb.batch.empty() && nb > 1 && !la.trans && rows_collapse(fa, la.ld)) {
    gemm(false, lb.trans, nb * M, N, K, T(1), A, la.ld, B, lb.ld, T(0), C, N);
    return;
  }
  const Strides a_bs = broadcast_strides(fa.batch, fa.batch_strides, batch);
  const Strides b_bs = broadcast_strides(fb.batch, fb.batch_strides, batch);
  // One GEMM per batch index. Small ones (attention heads) run side by side
  // on the pool; a large one is split into blocks by gemm itself. Either way
  // each batch index makes the same BLAS calls for any thread count.
  const double macs = double(M) * double(N) * double(std::max<int64_t>(K, 1));
  const int64_t grain = std::max<int64_t>(1, int64_t(double(kGemmBlockMacs) / macs));
  parallel_for(nb, grain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      gemm(la.trans, lb.trans, M, N, K, T(1), A + batch_offset(i, batch, a_bs), la.ld,
           B + batch_offset(i, batch, b_bs), lb.ld, T(0), C + i * M * N, N);
    }
  });
}

// Integer matmul (torch.matmul accepts integer tensors on CPU): plain loops,
// accumulating in int64 with wrap-around like PyTorch.
void matmul_integer(const TensorArg& a, const TensorArg& b, const TensorArg& out) {
  const MatrixForm fa = left_form(a), fb = right_form(b);
  const int64_t M = fa.rows, K = fa.cols, N = fb.cols;
  const Shape batch = broadcast_shapes(fa.batch, fb.batch, "matmul");
  const int64_t nb = numel(batch);
  const Strides a_bs = broadcast_strides(fa.batch, fa.batch_strides, batch);
  const Strides b_bs = broadcast_strides(fb.batch, fb.batch_strides, batch);
  const int64_t isz = itemsize(a.dtype);
  parallel_for(nb * M, std::max<int64_t>(1, 4096 / std::max<int64_t>(N * K, 1)),
               [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t i = r / M, m = r % M;
      const std::byte* arow = a.data + (batch_offset(i, batch, a_bs) + m * fa.rs) * isz;
      const std::byte* bmat = b.data + batch_offset(i, batch, b_bs) * isz;
      for (int64_t n = 0; n < N; ++n) {
        uint64_t acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          acc += uint64_t(load_as_int(arow + k * fa.cs * isz, a.dtype)) *
                 uint64_t(load_as_int(bmat + (k * fb.rs + n * fb.cs) * isz, b.dtype));
        }
        store_from_int(out.data + (r * N + n) * itemsize(out.dtype), out.dtype, int64_t(acc));
      }
    }
  });
}

// inputs: a, b (any strides); outputs: out (contiguous).
void matmul_kernel(const KernelContext& c) {
  if (has_half_operand(c)) return run_in_float32(c, matmul_kernel);
  const TensorArg &a = c.inputs[0], &b = c.inputs[1], &out = c.outputs[0];
  switch (a.dtype) {
    case kFloat32: return matmul_floating<float>(a, b, out);
    case kFloat64: return matmul_floating<double>(a, b, out);
    case kInt32:
    case kInt64:
    case kUInt8: return matmul_integer(a, b, out);
    default:
      throw NotImplementedError(
          fmt::format("matmul: no CPU kernel for dtype {}", dtype_name(a.dtype)));
  }
}

// ---- linear --------------------------------------------------------------------------

// inputs: x (*, K), weight (N, K), optional bias (N), contiguous;
// outputs: out (*, N) = x @ weight^T + bias.
template <typename T>
void linear_floating(const KernelContext& c) {
  const TensorArg &x = c.inputs[0], &w = c.inputs[1], &out = c.outputs[0];
  const int64_t K = w.shape[1], N = w.shape[0];
  const int64_t M = K == 0 ? out.numel() / std::max<int64_t>(N, 1) : x.numel() / K;
  T* C = out.ptr<T>();
  T beta = T(0);
  if (c.inputs.size() > 2) {
    const T* bias = c.inputs[2].ptr<T>();
    for (int64_t m = 0; m < M; ++m) std::copy(bias, bias + N, C + m * N);
    beta = T(1);
  }
  gemm(false, true, M, N, K, T(1), x.ptr<T>(), std::max<int64_t>(K, 1), w.ptr<T>(),
       std::max<int64_t>(K, 1), beta, C, std::max<int64_t>(N, 1));
}

void linear_kernel(const KernelContext& c) {
  if (has_half_operand(c)) return run_in_float32(c, linear_kernel);
  float_dispatch(c.inputs[0].dtype, "linear", [&](auto t) { linear_floating<decltype(t)>(c); });
}

}  // namespace

void register_linalg_kernels() {
  fix_blas_threads();
  set_cpu_kernel("matmul", matmul_kernel);
  set_cpu_kernel("linear", linear_kernel);
}

}  // namespace dtr::cpu
