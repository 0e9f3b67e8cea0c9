// The launcher of sort and topk (cuda/sort.cu), for cuda/sort_ops.cpp.
// Semantics: cpu/sort.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/exec.h"

namespace dtr::cuda {

/// Sorts each line (outer, size, inner) of contiguous x of dtype dt by the
/// total order (value, index) — NaN above every number, ties by lower
/// index — ascending or descending, and writes its first k values and int64
/// indices to outputs of lines (outer, k, inner).
void launch_sort_lines(std::byte* values, std::byte* indices, const std::byte* x, DType dt, int64_t outer,
                       int64_t size, int64_t inner, int64_t k, bool descending, const Exec& e);

}  // namespace dtr::cuda
