// softmax, log_softmax, cross_entropy, nll_loss, mse_loss. Expected values
// from PyTorch 1.13 (torch.nn.functional), pasted; gradients checked by
// finite differences in float64.
#include <cmath>
#include <string>

#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

template <typename E, typename F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an exception naming '" << needle << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

using V = std::vector<Tensor>;

Tensor logits4x3() {
  return from_vector(std::vector<double>{1.0, 2.0, 0.5, 0.1, -1.0, 3.0, 2.0, 2.0, 2.0, 0.3, 0.2, -0.4}, {4, 3});
}
Tensor targets4() { return from_vector(std::vector<int64_t>{2, 2, -100, 0}); }

TEST(Loss, SoftmaxAndLogSoftmaxValues) {
  const Tensor s = from_vector(std::vector<double>{1.0, 2.0, 3.0, -1.0, 0.5, 4.0}, {2, 3});
  // F.softmax(s, 1), F.softmax(s, 0), F.log_softmax(s, 1)
  EXPECT_TRUE(testing::allclose(softmax(s, 1),
                                {0.09003057317038045, 0.2447284710547976, 0.6652409557748218,
                                 0.00649794331566194, 0.0291217615374784, 0.9643802951468596},
                                1e-14, 1e-12));
  EXPECT_TRUE(testing::allclose(softmax(s, 0),
                                {0.8807970779778823, 0.8175744761936437, 0.2689414213699951,
                                 0.11920292202211755, 0.18242552380635632, 0.7310585786300049},
                                1e-14, 1e-12));
  EXPECT_TRUE(testing::allclose(s.log_softmax(-1),
                                {-2.4076059644443806, -1.4076059644443804, -0.4076059644443804,
                                 -5.036269565124779, -3.5362695651247793, -0.03626956512477912},
                                1e-14, 1e-12));
  // A middle dim of a 3-D tensor: F.softmax(arange(24).reshape(2,3,4)/7 - 1, 1).
  std::vector<double> v(24);
  for (int i = 0; i < 24; ++i) v[size_t(i)] = double(i) / 7 - 1;
  const Tensor y = softmax(from_vector(v, {2, 3, 4}), 1);
  const std::vector<double> row{0.16930472446194098, 0.2998039515006298, 0.5308913240374292};
  std::vector<double> expected;
  for (int b = 0; b < 2; ++b)
    for (double p : row) expected.insert(expected.end(), 4, p);
  EXPECT_TRUE(testing::allclose(y, expected, 1e-14, 1e-12));
  // float32 stays float32 and large logits do not overflow.
  const Tensor big = softmax(from_vector(std::vector<float>{1000, 1000}), 0);
  EXPECT_EQ(big.dtype(), kFloat32);
  EXPECT_TRUE(testing::allclose(big, {0.5, 0.5}));
}

// PyTorch 2.x's autocast lists (Note [autocast lists]): softmax runs in
// float32 under CUDA autocast but in its input's dtype under CPU autocast;
// the losses run in float32 under both.
TEST(Loss, SoftmaxKeepsItsDTypeAndLossesRunInFloat32UnderCpuAutocast) {
  const Tensor x = from_vector(std::vector<float>{1, 2, 3}).to(kBFloat16);
  EXPECT_EQ(softmax(x, 0).dtype(), kBFloat16);
  AutocastGuard ac(kCPU, kBFloat16);
  const Tensor y = softmax(x, 0);
  EXPECT_EQ(y.dtype(), kBFloat16);
  EXPECT_TRUE(testing::allclose(y, {0.09003057317038045, 0.2447284710547976, 0.6652409557748218}, 0,
                                std::ldexp(1.0, -8)));
  EXPECT_EQ(cross_entropy(from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}).to(kBFloat16),
                          from_vector(std::vector<int64_t>{0, 1}))
                .dtype(),
            kFloat32);
  EXPECT_EQ(op("softmax").autocast_policy(kCPU), AutocastPolicy::kNone);
  EXPECT_EQ(op("softmax").autocast_policy(kCUDA), AutocastPolicy::kFloat32);
}

