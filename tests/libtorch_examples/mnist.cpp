// A LeNet-style convolutional network trained on MNIST-format data (the
// Fashion-MNIST files of Debian's dataset-fashion-mnist package) with the
// torch::data pipeline: datasets::MNIST, Normalize, Stack and a data loader.
// Usage: mnist <data root> [train batches per epoch] [test batches] [epochs]
// (defaults: the whole split, the whole split, 1). libtorch's MNIST reads
// uncompressed IDX files; dtr's also reads the .gz files as shipped.
#include <torch/torch.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common.h"

namespace F = torch::nn::functional;

struct NetImpl : torch::nn::Module {
  NetImpl()
      : conv1(torch::nn::Conv2dOptions(1, 10, /*kernel_size=*/5)),
        conv2(torch::nn::Conv2dOptions(10, 20, /*kernel_size=*/5)),
        fc1(320, 50),
        fc2(50, 10) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("conv2_drop", conv2_drop);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }

  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(F::max_pool2d(conv1->forward(x), F::MaxPool2dFuncOptions(2)));
    x = torch::relu(F::max_pool2d(conv2_drop->forward(conv2->forward(x)), F::MaxPool2dFuncOptions(2)));
    x = x.view({-1, 320});
    x = torch::relu(fc1->forward(x));
    x = F::dropout(x, F::DropoutFuncOptions().p(0.5).training(is_training()));
    x = fc2->forward(x);
    return F::log_softmax(x, F::LogSoftmaxFuncOptions(1));
  }

  torch::nn::Conv2d conv1;
  torch::nn::Conv2d conv2;
  torch::nn::Dropout2d conv2_drop;
  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
};
TORCH_MODULE(Net);

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <data root> [train batches] [test batches] [epochs]\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  const long max_train_batches = examples::arg_or(argc, argv, 2, 1L << 30);
  const long max_test_batches = examples::arg_or(argc, argv, 3, 1L << 30);
  const long epochs = examples::arg_or(argc, argv, 4, 1);
  const int64_t kTrainBatchSize = 64, kTestBatchSize = 1000;

  torch::manual_seed(1);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  std::printf("training on %s\n", device.is_cuda() ? "CUDA" : "the CPU");

  Net model;
  model->to(device);

  auto train_dataset = torch::data::datasets::MNIST(root)
                           .map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
                           .map(torch::data::transforms::Stack<>());
  const size_t train_size = train_dataset.size().value();
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(train_dataset), kTrainBatchSize);

  auto test_dataset = torch::data::datasets::MNIST(root, torch::data::datasets::MNIST::Mode::kTest)
                          .map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
                          .map(torch::data::transforms::Stack<>());
  auto test_loader = torch::data::make_data_loader(std::move(test_dataset),
                                                   torch::data::DataLoaderOptions().batch_size(kTestBatchSize));

  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.5));

  std::vector<double> losses;
  for (long epoch = 1; epoch <= epochs; ++epoch) {
    model->train();
    long batch_index = 0;
    for (auto& batch : *train_loader) {
      if (batch_index >= max_train_batches) break;
      auto data = batch.data.to(device), targets = batch.target.to(device);
      optimizer.zero_grad();
      auto output = model->forward(data);
      auto loss = torch::nll_loss(output, targets);
      loss.backward();
      optimizer.step();
      const double value = loss.template item<float>();
      losses.push_back(value);
      if (batch_index % 20 == 0) {
        std::printf("train epoch %ld [%5ld/%5zu] loss %.4f\n", epoch, batch_index * kTrainBatchSize, train_size,
                    value);
      }
      ++batch_index;
    }

    torch::NoGradGuard no_grad;
    model->eval();
    double test_loss = 0;
    int64_t correct = 0, seen = 0;
    long test_batches = 0;
    for (const auto& batch : *test_loader) {
      if (test_batches++ >= max_test_batches) break;
      auto data = batch.data.to(device), targets = batch.target.to(device);
      auto output = model->forward(data);
      test_loss += F::nll_loss(output, targets, F::NLLLossFuncOptions().reduction(torch::kSum)).template item<float>();
      auto pred = output.argmax(1);
      correct += pred.eq(targets).sum().template item<int64_t>();
      seen += data.size(0);
    }
    std::printf("test: average loss %.4f, accuracy %.3f (%lld of %lld)\n", test_loss / double(seen),
                double(correct) / double(seen), static_cast<long long>(correct), static_cast<long long>(seen));
  }
  return examples::report("mnist", "nll_loss (mean of the first ten batches -> of the last ten)",
                          examples::mean_of_first(losses, 10), examples::mean_of_last(losses, 10));
}
