#pragma once
// Internal: the bit set of installed interceptors and the per-thread exclusions, read by the
// dispatcher on every call.
#include <atomic>

namespace kiln::detail {
extern std::atomic<unsigned> g_interceptor_mask;
extern thread_local unsigned t_interceptor_excluded;
inline unsigned active_interceptors() {
  return g_interceptor_mask.load(std::memory_order_relaxed) & ~t_interceptor_excluded;
}
}  // namespace kiln::detail
