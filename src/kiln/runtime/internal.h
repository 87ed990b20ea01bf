#pragma once
// Helpers shared by the runtime's source files and the built-in backends; not public API.
#include <cstdint>
#include <memory>
#include <string>

#include "kiln/runtime/backend.h"

namespace kiln::detail {

// Registers backend unless its type already has one (then the argument is dropped).
// Does not trigger ensure_builtin_backends(), so builtin registration can use it.
void register_backend_if_absent(std::unique_ptr<Backend> backend);

// The backend of d.type with d resolved to an index that exists on it; DeviceError naming
// the accepted range otherwise.
struct CheckedDevice {
  Backend& backend;
  Device device;  // has an index
};
CheckedDevice check_device(Device d);

// Upper bound on device indices per type for the runtime's fixed per-device tables.
inline constexpr int kMaxDevicesPerType = 64;

// "512 bytes", "1.50 KiB", "12.00 MiB", "1.00 GiB".
std::string format_bytes(int64_t bytes);

}  // namespace kiln::detail
