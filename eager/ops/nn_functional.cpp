// embedding (torch.nn.functional.embedding), dropout
// (torch.nn.functional.dropout) and dropout2d (a composite: dropout of a
// ones tensor of one element per channel, times x), with the gradient ops their backward rules
// call. Kernels: cpu/nn_functional.cpp.
#include "eager/ops/registration.h"

namespace dtr {
namespace ops {
namespace {

// ---- embedding ------------------------------------------------------------------

void check_index_dtype(std::string_view op, const TensorMeta& idx) {
  DTR_CHECK(idx.dtype == kInt64 || idx.dtype == kInt32, TypeError,
            "{}: expected indices of dtype int64 or int32, got {} of shape {}", op,
            dtype_name(idx.dtype), shape_str(idx.shape));
}

// inputs: weight (V, D), indices (*) → (*, D).
void infer_embedding(std::span<const TensorMeta> in, const Attrs&, std::vector<TensorMeta>& out) {
  const TensorMeta &w = in[0], &idx = in[1];
  DTR_CHECK(w.dim() == 2, ValueError,
            "embedding: weight must be 2-D (num_embeddings, embedding_dim), got shape {}",
            shape_str(w.shape));
  check_index_dtype("embedding", idx);
  Shape shape = idx.shape;
  shape.push_back(w.shape[1]);
  out.push_back(out_meta(shape, w.dtype, w.device));
}

// inputs: grad (*, D), indices (*); attrs num_weights → (V, D).
void infer_embedding_backward(std::span<const TensorMeta> in, const Attrs& a,
                              std::vector<TensorMeta>& out) {
  constexpr std::string_view kOp = "embedding_backward";
  const TensorMeta &grad = in[0], &idx = in[1];
  check_index_dtype(kOp, idx);
  // A row callable by name (bindings): grad must be (*indices, D).
  Shape expected = idx.shape;
  expected.push_back(grad.dim() > 0 ? grad.shape.back() : 0);
  DTR_CHECK(grad.dim() > 0 && grad.shape == expected, ValueError,
            "{}: grad of shape {} does not match indices {} (expected indices' shape plus one "
            "dimension)",
            kOp, shape_str(grad.shape), shape_str(idx.shape));
  const int64_t num_weights = a.i("num_weights");
  DTR_CHECK(num_weights >= 0, ValueError, "{}: num_weights must be non-negative, got {}", kOp,
            num_weights);
  out.push_back(out_meta({num_weights, grad.shape.back()}, grad.dtype, grad.device));
}

std::vector<Tensor> embedding_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("embedding_backward");
  return {dispatch1(o, {g[0], ctx.inputs[1]}, Attrs{{"num_weights", ctx.input_metas[0].shape[0]}})};
}

// ---- dropout ----------------------------------------------------------------------
// The op has two outputs: the result and the bool keep-mask. The mask is
// saved for the backward rather than re-drawn: a backward rule does not see
// the forward's RNG state, and a saved output is an ordinary evictable
// storage whose rematerialization replays the recorded (seed, offset), so it
// costs memory only while resident (Note [replay equals original]).

void infer_dropout(std::span<const TensorMeta> in, const Attrs&, std::vector<TensorMeta>& out) {
  check_floating("dropout", in[0]);
  out.push_back(out_meta(in[0].shape, in[0].dtype, in[0].device));
  out.push_back(out_meta(in[0].shape, kBool, in[0].device));
}

// inputs: grad (*), mask bool (*) → grad (*).
void infer_dropout_backward(std::span<const TensorMeta> in, const Attrs&,
                            std::vector<TensorMeta>& out) {
  DTR_CHECK(in[1].dtype == kBool && in[1].shape == in[0].shape, ValueError,
            "dropout_backward: mask must be bool of the grad's shape {}, got {} {}",
            shape_str(in[0].shape), dtype_name(in[1].dtype), shape_str(in[1].shape));
  out.push_back(out_meta(in[0].shape, in[0].dtype, in[0].device));
}

std::vector<Tensor> dropout_backward(const BackwardContext& ctx, std::span<const Tensor> g) {
  static const OpDef& o = op("dropout_backward");
  return {dispatch1(o, {g[0], ctx.outputs[1]}, Attrs{{"p", ctx.attrs.f("p")}})};
}

}  // namespace

void register_nn_functional_ops() {
  auto& R = OpRegistry::instance();
  R.define(OpDef{.name = "embedding", .infer = infer_embedding, .backward = embedding_backward,
                 .nondiff_inputs = 1u << 1,
                 .min_inputs = 2, .max_inputs = 2});
  R.define(OpDef{.name = "embedding_backward", .params = {param::i("num_weights")}, .infer = infer_embedding_backward,
                 .save = kSaveNone,
                 .min_inputs = 2, .max_inputs = 2});

  OpDef drop{.name = "dropout", .params = {param::f("p", 0.5)}, .infer = infer_dropout, .backward = dropout_backward,
             .save = kSaveOutputs};
  drop.flags.random = true;
  drop.scalar_flops_per_element = 640;  // Philox draws: Note [scores]
  drop.inputs(1);
  R.define(std::move(drop));
  R.define(OpDef{.name = "dropout_backward", .params = {param::f("p")}, .infer = infer_dropout_backward, .save = kSaveNone,
                 .min_inputs = 2, .max_inputs = 2});
}

}  // namespace ops

