#include "eager/optim.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "eager/autograd.h"
#include "eager/distributed/distributed.h"
#include "eager/ops.h"

namespace dtr::optim {

namespace {
// A 0-d constant tensor holding `value` (from_vector would make it 1-D).
template <typename T>
Tensor scalar_tensor(T value) {
  return detail::from_host(&value, 1, dtype_of<T>(), {}, dtype_of<T>());
}
}  // namespace

// ---- parameter groups -------------------------------------------------------------

OptimizerParamGroup& OptimizerParamGroup::operator=(const OptimizerParamGroup& other) {
  if (this != &other) {
    params_ = other.params_;
    options_ = other.options_ ? other.options_->clone() : nullptr;
  }
  return *this;
}

OptimizerOptions& OptimizerParamGroup::options() {
  DTR_CHECK(options_ != nullptr, ValueError,
            "OptimizerParamGroup: this group has no options (it gets the optimizer's defaults when added)");
  return *options_;
}

const OptimizerOptions& OptimizerParamGroup::options() const {
  return const_cast<OptimizerParamGroup*>(this)->options();
}

// ---- Optimizer ------------------------------------------------------------------

Optimizer::Optimizer(std::vector<OptimizerParamGroup> param_groups, std::unique_ptr<OptimizerOptions> defaults,
                     std::string name)
    : name_(std::move(name)), defaults_(std::move(defaults)) {
  for (OptimizerParamGroup& g : param_groups) append_group(std::move(g));
  DTR_CHECK(!params_.empty(), ValueError, "{}: optimizer got an empty parameter list", name_);
}

void Optimizer::append_group(OptimizerParamGroup group) {
  const std::vector<Tensor>& ps = group.params();
  for (size_t k = 0; k < ps.size(); ++k) {
    const Tensor& p = ps[k];
    const size_t i = params_.size() + k;  // its number once added
    DTR_CHECK(p.defined(), ValueError, "{}: parameter {} is undefined", name_, i);
    DTR_CHECK(p.is_leaf() && p.requires_grad(), ValueError,
              "{}: can't optimize a non-leaf Tensor or one that does not require grad (parameter "
              "{}, shape {})",
              name_, i, shape_str(p.shape()));
    for (size_t j = 0; j < i; ++j) {
      const Tensor& q = j < params_.size() ? params_[j] : ps[j - params_.size()];
      DTR_CHECK(q.impl() != p.impl(), ValueError,
                "{}: parameter {} appears more than once (also at {}; some parameters appear in more than one "
                "parameter group, or twice in one)",
                name_, i, j);
    }
  }
  if (!group.has_options()) group.set_options(defaults_->clone());
  for (const Tensor& p : ps) {
    params_.push_back(p);
    group_of_.push_back(groups_.size());
    state_.emplace_back();
  }
  groups_.push_back(std::move(group));
}

void Optimizer::init(bool zero_redundancy, std::shared_ptr<distributed::ProcessGroup> group) {
  check_options(*defaults_);
  for (const OptimizerParamGroup& g : groups_) check_options(g.options());
  shard_state(zero_redundancy, std::move(group));
}

void Optimizer::check_groups_unchanged() const {
  size_t i = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::vector<Tensor>& ps = groups_[g].params();
    bool same = i + ps.size() <= params_.size();
    for (size_t k = 0; same && k < ps.size(); ++k) same = ps[k].impl() == params_[i + k].impl() && group_of_[i + k] == g;
    DTR_CHECK(same, ValueError,
              "{}: the parameter list of group {} was changed after it was added; add parameters with "
              "add_param_group",
              name_, g);
    i += ps.size();
  }
  DTR_CHECK(i == params_.size(), ValueError,
            "{}: the parameter lists of the groups were changed after they were added; add parameters with "
            "add_param_group",
            name_);
}

double Optimizer::lr() const { return groups_.at(0).options().get_lr(); }

void Optimizer::set_lr(double lr) {
  for (OptimizerParamGroup& g : groups_) g.options().set_lr(lr);
}

std::vector<std::pair<std::string, double>> Optimizer::group_hyperparameters(size_t g) const {
  DTR_CHECK(g < groups_.size(), IndexError, "{}: parameter group {} out of range (the optimizer has {})", name_,
            g, groups_.size());
  return hyperparameters(groups_[g].options());
}

void Optimizer::set_group_hyperparameters(size_t g, const std::vector<std::pair<std::string, double>>& values) {
  DTR_CHECK(g < groups_.size(), IndexError, "{}: parameter group {} out of range (the optimizer has {})", name_,
            g, groups_.size());
  // Tried on a copy first, so references to the group's options stay valid
  // and a refused value changes nothing.
  std::unique_ptr<OptimizerOptions> next = groups_[g].options().clone();
  for (const auto& [name, value] : values) {
    DTR_CHECK(set_hyperparameter(*next, name, value), ValueError, "{}: no hyperparameter '{}' (group {})", name_,
              name, g);
  }
  check_options(*next);
  for (const auto& [name, value] : values) set_hyperparameter(groups_[g].options(), name, value);
}

