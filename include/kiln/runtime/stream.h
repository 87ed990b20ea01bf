#pragma once
// Stream: a value type naming an in-order work queue of one device. Work submitted to one
// stream runs in submission order; work on different streams may overlap. Stream id 0 is the
// device's default stream. The backend owns the queue; the Stream is just (device, id).
#include <cstdint>
#include <iosfwd>

#include "kiln/runtime/device.h"

namespace kiln {

struct Stream {
  Device device;  // always has an index
  int64_t id = 0;

  Stream() = default;
  Stream(Device d, int64_t i) : device(d), id(i) {}

  bool query() const;        // true when all submitted work has finished
  void synchronize() const;  // blocks the host until all submitted work has finished
  bool operator==(const Stream& o) const { return device == o.device && id == o.id; }
  bool operator!=(const Stream& o) const { return !(*this == o); }
};
std::ostream& operator<<(std::ostream& os, const Stream& s);

// Creates a new stream on device (current device of its type when it has no index).
Stream new_stream(Device device);
Stream default_stream(Device device);
// The current stream of the thread for device (default stream until set).
Stream current_stream(Device device);
void set_current_stream(const Stream& s);

// Current device index of the calling thread for a device type (0 until set).
int current_device_index(DeviceType type);
void set_current_device_index(DeviceType type, int index);
// Device with an index: d itself when it has one, else the thread's current device of d.type.
Device resolve_device(Device d);

// Blocks until all streams of the device have finished their work.
void synchronize_device(Device device);

}  // namespace kiln
