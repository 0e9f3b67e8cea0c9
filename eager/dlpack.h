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

/// Exports `t` (any dtype, any device whose bytes another framework can
/// address; views keep their strides and byte offset) as a DLManagedTensor
/// that shares `t`'s bytes. An evicted storage is rematerialized first; the
/// storage is then pinned (never evicted or moved) until the consumer calls
/// `deleter` exactly once. bool exports as DLPack 0.8's kDLBool (code 6).
/// Throws ValueError for an undefined tensor, DeviceError for a device with
/// no DLPack mapping.
DLManagedTensor* to_dlpack(const Tensor& t, DLPackAccess access = DLPackAccess::kReadWrite);

/// Imports `m` without copying: the result aliases the producer's bytes with
/// its shape, strides and byte offset, and calls `m->deleter` exactly once,
/// when the last tensor on that storage goes away. The storage is borrowed
/// (the producer may write through its own handle; Note [borrowed storage]).
/// On success the result owns `m`. Throws (and leaves `m` owned by the
/// caller, deleter not called) ValueError for a null `m`, null data with
/// elements, negative sizes or ndim; TypeError for a dtype dtr lacks
/// (code, bits, lanes named); DeviceError for a device type dtr lacks or a
/// device that is not present.
Tensor from_dlpack(DLManagedTensor* m);

}  // namespace dtr
