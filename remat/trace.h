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
/// destroyed (also during stack unwinding). Scopes nest. Does nothing when
/// no trace is being written (DTR_TRACE unset, or
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
};

}  // namespace dtr::trace
