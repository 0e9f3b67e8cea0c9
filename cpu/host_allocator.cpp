#include "cpu/host_allocator.h"

#include "core/sanitizers.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <limits>

#include <sys/mman.h>

namespace dtr::cpu {

namespace {

// Nothing is cached under AddressSanitizer (core/sanitizers.h), so a use
// after free stays visible.
#if DTR_ADDRESS_SANITIZER
constexpr size_t kDefaultCap = 0;
#else
constexpr size_t kDefaultCap = kHostCacheCapBytes;
#endif

constexpr size_t kAlignment = 64;
constexpr size_t kPage = 4096;
constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();

// A cacheable block from the system: page-rounded ones are mapped on their
// own, so freeing one gives its pages back to the kernel at once (a block
// freed into glibc's heap stays resident there), smaller ones come from malloc.
void* system_allocate(size_t bytes) {
  if (bytes < kHostCachePageBytes) return std::aligned_alloc(kAlignment, bytes);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void system_free(void* p, size_t bytes) {
  if (bytes < kHostCachePageBytes) {
    std::free(p);
  } else {
    munmap(p, bytes);
  }
}

}  // namespace

CachingHostAllocator::CachingHostAllocator(size_t cap_bytes) : cap_bytes_(cap_bytes) {}

CachingHostAllocator::~CachingHostAllocator() { empty_cache(); }

size_t CachingHostAllocator::rounded_block_bytes(size_t nbytes) {
  if (nbytes == 0) nbytes = 1;
  // Page-rounded above the threshold, so sizes that differ by a few bytes
  // share blocks; 64-byte-rounded (aligned_alloc's rule) below it.
  const size_t unit = nbytes >= kHostCachePageBytes ? kPage : kAlignment;
  return (nbytes + unit - 1) / unit * unit;
}

int64_t CachingHostAllocator::block_bytes(size_t nbytes) const { return int64_t(rounded_block_bytes(nbytes)); }

std::vector<MemoryBlock> CachingHostAllocator::cached_blocks() const {
  std::vector<MemoryBlock> out;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [bytes, blocks] : free_)
      for (void* p : blocks) out.push_back({p, int64_t(bytes), false});
  }
  std::sort(out.begin(), out.end(), [](const MemoryBlock& a, const MemoryBlock& b) {
    return std::less<const void*>()(a.ptr, b.ptr);
  });
  return out;
}

void* CachingHostAllocator::allocate(size_t nbytes) {
  return allocate_within(nbytes, kUnlimited);
}

void* CachingHostAllocator::allocate_within(size_t nbytes, int64_t max_cached_bytes) {
  const size_t bytes = rounded_block_bytes(nbytes);
  const bool cacheable = bytes >= kHostCacheMinBytes && cap_bytes_ > 0;
  if (!cacheable) {
    void* p = std::aligned_alloc(kAlignment, bytes);
    if (max_cached_bytes != kUnlimited) release_cached(cached_bytes() - max_cached_bytes);
    return p;
  }
  // Held bytes stay within max(cap, peak in use), and cached ones within
  // what the caller allows: beyond that the cache gives up blocks. `extra`:
  // bytes about to be handed out on top of those in use.
  const auto over_locked = [&](size_t extra) {
    const int64_t limit = std::max<int64_t>(int64_t(cap_bytes_), stats_.peak_in_use_bytes);
    return std::min(stats_.cached_bytes,
                    std::max(stats_.in_use_bytes + stats_.cached_bytes + int64_t(extra) - limit,
                             stats_.cached_bytes - max_cached_bytes));
  };
  std::vector<std::pair<void*, size_t>> gone;
  void* hit = nullptr;
  std::vector<Mapped> sources;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(bytes);
    if (it != free_.end() && !it->second.empty()) {
      hit = it->second.back();
      it->second.pop_back();
      stats_.cached_bytes -= int64_t(bytes);
      stats_.in_use_bytes += int64_t(bytes);
      ++stats_.hits;
      const int64_t over = over_locked(0);
      if (over > 0) gone = take_cached_locked(over);
    } else {
      ++stats_.misses;
      // Cached blocks that have to go anyway lend their resident pages to
      // this one (Note [moving pages]).
      if (over_locked(bytes) > 0) sources = take_sources_locked(bytes);
    }
  }
  free_blocks(gone);
  if (hit != nullptr) return hit;
  Assembled a;
  void* p = sources.empty() ? system_allocate(bytes) : assemble(bytes, std::move(sources), a);
  if (p == nullptr) {
    for (const Mapped& t : a.tails) munmap(t.base, t.bytes);
    a = Assembled{};
    empty_cache();
    p = system_allocate(bytes);
    if (p == nullptr) return nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Mapped& t : a.tails) cache_mapped_locked(std::move(t));
    if (a.pieces.size() > 1) pieces_[p] = std::move(a.pieces);
    if (a.moved_bytes > 0) {
      ++stats_.recycled;
      stats_.recycled_bytes += int64_t(a.moved_bytes);
    }
    stats_.in_use_bytes += int64_t(bytes);
    stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
    const int64_t over = over_locked(0);
    if (over > 0) gone = take_cached_locked(over);
  }
  free_blocks(gone);
  return p;
}

