// The DTR runtime (Kirisame et al., ICLR 2021): accounts for resident
// storage bytes against a hard budget (Note [hard budget]), evicts the
// storage with the lowest score when an allocation would exceed it, and
// rematerializes evicted storages from their lineage when touched, with an
// explicit work stack (never native recursion).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/allocator.h"
#include "core/backend.h"
#include "core/options.h"
#include "core/storage.h"
#include "remat/lineage.h"
#include "remat/policy.h"
#include "remat/storage_state.h"

namespace dtr {
struct TensorMeta;  // core/op_registry.h
}

namespace dtr::remat {

/// One device's counters (Runtime::stats(Device)).
struct Stats {
  int64_t budget_bytes = -1;         // -1: unlimited
  int64_t resident_bytes = 0;        // storage bytes resident now
  /// Of those, the bytes of eviction candidates (resident, unlocked, not
  /// pinned, replayable: Note [what may be evicted]); the rest is the floor
  /// no eviction can go below now.
  int64_t evictable_bytes = 0;
  int64_t peak_bytes = 0;            // high-water mark of resident_bytes
  int64_t evictions = 0;             // storages evicted to make room
  /// Of those evictions, the windows of adjacent storages evicted because
  /// the allocator's free bytes were too scattered for a request (Note
  /// [fragmentation-aware eviction]): one per window.
  int64_t window_evictions = 0;
  int64_t eager_frees = 0;           // storages freed because no handle was left
  /// Times bytes were given to a storage here (new outputs,
  /// rematerializations, copies back from the host tier, and on the cpu
  /// host-tier copies): the `alloc` events of a memory snapshot's trace.
  int64_t allocations = 0;
  int64_t rematerializations = 0;    // storages recomputed
  int64_t recomputed_ops = 0;        // op replays
  double recomputed_flops = 0;       // sum of replayed ops' estimated FLOPs
  double fresh_flops = 0;            // the same for the ops the program issued (lineage recorded)
  double recompute_seconds_estimated = 0;  // sum of replayed ops' estimated cost
  double recompute_seconds_measured = 0;   // wall time spent replaying
  // The host tier (Note [host tier]). On a device with a host link:
  int64_t swap_outs = 0;             // storages whose bytes were copied to host memory to make room
  int64_t swap_ins = 0;              // storages copied back on their next use
  int64_t swapped_bytes = 0;         // bytes of this device's storages in host memory now
  int64_t swap_bytes_out = 0;        // bytes copied to host memory (total)
  int64_t swap_bytes_in = 0;         // bytes copied back (total)
  double swap_seconds_estimated = 0; // the copies' cost by the host link (both ways)
  /// On the CPU: bytes held in host memory for other devices' swapped
  /// storages (counted in resident_bytes, under the cpu budget).
  int64_t host_tier_bytes = 0;
  /// Note [thrash guard]: ops issued on this device that recorded lineage
  /// (fresh work, as against replays), and the highest replay-to-fresh
  /// ratio of the guard's window seen (replays over fresh ops in the last
  /// kThrashWindow fresh ops, at least kThrashMinFresh of them counted).
  int64_t fresh_ops = 0;
  double max_replay_ratio = 0;
  /// The device allocator's account (Allocator::memory_stats), read when
  /// stats() is called: bytes handed out in blocks (rounded), bytes
  /// reserved from the device, the largest free block; -1 where the
  /// allocator keeps none (the CPU's). fragmentation = 1 - largest free
  /// block / free bytes (0 where nothing is free or no account is kept).
  int64_t allocated_bytes = -1;
  int64_t reserved_bytes = -1;
  int64_t largest_free_block = -1;
  /// The high-water mark of allocated_bytes since the last reset_stats():
  /// what a budget bounds where the allocator rounds (Note [hard budget]);
  /// -1 where the allocator keeps no account.
  int64_t peak_allocated_bytes = -1;
  double fragmentation = 0;
  int64_t metadata_nodes = 0;        // live lineage nodes (all devices)
  int64_t live_storages = 0;         // live Storage objects accounted on this device
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

/// Told of every call the op path makes into a runtime, after the call
/// succeeded, under the runtime's lock (Note [planner]: remat/planner.cpp's
/// recorder). Storages are passed as they are after the call.
class RuntimeObserver {
 public:
  virtual void on_allocate(Storage& s) = 0;
  virtual void on_acquire(std::span<Storage* const> storages) = 0;
  virtual void on_release(std::span<Storage* const> storages) = 0;
  virtual void on_record(const Node& node) = 0;
  virtual void on_register_constant(Storage& s) = 0;
  virtual void on_mark_borrowed(Storage& s) = 0;
  /// `old` is what before_mutation returned (null: nothing).
  virtual void on_before_mutation(Storage& s, bool keep_old, Storage* old) = 0;
  virtual void on_last_handle(Storage& s) = 0;
  virtual void on_pin(Storage& s) = 0;
  virtual void on_unpin(Storage& s) = 0;
  /// A storage this runtime accounts for is being destroyed.
  virtual void on_destroy(Storage& s) = 0;

