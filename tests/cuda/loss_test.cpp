// The CUDA loss kernels (cuda/loss.cu) under host emulation (Note [host
// emulation of CUDA kernels]): cases the conformance harness does not reach.
// The kernels take the CPU's lane order, accumulation types and blocks, so
// every result here is the CPU kernel's bit for bit, forward and backward:
// every floating dtype, softmax along each dim (of strided and 0-d inputs
// too) with -inf, NaN and signed zeros in its lanes, the class losses with
// each reduction, ignore_index, spatial and (C) inputs and sums over more
// lanes than one block, mse_loss over several blocks and over nothing; and
// the CPU's IndexError for targets out of range, found on the device.
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
Tensor ids(const std::vector<int64_t>& v, IntList shape) { return from_vector<int64_t>(v, shape); }

using LossFn = std::function<Tensor(const std::vector<Tensor>&)>;

/// f on copies of `inputs` on device d (as leaves requiring grad), then
/// backward with g: the output and the inputs' gradients, on the host.
std::vector<Tensor> forward_backward(const LossFn& f, const std::vector<Tensor>& inputs, const Tensor& g, Device d) {
  std::vector<Tensor> on;
  for (const Tensor& t : inputs) {
    Tensor c = t.detach().to(d);
    c.requires_grad_();
    on.push_back(c);
  }
  Tensor y = f(on);
  y.backward(g.to(d));
  std::vector<Tensor> r{host(y.detach())};
  for (const Tensor& t : on) r.push_back(host(t.grad()));
  return r;
}

/// The results of f (forward and backward, with a random gradient of the
/// output's shape) on the CPU and on the test device: the same values.
void expect_bitwise_cpu(const LossFn& f, const std::vector<Tensor>& inputs, const std::string& what) {
  const Tensor y = f(inputs);
  const Tensor g = randn(y.shape()).to(y.dtype());
  const std::vector<Tensor> cpu = forward_backward(f, inputs, g, Device(kCPU));
  const std::vector<Tensor> got = forward_backward(f, inputs, g, dev());
  ASSERT_EQ(cpu.size(), got.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i)
    EXPECT_TRUE(testing::bitwise_equal_but_nan(got[i], cpu[i])) << what << " result " << i;
}

std::string label(const std::string& op, DType dt) { return op + " " + std::string(dtype_name(dt)); }

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

const char* const kReductions[] = {"none", "mean", "sum"};

TEST(CudaEmulation, LossFamilyIsBound) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  const std::vector<std::string>& bound = testing::second_device_cuda_ops();
  for (const char* op : {"softmax", "log_softmax", "softmax_backward", "log_softmax_backward", "cross_entropy",
                         "cross_entropy_backward", "nll_loss", "nll_loss_backward", "mse_loss", "mse_loss_backward"})
    EXPECT_TRUE(std::binary_search(bound.begin(), bound.end(), std::string(op))) << op;
}

// One index per lane takes its max, its sum of exponentials in double and
// the CPU's divide or log; then one index per element.
TEST(CudaEmulation, SoftmaxFamilyIsTheCpusBitwise) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  manual_seed(31);
  // Lanes (along dim 1) with a masked score, NaNs, signed zeros and all -inf.
  const Tensor special = from_vector<float>({1, -kInf, 2, 3, kNaN, 0, 1, kNaN, -0.0f, 0.0f, -0.0f, 0.0f, -kInf,
                                             -kInf, -kInf, -kInf, 5, 5, 5, 5},
                                            {5, 4});
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    const Tensor x = (randn({4, 5, 7}) * 3 + 0.5).to(dt);
    for (const bool take_log : {false, true}) {
      const auto sm = [take_log](const Tensor& t, int64_t dim) {
        return take_log ? log_softmax(t, dim) : softmax(t, dim);
      };
      const std::string op = take_log ? "log_softmax" : "softmax";
      for (int64_t dim : {0, 1, 2, -1}) {
        expect_bitwise_cpu([&](const std::vector<Tensor>& in) { return sm(in[0], dim); }, {x},
                           label(op + " dim " + std::to_string(dim), dt));
      }
      // Strided inputs: a transpose and a step slice.
      expect_bitwise_cpu([&](const std::vector<Tensor>& in) { return sm(in[0].transpose(0, 2), 1); }, {x},
                         label(op + " transposed", dt));
      expect_bitwise_cpu([&](const std::vector<Tensor>& in) { return sm(slice(in[0], 2, 1, std::nullopt, 2), -1); },
                         {x}, label(op + " sliced", dt));
      expect_bitwise_cpu([&](const std::vector<Tensor>& in) { return sm(in[0], 0); }, {randn({}).to(dt)},
                         label(op + " 0-d", dt));
      for (int64_t dim : {0, 1})
        expect_bitwise_cpu([&](const std::vector<Tensor>& in) { return sm(in[0], dim); }, {special.to(dt)},
                           label(op + " special dim " + std::to_string(dim), dt));
      // A long lane, and lanes of nothing.
      expect_bitwise_cpu([&](const std::vector<Tensor>& in) { return sm(in[0], 1); }, {randn({2, 5000}).to(dt)},
                         label(op + " long", dt));
      expect_bitwise_cpu([&](const std::vector<Tensor>& in) { return sm(in[0], 1); }, {randn({3, 0}).to(dt)},
                         label(op + " empty lanes", dt));
    }
  }
}

