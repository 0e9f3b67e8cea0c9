// conv2d and pooling: values against PyTorch (torch.nn.functional.conv2d,
// max_pool2d, avg_pool2d, adaptive_avg_pool2d on the same inputs), a direct
// double-precision reference for the larger cases, errors, and float64
// gradient checks over stride, padding, dilation and groups.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "dtr/dtr.h"
#include "eager/dispatch.h"
#include "tests/testing.h"

namespace dtr {
namespace {

// v[i] = ((i * a) % 17 - 8) / 8, the pattern the PyTorch references used.
Tensor pat(IntList shape, int64_t a, DType dtype = kFloat64) {
  std::vector<double> v(size_t(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(int64_t(i) * a % 17 - 8) / 8.0;
  return from_vector(v, shape).to(dtype);
}

// Direct convolution in double: out[n, o, i, j] = bias[o] + sum over the
// group's channels c and taps (ki, kj) of x[n, c, i*s - p + ki*d, ...] * w[o, c', ki, kj].
std::vector<double> naive_conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, Shape s,
                                 Shape p, Shape d, int64_t groups) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = w.size(0), Cg = w.size(1), kH = w.size(2), kW = w.size(3);
  const int64_t Ho = (H + 2 * p[0] - d[0] * (kH - 1) - 1) / s[0] + 1;
  const int64_t Wo = (W + 2 * p[1] - d[1] * (kW - 1) - 1) / s[1] + 1;
  const auto xv = x.to_vector<double>(), wv = w.to_vector<double>();
  const auto bv = bias.defined() ? bias.to_vector<double>() : std::vector<double>(size_t(O), 0.0);
  std::vector<double> out(size_t(N * O * Ho * Wo));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      const int64_t g = o / (O / groups);
      for (int64_t i = 0; i < Ho; ++i)
        for (int64_t j = 0; j < Wo; ++j) {
          double acc = bv[size_t(o)];
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t ki = 0; ki < kH; ++ki)
              for (int64_t kj = 0; kj < kW; ++kj) {
                const int64_t ih = i * s[0] - p[0] + ki * d[0], iw = j * s[1] - p[1] + kj * d[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += xv[size_t(((n * C + g * Cg + c) * H + ih) * W + iw)] *
                       wv[size_t(((o * Cg + c) * kH + ki) * kW + kj)];
              }
          out[size_t(((n * O + o) * Ho + i) * Wo + j)] = acc;
        }
    }
  return out;
}

using testing::error_message;

TEST(Conv2d, GroupedStridedDilatedMatchesTorch) {
  // F.conv2d(pat((1,4,4,5),5), pat((4,2,3,2),3), pat((4,),7), stride=(2,1),
  //          padding=(1,1), dilation=(1,2), groups=2)
  Tensor y = conv2d(pat({1, 4, 4, 5}, 5), pat({4, 2, 3, 2}, 3), pat({4}, 7), {2, 1}, {1, 1}, {1, 2}, 2);
  EXPECT_EQ(y.shape(), (Shape{1, 4, 2, 5}));
  EXPECT_TRUE(testing::allclose(
      y, {-0.28125, -0.75, -0.734375, -0.71875, -1.734375, -1.140625, -1.390625, -1.65625, -1.390625,
          -1.140625, -1.53125, -0.140625, 1.921875, -1.0625, -0.671875, -1.734375, 0.0, 1.34375,
          -1.296875, -0.390625, 0.9375, -0.109375, 2.671875, 2.265625, 1.140625, 0.921875, 0.25,
          1.34375, 1.640625, -0.3125, -0.28125, -0.234375, 0.875, -0.140625, 1.171875, -0.421875,
          0.140625, -0.34375, -0.5625, -0.046875},
      1e-12));
  Tensor yf = conv2d(pat({1, 4, 4, 5}, 5, kFloat32), pat({4, 2, 3, 2}, 3, kFloat32),
                     pat({4}, 7, kFloat32), {2, 1}, {1, 1}, {1, 2}, 2);
  EXPECT_EQ(yf.dtype(), kFloat32);
  EXPECT_TRUE(testing::allclose(yf, y.to_vector<double>(), 1e-6));
}

TEST(Conv2d, PointwiseMatchesTorch) {
  // F.conv2d(pat((2,3,3,3),5), pat((2,3,1,1),3)): the 1x1 path skips im2col.
  Tensor y = conv2d(pat({2, 3, 3, 3}, 5), pat({2, 3, 1, 1}, 3));
  EXPECT_TRUE(testing::allclose(
      y, {0.859375, -0.3125, -0.15625, -0.796875, 0.15625, 0.3125, -0.328125, 0.625, 0.78125,
          -0.265625, 0.671875, 0.546875, -0.375, 0.296875, 0.171875, -0.75, -0.078125, -0.203125,
          -1.03125, -0.078125, 0.078125, -0.5625, 0.390625, 0.546875, -0.09375, 0.859375, -0.3125,
          -0.1875, 0.484375, 0.359375, -0.5625, 0.109375, -0.015625, -0.9375, -0.265625, 0.671875},
      1e-12));
}

TEST(Conv2d, LargerInputsMatchDirectReference) {
  manual_seed(21);
  Tensor x = randn({2, 16, 20, 20}, kFloat64), w = randn({32, 16, 3, 3}, kFloat64);
  Tensor b = randn({32}, kFloat64);
  EXPECT_TRUE(testing::allclose(conv2d(x, w, b, {1, 1}, {1, 1}),
                                naive_conv2d(x, w, b, {1, 1}, {1, 1}, {1, 1}, 1), 1e-10, 1e-10));
  EXPECT_TRUE(testing::allclose(conv2d(x, w, Tensor(), {2, 2}, {0, 1}, {2, 1}),
                                naive_conv2d(x, w, Tensor(), {2, 2}, {0, 1}, {2, 1}, 1), 1e-10,
                                1e-10));
  // Column matrices of 18 x 40000 per image: the kernel works on chunks of
  // two images, so three images take two chunks.
  Tensor xl = randn({3, 4, 200, 200}, kFloat64), wl = randn({4, 2, 3, 3}, kFloat64);
  EXPECT_TRUE(testing::allclose(conv2d(xl, wl, b.narrow(0, 0, 4), {1}, {1}, {1}, 2),
                                naive_conv2d(xl, wl, b.narrow(0, 0, 4), {1, 1}, {1, 1}, {1, 1}, 2),
                                1e-10, 1e-10));
}

TEST(Conv2d, MultiChunkGradientsMatchClosedForm) {
  // Three 2-channel 200x200 images, 3x3 kernel, padding 1: chunks of two
  // images (column matrices of 18 x 40000 per image), so two chunks.
  manual_seed(22);
  const int64_t N = 3, C = 2, S = 200;
  Tensor x = randn({N, C, S, S}, kFloat64);
  Tensor w = randn({2, C, 3, 3}, kFloat64);
  x.requires_grad_();
  w.requires_grad_();
  sum(conv2d(x, w, Tensor(), {1, 1}, {1, 1})).backward();
  // d sum(y) / d w[o, c, ki, kj] = sum over n, i, j of x[n, c, i - 1 + ki, j - 1 + kj].
  const auto xv = x.to_vector<double>();
  const auto gw = w.grad().to_vector<double>();
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t ki = 0; ki < 3; ++ki) {
      for (int64_t kj = 0; kj < 3; ++kj) {
        double expect = 0;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t i = 0; i < S; ++i) {
            const int64_t ih = i - 1 + ki;
            if (ih < 0 || ih >= S) continue;
            for (int64_t j = 0; j < S; ++j) {
              const int64_t iw = j - 1 + kj;
              if (iw >= 0 && iw < S) expect += xv[size_t(((n * C + c) * S + ih) * S + iw)];
            }
          }
        for (int64_t o = 0; o < 2; ++o)
          EXPECT_NEAR(gw[size_t(((o * C + c) * 3 + ki) * 3 + kj)], expect, 1e-8);
      }
    }
  }
  // d sum(y) / d x[n, c, h, w] = sum of w[:, c] over the taps that reach (h, w):
  // output (h + 1 - ki, w + 1 - kj) must exist, so all nine taps inside and
  // only ki, kj <= 1 at the corner (0, 0).
  const auto wv = w.to_vector<double>();
  const auto gx = x.grad().to_vector<double>();
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      double interior = 0, corner = 0;
      for (int64_t o = 0; o < 2; ++o)
        for (int64_t ki = 0; ki < 3; ++ki)
          for (int64_t kj = 0; kj < 3; ++kj) {
            const double v = wv[size_t(((o * C + c) * 3 + ki) * 3 + kj)];
            interior += v;
            if (ki <= 1 && kj <= 1) corner += v;
          }
      EXPECT_NEAR(gx[size_t(((n * C + c) * S + 100) * S + 17)], interior, 1e-10);
      EXPECT_NEAR(gx[size_t(((n * C + c) * S + 0) * S + 0)], corner, 1e-10);
    }
  }
}

