// Public functions that libtorch spells differently from the rows they use:
// mm, bmm (matmul with libtorch's shape checks), min (mirroring max),
// argmax/argmin over the flattened tensor, the elementwise max/min, and
// leaky_relu. No rows of their own: each is a composition of registry ops,
// so it is differentiated and rematerialized through them.
#include "eager/ops/registration.h"

namespace dtr {

Tensor mm(const Tensor& a, const Tensor& b) {
  DTR_CHECK(a.defined() && b.defined(), ValueError, "mm: undefined tensor");
  DTR_CHECK(a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0), ValueError,
            "mm: expected 2-D matrices (n, k) and (k, m), got {} and {}", shape_str(a.shape()),
            shape_str(b.shape()));
  return matmul(a, b);
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  DTR_CHECK(a.defined() && b.defined(), ValueError, "bmm: undefined tensor");
  DTR_CHECK(a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0) && a.size(2) == b.size(1),
            ValueError, "bmm: expected 3-D batches (B, n, k) and (B, k, m), got {} and {}",
            shape_str(a.shape()), shape_str(b.shape()));
  return matmul(a, b);
}

Tensor max(const Tensor& a, const Tensor& b) { return maximum(a, b); }
Tensor min(const Tensor& a, const Tensor& b) { return minimum(a, b); }

Tensor min(const Tensor& x) { return amin(x); }

std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  DTR_CHECK(x.defined(), ValueError, "min: undefined tensor");
  const int64_t d = normalize_dim(dim, x.dim(), "min");
  // The values gathered at argmin's indices, so the gradient reaches that
  // index alone (as max_dim's does).
  Tensor idx = argmin(x, d, /*keepdim=*/true);
  Tensor values = x.dim() == 0 ? x : gather(x, d, idx);
  if (!keepdim && x.dim() > 0) {
    values = values.squeeze(d);
    idx = idx.squeeze(d);
  }
  return {values, idx};
}

namespace {
Tensor flat_arg(const Tensor& x, bool largest) {
  const char* name = largest ? "argmax" : "argmin";
  DTR_CHECK(x.defined(), ValueError, "{}: undefined tensor", name);
  DTR_CHECK(x.numel() > 0, ValueError, "{}: expected a non-empty tensor, got shape {}", name,
            shape_str(x.shape()));
  const Tensor flat = x.reshape({-1});
  return largest ? argmax(flat, 0) : argmin(flat, 0);
}
/// other * alpha, integral when both are.
Scalar scaled(Scalar other, Scalar alpha) {
  if (other.is_floating() || alpha.is_floating()) return Scalar(other.to_double() * alpha.to_double());
  return Scalar(other.to_int() * alpha.to_int());
}
}  // namespace

Tensor argmax(const Tensor& x) { return flat_arg(x, true); }
Tensor argmin(const Tensor& x) { return flat_arg(x, false); }

Tensor leaky_relu(const Tensor& x, Scalar negative_slope) {
  DTR_CHECK(x.defined(), ValueError, "leaky_relu: undefined tensor");
  DTR_CHECK(x.dtype() != kBool, TypeError, "leaky_relu: expected a numeric input, got bool of shape {}",
            shape_str(x.shape()));
  return where(gt(x, 0), x, mul(x, negative_slope));
}

// ---- Tensor methods over these --------------------------------------------------

Tensor Tensor::mm(const Tensor& o) const { return dtr::mm(*this, o); }
Tensor Tensor::bmm(const Tensor& o) const { return dtr::bmm(*this, o); }
Tensor Tensor::min() const { return dtr::min(*this); }
std::tuple<Tensor, Tensor> Tensor::min(int64_t d, bool keepdim) const { return dtr::min(*this, d, keepdim); }
Tensor Tensor::argmax() const { return dtr::argmax(*this); }
Tensor Tensor::add(Scalar o, Scalar alpha) const { return dtr::add(*this, scaled(o, alpha)); }
Tensor Tensor::sub(Scalar o, Scalar alpha) const { return dtr::sub(*this, scaled(o, alpha)); }
Tensor Tensor::mul(Scalar o) const { return dtr::mul(*this, o); }
Tensor Tensor::div(Scalar o) const { return dtr::div(*this, o); }
Tensor Tensor::argmin() const { return dtr::argmin(*this); }

Scalar Tensor::item() const {
  DTR_CHECK(defined(), ValueError, "item: tensor is undefined");
  if (is_floating(dtype())) return Scalar(item<double>());
  if (dtype() == kBool) return Scalar(item<bool>());
  return Scalar(item<int64_t>());
}

Tensor Tensor::to(DType t, bool /*non_blocking*/, bool copy) const {
  Tensor r = to(t);
  return copy && r.impl() == impl() ? r.clone() : r;
}

Tensor Tensor::to(Device d, bool /*non_blocking*/, bool copy) const {
  Tensor r = to(d);
  return copy && r.impl() == impl() ? r.clone() : r;
}

Tensor Tensor::to(Device d, DType t, bool /*non_blocking*/, bool copy) const {
  Tensor r = to(d).to(t);
  return copy && r.impl() == impl() ? r.clone() : r;
}

Tensor Tensor::to(const TensorOptions& opts, bool non_blocking, bool copy) const {
  return opts.has_dtype() ? to(opts.device_, opts.dtype_, non_blocking, copy)
                          : to(opts.device_, non_blocking, copy);
}

Tensor Tensor::to(const Tensor& other, bool non_blocking, bool copy) const {
  DTR_CHECK(other.defined(), ValueError, "to: the tensor to match is undefined");
  return to(other.device(), other.dtype(), non_blocking, copy);
}

Tensor& Tensor::uniform_(double from, double to) {
  DTR_CHECK(defined(), ValueError, "uniform_: tensor is undefined");
  DTR_CHECK(is_floating(dtype()), TypeError, "uniform_: expected a floating tensor, got {}",
            dtype_name(dtype()));
  DTR_CHECK(from <= to, ValueError, "uniform_: expects from <= to, got from={} to={}", from, to);
  return copy_(dtr::add(dtr::mul(rand_like(*this), to - from), from));
}

Tensor& Tensor::normal_(double mean, double std) {
  DTR_CHECK(defined(), ValueError, "normal_: tensor is undefined");
  DTR_CHECK(is_floating(dtype()), TypeError, "normal_: expected a floating tensor, got {}",
            dtype_name(dtype()));
  DTR_CHECK(std >= 0, ValueError, "normal_: expects std >= 0, got {}", std);
  return copy_(dtr::add(dtr::mul(randn_like(*this), std), mean));
}

}  // namespace dtr
