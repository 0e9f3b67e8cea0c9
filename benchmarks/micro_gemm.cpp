// dtr::matmul against cblas_sgemm called directly (the OpenBLAS that dtr
// links) on square float32 matrices of 256, 512 and 1024; the GFLOP/s counter
// counts 2·n³ flops per multiply and is shown as a rate ("GFLOP=…/s").
//
//   ./build/benchmarks/micro_gemm --benchmark_counters_tabular=true
#include <dlfcn.h>

#include <cblas.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include <benchmark/benchmark.h>

#include "dtr/dtr.h"

namespace {

void set_gflops(benchmark::State& state, int64_t n) {
  state.counters["GFLOP"] =
      benchmark::Counter(2.0 * double(n) * double(n) * double(n) * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate);
}

void BM_DtrMatmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  dtr::manual_seed(0);
  const dtr::Tensor a = dtr::randn({n, n}), b = dtr::randn({n, n});
  for (auto _ : state) {
    dtr::Tensor c = dtr::matmul(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
  set_gflops(state, n);
}
BENCHMARK(BM_DtrMatmul)->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMicrosecond)->UseRealTime();

// libdtr links OpenBLAS privately, so the symbol is looked up in the process
// (it is loaded with libdtr) rather than linked again here.
using SgemmFn = decltype(&cblas_sgemm);
SgemmFn find_sgemm() {
  auto fn = reinterpret_cast<SgemmFn>(dlsym(RTLD_DEFAULT, "cblas_sgemm"));
  if (fn == nullptr) {
    std::fprintf(stderr, "cblas_sgemm not found in the process: %s\n", dlerror());
    std::exit(1);
  }
  return fn;
}

void BM_CblasSgemm(benchmark::State& state) {
  const int n = int(state.range(0));
  static const SgemmFn sgemm = find_sgemm();
  std::vector<float> a(size_t(n) * n), b(size_t(n) * n), c(size_t(n) * n);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = float((i * 7) % 13) / 13.0f - 0.5f;
    b[i] = float((i * 11) % 17) / 17.0f - 0.5f;
  }
  for (auto _ : state) {
    sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f,
          c.data(), n);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_gflops(state, n);
}
BENCHMARK(BM_CblasSgemm)->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
