// Autocast (torch.autocast) with nn modules: under CPU autocast to bfloat16
// linear / matmul run in bfloat16, cross_entropy in float32, and softmax,
// log_softmax and layer_norm in their input's dtype (PyTorch 2.x's CPU
// lists, Note [autocast lists]); gradients reach float32 parameters as
// float32. Autocast is per device type, and recorded and replayed per device
// type. REFERENCES case 3 as a value test against PyTorch 1.13.
#include <cmath>

#include "dtr/dtr.h"
#include "eager/lineage_record.h"
#include "tests/second_device.h"
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

TEST(Autocast, CpuListsLowerPrecisionFloat32AndInputDTypeOps) {
  const Tensor x = vals({3, 4}, 5), w = vals({2, 4}, 7), b = vals({2}, 3);
  AutocastGuard ac(kCPU, kBFloat16);
  EXPECT_EQ(linear(x, w, b).dtype(), kBFloat16);
  EXPECT_EQ(matmul(x, w.t()).dtype(), kBFloat16);
  nn::Linear lin(4, 2);
  EXPECT_EQ(lin->forward(x).dtype(), kBFloat16);
  EXPECT_EQ(lin->weight.dtype(), kFloat32);  // parameters are not converted

  // On neither of PyTorch's CPU lists: softmax, log_softmax and the norms
  // run in their input's dtype; nn::LayerNorm's float32 parameters with a
  // bfloat16 input compute in float32 and return bfloat16 (mixed type).
  const Tensor h = linear(x, w, b);
  const Tensor s = softmax(h, 1), ls = log_softmax(h, 1);
  EXPECT_EQ(s.dtype(), kBFloat16);
  EXPECT_EQ(ls.dtype(), kBFloat16);
  nn::LayerNorm ln(nn::LayerNormOptions({2}));
  EXPECT_EQ(ln->forward(h).dtype(), kBFloat16);
  EXPECT_EQ(layer_norm(h, {2}).dtype(), kBFloat16);
  EXPECT_EQ(exp(h).dtype(), kBFloat16);
  // The losses are on the CPU float32 list.
  const Tensor target = from_vector(std::vector<int64_t>{0, 1, 1});
  EXPECT_EQ(cross_entropy(h, target).dtype(), kFloat32);
  EXPECT_EQ(nll_loss(ls, target).dtype(), kFloat32);
  EXPECT_EQ(mse_loss(h, zeros({3, 2})).dtype(), kFloat32);

  // Values: softmax of the bfloat16 values, within a bfloat16 rounding.
  const std::vector<double> hv = h.to_vector<double>();
  for (int r = 0; r < 3; ++r) {
    const double a = hv[size_t(2 * r)], c = hv[size_t(2 * r + 1)];
    const double m = std::max(a, c);
    const double lse = m + std::log(std::exp(a - m) + std::exp(c - m));
    EXPECT_NEAR(s.to_vector<double>()[size_t(2 * r)], std::exp(a - lse), std::ldexp(1.0, -8));
    EXPECT_NEAR(ls.to_vector<double>()[size_t(2 * r + 1)], c - lse,
                std::abs(c - lse) * std::ldexp(1.0, -8) + 1e-6);
  }
}

