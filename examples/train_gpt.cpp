// Trains a byte-level GPT on real English text under a memory budget.
//
// Model (nanoGPT's layout): token + position embeddings and dropout, then
// n_layer pre-norm blocks
//     x = x + attn(ln_1(x))                      causal multi-head self-attention
//                                                (--attn-dropout, default 0)
//     x = x + dropout(c_proj(gelu(c_fc(ln_2(x)))))   MLP of width 4·n_embd
// then a final LayerNorm and an untied linear head over the 256 byte values.
// GPT-2 initialization: N(0, 0.02) weights, residual projections scaled by
// 1/sqrt(2·n_layer), zero biases.
//
// Data: the fortune files of Debian's `fortunes` package (every plain text
// file of /usr/share/games/fortunes, in name order, skipping the .dat and
// .u8 index files and symlinks), or any file or folder given with --data.
// The first 90% of the bytes train, the last 10% validate. Each step takes
// --batch-size windows of --seq-len + 1 bytes at offsets drawn with dtr's
// generator (dtr::randint) from the seed; validation uses fixed, evenly
// spaced windows and no randomness.
//
// Training: AdamW, linear warm-up then cosine decay to lr/10, gradient
// clipping by global norm. With --budget-fraction F the program measures the
// peak memory of a training step with no budget, then trains under F times
// that peak; the losses are bitwise those of a run with no budget.
// DTR_MEMORY_BUDGET caps memory the same way. --plan records one training
// step and prints what every budget would cost (dtr::remat::plan) without
// training; --budget-fraction auto trains under the smallest budget whose
// predicted slowdown is within --max-slowdown. --save / --resume write and
// read a checkpoint (weights, optimizer state, step, generator state) in
// safetensors form; a resumed run continues bitwise as if uninterrupted.
//
// Data-parallel: under `mpirun -np N`, --distributed mpi starts a process
// group of N ranks (nccl: one GPU per rank, where the build has NCCL and a
// GPU is present). --batch-size is the global batch: every rank draws the
// same B window offsets, and a dtr::data::DistributedSampler over them gives
// rank r the windows r, r + N, r + 2N, ... (B/N each). The model is wrapped
// in dtr::nn::parallel::DistributedDataParallel (rank 0's weights broadcast
// at wrap time, gradients averaged over the ranks in buckets while backward
// runs), so every rank takes the same step
// and holds bitwise the same parameters; dropout draws from a key of its own
// on each rank (rank 0's is the single-process key). Only rank 0 prints,
// evaluates, samples and writes --save; the logged training loss is the
// mean over the ranks. --zero shards the AdamW state over the ranks (ZeRO
// stage 1, optim's zero_redundancy). --budget-fraction applies per rank,
// to each rank's own measured peak. A checkpoint holds the full state
// whatever the world size, so it resumes with any number of ranks, or in one
// process without --distributed; a single-process run is bitwise what it was.
//
//   ./build/examples/train_gpt --budget-fraction 0.5
//   ./build/examples/train_gpt --plan --plan-svg plan.svg
//   ./build/examples/train_gpt --budget-fraction auto --max-slowdown 1.25
//   mpirun -np 2 ./build/examples/train_gpt --distributed mpi --zero --save gpt.safetensors
//   ./build/examples/train_gpt --help
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <dtr/dtr.h>

#include "common.h"
#include "eager/distributed/distributed.h"
#include "eager/nn/parallel/ddp.h"

namespace {

using dtr::Tensor;
using examples::DataError;
using examples::strprintf;
using examples::UsageError;

constexpr const char* kProgram = "train_gpt";
constexpr const char* kDefaultData = "/usr/share/games/fortunes";
constexpr const char* kCheckpointFormat = "dtr-train_gpt-1";
constexpr int64_t kVocab = 256;  // bytes

struct Config {
  // model
  int64_t n_layer = 4;
  int64_t n_embd = 64;
  int64_t n_head = 4;
  int64_t seq_len = 64;
  double dropout = 0.1;       // after the embeddings and in the MLPs
  double attn_dropout = 0.0;  // on the attention weights and the attention output
  // training
  int64_t steps = 900;
  int64_t stop_after = 0;  // 0: run to --steps
  int64_t batch_size = 32;
  double lr = 4e-3;
  int64_t warmup = 30;
  double weight_decay = 0.1;
  double grad_clip = 1.0;
  int64_t seed = 1337;
  // logging and evaluation
  int64_t log_interval = 50;
  int64_t eval_interval = 100;
  int64_t eval_batches = 8;
  int64_t sample_bytes = 300;
  double temperature = 0.8;
  // environment
  std::string data = kDefaultData;
  std::string device = "cpu";
  int64_t threads = 1;
  examples::BudgetFlag budget_fraction;
  examples::PlanFlags plan;
  std::string save, resume;
  // data parallelism
  std::string distributed;  // "", "mpi" or "nccl"
  bool zero = false;        // shard the optimizer state over the ranks
};

/// This process's place in a data-parallel job (rank 0 of 1 without --distributed).
struct Ranks {
  int rank = 0, world = 1;
  std::string device;  // this rank's device when it is not --device's (nccl: cuda:LOCAL_RANK)
  bool lead() const { return rank == 0; }
  const std::string& device_or(const std::string& flag) const { return device.empty() ? flag : device; }
};

// ---- data ----------------------------------------------------------------------

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(strprintf("cannot read %s: %s", path.c_str(), std::strerror(errno)));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw DataError(strprintf("error while reading %s", path.c_str()));
  return bytes;
}

