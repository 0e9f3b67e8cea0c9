// Loss modules of torch.nn with libtorch's options: MSELoss, L1Loss,
// NLLLoss, CrossEntropyLoss, BCELoss, BCEWithLogitsLoss, SmoothL1Loss.
// Each forward(input, target) calls the function of the same name in
// dtr::nn::functional; the reduction is a tag (dtr::kMean, kSum, kNone) or
// dtr::Reduction::Mean/Sum/None, default mean.
//
//   nn::CrossEntropyLoss loss_fn(nn::CrossEntropyLossOptions().label_smoothing(0.1));
//   Tensor loss = loss_fn(logits, targets);
#pragma once

#include <type_traits>

#include "eager/nn/enumtype.h"
#include "eager/nn/module.h"
#include "eager/nn/options.h"

namespace dtr::nn {

/// torch::nn::MSELossOptions (also L1LossOptions): reduction mean.
struct MSELossOptions {
  MSELossOptions() = default;
  /// From a tag (dtr::kSum) or a Reduction::Reduction.
  template <typename R, typename = std::enable_if_t<std::is_convertible_v<R, LossReduction>>>
  MSELossOptions(R reduction) : reduction_(reduction) {}  // NOLINT
  DTR_ARG(LossReduction, reduction) = {};
};
using L1LossOptions = MSELossOptions;

/// torch::nn::NLLLossOptions: weight (C class weights; undefined: all 1),
/// ignore_index -100, reduction mean.
struct NLLLossOptions {
  NLLLossOptions() = default;
  /// From a tag (dtr::kSum) or a Reduction::Reduction.
  template <typename R, typename = std::enable_if_t<std::is_convertible_v<R, LossReduction>>>
  NLLLossOptions(R reduction) : reduction_(reduction) {}  // NOLINT
  DTR_ARG(Tensor, weight) = {};
  DTR_ARG(int64_t, ignore_index) = -100;
  DTR_ARG(LossReduction, reduction) = {};
};

/// torch::nn::CrossEntropyLossOptions: weight (C class weights; undefined:
/// all 1), ignore_index -100, reduction mean, label_smoothing 0.
struct CrossEntropyLossOptions {
  CrossEntropyLossOptions() = default;
  /// From a tag (dtr::kSum) or a Reduction::Reduction.
  template <typename R, typename = std::enable_if_t<std::is_convertible_v<R, LossReduction>>>
  CrossEntropyLossOptions(R reduction) : reduction_(reduction) {}  // NOLINT
  DTR_ARG(Tensor, weight) = {};
  DTR_ARG(int64_t, ignore_index) = -100;
  DTR_ARG(LossReduction, reduction) = {};
  DTR_ARG(double, label_smoothing) = 0.0;
};

/// torch::nn::BCELossOptions: weight (undefined: none; else broadcast to
/// the input and multiplied in), reduction mean.
struct BCELossOptions {
  BCELossOptions() = default;
  /// From a tag (dtr::kSum) or a Reduction::Reduction.
  template <typename R, typename = std::enable_if_t<std::is_convertible_v<R, LossReduction>>>
  BCELossOptions(R reduction) : reduction_(reduction) {}  // NOLINT
  DTR_ARG(Tensor, weight) = {};
  DTR_ARG(LossReduction, reduction) = {};
};

/// torch::nn::BCEWithLogitsLossOptions: weight and pos_weight (undefined:
/// none), reduction mean.
struct BCEWithLogitsLossOptions {
  BCEWithLogitsLossOptions() = default;
  /// From a tag (dtr::kSum) or a Reduction::Reduction.
  template <typename R, typename = std::enable_if_t<std::is_convertible_v<R, LossReduction>>>
  BCEWithLogitsLossOptions(R reduction) : reduction_(reduction) {}  // NOLINT
  DTR_ARG(Tensor, weight) = {};
  DTR_ARG(LossReduction, reduction) = {};
  DTR_ARG(Tensor, pos_weight) = {};
};

/// torch::nn::SmoothL1LossOptions: reduction mean, beta 1.
struct SmoothL1LossOptions {
  SmoothL1LossOptions() = default;
  /// From a tag (dtr::kSum) or a Reduction::Reduction.
  template <typename R, typename = std::enable_if_t<std::is_convertible_v<R, LossReduction>>>
  SmoothL1LossOptions(R reduction) : reduction_(reduction) {}  // NOLINT
  DTR_ARG(LossReduction, reduction) = {};
  DTR_ARG(double, beta) = 1.0;
};

/// Declares XImpl, a module whose forward(input, target) is F::fn(input,
/// target, options), and its holder X.
#define DTR_LOSS_MODULE(X, Opts)                                         \
  class X##Impl : public Module {                                        \
   public:                                                               \
    explicit X##Impl(const Opts& options = {}) : Module(#X), options(options) {} \
    Tensor forward(const Tensor& input, const Tensor& target);           \
    Opts options;                                                        \
  };                                                                     \
  DTR_MODULE(X)

/// torch.nn.MSELoss: (input - target)^2, reduced.
DTR_LOSS_MODULE(MSELoss, MSELossOptions);
/// torch.nn.L1Loss: |input - target|, reduced.
DTR_LOSS_MODULE(L1Loss, L1LossOptions);
/// torch.nn.NLLLoss: input log-probabilities (N, C) or (N, C, d...), int64
/// target (N) or (N, d...).
DTR_LOSS_MODULE(NLLLoss, NLLLossOptions);
/// torch.nn.CrossEntropyLoss: logits (N, C) or (N, C, d...), int64 class
/// target, with label smoothing.
DTR_LOSS_MODULE(CrossEntropyLoss, CrossEntropyLossOptions);
/// torch.nn.BCELoss: probabilities in [0, 1] against targets of the same shape.
DTR_LOSS_MODULE(BCELoss, BCELossOptions);
/// torch.nn.BCEWithLogitsLoss: sigmoid + BCE, computed stably from logits.
DTR_LOSS_MODULE(BCEWithLogitsLoss, BCEWithLogitsLossOptions);
/// torch.nn.SmoothL1Loss: 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere.
DTR_LOSS_MODULE(SmoothL1Loss, SmoothL1LossOptions);

#undef DTR_LOSS_MODULE

}  // namespace dtr::nn
