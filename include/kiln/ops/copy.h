#pragma once
// Copies and conversions between dtypes and devices.
#include "kiln/tensor/tensor.h"

namespace kiln {

// dst <- src (src broadcast to dst's shape; converted to dst's dtype; across devices).
Tensor& copy_(Tensor& dst, const Tensor& src, bool non_blocking = false);
Tensor to_dtype(const Tensor& t, DType dtype, bool copy = false);
Tensor to_device(const Tensor& t, Device device, bool non_blocking = false);
Tensor contiguous(const Tensor& t);
Tensor clone(const Tensor& t);

// t takes `shape` with contiguous strides from its storage offset, as PyTorch's resize_:
// the values in the kept bytes stay (reinterpreted), new elements are uninitialised, and a
// storage too small is replaced by a larger copy of it (only t moves to it; other views keep
// the old block). Refused for tensors that require grad and for NumPy / DLPack memory that
// would have to grow.
Tensor& resize_(Tensor& t, const Shape& shape);
Tensor& resize_as_(Tensor& t, const Tensor& other);

// Converts one value between element types with PyTorch's rules (float -> int truncates;
// NaN and out-of-range values give the type's minimum for 32/64-bit ints, as x86 does;
// narrower ints wrap through int64; anything -> bool is != 0).
double read_element_as_double(const void* p, DType t);

}  // namespace kiln
