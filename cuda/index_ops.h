// Host-side helpers of the indexing kernels' wrappers (cuda/index_ops.cpp,
// cuda/nn_functional_ops.cpp): operand dims for cuda/index.h and the index
// range check that raises the CPU's IndexError.
#pragma once

#include <string_view>

#include "core/op_registry.h"
#include "cuda/index.h"

namespace dtr::cuda {

/// `shape` and `strides` as Dims; NotImplementedError naming `op` past kMaxIndexDims dims.
Dims dims_of(IntList shape, IntList strides, std::string_view op);
/// `shape` with contiguous strides.
Dims contiguous_dims(IntList shape, std::string_view op);

/// The fill value of masked_fill / constant_pad_nd (attrs int_value for an
/// integer dtype when given, else value) as dt's bytes, zero-padded to 8;
/// ValueError as on the CPU when it does not fit an integer dtype.
uint64_t fill_bits(const Attrs& attrs, DType dt);

/// IndexError as cpu/index.cpp's check_indices ("{op}: index {v} is out of
/// bounds for dimension {dim} with size {size}") for the first index outside
/// [0, size), found on the device and read back.
void check_indices_on_device(std::string_view op, const TensorArg& index, int64_t dim, int64_t size, const Exec& e);

}  // namespace dtr::cuda
