// unet: a 3-level U-Net (Ronneberger et al. 2015) on 3×64×64 inputs, batch
// 16, widths 16/32/64. A block is two (conv 3×3 padding 1, BatchNorm, ReLU).
//   e1 = block(x)                         (N, 16, 64, 64)
//   e2 = block(max_pool2d(e1, 2))         (N, 32, 32, 32)
//   b  = block(max_pool2d(e2, 2))         (N, 64, 16, 16)
//   d2 = block(cat(upsample(b), e2))      (N, 32, 32, 32)
//   d1 = block(cat(upsample(d2), e1))     (N, 16, 64, 64)
//   logits = conv 1×1(d1)                 (N, 4, 64, 64)
// upsample is nearest-neighbour 2× (unsqueeze/expand/reshape); the loss is
// per-pixel cross_entropy against random classes in 0..3; SGD (lr 0.01,
// momentum 0.9). The skip connections make the network no chain, so static
// checkpointing keeps each of the five blocks' inputs and outputs and
// recomputes what is inside a block (including its pooling, upsampling and cat).
#include "zoo.h"

namespace dtr::zoo {
namespace {

constexpr int64_t kBatch = 16, kChannels = 3, kSide = 64, kClasses = 4;
constexpr int64_t kWidth[3] = {16, 32, 64};

class ConvBlock : public nn::UnaryModule {
 public:
  ConvBlock(int64_t in, int64_t out) : UnaryModule("ConvBlock") {
    conv1 = register_module("conv1", nn::Conv2d(in, out, 3, 1, 1, 1, 1, false));
    bn1 = register_module("bn1", nn::BatchNorm2d(out));
    conv2 = register_module("conv2", nn::Conv2d(out, out, 3, 1, 1, 1, 1, false));
    bn2 = register_module("bn2", nn::BatchNorm2d(out));
  }
  /// x (N, in, H, W) → (N, out, H, W)
  Tensor forward(const Tensor& x) override {
    return relu(bn2->forward(conv2->forward(relu(bn1->forward(conv1->forward(x))))));
  }
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
};

/// Nearest-neighbour 2× upsampling (torch.nn.functional.interpolate with
/// scale_factor=2, mode="nearest"): x (N, C, H, W) → (N, C, 2H, 2W).
Tensor upsample2x(const Tensor& x) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  return x.reshape({N, C, H, 1, W, 1}).expand({N, C, H, 2, W, 2}).reshape({N, C, 2 * H, 2 * W});
}

class UNetModel : public nn::Module {
 public:
  UNetModel() : Module("UNet") {
    enc1 = register_module("enc1", std::make_shared<ConvBlock>(kChannels, kWidth[0]));
    enc2 = register_module("enc2", std::make_shared<ConvBlock>(kWidth[0], kWidth[1]));
    bottom = register_module("bottom", std::make_shared<ConvBlock>(kWidth[1], kWidth[2]));
    dec2 = register_module("dec2", std::make_shared<ConvBlock>(kWidth[2] + kWidth[1], kWidth[1]));
    dec1 = register_module("dec1", std::make_shared<ConvBlock>(kWidth[1] + kWidth[0], kWidth[0]));
    head = register_module("head", nn::Conv2d(kWidth[0], kClasses, 1));
  }
  std::shared_ptr<ConvBlock> enc1, enc2, bottom, dec2, dec1;
  nn::Conv2d head{nullptr};
};

class UNet final : public Workload {
 public:
  UNet(uint64_t seed, Device device) {
    manual_seed(seed);
    model_ = net_ = std::make_shared<UNetModel>();
    x_ = randn({kBatch, kChannels, kSide, kSide});         // (16, 3, 64, 64)
    target_ = randint(0, kClasses, {kBatch, kSide, kSide});  // int64 (16, 64, 64)
    place_on(device, {&x_, &target_});
    optimizer_ = std::make_unique<optim::SGD>(net_->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  }

 protected:
  Tensor loss(Mode mode) override {
    UNetModel& n = *net_;
    auto down = [](ConvBlock& block) {
      return [&block](const Tensor& x) { return block.forward(max_pool2d(x, {2, 2})); };
    };
    auto up = [](ConvBlock& block) {
      return [&block](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{block.forward(cat({upsample2x(in[0]), in[1]}, 1))};
      };
    };
    const Tensor e1 = run_unit([&n](const Tensor& x) { return n.enc1->forward(x); }, mode, x_);
    const Tensor e2 = run_unit(down(*n.enc2), mode, e1);
    const Tensor b = run_unit(down(*n.bottom), mode, e2);
    const Tensor d2 = run_unit(up(*n.dec2), mode, {b, e2})[0];
    const Tensor d1 = run_unit(up(*n.dec1), mode, {d2, e1})[0];
    return cross_entropy(n.head->forward(d1), target_);
  }

 private:
  std::shared_ptr<UNetModel> net_;
  Tensor x_, target_;
};

}  // namespace

std::unique_ptr<Workload> make_unet(uint64_t seed, Device device) { return std::make_unique<UNet>(seed, device); }

}  // namespace dtr::zoo
