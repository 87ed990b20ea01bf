// The backend registry: one slot per DeviceType. Slots are written once under a mutex and
// read without locking (atomics), because every op asks the registry for its backend.
// Registered backends are never destroyed: allocators, events and streams of late static
// destructors may still call into them at process exit.
#include <array>
#include <atomic>
#include <mutex>

#include "kiln/core/error.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/internal.h"

namespace kiln {

namespace {
std::array<std::atomic<Backend*>, kNumDeviceTypes> g_backends{};
std::mutex g_register_mutex;

// Returns false (and keeps the old one) when the slot is taken.
bool install(std::unique_ptr<Backend>& backend) {
  KILN_CHECK(backend != nullptr, ValueError, "register_backend: expected a backend, got null");
  auto slot = size_t(backend->type());
  KILN_CHECK(slot < g_backends.size(), ValueError, "register_backend: device type value ",
             slot, " is out of range; expected < ", kNumDeviceTypes);
  std::lock_guard lock(g_register_mutex);
  if (g_backends[slot].load(std::memory_order_acquire) != nullptr) return false;
  g_backends[slot].store(backend.release(), std::memory_order_release);
  return true;
}

std::string available_list() {
  std::string s;
  for (DeviceType t : registered_device_types()) {
    if (!s.empty()) s += ", ";
    s += device_type_name(t);
  }
  return s.empty() ? "none" : s;
}
}  // namespace

void register_backend(std::unique_ptr<Backend> backend) {
  DeviceType type = backend ? backend->type() : DeviceType::CPU;
  if (!install(backend)) {
    KILN_THROW(DeviceError, "register_backend: a backend for device type '",
               device_type_name(type), "' is already registered; expected one per type");
  }
}

void detail::register_backend_if_absent(std::unique_ptr<Backend> backend) {
  install(backend);  // a duplicate is dropped when `backend` goes out of scope
}

Backend* find_backend(DeviceType type) noexcept {
  auto slot = size_t(type);
  if (slot >= g_backends.size()) return nullptr;
  // Every op looks its backend up several times: a filled slot answers without the
  // call_once of the built-in registration (a slot is never emptied).
  if (Backend* b = g_backends[slot].load(std::memory_order_acquire)) return b;
  try {
    ensure_builtin_backends();
  } catch (...) {
    // Registration failed (e.g. out of memory); report what is registered.
  }
  return g_backends[slot].load(std::memory_order_acquire);
}

Backend& get_backend(DeviceType type) {
  Backend* b = find_backend(type);
  if (b == nullptr) {
    KILN_THROW(DeviceError, "no backend registered for device type '", device_type_name(type),
               "'; available: ", available_list());
  }
  return *b;
}

bool is_available(DeviceType type) noexcept {
  Backend* b = find_backend(type);
  return b != nullptr && b->device_count() > 0;
}

std::vector<DeviceType> registered_device_types() {
  std::vector<DeviceType> out;
  for (int i = 0; i < kNumDeviceTypes; ++i) {
    if (find_backend(DeviceType(i)) != nullptr) out.push_back(DeviceType(i));
  }
  return out;
}

}  // namespace kiln
