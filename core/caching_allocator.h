// The caching allocator of a device's memory (DESIGN.md "Backends"): blocks
// carved from segments reserved from the device, kept for reuse when freed,
// in the manner of PyTorch's CUDA caching allocator. The device API stays
// with the backend, behind DeviceMemorySource (cudaMalloc / cudaFree for
// the CUDA backend); everything here is plain host code and is tested with
// a fake source (tests/core/caching_allocator_test.cpp).
//
// Why: cudaMalloc and cudaFree synchronize the device and take tens of
// microseconds to milliseconds; a training step frees and reallocates the
// same buffers every step. Reserving memory in segments and handing out
// blocks of them keeps the device API off the op path after the first step.
//
// Sizes: every request is rounded up to kBlockRoundBytes (512; 0 bytes take
// one 512-byte block). Requests up to kSmallRequestBytes (1 MiB) come from
// the small pool, whose segments are kSmallSegmentBytes (2 MiB); larger
// ones from the large pool, whose segments are kLargeSegmentBytes (20 MiB)
// for requests below kLargeRequestBytes (10 MiB) and the request rounded up
// to kSegmentRoundBytes (2 MiB) above. A pool serves a request from its
// smallest free block that fits (best fit, ties to the lower address), split
// when what is left is at least 512 bytes (small pool) or more than 1 MiB
// (large pool: a smaller tail stays part of the block handed out, so large
// blocks are not cut into slivers). A freed block merges with free
// neighbours in its segment, so free bytes adjacent in memory are always one
// block.
//
// Streams: the CUDA backend runs every kernel and copy of a device on one
// stream, so work on a freed block is ordered before any later use of it and
// the block is reusable at once, with no events recorded per stream.
//
// What is kept: free blocks stay cached until release_cached, empty_cache
// or a budget asks for them (allocate_within); only a segment with no block
// handed out can go back to the device. Under a memory budget the runtime
// keeps the reserved bytes within it (Note [hard budget]).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"

namespace dtr {

/// Where a CachingAllocator gets device memory from: whole segments.
class DeviceMemorySource {
 public:
  virtual ~DeviceMemorySource();
  /// `nbytes` of device memory aligned to at least 64 bytes (cudaMalloc
  /// gives 256), or nullptr when the device has no more.
  virtual void* reserve(size_t nbytes) = 0;
  /// Gives back a segment `reserve` returned, with its size in bytes.
  virtual void release(void* p, size_t nbytes) = 0;
};

inline constexpr size_t kBlockRoundBytes = 512;
inline constexpr size_t kSmallRequestBytes = size_t{1} << 20;
inline constexpr size_t kSmallSegmentBytes = size_t{2} << 20;
inline constexpr size_t kLargeRequestBytes = size_t{10} << 20;
inline constexpr size_t kLargeSegmentBytes = size_t{20} << 20;
inline constexpr size_t kSegmentRoundBytes = size_t{2} << 20;

/// Thread-safe (one mutex). Not copyable.
class CachingAllocator final : public Allocator {
 public:
  /// Takes segments from `source` (not owned; it must outlive this).
  explicit CachingAllocator(DeviceMemorySource& source);
  /// Gives every segment back to the source. Blocks still handed out are
  /// lost with them: the owner frees its storages first.
  ~CachingAllocator() override;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// A block of at least `nbytes` (rounded up to 512), 64-byte aligned;
  /// reserves a new segment when no free block fits. When the source has
  /// none, every free segment goes back to it and the reservation is tried
  /// once more; nullptr when that fails too.
  void* allocate(size_t nbytes) override;
  /// allocate(nbytes), keeping reserved bytes within allocated bytes plus
  /// the rounded request plus `max_cached_bytes` (allocated as before the
  /// call): free segments go back first, largest first; when a segment of
  /// the standard size would still go past that, one of exactly the
  /// rounded request is tried. nullptr when even that does not fit, or the
  /// source has no memory after every free segment went back (the runtime
  /// then evicts and retries). A free block that fits is reused without
  /// reserving anything.
  void* allocate_within(size_t nbytes, int64_t max_cached_bytes) override;
  /// Takes back a block allocate returned. Throws InternalError for a
  /// pointer this allocator did not hand out.
  void deallocate(void* ptr, size_t nbytes) override;

  /// Free bytes in reserved segments (reserved - allocated).
  int64_t cached_bytes() const override;
  /// Gives back whole free segments, largest first, until `nbytes` are
  /// gone or no segment is entirely free. Free blocks inside a segment in
  /// use stay: they are part of it.
  void release_cached(int64_t nbytes) override;
  /// Gives back every entirely free segment.
  void empty_cache();

  /// nbytes rounded up to a multiple of 512 (at least 512).
  int64_t rounded_bytes(size_t nbytes) const override { return int64_t(round_size(nbytes)); }
  static size_t round_size(size_t nbytes);
  /// The size of the segment reserved for a rounded request of `rounded`
  /// bytes when no free block fits it.
  static size_t segment_size(size_t rounded);

  std::optional<AllocatorStats> memory_stats() const override;
  void reset_peak_stats() override;
  /// Every segment in address order, each block in address order.
  std::vector<MemorySegmentLayout> layout() const override;
  /// The segments of the pool a request of `nbytes` is served from.
  std::vector<MemorySegmentLayout> layout_for(size_t nbytes) const override;

 private:
  struct Block {
    char* ptr = nullptr;
    size_t size = 0;
    bool allocated = false;
    bool small = false;      // of the small pool
    Block* prev = nullptr;   // address neighbours within the segment
    Block* next = nullptr;
    char* segment = nullptr; // base of its segment
  };
  struct BySizeThenAddress {
    bool operator()(const Block* a, const Block* b) const {
      return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
    }
  };
  using Pool = std::set<Block*, BySizeThenAddress>;
  struct Segment {
    size_t size = 0;
    bool small = false;
    Block* first = nullptr;
  };

  static bool is_small(size_t rounded) { return rounded <= kSmallRequestBytes; }
  Pool& pool(bool small) { return small ? small_pool_ : large_pool_; }
  // The best-fitting free block of the pool for `rounded`, taken out of it,
  // or null.
  Block* take_free_locked(size_t rounded);
  // Reserves a segment of `seg_bytes` for a request of `rounded` bytes (its
  // whole first block, free); null when the source has none.
  Block* add_segment_locked(size_t seg_bytes, size_t rounded);
  // Hands out `rounded` bytes of the free block `b` (not in a pool),
  // splitting off the rest by the pool's rule.
  void* hand_out_locked(Block* b, size_t rounded);
  // Gives back entirely free segments, largest first, while `reserved_`
  // exceeds `target_reserved`; false when some still do.
  bool release_until_locked(int64_t target_reserved);
  void release_segment_locked(char* base);
  std::vector<MemorySegmentLayout> layout_locked(std::optional<bool> small) const;

  DeviceMemorySource& source_;
  mutable std::mutex mutex_;
  Pool small_pool_, large_pool_;
  std::map<char*, Segment> segments_;                 // by base address
  std::unordered_map<const void*, Block*> allocated_; // handed-out blocks by address
  int64_t allocated_bytes_ = 0;
  int64_t peak_allocated_bytes_ = 0;
  int64_t reserved_bytes_ = 0;
};

}  // namespace dtr
