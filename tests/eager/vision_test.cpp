// conv_transpose2d, group_norm, pad, interpolate, dropout2d and their
// modules: typed errors for bad arguments, module parameters (names, shapes,
// PyTorch's initialization bounds), dropout2d's channel statistics and
// replay. Values against PyTorch and gradients are in the conformance cases
// (tests/eager/conformance_test.cpp).
#include <cmath>

#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}

TEST(ConvTranspose2d, ShapesAndErrors) {
  // (H - 1) s - 2 p + d (k - 1) + op + 1 = 2 * 2 - 2 + 2 + 1 + 1 = 6.
  EXPECT_EQ(conv_transpose2d(zeros({2, 4, 3, 3}), zeros({4, 3, 3, 3}), zeros({3}), {2}, {1}, {1})
                .shape(),
            (Shape{2, 3, 6, 6}));
  EXPECT_EQ(conv_transpose2d(zeros({4, 3, 3}), zeros({4, 1, 2, 2}), Tensor(), {1}, {0}, {0}, 2).shape(),
            (Shape{2, 4, 4}));  // unbatched; C_out = 1 * groups
  const Tensor w = zeros({4, 3, 3, 3});
  EXPECT_THROW(conv_transpose2d(zeros({1, 3, 5, 5}), w), ValueError);  // C_in != weight.size(0)
  EXPECT_THROW(conv_transpose2d(zeros({1, 4, 5, 5}), w, Tensor(), {1}, {0}, {0}, 3), ValueError);
  EXPECT_THROW(conv_transpose2d(zeros({1, 4, 5}), zeros({4, 3, 3})), ValueError);  // ranks
  EXPECT_THROW(conv_transpose2d(zeros({4, 5}), w), ValueError);
  EXPECT_THROW(conv_transpose2d(zeros({1, 4, 5, 5}), w, zeros({4})), ValueError);  // bias (C_out)
  EXPECT_THROW(conv_transpose2d(zeros({1, 4, 5, 5}), w, Tensor(), {0}), ValueError);
  EXPECT_THROW(conv_transpose2d(zeros({1, 4, 5, 5}), w, Tensor(), {1}, {-1}), ValueError);
  // output_padding must be smaller than stride or dilation.
  EXPECT_THROW(conv_transpose2d(zeros({1, 4, 5, 5}), w, Tensor(), {2}, {0}, {2}), ValueError);
  EXPECT_THROW(conv_transpose2d(zeros({1, 4, 5, 5}), w, Tensor(), {1, 2, 3}), ValueError);
  // A padding that swallows the whole output.
  EXPECT_THROW(conv_transpose2d(zeros({1, 4, 1, 1}), w, Tensor(), {1}, {2}), ValueError);
  EXPECT_THROW(conv_transpose2d(zeros({1, 4, 5, 5}, kInt64), w), TypeError);
  EXPECT_THROW(conv_transpose2d(zeros({1, 4, 5, 5}, kFloat64), w), TypeError);
  EXPECT_THROW(conv_transpose2d(Tensor(), w), ValueError);
  const std::string msg =
      testing::error_message([&] { conv_transpose2d(zeros({1, 3, 5, 5}), w); });
  EXPECT_NE(msg.find("conv_transpose2d"), std::string::npos) << msg;
}

TEST(ConvTranspose2d, IsTheAdjointOfConv2d) {
  // <conv_transpose2d(y, w), x> = <y, conv2d(x, w)> with the same weight,
  // stride, padding, dilation and groups; output_padding restores H = 8.
  manual_seed(3);
  const Tensor w = randn({6, 2, 3, 2}, kFloat64);  // conv2d: C 4 -> 6, groups 2
  for (const int64_t H : {7, 8}) {
    const Tensor x = randn({2, 4, H, 6}, kFloat64);
    const Tensor cx = conv2d(x, w, Tensor(), {2, 1}, {1, 0}, {1, 2}, 2);
    ASSERT_EQ(cx.shape(), (Shape{2, 6, 4, 4}));
    const Tensor y = randn({2, 6, 4, 4}, kFloat64);
    const Tensor ty = conv_transpose2d(y, w, Tensor(), {2, 1}, {1, 0}, {H - 7, 0}, 2, {1, 2});
    ASSERT_EQ(ty.shape(), x.shape());
    const double lhs = sum(mul(ty, x)).item<double>(), rhs = sum(mul(y, cx)).item<double>();
    EXPECT_NEAR(lhs, rhs, 1e-10 * std::max(1.0, std::abs(rhs))) << "H=" << H;
  }
}

