#include "remat/policy.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include <absl/container/flat_hash_set.h>

#include "remat/lineage.h"

namespace dtr::remat {

double local_cost(const Storage& s) {
  const Node* p = producer(s);
  return p ? p->cost_seconds : 0.0;
}

namespace {
StorageState& st(Storage& s) { return state(s); }
const StorageState& st(const Storage& s) {
  static const StorageState kNone;  // a storage no runtime has seen: no lineage
  const StorageState* p = find_state(s);
  return p ? *p : kNone;
}
}  // namespace

void CandidatePool::fill(Candidate& c, Storage& s) const {
  c.s = &s;
  c.cost = local_cost(s);
  c.nbytes = s.nbytes();
  c.last_access = st(s).last_access;
  const Node* p = st(s).producer.get();
  c.replayable = !st(s).constant && p != nullptr && p->replayable;
  // Note [host tier]: the copy back, and the copy out unless it overlaps compute.
  c.swap_seconds = link_ ? link_->seconds(double(s.nbytes())) * (link_->async_copies ? 1.0 : 2.0)
                         : std::numeric_limits<double>::infinity();
  const auto& en = st(s).policy.evicted_neighbours;
  if (en.size() <= size_t(Candidate::kInline)) {
    c.n_classes = int16_t(en.size());
    for (size_t i = 0; i < en.size(); ++i) c.classes[i] = en[i].second;
  } else {
    c.n_classes = -1;
  }
}

double CandidatePool::index_key(const Candidate& c) {
  const double back = c.replayable ? std::min(c.cost, c.swap_seconds) : c.swap_seconds;
  return (back + 1e-12) / double(std::max<int64_t>(c.nbytes, 1));
}

namespace {
// Four buckets per octave: a positive double's exponent and top two
// mantissa bits, from 2^-100 (a picosecond per 10^18 bytes) up.
constexpr int64_t kBucketBase = (1023 - 100) << 2;
}  // namespace

int CandidatePool::bucket_of(double key) {
  if (!(key > 0)) return 0;
  uint64_t bits;
  std::memcpy(&bits, &key, sizeof bits);
  return int(std::clamp<int64_t>(int64_t(bits >> 50) - kBucketBase, 0, kBuckets - 1));
}

double CandidatePool::bucket_floor(int b) {
  if (b <= 0) return 0;
  const uint64_t bits = uint64_t(b + kBucketBase) << 50;
  double key;
  std::memcpy(&key, &bits, sizeof key);
  return key;
}

void CandidatePool::link(size_t i) {
  const int b = bucket_of(index_key(items_[i]));
  Link& l = links_[i];
  l.bucket = b;
  IndexBucket& bk = buckets_[size_t(b)];
  // From the newest end: a storage comes back to the pool when its op is
  // done, so nearly always after the newest. A bounded walk keeps a rebuild
  // in arbitrary order (apply_swap_mode) linear; its order is then only
  // approximate, and so is the search.
  const int64_t t = items_[i].last_access;
  int32_t after = bk.tail;
  for (int steps = 0; after >= 0 && items_[size_t(after)].last_access > t && steps < 32; ++steps)
    after = links_[size_t(after)].prev;
  l.prev = after;
  l.next = after >= 0 ? links_[size_t(after)].next : bk.head;
  attach(i);
  nonempty_[size_t(b) / 64] |= uint64_t{1} << (b % 64);
}

void CandidatePool::attach(size_t i) {
  const Link& l = links_[i];
  IndexBucket& bk = buckets_[size_t(l.bucket)];
  if (l.prev >= 0) links_[size_t(l.prev)].next = int32_t(i); else bk.head = int32_t(i);
  if (l.next >= 0) links_[size_t(l.next)].prev = int32_t(i); else bk.tail = int32_t(i);
}

void CandidatePool::unlink(size_t i) {
  const Link& l = links_[i];
  IndexBucket& bk = buckets_[size_t(l.bucket)];
  if (l.prev >= 0) links_[size_t(l.prev)].next = l.next; else bk.head = l.next;
  if (l.next >= 0) links_[size_t(l.next)].prev = l.prev; else bk.tail = l.prev;
  if (bk.head < 0) nonempty_[size_t(l.bucket) / 64] &= ~(uint64_t{1} << (l.bucket % 64));
}

void CandidatePool::add(Storage& s) {
  StorageState& state = st(s);
  if (state.pool_index >= 0) return sync(s);
  state.pool_index = int64_t(items_.size());
  fill(items_.emplace_back(), s);
  links_.emplace_back();
  link(items_.size() - 1);
  bytes_ += s.nbytes();
}

void CandidatePool::remove(Storage& s) {
  StorageState& state = st(s);
  if (state.pool_index < 0) return;
  const auto i = size_t(state.pool_index);
  unlink(i);
  const size_t last = items_.size() - 1;
  if (i != last) {
    // The last one moves into the hole: its neighbours point at i now.
    items_[i] = items_[last];
    links_[i] = links_[last];
    attach(i);
    st(*items_[i].s).pool_index = int64_t(i);
  }
  items_.pop_back();
  links_.pop_back();
  state.pool_index = -1;
  bytes_ -= s.nbytes();
}

void CandidatePool::sync(Storage& s) {
  const int64_t i = st(s).pool_index;
  if (i < 0) return;
  Candidate& c = items_[size_t(i)];
  const int64_t last_access = c.last_access;
  fill(c, s);
  if (c.last_access != last_access || bucket_of(index_key(c)) != links_[size_t(i)].bucket) {
    unlink(size_t(i));
    link(size_t(i));
  }
}

namespace {

double bytes(const Candidate& c) { return double(std::max<int64_t>(c.nbytes, 1)); }

// Visits the direct neighbours of `s`: the inputs of its producer and the
// outputs of the nodes that read it.
template <typename F>
void for_each_neighbour(const Storage& s, F&& f) {  // f(Storage&)
  const StorageState& state = st(s);
  if (state.producer) {
    for (const auto& in : state.producer->inputs) f(*in);
  }
  for (const auto& w : state.consumers) {
    if (auto n = w.lock()) {
      for (const auto& ow : n->outputs)
        if (auto o = ow.lock()) f(*o);
    }
  }
}

// Evicted: no bytes here and none in the host tier, rebuilt from lineage.
bool evicted(const Storage& s) {
  const Node* p = producer(s);
  return !s.resident() && p != nullptr && p->replayable && !is_swapped(s);
}

constexpr double kInf = std::numeric_limits<double>::infinity();

// EvictionPolicy::restore_cost with the heuristic's own recompute cost
// called directly (no virtual call per candidate).
template <typename Recompute>
double cheaper_way_back(const Candidate& c, Recompute&& recompute) {
  if (c.swap_seconds <= c.cost) return c.swap_seconds;
  return std::min(recompute(c), c.swap_seconds);
}

class LocalPolicy final : public EvictionPolicy {
 public:
  StalenessBound staleness_bound() const override { return StalenessBound::kKey; }
  double score(const Candidate& c, int64_t now) override {
    return (restore_cost(c) + 1e-12) / (bytes(c) * staleness(c, now));
  }
};

class LruPolicy final : public EvictionPolicy {
 public:
  StalenessBound staleness_bound() const override { return StalenessBound::kOne; }
  double score(const Candidate& c, int64_t now) override { return 1.0 / staleness(c, now); }
};

class SizePolicy final : public EvictionPolicy {
 public:
  double score(const Candidate& c, int64_t) override { return 1.0 / bytes(c); }
};

// Exact evicted neighbourhood by graph search (expensive; the reference).
class DtrPolicy final : public EvictionPolicy {
 public:
  StalenessBound staleness_bound() const override { return StalenessBound::kKey; }
  double score(const Candidate& c, int64_t now) override {
    return (restore_cost(c) + 1e-12) / (bytes(c) * staleness(c, now));
  }
  double recompute_cost(const Candidate& c) override {
    if (!c.replayable) return kInf;
    const Storage& s = *c.s;
    double cost = c.cost;
    seen_.clear();
    stack_.clear();
    seen_.insert(&s);
    for_each_neighbour(s, [&](const Storage& n) {
      if (evicted(n) && seen_.insert(&n).second) stack_.push_back(&n);
    });
    while (!stack_.empty()) {
      const Storage* u = stack_.back();
      stack_.pop_back();
      cost += local_cost(*u);
      for_each_neighbour(*u, [&](const Storage& n) {
        if (evicted(n) && seen_.insert(&n).second) stack_.push_back(&n);
      });
    }
    return cost;
  }