/// The bytes of `path`: the file itself, or every plain text file of a
/// folder in name order (symlinks, sub-folders and the fortune index files
/// *.dat and *.u8 are skipped).
std::string load_text(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    if (path == kDefaultData) {
      throw DataError(strprintf(
          "no text at %s: install Debian's 'fortunes' package (sudo apt-get install fortunes) "
          "or pass --data FILE_OR_DIR",
          kDefaultData));
    }
    throw DataError(strprintf("--data %s: no such file or directory", path.c_str()));
  }
  if (!fs::is_directory(status)) return read_file(path);

  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
    if (e.is_symlink() || !e.is_regular_file()) continue;
    const std::string ext = e.path().extension().string();
    if (ext == ".dat" || ext == ".u8") continue;
    files.push_back(e.path());
  }
  if (ec) throw DataError(strprintf("cannot list %s: %s", path.c_str(), ec.message().c_str()));
  if (files.empty()) throw DataError(strprintf("--data %s: no text files in this folder", path.c_str()));
  std::sort(files.begin(), files.end());
  std::string text;
  for (const fs::path& f : files) text += read_file(f);
  return text;
}

struct Split {
  const uint8_t* data;
  int64_t size;
};

/// Inputs x and targets y (x shifted by one byte), both int64 (B, T).
struct Batch {
  Tensor x, y;
};

Batch make_batch(const Split& split, const std::vector<int64_t>& offsets, int64_t T) {
  const int64_t B = int64_t(offsets.size());
  std::vector<int64_t> x(size_t(B * T)), y(size_t(B * T));
  for (int64_t b = 0; b < B; ++b) {
    const uint8_t* p = split.data + offsets[size_t(b)];
    for (int64_t t = 0; t < T; ++t) {
      x[size_t(b * T + t)] = p[t];
      y[size_t(b * T + t)] = p[t + 1];
    }
  }
  return {dtr::from_vector(x, {B, T}), dtr::from_vector(y, {B, T})};
}

/// This rank's windows of a batch of B drawn from dtr's generator: every
/// rank draws the same B offsets, and the sampler picks this rank's B/world
/// of them (all B, in order, on one rank).
Batch sample_batch(const Split& split, int64_t B, int64_t T, const Ranks& ranks) {
  const std::vector<int64_t> offsets = dtr::randint(0, split.size - T, {B}).to_vector<int64_t>();
  const dtr::data::DistributedSampler sampler(
      B, {.num_replicas = ranks.world, .rank = ranks.rank, .shuffle = false, .drop_last = true});
  std::vector<int64_t> mine;
  for (const int64_t i : sampler.indices()) mine.push_back(offsets[size_t(i)]);
  return make_batch(split, mine, T);
}

// ---- model ----------------------------------------------------------------------

class MlpImpl : public dtr::nn::Module {
 public:
  MlpImpl(int64_t n_embd, double dropout) : Module("Mlp") {
    c_fc = register_module("c_fc", dtr::nn::Linear(n_embd, 4 * n_embd));
    c_proj = register_module("c_proj", dtr::nn::Linear(4 * n_embd, n_embd));
    drop = register_module("dropout", dtr::nn::Dropout(dropout));
  }
  /// x (B, T, C) → (B, T, C)
  Tensor forward(const Tensor& x) { return drop(c_proj(dtr::gelu(c_fc(x)))); }
  dtr::nn::Linear c_fc{nullptr}, c_proj{nullptr};
  dtr::nn::Dropout drop{nullptr};
};
TORCH_MODULE(Mlp);

