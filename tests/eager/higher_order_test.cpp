// Higher-order gradients (Note [higher-order gradients]): backward with
// create_graph=true and autograd::grad record the backward's own graph, so a
// gradient can be differentiated again (torch.autograd.grad, gradgradcheck).
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "tests/testing.h"

namespace dtr {
namespace {

using dtr::testing::allclose;
using dtr::testing::BudgetScope;
using dtr::testing::bitwise_equal;
using dtr::testing::gradcheck;
using dtr::testing::leaf;

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// torch.autograd.gradgradcheck in spirit: the gradient of sum(f(x) * w) for
// fixed weights w, computed with create_graph, is itself checked against
// finite differences. Inputs the finite differences pass in do not require
// grad; they get a requiring-grad copy so the first gradient can be taken.
::testing::AssertionResult gradgradcheck(const Fn& f, const std::vector<Tensor>& inputs) {
  auto first = [&](const std::vector<Tensor>& in) {
    const GradModeGuard grad_mode(true);
    std::vector<Tensor> x;
    for (size_t i = 0; i < in.size(); ++i)
      x.push_back(in[i].requires_grad() || !inputs[i].requires_grad() ? in[i]
                                                                      : in[i].detach().requires_grad_());
    Tensor out = f(x);
    std::vector<double> w(size_t(out.numel()));
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.3 + 0.41 * double((i * 613) % 11) / 11.0;
    const Tensor wt = from_vector(w, out.shape(), TensorOptions(out.dtype()));
    std::vector<Tensor> wrt;
    for (const Tensor& t : x)
      if (t.requires_grad()) wrt.push_back(t);
    std::vector<Tensor> g = autograd::grad({sum(mul(out, wt))}, wrt, {}, std::nullopt,
                                           /*create_graph=*/true, /*allow_unused=*/true);
    std::vector<Tensor> parts;
    for (size_t k = 0; k < g.size(); ++k)
      parts.push_back(flatten(g[k].defined() ? g[k] : zeros_like(wrt[k])));
    return parts.size() == 1 ? parts[0] : cat(parts, 0);
  };
  return gradcheck(first, inputs);
}

TEST(HigherOrder, GradOfCubeAndItsGradient) {
  Tensor x = from_vector<double>({-1.5, 0.5, 2.0}).requires_grad_();
  Tensor y = x * x * x;
  std::vector<Tensor> g = autograd::grad({y.sum()}, {x}, {}, std::nullopt, /*create_graph=*/true);
  EXPECT_TRUE(allclose(g[0], {6.75, 0.75, 12.0}));  // 3x^2
  EXPECT_TRUE(g[0].requires_grad());
  EXPECT_FALSE(x.grad().defined());  // grad() never touches .grad
  std::vector<Tensor> gg = autograd::grad({g[0].sum()}, {x});
  EXPECT_TRUE(allclose(gg[0], {-9, 3, 12}));  // 6x
  EXPECT_FALSE(gg[0].requires_grad());
}

// backward(create_graph=true): .grad has a graph of its own (PyTorch 1.13:
// x = [1, 2], y = (x ** 3).sum() -> x.grad = 3x^2, then x.grad.sum().backward()
// accumulates 6x into it: [9, 24]).
TEST(HigherOrder, BackwardWithCreateGraphLeavesADifferentiableGrad) {
  Tensor x = from_vector<double>({1, 2}).requires_grad_();
  (x * x * x).sum().backward(Tensor(), std::nullopt, /*create_graph=*/true);
  Tensor g = x.grad();
  EXPECT_TRUE(g.requires_grad());
  EXPECT_TRUE(allclose(g, {3, 12}));
  g.sum().backward();
  EXPECT_TRUE(allclose(x.grad(), {9, 24}));
}

// Only the part of the graph that leads to the inputs runs; a non-leaf input
// gets the gradient that reaches it.
TEST(HigherOrder, GradWithRespectToANonLeafAndUnusedInputs) {
  Tensor w = from_vector<double>({1, -2}).requires_grad_();
  Tensor x = from_vector<double>({3, 4}).requires_grad_();
  Tensor h = w * x;
  Tensor y = (h * h).sum();
  std::vector<Tensor> g = autograd::grad({y}, {h}, {}, /*retain_graph=*/true);
  EXPECT_TRUE(allclose(g[0], {6, -16}));  // 2h
  EXPECT_FALSE(w.grad().defined());
  Tensor unused = from_vector<double>({1}).requires_grad_();
  EXPECT_THROW(autograd::grad({y}, {unused}, {}, true), ValueError);
  std::vector<Tensor> u = autograd::grad({y}, {x, unused}, {}, true, false, /*allow_unused=*/true);
  EXPECT_TRUE(allclose(u[0], {6, 32}));  // 2 w^2 x
  EXPECT_FALSE(u[1].defined());
  // Bad input: an output that does not require grad, a mis-shaped grad_output.
  EXPECT_THROW(autograd::grad({zeros({1})}, {x}), ValueError);
  EXPECT_THROW(autograd::grad({h}, {x}, {ones({3})}), ValueError);
  EXPECT_THROW(autograd::grad({h}, {x}), ValueError);  // not a scalar: grad_outputs needed
  // The input's own grad_fn did not run (its saved tensors are still there).
  Tensor h2 = w * x;
  (void)autograd::grad({(h2 * h2).sum()}, {h2});
  h2.sum().backward();
  EXPECT_TRUE(allclose(w.grad(), {3, 4}));
  // A node on a path to the input runs even when another path to it does not.
  Tensor a = w * 2.0;
  Tensor b = a * x;
  std::vector<Tensor> ga = autograd::grad({(b + a * a).sum()}, {a});
  EXPECT_TRUE(allclose(ga[0], {7, -4}));  // x + 2a
}

// layer_norm and rms_norm: in a create_graph pass their gradient is the
// differentiable composite, checked against finite differences.
TEST(HigherOrder, GradGradcheckOfTheNorms) {
  const std::vector<std::pair<std::string, Fn>> cases = {
      {"layer_norm", [](const auto& x) { return mul(layer_norm(x[0], {3}, x[1].select(0, 0), x[1].select(0, 1)), x[0]); }},
      {"layer_norm_plain", [](const auto& x) { return mul(layer_norm(mul(x[0], x[1]), {3, 3}), x[1]); }},
      {"rms_norm", [](const auto& x) { return mul(rms_norm(x[0], {3}, x[1].select(0, 2), 1e-5), x[0]); }},
  };
  for (const auto& [name, f] : cases) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(gradgradcheck(f, {leaf({3, 3}, 21), leaf({3, 3}, 22)}));
  }
}

// The double backward of each differentiable rule, against finite differences.
TEST(HigherOrder, GradGradcheckOfTheRules) {
  const std::vector<std::pair<std::string, Fn>> cases = {
      {"mul_exp_log", [](const auto& x) { return mul(exp(x[0]), log(add(mul(x[1], x[1]), 1.0))); }},
      {"div_pow_sqrt", [](const auto& x) { return div(pow(x[0], 3.0), sqrt(add(mul(x[1], x[1]), 0.5))); }},
      {"tanh", [](const auto& x) { return tanh(mul(x[0], x[1])); }},
      {"sigmoid", [](const auto& x) { return sigmoid(mul(x[0], x[1])); }},
      {"relu", [](const auto& x) { return mul(relu(x[0]), x[1]); }},
      {"abs", [](const auto& x) { return mul(abs(x[0]), x[1]); }},
      {"silu", [](const auto& x) { return silu(mul(x[0], x[1])); }},
      {"gelu", [](const auto& x) { return gelu(mul(x[0], x[1])); }},
      {"gelu_tanh", [](const auto& x) { return gelu(mul(x[0], x[1]), "tanh"); }},
      {"softmax", [](const auto& x) { return softmax(mul(x[0], x[1]), -1); }},
      {"log_softmax", [](const auto& x) { return log_softmax(mul(x[0], x[1]), 0); }},
      {"mse_mean", [](const auto& x) { return mse_loss(mul(x[0], x[0]), x[1]); }},
      {"mse_sum", [](const auto& x) { return mse_loss(mul(x[0], x[0]), x[1], "sum"); }},
      {"mse_none", [](const auto& x) { return mse_loss(mul(x[0], x[0]), x[1], "none"); }},
      {"matmul_mean", [](const auto& x) { return mean(tanh(matmul(x[0], transpose(x[1], 0, 1))), {1}); }},
      {"linear_sum", [](const auto& x) { return sum(mul(linear(x[0], x[1]), linear(x[0], x[1])), {0}); }},
      {"views", [](const auto& x) {
         Tensor row = x[1].select(0, 1).unsqueeze(0).expand({3, 3});
         return sum(mul(mul(x[0].transpose(0, 1), row), x[0].narrow(1, 0, 3)), {0});
       }},
      {"dropout", [](const auto& x) {
         manual_seed(3);
         return dropout(mul(x[0], x[1]), 0.4, true) * x[0];
       }},
  };
  for (const auto& [name, f] : cases) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(gradgradcheck(f, {leaf({3, 3}, 11), leaf({3, 3}, 12)}));
  }
}


