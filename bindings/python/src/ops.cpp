// dtr._C._op_rows / _op_call: every registry row, reachable from Python by
// name with its declared typed parameters (dtr.ops.<row>, as torch.ops.aten).
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace dtr::python {
namespace {

nb::object attr_to_py(const AttrValue& v) {
  return std::visit(
      [](const auto& x) -> nb::object {
        using V = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<V, Shape>) {
          nb::list l;
          for (int64_t e : x) l.append(e);
          return nb::tuple(l);
        } else {
          return nb::cast(x);
        }
      },
      v);
}

/// A Python value as the declared type of `p` (TypeError naming the op and
/// the parameter otherwise): an int for int (not a bool), a number for
/// float, a bool for bool, an int or a sequence of ints for ints, a
/// dtr.dtype for dtype.
AttrValue attr_from_py(const OpDef& op, const ParamSpec& p, nb::handle h) {
  PyObject* o = h.ptr();
  auto wrong = [&]() -> TypeError {
    return TypeError(fmt::format("dtr.ops.{}: parameter '{}' is {}; got {}", op.name, p.name,
                                 param_type_name(p.type), nb::type_name(h.type()).c_str()));
  };
  switch (p.type) {
    case ParamType::kInt:
      if (PyBool_Check(o) || !(PyLong_Check(o) || numpy_scalar_kind(h) == NumpyScalar::kInt)) throw wrong();
      return to_scalar(h).to_int();
    case ParamType::kFloat:
      if (!is_number(h) || PyBool_Check(o)) throw wrong();
      return to_scalar(h).to_double();
    case ParamType::kBool:
      if (!PyBool_Check(o) && numpy_scalar_kind(h) != NumpyScalar::kBool) throw wrong();
      return to_scalar(h).to_int() != 0;
    case ParamType::kInts: {
      if (PyLong_Check(o) && !PyBool_Check(o)) return Shape{nb::cast<int64_t>(h)};
      try {
        const std::vector<int64_t> v = nb::cast<std::vector<int64_t>>(h);
        return Shape(v.begin(), v.end());
      } catch (const nb::cast_error&) {
        throw wrong();
      }
    }
    case ParamType::kDType:
      if (!nb::isinstance<DType>(h)) throw wrong();
      return nb::cast<DType>(h);
  }
  throw wrong();
}

nb::list op_rows() {
  ensure_ops_registered();
  nb::list rows;
  for (const auto& row : OpRegistry::instance().ops()) {
    nb::list params;
    for (const ParamSpec& p : row->params) {
      params.append(nb::make_tuple(p.name, std::string(param_type_name(p.type)), p.required,
                                   p.default_value ? attr_to_py(*p.default_value) : nb::none()));
    }
    nb::dict d;
    d["name"] = row->name;
    d["params"] = params;
    d["min_inputs"] = row->min_inputs;
    d["max_inputs"] = row->max_inputs;
    d["inplace"] = row->flags.inplace;
    d["view"] = row->flags.view;
    d["differentiable"] = row->backward != nullptr;
    rows.append(d);
  }
  return rows;
}

/// Runs row `name` on `inputs` with `attrs` (str → value, converted by the
/// declared types; make_attrs fills defaults and refuses unknown or missing
/// parameters with ValueError). One output comes back as a Tensor, several
/// as a tuple.
nb::object op_call(const std::string& name, const std::vector<Tensor>& inputs, const nb::dict& attrs) {
  ensure_ops_registered();
  const OpDef& def = OpRegistry::instance().get(name);
  std::vector<std::pair<std::string, AttrValue>> values;
  for (auto [k, v] : attrs) {
    const std::string key = nb::cast<std::string>(k);
    const ParamSpec* spec = nullptr;
    for (const ParamSpec& p : def.params) {
      if (p.name == key) spec = &p;
    }
    DTR_CHECK(spec != nullptr, ValueError, "dtr.ops.{}: unexpected parameter '{}'; it takes {}",
              def.name, key, def.params_str());
    values.emplace_back(key, attr_from_py(def, *spec, v));
  }
  Attrs checked = def.make_attrs(values);
  def.check_input_count(inputs.size());
  std::vector<Tensor> out;
  {
    nb::gil_scoped_release release;
    out = dispatch(def, inputs, std::move(checked));
  }
  if (out.size() == 1) return nb::cast(out[0]);
  nb::list l;
  for (Tensor& t : out) l.append(nb::cast(std::move(t)));
  return nb::tuple(l);
}


/// An int or a sequence of ints (PyTorch's `dim=1` / `dim=(0, 1)`); None → {}.
std::vector<int64_t> int_list(nb::handle h) {
  if (h.is_none()) return {};
  if (PyLong_Check(h.ptr())) return {nb::cast<int64_t>(h)};
  return nb::cast<std::vector<int64_t>>(h);
}

/// An int or an (h, w) pair, as PyTorch's _pair.
std::vector<int64_t> pair_list(nb::handle h) {
  if (PyLong_Check(h.ptr())) return {nb::cast<int64_t>(h), nb::cast<int64_t>(h)};
  return nb::cast<std::vector<int64_t>>(h);
}

}  // namespace

