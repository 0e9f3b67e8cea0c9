#include "eager/nn/parallel/ddp.h"

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>

#include "eager/autograd.h"
#include "eager/ops.h"

namespace dtr::nn::parallel {

namespace {

// Note [data parallel]: PyTorch's compute_bucket_assignment_by_size with one
// cap: parameters in reverse registration order (roughly the order backward
// produces their gradients), one open bucket per dtype that closes before it
// would pass the cap, a parameter larger than the cap alone (closing the
// open bucket of its dtype). Buckets are
// ordered by their first parameter in that order, so bucket 0 is the first
// to become ready. Depends only on shapes and dtypes: the same on every rank.
std::vector<std::vector<size_t>> assign_buckets(const std::vector<Tensor>& params, int64_t cap) {
  struct Open {
    DType dtype;
    std::vector<size_t> params;
    int64_t bytes = 0;
  };
  std::vector<std::vector<size_t>> buckets;
  std::vector<Open> open;
  for (size_t k = params.size(); k-- > 0;) {
    const Tensor& p = params[k];
    const int64_t bytes = p.nbytes();
    auto it = std::find_if(open.begin(), open.end(), [&](const Open& o) { return o.dtype == p.dtype(); });
    if (bytes > cap) {
      // Alone; the open bucket closes first, so each bucket's parameters
      // stay consecutive in reverse order and become ready together.
      if (it != open.end() && !it->params.empty()) {
        buckets.push_back(std::move(it->params));
        it->params.clear();
        it->bytes = 0;
      }
      buckets.push_back({k});
      continue;
    }
    if (it == open.end()) {
      open.push_back(Open{p.dtype(), {}, 0});
      it = open.end() - 1;
    } else if (it->bytes + bytes > cap) {
      buckets.push_back(std::move(it->params));
      it->params.clear();
      it->bytes = 0;
    }
    it->params.push_back(k);
    it->bytes += bytes;
  }
  for (Open& o : open)
    if (!o.params.empty()) buckets.push_back(std::move(o.params));
  // Position in reverse order of each bucket's first parameter.
  std::stable_sort(buckets.begin(), buckets.end(),
                   [](const auto& a, const auto& b) { return a.front() > b.front(); });
  return buckets;
}

/// Broadcasts `t` from group rank 0 in place (through a contiguous copy if
/// `t` is not contiguous).
void broadcast_in_place(Tensor& t, const std::shared_ptr<distributed::ProcessGroup>& group) {
  if (t.is_contiguous()) {
    distributed::broadcast(t, 0, group);
    return;
  }
  Tensor c = t.contiguous();
  distributed::broadcast(c, 0, group);
  t.copy_(c);
}

/// True when .grad `g` can take the reduced values in place: it covers its
/// whole storage and nothing else holds that storage (a gradient passed on
/// unchanged by backward may be shared by two leaves).
bool writable_in_place(const Tensor& g) {
  return g.defined() && g.is_contiguous() && g.storage_offset() == 0 &&
         g.storage()->handle_count.load() == 1 &&
         g.storage()->nbytes() == g.numel() * int64_t(itemsize(g.dtype()));
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module, DDPOptions options)
    : module_(std::move(module)), options_(std::move(options)) {
  DTR_CHECK(module_ != nullptr, ValueError, "DistributedDataParallel: the module is null");
  DTR_CHECK(options_.bucket_cap_mb > 0, ValueError,
            "DistributedDataParallel: bucket_cap_mb must be positive, got {}", options_.bucket_cap_mb);
  group_ = options_.process_group ? options_.process_group : distributed::world();
  std::unordered_set<const TensorImpl*> seen;
  for (auto& [name, p] : module_->named_parameters()) {
    if (!p.requires_grad() || !seen.insert(p.impl()).second) continue;
    params_.push_back(p);
    names_.push_back(name);
  }
  DTR_CHECK(!params_.empty(), ValueError,
            "DistributedDataParallel: {} has no parameter that requires gradient",
            module_->name());
  {
    // Rank 0's state everywhere (PyTorch's _sync_module_states).
    NoGradGuard no_grad;
    for (Tensor& p : params_) broadcast_in_place(p, group_);
    for (Tensor& b : module_->buffers()) broadcast_in_place(b, group_);
  }
  const auto cap = int64_t(options_.bucket_cap_mb * 1024.0 * 1024.0);
  bucket_of_.resize(params_.size());
  for (auto& indices : assign_buckets(params_, std::max<int64_t>(cap, 1))) {
    Bucket b;
    b.dtype = params_[indices.front()].dtype();
    for (size_t k : indices) {
      b.numel += params_[k].numel();
      bucket_of_[k] = buckets_.size();
    }
    b.params = std::move(indices);
    buckets_.push_back(std::move(b));
  }
  ready_.assign(params_.size(), false);
  reset_step();
  hooks_.reserve(params_.size());
  for (size_t k = 0; k < params_.size(); ++k) {
    hooks_.push_back(params_[k].register_post_accumulate_grad_hook([this, k](Tensor&) { on_grad_ready(k); }));
  }
}

DistributedDataParallel::~DistributedDataParallel() {
  for (RemovableHandle& h : hooks_) h.remove();
  // A Work destroyed unwaited waits in its own destructor.
}

std::vector<std::vector<size_t>> DistributedDataParallel::bucket_parameter_indices() const {
  std::vector<std::vector<size_t>> out;
  for (const Bucket& b : buckets_) out.push_back(b.params);
  return out;
}

int64_t DistributedDataParallel::bucket_bytes(size_t b) const {
  DTR_CHECK(b < buckets_.size(), IndexError, "bucket_bytes: bucket {} out of range ({} buckets)", b,
            buckets_.size());
  return buckets_[b].numel * int64_t(itemsize(buckets_[b].dtype));
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  auto* unary = dynamic_cast<UnaryModule*>(module_.get());
  DTR_CHECK(unary != nullptr, TypeError,
            "DistributedDataParallel::forward: {} is not a UnaryModule; call its forward between "
            "sync_buffers() and prepare_for_backward()",
            module_->name());
  sync_buffers();
  Tensor y = unary->forward(x);
  if (options_.find_unused_parameters && is_grad_enabled()) prepare_for_backward(y);
  return y;
}

void DistributedDataParallel::sync_buffers() {
  if (!options_.broadcast_buffers) return;
  std::vector<Tensor> buffers = module_->buffers();
  if (buffers.empty()) return;
  NoGradGuard no_grad;
  for (Tensor& b : buffers) broadcast_in_place(b, group_);
}

void DistributedDataParallel::prepare_for_backward(const std::vector<Tensor>& outputs) {
  if (!sync_ || !options_.find_unused_parameters) return;
  // Leaves reachable from the outputs, by their accumulators.
  std::unordered_set<const TensorImpl*> reached;
  std::unordered_set<const autograd::Node*> visited;
  std::vector<const autograd::Node*> stack;
  bool opaque = false;
  for (const Tensor& t : outputs) {
    if (!t.defined() || !t.requires_grad()) continue;
    if (t.is_leaf()) {
      reached.insert(t.impl());
      continue;
    }
    if (visited.insert(t.grad_fn().get()).second) stack.push_back(t.grad_fn().get());
  }
  while (!stack.empty()) {
    const autograd::Node* n = stack.back();
    stack.pop_back();
    if (n->is_accumulator()) {
      if (auto leaf = n->leaf.lock()) reached.insert(leaf.get());
      continue;
    }
    if (n->custom_backward) opaque = true;
    for (const autograd::Edge& e : n->next)
      if (e.node && visited.insert(e.node.get()).second) stack.push_back(e.node.get());
  }
  // A checkpoint region's nested backward may reach any parameter: leave the
  // unreached ones to the end of backward.
  if (opaque) return;
  begin_step_if_needed();
  // Marks left by a step that never reached backward (a forward whose
  // backward was not run, or threw before any gradient): dropped, as PyTorch
  // drops an unfinished reduction.
  if (!finish_queued_ && !autograd::in_backward() && next_launch_ == 0 &&
      std::any_of(ready_.begin(), ready_.end(), [](bool r) { return r; }))
    reset_step();
  for (size_t k = 0; k < params_.size(); ++k)
    if (!reached.contains(params_[k].impl()) && !ready_[k]) mark_ready(k);
  // Nothing reachable: no hook will fire, so the step ends here.
  if (std::all_of(ready_.begin(), ready_.end(), [](bool r) { return r; }) && !autograd::in_backward())
    finish_step();
}

void DistributedDataParallel::begin_step_if_needed() {
  // A step whose backward threw never ran its end-of-backward callback: its
  // collectives are abandoned (their Works wait in their destructors).
  if (finish_queued_ && autograd::backward_pass_id() != backward_pass_) {
    // Some buckets may have started: the other ranks (whose backward did not
    // throw) make bucket_count() all-reduces for that step, so this rank
    // starts the rest too (zeros, no had-a-gradient flags), or every later
    // bucket would be reduced with a different parameter's on the others.
    if (next_launch_ > 0) {
      NoGradGuard no_grad;
      for (; next_launch_ < buckets_.size(); ++next_launch_) {
        Bucket& b = buckets_[next_launch_];
        b.flat = zeros({b.numel + int64_t(b.params.size())},
                       TensorOptions(b.dtype).device(params_[b.params.front()].device()));
        b.work = distributed::all_reduce(b.flat, distributed::ReduceOp::kMean, group_, /*async_op=*/true);
      }
      for (Bucket& b : buckets_) {
        if (!b.work) continue;
        try {
          b.work->wait();
        } catch (const std::exception&) {
        }
      }
    }
    reset_step();
  }
}

void DistributedDataParallel::on_grad_ready(size_t k) {
  if (!sync_) return;  // no_sync(): accumulate only
  begin_step_if_needed();
  if (!finish_queued_) {
    autograd::queue_callback([this] { finish_step(); });
    finish_queued_ = true;
    backward_pass_ = autograd::backward_pass_id();
  }
  if (ready_[k]) {
    // Ready already (used in two nested backward passes, or marked unused by
    // prepare_for_backward): harmless until its bucket has started, since a
    // bucket reads the gradients when it starts.
    if (bucket_of_[k] < next_launch_ && late_error_.empty()) {
      late_error_ = fmt::format(
          "DistributedDataParallel: parameter '{}' received a gradient after its bucket {} was "
          "already all-reduced in this backward pass (PyTorch: \"Expected to mark a variable "
          "ready only once\"), so the reduced gradient would miss part of it. This happens when "
          "a parameter is used in two checkpoint regions (each recomputation runs a backward of "
          "its own), or inside a checkpoint region and outside it",
          names_[k], bucket_of_[k]);
    }
  } else {
    const size_t started = next_launch_;
    mark_ready(k);
    // Buckets this call started are left for later calls: a hook registered
    // after this one on the same parameter still sees the local gradient.
    progress(started);
    return;
  }
  progress(next_launch_);
}

void DistributedDataParallel::mark_ready(size_t k) {
  ready_[k] = true;
  --buckets_[bucket_of_[k]].pending;
  launch_ready_buckets();
}

void DistributedDataParallel::launch_ready_buckets() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    Bucket& b = buckets_[next_launch_];
    ++next_launch_;
    launch(b);
    if (autograd::in_backward()) ++early_launches_;
  }
}

