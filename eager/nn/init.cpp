#include "eager/nn/init.h"

#include <cmath>

#include "eager/autograd.h"
#include "eager/ops.h"

namespace dtr::nn::init {

namespace {
// Draws in float64 and applies the affine map on the host, so a float32 and
// a float64 model built from the same seed start from the same (rounded)
// values; the parameter itself is a constant with no lineage.
Tensor affine_of(Tensor draws, double scale, double shift, TensorOptions opts, const char* what) {
  DTR_CHECK(is_floating(opts.dtype_), TypeError, "init.{}: expected a floating dtype, got {}", what,
            dtype_name(opts.dtype_));
  std::vector<double> v = draws.to_vector<double>();
  for (double& x : v) x = shift + scale * x;
  return detail::from_host(v.data(), int64_t(v.size()), kFloat64, draws.shape(),
                           TensorOptions(opts.dtype_).device(opts.device_));
}
}  // namespace

Tensor constant(IntList shape, double value, TensorOptions opts) {
  std::vector<double> v(size_t(numel(shape)), value);
  return detail::from_host(v.data(), int64_t(v.size()), kFloat64, shape,
                           TensorOptions(opts.dtype_).device(opts.device_));
}

Tensor uniform(IntList shape, double low, double high, TensorOptions opts) {
  NoGradGuard no_grad;
  return affine_of(rand(shape, kFloat64), high - low, low, opts, "uniform");
}

Tensor normal(IntList shape, double mean, double std, TensorOptions opts) {
  NoGradGuard no_grad;
  return affine_of(randn(shape, kFloat64), std, mean, opts, "normal");
}

int64_t fan_in(IntList shape) {
  DTR_CHECK(shape.size() >= 2, ValueError,
            "init: fan in can not be computed for a tensor with fewer than 2 dimensions (shape {})",
            shape_str(shape));
  int64_t receptive = 1;
  for (size_t i = 2; i < shape.size(); ++i) receptive *= shape[i];
  return shape[1] * receptive;
}

Tensor kaiming_uniform(IntList shape, double a, TensorOptions opts) {
  const int64_t fan = fan_in(shape);
  const double gain = std::sqrt(2.0 / (1.0 + a * a));
  const double bound = fan > 0 ? gain * std::sqrt(3.0 / double(fan)) : 0.0;
  return uniform(shape, -bound, bound, opts);
}

}  // namespace dtr::nn::init
