// libtorch's top-level API and Tensor idioms, written as a libtorch program
// writes them (`namespace torch = dtr;`): Tensor methods (mm, bmm, item() as
// a Scalar, options(), to(...), min/max forms, uniform_/normal_, ...),
// torch::tensor, torch::Reduction and the kMean/kSum/kNone tags, the loss
// functions with libtorch's signatures (values from PyTorch 1.13, computed in
// float64 by the python line above each block), torch::cuda, and
// torch::save / torch::load of tensors, tensor lists, modules (by pointer and
// by holder) and optimizers.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "dtr/dtr.h"
#include "tests/testing.h"

namespace torch = dtr;

namespace dtr {
namespace {

using testing::allclose;
using testing::throws_with;

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "/libtorch_api_" + name; }

// ---- Scalar and item() -----------------------------------------------------------

TEST(LibtorchApi, ItemIsAScalarWithLibtorchConversions) {
  const torch::Tensor f = torch::tensor({2.75}, torch::kFloat64).sum();
  const torch::Scalar s = f.item();
  EXPECT_TRUE(s.isFloatingPoint());
  EXPECT_FALSE(s.isIntegral(true));
  EXPECT_EQ(s.toDouble(), 2.75);
  EXPECT_EQ(s.toFloat(), 2.75f);
  EXPECT_EQ(s.toLong(), 2);
  EXPECT_EQ(s.toInt(), 2);
  EXPECT_EQ(s.to<double>(), 2.75);
  EXPECT_EQ(s.to<int64_t>(), 2);
  EXPECT_TRUE(s.equal(2.75));

  const torch::Scalar i = torch::tensor({7, 8, 9}).sum().item();
  EXPECT_TRUE(i.isIntegral(false));
  EXPECT_EQ(i.toLong(), 24);
  EXPECT_EQ(i.to<int>(), 24);
  EXPECT_EQ((-i).toLong(), -24);

  const torch::Scalar b = torch::tensor(true).item();
  EXPECT_TRUE(b.isBoolean());
  EXPECT_TRUE(b.isIntegral(true));
  EXPECT_FALSE(b.isIntegral(false));
  EXPECT_TRUE(b.toBool());

  std::ostringstream out;
  out << s << " " << i << " " << b;
  EXPECT_EQ(out.str(), "2.75 24 true");

  // item<T>() as before, and an item() Scalar in arithmetic with a tensor
  // (the regression example's `x.mm(W) + b.item()`).
  EXPECT_EQ(torch::tensor({1, 0, 1}).eq(torch::tensor({1, 1, 1})).sum().item<int64_t>(), 2);
  const torch::Tensor y = torch::ones({2}) + torch::tensor({0.5}).sum().item();
  EXPECT_TRUE(allclose(y, {1.5, 1.5}));
  EXPECT_TRUE(throws_with<ValueError>([] { (void)torch::ones({2}).item(); }, {"2 elements"}));
}

TEST(LibtorchApi, TensorFactoryPicksLibtorchsDtypes) {
  EXPECT_EQ(torch::tensor({0.1, 1.0, 0.0001}).dtype(), torch::kFloat32);
  EXPECT_EQ(torch::tensor({0.1, 1.0}, torch::kFloat64).dtype(), torch::kFloat64);
  EXPECT_EQ(torch::tensor({1, 2, 3}).dtype(), torch::kLong);
  EXPECT_EQ(torch::tensor({true, false}).dtype(), torch::kBool);
  EXPECT_EQ(torch::tensor(3.5).dim(), 0);
  const torch::Tensor m = torch::tensor({{1, 2, 3}, {4, 5, 6}}, torch::kFloat);
  EXPECT_EQ(m.sizes(), (Shape{2, 3}));
  EXPECT_TRUE(allclose(m, {1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(torch::tensor({1.0, 2.0}, torch::requires_grad()).requires_grad());
  EXPECT_TRUE(throws_with<ValueError>([] { (void)torch::tensor({{1, 2}, {3}}); }, {"equal lengths"}));
}

// ---- metadata, options, conversions -------------------------------------------------

TEST(LibtorchApi, MetadataAndOptions) {
  const torch::Tensor x = torch::zeros({2, 3, 4}, torch::TensorOptions().dtype(torch::kFloat64));
  EXPECT_EQ(x.dim(), 3);
  EXPECT_EQ(x.numel(), 24);
  EXPECT_EQ(x.size(-1), 4);
  EXPECT_EQ(x.size(0), 2);
  EXPECT_EQ(x.sizes()[1], 3);
  EXPECT_TRUE(x.dtype() == torch::kFloat64);
  EXPECT_EQ(x.scalar_type(), torch::kDouble);
  EXPECT_FALSE(x.is_cuda());
  EXPECT_TRUE(x.is_cpu());
  EXPECT_EQ(x.device(), torch::Device(torch::kCPU));
  const torch::TensorOptions o = x.options();
  EXPECT_EQ(o.dtype(), torch::kFloat64);
  EXPECT_EQ(o.device(), torch::Device("cpu"));
  EXPECT_EQ(torch::ones({2}, x.options()).dtype(), torch::kFloat64);
  EXPECT_EQ(torch::empty(5, torch::kCPU).sizes(), (Shape{5}));  // a single int as the shape
  EXPECT_EQ(torch::randn({2, 2}, torch::dtype(torch::kFloat64)).dtype(), torch::kFloat64);
  EXPECT_TRUE(throws_with<IndexError>([&] { (void)x.size(3); }, {}));

  EXPECT_EQ(x.to(torch::kFloat).dtype(), torch::kFloat32);
  EXPECT_EQ(x.to(torch::kCPU, torch::kInt).dtype(), torch::kInt32);
  EXPECT_EQ(x.to(torch::TensorOptions().dtype(torch::kLong)).dtype(), torch::kInt64);
  EXPECT_EQ(x.to(torch::tensor({1})).dtype(), torch::kInt64);
  EXPECT_EQ(x.to(torch::Device(torch::kCPU), /*non_blocking=*/true).impl(), x.impl());
  EXPECT_NE(x.to(torch::kDouble, false, /*copy=*/true).impl(), x.impl());
}

TEST(LibtorchApi, CudaWithoutADeviceIsADeviceError) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(torch::cuda::device_count(), 0u);
  EXPECT_TRUE(throws_with<DeviceError>([] { (void)torch::ones({2}).cuda(); }, {"cuda"}));
  EXPECT_TRUE(throws_with<DeviceError>([] { (void)torch::ones({2}).to(torch::kCUDA); }, {"cuda"}));
  EXPECT_TRUE(throws_with<DeviceError>([] { torch::cuda::synchronize(); }, {"cuda:0"}));
  // Seeding CUDA without a device changes nothing, as in libtorch.
  torch::manual_seed(5);
  const std::vector<float> a = torch::rand({4}).to_vector<float>();
  torch::manual_seed(5);
  torch::cuda::manual_seed(99);
  torch::cuda::manual_seed_all(99);
  EXPECT_EQ(torch::rand({4}).to_vector<float>(), a);
}

TEST(LibtorchApi, CudaCallsAgreeWithTheBackendRegistry) {
  const Backend* b = find_backend(kCUDA);
  const size_t present = b == nullptr ? 0 : size_t(b->device_count());
  EXPECT_EQ(torch::cuda::device_count(), present);
  EXPECT_EQ(torch::cuda::is_available(), present > 0);
  if (present > 0) {
    torch::cuda::synchronize();
    const torch::Tensor y = torch::ones({3}).cuda();
    EXPECT_TRUE(y.is_cuda());
    EXPECT_EQ(y.device(), torch::Device("cuda:0"));
    EXPECT_TRUE(allclose(y.cpu(), {1, 1, 1}));
    EXPECT_TRUE(throws_with<DeviceError>([&] { torch::cuda::synchronize(int64_t(present)); }, {}));
  }
}

// ---- linear algebra and reductions -----------------------------------------------------

TEST(LibtorchApi, MmBmmAndTheirShapeErrors) {
  const torch::Tensor a = torch::arange(6, torch::kFloat).view({2, 3});
  const torch::Tensor b = torch::arange(6, torch::kFloat).view({3, 2});
  // python: (torch.arange(6.).view(2,3) @ torch.arange(6.).view(3,2)).flatten().tolist()
  EXPECT_TRUE(allclose(a.mm(b), {10, 13, 28, 40}));
  EXPECT_TRUE(allclose(torch::mm(a, b), {10, 13, 28, 40}));
  const torch::Tensor ba = a.unsqueeze(0).expand({2, 2, 3}).contiguous();
  const torch::Tensor bb = b.unsqueeze(0).expand({2, 3, 2}).contiguous();
  EXPECT_EQ(ba.bmm(bb).sizes(), (Shape{2, 2, 2}));
  EXPECT_TRUE(allclose(torch::bmm(ba, bb), {10, 13, 28, 40, 10, 13, 28, 40}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)a.mm(a); }, {"mm", "[2, 3]"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)a.mm(b.view({6})); }, {"mm"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)ba.bmm(b); }, {"bmm"}));
  EXPECT_TRUE(allclose(a.pow(2).sum(), {55}));
  EXPECT_TRUE(allclose(torch::pow(a, a).view({-1}).slice(0, 0, 3), {1, 1, 4}));
}

