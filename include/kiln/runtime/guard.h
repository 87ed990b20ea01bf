#pragma once
// RAII guards that set the thread's current device / stream and restore them on scope exit,
// including when an exception unwinds the scope.
#include "kiln/runtime/stream.h"

namespace kiln {

class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);  // device without index: no change
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  DeviceType type_;
  int previous_;
};

class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);  // sets current device and stream
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_stream_;
  int previous_device_;
};

}  // namespace kiln