 private:
  absl::flat_hash_set<const Storage*> seen_;
  std::vector<const Storage*> stack_;
};

// Memory saved per second of recompute: cost includes evicted ancestors.
class MspsPolicy final : public EvictionPolicy {
 public:
  double score(const Candidate& c, int64_t) override { return (restore_cost(c) + 1e-12) / bytes(c); }
  double recompute_cost(const Candidate& c) override {
    if (!c.replayable) return kInf;
    const Storage& s = *c.s;
    double cost = c.cost;
    seen_.clear();
    stack_.clear();
    if (const Node* p = producer(s))
      for (const auto& in : p->inputs)
        if (evicted(*in) && seen_.insert(in.get()).second) stack_.push_back(in.get());
    while (!stack_.empty()) {
      const Storage* u = stack_.back();
      stack_.pop_back();
      cost += local_cost(*u);
      if (const Node* p = producer(*u))
        for (const auto& in : p->inputs)
          if (evicted(*in) && seen_.insert(in.get()).second) stack_.push_back(in.get());
    }
    return cost;
  }

 private:
  absl::flat_hash_set<const Storage*> seen_;
  std::vector<const Storage*> stack_;
};

// h_DTR^eq: evicted storages are grouped in union-find classes that carry
// the summed cost of their members; the evicted neighbourhood of t is
// approximated by the distinct classes of t's evicted neighbours. Each
// resident storage keeps the list of its evicted neighbours' classes
// (PolicyState::evicted_neighbours), updated when a neighbour is evicted or comes
// back, so a score reads the candidate and the class table only: no graph
// walk and no hash lookup per decision.
class DtrEqPolicy final : public EvictionPolicy {
  static PolicyState& ps(Storage& s) { return state(s).policy; }

