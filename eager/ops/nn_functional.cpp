// embedding (torch.nn.functional.embedding), dropout
// (torch.nn.functional.dropout), dropout2d (a composite: dropout of a ones
// tensor of one element per channel, times x), with the gradient ops their
// backward rules call, one_hot (torch.nn.functional.one_hot) and multinomial
// (torch.multinomial). Kernels: cpu/nn_functional.cpp.
#include <algorithm>

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

// The dropout_backward row is linear in g (Note [higher-order gradients]).
std::vector<Tensor> dropout_backward_backward(const BackwardContext& ctx, std::span<const Tensor> gg) {
  static const OpDef& o = op("dropout_backward");
  return {dispatch1(o, {gg[0], ctx.inputs[1]}, Attrs{{"p", ctx.attrs.f("p")}}), Tensor()};
}

// ---- one_hot ----------------------------------------------------------------------

// inputs: indices int64 (*) → int64 (*, num_classes). The values are checked
// by the kernel (IndexError).
void infer_one_hot(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  DTR_CHECK(in[0].dtype == kInt64, TypeError,
            "one_hot: is only applicable to index tensors of dtype int64, got {} of shape {}",
            dtype_name(in[0].dtype), shape_str(in[0].shape));
  const int64_t num_classes = a.i("num_classes");
  DTR_CHECK(num_classes >= 0, ValueError, "one_hot: num_classes must be non-negative, got {}", num_classes);
  Shape shape = in[0].shape;
  shape.push_back(num_classes);
  out.push_back(out_meta(shape, kInt64, in[0].device));
}

// ---- multinomial -------------------------------------------------------------------

// inputs: probs floating (C) or (R, C) → int64 (num_samples) or (R, num_samples).
// The values (non-negative, finite, a positive sum, enough non-zero
// categories without replacement) are checked by the kernel (ValueError).
void infer_multinomial(std::span<const TensorMeta> in, const Attrs& a, std::vector<TensorMeta>& out) {
  const TensorMeta& p = in[0];
  DTR_CHECK(is_floating(p.dtype), TypeError,
            "multinomial: only floating point probabilities are supported, got {} of shape {}",
            dtype_name(p.dtype), shape_str(p.shape));
  DTR_CHECK(p.dim() == 1 || p.dim() == 2, ValueError,
            "multinomial: prob_dist must be 1 or 2 dim, got shape {}", shape_str(p.shape));
  const int64_t n = a.i("num_samples"), categories = p.shape.back();
  DTR_CHECK(n > 0, ValueError, "multinomial: cannot sample n_sample <= 0 samples (num_samples = {})", n);
  DTR_CHECK(a.b("replacement") || n <= categories, ValueError,
            "multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement "
            "({} samples, {} categories)",
            n, categories);
  Shape shape = p.shape;
  shape.back() = n;
  out.push_back(out_meta(shape, kInt64, p.device));
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
  R.define(OpDef{.name = "dropout_backward", .params = {param::f("p")}, .infer = infer_dropout_backward,
                 .backward = dropout_backward_backward, .save = kSaveInputs, .nondiff_inputs = 1u << 1,
                 .min_inputs = 2, .max_inputs = 2});

  // Not differentiable: integer outputs.
  OpDef oh{.name = "one_hot", .params = {param::i("num_classes")}, .infer = infer_one_hot, .save = kSaveNone};
  oh.inputs(1);
  R.define(std::move(oh));

  // Two Philox draws per sample (one 53-bit uniform), at the recorded (seed, offset).
  OpDef mn{.name = "multinomial", .params = {param::i("num_samples"), param::b("replacement", false)},
           .infer = infer_multinomial, .save = kSaveNone};
  mn.flags.random = true;
  mn.inputs(1);
  R.define(std::move(mn));
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

/// torch.nn.functional.one_hot(indices, num_classes): indices int64 of any
/// shape (*) → int64 (*, num_classes), 1 at each index and 0 elsewhere.
/// num_classes = -1 infers max(indices) + 1 (reading the indices). Not
/// differentiable. Throws TypeError for indices not int64, ValueError for
/// num_classes < -1 or for -1 with empty indices, IndexError for a
/// negative index or one >= num_classes.
Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  static const OpDef& o = op("one_hot");
  DTR_CHECK(indices.defined(), ValueError, "one_hot: indices are undefined");
  DTR_CHECK(indices.dtype() == kInt64, TypeError,
            "one_hot: is only applicable to index tensors of dtype int64, got {} of shape {}",
            dtype_name(indices.dtype()), shape_str(indices.shape()));
  DTR_CHECK(num_classes >= -1, ValueError, "one_hot: num_classes must be -1 or non-negative, got {}",
            num_classes);
  if (num_classes == -1) {
    DTR_CHECK(indices.numel() > 0, ValueError,
              "one_hot: can not infer the total number of classes from an empty tensor (shape {})",
              shape_str(indices.shape()));
    num_classes = std::max<int64_t>(0, max(indices).item<int64_t>() + 1);
  }
  return dispatch1(o, {indices}, Attrs{{"num_classes", num_classes}});
}

/// torch.multinomial(probs, num_samples, replacement): int64 category
/// indices drawn from each row of probs (1-D (C) → (num_samples); 2-D (R, C)
/// → (R, num_samples)), each row a distribution up to scale (non-negative,
/// finite, positive sum). Without replacement a category is drawn at most
/// once per row. Sample s of row r reads Philox draws 2(r * num_samples + s)
/// and the next at the (seed, offset) reserved at dispatch, so a replay
/// draws the same samples; zero-probability categories are never drawn.
/// Not differentiable. Throws TypeError for non-floating probs, ValueError
/// for probs not 1-D or 2-D, num_samples <= 0, a negative, infinite or NaN
/// probability, a row summing to 0, and without replacement for more
/// samples than categories with non-zero probability.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement) {
  static const OpDef& o = op("multinomial");
  return dispatch1(o, {probs}, Attrs{{"num_samples", num_samples}, {"replacement", replacement}});
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
