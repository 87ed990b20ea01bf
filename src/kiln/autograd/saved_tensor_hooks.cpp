// The per-thread stack of saved-tensor hooks (kiln/autograd/saved_tensor_hooks.h).
#include "kiln/autograd/saved_tensor_hooks.h"

#include <vector>

#include "kiln/core/error.h"

namespace kiln::autograd {

namespace {
// Per thread, as torch: hooks installed by one thread never see another thread's tensors.
thread_local std::vector<std::shared_ptr<SavedTensorHooks>> t_hooks;
thread_local std::optional<std::string> t_disabled_message;
}  // namespace

void push_saved_tensor_hooks(std::shared_ptr<SavedTensorHooks> hooks) {
  KILN_CHECK(hooks != nullptr, Error, "push_saved_tensor_hooks: expected hooks, got null");
  if (t_disabled_message) KILN_THROW(Error, *t_disabled_message);
  t_hooks.push_back(std::move(hooks));
}

void pop_saved_tensor_hooks() {
  KILN_CHECK(!t_hooks.empty(), Error,
             "pop_saved_tensor_hooks: no saved-tensor hooks are installed on this thread");
  t_hooks.pop_back();
}

std::shared_ptr<SavedTensorHooks> current_saved_tensor_hooks() {
  return t_hooks.empty() ? nullptr : t_hooks.back();
}

std::optional<std::string> set_saved_tensor_hooks_disabled(std::optional<std::string> message) {
  if (message && !t_hooks.empty()) KILN_THROW(Error, *message);
  std::optional<std::string> previous = std::move(t_disabled_message);
  t_disabled_message = std::move(message);
  return previous;
}

}  // namespace kiln::autograd