 public:
  StalenessBound staleness_bound() const override { return StalenessBound::kKey; }
  double score(const Candidate& c, int64_t now) override {
    return (cheaper_way_back(c, [this](const Candidate& x) { return eq_cost(x); }) + 1e-12) /
           (bytes(c) * staleness(c, now));
  }
  double recompute_cost(const Candidate& c) override { return eq_cost(c); }

 private:
  [[gnu::always_inline]] double eq_cost(const Candidate& c) {
    if (!c.replayable) return kInf;
    double cost = c.cost;
    int32_t roots[Candidate::kInline];
    int n_roots = 0;
    if (c.n_classes >= 0) {
      for (int i = 0; i < c.n_classes; ++i) {
        // A class id past the table is stale (cleared where lineage is rewired, Runtime::before_mutation): skip it.
        if (size_t(c.classes[i]) >= classes_.size()) continue;
        const int32_t r = find(c.classes[i]);
        bool dup = false;
        for (int j = 0; j < n_roots; ++j) dup |= roots[j] == r;
        if (!dup) {
          roots[n_roots++] = r;
          cost += classes_[size_t(r)].cost;
        }
      }
    } else {
      roots_.clear();
      for (const auto& [n, cls] : st(*c.s).policy.evicted_neighbours) {
        if (size_t(cls) >= classes_.size()) continue;
        const int32_t r = find(cls);
        if (std::find(roots_.begin(), roots_.end(), r) == roots_.end()) {
          roots_.push_back(r);
          cost += classes_[size_t(r)].cost;
        }
      }
    }
    return cost;
  }

 public:
  void on_evict(Storage& s, CandidateSync& pool) override {
    if (ps(s).remat_class >= 0) return;
    const int32_t id = new_class(local_cost(s));
    ps(s).remat_class = id;
    ps(s).evicted_neighbours.clear();
    add_member(s);
    for_each_neighbour(s, [&](Storage& n) {
      if (ps(n).remat_class >= 0) {
        unite(id, ps(n).remat_class);
      } else {
        ps(n).evicted_neighbours.emplace_back(&s, id);
        pool.sync(n);
      }
    });
  }

  void on_rematerialize(Storage& s, CandidateSync& pool) override {
    leave(s, pool);
    ps(s).evicted_neighbours.clear();
    for_each_neighbour(s, [&](Storage& n) {
      if (ps(n).remat_class >= 0) ps(s).evicted_neighbours.emplace_back(&n, ps(n).remat_class);
    });
  }
  void on_destroy(Storage& s, CandidateSync& pool) override { leave(s, pool); }

 private:
  struct Class {
    int32_t parent;
    int32_t members;
    double cost;
  };

