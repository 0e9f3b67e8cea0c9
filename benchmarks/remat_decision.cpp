// Eviction decision time: one allocation that must evict exactly one storage,
// with 1k, 10k and 100k resident candidates, per heuristic and sampling mode.
// The runtime runs alone with hand-built lineage (a chain with side
// branches) and a malloc-backed allocator, so the figure is the policy's cost.
#include <memory>
#include <vector>

#include <benchmark/benchmark.h>

#include "remat/runtime.h"

namespace dtr::remat {
namespace {

struct Graph {
  std::vector<std::shared_ptr<Storage>> storages;
  std::vector<std::shared_ptr<Node>> nodes;
};

// n storages of 256 bytes: s[i] = f(s[i-1], s[i/2]); a tenth of them evicted
// so that neighbourhoods are non-trivial.
void build(Runtime& rt, Graph& g, int64_t n) {
  auto root = std::make_shared<Storage>(256, Device());
  rt.allocate(*root);
  rt.register_constant(*root);
  Storage* rp = root.get();
  rt.release({&rp, 1});
  g.storages.push_back(root);
  for (int64_t i = 1; i < n; ++i) {
    auto s = std::make_shared<Storage>(256, Device());
    auto node = std::make_shared<Node>();
    node->op_name = "bench";
    node->inputs.push_back(g.storages[size_t(i - 1)]);
    node->inputs.push_back(g.storages[size_t(i / 2)]);
    node->outputs.push_back(s);
    node->output_nbytes.push_back(256);
    node->cost_seconds = 1e-6 * double(1 + i % 7);
    node->recompute = [](std::span<Storage* const>, std::span<Storage* const>) {};
    rt.allocate(*s);
    rt.record(node);
    s->handle_count = 1;  // held, as a user's tensor would be: no eager free
    Storage* sp = s.get();
    rt.release({&sp, 1});
    g.storages.push_back(s);
    g.nodes.push_back(node);
  }
}

void BM_EvictionDecision(benchmark::State& state) {
  const auto n = state.range(0);
  const auto heuristic = Heuristic(state.range(1));
  const auto sample = SampleMode(state.range(2));
  Runtime rt;
  rt.set_heuristic(heuristic);
  Graph g;
  build(rt, g, n);
  // Evict a tenth of the storages so the evicted neighbourhoods are
  // non-empty (sampled: the set-up is not what is measured).
  rt.set_sample_mode(SampleMode::kSqrt);
  int64_t budget = rt.stats().resident_bytes - 256 * (n / 10);
  rt.set_memory_budget(budget);
  rt.set_sample_mode(sample);
  for (auto _ : state) {
    auto s = std::make_shared<Storage>(256, Device());
    rt.allocate(*s);  // over budget by 256 bytes: one decision, one eviction
    Storage* sp = s.get();
    rt.release({&sp, 1});
    // Its bytes go; a lower budget makes the next call evict again. (Timed
    // too: pausing the timer costs more than these two steps.)
    s.reset();
    budget -= 256;
    rt.set_memory_budget(budget);
  }
  state.counters["candidates"] = double(n);
  state.SetLabel(std::string(heuristic_name(heuristic)) + (sample == SampleMode::kSqrt ? "/sqrt" : "/all"));
}

void Args(benchmark::internal::Benchmark* b) {
  for (int64_t n : {1000, 10000, 100000})
    for (int h = 0; h < 6; ++h)
      for (int s = 0; s < 2; ++s) b->Args({n, h, s});
}

BENCHMARK(BM_EvictionDecision)->Apply(Args)->Unit(benchmark::kMicrosecond)->Iterations(200);

}  // namespace
}  // namespace dtr::remat

BENCHMARK_MAIN();
