// The op registry: one row per op (STYLE.md "One op table"). A row holds the
// op's name, shape inference, kernel per backend, backward rule, cost
// estimate, autocast category and flags. Adding an op adds one row (in
// eager/ops/) plus its kernels (in cpu/, cuda/); nothing else learns its name.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/attrs.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/philox.h"
#include "core/shape.h"

namespace dtr {

class Tensor;            // eager/tensor.h
struct BackwardContext;  // eager/autograd.h

/// Metadata of one tensor as ops see it. For views, strides and offset (in
/// elements) describe where the view sits in its storage.
struct TensorMeta {
  Shape shape;
  Strides strides;
  int64_t offset = 0;
  DType dtype = kFloat32;
  Device device;
  int64_t numel() const { return dtr::numel(shape); }
  int64_t dim() const { return int64_t(shape.size()); }
};

/// One operand handed to a kernel: the view's first element and its layout.
struct TensorArg {
  std::byte* data = nullptr;  // element 0 of the view (storage offset applied)
  Shape shape;
  Strides strides;  // in elements
  DType dtype = kFloat32;

  int64_t numel() const { return dtr::numel(shape); }
  int64_t dim() const { return int64_t(shape.size()); }
  bool is_contiguous() const { return dtr::is_contiguous(shape, strides); }
  template <typename T>
  T* ptr() const {
    return reinterpret_cast<T*>(data);
  }
};

struct KernelContext {
  std::span<const TensorArg> inputs;
  std::span<const TensorArg> outputs;
  const Attrs& attrs;
  RngState rng;  // meaningful for ops flagged `random`
};
using KernelFn = void (*)(const KernelContext&);

/// Fills `out` with the outputs' metas (shape, dtype, device; strides and
/// offset too for views). Validates the inputs and throws typed errors that
/// name the op, shapes and dtypes.
using InferFn = void (*)(std::span<const TensorMeta> in, const Attrs& attrs,
                         std::vector<TensorMeta>& out);

/// Estimated work of one call: floating-point operations and bytes moved.
struct OpCost {
  double flops = 0;
  double bytes = 0;
  /// Flop-equivalents of scalar work (OpDef::scalar_flops_per_element):
  /// priced like flops by the roofline, never counted as flops in stats.
  double scalar_flops = 0;
};
using CostFn = OpCost (*)(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                          const Attrs& attrs);

/// Gradients of the inputs (an undefined Tensor where an input gets none).
using BackwardFn = std::vector<Tensor> (*)(const BackwardContext& ctx,
                                           std::span<const Tensor> grad_outputs);

struct OpFlags {
  bool view = false;              // output aliases input 0's storage; no kernel
  bool inplace = false;           // writes input 0 and returns it
  bool random = false;            // draws from Philox at the recorded (seed, offset)
  bool nondeterministic = false;  // kernel may differ run to run (Note [determinism])
  bool side_effect = false;       // never replayed; outputs never evicted
  bool collective = false;        // never replayed; outputs never evicted
  bool strided_inputs = false;    // kernel reads arbitrary strides (else dispatch makes inputs contiguous)
  bool cross_device = false;      // output on another device: the backends' copies, no kernel
};

/// How autocast treats the op (PyTorch's autocast op lists).
enum class AutocastPolicy : uint8_t {
  kNone,            // run in the inputs' dtypes
  kLowerPrecision,  // floating inputs cast to the autocast dtype (matmul, linear, conv)
  kFloat32,         // floating inputs cast to float32 (softmax, norms, losses)
  kPromote,         // floating inputs cast to their widest dtype (cat, stack, binary ops)
};

/// Which tensors autograd keeps for the backward rule.
enum SaveFlags : uint8_t { kSaveNone = 0, kSaveInputs = 1, kSaveOutputs = 2 };

struct OpDef {
  std::string name;
  InferFn infer = nullptr;
  CostFn cost = nullptr;  // null: bytes of inputs and outputs, one flop per output element
  /// Flop-equivalents per element (of input 0, or of output 0 when larger or
  /// when there are no inputs) added to the estimate, for kernels whose time
  /// is scalar work the flop count misses: transcendentals, Philox draws
  /// (Note [scores]). Set per op in eager/ops/init.cpp, calibrated with
  /// benchmarks/cost_model.
  double scalar_flops_per_element = 0;
  BackwardFn backward = nullptr;  // null: not differentiable
  OpFlags flags;
  AutocastPolicy autocast = AutocastPolicy::kNone;
  uint8_t save = kSaveInputs;
  /// Inputs that never get a gradient (indices, masks), as a bitmask.
  uint32_t nondiff_inputs = 0;
  std::array<KernelFn, kNumDeviceTypes> kernels{};
  int32_t id = -1;  // position in the registry

  OpCost estimate(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                  const Attrs& attrs) const;
};

/// The process-wide table. Rows are created once at start-up (eager/ops/init)
/// and never removed, so `const OpDef*` handles stay valid.
class OpRegistry {
 public:
  static OpRegistry& instance();
  /// Adds a row; throws InternalError if the name exists.
  OpDef& define(OpDef def);
  /// Sets the kernel of op `name` on `device`. Throws InternalError for an unknown op.
  void set_kernel(std::string_view name, DeviceType device, KernelFn fn);
  /// Removes the rows from position `size` on: undoes a start-up
  /// registration that threw part way (eager/ops/init.cpp), before any
  /// handle to those rows was handed out.
  void truncate(size_t size);
  /// Null when unknown.
  const OpDef* find(std::string_view name) const;
  /// Throws InternalError when unknown.
  const OpDef& get(std::string_view name) const;
  const std::vector<std::unique_ptr<OpDef>>& ops() const { return ops_; }

 private:
  std::vector<std::unique_ptr<OpDef>> ops_;
};

}  // namespace dtr
