// The CUDA reduce kernels (cuda/reduce.cu) under host emulation (Note [host
// emulation of CUDA kernels]): cases the conformance harness does not reach.
// The kernels take the CPU's geometry, accumulation types and order, so
// every result here is the CPU kernel's bit for bit: every floating and
// integer dtype, keepdim, negative and multiple dims, non-contiguous
// inputs, reductions long enough to be split into blocks (and bitwise equal
// across runs), first-index ties and NaN, cumsum along inner and outer
// dims, and the backward kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "dtr/dtr.h"
#include "second_device.h"
#include "tests/testing.h"

namespace dtr {
namespace {

#if DTR_HAVE_CUDA

Device dev() { return testing::second_device(); }
Tensor host(const Tensor& t) { return t.to(Device(kCPU)); }

using ReduceFn = std::function<std::vector<Tensor>(const Tensor&)>;

/// f of x on the CPU and of x's copy on the test device: the same values.
void expect_bitwise_cpu(const ReduceFn& f, const Tensor& x, const std::string& what) {
  const std::vector<Tensor> cpu = f(x);
  const std::vector<Tensor> got = f(x.to(dev()));
  ASSERT_EQ(cpu.size(), got.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_EQ(got[i].device(), dev()) << what;
    EXPECT_TRUE(testing::bitwise_equal_but_nan(host(got[i]), cpu[i])) << what << " result " << i;
  }
}

std::string label(const char* op, DType dt) { return std::string(op) + " " + std::string(dtype_name(dt)); }

/// The forward reductions of the family over x (at least 3-d), each a case.
std::vector<std::pair<const char*, ReduceFn>> forward_cases(bool floating) {
  std::vector<std::pair<const char*, ReduceFn>> c = {
      {"sum all", [](const Tensor& x) { return std::vector<Tensor>{sum(x)}; }},
      {"sum dim", [](const Tensor& x) { return std::vector<Tensor>{sum(x, {1})}; }},
      {"sum negative dim keepdim", [](const Tensor& x) { return std::vector<Tensor>{sum(x, {-1}, true)}; }},
      {"sum dims", [](const Tensor& x) { return std::vector<Tensor>{sum(x, {0, 2})}; }},
      {"max", [](const Tensor& x) { return std::vector<Tensor>{max(x)}; }},
      {"max_dim", [](const Tensor& x) {
         auto [v, i] = max(x, -2, true);
         return std::vector<Tensor>{v, i};
       }},
      {"argmax", [](const Tensor& x) { return std::vector<Tensor>{argmax(x, 2)}; }},
      {"argmin", [](const Tensor& x) { return std::vector<Tensor>{argmin(x, 0, true)}; }},
      {"amax", [](const Tensor& x) { return std::vector<Tensor>{amax(x, {0, -1})}; }},
      {"amin", [](const Tensor& x) { return std::vector<Tensor>{amin(x, {1}, true)}; }},
      {"logsumexp", [](const Tensor& x) { return std::vector<Tensor>{logsumexp(x, {-1})}; }},
      {"logsumexp dims", [](const Tensor& x) { return std::vector<Tensor>{logsumexp(x, {0, 1}, true)}; }},
      {"cumsum outer", [](const Tensor& x) { return std::vector<Tensor>{cumsum(x, 0)}; }},
      {"cumsum middle", [](const Tensor& x) { return std::vector<Tensor>{cumsum(x, 1)}; }},
      {"cumsum inner", [](const Tensor& x) { return std::vector<Tensor>{cumsum(x, -1)}; }},
  };
  if (floating) {
    c.push_back({"mean", [](const Tensor& x) { return std::vector<Tensor>{mean(x, {0, 2}, true)}; }});
    c.push_back({"mean all", [](const Tensor& x) { return std::vector<Tensor>{mean(x)}; }});
    c.push_back({"var", [](const Tensor& x) { return std::vector<Tensor>{var(x, {-1})}; }});
    c.push_back({"var dims correction 0", [](const Tensor& x) { return std::vector<Tensor>{var(x, {0, 1}, 0, true)}; }});
    c.push_back({"var all", [](const Tensor& x) { return std::vector<Tensor>{var(x)}; }});
  }
  return c;
}

TEST(CudaEmulation, ReduceFamilyIsBound) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  const std::vector<std::string>& bound = testing::second_device_cuda_ops();
  for (const char* op : {"sum", "mean", "var", "max", "max_dim", "argmax", "argmin", "amax", "amin", "logsumexp",
                         "cumsum", "cumsum_backward", "sum_backward", "var_backward", "max_backward",
                         "max_dim_backward"})
    EXPECT_TRUE(std::binary_search(bound.begin(), bound.end(), std::string(op))) << op;
}

TEST(CudaEmulation, ReductionsAreTheCpusBitwise) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  manual_seed(21);
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    const Tensor x = (randn({4, 5, 7}) * 3 + 0.5).to(dt);
    for (const auto& [name, f] : forward_cases(true)) expect_bitwise_cpu(f, x, label(name, dt));
  }
  for (DType dt : {kInt64, kInt32, kUInt8, kBool}) {
    const Tensor x = randint(0, dt == kBool ? 2 : 9, {4, 5, 7}).to(dt);
    for (const auto& [name, f] : forward_cases(false)) expect_bitwise_cpu(f, x, label(name, dt));
  }
}

