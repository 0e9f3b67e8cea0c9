// The loss functions with libtorch's signatures (eager/ops.h "losses"). The
// unweighted class-index losses and mse_loss dispatch to their rows
// (eager/ops/loss.cpp); class weights, label smoothing, probability targets
// and the other losses are compositions of registry ops, so they run on every
// backend, differentiate through their parts and rematerialize like any
// other op. Values follow PyTorch 1.13's formulas.
#include "eager/ops/registration.h"

namespace dtr {
namespace {

Tensor reduce_loss(const Tensor& loss, LossReduction r) {
  switch (r.value()) {
    case Reduction::None: return loss;
    case Reduction::Sum: return sum(loss);
    default: return mean(loss);
  }
}

/// input and target of an elementwise loss: defined, floating, one dtype,
/// one shape.
void check_pair(const Tensor& input, const Tensor& target, std::string_view op) {
  DTR_CHECK(input.defined() && target.defined(), ValueError, "{}: input and target must be defined", op);
  DTR_CHECK(is_floating(input.dtype()) && is_floating(target.dtype()), TypeError,
            "{}: expected floating point input and target, got {} and {}", op,
            dtype_name(input.dtype()), dtype_name(target.dtype()));
  DTR_CHECK(input.dtype() == target.dtype(), TypeError,
            "{}: input and target must have the same dtype, got {} and {}", op,
            dtype_name(input.dtype()), dtype_name(target.dtype()));
  DTR_CHECK(input.sizes() == target.sizes(), ValueError,
            "{}: input and target must have the same shape, got {} and {}", op,
            shape_str(input.shape()), shape_str(target.shape()));
}

/// An optional weight of a loss: undefined, or floating of input's dtype.
void check_weight(const Tensor& w, const Tensor& input, std::string_view op, std::string_view what) {
  if (!w.defined()) return;
  DTR_CHECK(w.dtype() == input.dtype(), TypeError, "{}: {} must have the input's dtype {}, got {}",
            op, what, dtype_name(input.dtype()), dtype_name(w.dtype()));
}

/// The class dim of a class-index loss's input: 0 for (C), else 1.
int64_t class_dim(const Tensor& input) { return input.dim() == 1 ? 0 : 1; }

/// Checks a class-index loss's (input, target, weight): input floating (C),
/// (N, C) or (N, C, d...); target int64 (), (N) or (N, d...); weight
/// undefined or C values of input's dtype; targets other than ignore_index
/// in [0, C) (this reads the targets: a host sync).
void check_class_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                      int64_t ignore_index, std::string_view op) {
  DTR_CHECK(input.defined() && target.defined(), ValueError, "{}: input and target must be defined", op);
  DTR_CHECK(is_floating(input.dtype()), TypeError, "{}: expected a floating point input, got {}", op,
            dtype_name(input.dtype()));
  DTR_CHECK(target.dtype() == kInt64, TypeError,
            "{}: expected target of dtype int64 (class indices), got {} of shape {}", op,
            dtype_name(target.dtype()), shape_str(target.shape()));
  DTR_CHECK(input.dim() >= 1, ValueError, "{}: expected input of shape (C), (N, C) or (N, C, d...), got {}",
            op, shape_str(input.shape()));
  Shape expected;
  if (input.dim() >= 2) {
    expected.push_back(input.size(0));
    for (int64_t d = 2; d < input.dim(); ++d) expected.push_back(input.size(d));
  }
  DTR_CHECK(target.sizes() == expected, ValueError,
            "{}: expected target of shape {} for input of shape {}, got target of shape {}", op,
            shape_str(expected), shape_str(input.shape()), shape_str(target.shape()));
  const int64_t classes = input.size(class_dim(input));
  if (weight.defined()) {
    check_weight(weight, input, op, "weight");
    DTR_CHECK(weight.dim() == 1 && weight.size(0) == classes, ValueError,
              "{}: weight must hold one value per class ({}), got shape {}", op, classes,
              shape_str(weight.shape()));
  }
  if (target.numel() > 0) {
    const Tensor counted = masked_fill(target, eq(target, ignore_index), 0);
    const int64_t lo = amin(counted).item<int64_t>(), hi = amax(counted).item<int64_t>();
    DTR_CHECK(lo >= 0 && hi < classes, IndexError, "{}: target {} is out of bounds for {} classes", op,
              lo < 0 ? lo : hi, classes);
  }
}

/// Shape of the weight broadcast along the class dim of `input`.
Shape class_broadcast_shape(const Tensor& input, int64_t classes) {
  Shape s(size_t(input.dim()), 1);
  s[size_t(class_dim(input))] = classes;
  return s;
}

/// Per element: w[target] where target != ignore_index, else 0 (target's shape).
Tensor target_weights(const Tensor& weight, const Tensor& target, int64_t ignore_index) {
  const Tensor ignored = eq(target, ignore_index);
  const Tensor safe = masked_fill(target, ignored, 0);
  const Tensor w = index_select(weight, 0, safe.reshape({-1})).reshape(target.sizes());
  return masked_fill(w, ignored, 0);
}

/// nll_loss with class weights, after check_class_loss.
Tensor weighted_nll(const Tensor& input, const Tensor& target, const Tensor& weight,
                    LossReduction reduction, int64_t ignore_index) {
  const int64_t cd = class_dim(input);
  const Tensor safe = masked_fill(target, eq(target, ignore_index), 0);
  const Tensor picked = gather(input, cd, safe.unsqueeze(cd)).squeeze(cd);
  const Tensor w = target_weights(weight, target, ignore_index);
  const Tensor loss = neg(mul(picked, w));
  switch (reduction.value()) {
    case Reduction::None: return loss;
    case Reduction::Sum: return sum(loss);
    default: return div(sum(loss), sum(w));
  }
}

/// cross_entropy with a floating target of class probabilities.
Tensor probability_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                                 LossReduction reduction, double label_smoothing) {
  check_pair(input, target, "cross_entropy");
  const int64_t cd = class_dim(input);
  const int64_t classes = input.size(cd);
  if (weight.defined()) {
    check_weight(weight, input, "cross_entropy", "weight");
    DTR_CHECK(weight.dim() == 1 && weight.size(0) == classes, ValueError,
              "cross_entropy: weight must hold one value per class ({}), got shape {}", classes,
              shape_str(weight.shape()));
  }
  Tensor t = target;
  if (label_smoothing > 0) t = add(mul(t, 1.0 - label_smoothing), label_smoothing / double(classes));
  Tensor lp = log_softmax(input, cd);
  if (weight.defined()) lp = mul(lp, weight.reshape(class_broadcast_shape(input, classes)));
  const Tensor loss = neg(sum(mul(lp, t), {cd}));
  switch (reduction.value()) {
    case Reduction::None: return loss;
    case Reduction::Sum: return sum(loss);
    default: return div(sum(loss), double(input.numel() / std::max<int64_t>(classes, 1)));
  }
}

}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                LossReduction reduction, int64_t ignore_index) {
  if (!weight.defined()) {
    static const OpDef& o = op("nll_loss");
    return dispatch1(o, {input, target},
                     Attrs{{"ignore_index", ignore_index}, {"reduction", reduction.code()}});
  }
  check_class_loss(input, target, weight, ignore_index, "nll_loss");
  return weighted_nll(input, target, weight, reduction, ignore_index);
}