TEST(LibtorchApi, MinMaxArgmaxForms) {
  const torch::Tensor x = torch::tensor({{3.0, -1.0, 2.0}, {0.5, 4.0, -2.0}});
  EXPECT_EQ(x.max().item<float>(), 4.0f);
  EXPECT_EQ(x.min().item<float>(), -2.0f);
  EXPECT_EQ(torch::min(x).item<float>(), -2.0f);
  auto [vals, idx] = x.min(1);
  EXPECT_TRUE(allclose(vals, {-1.0, -2.0}));
  EXPECT_EQ(idx.to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
  torch::Tensor v, i;
  std::tie(v, i) = torch::min(x, 0, /*keepdim=*/true);
  EXPECT_EQ(v.sizes(), (Shape{1, 3}));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(std::get<1>(x.max(-1)).to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(x.argmax().item<int64_t>(), 4);
  EXPECT_EQ(x.argmin().item<int64_t>(), 5);
  EXPECT_EQ(x.argmax(1).to_vector<int64_t>(), (std::vector<int64_t>{0, 1}));
  EXPECT_TRUE(allclose(x.max(torch::zeros({2, 3})), {3, 0, 2, 0.5, 4, 0}));
  EXPECT_TRUE(allclose(torch::min(x, torch::zeros({2, 3})), {0, -1, 0, 0, 0, -2}));
  EXPECT_TRUE(throws_with<ValueError>([] { (void)torch::zeros({0}).argmax(); }, {"non-empty"}));

  // min(dim)'s gradient reaches the selected index only.
  const torch::Tensor g = torch::tensor({{1.0, 1.0, 3.0}}, torch::requires_grad());
  std::get<0>(g.min(1)).sum().backward();
  EXPECT_TRUE(allclose(g.grad(), {1, 0, 0}));
}

TEST(LibtorchApi, ElementwiseAndInPlaceIdioms) {
  // python: torch.nn.functional.leaky_relu(torch.tensor([-2., 0., 3.], dtype=torch.float64), 0.2).tolist()
  EXPECT_TRUE(allclose(torch::leaky_relu(torch::tensor({-2.0, 0.0, 3.0}), 0.2), {-0.4, 0.0, 3.0}));
  EXPECT_TRUE(allclose(torch::tensor({-1.0, 5.0}).clamp_min(0), {0, 5}));
  EXPECT_TRUE(allclose(torch::tensor({-1.0, 5.0}).clamp_max(1), {-1, 1}));
  EXPECT_TRUE(allclose(torch::tensor({1.0, 2.0}).mul(3), {3, 6}));
  EXPECT_TRUE(allclose(torch::tensor({1.0, 2.0}).add(1, 2), {3, 4}));
  EXPECT_TRUE(allclose(torch::tensor({1.0, 2.0}).sub(1), {0, 1}));
  EXPECT_TRUE(allclose(torch::tensor({1.0, 2.0}).div(2), {0.5, 1}));
  const torch::Tensor base = torch::zeros({2, 3});
  EXPECT_EQ(torch::ones({3}).expand_as(base).sizes(), base.sizes());
  EXPECT_EQ(torch::ones({6}).view_as(base).sizes(), base.sizes());
  EXPECT_EQ(torch::ones({3, 2}).reshape_as(base).sizes(), base.sizes());

  torch::manual_seed(7);
  torch::Tensor u = torch::empty({1000}).uniform_(0.8, 1.0);
  EXPECT_GE(u.min().item<double>(), 0.8);
  EXPECT_LE(u.max().item<double>(), 1.0);
  torch::Tensor n = torch::empty({4000}, torch::kFloat64).normal_(3.0, 0.5);
  EXPECT_NEAR(n.mean().item<double>(), 3.0, 0.05);
  EXPECT_NEAR(std::sqrt(n.var().item<double>()), 0.5, 0.05);
  torch::manual_seed(7);
  EXPECT_EQ(torch::empty({1000}).uniform_(0.8, 1.0).to_vector<float>(), u.to_vector<float>());
  EXPECT_TRUE(throws_with<TypeError>([] { (void)torch::zeros({2}, torch::kLong).uniform_(); }, {}));
  EXPECT_TRUE(throws_with<ValueError>([] { (void)torch::zeros({2}).uniform_(1, 0); }, {"from <= to"}));
  EXPECT_TRUE(throws_with<ValueError>([] { (void)torch::zeros({2}).normal_(0, -1); }, {"std"}));
}

// ---- Reduction -----------------------------------------------------------------------

TEST(LibtorchApi, ReductionSpellingsAgree) {
  EXPECT_EQ(int64_t(torch::Reduction::None), 0);
  EXPECT_EQ(int64_t(torch::Reduction::Mean), 1);
  EXPECT_EQ(int64_t(torch::Reduction::Sum), 2);
  const torch::Tensor a = torch::tensor({1.0, 2.0, 4.0});
  const torch::Tensor b = torch::zeros({3});
  for (torch::LossReduction r : {torch::LossReduction(torch::kSum), torch::LossReduction(torch::Reduction::Sum),
                                 torch::LossReduction("sum"), torch::LossReduction(torch::reduction_t(torch::kSum)),
                                 torch::LossReduction(int64_t(2))}) {
    EXPECT_EQ(r.value(), torch::Reduction::Sum);
    EXPECT_TRUE(allclose(torch::mse_loss(a, b, r), {21}));
  }
  EXPECT_TRUE(allclose(torch::mse_loss(a, b, torch::kMean), {7}));
  EXPECT_TRUE(allclose(torch::l1_loss(a, b, torch::kNone), {1, 2, 4}));
  EXPECT_EQ(torch::LossReduction(torch::kNone).name(), "none");
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)torch::mse_loss(a, b, 3); }, {"3", "reduction"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)torch::l1_loss(a, b, "avg"); }, {"'avg'", "reduction"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)torch::nll_loss(a.view({1, 3}), torch::tensor({0}), {}, -1); },
                                      {"reduction"}));
}

