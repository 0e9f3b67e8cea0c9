// Autograd as libtorch programs use it: requires_grad, backward and grad,
// torch::autograd::grad for first and second derivatives, NoGradGuard, and
// a gradient descent written by hand on those gradients.
// Usage: autograd [steps] (default 100).
#include <torch/torch.h>

#include <cmath>
#include <cstdio>

#include "common.h"

namespace {

int failures = 0;

void expect_close(const char* what, double got, double want) {
  const bool ok = std::fabs(got - want) <= 1e-5 * (1 + std::fabs(want));
  std::printf("%-40s %10.6f (expected %10.6f)%s\n", what, got, want, ok ? "" : "  MISMATCH");
  if (!ok) ++failures;
}

}  // namespace

int main(int argc, char** argv) {
  const long steps = examples::arg_or(argc, argv, 1, 100);

  // d/dx mean(3 (x + 2)²) = 6 (x + 2) / 4 = 4.5 at x = 1.
  torch::Tensor x = torch::ones({2, 2}, torch::requires_grad());
  torch::Tensor y = x + 2;
  torch::Tensor z = y * y * 3;
  torch::Tensor out = z.mean();
  out.backward();
  expect_close("x.grad()[0][0] of mean(3 (x + 2)^2)", x.grad()[0][0].item<double>(), 4.5);
  expect_close("out", out.item<double>(), 27.0);

  // requires_grad_ on a tensor made without it, then a vector-Jacobian
  // product through backward(gradient).
  torch::Tensor a = torch::randn({3});
  std::printf("a.requires_grad() before: %d\n", static_cast<int>(a.requires_grad()));
  a.requires_grad_(true);
  torch::Tensor b = a * 2;
  b.backward(torch::tensor({0.1, 1.0, 0.0001}, torch::kFloat));
  expect_close("a.grad()[1] of 2a with gradient 1.0", a.grad()[1].item<double>(), 2.0);

  // torch::autograd::grad: dy/dx of x³ and, with create_graph, d²y/dx².
  torch::Tensor t = torch::full({1}, 2.0, torch::requires_grad());
  torch::Tensor cube = t.pow(3);
  torch::Tensor first = torch::autograd::grad({cube}, {t}, /*grad_outputs=*/{torch::ones_like(cube)},
                                              /*retain_graph=*/true, /*create_graph=*/true)[0];
  expect_close("d(t^3)/dt at 2", first.item<double>(), 12.0);
  torch::Tensor second = torch::autograd::grad({first}, {t}, {torch::ones_like(first)})[0];
  expect_close("d2(t^3)/dt2 at 2", second.item<double>(), 12.0);

  // Nothing is recorded under NoGradGuard.
  {
    torch::NoGradGuard no_grad;
    torch::Tensor w = x * 2;
    std::printf("(x * 2).requires_grad() under NoGradGuard: %d\n", static_cast<int>(w.requires_grad()));
    if (w.requires_grad()) ++failures;
  }

  // Gradient descent by hand: minimise mean((w − target)²) with the update
  // under NoGradGuard and the gradient zeroed after each step.
  const torch::Tensor target = torch::tensor({3.0, -1.0, 0.5}, torch::kFloat);
  torch::Tensor w = torch::zeros({3}, torch::requires_grad());
  double first_loss = 0, last_loss = 0;
  for (long step = 0; step < steps; ++step) {
    torch::Tensor loss = (w - target).pow(2).mean();
    loss.backward();
    {
      torch::NoGradGuard no_grad;
      w -= 0.1 * w.grad();
    }
    w.grad().zero_();
    last_loss = loss.item<double>();
    if (step == 0) first_loss = last_loss;
    if (step % 20 == 0) std::printf("step %3ld  loss %.6f\n", step, last_loss);
  }
  if (failures != 0) {
    std::printf("autograd: %d check(s) failed\n", failures);
    return 1;
  }
  return examples::report("autograd", "loss", first_loss, last_loss);
}