void Optimizer::zero_grad(bool set_to_none) {
  for (Tensor& p : params_) {
    if (set_to_none) {
      p.set_grad(Tensor());
    } else if (Tensor g = p.grad(); g.defined()) {
      NoGradGuard no_grad;
      g.zero_();
    }
  }
}

Optimizer::~Optimizer() = default;

// ---- optimizer-state sharding (ZeRO stage 1) -------------------------------------

/// The partition of the parameters over the ranks of a group.
struct Optimizer::Sharding {
  /// The parameters of one dtype, in constructor order, as one flat sequence.
  struct Flat {
    DType dtype = kFloat32;
    Device device;
    std::vector<size_t> params;    // indices into params_
    std::vector<int64_t> offsets;  // where each starts in the sequence
    int64_t numel = 0;
    int64_t shard = 0;  // elements per rank: ceil(numel / world)
  };
  std::shared_ptr<distributed::ProcessGroup> group;
  int rank = 0, world = 1;
  std::vector<Flat> flats;
  /// Per parameter: [begin, end) of its elements (flattened) in this rank's
  /// shard; begin == end when it has none.
  std::vector<std::pair<int64_t, int64_t>> local;
};

void Optimizer::add_param_group(const OptimizerParamGroup& param_group) {
  if (param_group.has_options()) check_options(param_group.options());
  bool stateful = false;
  for (const ParamState& s : state_) stateful = stateful || s.step > 0 || !s.buffer_names.empty();
  DTR_CHECK(sharding_ == nullptr || !stateful, ValueError,
            "{}.add_param_group: the state is sharded (zero_redundancy) and the optimizer already holds state; "
            "add every group before the first step",
            name_);
  const size_t groups = groups_.size(), params = params_.size();
  append_group(param_group);
  if (sharding_ != nullptr) {
    try {
      shard_state(true, sharding_->group);  // recut over every parameter
    } catch (...) {
      groups_.erase(groups_.begin() + std::ptrdiff_t(groups), groups_.end());
      params_.resize(params);
      group_of_.resize(params);
      state_.resize(params);
      throw;
    }
  }
}

bool Optimizer::has_buffer(const ParamState& s, const std::string& name) {
  return std::find(s.buffer_names.begin(), s.buffer_names.end(), name) != s.buffer_names.end();
}

void Optimizer::add_buffer(ParamState& s, const std::string& name, Tensor t) {
  if (!has_buffer(s, name)) s.buffer_names.push_back(name);
  if (t.defined()) s.buffers.insert(name, std::move(t));
}

namespace {

/// What a parameter must match on every rank: dtype, ndim, numel, a hash of
/// every dim, and the first kShownDims dims (for the message).
constexpr int kShownDims = 6;
constexpr int64_t kRecordWords = 4 + kShownDims;

uint64_t fnv(uint64_t h, int64_t v) { return (h ^ uint64_t(v)) * 1099511628211ull; }

std::vector<int64_t> parameter_record(const Tensor& p) {
  uint64_t h = 1469598103934665603ull;
  for (int64_t d : p.shape()) h = fnv(h, d);
  std::vector<int64_t> r = {int64_t(p.dtype()), p.dim(), p.numel(), int64_t(h)};
  for (int k = 0; k < kShownDims; ++k) r.push_back(k < p.dim() ? p.shape()[size_t(k)] : 0);
  return r;
}

std::string describe_record(const int64_t* r) {
  if (r[0] < 0) return "none";
  std::vector<int64_t> dims(r + 4, r + 4 + std::min<int64_t>(r[1], kShownDims));
  return fmt::format("{} [{}{}]", dtype_name(DType(r[0])), fmt::join(dims, ", "), r[1] > kShownDims ? ", ..." : "");
}

/// Every rank's rows of `words` int64 (an all-gather), row r from rank r.
std::vector<int64_t> gather_words(const std::vector<int64_t>& words, Device device,
                                  const std::shared_ptr<distributed::ProcessGroup>& group) {
  const Tensor mine = from_vector(words, {int64_t(words.size())}, kInt64).to(device);
  return distributed::functional::all_gather(mine, group).to(kCPU).to_vector<int64_t>();
}

/// Throws on every rank of `group`, naming the first parameter that differs,
/// unless every rank holds parameters of the same count, order, shapes and
/// dtypes (DistributedError), all contiguous (ValueError): what ZeRO's
/// partition and its all-gathers assume.
void check_same_parameters(const std::string& name, const std::vector<Tensor>& params,
                           const std::shared_ptr<distributed::ProcessGroup>& group) {
  // One all-gather of (count, hash of every record, first non-contiguous
  // parameter) settles the common case; only when the counts or hashes
  // differ does a second gather of every record find the first parameter
  // that differs, the same one on every rank.
  const int world = group->size();
  const Device device = params[0].device();
  uint64_t h = 1469598103934665603ull;
  int64_t not_contiguous = -1;
  for (size_t i = 0; i < params.size(); ++i) {
    for (int64_t w : parameter_record(params[i])) h = fnv(h, w);
    if (not_contiguous < 0 && !params[i].is_contiguous()) not_contiguous = int64_t(i);
  }
  const std::vector<int64_t> heads =
      gather_words({int64_t(params.size()), int64_t(h), not_contiguous}, device, group);
  bool same = true;
  int64_t most = 0;
  for (int r = 0; r < world; ++r) {
    same = same && heads[size_t(3 * r)] == heads[0] && heads[size_t(3 * r + 1)] == heads[1];
    most = std::max(most, heads[size_t(3 * r)]);
  }
  if (!same) {
    std::vector<int64_t> records(size_t(most * kRecordWords), -1);  // -1: no such parameter here
    for (size_t i = 0; i < params.size(); ++i) {
      const std::vector<int64_t> r = parameter_record(params[i]);
      std::copy(r.begin(), r.end(), records.begin() + std::ptrdiff_t(i * size_t(kRecordWords)));
    }
    const std::vector<int64_t> all = gather_words(records, device, group);
    auto row = [&](int r, int64_t i) { return all.data() + (int64_t(r) * most + i) * kRecordWords; };
    int64_t first = 0;
    for (; first < most; ++first) {
      bool agree = true;
      for (int r = 1; r < world; ++r) agree = agree && std::equal(row(r, first), row(r, first) + kRecordWords, row(0, first));
      if (!agree) break;
    }
    std::vector<std::string> sides;
    for (int r = 0; r < world; ++r)
      sides.push_back(fmt::format("rank {} ({} parameters): {}", r, heads[size_t(3 * r)],
                                  first < most ? describe_record(row(r, first)) : "the same"));
    throw DistributedError(fmt::format(
        "{}: zero_redundancy needs the same parameters (count, order, shapes, dtypes) on every rank of "
        "process group {}; parameter {} differs (this is rank {}): {}",
        name, group->id(), first, group->rank(), fmt::join(sides, "; ")));
  }
  for (int r = 0; r < world; ++r) {
    const int64_t i = heads[size_t(3 * r + 2)];
    DTR_CHECK(i < 0, ValueError,
              "{}: zero_redundancy needs contiguous parameters; parameter {} (shape {}) is not, on rank {}", name,
              i, shape_str(params[size_t(i)].shape()), r);
  }
}

}  // namespace