// ---- loss functions: PyTorch 1.13 values -------------------------------------------------

// x, t, ti (one target ignored) and w as in the python lines:
//   x = torch.tensor([[0.2,-1.3,0.7,1.1],[-0.4,0.9,0.05,-2.0],[1.5,0.3,-0.8,0.6]], dtype=torch.float64)
//   t = torch.tensor([2,1,3]); ti = torch.tensor([2,-100,3]); w = torch.tensor([0.5,2.0,1.0,1.5], dtype=torch.float64)
struct ClassCase {
  torch::Tensor x = torch::tensor({{0.2, -1.3, 0.7, 1.1}, {-0.4, 0.9, 0.05, -2.0}, {1.5, 0.3, -0.8, 0.6}},
                                  torch::kFloat64);
  torch::Tensor t = torch::tensor({2, 1, 3});
  torch::Tensor ti = torch::tensor({2, -100, 3});
  torch::Tensor w = torch::tensor({0.5, 2.0, 1.0, 1.5}, torch::kFloat64);
  torch::Tensor lp = torch::log_softmax(x, 1);
};

TEST(LibtorchApi, NllLossWithWeightsMatchesPyTorch) {
  const ClassCase c;
  // python: F.nll_loss(F.log_softmax(x,1), t, weight=w[, reduction=...]); ti: ignore_index -100
  EXPECT_TRUE(allclose(torch::nll_loss(c.lp, c.t, c.w), {1.008195177681579}, 1e-12, 1e-12));
  EXPECT_TRUE(allclose(torch::nll_loss(c.lp, c.t, c.w, torch::Reduction::Sum), {4.536878299567105}, 1e-12, 1e-12));
  EXPECT_TRUE(allclose(torch::nll_loss(c.lp, c.t, c.w, torch::Reduction::None),
                       {1.1736240981348636, 1.1249034628747385, 2.2383507385575023}, 1e-12, 1e-12));
  EXPECT_TRUE(allclose(torch::nll_loss(c.lp, c.ti, c.w), {1.3647899346769463}, 1e-12, 1e-12));
  // The mnist example's form: weight {}, then the reduction.
  EXPECT_TRUE(allclose(torch::nll_loss(c.lp, c.t, {}, torch::Reduction::Sum),
                       {torch::nll_loss(c.lp, c.t).item<double>() * 3}, 1e-12, 1e-12));

  EXPECT_TRUE(throws_with<ValueError>([&] { (void)torch::nll_loss(c.lp, c.t, torch::ones({3}, torch::kFloat64)); },
                                      {"weight", "4"}));
  EXPECT_TRUE(throws_with<TypeError>([&] { (void)torch::nll_loss(c.lp, c.t, torch::ones({4})); }, {"weight"}));
  EXPECT_TRUE(throws_with<IndexError>([&] { (void)torch::nll_loss(c.lp, torch::tensor({0, 4, 1}), c.w); },
                                      {"4", "out of bounds"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)torch::nll_loss(c.lp, torch::tensor({0, 1}), c.w); },
                                      {"target of shape"}));
}

