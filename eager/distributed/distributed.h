// dtr::distributed: process groups and collectives (torch.distributed).
//
//   dtr::distributed::init_process_group("mpi");      // under mpirun -np N
//   int rank = dtr::distributed::get_rank();
//   dtr::distributed::all_reduce(grad, dtr::distributed::ReduceOp::kMean);
//   dtr::distributed::destroy_process_group();
//
// Collectives are registry rows flagged `collective` (eager/distributed/
// collectives.cpp): dispatch records them in lineage like any op, but they
// are never replayed and their outputs are never evicted (Note [collectives]
// in docs/DESIGN.md), so a rank that rematerializes under its own memory
// pressure never repeats, reorders or skips one, and the job cannot hang on
// a replay. Each collective is checked across ranks before any data moves:
// every rank sends the others a fingerprint (op, sequence number, dtype,
// shape, root, reduce op), so ranks that call different collectives or pass
// different shapes all throw DistributedError naming both sides, and a
// collective that some rank never joins throws CollectiveTimeoutError after
// DTR_COLLECTIVE_TIMEOUT seconds naming the ranks missing.
//
// Backends: "mpi" (CPU tensors; OpenMPI or any MPI-3 library) and "nccl"
// (CUDA tensors; built when NCCL is found). Both are optional at build time
// (DTR_MPI, DTR_NCCL); asking for one that was not built is a ValueError.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/op_registry.h"
#include "eager/tensor.h"

namespace dtr::distributed {

/// torch.distributed.ReduceOp: SUM, AVG (mean; floating dtypes only) and MAX.
enum class ReduceOp : uint8_t { kSum = 0, kMean = 1, kMax = 2 };
inline constexpr ReduceOp kAvg = ReduceOp::kMean;
/// "sum", "mean", "max".
std::string_view reduce_op_name(ReduceOp op);

/// What a collective does (the fingerprint's first field).
enum class CollectiveKind : uint8_t {
  kAllReduce,
  kBroadcast,
  kAllGather,
  kReduceScatter,
  kBarrier,
};
std::string_view collective_name(CollectiveKind k);

/// The handle of one launched collective (c10d's Work). `wait()` returns
/// once the output holds the result on this rank. A Work that is destroyed
/// unwaited is waited for in its destructor (errors then are logged, not
/// thrown), so the buffers it writes are never freed under a transfer.
class Work {
 public:
  virtual ~Work() = default;
  /// Makes progress without blocking; true once the collective is done.
  /// Throws what wait() would throw once the collective has failed.
  virtual bool is_completed() = 0;
  /// Blocks until done. Throws DistributedError when the ranks' fingerprints
  /// disagree or the library fails, CollectiveTimeoutError after the group's
  /// timeout.
  virtual void wait() = 0;
};

class ProcessGroup;
struct InitOptions;

/// One collective as a kernel hands it to a backend. `in` and `out` are
/// contiguous; for an in-place collective they are the same buffer.
struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  ReduceOp reduce_op = ReduceOp::kSum;
  int root = 0;  // broadcast source, as a rank of the group
  TensorArg in;
  TensorArg out;
  Device device;
};

/// A group of ranks that run collectives together (c10d::ProcessGroup).
/// Made by init_process_group (the world) and new_group; held by
/// shared_ptr. A rank that is not a member holds a handle whose rank() is -1
/// and on which every collective throws DistributedError.
class ProcessGroup : public std::enable_shared_from_this<ProcessGroup> {
 public:
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  /// This process's rank in the group (-1 when not a member).
  int rank() const { return rank_; }
  /// Number of ranks in the group.
  int size() const { return int(world_ranks_.size()); }
  /// The members' ranks in the world group, in group-rank order.
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  /// "mpi" or "nccl".
  virtual std::string_view backend_name() const = 0;
  /// The device this rank's collectives run on, and the only one whose
  /// tensors they take: cpu for mpi; for nccl cuda:LOCAL_RANK (else the
  /// rank modulo the visible devices), chosen by init_process_group. A
  /// program puts its model there (torch: `torch.cuda.set_device(local_rank)`).
  virtual Device device() const = 0;
  /// device().type: kCPU for mpi, kCUDA for nccl.
  DeviceType device_type() const { return device().type; }
  /// Seconds a collective may wait for the other ranks (DTR_COLLECTIVE_TIMEOUT).
  double timeout_seconds() const { return timeout_seconds_; }
  /// The handle collective rows carry in their "group" attribute.
  int64_t id() const { return id_; }
  /// Collectives this rank has launched on the group (its sequence number):
  /// every launch counts once; a replay never launches one.
  int64_t collective_calls() const { return calls_; }
  /// False once a collective timed out or failed: later ones throw. Any
  /// thread may ask while another marks the group broken.
  bool healthy() const {
    std::lock_guard lock(broken_mu_);
    return broken_.empty();
  }
  /// Why the group is unusable ("" while healthy).
  std::string broken_reason() const {
    std::lock_guard lock(broken_mu_);
    return broken_;
  }

