// torch::data::transforms: what Dataset::map applies to the examples or
// batches a dataset gives. Normalize works on each example's data, Stack
// collates a batch of examples into one Example of stacked tensors, Lambda
// wraps a function.
//
//   auto ds = dtr::data::datasets::MNIST(root)
//                 .map(dtr::data::transforms::Normalize<>(0.1307, 0.3081))
//                 .map(dtr::data::transforms::Stack<>());
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "eager/data/example.h"
#include "eager/tensor.h"

namespace dtr::data::transforms {

/// torch::data::transforms::BatchTransform: turns a whole batch (what a
/// dataset's get_batch returns) into another; Dataset::map(t) calls
/// t.apply_batch on every batch.
template <typename InputBatch, typename OutputBatch>
class BatchTransform {
 public:
  using InputBatchType = InputBatch;
  using OutputBatchType = OutputBatch;
  virtual ~BatchTransform() = default;
  virtual OutputBatch apply_batch(InputBatch input_batch) = 0;
};

/// torch::data::transforms::Transform: a BatchTransform applied to each
/// example of a std::vector batch on its own (apply).
template <typename Input, typename Output>
class Transform : public BatchTransform<std::vector<Input>, std::vector<Output>> {
 public:
  using InputType = Input;
  using OutputType = Output;
  virtual Output apply(Input input) = 0;
  std::vector<Output> apply_batch(std::vector<Input> input_batch) override {
    std::vector<Output> out;
    out.reserve(input_batch.size());
    for (Input& example : input_batch) out.push_back(apply(std::move(example)));
    return out;
  }
};

/// torch::data::transforms::Lambda: a Transform from a function of one
/// example.
template <typename Input, typename Output = Input>
class Lambda : public Transform<Input, Output> {
 public:
  using FunctionType = std::function<Output(Input)>;
  explicit Lambda(FunctionType function) : function_(std::move(function)) {}
  Output apply(Input input) override { return function_(std::move(input)); }

 private:
  FunctionType function_;
};

/// torch::data::transforms::TensorTransform: a Transform of an Example's
/// data tensor (the target passes through unchanged); subclasses give
/// operator()(Tensor).
template <typename Target = Tensor>
class TensorTransform : public Transform<Example<Tensor, Target>, Example<Tensor, Target>> {
 public:
  using E = Example<Tensor, Target>;
  virtual Tensor operator()(Tensor input) = 0;
  E apply(E input) override {
    input.data = (*this)(std::move(input.data));
    return input;
  }
};

/// torch::data::transforms::TensorLambda: a TensorTransform from a function
/// of the data tensor.
template <typename Target = Tensor>
class TensorLambda : public TensorTransform<Target> {
 public:
  using FunctionType = std::function<Tensor(Tensor)>;
  explicit TensorLambda(FunctionType function) : function_(std::move(function)) {}
  Tensor operator()(Tensor input) override { return function_(std::move(input)); }

 private:
  FunctionType function_;
};

namespace detail {
/// Normalize's statistics as a float32 (C, 1, 1) tensor, which broadcasts
/// over a (C, H, W) image. Throws ValueError for an empty list.
Tensor channel_statistic(const std::vector<double>& values, const char* what);
/// (input − mean) / stddev, with mean and stddev moved to input's device and
/// dtype. Throws ValueError when their channels neither are 1 nor match the
/// input's third-from-last dimension.
Tensor normalize(const Tensor& input, const Tensor& mean, const Tensor& stddev);
}  // namespace detail

/// torch::data::transforms::Normalize: (data − mean) / stddev per channel,
/// mean and stddev one value each (all channels) or one per channel of a
/// (..., C, H, W) data tensor. The result has the data's shape and a
/// floating dtype (float32 statistics, promoted with the data's dtype).
/// Throws ValueError for empty statistics, and when applied to data whose
/// channels do not match theirs.
template <typename Target = Tensor>
class Normalize : public TensorTransform<Target> {
 public:
  Normalize(double mean, double stddev) : Normalize(std::vector<double>{mean}, std::vector<double>{stddev}) {}
  Normalize(const std::vector<double>& mean, const std::vector<double>& stddev)
      : mean_(detail::channel_statistic(mean, "mean")), stddev_(detail::channel_statistic(stddev, "stddev")) {}
  Tensor operator()(Tensor input) override { return detail::normalize(input, mean_, stddev_); }

  /// The statistics as (C, 1, 1) float32 tensors (libtorch's members).
  Tensor mean() const { return mean_; }
  Tensor stddev() const { return stddev_; }

 private:
  Tensor mean_, stddev_;
};

namespace detail {
/// One Example of the stacked data and the stacked targets (dtr::stack over
/// dimension 0). Throws ValueError for an empty batch, and stack's errors for
/// examples of unlike shapes.
Example<> stack_examples(const std::vector<Example<>>& batch);
}  // namespace detail

/// torch::data::transforms::Stack<Example<>>: collates a std::vector of
/// examples into one Example whose data and target are stacked along a new
/// leading dimension: B examples of data (1, 28, 28) and target () give
/// data (B, 1, 28, 28) and target (B).
template <typename E = Example<>>
class Stack;

template <>
class Stack<Example<>> : public BatchTransform<std::vector<Example<>>, Example<>> {
 public:
  Example<> apply_batch(std::vector<Example<>> batch) override { return detail::stack_examples(batch); }
};

}  // namespace dtr::data::transforms
