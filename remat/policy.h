// Eviction heuristics (DTR paper §4, Appendix C; Note [scores]). A policy
// scores a resident, evictable storage; the runtime evicts the lowest score.
// Staleness is measured on the runtime's logical clock (one tick per op) and
// cost comes from the op's estimate, so decisions are reproducible.
//
//   dtr       h = (c0(t) + Σ_{u ∈ e*(t)} c0(u)) / (m(t) · s(t)), e*(t) the
//             evicted neighbourhood: evicted storages reachable from t
//             through evicted storages, in either direction.
//   dtr_eq    as dtr, with e* approximated by union-find equivalence classes
//             of evicted storages (the paper's h_DTR^eq; the default).
//   dtr_local h = c0(t) / (m(t) · s(t)).
//   lru       h = 1 / s(t): the least recently used goes first.
//   size      h = 1 / m(t): the largest goes first.
//   msps      h = (c0(t) + Σ evicted ancestors' c0) / m(t): memory saved per
//             second of recompute (Capuchin, Peng et al. 2020), no staleness.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "core/backend.h"
#include "core/options.h"
#include "core/storage.h"
#include "remat/storage_state.h"

namespace dtr::remat {

/// One eviction candidate: a resident, unlocked storage with replayable
/// lineage. The fields a score reads are copied here when the storage enters
/// the pool (they change only while it is out: locked or evicted), so a
/// decision reads one packed array instead of chasing pointers.
struct Candidate {
  Storage* s = nullptr;
  double cost = 0;          // c0(t), seconds
  int64_t nbytes = 0;       // m(t), bytes
  int64_t last_access = 0;  // logical clock tick
  /// Seconds to bring the bytes back by copying them from host memory
  /// (Note [host tier]): the copy back, plus the copy out where copies do
  /// not overlap compute; +inf where the host tier is off or full.
  double swap_seconds = std::numeric_limits<double>::infinity();
  /// Classes of the evicted neighbours (dtr_eq), inline; -1: more than
  /// kInline, read the storage's PolicyState::evicted_neighbours.
  int16_t n_classes = 0;
  /// Has replayable lineage (else only swapping can free its bytes: a
  /// constant such as a parameter or optimizer state).
  bool replayable = true;
  static constexpr int kInline = 3;
  int32_t classes[kInline] = {};
};
// A decision scans these: 56 bytes, not 64.
static_assert(sizeof(Candidate) == 56);

/// s(t): logical clock ticks since the last access, plus one (Note [scores]).
inline double staleness(const Candidate& c, int64_t now) {
  return double(std::max<int64_t>(now - c.last_access, 0) + 1);
}

/// Told when the fields a score reads changed for a resident storage, so its
/// pool entry is copied again (the runtime routes it to the storage's own
/// device pool; a test passes a CandidatePool).
class CandidateSync {
 public:
  virtual void sync(Storage& s) = 0;

 protected:
  ~CandidateSync() = default;
};

/// Note [staleness buckets]. Every score of the DTR family falls with
/// staleness: score(c, now) >= key(c) / staleness(c, now), with key(c) the
/// cheapest way back for c alone over its bytes (dtr, dtr_eq, dtr_local:
/// the evicted neighbourhood only adds cost) or 1 (lru: equality). The
/// pool keeps its candidates in buckets of key (four per octave), each a
/// list in order of last access, oldest first. A decision visits the
/// buckets by the bound key_lo(b) / staleness(oldest of b), the lowest
/// first, and walks a bucket from its oldest while key_lo(b) / staleness of
/// the next is below the best score found: later ones are fresher and no
/// cheaper, so none of them can win. It stops at the first bucket whose
/// bound reaches the best. That is exact, except that a bucket's walk stops
/// after kIndexWalk candidates (a bound for the time of a decision, when
/// neighbourhood costs make the bounds loose). Kept on every add, remove
/// and sync: a few index writes each.
struct IndexBucket {
  int32_t head = -1, tail = -1;  // pool positions, oldest and newest
};

/// One device's evictable pool; StorageState::pool_index is a storage's position.
class CandidatePool final : public CandidateSync {
 public:
  static constexpr int kBuckets = 512;
  /// key(c) of Note [staleness buckets]: (the cheaper of c0 and the copy
  /// back, or the copy back alone without lineage, + 1e-12 s) / bytes.
  static double index_key(const Candidate& c);
  /// The bucket of a key, and the smallest key of a bucket (0 for the
  /// first, which also takes every smaller key).
  static int bucket_of(double key);
  static double bucket_floor(int b);