void Optimizer::shard_state(bool zero_redundancy, std::shared_ptr<distributed::ProcessGroup> group) {
  if (!zero_redundancy) return;
  auto sh = std::make_unique<Sharding>();
  sh->group = group ? std::move(group) : distributed::world();
  sh->rank = sh->group->rank();
  sh->world = sh->group->size();
  DTR_CHECK(sh->rank >= 0, ValueError, "{}: zero_redundancy over a process group this rank is not a member of",
            name_);
  check_same_parameters(name_, params_, sh->group);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    auto flat = std::find_if(sh->flats.begin(), sh->flats.end(),
                             [&](const Sharding::Flat& f) { return f.dtype == p.dtype(); });
    if (flat == sh->flats.end()) {
      sh->flats.push_back({.dtype = p.dtype(), .device = p.device()});
      flat = sh->flats.end() - 1;
    }
    flat->params.push_back(i);
    flat->offsets.push_back(flat->numel);
    flat->numel += p.numel();
  }
  sh->local.assign(params_.size(), {0, 0});
  for (Sharding::Flat& f : sh->flats) {
    f.shard = (f.numel + sh->world - 1) / sh->world;
    const int64_t lo = f.shard * sh->rank, hi = std::min(f.numel, lo + f.shard);
    for (size_t k = 0; k < f.params.size(); ++k) {
      const int64_t begin = std::max(lo, f.offsets[k]);
      const int64_t end = std::min(hi, f.offsets[k] + params_[f.params[k]].numel());
      if (begin < end) sh->local[f.params[k]] = {begin - f.offsets[k], end - f.offsets[k]};
    }
  }
  sharding_ = std::move(sh);
}

std::shared_ptr<distributed::ProcessGroup> Optimizer::process_group() const {
  return sharding_ ? sharding_->group : nullptr;
}

int64_t Optimizer::state_nbytes() const {
  int64_t bytes = 0;
  for (const ParamState& s : state_) {
    for (const auto& [name, buf] : s.buffers) bytes += buf.nbytes();
  }
  return bytes;
}

