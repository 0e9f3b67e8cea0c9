// Linear algebra: matmul (torch.matmul) and linear (torch.nn.functional.linear).
// Kernels: cpu/linalg.cpp (OpenBLAS GEMM).
#include "eager/ops/registration.h"

namespace dtr {
namespace ops {
namespace {

// ---- matmul ----------------------------------------------------------------------
//
// One row covers every case of torch.matmul: 1-D @ 1-D (dot), 2-D @ 2-D,
// 1-D operands promoted to a row (left) or a column (right) and squeezed
// from the result, and batched operands with broadcast batch dims. The
// kernel reads strided operands (transposed views go straight to BLAS).

bool matmul_dtype_supported(DType t) {
  return is_floating(t) || t == kInt32 || t == kInt64 || t == kUInt8;
}

// Batch dims of an operand (empty for 1-D and 2-D).
Shape batch_dims(const Shape& s) {
  return s.size() > 2 ? Shape(s.begin(), s.end() - 2) : Shape{};
}

void infer_matmul(std::span<const TensorMeta> in, const Attrs&, std::vector<TensorMeta>& out) {
  const TensorMeta &a = in[0], &b = in[1];
  DTR_CHECK(a.dim() >= 1 && b.dim() >= 1, ValueError,
            "matmul: both arguments need to be at least 1-D, but got shapes {} and {}",
            shape_str(a.shape), shape_str(b.shape));
  DTR_CHECK(a.dtype == b.dtype, TypeError,
            "matmul: expected both arguments to have the same dtype, but got {} (shape {}) and {} "
            "(shape {})",
            dtype_name(a.dtype), shape_str(a.shape), dtype_name(b.dtype), shape_str(b.shape));
  DTR_CHECK(matmul_dtype_supported(a.dtype), TypeError,
            "matmul: dtype {} is not supported (shapes {} and {})", dtype_name(a.dtype),
            shape_str(a.shape), shape_str(b.shape));
  const int64_t ka = a.shape.back();
  const int64_t kb = b.dim() == 1 ? b.shape[0] : b.shape[size_t(b.dim() - 2)];
  DTR_CHECK(ka == kb, ValueError,
            "matmul: shapes {} and {} cannot be multiplied (inner dimensions {} and {} differ)",
            shape_str(a.shape), shape_str(b.shape), ka, kb);
  Shape shape;
  try {
    shape = broadcast_shapes(batch_dims(a.shape), batch_dims(b.shape), "matmul");
  } catch (const ValueError&) {
    throw ValueError(fmt::format("matmul: batch dimensions of shapes {} and {} cannot be broadcast",
                                 shape_str(a.shape), shape_str(b.shape)));
  }
  if (a.dim() >= 2) shape.push_back(a.shape[size_t(a.dim() - 2)]);
  if (b.dim() >= 2) shape.push_back(b.shape.back());
  out.push_back(out_meta(shape, a.dtype, a.device));
}

OpCost matmul_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
  const TensorMeta &a = in[0], &b = in[1];
  // Every output element is a K-long dot product: flops = 2 * batch * M * N * K.
  OpCost c;
  c.flops = 2.0 * double(out[0].numel()) * double(a.shape.back());
  c.bytes = double(a.numel() * itemsize(a.dtype) + b.numel() * itemsize(b.dtype) +
                   out[0].numel() * itemsize(out[0].dtype));
  return c;
}

// Shape of an operand as a batch of matrices: (K) → (1, K) on the left,
// (K) → (K, 1) on the right.
Shape left_matrix_shape(const Shape& s) { return s.size() == 1 ? Shape{1, s[0]} : s; }
Shape right_matrix_shape(const Shape& s) { return s.size() == 1 ? Shape{s[0], 1} : s; }

// grad_a = g @ b^T, grad_b = a^T @ g on the matrix forms, reduced over
// broadcast batch dims (sum_to) and reshaped to the operands' shapes.
std::vector<Tensor> matmul_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  const TensorMeta &am = ctx.input_metas[0], &bm = ctx.input_metas[1];
  const Shape a_shape = left_matrix_shape(am.shape), b_shape = right_matrix_shape(bm.shape);
  Shape out_shape = broadcast_shapes(batch_dims(a_shape), batch_dims(b_shape), "matmul");
  out_shape.push_back(a_shape[a_shape.size() - 2]);
  out_shape.push_back(b_shape.back());
  const Tensor grad = reshape(g[0], out_shape);
  std::vector<Tensor> r(2);
  if (ctx.needs_grad(0)) {
    const Tensor b = reshape(ctx.inputs[1], b_shape);
    const Tensor ga = autograd::sum_to(matmul(grad, transpose(b, -1, -2)), a_shape);
    r[0] = reshape(ga, am.shape);
  }
  if (ctx.needs_grad(1)) {
    const Tensor a = reshape(ctx.inputs[0], a_shape);
    const Tensor gb = autograd::sum_to(matmul(transpose(a, -1, -2), grad), b_shape);
    r[1] = reshape(gb, bm.shape);
  }
  return r;
}

// ---- linear ------------------------------------------------------------------------

void infer_linear(std::span<const TensorMeta> in, const Attrs&, std::vector<TensorMeta>& out) {
  const TensorMeta &x = in[0], &w = in[1];
  DTR_CHECK(x.dim() >= 1, ValueError, "linear: input must be at least 1-D, got shape {}",
            shape_str(x.shape));
  DTR_CHECK(w.dim() == 2, ValueError,
            "linear: weight must be 2-D (out_features, in_features), got shape {}",
            shape_str(w.shape));
  for (size_t i = 0; i < in.size(); ++i) {
    check_floating("linear", in[i], i == 0 ? "input" : i == 1 ? "weight" : "bias");
    DTR_CHECK(in[i].dtype == x.dtype, TypeError,
              "linear: expected input, weight and bias of one dtype, got input {} and {} {}",
              dtype_name(x.dtype), i == 1 ? "weight" : "bias", dtype_name(in[i].dtype));
  }
  DTR_CHECK(x.shape.back() == w.shape[1], ValueError,
            "linear: input of shape {} and weight of shape {} cannot be multiplied (in_features "
            "{} vs {})",
            shape_str(x.shape), shape_str(w.shape), x.shape.back(), w.shape[1]);
  if (in.size() > 2) {
    const TensorMeta& b = in[2];
    DTR_CHECK(b.dim() == 1 && b.shape[0] == w.shape[0], ValueError,
              "linear: bias must have shape [{}] for weight of shape {}, got {}", w.shape[0],
              shape_str(w.shape), shape_str(b.shape));
  }
  Shape shape(x.shape.begin(), x.shape.end() - 1);
  shape.push_back(w.shape[0]);
  out.push_back(out_meta(shape, x.dtype, x.device));
}

OpCost linear_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
  OpCost c;
  c.flops = 2.0 * double(out[0].numel()) * double(in[1].shape[1]);
  for (const TensorMeta& m : in) c.bytes += double(m.numel() * itemsize(m.dtype));
  c.bytes += double(out[0].numel() * itemsize(out[0].dtype));
  return c;
}

