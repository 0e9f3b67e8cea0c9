// The op registry: one row per op (STYLE.md "One op table"). A row holds the
// op's name, declared parameters, shape inference, kernel per backend,
// backward rule, cost estimate and calibration, autocast category and flags.
// Adding an op adds one row (in eager/ops/) plus its kernels (in cpu/,
// cuda/); nothing else learns its name.
#pragma once

#include <absl/container/flat_hash_map.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
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
  /// The device the operands are on (a backend with several devices, such
  /// as CUDA, runs the kernel there).
  Device device;
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

/// How autocast treats the op (PyTorch's autocast op lists; Note [autocast
/// lists] at OpDef::autocast).
enum class AutocastPolicy : uint8_t {
  kNone,            // run in the inputs' dtypes
  kLowerPrecision,  // floating inputs cast to the autocast dtype (matmul, linear, conv)
  kFloat32,         // floating inputs cast to float32 (softmax, norms, losses)
  kPromote,         // floating inputs cast to their widest dtype (cat, stack, binary ops)
};

/// Which tensors autograd keeps for the backward rule.
enum SaveFlags : uint8_t { kSaveNone = 0, kSaveInputs = 1, kSaveOutputs = 2 };

/// The type of one attribute, in AttrValue's order.
enum class ParamType : uint8_t { kInt, kFloat, kBool, kInts, kDType };
/// "int", "float", "bool", "ints" or "dtype".
std::string_view param_type_name(ParamType t);
/// The ParamType of the value `v` holds.
inline ParamType param_type_of(const AttrValue& v) { return ParamType(v.index()); }

/// One declared attribute of an op: its key and type; whether the op needs
/// it (a required parameter is read unconditionally; an optional one may be
/// absent, which means something: no `min` bound of clamp, no squeeze dim);
/// and the default OpDef::make_attrs fills in when a caller leaves it out.
/// An optional parameter's default is what the kernels use when it is
/// absent, so filling it in changes nothing.
struct ParamSpec {
  std::string name;
  ParamType type = ParamType::kInt;
  bool required = true;
  std::optional<AttrValue> default_value;
};

/// Terse ParamSpec builders for the rows: param::i("dim") is a required
/// int, param::f("alpha", 1.0) a required float that make_attrs defaults to
/// 1, param::optional(param::f("min")) a float that may be absent.
namespace param {
ParamSpec i(std::string name);
ParamSpec i(std::string name, int64_t default_value);
ParamSpec f(std::string name);
ParamSpec f(std::string name, double default_value);
ParamSpec b(std::string name);
ParamSpec b(std::string name, bool default_value);
ParamSpec ints(std::string name);
ParamSpec dtype(std::string name);
ParamSpec optional(ParamSpec p);
}  // namespace param

/// Whether a row needs a kernel per backend or is built from other ops.
/// Every row today is primitive (view rows have no kernel: dispatch builds
/// their metadata); composite functions such as scaled_dot_product_attention
/// call other ops' rows and have no row of their own.
enum class OpKind : uint8_t {
  kPrimitive,  // one kernel per backend (none for a view)
  kComposite,  // built from other ops; never has a kernel
};

struct OpDef {
  std::string name;
  /// The attributes the op reads and its callers set (check_attrs).
  std::vector<ParamSpec> params;
  InferFn infer = nullptr;
  CostFn cost = nullptr;  // null: bytes of inputs and outputs, one flop per output element
  /// Flop-equivalents per element (of input 0, or of output 0 when larger or
  /// when there are no inputs) added to the estimate, for kernels whose time
  /// is scalar work the flop count misses: transcendentals, Philox draws.
  /// Set on the row where it is defined, calibrated with benchmarks/cost_model.
  ///
  /// Note [scores]: the roofline prices an op by flops at the device's peak
  /// (vectorized FMA) or bytes at its bandwidth. Kernels built on scalar
  /// transcendentals or Philox draws run far below that peak, so their
  /// estimates were 6x (softmax) to 111x (randn) below the measured time, and
  /// the heuristics evicted and replayed them as if they were free: an LSTM
  /// whose randn inputs were evicted spent 37% of a budgeted step redrawing
  /// them. Each such row adds flop-equivalents per element (measured ns per
  /// element x 90 GFLOP/s, the CPU peak of estimate_seconds), from
  /// benchmarks/cost_model on an AVX-512 Xeon, one thread. The numbers are a
  /// property of the CPU kernels; the CUDA roofline scales them by its own peak.
  double scalar_flops_per_element = 0;
  BackwardFn backward = nullptr;  // null: not differentiable
  OpFlags flags;
  /// Note [autocast lists]. Autocast is per device type, as PyTorch's, and
  /// so are its lists. `autocast` is the op's policy on CUDA and every device
  /// type but the CPU: PyTorch 2.x's lists for CUDA (AT_FORALL_LOWER_PRECISION_FP,
  /// AT_FORALL_FP32, AT_FORALL_FP32_SET_OPT_DTYPE, AT_FORALL_PROMOTE in
  /// aten/src/ATen/autocast_mode.h). `autocast_cpu` is its policy on the CPU,
  /// from PyTorch 2.x's CPU lists (TORCH_LIBRARY_IMPL(aten, AutocastCPU) in
  /// aten/src/ATen/autocast_mode.cpp), which differ: no elementwise op, no
  /// softmax and no norm is on them (they run in their input's dtype there),
  /// while reflection_pad1d/2d run in float32; unset where the two agree
  /// (matmul, linear, conv, attention in the lower precision; the losses in
  /// float32; cat in the widest dtype). Use autocast_policy(device_type).
  AutocastPolicy autocast = AutocastPolicy::kNone;
  std::optional<AutocastPolicy> autocast_cpu;
  uint8_t save = kSaveInputs;
  /// Inputs that never get a gradient (indices, masks), as a bitmask.
  uint32_t nondiff_inputs = 0;
  /// Inputs autograd does not keep although `save` has kSaveInputs, as a
  /// bitmask: the backward rule reads only their metadata (input_metas), as
  /// the source of index_select and gather, or the values of where and
  /// masked_fill (PyTorch keeps only the index or the mask too). The graph
  /// then neither holds them nor breaks when they are written in place later
  /// (`y = x[idx]; x[mask] = 0; y.sum().backward()`).
  uint32_t unsaved_inputs = 0;
  /// How many inputs the op takes: min_inputs to max_inputs (-1: no upper
  /// bound). Dispatch checks it before anything reads an input, so a binding
  /// that passes any number gets a ValueError instead of an infer function
  /// reading past its span. min_inputs -1: not declared on this row yet, and
  /// unchecked.
  int16_t min_inputs = -1;
  int16_t max_inputs = -1;
  OpKind kind = OpKind::kPrimitive;
  std::array<KernelFn, kNumDeviceTypes> kernels{};
  int32_t id = -1;  // position in the registry