namespace {
/// Elements gathered per round of an all-gather: at most 8 MiB land on each
/// rank at once, whatever the model's size.
constexpr int64_t kGatherBytes = int64_t(8) << 20;

/// All-gathers the shards of one flat sequence `f`: `local(i)` is this
/// rank's 1-D piece of parameter i's values (undefined: zeros are sent),
/// and `sink(i, begin, values)` receives elements [begin, begin + n) of
/// parameter i (flattened) from the shard of every rank but this one (with
/// `own`: also this one's).
template <typename Flat>
void gather_flat(const Flat& f, int rank, int world, const std::shared_ptr<distributed::ProcessGroup>& group,
                 const std::vector<Tensor>& params, const std::vector<std::pair<int64_t, int64_t>>& local_range,
                 const std::function<Tensor(size_t)>& local,
                 const std::function<void(size_t, int64_t, const Tensor&)>& sink, bool own) {
  const int64_t S = f.shard;
  if (S == 0) return;
  const TensorOptions opts = TensorOptions(f.device).dtype(f.dtype);
  Tensor shard = zeros({S}, opts);
  for (size_t k = 0; k < f.params.size(); ++k) {
    const size_t i = f.params[k];
    const auto [begin, end] = local_range[i];
    if (begin == end) continue;
    const Tensor piece = local(i);
    const int64_t at = f.offsets[k] + begin - S * rank;
    if (piece.defined()) shard.slice(0, at, at + (end - begin)).copy_(piece);
  }
  const int64_t chunk = std::max<int64_t>(1, kGatherBytes / (int64_t(world) * int64_t(itemsize(f.dtype))));
  for (int64_t c = 0; c < S; c += chunk) {
    const int64_t len = std::min(chunk, S - c);
    const Tensor in = len == S ? shard : shard.slice(0, c, c + len);
    Tensor out = in;
    if (world > 1) {
      out = empty({int64_t(world) * len}, opts);
      distributed::all_gather_into_tensor(out, in, group);
    }
    for (int q = 0; q < world; ++q) {
      if (q == rank && !own) continue;
      const int64_t lo = S * q + c, hi = std::min(lo + len, f.numel);
      for (size_t k = 0; k < f.params.size() && lo < hi; ++k) {
        const int64_t p_lo = f.offsets[k], p_hi = p_lo + params[f.params[k]].numel();
        const int64_t a = std::max(lo, p_lo), b = std::min(hi, p_hi);
        if (a >= b) continue;
        sink(f.params[k], a - p_lo, out.slice(0, int64_t(q) * len + (a - lo), int64_t(q) * len + (b - lo)));
      }
    }
  }
}
}  // namespace

void Optimizer::gather(const std::string& name, int to, StateDict* out) {
  const Sharding& sh = *sharding_;
  const bool params = name.empty();
  for (const Sharding::Flat& f : sh.flats) {
    // Which parameters of this sequence have the buffer (on some rank).
    bool any = params;
    for (size_t i : f.params) any = any || has_buffer(state_[i], name);
    if (!any) continue;
    std::vector<Tensor> full(params_.size());
    const bool receive = params || sh.rank == to;
    if (!params && receive) {
      for (size_t i : f.params) {
        if (has_buffer(state_[i], name)) full[i] = empty(params_[i].shape(), TensorOptions(f.device).dtype(f.dtype));
      }
    }
    gather_flat(
        f, sh.rank, sh.world, sh.group, params_, sh.local,
        [&](size_t i) -> Tensor {
          if (params) return params_[i].reshape({-1}).slice(0, sh.local[i].first, sh.local[i].second);
          const Tensor* b = state_[i].buffers.find(name);
          return b != nullptr ? *b : Tensor();
        },
        [&](size_t i, int64_t begin, const Tensor& values) {
          if (!receive) return;
          Tensor& dst = params ? params_[i] : full[i];
          if (!dst.defined()) return;
          dst.reshape({-1}).slice(0, begin, begin + values.numel()).copy_(values);
        },
        /*own=*/!params);
    if (!params && receive) {
      for (size_t i : f.params) {
        if (full[i].defined()) out->insert(fmt::format("state.{}.{}", i, name), full[i]);
      }
    }
  }
}

Tensor Optimizer::step(LossClosure closure) {
  Tensor loss;
  if (closure) {
    GradModeGuard grad_on(true);
    loss = closure();
  }
  check_groups_unchanged();
  for (const OptimizerParamGroup& group : groups_) check_options(group.options());
  NoGradGuard no_grad;
  if (sharding_ == nullptr) {
    for (size_t i = 0; i < params_.size(); ++i) {
      const Tensor g = params_[i].grad();
      if (g.defined()) update(state_[i], params_[i], g, groups_[group_of_[i]].options());
    }
    return loss;
  }
  consolidated_.reset();
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    const OptimizerOptions& options = groups_[group_of_[i]].options();
    const auto [begin, end] = sharding_->local[i];
    if (begin == end) {
      Tensor none;
      update(state_[i], none, Tensor(), options);
      continue;
    }
    Tensor piece = params_[i].reshape({-1}).slice(0, begin, end);
    update(state_[i], piece, g.reshape({-1}).slice(0, begin, end), options);
  }
  gather("", 0, nullptr);
  return loss;
}

void Optimizer::consolidate_state_dict(int to) {
  if (sharding_ == nullptr) return;
  const Sharding& sh = *sharding_;
  DTR_CHECK(to >= 0 && to < sh.world, ValueError,
            "{}.consolidate_state_dict: to={} is not a rank of the group (size {})", name_, to, sh.world);
  NoGradGuard no_grad;
  consolidated_.reset();
  // Gathered buffer by buffer, then laid out as the unsharded state_dict.
  std::vector<std::string> names;
  for (const ParamState& s : state_) {
    for (const std::string& n : s.buffer_names) {
      if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    }
  }
  StateDict gathered;
  for (const std::string& n : names) gather(n, to, &gathered);
  if (sh.rank != to) return;
  consolidated_ = layout([&](size_t i, const std::string& name) {
    return gathered.at(fmt::format("state.{}.{}", i, name));
  });
}

