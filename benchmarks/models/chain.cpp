// chain: 64 × (Linear 512→512, GELU), batch 256 (chain_b2048: 2048), mse_loss
// against a fixed random target; SGD (lr 0.01, momentum 0.9). A unit of static
// checkpointing (and one step of the Revolve comparison) is one layer:
// Linear then GELU.
#include "zoo.h"

namespace dtr::zoo {
namespace {

class ChainModel : public nn::Module {
 public:
  ChainModel(int64_t n, int64_t width) : Module("Chain") {
    for (int64_t i = 0; i < n; ++i) {
      layers.push_back(register_module(std::to_string(i), nn::Linear(width, width)));
    }
  }
  std::vector<nn::Linear> layers;
};

class Chain final : public Workload {
 public:
  Chain(const ChainShape& shape, uint64_t seed, Device device) {
    DTR_CHECK(shape.layers > 0 && shape.batch > 0 && shape.width > 0, ValueError,
              "chain: layers, batch and width must be positive, got {}, {} and {}", shape.layers, shape.batch,
              shape.width);
    manual_seed(seed);
    auto model = std::make_shared<ChainModel>(shape.layers, shape.width);
    for (const auto& linear : model->layers) {
      units_.push_back([linear = linear.ptr()](const Tensor& x) { return gelu(linear->forward(x)); });
    }
    x_ = randn({shape.batch, shape.width});       // (batch, width)
    target_ = randn({shape.batch, shape.width});  // (batch, width)
    model_ = model;
    place_on(device, {&x_, &target_});
    optimizer_ = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  }

 protected:
  Tensor loss(Mode mode) override { return mse_loss(run_sequential(units_, mode, x_), target_); }
  void shard_batch(int rank, int world) override {
    x_ = batch_rows(x_, rank, world);
    target_ = batch_rows(target_, rank, world);
  }

 private:
  std::vector<std::function<Tensor(const Tensor&)>> units_;
  Tensor x_, target_;
};

}  // namespace

std::unique_ptr<Workload> make_chain(const ChainShape& shape, uint64_t seed, Device device) {
  return std::make_unique<Chain>(shape, seed, device);
}

}  // namespace dtr::zoo