TEST(ConvTranspose2d, ModuleParametersAndInit) {
  manual_seed(0);
  nn::ConvTranspose2d m(16, 8, 3, /*stride=*/2, /*padding=*/1, /*output_padding=*/1, /*groups=*/2);
  EXPECT_EQ(m->weight.shape(), (Shape{16, 4, 3, 3}));
  EXPECT_EQ(m->bias.shape(), (Shape{8}));
  EXPECT_EQ(m->state_dict().keys(), (std::vector<std::string>{"weight", "bias"}));
  // PyTorch's fan_in of the (in, out/groups, kH, kW) weight: 4 * 3 * 3 = 36,
  // so both bounds are 1/6 (a fan_in of in * kH * kW = 144 would give 1/12).
  const double bound = 1.0 / 6.0;
  EXPECT_LE(max_abs(m->weight), bound);
  EXPECT_GT(max_abs(m->weight), 0.9 * bound);
  EXPECT_LE(max_abs(m->bias), bound);
  EXPECT_EQ(m->forward(zeros({2, 16, 5, 5})).shape(), (Shape{2, 8, 10, 10}));
  nn::ConvTranspose2d no_bias(nn::ConvTranspose2dOptions(2, 3, {2, 3}).bias(false).dilation(2));
  EXPECT_FALSE(no_bias->bias.defined());
  EXPECT_EQ(no_bias->state_dict().keys(), (std::vector<std::string>{"weight"}));
  EXPECT_EQ(no_bias->forward(zeros({1, 2, 4, 4})).shape(), (Shape{1, 3, 6, 8}));
  EXPECT_THROW(nn::ConvTranspose2d(3, 4, 3, 1, 0, 0, 2), ValueError);  // in % groups
  EXPECT_THROW(nn::ConvTranspose2d(4, 3, 3, 1, 0, 0, 2), ValueError);  // out % groups
  EXPECT_THROW(nn::ConvTranspose2d(4, 4, 3, 1, 0, 0, 0), ValueError);
  EXPECT_THROW(nn::ConvTranspose2d(4, 4, 0), ValueError);
  EXPECT_THROW(nn::ConvTranspose2d(4, 4, 3, 2, 0, 2), ValueError);  // output_padding >= stride
}

TEST(GroupNorm, ErrorsAndModule) {
  const Tensor x = zeros({2, 6, 3, 3});
  EXPECT_THROW(group_norm(x, 4), ValueError);  // 6 channels, 4 groups
  EXPECT_THROW(group_norm(x, 0), ValueError);
  EXPECT_THROW(group_norm(zeros({6}), 3), ValueError);  // rank
  EXPECT_THROW(group_norm(x, 3, zeros({3})), ValueError);
  EXPECT_THROW(group_norm(x, 3, Tensor(), zeros({6, 1})), ValueError);
  EXPECT_THROW(group_norm(x, 3, zeros({6}, kFloat64)), TypeError);
  EXPECT_THROW(group_norm(zeros({2, 6}, kInt64), 3), TypeError);
  EXPECT_THROW(group_norm(x, 3, Tensor(), Tensor(), -1.0), ValueError);
  EXPECT_NE(testing::error_message([&] { group_norm(x, 4); }).find("num_groups"), std::string::npos);

  nn::GroupNorm m(2, 4);
  EXPECT_EQ(m->state_dict().keys(), (std::vector<std::string>{"weight", "bias"}));
  EXPECT_EQ(m->weight.to_vector<float>(), (std::vector<float>{1, 1, 1, 1}));
  EXPECT_EQ(m->bias.to_vector<float>(), (std::vector<float>{0, 0, 0, 0}));
  // Each (sample, group) of the output has mean 0 and biased variance ~1.
  manual_seed(1);
  const Tensor y = m->forward(add(mul(randn({3, 4, 5, 5}), 3.0), 2.0));
  const Tensor rows = reshape(y, {6, 50});
  for (double v : mean(rows, {1}).to_vector<double>()) EXPECT_NEAR(v, 0.0, 1e-5);
  for (double v : var(rows, {1}, 0).to_vector<double>()) EXPECT_NEAR(v, 1.0, 1e-3);
  // bfloat16 computes in float32 and rounds: close to the float32 result.
  const Tensor xf = randn({2, 4, 3, 3});
  const Tensor yb = group_norm(xf.to(kBFloat16), 2, m->weight.to(kBFloat16), m->bias.to(kBFloat16));
  EXPECT_EQ(yb.dtype(), kBFloat16);
  EXPECT_TRUE(testing::allclose(yb.to(kFloat32), group_norm(xf, 2).to_vector<double>(), 2e-2));
  nn::GroupNorm plain(3, 6, 1e-5, /*affine=*/false);
  EXPECT_TRUE(plain->state_dict().keys().empty());
  EXPECT_THROW(nn::GroupNorm(4, 6), ValueError);
  EXPECT_THROW(nn::GroupNorm(0, 6), ValueError);
}

