#pragma once
// Type promotion as PyTorch: participants fall in three priority groups — tensors with
// dims, 0-d tensors, and wrapped numbers (Scalars and 0-d tensors made from them). A lower
// group changes the result only when it is of a higher category (bool < integral <
// floating), so `int32_tensor + 1000` stays int32, `uint8 + 1.5` is float32 (the default
// float) and `float16_tensor + float64_0d_tensor` stays float16.
#include "kiln/tensor/tensor.h"

namespace kiln {

class ResultTypeState {
 public:
  void add(const Tensor& t);
  void add(const Scalar& s);
  DType result() const;

 private:
  bool has_dim_ = false, has_zero_ = false, has_wrapped_ = false;
  DType dim_ = DType::Bool, zero_ = DType::Bool, wrapped_ = DType::Bool;
};

DType result_type(const Tensor& a, const Tensor& b);
DType result_type(const Tensor& a, const Scalar& b);
// Whether a value of type from may be written to an output of type to without a change of
// category (PyTorch's canCast: float->int and int->bool are refused).
bool can_cast(DType from, DType to);

}  // namespace kiln
