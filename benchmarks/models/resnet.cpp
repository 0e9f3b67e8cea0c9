// resnet: ResNet-20 (He et al. 2016, the CIFAR variant) on 1×28×28 inputs,
// batch 64: a 3×3 stem of width 16, then 3 stages × 3 basic blocks of widths
// 16, 32, 64 (stride 2 at the first block of stages 2 and 3, 1×1 conv +
// BatchNorm projection shortcuts where the shape changes), global average
// pooling, Linear(64, 10); cross_entropy; SGD (lr 0.1, momentum 0.9).
// Convolutions have no bias. Units of static checkpointing: the stem and the
// nine blocks.
#include "zoo.h"

namespace dtr::zoo {
namespace {

constexpr int64_t kBatch = 64, kSide = 28, kClasses = 10, kWidth = 16, kBlocksPerStage = 3;

nn::Conv2d conv3x3(int64_t in, int64_t out, int64_t stride) {
  return nn::Conv2d(in, out, 3, stride, /*padding=*/1, /*dilation=*/1,
                                      /*groups=*/1, /*bias=*/false);
}

class BasicBlock : public nn::UnaryModule {
 public:
  BasicBlock(int64_t in, int64_t out, int64_t stride) : UnaryModule("BasicBlock") {
    conv1 = register_module("conv1", conv3x3(in, out, stride));
    bn1 = register_module("bn1", nn::BatchNorm2d(out));
    conv2 = register_module("conv2", conv3x3(out, out, 1));
    bn2 = register_module("bn2", nn::BatchNorm2d(out));
    if (stride != 1 || in != out) {
      proj = register_module("proj", nn::Conv2d(in, out, 1, stride, 0, 1, 1, false));
      proj_bn = register_module("proj_bn", nn::BatchNorm2d(out));
    }
  }
  /// x (N, in, H, W) → (N, out, H/stride, W/stride)
  Tensor forward(const Tensor& x) override {
    const Tensor y = bn2->forward(conv2->forward(relu(bn1->forward(conv1->forward(x)))));
    return relu(y + (proj ? proj_bn->forward(proj->forward(x)) : x));
  }
  nn::Conv2d conv1{nullptr}, conv2{nullptr}, proj{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, proj_bn{nullptr};
};

class ResNetModel : public nn::Module {
 public:
  ResNetModel() : Module("ResNet20") {
    stem = register_module("stem", conv3x3(1, kWidth, 1));
    stem_bn = register_module("stem_bn", nn::BatchNorm2d(kWidth));
    int64_t in = kWidth;
    for (int64_t stage = 0; stage < 3; ++stage) {
      const int64_t out = kWidth << stage;
      for (int64_t b = 0; b < kBlocksPerStage; ++b) {
        const int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
        blocks.push_back(register_module("block" + std::to_string(blocks.size()),
                                         std::make_shared<BasicBlock>(in, out, stride)));
        in = out;
      }
    }
    fc = register_module("fc", nn::Linear(in, kClasses));
  }
  nn::Conv2d stem{nullptr};
  nn::BatchNorm2d stem_bn{nullptr};
  std::vector<std::shared_ptr<BasicBlock>> blocks;
  nn::Linear fc{nullptr};
};

class ResNet final : public Workload {
 public:
  ResNet(uint64_t seed, Device device) {
    manual_seed(seed);
    auto net = std::make_shared<ResNetModel>();
    units_.push_back([net = net.get()](const Tensor& x) { return relu(net->stem_bn->forward(net->stem->forward(x))); });
    for (const auto& block : net->blocks) {
      units_.push_back([block](const Tensor& x) { return block->forward(x); });
    }
    fc_ = net->fc;
    x_ = randn({kBatch, 1, kSide, kSide});            // (64, 1, 28, 28)
    labels_ = randint(0, kClasses, {kBatch});         // int64 (64)
    model_ = net;
    place_on(device, {&x_, &labels_});
    optimizer_ = std::make_unique<optim::SGD>(net->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  }

 protected:
  Tensor loss(Mode mode) override {
    const Tensor features = run_sequential(units_, mode, x_);  // (N, 64, 7, 7)
    return cross_entropy(fc_->forward(mean(features, {2, 3})), labels_);
  }

 private:
  std::vector<std::function<Tensor(const Tensor&)>> units_;
  nn::Linear fc_{nullptr};
  Tensor x_, labels_;
};

}  // namespace

std::unique_ptr<Workload> make_resnet(uint64_t seed, Device device) {
  return std::make_unique<ResNet>(seed, device);
}

}  // namespace dtr::zoo
