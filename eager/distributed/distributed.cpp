// The front end of dtr::distributed: the table of process groups (the
// handles collective rows carry), ProcessGroup::launch, and the calls that
// pick a backend. The collective rows are in collectives.cpp, the backends in
// mpi.cpp and nccl.cpp.
#include "eager/distributed/distributed.h"

#include <algorithm>
#include <mutex>

#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/options.h"
#include "eager/distributed/backends.h"

namespace dtr::distributed {

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMean: return "mean";
    case ReduceOp::kMax: return "max";
  }
  return "?";
}

std::string_view collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kBarrier: return "barrier";
  }
  return "?";
}

namespace {

/// Every live group by handle, and the world. Handles are never reused, so a
/// destroyed group's handle in an old lineage record names nothing.
struct GroupTable {
  std::mutex mu;
  absl::flat_hash_map<int64_t, std::shared_ptr<ProcessGroup>> groups;
  std::shared_ptr<ProcessGroup> world;
  int64_t next_id = 0;
};
GroupTable& table() {
  static GroupTable* t = new GroupTable;  // outlives static destructors that may use it
  return *t;
}

}  // namespace

ProcessGroup::ProcessGroup(int rank, std::vector<int> world_ranks, double timeout_seconds)
    : rank_(rank), world_ranks_(std::move(world_ranks)), timeout_seconds_(timeout_seconds) {}

void ProcessGroup::register_group(const std::shared_ptr<ProcessGroup>& g) {
  GroupTable& t = table();
  std::lock_guard lock(t.mu);
  g->id_ = t.next_id++;
  t.groups[g->id_] = g;
}

std::shared_ptr<Work> ProcessGroup::launch(const CollectiveCall& call) {
  const std::string_view name = collective_name(call.kind);
  if (std::string why = broken_reason(); !why.empty())
    throw DistributedError(
        fmt::format("{}: process group {} is unusable after an earlier failure: {}", name, id_, why));
  DTR_CHECK(rank_ >= 0, DistributedError,
            "{}: this process is not a member of process group {} (world ranks [{}])", name, id_,
            fmt::join(world_ranks_, ", "));
  if (call.kind != CollectiveKind::kBarrier) {
    DTR_CHECK(call.device == device(), DistributedError,
              "{}: the {} backend of process group {} moves tensors on {} on this rank, got a tensor on {}",
              name, backend_name(), id_, device().str(), call.device.str());
  }
  const int64_t seq = calls_++;
  return start(call, seq);
}

void ProcessGroup::refuse(CollectiveKind kind, const Error& why) {
  if (!healthy() || rank_ < 0) return;
  const int64_t seq = calls_++;
  std::shared_ptr<Work> w = start_refusal(kind, seq, why);
  if (w == nullptr) {
    --calls_;
    return;
  }
  w->wait();  // throws on every rank
  throw InternalError(fmt::format("{}: a refused collective completed on process group {}", collective_name(kind), id_));
}

// ---- the world and sub-groups -------------------------------------------------

namespace detail {
#if !DTR_HAVE_MPI
bool mpi_available() { return false; }
std::shared_ptr<ProcessGroup> mpi_init_world(double) {
  throw ValueError("init_process_group: the mpi backend was not built (configure with DTR_MPI=ON "
                   "and an MPI library such as Debian's libopenmpi-dev)");
}
std::shared_ptr<ProcessGroup> mpi_new_group(ProcessGroup&, const std::vector<int>&) {
  throw ValueError("new_group: the mpi backend was not built");
}
#endif
#if !DTR_HAVE_NCCL
bool nccl_available() { return false; }
std::shared_ptr<ProcessGroup> nccl_init_world(double) {
  throw ValueError("init_process_group: the nccl backend was not built (configure with DTR_NCCL=ON "
                   "and the CUDA toolkit's NCCL in /usr/local/cuda)");
}
std::shared_ptr<ProcessGroup> nccl_new_group(ProcessGroup&, const std::vector<int>&) {
  throw ValueError("new_group: the nccl backend was not built");
}
#endif
}  // namespace detail

void init_process_group(std::string_view backend, InitOptions options) {
  const bool mpi = backend == "mpi";
  const bool nccl = backend == "nccl";
  DTR_CHECK(mpi || nccl, ValueError,
            "init_process_group: unknown backend \"{}\"; the backends are \"mpi\" (CPU tensors) "
            "and \"nccl\" (CUDA tensors)",
            backend);
  const double timeout = options.timeout_seconds.value_or(global_options().collective_timeout_seconds);
  DTR_CHECK(timeout > 0, ValueError, "init_process_group: timeout_seconds must be positive, got {}",
            timeout);
  {
    std::lock_guard lock(table().mu);
    DTR_CHECK(table().world == nullptr, DistributedError,
              "init_process_group: a process group ({} backend) is already initialized; call "
              "destroy_process_group first",
              table().world->backend_name());
  }
  std::shared_ptr<ProcessGroup> w = mpi ? detail::mpi_init_world(timeout) : detail::nccl_init_world(timeout);
  ProcessGroup::register_group(w);
  std::lock_guard lock(table().mu);
  table().world = std::move(w);
}