  /// Starts `call` (the kernels of the collective rows call this). Throws
  /// DistributedError for a non-member rank, a broken group, or a tensor on
  /// a device this backend does not serve.
  std::shared_ptr<Work> launch(const CollectiveCall& call);
  /// Joins collective `kind` as a rank whose own checks refused it with
  /// `why` (an argument only this rank validates): the refusal takes the
  /// sequence number the call would have had and travels in the fingerprint
  /// exchange, so every rank of the group throws the same error type as
  /// `why`, naming the op, this rank and `why`, at once rather than after the
  /// timeout; no data moves and the group stays usable (Note [collectives]).
  /// Throws that error. Returns (the caller rethrows `why`) on a broken
  /// group, a non-member rank, or a backend without refusals (nccl).
  void refuse(CollectiveKind kind, const Error& why);

 protected:
  ProcessGroup(int rank, std::vector<int> world_ranks, double timeout_seconds);
  /// The backend's launch; `seq` is the collective's sequence number.
  virtual std::shared_ptr<Work> start(const CollectiveCall& call, int64_t seq) = 0;
  /// The backend's refusal (see refuse()): a Work whose wait() throws the
  /// error every rank throws; null when the backend has no refusals.
  virtual std::shared_ptr<Work> start_refusal(CollectiveKind /*kind*/, int64_t /*seq*/, const Error& /*why*/) {
    return nullptr;
  }
  /// Marks the group unusable with `why` (after a timeout or library error,
  /// or when destroyed; from any thread).
  void mark_broken(std::string why) {
    std::lock_guard lock(broken_mu_);
    broken_ = std::move(why);
  }

 private:
  /// Registers the group in the handle table (sets id()).
  static void register_group(const std::shared_ptr<ProcessGroup>& g);
  friend void init_process_group(std::string_view, InitOptions);
  friend void destroy_process_group(const std::shared_ptr<ProcessGroup>&);
  friend std::shared_ptr<ProcessGroup> new_group(std::vector<int>, std::optional<double>);
  friend void adopt_group(const std::shared_ptr<ProcessGroup>&);
  int rank_;
  std::vector<int> world_ranks_;
  double timeout_seconds_;
  int64_t id_ = -1;
  int64_t calls_ = 0;
  mutable std::mutex broken_mu_;
  std::string broken_;
};

/// Options of init_process_group.
struct InitOptions {
  /// Seconds a collective waits for every rank; unset: DTR_COLLECTIVE_TIMEOUT,
  /// else 600 (PyTorch's default timeout is 10 minutes).
  std::optional<double> timeout_seconds;
};

/// torch.distributed.init_process_group. `backend` is "mpi" or "nccl".
/// Rank and world size come from the launcher: mpirun's environment for mpi
/// (MPI_Init reads it; run without mpirun, a process is a world of one); for
/// nccl, torchrun-style RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
/// MASTER_PORT, or mpirun's OMPI_COMM_WORLD_* when MPI was built in. Throws
/// ValueError for an unknown backend or one not built, DistributedError when
/// a process group is already initialized or the library fails to start.
void init_process_group(std::string_view backend, InitOptions options = {});
/// Whether init_process_group has run (and destroy_process_group has not).
bool is_initialized();
/// Destroys `group` (a sub-group), or with no argument the world group and
/// every sub-group (torch.distributed.destroy_process_group). Using a
/// destroyed group throws DistributedError. The communication library stays
/// initialized until exit, so init_process_group may be called again.
void destroy_process_group(const std::shared_ptr<ProcessGroup>& group = nullptr);
/// The world group; DistributedError when none is initialized.
std::shared_ptr<ProcessGroup> world();
/// Rank / size in `group` (default: the world). DistributedError when no
/// process group is initialized.
int get_rank(const std::shared_ptr<ProcessGroup>& group = nullptr);
int get_world_size(const std::shared_ptr<ProcessGroup>& group = nullptr);
/// torch.distributed.new_group: a sub-group of the world's `ranks` (sorted
/// and distinct; ValueError otherwise or for a rank out of range), with its
/// own collective timeout in seconds (default: the world's). Every rank of
/// the world must call it, in the same order, members or not.
std::shared_ptr<ProcessGroup> new_group(std::vector<int> ranks,
                                        std::optional<double> timeout_seconds = std::nullopt);
