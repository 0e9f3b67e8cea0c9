// llama: a LLaMA-style decoder (Touvron et al. 2023), 4 blocks, d_model 128,
// 8 query heads and 2 key/value heads (grouped-query attention, head size
// 16), sequence 128, batch 8, vocab 256. Each block is pre-norm:
//   h   = x + wo(attention(rope(wq(n1)), rope(wk(n1)), wv(n1)))   n1 = RMSNorm(x)
//   out = h + w2(silu(w1(n2)) * w3(n2))                            n2 = RMSNorm(h)
// with RMSNorm eps 1e-5, SwiGLU hidden size 352 (8/3·d rounded up to a
// multiple of 32), no biases anywhere. Rotary position embeddings (base
// 10000) rotate q and k by the rotate-half formulation, x·cos + rotate_half(x)·sin,
// the angles position·10000^(-2i/16) computed with sin/cos every step. The
// two key/value heads are expanded to the 8 query heads with
// repeat_interleave (query head h reads key/value head h / 4); attention is
// scaled_dot_product_attention with is_causal. A final RMSNorm, an untied
// lm_head, cross_entropy over every position; AdamW (lr 1e-3,
// weight_decay 0.01). Token embeddings N(0, 1), linears PyTorch's default
// initialization. A unit of static checkpointing is one block.
#include "zoo.h"

#include <cmath>

namespace dtr::zoo {
namespace {

constexpr int64_t kLayers = 4, kEmbd = 128, kHeads = 8, kKvHeads = 2, kHeadDim = kEmbd / kHeads;
constexpr int64_t kHidden = 352, kSeq = 128, kBatch = 8, kVocab = 256;
constexpr double kEps = 1e-5, kRopeBase = 10000.0;

/// cat(-x[..., d/2:], x[..., :d/2]) along the last dim of x (..., d).
Tensor rotate_half(const Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return cat({-x.slice(-1, half, std::nullopt), x.slice(-1, 0, half)}, -1);
}

/// x (B, heads, T, d) rotated by the angles whose cos and sin are (T, d).
Tensor apply_rope(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
  return x * cos_t + rotate_half(x) * sin_t;
}

class Block : public nn::Module {
 public:
  Block() : Module("LlamaBlock") {
    attention_norm = register_module("attention_norm", nn::RMSNorm(std::vector<int64_t>{kEmbd}, kEps));
    wq = register_module("wq", nn::Linear(kEmbd, kHeads * kHeadDim, false));
    wk = register_module("wk", nn::Linear(kEmbd, kKvHeads * kHeadDim, false));
    wv = register_module("wv", nn::Linear(kEmbd, kKvHeads * kHeadDim, false));
    wo = register_module("wo", nn::Linear(kHeads * kHeadDim, kEmbd, false));
    ffn_norm = register_module("ffn_norm", nn::RMSNorm(std::vector<int64_t>{kEmbd}, kEps));
    w1 = register_module("w1", nn::Linear(kEmbd, kHidden, false));
    w2 = register_module("w2", nn::Linear(kHidden, kEmbd, false));
    w3 = register_module("w3", nn::Linear(kEmbd, kHidden, false));
  }
  /// x (B, T, C) → (B, T, C); cos_t and sin_t (T, head size) are the rotary angles'.
  Tensor forward(const Tensor& x, const Tensor& cos_t, const Tensor& sin_t) {
    const int64_t B = x.size(0), T = x.size(1);
    const Tensor n1 = attention_norm->forward(x);
    auto heads = [B, T](const Tensor& t, int64_t n) { return t.reshape({B, T, n, kHeadDim}).transpose(1, 2); };
    const Tensor q = apply_rope(heads(wq->forward(n1), kHeads), cos_t, sin_t);       // (B, H, T, hd)
    const Tensor k = apply_rope(heads(wk->forward(n1), kKvHeads), cos_t, sin_t);     // (B, KV, T, hd)
    const Tensor v = heads(wv->forward(n1), kKvHeads);                                // (B, KV, T, hd)
    const Tensor y = scaled_dot_product_attention(q, repeat_interleave(k, kHeads / kKvHeads, 1),
                                                  repeat_interleave(v, kHeads / kKvHeads, 1), Tensor(), 0.0,
                                                  /*is_causal=*/true);              // (B, H, T, hd)
    const Tensor h = x + wo->forward(y.transpose(1, 2).reshape({B, T, kEmbd}));
    const Tensor n2 = ffn_norm->forward(h);
    return h + w2->forward(silu(w1->forward(n2)) * w3->forward(n2));
  }
  nn::RMSNorm attention_norm{nullptr}, ffn_norm{nullptr};
  nn::Linear wq{nullptr}, wk{nullptr}, wv{nullptr}, wo{nullptr}, w1{nullptr}, w2{nullptr}, w3{nullptr};
};

class LlamaModel : public nn::Module {
 public:
  LlamaModel() : Module("Llama") {
    tok_embeddings = register_module("tok_embeddings", nn::Embedding(kVocab, kEmbd));
    for (int64_t i = 0; i < kLayers; ++i) {
      layers.push_back(register_module("layers" + std::to_string(i), std::make_shared<Block>()));
    }
    norm = register_module("norm", nn::RMSNorm(std::vector<int64_t>{kEmbd}, kEps));
    output = register_module("output", nn::Linear(kEmbd, kVocab, false));
  }
  nn::Embedding tok_embeddings{nullptr};
  std::vector<std::shared_ptr<Block>> layers;
  nn::RMSNorm norm{nullptr};
  nn::Linear output{nullptr};
};

class Llama final : public Workload {
 public:
  Llama(uint64_t seed, Device device) {
    manual_seed(seed);
    model_ = net_ = std::make_shared<LlamaModel>();
    idx_ = randint(0, kVocab, {kBatch, kSeq});         // int64 (B, T)
    targets_ = randint(0, kVocab, {kBatch * kSeq});    // int64 (B·T)
    pos_ = arange(kSeq, TensorOptions().dtype(kFloat32));   // float32 (T)
    place_on(device, {&idx_, &targets_, &pos_});
    optimizer_ = std::make_unique<optim::AdamW>(net_->parameters(),
                                                optim::AdamWOptions(1e-3).weight_decay(0.01));
  }