StateDict Optimizer::layout(const std::function<Tensor(size_t, const std::string&)>& buffer) const {
  StateDict out;
  for (size_t i = 0; i < state_.size(); ++i) {
    const ParamState& s = state_[i];
    if (counts_steps() && s.step > 0) {
      out.insert(fmt::format("state.{}.step", i), scalar_tensor<int64_t>(s.step));
    }
    for (const std::string& name : s.buffer_names) out.insert(fmt::format("state.{}.{}", i, name), buffer(i, name));
  }
  int64_t first = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (const auto& [name, value] : hyperparameters(groups_[g].options())) {
      out.insert(fmt::format("param_groups.{}.{}", g, name), scalar_tensor<double>(value));
    }
    const int64_t n = int64_t(groups_[g].params().size());
    out.insert(fmt::format("param_groups.{}.params", g), arange(first, first + n, 1, TensorOptions(kInt64)));
    first += n;
  }
  return out;
}

StateDict Optimizer::state_dict() const {
  if (sharding_ == nullptr) {
    return layout([&](size_t i, const std::string& name) { return state_[i].buffers.at(name).detach(); });
  }
  DTR_CHECK(consolidated_.has_value(), ValueError,
            "{}.state_dict: the state is sharded over {} ranks (zero_redundancy) and has not been "
            "consolidated on this rank (rank {}) since the last step or load: call "
            "consolidate_state_dict(to) on every rank, then state_dict() on rank `to`",
            name_, sharding_->world, sharding_->rank);
  return *consolidated_;
}

namespace {
/// The number in "<prefix><number>.<rest>" and the offset of <rest>, or
/// nullopt when `key` has no such form.
std::optional<std::pair<size_t, size_t>> numbered(const std::string& key, std::string_view prefix) {
  if (!key.starts_with(prefix)) return std::nullopt;
  const size_t pos = prefix.size(), dot = key.find('.', pos);
  if (dot == std::string::npos || dot == pos || dot + 1 >= key.size() || dot - pos > 9) return std::nullopt;
  for (size_t c = pos; c < dot; ++c) {
    if (!std::isdigit(static_cast<unsigned char>(key[c]))) return std::nullopt;
  }
  return std::make_pair(size_t(std::stoul(key.substr(pos, dot - pos))), dot + 1);
}
}  // namespace

