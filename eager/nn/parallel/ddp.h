// dtr::nn::parallel::DistributedDataParallel: data-parallel training with
// gradients all-reduced in buckets while backward runs
// (torch.nn.parallel.DistributedDataParallel; Note [data parallel] in
// docs/DESIGN.md).
//
//   dtr::distributed::init_process_group("mpi");
//   auto model = std::make_shared<Net>();
//   dtr::nn::parallel::DistributedDataParallel ddp(model);   // rank 0's weights everywhere
//   for (...) {
//     ddp.sync_buffers();                    // where PyTorch's forward broadcasts buffers
//     dtr::Tensor loss = loss_fn(model->forward(shard));
//     loss.backward();                       // buckets reduced while backward runs
//     optimizer.step();                      // every rank steps with the same mean gradient
//     model->zero_grad();
//   }
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "eager/distributed/distributed.h"
#include "eager/nn/module.h"
#include "eager/tensor.h"

namespace dtr::nn::parallel {

/// Options of DistributedDataParallel (the keyword arguments of PyTorch's).
struct DDPOptions {
  /// The group whose ranks train together; null: the world group.
  std::shared_ptr<distributed::ProcessGroup> process_group;
  /// Largest bucket, in MiB (2^20 bytes) of gradient; a parameter larger
  /// than this is a bucket by itself. PyTorch's default, 25.
  double bucket_cap_mb = 25;
  /// Lets prepare_for_backward walk the graph from the outputs and mark the
  /// parameters it cannot reach ready at once, so their buckets need not
  /// wait for the end of backward.
  bool find_unused_parameters = false;
  /// Whether sync_buffers() broadcasts the module's buffers from rank 0.
  bool broadcast_buffers = true;
  // gradient_as_bucket_view is not offered: grads stay separate tensors and
  // a reduced bucket is copied back into them (PyTorch's default).
};

/// Wraps `module` for data-parallel training over `options.process_group`
/// (torch.nn.parallel.DistributedDataParallel). Every rank must build it, in
/// the same order relative to other collectives, around a module of the
/// same structure (same parameter shapes and dtypes in the same order).
///
/// At construction, rank 0's parameters and buffers are broadcast to every
/// rank (in place, under no_grad), and the parameters that require grad
/// (each distinct tensor once: tied weights count once) are split into
/// buckets: in reverse registration order, one dtype per bucket, at most
/// `bucket_cap_mb` MiB each, a larger parameter alone; the same buckets on
/// every rank. A post-accumulate-grad hook on each parameter marks it ready
/// when backward has accumulated its gradient. Once every parameter of a
/// bucket is ready, its gradients are flattened into one contiguous tensor
/// and all-reduced with the mean asynchronously, while backward goes on;
/// buckets start strictly in bucket order (a ready bucket waits for the ones
/// before it), so every rank calls the same collectives in the same order.
/// At the end of backward (autograd::queue_callback) the parameters that got
/// no gradient are marked ready, the remaining buckets start, every bucket is
/// waited for, and the mean gradients are written into the parameters' .grad
/// (a bucket whose all-reduce completes earlier, seen by a later hook, is
/// written back then and its flattened copy freed).
/// Afterwards every rank holds bitwise the same .grad.
///
/// Unused parameters (never reached by this backward on this rank)
/// contribute zeros. After the reduction such a parameter's .grad is the
/// mean (the others' gradients over the world size) when some rank had a
/// gradient for it, and stays undefined when no rank had one (PyTorch's
/// find_unused_parameters behaviour, here without that flag and without an
/// extra collective: each bucket carries one "had a gradient" flag per
/// parameter beside the gradients). There is never a "marked ready twice"
/// error for an unused parameter. A parameter whose gradient changes after
/// its bucket was already reduced in the same backward (it is used in two
/// checkpoint regions, whose recomputations run two nested backward passes)
/// makes that backward throw ValueError, after every bucket completed
/// (no rank is left waiting): the reduced gradient would miss a part.
///
/// The hooks fire once per parameter per backward pass whatever the remat
/// runtime evicts or rematerializes (replays recompute storages, never run
/// autograd nodes), and collectives are never replayed, so a rank under a
/// tight budget makes exactly the collectives of an unlimited one:
/// bucket_count() all-reduces per step.
///
/// Not copyable or movable (the hooks refer to it). Destroying it removes
/// the hooks. Throws ValueError for a null module, a bucket_cap_mb <= 0 or
/// a module without parameters that require grad, DistributedError from the
/// broadcasts (mismatched shapes across ranks, a rank not in the group).
class DistributedDataParallel {
 public:
  explicit DistributedDataParallel(std::shared_ptr<Module> module, DDPOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  /// The wrapped module (DistributedDataParallel.module).
  const std::shared_ptr<Module>& module() const { return module_; }
  const std::shared_ptr<distributed::ProcessGroup>& process_group() const { return group_; }
  const DDPOptions& options() const { return options_; }

  /// Runs `module()` as a UnaryModule with PyTorch's forward around it:
  /// sync_buffers(), the module's forward, then prepare_for_backward(output)
  /// when find_unused_parameters is set. Throws TypeError when the module is
  /// not a UnaryModule (call its forward yourself, between sync_buffers()
  /// and prepare_for_backward()).
  Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }

