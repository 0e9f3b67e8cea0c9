// Autocast (torch.autocast) with nn modules: under AutocastGuard(kBFloat16)
// linear / matmul run in bfloat16 while softmax, log_softmax, layer_norm and
// cross_entropy run in float32; gradients reach float32 parameters as
// float32. REFERENCES case 3 as a value test against PyTorch 1.13.
#include <cmath>

#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

Tensor vals(IntList shape, int64_t a, double scale = 1.0) {
  std::vector<double> v(size_t(numel(shape)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = scale * (double((int64_t(i) * a) % 13 - 6) / 8.0 + 0.01 * double(i));
  return from_vector(v, shape, kFloat32);
}

// The float32 values of `t` rounded to bfloat16, as float64.
std::vector<double> bf16_values(const Tensor& t) { return t.to(kBFloat16).to_vector<double>(); }

TEST(Autocast, LowerPrecisionAndFloat32Ops) {
  const Tensor x = vals({3, 4}, 5), w = vals({2, 4}, 7), b = vals({2}, 3);
  AutocastGuard ac(kBFloat16);
  EXPECT_EQ(linear(x, w, b).dtype(), kBFloat16);
  EXPECT_EQ(matmul(x, w.t()).dtype(), kBFloat16);
  nn::Linear lin(4, 2);
  EXPECT_EQ(lin.forward(x).dtype(), kBFloat16);
  EXPECT_EQ(lin.weight.dtype(), kFloat32);  // parameters are not converted

  // float32 ops take bfloat16 input and compute in float32.
  const Tensor h = linear(x, w, b);
  const Tensor s = softmax(h, 1), ls = log_softmax(h, 1);
  EXPECT_EQ(s.dtype(), kFloat32);
  EXPECT_EQ(ls.dtype(), kFloat32);
  nn::LayerNorm ln({2});
  EXPECT_EQ(ln.forward(h).dtype(), kFloat32);
  EXPECT_EQ(layer_norm(h, {2}).dtype(), kFloat32);
  const Tensor target = from_vector(std::vector<int64_t>{0, 1, 1});
  EXPECT_EQ(cross_entropy(h, target).dtype(), kFloat32);

  // Values: the float32 op applied to the bfloat16 values.
  const std::vector<double> hv = h.to_vector<double>();
  for (int r = 0; r < 3; ++r) {
    const double a = hv[size_t(2 * r)], c = hv[size_t(2 * r + 1)];
    const double m = std::max(a, c);
    const double lse = m + std::log(std::exp(a - m) + std::exp(c - m));
    EXPECT_NEAR(s.to_vector<double>()[size_t(2 * r)], std::exp(a - lse), 1e-6);
    EXPECT_NEAR(ls.to_vector<double>()[size_t(2 * r + 1)], c - lse, 1e-6);
  }
}

TEST(Autocast, MatmulValuesAreBFloat16RoundingsOfFloat32Products) {
  const Tensor a = vals({3, 5}, 5), bm = vals({5, 2}, 11);
  Tensor out;
  {
    AutocastGuard ac(kBFloat16);
    out = matmul(a, bm);
  }
  ASSERT_EQ(out.dtype(), kBFloat16);
  const auto av = bf16_values(a), bv = bf16_values(bm), got = out.to_vector<double>();
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 2; ++j) {
      double acc = 0;
      for (int k = 0; k < 5; ++k) acc += av[size_t(i * 5 + k)] * bv[size_t(k * 2 + j)];
      const double rounded = from_vector(std::vector<double>{acc}, {1}, kBFloat16).item<double>();
      // Within one bfloat16 ulp of the exact product (accumulation order may differ).
      EXPECT_NEAR(got[size_t(i * 2 + j)], rounded, std::abs(rounded) * std::ldexp(1.0, -7) + 1e-12);
    }
  }
}

