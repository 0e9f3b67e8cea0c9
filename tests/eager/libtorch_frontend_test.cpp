// A libtorch-style program compiled against dtr through `namespace torch =
// dtr;`: TORCH_MODULE holders with nullptr members, Options, F::, a
// Sequential of holders and a user module, loss modules and an optimizer.
// Written as libtorch code is, so it compiles unchanged against libtorch.
#include <memory>

#include "dtr/dtr.h"
#include "gtest/gtest.h"

namespace torch = dtr;
namespace F = torch::nn::functional;

namespace {

struct ConvNetImpl : torch::nn::Module {
  ConvNetImpl()
      : conv1(torch::nn::Conv2dOptions(1, 4, 3).padding(1)),
        conv2(torch::nn::Conv2dOptions(4, 8, 3).stride(2).bias(false)),
        bn(torch::nn::BatchNorm2dOptions(8).momentum(0.2)),
        drop(torch::nn::DropoutOptions(0.25)) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("bn", bn);
    register_module("drop", drop);
    fc = register_module("fc", torch::nn::Linear(8 * 2 * 2, 5));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = F::leaky_relu(conv1->forward(x), F::LeakyReLUFuncOptions().negative_slope(0.2));
    x = F::max_pool2d(x, F::MaxPool2dFuncOptions(2));                    // (N, 4, 4, 4)
    x = torch::relu(bn(conv2(F::pad(x, F::PadFuncOptions({1, 1, 1, 1})))));  // (N, 8, 2, 2)
    x = drop(x.flatten(1));
    return F::log_softmax(fc(x), F::LogSoftmaxFuncOptions(1));
  }
  torch::nn::Conv2d conv1, conv2;
  torch::nn::BatchNorm2d bn;
  torch::nn::Dropout drop;
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ConvNet);

struct Scale : torch::nn::Module {
  explicit Scale(double s) : s(s) {}
  torch::Tensor forward(torch::Tensor x) { return x * s; }
  double s;
};

TEST(LibtorchFrontend, ConvNetTrains) {
  torch::manual_seed(0);
  ConvNet net;
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  const torch::Tensor x = torch::randn({8, 1, 8, 8});
  const torch::Tensor y = torch::randint(0, 5, {8});
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    optimizer.zero_grad();
    torch::Tensor loss = F::nll_loss(net->forward(x), y);
    loss.backward();
    optimizer.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, first * 0.5);
  net->eval();
  EXPECT_EQ(net(x).size(0), 8);
  EXPECT_EQ(net(x).size(1), 5);
  size_t named = 0;
  for (const auto& p : net->named_parameters()) named += p.key().empty() ? 0 : 1;
  EXPECT_EQ(named, 7u);  // conv1 weight+bias, conv2 weight, bn weight+bias, fc weight+bias
}

TEST(LibtorchFrontend, SequentialOfHoldersAndUserModules) {
  torch::manual_seed(1);
  torch::nn::Sequential model(torch::nn::Linear(4, 16), torch::nn::ReLU(), torch::nn::Dropout(0.1),
                              torch::nn::Linear(16, 3), std::make_shared<Scale>(0.5));
  model->push_back(torch::nn::Functional(torch::tanh));
  auto loss_fn = torch::nn::CrossEntropyLoss(torch::nn::CrossEntropyLossOptions().label_smoothing(0.05));
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  const torch::Tensor x = torch::randn({16, 4});
  const torch::Tensor y = torch::randint(0, 3, {16});
  torch::Tensor first;
  for (int step = 0; step < 20; ++step) {
    optimizer.zero_grad();
    auto loss = loss_fn(model->forward(x), y);
    if (step == 0) first = loss.detach();
    loss.backward();
    optimizer.step();
  }
  model->eval();
  EXPECT_LT(loss_fn(model(x), y).item<float>(), first.item<float>());
  EXPECT_EQ(model->size(), 6u);
  auto mse = torch::nn::MSELoss(torch::nn::MSELossOptions().reduction(torch::kSum));
  EXPECT_FLOAT_EQ(mse(torch::ones({2}), torch::zeros({2})).item<float>(), 2.0f);
}

}  // namespace