/// torch.nn.functional.embedding: weight (V, D) of any dtype, indices int64 or
/// int32 of any shape (*) → (*, D), rows of weight gathered. The gradient
/// sums the rows of grad per index deterministically (no atomics).
/// Throws IndexError naming the offending value when an index is outside
/// [0, V), ValueError when weight is not 2-D, TypeError for other index dtypes.
Tensor embedding(const Tensor& weight, const Tensor& indices) {
  static const OpDef& o = op("embedding");
  return dispatch1(o, {weight, indices});
}

/// torch.nn.functional.dropout: each element is zeroed with probability p and
/// the rest scaled by 1 / (1 - p). Element i is kept iff
/// u32_to_uniform(philox_u32(rng, i)) >= p, with rng the (seed, offset)
/// reserved at dispatch, so the same (seed, offset) gives the same mask.
/// training == false or p == 0 returns x itself. x floating, any shape.
/// Throws ValueError when p is outside [0, 1], TypeError for non-floating x.
Tensor dropout(const Tensor& x, double p, bool training) {
  static const OpDef& o = op("dropout");
  DTR_CHECK(p >= 0.0 && p <= 1.0, ValueError,
            "dropout: probability has to be between 0 and 1, but got {}", p);
  if (!training || p == 0.0) return x;
  return dispatch(o, std::vector<Tensor>{x}, Attrs{{"p", p}})[0];
}

/// torch.nn.functional.dropout2d: each channel of x (N, C, H, W) is zeroed
/// with probability p, the others scaled by 1 / (1 - p). A 3-D x is taken as
/// (N, C, L) and its channels dropped (PyTorch 1.13/2.x's behaviour, with
/// its warning). The per-channel noise is dropout(ones(N, C, 1, 1), p): the
/// Philox (seed, offset) of that dropout op is recorded, so a replay under a
/// budget redraws the same channels. training == false or p == 0 returns x.
/// Throws ValueError when p is outside [0, 1] or x is not 3-D or 4-D,
/// TypeError for non-floating x.
Tensor dropout2d(const Tensor& x, double p, bool training) {
  DTR_CHECK(p >= 0.0 && p <= 1.0, ValueError,
            "dropout2d: dropout probability has to be between 0 and 1, but got {}", p);
  DTR_CHECK(x.defined() && (x.dim() == 3 || x.dim() == 4), ValueError,
            "dropout2d: expected a 3-D (N, C, L) or 4-D (N, C, H, W) input, got {}",
            x.defined() ? shape_str(x.shape()) : "an undefined tensor");
  ops::check_floating("dropout2d", x.meta());
  if (!training || p == 0.0) return x;
  Shape noise_shape(size_t(x.dim()), 1);
  noise_shape[0] = x.size(0);
  noise_shape[1] = x.size(1);
  const Tensor noise = dropout(ones(noise_shape, TensorOptions(x.dtype()).device(x.device())), p, true);
  return mul(x, noise);
}

}  // namespace dtr
