// A second device for the test suite, without a GPU: device type
// "privateuseone" (PyTorch's PrivateUse1) with two devices, standing in for
// a GPU in everything the runtime can see. Its memory is host memory behind
// the CUDA backend's own CachingAllocator (core/caching_allocator.h) over a
// FakeArena of 1 GiB per device, so blocks are rounded to 512 bytes and
// carved from 2 MiB and 20 MiB segments, memory_stats() and the layout are
// known, the device fills up and refuses segments, and the budget
// arithmetic, window eviction and fragmentation are exercised exactly as
// on CUDA (Note [hard budget]). It runs the CPU kernels (or, with
// DTR_TEST_DEVICE_KERNELS=cuda, the CUDA kernels under host emulation
// wherever they exist) through a run_kernel slot that can inject a sticky
// fault, which marks the device lost as a CUDA illegal address does (Note
// [lost devices]). It proves the backend seam (core/backend.h): tensors on
// two devices at once, separate budgets, copies across devices through the
// backends' copies. Its memory is marked not host-accessible, so host-side
// readers (DTR_VERIFY, printing, to_vector) must go through copy_to_host as
// on a GPU.
#pragma once

#include <atomic>
#include <cstdlib>
#include <cstring>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/backend.h"
#include "core/caching_allocator.h"
#include "core/error.h"
#include "core/op_registry.h"
#include "fake_arena.h"
#if DTR_HAVE_CUDA
#include "cuda/emulation.h"
#endif

namespace dtr::testing {

inline constexpr int kSecondDeviceCount = 2;
inline constexpr int64_t kSecondDeviceMemoryBytes = int64_t{1} << 30;

/// One device's memory: a 1 GiB arena of host memory and the caching
/// allocator over it.
struct SecondDeviceMemory {
  FakeArena arena{kSecondDeviceMemoryBytes};
  CachingAllocator allocator{arena};
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

inline SecondDeviceMemory& second_device_memory(int index) {
  static SecondDeviceMemory* m = new SecondDeviceMemory[kSecondDeviceCount];  // never destroyed
  return m[index];
}
inline CachingAllocator& second_device_allocator(int index) { return second_device_memory(index).allocator; }

/// A fault injected into the next kernel of one op on one device.
struct SecondDeviceFault {
  std::mutex mu;
  int device = -1;  // -1: none armed
  std::string op;
};
inline SecondDeviceFault& second_device_fault() {
  static SecondDeviceFault* f = new SecondDeviceFault;
  return *f;
}
/// Arms a sticky fault: the next kernel of `op` on privateuseone:`index`
/// runs, then "faults" as a CUDA kernel that touched an illegal address
/// does: the device is marked lost (Note [lost devices]) and the op throws
/// its DeviceError. clear_device_lost(device) recovers, which a real GPU
/// cannot.
inline void inject_sticky_fault(int index, std::string op) {
  SecondDeviceFault& f = second_device_fault();
  std::lock_guard lock(f.mu);
  f.device = index;
  f.op = std::move(op);
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
    b.run_kernel = [](KernelFn kernel, const KernelContext& ctx, std::string_view op) {
      kernel(ctx);
      SecondDeviceFault& f = second_device_fault();
      std::lock_guard lock(f.mu);
      if (f.device != ctx.device.index || f.op != op) return;
      f.device = -1;
      mark_device_lost(ctx.device, "an illegal memory access was encountered (an injected sticky fault) in op " +
                                       std::string(op));
      check_device_not_lost(ctx.device);
    };

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
