// Optimizers with torch.optim semantics: SGD (momentum, dampening, weight
// decay, Nesterov), Adam (L2 weight decay, bias correction, optional
// AMSGrad) and AdamW (decoupled weight decay), over parameter groups with
// their own hyperparameters, as torch::optim's. step() runs under
// NoGradGuard with in-place ops, so the updated parameters stay constants of
// the remat runtime (Note [mutation]). state_dict()/load_state_dict() carry
// step counts, moment buffers and every group's hyperparameters, so a run
// resumed from them continues bitwise.
//
//   dtr::optim::AdamW opt(model.parameters(), dtr::optim::AdamWOptions(3e-4).weight_decay(0.1));
//   opt.zero_grad(); loss.backward(); opt.step();
//
// Parameter groups (libtorch's OptimizerParamGroup), e.g. no weight decay on
// biases and norms, and an option edited between steps:
//
//   std::vector<dtr::optim::OptimizerParamGroup> groups;
//   groups.emplace_back(matrices);  // the defaults below
//   groups.emplace_back(vectors, std::make_unique<dtr::optim::AdamWOptions>(
//                                    dtr::optim::AdamWOptions(3e-4).weight_decay(0.0)));
//   dtr::optim::AdamW opt(groups, dtr::optim::AdamWOptions(3e-4).weight_decay(0.1));
//   static_cast<dtr::optim::AdamWOptions&>(opt.param_groups()[1].options()).lr(1e-4);
//
// Optimizer-state sharding (ZeRO stage 1, PyTorch's
// torch.distributed.optim.ZeroRedundancyOptimizer) is an option of each:
//
//   dtr::optim::AdamW opt(ddp.parameters(), dtr::optim::AdamWOptions(3e-4).zero_redundancy(true));
//
// The parameters, in group order, are one flat sequence of elements per
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

/// torch::optim::OptimizerOptions: the hyperparameters of one parameter
/// group (SGDOptions, AdamOptions, AdamWOptions derive from it through
/// OptimizerCloneableOptions). An optimizer's param_groups()[i].options()
/// is one of these; cast it to the optimizer's options type to edit it:
///
///   static_cast<dtr::optim::AdamOptions&>(opt.param_groups()[0].options()).lr(1e-4);
///
/// Edits take effect at the next step().
class OptimizerOptions {
 public:
  OptimizerOptions() = default;
  virtual ~OptimizerOptions() = default;
  /// A copy of the most derived options.
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  virtual double get_lr() const = 0;
  virtual void set_lr(double lr) = 0;

 protected:
  OptimizerOptions(const OptimizerOptions&) = default;
  OptimizerOptions& operator=(const OptimizerOptions&) = default;
};

/// clone(), get_lr() and set_lr() of options type `Derived` (which has lr()).
template <typename Derived>
class OptimizerCloneableOptions : public OptimizerOptions {
 public:
  std::unique_ptr<OptimizerOptions> clone() const override {
    return std::make_unique<Derived>(static_cast<const Derived&>(*this));
  }
  double get_lr() const override { return static_cast<const Derived&>(*this).lr(); }
  void set_lr(double lr) override { static_cast<Derived&>(*this).lr(lr); }
};

/// torch::optim::OptimizerParamGroup: parameters optimized with one set of
/// options. Without options, the optimizer gives the group a copy of its
/// defaults when the group is added. Copies clone the options.
///
///   std::vector<dtr::optim::OptimizerParamGroup> groups;
///   groups.emplace_back(decay, std::make_unique<dtr::optim::AdamWOptions>(AdamWOptions(3e-4).weight_decay(0.1)));
///   groups.emplace_back(no_decay);  // the optimizer's defaults
///   dtr::optim::AdamW opt(groups, dtr::optim::AdamWOptions(3e-4).weight_decay(0.0));
class OptimizerParamGroup {
 public:
  OptimizerParamGroup(std::vector<Tensor> params)  // NOLINT: implicit like libtorch's
      : params_(std::move(params)) {}
  OptimizerParamGroup(std::vector<Tensor> params, std::unique_ptr<OptimizerOptions> options)
      : params_(std::move(params)), options_(std::move(options)) {}
  OptimizerParamGroup(const OptimizerParamGroup& other)
      : params_(other.params_), options_(other.options_ ? other.options_->clone() : nullptr) {}
  OptimizerParamGroup& operator=(const OptimizerParamGroup& other);
  OptimizerParamGroup(OptimizerParamGroup&&) noexcept = default;
  OptimizerParamGroup& operator=(OptimizerParamGroup&&) noexcept = default;
  ~OptimizerParamGroup() = default;

