// User annotations in the DTR_TRACE file (Chrome trace events, viewable in
// Perfetto): a Scope marks a stretch of the program, such as one training
// step, so the ops, evictions and rematerializations inside it line up
// under its name.
#pragma once

#include <cstdint>
#include <string>

namespace dtr::trace {

/// Marks the lifetime of this object as a slice named `name` on the calling
/// thread's track of the trace: a "B" event now, an "E" event when it is
/// destroyed (also during stack unwinding). Scopes nest. While
/// dtr::memory::record_history records, the names of the scopes around an
/// allocation are its frames in the memory snapshot (innermost first),
/// trace or no trace. Otherwise does nothing when no trace is being written (DTR_TRACE unset, or
/// remat::Runtime::set_trace_path("")); the end is dropped when the trace
/// was closed or switched to another file meanwhile. Throws only what
/// starting the runtime throws (ValueError for a malformed DTR_* variable).
///
///   for (int step = 0; step < steps; ++step) {
///     dtr::trace::Scope s("step " + std::to_string(step));
///     ...
///   }
class Scope {
 public:
  explicit Scope(std::string name);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  std::string name_;
  uint64_t generation_ = 0;  // the trace file the begin went to; 0: none
  bool in_history_ = false;  // a frame of dtr::memory's history while in scope
};

/// Closes every trace file being written (DTR_TRACE,
/// remat::Runtime::set_trace_path): writes its buffered events and the
/// closing "]"; the events that follow are dropped until set_trace_path
/// opens a file. For exit paths that run no C exit handlers: the Python
/// module calls it at interpreter exit, which an unhandled KeyboardInterrupt
/// passes through before Python ends itself with SIGINT. Throws nothing.
void close_files() noexcept;

/// Makes a trace file that was cut short one JSON array again (a process
/// killed by SIGKILL or ended by _exit; Note [trace on signals] in
/// docs/DESIGN.md): drops a partial last line, if there is one (only a
/// write cut off mid-way leaves one), and appends the closing "]" line
/// unless the file ends with it; a file cut before the end of its first
/// line becomes an empty trace (the lines "[" and "]"). Returns whether the
/// file changed (false: it was complete). Throws ValueError naming the path
/// when the file cannot be read or written, or does not begin with "["
/// (not a trace file; left as it is).
bool close_cut_file(const std::string& path);

}  // namespace dtr::trace
