#include "eager/nn/utils.h"

#include <cmath>
#include <limits>

#include "eager/autograd.h"
#include "eager/ops.h"

namespace dtr::nn::utils {

namespace {
std::vector<Tensor> defined_grads(const std::vector<Tensor>& parameters) {
  std::vector<Tensor> out;
  for (const Tensor& p : parameters) {
    Tensor g = p.defined() ? p.grad() : Tensor();
    if (g.defined()) out.push_back(g);
  }
  return out;
}

// The p-norm of all elements of `x` (0-d, x's dtype), as torch.norm.
Tensor norm(const Tensor& x, double p) {
  if (std::isinf(p)) return x.numel() == 0 ? zeros({}, x.dtype()) : abs(x).max();
  if (p == 2.0) return sqrt(sum(mul(x, x)));
  if (p == 1.0) return sum(abs(x));
  return pow(sum(pow(abs(x), p)), 1.0 / p);
}
}  // namespace

double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  DTR_CHECK(norm_type > 0, ValueError, "clip_grad_norm_: norm_type must be positive, got {}",
            norm_type);
  NoGradGuard no_grad;
  const std::vector<Tensor> grads = defined_grads(parameters);
  if (grads.empty()) return 0.0;
  std::vector<Tensor> norms;
  bool same_dtype = true;
  for (const Tensor& g : grads) {
    // On the first gradient's device, as PyTorch's.
    norms.push_back(norm(g.detach(), norm_type).to(grads[0].device()));
    same_dtype = same_dtype && g.dtype() == grads[0].dtype();
  }
  if (!same_dtype)
    for (Tensor& n : norms) n = n.to(kFloat64);
  const Tensor total = norms.size() == 1 ? norms[0] : norm(stack(norms), norm_type);
  const double value = total.item<double>();
  DTR_CHECK(!error_if_nonfinite || std::isfinite(value), ValueError,
            "clip_grad_norm_: the total norm of order {} for gradients from `parameters` is "
            "non-finite ({}), so it cannot be clipped",
            norm_type, value);
  // max_norm / (total + 1e-6), clamped to 1, in the norms' dtype (as PyTorch).
  const Tensor coef = clamp(div(full({}, max_norm, total.dtype()), add(total, 1e-6)), std::nullopt, 1.0);
  for (const Tensor& g : grads) {
    Tensor h = g;
    h.mul_(coef.to(g.dtype()).to(g.device()));
  }
  return value;
}

double clip_grad_norm_(const Tensor& parameter, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  return clip_grad_norm_(std::vector<Tensor>{parameter}, max_norm, norm_type, error_if_nonfinite);
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  DTR_CHECK(clip_value >= 0, ValueError, "clip_grad_value_: clip_value must be non-negative, got {}",
            clip_value);
  NoGradGuard no_grad;
  for (Tensor g : defined_grads(parameters)) g.clamp_(-clip_value, clip_value);
}

void clip_grad_value_(const Tensor& parameter, double clip_value) {
  clip_grad_value_(std::vector<Tensor>{parameter}, clip_value);
}

}  // namespace dtr::nn::utils
