// The allocator of CPU storages: a cache of freed blocks in front of
// aligned_alloc.
//
// Why: a training step frees and reallocates the same large activation and
// gradient buffers every step. Straight from malloc, glibc hands the top of
// its heap back to the kernel (trim) or unmaps a large block on free, so the
// next step's buffers start as fresh pages and every first touch is a page
// fault: about 1,000 faults per step of the small transformer of
// benchmarks/train_step.cpp, a third of its CPU time. Freed blocks kept
// here are reused by the next allocation of the same (page-rounded) size.
//
// Blocks from kHostCacheMinBytes (4 KiB) up are cached: glibc trims the
// top of its heap whenever more than 128 KiB is free there, so even
// activations of tens of KiB (an LSTM's per-step tensors) come back as fresh
// pages; measured, a 128-step LSTM's step took 1.9x as long with lineage on
// as off before these were cached (the interleaved lineage metadata changes
// which frees reach the heap top), 1.1x after. Blocks of kHostCachePageBytes
// and up are page-rounded so sizes a few bytes apart share them; smaller
// ones are 64-byte rounded. Smaller blocks still go straight to malloc, whose bins
// already reuse them.
//
// How much is kept: the blocks in use plus the free blocks held never exceed
// the larger of the cap (kHostCacheCapBytes by default) and the high-water
// mark of the bytes in use. A step that once needed 470 MiB of activations
// keeps them for the next step (with a fixed 256 MiB cap, a GPT step's
// attention buffers were unmapped and faulted in again every step: 17% of
// its CPU time); a miss that would go past that line first frees cached
// blocks, largest first, so a change of shapes cannot make the process hold
// more than its own peak. Free blocks are not tensor storage, so the memory
// budget (Note [hard budget]) does not count them, except that under a
// budget the runtime trims the cache so that resident plus cached bytes stay
// within it (release_cached). A failed allocation empties the cache and
// retries. Under AddressSanitizer nothing is cached, so use-after-free on a
// storage is still caught.
//
// Where the bytes come from: page-rounded blocks (kHostCachePageBytes and
// up) are anonymous mappings of their own, so a block the cache lets go of
// is unmapped and its pages leave the process at once. From malloc, freed
// blocks stayed in glibc's heap: under DTR_MEMORY_BUDGET=17MiB, train_gpt
// held 82 MB resident against 78 MB with no budget at all, because glibc
// raises its mmap threshold to the size of any mapped block freed and then
// serves blocks of that size from its heap, which gives pages back only from
// its top. Blocks from kHostCacheMinBytes to kHostCachePageBytes still come
// from malloc (a mapping each would cost a system call and a kernel memory
// area for a few KiB). With no budget, or within one, cached blocks stay
// cached and a step still reuses resident pages.
//
// Note [moving pages]. Beyond a budget (allocate_within), the cache holds
// little: freed blocks must go, and the next request is seldom of their
// size. Unmapping them and mapping a fresh block costs a page fault and a
// zeroed page per 4 KiB touched: at half its peak, the U-Net zoo step spent
// 23% of its CPU time in the kernel (12% unbudgeted): clearing pages,
// faults, unmapping, about 53 ms of a 300 ms step. Instead a miss takes cached blocks that
// have to go and moves their pages into the new block: mremap(2) with
// MREMAP_FIXED carries each page's frame and table entry to the new
// address, with no copy, no fault and no zeroing (the bytes are old tensor
// bytes; a new storage's contents are unspecified). The smallest cached
// block that covers the request gives its head in place and its tail stays
// cached; else the largest blocks are moved in one after another and fresh
// pages fill the rest. A block so built spans several kernel mappings, and
// mremap moves a range of one mapping only, so each block records its
// pieces (pieces_) and is moved piece by piece; munmap takes any range.
// Pieces per block are capped (kMaxPieces), which bounds the mappings the
// process holds and the system calls per move. If mremap fails (the
// process is out of mappings), the rest of the block is fresh pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/allocator.h"

namespace dtr::cpu {

inline constexpr size_t kHostCacheMinBytes = size_t{4} << 10;
inline constexpr size_t kHostCachePageBytes = size_t{64} << 10;
inline constexpr size_t kHostCacheCapBytes = size_t{256} << 20;

struct HostCacheStats {
  int64_t cached_bytes = 0;  // free blocks held for reuse
  int64_t hits = 0;          // allocations served from the cache
  int64_t misses = 0;        // cacheable allocations that went to malloc
  int64_t recycled = 0;        // misses served with the pages of cached blocks that had to go
  int64_t recycled_bytes = 0;  // bytes of those pages (moved, not faulted in afresh)
  int64_t in_use_bytes = 0;  // cacheable blocks handed out and not yet returned
  int64_t peak_in_use_bytes = 0;
};

class CachingHostAllocator final : public Allocator {
 public:
  /// Keeps blocks in use plus free blocks within max(`cap_bytes`, peak bytes
  /// in use) (0: cache nothing).
  explicit CachingHostAllocator(size_t cap_bytes = kHostCacheCapBytes);
  ~CachingHostAllocator() override;