// y = x @ W^T + b: grad_x = g @ W, grad_W = g2^T @ x2, grad_b = sum(g2, 0),
// with g2 (M, N) and x2 (M, K) the leading dims flattened.
std::vector<Tensor> linear_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  const int64_t N = ctx.input_metas[1].shape[0], K = ctx.input_metas[1].shape[1];
  std::vector<Tensor> r(ctx.input_metas.size());
  if (ctx.needs_grad(0)) r[0] = matmul(g[0], ctx.inputs[1]);
  const Tensor g2 = reshape(g[0], {-1, N});
  if (ctx.needs_grad(1)) r[1] = matmul(transpose(g2, 0, 1), reshape(ctx.inputs[0], {-1, K}));
  if (r.size() > 2 && ctx.needs_grad(2)) r[2] = sum(g2, {0});
  return r;
}

}  // namespace

void register_linalg_ops() {
  auto& R = OpRegistry::instance();
  OpDef mm{.name = "matmul", .infer = infer_matmul, .cost = matmul_cost, .backward = matmul_backward};
  mm.flags.strided_inputs = true;
  mm.autocast = AutocastPolicy::kLowerPrecision;
  mm.inputs(2);
  R.define(std::move(mm));

  OpDef lin{.name = "linear", .infer = infer_linear, .cost = linear_cost, .backward = linear_backward};
  lin.autocast = AutocastPolicy::kLowerPrecision;
  lin.min_inputs = 2;
  lin.max_inputs = 3;
  R.define(std::move(lin));
}

}  // namespace ops

/// torch.matmul. a and b of one dtype (floating, int32, int64 or uint8):
///   (K) @ (K) → 0-d;  (M, K) @ (K) → (M);  (K) @ (K, N) → (N);
///   (M, K) @ (K, N) → (M, N);  (*a, M, K) @ (*b, K, N) → (broadcast(*a, *b), M, N),
///   with a 1-D operand in a batched product promoted to a row/column and
///   squeezed from the result. float16/bfloat16 compute in float32.
/// Throws ValueError (naming both shapes) for 0-d operands, differing inner
/// dims or batch dims that do not broadcast; TypeError for mixed dtypes.
Tensor matmul(const Tensor& a, const Tensor& b) {
  static const OpDef& o = op("matmul");
  return dispatch1(o, {a, b});
}


/// torch.nn.functional.linear: x (*, in) @ weight^T (in, out) + bias (out) → (*, out).
/// bias may be undefined. Floating dtypes; all operands of one dtype.
/// Throws ValueError on mismatched in_features or a bias of the wrong shape,
/// TypeError on non-floating or mixed dtypes.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  static const OpDef& o = op("linear");
  if (bias.defined()) return dispatch1(o, {x, weight, bias});
  return dispatch1(o, {x, weight});
}

}  // namespace dtr
