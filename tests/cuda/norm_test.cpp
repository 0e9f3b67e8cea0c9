// The CUDA norm kernels (cuda/norm.cu) under host emulation (Note [host
// emulation of CUDA kernels]): cases the conformance harness does not
// reach — float16/bfloat16 inputs, the optional weight and bias, backward
// against the CPU's, batch_norm channels long enough to be reduced in
// blocks (equal to the CPU's within rounding, and bitwise equal across
// runs), and the in-place running-statistics update.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
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

using NormFn = std::function<Tensor(const std::vector<Tensor>&)>;

/// f on copies of `inputs` on device d (the defined ones as leaves requiring
/// grad), then backward with g: the output and the inputs' gradients, on the host.
std::vector<Tensor> forward_backward(const NormFn& f, const std::vector<Tensor>& inputs, const Tensor& g, Device d) {
  std::vector<Tensor> on;
  for (const Tensor& t : inputs) {
    Tensor c;
    if (t.defined()) {
      c = t.detach().to(d);
      c.requires_grad_();
    }
    on.push_back(c);
  }
  Tensor y = f(on);
  y.backward(g.to(d));
  std::vector<Tensor> r{host(y.detach())};
  for (const Tensor& t : on)
    if (t.defined()) r.push_back(host(t.grad()));
  return r;
}

/// The results of f on the CPU and on the test device, bitwise equal.
void expect_bitwise_cpu(const NormFn& f, const std::vector<Tensor>& inputs, const Tensor& g, const std::string& what) {
  const std::vector<Tensor> cpu = forward_backward(f, inputs, g, Device(kCPU));
  const std::vector<Tensor> gpu = forward_backward(f, inputs, g, dev());
  ASSERT_EQ(cpu.size(), gpu.size()) << what;
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_TRUE(testing::bitwise_equal(gpu[i], cpu[i])) << what << " result " << i;
}

/// The weight and bias of a norm over `shape`, each undefined unless asked for.
std::pair<Tensor, Tensor> affine(IntList shape, DType dt, bool with_weight, bool with_bias) {
  Tensor w = with_weight ? (randn(shape) * 0.5 + 1).to(dt) : Tensor();
  Tensor b = with_bias ? randn(shape).to(dt) : Tensor();
  return {w, b};
}

std::string label(const char* op, DType dt, bool w, bool b) {
  return std::string(op) + " " + std::string(dtype_name(dt)) + (w ? " weight" : "") + (b ? " bias" : "");
}

TEST(CudaEmulation, NormFamiliesAreBound) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  const std::vector<std::string>& bound = testing::second_device_cuda_ops();
  for (const char* op : {"layer_norm", "rms_norm", "layer_norm_backward", "rms_norm_backward", "batch_norm",
                         "batch_norm_inference", "batch_norm_update_stats_", "batch_norm_backward", "group_norm",
                         "group_norm_backward"})
    EXPECT_TRUE(std::binary_search(bound.begin(), bound.end(), std::string(op))) << op;
}

// One index per row takes the CPU's operations in the CPU's order: bitwise
// the CPU's, forward and backward, for every floating dtype and affine.
TEST(CudaEmulation, RowNormsAreTheCpusBitwise) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  manual_seed(11);
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    Tensor x = (randn({5, 3, 37}) * 2 + 0.5).to(dt);
    Tensor g = randn({5, 3, 37}).to(dt);
    for (bool with_w : {false, true}) {
      for (bool with_b : {false, true}) {
        auto [w, b] = affine({3, 37}, dt, with_w, with_b);
        expect_bitwise_cpu([](const std::vector<Tensor>& in) { return layer_norm(in[0], {3, 37}, in[1], in[2]); },
                           {x, w, b}, g, label("layer_norm", dt, with_w, with_b));
      }
      auto [w, unused] = affine({37}, dt, with_w, false);
      expect_bitwise_cpu([](const std::vector<Tensor>& in) { return rms_norm(in[0], {37}, in[1], 1e-6); }, {x, w}, g,
                         label("rms_norm", dt, with_w, false));
    }
  }
}

TEST(CudaEmulation, GroupNormIsTheCpusBitwise) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  manual_seed(12);
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    Tensor x = (randn({3, 6, 5, 7}) * 3 - 1).to(dt);
    Tensor g = randn({3, 6, 5, 7}).to(dt);
    for (bool with_w : {false, true}) {
      for (bool with_b : {false, true}) {
        auto [w, b] = affine({6}, dt, with_w, with_b);
        expect_bitwise_cpu([](const std::vector<Tensor>& in) { return group_norm(in[0], 3, in[1], in[2]); },
                           {x, w, b}, g, label("group_norm", dt, with_w, with_b));
      }
    }
  }
}

// A channel of at most 4096 elements is one block: the CPU's order, bitwise
// the CPU's, in training (batch statistics) and eval (running statistics).
TEST(CudaEmulation, ShortBatchNormChannelsAreTheCpusBitwise) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  manual_seed(13);
  // Planes of 30 and 63 elements: one and three groups of sixteen partial
  // sums, then a tail (Note [channel sums]; the CPU's float32 sums are its
  // AVX2 copy where the CPU has AVX2).
  for (const Shape& shape : {Shape{4, 3, 6, 5}, Shape{2, 3, 7, 9}})
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    Tensor x = (randn(shape) * 2 + 1).to(dt);
    Tensor g = randn(shape).to(dt);
    Tensor rm = randn({3}).to(dt), rv = (rand({3}) + 0.5).to(dt);
    for (bool with_w : {false, true}) {
      for (bool with_b : {false, true}) {
        auto [w, b] = affine({3}, dt, with_w, with_b);
        expect_bitwise_cpu(
            [](const std::vector<Tensor>& in) { return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true); },
            {x, w, b}, g, label("batch_norm train", dt, with_w, with_b));
        expect_bitwise_cpu(
            [&](const std::vector<Tensor>& in) {
              return batch_norm(in[0], rm.to(in[0].device()), rv.to(in[0].device()), in[1], in[2], false);
            },
            {x, w, b}, g, label("batch_norm eval", dt, with_w, with_b));
      }
    }
  }
}