TEST(Pad, ValuesAndErrors) {
  const Tensor x = from_vector<float>({1, 2, 3}, {1, 3});
  EXPECT_EQ(pad(x, {2, 0}, "reflect").to_vector<float>(), (std::vector<float>{3, 2, 1, 2, 3}));
  EXPECT_EQ(pad(x, {1, 2}, "constant", -1.0).to_vector<float>(),
            (std::vector<float>{-1, 1, 2, 3, -1, -1}));
  EXPECT_EQ(pad(x, {-1, 0}).to_vector<float>(), (std::vector<float>{2, 3}));
  // Integer tensors keep their dtype and the fill.
  const Tensor xi = pad(from_vector<int64_t>({5, 6}), {1, 1}, "constant", 7.0);
  EXPECT_EQ(xi.dtype(), kInt64);
  EXPECT_EQ(xi.to_vector<int64_t>(), (std::vector<int64_t>{7, 5, 6, 7}));
  EXPECT_THROW(pad(x, {1}), ValueError);              // odd length
  EXPECT_THROW(pad(x, {1, 1, 1, 1, 1, 1}), ValueError);  // more pairs than dims
  EXPECT_THROW(pad(x, {-2, -2}), ValueError);         // negative output size
  EXPECT_THROW(pad(x, {3, 0}, "reflect"), ValueError);  // pad must be < the input size
  EXPECT_THROW(pad(x, {0, 3}, "reflect"), ValueError);
  EXPECT_THROW(pad(zeros({3}), {1, 1}, "reflect"), ValueError);        // 1-D input
  EXPECT_THROW(pad(zeros({1, 2, 3, 3}), {1, 1}, "reflect"), ValueError);  // 4-D, 1-D pad
  EXPECT_THROW(pad(zeros({3, 3}), {1, 1, 1, 1}, "reflect"), ValueError);  // 2-D, 2-D pad
  EXPECT_THROW(pad(x, {1, 1}, "reflect", 0.0), ValueError);  // value with reflect
  EXPECT_THROW(pad(x, {1, 1}, "mirror"), ValueError);
  EXPECT_THROW(pad(x, {1, 1}, "replicate"), NotImplementedError);
  EXPECT_THROW(pad(zeros({1, 2, 3, 3, 3}), {1, 1, 1, 1, 1, 1}, "reflect"), NotImplementedError);
  EXPECT_THROW(pad(from_vector<int64_t>({1, 2, 3}, {1, 3}), {1, 1}, "reflect"), TypeError);
}

TEST(Interpolate, ValuesAndErrors) {
  const Tensor x = from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  EXPECT_EQ(interpolate(x, {}, {2.0}).to_vector<float>(),
            (std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}));
  // align_corners: the corners are the input's.
  const std::vector<float> ac = interpolate(x, {3, 3}, {}, "bilinear", true).to_vector<float>();
  EXPECT_EQ(ac, (std::vector<float>{1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4}));
  EXPECT_THROW(interpolate(x), ValueError);                // neither
  EXPECT_THROW(interpolate(x, {3, 3}, {2.0}), ValueError);  // both
  EXPECT_THROW(interpolate(x, {3, 3, 3}), ValueError);
  EXPECT_THROW(interpolate(x, {}, {2.0, 2.0, 2.0}), ValueError);
  EXPECT_THROW(interpolate(x, {0, 3}), ValueError);
  EXPECT_THROW(interpolate(x, {}, {-1.0}), ValueError);
  EXPECT_THROW(interpolate(x, {}, {0.1}), ValueError);  // empty output
  EXPECT_THROW(interpolate(x, {3, 3}, {}, "nearest", false), ValueError);  // align_corners
  EXPECT_THROW(interpolate(x, {3, 3}, {}, "cubic"), ValueError);
  EXPECT_THROW(interpolate(x, {3, 3}, {}, "bicubic"), NotImplementedError);
  EXPECT_THROW(interpolate(zeros({1, 2, 3}), {3}), ValueError);  // rank
  EXPECT_THROW(interpolate(zeros({1, 1, 2, 2}, kInt64), {3, 3}), TypeError);

  nn::Upsample up(std::vector<int64_t>{}, std::vector<double>{2.0}, "bilinear", false);
  EXPECT_EQ(up->forward(zeros({1, 3, 4, 5})).shape(), (Shape{1, 3, 8, 10}));
  EXPECT_TRUE(up->state_dict().keys().empty());
  EXPECT_THROW(nn::Upsample(), ValueError);
  EXPECT_THROW(nn::Upsample(std::vector<int64_t>{2, 2}, std::vector<double>{}, "area"), ValueError);
  EXPECT_THROW(nn::Upsample(std::vector<int64_t>{2, 2}, std::vector<double>{}, "nearest", true), ValueError);
}