TEST(Conv2d, UnbatchedInputAndLowerPrecision) {
  Tensor x = pat({4, 4, 5}, 5), w = pat({4, 2, 3, 2}, 3), b = pat({4}, 7);
  Tensor y3 = conv2d(x, w, b, {2, 1}, {1, 1}, {1, 2}, 2);
  EXPECT_EQ(y3.shape(), (Shape{4, 2, 5}));
  EXPECT_TRUE(testing::allclose(
      y3, conv2d(unsqueeze(x, 0), w, b, {2, 1}, {1, 1}, {1, 2}, 2).to_vector<double>(), 0));
  Tensor yb = conv2d(x.to(kBFloat16), w.to(kBFloat16), b.to(kBFloat16), {2, 1}, {1}, {1, 2}, 2);
  EXPECT_EQ(yb.dtype(), kBFloat16);
  EXPECT_TRUE(testing::allclose(yb, y3.to_vector<double>(), 1e-2, 1e-2));
  {
    AutocastGuard guard(kBFloat16);
    EXPECT_EQ(conv2d(x.to(kFloat32), w.to(kFloat32), Tensor(), {1}, {0}, {1}, 2).dtype(), kBFloat16);
  }
  EXPECT_EQ(op("conv2d").autocast, AutocastPolicy::kLowerPrecision);
}

