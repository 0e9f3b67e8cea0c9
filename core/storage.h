// Storage: the bytes behind one or more tensors, and the unit of eviction
// (Note [unit of eviction]). Views are metadata over a storage; the bytes may
// come and go (eviction, rematerialization) while the Storage object stays.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"

namespace dtr {
namespace remat {
struct Node;  // a lineage node, defined in remat/lineage.h
}

class Storage;

/// Told when a storage's bytes go away for good, so a runtime that accounts
/// for resident bytes (remat::Runtime) can forget it.
class ResidencyTracker {
 public:
  virtual ~ResidencyTracker() = default;
  virtual void on_storage_destroyed(Storage& s) = 0;
};

class Storage {
 public:
  Storage(int64_t nbytes, Device device) : nbytes_(nbytes), device_(device) {}
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  int64_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  /// Null when the bytes are not resident (evicted, or not yet computed).
  void* data() const { return data_; }
  bool resident() const { return data_ != nullptr; }

  /// Takes ownership of `data`, which `alloc` allocated with nbytes() bytes.
  void set_data(void* data, Allocator* alloc) {
    data_ = data;
    allocator_ = alloc;
  }
  /// Frees the bytes (eviction); metadata and lineage stay.
  void free_data();

  // --- bookkeeping shared by eager/ and remat/ ---------------------------
  /// Bumped by every in-place write; autograd's saved-tensor check and
  /// Note [mutation] read it.
  uint64_t version = 0;
  /// Bumped by every in-place write that autograd records (the write changes
  /// the graph behind every tensor on this storage). A tensor made before
  /// such a write, other than the one written, holds a stale grad_fn
  /// (TensorImpl::graph_version; Note [views and in-place writes]).
  uint64_t graph_version = 0;
  /// The op that produced these bytes; null for constants (parameters, data
  /// loaded from outside). Note [what may be evicted].
  std::shared_ptr<remat::Node> producer;
  /// Number of live user-facing tensor handles on this storage.
  std::atomic<int32_t> handle_count{0};
  /// >0 while an op is using the bytes; locked storages are never evicted.
  int32_t lock_count = 0;
  /// Logical clock tick of the last access (Note [scores]).
  int64_t last_access = 0;
  /// Position in the runtime's evictable pool, or -1.
  int64_t pool_index = -1;
  /// Constants (no replayable producer) are never evicted.
  bool pinned = false;
  /// The bytes may change behind the runtime's back: they are the user's
  /// (from_blob), or a writable pointer to them was handed out (data_ptr),
  /// which the program may keep and write through later. Lineage never reads
  /// them later. A node that reads a
  /// borrowed storage gets no lineage: its outputs are pinned constants
  /// (Note [borrowed storage], remat/runtime.cpp).
  bool borrowed = false;
  ResidencyTracker* tracker = nullptr;
  /// Hash of the bytes when first computed (DTR_VERIFY); 0 = none.
  uint64_t verify_hash = 0;
  /// Lineage nodes that read this storage (Note [mutation] needs them).
  std::vector<std::weak_ptr<remat::Node>> consumers;
  /// Eviction-policy bookkeeping (remat/policy.cpp, h_DTR^eq): the
  /// union-find class while evicted, or -1; while resident, the evicted
  /// neighbours and the class each had when it was evicted (pointers are
  /// compared, never followed).
  int32_t remat_class = -1;
  std::vector<std::pair<const Storage*, int32_t>> evicted_neighbours;

 private:
  int64_t nbytes_;
  Device device_;
  void* data_ = nullptr;
  Allocator* allocator_ = nullptr;
};

}  // namespace dtr