TEST(Autocast, GradientsReachFloat32ParametersAsFloat32) {
  manual_seed(3);
  nn::Linear l1(4, 8), l2(8, 3);
  const Tensor x = vals({5, 4}, 5);
  const Tensor target = from_vector(std::vector<int64_t>{0, 2, 1, 1, 0});
  // Reference in float32.
  Tensor ref_loss = cross_entropy(l2.forward(gelu(l1.forward(x))), target);
  ref_loss.backward();
  std::vector<std::vector<double>> ref;
  for (const Tensor& p : {l1.weight, l1.bias, l2.weight, l2.bias}) ref.push_back(p.grad().to_vector<double>());
  l1.zero_grad();
  l2.zero_grad();

  Tensor loss;
  {
    AutocastGuard ac(kBFloat16);
    Tensor h = l1.forward(x);
    EXPECT_EQ(h.dtype(), kBFloat16);
    Tensor logits = l2.forward(gelu(h));
    EXPECT_EQ(logits.dtype(), kBFloat16);
    loss = cross_entropy(logits, target);
    EXPECT_EQ(loss.dtype(), kFloat32);
  }
  EXPECT_NEAR(loss.item<double>(), ref_loss.item<double>(), 2e-2);
  loss.backward();  // outside the autocast scope, like PyTorch's recipe
  size_t k = 0;
  for (const Tensor& p : {l1.weight, l1.bias, l2.weight, l2.bias}) {
    const Tensor g = p.grad();
    ASSERT_TRUE(g.defined());
    EXPECT_EQ(g.dtype(), kFloat32);
    EXPECT_EQ(g.shape(), p.shape());
    EXPECT_TRUE(testing::allclose(g, ref[k], 1e-2, 5e-2)) << "parameter " << k;
    ++k;
  }
  // An optimizer step in float32 works on these grads.
  optim::AdamW opt(std::vector<Tensor>{l1.weight, l1.bias, l2.weight, l2.bias}, optim::AdamWOptions(0.01));
  opt.step();
  EXPECT_EQ(l1.weight.dtype(), kFloat32);
}

// REFERENCES case 3: ten stacked Linear(10, 10), input 10x10, under bf16
// autocast. Values from torch.autocast("cpu", dtype=torch.bfloat16) in
// PyTorch 1.13 (tests/eager/nn_reference.py); they equal bfloat16 roundings
// of float32 layer outputs, so allow one bfloat16 ulp per element.
TEST(Autocast, ReferencesCase3TenStackedLinearsOutputBFloat16) {
  nn::Sequential model;
  for (int l = 0; l < 10; ++l) {
    auto lin = std::make_shared<nn::Linear>(10, 10);
    lin->load_state_dict({{"weight", vals({10, 10}, 3 + l, 0.4)}, {"bias", vals({10}, 5 + l, 0.1)}});
    model.push_back(lin);
  }
  const Tensor x = vals({10, 10}, 7);
  Tensor y;
  {
    AutocastGuard ac(kBFloat16);
    y = model.forward(x);
  }
  EXPECT_EQ(y.dtype(), kBFloat16);
  EXPECT_EQ(y.shape(), (Shape{10, 10}));
  const std::vector<double> expected{
      2.9375, 12.375, 10.3125, -0.98046875, 13.75, 22.625, 25.125, 18.125, 22.375, 34.5,
      9.0, 36.75, 30.5, -2.671875, 41.0, 67.5, 74.5, 54.0, 66.5, 102.5,
      72.5, 294.0, 243.0, -20.75, 328.0, 536.0, 592.0, 430.0, 532.0, 816.0,
      94.0, 378.0, 312.0, -26.5, 422.0, 692.0, 764.0, 556.0, 684.0, 1056.0,
      107.5, 434.0, 360.0, -30.5, 486.0, 792.0, 876.0, 636.0, 784.0, 1208.0,
      130.0, 524.0, 436.0, -37.0, 588.0, 960.0, 1064.0, 772.0, 952.0, 1464.0,
      139.0, 560.0, 466.0, -39.75, 628.0, 1024.0, 1136.0, 824.0, 1016.0, 1568.0,
      211.0, 856.0, 708.0, -60.25, 956.0, 1560.0, 1728.0, 1256.0, 1544.0, 2384.0,
      228.0, 920.0, 764.0, -65.5, 1032.0, 1688.0, 1864.0, 1352.0, 1664.0, 2560.0,
      198.0, 800.0, 660.0, -56.5, 892.0, 1464.0, 1616.0, 1168.0, 1448.0, 2224.0};
  EXPECT_TRUE(testing::allclose(y, expected, 1e-6, std::ldexp(1.0, -7)));
  // Without autocast the same model stays in float32.
  EXPECT_EQ(model.forward(x).dtype(), kFloat32);
}

}  // namespace
}  // namespace dtr