TEST(Conv2d, ErrorsNameOpAndShapes) {
  const std::string msg = error_message([] { conv2d(zeros({1, 3, 5, 5}), zeros({4, 2, 3, 3})); });
  EXPECT_NE(msg.find("conv2d"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[1, 3, 5, 5]"), std::string::npos) << msg;
  EXPECT_THROW(conv2d(zeros({1, 3, 5, 5}), zeros({4, 2, 3, 3})), ValueError);
  EXPECT_THROW(conv2d(zeros({1, 4, 5, 5}), zeros({3, 2, 3, 3}), Tensor(), {1}, {0}, {1}, 2),
               ValueError);  // out channels not divisible by groups
  EXPECT_THROW(conv2d(zeros({1, 3, 2, 2}), zeros({4, 3, 3, 3})), ValueError);  // kernel > input
  EXPECT_THROW(conv2d(zeros({1, 3, 5, 5}), zeros({4, 3, 3, 3}), zeros({3})), ValueError);
  EXPECT_THROW(conv2d(zeros({1, 3, 5, 5}), zeros({4, 3, 3, 3}), Tensor(), {0, 1}), ValueError);
  EXPECT_THROW(conv2d(zeros({1, 3, 5, 5}), zeros({4, 3, 3, 3}), Tensor(), {1}, {-1}), ValueError);
  EXPECT_THROW(conv2d(zeros({3, 5}), zeros({4, 3, 3, 3})), ValueError);
  EXPECT_THROW(conv2d(zeros({1, 3, 5, 5}), zeros({4, 3, 3, 3}, kFloat64)), TypeError);
}

TEST(Conv2d, GradcheckStridePaddingBias) {
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& x) { return conv2d(x[0], x[1], x[2], {2, 2}, {1, 1}); },
      {testing::leaf({2, 2, 5, 5}, 1), testing::leaf({3, 2, 3, 3}, 2), testing::leaf({3}, 3)}));
}

TEST(Conv2d, GradcheckDilationAndAsymmetry) {
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& x) {
        return conv2d(x[0], x[1], Tensor(), {1, 2}, {2, 0}, {2, 1});
      },
      {testing::leaf({1, 2, 5, 6}, 4), testing::leaf({2, 2, 2, 3}, 5)}));
}

TEST(Conv2d, GradcheckGroups) {
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& x) {
        return conv2d(x[0], x[1], x[2], {1, 1}, {1, 0}, {1, 1}, 2);
      },
      {testing::leaf({3, 4, 4, 3}, 6), testing::leaf({4, 2, 2, 2}, 7), testing::leaf({4}, 8)}));
  // Pointwise (1x1) with groups.
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& x) { return conv2d(x[0], x[1], Tensor(), {1}, {0}, {1}, 2); },
      {testing::leaf({2, 4, 3, 3}, 9), testing::leaf({2, 2, 1, 1}, 10)}));
}