  bool has_options() const { return options_ != nullptr; }
  /// The group's options; ValueError when it has none (a group not yet
  /// added to an optimizer, built without options).
  OptimizerOptions& options();
  const OptimizerOptions& options() const;
  void set_options(std::unique_ptr<OptimizerOptions> options) { options_ = std::move(options); }
  /// The parameters. Those of a group inside an optimizer are fixed: step()
  /// throws ValueError when they were changed (use add_param_group).
  std::vector<Tensor>& params() { return params_; }
  const std::vector<Tensor>& params() const { return params_; }

 private:
  std::vector<Tensor> params_;
  std::unique_ptr<OptimizerOptions> options_;
};

/// Base of the optimizers (torch::optim::Optimizer): parameter groups, each
/// with its options (its hyperparameters), over leaves that require grad.
/// Parameters are numbered across the groups in order (PyTorch's numbering
/// in state dicts). ValueError when there is no parameter at all, for a
/// parameter that is undefined, not a leaf or does not require grad, or
/// that appears twice (in one group or two); TypeError for a group whose
/// options are not the optimizer's options type.
class Optimizer {
 public:
  using LossClosure = std::function<Tensor()>;

  Optimizer(std::vector<OptimizerParamGroup> param_groups, std::unique_ptr<OptimizerOptions> defaults,
            std::string name);
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter that has a grad, with its group's
  /// options; parameters whose grad is undefined are skipped (and keep their
  /// state), like PyTorch. With `closure`, calls it first (with grad mode
  /// on: it typically zeroes the grads, runs the model and backward) and
  /// returns what it returned; else returns an undefined tensor. Sharded
  /// (zero_redundancy), it is a collective: every rank of the group calls
  /// it, with the same gradients defined (DDP makes them so), and it ends
  /// with the all-gather of the parameters. Throws ValueError for invalid
  /// hyperparameters in some group or a group whose parameter list was
  /// changed, DistributedError when the gather fails.
  virtual Tensor step(LossClosure closure = nullptr);
  /// zero_grad(set_to_none=True) sets every parameter's grad to undefined;
  /// with false, fills the defined grads with zeros in place.
  void zero_grad(bool set_to_none = true);

  /// Adds a group (libtorch's add_param_group / PyTorch's): without
  /// options it gets a copy of the defaults. Errors as the constructor's,
  /// and nothing changes on error. Sharded, every rank calls it with the
  /// same parameters (the shards are recut, a collective), and only before
  /// the optimizer holds any state (ValueError otherwise).
  void add_param_group(const OptimizerParamGroup& param_group);
  /// The groups; their options() may be edited between steps.
  std::vector<OptimizerParamGroup>& param_groups() noexcept { return groups_; }
  const std::vector<OptimizerParamGroup>& param_groups() const noexcept { return groups_; }
  /// What groups added without options get (a copy of).
  OptimizerOptions& defaults() noexcept { return *defaults_; }
  const OptimizerOptions& defaults() const noexcept { return *defaults_; }
  /// Every parameter of every group, in order (state dicts number them so).
  const std::vector<Tensor>& params() const { return params_; }
  /// libtorch's parameters(): the same list.
  const std::vector<Tensor>& parameters() const { return params_; }
  /// The number of parameters over all groups (libtorch's size()).
  size_t size() const noexcept { return params_.size(); }

