#pragma once
// Storage: a block of device memory shared by a tensor and all its views.
#include <cstddef>
#include <memory>

#include "kiln/runtime/allocator.h"

namespace kiln {

class StorageImpl {
 public:
  StorageImpl(DataPtr data, size_t nbytes) : data_(std::move(data)), nbytes_(nbytes) {}
  void* data() const { return data_.get(); }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return data_.device(); }

 private:
  DataPtr data_;
  size_t nbytes_;
};

using Storage = std::shared_ptr<StorageImpl>;

// Allocates nbytes on device (on its current stream, through the caching allocator).
Storage make_storage(Device device, size_t nbytes);

}  // namespace kiln
