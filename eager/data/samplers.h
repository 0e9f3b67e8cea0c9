// torch::data::samplers: the order in which a data loader reads a dataset's
// indices, one batch request at a time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/philox.h"

namespace dtr::data::samplers {

/// torch::data::samplers::Sampler: reset(n) starts an epoch over indices
/// 0 .. n−1 (nullopt: the size it had), next(b) gives the next at most b
/// indices or nullopt once the epoch is done.
template <typename BatchRequest = std::vector<size_t>>
class Sampler {
 public:
  using BatchRequestType = BatchRequest;
  virtual ~Sampler() = default;
  virtual void reset(std::optional<size_t> new_size = std::nullopt) = 0;
  virtual std::optional<BatchRequest> next(size_t batch_size) = 0;
};

/// torch::data::samplers::SequentialSampler: 0, 1, ..., size−1 in order.
class SequentialSampler : public Sampler<> {
 public:
  explicit SequentialSampler(size_t size) : size_(size) {}
  void reset(std::optional<size_t> new_size = std::nullopt) override;
  std::optional<std::vector<size_t>> next(size_t batch_size) override;
  /// Indices handed out so far this epoch.
  size_t index() const noexcept { return index_; }

 private:
  size_t size_;
  size_t index_ = 0;
};

/// torch::data::samplers::RandomSampler: a permutation of 0 .. size−1 per
/// epoch, drawn at construction and at every reset from dtr's global
/// generator (a Fisher–Yates shuffle over Philox draws reserved from it), so
/// a program that calls dtr::manual_seed reads the same orders on every
/// run; not torch.randperm's permutation for the same seed. index_dtype is
/// accepted for libtorch's signature (kInt64 or kInt32; ValueError
/// otherwise) and does not change what next returns.
class RandomSampler : public Sampler<> {
 public:
  explicit RandomSampler(int64_t size, DType index_dtype = DType::kInt64);
  void reset(std::optional<size_t> new_size = std::nullopt) override;
  std::optional<std::vector<size_t>> next(size_t batch_size) override;
  size_t index() const noexcept { return index_; }

 private:
  std::vector<size_t> indices_;
  size_t index_ = 0;
};

namespace detail {
/// Fisher–Yates from the top over v[0 .. n−1], one 64-bit draw per swap:
/// draw k is the first two words of Philox block first_block + k under
/// `key`. The modulo's bias is below n / 2^64.
template <typename T>
void shuffle_in_place(T* v, size_t n, uint64_t key, uint64_t first_block) {
  for (size_t i = n; i-- > 1;) {
    const std::array<uint32_t, 4> r = philox4x32_10(key, first_block + uint64_t(n - 1 - i));
    const uint64_t draw = (uint64_t(r[1]) << 32) | r[0];
    std::swap(v[i], v[draw % uint64_t(i + 1)]);
  }
}
}  // namespace detail

/// A permutation of 0 .. n−1 from the global generator (RandomSampler's
/// draw; it advances the generator).
std::vector<size_t> random_permutation(size_t n);

}  // namespace dtr::data::samplers