class BlockImpl : public dtr::nn::Module {
 public:
  BlockImpl(int64_t n_embd, int64_t n_head, double dropout, double attn_dropout)
      : Module("Block") {
    const std::vector<int64_t> C{n_embd};
    ln_1 = register_module("ln_1", dtr::nn::LayerNorm(C));
    attn = register_module(
        "attn", dtr::nn::CausalSelfAttention(n_embd, n_head, attn_dropout));
    ln_2 = register_module("ln_2", dtr::nn::LayerNorm(C));
    mlp = register_module("mlp", Mlp(n_embd, dropout));
  }
  /// x (B, T, C) → (B, T, C)
  Tensor forward(const Tensor& x) {
    const Tensor h = x + attn(ln_1(x));
    return h + mlp(ln_2(h));
  }
  dtr::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  dtr::nn::CausalSelfAttention attn{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(Block);

class Gpt : public dtr::nn::Module {
 public:
  explicit Gpt(const Config& c) : Module("Gpt"), block_size(c.seq_len) {
    wte = register_module("wte", dtr::nn::Embedding(kVocab, c.n_embd));
    wpe = register_module("wpe", dtr::nn::Embedding(c.seq_len, c.n_embd));
    drop = register_module("drop", dtr::nn::Dropout(c.dropout));
    h = register_module("h", dtr::nn::Sequential());
    for (int64_t i = 0; i < c.n_layer; ++i)
      h->push_back(Block(c.n_embd, c.n_head, c.dropout, c.attn_dropout));
    ln_f = register_module("ln_f", dtr::nn::LayerNorm(std::vector<int64_t>{c.n_embd}));
    lm_head = register_module("lm_head", dtr::nn::Linear(c.n_embd, kVocab, false));
    init_gpt2(c.n_layer);
  }

  /// idx int64 (B, T) with T ≤ block_size → logits float32 (B, T, 256).
  Tensor forward(const Tensor& idx) {
    const Tensor pos = dtr::arange(idx.size(1), dtr::TensorOptions(dtr::kInt64).device(idx.device()));
    const Tensor x = drop(wte(idx) + wpe(pos));
    return lm_head(ln_f(h(x)));
  }

  int64_t block_size;
  dtr::Device device;  // where the weights live (--device)
  dtr::nn::Embedding wte{nullptr}, wpe{nullptr};
  dtr::nn::Dropout drop{nullptr};
  dtr::nn::Sequential h{nullptr};
  dtr::nn::LayerNorm ln_f{nullptr};
  dtr::nn::Linear lm_head{nullptr};

 private:
  // GPT-2's initialization: weights N(0, 0.02), the projections that write
  // into the residual stream N(0, 0.02/sqrt(2·n_layer)), biases zero,
  // LayerNorms left at ones and zeros.
  void init_gpt2(int64_t n_layer) {
    dtr::NoGradGuard no_grad;
    auto ends_with = [](const std::string& s, std::string_view suffix) {
      return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    for (auto& [name, p] : named_parameters()) {
      if (name.find("ln_") != std::string::npos) continue;
      if (ends_with(name, ".bias")) {
        p.zero_();
      } else if (ends_with(name, "c_proj.weight")) {
        p.copy_(dtr::nn::init::normal(p.shape(), 0.0, 0.02 / std::sqrt(2.0 * double(n_layer))));
      } else {
        p.copy_(dtr::nn::init::normal(p.shape(), 0.0, 0.02));
      }
    }
  }
};

Tensor loss_of(Gpt& model, const Batch& b) {
  // Batches are built in host memory, as a loader's are, and copied to the
  // model's device.
  const Tensor logits = model.forward(b.x.to(model.device));  // (B, T, V)
  const int64_t n = b.x.numel();
  return dtr::cross_entropy(logits.reshape({n, kVocab}), b.y.to(model.device).reshape({n}));
}

// ---- training ----------------------------------------------------------------------

/// Linear warm-up over `warmup` steps, then cosine decay to lr/10 at `steps`
/// (steps count from 1).
double lr_at(const Config& c, int64_t step) {
  const double min_lr = c.lr / 10;
  if (step <= c.warmup) return c.lr * double(step) / double(c.warmup);
  if (c.steps <= c.warmup) return c.lr;
  const double progress = double(step - c.warmup) / double(c.steps - c.warmup);
  return min_lr + 0.5 * (1.0 + std::cos(M_PI * std::min(progress, 1.0))) * (c.lr - min_lr);
}

/// Scales every gradient by min(1, max_norm / (total_norm + 1e-6)) when the
/// global L2 norm exceeds max_norm (torch.nn.utils.clip_grad_norm_), with
/// dtr ops. Returns the norm before clipping.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  dtr::NoGradGuard no_grad;
  std::vector<Tensor> grads, squares;
  for (const Tensor& p : params) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    squares.push_back(dtr::sum(g * g));
    grads.push_back(g);
  }
  if (grads.empty()) return 0.0;
  const Tensor total = dtr::sqrt(dtr::sum(dtr::stack(squares)));
  const double norm = total.item<double>();
  if (max_norm > 0 && norm > max_norm) {
    const Tensor coef = max_norm / (total + 1e-6);
    for (Tensor& g : grads) g.mul_(coef);
  }
  return norm;
}

struct Trainer {
  Ranks ranks;
  std::shared_ptr<Gpt> model;
  std::unique_ptr<dtr::nn::parallel::DistributedDataParallel> ddp;  // on more than one rank
  std::unique_ptr<dtr::optim::AdamW> opt;
};

/// A fresh model and optimizer from the seed: the same weights every time
/// (on every rank). With --zero the optimizer state is sharded over the ranks.
Trainer build(const Config& c, const Ranks& ranks) {
  dtr::manual_seed(uint64_t(c.seed));
  Trainer t;
  t.ranks = ranks;
  t.model = std::make_shared<Gpt>(c);
  // Initialised on the CPU from the seed, then moved: the same weights on every device.
  t.model->device = dtr::Device(ranks.device_or(c.device));
  t.model->to(t.model->device);
  if (ranks.world > 1) t.ddp = std::make_unique<dtr::nn::parallel::DistributedDataParallel>(t.model);
  t.opt = std::make_unique<dtr::optim::AdamW>(
      t.model->parameters(),
      dtr::optim::AdamWOptions(c.lr).betas(std::make_tuple(0.9, 0.95)).weight_decay(c.weight_decay).zero_redundancy(c.zero));
  return t;
}

/// The mean of `value` over the ranks (itself on one rank).
double mean_over_ranks(const Ranks& ranks, double value) {
  if (ranks.world == 1) return value;
  Tensor v = dtr::from_vector(std::vector<double>{value});
  dtr::distributed::all_reduce(v, dtr::distributed::ReduceOp::kMean);
  return v.item<double>();
}

/// Rank r > 0 draws its dropout masks under a key of its own, so the ranks'
/// shards do not share masks; every rank draws as many numbers, so the
/// generator's offset, and the state checkpoints save, stay alike on all.
/// Rank 0 keeps the generator's key: one rank draws what a single process does.
class RankDropoutKey {
 public:
  explicit RankDropoutKey(const Ranks& ranks) : shared_(dtr::get_rng_state()) {
    if (ranks.rank > 0) {
      dtr::set_rng_state({shared_.seed + 0x9E3779B97F4A7C15ull * uint64_t(ranks.rank), shared_.offset});
    }
  }
  ~RankDropoutKey() { dtr::set_rng_state({shared_.seed, dtr::get_rng_state().offset}); }
  RankDropoutKey(const RankDropoutKey&) = delete;
  RankDropoutKey& operator=(const RankDropoutKey&) = delete;

