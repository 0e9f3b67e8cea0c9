// Causal multi-head self-attention as in GPT-2 / nanoGPT's
// CausalSelfAttention: a fused q/k/v projection, scaled dot-product
// attention with a causal mask, an output projection and residual dropout.
#pragma once

#include <memory>

#include "eager/nn/layers.h"

namespace dtr::nn {

/// Options of CausalSelfAttention(n_embd, n_head): dropout 0 (attention
/// and residual), bias true (of both projections).
struct CausalSelfAttentionOptions {
  CausalSelfAttentionOptions(int64_t n_embd, int64_t n_head) : n_embd_(n_embd), n_head_(n_head) {}
  DTR_ARG(int64_t, n_embd);
  DTR_ARG(int64_t, n_head);
  DTR_ARG(double, dropout) = 0.0;
  DTR_ARG(bool, bias) = true;
};

/// forward: x (B, T, C) → (B, T, C), C = n_embd.
///   q, k, v = c_attn(x).split(C, dim=2), each viewed (B, n_head, T, C/n_head)
///   y = scaled_dot_product_attention(q, k, v, is_causal=true,
///                                    dropout_p = training ? dropout : 0)
///   y = resid_dropout(c_proj(y transposed back to (B, T, C)))
/// Children: c_attn = Linear(C, 3C), c_proj = Linear(C, C), resid_dropout.
/// Throws ValueError when n_embd is not divisible by n_head or the input is
/// not (B, T, n_embd).
class CausalSelfAttentionImpl : public UnaryModule {
 public:
  explicit CausalSelfAttentionImpl(const CausalSelfAttentionOptions& options, TensorOptions opts = {});
  CausalSelfAttentionImpl(int64_t n_embd, int64_t n_head, double dropout = 0.0, bool bias = true,
                          TensorOptions opts = {})
      : CausalSelfAttentionImpl(CausalSelfAttentionOptions(n_embd, n_head).dropout(dropout).bias(bias), opts) {}
  Tensor forward(const Tensor& x) override;

  CausalSelfAttentionOptions options;
  Linear c_attn{nullptr}, c_proj{nullptr};
  Dropout resid_dropout{nullptr};
};
DTR_MODULE(CausalSelfAttention);

}  // namespace dtr::nn
