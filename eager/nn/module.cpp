#include "eager/nn/module.h"

#include <unordered_set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "eager/autograd.h"
#include "remat/runtime.h"

namespace dtr::nn {

void Module::check_new_name(const std::string& name, const char* what) const {
  DTR_CHECK(!name.empty(), ValueError, "{}.register_{}: name must not be empty", name_, what);
  DTR_CHECK(name.find('.') == std::string::npos, ValueError,
            "{}.register_{}: name '{}' must not contain '.'", name_, what, name);
  auto taken = [&](const auto& list) {
    for (const auto& [n, _] : list)
      if (n == name) return true;
    return false;
  };
  DTR_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_), ValueError,
            "{}.register_{}: attribute '{}' already exists", name_, what, name);
}

Tensor Module::register_parameter(std::string name, Tensor t, bool requires_grad) {
  check_new_name(name, "parameter");
  if (!t.defined()) return t;
  DTR_CHECK(t.is_leaf(), ValueError,
            "{}.register_parameter: '{}' must be a leaf tensor, but it was produced by {}; "
            "register a detached copy",
            name_, name, t.grad_fn_name());
  if (requires_grad) t.requires_grad_(true);
  parameters_.emplace_back(std::move(name), t);
  return t;
}

Tensor Module::register_buffer(std::string name, Tensor t) {
  check_new_name(name, "buffer");
  if (!t.defined()) return t;
  buffers_.emplace_back(std::move(name), t);
  return t;
}

void Module::add_child(std::string name, std::shared_ptr<Module> module) {
  check_new_name(name, "module");
  DTR_CHECK(module != nullptr, ValueError, "{}.register_module: module '{}' is null", name_, name);
  DTR_CHECK(module.get() != this, ValueError, "{}.register_module: a module cannot contain itself",
            name_);
  children_.emplace_back(std::move(name), std::move(module));
}

void Module::collect(const std::string& prefix, bool recurse, bool params, NamedTensors& out) const {
  for (const auto& [n, t] : params ? parameters_ : buffers_) out.emplace_back(prefix + n, t);
  if (!recurse) return;
  for (const auto& [n, child] : children_) child->collect(prefix + n + ".", true, params, out);
}

namespace {
// Keeps the first entry of each tensor (PyTorch's remove_duplicate).
NamedTensors first_of_each(NamedTensors all) {
  std::unordered_set<const TensorImpl*> seen;
  NamedTensors out;
  for (auto& e : all)
    if (seen.insert(e.second.impl()).second) out.push_back(std::move(e));
  return out;
}
}  // namespace

NamedTensors Module::named_parameters(bool recurse, bool remove_duplicate) const {
  NamedTensors out;
  collect("", recurse, true, out);
  return remove_duplicate ? first_of_each(std::move(out)) : out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers(bool recurse, bool remove_duplicate) const {
  NamedTensors out;
  collect("", recurse, false, out);
  return remove_duplicate ? first_of_each(std::move(out)) : out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_buffers(recurse)) out.push_back(t);
  return out;
}

namespace {
// torch.nn.Module.state_dict order: per module its parameters, then its
// buffers, then each child's entries.
void state_entries(const Module& m, const std::string& prefix, NamedTensors& out) {
  for (auto& [n, t] : m.named_parameters(false, false)) out.emplace_back(prefix + n, t);
  for (auto& [n, t] : m.named_buffers(false, false)) out.emplace_back(prefix + n, t);
  for (const auto& [n, child] : m.named_children()) state_entries(*child, prefix + n + ".", out);
}
}  // namespace

