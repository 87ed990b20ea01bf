// The generic caching allocator over Backend::raw_allocate/raw_free.
//
// Freed blocks go to a pool keyed by the stream they were allocated on and are reused only
// by allocations on that stream: work on one stream runs in order, so the next user of a
// block cannot touch it before the previous user's queued work is done. Blocks are never
// split; sizes are rounded (512 bytes for small requests, 2 MiB above 1 MiB) so that
// similar requests share blocks.
//
// empty_cache() hands cached blocks back while work queued earlier may still use them, so a
// backend's raw_free must not release memory under queued work (the testing backend defers
// the free until each of its streams has passed it; a CUDA-like backend synchronises).
// The backend is never called with the mutex held: raw_free may wait for streams whose
// queued work itself frees DataPtrs (and needs the mutex).
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/runtime/allocator.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/internal.h"

namespace kiln {

namespace {
constexpr size_t kSmallLimit = size_t(1) << 20;    // requests up to 1 MiB are small
constexpr size_t kSmallGranule = 512;
constexpr size_t kLargeGranule = size_t(2) << 20;  // 2 MiB
constexpr size_t kMaxRequest = size_t(1) << 56;    // beyond any device; avoids overflow

size_t round_up(size_t n, size_t granule) { return (n + granule - 1) / granule * granule; }

// KILN_POISON_MEMORY=1: every block handed out on host-accessible memory is first filled with
// 0xFF bytes (NaN in every float type, -1 in every integer type), so that a kernel reading
// an output it never wrote — or an op relying on fresh memory being zero — shows at once
// instead of depending on what the previous user of the block left there. A test tool.
bool poison_memory() {
  static const bool enabled = [] {
    const char* v = std::getenv("KILN_POISON_MEMORY");
    return v && std::strcmp(v, "1") == 0;
  }();
  return enabled;
}

struct FreeBlock {
  void* ptr;
  size_t size;
};
}  // namespace

struct CachingAllocator::Impl {
  Backend& backend;
  Device device;
  mutable std::mutex mutex;
  struct Live {
    size_t size;
    int64_t stream_id;
  };
  using LiveMap = std::unordered_map<void*, Live>;
  using Pool = std::set<std::pair<size_t, void*>>;  // free blocks by (size, address)
  LiveMap live;
  std::map<int64_t, Pool> pools;  // per stream, for best-fit lookup
  // Nodes of `live` and of the pools kept for reuse: a block moves between the two on every
  // allocation and free, which would otherwise cost a malloc and a free of a node each way
  // (decision 0059). At most kSpareNodes of each kind are kept (the vectors never grow).
  static constexpr size_t kSpareNodes = 64;
  std::vector<LiveMap::node_type> spare_live;
  std::vector<Pool::node_type> spare_pool;
  MemoryStats stats;
  bool owner_alive = true;  // false once the CachingAllocator is destroyed

  Impl(Backend& b, Device d) : backend(b), device(d) {
    spare_live.reserve(kSpareNodes);
    spare_pool.reserve(kSpareNodes);
  }

  template <typename Node>
  static void keep_spare(std::vector<Node>& spares, Node&& node) {
    if (spares.size() < kSpareNodes) spares.push_back(std::move(node));
  }

  // Takes the best-fitting cached block of the stream: the smallest that is large enough,
  // unless it would waste half or more of itself.
  bool take_cached(int64_t stream_id, size_t size, FreeBlock& out) {
    auto pool = pools.find(stream_id);
    if (pool == pools.end()) return false;
    auto it = pool->second.lower_bound({size, nullptr});
    if (it == pool->second.end() || it->first >= 2 * size) return false;
    out = {it->second, it->first};
    keep_spare(spare_pool, pool->second.extract(it));
    return true;
  }

  std::vector<FreeBlock> take_all_cached() {
    std::vector<FreeBlock> out;
    for (auto& [stream_id, pool] : pools) {
      for (auto& [size, ptr] : pool) {
        out.push_back({ptr, size});
        stats.reserved_bytes -= int64_t(size);
      }
    }
    pools.clear();
    return out;
  }

  void release(const std::vector<FreeBlock>& blocks) noexcept {
    for (const auto& b : blocks) {
      try {
        backend.raw_free(device.index, b.ptr);
      } catch (...) {
        // raw_free does not fail for valid pointers; nothing sensible to do otherwise.
      }
    }
  }

  DataPtr hand_out(void* ptr, size_t size, int64_t stream_id) {
    if (poison_memory() && backend.host_accessible()) std::memset(ptr, 0xFF, size);
    if (!spare_live.empty()) {
      LiveMap::node_type node = std::move(spare_live.back());
      spare_live.pop_back();
      node.key() = ptr;
      node.mapped() = Live{size, stream_id};
      live.insert(std::move(node));
    } else {
      live.emplace(ptr, Live{size, stream_id});
    }
    stats.num_allocs += 1;
    stats.allocated_bytes += int64_t(size);
    if (stats.allocated_bytes > stats.peak_allocated_bytes) {
      stats.peak_allocated_bytes = stats.allocated_bytes;
    }
    return DataPtr(ptr, this, &Impl::free_block, device);
  }

  [[noreturn]] void throw_oom(size_t requested, bool backend_refused) const {
    std::string msg = detail::str_cat(
        device, " out of memory: tried to allocate ", detail::format_bytes(int64_t(requested)),
        "; ", detail::format_bytes(stats.allocated_bytes), " allocated, ",
        detail::format_bytes(stats.reserved_bytes), " reserved");
    if (stats.memory_limit >= 0) {
      msg += ", limit " + detail::format_bytes(stats.memory_limit);
    }
    if (backend_refused) {
      int64_t total = 0;
      try {
        total = backend.properties(device.index).total_memory;
      } catch (...) {
      }
      msg += "; the device refused the allocation";
      if (total > 0) msg += " (device total " + detail::format_bytes(total) + ")";
    }
    throw OutOfMemoryError(msg);
  }

