// What the Python package's PyTorch habits need from C++: torch.autograd.grad /
// backward over the C++ engine, custom nodes whose backward is a Python
// callable (dtr.autograd.Function), checkpoint regions whose function is a
// Python callable (dtr.utils.checkpoint), a safetensors load that returns the
// metadata too (dtr.load), and the CUDA backend's device count and synchronize
// (dtr.cuda).
//
// Python callables in the graph: a custom node or checkpoint region
// keeps a Python callable inside a C++ std::function. The engine runs
// backward without the GIL (Tensor.backward releases it), and a graph may be
// freed from any thread, so the callable is called under a GIL it acquires
// itself, and is held by a handle whose deleter takes the GIL to drop the
// reference. A Python exception raised in the callable crosses the engine as
// nanobind::python_error and reaches the caller of backward unchanged.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>

#include "bindings.h"
#include "core/backend.h"
#include "eager/checkpoint.h"
#include "eager/serialize.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace dtr::python {
namespace {

bool python_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

/// A reference to a Python object that may be dropped on any thread, with or
/// without the GIL: the deleter takes the GIL when this thread lacks it. While
/// the interpreter shuts down (Py_IsInitialized is already false then) the
/// thread that runs the shutdown holds the GIL and drops the reference; any
/// other thread, and anything after the shutdown, leaves it (nothing is left
/// to drop it in).
std::shared_ptr<nb::object> hold(nb::object o) {
  return std::shared_ptr<nb::object>(new nb::object(std::move(o)), [](nb::object* p) {
    const bool finalizing = python_finalizing();
    if (!Py_IsInitialized() && !finalizing) {
      (void)p->release();
    } else if (PyGILState_Check()) {
      delete p;
      return;
    } else if (finalizing) {
      (void)p->release();
    } else {
      nb::gil_scoped_acquire gil;
      delete p;
      return;
    }
    delete p;
  });
}

/// A list of Tensors from Python, None entries as undefined tensors.
std::vector<Tensor> tensors_or_undefined(nb::handle seq, const char* what) {
  std::vector<Tensor> out;
  for (nb::handle h : seq) {
    if (h.is_none()) {
      out.emplace_back();
    } else if (is_tensor(h)) {
      out.push_back(nb::cast<Tensor>(h));
    } else {
      throw nb::type_error((std::string(what) + ": expected a Tensor or None, got " +
                            nb::cast<std::string>(nb::str(h.type().attr("__name__"))))
                               .c_str());
    }
  }
  return out;
}

/// Tensors to a Python list, undefined ones as None.
nb::list to_list(const std::vector<Tensor>& ts) {
  nb::list out;
  for (const Tensor& t : ts) {
    if (t.defined()) {
      out.append(nb::cast(t));
    } else {
      out.append(nb::none());
    }
  }
  return out;
}

const Backend& cuda_backend() {
  const Backend* b = find_backend(DeviceType::kCUDA);
  if (b == nullptr) throw DeviceError("dtr was built without the CUDA backend");
  return *b;
}

int cuda_device_count() {
  const Backend* b = find_backend(DeviceType::kCUDA);
  return b == nullptr || b->device_count == nullptr ? 0 : b->device_count();
}

}  // namespace

