// dtr._C: errors, dtype and device, the free ops (eager/ops.h), grad mode,
// autocast, the budget and stats, the generator, nn.init and the optimizers.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <memory>

#include "bindings.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace dtr::python {
namespace {

PyObject* g_oom_error = nullptr;
PyObject* g_device_error = nullptr;

TensorOptions options(std::optional<DType> dtype, std::optional<Device> device,
                      bool requires_grad = false) {
  TensorOptions o;
  if (dtype) o = o.dtype(*dtype);
  if (device) o = o.device(*device);
  return o.requires_grad(requires_grad);
}

std::optional<Scalar> opt_scalar(nb::handle h) {
  if (h.is_none()) return std::nullopt;
  return to_scalar(h);
}

/// An int or a sequence of ints (PyTorch's `dim=1` / `dim=(0, 1)`); None → {}.
std::vector<int64_t> dims_of(nb::handle h) {
  if (h.is_none()) return {};
  if (PyLong_Check(h.ptr())) return {nb::cast<int64_t>(h)};
  return nb::cast<std::vector<int64_t>>(h);
}

/// An int or an (h, w) pair, as PyTorch's _pair.
std::vector<int64_t> pair_of(nb::handle h) {
  if (PyLong_Check(h.ptr())) {
    const int64_t v = nb::cast<int64_t>(h);
    return {v, v};
  }
  return nb::cast<std::vector<int64_t>>(h);
}

nb::dict stats_dict(const remat::Stats& s) {
  nb::dict d;
  d["budget_bytes"] = s.budget_bytes;
  d["resident_bytes"] = s.resident_bytes;
  d["peak_bytes"] = s.peak_bytes;
  d["evictions"] = s.evictions;
  d["eager_frees"] = s.eager_frees;
  d["allocations"] = s.allocations;
  d["rematerializations"] = s.rematerializations;
  d["recomputed_ops"] = s.recomputed_ops;
  d["recomputed_flops"] = s.recomputed_flops;
  d["recompute_seconds_estimated"] = s.recompute_seconds_estimated;
  d["recompute_seconds_measured"] = s.recompute_seconds_measured;
  d["swap_outs"] = s.swap_outs;
  d["swap_ins"] = s.swap_ins;
  d["swapped_bytes"] = s.swapped_bytes;
  d["swap_bytes_out"] = s.swap_bytes_out;
  d["swap_bytes_in"] = s.swap_bytes_in;
  d["swap_seconds_estimated"] = s.swap_seconds_estimated;
  d["host_tier_bytes"] = s.host_tier_bytes;
  d["window_evictions"] = s.window_evictions;
  d["allocated_bytes"] = s.allocated_bytes;
  d["reserved_bytes"] = s.reserved_bytes;
  d["largest_free_block"] = s.largest_free_block;
  d["peak_allocated_bytes"] = s.peak_allocated_bytes;
  d["fragmentation"] = s.fragmentation;
  d["metadata_nodes"] = s.metadata_nodes;
  d["live_storages"] = s.live_storages;
  return d;
}

/// A budget as bytes (int) or text ("64MiB", "60%", "none"); None = unlimited.
/// TypeError for anything else, a bool included (an int subclass in Python:
/// True would be a budget of one byte).
std::optional<int64_t> budget_bytes(nb::handle budget, Device device) {
  if (budget.is_none()) return std::nullopt;
  if (PyLong_Check(budget.ptr()) && !PyBool_Check(budget.ptr())) {
    const int64_t b = nb::cast<int64_t>(budget);
    DTR_CHECK(b > 0, ValueError, "set_budget: the budget must be positive, got {}", b);
    return b;
  }
  if (!PyUnicode_Check(budget.ptr())) {
    throw TypeError(fmt::format("set_budget: expected an int number of bytes, a string such as "
                                "'64MiB' or None, got {}",
                                nb::type_name(budget.type()).c_str()));
  }
  const std::string text = nb::cast<std::string>(budget);
  const absl::StatusOr<MemoryBudget> parsed = parse_memory_budget(text);
  DTR_CHECK(parsed.ok(), ValueError, "set_budget: {}", std::string(parsed.status().message()));
  return parsed->resolve(backend(device).memory_bytes(device.index));
}

nb::dict state_to_dict(const StateDict& s) {
  nb::dict d;
  for (const auto& [k, v] : s) d[nb::str(k.c_str())] = v;
  return d;
}

/// An elementwise op, run without the GIL on large inputs (release_if_large).
template <Tensor (*F)(const Tensor&)>
Tensor unary(const Tensor& x) {
  return release_if_large(x.numel(), [&] { return F(x); });
}

/// A dict of str to Tensor as a StateDict; `fn` names the caller in the
/// TypeError for a key that is not a str or a value that is not a Tensor.
StateDict dict_to_state(const nb::dict& d, std::string_view fn) {
  StateDict s;
  for (auto [k, v] : d) {
    if (!PyUnicode_Check(k.ptr())) {
      throw TypeError(fmt::format("{}: key {} is {}; expected str", fn,
                                  nb::repr(k).c_str(), nb::type_name(k.type()).c_str()));
    }
    if (!is_tensor(v)) {
      throw TypeError(fmt::format("{}: the value of key {} is {}; expected a Tensor", fn,
                                  nb::repr(k).c_str(), nb::type_name(v.type()).c_str()));
    }
    s.insert(nb::cast<std::string>(k), nb::cast<Tensor>(v));
  }
  return s;
}

/// A device type by PyTorch's name for torch.autocast ("cpu", "cuda",
/// "privateuseone"); RuntimeError with PyTorch's message otherwise.
DeviceType autocast_device_type(std::string_view name) {
  for (int t = 0; t < kNumDeviceTypes; ++t) {
    if (device_type_name(DeviceType(t)) == name) return DeviceType(t);
  }
  throw std::runtime_error(
      fmt::format("User specified an unsupported autocast device_type '{}'", name));
}

}  // namespace