 protected:
  ~RuntimeObserver() = default;
};

/// A runtime's state at one moment, without any bytes: every storage it
/// accounts for (and every storage their lineage reads), with residency,
/// flags, last access and lineage; the clock and the sampling state. The
/// planner's starting point (Note [planner]).
struct RuntimeSnapshot {
  struct StorageEntry {
    int64_t nbytes = 0;
    Device device;
    bool accounted = false;  // counted against a budget here (else borrowed bytes)
    bool resident = false;
    bool swapped = false;    // its bytes in the host tier (Note [host tier])
    bool constant = false;
    bool borrowed = false;
    bool user_held = false;  // a tensor handle holds it
    int32_t pin_count = 0;
    int64_t last_access = 0;
    int32_t producer = -1;   // index into nodes, or -1
  };
  struct NodeEntry {
    std::string_view op_name;
    std::vector<int32_t> inputs;   // indices into storages
    std::vector<int32_t> outputs;  // indices into storages; -1: gone
    std::vector<int64_t> output_nbytes;
    double cost_seconds = 0;
    double flops = 0;
    bool replayable = true;
    Device device;
    int64_t tick = 0;
  };
  std::vector<StorageEntry> storages;
  std::vector<NodeEntry> nodes;  // in tick order
  int64_t clock = 0;
  uint64_t sample_state = 0;
};

/// Note [per-device memory]: each device has its own budget, resident and
/// peak bytes, evictable pool and counters. An allocation on device D
/// evicts only storages on D; a storage's bytes count only against its own
/// device's budget. The logical clock, the eviction policy and lineage are
/// shared (lineage crosses devices through copies).
class Runtime final {
 public:
  /// The process-wide runtime; its budgets come from DTR_MEMORY_BUDGET,
  /// resolved per device when the device is first used.
  static Runtime& global();
  /// A runtime whose storages take their bytes from `allocators` (not
  /// owned; the backends' by default) and whose victims `policy` chooses
  /// (null: make_policy(Heuristic::kDtrEq)). No budget on any device.
  explicit Runtime(AllocatorProvider& allocators = backend_allocators(),
                   std::unique_ptr<EvictionPolicy> policy = nullptr);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // ---- budget ----------------------------------------------------------------
  /// Hard cap on the resident storage bytes of `device`; nullopt = unlimited.
  /// Evicts at once if the new budget is below what is resident there.
  /// Throws ValueError for <= 0 bytes, DeviceError for a device that does
  /// not exist.
  void set_memory_budget(Device device, std::optional<int64_t> bytes);
  std::optional<int64_t> memory_budget(Device device) const;
  /// The same for the default device (default_device(): the first CUDA
  /// device where one is present, else the CPU).
  void set_memory_budget(std::optional<int64_t> bytes);
  std::optional<int64_t> memory_budget() const;

  // ---- the op path -------------------------------------------------------------
  /// Makes each storage resident (rematerializing as needed) and locks it.
  void acquire(std::span<Storage* const> storages);
  /// Unlocks and stamps the last access (staleness restarts).
  void release(std::span<Storage* const> storages);
  /// Gives `s` fresh bytes under its device's budget, evicting storages of
  /// that device as needed; locks it. Throws OutOfMemoryError with the
  /// budget report, DeviceError for a device that does not exist; state
  /// stays consistent.
  void allocate(Storage& s);
  /// Records `node` as the producer of its outputs (already allocated) and
  /// makes them evictable when the node is replayable. Advances the clock.
  /// A node that reads a borrowed storage (from_blob) is not kept: its
  /// outputs become constants (Note [borrowed storage]).
  void record(const std::shared_ptr<Node>& node);
  /// A storage computed outside any lineage (constants, loaded data): never evicted.
  void register_constant(Storage& s);
  /// `s` is a constant whose bytes may change behind the runtime's back
  /// (from_blob buffers, storages handed out through data_ptr): lineage
  /// never reads it later (Note [borrowed storage]).
  void mark_borrowed(Storage& s);
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

