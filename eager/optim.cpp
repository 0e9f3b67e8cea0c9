#include "eager/optim.h"

#include <cctype>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "eager/autograd.h"
#include "eager/ops.h"

namespace dtr::optim {

namespace {
// A 0-d constant tensor holding `value` (from_vector would make it 1-D).
template <typename T>
Tensor scalar_tensor(T value) {
  return detail::from_host(&value, 1, dtype_of<T>(), {}, dtype_of<T>());
}
}  // namespace

// ---- Optimizer ------------------------------------------------------------------

Optimizer::Optimizer(std::vector<Tensor> params, std::string name)
    : name_(std::move(name)), params_(std::move(params)) {
  DTR_CHECK(!params_.empty(), ValueError, "{}: optimizer got an empty parameter list", name_);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    DTR_CHECK(p.defined(), ValueError, "{}: parameter {} is undefined", name_, i);
    DTR_CHECK(p.is_leaf() && p.requires_grad(), ValueError,
              "{}: can't optimize a non-leaf Tensor or one that does not require grad (parameter "
              "{}, shape {})",
              name_, i, shape_str(p.shape()));
    for (size_t j = 0; j < i; ++j) {
      DTR_CHECK(params_[j].impl() != p.impl(), ValueError,
                "{}: parameter {} appears more than once (also at {})", name_, i, j);
    }
  }
  state_.resize(params_.size());
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.set_grad(Tensor());
}

StateDict Optimizer::state_dict() const {
  StateDict out;
  for (size_t i = 0; i < state_.size(); ++i) {
    const ParamState& s = state_[i];
    if (counts_steps() && s.step > 0) {
      out.insert(fmt::format("state.{}.step", i), scalar_tensor<int64_t>(s.step));
    }
    for (const auto& [name, buf] : s.buffers) out.insert(fmt::format("state.{}.{}", i, name), buf.detach());
  }
  for (const auto& [name, value] : hyperparameters()) {
    out.insert("param_groups.0." + name, scalar_tensor<double>(value));
  }
  return out;
}

void Optimizer::load_state_dict(const StateDict& state) {
  // Validate everything first so a bad dict leaves the optimizer untouched.
  std::vector<ParamState> next(params_.size());
  std::map<std::string, double> hp;
  for (const auto& [key, t] : state) {
    DTR_CHECK(t.defined(), ValueError, "{}.load_state_dict: entry '{}' is undefined", name_, key);
    if (key.starts_with("param_groups.0.")) {
      DTR_CHECK(t.numel() == 1, ValueError,
                "{}.load_state_dict: hyperparameter '{}' must hold one value, got shape {}", name_,
                key, shape_str(t.shape()));
      hp[key.substr(15)] = t.item<double>();
      continue;
    }
    // "state.<i>.<name>"
    size_t i = 0, pos = 6, dot = std::string::npos;
    bool ok = key.starts_with("state.");
    if (ok) {
      dot = key.find('.', pos);
      ok = dot != std::string::npos && dot > pos && dot + 1 < key.size();
      for (size_t c = pos; ok && c < dot; ++c) ok = std::isdigit(static_cast<unsigned char>(key[c]));
      if (ok) i = std::stoul(key.substr(pos, dot - pos));
    }
    DTR_CHECK(ok, ValueError, "{}.load_state_dict: unexpected key '{}'", name_, key);
    DTR_CHECK(i < params_.size(), ValueError,
              "{}.load_state_dict: key '{}' names parameter {} but the optimizer has {} parameters",
              name_, key, i, params_.size());
    const std::string name = key.substr(dot + 1);
    if (name == "step") {
      DTR_CHECK(counts_steps() && t.numel() == 1 && !t.is_floating_point(), ValueError,
                "{}.load_state_dict: unexpected step entry '{}' ({})", name_, key, t.str());
      next[i].step = t.item<int64_t>();
      continue;
    }
    DTR_CHECK(t.shape() == params_[i].shape(), ValueError,
              "{}.load_state_dict: '{}' has shape {} but parameter {} has shape {}", name_, key,
              shape_str(t.shape()), i, shape_str(params_[i].shape()));
    next[i].buffers.insert(name, t);
  }
  const auto own = hyperparameters();
  for (const auto& [name, value] : own) {
    DTR_CHECK(hp.count(name), ValueError, "{}.load_state_dict: missing key 'param_groups.0.{}'",
              name_, name);
  }
  for (const auto& [name, value] : hp) {
    bool known = false;
    for (const auto& [n, v] : own) known = known || n == name;
    DTR_CHECK(known, ValueError, "{}.load_state_dict: unexpected key 'param_groups.0.{}'", name_, name);
  }
  // Apply: hyperparameters (validated by the subclass), then copies of the buffers.
  const auto before = own;
  try {
    for (const auto& [name, value] : hp) set_hyperparameter(name, value);
    check_hyperparameters();
  } catch (...) {
    for (const auto& [name, value] : before) set_hyperparameter(name, value);
    throw;
  }
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    ParamState s;
    s.step = next[i].step;
    for (const auto& [name, t] : next[i].buffers) {
      // An owned copy in the parameter's dtype (the loaded tensor may be shared).
      Tensor buf = t.to(params_[i].dtype());
      buf = buf.impl() == t.impl() ? t.clone() : buf;
      s.buffers.insert(name, buf);
    }
    state_[i] = std::move(s);
  }
}

namespace {
void check_range(bool ok, const std::string& opt, const char* what, double v) {
  DTR_CHECK(ok, ValueError, "{}: invalid {} value: {}", opt, what, v);
}
}  // namespace