void bind_errors(nb::module_& m) {
  g_oom_error = PyErr_NewExceptionWithDoc(
      "dtr.OutOfMemoryError",
      "The memory budget cannot hold an op's inputs and outputs even after evicting everything "
      "evictable (dtr::OutOfMemoryError).",
      PyExc_MemoryError, nullptr);
  g_device_error = PyErr_NewExceptionWithDoc(
      "dtr.DeviceError", "A device that does not exist or cannot do this (dtr::DeviceError).",
      PyExc_RuntimeError, nullptr);
  m.attr("OutOfMemoryError") = nb::handle(g_oom_error);
  m.attr("DeviceError") = nb::handle(g_device_error);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const OutOfMemoryError& e) {
      PyErr_SetString(g_oom_error, e.what());
    } catch (const DeviceError& e) {
      PyErr_SetString(g_device_error, e.what());
    } catch (const ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what());
    } catch (const NotImplementedError& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what());
    } catch (const Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });
}

void bind_types(nb::module_& m) {
  nb::enum_<DType>(m, "dtype")
      .value("float32", kFloat32)
      .value("float64", kFloat64)
      .value("float16", kFloat16)
      .value("bfloat16", kBFloat16)
      .value("int64", kInt64)
      .value("int32", kInt32)
      .value("bool", kBool)
      .value("uint8", kUInt8)
      .def_prop_ro("itemsize", [](DType t) { return itemsize(t); })
      .def_prop_ro("is_floating_point", [](DType t) { return is_floating(t); })
      .def("__repr__", [](DType t) { return "dtr." + std::string(dtype_name(t)); })
      .def("__str__", [](DType t) { return "dtr." + std::string(dtype_name(t)); });

  nb::class_<Device>(m, "device")
      .def(nb::init<std::string_view>(), "spec"_a, "dtr.device('cpu'), dtr.device('cuda:0')")
      .def("__init__",
           [](Device* d, std::string_view type, int index) {
             new (d) Device(std::string(type) + ":" + std::to_string(index));
           },
           "type"_a, "index"_a)
      .def_prop_ro("type", [](const Device& d) { return std::string(device_type_name(d.type)); })
      .def_prop_ro("index", [](const Device& d) -> std::optional<int> {
        if (d.is_cpu() && d.index == 0) return std::nullopt;
        return d.index;
      })
      .def("__str__", &Device::str)
      .def("__repr__", [](const Device& d) {
        return fmt::format("device(type='{}'{})", device_type_name(d.type),
                           d.is_cpu() ? std::string() : fmt::format(", index={}", d.index));
      })
      .def("__eq__", [](const Device& a, nb::handle b) {
        if (nb::isinstance<Device>(b)) return a == nb::cast<Device>(b);
        if (PyUnicode_Check(b.ptr())) return a == Device(nb::cast<std::string>(b));
        return false;
      })
      .def("__hash__", [](const Device& d) { return int(d.type) * 1024 + d.index; });
}