// Where a rule's backward is a fused kernel without a derivative, create_graph
// is a NotImplementedError naming it, never a silently missing term.
TEST(HigherOrder, AFusedBackwardWithoutDerivativeIsNotImplemented) {
  Tensor x = leaf({1, 2, 5, 5}, 5);
  Tensor w = leaf({3, 2, 3, 3}, 6);
  Tensor y = conv2d(x, w);
  EXPECT_THROW(autograd::grad({(y * y).sum()}, {x}, {}, std::nullopt, /*create_graph=*/true),
               NotImplementedError);
  // Without create_graph the same gradient is fine.
  EXPECT_EQ(autograd::grad({(conv2d(x, w) * 2.0).sum()}, {x})[0].shape(), x.shape());
}

// WGAN-GP (Gulrajani et al. 2017): the critic's loss includes the squared
// deviation from 1 of the norm of its gradient at points between real and
// fake samples. Both passes' activations are evictable: 20 steps under a
// budget of half the unlimited peak train to bitwise the same critic.
struct Critic {
  nn::Linear l1{8, 64}, l2{64, 64}, l3{64, 1};
  Tensor forward(const Tensor& x) { return l3(tanh(l2(silu(l1(x))))); }
  std::vector<Tensor> parameters() {
    std::vector<Tensor> p;
    for (nn::Linear* l : {&l1, &l2, &l3}) {
      p.push_back((*l)->weight);
      p.push_back((*l)->bias);
    }
    return p;
  }
};