/// The public ops of eager/ops.h that dtr/__init__.py's surface table (and
/// nn.functional) wraps with PyTorch's Python conveniences; here each is
/// bound once with PyTorch's argument names.
void bind_more_functions(nb::module_& m) {
  using T = const Tensor&;
  using OT = std::optional<Tensor>;
  auto undef = [](const OT& t) { return t.value_or(Tensor()); };
  m.def("amax", [](T x, nb::handle dim, bool keepdim) { return amax(x, int_list(dim), keepdim); },
        "input"_a, "dim"_a = nb::none(), "keepdim"_a = false);
  m.def("amin", [](T x, nb::handle dim, bool keepdim) { return amin(x, int_list(dim), keepdim); },
        "input"_a, "dim"_a = nb::none(), "keepdim"_a = false);
  m.def("argmin", [](T x, std::optional<int64_t> dim, bool keepdim) {
          if (!dim) return argmin(x.reshape({-1}), 0, false);
          return argmin(x, *dim, keepdim);
        },
        "input"_a, "dim"_a = nb::none(), "keepdim"_a = false);
  m.def("logsumexp", [](T x, nb::handle dim, bool keepdim) { return logsumexp(x, int_list(dim), keepdim); },
        "input"_a, "dim"_a, "keepdim"_a = false);
  m.def("cumsum", [](T x, int64_t dim) { return cumsum(x, dim); }, "input"_a, "dim"_a);
  m.def("sin", [](T x) { return release_if_large(x.numel(), [&] { return sin(x); }); }, "input"_a);
  m.def("cos", [](T x) { return release_if_large(x.numel(), [&] { return cos(x); }); }, "input"_a);
  m.def("erf", [](T x) { return release_if_large(x.numel(), [&] { return erf(x); }); }, "input"_a);
  m.def("einsum", [](std::string_view eq, const std::vector<Tensor>& operands) { return einsum(eq, operands); },
        "equation"_a, "operands"_a, nb::call_guard<nb::gil_scoped_release>());
  m.def("flip", [](T x, nb::handle dims) { return flip(x, int_list(dims)); }, "input"_a, "dims"_a);
  m.def("roll", [](T x, nb::handle shifts, nb::handle dims) { return roll(x, int_list(shifts), int_list(dims)); },
        "input"_a, "shifts"_a, "dims"_a = nb::none());
  m.def("repeat", [](T x, const std::vector<int64_t>& repeats) { return repeat(x, repeats); }, "input"_a,
        "repeats"_a);
  m.def("repeat_interleave", [](T x, nb::handle repeats, std::optional<int64_t> dim) {
          if (is_tensor(repeats)) return repeat_interleave(x, nb::cast<const Tensor&>(repeats), dim);
          return repeat_interleave(x, nb::cast<int64_t>(repeats), dim);
        },
        "input"_a, "repeats"_a, "dim"_a = nb::none());
  m.def("scatter_add", &scatter_add, "input"_a, "dim"_a, "index"_a, "src"_a);
  m.def("index_add", [](T x, int64_t dim, T index, T source, nb::handle alpha) {
          return index_add(x, dim, index, source, to_scalar(alpha));
        },
        "input"_a, "dim"_a, "index"_a, "source"_a, "alpha"_a = 1);
  m.def("sort", [](T x, int64_t dim, bool descending) { return sort(x, dim, descending); }, "input"_a,
        "dim"_a = -1, "descending"_a = false);
  m.def("topk", [](T x, int64_t k, int64_t dim, bool largest, bool sorted) { return topk(x, k, dim, largest, sorted); },
        "input"_a, "k"_a, "dim"_a = -1, "largest"_a = true, "sorted"_a = true);
  m.def("multinomial", &multinomial, "input"_a, "num_samples"_a, "replacement"_a = false);
  m.def("conv_transpose2d", [=](T x, T w, const OT& b, nb::handle stride, nb::handle padding,
                                nb::handle output_padding, int64_t groups, nb::handle dilation) {
          const auto s = pair_list(stride), p = pair_list(padding), op = pair_list(output_padding),
                     d = pair_list(dilation);
          nb::gil_scoped_release release;
          return conv_transpose2d(x, w, undef(b), s, p, op, groups, d);
        },
        "input"_a, "weight"_a, "bias"_a = nb::none(), "stride"_a = 1, "padding"_a = 0,
        "output_padding"_a = 0, "groups"_a = 1, "dilation"_a = 1);
  m.def("dropout2d", &dropout2d, "input"_a, "p"_a = 0.5, "training"_a = true);
  m.def("group_norm", [=](T x, int64_t groups, const OT& w, const OT& b, double eps) {
          return group_norm(x, groups, undef(w), undef(b), eps);
        },
        "input"_a, "num_groups"_a, "weight"_a = nb::none(), "bias"_a = nb::none(), "eps"_a = 1e-5);
  m.def("interpolate", [](T x, nb::handle size, nb::handle scale, std::string_view mode,
                          std::optional<bool> align_corners) {
          std::vector<double> sf;
          if (PyFloat_Check(scale.ptr()) || PyLong_Check(scale.ptr())) sf = {nb::cast<double>(scale)};
          else if (!scale.is_none()) sf = nb::cast<std::vector<double>>(scale);
          return interpolate(x, int_list(size), sf, mode, align_corners);
        },
        "input"_a, "size"_a = nb::none(), "scale_factor"_a = nb::none(), "mode"_a = "nearest",
        "align_corners"_a = nb::none());
  m.def("one_hot", &one_hot, "tensor"_a, "num_classes"_a = -1);
  m.def("pad", [](T x, const std::vector<int64_t>& pad_, std::string_view mode, std::optional<double> value) {
          return pad(x, pad_, mode, value);
        },
        "input"_a, "pad"_a, "mode"_a = "constant", "value"_a = nb::none());
  m.def("scatter_add_", [](nb::handle self, int64_t dim, T index, T src) {
          nb::cast<Tensor&>(self).scatter_add_(dim, index, src);
          return nb::borrow(self);
        },
        "self"_a, "dim"_a, "index"_a, "src"_a);
  m.def("index_add_", [](nb::handle self, int64_t dim, T index, T source, nb::handle alpha) {
          nb::cast<Tensor&>(self).index_add_(dim, index, source, to_scalar(alpha));
          return nb::borrow(self);
        },
        "self"_a, "dim"_a, "index"_a, "source"_a, "alpha"_a = 1);
  m.def("narrow", [](T x, int64_t dim, int64_t start, int64_t length) { return narrow(x, dim, start, length); },
        "input"_a, "dim"_a, "start"_a, "length"_a);
}

void bind_ops(nb::module_& m) {
  m.def("_op_rows", &op_rows,
        "Every registry row: name, params [(name, type, required, default)], min_inputs, "
        "max_inputs, inplace, view, differentiable.");
  m.def("_op_call", &op_call, "name"_a, "inputs"_a, "attrs"_a);
}

}  // namespace dtr::python