/// A class loss (cross_entropy or nll_loss) of its input and `target`.
LossFn class_loss(bool entropy, const Tensor& target, int64_t ignore, const char* reduction) {
  return [=](const std::vector<Tensor>& in) {
    const Tensor t = target.to(in[0].device());
    return entropy ? cross_entropy(in[0], t, {}, reduction, ignore) : nll_loss(in[0], t, {}, reduction, ignore);
  };
}

// Each reduction, with and without ignored targets, over (N, C), (N, C, d1,
// d2) and (C) inputs; a sum over lanes in blocks of 4096 as on the CPU.
TEST(CudaEmulation, ClassLossesAreTheCpusBitwise) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  manual_seed(32);
  struct Case {
    const char* name;
    std::vector<int64_t> shape;
    std::vector<int64_t> target_shape;
  };
  const std::vector<Case> cases = {
      {"(N, C)", {6, 5}, {6}},
      {"spatial", {3, 5, 2, 3}, {3, 2, 3}},
      {"(C)", {5}, {}},
      {"many lanes", {9000, 5}, {9000}},
  };
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    for (const Case& k : cases) {
      const Tensor x = (randn(k.shape) * 2).to(dt);
      const Tensor target = randint(0, 5, k.target_shape);
      for (const bool entropy : {true, false}) {
        for (const char* reduction : kReductions) {
          for (const int64_t ignore : {int64_t{-100}, int64_t{2}}) {
            const std::string what = label(std::string(entropy ? "cross_entropy " : "nll_loss ") + k.name + " " +
                                               reduction + " ignore " + std::to_string(ignore),
                                           dt);
            expect_bitwise_cpu(class_loss(entropy, target, ignore, reduction), {x}, what);
          }
        }
      }
    }
  }
}

// Every target ignored: "mean" divides 0 by a count of 0 (NaN), "sum" is 0,
// and every gradient is 0, as on the CPU. An ignore_index outside [0, C) is
// no error where the targets hold it.
TEST(CudaEmulation, IgnoredTargetsAreTheCpusBitwise) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  manual_seed(33);
  const Tensor x = randn({4, 3});
  for (const bool entropy : {true, false}) {
    for (const char* reduction : kReductions) {
      expect_bitwise_cpu(class_loss(entropy, ids({1, 1, 1, 1}, {4}), 1, reduction), {x},
                         std::string("all ignored ") + reduction);
      expect_bitwise_cpu(class_loss(entropy, ids({7, 0, 7, 2}, {4}), 7, reduction), {x},
                         std::string("ignore_index past C ") + reduction);
      expect_bitwise_cpu(class_loss(entropy, ids({-1, 0, -1, 2}, {4}), -1, reduction), {x},
                         std::string("negative ignore_index ") + reduction);
    }
  }
  const Tensor mean = host(cross_entropy(x.to(dev()), ids({1, 1, 1, 1}, {4}).to(dev()), {}, "mean", 1));
  EXPECT_TRUE(std::isnan(mean.item<float>()));
}

