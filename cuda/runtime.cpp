// The CUDA backend (core/backend.h): devices through the CUDA runtime,
// memory from a caching allocator per device (core/caching_allocator.h over
// cudaMalloc segments), copies and kernels on the
// device's legacy default stream, a roofline from the device's attributes,
// CUDA events for measured costs. Registered when libdtr loads, with or
// without a driver: without one devices_present() is 0, every CPU path works,
// and a CUDA device is a DeviceError ("cuda:0: 0 cuda devices present (no
// driver or no device)").
#include "cuda/runtime.h"

#include <absl/container/flat_hash_map.h>

#include <algorithm>
#include <array>
#include <memory>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "core/allocator.h"
#include "core/backend.h"
#include "core/caching_allocator.h"
#include "core/error.h"
#include "core/logging.h"
#include "core/op_registry.h"
#include "core/options.h"

namespace dtr::cuda {

namespace {

constexpr int kMaxDevices = 64;

}  // namespace

namespace {
// The op whose kernel runs on this thread (run_kernel below), for messages.
thread_local std::string_view t_current_op;
}  // namespace

bool is_sticky_error(cudaError_t error) {
  switch (error) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorContained:
    case cudaErrorExternalDevice:
      return true;
    default:
      return false;
  }
}

void check(cudaError_t rc, const char* what) {
  if (rc == cudaSuccess) [[likely]] return;
  throw_cuda_error(int(rc), what, nullptr, 0);
}

void throw_cuda_error(int error, const char* what, const char* file, int line) {
  const auto rc = cudaError_t(error);
  // Clears a launch-configuration error so later calls report their own; a
  // sticky error stays whatever this does.
  (void)cudaGetLastError();
  std::string where = file != nullptr ? fmt::format(" ({}:{})", file, line) : std::string();
  std::string in_op = t_current_op.empty() ? std::string() : fmt::format(" in op {}", t_current_op);
  std::string msg =
      fmt::format("{} failed{}: {} ({}){}", what, in_op, cudaGetErrorString(rc), cudaGetErrorName(rc), where);
  if (rc == cudaErrorMemoryAllocation) throw OutOfMemoryError(std::move(msg));
  if (is_sticky_error(rc)) {
    // Note [lost devices]: the context is gone. Without DTR_CUDA_SYNC the
    // fault surfaces at the next call that waits, which may be a later op's.
    int index = -1;
    if (cudaGetDevice(&index) != cudaSuccess || index < 0) index = 0;
    const Device device(kCUDA, index);
    mark_device_lost(device, global_options().cuda_sync
                                 ? msg
                                 : msg + " (reported there; the kernel that faulted may be an earlier op's)");
    check_device_not_lost(device);  // throws the one DeviceError of a lost device
  }
  throw DeviceError(std::move(msg));
}

void check_launch(const char* kernel) {
  const cudaError_t rc = cudaGetLastError();
  if (rc != cudaSuccess) [[unlikely]]
    throw_cuda_error(int(rc), fmt::format("launch of CUDA kernel {}", kernel).c_str(), nullptr, 0);
}

int devices_present() {
  static const int n = [] {
    int count = 0;
    const cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
      (void)cudaGetLastError();
      logger().debug("CUDA: no device usable ({}: {})", cudaGetErrorName(rc), cudaGetErrorString(rc));
      return 0;
    }
    return std::min(count, kMaxDevices);
  }();
  return n;
}

void set_device(int index) {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == index) return;
  DTR_CUDA_CHECK(cudaSetDevice(index));
}

DeviceGuard::DeviceGuard(int index) : index_(index) {
  if (cudaGetDevice(&previous_) != cudaSuccess) {
    (void)cudaGetLastError();
    previous_ = -1;
  }
  if (previous_ != index_) DTR_CUDA_CHECK(cudaSetDevice(index_));
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0 && previous_ != index_ && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
}

Exec exec_for(Device device) {
  if (device.type != DeviceType::kCUDA) return Exec{.stream = nullptr, .emulate = true};
  set_device(device.index);
  return Exec{.stream = nullptr, .emulate = false};  // the legacy default stream
}

// ---- the kernel table -----------------------------------------------------------

namespace {

struct KernelEntry {
  KernelFn fn = nullptr;
  bool emulatable = false;
};

struct KernelTable {
  std::mutex mu;
  absl::flat_hash_map<std::string, KernelEntry> entries;
};

KernelTable& kernel_table() {
  static KernelTable* t = new KernelTable;  // never destroyed
  return *t;
}

}  // namespace

void set_cuda_kernel(std::string_view name, KernelFn fn, bool emulatable) {
  OpRegistry::instance().set_kernel(name, DeviceType::kCUDA, fn);
  KernelTable& t = kernel_table();
  std::lock_guard lock(t.mu);
  t.entries[std::string(name)] = KernelEntry{fn, emulatable};
}