std::vector<double> train_critic(std::optional<double> budget_fraction, remat::Stats* stats) {
  manual_seed(42);
  Critic d;
  const Tensor real = randn({256, 8}) + 1.0;
  const Tensor fake = randn({256, 8});
  const Tensor eps = rand({256, 1});
  auto step = [&] {
    Tensor x_hat = (eps * real + (1.0 - eps) * fake).detach().requires_grad_();
    Tensor g = autograd::grad({d.forward(x_hat).sum()}, {x_hat}, {}, std::nullopt,
                              /*create_graph=*/true)[0];
    Tensor norm = sqrt(sum(g * g, {1}) + 1e-12);
    Tensor penalty = mean((norm - 1.0) * (norm - 1.0));
    Tensor loss = mean(d.forward(fake)) - mean(d.forward(real)) + penalty * 10.0;
    loss.backward();
    NoGradGuard no_grad;
    for (Tensor& p : d.parameters()) {
      p.sub_(p.grad() * 0.01);
      p.set_grad(Tensor());
    }
    return loss.item<double>();
  };
  std::vector<double> losses;
  std::optional<BudgetScope> budget;
  remat::reset_stats();
  if (budget_fraction) {
    // The peak of one step, measured after a first unbudgeted step.
    losses.push_back(step());
    const int64_t peak = remat::stats().peak_bytes;
    remat::reset_stats();
    budget.emplace(int64_t(double(peak) * *budget_fraction));
  } else {
    losses.push_back(step());
  }
  for (int i = 1; i < 20; ++i) losses.push_back(step());
  if (stats) *stats = remat::stats();
  for (Tensor& p : d.parameters()) {
    for (double v : p.to_vector<double>()) losses.push_back(v);
  }
  return losses;
}