 private:
  dtr::RngState shared_;
};

/// One optimizer step at `step`; returns the loss (the mean over the ranks).
double train_step(const Config& c, Trainer& t, const Split& train, int64_t step) {
  t.opt->set_lr(lr_at(c, step));
  const Batch b = sample_batch(train, c.batch_size, c.seq_len, t.ranks);
  double value = 0;
  {
    const RankDropoutKey key(t.ranks);
    if (t.ddp) t.ddp->sync_buffers();  // where PyTorch's DDP forward broadcasts buffers
    const Tensor loss = loss_of(*t.model, b);
    value = loss.item<double>();
    // With DDP the gradients are averaged over the ranks during backward:
    // the mean of the ranks' shard means is the mean over the global batch.
    loss.backward();
  }
  clip_grad_norm(t.opt->params(), c.grad_clip);
  t.opt->step();
  // Gradients are dropped as soon as they are used, not at the next step:
  // their memory (and the lineage they hold) is free for evaluation.
  t.opt->zero_grad();
  return mean_over_ranks(t.ranks, value);
}

/// Mean loss over `batches` batches of fixed windows spread evenly over the
/// split, in eval mode and without gradients (draws nothing from the generator).
double evaluate(const Config& c, Gpt& model, const Split& split) {
  dtr::NoGradGuard no_grad;
  model.eval();
  const int64_t windows = c.eval_batches * c.batch_size;
  const int64_t span = split.size - c.seq_len - 1;
  double total = 0;
  for (int64_t i = 0; i < c.eval_batches; ++i) {
    std::vector<int64_t> offsets;
    for (int64_t j = 0; j < c.batch_size; ++j) {
      const int64_t w = i * c.batch_size + j;
      offsets.push_back(windows > 1 ? span * w / (windows - 1) : 0);
    }
    total += loss_of(model, make_batch(split, offsets, c.seq_len)).item<double>();
  }
  model.train();
  return total / double(c.eval_batches);
}

/// `n` bytes continuing a newline, each drawn from softmax(logits / temperature)
/// of the last position with a uniform draw from dtr's generator.
std::string generate(const Config& c, Gpt& model, int64_t n) {
  dtr::NoGradGuard no_grad;
  model.eval();
  dtr::manual_seed(uint64_t(c.seed));
  std::vector<int64_t> context{'\n'};
  std::string out;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t T = std::min<int64_t>(int64_t(context.size()), c.seq_len);
    const std::vector<int64_t> window(context.end() - T, context.end());
    const Tensor logits = model.forward(dtr::from_vector(window, {1, T}).to(model.device));  // (1, T, V)
    const Tensor last = logits.select(1, T - 1).select(0, 0);               // (V)
    const std::vector<float> probs = dtr::softmax(last / c.temperature, 0).to_vector<float>();
    const float u = dtr::rand({1}).item<float>();
    int64_t next = kVocab - 1;
    float cumulative = 0;
    for (int64_t v = 0; v < kVocab; ++v) {
      cumulative += probs[size_t(v)];
      if (u < cumulative) {
        next = v;
        break;
      }
    }
    context.push_back(next);
    const char ch = char(next);
    out += (ch == '\n' || ch == '\t' || (next >= 32 && next < 127)) ? ch : '?';
  }
  model.train();
  return out;
}

