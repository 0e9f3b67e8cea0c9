// scaled_dot_product_attention (torch.nn.functional.scaled_dot_product_attention).
// Without a mask and without dropout it is one fused row per direction
// (kernels in cpu/attention.cpp): the forward keeps the output and the
// per-row logsumexp, never the (*, L, S) scores or probabilities, and the
// backward rebuilds them block by block. A GPT's attention then holds
// O(L) bytes per head for backward instead of O(L·S), and a replay of the
// output costs one fused kernel instead of a chain of matmul, scaling,
// masking and softmax storages. With an attn_mask or dropout it is the
// composite of matmul, mul, masked_fill/add, softmax, dropout and matmul,
// each step with its own backward rule.
#include <cmath>
#include <limits>

#include "eager/autograd.h"
#include "eager/ops/registration.h"

namespace dtr {
namespace {

/// The composite: matmul, scaling, mask, softmax, dropout, matmul.
Tensor attention_composite(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                           double dropout_p, bool is_causal, double s) {
  const int64_t L = q.size(-2), S = k.size(-2);
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

}  // namespace

namespace ops {
namespace {

// Rows: scaled_dot_product_attention (q (N, L, E), k (N, S, E), v (N, S, Ev))
// → (out (N, L, Ev), lse (N, L)); lse is float64 for float64 inputs, else
// float32. attrs scale, is_causal.
void infer_attention(std::span<const TensorMeta> in, const Attrs&, std::vector<TensorMeta>& out) {
  constexpr std::string_view kOp = "scaled_dot_product_attention";
  const TensorMeta &q = in[0], &k = in[1], &v = in[2];
  check_floating(kOp, q, "query");
  DTR_CHECK(q.dtype == k.dtype && q.dtype == v.dtype, TypeError,
            "{}: expected query, key and value of one floating dtype, got {}, {} and {}", kOp,
            dtype_name(q.dtype), dtype_name(k.dtype), dtype_name(v.dtype));
  DTR_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3 && q.shape[0] == k.shape[0] &&
                q.shape[0] == v.shape[0] && q.shape[2] == k.shape[2] && k.shape[1] == v.shape[1],
            ValueError, "{}: expected query (N, L, E), key (N, S, E) and value (N, S, Ev), got {}, {} and {}",
            kOp, shape_str(q.shape), shape_str(k.shape), shape_str(v.shape));
  out.push_back(out_meta({q.shape[0], q.shape[1], v.shape[2]}, q.dtype, q.device));
  out.push_back(out_meta({q.shape[0], q.shape[1]}, q.dtype == kFloat64 ? kFloat64 : kFloat32, q.device));
}

// scaled_dot_product_attention_backward: (g_out, [g_lse], q, k, v, out, lse)
// → (dq, dk, dv); attrs as the forward plus has_grad_lse.
void infer_attention_backward(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const size_t base = a.b("has_grad_lse") ? 2 : 1;
  DTR_CHECK(in.size() == base + 5, ValueError,
            "scaled_dot_product_attention_backward: expected {} inputs, got {}", base + 5, in.size());
  std::vector<TensorMeta> fwd;
  infer_attention(in.subspan(base, 3), a, fwd);
  DTR_CHECK(in[0].shape == fwd[0].shape && in[base + 3].shape == fwd[0].shape && in[base + 4].shape == fwd[1].shape &&
                in[base + 4].dtype == fwd[1].dtype && (base == 1 || in[1].shape == fwd[1].shape),
            ValueError, "scaled_dot_product_attention_backward: gradient or saved output of the wrong shape");
  for (size_t i = 0; i < 3; ++i) out.push_back(out_meta(in[base + i].shape, in[base + i].dtype, in[base + i].device));
}

// Two GEMMs over the visible scores (half of them under is_causal) and one
// exp per visible score.
OpCost attention_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
  const TensorMeta &q = in[0], &k = in[1], &v = in[2];
  const double scores = double(q.shape[0]) * double(q.shape[1]) * double(k.shape[1]) * (a.b("is_causal") ? 0.5 : 1.0);
  OpCost c;
  c.flops = 2.0 * scores * double(q.shape[2] + v.shape[2]);
  c.scalar_flops = 380.0 * scores;  // exp per score, as softmax's row (Note [scores])
  for (const auto* set : {&in, &out})
    for (const TensorMeta& m : *set) c.bytes += double(m.numel() * itemsize(m.dtype));
  return c;
}

// Five GEMMs and one exp per visible score.
OpCost attention_backward_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
  const size_t base = a.b("has_grad_lse") ? 2 : 1;
  OpCost c = attention_cost(in.subspan(base, 3), out, a);
  c.flops *= 2.5;
  for (const TensorMeta& m : in) c.bytes += double(m.numel() * itemsize(m.dtype));
  return c;
}

std::vector<Tensor> attention_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  const Tensor &q = ctx.inputs[0], &k = ctx.inputs[1], &v = ctx.inputs[2];
  const double scale = ctx.attrs.f("scale");
  const bool causal = ctx.attrs.b("is_causal");
  if (autograd::in_create_graph() && is_grad_enabled()) {
    // Note [higher-order gradients]: the composite's graph, differentiable again.
    if (g.size() > 1 && g[1].defined()) {
      throw NotImplementedError(
          "scaled_dot_product_attention: a create_graph backward through the logsumexp output is not supported");
    }
    const Tensor y = attention_composite(q, k, v, Tensor(), 0.0, causal, scale);
    std::vector<Tensor> wrt;
    std::vector<size_t> where;
    for (size_t i = 0; i < 3; ++i) {
      if (ctx.needs_grad(i) && ctx.inputs[i].requires_grad()) {
        wrt.push_back(ctx.inputs[i]);
        where.push_back(i);
      }
    }
    std::vector<Tensor> out(3);
    if (wrt.empty()) return out;
    std::vector<Tensor> grads = autograd::grad({y}, wrt, {g[0]}, /*retain_graph=*/true,
                                               /*create_graph=*/true, /*allow_unused=*/true);
    for (size_t j = 0; j < where.size(); ++j) out[where[j]] = grads[j];
    return out;
  }
  static const OpDef& o = dtr::op("scaled_dot_product_attention_backward");
  const bool has_glse = g.size() > 1 && g[1].defined();
  Tensor g_out = g[0].defined() ? g[0] : zeros_like(ctx.outputs[0]);
  std::vector<Tensor> ins{g_out};
  if (has_glse) ins.push_back(g[1]);
  for (const Tensor& t : {q, k, v, ctx.outputs[0], ctx.outputs[1]}) ins.push_back(t);
  Attrs attrs = ctx.attrs;
  attrs.set("has_grad_lse", has_glse);
  return dispatch(o, ins, std::move(attrs));
}

}  // namespace

