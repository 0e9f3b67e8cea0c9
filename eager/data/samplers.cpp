#include "eager/data/samplers.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/philox.h"
#include "eager/random.h"

namespace dtr::data::samplers {
namespace {

/// The next at most batch_size of `size` indices from position *index:
/// index_of(i) for each; nullopt once all are out.
template <typename IndexOf>
std::optional<std::vector<size_t>> next_of(size_t size, size_t* index, size_t batch_size, IndexOf index_of) {
  if (*index >= size) return std::nullopt;
  const size_t end = std::min(size, *index + batch_size);
  std::vector<size_t> out;
  out.reserve(end - *index);
  for (size_t i = *index; i < end; ++i) out.push_back(index_of(i));
  *index = end;
  return out;
}

}  // namespace

void SequentialSampler::reset(std::optional<size_t> new_size) {
  if (new_size) size_ = *new_size;
  index_ = 0;
}

std::optional<std::vector<size_t>> SequentialSampler::next(size_t batch_size) {
  return next_of(size_, &index_, batch_size, [](size_t i) { return i; });
}

RandomSampler::RandomSampler(int64_t size, DType index_dtype) {
  DTR_CHECK(size >= 0, ValueError, "RandomSampler: size must be non-negative, got {}", size);
  DTR_CHECK(index_dtype == kInt64 || index_dtype == kInt32, ValueError,
            "RandomSampler: index_dtype must be int64 or int32, got {}", dtype_name(index_dtype));
  indices_ = random_permutation(size_t(size));
}

void RandomSampler::reset(std::optional<size_t> new_size) {
  indices_ = random_permutation(new_size ? *new_size : indices_.size());
  index_ = 0;
}

std::optional<std::vector<size_t>> RandomSampler::next(size_t batch_size) {
  return next_of(indices_.size(), &index_, batch_size, [this](size_t i) { return indices_[i]; });
}

std::vector<size_t> random_permutation(size_t n) {
  // One Philox block (four 32-bit draws) per swap, reserved from the global
  // generator so the next random op draws past them.
  const RngState state = dtr::detail::reserve_rng(4 * uint64_t(n));
  std::vector<size_t> out(n);
  std::iota(out.begin(), out.end(), size_t(0));
  detail::shuffle_in_place(out.data(), n, state.seed, state.offset / 4);
  return out;
}

}  // namespace dtr::data::samplers