void bind_habits(nb::module_& m) {
  // torch.autograd.grad (eager/autograd.h dtr::autograd::grad): the engine
  // runs without the GIL; Python custom nodes take it back (see the top of
  // this file).
  m.def("_grad",
        [](const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs, nb::handle grad_outputs,
           std::optional<bool> retain_graph, bool create_graph, bool allow_unused) {
          std::vector<Tensor> gos = tensors_or_undefined(grad_outputs, "grad");
          std::vector<Tensor> r;
          {
            nb::gil_scoped_release release;
            r = autograd::grad(outputs, inputs, gos, retain_graph, create_graph, allow_unused);
          }
          return to_list(r);
        },
        "outputs"_a, "inputs"_a, "grad_outputs"_a, "retain_graph"_a.none(), "create_graph"_a,
        "allow_unused"_a);
  // torch.autograd.backward with the root gradients already made (the Python
  // side fills in ones and checks shapes).
  m.def("_run_backward",
        [](const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph,
           bool create_graph) {
          nb::gil_scoped_release release;
          autograd::run_backward(roots, grads, retain_graph, create_graph);
        },
        "tensors"_a, "grad_tensors"_a, "retain_graph"_a, "create_graph"_a);
  // The version counter of a tensor's storage (every in-place write bumps it):
  // how ctx.saved_tensors notices a saved tensor written in place.
  m.def("_storage_version", [](const Tensor& t) { return t.storage()->version; }, "tensor"_a);
  // One custom node (autograd::record_custom) over `inputs` for `outputs`:
  // `backward(saved_inputs, grad_outputs)` returns one gradient or None per
  // input. The outputs' grad_fn becomes `name` + "Backward".
  m.def("_record_custom",
        [](std::string name, nb::object backward, const std::vector<Tensor>& inputs,
           std::vector<Tensor> outputs) {
          if (!PyCallable_Check(backward.ptr())) throw nb::type_error("_record_custom: backward is not callable");
          auto fn = hold(std::move(backward));
          const size_t n_inputs = inputs.size();
          autograd::CustomBackwardFn bw = [fn, n_inputs](std::span<const Tensor> saved,
                                                         std::span<const Tensor> grads) {
            nb::gil_scoped_acquire gil;
            nb::list py_saved = to_list(std::vector<Tensor>(saved.begin(), saved.end()));
            nb::list py_grads = to_list(std::vector<Tensor>(grads.begin(), grads.end()));
            nb::object r = (*fn)(py_saved, py_grads);
            std::vector<Tensor> out = tensors_or_undefined(r, "backward");
            if (out.size() != n_inputs) {
              throw ValueError("a custom backward returned " + std::to_string(out.size()) +
                               " gradients for " + std::to_string(n_inputs) + " inputs");
            }
            return out;
          };
          autograd::record_custom(std::move(name), std::move(bw), inputs, outputs);
        },
        "name"_a, "backward"_a, "inputs"_a, "outputs"_a);
  // dtr::checkpoint with a Python function of a list of tensors returning a
  // list of tensors; it runs again during backward under the GIL it takes.
  m.def("_checkpoint",
        [](nb::object fn, const std::vector<Tensor>& inputs) {
          if (!PyCallable_Check(fn.ptr())) throw nb::type_error("checkpoint: function is not callable");
          auto held = hold(std::move(fn));
          auto call = [held](const std::vector<Tensor>& xs) {
            nb::gil_scoped_acquire gil;
            nb::object r = (*held)(to_list(xs));
            return nb::cast<std::vector<Tensor>>(r);
          };
          return checkpoint(call, inputs);
        },
        "function"_a, "inputs"_a);

  // safetensors (eager/serialize.h) with the "__metadata__" entries:
  // (tensors in file order as a list of (name, tensor), metadata).
  m.def("_load_file_with_metadata", [](const std::string& path) {
    std::map<std::string, std::string> metadata;
    StateDict s = load(path, &metadata);
    nb::list items;
    for (const auto& [k, v] : s) items.append(nb::make_tuple(nb::str(k.c_str()), v));
    return nb::make_tuple(items, metadata);
  }, "filename"_a);

  // ---- the CUDA backend (core/backend.h), for dtr.cuda
  m.def("_cuda_device_count", &cuda_device_count);
  m.def("_cuda_synchronize", [](int index) {
    const Backend& b = cuda_backend();
    const int n = cuda_device_count();
    if (index < 0 || index >= n) {
      throw DeviceError("cuda device " + std::to_string(index) + " does not exist (" + std::to_string(n) +
                        " present)");
    }
    if (b.synchronize != nullptr) {
      nb::gil_scoped_release release;
      b.synchronize(index);
    }
  }, "index"_a);
}

}  // namespace dtr::python
