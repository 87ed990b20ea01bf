// DeviceGuard / StreamGuard. The restored values were valid when saved, so restoring cannot
// fail in practice; destructors still swallow errors because they run during unwinding.
#include "kiln/runtime/guard.h"

#include "kiln/runtime/internal.h"

namespace kiln {

DeviceGuard::DeviceGuard(Device device) : type_(device.type), previous_(-1) {
  if (!device.has_index()) return;
  int previous = current_device_index(type_);
  if (previous == device.index) {
    // Already current (every op on one device): validate, and nothing to restore.
    detail::check_device(device);
    return;
  }
  set_current_device_index(type_, device.index);  // validates; nothing to undo if it throws
  previous_ = previous;
}

DeviceGuard::~DeviceGuard() {
  if (previous_ < 0) return;
  try {
    set_current_device_index(type_, previous_);
  } catch (...) {
  }
}

StreamGuard::StreamGuard(const Stream& stream)
    : previous_stream_(current_stream(stream.device)),
      previous_device_(current_device_index(stream.device.type)) {
  // current_stream() above validated stream.device (and resolved a missing index). The stream
  // is set first: it is the only step that can still fail, and then nothing has changed.
  set_current_stream(Stream(previous_stream_.device, stream.id));
  set_current_device_index(stream.device.type, previous_stream_.device.index);
}

StreamGuard::~StreamGuard() {
  try {
    set_current_stream(previous_stream_);
    set_current_device_index(previous_stream_.device.type, previous_device_);
  } catch (...) {
  }
}

}  // namespace kiln
