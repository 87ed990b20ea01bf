#pragma once
// Linear algebra: matmul with every broadcasting case PyTorch accepts, and its relatives.
#include "kiln/tensor/tensor.h"

namespace kiln {

Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
// beta * self + alpha * (a @ b)
Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta = 1,
             const Scalar& alpha = 1);
Tensor baddbmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta = 1,
               const Scalar& alpha = 1);
Tensor outer(const Tensor& a, const Tensor& b);
Tensor dot(const Tensor& a, const Tensor& b);
// x @ weight.T + bias (bias may be undefined)
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// 8-bit integer matrix product with int32 results, as torch._int_mm: a int8 or uint8 [M, K],
// b int8 [K, N] -> int32 [M, N] (sums wrap in int32).
Tensor int_mm(const Tensor& a, const Tensor& b);

}  // namespace kiln
