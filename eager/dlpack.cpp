// DLPack export and import (eager/dlpack.h; Note [dlpack] in docs/DESIGN.md).
#include "eager/dlpack.h"

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "core/backend.h"
#include "core/error.h"
#include "eager/autograd.h"
#include "eager/ops.h"
#include "remat/runtime.h"

namespace dtr {

namespace {

// DLPack 0.8's bool: one byte per element, 0 or 1, as dtr's kBool.
constexpr uint8_t kDLBoolCode = kDLBool;

DLDataType to_dl_dtype(DType t) {
  DLDataType d;
  d.lanes = 1;
  d.bits = uint8_t(itemsize(t) * 8);
  switch (t) {
    case kFloat32:
    case kFloat64:
    case kFloat16: d.code = kDLFloat; break;
    case kBFloat16: d.code = kDLBfloat; break;
    case kInt64:
    case kInt32: d.code = kDLInt; break;
    case kUInt8: d.code = kDLUInt; break;
    case kBool: d.code = kDLBoolCode; break;
  }
  return d;
}

// The inverse of to_dl_dtype (one table: that switch).
std::optional<DType> from_dl_dtype(DLDataType d) {
  for (int i = 0; i < kNumDTypes; ++i) {
    const DLDataType c = to_dl_dtype(DType(i));
    if (c.code == d.code && c.bits == d.bits && c.lanes == d.lanes) return DType(i);
  }
  return std::nullopt;
}

// What one export owns until the consumer calls the deleter: a handle on
// the tensor (detached: the export keeps the bytes alive, not the autograd
// graph), the pin, and the shape and stride arrays the DLTensor points at.
// `M` is DLManagedTensor or DLManagedTensorVersioned.
template <class M>
struct ExportContext {
  Tensor tensor;
  remat::PinGuard pin;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  M managed{};
};

// May run on any thread: unpinning and dropping the handle take the
// runtime's lock.
template <class M>
void delete_export(M* m) {
  if (m != nullptr) delete static_cast<ExportContext<M>*>(m->manager_ctx);
}

void check_writable_export(const char* what, const Tensor& t) {
  DTR_CHECK(!t.storage()->read_only, ValueError,
            "{}: the tensor (shape {}) is read-only (imported from DLPack with "
            "DLPACK_FLAG_BITMASK_READ_ONLY) and cannot be exported for writing; export it "
            "read-only (DLPackAccess::kReadOnly) or export a copy",
            what, shape_str(t.shape()));
}

template <class M>
M* export_tensor(const char* what, const Tensor& t, DLPackAccess access) {
  DTR_CHECK(t.defined(), ValueError, "{}: tensor is undefined", what);
  const Device device = t.device();
  DLDevice dl_device;
  dl_device.device_id = device.index;
  if (device.is_cpu()) {
    dl_device.device_type = kDLCPU;
  } else if (device.is_cuda()) {
    dl_device.device_type = kDLCUDA;
  } else {
    throw DeviceError(fmt::format("{}: {} has no DLPack device type (only cpu and cuda do)", what,
                                  device.str()));
  }
  if (access == DLPackAccess::kReadWrite) check_writable_export(what, t);
  auto ctx = std::make_unique<ExportContext<M>>();
  ctx->tensor = t.detach();
  // Resident (rematerialized if it was evicted) and pinned from here until
  // the deleter runs (Note [pin guard]).
  ctx->pin = remat::PinGuard(t.storage());
  if (access == DLPackAccess::kReadWrite) {
    // The consumer may write: the same path as data_ptr (Note [mutation],
    // Note [borrowed storage]), so lineage never rebuilds these bytes.
    (void)t.raw_data_ptr();
  }
  // No stream to order the consumer after crosses either C struct: the
  // bytes are complete when the pointer is handed out.
  const Backend& b = backend(device);
  if (b.synchronize != nullptr) b.synchronize(device.index);
  ctx->shape.assign(t.shape().begin(), t.shape().end());
  ctx->strides.assign(t.strides().begin(), t.strides().end());
  DLTensor& dl = ctx->managed.dl_tensor;
  // As PyTorch, NumPy and CuPy export: `data` is element 0 and byte_offset
  // is 0 (consumers such as PyTorch's from_dlpack ignore byte_offset).
  dl.data = static_cast<std::byte*>(t.storage()->data()) + t.storage_offset() * itemsize(t.dtype());
  dl.byte_offset = 0;
  dl.device = dl_device;
  dl.ndim = int32_t(ctx->shape.size());
  dl.dtype = to_dl_dtype(t.dtype());
  dl.shape = ctx->shape.data();
  dl.strides = ctx->strides.data();
  ctx->managed.manager_ctx = ctx.get();
  ctx->managed.deleter = delete_export<M>;
  return &ctx.release()->managed;
}

// The checks and the borrowed storage both import paths share: on any
// error nothing owns `deleter` (the caller keeps the managed tensor).
Tensor import_tensor(const char* what, const DLTensor& dl, std::function<void(void*)> deleter) {
  DTR_CHECK(dl.ndim >= 0 && dl.ndim <= 16, ValueError,
            "{}: ndim is {}; dtr tensors have 0 to 16 dimensions", what, dl.ndim);
  DTR_CHECK(dl.ndim == 0 || dl.shape != nullptr, ValueError,
            "{}: shape is null for a tensor of {} dimensions", what, dl.ndim);
  const std::optional<DType> dtype = from_dl_dtype(dl.dtype);
  DTR_CHECK(dtype.has_value(), TypeError,
            "{}: dtype (code {}, bits {}, lanes {}) has no dtr dtype; dtr takes float "
            "(code 2) of 16, 32 or 64 bits, bfloat (4) of 16, int (0) of 32 or 64, uint (1) of 8 "
            "and bool (6) of 8, with 1 lane",
            what, int(dl.dtype.code), int(dl.dtype.bits), int(dl.dtype.lanes));
  Device device;
  switch (dl.device.device_type) {
    case kDLCPU: device = Device(DeviceType::kCPU, dl.device.device_id); break;
    case kDLCUDA: device = Device(DeviceType::kCUDA, dl.device.device_id); break;
    default:
      throw DeviceError(fmt::format(
          "{}: DLPack device type {} (device id {}) has no dtr device; dtr takes kDLCPU "
          "(1) and kDLCUDA (2)",
          what, int(dl.device.device_type), dl.device.device_id));
  }
  check_device(device);  // DeviceError for a device that is not present
  Shape shape(dl.shape, dl.shape + dl.ndim);
  for (int64_t s : shape) {
    DTR_CHECK(s >= 0, ValueError, "{}: negative size in shape {}", what, shape_str(shape));
  }
  Strides strides;
  if (dl.strides != nullptr) {
    strides.assign(dl.strides, dl.strides + dl.ndim);
    for (int64_t s : strides) {
      DTR_CHECK(s >= 0, ValueError, "{}: negative stride in strides {} (shape {})", what,
                shape_str(strides), shape_str(shape));
    }
  } else {
    strides = contiguous_strides(shape);  // null strides: row-major (DLPack)
  }
  void* data = dl.data == nullptr ? nullptr : static_cast<std::byte*>(dl.data) + dl.byte_offset;
  DTR_CHECK(data != nullptr || numel(shape) == 0, ValueError,
            "{}: data is null for a tensor of shape {}", what, shape_str(shape));
  // from_blob checks the rest (span overflow, alignment, unmapped pages)
  // before the storage owns the deleter: on any error `m` stays the caller's.
  return from_blob(data, shape, strides, std::move(deleter), *dtype, device);
}

}  // namespace

DLManagedTensor* to_dlpack(const Tensor& t, DLPackAccess access) {
  return export_tensor<DLManagedTensor>("to_dlpack", t, access);
}

Tensor from_dlpack(DLManagedTensor* m) {
  DTR_CHECK(m != nullptr, ValueError, "from_dlpack: the DLManagedTensor is null");
  return import_tensor("from_dlpack", m->dl_tensor, [m](void*) {
    if (m->deleter != nullptr) m->deleter(m);
  });
}

DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& t, DLPackAccess access, bool copy) {
  constexpr const char* kWhat = "to_dlpack_versioned";
  DTR_CHECK(t.defined(), ValueError, "{}: tensor is undefined", kWhat);
  Tensor source = t;
  if (copy) {
    // A copy of the bytes only: no autograd edge to `t`, and the copy is
    // this export's alone (nothing else holds its storage).
    NoGradGuard no_grad;
    source = t.detach().clone();
  }
  DLManagedTensorVersioned* m = export_tensor<DLManagedTensorVersioned>(kWhat, source, access);
  m->version.major = DLPACK_MAJOR_VERSION;
  m->version.minor = DLPACK_MINOR_VERSION;
  m->flags = 0;
  if (access == DLPackAccess::kReadOnly) m->flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
  if (copy) m->flags |= DLPACK_FLAG_BITMASK_IS_COPIED;
  return m;
}

Tensor from_dlpack_versioned(DLManagedTensorVersioned* m) {
  constexpr const char* kWhat = "from_dlpack_versioned";
  DTR_CHECK(m != nullptr, ValueError, "{}: the DLManagedTensorVersioned is null", kWhat);
  // Only the version may be read before it is checked (the layout after it
  // may differ in another major version).
  DTR_CHECK(m->version.major == DLPACK_MAJOR_VERSION, ValueError,
            "{}: the tensor is DLPack {}.{}, whose layout dtr cannot read: dtr speaks DLPack {}.x "
            "(its header is {}.{}); only major version {} is accepted",
            kWhat, m->version.major, m->version.minor, DLPACK_MAJOR_VERSION, DLPACK_MAJOR_VERSION,
            DLPACK_MINOR_VERSION, DLPACK_MAJOR_VERSION);
  const bool read_only = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
  Tensor t = import_tensor(kWhat, m->dl_tensor, [m](void*) {
    if (m->deleter != nullptr) m->deleter(m);
  });
  // Nothing throws from here: the storage owns `m`.
  if (read_only) t.storage()->read_only = true;
  return t;
}

}  // namespace dtr
