#pragma once
// A hyperparameter as a 0-d operand for the in-place updates of optimizer state.
//
// The in-place ops taking a Scalar (mul_(t, Scalar), add_(t, Scalar), ...) currently wrap the
// number at the default float dtype, which rounds e.g. beta2 = 0.999 to float32 even for a
// float64 tensor. A 0-d tensor of the tensor's own dtype gives PyTorch's arithmetic (the
// number in the tensor's precision) for float32 and float64 states.
#include "kiln/ops/factory.h"

namespace kiln::optim::detail {

inline Tensor operand(const Tensor& like, double v) {
  DType t = like.dtype() == DType::F64 ? DType::F64 : DType::F32;
  return scalar_tensor(v, TensorOptions(t, like.device()));
}

}  // namespace kiln::optim::detail