StateDict Module::state_dict() const {
  NamedTensors entries;
  state_entries(*this, "", entries);
  StateDict out;
  for (auto& [n, t] : entries) out.insert(n, t.detach());
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  NamedTensors own;
  state_entries(*this, "", own);
  std::vector<std::string> missing, unexpected, mismatched;
  std::vector<std::pair<Tensor, Tensor>> copies;  // (destination, source)
  for (const auto& [n, dst] : own) {
    const Tensor* src = state.find(n);
    if (src == nullptr || !src->defined()) {
      missing.push_back(n);
      continue;
    }
    if (src->shape() != dst.shape()) {
      mismatched.push_back(fmt::format("size mismatch for {}: copying a param with shape {} from "
                                       "checkpoint, the shape in current model is {}",
                                       n, shape_str(src->shape()), shape_str(dst.shape())));
      continue;
    }
    copies.emplace_back(dst, *src);
  }
  std::unordered_set<std::string> own_names;
  for (const auto& [n, _] : own) own_names.insert(n);
  for (const auto& [n, t] : state) {
    if (!own_names.count(n)) unexpected.push_back(n);
  }
  std::vector<std::string> problems;
  if (strict && !missing.empty())
    problems.push_back(fmt::format("Missing key(s) in state_dict: \"{}\"", fmt::join(missing, "\", \"")));
  if (strict && !unexpected.empty())
    problems.push_back(
        fmt::format("Unexpected key(s) in state_dict: \"{}\"", fmt::join(unexpected, "\", \"")));
  for (auto& m : mismatched) problems.push_back(std::move(m));
  DTR_CHECK(problems.empty(), ValueError, "Error(s) in loading state_dict for {}:\n\t{}", name_,
            fmt::join(problems, "\n\t"));
  NoGradGuard no_grad;
  for (auto& [dst, src] : copies) {
    // Loading a module's own state_dict back is a no-op (same bytes).
    const bool same = dst.storage() == src.storage() && dst.storage_offset() == src.storage_offset() &&
                      dst.strides() == src.strides() && dst.dtype() == src.dtype();
    if (!same) dst.copy_(src);
  }
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (auto& [n, p] : named_parameters()) p.set_grad(Tensor());
}

namespace {
// libtorch's TensorImpl::set_data: `impl` takes `src`'s bytes and metadata
// (shape, strides, dtype, device) and keeps its identity and autograd state,
// so every handle on it sees the change. Storage::handle_count counts
// TensorImpls, so the new storage gains one and the old one loses one.
void set_data(TensorImpl& impl, const Tensor& src) {
  std::shared_ptr<Storage> old = std::exchange(impl.storage, src.storage());
  impl.storage->handle_count.fetch_add(1, std::memory_order_relaxed);
  impl.meta = src.meta();
  impl.is_view = src.impl()->is_view;
  impl.graph_version = impl.storage->graph_version;
  if (old->handle_count.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    remat::Runtime::global().on_last_handle(*old);
  }
}
}  // namespace

void Module::to(Device device) { apply_to(device, std::nullopt); }

void Module::to(DType dtype) {
  DTR_CHECK(is_floating(dtype), TypeError,
            "{}.to: nn.Module.to only accepts floating point dtypes, but got desired dtype={}", name_,
            dtype_name(dtype));
  apply_to(std::nullopt, dtype);
}

void Module::to(Device device, DType dtype) {
  DTR_CHECK(is_floating(dtype), TypeError,
            "{}.to: nn.Module.to only accepts floating point dtypes, but got desired dtype={}", name_,
            dtype_name(dtype));
  apply_to(device, dtype);
}

void Module::apply_to(std::optional<Device> device, std::optional<DType> dtype) {
  NamedTensors own;
  state_entries(*this, "", own);
  // (tensor to change, its copy on `device`), the copies made before any
  // change so that a throw leaves the module as it was.
  std::vector<std::pair<Tensor, Tensor>> moves;
  std::unordered_set<const TensorImpl*> seen;
  NoGradGuard no_grad;
  auto plan = [&](const Tensor& t) {
    if (!t.defined()) return;
    const bool cast = dtype && t.is_floating_point() && t.dtype() != *dtype;
    const bool move = device && t.device() != *device;
    if ((!cast && !move) || !seen.insert(t.impl()).second) return;
    Tensor copy = t.detach();
    if (cast) copy = copy.to(*dtype);
    if (move) copy = copy.to(*device);
    moves.emplace_back(t, copy);
  };
  for (const auto& [n, t] : own) {
    plan(t);
    plan(t.grad());
  }
  for (auto& [t, copy] : moves) {
    set_data(*t.impl(), copy);
    // Loaded data: its lineage (a copy of the old bytes) is
    // dropped, which frees the old bytes once no one else holds them.
    remat::Runtime::global().register_constant(*t.storage());
  }
}

