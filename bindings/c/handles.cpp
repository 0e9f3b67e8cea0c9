// The handle table, use flags and error translation of the C ABI (handles.h).
#include "handles.h"

#include <fmt/format.h>

#include <new>
#include <string>

#include "core/error.h"

namespace dtr::capi {
namespace {

constexpr uint32_t kMaxGeneration = (1u << 24) - 1;

uint64_t encode(Kind kind, uint32_t generation, uint32_t index) {
  return (uint64_t(kind) << 56) | (uint64_t(generation) << 32) | index;
}

thread_local std::string t_last_error;

}  // namespace

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kTensor: return "tensor";
    case Kind::kAttrs: return "attrs";
    case Kind::kModule: return "module";
    case Kind::kOptimizer: return "optimizer";
    case Kind::kScope: return "scope";
  }
  return "unknown";
}

HandleTable& HandleTable::instance() {
  // Never destroyed: handles may be freed from static destructors and
  // thread exits after main returns; what it still holds stays reachable.
  static HandleTable* table = new HandleTable;
  return *table;
}

uint64_t HandleTable::insert(Kind kind, std::shared_ptr<Object> obj) {
  std::lock_guard lock(mu_);
  uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    if (slots_.size() >= UINT32_MAX) throw ApiError(DTR_ERR_OUT_OF_MEMORY, "too many live handles");
    slots_.emplace_back();
    index = uint32_t(slots_.size() - 1);
  }
  Slot& s = slots_[index];
  s.kind = kind;
  s.obj = std::move(obj);
  ++live_;
  return encode(kind, s.generation, index);
}

std::shared_ptr<Object> HandleTable::find(uint64_t h, Kind kind) const {
  const uint32_t index = uint32_t(h);
  const uint32_t generation = uint32_t(h >> 32) & kMaxGeneration;
  if (Kind(h >> 56) != kind) return nullptr;
  std::lock_guard lock(mu_);
  if (index >= slots_.size()) return nullptr;
  const Slot& s = slots_[index];
  if (s.generation != generation || s.kind != kind || !s.obj) return nullptr;
  return s.obj;
}

std::shared_ptr<Object> HandleTable::remove(uint64_t h, Kind kind) {
  const uint32_t index = uint32_t(h);
  const uint32_t generation = uint32_t(h >> 32) & kMaxGeneration;
  if (Kind(h >> 56) != kind) return nullptr;
  std::lock_guard lock(mu_);
  if (index >= slots_.size()) return nullptr;
  Slot& s = slots_[index];
  if (s.generation != generation || s.kind != kind || !s.obj) return nullptr;
  std::shared_ptr<Object> obj = std::move(s.obj);
  s.obj.reset();
  --live_;
  // A slot whose generations are used up is retired, so no id repeats.
  if (++s.generation <= kMaxGeneration) free_.push_back(index);
  return obj;
}

size_t HandleTable::live() const {
  std::lock_guard lock(mu_);
  return live_;
}

void throw_invalid_handle(uint64_t h, Kind kind) {
  throw ApiError(DTR_ERR_INVALID_HANDLE,
                 h == DTR_NULL
                     ? fmt::format("null {} handle", kind_name(kind))
                     : fmt::format("invalid {} handle {:#x} (freed, never issued, or another kind "
                                   "of handle)",
                                   kind_name(kind), h));
}

void Use::hold(std::shared_ptr<Object> obj, Access access) {
  release();
  std::atomic<int32_t>& use = obj->use;
  int32_t v = use.load(std::memory_order_relaxed);
  if (access == Access::kRead) {
    do {
      if (v < 0) throw ApiError(DTR_ERR_BUSY, "the object is being changed by a call on another thread");
    } while (!use.compare_exchange_weak(v, v + 1, std::memory_order_acquire));
  } else {
    v = 0;
    if (!use.compare_exchange_strong(v, -1, std::memory_order_acquire)) {
      throw ApiError(DTR_ERR_BUSY, "the object is in use by a call on another thread");
    }
  }
  obj_ = std::move(obj);
  access_ = access;
}

void Use::release() noexcept {
  if (!obj_) return;
  if (access_ == Access::kRead) {
    obj_->use.fetch_sub(1, std::memory_order_release);
  } else {
    obj_->use.store(0, std::memory_order_release);
  }
  obj_.reset();
}

dtr_status fail(dtr_status s, const char* message) noexcept {
  try {
    t_last_error = message;
  } catch (...) {
    t_last_error.clear();  // no memory for the message: the status still tells
  }
  return s;
}

dtr_status fail_current_exception() noexcept {
  try {
    throw;
  } catch (const ApiError& e) {
    return fail(e.status, e.what());
  } catch (const ValueError& e) {
    return fail(DTR_ERR_VALUE, e.what());
  } catch (const TypeError& e) {
    return fail(DTR_ERR_TYPE, e.what());
  } catch (const IndexError& e) {
    return fail(DTR_ERR_INDEX, e.what());
  } catch (const NotImplementedError& e) {
    return fail(DTR_ERR_NOT_IMPLEMENTED, e.what());
  } catch (const OutOfMemoryError& e) {
    return fail(DTR_ERR_OUT_OF_MEMORY, e.what());
  } catch (const DeviceError& e) {
    return fail(DTR_ERR_DEVICE, e.what());
  } catch (const InternalError& e) {
    return fail(DTR_ERR_INTERNAL, e.what());
  } catch (const Error& e) {
    // AutogradError (a second backward through a freed graph, a saved
    // tensor modified in place: PyTorch's RuntimeError) and any dtr::Error
    // of no narrower type.
    return fail(DTR_ERR_RUNTIME, e.what());
  } catch (const std::bad_alloc&) {
    return fail(DTR_ERR_OUT_OF_MEMORY, "host memory allocation failed");
  } catch (const std::exception& e) {
    // InternalError, or an exception dtr does not type: a bug either way.
    return fail(DTR_ERR_INTERNAL, e.what());
  } catch (...) {
    return fail(DTR_ERR_INTERNAL, "unknown exception");
  }
}

}  // namespace dtr::capi

extern "C" const char* dtr_last_error(void) { return dtr::capi::t_last_error.c_str(); }
