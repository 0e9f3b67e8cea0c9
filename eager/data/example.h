// torch::data::Example: one (data, target) pair of a dataset, or a batch of
// them once a transform such as Stack has collated it.
#pragma once

#include <utility>

#include "eager/tensor.h"

namespace dtr::data {

/// torch::data::Example<Data, Target>: `example.data` and `example.target`.
/// A dataset's get(i) returns one; transforms::Stack turns a std::vector of
/// them into one whose members have a leading batch dimension.
template <typename Data = Tensor, typename Target = Tensor>
struct Example {
  using DataType = Data;
  using TargetType = Target;

  Example() = default;
  Example(Data data_, Target target_) : data(std::move(data_)), target(std::move(target_)) {}

  Data data;
  Target target;
};

}  // namespace dtr::data