TEST(Autocast, RowsCarryTheCpuAndTheCudaListsPolicies) {
  using P = AutocastPolicy;
  const auto policies = [](const char* name) {
    return std::make_pair(op(name).autocast_policy(kCPU), op(name).autocast_policy(kCUDA));
  };
  for (const char* name :
       {"matmul", "linear", "conv2d", "conv_transpose2d", "scaled_dot_product_attention"}) {
    EXPECT_EQ(policies(name), std::make_pair(P::kLowerPrecision, P::kLowerPrecision)) << name;
  }
  for (const char* name : {"cross_entropy", "nll_loss", "mse_loss"})
    EXPECT_EQ(policies(name), std::make_pair(P::kFloat32, P::kFloat32)) << name;
  EXPECT_EQ(policies("cat"), std::make_pair(P::kPromote, P::kPromote));
  for (const char* name : {"softmax", "log_softmax", "layer_norm", "rms_norm", "group_norm",
                           "batch_norm", "batch_norm_inference", "exp", "log", "rsqrt",
                           "reciprocal", "pow", "pow_scalar"}) {
    EXPECT_EQ(policies(name), std::make_pair(P::kNone, P::kFloat32)) << name;
  }
  EXPECT_EQ(policies("reflection_pad"), std::make_pair(P::kFloat32, P::kNone));
  for (const char* name : {"add", "mul", "relu", "gelu", "sum", "embedding", "max_pool2d"})
    EXPECT_EQ(policies(name), std::make_pair(P::kNone, P::kNone)) << name;
  // The privateuseone device type follows the CUDA lists.
  EXPECT_EQ(op("softmax").autocast_policy(kPrivateUse1), P::kFloat32);
}

// torch.autocast(device_type): a scope on one device type leaves ops on the
// others alone, and each device type follows its own lists.
TEST(Autocast, EachDeviceTypeHasItsOwnState) {
  const Device dev = testing::second_device();  // privateuseone
  const Tensor xc = vals({3, 4}, 5), wc = vals({2, 4}, 7);
  const Tensor xd = xc.to(dev), wd = wc.to(dev);
  EXPECT_EQ(autocast_states(), AutocastStates());
  EXPECT_EQ(autocast_state(kCPU), (AutocastState{false, kBFloat16}));  // PyTorch's defaults
  EXPECT_EQ(autocast_state(kCUDA), (AutocastState{false, kFloat16}));
  {
    AutocastGuard cuda(kCUDA, kFloat16);  // no CUDA tensor here: nothing changes
    EXPECT_EQ(matmul(xc, wc.t()).dtype(), kFloat32);
    EXPECT_EQ(matmul(xd, wd.t()).dtype(), kFloat32);
    EXPECT_FALSE(autocast_state(kCPU).enabled);
  }
  {
    AutocastGuard other(kPrivateUse1, kBFloat16);
    EXPECT_EQ(matmul(xc, wc.t()).dtype(), kFloat32);  // the CPU's ops are untouched
    const Tensor hd = matmul(xd, wd.t());
    EXPECT_EQ(hd.dtype(), kBFloat16);
    EXPECT_EQ(softmax(hd, 1).dtype(), kFloat32);  // the CUDA lists
    {
      AutocastGuard cpu(kCPU, kBFloat16);
      const Tensor hc = matmul(xc, wc.t());
      EXPECT_EQ(hc.dtype(), kBFloat16);
      EXPECT_EQ(softmax(hc, 1).dtype(), kBFloat16);  // the CPU lists
      EXPECT_EQ(matmul(xd, wd.t()).dtype(), kBFloat16);
    }
    EXPECT_FALSE(autocast_state(kCPU).enabled);
    EXPECT_TRUE(autocast_state(kPrivateUse1).enabled);
  }
  EXPECT_EQ(autocast_states(), AutocastStates());
  // The form from before autocast was per device type sets every one.
  {
    AutocastGuard all(kBFloat16);
    EXPECT_EQ(matmul(xc, wc.t()).dtype(), kBFloat16);
    EXPECT_EQ(matmul(xd, wd.t()).dtype(), kBFloat16);
    EXPECT_EQ(autocast_state(kCUDA), (AutocastState{true, kBFloat16}));
  }
  EXPECT_THROW(AutocastGuard(kCUDA, kFloat32), ValueError);
  EXPECT_THROW(set_autocast_state(kCPU, AutocastState{true, kFloat64}), ValueError);
  EXPECT_EQ(autocast_states(), AutocastStates());
}

