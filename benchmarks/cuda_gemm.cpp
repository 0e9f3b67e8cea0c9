// float32 GEMM through dtr on cuda:0 (cuBLAS, TF32 off), in TFLOP/s, for
// scripts/gpu-check.sh to set beside torch.matmul on the same device. Each
// size: 3 warm-up products, then the mean of 10, timed between device
// synchronizations. Prints "skipped: no CUDA device" and exits 0 without one.
#include <chrono>
#include <cstdio>

#include "core/backend.h"
#include "dtr/dtr.h"

int main() {
  const dtr::Backend* cuda = dtr::find_backend(dtr::kCUDA);
  if (cuda == nullptr || cuda->device_count() == 0) {
    std::printf("cuda_gemm: skipped: no CUDA device\n");
    return 0;
  }
  const dtr::Device device(dtr::kCUDA, 0);
  try {
    for (const int64_t n : {1024, 4096, 8192}) {
      const dtr::Tensor a = dtr::randn({n, n}, dtr::TensorOptions().device(device));
      const dtr::Tensor b = dtr::randn({n, n}, dtr::TensorOptions().device(device));
      for (int i = 0; i < 3; ++i) (void)dtr::matmul(a, b);
      cuda->synchronize(0);
      constexpr int kReps = 10;
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < kReps; ++i) (void)dtr::matmul(a, b);
      cuda->synchronize(0);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kReps;
      std::printf("dtr float32 %lldx%lldx%lld: %.1f TFLOP/s\n", static_cast<long long>(n),
                  static_cast<long long>(n), static_cast<long long>(n), 2.0 * double(n) * double(n) * double(n) / s / 1e12);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_gemm: %s\n", e.what());
    return 1;
  }
  return 0;
}
