#include "core/storage.h"

namespace dtr {

Storage::~Storage() {
  if (tracker != nullptr) tracker->on_storage_destroyed(*this);
  free_data();
}

void Storage::free_data() {
  if (data_ != nullptr) {
    allocator_->deallocate(data_, size_t(nbytes_));
    data_ = nullptr;
  }
}

}  // namespace dtr