// ---- checkpoints ---------------------------------------------------------------------

std::map<std::string, std::string> checkpoint_metadata(const Config& c) {
  return {{"format", kCheckpointFormat},
          {"steps", std::to_string(c.steps)},
          {"n_layer", std::to_string(c.n_layer)},
          {"n_embd", std::to_string(c.n_embd)},
          {"n_head", std::to_string(c.n_head)},
          {"seq_len", std::to_string(c.seq_len)}};
}

/// Weights ("model.*"), optimizer state ("optimizer.*"), the number of steps
/// done and the generator state ("trainer.*"), written by rank 0. Every rank
/// calls it: a sharded optimizer state is first gathered onto rank 0, so the
/// file holds the full state in the unsharded layout, whatever the world size.
void save_checkpoint(const Config& c, const Trainer& t, int64_t step, const std::string& path) {
  if (t.opt->zero_redundancy()) t.opt->consolidate_state_dict(0);
  if (!t.ranks.lead()) return;
  dtr::StateDict all;
  for (const auto& [name, tensor] : t.model->state_dict()) all.insert("model." + name, tensor);
  for (const auto& [name, tensor] : t.opt->state_dict()) all.insert("optimizer." + name, tensor);
  const dtr::RngState rng = dtr::get_rng_state();
  all.insert("trainer.step", dtr::from_vector(std::vector<int64_t>{step}));
  all.insert("trainer.rng", dtr::from_vector(std::vector<int64_t>{int64_t(rng.seed),
                                                                 int64_t(rng.offset)}));
  std::map<std::string, std::string> meta = checkpoint_metadata(c);
  meta["world_size"] = std::to_string(t.ranks.world);  // for the record; any world size resumes
  try {
    dtr::save(path, all, meta);
  } catch (const dtr::Error& e) {
    throw DataError(strprintf("cannot save the checkpoint: %s", e.what()));
  }
}

/// Restores a checkpoint written by save_checkpoint into `t`; returns the
/// number of steps it had done. The model flags must match the checkpoint's.
int64_t load_checkpoint(const Config& c, Trainer& t, const std::string& path) {
  std::map<std::string, std::string> meta;
  dtr::StateDict all;
  try {
    all = dtr::load(path, &meta);
  } catch (const dtr::Error& e) {
    throw DataError(strprintf("cannot resume: %s", e.what()));
  }
  if (meta["format"] != kCheckpointFormat) {
    throw DataError(strprintf("cannot resume: %s is not a train_gpt checkpoint", path.c_str()));
  }
  const std::map<std::string, std::string> want = checkpoint_metadata(c);
  const std::map<std::string, std::string> flag_of = {
      {"n_layer", "--layers"}, {"n_embd", "--n-embd"}, {"n_head", "--heads"}, {"seq_len", "--seq-len"}};
  for (const auto& [key, flag] : flag_of) {
    if (meta[key] != want.at(key)) {
      throw DataError(strprintf("cannot resume: %s was trained with %s %s, this run has %s %s",
                                path.c_str(), flag.c_str(), meta[key].c_str(), flag.c_str(),
                                want.at(key).c_str()));
    }
  }
  dtr::StateDict model_state, opt_state;
  for (const auto& [name, tensor] : all) {
    if (name.rfind("model.", 0) == 0) model_state.insert(name.substr(6), tensor);
    if (name.rfind("optimizer.", 0) == 0) opt_state.insert(name.substr(10), tensor);
  }
  const Tensor* step = all.find("trainer.step");
  const Tensor* rng = all.find("trainer.rng");
  if (step == nullptr || rng == nullptr || rng->numel() != 2) {
    throw DataError(strprintf("cannot resume: %s lacks the trainer state", path.c_str()));
  }
  try {
    t.model->load_state_dict(model_state);
    t.opt->load_state_dict(opt_state);
  } catch (const dtr::Error& e) {
    throw DataError(strprintf("cannot resume from %s: %s", path.c_str(), e.what()));
  }
  const std::vector<int64_t> r = rng->to_vector<int64_t>();
  dtr::set_rng_state({uint64_t(r[0]), uint64_t(r[1])});
  if (meta["steps"] != std::to_string(c.steps)) {
    std::printf("note: %s was written by a run of --steps %s; the learning-rate schedule now "
                "follows --steps %lld, so the run differs from one made in one go\n",
                path.c_str(), meta["steps"].c_str(), static_cast<long long>(c.steps));
  }
  return step->item<int64_t>();
}

