// Optimizers with torch.optim semantics: SGD (momentum, dampening, weight
// decay, Nesterov) and AdamW (decoupled weight decay, bias correction,
// optional AMSGrad). step() runs under NoGradGuard with in-place ops, so the
// updated parameters stay constants of the remat runtime (Note [mutation]).
// state_dict()/load_state_dict() carry step counts, moment buffers and
// hyperparameters, so a run resumed from them continues bitwise.
//
//   dtr::optim::AdamW opt(model.parameters(), dtr::optim::AdamWOptions(3e-4).weight_decay(0.1));
//   opt.zero_grad(); loss.backward(); opt.step();
//
// Optimizer-state sharding (ZeRO stage 1, PyTorch's
// torch.distributed.optim.ZeroRedundancyOptimizer) is an option of both:
//
//   dtr::optim::AdamW opt(ddp.parameters(), dtr::optim::AdamWOptions(3e-4).zero_redundancy(true));
//
// The parameters, in constructor order, are one flat sequence of elements per
// dtype, cut into `world` contiguous shards of ceil(numel / world) elements;
// rank r allocates state (momentum, exp_avg, ...) only for the elements of
// shard r, updates only those elements of the parameters from the full
// (already all-reduced) gradients, then the shards are all-gathered
// (distributed::all_gather_into_tensor, in rounds of at most 8 MiB gathered)
// so every rank holds every parameter again. The formulas are elementwise,
// so the parameters and state are bitwise those of the unsharded optimizer.
// The state is a constant of the remat runtime, never evictable: sharding it
// lowers the floor under every budget by (world−1)/world of the state.
// Checkpoints: consolidate_state_dict(to) on every rank, then state_dict()
// on rank `to` gives the full state in exactly the unsharded layout, which
// loads into an optimizer of any sharding, or none.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "eager/arg.h"
#include "eager/nn/state_dict.h"
#include "eager/tensor.h"

namespace dtr::distributed {
class ProcessGroup;
}  // namespace dtr::distributed

namespace dtr::optim {

/// Base of the optimizers: one parameter group over `params` (leaves that
/// require grad; ValueError otherwise or when the list is empty).
class Optimizer {
 public:
  Optimizer(std::vector<Tensor> params, std::string name);
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter that has a grad; parameters whose grad
  /// is undefined are skipped (and keep their state), like PyTorch. Sharded
  /// (zero_redundancy), it is a collective: every rank of the group calls
  /// it, with the same gradients defined (DDP makes them so), and it ends
  /// with the all-gather of the parameters. Throws ValueError for invalid
  /// hyperparameters, DistributedError when the gather fails.
  virtual void step();
  /// Sets every parameter's grad to undefined (zero_grad(set_to_none=True)).
  void zero_grad();

  /// Entries (all 0-d unless a buffer):
  ///   "state.<i>.step"      int64, for optimizers that count steps (AdamW)
  ///   "state.<i>.<buffer>"  moment buffers, shaped like parameter i
  ///   "param_groups.0.<hp>" float64 hyperparameters (lr, betas, ...)
  /// Parameter i is the i-th tensor given to the constructor (PyTorch numbers
  /// parameters the same way). Buffers are detached handles, not copies.
  /// Sharded, the full state exists only after consolidate_state_dict(to):
  /// on rank `to` this returns it (owned copies, in the layout above, equal
  /// bitwise to the unsharded optimizer's), on any other rank, or before
  /// consolidating, or after a step or load since, it throws ValueError
  /// (ZeroRedundancyOptimizer.state_dict's RuntimeError).
  StateDict state_dict() const;
  /// Restores what state_dict() returned (buffers are copied). Throws
  /// ValueError naming the key for an unknown or missing key, a parameter
  /// index out of range, or a buffer whose shape differs from its parameter's;
  /// on error nothing changes. Sharded, the dict is the full state (from any
  /// world size, sharded or not) and each rank keeps the elements of its own
  /// shard; no collective runs.
  void load_state_dict(const StateDict& state);

  /// ZeroRedundancyOptimizer.consolidate_state_dict(to): gathers the sharded
  /// state onto rank `to` of the group for the next state_dict() there. A
  /// collective: every rank calls it. Unsharded it does nothing. Throws
  /// ValueError when `to` is not a rank of the group, DistributedError when
  /// the gather fails.
  void consolidate_state_dict(int to = 0);

  /// Whether the state is sharded over a process group (the option
  /// zero_redundancy of SGDOptions / AdamWOptions).
  bool zero_redundancy() const { return sharding_ != nullptr; }
  /// The group the state is sharded over; null when unsharded.
  std::shared_ptr<distributed::ProcessGroup> process_group() const;
  /// Bytes of the state tensors this rank holds (momentum, exp_avg, ...; not
  /// the parameters or gradients): about 1/world of the unsharded figure
  /// when sharded.
  int64_t state_nbytes() const;