void Optimizer::load_state_dict(const StateDict& state) {
  // Validate everything first so a bad dict leaves the optimizer untouched.
  std::map<size_t, std::map<std::string, double>> hp;  // per saved group
  std::map<size_t, std::vector<int64_t>> saved_params;  // per saved group: its "params" list
  std::map<size_t, std::vector<std::pair<std::string, Tensor>>> saved_state;  // per saved parameter number, in order
  for (const auto& [key, t] : state) {
    DTR_CHECK(t.defined(), ValueError, "{}.load_state_dict: entry '{}' is undefined", name_, key);
    if (const auto group = numbered(key, "param_groups.")) {
      const std::string name = key.substr(group->second);
      if (name == "params") {
        DTR_CHECK(t.dim() == 1 && !t.is_floating_point(), ValueError,
                  "{}.load_state_dict: '{}' must be a 1-D integer tensor of parameter numbers, got {} of shape {}",
                  name_, key, dtype_name(t.dtype()), shape_str(t.shape()));
        saved_params[group->first] = t.to(kCPU).to(kInt64).to_vector<int64_t>();
        continue;
      }
      DTR_CHECK(t.numel() == 1, ValueError,
                "{}.load_state_dict: hyperparameter '{}' must hold one value, got shape {}", name_, key,
                shape_str(t.shape()));
      hp[group->first][name] = t.item<double>();
      continue;
    }
    const auto param = numbered(key, "state.");
    DTR_CHECK(param.has_value(), ValueError, "{}.load_state_dict: unexpected key '{}'", name_, key);
    saved_state[param->first].emplace_back(key.substr(param->second), t);
  }
  // Groups: as many as this optimizer's, numbered 0.., each naming as many
  // parameters as this optimizer's group of the same number.
  std::set<size_t> saved_groups;
  for (const auto& [g, values] : hp) saved_groups.insert(g);
  for (const auto& [g, list] : saved_params) saved_groups.insert(g);
  DTR_CHECK(saved_groups.size() == groups_.size() && (saved_groups.empty() || *saved_groups.rbegin() + 1 == groups_.size()),
            ValueError, "{}.load_state_dict: loaded state dict has {} parameter groups (numbered {}); the optimizer has {}",
            name_, saved_groups.size(), fmt::join(saved_groups, ", "), groups_.size());
  std::map<int64_t, size_t> id_map;  // saved parameter number → this optimizer's
  if (saved_params.empty() && groups_.size() == 1) {
    for (size_t i = 0; i < params_.size(); ++i) id_map[int64_t(i)] = i;  // the one-group form
  } else {
    size_t i = 0;
    for (size_t g = 0; g < groups_.size(); ++g) {
      const auto list = saved_params.find(g);
      DTR_CHECK(list != saved_params.end(), ValueError, "{}.load_state_dict: missing key 'param_groups.{}.params'",
                name_, g);
      DTR_CHECK(list->second.size() == groups_[g].params().size(), ValueError,
                "{}.load_state_dict: loaded state dict contains a parameter group that doesn't match the size of "
                "optimizer's group: group {} has {} parameters, the loaded one {}",
                name_, g, groups_[g].params().size(), list->second.size());
      for (int64_t id : list->second) id_map.emplace(id, i++);
    }
  }
  std::vector<ParamState> next(params_.size());
  for (const auto& [id, buffers] : saved_state) {
    const auto found = id_map.find(int64_t(id));
    DTR_CHECK(found != id_map.end(), ValueError,
              "{}.load_state_dict: key 'state.{}.{}' names parameter {} but no group of the loaded state dict "
              "lists it (the optimizer has {} parameters)",
              name_, id, buffers.begin()->first, id, params_.size());
    const size_t i = found->second;
    for (const auto& [name, t] : buffers) {
      const std::string key = fmt::format("state.{}.{}", id, name);
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
  }
  // Hyperparameters: every one of each group, no other, values the
  // optimizer accepts (tried on copies of the options).
  std::vector<std::unique_ptr<OptimizerOptions>> options;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const auto own = hyperparameters(groups_[g].options());
    const std::map<std::string, double>& values = hp[g];
    for (const auto& [name, value] : own) {
      DTR_CHECK(values.count(name), ValueError, "{}.load_state_dict: missing key 'param_groups.{}.{}'", name_, g,
                name);
    }
    options.push_back(groups_[g].options().clone());
    for (const auto& [name, value] : values) {
      bool known = false;
      for (const auto& [n, v] : own) known = known || n == name;
      DTR_CHECK(known, ValueError, "{}.load_state_dict: unexpected key 'param_groups.{}.{}'", name_, g, name);
      set_hyperparameter(*options.back(), name, value);
    }
    check_options(*options.back());
  }
  // Apply: hyperparameters (into the groups' own options, so references to
  // them stay valid), then copies of the buffers.
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (const auto& [name, value] : hp[g]) set_hyperparameter(groups_[g].options(), name, value);
  }
  NoGradGuard no_grad;
  consolidated_.reset();
  for (size_t i = 0; i < params_.size(); ++i) {
    ParamState s;
    s.step = next[i].step;
    for (const auto& [name, t] : next[i].buffers) {
      Tensor src = t;
      if (sharding_ != nullptr) {
        // Only this rank's elements of the full buffer.
        const auto [begin, end] = sharding_->local[i];
        if (begin == end) {
          add_buffer(s, name, Tensor());
          continue;
        }
        src = t.reshape({-1}).slice(0, begin, end);
      }
      // An owned copy in the parameter's dtype, on its device (the loaded
      // tensor may be shared, and is read on the CPU).
      Tensor buf = src.to(params_[i].device()).to(params_[i].dtype());
      buf = buf.impl() == src.impl() ? src.clone() : buf;
      add_buffer(s, name, buf);
    }
    state_[i] = std::move(s);
  }
}

namespace {
void check_range(bool ok, const std::string& opt, const char* what, double v) {
  DTR_CHECK(ok, ValueError, "{}: invalid {} value: {}", opt, what, v);
}

/// `options` as the optimizer's options type O, or TypeError.
template <typename O>
const O& options_as(const OptimizerOptions& options, const std::string& optimizer, const char* expected) {
  const O* o = dynamic_cast<const O*>(&options);
  DTR_CHECK(o != nullptr, TypeError, "{}: a parameter group's options are not {} (the options type of {})",
            optimizer, expected, optimizer);
  return *o;
}
}  // namespace

// ---- SGD ------------------------------------------------------------------------

SGD::SGD(std::vector<OptimizerParamGroup> param_groups, SGDOptions defaults)
    : Optimizer(std::move(param_groups), std::make_unique<SGDOptions>(defaults), "SGD") {
  init(defaults.zero_redundancy(), defaults.process_group());
}

SGD::SGD(std::vector<Tensor> params, SGDOptions defaults)
    : SGD(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}, std::move(defaults)) {}

void SGD::check_options(const OptimizerOptions& options) const {
  const SGDOptions& o = options_as<SGDOptions>(options, name_, "SGDOptions");
  check_range(o.lr() >= 0, name_, "learning rate", o.lr());
  check_range(o.momentum() >= 0, name_, "momentum", o.momentum());
  check_range(o.weight_decay() >= 0, name_, "weight_decay", o.weight_decay());
  DTR_CHECK(!o.nesterov() || (o.momentum() > 0 && o.dampening() == 0), ValueError,
            "SGD: Nesterov momentum requires a momentum and zero dampening (momentum {}, dampening {})",
            o.momentum(), o.dampening());
}

