// Reverse-mode autograd (PyTorch semantics: requires_grad, backward,
// accumulation into .grad, retain_graph, NoGradGuard). Saved tensors are
// ordinary handles, evictable like any other (DESIGN.md step 7).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <absl/container/flat_hash_set.h>

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
  /// The saved tensor's place in the graph, for a backward that records its
  /// own graph (create_graph): its grad_fn and output index (held weakly when
  /// the node saves its own output, which would be a cycle), or the leaf.
  std::shared_ptr<struct Node> grad_fn;
  std::weak_ptr<struct Node> own_grad_fn;
  uint32_t output_nr = 0;
  std::shared_ptr<TensorImpl> leaf;
};

struct Edge {
  std::shared_ptr<struct Node> node;
  uint32_t input_nr = 0;
};

/// The backward of a node defined by a closure instead of an op's rule (a
/// checkpoint region, torch.autograd.Function in spirit). Receives the saved
/// inputs (version-checked; empty once released) and one gradient per output
/// (zeros where none arrived); returns one gradient per input (undefined where
/// there is none). It may run a nested backward: the engine is re-entrant.
using CustomBackwardFn = std::function<std::vector<Tensor>(std::span<const Tensor> inputs,
                                                           std::span<const Tensor> grad_outputs)>;

/// Note [views and in-place writes]: what a CopySlices node knows of an
/// in-place write through a view. Its backward (PyTorch's CopySlices) takes
/// the gradient of the base after the write; at the view's elements it runs
/// `fn`, the write's own node, and puts the gradient of the view's old
/// values there; the other elements pass through unchanged.
struct CopySlices {
  std::shared_ptr<struct Node> fn;  // the write's node, over the view
  TensorMeta base;                  // the base's layout in the storage
  TensorMeta view;                  // the view's layout in the same storage
  int64_t storage_numel = 0;        // elements of the storage
};

/// A node of the backward graph: an op application, the accumulator of a
/// leaf's gradient, a custom node, or an in-place write through a view
/// (CopySlices).
struct Node {
  Node() = default;
  /// Iterative: a 100,000-node graph is freed without deep recursion.
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  const OpDef* op = nullptr;  // null for a gradient accumulator and a custom node
  Attrs attrs;
  /// Set for a custom node (then op is null); custom_name names it ("CheckpointFunction").
  CustomBackwardFn custom_backward;
  std::string custom_name;
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
  /// Set for a write through a view: the node is the base's grad_fn.
  std::unique_ptr<CopySlices> copy_slices;
  std::string name() const;
  bool is_accumulator() const { return op == nullptr && !custom_backward && !copy_slices; }
};

/// Runs backward from `roots` with `grad_roots` (same length), accumulating
/// into the leaves' .grad. Re-entrant: a custom node's backward may call it
/// again on a graph of its own. With `create_graph` the backward runs in
/// grad mode and records its own graph (Note [higher-order gradients]).
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots,
                  bool retain_graph, bool create_graph = false);

/// torch.autograd.grad: the gradients of `outputs` (weighted by
/// `grad_outputs`, one per output, each of its output's shape; empty or an
/// undefined entry: ones for a one-element output) with respect to `inputs`,
/// returned instead of accumulated into .grad (no leaf's .grad changes). Only
/// the part of the graph that leads to `inputs` runs. `retain_graph`
/// defaults to `create_graph`; with `create_graph` the gradients have a
/// graph of their own and can be differentiated again (a gradient penalty).
/// An input the outputs do not depend on gets an undefined tensor with
/// `allow_unused`, else ValueError; ValueError too for an output or input
/// that does not require grad, a grad_output of another shape, or lists of
/// different lengths. NotImplementedError under `create_graph` where an op's
/// backward cannot itself be differentiated yet (it names the op).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {},
                         std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                         bool allow_unused = false);

/// True while a backward pass with create_graph runs on this thread.
bool in_create_graph();

/// Queues `callback` to run once the outermost backward now running on this
/// thread has finished its graph (PyTorch's
/// Variable._execution_engine.queue_callback), before that run_backward
/// returns: a hook that fires inside a checkpoint region's nested backward
/// still queues onto the enclosing backward. Callbacks run in FIFO order
/// under no_grad and may queue more, which run in the same pass. When
/// backward (or a callback) throws, the callbacks not yet run are dropped and
/// the queue is left empty. Throws ValueError outside backward or for an
/// empty callback.
void queue_callback(std::function<void()> callback);
/// True while a run_backward is executing on this thread (callbacks included).
bool in_backward();
/// Counts the outermost run_backward calls on this thread; while one runs
/// (nested ones and its callbacks included), the number of that call, so a
/// hook can tell whether two calls belong to one backward pass.
uint64_t backward_pass_id();

/// Records one custom node for `outputs` computed from `inputs` outside
/// autograd: saves every input (like save_for_backward), links an edge for
/// each input that requires grad, and makes the floating outputs non-leaves
/// with `name` + "Backward" as grad_fn. The caller decides that a node is
/// wanted (grad mode on, something requires grad).
void record_custom(std::string name, CustomBackwardFn backward, std::span<const Tensor> inputs,
                   std::span<Tensor> outputs);

/// Collects, in a scope on this thread, every tensor that requires grad and
/// that a differentiable op reads, with grad mode on or off: how a checkpoint
/// region, run under no_grad, learns which parameters it used. Scopes nest;
/// what an inner scope sees is also reported to the enclosing one.
class ReadCapture {
 public:
  ReadCapture();
  ~ReadCapture();
  ReadCapture(const ReadCapture&) = delete;
  ReadCapture& operator=(const ReadCapture&) = delete;
  /// Distinct tensors (by handle) in order of first read.
  const std::vector<Tensor>& tensors() const { return tensors_; }
  void note(const Tensor& t);

 private:
  ReadCapture* prev_;
  std::vector<Tensor> tensors_;
  absl::flat_hash_set<const TensorImpl*> seen_;
};

/// Records the backward node for an op application if grad mode is on and
/// any differentiable input requires grad; sets outputs' grad_fn.
void record(const OpDef& op, const Attrs& attrs, std::span<const Tensor> inputs,
            std::span<Tensor> outputs);

/// Checks an in-place write of `op` into inputs[0] before it happens, with
/// PyTorch's errors: ValueError for a self whose elements overlap (an
/// expanded tensor), and in grad mode for a leaf that requires grad, a view
/// of one, an output of a multi-output view op (split, chunk) and a view made
/// in no_grad mode of a base that requires grad, when the write is recorded.
/// Regenerates the history of inputs made stale by an earlier write (Note
/// [views and in-place writes]).
void check_inplace(const OpDef& op, std::span<const Tensor> inputs);
/// Regenerates the history of a view that an in-place write through its base
/// or another view made stale: its grad_fn becomes a view of the base's
/// (PyTorch regenerates a view's grad_fn the same way). A no-op for a
/// current, detached or non-view tensor.
void refresh_view(TensorImpl& impl);
/// True when record() would create a node for these inputs.
bool will_record(const OpDef& op, std::span<const Tensor> inputs);

/// Reduces `grad` by summation to `shape` (undoing broadcasting).
Tensor sum_to(const Tensor& grad, IntList shape);

}  // namespace autograd
}  // namespace dtr
