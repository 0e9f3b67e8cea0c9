// The backend interface (DESIGN.md "Backends"): everything eager/ and remat/
// need from a device type, as one small struct of plain functions with
// optional slots (the model is ggml's ggml_backend_i). cpu/backend.cpp
// implements it for the CPU; a CUDA backend, or a test's second device
// (tests/second_device.h), is another instance. Nothing outside a backend
// calls a device API, copies device memory or knows a device's speed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/allocator.h"
#include "core/device.h"

namespace dtr {

struct KernelContext;  // core/op_registry.h

/// The roofline a cost estimate is priced with (Note [scores]).
struct Roofline {
  double peak_flops = 1;      // FLOP/s of the kernels that run at the device's peak
  double bandwidth = 1;       // bytes/s
  double launch_seconds = 0;  // fixed cost of one call
  /// max(flops / peak_flops, bytes / bandwidth) + launch_seconds, in seconds.
  double seconds(double flops, double bytes) const;
};

/// The link between a device's memory and host memory, which the host tier
/// prices a swap with (Note [host tier]).
struct HostLink {
  double bandwidth = 1;       // bytes/s, each way
  double latency_seconds = 0; // fixed cost of one copy
  /// Whether copies run beside compute (a copy stream): a swap-out then
  /// costs the step nothing, only the copy back does.
  bool async_copies = false;
  /// Seconds to copy `bytes` one way: bytes / bandwidth + latency.
  double seconds(double bytes) const { return bytes / bandwidth + latency_seconds; }
};

struct Backend {
  /// Short name for messages ("cpu"); the device type's own name is
  /// device_type_name(type).
  std::string_view name;
  DeviceType type = DeviceType::kCPU;
  /// Devices of this type present now; 0 when there are none (no driver).
  int (*device_count)() = nullptr;
  /// The allocator of new storages on device `index` (0 <= index <
  /// device_count()); never null.
  Allocator* (*allocator)(int index) = nullptr;
  /// Bytes of memory of device `index`: what "60%" of DTR_MEMORY_BUDGET
  /// is taken of.
  int64_t (*memory_bytes)(int index) = nullptr;
  /// Byte copies: host memory to device `index`, device `index` to host
  /// memory, and device `src_index` to device `dst_index` of this type (the
  /// same device included). Ordered after work queued before them on a
  /// backend with queues; synchronize() waits for them.
  void (*copy_from_host)(int index, void* dst, const void* src, size_t nbytes) = nullptr;
  void (*copy_to_host)(int index, void* dst, const void* src, size_t nbytes) = nullptr;
  void (*copy_device)(int dst_index, void* dst, int src_index, const void* src,
                      size_t nbytes) = nullptr;
  /// Optional: waits until the work queued on device `index` has run (null:
  /// the backend runs everything synchronously).
  void (*synchronize)(int index) = nullptr;
  /// The roofline of device `index`.
  Roofline (*roofline)(int index) = nullptr;
  /// Optional: the timer of a measured cost (DTR_COST=measured). start
  /// returns a token; elapsed returns the seconds the work queued since
  /// then took (events on a GPU). Null: the host clock, after synchronize().
  uint64_t (*timer_start)(int index) = nullptr;
  double (*timer_elapsed)(int index, uint64_t token) = nullptr;
  /// Optional: the link of device `index` to host memory. Null: the device's
  /// memory is host memory (the CPU), so there is nothing to swap to and the
  /// host tier is off for it (Note [host tier]).
  HostLink (*host_link)(int index) = nullptr;
  /// Binds this backend's kernels into the op registry. Called once, after
  /// every row is defined (at the first op, or at once for a backend
  /// registered later).
  void (*register_kernels)() = nullptr;
  /// Optional: runs `kernel(ctx)`, one kernel of op `op` on device
  /// `ctx.device`; eager/dispatch.cpp calls every kernel of this device type
  /// through it, replays included. The CUDA backend makes the device current
  /// for the call and restores the caller's (a device guard, as c10's
  /// DeviceGuard), and with DTR_CUDA_SYNC waits for the kernel so that a
  /// fault is reported under the name of the op that caused it (Note [lost
  /// devices]). Null: the kernel is called directly.
  void (*run_kernel)(void (*kernel)(const KernelContext&), const KernelContext& ctx,
                     std::string_view op) = nullptr;
  /// Whether the host may read device memory through a plain pointer (the
  /// CPU's own memory). When false, host-side readers (DTR_VERIFY's hash,
  /// printing) copy the bytes out first with copy_to_host.
  bool host_accessible = false;
};

/// Registers `b` for its device type and binds its kernels if the op rows
/// exist already. Throws InternalError when the type has a backend already
/// or a required slot is null. The CPU backend registers itself when the
/// library loads (cpu/backend.cpp).
void register_backend(const Backend& b);
/// The backend of `type`; null when none is registered.
const Backend* find_backend(DeviceType type);
/// The backend of `device`. Throws DeviceError when no backend is registered
/// for its type ("cuda:0: dtr was built without the CUDA backend") or its
/// index is past the devices present ("cuda:1: 1 CUDA device present").
const Backend& backend(Device device);
/// Checks that `device` exists (backend(device), discarding the result).
inline void check_device(Device device) { (void)backend(device); }
/// The device DTR_MEMORY_BUDGET's bare form caps and the device-less
/// budget and stats calls mean: the one set_default_device chose, else the
/// first CUDA device when one is present, else the CPU.
Device default_device();
/// Makes `device` the default (init_process_group("nccl") sets this rank's
/// cuda:LOCAL_RANK, so that the bare budget caps the device the rank uses,
/// as torch.cuda.set_device(local_rank) does); nullopt goes back to the rule
/// above. A device's budget from DTR_MEMORY_BUDGET is resolved when the
/// runtime first meets the device, so set it before the device's first
/// tensor. Throws DeviceError for a device that does not exist.
void set_default_device(std::optional<Device> device);

/// Copies `nbytes` from `src` on `src_device` to `dst` on `dst_device`:
/// through the backends' own copies, and through a host buffer when the two
/// are devices of different non-CPU types. Throws DeviceError for a device
/// that does not exist.
void copy_bytes(Device dst_device, void* dst, Device src_device, const void* src, size_t nbytes);

/// Note [lost devices]: a fault a device cannot recover from (a sticky CUDA
/// error such as an illegal address: the context is gone, and every later
/// call of the process fails with it) marks the device lost. From then on
/// every kernel and copy on it throws one DeviceError that says so, names
/// what failed first, and says how to find the op that faulted; other
/// devices, the CPU included, go on working. A backend marks its device
/// with mark_device_lost; `reason` says what failed ("illegal memory access
/// ... in op matmul"). The first reason stays.
void mark_device_lost(Device device, std::string reason);
/// Throws the DeviceError of a lost device ("cuda:0 is lost: ..."); returns
/// when `device` is usable. One relaxed load while no device was ever lost.
void check_device_not_lost(Device device);
/// Whether `device` is marked lost.
bool device_lost(Device device);
/// Forgets that `device` was lost: for a backend that can recover (the test
/// device); a CUDA context cannot be recovered in-process.
void clear_device_lost(Device device);

/// Binds every registered backend's kernels (eager/ops/init.cpp calls it
/// once every row is defined); backends registered afterwards bind theirs
/// at registration.
void bind_backend_kernels();

/// The backends' allocators: backend(device).allocator(device.index).
AllocatorProvider& backend_allocators();

/// Times work on one device with its backend's timer (DTR_COST=measured).
class DeviceTimer {
 public:
  explicit DeviceTimer(Device device);
  /// Seconds since construction, once the work queued since has run.
  double elapsed() const;

 private:
  const Backend* backend_;
  int index_;
  uint64_t token_ = 0;
};

}  // namespace dtr
