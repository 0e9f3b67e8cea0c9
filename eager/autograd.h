// Reverse-mode autograd (PyTorch semantics: requires_grad, backward,
// accumulation into .grad, retain_graph, NoGradGuard). Saved tensors are
// ordinary handles, evictable like any other (DESIGN.md step 7).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/op_registry.h"
#include "eager/tensor.h"

namespace dtr {

/// Whether ops record autograd nodes on this thread (torch.is_grad_enabled).
bool is_grad_enabled();
void set_grad_enabled(bool enabled);

/// Disables gradient recording in a scope (torch::NoGradGuard).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(is_grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

/// Sets grad mode in a scope (torch.set_grad_enabled as a context manager).
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : prev_(is_grad_enabled()) { set_grad_enabled(enabled); }
  ~GradModeGuard() { set_grad_enabled(prev_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool prev_;
};

/// What a backward rule sees.
struct BackwardContext {
  const OpDef& op;
  const Attrs& attrs;
  /// Saved inputs (undefined unless the op saves inputs, or for absent ones).
  std::span<const Tensor> inputs;
  /// Saved outputs (undefined unless the op saves outputs).
  std::span<const Tensor> outputs;
  /// Metadata of every input, always available.
  std::span<const TensorMeta> input_metas;
  /// Metadata of every output.
  std::span<const TensorMeta> output_metas;
  /// Bit i set when input i needs a gradient.
  uint64_t needs_grad_mask = 0;
  bool needs_grad(size_t i) const { return (needs_grad_mask >> i) & 1u; }
};

namespace autograd {

/// A tensor kept for backward, with the storage version at save time so an
/// in-place write in between is caught.
struct SavedTensor {
  Tensor tensor;  // detached alias: shares storage, no grad_fn (no cycles)
  uint64_t version = 0;
};

struct Edge {
  std::shared_ptr<struct Node> node;
  uint32_t input_nr = 0;
};

/// A node of the backward graph: an op application, or the accumulator of a
/// leaf's gradient.
struct Node {
  Node() = default;
  /// Iterative: a 100,000-node graph is freed without deep recursion.
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  const OpDef* op = nullptr;  // null for a gradient accumulator
  Attrs attrs;
  std::vector<SavedTensor> saved_inputs;
  std::vector<SavedTensor> saved_outputs;
  std::vector<TensorMeta> input_metas;
  std::vector<TensorMeta> output_metas;
  /// One per input of the op (node null where the input needs no grad).
  std::vector<Edge> next;
  bool released = false;  // saved tensors dropped after a backward without retain_graph
  /// For an accumulator: the leaf.
  std::weak_ptr<TensorImpl> leaf;
  /// Outputs that asked for retain_grad(), by output index.
  std::vector<std::weak_ptr<TensorImpl>> retained;
  /// Creation order; backward runs later nodes first (like PyTorch).
  uint64_t seq = 0;
  std::string name() const;
};

/// Runs backward from `roots` with `grad_roots` (same length).
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots,
                  bool retain_graph);

/// Records the backward node for an op application if grad mode is on and
/// any differentiable input requires grad; sets outputs' grad_fn.
void record(const OpDef& op, const Attrs& attrs, std::span<const Tensor> inputs,
            std::span<Tensor> outputs);

/// Throws if `op` may not write into `self` (a leaf that requires grad, or
/// a view taking part in autograd).
void check_inplace(const OpDef& op, const Tensor& self);
/// True when record() would create a node for these inputs.
bool will_record(const OpDef& op, std::span<const Tensor> inputs);

/// Reduces `grad` by summation to `shape` (undoing broadcasting).
Tensor sum_to(const Tensor& grad, IntList shape);

}  // namespace autograd
}  // namespace dtr