void CachingHostAllocator::deallocate(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  const size_t bytes = rounded_block_bytes(nbytes);
  if (bytes >= kHostCacheMinBytes && cap_bytes_ > 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.in_use_bytes -= int64_t(bytes);
    // Moving a block from in use to cached keeps the held total where it
    // was, so it stays within max(cap, peak in use); release_cached may
    // have lowered it since.
    free_[bytes].push_back(ptr);
    stats_.cached_bytes += int64_t(bytes);
    return;
  }
  std::free(ptr);
}

std::vector<size_t> CachingHostAllocator::take_pieces_locked(void* p, size_t bytes) {
  auto it = pieces_.find(p);
  if (it == pieces_.end()) return {bytes};
  std::vector<size_t> pieces = std::move(it->second);
  pieces_.erase(it);
  return pieces;
}

size_t CachingHostAllocator::piece_count_locked(void* p) const {
  auto it = pieces_.find(p);
  return it == pieces_.end() ? 1 : it->second.size();
}

std::vector<CachingHostAllocator::Mapped> CachingHostAllocator::take_sources_locked(size_t bytes) {
  std::vector<Mapped> sources;
  if (bytes < kHostCachePageBytes) return sources;
  const auto take = [&](size_t size) {
    auto& list = free_[size];
    void* p = list.back();
    list.pop_back();
    stats_.cached_bytes -= int64_t(size);
    sources.push_back(Mapped{static_cast<char*>(p), size, take_pieces_locked(p, size)});
  };
  // The smallest mapped block that covers the request: its head becomes
  // the new block in place and its tail stays cached.
  size_t best = 0;
  std::vector<size_t> sizes;
  for (const auto& [size, list] : free_) {
    if (list.empty() || size < kHostCachePageBytes) continue;
    sizes.push_back(size);
    if (size >= bytes && (best == 0 || size < best)) best = size;
  }
  if (best != 0) {
    take(best);
    return sources;
  }
  // Else the largest ones until they cover it, as long as the new block
  // stays within kMaxPieces pieces (one kept for fresh pages at its end).
  std::sort(sizes.rbegin(), sizes.rend());
  size_t total = 0, pieces = 0;
  for (size_t size : sizes) {
    auto& list = free_[size];
    while (!list.empty() && total < bytes && pieces + piece_count_locked(list.back()) < kMaxPieces) {
      pieces += piece_count_locked(list.back());
      take(size);
      total += size;
    }
    if (total >= bytes) break;
  }
  return sources;
}

void CachingHostAllocator::split_tail(const std::vector<size_t>& pieces, size_t i, size_t used, char* at,
                                      std::vector<Mapped>& tails) {
  Mapped t{at, 0, {}};
  if (used < pieces[i]) t.pieces.push_back(pieces[i] - used);
  for (size_t j = i + 1; j < pieces.size(); ++j) t.pieces.push_back(pieces[j]);
  for (size_t n : t.pieces) t.bytes += n;
  if (t.bytes > 0) tails.push_back(std::move(t));
}