  // ---- pins (Note [pin guard]) ----------------------------------------------
  /// A consumer outside the runtime is about to hold a raw pointer to the
  /// bytes of `s` (a DLPack export): makes `s` resident, rematerializing it
  /// if it was evicted, and pins it. Until the matching unpin, `s` is never
  /// evicted, freed eagerly or moved; an allocation that finds nothing else
  /// to evict raises OutOfMemoryError. Pins are counted. Thread-safe.
  /// Throws OutOfMemoryError (nothing pinned) when the rematerialization
  /// does not fit, ValueError for a storage with no bytes and no lineage.
  /// Prefer PinGuard.
  void pin(Storage& s);
  /// Undoes one pin(s); after the last, `s` is evictable again (and freed at
  /// once when no handle holds it and lineage can rebuild it). Thread-safe:
  /// a DLPack deleter may run on any thread. Throws ValueError when `s` is
  /// not pinned.
  void unpin(Storage& s);

  // ---- policy ------------------------------------------------------------
  /// Replaces the policy with make_policy(h) and rebuilds its bookkeeping.
  void set_heuristic(Heuristic h);
  Heuristic heuristic() const;
  /// Replaces the policy with `policy` (heuristic() keeps its last value).
  void set_policy(std::unique_ptr<EvictionPolicy> policy);
  /// kAll examines every candidate; kSqrt a deterministic sample of √n.
  void set_sample_mode(SampleMode m);
  SampleMode sample_mode() const;
  /// Storages smaller than this are never eviction candidates.
  void set_min_evict_bytes(int64_t bytes);
  int64_t min_evict_bytes() const;
  /// DTR_SWAP (Note [host tier]): kAuto lets a victim on a device with a
  /// host link be copied to host memory instead of evicted, when that is
  /// cheaper to bring back; kOff evicts only. Switching to kOff leaves
  /// storages swapped already where they are until they are used.
  void set_swap_mode(SwapMode m);
  SwapMode swap_mode() const;
  /// DTR_THRASH_LIMIT (Note [thrash guard]): a replay that would take a
  /// device's replays over the last kThrashWindow fresh ops (lineage nodes
  /// recorded) past `limit` × those fresh ops (at least kThrashMinFresh), and
  /// their estimated cost past `limit` × the fresh ops' cost, throws
  /// ThrashError instead. 0 turns the guard off (the default of a Runtime
  /// built here; the global runtime takes DTR_THRASH_LIMIT, default 32).
  /// Throws ValueError for a limit that is not 0 or a finite number >= 1.
  void set_thrash_limit(double limit);
  double thrash_limit() const;
  static constexpr int kThrashWindow = 1024;
  static constexpr int kThrashMinFresh = 256;
  /// DTR_VERIFY: hash each storage when first computed and check every
  /// rematerialization against it (InternalError with the op trail on mismatch).
  void set_verify(bool on);
  /// DTR_TRACE: write Chrome trace events (remat/trace_file.h) to `path`,
  /// truncating it; "" = off. Events are written as they happen: ops as
  /// duration events with shapes, bytes and storage ids; evictions and
  /// rematerializations with the ids of their storages; a memory counter;
  /// an OutOfMemoryError as an instant event with its report; user scopes
  /// (dtr::trace::Scope). A file already open is closed first (its "]"
  /// written); the file gets its "]" also at exit, on std::terminate and on
  /// SIGINT/SIGTERM, and holds whole lines only (Note [trace on signals]).
  /// Throws ValueError naming the path when it cannot be opened or written
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
  /// The storage an eviction on `device` would take now (Note [scores],
  /// searched as DTR_SAMPLE says), without evicting it; nullptr when
  /// nothing there is evictable. Advances the sampler as a decision does.
  /// For tools and benchmarks (benchmarks/remat_decision times it).
  Storage* next_victim(Device device = Device());