void bind_functions(nb::module_& m) {
  using T = const Tensor&;
  using OT = std::optional<Tensor>;
  auto undef = [](const OT& t) { return t.value_or(Tensor()); };
  const auto dt = nb::arg("dtype") = nb::none();
  const auto dev = nb::arg("device") = nb::none();
  const auto rg = nb::arg("requires_grad") = false;

  // ---- creation
  // zeros(size, dtype, device, requires_grad) and its siblings.
  auto factory = [&](const char* name, Tensor (*fn)(IntList, TensorOptions)) {
    m.def(name, [fn](const std::vector<int64_t>& s, std::optional<DType> d, std::optional<Device> v,
                     bool r) { return fn(s, options(d, v, r)); },
          "size"_a, dt, dev, rg);
  };
  factory("zeros", &zeros);
  factory("ones", &ones);
  factory("empty", &empty);
  factory("rand", &rand);
  factory("randn", &randn);
  m.def("full", [](const std::vector<int64_t>& s, nb::handle value, std::optional<DType> d,
                   std::optional<Device> v, bool r) { return full(s, to_scalar(value), options(d, v, r)); },
        "size"_a, "fill_value"_a, dt, dev, rg);
  m.def("randint", [](int64_t low, int64_t high, const std::vector<int64_t>& s,
                      std::optional<DType> d, std::optional<Device> v, bool r) {
          return randint(low, high, s, options(d, v, r));
        },
        "low"_a, "high"_a, "size"_a, dt, dev, rg);
  m.def("arange", [](nb::handle start, nb::handle end, nb::handle step, std::optional<DType> d,
                     std::optional<Device> v, bool r) {
          if (end.is_none()) return arange(to_scalar(start), options(d, v, r));
          return arange(to_scalar(start), to_scalar(end), to_scalar(step), options(d, v, r));
        },
        "start"_a, "end"_a = nb::none(), "step"_a = 1, dt, dev, rg);
  m.def("zeros_like", &zeros_like);
  m.def("ones_like", &ones_like);
  m.def("empty_like", &empty_like);
  m.def("rand_like", &rand_like);
  m.def("randn_like", &randn_like);
  m.def("full_like", [](T t, nb::handle v) { return full_like(t, to_scalar(v)); });
  // A copy of a C-contiguous host array into a new tensor (dtr.tensor).
  m.def("_from_array",
        [](nb::ndarray<nb::numpy, nb::c_contig, nb::device::cpu> a, DType src, DType dst,
           std::optional<Device> v, bool r) {
          std::vector<int64_t> s;
          for (size_t i = 0; i < a.ndim(); ++i) s.push_back(int64_t(a.shape(i)));
          return detail::from_host(a.data(), int64_t(a.size()), src, s, options(dst, v, r));
        },
        "array"_a, "src_dtype"_a, "dtype"_a, dev, rg);

  // ---- unary
  m.def("neg", &unary<&neg>);
  m.def("abs", &unary<&dtr::abs>);
  m.def("exp", &unary<&dtr::exp>);
  m.def("log", &unary<&dtr::log>);
  m.def("sqrt", &unary<&dtr::sqrt>);
  m.def("rsqrt", &unary<&rsqrt>);
  m.def("tanh", &unary<&dtr::tanh>);
  m.def("sigmoid", &unary<&sigmoid>);
  m.def("relu", &unary<&relu>);
  m.def("reciprocal", &unary<&reciprocal>);
  m.def("silu", &unary<&silu>);
  m.def("gelu", [](T x, std::string_view a) { return release_if_large(x.numel(), [&] { return gelu(x, a); }); }, "input"_a,
        "approximate"_a = "none");
  m.def("clamp", [](T x, nb::handle lo, nb::handle hi) { return clamp(x, opt_scalar(lo), opt_scalar(hi)); },
        "input"_a, "min"_a = nb::none(), "max"_a = nb::none());
  m.def("maximum", &maximum);
  m.def("minimum", &minimum);
  m.def("where", &where, "condition"_a, "input"_a, "other"_a);
  m.def("add", [](T a, T b, nb::handle alpha) { return add(a, b, to_scalar(alpha)); }, "input"_a,
        "other"_a, "alpha"_a = 1);
  m.def("sub", [](T a, T b, nb::handle alpha) { return sub(a, b, to_scalar(alpha)); }, "input"_a,
        "other"_a, "alpha"_a = 1);

  // ---- reductions
  m.def("sum", [](T x, nb::handle dim, bool keepdim) {
          const auto d = dims_of(dim);
          return release_if_large(x.numel(), [&] { return sum(x, d, keepdim); });
        },
        "input"_a, "dim"_a = nb::none(), "keepdim"_a = false);
  m.def("mean", [](T x, nb::handle dim, bool keepdim) {
          const auto d = dims_of(dim);
          return release_if_large(x.numel(), [&] { return mean(x, d, keepdim); });
        },
        "input"_a, "dim"_a = nb::none(), "keepdim"_a = false);
  m.def("var", [](T x, nb::handle dim, int64_t correction, bool keepdim) {
          return var(x, dims_of(dim), correction, keepdim);
        },
        "input"_a, "dim"_a = nb::none(), "correction"_a = 1, "keepdim"_a = false);
  m.def("max", [](T x, std::optional<int64_t> dim, bool keepdim) -> nb::object {
          if (!dim) return nb::cast(max(x));
          auto [v, i] = max(x, *dim, keepdim);
          return nb::make_tuple(v, i);
        },
        "input"_a, "dim"_a = nb::none(), "keepdim"_a = false);
  m.def("argmax", [](T x, std::optional<int64_t> dim, bool keepdim) {
          if (!dim) return argmax(x.reshape({-1}), 0, false);
          return argmax(x, *dim, keepdim);
        },
        "input"_a, "dim"_a = nb::none(), "keepdim"_a = false);

  // ---- linear algebra, nn.functional
  auto nogil = nb::call_guard<nb::gil_scoped_release>();
  m.def("matmul", &matmul, "input"_a, "other"_a, nogil);
  m.def("linear", [=](T x, T w, const OT& b) { return linear(x, w, undef(b)); }, "input"_a,
        "weight"_a, "bias"_a = nb::none(), nogil);
  m.def("softmax", [](T x, int64_t d) { return release_if_large(x.numel(), [&] { return softmax(x, d); }); },
        "input"_a, "dim"_a);
  m.def("log_softmax", [](T x, int64_t d) { return release_if_large(x.numel(), [&] { return log_softmax(x, d); }); },
        "input"_a, "dim"_a);
  m.def("cross_entropy", [](T x, T t, int64_t ig, std::string_view r) { return cross_entropy(x, t, ig, r); },
        "input"_a, "target"_a, "ignore_index"_a = -100, "reduction"_a = "mean", nogil);
  m.def("nll_loss", [](T x, T t, int64_t ig, std::string_view r) { return nll_loss(x, t, ig, r); },
        "input"_a, "target"_a, "ignore_index"_a = -100, "reduction"_a = "mean");
  m.def("mse_loss", [](T x, T t, std::string_view r) { return mse_loss(x, t, r); }, "input"_a,
        "target"_a, "reduction"_a = "mean");
  m.def("layer_norm", [=](T x, nb::handle shape, const OT& w, const OT& b, double eps) {
          const auto s = dims_of(shape);
          return release_if_large(x.numel(), [&] { return layer_norm(x, s, undef(w), undef(b), eps); });
        },
        "input"_a, "normalized_shape"_a, "weight"_a = nb::none(), "bias"_a = nb::none(),
        "eps"_a = 1e-5);
  m.def("rms_norm", [=](T x, nb::handle shape, const OT& w, std::optional<double> eps) {
          return rms_norm(x, dims_of(shape), undef(w), eps);
        },
        "input"_a, "normalized_shape"_a, "weight"_a = nb::none(), "eps"_a = nb::none());
  m.def("batch_norm", [=](T x, const OT& rm, const OT& rv, const OT& w, const OT& b, bool training,
                          double momentum, double eps) {
          return batch_norm(x, undef(rm), undef(rv), undef(w), undef(b), training, momentum, eps);
        },
        "input"_a, "running_mean"_a.none(), "running_var"_a.none(), "weight"_a = nb::none(),
        "bias"_a = nb::none(), "training"_a = false, "momentum"_a = 0.1, "eps"_a = 1e-5);
  // PyTorch's argument order: F.embedding(input, weight).
  m.def("embedding", [](T indices, T weight) { return embedding(weight, indices); }, "input"_a,
        "weight"_a);
  m.def("dropout", [](T x, double p, bool training) {
          return release_if_large(x.numel(), [&] { return dropout(x, p, training); });
        },
        "input"_a, "p"_a = 0.5, "training"_a = true);
  m.def("conv2d", [=](T x, T w, const OT& b, nb::handle stride, nb::handle padding,
                      nb::handle dilation, int64_t groups) {
          const auto s = pair_of(stride), p = pair_of(padding), d = pair_of(dilation);
          nb::gil_scoped_release release;
          return conv2d(x, w, undef(b), s, p, d, groups);
        },
        "input"_a, "weight"_a, "bias"_a = nb::none(), "stride"_a = 1, "padding"_a = 0,
        "dilation"_a = 1, "groups"_a = 1);
  m.def("max_pool2d", [](T x, nb::handle k, nb::handle s, nb::handle p) {
          return max_pool2d(x, pair_of(k), s.is_none() ? std::vector<int64_t>{} : pair_of(s), pair_of(p));
        },
        "input"_a, "kernel_size"_a, "stride"_a = nb::none(), "padding"_a = 0);
  m.def("avg_pool2d", [](T x, nb::handle k, nb::handle s, nb::handle p) {
          return avg_pool2d(x, pair_of(k), s.is_none() ? std::vector<int64_t>{} : pair_of(s), pair_of(p));
        },
        "input"_a, "kernel_size"_a, "stride"_a = nb::none(), "padding"_a = 0);
  m.def("adaptive_avg_pool2d", [](T x, nb::handle s) { return adaptive_avg_pool2d(x, pair_of(s)); },
        "input"_a, "output_size"_a);
  m.def("scaled_dot_product_attention",
        [=](T q, T k, T v, const OT& mask, double p, bool causal, std::optional<double> scale) {
          return scaled_dot_product_attention(q, k, v, undef(mask), p, causal, scale);
        },
        "query"_a, "key"_a, "value"_a, "attn_mask"_a = nb::none(), "dropout_p"_a = 0.0,
        "is_causal"_a = false, "scale"_a = nb::none(), nogil);

  // ---- views, joining, indexing
  m.def("cat", &cat, "tensors"_a, "dim"_a = 0);
  m.def("stack", &stack, "tensors"_a, "dim"_a = 0);
  m.def("split", [](T x, int64_t s, int64_t d) { return split(x, s, d); }, "tensor"_a,
        "split_size_or_sections"_a, "dim"_a = 0);
  m.def("chunk", &chunk, "input"_a, "chunks"_a, "dim"_a = 0);
  m.def("index_select", &index_select, "input"_a, "dim"_a, "index"_a);
  m.def("gather", &gather, "input"_a, "dim"_a, "index"_a);
  m.def("masked_fill", [](T x, T mask, nb::handle v) { return masked_fill(x, mask, to_scalar(v)); },
        "input"_a, "mask"_a, "value"_a);
  m.def("tril", &tril, "input"_a, "diagonal"_a = 0);
  m.def("triu", &triu, "input"_a, "diagonal"_a = 0);

  // ---- grad mode, autocast
  m.def("is_grad_enabled", &is_grad_enabled);
  m.def("set_grad_enabled", &set_grad_enabled, "mode"_a);
  // (enabled, dtype) of one device type (torch.is_autocast_enabled(device_type),
  // torch.get_autocast_dtype(device_type)).
  m.def("_autocast_state", [](std::string_view device_type) {
          const AutocastState s = autocast_state(autocast_device_type(device_type));
          return std::make_pair(s.enabled, s.dtype);
        },
        "device_type"_a);
  // ValueError for a dtype autocast cannot use, the state left as it was.
  m.def("_set_autocast_state", [](std::string_view device_type, bool enabled, DType dtype) {
          set_autocast_state(autocast_device_type(device_type), AutocastState{enabled, dtype});
        },
        "device_type"_a, "enabled"_a, "dtype"_a);

  // ---- generator, threads
  m.def("manual_seed", [](uint64_t s) { manual_seed(s); }, "seed"_a);
  m.def("get_rng_state", [] {
    const RngState s = get_rng_state();
    return std::make_pair(s.seed, s.offset);
  });
  m.def("set_rng_state", [](std::pair<uint64_t, uint64_t> s) { set_rng_state({s.first, s.second}); },
        "state"_a);
  m.def("set_num_threads", &set_num_threads, "n"_a);
  m.def("get_num_threads", &num_threads);

  // ---- budget and stats (dtr.memory)
  m.def("set_budget", [](nb::handle budget, std::optional<Device> device) {
          const Device d = device.value_or(default_device());
          const std::optional<int64_t> bytes = budget_bytes(budget, d);
          if (device) remat::set_memory_budget(*device, bytes);
          else remat::set_memory_budget(bytes);
        },
        "budget"_a.none(), "device"_a = nb::none());
  m.def("get_budget", [](std::optional<Device> d) {
          return d ? remat::memory_budget(*d) : remat::memory_budget();
        },
        "device"_a = nb::none());
  m.def("stats", [](std::optional<Device> d) { return stats_dict(d ? remat::stats(*d) : remat::stats()); },
        "device"_a = nb::none());
  m.def("reset_stats", &remat::reset_stats);
  // Memory snapshots in PyTorch's format (remat/memory_snapshot.h).
  m.def("record_memory_history",
        [](std::optional<std::string> enabled, std::optional<std::string> context, const std::string& stacks,
           size_t max_entries) {
          memory::record_history(enabled ? std::optional<std::string_view>(*enabled) : std::nullopt,
                                 context ? std::optional<std::string_view>(*context) : std::nullopt, stacks,
                                 max_entries);
        },
        "enabled"_a.none(), "context"_a.none(), "stacks"_a, "max_entries"_a);
  m.def("memory_snapshot", [] {
    std::string bytes;
    {
      nb::gil_scoped_release release;
      bytes = memory::snapshot();
    }
    return nb::bytes(bytes.data(), bytes.size());
  });
  m.def("dump_snapshot", &memory::dump_snapshot, "filename"_a, nb::call_guard<nb::gil_scoped_release>());

  // ---- safetensors files (eager/serialize.h; safetensors.torch's names)
  m.def("save_file", [](const nb::dict& tensors, const std::string& path,
                        const std::map<std::string, std::string>& metadata) {
          save(path, dict_to_state(tensors, "save_file"), metadata);
        },
        "tensors"_a, "filename"_a, "metadata"_a = std::map<std::string, std::string>{});
  m.def("load_file", [](const std::string& path) { return state_to_dict(load(path)); },
        "filename"_a);
  m.def("default_device", &default_device);
}