// ---- main -------------------------------------------------------------------------------

Config parse_flags(int argc, char** argv, bool* help) {
  Config c;
  examples::FlagParser flags(
      kProgram,
      "train_gpt: trains a byte-level GPT on text (by default the fortunes of Debian's "
      "'fortunes' package)\nunder an optional memory budget, then prints a sample of its text.");
  flags.add("data", &c.data, "text file, or folder of text files, to train on");
  flags.add("steps", &c.steps, "optimizer steps of the schedule");
  flags.add("stop-after", &c.stop_after,
            "stop after this step (0: at --steps); with --save, the rest runs with --resume");
  flags.add("batch-size", &c.batch_size, "sequences per step");
  flags.add("seq-len", &c.seq_len, "bytes per sequence (the context length)");
  flags.add("layers", &c.n_layer, "transformer blocks");
  flags.add("n-embd", &c.n_embd, "width of the residual stream (alias --width)");
  flags.add("width", &c.n_embd, "same as --n-embd");
  flags.add("heads", &c.n_head, "attention heads (must divide --n-embd)");
  flags.add("dropout", &c.dropout, "dropout probability after the embeddings and in the MLPs");
  flags.add("attn-dropout", &c.attn_dropout,
            "dropout probability of the attention weights and output (costly: B x heads x T x T draws)");
  flags.add("lr", &c.lr, "peak learning rate (cosine decay to lr/10)");
  flags.add("warmup", &c.warmup, "linear warm-up steps");
  flags.add("weight-decay", &c.weight_decay, "AdamW weight decay");
  flags.add("grad-clip", &c.grad_clip, "clip gradients to this global norm (0: off)");
  flags.add("seed", &c.seed, "seed of weights, batches, dropout and the sample");
  flags.add("device", &c.device, "cpu, cuda or cuda:N (the model, its batches and the budget's device)");
  flags.add("threads", &c.threads,
            "kernel threads (0: all cores; on a busy 2-core machine one thread is faster)");
  flags.add("log-interval", &c.log_interval, "steps between log lines");
  flags.add("eval-interval", &c.eval_interval, "steps between validation losses");
  flags.add("eval-batches", &c.eval_batches, "batches per validation loss");
  flags.add("sample-bytes", &c.sample_bytes, "bytes of text to generate at the end (0: none)");
  flags.add("temperature", &c.temperature, "sampling temperature of the generated text");
  examples::add_budget_flags(flags, &c.budget_fraction, &c.plan);
  flags.add("save", &c.save, "write a checkpoint here at the end");
  flags.add("resume", &c.resume, "continue from this checkpoint (written with any number of ranks)");
  flags.add("distributed", &c.distributed,
            "data-parallel over the ranks of mpirun: mpi (CPU) or nccl (GPUs); empty: one process");
  flags.add("zero", &c.zero,
            "with --distributed: shard the optimizer state over the ranks (ZeRO stage 1)");
  *help = !flags.parse(argc, argv);
  if (*help) return c;

  using examples::require;
  require(c.steps >= 1, "--steps must be at least 1");
  require(c.stop_after >= 0 && c.stop_after <= c.steps, "--stop-after must be in [0, --steps]");
  require(c.batch_size >= 1, "--batch-size must be at least 1");
  require(c.seq_len >= 1 && c.seq_len <= 65536, "--seq-len must be in [1, 65536]");
  require(c.n_layer >= 1, "--layers must be at least 1");
  require(c.n_embd >= 1 && c.n_head >= 1, "--n-embd and --heads must be at least 1");
  require(c.n_embd % c.n_head == 0,
          strprintf("--heads (%lld) must divide --n-embd (%lld)", static_cast<long long>(c.n_head),
                    static_cast<long long>(c.n_embd)));
  require(c.dropout >= 0 && c.dropout < 1, "--dropout must be in [0, 1)");
  require(c.attn_dropout >= 0 && c.attn_dropout < 1, "--attn-dropout must be in [0, 1)");
  require(c.lr > 0, "--lr must be positive");
  require(c.warmup >= 0, "--warmup must be non-negative");
  require(c.weight_decay >= 0, "--weight-decay must be non-negative");
  require(c.grad_clip >= 0, "--grad-clip must be non-negative");
  require(c.seed >= 0, "--seed must be non-negative");
  require(c.threads >= 0, "--threads must be non-negative");
  require(c.log_interval >= 1, "--log-interval must be at least 1");
  require(c.eval_interval >= 1, "--eval-interval must be at least 1");
  require(c.eval_batches >= 1, "--eval-batches must be at least 1");
  require(c.sample_bytes >= 0, "--sample-bytes must be non-negative");
  require(c.temperature > 0, "--temperature must be positive");
  examples::check_budget_flags(c.budget_fraction, c.plan);
  examples::check_device(c.device);
  require(c.distributed.empty() || c.distributed == "mpi" || c.distributed == "nccl",
          "--distributed must be mpi or nccl, got '" + c.distributed + "'");
  require(!c.zero || !c.distributed.empty(), "--zero needs --distributed (it shards over the ranks)");
  return c;
}