  /// The host link swaps of this pool's device are priced with; nullopt
  /// (the default): the host tier is off, every swap_seconds is +inf.
  /// Applies to storages added or synced from now on.
  void set_host_link(std::optional<HostLink> link) { link_ = link; }
  void add(Storage& s);
  void remove(Storage& s);
  /// Re-copies the policy's fields of `s` when it is in the pool.
  void sync(Storage& s) override;
  size_t size() const { return items_.size(); }
  /// Σ bytes of the candidates.
  int64_t bytes() const { return bytes_; }
  const Candidate& operator[](size_t i) const { return items_[i]; }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }
  /// The index (Note [staleness buckets]): calls f(bucket, oldest position)
  /// for each non-empty bucket, and the next position after `i` in its
  /// bucket (-1 after the newest).
  template <typename F>
  void for_each_bucket(F&& f) const {
    for (int w = 0; w < kBuckets / 64; ++w)
      for (uint64_t bits = nonempty_[size_t(w)]; bits != 0; bits &= bits - 1) {
        const int b = w * 64 + __builtin_ctzll(bits);
        f(b, buckets_[size_t(b)].head);
      }
  }
  int32_t next_in_bucket(int32_t i) const { return links_[size_t(i)].next; }

 private:
  struct Link {
    int32_t prev = -1, next = -1;
    int32_t bucket = 0;
  };
  void fill(Candidate& c, Storage& s) const;
  // Puts position i in its bucket by last access (from the newest end) /
  // takes it out.
  void link(size_t i);
  void unlink(size_t i);
  // Points the neighbours (or the bucket's ends) named by links_[i] at i.
  void attach(size_t i);
  std::vector<Candidate> items_;
  std::vector<Link> links_;  // parallel to items_
  std::vector<IndexBucket> buckets_ = std::vector<IndexBucket>(kBuckets);
  std::vector<uint64_t> nonempty_ = std::vector<uint64_t>(kBuckets / 64);
  int64_t bytes_ = 0;
  std::optional<HostLink> link_;
};

/// The eviction policy, apart from the mechanism (Note [policy apart from
/// mechanism]): the runtime asks it to score candidates and tells it what
/// happened; the policy keeps its own bookkeeping in StorageState::policy.
/// A policy needs nothing global: tests drive one with hand-built storages
/// and a CandidatePool.
class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  /// Lower is evicted first. `now` is the logical clock. A heuristic that
  /// prices a victim by what it costs to bring back prices it by the
  /// cheaper way back: restore_cost (Note [host tier]).
  virtual double score(const Candidate& c, int64_t now) = 0;
  /// Seconds to bring `c` back by recomputing it, as this heuristic sees
  /// it (dtr_eq: c0 plus its evicted classes' costs; dtr: plus the exact
  /// evicted neighbourhood; msps: plus the evicted ancestors; the others:
  /// c0); +inf when `c` has no replayable lineage.
  virtual double recompute_cost(const Candidate& c) {
    return c.replayable ? c.cost : std::numeric_limits<double>::infinity();
  }
  /// How a victim's bytes come back: recomputed from lineage (evicted), or
  /// copied back from host memory (swapped).
  enum class Restore { kRecompute, kSwap };
  /// The cheaper way back for `c`, recomputation on a tie.
  Restore restore_choice(const Candidate& c) {
    return c.swap_seconds < recompute_cost(c) ? Restore::kSwap : Restore::kRecompute;
  }
  /// min(recompute_cost(c), c.swap_seconds): one score decides between
  /// evicting and swapping (Note [host tier]).
  double restore_cost(const Candidate& c) {
    // Every heuristic's recompute cost is at least c0: a copy no dearer
    // than that wins without the neighbourhood search.
    if (c.swap_seconds <= c.cost) return c.swap_seconds;
    return std::min(recompute_cost(c), c.swap_seconds);
  }
  /// How the score bounds by staleness (Note [staleness buckets]):
  /// kKey: score >= key / staleness; kOne: score >= 1 / staleness; kNone:
  /// no such bound (size, msps), so the index cannot search for it.
  enum class StalenessBound { kNone, kKey, kOne };
  virtual StalenessBound staleness_bound() const { return StalenessBound::kNone; }
  /// Bookkeeping hooks (equivalence classes). `pools` is told of resident
  /// storages whose evicted neighbourhood changed.
  virtual void on_evict(Storage&, CandidateSync&) {}
  virtual void on_rematerialize(Storage&, CandidateSync&) {}
  virtual void on_destroy(Storage&, CandidateSync&) {}
};

std::unique_ptr<EvictionPolicy> make_policy(Heuristic h);

/// c0: the estimated seconds to recompute `s` alone from resident inputs.
double local_cost(const Storage& s);

}  // namespace dtr::remat
