#include "core/caching_allocator.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "core/memory_history.h"

namespace dtr {

double fragmentation(const AllocatorStats& s) {
  if (s.free_bytes <= 0) return 0.0;
  return 1.0 - double(s.largest_free_block) / double(s.free_bytes);
}

DeviceMemorySource::~DeviceMemorySource() = default;

namespace {
// Requests past this are refused outright: rounding them would overflow.
constexpr size_t kMaxRequestBytes = size_t{1} << 62;
}  // namespace

CachingAllocator::CachingAllocator(DeviceMemorySource& source) : source_(source) {}

CachingAllocator::~CachingAllocator() {
  for (auto& [base, seg] : segments_) {
    for (Block* b = seg.first; b != nullptr;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
    source_.release(base, seg.size);
  }
}

size_t CachingAllocator::round_size(size_t nbytes) {
  if (nbytes < kBlockRoundBytes) return kBlockRoundBytes;
  return (nbytes + kBlockRoundBytes - 1) & ~(kBlockRoundBytes - 1);
}

size_t CachingAllocator::segment_size(size_t rounded) {
  if (is_small(rounded)) return kSmallSegmentBytes;
  if (rounded < kLargeRequestBytes) return kLargeSegmentBytes;
  return (rounded + kSegmentRoundBytes - 1) & ~(kSegmentRoundBytes - 1);
}

CachingAllocator::Block* CachingAllocator::take_free_locked(size_t rounded) {
  Pool& p = pool(is_small(rounded));
  Block key;
  key.size = rounded;  // ptr null: the first block of at least that size
  auto it = p.lower_bound(&key);
  if (it == p.end()) return nullptr;
  Block* b = *it;
  p.erase(it);
  return b;
}

CachingAllocator::Block* CachingAllocator::add_segment_locked(size_t seg_bytes, size_t rounded) {
  void* p = source_.reserve(seg_bytes);
  if (p == nullptr) return nullptr;
  auto* b = new Block;
  b->ptr = static_cast<char*>(p);
  b->size = seg_bytes;
  b->small = is_small(rounded);
  b->segment = b->ptr;
  segments_.emplace(b->ptr, Segment{seg_bytes, b->small, b});
  reserved_bytes_ += int64_t(seg_bytes);
  if (memory::recording()) memory::record_segment(this, true, p, int64_t(seg_bytes));
  return b;
}

void* CachingAllocator::hand_out_locked(Block* b, size_t rounded) {
  const size_t rest = b->size - rounded;
  // A large block keeps a tail of 1 MiB or less (no slivers in the large pool).
  const bool split = b->small ? rest >= kBlockRoundBytes : rest > kSmallRequestBytes;
  if (split) {
    auto* r = new Block;
    r->ptr = b->ptr + rounded;
    r->size = rest;
    r->small = b->small;
    r->segment = b->segment;
    r->prev = b;
    r->next = b->next;
    if (b->next != nullptr) b->next->prev = r;
    b->next = r;
    b->size = rounded;
    pool(r->small).insert(r);
  }
  b->allocated = true;
  allocated_.emplace(b->ptr, b);
  allocated_bytes_ += int64_t(b->size);
  peak_allocated_bytes_ = std::max(peak_allocated_bytes_, allocated_bytes_);
  return b->ptr;
}

void CachingAllocator::release_segment_locked(char* base) {
  auto it = segments_.find(base);
  const Segment seg = it->second;
  pool(seg.small).erase(seg.first);
  delete seg.first;
  segments_.erase(it);
  reserved_bytes_ -= int64_t(seg.size);
  if (memory::recording()) memory::record_segment(this, false, base, int64_t(seg.size));
  source_.release(base, seg.size);
}

bool CachingAllocator::release_until_locked(int64_t target_reserved) {
  if (reserved_bytes_ <= target_reserved) return true;
  std::vector<std::pair<size_t, char*>> whole;  // (size, base) of entirely free segments
  for (const auto& [base, seg] : segments_)
    if (!seg.first->allocated && seg.first->next == nullptr) whole.emplace_back(seg.size, base);
  // Largest first; among equals the lower address, so the choice is reproducible.
  std::sort(whole.begin(), whole.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : std::less<char*>()(a.second, b.second);
  });
  for (const auto& [size, base] : whole) {
    if (reserved_bytes_ <= target_reserved) break;
    release_segment_locked(base);
  }
  return reserved_bytes_ <= target_reserved;
}

void* CachingAllocator::allocate(size_t nbytes) {
  if (nbytes > kMaxRequestBytes) return nullptr;
  const size_t rounded = round_size(nbytes);
  std::lock_guard lock(mutex_);
  Block* b = take_free_locked(rounded);
  if (b == nullptr) {
    const size_t seg = segment_size(rounded);
    b = add_segment_locked(seg, rounded);
    if (b == nullptr) {  // the device is out: give the cache back and try once more
      release_until_locked(0);
      b = add_segment_locked(seg, rounded);
    }
    if (b == nullptr) return nullptr;
  }
  return hand_out_locked(b, rounded);
}

void* CachingAllocator::allocate_within(size_t nbytes, int64_t max_cached_bytes) {
  if (nbytes > kMaxRequestBytes) return nullptr;
  const size_t rounded = round_size(nbytes);
  std::lock_guard lock(mutex_);
  const int64_t cap = allocated_bytes_ + int64_t(rounded) + std::max<int64_t>(0, max_cached_bytes);
  if (Block* b = take_free_locked(rounded)) {
    void* p = hand_out_locked(b, rounded);
    release_until_locked(cap);
    return p;
  }
  size_t seg = segment_size(rounded);
  if (!release_until_locked(cap - int64_t(seg))) {
    seg = rounded;  // a segment of the standard size does not fit: exactly the request
    if (!release_until_locked(cap - int64_t(seg))) return nullptr;
  }
  Block* b = add_segment_locked(seg, rounded);
  if (b == nullptr) {
    release_until_locked(0);
    b = add_segment_locked(seg, rounded);
  }
  if (b == nullptr) return nullptr;
  return hand_out_locked(b, rounded);
}

void CachingAllocator::deallocate(void* ptr, size_t nbytes) {
  std::lock_guard lock(mutex_);
  auto it = allocated_.find(ptr);
  DTR_INTERNAL_ASSERT(it != allocated_.end(), "CachingAllocator::deallocate of {} ({} bytes): not handed out here",
                      ptr, nbytes);
  Block* b = it->second;
  allocated_.erase(it);
  allocated_bytes_ -= int64_t(b->size);
  b->allocated = false;
  Pool& p = pool(b->small);
  if (Block* prev = b->prev; prev != nullptr && !prev->allocated) {
    p.erase(prev);
    prev->size += b->size;
    prev->next = b->next;
    if (b->next != nullptr) b->next->prev = prev;
    delete b;
    b = prev;
  }
  if (Block* next = b->next; next != nullptr && !next->allocated) {
    p.erase(next);
    b->size += next->size;
    b->next = next->next;
    if (next->next != nullptr) next->next->prev = b;
    delete next;
  }
  p.insert(b);
}

int64_t CachingAllocator::cached_bytes() const {
  std::lock_guard lock(mutex_);
  return reserved_bytes_ - allocated_bytes_;
}

void CachingAllocator::release_cached(int64_t nbytes) {
  if (nbytes <= 0) return;
  std::lock_guard lock(mutex_);
  release_until_locked(reserved_bytes_ - nbytes);
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  release_until_locked(0);
}

std::optional<AllocatorStats> CachingAllocator::memory_stats() const {
  std::lock_guard lock(mutex_);
  AllocatorStats s;
  s.allocated_bytes = allocated_bytes_;
  s.reserved_bytes = reserved_bytes_;
  s.free_bytes = reserved_bytes_ - allocated_bytes_;
  for (const Pool* p : {&small_pool_, &large_pool_})
    if (!p->empty()) s.largest_free_block = std::max(s.largest_free_block, int64_t((*p->rbegin())->size));
  s.segments = int64_t(segments_.size());
  s.allocations = int64_t(allocated_.size());
  s.peak_allocated_bytes = peak_allocated_bytes_;
  return s;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard lock(mutex_);
  peak_allocated_bytes_ = allocated_bytes_;
}

std::vector<MemorySegmentLayout> CachingAllocator::layout_locked(std::optional<bool> small) const {
  std::vector<MemorySegmentLayout> out;
  for (const auto& [base, seg] : segments_) {
    if (small && seg.small != *small) continue;
    MemorySegmentLayout blocks;
    for (const Block* b = seg.first; b != nullptr; b = b->next)
      blocks.push_back(MemoryBlock{b->ptr, int64_t(b->size), b->allocated});
    out.push_back(std::move(blocks));
  }
  return out;
}

std::vector<MemorySegmentLayout> CachingAllocator::layout() const {
  std::lock_guard lock(mutex_);
  return layout_locked(std::nullopt);
}

std::vector<MemorySegmentLayout> CachingAllocator::layout_for(size_t nbytes) const {
  std::lock_guard lock(mutex_);
  return layout_locked(is_small(round_size(std::min(nbytes, kMaxRequestBytes))));
}

}  // namespace dtr