TEST(LibtorchApi, CrossEntropyWithWeightsAndLabelSmoothingMatchesPyTorch) {
  const ClassCase c;
  // python: F.cross_entropy(x, t, weight=w, label_smoothing=0.1)
  EXPECT_TRUE(allclose(torch::cross_entropy_loss(c.x, c.t, c.w, torch::kMean, -100, 0.1), {1.0584398170044553},
                       1e-12, 1e-12));
  // python: F.cross_entropy(x, ti, weight=w, label_smoothing=0.1)
  EXPECT_TRUE(allclose(torch::cross_entropy(c.x, c.ti, c.w, torch::kMean, -100, 0.1), {1.413603837401245}, 1e-12,
                       1e-12));
  // python: F.cross_entropy(x, ti, label_smoothing=0.2)
  EXPECT_TRUE(allclose(torch::cross_entropy(c.x, c.ti, {}, torch::kMean, -100, 0.2), {1.4054289619199325}, 1e-12,
                       1e-12));
  // python: F.cross_entropy(x, t, label_smoothing=0.2, reduction='sum')
  EXPECT_TRUE(allclose(torch::cross_entropy(c.x, c.t, {}, torch::kSum, -100, 0.2), {3.625809655277235}, 1e-12,
                       1e-12));
  // python: F.cross_entropy(x, ti, label_smoothing=0.2, reduction='none')
  EXPECT_TRUE(allclose(torch::cross_entropy(c.x, c.ti, {}, torch::kNone, -100, 0.2),
                       {1.2786240981348636, 0.0, 1.5322338257050017}, 1e-12, 1e-12));
  // Without weight or smoothing it is the fused row, equal to nll_loss(log_softmax).
  EXPECT_TRUE(allclose(torch::cross_entropy_loss(c.x, c.t), {torch::nll_loss(c.lp, c.t).item<double>()}, 1e-12,
                       1e-12));

  // python: xr = x.clone().requires_grad_(); F.cross_entropy(xr, ti, weight=w, label_smoothing=0.1).backward(); xr.grad
  const torch::Tensor xr = c.x.clone().requires_grad_();
  torch::cross_entropy(xr, c.ti, c.w, torch::kMean, -100, 0.1).backward();
  EXPECT_TRUE(allclose(xr.grad(),
                       {0.07190209055890633, -0.0028408242178421814, -0.24320988753422365, 0.17414862119315952, 0.0,
                        0.0, 0.0, 0.0, 0.32132333376266864, 0.07828669934120948, 0.022716800122815732,
                        -0.4223268332266939},
                       1e-12, 1e-12));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)torch::cross_entropy(c.x, c.t, {}, torch::kMean, -100, 1.5); },
                                      {"label_smoothing"}));
}