  int32_t new_class(double cost) {
    const auto id = int32_t(classes_.size());
    classes_.push_back(Class{id, 1, cost});
    return id;
  }
  int32_t find(int32_t x) {
    while (classes_[size_t(x)].parent != x) {
      classes_[size_t(x)].parent = classes_[size_t(classes_[size_t(x)].parent)].parent;
      x = classes_[size_t(x)].parent;
    }
    return x;
  }
  void unite(int32_t a, int32_t b) {
    a = find(a);
    b = find(b);
    if (a == b) return;
    if (classes_[size_t(a)].members < classes_[size_t(b)].members) std::swap(a, b);
    classes_[size_t(b)].parent = a;
    classes_[size_t(a)].members += classes_[size_t(b)].members;
    classes_[size_t(a)].cost += classes_[size_t(b)].cost;
    // b's slot stays as a link to a until every member has left.
  }
  // A member leaves its class (rematerialized or destroyed): the class keeps
  // the other members and loses this one's cost (the paper keeps classes
  // unsplit; subtracting the cost keeps scores from drifting upwards), and
  // its resident neighbours forget it.
  void leave(Storage& s, CandidateSync& pool) {
    if (ps(s).remat_class < 0) return;
    const int32_t r = find(ps(s).remat_class);
    classes_[size_t(r)].cost = std::max(0.0, classes_[size_t(r)].cost - local_cost(s));
    ps(s).remat_class = -1;
    remove_member(s);
    for_each_neighbour(s, [&](Storage& n) { forget(n, &s, pool); });
    if (members_.empty()) {
      classes_.clear();
    } else if (classes_.size() > 4 * members_.size() + 1024) {
      rebuild(pool);  // host metadata stays proportional to what is evicted
    }
  }

  static void forget(Storage& n, const Storage* gone, CandidateSync& pool) {
    auto& en = ps(n).evicted_neighbours;
    const auto it = std::remove_if(en.begin(), en.end(), [&](const auto& p) { return p.first == gone; });
    if (it == en.end()) return;
    en.erase(it, en.end());
    pool.sync(n);
  }

  // Recomputes the classes, and the resident neighbours' lists, from the
  // evicted storages alone.
  void rebuild(CandidateSync& pool) {
    classes_.clear();
    for (Storage* u : members_) ps(*u).remat_class = new_class(local_cost(*u));
    for (Storage* u : members_) {
      for_each_neighbour(*u, [&](Storage& n) {
        if (ps(n).remat_class >= 0) unite(ps(*u).remat_class, ps(n).remat_class);
        else ps(n).evicted_neighbours.clear();
      });
    }
    for (Storage* u : members_) {
      for_each_neighbour(*u, [&](Storage& n) {
        if (ps(n).remat_class < 0) {
          ps(n).evicted_neighbours.emplace_back(u, ps(*u).remat_class);
          pool.sync(n);
        }
      });
    }
  }

  // The evicted members in a list (swap-remove, positions in
  // PolicyState::member_index), not a hash set: rebuild() walks them, and the
  // order of its unions decides how class costs are summed, so it must not
  // depend on addresses (a simulated run, Note [planner], has others).
  void add_member(Storage& s) {
    ps(s).member_index = int32_t(members_.size());
    members_.push_back(&s);
  }
  void remove_member(Storage& s) {
    const int32_t i = ps(s).member_index;
    if (i < 0) return;
    if (size_t(i) + 1 != members_.size()) {
      members_[size_t(i)] = members_.back();
      ps(*members_[size_t(i)]).member_index = i;
    }
    members_.pop_back();
    ps(s).member_index = -1;
  }

  std::vector<Class> classes_;
  std::vector<Storage*> members_;
  std::vector<int32_t> roots_;
};

}  // namespace

std::unique_ptr<EvictionPolicy> make_policy(Heuristic h) {
  switch (h) {
    case Heuristic::kDtrEq: return std::make_unique<DtrEqPolicy>();
    case Heuristic::kDtr: return std::make_unique<DtrPolicy>();
    case Heuristic::kDtrLocal: return std::make_unique<LocalPolicy>();
    case Heuristic::kLru: return std::make_unique<LruPolicy>();
    case Heuristic::kSize: return std::make_unique<SizePolicy>();
    case Heuristic::kMsps: return std::make_unique<MspsPolicy>();
  }
  return std::make_unique<DtrEqPolicy>();
}

}  // namespace dtr::remat
