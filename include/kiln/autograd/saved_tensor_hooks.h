#pragma once
// Saved-tensor hooks (torch.autograd.graph.saved_tensors_hooks): while a pair of hooks is
// installed on this thread, every tensor the autograd graph saves for backward goes through
// the pack hook, and the graph keeps only what it returned; backward asks for the tensor
// back through the matching unpack. Offloading activations to the host or to disk,
// compressing them, or recomputing them are built on this.
#include <memory>
#include <optional>
#include <string>

#include "kiln/tensor/tensor.h"

namespace kiln::autograd {

// What a pack hook made of one saved tensor; unpack() gives a tensor with the same shape,
// dtype and device back (checked by the caller).
class PackedTensor {
 public:
  virtual ~PackedTensor() = default;
  virtual Tensor unpack() = 0;
};

// A pair of hooks: pack(t) is called once per saved tensor with grad mode off.
class SavedTensorHooks {
 public:
  virtual ~SavedTensorHooks() = default;
  virtual std::shared_ptr<PackedTensor> pack(const Tensor& t) = 0;
};

// The hooks form a per-thread stack; only the innermost pair applies.
// Error if hooks are disabled on this thread (the message given to disable).
void push_saved_tensor_hooks(std::shared_ptr<SavedTensorHooks> hooks);
void pop_saved_tensor_hooks();
// The innermost hooks of this thread, nullptr if none.
std::shared_ptr<SavedTensorHooks> current_saved_tensor_hooks();

// torch.autograd.graph.disable_saved_tensors_hooks: with a message set, installing hooks
// fails with that message (and so does disabling while hooks are installed). Returns the
// previous setting so that a guard can restore it.
std::optional<std::string> set_saved_tensor_hooks_disabled(std::optional<std::string> message);

// RAII: hooks installed for a scope.
class SavedTensorHooksGuard {
 public:
  explicit SavedTensorHooksGuard(std::shared_ptr<SavedTensorHooks> hooks) {
    push_saved_tensor_hooks(std::move(hooks));
  }
  ~SavedTensorHooksGuard() { pop_saved_tensor_hooks(); }
  SavedTensorHooksGuard(const SavedTensorHooksGuard&) = delete;
  SavedTensorHooksGuard& operator=(const SavedTensorHooksGuard&) = delete;
};

}  // namespace kiln::autograd