TEST(LibtorchApi, CrossEntropyWithProbabilityTargetsMatchesPyTorch) {
  const ClassCase c;
  // p = torch.softmax(torch.tensor([[1.0,0.0,-1.0,0.5],[0.2,0.2,0.2,0.9],[-1.0,2.0,0.0,0.0]], dtype=torch.float64), 1)
  const torch::Tensor p = torch::softmax(
      torch::tensor({{1.0, 0.0, -1.0, 0.5}, {0.2, 0.2, 0.2, 0.9}, {-1.0, 2.0, 0.0, 0.0}}, torch::kFloat64), 1);
  // python: F.cross_entropy(x, p)
  EXPECT_TRUE(allclose(torch::cross_entropy(c.x, p), {1.8764643531844332}, 1e-12, 1e-12));
  // python: F.cross_entropy(x, p, weight=w, label_smoothing=0.1, reduction='sum')
  EXPECT_TRUE(allclose(torch::cross_entropy(c.x, p, c.w, torch::kSum, -100, 0.1), {7.827337490143782}, 1e-12,
                       1e-12));
  // python: F.cross_entropy(x, p, reduction='none')
  EXPECT_TRUE(allclose(torch::cross_entropy(c.x, p, {}, torch::kNone),
                       {1.6443665042720672, 2.1560450572030136, 1.8289814980782186}, 1e-12, 1e-12));
  // A floating target of another shape is read as class indices: TypeError, as PyTorch.
  EXPECT_TRUE(throws_with<TypeError>([&] { (void)torch::cross_entropy(c.x, p.slice(0, 0, 2)); }, {"int64"}));
}

// a, b as in: a = torch.tensor([[0.5,-1.2,2.0],[0.3,-0.7,1.6]], dtype=torch.float64)
//             b = torch.tensor([[0.1,-0.4,0.5],[0.9,-0.6,-1.0]], dtype=torch.float64)
struct PairCase {
  torch::Tensor a = torch::tensor({{0.5, -1.2, 2.0}, {0.3, -0.7, 1.6}}, torch::kFloat64);
  torch::Tensor b = torch::tensor({{0.1, -0.4, 0.5}, {0.9, -0.6, -1.0}}, torch::kFloat64);
};

