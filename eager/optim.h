// Optimizers with torch.optim semantics: SGD (momentum, dampening, weight
// decay, Nesterov) and AdamW (decoupled weight decay, bias correction,
// optional AMSGrad). step() runs under NoGradGuard with in-place ops, so the
// updated parameters stay constants of the remat runtime (Note [mutation]).
// state_dict()/load_state_dict() carry step counts, moment buffers and
// hyperparameters, so a run resumed from them continues bitwise.
//
//   dtr::optim::AdamW opt(model.parameters(), {.lr = 3e-4, .weight_decay = 0.1});
//   opt.zero_grad(); loss.backward(); opt.step();
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "eager/nn/state_dict.h"
#include "eager/tensor.h"

namespace dtr::optim {

/// Base of the optimizers: one parameter group over `params` (leaves that
/// require grad; ValueError otherwise or when the list is empty).
class Optimizer {
 public:
  Optimizer(std::vector<Tensor> params, std::string name);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter that has a grad; parameters whose grad
  /// is undefined are skipped (and keep their state), like PyTorch.
  virtual void step() = 0;
  /// Sets every parameter's grad to undefined (zero_grad(set_to_none=True)).
  void zero_grad();

  /// Entries (all 0-d unless a buffer):
  ///   "state.<i>.step"      int64, for optimizers that count steps (AdamW)
  ///   "state.<i>.<buffer>"  moment buffers, shaped like parameter i
  ///   "param_groups.0.<hp>" float64 hyperparameters (lr, betas, ...)
  /// Parameter i is the i-th tensor given to the constructor (PyTorch numbers
  /// parameters the same way). Buffers are detached handles, not copies.
  StateDict state_dict() const;
  /// Restores what state_dict() returned (buffers are copied). Throws
  /// ValueError naming the key for an unknown or missing key, a parameter
  /// index out of range, or a buffer whose shape differs from its parameter's;
  /// on error nothing changes.
  void load_state_dict(const StateDict& state);

  const std::vector<Tensor>& params() const { return params_; }
  /// The learning rate, for schedulers (param_groups[0]["lr"]).
  virtual double lr() const = 0;
  virtual void set_lr(double lr) = 0;

 protected:
  struct ParamState {
    int64_t step = 0;
    StateDict buffers;  // e.g. "exp_avg" → tensor shaped like the parameter
  };
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
};

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
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
  void step() override;
  double lr() const override { return options_.lr; }
  void set_lr(double lr) override { options_.lr = lr; }
  SGDOptions& options() { return options_; }

 private:
  std::vector<std::pair<std::string, double>> hyperparameters() const override;
  void set_hyperparameter(const std::string& name, double value) override;
  void check_hyperparameters() const override;
  SGDOptions options_;
};

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
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
  void step() override;
  double lr() const override { return options_.lr; }
  void set_lr(double lr) override { options_.lr = lr; }
  AdamWOptions& options() { return options_; }

 private:
  std::vector<std::pair<std::string, double>> hyperparameters() const override;
  void set_hyperparameter(const std::string& name, double value) override;
  void check_hyperparameters() const override;
  bool counts_steps() const override { return true; }
  AdamWOptions options_;
};

}  // namespace dtr::optim
