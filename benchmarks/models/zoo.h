// The model zoo of the budget sweep (benchmarks/budget_sweep.cpp): eight
// training workloads built from dtr::nn modules and dtr ops, each with fixed
// shapes, a fixed seed and random inputs made once and loaded as constants,
// as a data loader's batches are (no data files). The
// first five form the default sweep; llama, unet_gn and moe run by name
// (--models). benchmarks/pytorch_zoo.py builds the same models with the same
// shapes in PyTorch.
//
//   chain   64 × (Linear 512→512, GELU), batch 256, mse_loss against a
//           fixed random target; SGD (lr 0.01, momentum 0.9); chain_b2048
//           is the same at batch 2048 (for the Revolve comparison)
//   gpt     GPT-2 layout, pre-LayerNorm, 6 blocks, d_model 256, 8 heads,
//           sequence 256, batch 8, vocab 256, MLP 4·d with GELU, dropout 0.1
//           after the embeddings and on the MLP output (none on the
//           attention weights), untied lm_head without bias,
//           cross_entropy; AdamW (lr 3e-4, weight_decay 0.01)
//   resnet  ResNet-20 (3 stages × 3 basic blocks, widths 16/32/64, BatchNorm,
//           1×1 projection shortcuts) on 1×28×28 inputs, batch 64,
//           10 classes, cross_entropy; SGD (lr 0.1, momentum 0.9)
//   unet    3-level U-Net on 3×64×64 inputs, batch 16, widths 16/32/64:
//           blocks of two (conv 3×3, BatchNorm, ReLU); max_pool2d(2) down,
//           nearest 2× upsampling (unsqueeze/expand/reshape) up, skip
//           connections joined with cat; per-pixel cross_entropy over 4
//           classes; SGD (lr 0.01, momentum 0.9)
//   lstm    one LSTM layer unrolled over 128 steps, input 256, hidden 256,
//           batch 32, composed from linear/chunk/sigmoid/tanh/mul/add; loss
//           the mean squared error of every step's output against a fixed
//           random target; AdamW (lr 1e-3, weight_decay 0.01)
//   llama   LLaMA layout, 4 pre-RMSNorm blocks, d_model 128, 8 query heads
//           and 2 key/value heads (grouped-query attention, k/v expanded
//           with repeat_interleave), rotary position embeddings
//           (rotate-half, angles from sin/cos), causal
//           scaled_dot_product_attention, SwiGLU MLP (hidden 352), no
//           biases, sequence 128, batch 8, vocab 256, untied lm_head,
//           cross_entropy; AdamW (lr 1e-3, weight_decay 0.01)
//   unet_gn 3-level U-Net on 3×32×32 inputs, batch 8, widths 16/32/64:
//           blocks of two (conv 3×3, GroupNorm(4), SiLU); max_pool2d(2)
//           down, ConvTranspose2d(2, stride 2) up, skip connections joined
//           with cat; per-pixel cross_entropy over 4 classes; SGD (lr 0.01,
//           momentum 0.9)
//   moe     4 pre-RMSNorm residual layers of a top-2 mixture of 8 experts
//           (Linear 64→128, SiLU, Linear 128→64) on 2048 tokens of width
//           64: softmax router, topk(2), renormalized gates, sparse
//           dispatch (index_select per expert, index_add back), Switch
//           load-balancing loss (weight 0.01); mse_loss against a fixed
//           random target; AdamW (lr 1e-3, weight_decay 0.01)
//
// Every step is zero_grad, forward, loss, backward, optimizer step.
// Mode::kCheckpoint runs the same step with static checkpointing (Chen et
// al. 2016): the model's N units (layers, blocks or time steps) are split
// into round(√N) segments and only segment boundaries are kept
// (dtr::checkpoint_sequential / dtr::checkpoint); see each model for its units.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "dtr/dtr.h"
#include "eager/checkpoint.h"

namespace dtr::zoo {

/// How a training step runs its forward pass.
enum class Mode {
  kPlain,       // ordinary eager code: every activation autograd saves is kept
  kCheckpoint,  // static checkpointing of round(√N) segments
};

/// One model with its optimizer and fixed inputs, ready to train.
class Workload {
 public:
  virtual ~Workload() = default;
  Workload(const Workload&) = delete;
  Workload& operator=(const Workload&) = delete;

