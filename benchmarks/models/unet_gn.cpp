// unet_gn: a 3-level U-Net on 3×32×32 inputs, batch 8, widths 16/32/64,
// with GroupNorm (4 groups) and SiLU in its blocks and transposed
// convolutions in its decoder. A block is two (conv 3×3 padding 1 without
// bias, GroupNorm(4), SiLU).
//   e1 = block(x)                                (N, 16, 32, 32)
//   e2 = block(max_pool2d(e1, 2))                (N, 32, 16, 16)
//   b  = block(max_pool2d(e2, 2))                (N, 64, 8, 8)
//   d2 = block(cat(up2(b), e2))                  (N, 32, 16, 16)   up2: ConvTranspose2d(64, 32, 2, stride 2)
//   d1 = block(cat(up1(d2), e1))                 (N, 16, 32, 32)   up1: ConvTranspose2d(32, 16, 2, stride 2)
//   logits = conv 1×1(d1)                        (N, 4, 32, 32)
// The loss is per-pixel cross_entropy against random classes in 0..3; SGD
// (lr 0.01, momentum 0.9). As in unet, static checkpointing keeps each of
// the five blocks' inputs and outputs and recomputes what is inside a block
// (its pooling, transposed convolution and cat included).
#include "zoo.h"

namespace dtr::zoo {
namespace {

constexpr int64_t kBatch = 8, kChannels = 3, kSide = 32, kClasses = 4, kGroups = 4;
constexpr int64_t kWidth[3] = {16, 32, 64};

class GnBlock : public nn::UnaryModule {
 public:
  GnBlock(int64_t in, int64_t out) : UnaryModule("GnBlock") {
    conv1 = register_module("conv1", nn::Conv2d(in, out, 3, 1, 1, 1, 1, false));
    gn1 = register_module("gn1", nn::GroupNorm(kGroups, out));
    conv2 = register_module("conv2", nn::Conv2d(out, out, 3, 1, 1, 1, 1, false));
    gn2 = register_module("gn2", nn::GroupNorm(kGroups, out));
  }
  /// x (N, in, H, W) → (N, out, H, W)
  Tensor forward(const Tensor& x) override {
    return silu(gn2->forward(conv2->forward(silu(gn1->forward(conv1->forward(x))))));
  }
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::GroupNorm gn1{nullptr}, gn2{nullptr};
};

class UNetGnModel : public nn::Module {
 public:
  UNetGnModel() : Module("UNetGn") {
    enc1 = register_module("enc1", std::make_shared<GnBlock>(kChannels, kWidth[0]));
    enc2 = register_module("enc2", std::make_shared<GnBlock>(kWidth[0], kWidth[1]));
    bottom = register_module("bottom", std::make_shared<GnBlock>(kWidth[1], kWidth[2]));
    up2 = register_module("up2", nn::ConvTranspose2d(kWidth[2], kWidth[1], 2, 2));
    dec2 = register_module("dec2", std::make_shared<GnBlock>(2 * kWidth[1], kWidth[1]));
    up1 = register_module("up1", nn::ConvTranspose2d(kWidth[1], kWidth[0], 2, 2));
    dec1 = register_module("dec1", std::make_shared<GnBlock>(2 * kWidth[0], kWidth[0]));
    head = register_module("head", nn::Conv2d(kWidth[0], kClasses, 1));
  }
  std::shared_ptr<GnBlock> enc1, enc2, bottom, dec2, dec1;
  nn::ConvTranspose2d up2{nullptr}, up1{nullptr};
  nn::Conv2d head{nullptr};
};

class UNetGn final : public Workload {
 public:
  UNetGn(uint64_t seed, Device device) {
    manual_seed(seed);
    model_ = net_ = std::make_shared<UNetGnModel>();
    x_ = randn({kBatch, kChannels, kSide, kSide});           // (8, 3, 32, 32)
    target_ = randint(0, kClasses, {kBatch, kSide, kSide});  // int64 (8, 32, 32)
    place_on(device, {&x_, &target_});
    optimizer_ = std::make_unique<optim::SGD>(net_->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  }

 protected:
  Tensor loss(Mode mode) override {
    UNetGnModel& n = *net_;
    auto down = [](GnBlock& block) {
      return [&block](const Tensor& x) { return block.forward(max_pool2d(x, {2, 2})); };
    };
    auto up = [](nn::ConvTranspose2dImpl& upconv, GnBlock& block) {
      return [&upconv, &block](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{block.forward(cat({upconv.forward(in[0]), in[1]}, 1))};
      };
    };
    const Tensor e1 = run_unit([&n](const Tensor& x) { return n.enc1->forward(x); }, mode, x_);
    const Tensor e2 = run_unit(down(*n.enc2), mode, e1);
    const Tensor b = run_unit(down(*n.bottom), mode, e2);
    const Tensor d2 = run_unit(up(*n.up2, *n.dec2), mode, {b, e2})[0];
    const Tensor d1 = run_unit(up(*n.up1, *n.dec1), mode, {d2, e1})[0];
    return cross_entropy(n.head->forward(d1), target_);
  }

 private:
  std::shared_ptr<UNetGnModel> net_;
  Tensor x_, target_;
};

}  // namespace

std::unique_ptr<Workload> make_unet_gn(uint64_t seed, Device device) {
  return std::make_unique<UNetGn>(seed, device);
}

}  // namespace dtr::zoo
