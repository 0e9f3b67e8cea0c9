#include "remat/runtime.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/logging.h"
#include "core/op_registry.h"
#include "core/options.h"
#include "remat/policy.h"
#include "remat/trace_file.h"

namespace dtr::remat {

namespace {
std::atomic<int64_t> g_live_nodes{0};

int64_t device_memory_bytes(DeviceType) {
  // CPU "device memory" is physical RAM; the CUDA backend reports its own.
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  return int64_t(pages) * int64_t(page);
}
}  // namespace

Node::Node() { g_live_nodes.fetch_add(1, std::memory_order_relaxed); }
// Dropping the last handle on a long lineage chain would destroy storage →
// producer node → input storage → ... recursively; a 100,000-op chain would
// overflow the stack. The outermost destructor drains a worklist instead.
Node::~Node() {
  g_live_nodes.fetch_sub(1, std::memory_order_relaxed);
  static thread_local std::vector<std::shared_ptr<Storage>>* pending = nullptr;
  if (pending != nullptr) {
    for (auto& in : inputs) pending->push_back(std::move(in));
    return;
  }
  std::vector<std::shared_ptr<Storage>> work(std::make_move_iterator(inputs.begin()),
                                             std::make_move_iterator(inputs.end()));
  pending = &work;
  while (!work.empty()) {
    std::shared_ptr<Storage> s = std::move(work.back());
    work.pop_back();
    s.reset();  // may run nested ~Node, which appends to `work`
  }
  pending = nullptr;
}
int64_t live_node_count() { return g_live_nodes.load(std::memory_order_relaxed); }

namespace {
thread_local std::string_view t_current_op;
}  // namespace
CurrentOpScope::CurrentOpScope(std::string_view op_name) : previous_(t_current_op) {
  t_current_op = op_name;
}
CurrentOpScope::~CurrentOpScope() { t_current_op = previous_; }
std::string_view CurrentOpScope::current() { return t_current_op; }

struct Runtime::Impl {
  mutable std::recursive_mutex mu;
  std::optional<int64_t> budget;
  int64_t clock = 0;
  Stats stats;
  /// Resident, unlocked storages that may be evicted (Note [what may be
  /// evicted]): the eviction candidates. A storage leaves while locked.
  CandidatePool pool;
  /// Every storage whose bytes this runtime accounts for.
  absl::flat_hash_set<Storage*> tracked;
  std::array<CopyFn, kNumDeviceTypes> copy_fns{};
  Heuristic heuristic = Heuristic::kDtrEq;
  std::unique_ptr<EvictionPolicy> policy = make_policy(Heuristic::kDtrEq);
  SampleMode sample = SampleMode::kSqrt;
  int64_t min_evict_bytes = 0;
  uint64_t sample_state = 0x9E3779B97F4A7C15ull;  // fixed: decisions reproduce run to run
  bool verify = false;
  // Chrome trace events (DTR_TRACE), written as they happen; null = off.
  std::unique_ptr<TraceFile> trace;
  uint64_t trace_generation = 0;  // bumped by every file opened
  // DTR_TRACE could not be opened when the global runtime was built: thrown
  // (once) by the first op, so start-up itself cannot fail half-way.
  std::string trace_open_error;
  // Storage ids of the trace (a storage's address may be reused); live
  // tracked storages only.
  absl::flat_hash_map<const Storage*, uint64_t> trace_ids;
  uint64_t next_trace_id = 0;

  void trace_event(std::string_view json) {
    if (trace) trace->write(json);
  }
  void trace_counter() {
    if (!trace) return;
    trace_event(fmt::format(
        R"({{"name":"memory","ph":"C","ts":{:.3f},"pid":1,"tid":{},"args":{{"resident_bytes":{},"budget_bytes":{}}}}})",
        trace_now_us(), trace_thread_id(), stats.resident_bytes, budget.value_or(0)));
  }
  uint64_t trace_id(const Storage& s) {
    if (s.tracker != owner) return 0;  // not accounted here (borrowed memory)
    auto [it, fresh] = trace_ids.try_emplace(&s, 0);
    if (fresh) it->second = ++next_trace_id;
    return it->second;
  }
  // An error the runtime throws, as an instant event, flushed at once: the
  // file must hold it even if nothing catches the error.
  void trace_error(std::string_view kind, std::string_view message) {
    if (!trace) return;
    trace_event(fmt::format(
        R"({{"name":"{}","cat":"error","ph":"i","s":"g","ts":{:.3f},"pid":1,"tid":{},"args":{{"message":"{}","resident_bytes":{},"budget_bytes":{}}}}})",
        kind, trace_now_us(), trace_thread_id(), json_escape(message), stats.resident_bytes,
        budget.value_or(0)));
    trace->flush();
  }
  [[noreturn]] void throw_oom_error(std::string message) {
    trace_error("OutOfMemoryError", message);
    throw OutOfMemoryError(std::move(message));
  }
  void open_trace(const std::string& path) {
    trace.reset();  // closes the old file
    trace_ids.clear();
    owner->tracing_.store(false, std::memory_order_relaxed);
    if (path.empty()) return;
    trace = std::make_unique<TraceFile>(path);  // throws ValueError naming the path
    ++trace_generation;
    owner->tracing_.store(true, std::memory_order_relaxed);
  }
  void throw_deferred_error() {
    if (trace_open_error.empty()) return;
    std::string message = std::move(trace_open_error);
    trace_open_error.clear();
    throw ValueError(std::move(message));
  }

