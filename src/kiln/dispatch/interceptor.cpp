#include "kiln/dispatch/interceptor.h"

#include <array>
#include <atomic>

#include "kiln/dispatch/interceptor_state.h"

namespace kiln {

namespace detail {
std::atomic<unsigned> g_interceptor_mask{0};
thread_local unsigned t_interceptor_excluded = 0;
}  // namespace detail

namespace {
std::array<std::atomic<Interceptor*>, kNumInterceptorSlots> g_interceptors{};
}

void set_interceptor(InterceptorSlot slot, Interceptor* interceptor) {
  g_interceptors[size_t(slot)].store(interceptor);
  unsigned bit = 1u << unsigned(slot);
  if (interceptor)
    detail::g_interceptor_mask.fetch_or(bit);
  else
    detail::g_interceptor_mask.fetch_and(~bit);
}

Interceptor* get_interceptor(InterceptorSlot slot) { return g_interceptors[size_t(slot)].load(); }

InterceptorExcludeGuard::InterceptorExcludeGuard(InterceptorSlot from_slot)
    : previous_(detail::t_interceptor_excluded) {
  // Exclude from_slot and every slot after it in the chain.
  unsigned bits = ~((1u << unsigned(from_slot)) - 1u) & ((1u << kNumInterceptorSlots) - 1u);
  detail::t_interceptor_excluded |= bits;
}
InterceptorExcludeGuard::~InterceptorExcludeGuard() { detail::t_interceptor_excluded = previous_; }

}  // namespace kiln