// A checkpoint region's recomputation runs under every device type's state
// of its forward: a forward under autocast on another device type only (the
// CPU's ops in float32), recomputed inside a CPU autocast scope, gives
// bitwise the gradients of a run without checkpointing.
TEST(Autocast, RecomputationRestoresEveryDeviceTypesState) {
  auto run = [](bool use_checkpoint) {
    manual_seed(5);
    Tensor w = randn({6, 6}).requires_grad_();
    const Tensor x = randn({4, 6});
    auto fn = [&w](const Tensor& t) { return softmax(matmul(t, w), 1); };
    Tensor y;
    {
      AutocastGuard other(kPrivateUse1, kFloat16);
      y = use_checkpoint ? checkpoint(fn, x) : fn(x);
      if (!use_checkpoint) {  // the op records every device type's state
        EXPECT_EQ(lineage_of(y)->state.autocast[kPrivateUse1], (AutocastState{true, kFloat16}));
        EXPECT_FALSE(lineage_of(y)->state.autocast[kCPU].enabled);
      }
    }
    EXPECT_EQ(y.dtype(), kFloat32);
    {
      AutocastGuard cpu(kCPU, kBFloat16);  // would make the recomputed matmul bfloat16
      sum(y).backward();
    }
    return std::vector<Tensor>{y.detach(), w.grad()};
  };
  const auto want = run(false);
  const auto got = run(true);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(testing::bitwise_equal(got[i], want[i])) << i;
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
  Tensor ref_loss = cross_entropy(l2->forward(gelu(l1->forward(x))), target);
  ref_loss.backward();
  std::vector<std::vector<double>> ref;
  for (const Tensor& p : {l1->weight, l1->bias, l2->weight, l2->bias}) ref.push_back(p.grad().to_vector<double>());
  l1->zero_grad();
  l2->zero_grad();

  Tensor loss;
  {
    AutocastGuard ac(kBFloat16);
    Tensor h = l1->forward(x);
    EXPECT_EQ(h.dtype(), kBFloat16);
    Tensor logits = l2->forward(gelu(h));
    EXPECT_EQ(logits.dtype(), kBFloat16);
    loss = cross_entropy(logits, target);
    EXPECT_EQ(loss.dtype(), kFloat32);
  }
  EXPECT_NEAR(loss.item<double>(), ref_loss.item<double>(), 2e-2);
  loss.backward();  // outside the autocast scope, like PyTorch's recipe
  size_t k = 0;
  for (const Tensor& p : {l1->weight, l1->bias, l2->weight, l2->bias}) {
    const Tensor g = p.grad();
    ASSERT_TRUE(g.defined());
    EXPECT_EQ(g.dtype(), kFloat32);
    EXPECT_EQ(g.shape(), p.shape());
    EXPECT_TRUE(testing::allclose(g, ref[k], 1e-2, 5e-2)) << "parameter " << k;
    ++k;
  }
  // An optimizer step in float32 works on these grads.
  optim::AdamW opt(std::vector<Tensor>{l1->weight, l1->bias, l2->weight, l2->bias}, optim::AdamWOptions(0.01));
  opt.step();
  EXPECT_EQ(l1->weight.dtype(), kFloat32);
}

// REFERENCES case 3: ten stacked Linear(10, 10), input 10x10, under bf16
// autocast. Values from torch.autocast("cpu", dtype=torch.bfloat16) in
// PyTorch 1.13 (tests/eager/nn_reference.py); they equal bfloat16 roundings
// of float32 layer outputs, so allow one bfloat16 ulp per element.
TEST(Autocast, ReferencesCase3TenStackedLinearsOutputBFloat16) {
  nn::Sequential model;
  for (int l = 0; l < 10; ++l) {
    auto lin = nn::Linear(10, 10);
    lin->load_state_dict({{"weight", vals({10, 10}, 3 + l, 0.4)}, {"bias", vals({10}, 5 + l, 0.1)}});
    model->push_back(lin);
  }
  const Tensor x = vals({10, 10}, 7);
  Tensor y;
  {
    AutocastGuard ac(kBFloat16);
    y = model->forward(x);
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
  EXPECT_EQ(model->forward(x).dtype(), kFloat32);
}

}  // namespace
}  // namespace dtr