void DistributedDataParallel::launch(Bucket& b) {
  NoGradGuard no_grad;
  // Gradients flattened, then one flag per parameter: 1 when this rank has
  // a gradient for it. The mean of the flags is > 0 when any rank had one.
  std::vector<Tensor> parts;
  std::vector<double> flags;
  parts.reserve(b.params.size() + 1);
  for (size_t k : b.params) {
    const Tensor& p = params_[k];
    Tensor g = p.grad();
    flags.push_back(g.defined() ? 1.0 : 0.0);
    parts.push_back(g.defined() ? g.reshape({p.numel()}) : zeros({p.numel()}, TensorOptions(b.dtype).device(p.device())));
  }
  parts.push_back(from_vector(flags, {int64_t(flags.size())}, TensorOptions(kFloat64))
                      .to(b.dtype)
                      .to(params_[b.params.front()].device()));
  b.flat = cat(parts, 0);
  b.work = distributed::all_reduce(b.flat, distributed::ReduceOp::kMean, group_, /*async_op=*/true);
}

void DistributedDataParallel::progress(size_t limit) {
  for (size_t i = 0; i < limit; ++i) {
    Bucket& b = buckets_[i];
    if (b.work && b.work->is_completed()) {
      b.work->wait();
      b.work.reset();
      copy_back(b);
    }
  }
}

