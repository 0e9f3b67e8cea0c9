// Dispatch overhead of a tiny op: the time of dtr::add on 1-element float32
// tensors is almost all bookkeeping (registry lookup, remat acquire/release,
// output allocation, lineage record, autograd check). Reported as the time per
// iteration (ns per op) with lineage recording on, the default.
//
//   ./build/benchmarks/micro_dispatch --benchmark_min_time=0.2
#include <optional>

#include <benchmark/benchmark.h>

#include "dtr/dtr.h"

namespace {

// The default path: lineage recorded, no grad needed.
void BM_AddTiny(benchmark::State& state) {
  const dtr::Tensor a = dtr::ones({1}), b = dtr::ones({1});
  for (auto _ : state) {
    dtr::Tensor c = dtr::add(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AddTiny);

// Same op whose inputs require grad: autograd records a backward node too.
void BM_AddTinyRequiresGrad(benchmark::State& state) {
  dtr::Tensor a = dtr::ones({1}), b = dtr::ones({1});
  a.requires_grad_();
  b.requires_grad_();
  for (auto _ : state) {
    dtr::Tensor c = dtr::add(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AddTinyRequiresGrad);

// With a (generous) memory budget set: allocation goes through budget accounting.
void BM_AddTinyUnderBudget(benchmark::State& state) {
  dtr::remat::set_memory_budget(int64_t{1} << 30);
  const dtr::Tensor a = dtr::ones({1}), b = dtr::ones({1});
  for (auto _ : state) {
    dtr::Tensor c = dtr::add(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
  dtr::remat::set_memory_budget(std::nullopt);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AddTinyUnderBudget);

// A scalar-operand unary-style op and a view, for comparison.
void BM_MulScalarTiny(benchmark::State& state) {
  const dtr::Tensor a = dtr::ones({1});
  for (auto _ : state) {
    dtr::Tensor c = dtr::mul(a, 2.0);
    benchmark::DoNotOptimize(c.impl());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MulScalarTiny);

void BM_ViewTiny(benchmark::State& state) {
  const dtr::Tensor a = dtr::ones({2, 3});
  for (auto _ : state) {
    dtr::Tensor c = dtr::transpose(a, 0, 1);
    benchmark::DoNotOptimize(c.impl());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ViewTiny);

}  // namespace

BENCHMARK_MAIN();
