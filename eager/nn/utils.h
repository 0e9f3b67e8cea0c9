// torch.nn.utils: gradient clipping over a list of parameters.
#pragma once

#include <vector>

#include "eager/tensor.h"

namespace dtr::nn::utils {

/// torch.nn.utils.clip_grad_norm_ (libtorch's, which returns a double):
/// the total `norm_type`-norm of the gradients of `parameters` (those with a
/// defined .grad), as the norm of the per-gradient norms (computed in the
/// gradients' dtype; norm_type may be infinity for the largest |g|). When
/// max_norm / (total + 1e-6) is below 1 every gradient is scaled in place by
/// it (the coefficient is clamped to 1, so gradients are never scaled up).
/// Returns the total norm before clipping, 0 without gradients. Throws
/// ValueError for norm_type <= 0, and, with `error_if_nonfinite`, for a
/// total norm that is NaN or infinite (nothing is scaled then).
double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm,
                       double norm_type = 2.0, bool error_if_nonfinite = false);
double clip_grad_norm_(const Tensor& parameter, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

/// torch.nn.utils.clip_grad_value_: clamps every defined gradient in place
/// to [-clip_value, clip_value]. Throws ValueError for a negative clip_value.
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);
void clip_grad_value_(const Tensor& parameter, double clip_value);

}  // namespace dtr::nn::utils
