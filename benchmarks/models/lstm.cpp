// lstm: one LSTM layer (torch.nn.LSTMCell's equations) unrolled over 128
// steps, input 256, hidden 256, batch 32, composed from linear, chunk,
// sigmoid, tanh, mul and add:
//   i, f, g, o = chunk(x_t W_ih^T + b_ih + h W_hh^T + b_hh, 4, dim 1)
//   c = sigmoid(f)·c + sigmoid(i)·tanh(g);  h = sigmoid(o)·tanh(c)
// h_0 = c_0 = 0; parameters uniform in ±1/√hidden like PyTorch. The loss is
// the mean squared error of every step's h against a fixed random target,
// summed per group of steps and divided by the element count. AdamW (lr
// 1e-3, weight_decay 0.01). Units of static checkpointing: the 128 steps, in
// round(√128) = 11 groups of ceil(128/11) = 12 steps (the last one 8), each
// returning (h, c, its part of the loss); the plain step sums the same groups.
#include <cmath>

#include "zoo.h"

namespace dtr::zoo {
namespace {

constexpr int64_t kSteps = 128, kInput = 256, kHidden = 256, kBatch = 32;

class LstmModel : public nn::Module {
 public:
  LstmModel() : Module("Lstm") {
    const double k = 1.0 / std::sqrt(double(kHidden));
    weight_ih = register_parameter("weight_ih", nn::init::uniform({4 * kHidden, kInput}, -k, k));
    weight_hh = register_parameter("weight_hh", nn::init::uniform({4 * kHidden, kHidden}, -k, k));
    bias_ih = register_parameter("bias_ih", nn::init::uniform({4 * kHidden}, -k, k));
    bias_hh = register_parameter("bias_hh", nn::init::uniform({4 * kHidden}, -k, k));
  }
  /// One step: x (B, I), h (B, H), c (B, H) → (h', c').
  std::pair<Tensor, Tensor> cell(const Tensor& x, const Tensor& h, const Tensor& c) const {
    const Tensor gates = linear(x, weight_ih, bias_ih) + linear(h, weight_hh, bias_hh);  // (B, 4H)
    const std::vector<Tensor> ifgo = chunk(gates, 4, 1);
    const Tensor c_next = sigmoid(ifgo[1]) * c + sigmoid(ifgo[0]) * tanh(ifgo[2]);
    return {sigmoid(ifgo[3]) * tanh(c_next), c_next};
  }
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;
};

class Lstm final : public Workload {
 public:
  Lstm(uint64_t seed, Device device) {
    manual_seed(seed);
    model_ = net_ = std::make_shared<LstmModel>();
    x_ = randn({kSteps, kBatch, kInput});        // (T, B, I)
    target_ = randn({kSteps, kBatch, kHidden});  // (T, B, H)
    place_on(device, {&x_, &target_});
    optimizer_ = std::make_unique<optim::AdamW>(net_->parameters(),
                                                optim::AdamWOptions(1e-3).weight_decay(0.01));
  }

 protected:
  Tensor loss(Mode mode) override {
    const int64_t groups = checkpoint_segments(kSteps);
    const int64_t per_group = (kSteps + groups - 1) / groups;
    Tensor h = zeros({kBatch, kHidden}, device_), c = zeros({kBatch, kHidden}, device_);
    Tensor total;
    for (int64_t t0 = 0; t0 < kSteps; t0 += per_group) {
      const int64_t t1 = std::min(kSteps, t0 + per_group);
      // inputs {h, c} → {h, c, sum of squared errors over steps t0..t1-1}
      auto group = [this, t0, t1](const std::vector<Tensor>& in) {
        Tensor hh = in[0], cc = in[1];
        std::vector<Tensor> outputs;
        for (int64_t t = t0; t < t1; ++t) {
          std::tie(hh, cc) = net_->cell(x_.select(0, t), hh, cc);
          outputs.push_back(hh);
        }
        const Tensor err = mse_loss(stack(outputs), target_.narrow(0, t0, t1 - t0), "sum");
        return std::vector<Tensor>{hh, cc, err};
      };
      const std::vector<Tensor> out = mode == Mode::kCheckpoint ? checkpoint(group, {h, c}) : group({h, c});
      h = out[0];
      c = out[1];
      total = total.defined() ? total + out[2] : out[2];
    }
    return total / double(kSteps * kBatch * kHidden);
  }

 private:
  std::shared_ptr<LstmModel> net_;
  Tensor x_, target_;
};

}  // namespace

std::unique_ptr<Workload> make_lstm(uint64_t seed, Device device) {
  return std::make_unique<Lstm>(seed, device);
}

}  // namespace dtr::zoo
