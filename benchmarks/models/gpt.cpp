// gpt: a GPT-2-style decoder (nanoGPT's layout), pre-LayerNorm, 6 blocks,
// d_model 256, 8 heads, sequence 256, batch 8, vocab 256, MLP 4·d with GELU,
// dropout 0.1 after the embeddings and on each MLP output (the attention
// weights are not dropped), learned position embeddings, untied lm_head
// without bias, cross_entropy over every position; AdamW (lr 3e-4,
// weight_decay 0.01). PyTorch's default initialization. A unit of static
// checkpointing is one block.
#include "zoo.h"

namespace dtr::zoo {
namespace {

constexpr int64_t kLayers = 6, kEmbd = 256, kHeads = 8, kSeq = 256, kBatch = 8, kVocab = 256;
constexpr double kDropout = 0.1;

class Block : public nn::UnaryModule {
 public:
  Block() : UnaryModule("Block") {
    ln_1 = register_module("ln_1", nn::LayerNorm(std::vector<int64_t>{kEmbd}));
    attn = register_module("attn", nn::CausalSelfAttention(kEmbd, kHeads));
    ln_2 = register_module("ln_2", nn::LayerNorm(std::vector<int64_t>{kEmbd}));
    c_fc = register_module("c_fc", nn::Linear(kEmbd, 4 * kEmbd));
    c_proj = register_module("c_proj", nn::Linear(4 * kEmbd, kEmbd));
    drop = register_module("drop", nn::Dropout(kDropout));
  }
  /// x (B, T, C) → (B, T, C)
  Tensor forward(const Tensor& x) override {
    const Tensor h = x + attn->forward(ln_1->forward(x));
    return h + drop->forward(c_proj->forward(gelu(c_fc->forward(ln_2->forward(h)))));
  }
  nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  nn::CausalSelfAttention attn{nullptr};
  nn::Linear c_fc{nullptr}, c_proj{nullptr};
  nn::Dropout drop{nullptr};
};

class GptModel : public nn::Module {
 public:
  GptModel() : Module("Gpt") {
    wte = register_module("wte", nn::Embedding(kVocab, kEmbd));
    wpe = register_module("wpe", nn::Embedding(kSeq, kEmbd));
    drop = register_module("drop", nn::Dropout(kDropout));
    for (int64_t i = 0; i < kLayers; ++i) {
      blocks.push_back(register_module("h" + std::to_string(i), std::make_shared<Block>()));
    }
    ln_f = register_module("ln_f", nn::LayerNorm(std::vector<int64_t>{kEmbd}));
    lm_head = register_module("lm_head", nn::Linear(kEmbd, kVocab, false));
  }
  nn::Embedding wte{nullptr}, wpe{nullptr};
  nn::Dropout drop{nullptr};
  std::vector<std::shared_ptr<Block>> blocks;
  nn::LayerNorm ln_f{nullptr};
  nn::Linear lm_head{nullptr};
};

class Gpt final : public Workload {
 public:
  Gpt(uint64_t seed, Device device) {
    manual_seed(seed);
    model_ = net_ = std::make_shared<GptModel>();
    for (const auto& block : net_->blocks) {
      blocks_.push_back([block](const Tensor& x) { return block->forward(x); });
    }
    idx_ = randint(0, kVocab, {kBatch, kSeq});          // int64 (B, T)
    targets_ = randint(0, kVocab, {kBatch * kSeq});     // int64 (B·T)
    pos_ = arange(kSeq);                                // int64 (T)
    place_on(device, {&idx_, &targets_, &pos_});
    optimizer_ = std::make_unique<optim::AdamW>(net_->parameters(),
                                                optim::AdamWOptions(3e-4).weight_decay(0.01));
  }

 protected:
  Tensor loss(Mode mode) override {
    const Tensor x = net_->drop->forward(net_->wte->forward(idx_) + net_->wpe->forward(pos_));
    const Tensor h = run_sequential(blocks_, mode, x);                     // (B, T, C)
    const Tensor logits = net_->lm_head->forward(net_->ln_f->forward(h));  // (B, T, V)
    return cross_entropy(logits.reshape({idx_.size(0) * kSeq, kVocab}), targets_);
  }
  void shard_batch(int rank, int world) override {
    targets_ = batch_rows(targets_.reshape({idx_.size(0), kSeq}), rank, world).reshape({-1});
    idx_ = batch_rows(idx_, rank, world);
  }

 private:
  std::shared_ptr<GptModel> net_;
  std::vector<std::function<Tensor(const Tensor&)>> blocks_;
  Tensor idx_, targets_, pos_;
};

}  // namespace

std::unique_ptr<Workload> make_gpt(uint64_t seed, Device device) { return std::make_unique<Gpt>(seed, device); }

}  // namespace dtr::zoo
