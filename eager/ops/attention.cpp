// scaled_dot_product_attention (torch.nn.functional.scaled_dot_product_attention),
// composed from existing ops: matmul, mul, masked_fill/add for the mask,
// softmax, dropout, matmul. A composite keeps the lineage fine-grained: the
// (*, L, S) score and probability tensors are separate storages the runtime
// can evict and rebuild one op at a time, and each step's backward rule
// already exists. No op rows of its own.
#include <cmath>
#include <limits>

#include "eager/ops/registration.h"

namespace dtr {

/// torch.nn.functional.scaled_dot_product_attention.
/// q (*, L, E), k (*, S, E), v (*, S, Ev) → (*, L, Ev), batch dims broadcast
/// as in matmul; q, k, v floating of one dtype.
///   scores = q @ k^T * scale          (scale defaults to 1 / sqrt(E))
///   is_causal: scores[i, j] = -inf for j > i (top-left aligned, like PyTorch)
///   attn_mask bool (True = take part, like PyTorch): -inf where False;
///   attn_mask floating (q's dtype): added to the scores;
///   both broadcastable to (*, L, S).
///   out = dropout(softmax(scores, -1), dropout_p) @ v
/// A row whose every score is masked gives NaN, as in PyTorch.
/// Throws ValueError on ranks < 2, mismatched E or S, attn_mask together with
/// is_causal, or dropout_p outside [0, 1]; TypeError on dtype mismatches.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask, double dropout_p, bool is_causal,
                                    std::optional<double> scale) {
  constexpr std::string_view kOp = "scaled_dot_product_attention";
  DTR_CHECK(q.defined() && k.defined() && v.defined(), ValueError,
            "{}: query, key and value must be defined tensors", kOp);
  DTR_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, ValueError,
            "{}: query, key and value must be at least 2-D, got shapes {}, {} and {}", kOp,
            shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape()));
  DTR_CHECK(q.is_floating_point() && q.dtype() == k.dtype() && q.dtype() == v.dtype(), TypeError,
            "{}: expected query, key and value of one floating dtype, got {}, {} and {}", kOp,
            dtype_name(q.dtype()), dtype_name(k.dtype()), dtype_name(v.dtype()));
  DTR_CHECK(q.size(-1) == k.size(-1), ValueError,
            "{}: query of shape {} and key of shape {} differ in the embedding dimension", kOp,
            shape_str(q.shape()), shape_str(k.shape()));
  DTR_CHECK(k.size(-2) == v.size(-2), ValueError,
            "{}: key of shape {} and value of shape {} differ in the sequence length", kOp,
            shape_str(k.shape()), shape_str(v.shape()));
  DTR_CHECK(!(is_causal && attn_mask.defined()), ValueError,
            "{}: an explicit attn_mask must not be given together with is_causal=true", kOp);
  DTR_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, ValueError,
            "{}: dropout_p has to be between 0 and 1, but got {}", kOp, dropout_p);
  if (attn_mask.defined()) {
    DTR_CHECK(attn_mask.dtype() == kBool || attn_mask.dtype() == q.dtype(), TypeError,
              "{}: expected attn_mask of dtype bool or {} (the query's), got {}", kOp,
              dtype_name(q.dtype()), dtype_name(attn_mask.dtype()));
  }

  const int64_t L = q.size(-2), S = k.size(-2);
  const double s = scale.has_value() ? *scale : 1.0 / std::sqrt(double(q.size(-1)));
  const double neg_inf = -std::numeric_limits<double>::infinity();
  Tensor scores = mul(matmul(q, transpose(k, -2, -1)), s);  // (*, L, S)
  if (is_causal) {
    const Tensor future = triu(ones({L, S}, TensorOptions(kBool).device(q.device())), 1);
    scores = masked_fill(scores, future, neg_inf);
  } else if (attn_mask.defined() && attn_mask.dtype() == kBool) {
    // Bool mask → additive bias: 0 where kept, -inf elsewhere (as PyTorch does).
    const Tensor bias =
        masked_fill(full(attn_mask.shape(), neg_inf, TensorOptions(q.dtype()).device(q.device())),
                    attn_mask, 0.0);
    scores = add(scores, bias);
  } else if (attn_mask.defined()) {
    scores = add(scores, attn_mask);
  }
  Tensor probs = softmax(scores, -1);
  if (dropout_p > 0.0) probs = dropout(probs, dropout_p, /*training=*/true);
  return matmul(probs, v);
}

}  // namespace dtr
