// The linear-algebra family's own kernels (cuda/linalg.h): one index per
// output element, each written by its index alone, reductions in a fixed
// order (integer matmul sums k = 0, 1, ..., K - 1, like the CPU).
#include "cuda/launch.cuh"
#include "cuda/linalg.h"

namespace dtr::cuda {
namespace {

DTR_HD int64_t batch_offset(const MatrixBatch& m, int64_t b) {
  int64_t off = 0;
  for (int d = m.ndim - 1; d >= 0; --d) {
    const int64_t s = m.batch[d];
    off += (b % s) * m.batch_strides[d];
    b /= s;
  }
  return off;
}

struct PackBody {
  MatrixBatch src;
  std::byte* dst;
  int64_t isz;
  DTR_HD void operator()(int64_t i) const {
    const int64_t mat = src.rows * src.cols;
    const int64_t b = i / mat, r = (i % mat) / src.cols, c = i % src.cols;
    const int64_t off = batch_offset(src, b) + r * src.rs + c * src.cs;
    const std::byte* from = src.data + off * isz;
    std::byte* to = dst + i * isz;
    for (int64_t k = 0; k < isz; ++k) to[k] = from[k];
  }
};

struct FillRowsBody {
  std::byte* out;
  const std::byte* bias;
  int64_t N, isz;
  DTR_HD void operator()(int64_t i) const {
    const std::byte* from = bias + (i % N) * isz;
    std::byte* to = out + i * isz;
    for (int64_t k = 0; k < isz; ++k) to[k] = from[k];
  }
};

struct ZeroMatricesBody {
  std::byte* C;
  int64_t M, N, ldc, sc, isz;
  DTR_HD void operator()(int64_t i) const {
    const int64_t b = i / (M * N), m = (i / N) % M, n = i % N;
    std::byte* p = C + (b * sc + m * ldc + n) * isz;
    for (int64_t k = 0; k < isz; ++k) p[k] = std::byte{0};
  }
};

struct IntegerMatmulBody {
  MatrixBatch a, b;
  std::byte* out;
  DType out_dt;
  DTR_HD void operator()(int64_t i) const {
    const int64_t M = a.rows, K = a.cols, N = b.cols;
    const int64_t bi = i / (M * N), m = (i / N) % M, n = i % N;
    const int64_t asz = itemsize(a.dtype), bsz = itemsize(b.dtype);
    const std::byte* arow = a.data + (batch_offset(a, bi) + m * a.rs) * asz;
    const std::byte* bcol = b.data + (batch_offset(b, bi) + n * b.cs) * bsz;
    uint64_t acc = 0;
    for (int64_t k = 0; k < K; ++k)
      acc += uint64_t(load<int64_t>(arow + k * a.cs * asz, a.dtype)) *
             uint64_t(load<int64_t>(bcol + k * b.rs * bsz, b.dtype));
    store<int64_t>(out + i * itemsize(out_dt), out_dt, int64_t(acc));
  }
};

int64_t batch_count(const MatrixBatch& m) {
  int64_t n = 1;
  for (int d = 0; d < m.ndim; ++d) n *= m.batch[d];
  return n;
}

}  // namespace

void launch_pack_matrices(const MatrixBatch& src, std::byte* dst, const Exec& e) {
  launch(e, batch_count(src) * src.rows * src.cols, PackBody{src, dst, itemsize(src.dtype)}, "pack_matrices");
}

void launch_fill_rows(std::byte* out, const std::byte* bias, DType dt, int64_t M, int64_t N, const Exec& e) {
  if (N <= 0) return;
  launch(e, M * N, FillRowsBody{out, bias, N, itemsize(dt)}, "fill_rows");
}

void launch_zero_matrices(std::byte* C, DType dt, int64_t batch, int64_t M, int64_t N, int64_t ldc, int64_t sc,
                          const Exec& e) {
  launch(e, batch * M * N, ZeroMatricesBody{C, M, N, ldc, sc, itemsize(dt)}, "zero_matrices");
}

void launch_matmul_integer(const MatrixBatch& a, const MatrixBatch& b, std::byte* out, DType out_dt,
                           const Exec& e) {
  launch(e, batch_count(a) * a.rows * b.cols, IntegerMatmulBody{a, b, out, out_dt}, "matmul_integer");
}

}  // namespace dtr::cuda
