// Memory snapshots in the format of PyTorch's CUDA allocator
// (torch.cuda.memory._snapshot()), so that PyTorch's own tools read dtr's
// memory: https://pytorch.org/memory_viz and torch.cuda._memory_viz (its
// trace_plot, segment_plot, segments, memory, segsum). Every device's
// memory, the cpu's included; dtr's evictions, rematerializations and swaps
// appear in the trace as frees and allocations whose first frame says so
// ("evict matmul", "remat matmul", "swap out ...", "swap in ..."). Note
// [memory snapshots] in docs/DESIGN.md gives the mapping.
//
//   dtr::memory::record_history();              // PyTorch's "all"
//   ... train ...
//   dtr::memory::dump_snapshot("snapshot.pickle");
//
// DTR_MEMORY_SNAPSHOT=path records a whole program and writes the snapshot
// at exit.
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace dtr::memory {

/// Starts or stops recording the memory history, with PyTorch's arguments
/// (torch.cuda.memory._record_memory_history):
///   enabled: "all" (the state and a trace of every alloc, free, segment and
///     out-of-memory event), "state" (only which op allocated each block in
///     use), or nullopt: stop, dropping what was recorded.
///   context: which events keep frames: "all" (allocations and frees),
///     "alloc" (allocations), "state" (only blocks in use), or nullopt (none).
///   stacks: "python" or "all"; dtr's frames are the same either way (what
///     dtr did, the op, the dtr::trace::Scope names around it).
///   max_entries: the trace keeps the last this many events.
/// Recording is process-wide and thread-safe; off, it costs one relaxed
/// atomic load per allocation and free. Turning it on again keeps what was
/// recorded. Throws ValueError for any other argument value.
void record_history(std::optional<std::string_view> enabled = "all",
                    std::optional<std::string_view> context = "all", std::string_view stacks = "all",
                    size_t max_entries = std::numeric_limits<size_t>::max());

/// The snapshot now as pickle bytes (protocol 4): a dict with `segments`
/// (per device, its allocator's segments and blocks: address, total_size,
/// stream 0, segment_type, device, blocks with address, size,
/// requested_size, state, frames), `device_traces` (per device the recorded
/// events: action, addr, size, stream, frames, time_us) and `devices` (the
/// dtr device of each index: "cpu", "cuda:0", ...; cuda:N first at index N
/// when CUDA is in use, the cpu last). Sizes in bytes. Without recording the
/// segments are still there (blocks without frames) and the traces empty.
/// Adds a `snapshot` event to each device's trace while recording.
std::string snapshot();

/// Writes snapshot() to `path` (PyTorch's _dump_snapshot; open the file at
/// https://pytorch.org/memory_viz). Throws ValueError naming the path when
/// it cannot be written.
void dump_snapshot(const std::string& path);

/// DTR_MEMORY_SNAPSHOT: records from now on and writes the snapshot to
/// `path` at exit; "" cancels the write at exit and stops recording.
void set_snapshot_at_exit(const std::string& path);

}  // namespace dtr::memory