TEST(Dropout2d, WholeChannelsDroppedWithProbabilityP) {
  manual_seed(7);
  const int64_t N = 40, C = 50, H = 3, W = 4;
  const double p = 0.3;
  const Tensor x = add(rand({N, C, H, W}), 1.0);  // nonzero everywhere
  const Tensor y = dropout2d(x, p, true);
  const auto xv = x.to_vector<float>(), yv = y.to_vector<float>();
  const float scale = float(1.0 / (1.0 - p));
  int64_t dropped = 0;
  for (int64_t ch = 0; ch < N * C; ++ch) {
    const int64_t zeros_in_channel = [&] {
      int64_t z = 0;
      for (int64_t k = 0; k < H * W; ++k) z += yv[size_t(ch * H * W + k)] == 0.0f;
      return z;
    }();
    ASSERT_TRUE(zeros_in_channel == 0 || zeros_in_channel == H * W) << "channel " << ch;
    if (zeros_in_channel == H * W) {
      ++dropped;
      continue;
    }
    for (int64_t k = 0; k < H * W; ++k) {
      const size_t i = size_t(ch * H * W + k);
      ASSERT_EQ(yv[i], xv[i] * scale) << i;
    }
  }
  // 2000 channels: the dropped fraction is within 4 sigma (0.041) of p.
  EXPECT_NEAR(double(dropped) / double(N * C), p, 0.041);
  // The gradient is the same channel mask times the scale.
  Tensor xg = ones({2, 8, 2, 2});
  xg.requires_grad_();
  Tensor yg = dropout2d(xg, 0.5, true);
  sum(yg).backward();
  EXPECT_EQ(xg.grad().to_vector<float>(), yg.to_vector<float>());
  // 3-D input is (N, C, L); eval and p = 0 are the identity.
  const std::vector<float> v3 = dropout2d(ones({4, 6, 5}), 0.5, true).to_vector<float>();
  for (size_t ch = 0; ch < 24; ++ch)
    for (size_t k = 1; k < 5; ++k) EXPECT_EQ(v3[ch * 5 + k], v3[ch * 5]);
  EXPECT_EQ(dropout2d(x, 0.5, false).impl(), x.impl());
  EXPECT_EQ(dropout2d(ones({1, 2, 2, 2}), 1.0, true).to_vector<float>(), std::vector<float>(8, 0.0f));
}

TEST(Dropout2d, ErrorsAndModule) {
  EXPECT_THROW(dropout2d(zeros({2, 3, 4, 4}), 1.5), ValueError);
  EXPECT_THROW(dropout2d(zeros({2, 3, 4, 4}), -0.1), ValueError);
  EXPECT_THROW(dropout2d(zeros({3, 4}), 0.5), ValueError);  // rank
  EXPECT_THROW(dropout2d(zeros({1, 2, 3, 4, 5}), 0.5), ValueError);
  EXPECT_THROW(dropout2d(zeros({2, 3, 4, 4}, kInt64), 0.5), TypeError);
  EXPECT_THROW(nn::Dropout2d(2.0), ValueError);
  nn::Dropout2d m(0.5);
  const Tensor x = ones({2, 4, 3, 3});
  m->eval();
  EXPECT_EQ(m->forward(x).impl(), x.impl());
  m->train();
  for (double v : m->forward(x).to_vector<double>()) EXPECT_TRUE(v == 0.0 || v == 2.0) << v;
}

}  // namespace
}  // namespace dtr