  /// Entries (all 0-d unless a buffer or a list):
  ///   "state.<i>.step"          int64, for optimizers that count steps (Adam, AdamW)
  ///   "state.<i>.<buffer>"      moment buffers, shaped like parameter i
  ///   "param_groups.<g>.<hp>"   float64 hyperparameters of group g (lr, betas as beta1 and beta2, ...)
  ///   "param_groups.<g>.params" int64 1-D: the numbers of group g's parameters
  /// Parameter i is the i-th over the groups in order, as in PyTorch's
  /// state_dict, whose "param_groups" list of dicts with "params" index
  /// lists this flattens. Buffers are detached handles, not copies.
  /// Sharded, the full state exists only after consolidate_state_dict(to):
  /// on rank `to` this returns it (owned copies, in the layout above, equal
  /// bitwise to the unsharded optimizer's), on any other rank, or before
  /// consolidating, or after a step or load since, it throws ValueError
  /// (ZeroRedundancyOptimizer.state_dict's RuntimeError).
  StateDict state_dict() const;
  /// Restores what state_dict() returned (buffers are copied), as PyTorch
  /// does: the saved groups' "params" lists, concatenated, name this
  /// optimizer's parameters in order, so the group count and each group's
  /// size must match; the hyperparameters of every group are replaced.
  /// A dict without "params" lists (the one-group form) loads into an
  /// optimizer of one group. Throws ValueError naming the key for an
  /// unknown or missing key, a group count or size that differs, a
  /// parameter number out of range, or a buffer whose shape differs from
  /// its parameter's; on error nothing changes. Sharded, the dict is the
  /// full state (from any world size, sharded or not) and each rank keeps
  /// the elements of its own shard; no collective runs.
  void load_state_dict(const StateDict& state);

  /// ZeroRedundancyOptimizer.consolidate_state_dict(to): gathers the sharded
  /// state onto rank `to` of the group for the next state_dict() there. A
  /// collective: every rank calls it. Unsharded it does nothing. Throws
  /// ValueError when `to` is not a rank of the group, DistributedError when
  /// the gather fails.
  void consolidate_state_dict(int to = 0);

  /// Whether the state is sharded over a process group (the option
  /// zero_redundancy of the constructor's options).
  bool zero_redundancy() const { return sharding_ != nullptr; }
  /// The group the state is sharded over; null when unsharded.
  std::shared_ptr<distributed::ProcessGroup> process_group() const;
  /// Bytes of the state tensors this rank holds (momentum, exp_avg, ...; not
  /// the parameters or gradients): about 1/world of the unsharded figure
  /// when sharded.
  int64_t state_nbytes() const;

  /// The first group's learning rate (param_groups[0]["lr"]).
  double lr() const;
  /// Sets every group's learning rate.
  void set_lr(double lr);

  /// Group g's hyperparameters by their state_dict names ("lr", "beta1",
  /// "nesterov" as 0 or 1, ...), in a fixed order. IndexError for a group
  /// out of range.
  std::vector<std::pair<std::string, double>> group_hyperparameters(size_t g) const;
  /// Sets some of group g's hyperparameters by those names. IndexError for a
  /// group out of range, ValueError for an unknown name or a value the
  /// optimizer refuses (the group is then left as it was).
  void set_group_hyperparameters(size_t g, const std::vector<std::pair<std::string, double>>& values);

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
  /// `s` and its group's `options` (checked by check_options). Called for
  /// every parameter with a defined grad; sharded, with `p` and `g`
  /// undefined for a parameter this rank holds no element of, where it only
  /// keeps the bookkeeping (step counts, buffer names).
  virtual void update(ParamState& s, Tensor& p, const Tensor& g, const OptimizerOptions& options) = 0;
  /// Whether `s` has buffer `name` (on some rank).
  static bool has_buffer(const ParamState& s, const std::string& name);
  /// Adds buffer `name` to `s` with value `t` (undefined: on other ranks).
  static void add_buffer(ParamState& s, const std::string& name, Tensor t);
  /// Checks every group's options, then shards the state over `group`
  /// (null: the world) when `zero_redundancy`; called by the subclass's
  /// constructor. Throws TypeError / ValueError as check_options,
  /// DistributedError when no process group is initialized, ValueError for
  /// a non-contiguous parameter.
  void init(bool zero_redundancy, std::shared_ptr<distributed::ProcessGroup> group);
  /// (name, value) of every hyperparameter of `options`, in a fixed order.
  virtual std::vector<std::pair<std::string, double>> hyperparameters(const OptimizerOptions& options) const = 0;
  /// Sets hyperparameter `name` of `options`; false for an unknown name.
  virtual bool set_hyperparameter(OptimizerOptions& options, const std::string& name, double value) const = 0;
  /// Throws TypeError when `options` are not this optimizer's options type,
  /// ValueError when their values are invalid.
  virtual void check_options(const OptimizerOptions& options) const = 0;
  /// Whether "state.<i>.step" is part of the state.
  virtual bool counts_steps() const { return false; }