TEST(Conv2d, SameBitsForAnyThreadCount) {
  manual_seed(23);
  Tensor x = randn({6, 3, 12, 12}), w = randn({8, 3, 3, 3});
  x.requires_grad_();
  w.requires_grad_();
  auto run = [&](int threads) {
    set_num_threads(threads);
    x.set_grad(Tensor());
    w.set_grad(Tensor());
    Tensor y = conv2d(x, w, Tensor(), {1, 1}, {1, 1});
    sum(mul(y, y)).backward();
    return std::vector<Tensor>{y, x.grad(), w.grad()};
  };
  const int before = num_threads();
  const auto one = run(1);
  const auto two = run(std::max(2, before));
  set_num_threads(before);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(testing::bitwise_equal(one[i], two[i])) << i;
}

TEST(MaxPool2d, ValuesAndIndicesMatchTorch) {
  // F.max_pool2d(pat((1,2,5,5),5), 3, 2, 1, return_indices=True)
  Tensor x = pat({1, 2, 5, 5}, 5);
  Tensor y = max_pool2d(x, {3}, {2}, {1});
  EXPECT_EQ(y.shape(), (Shape{1, 2, 3, 3}));
  EXPECT_TRUE(testing::allclose(y, {0.625, 0.875, 0.875, 1.0, 0.75, 0.75, 0.875, 0.625, 0.625, 0.75,
                                    1.0, 0.5, 0.75, 0.875, 1.0, 0.625, 0.75, 1.0},
                                0));
  const auto outs = dispatch(op("max_pool2d"), std::vector<Tensor>{x},
                             Attrs{{"kernel_size", Shape{3, 3}}, {"stride", Shape{2, 2}},
                                   {"padding", Shape{1, 1}}});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[1].dtype(), kInt64);
  EXPECT_EQ(outs[1].to_vector<int64_t>(),
            (std::vector<int64_t>{6, 3, 3, 10, 13, 13, 20, 23, 23, 5, 2, 8, 5, 12, 19, 15, 22, 19}));
  // Default stride = kernel size; float32 and unbatched inputs.
  EXPECT_EQ(max_pool2d(x.to(kFloat32), {2, 2}).shape(), (Shape{1, 2, 2, 2}));
  EXPECT_EQ(max_pool2d(pat({2, 5, 5}, 5), {3}, {2}, {1}).shape(), (Shape{2, 3, 3}));
}

// The 2x2 stride-2 pool has its own loops (vectorized for float32): values
// and indices equal the window scan's (a value takes over when greater or
// NaN, so ties keep the first and the last NaN wins) for widths on either
// side of the vector width, with ties, NaNs and -inf.
TEST(MaxPool2d, TwoByTwoStrideTwoMatchesTheWindowScan) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {kFloat32, kFloat64}) {
    for (int64_t H : {2, 3, 5}) {
      for (int64_t W = 2; W <= 40; W += (W < 20 ? 1 : 7)) {
        const int64_t planes = 6;
        std::vector<double> v(size_t(planes * H * W));
        for (size_t i = 0; i < v.size(); ++i) {
          v[i] = double(int64_t(i * 7 % 5) - 2);  // many ties
          if (i % 23 == 5 || i % 29 == 6) v[i] = nan;
          if (i % 19 == 3) v[i] = -inf;
        }
        const Tensor x = from_vector(v, {2, 3, H, W}).to(dtype);
        const auto outs = dispatch(op("max_pool2d"), std::vector<Tensor>{x},
                                   Attrs{{"kernel_size", Shape{2, 2}}, {"stride", Shape{2, 2}},
                                         {"padding", Shape{0, 0}}});
        const auto y = outs[0].to_vector<double>();
        const auto idx = outs[1].to_vector<int64_t>();
        const auto xv = x.to_vector<double>();
        const int64_t Ho = H / 2, Wo = W / 2;
        ASSERT_EQ(int64_t(y.size()), planes * Ho * Wo);
        for (int64_t p = 0; p < planes; ++p)
          for (int64_t oh = 0; oh < Ho; ++oh)
            for (int64_t ow = 0; ow < Wo; ++ow) {
              double best = -inf;
              int64_t best_i = 2 * oh * W + 2 * ow;
              for (int64_t ih = 2 * oh; ih < 2 * oh + 2; ++ih)
                for (int64_t iw = 2 * ow; iw < 2 * ow + 2; ++iw) {
                  const double e = xv[size_t(p * H * W + ih * W + iw)];
                  if (e > best || std::isnan(e)) best = e, best_i = ih * W + iw;
                }
              const size_t o = size_t((p * Ho + oh) * Wo + ow);
              EXPECT_TRUE(y[o] == best || (std::isnan(y[o]) && std::isnan(best)))
                  << dtype_name(dtype) << " H " << H << " W " << W << " output " << o;
              EXPECT_EQ(idx[o], best_i) << dtype_name(dtype) << " H " << H << " W " << W << " output " << o;
            }
      }
    }
  }
}