bool is_initialized() {
  std::lock_guard lock(table().mu);
  return table().world != nullptr;
}

void destroy_process_group(const std::shared_ptr<ProcessGroup>& group) {
  GroupTable& t = table();
  std::vector<std::shared_ptr<ProcessGroup>> doomed;  // destroyed outside the lock
  {
    std::lock_guard lock(t.mu);
    DTR_CHECK(t.world != nullptr, DistributedError,
              "destroy_process_group: no process group is initialized");
    if (group == nullptr || group == t.world) {
      for (auto& [id, g] : t.groups) doomed.push_back(std::move(g));
      t.groups.clear();
      t.world.reset();
    } else {
      auto it = t.groups.find(group->id());
      DTR_CHECK(it != t.groups.end(), DistributedError,
                "destroy_process_group: process group {} was already destroyed", group->id());
      doomed.push_back(std::move(it->second));
      t.groups.erase(it);
    }
  }
  // Mark them so a handle the caller still holds fails clearly.
  for (auto& g : doomed) g->mark_broken("the group was destroyed by destroy_process_group");
}

std::shared_ptr<ProcessGroup> world() {
  std::lock_guard lock(table().mu);
  DTR_CHECK(table().world != nullptr, DistributedError,
            "no process group is initialized: call dtr::distributed::init_process_group(\"mpi\") "
            "(CPU tensors, under mpirun for more than one rank) or (\"nccl\") first");
  return table().world;
}

namespace {
const std::shared_ptr<ProcessGroup>& or_world(const std::shared_ptr<ProcessGroup>& g,
                                              std::shared_ptr<ProcessGroup>& storage) {
  if (g) return g;
  storage = world();
  return storage;
}
}  // namespace

int get_rank(const std::shared_ptr<ProcessGroup>& group) {
  std::shared_ptr<ProcessGroup> w;
  return or_world(group, w)->rank();
}

int get_world_size(const std::shared_ptr<ProcessGroup>& group) {
  std::shared_ptr<ProcessGroup> w;
  return or_world(group, w)->size();
}

std::shared_ptr<ProcessGroup> new_group(std::vector<int> ranks, std::optional<double> timeout_seconds) {
  std::shared_ptr<ProcessGroup> w = world();
  DTR_CHECK(!ranks.empty(), ValueError, "new_group: ranks is empty");
  for (size_t i = 0; i < ranks.size(); ++i) {
    DTR_CHECK(ranks[i] >= 0 && ranks[i] < w->size(), ValueError,
              "new_group: rank {} is out of range for a world of {} ranks", ranks[i], w->size());
    DTR_CHECK(i == 0 || ranks[i] > ranks[i - 1], ValueError,
              "new_group: ranks must be sorted and distinct, got [{}]", fmt::join(ranks, ", "));
  }
  DTR_CHECK(!timeout_seconds || *timeout_seconds > 0, ValueError,
            "new_group: timeout_seconds must be positive, got {}", timeout_seconds.value_or(0));
  std::shared_ptr<ProcessGroup> g = w->backend_name() == "mpi" ? detail::mpi_new_group(*w, ranks)
                                                               : detail::nccl_new_group(*w, ranks);
  if (timeout_seconds) g->timeout_seconds_ = *timeout_seconds;
  ProcessGroup::register_group(g);
  return g;
}

void adopt_group(const std::shared_ptr<ProcessGroup>& group) {
  DTR_CHECK(group != nullptr, ValueError, "adopt_group: the group is null");
  ProcessGroup::register_group(group);
}

void forget_group(const std::shared_ptr<ProcessGroup>& group) {
  if (group == nullptr) return;
  std::lock_guard lock(table().mu);
  table().groups.erase(group->id());
}

std::shared_ptr<ProcessGroup> group_from_id(int64_t id) {
  std::lock_guard lock(table().mu);
  auto it = table().groups.find(id);
  DTR_CHECK(it != table().groups.end(), DistributedError,
            "process group {} does not exist (destroyed, or never created{})", id,
            table().world ? "" : "; no process group is initialized");
  return it->second;
}

}  // namespace dtr::distributed
