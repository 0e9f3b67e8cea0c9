// Parameter initialization (torch.nn.init). Every initializer draws from the
// global Philox generator through dtr::rand / dtr::randn, so
// dtr::manual_seed(s) makes a model's initial weights reproducible. The
// result is a fresh constant tensor (no lineage); the caller registers it as
// a parameter.
#pragma once

#include "eager/tensor.h"

namespace dtr::nn::init {

/// A tensor filled with `value`, made without lineage (torch.nn.init.constant_);
/// draws nothing from the generator.
Tensor constant(IntList shape, double value, TensorOptions opts = {});
/// Values uniform in [low, high) (torch.nn.init.uniform_). opts gives dtype
/// and device; floating dtypes only (TypeError otherwise).
Tensor uniform(IntList shape, double low, double high, TensorOptions opts = {});
/// Values from N(mean, std^2) (torch.nn.init.normal_).
Tensor normal(IntList shape, double mean, double std, TensorOptions opts = {});
/// torch.nn.init.kaiming_uniform_(w, a) with mode="fan_in",
/// nonlinearity="leaky_relu": uniform in ±gain*sqrt(3/fan_in), gain =
/// sqrt(2/(1+a^2)). fan_in = shape[1] * prod(shape[2:]). Throws ValueError
/// for fewer than 2 dimensions.
Tensor kaiming_uniform(IntList shape, double a, TensorOptions opts = {});
/// fan_in of a weight of `shape` as torch.nn.init._calculate_fan_in_and_fan_out.
int64_t fan_in(IntList shape);

}  // namespace dtr::nn::init
