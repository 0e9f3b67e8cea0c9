#include "remat/trace.h"

#include "remat/runtime.h"

namespace dtr::trace {

Scope::Scope(std::string name) : name_(std::move(name)) {
  remat::Runtime& rt = remat::Runtime::global();
  if (rt.tracing()) generation_ = rt.trace_scope_begin(name_);
}

Scope::~Scope() {
  if (generation_ == 0) return;
  try {
    remat::Runtime::global().trace_scope_end(name_, generation_);
  } catch (...) {
    // A trace event that cannot be formatted (out of host memory) is dropped.
  }
}

}  // namespace dtr::trace