Tensor cross_entropy_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                          LossReduction reduction, int64_t ignore_index, double label_smoothing) {
  DTR_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, ValueError,
            "cross_entropy: label_smoothing must be between 0.0 and 1.0, got {}", label_smoothing);
  // As PyTorch, a target of input's shape holds probabilities; any other is
  // class indices (and must be int64).
  if (input.defined() && target.defined() && is_floating(target.dtype()) &&
      input.sizes() == target.sizes()) {
    return probability_cross_entropy(input, target, weight, reduction, label_smoothing);
  }
  if (!weight.defined() && label_smoothing == 0.0) {
    static const OpDef& o = op("cross_entropy");
    return dispatch1(o, {input, target},
                     Attrs{{"ignore_index", ignore_index}, {"reduction", reduction.code()}});
  }
  check_class_loss(input, target, weight, ignore_index, "cross_entropy");
  const int64_t cd = class_dim(input);
  const Tensor lp = log_softmax(input, cd);
  const Tensor nll = weight.defined() ? weighted_nll(lp, target, weight, reduction, ignore_index)
                                      : nll_loss(lp, target, {}, reduction, ignore_index);
  if (label_smoothing == 0.0) return nll;
  // The uniform part: -sum_c w_c log p_c per element, 0 where ignored,
  // reduced over the counted elements as nll_loss reduces.
  const int64_t classes = input.size(cd);
  const Tensor ignored = eq(target, ignore_index);
  const Tensor weighted =
      weight.defined() ? mul(lp, weight.reshape(class_broadcast_shape(input, classes))) : lp;
  const Tensor smooth = masked_fill(neg(sum(weighted, {cd})), ignored, 0);
  Tensor reduced;
  switch (reduction.value()) {
    case Reduction::None: reduced = smooth; break;
    case Reduction::Sum: reduced = sum(smooth); break;
    default:
      reduced = div(sum(smooth), weight.defined() ? sum(target_weights(weight, target, ignore_index))
                                                  : sum(ne(target, ignore_index)));
  }
  return add(mul(nll, 1.0 - label_smoothing), mul(reduced, label_smoothing / double(classes)));
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                     LossReduction reduction, int64_t ignore_index, double label_smoothing) {
  return cross_entropy_loss(input, target, weight, reduction, ignore_index, label_smoothing);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, LossReduction reduction) {
  static const OpDef& o = op("mse_loss");
  return dispatch1(o, {input, target}, Attrs{{"reduction", reduction.code()}});
}