// Strided views on the device: a transpose, a step slice, a permutation.
TEST(CudaEmulation, NonContiguousReductionsAreTheCpusBitwise) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  manual_seed(22);
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> views = {
      {"transpose", [](const Tensor& x) { return x.transpose(0, 2); }},
      {"slice", [](const Tensor& x) { return slice(x, 1, 1, std::nullopt, 2); }},
      {"permute", [](const Tensor& x) { return x.permute({1, 2, 0}); }},
  };
  for (DType dt : {kFloat32, kFloat16, kInt64}) {
    const Tensor x = dt == kInt64 ? randint(-50, 50, {6, 8, 10}) : (randn({6, 8, 10}) * 2).to(dt);
    for (const auto& [vname, view] : views) {
      for (const auto& [name, f] : forward_cases(is_floating(dt))) {
        expect_bitwise_cpu([&](const Tensor& t) { return f(view(t)); }, x,
                           std::string(vname) + " " + label(name, dt));
      }
    }
  }
}

// Few outputs over more than 4 * 2^14 elements each: fixed blocks whose
// partials are combined in order, as on the CPU; and many outputs over a
// long strided reduction (the column sums of a tall matrix). Bitwise the
// CPU's, and bitwise equal across runs.
TEST(CudaEmulation, LongReductionsAreSplitDeterministically) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  manual_seed(23);
  const std::vector<std::pair<const char*, ReduceFn>> cases = {
      {"sum all", [](const Tensor& x) { return std::vector<Tensor>{sum(x)}; }},
      {"sum columns", [](const Tensor& x) { return std::vector<Tensor>{sum(x, {0})}; }},
      {"sum rows", [](const Tensor& x) { return std::vector<Tensor>{sum(x, {1})}; }},
      {"mean columns", [](const Tensor& x) { return std::vector<Tensor>{mean(x, {0}, true)}; }},
      {"var all", [](const Tensor& x) { return std::vector<Tensor>{var(x)}; }},
      {"var columns", [](const Tensor& x) { return std::vector<Tensor>{var(x, {0})}; }},
      {"max", [](const Tensor& x) { return std::vector<Tensor>{max(x)}; }},
      {"max_dim columns", [](const Tensor& x) {
         auto [v, i] = max(x, 0);
         return std::vector<Tensor>{v, i};
       }},
      {"argmin columns", [](const Tensor& x) { return std::vector<Tensor>{argmin(x, 0)}; }},
      {"logsumexp all", [](const Tensor& x) { return std::vector<Tensor>{logsumexp(x, {0, 1})}; }},
      {"cumsum columns", [](const Tensor& x) { return std::vector<Tensor>{cumsum(x, 0)}; }},
  };
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{70000, 3}, std::vector<int64_t>{9000, 24}}) {
    for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
      const Tensor x = (randn(shape) * 2 + 1).to(dt);
      const Tensor xd = x.to(dev());
      for (const auto& [name, f] : cases) {
        const std::string what = label(name, dt) + " " + std::to_string(shape[1]) + " columns";
        expect_bitwise_cpu(f, x, what);
        const std::vector<Tensor> a = f(xd), b = f(xd);
        for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(testing::bitwise_equal(host(a[i]), host(b[i]))) << what;
      }
    }
  }
  // A transposed tall matrix: the long reduction runs along a strided dim.
  const Tensor x = randn({3, 70000});
  expect_bitwise_cpu([](const Tensor& t) { return std::vector<Tensor>{sum(t.transpose(0, 1), {0})}; }, x,
                     "sum of a transposed tall matrix");
}