/// Starts the process group of --distributed (every rank of mpirun runs
/// this); ranks other than 0 print nothing on stdout from here on.
Ranks start_ranks(const Config& c) {
  Ranks ranks;
  if (c.distributed.empty()) return ranks;
  try {
    dtr::distributed::init_process_group(c.distributed);
  } catch (const dtr::Error& e) {
    throw DataError(strprintf("--distributed %s: %s", c.distributed.c_str(), e.what()));
  }
  ranks.rank = dtr::distributed::get_rank();
  ranks.world = dtr::distributed::get_world_size();
  if (c.distributed == "nccl" && c.device == "cpu") {
    throw UsageError("--distributed nccl moves CUDA tensors: give --device cuda (each rank its own GPU), "
                     "or use --distributed mpi");
  }
  // nccl: each rank's model goes on the GPU its group runs on
  // (cuda:LOCAL_RANK); "--device cuda" means that one on every rank.
  if (c.distributed == "nccl") {
    const dtr::Device mine = dtr::distributed::world()->device();
    if (c.device == "cuda") {
      ranks.device = mine.str();
    } else if (dtr::Device(c.device) != mine) {
      throw UsageError(strprintf("--device %s: rank %d's nccl group runs on %s (its local rank); give "
                                 "--device cuda to put each rank's model on its own GPU",
                                 c.device.c_str(), ranks.rank, mine.str().c_str()));
    }
  }
  if (!ranks.lead() && std::freopen("/dev/null", "w", stdout) == nullptr) {
    throw DataError("cannot silence the standard output of rank " + std::to_string(ranks.rank));
  }
  examples::require(c.batch_size % ranks.world == 0,
                    strprintf("--batch-size (%lld) must be a multiple of the number of ranks (%d)",
                              static_cast<long long>(c.batch_size), ranks.world));
  return ranks;
}

