#include "eager/nn/attention.h"

#include "eager/ops.h"

namespace dtr::nn {

CausalSelfAttention::CausalSelfAttention(int64_t embd, int64_t heads, double p, bool bias,
                                         TensorOptions opts)
    : UnaryModule("CausalSelfAttention"), n_embd(embd), n_head(heads), dropout(p) {
  DTR_CHECK(heads > 0 && embd > 0 && embd % heads == 0, ValueError,
            "CausalSelfAttention: n_embd ({}) must be a positive multiple of n_head ({})", embd,
            heads);
  c_attn = register_module("c_attn", std::make_shared<Linear>(embd, 3 * embd, bias, opts));
  c_proj = register_module("c_proj", std::make_shared<Linear>(embd, embd, bias, opts));
  resid_dropout = register_module("resid_dropout", std::make_shared<Dropout>(p));
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  DTR_CHECK(x.defined() && x.dim() == 3 && x.size(2) == n_embd, ValueError,
            "CausalSelfAttention: expected input of shape (B, T, {}), got {}", n_embd,
            x.defined() ? shape_str(x.shape()) : "undefined");
  const int64_t B = x.size(0), T = x.size(1), C = n_embd, hs = C / n_head;
  const Tensor qkv = c_attn->forward(x);  // (B, T, 3C)
  auto heads = [&](int64_t i) {
    // (B, T, C) slice → (B, T, nh, hs) → (B, nh, T, hs)
    return qkv.narrow(2, i * C, C).reshape({B, T, n_head, hs}).transpose(1, 2);
  };
  const Tensor q = heads(0), k = heads(1), v = heads(2);
  Tensor y = scaled_dot_product_attention(q, k, v, Tensor(), is_training() ? dropout : 0.0,
                                          /*is_causal=*/true);      // (B, nh, T, hs)
  y = y.transpose(1, 2).contiguous().view({B, T, C});              // re-assemble heads
  return resid_dropout->forward(c_proj->forward(y));
}

}  // namespace dtr::nn