  std::string name_;

 private:
  struct Sharding;
  /// Appends `group` (options set) to the groups and its parameters to the
  /// flat list, after checking them; on error nothing changes.
  void append_group(OptimizerParamGroup group);
  /// Throws ValueError when a group's parameters are no longer those added.
  void check_groups_unchanged() const;
  /// Shards the state when `zero_redundancy` (see init).
  void shard_state(bool zero_redundancy, std::shared_ptr<distributed::ProcessGroup> group);
  /// All-gathers buffer `name` of every shard into full tensors, inserted
  /// into `*out` as "state.<i>.<name>" on rank `to`; with `name` empty, the
  /// parameters into themselves on every rank. A collective.
  void gather(const std::string& name, int to, StateDict* out);
  /// The state_dict layout with `buffer(i, name)` as "state.<i>.<name>".
  StateDict layout(const std::function<Tensor(size_t, const std::string&)>& buffer) const;

  std::unique_ptr<OptimizerOptions> defaults_;
  std::vector<OptimizerParamGroup> groups_;
  std::vector<Tensor> params_;      // every group's parameters, in order
  std::vector<size_t> group_of_;    // per parameter: its group
  std::vector<ParamState> state_;   // per parameter
  std::unique_ptr<Sharding> sharding_;
  std::optional<StateDict> consolidated_;  // rank `to`'s, after consolidate_state_dict
};


/// The option pair every optimizer's options have, read from the options
/// given to the constructor (a group's own copy is ignored):
/// zero_redundancy shards the state (ZeRO stage 1,
/// torch.distributed.optim.ZeroRedundancyOptimizer) so each rank of
/// `process_group` (null: distributed::world()) keeps the state of its
/// shard only (see the top of this file). Not hyperparameters: state dicts
/// are alike with and without them.
#define DTR_ZERO_REDUNDANCY_ARGS                  \
  DTR_ARG(bool, zero_redundancy) = false;         \
  DTR_ARG(std::shared_ptr<distributed::ProcessGroup>, process_group)

/// torch::optim::SGDOptions: `SGDOptions(0.01).momentum(0.9).weight_decay(1e-4)`;
/// a double converts to the options, so `SGD(params, 0.01)` works as in libtorch.
struct SGDOptions : OptimizerCloneableOptions<SGDOptions> {
  SGDOptions(double lr = 1e-3) : lr_(lr) {}  // NOLINT: implicit like libtorch's
  DTR_ARG(double, lr);
  DTR_ARG(double, momentum) = 0.0;
  DTR_ARG(double, dampening) = 0.0;
  DTR_ARG(double, weight_decay) = 0.0;
  DTR_ARG(bool, nesterov) = false;
  DTR_ZERO_REDUNDANCY_ARGS;
};

