// The oneDNN path of the float32 convolutions (cpu/onednn_conv.cpp, Note
// [oneDNN convolutions] in cpu/conv.cpp): bitwise the same results for every
// kernel thread count on the model zoo's shapes, all three directions, and
// agreement with the im2col kernels (and a float64 reference) on odd shapes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/parallel.h"
#include "cpu/onednn_conv.h"
#include "dtr/dtr.h"
#include "testing.h"

namespace dtr {
namespace {

struct ThreadsGuard {
  int saved = num_threads();
  ~ThreadsGuard() { set_num_threads(saved); }
};

struct OnednnGuard {
  ~OnednnGuard() { cpu::set_onednn_conv_enabled(true); }
};

// Built with oneDNN, the path must be usable (a silently disabled path
// would make the comparisons below vacuous); built without, skip.
bool have_onednn() {
#if DTR_TEST_HAVE_ONEDNN
  EXPECT_TRUE(cpu::onednn_conv_available());
  return cpu::onednn_conv_available();
#else
  return false;
#endif
}

struct Case {
  Shape x, w;
  Shape stride, padding, dilation;
  int64_t groups;
  bool bias;
};

std::string describe(const Case& c) {
  return "x " + shape_str(c.x) + " w " + shape_str(c.w) + " stride " + shape_str(c.stride) + " padding " +
         shape_str(c.padding) + " dilation " + shape_str(c.dilation) + " groups " + std::to_string(c.groups);
}

// y = conv2d(x, w, b) and the gradients of sum(y * r) for x, w (and b).
std::vector<Tensor> conv_and_grads(const Case& c, const std::vector<Tensor>& in, const Tensor& r) {
  std::vector<Tensor> leaves;
  for (const Tensor& t : in) leaves.push_back(t.detach().requires_grad_());
  Tensor y = conv2d(leaves[0], leaves[1], c.bias ? leaves[2] : Tensor(), c.stride, c.padding, c.dilation,
                    c.groups);
  sum(mul(y, r)).backward();
  std::vector<Tensor> out{y.detach()};
  for (const Tensor& l : leaves) out.push_back(l.grad());
  return out;
}

std::vector<Tensor> inputs(const Case& c, DType dtype = kFloat32) {
  std::vector<Tensor> in{randn(c.x).to(dtype), randn(c.w).to(dtype)};
  if (c.bias) in.push_back(randn({c.w[0]}).to(dtype));
  return in;
}

// The convolutions of benchmarks/models/resnet.cpp (batch 64, 1x28x28) and
// unet.cpp (batch 16, 3x64x64), and one with a large weight.
const std::vector<Case>& zoo_cases() {
  static const std::vector<Case> cases = {
      {{64, 1, 28, 28}, {16, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},
      {{64, 16, 28, 28}, {16, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},
      {{64, 16, 28, 28}, {32, 16, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, false},
      {{64, 16, 28, 28}, {32, 16, 1, 1}, {2, 2}, {0, 0}, {1, 1}, 1, false},
      {{64, 32, 14, 14}, {32, 32, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},
      {{64, 32, 14, 14}, {64, 32, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, false},
      {{64, 32, 14, 14}, {64, 32, 1, 1}, {2, 2}, {0, 0}, {1, 1}, 1, false},
      {{64, 64, 7, 7}, {64, 64, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},
      {{16, 3, 64, 64}, {16, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},
      {{16, 16, 64, 64}, {16, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},
      {{16, 16, 32, 32}, {32, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},
      {{16, 32, 32, 32}, {32, 32, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},
      {{16, 32, 16, 16}, {64, 32, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},
      {{16, 64, 16, 16}, {64, 64, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},
      {{16, 96, 32, 32}, {32, 96, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},
      {{16, 48, 64, 64}, {16, 48, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},
      {{16, 16, 64, 64}, {4, 16, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},
      // Not the zoo's: a weight of 2.4 Mi elements, whose gradient adds its
      // eight chunks two by two into four partials.
      {{8, 512, 4, 4}, {512, 512, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},
  };
  return cases;
}

// Odd shapes: groups, depthwise, dilation, strides and padding (asymmetric),
// 1x1, batch 1, large kernels, batches that leave a short last chunk.
const std::vector<Case>& odd_cases() {
  static const std::vector<Case> cases = {
      {{5, 6, 11, 13}, {9, 2, 5, 3}, {2, 1}, {3, 1}, {2, 3}, 3, true},
      {{3, 7, 9, 10}, {5, 7, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, false},
      {{1, 8, 30, 31}, {8, 1, 7, 7}, {1, 1}, {3, 3}, {1, 1}, 8, true},
      {{2, 32, 17, 17}, {32, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 32, false},
      {{1, 3, 40, 37}, {20, 3, 11, 11}, {4, 4}, {2, 2}, {1, 1}, 1, true},
      {{4, 32, 15, 15}, {32, 32, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 1, false},
      {{2, 64, 9, 9}, {64, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 4, true},
      {{3, 16, 8, 12}, {48, 16, 2, 4}, {3, 2}, {0, 1}, {1, 2}, 1, false},
      {{37, 16, 20, 20}, {16, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},
      {{2, 16, 6, 6}, {16, 16, 5, 5}, {1, 1}, {0, 0}, {1, 1}, 1, false},
  };
  return cases;
}

TEST(OnednnConv, ZooShapesSameBitsForAnyThreadCount) {
  if (!have_onednn()) GTEST_SKIP() << "built without oneDNN";
  ThreadsGuard guard;
  manual_seed(31);
  for (const Case& c : zoo_cases()) {
    const std::vector<Tensor> in = inputs(c);
    set_num_threads(1);
    const Tensor y0 = conv2d(in[0], in[1], c.bias ? in[2] : Tensor(), c.stride, c.padding, c.dilation, c.groups);
    const Tensor r = randn(y0.shape());
    const std::vector<Tensor> one = conv_and_grads(c, in, r);
    for (int threads : {2, 3, 7}) {
      set_num_threads(threads);
      const std::vector<Tensor> many = conv_and_grads(c, in, r);
      for (size_t i = 0; i < one.size(); ++i)
        EXPECT_TRUE(testing::bitwise_equal(one[i], many[i]))
            << describe(c) << ", " << threads << " threads, result " << i << " (y, gx, gw, gb)";
    }
  }
}

// The weight gradient adds per-chunk partials: the zoo's layers take several
// chunks, so the test above covers the sum.
TEST(OnednnConv, ZooShapesTakeSeveralChunks) {
  const cpu::ConvGeometry g{64, 16, 28, 28, 16, 16, 3, 3, 28, 28, 1, 1, 1, 1, 1, 1, 1};
  const int64_t chunk = cpu::onednn_images_per_chunk(g);
  EXPECT_GT(chunk, 1);
  EXPECT_LT(chunk, 64);
  // At most 64 chunks, whatever the batch.
  cpu::ConvGeometry big = g;
  big.N = 100000;
  EXPECT_GE(cpu::onednn_images_per_chunk(big) * 64, big.N);
  big.N = 1;
  EXPECT_EQ(cpu::onednn_images_per_chunk(big), 1);
}

// oneDNN and im2col round differently: both agree with a float64 reference
// (im2col in float64) to float32 accuracy, and with each other.
TEST(OnednnConv, AgreesWithIm2colOnOddShapes) {
  if (!have_onednn()) GTEST_SKIP() << "built without oneDNN";
  OnednnGuard guard;
  manual_seed(32);
  for (const Case& c : odd_cases()) {
    const std::vector<Tensor> in64 = inputs(c, kFloat64);
    std::vector<Tensor> in32;
    for (const Tensor& t : in64) in32.push_back(t.to(kFloat32));
    const Tensor probe = conv2d(in64[0], in64[1], Tensor(), c.stride, c.padding, c.dilation, c.groups);
    const Tensor r64 = randn(probe.shape(), kFloat64);
    const Tensor r32 = r64.to(kFloat32);
    const std::vector<Tensor> want = conv_and_grads(c, in64, r64);
    cpu::set_onednn_conv_enabled(true);
    const std::vector<Tensor> onednn = conv_and_grads(c, in32, r32);
    cpu::set_onednn_conv_enabled(false);
    const std::vector<Tensor> im2col = conv_and_grads(c, in32, r32);
    cpu::set_onednn_conv_enabled(true);
    // Sums of up to ~1000 products of unit normals: float32 rounding of the
    // order 1e-5 relative to the terms' scale.
    for (size_t i = 0; i < want.size(); ++i) {
      const std::vector<double> ref = want[i].to_vector<double>();
      EXPECT_TRUE(testing::allclose(onednn[i], ref, 2e-3, 1e-4)) << describe(c) << ", oneDNN, result " << i;
      EXPECT_TRUE(testing::allclose(im2col[i], ref, 2e-3, 1e-4)) << describe(c) << ", im2col, result " << i;
      EXPECT_TRUE(testing::allclose(onednn[i], im2col[i].to_vector<double>(), 4e-3, 2e-4))
          << describe(c) << ", oneDNN vs im2col, result " << i;
    }
  }
}

// conv_transpose2d runs conv2d_input_grad's kernel, output_padding included
// (rows past the last window of the matching conv2d).
TEST(OnednnConv, ConvTransposeAgreesWithFloat64) {
  if (!have_onednn()) GTEST_SKIP() << "built without oneDNN";
  manual_seed(33);
  struct T {
    Shape x, w, stride, padding, output_padding;
    int64_t groups;
    Shape dilation;
  };
  const T cases[] = {
      {{2, 32, 8, 8}, {32, 16, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, {1, 1}},
      {{3, 16, 7, 9}, {16, 8, 4, 4}, {2, 3}, {1, 0}, {1, 2}, 2, {1, 1}},
      {{1, 32, 5, 5}, {32, 16, 3, 3}, {1, 1}, {2, 2}, {0, 0}, 1, {2, 2}},
  };
  for (const T& c : cases) {
    const Tensor x = randn(c.x, kFloat64), w = randn(c.w, kFloat64), b = randn({c.w[1] * c.groups}, kFloat64);
    const Tensor want = conv_transpose2d(x, w, b, c.stride, c.padding, c.output_padding, c.groups, c.dilation);
    const Tensor got = conv_transpose2d(x.to(kFloat32), w.to(kFloat32), b.to(kFloat32), c.stride, c.padding,
                                        c.output_padding, c.groups, c.dilation);
    EXPECT_EQ(got.shape(), want.shape());
    EXPECT_TRUE(testing::allclose(got, want.to_vector<double>(), 2e-3, 1e-4)) << shape_str(c.x);
  }
}

// Turning the path off takes effect at once, and the two paths round
// differently somewhere on a large layer (else the comparisons above could
// not tell them apart).
TEST(OnednnConv, SwitchSelectsThePath) {
  if (!have_onednn()) GTEST_SKIP() << "built without oneDNN";
  OnednnGuard guard;
  manual_seed(34);
  const Tensor x = randn({8, 64, 14, 14}), w = randn({64, 64, 3, 3});
  cpu::set_onednn_conv_enabled(true);
  EXPECT_TRUE(cpu::onednn_conv_enabled());
  const Tensor a = conv2d(x, w, Tensor(), {1, 1}, {1, 1});
  cpu::set_onednn_conv_enabled(false);
  EXPECT_FALSE(cpu::onednn_conv_enabled());
  const Tensor b = conv2d(x, w, Tensor(), {1, 1}, {1, 1});
  EXPECT_FALSE(testing::bitwise_equal(a, b));
  EXPECT_TRUE(testing::allclose(a, b.to_vector<double>(), 1e-3, 1e-4));
}

}  // namespace
}  // namespace dtr
