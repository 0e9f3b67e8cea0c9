// Fits a degree-4 polynomial with one torch::nn::Linear layer: features
// x, x², x³, x⁴ of random x, targets from fixed coefficients plus a bias,
// SGD on the smooth-L1 loss. Usage: regression [steps] (default 2000).
#include <torch/torch.h>

#include <cstdio>
#include <vector>

#include "common.h"

namespace {

constexpr int64_t kDegree = 4;

// (batch, kDegree) features: column j is x^(j+1).
torch::Tensor features(const torch::Tensor& x) {
  std::vector<torch::Tensor> columns;
  for (int64_t j = 1; j <= kDegree; ++j) columns.push_back(x.pow(j));
  return torch::cat(columns, 1);
}

}  // namespace

int main(int argc, char** argv) {
  const long steps = examples::arg_or(argc, argv, 1, 2000);
  torch::manual_seed(1);

  const torch::Tensor true_w = torch::tensor({0.5, -1.25, 0.75, 2.0}, torch::kFloat).unsqueeze(1);
  const float true_b = 0.3f;

  torch::nn::Linear fc(torch::nn::LinearOptions(kDegree, 1));
  torch::optim::SGD optimizer(fc->parameters(), torch::optim::SGDOptions(0.1));

  double first = 0, last = 0;
  for (long step = 0; step < steps; ++step) {
    const torch::Tensor x = torch::rand({32, 1}) * 2 - 1;
    const torch::Tensor batch_x = features(x);
    const torch::Tensor batch_y = batch_x.mm(true_w) + true_b;

    optimizer.zero_grad();
    torch::Tensor loss = torch::smooth_l1_loss(fc(batch_x), batch_y);
    loss.backward();
    optimizer.step();

    last = loss.item<double>();
    if (step == 0) first = last;
    if (step % 250 == 0 || step == steps - 1) std::printf("step %5ld  loss %.6f\n", step, last);
  }
  std::printf("learned bias %.4f (true %.4f), weight ", fc->bias.item<float>(), true_b);
  for (int64_t j = 0; j < kDegree; ++j) std::printf("%.4f ", fc->weight[0][j].item<float>());
  std::printf("\n");
  return examples::report("regression", "smooth_l1_loss", first, last);
}