TEST(HigherOrder, GradientPenaltyTrainsBitwiseUnderABudget) {
  const std::vector<double> unlimited = train_critic(std::nullopt, nullptr);
  remat::Stats st;
  const std::vector<double> budgeted = train_critic(0.5, &st);
  EXPECT_GT(st.evictions, 0);
  EXPECT_GT(st.rematerializations, 0);
  ASSERT_EQ(unlimited.size(), budgeted.size());
  for (size_t i = 0; i < unlimited.size(); ++i) ASSERT_EQ(unlimited[i], budgeted[i]) << i;
  EXPECT_LT(unlimited[19], unlimited[0]);  // it trains
}

// Second-order gradients through in-place writes into views (CopySlices and
// AsStridedBackward differentiate in a create_graph pass). PyTorch 1.13, with
// p = [0.5, 1.5, 2]: h = d/dp sum(dL/dp).
TEST(HigherOrder, SecondOrderThroughInPlaceWritesIntoViews) {
  const std::vector<std::vector<double>> expected = {
      {18, 18, 18}, {3, 27, 48}, {3, 108, 48}, {3, 2, 48},
      {1.419575, -0.033547, -0.040198}, {3, 27, 48}, {24, 216, 384}};
  for (int c = 0; c < 7; ++c) {
    SCOPED_TRACE(c);
    Tensor p = from_vector<double>({0.5, 1.5, 2.0}).requires_grad_();
    Tensor loss;
    if (c == 0) {
      Tensor y = p * 3.0;
      y.slice(0, 0, 3).neg_();
      loss = (y * y).sum();
    } else if (c == 5) {
      Tensor y = p * p;
      Tensor v = y.slice(0, 0, 3);
      v.neg_();
      loss = (v * v).sum();
    } else if (c == 6) {
      Tensor y = p * p;
      Tensor e = y.unsqueeze(0).expand({2, 3});
      y.mul_(2);
      loss = (e * e).sum();
    } else {
      Tensor y = p * p;
      if (c == 1) y.slice(0, 0, 2).neg_();
      if (c == 2 || c == 4) y.select(0, 1).mul_(2);
      if (c == 3) y.select(0, 1).copy_(p.select(0, 1));
      loss = c == 4 ? tanh(y).sum() : (y * y).sum();
    }
    Tensor g = autograd::grad({loss}, {p}, {}, std::nullopt, /*create_graph=*/true)[0];
    Tensor h = autograd::grad({g.sum()}, {p})[0];
    EXPECT_TRUE(allclose(h, expected[size_t(c)], 1e-5)) << h.str();
  }
}

// libtorch's assignment to a temporary writes into it: x[0] = y, x[1] = 5.
TEST(HigherOrder, AssignmentToATemporaryWrites) {
  Tensor a = zeros({2, 2});
  a[0] = ones({2});
  a[1] = 5;
  EXPECT_TRUE(allclose(a, {1, 1, 5, 5}));
  Tensor b = a;  // a named tensor rebinds
  b = zeros({1});
  EXPECT_TRUE(allclose(a, {1, 1, 5, 5}));
}

}  // namespace
}  // namespace dtr