TEST(Loss, CrossEntropyReductionsAndIgnoreIndex) {
  const Tensor x = logits4x3();
  const Tensor t = targets4();
  // The mean divides by the 3 targets that are not ignored.
  EXPECT_TRUE(testing::allclose(cross_entropy(x, t), {0.970401455182259}, 1e-14, 1e-12));
  EXPECT_TRUE(testing::allclose(cross_entropy(x, t, {}, "sum", -100), {2.911204365546777}, 1e-14, 1e-12));
  const Tensor none = cross_entropy(x, t, {}, "none", -100);
  EXPECT_EQ(none.shape(), (Shape{4}));
  EXPECT_TRUE(testing::allclose(none, {1.964368784107945, 0.07077421896049133, 0.0, 0.8760613624783408},
                                1e-14, 1e-12));
  // Every target ignored: the mean is 0/0.
  EXPECT_TRUE(std::isnan(cross_entropy(x, full({4}, -100, kInt64)).item<double>()));
  // float32 logits give a float32 loss.
  const Tensor l32 = cross_entropy(x.to(kFloat32), t);
  EXPECT_EQ(l32.dtype(), kFloat32);
  EXPECT_TRUE(testing::allclose(l32, {0.970401455182259}, 1e-6, 1e-6));
}

TEST(Loss, CrossEntropyGradient) {
  Tensor x = logits4x3();
  x.requires_grad_();
  cross_entropy(x, targets4()).backward();
  EXPECT_TRUE(testing::allclose(
      x.grad(),
      {0.07707463254071634, 0.20951057307058746, -0.28658520561130385, 0.01708786856944789,
       0.0056880573288024695, -0.022775925898250355, 0.0, 0.0, 0.0, -0.1945267291051188,
       0.12559740937619693, 0.06892931972892186},
      1e-14, 1e-12));
}

TEST(Loss, CrossEntropyWithSpatialDims) {
  // logits (N=2, C=3, d=2), target (2, 2) with ignore_index -1.
  const Tensor x = from_vector(std::vector<double>{1.0, -1.0, 2.0, 0.5, 0.0, 0.3, 0.2, 0.4, -0.5, 1.5, 1.0, 1.0},
                               {2, 3, 2});
  const Tensor t = from_vector(std::vector<int64_t>{0, 2, 1, -1}, {2, 2});
  const Tensor none = cross_entropy(x, t, {}, "none", -1);
  EXPECT_EQ(none.shape(), (Shape{2, 2}));
  EXPECT_TRUE(testing::allclose(none, {1.4076059644443804, 0.9138616044091668, 2.0142950728206315, 0.0},
                                1e-14, 1e-12));
  EXPECT_TRUE(testing::allclose(cross_entropy(x, t, {}, Reduction::Mean, -1), {1.4452542138913929}, 1e-14, 1e-12));
  // A single sample: logits (C), target ().
  EXPECT_TRUE(testing::allclose(cross_entropy(from_vector(std::vector<double>{1.0, 2.0, 0.5}),
                                              full({}, 2, kInt64)),
                                {1.964368784107945}, 1e-14, 1e-12));
}

TEST(Loss, NllLossMatchesCrossEntropy) {
  const Tensor lp = log_softmax(logits4x3(), 1);
  EXPECT_TRUE(testing::allclose(nll_loss(lp, targets4()), {0.970401455182259}, 1e-14, 1e-12));
  EXPECT_TRUE(testing::allclose(nll_loss(lp, targets4(), {}, "sum", -100), {2.911204365546777}, 1e-14, 1e-12));
  const Tensor p = from_vector(std::vector<double>{-1, -2, -3, -4}, {2, 2});
  EXPECT_TRUE(testing::allclose(nll_loss(p, from_vector(std::vector<int64_t>{1, 0}), {}, "none", -100), {2, 3}));
}

TEST(Loss, MseLossValues) {
  const Tensor a = from_vector(std::vector<double>{1.0, 2.0, -3.0, 0.5});
  const Tensor b = from_vector(std::vector<double>{0.5, 2.5, -1.0, 0.0});
  EXPECT_TRUE(testing::allclose(mse_loss(a, b), {1.1875}));
  EXPECT_TRUE(testing::allclose(mse_loss(a, b, "sum"), {4.75}));
  EXPECT_TRUE(testing::allclose(mse_loss(a, b, "none"), {0.25, 0.25, 4.0, 0.25}));
}

