// What the runtime keeps about one storage (Note [policy apart from
// mechanism]): core/ sees only an opaque StorageHook; lineage, residency,
// locks and the eviction policy's bookkeeping live here, owned by remat/.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/storage.h"
#include "remat/lineage.h"

namespace dtr::remat {

struct DeviceMemory;  // remat/runtime.cpp: one device's budget, pool and stats

/// The eviction policy's own per-storage fields (remat/policy.cpp, h_DTR^eq):
/// the union-find class while evicted, or -1; while resident, the evicted
/// neighbours and the class each had when it was evicted (pointers are
/// compared, never followed).
struct PolicyState {
  int32_t remat_class = -1;
  /// Position in the policy's list of evicted members, or -1.
  int32_t member_index = -1;
  std::vector<std::pair<const Storage*, int32_t>> evicted_neighbours;
};

struct StorageState final : StorageHook {
  /// The op that produced the bytes; null for constants (parameters, data
  /// loaded from outside). Note [what may be evicted].
  std::shared_ptr<Node> producer;
  /// Lineage nodes that read the storage (Note [mutation] needs them).
  std::vector<std::weak_ptr<Node>> consumers;
  /// >0 while an op is using the bytes; locked storages are never evicted.
  int32_t lock_count = 0;
  /// Frames of the rematerialization in progress that are to rebuild this
  /// storage (Note [remat intermediates]).
  int32_t remat_frames = 0;
  /// Logical clock tick of the last access (Note [scores]).
  int64_t last_access = 0;
  /// Position in its device's evictable pool, or -1.
  int64_t pool_index = -1;
  /// >0 while a consumer outside the runtime holds a raw pointer to the
  /// bytes (a DLPack export; Runtime::pin, PinGuard): never evicted, freed
  /// eagerly or moved until the last unpin. Note [pin guard].
  int32_t pin_count = 0;
  /// Constants (no replayable producer: parameters, loaded data, detached
  /// results) are never evicted.
  bool constant = false;
  /// The bytes may change behind the runtime's back: they are the user's
  /// (from_blob), or a writable pointer to them was handed out (data_ptr).
  /// Lineage never reads them later (Note [borrowed storage]).
  bool borrowed = false;
  /// The planner's recordings that have seen this storage, and its id in
  /// each (Note [planner]); 0: none. Slot 0 is plan()'s, slot 1 DTR_PLAN's
  /// whole-run recording, which may be in progress around it.
  uint32_t record_generation[2] = {0, 0};
  uint32_t record_id[2] = {0, 0};
  /// While swapped (Note [host tier]): the copy of the bytes in host
  /// memory, from the CPU device's allocator and counted against the cpu
  /// budget; the storage itself then has no bytes. Null otherwise.
  void* host_data = nullptr;
  /// Allocated in one block with its Storage (new_storage), else on its own.
  bool embedded = false;
  /// Hash of the bytes when first computed (DTR_VERIFY); 0 = none.
  uint64_t verify_hash = 0;
  /// The accounting of the device whose budget the bytes count against;
  /// null while no runtime accounts for them (borrowed buffers).
  DeviceMemory* memory = nullptr;
  PolicyState policy;

  void on_storage_destroyed(Storage& s) override;  // remat/runtime.cpp
};

/// Gives `s` a state of its own (remat/runtime.cpp); state() calls it once.
StorageState& add_state(Storage& s);
/// The runtime's state of `s`, made on first use.
inline StorageState& state(Storage& s) {
  StorageHook* h = s.hook();
  return h != nullptr ? *static_cast<StorageState*>(h) : add_state(s);
}
/// The state of `s`, or null when no runtime has seen it.
inline const StorageState* find_state(const Storage& s) {
  return static_cast<const StorageState*>(s.hook());
}
/// A storage of `nbytes` on `device` allocated in one block with its state
/// (what the op path uses: one allocation per output, not two).
std::shared_ptr<Storage> new_storage(int64_t nbytes, Device device);

/// Lineage queries, for eager/ and tests: the producer of `s` (null for a
/// constant), and whether `s` is a constant that is never evicted.
inline const Node* producer(const Storage& s) {
  const StorageState* st = find_state(s);
  return st ? st->producer.get() : nullptr;
}
inline bool is_constant(const Storage& s) {
  const StorageState* st = find_state(s);
  return st != nullptr && st->constant;
}
/// Whether the bytes of `s` are in the host tier now (Note [host tier]):
/// not resident, but copied back on next use instead of recomputed.
inline bool is_swapped(const Storage& s) {
  const StorageState* st = find_state(s);
  return st != nullptr && st->host_data != nullptr;
}
/// Whether `s` is pinned now (Runtime::pin, PinGuard).
inline bool is_pinned(const Storage& s) {
  const StorageState* st = find_state(s);
  return st != nullptr && st->pin_count > 0;
}

}  // namespace dtr::remat
