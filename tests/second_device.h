// A second device for the test suite, without a GPU: device type
// "privateuseone" (PyTorch's PrivateUse1) with two devices, backed by host
// memory through allocators of their own, running the CPU kernels (or,
// with DTR_TEST_DEVICE_KERNELS=cuda, the CUDA kernels under host
// emulation wherever they exist). It
// proves the backend seam (core/backend.h): tensors on two devices at once,
// separate budgets, copies across devices through the backends' copies. Its
// memory is marked not host-accessible, so host-side readers (DTR_VERIFY,
// printing, to_vector) must go through copy_to_host as on a GPU.
#pragma once

#include <atomic>
#include <cstdlib>
#include <cstring>

#include <string>
#include <string_view>
#include <vector>

#include "core/backend.h"
#include "core/op_registry.h"
#if DTR_HAVE_CUDA
#include "cuda/emulation.h"
#endif

namespace dtr::testing {

inline constexpr int kSecondDeviceCount = 2;
inline constexpr int64_t kSecondDeviceMemoryBytes = int64_t{1} << 30;

/// Counts its live bytes and allocations.
class SecondDeviceAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    const size_t rounded = ((nbytes == 0 ? 1 : nbytes) + 63) & ~size_t{63};
    void* p = std::aligned_alloc(64, rounded);
    if (p != nullptr) {
      live_bytes += int64_t(nbytes);
      ++allocations;
    }
    return p;
  }
  void deallocate(void* p, size_t nbytes) override {
    live_bytes -= int64_t(nbytes);
    std::free(p);
  }
  std::atomic<int64_t> live_bytes{0};
  std::atomic<int64_t> allocations{0};
};

/// Calls of the backend's copy slots (what crossed the seam).
struct SecondDeviceCounters {
  std::atomic<int64_t> from_host{0}, to_host{0}, device{0};
};

/// With DTR_TEST_DEVICE_KERNELS=cuda (in a build with the CUDA backend), the
/// device runs the CUDA kernels under host emulation wherever one exists
/// (Note [host emulation of CUDA kernels]); these are their ops, else empty.
inline std::vector<std::string>& second_device_cuda_ops() {
  static auto* ops = new std::vector<std::string>;
  return *ops;
}
/// Whether DTR_TEST_DEVICE_KERNELS asks for the CUDA kernels.
inline bool second_device_wants_cuda_kernels() {
  const char* v = std::getenv("DTR_TEST_DEVICE_KERNELS");
  return v != nullptr && std::string_view(v) == "cuda";
}

inline SecondDeviceAllocator& second_device_allocator(int index) {
  static SecondDeviceAllocator* a = new SecondDeviceAllocator[kSecondDeviceCount];
  return a[index];
}
inline SecondDeviceCounters& second_device_counters() {
  static SecondDeviceCounters* c = new SecondDeviceCounters;
  return *c;
}

/// Registers the backend on first use; returns privateuseone:`index`.
inline Device second_device(int index = 0) {
  static const bool registered = [] {
    Backend b;
    b.name = "second device (test)";
    b.type = kPrivateUse1;
    b.device_count = [] { return kSecondDeviceCount; };
    b.allocator = [](int i) -> Allocator* { return &second_device_allocator(i); };
    b.memory_bytes = [](int) { return kSecondDeviceMemoryBytes; };
    b.copy_from_host = [](int, void* dst, const void* src, size_t n) {
      ++second_device_counters().from_host;
      std::memcpy(dst, src, n);
    };
    b.copy_to_host = [](int, void* dst, const void* src, size_t n) {
      ++second_device_counters().to_host;
      std::memcpy(dst, src, n);
    };
    b.copy_device = [](int, void* dst, int, const void* src, size_t n) {
      ++second_device_counters().device;
      std::memcpy(dst, src, n);
    };
    b.roofline = [](int) {
      return Roofline{.peak_flops = 90e9, .bandwidth = 30e9, .launch_seconds = 1e-7};
    };
    // A PCIe 4.0 x16 link (~25 GB/s each way, ~10 µs per copy), synchronous
    // copies: the host tier prices its swaps with it (Note [host tier]).
    b.host_link = [](int) { return HostLink{.bandwidth = 25e9, .latency_seconds = 1e-5}; };
    // The CPU kernels, bound under the second device type.
    b.register_kernels = [] {
      for (const auto& row : OpRegistry::instance().ops())
        row->kernels[size_t(kPrivateUse1)] = row->kernels[size_t(kCPU)];
#if DTR_HAVE_CUDA
      if (second_device_wants_cuda_kernels()) second_device_cuda_ops() = cuda::bind_emulated_kernels(kPrivateUse1);
#endif
    };
    b.host_accessible = false;
    register_backend(b);
    return true;
  }();
  (void)registered;
  return Device(kPrivateUse1, index);
}

}  // namespace dtr::testing

/// Skips a test of the CUDA kernels under host emulation unless
/// DTR_TEST_DEVICE_KERNELS=cuda bound them to the test device (ctest
/// cuda.emulated). Makes a tensor there first, which binds the kernels.
#define DTR_SKIP_UNLESS_CUDA_EMULATION()                                                               \
  do {                                                                                                \
    (void)::dtr::zeros({1}, ::dtr::TensorOptions().device(::dtr::testing::second_device()));          \
    if (::dtr::testing::second_device_cuda_ops().empty())                                             \
      GTEST_SKIP() << "run with DTR_TEST_DEVICE_KERNELS=cuda (ctest cuda.emulated)";                  \
  } while (0)