/// torch.optim.SGD (maximize=False, foreach=False), per parameter with its
/// group's options:
///   g ← grad + weight_decay·p
///   if momentum: buf ← g (first step) or momentum·buf + (1−dampening)·g
///                g ← g + momentum·buf (nesterov) or buf
///   p ← p − lr·g
/// Throws ValueError for negative lr / momentum / weight_decay, or nesterov
/// without momentum or with dampening (in any group).
class SGD final : public Optimizer {
 public:
  SGD(std::vector<OptimizerParamGroup> param_groups, SGDOptions defaults);
  SGD(std::vector<Tensor> params, SGDOptions defaults);
  /// The defaults (groups keep their own copies: edit those through
  /// param_groups()[i].options()).
  SGDOptions& options() { return static_cast<SGDOptions&>(defaults()); }

 private:
  void update(ParamState& s, Tensor& p, const Tensor& g, const OptimizerOptions& options) override;
  std::vector<std::pair<std::string, double>> hyperparameters(const OptimizerOptions& options) const override;
  bool set_hyperparameter(OptimizerOptions& options, const std::string& name, double value) const override;
  void check_options(const OptimizerOptions& options) const override;
};

/// torch::optim::AdamOptions: `AdamOptions(1e-3).betas({0.9, 0.999}).weight_decay(1e-4)`.
struct AdamOptions : OptimizerCloneableOptions<AdamOptions> {
  using Betas = std::tuple<double, double>;
  AdamOptions(double lr = 1e-3) : lr_(lr) {}  // NOLINT: implicit like libtorch's
  DTR_ARG(double, lr);
  /// (β1, β2), each in [0, 1).
  DTR_ARG(Betas, betas) = std::make_tuple(0.9, 0.999);
  DTR_ARG(double, eps) = 1e-8;
  DTR_ARG(double, weight_decay) = 0.0;
  DTR_ARG(bool, amsgrad) = false;
  DTR_ZERO_REDUNDANCY_ARGS;
};

/// torch::optim::AdamWOptions: `AdamWOptions(3e-4).betas({0.9, 0.95}).weight_decay(0.1)`.
struct AdamWOptions : OptimizerCloneableOptions<AdamWOptions> {
  using Betas = std::tuple<double, double>;
  AdamWOptions(double lr = 1e-3) : lr_(lr) {}  // NOLINT: implicit like libtorch's
  DTR_ARG(double, lr);
  /// (β1, β2), each in [0, 1).
  DTR_ARG(Betas, betas) = std::make_tuple(0.9, 0.999);
  DTR_ARG(double, eps) = 1e-8;
  DTR_ARG(double, weight_decay) = 1e-2;
  DTR_ARG(bool, amsgrad) = false;
  DTR_ZERO_REDUNDANCY_ARGS;
};

/// What Adam and AdamW share, over their options type O (AdamOptions or
/// AdamWOptions): the moment buffers "exp_avg", "exp_avg_sq" (and
/// "max_exp_avg_sq" with amsgrad), the step count, and the checks: ValueError
/// for lr < 0, eps < 0, betas outside [0, 1) or weight_decay < 0.
template <typename O>
class AdamFamily : public Optimizer {
 public:
  /// The defaults (groups keep their own copies: edit those through
  /// param_groups()[i].options()).
  O& options() { return static_cast<O&>(defaults()); }

 protected:
  /// `decoupled`: AdamW's weight decay (the parameter shrinks) rather than
  /// Adam's (the decay is added to the gradient).
  AdamFamily(std::vector<OptimizerParamGroup> param_groups, const O& defaults, std::string name, bool decoupled);

 private:
  void update(ParamState& s, Tensor& p, const Tensor& g, const OptimizerOptions& options) override;
  std::vector<std::pair<std::string, double>> hyperparameters(const OptimizerOptions& options) const override;
  bool set_hyperparameter(OptimizerOptions& options, const std::string& name, double value) const override;
  void check_options(const OptimizerOptions& options) const override;
  bool counts_steps() const override { return true; }
  bool decoupled_;
};