void SGD::update(ParamState& s, Tensor& p, const Tensor& g, const OptimizerOptions& options) {
  const auto& o = static_cast<const SGDOptions&>(options);
  const bool local = p.defined();  // false: this parameter's elements live on other ranks
  if (!local) {
    if (o.momentum() != 0) add_buffer(s, "momentum_buffer", Tensor());
    return;
  }
  Tensor d = g;
  if (o.weight_decay() != 0) d = add(d, p, o.weight_decay());
  if (o.momentum() != 0) {
    const Tensor* found = s.buffers.find("momentum_buffer");
    Tensor buf;
    if (found == nullptr) {
      buf = d.clone();
      add_buffer(s, "momentum_buffer", buf);
    } else {
      buf = *found;
      buf.mul_(o.momentum()).add_(d, 1.0 - o.dampening());
    }
    d = o.nesterov() ? add(d, buf, o.momentum()) : buf;
  }
  p.add_(d, -o.lr());
}

std::vector<std::pair<std::string, double>> SGD::hyperparameters(const OptimizerOptions& options) const {
  const auto& o = static_cast<const SGDOptions&>(options);
  return {{"lr", o.lr()},
          {"momentum", o.momentum()},
          {"dampening", o.dampening()},
          {"weight_decay", o.weight_decay()},
          {"nesterov", o.nesterov() ? 1.0 : 0.0}};
}

bool SGD::set_hyperparameter(OptimizerOptions& options, const std::string& name, double v) const {
  auto& o = static_cast<SGDOptions&>(options);
  if (name == "lr") o.lr(v);
  else if (name == "momentum") o.momentum(v);
  else if (name == "dampening") o.dampening(v);
  else if (name == "weight_decay") o.weight_decay(v);
  else if (name == "nesterov") o.nesterov(v != 0);
  else return false;
  return true;
}

// ---- Adam and AdamW ------------------------------------------------------------------

namespace {

/// Adam's and AdamW's options checks (the two types have the same fields).
template <typename O>
void check_adam(const O& o, const std::string& optimizer) {
  const auto [beta1, beta2] = o.betas();
  check_range(o.lr() >= 0, optimizer, "learning rate", o.lr());
  check_range(o.eps() >= 0, optimizer, "epsilon", o.eps());
  check_range(beta1 >= 0 && beta1 < 1, optimizer, "beta parameter at index 0", beta1);
  check_range(beta2 >= 0 && beta2 < 1, optimizer, "beta parameter at index 1", beta2);
  check_range(o.weight_decay() >= 0, optimizer, "weight_decay", o.weight_decay());
}

template <typename O>
std::vector<std::pair<std::string, double>> adam_hyperparameters(const O& o) {
  return {{"lr", o.lr()},
          {"beta1", std::get<0>(o.betas())},
          {"beta2", std::get<1>(o.betas())},
          {"eps", o.eps()},
          {"weight_decay", o.weight_decay()},
          {"amsgrad", o.amsgrad() ? 1.0 : 0.0}};
}

template <typename O>
bool set_adam_hyperparameter(O& o, const std::string& name, double v) {
  if (name == "lr") o.lr(v);
  else if (name == "beta1") std::get<0>(o.betas()) = v;
  else if (name == "beta2") std::get<1>(o.betas()) = v;
  else if (name == "eps") o.eps(v);
  else if (name == "weight_decay") o.weight_decay(v);
  else if (name == "amsgrad") o.amsgrad(v != 0);
  else return false;
  return true;
}

}  // namespace

/// One step of Adam (decoupled = false: the weight decay is added to the
/// gradient) or AdamW (decoupled = true: the parameter is shrunk), as
/// torch.optim's single-tensor forms.
template <typename O>
void Optimizer::adam_update(ParamState& s, Tensor& p, const Tensor& grad, const O& o, bool decoupled) {
  const auto [beta1, beta2] = o.betas();
  const bool local = p.defined();  // false: this parameter's elements live on other ranks
  if (!has_buffer(s, "exp_avg")) {
    add_buffer(s, "exp_avg", local ? zeros_like(p) : Tensor());
    add_buffer(s, "exp_avg_sq", local ? zeros_like(p) : Tensor());
  }
  if (o.amsgrad() && !has_buffer(s, "max_exp_avg_sq")) {
    add_buffer(s, "max_exp_avg_sq", local ? zeros_like(p) : Tensor());
  }
  s.step += 1;
  if (!local) return;
  Tensor exp_avg = s.buffers.at("exp_avg");
  Tensor exp_avg_sq = s.buffers.at("exp_avg_sq");

  Tensor g = grad;
  if (decoupled) {
    p.mul_(1.0 - o.lr() * o.weight_decay());
  } else if (o.weight_decay() != 0) {
    g = add(g, p, o.weight_decay());  // L2: part of the gradient
  }
  exp_avg.mul_(beta1).add_(g, 1.0 - beta1);
  exp_avg_sq.mul_(beta2).add_(mul(g, g), 1.0 - beta2);

  const double bias_correction1 = 1.0 - std::pow(beta1, double(s.step));
  const double bias_correction2 = 1.0 - std::pow(beta2, double(s.step));
  const double step_size = o.lr() / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  Tensor second = exp_avg_sq;
  if (o.amsgrad()) {
    Tensor max_sq = s.buffers.at("max_exp_avg_sq");
    max_sq.copy_(maximum(max_sq, exp_avg_sq));
    second = max_sq;
  }
  Tensor denom = sqrt(second);  // the one fresh temporary besides the quotient
  denom.div_(bias_correction2_sqrt).add_(o.eps());
  p.add_(div(exp_avg, denom), -step_size);
}