  const std::vector<Tensor>& params() const { return params_; }
  /// The learning rate, for schedulers (param_groups[0]["lr"]).
  virtual double lr() const = 0;
  virtual void set_lr(double lr) = 0;

 protected:
  struct ParamState {
    int64_t step = 0;
    // e.g. "exp_avg" → tensor shaped like the parameter; sharded, a 1-D
    // tensor over this rank's elements of it, absent when it has none.
    StateDict buffers;
    // Every buffer the parameter has, in creation order, on every rank
    // (also those whose elements live on other ranks).
    std::vector<std::string> buffer_names;
  };
  /// One update of parameter `p` (the whole parameter, or sharded a 1-D view
  /// of this rank's elements of it) from gradient `g` (alike), with state
  /// `s`. Called for every parameter with a defined grad; sharded, with `p`
  /// and `g` undefined for a parameter this rank holds no element of, where
  /// it only keeps the bookkeeping (step counts, buffer names).
  virtual void update(ParamState& s, Tensor& p, const Tensor& g) = 0;
  /// Whether `s` has buffer `name` (on some rank).
  static bool has_buffer(const ParamState& s, const std::string& name);
  /// Adds buffer `name` to `s` with value `t` (undefined: on other ranks).
  static void add_buffer(ParamState& s, const std::string& name, Tensor t);
  /// Shards the state over `group` (null: the world) when `zero_redundancy`;
  /// called by the subclass's constructor. Throws DistributedError when no
  /// process group is initialized, ValueError for a non-contiguous parameter.
  void shard_state(bool zero_redundancy, std::shared_ptr<distributed::ProcessGroup> group);
  /// (name, value) of every hyperparameter, in a fixed order.
  virtual std::vector<std::pair<std::string, double>> hyperparameters() const = 0;
  virtual void set_hyperparameter(const std::string& name, double value) = 0;
  /// Throws ValueError when the current hyperparameters are invalid.
  virtual void check_hyperparameters() const = 0;
  /// Whether "state.<i>.step" is part of the state.
  virtual bool counts_steps() const { return false; }

  std::string name_;
  std::vector<Tensor> params_;
  std::vector<ParamState> state_;

 private:
  struct Sharding;
  /// All-gathers buffer `name` of every shard into full tensors, inserted
  /// into `*out` as "state.<i>.<name>" on rank `to`; with `name` empty, the
  /// parameters into themselves on every rank. A collective.
  void gather(const std::string& name, int to, StateDict* out);
  /// The state_dict layout with `buffer(i, name)` as "state.<i>.<name>".
  StateDict layout(const std::function<Tensor(size_t, const std::string&)>& buffer) const;
  std::unique_ptr<Sharding> sharding_;
  std::optional<StateDict> consolidated_;  // rank `to`'s, after consolidate_state_dict
};


/// torch::optim::SGDOptions: `SGDOptions(0.01).momentum(0.9).weight_decay(1e-4)`;
/// a double converts to the options, so `SGD(params, 0.01)` works as in libtorch.
struct SGDOptions {
  SGDOptions(double lr = 1e-3) : lr_(lr) {}  // NOLINT: implicit like libtorch's
  DTR_ARG(double, lr);
  DTR_ARG(double, momentum) = 0.0;
  DTR_ARG(double, dampening) = 0.0;
  DTR_ARG(double, weight_decay) = 0.0;
  DTR_ARG(bool, nesterov) = false;
  /// Optimizer-state sharding, ZeRO stage 1
  /// (torch.distributed.optim.ZeroRedundancyOptimizer): each rank of
  /// `process_group` keeps the state of its shard only (see the top of this
  /// file). Read at construction. Not a hyperparameter: state dicts are alike
  /// with and without it.
  DTR_ARG(bool, zero_redundancy) = false;
  /// The group the state is sharded over; null: distributed::world().
  DTR_ARG(std::shared_ptr<distributed::ProcessGroup>, process_group);
};

/// torch.optim.SGD (maximize=False, foreach=False):
///   g ← grad + weight_decay·p
///   if momentum: buf ← g (first step) or momentum·buf + (1−dampening)·g
///                g ← g + momentum·buf (nesterov) or buf
///   p ← p − lr·g
/// Throws ValueError for negative lr / momentum / weight_decay, or nesterov
/// without momentum or with dampening.
class SGD final : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  double lr() const override { return options_.lr(); }
  void set_lr(double lr) override { options_.lr(lr); }
  SGDOptions& options() { return options_; }

 private:
  void update(ParamState& s, Tensor& p, const Tensor& g) override;
  std::vector<std::pair<std::string, double>> hyperparameters() const override;
  void set_hyperparameter(const std::string& name, double value) override;
  void check_hyperparameters() const override;
  SGDOptions options_;
};