  /// 64-byte aligned block of at least `nbytes`; nullptr when the system is
  /// out of memory even after the cache was emptied.
  void* allocate(size_t nbytes) override;
  /// allocate, leaving at most `max_cached_bytes` cached: beyond that, free
  /// blocks go back to the system, and on a miss their pages are moved into
  /// the new block first (Note [moving pages]). Its bytes are unspecified.
  void* allocate_within(size_t nbytes, int64_t max_cached_bytes) override;
  /// Takes back a block of `nbytes` (the size it was allocated with).
  void deallocate(void* ptr, size_t nbytes) override;

  /// Returns every cached block to the system.
  void empty_cache();
  int64_t cached_bytes() const override;
  /// Frees cached blocks, largest first, until `nbytes` are gone or none is left.
  void release_cached(int64_t nbytes) override;
  HostCacheStats stats() const;
  /// For memory snapshots: a block's size as rounded here, and the cached
  /// free blocks (address order).
  int64_t block_bytes(size_t nbytes) const override;
  std::vector<MemoryBlock> cached_blocks() const override;

 private:
  static size_t rounded_block_bytes(size_t nbytes);
  // Takes cached blocks, largest first, until `nbytes` are gone or none is
  // left; the caller holds mutex_ and frees the returned (block, bytes)
  // pairs with free_blocks after unlocking.
  std::vector<std::pair<void*, size_t>> take_cached_locked(int64_t nbytes);
  static void free_blocks(const std::vector<std::pair<void*, size_t>>& blocks);
  // A mapped block (or the tail of one) and its pieces: the byte lengths of
  // the consecutive ranges it is made of, each within one kernel mapping
  // (Note [moving pages]).
  struct Mapped {
    char* base = nullptr;
    size_t bytes = 0;
    std::vector<size_t> pieces;
  };
  // What assemble made: the new block's pieces, the bytes of it whose pages
  // were moved from cached blocks, and what is left of those blocks.
  struct Assembled {
    std::vector<size_t> pieces;
    size_t moved_bytes = 0;
    std::vector<Mapped> tails;
  };
  // Mapped blocks are made of at most this many pieces: each is a mapping
  // of the kernel's (vm.max_map_count) and a system call when moved again.
  static constexpr size_t kMaxPieces = 16;

  // The pieces of the mapped block at `p` of `bytes`, its entry taken out of
  // pieces_; the caller holds mutex_.
  std::vector<size_t> take_pieces_locked(void* p, size_t bytes);
  size_t piece_count_locked(void* p) const;
  // Takes the cached mapped blocks a request of `bytes` is built from: the
  // smallest that covers it, else the largest until they do (within
  // kMaxPieces); none below kHostCachePageBytes. The caller holds mutex_.
  std::vector<Mapped> take_sources_locked(size_t bytes);
  // A block of `bytes` made of the pages of `sources` (taken out of the
  // cache; what is left of them goes to out.tails), fresh pages after them;
  // nullptr when no mapping is left, all of `sources` then in out.tails.
  static void* assemble(size_t bytes, std::vector<Mapped> sources, Assembled& out);
  // The part of a block with `pieces`, from piece `i` of which `used`
  // bytes are gone, starting at `at`, appended to `tails` (if not empty).
  static void split_tail(const std::vector<size_t>& pieces, size_t i, size_t used, char* at,
                         std::vector<Mapped>& tails);
  // Caches a mapped block (or unmaps one too small to be of the mapped
  // sizes); the caller holds mutex_.
  void cache_mapped_locked(Mapped m);

  const size_t cap_bytes_;
  mutable std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;  // block bytes → free blocks
  std::unordered_map<void*, std::vector<size_t>> pieces_;  // mapped blocks of more than one piece
  HostCacheStats stats_;
};

/// The process-wide instance: the CPU backend's allocator (cpu/backend.cpp;
/// a test gives a runtime its own through an AllocatorProvider).
CachingHostAllocator& host_allocator();

}  // namespace dtr::cpu