Adam::Adam(std::vector<OptimizerParamGroup> param_groups, AdamOptions defaults)
    : Optimizer(std::move(param_groups), std::make_unique<AdamOptions>(defaults), "Adam") {
  init(defaults.zero_redundancy(), defaults.process_group());
}

Adam::Adam(std::vector<Tensor> params, AdamOptions defaults)
    : Adam(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}, std::move(defaults)) {}

void Adam::check_options(const OptimizerOptions& options) const {
  check_adam(options_as<AdamOptions>(options, name_, "AdamOptions"), name_);
}

void Adam::update(ParamState& s, Tensor& p, const Tensor& g, const OptimizerOptions& options) {
  adam_update(s, p, g, static_cast<const AdamOptions&>(options), /*decoupled=*/false);
}

std::vector<std::pair<std::string, double>> Adam::hyperparameters(const OptimizerOptions& options) const {
  return adam_hyperparameters(static_cast<const AdamOptions&>(options));
}

bool Adam::set_hyperparameter(OptimizerOptions& options, const std::string& name, double v) const {
  return set_adam_hyperparameter(static_cast<AdamOptions&>(options), name, v);
}

AdamW::AdamW(std::vector<OptimizerParamGroup> param_groups, AdamWOptions defaults)
    : Optimizer(std::move(param_groups), std::make_unique<AdamWOptions>(defaults), "AdamW") {
  init(defaults.zero_redundancy(), defaults.process_group());
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions defaults)
    : AdamW(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}, std::move(defaults)) {}

void AdamW::check_options(const OptimizerOptions& options) const {
  check_adam(options_as<AdamWOptions>(options, name_, "AdamWOptions"), name_);
}

void AdamW::update(ParamState& s, Tensor& p, const Tensor& g, const OptimizerOptions& options) {
  adam_update(s, p, g, static_cast<const AdamWOptions&>(options), /*decoupled=*/true);
}

std::vector<std::pair<std::string, double>> AdamW::hyperparameters(const OptimizerOptions& options) const {
  return adam_hyperparameters(static_cast<const AdamWOptions&>(options));
}

bool AdamW::set_hyperparameter(OptimizerOptions& options, const std::string& name, double v) const {
  return set_adam_hyperparameter(static_cast<AdamWOptions&>(options), name, v);
}

// ---- learning-rate schedulers ------------------------------------------------------

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (const OptimizerParamGroup& g : optimizer.param_groups()) base_lrs_.push_back(g.options().get_lr());
  last_lrs_ = base_lrs_;
}

void LRScheduler::step() {
  last_epoch_ += 1;
  std::vector<OptimizerParamGroup>& groups = optimizer_.param_groups();
  const size_t n = std::min(groups.size(), base_lrs_.size());
  std::vector<double> lrs(n);
  for (size_t g = 0; g < n; ++g) lrs[g] = get_lr(groups[g].options().get_lr(), base_lrs_[g]);
  for (size_t g = 0; g < n; ++g) groups[g].options().set_lr(lrs[g]);
  last_lrs_ = std::move(lrs);
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  DTR_CHECK(step_size >= 1, ValueError, "StepLR: step_size must be positive, got {}", step_size);
  initial_step();
}

double StepLR::get_lr(double lr, double) const {
  if (last_epoch() == 0 || last_epoch() % step_size_ != 0) return lr;
  return lr * gamma_;
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), T_max_(T_max), eta_min_(eta_min) {
  DTR_CHECK(T_max >= 1, ValueError, "CosineAnnealingLR: T_max must be positive, got {}", T_max);
  initial_step();
}

double CosineAnnealingLR::get_lr(double lr, double base_lr) const {
  const int64_t e = last_epoch();
  if (e == 0) return lr;
  const double pi = std::acos(-1.0);
  const double t = double(T_max_);
  // Python's % (floor modulo) of (e - 1 - T_max) by 2·T_max.
  const int64_t period = 2 * T_max_;
  const int64_t phase = ((e - 1 - T_max_) % period + period) % period;
  if (phase == 0) return lr + (base_lr - eta_min_) * (1 - std::cos(pi / t)) / 2;
  return (1 + std::cos(pi * double(e) / t)) / (1 + std::cos(pi * double(e - 1) / t)) *
             (lr - eta_min_) +
         eta_min_;
}

LambdaLR::LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lr_lambda)
    : LRScheduler(optimizer), lr_lambda_(std::move(lr_lambda)) {
  DTR_CHECK(lr_lambda_ != nullptr, ValueError, "LambdaLR: lr_lambda is empty");
  initial_step();
}

double LambdaLR::get_lr(double, double base_lr) const { return base_lr * lr_lambda_(last_epoch()); }

}  // namespace dtr::optim
