#include "remat/policy.h"

#include <algorithm>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include "remat/lineage.h"

namespace dtr::remat {

double local_cost(const Storage& s) { return s.producer ? s.producer->cost_seconds : 0.0; }

namespace {

double staleness(const Storage& s, int64_t now) { return double(std::max<int64_t>(now - s.last_access, 0) + 1); }
double bytes(const Storage& s) { return double(std::max<int64_t>(s.nbytes(), 1)); }

// Visits the direct neighbours of `s`: the inputs of its producer and the
// outputs of the nodes that read it.
template <typename F>
void for_each_neighbour(const Storage& s, F&& f) {
  if (s.producer) {
    for (const auto& in : s.producer->inputs) f(*in);
  }
  for (const auto& w : s.consumers) {
    if (auto n = w.lock()) {
      for (const auto& ow : n->outputs)
        if (auto o = ow.lock()) f(*o);
    }
  }
}

bool evicted(const Storage& s) {
  return !s.resident() && s.producer != nullptr && s.producer->replayable;
}

class LocalPolicy final : public EvictionPolicy {
 public:
  double score(const Storage& s, int64_t now) override {
    return (local_cost(s) + 1e-12) / (bytes(s) * staleness(s, now));
  }
};

class LruPolicy final : public EvictionPolicy {
 public:
  double score(const Storage& s, int64_t now) override { return 1.0 / staleness(s, now); }
};

class SizePolicy final : public EvictionPolicy {
 public:
  double score(const Storage& s, int64_t) override { return 1.0 / bytes(s); }
};

// Exact evicted neighbourhood by graph search (expensive; the reference).
class DtrPolicy final : public EvictionPolicy {
 public:
  double score(const Storage& s, int64_t now) override {
    double cost = local_cost(s);
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
    return (cost + 1e-12) / (bytes(s) * staleness(s, now));
  }

 private:
  absl::flat_hash_set<const Storage*> seen_;
  std::vector<const Storage*> stack_;
};

// Memory saved per second of recompute: cost includes evicted ancestors.
class MspsPolicy final : public EvictionPolicy {
 public:
  double score(const Storage& s, int64_t) override {
    double cost = local_cost(s);
    seen_.clear();
    stack_.clear();
    if (s.producer)
      for (const auto& in : s.producer->inputs)
        if (evicted(*in) && seen_.insert(in.get()).second) stack_.push_back(in.get());
    while (!stack_.empty()) {
      const Storage* u = stack_.back();
      stack_.pop_back();
      cost += local_cost(*u);
      if (u->producer)
        for (const auto& in : u->producer->inputs)
          if (evicted(*in) && seen_.insert(in.get()).second) stack_.push_back(in.get());
    }
    return (cost + 1e-12) / bytes(s);
  }

 private:
  absl::flat_hash_set<const Storage*> seen_;
  std::vector<const Storage*> stack_;
};

// h_DTR^eq: evicted storages are grouped in union-find classes that carry
// the summed cost of their members; the evicted neighbourhood of t is
// approximated by the distinct classes of t's evicted neighbours.
class DtrEqPolicy final : public EvictionPolicy {
 public:
  double score(const Storage& s, int64_t now) override {
    double cost = local_cost(s);
    roots_.clear();
    for_each_neighbour(s, [&](const Storage& n) {
      auto it = member_.find(&n);
      if (it == member_.end()) return;
      const int32_t r = find(it->second);
      if (std::find(roots_.begin(), roots_.end(), r) == roots_.end()) {
        roots_.push_back(r);
        cost += classes_[size_t(r)].cost;
      }
    });
    return (cost + 1e-12) / (bytes(s) * staleness(s, now));
  }

  void on_evict(Storage& s) override {
    const int32_t id = new_class(local_cost(s));
    member_[&s] = id;
    for_each_neighbour(s, [&](const Storage& n) {
      auto it = member_.find(&n);
      if (it != member_.end()) unite(id, it->second);
    });
  }

  void on_rematerialize(Storage& s) override { leave(s); }
  void on_destroy(Storage& s) override { leave(s); }

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
  // unsplit; subtracting the cost keeps scores from drifting upwards).
  void leave(Storage& s) {
    auto it = member_.find(&s);
    if (it == member_.end()) return;
    const int32_t r = find(it->second);
    classes_[size_t(r)].cost = std::max(0.0, classes_[size_t(r)].cost - local_cost(s));
    member_.erase(it);
    if (member_.empty()) {
      classes_.clear();
    } else if (classes_.size() > 4 * member_.size() + 1024) {
      rebuild();  // host metadata stays proportional to what is evicted
    }
  }

  // Recomputes the classes from the evicted storages alone.
  void rebuild() {
    classes_.clear();
    for (auto& [st, id] : member_) id = new_class(local_cost(*st));
    for (auto& [st, id] : member_) {
      for_each_neighbour(*st, [&](const Storage& n) {
        auto it = member_.find(&n);
        if (it != member_.end()) unite(id, it->second);
      });
    }
  }

  std::vector<Class> classes_;
  absl::flat_hash_map<const Storage*, int32_t> member_;
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
