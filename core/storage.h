// Storage: the bytes behind one or more tensors, and the unit of eviction
// (Note [unit of eviction]). Views are metadata over a storage; the bytes may
// come and go (eviction, rematerialization) while the Storage object stays.
//
// A Storage holds its bytes, device, versions, handle count and whether it
// may be written, nothing else. What a runtime keeps about it (lineage, residency, locks, the
// eviction policy's bookkeeping) is the runtime's own per-storage state,
// opaque here (remat/storage_state.h; Note [policy apart from mechanism]).
#pragma once

#include <atomic>
#include <cstdint>

#include "core/allocator.h"
#include "core/device.h"

namespace dtr {

class Storage;

/// The per-storage state of the runtime that accounts for a storage,
/// opaque to core/. Told when the storage goes away for good, so the runtime
/// can forget it; it owns its own lifetime.
class StorageHook {
 public:
  virtual void on_storage_destroyed(Storage& s) = 0;

 protected:
  ~StorageHook() = default;
};

class Storage {
 public:
  /// `nbytes` bytes on `device`, not yet resident.
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

  /// The runtime's state for this storage (null until a runtime sees it).
  StorageHook* hook() const { return hook_; }
  void set_hook(StorageHook* h) { hook_ = h; }

  /// Bumped by every in-place write; autograd's saved-tensor check and
  /// Note [mutation] read it.
  uint64_t version = 0;
  /// Bumped by every in-place write that autograd records (the write changes
  /// the graph behind every tensor on this storage). A tensor made before
  /// such a write, other than the one written, holds a stale grad_fn
  /// (TensorImpl::graph_version; Note [views and in-place writes]).
  uint64_t graph_version = 0;
  /// Number of live user-facing tensor handles on this storage.
  std::atomic<int32_t> handle_count{0};
  /// The bytes' owner forbids writes (a DLPack 1.x import flagged
  /// DLPACK_FLAG_BITMASK_READ_ONLY, eager/dlpack.h): every in-place op and
  /// every writable pointer is refused with ValueError. Set once, before
  /// any tensor on the storage is handed out.
  bool read_only = false;

 private:
  int64_t nbytes_;
  Device device_;
  void* data_ = nullptr;
  Allocator* allocator_ = nullptr;
  StorageHook* hook_ = nullptr;
};

}  // namespace dtr