  OpCost estimate(std::span<const TensorMeta> in, std::span<const TensorMeta> out,
                  const Attrs& attrs) const;
  /// The autocast policy for inputs on `device_type`: autocast_cpu on the
  /// CPU where set, else autocast (Note [autocast lists]).
  AutocastPolicy autocast_policy(DeviceType device_type) const {
    return device_type == DeviceType::kCPU && autocast_cpu ? *autocast_cpu : autocast;
  }
  /// Checks `attrs` against `params`: ValueError for a key the op does not
  /// declare (naming the op, the key and the declared parameters) and for a
  /// missing required parameter; TypeError for a value of another type
  /// (naming the op, the parameter, the expected and the actual type).
  void check_attrs(const Attrs& attrs) const;
  /// Attributes built by name at run time (what bindings do): checked as
  /// check_attrs does, with the declared defaults filled in for absent keys.
  /// ValueError too for a key given twice.
  Attrs make_attrs(std::span<const std::pair<std::string, AttrValue>> values) const;
  /// ValueError naming the op and the declared count unless `n` inputs fit
  /// min_inputs..max_inputs (no check when min_inputs is -1).
  void check_input_count(size_t n) const {
    if (min_inputs >= 0 && (n < size_t(min_inputs) || (max_inputs >= 0 && n > size_t(max_inputs))))
        [[unlikely]] {
      throw_input_count(n);
    }
  }
  /// Sets min_inputs = max_inputs = n.
  OpDef& inputs(int16_t n) {
    min_inputs = max_inputs = n;
    return *this;
  }
  /// The declared parameters as "dim (int), keepdim (bool)", or "none".
  std::string params_str() const;

 private:
  [[noreturn]] void throw_input_count(size_t n) const;
};

/// The process-wide table. Rows are created once at start-up (eager/ops/init)
/// and never removed, so `const OpDef*` handles stay valid.
class OpRegistry {
 public:
  static OpRegistry& instance();
  /// Adds a row; throws InternalError if the name exists.
  OpDef& define(OpDef def);
  /// Sets the kernel of op `name` on `device`, once at start-up (dispatch
  /// reads it from the row). Throws InternalError for an unknown op or a
  /// composite row.
  void set_kernel(std::string_view name, DeviceType device, KernelFn fn);
  /// Removes the rows from position `size` on: undoes a start-up
  /// registration that threw part way (eager/ops/init.cpp), before any
  /// handle to those rows was handed out.
  void truncate(size_t size);
  /// Null when unknown. A hash lookup, for start-up and for call sites that
  /// cache the row (`static const OpDef& o = op("add")`), never per call.
  const OpDef* find(std::string_view name) const;
  /// Throws ValueError naming `name` when unknown (a caller's name, e.g. a
  /// binding's: not an internal error).
  const OpDef& get(std::string_view name) const;
  const std::vector<std::unique_ptr<OpDef>>& ops() const { return ops_; }

  /// When on, dispatch checks every op's attributes against its row's
  /// declared parameters (on_dispatch). Off by default (one relaxed load per
  /// op); the test suite turns it on for every test.
  static void set_check_attrs(bool on) { check_attrs_.store(on, std::memory_order_relaxed); }
  static bool check_attrs_enabled() { return check_attrs_.load(std::memory_order_relaxed); }
  /// Sees every row dispatch runs while checking is on (null: none). For
  /// tests that ask which rows a call reaches.
  using DispatchObserver = void (*)(const OpDef& op);
  static void set_dispatch_observer(DispatchObserver f) {
    observer_.store(f, std::memory_order_relaxed);
  }
  /// What dispatch calls first for every op while checking is on: throws as
  /// OpDef::check_attrs does, then tells the observer.
  static void on_dispatch(const OpDef& op, const Attrs& attrs) {
    op.check_attrs(attrs);
    if (DispatchObserver f = observer_.load(std::memory_order_relaxed)) f(op);
  }

 private:
  std::vector<std::unique_ptr<OpDef>> ops_;
  absl::flat_hash_map<std::string, OpDef*> by_name_;
  inline static std::atomic<bool> check_attrs_{false};
  inline static std::atomic<DispatchObserver> observer_{nullptr};
};

}  // namespace dtr
