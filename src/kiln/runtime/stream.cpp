// The calling thread's current device and streams, stream creation, and device-wide
// synchronisation. Current device/stream are per thread (as in CUDA/PyTorch), so they live
// in thread_local tables with trivial types: no locking, no TLS destructors.
#include "kiln/runtime/stream.h"

#include <array>
#include <exception>
#include <mutex>
#include <ostream>
#include <vector>

#include "kiln/core/error.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/internal.h"

namespace kiln {

namespace {
using detail::kMaxDevicesPerType;

thread_local std::array<int, kNumDeviceTypes> t_current_device{};
thread_local std::array<std::array<int64_t, kMaxDevicesPerType>, kNumDeviceTypes>
    t_current_stream{};

// Streams created through new_stream, so that synchronize_device can reach all of them.
struct CreatedStreams {
  std::mutex mutex;
  std::array<std::array<std::vector<int64_t>, kMaxDevicesPerType>, kNumDeviceTypes> ids;
};
CreatedStreams& created_streams() {
  static auto* s = new CreatedStreams;  // leaked: usable from late static destructors
  return *s;
}
}  // namespace

detail::CheckedDevice detail::check_device(Device d) {
  Backend& backend = get_backend(d.type);
  Device r = resolve_device(d);
  int count = backend.device_count();
  if (r.index >= count || r.index >= kMaxDevicesPerType) {
    KILN_THROW(DeviceError, "device ", r, " does not exist: expected an index in [0, ",
               count, ") for device type '", device_type_name(d.type), "'");
  }
  return {backend, r};
}

int current_device_index(DeviceType type) {
  auto slot = size_t(type);
  KILN_CHECK(slot < size_t(kNumDeviceTypes), ValueError, "current_device_index: device type ",
             slot, " is out of range");
  return t_current_device[slot];
}

void set_current_device_index(DeviceType type, int index) {
  KILN_CHECK(index >= 0, DeviceError, "set_current_device_index: expected a non-negative "
             "index for device type '", device_type_name(type), "', got ", index);
  detail::check_device(Device(type, index));
  t_current_device[size_t(type)] = index;
}

Device resolve_device(Device d) {
  if (d.has_index()) return d;
  return Device(d.type, current_device_index(d.type));
}

Stream new_stream(Device device) {
  auto [backend, d] = detail::check_device(device);
  int64_t id = backend.create_stream(d.index);
  auto& reg = created_streams();
  std::lock_guard lock(reg.mutex);
  reg.ids[size_t(d.type)][size_t(d.index)].push_back(id);
  return Stream(d, id);
}

Stream default_stream(Device device) { return Stream(detail::check_device(device).device, 0); }

Stream current_stream(Device device) {
  Device d = detail::check_device(device).device;
  return Stream(d, t_current_stream[size_t(d.type)][size_t(d.index)]);
}

void set_current_stream(const Stream& s) {
  KILN_CHECK(s.id >= 0, DeviceError, "set_current_stream: expected a stream id >= 0, got ",
             s.id);
  Device d = detail::check_device(s.device).device;
  t_current_stream[size_t(d.type)][size_t(d.index)] = s.id;
}

bool Stream::query() const { return get_backend(device.type).stream_query(*this); }

void Stream::synchronize() const { get_backend(device.type).stream_synchronize(*this); }

void synchronize_device(Device device) {
  auto [backend, d] = detail::check_device(device);
  std::vector<int64_t> ids{0};
  {
    auto& reg = created_streams();
    std::lock_guard lock(reg.mutex);
    const auto& made = reg.ids[size_t(d.type)][size_t(d.index)];
    ids.insert(ids.end(), made.begin(), made.end());
  }
  // Wait for every stream even when one reports an error, then report the first error.
  std::exception_ptr first_error;
  for (int64_t id : ids) {
    try {
      backend.stream_synchronize(Stream(d, id));
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
}

std::ostream& operator<<(std::ostream& os, const Stream& s) {
  return os << "Stream(" << s.device << ", id=" << s.id << ")";
}

}  // namespace kiln
