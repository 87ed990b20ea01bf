#pragma once
// Tensors in shared host memory, for several processes working on the same values
// (torch's Tensor.share_memory_ and its multiprocessing reductions).
#include <cstddef>

#include "kiln/tensor/tensor.h"

namespace kiln {

// Moves t's storage, and so every view of it, into shared host memory (values kept). A no-op
// when it is already there with a descriptor and for tensors on other devices than the CPU;
// a storage received from another process (no descriptor) is copied into one of its own.
void share_memory(const Tensor& t);

// A new contiguous CPU tensor allocated in shared host memory (zeroed).
Tensor empty_shared(const Shape& shape, DType dtype);

// A tensor over a memory file that another process shared (shared_fd of its storage):
// nbytes of storage, viewed at (offset, shape, strides) in elements of dtype. The file is
// mapped, not copied; fd stays the caller's. Error if the geometry reaches past nbytes.
Tensor tensor_from_shared_memory(int fd, size_t nbytes, int64_t offset, const Shape& shape,
                                 const Strides& strides, DType dtype);

}  // namespace kiln