TEST(LibtorchApi, RegressionLossesMatchPyTorch) {
  const PairCase c;
  // python: F.l1_loss(a, b); F.l1_loss(a, b, reduction='none')
  EXPECT_TRUE(allclose(torch::l1_loss(c.a, c.b), {1.0}, 1e-12, 1e-12));
  EXPECT_TRUE(allclose(torch::l1_loss(c.a, c.b, torch::Reduction::None), {0.4, 0.8, 1.5, 0.6, 0.1, 2.6}, 1e-12,
                       1e-12));
  // python: F.smooth_l1_loss(a, b); F.smooth_l1_loss(a, b, reduction='sum', beta=0.5); ... reduction='none'
  EXPECT_TRUE(allclose(torch::smooth_l1_loss(c.a, c.b), {0.6141666666666666}, 1e-12, 1e-12));
  EXPECT_TRUE(allclose(torch::smooth_l1_loss(c.a, c.b, torch::Reduction::Sum, 0.5), {4.67}, 1e-12, 1e-12));
  EXPECT_TRUE(allclose(torch::smooth_l1_loss(c.a, c.b, torch::kNone), {0.08, 0.32, 1.0, 0.18, 0.005, 2.1}, 1e-12,
                       1e-12));
  EXPECT_TRUE(allclose(torch::smooth_l1_loss(c.a, c.b, torch::kMean, 0.0), {1.0}, 1e-12, 1e-12));
  // python: F.huber_loss(a, b, delta=0.8); F.mse_loss(a, b, reduction='sum')
  EXPECT_TRUE(allclose(torch::huber_loss(c.a, c.b, torch::kMean, 0.8), {0.5375}, 1e-12, 1e-12));
  EXPECT_TRUE(allclose(torch::mse_loss(c.a, c.b, torch::Reduction::Sum), {10.18}, 1e-12, 1e-12));
  // python: ar = a.clone().requires_grad_(); F.smooth_l1_loss(ar, b, beta=0.5).backward(); ar.grad
  const torch::Tensor ar = c.a.clone().requires_grad_(true);
  torch::smooth_l1_loss(ar, c.b, torch::kMean, 0.5).backward();
  EXPECT_TRUE(allclose(ar.grad(),
                       {0.13333333333333333, -0.16666666666666666, 0.16666666666666666, -0.16666666666666666,
                        -0.033333333333333326, 0.16666666666666666},
                       1e-12, 1e-12));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)torch::smooth_l1_loss(c.a, c.b, torch::kMean, -1.0); }, {"beta"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)torch::huber_loss(c.a, c.b, torch::kMean, 0.0); }, {"delta"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)torch::l1_loss(c.a, c.b.view({6})); }, {"same shape", "[2, 3]"}));
  EXPECT_TRUE(throws_with<TypeError>([&] { (void)torch::l1_loss(c.a, c.b.to(torch::kFloat)); }, {"dtype"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { (void)torch::mse_loss(c.a, c.b.view({6})); }, {"same shape"}));
}

TEST(LibtorchApi, BinaryCrossEntropyMatchesPyTorch) {
  const PairCase c;
  // pi = torch.tensor([[0.1,0.7,0.95],[0.4,0.5,0.02]], dtype=torch.float64)
  // tb = torch.tensor([[0,1,1],[0,0.3,1]], dtype=torch.float64); wb = torch.tensor([1.0,2.0,0.5], dtype=torch.float64)
  const torch::Tensor pi = torch::tensor({{0.1, 0.7, 0.95}, {0.4, 0.5, 0.02}}, torch::kFloat64);
  const torch::Tensor tb = torch::tensor({{0.0, 1.0, 1.0}, {0.0, 0.3, 1.0}}, torch::kFloat64);
  const torch::Tensor wb = torch::tensor({1.0, 2.0, 0.5}, torch::kFloat64);
  // python: F.binary_cross_entropy(pi, tb); ... weight=wb, reduction='sum'; ... reduction='none'
  EXPECT_TRUE(allclose(torch::binary_cross_entropy(pi, tb), {0.9382207606230316}, 1e-12, 1e-12));
  EXPECT_TRUE(allclose(torch::binary_cross_entropy(pi, tb, wb, torch::Reduction::Sum), {4.69748853832902}, 1e-12,
                       1e-12));
  EXPECT_TRUE(allclose(torch::binary_cross_entropy(pi, tb, {}, torch::kNone),
                       {0.10536051565782628, 0.35667494393873245, 0.05129329438755058, 0.5108256237659907,
                        0.6931471805599453, 3.912023005428146},
                       1e-12, 1e-12));
  // python: pr = pi.clone().requires_grad_(); F.binary_cross_entropy(pr, tb, weight=wb).backward(); pr.grad
  const torch::Tensor pr = pi.clone().requires_grad_();
  torch::binary_cross_entropy(pr, tb, wb).backward();
  EXPECT_TRUE(allclose(pr.grad(),
                       {0.18518518518518515, -0.4761904761904762, -0.08771929824561403, 0.2777777777777778,
                        0.26666666666666666, -4.166666666666667},
                       1e-10, 1e-10));
  // Probabilities 0 and 1 give the clamped log, -100, as PyTorch.
  EXPECT_TRUE(allclose(torch::binary_cross_entropy(torch::tensor({0.0, 1.0}), torch::tensor({1.0, 0.0}), {},
                                                   torch::kNone),
                       {100, 100}));
  EXPECT_TRUE(throws_with<ValueError>([] { (void)torch::binary_cross_entropy(torch::tensor({1.5}), torch::tensor({1.0})); },
                                      {"between 0 and 1"}));

  // python: F.binary_cross_entropy_with_logits(a, tb)
  EXPECT_TRUE(allclose(torch::binary_cross_entropy_with_logits(c.a, tb), {0.7026215828005724}, 1e-12, 1e-12));
  // python: F.binary_cross_entropy_with_logits(a, tb, weight=wb, pos_weight=torch.tensor([1.5,0.5,2.0], dtype=torch.float64), reduction='sum')
  EXPECT_TRUE(allclose(torch::binary_cross_entropy_with_logits(c.a, tb, wb, torch::tensor({1.5, 0.5, 2.0}, torch::kFloat64),
                                                               torch::kSum),
                       {4.497959731023255}, 1e-12, 1e-12));
  // python: F.binary_cross_entropy_with_logits(torch.tensor([[-200.,0.,150.]]), torch.tensor([[1.,0.5,0.]]), reduction='none')
  EXPECT_TRUE(allclose(torch::binary_cross_entropy_with_logits(torch::tensor({{-200.0, 0.0, 150.0}}, torch::kFloat64),
                                                               torch::tensor({{1.0, 0.5, 0.0}}, torch::kFloat64), {}, {},
                                                               torch::kNone),
                       {200.0, 0.6931471805599453, 150.0}, 1e-12, 1e-12));
}