  // ---- recording and simulation (Note [planner]) ---------------------------
  /// Reports every call of the op path to `observer` (not owned; null: none).
  void set_observer(RuntimeObserver* observer);
  RuntimeObserver* observer() const;
  /// The bytes of this runtime's storages are not real (the planner's
  /// simulated allocator): they are never read, copied or hashed.
  void set_simulated(bool on);
  /// The state now. Each storage in it has StorageState::record_id[slot]
  /// set to its index + 1 and record_generation[slot] to `generation`.
  RuntimeSnapshot snapshot(uint32_t generation, int slot = 0) const;
  /// Rebuilds `snap` in this runtime, which must hold no storage yet: the
  /// storages (resident ones take bytes from their device's allocator, with
  /// no budget in force), lineage, flags, last accesses, the clock and the
  /// sampling state. Returns the storage made for each entry; node i
  /// replays through make_recompute(i).
  std::vector<std::shared_ptr<Storage>> restore(
      const RuntimeSnapshot& snap,
      const std::function<std::function<void(std::span<Storage* const>, std::span<Storage* const>)>(size_t)>&
          make_recompute);

  /// The counters of `device`, and of the default device.
  Stats stats(Device device) const;
  Stats stats() const;
  /// Zeroes every device's counters; each peak restarts from its resident bytes.
  void reset_stats();
  /// The devices this runtime has accounted for so far.
  std::vector<Device> devices() const;
  /// What a memory snapshot (remat/memory_snapshot.h) reads of one device:
  /// its allocator and the bytes its storages hold there now, as (address,
  /// bytes): resident storages, and on the cpu the host tier's copies.
  struct MemoryHolding {
    Device device;
    const Allocator* allocator = nullptr;
    std::vector<std::pair<const void*, int64_t>> live;  // address order
  };
  std::vector<MemoryHolding> memory_holdings() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> lineage_enabled_{true};
  std::atomic<bool> tracing_{false};
  std::atomic<CostModel> cost_model_{CostModel::kEstimate};
};

}  // namespace dtr::remat

namespace dtr::remat {
/// Pins a storage for its lifetime (Runtime::pin / unpin; Note [pin guard]),
/// holding it alive. Movable, not copyable; a moved-from or default guard
/// pins nothing. Throws what Runtime::pin throws, ValueError for a null
/// storage.
class PinGuard {
 public:
  PinGuard() = default;
  explicit PinGuard(std::shared_ptr<Storage> storage, Runtime& runtime = Runtime::global());
  ~PinGuard();
  PinGuard(PinGuard&& other) noexcept;
  PinGuard& operator=(PinGuard&& other) noexcept;
  PinGuard(const PinGuard&) = delete;
  PinGuard& operator=(const PinGuard&) = delete;
  /// Unpins now (a no-op when nothing is pinned).
  void reset() noexcept;
  /// The pinned storage, or null.
  const std::shared_ptr<Storage>& storage() const { return storage_; }

 private:
  std::shared_ptr<Storage> storage_;
  Runtime* runtime_ = nullptr;
};

/// Public API (DESIGN.md): the global runtime's budget and statistics.
/// Sets the hard cap on resident tensor-storage bytes of the default device
/// (or of `device`); nullopt = unlimited. Throws ValueError for a
/// non-positive budget, DeviceError for a device that does not exist.
inline void set_memory_budget(std::optional<int64_t> bytes) { Runtime::global().set_memory_budget(bytes); }
inline void set_memory_budget(Device device, std::optional<int64_t> bytes) {
  Runtime::global().set_memory_budget(device, bytes);
}
inline std::optional<int64_t> memory_budget() { return Runtime::global().memory_budget(); }
inline std::optional<int64_t> memory_budget(Device device) {
  return Runtime::global().memory_budget(device);
}
inline Stats stats() { return Runtime::global().stats(); }
inline Stats stats(Device device) { return Runtime::global().stats(device); }
/// Zeroes the counters; the peak restarts from the current resident bytes.
inline void reset_stats() { Runtime::global().reset_stats(); }
}  // namespace dtr::remat