  /// One training step: optimizer.zero_grad(), forward, loss, backward,
  /// optimizer.step(). Returns the loss (a float32 scalar, as double).
  /// Throws dtr::OutOfMemoryError when the memory budget is too small; the
  /// workload may then be left mid-step and should be dropped.
  double step(Mode mode = Mode::kPlain);

  /// Bytes of the parameters (float32), for reports.
  int64_t parameter_bytes() const;

  // Data parallelism (benchmarks/distributed.cpp).
  /// step() in two: zero_grad, forward, loss and backward (returns the loss);
  /// then optimizer().step().
  double forward_backward(Mode mode = Mode::kPlain);
  optim::Optimizer& optimizer() { return *optimizer_; }
  /// The model, e.g. to wrap in DistributedDataParallel.
  const std::shared_ptr<nn::Module>& model() const { return model_; }
  /// Keeps rank `rank`'s share of the fixed batch, rows [rank·B/world,
  /// (rank+1)·B/world) of the inputs and targets, so that `world` ranks
  /// together train on the batch one process trains on. Throws ValueError
  /// unless world divides the batch, NotImplementedError for a model
  /// without it (gpt and the chains have it).
  virtual void shard_batch(int rank, int world);
  /// Rebuilds the optimizer (same class and hyperparameters, no state yet)
  /// with its state sharded over distributed::world() (zero_redundancy).
  void shard_optimizer_state();
  /// Where the model, its inputs and its optimizer state live.
  Device device() const { return device_; }
  /// The fixed inputs and targets (constants: see loaded()), current values.
  std::vector<Tensor> inputs() const;

 protected:
  Workload() = default;
  /// Forward and loss of the fixed batch: a float32 scalar that requires grad.
  virtual Tensor loss(Mode mode) = 0;
  /// Moves model_ (nn::Module::to) to `device`, replaces each of `fixed`
  /// (the inputs and targets, members of the model that live as long as it)
  /// by loaded(*t, device) and records the device in device_ and the list
  /// for inputs(); the optimizer is built after. Throws DeviceError for an
  /// absent device.
  void place_on(Device device, std::initializer_list<Tensor*> fixed);

  std::shared_ptr<nn::Module> model_;
  std::vector<Tensor*> inputs_;  // members of the derived class, set by place_on
  std::unique_ptr<optim::Optimizer> optimizer_;
  Device device_{kCPU};
};

/// Times of training steps. CPU time is that of the whole process (every
/// thread): on a machine shared with other work it stays close to the work
/// done, where wall-clock time also counts the time spent waiting for a core.
struct StepTimes {
  double median_ms = 0, min_ms = 0;          // wall clock
  double median_cpu_ms = 0, min_cpu_ms = 0;  // CLOCK_PROCESS_CPUTIME_ID
  double loss = 0;                           // of the last step
  std::vector<double> wall_ms, cpu_ms;       // every step's, in order
};

/// Runs `steps` (>= 1) training steps of `workload` and returns every
/// step's times (milliseconds) with the median and minimum of each. Throws ValueError for steps < 1; whatever
/// Workload::step throws passes through.
StepTimes time_steps(Workload& workload, Mode mode, int steps);

/// A chain's sizes (benchmarks/models/chain.cpp), for the Revolve
/// comparison of the budget sweep: `layers` × (Linear width→width, GELU) on
/// a (batch, width) float32 input.
struct ChainShape {
  int64_t layers = 0, batch = 0, width = 0;
};

/// Builds a workload: `seed` and `device` as ModelSpec::make documents.
/// Called with a seed alone, it builds on the CPU.
class Factory {
 public:
  using Fn = std::function<std::unique_ptr<Workload>(uint64_t seed, Device device)>;
  Factory() = default;
  /// Any callable (seed, device) → unique_ptr<Workload>; implicit, as the
  /// std::function it wraps.
  template <typename F>
    requires std::is_invocable_r_v<std::unique_ptr<Workload>, F, uint64_t, Device>
  Factory(F f) : fn_(std::move(f)) {}  // NOLINT(google-explicit-constructor)
  std::unique_ptr<Workload> operator()(uint64_t seed, Device device = Device(kCPU)) const {
    return fn_(seed, device);
  }

