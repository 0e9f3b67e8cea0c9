#include "core/backend.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace dtr {

namespace {

struct BackendTable {
  std::mutex mu;
  // Read on every op without the mutex; written once per type under it.
  std::array<std::atomic<const Backend*>, kNumDeviceTypes> backends{};
  bool kernels_bound = false;
};

BackendTable& table() {
  static BackendTable* t = new BackendTable;  // never destroyed: used by static destructors
  return *t;
}

struct LostDevices {
  std::atomic<bool> any{false};
  std::mutex mu;
  std::map<std::pair<int, int>, std::string> reasons;  // (type, index) -> the first failure
};

LostDevices& lost_devices() {
  static LostDevices* l = new LostDevices;  // never destroyed
  return *l;
}

std::pair<int, int> key(Device d) { return {int(d.type), d.index}; }

}  // namespace

void mark_device_lost(Device device, std::string reason) {
  LostDevices& l = lost_devices();
  std::lock_guard lock(l.mu);
  l.reasons.emplace(key(device), std::move(reason));  // the first reason stays
  l.any.store(true, std::memory_order_relaxed);
}

bool device_lost(Device device) {
  LostDevices& l = lost_devices();
  if (!l.any.load(std::memory_order_relaxed)) return false;
  std::lock_guard lock(l.mu);
  return l.reasons.count(key(device)) != 0;
}

void check_device_not_lost(Device device) {
  LostDevices& l = lost_devices();
  if (!l.any.load(std::memory_order_relaxed)) [[likely]] return;
  std::string reason;
  {
    std::lock_guard lock(l.mu);
    auto it = l.reasons.find(key(device));
    if (it == l.reasons.end()) return;
    reason = it->second;
  }
  throw DeviceError(fmt::format(
      "{} is lost: {}. Its context cannot recover: every later op, copy and allocation on {} fails "
      "and its tensors cannot be read back; other devices work. Restart the process; to find the "
      "op that faulted, run with DTR_CUDA_SYNC=1 (each kernel is waited for and checked as it "
      "runs) or under compute-sanitizer.",
      device.str(), reason, device.str()));
}

void clear_device_lost(Device device) {
  LostDevices& l = lost_devices();
  std::lock_guard lock(l.mu);
  l.reasons.erase(key(device));
  l.any.store(!l.reasons.empty(), std::memory_order_relaxed);
}

double Roofline::seconds(double flops, double bytes) const {
  return std::max(flops / peak_flops, bytes / bandwidth) + launch_seconds;
}

void register_backend(const Backend& b) {
  DTR_INTERNAL_ASSERT(b.device_count && b.allocator && b.memory_bytes && b.copy_from_host &&
                          b.copy_to_host && b.copy_device && b.roofline && b.register_kernels,
                      "backend '{}' lacks a required slot", b.name);
  DTR_INTERNAL_ASSERT((b.timer_start == nullptr) == (b.timer_elapsed == nullptr),
                      "backend '{}': timer_start and timer_elapsed come together", b.name);
  BackendTable& t = table();
  bool bind = false;
  {
    std::lock_guard lock(t.mu);
    auto& slot = t.backends[size_t(b.type)];
    DTR_INTERNAL_ASSERT(slot.load() == nullptr,
                        "a backend for device type '{}' is registered already",
                        device_type_name(b.type));
    slot.store(new Backend(b), std::memory_order_release);  // kept for the life of the process
    bind = t.kernels_bound;
    if (bind) b.register_kernels();
  }
}

const Backend* find_backend(DeviceType type) {
  // A cast integer that names no device type has no backend (DeviceError in backend()).
  if (size_t(type) >= size_t(kNumDeviceTypes)) [[unlikely]] return nullptr;
  return table().backends[size_t(type)].load(std::memory_order_acquire);
}

const Backend& backend(Device device) {
  const Backend* b = find_backend(device.type);
  if (b == nullptr) [[unlikely]] {
    throw DeviceError(fmt::format("{}: dtr has no backend for device type '{}'{}", device.str(),
                                  device_type_name(device.type),
                                  device.is_cuda() ? " (built without CUDA)" : ""));
  }
  if (device.index < 0 || device.index >= b->device_count()) [[unlikely]] {
    const int n = b->device_count();
    throw DeviceError(fmt::format("{}: {} {} device{} present{}", device.str(), n,
                                  device_type_name(device.type), n == 1 ? "" : "s",
                                  n == 0 ? " (no driver or no device)" : ""));
  }
  return *b;
}

namespace {
// -1 type: none set. Packed into one atomic: (type << 32) | index.
std::atomic<int64_t> g_default_device{-1};
}  // namespace

void set_default_device(std::optional<Device> device) {
  if (!device) {
    g_default_device.store(-1, std::memory_order_relaxed);
    return;
  }
  check_device(*device);
  g_default_device.store((int64_t(device->type) << 32) | int64_t(uint32_t(device->index)), std::memory_order_relaxed);
}

Device default_device() {
  if (const int64_t d = g_default_device.load(std::memory_order_relaxed); d >= 0)
    return Device(DeviceType(d >> 32), int(int32_t(d & 0xffffffff)));
  if (const Backend* cuda = find_backend(kCUDA); cuda != nullptr && cuda->device_count() > 0) {
    return Device(kCUDA, 0);
  }
  return Device(kCPU);
}

void copy_bytes(Device dst_device, void* dst, Device src_device, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  check_device_not_lost(dst_device);
  check_device_not_lost(src_device);
  const Backend& db = backend(dst_device);
  const Backend& sb = backend(src_device);
  if (dst_device.type == src_device.type) {
    db.copy_device(dst_device.index, dst, src_device.index, src, nbytes);
  } else if (src_device.is_cpu()) {
    db.copy_from_host(dst_device.index, dst, src, nbytes);
  } else if (dst_device.is_cpu()) {
    sb.copy_to_host(src_device.index, dst, src, nbytes);
  } else {
    std::vector<std::byte> staging(nbytes);
    sb.copy_to_host(src_device.index, staging.data(), src, nbytes);
    if (sb.synchronize) sb.synchronize(src_device.index);
    db.copy_from_host(dst_device.index, dst, staging.data(), nbytes);
    if (db.synchronize) db.synchronize(dst_device.index);  // staging goes away
  }
}

void bind_backend_kernels() {
  BackendTable& t = table();
  std::lock_guard lock(t.mu);
  if (t.kernels_bound) return;
  // All or nothing: a throw leaves the table unbound, and a retry (after
  // the rows are defined afresh) binds everything again.
  for (const auto& b : t.backends)
    if (const Backend* p = b.load()) p->register_kernels();
  t.kernels_bound = true;
}

AllocatorProvider& backend_allocators() {
  struct Backends final : AllocatorProvider {
    Allocator* allocator(Device device) override { return backend(device).allocator(device.index); }
  };
  static Backends* p = new Backends;
  return *p;
}

DeviceTimer::DeviceTimer(Device device) : backend_(&backend(device)), index_(device.index) {
  if (backend_->timer_start) {
    token_ = backend_->timer_start(index_);
  } else {
    if (backend_->synchronize) backend_->synchronize(index_);
    token_ = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
  }
}

double DeviceTimer::elapsed() const {
  if (backend_->timer_elapsed) return backend_->timer_elapsed(index_, token_);
  if (backend_->synchronize) backend_->synchronize(index_);
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  return double(now - int64_t(token_)) * std::chrono::steady_clock::period::num /
         std::chrono::steady_clock::period::den;
}

}  // namespace dtr
