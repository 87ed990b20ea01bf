// One CachingAllocator per device, created on first use and never destroyed: tensors freed
// by late static destructors at exit must still find their allocator.
#include <array>
#include <atomic>

#include "kiln/runtime/allocator.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/internal.h"

namespace kiln {

namespace {
using Table = std::array<std::array<std::atomic<CachingAllocator*>, detail::kMaxDevicesPerType>,
                         kNumDeviceTypes>;
Table g_allocators{};
std::mutex g_create_mutex;
}  // namespace

CachingAllocator& allocator_for(Device device) {
  // Every tensor allocation comes here: an existing allocator is found without validating
  // the device again (it was valid when the allocator was made).
  if (device.index >= 0 && device.index < detail::kMaxDevicesPerType &&
      size_t(device.type) < size_t(kNumDeviceTypes)) {
    auto& slot = g_allocators[size_t(device.type)][size_t(device.index)];
    if (CachingAllocator* a = slot.load(std::memory_order_acquire)) return *a;
  }
  auto [backend, d] = detail::check_device(device);
  auto& slot = g_allocators[size_t(d.type)][size_t(d.index)];
  if (CachingAllocator* a = slot.load(std::memory_order_acquire)) return *a;
  std::lock_guard lock(g_create_mutex);
  if (CachingAllocator* a = slot.load(std::memory_order_acquire)) return *a;
  auto* a = new CachingAllocator(backend, d.index);  // leaked on purpose (see above)
  slot.store(a, std::memory_order_release);
  return *a;
}

DataPtr allocate_on(Device device, size_t nbytes) {
  // Meta storages record their size but own no memory (src/kiln/backends/meta).
  if (device.type == DeviceType::Meta)
    return DataPtr(nullptr, nullptr, nullptr, Device(DeviceType::Meta, 0));
  Stream s = current_stream(device);
  return allocator_for(s.device).allocate(nbytes, s);
}

}  // namespace kiln