std::vector<std::string> bind_emulated_kernels(DeviceType type) {
  KernelTable& t = kernel_table();
  std::lock_guard lock(t.mu);
  std::vector<std::string> names;
  for (const auto& [name, e] : t.entries) {
    if (!e.emulatable) continue;
    OpRegistry::instance().set_kernel(name, type, e.fn);
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> ops_with_cuda_kernels() {
  KernelTable& t = kernel_table();
  std::lock_guard lock(t.mu);
  std::vector<std::string> names;
  for (const auto& [name, e] : t.entries) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

// ---- memory -----------------------------------------------------------------------

namespace {

/// Device memory of one device for the caching allocator: cudaMalloc and
/// cudaFree of whole segments (core/caching_allocator.h carves blocks out
/// of them, so the driver is called only when the cache misses).
class CudaMemorySource final : public DeviceMemorySource {
 public:
  explicit CudaMemorySource(int index) : index_(index) {}
  void* reserve(size_t nbytes) override {
    DeviceGuard guard(index_);
    void* p = nullptr;
    cudaError_t rc = cudaMalloc(&p, nbytes);
    if (rc == cudaErrorMemoryAllocation) {
      // Kernel scratch freed with cudaFreeAsync (cuda/scratch.h) stays in the
      // stream-ordered pool until a synchronization: wait, trim it, try once more.
      (void)cudaGetLastError();
      cudaMemPool_t pool = nullptr;
      if (cudaDeviceSynchronize() == cudaSuccess && cudaDeviceGetMemPool(&pool, index_) == cudaSuccess)
        (void)cudaMemPoolTrimTo(pool, 0);
      (void)cudaGetLastError();
      rc = cudaMalloc(&p, nbytes);
    }
    if (rc == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;  // the allocator gives back its free segments, then the runtime evicts
    }
    // Anything else (a sticky error of an earlier kernel) is no shortage of memory.
    check(rc, "cudaMalloc");
    return p;
  }
  void release(void* p, size_t) override {
    DeviceGuard guard(index_);
    // cudaFree waits for the device, so no queued kernel still reads the
    // segment. A failure means the context is gone (process exit).
    if (cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
  }

 private:
  int index_;
};

struct DeviceHeap {
  explicit DeviceHeap(int index) : source(index), allocator(source) {}
  CudaMemorySource source;
  CachingAllocator allocator;
};

Allocator* allocator_of(int index) {
  static std::array<std::unique_ptr<DeviceHeap>, kMaxDevices>* heaps = [] {
    auto* a = new std::array<std::unique_ptr<DeviceHeap>, kMaxDevices>;  // never destroyed
    for (int i = 0; i < devices_present(); ++i) (*a)[size_t(i)] = std::make_unique<DeviceHeap>(i);
    return a;
  }();
  return &(*heaps)[size_t(index)]->allocator;
}

}  // namespace

void release_cached_segments() {
  int index = -1;
  if (cudaGetDevice(&index) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  if (index >= 0 && index < devices_present()) static_cast<CachingAllocator*>(allocator_of(index))->empty_cache();
}

namespace {

int64_t memory_bytes_of(int index) {
  DeviceGuard guard(index);
  size_t free = 0, total = 0;
  DTR_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return int64_t(total);
}

// ---- copies ---------------------------------------------------------------------
// On the legacy default stream, after the work queued there; each waits for
// its copy, since the host side (a pageable buffer) may go once it returns.

void copy_from_host(int index, void* dst, const void* src, size_t n) {
  if (n == 0) return;
  DeviceGuard guard(index);
  DTR_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, cudaStreamLegacy));
  DTR_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}

void copy_to_host(int index, void* dst, const void* src, size_t n) {
  if (n == 0) return;
  DeviceGuard guard(index);
  DTR_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, cudaStreamLegacy));
  DTR_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}

void copy_device(int dst_index, void* dst, int src_index, const void* src, size_t n) {
  if (n == 0) return;
  if (dst_index == src_index) {
    DeviceGuard guard(dst_index);
    DTR_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, cudaStreamLegacy));
    return;  // stream-ordered before the device's later work
  }
  // Across devices: both devices' queued work first, then the peer copy.
  {
    DeviceGuard guard(src_index);
    DTR_CUDA_CHECK(cudaDeviceSynchronize());
  }
  DeviceGuard guard(dst_index);
  DTR_CUDA_CHECK(cudaMemcpyPeer(dst, dst_index, src, src_index, n));
  DTR_CUDA_CHECK(cudaDeviceSynchronize());
}