/// torch::optim::AdamWOptions: `AdamWOptions(3e-4).betas({0.9, 0.95}).weight_decay(0.1)`.
struct AdamWOptions {
  using Betas = std::tuple<double, double>;
  AdamWOptions(double lr = 1e-3) : lr_(lr) {}  // NOLINT: implicit like libtorch's
  DTR_ARG(double, lr);
  /// (β1, β2), each in [0, 1).
  DTR_ARG(Betas, betas) = std::make_tuple(0.9, 0.999);
  DTR_ARG(double, eps) = 1e-8;
  DTR_ARG(double, weight_decay) = 1e-2;
  DTR_ARG(bool, amsgrad) = false;
  /// Optimizer-state sharding, ZeRO stage 1
  /// (torch.distributed.optim.ZeroRedundancyOptimizer): each rank of
  /// `process_group` keeps the state of its shard only (see the top of this
  /// file). Read at construction. Not a hyperparameter: state dicts are alike
  /// with and without it.
  DTR_ARG(bool, zero_redundancy) = false;
  /// The group the state is sharded over; null: distributed::world().
  DTR_ARG(std::shared_ptr<distributed::ProcessGroup>, process_group);
};

/// torch.optim.AdamW (maximize=False, foreach=False), per parameter:
///   t ← t + 1;  p ← p·(1 − lr·weight_decay)
///   m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²   (v_max ← max(v_max, v) with amsgrad)
///   p ← p − lr/(1−β1^t) · m / (sqrt(v)/sqrt(1−β2^t) + eps)
/// Buffers "exp_avg", "exp_avg_sq" (and "max_exp_avg_sq"). Throws ValueError
/// for lr < 0, eps < 0, betas outside [0, 1) or weight_decay < 0.
class AdamW final : public Optimizer {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  double lr() const override { return options_.lr(); }
  void set_lr(double lr) override { options_.lr(lr); }
  AdamWOptions& options() { return options_; }

 private:
  void update(ParamState& s, Tensor& p, const Tensor& g) override;
  std::vector<std::pair<std::string, double>> hyperparameters() const override;
  void set_hyperparameter(const std::string& name, double value) override;
  void check_hyperparameters() const override;
  bool counts_steps() const override { return true; }
  AdamWOptions options_;
};

// ---- learning-rate schedulers (torch.optim.lr_scheduler) ----------------------

/// Base of the schedulers (torch.optim.lr_scheduler.LRScheduler, with
/// last_epoch=-1): remembers the optimizer's learning rate as base_lr and,
/// as PyTorch's constructor, takes the first step at once (epoch 0, the lr
/// then is get_lr()'s at epoch 0, base_lr for these). Call step() after
/// each optimizer.step(). The optimizer must outlive the scheduler.
class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// Advances one epoch and sets the optimizer's lr to get_lr().
  void step();
  /// The lr the last step set, one per parameter group (one here).
  std::vector<double> get_last_lr() const { return {last_lr_}; }
  int64_t last_epoch() const { return last_epoch_; }
  double base_lr() const { return base_lr_; }

 protected:
  /// The lr for epoch last_epoch(), from the optimizer's current lr
  /// (PyTorch's chainable forms) or base_lr. Called by step().
  virtual double get_lr() const = 0;
  /// Called by the subclass's constructor once its fields are set (the
  /// first step needs them).
  void initial_step() { step(); }

  Optimizer& optimizer_;

 private:
  double base_lr_;
  int64_t last_epoch_ = -1;
  double last_lr_;
};

/// torch.optim.lr_scheduler.StepLR: multiplies the lr by `gamma` every
/// `step_size` epochs (lr = base_lr · gamma^(epoch // step_size)). Throws
/// ValueError for step_size < 1.
class StepLR final : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 private:
  double get_lr() const override;
  int64_t step_size_;
  double gamma_;
};

/// torch.optim.lr_scheduler.CosineAnnealingLR: lr follows
/// eta_min + (base_lr − eta_min)(1 + cos(π·epoch/T_max))/2, computed in
/// PyTorch's recursive form (so it goes back up after T_max). Throws
/// ValueError for T_max < 1.
class CosineAnnealingLR final : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);

 private:
  double get_lr() const override;
  int64_t T_max_;
  double eta_min_;
};

/// torch.optim.lr_scheduler.LambdaLR: lr = base_lr · lr_lambda(epoch).
/// Throws ValueError for an empty function.
class LambdaLR final : public LRScheduler {
 public:
  LambdaLR(Optimizer& optimizer, std::function<double(int64_t epoch)> lr_lambda);

 private:
  double get_lr() const override;
  std::function<double(int64_t)> lr_lambda_;
};

}  // namespace dtr::optim
