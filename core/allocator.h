// The Allocator interface: one per device (a backend's, core/backend.h), and
// the provider a runtime gets them from (tests give a runtime their own).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/device.h"

namespace dtr {

/// What a caching device allocator holds now (Allocator::memory_stats), in
/// bytes: what it has reserved from the device, what of that is handed out
/// in blocks (sizes as rounded by the allocator), and its free part.
struct AllocatorStats {
  int64_t allocated_bytes = 0;     // blocks handed out (rounded sizes)
  int64_t reserved_bytes = 0;      // segments reserved from the device
  int64_t free_bytes = 0;          // reserved_bytes - allocated_bytes
  int64_t largest_free_block = 0;  // the largest free block (of any pool)
  int64_t segments = 0;            // segments reserved now
  int64_t allocations = 0;         // blocks handed out now
  /// The high-water mark of allocated_bytes since the allocator was made or
  /// reset_peak_stats() was last called (PyTorch's
  /// memory_stats()["allocated_bytes.all.peak"]).
  int64_t peak_allocated_bytes = 0;
};

/// 1 - largest_free_block / free_bytes: 0 when every free byte is in one
/// block (or nothing is free), near 1 when the free bytes are scattered in
/// blocks too small for a large request.
double fragmentation(const AllocatorStats& s);

/// One block of a reserved segment: its address, size in bytes (as rounded
/// by the allocator), and whether it is handed out (else free).
struct MemoryBlock {
  const void* ptr = nullptr;
  int64_t size = 0;
  bool allocated = false;
};
/// The blocks of one segment in address order; together they cover it.
using MemorySegmentLayout = std::vector<MemoryBlock>;

class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Returns `nbytes` bytes aligned to 64, or nullptr when the device is out
  /// of memory (the caller turns that into OutOfMemoryError).
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
  /// Bytes of freed blocks an allocator keeps for reuse (0 without a cache).
  virtual int64_t cached_bytes() const { return 0; }
  /// Returns cached blocks to the system until at least `nbytes` are gone
  /// (or the cache is empty). The runtime calls it so that resident plus
  /// cached bytes stay within the memory budget (Note [hard budget]).
  virtual void release_cached(int64_t /*nbytes*/) {}
  /// allocate(nbytes), after which at most `max_cached_bytes` of freed blocks
  /// stay cached (the runtime passes what the budget leaves beside resident
  /// storage; Note [hard budget]). A caching allocator may recycle blocks it
  /// has to give up into the new one.
  virtual void* allocate_within(size_t nbytes, int64_t max_cached_bytes) {
    void* p = allocate(nbytes);
    const int64_t over = cached_bytes() - max_cached_bytes;
    if (over > 0) release_cached(over);
    return p;
  }
  /// The bytes an allocation of `nbytes` takes from the device, as the
  /// allocator rounds it (`nbytes` itself by default). The runtime counts
  /// the rounding against a budget where memory_stats() is known.
  virtual int64_t rounded_bytes(size_t nbytes) const { return int64_t(nbytes); }
  /// Allocated, reserved and free bytes of a caching device allocator;
  /// nullopt (the default) where the allocator keeps no such account.
  virtual std::optional<AllocatorStats> memory_stats() const { return std::nullopt; }
  /// Restarts memory_stats().peak_allocated_bytes from the bytes allocated
  /// now (torch.cuda.reset_peak_memory_stats); nothing where no account is kept.
  virtual void reset_peak_stats() {}
  /// For memory snapshots only (remat/memory_snapshot.h): the bytes a block
  /// handed out for `nbytes` occupies (rounded_bytes by default; the host
  /// allocator's page and 64-byte rounding, which no budget counts), and
  /// the free blocks kept for reuse outside layout()'s segments (none by
  /// default).
  virtual int64_t block_bytes(size_t nbytes) const { return rounded_bytes(nbytes); }
  virtual std::vector<MemoryBlock> cached_blocks() const { return {}; }
  /// Every reserved segment's blocks, segments in address order; empty (the
  /// default) where the layout is not known.
  virtual std::vector<MemorySegmentLayout> layout() const { return {}; }
  /// The segments a request of `nbytes` could be carved from (a caching
  /// allocator serves small and large requests from separate pools):
  /// layout() by default. Fragmentation-aware eviction searches these
  /// (Note [fragmentation-aware eviction]).
  virtual std::vector<MemorySegmentLayout> layout_for(size_t /*nbytes*/) const { return layout(); }
};

/// Where a runtime gets the allocator of each device's new storages
/// (remat::Runtime's constructor; backend_allocators() in core/backend.h
/// is the backends' own).
class AllocatorProvider {
 public:
  virtual ~AllocatorProvider() = default;
  /// Never null for a device that exists; throws DeviceError otherwise.
  virtual Allocator* allocator(Device device) = 0;
};

}  // namespace dtr
