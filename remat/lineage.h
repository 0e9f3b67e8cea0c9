// Lineage nodes (DTR paper §3: each tensor remembers the op that produced
// it). remat/ sees a node as an opaque recompute closure plus the storages it
// reads and writes and an estimated cost; it knows nothing of kernels or
// autograd (DESIGN.md "Folders").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/storage.h"

namespace dtr::remat {

struct Node {
  Node();
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  /// The op's registry name, for traces and OOM reports (points into the registry).
  std::string_view op_name;
  /// Storages read. Strong references: their metadata (and lineage) must
  /// outlive this node so a rematerialization can find them.
  std::vector<std::shared_ptr<Storage>> inputs;
  /// Storages written. Weak: a storage owns its producer, not the reverse.
  std::vector<std::weak_ptr<Storage>> outputs;
  /// Re-runs the op, writing into the outputs' bytes. The runtime calls it
  /// only after every input is resident and locked and every live output has
  /// fresh bytes; `inputs` are the resident inputs, `outputs` has one resident storage per entry of `outputs`
  /// (a scratch one where the original is gone or already resident). Replays the recorded RNG (seed, offset), autocast state and
  /// attributes (Note [replay equals original]).
  std::function<void(std::span<Storage* const> inputs, std::span<Storage* const> outputs)> recompute;
  /// Estimated cost of one replay in seconds (Note [scores]).
  double cost_seconds = 0;
  /// Floating-point operations of one replay (the registry's estimate).
  double flops = 0;
  /// False for ops flagged side_effect or collective: their outputs are
  /// constants and never evicted (Note [what may be evicted]).
  bool replayable = true;
  /// Byte size of each output (replay needs it where an output is gone).
  std::vector<int64_t> output_nbytes;
  Device device;
  /// Logical clock tick at which the op first ran.
  int64_t tick = 0;
};

/// Number of live lineage nodes (host metadata; must stay flat over steps).
int64_t live_node_count();

}  // namespace dtr::remat
