#pragma once
// Device memory. A backend provides raw allocate/free; the generic CachingAllocator wraps it
// for every backend: freed blocks go back to a pool of the stream they were allocated on and
// are reused by later allocations on that stream (in-order execution makes this safe without
// synchronisation), sizes are rounded to limit fragmentation, and stats are kept.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "kiln/runtime/stream.h"

namespace kiln {

struct MemoryStats {
  int64_t allocated_bytes = 0;       // bytes in live blocks (rounded sizes)
  int64_t reserved_bytes = 0;        // bytes obtained from the backend (live + cached)
  int64_t peak_allocated_bytes = 0;  // max of allocated_bytes since the last reset
  int64_t num_allocs = 0;            // allocate() calls that returned a block
  int64_t num_frees = 0;
  int64_t num_raw_allocs = 0;        // calls into the backend's raw allocator
  int64_t num_cache_hits = 0;        // allocations served from the pool
  int64_t memory_limit = -1;         // reserved_bytes may not exceed this; -1: no limit
};

// A pointer to device memory with the means to give it back. Move-only.
class DataPtr {
 public:
  using Deleter = void (*)(void* ctx, void* ptr);
  DataPtr() = default;
  DataPtr(void* ptr, void* ctx, Deleter del, Device device)
      : ptr_(ptr), ctx_(ctx), deleter_(del), device_(device) {}
  DataPtr(DataPtr&& o) noexcept { *this = std::move(o); }
  DataPtr& operator=(DataPtr&& o) noexcept;
  DataPtr(const DataPtr&) = delete;
  DataPtr& operator=(const DataPtr&) = delete;
  ~DataPtr() { reset(); }

  void* get() const { return ptr_; }
  Device device() const { return device_; }
  void reset();

 private:
  void* ptr_ = nullptr;
  void* ctx_ = nullptr;
  Deleter deleter_ = nullptr;
  Device device_{};
};

class Backend;

class CachingAllocator {
 public:
  CachingAllocator(Backend& backend, int device_index);
  ~CachingAllocator();

  // nbytes may be 0 (returns a DataPtr with a null pointer). Throws OutOfMemoryError naming
  // the requested size, the bytes in use and the limit when the backend or limit refuses.
  DataPtr allocate(size_t nbytes, const Stream& stream);
  void empty_cache();  // returns every cached (free) block to the backend
  MemoryStats stats() const;
  void reset_peak_stats();
  void set_memory_limit(int64_t bytes);  // -1 removes the limit

  static size_t round_size(size_t nbytes);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The caching allocator of a device (created on first use).
CachingAllocator& allocator_for(Device device);
// Shorthands used by tensors: allocate on the current stream of device.
DataPtr allocate_on(Device device, size_t nbytes);

}  // namespace kiln