// Ties go to the first index; NaN beats everything (max and min alike).
TEST(CudaEmulation, TiesTakeTheFirstIndexAndNaNWins) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const Tensor x = from_vector<double>({1, 3, 3, 0,     // tie of maxima
                                        2, 2, 2, 2,     // all equal
                                        nan, 1, nan, 5,  // first NaN
                                        -inf, 4, 4, nan,  // NaN last
                                        inf, -inf, inf, -inf},
                                       {5, 4});
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    const Tensor xt = x.to(dt);
    const Tensor d = xt.to(dev());
    EXPECT_EQ(host(argmax(d, 1)).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 0, 3, 0})) << dtype_name(dt);
    EXPECT_EQ(host(argmin(d, 1)).to_vector<int64_t>(), (std::vector<int64_t>{3, 0, 0, 3, 1})) << dtype_name(dt);
    EXPECT_TRUE(std::isnan(host(max(d)).to_vector<double>()[0])) << dtype_name(dt);
    for (const auto& [name, f] : forward_cases(true)) {
      if (std::string(name).find("cumsum") != std::string::npos) continue;
      expect_bitwise_cpu([&](const Tensor& t) { return f(t.reshape({5, 2, 2})); }, xt, label(name, dt));
    }
  }
  const Tensor ties = from_vector<int64_t>({7, 7, 1, 1, 5, 5}, {2, 3});
  EXPECT_EQ(host(argmax(ties.to(dev()), 1)).to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(host(argmin(ties.to(dev()), 1)).to_vector<int64_t>(), (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(host(argmax(ties.to(dev()), 0)).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1}));
}

// Empty reductions: sum 0, mean and var NaN, logsumexp -inf, as the CPU.
TEST(CudaEmulation, EmptyReductionsAreTheCpus) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  const Tensor x = zeros({3, 0, 2});
  for (const auto& [name, f] : std::vector<std::pair<const char*, ReduceFn>>{
           {"sum", [](const Tensor& t) { return std::vector<Tensor>{sum(t, {1})}; }},
           {"mean", [](const Tensor& t) { return std::vector<Tensor>{mean(t, {1})}; }},
           {"var", [](const Tensor& t) { return std::vector<Tensor>{var(t, {1})}; }},
           {"logsumexp", [](const Tensor& t) { return std::vector<Tensor>{logsumexp(t, {1})}; }},
           {"sum of nothing kept", [](const Tensor& t) { return std::vector<Tensor>{sum(t, {0})}; }},
           {"cumsum", [](const Tensor& t) { return std::vector<Tensor>{cumsum(t, 1)}; }},
       })
    expect_bitwise_cpu(f, x, name);
}

/// f of a leaf copy of x on device d, then backward with g: the output and x's gradient, on the host.
std::vector<Tensor> forward_backward(const std::function<Tensor(const Tensor&)>& f, const Tensor& x, const Tensor& g,
                                     Device d) {
  Tensor on = x.detach().to(d);
  on.requires_grad_();
  Tensor y = f(on);
  y.backward(g.to(d));
  return {host(y.detach()), host(on.grad())};
}