// ---- module traversal ----------------------------------------------------------

namespace {
// Pre-order walk with dotted names, each module once (PyTorch's memo set).
void walk(const std::shared_ptr<Module>& m, Module& raw, const std::string& name,
          std::unordered_set<const Module*>& seen,
          const std::function<void(const std::string&, const std::shared_ptr<Module>&, Module&)>& fn) {
  if (!seen.insert(&raw).second) return;
  fn(name, m, raw);
  for (const auto& [n, child] : raw.named_children())
    walk(child, *child, name.empty() ? n : name + "." + n, seen, fn);
}
}  // namespace

std::shared_ptr<Module> Module::self_ptr(const char* what) {
  std::shared_ptr<Module> self = weak_from_this().lock();
  DTR_CHECK(self != nullptr, ValueError,
            "{}.{}: this module is not held by a shared_ptr (create it with std::make_shared or "
            "through its holder, or pass include_self=false)",
            name_, what);
  return self;
}

NamedModules Module::named_modules(const std::string& prefix, bool include_self) {
  NamedModules out;
  std::unordered_set<const Module*> seen{this};
  if (include_self) out.emplace_back(prefix, self_ptr("named_modules"));
  for (const auto& [n, child] : children_)
    walk(child, *child, prefix.empty() ? n : prefix + "." + n, seen,
         [&](const std::string& name, const std::shared_ptr<Module>& m, Module&) {
           out.emplace_back(name, m);
         });
  return out;
}

std::vector<std::shared_ptr<Module>> Module::modules(bool include_self) {
  return named_modules("", include_self).values();
}

void Module::apply(const std::function<void(const std::string&, Module&)>& fn,
                   const std::string& prefix) {
  std::unordered_set<const Module*> seen;
  walk(nullptr, *this, prefix, seen,
       [&](const std::string& name, const std::shared_ptr<Module>&, Module& m) { fn(name, m); });
}

void Module::apply(const std::function<void(Module&)>& fn) {
  apply([&](const std::string&, Module& m) { fn(m); });
}

void Module::apply(const std::function<void(const std::shared_ptr<Module>&)>& fn) {
  for (const auto& m : modules(true)) fn(m);
}

// ---- Sequential ---------------------------------------------------------------

Tensor AnyModule::forward(const Tensor& x) const {
  DTR_CHECK(module_ != nullptr, ValueError, "AnyModule: forward of an empty AnyModule");
  return forward_(x);
}

SequentialImpl::SequentialImpl(std::initializer_list<NamedAnyModule> named) : UnaryModule("Sequential") {
  for (const auto& m : named) push_back_any(m.name, m.module);
}

void SequentialImpl::push_back_any(std::string name, AnyModule m) {
  DTR_CHECK(!m.is_empty(), ValueError, "Sequential: cannot add an empty module");
  register_module(std::move(name), m.ptr());
  modules_.push_back(std::move(m));
}

const AnyModule& SequentialImpl::at_any(size_t i) const {
  DTR_CHECK(i < modules_.size(), IndexError, "Sequential: index {} is out of range for {} layers", i,
            modules_.size());
  return modules_[i];
}

Tensor SequentialImpl::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& m : modules_) h = m.forward(h);
  return h;
}

// ---- ModuleList -------------------------------------------------------------------

void ModuleListImpl::push_back_ptr(std::shared_ptr<Module> m) {
  register_module(std::to_string(modules_.size()), m);
  modules_.push_back(std::move(m));
}

const std::shared_ptr<Module>& ModuleListImpl::operator[](size_t i) const {
  DTR_CHECK(i < modules_.size(), IndexError, "ModuleList: index {} is out of range for {} modules",
            i, modules_.size());
  return modules_[i];
}

}  // namespace dtr::nn