void bind_nn_optim(nb::module_& m) {
  // nn.init: fresh tensors drawn like PyTorch's initializers (eager/nn/init.h).
  m.def("_init_constant", [](const std::vector<int64_t>& s, double v, std::optional<DType> d,
                             std::optional<Device> dev) { return nn::init::constant(s, v, options(d, dev)); });
  m.def("_init_uniform", [](const std::vector<int64_t>& s, double lo, double hi, std::optional<DType> d,
                            std::optional<Device> dev) { return nn::init::uniform(s, lo, hi, options(d, dev)); });
  m.def("_init_normal", [](const std::vector<int64_t>& s, double mean, double std, std::optional<DType> d,
                           std::optional<Device> dev) { return nn::init::normal(s, mean, std, options(d, dev)); });
  m.def("_init_kaiming_uniform", [](const std::vector<int64_t>& s, double a, std::optional<DType> d,
                                    std::optional<Device> dev) {
    return nn::init::kaiming_uniform(s, a, options(d, dev));
  });
  m.def("_fan_in", [](const std::vector<int64_t>& s) { return nn::init::fan_in(s); });

  // The optimizers over parameter groups; dtr.optim keeps the groups' dicts
  // and copies their hyperparameters in by name before each step.
  auto nogil = nb::call_guard<nb::gil_scoped_release>();
  using Groups = std::vector<std::vector<Tensor>>;
  auto groups_of = [](Groups groups) {
    std::vector<optim::OptimizerParamGroup> out;
    for (std::vector<Tensor>& g : groups) out.emplace_back(std::move(g));
    return out;
  };
  nb::class_<optim::Optimizer>(m, "_Optimizer")
      .def("step", [](optim::Optimizer& o) { o.step(); }, nogil)
      .def("zero_grad", &optim::Optimizer::zero_grad, "set_to_none"_a = true)
      .def_prop_rw("lr", &optim::Optimizer::lr, &optim::Optimizer::set_lr)
      .def("state_dict", [](const optim::Optimizer& o) { return state_to_dict(o.state_dict()); })
      .def("load_state_dict", [](optim::Optimizer& o, const nb::dict& d) {
        o.load_state_dict(dict_to_state(d, "load_state_dict"));
      })
      .def_prop_ro("params", &optim::Optimizer::params)
      .def_prop_ro("num_groups", [](const optim::Optimizer& o) { return o.param_groups().size(); })
      .def("add_param_group", [](optim::Optimizer& o, std::vector<Tensor> params) {
        o.add_param_group(optim::OptimizerParamGroup(std::move(params)));
      })
      .def("group_hyperparameters", &optim::Optimizer::group_hyperparameters, "group"_a)
      .def("set_group_hyperparameters", &optim::Optimizer::set_group_hyperparameters, "group"_a, "values"_a);
  nb::class_<optim::SGD, optim::Optimizer>(m, "_SGD")
      .def("__init__", [groups_of](optim::SGD* o, Groups groups, double lr, double momentum, double dampening,
                                   double weight_decay, bool nesterov) {
        new (o) optim::SGD(groups_of(std::move(groups)), optim::SGDOptions(lr)
                                                             .momentum(momentum)
                                                             .dampening(dampening)
                                                             .weight_decay(weight_decay)
                                                             .nesterov(nesterov));
      },
      "groups"_a, "lr"_a, "momentum"_a, "dampening"_a, "weight_decay"_a, "nesterov"_a);
  // Adam and AdamW take the same arguments.
  auto bind_adam = [&]<typename Opt, typename Options>(const char* name) {
    nb::class_<Opt, optim::Optimizer>(m, name).def(
        "__init__",
        [groups_of](Opt* o, Groups groups, double lr, double beta1, double beta2, double eps, double weight_decay,
                    bool amsgrad) {
          new (o) Opt(groups_of(std::move(groups)), Options(lr)
                                                        .betas(std::make_tuple(beta1, beta2))
                                                        .eps(eps)
                                                        .weight_decay(weight_decay)
                                                        .amsgrad(amsgrad));
        },
        "groups"_a, "lr"_a, "beta1"_a, "beta2"_a, "eps"_a, "weight_decay"_a, "amsgrad"_a);
  };
  bind_adam.operator()<optim::Adam, optim::AdamOptions>("_Adam");
  bind_adam.operator()<optim::AdamW, optim::AdamWOptions>("_AdamW");
}

}  // namespace dtr::python
