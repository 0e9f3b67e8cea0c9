// Shared test helpers: finite-difference gradient checks in float64 and
// value comparison. Tests assert values; timings live in benchmarks/.
#pragma once

#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dtr/dtr.h"

namespace dtr::testing {

/// The message of the E (any dtr::Error by default) that `f` throws; "" when
/// it throws none. Other exceptions propagate.
template <typename E = Error, typename F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

/// Runs `f`, expecting it to throw E with a message containing every `parts`.
template <typename E, typename F>
::testing::AssertionResult throws_with(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const auto& p : parts)
      if (msg.find(p) == std::string::npos)
        return ::testing::AssertionFailure() << "message '" << msg << "' lacks '" << p << "'";
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw another type: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

/// Asserts that `t` holds `expected` (row-major) within atol + rtol*|expected|.
inline ::testing::AssertionResult allclose(const Tensor& t, const std::vector<double>& expected,
                                           double atol = 1e-6, double rtol = 1e-5) {
  if (!t.defined()) return ::testing::AssertionFailure() << "tensor is undefined";
  const std::vector<double> got = t.to_vector<double>();
  if (got.size() != expected.size())
    return ::testing::AssertionFailure()
           << "size " << got.size() << " != expected " << expected.size();
  for (size_t i = 0; i < got.size(); ++i) {
    const bool both_nan = std::isnan(got[i]) && std::isnan(expected[i]);
    const bool both_inf = std::isinf(got[i]) && got[i] == expected[i];
    if (!both_nan && !both_inf && !(std::abs(got[i] - expected[i]) <= atol + rtol * std::abs(expected[i])))
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << got[i] << ", expected " << expected[i];
  }
  return ::testing::AssertionSuccess();
}

/// Bitwise equality of two tensors' bytes (same dtype and shape).
inline ::testing::AssertionResult bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape())
    return ::testing::AssertionFailure() << a.str() << " vs " << b.str();
  const auto x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::memcmp(&x[i], &y[i], sizeof(double)) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
  }
  return ::testing::AssertionSuccess();
}

/// Bitwise equality, but any NaN equals any NaN (float16 and bfloat16 NaNs
/// rounded by the CUDA kernels' conversion keep another payload than the CPU's).
inline ::testing::AssertionResult bitwise_equal_but_nan(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return ::testing::AssertionFailure() << got.str() << " vs " << want.str();
  const std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], sizeof(double)) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
  }
  return ::testing::AssertionSuccess();
}

/// Finite-difference gradient check (torch.autograd.gradcheck in spirit):
/// `fn` maps float64 inputs to one output; the analytical gradient of
/// sum(out * w) for a fixed random w is compared with central differences.
/// Inputs not requiring grad are left alone. Runs on the inputs' devices.
inline ::testing::AssertionResult gradcheck(
    const std::function<Tensor(const std::vector<Tensor>&)>& fn, std::vector<Tensor> inputs,
    double eps = 1e-6, double atol = 1e-5, double rtol = 1e-3) {
  for (auto& x : inputs) {
    if (x.requires_grad() && x.dtype() != kFloat64)
      return ::testing::AssertionFailure() << "gradcheck needs float64 inputs";
  }
  Tensor out = fn(inputs);
  if (!out.requires_grad()) return ::testing::AssertionFailure() << "output does not require grad";
  // Fixed weights so every output element matters.
  std::vector<double> w(size_t(out.numel()));
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5 + 0.37 * double((i * 7919) % 13) / 13.0;
  Tensor wt = from_vector(w, out.shape(), TensorOptions(kFloat64).device(out.device()));
  auto objective = [&](const std::vector<Tensor>& in) {
    NoGradGuard ng;
    Tensor o = fn(in);
    const auto v = o.to(kFloat64).to_vector<double>();
    double s = 0;
    for (size_t i = 0; i < v.size(); ++i) s += v[i] * w[i];
    return s;
  };
  for (auto& x : inputs) {
    if (x.requires_grad()) x.set_grad(Tensor());
  }
  sum(mul(out, wt.to(out.dtype()))).backward();
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k].requires_grad()) continue;
    const std::vector<double> base = inputs[k].to_vector<double>();
    const Tensor g = inputs[k].grad();
    const std::vector<double> analytical =
        g.defined() ? g.to_vector<double>() : std::vector<double>(base.size(), 0.0);
    for (size_t i = 0; i < base.size(); ++i) {
      std::vector<Tensor> plus = inputs, minus = inputs;
      std::vector<double> vp = base, vm = base;
      vp[i] += eps;
      vm[i] -= eps;
      const TensorOptions on = TensorOptions(kFloat64).device(inputs[k].device());
      plus[k] = from_vector(vp, inputs[k].shape(), on);
      minus[k] = from_vector(vm, inputs[k].shape(), on);
      const double numerical = (objective(plus) - objective(minus)) / (2 * eps);
      if (std::abs(numerical - analytical[i]) > atol + rtol * std::abs(numerical)) {
        return ::testing::AssertionFailure()
               << "input " << k << " element " << i << ": analytical " << analytical[i]
               << " vs numerical " << numerical;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

/// A float64 leaf requiring grad with deterministic pseudo-random values in [-1, 1).
inline Tensor leaf(IntList shape, uint64_t seed = 1) {
  std::vector<double> v(size_t(numel(shape)));
  uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (auto& e : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    e = double((x >> 11) % 2000000) / 1000000.0 - 1.0;
  }
  Tensor t = from_vector(v, shape);
  t.requires_grad_();
  return t;
}

/// Sets the default device's memory budget while in scope (unlimited after).
struct BudgetScope {
  explicit BudgetScope(std::optional<int64_t> bytes) { remat::set_memory_budget(bytes); }
  ~BudgetScope() { remat::set_memory_budget(std::nullopt); }
  BudgetScope(const BudgetScope&) = delete;
  BudgetScope& operator=(const BudgetScope&) = delete;
};

/// Makes and holds tensors well above a 1 MiB budget (eight of 256 KiB), so
/// that evictable storages not in use are evicted.
inline void churn() {
  std::vector<Tensor> held;
  for (int i = 0; i < 8; ++i) {
    held.push_back(randn({65536}) * 2.0);
    (void)held.back().sum().item<float>();
  }
}

}  // namespace dtr::testing
