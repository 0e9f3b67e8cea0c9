// What eager/ records in each lineage node, beyond what remat/ sees: the op,
// its attributes, the inputs' and outputs' metadata, the RNG (seed, offset),
// the thread's dispatch state (grad mode, autocast) at the time of the call.
// The replay closure carries it (Note [replay equals original]).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "core/op_registry.h"
#include "eager/dispatch_state.h"
#include "eager/tensor.h"
#include "remat/lineage.h"

namespace dtr {

struct OpRecord {
  const OpDef* op = nullptr;
  Attrs attrs;
  std::vector<TensorMeta> input_metas;
  std::vector<TensorMeta> output_metas;
  RngState rng;
  DispatchState state;
  /// For in-place ops: replay first copies the old version (input 0's
  /// storage) into the output storage, then runs the kernel on the view.
  bool inplace = false;
};

/// The replay closure stored in remat::Node::recompute.
struct Replay {
  std::shared_ptr<const OpRecord> record;
  void operator()(std::span<Storage* const> inputs, std::span<Storage* const> outputs) const;
};

/// The record of the op that produced `t`'s storage, or null (constants).
const OpRecord* lineage_of(const Tensor& t);

}  // namespace dtr
