// Saving and loading tensors in the safetensors format
// (https://github.com/huggingface/safetensors):
//
//   bytes 0..8     N, the header length, unsigned 64-bit little-endian
//   bytes 8..8+N   a JSON object: {"name": {"dtype": "F32", "shape": [2, 3],
//                  "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}}
//   the rest       the tensors' bytes, row-major little-endian; offsets are
//                  relative to the start of this section and tile it exactly
//
// dtypes: F32 F64 F16 BF16 I64 I32 BOOL U8. Loaded tensors are constants
// (Note [what may be evicted]). Every malformed file throws ValueError naming
// the file and the problem; nothing aborts.
#pragma once

#include <concepts>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "eager/nn/state_dict.h"

namespace dtr {

namespace nn {
class Module;
}
namespace optim {
class Optimizer;
}

/// Writes `tensors` (in their order) and optional string `metadata` to
/// `path` (safetensors.torch.save_file). The file is written next to `path`
/// and renamed into place, so a failed save leaves no partial file. Throws
/// ValueError for an undefined tensor, an empty name, or when the file
/// cannot be written.
void save(const std::string& path, const StateDict& tensors,
          const std::map<std::string, std::string>& metadata = {});

/// Reads every tensor of a safetensors file, in file order
/// (safetensors.torch.load_file). When `metadata` is given it receives the
/// "__metadata__" entries. Throws ValueError naming `path` for a missing or
/// unreadable file, a truncated file, a bad header length, malformed JSON,
/// an unknown dtype, a shape that disagrees with the byte range, offsets out
/// of range or not tiling the data, or duplicate names.
StateDict load(const std::string& path, std::map<std::string, std::string>* metadata = nullptr);

/// Saves module.state_dict() to `path` (torch.save(model.state_dict()) in
/// safetensors form).
void save(const nn::Module& module, const std::string& path);
/// Loads `path` into `module` with load_state_dict(strict=true), copying
/// into its parameters and buffers; ValueError for a malformed file, a file
/// saved from something else than a module (a tensor, an optimizer), missing
/// / unexpected keys or shape mismatches (nothing is written then).
void load(nn::Module& module, const std::string& path);

// ---- libtorch's torch::save / torch::load --------------------------------------
// The value comes first, the path second, as in libtorch. Every file is
// safetensors (above), written to a temporary file beside `path` and renamed
// into place, so a save that fails leaves whatever was at `path` intact. The
// header's metadata records what was saved ("dtr.kind": "tensor", "tensors",
// "module", "optimizer"); loading it as another kind throws ValueError
// naming both (a file without the entry, from another writer, loads as
// anything whose keys fit).

/// torch::save(tensor, path): one tensor, named "0". ValueError when undefined.
void save(const Tensor& tensor, const std::string& path);
/// torch::save(tensors, path): the tensors named "0", "1", ... in order.
void save(const std::vector<Tensor>& tensors, const std::string& path);
/// torch::load(tensor, path): rebinds `tensor` to the file's single tensor (a
/// new constant on the CPU; move it with to()). ValueError for a file with
/// no or several tensors.
void load(Tensor& tensor, const std::string& path);
/// torch::load(tensors, path): replaces `tensors` with the file's tensors in order.
void load(std::vector<Tensor>& tensors, const std::string& path);
/// Optimizer state (optimizer.state_dict(): step counts and moment buffers,
/// not the options). Loading restores it into an optimizer made over the
/// same parameters (load_state_dict's errors otherwise).
void save(const optim::Optimizer& optimizer, const std::string& path);
void load(optim::Optimizer& optimizer, const std::string& path);

namespace detail {
/// A module holder (libtorch's ModuleHolder, torch::nn::Linear): anything
/// whose ptr() gives a shared_ptr to a Module.
template <typename H>
concept ModuleHolderLike = requires(const H& h) {
  { h.ptr() } -> std::convertible_to<std::shared_ptr<const nn::Module>>;
};
template <typename H>
void check_holder(const H& holder, const char* op) {
  DTR_CHECK(holder.ptr() != nullptr, ValueError, "{}: the module holder is empty (nullptr)", op);
}
}  // namespace detail

/// torch::save(model, path) / torch::load(model, path) for a
/// std::shared_ptr to a module (torch::save(std::make_shared<Net>(), ...)):
/// as save/load of *model. ValueError for a null pointer.
template <typename M>
  requires std::derived_from<M, nn::Module>
void save(const std::shared_ptr<M>& module, const std::string& path) {
  DTR_CHECK(module != nullptr, ValueError, "save: '{}': the module pointer is null", path);
  save(static_cast<const nn::Module&>(*module), path);
}
template <typename M>
  requires std::derived_from<M, nn::Module>
void load(const std::shared_ptr<M>& module, const std::string& path) {
  DTR_CHECK(module != nullptr, ValueError, "load: '{}': the module pointer is null", path);
  load(static_cast<nn::Module&>(*module), path);
}
/// The same for a module holder (torch::nn::Linear, a TORCH_MODULE type):
/// saves / loads the module it holds. ValueError for an empty holder.
template <detail::ModuleHolderLike H>
void save(const H& holder, const std::string& path) {
  detail::check_holder(holder, "save");
  save(static_cast<const nn::Module&>(*holder.ptr()), path);
}
template <detail::ModuleHolderLike H>
void load(const H& holder, const std::string& path) {
  detail::check_holder(holder, "load");
  load(static_cast<nn::Module&>(*holder.ptr()), path);
}

}  // namespace dtr
