// DLPack interchange: tensors cross to and from other frameworks without
// copying (PyTorch's torch.utils.dlpack, at::toDLPack / at::fromDLPack), in
// the legacy unversioned form (DLManagedTensor) and DLPack 1.x's
// DLManagedTensorVersioned. <dlpack/dlpack.h> is DLPack 1.1's, vendored in
// third_party/dlpack. Note [dlpack] in docs/DESIGN.md.
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
  /// The consumer only reads: a promise by the consumer, not a freeze. The
  /// storage is pinned until the consumer's deleter runs and evictable again
  /// afterwards; its lineage is kept, and dtr's own in-place writes to the
  /// tensor stay allowed (the consumer sees them, as it shares the bytes).
  /// A versioned export carries DLPACK_FLAG_BITMASK_READ_ONLY.
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
/// exported then), ValueError for kReadWrite of a read-only tensor (one
/// imported with DLPACK_FLAG_BITMASK_READ_ONLY; see from_dlpack_versioned).
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

/// DLPack 1.x export (at::toDLPackVersioned): as to_dlpack, in a
/// DLManagedTensorVersioned of version 1.1 (the vendored header's). `flags`
/// has DLPACK_FLAG_BITMASK_READ_ONLY for kReadOnly. With `copy`, the export
/// is of a fresh contiguous copy of `t` (made on `t`'s device, owned by the
/// export alone; `t` is neither pinned nor marked borrowed) and flags has
/// DLPACK_FLAG_BITMASK_IS_COPIED; `access` then only sets the read-only
/// flag. Throws as to_dlpack (a copy may also raise OutOfMemoryError).
DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& t,
                                              DLPackAccess access = DLPackAccess::kReadWrite,
                                              bool copy = false);

/// DLPack 1.x import (at::fromDLPackVersioned): as from_dlpack, after
/// checking `m->version.major` is 1 (ValueError naming both versions
/// otherwise; any minor is accepted, as the spec allows). Flags:
/// - DLPACK_FLAG_BITMASK_READ_ONLY: the result shares the bytes (no copy,
///   as PyTorch 2 shares them) but its storage is read-only: every in-place
///   op on it or on a view of it, data_ptr()/mutable_data_ptr(), and a
///   kReadWrite export throw ValueError ("... is read-only ..."), before
///   anything is written. Reads, out-of-place ops, const_data_ptr and
///   kReadOnly exports work; clone() gives a writable copy.
/// - DLPACK_FLAG_BITMASK_IS_COPIED: the bytes are this import's alone; they
///   are still treated as borrowed (Note [borrowed storage]), which is
///   correct for any buffer, so the flag changes nothing here.
/// - DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED: irrelevant (dtr has no
///   sub-byte dtypes; their codes are refused as TypeError).
/// On any error `m` stays the caller's (deleter not called; the spec allows
/// the caller to call it for a refused major version).
Tensor from_dlpack_versioned(DLManagedTensorVersioned* m);

}  // namespace dtr