TEST(LibtorchApi, KlDivMatchesPyTorch) {
  const PairCase c;
  // la = F.log_softmax(a, 1); tk = torch.tensor([[0.2,0.3,0.5],[0.0,0.6,0.4]], dtype=torch.float64)
  const torch::Tensor la = torch::log_softmax(c.a, 1);
  const torch::Tensor tk = torch::tensor({{0.2, 0.3, 0.5}, {0.0, 0.6, 0.4}}, torch::kFloat64);
  // python: F.kl_div(la, tk, reduction='mean'); ... 'sum'; ... 'none'
  EXPECT_TRUE(allclose(torch::kl_div(la, tk), {0.2480628475409986}, 1e-12, 1e-12));
  EXPECT_TRUE(allclose(torch::kl_div(la, tk, torch::kSum), {1.4883770852459917}, 1e-12, 1e-12));
  EXPECT_TRUE(allclose(torch::kl_div(la, tk, torch::kNone),
                       {0.02495164494033958, 0.6690669998429586, -0.22947552171207355, 0.0, 1.2636120032508198,
                        -0.23977804107605255},
                       1e-12, 1e-12));
  // python: F.kl_div(la, torch.log(torch.tensor([[0.2,0.3,0.5],[0.1,0.5,0.4]], dtype=torch.float64)), reduction='sum', log_target=True)
  const torch::Tensor lt = torch::log(torch::tensor({{0.2, 0.3, 0.5}, {0.1, 0.5, 0.4}}, torch::kFloat64));
  EXPECT_TRUE(allclose(torch::kl_div(la, lt, torch::kSum, /*log_target=*/true), {1.1180403599262088}, 1e-12, 1e-12));
}

TEST(LibtorchApi, CompositeLossesRunUnderABudget) {
  // The composite losses are ordinary registry ops: the same values and
  // gradients with a tight budget that evicts and recomputes them.
  auto run = [] {
    torch::manual_seed(11);
    const torch::Tensor x = torch::randn({64, 10}, torch::requires_grad());
    const torch::Tensor t = torch::randint(0, 10, {64});
    const torch::Tensor w = torch::rand({10}) + 0.5;
    torch::Tensor loss = torch::cross_entropy(x.mul(2).tanh(), t, w, torch::kMean, -100, 0.1) +
                         torch::smooth_l1_loss(x.sigmoid(), torch::rand({64, 10})) +
                         torch::binary_cross_entropy(x.sigmoid(), torch::rand({64, 10}));
    loss.backward();
    return std::make_pair(loss.item<double>(), x.grad().to_vector<float>());
  };
  const auto unlimited = run();
  remat::reset_stats();
  remat::set_memory_budget(int64_t(24 * 1024));
  std::pair<double, std::vector<float>> budgeted;
  try {
    budgeted = run();
  } catch (...) {
    remat::set_memory_budget(std::nullopt);
    throw;
  }
  remat::set_memory_budget(std::nullopt);
  EXPECT_GT(remat::stats().evictions, 0);
  EXPECT_EQ(unlimited.first, budgeted.first);
  EXPECT_EQ(unlimited.second, budgeted.second);
}

// ---- torch::save / torch::load --------------------------------------------------------

struct Net : nn::Module {
  nn::Linear fc1{nullptr}, fc2{nullptr};
  explicit Net(int64_t hidden = 4) {
    fc1 = register_module("fc1", nn::Linear(3, hidden));
    fc2 = register_module("fc2", nn::Linear(hidden, 2));
  }
};

/// A holder as libtorch's ModuleHolder is: ptr() gives the module.
struct NetHolder {
  std::shared_ptr<Net> impl;
  const std::shared_ptr<Net>& ptr() const { return impl; }
};

bool same(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() && a.dtype() == b.dtype() && a.to_vector<double>() == b.to_vector<double>();
}

