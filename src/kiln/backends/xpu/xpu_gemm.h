#pragma once
// The xpu matrix product as a building block for other kernels (convolution): strided,
// batched C = alpha * A B (+ beta * self), picking the tiled, matrix-vector or tensor-core
// kernel as xpu_matmul_kernels.cpp does for matmul.
#include <vector>

#include "kiln/core/scalar.h"
#include "kiln/tensor/tensor.h"

namespace kiln::xpu {

// One operand: t's data pointer is element (0, 0) of batch 0; strides in elements over the
// output's batch dims (0 where broadcast), then rows and columns.
struct GemmOperand {
  Tensor t;
  std::vector<int64_t> batch;
  int64_t rs = 0, cs = 0;
};

// out: the tensor whose data pointer is C's element (0, 0) of batch 0 (c.t is not read);
// its dtype is the product's.
void run_gemm(const Tensor& out, const GemmOperand& a, const GemmOperand& b, const GemmOperand* self,
              const GemmOperand& c, const Shape& batch, int64_t M, int64_t N, int64_t K,
              const Scalar& alpha, const Scalar& beta);

}  // namespace kiln::xpu