// 8 * 40 * 40 = 12800 elements per channel: four blocks (the last one
// short) whose partial sums are added in block order. Not the CPU's order,
// so equal within rounding; bitwise equal across runs.
TEST(CudaEmulation, LongBatchNormChannelsAreSplitDeterministically) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  manual_seed(14);
  const std::vector<int64_t> shape{8, 3, 40, 40};
  Tensor x = randn(shape) * 3 + 2;
  Tensor g = randn(shape);
  auto [w, b] = affine({3}, kFloat32, true, true);
  const NormFn f = [](const std::vector<Tensor>& in) {
    return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true);
  };
  const std::vector<Tensor> cpu = forward_backward(f, {x, w, b}, g, Device(kCPU));
  const std::vector<Tensor> first = forward_backward(f, {x, w, b}, g, dev());
  const std::vector<Tensor> second = forward_backward(f, {x, w, b}, g, dev());
  ASSERT_EQ(cpu.size(), 4u);
  ASSERT_EQ(first.size(), 4u);
  // Tolerances: y and gx are O(1) elementwise; gweight and gbias sum 38400 terms.
  const double tol[4] = {1e-5, 1e-5, 1e-3, 1e-3};
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_TRUE(testing::allclose(first[i], cpu[i].to(kFloat64).to_vector<double>(), tol[i], 1e-5)) << "result " << i;
    EXPECT_TRUE(testing::bitwise_equal(first[i], second[i])) << "result " << i;
  }
  // The float64 statistics of the split path against a float64 CPU reference.
  Tensor x64 = x.to(kFloat64);
  Tensor ref = batch_norm(x64, Tensor(), Tensor(), Tensor(), Tensor(), true);
  Tensor got = host(batch_norm(x64.to(dev()), Tensor(), Tensor(), Tensor(), Tensor(), true));
  EXPECT_TRUE(testing::allclose(got, ref.to_vector<double>(), 1e-12, 1e-12));
  // Half precision through the split path: within the dtype's rounding of the float32 result.
  Tensor y16 = host(batch_norm(x.to(kFloat16).to(dev()), Tensor(), Tensor(), w.to(kFloat16).to(dev()),
                               b.to(kFloat16).to(dev()), true));
  Tensor y16_cpu = batch_norm(x.to(kFloat16), Tensor(), Tensor(), w.to(kFloat16), b.to(kFloat16), true);
  EXPECT_TRUE(testing::allclose(y16, y16_cpu.to(kFloat64).to_vector<double>(), 4e-3, 4e-3));
}

// batch_norm in training updates the running buffers in place once:
// running = (1 - momentum) * running + momentum * statistic, with the
// unbiased variance; the same values as the CPU's, and the formula's.
TEST(CudaEmulation, BatchNormUpdatesTheRunningStatistics) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  manual_seed(15);
  for (DType dt : {kFloat32, kFloat16}) {
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{4, 3, 5}, std::vector<int64_t>{3, 2, 50, 50}}) {
      Tensor x = (randn(shape) * 2 + 1).to(dt);
      const int64_t C = shape[1];
      Tensor rm0 = randn({C}).to(dt), rv0 = (rand({C}) + 0.5).to(dt);
      Tensor rm_cpu = rm0.clone(), rv_cpu = rv0.clone();
      Tensor rm_dev = rm0.to(dev()), rv_dev = rv0.to(dev());
      (void)batch_norm(x, rm_cpu, rv_cpu, Tensor(), Tensor(), true, 0.3);
      (void)batch_norm(x.to(dev()), rm_dev, rv_dev, Tensor(), Tensor(), true, 0.3);
      const bool split = x.numel() / C > 4096;
      const double tol = dt == kFloat16 ? 2e-3 : 1e-6;
      if (split) {
        EXPECT_TRUE(testing::allclose(host(rm_dev), rm_cpu.to(kFloat64).to_vector<double>(), tol, tol));
        EXPECT_TRUE(testing::allclose(host(rv_dev), rv_cpu.to(kFloat64).to_vector<double>(), tol, tol));
      } else {
        EXPECT_TRUE(testing::bitwise_equal(host(rm_dev), rm_cpu)) << dtype_name(dt);
        EXPECT_TRUE(testing::bitwise_equal(host(rv_dev), rv_cpu)) << dtype_name(dt);
      }
      // The formula, from the float64 batch statistics.
      std::vector<int64_t> dims{0};
      for (int64_t d = 2; d < int64_t(shape.size()); ++d) dims.push_back(d);
      Tensor x64 = x.to(kFloat64);
      const double n = double(x.numel() / C);
      Tensor mean = x64.mean(dims);
      Tensor xc = x64 - x64.mean(dims, /*keepdim=*/true);
      Tensor var = (xc * xc).sum(dims) / (n - 1);
      Tensor want_m = rm0.to(kFloat64) * 0.7 + mean * 0.3;
      Tensor want_v = rv0.to(kFloat64) * 0.7 + var * 0.3;
      EXPECT_TRUE(testing::allclose(host(rm_dev), want_m.to_vector<double>(), 4 * tol, 4 * tol)) << dtype_name(dt);
      EXPECT_TRUE(testing::allclose(host(rv_dev), want_v.to_vector<double>(), 4 * tol, 4 * tol)) << dtype_name(dt);
    }
  }
}

#endif

}  // namespace
}  // namespace dtr
