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

#include <map>
#include <string>

#include "eager/nn/state_dict.h"

namespace dtr {

namespace nn {
class Module;
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
/// Loads `path` into `module` with load_state_dict(strict=true); ValueError
/// for a malformed file or missing / unexpected keys or shape mismatches.
void load(nn::Module& module, const std::string& path);

}  // namespace dtr
