#pragma once
// Interceptors: layers that every op call passes through, in a fixed order
// (profiler -> tracer -> autocast -> autograd), before the kernel runs. Each sees the op
// generically and calls next() to continue down the chain. When no interceptor is enabled
// the dispatcher skips the chain entirely (one atomic load on the fast path).
#include <functional>
#include <vector>

#include "kiln/dispatch/op_call.h"

namespace kiln {

enum class InterceptorSlot : int { Profiler = 0, Tracer = 1, Autocast = 2, Autograd = 3 };
inline constexpr int kNumInterceptorSlots = 4;

class Interceptor {
 public:
  virtual ~Interceptor() = default;
  // Returns the outputs of the call; must call next(call) to run the rest of the chain
  // (or produce the outputs some other way).
  using Next = std::function<std::vector<Tensor>(OpCall&)>;
  virtual std::vector<Tensor> intercept(OpCall& call, const Next& next) = 0;
};

// Installs (or with nullptr removes) the interceptor of a slot; process-wide.
void set_interceptor(InterceptorSlot slot, Interceptor* interceptor);
Interceptor* get_interceptor(InterceptorSlot slot);

// Temporarily removes the interceptors of the given slot and below on this thread, so an
// interceptor can call ops without re-entering itself (as PyTorch's dispatch key guards).
class InterceptorExcludeGuard {
 public:
  explicit InterceptorExcludeGuard(InterceptorSlot from_slot);
  ~InterceptorExcludeGuard();
  InterceptorExcludeGuard(const InterceptorExcludeGuard&) = delete;
  InterceptorExcludeGuard& operator=(const InterceptorExcludeGuard&) = delete;

 private:
  unsigned previous_;
};

}  // namespace kiln