TEST(LibtorchApi, SaveLoadTensorsAndTensorLists) {
  const std::string path = temp_path("tensor.pt");
  const torch::Tensor x = torch::tensor({{1.5, -2.0}, {3.25, 4.0}});
  torch::save(x, path);
  torch::Tensor y;
  torch::load(y, path);
  EXPECT_TRUE(same(x, y));

  const std::string list_path = temp_path("tensors.pt");
  const std::vector<torch::Tensor> xs{torch::arange(5), torch::ones({2, 2}, torch::kFloat64), torch::tensor({true})};
  torch::save(xs, list_path);
  std::vector<torch::Tensor> ys{torch::zeros({1})};
  torch::load(ys, list_path);
  ASSERT_EQ(ys.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(same(xs[i], ys[i])) << i;

  // A file of another kind, or with several tensors, is a ValueError.
  EXPECT_TRUE(throws_with<ValueError>([&] { torch::load(y, list_path); }, {"a tensor list", "not a tensor"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { torch::load(ys, path); }, {"not a tensor list"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { torch::save(torch::Tensor(), path); }, {"undefined"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { torch::load(y, temp_path("missing.pt")); }, {"missing.pt"}));
}

TEST(LibtorchApi, AFailedSaveLeavesTheOldFileIntact) {
  const std::string path = temp_path("intact.pt");
  const std::vector<torch::Tensor> good{torch::tensor({1.0, 2.0})};
  torch::save(good, path);
  // The second tensor is undefined: the save fails after the first was laid out.
  EXPECT_TRUE(throws_with<ValueError>([&] { torch::save(std::vector<torch::Tensor>{torch::ones({3}), torch::Tensor()}, path); },
                                      {"undefined"}));
  std::vector<torch::Tensor> back;
  torch::load(back, path);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_TRUE(same(back[0], good[0]));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  // A target that cannot be replaced (a directory) fails at the rename and
  // leaves no temporary file.
  const std::string dir = temp_path("a_directory.pt");
  std::filesystem::create_directories(dir + "/inside");
  EXPECT_TRUE(throws_with<ValueError>([&] { torch::save(torch::ones({2}), dir); }, {"cannot move"}));
  EXPECT_FALSE(std::filesystem::exists(dir + ".tmp"));
  EXPECT_TRUE(std::filesystem::is_directory(dir));
}

TEST(LibtorchApi, SaveLoadModulesByPointerAndHolder) {
  torch::manual_seed(1);
  auto net = std::make_shared<Net>();
  const std::string path = temp_path("net.pt");
  torch::save(net, path);

  torch::manual_seed(2);
  auto other = std::make_shared<Net>();
  EXPECT_FALSE(same(net->fc1->weight, other->fc1->weight));
  const torch::Tensor before = other->fc1->weight;
  torch::load(other, path);
  EXPECT_TRUE(same(net->fc1->weight, other->fc1->weight));
  EXPECT_TRUE(same(net->fc2->bias, other->fc2->bias));
  EXPECT_EQ(other->fc1->weight.impl(), before.impl());  // copied into the parameter, not rebound

  NetHolder holder{std::make_shared<Net>()};
  torch::load(holder, path);
  EXPECT_TRUE(same(net->fc2->weight, holder.impl->fc2->weight));
  const std::string holder_path = temp_path("holder.pt");
  torch::save(holder, holder_path);
  Net plain;
  torch::load(plain, holder_path);
  EXPECT_TRUE(same(plain.fc1->weight, net->fc1->weight));

  // Mismatched keys or shapes, another kind of file, empty pointers.
  auto wider = std::make_shared<Net>(5);
  EXPECT_TRUE(throws_with<ValueError>([&] { torch::load(wider, path); }, {"fc1.weight"}));
  torch::save(torch::ones({2}), temp_path("not_a_module.pt"));
  EXPECT_TRUE(throws_with<ValueError>([&] { torch::load(other, temp_path("not_a_module.pt")); }, {"a tensor", "not a module's state"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { torch::load(NetHolder{}, path); }, {"empty"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { torch::save(std::shared_ptr<Net>(), path); }, {"null"}));
}

TEST(LibtorchApi, SaveLoadOptimizerState) {
  torch::manual_seed(3);
  Net net;
  optim::SGD opt(net.parameters(), optim::SGDOptions(0.1).momentum(0.9));
  const torch::Tensor x = torch::randn({4, 3});
  for (int i = 0; i < 2; ++i) {
    opt.zero_grad();
    torch::Tensor h = net.fc2->forward(torch::relu(net.fc1->forward(x)));
    h.pow(2).sum().backward();
    opt.step();
  }
  const std::string path = temp_path("opt.pt");
  torch::save(opt, path);
  optim::SGD restored(net.parameters(), optim::SGDOptions(0.1).momentum(0.9));
  torch::load(restored, path);
  const StateDict a = opt.state_dict(), b = restored.state_dict();
  ASSERT_EQ(a.keys(), b.keys());
  for (const auto& [name, t] : a) EXPECT_TRUE(same(t, b.at(name))) << name;
  EXPECT_TRUE(throws_with<ValueError>([&] { torch::load(restored, temp_path("net.pt")); }, {"a module's state", "not an optimizer's state"}));
}

}  // namespace
}  // namespace dtr