void synchronize(int index) {
  DeviceGuard guard(index);
  DTR_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}

// ---- costs ----------------------------------------------------------------------

int attribute(cudaDeviceAttr attr, int index) {
  int v = 0;
  if (cudaDeviceGetAttribute(&v, attr, index) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return v;
}

/// Note [scores]: the device's FP32 rate (SMs x FP32 lanes per SM x 2 x
/// clock; TF32 is off by default) and its DRAM bandwidth (from the memory
/// clock and bus width where the driver reports them, else by generation),
/// 5 us per kernel launch.
Roofline roofline_of(int index) {
  const int major = attribute(cudaDevAttrComputeCapabilityMajor, index);
  const int sms = attribute(cudaDevAttrMultiProcessorCount, index);
  const int clock_khz = attribute(cudaDevAttrClockRate, index);
  const int mem_khz = attribute(cudaDevAttrMemoryClockRate, index);
  const int bus_bits = attribute(cudaDevAttrGlobalMemoryBusWidth, index);
  // FP32 lanes per SM: 64 on sm_80 (A100), 128 on sm_86/89 and sm_90.
  const int minor = attribute(cudaDevAttrComputeCapabilityMinor, index);
  const double lanes = (major == 8 && minor == 0) ? 64 : 128;
  double flops = double(sms) * lanes * 2 * double(clock_khz) * 1e3;
  double bandwidth = 2.0 * double(mem_khz) * 1e3 * double(bus_bits) / 8;
  if (flops <= 0) flops = major >= 9 ? 60e12 : 19.5e12;
  if (bandwidth <= 0) bandwidth = major >= 9 ? 3.35e12 : 1.6e12;
  return Roofline{.peak_flops = flops, .bandwidth = bandwidth, .launch_seconds = 5e-6};
}

// ---- timer (DTR_COST=measured) -----------------------------------------------------

/// A CUDA event destroyed with its owner, whatever throws in between.
struct Event {
  cudaEvent_t e = nullptr;
  Event() { DTR_CUDA_CHECK(cudaEventCreate(&e)); }
  ~Event() {
    if (cudaEventDestroy(e) != cudaSuccess) (void)cudaGetLastError();
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

uint64_t timer_start(int index) {
  DeviceGuard guard(index);
  auto start = std::make_unique<Event>();
  DTR_CUDA_CHECK(cudaEventRecord(start->e, cudaStreamLegacy));
  return reinterpret_cast<uint64_t>(start.release());
}

double timer_elapsed(int index, uint64_t token) {
  const std::unique_ptr<Event> start(reinterpret_cast<Event*>(token));
  DeviceGuard guard(index);
  Event stop;
  DTR_CUDA_CHECK(cudaEventRecord(stop.e, cudaStreamLegacy));
  DTR_CUDA_CHECK(cudaEventSynchronize(stop.e));
  float ms = 0;
  DTR_CUDA_CHECK(cudaEventElapsedTime(&ms, start->e, stop.e));
  return double(ms) * 1e-3;
}

/// Every kernel on a CUDA device (Backend::run_kernel): the device current
/// for the call and the caller's restored after; with DTR_CUDA_SYNC the
/// kernel is waited for and checked here, so a fault names its own op
/// (Note [lost devices]).
void run_kernel(KernelFn kernel, const KernelContext& ctx, std::string_view op) {
  DeviceGuard guard(ctx.device.index);
  const std::string_view outer = t_current_op;
  t_current_op = op;
  struct Restore {
    std::string_view outer;
    ~Restore() { t_current_op = outer; }
  } restore{outer};
  kernel(ctx);
  if (global_options().cuda_sync) {
    DTR_CUDA_CHECK(cudaGetLastError());
    DTR_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
  }
}

Backend cuda_backend() {
  Backend b;
  b.name = "cuda";
  b.type = kCUDA;
  b.device_count = devices_present;
  b.allocator = allocator_of;
  b.memory_bytes = memory_bytes_of;
  b.copy_from_host = copy_from_host;
  b.copy_to_host = copy_to_host;
  b.copy_device = copy_device;
  b.synchronize = synchronize;
  b.roofline = roofline_of;
  b.timer_start = timer_start;
  b.timer_elapsed = timer_elapsed;
  // Note [host tier]: a PCIe 5.0 x16 link from pageable memory, copies
  // synchronous (on the compute stream).
  b.host_link = [](int) { return HostLink{.bandwidth = 25e9, .latency_seconds = 1e-5}; };
  b.register_kernels = register_kernels;
  b.run_kernel = run_kernel;
  b.host_accessible = false;
  return b;
}

[[maybe_unused]] const bool g_registered = [] {
  register_backend(cuda_backend());
  return true;
}();

}  // namespace
}  // namespace dtr::cuda