TEST(MaxPool2d, GradientGoesToTheMaximum) {
  Tensor x = from_vector(std::vector<double>{1, 5, 2, 0, 3, 4, 9, 8, 7, 6, 1, 2, 0, 1, 3, 2}, {1, 1, 4, 4});
  x.requires_grad_();
  sum(max_pool2d(x, {2})).backward();
  EXPECT_TRUE(testing::allclose(x.grad(), {0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0}, 0));
}

TEST(MaxPool2d, GradcheckOverlappingWindows) {
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& x) { return max_pool2d(x[0], {3, 2}, {2, 1}, {1, 1}); },
      {testing::leaf({2, 2, 5, 4}, 11)}));
}

TEST(AvgPool2d, ValuesMatchTorch) {
  Tensor x = pat({1, 2, 5, 5}, 5);
  // F.avg_pool2d(x, 3, 2, 1): count_include_pad divides by 9 at the borders too.
  EXPECT_TRUE(testing::allclose(
      avg_pool2d(x, {3}, {2}, {1}),
      {-0.08333333333333333, 0.027777777777777776, 0.041666666666666664, 0.16666666666666666,
       -0.1111111111111111, 0.0, 0.06944444444444445, -0.09722222222222222, -0.041666666666666664,
       0.013888888888888888, 0.05555555555555555, -0.09722222222222222, -0.041666666666666664,
       -0.06944444444444445, 0.027777777777777776, -0.06944444444444445, -0.06944444444444445,
       0.05555555555555555},
      1e-12));
  // F.avg_pool2d(x, 2)
  EXPECT_TRUE(testing::allclose(avg_pool2d(x, {2}),
                                {-0.1875, 0.0, 0.21875, -0.125, 0.03125, 0.21875, -0.09375, 0.09375},
                                1e-12));
}

TEST(AvgPool2d, GradcheckPadded) {
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& x) { return avg_pool2d(x[0], {3, 2}, {2, 1}, {1, 1}); },
      {testing::leaf({2, 2, 5, 4}, 12)}));
}

TEST(AdaptiveAvgPool2d, ValuesMatchTorch) {
  // F.adaptive_avg_pool2d(pat((1,2,5,7),5), (3,4)): overlapping, uneven windows.
  Tensor y = adaptive_avg_pool2d(pat({1, 2, 5, 7}, 5), {3, 4});
  EXPECT_EQ(y.shape(), (Shape{1, 2, 3, 4}));
  EXPECT_TRUE(testing::allclose(
      y, {-0.625, 0.3125, 0.14583333333333334, 0.375, -0.4375, 0.027777777777777776,
          -0.1388888888888889, 0.5625, -0.25, -0.020833333333333332, -0.1875, 0.21875, 0.0,
          0.22916666666666666, 0.0625, -0.0625, 0.1875, -0.05555555555555555, 0.25, 0.125, 0.375,
          -0.10416666666666667, 0.08333333333333333, -0.21875},
      1e-12));
  // Output size 1 is the global mean.
  Tensor x = pat({2, 3, 4, 4}, 3);
  EXPECT_TRUE(testing::allclose(reshape(adaptive_avg_pool2d(x, {1}), {6}),
                                mean(x, {2, 3}).to_vector<double>(), 1e-12));
}

TEST(AdaptiveAvgPool2d, Gradcheck) {
  EXPECT_TRUE(testing::gradcheck(
      [](const std::vector<Tensor>& x) { return adaptive_avg_pool2d(x[0], {3, 2}); },
      {testing::leaf({1, 2, 5, 7}, 13)}));
}