Tensor l1_loss(const Tensor& input, const Tensor& target, LossReduction reduction) {
  check_pair(input, target, "l1_loss");
  return reduce_loss(abs(sub(input, target)), reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, LossReduction reduction, double beta) {
  DTR_CHECK(beta >= 0, ValueError, "smooth_l1_loss: beta must not be negative, got {}", beta);
  if (beta == 0) return l1_loss(input, target, reduction);
  check_pair(input, target, "smooth_l1_loss");
  const Tensor d = abs(sub(input, target));
  const Tensor quadratic = div(mul(mul(d, 0.5), d), beta);
  return reduce_loss(where(lt(d, beta), quadratic, sub(d, 0.5 * beta)), reduction);
}

Tensor huber_loss(const Tensor& input, const Tensor& target, LossReduction reduction, double delta) {
  DTR_CHECK(delta > 0, ValueError, "huber_loss: delta must be positive, got {}", delta);
  check_pair(input, target, "huber_loss");
  const Tensor d = abs(sub(input, target));
  const Tensor quadratic = mul(mul(d, 0.5), d);
  return reduce_loss(where(lt(d, delta), quadratic, mul(sub(d, 0.5 * delta), delta)), reduction);
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                            LossReduction reduction) {
  check_pair(input, target, "binary_cross_entropy");
  check_weight(weight, input, "binary_cross_entropy", "weight");
  if (input.numel() > 0) {
    const Tensor x = input.detach();
    const double lo = amin(x).item<double>(), hi = amax(x).item<double>();
    DTR_CHECK(lo >= 0 && hi <= 1, ValueError,
              "binary_cross_entropy: all elements of input should be between 0 and 1, got values "
              "in [{}, {}]", lo, hi);
  }
  // -(t log x + (1 - t) log(1 - x)), each log clamped at -100 as PyTorch.
  const Tensor log_x = clamp(log(input), -100.0, std::nullopt);
  const Tensor log_1mx = clamp(log(1.0 - input), -100.0, std::nullopt);
  Tensor loss = sub(mul(sub(target, 1.0), log_1mx), mul(target, log_x));
  if (weight.defined()) loss = mul(loss, weight);
  return reduce_loss(loss, reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight,
                                        const Tensor& pos_weight, LossReduction reduction) {
  check_pair(input, target, "binary_cross_entropy_with_logits");
  check_weight(weight, input, "binary_cross_entropy_with_logits", "weight");
  check_weight(pos_weight, input, "binary_cross_entropy_with_logits", "pos_weight");
  // softplus(-x) = log(1 + exp(-x)), computed as m + log(exp(-m) + exp(-x - m))
  // with m = max(-x, 0) so that neither exp overflows.
  const Tensor m = relu(neg(input));
  const Tensor softplus_neg = add(log(add(exp(neg(m)), exp(sub(neg(input), m)))), m);
  const Tensor scale = pos_weight.defined() ? add(mul(sub(pos_weight, 1.0), target), 1.0) : Tensor();
  Tensor loss = add(mul(1.0 - target, input), scale.defined() ? mul(scale, softplus_neg) : softplus_neg);
  if (weight.defined()) loss = mul(loss, weight);
  return reduce_loss(loss, reduction);
}

Tensor kl_div(const Tensor& input, const Tensor& target, LossReduction reduction, bool log_target) {
  check_pair(input, target, "kl_div");
  Tensor loss;
  if (log_target) {
    loss = mul(exp(target), sub(target, input));
  } else {
    // target log(target) is taken as 0 where target is 0 (xlogy).
    const Tensor positive = gt(target, 0);
    const Tensor safe = where(positive, target, ones_like(target));
    loss = sub(mul(target, log(safe)), mul(target, input));
  }
  return reduce_loss(loss, reduction);
}

}  // namespace dtr