void* CachingHostAllocator::assemble(size_t bytes, std::vector<Mapped> sources, Assembled& out) {
  // One source that covers the request: its head, in place.
  if (sources.size() == 1 && sources[0].bytes >= bytes) {
    Mapped& m = sources[0];
    size_t off = 0;
    for (size_t i = 0; i < m.pieces.size(); ++i) {
      if (off == bytes) {
        split_tail(m.pieces, i, 0, m.base + bytes, out.tails);
        break;
      }
      const size_t take = std::min(m.pieces[i], bytes - off);
      out.pieces.push_back(take);
      off += take;
      if (take < m.pieces[i]) {
        split_tail(m.pieces, i, take, m.base + bytes, out.tails);
        break;
      }
    }
    out.moved_bytes = bytes;
    return m.base;
  }
  void* dst_map = system_allocate(bytes);  // untouched: no page is resident yet
  if (dst_map == nullptr) {
    out.tails = std::move(sources);
    return nullptr;
  }
  char* dst = static_cast<char*>(dst_map);
  size_t off = 0;
  bool failed = false;
  for (Mapped& m : sources) {
    char* at = m.base;
    size_t i = 0;
    for (; i < m.pieces.size() && off < bytes && !failed; ++i) {
      const size_t take = std::min(m.pieces[i], bytes - off);
      // Moves the page table entries: the pages keep their frames and
      // contents, nothing is copied or faulted in (mremap(2)). Each piece
      // lies within one mapping, as mremap needs.
      if (mremap(at, take, take, MREMAP_MAYMOVE | MREMAP_FIXED, dst + off) == MAP_FAILED) {
        failed = true;  // out of mappings (vm.max_map_count): fresh pages from here
        break;
      }
      out.pieces.push_back(take);
      out.moved_bytes += take;
      off += take;
      at += take;
      if (take < m.pieces[i]) {
        split_tail(m.pieces, i, take, at, out.tails);
        i = m.pieces.size();
        break;
      }
    }
    if (i < m.pieces.size()) split_tail(m.pieces, i, 0, at, out.tails);
  }
  if (off < bytes) out.pieces.push_back(bytes - off);  // the rest of the fresh mapping
  return dst;
}

void CachingHostAllocator::cache_mapped_locked(Mapped m) {
  if (m.bytes < kHostCachePageBytes) {
    // Too small for the mapped sizes: a request of this size comes from
    // malloc and would free it there.
    munmap(m.base, m.bytes);
    return;
  }
  if (m.pieces.size() > 1) pieces_[m.base] = std::move(m.pieces);
  free_[m.bytes].push_back(m.base);
  stats_.cached_bytes += int64_t(m.bytes);
}

void CachingHostAllocator::free_blocks(const std::vector<std::pair<void*, size_t>>& blocks) {
  for (const auto& [p, bytes] : blocks) system_free(p, bytes);
}

void CachingHostAllocator::empty_cache() {
  std::vector<std::pair<void*, size_t>> gone;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    gone = take_cached_locked(stats_.cached_bytes);
  }
  free_blocks(gone);
}

int64_t CachingHostAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_.cached_bytes;
}

std::vector<std::pair<void*, size_t>> CachingHostAllocator::take_cached_locked(int64_t nbytes) {
  std::vector<std::pair<void*, size_t>> gone;
  std::vector<size_t> sizes;
  for (const auto& [bytes, list] : free_)
    if (!list.empty()) sizes.push_back(bytes);
  std::sort(sizes.rbegin(), sizes.rend());
  int64_t released = 0;
  for (size_t bytes : sizes) {
    auto& list = free_[bytes];
    while (!list.empty() && released < nbytes) {
      gone.emplace_back(list.back(), bytes);
      pieces_.erase(list.back());  // munmap takes a range across mappings
      list.pop_back();
      released += int64_t(bytes);
      stats_.cached_bytes -= int64_t(bytes);
    }
    if (released >= nbytes) break;
  }
  return gone;
}

void CachingHostAllocator::release_cached(int64_t nbytes) {
  std::vector<std::pair<void*, size_t>> gone;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    gone = take_cached_locked(nbytes);
  }
  free_blocks(gone);
}

HostCacheStats CachingHostAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

CachingHostAllocator& host_allocator() {
  // Never destroyed: storages held by other static objects may be freed
  // after this file's statics are gone.
  static CachingHostAllocator* a = new CachingHostAllocator(kDefaultCap);
  return *a;
}


}  // namespace dtr::cpu
