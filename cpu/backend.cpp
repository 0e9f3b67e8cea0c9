// The CPU backend (core/backend.h): host memory from the caching host
// allocator, memcpy for every copy, one core's roofline, and the kernels of
// cpu/. Registered when libdtr is loaded, before any storage can exist.
#include <cstring>

#include <unistd.h>

#include "core/backend.h"
#include "cpu/host_allocator.h"
#include "cpu/kernels.h"

namespace dtr::cpu {

namespace {

void copy(void* dst, const void* src, size_t nbytes) { std::memcpy(dst, src, nbytes); }

Backend cpu_backend() {
  Backend b;
  b.name = "cpu";
  b.type = kCPU;
  b.device_count = [] { return 1; };
  b.allocator = [](int) -> Allocator* { return &host_allocator(); };
  // CPU "device memory" is physical RAM.
  b.memory_bytes = [](int) {
    return int64_t(sysconf(_SC_PHYS_PAGES)) * int64_t(sysconf(_SC_PAGE_SIZE));
  };
  b.copy_from_host = [](int, void* dst, const void* src, size_t n) { copy(dst, src, n); };
  b.copy_to_host = [](int, void* dst, const void* src, size_t n) { copy(dst, src, n); };
  b.copy_device = [](int, void* dst, int, const void* src, size_t n) { copy(dst, src, n); };
  // Note [scores]: one core's single-precision GEMM rate (AVX-512, measured
  // by benchmarks/cost_model) and a bandwidth between cache-hot (~100 GB/s)
  // and DRAM streaming for one core; 0.1 us per call.
  b.roofline = [](int) { return Roofline{.peak_flops = 90e9, .bandwidth = 30e9, .launch_seconds = 1e-7}; };
  b.register_kernels = register_kernels;
  b.host_accessible = true;
  return b;
}

[[maybe_unused]] const bool g_registered = [] {
  register_backend(cpu_backend());
  return true;
}();

}  // namespace
}  // namespace dtr::cpu
