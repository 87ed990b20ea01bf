#pragma once
// Storage: a block of device memory shared by a tensor and all its views.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kiln/runtime/allocator.h"

namespace kiln {

class StorageImpl {
 public:
  StorageImpl(DataPtr data, size_t nbytes) : data_(std::move(data)), nbytes_(nbytes) {}
  void* data() const { return data_.get(); }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return data_.device(); }

  // Foreign memory: a block that another library may write without going through kiln, so
  // that a tensor's version counter cannot see the writes and nothing derived from the
  // contents (packed weights) may be cached for it. Imported memory (kiln.from_numpy, a DLPack
  // import) is foreign for good; kiln memory while NumPy arrays or DLPack capsules made from it
  // are alive. Each export also starts a new export epoch, which the caches compare, so a copy
  // cached before an export is not served after it. (The version counter is left alone: it
  // would fail autograd's check of saved tensors after a mere .numpy().)
  void mark_foreign() { imported_ = true; }
  void begin_export() {
    exports_.fetch_add(1, std::memory_order_relaxed);
    export_epoch_.fetch_add(1, std::memory_order_relaxed);
  }
  void end_export() { exports_.fetch_sub(1, std::memory_order_relaxed); }
  bool foreign() const { return imported_ || exports_.load(std::memory_order_relaxed) > 0; }
  uint64_t export_epoch() const { return export_epoch_.load(std::memory_order_relaxed); }

  // Shared host memory (kiln/runtime/shared_memory.h): other processes may map these bytes
  // through the memory file's descriptor (-1 for an empty storage and a received one).
  bool is_shared() const { return shared_; }
  int shared_fd() const { return shared_fd_; }
  // Replaces the block by `shared` (a shared mapping of the same size holding the same
  // bytes): every tensor and view over this storage now reads the shared pages, which other
  // processes may write, so the storage is foreign (nothing derived from it is cached).
  // The former block is kept until the storage dies: a NumPy view, a kernel running on
  // another thread or a queue's feeder thread (which shares tensors as it sends them) may
  // still be using it.
  void adopt_shared(DataPtr shared, int fd) {
    retired_.push_back(std::move(data_));
    data_ = std::move(shared);
    mark_shared(fd);
    export_epoch_.fetch_add(1, std::memory_order_relaxed);  // caches keyed on the old block
  }
  // A storage made over a shared mapping (received from another process, fd -1: the
  // receiver keeps no descriptor, so that many received tensors cannot exhaust them).
  void mark_shared(int fd) {
    shared_fd_ = fd;
    shared_ = true;
    imported_ = true;
  }

 private:
  DataPtr data_;
  size_t nbytes_;
  bool shared_ = false;
  int shared_fd_ = -1;
  std::vector<DataPtr> retired_;  // blocks replaced by adopt_shared
  bool imported_ = false;
  std::atomic<int> exports_{0};
  std::atomic<uint64_t> export_epoch_{0};
};

using Storage = std::shared_ptr<StorageImpl>;

// Allocates nbytes on device (on its current stream, through the caching allocator).
Storage make_storage(Device device, size_t nbytes);

}  // namespace kiln