/// The group with handle `id` (collective kernels resolve their "group"
/// attribute with it); DistributedError naming the id when there is none.
std::shared_ptr<ProcessGroup> group_from_id(int64_t id);
/// Registers `group`, made outside init_process_group and new_group (a
/// process group of a backend of one's own, or an in-process group of a
/// test), so that collectives accept it as their `group`; it is no world.
/// forget_group takes it out of the table again (later use: DistributedError).
void adopt_group(const std::shared_ptr<ProcessGroup>& group);
void forget_group(const std::shared_ptr<ProcessGroup>& group);

// ---- collectives on tensors (torch.distributed's in-place forms) ------------
// Each takes `group` (default: the world) and, where PyTorch has it,
// `async_op`: false waits before returning (and returns null), true returns
// the Work to wait on. Tensors must be contiguous, on the group's device
// type, and alike on every rank (shape and dtype); DistributedError
// otherwise, on every rank. None of these records autograd history; the
// differentiable forms are in dtr::distributed::functional.

/// Reduces `tensor` across the group in place (torch.distributed.all_reduce).
/// kSum and kMax for every dtype, kMean for floating dtypes (TypeError else).
/// The sum is computed in one fixed order and broadcast, so every rank
/// holds bitwise the same result, run after run.
std::shared_ptr<Work> all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::kSum,
                                 const std::shared_ptr<ProcessGroup>& group = nullptr,
                                 bool async_op = false);
/// Copies `tensor` of group rank `src` to every rank (torch.distributed.broadcast).
/// ValueError when `src` is not a rank of the group.
std::shared_ptr<Work> broadcast(Tensor& tensor, int src,
                                const std::shared_ptr<ProcessGroup>& group = nullptr,
                                bool async_op = false);
/// torch.distributed.all_gather_into_tensor: `output` (world·d0, ...) gets
/// every rank's `input` (d0, ...) concatenated along dim 0 in rank order.
std::shared_ptr<Work> all_gather_into_tensor(Tensor& output, const Tensor& input,
                                             const std::shared_ptr<ProcessGroup>& group = nullptr,
                                             bool async_op = false);
/// torch.distributed.all_gather: `outputs` (world tensors shaped like `input`)
/// get each rank's `input`.
void all_gather(std::vector<Tensor>& outputs, const Tensor& input,
                const std::shared_ptr<ProcessGroup>& group = nullptr);
/// torch.distributed.reduce_scatter_tensor: `input` (world·d0, ...) is
/// reduced across ranks and rank r gets block r, (d0, ...), in `output`.
std::shared_ptr<Work> reduce_scatter_tensor(Tensor& output, const Tensor& input,
                                            ReduceOp op = ReduceOp::kSum,
                                            const std::shared_ptr<ProcessGroup>& group = nullptr,
                                            bool async_op = false);
/// Returns once every rank of the group has called it (torch.distributed.barrier).
void barrier(const std::shared_ptr<ProcessGroup>& group = nullptr);

namespace functional {
// Out-of-place, differentiable collectives (torch.distributed.nn.functional):
// backward of all_reduce(kSum) is all_reduce(kSum) of the gradient, of
// kMean the mean; all_gather's is reduce_scatter(kSum) and reduce_scatter's
// is all_gather; broadcast's sums the gradients onto `src` (zeros elsewhere).
// kMax has no gradient (NotImplementedError at backward, as in PyTorch).
Tensor all_reduce(const Tensor& input, ReduceOp op = ReduceOp::kSum,
                  const std::shared_ptr<ProcessGroup>& group = nullptr);
Tensor broadcast(const Tensor& input, int src, const std::shared_ptr<ProcessGroup>& group = nullptr);
/// (d0, ...) on each rank → (world·d0, ...).
Tensor all_gather(const Tensor& input, const std::shared_ptr<ProcessGroup>& group = nullptr);
/// (world·d0, ...) on each rank → (d0, ...): block `rank` of the reduction.
Tensor reduce_scatter(const Tensor& input, ReduceOp op = ReduceOp::kSum,
                      const std::shared_ptr<ProcessGroup>& group = nullptr);
}  // namespace functional

}  // namespace dtr::distributed
