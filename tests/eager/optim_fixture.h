// The optimizer tests' fixed run (tests/eager/nn_reference.py and
// optim_groups_reference.py compute the same in PyTorch): parameters p0
// (2x2) and p1 (3) with deterministic values, and three steps with fixed
// gradients.
#pragma once

#include <functional>
#include <vector>

#include "dtr/dtr.h"

namespace dtr::optim_fixture {

/// ((i·a) % 13 − 6)/8 + 0.01·i for element i.
inline Tensor vals(IntList shape, int64_t a, DType dtype = kFloat64) {
  std::vector<double> v(size_t(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double((int64_t(i) * a) % 13 - 6) / 8.0 + 0.01 * double(i);
  return from_vector(v, shape, dtype);
}

struct Params {
  Tensor p0, p1;
  explicit Params(DType dtype = kFloat64) {
    p0 = vals({2, 2}, 3, dtype);
    p1 = vals({3}, 5, dtype);
    p0.requires_grad_();
    p1.requires_grad_();
  }
  std::vector<Tensor> list() const { return {p0, p1}; }
  /// p0's then p1's values.
  std::vector<double> values() const {
    auto a = p0.to_vector<double>(), b = p1.to_vector<double>();
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
};

/// Step k's gradients (the reference scripts').
inline void set_grads(Params& p, int k) {
  constexpr double kMult[] = {1.0, -2.0, 0.1};
  p.p0.set_grad(mul(vals({2, 2}, 7, p.p0.dtype()), kMult[k]));
  p.p1.set_grad(mul(vals({3}, 11, p.p1.dtype()), kMult[k]));
}

/// Steps [from, to) of the run; `edit(k)` runs before step k. Returns the values.
inline std::vector<double> run(Params& p, optim::Optimizer& opt, int from = 0, int to = 3,
                               const std::function<void(int)>& edit = nullptr) {
  for (int k = from; k < to; ++k) {
    if (edit) edit(k);
    set_grads(p, k);
    opt.step();
  }
  return p.values();
}

}  // namespace dtr::optim_fixture