 private:
  Fn fn_;
};

/// A zoo entry: its name, a one-line description and a factory.
struct ModelSpec {
  std::string name;
  std::string description;  // shapes and optimizer, for reports
  /// Units static checkpointing splits into segments (layers, blocks, steps).
  int64_t checkpoint_units = 0;
  /// Builds the model and its inputs on the CPU after dtr::manual_seed(seed),
  /// so two calls with one seed give bitwise the same workload; then moves
  /// the model (nn::Module::to) and the fixed inputs and targets
  /// (Tensor::to) to `device` (default: the CPU, where moving is a no-op)
  /// and builds the optimizer there. Every device thus trains from the same
  /// bytes. Throws DeviceError for a device that does not exist.
  Factory make;
  /// Part of the default model list of the sweep.
  bool in_default_sweep = true;
  /// Set for the chains: their sizes, for the Revolve comparison.
  std::optional<ChainShape> chain;
};

/// The eight models in the order of the header comment (llama, unet_gn and
/// moe not in the default sweep), then chain_b2048:
/// the chain at batch 2048, where activations outweigh the bytes that are
/// never evictable (parameters, gradients, momentum) 2.5 to 1, so budgets
/// that force recomputation are feasible (not in the default sweep).
const std::vector<ModelSpec>& models();
/// The entry called `name`; ValueError listing the known names otherwise.
const ModelSpec& find_model(std::string_view name);

/// Segments static checkpointing uses for `units` units: round(√units), at
/// least 1 (Chen et al. 2016). Throws ValueError for units < 1.
int64_t checkpoint_segments(int64_t units);

/// Applies `layers` to `x` in order. Mode::kPlain calls them one after the
/// other; Mode::kCheckpoint uses dtr::checkpoint_sequential with
/// checkpoint_segments(layers.size()) segments.
/// Rows [rank·n/world, (rank+1)·n/world) of `t` (n = t.size(0)), loaded
/// (below) on t's device: a rank's share of a batch
/// (Workload::shard_batch). ValueError unless world divides n and rank is
/// in [0, world).
Tensor batch_rows(const Tensor& t, int rank, int world);

/// A batch as a data loader hands it to a training loop: a copy of `t`'s
/// values (float32 or int64, any shape) made on `device` from host memory,
/// a constant with no lineage (dtr::from_vector), so that it is never
/// evicted and no replay redraws it. The zoo draws its inputs with
/// randn/randint from the model's seed and loads them through this.
/// Throws TypeError for another dtype, DeviceError for an absent device.
Tensor loaded(const Tensor& t, Device device);

Tensor run_sequential(const std::vector<std::function<Tensor(const Tensor&)>>& layers, Mode mode,
                      const Tensor& x);

/// One unit of a model that is no chain (a U-Net block with its skip input,
/// layers carrying a side output): fn(inputs) under Mode::kPlain,
/// dtr::checkpoint(fn, inputs) under Mode::kCheckpoint.
std::vector<Tensor> run_unit(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                             Mode mode, const std::vector<Tensor>& inputs);
/// The same for one input and one output.
Tensor run_unit(const std::function<Tensor(const Tensor&)>& fn, Mode mode, const Tensor& x);

// Factories, one per model file.
std::unique_ptr<Workload> make_chain(const ChainShape& shape, uint64_t seed, Device device = Device(kCPU));
std::unique_ptr<Workload> make_gpt(uint64_t seed, Device device = Device(kCPU));
std::unique_ptr<Workload> make_resnet(uint64_t seed, Device device = Device(kCPU));
std::unique_ptr<Workload> make_unet(uint64_t seed, Device device = Device(kCPU));
std::unique_ptr<Workload> make_lstm(uint64_t seed, Device device = Device(kCPU));
std::unique_ptr<Workload> make_llama(uint64_t seed, Device device = Device(kCPU));
std::unique_ptr<Workload> make_unet_gn(uint64_t seed, Device device = Device(kCPU));
std::unique_ptr<Workload> make_moe(uint64_t seed, Device device = Device(kCPU));

}  // namespace dtr::zoo
