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

#include <cstdint>
#include <memory>

#include "core/options.h"
#include "core/storage.h"

namespace dtr::remat {

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  /// Lower is evicted first. `now` is the logical clock.
  virtual double score(const Storage& s, int64_t now) = 0;
  /// Bookkeeping hooks (equivalence classes).
  virtual void on_evict(Storage&) {}
  virtual void on_rematerialize(Storage&) {}
  virtual void on_destroy(Storage&) {}
};

std::unique_ptr<EvictionPolicy> make_policy(Heuristic h);

/// c0: the estimated seconds to recompute `s` alone from resident inputs.
double local_cost(const Storage& s);

}  // namespace dtr::remat
