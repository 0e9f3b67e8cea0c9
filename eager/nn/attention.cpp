#include "eager/nn/attention.h"

#include "eager/ops.h"

namespace dtr::nn {

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const CausalSelfAttentionOptions& o, TensorOptions opts)
    : UnaryModule("CausalSelfAttention"), options(o) {
  const int64_t embd = o.n_embd(), heads = o.n_head();
  const bool bias = o.bias();
  DTR_CHECK(heads > 0 && embd > 0 && embd % heads == 0, ValueError,
            "CausalSelfAttention: n_embd ({}) must be a positive multiple of n_head ({})", embd,
            heads);
  c_attn = register_module("c_attn", Linear(embd, 3 * embd, bias, opts));
  c_proj = register_module("c_proj", Linear(embd, embd, bias, opts));
  resid_dropout = register_module("resid_dropout", Dropout(o.dropout()));
}

Tensor CausalSelfAttentionImpl::forward(const Tensor& x) {
  const int64_t n_embd = options.n_embd(), n_head = options.n_head();
  DTR_CHECK(x.defined() && x.dim() == 3 && x.size(2) == n_embd, ValueError,
            "CausalSelfAttention: expected input of shape (B, T, {}), got {}", n_embd,
            x.defined() ? shape_str(x.shape()) : "undefined");
  const int64_t B = x.size(0), T = x.size(1), C = n_embd, hs = C / n_head;
  const Tensor qkv = c_attn(x);  // (B, T, 3C)
  auto heads = [&](int64_t i) {
    // (B, T, C) slice → (B, T, nh, hs) → (B, nh, T, hs)
    return qkv.narrow(2, i * C, C).reshape({B, T, n_head, hs}).transpose(1, 2);
  };
  const Tensor q = heads(0), k = heads(1), v = heads(2);
  Tensor y = scaled_dot_product_attention(q, k, v, Tensor(), is_training() ? options.dropout() : 0.0,
                                          /*is_causal=*/true);      // (B, nh, T, hs)
  y = y.transpose(1, 2).contiguous().view({B, T, C});              // re-assemble heads
  return resid_dropout(c_proj(y));
}

}  // namespace dtr::nn