int run(int argc, char** argv) {
  bool help = false;
  const Config c = parse_flags(argc, argv, &help);
  if (help) return examples::kExitOk;
  if (c.threads > 0) dtr::set_num_threads(int(c.threads));
  const Ranks ranks = start_ranks(c);

  if (!c.save.empty()) examples::check_writable(c.save, "--save");
  const std::string text = load_text(c.data);
  const int64_t n_train = int64_t(text.size()) * 9 / 10;
  const Split train{reinterpret_cast<const uint8_t*>(text.data()), n_train};
  const Split val{train.data + n_train, int64_t(text.size()) - n_train};
  if (val.size < c.seq_len + 2) {
    throw DataError(strprintf("%s has %zu bytes: too little text for --seq-len %lld (the "
                              "validation tenth needs at least %lld bytes)",
                              c.data.c_str(), text.size(), static_cast<long long>(c.seq_len),
                              static_cast<long long>(c.seq_len + 2)));
  }

  // --plan and --budget-fraction measure steps 1, 2, ... of a throw-away model.
  const examples::StepMaker make_step = [&] {
    auto probe = std::make_shared<Trainer>(build(c, ranks));
    return std::function<void()>([&c, &train, probe, step = int64_t(0)]() mutable {
      train_step(c, *probe, train, ++step);
    });
  };
  if (c.plan.plan) return examples::run_plan(c.plan, make_step, dtr::Device(ranks.device_or(c.device)));
  const examples::BudgetPlan plan =
      examples::plan_budget(c.budget_fraction, c.plan.max_slowdown, make_step,
                              dtr::Device(ranks.device_or(c.device)));

  Trainer t = build(c, ranks);
  int64_t n_params = 0;
  for (const Tensor& p : t.model->parameters()) n_params += p.numel();
  int64_t first = 1;
  if (!c.resume.empty()) first = load_checkpoint(c, t, c.resume) + 1;
  const int64_t last = c.stop_after > 0 ? c.stop_after : c.steps;

  std::printf("train_gpt: %.2fM parameters (layers %lld, n_embd %lld, heads %lld, context %lld), "
              "device %s\n",
              double(n_params) / 1e6, static_cast<long long>(c.n_layer),
              static_cast<long long>(c.n_embd), static_cast<long long>(c.n_head),
              static_cast<long long>(c.seq_len), ranks.device_or(c.device).c_str());
  std::printf("data: %s, %zu bytes (train %lld, validation %lld)\n", c.data.c_str(), text.size(),
              static_cast<long long>(train.size), static_cast<long long>(val.size));
  std::printf("training: steps %lld to %lld of %lld, batch %lld x %lld bytes, AdamW lr %g "
              "(warm-up %lld, cosine to %g), clip %g, dropout %g (attention %g), seed %lld\n",
              static_cast<long long>(first), static_cast<long long>(last),
              static_cast<long long>(c.steps), static_cast<long long>(c.batch_size),
              static_cast<long long>(c.seq_len), c.lr, static_cast<long long>(c.warmup), c.lr / 10,
              c.grad_clip, c.dropout, c.attn_dropout, static_cast<long long>(c.seed));
  if (!c.resume.empty()) std::printf("resumed from %s after step %lld\n", c.resume.c_str(),
                                     static_cast<long long>(first - 1));
  if (!c.distributed.empty()) {
    std::printf("distributed: %s, %d ranks, %lld windows per rank, gradients averaged over the "
                "ranks, optimizer state %s; memory figures are rank 0's\n",
                c.distributed.c_str(), ranks.world, static_cast<long long>(c.batch_size / ranks.world),
                c.zero ? "sharded over the ranks (ZeRO stage 1)" : "replicated");
  }
  std::printf("%s\n", examples::budget_line(plan).c_str());
  std::fflush(stdout);

  examples::StepStats run_stats(t.model->device);
  examples::Progress progress(first - 1, last, /*bar=*/c.distributed.empty());
  dtr::remat::Stats interval_start = run_stats.total();
  double interval_seconds = 0, train_seconds = 0, loss_sum = 0;
  int64_t interval_steps = 0;
  double last_loss = NAN, last_val = NAN;
  for (int64_t step = first; step <= last; ++step) {
    run_stats.begin_step();
    const auto t0 = examples::Clock::now();
    const double loss = train_step(c, t, train, step);
    const double seconds = examples::seconds_since(t0);
    examples::log_step(step, seconds, run_stats.step());
    interval_seconds += seconds;
    train_seconds += seconds;
    loss_sum += loss;
    ++interval_steps;
    last_loss = loss;
    const double tokens_per_second =
        double(interval_steps * c.batch_size * c.seq_len) / std::max(interval_seconds, 1e-9);
    progress.update(step, strprintf("loss %.4f | %.0f tok/s", loss, tokens_per_second));

    const bool eval_now = step % c.eval_interval == 0 || step == last;
    if (step % c.log_interval == 0 || eval_now || step == first) {
      const dtr::remat::Stats now = run_stats.total();
      std::string line = strprintf("step %5lld/%lld | loss %.9g", static_cast<long long>(step),
                                   static_cast<long long>(c.steps), loss_sum / double(interval_steps));
      if (eval_now && ranks.lead()) {
        last_val = evaluate(c, *t.model, val);
        line += strprintf(" | val %.9g", last_val);
      }
      line += strprintf(" | %.0f tok/s | ", tokens_per_second) +
              examples::memory_columns(now, interval_start, interval_seconds);
      progress.line(line);
      interval_start = run_stats.total();
      interval_seconds = loss_sum = 0;
      interval_steps = 0;
    }
  }
  progress.finish();

  const int64_t done = std::max(first - 1, last);  // a resumed run may have nothing left to do
  if (!c.save.empty()) {
    save_checkpoint(c, t, done, c.save);
    std::printf("saved checkpoint %s (step %lld)\n", c.save.c_str(), static_cast<long long>(done));
  }
  const dtr::remat::Stats stats = run_stats.total();
  if (c.zero) {
    std::printf("optimizer state on rank 0: %s (sharded over %d rank(s))\n",
                examples::mib(t.opt->state_nbytes()).c_str(), ranks.world);
  }
  if (!ranks.lead()) {
    dtr::distributed::destroy_process_group();
    return examples::kExitOk;
  }
  if (std::isnan(last_val)) last_val = evaluate(c, *t.model, val);
  std::printf("validation loss %.4f (%.3f bits per byte) after step %lld", last_val,
              last_val / std::log(2.0), static_cast<long long>(done));
  if (!std::isnan(last_loss)) std::printf("; last train loss %.4f", last_loss);
  std::printf("\n");
  if (c.sample_bytes > 0) {
    std::printf("sample (temperature %g, seed %lld):\n%s\n", c.temperature,
                static_cast<long long>(c.seed), std::string(60, '-').c_str());
    std::printf("%s\n%s\n", generate(c, *t.model, c.sample_bytes).c_str(),
                std::string(60, '-').c_str());
  }
  std::printf("%s\n", examples::stats_line(stats, plan, train_seconds).c_str());
  std::printf("%s\n", examples::summary_line(stats, plan, train_seconds).c_str());
  if (!c.distributed.empty()) dtr::distributed::destroy_process_group();
  return examples::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  return examples::run_main(kProgram, [&] { return run(argc, argv); });
}
