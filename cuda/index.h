// The launchers of the indexing kernels (cuda/index.cu: cat, index_select,
// gather, scatter_add, index_add, masked_fill, tril/triu, flip,
// slice_backward, select_backward) and of cuda/nn_functional.cu (embedding,
// dropout, one_hot), for cuda/index_ops.cpp and cuda/nn_functional_ops.cpp,
// which nvcc never compiles. Semantics are those of cpu/index.cpp and
// cpu/nn_functional.cpp; index tensors are int64 or int32, contiguous.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/philox.h"
#include "cuda/exec.h"

namespace dtr::cuda {

/// Dims of an indexing kernel's operand (as many as the CPU's for_each_offsets).
inline constexpr int kMaxIndexDims = 16;

/// Sizes and element strides of one operand, outermost first (ndim 0: a scalar).
struct Dims {
  int ndim = 0;
  int64_t size[kMaxIndexDims] = {};
  int64_t stride[kMaxIndexDims] = {};
};

/// The first index outside its range, read back from the device: position
/// -1 when every index is in range.
struct BadIndex {
  int64_t position = -1;
  int64_t value = 0;
};

/// The first position of `idx` (n int64/int32 values) with a value outside [lo, hi).
BadIndex check_index_range(const std::byte* idx, DType dt, int64_t n, int64_t lo, int64_t hi, const Exec& e);

// ---- cuda/index.cu ----------------------------------------------------------------

/// One input of cat: out[o, offset + k] = in[o, k] for o < outer, k < row
/// (out rows of out_row elements), converted when the dtypes differ.
void launch_cat_piece(std::byte* out, DType out_dt, const std::byte* in, DType in_dt, int64_t outer, int64_t row,
                      int64_t out_row, int64_t offset, const Exec& e);

/// out (outer, n, inner) = x (outer, size, inner) at idx along the middle, isz-byte elements.
void launch_index_select(std::byte* out, const std::byte* x, int64_t isz, const std::byte* idx, DType idx_dt,
                         int64_t outer, int64_t size, int64_t inner, int64_t n, const Exec& e);

/// out (outer, size, inner) = sum over j with idx[j] = s of grad[o, j, i], j
/// ascending, accumulated in float (float16/bfloat16/float32) or double.
void launch_index_select_backward(std::byte* out, DType dt, const std::byte* grad, const std::byte* idx, DType idx_dt,
                                  int64_t outer, int64_t size, int64_t inner, int64_t n, const Exec& e);

/// out (index's shape) = x at idx along dim; `index` holds index's sizes and
/// contiguous strides, `x` x's.
void launch_gather(std::byte* out, const std::byte* x, int64_t isz, const std::byte* idx, DType idx_dt,
                   const Dims& index, const Dims& x_dims, int dim, const Exec& e);

/// out (x's shape, contiguous) = 0 plus grad at the positions idx points to,
/// j ascending along dim, accumulated in float or double.
void launch_gather_backward(std::byte* out, DType dt, const std::byte* grad, const std::byte* idx, DType idx_dt,
                            const Dims& out_dims, const Dims& index, int dim, const Exec& e);

/// Alpha of scatter_add/index_add in the compute type: int_alpha for an
/// integer dtype when given, else alpha.
struct Alpha {
  double f = 1;
  int64_t i = 1;
  bool use_int = false;
};

/// out (any strides) = x (x_dims: out's shape, x's strides) + src at idx
/// along dim, each element's additions in j order, rounded to dt after
/// each (as cpu/index.cpp's accumulate_rows). `index`/`src`: sizes and
/// contiguous strides. index_add when `index_add` (idx 1-d over src's dim).
void launch_scatter_add(std::byte* out, DType dt, const Dims& out_dims, const std::byte* x, const Dims& x_dims,
                        const std::byte* idx, DType idx_dt, const Dims& index, const std::byte* src,
                        const Dims& src_dims, int dim, Alpha alpha, bool index_add, const Exec& e);

/// out = mask ? value : x (operands out, x, mask), value as isz bytes.
void launch_masked_fill(const ElementwiseLayout<3>& L, uint64_t value_bits, int64_t isz, const Exec& e);

/// tril (lower) or triu of contiguous (..., rows, cols); diagonal already clamped.
void launch_triangle(std::byte* out, const std::byte* x, int64_t isz, int64_t numel, int64_t rows, int64_t cols,
                     int64_t diagonal, bool lower, const Exec& e);

/// out[i] (contiguous) = src[offset of i under d's (signed) strides].
void launch_flip(std::byte* out, const std::byte* src, int64_t isz, const Dims& d, const Exec& e);

/// out (out_dims) = 0 with grad (grad_dims) at start::step along dim.
void launch_slice_backward(std::byte* out, const Dims& out_dims, const std::byte* grad, const Dims& grad_dims,
                           int64_t isz, int dim, int64_t start, int64_t step, const Exec& e);

/// out (out_dims) = 0 with grad (grad_dims, out's dims without dim) at `index` along dim.
void launch_select_backward(std::byte* out, const Dims& out_dims, const std::byte* grad, const Dims& grad_dims,
                            int64_t isz, int dim, int64_t index, const Exec& e);

// ---- cuda/nn_functional.cu --------------------------------------------------------

/// out (n, D) = rows idx of w (V, D), isz-byte elements.
void launch_embedding(std::byte* out, const std::byte* w, int64_t isz, const std::byte* idx, DType idx_dt, int64_t n,
                      int64_t D, const Exec& e);

/// out (V, D) = per row v the sum of grad rows at the positions with idx = v,
/// in increasing position, accumulated in float or double.
void launch_embedding_backward(std::byte* out, DType dt, const std::byte* grad, const std::byte* idx, DType idx_dt,
                               int64_t n, int64_t V, int64_t D, const Exec& e);

/// Element i kept iff u32_to_uniform(philox_u32(rng, i)) >= p: y = x * scale
/// (0 when dropped), mask = keep (bool). `scale` is 1 / (1 - p) rounded to dt.
void launch_dropout(std::byte* y, std::byte* mask, const std::byte* x, DType dt, int64_t n, double p, double scale,
                    RngState rng, const Exec& e);

/// out = grad * (mask ? scale : 0).
void launch_dropout_backward(std::byte* out, const std::byte* grad, const std::byte* mask, DType dt, int64_t n,
                             double scale, const Exec& e);

/// out (n, classes) int64 = one-hot rows of idx (int64, in range).
void launch_one_hot(std::byte* out, const std::byte* idx, int64_t n, int64_t classes, const Exec& e);

/// The first row of multinomial's probabilities that is no distribution
/// (row -1 when all are): kind 1 a value not finite or negative (at
/// `category`, `value`), 2 a sum <= 0, 3 fewer non-zero categories than
/// samples without replacement (`count` of them).
struct BadRow {
  int64_t row = -1, kind = 0, category = 0, count = 0;
  double value = 0;
};
BadRow check_multinomial_rows(const std::byte* p, DType dt, int64_t rows, int64_t categories, int64_t samples,
                              bool replacement, const Exec& e);

/// out (rows, samples) int64: multinomial draws, one index per row, sample
/// s of row r from the uniform of draws 2i, 2i+1 (i = r * samples + s), as
/// cpu/nn_functional.cpp's multinomial_kernel.
void launch_multinomial(std::byte* out, const std::byte* p, DType dt, int64_t rows, int64_t categories,
                        int64_t samples, bool replacement, RngState rng, const Exec& e);

}  // namespace dtr::cuda