// ---- SGD ------------------------------------------------------------------------

namespace {
void validate(const SGDOptions& o) {
  check_range(o.lr >= 0, "SGD", "learning rate", o.lr);
  check_range(o.momentum >= 0, "SGD", "momentum", o.momentum);
  check_range(o.weight_decay >= 0, "SGD", "weight_decay", o.weight_decay);
  DTR_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), ValueError,
            "SGD: Nesterov momentum requires a momentum and zero dampening (momentum {}, dampening {})",
            o.momentum, o.dampening);
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params), "SGD"), options_(options) {
  validate(options_);
}

void SGD::step() {
  validate(options_);
  NoGradGuard no_grad;
  const SGDOptions& o = options_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor d = p.grad();
    if (!d.defined()) continue;
    if (o.weight_decay != 0) d = add(d, p, o.weight_decay);
    if (o.momentum != 0) {
      const Tensor* found = state_[i].buffers.find("momentum_buffer");
      Tensor buf;
      if (found == nullptr) {
        buf = d.clone();
        state_[i].buffers.insert("momentum_buffer", buf);
      } else {
        buf = *found;
        buf.mul_(o.momentum).add_(d, 1.0 - o.dampening);
      }
      d = o.nesterov ? add(d, buf, o.momentum) : buf;
    }
    p.add_(d, -o.lr);
  }
}

std::vector<std::pair<std::string, double>> SGD::hyperparameters() const {
  return {{"lr", options_.lr},
          {"momentum", options_.momentum},
          {"dampening", options_.dampening},
          {"weight_decay", options_.weight_decay},
          {"nesterov", options_.nesterov ? 1.0 : 0.0}};
}

void SGD::set_hyperparameter(const std::string& name, double v) {
  if (name == "lr") options_.lr = v;
  else if (name == "momentum") options_.momentum = v;
  else if (name == "dampening") options_.dampening = v;
  else if (name == "weight_decay") options_.weight_decay = v;
  else if (name == "nesterov") options_.nesterov = v != 0;
}

void SGD::check_hyperparameters() const { validate(options_); }

// ---- AdamW ----------------------------------------------------------------------

namespace {
void validate(const AdamWOptions& o) {
  check_range(o.lr >= 0, "AdamW", "learning rate", o.lr);
  check_range(o.eps >= 0, "AdamW", "epsilon", o.eps);
  check_range(o.beta1 >= 0 && o.beta1 < 1, "AdamW", "beta parameter at index 0", o.beta1);
  check_range(o.beta2 >= 0 && o.beta2 < 1, "AdamW", "beta parameter at index 1", o.beta2);
  check_range(o.weight_decay >= 0, "AdamW", "weight_decay", o.weight_decay);
}
}  // namespace

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : Optimizer(std::move(params), "AdamW"), options_(options) {
  validate(options_);
}

void AdamW::step() {
  validate(options_);
  NoGradGuard no_grad;
  const AdamWOptions& o = options_;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    ParamState& s = state_[i];
    if (!s.buffers.contains("exp_avg")) {
      s.buffers.insert("exp_avg", zeros_like(p));
      s.buffers.insert("exp_avg_sq", zeros_like(p));
    }
    if (o.amsgrad && !s.buffers.contains("max_exp_avg_sq")) s.buffers.insert("max_exp_avg_sq", zeros_like(p));
    Tensor exp_avg = s.buffers.at("exp_avg");
    Tensor exp_avg_sq = s.buffers.at("exp_avg_sq");
    s.step += 1;

    p.mul_(1.0 - o.lr * o.weight_decay);  // decoupled weight decay
    exp_avg.mul_(o.beta1).add_(g, 1.0 - o.beta1);
    exp_avg_sq.mul_(o.beta2).add_(mul(g, g), 1.0 - o.beta2);

    const double bias_correction1 = 1.0 - std::pow(o.beta1, double(s.step));
    const double bias_correction2 = 1.0 - std::pow(o.beta2, double(s.step));
    const double step_size = o.lr / bias_correction1;
    const double bias_correction2_sqrt = std::sqrt(bias_correction2);
    Tensor second = exp_avg_sq;
    if (o.amsgrad) {
      Tensor max_sq = s.buffers.at("max_exp_avg_sq");
      max_sq.copy_(maximum(max_sq, exp_avg_sq));
      second = max_sq;
    }
    Tensor denom = sqrt(second);  // the one fresh temporary besides the quotient
    denom.div_(bias_correction2_sqrt).add_(o.eps);
    p.add_(div(exp_avg, denom), -step_size);
  }
}

std::vector<std::pair<std::string, double>> AdamW::hyperparameters() const {
  return {{"lr", options_.lr},       {"beta1", options_.beta1},
          {"beta2", options_.beta2}, {"eps", options_.eps},
          {"weight_decay", options_.weight_decay}, {"amsgrad", options_.amsgrad ? 1.0 : 0.0}};
}

void AdamW::set_hyperparameter(const std::string& name, double v) {
  if (name == "lr") options_.lr = v;
  else if (name == "beta1") options_.beta1 = v;
  else if (name == "beta2") options_.beta2 = v;
  else if (name == "eps") options_.eps = v;
  else if (name == "weight_decay") options_.weight_decay = v;
  else if (name == "amsgrad") options_.amsgrad = v != 0;
}

void AdamW::check_hyperparameters() const { validate(options_); }

}  // namespace dtr::optim