  // The DataPtr deleter. Never throws; works after empty_cache() and after the owning
  // CachingAllocator is gone (then it frees the block and, for the last one, the Impl).
  static void free_block(void* ctx, void* ptr) {
    auto* self = static_cast<Impl*>(ctx);
    std::unique_lock lock(self->mutex);
    auto it = self->live.find(ptr);
    if (it == self->live.end()) return;  // not ours: ignore rather than corrupt the pool
    Live block = it->second;
    keep_spare(self->spare_live, self->live.extract(it));
    self->stats.allocated_bytes -= int64_t(block.size);
    self->stats.num_frees += 1;
    bool cached = false;
    if (self->owner_alive) {
      try {
        Pool& pool = self->pools[block.stream_id];
        if (!self->spare_pool.empty()) {
          Pool::node_type node = std::move(self->spare_pool.back());
          self->spare_pool.pop_back();
          node.value() = {block.size, ptr};
          pool.insert(std::move(node));
        } else {
          pool.insert({block.size, ptr});
        }
        cached = true;
      } catch (...) {  // no memory for the pool entry: give the block back instead
      }
    }
    if (cached) return;
    self->stats.reserved_bytes -= int64_t(block.size);
    bool delete_self = !self->owner_alive && self->live.empty();
    lock.unlock();
    self->release({{ptr, block.size}});
    if (delete_self) delete self;
  }
};

CachingAllocator::CachingAllocator(Backend& backend, int device_index)
    : impl_(std::make_unique<Impl>(backend, Device(backend.type(), device_index))) {
  KILN_CHECK(device_index >= 0 && device_index < backend.device_count(), DeviceError,
             "CachingAllocator: expected a device index in [0, ", backend.device_count(),
             ") for ", backend.name(), ", got ", device_index);
}

CachingAllocator::~CachingAllocator() {
  std::unique_lock lock(impl_->mutex);
  impl_->owner_alive = false;
  std::vector<FreeBlock> cached = impl_->take_all_cached();
  bool delete_impl = impl_->live.empty();
  lock.unlock();
  impl_->release(cached);
  // Live blocks keep the Impl alive; the last one to be freed deletes it.
  Impl* impl = impl_.release();
  if (delete_impl) delete impl;
}

size_t CachingAllocator::round_size(size_t nbytes) {
  if (nbytes == 0) return 0;
  if (nbytes <= kSmallLimit) return round_up(nbytes, kSmallGranule);
  if (nbytes > kMaxRequest) return nbytes;  // refused by allocate(); avoid overflow here
  return round_up(nbytes, kLargeGranule);
}

DataPtr CachingAllocator::allocate(size_t nbytes, const Stream& stream) {
  Impl& m = *impl_;
  KILN_CHECK(stream.device == m.device, DeviceError, "CachingAllocator::allocate: this "
             "allocator is for ", m.device, ", got a stream on ", stream.device);
  if (nbytes == 0) return DataPtr(nullptr, nullptr, nullptr, m.device);
  const size_t size = round_size(nbytes);

  // Attempt 0 may free the whole cache to make room; attempt 1 fails for good.
  for (int attempt = 0;; ++attempt) {
    std::vector<FreeBlock> to_release;
    bool claimed = false;
    {
      std::lock_guard lock(m.mutex);
      if (nbytes > kMaxRequest) m.throw_oom(nbytes, /*backend_refused=*/true);
      FreeBlock hit;
      if (m.take_cached(stream.id, size, hit)) {
        m.stats.num_cache_hits += 1;
        return m.hand_out(hit.ptr, hit.size, stream.id);
      }
      bool over_limit = m.stats.memory_limit >= 0 &&
                        m.stats.reserved_bytes + int64_t(size) > m.stats.memory_limit;
      if (!over_limit) {
        m.stats.reserved_bytes += int64_t(size);  // claim the budget before unlocking
        claimed = true;
      } else if (attempt > 0) {
        m.throw_oom(nbytes, /*backend_refused=*/false);
      } else {
        to_release = m.take_all_cached();
      }
    }
    if (!claimed) {
      m.release(to_release);
      continue;
    }
    void* ptr = nullptr;
    try {
      ptr = m.backend.raw_allocate(m.device.index, size);
    } catch (...) {
      std::lock_guard lock(m.mutex);
      m.stats.reserved_bytes -= int64_t(size);
      throw;
    }
    std::unique_lock lock(m.mutex);
    if (ptr != nullptr) {
      m.stats.num_raw_allocs += 1;
      return m.hand_out(ptr, size, stream.id);
    }
    m.stats.reserved_bytes -= int64_t(size);
    if (attempt > 0) m.throw_oom(nbytes, /*backend_refused=*/true);
    to_release = m.take_all_cached();
    lock.unlock();
    m.release(to_release);
  }
}

void CachingAllocator::empty_cache() {
  std::vector<FreeBlock> cached;
  {
    std::lock_guard lock(impl_->mutex);
    cached = impl_->take_all_cached();
  }
  impl_->release(cached);
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->stats;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard lock(impl_->mutex);
  impl_->stats.peak_allocated_bytes = impl_->stats.allocated_bytes;
}

void CachingAllocator::set_memory_limit(int64_t bytes) {
  KILN_CHECK(bytes >= -1, ValueError, "set_memory_limit: expected a byte count >= 0, or -1 "
             "for no limit, got ", bytes);
  std::lock_guard lock(impl_->mutex);
  impl_->stats.memory_limit = bytes;
}

}  // namespace kiln