void DistributedDataParallel::copy_back(Bucket& b) {
  NoGradGuard no_grad;
  const std::vector<double> used =
      b.flat.narrow(0, b.numel, int64_t(b.params.size())).to_vector<double>();
  int64_t offset = 0;
  for (size_t j = 0; j < b.params.size(); ++j) {
    Tensor& p = params_[b.params[j]];
    const int64_t n = p.numel();
    Tensor reduced = b.flat.narrow(0, offset, n).view(p.shape());
    offset += n;
    Tensor g = p.grad();
    if (writable_in_place(g)) {
      g.copy_(reduced);
    } else if (g.defined() || used[j] > 0) {
      Tensor fresh = empty(p.shape(), TensorOptions(p.dtype()).device(p.device()));
      fresh.copy_(reduced);
      p.set_grad(fresh);
    }
  }
  // The bucket's bytes go now, not at the end of backward: under a budget
  // the reduced buckets would otherwise double the gradients' floor.
  b.flat = Tensor();
  b.reduced = true;
}

void DistributedDataParallel::finish_step() {
  try {
    // Every parameter that got no gradient is ready now (unused on this rank).
    for (size_t k = 0; k < params_.size(); ++k)
      if (!ready_[k]) {
        ready_[k] = true;
        --buckets_[bucket_of_[k]].pending;
      }
    // Started from here, the buckets do not count as overlapped.
    while (next_launch_ < buckets_.size()) launch(buckets_[next_launch_++]);
    for (Bucket& b : buckets_) {
      if (b.reduced) continue;
      if (b.work) b.work->wait();
      b.work.reset();
      copy_back(b);
    }
  } catch (...) {
    reset_step();
    throw;
  }
  ++steps_;
  last_step_buckets_ = int64_t(buckets_.size());
  last_step_early_ = early_launches_;
  std::string late = std::move(late_error_);
  reset_step();
  if (!late.empty()) throw ValueError(late);
}

void DistributedDataParallel::reset_step() {
  for (Bucket& b : buckets_) {
    b.pending = int(b.params.size());
    b.flat = Tensor();
    b.work.reset();
    b.reduced = false;
  }
  std::fill(ready_.begin(), ready_.end(), false);
  next_launch_ = 0;
  finish_queued_ = false;
  backward_pass_ = 0;
  early_launches_ = 0;
  late_error_.clear();
}

}  // namespace dtr::nn::parallel