TEST(Loss, BadArgumentsThrowTypedErrors) {
  const Tensor x = logits4x3();
  expect_error<TypeError>([&] { cross_entropy(x, from_vector(std::vector<double>{0, 1, 2, 0})); }, "cross_entropy");
  expect_error<TypeError>([&] { cross_entropy(x, from_vector(std::vector<int32_t>{0, 1, 2, 0})); }, "cross_entropy");
  expect_error<ValueError>([&] { cross_entropy(x, from_vector(std::vector<int64_t>{0, 1, 2})); }, "cross_entropy");
  expect_error<ValueError>([&] { cross_entropy(x, zeros({4, 1}, kInt64)); }, "cross_entropy");
  expect_error<IndexError>([&] { cross_entropy(x, from_vector(std::vector<int64_t>{0, 3, 1, 1})); }, "cross_entropy");
  expect_error<IndexError>([&] { cross_entropy(x, from_vector(std::vector<int64_t>{0, -2, 1, 1})); }, "cross_entropy");
  expect_error<ValueError>([&] { cross_entropy(x, targets4(), {}, "avg"); }, "avg");
  expect_error<TypeError>([&] { cross_entropy(zeros({2, 2}, kInt64), zeros({2}, kInt64)); }, "cross_entropy");
  expect_error<TypeError>([&] { nll_loss(x, from_vector(std::vector<float>{0, 1, 2, 0})); }, "nll_loss");
  expect_error<IndexError>([&] { nll_loss(x, from_vector(std::vector<int64_t>{0, 1, 7, 0})); }, "nll_loss");
  expect_error<ValueError>([&] { mse_loss(zeros({3}), zeros({2, 3})); }, "mse_loss");
  expect_error<TypeError>([&] { mse_loss(zeros({3}), zeros({3}, kFloat64)); }, "mse_loss");
  expect_error<IndexError>([&] { softmax(x, 2); }, "softmax");
  expect_error<IndexError>([&] { log_softmax(x, -3); }, "log_softmax");
  expect_error<TypeError>([&] { softmax(zeros({3}, kInt64), 0); }, "softmax");
}

TEST(Loss, Gradchecks) {
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return softmax(in[0], 1); }, {testing::leaf({3, 4})}));
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return softmax(in[0], 0); }, {testing::leaf({3, 2, 2}, 2)}));
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return log_softmax(in[0], -1); }, {testing::leaf({2, 5}, 3)}));
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return log_softmax(in[0], 1); }, {testing::leaf({2, 3, 2}, 4)}));
  const Tensor t = targets4();
  EXPECT_TRUE(testing::gradcheck([&](const V& in) { return cross_entropy(in[0], t); }, {testing::leaf({4, 3}, 5)}));
  EXPECT_TRUE(testing::gradcheck([&](const V& in) { return cross_entropy(in[0], t, {}, "sum", -100); },
                                 {testing::leaf({4, 3}, 6)}));
  EXPECT_TRUE(testing::gradcheck([&](const V& in) { return cross_entropy(in[0], t, {}, "none", -100); },
                                 {testing::leaf({4, 3}, 7)}));
  const Tensor t3 = from_vector(std::vector<int64_t>{0, 2, 1, -1}, {2, 2});
  EXPECT_TRUE(testing::gradcheck([&](const V& in) { return cross_entropy(in[0], t3, {}, Reduction::Mean, -1); },
                                 {testing::leaf({2, 3, 2}, 8)}));
  EXPECT_TRUE(testing::gradcheck([&](const V& in) { return nll_loss(in[0], t); }, {testing::leaf({4, 3}, 9)}));
  EXPECT_TRUE(testing::gradcheck([&](const V& in) { return nll_loss(in[0], t, {}, "none", -100); },
                                 {testing::leaf({4, 3}, 10)}));
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return mse_loss(in[0], in[1]); },
                                 {testing::leaf({2, 3}, 11), testing::leaf({2, 3}, 12)}));
  EXPECT_TRUE(testing::gradcheck([](const V& in) { return mse_loss(in[0], in[1], "none"); },
                                 {testing::leaf({5}, 13), testing::leaf({5}, 14)}));
}

}  // namespace
}  // namespace dtr