extern template class AdamFamily<AdamOptions>;
extern template class AdamFamily<AdamWOptions>;

/// torch.optim.Adam (maximize=False, foreach=False), per parameter with its
/// group's options:
///   t ← t + 1;  g ← grad + weight_decay·p   (L2: the decay is part of the gradient)
///   m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²   (v_max ← max(v_max, v) with amsgrad)
///   p ← p − lr/(1−β1^t) · m / (sqrt(v_max or v)/sqrt(1−β2^t) + eps)
/// Buffers and errors: AdamFamily's.
class Adam final : public AdamFamily<AdamOptions> {
 public:
  Adam(std::vector<OptimizerParamGroup> param_groups, AdamOptions defaults = {});
  Adam(std::vector<Tensor> params, AdamOptions defaults = {});
};

/// torch.optim.AdamW (maximize=False, foreach=False), per parameter with its
/// group's options: Adam with the weight decay decoupled from the gradient:
///   t ← t + 1;  p ← p·(1 − lr·weight_decay)
///   m ← β1·m + (1−β1)·grad;  v ← β2·v + (1−β2)·grad²   (v_max as Adam's)
///   p ← p − lr/(1−β1^t) · m / (sqrt(v_max or v)/sqrt(1−β2^t) + eps)
/// Buffers and errors: AdamFamily's.
class AdamW final : public AdamFamily<AdamWOptions> {
 public:
  AdamW(std::vector<OptimizerParamGroup> param_groups, AdamWOptions defaults = {});
  AdamW(std::vector<Tensor> params, AdamWOptions defaults = {});
};

// ---- learning-rate schedulers (torch.optim.lr_scheduler) ----------------------

/// Base of the schedulers (torch.optim.lr_scheduler.LRScheduler, with
/// last_epoch=-1): remembers each parameter group's learning rate as its
/// base lr and, as PyTorch's constructor, takes the first step at once
/// (epoch 0, the lr then is get_lr()'s at epoch 0, the base lr for these).
/// Call step() after each optimizer.step(). The optimizer must outlive the
/// scheduler, and keep its groups (one added later keeps its lr).
class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// Advances one epoch and sets each group's lr to get_lr() of it.
  void step();
  /// The lr the last step set, one per parameter group.
  std::vector<double> get_last_lr() const { return last_lrs_; }
  int64_t last_epoch() const { return last_epoch_; }
  /// The first group's base lr.
  double base_lr() const { return base_lrs_.at(0); }
  /// Every group's base lr.
  const std::vector<double>& base_lrs() const { return base_lrs_; }

 protected:
  /// The lr of a group for epoch last_epoch(), from the group's current
  /// `lr` (PyTorch's chainable forms) or its `base_lr`. Called by step().
  virtual double get_lr(double lr, double base_lr) const = 0;
  /// Called by the subclass's constructor once its fields are set (the
  /// first step needs them).
  void initial_step() { step(); }

  Optimizer& optimizer_;

 private:
  std::vector<double> base_lrs_;
  int64_t last_epoch_ = -1;
  std::vector<double> last_lrs_;
};

/// torch.optim.lr_scheduler.StepLR: multiplies the lr by `gamma` every
/// `step_size` epochs (lr = base_lr · gamma^(epoch // step_size), per group). Throws
/// ValueError for step_size < 1.
class StepLR final : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 private:
  double get_lr(double lr, double base_lr) const override;
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
  double get_lr(double lr, double base_lr) const override;
  int64_t T_max_;
  double eta_min_;
};

/// torch.optim.lr_scheduler.LambdaLR: lr = base_lr · lr_lambda(epoch).
/// Throws ValueError for an empty function.
class LambdaLR final : public LRScheduler {
 public:
  LambdaLR(Optimizer& optimizer, std::function<double(int64_t epoch)> lr_lambda);

 private:
  double get_lr(double lr, double base_lr) const override;
  std::function<double(int64_t)> lr_lambda_;
};

}  // namespace dtr::optim
