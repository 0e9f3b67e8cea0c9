// The DTR runtime (Kirisame et al., ICLR 2021): accounts for resident
// storage bytes against a hard budget (Note [hard budget]), evicts the
// storage with the lowest score when an allocation would exceed it, and
// rematerializes evicted storages from their lineage when touched, with an
// explicit work stack (never native recursion).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/options.h"
#include "core/storage.h"
#include "remat/lineage.h"

namespace dtr {
struct TensorMeta;  // core/op_registry.h
}

namespace dtr::remat {

struct Stats {
  int64_t budget_bytes = -1;         // -1: unlimited
  int64_t resident_bytes = 0;        // storage bytes resident now
  int64_t peak_bytes = 0;            // high-water mark of resident_bytes
  int64_t evictions = 0;             // storages evicted to make room
  int64_t eager_frees = 0;           // storages freed because no handle was left
  int64_t rematerializations = 0;    // storages recomputed
  int64_t recomputed_ops = 0;        // op replays
  double recomputed_flops = 0;       // sum of replayed ops' estimated FLOPs
  double recompute_seconds_estimated = 0;  // sum of replayed ops' estimated cost
  double recompute_seconds_measured = 0;   // wall time spent replaying
  int64_t metadata_nodes = 0;        // live lineage nodes
  int64_t live_storages = 0;         // live Storage objects
};

/// Names the op being run on this thread while in scope, for the
/// OutOfMemoryError report (eager/ dispatch opens one per op; an op run
/// inside another restores the outer name when it ends). `op_name` must
/// outlive the scope (registry names and literals do).
class CurrentOpScope {
 public:
  explicit CurrentOpScope(std::string_view op_name);
  ~CurrentOpScope();
  CurrentOpScope(const CurrentOpScope&) = delete;
  CurrentOpScope& operator=(const CurrentOpScope&) = delete;
  /// The innermost op in scope on this thread; empty when none.
  static std::string_view current();

 private:
  std::string_view previous_;
};

class Runtime final : public ResidencyTracker {
 public:
  /// The process-wide runtime; its budget comes from DTR_MEMORY_BUDGET.
  static Runtime& global();
  Runtime();
  ~Runtime() override;

  // ---- budget ----------------------------------------------------------------
  /// Hard cap on resident storage bytes; nullopt = unlimited. Evicts at once
  /// if the new budget is below what is resident. Throws ValueError for <= 0.
  void set_memory_budget(std::optional<int64_t> bytes);
  std::optional<int64_t> memory_budget() const;

  // ---- the op path -------------------------------------------------------------
  /// Makes each storage resident (rematerializing as needed) and locks it.
  void acquire(std::span<Storage* const> storages);
  /// Unlocks and stamps the last access (staleness restarts).
  void release(std::span<Storage* const> storages);
  /// Gives `s` fresh bytes under the budget, evicting as needed; locks it.
  /// Throws OutOfMemoryError with the budget report; state stays consistent.
  void allocate(Storage& s);
  /// Records `node` as the producer of its outputs (already allocated) and
  /// makes them evictable when the node is replayable. Advances the clock.
  /// A node that reads a borrowed storage (from_blob) is not kept: its
  /// outputs become constants (Note [borrowed storage]).
  void record(const std::shared_ptr<Node>& node);
  /// A storage computed outside any lineage (constants, loaded data): never evicted.
  void register_constant(Storage& s);
  /// Called before an in-place write into `s` (Note [mutation]): lineage
  /// that reads the current bytes keeps them as an older version.
  /// Returns the storage that now holds the old bytes (null when nothing
  /// needs them); the in-place op records it as its input.
  /// `keep_old` forces an old version even when no lineage reads `s` (autograd
  /// saves the pre-mutation value).
  std::shared_ptr<Storage> before_mutation(const std::shared_ptr<Storage>& s, bool keep_old = false);
  /// The last user handle on `s` went away: free its bytes at once if it can
  /// be recomputed (eager eviction, Note [what may be evicted]).
  void on_last_handle(Storage& s);

