// Static activation checkpointing (torch.utils.checkpoint): a region runs
// without keeping its intermediates and is recomputed during backward. The
// DTR runtime (remat/) needs no annotations; these regions are the classic
// baseline (Chen et al. 2016, √N segments) and a way to port PyTorch code.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "eager/nn/module.h"
#include "eager/tensor.h"

namespace dtr {

/// Runs `fn(inputs)` without recording its autograd graph and recomputes it
/// during backward; matches torch.utils.checkpoint.checkpoint
/// (use_reentrant=True, preserve_rng_state=True) of PyTorch 1.13.
///
/// Forward: `fn` runs under no_grad, so its intermediates are freed as soon
/// as nothing uses them. The RNG state (seed, offset) and the thread's
/// dispatch state (DispatchState: grad mode, autocast) at entry are
/// recorded. When grad mode is on and something requires grad, the outputs
/// get one grad_fn, "CheckpointFunctionBackward", holding the inputs.
///
/// Backward: the RNG state and dispatch state of the forward are restored
/// (those current before the backward are put back afterwards, also when
/// `fn` throws, like torch.random.fork_rng), `fn` runs again with grad
/// enabled (as recorded) on detached copies of the inputs (each requiring grad like its original), and the
/// incoming output gradients are back-propagated through that recomputed
/// graph in a nested backward. Parameters used inside `fn` have their
/// gradients accumulated into .grad as usual; input gradients flow on to
/// the inputs' producers. Forward values, losses and gradients are bitwise
/// those of calling `fn` directly (deterministic kernels), dropout included.
///
/// One deliberate difference from PyTorch 1.13: when no input requires grad,
/// PyTorch's reentrant variant leaves the parameters used inside `fn` without
/// gradients (with a warning); here the outputs still require grad whenever
/// `fn` reads a leaf that requires grad, and those leaves get their gradients
/// (as with use_reentrant=False). Like PyTorch, `fn` runs twice per training
/// step, so side effects inside it (BatchNorm running statistics) happen twice.
///
/// `inputs` may be any shapes and dtypes; non-floating inputs get no
/// gradient. Every tensor that requires grad and that `fn` reads must be a
/// parameter (a leaf) or one of `inputs`.
///
/// Throws ValueError when `fn` is empty, an input is undefined, `fn` returns
/// no tensors or an undefined one, or `fn` reads a non-leaf tensor that
/// requires grad and is not among `inputs` (its gradient could not flow).
/// During backward: Error when the recomputed outputs differ in number,
/// shape or dtype from the forward ones (fn must be deterministic), when
/// none of them requires grad ("checkpoint is not needed"), or on a second
/// backward without retain_graph (like any node); a saved input modified in
/// place after the forward fails the usual version check.
std::vector<Tensor> checkpoint(
    std::function<std::vector<Tensor>(const std::vector<Tensor>&)> fn,
    const std::vector<Tensor>& inputs);

/// One input, one output: checkpoint([&](v) { return {fn(v[0])}; }, {input})[0].
/// Same semantics and errors as the vector form; also throws ValueError when
/// `fn` returns an undefined tensor.
Tensor checkpoint(std::function<Tensor(const Tensor&)> fn, const Tensor& input);

/// Splits `functions` (applied in order to one tensor) into `segments` chunks
/// and checkpoints every chunk but the last, which runs normally so its
/// graph is ready for backward; matches
/// torch.utils.checkpoint.checkpoint_sequential of PyTorch 1.13 (reentrant):
/// the first segments-1 chunks hold len/segments functions each (integer
/// division) and the last chunk takes the rest. With segments = 1 nothing is
/// checkpointed. Memory: one segment's intermediates plus the segment
/// boundaries; segments ≈ √len gives the O(√N) schedule of Chen et al.
///
/// Throws ValueError when `functions` is empty or holds an empty function,
/// when `segments` < 1 or > the number of functions, or for an undefined
/// input; otherwise as checkpoint().
Tensor checkpoint_sequential(const std::vector<std::function<Tensor(const Tensor&)>>& functions,
                             int64_t segments, const Tensor& input);

/// checkpoint_sequential over the children of `modules`, in order (PyTorch
/// accepts an nn.Sequential the same way). Same semantics and errors.
Tensor checkpoint_sequential(const nn::SequentialImpl& modules, int64_t segments, const Tensor& input);
/// As above, through the holder (ValueError when it is empty).
Tensor checkpoint_sequential(const nn::Sequential& modules, int64_t segments, const Tensor& input);

}  // namespace dtr
