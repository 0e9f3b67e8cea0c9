// Causal multi-head self-attention as in GPT-2 / nanoGPT's
// CausalSelfAttention: a fused q/k/v projection, scaled dot-product
// attention with a causal mask, an output projection and residual dropout.
#pragma once

#include <memory>

#include "eager/nn/layers.h"

namespace dtr::nn {

/// forward: x (B, T, C) → (B, T, C), C = n_embd.
///   q, k, v = c_attn(x).split(C, dim=2), each viewed (B, n_head, T, C/n_head)
///   y = scaled_dot_product_attention(q, k, v, is_causal=true,
///                                    dropout_p = training ? dropout : 0)
///   y = resid_dropout(c_proj(y transposed back to (B, T, C)))
/// Children: c_attn = Linear(C, 3C), c_proj = Linear(C, C). Throws
/// ValueError when n_embd is not divisible by n_head or the input is not
/// (B, T, n_embd).
class CausalSelfAttention : public UnaryModule {
 public:
  CausalSelfAttention(int64_t n_embd, int64_t n_head, double dropout = 0.0, bool bias = true,
                      TensorOptions opts = {});
  Tensor forward(const Tensor& x) override;

  int64_t n_embd, n_head;
  double dropout;
  std::shared_ptr<Linear> c_attn, c_proj;
  std::shared_ptr<Dropout> resid_dropout;
};

}  // namespace dtr::nn