  /// Device copy used to keep an old version of a constant (set by eager/ at
  /// start-up for each backend).
  using CopyFn = void (*)(void* dst, const void* src, size_t nbytes);
  void set_copy_fn(DeviceType device, CopyFn fn);

  // ---- policy ------------------------------------------------------------
  void set_heuristic(Heuristic h);
  Heuristic heuristic() const;
  /// kAll examines every candidate; kSqrt a deterministic sample of √n.
  void set_sample_mode(SampleMode m);
  /// Storages smaller than this are never eviction candidates.
  void set_min_evict_bytes(int64_t bytes);
  /// DTR_VERIFY: hash each storage when first computed and check every
  /// rematerialization against it (InternalError with the op trail on mismatch).
  void set_verify(bool on);
  /// DTR_TRACE: write Chrome trace events (remat/trace_file.h) to `path`,
  /// truncating it; "" = off. Events are written as they happen: ops as
  /// duration events with shapes, bytes and storage ids; evictions and
  /// rematerializations with the ids of their storages; a memory counter;
  /// an OutOfMemoryError as an instant event with its report; user scopes
  /// (dtr::trace::Scope). A file already open is closed first (its "]"
  /// written). Throws ValueError naming the path when it cannot be opened
  /// (tracing is then off).
  void set_trace_path(const std::string& path);
  /// Pushes buffered trace events to the file (also done once a second,
  /// on every error event, and when the file is closed).
  void flush_trace();
  /// Whether a trace file is open (cheap: the op path asks on every op).
  bool tracing() const { return tracing_.load(std::memory_order_relaxed); }
  /// The op path's event for one op, from `start` (before its inputs were
  /// made resident) to now.
  void trace_op(std::string_view op, std::chrono::steady_clock::time_point start,
                std::span<const TensorMeta> input_metas, std::span<Storage* const> inputs,
                std::span<const TensorMeta> output_metas, std::span<Storage* const> outputs);
  /// dtr::trace::Scope's events: the begin returns the open file's
  /// generation (0: none), the end is written only to that same file.
  uint64_t trace_scope_begin(std::string_view name);
  void trace_scope_end(std::string_view name, uint64_t generation);

  /// DTR_COST: where lineage nodes' recompute cost comes from (read by the
  /// op path when it records a node).
  void set_cost_model(CostModel m) { cost_model_.store(m, std::memory_order_relaxed); }
  CostModel cost_model() const { return cost_model_.load(std::memory_order_relaxed); }

  /// With lineage off, ops record no lineage: every output is a constant that
  /// is never evicted (the budget still holds, as a plain cap). For measuring
  /// what lineage costs; on by default.
  void set_lineage_enabled(bool on) { lineage_enabled_.store(on, std::memory_order_relaxed); }
  bool lineage_enabled() const { return lineage_enabled_.load(std::memory_order_relaxed); }

  /// Logical clock: one tick per op.
  int64_t clock() const;

  Stats stats() const;
  void reset_stats();

  // ResidencyTracker
  void on_storage_destroyed(Storage& s) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> lineage_enabled_{true};
  std::atomic<bool> tracing_{false};
  std::atomic<CostModel> cost_model_{CostModel::kEstimate};
};

}  // namespace dtr::remat

namespace dtr::remat {
/// Public API (DESIGN.md): the global runtime's budget and statistics.
/// Sets the hard cap on resident tensor-storage bytes (nullopt = unlimited).
/// Throws ValueError for a non-positive budget.
inline void set_memory_budget(std::optional<int64_t> bytes) { Runtime::global().set_memory_budget(bytes); }
inline std::optional<int64_t> memory_budget() { return Runtime::global().memory_budget(); }
inline Stats stats() { return Runtime::global().stats(); }
/// Zeroes the counters; the peak restarts from the current resident bytes.
inline void reset_stats() { Runtime::global().reset_stats(); }
}  // namespace dtr::remat