TEST(CudaEmulation, ReduceBackwardIsTheCpusBitwise) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  manual_seed(24);
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> cases = {
      {"sum", [](const Tensor& x) { return sum(x, {0, 2}); }},
      {"mean", [](const Tensor& x) { return mean(x, {-1}, true); }},
      {"var", [](const Tensor& x) { return var(x, {1}); }},
      {"var correction 0 keepdim", [](const Tensor& x) { return var(x, {0, 2}, 0, true); }},
      {"max", [](const Tensor& x) { return max(x); }},
      {"max_dim", [](const Tensor& x) { return std::get<0>(max(x, 1)); }},
      {"max_dim keepdim", [](const Tensor& x) { return std::get<0>(max(x, -1, true)); }},
      {"amax", [](const Tensor& x) { return amax(x, {0}); }},
      {"logsumexp", [](const Tensor& x) { return logsumexp(x, {2}); }},
      {"cumsum outer", [](const Tensor& x) { return cumsum(x, 0); }},
      {"cumsum inner", [](const Tensor& x) { return cumsum(x, 2); }},
  };
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    Tensor x = (randn({3, 4, 5}) * 2).to(dt);
    // Ties of the maximum, for max's even split of the gradient.
    x = maximum(x, full({3, 4, 5}, 1.5).to(dt));
    for (const auto& [name, f] : cases) {
      const Tensor g = randn(f(x).shape()).to(dt);
      const std::vector<Tensor> cpu = forward_backward(f, x, g, Device(kCPU));
      const std::vector<Tensor> got = forward_backward(f, x, g, dev());
      // logsumexp's gradient is exp(x - result) by the elementwise kernels,
      // whose exp is the device's, not the CPU's vectorised one.
      const bool elementwise_exp = std::string(name) == "logsumexp";
      for (size_t i = 0; i < cpu.size(); ++i) {
        if (elementwise_exp && i == 1) {
          EXPECT_TRUE(testing::allclose(got[i], cpu[i].to(kFloat64).to_vector<double>(), 1e-6, 1e-5))
              << label(name, dt);
        } else {
          EXPECT_TRUE(testing::bitwise_equal(got[i], cpu[i])) << label(name, dt) << " result " << i;
        }
      }
    }
  }
}

// The rows' own errors, raised on the host before a launch as on the CPU.
TEST(CudaEmulation, ReduceRowsRaiseTheCpusErrors) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  const Tensor i64 = arange(6).reshape({2, 3});
  for (const auto& [name, f] : std::vector<std::pair<const char*, std::function<void(const Tensor&)>>>{
           {"mean", [](const Tensor& t) { (void)mean(t); }},
           {"var", [](const Tensor& t) { (void)var(t); }},
           {"max of nothing", [](const Tensor& t) { (void)max(slice(t, 1, 0, 0)); }},
           {"argmax dim", [](const Tensor& t) { (void)argmax(t, 2); }},
       }) {
    const std::string cpu = testing::error_message(
        [&] { f(i64); });
    const std::string got = testing::error_message([&] { f(i64.to(dev())); });
    EXPECT_FALSE(cpu.empty()) << name;
    EXPECT_EQ(got, cpu) << name;
  }
  // max_dim_backward's indices are checked on the device.
  const Tensor g = ones({2}).to(dev());
  const Tensor bad = from_vector<int64_t>({0, 3}, {2}).to(dev());
  EXPECT_TRUE(testing::throws_with<IndexError>(
      [&] { (void)dispatch1(op("max_dim_backward"), {g, bad}, Attrs{{"shape", Shape{2, 3}}, {"dim", int64_t{1}}}); },
      {"max_dim_backward", "index 3 is out of bounds for dimension 1 with size 3"}));
  // Rows dispatched directly with an integer gradient: the CPU's TypeError.
  const Tensor gi = from_vector<int64_t>({1, 2}, {2});
  for (const Device d : {Device(kCPU), dev()}) {
    EXPECT_TRUE(testing::throws_with<TypeError>(
        [&] {
          (void)dispatch1(op("sum_backward"), {gi.to(d)},
                          Attrs{{"shape", Shape{2, 3}}, {"dims", Shape{1}}, {"divisor", int64_t{1}}});
        },
        {"sum_backward", "int64"}))
        << d.str();
  }
}

#endif

}  // namespace
}  // namespace dtr