TEST(Pool2d, ErrorsNameOp) {
  const std::string msg = error_message([] { max_pool2d(zeros({1, 1, 4, 4}), {2}, {2}, {2}); });
  EXPECT_NE(msg.find("max_pool2d"), std::string::npos) << msg;
  EXPECT_THROW(max_pool2d(zeros({1, 1, 4, 4}), {2}, {2}, {2}), ValueError);  // pad > kernel/2
  EXPECT_THROW(max_pool2d(zeros({1, 1, 2, 2}), {3}), ValueError);            // kernel > input
  EXPECT_THROW(avg_pool2d(zeros({1, 1, 4, 4}), {0}), ValueError);
  EXPECT_THROW(avg_pool2d(zeros({4, 4}), {2}), ValueError);
  EXPECT_THROW(max_pool2d(zeros({1, 1, 4, 4}, kInt64), {2}), TypeError);
  EXPECT_THROW(adaptive_avg_pool2d(zeros({1, 1, 4, 4}), {0, 2}), ValueError);
  EXPECT_THROW(adaptive_avg_pool2d(zeros({1, 1, 4, 4}), {1, 2, 3}), ValueError);
}

// The gradient rows are callable by name (dispatch, the C ABI): attributes
// that do not fit the forward they invert are the caller's ValueError, not a
// kernel reading past a buffer (what the dispatch fuzzer reaches).
TEST(Pool2d, GradientRowsCheckTheirAttributes) {
  const Attrs pool{{"kernel_size", Shape{2, 2}}, {"stride", Shape{2, 2}}, {"padding", Shape{0, 0}},
                   {"input_size", Shape{1, 1, 4, 4}}};
  const Tensor g = ones({1, 1, 2, 2});
  const OpDef& avg = op("avg_pool2d_backward");
  EXPECT_EQ(dispatch1(avg, {g}, pool).shape(), (Shape{1, 1, 4, 4}));
  EXPECT_THROW((void)dispatch1(avg, {ones({1, 1, 3, 3})}, pool), ValueError);
  Attrs short_kernel = pool;
  short_kernel.set("kernel_size", Shape{2});
  EXPECT_THROW((void)dispatch1(avg, {g}, short_kernel), ValueError);
  Attrs negative = pool;
  negative.set("input_size", Shape{1, 1, -4, 4});
  EXPECT_THROW((void)dispatch1(avg, {g}, negative), ValueError);
  const OpDef& mx = op("max_pool2d_backward");
  EXPECT_THROW((void)dispatch1(mx, {g, zeros({1, 1, 3, 2}, kInt64)}, pool), ValueError);
  EXPECT_THROW((void)dispatch1(mx, {g, zeros({1, 1, 2, 2})}, pool), ValueError);  // float indices
  EXPECT_EQ(dispatch1(mx, {g, zeros({1, 1, 2, 2}, kInt64)}, pool).shape(), (Shape{1, 1, 4, 4}));
  const Attrs adaptive{{"output_size", Shape{2, 2}}, {"input_size", Shape{1, 1, 4, 4}}};
  const OpDef& ad = op("adaptive_avg_pool2d_backward");
  EXPECT_EQ(dispatch1(ad, {g}, adaptive).shape(), (Shape{1, 1, 4, 4}));
  EXPECT_THROW((void)dispatch1(ad, {ones({1, 1, 3, 2})}, adaptive), ValueError);
}

TEST(Conv2d, GradientRowsCheckTheirAttributes) {
  const Attrs conv{{"stride", Shape{1, 1}}, {"padding", Shape{0, 0}}, {"dilation", Shape{1, 1}},
                   {"groups", int64_t(1)}};
  Attrs in_grad = conv;
  in_grad.set("input_size", Shape{1, 2, 4, 4});
  const Tensor w = ones({3, 2, 3, 3});
  const OpDef& ig = op("conv2d_input_grad");
  EXPECT_EQ(dispatch1(ig, {ones({1, 3, 2, 2}), w}, in_grad).shape(), (Shape{1, 2, 4, 4}));
  EXPECT_THROW((void)dispatch1(ig, {ones({1, 3, 3, 3}), w}, in_grad), ValueError);
  Attrs short_stride = in_grad;
  short_stride.set("stride", Shape{1});
  EXPECT_THROW((void)dispatch1(ig, {ones({1, 3, 2, 2}), w}, short_stride), ValueError);
  Attrs w_grad = conv;
  w_grad.set("weight_size", Shape{3, 2, 3, 3});
  const OpDef& wg = op("conv2d_weight_grad");
  const Tensor x = ones({1, 2, 4, 4});
  EXPECT_EQ(dispatch1(wg, {ones({1, 3, 2, 2}), x}, w_grad).shape(), (Shape{3, 2, 3, 3}));
  EXPECT_THROW((void)dispatch1(wg, {ones({1, 4, 2, 2}), x}, w_grad), ValueError);
}

}  // namespace
}  // namespace dtr
