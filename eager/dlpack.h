// DLPack interchange (dlpack.h 0.6+, DLManagedTensor): tensors cross to and
// from other frameworks without copying (PyTorch's torch.utils.dlpack,
// at::toDLPack / at::fromDLPack). Note [dlpack] in docs/DESIGN.md.
#pragma once

#include <dlpack/dlpack.h>

#include "eager/tensor.h"

namespace dtr {

/// How the consumer of an export will use the bytes.
enum class DLPackAccess {
  /// The consumer may write through the pointer (PyTorch's behaviour: the
  /// two tensors share memory). The storage is treated as borrowed from then
  /// on (Note [borrowed storage]): lineage never rebuilds bytes the consumer
  /// may have changed, so it is never evicted again.
  kReadWrite,
  /// The consumer only reads. The storage is pinned until the consumer's
  /// deleter runs and evictable again afterwards.
  kReadOnly,
};

/// Exports `t` (any dtype; cpu as kDLCPU, cuda:N as kDLCUDA with device_id
/// N) as a DLManagedTensor that shares `t`'s bytes (at::toDLPack). Views
/// keep their shape and strides (in elements); `data` points at element 0
/// and byte_offset is 0, as PyTorch, NumPy and CuPy export (PyTorch's
/// from_dlpack ignores byte_offset). An evicted storage is rematerialized
/// first; the storage is then pinned (never evicted or moved; Note [pin
/// guard]) until the consumer calls `deleter` exactly once, from any
/// thread. The export holds a detached handle: the bytes stay alive after
/// the last Tensor goes, the autograd graph does not. Work queued on the
/// device is finished before the pointer is handed out. bool exports as
/// DLPack 0.8's kDLBool (code 6, 8 bits). Throws ValueError for an
/// undefined tensor, DeviceError for a device with no DLPack mapping,
/// OutOfMemoryError when the rematerialization does not fit (nothing is
/// exported then).
DLManagedTensor* to_dlpack(const Tensor& t, DLPackAccess access = DLPackAccess::kReadWrite);

/// Imports `m` without copying (at::fromDLPack): the result aliases the
/// producer's bytes at `data + byte_offset` with its shape and strides (in
/// elements; null strides: row-major; a non-contiguous import is a strided
/// tensor, as a view), and calls `m->deleter` (when not null) exactly once,
/// on the thread that drops the last tensor, view or lineage reference on
/// that storage. The storage is borrowed (the producer may write through its
/// own handle; Note [borrowed storage]). Accepts float 16/32/64, bfloat 16,
/// int 32/64, uint 8 and bool (code 6, 8 bits), 1 lane; kDLCPU and kDLCUDA.
/// On success the result owns `m`. Throws (and leaves `m` owned by the
/// caller, deleter not called) ValueError for a null `m`, ndim below 0 or
/// above 16, a null shape, negative sizes or strides, null data with
/// elements, data not aligned to the item size, or a span that overflows;
/// TypeError for a dtype dtr lacks (code, bits, lanes named); DeviceError
/// for a device type dtr lacks or a device that is not present.
Tensor from_dlpack(DLManagedTensor* m);

}  // namespace dtr
