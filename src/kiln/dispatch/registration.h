#pragma once
// For code that runs while the built-in ops are being registered (inside
// ensure_ops_registered, where find_op would wait on itself): lookups that do not trigger it.
#include <string_view>

#include "kiln/dispatch/registry.h"

namespace kiln::detail {

// The kernel registered so far for op on device (empty when the op or kernel is missing).
KernelEntry registered_kernel(std::string_view op, DeviceType device);

}  // namespace kiln::detail