  static bool replayable(const Storage& s) {
    return !s.pinned && s.producer != nullptr && s.producer->replayable;
  }

  void pool_add(Storage& s) {
    if (s.lock_count > 0 || !replayable(s) || !s.resident()) return;
    pool.add(s);
  }
  void pool_remove(Storage& s) { pool.remove(s); }

  // Every lock and unlock goes through these: a locked storage is not a
  // candidate, so it leaves the pool, and comes back with its new last access.
  void lock(Storage& s) {
    if (s.lock_count++ == 0) pool_remove(s);
  }
  void unlock(Storage& s, int64_t now) {
    --s.lock_count;
    s.last_access = now;
    if (s.lock_count == 0) pool_add(s);
  }

  void track_bytes(Storage& s) {
    stats.resident_bytes += s.nbytes();
    stats.peak_bytes = std::max(stats.peak_bytes, stats.resident_bytes);
  }
  void free_bytes(Storage& s) {
    pool_remove(s);
    if (s.resident()) {
      stats.resident_bytes -= s.nbytes();
      s.free_data();
    }
  }


  // Note [scores]: the policy's score; the lowest is evicted. With kSqrt,
  // a deterministic sample of ceil(sqrt(n)) candidates (the DTR paper's
  // sampling), prefetched in batches so the misses overlap, but never fewer
  // than kMinSample: a pool of a few hundred (a typical training step) is
  // searched in full or nearly, where a sample of 20 picks poor victims that
  // come straight back (measured: train_gpt at 0.3 of its peak fails with a
  // pure sqrt(n) sample and runs with 128).
  static constexpr size_t kMinSample = 128;
  Storage* choose_victim() {
    const Candidate* best = nullptr;
    double best_score = 0;
    auto consider = [&](const Candidate& c) {
      if (c.nbytes < min_evict_bytes) return;
      const double sc = policy->score(c, clock);
      if (best == nullptr || sc < best_score) {
        best = &c;
        best_score = sc;
      }
    };
    const size_t n = pool.size();
    if (sample == SampleMode::kSqrt && n > kMinSample) {
      const auto k = std::max(kMinSample, size_t(std::ceil(std::sqrt(double(n)))));
      constexpr size_t kBatch = 16;
      size_t idx[kBatch];
      for (size_t done = 0; done < k; done += kBatch) {
        const size_t m = std::min(kBatch, k - done);
        for (size_t i = 0; i < m; ++i) {
          sample_state ^= sample_state << 13;
          sample_state ^= sample_state >> 7;
          sample_state ^= sample_state << 17;
          idx[i] = size_t((unsigned __int128)sample_state * n >> 64);  // in [0, n), no division
          __builtin_prefetch(&pool[idx[i]]);
        }
        for (size_t i = 0; i < m; ++i) consider(pool[idx[i]]);
      }
    }
    if (best == nullptr) {  // exhaustive (kAll, a small pool, or an unlucky sample)
      for (const Candidate& c : pool) consider(c);
    }
    return best ? best->s : nullptr;
  }

  // The last handle went: the bytes go at once (eager eviction). The
  // policy's classes only matter under a budget; without one they are
  // built when a budget is set (reseat_policy), which keeps the unlimited
  // case free of that bookkeeping.
  void eager_free(Storage& s) {
    free_bytes(s);
    if (budget) policy->on_evict(s, pool);
    ++stats.eager_frees;
  }

  // Rebuilds the policy's bookkeeping from scratch: every storage without
  // bytes that lineage can recompute joins its class.
  void reseat_policy() {
    policy = make_policy(heuristic);
    for (Storage* s : tracked) {
      s->remat_class = -1;
      s->evicted_neighbours.clear();
    }
    for (Storage* s : tracked) {
      if (!s->resident() && s->producer && s->producer->replayable) policy->on_evict(*s, pool);
    }
    for (Storage* s : tracked) pool.sync(*s);
  }

  void evict(Storage& s) {
    debug_rate_limited(debug_limit, "evict storage {} ({} bytes, from {}): {} bytes resident, budget {} bytes",
                       fmt::ptr(&s), s.nbytes(), s.producer ? s.producer->op_name : "?",
                       stats.resident_bytes, budget.value_or(-1));
    free_bytes(s);
    policy->on_evict(s, pool);
    ++stats.evictions;
    if (trace) {
      trace_event(fmt::format(
          R"({{"name":"evict","cat":"remat","ph":"i","s":"t","ts":{:.3f},"pid":1,"tid":{},"args":{{"storage":{},"bytes":{},"op":"{}"}}}})",
          trace_now_us(), trace_thread_id(), trace_id(s), s.nbytes(),
          s.producer ? s.producer->op_name : "?"));
      trace_counter();
    }
  }

