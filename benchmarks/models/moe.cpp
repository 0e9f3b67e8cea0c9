// moe: 4 pre-norm layers of a top-2 mixture of experts (Shazeer et al. 2017,
// GShard/Switch routing) on 2048 tokens (batch 16 × sequence 128) of width
// 64. A layer is h = x + moe(RMSNorm(x)) (eps 1e-5) with
//   probs          = softmax(router(n), -1)              (N, 8)   router: Linear(64, 8), no bias
//   gate, expert   = topk(probs, 2)                      (N, 2)   ties go to the lower expert
//   gate           = gate / gate.sum(-1)                 renormalized
//   moe(n)[i]      = Σ_s gate[i, s] · expert_{expert[i, s]}(n[i])
// Eight experts, each Linear(64, 128), SiLU, Linear(128, 64). The dispatch
// is sparse: the routing indices are read back to the host, each expert
// gathers its tokens with index_select, runs on them alone, and its outputs,
// scaled by their gates, are index_add-ed back into the token order. Every
// layer adds the Switch load-balancing loss 8 · Σ_e f_e · P_e (f_e: share
// of the 2N routing slots expert e received, counted with one_hot; P_e: mean
// router probability of e) at weight 0.01. The loss is mse_loss of the
// last layer's RMSNorm-ed output against a fixed random target, plus the
// auxiliary losses; AdamW (lr 1e-3, weight_decay 0.01). A unit of static
// checkpointing is one layer (segments carry the hidden state and the
// auxiliary loss so far).
#include "zoo.h"

#include <algorithm>

namespace dtr::zoo {
namespace {

constexpr int64_t kLayers = 4, kEmbd = 64, kHidden = 128, kExperts = 8, kTopK = 2;
constexpr int64_t kBatch = 16, kSeq = 128, kTokens = kBatch * kSeq;
constexpr double kEps = 1e-5, kAuxWeight = 0.01;

class Expert : public nn::UnaryModule {
 public:
  Expert() : UnaryModule("Expert") {
    fc1 = register_module("fc1", nn::Linear(kEmbd, kHidden));
    fc2 = register_module("fc2", nn::Linear(kHidden, kEmbd));
  }
  /// x (n, C) → (n, C)
  Tensor forward(const Tensor& x) override { return fc2->forward(silu(fc1->forward(x))); }
  nn::Linear fc1{nullptr}, fc2{nullptr};
};

class MoeLayer : public nn::Module {
 public:
  MoeLayer() : Module("MoeLayer") {
    norm = register_module("norm", nn::RMSNorm(std::vector<int64_t>{kEmbd}, kEps));
    router = register_module("router", nn::Linear(kEmbd, kExperts, false));
    for (int64_t e = 0; e < kExperts; ++e) {
      experts.push_back(register_module("experts" + std::to_string(e), std::make_shared<Expert>()));
    }
  }
  /// x (N, C) → {x + moe(norm(x)) (N, C), the load-balancing loss (scalar)}.
  std::pair<Tensor, Tensor> forward(const Tensor& x) {
    const Tensor n = norm->forward(x);
    const Tensor probs = softmax(router->forward(n), -1);          // (N, E)
    auto [top, expert] = topk(probs, kTopK, -1);                    // (N, 2), (N, 2) int64
    const Tensor gates = (top / top.sum({-1}, true)).reshape({-1});  // (2N), slot i·2 + s
    // Routing table on the host: expert e's tokens and their slots, in token order.
    const std::vector<int64_t> routed = expert.to_vector<int64_t>();
    std::vector<std::vector<int64_t>> tokens(kExperts), slots(kExperts);
    for (size_t slot = 0; slot < routed.size(); ++slot) {
      tokens[size_t(routed[slot])].push_back(int64_t(slot) / kTopK);
      slots[size_t(routed[slot])].push_back(int64_t(slot));
    }
    Tensor out = zeros_like(x);
    for (int64_t e = 0; e < kExperts; ++e) {
      const auto count = int64_t(tokens[size_t(e)].size());
      if (count == 0) continue;
      const Tensor token_idx = from_vector(tokens[size_t(e)], {count}).to(x.device());
      const Tensor slot_idx = from_vector(slots[size_t(e)], {count}).to(x.device());
      const Tensor y = experts[size_t(e)]->forward(index_select(n, 0, token_idx));  // (count, C)
      out = index_add(out, 0, token_idx, y * index_select(gates, 0, slot_idx).unsqueeze(1));
    }
    // Switch load balancing: f_e from the routing (no gradient), P_e from the router.
    const Tensor share = one_hot(expert.reshape({-1}), kExperts).sum({0}).to(kFloat32) *
                         (1.0 / double(expert.numel()));               // (E)
    const Tensor aux = (share * probs.mean({0})).sum() * double(kExperts);
    return {x + out, aux};
  }
  nn::RMSNorm norm{nullptr};
  nn::Linear router{nullptr};
  std::vector<std::shared_ptr<Expert>> experts;
};

class MoeModel : public nn::Module {
 public:
  MoeModel() : Module("Moe") {
    for (int64_t i = 0; i < kLayers; ++i) {
      layers.push_back(register_module("layers" + std::to_string(i), std::make_shared<MoeLayer>()));
    }
    norm = register_module("norm", nn::RMSNorm(std::vector<int64_t>{kEmbd}, kEps));
  }
  std::vector<std::shared_ptr<MoeLayer>> layers;
  nn::RMSNorm norm{nullptr};
};

class Moe final : public Workload {
 public:
  Moe(uint64_t seed, Device device) {
    manual_seed(seed);
    model_ = net_ = std::make_shared<MoeModel>();
    x_ = randn({kTokens, kEmbd});       // (N, C): the batch's tokens, flattened
    target_ = randn({kTokens, kEmbd});  // (N, C)
    place_on(device, {&x_, &target_});
    optimizer_ = std::make_unique<optim::AdamW>(net_->parameters(),
                                                optim::AdamWOptions(1e-3).weight_decay(0.01));
  }

 protected:
  Tensor loss(Mode mode) override {
    // Layers [begin, end) on {hidden state, auxiliary loss so far}.
    auto segment = [this](size_t begin, size_t end) {
      return [this, begin, end](const std::vector<Tensor>& in) {
        Tensor h = in[0], aux = in[1];
        for (size_t i = begin; i < end; ++i) {
          auto [next, layer_aux] = net_->layers[i]->forward(h);
          h = next;
          aux = aux + layer_aux;
        }
        return std::vector<Tensor>{h, aux};
      };
    };
    std::vector<Tensor> state{x_, zeros({}, TensorOptions().dtype(kFloat32).device(device()))};
    // Plain: one segment of every layer; checkpointed: round(√L) segments.
    const auto segments = mode == Mode::kCheckpoint ? size_t(checkpoint_segments(kLayers)) : size_t(1);
    const size_t per = (size_t(kLayers) + segments - 1) / segments;
    for (size_t begin = 0; begin < size_t(kLayers); begin += per) {
      state = run_unit(segment(begin, std::min(size_t(kLayers), begin + per)), mode, state);
    }
    return mse_loss(net_->norm->forward(state[0]), target_) + state[1] * kAuxWeight;
  }

 private:
  std::shared_ptr<MoeModel> net_;
  Tensor x_, target_;
};

}  // namespace

std::unique_ptr<Workload> make_moe(uint64_t seed, Device device) { return std::make_unique<Moe>(seed, device); }

}  // namespace dtr::zoo
