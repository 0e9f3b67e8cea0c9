#include "core/storage.h"

namespace dtr {

Storage::~Storage() {
  // The hook first: the runtime accounts for the bytes still resident.
  // (It may delete itself; hook_ is not read again.)
  if (hook_ != nullptr) hook_->on_storage_destroyed(*this);
  hook_ = nullptr;
  free_data();
}

void Storage::free_data() {
  if (data_ != nullptr) {
    allocator_->deallocate(data_, size_t(nbytes_));
    data_ = nullptr;
  }
}

}  // namespace dtr
