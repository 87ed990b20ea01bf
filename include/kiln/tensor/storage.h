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

  // Foreign memory: a block that another library owns and may write without going through
  // kiln (a NumPy array from kiln.from_numpy, a DLPack import). A tensor's version counter
  // cannot see those writes, so nothing derived from the contents (packed weights) may be
  // cached for it.
  void mark_foreign() { foreign_ = true; }
  bool foreign() const { return foreign_; }

 private:
  DataPtr data_;
  size_t nbytes_;
  bool foreign_ = false;
};

using Storage = std::shared_ptr<StorageImpl>;

// Allocates nbytes on device (on its current stream, through the caching allocator).
Storage make_storage(Device device, size_t nbytes);

}  // namespace kiln
