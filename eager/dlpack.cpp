// DLPack export and import (eager/dlpack.h; Note [dlpack] in docs/DESIGN.md).
#include "eager/dlpack.h"

#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "core/backend.h"
#include "core/error.h"
#include "eager/ops.h"
#include "remat/runtime.h"

namespace dtr {

namespace {

// DLPack 0.8's bool (Debian's dlpack.h is 0.6, which has no bool code):
// one byte per element, 0 or 1, as dtr's kBool.
constexpr uint8_t kDLBoolCode = 6;

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
// the tensor (its metadata and storage), the pin, and the shape and stride
// arrays the DLTensor points at.
struct ExportContext {
  Tensor tensor;
  remat::PinGuard pin;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLManagedTensor managed{};
};

// May run on any thread: unpinning and dropping the handle take the
// runtime's lock.
void delete_export(DLManagedTensor* m) {
  if (m != nullptr) delete static_cast<ExportContext*>(m->manager_ctx);
}

}  // namespace

DLManagedTensor* to_dlpack(const Tensor& t, DLPackAccess access) {
  DTR_CHECK(t.defined(), ValueError, "to_dlpack: tensor is undefined");
  const Device device = t.device();
  DLDevice dl_device;
  dl_device.device_id = device.index;
  if (device.is_cpu()) {
    dl_device.device_type = kDLCPU;
  } else if (device.is_cuda()) {
    dl_device.device_type = kDLCUDA;
  } else {
    throw DeviceError(fmt::format("to_dlpack: {} has no DLPack device type (only cpu and cuda do)",
                                  device.str()));
  }
  auto ctx = std::make_unique<ExportContext>();
  ctx->tensor = t;
  // Resident (rematerialized if it was evicted) and pinned from here until
  // the deleter runs (Note [pin guard]).
  ctx->pin = remat::PinGuard(t.storage());
  if (access == DLPackAccess::kReadWrite) {
    // The consumer may write: the same path as data_ptr (Note [mutation],
    // Note [borrowed storage]), so lineage never rebuilds these bytes.
    (void)t.raw_data_ptr();
  }
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
  ctx->managed.deleter = delete_export;
  return &ctx.release()->managed;
}

Tensor from_dlpack(DLManagedTensor* m) {
  DTR_CHECK(m != nullptr, ValueError, "from_dlpack: the DLManagedTensor is null");
  const DLTensor& dl = m->dl_tensor;
  DTR_CHECK(dl.ndim >= 0 && dl.ndim <= 16, ValueError,
            "from_dlpack: ndim is {}; dtr tensors have 0 to 16 dimensions", dl.ndim);
  DTR_CHECK(dl.ndim == 0 || dl.shape != nullptr, ValueError,
            "from_dlpack: shape is null for a tensor of {} dimensions", dl.ndim);
  const std::optional<DType> dtype = from_dl_dtype(dl.dtype);
  DTR_CHECK(dtype.has_value(), TypeError,
            "from_dlpack: dtype (code {}, bits {}, lanes {}) has no dtr dtype; dtr takes float "
            "(code 2) of 16, 32 or 64 bits, bfloat (4) of 16, int (0) of 32 or 64, uint (1) of 8 "
            "and bool (6) of 8, with 1 lane",
            int(dl.dtype.code), int(dl.dtype.bits), int(dl.dtype.lanes));
  Device device;
  switch (dl.device.device_type) {
    case kDLCPU: device = Device(DeviceType::kCPU, dl.device.device_id); break;
    case kDLCUDA: device = Device(DeviceType::kCUDA, dl.device.device_id); break;
    default:
      throw DeviceError(fmt::format(
          "from_dlpack: DLPack device type {} (device id {}) has no dtr device; dtr takes kDLCPU "
          "(1) and kDLCUDA (2)",
          int(dl.device.device_type), dl.device.device_id));
  }
  check_device(device);  // DeviceError for a device that is not present
  Shape shape(dl.shape, dl.shape + dl.ndim);
  for (int64_t s : shape) {
    DTR_CHECK(s >= 0, ValueError, "from_dlpack: negative size in shape {}", shape_str(shape));
  }
  Strides strides;
  if (dl.strides != nullptr) {
    strides.assign(dl.strides, dl.strides + dl.ndim);
    for (int64_t s : strides) {
      DTR_CHECK(s >= 0, ValueError, "from_dlpack: negative stride in strides {} (shape {})",
                shape_str(strides), shape_str(shape));
    }
  } else {
    strides = contiguous_strides(shape);  // null strides: row-major (DLPack)
  }
  void* data = dl.data == nullptr ? nullptr : static_cast<std::byte*>(dl.data) + dl.byte_offset;
  DTR_CHECK(data != nullptr || numel(shape) == 0, ValueError,
            "from_dlpack: data is null for a tensor of shape {}", shape_str(shape));
  // from_blob checks the rest (span overflow, alignment, unmapped pages)
  // before the storage owns the deleter: on any error `m` stays the caller's.
  return from_blob(
      data, shape, strides,
      [m](void*) {
        if (m->deleter != nullptr) m->deleter(m);
      },
      *dtype, device);
}

}  // namespace dtr