 protected:
  Tensor loss(Mode mode) override {
    // Angles (T, hd): position p, pair i → p · base^(-2i/hd), each pair's
    // angle used for both halves (rotate_half pairs x[i] with x[i + hd/2]).
    const Tensor inv_freq =
        exp(arange(0, kHeadDim, 2, TensorOptions().dtype(kFloat32).device(device())) * (-std::log(kRopeBase) / kHeadDim));
    const Tensor angles = pos_.unsqueeze(1) * inv_freq.unsqueeze(0);  // (T, hd/2)
    const Tensor emb = cat({angles, angles}, -1);                      // (T, hd)
    const Tensor cos_t = cos(emb), sin_t = sin(emb);
    std::vector<std::function<Tensor(const Tensor&)>> blocks;
    for (const auto& block : net_->layers) {
      blocks.push_back([block, cos_t, sin_t](const Tensor& x) { return block->forward(x, cos_t, sin_t); });
    }
    const Tensor h = run_sequential(blocks, mode, net_->tok_embeddings->forward(idx_));  // (B, T, C)
    const Tensor logits = net_->output->forward(net_->norm->forward(h));                  // (B, T, V)
    return cross_entropy(logits.reshape({idx_.size(0) * kSeq, kVocab}), targets_);
  }
  void shard_batch(int rank, int world) override {
    targets_ = batch_rows(targets_.reshape({idx_.size(0), kSeq}), rank, world).reshape({-1});
    idx_ = batch_rows(idx_, rank, world);
  }

 private:
  std::shared_ptr<LlamaModel> net_;
  Tensor idx_, targets_, pos_;
};

}  // namespace

std::unique_ptr<Workload> make_llama(uint64_t seed, Device device) { return std::make_unique<Llama>(seed, device); }

}  // namespace dtr::zoo
