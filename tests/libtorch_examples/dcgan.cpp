// A small DCGAN on 28×28 MNIST-format images: a generator of transposed
// convolutions with batch norm, a discriminator of strided convolutions with
// LeakyReLU, both torch::nn::Sequential, trained with Adam on binary cross
// entropy; the generator is saved and loaded back at the end.
// Usage: dcgan <data root> [steps] [checkpoint path] (defaults: one epoch,
// dcgan-generator.pt).
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common.h"

namespace {

constexpr int64_t kNoiseSize = 16;
constexpr int64_t kBatchSize = 64;

torch::nn::Sequential make_generator() {
  using namespace torch::nn;
  return Sequential(
      // (kNoiseSize, 1, 1) -> (64, 4, 4)
      ConvTranspose2d(ConvTranspose2dOptions(kNoiseSize, 64, 4).bias(false)), BatchNorm2d(64), ReLU(true),
      // -> (32, 7, 7)
      ConvTranspose2d(ConvTranspose2dOptions(64, 32, 3).stride(2).padding(1).bias(false)), BatchNorm2d(32),
      ReLU(true),
      // -> (16, 14, 14)
      ConvTranspose2d(ConvTranspose2dOptions(32, 16, 4).stride(2).padding(1).bias(false)), BatchNorm2d(16),
      ReLU(true),
      // -> (1, 28, 28)
      ConvTranspose2d(ConvTranspose2dOptions(16, 1, 4).stride(2).padding(1).bias(false)), Tanh());
}

torch::nn::Sequential make_discriminator() {
  using namespace torch::nn;
  return Sequential(
      // (1, 28, 28) -> (16, 14, 14)
      Conv2d(Conv2dOptions(1, 16, 4).stride(2).padding(1).bias(false)),
      LeakyReLU(LeakyReLUOptions().negative_slope(0.2)),
      // -> (32, 7, 7)
      Conv2d(Conv2dOptions(16, 32, 4).stride(2).padding(1).bias(false)), BatchNorm2d(32),
      LeakyReLU(LeakyReLUOptions().negative_slope(0.2)),
      // -> (64, 4, 4)
      Conv2d(Conv2dOptions(32, 64, 3).stride(2).padding(1).bias(false)), BatchNorm2d(64),
      LeakyReLU(LeakyReLUOptions().negative_slope(0.2)),
      // -> (1, 1, 1)
      Conv2d(Conv2dOptions(64, 1, 4).stride(1).padding(0).bias(false)), Sigmoid());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <data root> [steps] [checkpoint path]\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  const long max_steps = examples::arg_or(argc, argv, 2, 1L << 30);
  const std::string checkpoint = argc > 3 ? argv[3] : "dcgan-generator.pt";

  torch::manual_seed(1);
  torch::Device device = torch::cuda::is_available() ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);

  torch::nn::Sequential generator = make_generator();
  torch::nn::Sequential discriminator = make_discriminator();
  generator->to(device);
  discriminator->to(device);

  // Pixels scaled to [-1, 1], the range of the generator's Tanh.
  auto dataset = torch::data::datasets::MNIST(root)
                     .map(torch::data::transforms::Normalize<>(0.5, 0.5))
                     .map(torch::data::transforms::Stack<>());
  const int64_t batches_per_epoch =
      static_cast<int64_t>(std::ceil(dataset.size().value() / static_cast<double>(kBatchSize)));
  auto data_loader = torch::data::make_data_loader(
      std::move(dataset), torch::data::DataLoaderOptions().batch_size(kBatchSize).workers(2).drop_last(true));

  torch::optim::Adam generator_optimizer(generator->parameters(),
                                         torch::optim::AdamOptions(2e-4).betas(std::make_tuple(0.5, 0.999)));
  torch::optim::Adam discriminator_optimizer(discriminator->parameters(),
                                             torch::optim::AdamOptions(2e-4).betas(std::make_tuple(0.5, 0.999)));

  std::vector<double> d_losses, g_losses;
  long step = 0;
  for (auto& batch : *data_loader) {
    if (step >= max_steps) break;
    const torch::Tensor real_images = batch.data.to(device);
    const int64_t n = real_images.size(0);

    // Discriminator: real images towards 1 (label smoothing: 0.9), fakes towards 0.
    discriminator->zero_grad();
    torch::Tensor real_labels = torch::empty(n, device).uniform_(0.8, 1.0);
    torch::Tensor real_output = discriminator->forward(real_images).reshape(real_labels.sizes());
    torch::Tensor d_loss_real = torch::binary_cross_entropy(real_output, real_labels);
    d_loss_real.backward();

    torch::Tensor noise = torch::randn({n, kNoiseSize, 1, 1}, device);
    torch::Tensor fake_images = generator->forward(noise);
    torch::Tensor fake_labels = torch::zeros(n, device);
    torch::Tensor fake_output = discriminator->forward(fake_images.detach()).reshape(fake_labels.sizes());
    torch::Tensor d_loss_fake = torch::binary_cross_entropy(fake_output, fake_labels);
    d_loss_fake.backward();
    torch::Tensor d_loss = d_loss_real + d_loss_fake;
    discriminator_optimizer.step();

    // Generator: make the discriminator call the fakes real.
    generator->zero_grad();
    fake_labels.fill_(1);
    fake_output = discriminator->forward(fake_images).reshape(fake_labels.sizes());
    torch::Tensor g_loss = torch::binary_cross_entropy(fake_output, fake_labels);
    g_loss.backward();
    generator_optimizer.step();

    d_losses.push_back(d_loss.item<double>());
    g_losses.push_back(g_loss.item<double>());
    if (step % 10 == 0) {
      std::printf("[%4ld/%4lld] D_loss %.4f | G_loss %.4f\n", step, static_cast<long long>(batches_per_epoch),
                  d_losses.back(), g_losses.back());
    }
    ++step;
  }

  // Save the generator, load it into a new one and check both draw the same
  // images from the same noise.
  torch::save(generator, checkpoint);
  torch::nn::Sequential restored = make_generator();
  torch::load(restored, checkpoint);
  restored->to(device);
  generator->eval();
  restored->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor noise = torch::randn({4, kNoiseSize, 1, 1}, device);
  const double difference = (generator->forward(noise) - restored->forward(noise)).abs().max().item<double>();
  const bool same = difference <= 1e-6;
  std::printf("checkpoint %s: restored generator %s (largest difference %g)\n", checkpoint.c_str(),
              same ? "matches" : "DIFFERS from the trained one", difference);
  for (double g : g_losses) {
    if (!std::isfinite(g)) {
      std::printf("dcgan: a generator loss is not finite\n");
      return 1;
    }
  }
  if (!same) return 1;
  // The discriminator learns to tell the fakes apart: its loss falls from
  // about 2·ln 2 at the start.
  return examples::report("dcgan", "discriminator loss (mean of the first five steps -> of the last five)",
                          examples::mean_of_first(d_losses, 5), examples::mean_of_last(d_losses, 5));
}