  static uint64_t hash_bytes(const Storage& s) {
    // FNV-1a over the bytes (CPU-visible storages only).
    uint64_t h = 1469598103934665603ull;
    const auto* p = static_cast<const unsigned char*>(s.data());
    for (int64_t i = 0; i < s.nbytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h | 1;  // never 0 (0 = no hash)
  }

  [[noreturn]] void verify_failed(const Storage& s) {
    std::string trail;
    const Node* n = s.producer.get();
    for (int depth = 0; n != nullptr && depth < 16; ++depth) {
      trail += fmt::format("\n    {}{}", std::string(size_t(depth) * 2, ' '), n->op_name);
      n = n->inputs.empty() || !n->inputs[0]->producer ? nullptr : n->inputs[0]->producer.get();
    }
    std::string message = fmt::format(
        "DTR_VERIFY: rematerialized storage of {} bytes differs from its first computation "
        "(replay is not bitwise equal); op trail (producer first):{}\nplease report",
        s.nbytes(), trail);
    trace_error("InternalError", message);
    throw InternalError(std::move(message));
  }

  // " while running op 'matmul'", plus the rematerialization in progress
  // (the chain of replays from the one being prepared to the storage that
  // was asked for), for the OutOfMemoryError report.
  std::string oom_context() const {
    std::string out;
    const std::string_view op = CurrentOpScope::current();
    if (!op.empty()) out = fmt::format(" while running op '{}'", op);
    if (remat_stack == nullptr || remat_stack->empty()) return out;
    // From the top frame (the replay being prepared) down to the target.
    std::vector<std::string_view> chain;
    for (size_t i = remat_stack->size() - 1; i != kNoParent; i = (*remat_stack)[i].parent) {
      const Node* n = (*remat_stack)[i].s->producer.get();
      chain.push_back(n ? n->op_name : std::string_view("?"));
    }
    std::string names;
    for (size_t i = 0; i < chain.size(); ++i) {
      if (chain.size() > 8 && i == 4) {  // the first four and the last three
        names += fmt::format(", ... ({} more)", chain.size() - 7);
        i = chain.size() - 3;
      }
      names += fmt::format("{}'{}'", i == 0 ? "" : ", needed by ", chain[i]);
    }
    return out + fmt::format(", during a rematerialization (replaying {}; work stack depth {})", names,
                             remat_stack->size());
  }

  // Bytes held locked by the rematerialization in progress: inputs kept
  // resident for pending replays and the outputs of the replay being prepared.
  int64_t remat_locked_bytes() const {
    if (remat_stack == nullptr) return 0;
    absl::flat_hash_set<const Storage*> seen;
    int64_t bytes = 0;
    auto count = [&](const Storage* s) {
      if (s->resident() && s->lock_count > 0 && seen.insert(s).second) bytes += s->nbytes();
    };
    for (const RematFrame& f : *remat_stack)
      for (const Storage* s : f.locked) count(s);
    if (replaying != nullptr) {
      for (const auto& w : replaying->outputs)
        if (auto o = w.lock()) count(o.get());
    }
    return bytes;
  }

  [[noreturn]] void throw_oom(int64_t request) {
    // floor: bytes that cannot be evicted now (constants, and storages in
    // use); small: evictable storages below DTR_MIN_EVICT_BYTES, never chosen.
    int64_t locked = 0, unevictable = 0, floor = 0, small = 0;
    std::vector<const Storage*> fixed, held;
    for (const Storage* s : tracked) {
      if (!s->resident()) continue;
      if (s->lock_count > 0) {
        locked += s->nbytes();
        held.push_back(s);
      }
      if (!replayable(*s)) {
        unevictable += s->nbytes();
        fixed.push_back(s);
      }
      if (s->lock_count > 0 || !replayable(*s)) {
        floor += s->nbytes();
      } else if (s->nbytes() < min_evict_bytes) {
        small += s->nbytes();
      }
    }
    auto largest = [](std::vector<const Storage*>& v) {
      std::sort(v.begin(), v.end(), [](const Storage* a, const Storage* b) {
        return a->nbytes() != b->nbytes() ? a->nbytes() > b->nbytes() : a->last_access > b->last_access;
      });
      std::string out;
      for (size_t i = 0; i < std::min<size_t>(v.size(), 5); ++i) {
        const Storage* s = v[i];
        out += fmt::format("\n    {} bytes from {}", s->nbytes(),
                           s->producer ? std::string(s->producer->op_name)
                                       : std::string("a constant (parameter or input)"));
      }
      return out.empty() ? std::string(" (none)") : out;
    };
    throw_oom_error(fmt::format(
        "out of memory under the budget{}: budget {} bytes, request {} bytes, resident {} bytes, "
        "locked {} bytes, unevictable {} bytes; nothing left to evict.\n{}\nLargest unevictable "
        "storages:{}\nLargest locked (in use) storages:{}",
        oom_context(), *budget, request, stats.resident_bytes, locked, unevictable,
        oom_advice(request, floor, unevictable, small), largest(fixed), largest(held)));
  }

  // What would help, from the never-evictable floor (constants plus
  // storages in use) against the budget.
  std::string oom_advice(int64_t request, int64_t floor, int64_t constants, int64_t small) const {
    const int64_t need = floor + request;
    std::string out = fmt::format(
        "Never-evictable floor: {} bytes (constants {} bytes, the rest locked in use); floor plus "
        "request: {} bytes, and no budget below that can run this op at this point.",
        floor, constants, need);
    const int64_t held = remat_locked_bytes();
    const std::string other =
        heuristic == Heuristic::kMsps ? std::string("dtr_eq") : std::string("msps");
    if (constants + request > *budget) {
      out += fmt::format(
          " The constants alone (parameters, inputs, optimizer state: {} bytes) and the request "
          "exceed the budget: no eviction heuristic can fit this; raise the budget to at least {} "
          "bytes or hold fewer constants.",
          constants, need);
    } else if (held > 0) {
      out += fmt::format(
          " {} of the locked bytes are held by the rematerialization in progress (inputs kept for "
          "pending replays), so the floor is not the limit by itself: another heuristic may fit "
          "(DTR_HEURISTIC={} or remat::Runtime::set_heuristic; now {}), or raise the budget to at "
          "least {} bytes.",
          held, other, heuristic_name(heuristic), need);
    } else {
      out += fmt::format(" Raise the budget to at least {} bytes", need);
      if (small > 0) {
        out += fmt::format(", or lower DTR_MIN_EVICT_BYTES ({} bytes): {} bytes of storages below it "
                           "are never evicted",
                           min_evict_bytes, small);
      }
      out += ".";
    }
    return out;
  }

  void make_room(int64_t request) {
    if (!budget) return;
    while (stats.resident_bytes + request > *budget) {
      Storage* victim = choose_victim();
      if (victim == nullptr) throw_oom(request);
      evict(*victim);
    }
  }

  // Freed blocks an allocator caches are memory too: under a budget,
  // resident plus cached bytes stay within it (Note [hard budget]), the
  // cached ones beyond it going back to the system (cpu/host_allocator.h).
  // Without a budget, or within it, the cache keeps its blocks.
  void trim_cache(Allocator& alloc) {
    if (!budget) return;
    const int64_t over = stats.resident_bytes + alloc.cached_bytes() - *budget;
    if (over > 0) alloc.release_cached(over);
  }

  void allocate(Storage& s) {
    DTR_INTERNAL_ASSERT(!s.resident(), "allocate on a resident storage");
    make_room(s.nbytes());
    Allocator* alloc = get_allocator(s.device().type);
    DTR_CHECK(alloc != nullptr, NotImplementedError, "no allocator for device {}",
              s.device().str());
    // Under a budget, the allocator keeps cached no more than the budget
    // leaves beside the resident bytes and these (trim_cache).
    void* p = budget ? alloc->allocate_within(size_t(s.nbytes()),
                                              std::max<int64_t>(0, *budget - stats.resident_bytes - s.nbytes()))
                     : alloc->allocate(size_t(s.nbytes()));
    if (p == nullptr) {
      throw_oom_error(fmt::format("{} could not allocate {} bytes ({} bytes resident){}",
                                  s.device().str(), s.nbytes(), stats.resident_bytes,
                                  oom_context()));
    }
    s.set_data(p, alloc);
    if (s.tracker == nullptr) {
      s.tracker = owner;
      tracked.insert(&s);
    }
    track_bytes(s);
  }

  // Unlocks a rematerialization frame's inputs once its replay is done. An
  // input no user holds (an intermediate brought back only to rebuild
  // something else) is freed as soon as nothing uses it: eager eviction, as
  // for any storage whose last handle went (DTR paper §3), instead of
  // sitting in the budget until the heuristic picks it.
  void unlock_all(std::vector<Storage*>& v, int64_t now) {
    for (Storage* s : v) {
      unlock(*s, now);
      if (s->lock_count == 0 && s->handle_count.load() == 0 && replayable(*s) && s->resident())
        eager_free(*s);
    }
    v.clear();
  }

  // Rematerializes `target` and everything it needs, with an explicit work
  // stack: a chain of 100,000 evicted ops needs no native recursion.
  void rematerialize(Storage& target) {
    using Frame = RematFrame;
    std::vector<Frame> stack;
    std::vector<Storage*> missing;
    stack.push_back(Frame{&target, kNoParent});
    // The OutOfMemoryError report reads the stack while this runs.
    struct StackScope {
      std::vector<RematFrame>*& slot;
      std::vector<RematFrame>* previous;
      ~StackScope() { slot = previous; }
    } stack_scope{remat_stack, remat_stack};
    remat_stack = &stack;
    try {
      while (!stack.empty()) {
        const size_t top = stack.size() - 1;
        Storage* s = stack[top].s;
        if (s->resident()) {  // a sibling output of an earlier replay
          finish_frame(stack);
          continue;
        }
        Node* node = s->producer.get();
        DTR_INTERNAL_ASSERT(node != nullptr && node->replayable,
                            "storage of {} bytes is not resident and has no replayable producer",
                            s->nbytes());
        // Inputs that are resident stay unlocked (evictable) while the
        // missing ones are rematerialized, so locked bytes do not pile up
        // along a deep recomputation; only a finished input is held, by the
        // frame that reads it. Before the replay every input is checked
        // again: one evicted meanwhile gets its own frame. Each round holds
        // at least one more input, so this ends.
        //
        // The most recently produced missing input goes first (on top): an
        // earlier input is often on its lineage (a residual block's skip
        // input feeds its other branch), so it comes back as a by-product,
        // unlocked, instead of being held while the other branch is rebuilt.
        missing.clear();
        for (const auto& in : node->inputs)
          if (!in->resident()) missing.push_back(in.get());
        if (!missing.empty()) {
          std::stable_sort(missing.begin(), missing.end(), [](const Storage* a, const Storage* b) {
            return a->producer->tick < b->producer->tick;
          });
          for (Storage* in : missing) stack.push_back(Frame{in, top});
          continue;
        }
        for (const auto& in : node->inputs) {
          lock(*in);
          stack[top].locked.push_back(in.get());
        }
        replay(*node);
        finish_frame(stack);
      }
    } catch (...) {
      for (auto& f : stack) unlock_all(f.locked, clock);
      throw;
    }
  }

  static constexpr size_t kNoParent = ~size_t{0};
  struct RematFrame {
    Storage* s;
    size_t parent;  // index of the frame whose replay needs s (kNoParent for target)
    std::vector<Storage*> locked;  // inputs held resident for this frame's replay
  };
  /// The work stack of the rematerialization in progress, or null; the node
  /// whose replay is allocating its outputs, or null. Read by throw_oom.
  std::vector<RematFrame>* remat_stack = nullptr;
  const Node* replaying = nullptr;

  // Pops the top frame (whose storage is resident) and hands it, locked, to
  // its parent frame: the one whose replay reads it. (Not simply the frame
  // below, which may be a sibling input: it would unlock this storage after
  // its own replay, and the parent's output allocation could then evict it.)
  template <typename Frames>
  void finish_frame(Frames& stack) {
    auto& f = stack.back();
    Storage* s = f.s;
    const size_t parent = f.parent;
    unlock_all(f.locked, clock);
    stack.pop_back();
    if (parent != kNoParent) {
      lock(*s);
      stack[parent].locked.push_back(s);
    }
  }

  void replay(Node& node) {
    std::vector<Storage*> outs;
    std::vector<std::shared_ptr<Storage>> keep;  // live outputs and scratch
    std::vector<std::unique_ptr<Storage>> scratch;
    outs.reserve(node.outputs.size());
    int64_t restored = 0;
    replaying = &node;
    try {
      for (const auto& w : node.outputs) {
        std::shared_ptr<Storage> o = w.lock();
        DTR_INTERNAL_ASSERT(o == nullptr || o->producer.get() == &node,
                            "lineage output no longer produced by its node");
        if (o != nullptr && !o->resident()) {
          allocate(*o);
          lock(*o);
          ++restored;
          outs.push_back(o.get());
          keep.push_back(std::move(o));
        } else {
          // Gone, or resident (possibly being read elsewhere): replay into scratch.
          const Storage* ref = o ? o.get() : nullptr;
          DTR_INTERNAL_ASSERT(ref != nullptr || !node.outputs.empty(), "no outputs");
          // A gone output's size is unknown here; the node remembers it.
          const int64_t nbytes = ref ? ref->nbytes() : node_output_bytes(node, outs.size());
          auto tmp = std::make_unique<Storage>(nbytes, ref ? ref->device() : node_device(node));
          allocate(*tmp);
          lock(*tmp);
          outs.push_back(tmp.get());
          scratch.push_back(std::move(tmp));
        }
      }
      replaying = nullptr;
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<Storage*> ins;
      ins.reserve(node.inputs.size());
      for (const auto& in : node.inputs) ins.push_back(in.get());
      node.recompute(ins, outs);
      const auto t1 = std::chrono::steady_clock::now();
      stats.recompute_seconds_measured += std::chrono::duration<double>(t1 - t0).count();
      stats.recompute_seconds_estimated += node.cost_seconds;
      ++stats.recomputed_ops;
      stats.recomputed_flops += node.flops;
      stats.rematerializations += restored;
      if (trace) {
        std::vector<uint64_t> ids;
        int64_t bytes = 0;
        for (const auto& o : keep) {
          ids.push_back(trace_id(*o));
          bytes += o->nbytes();
        }
        trace_event(fmt::format(
            R"({{"name":"rematerialize {}","cat":"remat","ph":"X","ts":{:.3f},"dur":{:.3f},"pid":1,"tid":{},"args":{{"storages":[{}],"bytes":{}}}}})",
            node.op_name, trace_us(t0), std::chrono::duration<double, std::micro>(t1 - t0).count(),
            trace_thread_id(), fmt::join(ids, ","), bytes));
        trace_counter();
      }
    } catch (...) {
      replaying = nullptr;
      // The outputs' bytes were never written: free them (they go back to
      // evicted; none of them is in the pool while locked).
      for (Storage* o : outs) --o->lock_count;
      for (auto& o : keep) free_bytes(*o);
      for (auto& t : scratch) free_bytes(*t);
      throw;
    }
    for (auto& o : keep) {
      if (verify && o->verify_hash != 0 && o->device().is_cpu() && hash_bytes(*o) != o->verify_hash)
        verify_failed(*o);
      policy->on_rematerialize(*o, pool);
      debug_rate_limited(debug_limit, "rematerialized storage {} ({} bytes) by replaying {}",
                         fmt::ptr(o.get()), o->nbytes(), node.op_name);
    }
    for (Storage* o : outs) unlock(*o, clock);
    for (auto& t : scratch) free_bytes(*t);
  }

  // Note [mutation], the cheap way: walks the lineage downstream of a
  // mutated constant through `readers`. A result that a user holds, or that
  // an op is using now, keeps its bytes and becomes a constant. A result no
  // user holds is only there for others' lineage, which this detach cuts:
  // its bytes (if any) are freed and its lineage dropped, and the walk goes
  // on through its readers. A result with no bytes that a user still holds
  // would need the old value: fail. Returns false, changing nothing, then.
  bool detach_dependants(const std::vector<std::shared_ptr<Node>>& readers) {
    std::vector<std::shared_ptr<Node>> work = readers;
    absl::flat_hash_set<const Node*> seen;
    std::vector<std::shared_ptr<Storage>> to_pin, to_drop;
    while (!work.empty()) {
      std::shared_ptr<Node> n = std::move(work.back());
      work.pop_back();
      if (!seen.insert(n.get()).second) continue;
      for (const auto& w : n->outputs) {
        std::shared_ptr<Storage> o = w.lock();
        if (!o || o->producer.get() != n.get()) continue;
        const bool held = o->handle_count.load() > 0;
        if (o->resident() && (held || o->lock_count > 0)) {
          to_pin.push_back(std::move(o));
          continue;
        }
        if (held) return false;
        for (const auto& cw : o->consumers)
          if (auto c = cw.lock()) work.push_back(std::move(c));
        to_drop.push_back(std::move(o));
      }
    }
    for (auto& o : to_pin) {
      pool_remove(*o);
      o->pinned = true;
      o->producer.reset();
    }
    for (auto& o : to_drop) {
      if (o->resident()) {
        free_bytes(*o);
        ++stats.eager_frees;
      } else {
        policy->on_destroy(*o, pool);  // leaves its equivalence class
      }
      o->producer.reset();
    }
    return true;
  }

  // Sizes of outputs that no longer exist are recorded on the node.
  static int64_t node_output_bytes(const Node& node, size_t i) { return node.output_nbytes.at(i); }
  static Device node_device(const Node& node) { return node.device; }

  Runtime* owner = nullptr;
  // Budget changes, evictions, rematerializations (Note [debug logging]).
  LogRateLimit debug_limit{100};
};

Runtime& Runtime::global() {
  // Note [environment at start-up]: global_options() does not throw for a
  // malformed variable (the first op reports it), so this initializer only
  // applies values already checked; should anything in it throw, nothing is
  // kept and the next call starts afresh.
  static Runtime* rt = [] {
    auto r = std::make_unique<Runtime>();  // never destroyed: storages may outlive static destruction
    const Options& o = global_options();
    r->set_memory_budget(o.memory_budget.for_device(Device(kCPU), true).resolve(device_memory_bytes(kCPU)));
    r->set_heuristic(o.heuristic);
    r->set_sample_mode(o.sample);
    r->set_min_evict_bytes(o.min_evict_bytes);
    r->set_cost_model(o.cost);
    r->set_verify(o.verify);
    if (!o.trace_path.empty()) {
      try {
        r->set_trace_path(o.trace_path);
        // Writes the closing "]" (an uncaught exception closes it from the
        // std::terminate hook of remat/trace_file.cpp instead).
        std::atexit([] { Runtime::global().set_trace_path(""); });
      } catch (const ValueError& e) {
        r->impl_->trace_open_error = e.what();
      }
    }
    return r.release();
  }();
  return *rt;
}

Runtime::Runtime() : impl_(std::make_unique<Impl>()) {
  impl_->owner = this;
  impl_->copy_fns[size_t(kCPU)] = [](void* dst, const void* src, size_t n) {
    std::memcpy(dst, src, n);
  };
}

Runtime::~Runtime() {
  std::lock_guard lock(impl_->mu);
  for (Storage* s : impl_->tracked) s->tracker = nullptr;
  impl_->trace.reset();
}

void Runtime::set_memory_budget(std::optional<int64_t> bytes) {
  DTR_CHECK(!bytes || *bytes > 0, ValueError,
            "set_memory_budget: the budget must be positive, got {} bytes", bytes.value_or(0));
  std::lock_guard lock(impl_->mu);
  const bool was_unlimited = !impl_->budget;
  debug_rate_limited(impl_->debug_limit, "memory budget {} -> {} bytes (-1: unlimited), {} bytes resident",
                     impl_->budget.value_or(-1), bytes.value_or(-1), impl_->stats.resident_bytes);
  impl_->budget = bytes;
  impl_->stats.budget_bytes = bytes.value_or(-1);
  if (bytes && was_unlimited) impl_->reseat_policy();
  if (bytes) {
    try {
      impl_->make_room(0);
    } catch (const OutOfMemoryError&) {
      logger().warn("new budget {} bytes is below the unevictable resident bytes ({} resident)",
                    *bytes, impl_->stats.resident_bytes);
    }
    // Blocks cached while unlimited (or under a larger budget), and those
    // just evicted, go back beyond the new budget now.
    for (int t = 0; t < kNumDeviceTypes; ++t)
      if (Allocator* a = get_allocator(DeviceType(t))) impl_->trim_cache(*a);
  }
}

std::optional<int64_t> Runtime::memory_budget() const {
  std::lock_guard lock(impl_->mu);
  return impl_->budget;
}

void Runtime::acquire(std::span<Storage* const> storages) {
  std::lock_guard lock(impl_->mu);
  impl_->throw_deferred_error();
  size_t done = 0;
  try {
    for (; done < storages.size(); ++done) {
      Storage* s = storages[done];
      if (!s->resident()) impl_->rematerialize(*s);
      impl_->lock(*s);
    }
  } catch (...) {
    for (size_t i = 0; i < done; ++i) impl_->unlock(*storages[i], impl_->clock);
    throw;
  }
}

void Runtime::release(std::span<Storage* const> storages) {
  std::lock_guard lock(impl_->mu);
  for (Storage* s : storages) {
    impl_->unlock(*s, impl_->clock);
    if (s->lock_count == 0 && s->handle_count.load() == 0 && Impl::replayable(*s) && s->resident()) {
      impl_->eager_free(*s);
    }
  }
}

void Runtime::allocate(Storage& s) {
  std::lock_guard lock(impl_->mu);
  impl_->throw_deferred_error();
  impl_->allocate(s);
  impl_->lock(s);
}

// Note [borrowed storage]. The bytes of a from_blob tensor are the user's:
// PyTorch's from_blob aliases them, so a write to the buffer is a write to
// the tensor, and the program may refill the buffer (a staging buffer) at
// any time. Lineage must therefore never read a borrowed storage later: a
// replay would compute from whatever the buffer holds then, and a
// rematerialized value would silently differ (Note [replay equals
// original]). A node that reads a borrowed storage directly is not kept:
// its outputs are pinned constants with no lineage (they hold the values
// computed from the buffer as it was when the op ran), and everything
// downstream is rebuilt from those stable copies. The cost is that these
// direct dependants count against the budget and are never evicted.
// Views of a borrowed tensor share its storage, so they are covered; an
// in-place op on one writes into the buffer (as in PyTorch) like any
// constant's (Note [mutation]).
void Runtime::record(const std::shared_ptr<Node>& node) {
  std::lock_guard lock(impl_->mu);
  node->tick = ++impl_->clock;
  const bool reads_borrowed = std::any_of(node->inputs.begin(), node->inputs.end(),
                                          [](const auto& in) { return in->borrowed; });
  for (const auto& w : node->outputs) {
    std::shared_ptr<Storage> o = w.lock();
    if (!o) continue;
    if (reads_borrowed) {
      impl_->pool_remove(*o);
      o->pinned = true;
      o->producer.reset();
      o->last_access = impl_->clock;
      continue;
    }
    if (impl_->verify && o->resident() && o->device().is_cpu()) o->verify_hash = Impl::hash_bytes(*o);
    o->producer = node;
    o->last_access = impl_->clock;
    if (!node->replayable) o->pinned = true;
    impl_->pool_add(*o);
  }
  if (reads_borrowed) return;  // the node is dropped: nothing reads through it
  for (const auto& in : node->inputs) {
    auto& c = in->consumers;
    if (c.size() == c.capacity() && c.size() >= 8) {
      c.erase(std::remove_if(c.begin(), c.end(), [](const auto& w) { return w.expired(); }),
              c.end());
    }
    c.push_back(node);
  }
}

void Runtime::register_constant(Storage& s) {
  std::lock_guard lock(impl_->mu);
  // Its bytes must be here for good: bring them back before dropping lineage.
  if (!s.resident() && s.producer != nullptr) impl_->rematerialize(s);
  impl_->pool_remove(s);
  s.pinned = true;
  s.producer.reset();
}

std::shared_ptr<Storage> Runtime::before_mutation(const std::shared_ptr<Storage>& s, bool keep_old) {
  std::lock_guard lock(impl_->mu);
  std::vector<std::shared_ptr<Node>> readers;
  for (const auto& w : s->consumers)
    if (auto n = w.lock()) readers.push_back(std::move(n));
  s->consumers.clear();
  const bool has_lineage = Impl::replayable(*s);
  if (readers.empty() && !has_lineage && !keep_old) return nullptr;

  // A constant (a parameter under an optimizer step) whose readers' results
  // are still resident: rather than copy its old bytes, detach those results
  // from their lineage (they become constants) when no evicted tensor a user
  // holds needs the old value. Detaching costs no bytes now (the results are
  // resident already); it only takes them out of the evictable pool, while
  // a copy would add an unevictable storage at once.
  if (!has_lineage && !keep_old && impl_->detach_dependants(readers)) {
    impl_->pool_remove(*s);
    s->evicted_neighbours.clear();
    return nullptr;
  }

  // The old bytes move to a new storage `old`; lineage that read them now
  // reads `old`. If `s` was computed by a replayable op, `old` inherits that
  // lineage and needs no bytes now; otherwise (a constant) it gets a copy.
  auto old = std::make_shared<Storage>(s->nbytes(), s->device());
  if (has_lineage) {
    old->producer = s->producer;
    for (auto& w : old->producer->outputs) {
      if (w.lock() == s) w = old;
    }
  } else {
    const CopyFn copy = impl_->copy_fns[size_t(s->device().type)];
    DTR_INTERNAL_ASSERT(copy != nullptr, "no copy function for {}", s->device().str());
    impl_->allocate(*old);
    copy(old->data(), s->data(), size_t(s->nbytes()));
    old->pinned = true;
  }
  for (auto& n : readers) {
    for (auto& in : n->inputs)
      if (in == s) in = old;
    old->consumers.push_back(n);
  }
  impl_->pool_remove(*s);
  s->producer.reset();
  // s has neither readers nor a producer now: its evicted neighbours are
  // old's, and a later in-place op starts its list afresh.
  s->evicted_neighbours.clear();
  return old;
}

void Runtime::on_last_handle(Storage& s) {
  std::lock_guard lock(impl_->mu);
  if (s.resident() && s.lock_count == 0 && Impl::replayable(s)) {
    impl_->eager_free(s);
  }
}

void Runtime::set_copy_fn(DeviceType device, CopyFn fn) {
  std::lock_guard lock(impl_->mu);
  impl_->copy_fns[size_t(device)] = fn;
}

void Runtime::set_heuristic(Heuristic h) {
  std::lock_guard lock(impl_->mu);
  impl_->heuristic = h;
  impl_->reseat_policy();
}

Heuristic Runtime::heuristic() const {
  std::lock_guard lock(impl_->mu);
  return impl_->heuristic;
}

void Runtime::set_sample_mode(SampleMode m) {
  std::lock_guard lock(impl_->mu);
  impl_->sample = m;
}

void Runtime::set_min_evict_bytes(int64_t bytes) {
  DTR_CHECK(bytes >= 0, ValueError, "set_min_evict_bytes: expected >= 0 bytes, got {}", bytes);
  std::lock_guard lock(impl_->mu);
  impl_->min_evict_bytes = bytes;
}

void Runtime::set_verify(bool on) {
  std::lock_guard lock(impl_->mu);
  impl_->verify = on;
}

void Runtime::set_trace_path(const std::string& path) {
  std::lock_guard lock(impl_->mu);
  impl_->trace_open_error.clear();
  impl_->open_trace(path);
}

void Runtime::flush_trace() {
  std::lock_guard lock(impl_->mu);
  if (impl_->trace) impl_->trace->flush();
}

namespace {
// "[2, 3] float32, [3] int64"
std::string metas_str(std::span<const TensorMeta> metas) {
  std::string out;
  for (const TensorMeta& m : metas) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {}", shape_str(m.shape), dtype_name(m.dtype));
  }
  return out;
}
}  // namespace

void Runtime::trace_op(std::string_view op, std::chrono::steady_clock::time_point start,
                       std::span<const TensorMeta> input_metas, std::span<Storage* const> inputs,
                       std::span<const TensorMeta> output_metas, std::span<Storage* const> outputs) {
  std::lock_guard lock(impl_->mu);
  if (!impl_->trace) return;
  const auto end = std::chrono::steady_clock::now();
  if (start == std::chrono::steady_clock::time_point{}) start = end;  // tracing began mid-op
  std::vector<uint64_t> in_ids, out_ids;
  for (const Storage* s : inputs) in_ids.push_back(impl_->trace_id(*s));
  int64_t out_bytes = 0;
  for (const Storage* s : outputs) {
    out_ids.push_back(impl_->trace_id(*s));
    out_bytes += s->nbytes();
  }
  impl_->trace_event(fmt::format(
      R"({{"name":"{}","cat":"op","ph":"X","ts":{:.3f},"dur":{:.3f},"pid":1,"tid":{},"args":{{"tick":{},"inputs":"{}","outputs":"{}","output_bytes":{},"input_storages":[{}],"output_storages":[{}]}}}})",
      op, trace_us(start), std::chrono::duration<double, std::micro>(end - start).count(),
      trace_thread_id(), impl_->clock, metas_str(input_metas), metas_str(output_metas), out_bytes,
      fmt::join(in_ids, ","), fmt::join(out_ids, ",")));
  impl_->trace_counter();
}

uint64_t Runtime::trace_scope_begin(std::string_view name) {
  std::lock_guard lock(impl_->mu);
  if (!impl_->trace) return 0;
  impl_->trace_event(fmt::format(
      R"({{"name":"{}","cat":"scope","ph":"B","ts":{:.3f},"pid":1,"tid":{}}})", json_escape(name),
      trace_now_us(), trace_thread_id()));
  return impl_->trace_generation;
}

void Runtime::trace_scope_end(std::string_view name, uint64_t generation) {
  std::lock_guard lock(impl_->mu);
  if (!impl_->trace || generation != impl_->trace_generation) return;
  impl_->trace_event(fmt::format(
      R"({{"name":"{}","cat":"scope","ph":"E","ts":{:.3f},"pid":1,"tid":{}}})", json_escape(name),
      trace_now_us(), trace_thread_id()));
}

int64_t Runtime::clock() const {
  std::lock_guard lock(impl_->mu);
  return impl_->clock;
}

Stats Runtime::stats() const {
  std::lock_guard lock(impl_->mu);
  Stats s = impl_->stats;
  s.metadata_nodes = live_node_count();
  s.live_storages = int64_t(impl_->tracked.size());
  return s;
}

void Runtime::reset_stats() {
  std::lock_guard lock(impl_->mu);
  const Stats old = impl_->stats;
  impl_->stats = Stats{};
  impl_->stats.budget_bytes = old.budget_bytes;
  impl_->stats.resident_bytes = old.resident_bytes;
  impl_->stats.peak_bytes = old.resident_bytes;
}

void Runtime::on_storage_destroyed(Storage& s) {
  std::lock_guard lock(impl_->mu);
  impl_->policy->on_destroy(s, impl_->pool);
  impl_->tracked.erase(&s);
  impl_->trace_ids.erase(&s);
  impl_->free_bytes(s);
  s.tracker = nullptr;
}

}  // namespace dtr::remat
