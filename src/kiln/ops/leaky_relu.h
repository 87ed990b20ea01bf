#pragma once
// The leaky_relu op (registered in unary.cpp, CPU kernel in unary_kernels.cpp, derivative in
// derivatives_elementwise.cpp). Not public: nn::functional::leaky_relu is the entry point.
#include "kiln/tensor/tensor.h"

namespace kiln::ops {

// x > 0 ? x : x * negative_slope, for a floating x.
Tensor leaky_relu_op(const Tensor& x, double negative_slope);

}  // namespace kiln::ops
