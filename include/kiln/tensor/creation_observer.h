#pragma once
// A per-thread observer of tensors allocated by empty_tensor / empty_strided_tensor (every
// new storage a kiln op or factory makes). Graph capture (kiln/graph/capture.h) uses it to
// tell tensors the captured function made from tensors that existed before it ran.
namespace kiln {

class Tensor;
// The tensor itself, not its address: an observer that remembers tensors by address must
// hold them (a freed TensorImpl's address is soon another tensor's).
using TensorCreationObserver = void (*)(const Tensor& created);

// Sets this thread's observer (nullptr: none); returns the previous one.
TensorCreationObserver set_tensor_creation_observer(TensorCreationObserver observer);

}  // namespace kiln
