#pragma once
// Uninitialised tensors: the allocation primitive under every factory and op output.
#include "kiln/tensor/tensor.h"

namespace kiln {

// Contiguous, uninitialised; device without index means the current device of its type.
Tensor empty_tensor(const Shape& shape, DType dtype, Device device);
Tensor empty_tensor(Shape&& shape, DType dtype, Device device);  // the shape moved in
// Uninitialised with given strides (storage sized for the largest reachable offset).
Tensor empty_strided_tensor(const Shape& shape, const Strides& strides, DType dtype,
                            Device device);
// A view of t's storage with new geometry; shares the version counter; records t as base.
Tensor make_view(const Tensor& t, Shape shape, Strides strides, int64_t offset);
// The same with another dtype (Tensor.view(dtype)): geometry in elements of `dtype`.
Tensor make_view(const Tensor& t, Shape shape, Strides strides, int64_t offset, DType dtype);

}  // namespace kiln