void register_attention_ops() {
  auto& R = OpRegistry::instance();
  const std::vector<ParamSpec> kAttention{param::f("scale"), param::b("is_causal")};
  OpDef fwd{.name = "scaled_dot_product_attention", .params = kAttention, .infer = infer_attention,
            .cost = attention_cost, .backward = attention_backward};
  fwd.autocast = AutocastPolicy::kLowerPrecision;  // PyTorch's autocast lists it with matmul
  fwd.save = kSaveInputs | kSaveOutputs;
  fwd.inputs(3);
  R.define(std::move(fwd));
  std::vector<ParamSpec> kBackward = kAttention;
  kBackward.push_back(param::b("has_grad_lse"));
  OpDef bwd{.name = "scaled_dot_product_attention_backward", .params = kBackward,
            .infer = infer_attention_backward, .cost = attention_backward_cost, .save = kSaveNone};
  bwd.min_inputs = 6;
  bwd.max_inputs = 7;
  R.define(std::move(bwd));
}

}  // namespace ops

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

  const double s = scale.has_value() ? *scale : 1.0 / std::sqrt(double(q.size(-1)));
  const bool same_batch = q.dim() == k.dim() && q.dim() == v.dim() &&
                          std::equal(q.shape().begin(), q.shape().end() - 2, k.shape().begin()) &&
                          std::equal(q.shape().begin(), q.shape().end() - 2, v.shape().begin());
  if (attn_mask.defined() || dropout_p > 0.0 || !same_batch) {
    return attention_composite(q, k, v, attn_mask, dropout_p, is_causal, s);
  }
  // The fused rows work on (N, L, E): the batch dims flattened.
  const int64_t L = q.size(-2), S = k.size(-2), E = q.size(-1), Ev = v.size(-1);
  int64_t N = 1;
  for (int64_t d = 0; d < q.dim() - 2; ++d) N *= q.size(d);
  static const OpDef& o = dtr::op("scaled_dot_product_attention");
  const std::vector<Tensor> outs =
      dispatch(o, std::vector<Tensor>{reshape(q, {N, L, E}), reshape(k, {N, S, E}), reshape(v, {N, S, Ev})},
               Attrs{{"scale", s}, {"is_causal", is_causal}});
  Shape out_shape(q.shape().begin(), q.shape().end() - 1);
  out_shape.push_back(Ev);
  return reshape(outs[0], out_shape);
}

}  // namespace dtr