  /// Broadcasts the module's buffers from rank 0, in place under no_grad,
  /// one broadcast per buffer in registration order, when broadcast_buffers
  /// is set and the module has buffers (PyTorch does it at the start of each
  /// forward: call it before the forward, never between a forward and its
  /// backward, since the write bumps the buffers' versions). Also inside
  /// no_sync(), as PyTorch.
  void sync_buffers();

  /// With find_unused_parameters, walks the autograd graph from `outputs`
  /// (PyTorch's prepare_for_backward) and marks every parameter it cannot
  /// reach ready at once; a bucket of unused parameters may then start
  /// before backward. When the walk meets a checkpoint region (a custom
  /// node, whose recomputation may reach any parameter), it marks nothing.
  /// Without find_unused_parameters, or when never called, unused parameters
  /// are found at the end of backward instead (same gradients, later
  /// start). Call it once per step, after the forward and before backward,
  /// with every output backward will start from (a second call before that
  /// backward drops the first one's marks, unless a bucket already started). When no parameter is
  /// reachable, the step is reduced at once (zeros from this rank). Does
  /// nothing inside no_sync().
  void prepare_for_backward(const std::vector<Tensor>& outputs);
  void prepare_for_backward(const Tensor& output) { prepare_for_backward(std::vector<Tensor>{output}); }

  /// Disables gradient reduction in its scope (DistributedDataParallel.no_sync):
  /// backward passes inside it only accumulate into .grad, and the first
  /// backward after it reduces the accumulated gradients. Guards nest.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp) : ddp_(ddp), prev_(ddp.sync_) { ddp.sync_ = false; }
    ~NoSyncGuard() { ddp_.sync_ = prev_; }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool prev_;
  };
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }
  /// False inside no_sync().
  bool require_backward_grad_sync() const { return sync_; }

  // ---- introspection (tests, logging) ----------------------------------------
  /// The parameters reduced, each distinct tensor once, in registration order.
  const std::vector<Tensor>& parameters() const { return params_; }
  /// Their dotted names (the first name of a tied tensor).
  const std::vector<std::string>& parameter_names() const { return names_; }
  /// Number of buckets (all-reduces per synced step).
  size_t bucket_count() const { return buckets_.size(); }
  /// Indices into parameters() of each bucket's parameters, in bucket order.
  std::vector<std::vector<size_t>> bucket_parameter_indices() const;
  /// Bytes of gradient in bucket `b` (IndexError when out of range).
  int64_t bucket_bytes(size_t b) const;
  /// Synced steps finished (backward passes whose gradients were reduced).
  int64_t steps() const { return steps_; }
  /// Buckets reduced in the last finished step (bucket_count()).
  int64_t buckets_reduced_last_step() const { return last_step_buckets_; }
  /// Of those, how many had started before the end of backward (overlap).
  int64_t buckets_started_in_backward_last_step() const { return last_step_early_; }

 private:
  struct Bucket {
    std::vector<size_t> params;  // indices into params_
    int64_t numel = 0;           // gradient elements
    DType dtype = kFloat32;
    // Per step:
    int pending = 0;  // parameters not ready yet
    Tensor flat;      // gradients, then one had-a-gradient flag per parameter
    std::shared_ptr<distributed::Work> work;
    bool reduced = false;  // copied back into the grads
  };

  void on_grad_ready(size_t param);
  void begin_step_if_needed();
  void mark_ready(size_t param);
  void launch_ready_buckets();
  void launch(Bucket& b);
  void progress(size_t limit);
  void copy_back(Bucket& b);
  void finish_step();
  void reset_step();

  std::shared_ptr<Module> module_;
  DDPOptions options_;
  std::shared_ptr<distributed::ProcessGroup> group_;
  std::vector<Tensor> params_;
  std::vector<std::string> names_;
  std::vector<size_t> bucket_of_;  // parameter index → bucket index
  std::vector<Bucket> buckets_;
  std::vector<RemovableHandle> hooks_;
  bool sync_ = true;

  // The step in progress.
  std::vector<bool> ready_;
  size_t next_launch_ = 0;      // buckets [0, next_launch_) have started
  bool finish_queued_ = false;  // the end-of-backward callback is queued
  uint64_t backward_pass_ = 0;  // autograd::backward_pass_id() of the step's backward
  int64_t early_launches_ = 0;
  std::string late_error_;  // a gradient that changed after its bucket started

  int64_t steps_ = 0;
  int64_t last_step_buckets_ = 0;
  int64_t last_step_early_ = 0;
};

}  // namespace dtr::nn::parallel