// A target outside [0, C) that is not ignore_index: the CPU's IndexError and
// message, found on the device (one past the first check chunk of 4096
// targets too), for the forward rows and the backward rows dispatched directly.
TEST(CudaEmulation, OutOfRangeTargetsAreTheCpusIndexError) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  const Tensor x = randn({5000, 3});
  std::vector<int64_t> far(5000, 1);
  far[4500] = 3;
  far[4700] = -1;
  const std::vector<std::pair<std::string, Tensor>> targets = {
      {"past C", ids({0, 3, 1, 2}, {4})},
      {"negative", ids({0, 2, -1, 5}, {4})},
      {"past the first chunk", ids(far, {5000})},
  };
  for (const auto& [name, t] : targets) {
    const Tensor xs = slice(x, 0, 0, t.numel());
    const std::vector<std::pair<std::string, std::function<void(Device)>>> calls = {
        {"cross_entropy", [&](Device d) { (void)cross_entropy(xs.to(d), t.to(d), {}, "mean", -100); }},
        {"nll_loss", [&](Device d) { (void)nll_loss(xs.to(d), t.to(d), {}, "none", -100); }},
        {"cross_entropy_backward",
         [&](Device d) {
           (void)dispatch1(op("cross_entropy_backward"), {ones({}).to(d), xs.to(d), t.to(d)},
                           Attrs{{"ignore_index", int64_t{-100}}, {"reduction", int64_t{2}}});
         }},
        {"nll_loss_backward",
         [&](Device d) {
           (void)dispatch1(op("nll_loss_backward"), {ones({}).to(d), t.to(d)},
                           Attrs{{"shape", Shape(xs.shape())}, {"ignore_index", int64_t{-100}}, {"reduction", int64_t{1}}});
         }},
    };
    for (const auto& [op_name, call] : calls) {
      const std::string cpu = testing::error_message<IndexError>([&] { call(Device(kCPU)); });
      const std::string got = testing::error_message<IndexError>([&] { call(dev()); });
      EXPECT_NE(cpu.find(op_name + ": target "), std::string::npos) << name << ": " << cpu;
      EXPECT_EQ(got, cpu) << op_name << " " << name;
    }
  }
}

// Elementwise for "none"; a sum in blocks of 2^14 elements (two interleaved
// partials each) added in block order, as on the CPU; strided inputs; and
// nothing: a mean of NaN, a sum of 0.
TEST(CudaEmulation, MseLossIsTheCpusBitwise) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  manual_seed(34);
  const auto mse = [](const char* reduction) {
    return [=](const std::vector<Tensor>& in) { return mse_loss(in[0], in[1], reduction); };
  };
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    for (const std::vector<int64_t>& shape :
         {std::vector<int64_t>{4, 5, 7}, std::vector<int64_t>{3 * (1 << 14) + 5}, std::vector<int64_t>{0}}) {
      const Tensor a = randn(shape).to(dt), b = (randn(shape) * 2).to(dt);
      for (const char* reduction : kReductions)
        expect_bitwise_cpu(mse(reduction), {a, b},
                           label("mse_loss " + std::to_string(a.numel()) + " " + reduction, dt));
    }
    const Tensor a = randn({6, 5}).to(dt), b = randn({5, 6}).to(dt);
    for (const char* reduction : kReductions) {
      expect_bitwise_cpu(
          [=](const std::vector<Tensor>& in) { return mse_loss(in[0].transpose(0, 1), in[1], reduction); }, {a, b},
          label(std::string("mse_loss transposed ") + reduction, dt));
    }
  }
  EXPECT_TRUE(std::isnan(host(mse_loss(zeros({0}).to(dev()), zeros({0}).to(dev()))).item<float>()));
}

// Integer inputs: the CPU's TypeError, before any kernel runs.
TEST(CudaEmulation, IntegerLossInputsAreTheCpusTypeError) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  const Tensor i = from_vector<int64_t>({1, 2, 3, 4}, {2, 2});
  const std::vector<std::pair<const char*, std::function<void(Device)>>> calls = {
      {"softmax", [&](Device d) { (void)softmax(i.to(d), 1); }},
      {"log_softmax", [&](Device d) { (void)log_softmax(i.to(d), 0); }},
      {"cross_entropy", [&](Device d) { (void)cross_entropy(i.to(d), ids({0, 1}, {2}).to(d)); }},
      {"mse_loss", [&](Device d) { (void)mse_loss(i.to(d), i.to(d)); }},
  };
  for (const auto& [name, call] : calls) {
    const std::string cpu = testing::error_message<TypeError>([&] { call(Device(kCPU)); });
    EXPECT_FALSE(cpu.empty()) << name;
    EXPECT_EQ(testing::error_message<TypeError>([&] { call(dev()); }), cpu) << name;
  }
}

#endif

}  // namespace
}  // namespace dtr
